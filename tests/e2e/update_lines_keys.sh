#!/usr/bin/env bash
# orch update and lines() keys that do not say their line (DESIGN §9, §10): a repeated line
# gets `#2`, `#3`, and a NUL byte shows as `\0`, so one key may stand for different lines
# (the line `a#2` and the second `a`; the bytes x NUL y and the text `x\0y`). A root whose
# line differs from the one stored for its key is changed. After each update the export
# equals a fresh run's over the same file, byte for byte.
source "$(dirname "$0")/lib.sh"

cat > "$T/l.orch" <<'PIPE'
pipeline l
domain line
source line.v = lines("in.txt")
call up = upper()
line.u = up(line.v)
output line.u
PIPE

# case NAME BEFORE AFTER EXPECTED: a job over BEFORE (printf format), updated to AFTER;
# the update reports EXPECTED, and its export equals a fresh run's over AFTER.
case_() {
  local name=$1 d=$T/$1
  mkdir "$d"
  cp "$T/l.orch" "$d/l.orch"
  printf "$2" > "$d/in.txt"
  run_job "$d/l.orch" "$d/job"
  printf "$3" > "$d/in.txt"
  "$ORCH" update "$d/job" --progress none 2> "$d/log" || fail "$name: update: $(cat "$d/log")"
  grep -q "orch: update: $4" "$d/log" || fail "$name: expected $4: $(cat "$d/log")"
  run_job "$d/l.orch" "$d/fresh"
  "$ORCH" export "$d/job" line.u --all > "$d/u.out"
  "$ORCH" export "$d/fresh" line.u --all > "$d/f.out"
  cmp -s "$d/u.out" "$d/f.out" ||
    fail "$name: export differs from a fresh run's: $(diff "$d/u.out" "$d/f.out")"
  # Nothing changed since: the next update finds nothing.
  "$ORCH" update "$d/job" --progress none 2> "$d/log" || fail "$name: update: $(cat "$d/log")"
  grep -q "orch: update: 0 new, 0 changed, 0 removed" "$d/log" ||
    fail "$name: a second update: $(cat "$d/log")"
}

case_ repeat 'a\na\n' 'a\na#2\n' "0 new, 1 changed, 0 removed"
case_ suffix 'v#2\nv\nv\n' 'v\nv\n' "0 new, 1 changed, 1 removed"
case_ nul 'x\0y\n' 'x\\0y\n' "0 new, 1 changed, 0 removed"
# Lines whose keys say them stay as they are.
case_ plain 'p\nq\np\n' 'p\nq\np\nr\n' "1 new, 0 changed, 0 removed"
# A resume takes no change: a line that another took the key of is refused, as a changed
# line is (source_changed.sh).
mkdir "$T/resume"
cp "$T/l.orch" "$T/resume/l.orch"
printf 'a\na\n' > "$T/resume/in.txt"
run_job "$T/resume/l.orch" "$T/resume/job"
printf 'a\na#2\n' > "$T/resume/in.txt"
st=0
"$ORCH" resume "$T/resume/job" --progress none 2> "$T/err" || st=$?
expect_eq "resume refused" 1 "$st"
grep -qF "source line.v changed since the job last read it: the line of key \"a#2\" is not the one the job has; \`orch update $T/resume/job\` takes" \
  "$T/err" || fail "resume: $(cat "$T/err")"
printf 'a\na\n' > "$T/resume/in.txt"
"$ORCH" resume "$T/resume/job" --progress none 2> "$T/err" || fail "resume of the same lines: $(cat "$T/err")"
echo "update_lines_keys: ok"
