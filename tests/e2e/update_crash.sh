#!/usr/bin/env bash
# update_crash.sh — tests/crash_loop --update, bounded for CI: each job runs to its end,
# its lines() source is edited (lines removed, changed, added, repeated, moved; keys `L#2`
# and `x\0y` that now stand for other lines) and its files() source too (a file changed,
# added, removed; files that become unreadable, dangling symlinks, and readable again), then
# `orch update` is killed -9 10 times in all (at seeded random moments; some as the driver
# opens state.db, before the update is recorded, when a resume must refuse and change
# nothing; some as it opens the source, in the rescan, which must then be all or nothing),
# resumed by `orch resume` or `orch update`; committed facts never change, a retired root
# never comes back, no grain under a kept root runs again, job_update counts the removed,
# changed and new keys, and the outputs equal a fresh run's over the edited source (the checks are
# listed in tests/crash_loop/__main__.py). A changed file is also written again while the
# update runs (--rewrite-during-run), then written back: the next update must see it. The seed is fixed; the moments of the kills
# still vary with the machine's speed, which is the point of the test.
source "$(dirname "$0")/lib.sh"

CRASH_LOOP_DIR=$T/loop CRASH_LOOP_LINES=30 \
  python3 "$SRCDIR/tests/crash_loop" --update --rewrite-during-run 10 20261201 ||
  fail "tests/crash_loop --update --rewrite-during-run 10 20261201 found a violation (its output above)"
echo "update_crash: ok"
