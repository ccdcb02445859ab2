#!/usr/bin/env bash
# sql_format.sh — `orch sql --format table|tsv|csv|json` (docs/commands.md "orch sql"): the
# exact output of each format for values that each format must treat with care (NULL, a
# comma, a double quote, a newline, a tab, a backslash, non-ASCII and wide UTF-8, a blob,
# integers, reals); several statements; the default (table on a terminal, tsv through a
# pipe); --json as --format json; usage errors exit 2.
source "$(dirname "$0")/lib.sh"

printf '%s\n' a b > "$T/in.txt"
cat > "$T/tiny.orch" <<'EOF'
pipeline tiny
domain line
source line.text = lines("in.txt")
call up = upper()
line.up = up(line.text)
output line.up
EOF
J=$T/job
run_job "$T/tiny.orch" "$J"
job_done "$J"

# Two rows: the first holds the hard values, the second short ones, so that the widths of
# the table come from either row.
Q="SELECT NULL AS n, 'a,b' AS comma, 'say \"hi\"' AS quote, 'l1' || char(10) || 'l2' AS nl,
          'a' || char(9) || 'b\\' AS tab, 'héllo wörld' AS utf8, '日本' AS wide,
          x'00ff' AS b, 42 AS i, 2.5 AS r
   UNION ALL
   SELECT 'x', 'c', 'q', 'n', 't', 'ü', 'w', NULL, -7, 10.25"

# ---- tsv: the default through a pipe -----------------------------------------------------
tsv='n	comma	quote	nl	tab	utf8	wide	b	i	r
	a,b	say "hi"	l1\nl2	a\tb\\	héllo wörld	日本	'"x'00ff'"'	42	2.5
x	c	q	n	t	ü	w		-7	10.25'
expect_eq "tsv" "$tsv" "$("$ORCH" sql "$J" --format tsv "$Q")"
expect_eq "tsv is the default when stdout is not a terminal" "$tsv" "$("$ORCH" sql "$J" "$Q" | cat)"

# ---- csv: RFC 4180, CR LF line ends -------------------------------------------------------
# od shows the bytes: the CR LF ends, the quoted newline (a bare LF inside quotes) and tab.
"$ORCH" sql "$J" --format csv "$Q" > "$T/out.csv"
printf '%s\r\n' 'n,comma,quote,nl,tab,utf8,wide,b,i,r' \
  ',"a,b","say ""hi""","l1
l2",a	b\,héllo wörld,日本,'"x'00ff'"',42,2.5' \
  'x,c,q,n,t,ü,w,,-7,10.25' > "$T/want.csv"
cmp "$T/want.csv" "$T/out.csv" ||
  fail "csv: $(od -c "$T/out.csv" | head -20)"
# A reader of RFC 4180 gets the values back.
expect_eq "csv read back by python's csv module" \
  "['', 'a,b', 'say \"hi\"', 'l1\\nl2', 'a\\tb\\\\', 'héllo wörld', '日本', \"x'00ff'\", '42', '2.5']" \
  "$(python3 -c 'import csv, sys; r = list(csv.reader(open(sys.argv[1], newline=""))); print(r[1])' "$T/out.csv")"

# ---- json ---------------------------------------------------------------------------------
json='{"n": null, "comma": "a,b", "quote": "say \"hi\"", "nl": "l1\nl2", "tab": "a\tb\\", "utf8": "héllo wörld", "wide": "日本", "b": "'"x'00ff'"'", "i": 42, "r": 2.5}
{"n": "x", "comma": "c", "quote": "q", "nl": "n", "tab": "t", "utf8": "ü", "wide": "w", "b": null, "i": -7, "r": 10.25}'
expect_eq "json" "$json" "$("$ORCH" sql "$J" --format json "$Q")"
expect_eq "--json is --format json" "$json" "$("$ORCH" sql "$J" --json "$Q")"
expect_eq "--format=json" "$json" "$("$ORCH" sql "$J" --format=json "$Q")"

# ---- table: forced by the flag through a pipe ---------------------------------------------
# Columns two spaces apart, as wide as their widest cell in terminal columns (日本 takes 4,
# ü one); numbers right-aligned, and the header of a column of numbers; NULL empty; no
# space at the end of a line.
table='n  comma  quote     nl      tab     utf8         wide  b         i      r
-  -----  --------  ------  ------  -----------  ----  -------  --  -----
   a,b    say "hi"  l1\nl2  a\tb\\  héllo wörld  日本  '"x'00ff'"'  42    2.5
x  c      q         n       t       ü            w              -7  10.25'
expect_eq "table" "$table" "$("$ORCH" sql "$J" --format table "$Q")"
"$ORCH" sql "$J" --format table "$Q" | grep -q ' $' && fail "table: a line ends with a space"

# Several statements: result sets apart by an empty line, in every format with a header.
expect_eq "table: several statements" "a
-
1

bb  c
--  -
x   y" "$("$ORCH" sql "$J" --format table "SELECT 1 AS a; SELECT 'x' AS bb, 'y' AS c")"
printf 'a\r\n1\r\n\r\nb\r\n2\r\n' > "$T/want2.csv"
"$ORCH" sql "$J" --format csv "SELECT 1 AS a; SELECT 2 AS b" > "$T/out2.csv"
cmp "$T/want2.csv" "$T/out2.csv" || fail "csv, several statements: $(od -c "$T/out2.csv")"
# No rows: the header alone.
expect_eq "table: no rows" "key
---" "$("$ORCH" sql "$J" --format table "SELECT key FROM entity_key WHERE 0")"
# Control characters other than tab, CR and LF, and bytes that are not UTF-8, are written
# \xNN in a table (a row stays one line and cannot move the cursor); width counts them.
expect_eq "table: control characters and bytes that are not UTF-8" "c               d
--------------  -
a\\x1bb\\xffc\\rd  1" \
  "$("$ORCH" sql "$J" --format table "SELECT 'a' || char(27) || 'b' || CAST(x'ff' AS TEXT) || 'c' || char(13) || 'd' AS c, 1 AS d")"

# A real job's table: keys left, numbers right.
expect_eq "table of a job's rows" "key  depth  state
---  -----  -------
a        0  present
b        0  present" "$("$ORCH" sql "$J" --format table "SELECT k.key, k.depth, i.state FROM entity_key k
     JOIN item i ON i.entity_id = k.entity_id JOIN port p ON p.id = i.port_id
     WHERE p.qualified = 'line.up' ORDER BY k.key")"

# ---- the default on a terminal is table ---------------------------------------------------
# stdout is a pseudo-terminal (python's pty module); the terminal writes LF as CR LF.
got=$(python3 - "$ORCH" "$J" "SELECT 'x' AS k, 12 AS v" <<'PY'
import os, subprocess, sys
master, slave = os.openpty()
p = subprocess.Popen(sys.argv[1:2] + ["sql"] + sys.argv[2:], stdout=slave, stderr=slave)
os.close(slave)
out = b""
while True:
    try:
        chunk = os.read(master, 4096)
    except OSError:  # EIO: the terminal's other end is closed
        break
    if not chunk:
        break
    out += chunk
p.wait()
sys.stdout.write(out.decode().replace("\r\n", "\n"))
sys.exit(p.returncode)
PY
)
expect_eq "table is the default on a terminal" "k   v
-  --
x  12" "$got"

# ---- usage errors -------------------------------------------------------------------------
rc=0
"$ORCH" sql "$J" --format xml "SELECT 1" > "$T/out" 2> "$T/err" || rc=$?
expect_eq "unknown format exits 2" 2 "$rc"
grep -q "unknown format 'xml'" "$T/err" || fail "unknown format: $(cat "$T/err")"
[ ! -s "$T/out" ] || fail "unknown format printed: $(cat "$T/out")"
rc=0
"$ORCH" sql "$J" "SELECT 1" --format > /dev/null 2> "$T/err" || rc=$?
expect_eq "--format without a value exits 2" 2 "$rc"
"$ORCH" help sql | grep -q -- "--format (default: table when standard output is a terminal" ||
  fail "help sql does not document --format"
echo "sql-format: ok"
