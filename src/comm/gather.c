/* The exchanges of a communicator's creation, with their limit; see gather.h. */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_INIT
#include "gather.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

/* The ranks marked 1 in absent, as "rank 2" or "ranks 2, 5, 7" (the first
 * eight, then how many in all); 0 if none. */
static int absent_list(const signed char *absent, int size, char *buf, size_t len)
{
    int n = 0, shown = 0;
    size_t used = 0;

    for (int r = 0; r < size; r++)
        n += absent[r] == 1;
    if (n == 0)
        return 0;
    used = (size_t)snprintf(buf, len, "%s", n == 1 ? "rank" : "ranks");
    for (int r = 0; r < size && shown < 8 && used < len; r++) {
        if (absent[r] != 1)
            continue;
        used += (size_t)snprintf(buf + used, len - used, "%s %d", shown++ ? "," : "", r);
    }
    if (n > shown && used < len)
        snprintf(buf + used, len - used, ", ... (%d in all)", n);
    return n;
}

/* The timeout's one message. Which ranks had not come is the bootstrap's
 * word; the MPI bootstrap tells rank 0 all of them, and every other rank
 * whether rank 0 had come. */
static void report_timeout(const gpuport_bootstrap_t *bs, uint64_t timeout_ms,
                           const signed char *absent, const char *what)
{
    char who[160];
    static const char tail[] =
        "the communicator was not created, and the bootstrap's collective cannot be "
        "cancelled: a rank that calls later completes it and times out in its next exchange";

    if (absent && absent_list(absent, bs->size, who, sizeof(who)))
        log_error("gpuport_comm_create: %s did not reach %s within GPUPORT_TIMEOUT_MS=%llu ms; "
                  "%s",
                  who, what, (unsigned long long)timeout_ms, tail);
    else
        log_error("gpuport_comm_create: not every rank reached %s within "
                  "GPUPORT_TIMEOUT_MS=%llu ms (this rank cannot tell which; with the MPI "
                  "bootstrap, rank 0's message names them); %s",
                  what, (unsigned long long)timeout_ms, tail);
}

gpuport_status_t gpuport_comm_gather(const gpuport_bootstrap_t *bs, uint64_t timeout_ms,
                                     const void *send, void *recv, size_t bytes,
                                     const char *what)
{
    signed char *absent = NULL;
    gpuport_status_t status;

    if (!bs->allgather_timed || timeout_ms == 0) {
        status = bs->allgather(bs->ctx, send, recv, bytes);
    } else {
        absent = malloc((size_t)bs->size);
        if (absent)
            for (int r = 0; r < bs->size; r++)
                absent[r] = -1;
        /* the largest limit the operation's int takes: 24 days */
        status = bs->allgather_timed(bs->ctx, send, recv, bytes,
                                     timeout_ms > INT_MAX ? INT_MAX : (int)timeout_ms, absent);
    }
    if (status == GPUPORT_ERR_TIMEOUT)
        report_timeout(bs, timeout_ms, absent, what);
    else if (status)
        log_error("gpuport_comm_create: the bootstrap's allgather (%s) failed: %s", what,
                  gpuport_status_string(status));
    free(absent);
    return status;
}
