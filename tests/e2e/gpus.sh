#!/usr/bin/env bash
# GPU budget and devices: each worker of a call with gpus=G is given its devices through
# CUDA_VISIBLE_DEVICES as the driver documents it (engine/driver/resources.c, assign_devices):
# a worker that holds G GPUs gets ceil(G) consecutive devices, workers packed in order
# (worker w starts at device floor(w * G)), wrapping around the budget's devices, so that
# fractional calls share a device. Checked here worker by worker, with --gpus on a machine
# that may have none. A call without gpus sees no device. A call that needs GPUs where there
# are none, or more than the budget, is refused at start with a clear message. Also an
# exec() UDF in Python, end to end.
source "$(dirname "$0")/lib.sh"

# At init each worker process writes SEEN/WORKER.PID holding its CUDA_VISIBLE_DEVICES; each
# record answers "WORKER DEVICES" (what the worker that ran it saw).
cat > "$T/env_udf.py" <<'PY'
import os, sys
sys.path.insert(0, os.environ["ORCH_PY"])
import orch_udf

class Env:
    def __init__(self, args):
        dev = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
        worker = orch_udf.config.worker
        path = os.path.join(args["seen"], "%d.%d" % (worker, os.getpid()))
        with open(path, "w") as f:
            f.write(dev)
        self.answer = ("%d %s" % (worker, dev)).encode()
    def run(self, batch):
        return [self.answer for r in batch]

if __name__ == "__main__":
    sys.exit(orch_udf.serve(Env))
PY
seq 1 40 > "$T/in.txt"
export ORCH_PY="$SRCDIR/udfs/python"

# pipeline NAME WORKERS GPUS: a pipeline whose one call reports the devices it was given.
pipeline() {
  mkdir -p "$T/seen-$1"
  cat > "$T/$1.orch" <<PIPE
pipeline $1
domain r
source r.v = lines("in.txt")
call dev = exec("python3 $T/env_udf.py")(seen="$T/seen-$1") with workers=$2, gpus=$3, cpus=0
r.dev = dev(r.v)
output r.dev
PIPE
}

# check_devices NAME BUDGET "W=DEVICES ...": runs pipeline NAME with --gpus BUDGET and
# checks that worker W (every process of it) saw exactly DEVICES, for every worker of the
# call and no other; and that every record was run by one of them, seeing its own devices.
check_devices() {
  local name=$1 budget=$2 want
  want=$(tr ' ' '\n' <<< "$3" | sort)
  # A call not measured yet dispatches one grain: 40 of them start every worker of it.
  run_job "$T/$name.orch" "$T/job-$name" --gpus "$budget"
  local seen
  seen=$(for f in "$T/seen-$name"/*; do
           printf '%s=%s\n' "$(basename "$f" | cut -d. -f1)" "$(cat "$f")"
         done | sort -u)
  expect_eq "$name: the devices of each worker (at init)" "$want" "$seen"
  local answers
  answers=$("$ORCH" export "$T/job-$name" r.dev | python3 -c '
import json, sys
vals = [json.loads(l)["value"] for l in sys.stdin]
print(len(vals))
for v in sorted(set(vals)):
    print(v.replace(" ", "="))')
  expect_eq "$name: all 40 records present" 40 "$(head -n1 <<< "$answers")"
  local pair
  for pair in $(tail -n +2 <<< "$answers"); do
    grep -qxF "$pair" <<< "$want" ||
      fail "$name: a record was run by a worker that saw $pair; expected one of: $3"
  done
}

# Two workers holding one GPU each of two: one sees device 0, the other device 1.
pipeline one_each 2 1
check_devices one_each 2 "0=0 1=1"

# Half a GPU each on one GPU: both share device 0.
pipeline share 2 0.5
check_devices share 1 "0=0 1=0"

# Half a GPU each on two GPUs: packed in order, two workers per device.
pipeline packed 4 0.5
check_devices packed 2 "0=0 1=0 2=1 3=1"

# Two GPUs for one worker: both devices.
pipeline two 1 2
check_devices two 2 "0=0,1"

# More workers than devices: the assignment wraps around.
pipeline wrap 4 1
check_devices wrap 3 "0=0 1=1 2=2 3=0"

# No GPU at all: refused at start with a message, exit 1 (only when this machine has none).
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
  if "$ORCH" run "$T/share.orch" --job "$T/job-none" --progress none 2> "$T/err"; then
    fail "a GPU call ran without GPUs"
  fi
  grep -q "needs gpus=0.5 but no GPU was found" "$T/err" || fail "message: $(cat "$T/err")"
fi
# A call without gpus is given no device, even when orch itself was started with some: a
# worker that holds no GPU from the budget must not use one.
pipeline nogpu 2 0
CUDA_VISIBLE_DEVICES=0,1 check_devices nogpu 2 "0= 1="

# More GPUs than the job has: refused at start with a message, exit 1, before any worker
# of any call has started (the other call here would fit) and before any attempt.
cat > "$T/over.orch" <<PIPE
pipeline over
domain r
source r.v = lines("in.txt")
call fits = exec("python3 $T/env_udf.py")(seen="$T/seen-over") with gpus=1, cpus=0
call dev = exec("python3 $T/env_udf.py")(seen="$T/seen-over") with workers=2, gpus=2.5, cpus=0
r.fits = fits(r.v)
r.dev = dev(r.v)
PIPE
mkdir -p "$T/seen-over"
for budget in 2 1.5; do
  if "$ORCH" run "$T/over.orch" --job "$T/job-over-$budget" --gpus "$budget" --progress none \
       2> "$T/err"; then
    fail "a call asking for gpus=2.5 ran with --gpus $budget"
  else
    expect_eq "exit status of a call asking for too many GPUs" 1 "$?"
  fi
  grep -q "call dev needs gpus=2.5 but the job has only $budget GPUs" "$T/err" ||
    fail "message: $(cat "$T/err")"
  expect_eq "no worker started" "" "$(ls "$T/seen-over")"
  if [ -e "$T/job-over-$budget/state.db" ]; then
    expect_eq "no attempt" 0 "$(q "$T/job-over-$budget" "SELECT count(*) FROM attempt")"
  fi
done
echo "gpus: ok"
