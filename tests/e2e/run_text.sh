#!/usr/bin/env bash
# The text example end to end: read, split, upper, filter, broadcast, reduce — its exports
# must equal what the shell computes from the same files.
source "$(dirname "$0")/lib.sh"

cp -r "$SRCDIR/examples/text_lines.orch" "$SRCDIR/examples/texts" "$T/"
run_job "$T/text_lines.orch" "$T/job"

# doc.loud: per file, its non-empty lines upper-cased, joined by newlines. A files() key is
# the path relative to the pipeline's directory (DESIGN §9).
expected=""
for f in "$T"/texts/*.txt; do
  v=$(grep -v '^$' "$f" | tr 'a-z' 'A-Z' || true)
  line=$(printf '%s' "$v" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')
  expected+="{\"key\": \"${f#"$T"/}\", \"state\": \"present\", \"value\": $line}"$'\n'
done
actual=$("$ORCH" export "$T/job" doc.loud)
expect_eq "doc.loud export" "${expected%$'\n'}" "$actual"

# doc.lines: the count of surviving lines.
actual=$("$ORCH" export "$T/job" doc.lines | python3 -c '
import json, sys
for l in sys.stdin: print(json.loads(l)["value"])')
expect_eq "doc.lines" "$(printf '3\n2\n0')" "$actual"

# line.file is broadcast: every line of a.txt sees a.txt's path.
n=$("$ORCH" export "$T/job" line.file | grep -c "\"value\": \"$T/texts/a.txt\"")
expect_eq "broadcast to every line of a.txt" 4 "$n"

# The empty line of a.txt was dropped by the filter; empty.txt has zero children
# (a Succeeded, empty expansion).
expect_eq "dropped by filter" 1 "$(q "$T/job" "SELECT count(*) FROM item JOIN port ON port.id = item.port_id WHERE qualified = 'line.kept' AND state = 'dropped'")"
expect_eq "empty expansion" "succeeded|0" "$(q "$T/job" "SELECT e.state, e.nchildren FROM expansion AS e JOIN entity AS x ON x.id = e.parent_id WHERE x.key LIKE '%empty.txt'")"
# Every grain sealed; every attempt closed.
expect_eq "all sealed" 0 "$(q "$T/job" "SELECT count(*) FROM grain WHERE phase <> 'sealed'")"
expect_eq "attempts closed" 0 "$(q "$T/job" "SELECT count(*) FROM attempt WHERE outcome IS NULL")"
expect_eq "job finished" finished "$(q "$T/job" "SELECT status FROM job")"

# A second run into the same directory is refused and points to resume.
if "$ORCH" run "$T/text_lines.orch" --job "$T/job" 2> "$T/err"; then fail "second run accepted"; fi
grep -q "orch resume" "$T/err" || fail "no hint to resume: $(cat "$T/err")"
# File names that are not UTF-8 keep distinct keys in export: each stray byte is written
# as \udcXX (surrogateescape), never as U+FFFD, which made a\xff and a\xfe one key.
mkdir "$T/raw"
touch "$T/raw/$(printf 'a\xff.txt')" "$T/raw/$(printf 'a\xfe.txt')"
cat > "$T/raw/u.orch" <<'PIPE'
pipeline u
domain f
source f.path = files("*.txt")
call up = identity()
f.p = up(f.path)
PIPE
run_job "$T/raw/u.orch" "$T/raw/job"
"$ORCH" export "$T/raw/job" f.p > "$T/raw/out"
expect_eq "non-UTF-8 keys, recovered" "a\xfe.txt a\xff.txt" "$(python3 -c '
import json, sys
keys = [json.loads(l)["key"].encode("utf-8", "surrogateescape") for l in open(sys.argv[1])]
print(" ".join(repr(k)[2:-1] for k in keys))' "$T/raw/out")"
# An unreadable payload stops export after the last whole line, never inside one.
cp -r "$T/job" "$T/cut"
sqlite3 "$T/cut/state.db" "UPDATE item SET payload_id = 999999999 WHERE port_id =
  (SELECT id FROM port WHERE qualified = 'doc.loud') AND entity_id =
  (SELECT max(entity_id) FROM item WHERE port_id = (SELECT id FROM port
   WHERE qualified = 'doc.loud') AND state = 'present')"
if "$ORCH" export "$T/cut" doc.loud > "$T/cut.out" 2> "$T/cut.err"; then
  fail "export of an unreadable payload exited 0"
fi
grep -q "unreadable" "$T/cut.err" || fail "export: no message: $(cat "$T/cut.err")"
python3 -c '
import json, sys
data = open(sys.argv[1]).read()
assert data == "" or data.endswith("\n"), "a partial line: %r" % data[-40:]
for l in data.splitlines(): json.loads(l)' "$T/cut.out" || fail "export printed a partial line"
echo "run_text: ok"
