#!/usr/bin/env bash
# The --job DIR of `orch run`, and the DIR of the commands that open a job: a trailing
# slash is the same directory; an empty path, a missing parent, `.`, a plain file and an
# existing directory that is not a job each get their own message (exit 1, or 2 for the
# empty path), and nothing is left behind. A path that is not a job is worded one way:
# "PATH: not an orch job (WHY)".
source "$(dirname "$0")/lib.sh"

printf 'alpha\nbeta\n' > "$T/in.txt"
cat > "$T/p.orch" <<'PIPE'
pipeline p
domain r
source r.v = lines("in.txt")
call up = upper()
r.u = up(r.v)
output r.u
PIPE

# expect_refused RC MESSAGE CMD...: CMD exits RC and its stderr holds MESSAGE.
expect_refused() {
  local want=$1 msg=$2 st=0
  shift 2
  "$@" > /dev/null 2> "$T/err" || st=$?
  expect_eq "exit status of: $*" "$want" "$st"
  grep -qF -- "$msg" "$T/err" || fail "$*: the message does not say '$msg': $(cat "$T/err")"
}

# A trailing slash: the job is DIR itself, and no staging directory is left anywhere.
cd "$T"
"$ORCH" run p.orch --job "out/" --progress none 2> "$T/err" || fail "run --job out/: $(cat "$T/err")"
[ -f "$T/out/state.db" ] || fail "run --job out/ made no job in out"
expect_eq "no staging directory left" "" "$(find "$T" -name '*.creating.*')"
expect_eq "resume out/" 0 "$("$ORCH" resume "out/" --progress none 2> /dev/null; echo $?)"
expect_eq "the job's values" "ALPHA BETA" "$("$ORCH" export "out/" r.u | python3 -c '
import json, sys
print(" ".join(json.loads(l)["value"] for l in sys.stdin))')"
expect_refused 1 "out already exists; to continue that job, run \`orch resume out\`" \
  "$ORCH" run p.orch --job "out//" --progress none

touch "$T/plain"
mkdir "$T/notjob"
echo keep > "$T/notjob/mine.txt"
before=$(ls -A "$T")

# run: each wrong --job its own message.
expect_refused 2 "run: --job needs the name of a new directory (it is empty)" \
  "$ORCH" run p.orch --job "" --progress none
expect_refused 1 "nope/sub: cannot create the job: its parent directory nope does not exist; create it first (mkdir -p nope)" \
  "$ORCH" run p.orch --job nope/sub --progress none
expect_refused 1 ". is an existing directory, not a new one: a job is created in a new directory; give its name, e.g. --job ./my-job" \
  "$ORCH" run p.orch --job . --progress none
expect_refused 1 "plain is a file, not a directory: a job is created in a new directory; choose another name" \
  "$ORCH" run p.orch --job plain --progress none
expect_refused 1 "plain/sub: cannot create the job: plain is a file, not a directory" \
  "$ORCH" run p.orch --job plain/sub --progress none
expect_refused 1 "notjob already exists and is not an orch job (no state.db in it); a new job needs a new directory" \
  "$ORCH" run p.orch --job notjob/ --progress none

# resume, status, export: the same wording for whatever is not a job.
for cmd in resume status export; do
  args=()
  [ "$cmd" = export ] && args=(r.u)
  expect_refused 1 "the job directory is an empty path" "$ORCH" "$cmd" "" "${args[@]}"
  expect_refused 1 "nope: not an orch job (it does not exist)" "$ORCH" "$cmd" nope "${args[@]}"
  expect_refused 1 "plain: not an orch job (a file, not a directory)" "$ORCH" "$cmd" plain "${args[@]}"
  expect_refused 1 "notjob: not an orch job (no state.db in it" "$ORCH" "$cmd" notjob "${args[@]}"
  expect_refused 1 ".: not an orch job (no state.db in it" "$ORCH" "$cmd" . "${args[@]}"
done

# Nothing was created or changed by the refusals (no lock file in a directory that is
# not a job, no staging directory, no job).
expect_eq "the directory after the refusals" "$before" "$(ls -A "$T")"
expect_eq "notjob untouched" "mine.txt" "$(ls -A "$T/notjob")"
[ ! -s "$T/plain" ] || fail "plain was written"
# A creation killed before its rename leaves .NAME.creating.PID beside the job: the next
# creation of that job removes it; the stage of a creation still running (its lock held,
# here by this shell) stays.
printf 'a\n' > "$T/in.txt"
cat > "$T/p.orch" <<'PIPE'
pipeline p
domain d
source d.v = lines("in.txt")
call u = upper()
d.u = u(d.v)
PIPE
mkdir "$T/.stale.creating.999999" "$T/.stale.creating.1" "$T/.stale.creating.999998" \
  "$T/.stale.creating.$$"
: > "$T/.stale.creating.999999/lock"
echo junk > "$T/.stale.creating.999999/state.db"
: > "$T/.stale.creating.1/lock"
exec {held}> "$T/.stale.creating.1/lock"
flock -n "$held" || fail "could not hold the test's lock"
"$ORCH" run "$T/p.orch" --job "$T/stale" --progress none 2> "$T/err" ||
  fail "run beside stale stages: $(cat "$T/err")"
[ ! -e "$T/.stale.creating.999999" ] || fail "an abandoned stage was left"
[ -d "$T/.stale.creating.1" ] || fail "the stage of a live creation was removed"
# No lock file (killed before it took the lock): removed when its pid is gone, kept
# while it lives (this shell's pid).
[ -e /proc/999998 ] || [ ! -e "$T/.stale.creating.999998" ] || fail "a lockless dead stage was left"
[ -d "$T/.stale.creating.$$" ] || fail "the lockless stage of a live pid was removed"
exec {held}>&-
# A driver that lost a lock race names the winner's pid even before the winner wrote it
# into the lock file: a process holds the lock of an empty lock file (as a driver does
# for an instant after taking it), and resume names that process.
coproc HOLD { python3 -c '
import fcntl, os, sys
f = open(sys.argv[1], "w")            # truncated: no pid in it
fcntl.flock(f, fcntl.LOCK_EX)
print(os.getpid(), flush=True)
sys.stdin.read()' "$T/stale/lock"; }
read -r holder <&"${HOLD[0]}"
if "$ORCH" resume "$T/stale" 2> "$T/err"; then fail "resume of a locked job ran"; fi
grep -q "another orch process (pid $holder)" "$T/err" ||
  fail "the lock's holder is not named (pid $holder): $(cat "$T/err")"
exec {HOLD[1]}>&-
wait "$HOLD_PID"
# Sources are checked before the job exists: a files() glob whose directory does not
# exist, or a lines() file that cannot be opened, is refused with its own message and
# leaves no job behind (that would tell the user to resume it).
cat > "$T/nodir.orch" <<'PIPE'
pipeline nodir
domain d
source d.v = files("nodir/*.pdf")
call u = identity()
d.u = u(d.v)
PIPE
sed 's|files("nodir/\*.pdf")|lines("nofile.txt")|' "$T/nodir.orch" > "$T/nofile.orch"
for p in nodir nofile; do
  if "$ORCH" run "$T/$p.orch" --job "$T/$p-job" --progress none 2> "$T/$p.err"; then
    fail "$p: the run was accepted"
  fi
  [ ! -e "$T/$p-job" ] || fail "$p: a job was left"
done
grep -q 'files(".*nodir/\*\.pdf"): the directory .*/nodir does not exist' "$T/nodir.err" ||
  fail "nodir: $(cat "$T/nodir.err")"
grep -q 'lines(".*nofile.txt"): No such file or directory' "$T/nofile.err" ||
  fail "nofile: $(cat "$T/nofile.err")"
echo "job_dir: ok"
