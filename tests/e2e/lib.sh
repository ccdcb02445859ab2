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

# qlive JOB SQL: like q, for a job that a driver is writing right now (waits on a busy
# database instead of failing; one statement reads one snapshot).
qlive() {
  sqlite3 -readonly -batch -noheader -cmd ".timeout 5000" "$1/state.db" "$2"
}

# states JOB D.P: every entity of the port in entity order, one line each:
# KEY|STATE|VALUE (present) or KEY|STATE|ERROR (failed) or KEY|STATE| (dropped, suppressed).
states() {
  "$ORCH" export "$1" "$2" --all | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    print("%s|%s|%s" % (o["key"], o["state"], o.get("value", o.get("error", ""))))'
}

# attempts JOB CALL KEY: the number of attempt rows of the grain of CALL on entity KEY.
attempts() {
  q "$1" "SELECT count(a.id) FROM grain AS g JOIN call AS c ON c.id = g.call_id
          JOIN entity_key AS k ON k.entity_id = g.entity_id
          LEFT JOIN attempt AS a ON a.grain_id = g.id
          WHERE c.name = '$2' AND k.key = '$3'"
}

# grain JOB CALL KEY: phase|outcome|generation of the grain of CALL on entity KEY (the
# `grains` view: in_flight while an attempt is open).
grain() {
  q "$1" "SELECT g.phase, coalesce(g.outcome, ''), g.generation FROM grains AS g
          JOIN call AS c ON c.id = g.call_id JOIN entity_key AS k ON k.entity_id = g.entity_id
          WHERE c.name = '$2' AND k.key = '$3'"
}

# wait_until SECONDS WHAT CMD...: polls CMD (every 20 ms) until it succeeds; fails the
# test after SECONDS. For state a background job must reach, never to let a race settle.
wait_until() {
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out after ${limit}s waiting for: $what"
    sleep 0.02
  done
}

# alive PGREP-ARGS...: prints the pids that `pgrep PGREP-ARGS...` finds, less zombies (dead
# processes that their new parent, often init, has not reaped yet); status 1 when none.
alive() {
  local pids
  pids=$(pgrep -d, "$@") || return 1
  pids=$(ps -o pid=,stat= -p "$pids" 2> /dev/null | awk '$2 !~ /^Z/ { print $1 }') || true
  [ -n "$pids" ] && echo $pids
}

# gone PID...: true when none of the processes is alive (zombies count as gone).
gone() {
  local p
  for p in "$@"; do
    if [ -e "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2> /dev/null)" != Z ]; then
      return 1
    fi
  done
}

# none_left SECONDS PGREP-ARGS...: no process that `pgrep PGREP-ARGS...` finds is alive
# within SECONDS, polled: `none_left 5 -f "$T/x_udf\.py"` (command lines that hold a regular
# expression: name something unique to $T), `none_left 5 -g PGID` (a process group). For
# the exec() programs of a run that is over: no process may outlive its run. On failure
# the survivors are listed, then killed by pid, so that a failed test leaves nothing behind.
none_left() {
  local limit=$1 left
  shift
  local deadline=$((SECONDS + limit))
  while left=$(alive "$@"); do
    if [ "$SECONDS" -ge "$deadline" ]; then
      local listing
      listing=$(ps -o pid,ppid,pgid,stat,etimes,args -p "$(echo $left | tr ' ' ,)" || true)
      kill -9 $left 2> /dev/null || true
      fail "processes outlived their run by ${limit}s (pgrep $*; now killed):
$listing"
    fi
    sleep 0.02
  done
}

# summary_ok JOB LOG: the per-port table of the run's summary in LOG (the driver counts
# the items as it publishes them, from the store's counts at its start) is what state.db
# holds.
summary_ok() {
  local got want
  got=$(awk '$1 == "port" && $2 == "present" { t = 1; next }
             t && NF == 5 && $2 ~ /^[0-9]+$/ { print $1 "|" $2 "|" $3 "|" $4 "|" $5; next }
             t { t = 0 }' "$2")
  want=$(q "$1" "SELECT p.qualified, sum(i.state = 'present'), sum(i.state = 'dropped'),
                        sum(i.state = 'failed'), sum(i.state = 'suppressed')
                 FROM port AS p LEFT JOIN item AS i ON i.port_id = p.id
                 GROUP BY p.id ORDER BY p.id" | sed 's/||||$/|0|0|0|0/')
  [ -n "$got" ] || fail "$2: no summary table"
  expect_eq "$2: the summary's item counts" "$want" "$got"
}

# job_done JOB: the job ran to its end: finished, every grain sealed, every attempt closed.
job_done() {
  expect_eq "$1: job finished" finished "$(q "$1" "SELECT status FROM job")"
  expect_eq "$1: every grain sealed" 0 "$(q "$1" "SELECT count(*) FROM grain WHERE phase <> 'sealed'")"
  expect_eq "$1: every attempt closed" 0 "$(q "$1" "SELECT count(*) FROM attempt WHERE outcome IS NULL")"
}

# big_files [OUTPUTS]: writes $T/data/ (12 files of 2,000 random 59-letter lines, 120 KB
# each: ~2.9 MB of payloads through read_file and upper, 24,000 lines more) and
# $T/big.orch (read -> upper -> split -> count) over them, for the tests that fill a store.
# OUTPUTS (default "file.up file.rows") are its `output` ports; "" declares none, so that
# nothing is reclaimed while it runs.
big_files() {
  local outputs=${1-file.up file.rows} p
  mkdir "$T/data"
  python3 - "$T/data" <<'PY'
import random, sys
r = random.Random(3)
for i in range(12):
    with open("%s/f%02d.txt" % (sys.argv[1], i), "w") as f:
        for k in range(2000):
            f.write("".join(r.choice("abcdefgh ") for _ in range(59)) + "\n")
PY
  cat > "$T/big.orch" <<'PIPE'
pipeline big
domain file
domain row in file
source file.path = files("data/*.txt")
call read = read_file()
call up   = upper()           with batch=2
call cut  = split(sep="\n")   with batch=2
call n    = count()
file.text = read(file.path)
file.up   = up(file.text)
row.line  = expand cut(file.up)
file.rows = reduce n(row.line)
PIPE
  for p in $outputs; do echo "output $p" >> "$T/big.orch"; done
}

# expand_pipeline NAME CALL: $T/NAME.orch, the streaming tests' shape over $T/one.txt: each
# line expanded by the call CALL (a UDF with its arguments and options), every child
# through identity, counted back; part.w and doc.n are outputs (expand_exports JOB).
expand_pipeline() {
  cat > "$T/$1.orch" <<PIPE
pipeline $1
domain doc
domain part in doc
source doc.line = lines("one.txt")
call gen = $2
call id  = identity()
call cnt = count()
part.v = expand gen(doc.line)
part.w = id(part.v)
doc.n  = reduce cnt(part.w)
output part.w
output doc.n
PIPE
}

expand_exports() {
  "$ORCH" export "$1" part.w --all
  "$ORCH" export "$1" doc.n --all
}

# expand_ahead JOB: for expand_pipeline's shape over the line "alpha", the ms between the end
# of child 0's map grain and the end of the expansion (how far ahead of it child 0 ran).
expand_ahead() {
  q "$1" "SELECT x.ended_at - m.ended_at FROM attempt AS x, attempt AS m
          JOIN grain AS gx ON gx.id = x.grain_id JOIN call AS cx ON cx.id = gx.call_id
          JOIN grain AS gm ON gm.id = m.grain_id JOIN call AS cm ON cm.id = gm.call_id
          JOIN entity AS e ON e.id = gm.entity_id
          WHERE cx.name = 'gen' AND cm.name = 'id' AND e.key = 'alpha/0'"
}

# attempts_since JOB N: the attempts of each call with an id above N, "call=n ..." in call
# order; last_attempt JOB: the id of the last attempt (0: none).
attempts_since() {
  q "$1" "SELECT group_concat(name || '=' || n, ' ') FROM (SELECT c.name, (SELECT count(*)
          FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id WHERE g.call_id = c.id
          AND a.id > $2) AS n FROM call AS c ORDER BY c.id)"
}
last_attempt() { q "$1" "SELECT coalesce(max(id), 0) FROM attempt"; }

# same_as_fresh JOB PIPELINE: every port of JOB exports what a fresh run of PIPELINE gives.
same_as_fresh() {
  rm -rf "$T/fresh"
  run_job "$2" "$T/fresh"
  local port
  for port in $(q "$T/fresh" "SELECT qualified FROM port ORDER BY id"); do
    "$ORCH" export "$1" "$port" --all > "$T/got" || fail "export $port"
    "$ORCH" export "$T/fresh" "$port" --all > "$T/want"
    cmp -s "$T/got" "$T/want" || fail "$2: $port differs from a fresh run: $(diff "$T/got" "$T/want")"
  done
}
