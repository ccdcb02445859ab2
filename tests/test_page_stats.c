/* test_page_stats.c — the page_stats built-in (udfs/builtins_gpu.c, udfs/page_stats.c):
 * its CPU path against values computed by hand, every kind of bad input, its arguments,
 * and its GPU path: refused with a clear message where it cannot run, and equal to the
 * CPU path, byte for byte, where it can (a machine with a GPU and the CUDA module). */
#define _GNU_SOURCE
#include "orch_udf_host.h"
#include "page_stats.h"
#include "page_stats_config.h"
#include "udf_harness.h"

#include <errno.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef ORCH_HAVE_LEPT
#include <leptonica/allheaders.h>
#endif

/* ---- the harness (udf_harness.h): page_stats as a call "ps", 1 in, 1 out ------------ */

static int setup(void **state)
{
    /* The CPU path unless a test says otherwise: never the environment's GPU. */
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    orch_page_stats_gpu_set_module(NULL);
    *state = udf_h_new("ps");
    return *state != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    return udf_h_free(*state);
}

/* Inits page_stats as `op` with key/value pairs ending in NULL; returns init's rc. */
#define h_open_op(h, op, ...) udf_h_builtin(h, "page_stats", op, 1, 1, __VA_ARGS__)
#define h_open(h, ...) h_open_op(h, ORCH_UDF_OP_MAP, __VA_ARGS__)

static void check_json(struct udf_h *h, size_t i, const char *want)
{
    const struct orch_udf_answer *a = &h->ans.rec[i];
    if (a->outcome != ORCH_UDF_OK)
        fail_msg("record %zu: %s (%s), expected %s", i, orch_udf_outcome_name(a->outcome),
                 a->msg ? a->msg : "", want);
    const struct orch_udf_out *o = &a->values[0];
    if (o->len != strlen(want) || memcmp(o->data, want, o->len) != 0)
        fail_msg("record %zu:\n  got  %.*s\n  want %s", i, (int)o->len, (const char *)o->data,
                 want);
}

/* ---- fixtures whose statistics were worked out by hand ---------------------------------
 *
 * A: 4 x 3, maxval 255:   255 255 255 255
 *                         255   0  10 255
 *                         255 255 255 200
 *   N = 12, S = 9*255 + 0 + 10 + 200 = 2505, mean = 208.75
 *   Q = 9*65025 + 0 + 100 + 40000 = 625325; N*Q - S^2 = 7503900 - 6275025 = 1228875;
 *   std = sqrt(1228875) / 12 = 92.37886... -> 92.3789
 *   threshold 128: ink pixels (1,1) and (2,1): 2/12 = 0.166667, bbox [1,1,2,1]
 *   interior pixels (1,1) and (2,1): L = 0*4 - 255 - 10 - 255 - 255 = -775 and
 *   L = 10*4 - 0 - 255 - 255 - 255 = -725: mean -750, variance 25^2 = 625
 *   16 bins (v / 16): 0 and 10 in bin 0, 200 in bin 12, the nine 255 in bin 15
 *   threshold 0: no ink; 4 bins (v / 64): 0, 10 in bin 0; 200 and 255 in bin 3.
 * B: 1 x 1, maxval 15, value 7 (with comments in the header): scaled (7*255 + 7) / 15 = 119;
 *   std 0; ink 1 (119 < 128) at [0,0,0,0]; sharpness 0 (no interior); bin 119/16 = 7. */
static const char pgm_a[] = "P5\n4 3\n255\n"
                            "\xff\xff\xff\xff"
                            "\xff\x00\x0a\xff"
                            "\xff\xff\xff\xc8";
static const char want_a[] =
    "{\"width\":4,\"height\":3,\"mean\":208.7500,\"std\":92.3789,\"ink\":0.166667,"
    "\"ink_bbox\":[1,1,2,1],\"sharpness\":625.0000,"
    "\"hist\":[2,0,0,0,0,0,0,0,0,0,0,0,1,0,0,9]}";
static const char want_a_t0_b4[] =
    "{\"width\":4,\"height\":3,\"mean\":208.7500,\"std\":92.3789,\"ink\":0.000000,"
    "\"ink_bbox\":null,\"sharpness\":625.0000,\"hist\":[2,0,0,10]}";
static const char pgm_b[] = "P5 # a comment\n1 # another\n1\n15\n\x07";
static const char want_b[] =
    "{\"width\":1,\"height\":1,\"mean\":119.0000,\"std\":0.0000,\"ink\":1.000000,"
    "\"ink_bbox\":[0,0,0,0],\"sharpness\":0.0000,"
    "\"hist\":[0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0]}";

#define LIT(s) s, sizeof(s) - 1

static void test_fixed_values(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(h_open(h, NULL), 0);
    udf_h_add(h, LIT(pgm_a));
    udf_h_add(h, LIT(pgm_b));
    udf_h_add(h, NULL, 0); /* absent: dropped */
    assert_int_equal(udf_h_run(h), 0);
    check_json(h, 0, want_a);
    check_json(h, 1, want_b);
    assert_int_equal(h->ans.rec[2].outcome, ORCH_UDF_DROP);
    udf_h_close(h);
    udf_h_clear(h);

    assert_int_equal(h_open(h, "threshold", "0", "bins", "4", NULL), 0);
    udf_h_add(h, LIT(pgm_a));
    assert_int_equal(udf_h_run(h), 0);
    check_json(h, 0, want_a_t0_b4);
    udf_h_close(h);
    udf_h_clear(h);

    /* threshold 256: every pixel is ink; 256 bins: one per value */
    assert_int_equal(h_open(h, "threshold", "256", "bins", "256", NULL), 0);
    udf_h_add(h, LIT(pgm_a));
    assert_int_equal(udf_h_run(h), 0);
    char want[2048];
    int at = snprintf(want, sizeof want,
                      "{\"width\":4,\"height\":3,\"mean\":208.7500,\"std\":92.3789,"
                      "\"ink\":1.000000,\"ink_bbox\":[0,0,3,2],\"sharpness\":625.0000,"
                      "\"hist\":[");
    for (int v = 0; v < 256; v++)
        at += snprintf(want + at, sizeof want - (size_t)at, "%s%d", v ? "," : "",
                       v == 0 || v == 10 || v == 200 ? 1
                       : v == 255                    ? 9
                                                     : 0);
    snprintf(want + at, sizeof want - (size_t)at, "]}");
    check_json(h, 0, want);
}

/* The format's own arithmetic on sums whose products need more than 64 bits (N*Q is about
 * 3e23) and a negative Laplacian sum: a 46341 x 46341 white page with one black pixel,
 * given as sums (lap_*: as if only the black pixel's L = -1020 counted). */
static void test_format_large(void **state)
{
    (void)state;
    struct orch_page_stats_acc acc;
    memset(&acc, 0, sizeof acc);
    uint64_t w = 46341, n = w * w;
    acc.hist[255] = n - 1;
    acc.hist[0] = 1;
    acc.ink_x0 = acc.ink_x1 = 7;
    acc.ink_y0 = acc.ink_y1 = 9;
    int64_t lsum = -1020;
    acc.lap_sum = (uint64_t)lsum;
    acc.lap_sq = 1020u * 1020u;
    char buf[ORCH_PAGE_STATS_JSON_MAX];
    int len = orch_page_stats_format(&acc, (uint32_t)w, (uint32_t)w, 128, 2, buf, sizeof buf);
    assert_true(len > 0);
    /* Worked out in Python with exact integers and the same double operations:
     * mean = 255 (n-1)/n = 254.99999988 -> 255.0000; std = sqrt(n*Q - S^2)/n = 0.0055;
     * sharpness = (m*1020^2 - 1020^2)/m/m with m = 46339^2 = 0.0005 */
    assert_string_equal(buf, "{\"width\":46341,\"height\":46341,\"mean\":255.0000,"
                             "\"std\":0.0055,\"ink\":0.000000,\"ink_bbox\":[7,9,7,9],"
                             "\"sharpness\":0.0005,\"hist\":[1,2147488280]}");
    assert_int_equal(orch_page_stats_format(&acc, 1, 1, 128, 16, buf, 10), -ENOSPC);
}

/* ---- bad input: each bad page fails alone, with a message that says why ----------------- */

static void test_bad_input(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(h_open(h, "max_pixels", "6", NULL), 0);
    size_t empty = udf_h_add(h, "", 0);
    size_t trunc = udf_h_add(h, LIT("P5\n3 2\n255\n\1\2\3\4\5"));
    size_t extra = udf_h_add(h, LIT("P5\n3 2\n255\n\1\2\3\4\5\6\7"));
    size_t zero = udf_h_add(h, LIT("P5\n0 2\n255\n"));
    size_t wide = udf_h_add(h, LIT("P5\n3 2\n65535\n\0\0\0\0\0\0\0\0\0\0\0\0"));
    size_t header = udf_h_add(h, LIT("P5\n3 x\n255\n\1\2\3\4\5\6"));
    size_t nospace = udf_h_add(h, LIT("P5\n1 1\n255"));
    size_t over = udf_h_add(h, LIT("P5\n1 2\n3\n\1\4"));
    size_t big = udf_h_add(h, LIT("P5\n7 1\n255\n\1\2\3\4\5\6\7"));
    size_t huge = udf_h_add(h, LIT("P5\n99999999999 1\n255\n\1"));
    size_t text = udf_h_add(h, LIT("hello, world"));
    size_t good = udf_h_add(h, LIT("P5\n3 2\n255\n\1\2\3\4\5\6"));
    assert_int_equal(udf_h_run(h), 0);
    udf_h_check_failure(h, empty, "page_stats: the image is empty (0 bytes)");
    udf_h_check_failure(h, trunc,
                        "the PGM is 3 x 2, so 6 pixel bytes, but 5 bytes follow its "
                        "header (truncated)");
    udf_h_check_failure(h, extra, "7 bytes follow its header (extra bytes)");
    udf_h_check_failure(h, zero, "the PGM is 0 x 2: no pixels");
    udf_h_check_failure(h, wide, "PGM maxval 65535 is not supported (1..255: 8-bit pixels)");
    udf_h_check_failure(h, header, "a PGM header must be \"P5 WIDTH HEIGHT MAXVAL\"");
    udf_h_check_failure(h, nospace, "a PGM header must be");
    udf_h_check_failure(h, over, "PGM pixel 1 has value 4, over its maxval 3");
    udf_h_check_failure(h, big, "the image is 7 x 1 = 7 pixels, over max_pixels=6");
    udf_h_check_failure(h, huge, "a PGM header must be");
#ifdef ORCH_HAVE_LEPT
    udf_h_check_failure(h, text,
                        "page_stats: not a binary PGM nor an image leptonica can read");
#else
    udf_h_check_failure(h, text,
                        "page_stats: not a binary PGM (P5); any other format needs "
                        "leptonica");
#endif
    check_json(h, good,
               "{\"width\":3,\"height\":2,\"mean\":3.5000,\"std\":1.7078,"
               "\"ink\":1.000000,\"ink_bbox\":[0,0,2,1],\"sharpness\":0.0000,"
               "\"hist\":[6,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}");
}

/* ---- PNG through leptonica --------------------------------------------------------------- */

#ifdef ORCH_HAVE_LEPT
/* Fixture A as an 8-bit gray PNG (made by leptonica); *png is freed with free(). */
static void png_a(uint8_t **png, size_t *len)
{
    static const uint8_t px[3][4] = {
        {255, 255, 255, 255}, {255, 0, 10, 255}, {255, 255, 255, 200}};
    PIX *p = pixCreate(4, 3, 8);
    assert_non_null(p);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 4; x++)
            pixSetPixel(p, x, y, px[y][x]);
    assert_int_equal(pixWriteMem(png, len, p, IFF_PNG), 0);
    pixDestroy(&p);
}

static void test_png(void **state)
{
    struct udf_h *h = *state;
    uint8_t *png;
    size_t len;
    png_a(&png, &len);
    assert_true(len > 33 && memcmp(png, "\x89PNG", 4) == 0);
    /* the same PNG claiming 100000 x 100000 pixels in its header (IHDR at byte 16): refused
     * before anything is decoded */
    uint8_t *huge = malloc(len);
    assert_non_null(huge);
    memcpy(huge, png, len);
    static const uint8_t dims[8] = {0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0};
    memcpy(huge + 16, dims, sizeof dims);
    assert_int_equal(h_open(h, NULL), 0);
    size_t ok = udf_h_add(h, png, len);
    size_t big = udf_h_add(h, huge, len);
    size_t cut = udf_h_add(h, png, 40); /* the header, then nothing */
    assert_int_equal(udf_h_run(h), 0);
    check_json(h, ok, want_a); /* the same statistics as the PGM of the same pixels */
    udf_h_check_failure(h, big,
                        "the image is 100000 x 100000 = 10000000000 pixels, over "
                        "max_pixels=50000000");
    udf_h_check_failure(h, cut, "page_stats: leptonica cannot decode the png image");
    free(huge);
    free(png);
}
#endif

/* ---- arguments --------------------------------------------------------------------------- */

static void test_args(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(h_open(h, "threshold", "257", NULL), -EINVAL);
    udf_h_check_contains(h->err, "page_stats: argument threshold must be in 0..256, not 257");
    assert_int_equal(h_open(h, "bins", "0", NULL), -EINVAL);
    udf_h_check_contains(h->err, "argument bins must be in 1..256, not 0");
    assert_int_equal(h_open(h, "max_pixels", "-1", NULL), -EINVAL);
    udf_h_check_contains(h->err, "max_pixels must be a non-negative integer");
    assert_int_equal(h_open(h, "dpi", "1", NULL), -EINVAL);
    udf_h_check_contains(h->err, "page_stats has no argument 'dpi'");
    assert_int_equal(h_open_op(h, ORCH_UDF_OP_FILTER, NULL), -EINVAL);
    udf_h_check_contains(h->err, "page_stats cannot be used as filter");
}

/* ---- the GPU path ------------------------------------------------------------------------ */

/* A worker given a GPU whose module cannot be loaded fails its init with the reason; a
 * worker given none (CUDA_VISIBLE_DEVICES empty) runs on the CPU. */
static void test_gpu_refused(void **state)
{
    struct udf_h *h = *state;
    setenv("CUDA_VISIBLE_DEVICES", "3", 1);
    orch_page_stats_gpu_set_module("/nonexistent/orch_page_stats_cuda.so");
    assert_int_equal(h_open(h, NULL), -ENODEV);
    udf_h_check_contains(h->err,
                         "page_stats: this worker was given GPU 3 (CUDA_VISIBLE_DEVICES) "
                         "but cannot use it: cannot load the CUDA module "
                         "/nonexistent/orch_page_stats_cuda.so");
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    assert_int_equal(h_open(h, NULL), 0);
    udf_h_add(h, LIT(pgm_a));
    assert_int_equal(udf_h_run(h), 0);
    check_json(h, 0, want_a);
}

/* Pseudo-random page-like images: white, with dark strokes and noise. */
static void synth(uint8_t *px, uint32_t w, uint32_t h, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        s = s * 1664525u + 1013904223u;
        uint32_t r = s >> 24;
        px[i] = r < 20 ? (uint8_t)(r * 3) : (uint8_t)(255 - (r & 7));
    }
}

/* Where a GPU and the module are there: the GPU path gives the CPU path's sums exactly, on
 * the fixtures and on images of awkward sizes; the built-in's output is the same bytes.
 * Elsewhere: the refusal names the reason. */
static void test_gpu_matches_cpu(void **state)
{
    struct udf_h *h = *state;
    setenv("CUDA_VISIBLE_DEVICES", "0", 1);
    int rc = h_open(h, NULL);
    if (rc != 0) {
        udf_h_check_contains(h->err,
                             "page_stats: this worker was given GPU 0 (CUDA_VISIBLE_DEVICES) "
                             "but cannot use it: ");
        print_message("no GPU path here: %s\n", h->err);
        skip();
    }
    udf_h_add(h, LIT(pgm_a));
    udf_h_add(h, LIT(pgm_b));
    assert_int_equal(udf_h_run(h), 0);
    check_json(h, 0, want_a);
    check_json(h, 1, want_b);

    struct orch_page_stats_gpu *g;
    char err[512];
    assert_int_equal(orch_page_stats_gpu_open(&g, err, sizeof err), 0);
    static const uint32_t sizes[][2] = {{1, 1},    {2, 2},   {3, 3},      {31, 1},
                                        {1, 700},  {257, 3}, {1000, 701}, {1275, 1650},
                                        {4, 5000}, {9000, 3}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint32_t w = sizes[k][0], ht = sizes[k][1];
        uint8_t *px = malloc((size_t)w * ht);
        assert_non_null(px);
        synth(px, w, ht, (uint32_t)k);
        for (uint32_t t = 0; t <= 256; t += 128) {
            struct orch_page_stats_acc cpu, gpu;
            orch_page_stats_cpu(px, w, ht, t, &cpu);
            assert_int_equal(orch_page_stats_gpu_run(g, px, w, ht, t, &gpu, err, sizeof err),
                             0);
            if (memcmp(&cpu, &gpu, sizeof cpu) != 0)
                fail_msg("%u x %u, threshold %u: the GPU's sums differ from the CPU's", w, ht,
                         t);
        }
        free(px);
    }
    orch_page_stats_gpu_close(g);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_fixed_values), T(test_format_large), T(test_bad_input),
#ifdef ORCH_HAVE_LEPT
        T(test_png),
#endif
        T(test_args),         T(test_gpu_refused),  T(test_gpu_matches_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
