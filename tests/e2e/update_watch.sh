#!/usr/bin/env bash
# orch update DIR --watch S (DESIGN §10): an ingestion service over one job. Files dropped
# into the directory while it runs are scanned within two intervals and appear in export;
# a file removed is retired; status, export and report work while it runs; SIGTERM while
# it waits stops it cleanly (exit 0, job finished, no process left).
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/in"
printf 'one\n' > "$T/in/a.txt"
cat > "$T/w.orch" <<'PIPE'
pipeline w
domain doc
source doc.path = files("in/*.txt")
call rd = read_file()
call up = upper()
doc.text = rd(doc.path)
doc.up = up(doc.text)
output doc.up
PIPE
J=$T/job
run_job "$T/w.orch" "$J"
"$ORCH" update "$J" --watch 0.5 --progress none 2> "$T/watch.log" &
pid=$!
keys() { "$ORCH" export "$J" doc.up | python3 -c '
import json, sys
print(" ".join(json.loads(l)["key"] + "=" + json.loads(l)["value"].strip() for l in sys.stdin))'; }
has() { [ "$(keys)" = "$1" ]; }
updates() { [ "$(qlive "$J" "SELECT count(*) FROM job_update WHERE $1")" -ge "$2" ]; }
quiet() { [ "$(qlive "$J" "SELECT count(*) FROM job_update WHERE finished_at IS NULL")" = 0 ]; }
# The first scan of the watch (an update with nothing new) is done: the service runs.
wait_until 20 "the first scan" updates "finished_at IS NOT NULL" 1
dropped=$(date +%s%3N)
printf 'two\n' > "$T/in/b.txt"
printf 'three\n' > "$T/in/c.txt"
wait_until 20 "b and c exported" has "in/a.txt=ONE in/b.txt=TWO in/c.txt=THREE"
# The scan that found them started within two intervals of the drop (the service scans
# every interval once the job is done; one scan may have just begun when the files came).
found=$(qlive "$J" "SELECT min(started_at) FROM job_update WHERE added > 0")
[ $((found - dropped)) -le 2000 ] || fail "found $((found - dropped)) ms after the drop, more than two intervals (1000 ms) and 1 s of slack"
# Read-only commands while it runs.
"$ORCH" status "$J" > "$T/status" || fail "status while watching"
grep -q "driver: *running (pid $pid)" "$T/status" || fail "status: $(cat "$T/status")"
"$ORCH" report "$J" -o "$T/r.html" 2> "$T/err" || fail "report while watching: $(cat "$T/err")"
rm "$T/in/a.txt"
wait_until 20 "a retired" has "in/b.txt=TWO in/c.txt=THREE"
expect_eq "a: retired as removed" "retired|removed" \
  "$(qlive "$J" "SELECT state, reason FROM revisions WHERE key = 'in/a.txt'")"
# Stop it. It waits 500 ms between scans of a few ms, so the signal almost always lands
# while it waits: a clean stop, exit 0, the job finished. When it lands in a scan, the
# update is interrupted like a run (exit 3) and `orch resume` finishes it.
wait_until 20 "a quiet scan" quiet
kill -TERM "$pid"
st=0
wait "$pid" || st=$?
none_left 5 -f "$T/job"
case $st in
  0) expect_eq "job finished" finished "$(q "$J" "SELECT status FROM job")" ;;
  3) expect_eq "job interrupted" interrupted "$(q "$J" "SELECT status FROM job")"
     "$ORCH" resume "$J" --progress none 2> "$T/err" || fail "resume: $(cat "$T/err")" ;;
  *) fail "SIGTERM: exit $st: $(cat "$T/watch.log")" ;;
esac
job_done "$J"
grep -q "orch: update: 2 new, 0 changed, 1 removed" "$T/watch.log" || fail "log: $(cat "$T/watch.log")"
# The same export as a fresh run over the directory as it is now.
run_job "$T/w.orch" "$T/fresh"
"$ORCH" export "$J" doc.up --all > "$T/a.out"
"$ORCH" export "$T/fresh" doc.up --all > "$T/b.out"
cmp -s "$T/a.out" "$T/b.out" || fail "export differs from a fresh run: $(diff "$T/a.out" "$T/b.out")"
if "$ORCH" update "$J" --watch 0 2> "$T/err"; then fail "--watch 0 accepted"; fi
grep -q "watch needs a positive number" "$T/err" || fail "$(cat "$T/err")"
echo "update_watch: ok"
