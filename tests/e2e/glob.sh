#!/usr/bin/env bash
# glob.sh — the glob dialect of files(), as docs/language.md "Globs" documents it: POSIX
# glob(3) patterns (`*`, `?`, `[abc]`, `[!a]`, `[a-c]`, `\` to quote), matched one path
# component at a time; `**` is `*` (no recursion); `*`, `?` and brackets never match a
# leading `.` (hidden names), `.*` does (`.` and `..` included); no braces, no `~`; every
# kind of entry matches (directories too); case matters; the roots are sorted by path, byte
# by byte (not by locale); a pattern without wildcards gives its file if it exists, else
# nothing.
source "$(dirname "$0")/lib.sh"

D=$T/d
mkdir -p "$D/sub" "$D/.hid"
for f in b.txt a.txt B.txt .h.txt sub/c.txt .hid/x.txt '{a,b}.txt' '[x].txt' _z.txt 'é.txt'; do
  : > "$D/$f"
done

# roots PATTERN: the root keys that files("PATTERN") gives, in order, relative to $T
# (the pattern is written into the pipeline as a string: `\` doubled). Each call has a
# pipeline and a job of its own (it runs in a subshell: no counter would survive it).
roots() {
  local lit=${1//\\/\\\\} j
  j=$(mktemp -u "$T/j.XXXXXX")
  cat > "$j.orch" <<PIPE
pipeline g
domain f
source f.p = files("$lit")
call i = identity()
f.q = i(f.p)
PIPE
  run_job "$j.orch" "$j"
  q "$j" "SELECT replace(key, '$T/', '') FROM entity WHERE parent_id IS NULL
              ORDER BY ordinal" | tr '\n' ' ' | sed 's/ $//'
}

expect_eq "* skips hidden names; matches directories; sorted byte by byte" \
  "d/B.txt d/[x].txt d/_z.txt d/a.txt d/b.txt d/sub d/{a,b}.txt d/é.txt" "$(roots 'd/*')"
expect_eq "** is *: no recursion" "$(roots 'd/*')" "$(roots 'd/**')"
expect_eq "wildcards in a directory part, one level each" "d/sub/c.txt" "$(roots 'd/*/*.txt')"
expect_eq "**/ is */" "d/sub/c.txt" "$(roots 'd/**/*.txt')"
expect_eq ".* matches hidden names, . and .. too" "d/. d/.. d/.h.txt d/.hid" "$(roots 'd/.*')"
expect_eq ".[!.]* matches hidden names only" "d/.h.txt d/.hid" "$(roots 'd/.[!.]*')"
expect_eq "? is one byte" "d/B.txt d/a.txt d/b.txt" "$(roots 'd/?.txt')"
expect_eq "brackets: a set" "d/a.txt d/b.txt" "$(roots 'd/[ab].txt')"
expect_eq "brackets: a range" "d/a.txt d/b.txt" "$(roots 'd/[a-c].txt')"
expect_eq "brackets: a complement, never a leading dot" \
  "d/B.txt d/[x].txt d/_z.txt d/b.txt d/{a,b}.txt d/é.txt" "$(roots 'd/[!a]*.txt')"
expect_eq "no braces: {a,b} is literal" "d/{a,b}.txt" "$(roots 'd/{a,b}.txt')"
expect_eq "backslash quotes a wildcard" "d/[x].txt" "$(roots 'd/\[x].txt')"
expect_eq "case matters" "" "$(roots 'd/*.TXT')"
expect_eq "no wildcard: the file" "d/a.txt" "$(roots 'd/a.txt')"
expect_eq "no wildcard, no file: no roots" "" "$(roots 'd/nope.txt')"
# ~ is no home directory: a relative path like any other, whose directory does not exist.
printf 'pipeline g\ndomain f\nsource f.p = files("~/x*")\ncall i = identity()\nf.q = i(f.p)\n' \
  > "$T/tilde.orch"
"$ORCH" run "$T/tilde.orch" --job "$T/tilde" --progress none 2> "$T/tilde.log" &&
  fail "files(\"~/x*\") was taken as the home directory"
grep -qF "files(\"$T/~/x*\"): the directory $T/~ does not exist" "$T/tilde.log" ||
  fail "files(\"~/x*\"): $(cat "$T/tilde.log")"
echo "glob: ok"
