#!/usr/bin/env bash
# run_errors.sh — `orch run` that cannot run: a UDF library that does not exist fails with
# a message naming the call and the library, exit 1, promptly (no hang waiting on workers
# that can never start); an exec program that does not exist likewise; workers that stop
# being able to start stop the job, and the attempts then running keep why; a job
# directory that already exists (empty, or a job) is refused, exit 1, and left as it was.
source "$(dirname "$0")/lib.sh"

printf '%s\n' a b > "$T/in.txt"
# expect_run STATUS JOB PIPELINE: orch run within 60 s (a hang fails), exit STATUS;
# stderr in $T/err.
expect_run() {
  local want=$1 job=$2 pipeline=$3 got=0
  timeout 60 "$ORCH" run "$pipeline" --job "$job" --progress none 2> "$T/err" || got=$?
  [ "$got" != 124 ] || fail "orch run $pipeline hung (killed after 60 s)"
  [ "$got" = "$want" ] || { cat "$T/err" >&2; fail "orch run $pipeline exited $got, not $want"; }
}

cat > "$T/nolib.orch" <<'EOF'
pipeline nolib
domain doc
source doc.line = lines("in.txt")
call x = library("nope.so", "x")
doc.y = x(doc.line)
EOF
expect_run 1 "$T/nolib" "$T/nolib.orch"
grep -q "call x cannot start its workers" "$T/err" || fail "no clear message: $(cat "$T/err")"
grep -q "nope.so" "$T/err" || fail "the message does not name the library: $(cat "$T/err")"
expect_eq "nothing ran" 0 "$(q "$T/nolib" "SELECT count(*) FROM attempt")"
expect_eq "not finished: failed" failed "$(q "$T/nolib" "SELECT status FROM job")"

cat > "$T/noexec.orch" <<'EOF'
pipeline noexec
domain doc
source doc.line = lines("in.txt")
call x = exec("/nonexistent/orch-test-prog")
doc.y = x(doc.line)
EOF
expect_run 1 "$T/noexec" "$T/noexec.orch"
grep -q "call x cannot start its workers" "$T/err" || fail "no clear message: $(cat "$T/err")"

# A call whose workers stop being able to start (a replacement fails its init three times)
# stops the job, and says why where a user looks later: the attempts then running, of
# another call, are ended `interrupted` with the stop's message, committed, not left open
# for the next resume to close without a word. `hold` runs a batch until the driver kills
# it; `x` breaks its tool once a batch of `hold` runs, then kills its own worker.
cat > "$T/hold.py" <<PY
import os, sys, time
sys.path.insert(0, "$SRCDIR/udfs/python")
import orch_udf

class Hold:
    def __init__(self, args):
        pass
    def run(self, batch):
        open("$T/held", "w").close()
        parent = os.getppid()
        while os.getppid() == parent:  # until the driver kills the worker (and sh)
            time.sleep(0.05)
        return [r.value for r in batch]

if __name__ == "__main__":
    sys.exit(orch_udf.serve(Hold))
PY
cat > "$T/breaks.py" <<PY
import os, signal, sys, time
sys.path.insert(0, "$SRCDIR/udfs/python")
import orch_udf

class Breaks:
    def __init__(self, args):
        if os.path.exists("$T/broken"):
            raise RuntimeError("the tool is broken")
    def run(self, batch):
        while not os.path.exists("$T/held"):  # until a batch of hold runs
            time.sleep(0.01)
        open("$T/broken", "w").close()
        os.kill(worker(), signal.SIGKILL)
        os._exit(0)

def worker():  # the orch worker above this process (sh -c may stand between)
    pid = os.getppid()
    while pid > 1:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if b"__worker" in f.read():
                return pid
        with open("/proc/%d/stat" % pid) as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no orch worker above")

if __name__ == "__main__":
    sys.exit(orch_udf.serve(Breaks))
PY
cat > "$T/breaks.orch" <<EOF
pipeline breaks
domain doc
source doc.line = lines("in.txt")
call hold = exec("python3 $T/hold.py")
call x = exec("python3 $T/breaks.py")
doc.h = hold(doc.line)
doc.y = x(doc.line)
EOF
expect_run 1 "$T/breaks" "$T/breaks.orch"
grep -q "call x cannot start its workers: .*the tool is broken" "$T/err" ||
  fail "no clear message: $(cat "$T/err")"
expect_eq "hold ran" 1 "$(q "$T/breaks" "SELECT count(*) > 0 FROM attempt AS a
  JOIN grain AS g ON g.id = a.grain_id JOIN call AS c ON c.id = g.call_id AND c.name = 'hold'")"
expect_eq "hold's attempts say why the job stopped" "" \
  "$(q "$T/breaks" "SELECT a.id, a.outcome, a.message FROM attempt AS a
     JOIN grain AS g ON g.id = a.grain_id JOIN call AS c ON c.id = g.call_id
     WHERE c.name = 'hold' AND NOT (a.outcome = 'interrupted'
       AND a.message LIKE 'call x cannot start its workers: %the tool is broken%')")"
expect_eq "no attempt is left open" 0 \
  "$(q "$T/breaks" "SELECT count(*) FROM attempt WHERE outcome IS NULL")"
expect_eq "not finished: failed" failed "$(q "$T/breaks" "SELECT status FROM job")"

# An existing directory is never a new job.
cat > "$T/ok.orch" <<'EOF'
pipeline ok
domain doc
source doc.line = lines("in.txt")
call x = upper()
doc.y = x(doc.line)
EOF
mkdir "$T/empty"
expect_run 1 "$T/empty" "$T/ok.orch"
grep -q "already exists" "$T/err" || fail "no clear message: $(cat "$T/err")"
expect_eq "the empty directory is left empty" "" "$(ls -A "$T/empty")"
run_job "$T/ok.orch" "$T/job"
before=$(cd "$T/job" && find . -type f | sort | xargs md5sum)
expect_run 1 "$T/job" "$T/ok.orch"
grep -q "orch resume" "$T/err" || fail "no hint to resume: $(cat "$T/err")"
expect_eq "the existing job is untouched" "$before" "$(cd "$T/job" && find . -type f | sort | xargs md5sum)"
expect_eq "its values" "a|present|A
b|present|B" "$(states "$T/job" doc.y)"
# A pipeline file that cannot be read: said once, in the compiler's format; no job left.
expect_run 1 "$T/nofile" "$T/missing.orch"
expect_eq "an unreadable pipeline is said once" \
  "$T/missing.orch: error: cannot read: No such file or directory" "$(cat "$T/err")"
[ ! -e "$T/nofile" ] || fail "a job was left for an unreadable pipeline"
echo "run_errors: ok"
