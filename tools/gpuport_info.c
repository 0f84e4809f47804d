/*
 * gpuport_info: what this gpuport build and machine offer, and what
 * gpuport would decide here. No MPI needed; reads the same configuration
 * table, topology module and driver loader as the library. Options in
 * usage() below and in gpuport_info(1) (man/gpuport_info.1).
 *
 * The report is gathered first (report_t), then printed as text or JSON,
 * so that both say the same. The configuration is read once: each invalid
 * GPUPORT_* value is reported once, however many parts of the report need
 * it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "config.h"
#include "gpuport/gpuport.h"
#include "info.h"
#include "log.h"
#include "topology.h"
#include "transport/transport.h"
#if GPUPORT_HAVE_CUDA
#include "cuda/cudrv.h"
#endif

#define MAX_RANKS 4096
#define MAX_GPUS 64       /* listed; more are counted */
#define MAX_TRANSPORTS 16

typedef struct opts {
    int config;        /* -c */
    int memory;        /* -m */
    const char *form;  /* --markdown, --env or --man, as given */
    info_config_view_t view;
    int json;          /* --json */
    int topology;      /* -t */
    int nranks;        /* -n */
    const char *xml;   /* --xml */
} opts_t;

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [--json] [-t] [-n N] [--xml FILE]\n"
            "       %s -c [--markdown | --env | --json | --man]\n"
            "       %s -m [--json]\n"
            "       %s -v | --version | -h | --help\n"
            "What this gpuport build and machine offer, and what gpuport would decide here.\n"
            "The report:\n"
            "  (no option)     version, licence, build, CUDA driver and GPUs, transports,\n"
            "                  placement of the proxy and flusher threads\n"
            "  --json          the report as one JSON object\n"
            "  -t              the topology as gpuport sees it, too\n"
            "  -n N            placement for N ranks on this host (1..%d, default 1)\n"
            "  --xml FILE      an hwloc XML topology (lstopo --of xml) instead of this machine's\n"
            "The configuration:\n"
            "  -c              every GPUPORT_* variable: default, value here, what it accepts,\n"
            "                  meaning; exit status 1 if a value in the environment is invalid\n"
            "  -c --markdown   the rows of docs/GUIDE.md's table\n"
            "  -c --env        NAME=value lines, the values in effect here, quoted for a shell\n"
            "  -c --json       one JSON object (gpuport_info(1) lists its fields)\n"
            "  -c --man        the entries of gpuport(7)'s ENVIRONMENT section, in roff\n"
            "Memory:\n"
            "  -m, --memory    a test allocation of each kind of memory (malloc,\n"
            "                  gpuport_mem_alloc, and with a GPU pinned, managed, cudaMalloc,\n"
            "                  VMM and pool memory), registered: the kind gpuport sees and\n"
            "                  which transports carry it, and why not; --json: as JSON\n"
            "Other:\n"
            "  -v, --version   versions of this program and of the library, and the licence\n"
            "  -h, --help      this text\n",
            prog, prog, prog, prog, MAX_RANKS);
}

static void version(void)
{
    printf("gpuport_info (gpuport) %s\n", PACKAGE_VERSION);
    printf("library: gpuport %s\n", gpuport_version_string());
    printf("licence: %s\n", INFO_LICENCE);
}

/* One line naming what was wrong, then where the options are. */
__attribute__((format(printf, 2, 3))) static int bad_usage(const char *prog, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun '%s --help' for the options.\n", prog);
    return -1;
}

/* 0: run; 1: done (help or version printed); -1: bad usage, said once. */
static int parse(int argc, char **argv, opts_t *o)
{
    const char *prog = argv[0];
    int report_opts = 0;

    memset(o, 0, sizeof(*o));
    o->nranks = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout, prog);
            return 1;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--version")) {
            version();
            return 1;
        } else if (!strcmp(a, "-c")) {
            o->config = 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--memory")) {
            o->memory = 1;
        } else if (!strcmp(a, "--markdown") || !strcmp(a, "--env") || !strcmp(a, "--man")) {
            if (o->form && strcmp(o->form, a))
                return bad_usage(prog, "%s and %s: choose one form of -c", o->form, a);
            o->form = a;
            o->view = !strcmp(a, "--markdown") ? INFO_CONFIG_MARKDOWN
                      : !strcmp(a, "--env")    ? INFO_CONFIG_ENV
                                               : INFO_CONFIG_MAN;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "-t")) {
            o->topology = 1;
            report_opts = 1;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--xml")) {
            if (i + 1 >= argc)
                return bad_usage(prog, "%s needs a value", a);
            report_opts = 1;
            if (a[1] == 'n') {
                char *end;
                long n = strtol(argv[++i], &end, 10);
                if (!*argv[i] || *end || n < 1 || n > MAX_RANKS)
                    return bad_usage(prog, "-n needs a rank count 1..%d, not '%s'", MAX_RANKS,
                                     argv[i]);
                o->nranks = (int)n;
            } else {
                o->xml = argv[++i];
            }
        } else {
            return bad_usage(prog, "unknown option '%s'", a);
        }
    }
    if (o->form && !o->config)
        return bad_usage(prog, "%s is a form of -c and needs it", o->form);
    if (o->config && o->form && o->json)
        return bad_usage(prog, "%s and --json: choose one form of -c", o->form);
    if (o->config && report_opts)
        return bad_usage(prog, "-t, -n and --xml are for the report; -c shows the configuration "
                               "only");
    if (o->memory && (o->config || o->form || report_opts))
        return bad_usage(prog, "-m shows the memory kinds only (with --json or without)");
    if (o->config && o->json)
        o->view = INFO_CONFIG_JSON;
    else if (o->config && !o->form)
        o->view = INFO_CONFIG_TABLE;
    return 0;
}

/* ---- the report, gathered ---------------------------------------------- */

typedef struct gpu_facts {
    int loaded;    /* the driver is usable */
    int version;   /* cuDriverGetVersion: 1000 * major + 10 * minor */
    int count;     /* devices; the first MAX_GPUS are listed */
    char why[256]; /* why GPUs cannot be used */
    struct {
        char name[128], bus[32];
    } dev[MAX_GPUS];
} gpu_facts_t;

typedef struct transport_facts {
    const char *name;
    int built;
    char detail[512];
} transport_facts_t;

typedef struct place_facts {
    char bus[32]; /* the GPU the rank would use, "" none */
    gpuport_placement_t p;
} place_facts_t;

typedef struct report {
    int cfg_ok;
    gpuport_config_t cfg;
    gpu_facts_t gpu;
    int ntransports;
    transport_facts_t tl[MAX_TRANSPORTS];
    gpuport_topology_t *topo;
    char topo_why[256];
    char *topo_text;   /* -t */
    int nplaced;       /* ranks placed, in order, before a failure */
    int place_failed;  /* the local rank whose placement failed, -1 none */
    place_facts_t *place;
} report_t;

static void gather_gpu(gpu_facts_t *g)
{
    memset(g, 0, sizeof(*g));
#if GPUPORT_HAVE_CUDA
    if (gpuport_cudrv_load(g->why, sizeof(g->why)) != GPUPORT_OK)
        return;
    g->loaded = 1;
    gpuport_cu.cuDriverGetVersion(&g->version);
    g->count = gpuport_cudrv_device_count();
    for (int d = 0; d < g->count && d < MAX_GPUS; d++) {
        CUdevice dev;
        snprintf(g->dev[d].name, sizeof(g->dev[d].name), "?");
        snprintf(g->dev[d].bus, sizeof(g->dev[d].bus), "?");
        if (gpuport_cu.cuDeviceGet(&dev, d) == CUDA_SUCCESS) {
            gpuport_cu.cuDeviceGetPCIBusId(g->dev[d].bus, sizeof(g->dev[d].bus), dev);
            gpuport_cu.cuDeviceGetName(g->dev[d].name, sizeof(g->dev[d].name), dev);
        }
    }
#else
    snprintf(g->why, sizeof(g->why), "this gpuport was built without CUDA (configure --with-cuda)");
#endif
}

/* Each transport says for itself whether it would work here. */
static void gather_transports(report_t *r)
{
    for (int k = 1; k < gpuport_transport_nkinds() && r->ntransports < MAX_TRANSPORTS; k++) {
        const gpuport_transport_ops_t *t = gpuport_transport_ops(k);
        transport_facts_t *f = &r->tl[r->ntransports++];

        f->name = gpuport_transport_name(k);
        f->built = t != NULL;
        if (!t)
            snprintf(f->detail, sizeof(f->detail), "not built: %s", gpuport_transport_missing(k));
        else if (!r->cfg_ok)
            snprintf(f->detail, sizeof(f->detail),
                     "not usable: a GPUPORT_* value is invalid (see the error)");
        else if (t->describe)
            t->describe(gpuport_config_tl_settings(&r->cfg, k), f->detail, sizeof(f->detail));
        else
            snprintf(f->detail, sizeof(f->detail), "built");
    }
}

/* Local rank r uses GPU r % count, as the library does when no device is
 * current: the driver's numbering here, PCI order in an XML file or where
 * the driver is missing. */
static void rank_gpu(const opts_t *o, const report_t *r, int rank, char *bus, size_t len)
{
    bus[0] = '\0';
#if GPUPORT_HAVE_CUDA
    if (r->gpu.count > 0 && !o->xml) {
        CUdevice dev;
        if (gpuport_cu.cuDeviceGet(&dev, rank % r->gpu.count) == CUDA_SUCCESS)
            gpuport_cu.cuDeviceGetPCIBusId(bus, (int)len, dev);
    }
#endif
    if (!bus[0] && (o->xml || r->gpu.count == 0)) {
        int count = 0;
        char scratch[32];
        while (gpuport_topology_gpu(r->topo, count, scratch, sizeof(scratch)) == 0)
            count++;
        if (count > 0)
            gpuport_topology_gpu(r->topo, rank % count, bus, len);
    }
}

/* Stops at the first rank that cannot be placed: the same bad override
 * would fail every later rank again, and say so again. */
static void gather_placement(const opts_t *o, report_t *r)
{
    r->place_failed = -1;
    r->place = calloc((size_t)o->nranks, sizeof(*r->place));
    if (!r->place) {
        fprintf(stderr, "gpuport_info: no memory for %d placements\n", o->nranks);
        r->place_failed = 0;
        return;
    }
    for (int k = 0; k < o->nranks; k++) {
        place_facts_t *f = &r->place[k];
        gpuport_place_request_t req;

        rank_gpu(o, r, k, f->bus, sizeof(f->bus));
        memset(&req, 0, sizeof(req));
        req.gpu_bus_id = f->bus[0] ? f->bus : NULL;
        req.local_rank = k;
        req.local_size = o->nranks;
        req.app_cpu = -1;
        req.proxy_cpus = r->cfg.proxy_cpus;
        req.flusher_cpus = r->cfg.flusher_cpus;
        req.bind = r->cfg.bind;
        if (gpuport_place(r->topo, &req, &f->p) != GPUPORT_OK) {
            r->place_failed = k;
            return;
        }
        r->nplaced++;
    }
}

/* 0 when everything asked for was found and decided, else 1. */
static int gather(const opts_t *o, report_t *r)
{
    memset(r, 0, sizeof(*r));
    r->place_failed = -1;
    r->cfg_ok = gpuport_config_load(&r->cfg) == GPUPORT_OK;
    gather_gpu(&r->gpu);
    gather_transports(r);
    r->topo = o->xml ? gpuport_topology_load_xml(o->xml, r->topo_why, sizeof(r->topo_why))
                     : gpuport_topology_load(r->topo_why, sizeof(r->topo_why));
    if (!r->topo)
        return 1;
    if (o->topology) {
        static char text[65536];
        gpuport_topology_describe(r->topo, text, sizeof(text));
        r->topo_text = text;
    }
    if (!r->cfg_ok)
        return 1;
    gather_placement(o, r);
    return r->place_failed >= 0;
}

/* ---- the report, printed ----------------------------------------------- */

static void print_text(const opts_t *o, const report_t *r)
{
    printf("gpuport %s, licence: %s\n", gpuport_version_string(), INFO_LICENCE);
    printf("build:         CUDA %s, MPI %s, hwloc %s, ibverbs %s\n", GPUPORT_BUILD_CUDA,
           GPUPORT_BUILD_MPI, GPUPORT_BUILD_HWLOC, GPUPORT_HAVE_IBVERBS ? "yes" : "no");
    if (!GPUPORT_HAVE_CUDA)
        printf("CUDA driver:   not used: %s\n", r->gpu.why);
    else if (!r->gpu.loaded)
        printf("CUDA driver:   not usable: %s\n", r->gpu.why);
    else
        printf("CUDA driver:   %d.%d, %d device%s\n", r->gpu.version / 1000,
               r->gpu.version % 1000 / 10, r->gpu.count, r->gpu.count == 1 ? "" : "s");
    for (int d = 0; d < r->gpu.count && d < MAX_GPUS; d++)
        printf("  GPU %d: %s, PCI %s\n", d, r->gpu.dev[d].name, r->gpu.dev[d].bus);
    printf("transports:\n");
    for (int k = 0; k < r->ntransports; k++)
        printf("  %-9s %s\n", r->tl[k].name, r->tl[k].detail);
    if (!r->topo) {
        printf("topology:      not readable: %s (threads would stay unbound)\n", r->topo_why);
        return;
    }
    if (r->topo_text)
        printf("topology%s:\n%s", o->xml ? " (from XML)" : "", r->topo_text);
    if (!r->cfg_ok) {
        printf("placement:     not decided: a GPUPORT_* value is invalid (see the error)\n");
        return;
    }
    printf("placement of the proxy and flusher threads, %d rank%s on this host (GPUPORT_BIND=%d):\n",
           o->nranks, o->nranks == 1 ? "" : "s", r->cfg.bind);
    for (int k = 0; k < r->nplaced; k++) {
        const place_facts_t *f = &r->place[k];
        printf("  local rank %d: proxy PU %d, flusher PU %d (%s, GPU %s) %s\n", k, f->p.proxy_cpu,
               f->p.flusher_cpu, gpuport_place_level_name(f->p.level), f->bus[0] ? f->bus : "none",
               f->p.why);
    }
    if (r->place_failed >= 0)
        printf("  local rank %d: not placed (see the error); later ranks not tried\n",
               r->place_failed);
    for (int k = 0; k < r->nplaced; k++) {
        if (r->place[k].bus[0])
            continue;
        printf("  without a GPU the flusher thread starts only when it is first given work "
               "(shm puts from GPUPORT_SHM_ASYNC_MIN up): a host-only communicator that never "
               "has any runs none; with a GPU it starts with the communicator\n");
        break;
    }
}

static void print_json(const opts_t *o, const report_t *r)
{
    info_json_t j;
    char text[32];

    info_json_init(&j, stdout);
    info_json_open(&j, NULL, '{');
    info_json_str(&j, "gpuport", gpuport_version_string());
    info_json_str(&j, "licence", INFO_LICENCE);
    info_json_open(&j, "build", '{');
    info_json_str(&j, "cuda", GPUPORT_BUILD_CUDA);
    info_json_str(&j, "mpi", GPUPORT_BUILD_MPI);
    info_json_str(&j, "hwloc", GPUPORT_BUILD_HWLOC);
    info_json_bool(&j, "ibverbs", GPUPORT_HAVE_IBVERBS);
    info_json_close(&j);
    info_json_bool(&j, "config_valid", r->cfg_ok);

    info_json_open(&j, "cuda", '{');
    info_json_bool(&j, "usable", r->gpu.loaded);
    info_json_str(&j, "why", r->gpu.loaded ? NULL : r->gpu.why);
    snprintf(text, sizeof(text), "%d.%d", r->gpu.version / 1000, r->gpu.version % 1000 / 10);
    info_json_str(&j, "driver", r->gpu.loaded ? text : NULL);
    info_json_int(&j, "device_count", r->gpu.count);
    info_json_open(&j, "devices", '[');
    for (int d = 0; d < r->gpu.count && d < MAX_GPUS; d++) {
        info_json_open(&j, NULL, '{');
        info_json_int(&j, "index", d);
        info_json_str(&j, "name", r->gpu.dev[d].name);
        info_json_str(&j, "pci", r->gpu.dev[d].bus);
        info_json_close(&j);
    }
    info_json_close(&j);
    info_json_close(&j);

    info_json_open(&j, "transports", '[');
    for (int k = 0; k < r->ntransports; k++) {
        info_json_open(&j, NULL, '{');
        info_json_str(&j, "name", r->tl[k].name);
        info_json_bool(&j, "built", r->tl[k].built);
        info_json_str(&j, "detail", r->tl[k].detail);
        info_json_close(&j);
    }
    info_json_close(&j);

    info_json_open(&j, "topology", '{');
    info_json_str(&j, "source", o->xml ? o->xml : "this machine");
    info_json_bool(&j, "readable", r->topo != NULL);
    info_json_str(&j, "why", r->topo ? NULL : r->topo_why);
    if (r->topo_text)
        info_json_str(&j, "description", r->topo_text);
    info_json_close(&j);

    info_json_open(&j, "placement", '{');
    info_json_int(&j, "local_ranks", o->nranks);
    info_json_bool(&j, "decided", r->topo && r->cfg_ok && r->place_failed < 0);
    if (r->cfg_ok)
        info_json_int(&j, "bind", r->cfg.bind);
    info_json_open(&j, "ranks", '[');
    for (int k = 0; k < r->nplaced; k++) {
        const place_facts_t *f = &r->place[k];
        info_json_open(&j, NULL, '{');
        info_json_int(&j, "local_rank", k);
        info_json_int(&j, "proxy_pu", f->p.proxy_cpu);
        info_json_int(&j, "flusher_pu", f->p.flusher_cpu);
        info_json_str(&j, "level", gpuport_place_level_name(f->p.level));
        info_json_str(&j, "gpu", f->bus[0] ? f->bus : NULL);
        info_json_str(&j, "why", f->p.why);
        info_json_close(&j);
    }
    info_json_close(&j);
    if (r->place_failed >= 0)
        info_json_int(&j, "failed_rank", r->place_failed);
    info_json_close(&j);
    info_json_close(&j);
}

int main(int argc, char **argv)
{
    opts_t o;
    report_t r;
    int rc;

    /* line by line: the library's messages (stderr) and the report stay in
     * order when both go to one file */
    setvbuf(stdout, NULL, _IOLBF, 0);
    rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 2 : 0;
    gpuport_log_set_level(GPUPORT_LOG_WARN);
    if (o.config)
        return info_config_print(o.view);
    if (o.memory)
        return info_memory_print(o.json);

    rc = gather(&o, &r);
    if (o.json)
        print_json(&o, &r);
    else
        print_text(&o, &r);
    if (r.topo)
        gpuport_topology_free(r.topo);
    free(r.place);
    return rc;
}
