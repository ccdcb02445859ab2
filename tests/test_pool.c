/* test_pool.c — unit tests of worker pools (engine/worker/pool.h) with real worker processes of
 * the real binary ($ORCH): outputs of map, expand, filter and reduce read back from LMDB;
 * work spread over workers; crashes, timeouts, external kills, attempt and typed failures,
 * init failures up to a failed pool; protocol errors from fake workers (this binary run as
 * `__worker`); clean close (fini ran, no zombies) and kill; workers started on demand and
 * stopped cleanly, a slot's index (and devices) kept by whatever process runs in it.
 *
 * A pool starts no process by itself: the harness starts a lane's workers when it adds the
 * lane, and a replacement after each loss until the pool has failed, as a driver would.
 *
 * Nothing here sleeps to let a race settle: each test runs the event loop until the
 * callbacks have seen what it waits for (with a generous safety timeout that fails it). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "claim.h"
#include "launch.h"
#include "orch_error.h"
#include "orch_lang.h"
#include "orch_payload.h"
#include "pool.h"
#include "proc.h"
#include "testutil.h"
#include "wire.h"

#ifndef ORCH_POOL_PROBE_PATH
#error "ORCH_POOL_PROBE_PATH must name the probe UDF library"
#endif

#define FAKE_ENV "ORCH_TEST_FAKE_WORKER"

/* ---- fixture: a scratch job directory and a plan --------------------------------------- */

struct fx {
    char dir[512];
    char payloads[600];
    char marks[600];
    const char *exe;
    char self[PATH_MAX]; /* this test binary, for fake workers */
    orch_plan *plan;
};

static const char plan_fmt[] =
    "pipeline pooltest\n"
    "domain doc\n"
    "domain line in doc\n"
    "source doc.text = lines(\"in.txt\")\n"
    "call lines = split_lines()\n"
    "call up = upper()\n"
    "call keep = nonempty()\n"
    "call cat = concat(sep=\"+\")\n"
    "call crash = fail_if(contains=\"boom\", kind=crash)\n"
    "call hang = fail_if(contains=\"boom\", kind=hang)\n"
    "call attempt = fail_if(contains=\"boom\", kind=attempt)\n"
    "call rec = fail_if(contains=\"boom\", kind=record)\n"
    "call grp = fail_if(contains=\"boom\", kind=group)\n"
    "call flaky = flaky(fail_attempts=1)\n"
    "call probe = library(\"%s\", \"orch_pool_probe\")(mark=\"%s\")\n"
    "call probe_bad = library(\"%s\", \"orch_pool_probe\")(fail_init=\"asked to fail\")\n"
    "call runs = library(\"%s\", \"orch_pool_runs\") with batch=3\n"
    "call missing = library(\"/nonexistent/orch-no-such.so\", \"x\")\n"
    "call ex = exec(\"exit 3\")\n"
    "call nap = sleep()\n"
    "line.text = expand lines(doc.text)\n"
    "line.up = up(line.text)\n"
    "line.good = filter keep(line.up)\n"
    "doc.joined = reduce cat(line.good)\n"
    "doc.c = crash(doc.text)\n"
    "doc.h = hang(doc.text)\n"
    "doc.a = attempt(doc.text)\n"
    "doc.r = rec(doc.text)\n"
    "doc.g = grp(doc.text)\n"
    "doc.f = flaky(doc.text)\n"
    "doc.p = probe(doc.text)\n"
    "doc.pb = probe_bad(doc.text)\n"
    "doc.rn = runs(doc.text)\n"
    "doc.m = missing(doc.text)\n"
    "doc.x = ex(doc.text)\n"
    "doc.n = nap(doc.text)\n";

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (f == NULL || orch_test_mkdtemp(f->dir, sizeof f->dir, "pool") < 0)
        return -1;
    snprintf(f->payloads, sizeof f->payloads, "%s/payloads", f->dir);
    snprintf(f->marks, sizeof f->marks, "%s/marks", f->dir);
    if (mkdir(f->marks, 0700) < 0)
        return -1;
    f->exe = getenv("ORCH");
    if (f->exe == NULL || access(f->exe, X_OK) != 0) {
        fprintf(stderr, "test_pool: $ORCH must name the built orch binary\n");
        return -1;
    }
    if (realpath("/proc/self/exe", f->self) == NULL)
        return -1;
    char text[4096];
    snprintf(text, sizeof text, plan_fmt, ORCH_POOL_PROBE_PATH, f->marks, ORCH_POOL_PROBE_PATH,
             ORCH_POOL_PROBE_PATH);
    if (orch_lang_compile("pool.orch", text, strlen(text), f->dir, stderr, &f->plan) != 0)
        return -1;
    /* The store exists before any worker opens it; this process's handle is closed. */
    orch_payload *p;
    if (orch_payload_open(f->payloads, NULL, &p) != 0)
        return -1;
    orch_payload_close(p);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    orch_plan_free(f->plan);
    int rc = orch_test_rmtree(f->dir);
    free(f);
    return rc;
}

/* ---- payloads -------------------------------------------------------------------------- */

static void put_strings(struct fx *f, const char *const *s, int n, uint64_t *ids)
{
    orch_payload *p;
    assert_int_equal(orch_payload_open(f->payloads, NULL, &p), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(orch_payload_put(p, s[i], strlen(s[i]), &ids[i]), 0);
    orch_payload_close(p);
}

static void assert_payload(struct fx *f, uint64_t id, const char *want)
{
    orch_payload *p;
    void *data;
    size_t len;
    assert_int_equal(orch_payload_open(f->payloads, NULL, &p), 0);
    int rc = orch_payload_get(p, id, &data, &len);
    if (rc != 0)
        fail_msg("payload %" PRIu64 ": %s", id, orch_error_detail());
    if (len != strlen(want) || memcmp(data, want, len) != 0)
        fail_msg("payload %" PRIu64 " is \"%.*s\", not \"%s\"", id, (int)len, (char *)data,
                 want);
    free(data);
    orch_payload_close(p);
}

/* assert_payload through a handle this process already holds (one handle per process). */
static void assert_payload_in(orch_payload *p, uint64_t id, const char *want)
{
    void *data;
    size_t len;
    int rc = orch_payload_get(p, id, &data, &len);
    if (rc != 0)
        fail_msg("payload %" PRIu64 ": %s", id, orch_error_detail());
    if (len != strlen(want) || memcmp(data, want, len) != 0)
        fail_msg("payload %" PRIu64 " is \"%.*s\", not \"%s\"", id, (int)len, (char *)data,
                 want);
    free(data);
}

/* ---- batches --------------------------------------------------------------------------- */

/* A batch with room for its records and values. */
struct tb {
    struct orch_wire_batch b;
    struct orch_wire_record rec[16];
    uint32_t nval[16];
    struct orch_wire_value vals[16][8];
};

/* Adds a record of one input list holding values ids[0..n-1] (n may be 0). */
static void tb_add(struct tb *t, uint64_t grain, uint32_t attempt, const uint64_t *ids, int n)
{
    uint32_t i = t->b.nrec++;
    assert_true(i < 16 && n <= 8);
    for (int k = 0; k < n; k++)
        t->vals[i][k] = (struct orch_wire_value){.payload = ids[k], .present = 1};
    t->nval[i] = (uint32_t)n;
    t->rec[i] = (struct orch_wire_record){.grain = grain,
                                          .generation = attempt,
                                          .attempt = attempt,
                                          .nin = 1,
                                          .nval = &t->nval[i],
                                          .vals = t->vals[i]};
    t->b.rec = t->rec;
}

/* A batch of one-value records, one per id; grains first_grain, first_grain+1, ... */
static void tb_map(struct tb *t, uint64_t id, uint64_t first_grain, const uint64_t *ids, int n)
{
    memset(t, 0, sizeof *t);
    t->b.id = id;
    for (int i = 0; i < n; i++)
        tb_add(t, first_grain + (uint64_t)i, 1, &ids[i], 1);
}

/* Two map batches of one grain each over the strings a and b (put into the store, their
 * ids in ids): batch 1 grain 1, batch 2 grain 2. */
static void two_maps(struct fx *f, const char *a, const char *b, uint64_t ids[2],
                     struct tb work[2])
{
    const char *in[] = {a, b};
    put_strings(f, in, 2, ids);
    tb_map(&work[0], 1, 1, &ids[0], 1);
    tb_map(&work[1], 2, 2, &ids[1], 1);
}

/* ---- the event loop harness ------------------------------------------------------------ */

#define MAX_EV 32
#define MAX_LANES 3

struct rep_ev {
    int lane, pid;
    uint64_t batch;
    int status;
    char msg[512];
    uint32_t nrec;
    struct {
        uint64_t grain;
        enum orch_wire_outcome outcome;
        char msg[256];
        uint32_t nchild, nout;
        uint64_t ids[16];
    } a[8];
};

struct lost_ev {
    int lane, pid, index;
    uint64_t batch, queued;
    int64_t at_ms; /* monotonic */
    enum orch_loss_kind kind;
    char msg[512];
    bool failed; /* orch_pool_failed() during the callback */
};

/* One pool and the batches it hands out, in order, to whichever worker is idle. */
struct lane {
    orch_pool *pool;
    struct tb *work;
    int nwork, next;
    int nrep, nlost;
    /* When > 0: nothing is dispatched until this many workers are idle (so that every
     * worker gets work, however fast the first one is). */
    int gate;
    orch_worker *waiting[8];
    int nwaiting;
    bool no_restart; /* no replacement after a loss */
    /* The batches a worker is given to hold at once: 0 or 1, one at a time; up to
     * ORCH_POOL_DEPTH, a batch queued behind the one it runs. */
    int depth;
    int held_peak; /* the most batches one worker of the lane held */
};

struct run {
    struct fx *fx;
    struct event_base *base;
    struct lane lane[MAX_LANES];
    int nlanes;
    int nidle;
    int nrep;
    struct rep_ev rep[MAX_EV];
    int nlost;
    struct lost_ev lost[MAX_EV];
    int pids[MAX_EV * 2];
    int npids;
    int idle_index_pid[8]; /* pid of worker index i at its last idle */
    int64_t sent_ms[MAX_EV]; /* monotonic, when batch i (its id, < MAX_EV) was dispatched */
    /* Called after each dispatch (the worker is BUSY with b). */
    void (*dispatched)(struct run *, orch_worker *, const struct orch_wire_batch *);
    /* The loop stops when this says so (checked after every callback). */
    bool (*done)(struct run *);
    bool timed_out;
    /* Set by watch_reaped: the pid to wait for. */
    int watch_pid;
    bool start_none; /* add_lane starts no worker: the test does */
    /* Children an expansion sent in CHUNKs ahead of its report (a child that took a
     * millisecond or more goes at once, stream.h), per grain until the report folds them
     * in. */
    struct {
        uint64_t grain;
        uint32_t nchild, nids;
        uint64_t ids[16];
    } chunk[8];
    int nchunk;
};

static int lane_of(struct run *r, orch_pool *p)
{
    for (int i = 0; i < r->nlanes; i++)
        if (r->lane[i].pool == p)
            return i;
    fail_msg("a callback for a pool this test does not know");
    return -1;
}

static void note_pid(struct run *r, int pid)
{
    for (int i = 0; i < r->npids; i++)
        if (r->pids[i] == pid)
            return;
    assert_true(r->npids < MAX_EV * 2);
    r->pids[r->npids++] = pid;
}

static void check_done(struct run *r)
{
    if (r->done && r->done(r))
        event_base_loopbreak(r->base);
}

/* Gives w the lane's next batches until it holds the lane's depth of them. */
static void next_batch(struct run *r, orch_pool *p, orch_worker *w)
{
    struct lane *l = &r->lane[lane_of(r, p)];
    int depth = l->depth > 1 ? l->depth : 1;
    while (l->next < l->nwork && orch_worker_held(w) < depth) {
        const struct orch_wire_batch *b = &l->work[l->next++].b;
        int held = orch_worker_held(w);
        int rc = orch_pool_dispatch(p, w, b);
        if (rc != 0)
            fail_msg("dispatch of batch %" PRIu64 ": %s", b->id, strerror(-rc));
        assert_int_equal(orch_worker_held(w), held + 1);
        if (held + 1 > l->held_peak)
            l->held_peak = held + 1;
        if (b->id < MAX_EV)
            r->sent_ms[b->id] = orch_clock_mono_ms();
        if (orch_worker_held(w) == ORCH_POOL_DEPTH) /* it takes no more */
            assert_int_equal(orch_pool_dispatch(p, w, b), -EBUSY);
        if (r->dispatched)
            r->dispatched(r, w, b);
    }
}

static void cb_idle(void *ctx, orch_pool *p, orch_worker *w)
{
    struct run *r = ctx;
    r->nidle++;
    note_pid(r, orch_worker_pid(w));
    if (orch_worker_index(w) < 8)
        r->idle_index_pid[orch_worker_index(w)] = orch_worker_pid(w);
    struct lane *l = &r->lane[lane_of(r, p)];
    if (l->gate > 0) {
        assert_true(l->nwaiting < 8);
        l->waiting[l->nwaiting++] = w;
        if (l->nwaiting == l->gate) {
            l->gate = 0;
            for (int i = 0; i < l->nwaiting; i++)
                next_batch(r, p, l->waiting[i]);
        }
    } else {
        next_batch(r, p, w);
    }
    check_done(r);
}

static void cb_report(void *ctx, orch_pool *p, orch_worker *w,
                      const struct orch_wire_report *rp)
{
    struct run *r = ctx;
    assert_true(r->nrep < MAX_EV);
    struct rep_ev *e = &r->rep[r->nrep++];
    e->lane = lane_of(r, p);
    r->lane[e->lane].nrep++;
    e->pid = orch_worker_pid(w);
    note_pid(r, e->pid);
    e->batch = rp->batch;
    e->status = rp->status;
    snprintf(e->msg, sizeof e->msg, "%s", rp->message);
    e->nrec = rp->nrec;
    assert_true(rp->nrec <= 8);
    for (uint32_t i = 0; i < rp->nrec; i++) {
        const struct orch_wire_answer *a = &rp->rec[i];
        e->a[i].grain = a->grain;
        e->a[i].outcome = a->outcome;
        snprintf(e->a[i].msg, sizeof e->a[i].msg, "%s", a->message);
        e->a[i].nchild = a->nchild;
        e->a[i].nout = a->nout;
        uint32_t nids = 0;
        for (int c = 0; c < r->nchunk; c++) {
            if (r->chunk[c].grain != a->grain)
                continue;
            assert_int_equal(a->first, r->chunk[c].nchild); /* none missing */
            e->a[i].nchild += r->chunk[c].nchild;
            nids = r->chunk[c].nids;
            memcpy(e->a[i].ids, r->chunk[c].ids, nids * sizeof *e->a[i].ids);
            r->chunk[c] = r->chunk[--r->nchunk];
            break;
        }
        if (nids == 0)
            assert_int_equal(a->first, 0);
        assert_true(nids + a->nchild * a->nout <= 16);
        for (uint32_t k = 0; k < a->nchild * a->nout; k++)
            e->a[i].ids[nids + k] = a->payload[k];
    }
    next_batch(r, p, w); /* the worker holds one batch fewer */
    check_done(r);
}

static void cb_lost(void *ctx, orch_pool *p, orch_worker *w, uint64_t batch, uint64_t queued,
                    enum orch_loss_kind kind, const char *message)
{
    struct run *r = ctx;
    assert_true(r->nlost < MAX_EV);
    struct lost_ev *e = &r->lost[r->nlost++];
    e->lane = lane_of(r, p);
    r->lane[e->lane].nlost++;
    e->pid = orch_worker_pid(w);
    e->index = orch_worker_index(w);
    note_pid(r, e->pid);
    e->batch = batch;
    e->queued = queued;
    e->at_ms = orch_clock_mono_ms();
    assert_int_equal(orch_worker_held(w), 0);
    e->kind = kind;
    e->failed = orch_pool_failed(p);
    snprintf(e->msg, sizeof e->msg, "%s", message);
    /* The worker is gone: it takes no batch. */
    struct tb t;
    uint64_t id = 1;
    tb_map(&t, 999, 999, &id, 1);
    assert_int_equal(orch_pool_dispatch(p, w, &t.b), -EBUSY);
    /* The slot is empty: a replacement, as the driver starts one, unless the pool failed
     * (it refuses then). Started from the callback, which the pool allows. */
    if (!r->lane[e->lane].no_restart) {
        int rc = orch_pool_start(p, NULL);
        assert_int_equal(rc, e->failed ? -ECANCELED : 0);
    }
    check_done(r);
}

static void cb_chunk(void *ctx, orch_pool *p, orch_worker *w, const struct orch_wire_chunk *k)
{
    (void)p;
    struct run *r = ctx;
    note_pid(r, orch_worker_pid(w));
    int c = 0;
    while (c < r->nchunk && r->chunk[c].grain != k->a.grain)
        c++;
    if (c == r->nchunk) {
        assert_true(r->nchunk < 8);
        r->chunk[c].grain = k->a.grain;
        r->chunk[c].nchild = r->chunk[c].nids = 0;
        r->nchunk++;
    }
    assert_int_equal(k->a.first, r->chunk[c].nchild); /* in order */
    uint32_t n = k->a.nchild * k->a.nout;
    assert_true(r->chunk[c].nids + n <= 16);
    memcpy(r->chunk[c].ids + r->chunk[c].nids, k->a.payload, n * sizeof *k->a.payload);
    r->chunk[c].nids += n;
    r->chunk[c].nchild += k->a.nchild;
}

static const struct orch_pool_callbacks callbacks = {
    .idle = cb_idle, .report = cb_report, .lost = cb_lost, .chunk = cb_chunk};

static void run_init(struct run *r, struct fx *f)
{
    memset(r, 0, sizeof *r);
    r->fx = f;
    r->base = event_base_new();
    assert_non_null(r->base);
}

/* Starts a pool of `call` as a new lane handing out work[0..nwork-1]. */
static orch_pool *add_lane(struct run *r, const char *call, int nworkers, int64_t timeout_ms,
                           int max_init, struct tb *work, int nwork, const char *exe,
                           const char *const *cuda)
{
    struct orch_pool_config cfg = {
        .exe = exe ? exe : r->fx->exe,
        .payload_dir = r->fx->payloads,
        .plan = r->fx->plan,
        .call = orch_plan_find_call(r->fx->plan, call),
        .nworkers = nworkers,
        .timeout_ms = timeout_ms,
        .max_init_failures = max_init,
        .cuda_visible_devices = cuda,
    };
    assert_true(cfg.call >= 0);
    assert_true(r->nlanes < MAX_LANES);
    struct lane *l = &r->lane[r->nlanes++];
    l->work = work;
    l->nwork = nwork;
    int rc = orch_pool_new(r->base, &cfg, &callbacks, r, &l->pool);
    if (rc != 0)
        fail_msg("orch_pool_new(%s): %s", call, orch_error_detail());
    assert_int_equal(orch_pool_alive(l->pool), 0); /* nothing runs until started */
    for (int i = 0; i < nworkers && !r->start_none; i++)
        if ((rc = orch_pool_start(l->pool, NULL)) != 0)
            fail_msg("orch_pool_start(%s): %s", call, orch_error_detail());
    return l->pool;
}

static void on_safety(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct run *r = arg;
    r->timed_out = true;
    event_base_loopbreak(r->base);
}

/* Runs the loop until r->done says so; fails after 15 s. */
static void run_loop(struct run *r)
{
    if (r->done && r->done(r))
        return;
    struct event *safety = evtimer_new(r->base, on_safety, r);
    struct timeval tv = {15, 0};
    evtimer_add(safety, &tv);
    event_base_dispatch(r->base);
    event_free(safety);
    if (r->timed_out)
        fail_msg("timed out: %d idle, %d reports, %d losses", r->nidle, r->nrep, r->nlost);
}

static void on_watch(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct run *r = arg;
    if (kill(r->watch_pid, 0) < 0 && errno == ESRCH)
        event_base_loopbreak(r->base);
}

/* Runs the loop until process pid is reaped (by the pool: it is the pool's child), so that
 * whatever its death makes the pool do has been done. */
static void run_until_reaped(struct run *r, int pid)
{
    r->watch_pid = pid;
    struct event *watch = event_new(r->base, -1, EV_PERSIST, on_watch, r);
    struct timeval tv = {0, 5000};
    evtimer_add(watch, &tv);
    bool (*done)(struct run *) = r->done;
    r->done = NULL;
    struct event *safety = evtimer_new(r->base, on_safety, r);
    struct timeval st = {15, 0};
    evtimer_add(safety, &st);
    event_base_dispatch(r->base);
    event_free(safety);
    event_free(watch);
    r->done = done;
    if (r->timed_out)
        fail_msg("process %d was never reaped", pid);
}

/* Closes every lane's pool and frees the base; then no process seen is left, not even a
 * zombie. */
static void run_close(struct run *r)
{
    for (int i = 0; i < r->nlanes; i++)
        orch_pool_close(r->lane[i].pool);
    event_base_free(r->base);
    for (int i = 0; i < r->npids; i++) {
        errno = 0;
        assert_int_equal(waitpid(r->pids[i], NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
    }
}

static void assert_has(const char *s, const char *needle)
{
    if (strstr(s, needle) == NULL)
        fail_msg("\"%s\" lacks \"%s\"", s, needle);
}

static const struct rep_ev *report_of(struct run *r, uint64_t batch)
{
    for (int i = 0; i < r->nrep; i++)
        if (r->rep[i].batch == batch)
            return &r->rep[i];
    fail_msg("no report for batch %" PRIu64, batch);
    return NULL;
}

static bool all_reported(struct run *r)
{
    for (int i = 0; i < r->nlanes; i++)
        if (r->lane[i].nrep < r->lane[i].nwork)
            return false;
    return true;
}

/* ---- outputs of each op ---------------------------------------------------------------- */

static void test_map_two_workers(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"ab", "cd", "ef", "gh", "ij", "kl", "mn", "op"};
    const char *want[] = {"AB", "CD", "EF", "GH", "IJ", "KL", "MN", "OP"};
    uint64_t ids[8];
    put_strings(f, in, 8, ids);
    struct tb work[4];
    for (int i = 0; i < 4; i++)
        tb_map(&work[i], (uint64_t)i + 1, (uint64_t)(2 * i + 1), &ids[2 * i], 2);

    struct run r;
    run_init(&r, f);
    orch_pool *p = add_lane(&r, "up", 2, 0, 3, work, 4, NULL, NULL);
    r.lane[0].gate = 2;
    assert_int_equal(orch_pool_alive(p), 2);
    r.done = all_reported;
    run_loop(&r);

    assert_int_equal(r.nlost, 0);
    int pids[2] = {0, 0};
    for (int b = 0; b < 4; b++) {
        const struct rep_ev *e = report_of(&r, (uint64_t)b + 1);
        assert_int_equal(e->status, 0);
        assert_int_equal(e->nrec, 2);
        for (int i = 0; i < 2; i++) {
            assert_true(e->a[i].grain == (uint64_t)(2 * b + i + 1));
            assert_int_equal(e->a[i].outcome, ORCH_WIRE_OK);
            assert_int_equal(e->a[i].nchild, 1);
            assert_int_equal(e->a[i].nout, 1);
            assert_payload(f, e->a[i].ids[0], want[2 * b + i]);
        }
        if (pids[0] == 0 || pids[0] == e->pid)
            pids[0] = e->pid;
        else
            pids[1] = e->pid;
    }
    assert_true(pids[1] != 0 && pids[1] != pids[0]); /* both workers got work */
    assert_int_equal(orch_pool_alive(p), 2);
    assert_false(orch_pool_failed(p));
    run_close(&r);
}

/* Three pools on one event base at once (they share SIGCHLD): expand, filter, reduce. */
static void test_expand_filter_reduce(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"a\nbb\n\nccc\n", "", "x", "", "a", "bb", "ccc"};
    uint64_t ids[7];
    put_strings(f, in, 7, ids);
    struct tb ex, fl, rd;
    tb_map(&ex, 1, 10, &ids[0], 2);
    tb_map(&fl, 2, 20, &ids[2], 2);
    memset(&rd, 0, sizeof rd);
    rd.b.id = 3;
    tb_add(&rd, 30, 1, &ids[4], 3);
    tb_add(&rd, 31, 1, NULL, 0);

    struct run r;
    run_init(&r, f);
    add_lane(&r, "lines", 1, 0, 3, &ex, 1, NULL, NULL);
    add_lane(&r, "keep", 1, 0, 3, &fl, 1, NULL, NULL);
    add_lane(&r, "cat", 1, 0, 3, &rd, 1, NULL, NULL);
    r.done = all_reported;
    run_loop(&r);
    assert_int_equal(r.nlost, 0);

    const struct rep_ev *e = report_of(&r, 1); /* expand */
    assert_int_equal(e->status, 0);
    assert_int_equal(e->a[0].outcome, ORCH_WIRE_OK);
    assert_int_equal(e->a[0].nchild, 4);
    assert_int_equal(e->a[0].nout, 1);
    const char *children[] = {"a", "bb", "", "ccc"};
    for (int c = 0; c < 4; c++)
        assert_payload(f, e->a[0].ids[c], children[c]);
    assert_int_equal(e->a[1].outcome, ORCH_WIRE_OK); /* empty input: zero children */
    assert_int_equal(e->a[1].nchild, 0);

    e = report_of(&r, 2); /* filter */
    assert_int_equal(e->status, 0);
    assert_int_equal(e->a[0].outcome, ORCH_WIRE_KEEP_TRUE);
    assert_int_equal(e->a[1].outcome, ORCH_WIRE_KEEP_FALSE);
    assert_int_equal(e->a[0].nchild * e->a[0].nout, 0);

    e = report_of(&r, 3); /* reduce */
    assert_int_equal(e->status, 0);
    assert_true(e->a[0].grain == 30 && e->a[1].grain == 31);
    assert_int_equal(e->a[0].outcome, ORCH_WIRE_OK);
    assert_payload(f, e->a[0].ids[0], "a+bb+ccc");
    assert_int_equal(e->a[1].outcome, ORCH_WIRE_OK);
    assert_payload(f, e->a[1].ids[0], "");
    run_close(&r);
}

/* ---- failures -------------------------------------------------------------------------- */

/* Lane 0 reports batches 1 and 3 (batch 2 is lost); lane 1 its one batch. */
static bool crash_done(struct run *r)
{
    return r->nlost >= 1 && r->lane[0].nrep >= 2 && r->lane[1].nrep >= 1;
}

/* A crash is lost CRASH with its batch; a replacement comes up; a second pool on the same
 * base is not disturbed by the other pool's SIGCHLD. */
static void test_crash_and_replacement(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"fine", "boom", "after", "x"};
    uint64_t ids[4];
    put_strings(f, in, 4, ids);
    struct tb work[3], other;
    tb_map(&work[0], 1, 1, &ids[0], 1);
    tb_map(&work[1], 2, 2, &ids[1], 1);
    tb_map(&work[2], 3, 3, &ids[2], 1);
    tb_map(&other, 10, 10, &ids[3], 1);

    struct run r;
    run_init(&r, f);
    orch_pool *p = add_lane(&r, "crash", 1, 0, 3, work, 3, NULL, NULL);
    add_lane(&r, "up", 1, 0, 3, &other, 1, NULL, NULL);
    r.done = crash_done;
    run_loop(&r);
    assert_int_equal(r.nlost, 1);
    const struct lost_ev *l = &r.lost[0];
    assert_int_equal(l->lane, 0);
    assert_int_equal(l->kind, ORCH_LOSS_CRASH);
    assert_true(l->batch == 2);
    assert_has(l->msg, "was killed by signal 6 (Aborted)");
    char who[64];
    snprintf(who, sizeof who, "worker %d ", l->pid);
    assert_has(l->msg, who);
    const struct rep_ev *b1 = report_of(&r, 1), *b3 = report_of(&r, 3);
    assert_int_equal(b1->pid, l->pid);
    assert_true(b3->pid != l->pid); /* the replacement */
    assert_payload(f, b3->a[0].ids[0], "after");
    assert_int_equal(report_of(&r, 10)->status, 0);
    assert_int_equal(orch_pool_alive(p), 1);
    assert_false(orch_pool_failed(p));
    run_close(&r);
}

static bool one_loss_one_report(struct run *r)
{
    return r->nlost >= 1 && r->nrep >= 1;
}

static void test_timeout(void **state)
{
    struct fx *f = *state;
    uint64_t ids[2];
    struct tb work[2];
    two_maps(f, "boom", "fine", ids, work);

    struct run r;
    run_init(&r, f);
    add_lane(&r, "hang", 1, 200, 3, work, 2, NULL, NULL);
    r.done = one_loss_one_report;
    run_loop(&r);
    assert_int_equal(r.nlost, 1);
    assert_int_equal(r.lost[0].kind, ORCH_LOSS_TIMEOUT);
    assert_true(r.lost[0].batch == 1);
    assert_string_equal(r.lost[0].msg, "batch ran past its timeout of 200ms");
    const struct rep_ev *e = report_of(&r, 2);
    assert_int_equal(e->status, 0);
    assert_true(e->pid != r.lost[0].pid);
    /* Once the killed worker is reaped, its death has not been reported a second time. */
    run_until_reaped(&r, r.lost[0].pid);
    assert_int_equal(r.nlost, 1);
    run_close(&r);
}

static void kill_on_dispatch(struct run *r, orch_worker *w, const struct orch_wire_batch *b)
{
    if (b->id == 1)
        assert_int_equal(kill(orch_worker_pid(w), SIGKILL), 0);
}

/* A worker killed from outside while it holds a batch: lost CRASH with that batch. */
static void test_external_kill(void **state)
{
    struct fx *f = *state;
    uint64_t ids[2];
    struct tb work[2];
    two_maps(f, "boom", "fine", ids, work);

    struct run r;
    run_init(&r, f);
    add_lane(&r, "hang", 1, 0, 3, work, 2, NULL, NULL);
    r.dispatched = kill_on_dispatch;
    r.done = one_loss_one_report;
    run_loop(&r);
    assert_int_equal(r.nlost, 1);
    assert_int_equal(r.lost[0].kind, ORCH_LOSS_CRASH);
    assert_true(r.lost[0].batch == 1);
    assert_has(r.lost[0].msg, "was killed by signal 9 (Killed)");
    assert_int_equal(report_of(&r, 2)->status, 0);
    run_until_reaped(&r, r.lost[0].pid);
    assert_int_equal(r.nlost, 1);
    run_close(&r);
}

/* ---- two batches held by one worker ------------------------------------------------- */

static bool lane0_reported(struct run *r)
{
    return r->lane[0].nrep >= r->lane[0].nwork;
}

/* A worker given a second batch while it runs the first: it takes it (the pool refuses a
 * third), and the reports come in the order of the batches, all from the one process. */
static void test_two_batches_in_order(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"30", "0", "20", "0", "10", "0"};
    uint64_t ids[6];
    put_strings(f, in, 6, ids);
    struct tb work[6];
    for (int i = 0; i < 6; i++)
        tb_map(&work[i], (uint64_t)i + 1, (uint64_t)i + 1, &ids[i], 1);

    struct run r;
    run_init(&r, f);
    orch_pool *p = add_lane(&r, "nap", 1, 0, 3, work, 6, NULL, NULL);
    r.lane[0].depth = 2;
    r.done = lane0_reported;
    run_loop(&r);
    assert_int_equal(r.nlost, 0);
    assert_int_equal(r.lane[0].held_peak, 2);
    assert_int_equal(r.nrep, 6);
    for (int i = 0; i < 6; i++) {
        const struct rep_ev *e = &r.rep[i];
        assert_true(e->batch == (uint64_t)i + 1); /* in order */
        assert_int_equal(e->status, 0);
        assert_int_equal(e->pid, r.rep[0].pid);
        assert_true(e->a[0].grain == (uint64_t)i + 1);
        assert_payload(f, e->a[0].ids[0], in[i]);
    }
    assert_int_equal(orch_pool_alive(p), 1);
    run_close(&r);
}

static void kill_on_second(struct run *r, orch_worker *w, const struct orch_wire_batch *b)
{
    if (b->id == 2) {
        assert_int_equal(orch_worker_held(w), 2);
        assert_int_equal(kill(orch_worker_pid(w), SIGKILL), 0);
    }
}

static bool lane0_lost(struct run *r)
{
    return r->lane[0].nlost >= 1;
}

/* A worker killed while it holds two batches: one loss names both, the first as the batch
 * it ran, the second as queued behind it (never started). */
static void test_kill_holding_two(void **state)
{
    struct fx *f = *state;
    uint64_t ids[2];
    struct tb work[2];
    two_maps(f, "10000", "0", ids, work);

    struct run r;
    run_init(&r, f);
    add_lane(&r, "nap", 1, 0, 3, work, 2, NULL, NULL);
    r.lane[0].depth = 2;
    r.dispatched = kill_on_second;
    r.done = lane0_lost;
    run_loop(&r);
    assert_int_equal(r.nlost, 1);
    assert_int_equal(r.nrep, 0);
    assert_int_equal(r.lost[0].kind, ORCH_LOSS_CRASH);
    assert_true(r.lost[0].batch == 1);
    assert_true(r.lost[0].queued == 2);
    assert_has(r.lost[0].msg, "was killed by signal 9 (Killed)");
    run_until_reaped(&r, r.lost[0].pid);
    assert_int_equal(r.nlost, 1);
    run_close(&r);
}

static bool lost_and_reported(struct run *r)
{
    return r->lane[0].nlost >= 1 && r->lane[0].nrep >= 1;
}

/* The timeout of a batch queued behind another runs from its start (the report of the
 * one ahead of it), not from its dispatch: batch 1 sleeps 600 ms, within the 1-s timeout;
 * batch 2, sent with it, would pass its timeout 400 ms after batch 1 ends if it were timed
 * from its dispatch; it hangs, and is lost 1 s after its start, with batch 3 (queued behind
 * it once batch 1 was answered) as never started. */
static void test_timeout_from_start(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"600", "20000", "0"};
    uint64_t ids[3];
    put_strings(f, in, 3, ids);
    struct tb work[3];
    for (int i = 0; i < 3; i++)
        tb_map(&work[i], (uint64_t)i + 1, (uint64_t)i + 1, &ids[i], 1);

    struct run r;
    run_init(&r, f);
    add_lane(&r, "nap", 1, 1000, 3, work, 3, NULL, NULL);
    r.lane[0].depth = 2;
    r.lane[0].no_restart = true;
    r.done = lost_and_reported;
    run_loop(&r);
    assert_int_equal(r.nrep, 1);
    const struct rep_ev *e = report_of(&r, 1);
    assert_int_equal(e->status, 0);
    assert_int_equal(r.nlost, 1);
    const struct lost_ev *l = &r.lost[0];
    assert_int_equal(l->kind, ORCH_LOSS_TIMEOUT);
    assert_true(l->batch == 2);
    assert_true(l->queued == 3);
    assert_string_equal(l->msg, "batch ran past its timeout of 1s");
    /* Batch 2 was sent with batch 1 and started after its 600 ms: lost 1 s after that. */
    int64_t waited = l->at_ms - r.sent_ms[2];
    if (waited < 1600)
        fail_msg("batch 2 timed out %" PRId64 " ms after it was sent: not from its start",
                 waited);
    run_until_reaped(&r, l->pid);
    run_close(&r);
}

/* Taking back a queued batch (orch_pool_take_back). */
struct take {
    struct run *r;
    orch_pool *pool;
    orch_worker *w;
    struct event *tick;
    struct tb again;  /* batch 3: the grain of batch 2, given to the worker once more */
    uint64_t ids[1];
    int tries_early;  /* take backs refused while the worker had not started batch 1 */
    bool taken;
};
static struct take tk;

/* Tries to take batch 2 back until the worker has started batch 1 (each 5 ms: the worker's
 * start of batch 1 is no event of the pool's); then sends the worker batch 3 behind batch
 * 1, which it must run after skipping the frame of batch 2 it still holds unread. */
static void take_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    uint64_t id = 0;
    int rc = orch_pool_take_back(tk.pool, tk.w, &id);
    assert_true(rc == 0 || rc == 1);
    if (rc == 0) {
        assert_true(id == 0);
        tk.tries_early++;
        return;
    }
    assert_true(id == 2);
    tk.taken = true;
    event_del(tk.tick);
    assert_int_equal(orch_worker_held(tk.w), 1);
    assert_int_equal(orch_pool_take_back(tk.pool, tk.w, &id), 0); /* nothing queued now */
    assert_int_equal(orch_pool_dispatch(tk.pool, tk.w, &tk.again.b), 0);
    assert_int_equal(orch_worker_held(tk.w), 2);
}

static void take_on_second(struct run *r, orch_worker *w, const struct orch_wire_batch *b)
{
    if (b->id != 2)
        return;
    tk.w = w;
    struct timeval tv = {0, 5000};
    assert_int_equal(event_add(tk.tick, &tv), 0);
}

static bool reported_1_and_3(struct run *r)
{
    int seen = 0;
    for (int i = 0; i < r->nrep; i++)
        seen |= r->rep[i].batch == 1 ? 1 : r->rep[i].batch == 3 ? 2 : 0;
    return seen == 3;
}

/* A worker runs a 1.5-s batch with a second queued behind it: the queued one is taken back
 * (once the worker has started the one ahead: before, it is refused, as the worker could
 * still take either), no report nor loss ever names it, and the worker runs the batch sent
 * after it, in order, from the same process. A batch the worker started is not taken. */
static void test_take_back(void **state)
{
    struct fx *f = *state;
    uint64_t ids[2];
    struct tb work[2];
    two_maps(f, "1500", "0", ids, work);

    struct run r;
    run_init(&r, f);
    memset(&tk, 0, sizeof tk);
    tk.r = &r;
    tk.pool = add_lane(&r, "nap", 1, 0, 3, work, 2, NULL, NULL);
    tk.tick = event_new(r.base, -1, EV_PERSIST, take_tick, NULL);
    assert_non_null(tk.tick);
    tk.ids[0] = ids[1];
    tb_map(&tk.again, 3, 2, tk.ids, 1);
    r.lane[0].depth = 2;
    r.dispatched = take_on_second;
    r.done = reported_1_and_3;
    run_loop(&r);
    assert_true(tk.taken);
    assert_int_equal(r.nlost, 0);
    assert_int_equal(r.nrep, 2);
    assert_true(r.rep[0].batch == 1);
    assert_true(r.rep[1].batch == 3);
    assert_int_equal(r.rep[1].pid, r.rep[0].pid);
    assert_int_equal(r.rep[1].status, 0);
    assert_true(r.rep[1].a[0].grain == 2);
    assert_payload(f, r.rep[1].a[0].ids[0], "0");
    uint64_t id;
    assert_int_equal(orch_pool_take_back(tk.pool, tk.w, &id), 0); /* it holds none */
    event_free(tk.tick);
    run_close(&r);
}

/* The claim word also says when the worker began its last batch (claim.h): the driver
 * dates a queued batch's attempts by it, not by when it reads the report before. */
static void test_claim_began(void **state)
{
    (void)state;
    uint64_t *word;
    int fd = orch_claim_new(&word);
    assert_true(fd >= 0);
    close(fd);
    int64_t t, before = orch_clock_mono_ms();
    assert_false(orch_claim_began(word, 1, &t)); /* nothing begun */
    assert_true(orch_claim_start(word, 1));
    int64_t after = orch_clock_mono_ms();
    assert_true(orch_claim_began(word, 1, &t));
    assert_true(t >= before && t <= after);
    assert_false(orch_claim_began(word, 2, &t)); /* not begun yet */
    assert_true(orch_claim_take(word, 1, 2));   /* taken back: it never begins */
    assert_false(orch_claim_start(word, 2));
    assert_false(orch_claim_began(word, 2, &t));
    assert_true(orch_claim_began(word, 1, &t)); /* still the one it began */
    assert_true(orch_claim_start(word, 3));
    assert_true(orch_claim_began(word, 3, &t) && t >= after);
    assert_false(orch_claim_began(NULL, 3, &t)); /* a remote worker: no word */
    orch_claim_free(word);
}

/* run() errors are reports with status 1; the worker stays. */
static void test_attempt_failures(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"ok", "boom", "fine", "flaky"};
    uint64_t ids[4];
    put_strings(f, in, 4, ids);
    struct tb at[2], fl[2];
    tb_map(&at[0], 1, 1, &ids[0], 2);
    tb_map(&at[1], 2, 3, &ids[2], 1);
    memset(fl, 0, sizeof fl);
    fl[0].b.id = 3;
    tb_add(&fl[0], 30, 1, &ids[3], 1); /* attempt 1: fails */
    fl[1].b.id = 4;
    tb_add(&fl[1], 30, 2, &ids[3], 1); /* attempt 2: passes */

    struct run r;
    run_init(&r, f);
    add_lane(&r, "attempt", 1, 0, 3, at, 2, NULL, NULL);
    add_lane(&r, "flaky", 1, 0, 3, fl, 2, NULL, NULL);
    r.done = all_reported;
    run_loop(&r);
    assert_int_equal(r.nlost, 0);

    const struct rep_ev *e1 = report_of(&r, 1), *e2 = report_of(&r, 2);
    assert_int_equal(e1->status, 1);
    assert_int_equal(e1->nrec, 0);
    assert_has(e1->msg, "fail_if: input contains \"boom\" (kind=attempt)");
    assert_int_equal(e2->status, 0);
    assert_int_equal(e2->pid, e1->pid); /* the same worker goes on */
    assert_payload(f, e2->a[0].ids[0], "fine");

    const struct rep_ev *e3 = report_of(&r, 3), *e4 = report_of(&r, 4);
    assert_int_equal(e3->status, 1);
    assert_has(e3->msg, "flaky: grain 30 is on attempt 1");
    assert_int_equal(e4->status, 0);
    assert_payload(f, e4->a[0].ids[0], "flaky");
    run_close(&r);
}

/* Every LMDB reader slot taken (a table of one slot, held here): the worker still opens
 * the store, and a batch whose inputs it cannot read is reported as the store's failure
 * (STORAGE: the driver stops and the records run again on resume), never as an attempt
 * failure that retries would turn into Failed records. Once the slot is free, a batch
 * runs. */
static void test_readers_full(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"ab", "cd"};
    uint64_t ids[2];
    put_strings(f, in, 2, ids);
    /* LMDB sizes the reader table at an open that finds no other process on the store,
     * and never shrinks it: remove the lock file (nobody has the store open), so that
     * this open makes a table of one slot. */
    char lock[700];
    snprintf(lock, sizeof lock, "%s/lock.mdb", f->payloads);
    assert_int_equal(unlink(lock), 0);
    orch_payload *p;
    struct orch_payload_opts o = {.max_readers = 1};
    assert_int_equal(orch_payload_open(f->payloads, &o, &p), 0);
    orch_payload_rtxn *held, *second = NULL;
    assert_int_equal(orch_payload_read_begin(p, &held), 0);
    assert_int_equal(orch_payload_read_begin(p, &second), -EUSERS);
    assert_null(second);
    assert_has(orch_error_detail(), "all 1 reader slots are taken");

    struct tb work[2];
    tb_map(&work[0], 1, 1, ids, 2);
    tb_map(&work[1], 2, 1, ids, 2);
    struct run r;
    run_init(&r, f);
    add_lane(&r, "up", 1, 0, 1, &work[0], 1, NULL, NULL);
    r.done = all_reported;
    run_loop(&r);
    assert_int_equal(r.nlost, 0); /* it opened the store without a slot: no init failure */
    const struct rep_ev *e = report_of(&r, 1);
    assert_int_equal(e->status, ORCH_WIRE_STATUS_STORAGE);
    assert_int_equal(e->nrec, 0);
    assert_has(e->msg, "cannot read the inputs of batch 1");
    assert_has(e->msg, "reader slots are taken");

    /* The slot is free again: a new worker (the table is still one slot) runs a batch. */
    orch_payload_read_end(held);
    add_lane(&r, "up", 1, 0, 1, &work[1], 1, NULL, NULL);
    run_loop(&r);
    assert_int_equal(r.nlost, 0);
    e = report_of(&r, 2);
    assert_int_equal(e->status, ORCH_WIRE_STATUS_OK);
    assert_int_equal(e->nrec, 2);
    assert_payload_in(p, e->a[0].ids[0], "AB");
    assert_payload_in(p, e->a[1].ids[0], "CD");
    run_close(&r);
    orch_payload_close(p);
}

static void test_record_group_failures(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"ok", "boom", "boom too"};
    uint64_t ids[3];
    put_strings(f, in, 3, ids);
    struct tb rec, grp;
    tb_map(&rec, 1, 1, &ids[0], 2);
    tb_map(&grp, 2, 5, &ids[2], 1);

    struct run r;
    run_init(&r, f);
    add_lane(&r, "rec", 1, 0, 3, &rec, 1, NULL, NULL);
    add_lane(&r, "grp", 1, 0, 3, &grp, 1, NULL, NULL);
    r.done = all_reported;
    run_loop(&r);
    assert_int_equal(r.nlost, 0);

    const struct rep_ev *e = report_of(&r, 1);
    assert_int_equal(e->status, 0);
    assert_int_equal(e->a[0].outcome, ORCH_WIRE_OK);
    assert_payload(f, e->a[0].ids[0], "ok");
    assert_int_equal(e->a[1].outcome, ORCH_WIRE_RECORD_FAILURE);
    assert_string_equal(e->a[1].msg, "fail_if: input contains \"boom\"");
    assert_int_equal(e->a[1].nchild * e->a[1].nout, 0);

    e = report_of(&r, 2);
    assert_int_equal(e->a[0].outcome, ORCH_WIRE_GROUP_FAILURE);
    assert_true(e->a[0].grain == 5);
    assert_string_equal(e->a[0].msg, "fail_if: input contains \"boom\"");
    run_close(&r);
}

static bool all_failed(struct run *r)
{
    for (int i = 0; i < r->nlanes; i++)
        if (!orch_pool_failed(r->lane[i].pool) || orch_pool_alive(r->lane[i].pool) > 0)
            return false;
    return true;
}

/* Init failures are lost INIT, with the UDF's message, until the pool gives up. */
static void test_init_failures(void **state)
{
    struct fx *f = *state;
    struct run r;
    run_init(&r, f);
    orch_pool *missing = add_lane(&r, "missing", 1, 0, 3, NULL, 0, NULL, NULL);
    orch_pool *bad = add_lane(&r, "probe_bad", 1, 0, 2, NULL, 0, NULL, NULL);
    orch_pool *ex = add_lane(&r, "ex", 1, 0, 1, NULL, 0, NULL, NULL);
    r.done = all_failed;
    run_loop(&r);
    assert_int_equal(r.nidle, 0);
    assert_int_equal(r.lane[0].nlost, 3);
    assert_int_equal(r.lane[1].nlost, 2);
    assert_int_equal(r.lane[2].nlost, 1);
    int seen[3] = {0, 0, 0};
    for (int i = 0; i < r.nlost; i++) {
        const struct lost_ev *l = &r.lost[i];
        assert_int_equal(l->kind, ORCH_LOSS_INIT);
        assert_true(l->batch == 0);
        seen[l->lane]++;
        /* failed turns true with the last allowed failure, and not before */
        int max = l->lane == 0 ? 3 : l->lane == 1 ? 2 : 1;
        assert_int_equal(l->failed, seen[l->lane] == max);
        if (l->lane == 0)
            assert_has(l->msg, "/nonexistent/orch-no-such.so");
        else if (l->lane == 1)
            assert_string_equal(l->msg, "probe: asked to fail");
        else
            assert_has(l->msg, "exit 3");
    }
    assert_int_equal(r.npids, 6); /* every attempt was a new process */
    assert_has(orch_pool_failure(missing), "/nonexistent/orch-no-such.so");
    assert_string_equal(orch_pool_failure(bad), "probe: asked to fail");
    assert_true(orch_pool_failed(ex));
    /* A failed pool starts nothing, and says why. */
    assert_int_equal(orch_pool_start(bad, NULL), -ECANCELED);
    assert_has(orch_error_detail(), "probe: asked to fail");
    assert_int_equal(orch_pool_alive(bad), 0);
    run_close(&r);
}

/* ---- close and kill -------------------------------------------------------------------- */

static void test_close_runs_fini(void **state)
{
    struct fx *f = *state;
    uint64_t ids[2];
    struct tb work[2];
    two_maps(f, "p", "q", ids, work);
    const char *cuda[] = {"0", "1,2"};

    struct run r;
    run_init(&r, f);
    add_lane(&r, "probe", 2, 0, 3, work, 2, NULL, cuda);
    r.lane[0].gate = 2;
    r.done = all_reported;
    run_loop(&r);
    assert_int_equal(r.nlost, 0);
    assert_payload(f, report_of(&r, 1)->a[0].ids[0], "p");
    int pid0 = r.idle_index_pid[0], pid1 = r.idle_index_pid[1];
    assert_true(pid0 > 0 && pid1 > 0 && pid0 != pid1);
    run_close(&r);
    /* Each worker ran fini before it exited, and saw its own CUDA_VISIBLE_DEVICES. */
    const struct {
        int pid;
        const char *cuda;
    } want[] = {{pid0, "0"}, {pid1, "1,2"}};
    for (int i = 0; i < 2; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/fini-%d", f->marks, want[i].pid);
        char *mark = orch_test_read_file(path, NULL);
        if (mark == NULL)
            fail_msg("worker %d did not run fini", want[i].pid);
        assert_string_equal(mark, want[i].cuda);
        free(mark);
    }
}

/* ---- on demand: start, stop, slots ----------------------------------------------------- */

static bool idle_2(struct run *r)
{
    return r->nidle >= 2;
}

static bool idle_4(struct run *r)
{
    return r->nidle >= 4;
}

static void assert_fini(struct fx *f, int pid, const char *cuda)
{
    char path[700];
    snprintf(path, sizeof path, "%s/fini-%d", f->marks, pid);
    char *mark = orch_test_read_file(path, NULL);
    if (mark == NULL)
        fail_msg("worker %d did not run fini", pid);
    assert_string_equal(mark, cuda);
    free(mark);
}

/* A pool starts with no process; each start takes the free slot of lowest index, whose
 * devices the process gets; a stopped worker runs fini, is no loss, and keeps its slot
 * until it is reaped; then its slot (and device) is the next one started. */
static void test_start_stop(void **state)
{
    struct fx *f = *state;
    const char *cuda[] = {"0", "1", "2"};
    struct run r;
    run_init(&r, f);
    r.start_none = true;
    orch_pool *p = add_lane(&r, "probe", 3, 0, 3, NULL, 0, NULL, cuda);
    assert_int_equal(orch_pool_alive(p), 0);
    assert_int_equal(orch_pool_starting(p), 0);

    orch_worker *w0, *w1, *w2, *again;
    assert_int_equal(orch_pool_start(p, &w0), 0);
    assert_int_equal(orch_pool_start(p, &w1), 0);
    assert_int_equal(orch_worker_index(w0), 0);
    assert_int_equal(orch_worker_index(w1), 1);
    assert_int_equal(orch_pool_alive(p), 2);
    assert_int_equal(orch_pool_starting(p), 2);
    assert_int_equal(orch_pool_stop(p, w0), -EBUSY); /* only an idle worker stops */
    r.done = idle_2;
    run_loop(&r);
    assert_int_equal(orch_pool_starting(p), 0);

    int pid0 = orch_worker_pid(w0);
    assert_int_equal(orch_pool_stop(p, w0), 0);
    assert_int_equal(orch_pool_stop(p, w0), -EBUSY);
    struct tb t;
    uint64_t id = 1;
    tb_map(&t, 1, 1, &id, 1);
    assert_int_equal(orch_pool_dispatch(p, w0, &t.b), -EBUSY);
    assert_int_equal(orch_pool_alive(p), 2); /* stopping: it still holds its slot */
    assert_int_equal(orch_pool_start(p, &w2), 0);
    assert_int_equal(orch_worker_index(w2), 2);
    assert_int_equal(orch_pool_start(p, &again), -EBUSY); /* every slot holds a process */
    assert_null(again);

    run_until_reaped(&r, pid0);
    assert_int_equal(r.nlost, 0); /* a stop is not a loss */
    assert_fini(f, pid0, "0");
    assert_int_equal(orch_pool_alive(p), 2);
    assert_int_equal(orch_pool_start(p, &again), 0);
    assert_ptr_equal(again, w0); /* the lowest free slot, and its device */
    assert_int_equal(orch_worker_index(again), 0);
    int pid0b = orch_worker_pid(again);
    assert_true(pid0b != pid0);
    r.done = idle_4;
    run_loop(&r);
    assert_int_equal(r.nlost, 0);
    int pid2 = orch_worker_pid(w2);
    run_close(&r);
    assert_fini(f, pid0b, "0");
    assert_fini(f, pid2, "2");
}

static bool two_busy(struct run *r)
{
    return r->lane[0].next == 2;
}

static void test_kill_busy_workers(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"boom"};
    uint64_t ids[1];
    put_strings(f, in, 1, ids);
    struct tb work[2];
    tb_map(&work[0], 1, 1, ids, 1);
    tb_map(&work[1], 2, 2, ids, 1);

    struct run r;
    run_init(&r, f);
    orch_pool *p = add_lane(&r, "hang", 2, 0, 3, work, 2, NULL, NULL);
    r.done = two_busy;
    run_loop(&r);
    orch_pool_kill(p); /* no callback from here on */
    r.nlanes = 0;
    assert_int_equal(r.nlost, 0);
    run_close(&r); /* no zombie */
}

/* ---- a worker process without a pool --------------------------------------------------- */

/* The worker's side seen directly: exit statuses (under ASan a leak would turn 0 or 1 into
 * LeakSanitizer's 23), INITFAIL messages, and a missing payload. */

static bool fake_read(int fd, struct orch_wire_frame *f, uint8_t **body);

struct direct {
    pid_t pid;
    int fd;
    uint8_t *body;
    struct orch__arena a;
};

static void direct_start(struct fx *f, struct direct *d, const char *fdarg)
{
    int sv[2];
    memset(d, 0, sizeof *d);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    d->pid = fork();
    assert_true(d->pid >= 0);
    if (d->pid == 0) {
        if (sv[1] == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(sv[1], 3) < 0)
            _exit(126);
        execl(f->exe, "orch", "__worker", fdarg, (char *)NULL);
        _exit(127);
    }
    close(sv[1]);
    d->fd = sv[0];
}

/* Sends the CONFIG the pool would send for `call` (with another payload dir if given). */
static void direct_config(struct fx *f, struct direct *d, const char *call, const char *dir)
{
    const struct orch_call *c = orch_plan_call(f->plan, orch_plan_find_call(f->plan, call));
    const struct orch_stmt *st = orch_plan_stmt(f->plan, c->stmt);
    const char *keys[8], *vals[8];
    for (int i = 0; i < c->nargs && i < 8; i++) {
        keys[i] = c->args[i].key;
        vals[i] = c->args[i].value;
    }
    assert_int_equal(st->op, ORCH_OP_MAP);
    struct orch_wire_config wc = {.call = c->name,
                                  .fn_kind = c->fn_kind,
                                  .function = c->function,
                                  .symbol = c->symbol,
                                  .op = ORCH_UDF_OP_MAP,
                                  .nin = (uint32_t)st->nin,
                                  .nout = (uint32_t)st->nout,
                                  .payload_dir = dir ? dir : f->payloads,
                                  .batch = (uint32_t)c->opts.batch,
                                  .nargs = (uint32_t)c->nargs,
                                  .arg_keys = keys,
                                  .arg_values = vals};
    struct orch_wire_buf b = {0};
    assert_int_equal(orch_wire_put_config(&b, &wc), 0);
    assert_int_equal(write(d->fd, b.data, b.len), (ssize_t)b.len);
    orch_wire_buf_free(&b);
}

static void direct_expect(struct direct *d, int type, struct orch_wire_frame *fr)
{
    if (!fake_read(d->fd, fr, &d->body))
        fail_msg("the worker closed its socket instead of sending %s",
                 orch_wire_type_name(type));
    assert_int_equal(fr->type, type);
}

/* Closes the socket and returns the worker's wait status. */
static int direct_finish(struct direct *d)
{
    int st;
    close(d->fd);
    assert_int_equal(waitpid(d->pid, &st, 0), d->pid);
    free(d->body);
    orch__arena_free(&d->a);
    return st;
}

static void assert_exit(int st, int code)
{
    if (!WIFEXITED(st) || WEXITSTATUS(st) != code)
        fail_msg("the worker ended with wait status %#x, not exit %d", st, code);
}

static void test_worker_direct(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"ab"};
    uint64_t ids[2];
    put_strings(f, in, 1, ids);
    ids[1] = 999999; /* never stored */
    struct direct d;
    struct orch_wire_frame fr;

    /* A batch, a missing payload, then EOF: exit 0. */
    direct_start(f, &d, "3");
    direct_config(f, &d, "up", NULL);
    direct_expect(&d, ORCH_WIRE_HELLO, &fr);
    struct orch_wire_hello h;
    assert_int_equal(orch_wire_get_hello(&fr, &h), 0);
    assert_int_equal(h.pid, d.pid);
    struct tb t;
    struct orch_wire_buf b = {0};
    tb_map(&t, 1, 1, &ids[0], 1);
    assert_int_equal(orch_wire_put_batch(&b, &t.b), 0);
    tb_map(&t, 2, 2, &ids[1], 1);
    assert_int_equal(orch_wire_put_batch(&b, &t.b), 0);
    assert_int_equal(write(d.fd, b.data, b.len), (ssize_t)b.len); /* both at once */
    orch_wire_buf_free(&b);
    struct orch_wire_report rep;
    direct_expect(&d, ORCH_WIRE_REPORT, &fr);
    assert_int_equal(orch_wire_get_report(&fr, &d.a, &rep), 0);
    assert_true(rep.batch == 1 && rep.status == 0 && rep.nrec == 1);
    assert_payload(f, rep.rec[0].payload[0], "AB");
    direct_expect(&d, ORCH_WIRE_REPORT, &fr);
    assert_int_equal(orch_wire_get_report(&fr, &d.a, &rep), 0);
    assert_true(rep.batch == 2 && rep.status == 1 && rep.nrec == 0);
    assert_string_equal(rep.message,
                        "payload 999999 (input 1 of grain 2) is not in the payload store");
    assert_exit(direct_finish(&d), 0);

    /* Init fails: INITFAIL with the UDF's message, exit 1. */
    direct_start(f, &d, "3");
    direct_config(f, &d, "probe_bad", NULL);
    direct_expect(&d, ORCH_WIRE_INITFAIL, &fr);
    const char *msg;
    assert_int_equal(orch_wire_get_initfail(&fr, &d.a, &msg), 0);
    assert_string_equal(msg, "probe: asked to fail");
    assert_exit(direct_finish(&d), 1);

    /* The payload store cannot be opened. */
    direct_start(f, &d, "3");
    direct_config(f, &d, "up", "/nonexistent/orch/payloads");
    direct_expect(&d, ORCH_WIRE_INITFAIL, &fr);
    assert_int_equal(orch_wire_get_initfail(&fr, &d.a, &msg), 0);
    assert_has(msg, "cannot open the payload store: /nonexistent/orch/payloads");
    assert_exit(direct_finish(&d), 1);

    /* EOF before any CONFIG; a garbage frame in place of a BATCH. */
    direct_start(f, &d, "3");
    assert_exit(direct_finish(&d), 1);
    direct_start(f, &d, "3");
    direct_config(f, &d, "up", NULL);
    direct_expect(&d, ORCH_WIRE_HELLO, &fr);
    uint8_t junk[] = {1, 0, 0, 0, ORCH_WIRE_HELLO, 0};
    assert_int_equal(write(d.fd, junk, sizeof junk), (ssize_t)sizeof junk);
    assert_false(fake_read(d.fd, &fr, &d.body)); /* it leaves */
    assert_exit(direct_finish(&d), 1);

    /* Not a socket: usage error. */
    direct_start(f, &d, "77");
    assert_exit(direct_finish(&d), 2);
}

/* A dispatch of ten records to a call with batch=3 runs the UDF four times, on 3, 3, 3
 * and 1 records, in order, and is answered in one REPORT of ten answers (mutations in
 * worker_runs.c: one run of all, answered "10" each; runs that all start at record 0,
 * whose answers the host refuses as given twice). */
static void test_worker_runs_parts(void **state)
{
    struct fx *f = *state;
    const char *in[10] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
    uint64_t ids[10];
    put_strings(f, in, 10, ids);
    struct direct d;
    struct orch_wire_frame fr;
    direct_start(f, &d, "3");
    direct_config(f, &d, "runs", NULL);
    direct_expect(&d, ORCH_WIRE_HELLO, &fr);
    struct tb t;
    struct orch_wire_buf b = {0};
    tb_map(&t, 1, 1, ids, 10);
    assert_int_equal(orch_wire_put_batch(&b, &t.b), 0);
    assert_int_equal(write(d.fd, b.data, b.len), (ssize_t)b.len);
    orch_wire_buf_free(&b);
    struct orch_wire_report rep;
    direct_expect(&d, ORCH_WIRE_REPORT, &fr);
    assert_int_equal(orch_wire_get_report(&fr, &d.a, &rep), 0);
    assert_true(rep.batch == 1 && rep.status == 0 && rep.nrec == 10);
    const char *want[10] = {"3", "3", "3", "3", "3", "3", "3", "3", "3", "1"};
    for (int i = 0; i < 10; i++) {
        assert_int_equal(rep.rec[i].grain, 1 + i);
        assert_payload(f, rep.rec[i].payload[0], want[i]);
    }
    /* No second report: the socket closes, and the worker ends cleanly. */
    assert_exit(direct_finish(&d), 0);
}

/* An exe that cannot be found is refused at once; one that cannot be run dies with 127
 * while starting, which counts as an init failure. */
static void test_bad_exe(void **state)
{
    struct fx *f = *state;
    struct run r;
    run_init(&r, f);
    struct orch_pool_config cfg = {.exe = "/nonexistent/orch",
                                   .payload_dir = f->payloads,
                                   .plan = f->plan,
                                   .call = orch_plan_find_call(f->plan, "up"),
                                   .nworkers = 1,
                                   .max_init_failures = 2};
    orch_pool *p = NULL;
    assert_int_equal(orch_pool_new(r.base, &cfg, &callbacks, &r, &p), -ENOENT);
    assert_null(p);
    assert_has(orch_error_detail(), "/nonexistent/orch");

    char script[700];
    snprintf(script, sizeof script, "%s/badexe", f->dir);
    assert_int_equal(orch_test_write_text(script, "#!/nonexistent/interpreter\n"), 0);
    assert_int_equal(chmod(script, 0755), 0);
    add_lane(&r, "up", 1, 0, 2, NULL, 0, script, NULL);
    r.done = all_failed;
    run_loop(&r);
    assert_int_equal(r.nlost, 2);
    assert_int_equal(r.lost[0].kind, ORCH_LOSS_INIT);
    assert_has(r.lost[0].msg, "exited with status 127 before it was ready");
    assert_has(r.lost[0].msg, script);
    run_close(&r);
}

/* ---- a remote worker's srun that another waiter reaped --------------------------------- */

/* waitpid(), wrapped (-Wl,--wrap=waitpid, tests/meson.build). Armed by a test, it plays
 * another part of the process that takes the pool's child: while armed, a WNOHANG wait
 * says the child still runs; the first blocking wait reaps it and fails with ECHILD, after
 * writing a "killed by SIGKILL" status (POSIX leaves *status undefined when waitpid fails:
 * this is one value of that garbage, made certain). */
static bool steal_armed;

pid_t __real_waitpid(pid_t pid, int *status, int options);
pid_t __wrap_waitpid(pid_t pid, int *status, int options);
pid_t __wrap_waitpid(pid_t pid, int *status, int options)
{
    if (!steal_armed)
        return __real_waitpid(pid, status, options);
    if (options & WNOHANG)
        return 0;
    int real;
    pid_t r = __real_waitpid(pid, &real, options);
    steal_armed = false;
    if (r < 0)
        return r;
    if (status)
        *status = SIGKILL; /* WIFSIGNALED, signal 9 */
    errno = ECHILD;
    return -1;
}

/* orch_pool_kill() of a remote pool whose srun (its guard) outlives CLOSE_WAIT_MS and is
 * then reaped by another waiter: with no status known, the pool cannot say that a signal
 * ended srun, and cancels nothing in Slurm (mutation: keep the status waitpid left on
 * ECHILD, and the fake scancel is called). Takes CLOSE_WAIT_MS (5 s). */
static void test_remote_reaped_elsewhere(void **state)
{
    struct fx *f = *state;
    char srun[700], scancel[700], log[700], text[800];
    snprintf(srun, sizeof srun, "%s/srun", f->dir);
    snprintf(scancel, sizeof scancel, "%s/scancel", f->dir);
    snprintf(log, sizeof log, "%s/cancelled", f->dir);
    assert_int_equal(orch_test_write_text(srun, "#!/bin/sh\nexec sleep 60\n"), 0);
    snprintf(text, sizeof text, "#!/bin/sh\necho \"$*\" >> '%s'\n", log);
    assert_int_equal(orch_test_write_text(scancel, text), 0);
    assert_int_equal(chmod(srun, 0755), 0);
    assert_int_equal(chmod(scancel, 0755), 0);
    unsetenv("SLURM_JOB_ID");

    struct run r;
    run_init(&r, f);
    orch_launcher *l;
    struct orch_launcher_config lc = {
        .kind = ORCH_LAUNCHER_SLURM, .listen = "127.0.0.1:0", .srun = srun};
    assert_int_equal(orch_launcher_new(r.base, &lc, &l), 0);
    orch_payload *store;
    assert_int_equal(orch_payload_open(f->payloads, NULL, &store), 0);
    struct orch_pool_config cfg = {.exe = f->exe,
                                   .payload_dir = f->payloads,
                                   .plan = f->plan,
                                   .call = orch_plan_find_call(f->plan, "up"),
                                   .nworkers = 1,
                                   .max_init_failures = 1,
                                   .launcher = l,
                                   .store = store,
                                   .cpus = 1};
    orch_pool *p;
    assert_int_equal(orch_pool_new(r.base, &cfg, &callbacks, &r, &p), 0);
    assert_int_equal(orch_pool_start(p, NULL), 0);
    steal_armed = true;
    orch_pool_kill(p);
    bool stolen = !steal_armed;
    steal_armed = false;
    orch_launcher_free(l); /* waits for any scancel it started */
    orch_payload_close(store);
    event_base_free(r.base);
    assert_true(stolen);
    assert_int_equal(access(log, F_OK), -1);
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

/* ---- protocol errors, from fake workers ------------------------------------------------ */

static bool one_loss(struct run *r)
{
    return r->nlost >= 1;
}

/* Runs one fake worker mode against a `keep` (filter) pool with one batch; returns after
 * the first loss, or when the batch was reported. */
static void fake_run(struct fx *f, const char *mode, struct run *r, uint64_t *ids)
{
    static struct tb work;
    tb_map(&work, 1, 1, ids, 2);
    setenv(FAKE_ENV, mode, 1);
    run_init(r, f);
    add_lane(r, "keep", 1, 0, 1, &work, 1, f->self, NULL);
    r->done = strcmp(mode, "dribble") == 0 ? all_reported : one_loss;
    run_loop(r);
}

/* run_close(), then the replacements the pool may start are plain again. */
static void fake_close(struct run *r)
{
    run_close(r);
    unsetenv(FAKE_ENV);
}

static void test_protocol_errors(void **state)
{
    struct fx *f = *state;
    const char *in[] = {"x", ""};
    uint64_t ids[2];
    put_strings(f, in, 2, ids);
    struct run r;

    fake_run(f, "wrongbatch", &r, ids);
    assert_int_equal(r.lost[0].kind, ORCH_LOSS_CRASH);
    assert_true(r.lost[0].batch == 1);
    assert_string_equal(r.lost[0].msg, "protocol error: a report for batch 2, the worker "
                                       "runs batch 1");
    fake_close(&r);

    fake_run(f, "garbage", &r, ids); /* HELLO and garbage in one write */
    assert_int_equal(r.nidle, 1);
    assert_int_equal(r.lost[0].kind, ORCH_LOSS_CRASH);
    assert_true(r.lost[0].batch == 1);
    assert_string_equal(r.lost[0].msg, "protocol error: unknown frame type 99");
    fake_close(&r);

    fake_run(f, "huge", &r, ids); /* a frame header over the limit */
    assert_has(r.lost[0].msg, "protocol error: REPORT frame of 4294967295 bytes is over");
    fake_close(&r);

    fake_run(f, "early", &r, ids); /* garbage before HELLO: the worker never started */
    assert_int_equal(r.lost[0].kind, ORCH_LOSS_INIT);
    assert_true(r.lost[0].batch == 0);
    assert_has(r.lost[0].msg, "protocol error: ");
    assert_true(r.lost[0].failed);
    fake_close(&r);

    fake_run(f, "otherop", &r, ids); /* a map answer to a filter */
    assert_has(r.lost[0].msg, "is ok, but a filter answers keep or reject");
    fake_close(&r);

    fake_run(f, "dribble", &r, ids); /* every frame one byte at a time */
    assert_int_equal(r.nlost, 0);
    const struct rep_ev *e = report_of(&r, 1);
    assert_int_equal(e->status, 0);
    assert_int_equal(e->a[0].outcome, ORCH_WIRE_KEEP_TRUE);
    assert_int_equal(e->a[1].outcome, ORCH_WIRE_KEEP_TRUE);
    fake_close(&r);
}

/* ---- the fake worker ------------------------------------------------------------------- */

static void fake_write(int fd, const struct orch_wire_buf *b, bool dribble)
{
    for (size_t off = 0; off < b->len;) {
        size_t n = dribble ? 1 : b->len - off;
        ssize_t w = send(fd, b->data + off, n, MSG_NOSIGNAL);
        if (w <= 0)
            _exit(0);
        off += (size_t)w;
        if (dribble)
            usleep(300); /* so that the driver sees the frame in pieces */
    }
}

/* Reads one frame into *body; false at EOF. */
static bool fake_read(int fd, struct orch_wire_frame *f, uint8_t **body)
{
    uint8_t hdr[ORCH_WIRE_HEADER];
    size_t got = 0;
    while (got < sizeof hdr) {
        ssize_t n = read(fd, hdr + got, sizeof hdr - got);
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    if (orch_wire_next(hdr, sizeof hdr, f) < 0)
        return false;
    free(*body);
    *body = malloc(f->len + 1);
    for (got = 0; got < f->len;) {
        ssize_t n = read(fd, *body + got, f->len - got);
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    f->body = *body;
    return true;
}

/* `THIS-BINARY __worker FD` with $ORCH_TEST_FAKE_WORKER set: a worker that misbehaves in
 * the named way. */
static int fake_worker(int fd, const char *mode)
{
    bool dribble = strcmp(mode, "dribble") == 0;
    uint8_t *body = NULL;
    struct orch_wire_frame f;
    struct orch_wire_buf out = {0};
    struct orch__arena a = {0};
    if (!fake_read(fd, &f, &body) || f.type != ORCH_WIRE_CONFIG)
        return 1;
    if (strcmp(mode, "early") == 0) {
        uint8_t junk[] = {0, 0, 0, 0, 77};
        struct orch_wire_buf j = {junk, sizeof junk, sizeof junk};
        fake_write(fd, &j, false);
    }
    struct orch_wire_hello h = {.version = ORCH_WIRE_VERSION, .pid = (uint32_t)getpid()};
    orch_wire_put_hello(&out, &h);
    if (strcmp(mode, "garbage") == 0) {
        uint8_t junk[] = {0, 0, 0, 0, 99};
        uint8_t *d = realloc(out.data, out.len + sizeof junk); /* sent with the HELLO */
        if (d == NULL)
            return 1;
        memcpy(d + out.len, junk, sizeof junk);
        out.data = d;
        out.len += sizeof junk;
        out.cap = out.len;
    }
    fake_write(fd, &out, dribble);
    out.len = 0;
    while (fake_read(fd, &f, &body)) {
        struct orch_wire_batch b;
        if (f.type != ORCH_WIRE_BATCH || orch_wire_get_batch(&f, &a, &b) != 0)
            return 1;
        struct orch_wire_answer ans[8];
        uint64_t one = 1, zero = 0;
        struct orch_wire_report rep = {
            .batch = b.id, .message = "", .nrec = b.nrec, .rec = ans};
        for (uint32_t i = 0; i < b.nrec && i < 8; i++)
            ans[i] = (struct orch_wire_answer){.grain = b.rec[i].grain,
                                               .generation = b.rec[i].generation,
                                               .outcome = ORCH_WIRE_KEEP_TRUE,
                                               .message = ""};
        if (strcmp(mode, "wrongbatch") == 0) {
            rep.batch = b.id + 1;
        } else if (strcmp(mode, "otherop") == 0) {
            ans[0].outcome = ORCH_WIRE_OK;
            ans[0].nchild = ans[0].nout = 1;
            ans[0].payload = &one;
            ans[0].size = &zero;
        }
        if (strcmp(mode, "huge") == 0) {
            uint8_t hdr[] = {0xff, 0xff, 0xff, 0xff, ORCH_WIRE_REPORT};
            struct orch_wire_buf hb = {hdr, sizeof hdr, sizeof hdr};
            fake_write(fd, &hb, false);
        } else {
            orch_wire_put_report(&out, &rep);
            fake_write(fd, &out, dribble);
            out.len = 0;
        }
        orch__arena_free(&a);
    }
    free(body);
    orch_wire_buf_free(&out);
    return 0;
}

int main(int argc, char **argv)
{
    const char *fake = getenv(FAKE_ENV);
    if (argc == 3 && strcmp(argv[1], "__worker") == 0)
        return fake ? fake_worker(atoi(argv[2]), fake) : 1; /* never the suite itself */

    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_map_two_workers),
        T(test_expand_filter_reduce),
        T(test_crash_and_replacement),
        T(test_timeout),
        T(test_external_kill),
        T(test_two_batches_in_order),
        T(test_kill_holding_two),
        T(test_timeout_from_start),
        T(test_take_back),
        T(test_claim_began),
        T(test_attempt_failures),
        T(test_record_group_failures),
        T(test_readers_full),
        T(test_init_failures),
        T(test_close_runs_fini),
        T(test_start_stop),
        T(test_kill_busy_workers),
        T(test_protocol_errors),
        T(test_worker_direct),
        T(test_worker_runs_parts),
        T(test_bad_exe),
        T(test_remote_reaped_elsewhere),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
