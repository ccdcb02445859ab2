/* test_sizing.c — unit tests of the rule that sizes a dispatch (engine/driver/sizing.h):
 * a call starts at one grain and grows, slow grains go one at a time, fast ones by the
 * thousand, a dispatch is never more than the call's share of its queue nor over its bytes,
 * the figures follow a call whose grains change cost, and a dispatch stays within the room
 * left in the admission budgets that its answers fill. Each test names a mutation of
 * sizing.c that it catches. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "sizing.h"

#define T ORCH_SIZING_TARGET_MS

/* Settles k batches of n grains that took ms each, with bytes of inputs each. */
static void settle(struct orch_sizing *s, int k, int n, int64_t ms, int64_t bytes)
{
    for (int i = 0; i < k; i++)
        orch_sizing_add(s, n, ms, bytes);
}

/* Nothing measured: one grain, whatever is queued; then twice as many per settled batch
 * while nothing else bounds it (mutations: start at the share; grow by one). */
static void test_starts_at_one_and_grows(void **state)
{
    (void)state;
    struct orch_sizing s = {0};
    assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 0, NULL), 1);
    assert_true(orch_sizing_ms_per_grain(&s) < 0);
    /* What workers are started by: a worker per queued grain until a batch settles
     * (mutation: start from the cap), then the grown size. */
    assert_int_equal(orch_sizing_capacity(&s, T, 0, NULL), 1);
    int want = 1;
    for (int i = 0; i < 12; i++) {
        orch_sizing_add(&s, want, 0, 0); /* too fast for the clock: no bound from time */
        want = want * 2 > ORCH_SIZING_MAX ? ORCH_SIZING_MAX : want * 2;
        assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 0, NULL), want);
        assert_int_equal(orch_sizing_capacity(&s, T, 0, NULL), want);
    }
    assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 0, NULL), ORCH_SIZING_MAX);
}

/* A page of OCR (500 ms a grain) goes one at a time however long it runs; a grain of
 * 10 ms goes by about target / 10 once grown (mutations: ignore ms_per_grain; round the
 * bound up). */
static void test_slow_grains_one_at_a_time(void **state)
{
    (void)state;
    struct orch_sizing s = {0};
    settle(&s, 20, 1, 500, 0);
    assert_int_equal(orch_sizing_dispatch(&s, 1000, 1, T, 0, NULL), 1);
    assert_int_equal(orch_sizing_capacity(&s, T, 0, NULL), 1); /* a worker per grain */
    assert_true(orch_sizing_ms_per_grain(&s) > 499 && orch_sizing_ms_per_grain(&s) < 501);

    struct orch_sizing t = {0};
    settle(&t, 20, 2, 20, 0); /* 10 ms a grain */
    assert_int_equal(orch_sizing_dispatch(&t, 1000, 1, 50, 0, NULL), 5);
    assert_int_equal(orch_sizing_dispatch(&t, 1000, 1, 100, 0, NULL), 10);
    assert_int_equal(orch_sizing_dispatch(&t, 1000, 1, 5, 0, NULL), 1); /* less than a grain */
}

/* A grain of a few µs (1,000 in 4 ms) fills a dispatch up to the cap (mutation: no cap). */
static void test_fast_grains_by_the_thousand(void **state)
{
    (void)state;
    struct orch_sizing s = {0};
    settle(&s, 20, 1000, 4, 0);
    assert_int_equal(orch_sizing_dispatch(&s, 1000000, 1, T, 0, NULL), ORCH_SIZING_MAX);
    assert_int_equal(orch_sizing_dispatch(&s, 1000000, 1, 1, 0, NULL), 250); /* 1 ms of work */
}

/* Never more than the call's share: ceil(queued / workers), so that every worker gets
 * work (mutations: floor instead of ceil; ignore workers). */
static void test_fair_share(void **state)
{
    (void)state;
    struct orch_sizing s = {0};
    settle(&s, 20, 1000, 1, 0);
    assert_int_equal(orch_sizing_dispatch(&s, 100, 4, T, 0, NULL), 25);
    assert_int_equal(orch_sizing_dispatch(&s, 101, 4, T, 0, NULL), 26);
    assert_int_equal(orch_sizing_dispatch(&s, 3, 4, T, 0, NULL), 1);
    assert_int_equal(orch_sizing_dispatch(&s, 1, 1, T, 0, NULL), 1);
    assert_int_equal(orch_sizing_dispatch(&s, 7000, 1, T, 0, NULL), ORCH_SIZING_MAX);
}

/* Bytes: within batch_bytes when set, else ORCH_SIZING_MAX_BYTES (mutations: ignore
 * bytes_per_grain; take batch_bytes when it is 0). */
static void test_bytes(void **state)
{
    (void)state;
    struct orch_sizing s = {0};
    settle(&s, 20, 100, 1, 100 * 1000); /* 1,000 bytes a grain, fast */
    assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 10000, NULL), 10);
    assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 500, NULL), 1);
    assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 0, NULL), ORCH_SIZING_MAX);
    struct orch_sizing big = {0};
    settle(&big, 20, 10, 1, 10 * ((int64_t)1 << 20)); /* 1 MiB a grain */
    assert_int_equal(orch_sizing_dispatch(&big, 100000, 1, T, 0, NULL),
                     (int)(ORCH_SIZING_MAX_BYTES >> 20));
}

/* The figures follow a call whose grains get slower: a few batches later the rule sizes
 * by the new cost (mutation: plain sums without decay, which keep the old cost's weight). */
static void test_follows_a_change(void **state)
{
    (void)state;
    struct orch_sizing s = {0};
    settle(&s, 50, 1000, 5, 0); /* 5 µs a grain */
    assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 0, NULL), ORCH_SIZING_MAX);
    settle(&s, 1, 4096, 4096 * 100, 0); /* now 100 ms a grain */
    assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 0, NULL), 1);
    assert_true(orch_sizing_ms_per_grain(&s) > 50);
}

/* Within the budgets: an expand whose grains add 50 unsealed grains each takes what the
 * room left holds, one grain when there is none; a budget it does not fill bounds nothing
 * (mutations: ignore the room; take the growth per batch for the growth per grain). */
static void test_room_in_the_budgets(void **state)
{
    (void)state;
    struct orch_sizing s = {0};
    for (int i = 0; i < 20; i++) {
        orch_sizing_add(&s, 100, 1, 0);
        orch_sizing_add_growth(&s, 100, 100 * 50 - 100, 0); /* 50 children, 1 sealed */
    }
    struct orch_sizing_room room = {.grains = 4900, .bytes = ORCH_SIZING_NO_ROOM_LIMIT};
    assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 0, &room), 100);
    room.grains = 0;
    assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 0, &room), 1);
    room.grains = ORCH_SIZING_NO_ROOM_LIMIT;
    room.bytes = 10; /* it adds no bytes */
    assert_int_equal(orch_sizing_dispatch(&s, 100000, 1, T, 0, &room), ORCH_SIZING_MAX);
    /* A map that adds 1,000 live bytes a grain, with 50,000 bytes of room. */
    struct orch_sizing m = {0};
    for (int i = 0; i < 20; i++) {
        orch_sizing_add(&m, 10, 1, 0);
        orch_sizing_add_growth(&m, 10, 0, 10 * 1000);
    }
    room = (struct orch_sizing_room){.grains = 0, .bytes = 50000};
    assert_int_equal(orch_sizing_dispatch(&m, 100000, 1, T, 0, &room), 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_starts_at_one_and_grows),
        cmocka_unit_test(test_slow_grains_one_at_a_time),
        cmocka_unit_test(test_fast_grains_by_the_thousand),
        cmocka_unit_test(test_fair_share),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_follows_a_change),
        cmocka_unit_test(test_room_in_the_budgets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
