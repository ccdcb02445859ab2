#!/usr/bin/env bash
# resume.sh — one driver per job, and what `orch resume` does after a driver stopped
# (DESIGN §4 interruption, §6 one driver per job, docs/operations.md "How a job runs",
# "Guarantees"):
#   1. a second `orch resume` (or `orch run`) on a live job is refused, exit 1, naming the
#      live driver's pid (resume), and the live job goes on to its end unharmed;
#   2. after kill -9 of the driver, its lock does not block `orch resume`, which completes;
#   3. a kill -9 while batches are in flight: their attempts become `interrupted`, the
#      grains run again at a higher generation (a report of the old generation could no
#      longer be accepted), and interruptions are not charged: grains of a call with
#      retries=0 interrupted twice still succeed;
#   4. SIGTERM: exit status 3, a message pointing to `orch resume`, no worker left behind;
#      resume completes.
# Every job's exports must equal those of an uninterrupted run.
# The background jobs are watched through state.db (qlive); nothing waits on a timer.
source "$(dirname "$0")/lib.sh"

printf '%s\n' 'alpha beta gamma' 'delta' 'epsilon zeta eta theta' 'iota kappa' > "$T/in.txt"
cat > "$T/slow.orch" <<'EOF'
pipeline slow
domain doc
domain w in doc
source doc.line = lines("in.txt")
call cut  = split(sep=" ")
call nap  = sleep(ms=400)     with workers=2, batch=2, retries=0
call up   = upper()           with retries=0
call join = concat(sep="+")
w.raw = expand cut(doc.line)
w.nap = nap(w.raw)
w.up  = up(w.nap)
doc.j = reduce join(w.up)
output doc.j
output w.up
EOF

run_job "$T/slow.orch" "$T/clean"
job_done "$T/clean"
expect_eq "clean doc.j" "alpha beta gamma|present|ALPHA+BETA+GAMMA
delta|present|DELTA
epsilon zeta eta theta|present|EPSILON+ZETA+ETA+THETA
iota kappa|present|IOTA+KAPPA" "$(states "$T/clean" doc.j)"

# same_exports JOB: the job's exports equal the uninterrupted run's.
same_exports() {
  for port in doc.j w.up w.nap; do
    expect_eq "$1: export $port equals the uninterrupted run's" \
      "$("$ORCH" export "$T/clean" $port --all)" "$("$ORCH" export "$1" $port --all)"
  done
}

# open_nap JOB [GEN]: true when an attempt of nap (at generation GEN, if given) is open;
# sets $open to "ATTEMPT_ID WORKER_PID GRAIN_ID" of the first.
open=""
open_nap() {
  [ -f "$1/state.db" ] || return 1
  open=$(qlive "$1" "SELECT a.id || ' ' || a.worker_pid || ' ' || a.grain_id FROM attempt a
                     JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id
                     WHERE c.name = 'nap' AND a.outcome IS NULL ${2:+AND a.generation = $2}
                     ORDER BY a.id LIMIT 1" 2> /dev/null) && [ -n "$open" ]
}

# ---- 1, 2: a second driver is refused; a dead driver's lock does not block ------------
J=$T/live
"$ORCH" run "$T/slow.orch" --job "$J" --progress none 2> "$T/live.log" &
driver=$!
wait_until 30 "an open attempt of nap in $J" open_nap "$J"
st=0
"$ORCH" resume "$J" --progress none 2> "$T/second.err" || st=$?
expect_eq "a second driver (resume) exits 1" 1 "$st"
grep -q "job is being run by another orch process (pid $driver)" "$T/second.err" ||
  fail "the refusal does not name the live driver's pid $driver: $(cat "$T/second.err")"
st=0
"$ORCH" run "$T/slow.orch" --job "$J" --progress none 2> "$T/second-run.err" || st=$?
expect_eq "a second driver (run) exits 1" 1 "$st"
grep -q "being run by another orch process (pid $driver)" "$T/second-run.err" ||
  fail "orch run on a live job does not name the live driver: $(cat "$T/second-run.err")"
open_nap "$J" || fail "the live job lost its attempt to the refused driver"
expect_eq "the refused driver left the lock to the live one" "$driver" "$(tr -d '\n' < "$J/lock")"

# Now kill -9 the live driver: its workers follow it, its lock goes with it.
read -r _ w1 _ <<< "$open"
kill -9 "$driver"
if wait "$driver" 2> /dev/null; then fail "the killed driver exited 0"; fi
wait_until 10 "the killed driver's worker $w1 to exit" gone "$w1"
expect_eq "the dead driver's pid is still in the lock file" "$driver" "$(tr -d '\n' < "$J/lock")"
"$ORCH" resume "$J" --progress none 2> "$T/resume.log" ||
  { cat "$T/resume.log" >&2; fail "orch resume after kill -9 of the driver exited $?"; }
job_done "$J"
same_exports "$J"

# ---- 3: interrupted twice, retries=0, still succeeds; old generations are dead --------
J=$T/twice
"$ORCH" run "$T/slow.orch" --job "$J" --progress none 2> "$T/twice.log" &
driver=$!
wait_until 30 "an open attempt of nap in $J" open_nap "$J" 0
read -r a1 w1 g1 <<< "$open"
batch1=$(q "$J" "SELECT batch FROM attempt WHERE id = $a1")
kill -9 "$driver"
wait "$driver" 2> /dev/null || true
wait_until 10 "the killed driver's worker $w1 to exit" gone "$w1"
expect_eq "after the kill, grain $g1 is still in flight at generation 0" "in_flight|0" \
  "$(q "$J" "SELECT phase, generation FROM grains WHERE grain_id = $g1")"
inflight1=$(q "$J" "SELECT group_concat(grain_id) FROM (SELECT grain_id FROM grains
                    WHERE phase = 'in_flight' ORDER BY grain_id)")
open1=$(q "$J" "SELECT group_concat(grain_id) FROM (SELECT grain_id FROM attempt
                WHERE outcome IS NULL ORDER BY grain_id)")
expect_eq "open attempts are those of the grains in flight" "$inflight1" "$open1"

"$ORCH" resume "$J" --progress none 2> "$T/twice-resume1.log" &
driver=$!
wait_until 30 "grain $g1 to run again at generation 1" open_nap "$J" 1
read -r _ w2 g2 <<< "$open"
kill -9 "$driver"
wait "$driver" 2> /dev/null || true
wait_until 10 "the killed driver's worker $w2 to exit" gone "$w2"
expect_eq "the first kill's attempts are interrupted, and only they" "$open1" \
  "$(q "$J" "SELECT group_concat(grain_id) FROM (SELECT grain_id FROM attempt
             WHERE outcome = 'interrupted' ORDER BY grain_id)")"
"$ORCH" resume "$J" --progress none 2> "$T/twice-resume2.log" ||
  { cat "$T/twice-resume2.log" >&2; fail "the second resume exited $?"; }
job_done "$J"
same_exports "$J"

expect_eq "every attempt of the first batch was interrupted at generation 0" \
  "interrupted|0" "$(q "$J" "SELECT group_concat(DISTINCT outcome), group_concat(DISTINCT
                             generation) FROM attempt WHERE batch = $batch1")"
expect_eq "no attempt of an old generation ended ok" 0 \
  "$(q "$J" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
             WHERE a.outcome = 'ok' AND a.generation <> g.generation")"
expect_eq "grain $g2 (retries=0), interrupted at generations 0 and 1, sealed ok at 2" \
  "sealed|ok|2" "$(q "$J" "SELECT phase, outcome, generation FROM grain WHERE id = $g2")"
expect_eq "grain $g2: its attempts" "0|interrupted
1|interrupted
2|ok" "$(q "$J" "SELECT generation, outcome FROM attempt WHERE grain_id = $g2 ORDER BY id")"
expect_eq "grain $g1: sealed ok at a generation above 0" "sealed|ok|1" \
  "$(q "$J" "SELECT phase, outcome, generation > 0 FROM grain WHERE id = $g1")"
expect_eq "every grain interrupted ran again at a higher generation and is sealed ok" 0 \
  "$(q "$J" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
             WHERE a.outcome = 'interrupted' AND
                   (g.generation <= a.generation OR g.outcome <> 'ok')")"
expect_eq "interruptions charge nothing: no failure" 0 "$(q "$J" "SELECT count(*) FROM failure")"
expect_eq "no attempt ended otherwise than ok or interrupted" 0 \
  "$(q "$J" "SELECT count(*) FROM attempt WHERE outcome NOT IN ('ok', 'interrupted')")"

# ---- 4: SIGTERM: exit 3, a hint to resume, no worker left, then resume completes ------
J=$T/term
"$ORCH" run "$T/slow.orch" --job "$J" --progress none 2> "$T/term.err" &
driver=$!
wait_until 30 "an open attempt of nap in $J" open_nap "$J"
workers=$(pgrep -P "$driver" | tr '\n' ' ')
[ -n "$workers" ] || fail "the driver $driver has no worker processes"
kill -TERM "$driver"
st=0
wait "$driver" || st=$?
expect_eq "SIGTERM: exit status 3" 3 "$st"
grep -q "orch resume $J" "$T/term.err" || fail "SIGTERM: no hint to resume: $(cat "$T/term.err")"
# shellcheck disable=SC2086 # one pid per word
wait_until 10 "the workers ($workers) to exit after SIGTERM" gone $workers
expect_eq "SIGTERM: the job is interrupted, not finished" interrupted "$(q "$J" "SELECT status FROM job")"
"$ORCH" resume "$J" --progress none 2> "$T/term-resume.log" ||
  { cat "$T/term-resume.log" >&2; fail "orch resume after SIGTERM exited $?"; }
job_done "$J"
same_exports "$J"
expect_eq "SIGTERM: what was in flight ran again uncharged" 0 "$(q "$J" "SELECT count(*) FROM failure")"
echo "resume: ok"
