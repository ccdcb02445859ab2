#!/usr/bin/env bash
# A signal stops the driver wherever it waits, also outside its event loop: while an update
# rescans the job's files (the rescan signs a changed file, before the loop starts) and
# while admission signs a new file (inside a turn). A file of 1 TiB with holes takes
# minutes to hash; SIGTERM, sent once the driver has the file open, ends `orch update`
# within a bound, with exit 3 and the message of an interrupted run, and the job is kept:
# an update once the file is small again finishes, and equals a fresh run.
source "$(dirname "$0")/lib.sh"

mkdir "$T/data"
printf 'a' > "$T/data/a.txt"
cat > "$T/p.orch" <<'PIPE'
pipeline p
domain doc
source doc.path = files("data/*.txt")
call rd = read_file()
doc.text = rd(doc.path)
output doc.text
PIPE
run_job "$T/p.orch" "$T/job"

# hashing PID FILE: the process has FILE open.
hashing() {
  kill -0 "$1" 2> /dev/null || { cat "$T/log" >&2; fail "the update ended before reading $2"; }
  ls -l "/proc/$1/fd" 2> /dev/null | grep -qF -- "$2"
}
# interrupted FILE: `orch update` is sent SIGTERM while it reads FILE; it must end within
# 30 s, interrupted.
interrupted() {
  local file=$1 tpid opid st=0
  timeout -s TERM -k 5 300 "$ORCH" update "$T/job" --progress none 2> "$T/log" &
  tpid=$!
  wait_until 30 "the update's driver" pgrep -P "$tpid"
  opid=$(pgrep -P "$tpid")
  wait_until 60 "the update reading $file" hashing "$opid" "$file"
  kill -TERM "$opid"
  local deadline=$((SECONDS + 30))
  while kill -0 "$opid" 2> /dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      kill -KILL "$opid" 2> /dev/null || true
      wait "$tpid" || true
      fail "update reading $file: still running 30 s after SIGTERM"
    fi
    sleep 0.05
  done
  wait "$tpid" || st=$?
  expect_eq "update reading $file: exit status" 3 "$st"
  grep -qF "orch: interrupted; the job is kept: continue it with \`orch resume $T/job\`" \
    "$T/log" || fail "update reading $file: $(cat "$T/log")"
}

truncate -s 1T "$T/data/a.txt"
interrupted "$T/data/a.txt"
printf 'A' > "$T/data/a.txt"
truncate -s 1T "$T/data/b.txt"
interrupted "$T/data/b.txt"
# Its signing was cut short: nothing is recorded of b.txt (not a root taken as unreadable).
expect_eq "b.txt not admitted" 0 \
  "$(q "$T/job" "SELECT count(*) FROM root AS r JOIN entity AS e ON e.id = r.entity_id WHERE e.key LIKE '%b.txt'")"
rm "$T/data/b.txt"
"$ORCH" update "$T/job" --progress none 2> "$T/log" || fail "update: $(cat "$T/log")"
run_job "$T/p.orch" "$T/fresh"
"$ORCH" export "$T/job" doc.text --all > "$T/u.out"
"$ORCH" export "$T/fresh" doc.text --all > "$T/f.out"
cmp -s "$T/u.out" "$T/f.out" || fail "export after the updates differs: $(diff "$T/u.out" "$T/f.out")"
echo "signal_scan: ok"
