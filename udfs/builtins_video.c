/* builtins_video.c — the FFmpeg built-ins' common ground (opening, decoding, timestamps:
 * builtins_video.h), and two of them: video_probe and video_scenes. video_frames and
 * not_dark are in builtins_video_frames.c; docs/language.md, "Video built-ins", is the
 * user's manual.
 *
 *   video_probe   map      a video in; one line of JSON out: the container, its duration
 *                          and per stream its kind, codec, size, frame rate and frame
 *                          count when the container knows them. Nothing is decoded; a
 *                          file without a video stream probes.
 *   video_scenes  expand   a video in; one child per clip, "START END" in seconds (six
 *                          decimals: the times of the clip's first frame and of the next
 *                          clip's first frame, or for the last clip the end of its last
 *                          frame). Every frame is decoded and scaled to 64x36 gray; the
 *                          measure between consecutive frames is the mean absolute
 *                          difference of those pixels, 0..255, unrounded (the arguments
 *                          are decimals, compared exactly). A frame whose measure is
 *                          more than `threshold` starts a new clip when the clip in hand
 *                          is at least `min_len` seconds long; a frame `max_len` seconds
 *                          or more after its clip's start always does (0: no cap). Each
 *                          clip is emitted as soon as the frame after it is decoded.
 *
 * Failures. A container FFmpeg cannot open or read (not a video, an empty file, a header
 * cut short), a file without a video stream (video_scenes, video_frames), a stream
 * without a decoder, and a frame size of more than max_pixels are RecordFailures whose
 * message is the built-in's name, the path (or "video bytes") and FFmpeg's message
 * (av_strerror, and the first error FFmpeg logged when it logged one). A file that is
 * damaged past its header decodes what it can: video_scenes skips the frames the decoder
 * refuses; video_frames makes a failed child of a sampled frame it refuses
 * (builtins_video_frames.c). A file in which no frame at all decodes is a RecordFailure.
 */
#include "builtins_video.h"

#include "builtin_sigs.h"

#include <libavutil/avutil.h>
#include <libavutil/log.h>
#include <libswscale/swscale.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AVIO_BUF 65536
#define BYTES_NAME "video bytes"

/* ---- FFmpeg's log -------------------------------------------------------------------- */

static _Thread_local char log_first[256];

/* FFmpeg's log callback: fmt is its printf format (the attribute says so to the compiler). */
__attribute__((format(printf, 3, 0))) static void log_cb(void *avcl, int level,
                                                       const char *fmt, va_list ap)
{
    (void)avcl;
    if (level > AV_LOG_ERROR || log_first[0] != '\0')
        return;
    vsnprintf(log_first, sizeof log_first, fmt, ap);
    size_t n = strlen(log_first);
    while (n > 0 && (log_first[n - 1] == '\n' || log_first[n - 1] == ' '))
        log_first[--n] = '\0';
}

void video_log_reset(void)
{
    av_log_set_callback(log_cb);
    log_first[0] = '\0';
}

const char *video_log_first(void)
{
    return log_first;
}

const char *video_strerror(int err, char *buf, size_t size)
{
    if (av_strerror(err, buf, size) < 0)
        snprintf(buf, size, "FFmpeg error %d", err);
    return buf;
}

/* "NAME: SRC: what (FFmpeg's first logged error)" into msg. */
static void fail_msg(char *msg, size_t size, const char *name, const char *src, int err,
                     const char *what)
{
    char e[256];
    const char *logged = video_log_first();
    snprintf(msg, size, "%s: %s: %s%s%s%s%s", name, src, what != NULL ? what : "",
             what != NULL && err != 0 ? ": " : "",
             err != 0 ? video_strerror(err, e, sizeof e) : "", logged[0] != '\0' ? " (" : "",
             logged[0] != '\0' ? logged : "");
    if (logged[0] != '\0' && strlen(msg) + 1 < size)
        strcat(msg, ")");
}

/* ---- timestamps ---------------------------------------------------------------------- */

int64_t video_ts(int64_t pts, AVRational tb, char buf[VIDEO_TS_MAX])
{
    double d = (double)pts * av_q2d(tb); /* ffprobe's best_effort_timestamp_time */
    snprintf(buf, VIDEO_TS_MAX, "%f", d);
    /* The microseconds of that very text, so that comparisons agree with what is shown. */
    const char *p = buf;
    bool neg = *p == '-';
    p += neg;
    int64_t whole = 0, frac = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        whole = whole * 10 + (*p - '0');
    if (*p == '.')
        for (int k = 0; k < 6; k++)
            frac = frac * 10 + (p[1 + k] >= '0' && p[1 + k] <= '9' ? p[1 + k] - '0' : 0);
    int64_t us = whole * 1000000 + frac;
    return neg ? -us : us;
}

int64_t video_frame_pts(const AVFrame *f)
{
    return f->best_effort_timestamp != AV_NOPTS_VALUE ? f->best_effort_timestamp : f->pts;
}

int64_t video_frame_duration(const AVFrame *f)
{
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(58, 2, 100)
    return f->duration > 0 ? f->duration : 0;
#else
    return f->pkt_duration > 0 ? f->pkt_duration : 0;
#endif
}

/* ---- opening ------------------------------------------------------------------------- */

static int read_cb(void *opaque, uint8_t *buf, int size)
{
    struct video_src *src = opaque;
    size_t n = src->len - src->pos;
    if (n == 0)
        return AVERROR_EOF;
    if (n > (size_t)size)
        n = (size_t)size;
    memcpy(buf, src->bytes + src->pos, n);
    src->pos += n;
    return (int)n;
}

static int64_t seek_cb(void *opaque, int64_t offset, int whence)
{
    struct video_src *src = opaque;
    int64_t base;
    switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE:
        return (int64_t)src->len;
    case SEEK_SET:
        base = 0;
        break;
    case SEEK_CUR:
        base = (int64_t)src->pos;
        break;
    case SEEK_END:
        base = (int64_t)src->len;
        break;
    default:
        return AVERROR(EINVAL);
    }
    if (offset < -base || base + offset > (int64_t)src->len)
        return AVERROR(EINVAL);
    src->pos = (size_t)(base + offset);
    return base + offset;
}

static bool is_path(const struct orch_udf__subject *s)
{
    return s->len > 0 && s->len <= PATH_MAX && memchr(s->data, '\0', s->len) == NULL &&
           memchr(s->data, '\n', s->len) == NULL;
}

int video_open(struct video_src *src, const char *name, const struct orch_udf__subject *s,
               char *msg, size_t size)
{
    memset(src, 0, sizeof *src);
    video_log_reset();
    src->fmt = avformat_alloc_context();
    if (src->fmt == NULL)
        return -ENOMEM;
    if (is_path(s)) {
        src->path = strndup(s->data, s->len);
        if (src->path == NULL)
            return -ENOMEM;
        src->name = src->path;
    } else {
        src->name = BYTES_NAME;
        if (s->len == 0) {
            snprintf(msg, size, "%s: the value is empty: neither a video nor a path", name);
            return 1;
        }
        src->bytes = (const unsigned char *)s->data;
        src->len = s->len;
        unsigned char *buf = av_malloc(AVIO_BUF);
        if (buf == NULL)
            return -ENOMEM;
        src->avio = avio_alloc_context(buf, AVIO_BUF, 0, src, read_cb, NULL, seek_cb);
        if (src->avio == NULL) {
            av_free(buf);
            return -ENOMEM;
        }
        src->fmt->pb = src->avio;
    }
    int err = avformat_open_input(&src->fmt, src->path, NULL, NULL);
    if (err < 0) { /* fmt was freed and set to NULL */
        if (err == AVERROR(ENOMEM))
            return -ENOMEM;
        fail_msg(msg, size, name, src->name, err, "cannot open the container");
        return 1;
    }
    err = avformat_find_stream_info(src->fmt, NULL);
    if (err < 0) {
        if (err == AVERROR(ENOMEM))
            return -ENOMEM;
        fail_msg(msg, size, name, src->name, err, "cannot read the streams");
        return 1;
    }
    return 0;
}

void video_close(struct video_src *src)
{
    avformat_close_input(&src->fmt);
    if (src->avio != NULL) {
        av_freep(&src->avio->buffer);
        avio_context_free(&src->avio);
    }
    free(src->path);
    src->path = NULL;
}

/* ---- decoding ------------------------------------------------------------------------ */

int video_decoder_open(struct video_dec *dec, struct video_src *src, const char *name,
                       int64_t max_pixels, char *msg, size_t size)
{
    memset(dec, 0, sizeof *dec);
    dec->stream = -1;
    const AVCodec *codec = NULL;
    int k = av_find_best_stream(src->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (k < 0) {
        fail_msg(msg, size, name, src->name, k,
                 k == AVERROR_STREAM_NOT_FOUND ? "no video stream"
                                               : "no decoder for its video");
        return 1;
    }
    const AVCodecParameters *par = src->fmt->streams[k]->codecpar;
    if ((int64_t)(par->width > 0 ? par->width : 0) * (par->height > 0 ? par->height : 0) >
        max_pixels) {
        snprintf(msg, size, "%s: %s: the video is %dx%d pixels, more than max_pixels=%" PRId64,
                 name, src->name, par->width, par->height, max_pixels);
        return 1;
    }
    dec->stream = k;
    dec->max_pixels = max_pixels;
    dec->tb = src->fmt->streams[k]->time_base;
    dec->ctx = avcodec_alloc_context3(codec);
    dec->pkt = av_packet_alloc();
    dec->frame = av_frame_alloc();
    if (dec->ctx == NULL || dec->pkt == NULL || dec->frame == NULL)
        return -ENOMEM;
    int err = avcodec_parameters_to_context(dec->ctx, par);
    if (err >= 0) {
        dec->ctx->thread_count = 1; /* a worker is one core */
        dec->ctx->pkt_timebase = dec->tb;
        err = avcodec_open2(dec->ctx, codec, NULL);
    }
    if (err < 0) {
        if (err == AVERROR(ENOMEM))
            return -ENOMEM;
        fail_msg(msg, size, name, src->name, err, "cannot open the decoder");
        return 1;
    }
    return 0;
}

void video_decoder_close(struct video_dec *dec)
{
    avcodec_free_context(&dec->ctx);
    av_packet_free(&dec->pkt);
    av_frame_free(&dec->frame);
}

/* Reads the next packet of the video stream and gives it to the decoder; at the end of
 * the input (or a read error: kept in dec->read_error), starts draining. Returns 0,
 * VIDEO_DAMAGE (msg, *us) when the decoder refuses the packet, or -ENOMEM. */
static int feed(struct video_dec *dec, struct video_src *src, const char *name, int64_t *us,
                char *msg, size_t size)
{
    for (;;) {
        int err = av_read_frame(src->fmt, dec->pkt);
        if (err < 0) {
            if (err == AVERROR(ENOMEM))
                return -ENOMEM;
            if (err != AVERROR_EOF)
                fail_msg(dec->read_error, sizeof dec->read_error, name, src->name, err,
                         "the file ends in damage");
            dec->draining = true;
            err = avcodec_send_packet(dec->ctx, NULL);
            return err == AVERROR(ENOMEM) ? -ENOMEM : 0;
        }
        if (dec->pkt->stream_index != dec->stream) {
            av_packet_unref(dec->pkt);
            continue;
        }
        int64_t pts = dec->pkt->pts != AV_NOPTS_VALUE ? dec->pkt->pts : dec->pkt->dts;
        video_log_reset();
        err = avcodec_send_packet(dec->ctx, dec->pkt);
        av_packet_unref(dec->pkt);
        if (err >= 0 || err == AVERROR(EAGAIN))
            return 0; /* EAGAIN never happens: frames are received before the next send */
        if (err == AVERROR(ENOMEM))
            return -ENOMEM;
        char ts[VIDEO_TS_MAX], what[96] = "the decoder refused a packet";
        *us = INT64_MIN;
        if (pts != AV_NOPTS_VALUE) {
            *us = video_ts(pts, dec->tb, ts);
            snprintf(what, sizeof what, "the decoder refused the frame at %s s", ts);
        }
        fail_msg(msg, size, name, src->name, err, what);
        return VIDEO_DAMAGE;
    }
}

int video_next(struct video_dec *dec, struct video_src *src, const char *name, int64_t *us,
               char *msg, size_t size)
{
    while (!dec->done) {
        if (dec->must_feed) { /* never ask twice in a row a decoder that failed */
            dec->must_feed = false;
            if (dec->draining) {
                dec->done = true;
                break;
            }
            int rc = feed(dec, src, name, us, msg, size);
            if (rc != 0)
                return rc;
        }
        video_log_reset();
        int err = avcodec_receive_frame(dec->ctx, dec->frame);
        if (err >= 0) {
            int64_t pts = video_frame_pts(dec->frame);
            char ts[VIDEO_TS_MAX];
            if (pts == AV_NOPTS_VALUE)
                continue; /* a frame without a time cannot be placed: skipped */
            if (dec->frame->decode_error_flags != 0 ||
                (dec->frame->flags & AV_FRAME_FLAG_CORRUPT)) {
                char what[96];
                *us = video_ts(pts, dec->tb, ts);
                snprintf(what, sizeof what, "the frame at %s s is damaged", ts);
                fail_msg(msg, size, name, src->name, 0, what);
                return VIDEO_DAMAGE;
            }
            const AVFrame *f = dec->frame;
            if ((int64_t)f->width * f->height > dec->max_pixels) {
                snprintf(msg, size,
                         "%s: %s: a frame is %dx%d pixels, more than max_pixels=%" PRId64, name,
                         src->name, f->width, f->height, dec->max_pixels);
                return VIDEO_HUGE;
            }
            return VIDEO_FRAME;
        }
        if (err == AVERROR_EOF) {
            dec->done = true;
            break;
        }
        if (err == AVERROR(ENOMEM))
            return -ENOMEM;
        if (err != AVERROR(EAGAIN)) {
            dec->must_feed = true;
            *us = INT64_MIN;
            fail_msg(msg, size, name, src->name, err, "the decoder failed");
            return VIDEO_DAMAGE;
        }
        if (dec->draining) { /* EAGAIN while draining: nothing more will come */
            dec->done = true;
            break;
        }
        int rc = feed(dec, src, name, us, msg, size);
        if (rc != 0)
            return rc;
    }
    return VIDEO_END;
}

void video_seek(struct video_dec *dec, struct video_src *src, int64_t us)
{
    if (us <= 0)
        return;
    int64_t t = av_rescale_q(us, (AVRational){1, 1000000}, dec->tb);
    if (av_seek_frame(src->fmt, dec->stream, t, AVSEEK_FLAG_BACKWARD) >= 0)
        avcodec_flush_buffers(dec->ctx);
}

/* ---- video_probe --------------------------------------------------------------------- */

struct video_state {
    struct orch_udf__base base;
    /* video_scenes' arguments (video_init) */
    int64_t threshold_micro; /* the measure's limit, in millionths */
    int64_t min_len_us, max_len_us, max_pixels;
    struct SwsContext *sws; /* the 64x36 gray scaler, kept across frames of one size */
    char msg[VIDEO_MSG_MAX];
};

static int probe_init(const struct orch_udf_config *cfg, void **state)
{
    return orch_udf__sig_init(cfg, "video_probe", sizeof(struct video_state), NULL, 0, state);
}

static void video_fini(void *state)
{
    struct video_state *st = state;
    if (st == NULL)
        return;
    sws_freeContext(st->sws);
    orch_udf__base_fini(st);
}

/* A growable text buffer for the probe's JSON; oom once any append failed. */
struct jbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static void
jb_printf(struct jbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p != NULL ? b->p + b->len : NULL, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n + 64;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
}

/* A JSON string of s (FFmpeg's names are ASCII identifiers; anything else is escaped). */
static void jb_str(struct jbuf *b, const char *s)
{
    jb_printf(b, "\"");
    for (; s != NULL && *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            jb_printf(b, "\\%c", c);
        else if (c < 0x20)
            jb_printf(b, "\\u%04x", c);
        else
            jb_printf(b, "%c", c);
    }
    jb_printf(b, "\"");
}

static void jb_rational(struct jbuf *b, AVRational r)
{
    if (r.num > 0 && r.den > 0)
        jb_printf(b, "\"%d/%d\"", r.num, r.den);
    else
        jb_printf(b, "null");
}

static void probe_stream(struct jbuf *b, const AVStream *st)
{
    const AVCodecParameters *par = st->codecpar;
    const char *kind = av_get_media_type_string(par->codec_type);
    jb_printf(b, "{\"index\":%d,\"kind\":", st->index);
    jb_str(b, kind != NULL ? kind : "unknown");
    jb_printf(b, ",\"codec\":");
    jb_str(b, avcodec_get_name(par->codec_id));
    if (par->codec_type == AVMEDIA_TYPE_VIDEO) {
        jb_printf(b, ",\"width\":%d,\"height\":%d,\"fps\":", par->width, par->height);
        jb_rational(b, st->avg_frame_rate);
    } else if (par->codec_type == AVMEDIA_TYPE_AUDIO) {
        jb_printf(b, ",\"sample_rate\":%d,\"channels\":%d", par->sample_rate,
                  par->ch_layout.nb_channels);
    }
    if (st->duration != AV_NOPTS_VALUE) {
        char ts[VIDEO_TS_MAX];
        video_ts(st->duration, st->time_base, ts);
        jb_printf(b, ",\"duration\":%s", ts);
    } else {
        jb_printf(b, ",\"duration\":null");
    }
    if (st->nb_frames > 0)
        jb_printf(b, ",\"frames\":%" PRId64 "}", st->nb_frames);
    else
        jb_printf(b, ",\"frames\":null}");
}

/* The probe's JSON of an open video into b. */
static void probe_json(struct jbuf *b, const AVFormatContext *fmt)
{
    jb_printf(b, "{\"container\":");
    jb_str(b, fmt->iformat->name);
    if (fmt->duration != AV_NOPTS_VALUE)
        jb_printf(b, ",\"duration\":%f", (double)fmt->duration / AV_TIME_BASE);
    else
        jb_printf(b, ",\"duration\":null");
    jb_printf(b, ",\"streams\":[");
    for (unsigned k = 0; k < fmt->nb_streams; k++) {
        if (k > 0)
            jb_printf(b, ",");
        probe_stream(b, fmt->streams[k]);
    }
    jb_printf(b, "]}");
}

static int probe_record(struct video_state *st, struct orch_udf_batch *batch, size_t i)
{
    struct orch_udf__subject s;
    orch_udf__subject(&st->base, &batch->rec[i], &s); /* no allocation: a map */
    if (!s.present)
        return orch_udf_drop(batch, i);
    struct video_src src;
    int rc = video_open(&src, st->base.name, &s, st->msg, sizeof st->msg);
    if (rc == 0) {
        struct jbuf b = {0};
        probe_json(&b, src.fmt);
        rc = b.oom ? -ENOMEM : orch_udf__emit_all(&st->base, batch, i, b.p, b.len);
        free(b.p);
    }
    video_close(&src);
    return rc == 1 ? orch_udf_fail_record(batch, i, st->msg) : rc;
}

static int video_run(void *state, struct orch_udf_batch *batch,
                     int (*record)(struct video_state *, struct orch_udf_batch *, size_t))
{
    struct video_state *st = state;
    for (size_t i = 0; i < batch->n; i++) {
        st->msg[0] = '\0';
        int rc = record(st, batch, i);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "%s: %s", st->base.name, strerror(-rc));
    }
    return 0;
}

static int probe_run(void *state, struct orch_udf_batch *batch)
{
    return video_run(state, batch, probe_record);
}

const struct orch_udf orch_udf__video_probe = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "video_probe",
    .init = probe_init,
    .run = probe_run,
    .fini = video_fini,
};

/* ---- video_scenes -------------------------------------------------------------------- */

#define SMALL_W 64
#define SMALL_H 36
#define SMALL_PIXELS (SMALL_W * SMALL_H)

static int scenes_init(const struct orch_udf_config *cfg, void **state)
{
    static const struct orch_udf__sig_arg args[] = {
        {"threshold", offsetof(struct video_state, threshold_micro)},
        {"min_len", offsetof(struct video_state, min_len_us)},
        {"max_len", offsetof(struct video_state, max_len_us)},
        {"max_pixels", offsetof(struct video_state, max_pixels)},
    };
    return orch_udf__sig_init(cfg, "video_scenes", sizeof(struct video_state), args,
                      sizeof args / sizeof args[0], state);
}

/* Scales frame f to 64x36 gray into small. Returns 0 or -ENOMEM. */
static int small_gray(struct video_state *st, const AVFrame *f, uint8_t small[SMALL_PIXELS])
{
    st->sws = sws_getCachedContext(st->sws, f->width, f->height, f->format, SMALL_W, SMALL_H,
                                   AV_PIX_FMT_GRAY8, SWS_AREA, NULL, NULL, NULL);
    if (st->sws == NULL)
        return -ENOMEM;
    uint8_t *dst[4] = {small, NULL, NULL, NULL};
    int stride[4] = {SMALL_W, 0, 0, 0};
    sws_scale(st->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst, stride);
    return 0;
}

/* Whether the mean absolute difference of a and b is more than `micro` millionths: the
 * sum of the differences over the pixels compared exactly, with no rounding. */
static bool differ_more(const uint8_t *a, const uint8_t *b, int64_t micro)
{
    int64_t sum = 0;
    for (int k = 0; k < SMALL_PIXELS; k++)
        sum += a[k] > b[k] ? a[k] - b[k] : b[k] - a[k];
    return sum * ORCH_BUILTIN_MICRO > micro * SMALL_PIXELS;
}

static int emit_span(struct video_state *st, struct orch_udf_batch *batch, size_t i,
                     const char *start, const char *end)
{
    char span[2 * VIDEO_TS_MAX + 2];
    snprintf(span, sizeof span, "%s %s", start, end);
    int rc = orch_udf_child(batch, i);
    return rc < 0 ? rc : orch_udf__emit_all(&st->base, batch, i, span, strlen(span));
}

/* Decodes every frame, emitting each clip as its end is found. Returns the host's answer,
 * or 1 with a failure message in st->msg; *clips is how many were emitted. */
static int scenes_walk(struct video_state *st, struct video_dec *dec, struct video_src *src,
                       struct orch_udf_batch *batch, size_t i, int *clips)
{
    uint8_t small[2][SMALL_PIXELS];
    int cur = 0, frames = 0;
    char start[VIDEO_TS_MAX] = "", last_end[VIDEO_TS_MAX] = "";
    int64_t start_us = 0;
    char damage[VIDEO_MSG_MAX / 2] = "";
    for (;;) {
        int64_t us;
        int ev = video_next(dec, src, st->base.name, &us, st->msg, sizeof st->msg);
        if (ev < 0)
            return ev;
        if (ev == VIDEO_END)
            break;
        if (ev == VIDEO_HUGE)
            return 1;
        if (ev == VIDEO_DAMAGE) {
            if (damage[0] == '\0')
                snprintf(damage, sizeof damage, "%.500s", st->msg);
            continue; /* a frame the decoder refuses is not a frame of any clip */
        }
        AVFrame *f = dec->frame;
        char ts[VIDEO_TS_MAX];
        int64_t pts = video_frame_pts(f);
        int64_t t_us = video_ts(pts, dec->tb, ts);
        video_ts(pts + video_frame_duration(f), dec->tb, last_end);
        int rc = small_gray(st, f, small[cur]);
        if (rc < 0)
            return rc;
        if (frames++ == 0) {
            snprintf(start, sizeof start, "%s", ts);
            start_us = t_us;
        } else {
            int64_t len = t_us - start_us;
            bool cut = differ_more(small[cur], small[!cur], st->threshold_micro) &&
                       len >= st->min_len_us;
            if (st->max_len_us > 0 && len >= st->max_len_us)
                cut = true;
            if (cut) {
                if ((rc = emit_span(st, batch, i, start, ts)) < 0)
                    return rc;
                ++*clips;
                snprintf(start, sizeof start, "%s", ts);
                start_us = t_us;
            }
        }
        cur = !cur;
    }
    if (frames == 0) {
        if (damage[0] != '\0' || dec->read_error[0] != '\0') {
            snprintf(st->msg, sizeof st->msg, "%s (no frame decoded)",
                     damage[0] != '\0' ? damage : dec->read_error);
            return 1;
        }
        return 0;
    }
    ++*clips;
    return emit_span(st, batch, i, start, last_end);
}

static int scenes_record(struct video_state *st, struct orch_udf_batch *batch, size_t i)
{
    struct orch_udf__subject s;
    orch_udf__subject(&st->base, &batch->rec[i], &s);
    if (!s.present)
        return orch_udf_drop(batch, i);
    struct video_src src;
    struct video_dec dec;
    int clips = 0;
    memset(&dec, 0, sizeof dec);
    int rc = video_open(&src, st->base.name, &s, st->msg, sizeof st->msg);
    if (rc == 0)
        rc = video_decoder_open(&dec, &src, st->base.name, st->max_pixels, st->msg,
                                sizeof st->msg);
    if (rc == 0)
        rc = scenes_walk(st, &dec, &src, batch, i, &clips);
    video_decoder_close(&dec);
    video_close(&src);
    if (rc == 1)
        return orch_udf_fail_record(batch, i, st->msg);
    if (rc == 0 && clips == 0)
        return orch_udf_no_children(batch, i);
    return rc;
}

static int scenes_run(void *state, struct orch_udf_batch *batch)
{
    return video_run(state, batch, scenes_record);
}

const struct orch_udf orch_udf__video_scenes = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "video_scenes",
    .init = scenes_init,
    .run = scenes_run,
    .fini = video_fini,
};
