/* test_held.c — the held-writes cache (storage/held.h) tested as SQLite tests its pager:
 * random sequences of the store's operations, as the driver makes them (admission, READY,
 * dispatch, reports with their items, expansions and seals, attempt ends, requeues,
 * interrupts, unrun seals, re-opens, reclaimed ids, look-ups, commits), run with the cache
 * on and with it off (orch_store__held_off), must leave the same database, row for row,
 * and must answer every look-up the same. A child that runs a sequence with the cache on
 * and is killed (SIGKILL) at a random operation must leave what the same operations up to
 * its last commit leave with the cache off.
 *
 * Each test can fail: with flush_one (held.c) skipping HELD_AEND, the attempt ends of a
 * transaction are never written and both tests fail on the attempt table; with GRAIN_BY_ID
 * declaring HELD_SEAL as read through the cache (facts_int.h), a look-up after a held seal
 * reads the grain unsealed and both fail on the model's check; with HELD_WRITES_READY 0
 * (held.h), the READYs held are not written before the statements that read grains'
 * states (grains_unsealed's count) and test_on_off fails on the transcripts. Without the
 * ready_seq and ready_at that an unrun seal writes for a held READY (orch_store_grain_seal),
 * both fail on the grain table. test_declarations checks the statement table itself:
 * every statement that names a table that held rows change declares a part of it (with
 * ITEM_GET declaring nothing it fails, and so do the other two).
 *
 * Times (columns named at or *_at) are compared as NULL or not: both runs read the clock.
 * A grain in flight (an open attempt) is compared without its phase, pending count,
 * ready_seq: held.h says that its READY may be unwritten then. */
#define _GNU_SOURCE /* nftw, in testutil.h */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "facts_int.h" /* orch_store__fact_declared */
#include "orch_error.h"
#include "orch_facts.h"
#include "orch_store.h"
#include "store_int.h" /* orch_store__held_off */
#include "testutil.h"

#define NOPS 600
#define MAXG 2048
#define MAXR 48

/* ---- the model: what the driver knows of its grains ------------------------------------ */

enum mphase { M_WAITING, M_READY, M_FLIGHT, M_SEALED };

struct mgrain {
    int64_t id, e, parent, attempt;
    int call, phase;
    int64_t pending;
    uint32_t gen;
    bool out; /* its output item is put */
};

struct model {
    orch_store *s;
    uint64_t rng, hash; /* hash: of every answer the store gave */
    struct mgrain g[MAXG];
    int ng, nroots;
    int64_t roots[MAXR], root_payload[MAXR];
    bool expanded[MAXR], reclaimed[MAXR];
    int64_t seq;
    uint64_t payload, batch;
    int failed_line; /* the line of the first check that failed */
};

static uint64_t rnd(struct model *m)
{
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 7;
    m->rng ^= m->rng << 17;
    return m->rng;
}

static int pick(struct model *m, int n)
{
    return n > 0 ? (int)(rnd(m) % (uint64_t)n) : 0;
}

static void note(struct model *m, int64_t v)
{
    m->hash = (m->hash ^ (uint64_t)v) * UINT64_C(0x100000001b3);
}

/* The runner reports failures, never asserts: it also runs in a child. */
#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            if (!m->failed_line)                                                               \
                fprintf(stderr, "test_held: line %d: %s (%s)\n", __LINE__, #cond,              \
                        orch_error_detail());                                                  \
            m->failed_line = m->failed_line ? m->failed_line : __LINE__;                       \
            return -1;                                                                         \
        }                                                                                      \
    } while (0)

/* A random grain of the model in phase ph (-1: any): its index, or -1. */
static int grain_in(struct model *m, int ph)
{
    if (m->ng == 0)
        return -1;
    int start = pick(m, m->ng);
    for (int k = 0; k < m->ng; k++) {
        int i = (start + k) % m->ng;
        if (ph < 0 || m->g[i].phase == ph)
            return i;
    }
    return -1;
}

/* Creates grain (call, e) and learns its id from a look-up. */
static int create(struct model *m, int call, int64_t e, int64_t parent, int64_t pending)
{
    CHECK(m->ng < MAXG);
    CHECK(orch_store_grain_create(m->s, call, e, parent, pending) == 0);
    struct orch_grain_row r;
    CHECK(orch_store_grain_get(m->s, call, e, parent == 0, &r) == 0);
    CHECK(r.phase == ORCH_PHASE_WAITING && r.pending == pending);
    note(m, r.id);
    m->g[m->ng++] = (struct mgrain){.id = r.id,
                                    .e = e,
                                    .parent = parent,
                                    .call = call,
                                    .phase = M_WAITING,
                                    .pending = pending};
    return 0;
}

static int op_admit(struct model *m)
{
    if (m->nroots == MAXR)
        return 0;
    int r = m->nroots;
    char key[32];
    snprintf(key, sizeof key, "r%d", r);
    int64_t e;
    CHECK(orch_store_entity_put(m->s, 0, 0, r, key, &e) == 0);
    note(m, e);
    struct orch_root_sig sig = {.known = (r % 3) != 0, .size = r, .mtime_ns = 7 * r};
    snprintf(sig.hash, sizeof sig.hash, "h%d", r);
    CHECK(orch_store_root_put(m->s, e, 0, 1, r, &sig) == 0);
    m->root_payload[r] = (int64_t)++m->payload;
    CHECK(orch_store_item_put(m->s, 0, e, ORCH_ITEM_PRESENT, m->payload, 10) == 0);
    m->roots[m->nroots++] = e;
    if (create(m, 0, e, 0, 1 + pick(m, 2)) < 0 || create(m, 1, e, 0, 1) < 0)
        return -1;
    return 0;
}

/* One input of a WAITING grain arrives: its pending count goes down, or it becomes READY. */
static int op_arrive(struct model *m)
{
    int i = grain_in(m, M_WAITING);
    if (i < 0)
        return 0;
    struct mgrain *g = &m->g[i];
    struct orch_grain_row r;
    CHECK(orch_store_grain_get(m->s, g->call, g->e, g->parent == 0, &r) == 0);
    CHECK(r.id == g->id && r.phase == ORCH_PHASE_WAITING && r.pending == g->pending);
    if (g->pending > 1) {
        CHECK(orch_store_grain_set_pending(m->s, &r, --g->pending) == 0);
        return 0;
    }
    CHECK(orch_store_grain_ready(m->s, &r, ++m->seq) == 0);
    g->phase = M_READY;
    g->pending = 0;
    return 0;
}

static int op_dispatch(struct model *m)
{
    struct orch_grain_at at[8];
    int idx[8], n = 0, want = 1 + pick(m, 8);
    for (int k = 0, start = pick(m, m->ng + 1); k < m->ng && n < want; k++) {
        int i = (start + k) % m->ng;
        if (m->g[i].phase != M_READY)
            continue;
        bool done;
        CHECK(orch_store_grain_dispatch(m->s, m->g[i].id, m->g[i].gen, &done) == 0 && done);
        at[n] = (struct orch_grain_at){.grain = m->g[i].id, .generation = m->g[i].gen};
        idx[n++] = i;
    }
    if (n == 0)
        return 0;
    int64_t first;
    CHECK(orch_store_attempts_begin(m->s, at, (size_t)n, 1, "host", NULL, ++m->batch, &first) ==
          0);
    note(m, first);
    for (int k = 0; k < n; k++) {
        m->g[idx[k]].phase = M_FLIGHT;
        m->g[idx[k]].attempt = first + k;
    }
    return 0;
}

/* The output item of grain g, in state st, once. */
static int output(struct model *m, struct mgrain *g, enum orch_item_state st)
{
    static const int port[] = {1, -1, 3}; /* a -> r.a, x -> none, b -> c.b */
    if (g->out || port[g->call] < 0)
        return 0;
    g->out = true;
    bool present = st == ORCH_ITEM_PRESENT;
    CHECK(orch_store_item_put(m->s, port[g->call], g->e, st, present ? ++m->payload : 0,
                              present ? 5 : -1) == 0);
    return 0;
}

/* An expansion's children: entities, grains of b, their input items. */
static int expand(struct model *m, int root)
{
    if (m->expanded[root])
        return 0;
    m->expanded[root] = true;
    int64_t parent = m->roots[root], n = 1 + pick(m, 3);
    for (int64_t k = 0; k < n; k++) {
        int64_t c;
        CHECK(orch_store_entity_put(m->s, 1, parent, k, NULL, &c) == 0);
        note(m, c);
        CHECK(orch_store_item_put(m->s, 2, c, ORCH_ITEM_PRESENT, ++m->payload, 3) == 0);
        if (create(m, 2, c, parent, 1) < 0)
            return -1;
    }
    CHECK(orch_store_expansion_put(m->s, 1, parent, ORCH_EXPANSION_SUCCEEDED, n) == 0);
    return 0;
}

static int root_index(struct model *m, int64_t e)
{
    for (int r = 0; r < m->nroots; r++)
        if (m->roots[r] == e)
            return r;
    return -1;
}

/* A report of a grain in flight: its attempt ends, its seal, what its success publishes. */
static int report(struct model *m, struct mgrain *g, bool fail)
{
    if (fail) {
        CHECK(orch_store_attempt_end(m->s, g->attempt, ORCH_ATTEMPT_ERROR, "boom") == 0);
        CHECK(orch_store_failure_put(m->s, g->id, g->gen, ORCH_FAILURE_ERROR, "boom", 0) == 0);
    } else {
        CHECK(orch_store_attempts_end(m->s, g->attempt, g->attempt, ORCH_ATTEMPT_OK) == 0);
    }
    bool done;
    CHECK(orch_store_grain_seal(m->s, g->id, g->call, g->e,
                                fail ? ORCH_OUTCOME_FAILED : ORCH_OUTCOME_OK, true, g->gen,
                                &done) == 0 &&
          done);
    g->phase = M_SEALED;
    if (fail)
        return output(m, g, ORCH_ITEM_FAILED);
    if (g->call == 1)
        return expand(m, root_index(m, g->e));
    int r = root_index(m, g->e);
    if (g->call == 0 && !m->reclaimed[r]) { /* its input is read: reclaimed, once */
        bool added;
        m->reclaimed[r] = true;
        CHECK(orch_store_reclaimed_put(m->s, (uint64_t)m->root_payload[r], &added) == 0);
        note(m, added);
    }
    return output(m, g, ORCH_ITEM_PRESENT);
}

static int op_report(struct model *m)
{
    int n = 1 + pick(m, 6);
    for (int k = 0; k < n; k++) {
        int i = grain_in(m, M_FLIGHT);
        if (i < 0)
            return 0;
        if (report(m, &m->g[i], pick(m, 10) == 0) < 0)
            return -1;
    }
    return 0;
}

/* A grain in flight comes back: requeued (a crash) or interrupted. */
static int op_back(struct model *m)
{
    int i = grain_in(m, M_FLIGHT);
    if (i < 0)
        return 0;
    struct mgrain *g = &m->g[i];
    if (pick(m, 2)) {
        bool done;
        CHECK(orch_store_attempt_end(m->s, g->attempt, ORCH_ATTEMPT_CRASH, "crash") == 0);
        CHECK(orch_store_grain_requeue(m->s, g->id, g->gen, ++m->seq, &done) == 0 && done);
    } else {
        CHECK(orch_store_attempt_end(m->s, g->attempt, ORCH_ATTEMPT_INTERRUPTED, NULL) == 0);
        CHECK(orch_store_grain_interrupt(m->s, g->id, g->gen) == 0);
    }
    g->gen++;
    g->phase = M_READY;
    return 0;
}

/* A grain that has not run is sealed (an upstream failure), or a sealed one re-opened. */
static int op_unrun(struct model *m)
{
    int i = grain_in(m, pick(m, 2) ? M_WAITING : M_READY);
    if (i < 0)
        return 0;
    struct mgrain *g = &m->g[i];
    bool done;
    CHECK(orch_store_grain_seal(m->s, g->id, g->call, g->e, ORCH_OUTCOME_SUPPRESSED, false,
                                g->gen, &done) == 0 &&
          done);
    if (g->phase == M_READY) { /* its queue entry, stale, comes out */
        CHECK(orch_store_grain_dispatch(m->s, g->id, g->gen, &done) == 0 && !done);
    }
    g->phase = M_SEALED;
    return output(m, g, ORCH_ITEM_SUPPRESSED);
}

static int op_reopen(struct model *m)
{
    int i = grain_in(m, M_SEALED);
    if (i < 0)
        return 0;
    struct mgrain *g = &m->g[i];
    bool done;
    CHECK(orch_store_grain_reopen(m->s, g->id, &done) == 0 && done);
    struct orch_grain_row r = {.id = g->id, .call = g->call, .entity = g->e};
    CHECK(orch_store_grain_set_pending(m->s, &r, 1) == 0);
    g->gen++;
    g->phase = M_WAITING;
    g->pending = 1;
    return 0;
}

/* A READY grain that grains_ready gives: a grain in flight may be one or not (held.h). */
static int count_ready(void *ctx, const struct orch_grain_row *g)
{
    struct model *m = ctx;
    for (int i = 0; i < m->ng; i++) {
        if (m->g[i].id == g->id && m->g[i].phase != M_FLIGHT) {
            note(m, g->id);
            note(m, g->generation);
        }
    }
    return 0;
}

/* Look-ups: every answer goes into the transcript. */
static int op_look(struct model *m)
{
    int i = grain_in(m, -1);
    if (i >= 0) {
        struct mgrain *g = &m->g[i];
        struct orch_grain_row r;
        CHECK(orch_store_grain_by_id(m->s, g->id, &r) == 0);
        CHECK(r.generation == g->gen && r.call == g->call && r.entity == g->e);
        if (g->phase == M_FLIGHT) /* its READY may be unwritten (held.h) */
            CHECK(r.phase == ORCH_PHASE_READY || r.phase == ORCH_PHASE_WAITING);
        else
            CHECK(r.phase == (g->phase == M_SEALED    ? ORCH_PHASE_SEALED
                              : g->phase == M_WAITING ? ORCH_PHASE_WAITING
                                                      : ORCH_PHASE_READY));
        note(m, r.outcome);
        enum orch_item_state st;
        uint64_t payload = 0;
        int rc =
            g->call == 1 ? 0 : orch_store_item_get(m->s, g->call ? 3 : 1, g->e, &st, &payload);
        CHECK(rc >= 0 && rc == (g->out && g->call != 1));
        note(m, (int64_t)payload);
        int64_t n;
        CHECK(orch_store_children_count(m->s, g->parent ? g->parent : g->e, 1, &n) == 0);
        note(m, n);
    }
    int64_t n;
    CHECK(orch_store_grains_unsealed(m->s, &n) == 0);
    note(m, n);
    CHECK(orch_store_reclaimed_count(m->s, &n) == 0);
    note(m, n);
    bool reclaimed;
    CHECK(orch_store_payload_reclaimed(m->s, 1 + (uint64_t)pick(m, (int)m->payload + 1),
                                       &reclaimed) == 0);
    note(m, reclaimed);
    if (m->nroots > 0) {
        char key[32];
        int64_t next;
        struct orch_root_row row;
        snprintf(key, sizeof key, "r%d", pick(m, m->nroots));
        CHECK(orch_store_root_find(m->s, 0, key, &row, &next) == 1);
        note(m, row.entity);
        note(m, next);
    }
    if (pick(m, 4) == 0)
        CHECK(orch_store_grains_ready(m->s, count_ready, m) == 0);
    return 0;
}

/* One operation, chosen by the generator: 1 when it was a commit, 0, or -1. */
static int step(struct model *m)
{
    int op = pick(m, 100);
    if (op < 3) {
        CHECK(orch_store_commit(m->s) == 0);
        CHECK(orch_store_begin(m->s) == 0);
        return 1;
    }
    if (op < 4) {
        CHECK(orch_store_flush(m->s) == 0);
        return 0;
    }
    if (op < 5) {
        CHECK(orch_store_counters_set(m->s, m->seq, (int64_t)m->payload) == 0);
        return 0;
    }
    if (op < 6) {
        int64_t added;
        CHECK(orch_store_reclaimed_port(m->s, 1, &added) == 0);
        note(m, added);
        return 0;
    }
    if (op < 14)
        return op_admit(m);
    if (op < 38)
        return op_arrive(m);
    if (op < 52)
        return op_dispatch(m);
    if (op < 72)
        return op_report(m);
    if (op < 76)
        return op_back(m);
    if (op < 80)
        return op_unrun(m);
    if (op < 83)
        return op_reopen(m);
    return op_look(m);
}

/* ---- runs -------------------------------------------------------------------------------- */

static void make_job(const char *path)
{
    orch_store *s;
    assert_int_equal(orch_store_open(path, ORCH_STORE_CREATE, &s), 0);
    assert_int_equal(orch_store_job_init(s, "t", "plan", "hash", "t.orch"), 0);
    assert_int_equal(
        orch_store_exec(s, "INSERT INTO domain VALUES (0, 'r', NULL, 0), (1, 'c', 0, 1);"
                           "INSERT INTO call VALUES (0, 'a', 'map', 'f', 0, 0),"
                           " (1, 'x', 'expand', 'f', 0, 1), (2, 'b', 'map', 'f', 1, 1);"
                           "INSERT INTO port VALUES (0, 0, 'v', 'r.v', NULL, 0),"
                           " (1, 0, 'a', 'r.a', 0, 0), (2, 1, 'v', 'c.v', 1, 0),"
                           " (3, 1, 'b', 'c.b', 2, 1);"),
        0);
    orch_store_close(s);
}

/* Runs operations 0 .. nops-1 of seed's sequence on the job at path, then commits (finish:
 * after reporting every grain in flight). kill_at >= 0: the process kills itself before
 * that operation. commits (may be NULL) receives the index of each commit operation, in
 * order, and ncommits their number. 0, or -1 with the failing line in *line. */
static int run_seq(const char *path, uint64_t seed, int nops, bool held, bool finish,
                   int kill_at, int *commits, int *ncommits, uint64_t *hash, int *line)
{
    struct model *m = calloc(1, sizeof *m);
    if (!m)
        return -1;
    m->rng = seed * UINT64_C(0x9e3779b97f4a7c15) | 1;
    m->hash = UINT64_C(0xcbf29ce484222325);
    int rc = orch_store_open(path, 0, &m->s);
    if (rc == 0 && !held)
        orch_store__held_off(m->s);
    if (rc == 0)
        rc = orch_store_begin(m->s);
    if (ncommits)
        *ncommits = 0;
    for (int i = 0; rc >= 0 && i < nops; i++) {
        if (i == kill_at)
            kill(getpid(), SIGKILL);
        if ((rc = step(m)) == 1 && commits)
            commits[(*ncommits)++] = i;
    }
    for (int i; rc >= 0 && finish && (i = grain_in(m, M_FLIGHT)) >= 0;)
        rc = report(m, &m->g[i], false);
    if (rc >= 0)
        rc = orch_store_commit(m->s) == 0 ? 0 : -1;
    if (rc < 0 && !m->failed_line)
        fprintf(stderr, "test_held: %s\n", orch_error_detail());
    orch_store_close(m->s);
    if (hash)
        *hash = m->hash;
    if (line)
        *line = m->failed_line;
    free(m);
    return rc < 0 ? -1 : 0;
}

/* Appends printf output to the malloc'd *buf. */
static void add(char **buf, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    *buf = realloc(*buf, *len + (size_t)n + 1);
    assert_non_null(*buf);
    va_start(ap, fmt);
    vsnprintf(*buf + *len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    *len += (size_t)n;
}

/* Every table of the database at path, every row (SELECT * ORDER BY every column), times
 * as NULL or not, the state of grains in flight left out. malloc'd. */
static char *dump(const char *path)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *tables;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT name FROM sqlite_master WHERE type = 'table' "
                                        "AND name NOT LIKE 'sqlite_%' ORDER BY name",
                                        -1, &tables, NULL),
                     SQLITE_OK);
    char *out = NULL;
    size_t len = 0;
    while (sqlite3_step(tables) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(tables, 0);
        char sql[4096], *cols = NULL;
        size_t ncols = 0, clen = 0;
        snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", t);
        sqlite3_stmt *info;
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &info, NULL), SQLITE_OK);
        while (sqlite3_step(info) == SQLITE_ROW) {
            const char *c = (const char *)sqlite3_column_text(info, 1);
            size_t n = strlen(c);
            bool time = strcmp(c, "at") == 0 || (n > 3 && strcmp(c + n - 3, "_at") == 0);
            bool state = strcmp(t, "grain") == 0 &&
                         (strcmp(c, "phase") == 0 || strcmp(c, "pending") == 0 ||
                          strcmp(c, "ready_seq") == 0 || time);
            add(&cols, &clen, "%s", ncols++ ? ", " : "");
            if (state)
                add(&cols, &clen,
                    "CASE WHEN id IN (SELECT grain_id FROM attempt WHERE outcome IS NULL) "
                    "THEN NULL ELSE %s%s END",
                    c, time ? " IS NULL" : "");
            else
                add(&cols, &clen, time ? "%s IS NULL" : "%s", c);
        }
        sqlite3_finalize(info);
        char order[512] = "";
        for (size_t k = 1; k <= ncols; k++)
            snprintf(order + strlen(order), sizeof order - strlen(order), "%s%zu",
                     k > 1 ? ", " : "", k);
        snprintf(sql, sizeof sql, "SELECT %s FROM %s ORDER BY %s", cols, t, order);
        free(cols);
        sqlite3_stmt *rows;
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &rows, NULL), SQLITE_OK);
        while (sqlite3_step(rows) == SQLITE_ROW) {
            add(&out, &len, "%s", t);
            for (int k = 0; k < sqlite3_column_count(rows); k++) {
                const char *v = (const char *)sqlite3_column_text(rows, k);
                add(&out, &len, "|%s", v ? v : "NULL");
            }
            add(&out, &len, "\n");
        }
        sqlite3_finalize(rows);
    }
    sqlite3_finalize(tables);
    sqlite3_close(db);
    return out;
}

struct fx {
    char dir[512], on[600], off[600];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f || orch_test_mkdtemp(f->dir, sizeof f->dir, "held") < 0)
        return -1;
    snprintf(f->on, sizeof f->on, "%s/on.db", f->dir);
    snprintf(f->off, sizeof f->off, "%s/off.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    orch_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* A fresh job at path (the files of the last one removed). */
static void fresh(const char *path)
{
    char p[700];
    static const char *const ext[] = {"", "-wal", "-shm"};
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s%s", path, ext[k]);
        unlink(p);
    }
    make_job(path);
}

static const uint64_t fixed_seeds[] = {1, 2, 3, 7, 42, 1234, 99991, 0xdeadbeef};

/* The seeds: the fixed list, then a few new ones (printed, to run one again). */
static uint64_t seed_at(size_t i)
{
    size_t nfixed = sizeof fixed_seeds / sizeof *fixed_seeds;
    if (i < nfixed)
        return fixed_seeds[i];
    uint64_t s = (uint64_t)time(NULL) * 2654435761u + i * 40503u + (uint64_t)getpid();
    print_message("test_held: seed %llu\n", (unsigned long long)s);
    return s;
}
#define NSEEDS (sizeof fixed_seeds / sizeof *fixed_seeds + 3)

/* The two databases hold the same rows; else the first row that differs is printed. */
static void same_db(const char *a, const char *b)
{
    char *x = dump(a), *y = dump(b);
    assert_non_null(x);
    assert_non_null(y);
    size_t i = 0, line = 0;
    while (x[i] && x[i] == y[i])
        i++;
    if (x[i] != y[i]) {
        while (i > 0 && x[i - 1] != '\n')
            i--;
        print_error("%s and %s differ first at:\n  %.*s\n  %.*s\n", a, b,
                    (int)strcspn(x + i, "\n"), x + i, (int)strcspn(y + i, "\n"), y + i);
        line = i + 1;
    }
    free(x);
    free(y);
    assert_int_equal(line, 0);
}

/* The cache on and off: the same answers, the same database. */
static void test_on_off(void **state)
{
    struct fx *f = *state;
    for (size_t i = 0; i < NSEEDS; i++) {
        uint64_t seed = seed_at(i), h_on, h_off;
        int line = 0;
        fresh(f->on);
        fresh(f->off);
        assert_int_equal(run_seq(f->on, seed, NOPS, true, true, -1, NULL, NULL, &h_on, &line),
                         0);
        assert_int_equal(
            run_seq(f->off, seed, NOPS, false, true, -1, NULL, NULL, &h_off, &line), 0);
        assert_int_equal(h_on, h_off);
        same_db(f->on, f->off);
    }
}

/* Killed at a random operation with the cache on: what it committed is what the same
 * operations up to its last commit leave with the cache off. */
static void test_kill(void **state)
{
    struct fx *f = *state;
    static int commits[NOPS];
    for (size_t i = 0; i < NSEEDS; i++) {
        uint64_t seed = seed_at(i);
        int ncommits, line;
        fresh(f->off);
        assert_int_equal(
            run_seq(f->off, seed, NOPS, false, false, -1, commits, &ncommits, NULL, &line), 0);
        assert_true(ncommits >= 2);
        uint64_t r = seed * 31 + 17;
        int kill_at = commits[0] + 1 + (int)(r % (uint64_t)(NOPS - commits[0] - 1));
        int last = 0;
        while (last + 1 < ncommits && commits[last + 1] < kill_at)
            last++;
        fresh(f->on);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            _exit(run_seq(f->on, seed, NOPS, true, false, kill_at, NULL, NULL, NULL, &line) < 0
                      ? 2
                      : 3);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        /* The same prefix, cache off, up to and with the last commit before the kill. */
        fresh(f->off);
        assert_int_equal(
            run_seq(f->off, seed, commits[last] + 1, false, false, -1, NULL, NULL, NULL, &line),
            0);
        same_db(f->on, f->off);
    }
}

/* Whether sql names table (a column such as grain_id is not the table grain). */
static bool names_table(const char *sql, const char *table)
{
    size_t n = strlen(table);
    for (const char *p = sql; (p = strstr(p, table)) != NULL; p += n)
        if (p > sql && p[-1] == ' ' && p[n] != '_' && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

/* Every statement that names a table that held rows change declares the parts of it:
 * an undeclared one would run with rows held that it reads or overwrites. */
static void test_declarations(void **state)
{
    (void)state;
    static const struct {
        const char *table;
        unsigned parts;
    } tables[] = {
        {"entity", PART_ENTITY},
        {"grain", PART_GRAIN | PART_PHASE},
        {"attempt", PART_ATTEMPT | PART_ENDED},
        {"item", PART_ITEM},
        {"root", PART_ROOT},
        {"reclaimed_span", PART_SPAN},
    };
    const char *sql;
    unsigned parts, via;
    int n = 0;
    for (int slot = 0; orch_store__fact_declared(slot, &sql, &parts, &via); slot++, n++) {
        for (size_t t = 0; t < sizeof tables / sizeof *tables; t++) {
            if (names_table(sql, tables[t].table) && !(parts & tables[t].parts))
                fail_msg("statement %d names %s and declares none of it: %s", slot,
                         tables[t].table, sql);
        }
        /* what a statement reads through the cache is a kind that changes what it reads */
        if (via & ~HELD_KINDS_OF(parts))
            fail_msg("statement %d reads through the cache kinds it does not read: %s", slot,
                     sql);
    }
    assert_true(n > 80);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_on_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill, setup, teardown),
        cmocka_unit_test(test_declarations),
    };
    /* The store's own checks on, as in every test of the store (tests/meson.build). */
    orch_store_configure(&(struct orch_store_config){.checks = true});
    return cmocka_run_group_tests(tests, NULL, NULL);
}
