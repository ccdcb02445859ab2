#!/usr/bin/env bash
# streaming.sh — streaming expansions (DESIGN §4, §5): an expand UDF's children are
# published while it runs, in chunks, and their downstream grains run at once.
#
#   1. A slow expander (200 children, 20 ms apart) into a map: the first child's map
#      grain ends seconds before the expansion does (times of the attempt rows).
#   2. An expander that fails after 10 children: the expansion Failed, those 10 children
#      and their downstream items kept, the reduce of the parent Suppressed.
#   3. A replayed expansion (its worker crashed after 60 children, already published) that
#      makes child 10 differently: the expansion fails, naming the child.
#   4. The same crash with a deterministic expander: the replay publishes only the
#      children past the published ones, and the exports equal a clean run's.
#   5. --max-unsealed 3 with an expansion of 1,000 children, and with 20 expansions (a
#      paused worker holds a second batch): both finish.
#   6. kill -9 of the driver during a streaming expansion, then resume: the exports equal
#      a clean run's.
#   7. A reduce over 5,000 children (fed to its worker in pages of 4,096) whose first
#      attempt fails: the retry is sent the same children in the same order.
#   8. Fed reduces of three parents on one worker, one at a time: each gets its own
#      children, a batch that arrives while another is fed waiting its turn.
source "$(dirname "$0")/lib.sh"

slow=$(dirname "$ORCH")/../udfs/udf_slow_expand.so
[ -f "$slow" ] || { echo "streaming: $slow not built: skipped"; exit 77; }
cp "$slow" "$T/slow.so"
printf '%s\n' alpha > "$T/one.txt"

# pipeline NAME ARGS [OPTIONS]: slow expander -> identity -> count, over one.txt.
pipeline() { expand_pipeline "$1" "library(\"slow.so\", \"orch_udf_slow_expand\")($2) ${3:-}"; }
exports() { expand_exports "$1"; }

# --- 1. the first child's downstream grain ends long before the expansion ------------------
pipeline slow 'n="200", ms="20"'
run_job "$T/slow.orch" "$T/s1"
job_done "$T/s1"
expect_eq "200 children counted" '{"key": "alpha", "state": "present", "value": "200"}' \
  "$("$ORCH" export "$T/s1" doc.n)"
# ms between the end of the map grain of child 0 and the end of the expansion.
ahead=$(expand_ahead "$T/s1")
[ "$ahead" -gt 3000 ] ||
  fail "child 0's map grain ended only ${ahead} ms before its 4-second expansion"
expect_eq "no open expansion is left" "" "$(q "$T/s1" "SELECT * FROM open_expansions")"

# --- 2. fails after 10 children -----------------------------------------------------------
pipeline fail10 'n="200", ms="5", fail_after="10"'
run_job "$T/fail10.orch" "$T/f"
job_done "$T/f"
expect_eq "the expansion failed" "failed|0" \
  "$(q "$T/f" "SELECT state, nchildren FROM expansion")"
expect_eq "its 10 children and their items stay" "10|10" \
  "$(q "$T/f" "SELECT count(*), sum(i.state = 'present') FROM entity AS e
               JOIN item AS i ON i.entity_id = e.id JOIN port AS p ON p.id = i.port_id
               WHERE p.qualified = 'part.w'")"
expect_eq "the reduce is suppressed" "suppressed" \
  "$(q "$T/f" "SELECT i.state FROM item AS i JOIN port AS p ON p.id = i.port_id
               WHERE p.qualified = 'doc.n'")"
expect_eq "open_expansions shows the failed one" "gen|alpha|failed|10" \
  "$(q "$T/f" "SELECT call, key, state, children FROM open_expansions")"

# --- 3. a replay that differs at child 10 ------------------------------------------------
pipeline nondet "n=\"100\", ms=\"5\", once=\"$T/once3\", crash_after=\"60\", differ_at=\"10\""
run_job "$T/nondet.orch" "$T/n"
job_done "$T/n"
expect_eq "the expansion fails naming the child" \
  "record|not deterministic: child 10 differs from the one published before" \
  "$(q "$T/n" "SELECT kind, message FROM failures WHERE call = 'gen' AND kind <> 'crash'")"
expect_eq "the expansion failed" "failed" "$(q "$T/n" "SELECT state FROM expansion")"
published=$(q "$T/n" "SELECT count(*) FROM entity WHERE parent_id IS NOT NULL")
[ "$published" -ge 50 ] && [ "$published" -le 60 ] ||
  fail "the crashed run published $published children, not those it made before child 60"

# --- 4. the same crash, deterministic: only new children are published ------------------
pipeline det "n=\"100\", ms=\"5\", once=\"$T/once4\", crash_after=\"60\""
run_job "$T/det.orch" "$T/d"
job_done "$T/d"
expect_eq "one crash, then ok" "crash ok" \
  "$(q "$T/d" "SELECT group_concat(a.outcome, ' ') FROM attempt AS a
               JOIN grain AS g ON g.id = a.grain_id JOIN call AS c ON c.id = g.call_id
               WHERE c.name = 'gen' ORDER BY a.id")"
pipeline det_clean 'n="100", ms="5"'
run_job "$T/det_clean.orch" "$T/dc"
expect_eq "the replayed job exports what a clean run does" "$(exports "$T/dc")" \
  "$(exports "$T/d")"

# --- 5. a budget of 3 unsealed grains, 1,000 children ------------------------------------
pipeline tight 'n="1000", ms="0"'
run_job "$T/tight.orch" "$T/t" --max-unsealed 3
job_done "$T/t"
expect_eq "1,000 children counted" '{"key": "alpha", "state": "present", "value": "1000"}' \
  "$("$ORCH" export "$T/t" doc.n)"

# The same budget over 20 expansions of 30 children: the worker holds a second batch
# behind the one it streams when the budget pauses it; it must be read again once nothing
# else is in flight, though two batches are (timeout: a pause never lifted hangs).
python3 -c 'print("\n".join("doc%02d" % i for i in range(20)))' > "$T/many.txt"
sed 's/lines("one.txt")/lines("many.txt")/' "$T/tight.orch" |
  sed 's/n="1000", ms="0"/n="30", ms="1"/' > "$T/tight2.orch"
timeout 120 "$ORCH" run "$T/tight2.orch" --job "$T/t2" --progress none --max-unsealed 3 \
  2> "$T/t2.log" || { cat "$T/t2.log" >&2; fail "20 expansions under a budget of 3 grains"; }
job_done "$T/t2"
expect_eq "20 expansions of 30 children counted" "20 x 30" \
  "$("$ORCH" export "$T/t2" doc.n | python3 -c '
import json, sys
v = [json.loads(l)["value"] for l in sys.stdin]
print("%d x %s" % (len(v), ",".join(sorted(set(v)))))')"

# --- 6. kill -9 of the driver in the middle of an expansion, then resume ---------------
J=$T/k
"$ORCH" run "$T/slow.orch" --job "$J" --progress none 2> "$T/k.log" &
pid=$!
some_children() {
  [ -f "$J/state.db" ] &&
    [ "$(qlive "$J" "SELECT count(*) FROM entity WHERE parent_id IS NOT NULL" 2> /dev/null)" \
      -gt 40 ]
}
wait_until 30 "children published while the expansion runs" some_children
kill -9 "$pid"
wait "$pid" 2> /dev/null || true
expect_eq "the expansion is open" "open" \
  "$(q "$J" "SELECT state FROM open_expansions")"
"$ORCH" status "$J" | grep -qE '^expansions: gen alpha: [0-9]+ children so far, open$' ||
  fail "status does not show the open expansion: $("$ORCH" status "$J")"
"$ORCH" lineage "$J" alpha | grep -qE '^  expansion by gen: open, [0-9]+ children so far$' ||
  fail "lineage does not show the open expansion: $("$ORCH" lineage "$J" alpha | head)"
"$ORCH" resume "$J" --progress none 2> "$T/k2.log" ||
  { cat "$T/k2.log" >&2; fail "resume exited $?"; }
job_done "$J"
expect_eq "the resumed job exports what a clean run does" "$(exports "$T/s1")" \
  "$(exports "$J")"

# --- 7. a retried reduce over a large list gets the same list ---------------------------
awk 'BEGIN { for (i = 0; i < 5000; i++) printf "l%d\n", i }' > "$T/many.txt"
echo "$T/many.txt" > "$T/list.txt"
cat > "$T/many.orch" <<'EOF'
pipeline many
domain doc
domain part in doc
source doc.path = lines("list.txt")
call rd   = read_file()
call sp   = split_lines()
call id   = identity()
call cat  = flaky(fail_attempts=1) with retries=1
call same = flaky(fail_attempts=0)
call cnt  = count()
doc.data = rd(doc.path)
part.v   = expand sp(doc.data)
part.w   = id(part.v)
doc.all  = reduce cat(part.w)
doc.ref  = reduce same(part.w)
doc.n    = reduce cnt(part.w)
output doc.all
output doc.ref
output doc.n
EOF
run_job "$T/many.orch" "$T/m"
job_done "$T/m"
value() { "$ORCH" export "$T/m" "$1" | sed 's/.*"value": "\([^"]*\)".*/\1/'; }
expect_eq "5,000 children counted" 5000 "$(value doc.n)"
expect_eq "the reduce failed once, then ran" "error,ok" \
  "$(q "$T/m" "SELECT group_concat(outcome, ',') FROM (SELECT a.outcome FROM attempt AS a
               JOIN grain AS g ON g.id = a.grain_id JOIN call AS c ON c.id = g.call_id
               WHERE c.name = 'cat' ORDER BY a.id)")"
expect_eq "the retry got every child, in order" "$(tr -d '\n' < "$T/many.txt")" \
  "$(value doc.all)"
expect_eq "as the reduce that did not fail" "$(value doc.ref)" "$(value doc.all)"
# --- 8. fed reduces of three parents on one worker -----------------------------------------
# One reduce worker and batch=1: its second batch is sent while it asks for the first
# one's pages, and comes to it before them.
: > "$T/list3.txt"
for k in 1 2 3; do
  awk -v k="$k" 'BEGIN { for (i = 0; i < 5000; i++) printf "%d.%d\n", k, i }' > "$T/f$k.txt"
  echo "$T/f$k.txt" >> "$T/list3.txt"
done
sed -e 's/"list.txt"/"list3.txt"/' \
  -e 's/^call cat  = .*/call cat  = flaky(fail_attempts=0) with batch=1, workers=1/' \
  "$T/many.orch" > "$T/three.orch"
run_job "$T/three.orch" "$T/m3"
job_done "$T/m3"
for k in 1 2 3; do
  expect_eq "parent $k: every child, in order" "$(tr -d '\n' < "$T/f$k.txt")" \
    "$("$ORCH" export "$T/m3" doc.all | grep -F "f$k.txt" |
      sed 's/.*"value": "\([^"]*\)".*/\1/')"
done
echo "streaming: ok"
