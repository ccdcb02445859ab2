/* pool.c — worker pools, the driver side (pool.h): starting worker processes, the
 * non-blocking conversation with each, the one report of each death, and the clean stop of
 * an idle worker.
 *
 * A slot (struct orch_worker) lives as long as the pool; the processes in it come and go.
 * A slot holds no process until orch_pool_start() picks it (the free slot of lowest
 * index, so that a worker started late still gets its index's devices). Each process of a
 * slot ends in exactly one of two ways: the driver stopped it (orch_pool_stop: STOPPING,
 * then reaped silently), or one call of declare_lost(), which is reached from one of these
 * events, whichever comes first:
 *
 *   INITFAIL frame               -> lost INIT (the process exits by itself)
 *   malformed or unexpected frame-> SIGKILL, lost CRASH ("protocol error: ...")
 *   batch timer expires          -> SIGKILL, lost TIMEOUT
 *   EOF or error on the socket   -> SIGKILL (harmless if it is exiting already), then wait
 *                                   for the reap: lost CRASH with the exit status
 *   the event loop refuses to    -> SIGKILL, then wait for the reap: lost CRASH saying so
 *   watch its socket (break_worker)
 *   SIGCHLD / reap poll: reaped  -> read what the socket still holds, then lost CRASH
 *
 * (A loss while the process is STARTING is reported as INIT whatever the cause, and counts
 * towards max_init_failures, so that a worker that cannot even start is not restarted
 * forever.) declare_lost() closes the slot's socket and, when the process has not been
 * reaped yet, moves its pid to the pool's `corpses`: corpses are reaped silently (SIGCHLD,
 * the poll timer, close/kill), so that no death is reported twice and no zombie is left.
 * After `lost` the slot is free: the driver starts a process in it again when it has work
 * for one (the pool never restarts a worker by itself).
 *
 * A stopped worker keeps its slot until it is reaped: `workers` bounds the processes of a
 * call, including those still running their fini (a GPU worker's memory is released only
 * when it exits). A stop that does not end within STOP_WAIT_MS is killed.
 *
 * Re-entrancy. Callbacks run from the event handlers here and may call
 * orch_pool_dispatch(), orch_pool_start() and orch_pool_stop(), which only queue bytes,
 * start a process, close a socket or start a timer: they never report a death nor call a
 * callback. Deaths are found only by event handlers. Every handler that calls out
 * re-checks the slot's incarnation (and socket) afterwards and stops touching a slot whose
 * process changed.
 *
 * Cost. Nothing done per event looks at every slot: the pool keeps the slots that hold a
 * process in a list (`live`), counts slots by state, and counts the slots waiting for a
 * reap; a pool with no process and no corpse does not even watch SIGCHLD. So a pool of
 * 1,024 slots with three processes costs, per event, what a pool of three does, and an
 * event base shared by thousands of idle pools wakes none of them on a SIGCHLD.
 *
 * The event loop. Every event_add()/evtimer_add() is checked; libevent fails one only when
 * it cannot grow its own tables (out of memory). What the pool does then depends on what
 * the event was for: a worker whose socket or init timeout cannot be watched is killed and
 * reported lost (break_worker), or not started (orch_pool_start fails); a batch whose
 * timeout cannot be armed is refused by orch_pool_dispatch() (-ENOMEM, nothing sent); a
 * stop whose deadline cannot be armed is a kill; SIGCHLD and the reap poll are safety nets
 * for each other, and the poll is simply armed again by the next arm_poll().
 *
 * Reaping. Several pools may share one event base, and the driver may have other
 * children: each pool waits only for its own pids, with waitpid(pid, WNOHANG); never
 * waitpid(-1).
 */
#define _GNU_SOURCE
#include "pool.h"

#include "launch.h"
#include "orch_error.h"
#include "orch_payload.h"
#include "orch_udf.h"
#include "proc.h"
#include "support.h"
#include "wire.h"

#include <assert.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The descriptor a worker finds its socket on (the FD of `orch __worker FD`). */
#define WORKER_FD 3
/* How much orch_pool_close() waits for workers to finish their fini, and how long a worker
 * stopped by orch_pool_stop() may take over its fini before it is killed. */
#define CLOSE_WAIT_MS 5000
#define STOP_WAIT_MS 5000
/* How often the pool looks for dead processes while it waits for one (a safety net in case
 * a SIGCHLD is not seen). */
#define REAP_POLL_MS 100
/* A worker's init (loading a model, say) is given this many times the call's per-batch
 * timeout before it counts as hung; without a timeout, init may take as long as it likes. */
#define INIT_TIMEOUT_FACTOR 10
/* Bytes asked of each read(). */
#define READ_CHUNK 65536

/* W_DEAD: the slot holds no process (free); W_STOPPING: the driver stopped its idle
 * process, which runs its fini; the slot is free once it is reaped. */
enum wstate { W_DEAD, W_STARTING, W_IDLE, W_BUSY, W_STOPPING, W__COUNT };

/* A record of the batch a worker holds: the grain its answer must name. */
struct held_grain {
    uint64_t grain;
    uint32_t generation;
};

struct orch_worker {
    orch_pool *pool;
    int index;
    enum wstate state;
    uint64_t incarnation; /* +1 for every process started in this slot */
    pid_t pid;            /* the current process, or the last one when DEAD (a remote
                           * worker's: its srun, the driver's child) */
    bool running;         /* pid belongs to this slot: its loss is not declared yet, or it
                           * is STOPPING and not reaped yet (the slot is then on `live`) */
    int live_at;          /* its place in the pool's `live` list, or -1 */
    bool reaped;          /* waitpid took pid; status holds its wait status */
    int status;
    bool dying;         /* the socket is gone (EOF, error): waiting for the reap to report */
    const char *broken; /* why break_worker() killed it (static text), or NULL */
    int fd;             /* -1 when closed; a remote worker's is -1 until it connects */
    /* Where the process runs: for a local worker its pid and the driver's host; for a
     * remote one what its AUTH said (launch.h), once it has connected. */
    pid_t wpid;
    char host[256];
    char slurm_job[64];
    uint64_t token; /* remote: the token its start expects, until it connects; else 0 */
    uint64_t start_token; /* remote: the token its srun was started with (its job's name) */
    struct event *ev_read, *ev_write;
    struct event *timer; /* STARTING: init timeout; BUSY: the batch's timeout; STOPPING:
                          * the deadline of its fini */
    struct orch_wire_buf in;
    size_t in_off;
    struct orch_wire_buf out;
    size_t out_off;
    /* The batch held while BUSY: its id and which grain each record is. */
    uint64_t batch;
    uint32_t nrec;
    struct held_grain *held; /* nrec of held_cap */
    size_t held_cap;
};

struct orch_pool {
    struct event_base *base;
    struct orch_pool_callbacks cb;
    void *ctx;
    struct orch__arena arena; /* copies of the configuration's strings */
    const char *exe;
    struct orch_wire_config wcfg; /* worker is set per worker when sent */
    const char **cuda_env;        /* "CUDA_VISIBLE_DEVICES=..." per worker, or NULL */
    int64_t timeout_ms;
    int max_init_failures;
    int nworkers;
    struct orch_worker *w;
    int nstate[W__COUNT]; /* slots by state */
    int ndying;           /* slots whose socket is gone, waiting for the reap to report */
    int free_from;        /* no slot below this index is W_DEAD */
    orch_worker **live;   /* the slots whose `running` is true, in no order */
    int nlive;
    pid_t *corpses; /* processes whose loss was declared, not yet reaped */
    int ncorpses, cap_corpses;
    struct event *ev_chld, *ev_poll;
    bool chld_watched; /* ev_chld is added: the pool has a process or a corpse */
    int init_failures; /* consecutive */
    bool failed;
    char *failure;
    int in_callback;
    bool closing;
    /* Remote workers (pool.h, orch_pool_config.launcher): started through the launcher,
     * connected over TCP, values in batches and reports, stored here in `store`. */
    orch_launcher *launcher;
    orch_payload *store;
    double cpus, gpus;
    char host[256]; /* this machine's name: where local workers run */
};

const char *orch_loss_kind_name(enum orch_loss_kind k)
{
    static const char *const names[] = {
#define ORCH_LOSS_NAME(name, text) text,
        ORCH_LOSS_KINDS(ORCH_LOSS_NAME)
#undef ORCH_LOSS_NAME
    };
    if ((unsigned)k >= ORCH_LOSS__COUNT)
        return "?";
    return names[k];
}

static void read_some(orch_worker *w, bool drain);

/* ---- small helpers --------------------------------------------------------------------- */

static struct timeval ms_tv(int64_t ms)
{
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000),
                         .tv_usec = (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

static void describe_timeout(char *buf, size_t n, int64_t ms)
{
    if (ms % 1000 == 0)
        snprintf(buf, n, "batch ran past its timeout of %" PRId64 "s", ms / 1000);
    else
        snprintf(buf, n, "batch ran past its timeout of %" PRId64 "ms", ms);
}

static void kill_pid(pid_t pid)
{
    if (pid > 0)
        kill(pid, SIGKILL);
}

/* Ends slot w's process. A remote worker's process is its srun: SIGTERM, which srun
 * forwards to the step before it ends the job itself (launch.h). The worker also exits
 * when its connection closes, which follows. kill_all() ends with SIGKILL what SIGTERM did
 * not end in time. */
static void kill_worker(orch_worker *w)
{
    if (w->pool->launcher == NULL)
        kill_pid(w->pid);
    else if (w->pid > 0)
        kill(w->pid, SIGTERM);
}

/* Reaps pid if it has ended: true, with *status its wait status (ORCH_PROC_STATUS_GONE
 * when another waiter took it); false while it runs. */
static bool reap_nohang(pid_t pid, int *status)
{
    return orch_proc_reap(pid, false, status) != ORCH_PROC_RUNNING;
}

/* w's process was reaped. A remote worker's srun that a signal ended (kill -9 of srun, or
 * kill_all's SIGKILL) did not end its Slurm job, which stays RUNNING without a step (or
 * PENDING, then RUNNING once it gets its cores): the launcher cancels it (launch.h), by the
 * job its worker named, or by the start's job name when no worker connected. */
static void srun_reaped(orch_worker *w)
{
    orch_pool *p = w->pool;
    if (!p->launcher || w->status == ORCH_PROC_STATUS_GONE || !WIFSIGNALED(w->status))
        return;
    if (w->slurm_job[0]) {
        char target[ORCH_SLURM_ID_MAX];
        if (orch_launcher_cancel(p->launcher, w->slurm_job, target) == 0)
            fprintf(stderr, "orch: scancel %s: the srun of a %s worker (step %s, pid %d) was "
                            "killed by signal %d\n", target, p->wcfg.call, w->slurm_job,
                    (int)w->pid, WTERMSIG(w->status));
    } else if (w->start_token) {
        char target[ORCH_SLURM_NAME_MAX];
        if (orch_launcher_cancel_start(p->launcher, p->wcfg.call, w->start_token, target) == 0)
            fprintf(stderr, "orch: scancel %s: the srun of a %s worker (pid %d) was killed by "
                            "signal %d before its worker connected\n", target, p->wcfg.call,
                    (int)w->pid, WTERMSIG(w->status));
    }
    w->slurm_job[0] = '\0';
    w->start_token = 0;
}

/* ---- the pool's books: slots by state, the live list, the SIGCHLD watch --------------- */

static void set_state(orch_worker *w, enum wstate s)
{
    orch_pool *p = w->pool;
    p->nstate[w->state]--;
    p->nstate[s]++;
    w->state = s;
    if (s == W_DEAD && w->index < p->free_from)
        p->free_from = w->index;
}

static void set_dying(orch_worker *w, bool dying)
{
    w->pool->ndying += (int)dying - (int)w->dying;
    w->dying = dying;
}

/* SIGCHLD is watched only while the pool has a process or a corpse (see Cost above). The
 * add is done before a start (spawn), which is refused when it fails (out of memory); a
 * removal cannot fail for a valid event. */
static int watch_children(orch_pool *p)
{
    bool want = p->nlive > 0 || p->ncorpses > 0;
    if (want == p->chld_watched)
        return 0;
    if (want && event_add(p->ev_chld, NULL) < 0)
        return -ENOMEM;
    if (!want)
        event_del(p->ev_chld);
    p->chld_watched = want;
    return 0;
}

/* w holds a process from now on (w->running turns true). `live` has room for every slot. */
static void live_add(orch_worker *w)
{
    orch_pool *p = w->pool;
    assert(w->live_at < 0 && p->nlive < p->nworkers);
    w->running = true;
    w->live_at = p->nlive;
    p->live[p->nlive++] = w;
}

/* w's process is no longer the slot's to watch (its loss was declared, or it was reaped
 * after a stop). Moves the last entry into its place: see check_children() for how the
 * list is walked while it changes. */
static void live_del(orch_worker *w)
{
    orch_pool *p = w->pool;
    w->running = false;
    if (w->live_at < 0)
        return;
    orch_worker *last = p->live[--p->nlive];
    p->live[w->live_at] = last;
    last->live_at = w->live_at;
    w->live_at = -1;
    (void)watch_children(p);
}

static void add_corpse(orch_pool *p, pid_t pid)
{
    if (orch__grow(&p->corpses, &p->cap_corpses, p->ncorpses + 1, sizeof *p->corpses) < 0) {
        /* Cannot remember it: wait for it now. It was killed or is exiting, so this is
         * short. */
        orch_proc_kill_reap(pid, NULL);
        return;
    }
    p->corpses[p->ncorpses++] = pid;
}

static void reap_corpses(orch_pool *p)
{
    for (int i = 0; i < p->ncorpses;) {
        int st;
        if (reap_nohang(p->corpses[i], &st))
            p->corpses[i] = p->corpses[--p->ncorpses];
        else
            i++;
    }
    (void)watch_children(p);
}

/* Arms the reap poll while anything waits for a reap. The poll is the safety net behind
 * SIGCHLD: when libevent cannot arm it (out of memory), SIGCHLD still reaps, and the next
 * call here (after every loss and every reap) tries again. */
static void arm_poll(orch_pool *p)
{
    bool waiting = p->ncorpses > 0 || p->ndying > 0 || p->nstate[W_STOPPING] > 0;
    if (waiting && !evtimer_pending(p->ev_poll, NULL)) {
        struct timeval tv = ms_tv(REAP_POLL_MS);
        if (evtimer_add(p->ev_poll, &tv) < 0)
            return; /* see above: not armed this time */
    }
}

/* ---- the channel: socket, events, buffers ---------------------------------------------- */

static void close_channel(orch_worker *w)
{
    if (w->ev_read) {
        event_free(w->ev_read);
        w->ev_read = NULL;
    }
    if (w->ev_write) {
        event_free(w->ev_write);
        w->ev_write = NULL;
    }
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->timer)
        evtimer_del(w->timer);
    w->in.len = w->in_off = 0;
    w->out.len = w->out_off = 0;
    if (w->token) { /* a remote start that never connected: refuse its token from now on */
        orch_launcher_forget(w->pool->launcher, w->token);
        w->token = 0;
    }
}

static void break_worker(orch_worker *w, const char *why);

/* Sends what is queued; arms the write event when the socket is full. A write error means
 * the worker is gone: the queued bytes are dropped and the read side (EOF) or the reap
 * reports it. Calls no callback (it runs inside orch_pool_dispatch()). */
static void flush(orch_worker *w)
{
    while (w->fd >= 0 && w->out_off < w->out.len) {
        ssize_t n = send(w->fd, w->out.data + w->out_off, w->out.len - w->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            w->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (event_add(w->ev_write, NULL) < 0)
                break_worker(w, "the event loop cannot watch its socket (out of memory?)");
            return;
        }
        break;
    }
    w->out.len = w->out_off = 0;
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    flush(arg);
}

/* ---- deaths ---------------------------------------------------------------------------- */

/* The one place that reports the end of a slot's process. msg is valid during the call. */
static void declare_lost(orch_worker *w, enum orch_loss_kind kind, const char *msg)
{
    orch_pool *p = w->pool;
    assert(w->state != W_DEAD);
    if (w->state == W_STARTING)
        kind = ORCH_LOSS_INIT;
    uint64_t batch = w->state == W_BUSY ? w->batch : 0;
    assert(w->state != W_STOPPING); /* a stopped worker has no socket nor timer to lose */
    close_channel(w);
    if (w->running && !w->reaped)
        add_corpse(p, w->pid);
    live_del(w);
    set_dying(w, false);
    w->broken = NULL;
    set_state(w, W_DEAD);
    w->batch = 0;
    if (kind == ORCH_LOSS_INIT) {
        char *copy = strdup(msg);
        if (copy) {
            free(p->failure);
            p->failure = copy;
        }
        if (++p->init_failures >= p->max_init_failures)
            p->failed = true;
    }
    p->in_callback++;
    p->cb.lost(p->ctx, p, w, batch, kind, msg);
    p->in_callback--;
    arm_poll(p);
}

/* Kills the process and reports it lost now (protocol errors, timeouts). */
static void kill_and_declare(orch_worker *w, enum orch_loss_kind kind, const char *msg)
{
    if (w->running && !w->reaped)
        kill_worker(w);
    declare_lost(w, kind, msg);
}

__attribute__((format(printf, 2, 3))) static void protocol_error(orch_worker *w,
                                                                 const char *fmt, ...)
{
    char msg[1200];
    int n = snprintf(msg, sizeof msg, "protocol error: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    kill_and_declare(w, ORCH_LOSS_CRASH, msg);
}

/* The process was reaped: report it with its exit status. */
static void declare_reaped(orch_worker *w)
{
    char msg[512], how[256];
    assert(w->reaped);
    srun_reaped(w);
    if (w->broken)
        snprintf(msg, sizeof msg, "worker %d was killed: %s", (int)w->pid, w->broken);
    else
        snprintf(msg, sizeof msg, "worker %d %s", (int)w->pid,
                 orch_proc_describe(w->status, false, how, sizeof how));
    if (w->state == W_STARTING) {
        size_t n = strlen(msg);
        if (w->status != ORCH_PROC_STATUS_GONE && WIFEXITED(w->status) &&
            WEXITSTATUS(w->status) == 127)
            snprintf(msg + n, sizeof msg - n, " before it was ready (could %s be run?)",
                     w->pool->exe);
        else
            snprintf(msg + n, sizeof msg - n, " before it was ready");
    }
    declare_lost(w, ORCH_LOSS_CRASH, msg);
}

/* EOF or an error on the socket: the process is dying or broken. */
static void socket_gone(orch_worker *w)
{
    close_channel(w);
    set_dying(w, true);
    if (!w->reaped) {
        /* Harmless to a process that is exiting already (its status stands); ends one that
         * closed its socket and lives on. */
        kill_worker(w);
        w->reaped = reap_nohang(w->pid, &w->status);
    }
    if (w->reaped)
        declare_reaped(w);
    else
        arm_poll(w->pool);
}

/* The pool cannot go on talking to w's process (the event loop refused to watch its
 * socket): kills it, and leaves the report of its loss to the reap (check_children), with
 * `why` (static text) as the message. Never reports from here: it runs inside
 * orch_pool_dispatch() and orch_pool_new(), which call no callback. */
static void break_worker(orch_worker *w, const char *why)
{
    w->broken = why;
    close_channel(w);
    set_dying(w, true);
    if (!w->reaped)
        kill_worker(w);
    arm_poll(w->pool);
}

/* A stopped worker was reaped: its slot is free, silently (a stop is not a loss). */
static void stop_done(orch_worker *w)
{
    assert(w->state == W_STOPPING && w->reaped);
    srun_reaped(w);
    evtimer_del(w->timer);
    live_del(w);
    set_state(w, W_DEAD);
}

/* Looks for the deaths of this pool's processes: the slots on `live` only. A callback
 * called from here may start a process (appended to `live`) and a declared loss takes its
 * slot off (the last entry moves into its place), so the walk moves on only when the entry
 * it looked at is still in place. */
static void check_children(orch_pool *p)
{
    for (int i = 0; i < p->nlive;) {
        orch_worker *w = p->live[i];
        if (!w->reaped && reap_nohang(w->pid, &w->status)) {
            w->reaped = true;
            if (w->state == W_STOPPING) {
                stop_done(w);
            } else {
                uint64_t inc = w->incarnation;
                /* Frames it sent before it died (a report) still count: read them first.
                 * EOF then reports the death; if the socket does not end (a descendant
                 * holds it), report it here. */
                if (w->fd >= 0)
                    read_some(w, true);
                if (w->incarnation == inc && w->state != W_DEAD)
                    declare_reaped(w);
            }
        }
        if (i < p->nlive && p->live[i] == w)
            i++;
    }
    reap_corpses(p);
    arm_poll(p);
}

static void on_sigchld(evutil_socket_t sig, short what, void *arg)
{
    (void)sig, (void)what;
    check_children(arg);
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    check_children(arg);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    orch_worker *w = arg;
    orch_pool *p = w->pool;
    if (w->state == W_BUSY && !w->dying) {
        char msg[128];
        describe_timeout(msg, sizeof msg, p->timeout_ms);
        kill_and_declare(w, ORCH_LOSS_TIMEOUT, msg);
    } else if (w->state == W_STARTING && !w->dying) {
        char msg[128];
        snprintf(msg, sizeof msg, "init ran past %d times the call's timeout (%" PRId64 " ms)",
                 INIT_TIMEOUT_FACTOR, INIT_TIMEOUT_FACTOR * p->timeout_ms);
        kill_and_declare(w, ORCH_LOSS_INIT, msg);
    } else if (w->state == W_STOPPING && !w->reaped) {
        kill_worker(w); /* its fini ran past STOP_WAIT_MS; the reap frees the slot */
    }
}

/* ---- frames from a worker -------------------------------------------------------------- */

static void on_hello(orch_worker *w, const struct orch_wire_frame *f)
{
    orch_pool *p = w->pool;
    struct orch_wire_hello h;
    if (orch_wire_get_hello(f, &h) < 0) {
        protocol_error(w, "%s", orch_error_detail());
        return;
    }
    if (w->state != W_STARTING) {
        protocol_error(w, "HELLO from a worker that is already running");
        return;
    }
    if (h.pid != (uint32_t)w->wpid) {
        protocol_error(w, "HELLO says pid %" PRIu32 ", the worker is %d", h.pid, (int)w->wpid);
        return;
    }
    evtimer_del(w->timer); /* the init timeout */
    set_state(w, W_IDLE);
    p->init_failures = 0;
    p->in_callback++;
    p->cb.idle(p->ctx, p, w);
    p->in_callback--;
}

static void on_initfail(orch_worker *w, const struct orch_wire_frame *f)
{
    struct orch__arena a = {0};
    const char *msg;
    if (orch_wire_get_initfail(f, &a, &msg) < 0) {
        protocol_error(w, "%s", orch_error_detail());
    } else if (w->state != W_STARTING) {
        protocol_error(w, "INITFAIL from a worker that is already running");
    } else {
        /* The worker exits by itself; declare_lost keeps its pid to reap. */
        declare_lost(w, ORCH_LOSS_INIT, *msg ? msg : "init failed without a message");
    }
    orch__arena_free(&a);
}

/* Checks a decoded report against the batch w holds and the call; 0 or -1 after a
 * protocol error. */
static int check_report(orch_worker *w, const struct orch_wire_report *r)
{
    const struct orch_wire_config *c = &w->pool->wcfg;
    if (w->state != W_BUSY) {
        protocol_error(w, "a report for batch %" PRIu64 " from a worker that holds none",
                       r->batch);
        return -1;
    }
    if (r->batch != w->batch) {
        protocol_error(w, "a report for batch %" PRIu64 ", the worker holds batch %" PRIu64,
                       r->batch, w->batch);
        return -1;
    }
    if (r->status != ORCH_WIRE_STATUS_OK)
        return 0; /* no answers to check: the decoder refused any */
    if (r->nrec != w->nrec) {
        protocol_error(w, "batch %" PRIu64 " has %" PRIu32 " records, the report %" PRIu32,
                       r->batch, w->nrec, r->nrec);
        return -1;
    }
    bool expand = c->op == ORCH_UDF_OP_EXPAND || c->op == ORCH_UDF_OP_EXPAND_ALIGNED;
    for (uint32_t i = 0; i < r->nrec; i++) {
        const struct orch_wire_answer *a = &r->rec[i];
        const char *bad = NULL;
        if (a->grain != w->held[i].grain || a->generation != w->held[i].generation)
            bad = "answers another grain";
        else if (a->outcome == ORCH_WIRE_OK && c->op == ORCH_UDF_OP_FILTER)
            bad = "is ok, but a filter answers keep or reject";
        else if ((a->outcome == ORCH_WIRE_KEEP_TRUE || a->outcome == ORCH_WIRE_KEEP_FALSE) &&
                 c->op != ORCH_UDF_OP_FILTER)
            bad = "is keep or reject, but the call is not a filter";
        else if (a->outcome == ORCH_WIRE_OK && a->nout != c->nout)
            bad = "has the wrong number of outputs";
        else if (a->outcome == ORCH_WIRE_OK && !expand && a->nchild != 1)
            bad = "has children, but the call is not an expand";
        else if (a->nfailed > 0 && !expand)
            bad = "has failed children, but the call is not an expand";
        if (bad) {
            protocol_error(w, "answer %" PRIu32 " of batch %" PRIu64 " (grain %" PRIu64 ") %s",
                           i, r->batch, a->grain, bad);
            return -1;
        }
    }
    return 0;
}

/* A remote worker's report carries values (values mode): writes them to the payload store
 * in one transaction, before the driver commits anything that names them (the ordering
 * rule of DESIGN §6, as a local worker's own write), and turns r into the report of ids the
 * driver takes. A store that cannot take them turns it into a STORAGE report: the job
 * stops, as when a local worker's write fails. Returns 0, or -ENOMEM. */
static int store_values(orch_worker *w, struct orch__arena *a, struct orch_wire_report *r)
{
    orch_pool *p = w->pool;
    size_t total = 0;
    for (uint32_t i = 0; i < r->nrec; i++)
        total += (size_t)r->rec[i].nchild * r->rec[i].nout;
    struct orch_iov *iov = orch__arena_alloc(a, sizeof *iov * (total + 1));
    uint64_t *ids = orch__arena_alloc(a, sizeof *ids * (total + 1));
    if (!iov || !ids)
        return -ENOMEM;
    size_t nset = 0;
    for (uint32_t i = 0; i < r->nrec; i++) {
        const struct orch_wire_answer *an = &r->rec[i];
        for (size_t k = 0; k < (size_t)an->nchild * an->nout; k++)
            if (an->values[k].set)
                iov[nset++] = (struct orch_iov){an->values[k].data, an->values[k].len};
    }
    int rc = orch_payload_put_many(p->store, iov, nset, ids);
    if (rc < 0) {
        char *why = orch__arena_alloc(a, 512);
        if (!why)
            return -ENOMEM;
        snprintf(why, 512, "storing %zu outputs of worker %d on %s: %s", nset, (int)w->wpid,
                 w->host, *orch_error_detail() ? orch_error_detail() : orch_strerror(rc));
        r->status = ORCH_WIRE_STATUS_STORAGE;
        r->message = why;
        r->nrec = 0;
        r->values = 0;
        return 0;
    }
    /* Spread the ids over the answers' slots: 0 where a value was not set (failed
     * children). The answers live in the arena the decoder filled: ours to change. */
    size_t j = 0;
    for (uint32_t i = 0; i < r->nrec; i++) {
        struct orch_wire_answer *an = (struct orch_wire_answer *)&r->rec[i];
        size_t n = (size_t)an->nchild * an->nout;
        uint64_t *mine = orch__arena_alloc(a, sizeof *mine * (n + 1));
        uint64_t *size = orch__arena_alloc(a, sizeof *size * (n + 1));
        if (!mine || !size)
            return -ENOMEM;
        for (size_t k = 0; k < n; k++) {
            mine[k] = an->values[k].set ? ids[j++] : 0;
            size[k] = an->values[k].set ? an->values[k].len : 0;
        }
        an->payload = mine;
        an->size = size;
        an->values = NULL;
    }
    r->values = 0;
    return 0;
}

static void on_report(orch_worker *w, const struct orch_wire_frame *f)
{
    orch_pool *p = w->pool;
    struct orch__arena a = {0};
    struct orch_wire_report r;
    if (orch_wire_get_report(f, &a, &r) < 0) {
        protocol_error(w, "%s", orch_error_detail());
    } else if (r.values != (p->launcher != NULL)) {
        protocol_error(w, "a report %s values from a %s worker", r.values ? "with" : "without",
                       p->launcher ? "remote" : "local");
    } else if (check_report(w, &r) == 0) {
        if (r.values && store_values(w, &a, &r) < 0) {
            protocol_error(w, "no memory to store the values of batch %" PRIu64, r.batch);
            orch__arena_free(&a);
            return;
        }
        evtimer_del(w->timer);
        set_state(w, W_IDLE);
        w->batch = 0;
        p->in_callback++;
        p->cb.report(p->ctx, p, w, &r);
        p->in_callback--;
    }
    orch__arena_free(&a);
}

/* f->type is a known type: orch_wire_next() refuses any other. */
static void on_frame(orch_worker *w, const struct orch_wire_frame *f)
{
    switch ((enum orch_wire_type)f->type) {
    case ORCH_WIRE_HELLO:
        on_hello(w, f);
        break;
    case ORCH_WIRE_INITFAIL:
        on_initfail(w, f);
        break;
    case ORCH_WIRE_REPORT:
        on_report(w, f);
        break;
    case ORCH_WIRE_CONFIG:
    case ORCH_WIRE_BATCH:
    case ORCH_WIRE_CHALLENGE:
    case ORCH_WIRE_AUTH:
        protocol_error(w, "a worker sent a %s frame", orch_wire_type_name(f->type));
        break;
    }
}

/* Room for n more bytes of input. */
static int in_reserve(orch_worker *w, size_t n)
{
    if (w->in_off > 0 && w->in.cap - w->in.len < n) {
        memmove(w->in.data, w->in.data + w->in_off, w->in.len - w->in_off);
        w->in.len -= w->in_off;
        w->in_off = 0;
    }
    if (n > SIZE_MAX - w->in.len)
        return -ENOMEM;
    return orch__grow_n(&w->in.data, &w->in.cap, w->in.len + n, 1);
}

/* Handles every whole frame in the input. Returns false when the slot's process changed or
 * its socket closed (stop reading). */
static bool handle_frames(orch_worker *w)
{
    uint64_t inc = w->incarnation;
    for (;;) {
        struct orch_wire_frame f;
        int rc = orch_wire_next(w->in.data + w->in_off, w->in.len - w->in_off, &f);
        if (rc < 0) {
            protocol_error(w, "%s", orch_error_detail());
            return false;
        }
        if (rc == 0) {
            if (w->in_off == w->in.len) {
                w->in.len = w->in_off = 0;
                if (w->in.cap > 4 * READ_CHUNK) /* do not keep a big frame's room */
                    orch_wire_buf_free(&w->in);
            }
            /* Make room for the whole frame at once. */
            if (f.size > 0 && in_reserve(w, f.size - (w->in.len - w->in_off)) < 0) {
                protocol_error(w, "no memory for a frame of %zu bytes", f.size);
                return false;
            }
            return true;
        }
        w->in_off += f.size; /* the body stays in place until the next read */
        on_frame(w, &f);
        if (w->incarnation != inc || w->fd < 0)
            return false;
    }
}

/* Reads what the socket holds and handles its frames. Without drain it stops after a few
 * chunks so that one worker cannot hold the loop; with drain it reads to EAGAIN or EOF. */
static void read_some(orch_worker *w, bool drain)
{
    for (int round = 0; drain || round < 16; round++) {
        if (in_reserve(w, READ_CHUNK) < 0) {
            protocol_error(w, "no memory to read from the worker");
            return;
        }
        ssize_t n = recv(w->fd, w->in.data + w->in.len, w->in.cap - w->in.len, MSG_DONTWAIT);
        if (n > 0) {
            w->in.len += (size_t)n;
            if (!handle_frames(w))
                return;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        socket_gone(w); /* EOF, ECONNRESET, ... */
        return;
    }
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    read_some(arg, false);
}

/* ---- starting a worker ----------------------------------------------------------------- */

/* The environment of worker i: environ, with CUDA_VISIBLE_DEVICES replaced when the pool
 * sets it. Returns environ itself, a malloc'd array (*owned = true), or NULL (no memory). */
static char **worker_env(orch_pool *p, int i, bool *owned)
{
    *owned = false;
    if (p->cuda_env == NULL || p->cuda_env[i] == NULL)
        return environ;
    static const char key[] = "CUDA_VISIBLE_DEVICES=";
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = malloc(sizeof *env * (n + 2));
    if (env == NULL)
        return NULL;
    size_t k = 0;
    for (size_t j = 0; j < n; j++)
        if (strncmp(environ[j], key, sizeof key - 1) != 0)
            env[k++] = environ[j];
    env[k++] = (char *)p->cuda_env[i];
    env[k] = NULL;
    *owned = true;
    return env;
}

static int spawn_remote(orch_worker *w);

/* Dead slot w holds process pid from now on, STARTING; where it runs is not known yet
 * (the caller says: at once for a local worker, at its AUTH for a remote one). */
static void occupy(orch_worker *w, pid_t pid)
{
    w->incarnation++;
    w->pid = pid;
    w->wpid = 0;
    w->host[0] = w->slurm_job[0] = '\0';
    w->start_token = 0;
    live_add(w);
    w->reaped = false;
    set_dying(w, false);
    set_state(w, W_STARTING);
    w->batch = 0;
    w->in.len = w->in_off = 0;
}

/* Starts a process in dead slot w and sends it CONFIG. Returns 0 or a negative error
 * (nothing left running then). */
static int spawn(orch_worker *w)
{
    orch_pool *p = w->pool;
    if (p->launcher)
        return spawn_remote(w);
    assert(w->state == W_DEAD && w->fd < 0 && !w->running);
    struct orch_wire_config c = p->wcfg;
    c.worker = (uint32_t)w->index;
    w->out.len = w->out_off = 0;
    int rc = orch_wire_put_config(&w->out, &c);
    if (rc < 0)
        return rc;

    bool owned;
    char **envp = worker_env(p, w->index, &owned);
    if (envp == NULL)
        return -ENOMEM;
    static char arg0[] = "orch", arg1[] = "__worker";
    char arg2[16];
    snprintf(arg2, sizeof arg2, "%d", WORKER_FD);
    char *argv[] = {arg0, arg1, arg2, NULL};

    /* SIGCHLD is watched before the child exists, so that its death cannot go unseen. */
    if (!p->chld_watched) {
        if (event_add(p->ev_chld, NULL) < 0) {
            rc = -ENOMEM;
            goto fail_env;
        }
        p->chld_watched = true;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        rc = -errno;
        goto fail_env;
    }
    /* Its own process group: a Ctrl-C at the terminal reaches the driver only, which then
     * closes its pools; an interruption must not look like a crash of every worker. */
    struct orch_proc_spec spec = {
        .path = p->exe,
        .argv = argv,
        .envp = envp,
        .nfd = WORKER_FD + 1,
        .fd = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, sv[1]},
        .deathsig = SIGKILL,
        .pgroup = ORCH_PROC_PGROUP_OWN};
    pid_t pid;
    rc = orch_proc_spawn(&spec, &pid);
    close(sv[1]);
    if (rc < 0) {
        close(sv[0]);
        goto fail_env;
    }
    if (owned)
        free(envp);

    occupy(w, pid);
    w->wpid = pid;
    snprintf(w->host, sizeof w->host, "%s", p->host);
    w->fd = sv[0];
    int fl = fcntl(w->fd, F_GETFL);
    if (fl < 0 || fcntl(w->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        rc = -errno;
        goto fail_proc;
    }
    w->ev_read = event_new(p->base, w->fd, EV_READ | EV_PERSIST, on_read, w);
    w->ev_write = event_new(p->base, w->fd, EV_WRITE, on_write, w);
    if (w->ev_read == NULL || w->ev_write == NULL || event_add(w->ev_read, NULL) < 0) {
        rc = -ENOMEM;
        goto fail_proc;
    }
    if (p->timeout_ms > 0) { /* a UDF whose init hangs must not hold its slot forever */
        struct timeval tv = ms_tv(INIT_TIMEOUT_FACTOR * p->timeout_ms);
        if (evtimer_add(w->timer, &tv) < 0) {
            rc = -ENOMEM;
            goto fail_proc;
        }
    }
    flush(w);
    return 0;

fail_proc:
    kill_pid(pid);
    close_channel(w);
    add_corpse(p, pid);
    live_del(w);
    set_state(w, W_DEAD);
    arm_poll(p);
    return rc;
fail_env:
    if (owned)
        free(envp);
    w->out.len = 0;
    (void)watch_children(p);
    return rc;
}

/* ---- remote workers (launch.h) --------------------------------------------------------- */

/* The launcher hands over the connection of the worker started in w (its token). */
static void on_attach(void *who, int fd, const struct orch_wire_auth *au)
{
    orch_worker *w = who;
    orch_pool *p = w->pool;
    /* close_channel() forgets the token of a start that ended, so the launcher only calls
     * for a slot still waiting for it. */
    if (ORCH_NEVER(w->state != W_STARTING || w->fd >= 0 || w->token != au->token)) {
        close(fd);
        return;
    }
    w->token = 0;
    w->fd = fd;
    w->wpid = (pid_t)au->pid;
    snprintf(w->host, sizeof w->host, "%s", au->host);
    snprintf(w->slurm_job, sizeof w->slurm_job, "%s", au->slurm_job);
    w->ev_read = event_new(p->base, w->fd, EV_READ | EV_PERSIST, on_read, w);
    w->ev_write = event_new(p->base, w->fd, EV_WRITE, on_write, w);
    if (w->ev_read == NULL || w->ev_write == NULL || event_add(w->ev_read, NULL) < 0) {
        break_worker(w, "the event loop cannot watch its connection (out of memory?)");
        return;
    }
    /* Its init is timed from here: the time Slurm kept the step pending is not init. */
    if (p->timeout_ms > 0) {
        struct timeval tv = ms_tv(INIT_TIMEOUT_FACTOR * p->timeout_ms);
        if (evtimer_add(w->timer, &tv) < 0) {
            break_worker(w, "the event loop cannot time its init (out of memory?)");
            return;
        }
    }
    flush(w); /* the CONFIG queued by spawn_remote */
}

/* Starts srun for slot w (launch.h); the worker's CONFIG waits in w->out until it has
 * connected and proved itself (on_attach). */
static int spawn_remote(orch_worker *w)
{
    orch_pool *p = w->pool;
    assert(w->state == W_DEAD && w->fd < 0 && !w->running);
    struct orch_wire_config c = p->wcfg;
    char **argv = NULL, **envp = NULL;
    c.worker = (uint32_t)w->index;
    c.values = 1;
    c.payload_dir = "";
    c.max_value = orch_payload_max_value(p->store);
    w->out.len = w->out_off = 0;
    int rc = orch_wire_put_config(&w->out, &c);
    if (rc < 0)
        return rc;
    uint64_t token;
    if ((rc = orch_launcher_expect(p->launcher, on_attach, w, &token)) < 0)
        goto fail;
    struct orch_launch_request req = {
        .exe = p->exe,
        .call = c.call,
        .cpus = p->cpus,
        .gpus = p->gpus,
        .token = token,
        .guard = p->exe};
    if ((rc = orch_launcher_command(p->launcher, &req, &argv, &envp)) < 0)
        goto fail_token;
    if (!p->chld_watched) {
        if (event_add(p->ev_chld, NULL) < 0) {
            rc = -ENOMEM;
            goto fail_cmd;
        }
        p->chld_watched = true;
    }
    /* srun's guard gets SIGTERM when the driver dies, and has srun forward it to the step
     * and end the job (launch.h, orch_srun_guard_main). Its stdin is /dev/null: srun
     * forwards its stdin to the step, and the driver's (a terminal, or a pipe that stays
     * open) would keep srun reading, or stop it (SIGTTIN: its process group is not the
     * terminal's), and then srun does not end when told to. */
    struct orch_proc_spec spec = {
        .path = argv[0],
        .argv = argv,
        .envp = envp,
        .nfd = 3,
        .fd = {ORCH_PROC_FD_NULL, STDOUT_FILENO, STDERR_FILENO},
        .deathsig = SIGTERM,
        .pgroup = ORCH_PROC_PGROUP_OWN};
    pid_t pid;
    if ((rc = orch_proc_spawn(&spec, &pid)) < 0)
        goto fail_cmd;
    free(argv);
    free(envp);
    occupy(w, pid);
    w->token = w->start_token = token;
    return 0;

fail_cmd:
    free(argv);
    free(envp);
    (void)watch_children(p);
fail_token:
    orch_launcher_forget(p->launcher, token);
fail:
    w->out.len = 0;
    return rc;
}

/* The most bytes of input values one remote batch carries: what one frame holds, or
 * less with ORCH_REMOTE_BATCH_MAX (tests: the refusal of a batch too big to send, without
 * making 256 MiB of payloads). */
static size_t batch_values_max(void)
{
    const char *env = getenv("ORCH_REMOTE_BATCH_MAX");
    char *end;
    unsigned long long v = env && *env ? strtoull(env, &end, 10) : 0;
    return v > 0 && !*end && v < ORCH_WIRE_MAX_BODY ? (size_t)v : ORCH_WIRE_MAX_BODY;
}

/* The batch b with every present value's bytes read from the store, encoded into out (a
 * remote worker's batch: values mode). Returns 0, -EIO with the detail set (the store could
 * not give a value: the job must stop, see orch_pool_dispatch), -E2BIG (the values are over
 * what one batch carries), or an encoding error. */
static int put_batch_values(orch_pool *p, struct orch_wire_buf *out,
                            const struct orch_wire_batch *b)
{
    size_t bytes = 0, max = batch_values_max();
    size_t total = 0;
    for (uint32_t i = 0; i < b->nrec; i++)
        for (uint32_t j = 0; j < b->rec[i].nin; j++)
            total += b->rec[i].nval[j];
    struct orch_wire_record *rec = malloc(sizeof *rec * b->nrec);
    struct orch_wire_value *vals = malloc(sizeof *vals * (total + 1));
    orch_payload_rtxn *r = NULL;
    int rc = -ENOMEM;
    if (!rec || !vals)
        goto out;
    if ((rc = orch_payload_read_begin(p->store, &r)) < 0) {
        rc = orch_error_set(-EIO, "cannot read the inputs of batch %" PRIu64 ": %s", b->id,
                            orch_error_detail());
        goto out;
    }
    size_t k = 0;
    for (uint32_t i = 0; i < b->nrec; i++) {
        size_t nv = 0;
        for (uint32_t j = 0; j < b->rec[i].nin; j++)
            nv += b->rec[i].nval[j];
        rec[i] = b->rec[i];
        rec[i].vals = vals + k;
        for (size_t v = 0; v < nv; v++, k++) {
            vals[k] = b->rec[i].vals[v];
            if (!vals[k].present)
                continue;
            rc = orch_payload_read(r, vals[k].payload, &vals[k].data, &vals[k].len);
            if (rc < 0) {
                rc = orch_error_set(-EIO, "cannot read payload %" PRIu64
                                          " (an input of grain %" PRIu64 "): %s",
                                    vals[k].payload, rec[i].grain,
                                    rc == ORCH_ENOTFOUND ? "not in the payload store"
                                                         : orch_error_detail());
                goto out;
            }
            bytes += vals[k].len;
        }
    }
    if (bytes > max) {
        rc = -E2BIG;
        goto out;
    }
    struct orch_wire_batch vb = *b;
    vb.values = 1;
    vb.rec = rec;
    rc = orch_wire_put_batch(out, &vb);
out:
    orch_payload_read_end(r);
    free(rec);
    free(vals);
    return rc;
}

/* ---- the pool -------------------------------------------------------------------------- */

static enum orch_udf_op udf_op(enum orch_op op, bool *ok)
{
    *ok = true;
    switch (op) {
    case ORCH_OP_MAP:
        return ORCH_UDF_OP_MAP;
    case ORCH_OP_EXPAND:
        return ORCH_UDF_OP_EXPAND;
    case ORCH_OP_EXPAND_ALIGNED:
        return ORCH_UDF_OP_EXPAND_ALIGNED;
    case ORCH_OP_FILTER:
        return ORCH_UDF_OP_FILTER;
    case ORCH_OP_REDUCE:
        return ORCH_UDF_OP_REDUCE;
    case ORCH_OP_BROADCAST:
    case ORCH_OP__COUNT:
        break;
    }
    *ok = false;
    return ORCH_UDF_OP_MAP;
}

/* Fills p->wcfg (and the strings it points to) from the plan's call. */
static int copy_config(orch_pool *p, const struct orch_pool_config *cfg)
{
    struct orch__arena *a = &p->arena;
    const struct orch_call *call = orch_plan_call(cfg->plan, cfg->call);
    if (call->stmt < 0)
        return orch_error_set(-EINVAL, "call %s is used by no statement", call->name);
    const struct orch_stmt *st = orch_plan_stmt(cfg->plan, call->stmt);
    bool ok;
    enum orch_udf_op op = udf_op(st->op, &ok);
    if (!ok)
        return orch_error_set(-EINVAL, "call %s: a %s has no workers", call->name,
                              orch_op_name(st->op));
    struct orch_wire_config *c = &p->wcfg;
    c->call = orch__arena_strdup(a, call->name);
    c->fn_kind = call->fn_kind;
    c->function = orch__arena_strdup(a, call->function);
    c->symbol = orch__arena_strdup(a, call->symbol ? call->symbol : "");
    c->op = op;
    c->nin = (uint32_t)st->nin;
    c->nout = op == ORCH_UDF_OP_FILTER ? 1 : (uint32_t)st->nout;
    c->payload_dir = orch__arena_strdup(a, cfg->payload_dir);
    c->nargs = (uint32_t)call->nargs;
    const char **keys = orch__arena_alloc(a, sizeof(char *) * (size_t)(call->nargs + 1));
    const char **vals = orch__arena_alloc(a, sizeof(char *) * (size_t)(call->nargs + 1));
    if (!c->call || !c->function || !c->symbol || !c->payload_dir || !keys || !vals)
        return -ENOMEM;
    for (int i = 0; i < call->nargs; i++) {
        keys[i] = orch__arena_strdup(a, call->args[i].key);
        vals[i] = orch__arena_strdup(a, call->args[i].value);
        if (!keys[i] || !vals[i])
            return -ENOMEM;
    }
    c->arg_keys = keys;
    c->arg_values = vals;
    p->exe = orch__arena_strdup(a, cfg->exe);
    if (!p->exe)
        return -ENOMEM;
    if (cfg->cuda_visible_devices) {
        p->cuda_env = orch__arena_alloc(a, sizeof(char *) * (size_t)cfg->nworkers);
        if (!p->cuda_env)
            return -ENOMEM;
        for (int i = 0; i < cfg->nworkers; i++) {
            const char *v = cfg->cuda_visible_devices[i];
            if (v == NULL)
                continue;
            char *s = orch__arena_alloc(a, strlen(v) + sizeof "CUDA_VISIBLE_DEVICES=");
            if (!s)
                return -ENOMEM;
            sprintf(s, "CUDA_VISIBLE_DEVICES=%s", v);
            p->cuda_env[i] = s;
        }
    }
    return 0;
}

/* Frees everything; every process must be reaped. */
static void pool_free(orch_pool *p)
{
    for (int i = 0; p->w && i < p->nworkers; i++) {
        orch_worker *w = &p->w[i];
        close_channel(w);
        if (w->timer)
            event_free(w->timer);
        orch_wire_buf_free(&w->in);
        orch_wire_buf_free(&w->out);
        free(w->held);
    }
    if (p->ev_chld)
        event_free(p->ev_chld);
    if (p->ev_poll)
        event_free(p->ev_poll);
    free(p->w);
    free(p->live);
    free(p->corpses);
    free(p->failure);
    orch__arena_free(&p->arena);
    free(p);
}

int orch_pool_new(struct event_base *base, const struct orch_pool_config *cfg,
                  const struct orch_pool_callbacks *cb, void *ctx, orch_pool **out)
{
    *out = NULL;
    if (!base || !cfg || !cb || !cb->idle || !cb->report || !cb->lost || !cfg->exe ||
        !cfg->payload_dir || !cfg->plan || cfg->call < 0 ||
        cfg->call >= orch_plan_ncalls(cfg->plan) || cfg->nworkers < 1 || cfg->timeout_ms < 0 ||
        (cfg->launcher && !cfg->store))
        return orch_error_set(-EINVAL, "orch_pool_new: invalid configuration");
    orch_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    p->base = base;
    p->cb = *cb;
    p->ctx = ctx;
    p->timeout_ms = cfg->timeout_ms;
    p->max_init_failures = cfg->max_init_failures < 1 ? 1 : cfg->max_init_failures;
    p->nworkers = cfg->nworkers;
    p->launcher = cfg->launcher;
    p->store = cfg->store;
    p->cpus = cfg->cpus;
    p->gpus = cfg->gpus;
    if (gethostname(p->host, sizeof p->host) < 0)
        snprintf(p->host, sizeof p->host, "localhost");
    p->host[sizeof p->host - 1] = '\0';
    int rc = copy_config(p, cfg);
    if (rc < 0)
        goto fail;
    if (access(cfg->exe, X_OK) < 0) {
        rc = orch_error_set(-errno, "cannot run workers of call %s: %s: %s", p->wcfg.call,
                            cfg->exe, strerror(errno));
        goto fail;
    }
    rc = -ENOMEM;
    p->w = calloc((size_t)cfg->nworkers, sizeof *p->w);
    p->live = calloc((size_t)cfg->nworkers, sizeof *p->live);
    if (p->w == NULL || p->live == NULL)
        goto fail;
    for (int i = 0; i < p->nworkers; i++) {
        orch_worker *w = &p->w[i];
        w->pool = p;
        w->index = i;
        w->fd = -1;
        w->live_at = -1;
        w->timer = evtimer_new(base, on_timer, w);
        if (w->timer == NULL)
            goto fail;
    }
    p->nstate[W_DEAD] = p->nworkers;
    /* SIGCHLD is watched from the first process on (watch_children). */
    p->ev_chld = evsignal_new(base, SIGCHLD, on_sigchld, p);
    p->ev_poll = evtimer_new(base, on_poll, p);
    if (!p->ev_chld || !p->ev_poll)
        goto fail;
    *out = p;
    return 0;
fail:
    pool_free(p);
    return rc;
}

int orch_pool_start(orch_pool *p, orch_worker **out)
{
    if (out)
        *out = NULL;
    if (p->failed || p->closing)
        return orch_error_set(-ECANCELED, "call %s cannot start workers: %s", p->wcfg.call,
                              p->failed ? orch_pool_failure(p) : "its pool is closing");
    if (p->nstate[W_DEAD] == 0)
        return -EBUSY;
    while (p->free_from < p->nworkers && p->w[p->free_from].state != W_DEAD)
        p->free_from++;
    assert(p->free_from < p->nworkers); /* nstate[W_DEAD] > 0 */
    orch_worker *w = &p->w[p->free_from];
    int rc = spawn(w);
    if (rc < 0)
        return orch_error_set(rc, "cannot start worker %d of call %s: %s", w->index,
                              p->wcfg.call, strerror(-rc));
    if (out)
        *out = w;
    return 0;
}

int orch_pool_stop(orch_pool *p, orch_worker *w)
{
    assert(w->pool == p);
    if (w->state != W_IDLE)
        return -EBUSY;
    if (w->dying)
        return -EPIPE;
    /* EOF on its socket tells the worker to run fini and exit; the slot is free once it is
     * reaped (check_children), or killed if its fini takes longer than STOP_WAIT_MS. */
    close_channel(w);
    set_state(w, W_STOPPING);
    struct timeval tv = ms_tv(STOP_WAIT_MS);
    if (evtimer_add(w->timer, &tv) < 0)
        kill_worker(w); /* no deadline can be kept for its fini: end it now */
    arm_poll(p);
    return 0;
}

int orch_pool_dispatch(orch_pool *p, orch_worker *w, const struct orch_wire_batch *b)
{
    assert(w->pool == p);
    if (w->state != W_IDLE)
        return -EBUSY;
    if (w->dying)
        return -EPIPE;
    if (b->id == 0 || b->nrec == 0)
        return -EINVAL;
    bool reduce = p->wcfg.op == ORCH_UDF_OP_REDUCE;
    for (uint32_t i = 0; i < b->nrec; i++) {
        if (b->rec[i].nin != p->wcfg.nin)
            return -EINVAL;
        for (uint32_t j = 0; j < b->rec[i].nin && !reduce; j++)
            if (b->rec[i].nval[j] != 1)
                return -EINVAL;
    }
    if (orch__grow_n(&w->held, &w->held_cap, b->nrec, sizeof *w->held) < 0)
        return -ENOMEM;
    size_t mark = w->out.len;
    int rc = p->launcher ? put_batch_values(p, &w->out, b) : orch_wire_put_batch(&w->out, b);
    if (rc < 0)
        return rc;
    /* Armed before anything is sent, so that a batch the pool cannot time out is refused
     * whole rather than run without its timeout. */
    if (p->timeout_ms > 0) {
        struct timeval tv = ms_tv(p->timeout_ms);
        if (evtimer_add(w->timer, &tv) < 0) {
            w->out.len = mark;
            return -ENOMEM;
        }
    }
    for (uint32_t i = 0; i < b->nrec; i++)
        w->held[i] = (struct held_grain){b->rec[i].grain, b->rec[i].generation};
    w->nrec = b->nrec;
    w->batch = b->id;
    set_state(w, W_BUSY);
    flush(w);
    return 0;
}

/* Waits up to ms for every process of the pool to end, reaping them; returns true when
 * none is left. */
static bool wait_all(orch_pool *p, int64_t ms)
{
    int64_t deadline = orch_clock_mono_ms() + ms;
    int64_t nap = 1;
    for (;;) {
        bool left = false;
        for (int i = 0; i < p->nlive; i++) {
            orch_worker *w = p->live[i];
            if (!w->reaped) {
                w->reaped = reap_nohang(w->pid, &w->status);
                if (w->reaped)
                    srun_reaped(w);
                left |= !w->reaped;
            }
        }
        reap_corpses(p);
        left |= p->ncorpses > 0;
        if (!left)
            return true;
        if (orch_clock_mono_ms() >= deadline)
            return false;
        orch_clock_sleep_ms(nap);
        if (nap < 20)
            nap *= 2;
    }
}

/* SIGKILLs and reaps every process that is left. A remote pool's processes (srun) are
 * first asked with SIGTERM, so that each ends its step and allocation (kill_worker). */
static void kill_all(orch_pool *p)
{
    if (p->launcher) {
        for (int i = 0; i < p->nlive; i++) {
            close_channel(p->live[i]);
            if (!p->live[i]->reaped)
                kill_worker(p->live[i]);
        }
        for (int i = 0; i < p->ncorpses; i++)
            kill(p->corpses[i], SIGTERM);
        if (wait_all(p, CLOSE_WAIT_MS))
            return;
    }
    for (int i = 0; i < p->nlive; i++) {
        orch_worker *w = p->live[i];
        if (!w->reaped)
            kill_pid(w->pid);
    }
    for (int i = 0; i < p->ncorpses; i++)
        kill_pid(p->corpses[i]);
    for (int i = 0; i < p->nlive; i++) {
        orch_worker *w = p->live[i];
        if (!w->reaped) {
            orch_proc_reap(w->pid, true, &w->status);
            w->reaped = true;
            srun_reaped(w);
        }
    }
    for (int i = 0; i < p->ncorpses; i++)
        orch_proc_reap(p->corpses[i], true, NULL);
    p->ncorpses = 0;
}

void orch_pool_kill(orch_pool *p)
{
    if (p == NULL)
        return;
    assert(p->in_callback == 0 && "a pool must not be freed from its own callback");
    p->closing = true;
    kill_all(p);
    pool_free(p);
}

void orch_pool_close(orch_pool *p)
{
    if (p == NULL)
        return;
    assert(p->in_callback == 0 && "a pool must not be freed from its own callback");
    p->closing = true;
    /* EOF on its socket tells a worker to run fini and exit. A remote worker that has not
     * connected yet (its step pending in Slurm's queue) has no socket: its srun is ended. */
    for (int i = 0; i < p->nlive; i++) {
        orch_worker *w = p->live[i];
        if (p->launcher && w->fd < 0 && w->state == W_STARTING && !w->reaped)
            kill_worker(w);
        close_channel(w);
    }
    if (!wait_all(p, CLOSE_WAIT_MS))
        kill_all(p);
    pool_free(p);
}

int orch_worker_pid(const orch_worker *w)
{
    return (int)w->wpid;
}

const char *orch_worker_host(const orch_worker *w)
{
    return w->host;
}

const char *orch_worker_slurm_job(const orch_worker *w)
{
    return w->slurm_job;
}

int orch_worker_index(const orch_worker *w)
{
    return w->index;
}

int orch_pool_alive(const orch_pool *p)
{
    return p->nworkers - p->nstate[W_DEAD];
}

int orch_pool_starting(const orch_pool *p)
{
    return p->nstate[W_STARTING];
}

int orch_pool_failed(const orch_pool *p)
{
    return p->failed;
}

const char *orch_pool_failure(const orch_pool *p)
{
    return p->failure ? p->failure : "";
}
