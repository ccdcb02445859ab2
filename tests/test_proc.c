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
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
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

/* ---- spawn ------------------------------------------------------------------------------ */

/* Reads fd to its end into buf (n bytes, NUL-terminated); closes fd. */
static void read_all(int fd, char *buf, size_t n)
{
    size_t got = 0;
    ssize_t r;
    while (got + 1 < n &&
           ((r = read(fd, buf + got, n - 1 - got)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            got += (size_t)r;
    buf[got] = '\0';
    close(fd);
}

/* Runs `sh -c script` with stdin /dev/null, stdout and stderr on pipes, and spec's other
 * fields; returns its wait status, its output in out and its stderr in err. */
static int run_sh(struct orch_proc_spec *spec, const char *script, char *out, size_t nout,
                  char *err, size_t nerr)
{
    int po[2], pe[2];
    assert_int_equal(pipe2(po, O_CLOEXEC), 0);
    assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    if (spec->path == NULL)
        spec->path = "/bin/sh";
    if (spec->argv == NULL)
        spec->argv = argv;
    spec->nfd = 3;
    spec->fd[0] = ORCH_PROC_FD_NULL;
    spec->fd[1] = po[1];
    spec->fd[2] = pe[1];
    pid_t pid;
    assert_int_equal(orch_proc_spawn(spec, &pid), 0);
    close(po[1]);
    close(pe[1]);
    read_all(po[0], out, nout);
    read_all(pe[0], err, nerr);
    int st;
    assert_int_equal(orch_proc_reap(pid, true, &st), ORCH_PROC_ENDED);
    return st;
}

/* The child has the descriptors it was given and no other, even one the parent left open
 * across exec (mutation: no close_range, and descriptor 20 shows up). */
static void test_spawn_closes_descriptors(void **state)
{
    (void)state;
    int leak = fcntl(2, F_DUPFD, 20); /* not close-on-exec */
    assert_int_equal(leak, 20);
    struct orch_proc_spec spec = {.pgroup = ORCH_PROC_PGROUP_SAME};
    char out[256], err[256];
    int st = run_sh(&spec, "exec ls /proc/self/fd", out, sizeof out, err, sizeof err);
    close(leak);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_string_equal(out, "0\n1\n2\n3\n"); /* 3: the directory ls reads */
    assert_string_equal(err, "");
}

/* Descriptors that trade places are placed right (mutation: dup2 in order without moving
 * a source out of the way first; the child's stdin and stdout are then the same pipe). */
static void test_spawn_swaps_descriptors(void **state)
{
    (void)state;
    int a[2], b[2];
    assert_int_equal(pipe2(a, O_CLOEXEC), 0); /* the child's stdin */
    assert_int_equal(pipe2(b, O_CLOEXEC), 0); /* the child's stdout */
    int saved0 = dup(0), saved1 = dup(1);
    assert_true(saved0 >= 0 && saved1 >= 0);
    assert_int_equal(dup2(a[0], 1), 1); /* the parent's 1 becomes the child's 0 */
    assert_int_equal(dup2(b[1], 0), 0); /* and its 0 the child's 1 */
    char *argv[] = {"cat", NULL};
    struct orch_proc_spec spec = {.path = "cat",
                                  .search = true,
                                  .argv = argv,
                                  .nfd = 3,
                                  .fd = {1, 0, 2},
                                  .pgroup = ORCH_PROC_PGROUP_SAME};
    pid_t pid;
    int rc = orch_proc_spawn(&spec, &pid);
    dup2(saved0, 0);
    dup2(saved1, 1);
    close(saved0);
    close(saved1);
    close(a[0]);
    close(b[1]);
    assert_int_equal(rc, 0);
    assert_int_equal(write(a[1], "swapped", 7), 7);
    close(a[1]);
    char out[64];
    read_all(b[0], out, sizeof out);
    int st;
    assert_int_equal(orch_proc_reap(pid, true, &st), ORCH_PROC_ENDED);
    assert_string_equal(out, "swapped");
}

/* /dev/null put on a descriptor the parent has closed, so that open() returns that very
 * number: it must still be open after the exec (mutation: leave it close-on-exec, and the
 * child's stdin is closed: `cat` fails). */
static void test_spawn_null_on_closed(void **state)
{
    (void)state;
    int po[2];
    assert_int_equal(pipe2(po, O_CLOEXEC), 0);
    int saved0 = dup(0);
    assert_true(saved0 >= 0);
    close(0);
    char *argv[] = {"sh", "-c", "cat; echo rc=$?", NULL};
    struct orch_proc_spec spec = {.path = "/bin/sh",
                                  .argv = argv,
                                  .nfd = 3,
                                  .fd = {ORCH_PROC_FD_NULL, po[1], po[1]},
                                  .pgroup = ORCH_PROC_PGROUP_SAME};
    pid_t pid;
    int rc = orch_proc_spawn(&spec, &pid);
    dup2(saved0, 0);
    close(saved0);
    close(po[1]);
    assert_int_equal(rc, 0);
    char out[256];
    read_all(po[0], out, sizeof out);
    assert_int_equal(orch_proc_reap(pid, true, NULL), ORCH_PROC_ENDED);
    assert_string_equal(out, "rc=0\n");
}

/* No signal blocked or ignored in the child, whatever the parent's (mutation: keep the
 * parent's mask, or leave SIG_IGN dispositions). */
static void test_spawn_signals(void **state)
{
    (void)state;
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old_pipe);
    sigset_t usr2, old_mask;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, &old_mask);
    struct orch_proc_spec spec = {.pgroup = ORCH_PROC_PGROUP_SAME};
    char out[256], err[256];
    run_sh(&spec, "exec grep -E '^Sig(Blk|Ign)' /proc/self/status", out, sizeof out, err,
           sizeof err);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    assert_string_equal(out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

/* The group asked for: the parent's, or one of the child's own. */
static void test_spawn_groups(void **state)
{
    (void)state;
    char *argv[] = {"sleep", "5", NULL};
    pid_t pid[2];
    pid_t groups[] = {ORCH_PROC_PGROUP_SAME, ORCH_PROC_PGROUP_OWN};
    for (int i = 0; i < 2; i++) {
        struct orch_proc_spec spec = {.path = "/bin/sleep",
                                      .argv = argv,
                                      .nfd = 3,
                                      .fd = {ORCH_PROC_FD_NULL, 1, 2},
                                      .pgroup = groups[i]};
        assert_int_equal(orch_proc_spawn(&spec, &pid[i]), 0);
    }
    /* The child set its group before its exec, and the parent waited for the exec. */
    pid_t g0 = getpgid(pid[0]), g1 = getpgid(pid[1]);
    for (int i = 0; i < 2; i++) {
        int st;
        assert_int_equal(orch_proc_kill_reap(pid[i], &st), ORCH_PROC_ENDED);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    }
    assert_int_equal(g0, getpgrp());
    assert_int_equal(g1, pid[1]);
}

/* A program that cannot be run: the child says so and exits 127. */
static void test_spawn_cannot_run(void **state)
{
    (void)state;
    char *argv[] = {"nothing", NULL};
    struct orch_proc_spec spec = {
        .path = "/nonexistent/nothing", .argv = argv, .pgroup = ORCH_PROC_PGROUP_SAME};
    char out[64], err[256];
    int st = run_sh(&spec, NULL, out, sizeof out, err, sizeof err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 127);
    assert_string_equal(err,
                        "orch: cannot run /nonexistent/nothing: No such file or directory\n");
    spec = (struct orch_proc_spec){.path = "orch-no-such-program",
                                   .search = true,
                                   .argv = argv,
                                   .pgroup = ORCH_PROC_PGROUP_SAME};
    st = run_sh(&spec, NULL, out, sizeof out, err, sizeof err);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 127);
    assert_non_null(strstr(err, "orch-no-such-program"));
}

/* ---- reap and describe ---------------------------------------------------------------- */

/* Waits go on after EINTR; a pid that is not a child is GONE, with a status that says so
 * (mutation: return waitpid's undefined status on ECHILD). */
static void test_reap(void **state)
{
    (void)state;
    char *argv[] = {"sleep", "5", NULL};
    struct orch_proc_spec spec = {.path = "/bin/sleep",
                                  .argv = argv,
                                  .nfd = 3,
                                  .fd = {ORCH_PROC_FD_NULL, 1, 2},
                                  .pgroup = ORCH_PROC_PGROUP_SAME};
    pid_t pid;
    assert_int_equal(orch_proc_spawn(&spec, &pid), 0);
    int st = 12345;
    eintr_left = 3;
    assert_int_equal(orch_proc_reap(pid, false, &st), ORCH_PROC_RUNNING);
    assert_int_equal(eintr_left, 0);
    assert_int_equal(st, 12345); /* untouched */
    assert_int_equal(orch_proc_wait_ms(pid, 30, &st), ORCH_PROC_RUNNING);
    kill(pid, SIGTERM);
    eintr_left = 2;
    assert_int_equal(orch_proc_wait_ms(pid, 10000, &st), ORCH_PROC_ENDED);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    st = SIGKILL; /* what a careless caller would read as "killed" */
    assert_int_equal(orch_proc_reap(pid, true, &st), ORCH_PROC_GONE);
    assert_int_equal(st, ORCH_PROC_STATUS_GONE);
    assert_int_equal(orch_proc_reap(getppid(), false, NULL), ORCH_PROC_GONE);
    check_no_children();
}

static void test_describe(void **state)
{
    (void)state;
    char b[160];
    assert_string_equal(orch_proc_describe(3 << 8, false, b, sizeof b), "exited with status 3");
    assert_string_equal(orch_proc_describe(SIGKILL, false, b, sizeof b),
                        "was killed by signal 9 (Killed)");
    assert_string_equal(orch_proc_describe(137 << 8, false, b, sizeof b),
                        "exited with status 137");
    assert_string_equal(orch_proc_describe(137 << 8, true, b, sizeof b),
                        "exited with status 137 (its command was killed by signal 9 (Killed))");
    assert_string_equal(orch_proc_describe(ORCH_PROC_STATUS_GONE, false, b, sizeof b),
                        "is gone (another part of the process reaped it)");
    char small[8];
    assert_string_equal(orch_proc_describe(3 << 8, false, small, sizeof small), "exited ");
}

/* ---- clocks --------------------------------------------------------------------------- */

static void test_clocks(void **state)
{
    (void)state;
    int64_t wall = orch_clock_wall_ms();
    int64_t t = (int64_t)time(NULL) * 1000;
    assert_true(wall >= t - 1000 && wall <= t + 2000);
    int64_t m0 = orch_clock_mono_ms();
    orch_clock_sleep_ms(20);
    int64_t m1 = orch_clock_mono_ms();
    assert_true(m1 - m0 >= 20);
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
        cmocka_unit_test(test_spawn_closes_descriptors),
        cmocka_unit_test(test_spawn_swaps_descriptors),
        cmocka_unit_test(test_spawn_null_on_closed),
        cmocka_unit_test(test_spawn_signals),
        cmocka_unit_test(test_spawn_groups),
        cmocka_unit_test(test_spawn_cannot_run),
        cmocka_unit_test(test_reap),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_exec_fini_interrupted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
