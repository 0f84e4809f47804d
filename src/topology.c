/*
 * Thread placement with hwloc; see topology.h. Here: loading the topology,
 * cpu lists, where devices are, the running machine (binding threads) and
 * descriptions; the placement rules (gpuport_place) are topology_place.c.
 * In hwloc 2 an I/O object has no cpuset: its locality is that of its
 * first non-I/O ancestor, and NUMA nodes are memory children rather than
 * ancestors, so a device's NUMA node comes from that ancestor's nodeset.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TOPO
#include "topology.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "topology_int.h"

/* Discovery components that would load GPU runtimes (OpenCL, CUDA, NVML...)
 * into the process only to name devices; placement needs PCI bus ids. */
static const char *const skipped_components[] = {"cuda", "nvml", "opencl", "rsmi", "levelzero",
                                                  "gl"};

/* ---- loading ---- */

static gpuport_topology_t *topology_open(const char *xml, char *why, size_t len)
{
    gpuport_topology_t *topo = calloc(1, sizeof(*topo));
    const char *call;

    if (!topo || hwloc_topology_init(&topo->h) != 0) {
        snprintf(why, len, "hwloc_topology_init failed: %s", strerror(topo ? errno : ENOMEM));
        free(topo);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(skipped_components) / sizeof(skipped_components[0]); i++)
        (void)hwloc_topology_set_components(topo->h, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                            skipped_components[i]);
    if (hwloc_topology_set_io_types_filter(topo->h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0)
        call = "hwloc_topology_set_io_types_filter";
    else if (xml && hwloc_topology_set_xml(topo->h, xml) != 0)
        call = "hwloc_topology_set_xml";
    else if (hwloc_topology_load(topo->h) != 0)
        call = "hwloc_topology_load";
    else
        return topo;
    snprintf(why, len, "%s failed: %s%s%s", call, strerror(errno), xml ? " for " : "",
             xml ? xml : "");
    hwloc_topology_destroy(topo->h);
    free(topo);
    return NULL;
}

gpuport_topology_t *gpuport_topology_load(char *why, size_t len)
{
    return topology_open(NULL, why, len);
}

gpuport_topology_t *gpuport_topology_load_xml(const char *path, char *why, size_t len)
{
    if (!path) {
        snprintf(why, len, "no XML file given");
        return NULL;
    }
    return topology_open(path, why, len);
}

void gpuport_topology_free(gpuport_topology_t *topo)
{
    if (!topo)
        return;
    hwloc_topology_destroy(topo->h);
    free(topo);
}

/* ---- cpu lists ---- */

static int parse_index(const char **p, long *v_p)
{
    char *end;
    long v;

    if (!isdigit((unsigned char)**p))
        return -1;
    errno = 0;
    v = strtol(*p, &end, 10);
    if (errno || v > INT_MAX)
        return -1;
    *p = end;
    *v_p = v;
    return 0;
}

int gpuport_cpulist_parse(const char *list, int *cpus, int max, char *why, size_t len)
{
    const char *p = list;
    int n = 0;

    if (!list) {
        snprintf(why, len, "no list");
        return -1;
    }
    if (*p == '\0')
        return 0;
    for (;;) {
        long lo, hi;

        if (parse_index(&p, &lo) != 0) {
            snprintf(why, len, "expected a PU number at character %d", (int)(p - list) + 1);
            return -1;
        }
        hi = lo;
        if (*p == '-') {
            p++;
            if (parse_index(&p, &hi) != 0) {
                snprintf(why, len, "expected a PU number at character %d", (int)(p - list) + 1);
                return -1;
            }
            if (hi < lo) {
                snprintf(why, len, "range %ld-%ld is reversed", lo, hi);
                return -1;
            }
        }
        if (hi - lo >= (long)max - n) {
            snprintf(why, len, "more than %d PUs", max);
            return -1;
        }
        for (long v = lo; v <= hi; v++) {
            if (cpus)
                cpus[n] = (int)v;
            n++;
        }
        if (*p == '\0')
            return n;
        if (*p != ',') {
            snprintf(why, len, "unexpected '%c' at character %d", *p, (int)(p - list) + 1);
            return -1;
        }
        p++;
    }
}

/* ---- where devices are ---- */

/* The object whose PUs are near an I/O object, or NULL where hwloc hangs it
 * on the whole machine of several NUMA nodes: its locality is unknown. */
hwloc_obj_t topo_io_locality(hwloc_topology_t h, hwloc_obj_t io)
{
    hwloc_obj_t anc = io ? hwloc_get_non_io_ancestor_obj(h, io) : NULL;

    if (!anc || (hwloc_bitmap_isequal(anc->cpuset, hwloc_topology_get_topology_cpuset(h)) &&
                 hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE) > 1))
        return NULL;
    return anc;
}

hwloc_obj_t topo_find_osdev(hwloc_topology_t h, const char *name)
{
    hwloc_obj_t obj = NULL;

    while ((obj = hwloc_get_next_osdev(h, obj)))
        if (obj->name && strcmp(obj->name, name) == 0)
            return obj;
    return NULL;
}

/* Hops from a up to anc, or -1 if anc is not above a. */
static int hops_to(hwloc_obj_t a, hwloc_obj_t anc)
{
    int n = 0;

    for (; a; a = a->parent, n++)
        if (a == anc)
            return n;
    return -1;
}

/* Hops between a and b through their nearest common ancestor, -1 if none. */
static int path_hops(hwloc_obj_t a, hwloc_obj_t b)
{
    for (hwloc_obj_t anc = a; anc; anc = anc->parent) {
        int up = hops_to(b, anc);
        if (up >= 0)
            return up + hops_to(a, anc);
    }
    return -1;
}

/* The RDMA (OpenFabrics) device nearest the PCI object gpu, or NULL. */
static hwloc_obj_t nearest_rdma(hwloc_topology_t h, hwloc_obj_t gpu)
{
    hwloc_obj_t dev = NULL, best = NULL;
    int best_hops = 0;

    while ((dev = hwloc_get_next_osdev(h, dev))) {
        int hops;
        if (dev->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS)
            continue;
        hops = path_hops(gpu, dev);
        if (hops >= 0 && (!best || hops < best_hops)) {
            best = dev;
            best_hops = hops;
        }
    }
    return best;
}

int gpuport_topology_nearest_device(gpuport_topology_t *topo, const char *gpu_bus_id,
                                    const char *const *names, int n, char *why, size_t len)
{
    hwloc_obj_t gpu = topo && gpu_bus_id ? hwloc_get_pcidev_by_busidstring(topo->h, gpu_bus_id)
                                         : NULL;
    int best = -1, best_hops = 0, found = 0;

    if (!gpu) {
        snprintf(why, len, "GPU %s is not in the topology", gpu_bus_id ? gpu_bus_id : "(none)");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        hwloc_obj_t dev = topo_find_osdev(topo->h, names[i]);
        int hops;
        if (!dev)
            continue;
        found++;
        hops = path_hops(gpu, dev);
        if (hops >= 0 && (best < 0 || hops < best_hops)) {
            best = i;
            best_hops = hops;
        }
    }
    if (best < 0)
        snprintf(why, len, "none of the %d device(s) is in the topology near GPU %s", n,
                 gpu_bus_id);
    else
        snprintf(why, len, "%s is nearest GPU %s (%d hops in the topology, %d of %d devices "
                 "found there)", names[best], gpu_bus_id, best_hops, found, n);
    return best;
}

/* ---- the running machine ---- */

gpuport_status_t gpuport_topology_bind_self(gpuport_topology_t *topo, int cpu)
{
    hwloc_bitmap_t set;
    int rc, err;

    if (cpu < 0)
        return GPUPORT_OK;
    if (!topo)
        return GPUPORT_ERR_INVALID_ARG;
    set = hwloc_bitmap_alloc();
    if (!set)
        return GPUPORT_ERR_NO_MEMORY;
    hwloc_bitmap_only(set, (unsigned)cpu);
    rc = hwloc_set_cpubind(topo->h, set, HWLOC_CPUBIND_THREAD);
    err = errno;
    hwloc_bitmap_free(set);
    if (rc != 0) {
        log_warn("hwloc_set_cpubind(PU %d, thread) failed: %s; the thread stays where it is", cpu,
                 strerror(err));
        return GPUPORT_ERR_NOT_SUPPORTED;
    }
    return GPUPORT_OK;
}

int gpuport_topology_current_cpu(gpuport_topology_t *topo)
{
    hwloc_bitmap_t set;
    int cpu = -1;

    if (!topo || !(set = hwloc_bitmap_alloc()))
        return -1;
    if (hwloc_get_last_cpu_location(topo->h, set, HWLOC_CPUBIND_THREAD) == 0)
        cpu = hwloc_bitmap_first(set);
    hwloc_bitmap_free(set);
    return cpu;
}

int gpuport_topology_process_cpus(gpuport_topology_t *topo, char *buf, size_t len)
{
    hwloc_bitmap_t set;
    int rc = -1;

    if (!topo || !(set = hwloc_bitmap_alloc()))
        return -1;
    if (hwloc_get_cpubind(topo->h, set, HWLOC_CPUBIND_PROCESS) == 0) {
        int n = hwloc_bitmap_list_snprintf(buf, len, set);
        rc = n >= 0 && (size_t)n < len ? 0 : -1;
    }
    hwloc_bitmap_free(set);
    return rc;
}

/* ---- description ---- */

static int osdev_is(hwloc_obj_t obj, int gpu)
{
    hwloc_obj_osdev_type_t type = obj->attr->osdev.type;
    return gpu ? type == HWLOC_OBJ_OSDEV_GPU || type == HWLOC_OBJ_OSDEV_COPROC
               : type == HWLOC_OBJ_OSDEV_NETWORK || type == HWLOC_OBJ_OSDEV_OPENFABRICS;
}

/* A PCI device that is a GPU (gpu=1) or NIC, named by its OS devices. A
 * server's BMC has a VGA controller with a DRM device: compute GPUs are 3D
 * controllers, accelerators, co-processors, or NVIDIA's and AMD's VGA. */
static int pci_device_is(hwloc_obj_t pci, int gpu, text_t *names)
{
    unsigned cls = pci->attr->pcidev.class_id, vendor = pci->attr->pcidev.vendor_id;
    int n = 0, coproc = 0;

    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
        if (c->type == HWLOC_OBJ_OS_DEVICE && osdev_is(c, gpu)) {
            text_add(names, "%s%s", n++ ? ", " : "", c->name ? c->name : "?");
            coproc |= c->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC;
        }
    }
    if (!gpu)
        return n > 0 || cls >> 8 == 0x02;
    return coproc || cls == 0x0302 || cls >> 8 == 0x12 ||
           (cls == 0x0300 && (vendor == 0x10de || vendor == 0x1002));
}

static int describe_devices(hwloc_topology_t h, int gpu, text_t *t)
{
    hwloc_obj_t pci = NULL;
    int count = 0;

    while ((pci = hwloc_get_next_pcidev(h, pci))) {
        char names[96];
        text_t nt;
        hwloc_obj_t near, rdma;

        text_init(&nt, names, sizeof(names));
        if (!pci_device_is(pci, gpu, &nt))
            continue;
        count++;
        if (!t)
            continue;
        near = topo_io_locality(h, pci);
        rdma = gpu ? nearest_rdma(h, pci) : NULL;
        text_add(t, "%s %04x:%02x:%02x.%01x%s%s%s: PUs %s%s%s\n", gpu ? "GPU" : "NIC",
                 pci->attr->pcidev.domain, pci->attr->pcidev.bus, pci->attr->pcidev.dev,
                 pci->attr->pcidev.func, names[0] ? " (" : "", names, names[0] ? ")" : "",
                 near ? LIST(near->cpuset) : "unknown", rdma ? ", nearest RDMA device " : "",
                 rdma && rdma->name ? rdma->name : "");
    }
    return count;
}

void gpuport_topology_describe(gpuport_topology_t *topo, char *buf, size_t len)
{
    hwloc_topology_t h;
    hwloc_obj_t obj = NULL;
    text_t t;

    text_init(&t, buf, len);
    if (!topo)
        return;
    h = topo->h;
    text_add(&t, "%d packages, %d NUMA nodes, %d cores, %d PUs, %d GPUs, %d NICs\n",
             hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PACKAGE),
             hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE),
             hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE), hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PU),
             describe_devices(h, 1, NULL), describe_devices(h, 0, NULL));
    while ((obj = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_PACKAGE, obj)))
        text_add(&t, "package %u: PUs %s\n", obj->os_index, LIST(obj->cpuset));
    while ((obj = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_NUMANODE, obj)))
        text_add(&t, "NUMA node %u: PUs %s, %llu MiB\n", obj->os_index, LIST(obj->cpuset),
                 (unsigned long long)(obj->attr->numanode.local_memory >> 20));
    describe_devices(h, 1, &t);
    describe_devices(h, 0, &t);
}

int gpuport_topology_gpu(gpuport_topology_t *topo, int n, char *bus, size_t len)
{
    hwloc_obj_t pci = NULL;
    int seen = 0;

    if (!topo || n < 0)
        return -1;
    while ((pci = hwloc_get_next_pcidev(topo->h, pci))) {
        char names[96];
        text_t nt;

        text_init(&nt, names, sizeof(names));
        if (!pci_device_is(pci, 1, &nt) || seen++ != n)
            continue;
        snprintf(bus, len, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
                 pci->attr->pcidev.dev, pci->attr->pcidev.func);
        return 0;
    }
    return -1;
}
