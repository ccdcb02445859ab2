#!/usr/bin/env bash
# checkpoint.sh — checkpoints of state.db's log run on the store's own thread while the
# driver commits (storage/background.c), and the end-of-run sweep of orphans is skipped
# when a count shows nothing to sweep (engine/prop/reclaim.c, "The end of a run"). A job of
# 180,000 grains writes its log past the checkpoint threshold (8,000 pages) several times:
#   1. run to its end, its outputs are its inputs, the database is intact, and the payload
#      store holds exactly the payloads live items name (no orphan, none missing);
#   2. killed -9 once a checkpoint has written to the database file while it ran (so in
#      the middle of the cycles of checkpoints), it resumes to the same outputs, intact,
#      with no orphan either.
source "$(dirname "$0")/lib.sh"
command -v mdb_stat > /dev/null || fail "mdb_stat (lmdb-utils, scripts/setup) is needed"

seq 1 60000 > "$T/roots.txt"
cat > "$T/noop.orch" <<'PIPE'
pipeline noop
domain r
source r.v = lines("roots.txt")
call a = identity() with batch=256
call b = identity() with batch=256
call c = identity() with batch=256
r.a = a(r.v)
r.b = b(r.a)
r.c = c(r.b)
output r.c
PIPE

# intact JOB: outputs, integrity, and a payload store that holds just what items name.
intact() {
  local J=$1
  job_done "$J"
  expect_eq "$J: every root's output is its line" "$(cat "$T/roots.txt")" \
    "$("$ORCH" export "$J" r.c | python3 -c '
import json, sys
for l in sys.stdin:
    print(json.loads(l)["value"])')"
  expect_eq "$J: integrity_check" ok "$(q "$J" "PRAGMA integrity_check")"
  local named entries
  named=$(q "$J" "SELECT (SELECT count(DISTINCT payload_id) FROM item
                          WHERE payload_id IS NOT NULL) -
                         (SELECT coalesce(sum(last - first + 1), 0) FROM reclaimed_span)")
  entries=$(mdb_stat -s data "$J/payloads" | awk '/Entries:/ { print $2 }')
  expect_eq "$J: the payload store holds just the payloads live items name" "$named" "$entries"
  expect_eq "$J: those are the outputs" 60000 "$entries"
}

# ---- 1. to the end ---------------------------------------------------------------------
run_job "$T/noop.orch" "$T/ref" --durability process
intact "$T/ref"

# ---- 2. killed while its checkpoints run ---------------------------------------------------
# A new job's database file stays small until a checkpoint copies pages into it; the
# connection's close at the end copies the rest, but the driver is alive until then.
J=$T/killed
"$ORCH" run "$T/noop.orch" --job "$J" --progress none --durability process 2> "$J.log" &
driver=$!
checkpointed() {
  [ "$(stat -c %s "$J/state.db" 2> /dev/null || echo 0)" -gt 4194304 ] && gone_not "$driver"
}
gone_not() { ! gone "$1"; }
wait_until 120 "a checkpoint of $J while its driver runs" checkpointed
kill -9 "$driver"
if wait "$driver" 2> /dev/null; then fail "the killed driver exited 0"; fi
"$ORCH" resume "$J" --progress none 2> "$T/resume.log" ||
  { cat "$T/resume.log" >&2; fail "orch resume after kill -9 exited $?"; }
intact "$J"
