#!/usr/bin/env bash
# payload_identity.sh — a job's payload store is bound to the job (storage/
# orch_payload.h "identity", migrations/0004_payload_identity.sql). Item rows name payloads
# by ids that only the job's own store gives meaning to, so:
#   1. a lost payloads/ (deleted) is refused by resume and export: exit 1, a message that
#      says the store is missing, state.db unchanged, and no empty payloads/ made in its
#      place;
#   2. `orch status` of such a job does not create payloads/ either;
#   3. payloads/ copied from another job is refused by resume and export, naming both
#      identities; state.db unchanged; the other job's bytes are never exported as this
#      job's.
source "$(dirname "$0")/lib.sh"

printf '%s\n' one two three > "$T/a.txt"
printf '%s\n' uno dos tres > "$T/b.txt"
for x in a b; do
  cat > "$T/$x.orch" <<EOF2
pipeline up_$x
domain doc
source doc.line = lines("$x.txt")
call up = upper()
doc.u = up(doc.line)
output doc.u
EOF2
done
cd "$T"
run_job a.orch "$T/a"
run_job a.orch "$T/a2"
run_job b.orch "$T/b"
for j in a a2 b; do job_done "$T/$j"; done
expect_eq "a exports its own bytes" "$(printf '%s\n' ONE TWO THREE)" \
  "$("$ORCH" export "$T/a" doc.u --all | grep -o '"[A-Z]*"' | tr -d '"')"

# refused JOB WHAT PATTERN: resume and export both exit 1 with a message matching
# PATTERN, and leave state.db byte for byte as it was.
refused() {
  local job=$1 what=$2 pattern=$3 before rc
  before=$(sha256sum < "$job/state.db")
  rc=0
  "$ORCH" resume "$job" --progress none > "$T/out" 2> "$T/err" || rc=$?
  expect_eq "$what: resume exits 1" 1 "$rc"
  grep -q -- "$pattern" "$T/err" || { cat "$T/err" >&2; fail "$what: resume's message"; }
  rc=0
  "$ORCH" export "$job" doc.u --all > "$T/out" 2> "$T/err" || rc=$?
  expect_eq "$what: export exits 1" 1 "$rc"
  grep -q -- "$pattern" "$T/err" || { cat "$T/err" >&2; fail "$what: export's message"; }
  expect_eq "$what: nothing exported" "" "$(cat "$T/out")"
  expect_eq "$what: state.db unchanged" "$before" "$(sha256sum < "$job/state.db")"
}

# 1. payloads/ lost.
rm -rf "$T/a/payloads"
refused "$T/a" "lost payloads/" "payloads: the job's payload store is missing"
[ ! -e "$T/a/payloads" ] || fail "lost payloads/: an empty store was made in its place"

# 2. a read-only command never creates payloads/.
"$ORCH" status "$T/a" > /dev/null 2>&1 || true
[ ! -e "$T/a/payloads" ] || fail "orch status created payloads/"

# 3. another job's payloads/.
rm -rf "$T/a2/payloads"
cp -a "$T/b/payloads" "$T/a2/payloads"
want=$(q "$T/a2" "SELECT payload_identity FROM job")
have=$(q "$T/b" "SELECT payload_identity FROM job")
[ ${#want} -eq 32 ] && [ "$want" != "$have" ] || fail "identities: '$want' '$have'"
refused "$T/a2" "another job's payloads/" \
  "payloads: this payload store is not the job's (identity $have, the job expects $want)"
echo ok
