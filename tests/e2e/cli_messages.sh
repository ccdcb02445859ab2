#!/usr/bin/env bash
# cli_messages.sh — the command line's small promises (docs/commands.md):
#   1. `orch report` escapes the bytes of a key that are not valid UTF-8, so the page,
#      declared UTF-8, is valid UTF-8.
#   2. `orch update --watch`: an interval under 0.1 s is taken as 0.1 s (the service does not
#      scan in a busy loop), a scan that finds nothing leaves no job_update row, one that
#      finds a file leaves one; an interval over a year is refused as such; a usage error's
#      sentence ends with a full stop before "Try 'orch --help'.".
#   3. every count option reads its number alike: decimal digits, nothing before or after,
#      no number over its maximum (never clamped); a bad one is a usage error that makes no
#      job; the ORCH_ knobs that take counts read them alike (a bad one is ignored).
#   4. `--listen` with the Slurm launcher (no port, a port out of range, a port in use, and
#      the same through ORCH_LISTEN) is a usage error found before the job is made, and
#      says what is wrong.
#   5. `orch update` when a files() source's directory is gone: the error says why (the
#      directory and strerror), no "0 new, 0 changed, 0 removed" follows it, the advice to
#      resume says the cause must be fixed first; once it is, `orch resume` finishes the
#      update.
#   6. `orch help update` tells what an edit that drops a statement does (it is adopted, the
#      statement retired), which it is; `sql --format tsv` escapes control characters and
#      bytes that are not UTF-8 as \xNN, as docs/commands.md says.
source "$(dirname "$0")/lib.sh"

# ---- 1. report: keys with bytes that are not UTF-8 ---------------------------------------
printf 'ok\ncaf\xe9 BAD\n\xff\xfe BAD\nna\xc3\xafve BAD\n' > "$T/lat.txt"
cat > "$T/lat.orch" <<'EOF2'
pipeline lat
domain line
source line.text = lines("lat.txt")
call chk = fail_if(contains="BAD", kind=record)
line.c = chk(line.text)
EOF2
J=$T/lat
"$ORCH" run "$T/lat.orch" --job "$J" --progress none 2> "$T/lat.log" || true
"$ORCH" report "$J" -o "$T/lat.html" 2> "$T/report.err" ||
  fail "orch report exited $?: $(cat "$T/report.err")"
python3 - "$T/lat.html" <<'EOF2' || fail "report page is not valid UTF-8"
import sys
b = open(sys.argv[1], "rb").read()
t = b.decode("utf-8")  # strict: raises on a byte that is not UTF-8
assert "caf\\xe9" in t, "the Latin-1 byte of a key is not shown as \\xe9"
assert "\\xff\\xfe" in t, "the bytes ff fe of a key are not shown as \\xff\\xfe"
assert "na\u00efve" in t, "valid UTF-8 of a key is not kept as it is"
EOF2

# ---- 2. update --watch: the interval's bounds, no row for a scan that found nothing ------
mkdir -p "$T/in"
printf 'one\n' > "$T/in/a.txt"
cat > "$T/w.orch" <<'EOF2'
pipeline w
domain doc
source doc.path = files("in/*.txt")
call rd = read_file()
doc.text = rd(doc.path)
output doc.text
EOF2
J=$T/w
run_job "$T/w.orch" "$J"
# Plain progress, its periodic lines far apart: the lines of call rd come from the end of
# each scan's work (the job recorded finished), one per scan.
"$ORCH" update "$J" --watch 1e-9 --progress plain --progress-interval 100000000 \
  2> "$T/watch.log" &
pid=$!
rows() { qlive "$J" "SELECT count(*) FROM job_update"; }
finished() { [ "$(qlive "$J" "SELECT status FROM job")" = finished ] &&
             [ "$(qlive "$J" "SELECT count(*) FROM job_update WHERE finished_at IS NULL")" = 0 ]; }
scans() { grep -c '^\[ *[0-9.]*s\] rd ' "$T/watch.log" || true; }
wait_until 20 "the update's own scan" finished
# Over 2 s of watching a directory where nothing changes: a scan every 0.1 s at most.
s0=$(scans)
sleep 2
s1=$(scans)
[ $((s1 - s0)) -ge 5 ] || fail "--watch 1e-9: $((s1 - s0)) scans in 2 s: $(tail -5 "$T/watch.log")"
[ $((s1 - s0)) -le 25 ] || fail "--watch 1e-9: $((s1 - s0)) scans in 2 s, more than one per 0.1 s"
expect_eq "job_update rows after 2 s of scans that found nothing: the update's own" 1 "$(rows)"
printf 'two\n' > "$T/in/b.txt"
has_b() { [ "$(qlive "$J" "SELECT count(*) FROM job_update WHERE added = 1")" = 1 ] && finished; }
wait_until 20 "b found" has_b
s2=$(scans)
five_more() { [ $(($(scans) - s2)) -ge 5 ]; }
wait_until 10 "five scans more, which find nothing" five_more
expect_eq "job_update rows: the update's own and the scan that found b" 2 "$(rows)"
kill -TERM "$pid"
st=0
wait "$pid" || st=$?
none_left 5 -f "$J"
[ "$st" = 0 ] || [ "$st" = 3 ] || fail "SIGTERM: exit $st: $(cat "$T/watch.log")"

if "$ORCH" update "$J" --watch 1e12 2> "$T/err"; then fail "--watch 1e12 accepted"; fi
expect_eq "--watch 1e12: the maximum" \
  "orch: update: --watch takes at most 31536000 seconds (a year), not 1e12.
Try 'orch --help'." "$(cat "$T/err")"
for bad in 0 -1 abc '' nan; do
  st=0
  "$ORCH" update "$J" --watch "$bad" 2> "$T/err" || st=$?
  expect_eq "--watch '$bad': a usage error" 2 "$st"
  expect_eq "--watch '$bad': the message" \
    "orch: update: --watch needs a positive number of seconds.
Try 'orch --help'." "$(cat "$T/err")"
done

# ---- 3. count options: one reading of a number -------------------------------------------
printf 'a\nb\n' > "$T/two.txt"
cat > "$T/two.orch" <<'EOF2'
pipeline two
domain line
source line.text = lines("two.txt")
call up = upper()
line.up = up(line.text)
output line.up
EOF2
count_bad() { # OPTION VALUE...: each VALUE is refused with a usage error, no job made
  local opt=$1 v st
  shift
  for v in "$@"; do
    st=0
    "$ORCH" run "$T/two.orch" --job "$T/bad" --progress none "$opt" "$v" 2> "$T/err" || st=$?
    expect_eq "$opt '$v': a usage error" 2 "$st"
    grep -q -- "$opt needs" "$T/err" || fail "$opt '$v': $(cat "$T/err")"
    [ ! -e "$T/bad" ] || fail "$opt '$v': a usage error made the job directory"
  done
}
count_bad --max-unsealed 99999999999999999999 9223372036854775808 " 3" "3 " +3 -3 0 0x10 3k ""
count_bad --max-live-bytes 99999999999999999999 " 3" "3 " +3 -3 0 ""
count_bad --seed 99999999999999999999 18446744073709551616 " 3" +3 -3 ""
count_bad --progress-interval 99999999999 " 3" +3 -3 0 ""
run_job "$T/two.orch" "$T/c1" --max-unsealed 9223372036854775807 --seed 18446744073709551615
expect_eq "--max-unsealed at its maximum" 9223372036854775807 \
  "$(q "$T/c1" "SELECT max_unsealed FROM job")"
for v in " 2" +2 99999999999999999999; do
  st=0
  "$ORCH" lineage "$T/c1" --depth "$v" line.up a > /dev/null 2> "$T/err" || st=$?
  expect_eq "lineage --depth '$v': a usage error" 2 "$st"
done
# A knob's count read alike: " 2" is not a count, and report refuses it (docs/configuration.md).
st=0
ORCH_REPORT_MAX_BATCHES=" 2" "$ORCH" report "$T/c1" -o "$T/c1.html" 2> "$T/err" || st=$?
expect_eq "ORCH_REPORT_MAX_BATCHES=' 2' refused by report" 2 "$st"

# ---- 4. --listen: checked before the job is made ------------------------------------------
# A port in use: a listening socket held by python3 until its stdin closes.
mkfifo "$T/hold"
python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
sys.stdin.read()' < "$T/hold" > "$T/port" &
holder=$!
exec 7> "$T/hold"
port_known() { [ -s "$T/port" ]; }
wait_until 10 "the held port" port_known
used=$(cat "$T/port")
listen_bad() { # LISTEN EXPECTED-MESSAGE [env]: a usage error with that message, no job made
  local st=0
  if [ "${3:-}" = env ]; then
    ORCH_LISTEN=$1 "$ORCH" run "$T/two.orch" --job "$T/bad" --progress none \
      --launcher slurm 2> "$T/err" || st=$?
  else
    "$ORCH" run "$T/two.orch" --job "$T/bad" --progress none --launcher slurm \
      --listen "$1" 2> "$T/err" || st=$?
  fi
  expect_eq "--listen '$1' ${3:-}: a usage error" 2 "$st"
  expect_eq "--listen '$1' ${3:-}: the message" "$2
Try 'orch --help'." "$(cat "$T/err")"
  [ ! -e "$T/bad" ] || fail "--listen '$1': a usage error made the job directory"
}
listen_bad 127.0.0.1 "orch: run: --listen 127.0.0.1: expected HOST:PORT."
listen_bad 127.0.0.1: "orch: run: --listen 127.0.0.1:: expected HOST:PORT."
listen_bad 127.0.0.1:99999 "orch: run: --listen 127.0.0.1:99999: the port must be from 0 to 65535."
listen_bad 127.0.0.1:123456789012345678901 \
  "orch: run: --listen 127.0.0.1:123456789012345678901: the port must be from 0 to 65535."
listen_bad "127.0.0.1:$used" \
  "orch: run: cannot listen for workers on 127.0.0.1:$used: Address already in use."
listen_bad "127.0.0.1:$used" \
  "orch: run: cannot listen for workers on 127.0.0.1:$used: Address already in use." env
listen_bad 127.0.0.1:99999 "orch: run: --listen 127.0.0.1:99999: the port must be from 0 to 65535." env
exec 7>&-
wait "$holder"
# resume checks it too, before it touches the job.
before=$(md5sum < "$T/c1/state.db")
st=0
"$ORCH" resume "$T/c1" --progress none --launcher slurm --listen 127.0.0.1:99999 2> "$T/err" || st=$?
expect_eq "resume --listen 127.0.0.1:99999: a usage error" 2 "$st"
grep -q "the port must be from 0 to 65535" "$T/err" || fail "resume: $(cat "$T/err")"
expect_eq "resume --listen refused: state.db untouched" "$before" "$(md5sum < "$T/c1/state.db")"

# ---- 5. update with the source directory gone ---------------------------------------------
mv "$T/in" "$T/in.away"
st=0
"$ORCH" update "$J" --progress none 2> "$T/err" || st=$?
expect_eq "update, the directory gone: exit 1" 1 "$st"
grep -qF "cannot list files(\"$T/in/*.txt\"): $T/in: No such file or directory" "$T/err" ||
  fail "update, the directory gone: no reason: $(cat "$T/err")"
if grep -q "new, .* changed, .* removed" "$T/err"; then
  fail "update, the directory gone: a summary after the error: $(cat "$T/err")"
fi
grep -qF "once the cause is fixed, continue with \`orch resume $J\`" "$T/err" ||
  fail "update, the directory gone: the advice: $(cat "$T/err")"
mv "$T/in.away" "$T/in"
"$ORCH" resume "$J" --progress none 2> "$T/err" || fail "resume once the directory is back: $(cat "$T/err")"
job_done "$J"

# ---- 6. help update, sql --format tsv ------------------------------------------------------
"$ORCH" help update > "$T/help"
if grep -q "removes a domain, a port or a statement" "$T/help"; then
  fail "help update says a drop is refused: $(cat "$T/help")"
fi
tr '\n' ' ' < "$T/help" | grep -q "A statement, port or domain the edit drops is retired" ||
  fail "help update does not say what a drop does: $(cat "$T/help")"
# Which is so: an edit of the job of section 3 that drops its statement is adopted.
grep -v "line.up\|call up" "$T/two.orch" > "$T/two-drop.orch"
"$ORCH" update "$T/c1" "$T/two-drop.orch" --progress none 2> "$T/err" ||
  fail "an edit that drops a statement: $(cat "$T/err")"
grep -q "two-drop.orch drops:" "$T/err" || fail "no drop said: $(cat "$T/err")"
expect_eq "the dropped statement is retired in the job's plan" 1 \
  "$(q "$T/c1" "SELECT count(*) FROM plan WHERE id = (SELECT max(id) FROM plan)
                AND text LIKE '%retired line.up%'")"
expect_eq "sql --format tsv: control characters and bytes that are not UTF-8" \
  "c	bad	del	ok
a\x01b\x1b[0m	f\xffg	\x7f	é\tx" \
  "$("$ORCH" sql "$T/c1" --format tsv "SELECT 'a' || char(1) || 'b' || char(27) || '[0m' AS c,
       CAST(x'66ff67' AS TEXT) AS bad, char(127) AS del, 'é' || char(9) || 'x' AS ok")"
echo "cli_messages: ok"
