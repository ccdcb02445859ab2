# The test cluster itself (scripts/slurm-cluster, tests/e2e/slurm_lib.sh): it starts, runs
# a step on this host, runs two 1-CPU steps side by side, ends with no job left, and
# stops leaving none of its processes behind.
source "$SRCDIR/tests/e2e/lib.sh"
source "$SRCDIR/tests/e2e/slurm_lib.sh"

slurm_up
expect_eq "SLURM_CONF" "$T/slurm/slurm.conf" "$SLURM_CONF"

expect_eq "srun -n1 hostname" "$(hostname)" "$(srun -n1 hostname)"

# Two 1-CPU steps at the same time: each marks that it started, then waits (30 s at most)
# for the other's mark. If the cluster ran them one after the other, the first would
# time out and fail.
if [ "$(nproc)" -ge 2 ]; then
  together() {
    # shellcheck disable=SC2016 # the step's own script: expands in the step
    srun -n1 --cpus-per-task=1 --quiet bash -c '
      touch "$1/started.$2"
      deadline=$((SECONDS + 30))
      until [ -e "$1/started.$3" ]; do
        [ "$SECONDS" -lt "$deadline" ] || { echo "step $2: step $3 never started" >&2; exit 1; }
        sleep 0.02
      done' step "$T" "$1" "$2"
  }
  together a b & a=$!
  together b a & b=$!
  wait "$a" || fail "step a failed: the two steps did not run at the same time"
  wait "$b" || fail "step b failed: the two steps did not run at the same time"
else
  echo "note: $(nproc) CPU: the two-steps-at-once check needs 2" >&2
fi

slurm_idle 10

daemons=$(awk '{print $2}' "$T/slurm/pids")
expect_eq "daemons recorded" "munged slurmctld slurmd" "$(awk '{print $1}' "$T/slurm/pids" | sort | xargs)"
for p in $daemons; do
  gone "$p" && fail "daemon $p of $T/slurm/pids is not running"
done

"$SLURM_CLUSTER" stop "$T/slurm"
# shellcheck disable=SC2086
gone $daemons || fail "daemons alive after stop: $(ps -o pid,args -p "$(echo $daemons | tr ' ' ,)")"
if left=$(slurm_procs); then
  fail "processes of the cluster alive after stop: $(ps -o pid,args -p "${left// /,}")"
fi
# Stopping again (as the EXIT trap will) is a no-op.
"$SLURM_CLUSTER" stop "$T/slurm"
