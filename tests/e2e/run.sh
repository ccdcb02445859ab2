#!/usr/bin/env bash
# run.sh SCRIPT [ARGS...] — runs one end-to-end test, then fails it if any process it
# started is still alive: no process may outlive its run (workers, exec() programs and
# what they forked, drivers a test started in the background, daemons).
#
# Every process of the test inherits ORCH_E2E_RUN, a tag unique to this run; afterwards the
# tag is looked for in /proc/*/environ (a process keeps the environment it was started
# with, whatever it renames itself to or whichever process group it moves to). Processes
# that are exiting get a moment: the check polls for up to 10 s. Survivors are listed
# with their command lines, then killed, so that a failed test leaves nothing behind.
set -uo pipefail
export ORCH_E2E_RUN="e2e-$$-$RANDOM$RANDOM"
bash "$@"
rc=$?
env -u ORCH_E2E_RUN python3 - "$ORCH_E2E_RUN" "$$" "$1" <<'PY' || rc=1
import os, signal, sys, time

tag = ("ORCH_E2E_RUN=" + sys.argv[1]).encode()
me, test = int(sys.argv[2]), os.path.basename(sys.argv[3])


def tagged():
    found = {}
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                if tag not in f.read().split(b"\0"):
                    continue
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state == "Z":  # exited; its parent has not reaped it yet
                continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                found[int(d)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
    return found


deadline = time.monotonic() + 10
left = tagged()
while left and time.monotonic() < deadline:
    time.sleep(0.05)
    left = tagged()
if left:
    print("FAIL: %s left %d process(es) alive 10 s after it ended (now killed):" % (test, len(left)),
          file=sys.stderr)
    for pid, cmd in sorted(left.items()):
        print("  %d %s" % (pid, cmd), file=sys.stderr)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    sys.exit(1)
PY
exit $rc
