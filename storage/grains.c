/* grains.c — the grains of the job's facts (orch_facts.h): their creation, look-ups and
 * transitions (DESIGN §4), the reads of recovery, and the job's counters. The rows of
 * grains that the held-writes cache holds (held.h) are read and changed through it. */
#include "orch_facts.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "facts_int.h"
#include "orch_error.h"
#include "proc.h"
#include "store_int.h"

int orch_store_grain_outcome(orch_store *s, int call, int64_t e, enum orch_grain_outcome *o)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_OUTCOME, &st, "il", call, e);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    const char *t = (const char *)sqlite3_column_text(st, 0);
    rc = t ? 1 : 0;
    if (t) {
        int v = orch_grain_outcome_parse(t);
        if (v < 0)
            rc = orch_store__corrupt_text(s, "grain outcome");
        else
            *o = (enum orch_grain_outcome)v;
    }
    sqlite3_reset(st);
    return rc;
}

/* ---- grains ---------------------------------------------------------------------------- */

int orch_store_grain_create(orch_store *s, int call, int64_t e, int64_t parent, int64_t pending)
{
    assert(orch_store_in_txn(s));
    int rc = orch_store__hold_grain(s, call, e, parent, pending);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    /* Not held: the held ones first (the statement writes grains), so that this INSERT's
     * id comes after theirs. */
    sqlite3_stmt *st;
    if ((rc = orch_store__stmt(s, F_GRAIN_CREATE, &st, "ilsl", call, e,
                               orch_grain_phase_name(ORCH_PHASE_WAITING), pending)) < 0 ||
        (rc = orch_store__run(s, st, NULL)) < 0)
        return rc;
    s->held.next_grain = 0;
    orch_store__waiting_put(s,
                            &(struct orch_held_waiting){.entity = e,
                                                        .id = sqlite3_last_insert_rowid(s->db),
                                                        .parent = parent,
                                                        .pending = pending,
                                                        .call = call});
    return 0;
}

/* Reads the columns of GRAIN_GET / GRAIN_BY_ID into g. */
static int grain_read(orch_store *s, sqlite3_stmt *st, struct orch_grain_row *g)
{
    g->id = sqlite3_column_int64(st, 0);
    g->call = sqlite3_column_int(st, 1);
    g->entity = sqlite3_column_int64(st, 2);
    g->parent = sqlite3_column_int64(st, 3);
    int phase = orch_grain_phase_parse((const char *)sqlite3_column_text(st, 4));
    g->outcome = sqlite3_column_type(st, 5) == SQLITE_NULL
                     ? -1
                     : orch_grain_outcome_parse((const char *)sqlite3_column_text(st, 5));
    g->pending = sqlite3_column_int64(st, 6);
    g->generation = (uint32_t)sqlite3_column_int64(st, 7);
    g->seq = sqlite3_column_int64(st, 8);
    g->attempts = 0;
    bool bad = phase < 0 || (sqlite3_column_type(st, 5) != SQLITE_NULL && g->outcome < 0);
    sqlite3_reset(st);
    if (bad)
        return orch_store__corrupt_text(s, "grain phase or outcome");
    g->phase = (enum orch_grain_phase)phase;
    const struct orch_held_ready *r;
    if (g->phase == ORCH_PHASE_WAITING &&
        (r = orch_store__held_ready(&s->held, s, g->id)) != NULL) {
        g->phase = ORCH_PHASE_READY; /* as it will be written */
        g->pending = 0;
        g->seq = r->seq;
    }
    return 0;
}

static int grain_get_row(orch_store *s, int call, int64_t e, bool root,
                         struct orch_grain_row *g);

int orch_store_grain_get(orch_store *s, int call, int64_t e, bool root,
                         struct orch_grain_row *g)
{
    const struct orch_held_waiting *w = orch_store__waiting_find(&s->held, s, call, e);
    if (!w)
        return grain_get_row(s, call, e, root, g);
    *g = (struct orch_grain_row){.id = w->id,
                                 .call = call,
                                 .entity = e,
                                 .parent = w->parent,
                                 .phase = ORCH_PHASE_WAITING,
                                 .outcome = -1,
                                 .pending = w->pending};
    if (!s->checks || orch_store__held_grain(&s->held, w->id))
        return 0; /* (a held grain has no row to compare with: the test would write it) */
    struct orch_grain_row r;
    int rc = grain_get_row(s, call, e, root, &r);
    if (rc == 0 && (r.id != g->id || r.parent != g->parent || r.phase != g->phase ||
                    r.pending != g->pending || r.generation != 0 || r.outcome != -1))
        rc = orch_error_set(ORCH_ECORRUPT,
                            "%s: grain %lld as kept (parent %lld, pending %lld) is not its "
                            "row (grain %lld, parent %lld, phase %d, pending %lld)",
                            s->path, (long long)g->id, (long long)g->parent,
                            (long long)g->pending, (long long)r.id, (long long)r.parent,
                            (int)r.phase, (long long)r.pending);
    return rc;
}

static int grain_get_row(orch_store *s, int call, int64_t e, bool root,
                         struct orch_grain_row *g)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, root ? F_GRAIN_GET_ROOT : F_GRAIN_GET, &st, "il", call, e);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 0)
        return orch_error_set(ORCH_ECORRUPT,
                              "%s: grain of call %d on entity %lld does not exist", s->path,
                              call, (long long)e);
    return grain_read(s, st, g);
}

int orch_store_grain_by_id(orch_store *s, int64_t id, struct orch_grain_row *g)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_BY_ID, &st, "l", id);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 0)
        return orch_error_set(ORCH_ECORRUPT, "%s: grain %lld does not exist", s->path,
                              (long long)id);
    return grain_read(s, st, g);
}

/* A kept WAITING grain's count is held (HELD_PENDING): a reduce's goes down once per child
 * input, and only the last value of a transaction is written. */
int orch_store_grain_set_pending(orch_store *s, const struct orch_grain_row *g, int64_t pending)
{
    struct orch_held_grain *c = orch_store__held_grain(&s->held, g->id);
    struct orch_held_waiting *w = orch_store__waiting_find(&s->held, s, g->call, g->entity);
    int rc = 0;
    if (c)
        c->pending = pending;
    else if (w && orch_store_in_txn(s) &&
             (rc = orch_store__held_admit(&s->held, s, HELD_PENDING, s->held.pend.n)) == 1) {
        if ((rc = orch_store__gmap_put(&s->held.pend, g->id, pending, 0)) < 0)
            return orch_error_set(rc, "%s: out of memory for pending counts", s->path);
        s->held.kinds |= HELD_PENDING;
    } else {
        sqlite3_stmt *st;
        if (rc < 0 || (rc = orch_store__stmt(s, F_GRAIN_SET_PENDING, &st, "ll", pending,
                                             g->id)) < 0 ||
            (rc = orch_store__run(s, st, NULL)) < 0)
            return rc;
    }
    if (w)
        w->pending = pending;
    return 0;
}

/* held.h: the pending counts held, one UPDATE each. */
int orch_store__pending_flush(orch_store *s)
{
    struct orch_held_gmap *m = &s->held.pend;
    int rc = 0;
    for (size_t i = 0; i < m->size && rc == 0; i++) {
        sqlite3_stmt *st;
        if (m->v[i].grain &&
            (rc = orch_store__stmt(s, F_GRAIN_SET_PENDING, &st, "ll", m->v[i].seq,
                                   m->v[i].grain)) == 0)
            rc = orch_store__run(s, st, NULL);
    }
    if (rc == 0 && m->n) {
        memset(m->v, 0, m->size * sizeof *m->v);
        m->n = 0;
    }
    return rc;
}

int orch_store_grain_ready(orch_store *s, const struct orch_grain_row *g, int64_t seq)
{
    assert(orch_store_in_txn(s));
    orch_store__waiting_drop(s, g->call, g->entity);
    int64_t grain = g->id;
    /* The READY writes pending 0: a count held for it would follow it (kinds flush in
     * their order, PENDING last). */
    orch_store__gmap_take(&s->held.pend, grain, NULL);
    int64_t at = orch_clock_wall_ms();
    struct orch_held_grain *c = orch_store__held_grain(&s->held, grain);
    if (c) { /* not written yet: it will be, READY */
        c->seq = seq;
        c->at = at;
        return 0;
    }
    int rc = orch_store__hold_ready(s, grain, seq, at);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    sqlite3_stmt *st; /* not held: written now */
    rc = orch_store__stmt(s, F_GRAIN_READY, &st, "llsls", grain, seq,
                          orch_grain_phase_name(ORCH_PHASE_READY), at,
                          orch_grain_phase_name(ORCH_PHASE_WAITING));
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_grain_interrupt(orch_store *s, int64_t grain, uint32_t generation)
{
    struct orch_held_gent f = {0, -1, -1};
    orch_store__gmap_take(&s->held.flying, grain, &f);
    orch_store__gmap_take(&s->held.inflight, grain, NULL);
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_INTERRUPT, &st, "llNsls", grain, (int64_t)generation,
                              f.seq, orch_grain_phase_name(ORCH_PHASE_READY),
                              orch_clock_wall_ms(), orch_grain_phase_name(ORCH_PHASE_SEALED));
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_grain_requeue(orch_store *s, int64_t grain, uint32_t generation, int64_t seq,
                             bool *done)
{
    *done = false; /* also when a statement fails: callers read it */
    orch_store__gmap_take(&s->held.flying, grain,
                          NULL); /* the new ready_seq replaces the one kept */
    orch_store__gmap_take(&s->held.inflight, grain, NULL);
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_REQUEUE, &st, "lllssl", grain, (int64_t)generation,
                              seq, orch_grain_phase_name(ORCH_PHASE_SEALED),
                              orch_grain_phase_name(ORCH_PHASE_READY), orch_clock_wall_ms());
    return rc < 0 ? rc : orch_store__run(s, st, done);
}

/* Whether unrun grain (call, e) is READY, so in a queue (a grain kept as waiting is not;
 * a held READY reads READY). */
static int unrun_queued(orch_store *s, int64_t grain, int call, int64_t e, bool *queued)
{
    const struct orch_held_grain *c = orch_store__held_grain(&s->held, grain);
    struct orch_grain_row g = {.phase = ORCH_PHASE_WAITING};
    int rc = c || orch_store__waiting_find(&s->held, s, call, e)
                 ? 0
                 : orch_store_grain_by_id(s, grain, &g);
    *queued = c ? c->seq != 0 : g.phase == ORCH_PHASE_READY;
    return rc;
}

int orch_store_grain_seal(orch_store *s, int64_t grain, int call, int64_t e,
                          enum orch_grain_outcome o, bool in_flight, uint32_t generation,
                          bool *done)
{
    *done = false; /* also when a statement fails: callers read it */
    if (in_flight)
        return orch_store__seal_in_flight(s, grain, o, generation, done);
    bool queued;
    sqlite3_stmt *st;
    orch_store__gmap_take(&s->held.inflight, grain,
                          NULL); /* the table decides, as for any unrun grain */
    int rc = unrun_queued(s, grain, call, e, &queued);
    /* Sealed before its READY was written: the READY never will be; the seal writes its
     * ready_seq and ready_at. */
    struct orch_held_ready *r = orch_store__held_ready(&s->held, s, grain);
    if (rc == 0)
        rc = orch_store__stmt(
            s, F_GRAIN_SEAL_UNRUN, &st, "lssssNN", grain, orch_grain_outcome_name(o),
            orch_grain_phase_name(ORCH_PHASE_WAITING), orch_grain_phase_name(ORCH_PHASE_READY),
            orch_grain_phase_name(ORCH_PHASE_SEALED), r ? r->seq : -1, r ? r->at : -1);
    if (rc == 0 && (rc = orch_store__run(s, st, done)) == 0 && *done) {
        orch_store__waiting_drop(s, call, e);
        if (r)
            r->live = false;
        if (queued) /* its queue entry is stale now */
            rc = orch_store__gmap_put(&s->held.unq, grain, 0, 0);
    }
    return rc;
}

int orch_store_grain_reopen(orch_store *s, int64_t grain, bool *done)
{
    *done = false; /* also when a statement fails: callers read it */
    sqlite3_stmt *st;
    orch_store__gmap_take(&s->held.inflight, grain, NULL);
    int rc = orch_store__stmt(s, F_GRAIN_REOPEN, &st, "lss", grain,
                              orch_grain_phase_name(ORCH_PHASE_WAITING),
                              orch_grain_phase_name(ORCH_PHASE_SEALED));
    return rc < 0 ? rc : orch_store__run(s, st, done);
}

/* Collects the rows of a query into a malloc'd array: columns id, call, entity, parent,
 * generation (ncol 5) or id, entity (ncol 2). */
static int collect(orch_store *s, sqlite3_stmt *st, int ncol, struct orch_grain_row **rows,
                   size_t *n)
{
    *rows = NULL;
    *n = 0;
    size_t cap = 0;
    int rc;
    while ((rc = orch_store_step(s, st)) == 1) {
        struct orch_grain_row g = {.id = sqlite3_column_int64(st, 0), .outcome = -1};
        if (ncol == 2) {
            g.entity = sqlite3_column_int64(st, 1);
        } else {
            g.call = sqlite3_column_int(st, 1);
            g.entity = sqlite3_column_int64(st, 2);
            g.parent = sqlite3_column_int64(st, 3);
            g.generation = (uint32_t)sqlite3_column_int64(st, 4);
        }
        if ((rc = orch_store__push(rows, n, &cap, &g, sizeof g)) < 0)
            break;
    }
    if (rc >= 0 || rc == -ENOMEM)
        sqlite3_reset(st);
    if (rc < 0) {
        free(*rows);
        *rows = NULL;
        *n = 0;
        return rc;
    }
    return 0;
}

int orch_store_grains_failed(orch_store *s, int call, struct orch_grain_row **rows, size_t *n)
{
    sqlite3_stmt *st;
    *rows = NULL;
    *n = 0;
    int rc = orch_store__stmt(s, F_GRAINS_FAILED, &st, "is", call,
                              orch_grain_outcome_name(ORCH_OUTCOME_FAILED));
    return rc < 0 ? rc : collect(s, st, 5, rows, n);
}

int orch_store_grains_unrun(orch_store *s, int call, int64_t parent,
                            struct orch_grain_row **rows, size_t *n)
{
    sqlite3_stmt *st;
    *rows = NULL;
    *n = 0;
    int rc = orch_store__stmt(s, F_GRAINS_UNRUN, &st, "liss", parent, call,
                              orch_grain_phase_name(ORCH_PHASE_WAITING),
                              orch_grain_phase_name(ORCH_PHASE_READY));
    return rc < 0 ? rc : collect(s, st, 2, rows, n);
}

/* ---- recovery -------------------------------------------------------------------------- */

int orch_store_grains_barred_in_flight(orch_store *s, struct orch_grain_row **rows, size_t *n)
{
    sqlite3_stmt *st;
    *rows = NULL;
    *n = 0;
    int rc = orch_store__stmt(s, F_GRAINS_BARRED, &st, "s",
                              orch_grain_phase_name(ORCH_PHASE_SEALED));
    return rc < 0 ? rc : collect(s, st, 5, rows, n);
}

int orch_store_grains_interrupt(orch_store *s)
{
    orch_store__gmap_clear(&s->held.inflight); /* every grain in flight goes back */
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAINS_INTERRUPT, &st, "ssls",
                              orch_grain_phase_name(ORCH_PHASE_READY),
                              orch_grain_phase_name(ORCH_PHASE_IN_FLIGHT), orch_clock_wall_ms(),
                              orch_grain_phase_name(ORCH_PHASE_SEALED));
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_grains_unsealed(orch_store *s, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAINS_UNSEALED, &st, "s",
                              orch_grain_phase_name(ORCH_PHASE_SEALED));
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *n = rc == 1 ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return 0;
}

int orch_store_grains_sealed_counts(orch_store *s,
                                    void (*fn)(void *ctx, int call, enum orch_grain_outcome o,
                                               int64_t n),
                                    void *ctx)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAINS_SEALED_COUNTS, &st, "s",
                              orch_grain_phase_name(ORCH_PHASE_SEALED));
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        int o = orch_grain_outcome_parse((const char *)sqlite3_column_text(st, 1));
        if (o < 0) {
            sqlite3_reset(st);
            return orch_store__corrupt_text(s, "grain outcome");
        }
        fn(ctx, sqlite3_column_int(st, 0), (enum orch_grain_outcome)o,
           sqlite3_column_int64(st, 2));
        rc = 0;
    }
    if (rc >= 0)
        sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

int orch_store_grains_ready(orch_store *s, int (*fn)(void *ctx, const struct orch_grain_row *g),
                            void *ctx)
{
    sqlite3_stmt *st;
    /* One pass over the table (0018: its index leads with the entity, so a query per call
     * would scan it once per call); the READY grains, bounded by admission, are sorted. */
    int rc = orch_store__stmt(
        s, F_GRAINS_READY, &st, "sssssss", orch_grain_phase_name(ORCH_PHASE_READY),
        orch_failure_kind_name(ORCH_FAILURE_ERROR), orch_failure_kind_name(ORCH_FAILURE_CRASH),
        orch_failure_kind_name(ORCH_FAILURE_TIMEOUT),
        orch_failure_kind_name(ORCH_FAILURE_RECORD), orch_failure_kind_name(ORCH_FAILURE_GROUP),
        orch_failure_kind_name(ORCH_FAILURE_EXHAUSTED));
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        struct orch_grain_row g = {.id = sqlite3_column_int64(st, 0),
                                   .call = (int)sqlite3_column_int64(st, 6),
                                   .entity = sqlite3_column_int64(st, 1),
                                   .parent = sqlite3_column_int64(st, 2),
                                   .phase = ORCH_PHASE_READY,
                                   .outcome = -1,
                                   .generation = (uint32_t)sqlite3_column_int64(st, 3),
                                   .seq = sqlite3_column_int64(st, 4),
                                   .attempts = (uint32_t)sqlite3_column_int64(st, 5)};
        rc = fn(ctx, &g);
    }
    if (rc >= 0)
        sqlite3_reset(st);
    return rc;
}

int orch_store_counters_get(orch_store *s, int64_t *seq, int64_t *live_bytes)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_COUNTERS_GET, &st, "");
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 0)
        return orch_error_set(ORCH_ENOTFOUND, "%s: the job row is missing", s->path);
    *seq = sqlite3_column_int64(st, 0);
    *live_bytes = sqlite3_column_int64(st, 1);
    sqlite3_reset(st);
    return 0;
}

int orch_store_counters_set(orch_store *s, int64_t seq, int64_t live_bytes)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_COUNTERS_SET, &st, "ll", seq, live_bytes);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_budgets_set(orch_store *s, int64_t max_unsealed, int64_t max_live_bytes)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_BUDGETS_SET, &st, "ll", max_unsealed, max_live_bytes);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}
