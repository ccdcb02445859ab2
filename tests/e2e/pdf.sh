#!/usr/bin/env bash
# pdf.sh — the MuPDF built-ins through a real `orch run`, on PDFs that tests/mkpdf.c makes
# here from text it holds (usage: pdf.sh MKPDF):
#   good       3 pages: page.image is 3 valid 8-bit grayscale PNGs of the size the dpi
#              gives (1275x1650, 1275x1650, 625x834 at 150 dpi), with a pHYs of 150 dpi;
#              format=gray gives PGMs (612x792 ... at 72 dpi); pdf_text, aligned, gives each
#              page's text layer exactly, pages in order; the same from PDF bytes.
#   bad        not a PDF, truncated, encrypted, a file that vanished: each a RecordFailure
#              of the PDF in the job's `failures` view with its message, its pages never
#              made, downstream sealed; the good PDF beside them is untouched.
#   one page   a page past max_pixels fails alone: a failure row under the page's own
#              key, its item Failed with the message in export, its sibling rendered, the
#              text layer of both pages made, the PDF's page count Suppressed.
source "$(dirname "$0")/lib.sh"

MKPDF=${1:?usage: pdf.sh MKPDF}
mkdir "$T/pdfs"
"$MKPDF" "$T/pdfs" || fail "mkpdf failed"
P=$T/pdfs
# A vanished file: listed, but gone by the time a worker opens it.
printf '%s\n' "$P/good.pdf" "$P/notpdf.pdf" "$P/truncated.pdf" "$P/encrypted.pdf" \
  "$P/huge.pdf" "$P/vanished.pdf" > "$T/list.txt"

cat > "$T/pdf.orch" <<'EOF'
pipeline pdfs
domain pdf
domain page in pdf
source pdf.path = lines("list.txt")
call render = pdf_render()
call gray   = pdf_render(format=gray, dpi=72)
call text   = pdf_text()
call n      = count()
page.image  = expand render(pdf.path)
page.gray   = expand aligned gray(pdf.path)
page.text   = expand aligned text(pdf.path)
pdf.pages   = reduce n(page.image)
output page.image
output page.gray
output page.text
output pdf.pages
EOF
J=$T/job
run_job "$T/pdf.orch" "$J"
job_done "$J"

# ---- the good PDF --------------------------------------------------------------------------
expect_eq "good: 3 pages" "$P/good.pdf|present|3" "$(states "$J" pdf.pages | grep good.pdf)"
expect_eq "good: page keys in order" "$P/good.pdf/0
$P/good.pdf/1
$P/good.pdf/2" "$("$ORCH" export "$J" page.image | python3 -c '
import json, sys
for l in sys.stdin: print(json.loads(l)["key"])' | grep /good.pdf/)"

# images KIND PORT: "KEY WxH" per page, after checking that each value is a well-formed
# 8-bit grayscale PNG (IHDR, IDAT inflating to h rows of 1+w bytes, 150 dpi pHYs) or PGM.
images() {
  "$ORCH" export "$J" "$2" | python3 -c '
import base64, json, struct, sys, zlib
kind = sys.argv[1]
for l in sys.stdin:
    o = json.loads(l)
    b = base64.b64decode(o["value_b64"]) if "value_b64" in o else o["value"].encode()
    if kind == "png":
        assert b[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
        at, chunks = 8, {}
        while at < len(b):
            n, t = struct.unpack(">I4s", b[at:at + 8])
            chunks[t] = chunks.get(t, b"") + b[at + 8:at + 8 + n]
            at += 12 + n
        w, h, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
        assert (depth, color) == (8, 0), "not 8-bit grayscale: %d %d" % (depth, color)
        assert len(zlib.decompress(chunks[b"IDAT"])) == h * (w + 1), "bad IDAT"
        ppm = struct.unpack(">IIB", chunks[b"pHYs"])
        assert ppm == (5906, 5906, 1), "pHYs %r is not 150 dpi" % (ppm,)
    else:
        magic, size, maxval, data = b.split(b"\n", 3)
        w, h = map(int, size.split())
        assert (magic, maxval, len(data)) == (b"P5", b"255", w * h), "bad PGM"
    print(o["key"].rsplit("/", 2)[-2] + "/" + o["key"].rsplit("/", 1)[1], "%dx%d" % (w, h))
' "$1"
}
expect_eq "good: PNG pages at 150 dpi" "good.pdf/0 1275x1650
good.pdf/1 1275x1650
good.pdf/2 625x834
huge.pdf/0 1275x1650" "$(images png page.image)"
expect_eq "good: PGM pages at 72 dpi" "good.pdf/0 612x792
good.pdf/1 612x792
good.pdf/2 300x400
huge.pdf/0 612x792" "$(images gray page.gray)"

# The text layer of good.pdf, exactly: MuPDF ends each line with \n and each block with
# one more.
texts() {
  "$ORCH" export "$1" "$2" | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if "/good.pdf/" in o["key"]:
        print(json.dumps([o["key"].rsplit("/", 1)[1], o["value"]]))'
}
good_text='["0", "Alpha bravo charlie\ndelta echo\n\n"]
["1", "Foxtrot golf\n\n"]
["2", "Hotel india juliet\n\n"]'
expect_eq "good: text layer per page" "$good_text" "$(texts "$J" page.text)"

# ---- the bad ones: one failure row each, with its message --------------------------------
# msg CALL NAME: the messages of CALL's failure rows on the PDF NAME.
msg() {
  q "$J" "SELECT kind || ': ' || message FROM failures WHERE call = '$1' AND key = '$P/$2'"
}
expect_eq "not a PDF" "record: pdf_render: $P/notpdf.pdf: no objects found" "$(msg render notpdf.pdf)"
expect_eq "encrypted" "record: pdf_render: $P/encrypted.pdf: the PDF is encrypted: it needs a password" \
  "$(msg render encrypted.pdf)"
m=$(msg render vanished.pdf)
expect_eq "vanished" "record: pdf_render: $P/vanished.pdf: cannot open $P/vanished.pdf: No such file or directory" "$m"
m=$(msg render truncated.pdf)
case $m in
  "record: pdf_render: $P/truncated.pdf: damaged PDF: MuPDF repaired it, then warned: "?*) ;;
  *) fail "truncated: $m" ;;
esac
for f in notpdf truncated encrypted vanished; do
  expect_eq "$f: no page made" "" "$(q "$J" "SELECT key FROM entity_key WHERE key LIKE '$P/$f.pdf/%'")"
  expect_eq "$f: one failure row" 1 "$(q "$J" "SELECT count(*) FROM failures WHERE key = '$P/$f.pdf'")"
  expect_eq "$f: the page count is suppressed" "$P/$f.pdf|suppressed|" \
    "$("$ORCH" export "$J" pdf.pages --all | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if o["key"] == sys.argv[1]: print("%s|%s|%s" % (o["key"], o["state"], o.get("value", "")))' "$P/$f.pdf")"
done

# ---- one page too large: it fails alone --------------------------------------------------
big="the page is 30000x30000 pixels at 150 dpi, more than max_pixels=50000000"
expect_eq "huge: the big page fails alone, under its own key" \
  "render|$P/huge.pdf/1|record|pdf_render: $P/huge.pdf: page 2 of 2: $big
gray|$P/huge.pdf/1|record|pdf_render: $P/huge.pdf: page 2 of 2: the page is 14400x14400 pixels at 72 dpi, more than max_pixels=50000000" \
  "$(q "$J" "SELECT call, key, kind, message FROM failures WHERE key LIKE '$P/huge.pdf%' ORDER BY call DESC")"
# port KEY: "state|error" of every port's item on page KEY, from export --all.
page_states() {
  for port in page.image page.gray page.text; do
    "$ORCH" export "$J" $port --all | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if o["key"] == sys.argv[1]: print(sys.argv[2], o["state"], o.get("error", ""), sep="|")' "$1" $port
  done
}
expect_eq "huge: page 1 made by all three" "page.image|present|
page.gray|present|
page.text|present|" "$(page_states "$P/huge.pdf/0")"
expect_eq "huge: page 2 failed where it was drawn, its text made" "page.image|failed|pdf_render: $P/huge.pdf: page 2 of 2: $big
page.gray|failed|pdf_render: $P/huge.pdf: page 2 of 2: the page is 14400x14400 pixels at 72 dpi, more than max_pixels=50000000
page.text|present|" "$(page_states "$P/huge.pdf/1")"
expect_eq "huge: the expansion succeeded; no failure of the PDF itself" "succeeded|2|0" \
  "$(q "$J" "SELECT x.state, x.nchildren, (SELECT count(*) FROM failures WHERE key = '$P/huge.pdf')
             FROM expansion AS x JOIN entity_key AS k ON k.entity_id = x.parent_id
             WHERE k.key = '$P/huge.pdf' AND x.call_id = (SELECT id FROM call WHERE name = 'render')")"
expect_eq "huge: the page count is suppressed (a page failed)" "$P/huge.pdf|suppressed|" \
  "$(states "$J" pdf.pages | grep huge.pdf)"

# ---- pdf_text alone, from paths and from bytes -------------------------------------------
cat > "$T/text.orch" <<'EOF'
pipeline texts
domain pdf
domain page in pdf
source pdf.path = lines("list.txt")
call read = read_file()
call text = pdf_text()
pdf.bytes = read(pdf.path)
page.text = expand text(pdf.bytes)
EOF
sed -e 's/pdf.bytes = read(pdf.path)//' -e 's/text(pdf.bytes)/text(pdf.path)/' \
  -e 's/^call read.*//' "$T/text.orch" > "$T/textpath.orch"
run_job "$T/text.orch" "$T/tb"
run_job "$T/textpath.orch" "$T/tp"
job_done "$T/tb"
job_done "$T/tp"
expect_eq "pdf_text from bytes" "$good_text" "$(texts "$T/tb" page.text)"
expect_eq "pdf_text from a path" "$good_text" "$(texts "$T/tp" page.text)"
J=$T/tp
expect_eq "pdf_text: not a PDF" "record: pdf_text: $P/notpdf.pdf: no objects found" "$(msg text notpdf.pdf)"
expect_eq "pdf_text: encrypted" "record: pdf_text: $P/encrypted.pdf: the PDF is encrypted: it needs a password" \
  "$(msg text encrypted.pdf)"
expect_eq "pdf_text: no pixel limit" "$P/huge.pdf/0 [\"Small page\\n\\n\"]
$P/huge.pdf/1 [\"Big page\\n\\n\"]" "$("$ORCH" export "$J" page.text | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    if "/huge.pdf/" in o["key"]: print(o["key"], json.dumps([o["value"]]))')"
case $(msg text truncated.pdf) in
  "record: pdf_text: $P/truncated.pdf: damaged PDF: MuPDF repaired it, then warned: "?*) ;;
  *) fail "pdf_text: truncated: $(msg text truncated.pdf)" ;;
esac
J=$T/tb
expect_eq "pdf_text: truncated bytes" 1 \
  "$(q "$J" "SELECT count(*) FROM failures WHERE call = 'text' AND key = '$P/truncated.pdf'
             AND message LIKE 'pdf_text: PDF bytes: damaged PDF: MuPDF repaired it, then warned: %'")"
# Bytes that do not start with %PDF- are a path: the text of notpdf.pdf names no file.
expect_eq "pdf_text: bytes that are not a PDF" 1 \
  "$(q "$J" "SELECT count(*) FROM failures WHERE call = 'text' AND key = '$P/notpdf.pdf'
             AND message LIKE 'pdf_text: this is a line of text, not a PDF%: cannot open %'")"
echo "pdf: ok"
