# scripts/bench/dask_common.py — the Dask bag that the benchmarks' Dask peers share
# (pdf_compare_dask.py, video_compare_dask.py), as a Dask user writes it: every input file
# becomes its items (pages, frames) by one command-line tool that writes them as files
# (flatten), each item is OCRed by one `tesseract - -` run (the image on stdin, the text on
# stdout, what pytesseract does; OMP_THREAD_LIMIT=1 from the caller), and the texts are
# grouped back by input and joined in item order with "\f" (what orch's concat(sep="\f")
# does). The scheduler is Dask's local process pool with WORKERS workers; the bag keeps
# from_sequence's default partitioning (for up to 100 inputs, one input a partition), which
# is what a user gets without tuning. Imported, not run (Debian's python3-dask, for
# Debian's /usr/bin/python3).
import os
import subprocess
import tempfile

import dask.bag as db


def files_of(name, command, pattern, **run):
    """The files that command(folder) writes into a fresh folder, named by pattern (a printf
    pattern, "p%06d.png"), in name order, as (name, number from 1, bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(command(os.path.join(tmp, pattern)), check=True, **run)
        items = []
        for i, f in enumerate(sorted(os.listdir(tmp)), start=1):
            with open(os.path.join(tmp, f), "rb") as fh:
                items.append((name, i, fh.read()))
        return items


def ocr(item):
    """(name, number, the item's text as bytes) by one `tesseract` run."""
    name, i, image = item
    p = subprocess.run(["tesseract", "-", "-", "--psm", "3", "-l", "eng"], input=image,
                       capture_output=True, check=True)
    return name, i, p.stdout


def assemble(group):
    """(name, number of items, their texts joined by "\f" in item order)."""
    name, items = group
    items = sorted(items, key=lambda item: item[1])
    return name, len(items), b"\f".join(text for _, _, text in items)


def run(paths, split, workers):
    """The pipeline over paths, split(path) giving a path's items: a list of
    (name, number of items, joined texts), one per input that has items."""
    bag = (db.from_sequence(paths)
           .map(split).flatten()
           .map(ocr)
           .groupby(lambda item: item[0])
           .map(assemble))
    return bag.compute(scheduler="processes", num_workers=workers)
