#!/usr/bin/env python3
"""gen_exec_seeds.py DIR — writes the seeds of fuzz_exec (tests/fuzz/seeds/exec).

Each seed is what fuzz_exec reads: three bytes that choose the call and the batch (op,
nout - 1, records), then a program's reply to that batch. The replies are made by the
program side of the protocol itself, udfs/python/orch_udf.py (its _run_batch, the code that
answers a BTCH, with the CHLD frames of generator answers), for small UDFs of every op and
answer kind; a few are then cut or bent where the protocol says the host must refuse them.

    python3 tests/fuzz/gen_exec_seeds.py tests/fuzz/seeds/exec
"""

import io
import os
import sys
import contextlib
import struct

sys.dont_write_bytecode = True  # leave no __pycache__ in udfs/python
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "udfs", "python"))
import orch_udf  # noqa: E402

OPS = {"map": orch_udf.MAP, "expand": orch_udf.EXPAND,
       "aligned": orch_udf.EXPAND_ALIGNED, "filter": orch_udf.FILTER,
       "reduce": orch_udf.REDUCE}


class Fixed:
    """A UDF that answers the given list (or raises it, for an exception)."""

    def __init__(self, answers):
        self.answers = answers

    def run(self, batch):
        if isinstance(self.answers, Exception):
            raise self.answers
        return list(self.answers)


def reply(op, nout, answers, records=None):
    """The program's frame for a batch of len(answers) records (or `records`)."""
    n = len(answers) if records is None else records
    cfg = orch_udf.Config("fuzz", "python3 fuzz.py", OPS[op], 1, nout, 0, {})
    recs = [orch_udf.Record(i + 1, 1, 1, [[b"in"]]) for i in range(n)]
    frames = []  # the CHLD frames of generators, before the answer
    with contextlib.redirect_stderr(io.StringIO()):  # an exception's traceback
        last = orch_udf._run_batch(Fixed(answers), cfg, recs, frames.append)
    return b"".join(frames) + last


def gen(children, end=None):
    """A generator answer: yields children, then raises end (when not None)."""
    yield from children
    if end is not None:
        raise end


def seed(op, nout, records, frame):
    return bytes([OPS[op], nout - 1, records]) + frame


def main(argv):
    if len(argv) != 2:
        print("usage: gen_exec_seeds.py DIR", file=sys.stderr)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    Drop, RF, GF = orch_udf.Drop, orch_udf.RecordFailure, orch_udf.GroupFailure
    seeds = {
        "map-1": ("map", 1, [b"HELLO", "world", b""]),
        "map-2": ("map", 2, [(b"a", b"bb"), Drop, RF("bad page"), GF("bad parent")]),
        "reduce": ("reduce", 1, [b"sum=42", Drop]),
        "expand-1": ("expand", 1, [[b"p1", b"p2", b"p3"], [], Drop]),
        "expand-2": ("expand", 2, [[(b"a", b"b"), (b"c", b"")], RF("no pages")]),
        "aligned": ("aligned", 1, [[b"x", b"y"]]),
        "expand-failed-child": ("expand", 2, [[(b"a", b"b"), RF("page 2 of 3: too large"),
                                               (b"c", b"")], [RF("")]]),
        "filter": ("filter", 1, [True, False, Drop, GF("unreadable")]),
        # streamed children (CHLD frames), then the rest or a failure in the ANSW
        "stream": ("expand", 2, [gen([(b"a", b"b"), RF("page 2"), (b"c", b"")]), [],
                                 gen([]), gen([(b"d", b"e")], RF("page 2: bad"))]),
        "stream-group": ("aligned", 1, [gen([b"x"], GF("bad parent")), gen([b"y", b"z"])]),
        "empty-batch": ("map", 1, []),
        "berr": ("map", 1, RuntimeError("the model crashed")),
        # answers of a kind that does not fit the op: RecordFailures, not protocol errors
        "misfit-map-as-filter": ("filter", 1, None),
        "misfit-expand-as-map": ("map", 1, None),
    }
    for name, (op, nout, answers) in seeds.items():
        if name == "misfit-map-as-filter":
            frame, n = reply("map", 1, [b"v"]), 1
        elif name == "misfit-expand-as-map":
            frame, n = reply("expand", 1, [[b"c"], []]), 2
        elif name == "berr":
            frame, n = reply(op, nout, answers, records=2), 2
        else:
            frame, n = reply(op, nout, answers), len(answers)
        with open(os.path.join(out, name), "wb") as f:
            f.write(seed(op, nout, n, frame))
    # Protocol errors: the output ends inside the frame; one answer too many; a bad tag.
    frame = reply("map", 1, [b"abc", b"def"])
    with open(os.path.join(out, "cut"), "wb") as f:
        f.write(seed("map", 1, 2, frame[:-2]))
    with open(os.path.join(out, "count"), "wb") as f:
        f.write(seed("map", 1, 1, frame))
    with open(os.path.join(out, "tag"), "wb") as f:
        f.write(seed("map", 1, 2, b"ANSX" + frame[4:]))
    # CHLD frames the host refuses: to a map; records out of order; a record out of range.
    chld = [orch_udf._frame(b"CHLD", [struct.pack("<II", i, 1), b"v", orch_udf._blob(b"c")])
            for i in (0, 1, 2)]
    answ = reply("expand", 1, [[], []])
    with open(os.path.join(out, "chld-map"), "wb") as f:
        f.write(seed("map", 1, 2, chld[0] + frame))
    with open(os.path.join(out, "chld-order"), "wb") as f:
        f.write(seed("expand", 1, 2, chld[1] + chld[0] + answ))
    with open(os.path.join(out, "chld-range"), "wb") as f:
        f.write(seed("expand", 1, 2, chld[2] + answ))
    with open(os.path.join(out, "chld-drop"), "wb") as f:  # a drop after children: misfit
        f.write(seed("expand", 1, 2, chld[0] + reply("expand", 1, [Drop, []])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
