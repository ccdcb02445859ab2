/* test_oom_run.c — allocation-failure injection (oom_inject.h) over the two processes that
 * run a job: the worker and the driver.
 *
 * The worker. orch_worker_main() runs in this process, on one end of a socketpair whose
 * other end plays the driver: the test writes CONFIG and two BATCHes there (and closes its
 * writing side, so that the worker sees the driver go once it has answered), then reads
 * back what the worker said. Every allocation of the worker's own code (decoding frames,
 * the built-in UDF, the answers, the payload store's, encoding the reports) is failed, one
 * and then every later one, as test_oom.c does for the stores. Each run must end as:
 *   - exit status 0 with HELLO and one REPORT per batch, each of them the reference's (the
 *     same answers, the same output values), or a failed batch (status FAILED or STORAGE,
 *     with a message and no answers) in its place;
 *   - or exit status 1, the worker dead after its HELLO and some of the reports (or after
 *     an INITFAIL), having said why on stderr;
 * never a crash, a hang, a report that differs from the reference's, or a leak.
 *
 * The driver. orch_driver_run() runs a small job (expand, map, reduce) with real worker
 * processes (they are other processes: only the driver's own allocations fail): a new
 * job, then a job whose run stopped half-way (its resume recovers open attempts). The
 * driver is not deterministic (when reports arrive decides its turns), so the allocation
 * numbers are sampled over the reference run's count, and a run may see no failure. Each
 * run must end in success with the reference's exports, or in an error with the job
 * consistent: a second run without failures (a resume) must then complete and give
 * exactly the reference's exports. Never a crash, a hung run (an alarm ends the test), or
 * a leak. ORCH_OOM_EXHAUSTIVE=1 fails every allocation number, both ways;
 * ORCH_OOM_DRIVER_AT=N only allocation N (to reproduce a run).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "oom_inject.h"
#include "orch_error.h"
#include "orch_job.h"
#include "orch_payload.h"
#include "orch_store.h"
#include "pool.h"
#include "wire.h"
#include "testutil.h"

/* The scratch directory of the test running; made by its setup, removed by its teardown
 * (also when the test failed half-way). */
static char scratch[512];

/* ---- the worker -------------------------------------------------------------------------- */

#define NBATCH 2
#define MAXREC 3
#define MAXVAL 3
#define NCHUNK_GRAINS MAXREC /* the records of a batch */

/* One worker session: a call, and the input values of its batches' records. */
struct worker_case {
    const char *name;
    const char *function; /* a built-in */
    enum orch_udf_op op;
    const char *arg_key, *arg_value; /* one argument, or NULL */
    /* [batch][record][value]: NULL ends a list; a record with no value has none */
    const char *inputs[NBATCH][MAXREC][MAXVAL + 1];
};

struct worker_ctx {
    const struct worker_case *c;
    char payloads[600];
    struct orch_wire_buf frames; /* CONFIG and the BATCHes, made once */
    int sv[2];
    int saved_in, saved_out, saved_err;
    char *err_buf; /* what the worker wrote to stderr in the run */
    char *reference[NBATCH]; /* each report, as text (report_text) */
};

/* Stores the case's input values and encodes the frames the driver would send. */
static void worker_prepare(struct worker_ctx *x)
{
    const struct worker_case *c = x->c;
    struct orch_payload_opts popts;
    orch_payload_job_opts(&popts);
    orch_payload *p;
    assert_int_equal(orch_payload_open(x->payloads, &popts, &p), 0);
    struct orch_wire_config cfg = {
        .call = "c",
        .fn_kind = ORCH_FN_BUILTIN,
        .function = c->function,
        .symbol = "",
        .op = c->op,
        .nin = 1,
        .nout = 1,
        .worker = 1,
        .payload_dir = x->payloads,
        .nargs = c->arg_key ? 1 : 0,
        .arg_keys = &c->arg_key,
        .arg_values = &c->arg_value,
    };
    assert_int_equal(orch_wire_put_config(&x->frames, &cfg), 0);
    for (int b = 0; b < NBATCH; b++) {
        struct orch_wire_record rec[MAXREC];
        struct orch_wire_value vals[MAXREC][MAXVAL];
        uint32_t nval[MAXREC];
        uint32_t nrec = 0;
        for (; nrec < MAXREC && c->inputs[b][nrec][0] != NULL; nrec++) {
            uint32_t n = 0;
            for (; c->inputs[b][nrec][n] != NULL; n++) {
                const char *v = c->inputs[b][nrec][n];
                uint64_t id;
                assert_int_equal(orch_payload_put(p, v, strlen(v), &id), 0);
                vals[nrec][n] = (struct orch_wire_value){.payload = id, .present = 1};
            }
            nval[nrec] = n;
            rec[nrec] = (struct orch_wire_record){.grain = 10u * (uint64_t)b + nrec + 1,
                                                  .generation = 1,
                                                  .attempt = 1,
                                                  .nin = 1,
                                                  .nval = &nval[nrec],
                                                  .vals = vals[nrec]};
        }
        struct orch_wire_batch batch = {.id = (uint64_t)b + 1, .nrec = nrec, .rec = rec};
        assert_int_equal(orch_wire_put_batch(&x->frames, &batch), 0);
    }
    orch_payload_close(p);
}

/* Points fd at a new file of the scratch directory (stderr) or /dev/null; returns a copy
 * of what fd was. */
static int redirect(int fd, const char *path, int flags)
{
    int saved = dup(fd);
    int to = open(path, flags | O_CLOEXEC, 0600);
    assert_true(saved >= 0 && to >= 0);
    assert_int_equal(dup2(to, fd), fd);
    close(to);
    return saved;
}

static void restore(int fd, int saved)
{
    fflush(fd == STDOUT_FILENO ? stdout : stderr);
    assert_int_equal(dup2(saved, fd), fd);
    close(saved);
}

static int worker_run(void *ctx)
{
    struct worker_ctx *x = ctx;
    /* The worker points stdin at /dev/null and stdout at stderr: both are this program's,
     * given back after the run; its stderr goes to a file, read by the check. */
    char errpath[700];
    snprintf(errpath, sizeof errpath, "%s/worker.err", scratch);
    bool injecting = oom.injecting;
    oom.injecting = false; /* the test's own work is not the worker's */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x->sv), 0);
    int sndbuf = 1 << 20;
    setsockopt(x->sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    setsockopt(x->sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    assert_int_equal(write(x->sv[0], x->frames.data, x->frames.len), (ssize_t)x->frames.len);
    shutdown(x->sv[0], SHUT_WR);
    fflush(stdout);
    fflush(stderr);
    x->saved_in = dup(STDIN_FILENO);
    x->saved_out = dup(STDOUT_FILENO);
    x->saved_err = redirect(STDERR_FILENO, errpath, O_WRONLY | O_CREAT | O_TRUNC);
    oom_trace_fd = x->saved_err;
    oom.injecting = injecting;
    int status = orch_worker_main(x->sv[1]); /* closes sv[1] */
    oom.injecting = false;
    oom_trace_fd = STDERR_FILENO;
    restore(STDERR_FILENO, x->saved_err);
    restore(STDOUT_FILENO, x->saved_out);
    restore(STDIN_FILENO, x->saved_in);
    x->err_buf = orch_test_read_file(errpath, NULL);
    oom.injecting = injecting;
    return status;
}

/* Writes to out an answer's children (or outputs) from `first` on: their values read back
 * from the store, then the failed ones, numbered from the record's first child. */
static void children_text(FILE *out, orch_payload *p, const struct orch_wire_answer *a)
{
    for (uint32_t k = 0; k < a->nchild * a->nout; k++) {
        if (a->payload[k] == 0) {
            fprintf(out, " -");
            continue;
        }
        void *data;
        size_t len;
        assert_int_equal(orch_payload_get(p, a->payload[k], &data, &len), 0);
        assert_int_equal(len, a->size[k]);
        fprintf(out, " [%.*s]", (int)len, (const char *)data);
        free(data);
    }
    for (uint32_t k = 0; k < a->nfailed; k++)
        fprintf(out, " failed %" PRIu32 " \"%s\"", a->first + a->failed[k].child,
                a->failed[k].message);
}

/* The children a streaming expansion sent in CHUNKs ahead of its batch's report (a slow
 * run sends them, by time: stream.h), kept as text per grain until the report. */
struct chunks {
    uint64_t grain[NCHUNK_GRAINS];
    char *text[NCHUNK_GRAINS];
    size_t len[NCHUNK_GRAINS];
    FILE *out[NCHUNK_GRAINS];
    uint32_t nchild[NCHUNK_GRAINS];
    int n;
};

static void chunk_add(struct chunks *c, orch_payload *p, const struct orch_wire_chunk *k)
{
    int i = 0;
    while (i < c->n && c->grain[i] != k->a.grain)
        i++;
    if (i == c->n) {
        assert_true(c->n < NCHUNK_GRAINS);
        c->grain[i] = k->a.grain;
        c->nchild[i] = 0;
        assert_non_null(c->out[i] = open_memstream(&c->text[i], &c->len[i]));
        c->n++;
    }
    assert_int_equal(k->a.first, c->nchild[i]); /* in order, none missing */
    children_text(c->out[i], p, &k->a);
    c->nchild[i] += k->a.nchild;
}

static void chunks_clear(struct chunks *c)
{
    for (int i = 0; i < c->n; i++) {
        fclose(c->out[i]);
        free(c->text[i]);
    }
    c->n = 0;
}

/* Writes to out a report as text, whether its children came in CHUNKs first or in the
 * report: each answer with its outputs' values read back from the store, or the failed
 * status. */
static void report_text(FILE *out, orch_payload *p, const struct orch_wire_report *r,
                        struct chunks *c)
{
    fprintf(out, "batch %" PRIu64 " status %d (%s) nrec %" PRIu32 "\n", r->batch,
            (int)r->status, r->status == ORCH_WIRE_STATUS_OK ? r->message : "-", r->nrec);
    for (uint32_t i = 0; i < r->nrec; i++) {
        const struct orch_wire_answer *a = &r->rec[i];
        int k = 0;
        while (k < c->n && c->grain[k] != a->grain)
            k++;
        if (k < c->n)
            fflush(c->out[k]);
        assert_int_equal(a->first, k < c->n ? c->nchild[k] : 0);
        fprintf(out, " grain %" PRIu64 " gen %" PRIu32 " %s \"%s\" %" PRIu32 "x%" PRIu32 ":",
                a->grain, a->generation, orch_wire_outcome_name(a->outcome), a->message,
                a->first + a->nchild, a->nout);
        if (k < c->n)
            fputs(c->text[k], out);
        children_text(out, p, a);
        fputc('\n', out);
    }
    chunks_clear(c);
}

static void worker_check(void *ctx, int status, bool failed, long fail_at)
{
    struct worker_ctx *x = ctx;
    const char *what = x->c->name;
    /* What the worker said. */
    size_t cap = 1 << 16, len = 0;
    uint8_t *in = malloc(cap);
    assert_non_null(in);
    for (;;) {
        if (len == cap)
            assert_non_null(in = realloc(in, cap *= 2));
        ssize_t n = read(x->sv[0], in + len, cap - len);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) /* the worker left frames unread */
            break;
        if (n < 0)
            fail_msg("%s, %s: reading the worker's socket: %s", what, run_label(fail_at),
                     strerror(errno));
        len += (size_t)n;
    }
    close(x->sv[0]);
    struct orch_payload_opts popts;
    orch_payload_job_opts(&popts);
    orch_payload *p;
    assert_int_equal(orch_payload_open(x->payloads, &popts, &p), 0);

    struct orch__arena a = {0};
    size_t off = 0;
    int nframe = 0, nreport = 0;
    bool initfail = false;
    struct chunks chunks = {.n = 0};
    while (off < len) {
        struct orch_wire_frame f;
        if (orch_wire_next(in + off, len - off, &f) != 1)
            fail_msg("%s, %s: a partial or malformed frame at byte %zu", what,
                     run_label(fail_at), off);
        if (nframe == 0 && f.type == ORCH_WIRE_INITFAIL) {
            const char *m;
            assert_int_equal(orch_wire_get_initfail(&f, &a, &m), 0);
            if (!failed || m[0] == '\0')
                fail_msg("%s, %s: INITFAIL \"%s\"", what, run_label(fail_at), m);
            initfail = true;
        } else if (nframe == 0) {
            struct orch_wire_hello h;
            assert_int_equal(orch_wire_get_hello(&f, &h), 0);
        } else {
            if (initfail || nreport == NBATCH)
                fail_msg("%s, %s: a frame after the last", what, run_label(fail_at));
            if (f.type == ORCH_WIRE_CHUNK) {
                struct orch_wire_chunk k;
                assert_int_equal(orch_wire_get_chunk(&f, &a, &k), 0);
                chunk_add(&chunks, p, &k);
                off += f.size;
                nframe++;
                continue;
            }
            struct orch_wire_report r;
            assert_int_equal(orch_wire_get_report(&f, &a, &r), 0);
            char *text = NULL;
            size_t tlen;
            FILE *t = open_memstream(&text, &tlen);
            assert_non_null(t);
            report_text(t, p, &r, &chunks);
            fclose(t);
            if (fail_at == 0) {
                if (r.status != ORCH_WIRE_STATUS_OK)
                    fail_msg("%s: the reference's batch %d failed: %s", what, nreport + 1,
                             r.message);
                x->reference[nreport] = keep_copy(text);
            } else if (strcmp(text, x->reference[nreport]) != 0) {
                /* A failed batch in its place: only where an allocation failed. */
                bool failed_batch = (r.status == ORCH_WIRE_STATUS_FAILED ||
                                     r.status == ORCH_WIRE_STATUS_STORAGE) &&
                                    r.nrec == 0 && r.message[0] != '\0' &&
                                    r.batch == (uint64_t)nreport + 1;
                if (!failed || !failed_batch) {
                    fprintf(stderr, "got:\n%sexpected:\n%s", text, x->reference[nreport]);
                    fail_msg("%s, %s: report %d differs", what, run_label(fail_at),
                             nreport + 1);
                }
            }
            free(text);
            nreport++;
        }
        off += f.size;
        nframe++;
    }
    chunks_clear(&chunks); /* those of a batch whose report never came */
    orch__arena_free(&a);
    orch_payload_close(p);
    free(in);
    if (status == 0 && nreport == NBATCH)
        ;
    else if (status == 1 && failed && (initfail || x->err_buf[0] != '\0'))
        ; /* died, and said why */
    else {
        fprintf(stderr, "worker's stderr:\n%s", x->err_buf);
        fail_msg("%s, %s: exit status %d after %d report(s)", what, run_label(fail_at),
                 status, nreport);
    }
    free(x->err_buf);
    x->err_buf = NULL;
}

static void worker_every_failure(const struct worker_case *c)
{
    struct worker_ctx x = {.c = c};
    snprintf(x.payloads, sizeof x.payloads, "%s/payloads-%s", scratch, c->function);
    worker_prepare(&x);
    char what[128];
    snprintf(what, sizeof what, "worker: %s", c->name);
    struct op op = {what, &x, worker_run, worker_check};
    run_every_failure(&op);
    orch_wire_buf_free(&x.frames);
    for (int b = 0; b < NBATCH; b++)
        free(x.reference[b]);
}

static void test_worker(void **state)
{
    (void)state;
    static const struct worker_case cases[] = {
        {.name = "identity (map)",
         .function = "identity",
         .op = ORCH_UDF_OP_MAP,
         .inputs = {{{"alpha", NULL}, {"", NULL}, {"gamma", NULL}}, {{"delta", NULL}}}},
        {.name = "upper (map)",
         .function = "upper",
         .op = ORCH_UDF_OP_MAP,
         .inputs = {{{"alpha", NULL}, {"beta", NULL}}, {{"gamma", NULL}}}},
        {.name = "split_lines (expand)",
         .function = "split_lines",
         .op = ORCH_UDF_OP_EXPAND,
         .inputs = {{{"a\nb\nc", NULL}, {"", NULL}}, {{"one line", NULL}, {"x\ny", NULL}}}},
        {.name = "concat (reduce)",
         .function = "concat",
         .op = ORCH_UDF_OP_REDUCE,
         .arg_key = "sep",
         .arg_value = "+",
         .inputs = {{{"a", "b", "c"}, {"d", NULL}}, {{"e", "f", NULL}}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        worker_every_failure(&cases[i]);
}

/* ---- the driver ------------------------------------------------------------------------- */

/* Expand, map and reduce (and a map that reads the files), over two files. */
static const char driver_pipeline[] = "pipeline oomrun\n"
                                      "domain doc\n"
                                      "domain line in doc\n"
                                      "source doc.path = files(\"texts/*.txt\")\n"
                                      "call read = read_file()\n"
                                      "call cut = split_lines() with batch=2\n"
                                      "call shout = upper() with batch=2\n"
                                      "call join = concat(sep=\"|\")\n"
                                      "doc.text = read(doc.path)\n"
                                      "line.raw = expand cut(doc.text)\n"
                                      "line.loud = shout(line.raw)\n"
                                      "doc.loud = reduce join(line.loud)\n"
                                      "output doc.loud\n"
                                      "output line.loud\n";

/* How many allocation numbers are failed each way, by default (ORCH_OOM_EXHAUSTIVE=1:
 * every one): spread evenly over our code's allocations of the reference run (a run's own
 * may shift a little: the driver is not deterministic), and over all of them. */
#define DRIVER_SAMPLES_OURS 48
#define DRIVER_SAMPLES_ALL 16

/* A run that hangs ends the program: the driver must end on its own. */
#define DRIVER_RUN_LIMIT_S 30

struct driver_ctx {
    char job[700];
    const char *from; /* a job to start each run from (a copy of it), or NULL: a new job */
    const char *exe;
    FILE *out; /* the driver's progress and summary: /dev/null */
    char *reference; /* the exports of the reference run */
};

/* Runs that failed and were resumed. */
static long resumed;

/* Which run is running, for driver_hung. */
static char running[128];

/* SIGALRM: the run hangs. Says which, and where (backtrace was loaded by oom_init). */
static void driver_hung(int sig)
{
    (void)sig;
    dprintf(STDERR_FILENO, "test_oom_run: driver, %s: the run did not end within %d s; "
                           "it was here:\n", running, DRIVER_RUN_LIMIT_S);
    void *frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
    _exit(1);
}

/* The job's exports of both outputs, with every entity (--all), as `orch export` writes
 * them: a new string (free it). */
static char *driver_exports(const struct driver_ctx *x)
{
    char *text = NULL;
    size_t len;
    FILE *all = open_memstream(&text, &len);
    assert_non_null(all);
    static const char *const ports[] = {"doc.loud", "line.loud"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "'%s' export '%s' %s --all", x->exe, x->job, ports[i]);
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, n, all);
        assert_int_equal(pclose(f), 0);
    }
    fclose(all);
    return text;
}

static struct orch_run_opts driver_opts(const struct driver_ctx *x)
{
    return (struct orch_run_opts){.cpus = 4,
                                  .progress = ORCH_PROGRESS_NONE,
                                  .out = x->out,
                                  .durability = ORCH_DURABILITY_PROCESS,
                                  .worker_exe = x->exe};
}

/* A new job in x->job, or a copy of x->from there; open. */
static struct orch_job *driver_job(struct driver_ctx *x)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/drive", scratch);
    snprintf(x->job, sizeof x->job, "%s/job", dir);
    if (access(x->job, F_OK) == 0)
        assert_int_equal(orch_test_rmtree(x->job), 0);
    struct orch_job *job;
    if (x->from == NULL) {
        assert_int_equal(orch_test_job_create(dir, driver_pipeline, &job), 0);
        return job;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", x->from, x->job);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(orch_job_open(x->job, 0, &job), 0);
    return job;
}

/* One run: of a new job or of a copy of x->from, with allocation fail_at failing (0:
 * none), closed; then, when the run failed, a second run without failures (a resume),
 * which must finish the job; then the exports are compared with the reference's (the
 * first made: any job of the pipeline ends with the same). Returns the allocations the
 * run made. */
static long driver_once(struct driver_ctx *x, long fail_at, bool persistent)
{
    struct orch_job *job = driver_job(x);
    struct orch_run_opts o = driver_opts(x);
    struct orch_run_stats stats;

    snprintf(running, sizeof running, "%s", run_label(fail_at));
    track_start();
    alarm(DRIVER_RUN_LIMIT_S);
    inject_start(fail_at, persistent);
    int rc = orch_driver_run(job, &o, &stats);
    long count = inject_stop();
    alarm(0);
    bool failed = oom.failed;
    char detail[1024];
    snprintf(detail, sizeof detail, "%s", orch_error_detail());
    orch_run_stats_free(&stats);
    orch_job_close(job);
    track_check("driver: run", fail_at);

    if (rc != 0) {
        if (!failed)
            fail_msg("driver, %s: the run failed (%d, %s) with no allocation failing",
                     run_label(fail_at), rc, detail);
        /* The job is kept consistent: a resume finishes it. */
        assert_int_equal(orch_job_open(x->job, 0, &job), 0);
        snprintf(running, sizeof running, "the resume after %s", run_label(fail_at));
        alarm(DRIVER_RUN_LIMIT_S);
        int again = orch_driver_run(job, &o, &stats);
        alarm(0);
        if (again != 0)
            fail_msg("driver, %s: the run failed (%d, %s), and its resume too: %d (%s)",
                     run_label(fail_at), rc, detail, again, orch_error_detail());
        orch_run_stats_free(&stats);
        orch_job_close(job);
        resumed++;
    }
    char *exports = driver_exports(x);
    if (x->reference == NULL) {
        x->reference = keep_copy(exports);
    } else if (strcmp(exports, x->reference) != 0) {
        fprintf(stderr, "got:\n%s\nexpected:\n%s\n", exports, x->reference);
        fail_msg("driver, %s: the run %s, and the exports differ from the reference's",
                 run_label(fail_at), rc == 0 ? "succeeded" : "failed and was resumed");
    }
    free(exports);
    return count;
}

/* Runs the reference (recording where its allocations come from), then fails the sampled
 * allocation numbers of it, each both ways. Returns the reference's allocations. */
static long driver_every_failure(struct driver_ctx *x, const char *what)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    oom_record(true);
    long total = driver_once(x, 0, false);
    oom_record(false);
    assert_int_equal(oom_recorded(), total);
    long *ours = calloc((size_t)total + 1, sizeof *ours), nours = 0;
    assert_non_null(ours);
    for (long n = 1; n <= total; n++)
        if (oom_recorded_ours(n))
            ours[nours++] = n;
    assert_true(nours > 0);

    /* ORCH_OOM_DRIVER_AT=N: only allocation N fails, both ways (to reproduce one run). */
    const char *at = getenv("ORCH_OOM_DRIVER_AT");
    long only = at ? atol(at) : 0;
    /* The allocation numbers to fail. */
    long nsel_ours = nours < DRIVER_SAMPLES_OURS ? nours : DRIVER_SAMPLES_OURS;
    long nsel = only > 0 ? 1 : exhaustive ? total : nsel_ours + DRIVER_SAMPLES_ALL;
    long runs = 0, survived = 0;
    resumed = 0;
    for (int persistent = 0; persistent <= 1; persistent++) {
        for (long i = 0; i < nsel; i++) {
            long n = only > 0         ? only
                     : exhaustive     ? i + 1
                     : i < nsel_ours  ? ours[i * nours / nsel_ours]
                                      : 1 + (i - nsel_ours) * total / DRIVER_SAMPLES_ALL;
            driver_once(x, n, persistent);
            runs++;
            survived += !oom.failed;
        }
    }
    oom.persistent = false;
    free(ours);
    lsan_check(what);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_message("  %s: %ld allocations (%ld of ours); runs: %ld with one or all from one "
                  "failing,\n    %ld of which saw no failure, %ld failed and were resumed "
                  "(%.2f s)\n",
                  what, total, nours, runs, survived, resumed,
                  (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    return total;
}

/* Whether the job in x->job has grains sealed, and grains not. */
static bool driver_half_done(const struct driver_ctx *x)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' sql '%s' --format tsv \"SELECT sum(phase = 'sealed'), count(*) FROM grain\"",
             x->exe, x->job);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    long sealed = -1, all = -1;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%ld\t%ld", &sealed, &all) == 2)
            break;
    while (fgets(line, sizeof line, f))
        ;
    assert_int_equal(pclose(f), 0);
    return sealed > 0 && sealed < all;
}

/* Makes the job that the resume runs start from: a new job whose run stopped half-way
 * (some grains sealed, some not), every allocation from a point of the reference's `total`
 * on failing, and moves it to `to`. */
static void driver_interrupted(struct driver_ctx *x, long total, const char *to)
{
    bool made = false;
    for (int m = 8; !made && m < 16; m++) {
        struct orch_job *job = driver_job(x);
        struct orch_run_opts o = driver_opts(x);
        struct orch_run_stats stats;
        long fail_at = total * m / 16;
        snprintf(running, sizeof running, "%s (making the job to resume)", run_label(fail_at));
        track_start();
        alarm(DRIVER_RUN_LIMIT_S);
        inject_start(fail_at, true);
        int rc = orch_driver_run(job, &o, &stats);
        inject_stop();
        alarm(0);
        orch_run_stats_free(&stats);
        orch_job_close(job);
        track_check("driver: making the job to resume", fail_at);
        made = rc != 0 && driver_half_done(x);
    }
    oom.persistent = false;
    assert_true(made);
    assert_int_equal(rename(x->job, to), 0);
}

static void test_driver(void **state)
{
    (void)state;
    struct driver_ctx x = {.exe = getenv("ORCH")};
    assert_non_null(x.exe);
    x.out = fopen("/dev/null", "w");
    assert_non_null(x.out);
    char texts[600];
    snprintf(texts, sizeof texts, "%s/drive", scratch);
    assert_int_equal(mkdir(texts, 0700), 0);
    snprintf(texts, sizeof texts, "%s/drive/texts", scratch);
    assert_int_equal(mkdir(texts, 0700), 0);
    char path[700];
    snprintf(path, sizeof path, "%s/a.txt", texts);
    assert_int_equal(orch_test_write_text(path, "one\ntwo\n\nthree\n"), 0);
    snprintf(path, sizeof path, "%s/b.txt", texts);
    assert_int_equal(orch_test_write_text(path, "four\nfive"), 0);
    signal(SIGALRM, driver_hung);

    /* A new job, run from its start. */
    long total = driver_every_failure(&x, "driver, a new job");
    /* A job whose run stopped half-way, resumed (recovery of its open attempts). */
    char from[700];
    snprintf(from, sizeof from, "%s/drive/stopped", scratch);
    driver_interrupted(&x, total, from);
    x.from = from;
    driver_every_failure(&x, "driver, a resume");

    free(x.reference);
    fclose(x.out);
    signal(SIGALRM, SIG_DFL);
}

/* ---- main ------------------------------------------------------------------------------- */

static int scratch_setup(void **state)
{
    oom_reset(state);
    return oom_scratch_dir(scratch, sizeof scratch, "oom-run");
}

static int scratch_teardown(void **state)
{
    oom_reset(state);
    return orch_test_rmtree(scratch);
}

int main(void)
{
    if (oom_init((void *)main) != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_worker, scratch_setup, scratch_teardown),
        cmocka_unit_test_setup_teardown(test_driver, scratch_setup, scratch_teardown),
    };
    /* Every store of the suite enforces the schema's rules (orch_store_config). */
    orch_store_configure(&(struct orch_store_config){.checks = true});
    return cmocka_run_group_tests(tests, NULL, NULL);
}
