/*
 * gpuport_info -c: the library's configuration table (the core's rows in
 * src/config.c, then each transport's, in its folder) in each of its
 * views: a table for people, docs/GUIDE.md's rows, shell assignments,
 * JSON, and the entries of gpuport(7)'s ENVIRONMENT section. The guide's
 * table and the man page are generated from here and checked against it by
 * make check (test/tools/gpuport_info.sh, test/tools/man_pages.sh).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gpuport/gpuport.h"
#include "info.h"
#include "log.h"

/* What one variable has in this environment. */
typedef struct var_state {
    const char *env;   /* the environment's text, NULL if unset */
    int valid;         /* env parses (or is unset) */
    const char *value; /* in effect: env if set and valid, else the default */
    char number[24];   /* a number's value in effect, in digits ("2k": 2048) */
} var_state_t;

/* The text of a valid value in effect (the environment's or the default):
 * a number as its digits (the value parse stored in `parsed`, so "2k"
 * reads 2048 and "0x10" 16), any other as written. */
static const char *in_effect(const gpuport_config_var_t *v, gpuport_config_t *parsed,
                             const char *text, char *buf, size_t len)
{
    const void *field = gpuport_config_field(parsed, v);
    uint64_t n;

    if (!field || (v->type != GPUPORT_CFG_UINT && v->type != GPUPORT_CFG_POW2 &&
                   v->type != GPUPORT_CFG_AUTO_UINT))
        return text;
    if (v->field_size == 8) {
        memcpy(&n, field, 8);
    } else {
        int32_t i;
        memcpy(&i, field, 4);
        if (v->type == GPUPORT_CFG_AUTO_UINT && i < 0)
            return text; /* "auto" */
        n = (uint32_t)i;
    }
    snprintf(buf, len, "%llu", (unsigned long long)n);
    return buf;
}

/* Reads every variable's state. The one gpuport_config_load reports each
 * invalid value and each unknown GPUPORT_* name once, as a communicator
 * would; the per-variable parses after it are silent, since they only
 * repeat its verdicts. Returns the number of invalid values. */
static int read_states(var_state_t *st)
{
    gpuport_config_t cfg, scratch;
    int bad = 0;

    (void)gpuport_config_load(&cfg);
    gpuport_log_set_level(GPUPORT_LOG_NONE);
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *v = gpuport_config_var(i);
        memset(&scratch, 0, sizeof(scratch));
        st[i].env = getenv(v->name);
        st[i].valid = !st[i].env || gpuport_config_parse_var(v, st[i].env, &scratch) == GPUPORT_OK;
        st[i].value = st[i].env && st[i].valid ? st[i].env : v->default_value;
        if (st[i].value != st[i].env) { /* the default, parsed for its digits */
            memset(&scratch, 0, sizeof(scratch));
            (void)gpuport_config_parse_var(v, st[i].value, &scratch);
        }
        st[i].value = in_effect(v, &scratch, st[i].value, st[i].number, sizeof(st[i].number));
        bad += !st[i].valid;
    }
    gpuport_log_set_level(GPUPORT_LOG_WARN);
    return bad;
}

static void print_table(const var_state_t *st)
{
    char accepted[256];

    printf("%-28s %-10s %-12s %s\n", "variable", "default", "here", "meaning");
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *v = gpuport_config_var(i);
        gpuport_config_describe(v, accepted, sizeof(accepted));
        printf("%-28s %-10s %-12s %s\n%-28s %-10s %-12s   accepts %s\n", v->name,
               v->default_value[0] ? v->default_value : "\"\"",
               st[i].env ? (st[i].valid ? st[i].value : "(invalid)") : "(default)", v->doc, "", "",
               "", accepted);
    }
}

static void print_markdown(void)
{
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *v = gpuport_config_var(i);
        printf("| `%s` | `%s` | %s |\n", v->name, v->default_value, v->doc);
    }
}

static void print_env(const var_state_t *st)
{
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        printf("%s=", gpuport_config_var(i)->name);
        info_shell_word(stdout, st[i].value);
        putchar('\n');
    }
}

static void print_json(const var_state_t *st)
{
    info_json_t j;
    char accepted[256];

    info_json_init(&j, stdout);
    info_json_open(&j, NULL, '{');
    info_json_str(&j, "gpuport", gpuport_version_string());
    info_json_open(&j, "variables", '[');
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *v = gpuport_config_var(i);
        gpuport_config_describe(v, accepted, sizeof(accepted));
        info_json_open(&j, NULL, '{');
        info_json_str(&j, "name", v->name);
        info_json_str(&j, "default", v->default_value);
        info_json_str(&j, "value", st[i].value);
        info_json_str(&j, "source", st[i].env && st[i].valid ? "environment" : "default");
        info_json_str(&j, "rejected", st[i].valid ? NULL : st[i].env);
        info_json_str(&j, "accepted", accepted);
        info_json_str(&j, "meaning", v->doc);
        info_json_close(&j);
    }
    info_json_close(&j);
    info_json_close(&j);
}

/* One .TP entry per variable, in the table's order. */
static void print_man(void)
{
    char accepted[256];

    printf(".\\\" generated by gpuport_info -c --man from the configuration table "
           "(src/config.c and the transports' settings)\n");
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *v = gpuport_config_var(i);
        gpuport_config_describe(v, accepted, sizeof(accepted));
        printf(".TP\n.B %s\n", v->name);
        info_roff_text(stdout, v->doc);
        printf(".\nDefault ");
        if (v->default_value[0]) {
            printf("\\fB");
            info_roff_text(stdout, v->default_value);
            printf("\\fP");
        } else {
            printf("empty");
        }
        printf("; accepts ");
        info_roff_text(stdout, accepted);
        printf(".\n");
    }
}

int info_config_print(info_config_view_t view)
{
    var_state_t *st;
    int bad;

    switch (view) {
    case INFO_CONFIG_MARKDOWN:
        print_markdown();
        return 0;
    case INFO_CONFIG_MAN:
        print_man();
        return 0;
    case INFO_CONFIG_TABLE:
    case INFO_CONFIG_ENV:
    case INFO_CONFIG_JSON:
        break;
    }
    st = calloc(gpuport_config_nvars(), sizeof(*st));
    if (!st) {
        fprintf(stderr, "gpuport_info: no memory for %zu variables\n", gpuport_config_nvars());
        return 1;
    }
    bad = read_states(st);
    if (view == INFO_CONFIG_TABLE)
        print_table(st);
    else if (view == INFO_CONFIG_ENV)
        print_env(st);
    else
        print_json(st);
    free(st);
    return bad ? 1 : 0;
}
