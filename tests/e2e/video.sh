#!/usr/bin/env bash
# video.sh — examples/video.orch end to end over videos made by scripts/make-videos, good
# and bad: the job finishes; each good video's summary is the times of its lit frames per
# clip (the near-black second of cuts.mp4 gives an empty line), its spans are the hard
# cuts; the bad videos' failures are in `orch failures` and the failures view with
# FFmpeg's messages, and they stop nothing. Then a long video (a minute, six clips) whose
# driver is killed with kill -9 once its first clip's frames are done: resume does not
# decode that clip again, and the exports equal an uninterrupted run's.
source "$(dirname "$0")/lib.sh"

command -v ffmpeg >/dev/null || { echo "SKIP: ffmpeg is not installed (scripts/setup)"; exit 77; }
mkdir -p "$T/in"
cp "$SRCDIR/examples/video.orch" "$T/in/"
"$SRCDIR/scripts/make-videos" "$T/in/videos" --bad
run_job "$T/in/video.orch" "$T/job"

summary() {
  "$ORCH" export "$T/job" video.summary |
    python3 -c 'import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r["key"] == sys.argv[1]: print(r["state"], repr(r.get("value")))' "$1"
}
expect_eq "cuts.mp4: lit frames per clip" \
  "present '0.000000 1.000000\\n2.000000 3.000000\\n\\n5.000000 6.000000'" \
  "$(summary videos/cuts.mp4)"
expect_eq "bars.avi" "present '0.000000 1.000000\\n1.500000 2.500000'" "$(summary videos/bars.avi)"
expect_eq "plain.mkv" "present '0.000000 1.001000 2.002000'" "$(summary videos/plain.mkv)"

nfail=$(q "$T/job" "SELECT count(*) FROM failures")
[ "$nfail" -ge 5 ] || fail "expected the bad videos' failures, got $nfail"
"$ORCH" export "$T/job" clip.span > "$T/spans.jsonl"
expect_eq "cuts.mp4's clips" \
  '"0.000000 2.000000" "2.000000 4.000000" "4.000000 5.000000" "5.000000 7.000000"' \
  "$(grep '"videos/cuts.mp4/' "$T/spans.jsonl" | python3 -c 'import json, sys
print(" ".join(json.dumps(json.loads(l)["value"]) for l in sys.stdin))')"

# Each bad video, and why: the failures query of docs/sql-cookbook.md.
got=$(q "$T/job" "SELECT call || ' ' || key || ' ' || kind || ' ' ||
  CASE WHEN message LIKE '%no video stream%' THEN 'no-video'
       WHEN message LIKE '%cannot open the container%' THEN 'unreadable'
       WHEN message LIKE '%the decoder refused the frame at _%' THEN 'damaged-frame'
       ELSE message END
  FROM failures WHERE call IN ('info', 'scenes', 'frames') ORDER BY key, call")
expect_eq "failures" "scenes videos/audio.m4a record no-video
frames videos/corrupt.mp4/2/1 record damaged-frame
info videos/empty.mp4 record unreadable
scenes videos/empty.mp4 record unreadable
info videos/text.mp4 record unreadable
scenes videos/text.mp4 record unreadable" "$got"
"$ORCH" failures "$T/job" > "$T/failures.txt"
grep -q "video_scenes: .*/audio.m4a: no video stream: Stream not found" "$T/failures.txt" ||
  { cat "$T/failures.txt" >&2; fail "orch failures does not show the audio-only video's"; }
grep -q "cannot open the container: Invalid data found when processing input" "$T/failures.txt" ||
  fail "orch failures does not show the text file's"

# ---- kill -9 in the middle of a long video, resume ----------------------------------------
mkdir -p "$T/long"
"$SRCDIR/scripts/make-videos" "$T/long/videos" --long 1
cat > "$T/long/long.orch" <<'ORCH'
pipeline long
domain video
domain clip in video
domain frame in clip
source video.path = files("videos/long.mp4")
call scenes = video_scenes()
call frames = video_frames(fps=2, max_side=64)   with workers=1, batch=1
call stats  = page_stats()                       with workers=1, batch=1
call nap    = sleep(ms=15)                       with workers=1, batch=1
call times  = concat(sep=" ")                    with reserve=parent
clip.span    = expand scenes(video.path)
clip.video   = broadcast video.path
frame.image, frame.ts = expand frames(clip.video, clip.span)
frame.stats  = stats(frame.image)
frame.slow   = nap(frame.ts)
clip.summary = reduce times(frame.slow)
output clip.span
output frame.stats
output clip.summary
ORCH
run_job "$T/long/long.orch" "$T/clean"
expect_eq "the long video's clips" "6" "$(q "$T/clean" "SELECT count(*) FROM items
  WHERE port = 'clip.span' AND state = 'present'")"

first_clip_done() {
  [ -f "$T/killed/state.db" ] &&
    [ "$(qlive "$T/killed" "SELECT g.phase FROM grains AS g JOIN call AS c ON c.id = g.call_id
          JOIN entity_key AS k ON k.entity_id = g.entity_id
          WHERE c.name = 'frames' AND k.key = 'videos/long.mp4/0'" 2> /dev/null)" = sealed ]
}
"$ORCH" run "$T/long/long.orch" --job "$T/killed" --progress none 2> "$T/killed.log" &
driver=$!
wait_until 60 "the first clip's frames to be sealed" first_clip_done
kill -9 "$driver"
if wait "$driver" 2> /dev/null; then fail "the killed driver exited 0"; fi
left=$(q "$T/killed" "SELECT count(*) FROM grains WHERE phase <> 'sealed'")
[ "$left" -gt 0 ] || fail "the job was over before the kill"
"$ORCH" resume "$T/killed" --progress none 2> "$T/resume.log" ||
  { cat "$T/resume.log" >&2; fail "orch resume after kill -9 exited $?"; }
job_done "$T/killed"
expect_eq "the first clip's frames were decoded once" 1 \
  "$(attempts "$T/killed" frames videos/long.mp4/0)"
for port in clip.span frame.stats clip.summary; do
  expect_eq "export $port after kill -9 and resume" \
    "$("$ORCH" export "$T/clean" $port --all)" "$("$ORCH" export "$T/killed" $port --all)"
done
echo "video: ok"
