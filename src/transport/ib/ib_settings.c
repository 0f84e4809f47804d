/* The ib transport's settings: its rows and GPUPORT_IB_HCA's list; see
 * ib_settings.h. */
#include "transport/ib/ib_settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "name[:port],...": names of letters, digits, '_', '-', '.' (at most 63);
 * ports 1..255, decimal without leading zeros */
int ib_hca_list_parse(const char *s, ib_hca_list_t *out, char *problem, size_t len)
{
    memset(out, 0, sizeof(*out));
    while (*s) {
        size_t name = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.");
        ib_hca_entry_t *e = &out->entry[out->n];
        if (name == 0) {
            snprintf(problem, len, "a device name is missing or has a bad character at \"%s\"", s);
            return -1;
        }
        if (name >= sizeof(e->dev)) {
            snprintf(problem, len, "a device name of %zu characters (at most %zu)", name,
                     sizeof(e->dev) - 1);
            return -1;
        }
        if (out->n == IB_HCA_MAX) {
            snprintf(problem, len, "more than %d devices", IB_HCA_MAX);
            return -1;
        }
        memcpy(e->dev, s, name);
        s += name;
        if (*s == ':') {
            unsigned long port = 0;
            size_t digits = strspn(++s, "0123456789");
            if (digits == 0 || digits > 3 || s[0] == '0' ||
                (port = strtoul(s, NULL, 10)) < 1 || port > 255) {
                snprintf(problem, len, "bad port at \"%s\"", s);
                return -1;
            }
            e->port = (uint8_t)port;
            s += digits;
        }
        out->n++;
        if (*s == ',' && s[1] != '\0')
            s++;
        else if (*s) {
            snprintf(problem, len, "unexpected \"%s\"", s);
            return -1;
        }
    }
    return 0;
}

void ib_hca_list_format(const ib_hca_list_t *list, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < list->n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s%s%.0u", i ? "," : "",
                                 list->entry[i].dev, list->entry[i].port ? ":" : "",
                                 list->entry[i].port);
}

static int hca_parse(const char *value, void *field, char *problem, size_t len)
{
    return ib_hca_list_parse(value, field, problem, len);
}

static void hca_describe(const gpuport_config_var_t *var, char *buf, size_t len)
{
    snprintf(buf, len, "device[:port] names separated by commas such as mlx5_0:1,mlx5_1 "
             "(names of at most 63 characters, port 1..255, no spaces, at most %llu "
             "characters), or empty",
             (unsigned long long)var->max);
}

static void hca_format(const void *field, char *buf, size_t len)
{
    ib_hca_list_format(field, buf, len);
}

static const gpuport_cfg_custom_t hca_syntax = {hca_parse, hca_describe, hca_format};

#define FIELD(f) GPUPORT_CFG_FIELD(ib_settings_t, f)

static const gpuport_config_var_t rows[] = {
    {"GPUPORT_IB_GID_INDEX", "auto", GPUPORT_CFG_AUTO_UINT, FIELD(gid_index), 0, 255, NULL,
     "RoCE GID index for the ib transport; auto prefers RoCE v2 with an IPv4 address", NULL},
    {"GPUPORT_IB_HCA", "", GPUPORT_CFG_CUSTOM, FIELD(hca), 0, IB_HCA_TEXT_MAX, NULL,
     "RDMA devices and ports for the ib transport (e.g. mlx5_0:1,mlx5_1:1); empty picks the "
     "one nearest the GPU",
     &hca_syntax},
};

const gpuport_settings_table_t gpuport_ib_settings = {rows, sizeof(rows) / sizeof(rows[0]),
                                                      sizeof(ib_settings_t)};
