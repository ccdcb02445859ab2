#!/usr/bin/env bash
# page_stats end to end: page images (PGM, and the same pixels as PNG) through read_file and
# page_stats in the real binary, each answer compared byte for byte with the statistics that
# an independent implementation in Python computes from the pixels; bad images fail alone,
# each with its reason in `failures`. A call without gpus runs on the CPU even when orch was
# started with CUDA_VISIBLE_DEVICES set. A call with gpus=1 (budget given by --gpus 1):
# where there is no GPU, the job stops with page_stats' reason; where there is a GPU and the
# CUDA module, it gives the CPU call's bytes exactly.
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/img"
# Writes the images and, in expected.txt, NAME|JSON for each good one (threshold 100,
# 8 bins), computed here from the pixels.
python3 - "$T/img" > "$T/expected.txt" <<'PY'
import math, os, random, struct, sys, zlib

out = sys.argv[1]
T, BINS = 100, 8

def stats(w, h, px):
    n = w * h
    hist = [0] * 256
    for v in px:
        hist[v] += 1
    s = sum(v * c for v, c in enumerate(hist))
    q = sum(v * v * c for v, c in enumerate(hist))
    ink = [(x, y) for y in range(h) for x in range(w) if px[y * w + x] < T]
    bbox = "null"
    if ink:
        xs = [x for x, _ in ink]
        ys = [y for _, y in ink]
        bbox = "[%d,%d,%d,%d]" % (min(xs), min(ys), max(xs), max(ys))
    ls = lq = 0
    for y in range(1, h - 1):
        for x in range(1, w - 1):
            p = lambda dx, dy: px[(y + dy) * w + x + dx]
            l = 4 * p(0, 0) - p(-1, 0) - p(1, 0) - p(0, -1) - p(0, 1)
            ls += l
            lq += l * l
    m = (w - 2) * (h - 2) if w >= 3 and h >= 3 else 0
    sharp = float(m * lq - ls * ls) / m / m if m else 0.0
    binned = [0] * BINS
    for v in range(256):
        binned[v * BINS // 256] += hist[v]
    return ('{"width":%d,"height":%d,"mean":%.4f,"std":%.4f,"ink":%.6f,"ink_bbox":%s,'
            '"sharpness":%.4f,"hist":[%s]}' % (
                w, h, s / n, math.sqrt(float(n * q - s * s)) / n, len(ink) / n, bbox, sharp,
                ",".join(map(str, binned))))

def pgm(name, w, h, px, maxval=255, header=None):
    with open(os.path.join(out, name), "wb") as f:
        f.write((header or "P5\n%d %d\n%d\n" % (w, h, maxval)).encode() + bytes(px))

def png(name, w, h, px):
    raw = b"".join(b"\0" + bytes(px[y * w:(y + 1) * w]) for y in range(h))
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data)))
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))

def good(name, w, h, px):
    print("%s|%s" % (name, stats(w, h, px)))

rnd = random.Random(8)
# A page: white paper with a little noise, lines of dark "words", a grey smudge.
w, h = 120, 160
page = [255 - rnd.randrange(6) for _ in range(w * h)]
for line in range(12, 150, 14):
    x = 8
    while x < 110:
        word = rnd.randrange(5, 20)
        for y in range(line, line + 7):
            for xx in range(x, min(x + word, 112)):
                page[y * w + xx] = rnd.randrange(0, 60)
        x += word + rnd.randrange(3, 7)
for y in range(100, 130):
    for x in range(60, 100):
        page[y * w + x] = min(page[y * w + x], 140 + (x + y) % 20)
pgm("page.pgm", w, h, page)
good("page.pgm", w, h, page)
png("page.png", w, h, page)
good("page.png", w, h, page)
noise = [rnd.randrange(256) for _ in range(61 * 47)]
pgm("noise.pgm", 61, 47, noise)
good("noise.pgm", 61, 47, noise)
for name, (w, h) in (("one.pgm", (1, 1)), ("thin.pgm", (2, 7)), ("three.pgm", (3, 3))):
    px = [rnd.randrange(256) for _ in range(w * h)]
    pgm(name, w, h, px)
    good(name, w, h, px)
white = [255] * (40 * 30)
pgm("white.pgm", 40, 30, white)
good("white.pgm", 40, 30, white)
# maxval 100, a comment in the header: values scale to 0..255, rounded.
small = [rnd.randrange(101) for _ in range(9 * 5)]
pgm("maxval.pgm", 9, 5, small, header="P5\n# scanned at 100 levels\n9 5\n100\n")
good("maxval.pgm", 9, 5, [(v * 255 + 50) // 100 for v in small])
# Bad ones: a truncated PGM, one over max_pixels (20000), and text.
with open(os.path.join(out, "trunc.pgm"), "wb") as f:
    f.write(b"P5\n10 10\n255\n" + bytes(50))
pgm("big.pgm", 150, 150, [255] * (150 * 150))
with open(os.path.join(out, "notes.txt"), "w") as f:
    f.write("not an image\n")
PY
ls "$T"/img/* > "$T/list.txt"

# pipeline NAME OPTIONS: page_stats over every file of list.txt.
pipeline() {
  cat > "$T/$1.orch" <<PIPE
pipeline $1
domain page
source page.path = lines("list.txt")
call read = read_file()
call stats = page_stats(threshold=100, bins=8, max_pixels=20000) $2
page.img = read(page.path)
page.stats = stats(page.img)
output page.stats
PIPE
}

# results JOB: NAME|STATE|VALUE-or-ERROR per image, by file name.
results() {
  states "$1" page.stats | sed "s|^$T/img/||" | sort
}

# The CPU call, started with a GPU in the environment: the scheduler hides it from a call
# without gpus, so page_stats runs on the CPU (given the device, its init would fail here).
pipeline cpu "with workers=2, batch=3"
CUDA_VISIBLE_DEVICES=0 run_job "$T/cpu.orch" "$T/job-cpu"
got=$(results "$T/job-cpu")
want=$(sed 's/^\([^|]*\)|/\1|present|/' "$T/expected.txt" | sort)
expect_eq "every good image: the statistics computed in Python" "$want" \
  "$(grep '|present|' <<< "$got")"
bad=$(grep -v '|present|' <<< "$got")
expect_eq "the bad images fail, each with its reason" \
"big.pgm|failed|page_stats: the image is 150 x 150 = 22500 pixels, over max_pixels=20000
trunc.pgm|failed|page_stats: the PGM is 10 x 10, so 100 pixel bytes, but 50 bytes follow its header (truncated)" \
  "$(grep -v '^notes.txt|' <<< "$bad")"
# (the rest of this message is leptonica's own, or says that orch was built without it)
grep -q '^notes.txt|failed|page_stats: not a binary PGM' <<< "$bad" ||
  fail "notes.txt: $(grep '^notes.txt' <<< "$bad")"
expect_eq "failures are RecordFailures of stats" "3" \
  "$(q "$T/job-cpu" "SELECT count(*) FROM failures WHERE call = 'stats' AND kind = 'record'")"

# The GPU call, with a budget of one GPU.
pipeline gpu "with gpus=1"
if "$ORCH" run "$T/gpu.orch" --job "$T/job-gpu" --gpus 1 --progress none 2> "$T/err"; then
  expect_eq "the GPU path gives the CPU path's bytes" "$got" "$(results "$T/job-gpu")"
  echo "page_stats: GPU path checked against the CPU path"
else
  grep -q "call stats cannot start its workers: page_stats: this worker was given GPU 0 (CUDA_VISIBLE_DEVICES) but cannot use it: " "$T/err" ||
    fail "no clear message: $(cat "$T/err")"
  echo "page_stats: no GPU path here: $(grep -o 'cannot use it: .*' "$T/err")"
fi
echo "page_stats: ok"
