/*
 * The row type of the GPUPORT_* configuration: one row per variable, with
 * its default, how its text is parsed and checked, and its one-line doc.
 * The core's rows are in config.c; each transport declares its own in its
 * ops table (transport.h), with offsets into a settings structure of its
 * own, and the core parses them with its rows (config.h). Types only: the
 * parser is the core's.
 */
#ifndef GPUPORT_CONFIG_VAR_H
#define GPUPORT_CONFIG_VAR_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    GPUPORT_CFG_UINT,   /* decimal or 0x hex, with optional k/m/g (binary) suffix */
    GPUPORT_CFG_POW2,   /* UINT that must be a power of two */
    GPUPORT_CFG_ENUM,   /* one of a list of words */
    GPUPORT_CFG_HEX64,  /* 64-bit hex identifier */
    GPUPORT_CFG_CPULIST, /* cpu list ("0-3,8") kept as text; "" is empty */
    GPUPORT_CFG_AUTO_UINT, /* "auto" (stored as -1 in an int) or a decimal min..max */
    GPUPORT_CFG_WORDSET, /* words of a list ("init,proxy" or "^tcp"), a uint32_t of bits by
                          * word; "" is every word */
    GPUPORT_CFG_PATH,    /* a file name kept as text, its %h, %p and %% checked (log.h) */
    GPUPORT_CFG_CUSTOM   /* a syntax of the row's owner, parsed by its hooks (var->custom) */
} gpuport_cfg_type_t;

struct gpuport_config_var;

/* The hooks of a CUSTOM row, for a syntax only its owner reads (ib's device
 * list, tcp's interface list). The core checks the length (at most
 * var->max characters) first, and hands parse a zeroed scratch field that it
 * copies into place only on success, so a bad value leaves the
 * configuration untouched. */
typedef struct gpuport_cfg_custom {
    /* 0, or -1 with what is wrong in problem (the core's message adds the
     * variable, the value and describe's text) */
    int (*parse)(const char *value, void *field, char *problem, size_t len);
    /* the accepted values ("device[:port] names ..., or empty") */
    void (*describe)(const struct gpuport_config_var *var, char *buf, size_t len);
    /* a parsed field as text, in the one spelling parse accepts for it */
    void (*format)(const void *field, char *buf, size_t len);
} gpuport_cfg_custom_t;

/* The largest field a CUSTOM row may have (the core's scratch copy). */
#define GPUPORT_CFG_CUSTOM_MAX 12288

typedef struct gpuport_config_var {
    const char *name;
    const char *default_value;
    gpuport_cfg_type_t type;
    size_t offset;         /* field in gpuport_config_t, or in its transport's settings */
    size_t field_size;     /* 4 or 8 bytes (enums are int); text and CUSTOM: the field's */
    uint64_t min, max;     /* UINT, POW2 and AUTO_UINT; WORDSET, CUSTOM: max characters */
    const char *const *words; /* ENUM, WORDSET: NULL-terminated, value = index (WORDSET: bit) */
    const char *doc;       /* one line */
    const gpuport_cfg_custom_t *custom; /* CUSTOM only */
} gpuport_config_var_t;

/* A transport's rows (ops->settings): offsets into its settings structure
 * of `size` bytes. Compiled into every build, the transport's or not, so
 * its variables are known (and documented) wherever gpuport is. */
typedef struct gpuport_settings_table {
    const gpuport_config_var_t *rows;
    int nrows;
    size_t size;
} gpuport_settings_table_t;

/* offset and field_size of field f of struct type T, for a row */
#define GPUPORT_CFG_FIELD(T, f) offsetof(T, f), sizeof(((T *)0)->f)

#endif
