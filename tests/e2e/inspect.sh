#!/usr/bin/env bash
# inspect.sh — the read-only inspection commands of DESIGN §9 on a small finished job, then
# on a live one:
#   status    job status, plan hash prefix, per-call progress, final failures and failed
#             attempts by kind, attempts, busy time per call; on a running job: the live
#             driver's pid; after kill -9: interrupted, no driver, a hint to resume
#             (job_stop.sh: the rest), an estimate of the time left;
#   sql       header + tab-separated rows, NULL/blob/escapes, --json, several statements,
#             payload(); writes refused, changing nothing; works while the job runs;
#   lineage   ancestors and descendants of a child key, of a root key containing '/', of
#             #ID; unknown and ambiguous keys;
#   failures  groups (most frequent first, 3 example keys, "... N more"), --all;
#   usage     errors exit 2, an unreadable job exits 1 with a message.
source "$(dirname "$0")/lib.sh"

# Lines -> words (split) -> fail_if "bad" (record) -> count per line; fl fails every
# attempt on lines with a "b" (error, retried once, then exhausted). One worker and batch 1,
# so that failures happen in entity order. "g" twice: a root key that names two roots;
# "x/1 bad": a root key that contains '/'.
printf '%s\n' "a b c" "d bad e bad" "bad f bad" "x/1 bad" "g" "g" > "$T/in.txt"
cat > "$T/insp.orch" <<'EOF'
pipeline insp
domain line
domain word in line
source line.text = lines("in.txt")
call sp  = split(sep=" ")                         with workers=1, batch=1
call chk = fail_if(contains="bad", kind=record)   with workers=1, batch=1
call fl  = fail_if(contains="b", kind=attempt)    with workers=1, batch=1, retries=1
call cnt = count()
word.w  = expand sp(line.text)
word.ok = chk(word.w)
line.f  = fl(line.text)
line.n  = reduce cnt(word.ok)
output line.n
EOF
J=$T/job
# --batch-fixed: every dispatch is its call's batch, the batches this test names.
run_job "$T/insp.orch" "$J" --batch-fixed
job_done "$J"

# id KEY: the entity id of a key (entity_key view, through sqlite3 itself).
id() {
  q "$J" "SELECT entity_id FROM entity_key WHERE key = '$1'"
}

# ---- status ------------------------------------------------------------------------------
# dur: a duration as status writes it (412ms, 12.3s, 3m20s, 5h07m); ms_of DUR: in ms.
dur='([0-9]+ms|[0-9]+\.[0-9]s|[0-9]+m[0-9]{2}s|[0-9]+h[0-9]{2}m)'
ms_of() {
  python3 -c '
import re, sys
m = re.fullmatch(r"(\d+)ms|(\d+\.\d)s|(\d+)m(\d\d)s|(\d+)h(\d\d)m", sys.argv[1])
ms, s, mi, ms2, h, m2 = m.groups()
print(int(ms) if ms else round(float(s) * 1000) if s else
      (int(mi) * 60 + int(ms2)) * 1000 if mi else (int(h) * 60 + int(m2)) * 60000)' "$1"
}
out=$("$ORCH" status "$J")
hash=$(q "$J" "SELECT substr(plan_hash, 1, 12) FROM job")
expect_eq "status: head" "job:        insp
status:     finished
plan:       $hash
driver:     none" "$(printf '%s\n' "$out" | sed -n 1,4p)"
expect_eq "status: per-call table" \
"call  total  waiting  ready  in_flight  sealed  ok  dropped  failed  suppressed
sp        6        0      0          0       6   6        0       0           0
chk      14        0      0          0      14   9        0       5           0
fl        6        0      0          0       6   2        0       4           0
cnt       6        0      0          0       6   3        0       0           3" \
  "$(printf '%s\n' "$out" | sed -n 6,10p)"
# Final failures (5 words with "bad", 4 lines exhausted) apart from the failed attempts (fl:
# 2 per line with a "b").
expect_eq "status: failures by kind" \
  "failures:   9 final (record 5, exhausted 4); 8 failed attempts (error 8); see \`orch failures $J\`" \
  "$(printf '%s\n' "$out" | grep '^failures:')"
# Attempts: sp 6, chk 14, fl 10 (twice each line with a "b"), cnt 3 (the suppressed ones
# never ran).
expect_eq "status: attempts" "attempts:   33 (0 running)" "$(printf '%s\n' "$out" | grep '^attempts:')"
printf '%s\n' "$out" | grep -Eq '^throughput: [0-9]+\.[0-9] grains/s \(32 sealed\)$' ||
  fail "status: no throughput line: $out"
# Busy time per call, in plan order, counting each batch once (batch=1: one per attempt;
# cnt's batches are as many as its attempts, or fewer).
nb=$(q "$J" "SELECT count(DISTINCT a.batch) FROM attempt a JOIN grain g ON g.id = a.grain_id
             JOIN call c ON c.id = g.call_id WHERE c.name = 'cnt'")
printf '%s\n' "$out" | grep -Eq "^busy:       sp $dur \(6 batches\), chk $dur \(14 batches\), fl $dur \(10 batches\), cnt $dur \($nb batch(es)?\)$" ||
  fail "status: no busy line: $out"
printf '%s\n' "$out" | grep -q '^eta:' && fail "status: an eta for a finished job: $out"

# ---- sql ---------------------------------------------------------------------------------
expect_eq "sql: header and rows" "key	depth
x/1 bad	0
x/1 bad/0	1
x/1 bad/1	1" "$("$ORCH" sql "$J" "SELECT key, depth FROM entity_key WHERE key LIKE 'x/1 bad%' ORDER BY key")"
expect_eq "sql: NULL, blob, escapes, real" "n	b	t	r
	x'00ff'	a\\tb\\nc\\\\	1.5" \
  "$("$ORCH" sql "$J" "SELECT NULL AS n, x'00ff' AS b, 'a' || char(9) || 'b' || char(10) || 'c\\' AS t, 1.5 AS r")"
expect_eq "sql --json" '{"n": null, "b": "x'"'00ff'"'", "t": "a\tb\nc\\", "r": 1.5, "i": 7}' \
  "$("$ORCH" sql "$J" --json "SELECT NULL AS n, x'00ff' AS b, 'a' || char(9) || 'b' || char(10) || 'c\\' AS t, 1.5 AS r, 7 AS i")"
expect_eq "sql: several statements" "a
1

b
2" "$("$ORCH" sql "$J" "SELECT 1 AS a; SELECT 2 AS b;")"
expect_eq "sql: SQL from stdin" "status
finished" "$(echo "SELECT status FROM job" | "$ORCH" sql "$J" -)"
expect_eq "sql: payload()" "payload(i.payload_id)
3" "$("$ORCH" sql "$J" "SELECT payload(i.payload_id) FROM item i JOIN port p ON p.id = i.port_id
     WHERE p.qualified = 'line.n' AND i.entity_id = $(id "a b c")")"

# Writes are refused, even after a statement that reads, and change nothing.
items=$(q "$J" "SELECT count(*) FROM item")
uv=$(q "$J" "PRAGMA user_version")
for s in "DELETE FROM item" "SELECT 1; DELETE FROM item" "UPDATE job SET status = 'created'" \
         "CREATE TEMP TABLE t (x)" "PRAGMA user_version = 99" "VACUUM INTO '$T/copy.db'"; do
  if "$ORCH" sql "$J" "$s" > "$T/out" 2> "$T/err"; then fail "sql accepted: $s"; fi
  grep -q "read-only" "$T/err" || fail "sql '$s': no read-only message: $(cat "$T/err")"
  [ ! -s "$T/out" ] || fail "sql '$s' ran a statement: $(cat "$T/out")"
done
for s in "ATTACH '$T/other.db' AS o" "BEGIN"; do
  if "$ORCH" sql "$J" "$s" 2> "$T/err"; then fail "sql accepted: $s"; fi
  grep -q "not allowed" "$T/err" || fail "sql '$s': $(cat "$T/err")"
done
if [ -e "$T/copy.db" ] || [ -e "$T/other.db" ]; then fail "sql wrote a file"; fi
expect_eq "sql: nothing deleted" "$items" "$(q "$J" "SELECT count(*) FROM item")"
expect_eq "sql: job untouched" "finished $uv" "$(q "$J" "SELECT status FROM job") $(q "$J" "PRAGMA user_version")"
if "$ORCH" sql "$J" "SELECT * FROM nope" 2> "$T/err"; then fail "sql: bad table accepted"; fi
grep -q "no such table: nope" "$T/err" || fail "sql: $(cat "$T/err")"

# ---- lineage -----------------------------------------------------------------------------
xb=$(id "x/1 bad")
expect_eq "lineage of a child key under a root key with '/'" "ancestors:
  line x/1 bad (#$xb)
entity:
  word x/1 bad/1 (#$(id "x/1 bad/1")): w=present ok=failed
descendants:
  (none)" "$("$ORCH" lineage "$J" "x/1 bad/1")"
expect_eq "lineage of a root, by #ID" "ancestors:
  (none: a root entity)
entity:
  line x/1 bad (#$xb): text=present f=failed n=suppressed
descendants:
  word x/1 bad/0 (#$(id "x/1 bad/0")): w=present ok=present
  word x/1 bad/1 (#$(id "x/1 bad/1")): w=present ok=failed" "$("$ORCH" lineage "$J" "#$xb")"
expect_eq "lineage --depth 0" "  (not shown: --depth 0)" \
  "$("$ORCH" lineage "$J" --depth 0 "a b c" | tail -n1)"
for k in "a b c/3" "nope" "x/1 bad/01" "a b c/" "#99999"; do
  if "$ORCH" lineage "$J" "$k" > /dev/null 2> "$T/err"; then fail "lineage '$k' accepted"; fi
  grep -q "has no entity" "$T/err" || fail "lineage '$k': $(cat "$T/err")"
done
# A repeated line is a key of its own (DESIGN §9: `#2`). A key that names two entities
# (a retired revision and the live one) is in update.sh.
expect_eq "lineage of a repeated line" "g g#2" "$(q "$J" "SELECT group_concat(key, ' ') FROM (SELECT key FROM entity WHERE key LIKE 'g%' AND parent_id IS NULL ORDER BY ordinal)")"
"$ORCH" lineage "$J" "g#2" > /dev/null || fail "lineage g#2"

# ---- failures ----------------------------------------------------------------------------
# Most frequent first; example keys are distinct entities, first to fail first.
expect_eq "failures: grouped" "8  fl  error  fail_if: input contains \"b\" (kind=attempt)
    generations 0-1: a b c, d bad e bad, bad f bad, ... 1 more
5  chk  record  fail_if: input contains \"bad\"
    generation 0: d bad e bad/1, d bad e bad/3, bad f bad/0, ... 2 more
4  fl  exhausted  gave up after 2 attempts; last: fail_if: input contains \"b\" (kind=attempt)
    generation 1: a b c, d bad e bad, bad f bad, ... 1 more
17 failures in 3 groups" "$("$ORCH" failures "$J")"
"$ORCH" failures "$J" --all > "$T/all"
expect_eq "failures --all: header" "call	key	kind	generation	time	message" "$(head -n1 "$T/all")"
expect_eq "failures --all: one line each" 18 "$(wc -l < "$T/all")"
expect_eq "failures --all: a record failure" "chk	x/1 bad/1	record	0	fail_if: input contains \"bad\"" \
  "$(grep '^chk	x/1' "$T/all" | cut -f1-4,6)"
grep -q "^chk	x/1 bad/1	record	0	20[0-9][0-9]-[01][0-9]-[0-3][0-9]T" "$T/all" ||
  fail "failures --all: no ISO time: $(cat "$T/all")"

# ---- the SQL views: the rows of schema 1 (keys derived from the roots), now stored -------
# Schema 1's definitions of entity_key, lineage and failures (migrations/0001_initial.sql),
# as plain queries: they build every key from its root's key and the ordinals, and so
# check the keys the engine stored (migrations/0002_entity_keys.sql) row for row.
OLD_KEYS="WITH RECURSIVE k (id, domain_id, key, depth) AS (
    SELECT id, domain_id, key, 0 FROM entity WHERE parent_id IS NULL
    UNION ALL
    SELECT e.id, e.domain_id, k.key || '/' || e.ordinal, k.depth + 1
    FROM k JOIN entity AS e ON e.parent_id = k.id)"
old_entity_key() {
  q "$1" "$OLD_KEYS SELECT k.id, d.name, k.key, k.depth FROM k
          JOIN domain AS d ON d.id = k.domain_id ORDER BY 1"
}
old_lineage() {
  q "$1" "$OLD_KEYS, up (entity_id, ancestor_id, depth) AS (
            SELECT id, id, 0 FROM entity
            UNION ALL
            SELECT up.entity_id, e.parent_id, up.depth + 1
            FROM up JOIN entity AS e ON e.id = up.ancestor_id WHERE e.parent_id IS NOT NULL)
          SELECT up.entity_id, de.name, ke.key, up.ancestor_id, da.name, ka.key, up.depth
          FROM up JOIN k AS ke ON ke.id = up.entity_id JOIN domain AS de ON de.id = ke.domain_id
          JOIN k AS ka ON ka.id = up.ancestor_id JOIN domain AS da ON da.id = ka.domain_id
          ORDER BY 1, 7"
}
old_failures() {
  q "$1" "WITH RECURSIVE up (failure_id, cur, suffix) AS (
            SELECT f.id, g.entity_id, '' FROM failure AS f JOIN grain AS g ON g.id = f.grain_id
            UNION ALL
            SELECT up.failure_id, e.parent_id, '/' || e.ordinal || up.suffix
            FROM up JOIN entity AS e ON e.id = up.cur WHERE e.parent_id IS NOT NULL)
          SELECT f.id, c.name, g.entity_id, r.key || up.suffix, f.kind, f.message,
                 f.generation, strftime('%Y-%m-%dT%H:%M:%fZ', f.at / 1000.0, 'unixepoch'),
                 f.grain_id
          FROM up JOIN entity AS r ON r.id = up.cur AND r.parent_id IS NULL
          JOIN failure AS f ON f.id = up.failure_id JOIN grain AS g ON g.id = f.grain_id
          JOIN call AS c ON c.id = g.call_id ORDER BY 1"
}
# Three levels (line -> word -> piece); "a-b c" twice: a repeated line is a repeated root
# key, and so are all its descendants' keys; "x y/1" is a root key that is also the key of
# the word 1 of root "x y".
printf '%s\n' "a-b c" "a-b c" "x y" "x y/1" "p-q-r" > "$T/nest.txt"
cat > "$T/nest.orch" <<'EOF'
pipeline nest
domain line
domain word in line
domain piece in word
source line.text = lines("nest.txt")
call sp  = split(sep=" ")
call cut = split(sep="-")
word.text  = expand sp(line.text)
piece.text = expand cut(word.text)
output piece.text
EOF
N=$T/nest
run_job "$T/nest.orch" "$N"
job_done "$N"
expect_eq "entities of the nested job" 27 "$(q "$N" "SELECT count(*) FROM entity")"
expect_eq "entity_key: the rows of schema 1" "$(old_entity_key "$N")" \
  "$(q "$N" "SELECT * FROM entity_key ORDER BY entity_id")"
expect_eq "lineage: the rows of schema 1" "$(old_lineage "$N")" \
  "$(q "$N" "SELECT * FROM lineage ORDER BY entity_id, depth")"
expect_eq "lineage: 27 + 22 + 13 rows" 62 "$(q "$N" "SELECT count(*) FROM lineage")"
expect_eq "failures: the rows of schema 1" "$(old_failures "$J")" \
  "$(q "$J" "SELECT * FROM failures ORDER BY failure_id")"
expect_eq "failures: 17 rows" 17 "$(q "$J" "SELECT count(*) FROM failures")"
# Look-ups by key and by id, through orch sql. The chains of piece 1 of word 0 of each
# root "a-b c" (roots 0 and 1), found by walking the ordinals down.
chain() {
  local root word piece
  root=$(q "$N" "SELECT id FROM entity WHERE parent_id IS NULL AND ordinal = $1")
  word=$(q "$N" "SELECT id FROM entity WHERE parent_id = $root AND ordinal = 0")
  piece=$(q "$N" "SELECT id FROM entity WHERE parent_id = $word AND ordinal = 1")
  local k="a-b c${2:-}"
  printf '%s\t0\t%s\tpiece\t%s/0/1\n' "$piece" "$piece" "$k"
  printf '%s\t1\t%s\tword\t%s/0\n' "$piece" "$word" "$k"
  printf '%s\t2\t%s\tline\t%s\n' "$piece" "$root" "$k"
}
# The repeated line is "a-b c#2" (DESIGN §9): each key names one chain.
for r in 0 1; do
  sfx=""; [ "$r" = 1 ] && sfx="#2"
  expect_eq "lineage WHERE key: root $r of a repeated line" \
    "$(printf 'entity_id\tdepth\tancestor_id\tancestor_domain\tancestor_key\n'; chain $r "$sfx")" \
    "$("$ORCH" sql "$N" "SELECT entity_id, depth, ancestor_id, ancestor_domain, ancestor_key
                          FROM lineage WHERE key = 'a-b c$sfx/0/1' ORDER BY entity_id, depth")"
done
p0=$(chain 0 | sed -n 1p | cut -f1)  # sed reads it all: no SIGPIPE under pipefail
expect_eq "entity_key WHERE entity_id" "key	depth
a-b c/0/1	2" "$("$ORCH" sql "$N" "SELECT key, depth FROM entity_key WHERE entity_id = $p0")"
expect_eq "lineage WHERE entity_id" "a-b c/0/1 a-b c/0 a-b c" \
  "$(q "$N" "SELECT group_concat(ancestor_key, ' ') FROM (SELECT ancestor_key FROM lineage
             WHERE entity_id = $p0 ORDER BY depth)")"
expect_eq "lineage WHERE key: a root key that is also a child's" "x y/1|0|x y/1
x y/1|0|x y/1
x y/1|1|x y" "$(q "$N" "SELECT key, depth, ancestor_key FROM lineage WHERE key = 'x y/1'
                        ORDER BY depth, ancestor_key")"
# rc_of CMD...: the exit status of CMD; its stderr is left in $T/err.
rc_of() {
  local rc=0
  "$@" > /dev/null 2> "$T/err" || rc=$?
  echo "$rc"
}
expect_eq "usage: status without DIR" 2 "$(rc_of "$ORCH" status)"
expect_eq "usage: status with two DIRs" 2 "$(rc_of "$ORCH" status "$J" x)"
expect_eq "usage: sql without SQL" 2 "$(rc_of "$ORCH" sql "$J")"
expect_eq "usage: sql, unknown option" 2 "$(rc_of "$ORCH" sql "$J" --bogus "SELECT 1")"
expect_eq "usage: lineage without ENTITY" 2 "$(rc_of "$ORCH" lineage "$J")"
expect_eq "usage: lineage, bad #ID" 2 "$(rc_of "$ORCH" lineage "$J" "#x")"
expect_eq "usage: lineage, bad --depth" 2 "$(rc_of "$ORCH" lineage "$J" --depth -1 g)"
expect_eq "usage: failures without DIR" 2 "$(rc_of "$ORCH" failures)"
expect_eq "usage: failures, unknown option" 2 "$(rc_of "$ORCH" failures "$J" --bogus)"
grep -q "unknown option '--bogus'" "$T/err" || fail "failures --bogus: $(cat "$T/err")"
for c in status sql lineage failures; do
  "$ORCH" help $c | grep -q "^usage: orch $c" || fail "no help for $c"
done
# unreadable CMD...: CMD, run on a job directory that does not exist, exits 1 and says why.
unreadable() {
  expect_eq "unknown job exits 1: orch $1" 1 "$(rc_of "$ORCH" "$@")"
  grep -qF "orch: $T/nope: not an orch job (it does not exist)" "$T/err" || fail "orch $1: $(cat "$T/err")"
}
unreadable status "$T/nope"
unreadable failures "$T/nope"
unreadable sql "$T/nope" "SELECT 1"
unreadable lineage "$T/nope" a

# ---- a live job --------------------------------------------------------------------------
# One record that sleeps: while its attempt runs, sql and status read the job and status
# names the driver; after kill -9 of the driver, status says there is none and how to go
# on; resume finishes it.
echo z > "$T/slow.txt"
cat > "$T/slow.orch" <<'EOF'
pipeline slow
domain line
source line.text = lines("slow.txt")
call nap = sleep(ms=3000)
line.out = nap(line.text)
EOF
# has_attempt JOB: an attempt row exists (orch sql itself fails until state.db does).
has_attempt() {
  [ "$("$ORCH" sql "$1" "SELECT count(*) AS n FROM attempt" 2> /dev/null | tail -n1)" = 1 ]
}
for round in finish kill; do
  L=$T/live-$round
  "$ORCH" run "$T/slow.orch" --job "$L" --progress none 2> "$L.log" &
  pid=$!
  wait_until 60 "an attempt of $L" has_attempt "$L"
  expect_eq "sql while the job runs" "name	phase
nap	in_flight" "$("$ORCH" sql "$L" "SELECT call AS name, phase FROM grains")"
  out=$("$ORCH" status "$L")
  expect_eq "status while the job runs" "status:     running
driver:     running (pid $pid)" "$(printf '%s\n' "$out" | sed -n '2p;4p')"
  expect_eq "status: in flight" "nap       1        0      0          1       0   0        0       0           0" \
    "$(printf '%s\n' "$out" | grep '^nap ')"
  # The running batch counts up to now; nothing sealed, no estimate.
  printf '%s\n' "$out" | grep -Eq "^busy:       nap $dur \(1 batch\)$" || fail "status: busy while running: $out"
  expect_eq "status: eta while nothing is sealed" "eta:        unknown (nothing sealed yet)" \
    "$(printf '%s\n' "$out" | grep '^eta:')"
  if [ $round = finish ]; then
    wait "$pid" || { cat "$L.log" >&2; fail "the live job exited $?"; }
  else
    kill -9 "$pid"
    wait "$pid" 2> /dev/null || true
    out=$("$ORCH" status "$L")
    expect_eq "status after kill -9" "status:     interrupted
driver:     none (resume with \`orch resume $L\`)" "$(printf '%s\n' "$out" | sed -n '2p;4p')"
    expect_eq "status: the attempt was interrupted" "attempts:   1 (1 interrupted, not ended)" \
      "$(printf '%s\n' "$out" | grep '^attempts:')"
    # A batch whose driver died has no end: it counts nothing, now or after the resume.
    expect_eq "status: no busy time for a batch whose driver died" \
      "busy:       nap 0ms (0 batches)
eta:        unknown (nothing sealed yet)" "$(printf '%s\n' "$out" | grep -E '^(busy|eta):')"
    "$ORCH" resume "$L" --progress none 2>> "$L.log" || { cat "$L.log" >&2; fail "resume exited $?"; }
  fi
  job_done "$L"
  out=$("$ORCH" status "$L")
  expect_eq "status after the end ($round)" "status:     finished
driver:     none" "$(printf '%s\n' "$out" | sed -n '2p;4p')"
  # One batch counted (the interrupted one of the kill round is not): at least its 3 s of
  # sleep, at most the span of the attempts.
  busy=$(printf '%s\n' "$out" | sed -En "s/^busy:       nap $dur \(1 batch\)$/\1/p")
  [ -n "$busy" ] || fail "status: busy after the end ($round): $out"
  span=$(q "$L" "SELECT max(ended_at) - min(started_at) FROM attempt")
  [ "$(ms_of "$busy")" -ge 3000 ] && [ "$(ms_of "$busy")" -le $((span + 50)) ] ||
    fail "status: busy $busy not within [3000 ms, $span ms] ($round)"
done

# ---- eta of a job killed mid-run ---------------------------------------------------------
# Six records through sleep(ms=300), one at a time: kill -9 the driver once two have
# sealed. status estimates the rest at the throughput so far; the busy time of the sealed
# batches is at least 300 ms each.
printf '%s\n' 1 2 3 4 5 6 > "$T/six.txt"
cat > "$T/six.orch" <<'EOF'
pipeline six
domain line
source line.text = lines("six.txt")
call nap = sleep(ms=300) with workers=1, batch=1
line.out = nap(line.text)
EOF
E=$T/eta
# sealed_naps JOB N: at least N grains of nap have sealed.
sealed_naps() {
  [ -f "$1/state.db" ] &&
    [ "$(qlive "$1" "SELECT count(*) FROM grain WHERE phase = 'sealed'" 2> /dev/null)" -ge "$2" ]
}
"$ORCH" run "$T/six.orch" --job "$E" --progress none 2> "$E.log" &
pid=$!
wait_until 60 "two sealed grains of $E" sealed_naps "$E" 2
workers=$(q "$E" "SELECT DISTINCT worker_pid FROM attempt")
kill -9 "$pid"
wait "$pid" 2> /dev/null || true
wait_until 10 "the killed driver's workers ($workers) to exit" gone $workers
out=$("$ORCH" status "$E")
sealed=$(q "$E" "SELECT count(*) FROM grain WHERE phase = 'sealed'")
[ "$sealed" -ge 2 ] && [ "$sealed" -le 5 ] || fail "expected a job killed mid-run, $sealed sealed"
left=$((6 - sealed))
eta=$(printf '%s\n' "$out" | grep '^eta:')
printf '%s\n' "$eta" | grep -Eq "^eta:        ~$dur \($left grains? left at [0-9]+\.[0-9] grains/s so far\)$" ||
  fail "status: eta of a killed job: $out"
# The estimate is the grains left at the throughput so far: left * span / sealed.
span=$(q "$E" "SELECT max(ended_at) - min(started_at) FROM attempt")
est=$(ms_of "$(printf '%s\n' "$eta" | sed -En "s/^eta:        ~$dur .*/\1/p")")
want=$((left * span / sealed))
[ $((est - want)) -le 100 ] && [ $((want - est)) -le 100 ] ||
  fail "status: eta $est ms, expected about $want ms ($left left, $sealed sealed in $span ms)"
busy=$(printf '%s\n' "$out" | sed -En "s/^busy:       nap $dur \($sealed batch(es)?\)$/\1/p")
[ -n "$busy" ] || fail "status: busy of a killed job (one batch per sealed grain): $out"
[ "$(ms_of "$busy")" -ge $((300 * sealed)) ] || fail "status: busy $busy < $sealed x 300 ms"
"$ORCH" resume "$E" --progress none 2>> "$E.log" || { cat "$E.log" >&2; fail "resume exited $?"; }
job_done "$E"
out=$("$ORCH" status "$E")
busy=$(printf '%s\n' "$out" | sed -En "s/^busy:       nap $dur \(6 batches\)$/\1/p")
[ -n "$busy" ] || fail "status: busy after the resume: $out"
[ "$(ms_of "$busy")" -ge 1800 ] || fail "status: busy $busy < 6 x 300 ms"
printf '%s\n' "$out" | grep -q '^eta:' && fail "status: an eta for a finished job: $out"
echo "inspect: ok"
