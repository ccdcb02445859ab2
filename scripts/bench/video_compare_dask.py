# scripts/bench/video_compare_dask.py VIDEODIR OUTDIR WORKERS — the video -> frame ->
# OCR -> video pipeline as a Dask user writes it with a bag (Debian's python3-dask; run it
# with Debian's /usr/bin/python3): every video becomes its sampled frames (flatten), each
# frame is OCRed, the frame texts are grouped back by video and joined in frame order with
# "\f" (what orch's concat(sep="\f") does). Per VIDEODIR/NAME.EXT, OUTDIR/NAME.txt (the
# texts) and OUTDIR/NAME.count (the number of frames).
# The work is the command-line tools: `ffmpeg` per video, sampling with the select
# expression that scripts/bench/video_compare passes in $VIDEO_SELECT (orch's sampling
# rule) to gray PGMs at the frame's own size; `tesseract - -` per frame (the PGM on stdin,
# the text on stdout, what pytesseract does), with OMP_THREAD_LIMIT=1 from the caller. The
# scheduler is Dask's local process pool with WORKERS workers; the bag keeps
# from_sequence's default partitioning (for up to 100 videos, one video a partition), which
# is what a user gets without tuning.
import os
import subprocess
import sys
import tempfile

import dask.bag as db


def decode(path):
    """A video's sampled frames: (name, frame number from 1, PGM bytes)."""
    name = os.path.splitext(os.path.basename(path))[0]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", path,
                        "-vf", os.environ["VIDEO_SELECT"] + ",format=gray",
                        "-fps_mode", "passthrough", os.path.join(tmp, "f%08d.pgm")],
                       check=True)
        frames = []
        for i, f in enumerate(sorted(os.listdir(tmp)), start=1):
            with open(os.path.join(tmp, f), "rb") as fh:
                frames.append((name, i, fh.read()))
        return frames


def ocr(frame):
    """(name, frame number, the frame's text as bytes) by one `tesseract` run."""
    name, i, pgm = frame
    p = subprocess.run(["tesseract", "-", "-", "--psm", "3", "-l", "eng"], input=pgm,
                       capture_output=True, check=True)
    return name, i, p.stdout


def assemble(group):
    name, frames = group
    frames = sorted(frames, key=lambda f: f[1])
    return name, len(frames), b"\f".join(text for _, _, text in frames)


def main():
    videodir, outdir, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    videos = sorted(os.path.join(videodir, f) for f in os.listdir(videodir))
    out = (db.from_sequence(videos)
           .map(decode).flatten()
           .map(ocr)
           .groupby(lambda frame: frame[0])
           .map(assemble))
    for name, count, text in out.compute(scheduler="processes", num_workers=workers):
        with open(os.path.join(outdir, name + ".txt"), "wb") as f:
            f.write(text)
        with open(os.path.join(outdir, name + ".count"), "w") as f:
            f.write("%d\n" % count)


if __name__ == "__main__":
    main()
