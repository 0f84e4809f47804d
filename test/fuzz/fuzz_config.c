/*
 * fuzz_config: gpuport_config_parse_var (src/config.c) on arbitrary values
 * for every row of the configuration (the core's and each transport's,
 * gpuport_config_var). Input: byte 0 picks the row (one
 * past the last: every row), byte 1 the size of gpuport_config_describe's
 * buffer; the rest is the value (NUL-terminated here; an embedded NUL ends
 * it). Invariants:
 *   - an error leaves the whole configuration untouched;
 *   - success writes only the row's field, and what it stores is within the
 *     row's rules: ENUM an index of the word given, UINT/POW2 the value of
 *     the text (checked by an independent parser) within min..max, a power of
 *     two for POW2; HEX64 at most 16 hex digits; CPULIST the text itself,
 *     NUL-terminated, a well-formed list; AUTO_UINT -1 for auto or a decimal
 *     min..max; the CUSTOM lists (GPUPORT_IB_HCA, GPUPORT_SOCKET_IFNAME)
 *     entries that are well-formed and that format back to exactly the text
 *     given (one spelling per list); WORDSET
 *     the bits of the words given (all for "", their complement after "^");
 *     PATH the text itself, every % followed by h, p or %;
 *   - describe writes a NUL-terminated text within its buffer.
 */
#include <ctype.h>
#include <strings.h>

#include "config.h"
#include "fuzz.h"
#include "topology.h"
#include "transport/ib/ib_settings.h"
#include "transport/tcp/tcp_settings.h"

#define FILL 0x5a

/* The UINT syntax as config.h states it: decimal or 0x hex, an optional
 * k/m/g (binary) suffix, blanks around; NULL-free and independent of
 * strtoull. 0 with *v on success. */
static int reference_uint(const char *s, uint64_t *v_p)
{
    unsigned __int128 v = 0;
    unsigned base = 10;
    int digits = 0;

    while (isspace((unsigned char)*s))
        s++;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    for (;; s++, digits++) {
        int c = tolower((unsigned char)*s), d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (base == 16 && c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else
            break;
        v = v * base + (unsigned)d;
        if (v > UINT64_MAX)
            return -1;
    }
    if (digits == 0)
        return -1;
    switch (tolower((unsigned char)*s)) {
    case 'k': v <<= 10; s++; break;
    case 'm': v <<= 20; s++; break;
    case 'g': v <<= 30; s++; break;
    default: break;
    }
    while (isspace((unsigned char)*s))
        s++;
    if (*s || v > UINT64_MAX)
        return -1;
    *v_p = (uint64_t)v;
    return 0;
}

static const char *field_of(const gpuport_config_var_t *var, const gpuport_config_t *cfg)
{
    return gpuport_config_field((gpuport_config_t *)cfg, var);
}

static uint64_t field_value(const gpuport_config_var_t *var, const gpuport_config_t *cfg)
{
    const char *f = field_of(var, cfg);
    uint32_t v32;
    uint64_t v64;

    if (var->field_size == sizeof(uint64_t)) {
        memcpy(&v64, f, sizeof(v64));
        return v64;
    }
    memcpy(&v32, f, sizeof(v32));
    return v32;
}

static int nul_within(const char *s, size_t n)
{
    return memchr(s, '\0', n) != NULL;
}

/* The WORDSET syntax: "" is every word; else [^]word[,word...], words in
 * any case. 0 with the mask on success. */
static int reference_wordset(const char *s, const char *const *words, uint64_t *mask_p)
{
    uint64_t all = 0, mask = 0;
    int exclude = *s == '^';
    size_t nw = 0;

    while (words[nw])
        all |= 1ull << nw++;
    if (!*s) {
        *mask_p = all;
        return 0;
    }
    s += exclude;
    for (;;) {
        const char *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s), i;
        for (i = 0; i < nw; i++)
            if (n && strlen(words[i]) == n && strncasecmp(words[i], s, n) == 0)
                break;
        if (i == nw)
            return -1;
        mask |= 1ull << i;
        if (!end)
            break;
        s = end + 1;
    }
    *mask_p = exclude ? all & ~mask : mask;
    return 0;
}

/* The CUSTOM rows: ib's device list and tcp's interface list, each entry
 * well-formed, and the list formatting back to the text given. */
static void check_list(const gpuport_config_var_t *var, const char *value, const char *field)
{
    char text[IB_HCA_TEXT_MAX + TCP_IF_TEXT_MAX + 2];

    if (strcmp(var->name, "GPUPORT_IB_HCA") == 0) {
        const ib_hca_list_t *l = (const ib_hca_list_t *)field;
        FUZZ_CHECK(l->n >= 0 && l->n <= IB_HCA_MAX, "%s: %d entries", var->name, l->n);
        for (int i = 0; i < l->n; i++) {
            const char *d = l->entry[i].dev;
            FUZZ_CHECK(nul_within(d, sizeof(l->entry[i].dev)) && d[0] &&
                           strspn(d, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789_-.") == strlen(d),
                       "%s: entry %d", var->name, i);
        }
        var->custom->format(l, text, sizeof(text));
        FUZZ_CHECK(strcmp(text, value) == 0, "%s: \"%s\" formats back as \"%s\"", var->name,
                   value, text);
    } else {
        const tcp_if_list_t *l = (const tcp_if_list_t *)field;
        FUZZ_CHECK(strcmp(var->name, "GPUPORT_SOCKET_IFNAME") == 0,
                   "%s: no checks for its syntax", var->name);
        FUZZ_CHECK(l->n >= 0 && l->n <= TCP_IF_MAX && (l->exclude == 0 || l->exclude == 1),
                   "%s: %d entries, exclude %d", var->name, l->n, l->exclude);
        FUZZ_CHECK(l->n > 0 || !l->exclude, "%s: \"%s\" excludes nothing", var->name, value);
        for (int i = 0; i < l->n; i++) {
            const char *p = l->prefix[i];
            FUZZ_CHECK(nul_within(p, sizeof(l->prefix[i])) && p[0] &&
                           strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789._-@:") == strlen(p),
                       "%s: entry %d", var->name, i);
        }
        var->custom->format(l, text, sizeof(text));
        FUZZ_CHECK(strcmp(text, value) == 0, "%s: \"%s\" formats back as \"%s\"", var->name,
                   value, text);
    }
}

static void check_stored(const gpuport_config_var_t *var, const char *value,
                         const gpuport_config_t *cfg)
{
    const char *field = field_of(var, cfg);
    uint64_t v = field_value(var, cfg), ref = 0;

    switch (var->type) {
    case GPUPORT_CFG_ENUM: {
        size_t n = 0;
        while (var->words[n])
            n++;
        FUZZ_CHECK(v < n && strcasecmp(var->words[v], value) == 0, "%s: \"%s\" stored as %llu",
                   var->name, value, (unsigned long long)v);
        break;
    }
    case GPUPORT_CFG_UINT:
    case GPUPORT_CFG_POW2:
        FUZZ_CHECK(reference_uint(value, &ref) == 0 && ref == v, "%s: \"%s\" stored as %llu "
                   "(the syntax gives %llu)", var->name, value, (unsigned long long)v,
                   (unsigned long long)ref);
        FUZZ_CHECK(v >= var->min && v <= var->max, "%s: %llu outside %llu..%llu", var->name,
                   (unsigned long long)v, (unsigned long long)var->min,
                   (unsigned long long)var->max);
        FUZZ_CHECK(var->type != GPUPORT_CFG_POW2 || (v && !(v & (v - 1))), "%s: %llu", var->name,
                   (unsigned long long)v);
        break;
    case GPUPORT_CFG_HEX64: {
        const char *s = value + (value[0] == '0' && (value[1] == 'x' || value[1] == 'X') ? 2 : 0);
        size_t n = strlen(s);
        FUZZ_CHECK(n >= 1 && n <= 16 && strspn(s, "0123456789abcdefABCDEF") == n &&
                       strtoull(s, NULL, 16) == v,
                   "%s: \"%s\" stored as %llx", var->name, value, (unsigned long long)v);
        break;
    }
    case GPUPORT_CFG_CPULIST: {
        static int cpus[GPUPORT_CPULIST_MAX];
        char why[128];
        int n;
        FUZZ_CHECK(nul_within(field, var->field_size) && strcmp(field, value) == 0,
                   "%s: \"%s\" stored as other text", var->name, value);
        FUZZ_CHECK(strspn(value, "0123456789,-") == strlen(value), "%s: \"%s\"", var->name,
                   value);
        n = gpuport_cpulist_parse(value, cpus, GPUPORT_CPULIST_MAX, why, sizeof(why));
        FUZZ_CHECK(n >= 0 && n <= GPUPORT_CPULIST_MAX, "%s: \"%s\" count %d", var->name, value, n);
        for (int i = 0; i < n; i++)
            FUZZ_CHECK(cpus[i] >= 0, "%s: \"%s\" cpu %d", var->name, value, cpus[i]);
        break;
    }
    case GPUPORT_CFG_AUTO_UINT: {
        int32_t i;
        memcpy(&i, field, sizeof(i));
        if (strcasecmp(value, "auto") == 0) {
            FUZZ_CHECK(i == -1, "%s: auto stored as %d", var->name, i);
            break;
        }
        FUZZ_CHECK(strspn(value, "0123456789") == strlen(value) &&
                       reference_uint(value, &ref) == 0 && ref == (uint64_t)(uint32_t)i &&
                       ref >= var->min && ref <= var->max,
                   "%s: \"%s\" stored as %d", var->name, value, i);
        break;
    }
    case GPUPORT_CFG_CUSTOM: check_list(var, value, field); break;
    case GPUPORT_CFG_WORDSET:
        FUZZ_CHECK(strlen(value) <= var->max && reference_wordset(value, var->words, &ref) == 0 &&
                       ref == v,
                   "%s: \"%s\" stored as 0x%llx", var->name, value, (unsigned long long)v);
        break;
    case GPUPORT_CFG_PATH:
        FUZZ_CHECK(nul_within(field, var->field_size) && strcmp(field, value) == 0,
                   "%s: \"%s\" stored as other text", var->name, value);
        for (const char *p = strchr(value, '%'); p; p = strchr(p + 2, '%'))
            FUZZ_CHECK(p[1] == 'h' || p[1] == 'p' || p[1] == '%', "%s: \"%s\" has %%%c",
                       var->name, value, p[1]);
        break;
    }
}

static void one(const gpuport_config_var_t *var, const char *value, size_t describe_len)
{
    static gpuport_config_t cfg, before;
    char *desc;
    gpuport_status_t st;

    memset(&cfg, FILL, sizeof(cfg));
    before = cfg;
    st = gpuport_config_parse_var(var, value, &cfg);
    FUZZ_CHECK(st == GPUPORT_OK || st == GPUPORT_ERR_INVALID_CONFIG, "%s: status %d", var->name,
               st);
    if (st != GPUPORT_OK) {
        FUZZ_CHECK(memcmp(&cfg, &before, sizeof(cfg)) == 0, "%s: rejected \"%s\" but wrote",
                   var->name, value);
    } else {
        const char *a = (const char *)&cfg, *b = (const char *)&before;
        size_t start = (size_t)(field_of(var, &cfg) - a), end = start + var->field_size;
        FUZZ_CHECK(memcmp(a, b, start) == 0 &&
                       memcmp(a + end, b + end, sizeof(cfg) - end) == 0,
                   "%s: \"%s\" wrote outside its field", var->name, value);
        check_stored(var, value, &cfg);
    }
    desc = malloc(describe_len); /* exact size: the sanitizer borders it */
    memset(desc, 'x', describe_len);
    gpuport_config_describe(var, desc, describe_len);
    FUZZ_CHECK(nul_within(desc, describe_len), "%s: describe(%zu) not terminated", var->name,
               describe_len);
    free(desc);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* the table itself: fields inside the structure, 32-bit fields that can
     * hold their maximum, defaults that parse */
    static gpuport_config_t cfg;

    for (size_t i = 0; i < gpuport_config_nvars(); i++) {
        const gpuport_config_var_t *var = gpuport_config_var(i);
        FUZZ_CHECK(field_of(var, &cfg) &&
                       field_of(var, &cfg) + var->field_size <= (const char *)&cfg + sizeof(cfg),
                   "%s", var->name);
        FUZZ_CHECK(var->field_size == sizeof(uint64_t) || var->max <= UINT32_MAX ||
                       var->type == GPUPORT_CFG_CUSTOM || var->type == GPUPORT_CFG_WORDSET,
                   "%s: max %llu in a 32-bit field", var->name, (unsigned long long)var->max);
        one(var, var->default_value, 256);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    char *value;
    size_t row, describe_len;

    if (len < 2)
        return 0;
    row = data[0] % (gpuport_config_nvars() + 1);
    describe_len = (size_t)data[1] + 1;
    value = malloc(len - 1);
    memcpy(value, data + 2, len - 2);
    value[len - 2] = '\0';
    if (row == gpuport_config_nvars()) {
        for (size_t i = 0; i < gpuport_config_nvars(); i++)
            one(gpuport_config_var(i), value, describe_len);
    } else {
        one(gpuport_config_var(row), value, describe_len);
    }
    free(value);
    return 0;
}
