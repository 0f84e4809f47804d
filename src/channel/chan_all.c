/*
 * A channel to every rank at once, collectively, with one outcome on every
 * rank: the pairs created in increasing rank order by the kind's own
 * creation, then every rank's outcome told to every rank, and all channels
 * kept or none. The kind (chan_int.h's chan_all_kind_t) says how one pair
 * is created, told of a failure, destroyed, and stored in the caller's
 * array; port channels' is here (gpuport_channel_create_all), peer
 * channels' in peerchan.c (gpuport_peer_channel_create_all). Application
 * threads.
 */
#define GPUPORT_LOG_SUBSYS_ID GPUPORT_SUBSYS_CHANNEL
#include <stdio.h>
#include <stdlib.h>

#include "bootstrap.h"
#include "chan_int.h"

#define TAG_CREATE_ALL 0x4752

/* Every rank's first failure, told to every rank it met, so that all
 * decide alike: the failure of the lowest rank that had one of its own
 * (not GPUPORT_ERR_PEER, which only repeats another's), else
 * GPUPORT_ERR_PEER; GPUPORT_OK only where every rank succeeded. Ranks that
 * did not answer in the creation are not waited for again: they count as
 * GPUPORT_ERR_TIMEOUT, as the creation did. */
static gpuport_status_t all_agree(gpuport_comm_t comm, const char *call, gpuport_status_t mine,
                                  const gpuport_status_t *with, gpuport_status_t *all,
                                  int *who_p)
{
    gpuport_bs_session_t session;
    char awaited[160];
    int32_t out = mine, in;
    gpuport_status_t verdict = GPUPORT_OK, st;

    for (int p = 0; p < comm->size; p++) {
        all[p] = p == comm->rank ? mine : GPUPORT_ERR_TIMEOUT;
        if (p == comm->rank || with[p] == GPUPORT_ERR_TIMEOUT)
            continue;
        snprintf(awaited, sizeof(awaited), "rank %d to tell the outcome of its %s", p, call);
        st = gpuport_bs_meet(&session, &comm->bs, p, call, comm->config.timeout_ms,
                             &comm->bs_attempts[p], awaited);
        if (!st)
            st = gpuport_bs_exchange(&session, TAG_CREATE_ALL, &out, &in, sizeof(in),
                                     "the outcome of its side");
        if (!st)
            all[p] = (gpuport_status_t)in;
    }
    for (int p = 0; p < comm->size && !verdict; p++)
        if (all[p] && all[p] != GPUPORT_ERR_PEER)
            verdict = all[*who_p = p];
    for (int p = 0; p < comm->size && !verdict; p++)
        verdict = all[*who_p = p];
    return verdict;
}

/* Destroys what was made, in decreasing rank order (a kind whose destroy
 * waits for the peer's, as a memory channel's, is then met in an order
 * without a cycle, as the creation's); a channel whose destroy failed
 * (kept, see gpuport_channel_destroy) stays in channels, the others are
 * NULL. */
static void all_undo(const chan_all_kind_t *kind, gpuport_comm_t comm, void **made,
                     void *channels)
{
    for (int p = comm->size - 1; p >= 0; p--) {
        if (made[p] && kind->destroy(made[p]) == GPUPORT_OK)
            made[p] = NULL;
        if (channels)
            kind->store(channels, p, made[p]);
    }
}

/* Increasing rank order pairs every two ranks without a cycle of waits: a
 * rank waits only for ranks that have met every lower rank they share with
 * it. After a failure, this side's own arguments included, each later peer
 * is still met, with the failure told (the kind's create with prior), so
 * none is left waiting; then every rank learns every rank's outcome
 * (all_agree) and all return the same one, keeping all channels or none. */
gpuport_status_t chan_create_all(const chan_all_kind_t *kind, gpuport_comm_t comm,
                                 gpuport_mem_t src, gpuport_mem_t dst, int with_self,
                                 void *channels)
{
    const char *call = kind->call;
    void **made;
    gpuport_status_t status, *with, verdict;
    int who = -1;

    if (!gpuport_comm_live(comm)) {
        log_error("%s: comm %p is not a live communicator", call, (void *)comm);
        return GPUPORT_ERR_INVALID_ARG; /* no peer can be told */
    }
    made = calloc((size_t)comm->size, sizeof(*made));
    with = calloc(2 * (size_t)comm->size, sizeof(*with));
    if (!made || !with) {
        free(made);
        free(with);
        log_error("%s: no memory for %d ranks' results", call, comm->size);
        return GPUPORT_ERR_NO_MEMORY;
    }
    status = chan_check_args(call, "channels", comm, comm->rank, src, dst, channels);
    if (!status && with_self != 0 && with_self != 1) {
        log_error("%s: with_self is %d, not 0 or 1", call, with_self);
        status = GPUPORT_ERR_INVALID_ARG;
    }
    if (status)
        src = dst = NULL; /* refused: the peers are told, over no region */
    for (int p = 0; p < comm->size; p++) {
        if (p == comm->rank && (with_self != 1 || status))
            continue;
        with[p] = kind->create(call, comm, p, src, dst, status, &made[p]);
        if (with[p] && !status)
            status = with[p];
    }
    verdict = all_agree(comm, call, status, with, with + comm->size, &who);
    if (verdict == GPUPORT_OK) {
        for (int p = 0; p < comm->size; p++)
            kind->store(channels, p, made[p]);
    } else {
        if (verdict != status)
            log_error("%s: rank %d's failure (%s) is every rank's outcome: no channel is kept "
                      "(rank %d's log says why)",
                      call, who, gpuport_status_string(verdict), who);
        all_undo(kind, comm, made, channels);
    }
    free(made);
    free(with);
    return verdict;
}

/* gpuport_channel_create_all's pair: a port channel (channel.c), or with
 * prior the peer told of this rank's failure. */
static gpuport_status_t all_create(const char *call, gpuport_comm_t comm, int peer,
                                   gpuport_mem_t src, gpuport_mem_t dst, gpuport_status_t prior,
                                   void **ch_p)
{
    gpuport_channel_t ch;
    gpuport_status_t status =
        chan_create(call, "channels", comm, peer, src, dst, 0, prior, ch_p, &ch, NULL);

    if (!status)
        *ch_p = ch;
    return status;
}

static gpuport_status_t all_destroy(void *ch)
{
    return gpuport_channel_destroy(ch);
}

static void all_store(void *channels, int peer, void *ch)
{
    ((gpuport_channel_t *)channels)[peer] = ch;
}

static const chan_all_kind_t port_all = {
    .call = "gpuport_channel_create_all",
    .create = all_create,
    .destroy = all_destroy,
    .store = all_store,
};

gpuport_status_t gpuport_channel_create_all(gpuport_comm_t comm, gpuport_mem_t src,
                                            gpuport_mem_t dst, int with_self,
                                            gpuport_channel_t *channels)
{
    return chan_create_all(&port_all, comm, src, dst, with_self, channels);
}
