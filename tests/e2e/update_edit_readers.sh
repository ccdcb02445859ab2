#!/usr/bin/env bash
# A reader during an edited update (docs/incremental.md): an edit that changes only a
# downstream call gives every root a new revision, admitted in chunks; each root is retired
# in the transaction that admits its successor, whose unchanged items are taken over in
# that same transaction. So `export` of a port the edit leaves as it was gives, at every
# moment of the update, exactly what it gave before — never a port emptied or half there —
# and after the update every port equals a fresh run of the edited pipeline.
#
# Deterministic: the changed call is an exec() program that waits at a gate, and
# --max-unsealed 1 stops admission after its first chunk (256 roots of 1000), so the update
# is held mid-way, the first chunk swapped, the others not yet, while export is read.
source "$(dirname "$0")/lib.sh"

N=1000
mkdir -p "$T/p"
seq -f 'line %g' "$N" > "$T/p/in.txt"
cat > "$T/p/tag_udf.py" <<PY
#!/usr/bin/env python3
import os, sys, time
sys.path.insert(0, "$SRCDIR/udfs/python")
import orch_udf
class Tag:
    def __init__(self, args): self.tag = args["tag"].encode()
    def run(self, batch):
        open("$T/started", "w").close()
        driver = os.getppid()
        # Held until the test has read what it reads (or its driver is gone).
        while not os.path.exists("$T/gate") and os.getppid() == driver:
            time.sleep(0.01)
        return [r.value + b"+" + self.tag for r in batch]
sys.exit(orch_udf.serve(Tag))
PY
chmod +x "$T/p/tag_udf.py"
pipeline() { # TAG
  cat <<PIPE
pipeline p
domain r
source r.v = lines("in.txt")
call up = upper()
call tag = exec("./tag_udf.py")(tag="$1")
r.u = up(r.v)
r.t = tag(r.u)
output r.u
output r.t
PIPE
}
pipeline a > "$T/p/p.orch"
pipeline b > "$T/p/e.orch"
J=$T/job
touch "$T/gate"
run_job "$T/p/p.orch" "$J"
"$ORCH" export "$J" r.u > "$T/u.before"
"$ORCH" export "$J" r.t > "$T/t.before"
expect_eq "exported before" "$N" "$(wc -l < "$T/u.before")"

rm "$T/gate" "$T/started"
"$ORCH" update "$J" "$T/p/e.orch" --max-unsealed 1 --progress none 2> "$T/update.log" &
pid=$!
trap 'touch "$T/gate"; kill -9 $pid 2> /dev/null || true; none_left 5 -f "$T/p/tag_udf"; rm -rf "$T"' EXIT
wait_until 30 "the changed call's first batch" test -e "$T/started"
# Held: the first chunk is admitted (its new revisions, their taken-over items and its
# retired roots committed together), the rest of the roots are the previous plan's.
swapped=$(qlive "$J" "SELECT count(*) FROM revisions WHERE state = 'live' AND revision = 2")
[ "$swapped" -gt 0 ] && [ "$swapped" -lt "$N" ] ||
  fail "the update is not held mid-way: $swapped of $N roots have their new revision"
for poll in 1 2 3; do
  "$ORCH" export "$J" r.u > "$T/u.now" || fail "export r.u during the update"
  cmp -s "$T/u.before" "$T/u.now" ||
    fail "poll $poll: export of the unchanged r.u during the update has $(wc -l < "$T/u.now") of $N rows, or other rows: $(diff "$T/u.before" "$T/u.now" | head -5)"
  expect_eq "poll $poll: live roots" "$N" \
    "$(qlive "$J" "SELECT count(*) FROM revisions WHERE state = 'live'")"
done
# The changed port: each root's item is the previous plan's until its root is swapped.
"$ORCH" export "$J" r.t > "$T/t.now"
expect_eq "r.t during the update: the roots not swapped yet keep their items" \
  "$((N - swapped)) 0" "$(grep -c '+a"' "$T/t.now") $(grep -c '+b"' "$T/t.now" || true)"

touch "$T/gate"
wait "$pid" || { cat "$T/update.log" >&2; fail "the edited update exited $?"; }
trap 'rm -rf "$T"' EXIT
none_left 5 -f "$T/p/tag_udf"
grep -q "orch: update: 0 new, 0 changed, 0 removed, $N new revisions for the edited pipeline" \
  "$T/update.log" || fail "the update's summary: $(cat "$T/update.log")"
expect_eq "attempts of up in the update (taken over)" 0 \
  "$(q "$J" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
             JOIN call AS c ON c.id = g.call_id JOIN root AS r ON r.entity_id = g.entity_id
             WHERE c.name = 'up' AND r.revision = 2")"
expect_eq "retired for the plan" "$N" \
  "$(q "$J" "SELECT count(*) FROM revisions WHERE reason = 'plan' AND revision = 1")"
"$ORCH" export "$J" r.u > "$T/u.after"
cmp -s "$T/u.before" "$T/u.after" || fail "r.u after the update differs"
# same_as_fresh PIPELINE: r.u and r.t of the job export what a fresh run of PIPELINE gives.
same_as_fresh() {
  rm -rf "$T/fresh"
  run_job "$1" "$T/fresh"
  for port in r.u r.t; do
    cmp -s <("$ORCH" export "$J" "$port" --all) <("$ORCH" export "$T/fresh" "$port" --all) ||
      fail "$port after the update differs from a fresh run of $1"
  done
}
same_as_fresh "$T/p/e.orch"

# Killed mid-way, a line that a root still waiting for its new revision stood for removed,
# then resumed: that root is retired as removed at the update's end (its old items would
# otherwise stay live), the others are replaced; export equals a fresh run.
pipeline c > "$T/p/f.orch"
rm "$T/gate" "$T/started"
"$ORCH" update "$J" "$T/p/f.orch" --max-unsealed 1 --progress none 2> "$T/update.log" &
pid=$!
trap 'touch "$T/gate"; kill -9 $pid 2> /dev/null || true; none_left 5 -f "$T/p/tag_udf"; rm -rf "$T"' EXIT
wait_until 30 "the changed call's first batch" test -e "$T/started"
expect_eq "the root of line 900 waits for its new revision" "live" \
  "$(qlive "$J" "SELECT state FROM revisions WHERE key = 'line 900' AND revision = 2")"
kill -9 "$pid"
wait "$pid" 2> /dev/null || true
sed -i '/^line 900$/d' "$T/p/in.txt"
touch "$T/gate"
"$ORCH" resume "$J" --progress none 2> "$T/resume.log" ||
  { cat "$T/resume.log" >&2; fail "resume after the kill exited $?"; }
trap 'rm -rf "$T"' EXIT
none_left 5 -f "$T/p/tag_udf"
expect_eq "the edit's counts: added, changed, removed, replanned" "$((N - 1))|0|1|$((N - 1))" \
  "$(q "$J" "SELECT added, changed, removed, replanned FROM job_update ORDER BY id DESC LIMIT 1")"
expect_eq "line 900's revisions" "1|retired|plan
2|retired|removed" \
  "$(q "$J" "SELECT revision, state, reason FROM revisions WHERE key = 'line 900' ORDER BY revision")"
same_as_fresh "$T/p/f.orch"
echo "update_edit_readers: ok"
