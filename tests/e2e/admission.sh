#!/usr/bin/env bash
# admission.sh — the admission budgets (DESIGN §5; docs/tuning.md "Admission"): 30 documents
# of 40 pages (2,000 bytes each) are read, split into pages, passed through a slow map and
# counted back. Every payload but the counts is intermediate: read_file's, split's and
# sleep's are freed as their readers seal, and they are what --max-live-bytes bounds.
#   1. without a budget the fast calls run ahead of the slow one: most of the documents'
#      bytes are live at once;
#   2. --max-live-bytes 200K: the live bytes stay within the budget plus four documents'
#      worth, and the driver held upstream calls to let the slow one drain. A call whose
#      worker had its batches when the budget filled passes it by their outputs: read_file
#      and split each have one worker, which holds up to two batches of a document (the
#      one it runs, one queued); split streams its pages, published before the document
#      they were cut from is freed (under ASan, 2.6 documents over were seen);
#   3. budgets smaller than one expansion (1 byte; 3 unsealed grains; with ready queues
#      of 3 entries in memory) still finish: no deadlock;
#   4. job.live_bytes is exact after a kill -9 mid-run: the sizes of the counted items
#      that are present and not reclaimed; resume finishes, and a finished job has 0;
#   5. `orch status` shows the budgets of the last run;
#   6. bad --max-live-bytes values are usage errors.
# Every run's counts are those of the documents.
source "$(dirname "$0")/lib.sh"

mkdir "$T/docs"
python3 - "$T/docs" <<'EOF'
import sys
for d in range(30):
    with open("%s/d%02d.txt" % (sys.argv[1], d), "w") as f:
        f.write(",".join(("p%02d_%02d_" % (d, k)) * 250 for k in range(40)))
EOF
cat > "$T/adm.orch" <<'EOF'
pipeline admission
domain doc
domain page in doc
source doc.path = files("docs/*.txt")
call rd   = read_file()
call cut  = split(sep=",")
call slow = sleep(ms=2) with batch=4
call n    = count()
doc.data  = rd(doc.path)
page.text = expand cut(doc.data)
page.same = slow(page.text)
doc.n     = reduce n(page.same)
output doc.n
EOF
DOC=$((40 * 2000 + 39)) # one document's bytes; each of its 40 pages is 2,000

# counts JOB: the export is 30 documents of 40 pages each.
counts() {
  expect_eq "$1: counts" "30 x 40" \
    "$("$ORCH" export "$1" doc.n | python3 -c '
import json, sys
v = [json.loads(l)["value"] for l in sys.stdin]
print("%d x %s" % (len(v), ",".join(sorted(set(v)))))')"
}

# summary JOB FIELD: from the run's last line: peak (live bytes at most), budget, held.
summary() {
  sed -n -e 's/^live intermediate payloads: at most \([0-9]*\) bytes (budget \([0-9]*\)); upstream calls held for the budgets in \([0-9]*\) turns (.*)$/\1 \2 \3/p' \
    -e 's/^live intermediate payloads: at most \([0-9]*\) bytes (budget \([0-9]*\))$/\1 \2 0/p' "$1.log" |
    awk -v f="$2" '{ print (f == "peak" ? $1 : f == "budget" ? $2 : $3) }'
}

finished() { # JOB: done, right counts, nothing live left
  job_done "$1"
  counts "$1"
  expect_eq "$1: no live bytes at the end" 0 "$(q "$1" "SELECT live_bytes FROM job")"
}

# ---- 1, 2: the byte budget bounds the live bytes ----------------------------------------
run_job "$T/adm.orch" "$T/free"
finished "$T/free"
summary_ok "$T/free" "$T/free.log"
run_job "$T/adm.orch" "$T/tight" --max-live-bytes 200K
finished "$T/tight"
free_peak=$(summary "$T/free" peak)
tight_peak=$(summary "$T/tight" peak)
echo "live bytes at most: $free_peak without a budget, $tight_peak with 200 KiB"
expect_eq "the budget the run says" 204800 "$(summary "$T/tight" budget)"
[ "$free_peak" -gt $((8 * DOC)) ] ||
  fail "without a budget only $free_peak bytes were live at once: the test shows nothing"
[ "$tight_peak" -le $((204800 + 4 * DOC)) ] ||
  fail "with a budget of 200 KiB, $tight_peak bytes were live at once"
[ "$(summary "$T/tight" held)" -gt 0 ] || fail "the budget never held an upstream call"
expect_eq "no budget, nothing held" 0 "$(summary "$T/free" held)"
! grep -q 'held for the budgets' "$T/free.log" ||
  fail "a run that no budget held speaks of held turns: $(grep 'held for' "$T/free.log")"
grep -q '^live intermediate payloads: .*; upstream calls held for the budgets in [1-9][0-9]* turns (unsealed grains at their budget in [0-9]*, live bytes in [1-9][0-9]*)$' \
  "$T/tight.log" || fail "the held turns of a byte budget: $(grep 'live intermediate' "$T/tight.log")"

# ---- 3: budgets smaller than one expansion still finish ---------------------------------
run_job "$T/adm.orch" "$T/one" --max-live-bytes 1
finished "$T/one"
[ "$(summary "$T/one" peak)" -le $((3 * DOC)) ] ||
  fail "a budget of 1 byte let $(summary "$T/one" peak) bytes be live"
run_job "$T/adm.orch" "$T/grains" --max-unsealed 3
finished "$T/grains"
ORCH_QUEUE_WINDOW=3 run_job "$T/adm.orch" "$T/window" --max-unsealed 3 --max-live-bytes 1
finished "$T/window"

# ---- 4: live_bytes after kill -9, then resume -------------------------------------------
# live JOB: the sizes of the items that count (every port but doc.path's roots, which are
# read: they count too; doc.n is output) that are present and not reclaimed, from export.
live() {
  local port sum=0 n
  for port in doc.path doc.data page.text page.same; do
    n=$("$ORCH" export "$1" "$port" --all | python3 -c '
import json, sys
print(sum(len(o["value"].encode()) for o in map(json.loads, sys.stdin)
          if o["state"] == "present" and not o.get("reclaimed")))')
    sum=$((sum + n))
  done
  echo "$sum"
}
some_sealed() {
  local n
  n=$(qlive "$1" "SELECT count(*) FROM grain g JOIN call c ON c.id = g.call_id
                  WHERE c.name = 'slow' AND g.phase = 'sealed'" 2> /dev/null) || return 1
  [ "${n:-0}" -ge 100 ]
}
J=$T/killed
"$ORCH" run "$T/adm.orch" --job "$J" --progress none --max-live-bytes 200K 2> "$J.log" &
driver=$!
wait_until 60 "100 pages through slow in $J" some_sealed "$J"
workers=$(pgrep -P "$driver" | tr '\n' ' ')
kill -9 "$driver"
if wait "$driver" 2> /dev/null; then fail "the killed driver exited 0"; fi
# shellcheck disable=SC2086
wait_until 10 "the killed driver's workers to exit" gone $workers
got=$(q "$J" "SELECT live_bytes FROM job")
# item.payload_size (0010) is each present item's size; the live bytes are theirs too.
expect_eq "payload_size of the counted items not reclaimed" "$(live "$J")" \
  "$(q "$J" "SELECT sum(payload_size) FROM items WHERE state = 'present' AND NOT reclaimed
             AND port IN ('doc.path', 'doc.data', 'page.text', 'page.same')")"
expect_eq "every present item has its size" 0 \
  "$(q "$J" "SELECT count(*) FROM item WHERE state = 'present' AND payload_size IS NULL")"
[ "$got" -gt 0 ] || fail "killed mid-run with nothing live: the test shows nothing"
expect_eq "job.live_bytes after kill -9: the counted items' bytes" "$(live "$J")" "$got"
"$ORCH" resume "$J" --progress none --max-live-bytes 200K 2> "$J.log" ||
  { cat "$J.log" >&2; fail "resume after kill -9 exited $?"; }
finished "$J"
summary_ok "$J" "$J.log" # counted from what the killed run had committed

# ---- 5: status ----------------------------------------------------------------------------
expect_eq "status: admission" \
  "admission:  0 of 20000 unsealed grains, 0 B of 200.0 KiB live intermediate payloads (budgets of the last run)" \
  "$("$ORCH" status "$T/tight" | grep '^admission:')"
expect_eq "status: admission, given budgets" \
  "admission:  0 of 3 unsealed grains, 0 B of 1 B live intermediate payloads (budgets of the last run)" \
  "$("$ORCH" status "$T/window" | grep '^admission:')"

# ---- 6: usage -------------------------------------------------------------------------------
for bad in 0 -5 12Q 1.5G "" M 99999999999T; do
  st=0
  "$ORCH" run "$T/adm.orch" --job "$T/bad" --max-live-bytes "$bad" 2> "$T/bad.err" || st=$?
  expect_eq "--max-live-bytes '$bad' is a usage error" 2 "$st"
  grep -q "max-live-bytes needs a positive size" "$T/bad.err" || fail "$(cat "$T/bad.err")"
  [ ! -e "$T/bad" ] || fail "a usage error made the job directory"
done
sed 's|docs/\*.txt|docs/d00.txt|' "$T/adm.orch" > "$T/one-doc.orch"
for good in 64M=67108864 64MiB=67108864 64MB=67108864 65536=65536 1K=1024 3G=3221225472 \
  2TiB=2199023255552; do
  run_job "$T/one-doc.orch" "$T/good" --max-live-bytes "${good%=*}"
  expect_eq "--max-live-bytes ${good%=*}" "${good#*=}" "$(q "$T/good" "SELECT max_live_bytes FROM job")"
  rm -rf "$T/good" "$T/good.log"
done
echo "admission: ok"
