# scripts/bench/video_compare_dask.py VIDEODIR OUTDIR WORKERS — the video -> frame -> OCR
# -> video pipeline as a Dask user writes it with a bag (dask_common.py: flatten, OCR a
# frame per `tesseract` run, group back by video, join in frame order with "\f"; run it
# with Debian's /usr/bin/python3). The frames are `ffmpeg`'s, per video: sampled with the
# select expression that scripts/bench/video_compare passes in $VIDEO_SELECT (orch's
# sampling rule), gray PGMs at the frame's own size. Per VIDEODIR/NAME.EXT, OUTDIR/NAME.txt
# (the texts) and OUTDIR/NAME.count (the number of frames).
import os
import sys

import dask_common


def decode(path):
    """A video's sampled frames: (name, frame number from 1, PGM bytes)."""
    return dask_common.files_of(
        os.path.splitext(os.path.basename(path))[0],
        lambda out: ["ffmpeg", "-nostdin", "-v", "error", "-i", path,
                     "-vf", os.environ["VIDEO_SELECT"] + ",format=gray",
                     "-fps_mode", "passthrough", out],
        "f%08d.pgm")


def main():
    videodir, outdir, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    videos = sorted(os.path.join(videodir, f) for f in os.listdir(videodir))
    for name, count, text in dask_common.run(videos, decode, workers):
        with open(os.path.join(outdir, name + ".txt"), "wb") as f:
            f.write(text)
        with open(os.path.join(outdir, name + ".count"), "w") as f:
            f.write("%d\n" % count)


if __name__ == "__main__":
    main()
