/* pool.c — worker pools, the driver side (pool.h): the pool's books, the conversation's
 * channel, the one report of each death, the clean stop of an idle worker, and the API.
 * The design (slots, deaths, re-entrancy, cost, reaping) is told in pool_int.h. */
#define _GNU_SOURCE
#include "pool_int.h"
#include "claim.h"

#include "orch_error.h"
#include "orch_udf.h"
#include "proc.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* ---- small helpers ------------------------------------------------------------- */

static void describe_timeout(char *buf, size_t n, int64_t ms)
{
    if (ms % 1000 == 0)
        snprintf(buf, n, "batch ran past its timeout of %" PRId64 "s", ms / 1000);
    else
        snprintf(buf, n, "batch ran past its timeout of %" PRId64 "ms", ms);
}

void orch_pool__kill_pid(pid_t pid)
{
    if (pid > 0)
        kill(pid, SIGKILL);
}

/* Ends slot w's process. A remote worker's process is its srun: SIGTERM, which srun
 * forwards to the step before it ends the job itself (launch.h). The worker also exits
 * when its connection closes, which follows. kill_all() ends with SIGKILL what SIGTERM did
 * not end in time. */
void orch_pool__kill_worker(orch_worker *w)
{
    if (w->pool->launcher == NULL)
        orch_pool__kill_pid(w->pid);
    else if (w->pid > 0)
        kill(w->pid, SIGTERM);
}

/* Reaps pid if it has ended: true, with *status its wait status (ORCH_PROC_STATUS_GONE
 * when another waiter took it); false while it runs. */
static bool reap_nohang(pid_t pid, int *status)
{
    return orch_proc_reap(pid, false, status) != ORCH_PROC_RUNNING;
}

/* ---- the pool's books: slots by state, the live list, the SIGCHLD watch -------- */

void orch_pool__set_state(orch_worker *w, enum wstate s)
{
    orch_pool *p = w->pool;
    p->nstate[w->state]--;
    p->nstate[s]++;
    w->state = s;
    if (s == W_DEAD && w->index < p->free_from)
        p->free_from = w->index;
}

void orch_pool__set_dying(orch_worker *w, bool dying)
{
    w->pool->ndying += (int)dying - (int)w->dying;
    w->dying = dying;
}

/* SIGCHLD is watched only while the pool has a process or a corpse (see Cost above). The
 * add is done before a start (orch_pool__spawn), which is refused when it fails (out of
 * memory); a removal cannot fail for a valid event. */
int orch_pool__watch_children(orch_pool *p)
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
void orch_pool__live_add(orch_worker *w)
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
void orch_pool__live_del(orch_worker *w)
{
    orch_pool *p = w->pool;
    w->running = false;
    if (w->live_at < 0)
        return;
    orch_worker *last = p->live[--p->nlive];
    p->live[w->live_at] = last;
    last->live_at = w->live_at;
    w->live_at = -1;
    (void)orch_pool__watch_children(p);
}

void orch_pool__add_corpse(orch_pool *p, pid_t pid)
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
    (void)orch_pool__watch_children(p);
}

/* Arms the reap poll while anything waits for a reap. The poll is the safety net behind
 * SIGCHLD: when libevent cannot arm it (out of memory), SIGCHLD still reaps, and the next
 * call here (after every loss and every reap) tries again. */
void orch_pool__arm_poll(orch_pool *p)
{
    bool waiting = p->ncorpses > 0 || p->ndying > 0 || p->nstate[W_STOPPING] > 0;
    if (waiting && !evtimer_pending(p->ev_poll, NULL)) {
        struct timeval tv = ms_tv(REAP_POLL_MS);
        if (evtimer_add(p->ev_poll, &tv) < 0)
            return; /* see above: not armed this time */
    }
}

/* ---- the channel: socket, events, buffers -------------------------------------- */

void orch_pool__close_channel(orch_worker *w)
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

/* Sends what is queued; arms the write event when the socket is full. A write error means
 * the worker is gone: the queued bytes are dropped and the read side (EOF) or the reap
 * reports it. Calls no callback (it runs inside orch_pool_dispatch()). */
void orch_pool__flush(orch_worker *w)
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
                orch_pool__break_worker(
                    w, "the event loop cannot watch its socket (out of memory?)");
            return;
        }
        break;
    }
    w->out.len = w->out_off = 0;
    if (w->out.cap > 4 * READ_CHUNK) /* do not keep a big frame's room (a reduce's batch) */
        orch_wire_buf_free(&w->out);
}

void orch_pool__on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    orch_pool__flush(arg);
}

/* ---- deaths -------------------------------------------------------------------- */

/* The one place that reports the end of a slot's process. msg is valid during the call. */
void orch_pool__declare_lost(orch_worker *w, enum orch_loss_kind kind, const char *msg)
{
    orch_pool *p = w->pool;
    assert(w->state != W_DEAD);
    if (w->state == W_STARTING)
        kind = ORCH_LOSS_INIT;
    /* Every batch it held: the one it ran, and the one queued behind it, never started. */
    uint64_t batch = w->nhold > 0 ? w->hold[0].id : 0;
    uint64_t queued = w->nhold > 1 ? w->hold[1].id : 0;
    assert(w->nhold == 0 || w->state == W_BUSY);
    assert(w->state != W_STOPPING); /* a stopped worker has no socket nor timer to lose */
    orch_pool__close_channel(w);
    if (w->running && !w->reaped)
        orch_pool__add_corpse(p, w->pid);
    orch_pool__live_del(w);
    orch_pool__set_dying(w, false);
    w->broken = NULL;
    orch_pool__set_state(w, W_DEAD);
    w->nhold = 0;
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
    p->cb.lost(p->ctx, p, w, batch, queued, kind, msg);
    p->in_callback--;
    orch_pool__arm_poll(p);
}

/* Kills the process and reports it lost now (protocol errors, timeouts). */
static void kill_and_declare(orch_worker *w, enum orch_loss_kind kind, const char *msg)
{
    if (w->running && !w->reaped)
        orch_pool__kill_worker(w);
    orch_pool__declare_lost(w, kind, msg);
}

__attribute__((format(printf, 2, 3))) void orch_pool__protocol_error(orch_worker *w,
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
    orch_pool__srun_reaped(w);
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
    orch_pool__declare_lost(w, ORCH_LOSS_CRASH, msg);
}

/* EOF or an error on the socket: the process is dying or broken. */
void orch_pool__socket_gone(orch_worker *w)
{
    orch_pool__close_channel(w);
    orch_pool__set_dying(w, true);
    if (!w->reaped) {
        /* Harmless to a process that is exiting already (its status stands); ends one that
         * closed its socket and lives on. */
        orch_pool__kill_worker(w);
        w->reaped = reap_nohang(w->pid, &w->status);
    }
    if (w->reaped)
        declare_reaped(w);
    else
        orch_pool__arm_poll(w->pool);
}

/* The pool cannot go on talking to w's process (the event loop refused to watch its
 * socket): kills it, and leaves the report of its loss to the reap (check_children), with
 * `why` (static text) as the message. Never reports from here: it runs inside
 * orch_pool_dispatch() and orch_pool_new(), which call no callback. */
void orch_pool__break_worker(orch_worker *w, const char *why)
{
    w->broken = why;
    orch_pool__close_channel(w);
    orch_pool__set_dying(w, true);
    if (!w->reaped)
        orch_pool__kill_worker(w);
    orch_pool__arm_poll(w->pool);
}

/* A stopped worker was reaped: its slot is free, silently (a stop is not a loss). */
static void stop_done(orch_worker *w)
{
    assert(w->state == W_STOPPING && w->reaped);
    orch_pool__srun_reaped(w);
    evtimer_del(w->timer);
    orch_pool__live_del(w);
    orch_pool__set_state(w, W_DEAD);
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
                    orch_pool__read_some(w, true);
                if (w->incarnation == inc && w->state != W_DEAD)
                    declare_reaped(w);
            }
        }
        if (i < p->nlive && p->live[i] == w)
            i++;
    }
    reap_corpses(p);
    orch_pool__arm_poll(p);
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
        /* The running batch's report may wait unread in the socket: read it first. If it
         * is there, the batch ended in time, and the timer runs again for the batch queued
         * behind it (pool_frames.c) or the worker is idle. */
        uint64_t inc = w->incarnation, id = w->hold[0].id;
        if (w->fd >= 0)
            orch_pool__read_some(w, true);
        if (w->incarnation != inc || w->state != W_BUSY || w->dying || w->hold[0].id != id)
            return;
        char msg[128];
        describe_timeout(msg, sizeof msg, p->timeout_ms);
        kill_and_declare(w, ORCH_LOSS_TIMEOUT, msg);
    } else if (w->state == W_STARTING && !w->dying) {
        char msg[128];
        snprintf(msg, sizeof msg, "init ran past %d times the call's timeout (%" PRId64 " ms)",
                 INIT_TIMEOUT_FACTOR, INIT_TIMEOUT_FACTOR * p->timeout_ms);
        kill_and_declare(w, ORCH_LOSS_INIT, msg);
    } else if (w->state == W_STOPPING && !w->reaped) {
        orch_pool__kill_worker(w); /* its fini ran past STOP_WAIT_MS; the reap frees the slot */
    }
}

/* ---- the pool ------------------------------------------------------------------ */

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
    c->batch = (uint32_t)call->opts.batch; /* ORCH_BATCH_AUTO is 0: any number */
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
        orch_pool__close_channel(w);
        if (w->timer)
            event_free(w->timer);
        orch_wire_buf_free(&w->in);
        orch_wire_buf_free(&w->out);
        for (int k = 0; k < ORCH_POOL_DEPTH; k++)
            free(w->hold[k].grain);
    }
    if (p->ev_chld) {
        /* libevent leaves a signal event that was deleted from its own callback (the
         * last reap of a burst of SIGCHLDs: orch_pool__watch_children) with its count of
         * calls left and a pointer to that callback's dead stack frame, where its next
         * event_del (event_free's) writes a zero. An event that is not added may be
         * assigned again, which clears both. */
        if (!p->chld_watched)
            (void)event_assign(p->ev_chld, p->base, SIGCHLD, EV_SIGNAL | EV_PERSIST,
                               on_sigchld, p);
        event_free(p->ev_chld);
    }
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
    p->batch_max = cfg->remote_batch_max;
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
    /* SIGCHLD is watched from the first process on (orch_pool__watch_children). */
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
    int rc = orch_pool__spawn(w);
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
    orch_pool__close_channel(w);
    orch_pool__set_state(w, W_STOPPING);
    struct timeval tv = ms_tv(STOP_WAIT_MS);
    if (evtimer_add(w->timer, &tv) < 0)
        orch_pool__kill_worker(w); /* no deadline can be kept for its fini: end it now */
    orch_pool__arm_poll(p);
    return 0;
}

int orch_pool_dispatch(orch_pool *p, orch_worker *w, const struct orch_wire_batch *b)
{
    assert(w->pool == p);
    if (w->state != W_IDLE && !(w->state == W_BUSY && w->nhold < ORCH_POOL_DEPTH))
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
    struct held_batch *h = &w->hold[w->nhold];
    if (orch__grow_n(&h->grain, &h->cap, b->nrec, sizeof *h->grain) < 0)
        return -ENOMEM;
    size_t mark = w->out.len;
    int rc = p->launcher ? orch_pool__put_batch_values(p, &w->out, b)
                         : orch_wire_put_batch(&w->out, b);
    if (rc < 0)
        return rc;
    /* Armed before anything is sent, so that a batch the pool cannot time out is refused
     * whole rather than run without its timeout. A batch queued behind another is timed
     * from its start, when the report of that one arrives (pool_frames.c). */
    if (p->timeout_ms > 0 && w->nhold == 0) {
        struct timeval tv = ms_tv(p->timeout_ms);
        if (evtimer_add(w->timer, &tv) < 0) {
            w->out.len = mark;
            return -ENOMEM;
        }
    }
    for (uint32_t i = 0; i < b->nrec; i++)
        h->grain[i] = (struct held_grain){b->rec[i].grain, b->rec[i].generation};
    h->nrec = b->nrec;
    h->id = b->id;
    h->seq = ++w->sent;
    if (w->nhold++ == 0)
        orch_pool__set_state(w, W_BUSY);
    orch_pool__flush(w);
    return 0;
}

int orch_pool_take_back(orch_pool *p, orch_worker *w, uint64_t *batch)
{
    assert(w->pool == p);
    *batch = 0;
    if (p->launcher)
        return -ENOTSUP;
    if (w->state != W_BUSY || w->nhold < 2 || w->dying || !w->claim)
        return 0;
    /* Unless the worker started it first (claim.h). */
    if (!orch_claim_take(w->claim, w->hold[0].seq, w->hold[1].seq))
        return 0;
    *batch = w->hold[1].id;
    w->nhold = 1;
    return 1;
}

bool orch_pool_began(const orch_worker *w, int64_t *mono_ms)
{
    return w->state == W_BUSY && w->nhold > 0 &&
           orch_claim_began(w->claim, w->hold[0].seq, mono_ms);
}

int orch_pool_send_inputs(orch_worker *w, const struct orch_wire_inputs *in)
{
    if (w->dying || w->fd < 0)
        return -EPIPE;
    int rc = orch_wire_put_inputs(&w->out, in);
    if (rc < 0)
        return rc;
    orch_pool__flush(w);
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
                    orch_pool__srun_reaped(w);
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
 * first asked with SIGTERM, so that each ends its step and allocation (orch_pool__kill_worker).
 */
static void kill_all(orch_pool *p)
{
    if (p->launcher) {
        for (int i = 0; i < p->nlive; i++) {
            orch_pool__close_channel(p->live[i]);
            if (!p->live[i]->reaped)
                orch_pool__kill_worker(p->live[i]);
        }
        for (int i = 0; i < p->ncorpses; i++)
            kill(p->corpses[i], SIGTERM);
        if (wait_all(p, CLOSE_WAIT_MS))
            return;
    }
    for (int i = 0; i < p->nlive; i++) {
        orch_worker *w = p->live[i];
        if (!w->reaped)
            orch_pool__kill_pid(w->pid);
    }
    for (int i = 0; i < p->ncorpses; i++)
        orch_pool__kill_pid(p->corpses[i]);
    for (int i = 0; i < p->nlive; i++) {
        orch_worker *w = p->live[i];
        if (!w->reaped) {
            orch_proc_reap(w->pid, true, &w->status);
            w->reaped = true;
            orch_pool__srun_reaped(w);
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
            orch_pool__kill_worker(w);
        orch_pool__close_channel(w);
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

int orch_worker_held(const orch_worker *w)
{
    return w->nhold;
}

int orch_pool_alive(const orch_pool *p)
{
    return p->nworkers - p->nstate[W_DEAD];
}

int orch_pool_starting(const orch_pool *p)
{
    return p->nstate[W_STARTING];
}

int orch_pool_pending(const orch_pool *p, int64_t *since)
{
    int n = 0;
    *since = 0;
    for (int i = 0; i < p->nworkers; i++) {
        const orch_worker *w = &p->w[i];
        if (w->state != W_STARTING || !w->token)
            continue;
        if (!n++ || w->started_at < *since)
            *since = w->started_at;
    }
    return n;
}

int orch_pool_failed(const orch_pool *p)
{
    return p->failed;
}

const char *orch_pool_failure(const orch_pool *p)
{
    return p->failure ? p->failure : "";
}
