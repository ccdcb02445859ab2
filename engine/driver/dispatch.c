/* dispatch.c — batches against the store: reserve, send, fail, retry; which calls are
 * served, in which order (driver_int.h). */
#include "driver_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orch_facts.h"
#include "support.h"

/* ---- attempts and retries -------------------------------------------------------------- */

int orch_driver_attempt_end(struct orch_driver *d, int64_t row, enum orch_attempt_outcome o,
                            const char *message)
{
    return orch_store_attempt_end(d->job->store, row, o, message);
}

/* Puts an in-flight grain back to READY with generation+1 at the tail of its queue. */
static int requeue(struct orch_driver *d, struct orch_grain_ref g, bool solo)
{
    int64_t seq = orch_prop_next_seq(d->prop);
    bool done;
    int rc = orch_store_grain_requeue(d->job->store, g.grain, g.generation, seq, &done);
    if (rc < 0 || !done)
        return rc; /* no longer in flight with that generation: nothing to retry */
    struct orch_driver_call *cr = &d->calls[g.call];
    if ((rc = orch_queue_requeue(&cr->q, &g, seq, solo)) == 0)
        orch_driver_want(d, cr);
    return rc;
}

/* ---- the open batches: reserved or in flight, oldest first (invariant 6) -------------- */

static void open_link(struct orch_driver *d, struct orch_driver_batch *b)
{
    assert(!b->open);
    b->open = true;
    b->older = d->open_new;
    b->newer = NULL;
    if (d->open_new)
        d->open_new->newer = b;
    else
        d->open_old = b;
    d->open_new = b;
}

static void open_unlink(struct orch_driver *d, struct orch_driver_batch *b)
{
    if (!b->open)
        return;
    b->open = false;
    if (b->older)
        b->older->newer = b->newer;
    else
        d->open_old = b->newer;
    if (b->newer)
        b->newer->older = b->older;
    else
        d->open_new = b->older;
    b->older = b->newer = NULL;
}

int64_t orch_driver_attempt_floor(const struct orch_driver *d)
{
    const struct orch_driver_batch *b = d->open_old;
    assert(!b || b->n > 0); /* a reservation that took nothing is freed at once */
    return b ? b->slot[0].attempt_row : d->attempt_last + 1;
}

/* A call's in-flight list is short: ORCH_POOL_DEPTH batches per worker of the call at
 * most. */
struct orch_driver_batch *orch_driver_batch_take(struct orch_driver_call *cr, uint64_t id)
{
    for (struct orch_driver_batch **p = &cr->inflight; *p; p = &(*p)->next) {
        if ((*p)->id == id) {
            struct orch_driver_batch *b = *p;
            *p = b->next;
            b->next = NULL;
            open_unlink(cr->d, b);
            cr->d->ninflight--;
            struct orch_driver_wk *k = orch_driver_wk(cr, b->worker);
            assert(k->held > 0);
            if (--k->held == 0)
                orch_driver_release(cr->d, cr); /* invariant 5 */
            orch_driver_check(cr->d, cr);
            return b;
        }
    }
    return NULL;
}

static void batch_free(struct orch_driver_batch *b)
{
    if (!b)
        return;
    if (b->open) /* reserved in a turn that failed */
        open_unlink(b->cr->d, b);
    free(b->slot);
    free(b->rec);
    free(b->nval);
    free(b->vals);
    free(b->end_why);
    free(b);
}

void orch_driver_batches_free(struct orch_driver_batch *b)
{
    while (b) {
        struct orch_driver_batch *next = b->next;
        batch_free(b);
        b = next;
    }
}

static enum orch_attempt_outcome failure_attempt(enum orch_failure_kind kind)
{
    switch (kind) {
    case ORCH_FAILURE_ERROR:
        return ORCH_ATTEMPT_ERROR;
    case ORCH_FAILURE_CRASH:
        return ORCH_ATTEMPT_CRASH;
    case ORCH_FAILURE_TIMEOUT:
        return ORCH_ATTEMPT_TIMEOUT;
    case ORCH_FAILURE_RECORD: /* typed failures come in answers, not as a batch's */
    case ORCH_FAILURE_GROUP:
    case ORCH_FAILURE_EXHAUSTED: /* made here, from an attempt failure */
    case ORCH_FAILURE__COUNT:
        break;
    }
    assert(!"not the failure of a whole batch");
    return ORCH_ATTEMPT_ERROR;
}

/* A batch of several grains is split: each is retried alone, not counted. A grain that
 * failed alone counts the attempt against `retries`, and is sealed Failed (exhausted)
 * past it. */
int orch_driver_batch_failed(struct orch_driver *d, struct orch_driver_call *cr,
                             struct orch_driver_batch *b, enum orch_failure_kind kind,
                             const char *message)
{
    enum orch_attempt_outcome ao = failure_attempt(kind);
    int rc = orch_driver_txn(d);
    d->stats->attempts_failed++;
    for (int i = 0; i < b->n && rc == 0; i++) {
        struct orch_driver_slot *s = &b->slot[i];
        if ((rc = orch_driver_attempt_end(d, s->attempt_row, ao, message)) < 0)
            break;
        /* A sibling under a GroupFailure barrier is neither retried (it would be
         * dispatched under the barrier) nor charged: it is sealed Suppressed. */
        bool barred;
        if ((rc = orch_prop_barred(d->prop, &s->g, &barred)) < 0 || barred)
            continue;
        if (b->n > 1) {
            rc = requeue(d, s->g, true);
            continue;
        }
        if ((rc = orch_prop_failure_row(d->prop, &s->g, kind, message)) < 0)
            break;
        s->g.attempts++;
        if ((int)s->g.attempts > cr->c->opts.retries) {
            char why[512];
            snprintf(why, sizeof why, "gave up after %u attempts; last: %s", s->g.attempts,
                     message);
            bool accepted;
            rc = orch_prop_fail(d->prop, &s->g, ORCH_FAILURE_EXHAUSTED, why, &accepted);
        } else {
            rc = requeue(d, s->g, true);
        }
    }
    return rc;
}

int orch_driver_batch_unrun(struct orch_driver *d, struct orch_driver_batch *b,
                            const char *message)
{
    char why[640];
    snprintf(why, sizeof why,
             "not started: worker %d was lost while it ran the batch ahead of this one (%s)",
             orch_worker_pid(b->worker), message);
    return orch_driver_batch_interrupt(d, b, why);
}

int orch_driver_batch_interrupt(struct orch_driver *d, struct orch_driver_batch *b,
                                const char *why)
{
    int rc = orch_driver_txn(d);
    for (int i = 0; i < b->n && rc == 0; i++) {
        struct orch_driver_slot *s = &b->slot[i];
        bool barred;
        if ((rc = orch_driver_attempt_end(d, s->attempt_row, ORCH_ATTEMPT_INTERRUPTED, why)) ==
                0 &&
            (rc = orch_prop_barred(d->prop, &s->g, &barred)) == 0 && !barred)
            rc = requeue(d, s->g, false);
    }
    return rc;
}

/* ---- reservation ----------------------------------------------------------------------- */

/* Input values a reservation keeps in d->inputs between grains; a larger list is handed
 * to its batch or freed after use (take). */
#define INPUTS_KEEP 4096

/* One reservation in progress: the store's side of queue.h's rule. */
struct reserving {
    struct orch_driver *d;
    struct orch_driver_call *cr;
    struct orch_driver_batch *b;
    bool feed;       /* a reduce whose inputs may go page by page (fed_call) */
    bool entry_fed;  /* the entry look() loaded is fed: take() marks its record so */
};

/* Whether cr's grains may be fed (wire.h: a record's `fed`): a reduce's inputs are then
 * sent page by page as its worker asks for them (stream.c, orch_driver_more), so that the
 * driver holds no list of every child of a parent; a reduce over a million children would
 * otherwise hold it (32 bytes a value) and its encoding at once. Only a parent of more
 * children than one page is fed (look): each page is a round trip through the driver's
 * loop, which a reduce of fifty children would wait on for nothing (0.5 s of 2 s in
 * scripts/bench/autobatch, 2,000 reduces of 50). Not for a remote worker,
 * whose batch carries the values' bytes (pool.h), nor for a call with batch_bytes, whose
 * cut counts the bytes of every input of a batch as it is reserved. */
static bool fed_call(const struct orch_driver_call *cr)
{
    return cr->s->op == ORCH_OP_REDUCE && cr->d->opts->launcher == ORCH_LAUNCHER_LOCAL &&
           cr->c->opts.batch_bytes <= 0;
}

/* Loads the entry's inputs (kept in d->inputs for take) and, with batch_bytes, their size:
 * read from LMDB without copying, in a read transaction that lives for one reservation. */
static int look(void *ctx, const struct orch_queue_entry *e, uint64_t *bytes)
{
    struct reserving *r = ctx;
    struct orch_driver *d = r->d;
    r->entry_fed = false;
    if (r->feed) { /* no values until the worker asks (fed_call), past a page */
        int64_t kids;
        int rc = orch_prop_reduce_children(d->prop, &e->g, &kids);
        if (rc < 0)
            return rc;
        if (kids > ORCH_PROP_PAGE_MAX) {
            memset(d->inputs.nval, 0, sizeof d->inputs.nval);
            d->inputs.nvals = 0;
            d->inputs.first_input = 0;
            r->entry_fed = true;
            return 0;
        }
    }
    int rc = orch_prop_inputs(d->prop, &e->g, &d->inputs);
    if (rc < 0 || r->cr->c->opts.batch_bytes <= 0)
        return rc;
    for (size_t k = 0; k < d->inputs.nvals; k++) {
        const void *data;
        size_t len = 0;
        if (!d->inputs.vals[k].present)
            continue;
        if (!r->b->rtxn && (rc = orch_payload_read_begin(d->job->payloads, &r->b->rtxn)) < 0)
            return rc;
        if ((rc = orch_payload_read(r->b->rtxn, d->inputs.vals[k].payload, &data, &len)) < 0)
            return rc;
        *bytes += len;
    }
    return 0;
}

/* The entry whose inputs look() loaded goes IN_FLIGHT, and into the batch; unless it left
 * READY meanwhile (sealed by a barrier): stale, 0. Its attempt row is begun with the
 * batch's others (begin_attempts). */
static int take(void *ctx, const struct orch_queue_entry *e)
{
    struct reserving *r = ctx;
    struct orch_driver *d = r->d;
    struct orch_driver_batch *b = r->b;
    bool taken;
    int rc = orch_store_grain_dispatch(d->job->store, e->g.grain, e->g.generation, &taken);
    if (rc < 0 || !taken)
        return rc;
    assert(b->n < b->cap);
    struct orch_driver_slot *s = &b->slot[b->n];
    s->g = e->g;
    s->attempt_row = 0; /* begun with the batch's others once it is complete (reserve) */
    s->first_input = d->inputs.first_input;
    s->fed_after = -1;
    if (e->g.in0_state == ORCH_ITEM_PRESENT && e->g.in0_size != ORCH_IN0_SIZE_UNKNOWN)
        b->in_bytes += e->g.in0_size;
    /* Append the wire record; its pointers are fixed up when the batch is complete. The
     * values are counted as they come (nvals), so that n adds cost O(n). The +1: a reduce
     * over no surviving child has no values, and vals must still be an allocation. */
    struct orch_wire_record *w = &b->rec[b->n];
    w->grain = (uint64_t)e->g.grain;
    w->generation = e->g.generation;
    w->attempt = e->g.attempts + 1;
    w->nin = (uint32_t)r->cr->s->nin;
    w->fed = r->entry_fed;
    size_t nvals = d->inputs.nvals;
    if (b->nvals == 0 && !b->vals && nvals >= INPUTS_KEEP) {
        /* A large input list (a reduce over many children) is handed to the batch rather
         * than copied: one copy of a million values less at the peak, and d->inputs does
         * not keep an array that large for the rest of the run. */
        b->vals = d->inputs.vals;
        b->cap_vals = d->inputs.cap;
        d->inputs.vals = NULL;
        d->inputs.cap = 0;
    } else {
        if (orch__grow_n(&b->vals, &b->cap_vals, b->nvals + d->inputs.nvals + 1,
                         sizeof *b->vals) < 0)
            return -ENOMEM;
        if (d->inputs.nvals) /* vals is NULL then */
            memcpy(b->vals + b->nvals, d->inputs.vals, d->inputs.nvals * sizeof *b->vals);
        if (d->inputs.cap > INPUTS_KEEP)
            orch_prop_inputs_free(&d->inputs); /* the same: give a large array back */
    }
    b->nvals += nvals;
    memcpy(b->nval + (size_t)b->n * ORCH_PLAN_MAX_INPUTS, d->inputs.nval,
           sizeof d->inputs.nval);
    b->n++;
    return 1;
}

/* The attempt rows of a complete batch, in slot order, a few statements for the whole
 * batch (orch_store_attempts_begin). */
static int begin_attempts(struct orch_driver *d, struct orch_driver_batch *b)
{
    struct orch_grain_at *g = malloc((size_t)b->n * sizeof *g);
    if (!g)
        return -ENOMEM;
    for (int i = 0; i < b->n; i++)
        g[i] = (struct orch_grain_at){b->slot[i].g.grain, b->slot[i].g.generation};
    int64_t first;
    int rc = orch_store_attempts_begin(d->job->store, g, (size_t)b->n,
                                       orch_worker_pid(b->worker), orch_worker_host(b->worker),
                                       orch_worker_slurm_job(b->worker), b->id, &first);
    free(g);
    if (rc < 0)
        return rc;
    for (int i = 0; i < b->n; i++)
        b->slot[i].attempt_row = first + i;
    d->attempt_last = first + b->n - 1;
    return 0;
}

/* ---- sizing ---------------------------------------------------------------------------- */

/* The room left in a budget, which a call that fills it must not pass by more than a
 * grain's worth (sizing.h); --staged admits without budgets. */
static int64_t room(bool fills, int64_t budget, int64_t used, bool staged)
{
    if (!fills || staged)
        return ORCH_SIZING_NO_ROOM_LIMIT;
    return used < budget ? budget - used : 0;
}

/* The rule's sizes for cr: its next dispatch, or (capacity) what one dispatch takes once
 * grown, whatever is queued. */
static int sized(const struct orch_driver_call *cr, bool capacity)
{
    const struct orch_driver *d = cr->d;
    const struct orch_run_opts *o = d->opts;
    if (o->batch_fixed)
        return cr->c->opts.batch == ORCH_BATCH_AUTO ? 1 : cr->c->opts.batch;
    int64_t target = o->batch_target_ms > 0 ? o->batch_target_ms : ORCH_SIZING_TARGET_MS;
    struct orch_sizing_room left = {
        .grains =
            room(cr->grows_grains, d->max_unsealed, orch_prop_unsealed(d->prop), o->staged),
        .bytes = room(cr->grows_bytes, d->max_live, orch_prop_live_bytes(d->prop), o->staged),
    };
    if (capacity)
        return orch_sizing_capacity(&cr->sizing, target, cr->c->opts.batch_bytes, &left);
    uint64_t queued = orch_queue_count(&cr->q);
    return orch_sizing_dispatch(&cr->sizing, queued ? queued : 1, cr->c->opts.workers, target,
                                cr->c->opts.batch_bytes, &left);
}

int orch_driver_dispatch_size(const struct orch_driver_call *cr)
{
    return sized(cr, false);
}

int orch_driver_dispatch_capacity(const struct orch_driver_call *cr)
{
    return sized(cr, true);
}

/* A batch for `size` grains (orch_driver_dispatch_size), at most what is queued: a
 * reservation never adds more than it consumes. */
static struct orch_driver_batch *batch_new(struct orch_driver *d, struct orch_driver_call *cr,
                                           orch_worker *w, int size)
{
    uint64_t queued = orch_queue_count(&cr->q);
    size_t cap = queued < (uint64_t)size ? (size_t)queued : (size_t)size;
    assert(cap >= 1);
    struct orch_driver_batch *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->cap = (int)cap;
    b->slot = calloc(cap, sizeof *b->slot);
    b->rec = calloc(cap, sizeof *b->rec);
    b->nval = calloc(cap * ORCH_PLAN_MAX_INPUTS, sizeof *b->nval);
    if (!b->slot || !b->rec || !b->nval) {
        batch_free(b);
        return NULL;
    }
    b->id = ++d->next_batch;
    b->cr = cr;
    b->worker = w;
    b->end_as = ORCH_ATTEMPT_INTERRUPTED;
    return b;
}

/* Takes a batch from cr's queue for worker w (queue.h's rule). *out is NULL when every
 * entry consumed was stale. */
static int reserve(struct orch_driver *d, struct orch_driver_call *cr, orch_worker *w,
                   struct orch_driver_batch **out)
{
    *out = NULL;
    if (d->opts->order == ORCH_ORDER_RANDOM && !cr->q.seeded) {
        /* One generator per call, so that a call's draws do not depend on the others'. */
        cr->q.rng = d->opts->seed ^ ((uint64_t)cr->call * UINT64_C(0x9e3779b97f4a7c15));
        cr->q.seeded = true;
    }
    int size = orch_driver_dispatch_size(cr);
    struct orch_driver_batch *b = batch_new(d, cr, w, size);
    if (!b)
        return -ENOMEM;
    struct reserving ctx = {.d = d, .cr = cr, .b = b, .feed = fed_call(cr)};
    struct orch_queue_reservation rule = {
        .batch = size,
        .batch_bytes = cr->c->opts.batch_bytes,
        .parent = cr->c->opts.reserve == ORCH_RESERVE_PARENT,
        .rng = d->opts->order == ORCH_ORDER_RANDOM ? &cr->q.rng : NULL,
        .ctx = &ctx,
        .look = look,
        .take = take,
    };
    int rc = orch_queue_reserve(&cr->q, &rule);
    orch_payload_read_end(b->rtxn);
    b->rtxn = NULL;
    if (rc <= 0) {
        batch_free(b);
        return rc;
    }
    assert(rc == b->n);
    if ((rc = begin_attempts(d, b)) < 0) {
        batch_free(b);
        return rc;
    }
    /* Fix up the record pointers now that the arrays no longer move. */
    size_t off = 0;
    for (int k = 0; k < b->n; k++) {
        b->rec[k].nval = b->nval + (size_t)k * ORCH_PLAN_MAX_INPUTS;
        b->rec[k].vals = b->vals + off;
        for (uint32_t j = 0; j < b->rec[k].nin; j++)
            off += b->rec[k].nval[j];
    }
    assert(off == b->nvals);
    open_link(d, b);
    *out = b;
    return 0;
}

/* ---- dispatch and sending -------------------------------------------------------------- */

void orch_driver_want(struct orch_driver *d, struct orch_driver_call *cr)
{
    if (cr->listed)
        return;
    if (orch__grow(&d->ready, &d->cready, d->nready + 1, sizeof *d->ready) < 0) {
        orch_driver_set_fatal(d, -ENOMEM);
        return;
    }
    cr->listed = true;
    d->ready[d->nready++] = cr->call;
}

bool orch_driver_any_queued(const struct orch_driver *d)
{
    /* A held call's grains (--staged) are work only once it is released (workers.c). */
    for (int k = 0; k < d->nready; k++)
        if (orch_queue_count(&d->calls[d->ready[k]].q) > 0 &&
            !orch_driver_held(d, &d->calls[d->ready[k]]))
            return true;
    return false;
}

/* Sorts d->ready by rank. Insertion sort: the list keeps its order from turn to turn, and
 * only the calls listed since the last turn are out of place. */
static void sort_ready(struct orch_driver *d)
{
    for (int i = 1; i < d->nready; i++) {
        int c = d->ready[i], k = i - 1;
        while (k >= 0 && d->calls[d->ready[k]].rank > d->calls[c].rank) {
            d->ready[k + 1] = d->ready[k];
            k--;
        }
        d->ready[k + 1] = c;
    }
}

/* The worker that takes cr's next batch. An idle one, while the budgets let cr run one
 * more batch (invariant 5). Else, with no idle worker of cr left, one that holds a single
 * batch takes a second, queued behind it (pool.h), so that it need not wait on the driver
 * when it is done; but not the grains that cr's starting workers will take, one batch
 * each (workers.c starts them for those), and not while a call served before cr (deeper)
 * was left with idle workers that the budgets keep waiting (`blocked`): a second batch
 * keeps its worker's share of the budgets for one batch more, which their grains should
 * get first (DESIGN §5). NULL: none; *second says which. */
static orch_worker *taker(struct orch_driver *d, struct orch_driver_call *cr, bool blocked,
                          bool *second)
{
    *second = false;
    if (cr->nidle > 0)
        return orch_driver_fits(d, cr) ? cr->idle[cr->nidle - 1] : NULL;
    if (blocked || orch_queue_count(&cr->q) <=
                       (uint64_t)orch_pool_starting(cr->pool) *
                           (uint64_t)orch_driver_dispatch_size(cr))
        return NULL;
    while (cr->nsingle > 0) {
        orch_worker *w = cr->single[cr->nsingle - 1];
        struct orch_driver_wk *k = orch_driver_wk(cr, w);
        if (k->held == 1) {
            *second = true;
            return w;
        }
        k->single = false; /* stale: it holds none (lost) or two since */
        cr->nsingle--;
    }
    return NULL;
}

int orch_driver_dispatch(struct orch_driver *d)
{
    /* Downstream calls first: when the budget is tight, finishing what is in the
     * pipeline drains it and frees room for admission (DESIGN §5). Only the calls with
     * queued grains are looked at (invariant 6); one whose queue is empty leaves the list
     * until a grain is queued for it again. */
    orch_driver_take_backs(d); /* before the calls it queues grains for are sorted */
    sort_ready(d);
    if (d->opts->staged)
        orch_driver_staged_settle(d);
    /* A full budget (DESIGN §5: "when full, the driver serves downstream queues first").
     * A call that would make it fuller — an expand when the unsealed grains are at their
     * budget, a call that makes live intermediate payloads when their bytes are — is not
     * served while a deeper call is left with queued grains after its turn to be served:
     * its idle workers wait, and the workers downstream drain what is in the pipeline. The
     * deepest call with queued grains is never held, so some call is always served: the
     * pipeline moves whatever the budgets (no deadlock; tests/e2e/admission.sh runs a
     * budget smaller than one expansion). Calls that only consume are served as always. */
    bool tight_grains = false, tight_bytes = false;
    bool tight = !d->opts->staged && orch_driver_tight(d, &tight_grains, &tight_bytes);
    int backlog = -1; /* the depth of the deepest call left with queued grains; -1: none */
    /* Whether a budget held back work that would have been served now, and which. */
    bool held_grains = false, held_bytes = false;
    bool blocked = false;
    int kept = 0;
    for (int k = 0; k < d->nready; k++) {
        struct orch_driver_call *cr = &d->calls[d->ready[k]];
        assert(cr->pool); /* only a call with a statement has grains */
        bool held = orch_driver_held(d, cr); /* --staged: stays listed, unserved */
        if (!held && tight && cr->depth < backlog &&
            ((tight_grains && cr->grows_grains) || (tight_bytes && cr->grows_bytes))) {
            held = true;
            if (cr->nidle > 0 && orch_queue_count(&cr->q) > 0 && orch_driver_fits(d, cr)) {
                held_grains = held_grains || (tight_grains && cr->grows_grains);
                held_bytes = held_bytes || (tight_bytes && cr->grows_bytes);
            }
        }
        bool second;
        orch_worker *w;
        while (!held && orch_queue_count(&cr->q) > 0 &&
               (w = taker(d, cr, blocked, &second)) != NULL) {
            int rc = orch_driver_txn(d);
            struct orch_driver_batch *b;
            if (rc == 0)
                rc = reserve(d, cr, w, &b);
            if (rc < 0)
                return rc;
            if (!b)
                continue; /* every entry taken was stale */
            if (second) {
                cr->nsingle--;
                orch_driver_wk(cr, w)->single = false;
            } else {
                cr->nidle--;
                orch_driver_worker_busy(cr, w);
                orch_driver_hold(d, cr); /* invariant 5 */
                orch_driver_worker_single(cr, w);
            }
            orch_driver_wk(cr, w)->held++;
            orch_driver_served(d, cr);
            b->next = d->to_send;
            d->to_send = b;
        }
        /* Idle workers that the budgets keep waiting: their grains go before a second
         * batch of any call served after this one (taker). */
        blocked = blocked || (!held && cr->nidle > 0 && orch_queue_count(&cr->q) > 0);
        if (orch_queue_count(&cr->q) > 0) {
            d->ready[kept++] = cr->call;
            if (backlog < 0)
                backlog = cr->depth;
        } else {
            cr->listed = false;
            orch_driver_check(d, cr); /* stale entries may have been its last */
        }
    }
    d->nready = kept;
    d->stats->held += held_grains || held_bytes;
    d->stats->held_grains += held_grains;
    d->stats->held_bytes += held_bytes;
    return 0;
}

void orch_driver_send(struct orch_driver *d)
{
    /* In the order of reservation: a worker given two batches in one turn runs the first
     * reserved first. */
    struct orch_driver_batch *b = NULL;
    while (d->to_send) {
        struct orch_driver_batch *next = d->to_send->next;
        d->to_send->next = b;
        b = d->to_send;
        d->to_send = next;
    }
    while (b) {
        struct orch_driver_batch *next = b->next;
        struct orch_driver_call *cr = b->cr;
        b->next = cr->inflight;
        cr->inflight = b;
        d->ninflight++;
        struct orch_wire_batch wb = {.id = b->id, .nrec = (uint32_t)b->n, .rec = b->rec};
        d->stats->batches++;
        int64_t sent = orch_clock_mono_ms();
        int rc = orch_pool_dispatch(cr->pool, b->worker, &wb);
        if (rc == 0)
            b->sent_ms = sent; /* a batch never sent is not measured (orch_driver_measure) */
        b->queued = rc == 0 && orch_worker_held(b->worker) > 1;
        if (rc == 0 && b->cr->resign_in < 0 && b->cap_vals >= INPUTS_KEEP) {
            /* A large input list (a reduce over many children) is in the worker's frame
             * now, and nothing reads it again (orch_driver_resign reads a root's path
             * only): it is not kept for the batch's flight, when the reduce's report and
             * the reclamation of its inputs are the driver's next transients. */
            free(b->vals);
            b->vals = NULL;
            b->cap_vals = 0;
            for (int k = 0; k < b->n; k++)
                b->rec[k].vals = NULL;
        }
        if (rc == -EIO || rc == -ENOMEM) {
            /* A remote worker's inputs could not be read from the payload store (pool_values.c,
             * orch_pool__put_batch_values): not the batch's fault and no retry helps, so the
             * job stops, as for a local worker's STORAGE report. Out of memory encoding the
             * batch: the job stops too (the worker, idle, would otherwise stay reserved and
             * its call wait for it forever). */
            orch_driver_set_fatal(d, rc);
        }
        if (rc == -E2BIG) {
            /* A remote worker's batch carries its input values, and these are over what
             * one frame holds: the batch's fault, as an attempt failure (a batch of
             * several grains is split, a grain alone is charged), not a lost worker,
             * whose requeue would send it again forever. The worker got nothing and is
             * idle again. */
            char why[256];
            snprintf(why, sizeof why,
                     "the inputs of the batch are over what a batch for a remote worker "
                     "carries (%zu MiB)",
                     (size_t)ORCH_WIRE_MAX_BODY >> 20);
            orch_driver_batch_take(cr, b->id);
            orch_driver_settle(d, b);
            rc = orch_driver_batch_failed(d, cr, b, ORCH_FAILURE_ERROR, why);
            if (rc < 0)
                orch_driver_set_fatal(d, rc);
            orch_driver_worker_back(cr, b->worker);
            b = next;
            continue;
        }
        if (rc < 0) {
            /* The worker went away between reservation and sending: the batch never ran,
             * so its grains go back to their queue without being charged an attempt. */
            orch_driver_batch_take(cr, b->id);
            rc = orch_driver_txn(d);
            for (int i = 0; i < b->n && rc == 0; i++) {
                rc = orch_driver_attempt_end(d, b->slot[i].attempt_row, ORCH_ATTEMPT_CRASH,
                                             "the worker was lost before the batch reached it");
                if (rc == 0)
                    rc = requeue(d, b->slot[i].g, false);
            }
            if (rc < 0)
                orch_driver_set_fatal(d, rc);
            orch_driver_settle(d, b);
        }
        b = next;
    }
}

/* ---- the order of the calls ------------------------------------------------------------ */

/* Orders the calls by the depth of their statements in the plan's DAG (a statement is
 * one deeper than the deepest producer of its inputs; sources are depth 0), deepest
 * first, so that dispatch serves downstream queues first whatever the order in which
 * the pipeline declared its calls. */
int orch_driver_call_order(struct orch_driver *d)
{
    int ns = orch_plan_nstmts(d->plan);
    int *depth = calloc((size_t)ns + 1, sizeof *depth);
    d->order = calloc((size_t)d->ncalls + 1, sizeof *d->order);
    if (!depth || !d->order) {
        free(depth);
        return -ENOMEM;
    }
    /* Relax ns times: the longest path in a DAG of ns statements has at most ns edges. */
    for (int round = 0; round < ns; round++) {
        bool changed = false;
        for (int i = 0; i < ns; i++) {
            const struct orch_stmt *st = orch_plan_stmt(d->plan, i);
            for (int j = 0; j < st->nin; j++) {
                int prod = orch_plan_port(d->plan, st->in[j].port)->producer;
                if (prod >= 0 && depth[prod] + 1 > depth[i]) {
                    depth[i] = depth[prod] + 1;
                    changed = true;
                }
            }
        }
        if (!changed)
            break;
    }
    for (int i = 0; i < d->ncalls; i++)
        d->order[i] = i;
    /* Insertion sort by depth, deepest first; ties keep declaration order. */
    for (int i = 1; i < d->ncalls; i++) {
        int c = d->order[i], dc = orch_plan_call(d->plan, c)->stmt;
        int key = dc >= 0 ? depth[dc] : -1, k = i - 1;
        while (k >= 0) {
            int ok = orch_plan_call(d->plan, d->order[k])->stmt;
            if ((ok >= 0 ? depth[ok] : -1) >= key)
                break;
            d->order[k + 1] = d->order[k];
            k--;
        }
        d->order[k + 1] = c;
    }
    for (int k = 0; k < d->ncalls; k++)
        d->calls[d->order[k]].rank = k;
    for (int i = 0; i < d->ncalls; i++) {
        int st = orch_plan_call(d->plan, i)->stmt;
        d->calls[i].depth = st >= 0 ? depth[st] : -1;
    }
    free(depth);
    return 0;
}
