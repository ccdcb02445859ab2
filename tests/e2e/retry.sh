#!/usr/bin/env bash
# orch retry: after the cause of failures is fixed, the Failed grains, what was Suppressed
# because of them, and their GroupFailure barriers are re-opened and run again; the rest
# of the job is untouched and the earlier attempts stay in the history.
source "$(dirname "$0")/lib.sh"

# 1. A RecordFailure (a missing file) and what it suppressed downstream.
mkdir "$T/docs"
printf 'one\ntwo\n' > "$T/docs/a.txt"
printf '%s\n' "$T/docs/a.txt" "$T/docs/b.txt" > "$T/list.txt"
cat > "$T/r.orch" <<'PIPE'
pipeline r
domain doc
domain line in doc
source doc.path = lines("list.txt")
call read = read_file()
call cut = split_lines()
call up = upper()
call join = concat(sep="|")
doc.text = read(doc.path)
line.raw = expand cut(doc.text)
line.up = up(line.raw)
doc.out = reduce join(line.up)
output doc.out
PIPE
run_job "$T/r.orch" "$T/job"
expect_eq "b's read failed, its output suppressed" "present suppressed" \
  "$(q "$T/job" "SELECT group_concat(state, ' ') FROM (SELECT i.state FROM item AS i JOIN port AS p ON p.id = i.port_id JOIN entity AS e ON e.id = i.entity_id WHERE p.qualified = 'doc.out' ORDER BY e.ordinal)")"
expect_eq "doc.text of b failed" failed "$(q "$T/job" "SELECT i.state FROM item AS i JOIN port AS p ON p.id = i.port_id JOIN entity AS e ON e.id = i.entity_id WHERE p.qualified = 'doc.text' AND e.ordinal = 1")"
before=$(q "$T/job" "SELECT count(*) FROM attempt")
printf 'three\nfour\nfive\n' > "$T/docs/b.txt"
"$ORCH" retry "$T/job" --progress none 2> "$T/retry.log" || { cat "$T/retry.log" >&2; fail "retry"; }
grep -q "grains re-opened" "$T/retry.log" || fail "no re-open count: $(cat "$T/retry.log")"
summary_ok "$T/job" "$T/retry.log" # items taken back by the re-open are not counted twice
actual=$("$ORCH" export "$T/job" doc.out | python3 -c '
import json, sys
for l in sys.stdin: print(json.loads(l)["value"])')
expect_eq "after retry" "$(printf 'ONE|TWO\nTHREE|FOUR|FIVE')" "$actual"
# History kept: the failed attempt and its failure row are still there; a's grains did
# not run again.
expect_eq "failure kept" 1 "$(q "$T/job" "SELECT count(*) FROM failure WHERE kind = 'record'")"
expect_eq "read of a ran once" 1 "$(q "$T/job" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id JOIN entity AS e ON e.id = g.entity_id WHERE g.call_id = 0 AND e.ordinal = 0 AND e.parent_id IS NULL")"
expect_eq "read of b ran twice" 2 "$(q "$T/job" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id JOIN entity AS e ON e.id = g.entity_id WHERE g.call_id = 0 AND e.ordinal = 1 AND e.parent_id IS NULL")"
[ "$(q "$T/job" "SELECT count(*) FROM attempt")" -gt "$before" ] || fail "nothing ran"
expect_eq "all sealed" 0 "$(q "$T/job" "SELECT count(*) FROM grain WHERE phase <> 'sealed'")"
expect_eq "nothing failed now" 0 "$(q "$T/job" "SELECT count(*) FROM grain WHERE outcome IN ('failed', 'suppressed')")"

# 2. A GroupFailure: the barrier and the siblings it sealed are re-opened too. The UDF
# answers x2 with a GroupFailure while the flag file ($FLAG_FILE, inherited by the
# workers) exists.
cat > "$T/flag_udf.py" <<'PY'
import os, sys
sys.path.insert(0, os.environ["ORCH_PY"])
import orch_udf

class Flag:
    def __init__(self, args):
        pass
    def run(self, batch):
        up = os.path.exists(os.environ["FLAG_FILE"])
        return [orch_udf.GroupFailure("flag is up") if up and r.value == b"x2"
                else r.value.upper() for r in batch]

if __name__ == "__main__":
    sys.exit(orch_udf.serve(Flag))
PY
export ORCH_PY="$SRCDIR/udfs/python" FLAG_FILE="$T/flag"
printf 'x1,x2,x3,x4,x5\ny1,y2\n' > "$T/rows.txt"
touch "$FLAG_FILE"
cat > "$T/g.orch" <<PIPE
pipeline g
domain row
domain cell in row
source row.v = lines("rows.txt")
call cut = split(sep=",")
call up = exec("python3 $T/flag_udf.py") with workers=1, batch=1
call join = concat(sep=" ")
cell.v = expand cut(row.v)
cell.up = up(cell.v)
row.out = reduce join(cell.up)
output row.out
PIPE
run_job "$T/g.orch" "$T/gjob"
expect_eq "barrier installed" 1 "$(q "$T/gjob" "SELECT count(*) FROM suppression")"
expect_eq "row x suppressed, row y present" "suppressed present" \
  "$(q "$T/gjob" "SELECT group_concat(state, ' ') FROM (SELECT i.state FROM item AS i JOIN port AS p ON p.id = i.port_id JOIN entity AS e ON e.id = i.entity_id WHERE p.qualified = 'row.out' ORDER BY e.ordinal)")"
rm "$FLAG_FILE"
"$ORCH" retry "$T/gjob" --call up --progress none 2> "$T/gretry.log" ||
  { cat "$T/gretry.log" >&2; fail "retry --call up"; }
summary_ok "$T/gjob" "$T/gretry.log"
actual=$("$ORCH" export "$T/gjob" row.out | python3 -c '
import json, sys
for l in sys.stdin: print(json.loads(l)["value"])')
expect_eq "after retry of the group failure" "$(printf 'X1 X2 X3 X4 X5\nY1 Y2')" "$actual"
expect_eq "barrier gone" 0 "$(q "$T/gjob" "SELECT count(*) FROM suppression")"
expect_eq "group failure kept in history" 1 "$(q "$T/gjob" "SELECT count(*) FROM failures WHERE kind = 'group'")"
# Unknown call: a clear message.
if "$ORCH" retry "$T/gjob" --call nope --progress none 2> "$T/err"; then fail "unknown call accepted"; fi
grep -q "no call 'nope'" "$T/err" || fail "message: $(cat "$T/err")"
# 3. A reduce over zero children as the very first batch of a driver (here: retried
# alone after its first attempt failed): a batch whose only record has an empty input
# list. The reduce fails while the flag file is up.
cat > "$T/empty_reduce.py" <<'PY'
import os, sys
sys.path.insert(0, os.environ["ORCH_PY"])
import orch_udf

class Count:
    def __init__(self, args):
        pass
    def run(self, batch):
        up = os.path.exists(os.environ["FLAG_FILE"])
        return [orch_udf.RecordFailure("flag is up") if up else str(len(r.inputs[0])).encode()
                for r in batch]

if __name__ == "__main__":
    sys.exit(orch_udf.serve(Count))
PY
printf '\n' > "$T/one_empty.txt"
cat > "$T/e.orch" <<PIPE
pipeline e
domain row
domain cell in row
source row.v = lines("one_empty.txt")
call cut = split(sep=",")
call n = exec("python3 $T/empty_reduce.py")
cell.v = expand cut(row.v)
row.n = reduce n(cell.v)
output row.n
PIPE
touch "$FLAG_FILE"
run_job "$T/e.orch" "$T/ejob"
expect_eq "empty reduce failed" failed "$(q "$T/ejob" "SELECT state FROM item JOIN port ON port.id = item.port_id WHERE qualified = 'row.n'")"
rm "$FLAG_FILE"
"$ORCH" retry "$T/ejob" --progress none 2> "$T/eretry.log" ||
  { cat "$T/eretry.log" >&2; fail "retry of the empty reduce"; }
expect_eq "empty reduce after retry" '{"key": "", "state": "present", "value": "0"}' \
  "$("$ORCH" export "$T/ejob" row.n)"

# A retry with nothing fixed gives what the run gave: a GroupFailure's siblings that were
# queued behind it were sealed Suppressed; re-opened, they must not be queued ahead of the
# failed grain (and so run, and come out Present, before it fails again).
printf '%s\n' "a bad c d" > "$T/o.txt"
cat > "$T/o.orch" <<'PIPE'
pipeline o
domain row
domain w in row
source row.v = lines("o.txt")
call cut = split(sep=" ")
call chk = fail_if(contains="bad", kind=group) with workers=1, batch=1
w.raw = expand cut(row.v)
w.ok  = chk(w.raw)
PIPE
run_job "$T/o.orch" "$T/ojob"
states "$T/ojob" w.ok > "$T/o.run"
"$ORCH" retry "$T/ojob" --progress none 2> "$T/oretry.log" ||
  { cat "$T/oretry.log" >&2; fail "retry of the group failure"; }
summary_ok "$T/ojob" "$T/oretry.log"
states "$T/ojob" w.ok > "$T/o.retry"
expect_eq "group failure: a retry with nothing fixed gives the run's result" \
  "$(cat "$T/o.run")" "$(cat "$T/o.retry")"
echo "retry: ok"
