/*
 * gpuport_info's parts, for its own files only: the report and the options
 * (gpuport_info.c), the views of the configuration table (info_config.c),
 * the memory kinds (info_memory.c),
 * and the writers that each output needs (info_format.c): JSON, shell
 * words, roff text.
 */
#ifndef GPUPORT_INFO_H
#define GPUPORT_INFO_H

#include <stdio.h>

/* The licence gpuport is distributed under (the LICENSE file). */
#define INFO_LICENCE "BSD-3-Clause"

/* -c and the form it takes. */
typedef enum {
    INFO_CONFIG_TABLE,    /* -c: aligned columns for people */
    INFO_CONFIG_MARKDOWN, /* -c --markdown: docs/GUIDE.md's table rows */
    INFO_CONFIG_ENV,      /* -c --env: GPUPORT_X=value lines for a shell */
    INFO_CONFIG_JSON,     /* -c --json: one JSON object */
    INFO_CONFIG_MAN       /* -c --man: the ENVIRONMENT section of gpuport(7) */
} info_config_view_t;

/* Prints the view on stdout; returns the exit status: 1 when a GPUPORT_*
 * value in the environment is invalid (each such error is logged once), else
 * 0. The markdown and man views describe the table only and read no
 * environment. */
int info_config_print(info_config_view_t view);

/* gpuport_info -m (info_memory.c): the memory kinds, as text or JSON (json
 * 1) on stdout; returns the exit status (1: no communicator could be made). */
int info_memory_print(int json);

/*
 * A JSON writer: one field or element per line, indented, commas placed by
 * the writer. key is NULL inside an array, a name inside an object. Nesting
 * is at most INFO_JSON_DEPTH deep (the tool's outputs need 4).
 */
#define INFO_JSON_DEPTH 8
typedef struct info_json {
    FILE *f;
    int depth;
    int count[INFO_JSON_DEPTH]; /* members written so far at each level */
    char close[INFO_JSON_DEPTH]; /* '}' or ']' */
} info_json_t;

void info_json_init(info_json_t *j, FILE *f);
void info_json_open(info_json_t *j, const char *key, char bracket); /* '{' or '[' */
void info_json_close(info_json_t *j);
void info_json_str(info_json_t *j, const char *key, const char *value); /* NULL: null */
void info_json_int(info_json_t *j, const char *key, long long value);
void info_json_bool(info_json_t *j, const char *key, int value);

/* s as one word a POSIX shell reads back as s: unquoted when it has only
 * characters no shell treats specially, else in single quotes. */
void info_shell_word(FILE *f, const char *s);

/* s as roff text: backslashes escaped; every hyphen as \- (the values in
 * it, cpu lists and ranges, must copy from the page as ASCII); a leading
 * '.' or '\'' made harmless. */
void info_roff_text(FILE *f, const char *s);

#endif
