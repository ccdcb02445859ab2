#!/usr/bin/env bash
# scale.sh — 1,000 root entities with 0..50 children each (line i holds i*37 % 51 tokens;
# the empty lines have zero children): split → upper (2 workers, batches of 32) → reduce
# concat and count. Every root's export must equal what Python computes from the file.
# Run three times: with the default admission budget; with a tight one (--max-unsealed 300)
# that makes admission wait on the drain; and with ready queues that keep 5 entries in
# memory (ORCH_QUEUE_WINDOW, engine/queue/queue.h), smaller than most expansions, so that
# children wait in the spill file and come back from it. In every run each call's batches
# took their grains in ready_seq order (FIFO, DESIGN §5), spill or not.
source "$(dirname "$0")/lib.sh"

python3 - "$T/roots.txt" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(1000):
        f.write(",".join("t%d_%d" % (i, k) for k in range(i * 37 % 51)) + "\n")
EOF
cat > "$T/scale.orch" <<'EOF'
pipeline scale
domain doc
domain tok in doc
source doc.line = lines("roots.txt")
call cut  = split(sep=",")      with batch=16
call up   = upper()             with workers=2, batch=32
call join = concat(sep=",")     with batch=16
call n    = count()             with batch=16
tok.raw    = expand cut(doc.line)
tok.up     = up(tok.raw)
doc.joined = reduce join(tok.up)
doc.n      = reduce n(tok.up)
output doc.joined
output doc.n
EOF

check() { # JOB
  local J=$1
  job_done "$J"
  paste -d'\t' <("$ORCH" export "$J" doc.joined --all) <("$ORCH" export "$J" doc.n --all) |
    python3 -c '
import json, sys
lines = open(sys.argv[1]).read().split("\n")[:-1]
rows = [l.rstrip("\n").split("\t") for l in sys.stdin]
assert len(rows) == 1000, "%d rows" % len(rows)
keys, taken = [], set()
for v in lines:  # DESIGN §9: a repeated line gets #2, #3, ...
    k, n = v, 1
    while k in taken:
        n += 1; k = "%s#%d" % (v, n)
    taken.add(k); keys.append(k)
for i, (a, b) in enumerate(rows):
    a, b = json.loads(a), json.loads(b)
    toks = lines[i].split(",") if lines[i] else []
    want = {"key": keys[i], "state": "present", "value": ",".join(t.upper() for t in toks)}
    assert a == want, "root %d: joined %r, want %r" % (i, a, want)
    want = {"key": keys[i], "state": "present", "value": str(len(toks))}
    assert b == want, "root %d: count %r, want %r" % (i, b, want)
' "$T/roots.txt" || fail "$J: exports differ from the expected values"
  expect_eq "$J: grains" "1000|25008|1000|1000" \
    "$(q "$J" "SELECT group_concat(n, '|') FROM (SELECT count(*) AS n FROM grain
               WHERE outcome = 'ok' GROUP BY call_id ORDER BY call_id)")"
  expect_eq "$J: zero-children expansions" 20 \
    "$(q "$J" "SELECT count(*) FROM expansion WHERE state = 'succeeded' AND nchildren = 0")"
  # Batching was exercised: up ran batches of more than one grain.
  [ "$(q "$J" "SELECT max(n) FROM (SELECT count(*) AS n FROM attempt a JOIN grain g
               ON g.id = a.grain_id JOIN call c ON c.id = g.call_id AND c.name = 'up'
               GROUP BY a.batch)")" -gt 1 ] || fail "$J: up never ran a batch of several grains"
  expect_eq "$J: batches out of ready_seq order" 0 \
    "$(q "$J" "WITH b AS (SELECT g.call_id AS c, a.batch AS id, min(g.ready_seq) AS lo,
                                  max(g.ready_seq) AS hi
                           FROM attempt a JOIN grain g ON g.id = a.grain_id
                           GROUP BY g.call_id, a.batch)
               SELECT count(*) FROM b AS x JOIN b AS y
                 ON y.c = x.c AND y.id > x.id AND y.lo < x.hi")"
}

run_job "$T/scale.orch" "$T/job"
check "$T/job"
run_job "$T/scale.orch" "$T/tight" --max-unsealed 300
check "$T/tight"
ORCH_QUEUE_WINDOW=5 run_job "$T/scale.orch" "$T/spill" --max-unsealed 50
check "$T/spill"
echo "scale: ok"
