"""The crash loop's pipeline and its data: PIPELINE (and its parts, for --edit), the Edit
of a pipeline that --edit draws, the source's lines and the edit of them that --update
makes; the files() source's states."""
import os

PORTS = ["doc.line", "word.raw", "word.nap", "word.ok", "word.up", "word.good", "word.line",
         "word.ctx", "doc.joined", "doc.n", "file.path", "file.text", "file.up",
         "burst.v", "doc.bursts"]
OUTPUTS = ["doc.joined", "doc.n", "word.good", "word.ctx", "file.up", "doc.bursts"]
SOURCES = ["doc.line", "file.path"]
# A streaming expansion (DESIGN §5): tests/udf_slow_expand.c, built next to the binary,
# makes 6 children of each line 3 ms apart, so that its children are published in chunks
# while it runs and the kills land in the middle of expansions; a replay compares them.
_ORCH = os.environ.get("ORCH") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "build", "engine", "orch")
SLOW = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(_ORCH))), "udfs",
                    "udf_slow_expand.so")
HEADER = """\
pipeline crashloop
domain doc
domain word in doc
domain burst in doc
domain file
source doc.line = lines("in.txt")
source file.path = files("files/*.txt")
"""


# retries: a worker kill charges the grain of a one-grain batch; flaky charges one more.
# Generous retries keep a seed that happens to kill the same grain's worker twice from
# exhausting it (which would change the outputs, not break an invariant).
PIPELINE = HEADER + """\
call cut   = split(sep=" ")           with batch=4, retries=8
call nap   = sleep()                  with workers=2, batch=4, retries=8
call shaky = flaky(fail_attempts=1)   with workers=2, batch=3, retries=4
call up    = upper()                  with batch=8, retries=8
call keep  = nonempty()               with batch=8, retries=8
call ctx   = identity()               with batch=16, retries=8
call join  = concat(sep="+")          with reserve=parent, batch=2, retries=8
call num   = count()                  with batch=4, retries=8
call rd    = read_file()              with batch=2, retries=8
call fup   = upper()                  with batch=4, retries=8
call gen   = library("%s", "orch_udf_slow_expand")(n=6, ms=3) with workers=2, retries=8
call bn    = count()                  with retries=8
word.raw   = expand cut(doc.line)
word.nap   = nap(word.raw)
word.ok    = shaky(word.nap)
word.up    = up(word.ok)
word.good  = filter keep(word.up)
word.line  = broadcast doc.line
word.ctx   = ctx(word.line)
doc.joined = reduce join(word.good)
doc.n      = reduce num(word.good)
file.text  = rd(file.path)
file.up    = fup(file.text)
burst.v    = expand gen(doc.line)
doc.bursts = reduce bn(burst.v)
output doc.joined
output doc.n
output word.good
output word.ctx
output file.up
output doc.bursts
""" % SLOW


# --edit: PIPELINE as parts, to edit. A statement: (port, operation, call, input).
CALLS = [("cut", 'split(sep=" ")', "batch=4, retries=8"),
         ("nap", "sleep()", "workers=2, batch=4, retries=8"),
         ("shaky", "flaky(fail_attempts=1)", "workers=2, batch=3, retries=4"),
         ("up", "upper()", "batch=8, retries=8"),
         ("keep", "nonempty()", "batch=8, retries=8"),
         ("ctx", "identity()", "batch=16, retries=8"),
         ("join", 'concat(sep="+")', "reserve=parent, batch=2, retries=8"),
         ("num", "count()", "batch=4, retries=8"),
         ("rd", "read_file()", "batch=2, retries=8"),
         ("fup", "upper()", "batch=4, retries=8"),
         ("gen", 'library("%s", "orch_udf_slow_expand")(n=6, ms=3)' % SLOW,
          "workers=2, retries=8"),
         ("bn", "count()", "retries=8")]
STMTS = [("word.raw", "expand", "cut", "doc.line"),
         ("word.nap", "map", "nap", "word.raw"),
         ("word.ok", "map", "shaky", "word.nap"),
         ("word.up", "map", "up", "word.ok"),
         ("word.good", "filter", "keep", "word.up"),
         ("word.line", "broadcast", None, "doc.line"),
         ("word.ctx", "map", "ctx", "word.line"),
         ("doc.joined", "reduce", "join", "word.good"),
         ("doc.n", "reduce", "num", "word.good"),
         ("file.text", "map", "rd", "file.path"),
         ("file.up", "map", "fup", "file.text"),
         ("burst.v", "expand", "gen", "doc.line"),
         ("doc.bursts", "reduce", "bn", "burst.v")]


def render(calls, stmts, outputs):
    """A pipeline's text from its parts (CALLS, STMTS, OUTPUTS: PIPELINE, but for spaces)."""
    text = HEADER
    text += "".join("call %s = %s with %s\n" % c for c in calls)
    for port, op, call, inp in stmts:
        text += "%s = %s\n" % (port, "broadcast " + inp if op == "broadcast" else "%s%s(%s)" % (
            "" if op == "map" else op + " ", call, inp))
    return text + "".join("output %s\n" % o for o in outputs)



class Edit:
    """--edit: one job's pipeline and its edit, drawn from rng. outputs: the job's
    pipelines declare PIPELINE's outputs (then the intermediates are reclaimed once read,
    and a step upstream of a change that needs them is computed again); otherwise none
    (every payload kept: every step the edit leaves as it was can be taken over).

    The edit: with --rerun alone (no PIPELINE) one time in five; otherwise one or more of
    an argument of a middle call changed (concat's separator, or sleep given ms=), a new
    statement downstream (a count() reduce of a port), a leaf statement dropped (with its
    call), and sometimes a --rerun on top. force: "arg", "drop" (that part of an edit is
    drawn for sure) or "rerun" (--rerun alone), so that a short loop has each."""

    def __init__(self, rng, outputs, force=None, rerun=None):
        calls, stmts = list(CALLS), list(STMTS)
        self.base = render(calls, stmts, OUTPUTS if outputs else [])
        self.outputs = outputs
        self.rerun = []
        self.words = []  # the edit, in words (the summary, a failure's message)
        changed = set()  # calls whose arguments changed
        dropped = set()
        new = []
        self.pipeline = True
        if force == "rerun" or (force is None and rng.random() < 0.2):
            self.pipeline = False
            self.rerun = [rng.choice(["shaky", "up", "keep", "join", "ctx"])]
        else:
            arg, add, drop = rng.random() < 0.6, rng.random() < 0.5, rng.random() < 0.4
            arg, drop = arg or force == "arg", drop or force == "drop"
            if not (arg or add):
                arg = True
            if arg:
                which = rng.choice(["join", "nap"])
                changed.add(which)
                k = [c[0] for c in calls].index(which)
                if which == "join":
                    sep = rng.choice(["-", "|", ""])
                    calls[k] = (which, 'concat(sep="%s")' % sep, calls[k][2])
                    self.words.append('join sep "%s"' % sep)
                else:
                    ms = rng.choice([0, 1])
                    calls[k] = (which, "sleep(ms=%d)" % ms, calls[k][2])
                    self.words.append("nap ms=%d" % ms)
            if add:
                inp = rng.choice(["word.raw", "word.good", "word.ctx", "word.nap"])
                calls.append(("num2", "count()", "batch=4, retries=8"))
                new = [("doc.m", "reduce", "num2", inp)]
                stmts += new
                self.words.append("new doc.m = reduce count(%s)" % inp)
            if drop:
                leaves = [st for st in STMTS if st[0] in ("word.ctx", "doc.n", "doc.joined")
                          and st[2] not in changed and (not new or new[0][3] != st[0])]
                st = rng.choice(leaves)
                dropped.add(st[0])
                stmts.remove(st)
                calls = [c for c in calls if c[0] != st[2]]
                self.words.append("drop %s" % st[0])
            if rng.random() < 0.15:
                self.rerun = [rng.choice([st[2] for st in stmts if st[2] and st[0] != "doc.m"])]
        if rerun is not None and not self.rerun:
            self.rerun = [rerun]
        if self.rerun:
            self.words.append("--rerun %s" % self.rerun[0])
        self.text = render(calls, stmts, [o for o in OUTPUTS if o not in dropped]
                           if outputs else [])
        self.stmts = stmts
        self.dropped = sorted(dropped)
        self.new = [st[0] for st in new]
        # The ports it computes differently: those of a changed or rerun call, and what is
        # downstream of them: what reads them, and every port of the domain an expansion
        # among them makes (a port's fingerprint has its domain's expansion).
        anew = {st[0] for st in stmts if st[2] in changed or st[2] in self.rerun}
        grew = True
        while grew:
            made = {st[0].split(".")[0] for st in stmts if st[1] == "expand" and st[0] in anew}
            more = {st[0] for st in stmts
                    if st[3] in anew or st[0].split(".")[0] in made} - anew
            anew |= more
            grew = bool(more)
        self.anew = anew - set(self.new)
        self.ports = SOURCES + [st[0] for st in stmts]
        self.base_ports = SOURCES + [st[0] for st in STMTS]
        self.kept = [p for p in self.base_ports if p in self.ports]
        # The calls whose every port keeps its fingerprint: their grains take their twin's
        # result unless it cannot be had.
        self.same = {st[2]: st for st in stmts
                     if st[2] and st[0] not in anew and st[0] not in self.new}

    def describe(self):
        return "%s%s" % (", ".join(self.words), " (outputs)" if self.outputs else "")


def write_data(path, nlines, rng):
    """Lines of words that start with a digit (the ms that `sleep` waits); some lines have
    a double space (an empty word: dropped by the filter); one line is empty (zero
    children: concat gives "", count "0"). Keys that do not say their line (DESIGN §9,
    line_keys): one line twice (`L`, `L#2`), the text `M#2` before the line M twice (the
    second M gets `M#3`), and a line with a NUL byte (its key shows `\\0`); edit_data
    gives those keys to other lines."""
    seen = set()
    lines = []
    for i in range(nlines):
        while True:
            if i == nlines // 2:
                line = ""
            else:
                words = ["%d%s" % (rng.randint(0, 9),
                                   "".join(rng.choice("abcdefgh")
                                           for _ in range(rng.randint(0, 5))))
                         for _ in range(rng.randint(1, 12))]
                line = " ".join(words)
                if len(words) > 1 and rng.random() < 0.2:
                    k = line.index(" ")
                    line = line[:k] + " " + line[k:]  # "a  b": an empty word
            if line not in seen:
                break
        seen.add(line)
        lines.append(line)
    twice, thrice = (lines[k] for k in rng.sample([k for k, x in enumerate(lines) if x], 2))
    lines.insert(rng.randint(lines.index(twice) + 1, len(lines)), twice)
    at = lines.index(thrice)
    lines[at:at] = [thrice + "#2"]
    lines.insert(rng.randint(at + 2, len(lines)), thrice)
    lines.insert(rng.randint(0, len(lines)), "%dnul\0%s" % (rng.randint(0, 9),
                                                            rng.choice("abc")))
    write_lines(path, lines)


def random_line(rng):
    return " ".join("%d%s" % (rng.randint(0, 9),
                              "".join(rng.choice("abcdefgh") for _ in range(rng.randint(0, 5))))
                    for _ in range(rng.randint(1, 12)))


def line_keys(lines):
    """The root keys lines() gives (DESIGN §9): the line, each NUL byte shown as `\\0`;
    when an earlier line took that key, the first of `KEY#2`, `KEY#3` … not taken."""
    taken = set()
    keys = []
    for line in lines:
        base = line.replace("\0", "\\0")
        key, n = base, 1
        while key in taken:
            n += 1
            key = "%s#%d" % (base, n)
        taken.add(key)
        keys.append(key)
    return keys


def edit_data(lines, rng):
    """The edit of --update: about a tenth of the lines removed, a tenth changed (a word
    replaced: with lines() that is a removal and an addition), a sixth new ones inserted
    anywhere, two repeats of kept lines (one before its original: the key `LINE` stays
    with the content, wherever it is), sometimes a second empty line, a few lines moved."""
    # The lines whose keys do not say them (write_data) are set aside, edited below.
    special = [x for x in lines if "\0" in x or "#" in x or lines.count(x) > 1]
    out = [x for x in lines if x not in special]
    n = len(out)
    for _ in range(max(1, n // 10)):
        del out[rng.randrange(len(out))]
    taken = set(out)
    for _ in range(max(1, n // 10)):
        k = rng.randrange(len(out))
        words = out[k].split(" ")
        while True:
            w = list(words)
            w[rng.randrange(len(w))] = "%dz%s" % (rng.randint(0, 9), rng.choice("xyz"))
            if " ".join(w) not in taken:
                break
        out[k] = " ".join(w)
        taken.add(out[k])
    for _ in range(max(1, n // 6)):
        while True:
            line = random_line(rng)
            if line not in taken:
                break
        taken.add(line)
        out.insert(rng.randrange(len(out) + 1), line)
    for before in (True, False):
        src = rng.choice([k for k, line in enumerate(out) if line])
        at = rng.randint(0, src) if before else rng.randint(src + 1, len(out))
        out.insert(at, out[src])
    if rng.random() < 0.5:
        out.insert(rng.randrange(len(out) + 1), "")
    for _ in range(max(1, n // 20)):
        line = out.pop(rng.randrange(len(out)))
        out.insert(rng.randrange(len(out) + 1), line)
    # Keys that now stand for another line (the root is changed): the text `L#2` where
    # the second L was; the text `M#2` gone, so the second M takes `M#2` from it (and
    # `M#3` is removed); the NUL byte replaced by the text `\0`.
    at = 0
    for k, line in enumerate(special):
        if "\0" in line:
            line = line.replace("\0", "\\0")
        elif line.endswith("#2") and line[:-2] in special:
            continue
        elif line in special[:k] and line + "#2" not in special:
            line += "#2"
        at = rng.randint(at, len(out))
        out.insert(at, line)
        at += 1
    return out


def write_lines(path, lines):
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))


# files("files/*.txt"): a state of the directory is {name: (kind, bytes or None)}; kind
# "file" (a regular file) or "link" (a symlink into gone/, dangling when the bytes are
# None: unreadable, as a fresh run's read_file reports).
def file_states(rng):
    """The files before and after --update's edit: kept, changed (REWRITTEN, the one
    --rewrite-during-run writes to during the update), removed, new; readable files that
    become unreadable (a regular file replaced by a dangling symlink; a symlink whose
    target is deleted) and unreadable ones that become readable (a dangling symlink's
    target appears)."""
    def text():
        return ("".join("%d%s " % (rng.randint(0, 9), rng.choice(["ab", "cde", "f"]))
                        for _ in range(rng.randint(1, 6))) + "\n").encode()
    a = {"f%d.txt" % k: ("file", text()) for k in range(6)}
    a["f6.txt"] = ("link", None)
    a["f7.txt"] = ("link", text())
    b = dict(a)
    b[REWRITTEN] = ("file", a[REWRITTEN][1] + text())
    b["f2.txt"] = ("link", None)
    b["f7.txt"] = ("link", None)
    b["f6.txt"] = ("link", text())
    del b["f4.txt"]
    b["f8.txt"] = ("file", text())
    return a, b


REWRITTEN = "f1.txt"


def write_file(base, name, kind, data):
    """One file of a files/ state under base (its symlinks point into base/gone/)."""
    path = os.path.join(base, "files", name)
    target = os.path.join(base, "gone", name)
    if os.path.lexists(path) and (kind == "link") != os.path.islink(path):
        os.unlink(path)
    if kind == "file":
        with open(path, "wb") as f:
            f.write(data)
        return
    if not os.path.lexists(path):
        os.symlink(os.path.join("..", "gone", name), path)
    if data is None:
        if os.path.lexists(target):
            os.unlink(target)
    else:
        with open(target, "wb") as f:
            f.write(data)


def write_files(base, state):
    """base/files/ as state says (files not in it removed)."""
    os.makedirs(os.path.join(base, "files"), exist_ok=True)
    os.makedirs(os.path.join(base, "gone"), exist_ok=True)
    for name in os.listdir(os.path.join(base, "files")):
        if name not in state:
            os.unlink(os.path.join(base, "files", name))
    for name, (kind, data) in sorted(state.items()):
        write_file(base, name, kind, data)


def file_changes(a, b):
    """(added, changed, removed) keys of files() from state a to b: changed when what
    reads (the bytes, or None when unreadable) differs."""
    ka, kb = set(a), set(b)
    return ({"files/" + n for n in kb - ka},
            {"files/" + n for n in ka & kb if a[n][1] != b[n][1]},
            {"files/" + n for n in ka - kb})


def line_changes(a, b):
    """(added, changed, removed) keys of lines() from lines a to b: changed when a key
    kept stands for another line."""
    va, vb = dict(zip(line_keys(a), a)), dict(zip(line_keys(b), b))
    return (set(vb) - set(va), {k for k in set(va) & set(vb) if va[k] != vb[k]},
            set(va) - set(vb))
