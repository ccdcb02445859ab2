#!/usr/bin/env bash
# kill_worker.sh — a worker killed with SIGKILL in the middle of a batch (DESIGN §4, §6):
# the job, run in the background, is watched until an attempt is open; its worker is
# killed. Then: the killed attempt (and its batch-mate) end as `crash`, a batch queued behind
# it on that worker ends as `interrupted` (it never started), the grain runs again
# with generation+1 and succeeds, the split batch charges nobody (no failure row), and the
# job's exports equal those of an uninterrupted run of the same pipeline; `orch failures`
# and `orch status` show the crash.
source "$(dirname "$0")/lib.sh"

printf '%s\n' 'alpha beta' 'gamma' 'delta epsilon zeta' > "$T/in.txt"
cat > "$T/nap.orch" <<'EOF'
pipeline nap
domain doc
domain w in doc
source doc.line = lines("in.txt")
call cut  = split(sep=" ")
call nap  = sleep(ms=600)   with workers=2, batch=2
call up   = upper()
call join = concat(sep="+")
w.raw = expand cut(doc.line)
w.nap = nap(w.raw)
w.up  = up(w.nap)
doc.j = reduce join(w.up)
output doc.j
output w.up
EOF

# --batch-fixed: every dispatch is its call's batch, the batches this test names.
run_job "$T/nap.orch" "$T/clean" --batch-fixed
job_done "$T/clean"

J=$T/killed
"$ORCH" run "$T/nap.orch" --job "$J" --progress none --batch-fixed 2> "$T/run.log" &
pid=$!
victim=""
open_attempt() {
  [ -f "$J/state.db" ] || return 1
  victim=$(qlive "$J" "SELECT a.id || ' ' || a.worker_pid FROM attempt a
                       JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id
                       WHERE c.name = 'nap' AND a.outcome IS NULL ORDER BY a.id LIMIT 1" \
           2> /dev/null) && [ -n "$victim" ]
}
wait_until 20 "an open attempt of nap" open_attempt
read -r attempt_id worker_pid <<< "$victim"
kill -9 "$worker_pid"
wait "$pid" || { cat "$T/run.log" >&2; fail "orch run exited $? after a worker was killed"; }
job_done "$J"

expect_eq "the killed attempt ended as a crash" "crash" \
  "$(q "$J" "SELECT outcome FROM attempt WHERE id = $attempt_id")"
read -r grain_id gen batch <<< "$(q "$J" "SELECT grain_id, generation, batch FROM attempt
                                         WHERE id = $attempt_id" | tr '|' ' ')"
expect_eq "its batch held two grains, both crashed with the worker" "2|crash|$worker_pid" \
  "$(q "$J" "SELECT count(*), group_concat(DISTINCT outcome), group_concat(DISTINCT worker_pid)
             FROM attempt WHERE batch = $batch")"
expect_eq "the grain ran again with generation+1 and succeeded" "$((gen + 1))|ok" \
  "$(q "$J" "SELECT generation, outcome FROM attempt WHERE grain_id = $grain_id AND id > $attempt_id")"
expect_eq "the grain is sealed ok at generation+1" "sealed|ok|$((gen + 1))" \
  "$(q "$J" "SELECT phase, outcome, generation FROM grain WHERE id = $grain_id")"
expect_eq "a split batch charges nobody" 0 "$(q "$J" "SELECT count(*) FROM failure")"
expect_eq "no other worker was harmed" 0 \
  "$(q "$J" "SELECT count(*) FROM attempt WHERE outcome <> 'ok' AND worker_pid <> $worker_pid")"
# The batch queued behind the killed one on its worker, if it had one (pool.h), never
# started: its attempts end as interrupted, saying so, and charge nobody.
expect_eq "a batch queued behind it did not start, and failed nothing" 0 \
  "$(q "$J" "SELECT count(*) FROM attempt WHERE outcome <> 'ok' AND batch <> $batch
             AND NOT (outcome = 'interrupted' AND message LIKE 'not started: worker $worker_pid was lost while it ran the batch ahead of this one (%')")"
expect_eq "a later attempt ran on another process" 1 \
  "$(q "$J" "SELECT count(*) > 0 FROM attempt a JOIN grain g ON g.id = a.grain_id
             JOIN call c ON c.id = g.call_id WHERE c.name = 'nap' AND a.worker_pid <> $worker_pid")"

# The crash shows where a user looks: `orch failures` lists the batch's two attempts,
# charged to no record, and `orch status` counts them as failed attempts, none final.
keys=$(q "$J" "SELECT group_concat(key, ', ') FROM (SELECT e.key FROM attempt AS a
               JOIN grain AS g ON g.id = a.grain_id JOIN entity AS e ON e.id = g.entity_id
               WHERE a.batch = $batch ORDER BY a.id)")
why=$(q "$J" "SELECT message FROM attempt WHERE id = $attempt_id")
expect_eq "orch failures shows the batch crash" "no failure charged to a record

failed attempts charged to no record (their batch of several failed whole and was split, or the job's stop ended them):
2  nap  crash  $why
    batch $batch: $keys
2 attempts in 1 group" "$("$ORCH" failures "$J")"
expect_eq "orch status counts it" \
  "failures:   0 final; 2 failed attempts (crash 2); see \`orch failures $J\`" \
  "$("$ORCH" status "$J" | grep '^failures:')"

for port in doc.j w.up; do
  expect_eq "export $port equals the uninterrupted run's" "$("$ORCH" export "$T/clean" $port --all)" \
    "$("$ORCH" export "$J" $port --all)"
done
expect_eq "doc.j" "alpha beta|present|ALPHA+BETA
gamma|present|GAMMA
delta epsilon zeta|present|DELTA+EPSILON+ZETA" "$(states "$J" doc.j)"
echo "kill_worker: ok"
