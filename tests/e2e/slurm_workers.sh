# Workers placed by a real Slurm (DESIGN §11, `--launcher slurm`): a one-node cluster of
# this test's own. Each worker is a step started with srun, connected back over TCP.
#   1. a run through Slurm exports what a local run exports, and every attempt records its
#      host and Slurm step;
#   2. `orch status` of the running job shows each busy worker's host and step; `scancel`
#      of a worker's step in the middle of its batch: the attempt is a crash, the grain is
#      retried, the job finishes with the same exports;
#   2b. kill -9 of a busy worker's srun: the attempt is a crash, and the driver cancels the
#      job that srun left RUNNING; 2c. of an srun whose job waits for cores: the driver
#      cancels it by its name; while it waits, `status` says workers are pending in Slurm
#      and since when;
#   3. kill -9 of the driver: no step is left (squeue empty, no worker process), and
#      `orch resume` finishes the job; 3b. with its sruns' process groups too: the jobs
#      stay RUNNING until the resume cancels every one the killed driver started, a
#      worker's with no attempt open included;
#   4. strangers on the driver's port — a wrong secret, a stolen token, garbage — are
#      refused and logged, and change nothing: the job ends as it would have.
source "$SRCDIR/tests/e2e/lib.sh"
source "$SRCDIR/tests/e2e/slurm_lib.sh"
slurm_up

# JOB WHERE: the outcomes of the attempts WHERE selects, but for those of a batch that
# waited behind the one its worker ran when the worker was lost (pool.h): it never started,
# and ended interrupted, saying so.
ran_outcomes() {
  q "$1" "SELECT group_concat(DISTINCT outcome) FROM attempt WHERE $2
          AND NOT (outcome = 'interrupted' AND message LIKE 'not started: worker %')"
}

cd "$T"
seq 1 24 > in.txt
cat > p.orch << 'EOF'
pipeline slurm_faults
domain w
source w.v = lines("in.txt")
call nap = sleep(ms=400)   with workers=2, batch=1, retries=2
call up  = upper()         with batch=4
w.slow = nap(w.v)
w.out  = up(w.slow)
output w.out
EOF

run_job p.orch "$T/ref" --launcher local
"$ORCH" export "$T/ref" w.out > ref.out
[ "$(wc -l < ref.out)" -eq 24 ] || fail "the local run exported $(wc -l < ref.out) lines"

# ---- 1. a plain run through Slurm --------------------------------------------------------
run_job p.orch "$T/s1" --launcher slurm
"$ORCH" export "$T/s1" w.out > s1.out
cmp -s ref.out s1.out || fail "slurm export differs: $(diff ref.out s1.out)"
grep -q "workers connect to 127.0.0.1:" "$T/s1.log" || fail "no listen line: $(cat "$T/s1.log")"
expect_eq "every attempt on this host, in a Slurm step" "$(hostname)|0" \
  "$(q "$T/s1" "SELECT group_concat(DISTINCT host), sum(slurm_job IS NULL OR slurm_job NOT GLOB '[0-9]*.[0-9]*') FROM attempt")"
expect_eq "status lists the host" "hosts:      $(hostname): yes" \
  "$("$ORCH" status "$T/s1" | grep '^hosts:' | sed 's/: [0-9]* worker process.*(Slurm steps)$/: yes/')"
slurm_idle 20

# ---- 2. scancel of a step in the middle of a batch ---------------------------------------
"$ORCH" run p.orch --job "$T/s2" --progress none --launcher slurm 2> "$T/s2.log" &
drv=$!
open_step() {
  step=$(qlive "$T/s2" "SELECT slurm_job FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
                         JOIN call AS c ON c.id = g.call_id
                         WHERE c.name = 'nap' AND a.ended_at IS NULL AND a.slurm_job IS NOT NULL
                         LIMIT 1" 2> /dev/null) && [ -n "$step" ]
}
wait_until 60 "an attempt of nap running in a Slurm step" open_step
# While it runs, status names the busy workers, where they run and in which step.
"$ORCH" status "$T/s2" > "$T/s2.status" || fail "status of a running job"
grep -q "^working:    nap on $(hostname) (Slurm step $step), pid [0-9]*$" "$T/s2.status" ||
  grep -q "^            nap on $(hostname) (Slurm step $step), pid [0-9]*$" "$T/s2.status" ||
  fail "status does not show the worker in step $step: $(cat "$T/s2.status")"
scancel "${step%%.*}"
wait "$drv" || fail "run after scancel exited $?: $(cat "$T/s2.log")"
# The step may have answered batches before the one the scancel ended (the attempt found
# open may have been queued behind one that was answered meanwhile): its attempts are
# ok, and the last one that ran is a crash.
outcomes=$(q "$T/s2" "SELECT group_concat(outcome, ',') FROM (SELECT outcome FROM attempt
                      WHERE slurm_job = '$step'
                        AND NOT (outcome = 'interrupted' AND message LIKE 'not started: worker %')
                      ORDER BY id)")
[[ $outcomes =~ ^(ok,)*crash$ ]] ||
  fail "the cancelled step's attempts, in order: $outcomes (want ok..., then one crash)"
"$ORCH" export "$T/s2" w.out > s2.out
cmp -s ref.out s2.out || fail "export after scancel differs: $(diff ref.out s2.out)"
expect_eq "no record failed" 0 "$(q "$T/s2" "SELECT count(*) FROM failure WHERE kind IN ('record', 'exhausted')")"
slurm_idle 20

# ---- 2b. kill -9 of a busy worker's srun ----------------------------------------------------
# srun killed with its process group (srun and the "shepherd" that would otherwise cancel
# the job) does not end its job: Slurm keeps it RUNNING without a step (this cluster has no
# InactiveLimit). The driver reaps srun, reports the attempt a crash, and cancels the job
# its worker named.
"$ORCH" run p.orch --job "$T/s2b" --progress none --launcher slurm 2> "$T/s2b.log" &
drv=$!
open_worker() {
  wpid=$(qlive "$T/s2b" "SELECT a.worker_pid FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
                         JOIN call AS c ON c.id = g.call_id
                         WHERE c.name = 'nap' AND a.ended_at IS NULL AND a.slurm_job IS NOT NULL
                         LIMIT 1" 2> /dev/null) && [ -n "$wpid" ] && [ -r "/proc/$wpid/cmdline" ]
}
wait_until 60 "an attempt of nap running in a Slurm step" open_worker
# The worker, the srun that started it and srun's guard carry the same token on their
# command lines.
tok=$(tr '\0' ' ' < "/proc/$wpid/cmdline" | sed -n 's/.*--token \([0-9]*\).*/\1/p')
srun_pid=$(pgrep -P "$drv" -f -- "--token $tok\$") || fail "no srun of the driver for token $tok"
kill -9 -- "-$srun_pid" # srun's guard (the driver's child) leads the group of both
wait "$drv" || fail "run after kill -9 of an srun exited $?: $(cat "$T/s2b.log")"
grep -q "orch: scancel [0-9]*: the srun of a nap worker (step [0-9]*\.[0-9]*, pid $srun_pid) was killed by signal 9" \
  "$T/s2b.log" || fail "no scancel of the killed srun's job: $(cat "$T/s2b.log")"
expect_eq "the killed srun's attempt is a crash" "crash" \
  "$(ran_outcomes "$T/s2b" "worker_pid = $wpid AND ended_at IS NOT NULL AND outcome != 'ok'")"
"$ORCH" export "$T/s2b" w.out > s2b.out
cmp -s ref.out s2b.out || fail "export after kill -9 of an srun differs: $(diff ref.out s2b.out)"
slurm_idle 20 # the job of the killed srun included

# ---- 2c. kill -9 of an srun whose job waits in Slurm's queue --------------------------------
# A job that holds every core of the strict partition keeps the run's jobs PENDING. srun
# killed with its process group then leaves its job PENDING (and RUNNING without a step
# once it gets the cores, holding them for ever); no worker connected to name it, so the
# driver cancels it by its name, the start's own (orch-CALL-TOKEN).
cpus=$(sinfo -h -p main -o %c)
srun --partition=main --ntasks=1 --cpus-per-task="$cpus" --job-name=orch-test-hog --quiet \
  sleep 300 < /dev/null &
hog=$!
hog_runs() { [ "$(squeue -h -n orch-test-hog -t RUNNING -o %i)" != "" ]; }
wait_until 30 "the job holding every core running" hog_runs
"$ORCH" run p.orch --job "$T/s2c" --progress none --launcher slurm 2> "$T/s2c.log" &
drv=$!
nap_pending() {
  name=$(squeue -h -t PENDING -o %j | grep -m1 '^orch-nap-[0-9]*$') && [ -n "$name" ]
}
wait_until 30 "a job of nap waiting for cores" nap_pending
# status says that workers wait in Slurm's queue, and since when (the driver's tick writes
# what status reads, once a second).
says_pending() {
  "$ORCH" status "$T/s2c" > "$T/s2c.status" &&
    grep -Eq "^pending:    [0-9]+ workers? pending in Slurm since 20[0-9-]+T[0-9:.]+Z \([0-9]+ s\): started with srun, not connected yet" \
      "$T/s2c.status"
}
wait_until 10 "status saying workers are pending in Slurm" says_pending
tok=${name##*-}
srun_pid=$(pgrep -P "$drv" -f -- "--token $tok\$") || fail "no srun of the driver for $name"
kill -9 -- "-$srun_pid"
job_gone() { [ "$(squeue -h -n "$name" -o %i)" = "" ]; }
wait_until 30 "the killed srun's job ($name) to leave the queue" job_gone
scancel --name=orch-test-hog
wait "$hog" 2> /dev/null || true
wait "$drv" || fail "run after kill -9 of a waiting srun exited $?: $(cat "$T/s2c.log")"
[ ! -e "$T/s2c/workers-pending" ] || fail "the run ended, and left its workers-pending file"
grep -q "^pending:" <("$ORCH" status "$T/s2c") && fail "status of a finished job says workers are pending"
grep -q "orch: scancel --name=$name: the srun of a nap worker (pid $srun_pid) was killed by signal 9 before its worker connected" \
  "$T/s2c.log" || fail "no scancel of the waiting srun's job: $(cat "$T/s2c.log")"
"$ORCH" export "$T/s2c" w.out > s2c.out
cmp -s ref.out s2c.out || fail "export after kill -9 of a waiting srun differs: $(diff ref.out s2c.out)"
slurm_idle 20

# ---- 3. kill -9 of the driver -------------------------------------------------------------
"$ORCH" run p.orch --job "$T/s3" --progress none --launcher slurm 2> "$T/s3.log" &
drv=$!
two_open() {
  [ "$(qlive "$T/s3" "SELECT count(*) FROM attempt WHERE ended_at IS NULL AND slurm_job IS NOT NULL" 2> /dev/null)" = 2 ]
}
wait_until 60 "two attempts running in Slurm steps" two_open
kill -9 "$drv"
wait "$drv" 2> /dev/null || true
slurm_idle 20 # no step outlives the driver
# This test's workers only (other tests may run their own clusters meanwhile): srun and
# the worker inherit SLURM_CONF, which names this test's cluster.
workers_left() {
  python3 - "SLURM_CONF=$SLURM_CONF" << 'PY'
import os, sys
tag = sys.argv[1].encode()
for d in os.listdir("/proc"):
    try:
        with open("/proc/%s/cmdline" % d, "rb") as f:
            if b"__worker\0--connect" not in f.read():
                continue
        with open("/proc/%s/environ" % d, "rb") as f:
            if tag in f.read().split(b"\0"):
                sys.exit(0)
    except (OSError, ValueError):
        continue
sys.exit(1)
PY
}
wait_until 10 "no worker process left" eval '! workers_left'
"$ORCH" resume "$T/s3" --progress none --launcher slurm 2> "$T/s3r.log" ||
  fail "resume after kill -9 exited $?: $(cat "$T/s3r.log")"
"$ORCH" export "$T/s3" w.out > s3.out
cmp -s ref.out s3.out || fail "export after kill -9 and resume differs: $(diff ref.out s3.out)"
slurm_idle 20

# ---- 3b. kill -9 of the driver with its sruns' process groups ------------------------------
# Nothing is left to end the jobs: srun died with its shepherd, so Slurm keeps each job
# RUNNING without a step. The resume cancels every job the killed driver started, which it
# recorded before each srun ran: those of the attempts that were open, and that of a worker
# with none (up's: started ahead of its work, which a filter that keeps nothing never gives
# it). The shared partition runs the four workers at once.
cat > p3b.orch << 'EOF'
pipeline slurm_idle_worker
domain w
source w.v = lines("in.txt")
call nap  = sleep(ms=400)   with workers=2, batch=1, retries=2
call none = blank()
call up   = upper()
w.slow = nap(w.v)
w.kept = filter none(w.slow)
w.out  = up(w.kept)
output w.slow
output w.out
EOF
run_job p3b.orch "$T/ref3b" --launcher local
"$ORCH" export "$T/ref3b" w.slow > ref3b.out
[ "$(wc -l < ref3b.out)" -eq 24 ] || fail "the local run of p3b exported $(wc -l < ref3b.out) lines"
"$ORCH" run p3b.orch --job "$T/s3b" --progress none --launcher slurm \
  --launcher-args "--partition=shared" 2> "$T/s3b.log" &
drv=$!
# Two workers of nap, each with an attempt open (a worker may hold a second batch queued
# behind the one it runs: two open attempts of one job are not enough), and up's worker
# connected: its step is recorded.
ready_b() {
  [ "$(qlive "$T/s3b" "SELECT (SELECT count(DISTINCT slurm_job) FROM attempt
                                WHERE ended_at IS NULL AND slurm_job IS NOT NULL) || ' ' ||
                               (SELECT count(*) FROM slurm_start WHERE call = 'up' AND step IS NOT NULL)" \
        2> /dev/null)" = "2 1" ]
}
wait_until 60 "two workers of nap running attempts and up's worker connected" ready_b
# The driver's children are the sruns' guards (launch.h), each leading the process group
# of its srun.
sruns=$(pgrep -P "$drv" -f -- "__srun-guard") || fail "no srun of the driver"
kill -9 "$drv"
for p in $sruns; do kill -9 -- "-$p" 2> /dev/null || true; done
wait "$drv" 2> /dev/null || true
open_jobs=$(q "$T/s3b" "SELECT group_concat(DISTINCT substr(slurm_job, 1, instr(slurm_job, '.') - 1))
                        FROM attempt WHERE ended_at IS NULL")
[ -n "$open_jobs" ] || fail "no Slurm job recorded for the open attempts"
started=$(q "$T/s3b" "SELECT group_concat(name, ' ') FROM slurm_start")
up_name=$(q "$T/s3b" "SELECT name FROM slurm_start WHERE call = 'up'")
up_step=$(q "$T/s3b" "SELECT step FROM slurm_start WHERE call = 'up'")
expect_eq "attempts of up" 0 \
  "$(q "$T/s3b" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
                 JOIN call AS c ON c.id = g.call_id WHERE c.name = 'up'")"
left() { squeue -h -o %i | grep -qxF "$1"; }
running() { [ -n "$(squeue -h -n "$1" -t RUNNING -o %i)" ]; }
for j in ${open_jobs//,/ }; do
  left "$j" || fail "job $j ended without a cancel: this test no longer shows what it should"
done
running "$up_name" ||
  fail "up's job $up_name ended without a cancel: this test no longer shows what it should"
# Left RUNNING, those jobs hold the node's cores: without the cancel the resume's workers
# would wait in Slurm's queue for ever.
timeout 120 "$ORCH" resume "$T/s3b" --progress none --launcher slurm \
  --launcher-args "--partition=shared" 2> "$T/s3br.log" ||
  fail "resume after kill -9 of the driver and its sruns exited $? (124: still waiting after
120 s): $(cat "$T/s3br.log"; squeue)"
for j in ${open_jobs//,/ }; do
  grep -q "^orch: scancel $j: its worker (step $j\.[0-9]*) had an attempt open when the last driver stopped$" \
    "$T/s3br.log" || fail "the resume did not cancel job $j: $(cat "$T/s3br.log")"
done
grep -qxF "orch: scancel ${up_step%%.*}: the last driver's up worker (step $up_step) had no attempt open" \
  "$T/s3br.log" || fail "the resume did not cancel up's job: $(cat "$T/s3br.log")"
for n in $started; do
  ! running "$n" || fail "job $n of the killed driver is still RUNNING after the resume: $(squeue)"
done
expect_eq "starts recorded once the resume finished" 0 "$(q "$T/s3b" "SELECT count(*) FROM slurm_start")"
"$ORCH" export "$T/s3b" w.slow > s3b.out
cmp -s ref3b.out s3b.out || fail "export after the resume differs: $(diff ref3b.out s3b.out)"
slurm_idle 20 # the jobs left RUNNING included

# ---- 4. strangers on the driver's port -----------------------------------------------------
"$ORCH" run p.orch --job "$T/s4" --progress none --launcher slurm 2> "$T/s4.log" &
drv=$!
listen_line() { grep -q "workers connect to" "$T/s4.log"; }
wait_until 30 "the driver's listen line" listen_line
addr=$(sed -n 's/.*workers connect to \([^ ]*\)$/\1/p' "$T/s4.log")
# Each stranger reads the CHALLENGE (41 bytes: a frame of 36) and then sends its lie; the
# driver must close the connection. Token 1 is not stolen; the second takes a real one
# from a worker's command line (tokens are public: only the secret proves anything).
python3 - "$addr" << 'PY' || fail "a stranger was not refused"
import os, socket, struct, sys, re, subprocess
host, port = sys.argv[1].rsplit(":", 1)

def stranger(payload, read_challenge=True):
    s = socket.create_connection((host, int(port)), timeout=15)
    if read_challenge:
        got = b""
        while len(got) < 41:
            chunk = s.recv(41 - len(got))
            assert chunk, "no challenge"
            got += chunk
        assert struct.unpack("<IB", got[:5]) == (36, 6), got[:5]
    s.sendall(payload)
    # Refused: the driver closes (EOF), without sending anything more.
    assert s.recv(100) == b"", "the driver answered a stranger"
    s.close()

def auth(token, mac):
    host_b, job = b"evil", b""
    body = struct.pack("<Q", token) + mac + struct.pack("<I", 4242)
    body += struct.pack("<I", len(host_b)) + host_b + struct.pack("<I", len(job)) + job
    return struct.pack("<IB", len(body), 7) + body

stranger(auth(1, b"\0" * 32))
tokens = re.findall(rb"__worker --connect \S+ --token (\d+)",
                    subprocess.run(["ps", "-eo", "args"], capture_output=True).stdout)
if tokens:
    stranger(auth(int(tokens[0]), os.urandom(32)))
stranger(b"GET / HTTP/1.0\r\n\r\n")
stranger(b"", read_challenge=True)  # says nothing at all: closed after its time
PY
wait "$drv" || fail "run with strangers exited $?: $(cat "$T/s4.log")"
grep -q "refused a worker connection from 127.0.0.1:[0-9]*: wrong secret" "$T/s4.log" ||
  fail "no refusal logged: $(cat "$T/s4.log")"
grep -q "refused a worker connection from .*: not an orch worker" "$T/s4.log" ||
  fail "garbage not refused: $(cat "$T/s4.log")"
"$ORCH" export "$T/s4" w.out > s4.out
cmp -s ref.out s4.out || fail "export with strangers differs: $(diff ref.out s4.out)"
expect_eq "strangers changed nothing: every attempt ok, none by them" "0|0" \
  "$(q "$T/s4" "SELECT sum(outcome != 'ok'), sum(host = 'evil' OR worker_pid = 4242) FROM attempt")"
expect_eq "as many attempts as grains" "48" "$(q "$T/s4" "SELECT count(*) FROM attempt")"
slurm_idle 20

# ---- 5. a batch too big to send to a remote worker ----------------------------------------
# A remote batch carries its input values, at most one frame's worth (256 MiB), here
# lowered to 1000 bytes: the reduce of the long document cannot be sent. Its batch fails as
# an attempt, is split, and the grain alone is charged until it is Failed; the documents
# beside it are joined as usual (and never resent forever).
long=$(seq -f 'wxyz%02g' 1 20 | paste -sd' ')
printf 'a b c\n%s\nd e\n' "$long" > docs.txt
cat > big.orch << 'EOF2'
pipeline slurm_big
domain d
domain w in d
source d.v = lines("docs.txt")
call sp = split(sep=" ")
call j  = concat(sep="-") with batch=4, retries=1
w.t   = expand sp(d.v)
w.f   = broadcast d.v
d.out = reduce j(w.f)
output d.out
EOF2
# The reduce reads its line once per word: 20 x 139 bytes for the long one, over 1000;
# every other batch is under.
ORCH_REMOTE_BATCH_MAX=1000 run_job big.orch "$T/s5" --launcher slurm
expect_eq "too big for one remote batch: failed alone; the others joined" \
"a b c|present|a b c-a b c-a b c
$long|failed|gave up after 2 attempts; last: the inputs of the batch are over what a batch for a remote worker carries (256 MiB)
d e|present|d e-d e" "$(states "$T/s5" d.out)"
slurm_idle 20
