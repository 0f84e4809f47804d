/* gpuport_info's writers: JSON, shell words, roff text (info.h). */
#include <string.h>

#include "info.h"

void info_json_init(info_json_t *j, FILE *f)
{
    memset(j, 0, sizeof(*j));
    j->f = f;
}

/* The length of the UTF-8 sequence at p (1..4), or 0 if it is not one:
 * JSON text must be UTF-8, and a rejected value may be any bytes. */
static size_t utf8_length(const unsigned char *p)
{
    size_t n;
    unsigned cp;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2, cp = p[0] & 0x1f;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3, cp = p[0] & 0x0f;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4, cp = p[0] & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    /* no overlong forms, no surrogates, nothing past U+10FFFF */
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A JSON string; bytes that are not UTF-8 become U+FFFD. */
static void json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    fputc('"', f);
    while (*p) {
        size_t n = utf8_length(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, f);
        } else if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
        } else if (*p == '\n') {
            fputs("\\n", f);
        } else if (*p == '\t') {
            fputs("\\t", f);
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
        p += n;
    }
    fputc('"', f);
}

/* The comma, newline and indent before a member, then its key. */
static void member(info_json_t *j, const char *key)
{
    if (j->depth > 0) {
        fputs(j->count[j->depth - 1]++ ? ",\n" : "\n", j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    if (key) {
        json_string(j->f, key);
        fputs(": ", j->f);
    }
}

void info_json_open(info_json_t *j, const char *key, char bracket)
{
    member(j, key);
    fputc(bracket, j->f);
    j->close[j->depth] = bracket == '[' ? ']' : '}';
    j->count[j->depth] = 0;
    j->depth++;
}

void info_json_close(info_json_t *j)
{
    j->depth--;
    if (j->count[j->depth] > 0) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    fputc(j->close[j->depth], j->f);
    if (j->depth == 0)
        fputc('\n', j->f);
}

void info_json_str(info_json_t *j, const char *key, const char *value)
{
    member(j, key);
    if (value)
        json_string(j->f, value);
    else
        fputs("null", j->f);
}

void info_json_int(info_json_t *j, const char *key, long long value)
{
    member(j, key);
    fprintf(j->f, "%lld", value);
}

void info_json_bool(info_json_t *j, const char *key, int value)
{
    member(j, key);
    fputs(value ? "true" : "false", j->f);
}

void info_shell_word(FILE *f, const char *s)
{
    /* no shell expands, splits or globs these, wherever they stand in a word
     * after "NAME=" ('^' is a pipe in the Bourne shell, a glob in zsh) */
    static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789_-.,:/@%+=";

    if (*s && strspn(s, plain) == strlen(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

void info_roff_text(FILE *f, const char *s)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", f);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-')
            fputs("\\-", f);
        else
            fputc(*s, f);
    }
}
