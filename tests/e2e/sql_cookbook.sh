#!/usr/bin/env bash
# sql_cookbook.sh — the views of migrations/0010_views.sql (items, attempts, timeline) and
# every query of docs/sql-cookbook.md, run through `orch sql` against a real job whose
# answers are known.
#
# The job is the cookbook's document pipeline — calls render, ocr and join — with a
# stand-in for each: render splits a text file into lines (pages), ocr is a small exec()
# program that sleeps, fails and succeeds as each page's words say, join is concat. The
# documents are made so that each question has one answer:
#   a.pdf  3 pages, all read; page 1 is the slowest of the job (600 ms)
#   b.pdf  4 pages; page 2 is blank: a RecordFailure, so b's joined text is suppressed
#   c.pdf  2 pages; page 0 fails its first attempt and is retried; page 1 takes 400 ms
#   d.pdf  the bad PDF: pages 0 and 1 read (200 ms each), page 2 says the PDF is
#          encrypted (a GroupFailure): pages 3-5 and the join are suppressed
#   e.pdf  2 pages; page 1 fails every attempt: Failed (exhausted) after 3 attempts
# One ocr worker and batches of one grain, so that the order of d's pages, and thus what
# its GroupFailure suppresses, is fixed.
#
# Checked:
#   1. each view exists with its documented columns, and agrees with the tables;
#   2. every ```sql block of docs/sql-cookbook.md gives its known answer (exactly, or
#      within what timing allows for the columns that measure time, and for whether d's
#      page 3, queued behind page 2 on the worker, ran under the barrier);
#   3. "What is still running" and the views while an attempt is open (a live job);
#   4. a job made before schema 10 gets the views when resume migrates it, and the
#      cookbook gives the same answers there.
source "$(dirname "$0")/lib.sh"

cd "$T"
mkdir docs
printf 'alpha\nbeta ms=600\ngamma\n' > docs/a.pdf
printf 'one\ntwo\nblank\nfour\n' > docs/b.pdf
printf 'flaky x\nms=400 y\n' > docs/c.pdf
printf 'p0 ms=200\np1 ms=200\nencrypted\np3\np4\np5\n' > docs/d.pdf
printf 'e0\ngarbled\n' > docs/e.pdf
printf '%s\n' docs/a.pdf docs/b.pdf docs/c.pdf docs/d.pdf docs/e.pdf > docs.txt
printf 'slow z ms=1500\n' > docs/slow.pdf
printf '%s\n' docs/slow.pdf > slow.txt

cat > docs_udf.py << EOF
import os, sys, time
sys.path.insert(0, "$SRCDIR/udfs/python")
import orch_udf


class Render:
    """A 'PDF' is a text file: one page per line."""
    def __init__(self, args):
        pass

    def run(self, batch):
        return [open(r.value, "rb").read().decode().splitlines() for r in batch]


class Ocr:
    """A page's words say what happens: ms=N sleeps N ms; flaky fails the first attempt;
    garbled fails every attempt; blank is a RecordFailure, encrypted a GroupFailure.
    The text is the page's other words."""
    def __init__(self, args):
        pass

    def answer(self, r):
        words = r.value.decode().split()
        for w in words:
            if w.startswith("ms="):
                time.sleep(int(w[3:]) / 1000)
        if "flaky" in words and r.attempt == 1:
            raise RuntimeError("ocr: engine busy")
        if "garbled" in words:
            raise RuntimeError("ocr: out of memory")
        if "blank" in words:
            return orch_udf.RecordFailure("ocr: no text found")
        if "encrypted" in words:
            return orch_udf.GroupFailure("ocr: the PDF is encrypted")
        return " ".join(w for w in words if not w.startswith("ms="))

    def run(self, batch):
        return [self.answer(r) for r in batch]


if __name__ == "__main__":
    sys.exit(orch_udf.serve(Ocr if sys.argv[1:] == ["ocr"] else Render))
EOF

pipeline() { # pipeline SOURCE-FILE
  cat << EOF
pipeline docs
domain pdf
domain page in pdf
source pdf.path = lines("$1")
call render = exec("python3 ./docs_udf.py render")
call ocr    = exec("python3 ./docs_udf.py ocr")    with workers=1, batch=1, retries=2
call join   = concat(sep=" ")
page.image = expand render(pdf.path)
page.text  = ocr(page.image)
pdf.text   = reduce join(page.text)
output page.text
output pdf.text
EOF
}
pipeline docs.txt > docs.orch
pipeline slow.txt > slow.orch

J="$T/job"
# --batch-fixed: every dispatch is its call's batch, the batches this test names.
run_job docs.orch "$J" --batch-fixed

# ---- 1. the views and their columns -------------------------------------------------------
columns() { q "$1" "SELECT group_concat(name, ',') FROM pragma_table_info('$2')"; }
expect_eq "items: columns" "key,domain,port,state,payload_id,payload_size,error,reclaimed,entity_id,port_id" \
  "$(columns "$J" items)"
expect_eq "attempts: columns" \
  "attempt_id,call,key,entity_id,worker,batch,generation,start,end,duration_ms,outcome,message,start_ms,end_ms,grain_id,batch_size" \
  "$(columns "$J" attempts)"
expect_eq "timeline: columns" \
  "call,worker,batch,start_ms,end_ms,duration_ms,grains,failed,outcomes" "$(columns "$J" timeline)"

expect_eq "items: one row per item" "$(q "$J" "SELECT count(*) FROM item")" \
  "$(q "$J" "SELECT count(*) FROM items")"
expect_eq "items: the table's facts" \
  "$(q "$J" "SELECT e.key, p.qualified, i.state, i.payload_id FROM item i JOIN entity e ON e.id = i.entity_id JOIN port p ON p.id = i.port_id ORDER BY 1, 2")" \
  "$(q "$J" "SELECT key, port, state, payload_id FROM items ORDER BY 1, 2")"
expect_eq "items: reclaimed agrees with the reclaimed table" \
  "$(q "$J" "SELECT count(*) FROM reclaimed")" "$(q "$J" "SELECT sum(reclaimed) FROM items")"
expect_eq "items: an error exactly for failed items" "0" \
  "$(q "$J" "SELECT count(*) FROM items WHERE (state = 'failed') <> (error IS NOT NULL)")"
expect_eq "attempts: one row per attempt" "$(q "$J" "SELECT count(*) FROM attempt")" \
  "$(q "$J" "SELECT count(*) FROM attempts")"
expect_eq "attempts: ISO times are the ms times" "0" \
  "$(q "$J" "SELECT count(*) FROM attempts WHERE
       CAST(round((julianday(start) - 2440587.5) * 86400000) AS INTEGER) <> start_ms OR
       CAST(round((julianday(end) - 2440587.5) * 86400000) AS INTEGER) <> end_ms OR
       duration_ms <> end_ms - start_ms OR start NOT GLOB '????-??-??T??:??:??.???Z'")"
expect_eq "timeline: one row per batch, every attempt counted once" \
  "$(q "$J" "SELECT count(DISTINCT batch), count(*) FROM attempt")" \
  "$(q "$J" "SELECT count(*), sum(grains) FROM timeline")"
expect_eq "timeline: a batch's failed attempts" \
  "$(q "$J" "SELECT batch, count(*) FROM attempt WHERE outcome IN ('record', 'group', 'error', 'crash', 'timeout') GROUP BY batch ORDER BY batch")" \
  "$(q "$J" "SELECT batch, failed FROM timeline WHERE failed > 0 ORDER BY batch")"
# The job's ocr worker is one process; the timeline names it in every ocr batch.
expect_eq "timeline: the ocr worker" "$(q "$J" "SELECT DISTINCT a.worker_pid FROM attempt a
    JOIN grain g ON g.id = a.grain_id JOIN call c ON c.id = g.call_id WHERE c.name = 'ocr'")" \
  "$(q "$J" "SELECT DISTINCT worker FROM timeline WHERE call = 'ocr'")"

# ---- 2. the cookbook ------------------------------------------------------------------------
# cookbook JOB [HEADING]: runs every ```sql block of docs/sql-cookbook.md (or only the one
# under HEADING, whose output it prints) through `orch sql JOB -` and checks each answer.
# An expected line is tab-separated fields: a literal, '*' (anything: pids, times) or
# '>=N' (an integer of at least N: durations). A question without an expected answer here
# fails the test, so a query added to the cookbook is tested too.
cat > cookbook.py << 'EOF'
import os, re, subprocess, sys

job, only = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
T = os.environ["T"]
text = open(os.path.join(os.environ["SRCDIR"], "docs/sql-cookbook.md")).read()
blocks, heading = [], None
for m in re.finditer(r"^## ([^\n]*)$|^```sql\n(.*?)^```$", text, re.M | re.S):
    if m.group(1) is not None:
        heading = m.group(1)
    else:
        blocks.append((heading, m.group(2)))

ERR = ("gave up after 3 attempts; last: exec 'python3 %s/docs_udf.py ocr': "
       "RuntimeError: ocr: out of memory" % T)
expected = {
    "Which documents lost pages, and why": [
        "document\tlost\tfailed\tsuppressed\twhy",
        "docs/b.pdf\t1\t1\t0\tocr: no text found",
        "docs/d.pdf\t4\t1\t3\tocr: the PDF is encrypted",
        "docs/e.pdf\t1\t1\t0\t" + ERR],
    "How many retries OCR needed": [
        "outcome\tretries", "error\t2", "ok\t1"],
    "The pages that were retried": [
        "page\tretries\toutcomes",
        "docs/c.pdf/0\t1\terror > ok",
        "docs/e.pdf/1\t2\terror > error > error"],
    "The ten slowest pages": None,  # slowest() below
    # d's page 3 may have been queued behind page 2 on the worker (pool.h: a worker holds
    # a second batch): then it ran, under the barrier, and its report was not committed.
    "What one bad PDF cost": [
        "call\tattempts\tudf_ms", "ocr\t3|4\t>=400", "render\t1\t>=0", "",
        "port\tstate\titems\terror",
        "page.text\tfailed\t1\tocr: the PDF is encrypted",
        "page.text\tsuppressed\t3\t", "pdf.text\tsuppressed\t1\t"],
    "Items per port and state": [
        "port\tpresent\tdropped\tfailed\tsuppressed",
        "pdf.path\t5\t0\t0\t0", "page.image\t17\t0\t0\t0",
        "page.text\t11\t0\t3\t3", "pdf.text\t2\t0\t0\t3"],
    "Failures by kind": [
        "call\tkind\tfailures", "ocr\terror\t4", "ocr\texhausted\t1", "ocr\tgroup\t1",
        "ocr\trecord\t1"],
    "Where the time went, per call": [
        "call\tbatches\tgrains\tfailed\tbusy_ms\tlongest_batch_ms",
        "render\t5\t5\t0\t>=0\t>=0",
        "ocr\t17|18\t17|18\t6\t>=1400\t>=600",
        "join\t2\t2\t0\t>=0\t>=0"],
    "Throughput per minute": None,  # throughput() below
    "What is still running": [
        "call\tkey\tworker\tstart\trunning_ms"],
    # the texts without their ms= words: 38 bytes over 11 pages; 16 + 9 for a and c
    "How big the outputs are": [
        "port\titems\tbytes", "page.text\t11\t38", "pdf.text\t2\t25"],
}


def fields_match(want, got):
    w, g = want.split("\t"), got.split("\t")
    if len(w) != len(g):
        return False
    for a, b in zip(w, g):
        if a == "*":
            continue
        if a.startswith(">="):
            if not re.fullmatch(r"\d+", b) or int(b) < int(a[2:]):
                return False
        elif "|" in a:
            if b not in a.split("|"):
                return False
        elif a != b:
            return False
    return True


def slowest(lines):
    # a.pdf/1 (600 ms), c.pdf/1 (400 ms), then d.pdf's two 200 ms pages in either order;
    # then fast pages; ten in all, longest first.
    rows = [l.split("\t") for l in lines[1:]]
    assert lines[0] == "page\tduration_ms", lines[0]
    assert len(rows) == 10, rows
    assert [r[0] for r in rows[:2]] == ["docs/a.pdf/1", "docs/c.pdf/1"], rows
    assert sorted(r[0] for r in rows[2:4]) == ["docs/d.pdf/0", "docs/d.pdf/1"], rows
    fast = {"docs/a.pdf/0", "docs/a.pdf/2", "docs/b.pdf/0", "docs/b.pdf/1", "docs/b.pdf/3",
            "docs/c.pdf/0", "docs/e.pdf/0"}
    assert {r[0] for r in rows[4:]} <= fast, rows
    ms = [int(r[1]) for r in rows]
    assert ms[0] >= 600 and ms[1] >= 400 and ms[3] >= 200, ms
    assert ms == sorted(ms, reverse=True), ms


def throughput(lines):
    # The run spans one minute or two: the counts per call add up to the job's.
    assert lines[0] == "minute\tcall\tdone", lines[0]
    total, minutes = {}, set()
    for l in lines[1:]:
        minute, call, n = l.split("\t")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d", minute), minute
        minutes.add(minute)
        total[call] = total.get(call, 0) + int(n)
    assert total == {"render": 5, "ocr": 11, "join": 2}, total
    assert 1 <= len(minutes) <= 2, minutes


custom = {"The ten slowest pages": slowest, "Throughput per minute": throughput}
assert set(expected) == {h for h, _ in blocks}, (
    "questions without an expected answer, or answers without a question",
    set(expected) ^ {h for h, _ in blocks})
assert len(blocks) == len(expected), "one sql block per question"

for h, sql in blocks:
    if only is not None and h != only:
        continue
    r = subprocess.run([os.environ["ORCH"], "sql", job, "-"], input=sql.encode(),
                       capture_output=True)
    out = r.stdout.decode()
    if only is not None:
        sys.stdout.write(out)
        sys.exit(r.returncode)
    if r.returncode != 0:
        sys.exit("FAIL: cookbook %r: orch sql exited %d: %s" % (h, r.returncode,
                                                                 r.stderr.decode()))
    lines = out.rstrip("\n").split("\n")
    try:
        if h in custom:
            custom[h](lines)
        else:
            want = expected[h]
            assert len(want) == len(lines) and all(
                fields_match(w, g) for w, g in zip(want, lines)), "mismatch"
    except AssertionError as e:
        sys.exit("FAIL: cookbook %r (%s):\n--- expected\n%s\n--- actual\n%s" % (
            h, e, "\n".join(expected[h] or []), out))
print("cookbook: %d queries" % len(blocks))
EOF
export T
python3 cookbook.py "$J" || fail "the cookbook's answers (job $J)"

# ---- 3. a live job: an attempt that is open -----------------------------------------------
"$ORCH" run slow.orch --job "$T/live" --progress none 2> "$T/live.log" &
driver=$!
running() {
  [ -f "$T/live/state.db" ] &&
    python3 cookbook.py "$T/live" "What is still running" > "$T/running" 2> /dev/null &&
    [ "$(wc -l < "$T/running")" -eq 2 ] &&
    # render's attempt may be seen open first (a slow build): wait for the page's ocr
    [ "$(tail -n 1 "$T/running" | cut -f1)" = ocr ]
}
wait_until 60 "an open ocr attempt in $T/live" running
IFS=$'\t' read -r call key worker start ms < <(tail -n 1 "$T/running")
expect_eq "still running: the slow page's ocr" "ocr docs/slow.pdf/0" "$call $key"
[[ "$start" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z$ ]] || fail "still running: start $start"
[[ "$ms" =~ ^[0-9]+$ ]] || fail "still running: running_ms $ms"
[ -e "/proc/$worker" ] || fail "still running: worker $worker is not a live process"
open=$("$ORCH" sql "$T/live" "SELECT coalesce(end, 'NULL'), coalesce(duration_ms, 'NULL'),
         coalesce(outcome, 'NULL'), coalesce(end_ms, 'NULL') FROM attempts WHERE call = 'ocr';
       SELECT coalesce(end_ms, 'NULL'), coalesce(duration_ms, 'NULL'), grains, failed, outcomes
         FROM timeline WHERE call = 'ocr'")
expect_eq "an open attempt and its batch" "coalesce(end, 'NULL')	coalesce(duration_ms, 'NULL')	coalesce(outcome, 'NULL')	coalesce(end_ms, 'NULL')
NULL	NULL	NULL	NULL

coalesce(end_ms, 'NULL')	coalesce(duration_ms, 'NULL')	grains	failed	outcomes
NULL	NULL	1	0	open 1" "$open"
wait "$driver" || { cat "$T/live.log" >&2; fail "the live job exited $?"; }
expect_eq "nothing runs after the end" "call	key	worker	start	running_ms" \
  "$(python3 cookbook.py "$T/live" "What is still running")"

# ---- 4. a job made before schema 10 -------------------------------------------------------
cp -a "$J" "$T/old"
# (its reclaimed ids go back to a table of 0008's shape, one row each, and come back as
# spans: 0016)
gone=$(q "$J" "SELECT group_concat(payload_id) FROM (SELECT payload_id FROM reclaimed ORDER BY 1)")
[ -n "$gone" ] || fail "the cookbook's job reclaimed nothing"
sqlite3 "$T/old/state.db" "CREATE TABLE reclaimed_t (payload_id INTEGER PRIMARY KEY CHECK (payload_id > 0));
  INSERT INTO reclaimed_t SELECT payload_id FROM reclaimed; DROP VIEW reclaimed; DROP VIEW items;
  DROP TABLE reclaimed_span; ALTER TABLE reclaimed_t RENAME TO reclaimed;
  DROP VIEW grains; DROP VIEW progress; DROP VIEW workers; ALTER TABLE attempt DROP COLUMN host; ALTER TABLE attempt DROP COLUMN slurm_job;
  DROP VIEW revisions; DROP TABLE root; DROP TABLE job_update; DROP TABLE plan;
                           ALTER TABLE job DROP COLUMN base_dir;
                           DROP VIEW attempts; DROP VIEW timeline;
                           ALTER TABLE item DROP COLUMN payload_size;
                           ALTER TABLE grain DROP COLUMN ready_at;
                           PRAGMA user_version = 9"
if "$ORCH" sql "$T/old" "SELECT 1" > /dev/null 2> "$T/err"; then
  fail "sql read a job of schema 9 (read-only never migrates)"
fi
grep -q "older than this orch's" "$T/err" || fail "sql on schema 9: $(cat "$T/err")"
"$ORCH" resume "$T/old" --progress none 2> "$T/old.log" ||
  { rc=$?; cat "$T/old.log" >&2; fail "resume of a schema-9 job exited $rc"; }
expect_eq "migrated to schema 10 or later" 1 \
  "$(q "$T/old" "PRAGMA user_version" | awk '{print ($1 >= 10)}')"
python3 cookbook.py "$T/old" || fail "the cookbook's answers on the migrated job"
expect_eq "the migrated job's reclaimed ids" "$gone" \
  "$(q "$T/old" "SELECT group_concat(payload_id) FROM (SELECT payload_id FROM reclaimed ORDER BY 1)")"
expect_eq "as spans" "$(q "$J" "SELECT count(*) FROM reclaimed_span")" \
  "$(q "$T/old" "SELECT count(*) FROM reclaimed_span")"
echo ok
