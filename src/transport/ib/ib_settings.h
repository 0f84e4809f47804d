/*
 * The ib transport's GPUPORT_* settings: GPUPORT_IB_GID_INDEX and
 * GPUPORT_IB_HCA, whose device[:port] list only ib reads. The rows and the
 * list's parser are compiled into every build (ib_settings.c needs no
 * verbs), so the variables are known where ib is not built. For the ib
 * transport's files and its tests.
 */
#ifndef GPUPORT_IB_SETTINGS_H
#define GPUPORT_IB_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "transport/tl_core.h"

/* GPUPORT_IB_HCA's text is at most IB_HCA_TEXT_MAX characters, so it has at
 * most IB_HCA_MAX entries ("a,a,...,a"). */
#define IB_HCA_TEXT_MAX 255
#define IB_HCA_MAX 128

/* GPUPORT_IB_HCA: devices and ports, in order of preference. */
typedef struct ib_hca_entry {
    char dev[64]; /* an RDMA device name has at most 63 characters (IBV_SYSFS_NAME_MAX) */
    uint8_t port; /* 1..255; 0: any port of dev */
} ib_hca_entry_t;

typedef struct ib_hca_list {
    int n; /* 0: no list */
    ib_hca_entry_t entry[IB_HCA_MAX];
} ib_hca_list_t;

typedef struct ib_settings {
    int gid_index;     /* GPUPORT_IB_GID_INDEX, -1 = chosen per port */
    ib_hca_list_t hca; /* GPUPORT_IB_HCA, none = nearest the GPU */
} ib_settings_t;

extern const gpuport_settings_table_t gpuport_ib_settings;

/* "name[:port],...", at most IB_HCA_TEXT_MAX characters: 0, or -1 with
 * what is wrong in problem. */
int ib_hca_list_parse(const char *s, ib_hca_list_t *out, char *problem, size_t len);
/* A parsed list as text, in the one spelling the parser accepts for it. */
void ib_hca_list_format(const ib_hca_list_t *list, char *buf, size_t len);

#endif
