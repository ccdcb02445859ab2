#!/usr/bin/env bash
# batch_bytes cuts a batch before the grain whose input would pass the limit; a grain
# bigger than the limit still runs, alone.
source "$(dirname "$0")/lib.sh"

printf 'aaaa\nbbbb\ncccc\ndddddddddddddddddddd\ne\nf\n' > "$T/in.txt"
cat > "$T/bb.orch" <<'PIPE'
pipeline bb
domain r
source r.v = lines("in.txt")
call a = identity() with batch=100, batch_bytes=10
r.a = a(r.v)
output r.a
PIPE
# --batch-fixed: every dispatch is its call's batch, the batches this test names.
run_job "$T/bb.orch" "$T/job" --max-unsealed 100 --batch-fixed
# Batches in dispatch order, each as the list of its inputs' lengths.
actual=$(q "$T/job" "SELECT group_concat(length(e.key), '+') FROM attempt AS a
  JOIN grain AS g ON g.id = a.grain_id JOIN entity AS e ON e.id = g.entity_id
  GROUP BY a.batch ORDER BY a.batch")
expect_eq "batches cut at 10 bytes" "$(printf '4+4\n4\n20\n1+1')" "$actual"
expect_eq "outputs" 6 "$("$ORCH" export "$T/job" r.a | wc -l)"
echo "batch_bytes: ok"
