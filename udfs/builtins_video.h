/* builtins_video.h — what the files of the FFmpeg built-ins share (builtins_video.c:
 * opening a video, decoding its frames, timestamps, video_probe and video_scenes;
 * builtins_video_frames.c: video_frames). Private to udfs/; built into the video module
 * (builtins.c).
 *
 * A video is opened from a record's subject (video_open): a path, or the video's bytes
 * read through a custom AVIOContext. Its best video stream is decoded by one decoder
 * (video_decoder_open: one thread, since a worker is one core), a frame at a time
 * (video_next): the built-ins emit each child as soon as its frame is decoded and keep
 * nothing of the frames before it but what their measure needs.
 *
 * Timestamps. A frame's time is its best_effort_timestamp in the stream's time base, in
 * seconds, written with six decimals exactly as ffprobe prints best_effort_timestamp_time
 * (the double pts * time_base, "%f"): video_ts() gives that text and the same time as an
 * integer number of microseconds, on which every comparison of the built-ins is made.
 */
#ifndef ORCH_BUILTINS_VIDEO_H
#define ORCH_BUILTINS_VIDEO_H

#include "udf_int.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VIDEO_MSG_MAX 1024
#define VIDEO_TS_MAX 32

/* An open video: its container, and where its bytes come from. */
struct video_src {
    AVFormatContext *fmt;
    AVIOContext *avio;          /* bytes only: our reader over `bytes` */
    const unsigned char *bytes; /* bytes only: the value, owned by the host */
    size_t len, pos;
    char *path;       /* path only: a NUL-terminated copy of the value */
    const char *name; /* the path, or "video bytes": for messages */
};

/* A decoder of the video stream of an open video, with the packet and frame it reuses. */
struct video_dec {
    AVCodecContext *ctx;
    int stream; /* index in src->fmt->streams */
    AVRational tb;
    int64_t max_pixels; /* the most pixels a frame may have */
    AVPacket *pkt;
    AVFrame *frame;
    bool draining;  /* the input ended: the decoder is being flushed */
    bool done;      /* no frame will come any more */
    bool must_feed; /* the decoder failed a frame: give it a packet before asking again */
    /* A read error other than the end of the file ends the input like the end would, and
     * is kept here. */
    char read_error[VIDEO_MSG_MAX / 2];
};

/* What video_next() found. */
enum video_event {
    VIDEO_FRAME,  /* dec->frame holds the next frame */
    VIDEO_DAMAGE, /* the decoder refused a packet or a frame: msg says why, *us when */
    VIDEO_HUGE,   /* a frame has more than max_pixels pixels: msg says so; the record fails */
    VIDEO_END,    /* no more frames (dec->read_error says whether the file ended early) */
};

/* Opens the video of subject s: bytes when the value is not a path (a path is text of at
 * most PATH_MAX bytes, without NUL or newline), else the file at that path; then reads
 * the container's header and its streams' parameters. Returns 0, -ENOMEM, or 1 with a
 * failure message in msg ("NAME: PATH: FFmpeg's message"). Close it with video_close()
 * whatever it returned. */
int video_open(struct video_src *src, const char *name, const struct orch_udf__subject *s,
               char *msg, size_t size);
void video_close(struct video_src *src);

/* Opens a decoder of src's best video stream, after refusing a frame size of more than
 * max_pixels (which video_next() then checks on every frame). Returns 0, -ENOMEM, or 1 with a
 * failure message in msg (no video stream, no decoder, too large). Close it with
 * video_decoder_close() whatever it returned. */
int video_decoder_open(struct video_dec *dec, struct video_src *src, const char *name,
                       int64_t max_pixels, char *msg, size_t size);
void video_decoder_close(struct video_dec *dec);

/* Decodes up to the next frame. VIDEO_DAMAGE's time *us is the refused packet's or
 * frame's (INT64_MIN when it has none). Returns the event, or -ENOMEM. */
int video_next(struct video_dec *dec, struct video_src *src, const char *name, int64_t *us,
               char *msg, size_t size);

/* Seeks src so that decoding starts at the key frame at or before `us` microseconds (when
 * it can: otherwise decoding starts where it was). The decoder is flushed. */
void video_seek(struct video_dec *dec, struct video_src *src, int64_t us);

/* The time of a pts in base tb: its text (six decimals, ffprobe's) in buf, and the
 * returned microseconds. */
int64_t video_ts(int64_t pts, AVRational tb, char buf[VIDEO_TS_MAX]);

/* A decoded frame's pts: its best effort timestamp, or AV_NOPTS_VALUE. */
int64_t video_frame_pts(const AVFrame *f);
/* The frame's duration in its stream's time base, 0 when unknown. */
int64_t video_frame_duration(const AVFrame *f);

/* The first error FFmpeg logged since video_log_reset() (empty when none). FFmpeg's log
 * is kept off stderr while a video built-in is in use. */
void video_log_reset(void);
const char *video_log_first(void);

/* FFmpeg's text for an AVERROR code. */
const char *video_strerror(int err, char *buf, size_t size);

#endif
