/* test_queue.c — unit tests of a call's ready queue and of batch reservation
 * (engine/queue/queue.h), with no store: elastic and parent reservation, solo retries,
 * batch_bytes, stale entries, the order of requeued grains, and the queue's growth and
 * compaction, and the window that keeps a large frontier in a spill file. The store's side
 * is played by a table of grains: whether each is still READY, and the size of its inputs. */
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
#include "queue.h"

/* ---- the store's side ------------------------------------------------------------------ */

#define NGRAINS (1 << 17) /* test_shrink needs a frontier well past QUEUE_KEEP */

struct fake {
    bool stale[NGRAINS];    /* left READY since it was queued */
    uint64_t size[NGRAINS]; /* its input bytes */
    int64_t fail_at;        /* take() fails with -EIO on this grain (0: never) */
    int64_t looked[NGRAINS], taken[NGRAINS];
    int nlooked, ntaken;
};

static int look(void *ctx, const struct orch_queue_entry *e, uint64_t *bytes)
{
    struct fake *f = ctx;
    assert_int_equal(*bytes, 0);
    f->looked[f->nlooked++] = e->g.grain;
    *bytes = f->size[e->g.grain];
    return 0;
}

static int take(void *ctx, const struct orch_queue_entry *e)
{
    struct fake *f = ctx;
    if (e->g.grain == f->fail_at)
        return -EIO;
    if (f->stale[e->g.grain])
        return 0;
    f->taken[f->ntaken++] = e->g.grain;
    return 1;
}

static struct fake *fake_new(void)
{
    struct fake *f = calloc(1, sizeof *f);
    assert_non_null(f);
    return f;
}

/* Reserves under (batch, batch_bytes, parent) and returns what reserve returned; the
 * grains taken are in f->taken[0 .. f->ntaken). */
static int reserve(struct orch_queue *q, struct fake *f, int batch, int64_t batch_bytes,
                   bool parent)
{
    f->nlooked = f->ntaken = 0;
    struct orch_queue_reservation r = {.batch = batch,
                                       .batch_bytes = batch_bytes,
                                       .parent = parent,
                                       .ctx = f,
                                       .look = look,
                                       .take = take};
    int n = orch_queue_reserve(q, &r);
    if (n >= 0)
        assert_int_equal(n, f->ntaken);
    return n;
}

/* Appends grain `grain` of parent `parent` with ready_seq = grain. */
static void push(struct orch_queue *q, int64_t grain, int64_t parent, bool solo)
{
    struct orch_queue_entry e = {.g = {.grain = grain,
                                       .call = 0,
                                       .entity = 100 + grain,
                                       .parent = parent,
                                       .seq = grain,
                                       .in0_state = -1},
                                 .solo = solo};
    assert_int_equal(orch_queue_push(q, &e), 0);
}

/* The grains of q, head first, as "1 2 3". */
static const char *contents(const struct orch_queue *q)
{
    static char buf[4096];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = q->head; i < q->head + q->len && len < sizeof buf - 24; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld", len ? " " : "",
                                (long long)q->v[i].g.grain);
    return buf;
}

/* The grains taken by the last reservation, as "1 2 3". */
static const char *taken(const struct fake *f)
{
    static char buf[4096];
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < f->ntaken && len < sizeof buf - 24; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld", len ? " " : "",
                                (long long)f->taken[i]);
    return buf;
}

/* ---- elastic --------------------------------------------------------------------------- */

/* Up to `batch` grains from the head, in order, whatever their parents. */
static void test_elastic(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    int64_t parents[] = {1, 2, 1, 3, 2, 1};
    for (int i = 0; i < 6; i++)
        push(&q, i + 1, parents[i], false);
    assert_int_equal(reserve(&q, f, 4, 0, false), 4);
    assert_string_equal(taken(f), "1 2 3 4");
    assert_string_equal(contents(&q), "5 6");
    /* A batch bigger than what is queued takes what is there. */
    assert_int_equal(reserve(&q, f, 256, 0, false), 2);
    assert_string_equal(taken(f), "5 6");
    assert_int_equal(q.len, 0);
    /* An empty queue gives nothing, and asks nothing. */
    assert_int_equal(reserve(&q, f, 4, 0, false), 0);
    assert_int_equal(f->nlooked, 0);
    orch_queue_free(&q);
    free(f);
}

/* ---- parent ---------------------------------------------------------------------------- */

/* Up to `batch` siblings of the head's parent; everything else keeps its relative order,
 * and the gap left by the grains taken is closed. */
static void test_parent(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    int64_t parents[] = {1, 2, 1, 3, 1, 2, 1};
    for (int i = 0; i < 7; i++)
        push(&q, i + 1, parents[i], false);
    assert_int_equal(reserve(&q, f, 3, 0, true), 3);
    assert_string_equal(taken(f), "1 3 5");
    assert_string_equal(contents(&q), "2 4 6 7");
    /* Only the head's parent is looked at; the others are passed over unasked. */
    assert_int_equal(reserve(&q, f, 8, 0, true), 2);
    assert_string_equal(taken(f), "2 6");
    assert_int_equal(f->nlooked, 2);
    assert_string_equal(contents(&q), "4 7");
    assert_int_equal(reserve(&q, f, 8, 0, true), 1);
    assert_string_equal(taken(f), "4");
    assert_string_equal(contents(&q), "7");
    orch_queue_free(&q);
    free(f);
}

/* The parent is the head's, even when the head turns out stale: the head is consumed and
 * its siblings are taken. */
static void test_parent_stale_head(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    push(&q, 1, 7, false);
    push(&q, 2, 8, false);
    push(&q, 3, 7, false);
    f->stale[1] = true;
    assert_int_equal(reserve(&q, f, 4, 0, true), 1);
    assert_string_equal(taken(f), "3");
    assert_string_equal(contents(&q), "2");
    orch_queue_free(&q);
    free(f);
}

/* ---- solo retries ---------------------------------------------------------------------- */

/* Elastic: a solo entry ends a batch that holds something, and runs alone. */
static void test_solo_elastic(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    push(&q, 1, 1, false);
    push(&q, 2, 1, true);
    push(&q, 3, 1, false);
    push(&q, 4, 1, true);
    push(&q, 5, 1, true);
    assert_int_equal(reserve(&q, f, 8, 0, false), 1);
    assert_string_equal(taken(f), "1");
    assert_string_equal(contents(&q), "2 3 4 5");
    assert_int_equal(reserve(&q, f, 8, 0, false), 1);
    assert_string_equal(taken(f), "2");
    assert_int_equal(reserve(&q, f, 8, 0, false), 1);
    assert_string_equal(taken(f), "3");
    assert_int_equal(reserve(&q, f, 8, 0, false), 1);
    assert_string_equal(taken(f), "4");
    assert_int_equal(reserve(&q, f, 8, 0, false), 1);
    assert_string_equal(taken(f), "5");
    assert_int_equal(q.len, 0);
    orch_queue_free(&q);
    free(f);
}

/* Parent: a solo sibling met when the batch holds something is passed over, keeping its
 * place, and later siblings are still taken; then it runs alone. */
static void test_solo_parent(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    push(&q, 1, 1, false);
    push(&q, 2, 1, true);
    push(&q, 3, 2, false);
    push(&q, 4, 1, false);
    assert_int_equal(reserve(&q, f, 8, 0, true), 2);
    assert_string_equal(taken(f), "1 4");
    assert_string_equal(contents(&q), "2 3");
    assert_int_equal(reserve(&q, f, 8, 0, true), 1);
    assert_string_equal(taken(f), "2");
    assert_string_equal(contents(&q), "3");
    orch_queue_free(&q);
    free(f);
}

/* A stale head consumed, then a solo entry right behind it: the solo entry goes into the
 * (still empty) batch and ends it. A stale solo entry ends a reservation that added
 * nothing. */
static void test_solo_behind_stale(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    push(&q, 1, 1, false);
    push(&q, 2, 1, true);
    push(&q, 3, 1, false);
    f->stale[1] = true;
    assert_int_equal(reserve(&q, f, 8, 0, false), 1);
    assert_string_equal(taken(f), "2");
    assert_string_equal(contents(&q), "3");
    push(&q, 4, 1, true);
    push(&q, 5, 1, false);
    f->stale[3] = true;
    f->stale[4] = true;
    assert_int_equal(reserve(&q, f, 8, 0, false), 0);
    assert_string_equal(contents(&q), "5");
    orch_queue_free(&q);
    free(f);
}

/* ---- batch_bytes ----------------------------------------------------------------------- */

/* The batch is cut before the grain whose inputs would take it past the limit; reaching
 * the limit exactly is not passing it. */
static void test_batch_bytes_cut(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    for (int i = 1; i <= 5; i++) {
        push(&q, i, 1, false);
        f->size[i] = 40;
    }
    f->size[4] = 20;
    assert_int_equal(reserve(&q, f, 16, 100, false), 2);
    assert_string_equal(taken(f), "1 2");
    assert_int_equal(f->nlooked, 3); /* the third was weighed, and left queued */
    assert_string_equal(contents(&q), "3 4 5");
    assert_int_equal(reserve(&q, f, 16, 100, false), 3);
    assert_string_equal(taken(f), "3 4 5"); /* 40 + 20 + 40 = 100 */
    /* `batch` still bounds it. */
    for (int i = 6; i <= 9; i++)
        push(&q, i, 1, false);
    assert_int_equal(reserve(&q, f, 2, 1000, false), 2);
    assert_string_equal(taken(f), "6 7");
    /* Without a limit, sizes do not matter. */
    f->size[8] = f->size[9] = UINT64_C(1) << 40;
    assert_int_equal(reserve(&q, f, 16, 0, false), 2);
    assert_string_equal(taken(f), "8 9");
    orch_queue_free(&q);
    free(f);
}

/* A grain bigger than the limit still runs, alone; in parent mode too. */
static void test_batch_bytes_big(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    push(&q, 1, 1, false);
    push(&q, 2, 1, false);
    push(&q, 3, 1, false);
    f->size[1] = 10;
    f->size[2] = 500;
    f->size[3] = 10;
    assert_int_equal(reserve(&q, f, 16, 100, true), 1);
    assert_string_equal(taken(f), "1");
    assert_int_equal(reserve(&q, f, 16, 100, true), 1);
    assert_string_equal(taken(f), "2");
    assert_int_equal(reserve(&q, f, 16, 100, true), 1);
    assert_string_equal(taken(f), "3");
    orch_queue_free(&q);
    free(f);
}

/* A stale entry is consumed and weighs nothing. */
static void test_batch_bytes_stale(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    for (int i = 1; i <= 4; i++)
        push(&q, i, 1, false);
    f->size[1] = 60;
    f->size[2] = 60;
    f->size[3] = 30;
    f->size[4] = 30;
    f->stale[1] = true;
    assert_int_equal(reserve(&q, f, 16, 100, false), 2);
    assert_string_equal(taken(f), "2 3"); /* 60 + 30; the stale 60 not counted */
    assert_string_equal(contents(&q), "4");
    orch_queue_free(&q);
    free(f);
}

/* ---- stale entries --------------------------------------------------------------------- */

/* Stale entries are consumed, not added, and do not count against `batch`. */
static void test_stale(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    for (int i = 1; i <= 7; i++)
        push(&q, i, i % 2, false);
    f->stale[2] = f->stale[3] = true;
    assert_int_equal(reserve(&q, f, 3, 0, false), 3);
    assert_string_equal(taken(f), "1 4 5");
    assert_int_equal(f->nlooked, 5);
    assert_string_equal(contents(&q), "6 7");
    /* Every entry stale: all consumed, none added. */
    f->stale[6] = f->stale[7] = true;
    assert_int_equal(reserve(&q, f, 3, 0, false), 0);
    assert_int_equal(q.len, 0);
    /* Parent mode: stale siblings are consumed, other parents stay. */
    for (int i = 10; i <= 15; i++)
        push(&q, i, i % 2, false);
    f->stale[12] = true;
    assert_int_equal(reserve(&q, f, 2, 0, true), 2);
    assert_string_equal(taken(f), "10 14");
    assert_string_equal(contents(&q), "11 13 15");
    orch_queue_free(&q);
    free(f);
}

/* A callback's error is returned; the entry it was called for stays queued. */
static void test_error(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    for (int i = 1; i <= 3; i++)
        push(&q, i, 1, false);
    f->fail_at = 2;
    assert_int_equal(reserve(&q, f, 8, 0, false), -EIO);
    assert_string_equal(taken(f), "1");
    assert_string_equal(contents(&q), "2 3");
    orch_queue_free(&q);
    free(f);
}

/* ---- requeue --------------------------------------------------------------------------- */

/* A requeued grain goes to the tail with its new ready_seq and generation + 1, solo when
 * asked, keeping its attempts; it then waits for the grains ahead of it, and runs alone. */
static void test_requeue_order(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    for (int i = 1; i <= 3; i++)
        push(&q, i, 1, false);
    assert_int_equal(reserve(&q, f, 1, 0, false), 1);
    assert_string_equal(taken(f), "1");
    /* Grain 1's batch failed: the driver puts it back, charged twice so far. */
    struct orch_grain_ref g = {.grain = 1,
                               .entity = 101,
                               .parent = 1,
                               .generation = 4,
                               .attempts = 2,
                               .seq = 1,
                               .in0_state = -1};
    assert_int_equal(orch_queue_requeue(&q, &g, 10, true), 0);
    assert_string_equal(contents(&q), "2 3 1");
    const struct orch_queue_entry *e = &q.v[q.head + 2];
    assert_int_equal(e->g.seq, 10);
    assert_int_equal(e->g.generation, g.generation + 1);
    assert_int_equal(e->g.attempts, 2);
    assert_int_equal(e->g.parent, 1);
    assert_true(e->solo);
    for (size_t i = q.head + 1; i < q.head + q.len; i++) /* ready_seq order */
        assert_true(q.v[i - 1].g.seq < q.v[i].g.seq);
    assert_int_equal(reserve(&q, f, 8, 0, false), 2);
    assert_string_equal(taken(f), "2 3");
    assert_int_equal(reserve(&q, f, 8, 0, false), 1);
    assert_string_equal(taken(f), "1");
    /* Not solo: it batches with the others again, at the tail. */
    push(&q, 4, 1, false);
    g.generation++;
    assert_int_equal(orch_queue_requeue(&q, &g, 11, false), 0);
    push(&q, 12, 1, false);
    assert_int_equal(reserve(&q, f, 8, 0, false), 3);
    assert_string_equal(taken(f), "4 1 12");
    orch_queue_free(&q);
    free(f);
}

/* ---- growth and compaction ------------------------------------------------------------- */

/* A large frontier's array is given back as it drains: halved under a quarter full (order
 * kept), freed when empty; a small queue keeps its array. */
static void test_shrink(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    for (int i = 1; i <= 100000; i++)
        push(&q, i, 0, false);
    size_t big = q.cap;
    assert_true(big >= 100000);
    assert_int_equal(reserve(&q, f, 80000, 0, false), 80000);
    assert_true(q.cap < big);
    assert_true(q.cap >= q.len && q.cap <= 2 * q.len);
    assert_int_equal(q.len, 20000);
    for (size_t i = 0; i < q.len; i++)
        assert_int_equal(q.v[q.head + i].g.grain, 80001 + (int64_t)i);
    assert_int_equal(reserve(&q, f, 20000, 0, false), 20000);
    assert_null(q.v);
    assert_int_equal(q.cap, 0);
    push(&q, 7, 0, false); /* usable again */
    assert_int_equal(reserve(&q, f, 1, 0, false), 1);
    assert_string_equal(taken(f), "7");
    /* under 4,096 entries the array stays when emptied */
    for (int i = 1; i <= 100; i++)
        push(&q, i, 0, false);
    assert_int_equal(reserve(&q, f, 100, 0, false), 100);
    assert_non_null(q.v);
    orch_queue_free(&q);
    free(f);
}

/* Pushes grow the array; once more than half of it is consumed front, a push that finds
 * the array full moves the live entries down instead of growing. */
static void test_growth_compaction(void **state)
{
    struct orch_queue q = {0};
    struct fake *f = fake_new();
    for (int i = 1; i <= 1000; i++)
        push(&q, i, i % 7, false);
    assert_int_equal(q.len, 1000);
    assert_true(q.cap >= 1000);
    for (size_t i = 0; i < q.len; i++)
        assert_int_equal(q.v[q.head + i].g.grain, (int64_t)i + 1);
    /* Fill the array exactly. */
    size_t cap = q.cap;
    for (int64_t i = 1001; q.head + q.len < q.cap; i++)
        push(&q, i, 0, false);
    assert_int_equal(q.cap, cap);
    int64_t last = q.v[q.head + q.len - 1].g.grain;
    /* Consume more than half of it from the front: the next push compacts. */
    int take_n = (int)(cap / 2 + 1);
    assert_int_equal(reserve(&q, f, take_n, 0, false), take_n);
    assert_int_equal(q.head, (size_t)take_n);
    size_t len = q.len;
    push(&q, last + 1, 0, false);
    assert_int_equal(q.cap, cap);
    assert_int_equal(q.head, 0);
    assert_int_equal(q.len, len + 1);
    for (size_t i = 0; i < q.len; i++)
        assert_int_equal(q.v[i].g.grain, (int64_t)take_n + 1 + (int64_t)i);
    /* Consuming less than half leaves a full array to grow. */
    for (int64_t i = last + 2; q.head + q.len < q.cap; i++)
        push(&q, i, 0, false);
    assert_int_equal(reserve(&q, f, 2, 0, false), 2);
    push(&q, 99999, 0, false);
    assert_true(q.cap > cap);
    assert_int_equal(q.head, 2);
    assert_int_equal(q.v[q.head + q.len - 1].g.grain, 99999);
    assert_int_equal(q.v[q.head].g.grain, (int64_t)take_n + 3);
    /* A parent reservation closes its gaps in place. */
    orch_queue_free(&q);
    assert_null(q.v);
    for (int i = 1; i <= 9; i++)
        push(&q, i, i % 3 == 1 ? 5 : 6, false);
    size_t head = q.head;
    assert_int_equal(reserve(&q, f, 9, 0, true), 3);
    assert_string_equal(taken(f), "1 4 7");
    assert_int_equal(q.head, head);
    assert_string_equal(contents(&q), "2 3 5 6 8 9");
    orch_queue_free(&q);
    free(f);
}

/* ---- the window and the spill ---------------------------------------------------------- */

/* A queue with a window keeps at most that many entries in memory and the rest in its
 * spill file, and serves them all in push order, whatever the batch: the spill is the
 * FIFO's tail. Pushes while entries are spilled go behind them (even when the array has
 * room), and a requeued grain behind everything. Once drained, the file is emptied. */
static void test_spill_order(void **state)
{
    struct orch_queue q = {.window = 8};
    struct fake *f = fake_new();
    static int64_t expect[2000], got[2000];
    int nexpect = 0, ngot = 0;
    for (int i = 1; i <= 1000; i++) {
        push(&q, i, i / 10, false);
        expect[nexpect++] = i;
    }
    assert_int_equal(q.len, 8);
    assert_int_equal(q.spilled, 992);
    assert_int_equal(orch_queue_count(&q), 1000);
    assert_true(q.cap <= 16);
    int64_t pushed = 1000;
    bool requeued = false;
    while (orch_queue_count(&q) > 0) {
        int n = reserve(&q, f, 3, 0, false);
        assert_true(n >= 1 && n <= 3);
        assert_true(q.len <= 8);
        for (int i = 0; i < f->ntaken; i++)
            got[ngot++] = f->taken[i];
        /* Keep pushing while it drains: they wait behind the spill. */
        if (pushed < 1100) {
            push(&q, ++pushed, 0, false);
            expect[nexpect++] = pushed;
        }
        if (!requeued && ngot >= 499) {
            /* Grain 499's batch failed: it goes back behind everything queued. */
            struct orch_grain_ref g = {.grain = 499, .parent = 49, .seq = 499, .in0_state = -1};
            assert_int_equal(orch_queue_requeue(&q, &g, 5000, false), 0);
            expect[nexpect++] = 499;
            requeued = true;
        }
    }
    assert_int_equal(ngot, nexpect);
    for (int i = 0; i < ngot; i++)
        assert_int_equal(got[i], expect[i]);
    assert_int_equal(q.spilled, 0);
    assert_int_equal(q.rd, 0); /* drained: the file starts over */
    assert_int_equal(q.wr, 0);
    orch_queue_free(&q);
    assert_false(q.spill_open);
    assert_int_equal(q.window, 8); /* kept for reuse */
    free(f);
}

/* What an entry says survives the spill: a solo entry still runs alone, a stale one is
 * still consumed without being added, and the grain's fields come back as they went. */
static void test_spill_fields(void **state)
{
    struct orch_queue q = {.window = 4};
    struct fake *f = fake_new();
    for (int i = 1; i <= 20; i++)
        push(&q, i, 7, i == 10);
    f->stale[9] = true;
    f->stale[11] = true;
    assert_int_equal(reserve(&q, f, 8, 0, false), 4);
    assert_string_equal(taken(f), "1 2 3 4");
    assert_int_equal(reserve(&q, f, 8, 0, false), 4);
    assert_string_equal(taken(f), "5 6 7 8");
    /* 9 stale (consumed), then solo 10 into an empty batch: alone. */
    assert_int_equal(reserve(&q, f, 8, 0, false), 1);
    assert_string_equal(taken(f), "10");
    const struct orch_queue_entry *e = &q.v[q.head];
    assert_int_equal(e->g.grain, 11);
    assert_int_equal(e->g.entity, 111);
    assert_int_equal(e->g.parent, 7);
    assert_int_equal(e->g.seq, 11);
    assert_int_equal(e->g.in0_state, -1);
    /* Half the window is still there: no read-back; 11 is stale, 12 is added. */
    assert_int_equal(reserve(&q, f, 100, 0, false), 1);
    assert_string_equal(taken(f), "12");
    /* Empty: the rest comes back, 4 at most. */
    assert_int_equal(reserve(&q, f, 100, 0, false), 4);
    assert_string_equal(taken(f), "13 14 15 16");
    orch_queue_free(&q);
    free(f);
}

/* A spill that cannot be made (its directory is gone) fails the push, saying which file
 * and why, and the queue is as it was; with a directory, a million entries keep the array at the window. */
static void test_spill_error_and_bound(void **state)
{
    struct orch_queue q = {.window = 2, .spill_dir = "/nonexistent/orch-test"};
    struct fake *f = fake_new();
    push(&q, 1, 0, false);
    push(&q, 2, 0, false);
    struct orch_queue_entry e = {.g = {.grain = 3, .in0_state = -1}};
    orch_error_set(ORCH_ENOTFOUND, "an older detail");
    assert_int_equal(orch_queue_push(&q, &e), -ENOENT);
    assert_string_equal(orch_error_detail(), "the ready queue's spill file in "
                                             "/nonexistent/orch-test: open: No such file or "
                                             "directory");
    assert_int_equal(orch_queue_count(&q), 2);
    assert_int_equal(reserve(&q, f, 5, 0, false), 2);
    orch_queue_free(&q);

    q = (struct orch_queue){.window = 64};
    for (int i = 1; i <= 1000000; i++) {
        struct orch_queue_entry x = {.g = {.grain = i % NGRAINS, .seq = i, .in0_state = -1}};
        assert_int_equal(orch_queue_push(&q, &x), 0);
    }
    assert_true(q.cap <= 128);
    assert_int_equal(orch_queue_count(&q), 1000000);
    int64_t seq = 0;
    while (orch_queue_count(&q) > 0) {
        assert_int_equal(orch_queue_refill(&q), 0);
        assert_true(q.len > 0 && q.len <= 64 && q.cap <= 128);
        for (size_t i = q.head; i < q.head + q.len; i++)
            assert_int_equal(q.v[i].g.seq, ++seq);
        q.head += q.len; /* consume the window as a reservation would */
        q.len = 0;
    }
    assert_int_equal(seq, 1000000);
    orch_queue_free(&q);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elastic),
        cmocka_unit_test(test_parent),
        cmocka_unit_test(test_parent_stale_head),
        cmocka_unit_test(test_solo_elastic),
        cmocka_unit_test(test_solo_parent),
        cmocka_unit_test(test_solo_behind_stale),
        cmocka_unit_test(test_batch_bytes_cut),
        cmocka_unit_test(test_batch_bytes_big),
        cmocka_unit_test(test_batch_bytes_stale),
        cmocka_unit_test(test_stale),
        cmocka_unit_test(test_error),
        cmocka_unit_test(test_requeue_order),
        cmocka_unit_test(test_growth_compaction),
        cmocka_unit_test(test_shrink),
        cmocka_unit_test(test_spill_order),
        cmocka_unit_test(test_spill_fields),
        cmocka_unit_test(test_spill_error_and_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
