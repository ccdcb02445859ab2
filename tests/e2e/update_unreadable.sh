#!/usr/bin/env bash
# orch update and files that cannot be read (DESIGN §10): a file that was read and cannot
# be read now (a symlink whose target was deleted; a regular file replaced by a FIFO) is
# changed: its new revision fails to read, as in a fresh run, and its downstream is
# suppressed. One that still cannot be read at the next update is not changed again, and
# one that can be read again is changed. After each update the export equals a fresh run's
# over the same files, byte for byte. (Tests run as root, which reads a chmod 000 file.)
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/data"
printf 'one' > "$T/data/a.txt"
printf 'two' > "$T/data/b.txt"
printf 'three' > "$T/t.txt"
ln -s ../t.txt "$T/data/c.txt"
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
J=$T/job
run_job "$T/p.orch" "$J"
expect_eq "first run" "data/a.txt|present|ONE
data/b.txt|present|TWO
data/c.txt|present|THREE" "$(states "$J" doc.up)"

# same_as_fresh WHAT: the job's export equals a fresh run's over the files as they are.
n=0
same_as_fresh() {
  n=$((n + 1))
  timeout -k 5 60 "$ORCH" run "$T/p.orch" --job "$T/fresh$n" --progress none 2> "$T/fresh.log" ||
    fail "$1: fresh run: $(cat "$T/fresh.log")"
  "$ORCH" export "$J" doc.up --all > "$T/u.out"
  "$ORCH" export "$T/fresh$n" doc.up --all > "$T/f.out"
  cmp -s "$T/u.out" "$T/f.out" || fail "$1: export differs from a fresh run's: $(diff "$T/u.out" "$T/f.out")"
}
# update EXPECTED: an update (bounded: a FIFO must not block it) that reports EXPECTED.
update() {
  timeout -k 5 60 "$ORCH" update "$J" --progress none 2> "$T/log" || fail "update: $(cat "$T/log")"
  grep -q "orch: update: $1" "$T/log" || fail "update: expected $1: $(cat "$T/log")"
}

rm "$T/t.txt"
rm "$T/data/b.txt"
mkfifo "$T/data/b.txt"
update "0 new, 2 changed, 0 removed"
expect_eq "unreadable now: suppressed" "data/a.txt|present|ONE
data/b.txt|suppressed|
data/c.txt|suppressed|" "$(states "$J" doc.up)"
same_as_fresh "unreadable now"

# Still unreadable: not changed again, nothing runs.
runs=$(q "$J" "SELECT count(*) FROM attempt")
update "0 new, 0 changed, 0 removed"
expect_eq "nothing ran" "$runs" "$(q "$J" "SELECT count(*) FROM attempt")"
same_as_fresh "still unreadable"

# Readable again: changed.
printf 'three again' > "$T/t.txt"
update "0 new, 1 changed, 0 removed"
expect_eq "readable again" "data/a.txt|present|ONE
data/b.txt|suppressed|
data/c.txt|present|THREE AGAIN" "$(states "$J" doc.up)"
same_as_fresh "readable again"
echo "update_unreadable: ok"
