/* test_stream.c — the answer collector's stream hook (udfs/orch_udf_host.h,
 * orch_udf_stream): what a streaming expansion hands the worker while its UDF runs.
 *
 * Each test can fail: with stream_check ignoring max_children, test_by_count sees one
 * flush of everything at the end instead of chunks of 3; without the flush in host_fail,
 * test_failure_flushes sees the children made before the failure lost; with the base not
 * moved on, test_by_count's report answer starts at 0; with the hash not covering a
 * failed child's message, test_hash tells two failed children apart by nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "orch_udf.h"
#include "orch_udf_host.h"

/* What the hook saw: each flush's record, first ordinal, count, and values in order. */
struct seen {
    int nflush;
    size_t first[16], n[16];
    char values[256];
    int refuse_from; /* flush number from which the hook refuses (-1: never) */
};

static int hook(void *ctx, const struct orch_udf_answers *a, size_t i, size_t n)
{
    struct seen *s = ctx;
    if (s->refuse_from >= 0 && s->nflush >= s->refuse_from)
        return 1;
    const struct orch_udf_answer *r = &a->rec[i];
    s->first[s->nflush] = r->base;
    s->n[s->nflush++] = n;
    for (size_t c = 0; c < n; c++) {
        const struct orch_udf_out *v = &r->children[c * a->nout];
        strncat(s->values, v->set ? (const char *)v->data : "?", v->len);
        strcat(s->values, " ");
    }
    return 0;
}

static void start(struct orch_udf_answers *a, struct orch_udf_batch *b,
                  struct orch_udf_record *rec, struct seen *s, size_t max_children)
{
    memset(s, 0, sizeof *s);
    s->refuse_from = -1;
    assert_int_equal(orch_udf_answers_init(a, "t", ORCH_UDF_OP_EXPAND, 1), 0);
    struct orch_udf_stream st = {.max_children = max_children,
                                 .max_bytes = 1 << 20,
                                 .max_ms = 1000000,
                                 .flush = hook,
                                 .ctx = s};
    orch_udf_answers_stream(a, &st);
    memset(rec, 0, sizeof *rec);
    b->n = 1;
    b->rec = rec;
    assert_int_equal(orch_udf_answers_reset(a, b), 0);
}

static void child(struct orch_udf_batch *b, const char *v)
{
    assert_int_equal(orch_udf_child(b, 0), 0);
    assert_int_equal(orch_udf_emit_str(b, 0, 0, v), 0);
}

/* Chunks of 3 complete children: a child is complete once the next one begins. */
static void test_by_count(void **state)
{
    (void)state;
    struct orch_udf_answers a;
    struct orch_udf_batch b;
    struct orch_udf_record rec;
    struct seen s;
    start(&a, &b, &rec, &s, 3);
    const char *v[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
    for (int k = 0; k < 8; k++)
        child(&b, v[k]);
    assert_int_equal(orch_udf_answers_finish(&a), 0);
    assert_int_equal(s.nflush, 2);
    assert_int_equal(s.first[0], 0);
    assert_int_equal(s.n[0], 3);
    assert_int_equal(s.first[1], 3);
    assert_int_equal(s.n[1], 3);
    assert_string_equal(s.values, "a b c d e f ");
    /* The answer holds the rest: ordinals 6 and 7. */
    assert_int_equal(a.rec[0].outcome, ORCH_UDF_OK);
    assert_int_equal(a.rec[0].base, 6);
    assert_int_equal(a.rec[0].nchildren, 2);
    assert_memory_equal(a.rec[0].children[1].data, "h", 1);
    orch_udf_answers_free(&a);
}

/* A RecordFailure after children: the complete ones are handed over first (they stay
 * published: DESIGN §4), then the answer is the failure. */
static void test_failure_flushes(void **state)
{
    (void)state;
    struct orch_udf_answers a;
    struct orch_udf_batch b;
    struct orch_udf_record rec;
    struct seen s;
    start(&a, &b, &rec, &s, 256);
    child(&b, "x");
    child(&b, "y");
    assert_int_equal(orch_udf_fail_record(&b, 0, "broke"), 0);
    assert_int_equal(orch_udf_answers_finish(&a), 0);
    assert_int_equal(s.nflush, 1);
    assert_int_equal(s.n[0], 2);
    assert_string_equal(s.values, "x y ");
    assert_int_equal(a.rec[0].outcome, ORCH_UDF_RECORD_FAILURE);
    assert_string_equal(a.rec[0].msg, "broke");
    orch_udf_answers_free(&a);
}

/* A hook that refuses: the collector keeps every child from then on, as without one. */
static void test_refused(void **state)
{
    (void)state;
    struct orch_udf_answers a;
    struct orch_udf_batch b;
    struct orch_udf_record rec;
    struct seen s;
    start(&a, &b, &rec, &s, 2);
    s.refuse_from = 1;
    const char *v[] = {"a", "b", "c", "d", "e", "f"};
    for (int k = 0; k < 6; k++)
        child(&b, v[k]);
    assert_int_equal(orch_udf_answers_finish(&a), 0);
    assert_int_equal(s.nflush, 1);
    assert_int_equal(a.rec[0].base, 2);
    assert_int_equal(a.rec[0].nchildren, 4);
    orch_udf_answers_free(&a);
}

/* The hash of a child: its values, or a failed child's message; stable. */
static void test_hash(void **state)
{
    (void)state;
    struct orch_udf_out one = {(void *)"ab", 2, true}, two = {(void *)"ac", 2, true};
    struct orch_udf_out pair[2] = {{(void *)"a", 1, true}, {(void *)"b", 1, true}};
    assert_true(orch_udf_child_hash(&one, 1, NULL) == orch_udf_child_hash(&one, 1, NULL));
    assert_true(orch_udf_child_hash(&one, 1, NULL) != orch_udf_child_hash(&two, 1, NULL));
    /* Port boundaries count: "a"|"b" is not "ab". */
    assert_true(orch_udf_child_hash(pair, 2, NULL) != orch_udf_child_hash(&one, 1, NULL));
    assert_true(orch_udf_child_hash(NULL, 1, "bad page") !=
                orch_udf_child_hash(NULL, 1, "other"));
    assert_true(orch_udf_child_hash(NULL, 1, "ab") != orch_udf_child_hash(&one, 1, NULL));
}

/* A slow expander: a child complete 2 ms after the one before it (the UDF's own pace,
 * standing for a page rendered or a frame decoded) is handed over at once, in a chunk of
 * its own, with gap_ms 1, and the next slow one with the quick ones before it (mutation: child_complete not called from the emit, and the slow child
 * waits for the next child to begin). */
static void test_gap(void **state)
{
    (void)state;
    struct orch_udf_answers a;
    struct orch_udf_batch b;
    struct orch_udf_record rec;
    struct seen s;
    start(&a, &b, &rec, &s, 100);
    a.stream.gap_ms = 1;
    const struct timespec pause = {.tv_nsec = 2 * 1000 * 1000};
    nanosleep(&pause, NULL);
    child(&b, "slow0");
    assert_int_equal(s.nflush, 1); /* at its completion, not at the next child */
    assert_int_equal(s.n[0], 1);
    child(&b, "quick1");
    child(&b, "quick2");
    nanosleep(&pause, NULL);
    child(&b, "slow3");
    /* however the quick ones went (a busy machine may pause between them), the slow one
     * is handed over at its completion, with every child before it */
    assert_int_equal(s.first[s.nflush - 1] + s.n[s.nflush - 1], 4);
    assert_string_equal(s.values, "slow0 quick1 quick2 slow3 ");
    assert_int_equal(orch_udf_answers_finish(&a), 0);
    orch_udf_answers_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_count),
        cmocka_unit_test(test_failure_flushes),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_hash),
        cmocka_unit_test(test_gap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
