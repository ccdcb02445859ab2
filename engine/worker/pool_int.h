/* pool_int.h — worker pools (pool.h) from the inside: the slot and the pool, and what the
 * pool's files share. Only engine/worker/pool*.c include it.
 *
 * The files of the pool:
 *   pool.c         the pool's books (slots by state, the live list, the SIGCHLD watch), the
 *                  channel to a worker, every death, and the API of pool.h
 *   pool_frames.c  the frames a worker sends: HELLO, INITFAIL, REPORT; reading its socket
 *   pool_spawn.c   starting a process in a slot: a local worker, with its socket
 *   pool_remote.c  remote workers (launch.h): srun started through the launcher, the attach
 *                  of the worker's connection, the Slurm job of an srun a signal ended
 *   pool_values.c  values mode: a remote batch's input values read from the store, a remote
 *                  report's output values written to it
 *
 * A slot (struct orch_worker) lives as long as the pool; the processes in it come and go.
 * A slot holds no process until orch_pool_start() picks it (the free slot of lowest
 * index, so that a worker started late still gets its index's devices). Each process of a
 * slot ends in exactly one of two ways: the driver stopped it (orch_pool_stop: STOPPING,
 * then reaped silently), or one call of orch_pool__declare_lost(), which is reached from one of
 * these events, whichever comes first:
 *
 *   INITFAIL frame               -> lost INIT (the process exits by itself)
 *   malformed or unexpected frame-> SIGKILL, lost CRASH ("protocol error: ...")
 *   batch timer expires          -> read what the socket holds (the running batch's report
 *                                   may be there: then the timer runs for the next one),
 *                                   else SIGKILL, lost TIMEOUT
 *   EOF or error on the socket   -> SIGKILL (harmless if it is exiting already), then wait
 *                                   for the reap: lost CRASH with the exit status
 *   the event loop refuses to    -> SIGKILL, then wait for the reap: lost CRASH saying so
 *   watch its socket (orch_pool__break_worker)
 *   SIGCHLD / reap poll: reaped  -> read what the socket still holds, then lost CRASH
 *
 * (A loss while the process is STARTING is reported as INIT whatever the cause, and counts
 * towards max_init_failures, so that a worker that cannot even start is not restarted
 * forever.) orch_pool__declare_lost() closes the slot's socket and, when the process has not
 * been reaped yet, moves its pid to the pool's `corpses`: corpses are reaped silently (SIGCHLD,
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
 * reported lost (orch_pool__break_worker), or not started (orch_pool_start fails); a batch
 * whose timeout cannot be armed is refused by orch_pool_dispatch() (-ENOMEM, nothing sent); a
 * stop whose deadline cannot be armed is a kill; SIGCHLD and the reap poll are safety nets
 * for each other, and the poll is simply armed again by the next orch_pool__arm_poll().
 *
 * Reaping. Several pools may share one event base, and the driver may have other
 * children: each pool waits only for its own pids, with waitpid(pid, WNOHANG); never
 * waitpid(-1).
 */
#ifndef ORCH_POOL_INT_H
#define ORCH_POOL_INT_H

#include "launch.h"
#include "orch_payload.h"
#include "pool.h"
#include "support.h"
#include "wire.h"

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/time.h>
#include <sys/types.h>

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

/* A record of a batch a worker holds: the grain its answer must name. */
struct held_grain {
    uint64_t grain;
    uint32_t generation;
};

/* A batch a worker holds: its id, its seq among the batches sent to the process (claim.h),
 * and which grain each record is. */
struct held_batch {
    uint64_t id;
    uint32_t seq;
    uint32_t nrec;
    struct held_grain *grain; /* nrec of cap */
    size_t cap;
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
    const char *broken; /* why orch_pool__break_worker() killed it (static text), or
                         * NULL */
    int fd;             /* -1 when closed; a remote worker's is -1 until it connects */
    /* Where the process runs: for a local worker its pid and the driver's host; for a
     * remote one what its AUTH said (launch.h), once it has connected. */
    pid_t wpid;
    char host[256];
    char slurm_job[64];
    uint64_t token;       /* remote: the token its start expects, until it connects; else 0 */
    uint64_t start_token; /* remote: the token its srun was started with (its job's name) */
    int64_t started_at;   /* remote: when its srun was started (wall clock, ms) */
    struct event *ev_read, *ev_write;
    struct event *timer; /* STARTING: init timeout; BUSY: the running batch's timeout; STOPPING:
                          * the deadline of its fini */
    struct orch_wire_buf in;
    size_t in_off;
    struct orch_wire_buf out;
    size_t out_off;
    /* The batches held while BUSY, in the order they were sent (nhold of them, at most
     * ORCH_POOL_DEPTH): hold[0] runs, and its timeout runs; hold[1] waits behind it, in the
     * worker's socket, and starts when hold[0]'s report arrives. */
    struct held_batch hold[ORCH_POOL_DEPTH];
    int nhold;
    bool paused; /* orch_pool_pause: its socket is not read (pool_frames.c) */
    /* Taking a queued batch back (orch_pool_take_back): the word a local worker shares with
     * the pool (claim.h), NULL when none (a remote worker, or none could be made). */
    uint64_t *claim;
    uint32_t sent; /* batches sent to the current process: the seq of the last */
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
    size_t batch_max; /* orch_pool_config.remote_batch_max, checked: batch_values_max */
    orch_pool_start_fn starts; /* orch_pool_watch_starts */
    void *starts_ctx;
    char host[256]; /* this machine's name: where local workers run */
};

/* ms as a timeval, for libevent's timers. */
static inline struct timeval ms_tv(int64_t ms)
{
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000),
                         .tv_usec = (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

/* ---- pool.c: books, channel, deaths ---- */

/* SIGKILLs pid (when > 0). */
void orch_pool__kill_pid(pid_t pid);
/* Ends slot w's process: SIGKILL for a local worker, SIGTERM to a remote one's srun. */
void orch_pool__kill_worker(orch_worker *w);
void orch_pool__set_state(orch_worker *w, enum wstate s);
void orch_pool__set_dying(orch_worker *w, bool dying);
/* Watches SIGCHLD while the pool has a process or a corpse. 0 or -ENOMEM. */
int orch_pool__watch_children(orch_pool *p);
/* w holds a process from now on / no longer. */
void orch_pool__live_add(orch_worker *w);
void orch_pool__live_del(orch_worker *w);
/* Remembers pid, whose loss was declared, to reap it silently. */
void orch_pool__add_corpse(orch_pool *p, pid_t pid);
/* Arms the reap poll while anything waits for a reap. */
void orch_pool__arm_poll(orch_pool *p);
/* Closes w's socket and its events, empties its buffers, forgets an awaited token. */
void orch_pool__close_channel(orch_worker *w);
/* Sends what w->out holds (never calls a callback). */
void orch_pool__flush(orch_worker *w);
void orch_pool__on_write(evutil_socket_t fd, short what, void *arg);
/* Reports the end of w's process through `lost` (the one place that does). */
void orch_pool__declare_lost(orch_worker *w, enum orch_loss_kind kind, const char *msg);
/* Kills w's process and reports it lost: "protocol error: ...". */
__attribute__((format(printf, 2, 3))) void orch_pool__protocol_error(orch_worker *w,
                                                                     const char *fmt, ...);
/* EOF or an error on w's socket. */
void orch_pool__socket_gone(orch_worker *w);
/* Kills w's process and leaves its report to the reap, saying why (static text). */
void orch_pool__break_worker(orch_worker *w, const char *why);

/* ---- pool_frames.c ---- */

/* Reads w's socket and handles its frames (drain: to EAGAIN or EOF). */
void orch_pool__read_some(orch_worker *w, bool drain);
void orch_pool__on_read(evutil_socket_t fd, short what, void *arg);

/* ---- pool_spawn.c ---- */

/* Dead slot w holds process pid from now on, STARTING. */
void orch_pool__occupy(orch_worker *w, pid_t pid);
/* Unmaps w's claim word, if any. */
void orch_pool__claim_drop(orch_worker *w);
/* Starts a process in dead slot w (locally, or through the launcher) and queues its CONFIG.
 * 0 or a negative error, with nothing left running. */
int orch_pool__spawn(orch_worker *w);

/* ---- pool_remote.c ---- */

/* Starts srun for dead slot w; its CONFIG waits until the worker has connected. */
int orch_pool__spawn_remote(orch_worker *w);
/* w's srun was reaped: cancels in Slurm what a signal that ended it left behind, and tells
 * the watcher of starts (orch_pool_watch_starts) from the event loop. */
void orch_pool__srun_reaped(orch_worker *w);

/* ---- pool_values.c ---- */

/* Stores the values of remote report r and turns it into a report of ids. 0 or -ENOMEM. */
int orch_pool__store_values(orch_worker *w, struct orch__arena *a, struct orch_wire_report *r);
/* Encodes batch b with its input values read from the store into out. */
int orch_pool__put_batch_values(orch_pool *p, struct orch_wire_buf *out,
                                const struct orch_wire_batch *b);

#endif
