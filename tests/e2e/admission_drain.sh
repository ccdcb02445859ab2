#!/usr/bin/env bash
# admission_drain.sh — admission by drain rate (DESIGN §5; docs/tuning.md "Admission"):
# roots enter as the pipeline drains them, not as fast as the sources can be read, and a
# job far from its budgets never has an upstream call held.
#   1. 400 lines into a slow map: when the last root is admitted, at least 100 of the map's
#      grains are done (the calls that read the roots keep a bounded lead of queued work:
#      at most a chunk of 256 before anything is measured, less once measured);
#   2. 200 files of 50 lines, split, mapped and counted back, under a budget of 2,000
#      unsealed grains (one file makes 53): the fan-out is measured, roots enter so that
#      the grains stay within half of the budget, and no turn holds an upstream call;
#   3. the same with 3 unsealed grains, smaller than one expansion: it still finishes;
#   4. the backlog: 10,000 lines split into 10 children each, a slow map on the children,
#      a grain budget far away. The call that reads the roots (split) is fast, so its lead
#      alone would admit every root in a few turns; the slow call two levels down holds
#      admission once it has 2 s of queued work. When it has done 300 grains, at most half
#      of the roots are in (600-1,300 in runs of this and the ASan build; every root
#      without the gate).
#      The driver is then stopped (SIGINT), the job kept.
# Every run's exports (1-3) equal the same pipeline's with `--staged` (every root at once).
source "$(dirname "$0")/lib.sh"

held() { # LOG: the turns the summary says upstream calls were held (0 when it says none)
  local n
  n=$(sed -n 's/.*upstream calls held for the budgets in \([0-9]*\) turns.*/\1/p' "$1")
  echo "${n:-0}"
}

# ---- 1: a slow map paces the admission ---------------------------------------------------
python3 -c 'print("\n".join("line %03d" % i for i in range(400)))' > "$T/in.txt"
cat > "$T/slow.orch" <<'EOF2'
pipeline drain
domain row
source row.text = lines("in.txt")
call slow = sleep(ms=4)
row.same = slow(row.text)
output row.same
EOF2
run_job "$T/slow.orch" "$T/slow"
job_done "$T/slow"
done_before=$(q "$T/slow" "
  SELECT count(*) FROM attempt a JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id
  WHERE c.name = 'slow' AND a.outcome = 'ok'
    AND a.ended_at < (SELECT max(admitted_at) FROM root)")
echo "slow grains done before the last root was admitted: $done_before of 400"
[ "$done_before" -ge 100 ] ||
  fail "only $done_before slow grains were done when the last of 400 roots was admitted"
run_job "$T/slow.orch" "$T/slow-staged" --staged
expect_eq "slow: export" "$("$ORCH" export "$T/slow-staged" row.same)" \
  "$("$ORCH" export "$T/slow" row.same)"

# ---- 2: a budget far from reach holds nothing --------------------------------------------
mkdir "$T/data"
python3 - "$T/data" <<'EOF2'
import sys
for i in range(200):
    with open("%s/f%03d.txt" % (sys.argv[1], i), "w") as f:
        f.write("".join("line %d of file %d\n" % (j, i) for j in range(50)))
EOF2
cat > "$T/shape.orch" <<'EOF2'
pipeline shape
domain file
domain line in file
source file.path = files("data/*.txt")
call rd = read_file()
call cut = split_lines()
call same = identity()
call n = count()
file.text = rd(file.path)
line.raw = expand cut(file.text)
line.v = same(line.raw)
file.n = reduce n(line.v)
output file.n
EOF2
run_job "$T/shape.orch" "$T/shape" --max-unsealed 2000
job_done "$T/shape"
expect_eq "a budget of 2,000 unsealed grains: turns with an upstream call held" 0 \
  "$(held "$T/shape.log")"
run_job "$T/shape.orch" "$T/shape-staged" --staged
want=$("$ORCH" export "$T/shape-staged" file.n)
expect_eq "shape: export" "$want" "$("$ORCH" export "$T/shape" file.n)"

# ---- 3: a budget smaller than one expansion ----------------------------------------------
run_job "$T/shape.orch" "$T/three" --max-unsealed 3
job_done "$T/three"
expect_eq "three: export" "$want" "$("$ORCH" export "$T/three" file.n)"

# ---- 4: a slow call downstream holds admission by its backlog ---------------------------
python3 -c 'print("\n".join(",".join("r%d_%d" % (i, k) for k in range(10)) for i in range(10000)))' \
  > "$T/wide.txt"
cat > "$T/backlog.orch" <<'EOF2'
pipeline backlog
domain row
domain part in row
source row.text = lines("wide.txt")
call cut  = split(sep=",")
call slow = sleep(ms=2)
call n    = count()
part.raw  = expand cut(row.text)
part.v    = slow(part.raw)
row.n     = reduce n(part.v)
output row.n
EOF2
J=$T/backlog
slow_done() {
  [ -f "$J/state.db" ] && [ "$(qlive "$J" "SELECT count(*) FROM grain g JOIN call c ON
    c.id = g.call_id WHERE c.name = 'slow' AND g.outcome IS NOT NULL")" -ge 300 ]
}
"$ORCH" run "$T/backlog.orch" --job "$J" --progress none --max-unsealed 1000000 2> "$J.log" &
pid=$!
wait_until 120 "300 slow grains of $J sealed" slow_done
admitted=$(qlive "$J" "SELECT count(*) FROM root")
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
expect_eq "the backlog run's exit status after SIGINT" 3 "$rc"
echo "roots admitted when the slow call had done 300 grains: $admitted of 10000"
[ "$admitted" -le 5000 ] ||
  fail "$admitted of 10,000 roots were admitted with a slow call's backlog of $((admitted * 10 - 300)) grains"
echo "admission_drain: ok"
