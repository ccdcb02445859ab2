#!/usr/bin/env bash
# disk_full.sh — a job on a file system that fills up says the disk is full, not
# "Input/output error" (storage/payload.c write_error): LMDB reports a short
# write, which is what a full disk gives, as EIO; the payload store tells it from a failing
# disk by the room left on the file system. On a real, small file system (a 2 MiB tmpfs,
# so this test needs to mount one: skipped where it cannot):
#   1. `orch run` of a job whose payloads do not fit stops, exit 1, saying the disk is full;
#   2. `orch resume` with the disk still full says so again, and changes no committed fact
#      (it may add some: closing state.db frees the room of its write-ahead log);
#   3. once there is room, `orch resume` completes the job, and its exports equal those of
#      a run that had room from the start.
source "$(dirname "$0")/lib.sh"

mkdir "$T/mnt"
mount -t tmpfs -o size=2m tmpfs "$T/mnt" 2> /dev/null || {
  echo "skipped: cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)"
  exit 77
}
trap 'umount "$T/mnt" 2> /dev/null || umount -l "$T/mnt"; rm -rf "$T"' EXIT

# ~2.9 MB of payloads (read_file and upper), more than the 2 MiB.
big_files
cd "$T"
run_job big.orch "$T/clean"

# full WHAT ERRFILE: the command's message says the disk is full, and nothing else.
full() {
  grep -q "disk is full" "$2" || { cat "$2" >&2; fail "$1: the message does not say the disk is full"; }
  if grep -q "Input/output error" "$2"; then cat "$2" >&2; fail "$1: the message says Input/output error"; fi
}

# facts JOB: the committed facts that must not change while the disk is full.
facts() {
  q "$1" "SELECT i.port_id, i.entity_id, i.state, i.payload_id FROM item i ORDER BY 1, 2"
}

# 1. The run.
rc=0
"$ORCH" run big.orch --job "$T/mnt/j" --progress none > /dev/null 2> "$T/run.err" || rc=$?
expect_eq "run on a full disk exits 1" 1 "$rc"
full "run" "$T/run.err"

# 2. Resumes while the disk is still full: the same message, the same facts.
before=$(facts "$T/mnt/j")
for i in 1 2; do
  rc=0
  "$ORCH" resume "$T/mnt/j" --progress none > /dev/null 2> "$T/resume.err" || rc=$?
  expect_eq "resume $i on a full disk exits 1" 1 "$rc"
  full "resume $i" "$T/resume.err"
done
# (A resume may still commit a little: closing state.db frees its write-ahead log.)
expect_eq "the full disk changed no committed fact" "" \
  "$(comm -23 <(echo "$before" | sort) <(facts "$T/mnt/j" | sort))"

# 3. Room again: resume completes, as a run with room.
mount -o remount,size=64m "$T/mnt"
"$ORCH" resume "$T/mnt/j" --progress none > /dev/null 2> "$T/resume.err" ||
  { cat "$T/resume.err" >&2; fail "resume with room exited non-zero"; }
job_done "$T/mnt/j"
for port in file.up file.rows; do
  expect_eq "export $port equals a run with room" \
    "$("$ORCH" export "$T/clean" $port --all)" "$("$ORCH" export "$T/mnt/j" $port --all)"
done
echo ok
