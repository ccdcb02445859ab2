/* driver_int.h — the driver's internals, shared by the files that make its loop.
 *
 * driver.h is the interface; nothing outside engine/driver/ includes this header.
 *
 * A turn. The driver is one thread running one libevent loop. Between two turns it waits
 * for events; what arrives — a worker's report, a lost worker, an idle one — is applied at
 * once, in the turn's store transaction, which the first write opens (orch_driver_txn).
 * Then the turn admits roots, reserves batches, commits, and only then sends:
 *
 *     event_base_loop(ONCE)      on_report ──► propagate.h rules ──► ready queues
 *     (loop.c)                   on_lost   ──► retry or give up     (on_ready, requeue)
 *                                on_idle   ──► the call's idle workers
 *        │     all inside the turn's transaction: facts, attempt ends, requeues
 *        ▼
 *     turn()  ├─ admit     admit.c     roots from the sources while the budgets allow
 *     (loop.c)├─ dispatch  dispatch.c  per idle worker whose call fits the budgets
 *             │                        (resources.c), deepest call first: reserve a
 *             │                        batch of the size sizing.h gives from what the call
 *             │                        measured (queue.h), its grains IN_FLIGHT, one
 *             │                        attempt row each
 *             ├─ commit    loop.c      next ready_seq, payload sync (machine durability),
 *             │                        COMMIT: the group commit of the whole turn
 *             ├─ send      dispatch.c  each reserved batch to its worker
 *             └─ workers   workers.c   stop the workers of calls that are done; start
 *                                      workers where ready work waits for none
 *
 * The life of a batch:
 *
 *     reserved ──commit──► in flight ──report, loss──► settled ──commit──► freed
 *     (to_send)     │      (call's inflight)            (settled)  │
 *                   │ the turn fails                               │ the turn fails
 *                   ▼                                              ▼
 *     freed unsent: its rows are rolled back        its attempts are ended after the
 *                                                   rollback, saying why (keep_why)
 *
 * Invariants.
 *  1. A grain is never running without the store saying IN_FLIGHT: a batch's grains are
 *     marked IN_FLIGHT, each with an open attempt row, in the turn's transaction, and the
 *     batch is sent only after that transaction commits. A turn that fails sends nothing.
 *  2. A report is never acknowledged before its facts commit: the answered batch is
 *     forgotten, and anything decided from the report sent, only after the turn that
 *     applied it commits. A turn is committed whole or rolled back whole. A worker does not
 *     wait for that commit: it holds up to ORCH_POOL_DEPTH batches (pool.h), and runs the
 *     one queued behind the batch it answered, which was reserved, and committed
 *     IN_FLIGHT, in an earlier turn (invariant 1). A worker gets a second batch only when
 *     its call has queued grains that its idle and starting workers do not take
 *     (dispatch.c, taker), so that no grain goes behind a busy worker's batch while a
 *     worker of its call is idle then. A batch once queued stays with its worker: one that
 *     goes idle later does not take it back, so a slow batch can hold one queued behind
 *     it for its own duration.
 *  3. A fatal error (d->fatal, the first one wins, with its detail) ends the loop at the
 *     next turn, whose transaction is rolled back, never committed: a report may be half
 *     applied in it, and the callbacks after it in the same pass of the loop may fail
 *     again on what it left; the run says the first.
 *     What the user must still learn from the rolled-back turn — why the attempts then
 *     running ended — is written after the rollback, in a transaction of its own.
 *  4. A queue holds READY grains in ready_seq order, each at most once per generation; an
 *     entry whose grain left READY since (sealed by a barrier) is stale and is consumed
 *     by the next reservation that meets it (queue.h). A queue holds a window of the
 *     READY frontier in memory and the rest in its spill file; sealed history lives
 *     only in the store.
 *  5. cpu_busy and gpu_busy are the sums of cpus and gpus of the calls' workers that hold
 *     a batch (reserved, running, or queued behind one that runs): a worker that holds
 *     none gets a batch only when its call fits, and gives back what it held when it
 *     holds none again (orch_driver_batch_take); a second batch, queued behind the one
 *     that runs, takes nothing more (resources.c).
 *  6. A turn costs what its events and its ready work cost, never a walk over every call,
 *     pool or worker: the calls with queued grains are on d->ready, the batches reserved
 *     or in flight on d->open (oldest first), the calls whose flight ended this turn on
 *     d->check; a call that has nothing queued and nothing in flight is not looked at.
 *     The pools keep to the same rule (pool.h).
 *
 * Files, one concern each, in layers: loop.c (the entry point, the loop, the turn, the
 * group commit, then the pool callbacks) calls everything; turn.c (the services of a turn:
 * its transaction, its fatal error, settling a batch, queuing a READY grain, an idle
 * worker) is called by every file and calls only down; in between, dispatch.c (batches
 * against the store: reservation, dispatch order, sending, failures and retries, attempt
 * rows; the size of each batch, by sizing.h's rule), admit.c (sources and admission),
 * recover.c (what a stopped driver left), resources.c (CPU and GPU budgets, devices,
 * pools), workers.c (when workers start and stop), progress.c (the progress display and
 * the summary); below turn.c, sizing.c (the rule that sizes a batch, and what each call
 * measured as its batches settled: a leaf that calls nothing of the driver). No file
 * calls into loop.c. Cross-file names are orch_driver_*; everything else is static. The rooms below do the
 * rest: propagation (engine/prop/), the sources and the ready queues (engine/queue/),
 * incremental jobs (engine/update/: rescan, carry), the job directory (engine/job/).
 *
 * The store is read and written only through storage/'s API (orch_facts.h): the loop
 * holds no SQL text.
 */
#ifndef ORCH_DRIVER_INT_H
#define ORCH_DRIVER_INT_H

#include <glob.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <event2/event.h>

#include "driver.h"
#include "pool.h"
#include "proc.h"
#include "propagate.h"
#include "queue.h"
#include "sizing.h"
#include "source.h"
#include "update.h"

/* One grain of a batch. */
struct orch_driver_slot {
    struct orch_grain_ref g;
    int64_t attempt_row;  /* its open attempt */
    uint64_t first_input; /* what a filter passes on */
    bool refused;         /* a chunk of its expansion was refused (loop.c, on_chunk): it
                           * is sealed and its attempt ended; its report is ignored */
    int64_t fed_after;    /* a fed reduce: the ordinal of the last child whose page was
                           * sent (-1 before the first; stream.c, orch_driver_more) */
};

/* A batch, from its reservation until it is settled and its turn committed (dispatch.c
 * makes and sends it; turn.c settles it; loop.c frees it once the turn commits). */
struct orch_driver_batch {
    uint64_t id;
    struct orch_driver_call *cr;
    orch_worker *worker;
    int n, cap;                    /* slots used, and allocated: the dispatch's size
                                      (sizing.h), at most what is queued */
    struct orch_driver_slot *slot; /* [cap] */
    struct orch_driver_batch *next; /* on d->to_send, on cr->inflight, or on d->settled */
    /* On d->open from its reservation until it leaves flight (reserved or in flight), in
     * the order of reservation, which is that of its attempt rows. */
    struct orch_driver_batch *older, *newer;
    bool open;
    /* What travels (wire records [cap], their value counts [cap * ORCH_PLAN_MAX_INPUTS],
     * all their values [cap_vals]), kept until the batch is freed. */
    struct orch_wire_record *rec;
    uint32_t *nval;
    struct orch_wire_value *vals;
    size_t nvals, cap_vals;
    orch_payload_rtxn *rtxn; /* input sizes (batch_bytes), only while reserving */
    int64_t in_bytes;        /* its inputs' bytes, where known (orch_driver_measure) */
    int64_t sent_ms;         /* monotonic: when it was sent; 0: not sent */
    /* How its attempts end if the turn that settled it is rolled back (keep_why):
     * INTERRUPTED with the stop's message unless the settling said otherwise. */
    enum orch_attempt_outcome end_as;
    char *end_why; /* malloc'd, or NULL: the stop's message */
    /* Sent to a worker that ran another batch: it waits behind that one (pool.h) until its
     * report arrives, when its attempts start (turn.c, worker_back). */
    bool queued;
};

/* A call at run time. Set up by resources.c; unused calls (no statement) have no pool. The
 * pool's callbacks get the call as their ctx. */
struct orch_driver_call {
    struct orch_driver *d;
    int call;
    const struct orch_call *c;
    const struct orch_stmt *s;
    orch_pool *pool;
    struct orch_queue q;       /* on_ready, requeue, recover push; dispatch pops */
    orch_worker **idle;        /* turn.c (worker_back), loop.c (on_lost); dispatch pops */
    int nidle, cidle;
    /* Workers that hold one batch and may take one more, queued behind it (turn.c pushes,
     * dispatch pops); an entry whose worker no longer holds exactly one is stale, dropped
     * when popped. */
    orch_worker **single;
    int nsingle, csingle;
    struct orch_driver_batch *inflight; /* sent: pushed by send, taken by report or loss */
    double cpus, gpus;                 /* held from the budgets while a batch runs */
    char **devices;                    /* per worker: its CUDA_VISIBLE_DEVICES, or NULL */
    int rank;                          /* dispatch.c: its place in d->order (0: served first) */
    int depth;                         /* dispatch.c: its statement's depth in the plan */
    bool grows_grains;                 /* an expand: its reports make grains */
    bool grows_bytes;                  /* it makes live intermediate payloads */
    int resign_in;                     /* the input that is a files() root's path, whose
                                          file is signed again after each report
                                          (orch_driver_resign); -1 */
    bool listed;                       /* on d->ready (orch_driver_want) */
    bool served;                       /* workers.c: on d->served (orch_driver_served) */
    bool take_watch;                   /* workers.c: on d->take_calls */
    struct orch_driver_wk *wk;         /* workers.c: per worker index, [workers] */
    int64_t start_ms;                  /* workers.c: its last worker's start, to HELLO, in ms */
    /* dispatch.c: how its dispatches are sized (sizing.h), from its settled batches
     * (orch_driver_measure); and the call's figures for any file of the driver (what a
     * call drains per worker, for one), -1 until a batch is settled. */
    struct orch_sizing sizing;
    double ms_per_grain;    /* wall ms of worker time per grain, moving average */
    double bytes_per_grain; /* input bytes per grain, moving average */
};

/* A worker slot of a call as the driver sees it (workers.c). */
struct orch_driver_wk {
    orch_worker *w;   /* the slot, once a process was started in it */
    int64_t since_ms; /* monotonic: started at (until its HELLO), or idle since */
    uint32_t stamp;   /* changes with every change of state: an idle entry whose stamp
                         is not the slot's is stale */
    bool starting;    /* started by the driver, no HELLO yet */
    bool idle;        /* on cr->idle */
    int held;         /* batches reserved for it, in flight on it, up to ORCH_POOL_DEPTH */
    bool single;      /* on cr->single (maybe stale) */
};

/* A worker that went idle, and when it is to be stopped if it still is (workers.c). */
struct orch_driver_idle {
    int64_t deadline_ms;
    int call, index;
    uint32_t stamp;
};

/* A statement or a source, for the rule that tells when a call is done (workers.c). */
struct orch_driver_node {
    int nopen;     /* prerequisites not done yet */
    bool done;     /* no grain of it will be READY again in this run */
    bool checking; /* on d->check */
    uint32_t seen; /* the lookahead walk that saw it last (workers.c) */
    int ndown;     /* the nodes that have it as a prerequisite: down[0 .. ndown) */
    int *down;
};

/* A source of root entities (admit.c only). */
struct orch_driver_source {
    int domain;
    const struct orch_source *src;
    struct orch_walk *walk;  /* source.h */
    int64_t next_ordinal;    /* the ordinal of the next root admitted */
    bool exhausted;
    /* The calls that read its roots, and the plain expands of its domain (admission by
     * drain rate), by call index: [nreaders], then [nexpands] in the same array. */
    int *calls;
    int nreaders, nexpands;
};

/* The driver. Each group of fields says which file writes it; any file may read. */
struct orch_driver {
    /* loop.c, set once at start */
    struct orch_job *job;
    const orch_plan *plan;
    const struct orch_run_opts *opts;
    struct orch_run_stats *stats; /* each counter is counted where its event happens */
    struct event_base *base;
    orch_prop *prop;
    char exe[4096];
    /* --durability machine: the payload store's data file, and the sync of it asked of
     * the store's thread this turn (loop.c, payload_sync_begin), with the payload store's
     * count of writes when it was asked. */
    char payload_file[4096];
    bool psync_asked;
    uint64_t psync_writes;
    struct event *stop, *tick; /* stop: a SIGINT or SIGTERM was caught (loop.c) */
    /* loop.c: workers whose sockets are not read while a budget is full (a streaming
     * expansion's backpressure, on_chunk; read again by resume_paused) */
    orch_worker **paused;
    int npaused, cpaused;
    /* loop.c, and turn.c (fatal, settled) */
    int fatal;                        /* the first fatal error; the loop stops */
    char fatal_why[1024];             /* its detail: later failures of the pass overwrite
                                         the thread's (orch_driver_fatal) */
    bool interrupted;                 /* SIGINT or SIGTERM */
    struct orch_driver_batch *settled; /* left flight this turn; freed once it commits */
    /* resources.c: the calls (by plan call index) and their pools; the budgets */
    struct orch_driver_call *calls;
    int ncalls;
    double cpu_total, cpu_busy;
    double gpu_total, gpu_busy;
    orch_launcher *launcher; /* --launcher slurm; NULL: local workers */
    /* dispatch.c */
    int *order; /* call indexes, the most downstream first */
    int *ready; /* calls that may have queued grains (listed) */
    int nready, cready;
    struct orch_driver_batch *open_old, *open_new; /* reserved or in flight (invariant 6) */
    int64_t ninflight;                            /* batches on the calls' inflight lists */
    struct orch_driver_batch *to_send; /* reserved this turn, sent after the commit */
    uint64_t next_batch;              /* the last batch id given (recover.c sets it) */
    int64_t attempt_last;             /* the newest attempt row begun by this driver */
    int64_t attempt_floor;            /* job.attempt_floor as last written (loop.c) */
    struct orch_prop_inputs inputs;   /* the inputs of the entry being reserved */
    /* admit.c */
    struct orch_driver_source *sources;
    int nsources;
    int64_t update; /* the job_update row of the update under way; 0: none */
    int64_t update_plan; /* the plan row it adopted (an edited pipeline); 0: none */
    struct orch_carry *carry; /* update.h: NULL unless an edited plan's update runs */
    int64_t updates; /* updates this run started (--watch) */
    bool walking;    /* the last admission walked values that were all roots the job has:
                        admission can move on with no event to wait for */
    int64_t max_unsealed;
    int64_t max_live; /* bytes of live intermediate payloads (orch_prop_live_bytes) */
    int64_t admitted; /* roots admitted by this run */
    int64_t created0; /* grains the job had made when this run's admission began */
    bool admit_started;
    /* workers.c: the done rule's graph (statements, then sources), what to look at at the
     * end of the turn; the processes the driver started and has not lost nor stopped */
    struct orch_driver_node *nodes;
    int nnodes;
    int *edges; /* every node's down[], in one allocation */
    int *check; /* room for every node: each is on it at most once */
    int ncheck;
    int *served; /* calls that got a batch this turn; room for every call */
    int nserved;
    uint32_t walk;                /* the lookahead walks, counted */
    struct orch_driver_idle *idle; /* a min-heap by deadline; stale entries included */
    int nidle_heap, cidle_heap;
    int64_t idle_min_ms; /* the least idle time before a stop (ORCH_IDLE_STOP_MS) */
    int workers_live;
    /* workers.c: the calls with an idle worker and nothing queued, whose batches queued
     * behind a straggler each dispatch looks at (orch_driver_take_backs); room for every
     * call */
    int *take_calls;
    int ntake_calls;
    /* recover.c sets it, workers.c reads it: the Slurm starts of earlier drivers are
     * cancelled and forgotten, so the slurm_start rows are this driver's own */
    bool slurm_books;
    /* progress.c */
    int64_t started_ms, last_plain_ms;
    bool live;
    int live_lines;
    int pending;           /* the workers-pending file's count (driver.h); 0: no file */
    int64_t pending_since; /* and its time */
};

/* ---- turn.c: the services of a turn ------------------------------------------------------ */

/* Opens the turn's transaction unless it is open. 0 or a negative error. */
int orch_driver_txn(struct orch_driver *d);
/* Records rc, with the thread's error detail, as the fatal error unless one is recorded:
 * the loop stops at the next turn. */
void orch_driver_set_fatal(struct orch_driver *d, int rc);
/* The fatal error (0: none), its detail made the thread's again: the callbacks of the same
 * pass of the event loop go on after it, and their own failures on a half-applied turn
 * (a payload that turn never wrote, say) are not what the run stopped for. */
int orch_driver_fatal(const struct orch_driver *d);
/* Batch b left flight (answered, failed, or never sent) and its outcome is written in the
 * turn's transaction: it is freed when that commits (invariants 2 and 3). */
void orch_driver_settle(struct orch_driver *d, struct orch_driver_batch *b);
/* Queues READY grain g on its call. */
int orch_driver_queue_ready(struct orch_driver *d, const struct orch_grain_ref *g);
/* Worker w of cr holds one batch fewer (its HELLO: none to begin with; a report; or a
 * batch that could not be sent to it — dispatch.c: too big for a remote worker). Holding
 * none, it is idle: it goes on cr->idle, unless cr is done (the worker is then stopped).
 * Still holding one (it runs the batch that was queued), it goes on cr->single. */
void orch_driver_worker_back(struct orch_driver_call *cr, orch_worker *w);
/* Worker w of cr holds exactly one batch: it may take a second (cr->single). */
void orch_driver_worker_single(struct orch_driver_call *cr, orch_worker *w);

/* ---- dispatch.c ------------------------------------------------------------------------ */

/* Fills d->order: calls by the depth of their statements in the plan, deepest first. */
int orch_driver_call_order(struct orch_driver *d);
/* Reserves a batch for every idle worker whose call has queued grains and fits the
 * budgets, onto d->to_send. Inside the turn's transaction. */
int orch_driver_dispatch(struct orch_driver *d);
/* After the commit: sends every batch of d->to_send to its worker. A batch whose worker
 * went away meanwhile is put back, uncharged, in a new transaction of the turn. */
void orch_driver_send(struct orch_driver *d);
/* Batch b of call cr failed whole (run failed, its worker died or hung): splits it or
 * charges its grain (DESIGN §4). Does not settle b. */
int orch_driver_batch_failed(struct orch_driver *d, struct orch_driver_call *cr,
                             struct orch_driver_batch *b, enum orch_failure_kind kind,
                             const char *message);
/* Batch b never started: nothing of it failed. Its attempts end as interrupted with
 * `why`, and its grains go back to READY uncharged (or are sealed Suppressed under a
 * barrier). Does not settle b. */
int orch_driver_batch_interrupt(struct orch_driver *d, struct orch_driver_batch *b,
                                const char *why);
/* orch_driver_batch_interrupt for batch b, queued behind the batch that its worker ran
 * when the worker was lost, saying so. */
int orch_driver_batch_unrun(struct orch_driver *d, struct orch_driver_batch *b,
                            const char *message);
/* Ends attempt `row` with outcome o and message (NULL or "": none). */
int orch_driver_attempt_end(struct orch_driver *d, int64_t row, enum orch_attempt_outcome o,
                            const char *message);
/* Takes batch `id` off cr's in-flight list (and d->open); NULL when it is not there. Its
 * worker holds one batch fewer, and gives back its share of the budgets when it holds
 * none (invariant 5). The call is looked at by the done rule at the end of the turn. */
struct orch_driver_batch *orch_driver_batch_take(struct orch_driver_call *cr, uint64_t id);
/* Puts cr on d->ready: it has queued grains (on_ready, a requeue, recovery). */
void orch_driver_want(struct orch_driver *d, struct orch_driver_call *cr);
/* True when a call on d->ready still has queued grains (whether the loop is stuck). */
bool orch_driver_any_queued(const struct orch_driver *d);
/* The oldest attempt row still open: the first of the batches reserved or in flight, or
 * past the newest row when none is. */
int64_t orch_driver_attempt_floor(const struct orch_driver *d);
/* Frees a list of batches linked by next (NULL: nothing). */
void orch_driver_batches_free(struct orch_driver_batch *b);
/* The grains cr's next dispatch asks for (sizing.h's rule with the run's target, within
 * the room left in the admission budgets that cr's answers fill). */
int orch_driver_dispatch_size(const struct orch_driver_call *cr);
/* What cr's next dispatch takes, whatever is queued (orch_sizing_capacity): what
 * workers.c starts workers by. */
int orch_driver_dispatch_capacity(const struct orch_driver_call *cr);

/* ---- sizing.c: what a call measured (the rule itself: sizing.h) ------------------------ */

/* A batch of cr with ngrains grains was settled after worker_ms in its worker, carrying
 * in_bytes of inputs: the figures its next dispatches are sized by (sizing.h). */
void orch_driver_measure(struct orch_driver_call *cr, int ngrains, int64_t worker_ms,
                         int64_t in_bytes);
/* The answers of a batch of cr with ngrains grains added grains unsealed grains and
 * bytes live intermediate bytes (either may be negative: what they sealed and freed). */
void orch_driver_measure_growth(struct orch_driver_call *cr, int ngrains, int64_t grains,
                                int64_t bytes);

/* ---- admit.c --------------------------------------------------------------------------- */

/* Opens every source and moves its cursor past the roots the job already has, checking
 * that the source still gives them (ORCH_EMISMATCH otherwise). */
int orch_driver_sources_open(struct orch_driver *d);
/* Admits a chunk of roots from each source while the budgets allow. */
int orch_driver_admit(struct orch_driver *d);

/* What admission by drain rate looks at in a turn (admit.c), for one source. */
struct orch_admit_view {
    int64_t unsealed, max_unsealed; /* grains, and their budget */
    int64_t lead_queued;  /* grains queued for the calls that read the source's roots */
    double lead_ms;       /* their queued work in ms for their workers; < 0: unmeasured */
    int64_t lead_room;    /* once measured, the roots that fill their lead */
    double backlog_ms;    /* the most queued work of any call, in ms for its workers */
    int64_t made;         /* grains made since this run began admitting */
    int64_t admitted;     /* roots admitted since */
    int64_t unexpanded;   /* of those, roots whose expansion is still to come */
    bool expands;         /* the roots' domain has an expansion */
};
/* How many roots of the source may enter this turn (DESIGN §5; the rule is in admit.c). */
int64_t orch_driver_admit_quota(const struct orch_admit_view *v);
/* A file read while its root ran: signs again the file of each root of batch b (whose call
 * reads a files() root's path, cr->resign_in) and makes a root's signature stale when its
 * file's differs from the one stored at the scan (orch_file_moved): the bytes the grain
 * read may not be those of the stored signature, and the next update reads the file
 * again. In the turn's transaction. */
int orch_driver_resign(struct orch_driver *d, const struct orch_driver_batch *b);
/* `--watch`: starts a new update (a job_update row) and rescans every source in one
 * transaction, then admission goes on with what the scan found new. */
int orch_driver_rescan(struct orch_driver *d);
/* Whether a budget is full: unsealed grains or live intermediate bytes (dispatch then
 * serves downstream calls first). */
bool orch_driver_tight(const struct orch_driver *d, bool *grains, bool *bytes);
/* The default budget of live intermediate bytes on this machine (admit.c says how). */
int64_t orch_driver_live_budget(const struct orch_driver *d);
bool orch_driver_sources_done(const struct orch_driver *d);
void orch_driver_sources_free(struct orch_driver *d);

/* ---- recover.c ------------------------------------------------------------------------- */

/* Takes over what a stopped driver left, in one transaction: in-flight grains back to
 * READY (or sealed Suppressed under a barrier), open attempts interrupted, the counts for
 * progress, the queues rebuilt in ready_seq order; marks the job running. */
int orch_driver_recover(struct orch_driver *d);

/* ---- resources.c ----------------------------------------------------------------------- */

/* Sets the CPU and GPU budgets: given in opts, else detected. */
void orch_driver_budgets(struct orch_driver *d);
/* Whether a batch of cr fits the free budgets now. */
bool orch_driver_fits(const struct orch_driver *d, const struct orch_driver_call *cr);
void orch_driver_hold(struct orch_driver *d, const struct orch_driver_call *cr);
void orch_driver_release(struct orch_driver *d, const struct orch_driver_call *cr);
/* Sets up d->calls and starts a pool for every call that a statement uses. */
int orch_driver_start_pools(struct orch_driver *d, const struct orch_pool_callbacks *cb);
/* Closes (clean) or kills the pools, and frees the calls' run time state. */
void orch_driver_calls_free(struct orch_driver *d, bool clean);

/* ---- workers.c ------------------------------------------------------------------------- */

/* Builds the done rule's graph and lists the calls that have queued grains (after
 * recovery). 0 or -ENOMEM. */
int orch_driver_workers_init(struct orch_driver *d);
/* --watch: the sources give roots again (a new update); every statement may get work
 * again, so the done rule starts over. */
void orch_driver_workers_reopen(struct orch_driver *d);
/* At the end of a turn: stops the workers of the calls found done, then starts workers
 * for the calls whose queued grains their idle and starting workers cannot take. 0, or the
 * error of a call that can start no worker at all (the job cannot go on). */
int orch_driver_workers(struct orch_driver *d);
/* The node of cr is to be looked at by the done rule at the end of the turn. */
void orch_driver_check(struct orch_driver *d, struct orch_driver_call *cr);
/* A worker of cr said it is idle (HELLO, or a report): false when cr is done, in which case
 * the worker was stopped and must not be used; true otherwise (it goes on cr->idle). */
bool orch_driver_worker_idle(struct orch_driver_call *cr, orch_worker *w);
/* Takes back, for the idle workers of calls with nothing queued, batches queued behind
 * one that straggles on another worker of the call (workers.c), and queues their grains
 * again: called first by each dispatch, which then serves them. */
void orch_driver_take_backs(struct orch_driver *d);
/* Idle worker w of cr, taken off cr->idle, got a batch. */
void orch_driver_worker_busy(struct orch_driver_call *cr, orch_worker *w);
/* The driver's view of worker w of cr (its slot's state, the batches it holds). */
struct orch_driver_wk *orch_driver_wk(struct orch_driver_call *cr, const orch_worker *w);
/* cr got a batch in this turn: its consumers will get work soon (see workers.c). */
void orch_driver_served(struct orch_driver *d, struct orch_driver_call *cr);
/* --staged, before dispatch (nothing reserved yet): applies the done rule, so that a call
 * whose upstream finished in this turn's reports is served in this turn. */
void orch_driver_staged_settle(struct orch_driver *d);
/* --staged: cr is not to be served yet (a call upstream of it is not done). */
bool orch_driver_held(const struct orch_driver *d, const struct orch_driver_call *cr);
/* Worker w of cr was lost. */
void orch_driver_worker_lost(struct orch_driver_call *cr, orch_worker *w);
void orch_driver_workers_free(struct orch_driver *d);

/* ---- progress.c ------------------------------------------------------------------------ */

/* Decides between the live display and plain lines, and starts the clocks. */
void orch_driver_progress_init(struct orch_driver *d);
/* Writes the progress (plain lines: at most once per interval unless final). */
void orch_driver_progress(struct orch_driver *d, bool final);
/* Keeps the workers-pending file (driver.h) up to date; end: removes it. */
void orch_driver_pending_note(struct orch_driver *d, bool end);

/* ---- stream.c: streaming expansions ---- */

/* A worker of call cr sent chunk c (pool.h, `chunk`): applied in the turn's transaction
 * (orch_prop_chunk); a chunk that leaves a budget full pauses w. Errors are fatal. */
void orch_driver_chunk(struct orch_driver_call *cr, orch_worker *w,
                       const struct orch_wire_chunk *c);
/* A worker of call ctx asks for the next page of a fed reduce's inputs (pool.h, `more`):
 * answered at once, a page read from the store (orch_prop_reduce_page). Errors are
 * fatal. */
void orch_driver_more(void *ctx, orch_pool *pool, orch_worker *w,
                      const struct orch_wire_more *m);
/* After a turn's commit: reads the paused workers again once the budgets have room, or
 * once nothing but them is in flight. */
void orch_driver_resume_paused(struct orch_driver *d);
/* Reads w again if it was paused (its report came, or it was lost). */
void orch_driver_unpause(struct orch_driver *d, orch_worker *w);

#endif
