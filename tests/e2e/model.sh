#!/usr/bin/env bash
# model.sh — three levels (doc → page → word) with every rule at once, checked item by
# item against a reference model of DESIGN §3/§4 written in Python: 300 random documents
# (fixed seed) with empty pages, empty words (Dropped by a filter), words that fail
# (RecordFailure: their page's and doc's reduces are Suppressed), documents that fail
# before their expansion (Failed expansion: doc reduces Suppressed) and empty documents
# (Dropped expansion: doc reduces Dropped). Batches, parents mixed or not, 2 workers and
# a tight admission budget let the scheduler interleave everything; the result may not
# depend on it.
source "$(dirname "$0")/lib.sh"

python3 - "$T/docs.txt" <<'EOF'
import random, sys
rnd = random.Random(20261129)
letters = "abcdefghijklmnoprstuvwxyz"  # no q: a q is put in on purpose
def word():
    r = rnd.random()
    if r < 0.08: return ""                       # an empty word: Dropped by the filter
    w = "".join(rnd.choice(letters) for _ in range(rnd.randint(1, 5)))
    return w + "q" if r > 0.985 else w          # a q: a RecordFailure
def page():
    if rnd.random() < 0.07: return ""            # an empty page: zero words
    return " ".join(word() for _ in range(rnd.randint(1, 7)))
with open(sys.argv[1], "w") as f:
    for i in range(300):
        r = rnd.random()
        if r < 0.04: line = ""                   # Dropped expansion
        else: line = "|".join(page() for _ in range(rnd.randint(1, 5)))
        if 0.04 <= r < 0.07: line += "X"         # Failed before its expansion
        f.write(line + "\n")
EOF
cat > "$T/model.orch" <<'EOF'
pipeline model
domain doc
domain page in doc
domain word in page
source doc.line = lines("docs.txt")
call chk  = fail_if(contains="X", kind=record)   with batch=4
call keepd = nonempty()
call pg   = split(sep="|")                        with batch=3
call wd   = split(sep=" ")                        with workers=2, batch=5, reserve=parent
call up   = upper()                               with workers=2, batch=16
call rec  = fail_if(contains="Q", kind=record)   with batch=7
call keep = nonempty()                            with batch=32, reserve=parent
call wj   = concat(sep=" ")                       with batch=4
call pj   = concat(sep="|")
call pn   = count()                               with batch=8
doc.chk   = chk(doc.line)
doc.kept  = filter keepd(doc.chk)
page.raw  = expand pg(doc.kept)
word.raw  = expand wd(page.raw)
word.up   = up(word.raw)
word.r    = rec(word.up)
word.k    = filter keep(word.r)
word.doc  = broadcast doc.line
page.text = reduce wj(word.k)
doc.text  = reduce pj(page.text)
doc.n     = reduce pn(page.text)
EOF
J=$T/job
run_job "$T/model.orch" "$J" --max-unsealed 500
job_done "$J"
for p in doc.text doc.n page.text word.k word.doc; do
  "$ORCH" export "$J" $p --all > "$T/$p.jsonl"
done

python3 - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
def split(s, sep):
    if s == "": return []
    parts = s.split(sep)
    return parts[:-1] if s.endswith(sep) else parts
E = {p: [] for p in ("doc.text", "doc.n", "page.text", "word.k", "word.doc")}
def item(port, key, state, value=None):
    E[port].append((key, state, value))
taken = set()
def root_key(v):  # DESIGN §9: a repeated line gets #2, #3, ...
    k, n = v, 1
    while k in taken:
        n += 1; k = "%s#%d" % (v, n)
    taken.add(k)
    return k
for line in open(T + "/docs.txt").read().split("\n")[:-1]:
    k = root_key(line)
    if "X" in line:          # chk Failed → kept Suppressed → expansion Failed
        item("doc.text", k, "suppressed"); item("doc.n", k, "suppressed"); continue
    if line == "":           # kept Dropped → expansion Dropped
        item("doc.text", k, "dropped"); item("doc.n", k, "dropped"); continue
    texts, bad = [], False
    for p, page in enumerate(split(line, "|")):
        pkey = "%s/%d" % (k, p)
        vals, pbad = [], False
        for w, word in enumerate(split(page, " ")):
            wkey = "%s/%d" % (pkey, w)
            item("word.doc", wkey, "present", line)
            up = word.upper()
            if "Q" in up: item("word.k", wkey, "suppressed"); pbad = True
            elif up == "": item("word.k", wkey, "dropped")
            else: item("word.k", wkey, "present", up); vals.append(up)
        if pbad: item("page.text", pkey, "suppressed"); bad = True
        else: item("page.text", pkey, "present", " ".join(vals)); texts.append(" ".join(vals))
    if bad: item("doc.text", k, "suppressed"); item("doc.n", k, "suppressed")
    else:
        item("doc.text", k, "present", "|".join(texts))
        item("doc.n", k, "present", str(len(texts)))
bad = 0
for port, want in E.items():
    got = []
    for l in open("%s/%s.jsonl" % (T, port)):
        o = json.loads(l)
        got.append((o["key"], o["state"], o.get("value")))
    if got != want:
        bad += 1
        print("FAIL: %s: %d items, expected %d" % (port, len(got), len(want)), file=sys.stderr)
        for g, w in zip(got, want):
            if g != w:
                print("  first difference: got %r, expected %r" % (g, w), file=sys.stderr)
                break
    else:
        hist = {}
        for g in got: hist[g[1]] = hist.get(g[1], 0) + 1
        print("%s: %d items as the model says %s" % (port, len(got), sorted(hist.items())))
sys.exit(1 if bad else 0)
EOF
echo "model: ok"
