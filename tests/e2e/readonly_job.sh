#!/usr/bin/env bash
# readonly_job.sh — a job directory that the user cannot write (a copy made read-only,
# another user's job, a read-only file system) can be inspected, and cannot be run
# (docs/operations.md "A job you cannot write"; engine/job/jobdir.c hold_quiet).
# Root writes whatever the modes say, so the commands run as `nobody` (setpriv) when the
# test runs as root, and a read-only mount is tried too:
#   1. status, export, sql (payload() too), lineage and failures of a finished job,
#      chmod -R a-w, give exit 0 and the same output as on the writable job; they write
#      nothing;
#   2. the same for a copy of a job whose driver was killed mid-run (its state.db-wal and
#      -shm copied with it: commits that are only in the log are read);
#   3. resume and retry refuse, exit 1, saying what is not writable and what to do;
#   4. a copy without its state.db-shm (commits only in the log) is refused with a message
#      that says to copy it, as is reading the payloads of a job whose driver runs now;
#   5. on a read-only file system (root, where a tmpfs can be mounted): 1 to 3 again.
source "$(dirname "$0")/lib.sh"

mkdir "$T/data"
for i in 1 2 3; do printf 'line %s\nmore %s\n' "$i" "$i" > "$T/data/f$i.txt"; done
printf 'x\n' > "$T/data/bad.txt"
seq 1 40 > "$T/nums.txt"
cat > "$T/doc.orch" <<'EOF'
pipeline doc
domain file
domain row in file
source file.path = files("data/*.txt")
call read = read_file()
call cut  = split(sep="\n")
call bad  = fail_if(contains="x")
call up   = upper()
file.text = read(file.path)
row.line  = expand cut(file.text)
row.ok    = bad(row.line)
row.up    = up(row.ok)
output row.up
EOF
cat > "$T/slow.orch" <<'EOF'
pipeline slow
domain n
source n.v = lines("nums.txt")
call nap = sleep(ms=100)      with workers=2, batch=1
n.w = nap(n.v)
output n.w
EOF
chmod 755 "$T"
cd "$T"
run_job doc.orch "$T/done"
job_done "$T/done"

# as_user CMD...: CMD as a user that cannot write the job: nobody when we are root.
if [ "$(id -u)" = 0 ]; then
  command -v setpriv > /dev/null || { echo "skipped: root without setpriv"; exit 77; }
  as_user() { setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"; }
else
  as_user() { "$@"; }
fi

# inspect RUN JOB PORT: every inspection command's output on JOB (export of PORT), run by
# RUN (a command prefix, or "" for none); exit status 1 when one of them fails.
inspect() {
  local run=$1 job=$2 port=$3
  each() {
    echo "== $*"
    $run "$ORCH" "$@" 2> "$T/inspect.err" || { cat "$T/inspect.err" >&2; echo "FAIL: orch $*" >&2; return 1; }
  }
  each status "$job" && each export "$job" "$port" --all &&
    each sql "$job" "SELECT port_id, entity_id, state, payload(payload_id) FROM item ORDER BY 1, 2" &&
    each lineage "$job" -- '#2' && each failures "$job" --all
}

# same_inspection WHAT PORT JOB READONLY [RUN]: the read-only job reads as the writable
# one (the job's own path masked), run by RUN (as_user by default); nothing in it changes.
same_inspection() {
  local what=$1 port=$2 job=$3 ro=$4 run=${5-as_user} before want got
  before=$(cd "$ro" && find . -printf '%p %s %T@\n' | sort; cat state.db* | sha256sum)
  want=$(inspect "" "$job" "$port") || fail "$what: the writable job cannot be inspected"
  got=$(inspect "$run" "$ro" "$port") || fail "$what: the read-only job cannot be inspected"
  # status' hint for a job that is not running differs, and must: resume cannot run in a
  # directory you cannot write, so it says to copy it first.
  want=${want//$job/JOB}
  got=${got//$ro/JOB}
  if [[ $want == *'driver:     none (resume with `orch resume JOB`)'* ]]; then
    want=${want//'driver:     none (resume with `orch resume JOB`)'/HINT}
    [[ $got == *'driver:     none (this directory is read-only: to resume, copy it with `cp -a JOB COPY`, then `orch resume COPY`)'* ]] ||
      fail "$what: status does not say how to resume a read-only job: $got"
    got=${got//'driver:     none (this directory is read-only: to resume, copy it with `cp -a JOB COPY`, then `orch resume COPY`)'/HINT}
  fi
  expect_eq "$what: inspected as the writable job" "$want" "$got"
  expect_eq "$what: nothing written" "$before" \
    "$(cd "$ro" && find . -printf '%p %s %T@\n' | sort; cat state.db* | sha256sum)"
}

# cannot_run WHAT JOB [RUN]: resume and retry exit 1 with the message, and write nothing.
cannot_run() {
  local what=$1 job=$2 run=${3-as_user} cmd rc
  for cmd in resume retry; do
    rc=0
    $run "$ORCH" $cmd "$job" --progress none > /dev/null 2> "$T/run.err" || rc=$?
    expect_eq "$what: $cmd exits 1" 1 "$rc"
    grep -q "$job: you cannot run this job: .* is not writable (.*)\. Running a job (resume, retry) writes to its directory" "$T/run.err" ||
      { cat "$T/run.err" >&2; fail "$what: the message of $cmd"; }
  done
}

# 1. A finished job, made read-only.
cp -a "$T/done" "$T/ro"
chmod -R a-w "$T/ro"
same_inspection "a read-only copy" row.up "$T/done" "$T/ro"
cannot_run "a read-only copy" "$T/ro"

# 2. A job killed mid-run, copied with its log, made read-only.
"$ORCH" run slow.orch --job "$T/killed" --progress none 2> "$T/killed.log" &
driver=$!
ten() { [ -f "$T/killed/state.db" ] && [ "$(qlive "$T/killed" "SELECT count(*) FROM item WHERE port_id = 1" 2> /dev/null || echo 0)" -ge 10 ]; }
wait_until 30 "10 items in the killed job" ten
# 4b. Its payloads cannot be read by a user who cannot write the job while it runs.
rc=0
as_user "$ORCH" export "$T/killed" n.w > /dev/null 2> "$T/live.err" || rc=$?
expect_eq "a live job of another user: export exits 1" 1 "$rc"
grep -q "$T/killed: a driver (pid $driver) is running this job, and you cannot write its directory: its payloads cannot be read safely while it runs" "$T/live.err" ||
  { cat "$T/live.err" >&2; fail "a live job of another user: the message"; }
kill -9 "$driver"
if wait "$driver" 2> /dev/null; then fail "the killed driver exited 0"; fi
[ -s "$T/killed/state.db-wal" ] && [ -e "$T/killed/state.db-shm" ] || fail "the killed job has no log"
cp -a "$T/killed" "$T/killed-ro"
cp -a "$T/killed" "$T/killed-noshm"
chmod -R a-w "$T/killed-ro"
same_inspection "a read-only copy of a killed job" n.w "$T/killed" "$T/killed-ro"
cannot_run "a read-only copy of a killed job" "$T/killed-ro"

# 4a. The same without its -shm file.
rm "$T/killed-noshm/state.db-shm"
chmod -R a-w "$T/killed-noshm"
rc=0
as_user "$ORCH" status "$T/killed-noshm" > /dev/null 2> "$T/noshm.err" || rc=$?
expect_eq "a copy without state.db-shm: exit 1" 1 "$rc"
grep -q "state.db-wal holds commits that only a process that can write the directory can read .* Copy the job (cp -a $T/killed-noshm COPY) and inspect the copy" "$T/noshm.err" ||
  { cat "$T/noshm.err" >&2; fail "a copy without state.db-shm: the message"; }

# 5. A read-only file system.
if [ "$(id -u)" = 0 ] && mkdir "$T/mnt" && mount -t tmpfs -o size=32m tmpfs "$T/mnt" 2> /dev/null; then
  trap 'umount "$T/mnt" 2> /dev/null || umount -l "$T/mnt"; rm -rf "$T"' EXIT
  cp -a "$T/done" "$T/mnt/done"
  cp -a "$T/killed" "$T/mnt/killed"
  mount -o remount,ro "$T/mnt"
  same_inspection "a read-only file system" row.up "$T/done" "$T/mnt/done" ""
  same_inspection "a killed job on a read-only file system" n.w "$T/killed" "$T/mnt/killed" ""
  cannot_run "a read-only file system" "$T/mnt/done" ""
else
  echo "(no read-only mount here: part 5 skipped)"
fi
echo ok
