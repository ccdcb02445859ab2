#!/usr/bin/env bash
# A file rewritten between the scan that signs it and the grain that reads it: the bytes
# read are not those of the signature stored. When the reading grain's report commits, the
# driver signs the file again and, when it moved, marks the root's signature stale, so that
# the next update finds the root changed even when the file was written back to the bytes
# the scan saw. Its export then equals a fresh run's. A file left alone while it was read
# is not changed for it. The UDF reads the path itself, and waits for the test on x.txt, so
# the test rewrites the file exactly between the scan and the read: first under `run`,
# then under `update`.
source "$(dirname "$0")/lib.sh"

mkdir "$T/data"
cat > "$T/rd.py" <<PY
#!/usr/bin/env python3
import os, sys, time
sys.path.insert(0, "$SRCDIR/udfs/python")
import orch_udf
class Rd:
    def __init__(self, args):
        pass
    def run(self, batch):
        out = []
        for r in batch:
            path = r.value.decode()
            if path.endswith("x.txt"):
                open("$T/waiting", "w").close()
                # The test's condition, not a race: it holds the read until it rewrote x.
                for _ in range(3000):
                    if not os.path.exists("$T/hold"):
                        break
                    time.sleep(0.02)
            with open(path, "rb") as f:
                out.append(f.read())
        return out
sys.exit(orch_udf.serve(Rd))
PY
chmod +x "$T/rd.py"
cat > "$T/p.orch" <<'PIPE'
pipeline p
domain doc
source doc.path = files("data/*.txt")
call rd = exec("./rd.py") with workers=1
doc.text = rd(doc.path)
output doc.text
PIPE

# held_read CONTENT CMD...: runs CMD in the background, with x.txt's read held; once the
# UDF waits, x.txt becomes CONTENT and the read goes on; CMD must succeed.
held_read() {
  local content=$1 pid st=0
  shift
  rm -f "$T/waiting"
  : > "$T/hold"
  "$@" --progress none 2> "$T/held.log" &
  pid=$!
  waiting() {
    kill -0 "$pid" 2> /dev/null || { cat "$T/held.log" >&2; fail "$* ended before its read"; }
    [ -e "$T/waiting" ]
  }
  wait_until 60 "the read of x.txt" waiting
  printf '%s' "$content" > "$T/data/x.txt"
  rm "$T/hold"
  wait "$pid" || st=$?
  [ "$st" = 0 ] || fail "$*: exit $st: $(cat "$T/held.log")"
}
# same_as_fresh WHAT: the job's export equals a fresh run's over the files as they are.
same_as_fresh() {
  rm -rf "$T/fresh"
  run_job "$T/p.orch" "$T/fresh"
  "$ORCH" export "$T/job" doc.text --all > "$T/u.out"
  "$ORCH" export "$T/fresh" doc.text --all > "$T/f.out"
  cmp -s "$T/u.out" "$T/f.out" || fail "$1: export differs from a fresh run's: $(diff "$T/u.out" "$T/f.out")"
}
update_says() {
  "$ORCH" update "$T/job" --progress none 2> "$T/log" || fail "update: $(cat "$T/log")"
  grep -qF "orch: update: $1" "$T/log" || fail "update: $(cat "$T/log")"
}

printf 'y' > "$T/data/y.txt"
printf 'B' > "$T/data/x.txt"
held_read "CC" "$ORCH" run "$T/p.orch" --job "$T/job"
expect_eq "the run read the rewritten file" "CC" "$(states "$T/job" doc.text | grep x.txt | cut -d'|' -f3)"
printf 'B' > "$T/data/x.txt"
update_says "0 new, 1 changed, 0 removed"
same_as_fresh "after run"

printf 'DDD' > "$T/data/x.txt"
held_read "EEEE" "$ORCH" update "$T/job"
grep -qF "orch: update: 0 new, 1 changed, 0 removed" "$T/held.log" || fail "$(cat "$T/held.log")"
printf 'DDD' > "$T/data/x.txt"
update_says "0 new, 1 changed, 0 removed"
same_as_fresh "after update"
update_says "0 new, 0 changed, 0 removed"
echo "source_read_changed: ok"
