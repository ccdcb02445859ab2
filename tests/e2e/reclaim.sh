#!/usr/bin/env bash
# Reclamation of intermediate payloads (DESIGN §2 `output`, engine/prop/reclaim.c): the
# payload of a port that is not `output` is freed once every grain that reads it has
# sealed; at the end of a job the payload store holds the outputs' payloads only; items
# stay 'present' and export says "reclaimed"; a filter's pass-through and a broadcast keep
# their payload while their own readers have not sealed; kill -9 + resume ends as a clean
# run; the inputs of Failed and Suppressed grains are kept so that `orch retry` works.
source "$(dirname "$0")/lib.sh"

mkdir "$T/docs"
for d in 0 1 2 3 4 5; do
  for l in $(seq 1 40); do
    if [ $((l % 7)) = 0 ]; then echo; else echo "doc $d line $l"; fi
  done > "$T/docs/d$d.txt"
done

# stored JOB: the number of payloads in the job's store and the sum of their lengths, read
# from the store itself (mdb_stat, when installed, gives the entry count too).
stored() {
  local n
  n=$("$ORCH" sql "$1" "SELECT count(*) || ' ' || coalesce(sum(length(payload(payload_id))), 0)
       FROM (SELECT DISTINCT payload_id FROM item WHERE payload_id IS NOT NULL)
       WHERE payload(payload_id) IS NOT NULL" | tail -n 1)
  if command -v mdb_stat > /dev/null; then
    local entries
    entries=$(mdb_stat -s data "$1/payloads" | awk '/Entries:/ { print $2 }')
    expect_eq "$1: mdb_stat agrees with the payloads items name (no orphan left)" \
      "${n%% *}" "$entries"
  fi
  echo "$n"
}
# outputs JOB: the same count and bytes for the items of `output` ports.
outputs() {
  "$ORCH" sql "$1" "SELECT count(*) || ' ' || coalesce(sum(length(payload(payload_id))), 0)
       FROM (SELECT DISTINCT i.payload_id FROM item AS i JOIN port AS p ON p.id = i.port_id
       WHERE p.is_output = 1 AND i.payload_id IS NOT NULL)" | tail -n 1
}

# ---- 1. read → split → upper → concat, only the reduce's port is `output` ----------------
cat > "$T/chain.orch" <<'PIPE'
pipeline chain
domain doc
domain line in doc
source doc.path = files("docs/*.txt")
call read = read_file()
call cut = split_lines() with batch=4
call up = upper() with batch=8
call join = concat(sep="|")
doc.text = read(doc.path)
line.raw = expand cut(doc.text)
line.up = up(line.raw)
doc.out = reduce join(line.up)
output doc.out
PIPE
run_job "$T/chain.orch" "$T/chain"
job_done "$T/chain"
expect_eq "chain: 6 outputs" 6 "$("$ORCH" export "$T/chain" doc.out | wc -l)"
expect_eq "chain: the outputs are right" \
  "$(for d in 0 1 2 3 4 5; do tr a-z A-Z < "$T/docs/d$d.txt" | paste -sd'|'; done)" \
  "$("$ORCH" export "$T/chain" doc.out | python3 -c '
import json, sys
for l in sys.stdin: print(json.loads(l)["value"])')"
out=$(outputs "$T/chain")
expect_eq "chain: the store holds the outputs' payloads only" "$out" "$(stored "$T/chain")"
expect_eq "chain: every other payload is recorded as reclaimed" \
  "$(q "$T/chain" "SELECT count(DISTINCT i.payload_id) FROM item AS i JOIN port AS p ON p.id = i.port_id WHERE p.is_output = 0 AND i.payload_id IS NOT NULL")" \
  "$(q "$T/chain" "SELECT count(*) FROM reclaimed")"
# export --all of an intermediate port: still present, said to be reclaimed, no value.
"$ORCH" export "$T/chain" line.up --all > "$T/up.jsonl" || fail "export of a reclaimed port"
expect_eq "chain: line.up exported whole" 240 "$(wc -l < "$T/up.jsonl")"
expect_eq "chain: every line.up item is present and reclaimed, without a value" 240 \
  "$(python3 -c '
import json, sys
print(sum(1 for l in open(sys.argv[1]) for o in [json.loads(l)]
          if o["state"] == "present" and o.get("reclaimed") is True and "value" not in o))' "$T/up.jsonl")"
# A pipeline without any `output` statement keeps every payload (nothing said what to keep).
grep -v '^output' "$T/chain.orch" > "$T/keep.orch"
run_job "$T/keep.orch" "$T/keep"
expect_eq "no output statement: nothing reclaimed" 0 "$(q "$T/keep" "SELECT count(*) FROM reclaimed")"
expect_eq "no output statement: line.up readable" "DOC 0 LINE 1" \
  "$("$ORCH" export "$T/keep" line.up | head -n 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["value"])')"

# ---- 2. a filter's pass-through and a broadcast keep their payload for their readers ------
# line.up's payload is named by line.kept too (the filter passes it on); doc.text's by
# line.doc in every line (the broadcast). The readers of line.kept and line.doc (nap) are
# slow: while any of them has not sealed, the payload it reads must still be stored, even
# though the grains reading the original items (keep, cut) sealed long before.
cat > "$T/pass.orch" <<'PIPE'
pipeline pass
domain doc
domain line in doc
source doc.path = files("docs/*.txt")
call read = read_file()
call cut = split_lines() with batch=8
call up = upper() with batch=8
call keep = nonempty() with batch=8
call nap = sleep(ms=15) with batch=1
call nap2 = sleep(ms=5) with batch=1
call join = concat(sep="|")
call tally = count()
doc.text = read(doc.path)
line.raw = expand cut(doc.text)
line.up = up(line.raw)
line.kept = filter keep(line.up)
line.slow = nap(line.kept)
line.doc = broadcast doc.text
line.seen = nap2(line.doc)
doc.out = reduce join(line.slow)
doc.n = reduce tally(line.seen)
output doc.out
output doc.n
PIPE
"$ORCH" run "$T/pass.orch" --job "$T/pass" --progress none 2> "$T/pass.log" &
driver=$!
# Reclamation happens while the job runs, not only at its end.
reclaimed_some() { [ "$(qlive "$T/pass" "SELECT count(*) FROM reclaimed" 2> /dev/null || echo 0)" -gt 0 ]; }
wait_until 60 "a payload reclaimed while $T/pass runs" reclaimed_some
# Never reclaimed while a reader of one of its items has not sealed (checked live, then
# again at the end): the filter's readers (nap) and the broadcast's (nap2).
early() {
  qlive "$1" "SELECT count(*) FROM item AS i JOIN port AS p ON p.id = i.port_id
              JOIN reclaimed AS r ON r.payload_id = i.payload_id
              JOIN grain AS g ON g.entity_id = i.entity_id
              JOIN call AS c ON c.id = g.call_id
              WHERE ((p.qualified = 'line.kept' AND c.name = 'nap') OR
                     (p.qualified = 'line.doc' AND c.name = 'nap2'))
              AND g.phase <> 'sealed'"
}
expect_eq "pass: nothing reclaimed under a reader that has not sealed (live)" 0 "$(early "$T/pass")"
wait "$driver" || { cat "$T/pass.log" >&2; fail "orch run pass.orch exited $?"; }
job_done "$T/pass"
expect_eq "pass: no failure (every reader found its payload)" 0 \
  "$(q "$T/pass" "SELECT count(*) FROM failure")"
expect_eq "pass: outputs" \
  "$(for d in 0 1 2 3 4 5; do grep -v '^$' "$T/docs/d$d.txt" | tr a-z A-Z | paste -sd'|'; done)" \
  "$("$ORCH" export "$T/pass" doc.out | python3 -c '
import json, sys
for l in sys.stdin: print(json.loads(l)["value"])')"
expect_eq "pass: counts" "$(printf '40\n%.0s' 1 2 3 4 5 6)" \
  "$("$ORCH" export "$T/pass" doc.n | python3 -c '
import json, sys
for l in sys.stdin: print(json.loads(l)["value"])')"
expect_eq "pass: the store holds the outputs' payloads only" "$(outputs "$T/pass")" "$(stored "$T/pass")"
# The broadcast's family is freed at the end (its readers appear as expansions seal).
expect_eq "pass: doc.text reclaimed, seen as reclaimed through the broadcast" \
  "240 240" "$("$ORCH" export "$T/pass" line.doc --all | python3 -c '
import json, sys
os = [json.loads(l) for l in sys.stdin]
print(len(os), sum(1 for o in os if o.get("reclaimed")))')"

# ---- 3. kill -9 of the driver mid-run, then resume: as a clean run ------------------------
cp "$T/pass.orch" "$T/crash.orch"
run_job "$T/crash.orch" "$T/clean"
"$ORCH" run "$T/crash.orch" --job "$T/crash" --progress none 2> "$T/crash.log" &
driver=$!
reclaimed_many() { [ "$(qlive "$T/crash" "SELECT count(*) FROM reclaimed" 2> /dev/null || echo 0)" -gt 20 ]; }
wait_until 60 "payloads reclaimed while $T/crash runs" reclaimed_many
kill -9 "$driver"
if wait "$driver" 2> /dev/null; then fail "the killed driver exited 0"; fi
none_left 10 -f "$T/crash"
expect_eq "crash: the job was cut short" 1 \
  "$(q "$T/crash" "SELECT count(*) > 0 FROM grain WHERE phase <> 'sealed'")"
"$ORCH" resume "$T/crash" --progress none 2> "$T/resume.log" ||
  { cat "$T/resume.log" >&2; fail "orch resume exited $?"; }
job_done "$T/crash"
for port in doc.out doc.n; do
  expect_eq "crash: $port as in the clean run" "$("$ORCH" export "$T/clean" $port --all)" \
    "$("$ORCH" export "$T/crash" $port --all)"
done
expect_eq "crash: line.up as in the clean run (all reclaimed)" \
  "$("$ORCH" export "$T/clean" line.up --all)" "$("$ORCH" export "$T/crash" line.up --all)"
expect_eq "crash: the store holds the outputs' payloads only" "$(outputs "$T/crash")" \
  "$(stored "$T/crash")"

# ---- 4. retry: the inputs of Failed and Suppressed grains are kept -------------------------
cat > "$T/flag_udf.py" <<'PY'
import os, sys
sys.path.insert(0, os.environ["ORCH_PY"])
import orch_udf

class Flag:
    def __init__(self, args):
        pass
    def run(self, batch):
        up = os.path.exists(os.environ["FLAG_FILE"])
        return [orch_udf.RecordFailure("flag is up") if up and r.value == b"DOC 3 LINE 5"
                else r.value.lower() for r in batch]

if __name__ == "__main__":
    sys.exit(orch_udf.serve(Flag))
PY
export ORCH_PY="$SRCDIR/udfs/python" FLAG_FILE="$T/flag"
touch "$FLAG_FILE"
cat > "$T/retry.orch" <<PIPE
pipeline retry
domain doc
domain line in doc
source doc.path = files("docs/*.txt")
call read = read_file()
call cut = split_lines() with batch=8
call up = upper() with batch=8
call low = exec("python3 $T/flag_udf.py") with batch=8
call join = concat(sep="|")
doc.text = read(doc.path)
line.raw = expand cut(doc.text)
line.up = up(line.raw)
line.low = low(line.up)
doc.out = reduce join(line.low)
output doc.out
PIPE
run_job "$T/retry.orch" "$T/retry"
expect_eq "retry: one record failed" 1 "$(q "$T/retry" "SELECT count(*) FROM grain WHERE outcome = 'failed'")"
# The failed grain's input, and the inputs of doc 3's suppressed reduce, are still stored.
present_up() {
  "$ORCH" export "$1" "$2" | python3 -c '
import json, sys
print(sum(1 for l in sys.stdin if "value" in json.loads(l)))'
}
expect_eq "retry: the failed grain's input is kept" 1 "$(present_up "$T/retry" line.up)"
expect_eq "retry: the suppressed reduce's inputs are kept" 39 "$(present_up "$T/retry" line.low)"
rm "$FLAG_FILE"
"$ORCH" retry "$T/retry" --progress none 2> "$T/retry.log" || { cat "$T/retry.log" >&2; fail "retry"; }
job_done "$T/retry"
expect_eq "retry: outputs after the retry" \
  "$(for d in 0 1 2 3 4 5; do paste -sd'|' "$T/docs/d$d.txt"; done)" \
  "$("$ORCH" export "$T/retry" doc.out | python3 -c '
import json, sys
for l in sys.stdin: print(json.loads(l)["value"])')"
expect_eq "retry: then the store holds the outputs' payloads only" "$(outputs "$T/retry")" \
  "$(stored "$T/retry")"
