/* proc.c — child processes and clocks (proc.h). */
#define _GNU_SOURCE /* clone, execvpe, strerrordesc_np, close_range */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The stack the child runs on until its exec (child_exec needs a few hundred bytes;
 * execvpe builds each candidate path on it). */
#define CHILD_STACK (64 * 1024)

/* ---- clocks ---------------------------------------------------------------------------- */

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t orch_clock_mono_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

int64_t orch_clock_wall_ms(void)
{
    return clock_ms(CLOCK_REALTIME);
}

void orch_clock_sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                          .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- starting -------------------------------------------------------------------------- */

/* What the child needs between its start and its exec. */
struct child_args {
    const struct orch_proc_spec *spec;
    char *const *envp;
    pid_t parent;
};

/* Writes the strings of parts to stderr (async-signal-safe; no library call that the
 * sanitizers intercept). */
__attribute__((no_sanitize_address)) static void say(const char *const *parts, int n)
{
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        while (parts[i] && parts[i][len])
            len++;
        if (len > 0 && write(STDERR_FILENO, parts[i], len) < 0)
            return;
    }
}

/* Closes every descriptor from lo up (async-signal-safe). */
__attribute__((no_sanitize_address)) static void close_from(unsigned lo)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, lo, ~0u, 0) == 0)
        return;
#endif
    for (unsigned fd = lo; fd < 4096; fd++)
        close((int)fd);
}

/* Puts the spec's descriptors on 0 .. nfd-1. A source below nfd that is not its own
 * target is first moved above nfd, so that no dup2 overwrites a source still to be
 * placed. Returns 0 or -1. */
__attribute__((no_sanitize_address)) static int place_fds(const struct orch_proc_spec *s)
{
    int src[ORCH_PROC_MAX_FD];
    for (int i = 0; i < s->nfd; i++) {
        src[i] = s->fd[i];
        if (src[i] >= 0 && src[i] < s->nfd && src[i] != i &&
            (src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, s->nfd)) < 0)
            return -1;
    }
    for (int i = 0; i < s->nfd; i++) {
        if (src[i] == i) {
            if (fcntl(i, F_SETFD, 0) < 0)
                return -1;
            continue;
        }
        int fd = src[i];
        if (fd == ORCH_PROC_FD_NULL && (fd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
            return -1;
        /* /dev/null opened on i itself (i was closed): only its close-on-exec to clear */
        if (fd == i ? fcntl(i, F_SETFD, 0) < 0 : dup2(fd, i) < 0)
            return -1;
    }
    close_from((unsigned)s->nfd);
    return 0;
}

/* In the child, between its start and exec. It runs on a stack of its own while the
 * parent waits (CLONE_VM | CLONE_VFORK), in the parent's memory: so it writes no memory but
 * its stack, and makes only system calls (async-signal-safe ones). Not instrumented by
 * AddressSanitizer, whose bookkeeping would be the parent's. Never returns. */
__attribute__((noreturn, no_sanitize_address)) static void
child_exec(const struct child_args *a)
{
    const struct orch_proc_spec *s = a->spec;
    if (s->deathsig && (prctl(PR_SET_PDEATHSIG, s->deathsig) < 0 || getppid() != a->parent))
        _exit(127); /* the parent is already gone */
    if (s->pgroup != ORCH_PROC_PGROUP_SAME &&
        setpgid(0, s->pgroup == ORCH_PROC_PGROUP_OWN ? 0 : s->pgroup) < 0)
        _exit(127); /* outside the group asked for, nothing would end it with the others */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        sigaction(sig, &dfl, NULL); /* SIGKILL, SIGSTOP and libc's own just fail */
    if (place_fds(s) < 0)
        _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (s->search)
        execvpe(s->path, s->argv, a->envp);
    else
        execve(s->path, s->argv, a->envp);
    const char *msg[] = {"orch: cannot run ", s->path, ": ", strerrordesc_np(errno), "\n"};
    say(msg, 5);
    _exit(127);
}

__attribute__((no_sanitize_address)) static int child_main(void *arg)
{
    child_exec(arg);
}

int orch_proc_spawn(const struct orch_proc_spec *spec, pid_t *pid)
{
    if (spec->nfd < 3 || spec->nfd > ORCH_PROC_MAX_FD)
        return -EINVAL;
    struct child_args args = {
        .spec = spec, .envp = spec->envp ? spec->envp : environ, .parent = getpid()};
    char *stack = malloc(CHILD_STACK);
    if (stack == NULL)
        return -ENOMEM;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer cannot follow a child that runs in the parent's memory (its state is
     * the parent's thread's): a -Db_sanitize=thread build forks, so that its reports on the
     * parent's threads mean something. */
    *pid = fork();
    if (*pid == 0)
        _exit(child_main(&args));
#else
    *pid = clone(child_main, stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
#endif
    int clone_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(stack); /* the child has exec'd or exited: it no longer runs on it */
    return *pid < 0 ? -clone_errno : 0;
}

pid_t orch_proc_fork(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    int e = errno;
    if (pid != 0)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return pid;
}

/* ---- reaping --------------------------------------------------------------------------- */

enum orch_proc_wait orch_proc_reap(pid_t pid, bool block, int *status)
{
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, block ? 0 : WNOHANG);
        if (r == pid) {
            if (status)
                *status = st;
            return ORCH_PROC_ENDED;
        }
        if (r == 0)
            return ORCH_PROC_RUNNING;
        if (r < 0 && errno == EINTR)
            continue;
        /* ECHILD (or EINVAL for a pid that names no process): st is undefined. */
        if (status)
            *status = ORCH_PROC_STATUS_GONE;
        return ORCH_PROC_GONE;
    }
}

enum orch_proc_wait orch_proc_wait_ms(pid_t pid, int64_t ms, int *status)
{
    int64_t deadline = orch_clock_mono_ms() + ms;
    int64_t nap = 1;
    for (;;) {
        enum orch_proc_wait w = orch_proc_reap(pid, false, status);
        int64_t left = deadline - orch_clock_mono_ms();
        if (w != ORCH_PROC_RUNNING || left <= 0)
            return w;
        orch_clock_sleep_ms(nap < left ? nap : left);
        if (nap < 20)
            nap *= 2;
    }
}

enum orch_proc_wait orch_proc_kill_reap(pid_t pid, int *status)
{
    kill(pid, SIGKILL);
    return orch_proc_reap(pid, true, status);
}

/* ---- describing ------------------------------------------------------------------------ */

const char *orch_proc_describe(int status, bool shell, char *buf, size_t n)
{
    if (status == ORCH_PROC_STATUS_GONE)
        snprintf(buf, n, "is gone (another part of the process reaped it)");
    else if (shell && WIFEXITED(status) && WEXITSTATUS(status) > 128 &&
             WEXITSTATUS(status) - 128 < NSIG)
        snprintf(buf, n, "exited with status %d (its command was killed by signal %d (%s))",
                 WEXITSTATUS(status), WEXITSTATUS(status) - 128,
                 strsignal(WEXITSTATUS(status) - 128));
    else if (WIFEXITED(status))
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, n, "ended with wait status %#x", (unsigned)status);
    return buf;
}
