#!/usr/bin/env bash
# Roots are numbered by their position in the source, so a resume checks that the source
# still gives the roots the job has, in order: a changed source is refused with a message,
# and the job resumes once the source is restored.
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
printf 'alpha\nBETA?\ngamma\n' > "$T/in.txt"
st=0
"$ORCH" resume "$T/job" --progress none 2> "$T/err" || st=$?
expect_eq "resume refused" 1 "$st"
grep -q 'source r.v changed since the job started: root 1 is "beta", the source now gives "BETA?"' \
  "$T/err" || fail "message: $(cat "$T/err")"
printf 'alpha\n' > "$T/in.txt"
if "$ORCH" resume "$T/job" --progress none 2> "$T/err"; then fail "a shorter source accepted"; fi
grep -q 'root 1 is "beta", the source now gives nothing' "$T/err" || fail "message: $(cat "$T/err")"
cp "$T/in.saved" "$T/in.txt"
"$ORCH" resume "$T/job" --progress none 2> /dev/null || fail "resume after restoring the source"
expect_eq "outputs unchanged" "ALPHA BETA GAMMA" "$("$ORCH" export "$T/job" r.u | python3 -c '
import json, sys
print(" ".join(json.loads(l)["value"] for l in sys.stdin))')"
echo "source_changed: ok"
