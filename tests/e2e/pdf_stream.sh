#!/usr/bin/env bash
# pdf_stream.sh — pdf_render streams its pages (docs/language.md, "PDF built-ins"):
#   many   a 16-page PDF rendered at 600 dpi (each page a 5100x6600 PNG, so the expansion
#          lasts seconds): page 1's map grain ends while the expansion still runs, in its
#          first half; every page is made and counted.
#   cut    the same PDF cut where its last page's content begins: MuPDF repairs it and
#          warns, so the PDF is one `record` failure decided before its first page: none
#          of its pages exists, its expansion Failed with no child.
source "$(dirname "$0")/lib.sh"

P=$T/pdfs
mkdir "$P"
# A PDF of N letter pages, each "Page K" in Helvetica, with an exact xref (no repair
# needed); cut.pdf ends where the last object (the last page's content) begins.
python3 - "$P" 16 <<'PY' || fail "cannot make the PDFs"
import sys
d, n = sys.argv[1], int(sys.argv[2])
objs = {1: b"<< /Type /Catalog /Pages 2 0 R >>",
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"}
kids = []
for k in range(n):
    pg, ct = 4 + 2 * k, 5 + 2 * k
    kids.append(b"%d 0 R" % pg)
    objs[pg] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % ct)
    s = b"BT /F1 24 Tf 72 720 Td (Page %d) Tj ET" % (k + 1)
    objs[ct] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(s), s)
objs[2] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), n)
out, off = bytearray(b"%PDF-1.4\n"), {}
for i in sorted(objs):
    off[i] = len(out)
    out += b"%d 0 obj\n%s\nendobj\n" % (i, objs[i])
xref, size = len(out), max(objs) + 1
out += b"xref\n0 %d\n0000000000 65535 f \n" % size
out += b"".join(b"%010d 00000 n \n" % off[i] for i in range(1, size))
out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
open(d + "/many.pdf", "wb").write(out)
open(d + "/cut.pdf", "wb").write(out[:off[max(objs)]])
PY
printf '%s\n' "$P/many.pdf" "$P/cut.pdf" > "$T/list.txt"

cat > "$T/stream.orch" <<'PIPE'
pipeline pdfstream
domain pdf
domain page in pdf
source pdf.path = lines("list.txt")
call render = pdf_render(dpi=600)
call id     = identity()
call n      = count()
page.image  = expand render(pdf.path)
page.same   = id(page.image)
pdf.pages   = reduce n(page.same)
output pdf.pages
PIPE
J=$T/job
run_job "$T/stream.orch" "$J"
job_done "$J"

# ---- many: page 1's downstream grain ends in the first half of the expansion ----------------
expect_eq "pages counted" "$P/many.pdf|present|16
$P/cut.pdf|suppressed|" "$(states "$J" pdf.pages)"
# ms from the end of the map grain of page 1 to the end of the expansion, and the
# expansion's own length.
read -r ahead length <<< "$(q "$J" "SELECT x.ended_at - m.ended_at, x.ended_at - x.started_at
  FROM attempt AS x JOIN grain AS gx ON gx.id = x.grain_id JOIN call AS cx ON cx.id = gx.call_id
  JOIN entity AS e ON e.parent_id = gx.entity_id
  JOIN grain AS gm ON gm.entity_id = e.id JOIN call AS cm ON cm.id = gm.call_id
  JOIN attempt AS m ON m.grain_id = gm.id
  WHERE cx.name = 'render' AND cm.name = 'id' AND e.key = '$P/many.pdf/0'" | tr '|' ' ')"
[ -n "$ahead" ] || fail "no attempts of page 1 and its expansion"
[ "$length" -gt 500 ] || fail "the 16 pages rendered in ${length} ms: too fast to measure"
[ $((ahead * 2)) -gt "$length" ] ||
  fail "page 1's map grain ended only ${ahead} ms before its ${length}-ms expansion"
expect_eq "many: expansion" "succeeded|16" "$(q "$J" "SELECT x.state, x.nchildren
  FROM expansion AS x JOIN entity_key AS k ON k.entity_id = x.parent_id
  WHERE k.key = '$P/many.pdf'")"

# ---- cut: one record failure, no page ------------------------------------------------------
expect_eq "cut: failure" "render|$P/cut.pdf|record|pdf_render: $P/cut.pdf: damaged PDF: MuPDF \
repaired it, then warned: cannot load object (35 0 R) into cache" \
  "$(q "$J" "SELECT call, key, kind, message FROM failures")"
expect_eq "cut: no page" "0" "$(q "$J" "SELECT count(*) FROM entity AS e
  JOIN entity_key AS k ON k.entity_id = e.parent_id WHERE k.key = '$P/cut.pdf'")"
expect_eq "cut: expansion" "failed|0" "$(q "$J" "SELECT x.state, x.nchildren
  FROM expansion AS x JOIN entity_key AS k ON k.entity_id = x.parent_id
  WHERE k.key = '$P/cut.pdf'")"
echo "pdf_stream: ok (page 1 done ${ahead} ms before the end of its ${length}-ms expansion)"
