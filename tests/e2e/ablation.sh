#!/usr/bin/env bash
# ablation.sh — the benchmark-only run options, seen from the attempt table:
#   * --staged: on a chain of 3 calls over N roots, every attempt of call k+1 begins
#     (attempt id, and started_at) after every attempt of call k ended; the same chain run
#     plainly overlaps them (the check can fail);
#   * --order random: the same results as FIFO, byte for byte, while the order in which
#     a call's grains were dispatched is not the order they became ready (it is, exactly,
#     under FIFO);
#   * --staged with a --max-unsealed far below one stage, through expand, filter and
#     reduce: the run still finishes, with FIFO's results.
source "$(dirname "$0")/lib.sh"

N=200
seq 1 "$N" | sed 's/^/line /' > "$T/n.txt"
cat > "$T/chain.orch" <<'EOF'
pipeline chain
domain doc
source doc.line = lines("n.txt")
call a = sleep(ms=5) with batch=4
call b = upper()     with batch=4
call c = identity()  with batch=4
doc.a = a(doc.line)
doc.b = b(doc.a)
doc.c = c(doc.b)
output doc.c
EOF

# stage_gaps JOB: for (a, b) and (b, c), "1" when every attempt of the second call has a
# larger id than, and started no earlier than the end of, every attempt of the first.
stage_gaps() {
  q "$1" "WITH t AS (SELECT c.name AS call, a.id, a.started_at, a.ended_at FROM attempt a
                     JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id)
          SELECT (SELECT max(id) FROM t WHERE call = x.up) < (SELECT min(id) FROM t WHERE call = x.down)
             AND (SELECT max(ended_at) FROM t WHERE call = x.up) <=
                 (SELECT min(started_at) FROM t WHERE call = x.down)
          FROM (SELECT 'a' AS up, 'b' AS down UNION ALL SELECT 'b', 'c') AS x ORDER BY x.up"
}

# ---- FIFO, the reference -------------------------------------------------------------------
run_job "$T/chain.orch" "$T/fifo" --order fifo
job_done "$T/fifo"
expect_eq "fifo: one attempt per grain" "$((3 * N))" "$(q "$T/fifo" "SELECT count(*) FROM attempt")"
"$ORCH" export "$T/fifo" doc.c > "$T/fifo.out"
[ "$(wc -l < "$T/fifo.out")" -eq "$N" ] || fail "fifo: export has $(wc -l < "$T/fifo.out") lines"
# Without the barrier, b is served as soon as a's first batch is back (downstream first),
# while a still has ~1 s of batches queued: the stages overlap.
expect_eq "fifo: the stages overlap" "0 0" "$(echo $(stage_gaps "$T/fifo"))"

# dispatch JOB CALL: the root ordinals of CALL's grains in the order of their attempts.
dispatch() {
  q "$1" "SELECT e.ordinal FROM attempt a JOIN grain g ON g.id = a.grain_id
          JOIN call c ON c.id = g.call_id AND c.name = '$2'
          JOIN entity e ON e.id = g.entity_id ORDER BY a.id"
}
dispatch "$T/fifo" a > "$T/fifo.order"
seq 0 $((N - 1)) > "$T/ready.order"
cmp -s "$T/fifo.order" "$T/ready.order" || fail "fifo: a's grains not dispatched in ready order"

# ---- --staged ------------------------------------------------------------------------------
run_job "$T/chain.orch" "$T/staged" --staged
job_done "$T/staged"
expect_eq "staged: one attempt per grain" "$((3 * N))" "$(q "$T/staged" "SELECT count(*) FROM attempt")"
expect_eq "staged: each stage begins after the one before ended" "1 1" \
  "$(echo $(stage_gaps "$T/staged"))"
"$ORCH" export "$T/staged" doc.c | cmp -s - "$T/fifo.out" || fail "staged: export differs from fifo's"

# ---- --order random ------------------------------------------------------------------------
run_job "$T/chain.orch" "$T/random" --order random --seed 42
job_done "$T/random"
expect_eq "random: one attempt per grain" "$((3 * N))" "$(q "$T/random" "SELECT count(*) FROM attempt")"
"$ORCH" export "$T/random" doc.c | cmp -s - "$T/fifo.out" || fail "random: export differs from fifo's"
dispatch "$T/random" a > "$T/random.order"
# Every root once...
sort -n "$T/random.order" | cmp -s - "$T/ready.order" || fail "random: a did not run each root once"
# ...but not in ready order: every root is queued before a's first worker is up, so the
# first draw alone is the head with probability 1/N, the whole order sorted 1/N!.
if cmp -s "$T/random.order" "$T/ready.order"; then
  fail "random: a's grains were dispatched in ready order"
fi
echo "random: a's first dispatches (root ordinals): $(head -8 "$T/random.order" | tr '\n' ' ')"
# Without --seed, a seed is drawn and told.
"$ORCH" run "$T/chain.orch" --job "$T/random2" --progress none --order random 2> "$T/random2.log" ||
  { cat "$T/random2.log" >&2; fail "random without --seed exited $?"; }
grep -q -- '--order random --seed [0-9]' "$T/random2.log" || fail "random: no seed told"

# ---- --staged under a tiny admission budget, through expand, filter and reduce -----------
for i in $(seq 1 40); do echo "w$i x$i  y$i z$i"; done > "$T/w.txt" # the double space: an empty part
cat > "$T/tree.orch" <<'EOF'
pipeline tree
domain doc
domain w in doc
source doc.line = lines("w.txt")
call cut  = split(sep=" ")     with batch=4
call keep = nonempty()         with batch=4
call up   = upper()            with batch=4
call join = concat(sep=",")    with reserve=parent, batch=4
w.raw   = expand cut(doc.line)
w.kept  = filter keep(w.raw)
w.up    = up(w.kept)
doc.all = reduce join(w.up)
output doc.all
EOF
run_job "$T/tree.orch" "$T/tree-fifo" --max-unsealed 3
job_done "$T/tree-fifo"
run_job "$T/tree.orch" "$T/tree-staged" --staged --max-unsealed 3
job_done "$T/tree-staged"
"$ORCH" export "$T/tree-fifo" doc.all > "$T/tree.out"
grep -q '"W1,X1,Y1,Z1"' "$T/tree.out" || fail "tree: unexpected results: $(head -2 "$T/tree.out")"
"$ORCH" export "$T/tree-staged" doc.all | cmp -s - "$T/tree.out" ||
  fail "tree: staged export differs from fifo's"
# The barrier held there too: every attempt of a call began after the last of each call
# upstream of it ended.
expect_eq "tree: staged stages in order" "1 1 1" "$(echo $(q "$T/tree-staged" "
  WITH t AS (SELECT c.name AS call, a.id, a.started_at, a.ended_at FROM attempt a
             JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id)
  SELECT (SELECT max(id) FROM t WHERE call = x.up) < (SELECT min(id) FROM t WHERE call = x.down)
     AND (SELECT max(ended_at) FROM t WHERE call = x.up) <= (SELECT min(started_at) FROM t WHERE call = x.down)
  FROM (SELECT 1 AS k, 'cut' AS up, 'keep' AS down UNION ALL SELECT 2, 'keep', 'up'
        UNION ALL SELECT 3, 'up', 'join') AS x ORDER BY x.k"))"

# ---- usage -----------------------------------------------------------------------------------
set +e
"$ORCH" run "$T/chain.orch" --job "$T/bad" --order lifo 2> "$T/bad.log"
rc=$?
set -e
expect_eq "--order lifo: usage error" 2 "$rc"
grep -q "order is fifo or random" "$T/bad.log" || fail "--order lifo: $(cat "$T/bad.log")"
"$ORCH" run --help | grep -q -- "--staged" || fail "help lacks --staged"
"$ORCH" run --help | grep -q -- "--order" || fail "help lacks --order"
echo "ablation: ok"
