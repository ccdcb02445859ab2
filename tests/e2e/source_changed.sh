#!/usr/bin/env bash
# A resume finishes what the job has; it does not take changes (that is `orch update`'s job,
# update.sh). It checks that the source still gives the job's roots, in their order: a
# changed or shorter source is refused with a message that names the difference and points
# to `orch update`, and changes nothing. Lines added after the job's roots are accepted
# (they are what an interrupted admission had not reached yet), and admitted.
source "$(dirname "$0")/lib.sh"

printf 'alpha\nbeta\ngamma\n' > "$T/in.txt"
cat > "$T/s.orch" <<'PIPE'
pipeline s
domain r
source r.v = lines("in.txt")
call up = upper()
r.u = up(r.v)
output r.u
PIPE
run_job "$T/s.orch" "$T/job"
cp "$T/in.txt" "$T/in.saved"
before=$(q "$T/job" "SELECT count(*) FROM attempt")
printf 'alpha\nBETA?\ngamma\n' > "$T/in.txt"
st=0
"$ORCH" resume "$T/job" --progress none 2> "$T/err" || st=$?
expect_eq "resume refused" 1 "$st"
grep -qF "source r.v changed since the job last read it: it gives \"BETA?\" where the job has \"beta\"; \`orch update $T/job\` takes new, changed and removed inputs" \
  "$T/err" || fail "message: $(cat "$T/err")"
printf 'alpha\n' > "$T/in.txt"
if "$ORCH" resume "$T/job" --progress none 2> "$T/err"; then fail "a shorter source accepted"; fi
grep -qF 'it ends where the job has "beta"' "$T/err" || fail "message: $(cat "$T/err")"
# A reordered source is a change too.
printf 'alpha\ngamma\nbeta\n' > "$T/in.txt"
if "$ORCH" resume "$T/job" --progress none 2> "$T/err"; then fail "a reordered source accepted"; fi
grep -qF 'it gives "gamma" where the job has "beta"' "$T/err" || fail "message: $(cat "$T/err")"
expect_eq "refusals changed nothing" "$before 3 finished" \
  "$(q "$T/job" "SELECT count(*) FROM attempt") $(q "$T/job" "SELECT count(*) FROM root") $(q "$T/job" "SELECT status FROM job")"
if grep -q "continue with \`orch resume" "$T/err"; then fail "a refusal that points to resume: $(cat "$T/err")"; fi
cp "$T/in.saved" "$T/in.txt"
"$ORCH" resume "$T/job" --progress none 2> /dev/null || fail "resume after restoring the source"
expect_eq "outputs unchanged" "ALPHA BETA GAMMA" "$("$ORCH" export "$T/job" r.u | python3 -c '
import json, sys
print(" ".join(json.loads(l)["value"] for l in sys.stdin))')"
# Appended lines, a repeat among them: admitted by a resume, with their keys.
printf 'delta\nalpha\n' >> "$T/in.txt"
"$ORCH" resume "$T/job" --progress none 2> "$T/err" || fail "resume with appended lines: $(cat "$T/err")"
expect_eq "appended lines admitted" "alpha=ALPHA beta=BETA gamma=GAMMA delta=DELTA alpha#2=ALPHA" \
  "$("$ORCH" export "$T/job" r.u | python3 -c '
import json, sys
print(" ".join(json.loads(l)["key"] + "=" + json.loads(l)["value"] for l in sys.stdin))')"
expect_eq "only the new roots ran" "$((before + 2))" "$(q "$T/job" "SELECT count(*) FROM attempt")"
echo "source_changed: ok"
