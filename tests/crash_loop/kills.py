"""Kill scheduling: when a kill of a running `orch run|resume|update` lands (a Moment,
drawn from the seed), the file whose opening an update's kill waits for, and the kill
itself (strike): the driver with SIGKILL, a worker instead or before it."""
import os
import signal
import time

from common import Violation
from procs import children


def watched(job, work, cmd, r, edited):
    """The file whose opening a kill of an update waits for: state.db (before anything,
    r in [.2, .3)); with --edit, the edited pipeline (edited: its path, None when the
    command compiles none) one time in ten (r < .1: its compilation, before the edit is
    recorded) when the command reads it; else the source (the rescan; with --edit, an
    update's rescan after the plan's adoption)."""
    if 0.2 <= r < 0.3:
        return os.path.join(job, "state.db")
    if r < 0.1 and cmd == "update" and edited is not None:
        return edited
    return os.path.join(work, "in.txt")


class Moment:
    """When the next kill lands. A short delay; one time in five a very short one (the
    kill lands in the resume's own recovery or in the first turns); the others count from
    the time a run takes to its first attempt (startup). In an update (r: drawn
    before the start, see Loop), two times in ten the moment the driver opens the source
    (inotify): an `orch update` has just recorded the update, and its rescan, a fraction of
    a ms, has often not committed; one in ten the moment it opens state.db, before
    anything (an `orch update` has not recorded its update); two in ten a delay within the
    start-up (tens of ms); the others past it. watching: a file's opening is watched."""

    def __init__(self, rng, updating, r, max_delay, watching, startup=0.0):
        if not updating:
            r = rng.random()
        # at_open: the kill is at the watched file's opening (True), or the delay counts
        # from it (False: past the start-up, however long it takes on a busy machine).
        at_open = None
        if updating and r < 0.3:
            at_open, delay = True, 0.0
        elif updating and r < 0.5:
            delay = rng.uniform(0, 150) / 1000.0
        elif updating:
            at_open, delay = False, rng.uniform(0, max_delay) / 1000.0
        else:
            # startup: the seconds a reference run took to its first attempt; the longer
            # delays count from there, so that they land in the work on a busy machine.
            delay = rng.uniform(0, 15) / 1000.0 if r < 0.2 else \
                startup + rng.uniform(15, max_delay) / 1000.0
        if not watching:
            at_open = None
        self.at_open, self.delay = at_open, delay
        self.mode = rng.random()  # < .2: a worker instead; < .35: a worker, then the driver
        self.victim_at = rng.uniform(0, delay)


def kill_worker(rng, driver):
    """SIGKILL to a child of driver, drawn from rng. Whether one was killed."""
    kids = children(driver)
    if kids:
        try:
            os.kill(rng.choice(sorted(kids)), signal.SIGKILL)
            return True
        except ProcessLookupError:  # it ended in between (a worker being replaced)
            pass
    return False


class Strike:
    """What a strike did. ended: None when the driver was killed; else it ended by itself,
    and ended is how to say when ("", or "after a worker kill, " when it ended while a
    worker killed instead of it was being replaced)."""

    def __init__(self):
        self.ended = None
        self.worker_kills = 0
        self.kids = []           # the driver's children at its kill
        self.at_open = None
        self.t0 = self.killed_at = 0.0

    def moment(self, watch):
        """When the kill landed, in words."""
        if watch is None:
            return "%.1f ms after its start" % ((self.killed_at - self.t0) * 1000)
        name = os.path.basename(watch.path)
        if self.at_open:
            return "as it opened %s" % name
        return "%.1f ms after it opened %s" % ((self.killed_at - self.t0) * 1000, name)


def strike(p, m, watch, rng, max_delay, cmd):
    """Kills the driver p (`orch CMD`) at Moment m (watch: an Opened for m.at_open), and a
    worker before it or instead of it (the driver is then killed a little later) as m
    says. Returns a Strike."""
    s = Strike()
    s.at_open = m.at_open
    s.t0 = time.monotonic()
    worker_done = m.mode >= 0.35 or s.at_open is True
    while p.poll() is None:
        if s.at_open is not None:
            if watch.wait(0.002):
                if s.at_open:
                    # Stopped at once, killed below: the same as a kill here.
                    os.kill(p.pid, signal.SIGSTOP)
                    break
                s.t0, s.at_open = time.monotonic(), None
            elif time.monotonic() - s.t0 > 60:
                raise Violation("%s did not open %s in 60 s" % (cmd, watch.path))
            continue
        if time.monotonic() - s.t0 >= m.delay:
            break
        if not worker_done and time.monotonic() - s.t0 >= m.victim_at:
            worker_done = True
            s.worker_kills += kill_worker(rng, p.pid)
        time.sleep(0.001)
    if p.poll() is not None:
        s.ended = ""  # the job ended before the kill
        return s
    if m.mode < 0.35 and not worker_done:
        s.worker_kills += kill_worker(rng, p.pid)
    if m.mode < 0.2:
        # A worker instead: the driver goes on (then is killed a little later).
        time.sleep(rng.uniform(0, max_delay) / 1000.0)
        if p.poll() is not None:
            s.ended = "after a worker kill, "
            return s
    s.kids = children(p.pid)
    s.killed_at = time.monotonic()
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    if p.returncode != -signal.SIGKILL:
        s.ended = ""  # it finished in the instant before the kill
    return s
