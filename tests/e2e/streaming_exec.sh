#!/usr/bin/env bash
# streaming_exec.sh — streaming expansions through exec() (udfs/EXEC_PROTOCOL.md, CHLD):
# a Python expander whose answer is a generator sends its children as it yields them, and
# their downstream grains run while it goes on.
#
#   1. A generator of 40 children 50 ms apart into a map: the first child's map grain ends
#      long before the expansion does (times of the attempt rows); the exports equal a run
#      where run returns the same children as a list.
#   2. A generator that raises a RecordFailure after 5 children: the expansion Failed,
#      those 5 children and their downstream items kept, the reduce Suppressed.
source "$(dirname "$0")/lib.sh"

printf '%s\n' alpha > "$T/one.txt"
cat > "$T/gen.py" <<PY
import sys, time
sys.path.insert(0, "$SRCDIR/udfs/python")
import orch_udf
class Gen:
    def __init__(self, args):
        self.n, self.ms = int(args["n"]), int(args["ms"]) / 1000.0
        self.mode, self.fail_after = args.get("mode", "gen"), int(args.get("fail_after", "-1"))
    def children(self, r):
        for k in range(self.n):
            if k == self.fail_after:
                raise orch_udf.RecordFailure("failed after %d children" % k)
            if k > 0:
                time.sleep(self.ms)
            yield r.value + b"/" + str(k).encode()
    def run(self, batch):
        if self.mode == "list":
            return [list(self.children(r)) for r in batch]
        return [self.children(r) for r in batch]
sys.exit(orch_udf.serve(Gen))
PY

# pipeline NAME ARGS: the expander -> identity -> count, over one.txt.
pipeline() { expand_pipeline "$1" "exec(\"python3 $T/gen.py\", $2)"; }
exports() { expand_exports "$1"; }

# --- 1. the first child's downstream grain ends long before the expansion ------------------
pipeline slow 'n="40", ms="50"'
run_job "$T/slow.orch" "$T/s"
job_done "$T/s"
expect_eq "40 children counted" '{"key": "alpha", "state": "present", "value": "40"}' \
  "$("$ORCH" export "$T/s" doc.n)"
# ms between the end of the map grain of child 0 and the end of the expansion (2 s).
ahead=$(expand_ahead "$T/s")
[ "$ahead" -gt 1200 ] ||
  fail "child 0's map grain ended only ${ahead} ms before its 2-second expansion"
pipeline list 'n="40", ms="0", mode="list"'
run_job "$T/list.orch" "$T/l"
job_done "$T/l"
expect_eq "the streamed job exports what a listed one does" "$(exports "$T/l")" \
  "$(exports "$T/s")"

# --- 2. a generator that fails after 5 children ------------------------------------------
pipeline fail5 'n="40", ms="5", fail_after="5"'
run_job "$T/fail5.orch" "$T/f"
job_done "$T/f"
expect_eq "the expansion failed" "failed" "$(q "$T/f" "SELECT state FROM expansion")"
expect_eq "the record failure is the generator's" "record|failed after 5 children" \
  "$(q "$T/f" "SELECT kind, message FROM failures WHERE call = 'gen'")"
expect_eq "its 5 children and their items stay" "5|5" \
  "$(q "$T/f" "SELECT count(*), sum(i.state = 'present') FROM entity AS e
               JOIN item AS i ON i.entity_id = e.id JOIN port AS p ON p.id = i.port_id
               WHERE p.qualified = 'part.w'")"
expect_eq "the reduce is suppressed" "suppressed" \
  "$(q "$T/f" "SELECT i.state FROM item AS i JOIN port AS p ON p.id = i.port_id
               WHERE p.qualified = 'doc.n'")"
echo "streaming_exec: ok"
