#!/usr/bin/env bash
# check_examples.sh — `orch check` on every example (exit 0, the plan and its hash), on bad
# pipelines (exit 1, FILE:LINE:COL: error: MESSAGE on stderr), and bad usage (exit 2).
# Needs ORCH (the binary) and SRCDIR (the source root).
set -euo pipefail

: "${ORCH:?set ORCH to the orch binary}"
: "${SRCDIR:?set SRCDIR to the source root}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# expect STATUS CMD...: runs CMD, which must exit with STATUS; output in $tmp/out, $tmp/err.
expect() {
    local want=$1 got=0
    shift
    "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
    if [ "$got" -ne "$want" ]; then
        cat "$tmp/out" "$tmp/err" >&2
        fail "'$*' exited $got, not $want"
    fi
}

# -- every example compiles, prints its plan and hash, and its canonical text is stable --
n=0
for f in "$SRCDIR"/examples/*.orch; do
    expect 0 "$ORCH" check "$f"
    [ ! -s "$tmp/err" ] || { cat "$tmp/err" >&2; fail "$f: unexpected diagnostics"; }
    name=$(sed -n 's/^pipeline \([A-Za-z_0-9]*\).*/\1/p' "$f" | head -n 1)
    grep -q "^pipeline $name\$" "$tmp/out" || fail "$f: no pipeline line"
    grep -Eq '^hash [0-9a-f]{64}$' "$tmp/out" || fail "$f: no plan hash"
    grep -q '^domains:$' "$tmp/out" || fail "$f: no domain tree"
    grep -q '^calls:$' "$tmp/out" || fail "$f: no calls"
    grep -q '^ports:$' "$tmp/out" || fail "$f: no ports"
    grep -q 'reserve=' "$tmp/out" || fail "$f: no options"
    hash=$(sed -n 's/^hash //p' "$tmp/out")

    # The canonical text, checked again from another directory, is the same plan.
    expect 0 "$ORCH" check --canonical "$f"
    cp "$tmp/out" "$tmp/canonical.orch"
    (cd / && "$ORCH" check --canonical "$tmp/canonical.orch") >"$tmp/again" ||
        fail "$f: canonical text does not compile"
    cmp -s "$tmp/canonical.orch" "$tmp/again" || fail "$f: canonical text is not stable"
    expect 0 "$ORCH" check "$tmp/canonical.orch"
    grep -q "^hash $hash\$" "$tmp/out" || fail "$f: canonical text has another hash"
    n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "only $n examples"

# Several files at once, and --quiet.
expect 0 "$ORCH" check "$SRCDIR"/examples/*.orch
[ "$(grep -c '^== ' "$tmp/out")" -eq "$n" ] || fail "check of several files: headers"
expect 0 "$ORCH" check -q "$SRCDIR/examples/pdf_ocr.orch"
[ ! -s "$tmp/out" ] || fail "--quiet printed the plan"

# -- bad pipelines: exit 1, every error as FILE:LINE:COL: error: MESSAGE --
cat >"$tmp/bad.orch" <<'ORCH'
pipeline bad
domain doc
source doc.path = files("*.txt")
call up = upper() with workers=0
doc.a = up(doc.path)
doc.b = up(doc.a)
doc.c = nope(doc.path
ORCH
expect 1 "$ORCH" check "$tmp/bad.orch"
[ ! -s "$tmp/out" ] || fail "a bad pipeline printed a plan"
cat >"$tmp/want" <<EOF2
$tmp/bad.orch:4:32: error: option 'workers' must be an integer from 1 to 1024, not '0'
$tmp/bad.orch:6:9: error: call 'up' is already used at 5:9; declare another call
$tmp/bad.orch:7:22: error: expected ',' or ')', found end of line
EOF2
diff -u "$tmp/want" "$tmp/err" || fail "bad.orch: diagnostics"
grep -Evq '^[^:]+:[0-9]+:[0-9]+: (error|warning): ' "$tmp/err" && fail "bad format" || true

printf 'pipeline p\ndomain a\n\xff\n' >"$tmp/binary.orch"
expect 1 "$ORCH" check "$tmp/binary.orch"
grep -q "^$tmp/binary.orch:3:1: error: invalid byte 0xff (not UTF-8)\$" "$tmp/err" ||
    fail "binary.orch: $(cat "$tmp/err")"

: >"$tmp/empty.orch"
expect 1 "$ORCH" check "$tmp/empty.orch"
grep -q "^$tmp/empty.orch:1:1: error: " "$tmp/err" || fail "empty.orch: $(cat "$tmp/err")"

# One good file and one bad: exit 1, the good plan still printed.
expect 1 "$ORCH" check "$SRCDIR/examples/text_lines.orch" "$tmp/bad.orch"
grep -q '^pipeline text_lines$' "$tmp/out" || fail "the good plan was not printed"

expect 1 "$ORCH" check "$tmp/missing.orch"
grep -q "^$tmp/missing.orch: error: cannot read: " "$tmp/err" || fail "missing file message"

# -- usage: exit 2 --
expect 2 "$ORCH"
expect 2 "$ORCH" frobnicate
grep -q "unknown command 'frobnicate'" "$tmp/err" || fail "unknown command message"
expect 2 "$ORCH" check
expect 2 "$ORCH" check --bogus "$SRCDIR/examples/pdf_ocr.orch"
expect 2 "$ORCH" help frobnicate

# -- help and version: exit 0 --
expect 0 "$ORCH" --help
for word in check 'exit status' '0  success' '1  ' '2  usage'; do
    grep -q -- "$word" "$tmp/out" || fail "--help does not mention '$word'"
done
expect 0 "$ORCH" help
expect 0 "$ORCH" help check
grep -q 'usage: orch check' "$tmp/out" || fail "help check"
expect 0 "$ORCH" check --help
expect 0 "$ORCH" --version
grep -Eq '^orch [0-9]+\.[0-9]+' "$tmp/out" || fail "--version"

echo "check-examples: ok ($n examples)"
