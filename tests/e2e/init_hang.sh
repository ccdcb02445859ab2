#!/usr/bin/env bash
# A UDF whose init hangs is killed after ten times the call's timeout, counted as an init
# failure; when init keeps failing the run stops with a clear message instead of hanging.
# No program of a killed worker outlives the run: neither the hung program (which `sh -c`
# started as its child) nor a helper it started itself.
source "$(dirname "$0")/lib.sh"

cat > "$T/hang_udf.py" <<'PY'
import os, subprocess, sys, time
sys.path.insert(0, os.environ["ORCH_PY"])
import orch_udf

class Hang:
    def __init__(self, args):
        # A helper of its own, as a program that forks workers has: it must end too.
        subprocess.Popen([sys.executable, os.environ["ORCH_T"] + "/helper_udf.py"])
        while True:
            time.sleep(60)
    def run(self, batch):
        return [r.value for r in batch]

if __name__ == "__main__":
    sys.exit(orch_udf.serve(Hang))
PY
cat > "$T/helper_udf.py" <<'PY'
import time
while True:
    time.sleep(60)
PY
export ORCH_PY="$SRCDIR/udfs/python" ORCH_T="$T"
printf 'a\nb\n' > "$T/in.txt"
cat > "$T/h.orch" <<PIPE
pipeline h
domain r
source r.v = lines("in.txt")
call stuck = exec("python3 $T/hang_udf.py") with timeout=100ms
r.x = stuck(r.v)
output r.x
PIPE
st=0
timeout 60 "$ORCH" run "$T/h.orch" --job "$T/job" --progress none 2> "$T/err" || st=$?
expect_eq "exit status" 1 "$st"
grep -q "call stuck cannot start its workers: init ran past 10 times the call's timeout" \
  "$T/err" || fail "message: $(cat "$T/err")"
grep -q "orch resume" "$T/err" || fail "no resume hint: $(cat "$T/err")"
# Each killed worker's program and helper end with it (at once; 5 s is generous).
none_left 5 -f "$T/(hang|helper)_udf\.py"
echo "init_hang: ok"
