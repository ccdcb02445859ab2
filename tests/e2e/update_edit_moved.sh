#!/usr/bin/env bash
# orch update DIR PIPELINE with a pipeline from another directory than the job's base
# directory (docs/incremental.md): the job's files() keys are paths relative to that
# directory, so such an edit is refused, saying where the pipeline must be, and the job is
# unchanged; the same pipeline put in the base directory is taken, its keys still relative.
source "$(dirname "$0")/lib.sh"
T=$(cd "$T" && pwd -P) # the physical path: a relative pipeline path resolves to it

mkdir -p "$T/a/data" "$T/b/data"
printf 'x\n' > "$T/a/data/x.txt"
printf 'x\n' > "$T/b/data/x.txt"
cat > "$T/a/p.orch" <<'PIPE'
pipeline p
domain doc
source doc.path = files("data/*.txt")
call rd = read_file()
call up = upper()
doc.text = rd(doc.path)
doc.u = up(doc.text)
output doc.text
output doc.u
PIPE
J=$T/job
run_job "$T/a/p.orch" "$J"
want=$("$ORCH" export "$J" doc.u)
expect_eq "the first run's keys" '{"key": "data/x.txt", "state": "present", "value": "X\n"}' "$want"

# refused JOB PIPELINE ITS_DIR WHAT: `orch update JOB PIPELINE` exits 1 naming both
# directories, and the job is as it was (plans, updates, export).
refused() {
  local err rc=0
  err=$("$ORCH" update "$1" "$2" --progress none 2>&1 > /dev/null) || rc=$?
  shift 2
  expect_eq "$2: exit status" 1 "$rc"
  case $err in
  *" is in $1, but this job's files() keys are paths relative to $T/a,"*"the job is unchanged"*"Put the edited pipeline in $T/a"*) ;;
  *) fail "$2: the refusal does not say where the pipeline must be: $err" ;;
  esac
  expect_eq "$2: plans" 1 "$(q "$J" "SELECT count(*) FROM plan")"
  expect_eq "$2: updates" 0 "$(q "$J" "SELECT count(*) FROM job_update")"
  expect_eq "$2: export" "$want" "$("$ORCH" export "$J" doc.u)"
}

# The same text in another directory: its files("data/*.txt") are b's files.
cp "$T/a/p.orch" "$T/b/p.orch"
refused "$J" "$T/b/p.orch" "$T/b" "the same pipeline in another directory"
# An edit there too.
sed 's/^call up = upper()$/call up = upper() with workers=2/' "$T/a/p.orch" > "$T/b/q.orch"
refused "$J" "$T/b/q.orch" "$T/b" "an edited pipeline in another directory"
# A relative path from another working directory names b all the same.
(cd "$T/b" && refused "$J" p.orch "$T/b" "a relative path") || exit 1
ln -s a "$T/alink"
refused "$J" "$T/alink/p.orch" "$T/alink" "the base directory through a symbolic link"

# In the base directory, an edit is taken and its keys stay relative to it.
sed 's/^call up = upper()$/call up = upper() with workers=2/' "$T/a/p.orch" > "$T/a/q.orch"
"$ORCH" update "$J" "$T/a/q.orch" --progress none 2> "$T/log" || { cat "$T/log" >&2; fail "update"; }
grep -q "adopted: only options changed, nothing runs again" "$T/log" || fail "$(cat "$T/log")"
expect_eq "an edit in the base directory" "$want" "$("$ORCH" export "$J" doc.u)"
# A relative path to it, from the base directory, is the same place.
sed 's/^call up = upper() with workers=2$/call up = upper() with workers=3/' "$T/a/q.orch" \
  > "$T/a/r.orch"
(cd "$T/a" && "$ORCH" update "$J" ./r.orch --progress none 2> "$T/log") ||
  { cat "$T/log" >&2; fail "update ./r.orch"; }
expect_eq "plans adopted" 3 "$(q "$J" "SELECT count(*) FROM plan")"
expect_eq "keys after the edits" "data/x.txt" "$(q "$J" "SELECT key FROM revisions WHERE state = 'live'")"
echo "update_edit_moved: ok"
