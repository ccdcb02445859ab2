/* test_propagate.c — unit tests of the propagation rules and the acceptance rule
 * (engine/prop/propagate.h) on a real job (orch_job_create: SQLite and LMDB in a scratch
 * directory), with no driver and no worker: the test plays the driver, taking READY grains
 * from the ready hook, putting them in flight (an open attempt) and handing propagation the
 * answers a worker would send (orch_prop_report).
 *
 *   acceptance   a report with an old or a future generation, or a second report for a
 *                grain already sealed, is refused and changes nothing; the right one
 *                seals the grain and publishes its items (DESIGN §4);
 *   rules        RecordFailure → item Failed, downstream sealed Suppressed unrun; expand
 *                with zero children → reduce READY on an empty list; expand Dropped →
 *                reduce Dropped; filter false → Dropped child left out of the reduce, in
 *                ordinal order; GroupFailure → barrier, queued siblings sealed Suppressed,
 *                an in-flight sibling's report sealed Suppressed, and one whose attempt
 *                failed sealed Suppressed by orch_prop_barred (DESIGN §3, §4). */
#define _GNU_SOURCE /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orch_error.h"
#include "orch_job.h"
#include "orch_payload.h"
#include "orch_store.h"
#include "propagate.h"
#include "testutil.h" /* after orch_store.h: its store helper */

/* ---- fixture: a job, a prop, and the grains the ready hook handed out ------------------ */

#define MAX_READY 256

struct fx {
    char dir[512];
    char job_dir[600];
    struct orch_job *job;
    orch_prop *prop;
    struct orch_grain_ref ready[MAX_READY];
    int nready;
};

static const char pipeline[] = "pipeline unit\n"
                               "domain doc\n"
                               "domain w in doc\n"
                               "source doc.line = lines(\"in.txt\")\n"
                               "call up   = upper()\n"
                               "call low  = identity()\n"
                               "call cut  = split(sep=\" \")\n"
                               "call keep = nonempty()\n"
                               "call grp  = identity()\n"
                               "call join = concat(sep=\"+\")\n"
                               "doc.u  = up(doc.line)\n"
                               "doc.v  = low(doc.u)\n"
                               "w.raw  = expand cut(doc.line)\n"
                               "w.k    = filter keep(w.raw)\n"
                               "w.g    = grp(w.raw)\n"
                               "doc.j  = reduce join(w.k)\n";

static int on_ready(void *ctx, const struct orch_grain_ref *g)
{
    struct fx *f = ctx;
    assert_true(f->nready < MAX_READY);
    f->ready[f->nready++] = *g;
    return 0;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f || orch_test_mkdtemp(f->dir, sizeof f->dir, "prop") < 0)
        return -1;
    char path[700];
    snprintf(path, sizeof path, "%s/in.txt", f->dir);
    FILE *in = fopen(path, "w");
    if (!in)
        return -1;
    fclose(in);
    snprintf(path, sizeof path, "%s/p.orch", f->dir);
    FILE *p = fopen(path, "w");
    if (!p)
        return -1;
    fputs(pipeline, p);
    fclose(p);
    snprintf(f->job_dir, sizeof f->job_dir, "%s/job", f->dir);
    if (orch_job_create(f->job_dir, path, stderr, &f->job) < 0) {
        fprintf(stderr, "orch_job_create: %s\n", orch_error_detail());
        return -1;
    }
    struct orch_prop_hooks hooks = {.ctx = f, .ready = on_ready};
    if (orch_prop_open(f->job->plan, f->job->store, &hooks, &f->prop) < 0)
        return -1;
    if (orch_store_begin(f->job->store) < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (orch_store_in_txn(f->job->store))
        orch_store_rollback(f->job->store);
    orch_prop_free(f->prop);
    orch_job_close(f->job);
    int rc = orch_test_rmtree(f->dir);
    free(f);
    return rc;
}

/* ---- helpers --------------------------------------------------------------------------- */

static int call_of(struct fx *f, const char *name)
{
    int c = orch_plan_find_call(f->job->plan, name);
    assert_true(c >= 0);
    return c;
}

static uint64_t put(struct fx *f, const char *s)
{
    uint64_t id;
    assert_int_equal(orch_payload_put(f->job->payloads, s, strlen(s), &id), 0);
    return id;
}

static char *get(struct fx *f, uint64_t id)
{
    void *data;
    size_t len;
    assert_int_equal(orch_payload_get(f->job->payloads, id, &data, &len), 0);
    char *s = malloc(len + 1);
    memcpy(s, data, len);
    s[len] = '\0';
    free(data);
    return s;
}

/* One value of the job's store (testutil.h). */
#define sql1(f, ...) orch_test_sql1((f)->job->store, __VA_ARGS__)

/* Everything a report could change, as one string. */
static char *snapshot(struct fx *f)
{
    return strdup(sql1(
        f,
        "SELECT (SELECT group_concat(x, ';') FROM (SELECT port_id || ',' || entity_id || ',' "
        "|| state || ',' || coalesce(payload_id, '') AS x FROM item ORDER BY 1)) || '#' || "
        "(SELECT group_concat(x, ';') FROM (SELECT id || ',' || phase || ',' || generation || "
        "',' || coalesce(outcome, '') || ',' || pending AS x FROM grain ORDER BY id)) || '#' "
        "|| (SELECT count(*) FROM failure) || '#' || (SELECT count(*) FROM expansion) || '#' "
        "|| (SELECT count(*) FROM entity) || '#' || (SELECT count(*) FROM suppression)"));
}

/* The ready grain of call `name` handed out last. */
static struct orch_grain_ref take(struct fx *f, const char *name)
{
    int c = call_of(f, name);
    for (int i = f->nready - 1; i >= 0; i--)
        if (f->ready[i].call == c)
            return f->ready[i];
    fail_msg("no ready grain of call %s", name);
    return (struct orch_grain_ref){0};
}

static bool is_ready(struct fx *f, const char *name, int64_t entity)
{
    int c = call_of(f, name);
    for (int i = 0; i < f->nready; i++)
        if (f->ready[i].call == c && f->ready[i].entity == entity)
            return true;
    return false;
}

/* Puts g in flight with generation gen, as the driver's reservation would: its row stays
 * READY, an open attempt says that it runs. */
static void fly(struct fx *f, struct orch_grain_ref *g, uint32_t gen)
{
    char sql[300];
    snprintf(sql, sizeof sql,
             "UPDATE grain SET generation = %u WHERE id = %lld AND phase = 'ready';"
             "INSERT INTO attempt (grain_id, generation, started_at) VALUES (%lld, %u, 0)",
             gen, (long long)g->grain, (long long)g->grain, gen);
    assert_int_equal(orch_store_exec(f->job->store, sql), 0);
    g->generation = gen;
}

static const char *item(struct fx *f, const char *port, int64_t e)
{
    return sql1(f,
                "SELECT i.state FROM item i JOIN port p ON p.id = i.port_id "
                "WHERE p.qualified = '%s' AND i.entity_id = %lld",
                port, (long long)e);
}

static const char *grain_state(struct fx *f, int64_t grain)
{
    return sql1(f,
                "SELECT phase || ',' || coalesce(outcome, '') || ',' || generation "
                "FROM grains WHERE grain_id = %lld",
                (long long)grain);
}

static int64_t admit(struct fx *f, int64_t ordinal, const char *value)
{
    int64_t e;
    assert_int_equal(orch_prop_admit_root(f->prop, orch_plan_find_domain(f->job->plan, "doc"),
                                          ordinal, value, put(f, value),
                                          (int64_t)strlen(value), &e),
                     0);
    return e;
}

static bool accept(struct fx *f, const struct orch_grain_ref *g,
                   const struct orch_wire_answer *a, bool *suppressed)
{
    struct orch_verdict v;
    assert_int_equal(orch_prop_report(f->prop, g, a, 0, &v), 0);
    if (suppressed)
        *suppressed = v.kind == ORCH_VERDICT_SUPPRESSED;
    return v.kind != ORCH_VERDICT_STALE;
}

/* ---- acceptance ------------------------------------------------------------------------ */

static void test_stale_reports_change_nothing(void **state)
{
    struct fx *f = *state;
    int64_t e = admit(f, 0, "hello");
    assert_true(is_ready(f, "up", e));
    struct orch_grain_ref g = take(f, "up");
    assert_int_equal(g.entity, e);
    assert_int_equal(g.generation, 0);
    fly(f, &g, 3);                                /* as after three retries */
    uint64_t out = put(f, "HELLO");
    char *before = snapshot(f);
    int nready = f->nready;

    struct orch_wire_answer a = {.grain = (uint64_t)g.grain,
                                 .outcome = ORCH_WIRE_OK,
                                 .message = "",
                                 .nchild = 1,
                                 .nout = 1,
                                 .payload = &out};
    /* generation - 1 and generation + 1, as both the report and the driver's view say */
    uint32_t gens[] = {2, 4, 0};
    for (size_t i = 0; i < sizeof gens / sizeof gens[0]; i++) {
        struct orch_grain_ref r = g;
        r.generation = gens[i];
        a.generation = gens[i];
        assert_false(accept(f, &r, &a, NULL));
    }
    /* (A report whose grain or generation differs from the batch's is refused by the
     * pool before it reaches propagation: tests/test_pool.c.) */
    /* (Nor does a report for a grain that is READY and not in flight reach it: the pool
     * takes only reports for the batch it sent. The row of a grain in flight reads READY,
     * so the store cannot tell the two apart.) */
    /* a stale orch_prop_fail changes nothing either */
    bool accepted = true;
    struct orch_grain_ref r = g;
    r.generation = 2;
    assert_int_equal(orch_prop_fail(f->prop, &r, ORCH_FAILURE_EXHAUSTED, "stale", &accepted),
                     0);
    assert_false(accepted);

    char *after = snapshot(f);
    assert_string_equal(before, after);
    assert_int_equal(f->nready, nready);
    free(after);

    /* the right one: accepted, sealed, published; downstream made READY */
    a.grain = (uint64_t)g.grain;
    a.generation = g.generation;
    assert_true(accept(f, &g, &a, NULL));
    assert_string_equal(grain_state(f, g.grain), "sealed,ok,3");
    assert_string_equal(item(f, "doc.u", e), "present");
    assert_true(is_ready(f, "low", e));
    char *v = get(f, (uint64_t)atoll(sql1(f, "SELECT payload_id FROM item i JOIN port p ON "
                                             "p.id = i.port_id WHERE p.qualified = 'doc.u'")));
    assert_string_equal(v, "HELLO");
    free(v);

    /* a duplicate of it: refused, nothing changes */
    char *sealed = snapshot(f);
    nready = f->nready;
    assert_false(accept(f, &g, &a, NULL));
    after = snapshot(f);
    assert_string_equal(sealed, after);
    assert_int_equal(f->nready, nready);
    free(sealed);
    free(after);
    free(before);
}

/* ---- rules ----------------------------------------------------------------------------- */

static void test_record_failure_suppresses_downstream(void **state)
{
    struct fx *f = *state;
    int64_t e = admit(f, 0, "x");
    struct orch_grain_ref g = take(f, "up");
    fly(f, &g, 0);
    struct orch_wire_answer a = {.grain = (uint64_t)g.grain,
                                 .generation = 0,
                                 .outcome = ORCH_WIRE_RECORD_FAILURE,
                                 .message = "bad record"};
    assert_true(accept(f, &g, &a, NULL));
    assert_string_equal(item(f, "doc.u", e), "failed");
    assert_string_equal(sql1(f,
                             "SELECT kind || ':' || message FROM failure WHERE grain_id = %lld",
                             (long long)g.grain),
                        "record:bad record");
    /* rule 1: low never became READY; sealed Suppressed, its output Suppressed */
    assert_false(is_ready(f, "low", e));
    assert_string_equal(sql1(f,
                             "SELECT phase || ',' || outcome || ',' || coalesce(ready_seq, "
                             "'null') FROM grain WHERE call_id = %d AND entity_id = %lld",
                             call_of(f, "low"), (long long)e),
                        "sealed,suppressed,null");
    assert_string_equal(item(f, "doc.v", e), "suppressed");
}

static void test_expand_zero_dropped_and_ordered_reduce(void **state)
{
    struct fx *f = *state;
    int64_t e0 = admit(f, 0, "");       /* zero children */
    int64_t e1 = admit(f, 1, "a b c");  /* three, the middle one filtered out */
    int64_t e2 = admit(f, 2, "dropme"); /* the expand drops */
    struct orch_grain_ref cut[3];
    int n = 0;
    for (int i = 0; i < f->nready; i++)
        if (f->ready[i].call == call_of(f, "cut"))
            cut[n++] = f->ready[i];
    assert_int_equal(n, 3);

    /* e0: Succeeded with no children → the reduce is READY at once, on an empty list */
    fly(f, &cut[0], 0);
    struct orch_wire_answer a = {.grain = (uint64_t)cut[0].grain,
                                 .outcome = ORCH_WIRE_OK,
                                 .message = "",
                                 .nchild = 0,
                                 .nout = 1};
    assert_true(accept(f, &cut[0], &a, NULL));
    assert_string_equal(sql1(f,
                             "SELECT state || nchildren FROM expansion WHERE parent_id = %lld",
                             (long long)e0),
                        "succeeded0");
    assert_true(is_ready(f, "join", e0));
    struct orch_prop_inputs in = {0};
    struct orch_grain_ref rj = take(f, "join");
    assert_int_equal(orch_prop_inputs(f->prop, &rj, &in), 0);
    assert_int_equal(in.nval[0], 0);
    assert_int_equal(in.nvals, 0);

    /* e2: Dropped → the reduce is sealed Dropped without becoming READY */
    fly(f, &cut[2], 0);
    a.grain = (uint64_t)cut[2].grain;
    a.outcome = ORCH_WIRE_DROP;
    assert_true(accept(f, &cut[2], &a, NULL));
    assert_string_equal(sql1(f,
                             "SELECT state || nchildren FROM expansion WHERE parent_id = %lld",
                             (long long)e2),
                        "dropped0");
    assert_false(is_ready(f, "join", e2));
    assert_string_equal(item(f, "doc.j", e2), "dropped");

    /* e1: three children; the reduce waits on their filter items */
    fly(f, &cut[1], 0);
    uint64_t kids[3] = {put(f, "a"), put(f, ""), put(f, "c")};
    a.grain = (uint64_t)cut[1].grain;
    a.outcome = ORCH_WIRE_OK;
    a.nchild = 3;
    a.payload = kids;
    assert_true(accept(f, &cut[1], &a, NULL));
    assert_string_equal(
        sql1(f, "SELECT pending FROM grain WHERE call_id = %d AND entity_id = %lld",
             call_of(f, "join"), (long long)e1),
        "3");
    struct orch_grain_ref keep[3];
    n = 0;
    for (int i = 0; i < f->nready; i++)
        if (f->ready[i].call == call_of(f, "keep"))
            keep[n++] = f->ready[i];
    assert_int_equal(n, 3);
    /* answered out of order: last, first, middle (false) */
    int order[3] = {2, 0, 1};
    for (int k = 0; k < 3; k++) {
        struct orch_grain_ref *g = &keep[order[k]];
        fly(f, g, 0);
        struct orch_wire_answer fa = {.grain = (uint64_t)g->grain,
                                      .message = "",
                                      .outcome = order[k] == 1 ? ORCH_WIRE_KEEP_FALSE
                                                               : ORCH_WIRE_KEEP_TRUE};
        struct orch_verdict v;
        assert_int_equal(orch_prop_report(f->prop, g, &fa, kids[order[k]], &v), 0);
        assert_int_equal(v.kind, ORCH_VERDICT_SEALED);
        assert_int_equal(is_ready(f, "join", e1), k == 2);
    }
    rj = take(f, "join");
    assert_int_equal(rj.entity, e1);
    assert_int_equal(orch_prop_inputs(f->prop, &rj, &in), 0);
    assert_int_equal(in.nval[0], 2); /* the Dropped child left out */
    assert_int_equal(in.vals[0].payload, kids[0]);
    assert_int_equal(in.vals[1].payload, kids[2]);
    orch_prop_inputs_free(&in);
}

static void test_group_failure_barrier(void **state)
{
    struct fx *f = *state;
    int64_t e = admit(f, 0, "a b c d");
    struct orch_grain_ref cut = take(f, "cut");
    fly(f, &cut, 0);
    uint64_t kids[4] = {put(f, "a"), put(f, "b"), put(f, "c"), put(f, "d")};
    struct orch_wire_answer a = {.grain = (uint64_t)cut.grain,
                                 .outcome = ORCH_WIRE_OK,
                                 .message = "",
                                 .nchild = 4,
                                 .nout = 1,
                                 .payload = kids};
    assert_true(accept(f, &cut, &a, NULL));
    struct orch_grain_ref grp[4];
    int n = 0;
    for (int i = 0; i < f->nready; i++)
        if (f->ready[i].call == call_of(f, "grp"))
            grp[n++] = f->ready[i];
    assert_int_equal(n, 4);
    /* child 0 committed before; child 2 in flight; child 1 fails with GroupFailure;
     * child 3 is still queued */
    uint64_t out0 = put(f, "A");
    fly(f, &grp[0], 0);
    a = (struct orch_wire_answer){.grain = (uint64_t)grp[0].grain,
                                  .outcome = ORCH_WIRE_OK,
                                  .message = "",
                                  .nchild = 1,
                                  .nout = 1,
                                  .payload = &out0};
    assert_true(accept(f, &grp[0], &a, NULL));
    fly(f, &grp[2], 0);
    fly(f, &grp[1], 0);
    a = (struct orch_wire_answer){.grain = (uint64_t)grp[1].grain,
                                  .outcome = ORCH_WIRE_GROUP_FAILURE,
                                  .message = "bad parent"};
    assert_true(accept(f, &grp[1], &a, NULL));
    assert_string_equal(
        sql1(f, "SELECT grain_id FROM suppression WHERE parent_id = %lld", (long long)e),
        sql1(f, "SELECT %lld", (long long)grp[1].grain));
    assert_string_equal(grain_state(f, grp[3].grain), "sealed,suppressed,0");
    assert_string_equal(grain_state(f, grp[2].grain), "in_flight,,0");
    /* the in-flight sibling's answer is not committed */
    uint64_t out2 = put(f, "C");
    a = (struct orch_wire_answer){.grain = (uint64_t)grp[2].grain,
                                  .outcome = ORCH_WIRE_OK,
                                  .message = "",
                                  .nchild = 1,
                                  .nout = 1,
                                  .payload = &out2};
    bool suppressed = false;
    assert_true(accept(f, &grp[2], &a, &suppressed));
    assert_true(suppressed);
    assert_string_equal(grain_state(f, grp[2].grain), "sealed,suppressed,0");
    assert_string_equal(
        sql1(f, "SELECT group_concat(i.state, ',') FROM (SELECT i.state FROM item i "
                "JOIN port p ON p.id = i.port_id JOIN entity c ON c.id = i.entity_id "
                "WHERE p.qualified = 'w.g' ORDER BY c.ordinal) AS i"),
        "present,failed,suppressed,suppressed");
    assert_string_equal(sql1(f, "SELECT count(*) FROM failure"), "1");
}

/* orch_prop_barred: an in-flight grain whose attempt failed is sealed Suppressed when a
 * barrier covers its (call, parent), and left alone otherwise (another parent). */
static void test_barred_in_flight_sibling(void **state)
{
    struct fx *f = *state;
    int64_t e0 = admit(f, 0, "a b c");
    int64_t e1 = admit(f, 1, "x y");
    struct orch_grain_ref cut[2];
    int n = 0;
    for (int i = 0; i < f->nready; i++)
        if (f->ready[i].call == call_of(f, "cut"))
            cut[n++] = f->ready[i];
    assert_int_equal(n, 2);
    uint64_t kids[3] = {put(f, "a"), put(f, "b"), put(f, "c")};
    for (int k = 0; k < 2; k++) {
        fly(f, &cut[k], 0);
        struct orch_wire_answer a = {.grain = (uint64_t)cut[k].grain,
                                     .outcome = ORCH_WIRE_OK,
                                     .message = "",
                                     .nchild = k == 0 ? 3 : 2,
                                     .nout = 1,
                                     .payload = kids};
        assert_true(accept(f, &cut[k], &a, NULL));
    }
    struct orch_grain_ref g0[3], g1[2];
    int n0 = 0, n1 = 0;
    for (int i = 0; i < f->nready; i++) {
        if (f->ready[i].call != call_of(f, "grp"))
            continue;
        if (f->ready[i].parent == e0)
            g0[n0++] = f->ready[i];
        else if (f->ready[i].parent == e1)
            g1[n1++] = f->ready[i];
    }
    assert_int_equal(n0, 3);
    assert_int_equal(n1, 2);
    fly(f, &g0[0], 0);
    fly(f, &g0[2], 1);
    fly(f, &g1[0], 0);
    bool sealed = true;
    /* no barrier yet: nothing to do */
    assert_int_equal(orch_prop_barred(f->prop, &g0[2], &sealed), 0);
    assert_false(sealed);
    assert_string_equal(grain_state(f, g0[2].grain), "in_flight,,1");
    struct orch_wire_answer a = {.grain = (uint64_t)g0[0].grain,
                                 .outcome = ORCH_WIRE_GROUP_FAILURE,
                                 .message = "bad parent"};
    assert_true(accept(f, &g0[0], &a, NULL));
    /* a stale generation is refused even under the barrier */
    struct orch_grain_ref old = g0[2];
    old.generation = 0;
    assert_int_equal(orch_prop_barred(f->prop, &old, &sealed), 0);
    assert_false(sealed);
    assert_int_equal(orch_prop_barred(f->prop, &g0[2], &sealed), 0);
    assert_true(sealed);
    assert_string_equal(grain_state(f, g0[2].grain), "sealed,suppressed,1");
    assert_string_equal(item(f, "w.g", g0[2].entity), "suppressed");
    /* the other parent is not covered */
    assert_int_equal(orch_prop_barred(f->prop, &g1[0], &sealed), 0);
    assert_false(sealed);
    assert_string_equal(grain_state(f, g1[0].grain), "in_flight,,0");
    assert_string_equal(sql1(f, "SELECT count(*) FROM failure"), "1");
}

/* ---- reclaiming orphaned payloads ------------------------------------------------------ */

/* Payloads that no item names (outputs of rejected or never-committed reports) are
 * deleted; the named ones stay readable. More orphans than one page of the bounded walk,
 * on both sides of named ids. */
static void test_reclaim_orphans(void **state)
{
    struct fx *f = *state;
    enum { N = 5000 };
    uint64_t *ids = calloc(N, sizeof *ids);
    struct orch_iov *iov = calloc(N, sizeof *iov);
    assert_non_null(ids);
    assert_non_null(iov);
    for (int i = 0; i < N; i++)
        iov[i] = (struct orch_iov){"orphan", 6};
    assert_int_equal(orch_payload_put_many(f->job->payloads, iov, N / 2, ids), 0);
    admit(f, 0, "kept a");                        /* names one payload */
    assert_int_equal(orch_payload_put_many(f->job->payloads, iov, N - N / 2, ids + N / 2), 0);
    admit(f, 1, "kept b");
    assert_int_equal(orch_store_commit(f->job->store), 0);
    size_t deleted = 0;
    assert_int_equal(orch_job_reclaim(f->job, &deleted), 0);
    assert_int_equal(deleted, N);
    void *data;
    size_t len;
    assert_int_equal(orch_payload_get(f->job->payloads, ids[0], &data, &len), ORCH_ENOTFOUND);
    assert_int_equal(orch_payload_get(f->job->payloads, ids[N - 1], &data, &len),
                     ORCH_ENOTFOUND);
    assert_string_equal(sql1(f, "SELECT count(*) FROM item WHERE state = 'present'"), "2");
    struct orch_payload_stat st;
    assert_int_equal(orch_payload_stat(f->job->payloads, &st), 0);
    assert_int_equal(st.count, 2); /* the two source items' payloads */
    /* Nothing left to reclaim: a second pass deletes nothing. */
    assert_int_equal(orch_job_reclaim(f->job, &deleted), 0);
    assert_int_equal(deleted, 0);
    free(ids);
    free(iov);
}

/* Admits "hello", runs its `up` grain and reports its output "HELLO!" (6 bytes stored) as
 * `size` bytes, as the driver would (payload sizes kept): orch_prop_report's result, the
 * root in *e. */
static int report_sized(struct fx *f, uint64_t size, int64_t *e)
{
    orch_prop_set_payloads(f->prop, f->job->payloads);
    *e = admit(f, 0, "hello");
    struct orch_grain_ref g = take(f, "up");
    fly(f, &g, 0);
    uint64_t out = put(f, "HELLO!");
    struct orch_wire_answer a = {.grain = (uint64_t)g.grain,
                                 .generation = g.generation,
                                 .outcome = ORCH_WIRE_OK,
                                 .message = "",
                                 .nchild = 1,
                                 .nout = 1,
                                 .payload = &out,
                                 .size = &size};
    struct orch_verdict v;
    int rc = orch_prop_report(f->prop, &g, &a, 0, &v);
    if (rc == 0)
        assert_int_equal(v.kind, ORCH_VERDICT_SEALED);
    orch_prop_snapshot_end(f->prop);
    return rc;
}

/* The payload_size recorded for port `port` on entity e. */
static const char *size_of(struct fx *f, const char *port, int64_t e)
{
    return sql1(f,
                "SELECT i.payload_size FROM item i JOIN port p ON p.id = i.port_id "
                "WHERE p.qualified = '%s' AND i.entity_id = %lld",
                port, (long long)e);
}

/* A worker's report says how many bytes each output payload holds: its item records them
 * (the `items` view's payload_size) without reading the payload, as admission's item
 * records the size admission wrote. */
static void test_reported_size_recorded(void **state)
{
    struct fx *f = *state;
    int64_t e;
    assert_int_equal(report_sized(f, 6, &e), 0);
    assert_string_equal(size_of(f, "doc.line", e), "5");
    assert_string_equal(size_of(f, "doc.u", e), "6");
}

/* With ORCH_STORE_CHECKS the driver reads the size anyway, and one that is not the stored
 * one stops the turn as corrupt; without, the size reported is the one recorded. */
static void test_reported_size_wrong(void **state)
{
    struct fx *f = *state;
    int64_t e;
    int rc = report_sized(f, 7, &e);
    if (orch_store_checks(f->job->store)) {
        assert_int_equal(rc, ORCH_ECORRUPT);
        assert_non_null(strstr(orch_error_detail(), "reported as 7 bytes, but 6 are stored"));
        return; /* the driver rolls the turn back: this transaction is spoilt */
    }
    assert_int_equal(rc, 0);
    assert_string_equal(size_of(f, "doc.u", e), "7");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_stale_reports_change_nothing),
        T(test_record_failure_suppresses_downstream),
        T(test_expand_zero_dropped_and_ordered_reduce),
        T(test_group_failure_barrier),
        T(test_barred_in_flight_sibling),
        T(test_reclaim_orphans),
        T(test_reported_size_recorded),
        T(test_reported_size_wrong),
    };
    /* Every store of the suite enforces the schema's rules (orch_store_config). */
    orch_store_configure(&(struct orch_store_config){.checks = true});
    return cmocka_run_group_tests(tests, NULL, NULL);
}
