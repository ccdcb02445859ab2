# scripts/bench/pdf_compare_dask.py PDFDIR OUTDIR WORKERS — the PDF -> page -> OCR ->
# document pipeline as a Dask user writes it with a bag (dask_common.py: flatten, OCR a
# page per `tesseract` run, group back by document, join in page order with "\f"; run it
# with Debian's /usr/bin/python3). The pages are `mutool draw`'s, per PDF: 150 dpi, gray,
# PNG. One file OUTDIR/NAME.txt per PDFDIR/NAME.pdf.
import os
import subprocess
import sys

import dask_common


def render(path):
    """A PDF's pages: (name, page number from 1, PNG bytes)."""
    return dask_common.files_of(
        os.path.basename(path)[:-len(".pdf")],
        lambda out: ["mutool", "draw", "-q", "-r", "150", "-c", "gray", "-F", "png",
                     "-o", out, path],
        "p%06d.png", stderr=subprocess.DEVNULL)  # Debian's "no ICC" warning


def main():
    pdfdir, outdir, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pdfs = sorted(os.path.join(pdfdir, f) for f in os.listdir(pdfdir) if f.endswith(".pdf"))
    for name, _, text in dask_common.run(pdfs, render, workers):
        with open(os.path.join(outdir, name + ".txt"), "wb") as f:
            f.write(text)


if __name__ == "__main__":
    main()
