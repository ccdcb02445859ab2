#!/usr/bin/env bash
# crash_loop.sh — tests/crash_loop, bounded for CI: 20 kill -9 of the driver (some with
# a worker) at seeded random moments, a resume after each, on a pipeline with expand, a
# streaming expand (children published in chunks while it runs), filter, broadcast, reduce, sleeps and a flaky call over lines() (repeated lines, a NUL
# byte), and read_file over files() (a dangling symlink among them); committed facts never change, redone
# work stays within what was in flight, and the outputs equal an uninterrupted run's
# (the checks are listed in tests/crash_loop/__main__.py). The seed is fixed; the moments
# of the kills still vary with the machine's speed, which is the point of the test.
source "$(dirname "$0")/lib.sh"

CRASH_LOOP_DIR=$T/loop python3 "$SRCDIR/tests/crash_loop" 20 20240611 ||
  fail "tests/crash_loop 20 20240611 found a violation (its output above)"
echo "crash_loop: ok"
