#!/usr/bin/env python3
"""An example exec() UDF: ASCII upper case, as a map.

    call up = exec("python3 udfs/python/upper_udf.py")   with workers=2, batch=8
    page.loud = up(page.text)

The call's arguments reach __init__ as a dict of strings; this one knows `suffix`.

It shows every kind of answer a map can give:
  - the input upper-cased, plus the optional `suffix` argument;
  - orch_udf.Drop for an empty input or an optional input that was Dropped;
  - orch_udf.RecordFailure for an input containing "bad";
  - orch_udf.GroupFailure for an input containing "poison";
  - an exception (an attempt failure of the whole batch) for an input containing "explode".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import orch_udf  # noqa: E402


class Upper:
    def __init__(self, args):
        self.suffix = args.get("suffix", "").encode()

    def answer(self, value):
        if not value:
            return orch_udf.Drop
        if b"bad" in value:
            return orch_udf.RecordFailure("upper_udf: the input is bad")
        if b"poison" in value:
            return orch_udf.GroupFailure("upper_udf: the parent is poisoned")
        if b"explode" in value:
            raise RuntimeError("upper_udf: exploded")
        return value.upper() + self.suffix

    def run(self, batch):
        return [self.answer(r.value) for r in batch]


if __name__ == "__main__":
    sys.exit(orch_udf.serve(Upper))
