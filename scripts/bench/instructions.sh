#!/usr/bin/env bash
# scripts/bench/instructions.sh ORCH_A [ORCH_B] — the driver's instructions per grain, counted
# by callgrind (repeatable whatever else the machine does), for one or two orch binaries
# side by side. The pipeline is scripts/bench/scheduler's (three identity calls, batch=256);
# only the driver is counted (--trace-children=no: the workers run natively). Each binary
# runs at LOW and HIGH roots (default 2000 and 6000: 6,000 and 18,000 grains); the figure is
# the marginal cost, (instructions(HIGH) - instructions(LOW)) / (grains(HIGH) - grains(LOW)),
# which leaves out start-up and the plan. Pass release builds (meson --buildtype=release).
# SHAPE=autobatch counts scripts/bench/autobatch's pipeline instead (files() → read_file →
# expand split_lines → identity → reduce count, no `with` options), LOW and HIGH files of
# 50 lines (default 200 and 600: 10,600 and 31,800 grains).
# A helper for comparisons: scripts/bench/all does not run it.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/bench/instructions.sh ORCH_A [ORCH_B]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed" >&2; exit 2; }
shape=${SHAPE:-scheduler}
case $shape in
scheduler) low=${LOW:-2000} high=${HIGH:-6000} per=3 ;;
autobatch) low=${LOW:-200} high=${HIGH:-600} per=53 ;;
*) echo "instructions.sh: SHAPE is scheduler or autobatch" >&2; exit 2 ;;
esac

dir=$(mktemp -d "${TMPDIR:-/tmp}/orch-instr.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat > "$dir/noop.orch" <<'PIPE'
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
cat > "$dir/autobatch.orch" <<'PIPE'
pipeline auto
domain f
domain l in f
source f.path = files("in/*.txt")
call rd = read_file()
call sp = split_lines()
call id = identity()
call n  = count()
f.data = rd(f.path)
l.line = expand sp(f.data)
l.same = id(l.line)
f.n    = reduce n(l.same)
output f.n
PIPE

# instructions ORCH ROOTS: the driver's total instruction count for one run.
instructions() {
  local orch=$1 roots=$2
  local pipe=noop.orch durability=process
  if [ "$shape" = autobatch ]; then
    pipe=autobatch.orch durability=machine # the benchmark's own: the default
    rm -rf "$dir/in" && mkdir "$dir/in"
    awk -v f="$roots" -v d="$dir/in" 'BEGIN { for (i = 0; i < f; i++) {
      p = sprintf("%s/f%05d.txt", d, i)
      for (j = 0; j < 50; j++) printf "file %d line %d\n", i, j > p
      close(p) } }'
  else
    seq 1 "$roots" > "$dir/roots.txt"
  fi
  rm -rf "$dir/job" "$dir"/callgrind.out
  # The driver starts its workers from /proc/self/exe, which under valgrind is valgrind
  # itself: ORCH_WORKER_EXE names the binary to start instead.
  (cd "$dir" && ORCH_WORKER_EXE=$orch valgrind --tool=callgrind --trace-children=no \
     --callgrind-out-file="$dir/callgrind.out" \
     "$orch" run "$pipe" --job job --progress none --durability "$durability" \
     > "$dir/log" 2>&1) || { cat "$dir/log" >&2; exit 1; }
  sed -n 's/^summary: //p;s/^totals: //p' "$dir/callgrind.out" | head -1
}

printf '%-40s %14s %14s %12s\n' binary "Ir ($((low * per)) gr)" "Ir ($((high * per)) gr)" "Ir/grain"
for orch in "$@"; do
  a=$(instructions "$orch" "$low")
  b=$(instructions "$orch" "$high")
  awk -v o="$orch" -v a="$a" -v b="$b" -v gl=$((low * per)) -v gh=$((high * per)) 'BEGIN {
    printf "%-40s %14.0f %14.0f %12.0f\n", o, a, b, (b - a) / (gh - gl) }'
done
