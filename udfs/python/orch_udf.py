"""orch_udf — write an orch UDF in Python, run through exec().

A UDF is a class with ``__init__(self, args)`` and ``run(self, batch)``::

    import orch_udf

    class Upper:
        def __init__(self, args):          # args: dict of the call's arguments (str -> str)
            self.suffix = args.get("suffix", "").encode()

        def run(self, batch):              # batch: list of orch_udf.Record
            return [r.value.upper() + self.suffix for r in batch]

    if __name__ == "__main__":
        orch_udf.serve(Upper)

and in the pipeline ``call up = exec("python3 path/to/upper.py")``. A module that only
defines the class can also be served with
``exec("python3 /path/to/udfs/python/orch_udf.py my_module:Upper")`` or
``exec("python3 /path/to/udfs/python/orch_udf.py path/to/file.py:Upper")``
(or ``python3 -m orch_udf ...`` with this directory on PYTHONPATH).

The instance lives as long as the worker: load models in ``__init__``. An optional
``close(self)`` is called when the worker shuts down cleanly. ``orch_udf.config`` holds the
call's configuration (call, function, op, nin, nout, worker, args) during and after
``__init__``.

A Record has ``grain_id``, ``generation``, ``attempt`` (1-based), ``inputs`` (one list of
values per input; a value is ``bytes``, or ``None`` for an optional input that was
Dropped), and the shortcuts ``value`` (``inputs[0][0]``: map, filter, expand) and
``values`` (``inputs[0]``: reduce).

``run`` returns a list with exactly one answer per record, in order:

=========================  =================================================================
op                         answer
=========================  =================================================================
map, reduce                ``bytes`` or ``str`` (UTF-8) when the statement has one output;
                           a tuple of one value per output port otherwise
expand, expand aligned     a list of children; a child is a value (one output) or a tuple
                           of one value per output port. ``[]`` is zero children. A child
                           may be ``orch_udf.RecordFailure("msg")``: that child exists but
                           failed (its outputs are Failed); its siblings go on.
                           An expand's answer may also be a generator (any iterator) of
                           children: they are sent to the host as they are yielded, so
                           their downstream grains run while it goes on (a streaming
                           expansion). Raising ``orch_udf.RecordFailure`` or
                           ``GroupFailure`` in it after some children answers that
                           failure (the children already made stay, DESIGN §4); another
                           exception fails the batch.
filter                     ``True`` or ``False``
any                        ``orch_udf.Drop``: nothing to produce (outputs Dropped)
any                        ``orch_udf.RecordFailure("msg")``: this record is bad
any                        ``orch_udf.GroupFailure("msg")``: this record's parent is bad
=========================  =================================================================

A generator's children go to the host in CHLD frames (udfs/EXEC_PROTOCOL.md): each child
that took 1 ms or more to make goes at once, with any held before it; quicker ones go
together, at the latest once the first of them was made 5 ms before, or 256 of them, or
1 MiB of their values, are held. The record's answer then carries whatever is left.

An answer of another type becomes a RecordFailure that says what was wrong. An exception
raised by ``run`` (or a list of the wrong length) fails the whole batch: an attempt failure,
retried by the engine; its traceback goes to stderr. An exception raised by ``__init__``
fails the worker's init with its message.

Anything printed goes to stderr: stdout carries the protocol (udfs/EXEC_PROTOCOL.md) and is
taken over by serve() before the class is constructed.
"""

import importlib
import importlib.util
import os
import struct
import sys
import time
import traceback

PROTOCOL_VERSION = 1

MAP, EXPAND, EXPAND_ALIGNED, FILTER, REDUCE = range(5)
OP_NAMES = {MAP: "map", EXPAND: "expand", EXPAND_ALIGNED: "expand aligned",
            FILTER: "filter", REDUCE: "reduce"}

config = None


class _DropType:
    """The type of orch_udf.Drop."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "orch_udf.Drop"


Drop = _DropType()


class RecordFailure(Exception):
    """Answer for a record that is bad (a typed failure: not retried)."""

    def __init__(self, message=""):
        super().__init__(message)
        self.message = str(message)


class GroupFailure(Exception):
    """Answer for a record whose parent is bad: its siblings are not run."""

    def __init__(self, message=""):
        super().__init__(message)
        self.message = str(message)


class Config:
    """What the host sent in its hello."""

    def __init__(self, call, function, op, nin, nout, worker, args):
        self.call, self.function, self.op = call, function, op
        self.nin, self.nout, self.worker, self.args = nin, nout, worker, args

    @property
    def op_name(self):
        return OP_NAMES.get(self.op, "?")


class Record:
    """One record of a batch."""

    __slots__ = ("grain_id", "generation", "attempt", "inputs")

    def __init__(self, grain_id, generation, attempt, inputs):
        self.grain_id, self.generation, self.attempt = grain_id, generation, attempt
        self.inputs = inputs

    @property
    def value(self):
        """The first input's value (map, filter, expand); None when absent."""
        return self.inputs[0][0] if self.inputs and self.inputs[0] else None

    @property
    def values(self):
        """The first input's list of values (reduce)."""
        return self.inputs[0] if self.inputs else []

    def __repr__(self):
        return "Record(grain_id=%d, generation=%d, attempt=%d, inputs=%r)" % (
            self.grain_id, self.generation, self.attempt, self.inputs)


class ProtocolError(Exception):
    pass


# ---- wire -------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ProtocolError("truncated frame")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self):
        return self.take(1)[0]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def str(self):
        return self.take(self.u32()).decode("utf-8", "replace")

    def blob(self):
        return bytes(self.take(self.u64()))


def _read_exact(f, n):
    chunks, left = [], n
    while left > 0:
        b = f.read(left)
        if not b:
            break
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def _read_frame(f):
    """(tag, body reader), or None at a clean end of input."""
    head = _read_exact(f, 12)
    if not head:
        return None
    if len(head) < 12:
        raise ProtocolError("end of input inside a frame header")
    tag, length = head[:4], struct.unpack("<Q", head[4:])[0]
    body = _read_exact(f, length)
    if len(body) < length:
        raise ProtocolError("end of input inside a %r frame" % tag)
    return tag, _Reader(body)


def _frame(tag, parts):
    body = b"".join(parts)
    return tag + struct.pack("<Q", len(body)) + body


def _str(s):
    b = s.encode("utf-8", "replace")
    return struct.pack("<I", len(b)) + b


def _blob(v):
    return struct.pack("<Q", len(v)) + v


# ---- answers ----------------------------------------------------------------------------

class _BadAnswer(Exception):
    pass


def _value(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    raise _BadAnswer("a value must be bytes or str, not %s" % type(v).__name__)


def _values(v, nout):
    """The nout blobs of one answer (or child)."""
    if nout == 1 and not isinstance(v, (tuple, list)):
        return _blob(_value(v))
    if not isinstance(v, (tuple, list)) or len(v) != nout:
        raise _BadAnswer("the call has %d outputs: give a tuple of %d values" % (nout, nout))
    return b"".join(_blob(_value(x)) for x in v)


def _encode_answer(a, op, nout):
    if a is Drop:
        return b"D"
    if isinstance(a, RecordFailure):
        return b"R" + _str(a.message)
    if isinstance(a, GroupFailure):
        return b"G" + _str(a.message)
    if op == FILTER:
        if not isinstance(a, bool):
            raise _BadAnswer("a filter answers True or False, not %s" % type(a).__name__)
        return b"K" + bytes([1 if a else 0])
    if op in (EXPAND, EXPAND_ALIGNED):
        if isinstance(a, (bytes, bytearray, memoryview, str)) or a is None:
            raise _BadAnswer("an expand answers a list of children, not %s" % type(a).__name__)
        try:
            children = list(a)
        except TypeError:
            raise _BadAnswer("an expand answers a list of children, not %s"
                             % type(a).__name__) from None
        if not any(isinstance(c, RecordFailure) for c in children):
            return (b"C" + struct.pack("<I", len(children))
                    + b"".join(_values(c, nout) for c in children))
        return (b"E" + struct.pack("<I", len(children))
                + b"".join(b"f" + _str(c.message) if isinstance(c, RecordFailure)
                           else b"v" + _values(c, nout) for c in children))
    if a is None:
        raise _BadAnswer("run gave None (use orch_udf.Drop to drop a record)")
    return b"V" + _values(a, nout)


def _answer(a, op, nout, i):
    try:
        return _encode_answer(a, op, nout)
    except _BadAnswer as e:
        return b"R" + _str("python udf: bad answer for record %d: %s" % (i, e))


# A generator's children go out in a CHLD frame once this many are held, or their values
# reach this many bytes, or the first of them was made this long ago, or the last one took
# at least _STREAM_SLOW to make (a slow generator: each child goes as it is made).
_STREAM_CHILDREN = 256
_STREAM_BYTES = 1 << 20
_STREAM_SECONDS = 0.005
_STREAM_SLOW = 0.001


def _child(c, nout):
    if isinstance(c, RecordFailure):
        return b"f" + _str(c.message)
    return b"v" + _values(c, nout)


def _stream(gen, i, nout, write):
    """Sends the children of record i that the iterator gen yields, in CHLD frames, as they
    are made; returns the answer that ends them: 'C' with none left, or 'R'/'G' when gen
    raised a RecordFailure/GroupFailure (or yielded a bad child). Any other exception
    propagates (the batch fails)."""
    held, size, first = [], 0, None
    clock = time.monotonic
    before = clock()

    def flush():
        if held:
            write(_frame(b"CHLD", [struct.pack("<II", i, len(held))] + held))
            held.clear()

    try:
        for c in gen:
            now = clock()
            try:
                held.append(_child(c, nout))
            except _BadAnswer as e:
                flush()
                return b"R" + _str("python udf: bad answer for record %d: %s" % (i, e))
            size += len(held[-1])
            first = now if len(held) == 1 else first
            if (len(held) >= _STREAM_CHILDREN or size >= _STREAM_BYTES
                    or now - first >= _STREAM_SECONDS or now - before >= _STREAM_SLOW):
                flush()
                size = 0
            before = clock()
    except RecordFailure as e:
        flush()
        return b"R" + _str(e.message)
    except GroupFailure as e:
        flush()
        return b"G" + _str(e.message)
    flush()
    return b"C" + struct.pack("<I", 0)


# ---- the loop ---------------------------------------------------------------------------

def _parse_hello(r):
    version = r.u32()
    if version != PROTOCOL_VERSION:
        raise ProtocolError("host speaks exec protocol %d, this helper %d"
                            % (version, PROTOCOL_VERSION))
    call, function = r.str(), r.str()
    op, nin, nout, worker, nargs = r.u32(), r.u32(), r.u32(), r.u32(), r.u32()
    args = {}
    for _ in range(nargs):
        k = r.str()
        args[k] = r.str()
    return Config(call, function, op, nin, nout, worker, args)


def _parse_batch(r, nin):
    records = []
    for _ in range(r.u32()):
        grain_id, generation, attempt = r.u64(), r.u32(), r.u32()
        inputs = []
        for _ in range(nin):
            vals = []
            for _ in range(r.u32()):
                vals.append(r.blob() if r.u8() else None)
            inputs.append(vals)
        records.append(Record(grain_id, generation, attempt, inputs))
    return records


def _streams(a, op):
    """Whether answer a is an iterator of children to stream (a generator of an expand)."""
    return (op in (EXPAND, EXPAND_ALIGNED) and hasattr(a, "__next__")
            and not isinstance(a, (bytes, bytearray, memoryview, str, tuple, list)))


def _run_batch(udf, cfg, records, write=None):
    """The frame that answers one batch; the CHLD frames of its generators go to write
    (a function of one frame) before it."""
    try:
        answers = list(udf.run(records))
        if len(answers) != len(records):
            return _frame(b"BERR", [_str("run returned %d answers for %d records"
                                         % (len(answers), len(records)))])
        parts = [struct.pack("<I", len(records))]
        for i, a in enumerate(answers):
            if _streams(a, cfg.op):
                parts.append(_stream(a, i, cfg.nout, write))
            else:
                parts.append(_answer(a, cfg.op, cfg.nout, i))
    except Exception as e:  # an attempt failure of the batch
        traceback.print_exc(file=sys.stderr)
        return _frame(b"BERR", [_str("%s: %s" % (type(e).__name__, e))])
    return _frame(b"ANSW", parts)


def _writer(out):
    def write(frame):
        out.write(frame)
        out.flush()
    return write


def serve(cls):
    """Runs the exec protocol on stdin/stdout with an instance of cls; returns an exit
    status (0 after a clean end of input)."""
    global config
    inp = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stdout (fd 1, and sys.stdout) now goes to stderr
    sys.stdout = sys.stderr
    try:
        frame = _read_frame(inp)
        if frame is None:
            return 0
        tag, r = frame
        if tag != b"HELO":
            raise ProtocolError("expected HELO, got %r" % tag)
        config = _parse_hello(r)
        try:
            udf = cls(config.args)
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            out.write(_frame(b"IERR", [_str("%s: %s" % (type(e).__name__, e))]))
            out.flush()
            return 1
        out.write(_frame(b"REDY", [struct.pack("<I", PROTOCOL_VERSION)]))
        out.flush()
        while True:
            frame = _read_frame(inp)
            if frame is None:
                break
            tag, r = frame
            if tag != b"BTCH":
                raise ProtocolError("expected BTCH, got %r" % tag)
            out.write(_run_batch(udf, config, _parse_batch(r, config.nin), _writer(out)))
            out.flush()
        close = getattr(udf, "close", None)
        if close is not None:
            close()
        return 0
    except ProtocolError as e:
        print("orch_udf: protocol error: %s" % e, file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 2


def _load(spec):
    """'module:Class' or 'path/to/file.py:Class' -> the class."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise SystemExit("usage: orch_udf.py MODULE:CLASS | FILE.py:CLASS")
    if where.endswith(".py") or os.sep in where:
        path = os.path.abspath(where)
        sys.path.insert(0, os.path.dirname(path))
        modname = os.path.splitext(os.path.basename(path))[0]
        s = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(s)
        sys.modules[modname] = module
        s.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return getattr(module, name)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python3 -m orch_udf MODULE:CLASS | FILE.py:CLASS", file=sys.stderr)
        return 2
    # Served as a script, this file is __main__; make `import orch_udf` in the user's module
    # see this very module (and its Drop, RecordFailure, ...), not a second copy.
    sys.modules.setdefault("orch_udf", sys.modules[__name__])
    return serve(_load(argv[0]))


if __name__ == "__main__":
    sys.exit(main())
