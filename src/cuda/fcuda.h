/*
 * The flusher's CUDA side: a private context on the communicator's GPU (not
 * the application's primary context, whose launch queue the application may
 * fill), one non-blocking stream, and events that tell when queued work is
 * done. Everything here runs on the flusher thread, except
 * gpuport_fcuda_ctx_push / _pop, which set-up code on application threads
 * uses to open peer handles in the private context. Builds without CUDA
 * link gpu_none.c's versions, which are never reached because no CUDA work
 * is ever queued.
 */
#ifndef GPUPORT_FCUDA_H
#define GPUPORT_FCUDA_H

#include "flusher.h"

/* Creates the context and exercises every operation the flusher uses. */
gpuport_status_t gpuport_fcuda_start(gpuport_flusher_t *fl);
/* Flusher thread, at exit: lets queued work finish, frees the stream. The
 * context stays: channels still close their peer handles in it. */
void gpuport_fcuda_stop(gpuport_flusher_t *fl);
/* Application thread, after every channel and connection is closed. */
void gpuport_fcuda_release(gpuport_flusher_t *fl);
/* CUDA items issued in one batch at most: one event completes them all,
 * and a run of write-values among them is one cuStreamBatchMemOp (128 ops
 * per call worked on H200, 256 were refused: docs/DESIGN.md). */
#define GPUPORT_FCUDA_BATCH 128
/* room for one more batch */
int gpuport_fcuda_room(gpuport_flusher_t *fl);
/* batches queued on the GPU and not yet seen complete */
uint32_t gpuport_fcuda_inflight(gpuport_flusher_t *fl);
/* no queued CUDA work left */
int gpuport_fcuda_idle(gpuport_flusher_t *fl);
/* Issues n (<= GPUPORT_FCUDA_BATCH) CUDA items, in order, behind one event:
 * runs of write-values as batched memory operations, copies whose source
 * and destination both continue the previous copy's as one copy. Items
 * that cannot be issued complete at once with the error. */
void gpuport_fcuda_issue(gpuport_flusher_t *fl, const gpuport_work_t *w, uint32_t n);
/* Reports finished items through the done ring; returns how many. */
int gpuport_fcuda_progress(gpuport_flusher_t *fl);

gpuport_status_t gpuport_fcuda_ctx_push(gpuport_flusher_t *fl);
void gpuport_fcuda_ctx_pop(void);

#endif
