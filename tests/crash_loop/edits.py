"""--edit: the checks of an edit of the pipeline killed and resumed ((a) to (d) of the
--edit part of the docstring of __main__.py): where a kill landed, the update's row at its
end, the rule of carrying, and the commands that must change nothing."""
from common import Violation, connect, run
from pipeline import OUTPUTS
from invariants import same_facts
from updates import rows_since


def noop(job, prev, ports, when):
    """`orch resume` of a job killed before its edit was recorded: the job is finished,
    with its plan; the resume exits 0 and changes no fact (the user runs `orch update DIR
    EDITED` again: the loop does)."""
    r = run(["resume", job, "--progress", "none"])
    if r.returncode != 0:
        raise Violation("%s exited %d: %s" % (when, r.returncode,
                                              r.stderr.decode(errors="replace")))
    cur = same_facts(job, prev, ports, when)
    if cur["status"] != "finished":
        raise Violation("%s left the job %s" % (when, cur["status"]))


def dropped_checks(job, e, when):
    """At the edit's end: export of a port the edit dropped fails, saying so."""
    for port in e.dropped:
        r = run(["export", job, port, "--all"])
        if r.returncode == 0 or b"left the pipeline" not in r.stderr:
            raise Violation("%s: export of %s, which the edit dropped, exited %d: %s"
                            % (when, port, r.returncode, r.stderr.decode(errors="replace")))


def edit_kill_checks(e, base, cur, when):
    """--edit, at a kill during the edit's update (and at its end): the edit's plan
    and its job_update row are one transaction; the rescan that marks every root for
    the plan is another; each root is retired in the transaction that admits its next
    revision. Returns where the kill landed."""
    rows = rows_since(base, cur)
    if not rows:
        if cur["plan"] != base["plan"] or cur["plan_text"] != base["plan_text"]:
            raise Violation("%s: no job_update row for the edit, yet the plan changed"
                            % when)
        return "unrecorded"
    if len(rows) != 1:
        raise Violation("%s: %d job_update rows for one edit: %r"
                        % (when, len(rows), sorted(rows.items())))
    (uid, r), = rows.items()
    plan_id = r[7]
    if plan_id is None or plan_id not in cur["plan"] or \
            cur["plan"][plan_id][1] != cur["plan_text"]:
        raise Violation("%s: job_update %d has plan_id %r; the job's plan is not it"
                        % (when, uid, plan_id))
    if set(cur["plan"]) - set(base["plan"]) not in (set(), {plan_id}):
        raise Violation("%s: plans adopted during the edit: %r, job_update says %r"
                        % (when, sorted(set(cur["plan"]) - set(base["plan"])), plan_id))
    if (r[8] or "") != ",".join(e.rerun):
        raise Violation("%s: job_update %d has rerun %r, the update gave %r"
                        % (when, uid, r[8], e.rerun))
    if r[1] is None:
        return "unscanned"
    # Each root live before the edit stays live until the transaction that admits its
    # next revision, which retires it for the plan: at one time, the key never without a
    # live revision.
    live = {ei for ei, x in base["root"].items() if x[4] is None}
    now = {ei: x for ei, x in cur["root"].items() if x[4] is None}
    new = {(x[0], x[1]): x for ei, x in now.items() if ei not in live}
    for ei in live:
        x = cur["root"][ei]
        if x[4] is None:
            continue
        succ = new.get((x[0], x[1]))
        if x[5] != "plan" or succ is None or succ[2] != x[2] + 1 or succ[3] != x[4]:
            raise Violation("%s: root %r, live before the edit, is retired (%r) without its "
                            "next revision admitted in the same transaction (%r)"
                            % (when, x[1], x[5], succ))
    if r[6] != len(live) or r[3] != len(new) or r[3] > r[6] or r[4:6] != (0, 0) or \
            len(now) != len(live):
        raise Violation("%s: job_update %d counts added %d, changed %d, removed %d, "
                        "replanned %d; %d roots were live before it, %d are now, %d of "
                        "them new" % (when, uid, r[3], r[4], r[5], r[6], len(live), len(now),
                                      len(new)))
    was = {(x[0], x[1]): x[2] for ei, x in base["root"].items() if ei in live}
    for x in new.values():
        if was.get((x[0], x[1])) != x[2] - 1:
            raise Violation("%s: live root %r is not the next revision of a root live "
                            "before the edit" % (when, x))
    return "scanned"


def edit_end_checks(base, cur, when):
    """(d) at the end of the edit's update: its one job_update row is scanned and
    finished, with the plan, and replanned every root that was live before; the live
    roots are the same keys, in the same order, each the next revision."""
    rows = rows_since(base, cur)
    (uid, r), = rows.items()
    if r[1] is None or r[2] is None:
        raise Violation("%s: job_update %d not done: %r" % (when, uid, r))
    if max(cur["plan"]) != r[7]:
        raise Violation("%s: job_update %d has plan_id %r, the last plan is %d"
                        % (when, uid, r[7], max(cur["plan"])))
    live = sorted((x[6], x[1]) for x in base["root"].values() if x[4] is None)
    now = sorted((x[6], x[1]) for x in cur["root"].values() if x[4] is None)
    if [k for _, k in live] != [k for _, k in now] or r[3] != len(live):
        raise Violation("%s: the live roots after the edit are not those before it "
                        "(%d before, %d now, %d added)" % (when, len(live), len(now), r[3]))


def family(stmts, port):
    """The port whose payload ids port names: up through filters and broadcasts."""
    by_port = {st[0]: st for st in stmts}
    while port in by_port and by_port[port][1] in ("filter", "broadcast"):
        port = by_port[port][3]
    return port


def demand(e, cur, port_id, olds, reclaimed):
    """The calls the edit left as they were whose outputs' bytes no grain that may run
    reads (engine/update/carry.c): a twin's reclaimed result is handed on. What a fresh
    run keeps is needed (the outputs' families, everything without outputs); what a call
    that may run reads is needed; a call left as it was whose needed outputs were
    reclaimed in the revisions replaced may run. The reclaimed ids are those at the end
    of the update, a superset of those any start of it saw: the needed set is the
    largest a start could have found."""
    stmts = e.stmts
    outputs = [o for o in OUTPUTS if o not in e.dropped] if e.outputs else []
    need = {family(stmts, o) for o in outputs} if outputs else \
        {family(stmts, p) for p in e.ports}
    runs = {st[2] for st in stmts if st[2] and st[2] not in e.same}

    def gone(port):
        return any(it[0] == "present" and it[1] in reclaimed
                   for (pid, ei), it in cur["item"].items()
                   if pid == port_id[port] and ei in olds)
    grew = True
    while grew:
        grew = False
        for st in stmts:
            if st[2] in runs and family(stmts, st[3]) not in need:
                need.add(family(stmts, st[3]))
                grew = True
        for st in stmts:
            if st[2] in e.same and st[2] not in runs and st[1] not in ("filter",) and \
                    st[0] in need and gone(st[0]):
                runs.add(st[2])
                grew = True
    return {st[2] for st in stmts if st[2] in e.same and family(stmts, st[0]) not in need}


class Carrying:
    """(c), the rule of carrying, over one edit's update: the grains a resume found READY
    (exempt), and the counts of the summary."""

    def __init__(self):
        self.exempt = set()          # grains READY or in flight at a kill of the update
        self.carried = self.ran_found = self.ran_anew = 0
        self.ran_twin = {}           # grains of unchanged calls run, by why not carried

    def begin(self):
        """A new edit's update: no grain found READY yet."""
        self.exempt = set()

    def at_kill(self, cur):
        """What a resume finds READY (in flight: READY again at recovery) it runs rather
        than carries."""
        self.exempt |= {g for g, v in cur["grain"].items() if v[2] in ("ready", "in_flight")}

    def check(self, job, e, base, cur, when):
        """(c): no attempt during the edit's update for a grain of a call whose ports all
        keep their fingerprints (Edit.same) and whose twin (same call, same key, the
        previous revision) was sealed OK or Dropped with its outputs Present (every
        child's, for an expansion) and their bytes still there or needed by nothing that
        may run (demand) -- unless a resume found it READY: it was READY or in flight
        (then made READY again) at a kill of the update."""
        db = connect(job)
        try:
            call_id = dict(db.execute("SELECT name, id FROM call"))
            port_id = dict(db.execute("SELECT qualified, id FROM port"))
            word = db.execute("SELECT id FROM domain WHERE name = 'word'").fetchone()[0]
            reclaimed = {x[0] for x in db.execute("SELECT payload_id FROM reclaimed")}
        finally:
            db.close()
        ent = cur["entity"]
        kids = {}
        for ei, v in ent.items():
            kids.setdefault(v[1], []).append(ei)

        def root_of(ei):
            while ent[ei][1] is not None:
                ei = ent[ei][1]
            return ei
        old_roots = {ei for ei, x in base["root"].items() if x[4] is None}
        twin = {}
        olds = set()
        for ei, v in ent.items():
            if root_of(ei) in old_roots:
                twin[(v[0], v[3])] = ei
                olds.add(ei)
        grain_of = {(g[0], g[1]): gid for gid, g in cur["grain"].items()}
        same = {call_id[c]: st for c, st in e.same.items()}

        bare = demand(e, cur, port_id, olds, reclaimed)

        def there(port, ei, call):
            """The twin's item of port on ei can be handed on: Present, and its bytes
            still there unless nothing that may run reads them (bare)."""
            it = cur["item"].get((port_id[port], ei))
            return it is not None and it[0] == "present" and (
                call in bare or it[1] not in reclaimed)

        def why_not(st, t):
            """None when the twin t's answer can be handed on; else why not."""
            tg = grain_of.get((call_id[st[2]], t))
            if tg is None:
                return "twin without a grain"
            out = cur["grain"][tg][4]
            if out not in ("ok", "dropped"):
                return "twin %s" % out
            if st[1] == "filter" or out == "dropped":
                return None
            if st[1] == "expand":
                gone = [k for k in kids.get(t, ())
                        if ent[k][0] == word and not there(st[0], k, st[2])]
                return "a twin child's item reclaimed, and needed" if gone else None
            return None if there(st[0], t, st[2]) else "twin's item reclaimed, and needed"
        ran = {}
        for aid, a in cur["attempt"].items():
            if aid not in base["attempt"]:
                ran.setdefault(a[0], []).append(aid)
        for gid, g in cur["grain"].items():
            if g[0] not in same or g[1] in olds:
                continue
            t = twin.get((ent[g[1]][0], ent[g[1]][3]))
            if gid not in ran:
                self.carried += g[3] == 0 and g[2] == "sealed" and g[4] != "suppressed"
                continue
            if gid in self.exempt:
                self.ran_found += 1
                continue
            why = why_not(same[g[0]], t) if t is not None else "no twin"
            if why is None:
                raise Violation("%s: grain %d (call %s, key %r) ran (attempts %r) though its "
                                "call computes what it did and its twin %d's result was "
                                "there to take over, and no resume found it READY"
                                % (when, gid, same[g[0]][2], ent[g[1]][3], ran[gid], t))
            self.ran_twin[why] = self.ran_twin.get(why, 0) + 1
        self.ran_anew += sum(1 for gid in ran if cur["grain"][gid][0] not in same)
        if not e.outputs and reclaimed:
            raise Violation("%s: a pipeline without outputs reclaimed %d payloads"
                            % (when, len(reclaimed)))
