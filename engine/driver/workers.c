/* workers.c — when the calls' workers start and when they stop (driver_int.h).
 *
 * Start on demand. A pool starts with no process (pool.h). At the end of each turn, a call
 * with queued grains gets one more worker while its queue holds more than its idle and
 * starting workers can take, one batch each (queued > (idle + starting) * batch), up to its
 * `workers`. Busy workers are not counted: the grains queued behind them would wait a
 * whole batch, and `workers` is the parallelism the user asked for. Neither are the
 * budgets: a worker started while the budget is taken waits, idle, and dispatch serves its
 * call in its turn once the budget frees, as when every worker was started with the job;
 * were it not started, a downstream call could starve behind an upstream one that keeps
 * the budget busy. So `workers=1024` on three grains starts three processes, and a call
 * that never gets a grain starts none (but for one started ahead, below).
 *
 * A few steps ahead. A worker takes a while to start (exec, loading its libraries and its
 * UDF, init: 25 ms of CPU for a built-in, seconds for a model), and a call's first grain
 * would wait for it: a chain of calls would run at the pace of its workers' starts, one
 * after the other. So when a call gets a batch, the first LOOKAHEAD calls downstream of it
 * (breadth first over the consumers of its outputs, through broadcasts) that are not done
 * get one worker each if they have none: their starts overlap the batches that will feed
 * them, and run side by side. The cost: a worker started for a call that turns out to get
 * nothing (every item dropped), which the rules below stop.
 *
 * Workers stop, by two rules, so that a job does not keep processes that have nothing to
 * do: each maps the payload store, whose sync, once per turn, costs the kernel a little for
 * every process that maps the file — 0.3, 1.3 and 5.4 ms with 0, 300 and 1,000 other
 * processes on a quiet disk, 3.0, 7.9 and 15.5 ms on a busy one (BENCHMARKS.md, "Many
 * calls, many workers") — and holds its memory (a model, perhaps). A stopped worker runs
 * its fini and exits (orch_pool_stop).
 *
 * 1. Done. A call is done when no grain of it can be READY again in this run: its workers
 *    will never get work, and are stopped at once. The rule, exact and cheap:
 *
 *      a source is done when it is exhausted (every root admitted);
 *      a statement is done when every prerequisite is done, its queue is empty and nothing
 *      of it is in flight (a broadcast, which computes nothing, needs its prerequisites
 *      only). The prerequisites of statement s: the producer (statement or source) of
 *      each input port; the creator (its defining expand, or the source of a root domain)
 *      of the domain of each input port, of s's domain and of s's target domain.
 *
 *    Why it holds, by induction over the plan: when every prerequisite of s is done, every
 *    entity of s's domains exists (their creators will make no more), and every input
 *    item of every grain of s is terminal (the producers' grains are all sealed, and
 *    sealing a grain publishes its outputs). A grain whose inputs are all terminal is
 *    sealed or READY (DESIGN §3), and a READY grain is queued or in flight; so with an
 *    empty queue and nothing in flight every grain of s is sealed, and none can be added.
 *    A sealed grain is re-opened only by `orch retry`, between runs, and each driver
 *    applies the rule afresh from what it recovered. A cycle through the creators, which
 *    the plan's port graph does not show, would only keep its nodes from ever being done:
 *    the rule can err only by keeping a worker, never by stopping one that work will need
 *    (asserted where a worker of a done call reports for duty: its queue is empty).
 *
 * 2. Idle. A worker idle with nothing queued for its call, for longer than it took to
 *    start and at least idle_min_ms (10 s; ORCH_IDLE_STOP_MS sets it), is stopped; it is
 *    started again on demand. Rule 1 alone does not bound the workers: the grains of a job
 *    need not move together — with batch=1 on a 2-CPU budget, dispatch's deepest-first
 *    order lets the first grains of a chain run ahead while the last waits, and every call
 *    in between, not done, would keep its worker (measured: 371 workers in use in a chain
 *    of 1,000 run under strace). Why this wait: keeping an idle worker costs at a steady
 *    rate, stopping it risks paying its start again; waiting, before a stop, for as long
 *    as a start costs spends at most twice what knowing the future would (the ski rental
 *    argument). An idle worker costs the driver's sync 3 to 16 us per turn (the figures
 *    above), up to some 3 ms a second at a few hundred turns a second; a built-in's start
 *    costs 25 ms of CPU: so the floor of 10 s, below which stops cost more in restarts than
 *    they save (measured on a chain of 1,000: a floor of 1 s restarted 477 workers and took
 *    36 s, one of 10 s none, 23 s). A worker whose start took longer (a model) is kept idle
 *    that long.
 *
 * Staged (`orch run --staged`, an ablation for benchmarks only). The same rule makes the
 * barrier: a call is held — its queue not served — while a prerequisite is not done
 * (orch_driver_held), and the rule is applied once more at the start of dispatch
 * (orch_driver_staged_settle), so that a call is served in the very turn that applies the
 * last report of the stage before it. Why it cannot deadlock: whether a node is done
 * depends on its prerequisites only, never on what they feed, so by induction over the
 * plan every node is done in turn — the sources once exhausted (staged admission takes
 * every root at once, whatever max_unsealed says: admit.c), then each statement, whose
 * grains are all READY or sealed once its prerequisites are done (the argument above:
 * a reduce's children are all terminal, an expand's and a filter's inputs too). Were a
 * call held forever all the same (a cycle through the creators, above), its queued grains
 * do not count as work to the loop (orch_driver_any_queued), which then stops with an
 * error rather than wait.
 *
 * Cost (driver_int.h, invariant 6). Rule 1 is applied to the nodes whose state may have
 * changed in the turn — a call whose flight ended or whose queue emptied (d->check), the
 * sources (every turn; there are few) — and spreads downstream through counters: each node
 * becomes done once and each edge is counted down once per run. Rule 2 keeps a min-heap of
 * idle workers by deadline (an entry goes stale when its worker changes state; it is
 * dropped when it comes up). Starts look at the calls with queued grains (d->ready) and
 * at the LOOKAHEAD calls after each call served in the turn. The deadlines are checked at
 * every turn, and the driver's one-second tick makes a turn.
 */
#include "driver_int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "orch_slurm_start.h"
#include "support.h"

/* How many calls downstream of a call that got a batch get a worker ahead of their work
 * (see above): enough starts side by side to keep two cores busy while a chain's batches
 * go through its calls (BENCHMARKS.md, "Many calls, many workers"). */
#define LOOKAHEAD 4
/* The least time a worker is kept idle before rule 2 stops it (ORCH_IDLE_STOP_MS). */
#define IDLE_MIN_MS 10000
/* Rule 3, remote workers (--launcher slurm): an idle remote worker holds its Slurm
 * allocation (cores, GPUs), which the job's other workers may be pending for. When a
 * worker of the job has been starting for PENDING_MS (its step waits in Slurm's queue;
 * a start on a free node connects in some 50 ms), every remote worker idle for
 * IDLE_CONTENDED_MS is stopped, even one whose call has grains queued (held by a
 * budget: the calls that would lift the budget may be the ones pending, so keeping it
 * could deadlock a cluster the job fills; measured, a 2-core node: an expand held by
 * admission kept both cores while the calls that drain it waited). Without contention the
 * rules above hold as for local workers, so that a model is not loaded again and again
 * (measured: a 1-s floor for every remote worker cost the OCR pipeline 9%). */
#define PENDING_MS 1000
#define IDLE_CONTENDED_MS 1000
/* A batch queued behind one that straggles is taken back for an idle worker of its call:
 * the one ahead has run for TAKE_BACK_MIN_MS, and TAKE_BACK_FACTOR times the time the
 * call's measurements give it. A batch that merely takes a little longer than the others
 * keeps what is queued behind it: a take back costs the grains' attempts, rows and a new
 * generation, so it is for a wait that is long next to a dispatch (ORCH_SIZING_TARGET_MS). */
#define TAKE_BACK_MIN_MS 200
#define TAKE_BACK_FACTOR 4

/* The node that creates the entities of domain `dom`: its defining expand, or the source
 * of a root domain; -1 when the plan names neither (it does not build then). */
static int creator(const struct orch_driver *d, int dom)
{
    const struct orch_domain *D = orch_plan_domain(d->plan, dom);
    if (D->expand >= 0)
        return D->expand;
    if (D->source >= 0)
        return orch_plan_nstmts(d->plan) + D->source;
    return -1;
}

static void add_prereq(int *pre, int *n, int node, int self)
{
    if (node < 0 || node == self)
        return;
    for (int k = 0; k < *n; k++)
        if (pre[k] == node)
            return;
    pre[(*n)++] = node;
}

#define MAX_PREREQS (2 * ORCH_PLAN_MAX_INPUTS + 2)

/* The prerequisites of statement s (see the rule above), each once. Returns their count. */
static int prereqs(const struct orch_driver *d, int s, int pre[MAX_PREREQS])
{
    const struct orch_stmt *st = orch_plan_stmt(d->plan, s);
    int n = 0;
    for (int j = 0; j < st->nin; j++) {
        const struct orch_port *port = orch_plan_port(d->plan, st->in[j].port);
        add_prereq(pre, &n,
                   port->producer >= 0 ? port->producer
                   : port->source >= 0 ? orch_plan_nstmts(d->plan) + port->source
                                       : -1,
                   s);
        add_prereq(pre, &n, creator(d, port->domain), s);
    }
    add_prereq(pre, &n, creator(d, st->domain), s);
    add_prereq(pre, &n, creator(d, st->target), s);
    return n;
}

void orch_driver_check(struct orch_driver *d, struct orch_driver_call *cr)
{
    if (!d->nodes || cr->c->stmt < 0)
        return; /* before the graph exists (recovery): the first turn looks at everything */
    struct orch_driver_node *n = &d->nodes[cr->c->stmt];
    if (n->checking || n->done)
        return;
    n->checking = true;
    d->check[d->ncheck++] = cr->c->stmt;
}

static void check_node(struct orch_driver *d, int node)
{
    struct orch_driver_node *n = &d->nodes[node];
    if (n->checking || n->done)
        return;
    n->checking = true;
    d->check[d->ncheck++] = node;
}

void orch_driver_served(struct orch_driver *d, struct orch_driver_call *cr)
{
    if (cr->served || !d->served)
        return;
    cr->served = true;
    d->served[d->nserved++] = cr->call;
}

/* ---- the books of Slurm starts ------------------------------------------------------- */

/* A remote worker's start (pool.h, orch_pool_watch_starts), recorded in slurm_start so
 * that the next driver cancels what this one's death would leave in Slurm (recover.c).
 * BEGIN is committed before its srun runs: no turn's transaction is open when workers
 * start (orch_driver_workers runs after the commit), so it has one of its own; were one
 * open, the row would go with it. STEP and END are written the same way: a lost one only
 * makes the next driver's scancel name a job that has ended, which says nothing. */
static int on_start(void *ctx, orch_pool *pool, enum orch_pool_start_event ev,
                    const char *call, const char *name, const char *step)
{
    struct orch_driver *d = ctx;
    orch_store *st = d->job->store;
    (void)pool;
    bool own = !orch_store_in_txn(st);
    int rc = own ? orch_store_begin(st) : 0;
    if (rc == 0)
        rc = ev == ORCH_POOL_START_BEGIN  ? orch_store_slurm_start_put(st, name, call)
             : ev == ORCH_POOL_START_STEP ? orch_store_slurm_start_step(st, name, step)
                                          : orch_store_slurm_start_del(st, name);
    if (own && rc == 0)
        rc = orch_store_commit(st);
    else if (own && orch_store_in_txn(st))
        orch_store_rollback(st);
    if (rc < 0 && ev != ORCH_POOL_START_BEGIN) {
        orch_error_clear();
        rc = 0;
    }
    return rc;
}

/* Forgets this driver's starts once its pools are closed: each srun has ended, and the
 * pool cancelled what a signal that ended one left (pool.h). An open transaction (an
 * abort) keeps them: the next driver cancels them, which costs it a scancel each. */
static void forget_starts(struct orch_driver *d)
{
    orch_store *st = d->job->store;
    if (!d->slurm_books || orch_store_in_txn(st))
        return;
    d->slurm_books = false;
    if (orch_store_begin(st) == 0) {
        if (orch_store_slurm_starts_clear(st) == 0 && orch_store_commit(st) == 0)
            return;
        if (orch_store_in_txn(st))
            orch_store_rollback(st);
    }
    orch_error_clear();
}

int orch_driver_workers_init(struct orch_driver *d)
{
    int ns = orch_plan_nstmts(d->plan);
    d->nnodes = ns + d->nsources;
    d->nodes = calloc((size_t)d->nnodes + 1, sizeof *d->nodes);
    d->check = calloc((size_t)d->nnodes + 1, sizeof *d->check);
    d->served = calloc((size_t)d->ncalls + 1, sizeof *d->served);
    d->take_calls = calloc((size_t)d->ncalls + 1, sizeof *d->take_calls);
    if (!d->nodes || !d->check || !d->served || !d->take_calls)
        return -ENOMEM;
    int pre[MAX_PREREQS];
    size_t nedges = 0;
    for (int s = 0; s < ns; s++) {
        int n = prereqs(d, s, pre);
        d->nodes[s].nopen = n;
        for (int k = 0; k < n; k++)
            d->nodes[pre[k]].ndown++;
        nedges += (size_t)n;
    }
    d->edges = calloc(nedges + 1, sizeof *d->edges);
    if (!d->edges)
        return -ENOMEM;
    size_t at = 0;
    for (int i = 0; i < d->nnodes; i++) {
        d->nodes[i].down = d->edges + at;
        at += (size_t)d->nodes[i].ndown;
        d->nodes[i].ndown = 0; /* filled again below */
    }
    for (int s = 0; s < ns; s++) {
        int n = prereqs(d, s, pre);
        for (int k = 0; k < n; k++) {
            struct orch_driver_node *p = &d->nodes[pre[k]];
            p->down[p->ndown++] = s;
        }
    }
    /* The first turn looks at every node that waits on nothing: the sources (and a
     * statement that has no prerequisite, which a plan that builds does not have). */
    for (int i = 0; i < d->nnodes; i++)
        if (d->nodes[i].nopen == 0)
            check_node(d, i);
    /* The calls that recovery gave queued grains, and every call's slots: once per run,
     * so a walk is fine. */
    for (int c = 0; c < d->ncalls; c++) {
        struct orch_driver_call *cr = &d->calls[c];
        if (!cr->pool)
            continue;
        if (!(cr->wk = calloc((size_t)cr->c->opts.workers, sizeof *cr->wk)))
            return -ENOMEM;
        if (d->slurm_books)
            orch_pool_watch_starts(cr->pool, on_start, d);
        if (orch_queue_count(&cr->q) > 0)
            orch_driver_want(d, cr);
    }
    d->idle_min_ms = d->opts->idle_stop_ms > 0 ? d->opts->idle_stop_ms : IDLE_MIN_MS;
    return orch_driver_fatal(d);
}

void orch_driver_workers_reopen(struct orch_driver *d)
{
    int ns = orch_plan_nstmts(d->plan), pre[MAX_PREREQS];
    for (int i = 0; i < d->nnodes; i++) {
        d->nodes[i].done = false;
        d->nodes[i].checking = false;
        d->nodes[i].nopen = i < ns ? prereqs(d, i, pre) : 0;
    }
    d->ncheck = 0;
    for (int i = 0; i < d->nnodes; i++)
        if (d->nodes[i].nopen == 0)
            check_node(d, i);
}

void orch_driver_workers_free(struct orch_driver *d)
{
    forget_starts(d);
    for (int c = 0; d->calls && c < d->ncalls; c++) {
        free(d->calls[c].wk);
        d->calls[c].wk = NULL;
        free(d->calls[c].single);
        d->calls[c].single = NULL;
        d->calls[c].nsingle = d->calls[c].csingle = 0;
    }
    free(d->nodes);
    free(d->edges);
    free(d->check);
    free(d->served);
    free(d->take_calls);
    d->take_calls = NULL;
    d->ntake_calls = 0;
    free(d->idle);
    d->nodes = NULL;
    d->idle = NULL;
    d->edges = d->check = d->served = NULL;
}

static bool can_be_done(const struct orch_driver *d, int node)
{
    const struct orch_driver_node *n = &d->nodes[node];
    int ns = orch_plan_nstmts(d->plan);
    if (n->done || n->nopen > 0)
        return false;
    if (node >= ns)
        return d->sources[node - ns].exhausted;
    const struct orch_stmt *st = orch_plan_stmt(d->plan, node);
    if (st->call < 0)
        return true; /* a broadcast computes nothing: done with its prerequisites */
    const struct orch_driver_call *cr = &d->calls[st->call];
    return orch_queue_count(&cr->q) == 0 && cr->inflight == NULL;
}

/* ---- the slots as the driver sees them -------------------------------------------------- */

struct orch_driver_wk *orch_driver_wk(struct orch_driver_call *cr, const orch_worker *w)
{
    int i = orch_worker_index(w);
    assert(cr->wk && i >= 0 && i < cr->c->opts.workers);
    return &cr->wk[i];
}

static struct orch_driver_wk *wk_of(struct orch_driver_call *cr, orch_worker *w)
{
    return orch_driver_wk(cr, w);
}

/* w's slot changes state: every idle entry of it is stale from now on. */
static void wk_set(struct orch_driver_wk *k, bool starting, bool idle, int64_t now)
{
    k->stamp++;
    k->starting = starting;
    k->idle = idle;
    k->since_ms = now;
}

/* Stops idle worker w of cr, which is off cr->idle; false when it could not be (found dead:
 * its loss follows). */
static bool stop_worker(struct orch_driver_call *cr, orch_worker *w)
{
    wk_set(wk_of(cr, w), false, false, 0);
    if (orch_pool_stop(cr->pool, w) < 0)
        return false;
    cr->d->workers_live--;
    return true;
}

/* Marks what can be done on d->check done, stops the idle workers of each call so marked
 * (one that is starting is stopped when it says HELLO: orch_driver_worker_idle), and looks
 * at the nodes that waited on it (rule 1). */
static void settle_done(struct orch_driver *d)
{
    while (d->ncheck > 0) {
        int node = d->check[--d->ncheck];
        struct orch_driver_node *n = &d->nodes[node];
        n->checking = false;
        if (!can_be_done(d, node))
            continue;
        n->done = true;
        if (node < orch_plan_nstmts(d->plan)) {
            int call = orch_plan_stmt(d->plan, node)->call;
            if (call >= 0) {
                struct orch_driver_call *cr = &d->calls[call];
                for (int i = 0; i < cr->nidle; i++)
                    (void)stop_worker(cr, cr->idle[i]); /* a dead one: its loss follows */
                cr->nidle = 0;
            }
        }
        for (int k = 0; k < n->ndown; k++)
            if (--d->nodes[n->down[k]].nopen == 0)
                check_node(d, n->down[k]);
    }
}

void orch_driver_staged_settle(struct orch_driver *d)
{
    assert(d->to_send == NULL); /* a reserved batch is not on its call's inflight yet */
    if (!d->nodes)
        return;
    int ns = orch_plan_nstmts(d->plan);
    for (int i = 0; i < d->nsources; i++)
        if (d->sources[i].exhausted)
            check_node(d, ns + i);
    settle_done(d);
}

bool orch_driver_held(const struct orch_driver *d, const struct orch_driver_call *cr)
{
    return d->opts->staged && d->nodes && d->nodes[cr->c->stmt].nopen > 0;
}

/* ---- the idle heap (rule 2) ----------------------------------------------------------- */

static bool idle_before(const struct orch_driver_idle *a, const struct orch_driver_idle *b)
{
    return a->deadline_ms < b->deadline_ms;
}

static void idle_push(struct orch_driver *d, struct orch_driver_idle e)
{
    if (orch__grow(&d->idle, &d->cidle_heap, d->nidle_heap + 1, sizeof *d->idle) < 0)
        return; /* no memory: this worker is not stopped for idling, which is harmless */
    int i = d->nidle_heap++;
    while (i > 0 && idle_before(&e, &d->idle[(i - 1) / 2])) {
        d->idle[i] = d->idle[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    d->idle[i] = e;
}

static struct orch_driver_idle idle_pop(struct orch_driver *d)
{
    struct orch_driver_idle top = d->idle[0], last = d->idle[--d->nidle_heap];
    int i = 0, n = d->nidle_heap;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && idle_before(&d->idle[c + 1], &d->idle[c]))
            c++;
        if (!idle_before(&d->idle[c], &last))
            break;
        d->idle[i] = d->idle[c];
        i = c;
    }
    if (n > 0)
        d->idle[i] = last;
    return top;
}

/* How long a worker of cr is kept idle: as long as a start of it costs, at least the
 * floor (see rule 2). */
static int64_t idle_limit(const struct orch_driver *d, const struct orch_driver_call *cr)
{
    return cr->start_ms > d->idle_min_ms ? cr->start_ms : d->idle_min_ms;
}

static void idle_arm(struct orch_driver *d, struct orch_driver_call *cr, orch_worker *w,
                     int64_t now)
{
    struct orch_driver_wk *k = wk_of(cr, w);
    idle_push(d, (struct orch_driver_idle){.deadline_ms = now + idle_limit(d, cr),
                                           .call = cr->call,
                                           .index = orch_worker_index(w),
                                           .stamp = k->stamp});
}

/* Stops the workers whose idle deadline passed, if they are still idle since and their
 * call has nothing queued; one whose call has grains queued (waiting for the budget) is
 * given another term. */
static void stop_idle(struct orch_driver *d)
{
    int64_t now = orch_clock_mono_ms();
    while (d->nidle_heap > 0 && d->idle[0].deadline_ms <= now) {
        struct orch_driver_idle e = idle_pop(d);
        struct orch_driver_call *cr = &d->calls[e.call];
        struct orch_driver_wk *k = &cr->wk[e.index];
        if (k->stamp != e.stamp || !k->idle)
            continue; /* it worked, stopped or died since */
        if (orch_queue_count(&cr->q) > 0) {
            idle_arm(d, cr, k->w, now);
            continue;
        }
        for (int i = 0; i < cr->nidle; i++) {
            if (cr->idle[i] == k->w) { /* keep the others in their order */
                memmove(&cr->idle[i], &cr->idle[i + 1],
                        (size_t)(cr->nidle - i - 1) * sizeof *cr->idle);
                cr->nidle--;
                break;
            }
        }
        (void)stop_worker(cr, k->w);
    }
}

/* Whether a worker of the job has been starting for PENDING_MS (rule 3). Looks only at the
 * calls whose pool has a start under way. */
static bool remote_contended(struct orch_driver *d, int64_t now)
{
    for (int c = 0; c < d->ncalls; c++) {
        struct orch_driver_call *cr = &d->calls[c];
        if (!cr->pool || orch_pool_starting(cr->pool) == 0)
            continue;
        for (int i = 0; i < cr->c->opts.workers; i++)
            if (cr->wk[i].starting && now - cr->wk[i].since_ms >= PENDING_MS)
                return true;
    }
    return false;
}

/* Rule 3: under contention, stops every remote worker idle for IDLE_CONTENDED_MS. */
static void stop_idle_contended(struct orch_driver *d)
{
    int64_t now = orch_clock_mono_ms();
    if (!d->launcher || !remote_contended(d, now))
        return;
    for (int c = 0; c < d->ncalls; c++) {
        struct orch_driver_call *cr = &d->calls[c];
        for (int i = 0; i < cr->nidle;) {
            orch_worker *w = cr->idle[i];
            if (now - wk_of(cr, w)->since_ms < IDLE_CONTENDED_MS) {
                i++;
                continue;
            }
            memmove(&cr->idle[i], &cr->idle[i + 1],
                    (size_t)(cr->nidle - i - 1) * sizeof *cr->idle);
            cr->nidle--;
            (void)stop_worker(cr, w);
        }
    }
}

/* ---- what the pools tell ------------------------------------------------------------- */

/* ---- taking back a batch queued behind a straggler ----------------------------------- */

/* Whether batch `ahead`, which its worker runs, straggles: it has run for TAKE_BACK_MIN_MS
 * and TAKE_BACK_FACTOR times what the call's measured time per grain says it should take. */
static bool straggles(const struct orch_driver_call *cr, const struct orch_driver_batch *ahead,
                      int64_t now)
{
    if (ahead->sent_ms <= 0)
        return false;
    int64_t ran = now - ahead->sent_ms;
    double per = orch_sizing_ms_per_grain(&cr->sizing);
    return ran >= TAKE_BACK_MIN_MS && (per < 0 || ran >= TAKE_BACK_FACTOR * per * ahead->n);
}

/* The batch of cr that worker w runs, or NULL. */
static struct orch_driver_batch *running_on(struct orch_driver_call *cr, const orch_worker *w)
{
    for (struct orch_driver_batch *b = cr->inflight; b; b = b->next)
        if (b->worker == w && !b->queued)
            return b;
    return NULL;
}

/* Takes back one batch of cr queued behind a straggler, if its worker has not started it
 * (pool.h, orch_pool_take_back), and queues its grains again. Nothing of it ran: its
 * attempts end interrupted, uncharged, and its grains get a new generation, as those of a
 * batch queued behind a lost worker's. Returns 1 when one was taken back, 0 when none can
 * be now, -1 when cr holds no queued batch at all. */
static int take_back_one(struct orch_driver *d, struct orch_driver_call *cr, int64_t now)
{
    int queued = 0;
    for (struct orch_driver_batch *b = cr->inflight; b; b = b->next) {
        if (!b->queued)
            continue;
        queued++;
        struct orch_driver_batch *ahead = running_on(cr, b->worker);
        uint64_t id;
        if (!ahead || !straggles(cr, ahead, now) ||
            orch_pool_take_back(cr->pool, b->worker, &id) != 1)
            continue;
        orch_worker *from = b->worker;
        b = orch_driver_batch_take(cr, id);
        assert(b && "the pool took back a batch the driver does not know");
        if (!b)
            return 0;
        b->sent_ms = 0; /* it never ran: nothing to measure (orch_driver_settle) */
        orch_driver_settle(d, b);
        char why[200];
        snprintf(why, sizeof why,
                 "not started: taken back from worker %d, still running the batch ahead of "
                 "it, for an idle worker",
                 orch_worker_pid(from));
        int rc = orch_driver_batch_interrupt(d, b, why);
        if (rc < 0)
            orch_driver_set_fatal(d, rc);
        return 1;
    }
    return queued > 0 ? 0 : -1;
}

/* A worker of cr is idle with nothing queued for its call: cr is looked at by each
 * dispatch (orch_driver_take_backs) while that holds. Local workers only: a remote
 * worker's batches are never taken back. */
static void take_back_watch(struct orch_driver *d, struct orch_driver_call *cr)
{
    if (d->launcher || cr->take_watch || orch_queue_count(&cr->q) > 0 || !d->take_calls)
        return;
    cr->take_watch = true;
    d->take_calls[d->ntake_calls++] = cr->call;
}

void orch_driver_take_backs(struct orch_driver *d)
{
    int64_t now = orch_clock_mono_ms();
    int kept = 0;
    for (int k = 0; k < d->ntake_calls; k++) {
        struct orch_driver_call *cr = &d->calls[d->take_calls[k]];
        /* One a turn: its grains fill the queue, which this dispatch serves. */
        int got = cr->nidle > 0 && orch_queue_count(&cr->q) == 0 ? take_back_one(d, cr, now)
                                                                   : -1;
        if (got >= 0)
            d->take_calls[kept++] = cr->call; /* another straggler may be one later */
        else
            cr->take_watch = false; /* looked at again when a worker of cr is idle again */
    }
    d->ntake_calls = kept;
}

bool orch_driver_worker_idle(struct orch_driver_call *cr, orch_worker *w)
{
    struct orch_driver *d = cr->d;
    if (!d->nodes)
        return true; /* no HELLO comes before the graph exists: nothing is started */
    int64_t now = orch_clock_mono_ms();
    struct orch_driver_wk *k = wk_of(cr, w);
    if (k->starting)
        cr->start_ms = now - k->since_ms;
    if (d->nodes[cr->c->stmt].done) {
        assert(orch_queue_count(&cr->q) == 0 && "a call found done got work");
        (void)stop_worker(cr, w);
        return false;
    }
    wk_set(k, false, true, now);
    idle_arm(d, cr, w, now);
    take_back_watch(d, cr);
    return true;
}

void orch_driver_worker_busy(struct orch_driver_call *cr, orch_worker *w)
{
    wk_set(wk_of(cr, w), false, false, 0);
}

void orch_driver_worker_lost(struct orch_driver_call *cr, orch_worker *w)
{
    wk_set(wk_of(cr, w), false, false, 0);
    cr->d->workers_live--;
}

/* ---- starts ---------------------------------------------------------------------------- */

/* Starts a worker of cr. Returns 1 when started, 0 when it cannot be now (every slot
 * holds a process, or the pool failed: the loss that failed it stops the job), or the
 * error of a call that has no worker and can start none (it cannot go on). A call that
 * has one goes on with it, and tries again at a later turn. */
static int start_one(struct orch_driver *d, struct orch_driver_call *cr)
{
    orch_worker *w;
    int rc = orch_pool_start(cr->pool, &w);
    if (rc == -EBUSY || rc == -ECANCELED)
        return 0;
    if (rc < 0)
        return orch_pool_alive(cr->pool) == 0 ? rc : 0;
    struct orch_driver_wk *k = wk_of(cr, w);
    k->w = w;
    wk_set(k, true, false, orch_clock_mono_ms());
    d->stats->workers_started++;
    if (++d->workers_live > d->stats->workers_peak)
        d->stats->workers_peak = d->workers_live;
    return 1;
}

/* Starts workers for the calls whose queued grains their idle and starting workers cannot
 * take, one batch each (see the top of this file). */
static int start_wanted(struct orch_driver *d)
{
    for (int k = 0; k < d->nready; k++) {
        struct orch_driver_call *cr = &d->calls[d->ready[k]];
        size_t batch = (size_t)orch_driver_dispatch_capacity(cr);
        size_t have = (size_t)cr->nidle + (size_t)orch_pool_starting(cr->pool);
        int rc = 1;
        while (rc == 1 && have * batch < orch_queue_count(&cr->q)) {
            if ((rc = start_one(d, cr)) < 0)
                return rc;
            have++;
        }
    }
    return 0;
}

/* Adds the statements that consume port `port` to the walk's queue, each once per walk;
 * a broadcast is looked through at once (it computes nothing). */
static void walk_consumers(struct orch_driver *d, int port, int *queue, int *n, int cap)
{
    const struct orch_port *p = orch_plan_port(d->plan, port);
    for (int c = 0; c < p->nconsumers && *n < cap; c++) {
        int s = p->consumers[c];
        if (d->nodes[s].seen == d->walk)
            continue;
        d->nodes[s].seen = d->walk;
        const struct orch_stmt *st = orch_plan_stmt(d->plan, s);
        if (st->op == ORCH_OP_BROADCAST) {
            for (int o = 0; o < st->nout; o++)
                walk_consumers(d, st->out[o], queue, n, cap);
        } else {
            queue[(*n)++] = s;
        }
    }
}

/* Starts one worker in each of the first LOOKAHEAD calls downstream of cr that are not
 * done and have none (see the top), breadth first. */
static int start_ahead(struct orch_driver *d, struct orch_driver_call *cr)
{
    int queue[LOOKAHEAD], n = 0, rc = 0;
    d->walk++;
    d->nodes[cr->c->stmt].seen = d->walk;
    for (int o = 0; o < cr->s->nout; o++)
        walk_consumers(d, cr->s->out[o], queue, &n, LOOKAHEAD);
    for (int k = 0; k < n && rc >= 0; k++) {
        int s = queue[k];
        const struct orch_stmt *st = orch_plan_stmt(d->plan, s);
        if (!d->nodes[s].done) {
            struct orch_driver_call *next = &d->calls[st->call];
            if (orch_pool_alive(next->pool) == 0)
                rc = start_one(d, next);
        }
        for (int o = 0; o < st->nout && n < LOOKAHEAD; o++)
            walk_consumers(d, st->out[o], queue, &n, LOOKAHEAD);
    }
    return rc < 0 ? rc : 0;
}

/* Workers ahead for the calls served this turn. */
static int start_consumers(struct orch_driver *d)
{
    int rc = 0;
    for (int k = 0; k < d->nserved; k++) {
        struct orch_driver_call *cr = &d->calls[d->served[k]];
        cr->served = false;
        if (rc == 0)
            rc = start_ahead(d, cr);
    }
    d->nserved = 0;
    return rc;
}

int orch_driver_workers(struct orch_driver *d)
{
    assert(d->to_send == NULL); /* after the send: a reserved batch is in flight */
    int ns = orch_plan_nstmts(d->plan);
    for (int i = 0; i < d->nsources; i++)
        if (d->sources[i].exhausted)
            check_node(d, ns + i);
    settle_done(d);
    stop_idle(d);
    stop_idle_contended(d);
    int rc = start_wanted(d);
    return rc < 0 ? rc : start_consumers(d);
}
