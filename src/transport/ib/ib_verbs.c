/* Run-time loading of libibverbs; see ib_verbs.h. */
#include "transport/ib/ib_verbs.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

ib_verbs_t ib_verbs;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static gpuport_status_t load_status = GPUPORT_ERR_NOT_SUPPORTED;
static char load_why[320] = "libibverbs was not loaded";

/* By name and version, as NCCL's ibvwrap does: a plain dlsym gives the
 * default version today, but a library that made another one the default
 * would hand out a function of another ABI than verbs.h's prototype, and
 * the IBVERBS_1.0 variants beside most of these already are one. The
 * handle is kept on success: the table points into it. */
static void load(const char *soname)
{
    ib_verbs_t t;
    void *lib;

    memset(&ib_verbs, 0, sizeof(ib_verbs));
    load_status = GPUPORT_ERR_NOT_SUPPORTED;
    lib = dlopen(soname, RTLD_NOW);
    if (!lib) {
        snprintf(load_why, sizeof(load_why), "libibverbs not found: dlopen(%s): %s", soname,
                 dlerror());
        return;
    }
    memset(&t, 0, sizeof(t));
#define IB_VERBS_RESOLVE(name, version)                                                         \
    t.name = (__typeof__(t.name))dlvsym(lib, #name, version);                                  \
    if (!t.name) {                                                                              \
        snprintf(load_why, sizeof(load_why), "libibverbs lacks %s (version %s) in %s", #name,   \
                 version, soname);                                                              \
        dlclose(lib);                                                                           \
        return;                                                                                 \
    }
#define IB_VERBS_RESOLVE_OPTIONAL(name, version)                                                \
    t.name = (__typeof__(t.name))dlvsym(lib, #name, version);
    IB_VERBS_REQUIRED(IB_VERBS_RESOLVE)
    IB_VERBS_OPTIONAL(IB_VERBS_RESOLVE_OPTIONAL)
#undef IB_VERBS_RESOLVE
#undef IB_VERBS_RESOLVE_OPTIONAL
    ib_verbs = t;
    load_status = GPUPORT_OK;
    load_why[0] = '\0';
}

static void load_default(void)
{
    load(IB_VERBS_SONAME);
}

static gpuport_status_t report(char *why, size_t len)
{
    if (load_status && why && len)
        snprintf(why, len, "%s", load_why);
    return load_status;
}

gpuport_status_t ib_verbs_load(char *why, size_t len)
{
    pthread_once(&load_once, load_default);
    return report(why, len);
}

/* The hooks below take the place of the first load, so that a later
 * ib_verbs_load does not load the default library over what they set. */
static void load_none(void)
{
}

void ib_verbs_install(const ib_verbs_t *table)
{
    pthread_once(&load_once, load_none);
    ib_verbs = *table;
    load_status = GPUPORT_OK;
    load_why[0] = '\0';
}

gpuport_status_t ib_verbs_load_from(const char *soname, char *why, size_t len)
{
    pthread_once(&load_once, load_none);
    load(soname);
    return report(why, len);
}
