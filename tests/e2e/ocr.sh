#!/usr/bin/env bash
# ocr.sh — tesseract_ocr through a real `orch run` with real workers and Debian's eng model
# (usage: ocr.sh MKPAGE MKPDF; tests/mkpage.c draws page images from the text it is given,
# tests/mkpdf.c writes the PDFs of pdf.sh):
#   images   a PNG and a PGM of known lines are read back, line by line, in order; an
#            empty file, a text file, a truncated PNG and a PGM larger than Tesseract can
#            take are each a RecordFailure of their own page in the job's `failures` view
#            with its message, downstream suppressed, the good pages untouched;
#   pdf      the 3-page good.pdf of mkpdf, through pdf_render then tesseract_ocr: 3 page
#            texts, each holding its page's words, in page order, and the concat of them;
#   no model lang="xxx": `orch run` exits 1 promptly saying the call's workers cannot start
#            and which model file is missing;
#   psm      out of 0..13: refused by `orch check`, with the range.
source "$(dirname "$0")/lib.sh"

MKPAGE=${1:?usage: ocr.sh MKPAGE MKPDF}
MKPDF=${2:?usage: ocr.sh MKPAGE MKPDF}

# ---- images ------------------------------------------------------------------------------
P=$T/pages
mkdir "$P"
"$MKPAGE" png "$P/a.png" "Alpha bravo charlie" "delta echo foxtrot" || fail "mkpage a"
"$MKPAGE" pgm "$P/b.pgm" "Persistent workers load" "the model once" || fail "mkpage b"
: > "$P/c-empty.pgm"
echo "this is text, not an image" > "$P/d-text.png"
head -c 1000 "$P/a.png" > "$P/e-truncated.png"
printf 'P5\n40000 100\n255\n' > "$P/f-wide.pgm"

cat > "$T/images.orch" <<'EOF'
pipeline images
domain page
source page.path = files("pages/*")
call read  = read_file()
call ocr   = tesseract_ocr(lang="eng", psm=3)  with workers=2, batch=2
call upper = upper()
page.image = read(page.path)
page.text  = ocr(page.image)
page.up    = upper(page.text)
output page.text
EOF
J=$T/job
run_job "$T/images.orch" "$J"
job_done "$J"

# text NAME: the OCR text of page NAME, as exported.
text() {
  "$ORCH" export "$J" page.text | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if o["key"].endswith("/" + sys.argv[1]): sys.stdout.write(o["value"])' "$1"
}
# has_lines NAME LINE...: the text of page NAME holds every LINE, in that order.
has_lines() {
  local name=$1
  shift
  text "$name" | python3 -c '
import sys
t, at = sys.stdin.read(), 0
for line in sys.argv[1:]:
    k = t.find(line, at)
    if k < 0: sys.exit("%r lacks %r (in order)" % (t, line))
    at = k + len(line)' "$@" || fail "page $name"
}
has_lines a.png "Alpha bravo charlie" "delta echo foxtrot"
has_lines b.pgm "Persistent workers load" "the model once"

# msg NAME: kind: message of the failure row(s) of the ocr call on page NAME.
msg() {
  q "$J" "SELECT kind || ': ' || message FROM failures WHERE call = 'ocr' AND key = 'pages/$1'"
}
expect_eq "empty" "record: tesseract_ocr: the image is empty (0 bytes)" "$(msg c-empty.pgm)"
expect_eq "not an image" "record: tesseract_ocr: not an image leptonica can read (27 bytes): Error in pixReadHeaderMem: unknown format; no data returned" \
  "$(msg d-text.png)"
m=$(msg e-truncated.png)
case $m in
  "record: tesseract_ocr: cannot read the "*"x"*" png image: Error in pixReadMemPng: "?*) ;;
  *) fail "truncated: $m" ;;
esac
expect_eq "too wide" "record: tesseract_ocr: the image is 40000x100 pixels; at most 32767x32767 and 256 Mpixels can be recognized" \
  "$(msg f-wide.pgm)"
expect_eq "one failure row per bad page, none for the good ones" \
  "pages/c-empty.pgm|record
pages/d-text.png|record
pages/e-truncated.png|record
pages/f-wide.pgm|record" "$(q "$J" "SELECT key, kind FROM failures ORDER BY key")"
# state_of PORT NAME: the state of page NAME's item of PORT.
state_of() {
  "$ORCH" export "$J" "$1" --all | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if o["key"].endswith("/" + sys.argv[1]): print(o["state"])' "$2"
}
for f in c-empty.pgm d-text.png e-truncated.png f-wide.pgm; do
  expect_eq "$f: its text failed, downstream suppressed" "failed,suppressed" \
    "$(state_of page.text $f),$(state_of page.up $f)"
done
for f in a.png b.pgm; do
  expect_eq "$f: its text and downstream present" "present,present" \
    "$(state_of page.text $f),$(state_of page.up $f)"
done
expect_eq "one attempt per page (a bad image is not retried)" 6 \
  "$(q "$J" "SELECT count(*) FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
             JOIN call AS c ON c.id = g.call_id WHERE c.name = 'ocr'")"

# ---- a generated PDF: rendered by pdf_render, then OCRed ---------------------------------
mkdir "$T/pdfs"
"$MKPDF" "$T/pdfs" > /dev/null || fail "mkpdf failed"
mkdir "$T/p"
cp "$T/pdfs/good.pdf" "$T/p/good.pdf"
cat > "$T/pdf.orch" <<'EOF'
pipeline pdf_ocr
domain pdf
domain page in pdf
source pdf.path = files("p/*.pdf")
call render   = pdf_render(dpi=150)
call ocr      = tesseract_ocr()          with workers=2, batch=1
call n        = count()
call assemble = concat(sep="\f")
page.image = expand render(pdf.path)
page.text  = ocr(page.image)
pdf.pages  = reduce n(page.text)
pdf.text   = reduce assemble(page.text)
output pdf.text
output pdf.pages
output page.text
EOF
JP=$T/pjob
run_job "$T/pdf.orch" "$JP"
job_done "$JP"
expect_eq "3 pages OCRed" "p/good.pdf|present|3" "$(states "$JP" pdf.pages)"
expect_eq "no failures" 0 "$(q "$JP" "SELECT count(*) FROM failures")"
# The document's text: three pages, separated by \f, each with its own words, in order.
"$ORCH" export "$JP" pdf.text | python3 -c '
import json, sys
pages = json.loads(sys.stdin.readline())["value"].split("\f")
want = [["Alpha bravo charlie", "delta echo"], ["Foxtrot golf"], ["Hotel india juliet"]]
assert len(pages) == 3, "%d pages: %r" % (len(pages), pages)
for k, (page, words) in enumerate(zip(pages, want)):
    for w in words:
        assert w in page, "page %d: %r lacks %r" % (k, page, w)
' || fail "the OCR text of good.pdf"

# ---- no model for the language: the workers cannot start --------------------------------
sed 's/tesseract_ocr(lang="eng", psm=3)/tesseract_ocr(lang="xxx")/' "$T/images.orch" > "$T/nomodel.orch"
got=0
timeout 60 "$ORCH" run "$T/nomodel.orch" --job "$T/nomodel" --progress none 2> "$T/err" || got=$?
[ "$got" != 124 ] || fail "orch run with lang=xxx hung (killed after 60 s)"
[ "$got" = 1 ] || { cat "$T/err" >&2; fail "orch run with lang=xxx exited $got, not 1"; }
grep -q "call ocr cannot start its workers: tesseract_ocr: no model for language 'xxx': .*/xxx.traineddata: No such file or directory" "$T/err" ||
  fail "no clear message: $(cat "$T/err")"
expect_eq "no OCR attempt ran" 0 "$(q "$T/nomodel" "SELECT count(*) FROM attempt AS a JOIN grain AS g
  ON g.id = a.grain_id JOIN call AS c ON c.id = g.call_id WHERE c.name = 'ocr'")"

# ---- psm out of range: refused before anything runs --------------------------------------
for bad in 14 99; do
  sed "s/psm=3/psm=$bad/" "$T/images.orch" > "$T/psm.orch"
  got=0
  "$ORCH" check "$T/psm.orch" > /dev/null 2> "$T/err" || got=$?
  [ "$got" != 0 ] || fail "orch check accepted psm=$bad"
  grep -q "argument 'psm' of 'tesseract_ocr' must be from 0 to 13, not '$bad'" "$T/err" ||
    fail "psm=$bad: no clear message: $(cat "$T/err")"
done
"$ORCH" check "$T/images.orch" > /dev/null 2> "$T/err" || fail "orch check refused psm=3: $(cat "$T/err")"
