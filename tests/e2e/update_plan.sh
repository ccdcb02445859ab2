#!/usr/bin/env bash
# orch update DIR PIPELINE (DESIGN §10): an edited pipeline runs only what it changes.
#   options  workers, batch, retries changed: adopted, nothing runs, plan history grows;
#   args     a middle call's argument changed: it and its downstream run, its upstream
#            never (their results are taken from the previous revision), and every export
#            equals a fresh run's of the edited pipeline, byte for byte;
#   new call a new statement downstream: it runs alone;
#   --rerun  a call named runs again with its downstream, nothing else;
#   reclaimed an upstream port that was not `output` (its bytes freed) runs again;
#   dropped  a statement dropped: retired, its items history, export refuses it; back later;
#   source   a new source (a new root domain): the ports after it move up with their items;
#   refused  a domain with a new parent, a source of another kind, a broken pipeline:
#            refused with why, the job unchanged;
#   kill -9  during an edited update, then resume: the same export.
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/docs"
for f in a b c; do printf '%s one two\nthree %s\n' "$f" "$f" > "$T/docs/$f.txt"; done
printf '' > "$T/docs/e.txt" # no words: an empty expansion
# No `output`: every payload is kept, so every unchanged step can be taken over.
cat > "$T/p.orch" <<'PIPE'
pipeline p
domain doc
domain word in doc
source doc.path = files("docs/*.txt")
call rd = read_file()
call sp = split(sep=" ")
call up = upper()
call keep = nonempty()
call cat = concat(sep="+")
doc.text = rd(doc.path)
word.w = expand sp(doc.text)
word.u = up(word.w)
word.k = filter keep(word.u)
doc.out = reduce cat(word.k)
PIPE
J=$T/job
run_job "$T/p.orch" "$J"

# ---- options only ---------------------------------------------------------------------------
n=$(last_attempt "$J")
sed -e 's/^call up = upper()$/call up = upper() with workers=2, batch=3, retries=1/' \
  "$T/p.orch" > "$T/opts.orch"
"$ORCH" update "$J" "$T/opts.orch" --progress none 2> "$T/log" || fail "options: $(cat "$T/log")"
grep -q "adopted: only options changed, nothing runs again" "$T/log" || fail "$(cat "$T/log")"
expect_eq "options: nothing ran" "$n" "$(last_attempt "$J")"
expect_eq "options: plan history" "2 1" "$(q "$J" "SELECT count(*), (SELECT hash FROM plan ORDER BY id DESC LIMIT 1) = (SELECT plan_hash FROM job) FROM plan" | tr '|' ' ')"
grep -q "workers=2" <(q "$J" "SELECT plan_text FROM job") || fail "the job's plan is not the edited one"

# ---- a middle call's argument -----------------------------------------------------------------
n=$(last_attempt "$J")
sed -e 's/^call up = upper()$/call up = identity()/' "$T/p.orch" > "$T/args.orch"
"$ORCH" update "$J" "$T/args.orch" --progress none 2> "$T/log" || fail "args: $(cat "$T/log")"
expect_eq "args: what it computes anew" "  port word.u: computed differently (its function, arguments, inputs or expansion changed)
  port word.k: computed differently (its function, arguments, inputs or expansion changed)
  port doc.out: computed differently (its function, arguments, inputs or expansion changed)" \
  "$(grep '^  ' "$T/log")"
grep -q "orch: update: 0 new, 0 changed, 0 removed, 4 new revisions for the edited pipeline" "$T/log" ||
  fail "$(cat "$T/log")"
# 4 roots, 12 words: up and keep per word, cat per doc; rd and sp taken over.
expect_eq "args: it and its downstream ran, its upstream not" "rd=0 sp=0 up=12 keep=12 cat=4" \
  "$(attempts_since "$J" "$n")"
grep -q "8 grains took their result from the previous plan's revision" "$T/log" || fail "$(cat "$T/log")"
summary_ok "$J" "$T/log"
job_done "$J"
same_as_fresh "$J" "$T/args.orch"
expect_eq "args: revisions" "4|4" "$(q "$J" "SELECT sum(reason = 'plan'), sum(state = 'live') FROM revisions")"
# status shows the plans the job has run, and its last update.
"$ORCH" status "$J" > "$T/status"
expect_eq "status: three plans" 3 "$(sed -n '/^plans:/,/^update:/p' "$T/status" | grep -c ' adopted ')"
grep -q "^update:     #2 at .*: 0 new, 0 changed, 0 removed, 4 new revisions for an edited pipeline; finished$" \
  "$T/status" || fail "status: $(cat "$T/status")"

# ---- a new call downstream -------------------------------------------------------------------
n=$(last_attempt "$J")
cp "$T/args.orch" "$T/new.orch"
printf 'call n = count()\ndoc.n = reduce n(word.w)\n' >> "$T/new.orch"
"$ORCH" update "$J" "$T/new.orch" --progress none 2> "$T/log" || fail "new call: $(cat "$T/log")"
grep -q "^  new port doc.n$" "$T/log" || fail "$(cat "$T/log")"
expect_eq "new call: it alone ran" "rd=0 sp=0 up=0 keep=0 cat=0 n=4" "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/new.orch"

# ---- --rerun: a call and its downstream, as if it had changed --------------------------------
n=$(last_attempt "$J")
"$ORCH" update "$J" --rerun up --progress none 2> "$T/log" || fail "rerun: $(cat "$T/log")"
grep -q "^  --rerun up, and what is downstream of it$" "$T/log" || fail "$(cat "$T/log")"
expect_eq "rerun up: it and its downstream ran" "rd=0 sp=0 up=12 keep=12 cat=4 n=0" "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/new.orch"
if "$ORCH" update "$J" --rerun nope 2> "$T/err"; then fail "--rerun of no call accepted"; fi
grep -q "has no call 'nope'" "$T/err" || fail "$(cat "$T/err")"

# ---- an upstream port whose bytes were reclaimed -----------------------------------------------
# With `output doc.out` and `output doc.n`, doc.text and the words are freed once read: an
# edit of cat needs the words, which must be made again: rd runs for every doc, sp for the
# three with words (e.txt's empty expansion is taken over: nothing to hand on), up for
# every word. keep, a filter, hands on its input's bytes: taken over. n's result is an
# `output`, kept: taken over. The export is still a fresh run's.
cp "$T/new.orch" "$T/out.orch"
printf 'output doc.out\noutput doc.n\n' >> "$T/out.orch"
J=$T/job2
run_job "$T/out.orch" "$J"
n=$(last_attempt "$J")
sed -e 's/sep="+"/sep="-"/' "$T/out.orch" > "$T/out2.orch"
"$ORCH" update "$J" "$T/out2.orch" --progress none 2> "$T/log" || fail "reclaimed: $(cat "$T/log")"
expect_eq "reclaimed: the freed steps ran again, n did not" "rd=4 sp=3 up=12 keep=0 cat=4 n=0" "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/out2.orch"

# ---- a dropped statement: retired, its items history; back later -----------------------------
J=$T/job
n=$(last_attempt "$J")
grep -v '^doc.out = ' "$T/new.orch" > "$T/removed.orch"
"$ORCH" update "$J" "$T/removed.orch" --progress none 2> "$T/log" || fail "drop: $(cat "$T/log")"
grep -q "^  port doc.out: dropped (its items stay as history)$" "$T/log" || fail "$(cat "$T/log")"
grep -q "adopted: nothing computes anew, nothing runs again" "$T/log" || fail "$(cat "$T/log")"
expect_eq "drop: nothing ran" "$n" "$(last_attempt "$J")"
grep -q "^retired doc.out = reduce cat(word.k)$" <(q "$J" "SELECT plan_text FROM job") ||
  fail "doc.out not retired in the job's plan"
if "$ORCH" export "$J" doc.out 2> "$T/err"; then fail "export of a dropped port"; fi
grep -q "port 'doc.out' left the pipeline at an edit" "$T/err" || fail "$(cat "$T/err")"
expect_eq "drop: the live roots keep their items of it, as history" 4 \
  "$(q "$J" "SELECT count(*) FROM item AS i JOIN port AS p ON p.id = i.port_id
             JOIN root AS r ON r.entity_id = i.entity_id AND r.retired_at IS NULL
             WHERE p.qualified = 'doc.out'")"
# A new file: nothing computes the dropped port for it.
printf 'd four\n' > "$T/docs/d.txt"
"$ORCH" update "$J" "$T/removed.orch" --progress none 2> "$T/log" || fail "drop, new file: $(cat "$T/log")"
grep -q "orch: update: 1 new, 0 changed, 0 removed" "$T/log" || fail "$(cat "$T/log")"
expect_eq "drop: no cat for the new root" "rd=1 sp=1 up=2 keep=2 cat=0 n=1" "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/removed.orch"
# Back: a port that was dropped is new again; the roots that had it take it over.
n=$(last_attempt "$J")
"$ORCH" update "$J" "$T/new.orch" --progress none 2> "$T/log" || fail "back: $(cat "$T/log")"
grep -q "^  new port doc.out" "$T/log" || fail "$(cat "$T/log")"
expect_eq "back: cat only for the root that never had doc.out" "rd=0 sp=0 up=0 keep=0 cat=1 n=0" \
  "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/new.orch"

# ---- a new source: a new root domain --------------------------------------------------------
# Its port takes an id before every statement's (sources come first): the items of the
# ports after it move up, and keep their names.
n=$(last_attempt "$J")
# The items of the first revision of docs/a.txt, by port name: the same after the move.
first=$(q "$J" "SELECT min(entity_id) FROM revisions WHERE key = 'docs/a.txt'")
items_of() { q "$J" "SELECT group_concat(p.qualified || ':' || i.state || ':' || coalesce(i.payload_id, ''), ' ')
                     FROM (SELECT * FROM item WHERE entity_id = $first) AS i
                     JOIN port AS p ON p.id = i.port_id ORDER BY p.qualified"; }
before=$(items_of)
printf 'l1\nl2\n' > "$T/list.txt"
cp "$T/new.orch" "$T/src.orch"
printf 'domain item\nsource item.v = lines("list.txt")\ncall up2 = upper()\nitem.u = up2(item.v)\n' >> "$T/src.orch"
"$ORCH" update "$J" "$T/src.orch" --progress none 2> "$T/log" || fail "new source: $(cat "$T/log")"
grep -q "^  new port item.v$" "$T/log" || fail "$(cat "$T/log")"
expect_eq "new source: only its call ran" "rd=0 sp=0 up=0 keep=0 cat=0 n=0 up2=2" "$(attempts_since "$J" "$n")"
expect_eq "new source: the old items kept their ports" "$before" "$(items_of)"
expect_eq "new source: the ids" "doc.path=0 item.v=1" \
  "$(q "$J" "SELECT group_concat(qualified || '=' || id, ' ') FROM (SELECT * FROM port WHERE id < 2 ORDER BY id)")"
same_as_fresh "$J" "$T/src.orch"
# Dropped again, with its domain: the source is retired, its roots too (removed), and a
# line added to its file later is not admitted.
n=$(last_attempt "$J")
"$ORCH" update "$J" "$T/new.orch" --progress none 2> "$T/log" || fail "drop source: $(cat "$T/log")"
grep -q "^  port item.v: dropped (its items stay as history)$" "$T/log" || fail "$(cat "$T/log")"
grep -q "^retired source item.v = lines(" <(q "$J" "SELECT plan_text FROM job") ||
  fail "item.v not retired in the job's plan"
expect_eq "drop source: its roots retired" "2 removed" \
  "$(q "$J" "SELECT count(*), reason FROM revisions WHERE domain = 'item' AND state = 'retired'" | tr '|' ' ')"
if "$ORCH" export "$J" item.v 2> "$T/err"; then fail "export of a dropped source"; fi
grep -q "left the pipeline" "$T/err" || fail "$(cat "$T/err")"
printf 'l3\n' >> "$T/list.txt"
"$ORCH" update "$J" --progress none 2> "$T/log" || fail "update after the drop: $(cat "$T/log")"
grep -q "orch: update: 0 new, 0 changed, 0 removed" "$T/log" || fail "$(cat "$T/log")"
expect_eq "drop source: nothing ran" "$n" "$(last_attempt "$J")"
same_as_fresh "$J" "$T/new.orch"

# ---- refused ---------------------------------------------------------------------------------
n=$(last_attempt "$J")
plans=$(q "$J" "SELECT count(*) FROM plan")
cat > "$T/parent.orch" <<'PIPE'
pipeline p
domain doc
domain top
domain word in top
source doc.path = files("docs/*.txt")
source top.x = lines("docs/b.txt")
call sp = split(sep=" ")
word.w = expand sp(top.x)
PIPE
if "$ORCH" update "$J" "$T/parent.orch" 2> "$T/err"; then fail "a new parent accepted"; fi
grep -q "domain word: its parent is now top (was doc): its entities cannot move" "$T/err" ||
  fail "$(cat "$T/err")"
grep -q "domain word: its parent is now top" "$T/err" || fail "$(cat "$T/err")"
printf 'docs/a.txt\n' > "$T/names.txt"
sed -e 's|^source doc.path = files("docs/\*.txt")$|source doc.path = lines("names.txt")|' \
  "$T/new.orch" > "$T/kind.orch"
grep -q 'lines("names.txt")' "$T/kind.orch" || fail "kind.orch: the sed did not apply"
if "$ORCH" update "$J" "$T/kind.orch" 2> "$T/err"; then fail "a source of another kind accepted"; fi
grep -q "^  domain doc: its source is now lines() (was files())$" "$T/err" || fail "$(cat "$T/err")"
grep -q "Run the edited pipeline as a new job" "$T/err" || fail "$(cat "$T/err")"
printf 'pipeline broken\ndomain\n' > "$T/bad.orch"
if "$ORCH" update "$J" "$T/bad.orch" 2> "$T/err"; then fail "a broken pipeline accepted"; fi
grep -q "bad.orch:2:" "$T/err" || fail "no compiler error: $(cat "$T/err")"
expect_eq "refusals changed nothing" "$n $plans" "$(last_attempt "$J") $(q "$J" "SELECT count(*) FROM plan")"

# ---- kill -9 during an edited update -----------------------------------------------------------
# The edit makes `up` sleep 20 ms a word: 240 words, killed once some ran, resumed.
mkdir -p "$T/k/docs"
python3 -c '
import sys
for i in range(40):
    with open("%s/docs/%02d.txt" % (sys.argv[1], i), "w") as f:
        f.write(" ".join("w%d_%d" % (i, j) for j in range(6)))
' "$T/k"
sed -e 's/^call up = upper()$/call up = sleep(ms=0)/' "$T/p.orch" > "$T/k/p.orch"
sed -e 's/^call up = sleep(ms=0)$/call up = sleep(ms=20)/' "$T/k/p.orch" > "$T/k/p2.orch"
J=$T/k/job
run_job "$T/k/p.orch" "$J"
"$ORCH" update "$J" "$T/k/p2.orch" --progress none 2> "$T/k/log" &
pid=$!
some_ran() { [ "$(qlive "$J" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
                               JOIN call AS c ON c.id = g.call_id WHERE c.name = 'up'")" -gt 250 ]; }
wait_until 60 "some of the edited update ran" some_ran
kill -9 "$pid"
wait "$pid" 2> /dev/null || true
none_left 5 -f "$T/k/job"
# The same command again (not `orch resume`): it finishes the edit's update, still taking
# results over, before it starts one of its own.
"$ORCH" update "$J" "$T/k/p2.orch" --progress none 2> "$T/k/rlog" || fail "update again: $(cat "$T/k/rlog")"
grep -q "orch: update: finishing the update that was under way (#1) first" "$T/k/rlog" ||
  fail "$(cat "$T/k/rlog")"
job_done "$J"
same_as_fresh "$J" "$T/k/p2.orch"
expect_eq "kill -9: the edit's update finished, then the command's own" "1 1 2" \
  "$(q "$J" "SELECT count(*), min(finished_at IS NOT NULL), (SELECT count(*) FROM job_update) FROM job_update WHERE plan_id IS NOT NULL" | tr '|' ' ')"
# rd and sp ran once per doc, in the first run: the update and its resume took them over.
expect_eq "kill -9: rd and sp never ran again" "rd=40 sp=40" "$(attempts_since "$J" 0 | cut -d' ' -f1-2)"
echo "update_plan: ok"
