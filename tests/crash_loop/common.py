"""What every part of the crash loop uses: the binary, a violation, the log, `orch`
commands, and a read-only connection to a job's state.db."""
import os
import sqlite3
import subprocess

from pipeline import PORTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORCH = os.environ.get("ORCH") or os.path.join(ROOT, "build", "engine", "orch")
VERBOSE = os.environ.get("CRASH_LOOP_VERBOSE") == "1"


class Violation(Exception):
    pass


def log(msg):
    print("crash-loop: " + msg, flush=True)


def run(args, **kw):
    return subprocess.run([ORCH] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=120, **kw)


def export(job, port):
    r = run(["export", job, port, "--all"])
    if r.returncode != 0:
        raise Violation("orch export %s %s exited %d: %s"
                        % (job, port, r.returncode, r.stderr.decode(errors="replace")))
    return r.stdout


def exports(job, ports=PORTS):
    return {p: export(job, p) for p in ports}


def connect(job):
    return sqlite3.connect("file:%s/state.db?mode=ro" % job, uri=True, timeout=10)


def job_row_exists(job):
    if not os.path.exists(os.path.join(job, "state.db")):
        return False
    try:
        db = connect(job)
        try:
            return db.execute("SELECT count(*) FROM job").fetchone()[0] == 1
        finally:
            db.close()
    except sqlite3.Error:
        return False
