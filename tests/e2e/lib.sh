# lib.sh — helpers for the end-to-end tests: sourced by tests/e2e/*.sh.
# $ORCH is the orch binary, $SRCDIR the source root (set by tests/meson.build).
set -euo pipefail

: "${ORCH:?ORCH must name the orch binary}"
: "${SRCDIR:?SRCDIR must name the source root}"

T=$(mktemp -d "${TMPDIR:-/tmp}/orch-e2e.XXXXXX")
trap 'rm -rf "$T"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1" >&2
    echo "--- expected" >&2
    printf '%s\n' "$2" >&2
    echo "--- actual" >&2
    printf '%s\n' "$3" >&2
    exit 1
  fi
}

# q JOB SQL: one query against the job's state.db, read-only.
q() {
  sqlite3 -readonly -batch -noheader "$1/state.db" "$2"
}

# run_job PIPELINE JOB [orch run options]: runs quietly, fails the test on a non-zero exit.
run_job() {
  local pipeline=$1 job=$2
  shift 2
  "$ORCH" run "$pipeline" --job "$job" --progress none "$@" 2> "$job.log" ||
    { cat "$job.log" >&2; fail "orch run $pipeline exited $?"; }
}
