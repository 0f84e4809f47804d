/*
 * Thread placement: the rules of gpuport_place (topology.h) over a
 * topology that topology.c loaded: the overrides, the region the threads
 * go in (near the GPU and NIC, their NUMA node, the process's cpuset), and
 * the cores of that region each local rank's threads take.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_TOPO
#include "topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "topology_int.h"

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
    hwloc_obj_t nic = nic_id ? topo_find_osdev(p->h, nic_id) : NULL;
    hwloc_obj_t gpu_near = topo_io_locality(p->h, gpu), nic_near = topo_io_locality(p->h, nic);
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
