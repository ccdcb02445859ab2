/* fake_pool.h — a worker pool without processes, for the driver's unit tests.
 *
 * tests/fake_pool.c implements every function of engine/worker/pool.h that the driver
 * calls. A test program links it as an object of its own, before the engine's static
 * libraries: the linker then resolves orch_pool_* and orch_worker_* from it and never
 * pulls the real pool.c.o out of the worker library (pulling it would be a link error, a
 * symbol defined twice), so the driver runs unchanged against the fake.
 *
 * What the fake does, all from the driver's own event loop, never from inside a pool
 * function (pool.h's rule):
 *   - orch_pool_start() makes the slot STARTING; the slot's HELLO (the `idle` callback)
 *     comes from the pool's next pump;
 *   - orch_pool_dispatch() records the batch (fake_batch) and makes the slot BUSY; a BUSY
 *     slot takes a second batch, queued behind the one it runs (pool.h), and no more;
 *   - each pump (a zero timer: it fires at the driver's next turn of the loop, never in
 *     the one that armed it) first says every STARTING slot's HELLO, then answers one
 *     batch: the oldest that a slot runs (a queued batch runs once the one ahead of it is
 *     answered). So the driver gets a turn between two answers and
 *     fills its idle workers in it: what it keeps in flight is what its rules allow.
 *   - how a batch is answered is the test's choice (fake_decide): every record OK, the
 *     whole batch FAILED, or the worker lost (crash or timeout). An OK record of a map
 *     gets a new payload per output port, "<input>.<call>" (fake_value()); of an expand,
 *     one child per word of its input (split at ' '), each "<word>.<call>"; of a filter,
 *     KEEP_TRUE, or KEEP_FALSE for an empty input.
 * The fake reads no clock and never sleeps: the same run gives the same events in the same
 * order (a test keeps the driver's own clocks out of it: its idle stop far away).
 *
 * It refuses the batches of reduces and aligned expands (-EINVAL). One run at a time: the
 * record is global, cleared by fake_reset(). */
#ifndef ORCH_FAKE_POOL_H
#define ORCH_FAKE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fake_answer {
    FAKE_OK,      /* every record answered */
    FAKE_FAILED,  /* report status FAILED: run() failed for the whole batch */
    FAKE_CRASH,   /* the worker is lost (ORCH_LOSS_CRASH) with the batch, and the one
                     queued behind it (never started) */
    FAKE_TIMEOUT, /* the worker is lost (ORCH_LOSS_TIMEOUT) with the batch, and the one
                     queued behind it */
};

/* One record of a dispatched batch. */
struct fake_rec {
    uint64_t grain;
    uint32_t generation, attempt;
    uint64_t in0; /* the payload of its first input value; 0 when absent */
};

/* A batch as the driver dispatched it. */
struct fake_batch {
    uint64_t id;
    int call;   /* plan call index */
    int worker; /* the slot's index */
    bool queued; /* dispatched while its worker ran another: queued behind it */
    int seq;    /* its place in the run's dispatches, from 0 */
    int nrec;
    struct fake_rec *rec;
    int64_t grains_in_flight; /* grains of every pool in flight once it was dispatched,
                               * its own included */
    int64_t answered_before;  /* records of every pool answered before it was dispatched */
    bool answered;
    bool unrun; /* lost with its worker while queued: never started (how is not set) */
    enum fake_answer how;
};

/* The test's answer to batch b (called from the pump). */
typedef enum fake_answer (*fake_decide)(void *ctx, const struct fake_batch *b);

#define FAKE_MAX_CALLS 16

/* What one run did. */
struct fake_log {
    struct fake_batch *batch; /* [nbatch], in dispatch order */
    int nbatch, cbatch;
    int started[FAKE_MAX_CALLS];       /* orch_pool_start() that started a worker, per call */
    int start_after[FAKE_MAX_CALLS];   /* the batches dispatched before its first start */
    int stopped[FAKE_MAX_CALLS];       /* orch_pool_stop() of an idle worker, per call */
    int alive_now[FAKE_MAX_CALLS];     /* slots holding a worker now, per call */
    int alive_peak[FAKE_MAX_CALLS];    /* the most at once, per call */
    int over_start;                    /* orch_pool_start() with every slot taken */
    int bad_dispatch;                  /* orch_pool_dispatch() refused: w holds its most */
    int held_peak;                     /* the most batches one slot held at once */
    int queued_while_idle;             /* batches queued behind a busy slot, summed over
                                          the idle slots of its pool at that moment */
    int64_t in_flight, in_flight_peak; /* grains dispatched and not answered */
    int64_t answered;                  /* records answered (any way) */
    int pools_open;                    /* made and not closed nor killed */
    int closed_busy;                   /* batches still held by a pool when it was closed */
};

extern struct fake_log fake_log;

/* Clears the log and sets how batches are answered (decide NULL: every batch OK); no
 * dispatch hook. */
void fake_reset(fake_decide decide, void *ctx);
/* Calls fn (with decide's ctx) from orch_pool_dispatch() for every batch it accepts, once
 * recorded: after the commit of the turn that reserved it (driver.h), so the store says
 * what that turn decided. NULL: none. */
void fake_on_dispatch(void (*fn)(void *ctx, const struct fake_batch *b));
/* The slots of call `call`'s open pool that are IDLE now (0 when it has none). */
int fake_idle(int call);
/* Frees what the log holds. */
void fake_log_free(void);

/* The value an OK answer gives output port k of a record (or a child) of `call` (its name)
 * with input bytes in (NULL: none): "<in>.<call>" or "<call>", with "#k" after it when
 * k > 0. At most cap bytes, NUL-terminated. */
void fake_value(const char *in, size_t in_len, const char *call, int k, char *out, size_t cap);

/* The next HELLO of a worker of call `call` is replaced by a report of `batch` (copied):
 * every record OK at its recorded generation, each value ending with "!late", as a report
 * that arrives after its batch left flight would (pool.h's `report` leaves the worker
 * IDLE, as a HELLO does). The real pool never sends one (pool.h: a batch ends in exactly
 * one report or loss): it shows that the driver refuses it. At most one is pending; a
 * second call replaces the first. */
void fake_late_report(int call, const struct fake_batch *batch);

#endif
