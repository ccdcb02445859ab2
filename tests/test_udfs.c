/* test_udfs.c — the UDF module: every built-in through the real ABI and the real answer
 * collector, the collector's rules, the library() loader, and the exec() adapter with the
 * Python helper and with programs that misbehave. */
#define _GNU_SOURCE /* nftw, in testutil.h */
#include "orch_udf_host.h"
#include "builtin_sigs.h"
#include "orch_error.h"
#include "testutil.h"
#include "udf_harness.h"

#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef ORCH_UDF_SAMPLE_PATH
#error "ORCH_UDF_SAMPLE_PATH must name the sample UDF shared object"
#endif
#ifndef ORCH_SOURCE_ROOT
#error "ORCH_SOURCE_ROOT must name the source tree"
#endif

/* ---- the harness (udf_harness.h): calls named "t" ------------------------------------ */

static int setup(void **state)
{
    *state = udf_h_new("t");
    return *state != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    return udf_h_free(*state);
}

/* Record i is OK with exactly the children in want (NULL-terminated), on every port. */
static void check_children(struct udf_h *h, size_t i, const char *const *want)
{
    udf_h_check_outcome(h, i, ORCH_UDF_OK);
    const struct orch_udf_answer *a = &h->ans.rec[i];
    size_t n = 0;
    while (want[n] != NULL)
        n++;
    assert_int_equal(a->nchildren, n);
    for (size_t c = 0; c < n; c++)
        for (size_t p = 0; p < h->ans.nout; p++)
            udf_h_check_out(&a->children[c * h->ans.nout + p], want[c], strlen(want[c]));
}

/* No child process is left, running or zombie. */
static void check_no_children(void)
{
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

/* Makes h's scratch directory and puts the path of NAME in it into path (n bytes). */
static void make_tmpdir(struct udf_h *h, const char *name, char *path, size_t n)
{
    assert_int_equal(orch_test_path(path, n, udf_h_tmpdir(h, "udfs"), name), 0);
}

/* ---- registry ------------------------------------------------------------------------ */

/* Whether a shared object whose path contains `name` is mapped in this process. */
static bool mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

/* The OCR and video built-ins are in modules (builtins.c), opened by the first process
 * that asks for one: neither this test nor orch links FFmpeg or Tesseract. Runs first, while
 * no module is open. */
static void test_modules(void **state)
{
    (void)state;
    assert_false(mapped("libavcodec"));
    assert_false(mapped("libtesseract"));
    const struct orch_udf *u;
    assert_int_equal(orch_udf_builtin_get("identity", &u), 0);
    assert_string_equal(u->name, "identity");
    assert_int_equal(orch_udf_builtin_get("nope", &u), -ENOENT);
    assert_null(u);
    assert_string_equal(orch_error_detail(), "unknown built-in function 'nope'");

    /* A module that cannot be opened: the built-in's error names it and why. */
    orch_udf_set_module_dir("/nonexistent-orch-modules");
    assert_true(orch_udf_builtin_get("video_probe", &u) < 0);
    assert_null(u);
    assert_non_null(strstr(orch_error_detail(), "built-in video_probe: library "
                                                "/nonexistent-orch-modules/orch_video.so: "));
    assert_null(orch_udf_builtin("tesseract_ocr"));
    orch_udf_set_module_dir(NULL);
    assert_false(mapped("libavcodec"));

    assert_int_equal(orch_udf_builtin_get("video_probe", &u), 0);
    assert_string_equal(u->name, "video_probe");
    assert_true(mapped("orch_video.so"));
    assert_true(mapped("libavcodec"));
    assert_false(mapped("libtesseract"));
    assert_int_equal(orch_udf_builtin_get("tesseract_ocr", &u), 0);
    assert_true(mapped("libtesseract"));
    /* A built-in found in its module once stays: the directory is not read again. */
    orch_udf_set_module_dir("/nonexistent-orch-modules");
    assert_non_null(orch_udf_builtin("video_probe"));
    assert_null(orch_udf_builtin("video_frames"));
    orch_udf_set_module_dir(NULL);
}

static void test_registry(void **state)
{
    (void)state;
    static const char *const names[] = {
        "read_file",    "split",        "split_lines", "upper",   "identity", "nonempty",
        "concat",       "count",        "sleep",       "fail_if", "flaky",    "tesseract_ocr",
        "pdf_render",   "pdf_text",     "page_stats",  "blank",   "first",    "video_probe",
        "video_scenes", "video_frames", "not_dark"};
    size_t n = sizeof names / sizeof names[0];
    assert_int_equal(orch_udf_builtin_count(), n);
    for (size_t i = 0; i < n; i++) {
        const struct orch_udf *u = orch_udf_builtin(names[i]);
        assert_non_null(u);
        assert_string_equal(u->name, names[i]);
        assert_int_equal(u->abi_version, ORCH_UDF_ABI_VERSION);
        assert_non_null(u->init);
        assert_non_null(u->run);
        assert_non_null(u->fini);
        assert_ptr_equal(orch_udf_builtin_at(i), u);
    }
    assert_null(orch_udf_builtin("nope"));
    assert_null(orch_udf_builtin(NULL));
    assert_null(orch_udf_builtin_at(n));
    assert_string_equal(orch_udf_op_name(ORCH_UDF_OP_EXPAND_ALIGNED), "expand aligned");
    assert_string_equal(orch_udf_outcome_name(ORCH_UDF_GROUP_FAILURE), "group_failure");
}

static void test_init_checks(void **state)
{
    struct udf_h *h = *state;
    /* an op the built-in does not serve */
    assert_int_equal(udf_h_builtin(h, "split", ORCH_UDF_OP_MAP, 1, 1, "sep", ",", NULL),
                     -EINVAL);
    udf_h_check_contains(h->err, "split cannot be used as map");
    udf_h_close(h);
    /* an unknown argument */
    assert_int_equal(udf_h_builtin(h, "upper", ORCH_UDF_OP_MAP, 1, 1, "x", "1", NULL), -EINVAL);
    udf_h_check_contains(h->err, "upper has no argument 'x'");
    udf_h_close(h);
    /* a number that is not one */
    assert_int_equal(udf_h_builtin(h, "sleep", ORCH_UDF_OP_MAP, 1, 1, "ms", "-3", NULL),
                     -EINVAL);
    udf_h_check_contains(h->err, "ms must be a non-negative integer");
    udf_h_close(h);
    assert_int_equal(udf_h_builtin(h, "concat", ORCH_UDF_OP_FILTER, 1, 1, NULL), -EINVAL);
    udf_h_close(h);
    assert_int_equal(udf_h_builtin(h, "nonempty", ORCH_UDF_OP_REDUCE, 1, 1, NULL), -EINVAL);
}

/* The compile-time signature table (builtin_sigs.c) and the runtime agree: every built-in
 * has a signature; every op a signature allows, init accepts, with every argument the
 * signature knows; a missing required argument fails init. */
static int init_with(const struct orch_udf *u, enum orch_udf_op op, size_t nin, size_t nout,
                     const char *const *keys, const char *const *vals, size_t nargs)
{
    char err[256] = "";
    struct orch_udf_config cfg = {.call = "t",
                                  .function = u->name,
                                  .op = op,
                                  .nin = nin,
                                  .nout = nout,
                                  .nargs = nargs,
                                  .arg_keys = keys,
                                  .arg_values = vals,
                                  .error = err,
                                  .error_size = sizeof err};
    void *st = NULL;
    int rc = u->init(&cfg, &st);
    if (rc == 0)
        u->fini(st);
    else
        assert_true(err[0] != '\0');
    return rc;
}

static void test_signatures(void **state)
{
    (void)state;
    for (size_t i = 0; i < orch_udf_builtin_count(); i++)
        assert_non_null(orch_builtin_sig_find(orch_udf_builtin_at(i)->name));
    static const struct {
        unsigned bit;
        enum orch_udf_op op;
    } ops[] = {
        {ORCH_BUILTIN_MAP, ORCH_UDF_OP_MAP},
        {ORCH_BUILTIN_EXPAND, ORCH_UDF_OP_EXPAND},
        {ORCH_BUILTIN_EXPAND, ORCH_UDF_OP_EXPAND_ALIGNED},
        {ORCH_BUILTIN_FILTER, ORCH_UDF_OP_FILTER},
        {ORCH_BUILTIN_REDUCE, ORCH_UDF_OP_REDUCE},
    };
    for (int s = 0; s < orch_builtin_sig_count(); s++) {
        const struct orch_builtin_sig *sig = orch_builtin_sig_at(s);
        const struct orch_udf *u = orch_udf_builtin(sig->name);
        if (u == NULL) { /* not built here (yet): the MuPDF and Tesseract ones */
            assert_true(strcmp(sig->name, "pdf_render") == 0 ||
                        strcmp(sig->name, "tesseract_ocr") == 0);
            continue;
        }
        assert_true(sig->outputs == 1 || strcmp(sig->name, "video_frames") == 0);
        assert_true(sig->nargs <= UDF_H_MAXARGS);
        const char *keys[UDF_H_MAXARGS], *vals[UDF_H_MAXARGS];
        char num[UDF_H_MAXARGS][24];
        for (int a = 0; a < sig->nargs; a++) {
            const struct orch_builtin_arg *arg = &sig->args[a];
            keys[a] = arg->key;
            snprintf(num[a], sizeof num[a], "%lld", (long long)arg->min);
            vals[a] = arg->type == ORCH_BUILTIN_ARG_CHOICE ? arg->choices[0]
                      : arg->type == ORCH_BUILTIN_ARG_INT  ? (arg->def ? arg->def : num[a])
                                                           : (arg->def ? arg->def : ",");
        }
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            if (!(sig->ops & ops[k].bit))
                continue;
            if (init_with(u, ops[k].op, (size_t)sig->min_inputs, (size_t)sig->outputs, keys,
                          vals, (size_t)sig->nargs) != 0)
                fail_msg("%s refuses %s with every argument", sig->name,
                         orch_udf_op_name(ops[k].op));
            for (int a = 0; a < sig->nargs; a++) {
                if (!sig->args[a].required)
                    continue;
                const char *k2[UDF_H_MAXARGS], *v2[UDF_H_MAXARGS];
                size_t n = 0;
                for (int b = 0; b < sig->nargs; b++)
                    if (b != a) {
                        k2[n] = keys[b];
                        v2[n++] = vals[b];
                    }
                assert_int_equal(init_with(u, ops[k].op, 1, (size_t)sig->outputs, k2, v2, n),
                                 -EINVAL);
            }
        }
    }
}

/* ---- split -------------------------------------------------------------------------- */

static void test_split(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "split", ORCH_UDF_OP_EXPAND, 1, 1, "sep", ",", NULL), 0);
    size_t plain = udf_h_add_text(h, "a,b,c");
    size_t trailing = udf_h_add_text(h, "a,b,");
    size_t consecutive = udf_h_add_text(h, "a,,b");
    size_t empty = udf_h_add_text(h, "");
    size_t only_sep = udf_h_add_text(h, ",");
    size_t no_sep = udf_h_add_text(h, "abc");
    size_t leading = udf_h_add_text(h, ",x");
    size_t absent = udf_h_add(h, NULL, 0);
    assert_int_equal(udf_h_run(h), 0);
    check_children(h, plain, (const char *const[]){"a", "b", "c", NULL});
    check_children(h, trailing, (const char *const[]){"a", "b", NULL});
    check_children(h, consecutive, (const char *const[]){"a", "", "b", NULL});
    check_children(h, empty, (const char *const[]){NULL});
    check_children(h, only_sep, (const char *const[]){"", NULL});
    check_children(h, no_sep, (const char *const[]){"abc", NULL});
    check_children(h, leading, (const char *const[]){"", "x", NULL});
    udf_h_check_outcome(h, absent, ORCH_UDF_DROP);
}

static void test_split_multibyte(void **state)
{
    struct udf_h *h = *state;
    /* two output ports: every child carries the piece on both */
    assert_int_equal(
        udf_h_builtin(h, "split", ORCH_UDF_OP_EXPAND_ALIGNED, 1, 2, "sep", "::", NULL), 0);
    size_t a = udf_h_add_text(h, "a::b:c::");
    size_t b = udf_h_add_text(h, ":::");
    size_t c = udf_h_add_text(h, "\xc3\xa9::\xc3\xa8"); /* UTF-8 text, byte-wise */
    assert_int_equal(udf_h_run(h), 0);
    check_children(h, a, (const char *const[]){"a", "b:c", NULL});
    check_children(h, b, (const char *const[]){"", ":", NULL});
    check_children(h, c, (const char *const[]){"\xc3\xa9", "\xc3\xa8", NULL});
}

static void test_split_args(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "split", ORCH_UDF_OP_EXPAND, 1, 1, NULL), -EINVAL);
    udf_h_check_contains(h->err, "sep is required");
    udf_h_close(h);
    assert_int_equal(udf_h_builtin(h, "split", ORCH_UDF_OP_EXPAND, 1, 1, "sep", "", NULL),
                     -EINVAL);
    udf_h_check_contains(h->err, "sep is required");
    udf_h_close(h);
    assert_int_equal(
        udf_h_builtin(h, "split_lines", ORCH_UDF_OP_EXPAND, 1, 1, "sep", ",", NULL), -EINVAL);
    udf_h_close(h);
    assert_int_equal(udf_h_builtin(h, "split_lines", ORCH_UDF_OP_EXPAND, 1, 1, NULL), 0);
    size_t i = udf_h_add_text(h, "one\ntwo\n\nfour\n");
    size_t j = udf_h_add_text(h, "no newline");
    assert_int_equal(udf_h_run(h), 0);
    check_children(h, i, (const char *const[]){"one", "two", "", "four", NULL});
    check_children(h, j, (const char *const[]){"no newline", NULL});
}

/* ---- maps and a filter ----------------------------------------------------------- */

static void test_upper(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "upper", ORCH_UDF_OP_MAP, 2, 1, NULL), 0);
    size_t a = udf_h_add_text(h, "abc-Xyz 09 \xc3\xa9");
    udf_h_text(h, a, 1, "ignored second input");
    size_t b = udf_h_add_text(h, "");
    size_t c = udf_h_add(h, NULL, 0);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, a, 0, "ABC-XYZ 09 \xc3\xa9"); /* non-ASCII bytes unchanged */
    udf_h_check_value(h, b, 0, "");
    udf_h_check_outcome(h, c, ORCH_UDF_DROP);
}

static void test_identity(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "identity", ORCH_UDF_OP_MAP, 1, 2, NULL), 0);
    static const char bin[] = {'a', '\0', 'b'};
    size_t a = udf_h_rec(h);
    udf_h_value(h, a, 0, bin, sizeof bin);
    size_t b = udf_h_add(h, NULL, 0);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_outcome(h, a, ORCH_UDF_OK);
    udf_h_check_out(&h->ans.rec[a].values[0], bin, sizeof bin);
    udf_h_check_out(&h->ans.rec[a].values[1], bin, sizeof bin);
    udf_h_check_outcome(h, b, ORCH_UDF_DROP);
    udf_h_close(h);
    udf_h_clear(h);
    /* as an expand: one child */
    assert_int_equal(udf_h_builtin(h, "identity", ORCH_UDF_OP_EXPAND, 1, 1, NULL), 0);
    a = udf_h_add_text(h, "x");
    assert_int_equal(udf_h_run(h), 0);
    check_children(h, a, (const char *const[]){"x", NULL});
}

static void test_nonempty(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "nonempty", ORCH_UDF_OP_FILTER, 1, 1, NULL), 0);
    size_t a = udf_h_add_text(h, "x");
    size_t b = udf_h_add_text(h, "");
    size_t c = udf_h_add(h, NULL, 0);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_outcome(h, a, ORCH_UDF_KEEP_TRUE);
    udf_h_check_outcome(h, b, ORCH_UDF_KEEP_FALSE);
    udf_h_check_outcome(h, c, ORCH_UDF_KEEP_FALSE);
}

/* ---- reduces ---------------------------------------------------------------------- */

static void test_concat(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "concat", ORCH_UDF_OP_REDUCE, 1, 1, "sep", ", ", NULL),
                     0);
    size_t a = udf_h_rec(h);
    udf_h_text(h, a, 0, "a");
    udf_h_text(h, a, 0, "");
    udf_h_text(h, a, 0, "c");
    size_t one = udf_h_rec(h);
    udf_h_text(h, one, 0, "solo");
    size_t none = udf_h_rec(h);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, a, 0, "a, , c");
    udf_h_check_value(h, one, 0, "solo");
    udf_h_check_value(h, none, 0, ""); /* zero values: present and empty */
    udf_h_close(h);
    udf_h_clear(h);
    assert_int_equal(udf_h_builtin(h, "concat", ORCH_UDF_OP_REDUCE, 1, 1, NULL), 0);
    a = udf_h_rec(h);
    udf_h_text(h, a, 0, "x");
    udf_h_text(h, a, 0, "y");
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, a, 0, "xy"); /* sep defaults to "" */
}

static void test_count(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "count", ORCH_UDF_OP_REDUCE, 1, 1, NULL), 0);
    size_t a = udf_h_rec(h);
    for (int k = 0; k < 3; k++)
        udf_h_text(h, a, 0, "v");
    size_t none = udf_h_rec(h);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, a, 0, "3");
    udf_h_check_value(h, none, 0, "0");
}

/* ---- sleep, fail_if, flaky ----------------------------------------------------------- */

static void test_sleep(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "sleep", ORCH_UDF_OP_MAP, 1, 1, "ms", "5", NULL), 0);
    size_t a = udf_h_add_text(h, "payload");
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, a, 0, "payload");
    udf_h_close(h);
    udf_h_clear(h);
    /* without ms: as many ms as the number the input starts with (0 when none) */
    assert_int_equal(udf_h_builtin(h, "sleep", ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
    a = udf_h_add_text(h, "7 dwarves");
    size_t b = udf_h_add_text(h, "no number");
    size_t c = udf_h_add(h, NULL, 0);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, a, 0, "7 dwarves");
    udf_h_check_value(h, b, 0, "no number");
    udf_h_check_outcome(h, c, ORCH_UDF_DROP);
}

static void test_fail_if_typed(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(
        udf_h_builtin(h, "fail_if", ORCH_UDF_OP_MAP, 1, 1, "contains", "BAD", NULL), 0);
    size_t ok = udf_h_add_text(h, "fine");
    size_t bad = udf_h_add_text(h, "very BAD input");
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, ok, 0, "fine");
    udf_h_check_outcome(h, bad, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, bad, "contains \"BAD\"");
    udf_h_close(h);

    assert_int_equal(udf_h_builtin(h, "fail_if", ORCH_UDF_OP_MAP, 1, 1, "contains", "BAD",
                                   "kind", "group", NULL),
                     0);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, ok, 0, "fine");
    udf_h_check_outcome(h, bad, ORCH_UDF_GROUP_FAILURE);
    udf_h_check_msg(h, bad, "BAD");
    udf_h_close(h);

    assert_int_equal(udf_h_builtin(h, "fail_if", ORCH_UDF_OP_MAP, 1, 1, "contains", "BAD",
                                   "kind", "attempt", NULL),
                     0);
    assert_true(udf_h_run(h) < 0);
    udf_h_check_contains(orch_udf_answers_error(&h->ans), "BAD");
    udf_h_clear(h);
    udf_h_add_text(h, "fine");
    assert_int_equal(udf_h_run(h), 0); /* the same state serves the next batch */
    udf_h_check_value(h, 0, 0, "fine");
    udf_h_close(h);

    assert_int_equal(udf_h_builtin(h, "fail_if", ORCH_UDF_OP_MAP, 1, 1, "kind", "record", NULL),
                     -EINVAL);
    udf_h_check_contains(h->err, "contains is required");
    udf_h_close(h);
    assert_int_equal(udf_h_builtin(h, "fail_if", ORCH_UDF_OP_MAP, 1, 1, "contains", "x", "kind",
                                   "explode", NULL),
                     -EINVAL);
    udf_h_check_contains(h->err, "'explode'");
}

/* Runs fail_if(contains="BAD", kind=kind) in a child process on the batch ["fine", "BAD"].
 * The child writes 'E' to fd `tell` when the first record is answered and 'R' if run ever
 * returns. */
static const struct orch_udf_host_ops *real_ops;
static int tell_fd = -1;

static int telling_emit(void *host, size_t i, size_t port, const void *data, size_t len)
{
    if (write(tell_fd, "E", 1) != 1)
        _exit(5);
    return real_ops->emit(host, i, port, data, len);
}

static pid_t fork_fail_if(const char *kind, int tell)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid > 0)
        return pid;
    signal(SIGABRT, SIG_DFL);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    const char *keys[] = {"contains", "kind"}, *vals[] = {"BAD", kind};
    char err[256];
    struct orch_udf_config cfg = {.call = "t",
                                  .function = "fail_if",
                                  .op = ORCH_UDF_OP_MAP,
                                  .nin = 1,
                                  .nout = 1,
                                  .nargs = 2,
                                  .arg_keys = keys,
                                  .arg_values = vals,
                                  .error = err,
                                  .error_size = sizeof err};
    const struct orch_udf *u = orch_udf_builtin("fail_if");
    void *st;
    if (u->init(&cfg, &st) != 0)
        _exit(3);
    struct orch_udf_value v[2] = {{"fine", 4, 1}, {"BAD", 3, 1}};
    struct orch_udf_input in[2] = {{1, &v[0]}, {1, &v[1]}};
    struct orch_udf_record rec[2] = {{1, 1, 1, &in[0]}, {2, 1, 1, &in[1]}};
    struct orch_udf_batch batch = {.n = 2, .rec = rec};
    struct orch_udf_answers ans;
    if (orch_udf_answers_init(&ans, "t", ORCH_UDF_OP_MAP, 1) != 0 ||
        orch_udf_answers_reset(&ans, &batch) != 0)
        _exit(4);
    static struct orch_udf_host_ops ops;
    real_ops = batch.ops;
    ops = *batch.ops;
    ops.emit = telling_emit;
    batch.ops = &ops;
    tell_fd = tell;
    u->run(st, &batch);
    if (write(tell, "R", 1) != 1)
        _exit(6);
    _exit(0);
}

static void test_fail_if_crash(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork_fail_if("crash", p[1]);
    close(p[1]);
    char c = 0;
    assert_int_equal(read(p[0], &c, 1), 1);
    assert_int_equal(c, 'E');      /* run was running */
    ssize_t n = read(p[0], &c, 1); /* EOF when it dies; 'R' would mean run returned */
    assert_int_equal(n, 0);
    close(p[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    check_no_children();
}

static void test_fail_if_hang(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork_fail_if("hang", p[1]);
    close(p[1]);
    char c = 0;
    assert_int_equal(read(p[0], &c, 1), 1);
    assert_int_equal(c, 'E'); /* run is running, on its way to the "BAD" record */
    /* A correct hang never writes 'R' nor exits: nothing arrives. (A broken one would write
     * 'R' within microseconds; the wait only bounds how long we look.) */
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 300), 0);
    assert_int_equal(waitpid(pid, NULL, WNOHANG), 0); /* still running */
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    close(p[0]);
    check_no_children();
}

static void test_flaky(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(
        udf_h_builtin(h, "flaky", ORCH_UDF_OP_MAP, 1, 1, "fail_attempts", "2", NULL), 0);
    for (uint32_t attempt = 1; attempt <= 3; attempt++) {
        udf_h_clear(h);
        size_t i = udf_h_add_text(h, "v");
        h->rec[i].attempt = attempt;
        int rc = udf_h_run(h);
        if (attempt <= 2) {
            assert_true(rc < 0);
            udf_h_check_contains(orch_udf_answers_error(&h->ans), "attempt");
        } else {
            assert_int_equal(rc, 0);
            udf_h_check_value(h, i, 0, "v");
        }
    }
    /* one young record fails the whole batch */
    udf_h_clear(h);
    udf_h_add_text(h, "old");
    h->rec[0].attempt = 3;
    udf_h_add_text(h, "young");
    h->rec[1].attempt = 1;
    assert_true(udf_h_run(h) < 0);
    udf_h_close(h);

    /* default: fail_attempts=1 */
    assert_int_equal(udf_h_builtin(h, "flaky", ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
    udf_h_clear(h);
    udf_h_add_text(h, "v");
    assert_true(udf_h_run(h) < 0);
    h->rec[0].attempt = 2;
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, 0, 0, "v");
}

/* ---- read_file ----------------------------------------------------------------------- */

static void test_read_file(void **state)
{
    struct udf_h *h = *state;
    char path[600], missing[600];
    make_tmpdir(h, "data.bin", path, sizeof path);
    assert_int_equal(orch_test_path(missing, sizeof missing, h->tmpdir, "missing.txt"), 0);
    static const char content[] = {'h', 'i', '\0', '\n', 'x'};
    assert_int_equal(orch_test_write_file(path, content, sizeof content), 0);

    assert_int_equal(udf_h_builtin(h, "read_file", ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
    size_t ok = udf_h_add_text(h, path);
    size_t bad = udf_h_add_text(h, missing);
    size_t dir = udf_h_add_text(h, h->tmpdir);
    size_t empty = udf_h_add_text(h, "");
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_outcome(h, ok, ORCH_UDF_OK);
    udf_h_check_out(&h->ans.rec[ok].values[0], content, sizeof content);
    udf_h_check_outcome(h, bad, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, bad, missing);
    udf_h_check_msg(h, bad, strerror(ENOENT));
    udf_h_check_outcome(h, dir, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, dir, strerror(EISDIR));
    udf_h_check_outcome(h, empty, ORCH_UDF_RECORD_FAILURE);
}

/* ---- the collector's rules ---------------------------------------------------------- */

static void test_collector_map(void **state)
{
    struct udf_h *h = *state;
    struct orch_udf_answers *a = &h->ans;
    struct orch_udf_batch *b = &h->batch;
    assert_int_equal(orch_udf_answers_init(a, "ocr", ORCH_UDF_OP_MAP, 2), 0);
    h->ans_inited = true;
    for (int k = 0; k < 6; k++)
        udf_h_add_text(h, "in");
    assert_int_equal(orch_udf_answers_reset(a, b), 0);
    /* 0: complete */
    assert_int_equal(orch_udf_emit(b, 0, 1, "y", 1), 0);
    assert_int_equal(orch_udf_emit(b, 0, 0, "x", 1), 0);
    /* 1: one port missing */
    assert_int_equal(orch_udf_emit(b, 1, 0, "x", 1), 0);
    /* misuse: twice the same port, a port past nout, an index past the batch, the wrong op */
    assert_int_equal(orch_udf_emit(b, 0, 0, "again", 5), -EINVAL);
    assert_int_equal(orch_udf_emit(b, 0, 2, "x", 1), -EINVAL);
    assert_int_equal(orch_udf_emit(b, 6, 0, "x", 1), -EINVAL);
    assert_int_equal(orch_udf_keep(b, 2, true), -EINVAL);
    assert_int_equal(orch_udf_child(b, 2), -EINVAL);
    assert_int_equal(orch_udf_no_children(b, 2), -EINVAL);
    assert_int_equal(orch_udf_drop(b, 0), -EINVAL); /* already answered */
    assert_int_equal(orch_udf_emit(b, 2, 0, NULL, 3), -EINVAL);
    /* 2: left unanswered. 3: a failure replaces values. 4: drop. 5: group failure */
    assert_int_equal(orch_udf_emit(b, 3, 0, "x", 1), 0);
    assert_int_equal(orch_udf_fail_record(b, 3, "late problem"), 0);
    assert_int_equal(orch_udf_emit(b, 3, 1, "x", 1), -EINVAL);      /* after a failure */
    assert_int_equal(orch_udf_fail_group(b, 3, "second"), -EINVAL); /* one failure */
    assert_int_equal(orch_udf_drop(b, 4), 0);
    assert_int_equal(orch_udf_drop(b, 4), -EINVAL);
    assert_int_equal(orch_udf_emit(b, 4, 0, "x", 1), -EINVAL);
    assert_int_equal(orch_udf_fail_group(b, 5, NULL), 0);
    assert_int_equal(orch_udf_answers_finish(a), 0);
    assert_int_equal(orch_udf_emit(b, 2, 0, "x", 1), -EINVAL); /* after finish */

    udf_h_check_value(h, 0, 0, "x");
    udf_h_check_value(h, 0, 1, "y");
    udf_h_check_outcome(h, 1, ORCH_UDF_RECORD_FAILURE);
    assert_string_equal(a->rec[1].msg, "udf ocr gave no value for output 2 of 2");
    assert_null(a->rec[1].values);
    udf_h_check_outcome(h, 2, ORCH_UDF_RECORD_FAILURE);
    assert_string_equal(a->rec[2].msg, "udf ocr gave no answer for this record");
    udf_h_check_outcome(h, 3, ORCH_UDF_RECORD_FAILURE);
    assert_string_equal(a->rec[3].msg, "late problem");
    assert_null(a->rec[3].values);
    udf_h_check_outcome(h, 4, ORCH_UDF_DROP);
    udf_h_check_outcome(h, 5, ORCH_UDF_GROUP_FAILURE);
    assert_string_equal(a->rec[5].msg, "");

    /* reset forgets everything; a smaller batch reuses the memory */
    udf_h_clear(h);
    udf_h_add_text(h, "in");
    assert_int_equal(orch_udf_answers_reset(a, b), 0);
    assert_int_equal(a->n, 1);
    udf_h_check_outcome(h, 0, ORCH_UDF_NONE);
    assert_int_equal(orch_udf_emit(b, 0, 0, "", 0), 0); /* an empty value is a value */
    assert_int_equal(orch_udf_emit(b, 0, 1, NULL, 0), 0);
    assert_int_equal(orch_udf_answers_finish(a), 0);
    udf_h_check_value(h, 0, 0, "");
    udf_h_check_value(h, 0, 1, "");
}

static void test_collector_expand(void **state)
{
    struct udf_h *h = *state;
    struct orch_udf_answers *a = &h->ans;
    struct orch_udf_batch *b = &h->batch;
    assert_int_equal(orch_udf_answers_init(a, "pages", ORCH_UDF_OP_EXPAND, 2), 0);
    h->ans_inited = true;
    for (int k = 0; k < 5; k++)
        udf_h_add_text(h, "in");
    assert_int_equal(orch_udf_answers_reset(a, b), 0);
    /* 0: many children (grows past the initial capacity) */
    char text[8];
    for (int c = 0; c < 10; c++) {
        assert_int_equal(orch_udf_child(b, 0), 0);
        snprintf(text, sizeof text, "%d", c);
        assert_int_equal(orch_udf_emit_str(b, 0, 0, text), 0);
        assert_int_equal(orch_udf_emit_str(b, 0, 1, text), 0);
    }
    /* 1: emit before any child; then a child missing port 2 */
    assert_int_equal(orch_udf_emit(b, 1, 0, "x", 1), -EINVAL);
    assert_int_equal(orch_udf_child(b, 1), 0);
    assert_int_equal(orch_udf_emit(b, 1, 0, "x", 1), 0);
    assert_int_equal(orch_udf_child(b, 1), 0);
    assert_int_equal(orch_udf_emit(b, 1, 0, "y", 1), 0);
    /* 2: zero children, said explicitly; nothing may follow */
    assert_int_equal(orch_udf_no_children(b, 2), 0);
    assert_int_equal(orch_udf_child(b, 2), -EINVAL);
    assert_int_equal(orch_udf_no_children(b, 2), -EINVAL);
    /* 3: a drop is not zero children; 4: keep is not an expand answer */
    assert_int_equal(orch_udf_drop(b, 3), 0);
    assert_int_equal(orch_udf_keep(b, 4, false), -EINVAL);
    assert_int_equal(orch_udf_answers_finish(a), 0);

    udf_h_check_outcome(h, 0, ORCH_UDF_OK);
    assert_int_equal(a->rec[0].nchildren, 10);
    for (int c = 0; c < 10; c++) {
        snprintf(text, sizeof text, "%d", c);
        udf_h_check_out(&a->rec[0].children[c * 2 + 1], text, strlen(text));
    }
    udf_h_check_outcome(h, 1, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, 1, "udf pages gave no value for output 2 of 2 of child 0");
    udf_h_check_outcome(h, 2, ORCH_UDF_OK);
    assert_int_equal(a->rec[2].nchildren, 0);
    udf_h_check_outcome(h, 3, ORCH_UDF_DROP);
    udf_h_check_outcome(h, 4, ORCH_UDF_RECORD_FAILURE);
}

static void test_collector_filter(void **state)
{
    struct udf_h *h = *state;
    struct orch_udf_answers *a = &h->ans;
    struct orch_udf_batch *b = &h->batch;
    assert_int_equal(orch_udf_answers_init(a, "keep", ORCH_UDF_OP_FILTER, 1), 0);
    h->ans_inited = true;
    udf_h_add_text(h, "a");
    udf_h_add_text(h, "b");
    udf_h_add_text(h, "c");
    assert_int_equal(orch_udf_answers_reset(a, b), 0);
    assert_int_equal(orch_udf_keep(b, 0, true), 0);
    assert_int_equal(orch_udf_keep(b, 0, false), -EINVAL);
    assert_int_equal(orch_udf_emit(b, 1, 0, "x", 1), -EINVAL); /* a filter gives no value */
    assert_int_equal(orch_udf_keep(b, 1, false), 0);
    assert_int_equal(orch_udf_keep(b, 2, true), 0);
    assert_int_equal(orch_udf_fail_record(b, 2, "changed my mind"), 0);
    assert_int_equal(orch_udf_answers_finish(a), 0);
    udf_h_check_outcome(h, 0, ORCH_UDF_KEEP_TRUE);
    udf_h_check_outcome(h, 1, ORCH_UDF_KEEP_FALSE);
    udf_h_check_outcome(h, 2, ORCH_UDF_RECORD_FAILURE);

    struct orch_udf_answers bad;
    assert_int_equal(orch_udf_answers_init(&bad, "x", ORCH_UDF_OP_MAP, 0), -EINVAL);
    assert_int_equal(orch_udf_answers_init(&bad, "x", (enum orch_udf_op)42, 1), -EINVAL);
    orch_udf_answers_free(&bad); /* safe on a failed init */
}

/* ---- library() ----------------------------------------------------------------------- */

static void test_library(void **state)
{
    struct udf_h *h = *state;
    const struct orch_udf *u;
    void *dl;
    assert_int_equal(orch_udf_load_library(ORCH_UDF_SAMPLE_PATH, "orch_udf_sample", &u, &dl),
                     0);
    assert_non_null(u);
    assert_non_null(dl);
    assert_string_equal(u->name, "sample");
    assert_int_equal(
        udf_h_open(h, u, ORCH_UDF_SAMPLE_PATH, ORCH_UDF_OP_MAP, 1, 1, "suffix", "!", NULL), 0);
    size_t a = udf_h_add_text(h, "abc");
    size_t b = udf_h_add(h, NULL, 0);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, a, 0, "cba!");
    udf_h_check_outcome(h, b, ORCH_UDF_DROP);
    udf_h_close(h); /* fini runs before the object is closed */
    orch_udf_unload_library(dl);
    orch_udf_unload_library(NULL);
}

/* fail_child: a failed child takes its place in order, holds no values, refuses emits;
 * the next child() starts after it; a record failure still replaces everything. */
static void test_collector_fail_child(void **state)
{
    struct udf_h *h = *state;
    struct orch_udf_answers *a = &h->ans;
    struct orch_udf_batch *b = &h->batch;
    assert_int_equal(orch_udf_answers_init(a, "pages", ORCH_UDF_OP_EXPAND, 2), 0);
    h->ans_inited = true;
    for (int k = 0; k < 4; k++)
        udf_h_add_text(h, "in");
    assert_int_equal(orch_udf_answers_reset(a, b), 0);
    /* 0: ok, failed, ok, failed (the last one first: no values needed after it) */
    assert_int_equal(orch_udf_child(b, 0), 0);
    assert_int_equal(orch_udf_emit_str(b, 0, 0, "a"), 0);
    assert_int_equal(orch_udf_emit_str(b, 0, 1, "A"), 0);
    assert_int_equal(orch_udf_fail_child(b, 0, "page 2 is broken"), 0);
    assert_int_equal(orch_udf_emit_str(b, 0, 0, "x"), -EINVAL);
    assert_int_equal(orch_udf_child(b, 0), 0);
    assert_int_equal(orch_udf_emit_str(b, 0, 0, "c"), 0);
    assert_int_equal(orch_udf_emit_str(b, 0, 1, "C"), 0);
    assert_int_equal(orch_udf_fail_child(b, 0, NULL), 0);
    /* 1: only failed children; 2: a failure after a failed child replaces it all */
    assert_int_equal(orch_udf_fail_child(b, 1, "only"), 0);
    assert_int_equal(orch_udf_fail_child(b, 2, "first"), 0);
    assert_int_equal(orch_udf_fail_record(b, 2, "the whole PDF"), 0);
    assert_int_equal(orch_udf_fail_child(b, 2, "late"), -EINVAL);
    /* 3: zero children closes the record: no failed child after it */
    assert_int_equal(orch_udf_no_children(b, 3), 0);
    assert_int_equal(orch_udf_fail_child(b, 3, "x"), -EINVAL);
    assert_int_equal(orch_udf_answers_finish(a), 0);

    udf_h_check_outcome(h, 0, ORCH_UDF_OK);
    const struct orch_udf_answer *r = &a->rec[0];
    assert_int_equal(r->nchildren, 4);
    assert_non_null(r->child_msg);
    assert_null(r->child_msg[0]);
    assert_string_equal(r->child_msg[1], "page 2 is broken");
    assert_null(r->child_msg[2]);
    assert_string_equal(r->child_msg[3], "");
    udf_h_check_out(&r->children[0 * 2 + 1], "A", 1);
    assert_false(r->children[1 * 2 + 0].set);
    udf_h_check_out(&r->children[2 * 2 + 1], "C", 1);
    udf_h_check_outcome(h, 1, ORCH_UDF_OK);
    assert_int_equal(a->rec[1].nchildren, 1);
    assert_string_equal(a->rec[1].child_msg[0], "only");
    udf_h_check_outcome(h, 2, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, 2, "the whole PDF");
    assert_int_equal(a->rec[2].nchildren, 0);
    udf_h_check_outcome(h, 3, ORCH_UDF_OK);
    assert_int_equal(a->rec[3].nchildren, 0);

    /* not an expand: refused */
    orch_udf_answers_free(a);
    assert_int_equal(orch_udf_answers_init(a, "m", ORCH_UDF_OP_MAP, 1), 0);
    assert_int_equal(orch_udf_answers_reset(a, b), 0);
    assert_int_equal(orch_udf_fail_child(b, 0, "x"), -EINVAL);
}

static void test_library_errors(void **state)
{
    struct udf_h *h = *state;
    const struct orch_udf *u = (const void *)1;
    void *dl = (void *)1;
    assert_int_equal(orch_udf_load_library(ORCH_UDF_SAMPLE_PATH, "no_such_udf", &u, &dl),
                     ORCH_ENOTFOUND);
    assert_null(u);
    assert_null(dl);
    udf_h_check_contains(orch_error_detail(), "no symbol 'no_such_udf'");

    assert_int_equal(
        orch_udf_load_library(ORCH_UDF_SAMPLE_PATH, "orch_udf_sample_future", &u, &dl),
        -ENOEXEC);
    udf_h_check_contains(orch_error_detail(), "ABI version 99");
    assert_null(u);
    assert_int_equal(orch_udf_load_library(ORCH_UDF_SAMPLE_PATH, "orch_udf_sample_v0", &u, &dl),
                     -ENOEXEC);
    udf_h_check_contains(orch_error_detail(), "ABI version 0");
    /* an older version than the host's is accepted: the ops only grew at the end */
    assert_int_equal(orch_udf_load_library(ORCH_UDF_SAMPLE_PATH, "orch_udf_sample_v1", &u, &dl),
                     0);
    assert_int_equal(u->abi_version, 1);
    orch_udf_unload_library(dl);

    assert_int_equal(
        orch_udf_load_library(ORCH_UDF_SAMPLE_PATH, "orch_udf_sample_norun", &u, &dl),
        -ENOEXEC);
    udf_h_check_contains(orch_error_detail(), "no run");

    assert_int_equal(orch_udf_load_library("/nonexistent/udf.so", "x", &u, &dl),
                     ORCH_ENOTFOUND);
    udf_h_check_contains(orch_error_detail(), "/nonexistent/udf.so");
    udf_h_check_contains(orch_error_detail(), strerror(ENOENT));

    /* a file that is not a shared object */
    char path[600];
    make_tmpdir(h, "notso", path, sizeof path);
    assert_int_equal(orch_test_write_text(path, "not elf"), 0);
    assert_int_equal(orch_udf_load_library(path, "x", &u, &dl), ORCH_ENOTFOUND);
    udf_h_check_contains(orch_error_detail(), "cannot be loaded");

    assert_int_equal(orch_udf_load_library("", "x", &u, &dl), -EINVAL);
    assert_int_equal(orch_udf_load_library(ORCH_UDF_SAMPLE_PATH, NULL, &u, &dl), -EINVAL);
}

/* ---- exec() ------------------------------------------------------------------------ */

#define PY_DIR ORCH_SOURCE_ROOT "/udfs/python"

static void test_exec_python_example(void **state)
{
    struct udf_h *h = *state;
    const char *cmd = "PYTHONDONTWRITEBYTECODE=1 python3 '" PY_DIR "/upper_udf.py'";
    assert_int_equal(
        udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_MAP, 1, 1, "suffix", "!", NULL), 0);
    size_t a = udf_h_add_text(h, "hello");
    size_t empty = udf_h_add_text(h, "");
    size_t absent = udf_h_add(h, NULL, 0);
    size_t bad = udf_h_add_text(h, "a bad one");
    size_t poison = udf_h_add_text(h, "poison");
    static const char bin[] = {'x', '\0', 'y', '\xff'};
    size_t binary = udf_h_rec(h);
    udf_h_value(h, binary, 0, bin, sizeof bin);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, a, 0, "HELLO!");
    udf_h_check_outcome(h, empty, ORCH_UDF_DROP);
    udf_h_check_outcome(h, absent, ORCH_UDF_DROP);
    udf_h_check_outcome(h, bad, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, bad, "the input is bad");
    udf_h_check_outcome(h, poison, ORCH_UDF_GROUP_FAILURE);
    udf_h_check_msg(h, poison, "poisoned");
    udf_h_check_out(&h->ans.rec[binary].values[0], "X\0Y\xff!", 5);

    /* an exception in run: an attempt failure of the batch; the program goes on */
    udf_h_clear(h);
    udf_h_add_text(h, "fine");
    udf_h_add_text(h, "explode");
    assert_int_equal(udf_h_run(h), -EIO);
    udf_h_check_contains(orch_udf_answers_error(&h->ans), "exploded");

    /* the next batches work; an empty batch too */
    udf_h_clear(h);
    assert_int_equal(udf_h_run(h), 0);
    assert_int_equal(h->ans.n, 0);
    for (int k = 0; k < 3; k++) {
        udf_h_clear(h);
        a = udf_h_add_text(h, "again");
        assert_int_equal(udf_h_run(h), 0);
        udf_h_check_value(h, a, 0, "AGAIN!");
    }
    udf_h_close(h);
    check_no_children();
}

/* A Python module with several UDF classes, served with `orch_udf.py FILE:CLASS`. */
static const char py_classes[] =
    "import orch_udf\n"
    "class Split:\n"
    "    def __init__(self, args):\n"
    "        if 'boom' in args:\n"
    "            raise ValueError('boom requested')\n"
    "        self.sep = args.get('sep', ',').encode()\n"
    "    def run(self, batch):\n"
    "        out = []\n"
    "        for r in batch:\n"
    "            v = r.value\n"
    "            if v == b'wrong':\n"
    "                out.append(True)\n"
    "            elif v == b'drop':\n"
    "                out.append(orch_udf.Drop)\n"
    "            else:\n"
    "                out.append([orch_udf.RecordFailure('bad piece ' + p.decode())\n"
    "                            if p.startswith(b'bad') else (p, p.upper())\n"
    "                            for p in v.split(self.sep)] if v else [])\n"
    "        return out\n"
    "class Join:\n"
    "    def __init__(self, args):\n"
    "        assert orch_udf.config.op_name == 'reduce', orch_udf.config.op_name\n"
    "    def run(self, batch):\n"
    "        return ['+'.join(v.decode() for v in r.values) + '@%d/%d/%d' %\n"
    "                (r.grain_id, r.generation, r.attempt) for r in batch]\n"
    "class Pos:\n"
    "    def __init__(self, args):\n"
    "        print('printing goes to stderr, not into the protocol')\n"
    "    def run(self, batch):\n"
    "        return [bool(r.value) and r.value != b'no' for r in batch]\n"
    "class Short:\n"
    "    def __init__(self, args):\n"
    "        pass\n"
    "    def run(self, batch):\n"
    "        return [b'x', 42, None][:len(batch) - 1] if len(batch) == 4 else [b'x', 42, "
    "None]\n";

static void py_command(struct udf_h *h, const char *cls, char *cmd, size_t n)
{
    snprintf(cmd, n, "PYTHONDONTWRITEBYTECODE=1 python3 '%s/orch_udf.py' '%s/udfs.py:%s'",
             PY_DIR, h->tmpdir, cls);
}

static void test_exec_python_ops(void **state)
{
    struct udf_h *h = *state;
    char path[600], cmd[4096];
    make_tmpdir(h, "udfs.py", path, sizeof path);
    assert_int_equal(orch_test_write_text(path, py_classes), 0);

    /* expand with two outputs */
    py_command(h, "Split", cmd, sizeof cmd);
    assert_int_equal(
        udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_EXPAND, 1, 2, "sep", "|", NULL), 0);
    size_t a = udf_h_add_text(h, "a|b|");
    size_t empty = udf_h_add_text(h, "");
    size_t wrong = udf_h_add_text(h, "wrong");
    size_t drop = udf_h_add_text(h, "drop");
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_outcome(h, a, ORCH_UDF_OK);
    assert_int_equal(h->ans.rec[a].nchildren, 3);
    udf_h_check_out(&h->ans.rec[a].children[0], "a", 1);
    udf_h_check_out(&h->ans.rec[a].children[1], "A", 1);
    udf_h_check_out(&h->ans.rec[a].children[5], "", 0);
    check_children(h, empty, (const char *const[]){NULL});
    udf_h_check_outcome(h, wrong, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, wrong, "list of children");
    udf_h_check_outcome(h, drop, ORCH_UDF_DROP);
    udf_h_close(h);
    udf_h_clear(h);

    /* a child that failed: the 'E' answer, its siblings kept in order */
    assert_int_equal(
        udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_EXPAND, 1, 2, "sep", "|", NULL), 0);
    size_t mixed = udf_h_add_text(h, "x|bad1|y|bad2");
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_outcome(h, mixed, ORCH_UDF_OK);
    const struct orch_udf_answer *m = &h->ans.rec[mixed];
    assert_int_equal(m->nchildren, 4);
    assert_non_null(m->child_msg);
    assert_null(m->child_msg[0]);
    assert_string_equal(m->child_msg[1], "bad piece bad1");
    udf_h_check_out(&m->children[2 * 2 + 1], "Y", 1);
    assert_string_equal(m->child_msg[3], "bad piece bad2");
    udf_h_close(h);
    udf_h_clear(h);

    /* an exception in __init__ fails init with its message */
    assert_int_equal(
        udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_EXPAND, 1, 1, "boom", "1", NULL), -EIO);
    udf_h_check_contains(h->err, "boom requested");
    udf_h_close(h);
    check_no_children();

    /* reduce: values in order, and the idempotency key */
    py_command(h, "Join", cmd, sizeof cmd);
    assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_REDUCE, 1, 1, NULL), 0);
    a = udf_h_rec(h);
    udf_h_text(h, a, 0, "x");
    udf_h_text(h, a, 0, "y");
    size_t none = udf_h_rec(h);
    h->rec[none].generation = 4;
    h->rec[none].attempt = 2;
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, a, 0, "x+y@100/1/1");
    udf_h_check_value(h, none, 0, "@101/4/2");
    udf_h_close(h);
    udf_h_clear(h);

    /* filter (its __init__ prints: that must not break the protocol) */
    py_command(h, "Pos", cmd, sizeof cmd);
    assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_FILTER, 1, 1, NULL), 0);
    udf_h_add_text(h, "yes");
    udf_h_add_text(h, "no");
    udf_h_add(h, NULL, 0);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_outcome(h, 0, ORCH_UDF_KEEP_TRUE);
    udf_h_check_outcome(h, 1, ORCH_UDF_KEEP_FALSE);
    udf_h_check_outcome(h, 2, ORCH_UDF_KEEP_FALSE);
    udf_h_close(h);
    udf_h_clear(h);

    /* answers of bad types, and the wrong number of answers */
    py_command(h, "Short", cmd, sizeof cmd);
    assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
    for (int k = 0; k < 3; k++)
        udf_h_add_text(h, "v");
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_value(h, 0, 0, "x");
    udf_h_check_outcome(h, 1, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, 1, "bytes or str, not int");
    udf_h_check_outcome(h, 2, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, 2, "orch_udf.Drop");
    udf_h_add_text(h, "v");
    assert_int_equal(udf_h_run(h), -EIO);
    udf_h_check_contains(orch_udf_answers_error(&h->ans), "3 answers for 4 records");
    udf_h_close(h);
    check_no_children();
}

/* A program that speaks the protocol by hand, to misbehave in chosen ways (argv[1]). */
static const char py_raw[] =
    "import os, struct, sys\n"
    "mode = sys.argv[1]\n"
    "i, o = sys.stdin.buffer, sys.stdout.buffer\n"
    "def frame():\n"
    "    h = i.read(12)\n"
    "    if len(h) < 12: sys.exit(0)\n"
    "    return h[:4], i.read(struct.unpack('<Q', h[4:])[0])\n"
    "def send(tag, body):\n"
    "    o.write(tag + struct.pack('<Q', len(body)) + body); o.flush()\n"
    "frame()\n"
    "send(b'REDY', struct.pack('<I', 9 if mode == 'version' else 1))\n"
    "if mode == 'kill':\n"
    "    i.read(1)\n"
    "    os.kill(os.getpid(), 9)\n"
    "while True:\n"
    "    tag, body = frame()\n"
    "    n = struct.unpack('<I', body[:4])[0]\n"
    "    if mode == 'misfit':\n"
    "        send(b'ANSW', struct.pack('<I', n) + b'V' * 0 + b''.join(\n"
    "            b'V' + struct.pack('<Q', 1) + b'x' for _ in range(n)))\n"
    "    elif mode == 'count':\n"
    "        send(b'ANSW', struct.pack('<I', n + 1) + b'D' * (n + 1))\n"
    "    elif mode == 'kind':\n"
    "        send(b'ANSW', struct.pack('<I', n) + b'Z' * n)\n"
    "    elif mode == 'short':\n"
    "        send(b'ANSW', struct.pack('<I', n) + b'R' + struct.pack('<I', 100) + b'abc')\n"
    "    elif mode == 'chld':\n"
    "        v = lambda s: b'v' + struct.pack('<Q', len(s)) + s\n"
    "        send(b'CHLD', struct.pack('<II', 0, 2) + v(b'a') + b'f' + struct.pack('<I', 3)\n"
    "             + b'bad')\n"
    "        send(b'CHLD', struct.pack('<II', 0, 0))\n"
    "        send(b'CHLD', struct.pack('<II', 1, 1) + v(b'c'))\n"
    "        send(b'ANSW', struct.pack('<I', n) + b'C' + struct.pack('<IQ', 1, 1) + b'b'\n"
    "             + b'R' + struct.pack('<I', 4) + b'late' + b'C' + struct.pack('<I', 0))\n"
    "    elif mode == 'chld-order':\n"
    "        send(b'CHLD', struct.pack('<II', 1, 0))\n"
    "        send(b'CHLD', struct.pack('<II', 0, 0))\n"
    "    elif mode == 'chld-range':\n"
    "        send(b'CHLD', struct.pack('<II', n, 0))\n";

static void raw_command(struct udf_h *h, const char *mode, char *cmd, size_t n)
{
    snprintf(cmd, n, "PYTHONDONTWRITEBYTECODE=1 python3 '%s/raw.py' %s", h->tmpdir, mode);
}

static void test_exec_protocol_errors(void **state)
{
    struct udf_h *h = *state;
    char path[600], cmd[4096];
    make_tmpdir(h, "raw.py", path, sizeof path);
    assert_int_equal(orch_test_write_text(path, py_raw), 0);

    /* an answer that does not fit the op: a RecordFailure, not a broken program */
    raw_command(h, "misfit", cmd, sizeof cmd);
    assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_EXPAND, 1, 1, NULL), 0);
    udf_h_add_text(h, "a");
    udf_h_add_text(h, "b");
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_outcome(h, 1, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, 1, "does not fit a expand call");
    assert_int_equal(udf_h_run(h), 0); /* still talking */
    udf_h_close(h);

    static const struct {
        const char *mode;
        int rc;
        const char *msg;
    } cases[] = {
        {"count", -EPROTO, "3 answers to a batch of 2 records"},
        {"kind", -EPROTO, "unknown answer kind 0x5a"},
        {"short", -EPROTO, "truncated"},
        {"kill", -EPIPE, "killed by signal 9"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        raw_command(h, cases[k].mode, cmd, sizeof cmd);
        assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
        assert_int_equal(udf_h_run(h), cases[k].rc);
        udf_h_check_contains(orch_udf_answers_error(&h->ans), cases[k].msg);
        /* broken: every later run fails at once, saying why */
        assert_int_equal(udf_h_run(h), -EPIPE);
        udf_h_check_contains(orch_udf_answers_error(&h->ans), "must be restarted");
        check_no_children(); /* killed and reaped already */
        udf_h_close(h);
    }

    raw_command(h, "version", cmd, sizeof cmd);
    assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_MAP, 1, 1, NULL), -EPROTO);
    udf_h_check_contains(h->err, "version 9");
    udf_h_close(h);
    check_no_children();
}

/* CHLD frames: children streamed before the ANSW, which carries the rest of them or a
 * failure after them; a CHLD out of order, out of the batch or to a map breaks the program. */
static void test_exec_chld(void **state)
{
    struct udf_h *h = *state;
    char path[600], cmd[4096];
    make_tmpdir(h, "raw.py", path, sizeof path);
    assert_int_equal(orch_test_write_text(path, py_raw), 0);

    raw_command(h, "chld", cmd, sizeof cmd);
    assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_EXPAND, 1, 1, NULL), 0);
    size_t a = udf_h_add_text(h, "a"), late = udf_h_add_text(h, "b");
    size_t none = udf_h_add_text(h, "c");
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_outcome(h, a, ORCH_UDF_OK);
    const struct orch_udf_answer *r = &h->ans.rec[a];
    assert_int_equal(r->nchildren, 3);
    udf_h_check_out(&r->children[0], "a", 1);
    assert_non_null(r->child_msg);
    assert_null(r->child_msg[0]);
    assert_string_equal(r->child_msg[1], "bad");
    udf_h_check_out(&r->children[2], "b", 1);
    udf_h_check_outcome(h, late, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, late, "late");
    check_children(h, none, (const char *const[]){NULL});
    udf_h_close(h);
    udf_h_clear(h);

    static const struct {
        const char *mode;
        enum orch_udf_op op;
        const char *msg;
    } cases[] = {
        {"chld-order", ORCH_UDF_OP_EXPAND, "CHLD for record 0 after record 1"},
        {"chld-range", ORCH_UDF_OP_EXPAND, "CHLD for record 2 of a batch of 2 records"},
        {"chld-range", ORCH_UDF_OP_MAP, "children streamed (CHLD) to a map call"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        raw_command(h, cases[k].mode, cmd, sizeof cmd);
        assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, cases[k].op, 1, 1, NULL), 0);
        udf_h_add_text(h, "a");
        udf_h_add_text(h, "b");
        assert_int_equal(udf_h_run(h), -EPROTO);
        udf_h_check_contains(orch_udf_answers_error(&h->ans), cases[k].msg);
        assert_int_equal(udf_h_run(h), -EPIPE);
        check_no_children();
        udf_h_close(h);
        udf_h_clear(h);
    }
}

/* The REDY frame, for shell programs: "REDY", u64 4, u32 1. */
#define SH_READY "printf 'REDY\\004\\000\\000\\000\\000\\000\\000\\000\\001\\000\\000\\000'"

static void test_exec_dies(void **state)
{
    struct udf_h *h = *state;
    /* answers the hello, then exits while the batch is sent */
    const char *cmd = SH_READY "; exit 3";
    assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
    udf_h_add_text(h, "a");
    assert_int_equal(udf_h_run(h), -EPIPE);
    udf_h_check_contains(orch_udf_answers_error(&h->ans), "exited with status 3");
    udf_h_check_contains(orch_udf_answers_error(&h->ans), "in the middle of a batch");
    check_no_children();
    assert_int_equal(udf_h_run(h), -EPIPE);
    udf_h_close(h);
    check_no_children();

    /* garbage instead of an answer */
    cmd = SH_READY "; head -c 1 >/dev/null; printf 'garbage garbage!'; exec cat >/dev/null";
    assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
    assert_int_equal(udf_h_run(h), -EPROTO);
    udf_h_check_contains(orch_udf_answers_error(&h->ans), "got \"garb\"");
    check_no_children();
    udf_h_close(h);

    /* a large batch to a program that is gone: SIGPIPE must not kill us */
    cmd = SH_READY "; exec 0<&-; sleep 0.05; exit 0";
    assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
    size_t big = 4 << 20;
    char *blob = malloc(big);
    assert_non_null(blob);
    memset(blob, 'z', big);
    udf_h_clear(h);
    size_t i = udf_h_rec(h);
    udf_h_value(h, i, 0, blob, big);
    assert_int_equal(udf_h_run(h), -EPIPE);
    free(blob);
    udf_h_close(h);
    check_no_children();
}

static void test_exec_init_failures(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(udf_h_open(h, &orch_udf_exec, "exit 5", ORCH_UDF_OP_MAP, 1, 1, NULL),
                     -EPIPE);
    udf_h_check_contains(h->err, "exited with status 5");
    udf_h_check_contains(h->err, "before it answered the hello");
    udf_h_close(h);
    assert_int_equal(
        udf_h_open(h, &orch_udf_exec, "/nonexistent/program", ORCH_UDF_OP_MAP, 1, 1, NULL),
        -EPIPE);
    udf_h_check_contains(h->err, "status 127");
    udf_h_close(h);
    assert_int_equal(
        udf_h_open(h, &orch_udf_exec, "echo hello there", ORCH_UDF_OP_MAP, 1, 1, NULL),
        -EPROTO);
    udf_h_check_contains(h->err, "\"hell\"");
    udf_h_close(h);
    assert_int_equal(udf_h_open(h, &orch_udf_exec, "", ORCH_UDF_OP_MAP, 1, 1, NULL), -EINVAL);
    udf_h_close(h);
    check_no_children();
}

/* The stdin of a program that never reads it, and a fini that must not wait forever. */
static void test_exec_fini_kills_stubborn(void **state)
{
    struct udf_h *h = *state;
    /* ignores end-of-file and SIGTERM: fini must still reap it (after its grace period) */
    const char *cmd = SH_READY "; exec 0<&-; trap '' TERM; while :; do sleep 0.1; done";
    assert_int_equal(udf_h_open(h, &orch_udf_exec, cmd, ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
    udf_h_close(h);
    check_no_children();
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_modules),
        T(test_registry),
        T(test_init_checks),
        T(test_signatures),
        T(test_split),
        T(test_split_multibyte),
        T(test_split_args),
        T(test_upper),
        T(test_identity),
        T(test_nonempty),
        T(test_concat),
        T(test_count),
        T(test_sleep),
        T(test_fail_if_typed),
        T(test_fail_if_crash),
        T(test_fail_if_hang),
        T(test_flaky),
        T(test_read_file),
        T(test_collector_map),
        T(test_collector_expand),
        T(test_collector_fail_child),
        T(test_collector_filter),
        T(test_library),
        T(test_library_errors),
        T(test_exec_python_example),
        T(test_exec_python_ops),
        T(test_exec_protocol_errors),
        T(test_exec_chld),
        T(test_exec_dies),
        T(test_exec_init_failures),
        T(test_exec_fini_kills_stubborn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
