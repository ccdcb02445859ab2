#!/usr/bin/env bash
# A lines() source whose file is a FIFO (a named pipe): opening one for reading waits for a
# writer, and nothing may wait on it. `run` (the job's creation checks its sources),
# `resume` and `update` each end within a bound with an error that names the source and
# says why; an update that finds it refused changes nothing.
source "$(dirname "$0")/lib.sh"

cat > "$T/p.orch" <<'PIPE'
pipeline p
domain r
source r.v = lines("in.txt")
call up = upper()
r.u = up(r.v)
output r.u
PIPE

# A regression would block in open(): opening the FIFO read-write (which never waits)
# releases whatever waits in it, so that no process outlives the test.
# refused WHAT CMD...: CMD must fail within 60 s, saying that in.txt is not a regular file.
refused() {
  local what=$1 st=0
  shift
  timeout -k 5 60 "$@" 2> "$T/log" || st=$?
  if [ "$st" = 124 ] || [ "$st" = 137 ]; then
    : <> "$T/in.txt"
    fail "$what: still blocked after 60 s"
  fi
  [ "$st" != 0 ] || fail "$what: accepted a FIFO"
  grep -qF "source r.v: lines(\"$T/in.txt\"): not a regular file" "$T/log" ||
    fail "$what: $(cat "$T/log")"
}

mkfifo "$T/in.txt"
refused "run" "$ORCH" run "$T/p.orch" --job "$T/none" --progress none
[ ! -e "$T/none" ] || fail "a job was made over a FIFO"

# A job made over a regular file whose source became a FIFO.
rm "$T/in.txt"
printf 'a\nb\n' > "$T/in.txt"
run_job "$T/p.orch" "$T/job"
rm "$T/in.txt"
mkfifo "$T/in.txt"
refused "resume" "$ORCH" resume "$T/job" --progress none
refused "update" "$ORCH" update "$T/job" --progress none
expect_eq "the refusals changed nothing" "2 0" \
  "$(q "$T/job" "SELECT count(*) FROM root WHERE retired_at IS NULL") $(q "$T/job" "SELECT count(*) FROM root WHERE retired_at IS NOT NULL")"
expect_eq "outputs kept" "A B" "$("$ORCH" export "$T/job" r.u | python3 -c '
import json, sys
print(" ".join(json.loads(l)["value"] for l in sys.stdin))')"
echo "source_lines_fifo: ok"
