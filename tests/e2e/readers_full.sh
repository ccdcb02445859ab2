#!/usr/bin/env bash
# readers_full.sh — every LMDB reader slot of the payload store taken is a limit of the
# store, never a failure of the user's records: the job stops with a message
# that says so, exit 1, no record Failed and no retry spent; once a slot is free,
# `orch resume` completes it with the right values.
#
# Deterministic: the table is made of one slot (ORCH_PAYLOAD_MAX_READERS=1 at an open that
# finds no other process on the store; LMDB never shrinks a table, so the lock file is
# removed first), and that slot is held by an `orch export` blocked on a full pipe (export
# reads inside one read transaction). The driver and the workers still open the store and
# the driver reclaims (reads without a slot); the next read that needs a slot (a worker's
# of its batch's inputs, or the driver's of a payload's size) then finds none.
source "$(dirname "$0")/lib.sh"

sample=$(dirname "$ORCH")/../udfs/udf_sample.so
[ -f "$sample" ] || { echo "readers_full: $sample not built: skipped"; exit 77; }

# 3000 lines: their export is ~200 KB, more than a pipe holds, so it blocks.
python3 -c 'for i in range(3000): print("line %05d %s" % (i, "x" * 40))' > "$T/in.txt"
cat > "$T/p.orch" <<'EOF'
pipeline readers
domain doc
source doc.line = lines("in.txt")
call rev = library("sample.so", "orch_udf_sample") with workers=4, batch=4, retries=3
doc.rev = rev(doc.line)
output doc.rev
EOF
J=$T/job

# A job with every grain still to run: its library is not there yet (faults.sh, case 5).
# --staged admits every root in the first turn, so that all 3000 lines are there to export.
"$ORCH" run "$T/p.orch" --job "$J" --progress none --staged 2> "$T/err0" &&
  fail "run without the library exited 0"
grep -qF "cannot start its workers" "$T/err0" || fail "unexpected stop: $(cat "$T/err0")"
cp "$sample" "$T/sample.so"

# Nobody has the store open: the next open sizes its reader table.
rm "$J/payloads/lock.mdb"
mkfifo "$T/pipe"
exec 3<> "$T/pipe" # a reader that never reads: export blocks once the pipe is full
ORCH_PAYLOAD_MAX_READERS=1 "$ORCH" export "$J" doc.line >&3 2> "$T/export.err" &
holder=$!
stop_holder() {
  exec 3>&- # export's next write fails: it ends its transaction and exits
  kill "$holder" 2> /dev/null || true
  wait "$holder" 2> /dev/null || true
}
trap 'stop_holder; rm -rf "$T"' EXIT
read -r first <&3 # export has begun its read transaction (it writes inside it)
case $first in *'"key": "line 00000'*) ;; *) fail "export wrote: $first" ;; esac

code=0
timeout 60 "$ORCH" resume "$J" --progress none 2> "$T/err1" || code=$?
[ "$code" = 1 ] || { cat "$T/err1" >&2; fail "resume with no reader slot exited $code, not 1"; }
# Who meets the full table first says so: a worker reading its batch's inputs, or the
# driver reading the size of a payload it counts (live intermediate bytes, admission).
grep -qE "call rev could not use the payload store: cannot read the inputs of batch|payloads: begin a read transaction" "$T/err1" ||
  fail "the message does not say why: $(cat "$T/err1")"
grep -qF "reader slots are taken" "$T/err1" ||
  fail "the message does not name the slots: $(cat "$T/err1")"
grep -qF "continue with \`orch resume $J\`" "$T/err1" || fail "no resume hint: $(cat "$T/err1")"
# No failure row: neither a Failed record nor an attempt failure that a retry would count.
expect_eq "no failure recorded" 0 "$(q "$J" "SELECT count(*) FROM failure")"
expect_eq "no grain sealed" 0 "$(q "$J" "SELECT count(*) FROM grain WHERE phase = 'sealed'")"
expect_eq "no attempt left open" 0 "$(q "$J" "SELECT count(*) FROM attempt WHERE outcome IS NULL")"

stop_holder
"$ORCH" resume "$J" --progress none 2> "$T/log2" ||
  { cat "$T/log2" >&2; fail "resume once a slot is free exited $?"; }
job_done "$J"
expect_eq "every record present" 3000 "$(q "$J" "SELECT count(*) FROM item AS i
  JOIN port AS p ON p.id = i.port_id WHERE p.qualified = 'doc.rev' AND i.state = 'present'")"
expect_eq "the library's values (the lines reversed)" \
  "$(python3 -c 'for i in range(3000):
    l = "line %05d %s" % (i, "x" * 40)
    print("%s|present|%s" % (l, l[::-1]))')" \
  "$(states "$J" doc.rev)"
echo "readers_full: ok"
