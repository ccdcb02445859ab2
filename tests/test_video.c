/* test_video.c — the FFmpeg built-ins (video_probe, video_scenes, video_frames) and
 * not_dark through the real ABI and the real answer collector, on videos that
 * scripts/make-videos makes with FFmpeg's synthetic sources, measured against the ffmpeg
 * and ffprobe commands:
 *   - the probe's fields of a made video, and of one without a video stream;
 *   - at fps=1, fps=5 and fps=0.5, the frames' count and times equal the sampling rule
 *     applied to ffprobe's best_effort_timestamp_time of every frame, on every test video
 *     (ffprobe's text and ours are compared as text);
 *   - the gray frames equal, within 1 per pixel, what `ffmpeg -ss T -frames:v 1 -vf
 *     scale=W:H,format=gray -f rawvideo` gives for the same time and size;
 *   - the scene cuts are found at the videos' hard cuts, with min_len and max_len obeyed;
 *     a span limits video_frames to its clip;
 *   - truncated, corrupt, empty, audio-only and text-named-.mp4 inputs give the failures
 *     builtins_video.c promises and never crash; max_pixels refuses; bytes decode as the
 *     path does; PNG frames are gray PNGs of the right size.
 * Without ffmpeg (scripts/setup installs it), every test is skipped with a message. */
#define _GNU_SOURCE /* nftw, in testutil.h */
#include "orch_udf_host.h"
#include "testutil.h"
#include "udf_harness.h"

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifndef ORCH_SOURCE_ROOT
#error "ORCH_SOURCE_ROOT must name the source tree"
#endif

#define MAXT 4096

static char dir[512]; /* the made videos; "" when ffmpeg is absent */

static const char *video(const char *name)
{
    static char path[8][1024];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    return p;
}

static int group_setup(void **state)
{
    (void)state;
    if (system("command -v ffmpeg >/dev/null 2>&1 && command -v ffprobe >/dev/null 2>&1") !=
        0) {
        fprintf(stderr, "test_video: ffmpeg/ffprobe not installed (scripts/setup): skipped\n");
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/orch-video-XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL)
        return -1;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/scripts/make-videos' '%s' --bad --long 1", ORCH_SOURCE_ROOT,
             dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return dir[0] != '\0' ? orch_test_rmtree(dir) : 0;
}

static int setup(void **state)
{
    *state = udf_h_new(NULL);
    return *state != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    return udf_h_free(*state);
}

#define NEED_FFMPEG()                                                                          \
    do {                                                                                       \
        if (dir[0] == '\0') {                                                                  \
            print_message("ffmpeg is not installed: skipped\n");                               \
            skip();                                                                            \
        }                                                                                      \
    } while (0)

/* ---- running the built-ins ------------------------------------------------------------- */

/* Runs one record (the video `path`, and `span` on input 1 when not NULL) through the
 * open instance; returns its answer. */
static const struct orch_udf_answer *one(struct udf_h *h, const char *path, const char *span)
{
    udf_h_clear(h);
    size_t i = udf_h_rec(h);
    udf_h_text(h, i, 0, path);
    if (span != NULL)
        udf_h_text(h, i, 1, span);
    udf_h_run_ok(h);
    return &h->ans.rec[0];
}

static void expect_ok(const struct orch_udf_answer *a)
{
    if (a->outcome != ORCH_UDF_OK)
        fail_msg("expected OK, got %s: %s", orch_udf_outcome_name(a->outcome),
                 a->msg != NULL ? a->msg : "");
}

static void expect_failure(const struct orch_udf_answer *a, const char *needle)
{
    if (a->outcome != ORCH_UDF_RECORD_FAILURE)
        fail_msg("expected a RecordFailure with \"%s\", got %s", needle,
                 orch_udf_outcome_name(a->outcome));
    udf_h_check_contains(a->msg, needle);
}

/* Child c, port p of an expansion with nout ports, as a NUL-terminated copy in buf. */
static const char *child_text(const struct orch_udf_answer *a, size_t nout, size_t c, size_t p,
                              char *buf, size_t size)
{
    const struct orch_udf_out *o = &a->children[c * nout + p];
    assert_true(o->set);
    assert_true(o->len < size);
    memcpy(buf, o->data, o->len);
    buf[o->len] = '\0';
    return buf;
}

/* ---- what ffprobe and ffmpeg say -------------------------------------------------------- */

/* Microseconds of a six-decimal time ("2.066667"). */
static int64_t us_of(const char *t)
{
    int64_t whole = 0, frac = 0;
    int n = 0;
    for (; *t >= '0' && *t <= '9'; t++)
        whole = whole * 10 + (*t - '0');
    if (*t == '.')
        for (t++; *t >= '0' && *t <= '9' && n < 6; t++, n++)
            frac = frac * 10 + (*t - '0');
    for (; n < 6; n++)
        frac *= 10;
    return whole * 1000000 + frac;
}

/* ffprobe's best_effort_timestamp_time of every frame of path's first video stream, in
 * decoding order: the texts, into t[MAXT][16]; returns how many. */
static size_t ffprobe_times(const char *path, char (*t)[16])
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "ffprobe -v error -select_streams v:0 -show_entries "
             "frame=best_effort_timestamp_time -of csv=p=0 '%s'",
             path);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = 0;
    char line[128];
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n,")] = '\0';
        if (line[0] == '\0' || strcmp(line, "N/A") == 0)
            continue;
        assert_true(n < MAXT);
        assert_true(strlen(line) < 16);
        memcpy(t[n++], line, strlen(line) + 1);
    }
    assert_int_equal(pclose(f), 0);
    return n;
}

/* The sampling rule at fps (in millionths: 0.5 fps is 500000) over the times t[0..n): for
 * k = 0, 1, ... the first time >= k/fps, each once. Keeps the chosen ones in place; returns
 * how many. */
static size_t sample(char (*t)[16], size_t n, int64_t fps_micro)
{
    const __int128 unit = (__int128)1000000 * 1000000;
    size_t m = 0;
    __int128 k = 0;
    for (size_t j = 0; j < n; j++) {
        __int128 have = (__int128)us_of(t[j]) * fps_micro;
        if (have >= k * unit) {
            k = have / unit + 1;
            memmove(t[m++], t[j], 16);
        }
    }
    return m;
}

/* ffmpeg's gray frame of path at time ts, scaled to w x h: w*h bytes into px. */
static void ffmpeg_gray(const char *path, const char *ts, int w, int h, unsigned char *px)
{
    char cmd[2048];
    /* Half a millisecond early: the first frame at or after it is the frame at ts, even when
     * ts, written with six decimals, is a little after the frame's exact time. */
    snprintf(cmd, sizeof cmd,
             "ffmpeg -nostdin -v error -ss %.6f -i '%s' -frames:v 1 "
             "-vf scale=%d:%d,format=gray -f rawvideo -",
             (double)us_of(ts) / 1e6 - 0.0005 > 0 ? (double)us_of(ts) / 1e6 - 0.0005 : 0.0,
             path, w, h);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t got = fread(px, 1, (size_t)w * (size_t)h, f);
    assert_int_equal(pclose(f), 0);
    assert_int_equal(got, (size_t)w * (size_t)h);
}

/* A binary PGM's size and pixels. */
static const unsigned char *pgm_pixels(const struct orch_udf_out *o, int *w, int *h)
{
    int head = 0;
    char text[64];
    size_t n = o->len < sizeof text - 1 ? o->len : sizeof text - 1;
    memcpy(text, o->data, n);
    text[n] = '\0';
    assert_int_equal(sscanf(text, "P5\n%d %d\n255\n%n", w, h, &head), 2);
    assert_true(head > 0);
    assert_int_equal(o->len, (size_t)head + (size_t)*w * (size_t)*h);
    return (const unsigned char *)o->data + head;
}

/* ---- probe ------------------------------------------------------------------------------ */

static void test_probe(void **state)
{
    NEED_FFMPEG();
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "video_probe", ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
    const struct orch_udf_answer *a = one(h, video("cuts.mp4"), NULL);
    expect_ok(a);
    char json[4096];
    assert_true(a->values[0].len < sizeof json);
    memcpy(json, a->values[0].data, a->values[0].len);
    json[a->values[0].len] = '\0';
    udf_h_check_contains(json,
                         "{\"container\":\"mov,mp4,m4a,3gp,3g2,mj2\",\"duration\":7.000000,");
    udf_h_check_contains(json, "\"kind\":\"video\",\"codec\":\"h264\",\"width\":160,"
                               "\"height\":120,\"fps\":\"25/1\",\"duration\":7.000000,"
                               "\"frames\":175}");
    a = one(h, video("plain.mkv"), NULL);
    expect_ok(a);
    udf_h_check_contains(a->values[0].data, "\"codec\":\"mpeg4\"");
    udf_h_check_contains(a->values[0].data, "\"fps\":\"30000/1001\"");
    /* no video stream: still probes */
    a = one(h, video("audio.m4a"), NULL);
    expect_ok(a);
    udf_h_check_contains(a->values[0].data, "\"kind\":\"audio\",\"codec\":\"aac\"");
    /* not a container at all */
    expect_failure(one(h, video("text.mp4"), NULL), "video_probe: ");
    expect_failure(one(h, video("text.mp4"), NULL), "cannot open the container: ");
    expect_failure(one(h, video("empty.mp4"), NULL), "cannot open the container");
    expect_failure(one(h, video("absent.mp4"), NULL), "No such file or directory");
}

/* ---- frames against ffprobe ---------------------------------------------------------- */

/* fps: the argument's text; fps_micro: the same in millionths. */
static void frames_match(struct udf_h *h, const char *name, const char *fps, int64_t fps_micro)
{
    static char want[MAXT][16];
    assert_int_equal(udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "fps", fps,
                                   "max_side", "32", NULL),
                     0);
    const char *path = video(name);
    size_t n = sample(want, ffprobe_times(path, want), fps_micro);
    const struct orch_udf_answer *a = one(h, path, NULL);
    expect_ok(a);
    if (a->nchildren != n)
        fail_msg("%s at fps=%s: %zu frames, ffprobe's sampling gives %zu", name, fps,
                 a->nchildren, n);
    assert_null(a->child_msg);
    for (size_t c = 0; c < n; c++) {
        char ts[32];
        child_text(a, 2, c, 1, ts, sizeof ts);
        if (strcmp(ts, want[c]) != 0)
            fail_msg("%s at fps=%s: frame %zu at %s, ffprobe's sampling at %s", name, fps, c,
                     ts, want[c]);
    }
    assert_true(n >= 2);
}

static void test_frames_times(void **state)
{
    NEED_FFMPEG();
    static const char *const names[] = {"cuts.mp4", "plain.mkv", "bars.avi", "long.mp4"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        frames_match(*state, names[k], "1", 1000000);
        frames_match(*state, names[k], "5", 5000000);
        frames_match(*state, names[k], "0.5", 500000);
    }
}

/* ---- gray frames against ffmpeg ------------------------------------------------------ */

static void gray_match(struct udf_h *h, const char *name, const char *max_side)
{
    assert_int_equal(udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "fps", "1",
                                   "max_side", max_side, NULL),
                     0);
    const char *path = video(name);
    const struct orch_udf_answer *a = one(h, path, NULL);
    expect_ok(a);
    assert_true(a->nchildren >= 2);
    for (size_t c = 0; c < a->nchildren; c++) {
        int w, hh;
        const unsigned char *px = pgm_pixels(&a->children[c * 2], &w, &hh);
        char ts[32];
        child_text(a, 2, c, 1, ts, sizeof ts);
        unsigned char *ref = malloc((size_t)w * (size_t)hh);
        assert_non_null(ref);
        ffmpeg_gray(path, ts, w, hh, ref);
        int worst = 0;
        for (size_t p = 0; p < (size_t)w * (size_t)hh; p++) {
            int d = abs((int)px[p] - (int)ref[p]);
            worst = d > worst ? d : worst;
        }
        free(ref);
        if (worst > 1)
            fail_msg("%s at %s (%dx%d): a pixel differs from ffmpeg's by %d", name, ts, w, hh,
                     worst);
    }
}

static void test_frames_gray(void **state)
{
    NEED_FFMPEG();
    gray_match(*state, "cuts.mp4", "0");  /* 160x120, the frame's own size */
    gray_match(*state, "cuts.mp4", "80"); /* 80x60 */
    gray_match(*state, "plain.mkv", "100");
    gray_match(*state, "bars.avi", "0");
}

static void test_frames_size_png(void **state)
{
    NEED_FFMPEG();
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "max_side",
                                   "50", "format", "png", NULL),
                     0);
    const struct orch_udf_answer *a = one(h, video("cuts.mp4"), NULL);
    expect_ok(a);
    assert_int_equal(a->nchildren, 7);
    const unsigned char *png = a->children[0].data;
    assert_true(a->children[0].len > 33);
    assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
    /* IHDR: width 50, height 38 (120 * 50 / 160 = 37.5, rounded), 8-bit gray (type 0) */
    assert_int_equal((png[16] << 24) | (png[17] << 16) | (png[18] << 8) | png[19], 50);
    assert_int_equal((png[20] << 24) | (png[21] << 16) | (png[22] << 8) | png[23], 38);
    assert_int_equal(png[24], 8);
    assert_int_equal(png[25], 0);
}

/* The same video as bytes gives the same frames as by path. */
static void test_frames_bytes(void **state)
{
    NEED_FFMPEG();
    struct udf_h *h = *state;
    size_t len = 0;
    char *data = orch_test_read_file(video("cuts.mp4"), &len);
    assert_non_null(data);
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "fps", "2", NULL), 0);
    udf_h_clear(h);
    size_t i = udf_h_rec(h);
    udf_h_value(h, i, 0, data, len);
    udf_h_own(h, i, data);
    i = udf_h_rec(h);
    udf_h_text(h, i, 0, video("cuts.mp4"));
    udf_h_run_ok(h);
    const struct orch_udf_answer *b = &h->ans.rec[0], *p = &h->ans.rec[1];
    expect_ok(b);
    expect_ok(p);
    assert_int_equal(b->nchildren, 14);
    assert_int_equal(p->nchildren, 14);
    for (size_t k = 0; k < 2 * b->nchildren; k++) {
        assert_int_equal(b->children[k].len, p->children[k].len);
        assert_memory_equal(b->children[k].data, p->children[k].data, b->children[k].len);
    }
    assert_int_equal(udf_h_builtin(h, "video_probe", ORCH_UDF_OP_MAP, 1, 1, NULL), 0);
    udf_h_clear(h);
    udf_h_value(h, udf_h_rec(h), 0,
                "\0\0\0\x20"
                "garbage",
                11);
    udf_h_run_ok(h);
    expect_failure(&h->ans.rec[0], "video_probe: video bytes: cannot open the container");
}

/* ---- scenes ---------------------------------------------------------------------------- */

static void expect_spans(struct udf_h *h, const char *name, const char *const *spans, size_t n)
{
    const struct orch_udf_answer *a = one(h, video(name), NULL);
    expect_ok(a);
    if (a->nchildren != n)
        fail_msg("%s: %zu clips, expected %zu", name, a->nchildren, n);
    for (size_t c = 0; c < n; c++) {
        char s[64];
        assert_string_equal(child_text(a, 1, c, 0, s, sizeof s), spans[c]);
    }
}

static void test_scenes(void **state)
{
    NEED_FFMPEG();
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, NULL), 0);
    static const char *const cuts[] = {"0.000000 2.000000", "2.000000 4.000000",
                                       "4.000000 5.000000", "5.000000 7.000000"};
    expect_spans(h, "cuts.mp4", cuts, 4);
    static const char *const bars[] = {"0.000000 1.500000", "1.500000 3.000000"};
    expect_spans(h, "bars.avi", bars, 2);
    static const char *const plain[] = {"0.000000 3.003000"};
    expect_spans(h, "plain.mkv", plain, 1);
    /* min_len=2: the cut at 5 s comes 1 s after the clip's start, and is not made */
    assert_int_equal(
        udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, "min_len", "2", NULL), 0);
    static const char *const min2[] = {"0.000000 2.000000", "2.000000 4.000000",
                                       "4.000000 7.000000"};
    expect_spans(h, "cuts.mp4", min2, 3);
    /* decimal seconds, exactly: that clip is 1.000000 s long, so min_len=1.000001 keeps it
     * whole and min_len=1 does not */
    assert_int_equal(
        udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, "min_len", "1.000001", NULL),
        0);
    expect_spans(h, "cuts.mp4", min2, 3);
    assert_int_equal(
        udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, "min_len", "1", NULL), 0);
    expect_spans(h, "cuts.mp4", cuts, 4);
    /* max_len=0.5 at 10 fps: a clip every half second, the hard cut at 1.5 s among them */
    assert_int_equal(
        udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, "max_len", "0.5", NULL), 0);
    static const char *const half[] = {"0.000000 0.500000", "0.500000 1.000000",
                                       "1.000000 1.500000", "1.500000 2.000000",
                                       "2.000000 2.500000", "2.500000 3.000000"};
    expect_spans(h, "bars.avi", half, 6);
    /* max_len=1: no clip is longer than a second; the first frame at or past 1 s cuts */
    assert_int_equal(
        udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, "max_len", "1", NULL), 0);
    static const char *const max1[] = {"0.000000 1.001000", "1.001000 2.002000",
                                       "2.002000 3.003000"};
    expect_spans(h, "plain.mkv", max1, 3);
    /* threshold=255: nothing differs by more, no cut */
    assert_int_equal(
        udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, "threshold", "255", NULL),
        0);
    static const char *const whole[] = {"0.000000 7.000000"};
    expect_spans(h, "cuts.mp4", whole, 1);
}

/* A span from video_scenes limits video_frames to the clip; sampling starts at its start. */
static void test_frames_span(void **state)
{
    NEED_FFMPEG();
    struct udf_h *h = *state;
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 2, 2, "fps", "2", NULL), 0);
    const struct orch_udf_answer *a = one(h, video("cuts.mp4"), "5.000000 7.000000");
    expect_ok(a);
    char ts[32];
    assert_int_equal(a->nchildren, 4);
    assert_string_equal(child_text(a, 2, 0, 1, ts, sizeof ts), "5.000000");
    assert_string_equal(child_text(a, 2, 1, 1, ts, sizeof ts), "5.520000");
    assert_string_equal(child_text(a, 2, 2, 1, ts, sizeof ts), "6.000000");
    assert_string_equal(child_text(a, 2, 3, 1, ts, sizeof ts), "6.520000");
    a = one(h, video("bars.avi"), "1.500000 3.000000");
    expect_ok(a);
    assert_int_equal(a->nchildren, 3);
    assert_string_equal(child_text(a, 2, 0, 1, ts, sizeof ts), "1.500000");
    assert_string_equal(child_text(a, 2, 2, 1, ts, sizeof ts), "2.500000");
    expect_failure(one(h, video("cuts.mp4"), "5 to 7"), "the span is not \"START END\"");
    expect_failure(one(h, video("cuts.mp4"), "7.0 5.0"), "START <= END");
}

/* ---- bad media ------------------------------------------------------------------------- */

/* Prints an answer, for a failing test's log. */
static void show(const char *what, const struct orch_udf_answer *a)
{
    print_message("%s: %s %s, %zu children\n", what, orch_udf_outcome_name(a->outcome),
                  a->msg != NULL ? a->msg : "", a->nchildren);
    for (size_t c = 0; a->child_msg != NULL && c < a->nchildren; c++)
        if (a->child_msg[c] != NULL)
            print_message("  child %zu failed: %s\n", c, a->child_msg[c]);
}

static void test_bad_media(void **state)
{
    NEED_FFMPEG();
    struct udf_h *h = *state;
    static const char *const calls[] = {"video_frames", "video_scenes"};
    for (size_t k = 0; k < 2; k++) {
        size_t nout = k == 0 ? 2 : 1;
        assert_int_equal(udf_h_builtin(h, calls[k], ORCH_UDF_OP_EXPAND, 1, nout, NULL), 0);
        expect_failure(one(h, video("audio.m4a"), NULL), "no video stream: Stream not found");
        expect_failure(one(h, video("text.mp4"), NULL),
                       "cannot open the container: Invalid data found when processing input");
        expect_failure(one(h, video("empty.mp4"), NULL), "cannot open the container");
        expect_failure(one(h, video("absent.mp4"), NULL),
                       "absent.mp4: cannot open the container: No such file or directory");
        const struct orch_udf_answer *a = one(h, video("truncated.mp4"), NULL);
        show("truncated", a);
        expect_ok(a); /* what is left of the file decodes: fewer frames, a shorter last clip */
        assert_true(a->nchildren >= 1 && a->nchildren <= (k == 0 ? 6u : 4u));
        if (k == 1) {
            char span[64];
            child_text(a, 1, a->nchildren - 1, 0, span, sizeof span);
            assert_true(us_of(strchr(span, ' ') + 1) < 7000000);
        }
        a = one(h, video("corrupt.mp4"), NULL);
        show("corrupt", a);
        expect_ok(a);
        assert_true(a->nchildren >= 1);
    }
}

/* The damaged video's frames: those that decode are children with their times; the
 * others are failed children with FFmpeg's message, in their place. */
static void test_damaged_frames(void **state)
{
    NEED_FFMPEG();
    struct udf_h *h = *state;
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "fps", "5", NULL), 0);
    const struct orch_udf_answer *a = one(h, video("corrupt.mp4"), NULL);
    show("corrupt at fps=5", a);
    expect_ok(a);
    assert_int_equal(a->nchildren, 35);
    assert_non_null(a->child_msg);
    size_t failed = 0;
    char times[35][32];
    for (size_t c = 0; c < a->nchildren; c++)
        if (a->child_msg[c] != NULL) {
            failed++;
            udf_h_check_contains(a->child_msg[c], "video_frames: ");
            const char *at = strstr(a->child_msg[c], "the decoder refused the frame at ");
            assert_non_null(at);
            assert_int_equal(sscanf(at, "the decoder refused the frame at %31s", times[c]), 1);
        } else {
            child_text(a, 2, c, 1, times[c], sizeof times[c]);
        }
    /* each failed child is in its place: the times of all the children, made or failed,
     * rise in order */
    for (size_t c = 1; c < a->nchildren; c++)
        if (us_of(times[c - 1]) >= us_of(times[c]))
            fail_msg("child %zu at %s, after child %zu at %s", c, times[c], c - 1,
                     times[c - 1]);
    assert_true(failed >= 1);
}

static void test_max_pixels(void **state)
{
    NEED_FFMPEG();
    struct udf_h *h = *state;
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "max_pixels", "19199", NULL),
        0);
    expect_failure(one(h, video("cuts.mp4"), NULL),
                   "cuts.mp4: the video is 160x120 pixels, more than max_pixels=19199");
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "max_pixels", "19200", NULL),
        0);
    expect_ok(one(h, video("cuts.mp4"), NULL));
    assert_int_equal(
        udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, "max_pixels", "100", NULL),
        0);
    expect_failure(one(h, video("cuts.mp4"), NULL), "more than max_pixels=100");
}

static void test_config(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 1, NULL), -EINVAL);
    udf_h_check_contains(h->err, "gives 2 outputs, not 1 and 1");
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "format", "jpg", NULL),
        -EINVAL);
    assert_int_equal(udf_h_builtin(h, "video_frames", ORCH_UDF_OP_MAP, 1, 2, NULL), -EINVAL);
    assert_int_equal(
        udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, "threshold", "256", NULL),
        -EINVAL);
    assert_int_equal(udf_h_builtin(h, "video_probe", ORCH_UDF_OP_MAP, 1, 1, "fps", "1", NULL),
                     -EINVAL);
    /* decimal arguments: what the signature's type and range allow, and nothing else */
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "fps", "0.001", NULL), 0);
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "fps", "0", NULL), -EINVAL);
    udf_h_check_contains(h->err, "video_frames: argument fps must be a number from 0.001 to "
                                 "1000, not '0'");
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "fps", "0.1234567", NULL),
        -EINVAL);
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "fps", "1e3", NULL),
        -EINVAL);
    assert_int_equal(
        udf_h_builtin(h, "video_frames", ORCH_UDF_OP_EXPAND, 1, 2, "max_side", "1.5", NULL),
        -EINVAL);
    udf_h_check_contains(h->err, "max_side must be an integer from 0 to 65536, not '1.5'");
    assert_int_equal(udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, "threshold",
                                   "255.000001", NULL),
                     -EINVAL);
    assert_int_equal(udf_h_builtin(h, "video_scenes", ORCH_UDF_OP_EXPAND, 1, 1, "threshold",
                                   "12.5", "min_len", "0.04", "max_len", "86400", NULL),
                     0);
    assert_int_equal(
        udf_h_builtin(h, "not_dark", ORCH_UDF_OP_FILTER, 2, 1, "max_mean", "256", NULL),
        -EINVAL);
}

/* ---- not_dark -------------------------------------------------------------------------- */

static void test_not_dark(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(
        udf_h_builtin(h, "not_dark", ORCH_UDF_OP_FILTER, 2, 1, "max_mean", "20", NULL), 0);
    static const char *const stats[] = {
        "{\"width\":4,\"height\":4,\"mean\":3.5000,\"std\":0.0000}",
        "{\"width\":4,\"height\":4,\"mean\":20.0000,\"std\":0.0000}",
        "{\"width\":4,\"height\":4,\"mean\":20.0001,\"std\":0.0000}",
        "{\"width\":4,\"height\":4,\"mean\":187.2500,\"std\":9.1000}",
        "not json",
    };
    udf_h_clear(h);
    for (size_t k = 0; k < 5; k++) {
        size_t i = udf_h_rec(h);
        udf_h_text(h, i, 0, "1.000000");
        udf_h_text(h, i, 1, stats[k]);
    }
    size_t i = udf_h_rec(h);
    udf_h_text(h, i, 0, "2.000000");
    udf_h_value(h, i, 1, NULL, 0); /* absent statistics */
    udf_h_run_ok(h);
    static const enum orch_udf_outcome want[] = {ORCH_UDF_KEEP_FALSE, ORCH_UDF_KEEP_FALSE,
                                                 ORCH_UDF_KEEP_TRUE, ORCH_UDF_KEEP_TRUE};
    for (size_t k = 0; k < 4; k++)
        udf_h_check_outcome(h, k, want[k]);
    udf_h_check_failure(h, 4, "not_dark: the value is not page_stats' JSON");
    udf_h_check_outcome(h, 5, ORCH_UDF_DROP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_probe, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frames_times, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frames_gray, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frames_size_png, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frames_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scenes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frames_span, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_media, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_pixels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_dark, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
