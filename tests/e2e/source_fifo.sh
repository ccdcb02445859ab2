#!/usr/bin/env bash
# A files() source that matches a FIFO (a named pipe): opening one for reading waits for a
# writer, and nothing may wait on it. `run` and `update` finish, each within a bound: the
# FIFO's root fails to read with a message that says why (as an unreadable file's does)
# and its downstream is suppressed; the regular files beside it run.
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/data"
printf 'hello' > "$T/data/a.txt"
mkfifo "$T/data/p.txt"
cat > "$T/p.orch" <<'PIPE'
pipeline p
domain doc
source doc.path = files("data/*")
call rd = read_file()
call up = upper()
doc.text = rd(doc.path)
doc.up = up(doc.text)
output doc.up
PIPE

# A regression would block in open(): opening the FIFO read-write (which never waits)
# releases whatever waits in it, so that no process outlives the test.
release() {
  local f
  for f in "$T"/data/*; do
    if [ -p "$f" ]; then : <> "$f"; fi
  done
}
# bounded WHAT CMD...: CMD must finish within 60 s.
bounded() {
  local what=$1 st=0
  shift
  timeout -k 5 60 "$@" || st=$?
  if [ "$st" = 124 ] || [ "$st" = 137 ]; then
    release
    fail "$what: still blocked after 60 s"
  fi
  return "$st"
}

bounded "run" "$ORCH" run "$T/p.orch" --job "$T/job" --progress none 2> "$T/log" ||
  fail "run: $(cat "$T/log")"
states "$T/job" doc.text > "$T/text"
grep -qF "data/p.txt|failed|read_file: $T/data/p.txt: not a regular file" "$T/text" ||
  fail "the FIFO's read error: $(cat "$T/text")"
expect_eq "downstream of the FIFO" "data/a.txt|present|HELLO
data/p.txt|suppressed|" "$(states "$T/job" doc.up)"

# An update that finds a new FIFO.
mkfifo "$T/data/q.txt"
bounded "update" "$ORCH" update "$T/job" --progress none 2> "$T/log" ||
  fail "update: $(cat "$T/log")"
grep -q "orch: update: 1 new, 0 changed, 0 removed" "$T/log" || fail "update: $(cat "$T/log")"
bounded "fresh run" "$ORCH" run "$T/p.orch" --job "$T/fresh" --progress none 2> "$T/log" ||
  fail "fresh run: $(cat "$T/log")"
"$ORCH" export "$T/job" doc.up --all > "$T/u.out"
"$ORCH" export "$T/fresh" doc.up --all > "$T/f.out"
cmp -s "$T/u.out" "$T/f.out" || fail "export after update differs: $(diff "$T/u.out" "$T/f.out")"
echo "source_fifo: ok"
