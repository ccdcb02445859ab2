#!/usr/bin/env bash
# failures.sh — each failure kind of DESIGN §4 with the fail_if / flaky built-ins, asserted
# on items, the failure table and the attempt table:
#   record   item Failed, one failure row (record), downstream Suppressed, never retried;
#   attempt  (run returns an error) retries=3: 4 attempts, generations 0..3, then sealed
#            Failed, kind exhausted;
#   flaky    fail_attempts=2, retries=2: ok on attempt 3, two error rows, value present;
#   crash    retries=1: 2 attempts (crash), each on another worker process, exhausted;
#   hang     timeout=300ms, retries=1: 2 attempts (timeout), the worker killed and
#            replaced, exhausted;
#   poison   one crashing (and, in another call, one hanging) record in a batch of 8: the
#            batch is split, the 7 others succeed uncharged (no failure row), the
#            poisonous one exhausts its own retries.
# (GroupFailure has its own test: group_failure.sh.)
source "$(dirname "$0")/lib.sh"

printf '%s\n' ok1 ATT ok2 > "$T/in.txt"
cat > "$T/kinds.orch" <<'EOF'
pipeline kinds
domain doc
source doc.line = lines("in.txt")
call rec  = fail_if(contains="ATT", kind=record)
call rec2 = identity()
call att  = fail_if(contains="ATT", kind=attempt)  with retries=3
call att2 = identity()
call fl   = flaky(fail_attempts=2)                  with retries=2
call cr   = fail_if(contains="ATT", kind=crash)    with retries=1
call hg   = fail_if(contains="ATT", kind=hang)     with retries=1, timeout=300ms
doc.rec  = rec(doc.line)
doc.rec2 = rec2(doc.rec)
doc.att  = att(doc.line)
doc.att2 = att2(doc.att)
doc.fl   = fl(doc.line)
doc.cr   = cr(doc.line)
doc.hg   = hg(doc.line)
EOF
J=$T/job
# --batch-fixed: every dispatch is its call's batch, the batches this test names.
run_job "$T/kinds.orch" "$J" --batch-fixed
job_done "$J"

# attempts_of CALL KEY: generation:outcome of each attempt, in order.
attempts_of() {
  q "$J" "SELECT group_concat(a.generation || ':' || a.outcome, ' ') FROM (SELECT a.* FROM attempt a
          JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id
          JOIN entity_key k ON k.entity_id = g.entity_id
          WHERE c.name = '$1' AND k.key = '$2' ORDER BY a.id) AS a"
}
# ran_of CALL KEY: as attempts_of, numbered in order from 0, without the attempts of a batch
# that waited behind one its worker was lost running (pool.h: a worker holds a second
# batch): they never started, end interrupted, saying so, and are not charged.
ran_of() {
  q "$J" "SELECT group_concat((row_number - 1) || ':' || outcome, ' ') FROM (SELECT
            row_number() OVER (ORDER BY a.id) AS row_number, a.outcome FROM attempt a
          JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id
          JOIN entity_key k ON k.entity_id = g.entity_id
          WHERE c.name = '$1' AND k.key = '$2'
          AND NOT (a.outcome = 'interrupted' AND a.message LIKE 'not started: worker %'))"
}
# failures_of CALL KEY: generation:kind of each failure row, in order.
failures_of() {
  q "$J" "SELECT coalesce(group_concat(generation || ':' || kind, ' '), '') FROM
          (SELECT * FROM failures WHERE call = '$1' AND key = '$2' ORDER BY failure_id)"
}

# Records that pass are untouched by their neighbours' failures.
for c in rec rec2 att att2 cr hg; do
  expect_eq "doc.$c of the good records" "ok1|present|ok1
ok2|present|ok2" "$(states "$J" doc.$c | grep '^ok')"
done

# ---- record ------------------------------------------------------------------------------
expect_eq "record: item" 'ATT|failed|fail_if: input contains "ATT"' "$(states "$J" doc.rec | grep ^ATT)"
expect_eq "record: one failure row, no retry" "0:record" "$(failures_of rec ATT)"
expect_eq "record: one attempt" "0:record" "$(attempts_of rec ATT)"
expect_eq "record: downstream suppressed" "ATT|suppressed|" "$(states "$J" doc.rec2 | grep ^ATT)"
expect_eq "record: downstream never ran" 0 "$(attempts "$J" rec2 ATT)"

# ---- attempt failure, retries=3 ----------------------------------------------------------
expect_eq "attempt: 4 attempts, one per generation" "0:error 1:error 2:error 3:error" \
  "$(attempts_of att ATT)"
expect_eq "attempt: error rows, then exhausted" "0:error 1:error 2:error 3:error 3:exhausted" \
  "$(failures_of att ATT)"
expect_eq "attempt: sealed failed" "sealed|failed|3" "$(grain "$J" att ATT)"
expect_eq "attempt: item failed (exhausted)" \
  'ATT|failed|gave up after 4 attempts; last: fail_if: input contains "ATT" (kind=attempt)' \
  "$(states "$J" doc.att | grep ^ATT)"
expect_eq "attempt: downstream suppressed, never ran" "ATT|suppressed|,0" \
  "$(states "$J" doc.att2 | grep ^ATT),$(attempts "$J" att2 ATT)"

# ---- flaky: fails twice, then succeeds ---------------------------------------------------
for k in ok1 ATT ok2; do
  expect_eq "flaky $k: attempts" "0:error 1:error 2:ok" "$(attempts_of fl $k)"
  expect_eq "flaky $k: two error rows, nothing else" "0:error 1:error" "$(failures_of fl $k)"
done
expect_eq "flaky: every value present" "ok1|present|ok1
ATT|present|ATT
ok2|present|ok2" "$(states "$J" doc.fl)"

# ---- crash, retries=1 --------------------------------------------------------------------
expect_eq "crash: attempts" "0:crash 1:crash" "$(attempts_of cr ATT)"
expect_eq "crash: failure rows" "0:crash 1:crash 1:exhausted" "$(failures_of cr ATT)"
expect_eq "crash: each attempt on its own worker process (replaced)" 2 \
  "$(q "$J" "SELECT count(DISTINCT a.worker_pid) FROM attempt a JOIN grain g ON g.id = a.grain_id
             JOIN call c ON c.id = g.call_id WHERE c.name = 'cr' AND a.outcome = 'crash'")"
grep -q 'killed by signal 6' <<< "$(states "$J" doc.cr | grep ^ATT)" ||
  fail "crash: the item's error does not say how the worker died: $(states "$J" doc.cr)"

# ---- hang, timeout=300ms, retries=1 ------------------------------------------------------
expect_eq "hang: attempts" "0:timeout 1:timeout" "$(attempts_of hg ATT)"
expect_eq "hang: failure rows" "0:timeout 1:timeout 1:exhausted" "$(failures_of hg ATT)"
expect_eq "hang: the killed workers were replaced" 2 \
  "$(q "$J" "SELECT count(DISTINCT a.worker_pid) FROM attempt a JOIN grain g ON g.id = a.grain_id
             JOIN call c ON c.id = g.call_id WHERE c.name = 'hg' AND a.outcome = 'timeout'")"
for p in $(q "$J" "SELECT DISTINCT a.worker_pid FROM attempt a JOIN grain g ON g.id = a.grain_id
                   JOIN call c ON c.id = g.call_id WHERE c.name = 'hg' AND a.outcome = 'timeout'"); do
  if kill -0 "$p" 2> /dev/null && grep -q __worker "/proc/$p/cmdline" 2> /dev/null; then
    fail "hang: worker $p still runs after its timeout"
  fi
done
expect_eq "hang: item" "ATT|failed|gave up after 2 attempts; last: batch ran past its timeout of 300ms" \
  "$(states "$J" doc.hg | grep ^ATT)"

# ---- one poisonous record in a batch of 8 ------------------------------------------------
for i in 1 2 3 4 5 6 7 8; do
  if [ $i = 5 ]; then echo "rec$i POISON"; else echo "rec$i"; fi
done > "$T/batch.txt"
cat > "$T/poison.orch" <<'EOF'
pipeline poison
domain doc
source doc.line = lines("batch.txt")
call cr = fail_if(contains="POISON", kind=crash) with batch=8, retries=2
call hb = fail_if(contains="POISON", kind=hang)  with batch=8, retries=0, timeout=300ms
doc.out  = cr(doc.line)
doc.hout = hb(doc.line)
EOF
P=$T/poison
# --batch-fixed: every dispatch is its call's batch, the batches this test names.
run_job "$T/poison.orch" "$P" --batch-fixed
job_done "$P"
# The 8 roots are admitted before the worker says hello, so the first batch holds all 8.
for c in cr:crash hb:timeout; do
  expect_eq "poison ${c%:*}: the first batch held all 8 grains and failed" "8|${c#*:}" \
    "$(q "$P" "SELECT count(*), group_concat(DISTINCT a.outcome) FROM attempt a
               JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id
               WHERE c.name = '${c%:*}' AND a.batch = (SELECT min(a2.batch) FROM attempt a2
               JOIN grain g2 ON g2.id = a2.grain_id WHERE g2.call_id = c.id)")"
  expect_eq "poison ${c%:*}: every later batch holds one grain" 1 \
    "$(q "$P" "SELECT max(n) FROM (SELECT count(*) AS n FROM attempt a JOIN grain g
               ON g.id = a.grain_id JOIN call c ON c.id = g.call_id AND c.name = '${c%:*}'
               GROUP BY a.batch ORDER BY a.batch LIMIT -1 OFFSET 1)")"
done
J=$P
for i in 1 2 3 4 6 7 8; do
  expect_eq "poison: rec$i" "0:crash 1:ok" "$(ran_of cr rec$i)"
  expect_eq "poison: rec$i not charged" "" "$(failures_of cr rec$i)"
  expect_eq "poison hang: rec$i" "0:timeout 1:ok" "$(ran_of hb rec$i)"
  expect_eq "poison hang: rec$i not charged" "" "$(failures_of hb rec$i)"
done
expect_eq "poison hang: the poisonous one, retries=0: one charged timeout, exhausted" \
  "0:timeout 1:timeout|1:timeout 1:exhausted" \
  "$(attempts_of hb 'rec5 POISON')|$(failures_of hb 'rec5 POISON')"
expect_eq "poison: the poisonous one, charged for its own 3 crashes only" \
  "0:crash 1:crash 2:crash 3:crash" "$(attempts_of cr 'rec5 POISON')"
expect_eq "poison: its failure rows" "1:crash 2:crash 3:crash 3:exhausted" \
  "$(failures_of cr 'rec5 POISON')"
expect_eq "poison: items" "rec1|present|rec1
rec2|present|rec2
rec3|present|rec3
rec4|present|rec4
rec5 POISON|failed
rec6|present|rec6
rec7|present|rec7
rec8|present|rec8" "$(states "$P" doc.out | sed 's/^\(rec5 POISON|failed\)|.*/\1/')"
echo "failures: ok"
