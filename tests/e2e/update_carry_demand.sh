#!/usr/bin/env bash
# orch update DIR PIPELINE (DESIGN §10, docs/incremental.md): a grain whose call computes
# what it did is carried, its bytes reclaimed or not, when no grain that may run reads
# them; only what a running grain reads is computed again (usage: update_carry_demand.sh
# MKPDF).
#   reduce    a reduce added over line.up, an `output`: it alone runs; doc.text and
#             line.raw, reclaimed, are read by nothing that runs, so rd and cut are
#             carried; their exports still say "reclaimed", as a fresh run's;
#   needed    an edit of a call that reads line.raw: cut runs (its bytes were reclaimed)
#             and so rd (cut reads doc.text), up and n are carried;
#   output    `output line.raw` added: a fresh run keeps its bytes, so cut runs again;
#   broadcast a new call reads an ancestor's reclaimed port through a broadcast: its
#             producer runs again, the steps beside it are carried;
#   aligned   an aligned expansion, a filter and an optional input carried without their
#             bytes, and the aligned expansion made again when a changed reduce reads it;
#   failed    a grain whose twin failed runs again although its call is the same: it reads
#             its input, whose producer was carried, and finds its bytes (a failed
#             reader keeps them);
#   no twin   an expansion whose twin failed runs again and makes children without twins,
#             which read their parent's port, carried without regard to its bytes,
#             through a broadcast: a job with a failed grain kept them;
#   ocr       the assembling reduce of the OCR pipeline changed, page.text an `output`:
#             no tesseract_ocr and no pdf_render attempt.
# Each time every export equals a fresh run's, byte for byte.
source "$(dirname "$0")/lib.sh"

MKPDF=${1:?usage: update_carry_demand.sh MKPDF}

mkdir -p "$T/docs"
printf 'a one\na two\n' > "$T/docs/a.txt"
printf 'b one\nb two\nb three\n' > "$T/docs/b.txt"
printf 'c one\n' > "$T/docs/c.txt"
cat > "$T/p.orch" <<'PIPE'
pipeline p
domain doc
domain line in doc
source doc.path = files("docs/*.txt")
call rd  = read_file()
call cut = split_lines()
call up  = upper()
doc.text = rd(doc.path)
line.raw = expand cut(doc.text)
line.up  = up(line.raw)
output line.up
PIPE
J=$T/job
run_job "$T/p.orch" "$J"
# update JOB PIPELINE WHAT: the edited update, which must succeed.
update() {
  "$ORCH" update "$1" "$2" --progress none 2> "$T/log" || fail "$3: $(cat "$T/log")"
  job_done "$1"
}
expect_eq "the first run reclaimed doc.path, doc.text and line.raw" "doc.path 3
doc.text 3
line.raw 6" "$(q "$J" "SELECT p.qualified, count(*) FROM item AS i JOIN port AS p ON p.id = i.port_id
                     JOIN reclaimed AS r ON r.payload_id = i.payload_id GROUP BY p.id ORDER BY p.id" |
               tr '|' ' ')"

# ---- a reduce added over an output: it alone runs -------------------------------------------
n=$(last_attempt "$J")
cp "$T/p.orch" "$T/reduce.orch"
printf 'call n = count()\ndoc.n = reduce n(line.up)\noutput doc.n\n' >> "$T/reduce.orch"
update "$J" "$T/reduce.orch" reduce
expect_eq "reduce: the new reduce alone ran" "rd=0 cut=0 up=0 n=3" "$(attempts_since "$J" "$n")"
grep -q "12 grains took their result from the previous plan's revision" "$T/log" || fail "$(cat "$T/log")"
summary_ok "$J" "$T/log"
same_as_fresh "$J" "$T/reduce.orch"
expect_eq "reduce: doc.text exports as reclaimed" '{"key": "docs/a.txt", "state": "present", "reclaimed": true}' \
  "$("$ORCH" export "$J" doc.text | head -1)"

# ---- an edit of a call that reads reclaimed bytes: they are computed again ------------------
n=$(last_attempt "$J")
sed -e 's/^call up  = upper()$/call up  = identity()/' "$T/reduce.orch" > "$T/needed.orch"
update "$J" "$T/needed.orch" needed
expect_eq "needed: up reads line.raw: cut runs, and rd, whose doc.text cut reads" \
  "rd=3 cut=3 up=6 n=3" "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/needed.orch"

# ---- a port made an output: a fresh run keeps its bytes -------------------------------------
n=$(last_attempt "$J")
cp "$T/needed.orch" "$T/raw.orch"
printf 'output line.raw\n' >> "$T/raw.orch"
update "$J" "$T/raw.orch" output
expect_eq "output: line.raw's bytes are made again" "rd=3 cut=3 up=0 n=0" "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/raw.orch"
# Once kept, they are carried like any output's.
n=$(last_attempt "$J")
sed -e 's/^call n = count()$/call n = concat(sep=",")/' "$T/raw.orch" > "$T/raw2.orch"
update "$J" "$T/raw2.orch" "output, then an edit"
expect_eq "output kept: only the edited reduce runs" "rd=0 cut=0 up=0 n=3" "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/raw2.orch"

# ---- a broadcast read by a new call: its ancestor's port is made again, nothing else --------
J=$T/b/job
mkdir -p "$T/b"
cp -r "$T/docs" "$T/b/docs"
cp "$T/p.orch" "$T/b/p.orch"
printf 'line.doc = broadcast doc.text
' >> "$T/b/p.orch"
run_job "$T/b/p.orch" "$J"
n=$(last_attempt "$J")
cp "$T/b/p.orch" "$T/b/p2.orch"
printf 'call echo = identity()
line.echo = echo(line.doc)
output line.echo
' >> "$T/b/p2.orch"
update "$J" "$T/b/p2.orch" broadcast
expect_eq "broadcast: doc.text made again for echo; cut and up carried" "rd=3 cut=0 up=0 echo=6" \
  "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/b/p2.orch"

# ---- an aligned expansion, a filter and an optional input: carried without their bytes -----
J=$T/a/job
mkdir -p "$T/a"
cp -r "$T/docs" "$T/a/docs"
cat > "$T/a/p.orch" <<'PIPE'
pipeline aligned
domain doc
domain line in doc
source doc.path = files("docs/*.txt")
call read     = read_file()
call shout    = upper()
call cut      = split_lines()
call cut_loud = split(sep="\n")
call keep     = nonempty()
call echo     = identity()
call join     = concat(sep=" | ")
doc.text   = read(doc.path)
doc.loud   = shout(doc.text)
line.text  = expand cut(doc.text)
line.loud  = expand aligned cut_loud(doc.loud)
line.kept  = filter keep(line.text)
line.echo  = echo(?line.kept)
doc.joined = reduce join(line.loud)
output doc.joined
output line.echo
PIPE
run_job "$T/a/p.orch" "$J"
n=$(last_attempt "$J")
cp "$T/a/p.orch" "$T/a/p2.orch"
printf 'call n = count()\ndoc.n = reduce n(line.echo)\noutput doc.n\n' >> "$T/a/p2.orch"
update "$J" "$T/a/p2.orch" aligned
expect_eq "aligned: the new reduce alone ran" \
  "read=0 shout=0 cut=0 cut_loud=0 keep=0 echo=0 join=0 n=3" "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/a/p2.orch"
# The joined lines read line.loud, reclaimed: the aligned expansion runs again, and what
# it reads; the plain one and the filter do not.
n=$(last_attempt "$J")
sed -e 's/^call join     = concat(sep=" | ")$/call join     = concat(sep="+")/' "$T/a/p2.orch" > "$T/a/p3.orch"
update "$J" "$T/a/p3.orch" "aligned, needed"
expect_eq "aligned, needed: line.loud made again" \
  "read=3 shout=3 cut=0 cut_loud=3 keep=0 echo=0 join=3 n=0" "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/a/p3.orch"

# ---- a twin that failed: its grain runs, and finds its input's bytes ------------------------
mkdir -p "$T/f/docs"
printf 'good line\n' > "$T/f/docs/a.txt"
printf 'a BAD line\n' > "$T/f/docs/b.txt"
cat > "$T/f/p.orch" <<'PIPE'
pipeline f
domain doc
source doc.path = files("docs/*.txt")
call rd    = read_file()
call up    = upper()
call check = fail_if(contains="BAD")   with retries=0
call tail  = identity()
doc.text = rd(doc.path)
doc.up   = up(doc.text)
doc.ok   = check(doc.up)
doc.tail = tail(doc.text)
output doc.ok
output doc.tail
PIPE
J=$T/f/job
run_job "$T/f/p.orch" "$J"
expect_eq "failed: b's check failed, a's doc.up reclaimed, b's kept" "docs/a.txt 1
docs/b.txt 0" "$(q "$J" "SELECT k.key, r.payload_id IS NOT NULL FROM item AS i
                       JOIN port AS p ON p.id = i.port_id JOIN entity_key AS k ON k.entity_id = i.entity_id
                       LEFT JOIN reclaimed AS r ON r.payload_id = i.payload_id
                       WHERE p.qualified = 'doc.up' ORDER BY k.key" | tr '|' ' ')"
n=$(last_attempt "$J")
sed -e 's/^call tail  = identity()$/call tail  = upper()/' "$T/f/p.orch" > "$T/f/p2.orch"
"$ORCH" update "$J" "$T/f/p2.orch" --progress none 2> "$T/log" || fail "failed: $(cat "$T/log")"
# tail reads doc.text: rd runs; up is read by nothing that runs but b's check, whose twin
# failed and kept b's doc.up: carried; check runs again on b alone.
expect_eq "failed: the failed grain ran again, the rest as needed" "rd=2 up=0 check=1 tail=2" \
  "$(attempts_since "$J" "$n")"
job_done "$J"
same_as_fresh "$J" "$T/f/p2.orch"

# ---- an expansion whose twin failed: its new children, without twins, read a broadcast -----
# cut fails for b.txt while the file "broken" exists. The first run has that failure, so
# doc.up, read through a broadcast, is kept (reclaim.c keeps broadcast families of a job
# with a failed grain); the edit (a reduce over the output) carries up without regard to
# its bytes; b's cut runs again, now without failing, and its new lines read b's doc.up.
mkdir -p "$T/d/docs"
printf 'a1\na2\n' > "$T/d/docs/a.txt"
printf 'b1\nb2\nb3\n' > "$T/d/docs/b.txt"
cat > "$T/d/cut_udf.py" <<PY
import os, sys
sys.path.insert(0, "$SRCDIR/udfs/python")
import orch_udf
class Cut:
    def __init__(self, args):
        pass
    def run(self, batch):
        if os.path.exists("$T/d/broken"):
            return [orch_udf.RecordFailure("broken") if r.value.startswith(b"b") else
                    r.value.split(b"\n")[:-1] for r in batch]
        return [r.value.split(b"\n")[:-1] for r in batch]
sys.exit(orch_udf.serve(Cut))
PY
cat > "$T/d/p.orch" <<PIPE
pipeline d
domain doc
domain line in doc
source doc.path = files("docs/*.txt")
call rd  = read_file()
call up  = upper()
call cut = exec("python3 $T/d/cut_udf.py")
call see = identity()
doc.text = rd(doc.path)
doc.up   = up(doc.text)
line.raw = expand cut(doc.text)
line.ctx = broadcast doc.up
line.see = see(line.ctx)
output line.see
PIPE
J=$T/d/job
: > "$T/d/broken"
run_job "$T/d/p.orch" "$J"
expect_eq "no twin: b's cut failed, b has no lines" "docs/b.txt 2" \
  "$(q "$J" "SELECT key, (SELECT count(*) FROM entity WHERE parent_id IS NOT NULL) FROM failures WHERE call = 'cut'" | tr '|' ' ')"
rm "$T/d/broken"
n=$(last_attempt "$J")
cp "$T/d/p.orch" "$T/d/p2.orch"
printf 'call n = count()\ndoc.n = reduce n(line.see)\noutput doc.n\n' >> "$T/d/p2.orch"
update "$J" "$T/d/p2.orch" "no twin"
expect_eq "no twin: b's cut ran again, and what its new lines read" "rd=0 up=0 cut=1 see=3 n=2" \
  "$(attempts_since "$J" "$n")"
# The outputs equal a fresh run's (the ports of doc.up's broadcast family stay kept: the
# job has a failed grain in its history, which a fresh run has not).
rm -rf "$T/fresh"
run_job "$T/d/p2.orch" "$T/fresh"
for port in line.see doc.n; do
  expect_eq "no twin: $port as a fresh run's" "$("$ORCH" export "$T/fresh" "$port" --all)" \
    "$("$ORCH" export "$J" "$port" --all)"
done

# ---- the OCR pipeline: the assembling reduce changed, page.text an output -------------------
mkdir -p "$T/o/pdfs"
"$MKPDF" "$T/o/pdfs" > /dev/null || fail "mkpdf failed"
mkdir -p "$T/o/p"
cp "$T/o/pdfs/good.pdf" "$T/o/p/good.pdf"
cat > "$T/o/p.orch" <<'PIPE'
pipeline pdf_ocr
domain pdf
domain page in pdf
source pdf.path = files("p/*.pdf")
call render   = pdf_render(dpi=150)
call ocr      = tesseract_ocr()          with workers=2, batch=1
call keep     = nonempty()
call assemble = concat(sep="\f")
page.image = expand render(pdf.path)
page.text  = ocr(page.image)
page.good  = filter keep(page.text)
page.doc   = broadcast pdf.path
pdf.text   = reduce assemble(page.good)
output pdf.text
output page.text
PIPE
J=$T/o/job
run_job "$T/o/p.orch" "$J"
expect_eq "ocr: page.image reclaimed" 3 \
  "$(q "$J" "SELECT count(*) FROM item AS i JOIN port AS p ON p.id = i.port_id
             JOIN reclaimed AS r ON r.payload_id = i.payload_id WHERE p.qualified = 'page.image'")"
n=$(last_attempt "$J")
sed -e 's/^call assemble = concat(sep="\\f")$/call assemble = concat(sep="\\n----\\n")/' \
  "$T/o/p.orch" > "$T/o/p2.orch"
grep -q 'sep="\\n----\\n"' "$T/o/p2.orch" || fail "ocr: the sed did not apply"
update "$J" "$T/o/p2.orch" ocr
expect_eq "ocr: only the assembling reduce ran" "render=0 ocr=0 keep=0 assemble=1" "$(attempts_since "$J" "$n")"
same_as_fresh "$J" "$T/o/p2.orch"
echo "update_carry_demand: ok"
