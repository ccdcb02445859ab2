/* test_proc.c — the process toolkit (engine/base/proc.h) and the process handling of the
 * exec() adapter that is built on it: a child exec'd with its descriptors placed and every
 * other one closed, in its own group or another's, with no signal blocked and none
 * ignored; an exec that fails exits 127; reaping waits for the child, says GONE for a pid
 * that is not a child (with a status that describes itself as such), and goes on after an
 * EINTR; exit statuses described; the clocks.
 *
 * waitpid() is wrapped (-Wl,--wrap=waitpid, tests/meson.build): a test arms it to fail the
 * next WNOHANG waits with EINTR, as a signal arriving during the call would. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "orch_udf_host.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- waitpid, wrapped ------------------------------------------------------------------ */

static int eintr_left; /* the next this many WNOHANG waits fail with EINTR */

pid_t __real_waitpid(pid_t pid, int *status, int options);
pid_t __wrap_waitpid(pid_t pid, int *status, int options);
pid_t __wrap_waitpid(pid_t pid, int *status, int options)
{
    if ((options & WNOHANG) && eintr_left > 0) {
        eintr_left--;
        errno = EINTR;
        return -1;
    }
    return __real_waitpid(pid, status, options);
}

static void check_no_children(void)
{
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

/* ---- exec(): its program is killed and reaped however the waits go --------------------- */

/* The program's READY frame (udfs/EXEC_PROTOCOL.md), as sh's printf writes it. */
#define SH_READY "printf 'REDY\\004\\000\\000\\000\\000\\000\\000\\000\\001\\000\\000\\000'"

/* fini closes the program's stdin and waits for it to exit; an EINTR in that wait must not
 * end the wait with the program unreaped (mutation: break out of the wait on any waitpid
 * failure, as a loop that tests `r != 0` does, and this test finds the program's zombie). */
static void test_exec_fini_interrupted(void **state)
{
    (void)state;
    char err[256] = "";
    struct orch_udf_config cfg = {.call = "t",
                                  .function = SH_READY "; exec cat >/dev/null",
                                  .op = ORCH_UDF_OP_MAP,
                                  .nin = 1,
                                  .nout = 1,
                                  .error = err,
                                  .error_size = sizeof err};
    void *st = NULL;
    assert_int_equal(orch_udf_exec.init(&cfg, &st), 0);
    eintr_left = 1;
    orch_udf_exec.fini(st);
    eintr_left = 0;
    /* A child left to reap is found by a blocking wait; none is left: ECHILD at once. */
    int status;
    errno = 0;
    pid_t left = waitpid(-1, &status, 0);
    if (left > 0)
        fail_msg("fini left process %d unreaped", (int)left);
    assert_int_equal(errno, ECHILD);
    check_no_children();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_fini_interrupted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
