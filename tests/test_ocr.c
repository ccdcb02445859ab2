/* test_ocr.c — the tesseract_ocr built-in through the real ABI, the real answer collector
 * and the real Tesseract with Debian's eng model: text of generated pages in both payload
 * formats, every kind of unreadable image as a RecordFailure of its record alone, init
 * failures (no model, bad arguments), and Tesseract's OpenMP threads kept off. */
#define _GNU_SOURCE /* setenv, nftw in testutil.h */
#include "orch_udf_host.h"
#include "ocr_fixture.h"
#include "testutil.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- a harness: one tesseract_ocr instance (map, 1 in, 1 out), one batch ------------ */

#define MAXREC 8
#define MAXARGS 4

struct h {
    const struct orch_udf *udf;
    void *state;
    bool inited;
    const char *keys[MAXARGS], *vals[MAXARGS];
    char err[1024];
    struct orch_udf_answers ans;
    bool ans_inited;
    struct orch_udf_batch batch;
    struct orch_udf_record rec[MAXREC];
    struct orch_udf_input in[MAXREC];
    struct orch_udf_value val[MAXREC];
    char *owned[MAXREC]; /* images the harness made, freed at close */
    char tmpdir[512];
};

static void h_close(struct h *h)
{
    if (h->inited)
        h->udf->fini(h->state);
    h->inited = false;
    if (h->ans_inited)
        orch_udf_answers_free(&h->ans);
    h->ans_inited = false;
    for (size_t i = 0; i < MAXREC; i++) {
        free(h->owned[i]);
        h->owned[i] = NULL;
    }
    h->batch.n = 0;
}

static int setup(void **state)
{
    struct h *h = calloc(1, sizeof *h);
    if (h == NULL)
        return -1;
    h->udf = orch_udf_builtin("tesseract_ocr");
    if (h->udf == NULL)
        return -1;
    /* The threading rule is tested as the default, whatever the environment says. */
    unsetenv("OMP_THREAD_LIMIT");
    *state = h;
    return 0;
}

static int teardown(void **state)
{
    struct h *h = *state;
    h_close(h);
    if (h->tmpdir[0] && orch_test_rmtree(h->tmpdir) != 0)
        return -1;
    free(h);
    return 0;
}

/* Inits tesseract_ocr as `op` with key/value argument pairs ending in NULL. Returns init's
 * rc; the collector is ready either way. */
static int h_open_op(struct h *h, enum orch_udf_op op, ...)
{
    va_list ap;
    va_start(ap, op);
    size_t n = 0;
    const char *k;
    while ((k = va_arg(ap, const char *)) != NULL) {
        assert_true(n < MAXARGS);
        h->keys[n] = k;
        h->vals[n] = va_arg(ap, const char *);
        n++;
    }
    va_end(ap);
    struct orch_udf_config cfg = {
        .call = "ocr",
        .function = "tesseract_ocr",
        .op = op,
        .nin = 1,
        .nout = 1,
        .nargs = n,
        .arg_keys = h->keys,
        .arg_values = h->vals,
        .worker = 0,
        .error = h->err,
        .error_size = sizeof h->err,
    };
    h->err[0] = '\0';
    int rc = h->udf->init(&cfg, &h->state);
    h->inited = rc == 0;
    if (rc != 0)
        assert_true(h->err[0] != '\0'); /* every init failure explains itself */
    assert_int_equal(orch_udf_answers_init(&h->ans, "ocr", op, 1), 0);
    h->ans_inited = true;
    return rc;
}

#define h_open(h, ...) h_open_op(h, ORCH_UDF_OP_MAP, __VA_ARGS__)

/* Adds a record whose one input value is len bytes at data (present) or absent; data is
 * owned by the caller. Returns its index. */
static size_t h_rec(struct h *h, const void *data, size_t len, int present)
{
    size_t i = h->batch.n++;
    assert_true(i < MAXREC);
    h->val[i] = (struct orch_udf_value){data, len, present};
    h->in[i] = (struct orch_udf_input){.n = 1, .v = &h->val[i]};
    h->rec[i] = (struct orch_udf_record){
        .grain_id = 100 + i, .generation = 0, .attempt = 1, .in = &h->in[i]};
    h->batch.rec = h->rec;
    return i;
}

/* Adds a record holding a generated page of these lines; returns its index. */
static size_t h_page(struct h *h, enum orch_test_ocr_format f, const char *const *lines,
                     size_t n)
{
    char *img;
    size_t len;
    assert_int_equal(orch_test_ocr_page(lines, n, f, &img, &len), 0);
    size_t i = h_rec(h, img, len, 1);
    h->owned[i] = img;
    return i;
}

static int h_run(struct h *h)
{
    assert_true(h->inited);
    assert_int_equal(orch_udf_answers_reset(&h->ans, &h->batch), 0);
    int rc = h->udf->run(h->state, &h->batch);
    if (rc == 0)
        assert_int_equal(orch_udf_answers_finish(&h->ans), 0);
    return rc;
}

static void check_outcome(struct h *h, size_t i, enum orch_udf_outcome want)
{
    assert_true(i < h->ans.n);
    if (h->ans.rec[i].outcome != want)
        fail_msg("record %zu: outcome %s, expected %s (%s)", i,
                 orch_udf_outcome_name(h->ans.rec[i].outcome), orch_udf_outcome_name(want),
                 h->ans.rec[i].msg ? h->ans.rec[i].msg : "");
}

/* Record i is OK and its text holds every line of `lines`, in that order. */
static void check_text(struct h *h, size_t i, const char *const *lines, size_t n)
{
    check_outcome(h, i, ORCH_UDF_OK);
    const struct orch_udf_out *o = &h->ans.rec[i].values[0];
    assert_true(o->set);
    char *text = strndup(o->data, o->len);
    assert_non_null(text);
    const char *at = text;
    for (size_t k = 0; k < n; k++) {
        const char *found = strstr(at, lines[k]);
        if (found == NULL)
            fail_msg("record %zu: OCR text \"%s\" lacks \"%s\" (after what came before)", i,
                     text, lines[k]);
        at = found + strlen(lines[k]);
    }
    free(text);
}

static void check_msg(struct h *h, size_t i, const char *needle)
{
    check_outcome(h, i, ORCH_UDF_RECORD_FAILURE);
    const char *msg = h->ans.rec[i].msg;
    if (strstr(msg, needle) == NULL)
        fail_msg("record %zu: message \"%s\" lacks \"%s\"", i, msg, needle);
}

static void check_contains(const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL)
        fail_msg("\"%s\" lacks \"%s\"", text, needle);
}

/* The number of threads of this process (/proc/self/status). */
static int thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    assert_true(n > 0);
    return n;
}

static const char *const page1[] = {"Alpha bravo charlie", "delta echo foxtrot"};
static const char *const page2[] = {"Persistent workers load", "the model once", "1234567890"};

/* ---- text of known pages ------------------------------------------------------------- */

/* Both payload formats (the PNG says 300 dpi, the PGM nothing), several pages in one
 * batch and a second batch on the same state (the model stays loaded across pages). */
static void test_known_text(void **state)
{
    struct h *h = *state;
    assert_int_equal(h_open(h, NULL), 0);
    size_t a = h_page(h, ORCH_TEST_OCR_PNG, page1, 2);
    size_t b = h_page(h, ORCH_TEST_OCR_PGM, page2, 3);
    size_t c = h_page(h, ORCH_TEST_OCR_PGM, page1, 2);
    assert_int_equal(h_run(h), 0);
    check_text(h, a, page1, 2);
    check_text(h, b, page2, 3);
    check_text(h, c, page1, 2);

    h->batch.n = 0;
    for (size_t i = 0; i < MAXREC; i++) {
        free(h->owned[i]);
        h->owned[i] = NULL;
    }
    a = h_page(h, ORCH_TEST_OCR_PNG, page2, 3);
    assert_int_equal(h_run(h), 0);
    check_text(h, a, page2, 3);
}

/* psm and lang are taken: psm=7 reads the image as one line of text. */
static void test_args(void **state)
{
    struct h *h = *state;
    static const char *const line[] = {"Single line of text"};
    assert_int_equal(h_open(h, "lang", "eng", "psm", "7", NULL), 0);
    size_t a = h_page(h, ORCH_TEST_OCR_PNG, line, 1);
    assert_int_equal(h_run(h), 0);
    check_text(h, a, line, 1);
}

/* With workers=N on N cores, each worker must keep to one thread: Tesseract's OpenMP
 * regions (num_threads(4) in Debian's build) would otherwise start threads of their own. */
static void test_one_thread(void **state)
{
    struct h *h = *state;
    int before = thread_count();
    assert_int_equal(h_open(h, NULL), 0);
    size_t a = h_page(h, ORCH_TEST_OCR_PNG, page2, 3);
    assert_int_equal(h_run(h), 0);
    check_text(h, a, page2, 3);
    assert_int_equal(thread_count(), before);
}

/* ---- bad images: each a RecordFailure of its record alone ------------------------------ */

static void test_bad_images(void **state)
{
    struct h *h = *state;
    assert_int_equal(h_open(h, NULL), 0);
    char *png, *pgm;
    size_t pnglen, pgmlen;
    assert_int_equal(orch_test_ocr_page(page1, 2, ORCH_TEST_OCR_PNG, &png, &pnglen), 0);
    assert_int_equal(orch_test_ocr_page(page1, 2, ORCH_TEST_OCR_PGM, &pgm, &pgmlen), 0);
    char *garbled = malloc(pnglen);
    assert_non_null(garbled);
    memcpy(garbled, png, pnglen);
    for (size_t k = pnglen / 2; k < pnglen / 2 + 16; k++) /* inside the compressed pixels */
        garbled[k] ^= 0x5a;
    static const char text[] = "this is a line of text, not an image";
    static const char huge[] = "P5\n40000 100\n255\n";
    static const char many[] = "P5\n20000 20000\n255\n"; /* 400 Mpixels */

    size_t empty = h_rec(h, "", 0, 1);
    size_t notimg = h_rec(h, text, sizeof text - 1, 1);
    size_t good = h_rec(h, png, pnglen, 1);
    size_t trunc_png = h_rec(h, png, pnglen / 2, 1);
    size_t bad_png = h_rec(h, garbled, pnglen, 1);
    size_t trunc_pgm = h_rec(h, pgm, pgmlen / 2, 1);
    size_t wide = h_rec(h, huge, sizeof huge - 1, 1);
    size_t big = h_rec(h, many, sizeof many - 1, 1);
    assert_int_equal(h_run(h), 0);

    check_msg(h, empty, "tesseract_ocr: the image is empty (0 bytes)");
    check_msg(h, notimg, "not an image leptonica can read (36 bytes)");
    check_msg(h, notimg, "unknown format");
    check_text(h, good, page1, 2);
    check_msg(h, trunc_png, "tesseract_ocr: cannot read the ");
    check_msg(h, trunc_png, " png image: Error in pixReadMemPng");
    check_msg(h, bad_png, "Error in pixReadMemPng");
    check_msg(h, trunc_pgm, "Error in pixReadStreamPnm");
    check_msg(h, wide, "the image is 40000x100 pixels; at most 32767x32767");
    check_msg(h, big, "the image is 20000x20000 pixels");
    free(garbled);
    free(pgm);
    free(png);
}

/* An optional input that was Dropped: the record is dropped, as every built-in does. */
static void test_absent(void **state)
{
    struct h *h = *state;
    assert_int_equal(h_open(h, NULL), 0);
    size_t a = h_rec(h, NULL, 0, 0);
    assert_int_equal(h_run(h), 0);
    check_outcome(h, a, ORCH_UDF_DROP);
}

/* ---- init failures ------------------------------------------------------------------- */

static void test_init_errors(void **state)
{
    struct h *h = *state;
    /* no model for the language: the message names the file and what to do */
    assert_int_equal(h_open(h, "lang", "xxx", NULL), -ENOENT);
    check_contains(h->err, "tesseract_ocr: no model for language 'xxx'");
    check_contains(h->err, "/xxx.traineddata: No such file or directory");
    check_contains(h->err, "tesseract-ocr-xxx");
    check_contains(h->err, "TESSDATA_PREFIX");
    h_close(h);
    /* the missing one of several */
    assert_int_equal(h_open(h, "lang", "eng+qqq", NULL), -ENOENT);
    check_contains(h->err, "no model for language 'qqq'");
    h_close(h);
    /* arguments the compiler also checks (a library user has no compiler in between) */
    assert_int_equal(h_open(h, "psm", "14", NULL), -EINVAL);
    check_contains(h->err, "psm must be from 0 to 13, not 14");
    h_close(h);
    assert_int_equal(h_open(h, "psm", "auto", NULL), -EINVAL);
    check_contains(h->err, "psm must be a non-negative integer");
    h_close(h);
    assert_int_equal(h_open(h, "lang", "", NULL), -EINVAL);
    check_contains(h->err, "lang must not be empty");
    h_close(h);
    assert_int_equal(h_open(h, "dpi", "300", NULL), -EINVAL);
    check_contains(h->err, "tesseract_ocr has no argument 'dpi'");
    h_close(h);
    assert_int_equal(h_open_op(h, ORCH_UDF_OP_FILTER, NULL), -EINVAL);
    check_contains(h->err, "tesseract_ocr cannot be used as filter");
}

/* TESSDATA_PREFIX is where the models are looked for: a directory without them fails init
 * and the message says which directory was searched and what the variable held. */
static void test_tessdata_prefix(void **state)
{
    struct h *h = *state;
    assert_int_equal(orch_test_mkdtemp(h->tmpdir, sizeof h->tmpdir, "ocr"), 0);
    assert_int_equal(setenv("TESSDATA_PREFIX", h->tmpdir, 1), 0);
    int rc = h_open(h, NULL);
    unsetenv("TESSDATA_PREFIX");
    assert_int_equal(rc, -ENOENT);
    check_contains(h->err, "no model for language 'eng'");
    char want[600];
    snprintf(want, sizeof want, "%s/eng.traineddata", h->tmpdir);
    check_contains(h->err, want);
    snprintf(want, sizeof want, "TESSDATA_PREFIX=%s", h->tmpdir);
    check_contains(h->err, want);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_one_thread), /* first: no other test has started a thread before it */
        T(test_known_text), T(test_args),        T(test_bad_images),
        T(test_absent),     T(test_init_errors), T(test_tessdata_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
