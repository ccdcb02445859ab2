/* test_driver.c — unit tests of the driver (engine/driver/) on a real job, with the fake
 * pool of fake_pool.h in place of worker processes: the driver runs unchanged (the real
 * orch_driver_run, its store and its payload store), and the fake records every batch it
 * dispatches and every worker it starts and stops, and answers as each test says.
 *
 *   dispatch    batches of up to the call's batch size, across root entities, served in
 *               the FIFO order of the ready queue (ready_seq)
 *   workers     a call's workers start on demand, up to workers=N (the pool refuses more:
 *               pool.h, -EBUSY), and are stopped once the call is done while the job
 *               goes on
 *   reclaim     the payloads of a port that is not `output` are freed as their readers
 *               seal: the live intermediate bytes stay at a few payloads' worth, and none
 *               is left at the end; the `output` port's are kept
 *   carry       an update with an edited downstream call carries the upstream call's
 *               results: no batch of it is dispatched again
 *   admission   roots enter only while the budgets have room, and a call that makes live
 *               bytes is not served while their budget is full and a call downstream has
 *               grains queued: the live bytes stay within the budget and a batch's worth;
 *               a chunk of roots enters only once the unsealed grains are under theirs
 *   retry       a lost worker's batch is dispatched again at generation+1, and a late
 *               report of the lost batch is refused as stale; a failed run and a timeout
 *               are attempt failures, each retried at the next generation
 *   two batches a busy worker is given a second batch, queued behind the one it runs,
 *               only when its call's queue holds more than its idle workers take, and
 *               not while a deeper call's idle worker waits for the budget; lost with
 *               it, the queued batch never ran: its grain is not charged
 *
 * Each test names the mutation of the engine that makes it fail. */
#define _GNU_SOURCE /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "driver_int.h"
#include "fake_pool.h"
#include "orch_error.h"
#include "orch_facts.h"
#include "orch_lang.h"
#include "orch_payload.h"
#include "orch_store.h"
#include "testutil.h"

/* ---- fixture: a job made from a pipeline over lines "lineNN" --------------------------- */

struct fx {
    char dir[512];
    struct orch_job *job;
    struct orch_run_stats stats;
    void (*on_dispatch)(void *ctx, const struct fake_batch *b); /* for the next run */
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f || orch_test_mkdtemp(f->dir, sizeof f->dir, "driver") < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->job)
        orch_job_close(f->job);
    orch_run_stats_free(&f->stats);
    fake_log_free();
    int rc = orch_test_rmtree(f->dir);
    free(f);
    return rc;
}

/* Writes text to in.txt and makes the job of pipeline. */
static void make_job_text(struct fx *f, const char *pipeline, const char *text)
{
    char path[700];
    assert_int_equal(orch_test_path(path, sizeof path, f->dir, "in.txt"), 0);
    assert_int_equal(orch_test_write_text(path, text), 0);
    assert_int_equal(orch_test_job_create(f->dir, pipeline, &f->job), 0);
}

/* The same with n lines "lineNN" (6 bytes each below 100). */
static void make_job(struct fx *f, const char *pipeline, int n)
{
    char text[8192];
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "line%02d\n", i);
    make_job_text(f, pipeline, text);
}

/* Runs the job to its end with the fake pool answering as decide says. */
static void run(struct fx *f, struct orch_run_opts o, fake_decide decide, void *ctx)
{
    fake_reset(decide, ctx);
    fake_on_dispatch(f->on_dispatch);
    o.cpus = o.cpus > 0 ? o.cpus : 64;
    o.gpus = 1;
    o.progress = ORCH_PROGRESS_NONE;
    o.durability = ORCH_DURABILITY_PROCESS;
    o.idle_stop_ms = 3600 * 1000; /* no worker is stopped for idling: a slow run is the same */
    orch_run_stats_free(&f->stats);
    int rc = orch_driver_run(f->job, &o, &f->stats);
    if (rc != 0)
        fprintf(stderr, "orch_driver_run: %s\n", orch_error_detail());
    assert_int_equal(rc, 0);
    /* Every pool was closed, holding no batch, and no batch was sent to a worker that was
     * not idle. */
    assert_int_equal(fake_log.pools_open, 0);
    assert_int_equal(fake_log.closed_busy, 0);
    assert_int_equal(fake_log.bad_dispatch, 0);
    assert_int_equal(fake_log.in_flight, 0);
}

static int call_of(struct fx *f, const char *name)
{
    int c = orch_plan_find_call(f->job->plan, name);
    assert_true(c >= 0);
    return c;
}

/* One value of the job's store (testutil.h). */
#define sql1(f, ...) orch_test_sql1((f)->job->store, __VA_ARGS__)

/* The payload item `port` of the root whose line is "lineNN" names, as text ("" when it is
 * not in the payload store). */
static const char *item_value(struct fx *f, const char *port, int line)
{
    static char out[256];
    int64_t id = atoll(sql1(f,
                            "SELECT i.payload_id FROM item i JOIN port p ON p.id = i.port_id "
                            "WHERE p.qualified = '%s' AND i.entity_id = (SELECT s.entity_id "
                            "FROM item s JOIN port sp ON sp.id = s.port_id WHERE "
                            "sp.qualified = 'doc.line' ORDER BY s.entity_id LIMIT 1 OFFSET %d)",
                            port, line));
    void *data;
    size_t len;
    out[0] = '\0';
    if (id > 0 && orch_payload_get(f->job->payloads, (uint64_t)id, &data, &len) == 0) {
        snprintf(out, sizeof out, "%.*s", (int)len, (const char *)data);
        free(data);
    }
    return out;
}

/* ---- dispatch -------------------------------------------------------------------------- */

/* The tests that count batches (the reservation rules, reclamation, the budgets, workers
 * on demand, carry, two batches per worker) run with fixed dispatch sizes (batch_fixed: each dispatch takes the
 * call's batch grains), so that their batches are known; test_dispatch_sizes and
 * test_sizing.c test the runtime's sizes. */

/* The pipelines' common start: one root per line of in.txt. */
#define LINES "pipeline drv\ndomain doc\nsource doc.line = lines(\"in.txt\")\n"

static const char chain[] = LINES "call a = upper() with batch=4, workers=1\n"
                                  "doc.u = a(doc.line)\n";

/* One worker, batch=4, ten roots: batches of 4, 4 and 2, each across roots, taking the
 * grains in the order they became READY; every answer is committed (mutations: reserve
 * batch - 1 grains in dispatch.c, and the batches are 3, 3, 3, 1; hand the queue the
 * call's generator whatever the order, and ready_seq goes backwards). */
static void test_dispatch_batches_fifo(void **state)
{
    struct fx *f = *state;
    make_job(f, chain, 10);
    run(f, (struct orch_run_opts){.batch_fixed = true}, NULL, NULL);
    assert_int_equal(fake_log.nbatch, 3);
    const int want[] = {4, 4, 2};
    int64_t last_seq = -1;
    for (int i = 0; i < fake_log.nbatch; i++) {
        const struct fake_batch *b = &fake_log.batch[i];
        assert_int_equal(b->call, call_of(f, "a"));
        assert_int_equal(b->nrec, want[i]);
        for (int r = 0; r < b->nrec; r++) {
            int64_t seq = atoll(sql1(f, "SELECT ready_seq FROM grain WHERE id = %llu",
                                     (unsigned long long)b->rec[r].grain));
            assert_true(seq > last_seq); /* FIFO: ready_seq order, batch after batch */
            last_seq = seq;
            assert_int_equal(b->rec[r].generation, 0);
        }
    }
    assert_int_equal(f->stats.committed, 10);
    assert_string_equal(item_value(f, "doc.u", 0), "line00.a");
    assert_string_equal(item_value(f, "doc.u", 9), "line09.a");
}

/* No options: a's first dispatch takes one grain (nothing is measured), and each after
 * it at most twice the one before while the answers come back (the growth), and the
 * dispatches grow past one grain as the grains prove fast; every grain goes once
 * (mutations in sizing.c: start at the share of the queue; no growth bound). */
static void test_dispatch_sizes(void **state)
{
    struct fx *f = *state;
    make_job(f, LINES "call a = identity()\ndoc.u = a(doc.line)\noutput doc.u\n", 500);
    run(f, (struct orch_run_opts){0}, NULL, NULL);
    int a = call_of(f, "a"), n = 0, largest = 0, allowed = 1;
    for (int i = 0; i < fake_log.nbatch; i++) {
        const struct fake_batch *b = &fake_log.batch[i];
        assert_int_equal(b->call, a);
        assert_true(b->nrec >= 1 && b->nrec <= allowed);
        allowed *= 2; /* one worker: each dispatch follows the settling of the one before */
        n += b->nrec;
        largest = b->nrec > largest ? b->nrec : largest;
    }
    assert_int_equal(fake_log.batch[0].nrec, 1);
    assert_true(largest > 1);
    assert_true(fake_log.nbatch < 500);
    assert_int_equal(n, 500);
    assert_int_equal(f->stats.committed, 500);
}

static const char words[] = "pipeline drv\n"
                            "domain doc\n"
                            "domain w in doc\n"
                            "source doc.line = lines(\"in.txt\")\n"
                            "call cut = split(sep=\" \") with batch=4\n"
                            "call up = upper() with batch=3\n"
                            "w.raw = expand cut(doc.line)\n"
                            "w.u = up(w.raw)\n";

/* The parent of the entity of grain g. */
static int64_t parent_of(struct fx *f, uint64_t g)
{
    return atoll(sql1(f,
                      "SELECT e.parent_id FROM grain g JOIN entity e ON e.id = g.entity_id "
                      "WHERE g.id = %llu",
                      (unsigned long long)g));
}

/* Three roots expand into 2, 3 and 1 words; up (batch=3, elastic) takes its six grains in
 * two batches that each span two parents, in the order the words became READY (mutation:
 * reserve as reserve=parent in dispatch.c, and the batches stop at a parent's last
 * child: 2, 3, 1). */
static void test_dispatch_across_parents(void **state)
{
    struct fx *f = *state;
    make_job_text(f, words, "a b\nc d e\nf\n");
    run(f, (struct orch_run_opts){.batch_fixed = true}, NULL, NULL);
    int cut = call_of(f, "cut"), up = call_of(f, "up");
    assert_int_equal(fake_log.nbatch, 3);
    assert_int_equal(fake_log.batch[0].call, cut);
    assert_int_equal(fake_log.batch[0].nrec, 3);
    int64_t last_seq = -1;
    for (int i = 1; i < 3; i++) {
        const struct fake_batch *b = &fake_log.batch[i];
        assert_int_equal(b->call, up);
        assert_int_equal(b->nrec, 3);
        assert_true(parent_of(f, b->rec[0].grain) != parent_of(f, b->rec[2].grain));
        for (int r = 0; r < b->nrec; r++) {
            int64_t seq = atoll(sql1(f, "SELECT ready_seq FROM grain WHERE id = %llu",
                                     (unsigned long long)b->rec[r].grain));
            assert_true(seq > last_seq);
            last_seq = seq;
        }
    }
    assert_string_equal(sql1(f, "SELECT group_concat(v, ' ') FROM (SELECT count(*) AS v FROM "
                                "entity WHERE parent_id IS NOT NULL GROUP BY parent_id "
                                "ORDER BY parent_id)"),
                        "2 3 1");
    assert_int_equal(f->stats.committed, 9);
}

/* ---- workers --------------------------------------------------------------------------- */

/* a then b; a's port is intermediate (its payloads are reclaimed once b read them). */
#define TWO_CALLS_WITH(a_opts, b_opts)                                                         \
    LINES "call a = upper() with " a_opts "\n"                                                 \
          "call b = identity() with " b_opts "\n"                                              \
          "doc.u = a(doc.line)\n"                                                              \
          "doc.v = b(doc.u)\n"
#define TWO_CALLS TWO_CALLS_WITH("workers=3", "workers=1")
static const char two_calls[] = TWO_CALLS "output doc.v\n";

struct watch {
    struct fx *f;
    int a, b;
    int a_alive_late; /* batches of b answered after a was done, with a worker of a alive */
    bool a_done;
    int64_t live_max; /* admission: the most live bytes seen */
};

static enum fake_answer watch_workers(void *ctx, const struct fake_batch *b)
{
    struct watch *w = ctx;
    /* a's last batch was answered two answers ago or more: its workers must be gone. */
    int a_left = 0;
    for (int i = 0; i < fake_log.nbatch; i++)
        a_left += fake_log.batch[i].call == w->a && !fake_log.batch[i].answered;
    if (w->a_done && b->call == w->b && fake_log.alive_now[w->a] > 0)
        w->a_alive_late++;
    if (a_left == 0 && b->call == w->b && fake_log.started[w->a] > 0 && !w->a_done &&
        fake_log.alive_now[w->a] == 0)
        w->a_done = true;
    return FAKE_OK;
}

/* a (workers=3, batch=1) has twelve grains and b (workers=1) takes a's results one at a
 * time: a gets three workers, no more, the first at once; b's first worker starts only
 * once a was served; a's workers are stopped once a is done, while b still runs (mutation:
 * settle_done in workers.c stops no idle worker of a call found done, and a's three are
 * only closed with their pool). */
static void test_workers_on_demand(void **state)
{
    struct fx *f = *state;
    make_job(f, two_calls, 12);
    struct watch w = {.f = f, .a = call_of(f, "a"), .b = call_of(f, "b")};
    run(f, (struct orch_run_opts){.batch_fixed = true}, watch_workers, &w);
    assert_int_equal(fake_log.started[w.a], 3);
    assert_int_equal(fake_log.alive_peak[w.a], 3);
    assert_int_equal(fake_log.started[w.b], 1);
    /* a's first worker at once; b's once a was served (its work is coming), not before. */
    assert_int_equal(fake_log.start_after[w.a], 0);
    assert_true(fake_log.start_after[w.b] >= 1);
    /* a's three workers were stopped by the driver, not closed with the pool, and before
     * b's last batches ran. */
    assert_int_equal(fake_log.stopped[w.a], 3);
    assert_true(w.a_done);
    assert_int_equal(w.a_alive_late, 0);
    assert_int_equal(f->stats.workers_started, 4);
    assert_int_equal(f->stats.workers_peak, 4);
    assert_int_equal(f->stats.committed, 24);
    assert_string_equal(item_value(f, "doc.v", 11), "line11.a.b");
}

/* ---- reclaim --------------------------------------------------------------------------- */

/* Seen before each answer of b: its grains sealed, and doc.u's payloads recorded freed. */
struct freed {
    struct fx *f;
    int b;
    int checks, midway; /* answers of b seen; of them, with some but not all sealed */
    int bad;            /* of them, with freed not equal to sealed */
};

static enum fake_answer check_freed(void *ctx, const struct fake_batch *b)
{
    struct freed *r = ctx;
    if (b->call != r->b)
        return FAKE_OK;
    /* Asserted after the run: a failed assertion must not jump out of the driver. */
    int n = atoi(sql1(r->f, "SELECT count(*) FROM grain g JOIN call c ON c.id = g.call_id "
                            "WHERE c.name = 'b' AND g.phase = 'sealed'"));
    int freed = atoi(sql1(r->f, "SELECT count(*) FROM item i JOIN port p ON p.id = i.port_id "
                                "JOIN reclaimed_span s ON i.payload_id BETWEEN s.first AND "
                                "s.last WHERE p.qualified = 'doc.u'"));
    r->bad += freed != n;
    r->checks++;
    r->midway += n > 0 && n < 20;
    return FAKE_OK;
}

/* doc.u is read by b only and is not `output`: each of its payloads is recorded freed in
 * the turn that seals its reader (as seen before each of b's answers: as many freed as b
 * sealed), so the live intermediate bytes never hold more than the few that are between a
 * and b; at the end none of doc.u's payloads is left, and doc.v's are (mutation:
 * orch_prop_reclaim_sealed in reclaim.c returns at once, and nothing is freed). */
static void test_reclaim(void **state)
{
    struct fx *f = *state;
    make_job(f, two_calls, 20);
    struct freed r = {.f = f, .b = call_of(f, "b")};
    run(f, (struct orch_run_opts){.batch_fixed = true}, check_freed, &r);
    assert_int_equal(r.checks, 20);
    assert_int_equal(r.bad, 0);
    assert_true(r.midway > 10);
    /* The first turn admits every root (20 of 6 bytes: "lineNN"); each root is freed
     * once a read it, each of a's payloads (8 bytes: "lineNN.a") once b read it: the peak
     * holds the roots and a few of a's payloads (a has three workers), not all 20. */
    assert_true(f->stats.live_peak >= 20 * 6);
    assert_true(f->stats.live_peak <= 20 * 6 + 3 * 8);
    for (int i = 0; i < 20; i++) {
        assert_string_equal(item_value(f, "doc.u", i), "");
        char want[32];
        snprintf(want, sizeof want, "line%02d.a.b", i);
        assert_string_equal(item_value(f, "doc.v", i), want);
    }
    assert_string_equal(sql1(f, "SELECT count(*) FROM item i JOIN port p ON p.id = i.port_id "
                                "JOIN reclaimed_span r ON i.payload_id BETWEEN r.first AND "
                                "r.last WHERE p.qualified = 'doc.u'"),
                        "20");
}

/* ---- admission ------------------------------------------------------------------------- */

/* a makes two of b's grains a turn (batch=2), b takes one: b falls behind. */
static const char behind[] = TWO_CALLS_WITH("batch=2, workers=2", "workers=1") "output doc.v\n";

/* Seen at each dispatch of a, as the turn that reserved it committed: whether the live
 * bytes were at the budget while b had grains queued. */
struct hold {
    struct fx *f;
    int64_t budget;
    int a;
    int full;   /* dispatches (of any call) that saw the budget full and b's grains queued */
    int served; /* of a's, those that did */
};

static void watch_hold(void *ctx, const struct fake_batch *b)
{
    struct hold *h = ctx;
    int64_t live = atoll(sql1(h->f, "SELECT live_bytes FROM job"));
    int queued = atoi(sql1(h->f, "SELECT count(*) FROM grains WHERE call = 'b' AND "
                                 "phase = 'ready'"));
    if (live >= h->budget && queued > 0) {
        h->full++;
        h->served += b->call == h->a;
    }
}

/* A budget of live intermediate bytes of four roots: roots are admitted only while it has
 * room, and a (which makes such bytes) is not served while it is full and b (downstream)
 * has grains queued, so the bytes pass it by no more than a's batches in flight; the
 * default budget lets every root in at once (mutations: admit_chunk in admit.c takes the
 * room as unbounded, and the 20 roots enter together; orch_driver_tight never finds the
 * bytes full, and a is served while b's grains wait). */
static void test_admission_live_bytes(void **state)
{
    struct fx *f = *state;
    make_job(f, behind, 20);
    run(f, (struct orch_run_opts){.batch_fixed = true}, NULL, NULL);
    int64_t free_peak = f->stats.live_peak;
    orch_job_close(f->job);
    f->job = NULL;
    char job[700];
    assert_int_equal(orch_test_path(job, sizeof job, f->dir, "job"), 0);
    assert_int_equal(orch_test_rmtree(job), 0);
    make_job(f, behind, 20);
    struct hold h = {.f = f, .budget = 4 * 6, .a = call_of(f, "a")};
    f->on_dispatch = watch_hold;
    run(f, (struct orch_run_opts){.max_live_bytes = h.budget, .batch_fixed = true}, NULL, &h);
    assert_int_equal(f->stats.live_budget, h.budget);
    assert_true(h.full > 0); /* the budget was full with b behind */
    assert_int_equal(h.served, 0);
    assert_true(f->stats.live_peak > 0);
    assert_true(f->stats.live_peak <= h.budget + 2 * 2 * 8); /* a's two workers' batches */
    assert_true(f->stats.live_peak < free_peak);
    assert_int_equal(f->stats.committed, 40);
}

/* Seen at each answer: the roots admitted (committed) and the records answered so far. */
struct admitted {
    struct fx *f;
    int64_t most;  /* the most roots seen admitted */
    int64_t early; /* times more than one chunk was in while under 157 were answered */
};

static enum fake_answer count_admitted(void *ctx, const struct fake_batch *b)
{
    struct admitted *a = ctx;
    int64_t n = atoll(sql1(a->f, "SELECT count(*) FROM entity"));
    if (n > a->most)
        a->most = n;
    if (n > 256 && fake_log.answered < 256 - 100 + 1)
        a->early++;
    return FAKE_OK;
}

/* A budget of 100 unsealed grains, 300 roots: roots enter a chunk at a time (256 at most,
 * engine/driver/admit.c), and the next chunk only once the unsealed grains are under the
 * budget again, so never while fewer than 157 of the first chunk's grains were answered
 * (mutation: orch_driver_tight never finds the grains full, and the second chunk enters
 * at the second turn). */
static void test_admission_unsealed(void **state)
{
    struct fx *f = *state;
    make_job(f, chain, 300);
    struct admitted a = {.f = f};
    run(f, (struct orch_run_opts){.max_unsealed = 100}, count_admitted, &a);
    assert_int_equal(f->stats.committed, 300);
    assert_int_equal(a.most, 300); /* the second chunk was seen in */
    assert_int_equal(a.early, 0);
}

/* ---- retry ----------------------------------------------------------------------------- */

struct lose {
    uint64_t lost_batch; /* the batch whose worker was lost */
    int call;
};

static enum fake_answer lose_first(void *ctx, const struct fake_batch *b)
{
    struct lose *l = ctx;
    if (l->lost_batch == 0) {
        l->lost_batch = b->id;
        fake_late_report(l->call, b); /* the replacement's first word */
        return FAKE_CRASH;
    }
    return FAKE_OK;
}

/* The worker of the first batch is lost: its grain goes back at generation 1 (attempt 1)
 * and runs on a new worker; a late report of the lost batch (generation 0) is refused as
 * stale, and the committed value is the retry's (mutations: orch_queue_requeue keeps the
 * generation, and the retry is dispatched at 0; on_report in loop.c does not count a
 * report of a batch it does not hold as stale). */
static void test_lost_worker_retry(void **state)
{
    struct fx *f = *state;
    make_job(f, chain, 1);
    struct lose l = {.call = call_of(f, "a")};
    run(f, (struct orch_run_opts){0}, lose_first, &l);
    assert_int_equal(fake_log.nbatch, 2);
    const struct fake_batch *b0 = &fake_log.batch[0], *b1 = &fake_log.batch[1];
    assert_int_equal(b0->how, FAKE_CRASH);
    assert_int_equal(b1->rec[0].grain, b0->rec[0].grain);
    assert_int_equal(b1->rec[0].generation, b0->rec[0].generation + 1);
    assert_int_equal(b1->rec[0].attempt, b0->rec[0].attempt + 1);
    assert_true(b1->id != b0->id);
    assert_int_equal(fake_log.started[l.call], 2);
    assert_int_equal(f->stats.stale, 1);
    assert_int_equal(f->stats.committed, 1);
    assert_int_equal(f->stats.attempts_failed, 1);
    assert_string_equal(item_value(f, "doc.u", 0), "line00.a");
    assert_string_equal(sql1(f, "SELECT group_concat(outcome, ',') FROM (SELECT outcome FROM "
                                "attempt ORDER BY id)"),
                        "crash,ok");
}

static enum fake_answer fail_then_time_out(void *ctx, const struct fake_batch *b)
{
    (void)ctx;
    return b->seq == 0 ? FAKE_FAILED : b->seq == 1 ? FAKE_TIMEOUT : FAKE_OK;
}

/* A batch whose run failed, then one whose worker timed out: each is an attempt failure
 * (retries=2 allows both), the grain goes back at the next generation each time, and the
 * third attempt's value is committed; the worker that timed out is replaced, the one whose
 * run failed is not (mutation: on_lost in loop.c takes a timeout for a crash, and the
 * second attempt ends "crash"). */
static void test_failed_and_timed_out(void **state)
{
    struct fx *f = *state;
    make_job(f, chain, 1);
    run(f, (struct orch_run_opts){0}, fail_then_time_out, NULL);
    assert_int_equal(fake_log.nbatch, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(fake_log.batch[i].rec[0].generation, i);
    assert_int_equal(fake_log.started[call_of(f, "a")], 2);
    assert_int_equal(f->stats.attempts_failed, 2);
    assert_string_equal(sql1(f, "SELECT group_concat(outcome, ',') FROM (SELECT outcome FROM "
                                "attempt ORDER BY id)"),
                        "error,timeout,ok");
    assert_string_equal(item_value(f, "doc.u", 0), "line00.a");
}

/* ---- two batches per worker ------------------------------------------------------------ */

/* One worker, batch=4, ten roots: the worker is given its second batch, queued behind the
 * first, in the turn that gave it the first (the queue held more than one batch), so it
 * holds two; the batches keep FIFO order and every grain is committed once (mutation: taker
 * in dispatch.c never gives a second batch, and no worker holds two). */
static void test_second_batch(void **state)
{
    struct fx *f = *state;
    make_job(f, chain, 10);
    run(f, (struct orch_run_opts){.batch_fixed = true}, NULL, NULL);
    assert_int_equal(fake_log.nbatch, 3);
    assert_int_equal(fake_log.held_peak, 2);
    assert_false(fake_log.batch[0].queued);
    assert_true(fake_log.batch[1].queued);
    assert_true(fake_log.batch[1].answered_before == 0); /* sent before any answer */
    assert_int_equal(f->stats.committed, 10);
    assert_string_equal(item_value(f, "doc.u", 9), "line09.a");
}

/* a (workers=3, batch=1) has twelve grains: its workers get second batches, but never one
 * while a worker of a is idle (mutation: taker in dispatch.c prefers a worker that holds
 * one batch to an idle one, and batches are queued while workers idle). */
static void test_second_batch_not_while_idle(void **state)
{
    struct fx *f = *state;
    make_job(f, two_calls, 12);
    run(f, (struct orch_run_opts){.batch_fixed = true}, NULL, NULL);
    assert_int_equal(fake_log.held_peak, 2);
    assert_int_equal(fake_log.queued_while_idle, 0);
    assert_int_equal(f->stats.committed, 24);
    assert_string_equal(item_value(f, "doc.v", 11), "line11.a.b");
}

/* Seen at each dispatch of a batch queued behind another: whether it was a's while b, one
 * call deeper, had an idle worker and grains queued (kept waiting by the CPU budget). */
struct deeper {
    struct fx *f;
    int a, b;
    int queued;  /* batches of a queued behind another */
    int starved; /* of them, those sent while b's worker waited with grains queued */
};

static void watch_deeper(void *ctx, const struct fake_batch *b)
{
    struct deeper *w = ctx;
    if (b->call != w->a || !b->queued)
        return;
    w->queued++;
    int ready = atoi(sql1(w->f, "SELECT count(*) FROM grains WHERE call = 'b' AND "
                                "phase = 'ready'"));
    w->starved += ready > 0 && fake_idle(w->b) > 0;
}

static const char one_each[] = TWO_CALLS_WITH("workers=1", "workers=1") "output doc.v\n";

/* A budget of one CPU, a then b, one worker each: a's worker is given a second
 * batch, but never while b's idle worker waits for the budget with grains queued — the
 * second batch would keep a's share one batch longer, and downstream goes first
 * (mutation: taker in dispatch.c ignores `blocked`, and a's batches queue while b
 * starves). */
static void test_second_batch_after_deeper(void **state)
{
    struct fx *f = *state;
    make_job(f, one_each, 12);
    struct deeper w = {.f = f, .a = call_of(f, "a"), .b = call_of(f, "b")};
    f->on_dispatch = watch_deeper;
    run(f, (struct orch_run_opts){.cpus = 1, .batch_fixed = true}, NULL, &w);
    assert_true(w.queued > 0);
    assert_int_equal(w.starved, 0);
    assert_int_equal(f->stats.committed, 24);
    assert_string_equal(item_value(f, "doc.v", 11), "line11.a.b");
}

static enum fake_answer crash_first(void *ctx, const struct fake_batch *b)
{
    (void)ctx;
    return b->seq == 0 ? FAKE_CRASH : FAKE_OK;
}

static const char one_try[] = LINES "call a = upper() with batch=1, workers=1, retries=0\n"
                                    "doc.u = a(doc.line)\n";

/* retries=0, batch=1: the worker is lost with the batch it runs (line00: charged, sealed
 * Failed, exhausted) and the batch queued behind it (line01), which never ran: its attempt
 * ends interrupted, saying so, and its grain runs again, uncharged, and is committed
 * (mutation: on_lost in loop.c fails the queued batch as it fails the one that ran, and
 * line01 is sealed Failed too). */
static void test_lost_holding_two(void **state)
{
    struct fx *f = *state;
    make_job(f, one_try, 3);
    run(f, (struct orch_run_opts){.batch_fixed = true}, crash_first, NULL);
    const struct fake_batch *b0 = &fake_log.batch[0], *b1 = &fake_log.batch[1];
    assert_int_equal(b0->how, FAKE_CRASH);
    assert_true(b1->queued);
    assert_true(b1->unrun);
    assert_int_equal(f->stats.attempts_failed, 1);
    assert_string_equal(
        sql1(f, "SELECT outcome = 'interrupted' AND message LIKE 'not started: worker %% was "
                "lost while it ran the batch ahead of this one (the fake worker crashed)' "
                "FROM attempt WHERE grain_id = %llu ORDER BY id LIMIT 1",
             (unsigned long long)b1->rec[0].grain),
        "1");
    assert_string_equal(sql1(f, "SELECT group_concat(outcome, ',') FROM (SELECT outcome FROM "
                                "attempt WHERE grain_id = %llu ORDER BY id)",
                             (unsigned long long)b1->rec[0].grain),
                        "interrupted,ok");
    assert_string_equal(sql1(f, "SELECT count(*) FROM failure WHERE grain_id <> %llu",
                             (unsigned long long)b0->rec[0].grain),
                        "0");
    assert_string_equal(item_value(f, "doc.u", 1), "line01.a");
    assert_string_equal(item_value(f, "doc.u", 2), "line02.a");
    assert_string_equal(item_value(f, "doc.u", 0), "");
}

/* ---- carry ----------------------------------------------------------------------------- */

/* Both ports kept: a carried grain needs its twin's payloads (an intermediate one's are
 * reclaimed once read). */
static const char kept[] = TWO_CALLS "output doc.u\noutput doc.v\n";

/* The job ran a then b; an update edits b (another function): every root gets a new
 * revision, a's grains take their twins' results, and only b's run again (mutation:
 * on_ready in loop.c queues every READY grain, carried or not, and a runs again). */
static void test_carry(void **state)
{
    struct fx *f = *state;
    make_job(f, kept, 5);
    run(f, (struct orch_run_opts){.batch_fixed = true}, NULL, NULL);
    assert_int_equal(fake_log.nbatch, 10);
    /* What `orch update JOB EDITED` does before it drives (cli_update.c, plan_change):
     * adopt the edited plan, its rows, and start the update that recomputes. */
    char path[700];
    assert_int_equal(orch_test_path(path, sizeof path, f->dir, "edited.orch"), 0);
    char edited[sizeof kept];
    snprintf(edited, sizeof edited, "%s", kept);
    char *at = strstr(edited, "identity()");
    assert_non_null(at);
    memcpy(at, "upper()", 7);
    memmove(at + 7, at + 10, strlen(at + 10) + 1);
    assert_int_equal(orch_test_write_text(path, edited), 0);
    orch_plan *np;
    assert_int_equal(orch_lang_compile_path(path, stderr, &np, NULL, NULL), 0);
    int64_t plan_id, update;
    orch_store *st = f->job->store;
    assert_int_equal(orch_store_begin(st), 0);
    assert_int_equal(
        orch_store_plan_adopt(st, orch_plan_canonical(np), orch_plan_hash(np), &plan_id), 0);
    assert_int_equal(orch_job_write_plan_rows(st, np), 0);
    assert_int_equal(orch_store_update_start(st, plan_id, NULL, &update), 0);
    assert_int_equal(orch_store_commit(st), 0);
    orch_plan_free(f->job->plan);
    f->job->plan = np;

    run(f, (struct orch_run_opts){0}, NULL, NULL);
    assert_int_equal(f->stats.carried, 5);
    int nb = 0;
    for (int i = 0; i < fake_log.nbatch; i++) {
        assert_int_equal(fake_log.batch[i].call, call_of(f, "b"));
        nb += fake_log.batch[i].nrec;
    }
    assert_int_equal(nb, 5);
    assert_int_equal(fake_log.started[call_of(f, "a")], 0);
}

/* The first fatal error of a pass of the event loop is what the run stops with, its detail
 * included: the callbacks after it in the same pass still run on the half-applied turn,
 * and a failure of theirs (here a payload the turn never wrote) sets the thread's detail
 * again (mutation: set_fatal keeps only the code, and the run says "no payload 7" for a
 * full state.db). */
static void test_fatal_keeps_its_detail(void **state)
{
    (void)state;
    struct orch_driver *d = calloc(1, sizeof *d);
    assert_non_null(d);
    assert_int_equal(orch_driver_fatal(d), 0);
    orch_driver_set_fatal(d, orch_error_set(-ENOSPC, "state.db: database or disk is full"));
    orch_driver_set_fatal(d, orch_error_set(ORCH_ENOTFOUND, "payloads: no payload 7"));
    assert_int_equal(orch_driver_fatal(d), -ENOSPC);
    assert_string_equal(orch_error_detail(), "state.db: database or disk is full");
    /* A fatal error set with no detail says none, not an older one. */
    memset(d, 0, sizeof *d);
    orch_error_clear();
    orch_driver_set_fatal(d, -ENOMEM);
    orch_error_set(ORCH_ENOTFOUND, "payloads: no payload 8");
    assert_int_equal(orch_driver_fatal(d), -ENOMEM);
    assert_string_equal(orch_error_detail(), "");
    free(d);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_dispatch_batches_fifo),
        T(test_dispatch_sizes),
        T(test_dispatch_across_parents),
        T(test_workers_on_demand),
        T(test_reclaim),
        T(test_admission_live_bytes),
        T(test_admission_unsealed),
        T(test_lost_worker_retry),
        T(test_failed_and_timed_out),
        T(test_second_batch),
        T(test_second_batch_not_while_idle),
        T(test_second_batch_after_deeper),
        T(test_lost_holding_two),
        T(test_carry),
        T(test_fatal_keeps_its_detail),
    };
    /* Every store of the suite enforces the schema's rules (orch_store_config). */
    orch_store_configure(&(struct orch_store_config){.checks = true});
    return cmocka_run_group_tests(tests, NULL, NULL);
}
