/* test_facts.c — unit tests of the job's facts API (storage/orch_facts.h) on a real
 * state.db: the guarded transitions of a grain (the acceptance rule of DESIGN §4 in
 * SQL), facts published once, the take-backs of `orch retry`, attempts and recovery. */
#define _GNU_SOURCE /* nftw, in testutil.h */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "orch_facts.h"
#include "orch_store.h"
#include "store_int.h" /* orch_store__db_as_is: what the store holds back, unwritten */
#include "testutil.h"

struct fx {
    char dir[512];
    orch_store *s;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(orch_test_mkdtemp(f->dir, sizeof f->dir, "facts"), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/state.db", f->dir);
    assert_int_equal(orch_store_open(path, ORCH_STORE_CREATE, &f->s), 0);
    assert_int_equal(orch_store_job_init(f->s, "t", "plan", "hash", "t.orch"), 0);
    /* pdf -> page; render expands pdf into page, ocr maps page.image to page.text */
    assert_int_equal(
        orch_store_exec(f->s,
                        "INSERT INTO domain VALUES (0, 'pdf', NULL, 0), (1, 'page', 0, 1);"
                        "INSERT INTO call VALUES (0, 'render', 'expand', 'r', 0, 1),"
                        " (1, 'ocr', 'map', 'o', 1, 1);"
                        "INSERT INTO port VALUES (0, 0, 'path', 'pdf.path', NULL, 0),"
                        " (1, 1, 'image', 'page.image', 0, 0),"
                        " (2, 1, 'text', 'page.text', 1, 1);"),
        0);
    assert_int_equal(orch_store_begin(f->s), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    orch_store_close(f->s);
    orch_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* A root "a.pdf" with two pages, and the grains of render (on the root) and ocr (page 0). */
static void hierarchy(orch_store *s, int64_t *root, int64_t kids[2])
{
    assert_int_equal(orch_store_entity_put(s, 0, 0, 0, "a.pdf", root), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(orch_store_entity_put(s, 1, *root, i, NULL, &kids[i]), 0);
}

static void test_entities(void **state)
{
    struct fx *f = *state;
    int64_t root, kids[2], parent = -1, n = -1;
    hierarchy(f->s, &root, kids);
    assert_int_equal(orch_store_entity_parent(f->s, kids[1], &parent), 0);
    assert_int_equal(parent, root);
    assert_int_equal(orch_store_entity_parent(f->s, root, &parent), 0);
    assert_int_equal(parent, 0);
    assert_int_equal(orch_store_entity_parent(f->s, 9999, &parent), ORCH_ECORRUPT);
    int64_t *ids;
    size_t nids;
    assert_int_equal(orch_store_children(f->s, root, 1, &ids, &nids), 0);
    assert_int_equal(nids, 2);
    assert_int_equal(ids[0], kids[0]);
    assert_int_equal(ids[1], kids[1]);
    free(ids);
    assert_int_equal(orch_store_children(f->s, kids[0], 1, &ids, &nids), 0);
    assert_int_equal(nids, 0);
    assert_null(ids);
    assert_int_equal(orch_store_children_count(f->s, root, 1, &n), 0);
    assert_int_equal(n, 2);
}

static void test_items_once(void **state)
{
    struct fx *f = *state;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    enum orch_item_state st;
    uint64_t payload = 0;
    assert_int_equal(orch_store_item_get(f->s, 1, kids[0], &st, &payload), 0);
    assert_int_equal(orch_store_item_put(f->s, 1, kids[0], ORCH_ITEM_PRESENT, 42, 7), 0);
    assert_int_equal(orch_store_item_put(f->s, 1, kids[1], ORCH_ITEM_FAILED, 0, -1), 0);
    assert_int_equal(orch_store_item_get(f->s, 1, kids[0], &st, &payload), 1);
    assert_int_equal(st, ORCH_ITEM_PRESENT);
    assert_int_equal(payload, 42);
    int64_t terminal, bad;
    assert_int_equal(orch_store_child_items(f->s, 1, root, 1, &terminal, &bad), 0);
    assert_int_equal(terminal, 2);
    assert_int_equal(bad, 1);
    /* retry takes back Failed and Suppressed items only */
    bool taken;
    assert_int_equal(orch_store_item_take_back(f->s, 1, kids[0], &taken), 0);
    assert_false(taken);
    assert_int_equal(orch_store_item_take_back(f->s, 1, kids[1], &taken), 0);
    assert_true(taken);
    assert_int_equal(orch_store_item_get(f->s, 1, kids[1], &st, NULL), 0);
    /* a terminal fact is published once: a second put breaks the table's key when the
     * items are written (held until a statement reads items, or the commit) */
    assert_int_equal(orch_store_item_put(f->s, 1, kids[0], ORCH_ITEM_DROPPED, 0, -1), 0);
    assert_int_equal(orch_store_commit(f->s), ORCH_ECONSTRAINT);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_item_get(f->s, 1, kids[0], &st, NULL), 0); /* rolled back */
}

static void test_expansions(void **state)
{
    struct fx *f = *state;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    enum orch_expansion_state st;
    assert_int_equal(orch_store_expansion_get(f->s, 0, root, &st), 0);
    assert_int_equal(orch_store_expansion_put(f->s, 0, root, ORCH_EXPANSION_FAILED, 0), 0);
    assert_int_equal(orch_store_expansion_get(f->s, 0, root, &st), 1);
    assert_int_equal(st, ORCH_EXPANSION_FAILED);
    assert_int_equal(orch_store_expansion_take_back(f->s, 0, root), 0);
    assert_int_equal(orch_store_expansion_get(f->s, 0, root, &st), 0);
    assert_int_equal(orch_store_expansion_put(f->s, 0, root, ORCH_EXPANSION_SUCCEEDED, 2), 0);
    assert_int_equal(orch_store_expansion_take_back(f->s, 0, root), 0); /* not failed: stays */
    assert_int_equal(orch_store_expansion_get(f->s, 0, root, &st), 1);
    assert_int_equal(st, ORCH_EXPANSION_SUCCEEDED);
}

/* WAITING → READY → IN_FLIGHT → SEALED, each step guarded by phase and generation. Going in
 * flight writes nothing (the attempt row says it): ORCH_STORE_CHECKS is what catches a
 * dispatch of a grain that is not READY at that generation. */
static void test_grain_transitions(void **state)
{
    struct fx *f = *state;
    f->s->checks = true;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    assert_int_equal(orch_store_grain_create(f->s, 1, kids[0], root, 1), 0);
    struct orch_grain_row g;
    assert_int_equal(orch_store_grain_get(f->s, 1, kids[0], false, &g), 0);
    assert_int_equal(g.phase, ORCH_PHASE_WAITING);
    assert_int_equal(g.pending, 1);
    assert_int_equal(g.parent, root);
    assert_int_equal(g.outcome, -1);
    assert_int_equal(orch_store_grain_get(f->s, 1, kids[1], false, &g), ORCH_ECORRUPT);
    assert_int_equal(orch_store_grain_get(f->s, 1, kids[0], false, &g), 0);

    bool done;
    /* not READY yet: a dispatch is a bug, caught */
    assert_int_equal(orch_store_grain_dispatch(f->s, g.id, 0, &done), ORCH_ECORRUPT);
    assert_false(done);
    assert_int_equal(orch_store_grain_ready(f->s, &g, 7), 0);
    /* a wrong generation: caught too */
    assert_int_equal(orch_store_grain_dispatch(f->s, g.id, 1, &done), ORCH_ECORRUPT);
    assert_false(done);
    assert_int_equal(orch_store_grain_dispatch(f->s, g.id, 0, &done), 0);
    assert_true(done);
    /* made READY and dispatched in one transaction: that READY is never written (its seal
     * or requeue writes its ready_seq), so the row still reads WAITING */
    assert_int_equal(orch_store_grain_by_id(f->s, g.id, &g), 0);
    assert_int_equal(g.phase, ORCH_PHASE_WAITING);
    /* an attempt failure puts it back at generation 1 */
    assert_int_equal(orch_store_grain_requeue(f->s, g.id, 0, 8, &done), 0);
    assert_true(done);
    assert_int_equal(orch_store_grain_requeue(f->s, g.id, 0, 9, &done), 0);
    assert_false(done); /* no longer at that generation */
    assert_int_equal(orch_store_grain_by_id(f->s, g.id, &g), 0);
    assert_int_equal(g.phase, ORCH_PHASE_READY);
    assert_int_equal(g.generation, 1);
    assert_int_equal(g.seq, 8);
    assert_int_equal(orch_store_grain_dispatch(f->s, g.id, 1, &done), 0);
    assert_true(done);
    /* a stale report (generation 0) seals nothing; the current one seals */
    assert_int_equal(orch_store_grain_seal(f->s, g.id, 1, kids[0], ORCH_OUTCOME_OK, true, 0, &done), 0);
    assert_false(done);
    assert_int_equal(orch_store_grain_seal(f->s, g.id, 1, kids[0], ORCH_OUTCOME_OK, true, 1, &done), 0);
    assert_true(done);
    assert_int_equal(orch_store_grain_seal(f->s, g.id, 1, kids[0], ORCH_OUTCOME_FAILED, true, 1, &done), 0);
    assert_false(done); /* a sealed grain is never sealed again */
    assert_int_equal(orch_store_grain_by_id(f->s, g.id, &g), 0);
    assert_int_equal(g.phase, ORCH_PHASE_SEALED);
    assert_int_equal(g.outcome, ORCH_OUTCOME_OK);
    /* retry re-opens it at the next generation */
    assert_int_equal(orch_store_grain_reopen(f->s, g.id, &done), 0);
    assert_true(done);
    assert_int_equal(orch_store_grain_by_id(f->s, g.id, &g), 0);
    assert_int_equal(g.phase, ORCH_PHASE_WAITING);
    assert_int_equal(g.generation, 2);
    assert_int_equal(g.outcome, -1);
    /* sealed without running: only from WAITING or READY */
    assert_int_equal(orch_store_grain_seal(f->s, g.id, 1, kids[0], ORCH_OUTCOME_SUPPRESSED, false, 0, &done),
                     0);
    assert_true(done);
}

/* The outcome of attempt `row`, as stored ("" for NULL). */
static const char *outcome_of(orch_store *s, int64_t row)
{
    static char buf[32];
    sqlite3_stmt *st;
    assert_int_equal(orch_store_prepare(s, "SELECT coalesce(outcome, '') FROM attempt "
                                           "WHERE id = ?", &st), 0);
    assert_int_equal(sqlite3_bind_int64(st, 1, row), SQLITE_OK);
    assert_int_equal(orch_store_step(s, st), 1);
    snprintf(buf, sizeof buf, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_reset(st);
    return buf;
}

/* The grain's row as stored, read on the connection as it is (nothing held is written),
 * or NULL while it has none:
 * "phase ready_seq pending", ready_seq -1 for NULL. */
static const char *raw_row(orch_store *s, int64_t grain)
{
    static char buf[64];
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(orch_store__db_as_is(s),
                                        "SELECT phase, coalesce(ready_seq, -1), pending, "
                                        "ready_at IS NOT NULL FROM grain WHERE id = ?",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_bind_int64(st, 1, grain), SQLITE_OK);
    bool found = sqlite3_step(st) == SQLITE_ROW;
    if (found)
        snprintf(buf, sizeof buf, "%s %lld %lld%s", (const char *)sqlite3_column_text(st, 0),
                 (long long)sqlite3_column_int64(st, 1), (long long)sqlite3_column_int64(st, 2),
                 sqlite3_column_int(st, 3) ? " at" : "");
    sqlite3_finalize(st);
    return found ? buf : NULL;
}

/* A READY is held until the commit: look-ups see it, a dispatch in the same transaction
 * leaves it held (it is written READY, as every grain in flight reads), a seal forgets
 * it, a rollback loses it. */
static void test_ready_held(void **state)
{
    struct fx *f = *state;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    struct orch_grain_row g[2], r;
    bool done;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(orch_store_grain_create(f->s, 1, kids[i], root, 1), 0);
        assert_int_equal(orch_store_grain_get(f->s, 1, kids[i], false, &g[i]), 0);
    }
    assert_int_equal(orch_store_commit(f->s), 0); /* the grains are written */
    assert_int_equal(orch_store_begin(f->s), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(orch_store_grain_ready(f->s, &g[i], 30 + i), 0);
    assert_string_equal(raw_row(f->s, g[0].id), "waiting -1 1"); /* READY not written yet */
    assert_int_equal(orch_store_grain_get(f->s, 1, kids[0], false, &r), 0);
    assert_int_equal(r.phase, ORCH_PHASE_READY);
    assert_int_equal(r.seq, 30);
    assert_int_equal(r.pending, 0);
    assert_int_equal(orch_store_grain_by_id(f->s, g[1].id, &r), 0);
    assert_int_equal(r.phase, ORCH_PHASE_READY);
    /* a wrong generation is caught; a dispatch writes nothing, and its READY never will
     * be: the seal writes its ready_seq */
    f->s->checks = true;
    assert_int_equal(orch_store_grain_dispatch(f->s, g[0].id, 1, &done), ORCH_ECORRUPT);
    assert_int_equal(orch_store_grain_dispatch(f->s, g[0].id, 0, &done), 0);
    assert_true(done);
    /* any other statement writes what is held first */
    assert_int_equal(orch_store_exec(f->s, "SELECT 1"), 0);
    assert_string_equal(raw_row(f->s, g[0].id), "waiting -1 1");
    assert_string_equal(raw_row(f->s, g[1].id), "ready 31 0 at");
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    /* a stale report keeps what the grain had; the right one writes it */
    assert_int_equal(orch_store_grain_seal(f->s, g[0].id, 1, kids[0], ORCH_OUTCOME_OK, true, 1,
                                           &done),
                     0);
    assert_false(done);
    assert_int_equal(orch_store_grain_seal(f->s, g[0].id, 1, kids[0], ORCH_OUTCOME_OK, true, 0,
                                           &done),
                     0);
    assert_true(done);
    assert_string_equal(raw_row(f->s, g[0].id), "sealed 30 0 at");
    assert_int_equal(orch_store_commit(f->s), 0);

    /* sealed before the commit: the held READY is never written by itself; the seal
     * writes its ready_seq and ready_at, as the READY written at once would have left */
    int64_t third;
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_entity_put(f->s, 1, root, 2, NULL, &third), 0);
    assert_int_equal(orch_store_grain_create(f->s, 1, third, root, 1), 0);
    assert_int_equal(orch_store_grain_get(f->s, 1, third, false, &r), 0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_grain_ready(f->s, &r, 40), 0);
    assert_int_equal(orch_store_grain_seal(f->s, r.id, 1, third, ORCH_OUTCOME_SUPPRESSED, false,
                                           0, &done),
                     0);
    assert_true(done);
    assert_int_equal(orch_store_grain_dispatch(f->s, r.id, 0, &done), 0);
    assert_false(done); /* its queue entry is stale */
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_string_equal(raw_row(f->s, r.id), "sealed 40 0 at");

    /* rolled back: neither the grain nor its READY, and no look-up finds it */
    assert_int_equal(orch_store_begin(f->s), 0);
    int64_t fourth;
    assert_int_equal(orch_store_entity_put(f->s, 1, root, 3, NULL, &fourth), 0);
    assert_int_equal(orch_store_grain_create(f->s, 1, fourth, root, 2), 0);
    assert_int_equal(orch_store_grain_get(f->s, 1, fourth, false, &r), 0);
    assert_int_equal(r.pending, 2);
    assert_int_equal(orch_store_grain_set_pending(f->s, &r, 1), 0);
    assert_int_equal(orch_store_grain_get(f->s, 1, fourth, false, &r), 0);
    assert_int_equal(r.pending, 1); /* the count kept follows the row's */
    assert_int_equal(orch_store_grain_ready(f->s, &r, 50), 0);
    assert_int_equal(orch_store_rollback(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_grain_get(f->s, 1, fourth, false, &r), ORCH_ECORRUPT);
}

/* New grains are held and written together, READY in their INSERT when they became
 * READY meanwhile; look-ups find them; ids follow the table's, whoever inserted last. */
static void test_grains_held(void **state)
{
    struct fx *f = *state;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    struct orch_grain_row g[2], r;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(orch_store_grain_create(f->s, 1, kids[i], root, 2), 0);
        assert_int_equal(orch_store_grain_get(f->s, 1, kids[i], false, &g[i]), 0);
        assert_int_equal(g[i].pending, 2);
        assert_int_equal(g[i].parent, root);
    }
    assert_int_equal(g[1].id, g[0].id + 1);
    assert_null(raw_row(f->s, g[0].id)); /* held */
    assert_int_equal(orch_store_grain_set_pending(f->s, &g[0], 1), 0);
    assert_int_equal(orch_store_grain_ready(f->s, &g[1], 61), 0);
    assert_int_equal(orch_store_grain_get(f->s, 1, kids[0], false, &r), 0);
    assert_int_equal(r.pending, 1);
    /* a look-up of the READY one misses the table: written first, READY in the row */
    assert_int_equal(orch_store_grain_get(f->s, 1, kids[1], false, &r), 0);
    assert_int_equal(r.phase, ORCH_PHASE_READY);
    assert_int_equal(r.seq, 61);
    assert_string_equal(raw_row(f->s, g[0].id), "waiting -1 1");
    assert_string_equal(raw_row(f->s, g[1].id), "ready 61 0 at");
    bool done;
    assert_int_equal(orch_store_grain_dispatch(f->s, g[1].id, 0, &done), 0);
    assert_true(done);

    /* a grain another statement inserted: the next held one comes after it */
    int64_t third, fourth, x;
    assert_int_equal(orch_store_entity_put(f->s, 1, root, 2, NULL, &third), 0);
    assert_int_equal(orch_store_entity_put(f->s, 1, root, 3, NULL, &fourth), 0);
    assert_int_equal(orch_store_exec(f->s, "INSERT INTO grain (call_id, entity_id, phase) "
                                           "SELECT 0, id, 'waiting' FROM entity "
                                           "WHERE parent_id IS NULL"),
                     0);
    assert_int_equal(orch_store_grain_get(f->s, 0, root, true, &r), 0);
    x = r.id;
    assert_int_equal(orch_store_grain_create(f->s, 1, third, root, 1), 0);
    assert_int_equal(orch_store_grain_get(f->s, 1, third, false, &r), 0);
    assert_int_equal(r.id, x + 1);
    assert_int_equal(orch_store_grain_ready(f->s, &r, 62), 0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_string_equal(raw_row(f->s, x + 1), "ready 62 0 at");

    /* rolled back: the held grain is gone, and its id is taken again */
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_grain_create(f->s, 1, fourth, root, 1), 0);
    assert_int_equal(orch_store_grain_get(f->s, 1, fourth, false, &r), 0);
    assert_int_equal(r.id, x + 2);
    assert_int_equal(orch_store_rollback(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_grain_get(f->s, 1, fourth, false, &r), ORCH_ECORRUPT);
    assert_int_equal(orch_store_grain_create(f->s, 1, fourth, root, 1), 0);
    assert_int_equal(orch_store_grain_get(f->s, 1, fourth, false, &r), 0);
    assert_int_equal(r.id, x + 2);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_non_null(raw_row(f->s, x + 2));
    assert_int_equal(orch_store_begin(f->s), 0);
}

static const char *text_of(orch_store *s, const char *sql);

/* Entities are held until a statement could see them: ids consecutive, a child put
 * between two roots is held too (its key made from its parent's, ids in order), a look-up
 * sees them, more than are held at once pass the bound, the commit
 * writes every one with its key, a rollback forgets them and their ids are taken again.
 * With the foreign keys on (ORCH_STORE_CHECKS), the grains, items and root rows that
 * name held entities are written after them. */
static void test_held_roots(void **state)
{
    struct fx *f = *state;
    f->s->checks = true;
    int64_t r0, r1, kid, r2, parent = -1;
    assert_int_equal(orch_store_entity_put(f->s, 0, 0, 0, "a.pdf", &r0), 0);
    assert_int_equal(orch_store_entity_put(f->s, 0, 0, 1, "b.pdf", &r1), 0);
    assert_int_equal(r1, r0 + 1);
    assert_int_equal(orch_store_grain_create(f->s, 0, r1, 0, 1), 0);
    assert_int_equal(orch_store_item_put(f->s, 0, r1, ORCH_ITEM_PRESENT, 77, 5), 0);
    /* a batch's attempts write the held grains first, and so their entities before them */
    struct orch_grain_row g;
    int64_t a;
    assert_int_equal(orch_store_grain_get(f->s, 0, r1, true, &g), 0);
    const struct orch_grain_at at = {g.id, 0};
    assert_int_equal(orch_store_attempts_begin(f->s, &at, 1, 7, "h", NULL, 1, &a), 0);
    assert_int_equal(orch_store_entity_put(f->s, 1, r1, 0, NULL, &kid), 0);
    assert_int_equal(kid, r1 + 1);
    assert_string_equal(text_of(f->s, "SELECT group_concat(key, ' ') FROM "
                                      "(SELECT key FROM entity ORDER BY id)"),
                        "a.pdf b.pdf"); /* the child is held */
    assert_int_equal(orch_store_flush(f->s), 0);
    assert_string_equal(text_of(f->s, "SELECT group_concat(key, ' ') FROM "
                                      "(SELECT key FROM entity ORDER BY id)"),
                        "a.pdf b.pdf b.pdf/0");
    assert_int_equal(orch_store_entity_put(f->s, 0, 0, 2, "c.pdf", &r2), 0);
    assert_int_equal(r2, kid + 1);
    assert_int_equal(orch_store_entity_parent(f->s, r2, &parent), 0); /* writes it */
    assert_int_equal(parent, 0);
    enum { N = 20000 }; /* past the bound (16,384) */
    int64_t first = 0, e = 0;
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof key, "r%d", i);
        assert_int_equal(orch_store_entity_put(f->s, 0, 0, 3 + i, key, &e), 0);
        if (i == 0)
            first = e;
        assert_int_equal(e, first + i);
        assert_int_equal(orch_store_grain_create(f->s, 0, e, 0, 1), 0);
    }
    assert_int_equal(first, r2 + 1);
    assert_int_equal(orch_store_commit(f->s), 0);
    char want[64];
    snprintf(want, sizeof want, "%d %d", N + 4, N);
    assert_string_equal(text_of(f->s, "SELECT count(*) || ' ' || "
                                      "sum(key = 'r' || (ordinal - 3) AND parent_id IS NULL) "
                                      "FROM entity"),
                        want);
    /* rolled back: forgotten, and the next root takes the same id again */
    assert_int_equal(orch_store_begin(f->s), 0);
    int64_t gone, again;
    assert_int_equal(orch_store_entity_put(f->s, 0, 0, N + 3, "gone", &gone), 0);
    assert_int_equal(gone, e + 1);
    assert_int_equal(orch_store_rollback(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_entity_put(f->s, 0, 0, N + 3, "again", &again), 0);
    assert_int_equal(again, gone);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_string_equal(text_of(f->s, "SELECT count(*) FROM entity WHERE key = 'gone'"), "0");
    assert_int_equal(orch_store_begin(f->s), 0);
}

/* Children are held like roots, each with the key the INSERT of one would make: from a
 * held parent's key, or from a written one's (looked up); a rollback forgets what was
 * learnt of the entities it takes back, whose ids the next ones take again: their parents
 * and keys are theirs, not those of the entities rolled back. */
static void test_held_children(void **state)
{
    struct fx *f = *state;
    f->s->checks = true;
    int64_t a, b, a0, b7, a1, c, c0, d, d0, p = -1;
    assert_int_equal(orch_store_entity_put(f->s, 0, 0, 0, "a", &a), 0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_entity_put(f->s, 0, 0, 1, "b", &b), 0);
    assert_int_equal(orch_store_entity_put(f->s, 1, a, 0, NULL, &a0), 0);
    assert_int_equal(orch_store_entity_put(f->s, 1, b, 7, NULL, &b7), 0);
    assert_int_equal(orch_store_entity_put(f->s, 1, a, 1, NULL, &a1), 0);
    assert_true(b == a + 1 && a0 == b + 1 && b7 == a0 + 1 && a1 == b7 + 1);
    assert_int_equal(orch_store_entity_parent(f->s, b7, &p), 0);
    assert_int_equal(p, b);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_string_equal(text_of(f->s, "SELECT group_concat(key || ':' || "
                                      "coalesce(parent_id - 1, '-'), ' ') "
                                      "FROM (SELECT * FROM entity ORDER BY id)"),
                        "a:- b:- a/0:0 b/7:1 a/1:0");
    /* a parent written, its child's key looked up; then both rolled back */
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_entity_put(f->s, 0, 0, 2, "c", &c), 0);
    assert_int_equal(orch_store_flush(f->s), 0);
    assert_int_equal(orch_store_entity_put(f->s, 1, c, 0, NULL, &c0), 0);
    assert_int_equal(orch_store_entity_parent(f->s, c0, &p), 0);
    assert_int_equal(p, c);
    assert_int_equal(orch_store_rollback(f->s), 0);
    /* the same ids again, other entities: root d's child finds d's key, not c's */
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_entity_put(f->s, 0, 0, 2, "d", &d), 0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_entity_put(f->s, 1, d, 0, NULL, &d0), 0);
    assert_true(d == c && d0 == c0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_string_equal(text_of(f->s, "SELECT key FROM entity WHERE id = (SELECT max(id) "
                                      "FROM entity)"),
                        "d/0");
    /* a child of a, its parent asked, rolled back; a child of d takes its id */
    int64_t x, y;
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_entity_put(f->s, 1, a, 3, NULL, &x), 0);
    assert_int_equal(orch_store_entity_parent(f->s, x, &p), 0);
    assert_int_equal(p, a);
    assert_int_equal(orch_store_rollback(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_entity_put(f->s, 1, d, 1, NULL, &y), 0);
    assert_int_equal(y, x);
    f->s->checks = false; /* answered from what is kept, not from the row */
    assert_int_equal(orch_store_entity_parent(f->s, y, &p), 0);
    assert_int_equal(p, d);
}

/* Items are answered from what the store keeps of them: never one taken back (`orch
 * retry`), nor one a rollback took back, whose (port, entity) may be put again otherwise. */
static void test_items_kept(void **state)
{
    struct fx *f = *state;
    f->s->checks = false; /* answered from what is kept, not compared with the row */
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    enum orch_item_state st;
    uint64_t id = 0;
    bool taken;
    assert_int_equal(orch_store_item_put(f->s, 1, kids[0], ORCH_ITEM_FAILED, 0, -1), 0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_item_get(f->s, 1, kids[0], &st, &id), 1);
    assert_int_equal(st, ORCH_ITEM_FAILED);
    assert_int_equal(orch_store_item_take_back(f->s, 1, kids[0], &taken), 0);
    assert_true(taken);
    assert_int_equal(orch_store_item_get(f->s, 1, kids[0], &st, &id), 0);
    assert_int_equal(orch_store_item_put(f->s, 1, kids[0], ORCH_ITEM_PRESENT, 41, 3), 0);
    assert_int_equal(orch_store_item_get(f->s, 1, kids[0], &st, &id), 1);
    assert_true(st == ORCH_ITEM_PRESENT && id == 41);
    assert_int_equal(orch_store_commit(f->s), 0);
    /* put, read, rolled back: gone; put again otherwise */
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_item_put(f->s, 1, kids[1], ORCH_ITEM_PRESENT, 42, 3), 0);
    assert_int_equal(orch_store_item_get(f->s, 1, kids[1], &st, &id), 1);
    assert_int_equal(orch_store_rollback(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_item_get(f->s, 1, kids[1], &st, &id), 0);
    assert_int_equal(orch_store_item_put(f->s, 1, kids[1], ORCH_ITEM_DROPPED, 0, -1), 0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_item_get(f->s, 1, kids[1], &st, &id), 1);
    assert_int_equal(st, ORCH_ITEM_DROPPED);
}

/* More grains and items in one transaction than are held at once: written as they pass
 * the bound, every one there after the commit, READY where it was made READY. */
static void test_many_held(void **state)
{
    struct fx *f = *state;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    enum { N = 40000 }; /* past the bound (16,384) twice */
    int64_t first = 0;
    for (int i = 0; i < N; i++) {
        int64_t e;
        struct orch_grain_row g;
        assert_int_equal(orch_store_entity_put(f->s, 1, root, 2 + i, NULL, &e), 0);
        assert_int_equal(orch_store_grain_create(f->s, 1, e, root, 1), 0);
        assert_int_equal(orch_store_item_put(f->s, 1, e, ORCH_ITEM_PRESENT, 1000 + (uint64_t)i,
                                             3),
                         0);
        assert_int_equal(orch_store_grain_get(f->s, 1, e, false, &g), 0);
        if (i == 0)
            first = g.id;
        assert_int_equal(g.id, first + i);
        if (i % 3 == 0)
            assert_int_equal(orch_store_grain_ready(f->s, &g, 100000 + i), 0);
    }
    assert_int_equal(orch_store_commit(f->s), 0);
    sqlite3_stmt *st;
    assert_int_equal(orch_store_prepare(f->s, "SELECT count(*), min(id), max(id), "
                                              "sum(phase = 'ready' AND ready_seq = 100000 + "
                                              "id - ?1 AND (id - ?1) % 3 = 0), "
                                              "sum(phase = 'waiting' AND pending = 1) "
                                              "FROM grain WHERE call_id = 1",
                                        &st),
                     0);
    assert_int_equal(sqlite3_bind_int64(st, 1, first), SQLITE_OK);
    assert_int_equal(orch_store_step(f->s, st), 1);
    assert_int_equal(sqlite3_column_int64(st, 0), N);
    assert_int_equal(sqlite3_column_int64(st, 1), first);
    assert_int_equal(sqlite3_column_int64(st, 2), first + N - 1);
    assert_int_equal(sqlite3_column_int64(st, 3), (N + 2) / 3);
    assert_int_equal(sqlite3_column_int64(st, 4), N - (N + 2) / 3);
    sqlite3_reset(st);
    assert_int_equal(orch_store_prepare(f->s, "SELECT count(*), sum(payload_id - 1000 = "
                                              "(SELECT ordinal - 2 FROM entity "
                                              "WHERE id = entity_id)) FROM item "
                                              "WHERE port_id = 1",
                                        &st),
                     0);
    assert_int_equal(orch_store_step(f->s, st), 1);
    assert_int_equal(sqlite3_column_int64(st, 0), N);
    assert_int_equal(sqlite3_column_int64(st, 1), N);
    sqlite3_reset(st);
    assert_int_equal(orch_store_begin(f->s), 0);
}

/* state.db full in the middle of a transaction: SQLite may roll the whole transaction
 * back by itself; whatever it did, no later statement of the turn commits on its own, and
 * after the rollback nothing of the transaction is there. */
static void test_full_stops_the_transaction(void **state)
{
    struct fx *f = *state;
    assert_int_equal(orch_store_commit(f->s), 0); /* the fixture's plan rows stay */
    int64_t pages;
    assert_int_equal(orch_store__pragma_int(f->s, "page_count", &pages), 0);
    assert_int_equal(orch_store_set_max_pages(f->s, pages + 2), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    int rc = 0;
    char key[600];
    int64_t e;
    for (int i = 0; i < 100000 && rc == 0; i++) {
        snprintf(key, sizeof key, "%0500d", i); /* long keys fill pages fast */
        rc = orch_store_entity_put(f->s, 0, 0, i, key, &e);
    }
    assert_int_equal(rc, -ENOSPC);
    /* a small statement after the error fails too, rather than committing alone */
    assert_int_equal(orch_store_item_put(f->s, 0, 1, ORCH_ITEM_FAILED, 0, -1), 0); /* held */
    assert_int_not_equal(orch_store_entity_put(f->s, 0, 0, 999999, "x", &e), 0);
    assert_int_equal(orch_store_rollback(f->s), 0);
    assert_int_equal(orch_store_set_max_pages(f->s, 1000000), 0);
    sqlite3_stmt *st;
    assert_int_equal(orch_store_prepare(f->s, "SELECT count(*) FROM entity", &st), 0);
    assert_int_equal(orch_store_step(f->s, st), 1);
    assert_int_equal(sqlite3_column_int64(st, 0), 0);
    sqlite3_reset(st);
    assert_int_equal(orch_store_begin(f->s), 0);
}

/* A batch's attempt rows, begun together: consecutive, in the order given, past the
 * sizes of one statement (64) and in their remainders. */
static void test_attempts_of_a_batch(void **state)
{
    struct fx *f = *state;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    assert_int_equal(orch_store_grain_create(f->s, 1, kids[0], root, 1), 0);
    struct orch_grain_row g;
    assert_int_equal(orch_store_grain_get(f->s, 1, kids[0], false, &g), 0);
    int64_t one, first;
    assert_int_equal(orch_store_attempts_begin(f->s, &(struct orch_grain_at){g.id, 0}, 1, 1, "h", NULL, 1, &one), 0);
    enum { N = 64 + 32 + 4 + 1 };
    struct orch_grain_at at[N];
    for (int i = 0; i < N; i++) /* any grain ids: the rows take them as given */
        at[i] = (struct orch_grain_at){g.id, (uint32_t)i};
    assert_int_equal(orch_store_attempts_begin(f->s, at, N, 77, "host", "9.1", 2, &first), 0);
    assert_int_equal(first, one + 1);
    sqlite3_stmt *st;
    assert_int_equal(orch_store_prepare(f->s, "SELECT count(*), min(id), max(id), "
                                              "sum(generation = id - ?1), "
                                              "sum(worker_pid = 77 AND host = 'host' AND "
                                              "slurm_job = '9.1' AND batch = 2 AND "
                                              "outcome IS NULL) FROM attempt WHERE id >= ?1",
                                        &st),
                     0);
    assert_int_equal(sqlite3_bind_int64(st, 1, first), SQLITE_OK);
    assert_int_equal(orch_store_step(f->s, st), 1);
    assert_int_equal(sqlite3_column_int64(st, 0), N);
    assert_int_equal(sqlite3_column_int64(st, 1), first);
    assert_int_equal(sqlite3_column_int64(st, 2), first + N - 1);
    assert_int_equal(sqlite3_column_int64(st, 3), N); /* row first + i has generation i */
    assert_int_equal(sqlite3_column_int64(st, 4), N);
    sqlite3_reset(st);
}

static int collect_ready(void *ctx, const struct orch_grain_row *g)
{
    struct orch_grain_row *out = ctx;
    out[out[0].call++ + 1] = *g;
    return 0;
}

/* The text of the first column of the first row of sql, read as it stands ("" for none). */
static const char *text_of(orch_store *s, const char *sql)
{
    static char buf[64];
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(orch_store__db_as_is(s), sql, -1, &st, NULL), SQLITE_OK);
    buf[0] = 0;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(buf, sizeof buf, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return buf;
}

/* A grain in flight is one with an open attempt: its row reads READY, the `grains` and
 * `progress` views say in_flight, a barrier leaves it alone. A READY grain that a barrier
 * seals while queued makes its queue entry stale: the dispatch of it takes nothing, once;
 * a WAITING grain sealed so had no entry. */
static void test_in_flight_is_an_open_attempt(void **state)
{
    struct fx *f = *state;
    f->s->checks = true;
    int64_t root, kids[3];
    hierarchy(f->s, &root, kids);
    assert_int_equal(orch_store_entity_put(f->s, 1, root, 2, NULL, &kids[2]), 0);
    struct orch_grain_row g[3];
    bool done;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(orch_store_grain_create(f->s, 1, kids[i], root, 1), 0);
        assert_int_equal(orch_store_grain_get(f->s, 1, kids[i], false, &g[i]), 0);
        if (i < 2)
            assert_int_equal(orch_store_grain_ready(f->s, &g[i], 10 + i), 0);
    }
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_grain_dispatch(f->s, g[0].id, 0, &done), 0);
    assert_true(done);
    int64_t a0;
    assert_int_equal(orch_store_attempts_begin(f->s, &(struct orch_grain_at){g[0].id, 0}, 1, 7,
                                               "h", NULL, 1, &a0),
                     0);
    assert_int_equal(orch_store_commit(f->s), 0);
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT phase FROM grain WHERE id = %lld", (long long)g[0].id);
    assert_string_equal(text_of(f->s, sql), "ready");
    snprintf(sql, sizeof sql, "SELECT phase FROM grains WHERE grain_id = %lld",
             (long long)g[0].id);
    assert_string_equal(text_of(f->s, sql), "in_flight");
    assert_string_equal(text_of(f->s, "SELECT waiting || ' ' || ready || ' ' || in_flight "
                                      "FROM progress WHERE call = 'ocr'"),
                        "1 1 1");

    /* a barrier on the pages: the two that have not run, not the one in flight */
    assert_int_equal(orch_store_begin(f->s), 0);
    struct orch_grain_row *rows;
    size_t n;
    assert_int_equal(orch_store_grains_unrun(f->s, 1, root, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].id, g[1].id);
    assert_int_equal(rows[1].id, g[2].id);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(orch_store_grain_seal(f->s, rows[i].id, 1, rows[i].entity,
                                               ORCH_OUTCOME_SUPPRESSED, false, 0, &done),
                         0);
        assert_true(done);
    }
    free(rows);
    assert_int_equal(orch_store_grain_dispatch(f->s, g[1].id, 0, &done), 0);
    assert_false(done); /* the READY one's entry is stale */
    assert_int_equal(orch_store_grain_dispatch(f->s, g[1].id, 0, &done), ORCH_ECORRUPT);
    assert_int_equal(orch_store_grain_dispatch(f->s, g[2].id, 0, &done), ORCH_ECORRUPT);
    /* the report of the one in flight seals it */
    assert_int_equal(orch_store_grain_seal(f->s, g[0].id, 1, kids[0], ORCH_OUTCOME_OK, true, 0,
                                           &done),
                     0);
    assert_true(done);
    assert_int_equal(orch_store_attempt_end(f->s, a0, ORCH_ATTEMPT_OK, NULL), 0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_string_equal(text_of(f->s, "SELECT in_flight || ' ' || sealed FROM progress "
                                      "WHERE call = 'ocr'"),
                        "0 3");
    assert_int_equal(orch_store_begin(f->s), 0);
}

/* A driver that stops ends its open attempts itself, and puts their grains back to READY at
 * generation+1 (orch_store_grain_interrupt), with the ready_seq of one made READY in the
 * transaction that dispatched it; resume then seals every unsealed grain under a barrier. */
static void test_interrupt_one(void **state)
{
    struct fx *f = *state;
    f->s->checks = true;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    struct orch_grain_row g[2];
    bool done;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(orch_store_grain_create(f->s, 1, kids[i], root, 1), 0);
        assert_int_equal(orch_store_grain_get(f->s, 1, kids[i], false, &g[i]), 0);
    }
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    int64_t a[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(orch_store_grain_ready(f->s, &g[i], 50 + i), 0);
        assert_int_equal(orch_store_grain_dispatch(f->s, g[i].id, 0, &done), 0);
        assert_true(done);
        assert_int_equal(orch_store_attempts_begin(f->s, &(struct orch_grain_at){g[i].id, 0},
                                                   1, 7, "h", NULL, 1, &a[i]),
                         0);
    }
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_string_equal(raw_row(f->s, g[0].id), "waiting -1 1");
    assert_int_equal(orch_store_begin(f->s), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(orch_store_attempt_end(f->s, a[i], ORCH_ATTEMPT_INTERRUPTED, "stop"), 0);
        assert_int_equal(orch_store_grain_interrupt(f->s, g[i].id, 0), 0);
    }
    assert_string_equal(raw_row(f->s, g[0].id), "ready 50 0 at");
    assert_int_equal(orch_store_grain_by_id(f->s, g[1].id, &g[1]), 0);
    assert_int_equal(g[1].generation, 1);
    assert_int_equal(g[1].seq, 51);
    assert_int_equal(orch_store_barrier_put(f->s, 1, root, g[0].id), 0);
    struct orch_grain_row *rows;
    size_t n;
    assert_int_equal(orch_store_grains_barred_in_flight(f->s, &rows, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].generation + rows[1].generation, 2);
    free(rows);
}

/* The spans of reclaimed ids, "first-last" in order. */
static const char *spans(orch_store *s)
{
    return text_of(s, "SELECT group_concat(first || '-' || last, ' ') "
                      "FROM (SELECT * FROM reclaimed_span ORDER BY first)");
}

/* Reclaimed ids are written as spans of consecutive ids: an id freed twice in one
 * transaction counts once, a span that touches one written before is merged with it, the
 * `reclaimed` view lists the ids that items name; an id freed again in a later
 * transaction is an error that ORCH_STORE_CHECKS reports. */
static void test_reclaimed_spans(void **state)
{
    struct fx *f = *state;
    f->s->checks = true;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    for (int i = 0; i < 2; i++) /* page.image of both pages names payloads 6 and 8 */
        assert_int_equal(orch_store_item_put(f->s, 1, kids[i], ORCH_ITEM_PRESENT,
                                             (uint64_t)(6 + 2 * i), 10),
                         0);
    bool added;
    const uint64_t ids[] = {7, 5, 6, 9, 6};
    const bool fresh[] = {true, true, true, true, false};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        assert_int_equal(orch_store_reclaimed_put(f->s, ids[i], &added), 0);
        assert_int_equal(added, fresh[i]);
    }
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_string_equal(spans(f->s), "5-7 9-9");
    assert_string_equal(text_of(f->s, "SELECT group_concat(payload_id, ' ') "
                                      "FROM (SELECT * FROM reclaimed ORDER BY 1)"),
                        "6");
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_reclaimed_put(f->s, 8, &added), 0);
    assert_true(added);
    bool gone;
    assert_int_equal(orch_store_payload_reclaimed(f->s, 8, &gone), 0);
    assert_true(gone); /* held */
    assert_int_equal(orch_store_payload_reclaimed(f->s, 10, &gone), 0);
    assert_false(gone);
    assert_int_equal(orch_store_payload_reclaimed(f->s, 4, &gone), 0);
    assert_false(gone);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_string_equal(spans(f->s), "5-9");
    assert_string_equal(text_of(f->s, "SELECT group_concat(payload_id, ' ') "
                                      "FROM (SELECT * FROM reclaimed ORDER BY 1)"),
                        "6 8");
    assert_string_equal(text_of(f->s, "SELECT group_concat(reclaimed, ' ') FROM items "
                                      "WHERE port = 'page.image'"),
                        "1 1");
    /* freed again in a later transaction */
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_reclaimed_put(f->s, 7, &added), 0);
    assert_int_equal(orch_store_commit(f->s), ORCH_ECORRUPT);
    assert_int_equal(orch_store_begin(f->s), 0);
}

/* More ids freed in one transaction than the store holds: those past the bound are
 * written as they come, and an id freed again after that is still found, in the spans. */
static void test_reclaimed_many(void **state)
{
    struct fx *f = *state;
    f->s->checks = true;
    bool added;
    for (uint64_t id = 1; id <= 70000; id++) {
        assert_int_equal(orch_store_reclaimed_put(f->s, id, &added), 0);
        assert_true(added);
    }
    assert_int_equal(orch_store_reclaimed_put(f->s, 5, &added), 0);
    assert_false(added); /* written already */
    assert_int_equal(orch_store_reclaimed_put(f->s, 69999, &added), 0);
    assert_false(added); /* held */
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_string_equal(spans(f->s), "1-70000");
    assert_int_equal(orch_store_begin(f->s), 0);
}

/* Root rows are held until a statement that reads them (the look-up by key) or the
 * commit: the look-up then finds the row, its file signature whole; a rollback forgets
 * them. */
static void test_roots_held(void **state)
{
    struct fx *f = *state;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids); /* root "a.pdf" */
    struct orch_root_sig sig = {.known = true, .size = 123, .mtime_ns = 456};
    snprintf(sig.hash, sizeof sig.hash, "%064d", 7);
    assert_int_equal(orch_store_root_put(f->s, root, 0, 1, 0, &sig), 0);
    assert_string_equal(text_of(f->s, "SELECT count(*) FROM root"), "0"); /* held */
    struct orch_root_row r;
    int64_t next;
    assert_int_equal(orch_store_root_find(f->s, 0, "a.pdf", &r, &next), 1);
    assert_int_equal(r.entity, root);
    assert_int_equal(next, 2);
    assert_true(r.sig.known);
    assert_int_equal(r.sig.size, 123);
    assert_string_equal(r.sig.hash, sig.hash);
    /* one more, rolled back: never written */
    int64_t other;
    assert_int_equal(orch_store_entity_put(f->s, 0, 0, 1, "b.pdf", &other), 0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_root_put(f->s, other, 0, 1, 1, &sig), 0);
    assert_int_equal(orch_store_rollback(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_string_equal(text_of(f->s, "SELECT count(*) FROM root"), "1");
}

/* What a resume reads: open attempts interrupted, in-flight grains back to READY at
 * generation+1, queues in ready_seq order with the attempts charged since the last
 * terminal failure. */
static void test_recovery(void **state)
{
    struct fx *f = *state;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    struct orch_grain_row g[2];
    bool done;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(orch_store_grain_create(f->s, 1, kids[i], root, 1), 0);
        assert_int_equal(orch_store_grain_get(f->s, 1, kids[i], false, &g[i]), 0);
        assert_int_equal(orch_store_grain_ready(f->s, &g[i], 20 - i), 0);
        assert_int_equal(orch_store_grain_dispatch(f->s, g[i].id, 0, &done), 0);
        assert_true(done);
    }
    int64_t a0, a1;
    assert_int_equal(orch_store_attempts_begin(f->s, &(struct orch_grain_at){g[0].id, 0}, 1, 123, "h", NULL, 5,
                                               &a0), 0);
    assert_int_equal(orch_store_attempts_begin(f->s, &(struct orch_grain_at){g[1].id, 0}, 1, 124, "h", "7.0", 6,
                                               &a1), 0);
    assert_int_equal(orch_store_attempt_end(f->s, a0, ORCH_ATTEMPT_CRASH, "boom"), 0);
    assert_int_equal(orch_store_failure_put(f->s, g[0].id, 0, ORCH_FAILURE_CRASH, "boom", 0), 0);
    uint64_t batch;
    assert_int_equal(orch_store_attempt_last_batch(f->s, &batch), 0);
    assert_int_equal(batch, 6);
    /* the floor: recovery reads only attempts from it up (a0 is closed, a1 open) */
    assert_int_equal(orch_store_attempt_floor_set(f->s, a1), 0);
    /* the grains first: an open attempt is what says a grain was in flight */
    assert_int_equal(orch_store_grains_interrupt(f->s), 0);
    assert_int_equal(orch_store_attempts_interrupt(f->s), 0);
    assert_string_equal(outcome_of(f->s, a0), "crash");
    assert_string_equal(outcome_of(f->s, a1), "interrupted");
    int64_t unsealed;
    assert_int_equal(orch_store_grains_unsealed(f->s, &unsealed), 0);
    assert_int_equal(unsealed, 2);
    /* A READY grain of call 0 (on the root) with a later ready_seq, one of a call 2 with an
     * earlier one. */
    assert_int_equal(
        orch_store_exec(f->s, "INSERT INTO call VALUES (2, 'tag', 'map', 't', 1, 1)"), 0);
    struct orch_grain_row h[2];
    for (int i = 0; i < 2; i++) {
        int64_t e = i == 0 ? root : kids[0];
        assert_int_equal(orch_store_grain_create(f->s, i * 2, e, i == 0 ? 0 : root, 1), 0);
        assert_int_equal(orch_store_grain_get(f->s, i * 2, e, false, &h[i]), 0);
        assert_int_equal(orch_store_grain_ready(f->s, &h[i], i == 0 ? 30 : 2), 0);
    }
    struct orch_grain_row out[5] = {{.call = 0}};
    assert_int_equal(orch_store_grains_ready(f->s, collect_ready, out), 0);
    assert_int_equal(out[0].call, 4);
    /* call by call, each in ready_seq order: call 0's, then grain 1 (seq 19) before grain 0
     * (seq 20) of call 1, then call 2's */
    assert_int_equal(out[1].id, h[0].id);
    assert_int_equal(out[1].call, 0);
    assert_int_equal(out[2].id, g[1].id);
    assert_int_equal(out[3].id, g[0].id);
    assert_int_equal(out[2].call, 1);
    assert_int_equal(out[3].call, 1);
    assert_int_equal(out[4].id, h[1].id);
    assert_int_equal(out[4].call, 2);
    assert_int_equal(out[2].generation, 1);
    assert_int_equal(out[2].attempts, 0);
    assert_int_equal(out[3].attempts, 1); /* the crash is charged */
    assert_int_equal(out[3].parent, root);
    assert_int_equal(out[1].parent, 0);
}

static void test_barriers(void **state)
{
    struct fx *f = *state;
    int64_t root, kids[2];
    hierarchy(f->s, &root, kids);
    struct orch_grain_row g;
    assert_int_equal(orch_store_grain_create(f->s, 1, kids[0], root, 1), 0);
    assert_int_equal(orch_store_grain_create(f->s, 1, kids[1], root, 1), 0);
    assert_int_equal(orch_store_grain_get(f->s, 1, kids[0], false, &g), 0);
    bool covered, taken;
    assert_int_equal(orch_store_barrier_covers(f->s, 1, root, &covered), 0);
    assert_false(covered);
    assert_int_equal(orch_store_barrier_put(f->s, 1, root, g.id), 0);
    assert_int_equal(orch_store_barrier_put(f->s, 1, root, g.id + 1), 0); /* first one stays */
    assert_int_equal(orch_store_barrier_covers(f->s, 1, root, &covered), 0);
    assert_true(covered);
    struct orch_grain_row *rows;
    size_t n;
    assert_int_equal(orch_store_grains_unrun(f->s, 1, root, &rows, &n), 0);
    assert_int_equal(n, 2);
    free(rows);
    assert_int_equal(orch_store_barrier_take_back(f->s, g.id + 1, &taken), 0);
    assert_false(taken);
    assert_int_equal(orch_store_barrier_take_back(f->s, g.id, &taken), 0);
    assert_true(taken);
    assert_int_equal(orch_store_barrier_covers(f->s, 1, root, &covered), 0);
    assert_false(covered);
}

static void test_next_seq(void **state)
{
    struct fx *f = *state;
    int64_t seq = 0, live = -1;
    assert_int_equal(orch_store_counters_get(f->s, &seq, &live), 0);
    assert_int_equal(seq, 1);
    assert_int_equal(live, 0);
    assert_int_equal(orch_store_counters_set(f->s, 77, 1234), 0);
    assert_int_equal(orch_store_counters_get(f->s, &seq, &live), 0);
    assert_int_equal(seq, 77);
    assert_int_equal(live, 1234);
    /* live_bytes is never negative (a CHECK): an accounting error is refused loudly. */
    assert_int_not_equal(orch_store_counters_set(f->s, 78, -1), 0);
    assert_int_equal(orch_store_budgets_set(f->s, 500, 1 << 20), 0);
}

/* The job's stop columns as "KIND|MESSAGE|AT IS NULL|AT IS RECENT" ('-' for NULL). */
static void stop_row(orch_store *s, char *got, size_t n)
{
    sqlite3_stmt *st;
    assert_int_equal(orch_store_prepare(s,
                                        "SELECT coalesce(stop_kind, '-'),"
                                        " coalesce(stop_message, '-'), stop_at IS NULL,"
                                        " stop_at > 1700000000000 FROM job",
                                        &st),
                     0);
    assert_int_equal(orch_store_step(s, st), 1);
    snprintf(got, n, "%s|%s|%d|%d", sqlite3_column_text(st, 0), sqlite3_column_text(st, 1),
             sqlite3_column_int(st, 2), sqlite3_column_int(st, 3));
    sqlite3_reset(st);
}

/* The job's stop record: put with a kind, a message and a time; put again replaces it;
 * clear empties all three (migrations/0006_job_stop.sql). */
static void test_job_stop(void **state)
{
    struct fx *f = *state;
    char got[256];
    stop_row(f->s, got, sizeof got);
    assert_string_equal(got, "-|-|1|0"); /* a new job: no stop */
    assert_int_equal(orch_store_job_stop_put(f->s, ORCH_STOP_FAILED, "disk full"), 0);
    stop_row(f->s, got, sizeof got);
    assert_string_equal(got, "failed|disk full|0|1");
    assert_int_equal(orch_store_job_stop_put(f->s, ORCH_STOP_INTERRUPTED, NULL), 0);
    stop_row(f->s, got, sizeof got);
    assert_string_equal(got, "interrupted|-|0|1");
    assert_int_equal(orch_store_job_stop_clear(f->s), 0);
    stop_row(f->s, got, sizeof got);
    assert_string_equal(got, "-|-|1|0");
    /* Without a job row there is nothing to record. */
    assert_int_equal(orch_store_exec(f->s, "DELETE FROM job"), 0);
    assert_int_equal(orch_store_job_stop_put(f->s, ORCH_STOP_FAILED, "x"), ORCH_ENOTFOUND);
}


/* A report's seal of a grain this connection put in flight is held until a statement that
 * names the grain table, or the commit, and written in runs (one UPDATE for grains whose
 * ids and ready_seqs step alike): each row ends as one UPDATE would have left it, the
 * grains between a run's ids (another call's) stay as they are, a second seal of the same
 * grain is refused, a seal at another generation is judged by the row, and a held seal
 * whose row changed behind the store stops the commit (or, with ORCH_STORE_CHECKS, the
 * seal) as corrupt. */
/* Attempt ends held to the end of the turn: adjacent ranges become one; a statement that
 * reads the attempt table writes them first, as does the commit; a rollback forgets them
 * with the rows they end. */
/* The hierarchy, with the ocr grains of both pages in flight (at[i]: page i's). */
static void two_in_flight(orch_store *s, struct orch_grain_at at[2])
{
    int64_t root, kids[2];
    hierarchy(s, &root, kids);
    for (int i = 0; i < 2; i++) {
        struct orch_grain_row g;
        bool done;
        assert_int_equal(orch_store_grain_create(s, 1, kids[i], root, 1), 0);
        assert_int_equal(orch_store_grain_get(s, 1, kids[i], false, &g), 0);
        assert_int_equal(orch_store_grain_ready(s, &g, 10 + i), 0);
        assert_int_equal(orch_store_grain_dispatch(s, g.id, 0, &done), 0);
        at[i] = (struct orch_grain_at){g.id, 0};
    }
}

static void test_attempt_ends_held(void **state)
{
    struct fx *f = *state;
    struct orch_grain_at at[2];
    two_in_flight(f->s, at);
    int64_t a[4];
    for (int i = 0; i < 4; i++) /* two batches of each grain: a[0..3], consecutive rows */
        assert_int_equal(orch_store_attempts_begin(f->s, &at[i % 2], 1, 7, "h", NULL,
                                                   (uint64_t)i + 1, &a[i]), 0);
    assert_int_equal(a[3], a[0] + 3);
    assert_int_equal(orch_store_commit(f->s), 0);
    static const char open_rows[] = "SELECT count(*) FROM attempt WHERE outcome IS NULL";
    /* Ended, then rolled back: nothing written, nothing left to write. */
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_attempts_end(f->s, a[0], a[1], ORCH_ATTEMPT_OK), 0);
    assert_int_equal(orch_store_rollback(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_string_equal(text_of(f->s, open_rows), "4");
    /* Held: the table still says open; a read of it through the store writes them. */
    assert_int_equal(orch_store_attempts_end(f->s, a[0], a[0], ORCH_ATTEMPT_OK), 0);
    assert_int_equal(orch_store_attempts_end(f->s, a[1], a[1], ORCH_ATTEMPT_OK), 0);
    assert_string_equal(text_of(f->s, open_rows), "4");
    assert_string_equal(outcome_of(f->s, a[1]), "ok");
    assert_string_equal(text_of(f->s, open_rows), "2");
    /* A held end, then an end with a message: its statement writes the held one first. */
    assert_int_equal(orch_store_attempts_end(f->s, a[3], a[3], ORCH_ATTEMPT_DROPPED), 0);
    assert_int_equal(orch_store_attempt_end(f->s, a[2], ORCH_ATTEMPT_ERROR, "boom"), 0);
    assert_string_equal(text_of(f->s, open_rows), "0");
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_string_equal(outcome_of(f->s, a[2]), "error");
    assert_string_equal(outcome_of(f->s, a[3]), "dropped");
    assert_string_equal(text_of(f->s, "SELECT count(*) FROM attempt WHERE ended_at IS NULL"),
                        "0");
}

/* The start of a queued batch's attempts (orch_store_attempts_started) is written with
 * their ends, not before: an open row still says when it was sent; a held end that spans
 * two batches writes each one's own start; an end with a message writes it too; a start
 * before the send time (the clocks' skew) is taken as the send time; with every slot
 * taken, the oldest start is written at once. */
static int64_t started_at(orch_store *s, int64_t row)
{
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT started_at FROM attempt WHERE id = %lld", (long long)row);
    return strtoll(text_of(s, sql), NULL, 10);
}

static void test_queued_starts(void **state)
{
    struct fx *f = *state;
    struct orch_grain_at at[2];
    two_in_flight(f->s, at);
    int64_t a, b, c;
    assert_int_equal(orch_store_attempts_begin(f->s, at, 2, 7, "h", NULL, 1, &a), 0);
    assert_int_equal(orch_store_attempts_begin(f->s, at, 2, 7, "h", NULL, 2, &b), 0);
    assert_int_equal(orch_store_attempts_begin(f->s, at, 1, 7, "h", NULL, 3, &c), 0);
    assert_int_equal(b, a + 2);
    int64_t sent = started_at(f->s, a), sent_b = started_at(f->s, b);
    assert_int_equal(orch_store_commit(f->s), 0);

    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_attempts_started(f->s, b, b + 1, sent_b + 42), 0);
    assert_int_equal(orch_store_attempts_started(f->s, c, c, sent_b - 5), 0); /* clock skew */
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(started_at(f->s, b), sent_b); /* open: as sent */
    /* a..a+1 and b..b+1 end alike: one held end over both batches. */
    assert_int_equal(orch_store_attempts_end(f->s, a, a + 1, ORCH_ATTEMPT_OK), 0);
    assert_int_equal(orch_store_attempts_end(f->s, b, b + 1, ORCH_ATTEMPT_OK), 0);
    assert_int_equal(orch_store_attempt_end(f->s, c, ORCH_ATTEMPT_ERROR, "boom"), 0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(started_at(f->s, a), sent);
    assert_int_equal(started_at(f->s, a + 1), sent);
    assert_int_equal(started_at(f->s, b), sent_b + 42);
    assert_int_equal(started_at(f->s, b + 1), sent_b + 42);
    assert_true(started_at(f->s, c) >= sent_b); /* never before it was sent */
    assert_true(started_at(f->s, c) < sent_b + 42);
    assert_string_equal(outcome_of(f->s, b + 1), "ok");
    assert_int_equal(f->s->nstarts, 0); /* each taken by its ends */

    /* Every slot taken: the oldest (a real row, still open) is written at once. */
    int64_t d;
    assert_int_equal(orch_store_attempts_begin(f->s, at, 1, 7, "h", NULL, 4, &d), 0);
    int64_t sent_d = started_at(f->s, d);
    assert_int_equal(orch_store_attempts_started(f->s, d, d, sent_d + 44), 0);
    for (int i = 1; i < ORCH_STORE_STARTS; i++)
        assert_int_equal(orch_store_attempts_started(f->s, d + 10 * i, d + 10 * i, 50), 0);
    assert_int_equal(started_at(f->s, d), sent_d); /* 64 kept, none written */
    assert_int_equal(orch_store_attempts_started(f->s, d + 10000, d + 10000, 51), 0);
    assert_int_equal(started_at(f->s, d), sent_d + 44);
    assert_int_equal(f->s->nstarts, ORCH_STORE_STARTS);
}

static void test_seals_held(void **state)
{
    struct fx *f = *state;
    f->s->checks = true;
    assert_int_equal(
        orch_store_exec(f->s, "INSERT INTO call VALUES (2, 'tag', 'map', 't', 1, 1)"), 0);
    enum { N = 8 };
    int64_t root, kids[N];
    hierarchy(f->s, &root, kids);
    for (int i = 2; i < N; i++)
        assert_int_equal(orch_store_entity_put(f->s, 1, root, i, NULL, &kids[i]), 0);
    /* Each page's grains of ocr and tag, one after the other: ocr's ids step by 2. */
    struct orch_grain_row g[N], t[N];
    for (int i = 0; i < N; i++) {
        assert_int_equal(orch_store_grain_create(f->s, 1, kids[i], root, 1), 0);
        assert_int_equal(orch_store_grain_create(f->s, 2, kids[i], root, 1), 0);
        assert_int_equal(orch_store_grain_get(f->s, 1, kids[i], false, &g[i]), 0);
        assert_int_equal(orch_store_grain_get(f->s, 2, kids[i], false, &t[i]), 0);
        assert_int_equal(t[i].id, g[i].id + 1);
        if (i < 4) /* READY before the dispatch's transaction: the row keeps its ready_seq */
            assert_int_equal(orch_store_grain_ready(f->s, &g[i], 100 + i), 0);
    }
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    struct orch_grain_at at[N];
    bool done;
    for (int i = 0; i < N; i++) {
        if (i >= 4) /* READY in the dispatch's transaction: its seal writes ready_seq */
            assert_int_equal(orch_store_grain_ready(f->s, &g[i], 200 + i), 0);
        assert_int_equal(orch_store_grain_dispatch(f->s, g[i].id, 0, &done), 0);
        assert_true(done);
        at[i] = (struct orch_grain_at){g[i].id, 0};
    }
    int64_t first;
    assert_int_equal(orch_store_attempts_begin(f->s, at, N, 7, "h", NULL, 1, &first), 0);
    assert_int_equal(orch_store_commit(f->s), 0);

    assert_int_equal(orch_store_begin(f->s), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(orch_store_grain_seal(f->s, g[i].id, 1, kids[i],
                                               i == 3 ? ORCH_OUTCOME_FAILED : ORCH_OUTCOME_OK,
                                               true, 0, &done),
                         0);
        assert_true(done);
    }
    static const char count_sealed[] = "SELECT count(*) FROM grain WHERE phase = 'sealed'";
    assert_string_equal(text_of(f->s, count_sealed), "0");
    struct orch_grain_row r;
    assert_int_equal(orch_store_grain_by_id(f->s, g[1].id, &r), 0); /* writes them first */
    assert_int_equal(r.phase, ORCH_PHASE_SEALED);
    assert_int_equal(r.outcome, ORCH_OUTCOME_OK);
    assert_string_equal(text_of(f->s, count_sealed), "4");
    for (int i = 4; i < N; i++) {
        assert_int_equal(orch_store_grain_seal(f->s, g[i].id, 1, kids[i], ORCH_OUTCOME_OK, true,
                                               0, &done),
                         0);
        assert_true(done);
    }
    assert_int_equal(orch_store_grain_seal(f->s, g[5].id, 1, kids[5], ORCH_OUTCOME_DROPPED,
                                           true, 0, &done),
                     0);
    assert_false(done); /* sealed already: a second report is stale */
    assert_int_equal(orch_store_commit(f->s), 0);
    for (int i = 0; i < N; i++) {
        char sql[200], want[64];
        snprintf(sql, sizeof sql,
                 "SELECT phase || ' ' || outcome || ' ' || ready_seq || ' ' || generation || "
                 "' ' || (ready_at IS NOT NULL) FROM grain WHERE id = %lld",
                 (long long)g[i].id);
        snprintf(want, sizeof want, "sealed %s %d 0 1", i == 3 ? "failed" : "ok",
                 i < 4 ? 100 + i : 200 + i);
        assert_string_equal(text_of(f->s, sql), want);
        snprintf(sql, sizeof sql, "SELECT phase || ' ' || coalesce(outcome, '-') FROM grain "
                                  "WHERE id = %lld", (long long)t[i].id);
        assert_string_equal(text_of(f->s, sql), "waiting -");
    }

    /* Another generation than the dispatch's: the row decides (it is at 0). */
    assert_int_equal(orch_store_begin(f->s), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(orch_store_grain_ready(f->s, &t[i], 300 + i), 0);
        assert_int_equal(orch_store_grain_dispatch(f->s, t[i].id, 0, &done), 0);
        at[i] = (struct orch_grain_at){t[i].id, 0};
    }
    assert_int_equal(orch_store_attempts_begin(f->s, at, 3, 7, "h", NULL, 2, &first), 0);
    assert_int_equal(orch_store_commit(f->s), 0);
    assert_int_equal(orch_store_begin(f->s), 0);
    assert_int_equal(orch_store_grain_seal(f->s, t[0].id, 2, kids[0], ORCH_OUTCOME_OK, true, 1,
                                           &done),
                     0);
    assert_false(done);

    /* A row changed behind the store: the held seal does not match it. */
    char sql[128];
    snprintf(sql, sizeof sql, "UPDATE grain SET generation = 3 WHERE id IN (%lld, %lld)",
             (long long)t[1].id, (long long)t[2].id);
    assert_int_equal(sqlite3_exec(orch_store__db_as_is(f->s), sql, NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(orch_store_grain_seal(f->s, t[1].id, 2, kids[1], ORCH_OUTCOME_OK, true, 0,
                                           &done),
                     ORCH_ECORRUPT); /* ORCH_STORE_CHECKS compares it with the row */
    f->s->checks = false;
    assert_int_equal(orch_store_grain_seal(f->s, t[2].id, 2, kids[2], ORCH_OUTCOME_OK, true, 0,
                                           &done),
                     0);
    assert_true(done);
    assert_int_equal(orch_store_commit(f->s), ORCH_ECORRUPT);
    assert_non_null(strstr(orch_error_detail(), "but 0 rows were"));
    assert_int_equal(orch_store_begin(f->s), 0); /* rolled back: the generations are 0 */
    snprintf(sql, sizeof sql,
             "SELECT group_concat(generation) FROM grain WHERE id IN (%lld, %lld)",
             (long long)t[1].id, (long long)t[2].id);
    assert_string_equal(text_of(f->s, sql), "0,0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_entities, setup, teardown),
        cmocka_unit_test_setup_teardown(test_items_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expansions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grain_transitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ready_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_flight_is_an_open_attempt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupt_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reclaimed_spans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reclaimed_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roots_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grains_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_stops_the_transaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_roots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_children, setup, teardown),
        cmocka_unit_test_setup_teardown(test_items_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attempts_of_a_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_barriers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_next_seq, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attempt_ends_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seals_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_starts, setup, teardown),
    };
    /* Every store of the suite enforces the schema's rules (orch_store_config). */
    orch_store_configure(&(struct orch_store_config){.checks = true});
    return cmocka_run_group_tests(tests, NULL, NULL);
}
