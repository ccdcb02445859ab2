#!/usr/bin/env bash
# autobatch.sh — the runtime sizes every dispatch (DESIGN §5, engine/driver/sizing.h), as
# the attempts view shows it (batch_size):
#   * a chain of identities with no options starts at one grain per batch and, once it has
#     measured that its grains take microseconds, dispatches many per batch;
#   * a slow call (sleep ms=300, about six times the target of 50 ms) stays at one grain
#     per batch;
#   * batch=N is the UDF's own limit, not the dispatch's: a dispatch of more grains runs
#     the UDF on at most N records at a time, and every grain's result is right;
#   * --batch-fixed (the ablation) makes every dispatch the call's batch.
source "$(dirname "$0")/lib.sh"

seq 1 3000 > "$T/n.txt"
cat > "$T/chain.orch" <<'EOF2'
pipeline chain
domain r
source r.v = lines("n.txt")
call a = identity()
call b = identity() with batch=auto
call c = upper() with batch=3
r.a = a(r.v)
r.b = b(r.a)
r.c = c(r.b)
output r.c
EOF2
run_job "$T/chain.orch" "$T/chain"
job_done "$T/chain"
for call in a b c; do
  first=$(q "$T/chain" "SELECT batch_size FROM attempts WHERE call = '$call'
                        ORDER BY attempt_id LIMIT 1")
  most=$(q "$T/chain" "SELECT max(batch_size) FROM attempts WHERE call = '$call'")
  expect_eq "$call: the first batch has one grain" 1 "$first"
  [ "$most" -gt 3 ] || fail "$call: no batch of more than 3 grains once measured (largest: $most)"
  echo "$call: first batch 1 grain, largest $most"
done
expect_eq "batch=3 dispatches are run in parts; every grain right" 3000 \
  "$("$ORCH" export "$T/chain" r.c | grep -c '"value": *"[0-9]*"')"
expect_eq "the values" "$(seq 1 3000 | sort)" \
  "$("$ORCH" export "$T/chain" r.c | sed 's/.*"value": *"\([0-9]*\)".*/\1/' | sort)"
expect_eq "no attempt failed" 0 "$(q "$T/chain" "SELECT count(*) FROM attempt WHERE outcome != 'ok'")"

# ---- a slow call stays at one grain per batch ---------------------------------------------
seq 1 6 > "$T/six.txt"
cat > "$T/slow.orch" <<'EOF2'
pipeline slow
domain r
source r.v = lines("six.txt")
call nap = sleep(ms=300)
r.z = nap(r.v)
output r.z
EOF2
run_job "$T/slow.orch" "$T/slow"
job_done "$T/slow"
expect_eq "sleep(ms=300): six batches of one grain" "6|1" \
  "$(q "$T/slow" "SELECT count(DISTINCT batch), max(batch_size) FROM attempts WHERE call = 'nap'")"

# ---- the ablation: fixed sizes ------------------------------------------------------------
sed 's/n\.txt/m.txt/' "$T/chain.orch" > "$T/fixed.orch"
seq 1 300 > "$T/m.txt"
run_job "$T/fixed.orch" "$T/fixed" --batch-fixed
job_done "$T/fixed"
# (c takes what its queue holds at each dispatch, up to three: how many that is depends on
# the pace of a and b.)
expect_eq "--batch-fixed: a and b one grain a batch, c at most three" "a|1
b|1
c|1" "$(q "$T/fixed" "SELECT call, max(batch_size) <= CASE call WHEN 'c' THEN 3 ELSE 1 END
                      FROM attempts GROUP BY call ORDER BY call")"
echo "autobatch: ok"
