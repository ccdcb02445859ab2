#!/usr/bin/env bash
# exec_dir.sh — an exec() command line means the same from any current directory
# (docs/language.md "Functions"; engine/lang/orch_lang.h "Paths"): its relative program
# (`./up_udf.py`) and its later words that begin with `./` (`python3 ./up_udf.py`) are
# resolved against the pipeline's directory when the job is created, as the paths of
# files(), lines() and library() are. A job created from one directory, interrupted, and
# resumed from another finishes with the same plan hash and the right values.
source "$(dirname "$0")/lib.sh"

mkdir "$T/p" "$T/a" "$T/b"
printf '%s\n' one two three > "$T/p/in.txt"
cat > "$T/p/up_udf.py" <<PY
#!/usr/bin/env python3
import os, sys, time
sys.path.insert(0, "$SRCDIR/udfs/python")
import orch_udf
class Up:
    def __init__(self, args):
        self.tag = args.get("tag", "").encode()
    def run(self, batch):
        # While the file "hold" exists, a batch waits: the driver is interrupted while it
        # runs one, never after the job's end.
        for _ in range(600):
            if not os.path.exists("$T/hold"):
                break
            time.sleep(0.05)
        return [r.value.upper() + self.tag for r in batch]
sys.exit(orch_udf.serve(Up))
PY
chmod +x "$T/p/up_udf.py"
cat > "$T/p/dir.orch" <<'PIPE'
pipeline dir
domain r
source r.v = lines("in.txt")
call up  = exec("./up_udf.py")                  with workers=1
call tag = exec("python3 ./up_udf.py", tag="!") with workers=1
r.u = up(r.v)
r.t = tag(r.u)
output r.t
PIPE

J=$T/a/job
: > "$T/hold"
cd "$T/a"
"$ORCH" run ../p/dir.orch --job job --progress none 2> "$T/run.log" &
pid=$!
# open_attempt: an attempt runs, perhaps with one queued behind it on the worker (pool.h)
# (a driver that already exited fails the test at once).
open_attempt() {
  kill -0 "$pid" 2> /dev/null || { cat "$T/run.log" >&2; fail "the run ended before it ran"; }
  [ "$(qlive "$J" "SELECT count(*) > 0 FROM attempt WHERE outcome IS NULL" 2> /dev/null)" = 1 ]
}
wait_until 30 "an attempt of the job" open_attempt
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
expect_eq "the run was interrupted (exit 3)" 3 "$rc"
expect_eq "the commands hold the pipeline's directory" \
  "$T/a/../p/up_udf.py
python3 $T/a/../p/up_udf.py" "$(q "$J" "SELECT function FROM call ORDER BY id")"
hash=$(q "$J" "SELECT plan_hash FROM job")
rm "$T/hold"

cd "$T/b"
"$ORCH" resume ../a/job --progress none 2> "$T/resume.log" ||
  { cat "$T/run.log" "$T/resume.log" >&2; fail "resume from another directory exited $?"; }
job_done "$J"
expect_eq "the plan hash is the same after resume" "$hash" "$(q "$J" "SELECT plan_hash FROM job")"
expect_eq "values" "one|present|ONE!
two|present|TWO!
three|present|THREE!" "$(states "$J" r.t)"
none_left 5 -f "$T/p/up_udf\.py"
echo "exec_dir: ok"
