/* attempts.c — the attempt rows (orch_facts.h): begun a batch at a time, ended one at a
 * time or a run at a time (held: held_flight.c), the starts of queued batches kept until
 * their ends, the interruption of those still open, and the look-ups resume makes. */
#include "orch_facts.h"

#include <assert.h>
#include <string.h>

#include "facts_int.h"
#include "proc.h"

/* What the attempt rows of a batch share, and their grains. */
struct attempts_ctx {
    const struct orch_grain_at *g;
    int pid;
    const char *host, *slurm_job; /* NULL for none; they outlive the statement's run */
    int64_t batch, now;
};

static int bind_attempts_fixed(sqlite3_stmt *st, const void *ctx)
{
    const struct attempts_ctx *a = ctx;
    int b = sqlite3_bind_int(st, 1, a->pid);
    if (b == SQLITE_OK)
        b = sqlite3_bind_text(st, 2, a->host, -1, SQLITE_STATIC);
    if (b == SQLITE_OK)
        b = sqlite3_bind_text(st, 3, a->slurm_job, -1, SQLITE_STATIC);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, 4, a->batch);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, 5, a->now);
    return b;
}

static int bind_attempt(sqlite3_stmt *st, int p, size_t i, const void *ctx)
{
    const struct orch_grain_at *g = &((const struct attempts_ctx *)ctx)->g[i];
    int b = sqlite3_bind_int64(st, p, g->grain);
    return b == SQLITE_OK ? sqlite3_bind_int64(st, p + 1, g->generation) : b;
}

int orch_store_attempts_begin(orch_store *s, const struct orch_grain_at *g, size_t n, int pid,
                              const char *host, const char *slurm_job, uint64_t batch,
                              int64_t *first)
{
    assert(orch_store_in_txn(s) && n > 0);
    *first = 0;
    struct attempts_ctx a = {.g = g,
                             .pid = pid,
                             .host = host && *host ? host : NULL,
                             .slurm_job = slurm_job && *slurm_job ? slurm_job : NULL,
                             .batch = (int64_t)batch,
                             .now = orch_clock_wall_ms()};
    int rc = orch_store__rows_insert(s, ROWS_ATTEMPT, n, bind_attempts_fixed, bind_attempt, &a,
                                     first);
    if (rc < 0)
        return rc;
    /* In flight at their generations ("seals held", held_flight.c). A grain left out (no
     * memory) has its seal written at once, checked by the table. */
    for (size_t i = 0; i < n; i++)
        (void)orch_store__gmap_put(&s->held.inflight, g[i].grain, (int64_t)g[i].generation, 0);
    return 0;
}

/* ---- the starts of queued batches ------------------------------------------------------
 * A batch sent to a worker that runs another one waits behind it; its attempt rows were
 * begun with the time it was sent, and the time the worker began it is known only when
 * the report before it is read (orch_store_attempts_started). Rewriting the rows then cost
 * a second UPDATE of each (a batch of the identity of scripts/bench/autobatch is 2,000
 * rows: 2% of the driver's time); the start is kept here instead, and the UPDATE that
 * ends the rows writes it too. Until then, and for good if the driver stops first, the
 * rows say when the batch was sent. */

/* Rows from..*to end now: narrows *to to the rows one start covers (*at: its time), or that
 * none covers (*at: -1), and takes them from their start. */
static void start_span(orch_store *s, int64_t from, int64_t *to, int64_t *at)
{
    *at = -1;
    for (int i = 0; i < s->nstarts; i++) {
        struct orch_store_start *t = &s->starts[i];
        if (t->first <= from && from <= t->last) {
            if (*to > t->last)
                *to = t->last;
            *at = t->at;
            if ((t->left -= *to - from + 1) <= 0) /* taken out, the others kept in order */
                memmove(t, t + 1, (size_t)(--s->nstarts - i) * sizeof *t);
            return;
        }
    }
    for (int i = 0; i < s->nstarts; i++)
        if (s->starts[i].first > from && s->starts[i].first <= *to)
            *to = s->starts[i].first - 1;
}

int orch_store_attempts_started(orch_store *s, int64_t first, int64_t last, int64_t at_ms)
{
    if (s->nstarts == ORCH_STORE_STARTS) {
        /* Full (rows that ended another way, an interruption): the oldest is written now. */
        struct orch_store_start *t = &s->starts[0];
        sqlite3_stmt *st;
        int rc = orch_store__stmt(s, F_ATTEMPTS_START, &st, "lll", t->at, t->first, t->last);
        if (rc < 0 || (rc = orch_store__run(s, st, NULL)) < 0)
            return rc;
        memmove(t, t + 1, (size_t)--s->nstarts * sizeof *t);
    }
    s->starts[s->nstarts++] =
        (struct orch_store_start){.first = first, .last = last, .at = at_ms,
                                  .left = last - first + 1};
    return 0;
}

/* One UPDATE, or one for each start the rows span (held ends of consecutive rows merge,
 * whatever batches they are of). */
int orch_store__aend_write(orch_store *s, const struct orch_held_aend *a)
{
    int rc = 0;
    for (int64_t from = a->first, to, at; rc == 0 && from <= a->last; from = to + 1) {
        to = a->last;
        start_span(s, from, &to, &at);
        sqlite3_stmt *st;
        rc = orch_store__stmt(s, F_ATTEMPTS_END, &st, "lsNll", a->at,
                              orch_attempt_outcome_name(a->outcome), at, from, to);
        if (rc == 0)
            rc = orch_store__run(s, st, NULL);
    }
    return rc;
}

int orch_store_attempt_end(orch_store *s, int64_t row, enum orch_attempt_outcome o,
                           const char *message)
{
    int64_t to = row, at;
    start_span(s, row, &to, &at);
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ATTEMPT_END, &st, "lstNl", orch_clock_wall_ms(),
                              orch_attempt_outcome_name(o), message && *message ? message : NULL,
                              at, row);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_attempts_end(orch_store *s, int64_t first, int64_t last,
                            enum orch_attempt_outcome o)
{
    struct orch_held_aend a = {first, last, orch_clock_wall_ms(), (int)o};
    int rc = orch_store__hold_aend(s, &a);
    return rc != 0 ? (rc < 0 ? rc : 0) : orch_store__aend_write(s, &a);
}

int orch_store_attempts_interrupt(orch_store *s)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ATTEMPTS_INTERRUPT, &st, "sl",
                              orch_attempt_outcome_name(ORCH_ATTEMPT_INTERRUPTED),
                              orch_clock_wall_ms());
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_open_slurm_jobs(orch_store *s, int (*fn)(void *ctx, const char *job),
                               void *ctx)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_OPEN_SLURM_JOBS, &st, "");
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        const char *job = (const char *)sqlite3_column_text(st, 0);
        rc = job ? fn(ctx, job) : 0;
    }
    sqlite3_reset(st);
    return rc;
}

int orch_store_attempt_last_batch(orch_store *s, uint64_t *batch)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ATTEMPT_LAST_BATCH, &st, "");
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *batch = rc == 1 ? (uint64_t)sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return 0;
}

int orch_store_attempt_floor_set(orch_store *s, int64_t floor)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ATTEMPT_FLOOR_SET, &st, "l", floor);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}
