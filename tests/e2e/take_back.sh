#!/usr/bin/env bash
# take_back.sh — a batch queued behind a slow one is taken back for an idle worker
# (DESIGN §5; engine/worker/pool.h, orch_pool_take_back): a call with two workers gets one
# slow grain (3 s) and then 30 fast ones. The worker that runs the slow grain is sent a
# second batch, queued behind it; once the other worker has emptied the queue it is idle,
# and the queued batch, not started, is taken back and run by it. So no fast grain waits
# for the slow one: each is done before it. The batch taken back ends `interrupted`, "not
# started", uncharged (no attempt failure), and its grains run again under a new
# generation; the export is the input.
source "$(dirname "$0")/lib.sh"

{
  echo "3000 slow"
  for i in $(seq -w 1 30); do echo "0 fast $i"; done
} > "$T/in.txt"
cat > "$T/p.orch" << 'EOF'
pipeline take_back
domain r
source r.v = lines("in.txt")
call nap = sleep()   with workers=2
r.out = nap(r.v)
output r.out
EOF
run_job "$T/p.orch" "$T/j"
job_done "$T/j"
expect_eq "export" "$(cat "$T/in.txt")" \
  "$("$ORCH" export "$T/j" r.out | python3 -c '
import json, sys
for l in sys.stdin:
    print(json.loads(l)["value"])')"

slow_end=$(q "$T/j" "SELECT a.ended_at FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
                      JOIN entity AS e ON e.id = g.entity_id
                      WHERE a.outcome = 'ok' AND e.ordinal = 0")
[ -n "$slow_end" ] || fail "no ok attempt of the slow grain"
late=$(q "$T/j" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
                 JOIN entity AS e ON e.id = g.entity_id
                 WHERE a.outcome = 'ok' AND e.ordinal > 0 AND a.ended_at >= $slow_end")
expect_eq "fast grains done only after the slow one" 0 "$late"

taken=$(q "$T/j" "SELECT count(*) FROM attempt WHERE outcome = 'interrupted'
                  AND message GLOB 'not started: taken back from worker [0-9]*, still running the batch ahead of it, for an idle worker'")
[ "$taken" -ge 1 ] || fail "no batch was taken back: $(q "$T/j" "SELECT outcome, message FROM attempt WHERE outcome <> 'ok'")"
expect_eq "attempts that are neither ok nor taken back" 0 \
  "$(q "$T/j" "SELECT count(*) FROM attempt WHERE outcome <> 'ok' AND outcome <> 'interrupted'")"
expect_eq "failures" 0 "$(q "$T/j" "SELECT count(*) FROM failure")"
# Each grain taken back ran once more, ok, under a newer generation.
expect_eq "grains taken back that did not run again under a newer generation" 0 \
  "$(q "$T/j" "SELECT count(*) FROM attempt AS t WHERE t.outcome = 'interrupted'
               AND NOT EXISTS (SELECT 1 FROM attempt AS o WHERE o.grain_id = t.grain_id
                               AND o.outcome = 'ok' AND o.generation > t.generation)")"
grep -q ", 0 attempt failures," "$T/j.log" || fail "the summary counts attempt failures: $(cat "$T/j.log")"
echo "take_back: ok"
