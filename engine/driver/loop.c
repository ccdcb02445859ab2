/* loop.c — the driver's event loop: turns, group commit, pool callbacks (driver_int.h).
 *
 * It reads top down: the entry point and the set-up, the loop, the turn and its group
 * commit, the end of a run, then the callbacks through which events reach a turn
 * (propagation's hook, the pools', the timer's and the signals'). What the callbacks and
 * the files below need of a turn is in turn.c; nothing calls into this file. */
#define _GNU_SOURCE /* pipe2 */
#include "driver_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orch_error.h"
#include "orch_facts.h"
#include "support.h"

#define DEFAULT_MAX_UNSEALED 20000

/* Attempt rows first..last, ended OK without a message, not yet written. */
struct ok_run {
    int64_t first, last;
};

static int start(struct orch_driver *d);
static int arm_events(struct orch_driver *d);
static void driver_free(struct orch_driver *d, bool clean);
static int run_loop(struct orch_driver *d);
static bool finished(const struct orch_driver *d);
static bool stuck(const struct orch_driver *d);
static int watch(struct orch_driver *d, bool *stop);
static void on_watch(evutil_socket_t fd, short what, void *arg);
static int turn(struct orch_driver *d);
static int commit_turn(struct orch_driver *d);
static void payload_sync_begin(struct orch_driver *d);
static bool payload_sync_end(struct orch_driver *d);
static void items_committed(struct orch_driver *d);
static int reclaim_end(struct orch_driver *d);
static int reclaim_settle(struct orch_driver *d, int64_t *named);
static int job_finished(struct orch_job *job, int64_t quiet);
static int job_stop(struct orch_job *job, int rc);
static void keep_why(struct orch_driver *d, int rc);
static void end_attempts(struct orch_driver *d, const struct orch_driver_batch *b,
                         enum orch_attempt_outcome o, const char *why, int *rc);
static int queue_ready(void *ctx, const struct orch_grain_ref *g);
static int on_ready(void *ctx, const struct orch_grain_ref *g);
static void on_idle(void *ctx, orch_pool *pool, orch_worker *w);
static void on_report(void *ctx, orch_pool *pool, orch_worker *w,
                      const struct orch_wire_report *r);
static int answered(struct orch_driver *d, struct orch_driver_call *cr,
                    struct orch_driver_batch *b, orch_worker *w,
                    const struct orch_wire_report *r);
static int storage_full(struct orch_driver *d, struct orch_driver_call *cr,
                        struct orch_driver_batch *b, const char *message);
static int apply_answers(struct orch_driver *d, struct orch_driver_batch *b,
                         const struct orch_wire_report *r);
static enum orch_attempt_outcome answer_attempt(enum orch_wire_outcome o);
static int ok_flush(struct orch_driver *d, struct ok_run *k);
static void on_lost(void *ctx, orch_pool *pool, orch_worker *w, uint64_t batch, uint64_t queued,
                    enum orch_loss_kind kind, const char *message);
static void on_chunk(void *ctx, orch_pool *pool, orch_worker *w,
                     const struct orch_wire_chunk *c);

static void on_tick(evutil_socket_t fd, short what, void *arg);
static void on_signal(evutil_socket_t fd, short what, void *arg);
static int signals_catch(struct sigaction old[2]);
static void signals_restore(const struct sigaction old[2]);
static int interrupted_error(const struct orch_driver *d);

/* ---- the entry point ---------------------------------------------------------------- */

int orch_driver_run(struct orch_job *job, const struct orch_run_opts *opts,
                    struct orch_run_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    struct orch_driver d = {.job = job, .plan = job->plan, .opts = opts, .stats = stats};
    /* Workers exec this very binary through /proc/self/exe, which names the running image
     * even when its file was replaced or deleted since (a rebuild during a long job).
     * opts->worker_exe (ORCH_WORKER_EXE) names an orch binary to exec instead, for a driver
     * that runs inside another program: under valgrind, /proc/self/exe is valgrind. */
    const char *exe = opts->worker_exe;
    char self[4096];
    if (!exe || !*exe)
        exe = "/proc/self/exe";
    if (opts->launcher != ORCH_LAUNCHER_LOCAL && strcmp(exe, "/proc/self/exe") == 0) {
        /* A remote worker runs the binary by its path on its own node (the shared
         * filesystem of docs/slurm.md): the path it has here. */
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n < 0)
            return orch_error_set(-errno, "cannot find this binary's path: %s",
                                  strerror(errno));
        self[n] = '\0';
        exe = self;
    }
    if ((size_t)snprintf(d.exe, sizeof d.exe, "%s", exe) >= sizeof d.exe)
        return orch_error_set(-ENAMETOOLONG, "ORCH_WORKER_EXE is longer than %zu bytes",
                              sizeof d.exe - 1);
    orch_driver_progress_init(&d);
    d.max_unsealed = opts->max_unsealed > 0 ? opts->max_unsealed : DEFAULT_MAX_UNSEALED;
    d.max_live = opts->max_live_bytes > 0 ? opts->max_live_bytes : orch_driver_live_budget(&d);
    stats->live_budget = d.max_live;
    orch_driver_budgets(&d);
    /* Each turn allocates and frees much the same memory (SQLite's page cache, batches);
     * without this, glibc returns the top of the heap to the kernel after every turn and
     * faults it back in on the next: half of the driver's time, measured. */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 16 << 20);

    struct sigaction old_actions[2];
    int rc = signals_catch(old_actions);
    if (rc < 0) {
        driver_free(&d, false);
        return rc;
    }
    /* A source that changed under the job is refused before anything is written: the
     * job stays as it was (finished, interrupted), and `orch update` is the way. */
    rc = orch_update_sources_check(job->store, job->plan, job->base_dir, job->dir);
    if (rc < 0) {
        driver_free(&d, false);
        signals_restore(old_actions);
        return rc == -EINTR ? interrupted_error(&d) : rc;
    }
    rc = job_stop(job, 0);
    if (rc == 0)
        rc = start(&d);
    int64_t named = -1;
    if (rc == 0) {
        rc = run_loop(&d);
        if (rc == 0)
            rc = reclaim_end(&d);
        if (rc == 0)
            rc = reclaim_settle(&d, &named);
        if (rc == 0)
            rc = job_finished(job, 0);
        orch_driver_progress(&d, true);
    }
    if (orch_store_in_txn(job->store))
        orch_store_rollback(job->store);
    if (rc == -EINTR)
        rc = interrupted_error(&d);
    if (rc < 0 && rc != -EINTR)
        keep_why(&d, rc);
    if (rc < 0)
        (void)job_stop(job, rc);
    stats->seconds = (double)(orch_clock_mono_ms() - d.started_ms) / 1000.0;
    orch_driver_pending_note(&d, true);
    driver_free(&d, rc == 0);
    orch_store_background_stop(job->store);
    /* The pools are closed: reclaim what stale reports left, unless the store holds just
     * the payloads live items name (engine/prop/reclaim.c, "The end of a run"). */
    struct orch_payload_stat ps;
    if (rc == 0 && (named < 0 || orch_payload_stat(job->payloads, &ps) < 0 ||
                    ps.count != (uint64_t)named)) {
        size_t late;
        if ((rc = orch_job_reclaim(job, &late)) == 0)
            stats->reclaimed += (int64_t)late;
    }
    signals_restore(old_actions);
    return rc;
}

/* ---- signals ------------------------------------------------------------------------ */

/* A SIGINT or SIGTERM stops the driver wherever it is: in the loop, the stop event (the
 * read end of stop_pipe, to which the handler writes) breaks it; in a stretch of work
 * outside the loop (a rescan, a turn's admission, each signing files) the sources see
 * stop_signal at their next value or their next block of a file's bytes and end with
 * -EINTR (source.h, orch_source_stop_on). Either way the run ends interrupted. The handler
 * restarts the system calls it interrupts (SA_RESTART): a read is never cut short. */
static volatile sig_atomic_t stop_signal;
static int stop_pipe[2] = {-1, -1};

static void on_stop_signal(int sig)
{
    int saved = errno;
    stop_signal = sig;
    ssize_t n = write(stop_pipe[1], "", 1); /* a full pipe holds a byte already */
    (void)n;
    errno = saved;
}

/* Empties the stop pipe (non-blocking): its bytes say only that a signal came. */
static void stop_drain(void)
{
    char drain[64];
    while (read(stop_pipe[0], drain, sizeof drain) > 0) {
    }
}

static int signals_catch(struct sigaction old[2])
{
    if (stop_pipe[0] < 0 && pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return orch_error_set(-errno, "cannot catch SIGINT and SIGTERM: %s", strerror(errno));
    stop_drain();
    stop_signal = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, &old[0]) != 0 || sigaction(SIGTERM, &sa, &old[1]) != 0)
        return orch_error_set(-errno, "cannot catch SIGINT and SIGTERM: %s", strerror(errno));
    orch_source_stop_on(&stop_signal);
    return 0;
}

static void signals_restore(const struct sigaction old[2])
{
    orch_source_stop_on(NULL);
    (void)sigaction(SIGINT, &old[0], NULL);
    (void)sigaction(SIGTERM, &old[1], NULL);
}

static int interrupted_error(const struct orch_driver *d)
{
    return orch_error_set(-EINTR,
                          "interrupted; the job is kept: continue it with `orch resume %s`",
                          d->job->dir);
}

void orch_run_stats_free(struct orch_run_stats *stats)
{
    free(stats->items);
    stats->items = NULL;
}

static int start(struct orch_driver *d)
{
    struct orch_prop_hooks hooks = {.ctx = d, .ready = on_ready};
    struct orch_pool_callbacks cb = {.idle = on_idle,
                                     .report = on_report,
                                     .lost = on_lost,
                                     .chunk = on_chunk,
                                     .more = orch_driver_more};
    int ncalls = orch_plan_ncalls(d->plan), nsources = orch_plan_nsources(d->plan);
    d->calls = calloc((size_t)ncalls + 1, sizeof *d->calls);
    d->sources = calloc((size_t)nsources + 1, sizeof *d->sources);
    d->base = event_base_new();
    if (!d->calls || !d->sources || !d->base)
        return -ENOMEM;
    /* Counted only now: what runs after a failure here (keep_why, driver_free) walks
     * d->calls[0..ncalls). */
    d->ncalls = ncalls;
    d->nsources = nsources;
    int rc = orch_driver_call_order(d);
    if (rc < 0)
        return rc;
    /* A report's pipe may close under us (a dying worker): never die of SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    if ((rc = orch_prop_open(d->plan, d->job->store, &hooks, &d->prop)) < 0 ||
        (rc = orch_driver_sources_open(d)) < 0 ||
        (rc = orch_carry_open(d->job->store, d->plan, d->update, d->update_plan, &d->carry)) <
            0)
        return rc;
    orch_prop_set_payloads(d->prop, d->job->payloads); /* live bytes are counted */
    /* Before any worker writes: payloads left by a stopped driver's last turn. */
    size_t reclaimed;
    if ((rc = orch_job_reclaim(d->job, &reclaimed)) < 0)
        return rc;
    d->stats->reclaimed += (int64_t)reclaimed;
    /* Checkpoints and syncs off the loop (storage/background.c). Without the thread the
     * commits checkpoint and the syncs are made in the loop, as they were. */
    if (orch_store_background_start(d->job->store) < 0)
        orch_error_clear();
    if (orch_payload_data_file(d->job->payloads, d->payload_file, sizeof d->payload_file) < 0)
        d->payload_file[0] = '\0'; /* synced in the loop, as without the thread */
    if ((rc = orch_driver_start_pools(d, &cb)) < 0 || (rc = orch_driver_recover(d)) < 0 ||
        (rc = orch_driver_workers_init(d)) < 0)
        return rc;
    /* The summary's counts: read once now (nothing to read in a new job), then counted
     * as items are published, rather than read from every item at the end. */
    if ((rc = orch_prop_items_load(d->prop)) < 0)
        return rc;
    if (!(d->stats->items =
              calloc((size_t)orch_plan_nports(d->plan) + 1, sizeof *d->stats->items)))
        return -ENOMEM;
    items_committed(d);
    return arm_events(d);
}

/* The signal and progress events. */
static int arm_events(struct orch_driver *d)
{
    static const struct timeval second = {1, 0};
    d->stop = event_new(d->base, stop_pipe[0], EV_READ | EV_PERSIST, on_signal, d);
    d->tick = event_new(d->base, -1, EV_PERSIST, on_tick, d);
    if (!d->stop || !d->tick)
        return orch_error_set(-ENOMEM, "cannot make the driver's events");
    if (event_add(d->stop, NULL) < 0)
        return orch_error_set(-EIO, "cannot catch SIGINT and SIGTERM");
    if (evtimer_add(d->tick, &second) < 0)
        return orch_error_set(-EIO, "cannot start the progress timer");
    return 0;
}

static void driver_free(struct orch_driver *d, bool clean)
{
    free(d->paused);
    orch_driver_calls_free(d, clean);
    orch_driver_batches_free(d->to_send);
    orch_driver_batches_free(d->settled);
    orch_driver_workers_free(d);
    free(d->ready);
    orch_driver_sources_free(d);
    orch_carry_free(d->carry);
    free(d->calls);
    free(d->order);
    orch_prop_inputs_free(&d->inputs);
    orch_prop_free(d->prop);
    if (d->tick)
        event_free(d->tick);
    if (d->stop)
        event_free(d->stop);
    if (d->base)
        event_base_free(d->base);
}

/* ---- the loop ----------------------------------------------------------------------- */

static int run_loop(struct orch_driver *d)
{
    int rc, stuck_turns = 0;
    while ((rc = turn(d)) == 0 && !d->interrupted) {
        if (finished(d) && d->opts->watch_ms > 0) {
            bool stop;
            if ((rc = watch(d, &stop)) < 0 || stop)
                return rc;
            continue;
        }
        if (finished(d))
            break;
        stuck_turns = stuck(d) ? stuck_turns + 1 : 0;
        if (stuck_turns > 3)
            return orch_error_set(ORCH_ECORRUPT,
                                  "%lld grains wait on facts that will never "
                                  "come (internal error); the job is kept",
                                  (long long)orch_prop_unsealed(d->prop));
        /* While admission walks past roots the job has, events are served without
         * waiting for one: with nothing in flight, the next would be the progress tick. */
        if (event_base_loop(d->base, d->walking ? EVLOOP_NONBLOCK : EVLOOP_ONCE) < 0)
            return orch_error_set(-EIO, "the driver's event loop failed");
    }
    if (rc == 0 && d->interrupted)
        rc = interrupted_error(d);
    return rc;
}

static bool finished(const struct orch_driver *d)
{
    return !d->to_send && orch_driver_sources_done(d) && orch_prop_unsealed(d->prop) == 0 &&
           d->ninflight == 0;
}

/* Nothing runs, nothing is queued, nothing is left to admit, yet grains are unsealed:
 * they wait on facts that will never come. A bug, reported rather than waited on. */
static bool stuck(const struct orch_driver *d)
{
    return !d->to_send && orch_driver_sources_done(d) && orch_prop_unsealed(d->prop) > 0 &&
           d->ninflight == 0 && !orch_driver_any_queued(d);
}

/* --watch (driver.h): the job is done; it is recorded finished (as at the end of a run:
 * a read of `status` between scans says so; the previous scan leaves no job_update row
 * if it found nothing), then after the interval the sources are read again. Turns go on while it waits, so that idle workers are stopped by their rule. A
 * signal while waiting ends the run here, cleanly: *stop. */
static int watch(struct orch_driver *d, bool *stop)
{
    *stop = false;
    int rc = reclaim_end(d);
    if (rc == 0)
        rc = job_finished(d->job, d->updates ? d->update : 0);
    if (rc < 0)
        return rc;
    orch_driver_progress(d, true);
    bool due = false;
    struct event *timer = evtimer_new(d->base, on_watch, &due);
    struct timeval tv = {(time_t)(d->opts->watch_ms / 1000),
                         (suseconds_t)(d->opts->watch_ms % 1000 * 1000)};
    if (!timer || evtimer_add(timer, &tv) < 0) {
        if (timer)
            event_free(timer);
        return orch_error_set(-ENOMEM, "cannot start the --watch timer");
    }
    while (rc == 0 && !due && !d->interrupted) {
        if (event_base_loop(d->base, EVLOOP_ONCE) < 0)
            rc = orch_error_set(-EIO, "the driver's event loop failed");
        else
            rc = turn(d);
    }
    event_free(timer);
    if (rc == 0 && d->interrupted) {
        *stop = true;
        return 0;
    }
    return rc < 0 ? rc : orch_driver_rescan(d);
}

static void on_watch(evutil_socket_t fd, short what, void *arg)
{
    *(bool *)arg = true;
}

/* ---- the turn ----------------------------------------------------------------------- */

static int turn(struct orch_driver *d)
{
    /* A fatal error met while applying a report may have left the turn's transaction
     * half done: it is rolled back (by the caller), never committed. What it held was in
     * flight and runs again on resume. */
    if (d->fatal)
        return orch_driver_fatal(d);
    struct orch_prop_hooks queue = {.ctx = d, .ready = queue_ready};
    int rc = orch_driver_admit(d);
    if (rc == 0)
        rc = orch_carry_turn(d->carry, d->prop, &d->inputs, &queue, &d->stats->carried);
    payload_sync_begin(d); /* the turn's payloads are written */
    if (rc == 0)
        rc = orch_driver_dispatch(d);
    if (rc == 0)
        rc = commit_turn(d);
    if (rc < 0) {
        /* Nothing of this turn is committed; batches reserved in it must not run. */
        orch_driver_batches_free(d->to_send);
        d->to_send = NULL;
        return rc;
    }
    orch_driver_send(d);
    if (d->fatal)
        return orch_driver_fatal(d);
    /* orch_driver_send may have put back batches that never reached their workers. */
    if ((rc = commit_turn(d)) < 0)
        return rc;
    orch_driver_resume_paused(d);
    return orch_driver_workers(d);
}

/* Commits the turn. With machine durability the payloads that its facts name are made
 * durable first, with one sync for the whole turn (group commit): a committed Present item
 * never names a payload that a machine crash could lose (DESIGN §6, invariant 1). Then
 * the batches settled in it are done with. */
static int commit_turn(struct orch_driver *d)
{
    int rc = 0;
    if (orch_store_in_txn(d->job->store)) {
        int64_t floor = orch_driver_attempt_floor(d);
        if (floor > d->attempt_floor &&
            (rc = orch_store_attempt_floor_set(d->job->store, floor)) == 0)
            d->attempt_floor = floor;
        if (rc == 0)
            rc = orch_prop_flush(d->prop);
        if (orch_prop_live_bytes(d->prop) > d->stats->live_peak)
            d->stats->live_peak = orch_prop_live_bytes(d->prop);
        if (rc == 0 && d->opts->durability == ORCH_DURABILITY_MACHINE &&
            (rc = orch_store_flush(d->job->store)) == 0 && !payload_sync_end(d))
            rc = orch_payload_sync(d->job->payloads);
        /* Sizes were read in a snapshot of this turn: it ends with the turn. */
        orch_prop_snapshot_end(d->prop);
        if (rc < 0) {
            (void)payload_sync_end(d);
            orch_store_rollback(d->job->store);
            orch_prop_reclaim_forget(d->prop);
            return rc;
        }
        if ((rc = orch_store_commit(d->job->store)) < 0) {
            orch_prop_reclaim_forget(d->prop);
            return rc;
        }
        /* After the commit (engine/prop/reclaim.c). */
        (void)orch_prop_reclaim_flush(d->prop, orch_clock_mono_ms());
        items_committed(d);
    }
    (void)payload_sync_end(d); /* one not ended above (no transaction, or an error) */
    orch_driver_batches_free(d->settled);
    d->settled = NULL;
    return 0;
}

/* --durability machine syncs the payload store before each commit that names its
 * payloads. The sync is asked of the store's thread once the turn's last payload is
 * written (admission writes the roots'), so that the disk flushes while the turn's CPU
 * work goes on (the dispatch, the rows held back); the commit then waits for it, and
 * syncs itself when the thread had not taken it or a payload was written since. */
static void payload_sync_begin(struct orch_driver *d)
{
    if (d->opts->durability != ORCH_DURABILITY_MACHINE || d->psync_asked || !d->payload_file[0])
        return;
    d->psync_writes = orch_payload_writes(d->job->payloads);
    d->psync_asked = orch_store_file_sync_begin(d->job->store, d->payload_file) == 0;
}

/* Whether the sync asked this turn was made and covers every payload written: it is ended
 * either way (waited for, or withdrawn). */
static bool payload_sync_end(struct orch_driver *d)
{
    if (!d->psync_asked)
        return false;
    d->psync_asked = false;
    return orch_store_file_sync_end(d->job->store) == 0 &&
           orch_payload_writes(d->job->payloads) == d->psync_writes;
}

/* The item counts as of the last commit, for the summary (driver.h). */
static void items_committed(struct orch_driver *d)
{
    if (d->stats->items)
        memcpy(d->stats->items, orch_prop_items(d->prop),
               (size_t)orch_plan_nports(d->plan) * sizeof *d->stats->items);
}

/* ---- the end of a run, and after a stop --------------------------------------------- */

/* The job finished: records as freed, in a transaction of its own, the payloads no seal
 * could free (orch_prop_reclaim_end). */
static int reclaim_end(struct orch_driver *d)
{
    int rc = orch_driver_txn(d);
    if (rc == 0)
        rc = orch_prop_reclaim_end(d->prop);
    if (rc == 0)
        return orch_store_commit(d->job->store);
    orch_store_rollback(d->job->store);
    return rc;
}

/* After reclaim_end: the freed payloads that waited for a sync are deleted; *named as
 * orch_prop_reclaim_settle says. Always 0. */
static int reclaim_settle(struct orch_driver *d, int64_t *named)
{
    const struct orch_run_stats *st = d->stats;
    bool orphans = st->stale > 0 || st->suppressed > 0 || st->attempts_failed > 0 ||
                   st->carried > 0;
    int64_t deleted;
    int rc = orch_prop_reclaim_settle(d->prop, orphans, &deleted, named);
    d->stats->reclaimed += deleted;
    return rc;
}

/* The job ran to its end: so did the update under way, if any (job_update.finished_at).
 * quiet: the update row of a --watch scan, deleted if it found nothing; 0: none. */
static int job_finished(struct orch_job *job, int64_t quiet)
{
    int rc = orch_store_begin(job->store);
    if (rc == 0 && quiet)
        rc = orch_store_update_drop_quiet(job->store, quiet);
    if (rc == 0)
        rc = orch_store_job_set_status(job->store, ORCH_JOB_FINISHED);
    if (rc == 0)
        rc = orch_store_update_finished(job->store);
    if (rc == 0)
        rc = orch_store_commit(job->store);
    return rc;
}

/* Writes how this driver stops (job.stop_*, orch_facts.h; job.status, 0011) in a
 * transaction of its own: rc 0 clears the record (a driver starts; recovery then marks the
 * job running), -EINTR records an interruption, any other error a failure with the error's
 * message, so that `orch status` and job.status tell an interrupted or failed job from one
 * that runs. Returns the write's own result; the stop's error, its detail included, stands
 * whatever happens here. */
static int job_stop(struct orch_job *job, int rc)
{
    char why[1024] = "";
    if (rc < 0)
        snprintf(why, sizeof why, "%s",
                 *orch_error_detail() ? orch_error_detail() : orch_strerror(rc));
    int k = orch_store_begin(job->store);
    if (k == 0)
        k = rc == 0
                ? orch_store_job_stop_clear(job->store)
                : orch_store_job_stop_put(
                      job->store, rc == -EINTR ? ORCH_STOP_INTERRUPTED : ORCH_STOP_FAILED, why);
    if (k == 0 && rc < 0)
        k = orch_store_job_set_status(job->store,
                                      rc == -EINTR ? ORCH_JOB_INTERRUPTED : ORCH_JOB_FAILED);
    if (k == 0)
        k = orch_store_commit(job->store);
    if (k < 0 && orch_store_in_txn(job->store))
        orch_store_rollback(job->store);
    if (rc < 0)
        orch_error_set(rc, "%s", why);
    return k;
}

/* The run stopped on error rc and the turn's transaction was rolled back: the attempts
 * that were running end here, in a transaction of their own, saying why — the batch that
 * caused the stop with its own message, every other with the stop's — rather than being
 * found open and marked interrupted, without a word, by the next resume (recover.c).
 * Best effort: the stop's error stands whatever happens here, its detail included. */
static void keep_why(struct orch_driver *d, int rc)
{
    bool any = d->settled != NULL;
    for (int i = 0; i < d->ncalls && !any; i++)
        any = d->calls[i].inflight != NULL;
    if (!any)
        return;
    char why[1024];
    snprintf(why, sizeof why, "%s",
             *orch_error_detail() ? orch_error_detail() : orch_strerror(rc));
    int k = orch_store_begin(d->job->store);
    for (const struct orch_driver_batch *b = d->settled; b; b = b->next)
        end_attempts(d, b, b->end_as, b->end_why ? b->end_why : why, &k);
    for (int i = 0; i < d->ncalls; i++)
        for (const struct orch_driver_batch *b = d->calls[i].inflight; b; b = b->next)
            end_attempts(d, b, ORCH_ATTEMPT_INTERRUPTED, why, &k);
    if (k == 0)
        k = orch_store_commit(d->job->store);
    if (k < 0 && orch_store_in_txn(d->job->store))
        orch_store_rollback(d->job->store);
    orch_error_set(rc, "%s", why);
}

/* Ends the attempts of batch b, and puts its grains back to READY with generation+1 as
 * resume would have: an open attempt is what tells resume that a grain was in flight. */
static void end_attempts(struct orch_driver *d, const struct orch_driver_batch *b,
                         enum orch_attempt_outcome o, const char *why, int *rc)
{
    for (int i = 0; i < b->n && *rc == 0; i++) {
        *rc = orch_driver_attempt_end(d, b->slot[i].attempt_row, o, why);
        if (*rc == 0)
            *rc = orch_store_grain_interrupt(d->job->store, b->slot[i].g.grain,
                                             b->slot[i].g.generation);
    }
}

/* ---- callbacks ---------------------------------------------------------------------- */

static int queue_ready(void *ctx, const struct orch_grain_ref *g)
{
    return orch_driver_queue_ready(ctx, g);
}

/* propagate.h's hook: a grain became READY. */
static int on_ready(void *ctx, const struct orch_grain_ref *g)
{
    struct orch_driver *d = ctx;
    int rc = orch_carry_push(d->carry, g);
    return rc != 0 ? (rc < 0 ? rc : 0) : orch_driver_queue_ready(d, g);
}

static void on_idle(void *ctx, orch_pool *pool, orch_worker *w)
{
    struct orch_driver_call *cr = ctx;
    assert(cr->pool == pool);
    orch_driver_worker_back(cr, w);
}

static void on_report(void *ctx, orch_pool *pool, orch_worker *w,
                      const struct orch_wire_report *r)
{
    struct orch_driver_call *cr = ctx;
    struct orch_driver *d = cr->d;
    struct orch_driver_batch *b = orch_driver_batch_take(cr, r->batch);
    on_idle(ctx, pool, w);
    if (!b) { /* not a batch we sent: a duplicate or a stray report */
        d->stats->stale++;
        return;
    }
    orch_driver_unpause(d, w);
    orch_driver_settle(d, b);
    int rc = 0;
    switch (r->status) {
    case ORCH_WIRE_STATUS_OK:
        rc = answered(d, cr, b, w, r);
        break;
    case ORCH_WIRE_STATUS_FAILED: /* run() failed: an attempt failure of the whole batch */
        rc = orch_driver_batch_failed(d, cr, b, ORCH_FAILURE_ERROR, r->message);
        break;
    case ORCH_WIRE_STATUS_STORAGE:
        rc = storage_full(d, cr, b, r->message);
        break;
    case ORCH_WIRE_STATUS__COUNT: /* not a status: the wire decoder refuses it */
        assert(!"a report status that wire.c refuses");
        rc = orch_driver_batch_failed(d, cr, b, ORCH_FAILURE_ERROR, r->message);
        break;
    }
    if (rc < 0)
        orch_driver_set_fatal(d, rc);
}

/* A report of every record: each answer is applied, unless the count is wrong. */
static int answered(struct orch_driver *d, struct orch_driver_call *cr,
                    struct orch_driver_batch *b, orch_worker *w,
                    const struct orch_wire_report *r)
{
    if (r->nrec != (uint32_t)b->n) {
        char why[128];
        snprintf(why, sizeof why, "worker %d answered %u records of a batch of %d",
                 orch_worker_pid(w), r->nrec, b->n);
        return orch_driver_batch_failed(d, cr, b, ORCH_FAILURE_ERROR, why);
    }
    int rc = orch_driver_txn(d);
    /* What the answers add to the admission budgets, for the size of cr's dispatches. */
    int64_t grains = orch_prop_unsealed(d->prop), bytes = orch_prop_live_bytes(d->prop);
    if (rc == 0 && (rc = apply_answers(d, b, r)) == 0)
        orch_driver_measure_growth(cr, b->n, orch_prop_unsealed(d->prop) - grains,
                                   orch_prop_live_bytes(d->prop) - bytes);
    return rc;
}

/* The payload store could not take the batch's outputs (full or broken) or give its
 * inputs (every reader slot taken, or broken): not the records' fault, and no retry can
 * help, so the job stops so that the user can make room and resume. The turn is rolled
 * back (a fatal error), so nothing is written now: after the rollback the batch's
 * attempts are ended as errors with the worker's message (keep_why), and its grains,
 * still IN_FLIGHT in the store, go back to READY uncharged on resume (recover.c). */
static int storage_full(struct orch_driver *d, struct orch_driver_call *cr,
                        struct orch_driver_batch *b, const char *message)
{
    b->end_as = ORCH_ATTEMPT_ERROR;
    b->end_why = strdup(message); /* NULL (no memory): the stop's message */
    return orch_error_set(-ENOSPC, "call %s could not use the payload store: %s", cr->c->name,
                          message);
}

/* Applies the answers of batch b, record by record. The attempts that ended OK with no
 * message are ended together, a run of consecutive rows at a time: a batch's rows were
 * begun one after the other (dispatch.c, take). */
static int apply_answers(struct orch_driver *d, struct orch_driver_batch *b,
                         const struct orch_wire_report *r)
{
    int rc = 0;
    struct ok_run ok = {0, 0};
    for (int i = 0; i < b->n && rc == 0; i++) {
        struct orch_driver_slot *s = &b->slot[i];
        const struct orch_wire_answer *a = &r->rec[i];
        struct orch_verdict v;
        if (s->refused) { /* sealed, its attempt ended, when its chunk was refused */
            d->stats->stale++;
            continue;
        }
        if ((rc = orch_prop_report(d->prop, &s->g, a, s->first_input, &v)) < 0)
            break;
        enum orch_attempt_outcome ao = ORCH_ATTEMPT_OK;
        const char *why = a->message;
        switch (v.kind) {
        case ORCH_VERDICT_STALE: /* nothing changed; the attempt still ends */
            d->stats->stale++;
            rc = orch_driver_attempt_end(d, s->attempt_row, ORCH_ATTEMPT_INTERRUPTED,
                                         "report not accepted: the grain was no longer in "
                                         "flight at this generation");
            continue;
        case ORCH_VERDICT_SEALED:
            ao = answer_attempt(a->outcome);
            break;
        case ORCH_VERDICT_SUPPRESSED:
            d->stats->suppressed++;
            ao = ORCH_ATTEMPT_SUPPRESSED;
            break;
        case ORCH_VERDICT_REFUSED: /* values that do not fit: sealed as a RecordFailure */
            ao = ORCH_ATTEMPT_RECORD;
            why = v.why;
            break;
        }
        d->stats->committed++;
        if (ao == ORCH_ATTEMPT_OK && (!why || !*why)) {
            if (ok.first > 0 && s->attempt_row != ok.last + 1)
                rc = ok_flush(d, &ok);
            if (ok.first == 0)
                ok.first = s->attempt_row;
            ok.last = s->attempt_row;
        } else {
            rc = orch_driver_attempt_end(d, s->attempt_row, ao, why);
        }
    }
    if (rc == 0)
        rc = ok_flush(d, &ok);
    if (rc == 0 && b->cr->resign_in >= 0)
        rc = orch_driver_resign(d, b);
    return rc;
}

/* The attempt outcome of an answer that was accepted as it came. */
static enum orch_attempt_outcome answer_attempt(enum orch_wire_outcome o)
{
    switch (o) {
    case ORCH_WIRE_OK:
    case ORCH_WIRE_KEEP_TRUE:
        return ORCH_ATTEMPT_OK;
    case ORCH_WIRE_DROP:
    case ORCH_WIRE_KEEP_FALSE:
        return ORCH_ATTEMPT_DROPPED;
    case ORCH_WIRE_RECORD_FAILURE:
        return ORCH_ATTEMPT_RECORD;
    case ORCH_WIRE_GROUP_FAILURE:
        return ORCH_ATTEMPT_GROUP;
    case ORCH_WIRE__COUNT:
        break;
    }
    assert(!"an outcome the wire decoder refuses");
    return ORCH_ATTEMPT_RECORD;
}

/* Ends the attempts of run k, in one statement (most reports: every record OK). */
static int ok_flush(struct orch_driver *d, struct ok_run *k)
{
    int rc = 0;
    if (k->first > 0)
        rc = k->first == k->last
                 ? orch_driver_attempt_end(d, k->first, ORCH_ATTEMPT_OK, NULL)
                 : orch_store_attempts_end(d->job->store, k->first, k->last, ORCH_ATTEMPT_OK);
    k->first = k->last = 0;
    return rc;
}

static void on_lost(void *ctx, orch_pool *pool, orch_worker *w, uint64_t batch, uint64_t queued,
                    enum orch_loss_kind kind, const char *message)
{
    struct orch_driver_call *cr = ctx;
    struct orch_driver *d = cr->d;
    /* A worker killed inside an LMDB read transaction leaves its reader slot taken;
     * clear it now rather than when a begin finds the table full. */
    (void)orch_payload_reader_check(d->job->payloads, NULL);
    orch_driver_worker_lost(cr, w);
    orch_driver_unpause(d, w);
    for (int i = 0; i < cr->nidle; i++) /* a dead worker is never idle */
        if (cr->idle[i] == w)
            cr->idle[i--] = cr->idle[--cr->nidle];
    enum orch_failure_kind fk = ORCH_FAILURE_CRASH;
    switch (kind) {
    case ORCH_LOSS_CRASH:
        fk = ORCH_FAILURE_CRASH;
        break;
    case ORCH_LOSS_TIMEOUT:
        fk = ORCH_FAILURE_TIMEOUT;
        break;
    case ORCH_LOSS_INIT:
        /* A worker that fails its init never held a batch (pool.c declares INIT only for
         * a worker still starting). The pool replaces it, until the failure repeats:
         * then the job stops; the attempts still running are ended after the turn's
         * rollback with this message (keep_why). */
        assert(batch == 0 && queued == 0);
        if (orch_pool_failed(pool))
            orch_driver_set_fatal(d, orch_error_set(ORCH_EPLAN,
                                                    "call %s cannot start its workers: %s",
                                                    cr->c->name, message));
        return;
    case ORCH_LOSS__COUNT: /* not a kind: the pool never gives it */
        assert(!"a loss kind that pool.h does not define");
        break;
    }
    /* The batch it ran failed; the one queued behind it never started (DESIGN §4). */
    struct orch_driver_batch *b = batch ? orch_driver_batch_take(cr, batch) : NULL;
    struct orch_driver_batch *q = queued ? orch_driver_batch_take(cr, queued) : NULL;
    int rc = 0;
    if (b) {
        orch_driver_settle(d, b);
        rc = orch_driver_batch_failed(d, cr, b, fk, message);
    }
    if (q) {
        orch_driver_settle(d, q);
        if (rc == 0)
            rc = orch_driver_batch_unrun(d, q, message);
    }
    if (rc < 0)
        orch_driver_set_fatal(d, rc);
}

/* A chunk of a streaming expansion (stream.c). */
static void on_chunk(void *ctx, orch_pool *pool, orch_worker *w,
                     const struct orch_wire_chunk *c)
{
    (void)pool;
    orch_driver_chunk(ctx, w, c);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    orch_driver_progress(arg, false);
    orch_driver_pending_note(arg, false);
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
    struct orch_driver *d = arg;
    stop_drain();
    d->interrupted = true;
    (void)event_base_loopbreak(d->base); /* fails only for a NULL base */
}
