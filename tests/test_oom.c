/* test_oom.c — allocation-failure injection (oom_inject.h) over the compiler and the two
 * stores. Each operation is run once without failure (the reference, which also counts
 * its allocations), then again for each N from 1 up to that count: once with the Nth
 * allocation failing alone (the code after the failure runs on, and must not trip over
 * what failed), and once with every allocation from the Nth on failing (cleanup code that
 * itself allocates). Every run must end in one of two ways:
 *   - success, with exactly the reference's result (SQLite survives some failures by
 *     design; our code must never turn a failure into a wrong answer, nor a swallowed
 *     error into a different diagnostic);
 *   - -ENOMEM, with a detail where the module documents one, and nothing left behind (no
 *     file of a job whose creation failed, no transaction left open).
 * And never a crash, an assertion, or a leak. The payload store is failed at its own
 * allocations only (LMDB's are out of reach: oom_inject.h).
 *
 * test_oom_run.c does the same for the worker process and the driver.
 */
#define _GNU_SOURCE /* open_memstream */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oom_inject.h"
#include "orch_error.h"
#include "orch_facts.h"
#include "orch_lang.h"
#include "orch_payload.h"
#include "orch_plan.h"
#include "orch_store.h"
#include "testutil.h"

/* ---- the compiler ----------------------------------------------------------------------- */

struct compile_case {
    const char *name;
    const char *path;    /* compile this file (orch_lang_compile_file) ... */
    const char *text;    /* ... or this text */
    const char *basedir; /* for text: relative to the current directory when relative */
    int expect;          /* 0 or ORCH_ESYNTAX */
    /* the reference */
    char *canonical;
    char *diags;
    char *detail;
    /* this run */
    orch_plan *plan, *again;
    int again_rc;
    FILE *diag;
    char *diag_buf;
    size_t diag_len;
};

/* Compiles the case; a plan is also rebuilt from its canonical text (as resume does). The
 * diagnostics stream is opened here, for each run: its buffer is libc's, never failed. */
static int compile_run(void *ctx)
{
    struct compile_case *c = ctx;
    c->plan = c->again = NULL;
    c->diag_buf = NULL;
    c->diag = open_memstream(&c->diag_buf, &c->diag_len);
    assert_non_null(c->diag);
    int rc = c->path ? orch_lang_compile_file(c->path, c->diag, &c->plan)
                     : orch_lang_compile(c->name, c->text, strlen(c->text), c->basedir, c->diag,
                                         &c->plan);
    c->again_rc = 0;
    if (rc == 0)
        c->again_rc = orch_plan_from_canonical(orch_plan_canonical(c->plan), &c->again);
    return rc;
}

static void compile_check(void *ctx, int rc, bool failed, long fail_at)
{
    struct compile_case *c = ctx;
    fclose(c->diag);
    c->diag = NULL;
    char *detail = strdup(orch_error_detail());
    assert_non_null(detail);
    assert_true(rc == 0 ? c->plan != NULL : c->plan == NULL);
    if (fail_at == 0) {
        /* The reference. */
        if (rc != c->expect)
            fail_msg("%s: compiles to %d, expected %d; diagnostics:\n%s", c->name, rc,
                     c->expect, c->diag_buf);
        assert_int_equal(c->again_rc, 0);
        c->canonical = rc == 0 ? keep_copy(orch_plan_canonical(c->plan)) : NULL;
        c->diags = keep_copy(c->diag_buf);
        c->detail = keep_copy(detail);
    } else if (!failed || rc != -ENOMEM) {
        /* No failure, or one that was survived: the same answer, to the byte. */
        if (rc != c->expect)
            fail_msg("%s, %s: compiles to %d (%s), expected %d", c->name, run_label(fail_at),
                     rc, detail, c->expect);
        if (strcmp(c->diag_buf, c->diags) != 0) {
            /* cmocka cuts long messages: the texts go to stderr whole. */
            fprintf(stderr, "got:\n%s\nexpected:\n%s\n", c->diag_buf, c->diags);
            fail_msg("%s, %s: diagnostics differ", c->name, run_label(fail_at));
        }
        if (rc == 0) {
            assert_string_equal(orch_plan_canonical(c->plan), c->canonical);
            if (c->again_rc != 0)
                assert_enomem(c->name, c->again_rc, fail_at, NULL);
            else
                assert_string_equal(orch_plan_canonical(c->again), c->canonical);
        } else {
            assert_string_equal(detail, c->detail);
        }
    } else {
        /* A failure reported as such, with a detail, and no diagnostics: they would be
         * those of a partial pipeline. */
        assert_enomem(c->name, rc, fail_at, NULL);
        if (detail[0] == '\0')
            fail_msg("%s, %s: -ENOMEM without a detail", c->name, run_label(fail_at));
        if (c->diag_buf[0] != '\0')
            fail_msg("%s, %s: -ENOMEM, but diagnostics were written:\n%s", c->name,
                     run_label(fail_at), c->diag_buf);
    }
    orch_plan_free(c->plan);
    orch_plan_free(c->again);
    c->plan = c->again = NULL;
    free(c->diag_buf);
    c->diag_buf = NULL;
    free(detail);
}

static void compile_every_failure(struct compile_case *c)
{
    struct op op = {c->name, c, compile_run, compile_check};
    struct coverage cov = run_every_failure(&op);
    /* No SQLite here: every allocation was failed, both ways. */
    assert_int_equal(cov.failed_alone, cov.total);
    assert_int_equal(cov.failed_on, cov.total);
    free(c->canonical);
    free(c->diags);
    free(c->detail);
    c->canonical = c->diags = c->detail = NULL;
}

/* Every pipeline of examples/, from its file. */
static void test_compile_examples(void **state)
{
    (void)state;
    const char *root = getenv("SRCDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/examples", root ? root : ".");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".orch") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct compile_case c = {.name = e->d_name, .path = path, .expect = 0};
        compile_every_failure(&c);
        n++;
    }
    closedir(d);
    assert_true(n >= 3);
}

/* Libraries, exec, every option, and a basedir relative to the current directory (so
 * that the builder asks for it). */
static const char tools_src[] =
    "pipeline tools\n"
    "domain doc\n"
    "domain part in doc\n"
    "source doc.path = lines(\"lists/./all.txt\")\n"
    "call lib = library(\"lib//udf.so\", \"udf_f\")(mode=\"x\\ty\", n=3, flag=on)"
    " with workers=2, batch=8, batch_bytes=64MiB, cpus=0.5, gpus=0.25, retries=0,"
    " timeout=90m, reserve=parent\n"
    "call sh = exec(\"tr a-z A-Z\")\n"
    "call cut = split_lines()\n"
    "call keep = nonempty()\n"
    "call same = identity()\n"
    "doc.a = lib(doc.path)\n"
    "doc.b = sh(doc.a)\n"
    "part.x = expand cut(doc.b)\n"
    "part.y = filter keep(part.x)\n"
    "part.p = broadcast doc.path\n"
    "part.z = same(?part.y)\n"
    "output part.z\n";

/* Errors of every stage: the lexer, the parser (and its cascades of broken names), the
 * builder's immediate checks and the whole-plan checks. */
static const char broken_src[] =
    "pipeline bad\n"
    "domain doc\n"
    "domain line in nowhere\n"
    "domain word in line\n"
    "domain doc\n"
    "source doc.path = files(\"a\\qb\")\n"
    "source doc.path = files(\"texts/*.txt\")\n"
    "call read = read_file(\n"
    "call cut = split_lines() with batch=0, workers=x\n"
    "call join = concat(sep=\"\\n\", nope=1) with timeout=5parsecs, colour=red\n"
    "call what = no_such_function()\n"
    "call join = upper()\n"
    "doc.text = read(doc.path)\n"
    "line.raw = expand cut(doc.text)\n"
    "doc.n = reduce tally(line.raw)\n"
    "doc.j = reduce join(word.raw)\n"
    "doc.k = filter join(?doc.path)\n"
    "doc.path = broadcast doc.path\n"
    "output doc.missing\n"
    "\x01 junk \"unterminated\n"
    "doc.\xff = x(y)\n";

/* Only whole-plan errors (no syntax error, so the completeness checks run too): a cycle,
 * a port without producer, an unused call, an output named twice. */
static const char cycle_src[] = "pipeline cyc\n"
                                "domain a\n"
                                "domain b in a\n"
                                "source a.x = files(\"*.txt\")\n"
                                "call f = upper()\n"
                                "call g = upper()\n"
                                "call h = split_lines()\n"
                                "call unused = upper()\n"
                                "a.y = f(a.z)\n"
                                "a.z = g(a.y)\n"
                                "b.w = expand h(a.q)\n"
                                "output a.y\n"
                                "output a.y\n";

/* A long cycle, named with "..." in the middle. */
static const char long_cycle_src[] =
    "pipeline ring\n"
    "domain a\n"
    "source a.x = files(\"*\")\n"
    "call c0 = upper()\ncall c1 = upper()\ncall c2 = upper()\ncall c3 = upper()\n"
    "call c4 = upper()\ncall c5 = upper()\ncall c6 = upper()\ncall c7 = upper()\n"
    "call c8 = upper()\ncall c9 = upper()\ncall c10 = upper()\ncall c11 = upper()\n"
    "call c12 = upper()\ncall c13 = upper()\n"
    "a.p0 = c0(a.p13)\na.p1 = c1(a.p0)\na.p2 = c2(a.p1)\na.p3 = c3(a.p2)\n"
    "a.p4 = c4(a.p3)\na.p5 = c5(a.p4)\na.p6 = c6(a.p5)\na.p7 = c7(a.p6)\n"
    "a.p8 = c8(a.p7)\na.p9 = c9(a.p8)\na.p10 = c10(a.p9)\na.p11 = c11(a.p10)\n"
    "a.p12 = c12(a.p11)\na.p13 = c13(a.p12)\n";

static void test_compile_text(void **state)
{
    (void)state;
    struct compile_case cases[] = {
        {.name = "tools.orch", .text = tools_src, .basedir = "rel/./dir", .expect = 0},
        {.name = "broken.orch", .text = broken_src, .basedir = "/base", .expect = ORCH_ESYNTAX},
        {.name = "cycle.orch", .text = cycle_src, .basedir = "/base", .expect = ORCH_ESYNTAX},
        {.name = "ring.orch", .text = long_cycle_src, .basedir = "/", .expect = ORCH_ESYNTAX},
        {.name = "empty.orch", .text = "# nothing\n", .basedir = "/", .expect = ORCH_ESYNTAX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        compile_every_failure(&cases[i]);
}

/* ---- the plan builder, through the C API ---------------------------------------------- */

struct builder_ctx {
    orch_plan *plan;
    char *printed; /* orch_plan_print of the plan */
    int print_rc;
    bool enomem; /* an add function returned -ENOMEM */
    int bad_rc;  /* the first result of an add function that is not allowed */
    const char *bad_what;
    char *canonical; /* the reference */
    char *ref_printed;
};

/* An add function answers 0, or -ENOMEM; or ORCH_EPLAN once an earlier one failed (the
 * declaration it refers to may be the one that was lost). */
static void fed(struct builder_ctx *x, int rc, const char *what)
{
    if (rc == -ENOMEM)
        x->enomem = true;
    else if (rc != 0 && !(rc == ORCH_EPLAN && x->enomem) && x->bad_rc == 0)
        x->bad_rc = rc, x->bad_what = what;
}

static orch_loc at(int line)
{
    return (orch_loc){line, 1};
}

static void call(struct builder_ctx *x, orch_plan_builder *b, const char *name,
                 enum orch_fn_kind kind, const char *fn, const char *sym, const char *arg,
                 enum orch_arg_kind akind, const char *value, const char *opt,
                 const char *optval, int line)
{
    int c;
    fed(x, orch_plan_add_call(b, name, kind, fn, sym, at(line), &c), "add_call");
    if (c < 0)
        return; /* no handle to give arguments to */
    if (arg)
        fed(x, orch_plan_call_arg(b, c, arg, akind, value, at(line)), "call_arg");
    if (opt)
        fed(x, orch_plan_call_option(b, c, opt, optval, at(line)), "call_option");
}

static void stmt(struct builder_ctx *x, orch_plan_builder *b, enum orch_op op,
                 const char *callname, const char *out_d, const char *out_p, const char *in_d,
                 const char *in_p, bool optional, int line)
{
    int s;
    fed(x, orch_plan_add_stmt(b, op, callname, at(line), &s), "add_stmt");
    if (s < 0)
        return;
    fed(x, orch_plan_stmt_output(b, s, out_d, out_p, at(line)), "stmt_output");
    fed(x, orch_plan_stmt_input(b, s, in_d, in_p, optional, at(line)), "stmt_input");
}

/* The reference pipeline of DESIGN §2 and a little more, declared in an order the
 * language would also allow (a reduce before the ports it reads are produced). */
static int builder_run(void *ctx)
{
    struct builder_ctx *x = ctx;
    x->plan = NULL;
    x->printed = NULL;
    x->print_rc = 0;
    x->enomem = false;
    x->bad_rc = 0;
    orch_plan_builder *b;
    int rc = orch_plan_builder_new("data/../pdfs", &b); /* relative: asks for the cwd */
    if (rc)
        return rc;
    fed(x, orch_plan_set_name(b, "pdf_ocr", at(1)), "set_name");
    fed(x, orch_plan_add_domain(b, "pdf", NULL, at(2)), "add_domain");
    fed(x, orch_plan_add_domain(b, "page", "pdf", at(3)), "add_domain");
    fed(x, orch_plan_add_source(b, "pdf", "path", ORCH_SOURCE_FILES, "./in/*.pdf", at(4)),
        "add_source");
    call(x, b, "render", ORCH_FN_BUILTIN, "pdf_render", NULL, "dpi", ORCH_ARG_NUMBER, "150",
         "workers", "1", 5);
    call(x, b, "ocr", ORCH_FN_BUILTIN, "tesseract_ocr", NULL, "lang", ORCH_ARG_STRING, "eng",
         "timeout", "120s", 6);
    call(x, b, "keep", ORCH_FN_BUILTIN, "nonempty", NULL, NULL, 0, NULL, "batch", "4", 7);
    call(x, b, "assemble", ORCH_FN_BUILTIN, "concat", NULL, "sep", ORCH_ARG_STRING, "\f",
         "reserve", "parent", 8);
    call(x, b, "lib", ORCH_FN_LIBRARY, "../lib/x.so", "udf_x", "k", ORCH_ARG_NAME, "v",
         "batch_bytes", "1GiB", 9);
    call(x, b, "sh", ORCH_FN_EXEC, "cat -n", NULL, NULL, 0, NULL, "gpus", "0.125", 10);
    stmt(x, b, ORCH_OP_REDUCE, "assemble", "pdf", "text", "page", "good", false, 11);
    stmt(x, b, ORCH_OP_EXPAND, "render", "page", "image", "pdf", "path", false, 12);
    stmt(x, b, ORCH_OP_MAP, "ocr", "page", "text", "page", "image", false, 13);
    stmt(x, b, ORCH_OP_FILTER, "keep", "page", "good", "page", "text", false, 14);
    stmt(x, b, ORCH_OP_BROADCAST, NULL, "page", "doc", "pdf", "path", false, 15);
    stmt(x, b, ORCH_OP_MAP, "lib", "page", "lx", "page", "doc", false, 16);
    stmt(x, b, ORCH_OP_MAP, "sh", "page", "sx", "page", "lx", true, 17);
    fed(x, orch_plan_add_output(b, "pdf", "text", at(18)), "add_output");
    fed(x, orch_plan_add_output(b, "page", "sx", at(19)), "add_output");
    rc = orch_plan_build(b, &x->plan);
    orch_plan_builder_free(b);
    if (rc == 0) {
        size_t len;
        FILE *f = open_memstream(&x->printed, &len);
        assert_non_null(f);
        x->print_rc = orch_plan_print(x->plan, f);
        fclose(f);
    }
    return rc;
}

static void builder_check(void *ctx, int rc, bool failed, long fail_at)
{
    struct builder_ctx *x = ctx;
    if (x->bad_rc != 0)
        fail_msg("builder, %s: %s answered %d (%s)", run_label(fail_at), x->bad_what, x->bad_rc,
                 orch_strerror(x->bad_rc));
    assert_true(rc == 0 ? x->plan != NULL : x->plan == NULL);
    if (fail_at == 0) {
        assert_int_equal(rc, 0);
        assert_int_equal(x->print_rc, 0);
        x->canonical = keep_copy(orch_plan_canonical(x->plan));
        x->ref_printed = keep_copy(x->printed);
    } else if (rc == 0) {
        /* The build survived: only a failure inside orch_plan_print may have happened. */
        assert_false(x->enomem);
        assert_string_equal(orch_plan_canonical(x->plan), x->canonical);
        if (x->print_rc != 0)
            assert_enomem("orch_plan_print", x->print_rc, fail_at, NULL);
        else
            assert_string_equal(x->printed, x->ref_printed);
    } else {
        /* Once an add function said -ENOMEM, the build must say it too. */
        assert_true(failed);
        assert_enomem("builder", rc, fail_at, NULL);
    }
    orch_plan_free(x->plan);
    x->plan = NULL;
    free(x->printed);
    x->printed = NULL;
}

static void test_plan_builder(void **state)
{
    (void)state;
    struct builder_ctx x = {0};
    struct op op = {"plan builder (C API) + orch_plan_print", &x, builder_run, builder_check};
    run_every_failure(&op);
    free(x.canonical);
    free(x.ref_printed);
}

/* ---- scratch directories ---------------------------------------------------------------- */

/* The scratch directory of the test running; made by its setup, removed by its teardown
 * (also when the test failed half-way). */
static char scratch[512];

/* ---- the state store -------------------------------------------------------------------- */

/* Two operations: creating a job database (the migrations: most of SQLite's allocations),
 * then everything else on a copy of a job made once, so that the runs of the second do
 * not each pay for the first. */
struct store_ctx {
    char db[600];       /* where each run works */
    char template[600]; /* a new job, for the second operation to start from */
    const char *step;   /* the step that failed */
};

static const char PLAN_TEXT[] = "pipeline p\n\ndomain a\n";
static const char PLAN_HASH[] = "0123456789abcdef0123456789abcdef"
                                "0123456789abcdef0123456789abcdef";

static bool exists(const char *path, const char *suffix)
{
    char p[700];
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return access(p, F_OK) == 0;
}

static void remove_db(const char *db)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s%s", db, suffixes[i]);
        remove(p);
    }
}

/* A byte copy of a closed database (no -wal: closing checkpointed it). No allocation. */
static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        assert_int_equal(write(out, buf, (size_t)n), n);
    assert_int_equal(n, 0);
    close(in);
    assert_int_equal(close(out), 0);
}

/* The job row must read back as written, with the status expected. */
static int job_matches(orch_store *s, enum orch_job_status status)
{
    struct orch_job_info *info;
    int rc = orch_store_job_get(s, &info);
    if (rc < 0)
        return rc;
    assert_string_equal(info->name, "p");
    assert_string_equal(info->plan_text, PLAN_TEXT);
    assert_string_equal(info->plan_hash, PLAN_HASH);
    assert_string_equal(info->pipeline_path, "/jobs/p.orch");
    assert_true(info->orch_version[0] != '\0');
    assert_true(info->created_at_ms > 0);
    assert_int_equal(info->status, status);
    free(info);
    return 0;
}

/* A transaction that fails or is rolled back leaves no transaction open behind the
 * store's back (orch_store.h: commit and rollback always end it). */
static void assert_no_txn(const struct store_ctx *x, orch_store *s)
{
    if (orch_store_in_txn(s) || !sqlite3_get_autocommit(orch_store_db(s)))
        fail_msg("state store, step %s, %s: a transaction is still open (the store "
                 "thinks %s)",
                 x->step, run_label(oom.fail_at), orch_store_in_txn(s) ? "so too" : "not");
}

#define STEP(name, call)                                                                       \
    do {                                                                                       \
        x->step = name;                                                                        \
        if ((rc = (call)) < 0)                                                                 \
            goto fail;                                                                         \
    } while (0)

/* Creates a job database: the schema's migrations, in their transactions. */
static int store_create_run(void *ctx)
{
    struct store_ctx *x = ctx;
    orch_store *s = NULL;
    int rc;
    STEP("create", orch_store_open(x->db, ORCH_STORE_CREATE, &s));
    assert_int_equal(orch_store_schema_version(s), orch_store_schema_latest());
    orch_store_close(s);
    return 0;
fail:
    assert_null(s);
    return rc;
}

/* A new job has no roots and no Slurm jobs: a row would be a wrong answer. */
static int no_root(void *ctx, const struct orch_root_row *r)
{
    (void)ctx;
    (void)r;
    fail_msg("root_page: a row in a job with no roots");
    return -EINVAL;
}

static int no_slurm_job(void *ctx, const char *job)
{
    (void)ctx;
    fail_msg("open_slurm_jobs: %s in a job with none", job);
    return -EINVAL;
}

/* On a new job: write its row in a transaction, change the status in one that is rolled
 * back, read the row; reopen read-only and read it; reopen read-write, change the status
 * and read it; then two look-ups that find nothing. */
static int store_job_run(void *ctx)
{
    struct store_ctx *x = ctx;
    orch_store *s = NULL;
    int rc;
    STEP("open", orch_store_open(x->db, 0, &s));
    STEP("begin", orch_store_begin(s));
    STEP("job_init", orch_store_job_init(s, "p", PLAN_TEXT, PLAN_HASH, "/jobs/p.orch"));
    STEP("commit", orch_store_commit(s));
    assert_no_txn(x, s);
    STEP("begin (2)", orch_store_begin(s));
    STEP("set_status in a transaction", orch_store_job_set_status(s, ORCH_JOB_RUNNING));
    STEP("rollback", orch_store_rollback(s));
    assert_no_txn(x, s);
    STEP("job_get", job_matches(s, ORCH_JOB_CREATED));
    orch_store_close(s);
    s = NULL;
    STEP("open read-only", orch_store_open(x->db, ORCH_STORE_READONLY, &s));
    STEP("job_get read-only", job_matches(s, ORCH_JOB_CREATED));
    orch_store_close(s);
    s = NULL;
    STEP("open read-write", orch_store_open(x->db, 0, &s));
    STEP("set_status", orch_store_job_set_status(s, ORCH_JOB_FINISHED));
    STEP("job_get read-write", job_matches(s, ORCH_JOB_FINISHED));
    /* Look-ups whose statement is prepared on first use: a failed prepare must leave
     * nothing for the caller to reset but NULL. */
    STEP("root_page", orch_store_root_page(s, 0, 0, 0, 16, no_root, NULL));
    STEP("open_slurm_jobs", orch_store_open_slurm_jobs(s, no_slurm_job, NULL));
    orch_store_close(s);
    return 0;
fail:
    if (s != NULL) {
        if (orch_store_in_txn(s)) {
            /* Keep the step's detail: the rollback's own result is checked here. */
            char keep[1024];
            snprintf(keep, sizeof keep, "%s", orch_error_detail());
            int rb = orch_store_rollback(s);
            assert_true(rb == 0 || rb == -ENOMEM);
            orch_error_set(rc, "%s", keep);
        }
        assert_no_txn(x, s);
        orch_store_close(s);
    }
    return rc;
}

#undef STEP

static void store_check(void *ctx, int rc, bool failed, long fail_at)
{
    struct store_ctx *x = ctx;
    if (rc != 0) {
        char what[200];
        snprintf(what, sizeof what, "state store, step %s", x->step);
        if (!failed)
            fail_msg("%s: failed (%d: %s) with no allocation failing", what, rc,
                     orch_error_detail());
        assert_enomem(what, rc, fail_at, x->db);
        /* orch_store_open(CREATE) removes what it made when it fails. */
        if (strcmp(x->step, "create") == 0 &&
            (exists(x->db, "") || exists(x->db, "-wal") || exists(x->db, "-shm")))
            fail_msg("%s, %s: the failed creation left files behind", what, run_label(fail_at));
    }
    remove_db(x->db);
}

/* The second operation starts from a copy of the template (the copy allocates nothing). */
static int store_job_run_on_copy(void *ctx)
{
    struct store_ctx *x = ctx;
    copy_file(x->template, x->db);
    return store_job_run(ctx);
}

static void test_state_store(void **state)
{
    (void)state;
    struct store_ctx x = {0};
    snprintf(x.db, sizeof x.db, "%s/state.db", scratch);
    snprintf(x.template, sizeof x.template, "%s/template.db", scratch);

    struct op create = {"state store: create a job (migrations)", &x, store_create_run,
                        store_check};
    run_every_failure(&create);

    orch_store *s;
    assert_int_equal(orch_store_open(x.template, ORCH_STORE_CREATE, &s), 0);
    orch_store_close(s);
    assert_false(exists(x.template, "-wal"));
    struct op job = {"state store: job row, transactions, reopen", &x, store_job_run_on_copy,
                     store_check};
    run_every_failure(&job);
    remove_db(x.template);
}

/* ---- the payload store ------------------------------------------------------------------ */

struct payload_ctx {
    char env[600];
    const char *step;
};

static const struct orch_iov VALUES[] = {
    {"alpha", 5},
    {NULL, 0},
    {"a value a little longer than the others", 39},
};
#define NVALUES (sizeof VALUES / sizeof VALUES[0])

static int payload_run(void *ctx)
{
    struct payload_ctx *x = ctx;
    orch_payload *p = NULL;
    orch_payload_rtxn *r = NULL;
    uint64_t ids[NVALUES];
    int rc;
#define STEP(name, call)                                                                       \
    do {                                                                                       \
        x->step = name;                                                                        \
        if ((rc = (call)) < 0)                                                                 \
            goto fail;                                                                         \
    } while (0)
    STEP("open", orch_payload_open(x->env, NULL, &p));
    STEP("put_many", orch_payload_put_many(p, VALUES, NVALUES, ids));
    for (size_t i = 0; i < NVALUES; i++) {
        void *data;
        size_t len;
        assert_int_equal(ids[i], i + 1);
        STEP("get", orch_payload_get(p, ids[i], &data, &len));
        assert_int_equal(len, VALUES[i].len);
        assert_memory_equal(data, VALUES[i].len ? VALUES[i].data : "", len);
        free(data);
    }
    STEP("read_begin", orch_payload_read_begin(p, &r));
    for (size_t i = 0; i < NVALUES; i++) {
        const void *data;
        size_t len;
        STEP("read", orch_payload_read(r, ids[i], &data, &len));
        assert_int_equal(len, VALUES[i].len);
        assert_memory_equal(data, VALUES[i].len ? VALUES[i].data : "", len);
    }
    orch_payload_read_end(r);
    r = NULL;
    struct orch_payload_stat st;
    STEP("stat", orch_payload_stat(p, &st));
    assert_int_equal(st.count, NVALUES);
    assert_int_equal(st.bytes, 5 + 0 + 39);
    assert_int_equal(st.next_id, NVALUES + 1);
    orch_payload_close(p);
    return 0;
#undef STEP
fail:
    orch_payload_read_end(r);
    orch_payload_close(p);
    return rc;
}

static void payload_check(void *ctx, int rc, bool failed, long fail_at)
{
    struct payload_ctx *x = ctx;
    if (rc != 0) {
        char what[200];
        snprintf(what, sizeof what, "payload store, step %s", x->step);
        if (!failed)
            fail_msg("%s: failed (%d: %s) without an allocation failing", what, rc,
                     orch_error_detail());
        assert_enomem(what, rc, fail_at, x->env);
    }
    /* A failed open may have failed before it made the directory. */
    assert_true(access(x->env, F_OK) != 0 || orch_test_rmtree(x->env) == 0);
}

static void test_payload_store(void **state)
{
    (void)state;
    struct payload_ctx x = {0};
    snprintf(x.env, sizeof x.env, "%s/payloads", scratch);
    struct op op = {"payload store: open, put_many, get, read, stat", &x, payload_run,
                    payload_check};
    run_every_failure(&op);
}

/* ---- main ------------------------------------------------------------------------------- */

static int scratch_setup(void **state)
{
    oom_reset(state);
    return oom_scratch_dir(scratch, sizeof scratch, "oom");
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
        cmocka_unit_test_setup(test_compile_examples, oom_reset),
        cmocka_unit_test_setup(test_compile_text, oom_reset),
        cmocka_unit_test_setup(test_plan_builder, oom_reset),
        cmocka_unit_test_setup_teardown(test_state_store, scratch_setup, scratch_teardown),
        cmocka_unit_test_setup_teardown(test_payload_store, scratch_setup, scratch_teardown),
    };
    /* Every store of the suite enforces the schema's rules (orch_store_config). */
    orch_store_configure(&(struct orch_store_config){.checks = true});
    return cmocka_run_group_tests(tests, NULL, NULL);
}
