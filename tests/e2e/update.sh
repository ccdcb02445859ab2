#!/usr/bin/env bash
# orch update DIR (DESIGN §10): new, changed and removed inputs run only what they affect.
#   files()  add 2 files, change 1, remove 1: the export equals a fresh run's over the new
#            directory, byte for byte; no grain under an unchanged root runs again; the
#            changed and removed roots are retired (view revisions) and stay as history;
#            a file touched but not changed (same bytes) is kept; an update with nothing
#            new runs nothing; keys are relative to the pipeline's directory, so a job
#            made from another directory's copy gives the same export.
#   lines()  a removed line, a repeated line (#2) and an appended one.
#   (edited pipelines: update_plan.sh)
#   old jobs a job whose keys are from before schema 13 (absolute files() keys, repeated
#            lines with one key) is converted on its first read-write open.
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/a/docs"
for f in b c d e; do printf '%s one two\nthree %s\n' "$f" "$f" > "$T/a/docs/$f.txt"; done
cat > "$T/a/p.orch" <<'PIPE'
pipeline p
domain doc
domain word in doc
source doc.path = files("docs/*.txt")
call rd = read_file()
call sp = split(sep=" ")
call up = upper()
call cat = concat(sep="+")
call n = count()
doc.text = rd(doc.path)
word.w = expand sp(doc.text)
word.u = up(word.w)
doc.out = reduce cat(word.u)
doc.n = reduce n(word.u)
output doc.out
output doc.n
PIPE
J=$T/a/job
run_job "$T/a/p.orch" "$J"
expect_eq "keys relative to the pipeline" "docs/b.txt docs/c.txt docs/d.txt docs/e.txt" \
  "$(q "$J" "SELECT group_concat(key, ' ') FROM (SELECT key FROM revisions ORDER BY position)")"
expect_eq "base_dir" "$T/a" "$(q "$J" "SELECT base_dir FROM job")"

# Nothing changed: an update scans, runs nothing.
n0=$(q "$J" "SELECT count(*) FROM attempt")
"$ORCH" update "$J" --progress none 2> "$T/log0" || fail "update: $(cat "$T/log0")"
grep -q "orch: update: 0 new, 0 changed, 0 removed" "$T/log0" || fail "$(cat "$T/log0")"
expect_eq "nothing ran" "$n0" "$(q "$J" "SELECT count(*) FROM attempt")"

# Snapshot of the grains under the roots that will not change (b, e).
keep="SELECT g.id || ':' || g.generation || ':' || g.outcome FROM grain AS g
      JOIN entity AS x ON x.id = g.entity_id
      WHERE x.key LIKE 'docs/b.txt%' OR x.key LIKE 'docs/e.txt%' ORDER BY g.id"
before=$(q "$J" "$keep")
old_c=$(q "$J" "SELECT entity_id FROM revisions WHERE key = 'docs/c.txt'")
printf 'a new one\n' > "$T/a/docs/a.txt"            # new, sorts first
printf 'z last\n' > "$T/a/docs/z.txt"               # new, sorts last
printf 'c changed here\n' > "$T/a/docs/c.txt"       # changed
rm "$T/a/docs/d.txt"                                # removed
touch -d '2001-01-01' "$T/a/docs/e.txt"             # touched, same bytes
"$ORCH" update "$J" --progress none 2> "$T/log1" || fail "update: $(cat "$T/log1")"
grep -q "orch: update: 2 new, 1 changed, 1 removed" "$T/log1" || fail "$(cat "$T/log1")"
summary_ok "$J" "$T/log1"
job_done "$J"

# The same pipeline, run fresh over the directory as it is now, from a copy elsewhere:
# keys do not depend on where the pipeline is.
mkdir "$T/fresh"
cp -r "$T/a/docs" "$T/a/p.orch" "$T/fresh/"
run_job "$T/fresh/p.orch" "$T/fresh/job"
for port in doc.out doc.n doc.text word.u; do
  "$ORCH" export "$J" "$port" --all > "$T/upd.$port" || fail "export $port"
  "$ORCH" export "$T/fresh/job" "$port" --all > "$T/fresh.$port"
  # doc.text and word.u hold no path; doc.path would (the values are absolute paths).
  cmp -s "$T/upd.$port" "$T/fresh.$port" ||
    fail "$port differs from a fresh run: $(diff "$T/upd.$port" "$T/fresh.$port")"
done
expect_eq "export order: the source's now" "docs/a.txt docs/b.txt docs/c.txt docs/e.txt docs/z.txt" \
  "$("$ORCH" export "$J" doc.out | python3 -c '
import json, sys
print(" ".join(json.loads(l)["key"] for l in sys.stdin))')"
expect_eq "grains under unchanged roots untouched" "$before" "$(q "$J" "$keep")"
expect_eq "no attempt under unchanged roots since the first run" 0 \
  "$(q "$J" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
             JOIN entity AS x ON x.id = g.entity_id
             WHERE (x.key LIKE 'docs/b.txt%' OR x.key LIKE 'docs/e.txt%') AND a.id > $n0")"
# What ran: the grains of the three new roots (a, z and c's new revision), nothing else.
expect_eq "attempts of the update: the new roots' grains only" \
  "$(q "$T/fresh/job" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
                        JOIN entity AS x ON x.id = g.entity_id
                        WHERE x.key LIKE 'docs/a.txt%' OR x.key LIKE 'docs/z.txt%'
                           OR x.key LIKE 'docs/c.txt%'")" \
  "$(q "$J" "SELECT count(*) FROM attempt WHERE id > $n0")"
expect_eq "revisions" "docs/a.txt|1|live|
docs/b.txt|1|live|
docs/c.txt|1|retired|changed
docs/c.txt|2|live|
docs/d.txt|1|retired|removed
docs/e.txt|1|live|
docs/z.txt|1|live|" "$(q "$J" "SELECT key, revision, state, coalesce(reason, '') FROM revisions
                               ORDER BY key, revision")"
expect_eq "job_update rows" "1|0|0|0|1
1|3|1|1|1" "$(q "$J" "SELECT scanned_at > 0, added, changed, removed, finished_at > 0
                      FROM job_update ORDER BY id")"
# History: the retired revision of c keeps its items; lineage by key sees both revisions.
expect_eq "retired c: its old text kept" "ok
1" "$("$ORCH" sql "$J" "SELECT payload(i.payload_id) = 'C+ONE+TWO' || char(10) || 'THREE+C'
                         || char(10) AS ok FROM item AS i JOIN port AS p ON p.id = i.port_id
                         WHERE p.qualified = 'doc.out' AND i.entity_id = $old_c")"
if "$ORCH" lineage "$J" docs/c.txt > /dev/null 2> "$T/err"; then fail "lineage: two revisions, one answer"; fi
grep -q "key 'docs/c.txt' names 2 entities" "$T/err" || fail "lineage: $(cat "$T/err")"
# A file touched again with the same bytes: its signature is refreshed, nothing retired.
expect_eq "e: the touch recorded" "$(stat -c %Y "$T/a/docs/e.txt")" \
  "$(q "$J" "SELECT r.mtime_ns / 1000000000 FROM root AS r JOIN entity AS e ON e.id = r.entity_id WHERE e.key = 'docs/e.txt'")"

# ---- lines() -----------------------------------------------------------------------------
printf 'x y\nq\nx y\nlast\n' > "$T/in.txt"
cat > "$T/l.orch" <<'PIPE'
pipeline l
domain line
source line.v = lines("in.txt")
call up = upper()
line.u = up(line.v)
output line.u
PIPE
run_job "$T/l.orch" "$T/l"
expect_eq "lines: keys" "x y|q|x y#2|last" "$(q "$T/l" "SELECT group_concat(key, '|') FROM (SELECT key FROM revisions ORDER BY position)")"
printf 'x y\nx y\nlast\nnew\nx y\n' > "$T/in.txt"   # q gone, a third x y, new
"$ORCH" update "$T/l" --progress none 2> "$T/llog" || fail "update: $(cat "$T/llog")"
grep -q "orch: update: 2 new, 0 changed, 1 removed" "$T/llog" || fail "$(cat "$T/llog")"
run_job "$T/l.orch" "$T/l2"
"$ORCH" export "$T/l" line.u --all > "$T/l.out"
"$ORCH" export "$T/l2" line.u --all > "$T/l2.out"
cmp -s "$T/l.out" "$T/l2.out" || fail "lines: export differs: $(diff "$T/l.out" "$T/l2.out")"
expect_eq "lines: what ran" "new x y#3" "$(q "$T/l" "SELECT group_concat(key, ' ') FROM (
  SELECT x.key FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
  JOIN entity AS x ON x.id = g.entity_id WHERE a.id > 4 ORDER BY x.key)")"

# ---- a job from before schema 13 ---------------------------------------------------------
# Made as it was: absolute files() keys (children's too), no root rows, no base_dir; then
# its first read-write open converts it.
mkdir -p "$T/old/docs"
printf 'p q\n' > "$T/old/docs/1.txt"
printf 'r\n' > "$T/old/docs/2.txt"
cp "$T/a/p.orch" "$T/old/p.orch"
(cd "$T" && "$ORCH" run old/p.orch --job "$T/old/job" --progress none 2> /dev/null) ||
  fail "run old"
sqlite3 "$T/old/job/state.db" "UPDATE entity SET key = '$T/old/' || key;
  CREATE TABLE reclaimed_t (payload_id INTEGER PRIMARY KEY CHECK (payload_id > 0));
  INSERT INTO reclaimed_t SELECT payload_id FROM reclaimed; DROP VIEW reclaimed; DROP VIEW items;
  DROP TABLE reclaimed_span; ALTER TABLE reclaimed_t RENAME TO reclaimed;
  DROP VIEW grains; DROP VIEW progress; DROP VIEW workers; ALTER TABLE attempt DROP COLUMN host; ALTER TABLE attempt DROP COLUMN slurm_job;
  DROP VIEW revisions; DROP TABLE root; DROP TABLE job_update; DROP TABLE plan;
  ALTER TABLE job DROP COLUMN base_dir; PRAGMA user_version = 12"
expect_eq "old: absolute keys" "$T/old/docs/1.txt/0" "$(q "$T/old/job" "SELECT key FROM entity WHERE parent_id = 1 AND ordinal = 0")"
if "$ORCH" export "$T/old/job" doc.out > /dev/null 2> "$T/err"; then fail "old: read-only export of an unmigrated job"; fi
"$ORCH" resume "$T/old/job" --progress none 2> "$T/err" || fail "old: resume: $(cat "$T/err")"
expect_eq "old: keys converted" "docs/1.txt docs/1.txt/0 docs/1.txt/1 docs/2.txt docs/2.txt/0" \
  "$(q "$T/old/job" "SELECT group_concat(key, ' ') FROM (SELECT key FROM entity WHERE domain_id >= 0 ORDER BY key)")"
expect_eq "old: base_dir and roots" "$T/old|2" "$(q "$T/old/job" "SELECT base_dir, (SELECT count(*) FROM root) FROM job")"
printf 's\n' > "$T/old/docs/3.txt"
"$ORCH" update "$T/old/job" --progress none 2> "$T/err" || fail "old: update: $(cat "$T/err")"
grep -q "orch: update: 1 new, 0 changed, 0 removed" "$T/err" || fail "old: $(cat "$T/err")"
# Repeated lines of an old job: one key twice, then #2 after the conversion.
run_job "$T/l.orch" "$T/oldl"
sqlite3 "$T/oldl/state.db" "UPDATE entity SET key = 'x y' WHERE key = 'x y#2';
  UPDATE entity SET key = 'x y' WHERE key = 'x y#3';
  CREATE TABLE reclaimed_t (payload_id INTEGER PRIMARY KEY CHECK (payload_id > 0));
  INSERT INTO reclaimed_t SELECT payload_id FROM reclaimed; DROP VIEW reclaimed; DROP VIEW items;
  DROP TABLE reclaimed_span; ALTER TABLE reclaimed_t RENAME TO reclaimed;
  DROP VIEW grains; DROP VIEW progress; DROP VIEW workers; ALTER TABLE attempt DROP COLUMN host; ALTER TABLE attempt DROP COLUMN slurm_job;
  DROP VIEW revisions; DROP TABLE root; DROP TABLE job_update; DROP TABLE plan;
  ALTER TABLE job DROP COLUMN base_dir; PRAGMA user_version = 12"
"$ORCH" resume "$T/oldl" --progress none 2> "$T/err" || fail "old lines: resume: $(cat "$T/err")"
"$ORCH" export "$T/oldl" line.u --all > "$T/oldl.out"
cmp -s "$T/oldl.out" "$T/l2.out" || fail "old lines: export differs: $(diff "$T/oldl.out" "$T/l2.out")"
echo "update: ok"
