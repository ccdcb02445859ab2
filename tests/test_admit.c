/* test_admit.c — unit tests of the rule that admits roots by the rate the pipeline drains
 * them (orch_driver_admit_quota, engine/driver/admit.c; docs/tuning.md "Admission"): the
 * lead the reading calls keep, the backlog no call may pass, the room under half the grain
 * budget with the measured fan-out, the probe before any fan-out is known, and a job with
 * nothing unsealed always getting a root. Each test names a mutation of admit.c that it
 * catches. The numbers are admit.c's: a chunk of 256 roots, a lead of 200 ms, a backlog
 * of 2,000 ms, a probe of 16 roots. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>

#include "driver_int.h"

enum { CHUNK = 256, BIG = 1000000 };

/* A job far from its budgets whose reading calls have measured nothing and queue nothing,
 * and whose domain has no expansion. */
static struct orch_admit_view idle_view(void)
{
    return (struct orch_admit_view){.max_unsealed = BIG, .lead_ms = -1};
}

/* Unmeasured readers: a chunk less what they already queue (mutations: ignore the queue;
 * admit nothing until measured). */
static void test_lead_unmeasured(void **state)
{
    (void)state;
    struct orch_admit_view v = idle_view();
    assert_int_equal(orch_driver_admit_quota(&v), CHUNK);
    v.lead_queued = 200;
    v.unsealed = 200;
    assert_int_equal(orch_driver_admit_quota(&v), CHUNK - 200);
    v.lead_queued = CHUNK;
    v.unsealed = CHUNK;
    assert_int_equal(orch_driver_admit_quota(&v), 0);
}

/* Measured readers: the roots that fill their lead, as admit_view computed them, never more
 * than a chunk (mutations: a chunk whatever the lead; the lead's room ignored). */
static void test_lead_measured(void **state)
{
    (void)state;
    struct orch_admit_view v = idle_view();
    v.lead_ms = 150;
    v.lead_room = 40;
    v.unsealed = 10;
    assert_int_equal(orch_driver_admit_quota(&v), 40);
    v.lead_room = 0;
    assert_int_equal(orch_driver_admit_quota(&v), 0);
    v.lead_room = 100000;
    assert_int_equal(orch_driver_admit_quota(&v), CHUNK);
}

/* Backlog: a call anywhere with 2 s or more of queued work stops admission, whatever the
 * lead says; just under it does not (mutations: no backlog gate; > instead of >=; the gate
 * in seconds). */
static void test_backlog(void **state)
{
    (void)state;
    struct orch_admit_view v = idle_view();
    v.lead_ms = 0;
    v.lead_room = CHUNK;
    v.unsealed = 500;
    v.backlog_ms = 1999.0;
    assert_int_equal(orch_driver_admit_quota(&v), CHUNK);
    v.backlog_ms = 2000.0;
    assert_int_equal(orch_driver_admit_quota(&v), 0);
    v.backlog_ms = 60000.0;
    assert_int_equal(orch_driver_admit_quota(&v), 0);
}

/* Room: with a measured fan-out, the roots admitted (those still to expand counted as if
 * expanded) keep the grains under half the budget (mutations: the whole budget; roots
 * still to expand not counted; the fan-out taken as 1). */
static void test_room_by_fanout(void **state)
{
    (void)state;
    struct orch_admit_view v = idle_view();
    v.expands = true;
    v.max_unsealed = 10000; /* soft: 5,000 */
    v.admitted = 20;
    v.unexpanded = 0;
    v.made = 20 * 53; /* 53 grains a root */
    v.unsealed = 1060;
    /* room 3,940 → 74 roots of 53 grains */
    assert_int_equal(orch_driver_admit_quota(&v), 74);
    /* 10 of the 20 roots not expanded yet: 530 grains to come */
    v.admitted = 30;
    v.unexpanded = 10;
    v.made = 20 * 53;
    assert_int_equal(orch_driver_admit_quota(&v), (3940 - 530) / 53);
    /* at half the budget: none */
    v.unsealed = 5000;
    assert_int_equal(orch_driver_admit_quota(&v), 0);
}

/* A small budget (under four chunks) is used whole, not halved (mutation: always half).
 * 20 roots made 3 grains each, all unsealed. */
static void test_room_small_budget(void **state)
{
    (void)state;
    struct orch_admit_view v = idle_view();
    v.admitted = 20;
    v.made = 60;
    v.unsealed = 60;
    v.max_unsealed = 100;
    assert_int_equal(orch_driver_admit_quota(&v), (100 - 60) / 3);
    v.max_unsealed = 4 * CHUNK;
    assert_int_equal(orch_driver_admit_quota(&v), (2 * CHUNK - 60) / 3);
}

/* No fan-out known yet in a domain with an expansion: at most 16 roots wait for it
 * (mutations: no probe; the probe ignoring the roots already waiting). */
static void test_probe(void **state)
{
    (void)state;
    struct orch_admit_view v = idle_view();
    v.expands = true;
    v.unsealed = 1;
    assert_int_equal(orch_driver_admit_quota(&v), 16);
    v.admitted = 10;
    v.unexpanded = 10;
    assert_int_equal(orch_driver_admit_quota(&v), 6);
    v.admitted = 16;
    v.unexpanded = 16;
    assert_int_equal(orch_driver_admit_quota(&v), 0);
}

/* Nothing unsealed: a root enters whatever every gate says, so that admission never
 * stalls (mutation: the floor dropped, or applied with grains unsealed). */
static void test_never_stalls(void **state)
{
    (void)state;
    struct orch_admit_view v = idle_view();
    v.backlog_ms = 1e9;
    v.lead_ms = 500;
    v.lead_room = 0;
    v.max_unsealed = 1;
    assert_int_equal(orch_driver_admit_quota(&v), 1);
    v.unsealed = 1;
    assert_int_equal(orch_driver_admit_quota(&v), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lead_unmeasured),  cmocka_unit_test(test_lead_measured),
        cmocka_unit_test(test_backlog),          cmocka_unit_test(test_room_by_fanout),
        cmocka_unit_test(test_room_small_budget), cmocka_unit_test(test_probe),
        cmocka_unit_test(test_never_stalls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
