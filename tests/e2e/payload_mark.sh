#!/usr/bin/env bash
# payload_mark.sh — an older state of the job's own payload store is refused
# (migrations/0007_payload_mark.sql, engine/job/jobdir.c payloads_current). The identity
# (payload_identity.sh) tells this job's store from another's; the high-water mark of the
# payload ids that state.db names tells it from an older copy of itself:
#   1. the mark is exact: job.payload_mark is the largest id a committed item names, after a
#      run and after a run killed (kill -9) mid-way under --durability process;
#   2. payloads/ copied mid-run (the driver killed: what a machine crash under
#      --durability process leaves when the store loses its last writes, and what an old
#      backup is), then the job finished, then the copy put back: resume, export and status
#      refuse it (exit 1, a message that says what is wrong and what to do), state.db is
#      unchanged, and no byte of it is exported;
#   3. state.db hand-edited to name an id the store never handed out (the same crash, seen
#      from state.db): refused; edited back: accepted;
#   4. the other way round — state.db older than payloads/ (a machine crash that lost
#      state.db's last commits, never the store's: --durability machine) — is sound: resume
#      completes and the exports equal an uninterrupted run's, without reusing an id
#      (every port is an `output` here: a payload reclaimed since the older state.db was
#      taken would be missing for it; docs/operations.md "Reclamation" says when);
#   5. a job made before schema 7 gets the largest id its items name when resume migrates
#      it.
source "$(dirname "$0")/lib.sh"

seq 1 60 > "$T/nums.txt"
cat > "$T/slow.orch" <<'EOF'
pipeline slow
domain n
source n.v = lines("nums.txt")
call nap = sleep(ms=30)       with workers=2, batch=1
call up  = upper()
n.w = nap(n.v)
n.u = up(n.w)
output n.u
output n.w
output n.v
EOF
cd "$T"

run_job slow.orch "$T/clean"
job_done "$T/clean"
clean=$("$ORCH" export "$T/clean" n.u --all)

# mark_exact JOB: job.payload_mark equals the largest payload id an item names.
mark_exact() {
  expect_eq "$1: payload_mark is the largest id an item names" \
    "$(q "$1" "SELECT coalesce(max(payload_id), 0) FROM item")" \
    "$(q "$1" "SELECT payload_mark FROM job")"
}
mark_exact "$T/clean"

# refused JOB WHAT: resume, export and status exit 1 saying the store is older, and
# state.db is byte for byte as it was.
refused() {
  local job=$1 what=$2 before rc cmd
  before=$(sha256sum < "$job/state.db")
  for cmd in "resume $job --progress none" "export $job n.u --all" "status $job"; do
    rc=0
    # shellcheck disable=SC2086
    "$ORCH" $cmd > "$T/out" 2> "$T/err" || rc=$?
    expect_eq "$what: orch $cmd exits 1" 1 "$rc"
    grep -q "payloads: this payload store is older than the job's state: state.db names payloads up to id [0-9]*, the store holds ids below [0-9]* only" "$T/err" &&
      grep -q "Restore the newest copy of this job's payloads/, or run the pipeline again as a new job" "$T/err" ||
      { cat "$T/err" >&2; fail "$what: the message of orch $cmd"; }
    expect_eq "$what: orch $cmd prints nothing" "" "$(cat "$T/out")"
  done
  expect_eq "$what: state.db unchanged" "$before" "$(sha256sum < "$job/state.db")"
}

# at_least JOB N: JOB has at least N items of n.u committed (read while a driver writes).
at_least() {
  [ -f "$1/state.db" ] && [ "$(qlive "$1" "SELECT count(*) FROM item AS i JOIN port AS p
    ON p.id = i.port_id WHERE p.qualified = 'n.u'" 2> /dev/null || echo 0)" -ge "$2" ]
}

# start_and_kill JOB: runs slow.orch as JOB in the background with --durability process,
# and kills the driver with -9 once at least 20 items of n.u are committed.
start_and_kill() {
  "$ORCH" run slow.orch --job "$1" --progress none --durability process 2> "$1.log" &
  local driver=$!
  wait_until 30 "20 items of n.u in $1" at_least "$1" 20
  kill -9 "$driver"
  if wait "$driver" 2> /dev/null; then fail "the killed driver exited 0"; fi
}

# 1, 2. An older copy of payloads/.
start_and_kill "$T/a"
mark_exact "$T/a"
cp -a "$T/a/payloads" "$T/a.old"
"$ORCH" resume "$T/a" --progress none 2> "$T/a.log" ||
  { rc=$?; cat "$T/a.log" >&2; fail "resume of a exited $rc"; }
job_done "$T/a"
mark_exact "$T/a"
expect_eq "a: exports equal the uninterrupted run's" "$clean" "$("$ORCH" export "$T/a" n.u --all)"
rm -rf "$T/a/payloads"
cp -a "$T/a.old" "$T/a/payloads"
refused "$T/a" "an older copy of payloads/"

# 3. state.db names an id that the store never handed out.
next=$(q "$T/clean" "SELECT payload_mark FROM job")
cp -a "$T/clean" "$T/c"
sqlite3 "$T/c/state.db" "UPDATE job SET payload_mark = payload_mark + 5"
refused "$T/c" "a mark above the store's ids"
sqlite3 "$T/c/state.db" "UPDATE job SET payload_mark = $next"
"$ORCH" resume "$T/c" --progress none 2> "$T/c.log" ||
  { rc=$?; cat "$T/c.log" >&2; fail "resume of c with its mark put back exited $rc"; }
expect_eq "c: exports equal the uninterrupted run's" "$clean" "$("$ORCH" export "$T/c" n.u --all)"

# 4. An older state.db beside a newer payloads/: sound.
start_and_kill "$T/d"
mkdir "$T/d.old"
cp -a "$T/d/state.db"* "$T/d.old/"
"$ORCH" resume "$T/d" --progress none 2> "$T/d.log" ||
  { rc=$?; cat "$T/d.log" >&2; fail "resume of d exited $rc"; }
rm -f "$T/d/state.db"*
cp -a "$T/d.old/"* "$T/d/"
"$ORCH" resume "$T/d" --progress none 2> "$T/d.log" ||
  { rc=$?; cat "$T/d.log" >&2; fail "resume of d with an older state.db exited $rc"; }
job_done "$T/d"
mark_exact "$T/d"
expect_eq "d: exports equal the uninterrupted run's" "$clean" "$("$ORCH" export "$T/d" n.u --all)"
expect_eq "d: no payload id named twice" 0 \
  "$(q "$T/d" "SELECT count(*) FROM (SELECT payload_id FROM item WHERE payload_id IS NOT NULL GROUP BY 1 HAVING count(*) > 1)")"

# 5. A job from before schema 7: the migration computes the mark.
cp -a "$T/clean" "$T/e"
# (and before 0008: every port here is an output, so nothing was reclaimed; and before
# 0010, whose views read reclaimed and are dropped first)
expect_eq "e: nothing reclaimed" 0 "$(q "$T/e" "SELECT count(*) FROM reclaimed")"
sqlite3 "$T/e/state.db" "DROP VIEW grains; DROP VIEW progress; DROP VIEW workers; ALTER TABLE attempt DROP COLUMN host; ALTER TABLE attempt DROP COLUMN slurm_job;
  DROP VIEW revisions; DROP TABLE root; DROP TABLE job_update; DROP TABLE plan;
                         ALTER TABLE job DROP COLUMN base_dir;
                         DROP VIEW items; DROP VIEW attempts; DROP VIEW timeline;
                         ALTER TABLE grain DROP COLUMN ready_at;
                         ALTER TABLE item DROP COLUMN payload_size;
                         ALTER TABLE job DROP COLUMN payload_mark;
                         DROP VIEW reclaimed; DROP TABLE reclaimed_span;
                         ALTER TABLE job DROP COLUMN live_bytes;
                         ALTER TABLE job DROP COLUMN max_unsealed;
                         ALTER TABLE job DROP COLUMN max_live_bytes;
                         PRAGMA user_version = 6"
"$ORCH" resume "$T/e" --progress none 2> "$T/e.log" ||
  { rc=$?; cat "$T/e.log" >&2; fail "resume of e (schema 6) exited $rc"; }
expect_eq "e: migrated to schema 7 or later" 1 "$(q "$T/e" "PRAGMA user_version" | awk '{print ($1 >= 7)}')"
mark_exact "$T/e"
echo ok
