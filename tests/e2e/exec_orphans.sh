#!/usr/bin/env bash
# exec_orphans.sh — no exec() program outlives its worker (EXEC_PROTOCOL.md "Lifetime";
# docs/operations.md "Guarantees"), whatever way the worker ends. The program is Python
# started by `sh -c` (which forks it rather than exec it), and it starts helpers of its own:
# one in init, one in the middle of the batch it hangs in. After each of these ends of a
# worker, every process of those programs is gone within a few seconds (polled), and so is
# every process of the program's process group (the host's keeper included):
#   1. the run ends normally (fini closes the program's stdin, it exits);
#   2. the program ignores the end of its stdin: the driver still exits, nothing is left;
#   3. a batch runs past its timeout: the driver kills the worker;
#   4. the worker is killed with SIGKILL (a crash);
#   5. the driver is killed with SIGKILL (its workers die with it).
source "$(dirname "$0")/lib.sh"

cat > "$T/nap_udf.py" <<'PY'
import os, subprocess, sys, time
sys.path.insert(0, os.environ["ORCH_PY"])
import orch_udf

HERE = os.path.dirname(os.path.abspath(__file__))

def helper():
    subprocess.Popen([sys.executable, HERE + "/helper_udf.py"])

class Nap:
    def __init__(self, args):
        self.mark, self.stubborn = args["mark"], args["stubborn"] == "1"
        helper()  # as a program with worker processes of its own has
        with open(self.mark + ".pgid", "a") as f:
            f.write("%d\n" % os.getpgid(0))
    def run(self, batch):
        for r in batch:
            if r.value == b"hang" and r.attempt == 1:
                helper()
                open(self.mark, "w").close()
                while True:
                    time.sleep(60)
        return [r.value.upper() for r in batch]
    def close(self):
        while self.stubborn:  # never exits by itself
            time.sleep(60)

if __name__ == "__main__":
    sys.exit(orch_udf.serve(Nap))
PY
cat > "$T/helper_udf.py" <<'PY'
import time
while True:
    time.sleep(60)
PY
export ORCH_PY="$SRCDIR/udfs/python"
PROGRAMS="$T/(nap|helper)_udf\.py"

# pipeline NAME INPUT STUBBORN OPTIONS: writes $T/NAME.orch, one exec() call on lines INPUT.
pipeline() {
  printf '%s\n' "$2" > "$T/$1.txt"
  cat > "$T/$1.orch" <<EOF
pipeline $1
domain r
source r.v = lines("$1.txt")
call nap = exec("python3 $T/nap_udf.py")(mark="$T/$1.mark", stubborn="$3") with $4
r.x = nap(r.v)
output r.x
EOF
}

# all_gone NAME: the programs, their helpers and the process group of every program that
# NAME's run started end within 5 s (the driver has ended).
all_gone() {
  none_left 5 -f "$PROGRAMS"
  local pgid
  for pgid in $(cat "$T/$1.mark.pgid"); do
    none_left 5 -g "$pgid"
  done
}

# marked NAME: a program of NAME hangs in its batch (its helpers are started).
marked() {
  [ -f "$T/$1.mark" ]
}

# ---- 1. a normal end --------------------------------------------------------------------
pipeline clean "a" 0 "workers=1, batch=1"
run_job "$T/clean.orch" "$T/clean"
job_done "$T/clean"
expect_eq "clean values" "a|present|A" "$(states "$T/clean" r.x)"
all_gone clean

# ---- 2. a program that ignores the end of its stdin ------------------------------------
pipeline stubborn "a" 1 "workers=1, batch=1"
run_job "$T/stubborn.orch" "$T/stubborn"
job_done "$T/stubborn"
all_gone stubborn

# ---- 3. a batch past its timeout --------------------------------------------------------
pipeline timeout "hang" 0 "workers=1, batch=1, retries=2, timeout=1s"
run_job "$T/timeout.orch" "$T/timeout"
job_done "$T/timeout"
marked timeout || fail "the first attempt did not hang"
expect_eq "timeout: the first attempt timed out, the second ran" "timeout ok" \
  "$(q "$T/timeout" "SELECT group_concat(outcome, ' ') FROM (SELECT outcome FROM attempt
                     ORDER BY id)")"
expect_eq "timeout: two programs ran" 2 "$(wc -l < "$T/timeout.mark.pgid")"
all_gone timeout

# ---- 4. the worker killed with SIGKILL ---------------------------------------------------
pipeline crash "hang" 0 "workers=1, batch=1, retries=2"
J=$T/crash
"$ORCH" run "$T/crash.orch" --job "$J" --progress none 2> "$J.log" &
pid=$!
wait_until 30 "the program hangs in its batch" marked crash
worker=$(qlive "$J" "SELECT worker_pid FROM attempt WHERE outcome IS NULL")
[ -n "$worker" ] || fail "no open attempt while the program hangs"
kill -9 "$worker"
wait "$pid" || { cat "$J.log" >&2; fail "orch run exited $? after its worker was killed"; }
job_done "$J"
expect_eq "crash: the killed attempt crashed, the second ran" "crash ok" \
  "$(q "$J" "SELECT group_concat(outcome, ' ') FROM (SELECT outcome FROM attempt ORDER BY id)")"
all_gone crash

# ---- 5. the driver killed with SIGKILL ---------------------------------------------------
pipeline driver "hang" 0 "workers=1, batch=1"
J=$T/driver
"$ORCH" run "$T/driver.orch" --job "$J" --progress none 2> "$J.log" &
pid=$!
wait_until 30 "the program hangs in its batch" marked driver
kill -9 "$pid"
st=0
wait "$pid" 2> /dev/null || st=$? # (without bash's "Killed" notice)
expect_eq "the driver died of SIGKILL" 137 "$st"
all_gone driver
echo "exec_orphans: ok"
