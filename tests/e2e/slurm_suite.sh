# The model, text and crash-loop tests again, every run of orch sent through a real Slurm
# (DESIGN §11): ORCH_LAUNCHER=slurm makes each `orch run`, `resume` and `update` of those
# tests start its workers with srun, and each must pass as it does with local workers —
# the same exports, byte for byte, and in the crash loop the same committed facts. The
# workers ask for the cluster's `shared` partition (scripts/slurm-cluster), whose cores
# take several jobs each: a model pipeline has eleven calls, and on this 2-core node the
# strict partition would make most of them wait for a core (slurm_workers.sh uses it).
source "$SRCDIR/tests/e2e/lib.sh"
source "$SRCDIR/tests/e2e/slurm_lib.sh"
slurm_up

export ORCH_LAUNCHER=slurm ORCH_LAUNCHER_ARGS="--partition=shared"
# A killed driver's srun ends once Slurm has ended its step: allow it 60 s, not the 10 s a
# local worker gets (tests/crash_loop, WORKER_WAIT); no step may be left either way
# (slurm_idle below, and run.sh's check that no process outlives the test). 30 s was not
# always enough on a loaded 2-core machine: once (2026-12-02, a fresh clone's .ci/run while
# the machine built and profiled other trees) an srun was still alive 30 s after its driver
# was killed, and 10 s after the test's end (run.sh killed it); srun itself may wait up to
# KillWait + 30 s for a step it was told to end. Three runs after: 28-32 s each, clean.
# srun's guard (launch.h) kills it 45 s after the driver's death at the latest, then
# cancels its job: within the 60 s. An srun that missed its one SIGTERM used to wait here
# for ever (2026-12-02, twice in CI; the guard says it again each second now).
export CRASH_LOOP_WORKER_WAIT=60
for t in run_text.sh model.sh crash_loop.sh; do
  start=$SECONDS
  bash "$SRCDIR/tests/e2e/$t" > "$T/$t.log" 2>&1 ||
    { cat "$T/$t.log" >&2; fail "$t failed with every worker placed by Slurm"; }
  echo "slurm_suite: $t passed through Slurm in $((SECONDS - start)) s"
done
# Slurm really ran them: each worker's srun asked slurmctld for a job, which its log names
# (JobId=N), allocated at once or later. Local workers would make none; the model pipeline
# alone has eleven calls. How many the crash loop makes depends on where its kills land:
# on a loaded machine they land in the start-ups, and the suite made 47 jobs in all once
# (2026-12-02, three busy loops beside it), against 120-150 on a quiet one.
n=$(grep -oE "JobId=[0-9]+" "$SLURM_DIR/slurmctld.log" | sort -u | wc -l)
[ "$n" -ge 20 ] ||
  fail "slurmctld made $n jobs; the tests did not all go through Slurm: $(grep -E "JobId=" "$SLURM_DIR/slurmctld.log" | tail -20)"
echo "slurm_suite: slurmctld made $n jobs for workers"
# As long as a killed driver's step may take (above): twice, on a loaded machine, the last
# job was still RUNNING after 20 s; a step left behind for good still fails here.
slurm_idle 60
