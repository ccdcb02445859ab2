"""--update: the checks of an update of the source killed and resumed ((e) to (g) of the
docstring of __main__.py), and what is shared with --edit: an update's job_update rows,
and whether the update was recorded at a kill."""
from common import Violation, connect, run
from invariants import snapshot
from pipeline import file_changes, line_changes, line_keys


def rows_since(base, cur):
    """cur's job_update rows made after the snapshot base, by id."""
    old = max(base["job_update"], default=0)
    return {u: r for u, r in cur["job_update"].items() if u > old}


def recorded(job, base):
    """0: no job_update row since base; 1: one, its rescan not committed (an `orch
    update` goes on with it); 2: the last one scanned (an `orch update` adds one)."""
    db = connect(job)
    try:
        r = db.execute("SELECT scanned_at IS NOT NULL FROM job_update WHERE id > ? "
                       "ORDER BY id DESC LIMIT 1",
                       (max(base["job_update"], default=0),)).fetchone()
        return 0 if r is None else 1 + r[0]
    finally:
        db.close()


def refused(job, prev, when):
    """`orch resume` of a job whose source changed and whose update was not recorded:
    refused, with a message naming `orch update`, and no fact changed (job.status
    and the stop columns do: they record why the last driver stopped)."""
    r = run(["resume", job, "--progress", "none"])
    err = r.stderr.decode(errors="replace")
    if r.returncode == 0 or "orch update" not in err:
        raise Violation("%s: resume of a changed source exited %d: %s"
                        % (when, r.returncode, err))
    cur = snapshot(job)
    for k in ("entity", "expansion", "item", "grain", "attempt", "failure", "root",
              "job_update", "export"):
        if cur[k] != prev[k]:
            raise Violation("%s: the refused resume changed %s" % (when, k))


def update_kill_checks(base, cur, when):
    """At a kill during an update: where it landed; the rescan's atomicity; (f)."""
    rows = rows_since(base, cur)
    if not any(r[1] is not None for r in rows.values()):
        # No rescan committed: the roots are as they were before the update.
        if cur["root"] != base["root"]:
            changed = [e for e in set(cur["root"]) | set(base["root"])
                       if cur["root"].get(e) != base["root"].get(e)]
            raise Violation("%s: no scan of the update is committed, yet root rows "
                            "changed: %r" % (when, [(base["root"].get(e), cur["root"].get(e))
                                                    for e in changed[:5]]))
    no_rerun(base, cur, when)
    if not rows:
        return "unrecorded"
    return "unscanned" if rows[max(rows)][1] is None else "scanned"


def no_rerun(base, cur, when):
    """(f): no new attempt of a grain under a root live before the update and now."""
    kept = {e for e, r in base["root"].items() if r[4] is None and cur["root"][e][4] is None}
    kids = {}
    for e, v in cur["entity"].items():
        kids.setdefault(v[1], []).append(e)
    under, stack = set(), list(kept)
    while stack:
        e = stack.pop()
        under.add(e)
        stack.extend(kids.get(e, ()))
    for aid, a in cur["attempt"].items():
        if aid in base["attempt"]:
            continue
        g = cur["grain"][a[0]]
        if g[1] in under:
            raise Violation("%s: attempt %d of grain %d (call %d, entity %d %r) ran under "
                            "a root the update did not change"
                            % (when, aid, a[0], g[0], g[1], cur["entity"][g[1]][3]))


def update_checks(src, base, cur, when, rewritten=False):
    """(f) and (g) at the end of an update of the sources from src[0] (lines, files
    state) to src[1]: per domain (doc: lines(), file: files()), the keys added, changed
    (retired for `changed`, admitted again) and removed. rewritten: a file was rewritten
    during the update (--rewrite-during-run), after its scan: an `orch update` started
    again then counts it changed once more."""
    no_rerun(base, cur, when)
    (lines0, files0), (lines1, files1) = src
    change = {"doc": line_changes(lines0, lines1), "file": file_changes(files0, files1)}
    keys = {"doc": line_keys(lines1), "file": ["files/" + n for n in sorted(files1)]}
    rows = rows_since(base, cur)
    if not rows:
        raise Violation("%s: no job_update row" % when)
    for u, r in sorted(rows.items()):
        if r[1] is None or r[2] is None:
            raise Violation("%s: job_update %d is not done: %r" % (when, u, r))
    sums = tuple(sum(r[k] for r in rows.values()) for k in (3, 4, 5))
    n = [sum(len(c[k]) for c in change.values()) for k in range(3)]
    again = sums[1] - n[1] if rewritten and len(rows) > 1 and sums[1] == n[1] + 1 else 0
    if sums != (n[0] + n[1] + again, n[1] + again, n[2]):
        raise Violation("%s: job_update rows %r count added, changed, removed %r; the "
                        "edit added %d keys, changed %d and removed %d"
                        % (when, sorted(rows.items()), sums, n[0], n[1], n[2]))
    dom = cur["domain"]
    for d, want in keys.items():
        live = sorted((r[6], r[1]) for r in cur["root"].values()
                      if r[4] is None and dom[r[0]] == d)
        if any(p is None for p, _ in live):
            raise Violation("%s: a live root without a position" % when)
        if [k for _, k in live] != want:
            raise Violation("%s: live %s roots in position order differ from the source's "
                            "keys:\n  %r\n  %r" % (when, d, [k for _, k in live], want))
    was = {(dom[r[0]], r[1]): e for e, r in base["root"].items() if r[4] is None}
    for e, r in cur["root"].items():
        k = (dom[r[0]], r[1])
        if r[4] is None and k in was and r[1] not in change[k[0]][1] and was[k] != e:
            raise Violation("%s: key %r kept, but its root is now entity %d (was %d)"
                            % (when, k, e, was[k]))
    retired = {(dom[r[0]], r[1]): r[5] for e, r in cur["root"].items()
               if r[4] is not None and base["root"].get(e, (None,) * 5)[4] is None}
    want = {(d, k): why for d, c in change.items()
            for why, ks in (("changed", c[1]), ("removed", c[2])) for k in ks}
    if retired != want:
        raise Violation("%s: the update retired %r; the keys changed or vanished are %r"
                        % (when, sorted(set(retired.items()) ^ set(want.items()))[:10],
                           sorted(want.items())[:10]))
