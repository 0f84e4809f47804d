/*
 * Configuration is the library's user interface on a cluster: a value that is
 * misread, silently replaced by a default, or rejected with a vague message
 * costs a job. Every row of the table is driven through gpuport_config_load
 * from the environment: defaults, accepted spellings, rejected values (config
 * untouched, message naming variable, value and what is accepted), several
 * errors at once, typo warnings, and the table's own consistency.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "testenv.h"
#include "config.h"
#include "transport/transport.h"
#include "transport/cuda_ipc/cipc_settings.h"
#include "transport/ib/ib_settings.h"
#include "transport/tcp/tcp_settings.h"
#include "fifo.h"
#include "log.h"

extern char **environ;

#define SENTINEL 0xa5

static gpuport_config_t defaults;

/* ---- helpers ---- */

static void clean_env(void)
{
    testenv_clear_gpuport();
    for (char **e = environ; e && *e; e++)
        CHECK(strncmp(*e, "GPUPORT_", 8) != 0);
}

/* kept as text */
static int is_text(const gpuport_config_var_t *var)
{
    return var->type == GPUPORT_CFG_CPULIST || var->type == GPUPORT_CFG_PATH;
}

/* parsed into a structure by its owner's hooks (ib's and tcp's lists) */
static int is_list(const gpuport_config_var_t *var)
{
    return var->type == GPUPORT_CFG_CUSTOM;
}

/* where the row's value is in c: a core field or in a transport's settings */
static const char *field_of(const gpuport_config_t *c, const gpuport_config_var_t *var)
{
    const char *field = gpuport_config_field((gpuport_config_t *)c, var);
    CHECK_MSG(field, "%s: no field", var->name);
    return field;
}

static const gpuport_config_var_t *row_named(const char *name)
{
    for (size_t i = 0; i < gpuport_config_nvars(); i++)
        if (strcmp(gpuport_config_var(i)->name, name) == 0)
            return gpuport_config_var(i);
    CHECK_MSG(0, "no row %s", name);
    return NULL;
}

static const ib_settings_t *ib_of(const gpuport_config_t *c)
{
    return gpuport_config_tl_settings(c, GPUPORT_TL_KIND_IB);
}

static const tcp_settings_t *tcp_of(const gpuport_config_t *c)
{
    return gpuport_config_tl_settings(c, GPUPORT_TL_KIND_TCP);
}

static const cipc_settings_t *cipc_of(const gpuport_config_t *c)
{
    return gpuport_config_tl_settings(c, GPUPORT_TL_KIND_CUDA_IPC);
}

/* numeric rows only; field_same compares any row */
static uint64_t field_get(const gpuport_config_t *c, const gpuport_config_var_t *var)
{
    const char *field = field_of(c, var);
    CHECK(!is_text(var) && !is_list(var));
    if (var->field_size == sizeof(uint64_t)) {
        uint64_t v;
        memcpy(&v, field, sizeof(v));
        return v;
    }
    uint32_t v32;
    memcpy(&v32, field, sizeof(v32));
    return v32;
}

static int field_same(const gpuport_config_t *a, const gpuport_config_t *b,
                      const gpuport_config_var_t *var)
{
    if (is_text(var))
        return strcmp(field_of(a, var), field_of(b, var)) == 0;
    if (is_list(var)) /* the parser zeroes the whole structure first */
        return memcmp(field_of(a, var), field_of(b, var), var->field_size) == 0;
    return field_get(a, var) == field_get(b, var);
}

/* What a text or list row holds, as text: a list written back by the
 * configuration's formatter, which must give the value as it was set. */
static void stored_text(const gpuport_config_t *c, const gpuport_config_var_t *var, char *buf,
                        size_t len)
{
    const char *field = field_of(c, var);

    if (is_list(var))
        var->custom->format(field, buf, len);
    else
        snprintf(buf, len, "%s", field);
}

/* Loads with name=value as the only GPUPORT_ variable; the config starts as
 * a sentinel pattern so that a write on failure shows. */
static gpuport_status_t load_one(const char *name, const char *value, gpuport_config_t *c,
                                 const char **log_p)
{
    gpuport_status_t status;

    memset(c, SENTINEL, sizeof(*c));
    CHECK(setenv(name, value, 1) == 0);
    capture_begin();
    status = gpuport_config_load(c);
    *log_p = capture_end();
    unsetenv(name);
    return status;
}

static int is_pow2(uint64_t v)
{
    return v && (v & (v - 1)) == 0;
}

/* ---- the table itself ---- */

static void test_table(void)
{
    static gpuport_config_t c;

    CHECK(gpuport_config_nvars() > 0);
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *v = gpuport_config_var(i);

        CHECK(v->name && strncmp(v->name, "GPUPORT_", 8) == 0 && strlen(v->name) > 8);
        CHECK_MSG(strncmp(v->name, "GPUPORT_TEST_", 13) != 0, "%s is reserved for tests", v->name);
        for (size_t j = 0; j < i; j++)
            CHECK_MSG(strcmp(v->name, gpuport_config_var(j)->name) != 0, "%s twice", v->name);
        CHECK_MSG(v->doc && v->doc[0] && !strchr(v->doc, '\n'), "%s: doc", v->name);
        CHECK_MSG(v->field_size == 4 || v->field_size == 8 ||
                      (is_text(v) && v->field_size >= 64) ||
                      (strcmp(v->name, "GPUPORT_IB_HCA") == 0 &&
                       v->field_size == sizeof(ib_hca_list_t)) ||
                      (strcmp(v->name, "GPUPORT_SOCKET_IFNAME") == 0 &&
                       v->field_size == sizeof(tcp_if_list_t)),
                  "%s: field size %zu", v->name, v->field_size);
        CHECK(field_of(&c, v) + v->field_size <= (const char *)&c + sizeof(c));
        for (size_t j = 0; j < i; j++) {
            const gpuport_config_var_t *w = gpuport_config_var(j);
            CHECK_MSG(field_of(&c, v) + v->field_size <= field_of(&c, w) ||
                          field_of(&c, w) + w->field_size <= field_of(&c, v),
                      "%s and %s share a field", v->name, w->name);
        }
        switch (v->type) {
        case GPUPORT_CFG_POW2:
            CHECK(is_pow2(v->min) && is_pow2(v->max));
            /* fall through */
        case GPUPORT_CFG_UINT:
            CHECK(v->min <= v->max);
            CHECK(v->field_size == 8 || v->max <= UINT32_MAX);
            break;
        case GPUPORT_CFG_ENUM:
            CHECK(v->words && v->words[0] && v->field_size == sizeof(int));
            for (size_t k = 0; v->words[k]; k++)
                CHECK(v->words[k][0] && !strchr(v->words[k], '|'));
            break;
        case GPUPORT_CFG_HEX64: CHECK(v->field_size == 8); break;
        case GPUPORT_CFG_AUTO_UINT:
            CHECK(v->min <= v->max && v->max <= INT32_MAX && v->field_size == sizeof(int));
            break;
        case GPUPORT_CFG_CPULIST: CHECK(strlen(v->default_value) < v->field_size); break;
        case GPUPORT_CFG_CUSTOM:
            /* a list of max characters has no more entries than the structure holds */
            CHECK(v->custom && v->custom->parse && v->custom->describe && v->custom->format &&
                  v->field_size <= GPUPORT_CFG_CUSTOM_MAX && strlen(v->default_value) <= v->max);
            CHECK((v->max + 1) / 2 <= (strcmp(v->name, "GPUPORT_IB_HCA") == 0 ? IB_HCA_MAX
                                                                              : TCP_IF_MAX));
            break;
        case GPUPORT_CFG_WORDSET: {
            size_t k = 0;
            CHECK(v->words && v->words[0] && v->field_size == sizeof(uint32_t) &&
                  strlen(v->default_value) <= v->max);
            while (v->words[k]) {
                CHECK(v->words[k][0] && !strpbrk(v->words[k], ",^|"));
                k++;
            }
            CHECK_MSG(k <= 32, "%s: %zu words for 32 bits", v->name, k);
            break;
        }
        case GPUPORT_CFG_PATH: CHECK(strlen(v->default_value) < v->field_size); break;
        default: CHECK_MSG(0, "%s: unknown type %d", v->name, (int)v->type);
        }
        memset(&c, 0, sizeof(c));
        CHECK_MSG(gpuport_config_parse_var(v, v->default_value, &c) == GPUPORT_OK,
                  "%s: default \"%s\" does not parse", v->name, v->default_value);
    }
}

/* The accepted-values text names what it promises. */
static void test_describe(void)
{
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *v = gpuport_config_var(i);
        char text[256], num[32];

        gpuport_config_describe(v, text, sizeof(text));
        CHECK(text[0]);
        if (v->type == GPUPORT_CFG_UINT || v->type == GPUPORT_CFG_POW2) {
            snprintf(num, sizeof(num), "%llu", (unsigned long long)v->min);
            CHECK_MSG(strstr(text, num), "%s: \"%s\" lacks the minimum", v->name, text);
            snprintf(num, sizeof(num), "%llu", (unsigned long long)v->max);
            CHECK_MSG(strstr(text, num), "%s: \"%s\" lacks the maximum", v->name, text);
            CHECK(v->type != GPUPORT_CFG_POW2 || strstr(text, "power of two"));
        } else if (v->type == GPUPORT_CFG_ENUM) {
            for (size_t k = 0; v->words[k]; k++)
                CHECK_MSG(strstr(text, v->words[k]), "%s: \"%s\" lacks %s", v->name, text,
                          v->words[k]);
        } else if (v->type == GPUPORT_CFG_CPULIST) {
            CHECK_MSG(strstr(text, "cpu list") && strstr(text, "0-3,8"), "%s: \"%s\"", v->name,
                      text);
        } else if (v->type == GPUPORT_CFG_AUTO_UINT) {
            CHECK_MSG(strstr(text, "auto"), "%s: \"%s\" lacks auto", v->name, text);
            snprintf(num, sizeof(num), "%llu..%llu", (unsigned long long)v->min,
                     (unsigned long long)v->max);
            CHECK_MSG(strstr(text, num), "%s: \"%s\" lacks %s", v->name, text, num);
        } else if (strcmp(v->name, "GPUPORT_IB_HCA") == 0) {
            CHECK_MSG(strstr(text, "mlx5_0:1") && strstr(text, "empty"), "%s: \"%s\"", v->name,
                      text);
        } else if (strcmp(v->name, "GPUPORT_SOCKET_IFNAME") == 0) {
            CHECK_MSG(strstr(text, "eth0,ib") && strstr(text, "^docker") && strstr(text, "empty"),
                      "%s: \"%s\"", v->name, text);
        } else if (v->type == GPUPORT_CFG_WORDSET) {
            for (size_t k = 0; v->words[k]; k++)
                CHECK_MSG(strstr(text, v->words[k]), "%s: \"%s\" lacks %s", v->name, text,
                          v->words[k]);
            CHECK_MSG(strstr(text, "^") && strstr(text, "empty"), "%s: \"%s\"", v->name, text);
        } else if (v->type == GPUPORT_CFG_PATH) {
            CHECK_MSG(strstr(text, "%h") && strstr(text, "%p") && strstr(text, "stderr") &&
                          strstr(text, "1023"),
                      "%s: \"%s\"", v->name, text);
        } else {
            CHECK(strstr(text, "hexadecimal"));
        }
    }
}

static void test_defaults(void)
{
    gpuport_config_t c;
    const char *log;

    memset(&defaults, 0, sizeof(defaults));
    for (size_t i = 0; i < gpuport_config_nvars(); i++)
        CHECK_OK(gpuport_config_parse_var(gpuport_config_var(i),
                                          gpuport_config_var(i)->default_value, &defaults));
    memset(&c, SENTINEL, sizeof(c));
    capture_begin();
    CHECK_OK(gpuport_config_load(&c));
    log = capture_end();
    CHECK_MSG(log[0] == '\0', "a clean load logged: %s", log);
    for (size_t i = 0; i < gpuport_config_nvars(); i++)
        CHECK_MSG(field_same(&c, &defaults, gpuport_config_var(i)),
                  "%s: loaded value differs from default \"%s\"", gpuport_config_var(i)->name,
                  gpuport_config_var(i)->default_value);
    /* from here on, the whole loaded configuration: the rows' defaults and
     * where each transport's settings lie (tl_base), which only a load
     * writes */
    defaults = c;
    /* the documented defaults, spelled out */
    CHECK(c.log_level == GPUPORT_LOG_WARN && c.log_level == 2);
    /* every subsystem: the core's and one per transport */
    CHECK(c.log_subsys ==
              (1ull << (GPUPORT_SUBSYS_TRANSPORTS + gpuport_transport_nkinds() - 1)) - 1 &&
          c.log_file[0] == '\0');
    CHECK(c.transport == GPUPORT_TRANSPORT_AUTO && c.transport == 0);
    CHECK(c.fifo_size == 1024);
    CHECK(c.max_channels == 1024);
    CHECK(c.timeout_ms == 60000);
    CHECK(field_get(&c, row_named("GPUPORT_SHM_ASYNC_MIN")) == 256 * 1024);
    CHECK(c.proxy_idle_us == 10000);
    CHECK(c.proxy_sleep_max_us == 500);
    CHECK(c.proxy_idle_cpu == 4);
    CHECK(c.proxy_sleep_host_max_us == 500);
    CHECK(c.proxy_sleep_scale == 1000);
    CHECK(c.host_id == 0);
    CHECK(c.gpu == GPUPORT_GPU_AUTO);
    CHECK(c.bind == 1);
    CHECK(c.proxy_cpus[0] == '\0' && c.flusher_cpus[0] == '\0');
    CHECK(ib_of(&c)->gid_index == -1 && ib_of(&c)->hca.n == 0);
    CHECK(tcp_of(&c)->ifname.n == 0 && !tcp_of(&c)->ifname.exclude);
    CHECK(tcp_of(&c)->timeout_ms == 10000 && tcp_of(&c)->queue == 4096);
    /* cuda_ipc's relay of cudaMalloc sources on, 4 MiB of staging a channel */
    CHECK(cipc_of(&c)->relay == 1 && cipc_of(&c)->relay_bytes == (4u << 20));

    /* every variable set to its default: same result, no warning */
    for (size_t i = 0; i < gpuport_config_nvars(); i++)
        CHECK(setenv(gpuport_config_var(i)->name, gpuport_config_var(i)->default_value, 1) == 0);
    memset(&c, SENTINEL, sizeof(c));
    capture_begin();
    CHECK_OK(gpuport_config_load(&c));
    log = capture_end();
    CHECK_MSG(log[0] == '\0', "known variables logged: %s", log);
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        CHECK(field_same(&c, &defaults, gpuport_config_var(i)));
        unsetenv(gpuport_config_var(i)->name);
    }
}

/* ---- accepted values ---- */

/* value is accepted; nothing else changes; nothing is logged */
static void load_accepted(const gpuport_config_var_t *var, const char *value, gpuport_config_t *c)
{
    const char *log;
    gpuport_status_t status = load_one(var->name, value, c, &log);

    CHECK_MSG(status == GPUPORT_OK, "%s=\"%s\" rejected: %s", var->name, value, log);
    CHECK_MSG(log[0] == '\0', "%s=\"%s\" logged: %s", var->name, value, log);
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *o = gpuport_config_var(i);
        if (o != var)
            CHECK_MSG(field_same(c, &defaults, o), "%s=\"%s\" changed %s", var->name, value,
                      o->name);
    }
}

/* ... and stored as the number want */
static void expect_accepted(const gpuport_config_var_t *var, const char *value, uint64_t want)
{
    gpuport_config_t c;

    load_accepted(var, value, &c);
    CHECK_MSG(field_get(&c, var) == want, "%s=\"%s\" stored %llu, expected %llu", var->name, value,
              (unsigned long long)field_get(&c, var), (unsigned long long)want);
}

/* value is rejected by load and by parse_var, the config is untouched, and
 * the one message names the variable, the value and what is accepted */
static void expect_rejected(const gpuport_config_var_t *var, const char *value)
{
    gpuport_config_t c, untouched;
    char accepted[256], quoted[256];
    const char *log;
    gpuport_status_t status = load_one(var->name, value, &c, &log);

    memset(&untouched, SENTINEL, sizeof(untouched));
    CHECK_MSG(status == GPUPORT_ERR_INVALID_CONFIG, "%s=\"%s\" gave %s", var->name, value,
              gpuport_status_string(status));
    CHECK_MSG(memcmp(&c, &untouched, sizeof(c)) == 0, "%s=\"%s\": config written on failure",
              var->name, value);
    gpuport_config_describe(var, accepted, sizeof(accepted));
    snprintf(quoted, sizeof(quoted), "%s=\"%s\"", var->name, value);
    CHECK_MSG(count_of(log, "ERROR") == 1, "%s=\"%s\": expected one error, got: %s", var->name,
              value, log);
    CHECK_MSG(strstr(log, quoted), "%s=\"%s\": message lacks the variable and value: %s", var->name,
              value, log);
    CHECK_MSG(strstr(log, accepted), "%s=\"%s\": message lacks \"%s\": %s", var->name, value,
              accepted, log);

    c = defaults;
    capture_begin();
    status = gpuport_config_parse_var(var, value, &c);
    capture_end();
    CHECK(status == GPUPORT_ERR_INVALID_CONFIG);
    CHECK(memcmp(&c, &defaults, sizeof(c)) == 0);
}

typedef struct {
    const char *text;
    uint64_t value;
} spelling_t;

/* Numbers whose value is known; each row accepts those in its range. */
static const spelling_t numbers[] = {
    {"0", 0},         {"1", 1},           {"2", 2},
    {"4", 4},         {"64", 64},         {"0x40", 64},
    {"0X40", 64},     {"1k", 1024},       {"1K", 1024},
    {"4k", 4096},     {"0x10k", 16384},   {"2m", 2u << 20},
    {"1M", 1u << 20}, {"1g", 1u << 30},   {"1000", 1000},
    {"1024", 1024},   {"100000", 100000}, {"86400000", 86400000},
};

/* "17179869184g" is 2^64 */
static const char *const bad_numbers[] = {
    "", "abc", "-1", "12x", "1.5", "99999999999999999999", "20000000000000g", "17179869184g",
    "k", "1kk", "0x", "1 2", "+5", "1e3", "64 k", "0x0x10", "0X0X10"};

static void test_number_row(const gpuport_config_var_t *var)
{
    char buf[32];
    int accepted = 0;

    for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
        uint64_t v = numbers[i].value;
        if (v >= var->min && v <= var->max && (var->type != GPUPORT_CFG_POW2 || is_pow2(v))) {
            expect_accepted(var, numbers[i].text, v);
            accepted++;
        } else {
            expect_rejected(var, numbers[i].text);
        }
    }
    CHECK_MSG(accepted >= 3, "%s: only %d sample values in range", var->name, accepted);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->min);
    expect_accepted(var, buf, var->min);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->max);
    expect_accepted(var, buf, var->max);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->max + 1);
    expect_rejected(var, buf);
    if (var->min > 0) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->min - 1);
        expect_rejected(var, buf);
    }
    if (var->type == GPUPORT_CFG_POW2) {
        /* powers of two just outside the range, and a non-power inside it */
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->max * 2);
        expect_rejected(var, buf);
        if (var->min > 1) {
            snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->min / 2);
            expect_rejected(var, buf);
        }
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->min + var->min / 2 + 1);
        expect_rejected(var, buf);
    }
    for (size_t i = 0; i < sizeof(bad_numbers) / sizeof(bad_numbers[0]); i++)
        expect_rejected(var, bad_numbers[i]);
}

static void test_enum_row(const gpuport_config_var_t *var)
{
    static const char *const bad[] = {"", "abc", "-1", "12x", "1.5", "shmm", "0", "1"};
    char buf[64];

    for (size_t k = 0; var->words[k]; k++) {
        size_t len = strlen(var->words[k]);
        CHECK(len < sizeof(buf) - 2);
        expect_accepted(var, var->words[k], k);
        for (size_t j = 0; j <= len; j++)
            buf[j] = (char)(var->words[k][j] >= 'a' && var->words[k][j] <= 'z'
                                ? var->words[k][j] - 'a' + 'A'
                                : var->words[k][j]);
        expect_accepted(var, buf, k);
        buf[0] = var->words[k][0]; /* mixed case */
        expect_accepted(var, buf, k);
        /* a word with one letter too many or too few is not the word */
        snprintf(buf, sizeof(buf), "%sx", var->words[k]);
        expect_rejected(var, buf);
        snprintf(buf, sizeof(buf), "%.*s", (int)len - 1, var->words[k]);
        expect_rejected(var, buf);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t k = 0;
        while (var->words[k] && strcasecmp(var->words[k], bad[i]) != 0)
            k++;
        if (!var->words[k]) /* "0" and "1" are GPUPORT_BIND's words */
            expect_rejected(var, bad[i]);
    }
}

static void test_hex_row(const gpuport_config_var_t *var)
{
    static const spelling_t good[] = {
        {"0", 0},
        {"1", 1},
        {"0x1", 1},
        {"0X1F", 31},
        {"abc", 0xabc},
        {"DeadBeef", 0xdeadbeefull},
        {"0123456789abcdef", 0x0123456789abcdefull},
        {"ffffffffffffffff", UINT64_MAX},
        {"0xFFFFFFFFFFFFFFFF", UINT64_MAX},
    };
    static const char *const bad[] = {
        "", "xyz", "-1", "12x", "1.5", "0x", "g", "+1", " 1", "1 ", "12345678901234567",
        "0x12345678901234567", "99999999999999999999"};

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        expect_accepted(var, good[i].text, good[i].value);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_rejected(var, bad[i]);
}

/* A text or list row: each good value stored as written (a list: parsed,
 * and written back the same), each bad one rejected, and a valid list (unit
 * repeated, e.g. "0,") one character too long rejected. For a list, the
 * longest valid one is accepted whole. */
static void test_text_row(const gpuport_config_var_t *var, const char *const *good, size_t ngood,
                          const char *const *bad, size_t nbad, const char *unit)
{
    size_t limit = is_list(var) ? var->max + 1 : var->field_size; /* characters too many */
    char big[512], text[512];
    gpuport_config_t c;

    for (size_t i = 0; i < ngood; i++) {
        load_accepted(var, good[i], &c);
        stored_text(&c, var, text, sizeof(text));
        CHECK_MSG(strcmp(text, good[i]) == 0, "%s=\"%s\" stored \"%s\"", var->name, good[i],
                  text);
    }
    for (size_t i = 0; i < nbad; i++)
        expect_rejected(var, bad[i]);
    /* valid syntax, but longer than allowed */
    CHECK(limit < sizeof(big));
    memset(big, 0, sizeof(big));
    for (size_t n = 0; n + 2 < limit; n += 2)
        memcpy(big + n, unit, 2);
    big[strlen(big)] = unit[0];
    big[strlen(big)] = unit[0];
    CHECK(strlen(big) == limit);
    expect_rejected(var, big);
    if (is_list(var)) {
        /* "a,a,...,a": as many entries as the structure holds */
        big[limit - 1] = '\0';
        load_accepted(var, big, &c);
        stored_text(&c, var, text, sizeof(text));
        CHECK_MSG(strcmp(text, big) == 0, "%s: the longest list stored \"%s\"", var->name, text);
        CHECK(strcmp(var->name, "GPUPORT_IB_HCA") == 0 ? ib_of(&c)->hca.n == IB_HCA_MAX
                                                       : tcp_of(&c)->ifname.n == TCP_IF_MAX);
    }
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Stored as written: the placement reads entry r for local rank r. */
static void test_cpulist_row(const gpuport_config_var_t *var)
{
    static const char *const good[] = {"", "0", "7", "0-3", "0,8,16,24", "0-3,8,10-11", "24,16,8,0",
                                       "3,3", "0-0", "4095", "0-4095"};
    static const char *const bad[] = {"abc", "-1", "0-", "-3", "3-1", ",0", "0,", "0,,1", "0 1",
                                      " 0", "0 ", "1-2-3", "0x1", "1.5", "0;1", "0-4096",
                                      "99999999999", "0-3,2-1"};

    test_text_row(var, good, NELEM(good), bad, NELEM(bad), "0,");
}

/* "auto" is -1 in the int field; numbers are decimal indices */
static void test_auto_uint_row(const gpuport_config_var_t *var)
{
    static const char *const bad[] = {"", "abc", "-1", "12x", "1.5", "autox", "aut", "0x1",
                                      "1k", " 1", "1 ", "+1", "99999999999999999999"};
    char buf[32];
    gpuport_config_t c;

    expect_accepted(var, "auto", (uint32_t)-1);
    expect_accepted(var, "AUTO", (uint32_t)-1);
    load_accepted(var, "Auto", &c);
    CHECK(*(const int *)field_of(&c, var) == -1);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->min);
    expect_accepted(var, buf, var->min);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->max);
    expect_accepted(var, buf, var->max);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(var->min + var->max) / 2);
    expect_accepted(var, buf, (var->min + var->max) / 2);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->max + 1);
    expect_rejected(var, buf);
    if (var->min > 0) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)var->min - 1);
        expect_rejected(var, buf);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect_rejected(var, bad[i]);
}

#define NAME63 "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
#define LIST33 "d0,d1,d2,d3,d4,d5,d6,d7,d8,d9,d10,d11,d12,d13,d14,d15,d16,d17,d18,d19,d20," \
               "d21,d22,d23,d24,d25,d26,d27,d28,d29,d30,d31,d32"

/* device[:port] names, comma separated, parsed into entries. Until ib took
 * this structure it parsed the text again, differently: it took ports with
 * leading zeros, blanks or a sign (strtoul), refused here; it refused names
 * of 64 characters (no RDMA device has one), now refused here too; and it
 * refused lists of more than 32 entries, which the documented limit (255
 * characters) allows. */
static void test_hcalist_row(const gpuport_config_var_t *var)
{
    static const char *const good[] = {"", "mlx5_0", "mlx5_0:1", "mlx5_0:1,mlx5_1:1",
                                       "mlx5_0,mlx5_1:2", "rxe0", "bnxt_re0:255", "a.b-c:12",
                                       NAME63 ":1", LIST33};
    static const char *const bad[] = {"mlx5_0:", "mlx5_0:0", "mlx5_0:256", "mlx5_0:01",
                                      ":1", ",mlx5_0", "mlx5_0,", "mlx5_0,,mlx5_1",
                                      "mlx5_0 ", " mlx5_0", "mlx5 0", "mlx5_0:1:2",
                                      "mlx5_0:x", "mlx5/0", "mlx5_0;mlx5_1", "mlx5_0:1000",
                                      /* strtoul took these */
                                      "mlx5_0:001", "mlx5_0: 1", "mlx5_0:+1", "mlx5_0:\t1",
                                      "mlx5_0:-1", NAME63 "x", "a," NAME63 "x:1"};
    gpuport_config_t c;
    const char *log;

    test_text_row(var, good, NELEM(good), bad, NELEM(bad), "a,");
    load_accepted(var, "mlx5_0,mlx5_1:2,bnxt_re0:255", &c);
    CHECK(ib_of(&c)->hca.n == 3);
    CHECK(strcmp(ib_of(&c)->hca.entry[0].dev, "mlx5_0") == 0 && ib_of(&c)->hca.entry[0].port == 0);
    CHECK(strcmp(ib_of(&c)->hca.entry[1].dev, "mlx5_1") == 0 && ib_of(&c)->hca.entry[1].port == 2);
    CHECK(strcmp(ib_of(&c)->hca.entry[2].dev, "bnxt_re0") == 0 &&
          ib_of(&c)->hca.entry[2].port == 255);
    load_accepted(var, LIST33, &c);
    CHECK(ib_of(&c)->hca.n == 33 && strcmp(ib_of(&c)->hca.entry[32].dev, "d32") == 0);
    load_accepted(var, NAME63, &c);
    CHECK(ib_of(&c)->hca.n == 1 && strcmp(ib_of(&c)->hca.entry[0].dev, NAME63) == 0);
    CHECK_STATUS(load_one(var->name, NAME63 "x", &c, &log), GPUPORT_ERR_INVALID_CONFIG);
    CHECK_MSG(strstr(log, "a device name of 64 characters (at most 63)"), "log: %s", log);
}

/* interface name prefixes, ^ first to exclude, parsed into a list. tcp
 * matched the text again until it took this structure: it skipped empty
 * entries, took any character and a lone "^" (exclude nothing), all of
 * which this parser refuses. */
static void test_iflist_row(const gpuport_config_var_t *var)
{
    static const char *const good[] = {"", "eth0", "eth", "eth0,ib0", "^docker,lo", "^lo",
                                       "enp1s0f0", "ib0.8001", "bond0:1", "veth-a_b@x",
                                       "abcdefghijklmno"};
    static const char *const bad[] = {"^", ",eth0", "eth0,", "eth0,,ib0", "eth0 ", " eth0",
                                      "eth 0", "eth0;ib0", "eth0/1", "^^lo", "eth0,^lo",
                                      "abcdefghijklmnop", "eth0\t", "^,lo", "^lo,"};
    gpuport_config_t c;

    test_text_row(var, good, NELEM(good), bad, NELEM(bad), "a,");
    load_accepted(var, "^docker,lo", &c);
    CHECK(tcp_of(&c)->ifname.exclude && tcp_of(&c)->ifname.n == 2);
    CHECK(strcmp(tcp_of(&c)->ifname.prefix[0], "docker") == 0 &&
          strcmp(tcp_of(&c)->ifname.prefix[1], "lo") == 0);
    load_accepted(var, "eth0,abcdefghijklmno", &c);
    CHECK(!tcp_of(&c)->ifname.exclude && tcp_of(&c)->ifname.n == 2);
    CHECK(strcmp(tcp_of(&c)->ifname.prefix[1], "abcdefghijklmno") == 0);
}

/* Words of a list, stored as their bits: "" all of them, "^" first all but
 * those. GPUPORT_LOG_SUBSYS's words are the subsystems, each transport's
 * its GPUPORT_TRANSPORT word. */
static void test_wordset_row(const gpuport_config_var_t *var)
{
    static const char *const bad[] = {"^", ",init", "init,", "init,,proxy", " init", "init ",
                                      "nope", "init,nope", "^^init", "init,^proxy", "proxyx",
                                      "prox", "init;proxy", "init proxy", "^,init", "*"};
    uint32_t all = 0;
    char buf[512], upper[64];
    gpuport_config_t c;
    const char *log;
    size_t k;

    for (k = 0; var->words[k]; k++)
        all |= 1u << k;
    expect_accepted(var, "", all);
    for (k = 0; var->words[k]; k++) {
        expect_accepted(var, var->words[k], 1u << k);
        for (size_t j = 0; j <= strlen(var->words[k]); j++)
            upper[j] = (char)toupper((unsigned char)var->words[k][j]);
        expect_accepted(var, upper, 1u << k);
        snprintf(buf, sizeof(buf), "^%s", var->words[k]);
        expect_accepted(var, buf, all & ~(1u << k));
    }
    for (size_t i = 0; i < NELEM(bad); i++)
        expect_rejected(var, bad[i]);
    if (strcmp(var->name, "GPUPORT_LOG_SUBSYS") != 0)
        return;
    CHECK(k == (size_t)(GPUPORT_SUBSYS_TRANSPORTS + gpuport_transport_nkinds() - 1) &&
          k <= GPUPORT_LOG_NSUBSYS && var->words == gpuport_log_subsys_words);
    /* a transport's subsystem is named by its GPUPORT_TRANSPORT word */
    for (int t = 1; t < gpuport_transport_nkinds(); t++)
        CHECK_MSG(strcmp(var->words[GPUPORT_SUBSYS_TL(t)], gpuport_transport_words[t]) == 0,
                  "transport %s logs as \"%s\"", gpuport_transport_words[t],
                  var->words[GPUPORT_SUBSYS_TL(t)]);
    expect_accepted(var, "init,Channel,tcp",
                    (1u << GPUPORT_SUBSYS_INIT) | (1u << GPUPORT_SUBSYS_CHANNEL) |
                        (1u << GPUPORT_SUBSYS_TL(GPUPORT_TL_KIND_TCP)));
    expect_accepted(var, "^proxy,flusher",
                    all & ~((1u << GPUPORT_SUBSYS_PROXY) | (1u << GPUPORT_SUBSYS_FLUSHER)));
    expect_accepted(var, "proxy,proxy", 1u << GPUPORT_SUBSYS_PROXY);
    /* the message names what is wrong */
    CHECK_STATUS(load_one(var->name, "init,proxi", &c, &log), GPUPORT_ERR_INVALID_CONFIG);
    CHECK_MSG(strstr(log, "unknown \"proxi\"") && strstr(log, "GPUPORT_LOG_SUBSYS=\"init,proxi\""),
              "log: %s", log);
    /* the longest list taken, a longer one refused */
    snprintf(buf, sizeof(buf), "ib");
    while (strlen(buf) + 3 <= var->max)
        strcat(buf, ",ib");
    {
        static const char *const last[] = {"ib", "tcp", "init"};
        size_t len = strlen(buf), diff = var->max - len;
        CHECK(diff <= 2);
        snprintf(buf + len - 2, sizeof(buf) - (len - 2), "%s", last[diff]);
    }
    CHECK(strlen(buf) == var->max);
    load_accepted(var, buf, &c);
    strcat(buf, ",ib");
    expect_rejected(var, buf);
}

/* A file name kept as written; %h, %p and %% the only %-sequences. */
static void test_path_row(const gpuport_config_var_t *var)
{
    static const char *const good[] = {"", "stderr", "stdout", "/tmp/gp.log", "gp.%h.%p.log",
                                       "/tmp/%h/%p", "100%%", "%%h is not a host", "a b",
                                       "%p%p%h%h", "/tmp/gp-%p.log.d/rank"};
    static const char *const bad[] = {"%", "/tmp/a%", "/tmp/%x.log", "%H", "%P", "%d", "%%%",
                                      " /tmp/a", "/tmp/a ", "\t/tmp/a", "%s", "%n"};
    char big[2048];
    gpuport_config_t c;
    const char *log;

    for (size_t i = 0; i < NELEM(good); i++) {
        load_accepted(var, good[i], &c);
        CHECK_MSG(strcmp(field_of(&c, var), good[i]) == 0,
                  "%s=\"%s\" stored \"%s\"", var->name, good[i], field_of(&c, var));
    }
    for (size_t i = 0; i < NELEM(bad); i++)
        expect_rejected(var, bad[i]);
    CHECK(var->field_size < sizeof(big));
    memset(big, 'a', var->field_size - 1);
    big[var->field_size - 1] = '\0';
    load_accepted(var, big, &c);
    big[var->field_size - 1] = 'a';
    big[var->field_size] = '\0';
    expect_rejected(var, big);
    CHECK_STATUS(load_one(var->name, "/tmp/gp.%x", &c, &log), GPUPORT_ERR_INVALID_CONFIG);
    CHECK_MSG(strstr(log, "unknown \"%x\""), "log: %s", log);
}

static void test_rows(void)
{
    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *var = gpuport_config_var(i);
        switch (var->type) {
        case GPUPORT_CFG_UINT:
        case GPUPORT_CFG_POW2: test_number_row(var); break;
        case GPUPORT_CFG_ENUM: test_enum_row(var); break;
        case GPUPORT_CFG_HEX64: test_hex_row(var); break;
        case GPUPORT_CFG_CPULIST: test_cpulist_row(var); break;
        case GPUPORT_CFG_AUTO_UINT: test_auto_uint_row(var); break;
        case GPUPORT_CFG_CUSTOM:
            if (strcmp(var->name, "GPUPORT_IB_HCA") == 0)
                test_hcalist_row(var);
            else if (strcmp(var->name, "GPUPORT_SOCKET_IFNAME") == 0)
                test_iflist_row(var);
            else
                CHECK_MSG(0, "%s: no test for its syntax", var->name);
            break;
        case GPUPORT_CFG_WORDSET: test_wordset_row(var); break;
        case GPUPORT_CFG_PATH: test_path_row(var); break;
        }
    }
}

/* ---- several variables at once ---- */

static void test_many_bad(void)
{
    gpuport_config_t c, untouched;
    const char *log;

    memset(&untouched, SENTINEL, sizeof(untouched));
    memset(&c, SENTINEL, sizeof(c));
    setenv("GPUPORT_FIFO_SIZE", "1000", 1);
    setenv("GPUPORT_TRANSPORT", "shmm", 1);
    setenv("GPUPORT_TIMEOUT_MS", "5s", 1);
    setenv("GPUPORT_LOG_LEVEL", "info", 1); /* a good one among them */
    capture_begin();
    CHECK_STATUS(gpuport_config_load(&c), GPUPORT_ERR_INVALID_CONFIG);
    log = capture_end();
    unsetenv("GPUPORT_FIFO_SIZE");
    unsetenv("GPUPORT_TRANSPORT");
    unsetenv("GPUPORT_TIMEOUT_MS");
    unsetenv("GPUPORT_LOG_LEVEL");
    CHECK(memcmp(&c, &untouched, sizeof(c)) == 0);
    CHECK_MSG(strstr(log, "GPUPORT_FIFO_SIZE=\"1000\"") &&
                  strstr(log, "GPUPORT_TRANSPORT=\"shmm\"") &&
                  strstr(log, "GPUPORT_TIMEOUT_MS=\"5s\""),
              "not every bad variable reported: %s", log);
    CHECK_MSG(count_of(log, "ERROR") == 3 && !strstr(log, "GPUPORT_LOG_LEVEL"), "log: %s", log);
}

/* ---- variables that are not the library's ---- */

static void test_unknown(void)
{
    gpuport_config_t c;
    const char *log;

    CHECK_OK(load_one("GPUPORT_FIFO_SIZ", "8", &c, &log));
    CHECK(memcmp(&c, &defaults, sizeof(c)) == 0);
    CHECK_MSG(count_of(log, "\n") == 1 && strstr(log, "WARN") &&
                  strstr(log, "GPUPORT_FIFO_SIZ is not a gpuport variable") &&
                  strstr(log, "did you mean GPUPORT_FIFO_SIZE?"),
              "typo not warned about, or no name offered: \"%s\"", log);

    /* a swap of two letters and a missing one: the name meant is offered */
    CHECK_OK(load_one("GPUPORT_TIMOTU_MS", "8", &c, &log));
    CHECK_MSG(strstr(log, "did you mean GPUPORT_TIMEOUT_MS?"), "log: %s", log);
    /* nothing close: no guess */
    CHECK_OK(load_one("GPUPORT_SOMETHING_ELSE", "8", &c, &log));
    CHECK_MSG(strstr(log, "GPUPORT_SOMETHING_ELSE is not a gpuport variable") &&
                  !strstr(log, "did you mean"),
              "log: %s", log);

    CHECK_OK(load_one("GPUPORT_TEST_ANYTHING", "1", &c, &log));
    CHECK(memcmp(&c, &defaults, sizeof(c)) == 0);
    CHECK_MSG(log[0] == '\0', "GPUPORT_TEST_* warned: %s", log);

    /* a typo next to a bad value: both reported, load fails */
    setenv("GPUPORT_TRANSPROT", "shm", 1);
    CHECK_STATUS(load_one("GPUPORT_TRANSPORT", "tcpp", &c, &log), GPUPORT_ERR_INVALID_CONFIG);
    unsetenv("GPUPORT_TRANSPROT");
    CHECK_MSG(strstr(log, "GPUPORT_TRANSPROT is not") && strstr(log, "GPUPORT_TRANSPORT=\"tcpp\""),
              "log: %s", log);
}

/* ---- library bugs: kept last so that the checks above still run ---- */

static void test_known_bugs(void)
{
    gpuport_config_t c;
    const char *log;
    gpuport_status_t status;

    /* config.h: UINT is "decimal or 0x hex"; strtoull(base 0) reads a leading
     * 0 as octal, so "010" is 8 and "08" is rejected */
    status = load_one("GPUPORT_TIMEOUT_MS", "010", &c, &log);
    CHECK_MSG(status == GPUPORT_OK && c.timeout_ms == 10,
              "GPUPORT_TIMEOUT_MS=\"010\" gave %s, timeout_ms %llu (expected 10)",
              gpuport_status_string(status), (unsigned long long)c.timeout_ms);
    status = load_one("GPUPORT_TIMEOUT_MS", "08", &c, &log);
    CHECK_MSG(status == GPUPORT_OK && c.timeout_ms == 8,
              "GPUPORT_TIMEOUT_MS=\"08\" gave %s (expected 8): %s", gpuport_status_string(status),
              log);

    /* HEX64: the 0x prefix is stripped, then strtoull(base 16) accepts a
     * second one */
    status = load_one("GPUPORT_HOST_ID", "0x0x5", &c, &log);
    CHECK_MSG(status == GPUPORT_ERR_INVALID_CONFIG, "GPUPORT_HOST_ID=\"0x0x5\" accepted as 0x%llx",
              (unsigned long long)c.host_id);
}

/* The transport list (registry.c) is GPUPORT_TRANSPORT's words, and each
 * built transport's ops table carries its own word. */
static void test_transport_list(void)
{
    int built = 0;

    CHECK(strcmp(gpuport_transport_words[0], "auto") == 0);
    CHECK(gpuport_transport_ops(GPUPORT_TRANSPORT_AUTO) == NULL);
    for (int k = 1; k < gpuport_transport_nkinds(); k++) {
        const gpuport_transport_ops_t *t = gpuport_transport_ops(k);
        CHECK(gpuport_transport_words[k] != NULL);
        CHECK(strcmp(gpuport_transport_name(k), gpuport_transport_words[k]) == 0);
        if (t) {
            CHECK_MSG(strcmp(t->name, gpuport_transport_words[k]) == 0,
                      "kind %d is %s in the list and %s in its ops", k,
                      gpuport_transport_words[k], t->name);
            CHECK(gpuport_transport_missing(k) == NULL);
            CHECK(t->reachable && t->conn_open && t->conn_close && t->chan_connect &&
                  t->chan_disconnect && t->put && t->signal);
            built++;
        } else {
            CHECK_MSG(gpuport_transport_missing(k) != NULL, "kind %d has no reason", k);
        }
    }
    CHECK(gpuport_transport_words[gpuport_transport_nkinds()] == NULL);
    CHECK(built >= 2); /* shm and tcp are always built */
}

int main(void)
{
    clean_env();
    test_transport_list();
    gpuport_log_set_level(GPUPORT_LOG_WARN);
    test_table();
    test_describe();
    test_defaults();
    test_rows();
    test_many_bad();
    test_unknown();
    test_known_bugs();
    printf("config: all checks passed\n");
    return 0;
}
