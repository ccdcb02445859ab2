#!/usr/bin/env bash
# scripts/bench/compare.sh ORCH_A ORCH_B [ROUNDS] [ROOTS] — two orch binaries on the pipeline
# of scripts/bench/scheduler, alternated: ROUNDS rounds (default 3), each running the
# scheduler benchmark (both durability modes, ROOTS roots: its default) with A, then with B.
# The machine is shared and its speed drifts by the quarter hour: only runs of the same
# minutes compare, so a change is judged by the pairs, not by figures of another hour.
# A helper, not a benchmark (the dot keeps scripts/bench/all from running it).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { echo "usage: $0 ORCH_A ORCH_B [ROUNDS] [ROOTS]" >&2; exit 2; }
a=$(realpath "$1")
b=$(realpath "$2")
rounds=${3:-3}
for bin in "$a" "$b"; do
  [ -x "$bin" ] || { echo "$0: $bin: not an executable" >&2; exit 2; }
done
printf '%-5s %-5s %-10s %10s %10s %12s %14s %14s %10s\n' round build durability grains \
  seconds grains/s state-B/grain payload-B/grain driver-RSS
for r in $(seq 1 "$rounds"); do
  for label in A B; do
    if [ "$label" = A ]; then bin=$a; else bin=$b; fi
    ORCH=$bin scripts/bench/scheduler ${4:+"$4"} | tail -n 2 |
      while IFS= read -r line; do printf '%-5s %-5s %s\n' "$r" "$label" "$line"; done
  done
done
echo "A = $a"
echo "B = $b"
