#!/usr/bin/env bash
# GPU budget and devices: a call with gpus=G has its workers given devices through
# CUDA_VISIBLE_DEVICES (here with --gpus 2 on a machine that may have none), and a call
# that needs GPUs where there are none is refused with a clear message. Also an exec()
# UDF in Python, end to end.
source "$(dirname "$0")/lib.sh"

cat > "$T/env_udf.py" <<'PY'
import os, sys
sys.path.insert(0, os.environ["ORCH_PY"])
import orch_udf

class Env:
    def __init__(self, args):
        pass
    def run(self, batch):
        return [os.environ.get("CUDA_VISIBLE_DEVICES", "unset").encode() for r in batch]

if __name__ == "__main__":
    sys.exit(orch_udf.serve(Env))
PY
seq 1 40 > "$T/in.txt"
cat > "$T/g.orch" <<PIPE
pipeline g
domain r
source r.v = lines("in.txt")
call dev = exec("python3 $T/env_udf.py") with workers=2, gpus=1, cpus=0
r.dev = dev(r.v)
output r.dev
PIPE
export ORCH_PY="$SRCDIR/udfs/python"
run_job "$T/g.orch" "$T/job" --gpus 2
# Two workers holding one GPU each of two: devices 0 and 1; every record saw one of them.
seen=$("$ORCH" export "$T/job" r.dev | python3 -c '
import json, sys
print(" ".join(sorted({json.loads(l)["value"] for l in sys.stdin})))')
case "$seen" in
  "0 1" | "0" | "1") ;;
  *) fail "unexpected CUDA_VISIBLE_DEVICES values: $seen" ;;
esac
expect_eq "every worker got a device" 0 \
  "$("$ORCH" export "$T/job" r.dev | grep -c unset || true)"
# The workers' pids and their devices: each worker always the same device.
expect_eq "all 40 present" 40 "$("$ORCH" export "$T/job" r.dev | wc -l)"

# gpus=0.5 on one GPU: both workers share device 0.
sed -i 's/gpus=1/gpus=0.5/' "$T/g.orch"
run_job "$T/g.orch" "$T/job2" --gpus 1
expect_eq "shared device" "0" "$("$ORCH" export "$T/job2" r.dev | python3 -c '
import json, sys
print(" ".join(sorted({json.loads(l)["value"] for l in sys.stdin})))')"

# No GPU at all: refused at start with a message, exit 1 (only when this machine has none).
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  if "$ORCH" run "$T/g.orch" --job "$T/job3" --progress none 2> "$T/err"; then
    fail "a GPU call ran without GPUs"
  fi
  grep -q "needs gpus=0.5 but no GPU was found" "$T/err" || fail "message: $(cat "$T/err")"
fi
echo "gpus: ok"
