/* turn.c — the services a turn offers to the files that apply its events and fill it
 * (driver_int.h): its transaction, its fatal error, the batches settled in it, the READY
 * grains queued in it, the workers idle again. loop.c runs the turns; everything below it
 * calls these, never into loop.c. */
#include "driver_int.h"

#include <errno.h>
#include <stdio.h>

#include "orch_error.h"
#include "support.h"

void orch_driver_set_fatal(struct orch_driver *d, int rc)
{
    if (d->fatal)
        return;
    d->fatal = rc;
    snprintf(d->fatal_why, sizeof d->fatal_why, "%s", orch_error_detail());
}

int orch_driver_fatal(const struct orch_driver *d)
{
    return d->fatal ? orch_error_set(d->fatal, "%s", d->fatal_why) : 0; /* "": no detail */
}

/* The turn's transaction is opened lazily by whatever needs to write first. */
int orch_driver_txn(struct orch_driver *d)
{
    if (orch_store_in_txn(d->job->store))
        return 0;
    return orch_store_begin(d->job->store);
}

void orch_driver_settle(struct orch_driver *d, struct orch_driver_batch *b)
{
    b->next = d->settled;
    d->settled = b;
    if (b->sent_ms > 0)
        orch_driver_measure(b->cr, b->n, orch_clock_mono_ms() - b->sent_ms, b->in_bytes);
}

int orch_driver_queue_ready(struct orch_driver *d, const struct orch_grain_ref *g)
{
    struct orch_queue_entry e = {.g = *g};
    int rc = orch_queue_push(&d->calls[g->call].q, &e);
    if (rc == 0)
        orch_driver_want(d, &d->calls[g->call]);
    return rc;
}

void orch_driver_worker_single(struct orch_driver_call *cr, orch_worker *w)
{
    struct orch_driver_wk *k = orch_driver_wk(cr, w);
    if (k->single)
        return; /* its entry, stale since, is valid again */
    if (orch__grow(&cr->single, &cr->csingle, cr->nsingle + 1, sizeof *cr->single) < 0) {
        orch_driver_set_fatal(cr->d, -ENOMEM);
        return;
    }
    k->single = true;
    cr->single[cr->nsingle++] = w;
}

void orch_driver_worker_back(struct orch_driver_call *cr, orch_worker *w)
{
    if (cr->wk && orch_driver_wk(cr, w)->held > 0) {
        /* It runs the batch that was queued behind the one it answered, from now on. */
        for (struct orch_driver_batch *b = cr->inflight; b; b = b->next) {
            if (b->worker != w || !b->queued)
                continue;
            b->queued = false;
            /* Its time in the worker began when the worker began it: a local worker says
             * when (the report that came first was read later); else it begins now. */
            int64_t now = orch_clock_mono_ms(), began;
            if (!orch_pool_began(w, &began) || began > now)
                began = now;
            b->sent_ms = began;
            int rc = orch_driver_txn(cr->d);
            if (rc == 0)
                rc = orch_store_attempts_started(cr->d->job->store, b->slot[0].attempt_row,
                                                 b->slot[b->n - 1].attempt_row,
                                                 orch_clock_wall_ms() - (now - began));
            if (rc < 0)
                orch_driver_set_fatal(cr->d, rc);
        }
        orch_driver_worker_single(cr, w);
        return;
    }
    if (!orch_driver_worker_idle(cr, w))
        return; /* its call is done: the worker was stopped */
    if (orch__grow(&cr->idle, &cr->cidle, cr->nidle + 1, sizeof *cr->idle) < 0) {
        orch_driver_set_fatal(cr->d, -ENOMEM);
        return;
    }
    cr->idle[cr->nidle++] = w;
}
