"""The processes of a job: the children of a driver, whether a process is alive, what a
process that should have ended is doing, and whether a file has been opened (inotify):
what a kill waits for."""
import ctypes
import glob
import os
import select
import subprocess
import time

from common import Violation

def children(pid):
    # /proc/PID/task/*/children is quick (a kill that waits for pgrep lands later);
    # pgrep where the kernel lacks it.
    try:
        kids = []
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                kids += [int(x) for x in f.read().split()]
        return kids
    except FileNotFoundError:
        pass
    r = subprocess.run(["pgrep", "-P", str(pid)], stdout=subprocess.PIPE, text=True)
    return [int(x) for x in r.stdout.split()]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purpose.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# How long a killed driver's children may take to end: a local worker dies at once
# (PR_SET_PDEATHSIG, SIGKILL); srun, a Slurm worker's process (ORCH_LAUNCHER=slurm), ends
# once Slurm has ended its step, which took over 10 s once on a loaded machine under ASan.
# CRASH_LOOP_WORKER_WAIT (seconds) replaces the 10 s.
WORKER_WAIT = float(os.environ.get("CRASH_LOOP_WORKER_WAIT") or 10)


def describe(pid):
    """What a process that should have ended is doing: its command, state, where it
    waits, its threads' stacks (gdb, when there is one) and, for an srun, its job."""
    out = []

    def read(path):
        try:
            with open(path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError as e:
            return "(%s)" % e.strerror
    out.append("  cmdline: " + read("/proc/%d/cmdline" % pid).replace("\0", " "))
    out += ["  " + l for l in read("/proc/%d/status" % pid).splitlines()
            if l.split(":")[0] in ("State", "PPid", "SigPnd", "ShdPnd", "SigBlk", "SigIgn",
                                   "SigCgt", "Threads")]
    try:
        for t in sorted(os.listdir("/proc/%d/task" % pid), key=int):
            out.append("  task %s: wchan %s, %s" % (
                t, read("/proc/%d/task/%s/wchan" % (pid, t)),
                read("/proc/%d/task/%s/stat" % (pid, t)).rsplit(")", 1)[-1].split()[0]))
    except OSError:
        pass
    cmds = [["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"],
            ["squeue", "-h", "-o", "%i %T %j %M"], ["ps", "-eo", "pid,ppid,pgid,stat,args"]]
    for c in cmds:
        try:
            r = subprocess.run(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=30)
            out.append("  $ %s\n%s" % (" ".join(c), r.stdout.rstrip()))
        except (OSError, subprocess.TimeoutExpired) as e:
            out.append("  $ %s: %s" % (" ".join(c), e))
    conf = os.environ.get("SLURM_CONF")
    if conf:
        for log in sorted(glob.glob(os.path.join(os.path.dirname(conf), "*.log"))):
            out.append("  %s, its last lines:\n%s" % (log, "\n".join(
                read(log).splitlines()[-30:])))
    return "\n".join(out)


def wait_gone(pids, what, limit=None):
    limit = WORKER_WAIT if limit is None else limit
    deadline = time.monotonic() + limit
    for pid in pids:
        while alive(pid):
            if time.monotonic() > deadline:
                raise Violation("%s %d still alive %.0f s after its driver was killed\n%s"
                                % (what, pid, limit, describe(pid)))
            time.sleep(0.01)


class Opened:
    """Whether a file is opened (inotify IN_OPEN), from now on."""

    def __init__(self, path):
        self.path = path
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if libc.inotify_add_watch(self.fd, os.fsencode(path), 0x20) < 0:  # IN_OPEN
            e = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(e, "inotify_add_watch %s" % path)

    def wait(self, timeout):
        """True once the file has been opened; waits timeout seconds at most."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return False
        os.read(self.fd, 4096)
        return True

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
