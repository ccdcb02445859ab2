# scripts/bench/pdf_compare_dask.py PDFDIR OUTDIR WORKERS — the PDF -> page -> OCR ->
# document pipeline as a Dask user writes it with a bag (Debian's python3-dask; run it with
# Debian's /usr/bin/python3): every PDF becomes its pages (flatten), each page is OCRed,
# the page texts are grouped back by document and joined in page order with "\f" (what
# orch's concat(sep="\f") does). One file OUTDIR/NAME.txt per PDFDIR/NAME.pdf.
# The work is the command-line tools, as pytesseract would run them: `mutool draw` per PDF,
# `tesseract - -` per page (the page PNG on stdin, the text on stdout), with
# OMP_THREAD_LIMIT=1 from the caller. The scheduler is Dask's local process pool with
# WORKERS workers; the bag keeps from_sequence's default partitioning (for up to 100 PDFs,
# one PDF a partition), which is what a user gets without tuning.
import os
import subprocess
import sys
import tempfile

import dask.bag as db


def render(path):
    """A PDF's pages: (name, page number from 1, PNG bytes), drawn by mutool at 150 dpi, gray."""
    name = os.path.basename(path)[:-len(".pdf")]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["mutool", "draw", "-q", "-r", "150", "-c", "gray", "-F", "png",
                        "-o", os.path.join(tmp, "p%06d.png"), path],
                       check=True, stderr=subprocess.DEVNULL)  # Debian's "no ICC" warning
        pages = []
        for i, f in enumerate(sorted(os.listdir(tmp)), start=1):
            with open(os.path.join(tmp, f), "rb") as fh:
                pages.append((name, i, fh.read()))
        return pages


def ocr(page):
    """(name, page number, the page's text as bytes) by one `tesseract` run."""
    name, i, png = page
    p = subprocess.run(["tesseract", "-", "-", "--psm", "3", "-l", "eng"], input=png,
                       capture_output=True, check=True)
    return name, i, p.stdout


def assemble(group):
    name, pages = group
    return name, b"\f".join(text for _, _, text in sorted(pages, key=lambda p: p[1]))


def main():
    pdfdir, outdir, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pdfs = sorted(os.path.join(pdfdir, f) for f in os.listdir(pdfdir) if f.endswith(".pdf"))
    docs = (db.from_sequence(pdfs)
            .map(render).flatten()
            .map(ocr)
            .groupby(lambda page: page[0])
            .map(assemble))
    for name, text in docs.compute(scheduler="processes", num_workers=workers):
        with open(os.path.join(outdir, name + ".txt"), "wb") as f:
            f.write(text)


if __name__ == "__main__":
    main()
