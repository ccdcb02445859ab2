#!/usr/bin/env bash
# faults.sh — a job that meets a fault stops with a clear message, exit 1, and is left
# consistent and resumable; once the fault is gone, `orch resume` completes it with the
# same exports as a clean run (docs/operations.md "Guarantees", docs/sql.md
# "A job on disk"; DESIGN §6):
#   1. the payload store is full (ORCH_PAYLOAD_MAX_MAP caps the LMDB map: a full disk);
#   2. state.db is full (ORCH_STATE_MAX_PAGES caps it: SQLITE_FULL);
#   3. state.db truncated, its header overwritten, or another SQLite database: resume and
#      export refuse it as not a (whole) job, exit 1, promptly, and write nothing to it;
#   4. the stored plan was tampered with: resume refuses with a plan hash message;
#   5. a UDF library that does not exist: run names it, exit 1; once the library is
#      there, resume completes the job.
# A fault that persists (the cap still set) fails the resume the same way, changing no
# committed fact. A full payload store also leaves why in the attempts it stopped.
source "$(dirname "$0")/lib.sh"

# read_file and upper make ~2.9 MB of payloads, the lines ~24000 more.
big_files
PORTS="file.path file.text file.up row.line file.rows"

run_job "$T/big.orch" "$T/clean"
job_done "$T/clean"
expect_eq "clean: every file has 2000 rows" "$(printf '2000\n%.0s' $(seq 12))" \
  "$("$ORCH" export "$T/clean" file.rows | python3 -c '
import json, sys
for l in sys.stdin: print(json.loads(l)["value"])')"

# expect_cmd STATUS ERRFILE CMD...: runs CMD within 60 s (a hang fails), exit STATUS.
expect_cmd() {
  local want=$1 err=$2 got=0
  shift 2
  timeout 60 "$@" 2> "$err" || got=$?
  [ "$got" != 124 ] || fail "$* hung (killed after 60 s)"
  [ "$got" = "$want" ] || { cat "$err" >&2; fail "$* exited $got, not $want"; }
}

# has ERRFILE TEXT: the message holds TEXT.
has() {
  grep -qF -- "$2" "$1" || fail "the message does not say '$2': $(cat "$1")"
}

# stopped JOB: the job stopped consistent and resumable: failed (job.status, 0011),
# SQLite's integrity check is ok, every committed present item of every port is readable.
stopped() {
  expect_eq "$1: not finished: failed" failed "$(q "$1" "SELECT status FROM job")"
  expect_eq "$1: integrity" ok "$(q "$1" "PRAGMA integrity_check")"
  local port n
  for port in $(q "$1" "SELECT qualified FROM port ORDER BY id"); do
    n=$("$ORCH" export "$1" "$port" | wc -l) || fail "$1: export $port failed"
    expect_eq "$1: $port: every present item is readable" \
      "$(q "$1" "SELECT count(*) FROM item AS i JOIN port AS p ON p.id = i.port_id
                 WHERE p.qualified = '$port' AND i.state = 'present'")" "$n"
  done
}

# facts JOB: the committed facts that must never change.
facts() {
  q "$1" "SELECT 'i', port_id, entity_id, state, payload_id FROM item
          UNION ALL SELECT 'e', id, parent_id, ordinal, key FROM entity
          UNION ALL SELECT 'g', id, outcome, generation, '' FROM grain WHERE phase = 'sealed'
          ORDER BY 1, 2, 3" | sort
}

# finished_like_clean JOB: the job ran to its end with the exports of the clean run.
finished_like_clean() {
  job_done "$1"
  local port
  for port in $PORTS; do
    expect_eq "$1: export $port equals the clean run's" \
      "$("$ORCH" export "$T/clean" "$port" --all)" "$("$ORCH" export "$1" "$port" --all)"
  done
}

# ---- 1. payload store full ----------------------------------------------------------
J=$T/payload-full
ORCH_PAYLOAD_MAX_MAP=1500000 expect_cmd 1 "$T/err1" "$ORCH" run "$T/big.orch" --job "$J" \
  --progress none
has "$T/err1" "could not use the payload store: storing"
has "$T/err1" "payload map is full"
has "$T/err1" "continue with \`orch resume $J\`"
stopped "$J"
# kept_why JOB: the job says why it stopped, where a user looks later: the attempts of the
# batch that could not store its outputs end as errors with the worker's message (the rest
# then running end interrupted, with the stop's); none is left open for a resume to close
# without a word.
kept_why() {
  expect_eq "$1: the failed batch's attempts say the map is full" 1 \
    "$(q "$1" "SELECT count(*) > 0 FROM attempt WHERE outcome = 'error'
               AND message LIKE '%payload map is full%'")"
  expect_eq "$1: no attempt is left open" 0 \
    "$(q "$1" "SELECT count(*) FROM attempt WHERE outcome IS NULL")"
}
kept_why "$J"
before=$(facts "$J")
ORCH_PAYLOAD_MAX_MAP=1500000 expect_cmd 1 "$T/err1b" "$ORCH" resume "$J" --progress none
has "$T/err1b" "payload map is full"
stopped "$J"
kept_why "$J"
comm -23 <(echo "$before") <(facts "$J") > "$T/lost"
[ ! -s "$T/lost" ] || fail "a second full-map stop changed committed facts: $(head "$T/lost")"
"$ORCH" resume "$J" --progress none 2> "$T/log1" ||
  { cat "$T/log1" >&2; fail "resume once the map may grow exited $?"; }
finished_like_clean "$J"

# ---- 2. state.db full ---------------------------------------------------------------
J=$T/state-full
ORCH_STATE_MAX_PAGES=60 expect_cmd 1 "$T/err2" "$ORCH" run "$T/big.orch" --job "$J" \
  --progress none
has "$T/err2" "$J/state.db: database or disk is full"
has "$T/err2" "continue with \`orch resume $J\`"
stopped "$J"
before=$(facts "$J")
ORCH_STATE_MAX_PAGES=60 expect_cmd 1 "$T/err2b" "$ORCH" resume "$J" --progress none
has "$T/err2b" "database or disk is full"
stopped "$J"
comm -23 <(echo "$before") <(facts "$J") > "$T/lost"
[ ! -s "$T/lost" ] || fail "a second full-state stop changed committed facts: $(head "$T/lost")"
"$ORCH" resume "$J" --progress none 2> "$T/log2" ||
  { cat "$T/log2" >&2; fail "resume once state.db may grow exited $?"; }
finished_like_clean "$J"

# ---- 3. a damaged state.db ----------------------------------------------------------
# refused JOB TEXT [unchanged]: resume and export both exit 1 saying TEXT, hint nothing;
# with `unchanged`, state.db is left byte for byte as it was.
refused() {
  local sum
  sum=$(md5sum < "$1/state.db")
  expect_cmd 1 "$T/err3" "$ORCH" resume "$1" --progress none
  has "$T/err3" "$2"
  grep -q "continue with" "$T/err3" && fail "$1: a damaged job is not resumable: $(cat "$T/err3")"
  expect_cmd 1 "$T/err3e" "$ORCH" export "$1" file.up
  has "$T/err3e" "$2"
  [ "${3:-}" != unchanged ] ||
    expect_eq "$1: nothing was written to state.db" "$sum" "$(md5sum < "$1/state.db")"
}
damaged() { # NAME: a copy of the clean job
  cp -a "$T/clean" "$T/$1"
  echo "$T/$1"
}
J=$(damaged truncated)
truncate -s $(($(stat -c %s "$J/state.db") / 2)) "$J/state.db"
refused "$J" "$J/state.db: database file is truncated" unchanged
J=$(damaged header)
printf 'NOT SQLITE, NOT ORCH' | dd of="$J/state.db" conv=notrunc status=none
refused "$J" "$J/state.db: not an orch job (" unchanged
J=$(damaged foreign)
rm "$J/state.db"*
sqlite3 "$J/state.db" "CREATE TABLE t (x); INSERT INTO t VALUES (1)"
# Not `unchanged` (yet): resume switches such a database to WAL mode before it refuses it.
refused "$J" "$J/state.db: not an orch job"

# ---- 4. a tampered plan -------------------------------------------------------------
J=$(damaged tampered)
sqlite3 "$J/state.db" "UPDATE job SET plan_text = replace(plan_text, 'batch=2', 'batch=3')"
expect_eq "the plan text was changed" 1 "$(q "$J" "SELECT instr(plan_text, 'batch=3') > 0 FROM job")"
sum=$(md5sum < "$J/state.db")
expect_cmd 1 "$T/err4" "$ORCH" resume "$J" --progress none
has "$T/err4" "$J: plan hash mismatch: the job says"
expect_eq "$J: nothing was written to state.db" "$sum" "$(md5sum < "$J/state.db")"
sqlite3 "$J/state.db" "UPDATE job SET plan_text = 'pipeline broken' || char(10) || 'nonsense'"
expect_cmd 1 "$T/err4b" "$ORCH" resume "$J" --progress none
has "$T/err4b" "$J: the plan stored in the job does not compile"

# ---- 5. a UDF library that is not there ---------------------------------------------
printf '%s\n' abc xyz > "$T/in.txt"
cat > "$T/lib.orch" <<'EOF'
pipeline lib
domain doc
source doc.line = lines("in.txt")
call rev = library("missing.so", "orch_udf_sample")
doc.rev = rev(doc.line)
output doc.rev
EOF
J=$T/nolib
expect_cmd 1 "$T/err5" "$ORCH" run "$T/lib.orch" --job "$J" --progress none
has "$T/err5" "call rev cannot start its workers: library $T/missing.so: No such file or directory"
has "$T/err5" "continue with \`orch resume $J\`"
stopped "$J"
# The library this build makes for the loader tests (udfs/meson.build): the input reversed.
sample=$(dirname "$ORCH")/../udfs/udf_sample.so
if [ -f "$sample" ]; then
  cp "$sample" "$T/missing.so"
  "$ORCH" resume "$J" --progress none 2> "$T/log5" ||
    { cat "$T/log5" >&2; fail "resume once the library is there exited $?"; }
  job_done "$J"
  expect_eq "the library's values" "abc|present|cba
xyz|present|zyx" "$(states "$J" doc.rev)"
else
  echo "faults: $sample not built: the resume of the library case is skipped"
fi
echo "faults: ok"
