"""The invariants checked after each kill and at each job's end, on snapshots of the
job's committed facts: (a) to (e) of the first run's checks (__main__.py's docstring)."""
import json

from common import Violation, connect, export, exports
from pipeline import OUTPUTS, PORTS


def snapshot(job, ports=PORTS):
    """Every fact of the job that must never change once committed, and the frontier.
    ports: those exported (--edit: the ports the job has before and after the edit)."""
    db = connect(job)
    try:
        ck = db.execute("PRAGMA quick_check").fetchone()[0]
        if ck != "ok":
            raise Violation("quick_check after a kill: %s" % ck)
        s = {
            "entity": {r[0]: r[1:] for r in db.execute(
                "SELECT id, domain_id, parent_id, ordinal, key FROM entity")},
            "expansion": {r[:2]: r[2:] for r in db.execute(
                "SELECT call_id, parent_id, state, nchildren FROM expansion")},
            "item": {r[:2]: r[2:] for r in db.execute(
                "SELECT port_id, entity_id, state, payload_id FROM item")},
            "grain": {r[0]: r[1:] for r in db.execute(
                "SELECT grain_id, call_id, entity_id, phase, generation, outcome FROM grains")},
            "attempt": {r[0]: r[1:] for r in db.execute(
                "SELECT id, grain_id, generation, worker_pid, batch, started_at, ended_at, "
                "outcome, message FROM attempt")},
            "failure": {r[0]: r[1:] for r in db.execute(
                "SELECT id, grain_id, kind, message, generation, at FROM failure")},
            "status": db.execute("SELECT status FROM job").fetchone()[0],
            "root": {r[0]: r[1:] for r in db.execute(
                "SELECT r.entity_id, r.domain_id, e.key, r.revision, r.admitted_at, "
                "r.retired_at, r.reason, r.position FROM root AS r "
                "JOIN entity AS e ON e.id = r.entity_id")},
            "job_update": {r[0]: r[1:] for r in db.execute(
                "SELECT id, started_at, scanned_at, finished_at, added, changed, removed, "
                "replanned, plan_id, rerun FROM job_update")},
            "plan": {r[0]: r[1:] for r in db.execute("SELECT id, hash, text, adopted_at FROM plan")},
            "plan_text": db.execute("SELECT plan_text FROM job").fetchone()[0],
            "domain": dict(db.execute("SELECT id, name FROM domain")),
            # The keys of every entity under a retired root: their export lines may leave.
            "retired_keys": {r[0] for r in db.execute(
                "WITH RECURSIVE gone (id) AS (SELECT entity_id FROM root "
                "WHERE retired_at IS NOT NULL UNION ALL SELECT e.id FROM entity AS e "
                "JOIN gone ON e.parent_id = gone.id) "
                "SELECT e.key FROM entity AS e JOIN gone USING (id)")},
        }
        live = {}
        for eid, r in s["root"].items():
            if r[4] is None:
                if (r[0], r[1]) in live:
                    raise Violation("key %r has two live roots (%d, %d)"
                                    % (r[1], live[(r[0], r[1])], eid))
                live[(r[0], r[1])] = eid
    finally:
        db.close()
    s["export"] = {}
    for p in ports:
        lines = export(job, p).decode().splitlines()
        keyed = {}
        for line in lines:
            key = json.loads(line)["key"]
            if key in keyed:
                raise Violation("export %s: key %r twice" % (p, key))
            keyed[key] = line
        s["export"][p] = keyed
    return s


def frontier_ok(s, when):
    """Open attempts are exactly one per IN_FLIGHT grain, at the grain's generation."""
    open_by_grain = {}
    for aid, a in s["attempt"].items():
        if a[6] is None:  # outcome
            if a[0] in open_by_grain:
                raise Violation("%s: grain %d has two open attempts" % (when, a[0]))
            open_by_grain[a[0]] = (aid, a[1])
    for gid, g in s["grain"].items():
        phase, gen = g[2], g[3]
        if phase == "in_flight":
            if gid not in open_by_grain:
                raise Violation("%s: grain %d is in flight without an open attempt"
                                % (when, gid))
            if open_by_grain[gid][1] != gen:
                raise Violation("%s: grain %d is in flight at generation %d, its open "
                                "attempt at %d" % (when, gid, gen, open_by_grain[gid][1]))
        elif gid in open_by_grain:
            raise Violation("%s: grain %d is %s with an open attempt" % (when, gid, phase))


def was_reclaimed(line, now):
    """Whether export line `now` is line's Present item with its payload reclaimed."""
    o = json.loads(line)
    return (o.get("state") == "present" and not o.get("reclaimed")
            and json.loads(now) == {"key": o["key"], "state": "present", "reclaimed": True})


def compare_roots(prev, cur, when, updating):
    """Check (e) between two snapshots, and that a job_update row only fills in."""
    for eid, r in prev["root"].items():
        c = cur["root"].get(eid)
        if c is None:
            raise Violation("%s: root %d (%r) vanished" % (when, eid, r[1]))
        if c[:4] != r[:4]:
            raise Violation("%s: root %d changed identity: %r -> %r" % (when, eid, r, c))
        if r[4] is not None and c[4:6] != r[4:6]:
            raise Violation("%s: retired root %d (%r) changed: %r -> %r"
                            % (when, eid, r[1], r, c))
        if not updating and c != r:
            raise Violation("%s: root %d changed outside an update: %r -> %r"
                            % (when, eid, r, c))
    for uid, u in prev["job_update"].items():
        c = cur["job_update"].get(uid)
        if c is None:
            raise Violation("%s: job_update %d vanished" % (when, uid))
        # (started_at, scanned_at, finished_at, added, changed, removed, replanned,
        # plan_id, rerun): the scan sets scanned_at, changed, removed and replanned once;
        # admission adds to added; then finished_at. plan_id and rerun are the row's from
        # its start.
        if c[0] != u[0] or c[3] < u[3] or c[7:] != u[7:] or \
                (u[1] is not None and (c[1], c[4], c[5], c[6]) != (u[1], u[4], u[5], u[6])) or \
                (u[2] is not None and c != u):
            raise Violation("%s: job_update %d changed: %r -> %r" % (when, uid, u, c))


def same_value(line, now):
    """--edit: whether two export lines of one key say the same, a reclaimed payload being
    the same as any present one (a step upstream of an edit recomputes what was reclaimed;
    the value is then reclaimed again, or not yet)."""
    a, b = json.loads(line), json.loads(now)
    if a == b:
        return True
    gone = {"key": a["key"], "state": "present", "reclaimed": True}
    return (a == gone and b.get("state") == "present") or \
        (b == gone and a.get("state") == "present")


def compare(prev, cur, when, updating=False, anew=None):
    """Checks (b) and (c) between two snapshots, and (e) with compare_roots. While updating,
    an export line may leave or change when its entity is under a root retired now
    (removed, or changed: its key's next revision is exported). anew (--edit):
    the ports the edit computes differently; the line of a key under a retired root then
    shows the new revision's value: it may change in those ports, in the others it says
    the same or is not there yet."""
    compare_roots(prev, cur, when, updating)
    for table in ("entity", "expansion", "item", "failure"):
        for k, v in prev[table].items():
            if k not in cur[table]:
                raise Violation("%s: %s %r vanished (was %r)" % (when, table, k, v))
            if cur[table][k] != v:
                raise Violation("%s: %s %r changed: %r -> %r"
                                % (when, table, k, v, cur[table][k]))
    for p, keyed in prev["export"].items():
        for key, line in keyed.items():
            now = cur["export"][p].get(key)
            # An intermediate payload may be freed once every grain that reads it sealed
            # (docs/operations.md "Reclamation"): the item stays Present, its value is then
            # said reclaimed. That is the one change a committed export line may make.
            if now is not None and now != line and was_reclaimed(line, now):
                continue
            if updating and key in cur["retired_keys"] and (now is None or anew is None):
                # Retired: removed (the line leaves), or changed (the key's next revision
                # is exported, its value computed anew).
                continue
            if anew is not None and key in cur["retired_keys"] and \
                    (p in anew or same_value(line, now)):
                continue
            if now != line:
                raise Violation("%s: export %s of %r changed:\n  %s\n  %s"
                                % (when, p, key, line, now))
    prev_open = set()
    for aid, a in prev["attempt"].items():
        c = cur["attempt"].get(aid)
        if c is None:
            raise Violation("%s: attempt %d vanished" % (when, aid))
        if a[6] is not None:
            if c != a:
                raise Violation("%s: closed attempt %d changed: %r -> %r" % (when, aid, a, c))
            continue
        prev_open.add(aid)
        if c[6] is None:  # still open: the resume died before it recovered the job
            g = cur["grain"][a[0]]
            if g[2] != "in_flight" or g[3] != a[1]:
                raise Violation("%s: attempt %d still open but its grain is %r"
                                % (when, aid, g))
        elif c[6] != "interrupted" or c[:5] != a[:5]:
            raise Violation("%s: attempt %d open at the kill ended as %r, not interrupted"
                            % (when, aid, c))
    for aid, c in cur["attempt"].items():
        if c[6] == "interrupted" and aid not in prev_open and not not_started(cur, aid) and \
                prev["attempt"].get(aid, (None,) * 7)[6] != "interrupted":
            raise Violation("%s: attempt %d became interrupted but was not open at the kill"
                            % (when, aid))
    new_by_grain = {}
    for aid, c in cur["attempt"].items():
        if aid not in prev["attempt"]:
            new_by_grain[c[0]] = new_by_grain.get(c[0], 0) + 1
    for gid, g in prev["grain"].items():
        c = cur["grain"].get(gid)
        if c is None:
            raise Violation("%s: grain %d vanished" % (when, gid))
        if c[:2] != g[:2]:
            raise Violation("%s: grain %d changed identity: %r -> %r" % (when, gid, g, c))
        if c[3] < g[3]:
            raise Violation("%s: grain %d generation went back: %r -> %r" % (when, gid, g, c))
        if g[2] == "sealed":
            if c != g:
                raise Violation("%s: sealed grain %d changed: %r -> %r" % (when, gid, g, c))
            if gid in new_by_grain:
                raise Violation("%s: grain %d was sealed at the kill and ran again (%d new "
                                "attempts)" % (when, gid, new_by_grain[gid]))
        elif g[2] == "in_flight":
            if not (c[3] > g[3] or (c[2] == "in_flight" and c[3] == g[3])):
                raise Violation("%s: grain %d was in flight at generation %d and is now %r"
                                % (when, gid, g[3], c))


def same_facts(job, prev, ports, when):
    """A snapshot of job now, which must have every fact of prev (a command that changes
    nothing: a refusal, a resume with nothing to do)."""
    cur = snapshot(job, ports)
    for k in ("entity", "expansion", "item", "grain", "attempt", "failure", "root",
              "job_update", "plan", "plan_text", "export"):
        if cur[k] != prev[k]:
            raise Violation("%s changed %s" % (when, k))
    return cur


def final_checks(job, cur, ref, when, ports=PORTS):
    """(a) and (d) at a job's end: finished, every grain sealed, every attempt closed, the
    database whole, and every port's export the reference's (ref: its exports by port)."""
    if cur["status"] != "finished":
        raise Violation("%s: job status %s" % (when, cur["status"]))
    for gid, g in cur["grain"].items():
        if g[2] != "sealed":
            raise Violation("%s: grain %d is %s" % (when, gid, g[2]))
    for aid, a in cur["attempt"].items():
        if a[6] is None:
            raise Violation("%s: attempt %d is still open" % (when, aid))
    db = connect(job)
    try:
        ck = db.execute("PRAGMA integrity_check").fetchall()
        fk = db.execute("PRAGMA foreign_key_check").fetchall()
        # Export shows the entities under live roots only (an update retires some).
        present = dict(db.execute(
            "WITH RECURSIVE live (id) AS (SELECT entity_id FROM root "
            "WHERE retired_at IS NULL UNION ALL SELECT e.id FROM entity AS e "
            "JOIN live ON e.parent_id = live.id) "
            "SELECT p.qualified, count(*) FROM item AS i JOIN port AS p "
            "ON p.id = i.port_id JOIN live ON live.id = i.entity_id "
            "WHERE i.state = 'present' GROUP BY p.qualified").fetchall())
    finally:
        db.close()
    if ck != [("ok",)]:
        raise Violation("%s: integrity_check: %r" % (when, ck[:5]))
    if fk:
        raise Violation("%s: foreign_key_check: %r" % (when, fk[:5]))
    got = exports(job, ports)
    for port in ports:
        n = sum(1 for line in got[port].decode().splitlines()
                if json.loads(line)["state"] == "present")
        if n != present.get(port, 0):
            raise Violation("%s: %s exports %d present values, the item table has %d"
                            % (when, port, n, present.get(port, 0)))
        if got[port] != ref[port]:
            a, b = ref[port].decode().splitlines(), got[port].decode().splitlines()
            diff = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]),
                        min(len(a), len(b)))
            raise Violation("%s: export %s%s differs from the reference at line %d:\n"
                            "  reference: %s\n  this job:  %s"
                            % (when, port, " (output)" if port in OUTPUTS else "",
                               diff + 1, a[diff] if diff < len(a) else "<end>",
                               b[diff] if diff < len(b) else "<end>"))


def not_started(cur, aid):
    """Whether attempt aid is of a batch that waited behind another on its worker (pool.h)
    when the worker was lost running that one: it never started, and ended `interrupted`,
    saying so, whatever the kills; the worker's batch ahead of it ended as a crash or a
    timeout."""
    grain, gen, pid, batch, _s, _e, outcome, message = cur["attempt"][aid]
    prefix = "not started: worker %d was lost while it ran the batch ahead of this one (" % pid
    return outcome == "interrupted" and (message or "").startswith(prefix) and any(
        v[2] == pid and v[3] < batch and v[6] in ("crash", "timeout")
        for v in cur["attempt"].values())


def interrupted_checks(cur, seen_open, when):
    """(d) at a job's end: its interrupted attempts are those open at the kills (seen_open),
    and those of batches that never started (not_started), each run again. Returns (the
    interrupted attempts open at the kills, how many of them ran again at a higher
    generation)."""
    queued = {a for a, v in cur["attempt"].items() if not_started(cur, a)}
    interrupted = {a for a, v in cur["attempt"].items() if v[6] == "interrupted"} - queued
    if interrupted != seen_open:
        raise Violation("%s: %d interrupted attempts, but %d were open at the kills "
                        "(extra %r, missing %r)"
                        % (when, len(interrupted), len(seen_open),
                           sorted(interrupted - seen_open)[:10],
                           sorted(seen_open - interrupted)[:10]))
    redone = 0
    # Each interrupted attempt's grain ran again at a higher generation (or was sealed
    # without running, which this pipeline never does).
    for aid in interrupted | queued:
        grain, gen = cur["attempt"][aid][0], cur["attempt"][aid][1]
        if any(v[0] == grain and v[1] > gen for v in cur["attempt"].values()):
            redone += aid in interrupted
        elif cur["grain"][grain][4] != "suppressed":
            raise Violation("%s: grain %d, interrupted at generation %d, never ran again "
                            "yet is sealed %s" % (when, grain, gen, cur["grain"][grain][4]))
    return interrupted, redone
