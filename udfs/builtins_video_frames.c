/* builtins_video_frames.c — the built-in video_frames: a video's frames, sampled at a rate.
 * The common ground of the FFmpeg built-ins is builtins_video.h.
 *
 *   video_frames  expand, 1-2 inputs   a video (path or bytes) and, optionally, a span
 *                 two output ports     "START END" in seconds (video_scenes' children) in;
 *                                      one child per sampled frame: port 0 the image, port 1
 *                                      its time in seconds (six decimals, ffprobe's
 *                                      best_effort_timestamp_time).
 *
 * Sampling at F frames per second: for k = 0, 1, 2, ... the first decoded frame whose time
 * t is >= START + k/F (START is 0 without a span) is a child, each frame at most once; with
 * a span, only frames with START <= t < END are. The comparisons are made on the times as
 * written (microseconds), so a reader can check them from the values alone. With a span,
 * decoding starts at the key frame at or before START and stops at the first frame at or
 * past END.
 *
 * Each child's image is the frame in 8-bit gray (swscale, bicubic, as the ffmpeg command's
 * scale filter), scaled so that its longer side is at most max_side (0: the frame's own
 * size; the other side rounded, at least 1), as a binary PGM (format=pgm, the default) or
 * a PNG (format=png, libavcodec's encoder).
 *
 * Failures. A sampled frame that the decoder refuses or marks as damaged (a packet it
 * cannot decode, decode_error_flags, a corrupt frame) is a failed child in its place, with
 * FFmpeg's message; a file whose reading stops on an error (not its end) gets a last
 * failed child saying so. Otherwise as builtins_video.c says: an unreadable container, no
 * video stream, more than max_pixels pixels, no frame decoded at all: a RecordFailure.

 */
#include "builtins_video.h"

#include "builtin_sigs.h"

#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The values of argument format: the indexes of its choices in builtin_sigs.c. */
enum frame_format { FRAME_PGM, FRAME_PNG };

struct frames_state {
    struct orch_udf__base base;
    /* the arguments (video_init) */
    int64_t fps_micro; /* frames a second, in millionths */
    int64_t max_side, max_pixels;
    int64_t format;         /* enum frame_format */
    struct SwsContext *sws; /* the gray scaler, kept while the frame size stays */
    AVFrame *gray;          /* the scaled frame */
    AVCodecContext *png;    /* format=png: the encoder, reopened when the size changes */
    AVPacket *pkt;          /* the PNG encoder's output */
    unsigned char *out;     /* the PGM in hand */
    size_t out_cap;
    char msg[VIDEO_MSG_MAX];
};

/* A record's walk: the span and where the sampling stands. */
struct walk {
    int64_t start_us, end_us; /* the span; end INT64_MAX without one */
    uint64_t k;               /* the next sample: the first frame at >= start + k/F */
    size_t children;          /* made so far, failed ones included */
};

static void frames_fini(void *state)
{
    struct frames_state *st = state;
    if (st == NULL)
        return;
    sws_freeContext(st->sws);
    av_frame_free(&st->gray);
    avcodec_free_context(&st->png);
    av_packet_free(&st->pkt);
    free(st->out);
    orch_udf__base_fini(st);
}

static int frames_init(const struct orch_udf_config *cfg, void **state)
{
    static const struct orch_udf__sig_arg args[] = {
        {"fps", offsetof(struct frames_state, fps_micro)},
        {"max_side", offsetof(struct frames_state, max_side)},
        {"format", offsetof(struct frames_state, format)},
        {"max_pixels", offsetof(struct frames_state, max_pixels)},
    };
    void *p;
    int rc = orch_udf__sig_init(cfg, "video_frames", sizeof(struct frames_state), args,
                        sizeof args / sizeof args[0], &p);
    if (rc < 0)
        return rc;
    struct frames_state *st = p;
    st->gray = av_frame_alloc();
    st->pkt = av_packet_alloc();
    if (st->gray == NULL || st->pkt == NULL) {
        frames_fini(st);
        return orch_udf_config_error(cfg, -ENOMEM, "video_frames: out of memory");
    }
    *state = st;
    return 0;
}

/* ---- images -------------------------------------------------------------------------- */

/* The output size of a w x h frame under max_side. */
static void out_size(const struct frames_state *st, int w, int h, int *ow, int *oh)
{
    *ow = w, *oh = h;
    int64_t longer = w > h ? w : h;
    if (st->max_side == 0 || longer <= (int64_t)st->max_side)
        return;
    int64_t m = (int64_t)st->max_side;
    if (w >= h) {
        *ow = (int)m;
        *oh = (int)(((int64_t)h * m + longer / 2) / longer);
    } else {
        *oh = (int)m;
        *ow = (int)(((int64_t)w * m + longer / 2) / longer);
    }
    if (*ow < 1)
        *ow = 1;
    if (*oh < 1)
        *oh = 1;
}

/* Scales f into st->gray. Returns 0 or -ENOMEM. */
static int to_gray(struct frames_state *st, const AVFrame *f)
{
    int w, h;
    out_size(st, f->width, f->height, &w, &h);
    if (st->gray->width != w || st->gray->height != h) {
        av_frame_unref(st->gray);
        st->gray->format = AV_PIX_FMT_GRAY8;
        st->gray->width = w;
        st->gray->height = h;
        if (av_frame_get_buffer(st->gray, 0) < 0)
            return -ENOMEM;
    }
    if (av_frame_make_writable(st->gray) < 0) /* the PNG encoder may hold a reference */
        return -ENOMEM;
    st->sws = sws_getCachedContext(st->sws, f->width, f->height, f->format, w, h,
                                   AV_PIX_FMT_GRAY8, SWS_BICUBIC, NULL, NULL, NULL);
    if (st->sws == NULL)
        return -ENOMEM;
    sws_scale(st->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height,
              st->gray->data, st->gray->linesize);
    return 0;
}

/* The PGM of st->gray into st->out; *len its size. Returns 0 or -ENOMEM. */
static int pgm(struct frames_state *st, size_t *len)
{
    const AVFrame *g = st->gray;
    char head[64];
    int n = snprintf(head, sizeof head, "P5\n%d %d\n255\n", g->width, g->height);
    size_t need = (size_t)n + (size_t)g->width * (size_t)g->height;
    if (need > st->out_cap) {
        unsigned char *p = realloc(st->out, need);
        if (p == NULL)
            return -ENOMEM;
        st->out = p, st->out_cap = need;
    }
    memcpy(st->out, head, (size_t)n);
    unsigned char *at = st->out + n;
    for (int y = 0; y < g->height; y++, at += g->width)
        memcpy(at, g->data[0] + (ptrdiff_t)y * g->linesize[0], (size_t)g->width);
    *len = need;
    return 0;
}

/* The PNG of st->gray into st->pkt. Returns 0, -ENOMEM, or 1 with a message in st->msg. */
static int png(struct frames_state *st)
{
    const AVFrame *g = st->gray;
    char e[256];
    int err = 0;
    if (st->png == NULL || st->png->width != g->width || st->png->height != g->height) {
        avcodec_free_context(&st->png);
        const AVCodec *codec = avcodec_find_encoder(AV_CODEC_ID_PNG);
        if (codec == NULL) {
            snprintf(st->msg, sizeof st->msg, "video_frames: this FFmpeg has no PNG encoder");
            return 1;
        }
        st->png = avcodec_alloc_context3(codec);
        if (st->png == NULL)
            return -ENOMEM;
        st->png->width = g->width;
        st->png->height = g->height;
        st->png->pix_fmt = AV_PIX_FMT_GRAY8;
        st->png->time_base = (AVRational){1, 1};
        err = avcodec_open2(st->png, codec, NULL);
    }
    if (err >= 0)
        err = avcodec_send_frame(st->png, g);
    if (err >= 0)
        err = avcodec_receive_packet(st->png, st->pkt);
    if (err == AVERROR(ENOMEM))
        return -ENOMEM;
    if (err < 0) {
        avcodec_free_context(&st->png); /* a fresh encoder for the next frame */
        snprintf(st->msg, sizeof st->msg, "video_frames: the PNG encoder failed: %s",
                 video_strerror(err, e, sizeof e));
        return 1;
    }
    return 0;
}

/* Emits frame f, at time ts, as record i's next child. Returns the host's answer, or 1
 * with a message in st->msg (the record fails). */
static int emit_frame(struct frames_state *st, const AVFrame *f, const char *ts,
                      struct orch_udf_batch *batch, size_t i)
{
    int rc = to_gray(st, f);
    const void *data = NULL;
    size_t len = 0;
    if (rc == 0 && st->format == FRAME_PGM) {
        rc = pgm(st, &len);
        data = st->out;
    } else if (rc == 0) {
        rc = png(st);
        data = st->pkt->data, len = (size_t)st->pkt->size;
    }
    if (rc == 0)
        rc = orch_udf_child(batch, i);
    if (rc == 0)
        rc = orch_udf_emit(batch, i, 0, data, len);
    if (rc == 0)
        rc = orch_udf_emit_str(batch, i, 1, ts);
    if (st->format == FRAME_PNG)
        av_packet_unref(st->pkt);
    return rc;
}

/* ---- sampling ------------------------------------------------------------------------ */

/* Whether a frame at us is the next sample; if so the sampling moves past it. */
static bool take(const struct frames_state *st, struct walk *w, int64_t us)
{
    if (us < w->start_us)
        return false;
    /* (us - start) * F >= k * 1e6 with F = fps_micro / 1e6, in 128 bits: exact, and no
     * overflow whatever the times */
    const __int128 unit = (__int128)1000000 * ORCH_BUILTIN_MICRO;
    __int128 have = (__int128)(us - w->start_us) * st->fps_micro;
    if (have < (__int128)w->k * unit)
        return false;
    w->k = (uint64_t)(have / unit) + 1;
    return true;
}

/* Parses decimal seconds ("12", "1.5", "0.033367") at *p into microseconds, moving *p past
 * them. Returns false when there is no such number. */
static bool parse_us(const char **p, int64_t *us)
{
    const char *s = *p;
    int64_t whole = 0, frac = 0;
    int digits = 0, fdigits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 12; s++, digits++)
        whole = whole * 10 + (*s - '0');
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++, fdigits++)
            if (fdigits < 6)
                frac = frac * 10 + (*s - '0');
    if (digits == 0 || (*s >= '0' && *s <= '9'))
        return false;
    for (int k = fdigits; k < 6; k++)
        frac *= 10;
    *us = whole * 1000000 + frac;
    *p = s;
    return true;
}

/* Record i's span from input 1: "START END". Returns 0, or 1 with a message. */
static int span_of(struct frames_state *st, const struct orch_udf_record *r, struct walk *w)
{
    w->start_us = 0, w->end_us = INT64_MAX;
    if (st->base.nin < 2 || r->in[1].n == 0 || !r->in[1].v[0].present)
        return 0;
    char text[2 * VIDEO_TS_MAX + 8];
    const struct orch_udf_value *v = &r->in[1].v[0];
    if (v->len < sizeof text) {
        memcpy(text, v->data, v->len);
        text[v->len] = '\0';
        const char *p = text;
        if (parse_us(&p, &w->start_us) && *p++ == ' ' && parse_us(&p, &w->end_us) &&
            *p == '\0' && w->start_us <= w->end_us)
            return 0;
    }
    snprintf(st->msg, sizeof st->msg,
             "video_frames: the span is not \"START END\" in seconds, START <= END: '%.*s'",
             v->len < 64 ? (int)v->len : 64, (const char *)v->data);
    return 1;
}

/* Decodes and emits the record's samples. Returns the host's answer, or 1 with a failure
 * message in st->msg. */
static int frames_walk(struct frames_state *st, struct video_dec *dec, struct video_src *src,
                       struct walk *w, struct orch_udf_batch *batch, size_t i)
{
    char first_damage[VIDEO_MSG_MAX / 2] = "";
    video_seek(dec, src, w->start_us);
    for (;;) {
        int64_t us = INT64_MIN;
        int ev = video_next(dec, src, st->base.name, &us, st->msg, sizeof st->msg);
        if (ev < 0)
            return ev;
        if (ev == VIDEO_END)
            break;
        if (ev == VIDEO_HUGE)
            return 1;
        if (ev == VIDEO_DAMAGE) {
            if (first_damage[0] == '\0')
                snprintf(first_damage, sizeof first_damage, "%.500s", st->msg);
            if (us >= w->end_us)
                return 0;
            if (us != INT64_MIN && take(st, w, us)) {
                int rc = orch_udf_fail_child(batch, i, st->msg);
                if (rc < 0)
                    return rc;
                w->children++;
            }
            continue;
        }
        const AVFrame *f = dec->frame;
        char ts[VIDEO_TS_MAX];
        us = video_ts(video_frame_pts(f), dec->tb, ts);
        if (us >= w->end_us)
            return 0;
        if (!take(st, w, us))
            continue;
        int rc = emit_frame(st, f, ts, batch, i);
        if (rc != 0)
            return rc;
        w->children++;
    }
    if (w->children == 0 && (first_damage[0] != '\0' || dec->read_error[0] != '\0')) {
        snprintf(st->msg, sizeof st->msg, "%s (no frame decoded)",
                 first_damage[0] != '\0' ? first_damage : dec->read_error);
        return 1;
    }
    if (dec->read_error[0] != '\0') {
        w->children++;
        return orch_udf_fail_child(batch, i, dec->read_error);
    }
    return 0;
}

static int frames_record(struct frames_state *st, struct orch_udf_batch *batch, size_t i)
{
    struct orch_udf__subject s;
    orch_udf__subject(&st->base, &batch->rec[i], &s);
    if (!s.present)
        return orch_udf_drop(batch, i);
    struct walk w = {0};
    int rc = span_of(st, &batch->rec[i], &w);
    if (rc != 0)
        return orch_udf_fail_record(batch, i, st->msg);
    struct video_src src;
    struct video_dec dec;
    memset(&dec, 0, sizeof dec);
    rc = video_open(&src, st->base.name, &s, st->msg, sizeof st->msg);
    if (rc == 0)
        rc = video_decoder_open(&dec, &src, st->base.name, st->max_pixels, st->msg,
                                sizeof st->msg);
    if (rc == 0)
        rc = frames_walk(st, &dec, &src, &w, batch, i);
    video_decoder_close(&dec);
    video_close(&src);
    if (rc == 1)
        return orch_udf_fail_record(batch, i, st->msg);
    if (rc == 0 && w.children == 0)
        return orch_udf_no_children(batch, i);
    return rc;
}

static int frames_run(void *state, struct orch_udf_batch *batch)
{
    struct frames_state *st = state;
    for (size_t i = 0; i < batch->n; i++) {
        st->msg[0] = '\0';
        int rc = frames_record(st, batch, i);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "video_frames: %s", strerror(-rc));
    }
    return 0;
}

const struct orch_udf orch_udf__video_frames = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "video_frames",
    .init = frames_init,
    .run = frames_run,
    .fini = frames_fini,
};
