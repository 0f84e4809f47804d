/*
 * gpuport_info: what this gpuport build and machine offer, and what
 * gpuport would decide here. No MPI needed; reads the same configuration
 * table, topology module and driver loader as the library.
 *
 *   gpuport_info            version, build, CUDA driver, transports, placement
 *   gpuport_info -c         every GPUPORT_* variable: default, value here, doc
 *   gpuport_info -c --markdown   the same as README table rows
 *   gpuport_info -t         the topology as gpuport sees it
 *   gpuport_info -n N       placement for N ranks on this host (default 1)
 *   gpuport_info --xml F    use an hwloc XML topology instead of this machine's
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "config.h"
#include "gpuport/gpuport.h"
#include "log.h"
#include "topology.h"
#include "transport/transport.h"
#if GPUPORT_HAVE_CUDA
#include "cuda/cudrv.h"
#endif

typedef struct opts {
    int config, markdown, topology, nranks;
    const char *xml;
} opts_t;

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [-c [--markdown]] [-t] [-n N] [--xml FILE]\n"
            "  (none)       version, build, CUDA driver, transports, thread placement\n"
            "  -c           every GPUPORT_* variable: default, value here, description\n"
            "  --markdown   with -c: the rows of README.md's table\n"
            "  -t           the topology as gpuport sees it\n"
            "  -n N         placement for N ranks on this host (default 1)\n"
            "  --xml FILE   an hwloc XML topology instead of this machine's\n",
            prog);
}

static int parse(int argc, char **argv, opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->nranks = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c"))
            o->config = 1;
        else if (!strcmp(argv[i], "--markdown"))
            o->markdown = 1;
        else if (!strcmp(argv[i], "-t"))
            o->topology = 1;
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 4096) {
                fprintf(stderr, "%s: -n needs a rank count 1..4096, not '%s'\n", argv[0], argv[i]);
                return -1;
            }
            o->nranks = (int)n;
        } else if (!strcmp(argv[i], "--xml") && i + 1 < argc)
            o->xml = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout, argv[0]);
            exit(0);
        } else {
            fprintf(stderr, "%s: unknown option '%s'\n", argv[0], argv[i]);
            usage(stderr, argv[0]);
            return -1;
        }
    }
    return 0;
}

/* -c: the table, with the value each variable has in this environment. */
static int print_config(const opts_t *o)
{
    int bad = 0;

    if (!o->markdown)
        printf("%-28s %-10s %-12s %s\n", "variable", "default", "here", "meaning");
    for (size_t i = 0; i < gpuport_config_nvars; i++) {
        const gpuport_config_var_t *v = &gpuport_config_vars[i];
        const char *here = getenv(v->name);
        char accepted[256];

        if (o->markdown) {
            printf("| `%s` | `%s` | %s |\n", v->name, v->default_value, v->doc);
            continue;
        }
        if (here) {
            gpuport_config_t scratch;
            /* the parser names the variable and what it accepts on error */
            if (gpuport_config_parse_var(v, here, &scratch) != GPUPORT_OK)
                bad++;
        }
        gpuport_config_describe(v, accepted, sizeof(accepted));
        printf("%-28s %-10s %-12s %s\n%-28s %-10s %-12s   accepts %s\n", v->name,
               v->default_value[0] ? v->default_value : "\"\"", here ? here : "(default)", v->doc,
               "", "", "", accepted);
    }
    return bad ? 1 : 0;
}

/* CUDA driver and devices; fills why when GPUs cannot be used. */
static int print_cuda(char *why, size_t len)
{
#if GPUPORT_HAVE_CUDA
    int version = 0, n;

    printf("CUDA driver:   ");
    if (gpuport_cudrv_load(why, len) != GPUPORT_OK) {
        printf("not usable: %s\n", why);
        return 0;
    }
    gpuport_cu.cuDriverGetVersion(&version);
    n = gpuport_cudrv_device_count();
    printf("%d.%d, %d device%s\n", version / 1000, version % 1000 / 10, n, n == 1 ? "" : "s");
    for (int d = 0; d < n; d++) {
        CUdevice dev;
        char name[128] = "?", bus[32] = "?";
        if (gpuport_cu.cuDeviceGet(&dev, d) == CUDA_SUCCESS) {
            gpuport_cu.cuDeviceGetPCIBusId(bus, sizeof(bus), dev);
            gpuport_cu.cuDeviceGetName(name, sizeof(name), dev);
        }
        printf("  GPU %d: %s, PCI %s\n", d, name, bus);
    }
    return n;
#else
    snprintf(why, len, "this gpuport was built without CUDA (configure --with-cuda)");
    printf("CUDA driver:   not used: %s\n", why);
    return 0;
#endif
}

/* Each transport says for itself whether it would work here. */
static void print_transports(void)
{
    gpuport_config_t cfg;
    int cfg_ok = gpuport_config_load(&cfg) == GPUPORT_OK;

    printf("transports:\n");
    for (int k = 1; k < gpuport_transport_nkinds(); k++) {
        const gpuport_transport_ops_t *t = gpuport_transport_ops(k);
        char line[512];

        if (!t)
            snprintf(line, sizeof(line), "not built: %s", gpuport_transport_missing(k));
        else if (!cfg_ok)
            snprintf(line, sizeof(line), "not usable: a GPUPORT_* value is invalid (see above)");
        else if (t->describe)
            t->describe(&cfg, line, sizeof(line));
        else
            snprintf(line, sizeof(line), "built");
        printf("  %-9s %s\n", gpuport_transport_name(k), line);
    }
}

static int print_placement(const opts_t *o, gpuport_topology_t *topo, int gpus)
{
    gpuport_config_t cfg;
    int failed = 0;

    if (gpuport_config_load(&cfg) != GPUPORT_OK)
        return 1;
    printf("placement of the proxy and flusher threads, %d rank%s on this host (GPUPORT_BIND=%d):\n",
           o->nranks, o->nranks == 1 ? "" : "s", cfg.bind);
    for (int r = 0; r < o->nranks; r++) {
        gpuport_place_request_t req;
        gpuport_placement_t p;
        char bus[32] = "";

        memset(&req, 0, sizeof(req));
        /* local rank r uses GPU r % count, as the library does when no device
         * is current: the driver's numbering here, PCI order in an XML file
         * or where the driver is missing */
#if GPUPORT_HAVE_CUDA
        if (gpus > 0 && !o->xml) {
            CUdevice dev;
            if (gpuport_cu.cuDeviceGet(&dev, r % gpus) == CUDA_SUCCESS)
                gpuport_cu.cuDeviceGetPCIBusId(bus, sizeof(bus), dev);
        }
#endif
        if (!bus[0] && (o->xml || gpus == 0)) {
            int count = 0;
            char scratch[32];
            while (gpuport_topology_gpu(topo, count, scratch, sizeof(scratch)) == 0)
                count++;
            if (count > 0)
                gpuport_topology_gpu(topo, r % count, bus, sizeof(bus));
        }
        req.gpu_bus_id = bus[0] ? bus : NULL;
        req.local_rank = r;
        req.local_size = o->nranks;
        req.app_cpu = -1;
        req.proxy_cpus = cfg.proxy_cpus;
        req.flusher_cpus = cfg.flusher_cpus;
        req.bind = cfg.bind;
        if (gpuport_place(topo, &req, &p) != GPUPORT_OK) {
            failed = 1;
            continue;
        }
        printf("  local rank %d: proxy PU %d, flusher PU %d (%s, GPU %s) %s\n", r, p.proxy_cpu,
               p.flusher_cpu, gpuport_place_level_name(p.level), bus[0] ? bus : "none", p.why);
    }
    return failed;
}

int main(int argc, char **argv)
{
    opts_t o;
    gpuport_topology_t *topo;
    char why[256] = "", gpu_why[256] = "";
    int gpus, rc = 0;

    if (parse(argc, argv, &o))
        return 2;
    gpuport_log_set_level(GPUPORT_LOG_WARN);
    if (o.config)
        return print_config(&o);

    printf("gpuport %s\n", gpuport_version_string());
    printf("build:         CUDA %s, MPI %s, hwloc %s, ibverbs %s\n", GPUPORT_BUILD_CUDA,
           GPUPORT_BUILD_MPI, GPUPORT_BUILD_HWLOC, GPUPORT_HAVE_IBVERBS ? "yes" : "no");
    gpus = print_cuda(gpu_why, sizeof(gpu_why));
    print_transports();

    topo = o.xml ? gpuport_topology_load_xml(o.xml, why, sizeof(why))
                 : gpuport_topology_load(why, sizeof(why));
    if (!topo) {
        printf("topology:      not readable: %s (threads would stay unbound)\n", why);
        return 1;
    }
    if (o.topology) {
        static char text[65536];
        gpuport_topology_describe(topo, text, sizeof(text));
        printf("topology%s:\n%s", o.xml ? " (from XML)" : "", text);
    }
    rc = print_placement(&o, topo, gpus);
    gpuport_topology_free(topo);
    return rc;
}
