#!/usr/bin/env bash
# report.sh — `orch report` (DESIGN §9): one self-contained HTML page of a run.
#   0. grain.ready_at, which the ready-queue chart draws, is there and plausible;
#   1. a finished job with known failures (a record failure, a crash retried then
#      exhausted, suppressed work downstream) and keys that need escaping: the page's
#      numbers agree with state.db (batches, attempts per call, sealed grains, retries),
#      the failures table has the expected groups, messages and keys, every key is escaped;
#   2. the page is self-contained (no http(s) reference but the SVG namespace, no script,
#      no external resource) and well-formed (a strict tag-balance check over
#      python3's html.parser);
#   3. -o FILE and -o - give the same page; a bad option is a usage error;
#   4. a tiny cap (ORCH_REPORT_MAX_BATCHES=10) draws at most 10 batches and says so on the
#      page; the other sections still count every batch;
#   5. while a driver runs the job, and on a read-only copy (as nobody when root);
#   6. in a real browser (Debian's chromium, headless, when installed: scripts/setup): the
#      DOM shows the expected counts, the browser logs no console message for the page,
#      the screenshot is a PNG, and no browser process outlives the test.
source "$(dirname "$0")/lib.sh"

cat > "$T/docs.txt" <<'EOF'
alpha a b c
beta BAD d e
gamma f g h i
delta <x&y> "q"
epsilon CRASHME j
EOF
cat > "$T/rep.orch" <<'EOF'
pipeline rep
domain doc
domain word in doc
source doc.line = lines("docs.txt")
call slow  = sleep(ms=20) with workers=2, batch=2
call words = split(sep=" ")
call chk   = fail_if(contains="BAD", kind=record) with workers=2
call boom  = fail_if(contains="CRASHME", kind=crash) with retries=1
call up    = upper() with cpus=0.5
call join  = concat(sep="+")
doc.s  = slow(doc.line)
word.w = expand words(doc.s)
word.c = chk(word.w)
word.b = boom(word.c)
word.u = up(word.b)
doc.j  = reduce join(word.u)
EOF
J=$T/job
# --batch-fixed: every dispatch is its call's batch, the batches this test names.
run_job "$T/rep.orch" "$J" --batch-fixed
job_done "$J"
# The ready queue is drawn from grain.ready_at (0012): every grain that was READY has it
# (boom's crashed grains were put back, and have the time of that), no later than its
# last attempt's start, and no earlier than the job.
expect_eq "ready_at of every grain that was ready, before its last attempt" "0|0|0" \
  "$(q "$J" "SELECT sum(ready_seq IS NOT NULL AND ready_at IS NULL),
                    sum(ready_at > (SELECT max(started_at) FROM attempt AS a
                                    WHERE a.grain_id = g.id)),
                    sum(ready_at < (SELECT created_at FROM job))
             FROM grain AS g")"

"$ORCH" report "$J" 2> "$T/report.err" || fail "orch report exited $?: $(cat "$T/report.err")"
P=$J/report.html
[ -s "$P" ] || fail "no $P"
grep -q "wrote $P" "$T/report.err" || fail "report does not say where it wrote: $(cat "$T/report.err")"

# page ID: the text of the element with id=ID.
page() {
  python3 - "$1" "$2" <<'PY'
import re, sys
m = re.search(r'id="%s">([^<]*)<' % re.escape(sys.argv[2]), open(sys.argv[1]).read())
print(m.group(1) if m else "MISSING")
PY
}
# row FILE CALL CLASS: the cell of class CLASS in the calls table's row of CALL.
row() {
  python3 - "$1" "$2" "$3" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
m = re.search(r'<tr data-call="%s">(.*?)</tr>' % re.escape(sys.argv[2]), html)
c = m and re.search(r'class="n %s">([^<]*)<' % re.escape(sys.argv[3]), m.group(1))
print(c.group(1) if c else "MISSING")
PY
}

# ---- 1. the numbers ------------------------------------------------------------------------
expect_eq "header: status" finished "$(page "$P" status)"
expect_eq "header: batches" "$(q "$J" "SELECT count(DISTINCT batch) FROM attempt")" "$(page "$P" batches)"
expect_eq "header: attempts" "$(q "$J" "SELECT count(*) FROM attempt")" "$(page "$P" attempts)"
expect_eq "header: sealed" "$(q "$J" "SELECT count(*) FROM grain WHERE phase = 'sealed'")" \
  "$(page "$P" sealed)"
for c in slow words chk boom up join; do
  expect_eq "$c: attempts" "$(q "$J" "SELECT count(*) FROM attempt a JOIN grain g ON g.id = a.grain_id
    JOIN call c ON c.id = g.call_id WHERE c.name = '$c'")" "$(row "$P" $c attempts)"
  expect_eq "$c: batches" "$(q "$J" "SELECT count(DISTINCT a.batch) FROM attempt a JOIN grain g
    ON g.id = a.grain_id JOIN call c ON c.id = g.call_id WHERE c.name = '$c'")" "$(row "$P" $c batches)"
done
expect_eq "slow: 5 docs in batches of at most 2 grains, 2 workers: at least 3 batches" 1 \
  "$(( $(row "$P" slow batches) >= 3 ))"
# The crash was retried once; a batch queued behind it on its worker (pool.h) never
# started, and its grain was dispatched again: counted with the retries.
expect_eq "boom: the crash was retried once" \
  "$(q "$J" "SELECT 1 + count(*) FROM attempt a JOIN grain g ON g.id = a.grain_id
             JOIN call c ON c.id = g.call_id AND c.name = 'boom'
             WHERE a.outcome = 'interrupted' AND a.message LIKE 'not started: worker %'")" \
  "$(row "$P" boom retries)"
expect_eq "boom: two failed attempts" 2 "$(row "$P" boom failed)"
expect_eq "chk: one failed attempt (record), no retry" "1 0" "$(row "$P" chk failed) $(row "$P" chk retries)"
expect_eq "join: 5 grains sealed (2 of them suppressed, never ran)" 5 "$(row "$P" join sealed)"

# The failures table: the groups of `orch failures`, in its order, escaped.
python3 - "$P" > "$T/failures.txt" <<'PY'
import html, re, sys
page = open(sys.argv[1]).read()
for tr in re.findall(r'<tr class="failure">(.*?)</tr>', page):
    cells = [html.unescape(re.sub(r'<[^>]*>', '', c)) for c in re.findall(r'<td[^>]*>(.*?)</td>', tr)]
    print("|".join(cells))
PY
crash1=$(q "$J" "SELECT message FROM failures WHERE call = 'boom' AND kind = 'crash' AND generation = 0")
crash2=$(q "$J" "SELECT message FROM failures WHERE call = 'boom' AND kind = 'crash' AND generation = 1")
# The groups (which of chk's record failure and boom's first crash comes first depends on
# the workers' pace) ...
expect_eq "failures table" "$(LC_ALL=C sort <<EOF
1|chk|record|fail_if: input contains "BAD"|1|beta BAD d e/1
1|boom|crash|$crash1|1|epsilon CRASHME j/1
1|boom|crash|$crash2|1|epsilon CRASHME j/1
1|boom|exhausted|gave up after 2 attempts; last: $crash2|1|epsilon CRASHME j/1
EOF
)" "$(LC_ALL=C sort "$T/failures.txt")"
# ... in the order of their first failure (four failures, four groups).
expect_eq "failures table: in the order of the failures" \
  "$(q "$J" "SELECT call || '|' || kind || '|' || message FROM failures ORDER BY failure_id")" \
  "$(cut -d'|' -f2-4 "$T/failures.txt")"
grep -q 'fail_if: input contains &quot;BAD&quot;' "$P" || fail "the message is not escaped"
expect_eq "failures total" "4 failures in 4 groups" "$(page "$P" failures-total)"
grep -q '<td>delta &lt;x&amp;y&gt; &quot;q&quot;</td>' "$P" || fail "slowest roots: the key is not there, escaped"
if grep -q '<x&y>' "$P"; then fail "a key is written unescaped"; fi
expect_eq "slowest roots: all 5 roots" 5 "$(grep -c '<tr class="root">' "$P")"
# The timeline: every batch drawn, the failed ones outlined; a tooltip names the keys.
expect_eq "timeline: one box per batch" "$(page "$P" batches)" "$(grep -c '<rect class="batch' "$P")"
expect_eq "timeline: the 3 batches with a failed attempt are marked" 3 \
  "$(grep -c '<rect class="batch failed' "$P")"
grep -q 'showing all [0-9]* batches' "$P" || fail "timeline: no note of what it shows"
grep -q '<title>slow batch [0-9]*: 2 grains, [0-9.]* m\?s' "$P" || fail "timeline: no tooltip of a batch of 2"
grep -q 'epsilon CRASHME j/1' <<< "$(grep -A1 '<rect class="batch failed' "$P")" ||
  fail "timeline: the failed batch's tooltip does not name its key"

# ---- 2. self-contained and well-formed -------------------------------------------------------
check_page() {
  python3 - "$1" <<'PY' || fail "$1 is not well-formed"
import re, sys
from html.parser import HTMLParser
VOID = {"meta", "br", "img", "link", "input", "hr", "col", "area", "base", "wbr",
        "source", "track", "embed", "param"}
class P(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors = [], []
    def handle_starttag(self, tag, attrs):
        if tag in ("script", "iframe", "object", "embed", "img", "link"):
            self.errors.append("element <%s>" % tag)
        for k, v in attrs:
            if k.startswith("on"):
                self.errors.append("event handler %s" % k)
        if tag not in VOID:
            self.stack.append(tag)
    def handle_startendtag(self, tag, attrs):
        pass
    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes <%s>" % (tag, self.stack[-1] if self.stack else "nothing"))
        else:
            self.stack.pop()
text = open(sys.argv[1]).read()
p = P()
p.feed(text)
p.close()
if p.stack:
    p.errors.append("unclosed: %s" % p.stack)
urls = set(re.findall(r'https?://[^"\' <>]*', text)) - {"http://www.w3.org/2000/svg"}
if urls:
    p.errors.append("references: %s" % sorted(urls))
if "url(" in text or "@import" in text:
    p.errors.append("CSS loads something")
for e in p.errors[:10]:
    print("page:", e, file=sys.stderr)
sys.exit(1 if p.errors else 0)
PY
}
check_page "$P"
# The checker catches what it must: an unbalanced page, a network reference.
sed 's|</table>||' "$P" > "$T/broken.html"
if (check_page "$T/broken.html") 2> /dev/null; then fail "the page checker accepts a broken page"; fi
sed 's|</body>|<img src="https://example.com/x.png"></body>|' "$P" > "$T/net.html"
if (check_page "$T/net.html") 2> /dev/null; then fail "the page checker accepts a network reference"; fi

# ---- 3. -o FILE, -o -, usage ---------------------------------------------------------------
"$ORCH" report "$J" -o "$T/o.html" 2> /dev/null || fail "report -o exited $?"
"$ORCH" report "$J" -o - > "$T/stdout.html" 2> "$T/stdout.err" || fail "report -o - exited $?"
[ ! -s "$T/stdout.err" ] || fail "report -o - wrote to stderr: $(cat "$T/stdout.err")"
expect_eq "-o FILE and -o - give the same page (but the time it was made)" \
  "$(grep -v 'report made' "$T/o.html")" "$(grep -v 'report made' "$T/stdout.html")"
expect_eq "-o FILE and the default give the same page" \
  "$(grep -v 'report made' "$T/o.html")" "$(grep -v 'report made' "$P")"
ls "$T"/o.html.tmp* > /dev/null 2>&1 && fail "a temporary file was left behind"
rc=0
"$ORCH" report "$J" --bogus 2> /dev/null || rc=$?
expect_eq "unknown option: usage error" 2 "$rc"
rc=0
"$ORCH" report "$T/nope" 2> "$T/nope.err" || rc=$?
expect_eq "no job: exit 1" 1 "$rc"
rc=0
ORCH_REPORT_MAX_BATCHES=0 "$ORCH" report "$J" -o - > /dev/null 2>&1 || rc=$?
expect_eq "a cap of 0: usage error" 2 "$rc"
"$ORCH" help report | grep -q 'usage: orch report DIR' || fail "no help for report"

# ---- 4. a bounded page ----------------------------------------------------------------------
ORCH_REPORT_MAX_BATCHES=10 "$ORCH" report "$J" -o "$T/capped.html" 2> /dev/null ||
  fail "capped report exited $?"
check_page "$T/capped.html"
total=$(page "$P" batches)
drawn=$(grep -c '<rect class="batch' "$T/capped.html")
[ "$drawn" -ge 1 ] && [ "$drawn" -le 10 ] || fail "capped: $drawn batches drawn, want 1..10"
grep -q "showing $drawn of $total batches, sampled" "$T/capped.html" ||
  fail "capped: no note 'showing $drawn of $total batches, sampled'"
expect_eq "capped: the header still counts every batch" "$total" "$(page "$T/capped.html" batches)"
expect_eq "capped: the calls table still counts every attempt" "$(row "$P" up attempts)" \
  "$(row "$T/capped.html" up attempts)"

# ---- 5. while a driver runs; a read-only copy --------------------------------------------------
seq 1 30 > "$T/nums.txt"
cat > "$T/slow.orch" <<'EOF'
pipeline slowjob
domain n
source n.v = lines("nums.txt")
call nap = sleep(ms=100)
n.w = nap(n.v)
EOF
L=$T/live
"$ORCH" run "$T/slow.orch" --job "$L" --progress none 2> "$T/live.log" &
driver=$!
ended() { [ "$(qlive "$L" "SELECT count(ended_at) FROM attempt" 2> /dev/null || echo 0)" -ge 2 ]; }
wait_until 30 "the live job's first attempts end" ended
"$ORCH" report "$L" -o "$T/live.html" 2> "$T/live.err" || fail "report of a live job exited $?: $(cat "$T/live.err")"
kill -0 $driver 2> /dev/null || fail "the live job ended before the report was made: make it slower"
expect_eq "live: status" running "$(page "$T/live.html" status)"
check_page "$T/live.html"
wait $driver || fail "the live job's driver exited $?"
job_done "$L"

chmod 755 "$T"
cp -a "$J" "$T/ro"
rm "$T/ro/report.html"
chmod -R a-w "$T/ro"
mkdir -m 777 "$T/out"
if [ "$(id -u)" -eq 0 ]; then
  command -v setpriv > /dev/null || fail "root without setpriv"
  as_user() { setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"; }
else
  as_user() { "$@"; }
fi
as_user "$ORCH" report "$T/ro" -o "$T/out/ro.html" 2> "$T/ro.err" || fail "read-only: exited $?: $(cat "$T/ro.err")"
expect_eq "read-only: the same numbers" "$(sed -n '/<table id="calls"/,/<\/table>/p' "$P")" \
  "$(sed -n '/<table id="calls"/,/<\/table>/p' "$T/out/ro.html")"
rc=0
as_user "$ORCH" report "$T/ro" 2> "$T/ro2.err" || rc=$?
expect_eq "read-only, default path: exit 1" 1 "$rc"
grep -q 'give another file with -o' "$T/ro2.err" || fail "read-only: no hint: $(cat "$T/ro2.err")"
[ ! -e "$T/ro/report.html" ] || fail "read-only: a page was written into the job"

# ---- 6. a real browser ------------------------------------------------------------------------
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  echo "report: ok (browser part skipped: no $CHROMIUM; scripts/setup installs chromium)"
  exit 0
fi
# browse OUT ARGS...: chromium headless with its own profile under $T, killed after 60 s.
browse() {
  local out=$1
  shift
  timeout -k 5 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$T/chrome-profile" --enable-logging=stderr --v=0 "$@" > "$out" 2> "$out.err" ||
    { cat "$out.err" >&2; fail "chromium exited $?"; }
}
# The console check sees what it must: a page that logs an error.
printf '<!DOCTYPE html><html><body><script>console.error("probe")</script></body></html>' > "$T/probe.html"
browse "$T/probe.dom" --dump-dom "file://$T/probe.html"
grep -q ':CONSOLE.*"probe"' "$T/probe.dom.err" || fail "chromium's log does not show console messages"

browse "$T/dom.html" --dump-dom "file://$P"
if grep ':CONSOLE' "$T/dom.html.err"; then fail "the page logged to the browser's console"; fi
expect_eq "browser: batches" "$total" "$(page "$T/dom.html" batches)"
expect_eq "browser: boxes drawn" "$total" "$(grep -c '<rect class="batch' "$T/dom.html")"
expect_eq "browser: failures" "4 failures in 4 groups" "$(page "$T/dom.html" failures-total)"
expect_eq "browser: boom's attempts" "$(row "$P" boom attempts)" "$(row "$T/dom.html" boom attempts)"
browse "$T/shot.out" --screenshot="$T/shot.png" --window-size=1400,1800 "file://$P"
if grep ':CONSOLE' "$T/shot.out.err"; then fail "the page logged to the browser's console"; fi
expect_eq "screenshot: a PNG" "89504e470d0a1a0a" "$(head -c 8 "$T/shot.png" | od -An -tx1 | tr -d ' \n')"
[ "$(stat -c %s "$T/shot.png")" -gt 10000 ] || fail "screenshot: too small to show the page"
none_left 10 -f "$T/chrome-profile"
echo "report: ok"
