/* pool.h — worker pools: the persistent worker processes of one call, as the driver sees
 * them.
 *
 * A worker is `orch` itself run in worker mode (`orch __worker FD`), started with a
 * vfork-like clone and exec (base/proc.h: nothing of the driver's memory is copied) and
 * connected to the driver by one socketpair. Right after the exec the driver sends the
 * worker its configuration (the call's function, arguments, op, ports and the payload
 * directory); the worker opens the LMDB payload store itself, loads the UDF, runs its init
 * once and says HELLO (or INITFAIL and exits). Then it takes batches: for each one it reads
 * the input payloads from LMDB, calls the UDF's run, writes every output payload in one
 * LMDB write transaction, and sends one REPORT carrying only payload ids. Payload bytes
 * never cross the socket (DESIGN §6).
 *
 * A pool given a launcher (orch_pool_config.launcher: `--launcher slurm`) starts its workers
 * through it instead (launch.h): the slot's process is srun, the worker runs on a node of
 * the cluster, connects back over TCP and, once it has proved itself, is attached to the
 * slot that started it. It cannot map the job's LMDB, so the pool reads each batch's input
 * values from the store and sends them, and writes the output values of each report to
 * the store before the driver sees the report (as ids, like a local worker's): the
 * driver's callbacks are the same for both. Everything below holds for remote workers,
 * with srun's pid as the slot's pid; a remote worker that has not connected yet is
 * STARTING (its init timeout runs from the connection: time pending in Slurm's queue is
 * not init), and is ended with SIGTERM to its srun, which ends the step and its allocation.
 *
 * The pool never blocks the driver: sockets are non-blocking and driven by the driver's
 * libevent base; everything the pool learns is handed to the driver through callbacks,
 * called from the event loop.
 *
 * A worker holds up to ORCH_POOL_DEPTH (2) batches: the one it runs, and one sent while it
 * runs, which waits in its socket and starts as soon as the first one's report is sent
 * (unless the driver takes it back first: orch_pool_take_back). So
 * the driver's commit of one report (and the payload sync that machine durability waits
 * for) overlaps the work of the next batch: a worker need not wait on the driver. Reports
 * come in the order the batches were sent; each batch's timeout runs from the moment it
 * starts (for a queued batch: when the report of the one ahead of it arrives), never
 * while it waits.
 *
 * Workers start on demand. A pool is a row of `nworkers` slots, each with a fixed index,
 * and starts with no process: the driver calls orch_pool_start() when it has work that
 * its idle and starting workers cannot take, and orch_pool_stop() for an idle worker it
 * has no more use for. A process started later gets its slot's index, and with it its
 * index's CUDA_VISIBLE_DEVICES, exactly as if it had been started first: the pool always
 * picks the free slot of lowest index.
 *
 * Lifecycle of a slot:
 *
 *            orch_pool_start                HELLO            dispatch
 *     EMPTY ─────────────────► STARTING ──────────► IDLE ◄──────────► BUSY ◄──┐ dispatch (a 2nd
 *       ▲  ▲                                          │   REPORT of      │     │ batch), REPORT
 *       │  │                        orch_pool_stop    │   its last batch └─────┘ (of the 1st of 2)
 *       │  │                                          ▼
 *       │  └─────── reaped ──────────────────────  STOPPING (fini runs; killed after 5 s)
 *       └───── `lost` (EOF, exit, kill, timeout, init failure) ──── from any state but
 *                                                                   EMPTY and STOPPING
 *
 * After a loss the slot is empty: the pool never starts a process by itself; the driver
 * starts the replacement (in the lowest free slot: the lost one, unless a lower one is
 * free) when it has work for it.
 *
 * A worker dies when it crashes (the UDF aborted, a signal), when the batch it runs passes
 * its timeout (the pool kills it with SIGKILL), or when init fails. Each death is reported
 * once through `lost`, with every batch it held: the one it ran, and the one queued behind
 * it, which never started (its grains did not fail: nothing of them ran). A worker stopped
 * by the driver is
 * not a death: no callback names it again. Workers also die with the driver: they get
 * PR_SET_PDEATHSIG(SIGKILL) and treat EOF on the socket as "stop": they run the UDF's fini
 * and exit.
 *
 * Guarantees the driver can build on:
 *   - Every batch that orch_pool_dispatch() accepted ends in exactly one call: `report`
 *     for that batch, or `lost` naming it (as the batch that ran, or as the one queued
 *     behind it) — unless the pool is closed or killed first, or orch_pool_take_back()
 *     took it back (then in none). Reports of one worker come
 *     in the order its batches were dispatched.
 *   - A worker (orch_worker *) is a slot: the pointer stays valid until the pool is freed.
 *     The same slot holds each process started in it (a new pid each time). During
 *     `lost`, orch_worker_pid() is still the pid of the process that died.
 *   - `nworkers` bounds the processes of the pool at any moment, those still running
 *     their fini after orch_pool_stop() included (a GPU worker releases its device's
 *     memory only when it exits, so its slot, and its device, are not reused before).
 *   - A worker lost while STARTING (before its HELLO: init failed, the binary could not be
 *     run, it crashed in init, it broke protocol) is reported as ORCH_LOSS_INIT, whatever
 *     the cause, and counts towards max_init_failures (consecutive: a HELLO resets the
 *     count); once they are reached the pool has failed (orch_pool_failed()) and starts no
 *     process again, so a worker that cannot start is not restarted forever. Once IDLE, a
 *     loss is CRASH or TIMEOUT.
 *   - Losses are found only by the event loop, never inside a pool function, so no callback
 *     is ever called from inside orch_pool_start(), orch_pool_stop() or
 *     orch_pool_dispatch().
 *   - Messages: "worker 12345 was killed by signal 6 (Aborted)", "worker 12345 exited with
 *     status 1", "... before it was ready", "batch ran past its timeout of 2s" (or "200ms"),
 *     "protocol error: ...", "worker 12345 was killed: the event loop cannot watch its
 *     socket (out of memory?)", or the UDF's own init message.
 *   - The cost of an event does not grow with the slots that hold no process: a pool
 *     with no process does not even watch SIGCHLD (pool_int.h, "Cost").
 *
 * Rules for the driver:
 *   - Callbacks may call orch_pool_dispatch(), orch_pool_start() and orch_pool_stop() (on
 *     any worker of any pool) and read the pool; they must not close or kill their own
 *     pool, nor run the event loop recursively.
 *   - The pool reaps only its own pids (waitpid(pid, WNOHANG)) from a SIGCHLD event on the
 *     base (libevent: one base per process may handle signals), with a slow poll as a
 *     safety net. Nothing else in the driver may call waitpid(-1) or ignore SIGCHLD.
 *   - Close or kill every pool before freeing its event base.
 *   - Create pools, and start their workers, from the thread that lives as long as the
 *     driver: PR_SET_PDEATHSIG fires when the *thread* that started them exits.
 *   - Workers run in their own process group, so a Ctrl-C at the terminal reaches the
 *     driver only; the driver then closes (or kills) its pools: an interruption never shows
 *     up as a crash of every worker. Their stdin is /dev/null and their stdout is their
 *     stderr (which they share with the driver).
 */
#ifndef ORCH_POOL_H
#define ORCH_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orch_plan.h"

struct event_base;
struct orch_launcher;
struct orch_payload;

/* ---- what travels: batches out, reports back --------------------------------------- */

/* One input value of a record: a payload id, or absent (an optional Dropped input). In a
 * batch for a remote worker (values mode) a present value also carries its bytes. */
struct orch_wire_value {
    uint64_t payload; /* 0 when absent */
    uint8_t present;
    const void *data; /* values mode: the value's bytes (len of them); else unused */
    size_t len;
};

/* One record of a batch: one grain. `in` holds the record's input lists back to back:
 * list j has nval[j] values (1 for map/filter/expand; the surviving children for reduce). */
struct orch_wire_record {
    uint64_t grain;
    uint32_t generation;
    uint32_t attempt;
    uint32_t nin;
    const uint32_t *nval;               /* nin counts */
    const struct orch_wire_value *vals; /* sum(nval) values */
    uint8_t fed; /* 1: a reduce whose values come in INPUTS frames, page by page, as the
                    worker asks for them (MORE); nval is all 0 and vals unused */
};

struct orch_wire_batch {
    uint64_t id;
    uint8_t values; /* 1: every present value carries its bytes (remote worker) */
    uint32_t nrec;
    const struct orch_wire_record *rec;
};

/* The answer kinds of one record (udfs/orch_udf_host.h outcomes, as they travel). */
#define ORCH_WIRE_OUTCOMES(X)                                                                 \
    X(ORCH_WIRE_OK, "ok")                                                                     \
    X(ORCH_WIRE_DROP, "drop")                                                                 \
    X(ORCH_WIRE_KEEP_TRUE, "keep")                                                            \
    X(ORCH_WIRE_KEEP_FALSE, "reject")                                                         \
    X(ORCH_WIRE_RECORD_FAILURE, "record")                                                     \
    X(ORCH_WIRE_GROUP_FAILURE, "group")

#define ORCH_WIRE_ENUM(name, text) name,
enum orch_wire_outcome { ORCH_WIRE_OUTCOMES(ORCH_WIRE_ENUM) ORCH_WIRE__COUNT };
#undef ORCH_WIRE_ENUM
const char *orch_wire_outcome_name(enum orch_wire_outcome o);

/* A child of an expansion that exists but failed (orch_udf_fail_child): its outputs are
 * Failed with `message`. */
/* One output value as a remote worker reports it (values mode): set 0 exactly where a
 * local worker's report has id 0 (a failed child). */
struct orch_wire_bytes {
    const void *data;
    size_t len;
    uint8_t set;
};

struct orch_wire_failed_child {
    uint32_t child;      /* ordinal, < nchild */
    const char *message; /* NUL-terminated; "" when none */
};

/* The answer for one record. For ORCH_WIRE_OK: map and reduce have nchild = 1 and nout
 * payload ids; expand and expand aligned have nchild children, each with nout ids, child
 * by child (payload[c * nout + p]); nchild may be 0. The ids of a failed child (listed in
 * `failed`, by increasing ordinal) are 0; every other id is not. Filters answer
 * KEEP_TRUE/KEEP_FALSE with no ids. Failures carry a message. */
struct orch_wire_answer {
    uint64_t grain;
    uint32_t generation;
    enum orch_wire_outcome outcome;
    const char *message; /* NUL-terminated; "" when none */
    uint32_t first;      /* expand: the ordinal of the first child here (the children
                          * before it came in chunks); 0 otherwise */
    uint32_t nchild;
    uint32_t nout;
    const uint64_t *payload; /* nchild * nout ids (or nout for map/reduce); NULL in values
                              * mode */
    const uint64_t *size;    /* the bytes of each payload, as stored (0 where its id is 0):
                              * the driver records them without reading the payloads;
                              * NULL in values mode */
    const struct orch_wire_bytes *values; /* values mode: nchild * nout values; else NULL */
    uint32_t nfailed;        /* failed children (expand only); 0 otherwise; each `child`
                              * counts from `first` */
    const struct orch_wire_failed_child *failed;
    const uint64_t *hash;    /* expand: nchild hashes of the children's output values
                              * (orch_udf_child_hash), or NULL */
};

/* Children of an open expansion, sent while its UDF runs (DESIGN §5, streaming
 * expansions): a.outcome is OK, a.nchild > 0, a.hash set; a.first is where the record's
 * previous chunk ended. */
struct orch_wire_chunk {
    uint64_t batch;
    uint8_t values; /* as a report's */
    struct orch_wire_answer a;
};

/* A fed reduce (orch_wire_record.fed): the worker asks for the next page of grain's
 * inputs (MORE), the driver answers one page (INPUTS): nchild surviving children, each
 * with its nin values (child-major: child 0's nin values, then child 1's, ...); last: no
 * page follows. */
struct orch_wire_more {
    uint64_t batch;
    uint64_t grain;
};
struct orch_wire_inputs {
    uint64_t batch;
    uint64_t grain;
    uint8_t last;
    uint32_t nin;
    uint32_t nchild;
    const struct orch_wire_value *vals; /* nchild * nin */
};

/* How a batch ended, as a whole: the status of its report. The values are those of the
 * wire (wire.h); a decoded report never holds another. */
enum orch_wire_status {
    ORCH_WIRE_STATUS_OK = 0,      /* every record answered (rec[0..nrec-1], in batch order) */
    ORCH_WIRE_STATUS_FAILED = 1,  /* run() failed: an attempt failure of the whole batch */
    ORCH_WIRE_STATUS_STORAGE = 2, /* the payload store failed the batch: its outputs could
                                   * not be stored (full or broken) or its inputs not read
                                   * (no reader slot, or broken): not the batch's fault, the
                                   * job must stop */
    ORCH_WIRE_STATUS__COUNT
};

/* A worker's report for one batch. Unless the status is OK, message says why and nrec
 * is 0. */
struct orch_wire_report {
    uint64_t batch;
    enum orch_wire_status status;
    const char *message;
    uint8_t values; /* 1: answers carry values, not ids (a remote worker's report); the
                     * pool stores them and hands the driver ids: its `report` callback
                     * never sees values mode */
    uint32_t nrec;
    const struct orch_wire_answer *rec;
};

/* ---- the pool ----------------------------------------------------------------------- */

typedef struct orch_pool orch_pool;
typedef struct orch_worker orch_worker;

/* The most batches a worker holds: the one it runs and one queued behind it. */
#define ORCH_POOL_DEPTH 2

/* Why a worker was lost. */
#define ORCH_LOSS_KINDS(X)                                                                    \
    X(ORCH_LOSS_CRASH, "crash")       /* exited or killed by a signal, or broke protocol */   \
    X(ORCH_LOSS_TIMEOUT, "timeout")   /* its batch passed the call's timeout; killed */       \
    X(ORCH_LOSS_INIT, "init")         /* init failed (message from the UDF) */

#define ORCH_LOSS_ENUM(name, text) name,
enum orch_loss_kind { ORCH_LOSS_KINDS(ORCH_LOSS_ENUM) ORCH_LOSS__COUNT };
#undef ORCH_LOSS_ENUM
const char *orch_loss_kind_name(enum orch_loss_kind k);

struct orch_pool_callbacks {
    /* A worker is IDLE and can take a batch (after HELLO). */
    void (*idle)(void *ctx, orch_pool *pool, orch_worker *w);
    /* A worker answered batch `r->batch`, the one it ran. Everything in r is valid only
     * during the call. The worker holds one batch fewer when this is called: IDLE when it
     * held only this one (orch_worker_held() is 0; idle is not called separately), else it
     * runs the batch that was queued behind, whose timeout starts now. */
    void (*report)(void *ctx, orch_pool *pool, orch_worker *w,
                   const struct orch_wire_report *r);
    /* A worker died. batch is the id of the batch it ran, or 0; queued the id of the batch
     * queued behind it, which never started, or 0. message says why ("killed by signal 6
     * (Aborted)", "batch ran past its timeout of 2s", the UDF's init message): it is about
     * `batch`. The slot is empty afterwards: the driver starts a replacement with
     * orch_pool_start() when it has work for one (refused once orch_pool_failed()). */
    void (*lost)(void *ctx, orch_pool *pool, orch_worker *w, uint64_t batch, uint64_t queued,
                 enum orch_loss_kind kind, const char *message);
    /* A worker sent children of an expansion its batch is still making (a streaming
     * expansion, DESIGN §5): c names the batch the worker holds and one of its grains at
     * its generation, with the call's nout (the pool checked). Everything in c is valid
     * only during the call. The worker stays BUSY. NULL: chunks are a protocol error. */
    void (*chunk)(void *ctx, orch_pool *pool, orch_worker *w, const struct orch_wire_chunk *c);
    /* A worker asks for the next page of the inputs of a fed record (a reduce,
     * orch_wire_record.fed) of the batch it runs: m names that batch and one of its
     * grains (the pool checked). The driver answers with orch_pool_send_inputs(). NULL:
     * such a request is a protocol error. */
    void (*more)(void *ctx, orch_pool *pool, orch_worker *w, const struct orch_wire_more *m);
};

struct orch_pool_config {
    const char *exe;          /* the orch binary to exec in worker mode (/proc/self/exe) */
    const char *payload_dir;  /* JOB/payloads */
    const orch_plan *plan;
    int call;                 /* plan call index; the pool reads function, args, op, ports */
    int nworkers;
    int64_t timeout_ms;       /* per batch, 0 = none */
    /* Consecutive init failures after which the pool stops replacing workers and reports
     * every further loss as fatal (orch_pool_failed() returns true). */
    int max_init_failures;
    /* One entry per worker or NULL: the CUDA_VISIBLE_DEVICES value each worker gets
     * (local workers only: Slurm gives a remote worker its devices). */
    const char *const *cuda_visible_devices;
    /* Remote workers (launch.h): NULL for local ones. With a launcher, each worker is
     * started through it asking for `cpus` and `gpus`, connects back, and gets values
     * (wire.h, values mode); the pool reads its inputs from, and writes its outputs to,
     * `store` (the driver's own handle on the job's payload store). */
    struct orch_launcher *launcher;
    struct orch_payload *store;
    double cpus, gpus;
    /* The most bytes of input values one remote batch carries; 0, or not below
     * ORCH_WIRE_MAX_BODY: what one frame holds. Lower for tests: the refusal of a batch too
     * big to send, without making 256 MiB of payloads. */
    size_t remote_batch_max;
};

/* Creates the pool, with no process: orch_pool_start() starts them. Returns 0, or a
 * negative error with the detail set: -EINVAL (a bad configuration, a call used by no
 * statement, a broadcast), -ENOENT / -EACCES (exe cannot be run), -ENOMEM. Callbacks are
 * never called for a pool whose creation failed. max_init_failures < 1 is taken as 1; a
 * NULL entry of cuda_visible_devices leaves that worker's environment as the driver's. */
int orch_pool_new(struct event_base *base, const struct orch_pool_config *cfg,
                  const struct orch_pool_callbacks *cb, void *ctx, orch_pool **out);

/* Starts a worker in the free slot of lowest index, and sends it its CONFIG (`worker` is
 * the slot's index, the op is the statement's; its CUDA_VISIBLE_DEVICES is the index's).
 * The worker is STARTING: `idle` follows from the event loop once it said HELLO, or `lost`
 * (ORCH_LOSS_INIT) if it does not. *out (may be NULL) receives the slot. Returns 0, or a
 * negative error, after which nothing was started: -EBUSY when every slot holds a process
 * (STARTING, IDLE, BUSY or STOPPING); -ECANCELED when the pool has failed (detail: the last
 * init failure) or is closing; a clone, socketpair or -ENOMEM error (detail: "cannot start
 * worker N of call C: ..."). */
int orch_pool_start(orch_pool *p, orch_worker **out);

/* Stops idle worker w cleanly: its socket is closed, so it runs its UDF's fini and exits;
 * no callback names w for that process again. Its slot is free once the process is reaped
 * (it is killed if its fini takes more than 5 s). Returns 0, -EBUSY (w is not IDLE: it
 * holds a batch, which a stop would lose, or it is starting or lost), or
 * -EPIPE (w was found dead: its `lost` follows from the event loop). */
int orch_pool_stop(orch_pool *p, orch_worker *w);

/* Sends batch b to worker w, which holds fewer than ORCH_POOL_DEPTH batches. An IDLE worker
 * becomes BUSY and runs b: its timeout (if any) starts now. A BUSY worker holding one batch
 * queues b behind it: b starts, and its timeout with it, when the report of that one
 * arrives. The pool copies b (it is encoded at once). Returns 0, or a negative error, after
 * which nothing was sent and no callback will name b:
 *   -EBUSY   w cannot take it (STARTING, holding ORCH_POOL_DEPTH batches, or lost);
 *   -EPIPE   w was found dead (its socket ended) but its loss is not reported yet: keep the
 *            batch; `lost` for w follows from the event loop;
 *   -EINVAL  b->id is 0 (0 means "no batch" in `lost`), b has no record, a record's nin is
 *            not the statement's, or a non-reduce input list has other than one value;
 *   -ENOMEM  no memory, or the event loop cannot arm the batch's timeout;
 *   -E2BIG   the frame would pass 256 MiB. */
int orch_pool_dispatch(orch_pool *p, orch_worker *w, const struct orch_wire_batch *b);

/* The books of remote workers' starts (a launcher's pool only): what a killed srun leaves
 * in Slurm must be found by the next driver (launch.h), so the driver records each start
 * before its srun runs. fn is called
 *   BEGIN  from inside orch_pool_start(), before srun is started, with the start's Slurm
 *          job name (orch_launcher_job_name): a non-zero result (a negative error) fails
 *          the start, and nothing is started;
 *   STEP   when its worker connected, with its Slurm step ("JOBID.STEPID", or "");
 *   END    when its srun was reaped from the event loop (a stop, or a loss whose process
 *          was reaped by then; the launcher cancelled what a signal that ended it left).
 *          Not for an srun reaped by orch_pool_close() or orch_pool_kill(), nor for one
 *          whose loss was declared before its reap: the driver forgets those starts once
 *          its pools are closed.
 * call is the pool's call. fn must not call the pool. NULL: none are told (the
 * default). */
enum orch_pool_start_event { ORCH_POOL_START_BEGIN, ORCH_POOL_START_STEP, ORCH_POOL_START_END };
typedef int (*orch_pool_start_fn)(void *ctx, orch_pool *p, enum orch_pool_start_event ev,
                                  const char *call, const char *name, const char *step);
void orch_pool_watch_starts(orch_pool *p, orch_pool_start_fn fn, void *ctx);

/* Takes back the batch queued behind the one worker w runs (hold[1]), when the worker has
 * not started it: it is the pool's no more (no `report` nor `lost` will name it; the
 * worker skips it), and the driver may give its grains to another worker. Returns 1 with
 * *batch its id when taken back; 0 when there is none to take (w holds fewer than two
 * batches, or it started the queued one: its report will come); -ENOTSUP for a worker
 * that cannot be asked (a remote one: its batches cross the network, and its claim with
 * them, so a batch it holds is never taken back). Never calls a callback. */
int orch_pool_take_back(orch_pool *p, orch_worker *w, uint64_t *batch);

/* When worker w began the batch it runs now (*mono_ms, CLOCK_MONOTONIC), as its process
 * noted it: for a batch that was queued behind the one just reported, earlier than the
 * driver read that report. False when the pool cannot tell (a remote worker, or one that
 * has not begun it yet). */
bool orch_pool_began(const orch_worker *w, int64_t *mono_ms);

/* Sends w a page of inputs, the answer to its MORE (callbacks.more). 0; -ENOMEM or
 * -E2BIG (encoding); -EPIPE when w is going away (its loss is reported as usual). */
int orch_pool_send_inputs(orch_worker *w, const struct orch_wire_inputs *in);

/* Backpressure on a streaming expansion: with pause, the pool stops reading w's socket
 * (frames already read wait too), so the worker's next chunk, and its UDF, wait; without,
 * it reads again, from the event loop (no callback is called from here). A paused worker's
 * death is still found (SIGCHLD) and its batch's timeout still runs. */
void orch_pool_pause(orch_worker *w, bool pause);
bool orch_worker_paused(const orch_worker *w);

/* Kills every worker (SIGKILL), reaps them, frees the pool. No callback is called from
 * here on. Use for an abort. */
void orch_pool_kill(orch_pool *p);

/* Closes every worker's socket (each runs its UDF's fini and exits), waits for them up to
 * a bound (5 s in all; this blocks the caller), kills what is left, frees the pool. For a
 * clean end of the job. A BUSY worker first finishes the batches it holds (their reports
 * are dropped). */
void orch_pool_close(orch_pool *p);

/* The pid of w's current process (during `lost`: of the one that died), on its host: a
 * remote worker's as it said when it connected (0 before). */
int orch_worker_pid(const orch_worker *w);
/* Where w runs: its host name (this machine's for a local worker; "" for a remote one
 * that has not connected yet) and its Slurm step "JOBID.STEPID" ("" when none). */
const char *orch_worker_host(const orch_worker *w);
const char *orch_worker_slurm_job(const orch_worker *w);
/* w's index in the pool, 0 .. nworkers-1; every process of the slot has it. */
int orch_worker_index(const orch_worker *w);
/* The batches w holds: 0 (not BUSY), 1 (it runs one), up to ORCH_POOL_DEPTH (one runs, the
 * others wait behind it). */
int orch_worker_held(const orch_worker *w);
/* The number of slots that hold a process (STARTING, IDLE, BUSY or STOPPING), and of those
 * STARTING. */
int orch_pool_alive(const orch_pool *p);
int orch_pool_starting(const orch_pool *p);
/* The remote workers whose srun was started and whose worker has not connected yet (their
 * Slurm jobs wait in the queue, or their steps start): how many, and in *since when the
 * earliest of them was started (wall clock, ms; 0 when none). */
int orch_pool_pending(const orch_pool *p, int64_t *since);
/* True when init failed max_init_failures times in a row (see the guarantees above): the
 * call cannot run. The last init message is orch_pool_failure(). It turns true before the
 * `lost` (ORCH_LOSS_INIT) that reports it, and stays true (orch_pool_start() refuses; a
 * worker that was already starting may still say HELLO and be used). */
int orch_pool_failed(const orch_pool *p);
const char *orch_pool_failure(const orch_pool *p);

/* A local worker finds its claim word (claim.h) on this descriptor: before it starts a
 * batch it claims it there, and skips, unanswered, one the pool took back. A worker
 * without it starts every batch. */
#define ORCH_WORKER_CLAIM_FD 4

/* The entry of `orch __worker FD`: runs one worker until its socket closes. Returns the
 * process exit status: 0 after the driver closed the socket (fini ran), 1 after an init
 * failure (INITFAIL sent) or a protocol error, 2 when FD is not an open descriptor > 2.
 * The frames are those of engine/worker/wire.h. */
int orch_worker_main(int fd);
/* The entry of `orch __worker --connect HOST:PORT --token T`: a remote worker (launch.h).
 * Connects and proves itself to the driver, then runs as orch_worker_main() in values mode,
 * and also exits as soon as the connection ends while a batch runs (its driver is gone:
 * nothing it computes can be committed). Exit status as orch_worker_main(), and 1 when it
 * cannot connect. */
int orch_worker_remote_main(const char *addr, uint64_t token);

#endif
