/* test_ocr.c — the tesseract_ocr built-in through the real ABI, the real answer collector
 * and the real Tesseract with Debian's eng model: text of generated pages in both payload
 * formats, every kind of unreadable image as a RecordFailure of its record alone, init
 * failures (no model, bad arguments), and Tesseract's OpenMP threads kept off. */
#define _GNU_SOURCE /* setenv, nftw in testutil.h */
#include "orch_udf_host.h"
#include "ocr_fixture.h"
#include "testutil.h"
#include "udf_harness.h"

#include <errno.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- the harness (udf_harness.h): tesseract_ocr as a call "ocr", 1 in, 1 out --------- */

static int setup(void **state)
{
    /* The threading rule is tested as the default, whatever the environment says. */
    unsetenv("OMP_THREAD_LIMIT");
    *state = udf_h_new("ocr");
    return *state != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    return udf_h_free(*state);
}

/* Inits tesseract_ocr as `op` with key/value argument pairs ending in NULL. */
#define h_open_op(h, op, ...) udf_h_builtin(h, "tesseract_ocr", op, 1, 1, __VA_ARGS__)
#define h_open(h, ...) h_open_op(h, ORCH_UDF_OP_MAP, __VA_ARGS__)

/* Adds a record holding a generated page of these lines; returns its index. */
static size_t h_page(struct udf_h *h, enum orch_test_ocr_format f, const char *const *lines,
                     size_t n)
{
    char *img;
    size_t len;
    assert_int_equal(orch_test_ocr_page(lines, n, f, &img, &len), 0);
    size_t i = udf_h_add(h, img, len);
    udf_h_own(h, i, img);
    return i;
}

/* Record i is OK and its text holds every line of `lines`, in that order. */
static void check_text(struct udf_h *h, size_t i, const char *const *lines, size_t n)
{
    udf_h_check_outcome(h, i, ORCH_UDF_OK);
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
    struct udf_h *h = *state;
    assert_int_equal(h_open(h, NULL), 0);
    size_t a = h_page(h, ORCH_TEST_OCR_PNG, page1, 2);
    size_t b = h_page(h, ORCH_TEST_OCR_PGM, page2, 3);
    size_t c = h_page(h, ORCH_TEST_OCR_PGM, page1, 2);
    assert_int_equal(udf_h_run(h), 0);
    check_text(h, a, page1, 2);
    check_text(h, b, page2, 3);
    check_text(h, c, page1, 2);

    udf_h_clear(h);
    a = h_page(h, ORCH_TEST_OCR_PNG, page2, 3);
    assert_int_equal(udf_h_run(h), 0);
    check_text(h, a, page2, 3);
}

/* psm and lang are taken: psm=7 reads the image as one line of text. */
static void test_args(void **state)
{
    struct udf_h *h = *state;
    static const char *const line[] = {"Single line of text"};
    assert_int_equal(h_open(h, "lang", "eng", "psm", "7", NULL), 0);
    size_t a = h_page(h, ORCH_TEST_OCR_PNG, line, 1);
    assert_int_equal(udf_h_run(h), 0);
    check_text(h, a, line, 1);
}

/* With workers=N on N cores, each worker must keep to one thread: Tesseract's OpenMP
 * regions (num_threads(4) in Debian's build) would otherwise start threads of their own. */
static void test_one_thread(void **state)
{
    struct udf_h *h = *state;
    int before = thread_count();
    assert_int_equal(h_open(h, NULL), 0);
    size_t a = h_page(h, ORCH_TEST_OCR_PNG, page2, 3);
    assert_int_equal(udf_h_run(h), 0);
    check_text(h, a, page2, 3);
    assert_int_equal(thread_count(), before);
}

/* ---- bad images: each a RecordFailure of its record alone ------------------------------ */

static void test_bad_images(void **state)
{
    struct udf_h *h = *state;
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

    size_t empty = udf_h_add(h, "", 0);
    size_t notimg = udf_h_add(h, text, sizeof text - 1);
    size_t good = udf_h_add(h, png, pnglen);
    size_t trunc_png = udf_h_add(h, png, pnglen / 2);
    size_t bad_png = udf_h_add(h, garbled, pnglen);
    size_t trunc_pgm = udf_h_add(h, pgm, pgmlen / 2);
    size_t wide = udf_h_add(h, huge, sizeof huge - 1);
    size_t big = udf_h_add(h, many, sizeof many - 1);
    assert_int_equal(udf_h_run(h), 0);

    udf_h_check_failure(h, empty, "tesseract_ocr: the image is empty (0 bytes)");
    udf_h_check_failure(h, notimg, "not an image leptonica can read (36 bytes)");
    udf_h_check_failure(h, notimg, "unknown format");
    check_text(h, good, page1, 2);
    udf_h_check_failure(h, trunc_png, "tesseract_ocr: cannot read the ");
    udf_h_check_failure(h, trunc_png, " png image: Error in pixReadMemPng");
    udf_h_check_failure(h, bad_png, "Error in pixReadMemPng");
    udf_h_check_failure(h, trunc_pgm, "Error in pixReadStreamPnm");
    udf_h_check_failure(h, wide, "the image is 40000x100 pixels; at most 32767x32767");
    udf_h_check_failure(h, big, "the image is 20000x20000 pixels");
    free(garbled);
    free(pgm);
    free(png);
}

/* An optional input that was Dropped: the record is dropped, as every built-in does. */
static void test_absent(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(h_open(h, NULL), 0);
    size_t a = udf_h_add(h, NULL, 0);
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_outcome(h, a, ORCH_UDF_DROP);
}

/* ---- init failures ------------------------------------------------------------------- */

static void test_init_errors(void **state)
{
    struct udf_h *h = *state;
    /* no model for the language: the message names the file and what to do */
    assert_int_equal(h_open(h, "lang", "xxx", NULL), -ENOENT);
    udf_h_check_contains(h->err, "tesseract_ocr: no model for language 'xxx'");
    udf_h_check_contains(h->err, "/xxx.traineddata: No such file or directory");
    udf_h_check_contains(h->err, "tesseract-ocr-xxx");
    udf_h_check_contains(h->err, "TESSDATA_PREFIX");
    udf_h_close(h);
    /* the missing one of several */
    assert_int_equal(h_open(h, "lang", "eng+qqq", NULL), -ENOENT);
    udf_h_check_contains(h->err, "no model for language 'qqq'");
    udf_h_close(h);
    /* arguments the compiler also checks (a library user has no compiler in between) */
    assert_int_equal(h_open(h, "psm", "14", NULL), -EINVAL);
    udf_h_check_contains(h->err, "psm must be from 0 to 13, not 14");
    udf_h_close(h);
    assert_int_equal(h_open(h, "psm", "auto", NULL), -EINVAL);
    udf_h_check_contains(h->err, "psm must be a non-negative integer");
    udf_h_close(h);
    assert_int_equal(h_open(h, "lang", "", NULL), -EINVAL);
    udf_h_check_contains(h->err, "lang must not be empty");
    udf_h_close(h);
    assert_int_equal(h_open(h, "dpi", "300", NULL), -EINVAL);
    udf_h_check_contains(h->err, "tesseract_ocr has no argument 'dpi'");
    udf_h_close(h);
    assert_int_equal(h_open_op(h, ORCH_UDF_OP_FILTER, NULL), -EINVAL);
    udf_h_check_contains(h->err, "tesseract_ocr cannot be used as filter");
}

/* TESSDATA_PREFIX is where the models are looked for: a directory without them fails init
 * and the message says which directory was searched and what the variable held. */
static void test_tessdata_prefix(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(setenv("TESSDATA_PREFIX", udf_h_tmpdir(h, "ocr"), 1), 0);
    int rc = h_open(h, NULL);
    unsetenv("TESSDATA_PREFIX");
    assert_int_equal(rc, -ENOENT);
    udf_h_check_contains(h->err, "no model for language 'eng'");
    char want[600];
    snprintf(want, sizeof want, "%s/eng.traineddata", h->tmpdir);
    udf_h_check_contains(h->err, want);
    snprintf(want, sizeof want, "TESSDATA_PREFIX=%s", h->tmpdir);
    udf_h_check_contains(h->err, want);
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
