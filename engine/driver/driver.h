/* driver.h — running a job: the driver's event loop (DESIGN §5).
 *
 * One process, one libevent loop. Each call of the plan (but broadcasts, which compute
 * nothing) has a FIFO ready queue, ordered by ready_seq, and a pool of persistent workers
 * (pool.h). One turn of the loop:
 *
 *   1. wait for events: reports, lost workers, idle workers, timers, signals. Every report
 *      is applied as it arrives, inside the turn's open store transaction
 *      (propagate.h does the rules), which also fills the ready queues;
 *   2. admit root entities from the sources while the admission budgets allow (unsealed
 *      grains, live intermediate bytes);
 *   3. reserve a batch for every idle worker whose call has ready grains and whose cpus
 *      fit in the free budget, marking its grains IN_FLIGHT with an attempt row each;
 *   4. commit the transaction: the turn's reports, everything they implied and the new
 *      dispatches are durable together (group commit);
 *   5. only then send the batches.
 *
 * So a grain is never running without the store saying IN_FLIGHT, and a report is never
 * acknowledged before its facts are committed. The loop never blocks on a worker: pools
 * are non-blocking and report through callbacks.
 *
 * Memory: each ready queue holds a window of the READY frontier, the rest in a spill file
 * (queue.h); sealed history lives only in the store.
 *
 * The loop's internals — a turn in detail, its invariants, who owns what, and the files
 * that make it (loop.c, turn.c, dispatch.c, admit.c, recover.c, resources.c, workers.c,
 * progress.c) — are described in driver_int.h.
 */
#ifndef ORCH_DRIVER_H
#define ORCH_DRIVER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "launch.h"
#include "orch_job.h"
#include "orch_states.h"

enum orch_progress_mode {
    ORCH_PROGRESS_AUTO, /* a live display on a terminal, plain lines otherwise */
    ORCH_PROGRESS_LIVE,
    ORCH_PROGRESS_PLAIN,
    ORCH_PROGRESS_NONE,
};

/* What a committed fact survives (docs/operations.md, "Guarantees"). */
enum orch_durability {
    ORCH_DURABILITY_MACHINE, /* a crash of the machine: payloads are synced once per turn
                                before the commit that names them */
    ORCH_DURABILITY_PROCESS, /* a crash of any process: nothing is synced; a machine crash
                                may lose recent payloads whose items were committed */
};

/* The order in which a call's ready queue is served. */
enum orch_order {
    ORCH_ORDER_FIFO,   /* ready_seq order (DESIGN §5) */
    ORCH_ORDER_RANDOM, /* an ablation, for benchmarks only: a random entry each time
                          (queue.h, "Random order") */
};

struct orch_run_opts {
    double cpus;          /* the CPU budget; 0: detected (online processors) */
    double gpus;          /* the GPU budget; 0: detected (/dev/nvidiaN devices) */
    int64_t max_unsealed; /* admission budget of unsealed grains; 0: default */
    int64_t max_live_bytes; /* admission budget of live intermediate payload bytes; 0:
                               derived from the machine (admit.c) */
    enum orch_progress_mode progress;
    int progress_interval_ms; /* plain lines: every this many ms; 0: default (5 s) */
    FILE *out;                /* progress and summary (stderr when NULL) */
    enum orch_durability durability;
    /* Ablations, for benchmarks only (docs/commands.md, "Ablations"). Neither changes what
     * the job computes, nor its plan hash: like durability, they are options of one run. */
    enum orch_order order;
    uint64_t seed; /* ORCH_ORDER_RANDOM: seeds each call's generator (with its index) */
    /* A call is served only once every call upstream of it is done for every entity (the
     * done rule of workers.c: its prerequisites done), so the job runs one stage after the
     * other. Admission is then unbounded: max_unsealed is ignored and every root is
     * admitted at once, since the first call waits for the sources to be exhausted. */
    bool staged;
    /* `orch update --watch`: once the job is done, wait this many ms, read the sources
     * again (a new update), and go on; SIGINT or SIGTERM while waiting stops the run
     * cleanly (it returns 0, the job finished). 0: the run stops when the job is done. */
    int64_t watch_ms;
    /* Where workers run (DESIGN §11, launch.h): LOCAL (the default) or SLURM, with
     * srun's own options (--launcher-args, or NULL) and the address workers connect to
     * (--listen HOST:PORT, or NULL: this host's name and a free port). */
    enum orch_launcher_kind launcher;
    const char *launcher_args;
    const char *listen;
    const char *srun; /* the srun command of the Slurm launcher; NULL: "srun" */
    /* The orch binary workers exec; NULL: /proc/self/exe (loop.c). For a driver that runs
     * inside another program, as under valgrind. */
    const char *worker_exe;
    /* For tests (docs/configuration.md); 0: the default. How long a worker idles before
     * it is stopped (workers.c, IDLE_MIN_MS); the grains a ready queue keeps in memory
     * (resources.c, queue_window); the most bytes of values one remote batch carries
     * (pool.h, remote_batch_max). */
    int64_t idle_stop_ms;
    size_t queue_window;
    size_t remote_batch_max;
    /* The work one dispatch is sized to, in ms of its worker's time (sizing.h); 0: the
     * default (ORCH_SIZING_TARGET_MS). --batch-target, ORCH_BATCH_TARGET_MS. */
    int64_t batch_target_ms;
    /* An ablation (--batch-fixed): every dispatch takes its call's `batch` grains (one
     * for batch=auto), as many as are queued, whatever was measured: the sizes a user
     * picks by hand, for the benchmark that compares them with the runtime's. */
    bool batch_fixed;
};

struct orch_run_stats {
    int64_t committed;       /* reports accepted */
    int64_t stale;           /* reports (and chunks) rejected as stale or duplicate */
    int64_t chunks;          /* chunks of streaming expansions applied */
    int64_t suppressed;      /* reports of in-flight siblings discarded by a barrier */
    int64_t attempts_failed; /* attempt failures (error, crash, timeout) */
    int64_t batches;
    int64_t reclaimed;       /* payloads deleted by the sweeps at start and end (engine/job/):
                                orphans, and freed ones that waited for a sync */
    int64_t workers_started; /* worker processes started (on demand) */
    int64_t workers_peak;    /* the most worker processes in use at once */
    int64_t live_peak;       /* the most live intermediate payload bytes at a commit */
    int64_t live_budget;     /* the budget they ran under */
    int64_t held;            /* turns in which a full budget held back an upstream call
                                that had queued grains, an idle worker and room in the
                                CPU and GPU budgets */
    int64_t held_grains;     /* those in which the unsealed grains' budget did */
    int64_t held_bytes;      /* those in which the live bytes' budget did */
    int64_t carried;         /* grains that took their twin's result (an edited plan:
                                carry.c) instead of running */
    /* The job's items per port and state as of the run's last commit (counted as they
     * were published, from the store's counts at the start), for the summary; NULL when
     * the run did not get that far. Free with orch_run_stats_free. */
    int64_t (*items)[ORCH_ITEM__COUNT];
    double seconds;
};

/* With --launcher slurm, while workers whose srun was started have not connected (their
 * Slurm jobs wait in the queue), the driver keeps this file in the job directory for
 * `orch status`: one line, "N SINCE_MS" (how many, and when the earliest was started: wall
 * clock, ms). It is rewritten at the progress tick when that changes, and removed when
 * none waits and when the run ends; a driver that died may leave it (status reads it only
 * while a driver runs). */
#define ORCH_DRIVER_PENDING_FILE "workers-pending"

/* Runs the job until every grain is sealed (0), or until it cannot go on: a call whose
 * workers cannot start (ORCH_EPLAN-free message in the detail), a store that cannot be
 * written, or SIGINT/SIGTERM (-EINTR). Whatever happens, what was committed stays and
 * the job can be resumed. Records that failed do not make the run fail. */
int orch_driver_run(struct orch_job *job, const struct orch_run_opts *opts,
                    struct orch_run_stats *stats);

void orch_run_stats_free(struct orch_run_stats *stats);

/* Writes the end-of-run summary: per port, items present / dropped / failed / suppressed
 * (from stats->items when there, else read from the store). */
int orch_driver_summary(struct orch_job *job, const struct orch_run_stats *stats, FILE *out);

#endif
