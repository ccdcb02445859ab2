#!/usr/bin/env bash
# group_failure.sh — GroupFailure (DESIGN §4): a barrier on (call, parent).
#   grp  (workers=1, batch=1): the third child of doc 0 fails with kind=group while its
#        later siblings wait in the queue: they are sealed Suppressed and never run (no
#        attempt row), the two before it stay present, the barrier row names the failed
#        grain, the parent's reduce is Suppressed; doc 1 completes normally.
#   grp4 (batch=4): the failing child shares its batch with siblings: the one answered
#        before it is committed, the one after it (in flight) is not — sealed Suppressed
#        with attempt outcome `suppressed` — and the rest never run.
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
run_job "$T/grp.orch" "$J"
job_done "$J"
D='a b GRP c d e f g h i j k'

# per child of doc 0: key|state|attempts of CALL
children() {
  local port=$1 call=$2
  states "$J" "$port" | grep "^$D/" | cut -d'|' -f1,2 | while IFS='|' read -r key state; do
    echo "${key#"$D"/}|$state|$(attempts "$J" "$call" "$key")"
  done
}

# ---- batch=1: siblings queued behind the failure never run --------------------------------
expect_eq "grp: children of doc 0 (ordinal|state|attempts)" "0|present|1
1|present|1
2|failed|1
3|suppressed|0
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
expect_eq "grp4: children of doc 0 (ordinal|state|attempts)" "0|present|1
1|present|1
2|failed|1
3|suppressed|1
4|suppressed|0
5|suppressed|0
6|suppressed|0
7|suppressed|0
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
echo "group_failure: ok"
