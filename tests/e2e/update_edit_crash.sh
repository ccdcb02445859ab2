#!/usr/bin/env bash
# update_edit_crash.sh — tests/crash_loop --edit, bounded for CI: each job runs a
# pipeline over lines() (repeated lines, a NUL byte) and files() (an unreadable one) to
# its end (some declare outputs, so their intermediates are reclaimed), then
# `orch update DIR EDITED` (a middle call's argument changed, a new count() downstream, a
# leaf statement dropped, or --rerun CALL; every second job also --rerun rd) is killed -9 8
# times in all, at seeded random moments (as it opens state.db or compiles the edited
# pipeline, before the edit is recorded: a plain resume then does nothing and the update is
# run again; as it opens the source, in the rescan; later, in the work), and resumed.
# files/f1.txt is rewritten the moment the edit's rescan commits, and put back after the
# edit, followed by `orch update DIR`. Checked (the list is in
# tests/crash_loop/__main__.py): committed facts never change; every port of the edited
# pipeline exports what a fresh run of it gives, byte for byte, a dropped one refuses; no
# grain of a call the edit left as it was runs when its twin's result could be taken over,
# unless a resume found it READY; the update's job_update row has its plan, scanned_at,
# finished_at, and replanned every root live before it. The seed is fixed; the moments of the kills
# still vary with the machine's speed.
source "$(dirname "$0")/lib.sh"

CRASH_LOOP_DIR=$T/loop CRASH_LOOP_LINES=30 \
  python3 "$SRCDIR/tests/crash_loop" --edit --rewrite-during-run 8 20261203 ||
  fail "tests/crash_loop --edit --rewrite-during-run 8 20261203 found a violation (its output above)"
echo "update_edit_crash: ok"
