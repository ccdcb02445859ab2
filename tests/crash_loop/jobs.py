"""Job driving: the Loop makes jobs, runs each (`orch run`, then for --update and --edit
`orch update`), kills each start at a Moment (kills.py) and resumes it until a start runs
to its end, and checks each kill's snapshot and each job's end (invariants.py, and
updates.py or edits.py). It keeps the counts of the summary."""
import os
import random
import shutil
import sqlite3
import subprocess
import threading
import time

import edits
import updates
from common import ORCH, VERBOSE, Violation, connect, export, job_row_exists, log, run
from invariants import (compare, final_checks, frontier_ok, interrupted_checks, same_facts,
                        snapshot)
from kills import Moment, strike, watched
from pipeline import PORTS, REWRITTEN, Edit, write_file, write_files, write_lines
from procs import Opened, wait_gone


class Rewriter(threading.Thread):
    """Writes data to REWRITTEN under work once: after delay seconds, or (delay None) the
    moment the update's rescan has committed (a job_update row after the snapshot base
    has scanned_at: the scan has hashed the file, read_file is still to come). fired: it
    wrote. cancel(): it no longer writes."""

    def __init__(self, work, job, base, kind, data, delay):
        super().__init__(daemon=True)
        self.work, self.job, self.kind, self.data, self.delay = work, job, kind, data, delay
        self.last = max(base["job_update"], default=0)
        self.fired = False
        self.stop = threading.Event()
        self.start()

    def scanned(self):
        if not os.path.exists(os.path.join(self.job, "state.db")):
            return False
        try:
            db = connect(self.job)
            try:
                return db.execute("SELECT count(*) FROM job_update WHERE id > ? AND "
                                  "scanned_at IS NOT NULL", (self.last,)).fetchone()[0] > 0
            finally:
                db.close()
        except sqlite3.Error:
            return False

    def run(self):
        t0 = time.monotonic()
        while not self.stop.is_set():
            if not (self.scanned() if self.delay is None else
                    time.monotonic() - t0 >= self.delay):
                self.stop.wait(0.001)
                continue
            write_file(self.work, REWRITTEN, self.kind, self.data)
            self.fired = True
            return

    def cancel(self):
        self.stop.set()
        self.join()


def startup(job, t0):
    """The seconds from t0 (time.time() as `orch run` of job started) to its first
    attempt: what a driver's start costs on this machine now."""
    db = connect(job)
    try:
        first = db.execute("SELECT min(started_at) FROM attempt").fetchone()[0]
    finally:
        db.close()
    return max(0.0, first / 1000.0 - t0) if first is not None else 0.0


class Loop:
    def __init__(self, kills, seed, work, update=None, edit=False, rewrite=False):
        self.kills_wanted = kills
        self.rng = random.Random(seed)
        self.work = work
        # --update: ((lines, files), (lines, files)): work/in.txt and work/files/ before
        # and after the edit of the sources.
        self.update = update
        # --rewrite-during-run: REWRITTEN is rewritten at a random moment of the update.
        self.rewrite = rewrite
        self.rewrites = 0
        self.files = None            # --edit --rewrite-during-run: the files/ state
        # --edit: the job's Edit; its pipelines' paths; the references by pipeline text.
        self.edit = edit
        self.job_edit = None
        self.pipeline = os.path.join(work, "p.orch")
        self.edited = None
        self.refs = {}
        self.bases = {}              # a finished first run's copy, by pipeline text
        self.edits = []              # each job's edit, described
        self.carrying = edits.Carrying()
        self.noops = 0               # plain resumes after a kill before the edit was recorded
        self.under_way = 0           # `orch update DIR EDITED` refused: the edit under way
        self.restarts = 0            # `orch update` started again after a kill
        self.expect_refusal = False  # that start must be refused (the edit is under way)
        self.max_delay = int(os.environ.get("CRASH_LOOP_MAX_DELAY_MS", "300"))
        self.startup = 0.0           # seconds from a run's start to its first attempt
        self.kills = self.worker_kills = self.resumes = self.jobs = 0
        self.open_at_kills = 0       # attempts open at the kills (distinct)
        self.inflight_at_kills = 0   # grains in flight at the kills (sum)
        self.interrupted = 0
        self.redone = 0
        self.max_inflight = 0
        # --update: the kills during updates, by what the update had committed then.
        self.update_kills = 0
        self.landed = {"unrecorded": 0, "unscanned": 0, "scanned": 0}
        self.refusals = 0            # resumes refused (the update was not recorded)
        self.updates = 0             # `orch update` starts
        self.watch = None            # an Opened, for a kill at the source's opening

    def start(self, job, cmd):
        update = ["update", job]
        if self.job_edit is not None:
            update += ([self.edited] if self.job_edit.pipeline else []) + \
                [a for c in self.job_edit.rerun for a in ("--rerun", c)]
        args = {"run": ["run", self.pipeline, "--job", job],
                "resume": ["resume", job], "update": update}[cmd]
        errf = open("%s.%s%d.log" % (job, cmd, self.resumes), "wb")
        # Both durability modes must survive a process crash; a small admission budget
        # makes a resume continue the admission of roots where it stopped.
        args += ["--durability", self.rng.choice(["machine", "process"])]
        args += self.rng.choice([[], ["--max-unsealed", "60"], ["--max-unsealed", "300"]])
        p = subprocess.Popen([ORCH] + args + ["--progress", "none"],
                             stdout=subprocess.DEVNULL, stderr=errf)
        errf.close()
        return p, errf.name

    def one_job(self, ref, ref_update):
        if self.edit:
            return self.one_edit_job()
        self.jobs += 1
        job = os.path.join(self.work, "job%d" % self.jobs)
        src = os.path.join(self.work, "in.txt")
        seen_open = set()
        if self.update:
            write_lines(src, self.update[0][0])
            write_files(self.work, self.update[0][1])
            # The first run: to its end, now and then through a few kills of its own.
            budget = self.rng.choice([0, 0, 0, 1, 2])
        else:
            budget = self.kills_wanted - self.kills
        prev = self.cycle(job, "run", budget, None, None, seen_open)
        when = "job%d end" % self.jobs
        cur = snapshot(job)
        if prev is not None:
            compare(prev, cur, when)
        final_checks(job, cur, ref, when)
        if self.update:
            base = cur
            write_lines(src, self.update[1][0])
            write_files(self.work, self.update[1][1])
            # A few kills per update, so that more updates start (and have their first
            # start killed early).
            budget = min(self.kills_wanted - self.update_kills, self.rng.randint(1, 6))
            rewrite = self.rewriter(job, base) if self.rewrite else None
            try:
                prev = self.cycle(job, "update", budget, base, base, seen_open)
            finally:
                if rewrite is not None:
                    rewrite.cancel()
            when = "job%d update end" % self.jobs
            cur = snapshot(job)
            compare(prev, cur, when, updating=True)
            updates.update_checks(self.update, base, cur, when,
                                  rewrite is not None and rewrite.fired)
            if rewrite is not None and rewrite.fired:
                # The file's bytes back as the edit has them; an update takes what the
                # update's read_file may have read instead.
                self.rewrites += 1
                kind, data = self.update[1][1][REWRITTEN]
                write_file(self.work, REWRITTEN, kind, data)
                r = run(["update", job, "--progress", "none"])
                if r.returncode != 0:
                    raise Violation("%s: the update after the rewrite exited %d: %s"
                                    % (when, r.returncode, r.stderr.decode(errors="replace")))
                prev, cur = cur, snapshot(job)
                when = "job%d update after the rewrite of files/%s %s" % (
                    self.jobs, REWRITTEN, "once the rescan committed" if rewrite.delay is None
                    else "%.0f ms after the update's start" % (rewrite.delay * 1000))
                compare(prev, cur, when, updating=True)
            final_checks(job, cur, ref_update, when)
        self.end_job(job, cur, seen_open, when)

    def rewriter(self, job, base):
        """--rewrite-during-run: a Rewriter of REWRITTEN, the moment the update's rescan
        has committed or, one time in three, at a random moment up to twice
        CRASH_LOOP_MAX_DELAY_MS after now."""
        kind, data = self.update[1][1][REWRITTEN]
        delay = None if self.rng.random() < 2 / 3 else \
            self.rng.uniform(0, 2 * self.max_delay) / 1000.0
        return Rewriter(self.work, job, base, kind, data + b"9rewritten during the run\n",
                        delay)

    def end_job(self, job, cur, seen_open, when):
        """At a job's end: its interrupted attempts are those open at the kills, each run
        again; the job directory is removed."""
        interrupted, redone = interrupted_checks(cur, seen_open, when)
        self.interrupted += len(interrupted)
        self.open_at_kills += len(seen_open)
        self.redone += redone
        shutil.rmtree(job)

    def reference(self, text, ports):
        """--edit: the exports of ports by a fresh uninterrupted `orch run` of pipeline
        text over work/in.txt (one run per text)."""
        if text not in self.refs:
            n = len(self.refs) + 1
            path = os.path.join(self.work, "ref%d.orch" % n)
            with open(path, "w") as f:
                f.write(text)
            ref_job = os.path.join(self.work, "ref%d" % n)
            t0 = time.time()
            r = run(["run", path, "--job", ref_job, "--progress", "none"])
            if r.returncode != 0:
                raise Violation("the reference run of %s exited %d: %s"
                                % (path, r.returncode, r.stderr.decode(errors="replace")))
            self.refs[text] = (ref_job, {})
            if n == 1:
                self.startup = startup(ref_job, t0)
        ref_job, got = self.refs[text]
        for port in ports:
            if port not in got:
                got[port] = export(ref_job, port)
        return got

    def one_edit_job(self):
        """--edit: a job's first run to its end, then `orch update DIR EDITED` killed and
        resumed; checks (a) to (d) of --edit at the end."""
        self.jobs += 1
        job = os.path.join(self.work, "job%d" % self.jobs)
        # The second job declares the outputs (its intermediates are reclaimed); the
        # first does not; the others one time in five. The first changes an argument, the
        # third drops a statement, the fourth is a --rerun alone; the others are drawn.
        # --rewrite-during-run: every second job reruns read_file, which then reads the
        # file rewritten during the edit's update.
        e = Edit(self.rng, self.jobs == 2 or (self.jobs > 2 and self.rng.random() < 0.2),
                 {1: "arg", 3: "drop", 4: "rerun"}.get(self.jobs),
                 "rd" if self.rewrite and self.jobs % 2 == 0 else None)
        self.edits.append(e.describe())
        self.job_edit = None
        self.pipeline = os.path.join(self.work, "p%d.orch" % self.jobs)
        self.edited = os.path.join(self.work, "e%d.orch" % self.jobs)
        for path, text in ((self.pipeline, e.base), (self.edited, e.text)):
            with open(path, "w") as f:
                f.write(text)
        seen_open = set()
        if e.base in self.bases:
            # The first run of this pipeline over the same source is done: a copy of it
            # (its run is the same; the loop's time goes to the edits), with the attempts
            # that were open at its kills.
            shutil.copytree(self.bases[e.base][0], job)
            seen_open = set(self.bases[e.base][1])
        else:
            prev = self.cycle(job, "run", self.rng.choice([0, 0, 1]), None, None, seen_open,
                              e.base_ports)
            when = "job%d end" % self.jobs
            cur = snapshot(job, e.base_ports)
            if prev is not None:
                compare(prev, cur, when)
            final_checks(job, cur, self.reference(e.base, e.base_ports), when, e.base_ports)
            self.bases[e.base] = (os.path.join(self.work, "base%d" % (len(self.bases) + 1)),
                                  set(seen_open))
            shutil.copytree(job, self.bases[e.base][0])
        # The ports exported across the edit's kills: those the job has before and after.
        base = snapshot(job, e.kept)
        self.job_edit = e
        self.carrying.begin()
        budget = min(self.kills_wanted - self.update_kills, self.rng.randint(1, 3))
        # --rewrite-during-run: REWRITTEN is written with other bytes the moment the
        # edit's rescan has committed (the edit sees the file as it was; a read_file that
        # runs after, because its bytes were reclaimed or --rerun, reads the new ones).
        rewrite = Rewriter(self.work, job, base, "file",
                           self.files[REWRITTEN][1] + b"9rewritten during the edit\n",
                           None) if self.rewrite else None
        try:
            prev = self.cycle(job, "update", budget, base, base, seen_open, e.kept)
        finally:
            if rewrite is not None:
                rewrite.cancel()
        when = "job%d edit end (%s)" % (self.jobs, e.describe())
        cur = snapshot(job, e.kept)
        compare(prev, cur, when, True, e.anew)
        fired = rewrite is not None and rewrite.fired
        if not fired:
            final_checks(job, cur, self.reference(e.text, e.ports), when, e.ports)
        edits.dropped_checks(job, e, when)
        edits.edit_kill_checks(e, base, cur, when)
        edits.edit_end_checks(base, cur, when)
        self.carrying.check(job, e, base, cur, when)
        if fired:
            # The file's bytes back; an update takes what a read_file of the edit's update
            # may have read instead, and the exports are the edited pipeline's over the
            # sources as they are.
            self.rewrites += 1
            kind, data = self.files[REWRITTEN]
            write_file(self.work, REWRITTEN, kind, data)
            r = run(["update", job, "--progress", "none"])
            if r.returncode != 0:
                raise Violation("%s: the update after the rewrite exited %d: %s"
                                % (when, r.returncode, r.stderr.decode(errors="replace")))
            prev, cur = cur, snapshot(job, e.kept)
            when += ", then the update after the rewrite of files/%s" % REWRITTEN
            compare(prev, cur, when, updating=True)
            final_checks(job, cur, self.reference(e.text, e.ports), when, e.ports)
        self.job_edit = None
        self.end_job(job, cur, seen_open, when)

    def cycle(self, job, cmd, budget, prev, base, seen_open, ports=PORTS):
        """Starts `orch CMD` on job, kills it (budget kills at most), resumes it, until a
        start runs to its end; checks each kill's snapshot against the one before. base:
        the snapshot before an update (None outside one). ports: those the snapshots
        export. Returns the last snapshot."""
        try:
            return self._cycle(job, cmd, budget, prev, base, seen_open, ports)
        finally:
            self.unwatch()

    def unwatch(self):
        if self.watch is not None:
            self.watch.close()
            self.watch = None

    def _cycle(self, job, cmd, budget, prev, base, seen_open, ports):
        updating = base is not None
        phase = "update" if updating else "job"
        anew = self.job_edit.anew if self.job_edit is not None and updating else None
        done = 0
        first = True
        r = None
        while True:
            if updating and cmd == "resume" and updates.recorded(job, base) == 0:
                # Killed before the update was recorded: the job is as before it, its
                # source changed; a resume refuses. The update is then started again.
                # --edit: the job is as before the edit, finished; a resume has nothing
                # to do (and does nothing); the edit is then started again.
                if self.edit:
                    edits.noop(job, prev, ports, "job%d edit, a resume" % self.jobs)
                    self.noops += 1
                else:
                    updates.refused(job, prev, "job%d %s refusal" % (self.jobs, phase))
                    self.refusals += 1
                cmd = "update"
            if cmd != "update":
                self.expect_refusal = False
            self.unwatch()
            if updating:
                # Drawn before the start: a kill at the source's opening needs the watch in
                # place before the process runs.
                # The update's first start, the one whose kill can come before the update
                # is recorded, has the early kills more often.
                r = self.rng.random() * (0.6 if first else 1)
                first = False
                if (r < 0.3 or r >= 0.5) and done < budget:
                    edited = self.edited if self.job_edit is not None and \
                        self.job_edit.pipeline else None
                    self.watch = Opened(watched(job, self.work, cmd, r, edited))
            p, errlog = self.start(job, cmd)
            if cmd == "run":
                # The kills start once the job exists: before its first commit, a killed
                # `orch run` leaves a directory that neither run nor resume takes (reported).
                deadline = time.monotonic() + 30
                while not job_row_exists(job):
                    if p.poll() is not None or time.monotonic() > deadline:
                        raise Violation("orch run did not create the job (exit %r): %s"
                                        % (p.poll(), open(errlog).read()))
                    time.sleep(0.002)
            else:
                self.resumes += 1
                self.updates += cmd == "update"
            if done >= budget:
                try:
                    rc = p.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    p.kill()
                    raise Violation("the last %s did not finish in 120 s" % cmd)
                if self.exited(cmd, rc, errlog, job, prev, base, ports, "the last ") == "refused":
                    cmd = "resume"
                    continue
                break
            m = Moment(self.rng, updating, r, self.max_delay, self.watch is not None,
                       self.startup)
            s = strike(p, m, self.watch, self.rng, self.max_delay, cmd)
            self.worker_kills += s.worker_kills
            if s.ended is not None:
                # It ended by itself before the kill (also when a worker kill came
                # first: a refused start has no worker). A refusal is followed by a resume.
                verdict = self.exited(cmd, p.returncode, errlog, job, prev, base, ports,
                                      s.ended)
                if verdict == "refused":
                    cmd = "resume"
                    continue
                break
            self.kills += 1
            done += 1
            wait_gone(s.kids, "worker")
            when = "job%d %s kill %d (%s, %s)" % (self.jobs, phase, done, cmd,
                                                  s.moment(self.watch))
            cur, landed = self.killed(job, prev, base, anew, ports, when, seen_open)
            prev = cur
            cmd = self.next_command(updating, anew, landed, base, cur)
        return prev

    def killed(self, job, prev, base, anew, ports, when, seen_open):
        """The checks after a kill: returns the snapshot and, in an update, where the kill
        landed (what the update had committed: "unrecorded", "unscanned", "scanned")."""
        cur = snapshot(job, ports)
        frontier_ok(cur, when)
        updating = base is not None
        if prev is not None:
            compare(prev, cur, when, updating, anew)
        landed = None
        if updating:
            self.update_kills += 1
            landed = updates.update_kill_checks(base, cur, when)
            if anew is not None:
                edited = edits.edit_kill_checks(self.job_edit, base, cur, when)
                if edited != landed:
                    raise Violation("%s: landed %s, yet %s for the edit"
                                    % (when, landed, edited))
                self.carrying.at_kill(cur)
            self.landed[landed] += 1
            if VERBOSE:
                log("%s: %s" % (when, landed))
        inflight = sum(1 for g in cur["grain"].values() if g[2] == "in_flight")
        self.inflight_at_kills += inflight
        self.max_inflight = max(self.max_inflight, inflight)
        seen_open |= {a for a, v in cur["attempt"].items() if v[6] is None}
        return cur, landed

    def next_command(self, updating, anew, landed, base, cur):
        """The command after a kill: `orch resume`, or in an update one time in three
        `orch update` again (a resume always after a kill before the update was
        recorded, which is refused)."""
        cmd = "resume" if not updating or self.rng.random() < 2 / 3 or \
            landed == "unrecorded" else "update"
        e = self.job_edit
        if anew is not None and cmd == "update":
            # --edit: `orch update DIR EDITED` again. The same plan (neither --rerun nor a
            # dropped statement, whose canonical text says `retired`) goes on with an
            # unscanned update; after the scan it would start an update of the inputs
            # on top, which loses the carrying (see the docstring): not drawn. Another
            # is refused as an edit while an update is under way — unless the kill
            # came after the update had finished (its row's finished_at committed, the
            # driver not yet gone): the command then starts a new update, as it may.
            rows = updates.rows_since(base, cur)
            finished = bool(rows) and rows[max(rows)][2] is not None
            self.expect_refusal = bool(e.rerun or e.dropped) and not finished
            if landed == "scanned" and not self.expect_refusal:
                cmd = "resume"
        self.restarts += updating and cmd == "update"
        return cmd

    def exited(self, cmd, rc, errlog, job, prev, base, ports, what=""):
        """A start that ended by itself: "ok" with exit 0; "refused" for `orch update DIR
        EDITED` while the edit's update is under way (recorded, interrupted), which must
        say to `orch resume` and change nothing; otherwise a violation."""
        err = open(errlog).read()
        if rc == 0 and self.expect_refusal:
            raise Violation("job%d: `orch update` of an edit with --rerun or a dropped "
                            "statement went on while its update was under way: %s"
                            % (self.jobs, err))
        if rc == 0:
            return "ok"
        if self.job_edit is not None and base is not None and cmd == "update" and \
                "under way" in err and "orch resume" in err:
            if prev is None or updates.recorded(job, base) == 0:
                raise Violation("job%d: `orch update` refused as under way, yet no update "
                                "is recorded: %s" % (self.jobs, err))
            if not self.expect_refusal:
                raise Violation("job%d: `orch update` of the same plan refused: %s"
                                % (self.jobs, err))
            same_facts(job, prev, ports, "job%d: the refused `orch update`" % self.jobs)
            self.expect_refusal = False
            self.under_way += 1
            return "refused"
        raise Violation("%s%s exited %d: %s" % (what, cmd, rc, err))
