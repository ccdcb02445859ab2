#!/usr/bin/env bash
# What a line is, for lines() and split_lines(): its bytes exactly, NUL bytes included (the
# key shows a NUL as `\0`; the value keeps it), and a line ends at \n or \r\n — so a file
# written on Windows gives the same lines as one written on Unix. A \r not followed by \n
# stays in the line.
source "$(dirname "$0")/lib.sh"

# values JOB D.P: every present value of the port, one line each, as Python's repr of the
# exact bytes (from "value", or decoded from "value_b64").
values() {
  "$ORCH" export "$1" "$2" | python3 -c '
import base64, json, sys
for l in sys.stdin:
    o = json.loads(l)
    v = base64.b64decode(o["value_b64"]) if "value_b64" in o else o["value"].encode()
    print(o["key"], repr(v))'
}

# ---- lines(): NUL bytes (a long line too, so a short copy cannot pass by luck) --------
long=$(head -c 300 /dev/zero | tr '\0' x)
printf 'a\0b\nplain\n\0\n%s\0%s\n' "$long" "$long" > "$T/nul.txt"
cat > "$T/nul.orch" <<'PIPE'
pipeline nul
domain r
source r.v = lines("nul.txt")
call same = identity()
r.w = same(r.v)
output r.w
PIPE
run_job "$T/nul.orch" "$T/nul"
expect_eq "NUL lines: keys and exact values" \
  "$(printf '%s\n' "a\\0b b'a\\x00b'" "plain b'plain'" "\\0 b'\\x00'" \
     "${long}\\0${long} b'${long}\\x00${long}'")" \
  "$(values "$T/nul" r.w)"
expect_eq "the key in state.db" 'a\0b' "$(q "$T/nul" "SELECT key FROM entity ORDER BY id LIMIT 1")"
# A resume reads the file again and checks it against the keys: a NUL line still matches,
# and a changed one is named with its NUL shown.
"$ORCH" resume "$T/nul" --progress none 2> "$T/err" || fail "resume: $(cat "$T/err")"
printf 'a\0c\nplain\n\0\n%s\0%s\n' "$long" "$long" > "$T/nul.txt"
if "$ORCH" resume "$T/nul" --progress none 2> "$T/err"; then fail "a changed NUL line accepted"; fi
grep -qF 'it gives "a\0c" where the job has "a\0b"' "$T/err" || fail "message: $(cat "$T/err")"

# ---- lines() and split_lines(): CRLF ----------------------------------------------------
mkdir "$T/texts"
printf 'one\r\ntwo\r\n\r\nfour\r\nlast\r' > "$T/texts/crlf.txt"
printf 'one\ntwo\n\nfour\nlast\r' > "$T/texts/lf.txt"
printf 'mid\rdle\r\n' > "$T/texts/lone.txt"
cat > "$T/crlf.orch" <<'PIPE'
pipeline crlf
domain r
domain doc
domain line in doc
source r.v = lines("texts/crlf.txt")
source doc.path = files("texts/*.txt")
call same = identity()
call read = read_file()
call cut = split_lines()
r.w = same(r.v)
doc.text = read(doc.path)
line.raw = expand cut(doc.text)
output r.w
output line.raw
PIPE
run_job "$T/crlf.orch" "$T/crlf"
expect_eq "lines() with CRLF" \
  "$(printf '%s\n' "one b'one'" "two b'two'" " b''" "four b'four'" $'last\r b\'last\\r\'')" \
  "$(values "$T/crlf" r.w)"
# split_lines(): the files in path order (crlf.txt, lf.txt, lone.txt), values only.
expect_eq "split_lines() with CRLF, LF and a lone CR" \
  "b'one' b'two' b'' b'four' b'last\\r' b'one' b'two' b'' b'four' b'last\\r' b'mid\\rdle'" \
  "$(values "$T/crlf" line.raw | sed 's/^[^ ]* //' | paste -sd ' ')"
echo "line_ends: ok"
