#!/usr/bin/env bash
# job_stop.sh — `orch status` says how a job's last driver stopped (docs/commands.md "orch
# status"; migrations/0006_job_stop.sql), never `running` for a job that no driver runs:
#   1. SIGINT, then SIGTERM, of the driver: `interrupted`, with the driver's message and
#      time; resume clears it;
#   2. kill -9 of the driver (after a recorded stop: the record was cleared when that
#      driver started): `interrupted`, "without recording why";
#   3. a fault (workers that cannot start; the payload store full; state.db full):
#      `failed`, with the stop's message; once the cause is gone, resume finishes the job
#      and status says `finished` with no stop line.
# job.status says interrupted and failed too (migrations/0011_job_status.sql); after
# kill -9 it stays `running`: only the lock tells.
source "$(dirname "$0")/lib.sh"

# status_of JOB: the status line's value. stop_of JOB: the stopped line's value, or "".
status_of() {
  "$ORCH" status "$1" | sed -n 's/^status:     //p'
}
stop_of() {
  "$ORCH" status "$1" | sed -n 's/^stopped:    //p'
}
# stop_is JOB TEXT: the stopped line is "TIME: TEXT" (TIME as ISO 8601 UTC).
stop_is() {
  local got
  got=$(stop_of "$1")
  [[ "$got" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z:\ (.*)$ ]] ||
    fail "$1: stopped line '$got' is not 'TIME: $2'"
  expect_eq "$1: the stop's message" "$2" "${BASH_REMATCH[1]}"
}
# finished JOB: status finished, no stopped line, no stop left in the job row.
finished() {
  job_done "$1"
  expect_eq "$1: status" finished "$(status_of "$1")"
  expect_eq "$1: no stopped line" "" "$(stop_of "$1")"
  expect_eq "$1: the stop record is cleared" "||" \
    "$(q "$1" "SELECT stop_kind, stop_message, stop_at FROM job")"
}

# ---- 1, 2: signals and kill -9 of a driver running slow records -------------------------
# The records take long enough that a signal always finds the driver running them, never
# in its exit path (where SIGTERM's default action would end it).
printf '%s\n' a b > "$T/slow.txt"
cat > "$T/slow.orch" <<'PIPE'
pipeline slow
domain line
source line.text = lines("slow.txt")
call nap = sleep(ms=2500)   with workers=2
line.out = nap(line.text)
PIPE
J=$T/live
# has_new_attempt: an attempt newer than $last runs now (one that an earlier driver left
# open does not count: an interrupted driver leaves its attempts for the next to close).
last=0
has_new_attempt() {
  [ "$(qlive "$J" "SELECT count(*) > 0 FROM attempt WHERE outcome IS NULL AND id > $last" \
       2> /dev/null)" = 1 ]
}
# start CMD...: runs an orch command on $J in the background (pid in $pid) and waits until
# it runs an attempt of its own.
start() {
  [ ! -f "$J/state.db" ] || last=$(q "$J" "SELECT coalesce(max(id), 0) FROM attempt")
  "$@" --progress none 2>> "$T/live.log" &
  pid=$!
  wait_until 30 "an attempt of $J" has_new_attempt
}
# stop_with SIGNAL STATUS: sends SIGNAL to the driver, which must exit STATUS.
stop_with() {
  kill -s "$1" "$pid"
  local rc=0
  wait "$pid" || rc=$?
  expect_eq "the driver's exit status after SIG$1" "$2" "$rc"
}

start "$ORCH" run "$T/slow.orch" --job "$J"
expect_eq "status while the driver runs" running "$(status_of "$J")"
expect_eq "no stopped line while the driver runs" "" "$(stop_of "$J")"
stop_with INT 3
expect_eq "status after SIGINT" interrupted "$(status_of "$J")"
stop_is "$J" "interrupted; the job is kept: continue it with \`orch resume $J\`"
expect_eq "the hint to resume" "driver:     none (resume with \`orch resume $J\`)" \
  "$("$ORCH" status "$J" | grep '^driver:')"

start "$ORCH" resume "$J"
expect_eq "a resumed driver clears the stop" "running|" "$(status_of "$J")|$(stop_of "$J")"
stop_with TERM 3
expect_eq "status after SIGTERM" interrupted "$(status_of "$J")"
expect_eq "job.status after SIGTERM (0011)" interrupted "$(q "$J" "SELECT status FROM job")"
stop_is "$J" "interrupted; the job is kept: continue it with \`orch resume $J\`"

start "$ORCH" resume "$J"
stop_with KILL 137
expect_eq "status after kill -9" interrupted "$(status_of "$J")"
expect_eq "kill -9 leaves no record" \
  "the driver ended without recording why (killed, or the machine stopped)" "$(stop_of "$J")"
expect_eq "job.status itself stays running" running "$(q "$J" "SELECT status FROM job")"

"$ORCH" resume "$J" --progress none 2>> "$T/live.log" ||
  { cat "$T/live.log" >&2; fail "the last resume exited $?"; }
finished "$J"

# ---- 3a: workers that cannot start ------------------------------------------------------
mkdir "$T/p"
printf '%s\n' x y > "$T/p/in.txt"
cat > "$T/p/up.orch" <<'PIPE'
pipeline up
domain r
source r.v = lines("in.txt")
call up = exec("./up_udf.py")
r.u = up(r.v)
output r.u
PIPE
J=$T/noprog
"$ORCH" run "$T/p/up.orch" --job "$J" --progress none 2> "$T/noprog.log" &&
  fail "a run whose program does not exist succeeded"
expect_eq "status after a fault" failed "$(status_of "$J")"
expect_eq "job.status after a fault (0011)" failed "$(q "$J" "SELECT status FROM job")"
stop_is "$J" "$(sed -n "s|^orch: $J: ||p" "$T/noprog.log")"
stop_of "$J" | grep -qF "call up cannot start its workers: exec '$T/p/up_udf.py'" ||
  fail "the stop does not name the call and its program: $(stop_of "$J")"
cat > "$T/p/up_udf.py" <<PY
#!/usr/bin/env python3
import sys
sys.path.insert(0, "$SRCDIR/udfs/python")
import orch_udf
class Up:
    def __init__(self, args): pass
    def run(self, batch): return [r.value.upper() for r in batch]
sys.exit(orch_udf.serve(Up))
PY
chmod +x "$T/p/up_udf.py"
"$ORCH" resume "$J" --progress none 2> "$T/noprog.log" ||
  { cat "$T/noprog.log" >&2; fail "resume once the program exists exited $?"; }
finished "$J"

# ---- 3b, 3c: the payload store full; state.db full --------------------------------------
big_files ""
# full VAR=VALUE NAME TEXT: runs big.orch under the cap VAR=VALUE: it must fail saying
# TEXT, and status must say `failed` with that very message; then it finishes uncapped.
full() {
  local J=$T/$2
  env "$1" "$ORCH" run "$T/big.orch" --job "$J" --progress none 2> "$J.log" &&
    fail "$2: a capped run succeeded"
  grep -qF -- "$3" "$J.log" || fail "$2: the run does not say '$3': $(cat "$J.log")"
  expect_eq "$2: status" failed "$(status_of "$J")"
  stop_is "$J" "$(sed -n "s|^orch: $J: ||p" "$J.log")"
  "$ORCH" resume "$J" --progress none 2> "$J.log" ||
    { cat "$J.log" >&2; fail "$2: resume without the cap exited $?"; }
  finished "$J"
}
full ORCH_PAYLOAD_MAX_MAP=1500000 payload-full "payload map is full"
full ORCH_STATE_MAX_PAGES=60 state-full "state.db: database or disk is full"
echo "job_stop: ok"
