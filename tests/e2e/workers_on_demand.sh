#!/usr/bin/env bash
# workers_on_demand.sh — workers start on demand and stop when their call is done
# (engine/driver/workers.c):
#   * `workers=64` on 3 grains starts 3 processes, not 64: the driver's count of starts,
#     the processes that ran fini (each leaves a mark), and the attempt table agree;
#   * a chain of 200 calls over 3 lines (one batch of 3 travels the chain) starts one
#     worker per call and never has more than LOOKAHEAD + 1 = 5 in use at once (the peak
#     the driver reports in its summary: started, not yet lost nor stopped), each stopped
#     cleanly (it ran fini) — where every call kept its worker to the end before;
#   * a call that never gets a grain (everything upstream failed) starts no worker beyond
#     the one started ahead for it, which is stopped when the call is done;
#   * a worker idle longer than ORCH_IDLE_STOP_MS while its call waits for a slow upstream
#     record is stopped, and another is started when the record comes.
# All of it is counted from the driver's summary, the fini marks and the attempt table,
# never from ps snapshots. Only the last part depends on time: its upstream record takes
# 4 s, three times the idle limit it sets (300 ms) and the driver's one-second tick together.
source "$(dirname "$0")/lib.sh"

probe=$(dirname "$ORCH")/../tests/udf_pool_probe.so
[ -f "$probe" ] || fail "the probe UDF library is not built: $probe"
printf '%s\n' a b c > "$T/in.txt"

# summary JOB: the driver's end-of-run counts, "STARTED PEAK".
summary() {
  sed -n 's/.* \([0-9]*\) workers started (at most \([0-9]*\) at once).*/\1 \2/p' "$1.log"
}
# finis DIR: how many worker processes ran fini (one mark each, named by pid).
finis() {
  find "$1" -name 'fini-*' | wc -l
}

# ---- many workers, few grains -------------------------------------------------------------
mkdir "$T/m1"
cat > "$T/many.orch" <<EOF
pipeline many
domain r
source r.v = lines("in.txt")
call p = library("$probe", "orch_pool_probe")(mark="$T/m1") with workers=64
r.p = p(r.v)
output r.p
EOF
run_job "$T/many.orch" "$T/many"
job_done "$T/many"
expect_eq "many: values" "a b c" "$("$ORCH" export "$T/many" r.p | python3 -c '
import json, sys
print(" ".join(json.loads(l)["value"] for l in sys.stdin))')"
# Three ready grains of a call not measured yet (one grain a dispatch): three workers,
# started in the turn that admitted them.
expect_eq "many: workers started, and at most in use at once" "3 3" "$(summary "$T/many")"
expect_eq "many: processes that ran (and ended with) fini" 3 "$(finis "$T/m1")"
pids=$(q "$T/many" "SELECT DISTINCT worker_pid FROM attempt")
[ "$(wc -l <<< "$pids")" -le 3 ] || fail "many: attempts ran on more than 3 workers: $pids"
for pid in $pids; do
  [ -f "$T/m1/fini-$pid" ] || fail "many: worker $pid ran attempts but no fini"
done

# ---- a long chain ---------------------------------------------------------------------------
mkdir "$T/m2"
python3 - "$T/chain.orch" "$probe" "$T/m2" <<'EOF'
import sys
out, probe, marks = sys.argv[1:]
n = 200
L = ["pipeline chain", "domain d", 'source d.p0 = lines("in.txt")']
for i in range(n):
    L += ['call c%d = library("%s", "orch_pool_probe")(mark="%s") with workers=4, batch=3'
          % (i, probe, marks), "d.p%d = c%d(d.p%d)" % (i + 1, i, i)]
L.append("output d.p%d" % n)
open(out, "w").write("\n".join(L) + "\n")
EOF
# --batch-fixed: every dispatch is its call's batch, the batches this test names.
run_job "$T/chain.orch" "$T/chain" --batch-fixed
job_done "$T/chain"
expect_eq "chain: values through 200 calls" "a|present|a
b|present|b
c|present|c" "$(states "$T/chain" d.p200)"
read -r started peak <<< "$(summary "$T/chain")"
# One worker per call (a batch of 3 fits one), unless one started ahead idled past the
# idle limit before its batch came (a very slow machine): then it was started again.
[ "$started" -ge 200 ] || fail "chain: $started workers started for 200 calls"
[ "$peak" -ge 2 ] && [ "$peak" -le 5 ] ||
  fail "chain: at most $peak workers in use at once; expected 2..5 (LOOKAHEAD + 1)"
expect_eq "chain: every worker ran fini" "$started" "$(finis "$T/m2")"
expect_eq "chain: each call's attempts ran on one worker, its own" "200 200" \
  "$(q "$T/chain" "SELECT count(DISTINCT a.worker_pid), count(DISTINCT g.call_id)
                   FROM attempt a JOIN grain g ON g.id = a.grain_id" | tr '|' ' ')"
expect_eq "chain: one batch per call" 200 "$(q "$T/chain" "SELECT count(DISTINCT batch) FROM attempt")"

# ---- a call that gets nothing ---------------------------------------------------------------
mkdir "$T/m3"
cat > "$T/none.orch" <<EOF
pipeline none
domain r
source r.v = lines("in.txt")
call drop = fail_if(contains="", kind=record)
call p = library("$probe", "orch_pool_probe")(mark="$T/m3") with workers=8
r.d = drop(r.v)
r.p = p(r.d)
EOF
run_job "$T/none.orch" "$T/none"
job_done "$T/none"
expect_eq "none: its grains were suppressed without running" 0 \
  "$(q "$T/none" "SELECT count(*) FROM attempt a JOIN grain g ON g.id = a.grain_id
                  JOIN call c ON c.id = g.call_id WHERE c.name = 'p'")"
# drop's worker, and one started ahead for p (stopped, with its fini, once p was done).
expect_eq "none: workers started" "2" "$(summary "$T/none" | cut -d' ' -f1)"
expect_eq "none: p's worker ran fini" 1 "$(finis "$T/m3")"

# ---- an idle worker is stopped, and started again on demand ---------------------------------
mkdir "$T/m4"
printf '%s\n' '0 fast' '4000 slow' > "$T/naps.txt"
cat > "$T/idle.orch" <<EOF
pipeline idle
domain r
source r.v = lines("naps.txt")
call nap = sleep()   with workers=2     # sleeps the number each value starts with, in ms
call p = library("$probe", "orch_pool_probe")(mark="$T/m4")
r.n = nap(r.v)
r.p = p(r.n)
output r.p
EOF
# nap, not measured yet, dispatches one grain: a worker for each of its two.
ORCH_IDLE_STOP_MS=300 run_job "$T/idle.orch" "$T/idle"
job_done "$T/idle"
expect_eq "idle: values" "0 fast|present|0 fast
4000 slow|present|4000 slow" "$(states "$T/idle" r.p)"
expect_eq "idle: p's two records ran on two workers, one after the other" 2 \
  "$(q "$T/idle" "SELECT count(DISTINCT a.worker_pid) FROM attempt a
                  JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id
                  WHERE c.name = 'p'")"
expect_eq "idle: both ran fini (the first when it was stopped)" 2 "$(finis "$T/m4")"
expect_eq "idle: workers started (nap 2, p 2), at most 3 at once" "4 3" "$(summary "$T/idle")"
echo "workers_on_demand: ok"
