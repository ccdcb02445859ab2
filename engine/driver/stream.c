/* stream.c — streaming expansions in the driver (DESIGN §5): each chunk of children applied
 * in the turn that receives it, and the backpressure of full budgets on the worker that
 * sent it (driver_int.h). */
#include "driver_int.h"

#include <errno.h>

#include "orch_error.h"
#include "support.h"

/* The slot of batch `id` of call cr, in flight, that holds grain at generation; NULL when
 * there is none (a batch settled since: the chunk is stale). */
static struct orch_driver_slot *slot_in_flight(struct orch_driver_call *cr, uint64_t id,
                                               uint64_t grain, uint32_t generation)
{
    for (struct orch_driver_batch *b = cr->inflight; b; b = b->next) {
        if (b->id != id)
            continue;
        for (int i = 0; i < b->n; i++)
            if ((uint64_t)b->slot[i].g.grain == grain && b->slot[i].g.generation == generation)
                return &b->slot[i];
        return NULL;
    }
    return NULL;
}

/* A chunk of a streaming expansion: applied at once, in the turn's transaction, like a
 * report (its children are committed with the turn); the batch stays in flight. A chunk
 * that leaves a budget full pauses its worker (orch_driver_resume_paused). */
void orch_driver_chunk(struct orch_driver_call *cr, orch_worker *w,
                       const struct orch_wire_chunk *c)
{
    struct orch_driver *d = cr->d;
    struct orch_driver_slot *s = slot_in_flight(cr, c->batch, c->a.grain, c->a.generation);
    if (!s || s->refused) {
        d->stats->stale++;
        return;
    }
    struct orch_verdict v;
    int rc = orch_driver_txn(d);
    if (rc == 0)
        rc = orch_prop_chunk(d->prop, &s->g, &c->a, &v);
    if (rc == 0) {
        switch (v.kind) {
        case ORCH_VERDICT_SEALED:
            d->stats->chunks++;
            break;
        case ORCH_VERDICT_STALE:
        case ORCH_VERDICT_SUPPRESSED:
            d->stats->stale++;
            break;
        case ORCH_VERDICT_REFUSED: /* not the children it published: sealed failed */
            s->refused = true;
            d->stats->committed++;
            rc = orch_driver_attempt_end(d, s->attempt_row, ORCH_ATTEMPT_RECORD, v.why);
            break;
        }
    }
    if (rc < 0) {
        orch_driver_set_fatal(d, rc);
        return;
    }
    bool grains, bytes;
    if (!orch_worker_paused(w) && orch_driver_tight(d, &grains, &bytes) &&
        orch__grow(&d->paused, &d->cpaused, d->npaused + 1, sizeof *d->paused) == 0) {
        d->paused[d->npaused++] = w;
        orch_pool_pause(w, true);
    }
}

/* A page of a fed reduce's inputs (dispatch.c, fed_call), read when its worker asks: the
 * driver holds one page, never the list of every child. A request for a batch that is no
 * longer in flight (settled since: its report will be stale) is answered with an empty
 * last page, so that the worker goes on. */
void orch_driver_more(void *ctx, orch_pool *pool, orch_worker *w,
                      const struct orch_wire_more *m)
{
    (void)pool;
    struct orch_driver_call *cr = ctx;
    struct orch_driver *d = cr->d;
    struct orch_wire_inputs in = {
        .batch = m->batch, .grain = m->grain, .last = 1, .nin = (uint32_t)cr->s->nin};
    struct orch_driver_slot *s = NULL;
    for (struct orch_driver_batch *b = cr->inflight; b && !s; b = b->next)
        for (int i = 0; b->id == m->batch && i < b->n && !s; i++)
            if ((uint64_t)b->slot[i].g.grain == m->grain && b->rec[i].fed)
                s = &b->slot[i];
    int rc = 0;
    if (s) {
        bool last = true;
        rc = orch_driver_txn(d);
        if (rc == 0)
            rc = orch_prop_reduce_page(d->prop, &s->g, &s->fed_after, ORCH_PROP_PAGE_MAX,
                                       &d->inputs, &last);
        in.last = last;
        in.nchild = d->inputs.nval[0];
        in.vals = d->inputs.vals;
    }
    if (rc == 0)
        rc = orch_pool_send_inputs(w, &in);
    if (rc < 0 && rc != -EPIPE) /* EPIPE: the worker is going away, its loss comes */
        orch_driver_set_fatal(d, rc);
}

/* Backpressure on streaming expansions (DESIGN §5): a worker whose chunk filled a budget
 * is not read (orch_driver_chunk), so its next chunk, and its UDF, wait. It is read again once
 * the budgets have room — or once nothing else is in flight: then nothing else can seal the
 * grains that fill them, and the open expansion must go on to finish (a budget smaller
 * than one expansion's children would otherwise wait forever on itself). */
void orch_driver_resume_paused(struct orch_driver *d)
{
    bool grains, bytes;
    if (d->npaused == 0)
        return;
    if (orch_driver_tight(d, &grains, &bytes)) {
        /* The batches the paused workers hold: the one each streams, and one queued
         * behind it (pool.h). Any other batch in flight may still seal grains. */
        int64_t held = 0;
        for (int i = 0; i < d->npaused; i++)
            held += orch_worker_held(d->paused[i]);
        if (d->ninflight > held)
            return;
    }
    while (d->npaused > 0)
        orch_driver_unpause(d, d->paused[d->npaused - 1]);
}

/* Reads w again (and forgets it as paused); nothing when it is not paused. */
void orch_driver_unpause(struct orch_driver *d, orch_worker *w)
{
    for (int i = 0; i < d->npaused; i++) {
        if (d->paused[i] != w)
            continue;
        d->paused[i] = d->paused[--d->npaused];
        orch_pool_pause(w, false);
        return;
    }
}
