"""python3 tests/crash_loop [--update | --edit] [KILLS] [SEED] — kill -9 the driver (and
sometimes a worker) of a job again and again, resume it each time, and check that nothing
committed ever changes.

    python3 tests/crash_loop            30 kills, a seed from the clock (printed: rerun
                                        with it)
    python3 tests/crash_loop 20 1234    what the CI test (tests/e2e/crash_loop.sh) runs
    python3 tests/crash_loop --update 10 1234
                                        the kills land in `orch update`
                                        (tests/e2e/update_crash.sh)
    python3 tests/crash_loop --edit 8 1234
                                        the kills land in `orch update DIR EDITED.orch`, an
                                        edited pipeline (tests/e2e/update_edit_crash.sh)

    python3 tests/crash_loop --update --rewrite-during-run 6 12
                                        --update, and a file rewritten during the update
    python3 tests/crash_loop --edit --rewrite-during-run 8 12
                                        --edit, and a file rewritten during the edit

The pipeline has two sources. lines("in.txt"): an expand (split into words, empty pieces
included), a `sleep` map whose delay is the digit each word starts with, a `flaky` map
(an attempt failure on every grain's first attempt), `upper`, a `nonempty` filter, a
broadcast of the line to its words with an `identity` map on it, and two reduces
(`concat`, `count`); a streaming expand (tests/udf_slow_expand.c: 6 children of each
line, 3 ms apart, so that they are published in chunks while it runs and kills land in
the middle of expansions, whose replays are compared with what was published) and a
`count` of its children; its lines include keys that do not say their line (DESIGN §9): a
repeated line (`L`, `L#2`), the text `M#2` before a repeated M (whose second gets `M#3`),
a line with a NUL byte (key `…\\0…`). files("files/*.txt"): `read_file` then `upper`; the
files include a dangling symlink (its read fails, upper is suppressed) and a symlink that
can be read. It is run once
without interruption (the reference), then into a new job whose driver is killed with
SIGKILL after a random delay of a few to a few hundred ms, then resumed, KILLS times in
all (each start with a random --durability, sometimes a small --max-unsealed);
sometimes a worker (a child of the driver) is killed instead, or just before the
driver. When a job finishes before all kills are spent, a new job takes over. After each
kill, with no process of the job left, it checks against the previous kill's snapshot:

  (b) committed facts never change: every earlier entity, expansion, item (state and
      payload id), failure and closed attempt is still there, the same; every earlier line
      of `orch export DIR PORT --all` (the value of each item) is still exported, the same;
      sealed grains keep phase, outcome and generation;
  (c) redone work is bounded by the work in flight: the attempts that were open at the
      previous kill are now `interrupted` (or still open, when the resume itself was
      killed before it recovered them), no other attempt became `interrupted` but those of
      a batch that waited behind another on a worker lost running that one (it never
      started: "not started: worker N was lost while it ran the batch ahead of this
      one (...)", the batch ahead a crash or a timeout of worker N), a grain
      sealed at the previous kill has no new attempt, a grain in flight then has a higher
      generation now; and open attempts are exactly one per IN_FLIGHT grain, at its
      generation;

and at the end of each job:

  (a) `orch export DIR PORT --all` of every port is byte-identical to the reference run's;
  (d) PRAGMA integrity_check is ok, every present item's payload is readable (export of
      every port succeeds and lists as many present values as the item table has), every
      grain is sealed and every attempt closed; the `interrupted` attempts are those that
      were open at the kills, and those of batches that never started (above).

With --update (DESIGN §10), each job's first run goes to its end (with no kill, or with
a few that do not count), and the checks above hold for it; then its lines() source is
edited — lines removed, lines changed (with lines(), a removal and an addition), new lines,
two repeats of kept lines (keys `LINE#2`), sometimes a second empty line (key `#2`), a few
lines moved; keys that now stand for another line (changed roots: the text `L#2` where
the second L was, the text `M#2` gone so that the second M takes its key, the NUL byte
replaced by the text `\\0`) — and so are its files (one changed, one new, one removed, a
readable file replaced by a dangling symlink, a symlink's target deleted, a dangling
symlink's target created) — and `orch update DIR` is run and killed KILLS times in all, the resumes being
`orch resume DIR` or, one time in three, `orch update DIR` again (always a resume after a
kill before the update was recorded). Two kills in ten land the moment the driver opens
the source (inotify; the process is stopped at once, then killed): in the rescan of an
`orch update`, which often has not committed then (scanned_at NULL: the root table must be
exactly as before the update, the rescan being one transaction); one in ten the moment it
opens state.db, before an `orch update` has recorded its update (job_update has no row: a
resume must then refuse, naming `orch update`, and change no fact; the loop goes on with
`orch update`); two in ten within the first 150 ms; the others a delay of up to
CRASH_LOOP_MAX_DELAY_MS after it opened the source (past the start-up, however slow the
machine: in the admission and the turns). The update's first start draws the early kills
more often (its kill is the one that can come before the update is recorded), and an
update has six kills at most, then a new job takes over. The summary says how many kills
landed where. The same edit is made for every job; its reference is a fresh uninterrupted
`orch run` over the edited source. Across the update's kills (b) and (c) above still hold,
except that export lines of entities under a retired root leave the export; and:

  (e) the root table: a row never vanishes, its domain, key, revision and admission time
      never change, a retired root stays retired with the same time and reason; roots are
      retired only by an update, and a key has at most one live revision;
  (f) no grain under a root that was live before the update and is live after it has a
      new attempt (an update runs only the new roots);
  (g) at the end: (a) and (d) against the edited sources' reference (run in the same
      directory: a files() value is an absolute path); every job_update row of the update
      has scanned_at and finished_at; their removed counts add up to the keys that
      vanished, changed to the keys changed, added to the new and changed keys; the live
      roots of each source in position order are its keys, the kept unchanged ones the
      same entities as before; the retired ones are the vanished keys, with reason
      `removed`, and the changed ones, with reason `changed`.

With --rewrite-during-run and --update, files/f1.txt, changed by the edit, is written
again with other bytes during the update: two times in three the moment its rescan has
committed (the scan hashed the file, read_file is still to come), else at a random moment
up to 2 * CRASH_LOOP_MAX_DELAY_MS after its start. (g) then allows one more change where
an `orch update` started again after the rewrite counted it. After the update's end the
edit's bytes are written back and `orch update DIR` is run: its export must equal the
reference, byte for byte (a file whose signature moved between its scan and the read
is changed for the next update).

With --edit (DESIGN §10, docs/incremental.md "An edited pipeline"), the sources stay as
they are (the lines and files of the first run above, the unreadable one included) and the
pipeline changes. Each job draws its pipeline and its edit from the seed
(pipeline.Edit): PIPELINE's steps without `output` statements (every payload kept, so every
step the edit leaves as it was can be taken over: always for the first job), or, for the
second job and one in five of the others after it, with PIPELINE's outputs (the
intermediates are reclaimed once read, and a step upstream of a change that needs them is
computed again). The edit: one in five `--rerun
CALL` alone; otherwise one or more of a middle call's argument changed (concat's
separator, or `sleep(ms=…)`), a new statement downstream (`doc.m = reduce count(PORT)`),
a leaf statement dropped with its call (word.ctx, doc.n or doc.joined), and sometimes a
--rerun on top; the first job's edit changes an argument, the third's drops a statement,
the fourth's is a --rerun alone (a short loop has each). The job's first run goes to its end (through a kill now and then: checked
as above); a later job with the same pipeline starts from a copy of it. Then `orch update
DIR EDITED.orch [--rerun CALL]` is killed 1 to 3 times (KILLS in all over the jobs):
  - two in ten before the edit is recorded (the plan's adoption and its job_update row
    are one transaction): the moment the driver opens state.db, or compiles EDITED.orch
    (inotify, as above). The plan table, job.plan_text and every fact must be as before
    the update. The loop then runs a plain `orch resume`, which must exit 0, leave the job
    finished and change no fact (it has nothing to do: the job is finished with its old
    plan), and starts `orch update DIR EDITED.orch` again, as the user must;
    (a resume, or --rerun alone, compiles nothing: then the source's opening instead);
  - one in ten the moment it opens the source, in the rescan (one transaction: either
    nothing of it, or job_update.replanned the number of roots live before it); each of
    those roots stays live until the transaction that admits its next revision, which
    retires it for `plan` at the time it admits the new one: no key is ever without a
    live revision;
  - the others a delay within the start-up or past the source's opening; the update's
    first start draws the early kills more often, as with --update.
After a kill once the edit is recorded, the update is finished by `orch resume`; one time
in three `orch update DIR EDITED.orch` again instead, which must be refused (exit 1, "under
way … orch resume", no fact changed) when the edit has --rerun or drops a statement (an
edit while an update is under way), and goes on with the same update when the plan is the
same and its rescan has not committed. (When the plan is the same and the rescan has
committed, `orch update DIR EDITED.orch` starts an update of the inputs on top of the
unfinished edit: the roots the edit had not brought back yet count as new, and the
remaining grains run instead of taking their twin's result, since carrying follows the
latest job_update row's plan; the exports are still right. Not drawn, so that (c) holds.)
Across the kills (b) and (c) above hold, and (e) (the roots); an export line of a port the
edit computes differently may change once its key's root is retired for the plan, one of
another port shows the same value or is not there yet (a reclaimed value counts as the
same as any). At the end:

  (a) `orch export --all` of every port of the edited pipeline is byte-identical to a fresh
      `orch run` of it over the same source; export of a port the edit dropped fails
      saying it "left the pipeline"; (d) of the first run's checks;
  (c) the rule of carrying: no grain of a new revision whose call computes what it did
      (every port of its statement keeps its fingerprint: not changed, not new, not
      downstream of a change or of --rerun) has an attempt of the update when its twin
      (the same call on the entity with the same key, in the root's previous revision)
      was sealed OK or Dropped and its outputs can be handed on (every child's, for an
      expansion; a filter's verdict always can): Present, with their bytes still there
      or, when they were reclaimed, read by no call that may run (engine/update/carry.c:
      a call that computes anew, or one whose needed outputs were reclaimed, and what
      those read, to a fixpoint; the reclaimed ids as at the update's end, so the
      largest demand any of its starts saw) — unless a resume found it READY: it was
      READY, or in flight (made READY again by recovery), in the snapshot at one of the
      update's kills. Without outputs no payload may have been reclaimed, so such a call
      runs only for those grains and for twins that failed. The summary counts the
      grains carried, run as found READY, run as their twin's result was gone;
  (d) the update has one job_update row: plan_id the last plan (job.plan_text), and, for
      --rerun, its calls in rerun; scanned_at and finished_at set; replanned and added
      the number of roots live before it, changed and removed 0; the live roots are the
      same keys in the same order, each the next revision of one live before.

With --rewrite-during-run and --edit, files/f1.txt is written with other bytes the moment
the edit's rescan has committed (the edit sees the file as it was; a read_file that runs
after it, because the bytes it made were reclaimed and are needed, or --rerun, reads the
new bytes). Checks (b) to (d) hold as above; then the file's bytes are put back and `orch
update DIR` is run, and (a) must hold after it: a file whose signature moved between the
scan and the read is changed for the next update, one that was not read is not.

Prints a summary; exits 1 on any violation (with the work directory kept for a look),
0 otherwise. Environment: ORCH (the binary; default build/engine/orch), CRASH_LOOP_LINES
(root entities, default 80), CRASH_LOOP_DIR (work directory; default a new temporary one,
removed on success), CRASH_LOOP_MAX_DELAY_MS (default 300; after the time the reference run took to its first attempt), CRASH_LOOP_VERBOSE=1 (a line
per kill of an update: when, and what the update had committed then).

The parts: pipeline.py (the pipeline, its edits, the source's data), jobs.py (the Loop:
jobs driven, killed and resumed), kills.py (when a kill lands, and the kill), procs.py (the
job's processes), invariants.py (the snapshots and the checks of every run), updates.py
and edits.py (the checks of --update and --edit), common.py (`orch`, the log, a
violation).
"""
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

from common import Violation, exports, log, run  # noqa: E402 (after the line above)
from jobs import Loop, startup  # noqa: E402
from pipeline import (OUTPUTS, PIPELINE, edit_data, file_changes, file_states,  # noqa: E402
                      line_changes, write_data, write_files, write_lines)


def main():
    argv = sys.argv[1:]
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    update = "--update" in argv
    edit_mode = "--edit" in argv
    rewrite = "--rewrite-during-run" in argv
    if update and edit_mode:
        log("--update and --edit: one or the other")
        return 2
    if rewrite and not (update or edit_mode):
        log("--rewrite-during-run goes with --update or --edit")
        return 2
    argv = [a for a in argv if a not in ("--update", "--edit", "--rewrite-during-run")]
    kills = int(argv[0]) if len(argv) > 0 else 30
    seed = int(argv[1]) if len(argv) > 1 else int(time.time() * 1000) % 1000000
    nlines = int(os.environ.get("CRASH_LOOP_LINES", "80"))
    given = os.environ.get("CRASH_LOOP_DIR")
    work = given or tempfile.mkdtemp(prefix="orch-crash-loop.")
    os.makedirs(work, exist_ok=True)
    log("%d kills%s, seed %d, %d lines, in %s"
        % (kills, " during updates" if update else " during edits" if edit_mode else "",
           seed, nlines, work))
    rng = random.Random(seed)
    write_data(os.path.join(work, "in.txt"), nlines, rng)
    files = file_states(rng)
    write_files(work, files[0])
    if edit_mode:
        return main_edit(kills, seed, work, given, files[0] if rewrite else None)
    with open(os.path.join(work, "p.orch"), "w") as f:
        f.write(PIPELINE)
    edit = None
    if update:
        # The edited sources; the reference over them runs in work too (a files() value
        # is the file's absolute path).
        with open(os.path.join(work, "in.txt")) as f:
            lines = f.read().split("\n")[:-1]
        edit = ((lines, files[0]), (edit_data(lines, rng), files[1]))
    t0 = time.monotonic()
    refs = []
    for k, state in enumerate(edit if update else [None]):
        if state is not None:
            write_lines(os.path.join(work, "in.txt"), state[0])
            write_files(work, state[1])
        ref_job = os.path.join(work, "ref%d" % k)
        t_ref = time.time()
        r = run(["run", os.path.join(work, "p.orch"), "--job", ref_job, "--progress", "none"])
        if r.returncode != 0:
            log("FAIL: the reference run exited %d: %s" % (r.returncode, r.stderr.decode()))
            return 1
        refs.append(exports(ref_job))
        if k == 0:
            first_attempt = startup(ref_job, t_ref)
    ref_s = (time.monotonic() - t0) / len(refs)
    ref = refs[0]
    loop = Loop(kills, seed, work, edit, rewrite=rewrite)
    loop.startup = first_attempt
    t1 = time.monotonic()
    try:
        while (loop.update_kills if update else loop.kills) < kills:
            loop.one_job(ref, refs[-1])
    except Violation as e:
        log("FAIL (seed %d, after %d kills): %s" % (seed, loop.kills, e))
        log("work directory kept: %s" % work)
        return 1
    loop_s = time.monotonic() - t1
    digest = hashlib.sha256(b"".join(ref[p] for p in OUTPUTS)).hexdigest()[:12]
    log("ok: %d driver kills (%d also or instead a worker) over %d job(s), %d resumes; "
        "reference run %.1f s, loop %.1f s" % (loop.kills, loop.worker_kills, loop.jobs,
                                              loop.resumes, ref_s, loop_s))
    log("    %d grains in flight at the kills (at most %d at one), %d interrupted attempts "
        "= %d attempts open at the kills, each run again at a higher generation (%d); "
        "outputs %s"
        % (loop.inflight_at_kills, loop.max_inflight, loop.interrupted, loop.open_at_kills,
           loop.redone, digest))
    if update:
        ch = [line_changes(edit[0][0], edit[1][0]), file_changes(edit[0][1], edit[1][1])]
        log("    updates: lines() %d keys new, %d changed, %d removed; files() %d new, %d "
            "changed, %d removed; %d kills in them: %d before the update was recorded (%d "
            "resumes refused), %d before its rescan committed, %d after; %d `orch update` "
            "starts; %d files rewritten during an update; outputs %s"
            % tuple([len(x) for c in ch for x in c] + [
               loop.update_kills, loop.landed["unrecorded"], loop.refusals,
               loop.landed["unscanned"], loop.landed["scanned"], loop.updates,
               loop.rewrites, hashlib.sha256(b"".join(refs[-1][p] for p in OUTPUTS)).hexdigest()[:12]]))
    if not given:
        shutil.rmtree(work)
    return 0


def main_edit(kills, seed, work, given, files=None):
    """--edit: jobs over work/in.txt, each with its pipeline and edit, until KILLS kills
    landed in the edits' updates. files: the files/ state, given with --rewrite-during-run
    (each edit's update has files/f1.txt rewritten, then put back)."""
    loop = Loop(kills, seed, work, edit=True, rewrite=files is not None)
    loop.files = files
    t1 = time.monotonic()
    try:
        while loop.update_kills < kills:
            loop.one_edit_job()
    except Violation as e:
        log("FAIL (seed %d, after %d kills, job%d: %s): %s"
            % (seed, loop.kills, loop.jobs, loop.edits[-1] if loop.edits else "-", e))
        log("work directory kept: %s" % work)
        return 1
    log("ok: %d driver kills (%d also or instead a worker) over %d job(s), %d resumes, "
        "%.1f s" % (loop.kills, loop.worker_kills, loop.jobs, loop.resumes,
                    time.monotonic() - t1))
    for k, e in enumerate(loop.edits):
        log("    job%d: %s" % (k + 1, e))
    log("    %d kills in the edits' updates: %d before the edit was recorded (then %d plain "
        "resumes that did nothing), %d before its rescan committed, %d after; %d `orch "
        "update` restarts after a kill (%d refused: under way); %d files rewritten during "
        "an edit's update"
        % (loop.update_kills, loop.landed["unrecorded"], loop.noops, loop.landed["unscanned"],
           loop.landed["scanned"], loop.restarts, loop.under_way, loop.rewrites))
    c = loop.carrying
    log("    grains of calls the edit left as they were: %d took their twin's result, %d ran "
        "as a resume found them READY, %d ran as their twin's result was gone (%s); %d "
        "attempts of grains the edit computes anew; %d interrupted attempts = %d open at "
        "the kills"
        % (c.carried, c.ran_found, sum(c.ran_twin.values()),
           ", ".join("%s: %d" % kv for kv in sorted(c.ran_twin.items())) or "-",
           c.ran_anew, loop.interrupted, loop.open_at_kills))
    if not given:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
