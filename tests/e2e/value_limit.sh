#!/usr/bin/env bash
# value_limit.sh — an output longer than the payload store can hold is a RecordFailure of
# its record, not a fault that stops the job (docs/sql.md "Limits"; engine/worker/
# worker.c too_big_check). LMDB's limit is 4 GiB - 1 bytes per value; ORCH_PAYLOAD_MAX_VALUE
# lowers it for this test, so that no 4 GiB value is needed:
#   1. a map whose output is over the limit: that record is Failed with a message naming
#      the size and the limit, what depends on it is Suppressed, every other record is
#      Present; the run exits 0 and the job is finished;
#   2. a reduce whose output is over the limit: the same, for the reduce's record;
#   3. a value of exactly the limit is stored;
#   4. resume changes nothing: the failure is final (no retry is charged against the store),
#      and `orch retry` with the limit raised completes the job as a run without the limit;
#   5. an expand with one child over the limit: that child fails alone (a failed child), its
#      siblings are stored, the reduce over them is Suppressed.
source "$(dirname "$0")/lib.sh"

LIMIT=1000
mkdir "$T/data"
head -c 10 /dev/zero | tr '\0' a > "$T/data/small.txt"
head -c 1000 /dev/zero | tr '\0' b > "$T/data/edge.txt"
head -c 5000 /dev/zero | tr '\0' c > "$T/data/big.txt"
# 300 lines of one byte: 600 bytes; joined by "----", 300 + 299 * 4 = 1496 bytes.
for i in $(seq 300); do echo d; done > "$T/data/lines.txt"
cat > "$T/limit.orch" <<'EOF'
pipeline limit
domain file
domain row in file
source file.path = files("data/*.txt")
call read = read_file()
call up   = upper()
call cut  = split(sep="\n")
call join = concat(sep="----")
file.text = read(file.path)
file.up   = up(file.text)
row.line  = expand cut(file.text)
file.all  = reduce join(row.line)
output file.up
output file.all
EOF
cd "$T"

ORCH_PAYLOAD_MAX_VALUE=$LIMIT "$ORCH" run limit.orch --job "$T/j" --progress none \
  > "$T/run.out" 2> "$T/run.err" || { rc=$?; cat "$T/run.err" >&2; fail "orch run exited $rc"; }
job_done "$T/j"

# state JOB PORT FILE: the item's state, and its value or error.
state() {
  "$ORCH" export "$1" "$2" --all | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if o["key"].endswith("/" + sys.argv[1]):
        print(o["state"], o.get("value", o.get("error", "")))' "$3"
}

# 1. The map's output over the limit.
expect_eq "big.txt: read is Failed, naming size and limit" \
  "failed output 1 is 5000 bytes, over the payload store's limit of $LIMIT bytes per value" \
  "$(state "$T/j" file.text big.txt)"
expect_eq "big.txt: up is Suppressed" "suppressed " "$(state "$T/j" file.up big.txt)"
expect_eq "small.txt: Present" "present AAAAAAAAAA" "$(state "$T/j" file.up small.txt)"
# 3. A value of exactly the limit.
expect_eq "edge.txt: 1000 bytes, Present" "present 1000" \
  "$("$ORCH" export "$T/j" file.up --all | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if o["key"].endswith("/edge.txt"): print(o["state"], len(o["value"]))')"
# 2. The reduce's output over the limit.
expect_eq "lines.txt: join is Failed, naming size and limit" \
  "failed output 1 is 1496 bytes, over the payload store's limit of $LIMIT bytes per value" \
  "$(state "$T/j" file.all lines.txt)"
expect_eq "small.txt: join Present" "present aaaaaaaaaa" "$(state "$T/j" file.all small.txt)"
expect_eq "failures: the two records, one attempt each" \
  "read|big.txt|1
join|lines.txt|1" \
  "$(q "$T/j" "SELECT c.name, replace(k.key, rtrim(k.key, replace(k.key, '/', '')), ''),
                      (SELECT count(*) FROM attempt a WHERE a.grain_id = g.id)
               FROM grain g JOIN call c ON c.id = g.call_id
               JOIN entity_key k ON k.entity_id = g.entity_id
               WHERE g.outcome = 'failed' ORDER BY c.id")"

# 4. Resume: nothing to do, still finished, exit 0; the facts are unchanged.
before=$("$ORCH" export "$T/j" file.all --all; "$ORCH" export "$T/j" file.up --all)
ORCH_PAYLOAD_MAX_VALUE=$LIMIT "$ORCH" resume "$T/j" --progress none > /dev/null 2> "$T/r.err" ||
  { rc=$?; cat "$T/r.err" >&2; fail "orch resume exited $rc"; }
job_done "$T/j"
expect_eq "resume changes nothing" "$before" \
  "$("$ORCH" export "$T/j" file.all --all; "$ORCH" export "$T/j" file.up --all)"

# ... and with the limit lifted, retry completes the job as a run without it would.
run_job limit.orch "$T/clean"
"$ORCH" retry "$T/j" --progress none > /dev/null 2> "$T/retry.err" ||
  { rc=$?; cat "$T/retry.err" >&2; fail "orch retry exited $rc"; }
job_done "$T/j"
for port in file.up file.all; do
  expect_eq "after retry, $port equals a run without the limit" \
    "$("$ORCH" export "$T/clean" $port --all)" "$("$ORCH" export "$T/j" $port --all)"
done
# 5. One child of an expansion over the limit fails alone. The children come from a small
# input (an exec() UDF makes them), so that nothing upstream is over the limit.
mkdir "$T/five"
cat > "$T/five/gen_udf.py" <<PY
import sys
sys.path.insert(0, "$SRCDIR/udfs/python")
import orch_udf
class Gen:
    def __init__(self, args):
        pass
    def run(self, batch):
        return [[r.value, b"x" * 2000, r.value.upper()] for r in batch]
sys.exit(orch_udf.serve(Gen))
PY
echo a > "$T/five/in.txt"
cat > "$T/five/five.orch" <<'PIPE'
pipeline five
domain file
domain row in file
source file.v = lines("in.txt")
call gen  = exec("python3 ./gen_udf.py")
call join = concat(sep="-")
row.piece = expand gen(file.v)
file.all  = reduce join(row.piece)
output file.all
PIPE
ORCH_PAYLOAD_MAX_VALUE=$LIMIT "$ORCH" run "$T/five/five.orch" --job "$T/five/j" \
  --progress none > /dev/null 2> "$T/five.err" ||
  { rc=$?; cat "$T/five.err" >&2; fail "orch run (5) exited $rc"; }
job_done "$T/five/j"
expect_eq "the big child fails alone, its siblings are stored" \
  "a/0|present|a
a/1|failed|output 1 is 2000 bytes, over the payload store's limit of $LIMIT bytes per value
a/2|present|A" \
  "$("$ORCH" export "$T/five/j" row.piece --all | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    print(o["key"], o["state"], o.get("value", o.get("error", "")), sep="|")')"
expect_eq "the failure row names the child; the expansion succeeded" "a/1|record|succeeded|3" \
  "$(q "$T/five/j" "SELECT f.key, f.kind, x.state, x.nchildren FROM failures f, expansion x")"
expect_eq "the reduce over the pieces is Suppressed" "a|suppressed|" "$(states "$T/five/j" file.all)"
echo ok
