/*
 * Thread placement with hwloc; see topology.h. In hwloc 2 an I/O object has
 * no cpuset: its locality is that of its first non-I/O ancestor, and NUMA
 * nodes are memory children rather than ancestors, so a device's NUMA node
 * comes from that ancestor's nodeset.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TOPO
#include "topology.h"

#include <ctype.h>
#include <errno.h>
#include <hwloc.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct gpuport_topology {
    hwloc_topology_t h;
};

/* Discovery components that would load GPU runtimes (OpenCL, CUDA, NVML...)
 * into the process only to name devices; placement needs PCI bus ids. */
static const char *const skipped_components[] = {"cuda", "nvml", "opencl", "rsmi", "levelzero",
                                                  "gl"};

/* ---- text ---- */

typedef struct {
    char *buf;
    size_t len, used;
} text_t;

static void text_init(text_t *t, char *buf, size_t len)
{
    t->buf = buf;
    t->len = len;
    t->used = 0;
    if (len)
        buf[0] = '\0';
}

static void text_add(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(text_t *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->used + 1 >= t->len)
        return;
    va_start(ap, fmt);
    n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->used = t->used + (size_t)n < t->len ? t->used + (size_t)n : t->len - 1;
}

/* A set as a list ("0-15,32-47"), in buf. */
static const char *list_of(char *buf, size_t len, hwloc_const_bitmap_t set)
{
    if (hwloc_bitmap_list_snprintf(buf, len, set) < 0)
        snprintf(buf, len, "?");
    return buf;
}

#define LIST(set) list_of((char[96]){0}, 96, (set))

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

/* ---- placement ---- */

const char *gpuport_place_level_name(int level)
{
    static const char *const names[] = {"override", "device", "numa", "process", "none"};
    return level >= 0 && level <= GPUPORT_PLACE_NONE ? names[level] : "unknown";
}

typedef struct {
    hwloc_topology_t h;
    const gpuport_place_request_t *req;
    hwloc_bitmap_t allowed; /* the topology's allowed PUs inside req->allowed */
    hwloc_bitmap_t taken;   /* cores of overridden threads: the rules place around them */
    hwloc_bitmap_t region;  /* where the rules place, inside allowed */
    hwloc_bitmap_t tmp;
    int level;
    text_t why;
} place_t;

static void place_fini(place_t *p)
{
    hwloc_bitmap_free(p->allowed);
    hwloc_bitmap_free(p->taken);
    hwloc_bitmap_free(p->region);
    hwloc_bitmap_free(p->tmp);
}

static gpuport_status_t place_init(place_t *p, gpuport_topology_t *topo,
                                   const gpuport_place_request_t *req, gpuport_placement_t *out)
{
    memset(p, 0, sizeof(*p));
    p->h = topo->h;
    p->req = req;
    p->level = GPUPORT_PLACE_NONE;
    text_init(&p->why, out->why, sizeof(out->why));
    p->allowed = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(p->h));
    p->taken = hwloc_bitmap_alloc();
    p->region = hwloc_bitmap_alloc();
    p->tmp = hwloc_bitmap_alloc();
    if (!p->allowed || !p->taken || !p->region || !p->tmp)
        return GPUPORT_ERR_NO_MEMORY;
    if (req->allowed && req->allowed[0]) {
        if (hwloc_bitmap_list_sscanf(p->tmp, req->allowed) != 0) {
            log_error("gpuport_place: the process's cpuset \"%s\" is not a cpu list", req->allowed);
            return GPUPORT_ERR_INVALID_ARG;
        }
        hwloc_bitmap_and(p->allowed, p->allowed, p->tmp);
    }
    return GPUPORT_OK;
}

static hwloc_obj_t core_of(hwloc_topology_t h, hwloc_obj_t pu)
{
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_CORE, pu);
    return core ? core : pu;
}

/* A GPUPORT_*_CPUS list: one PU per local rank, entry r for local rank r.
 * Every entry must exist; this rank's own must be allowed to it. */
static gpuport_status_t override_cpu(place_t *p, const char *var, const char *list, int *cpu_p)
{
    const gpuport_place_request_t *req = p->req;
    char problem[192];
    int *cpus, n;

    *cpu_p = -1;
    if (!list || !list[0])
        return GPUPORT_OK;
    cpus = malloc(GPUPORT_CPULIST_MAX * sizeof(*cpus));
    if (!cpus)
        return GPUPORT_ERR_NO_MEMORY;
    n = gpuport_cpulist_parse(list, cpus, GPUPORT_CPULIST_MAX, problem, sizeof(problem));
    if (n >= 0 && n < req->local_size) {
        snprintf(problem, sizeof(problem), "%d PUs for %d local ranks; give one per local rank",
                 n, req->local_size);
        n = -1;
    }
    for (int i = 0; i < n; i++) {
        if (!hwloc_get_pu_obj_by_os_index(p->h, (unsigned)cpus[i])) {
            snprintf(problem, sizeof(problem), "PU %d does not exist on this machine (PUs %s)",
                     cpus[i], LIST(hwloc_topology_get_complete_cpuset(p->h)));
            n = -1;
        }
    }
    if (n > 0 && !hwloc_bitmap_isset(p->allowed, (unsigned)cpus[req->local_rank])) {
        snprintf(problem, sizeof(problem),
                 "PU %d, local rank %d's, is outside this process's cpuset (PUs %s)",
                 cpus[req->local_rank], req->local_rank, LIST(p->allowed));
        n = -1;
    }
    if (n < 0) {
        log_error("%s=\"%s\" is not valid: %s", var, list, problem);
        free(cpus);
        return GPUPORT_ERR_INVALID_CONFIG;
    }
    *cpu_p = cpus[req->local_rank];
    for (int i = 0; i < req->local_size; i++)
        hwloc_bitmap_or(p->taken, p->taken,
                        core_of(p->h, hwloc_get_pu_obj_by_os_index(p->h, (unsigned)cpus[i]))->cpuset);
    free(cpus);
    return GPUPORT_OK;
}

/* The object whose PUs are near an I/O object, or NULL where hwloc hangs it
 * on the whole machine of several NUMA nodes: its locality is unknown. */
static hwloc_obj_t io_locality(hwloc_topology_t h, hwloc_obj_t io)
{
    hwloc_obj_t anc = io ? hwloc_get_non_io_ancestor_obj(h, io) : NULL;

    if (!anc || (hwloc_bitmap_isequal(anc->cpuset, hwloc_topology_get_topology_cpuset(h)) &&
                 hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE) > 1))
        return NULL;
    return anc;
}

static hwloc_obj_t find_osdev(hwloc_topology_t h, const char *name)
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
        hwloc_obj_t dev = find_osdev(topo->h, names[i]);
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

/* Takes `set`, inside the allowed PUs, as the region if any PU remains. */
static int try_region(place_t *p, hwloc_const_bitmap_t set, int level)
{
    hwloc_bitmap_and(p->region, set, p->allowed);
    if (hwloc_bitmap_iszero(p->region))
        return 0;
    p->level = level;
    return 1;
}

/* Where the rules place: the GPU's (and NIC's) cores, else the GPU's NUMA
 * node, else the application thread's NUMA node where the GPU is unknown,
 * else the process's cpuset. Notes why each step was passed over. */
static void choose_region(place_t *p)
{
    const gpuport_place_request_t *req = p->req;
    const char *gpu_id = req->gpu_bus_id && req->gpu_bus_id[0] ? req->gpu_bus_id : NULL;
    const char *nic_id = req->nic_name && req->nic_name[0] ? req->nic_name : NULL;
    hwloc_obj_t gpu = gpu_id ? hwloc_get_pcidev_by_busidstring(p->h, gpu_id) : NULL;
    hwloc_obj_t nic = nic_id ? find_osdev(p->h, nic_id) : NULL;
    hwloc_obj_t gpu_near = io_locality(p->h, gpu), nic_near = io_locality(p->h, nic);
    hwloc_obj_t app = req->app_cpu >= 0 ? hwloc_get_pu_obj_by_os_index(p->h, (unsigned)req->app_cpu)
                                        : NULL;

    if (nic_id && !nic_near)
        text_add(&p->why, "NIC %s %s; ", nic_id,
                 nic ? "has no known locality" : "not found in the topology");
    if (gpu_id && !gpu_near)
        text_add(&p->why, "GPU %s %s; ", gpu_id,
                 gpu ? "has no known locality" : "not found in the topology");
    if (gpu_near && nic_near) {
        hwloc_bitmap_and(p->tmp, gpu_near->cpuset, nic_near->cpuset);
        if (try_region(p, p->tmp, GPUPORT_PLACE_DEVICE)) {
            text_add(&p->why, "cores near GPU %s and NIC %s", gpu_id, nic_id);
            return;
        }
        text_add(&p->why, "NIC %s is not near GPU %s inside the process's cpuset; ", nic_id,
                 gpu_id);
    }
    if (gpu_near) {
        if (try_region(p, gpu_near->cpuset, GPUPORT_PLACE_DEVICE)) {
            text_add(&p->why, "cores near GPU %s", gpu_id);
            return;
        }
        hwloc_cpuset_from_nodeset(p->h, p->tmp, gpu_near->nodeset);
        if (try_region(p, p->tmp, GPUPORT_PLACE_NUMA)) {
            text_add(&p->why, "NUMA node %s of GPU %s, whose own PUs %s are outside the process's "
                     "cpuset", LIST(gpu_near->nodeset), gpu_id, LIST(gpu_near->cpuset));
            return;
        }
        text_add(&p->why, "GPU %s's NUMA node (PUs %s) is outside the process's cpuset; ",
                 gpu_id, LIST(p->tmp));
    } else if (nic_near && try_region(p, nic_near->cpuset, GPUPORT_PLACE_DEVICE)) {
        text_add(&p->why, "%scores near NIC %s", gpu_id ? "" : "no GPU: ", nic_id);
        return;
    } else if (gpu_id && app) {
        hwloc_cpuset_from_nodeset(p->h, p->tmp, app->nodeset);
        if (try_region(p, p->tmp, GPUPORT_PLACE_NUMA)) {
            text_add(&p->why, "using NUMA node %s of the application thread (PU %d)",
                     LIST(app->nodeset), req->app_cpu);
            return;
        }
    }
    if (try_region(p, p->allowed, GPUPORT_PLACE_PROCESS)) {
        text_add(&p->why, "%susing the process's cpuset", gpu_id ? "" : "no GPU: ");
        return;
    }
    p->level = GPUPORT_PLACE_NONE;
    text_add(&p->why, "no PU of the process's cpuset (%s) is in the topology; left unbound",
             req->allowed ? req->allowed : "all");
}

/* The n-th PU of the region in obj, -1 if it has fewer. */
static int nth_pu(place_t *p, hwloc_obj_t obj, int n)
{
    int pu = -1;

    hwloc_bitmap_and(p->tmp, obj->cpuset, p->region);
    for (pu = hwloc_bitmap_first(p->tmp); pu >= 0 && n > 0; n--)
        pu = hwloc_bitmap_next(p->tmp, pu);
    return pu;
}

/* Candidate cores of the region in topology order: those without an
 * overridden thread, unless no other remains. PUs stand in for cores where
 * the topology has none. */
static int candidate_cores(place_t *p, hwloc_obj_t *cores, int max)
{
    int n = 0;

    for (int pass = 0; pass < 4 && n == 0; pass++) {
        hwloc_obj_type_t type = pass < 2 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
        int total = hwloc_get_nbobjs_by_type(p->h, type);

        for (int i = 0; i < total && n < max; i++) {
            hwloc_obj_t obj = hwloc_get_obj_by_type(p->h, type, (unsigned)i);
            if (hwloc_bitmap_intersects(obj->cpuset, p->region) &&
                (pass % 2 || !hwloc_bitmap_intersects(obj->cpuset, p->taken)))
                cores[n++] = obj;
        }
    }
    return n;
}

/*
 * Local rank r's thread t takes slot k = nthreads * r + t of a sequence that
 * every local rank with the same region builds alike: the first PU of each
 * candidate core, then second PUs (sharing cores), then around again
 * (sharing PUs). A slot on the application thread's core moves to a spare
 * core past all ranks' slots (one per rank, from the end), else to another
 * PU of that core.
 */
static gpuport_status_t pick(place_t *p, int nthreads, int *cpus)
{
    const gpuport_place_request_t *req = p->req;
    int slots = nthreads * req->local_size, ncores, npus = 0, app_core = -1;
    int max = hwloc_bitmap_weight(p->region);
    hwloc_obj_t *cores = malloc((size_t)max * sizeof(*cores));
    int *seq = malloc((size_t)max * sizeof(*seq));

    if (!cores || !seq) {
        free(cores);
        free(seq);
        return GPUPORT_ERR_NO_MEMORY;
    }
    ncores = candidate_cores(p, cores, max);
    for (int round = 0, added = 1; added; round++) {
        added = 0;
        for (int i = 0; i < ncores; i++) {
            int pu = nth_pu(p, cores[i], round);
            if (pu >= 0 && npus < max) {
                seq[npus++] = pu;
                added = 1;
            }
        }
    }
    for (int i = 0; i < ncores && req->app_cpu >= 0; i++)
        if (hwloc_bitmap_isset(cores[i]->cpuset, (unsigned)req->app_cpu))
            app_core = i;
    for (int t = 0; t < nthreads; t++) {
        int k = nthreads * req->local_rank + t, spare = ncores - 1 - req->local_rank;
        cpus[t] = seq[k % npus];
        if (k != app_core)
            continue;
        if (spare >= slots)
            cpus[t] = seq[spare];
        else if (slots <= ncores && seq[k] == req->app_cpu && nth_pu(p, cores[k], 1) >= 0)
            cpus[t] = nth_pu(p, cores[k], 1);
    }
    if (slots > ncores)
        text_add(&p->why, "; only %d cores for %d threads of %d local ranks: threads share %s",
                 ncores, slots, req->local_size, slots > npus ? "PUs" : "cores");
    for (int t = 0; t < nthreads && app_core >= 0; t++) {
        if (cpus[t] == req->app_cpu)
            text_add(&p->why, "; PU %d is the application thread's too", cpus[t]);
        else if (hwloc_bitmap_isset(cores[app_core]->cpuset, (unsigned)cpus[t]))
            text_add(&p->why, "; PU %d shares a core with the application thread (PU %d)",
                     cpus[t], req->app_cpu);
    }
    free(cores);
    free(seq);
    return GPUPORT_OK;
}

static gpuport_status_t decide(place_t *p, gpuport_placement_t *out)
{
    int nthreads = (out->proxy_cpu < 0) + (out->flusher_cpu < 0), cpus[2] = {-1, -1};
    gpuport_status_t status;

    if (nthreads == 0) {
        out->level = GPUPORT_PLACE_OVERRIDE;
        text_add(&p->why, "GPUPORT_PROXY_CPUS and GPUPORT_FLUSHER_CPUS");
        return GPUPORT_OK;
    }
    if (nthreads == 1)
        text_add(&p->why, "%s PU %d from %s; %s: ", out->proxy_cpu >= 0 ? "proxy" : "flusher",
                 out->proxy_cpu >= 0 ? out->proxy_cpu : out->flusher_cpu,
                 out->proxy_cpu >= 0 ? "GPUPORT_PROXY_CPUS" : "GPUPORT_FLUSHER_CPUS",
                 out->proxy_cpu >= 0 ? "flusher" : "proxy");
    choose_region(p);
    out->level = p->level;
    if (p->level == GPUPORT_PLACE_NONE)
        return GPUPORT_OK;
    status = pick(p, nthreads, cpus);
    if (status)
        return status;
    if (out->proxy_cpu < 0) {
        out->proxy_cpu = cpus[0];
        if (out->flusher_cpu < 0)
            out->flusher_cpu = cpus[1];
    } else {
        out->flusher_cpu = cpus[0];
    }
    return GPUPORT_OK;
}

gpuport_status_t gpuport_place(gpuport_topology_t *topo, const gpuport_place_request_t *req,
                               gpuport_placement_t *out_p)
{
    gpuport_placement_t out;
    gpuport_status_t status;
    place_t p;

    if (!topo || !req || !out_p || req->local_size < 1 || req->local_rank < 0 ||
        req->local_rank >= req->local_size) {
        log_error("gpuport_place: invalid request (topology %p, local rank %d of %d)",
                  (void *)topo, req ? req->local_rank : -1, req ? req->local_size : -1);
        return GPUPORT_ERR_INVALID_ARG;
    }
    memset(&out, 0, sizeof(out));
    out.proxy_cpu = out.flusher_cpu = -1;
    out.level = GPUPORT_PLACE_NONE;
    if (!req->bind) {
        snprintf(out.why, sizeof(out.why), "GPUPORT_BIND=0");
        *out_p = out;
        return GPUPORT_OK;
    }
    status = place_init(&p, topo, req, &out);
    if (!status)
        status = override_cpu(&p, "GPUPORT_PROXY_CPUS", req->proxy_cpus, &out.proxy_cpu);
    if (!status)
        status = override_cpu(&p, "GPUPORT_FLUSHER_CPUS", req->flusher_cpus, &out.flusher_cpu);
    if (!status)
        status = decide(&p, &out);
    place_fini(&p);
    if (!status)
        *out_p = out;
    return status;
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
        near = io_locality(h, pci);
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
