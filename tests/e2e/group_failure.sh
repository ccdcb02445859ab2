#!/usr/bin/env bash
# group_failure.sh — GroupFailure (DESIGN §4): a barrier on (call, parent).
#   grp  (workers=1, batch=1): the third child of doc 0 fails with kind=group while its
#        later siblings wait in the queue: they are sealed Suppressed and never run (no
#        attempt row), the two before it stay present, the barrier row names the failed
#        grain, the parent's reduce is Suppressed; doc 1 completes normally. The sibling
#        right after it may have been queued behind it on its worker (pool.h: a worker
#        holds a second batch): in flight then, it ran, and its report was not committed.
#   grp4 (batch=4): the failing child shares its batch with siblings: the one answered
#        before it is committed, the one after it (in flight) is not — sealed Suppressed
#        with attempt outcome `suppressed` — and the rest never run, but for the next
#        batch of four, which may have been queued behind it: run, and not committed.
#   root: on a root entity a GroupFailure acts as a RecordFailure: no barrier.
source "$(dirname "$0")/lib.sh"

printf '%s\n' 'a b GRP c d e f g h i j k' 'p q r' > "$T/in.txt"
cat > "$T/grp.orch" <<'EOF'
pipeline grp
domain doc
domain w in doc
source doc.line = lines("in.txt")
call cut   = split(sep=" ")
call grp   = fail_if(contains="GRP", kind=group)  with workers=1, batch=1
call grp4  = fail_if(contains="GRP", kind=group)  with workers=1, batch=4
call root  = fail_if(contains="GRP", kind=group)
call join  = concat(sep=" ")
call join4 = concat(sep=" ")
w.raw  = expand cut(doc.line)
w.x    = grp(w.raw)
w.y    = grp4(w.raw)
doc.r  = root(doc.line)
doc.j  = reduce join(w.x)
doc.j4 = reduce join4(w.y)
EOF
J=$T/job
# --batch-fixed: every dispatch is its call's batch, the batches this test names.
run_job "$T/grp.orch" "$J" --batch-fixed
job_done "$J"
D='a b GRP c d e f g h i j k'

# per child of doc 0: key|state|attempts of CALL
children() {
  local port=$1 call=$2
  states "$J" "$port" | grep "^$D/" | cut -d'|' -f1,2 | while IFS='|' read -r key state; do
    echo "${key#"$D"/}|$state|$(attempts "$J" "$call" "$key")"
  done
}

# ordinal, and the attempts of the grain of CALL on child ORDINAL of doc 0: 0, or 1 when it
# was in flight (queued behind the failed one on its worker) with its report not committed.
queued_behind() {
  local call=$1 ord=$2 n
  n=$(attempts "$J" "$call" "$D/$ord")
  if [ "$n" = 1 ]; then
    expect_eq "$call: child $ord, in flight under the barrier, was not committed" \
      "suppressed|sealed|suppressed" \
      "$(q "$J" "SELECT a.outcome, g.phase, g.outcome FROM attempt a JOIN grain g ON g.id = a.grain_id
                 JOIN call c ON c.id = g.call_id AND c.name = '$call'
                 JOIN entity_key k ON k.entity_id = g.entity_id WHERE k.key = '$D/$ord'")"
  elif [ "$n" != 0 ]; then
    fail "$call: child $ord has $n attempts"
  fi
  echo "$n"
}

# ---- batch=1: siblings queued behind the failure never run --------------------------------
q3=$(queued_behind grp 3)
expect_eq "grp: children of doc 0 (ordinal|state|attempts)" "0|present|1
1|present|1
2|failed|1
3|suppressed|$q3
4|suppressed|0
5|suppressed|0
6|suppressed|0
7|suppressed|0
8|suppressed|0
9|suppressed|0
10|suppressed|0
11|suppressed|0" "$(children w.x grp)"
expect_eq "grp: the failure" "$D/2|group|fail_if: input contains \"GRP\"" \
  "$(q "$J" "SELECT key, kind, message FROM failures WHERE call = 'grp'")"
expect_eq "grp: its attempt says group" "group" \
  "$(q "$J" "SELECT a.outcome FROM attempt a JOIN grain g ON g.id = a.grain_id
             JOIN call c ON c.id = g.call_id AND c.name = 'grp'
             JOIN entity_key k ON k.entity_id = g.entity_id WHERE k.key = '$D/2'")"
expect_eq "grp: the barrier row names the call, the parent and the failed grain" "1" \
  "$(q "$J" "SELECT count(*) FROM suppression s JOIN call c ON c.id = s.call_id AND c.name = 'grp'
             JOIN entity_key p ON p.entity_id = s.parent_id AND p.key = '$D'
             JOIN grain g ON g.id = s.grain_id AND g.call_id = c.id
             JOIN entity_key k ON k.entity_id = g.entity_id AND k.key = '$D/2'")"
expect_eq "grp: the reduce of doc 0 is suppressed; doc 1 is whole" "$D|suppressed|
p q r|present|p q r" "$(states "$J" doc.j)"
expect_eq "grp: doc 1's children all ran and are present" "p q r/0|present|p
p q r/1|present|q
p q r/2|present|r" "$(states "$J" w.x | grep '^p q r/')"

# ---- batch=4: a sibling in flight in the same batch is not committed ---------------------
expect_eq "grp4: the first batch held children 0-3 of doc 0" "0 1 2 3" \
  "$(q "$J" "SELECT group_concat(e.ordinal, ' ') FROM (SELECT e.ordinal FROM attempt a
             JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id AND c.name = 'grp4'
             JOIN entity e ON e.id = g.entity_id
             WHERE a.batch = (SELECT min(a2.batch) FROM attempt a2 JOIN grain g2 ON g2.id = a2.grain_id
                              WHERE g2.call_id = c.id) ORDER BY e.ordinal) AS e")"
q4=$(queued_behind grp4 4)
expect_eq "grp4: children of doc 0 (ordinal|state|attempts)" "0|present|1
1|present|1
2|failed|1
3|suppressed|1
4|suppressed|$q4
5|suppressed|$q4
6|suppressed|$q4
7|suppressed|$q4
8|suppressed|0
9|suppressed|0
10|suppressed|0
11|suppressed|0" "$(children w.y grp4)"
expect_eq "grp4: the in-flight sibling's answer was not committed" "suppressed|sealed|suppressed" \
  "$(q "$J" "SELECT a.outcome, g.phase, g.outcome FROM attempt a JOIN grain g ON g.id = a.grain_id
             JOIN call c ON c.id = g.call_id AND c.name = 'grp4'
             JOIN entity_key k ON k.entity_id = g.entity_id WHERE k.key = '$D/3'")"
expect_eq "grp4: doc 1 is whole" "$D|suppressed|
p q r|present|p q r" "$(states "$J" doc.j4)"

# ---- a GroupFailure on a root is a RecordFailure -----------------------------------------
expect_eq "root: item states" "$D|failed|fail_if: input contains \"GRP\"
p q r|present|p q r" "$(states "$J" doc.r)"
expect_eq "root: no barrier" 0 \
  "$(q "$J" "SELECT count(*) FROM suppression s JOIN call c ON c.id = s.call_id AND c.name = 'root'")"
expect_eq "exactly two barriers in all" 2 "$(q "$J" "SELECT count(*) FROM suppression")"

# ---- an elastic batch mixing parents: the barrier stops at its parent --------------------
# cut expands both docs in one batch, so grp's first batch holds all 5 children of both.
printf '%s\n' 'a GRP b' 'c d' > "$T/mix.txt"
cat > "$T/mix.orch" <<'EOF'
pipeline mix
domain doc
domain w in doc
source doc.line = lines("mix.txt")
call cut = split(sep=" ")                          with batch=8
call grp = fail_if(contains="GRP", kind=group)  with batch=8
w.raw = expand cut(doc.line)
w.x   = grp(w.raw)
EOF
M=$T/mix
run_job "$T/mix.orch" "$M" --batch-fixed
job_done "$M"
expect_eq "mix: one batch, both parents" "5|2" \
  "$(q "$M" "SELECT count(*), count(DISTINCT e.parent_id) FROM attempt a JOIN grain g
             ON g.id = a.grain_id JOIN call c ON c.id = g.call_id AND c.name = 'grp'
             JOIN entity e ON e.id = g.entity_id")"
expect_eq "mix: items and attempt outcomes" "a GRP b/0|present|a|ok
a GRP b/1|failed|fail_if: input contains \"GRP\"|group
a GRP b/2|suppressed||suppressed
c d/0|present|c|ok
c d/1|present|d|ok" "$(states "$M" w.x | while IFS= read -r l; do
  echo "$l|$(q "$M" "SELECT a.outcome FROM attempt a JOIN grain g ON g.id = a.grain_id
                     JOIN call c ON c.id = g.call_id AND c.name = 'grp'
                     JOIN entity_key k ON k.entity_id = g.entity_id
                     WHERE k.key = '${l%%|*}'")"; done)"

# ---- a sibling in flight under the barrier, then its worker or the driver dies ----------
# doc 0 runs at once and shows grp's worker pids; one of them, P, is stopped (SIGSTOP)
# while idle, before doc 1's children exist (doc 1 sleeps 1500 ms first). P is then handed
# one of doc 1's first children, and another queued behind it (pool.h: a worker holds a
# second batch while every worker of its call is busy): two of the first four, as the two
# workers take them, the second one perhaps only started then. It holds them; the
# other worker reaches GRP, raising the barrier. Then either P is killed (mode worker), or
# the driver is (mode driver; the job is resumed). Either way the siblings P held must not
# run again under the barrier nor be charged: they are sealed Suppressed (with retries=0 a
# charged crash would seal one Failed, exhausted; a resume would run them again). The one
# P ran ends as a crash (mode worker), the one queued behind it as interrupted: it never
# started.
printf '%s\n' 'w1 w2' '1500 s1 s2 s3 GRP s5 s6' > "$T/bar.txt"
cat > "$T/bar.orch" <<'EOF'
pipeline bar
domain doc
domain w in doc
source doc.line = lines("bar.txt")
call slow = sleep()
call cut  = split(sep=" ")
call grp  = fail_if(contains="GRP", kind=group)  with workers=2, batch=1, retries=0
doc.slow = slow(doc.line)
w.raw    = expand cut(doc.slow)
w.x      = grp(w.raw)
EOF
D1='1500 s1 s2 s3 GRP s5 s6'

barred_sibling() { # MODE: worker | driver
  local mode=$1 B=$T/bar-$1 P="" pid victim
  "$ORCH" run "$T/bar.orch" --job "$B" --progress none --cpus 4 --batch-fixed 2> "$T/bar.log" &
  pid=$!
  doc0_done() {
    [ -f "$B/state.db" ] || return 1
    P=$(qlive "$B" "SELECT CASE WHEN count(*) = 2 AND count(a.outcome) = 2 THEN max(a.worker_pid) END
                    FROM attempt a JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id
                    JOIN entity_key k ON k.entity_id = g.entity_id
                    WHERE c.name = 'grp' AND k.key LIKE 'w1 w2/%'" 2> /dev/null) && [ -n "$P" ]
  }
  wait_until 20 "grp done on doc 0" doc0_done
  kill -STOP "$P"
  # Precondition, read after the stop: doc 1's children do not exist yet. On a machine
  # too slow for that (1.5 s), the scenario cannot be set up: skip it rather than guess.
  if [ "$(qlive "$B" "SELECT count(*) FROM entity_key WHERE key LIKE '$D1/%'")" != 0 ]; then
    kill -CONT "$P"
    echo "note: the barred-sibling scenario ($mode) was skipped (doc 1 expanded too early)"
    wait "$pid" || fail "orch run (bar) exited $?"
    return 0
  fi
  barrier_and_p_busy() {
    [ "$(qlive "$B" "SELECT (SELECT count(*) FROM suppression) || ',' || (SELECT count(*)
          FROM attempt WHERE worker_pid = $P AND outcome IS NULL)")" = "1,2" ]
  }
  wait_until 20 "the barrier, with P holding two siblings" barrier_and_p_busy
  # The one it runs, then the one queued behind it (attempt rows in dispatch order).
  victims=$(qlive "$B" "SELECT k.key FROM attempt a JOIN grain g ON g.id = a.grain_id
                        JOIN entity_key k ON k.entity_id = g.entity_id
                        WHERE a.worker_pid = $P AND a.outcome IS NULL ORDER BY a.id")
  local outcome=crash queued=interrupted
  if [ "$mode" = worker ]; then
    kill -KILL "$P"
    wait "$pid" || { cat "$T/bar.log" >&2; fail "orch run (bar) exited $?"; }
  else
    kill -KILL "$pid"
    wait "$pid" 2> /dev/null || true
    kill -KILL "$P" 2> /dev/null || true # dies with the driver (PDEATHSIG); to be sure
    "$ORCH" resume "$B" --progress none 2> "$T/bar.log" ||
      { cat "$T/bar.log" >&2; fail "orch resume (bar) exited $?"; }
    outcome=interrupted
  fi
  job_done "$B"
  local first=1 victim end
  while IFS= read -r victim; do
    end=$outcome
    [ $first = 1 ] || end=$queued
    first=0
    case $victim in
    "$D1/0" | "$D1/1" | "$D1/2" | "$D1/3") ;;
    *) fail "$mode: P held $victim, not one of the first four children" ;;
    esac
    expect_eq "$mode: the sibling $victim in flight is sealed Suppressed, ran once, not retried" \
      "sealed|suppressed|1|$end" \
      "$(grain "$B" grp "$victim" | cut -d'|' -f1,2)|$(attempts "$B" grp "$victim")|$(q "$B" \
        "SELECT group_concat(a.outcome) FROM attempt a JOIN grain g ON g.id = a.grain_id
         JOIN call c ON c.id = g.call_id AND c.name = 'grp'
         JOIN entity_key k ON k.entity_id = g.entity_id WHERE k.key = '$victim'")"
    expect_eq "$mode: its item" "$victim|suppressed|" "$(states "$B" w.x | grep "^$victim|")"
    expect_eq "$mode: no failure charged to it" "" \
      "$(q "$B" "SELECT kind FROM failures WHERE key = '$victim'")"
  done <<< "$victims"
  # s5 may have been queued behind GRP on the other worker: then it ran, uncommitted.
  local s5
  s5=$(attempts "$B" grp "$D1/5")
  case $s5 in
  0) ;;
  1) expect_eq "$mode: s5, queued behind GRP, was not committed" "sealed|suppressed" \
       "$(grain "$B" grp "$D1/5" | cut -d'|' -f1,2)" ;;
  *) fail "$mode: s5 has $s5 attempts" ;;
  esac
  expect_eq "$mode: the siblings queued behind GRP never ran" "0" "$(attempts "$B" grp "$D1/6")"
  expect_eq "$mode: doc 0 is whole" "w1 w2/0|present|w1
w1 w2/1|present|w2" "$(states "$B" w.x | grep '^w1 w2/')"
}
barred_sibling worker
barred_sibling driver
echo "group_failure: ok"
