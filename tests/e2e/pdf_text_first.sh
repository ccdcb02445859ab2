#!/usr/bin/env bash
# pdf_text_first.sh — examples/pdf_text_first.orch on the example corpus: the pages with a
# text layer take it (pdf_text), only the scanned pages are OCRed (blank + tesseract_ocr),
# `first` takes whichever of the two exists, in page order; the broken PDF fails alone.
# Also blank() on white space and first() when no input is present.
source "$(dirname "$0")/lib.sh"

J=$T/job
"$ORCH" run "$SRCDIR/examples/pdf_text_first.orch" --job "$J" --progress none 2> "$T/log" ||
  { cat "$T/log" >&2; fail "orch run exited $?"; }
job_done "$J"
# per call: ok dropped failed suppressed
expect_eq "progress" "render|4|0|1|0
layer|4|0|0|1
typed|6|2|0|0
scan|2|6|0|0
ocr|2|6|0|0
pick|8|0|0|0
assemble|4|0|0|1" "$(q "$J" "SELECT call, ok, dropped, failed, suppressed FROM progress")"
# Tesseract ran on exactly the two pages of scanned.pdf, nothing else.
expect_eq "ocr attempts" "2" "$(q "$J" "SELECT count(*) FROM attempt a JOIN grain g
  ON g.id = a.grain_id JOIN call c ON c.id = g.call_id WHERE c.name = 'ocr'")"
expect_eq "failure" "render|record" "$(q "$J" "SELECT call, kind FROM failures")"

# The words each PDF of the corpus holds (scripts/make-pdfs: words_of; scanned.pdf is the
# scan of document 4), against the export, in page order.
"$ORCH" export "$J" pdf.text > "$T/out.jsonl"
python3 - "$SRCDIR/scripts/make-pdfs" "$T/out.jsonl" <<'PY' || fail "exported text"
import importlib.machinery, json, sys, types
loader = importlib.machinery.SourceFileLoader("make_pdfs", sys.argv[1])
mp = types.ModuleType(loader.name); loader.exec_module(mp)
rows = {json.loads(l)["key"].rsplit("/", 1)[-1]: json.loads(l) for l in open(sys.argv[2])}
want = {"doc00.pdf": 0, "doc01.pdf": 1, "doc02.pdf": 2, "scanned.pdf": 4}
assert sorted(rows) == sorted(want), sorted(rows)
for name, doc in want.items():
    pages = rows[name]["value"].split("\f")
    assert len(pages) == 2, (name, len(pages))
    for p, text in enumerate(pages):
        words = text.split()
        assert words == mp.words_of(doc, p), (name, p, words, mp.words_of(doc, p))
PY

# blank(): white space is blank, an absent input is blank; first(): Dropped when no input
# is present.
printf '%s\n' "a" "  " "b" > "$T/in.txt"
cat > "$T/pick.orch" <<'PIPE'
pipeline pick
domain l
source l.v = lines("in.txt")
call b  = blank()
call f  = first()
call f1 = first()
l.blank = filter b(l.v)
l.pick  = f(?l.blank, ?l.v)
l.none  = f1(?l.blank)
PIPE
"$ORCH" run "$T/pick.orch" --job "$T/pick" --progress none 2> "$T/log" ||
  { cat "$T/log" >&2; fail "pick: orch run exited $?"; }
expect_eq "blank" "a|dropped|
  |present|  
b|dropped|" "$(states "$T/pick" l.blank)"
expect_eq "first" "a|present|a
  |present|  
b|present|b" "$(states "$T/pick" l.pick)"
expect_eq "first of none" "a|dropped|
  |present|  
b|dropped|" "$(states "$T/pick" l.none)"
echo "pdf_text_first: ok"
