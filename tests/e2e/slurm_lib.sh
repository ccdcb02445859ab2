# slurm_lib.sh — a real one-node Slurm cluster for an end-to-end test: sourced after
# lib.sh (which makes $T and its EXIT trap).
#
#   source "$SRCDIR/tests/e2e/lib.sh"
#   source "$SRCDIR/tests/e2e/slurm_lib.sh"
#   slurm_up            # cluster in $T/slurm, SLURM_CONF exported, stopped at exit
#   srun -n1 hostname
#
# The cluster is scripts/slurm-cluster's (see its header): munged, slurmctld and slurmd of
# this test only, on ports of their own, so tests may run in parallel. A test skips (exit
# 77, meson's code for a skipped test) only where it cannot run at all: not root, or the
# Slurm and munge binaries absent. CI is root and installs slurm-wlm and munge
# (scripts/setup), so there the tests really run.

SLURM_CLUSTER="$SRCDIR/scripts/slurm-cluster"
SLURM_DIR="$T/slurm"

# slurm_require: exits 77 (skipped) with the reason when this machine cannot run a cluster.
slurm_require() {
  local b
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: the Slurm tests run their own slurmctld and slurmd, which needs root" >&2
    exit 77
  fi
  for b in munged mungekey slurmctld slurmd srun squeue scancel sinfo; do
    if ! command -v "$b" > /dev/null; then
      echo "SKIP: $b not found (install slurm-wlm and munge: scripts/setup)" >&2
      exit 77
    fi
  done
}

# slurm_up: starts the cluster in $SLURM_DIR and exports SLURM_CONF. The cluster is stopped
# when the test exits, passed or failed, before lib.sh's trap removes $T: the trap in
# place is chained, not replaced. A stop that leaves a process alive fails the test.
slurm_up() {
  slurm_require
  # `trap -p EXIT` prints: trap -- 'COMMAND' EXIT, quoted for eval (run by _slurm_exit).
  _slurm_prev_trap=$(trap -p EXIT)
  # Set before the start, so that a start killed half way is stopped too.
  trap _slurm_exit EXIT
  local out
  out=$("$SLURM_CLUSTER" start "$SLURM_DIR") || fail "scripts/slurm-cluster start failed"
  eval "$out"
  [ "${SLURM_CONF:-}" = "$SLURM_DIR/slurm.conf" ] || fail "slurm-cluster start printed: $out"
  # The cluster's one node is this machine: workers connect back over loopback, whatever
  # the host's name resolves to here.
  export ORCH_LISTEN=127.0.0.1:0
}

_slurm_exit() {
  local rc=$?
  if ! "$SLURM_CLUSTER" stop "$SLURM_DIR"; then
    echo "FAIL: scripts/slurm-cluster stop $SLURM_DIR failed" >&2
    rc=1
  fi
  if [ -n "$_slurm_prev_trap" ]; then
    eval "set -- $_slurm_prev_trap"
    eval "$3"
  fi
  exit "$rc"
}

# slurm_procs: pids of the live processes of this test's cluster: its daemons and the
# slurmstepd processes they forked (all carry ORCH_SLURM_CLUSTER=$SLURM_DIR); none, status 1.
slurm_procs() {
  python3 - "ORCH_SLURM_CLUSTER=$SLURM_DIR" << 'PY'
import os, sys
tag, found = sys.argv[1].encode(), []
for d in os.listdir("/proc"):
    if not d.isdigit() or int(d) == os.getpid():
        continue
    try:
        with open("/proc/%s/environ" % d, "rb") as f:
            if tag not in f.read().split(b"\0"):
                continue
        with open("/proc/%s/stat" % d) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                continue
    except OSError:
        continue
    found.append(d)
print(" ".join(found))
sys.exit(0 if found else 1)
PY
}

# slurm_jobs: the jobs the cluster holds (pending, running or completing), "ID STATE" a line.
slurm_jobs() {
  squeue -h -o "%i %T"
}

# slurm_idle SECONDS: waits until the cluster holds no job (squeue empty); fails the test
# after SECONDS, listing the jobs left. For "no step left" after a run, a scancel, a kill.
slurm_idle() {
  local limit=$1 jobs
  local deadline=$((SECONDS + limit))
  while jobs=$(slurm_jobs) && [ -n "$jobs" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "jobs still in squeue after ${limit}s:
$jobs
$(for j in $(echo "$jobs" | awk '{print $1}'); do scontrol -o show job "$j" 2>&1
     scontrol -o show step "$j" 2>&1
     grep -E "JobId=$j([^0-9]|$)|StepId=$j[.]" "$SLURM_DIR"/*.log 2>/dev/null | tail -25; done)
$(ps -eo pid,ppid,pgid,stat,etimes,args | grep -E '[s]run|[_]_worker' || true)"
    sleep 0.05
  done
  [ -z "$jobs" ] || fail "squeue failed"
}
