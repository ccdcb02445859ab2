#!/usr/bin/env bash
# cli_messages.sh — the command line's small promises (docs/commands.md):
#   1. `orch report` escapes the bytes of a key that are not valid UTF-8, so the page,
#      declared UTF-8, is valid UTF-8.
source "$(dirname "$0")/lib.sh"

# ---- 1. report: keys with bytes that are not UTF-8 ---------------------------------------
printf 'ok\ncaf\xe9 BAD\n\xff\xfe BAD\nna\xc3\xafve BAD\n' > "$T/lat.txt"
cat > "$T/lat.orch" <<'EOF2'
pipeline lat
domain line
source line.text = lines("lat.txt")
call chk = fail_if(contains="BAD", kind=record)
line.c = chk(line.text)
EOF2
J=$T/lat
"$ORCH" run "$T/lat.orch" --job "$J" --progress none 2> "$T/lat.log" || true
"$ORCH" report "$J" -o "$T/lat.html" 2> "$T/report.err" ||
  fail "orch report exited $?: $(cat "$T/report.err")"
python3 - "$T/lat.html" <<'EOF2' || fail "report page is not valid UTF-8"
import sys
b = open(sys.argv[1], "rb").read()
t = b.decode("utf-8")  # strict: raises on a byte that is not UTF-8
assert "caf\\xe9" in t, "the Latin-1 byte of a key is not shown as \\xe9"
assert "\\xff\\xfe" in t, "the bytes ff fe of a key are not shown as \\xff\\xfe"
assert "na\u00efve" in t, "valid UTF-8 of a key is not kept as it is"
EOF2
