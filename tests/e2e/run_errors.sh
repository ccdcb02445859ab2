#!/usr/bin/env bash
# run_errors.sh — `orch run` that cannot run: a UDF library that does not exist fails with
# a message naming the call and the library, exit 1, promptly (no hang waiting on workers
# that can never start); an exec program that does not exist likewise; a job directory that
# already exists (empty, or a job) is refused, exit 1, and left as it was.
source "$(dirname "$0")/lib.sh"

printf '%s\n' a b > "$T/in.txt"
# expect_run STATUS JOB PIPELINE: orch run within 60 s (a hang fails), exit STATUS;
# stderr in $T/err.
expect_run() {
  local want=$1 job=$2 pipeline=$3 got=0
  timeout 60 "$ORCH" run "$pipeline" --job "$job" --progress none 2> "$T/err" || got=$?
  [ "$got" != 124 ] || fail "orch run $pipeline hung (killed after 60 s)"
  [ "$got" = "$want" ] || { cat "$T/err" >&2; fail "orch run $pipeline exited $got, not $want"; }
}

cat > "$T/nolib.orch" <<'EOF'
pipeline nolib
domain doc
source doc.line = lines("in.txt")
call x = library("nope.so", "x")
doc.y = x(doc.line)
EOF
expect_run 1 "$T/nolib" "$T/nolib.orch"
grep -q "call x cannot start its workers" "$T/err" || fail "no clear message: $(cat "$T/err")"
grep -q "nope.so" "$T/err" || fail "the message does not name the library: $(cat "$T/err")"
expect_eq "nothing ran" 0 "$(q "$T/nolib" "SELECT count(*) FROM attempt")"
expect_eq "not finished" running "$(q "$T/nolib" "SELECT status FROM job")"

cat > "$T/noexec.orch" <<'EOF'
pipeline noexec
domain doc
source doc.line = lines("in.txt")
call x = exec("/nonexistent/orch-test-prog")
doc.y = x(doc.line)
EOF
expect_run 1 "$T/noexec" "$T/noexec.orch"
grep -q "call x cannot start its workers" "$T/err" || fail "no clear message: $(cat "$T/err")"

# An existing directory is never a new job.
cat > "$T/ok.orch" <<'EOF'
pipeline ok
domain doc
source doc.line = lines("in.txt")
call x = upper()
doc.y = x(doc.line)
EOF
mkdir "$T/empty"
expect_run 1 "$T/empty" "$T/ok.orch"
grep -q "already exists" "$T/err" || fail "no clear message: $(cat "$T/err")"
expect_eq "the empty directory is left empty" "" "$(ls -A "$T/empty")"
run_job "$T/ok.orch" "$T/job"
before=$(cd "$T/job" && find . -type f | sort | xargs md5sum)
expect_run 1 "$T/job" "$T/ok.orch"
grep -q "orch resume" "$T/err" || fail "no hint to resume: $(cat "$T/err")"
expect_eq "the existing job is untouched" "$before" "$(cd "$T/job" && find . -type f | sort | xargs md5sum)"
expect_eq "its values" "a|present|A
b|present|B" "$(states "$T/job" doc.y)"
echo "run_errors: ok"
