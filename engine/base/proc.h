/* proc.h — child processes and clocks: the one place where orch starts a program, reaps
 * it and says how it ended, and the two clocks it reads.
 *
 * Starting. orch_proc_spawn() starts a program the way every process of orch starts one
 * (a worker, srun and its guard, scancel, an exec() UDF's program):
 *   - the child shares the parent's memory until its exec, and the parent waits for that
 *     (clone with CLONE_VM | CLONE_VFORK, as posix_spawn does): no page table is copied,
 *     however big the parent's heap, and no page the parent writes afterwards faults to be
 *     copied (a fork did both: most of the driver's time when workers start all along a
 *     job, BENCHMARKS.md, "Many calls, many workers");
 *   - every signal is blocked in the parent across the clone, so that none of the parent's
 *     handlers runs in the child; the child then resets every disposition to the default
 *     and unblocks every signal before its exec (an ignored SIGPIPE or SIGCHLD is not
 *     inherited);
 *   - the child gets the descriptors the spec names as 0 .. nfd-1, and no other: a
 *     descriptor of the parent that leaked into a child would keep a socket or a pipe
 *     open after the parent closed its end;
 *   - a parent-death signal (PR_SET_PDEATHSIG), set before anything else: a child whose
 *     parent is already gone exits 127 at once. It fires when the *thread* that started
 *     the child exits: start children from a thread that lives as long as they should;
 *   - a process group: the parent's, one of its own, or another's (which must exist);
 *   - an exec that fails ends the child with status 127, after one line on its stderr
 *     ("orch: cannot run PATH: REASON"), as a shell does.
 * A build with ThreadSanitizer forks instead (it cannot follow a child in the parent's
 * memory); nothing else differs.
 *
 * A child that runs code of its own instead of a program (exec()'s keeper) is started by
 * orch_proc_fork(): fork with every signal blocked across it; the child's mask stays full,
 * and it may make only async-signal-safe calls.
 *
 * Reaping. orch_proc_reap() is waitpid(pid) with its two odd answers handled once, the
 * same way everywhere: EINTR is retried, never taken for an answer; ECHILD (the pid is not
 * a child of this process, or another waiter took it) is GONE, with the status set to
 * ORCH_PROC_STATUS_GONE, never to what waitpid left in it (undefined on failure). Nothing
 * in orch calls waitpid(-1): each owner reaps only its own pids.
 *
 * Describing. orch_proc_describe() says how a wait status ended a process, as the rest of
 * a sentence: "exited with status 3", "was killed by signal 9 (Killed)", "is gone (another
 * part of the process reaped it)".
 *
 * Clocks. Two, named by what they are for: the monotonic clock for durations and
 * deadlines (it never goes back; it means nothing across processes or restarts), the wall
 * clock for the times orch stores and shows (milliseconds since the epoch; it may jump).
 */
#ifndef ORCH_PROC_H
#define ORCH_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- clocks ---- */

/* CLOCK_MONOTONIC in milliseconds: for durations and deadlines. */
int64_t orch_clock_mono_ms(void);
/* CLOCK_REALTIME in milliseconds since the epoch: for times that are stored or shown. */
int64_t orch_clock_wall_ms(void);
/* Sleeps ms milliseconds (the whole of them: a signal does not cut it short). */
void orch_clock_sleep_ms(int64_t ms);

/* ---- starting ---- */

#define ORCH_PROC_MAX_FD 5     /* the most descriptors a spec places */
#define ORCH_PROC_FD_NULL (-1) /* the child's descriptor is /dev/null (read and write) */

/* Process groups of orch_proc_spec.pgroup (a pid > 0 joins that process's group). */
#define ORCH_PROC_PGROUP_SAME 0   /* the parent's group (a spec's zero value) */
#define ORCH_PROC_PGROUP_OWN (-1) /* a new group, led by the child */

struct orch_proc_spec {
    const char *path; /* the program; looked up in PATH when `search` and it has no '/' */
    bool search;
    char *const *argv; /* NULL-terminated */
    char *const *envp; /* NULL: the parent's environ */
    /* The child's descriptors 0 .. nfd-1: fd[i] is the parent's descriptor that becomes
     * the child's i (fd[i] == i keeps it, close-on-exec or not), or ORCH_PROC_FD_NULL.
     * Every descriptor from nfd up is closed. 3 (stdio) <= nfd <= ORCH_PROC_MAX_FD. */
    int nfd;
    int fd[ORCH_PROC_MAX_FD];
    int deathsig; /* sent to the child when the parent's thread dies; 0: none */
    pid_t pgroup; /* ORCH_PROC_PGROUP_SAME, _OWN, or the group to join */
};

/* Starts spec's program. Returns 0 and *pid, or -EINVAL (nfd out of range) or -errno of
 * the clone (-EAGAIN, -ENOMEM): nothing was started then. A program that cannot be run is a
 * child that exits 127. Reap the child with orch_proc_reap(). */
int orch_proc_spawn(const struct orch_proc_spec *spec, pid_t *pid);

/* fork() with every signal blocked across it; the child's mask stays full. Returns as
 * fork does (-1 with errno set on failure). The child may make only async-signal-safe
 * calls (the parent may have threads) and must end with _exit(). */
pid_t orch_proc_fork(void);

/* ---- reaping ---- */

enum orch_proc_wait {
    ORCH_PROC_RUNNING, /* without block only: it has not ended; *status is untouched */
    ORCH_PROC_ENDED,   /* reaped: *status is its wait status */
    ORCH_PROC_GONE,    /* not ours to wait for (ECHILD): *status is ORCH_PROC_STATUS_GONE */
};

/* The status of a process that another waiter reaped: no wait status has this value. */
#define ORCH_PROC_STATUS_GONE (-1)

/* waitpid(pid): blocking until it ends, or not (WNOHANG). EINTR is retried. status may be
 * NULL. */
enum orch_proc_wait orch_proc_reap(pid_t pid, bool block, int *status);

/* Waits up to ms for pid to end (polling), reaping it. Returns ENDED or GONE as
 * orch_proc_reap(), or RUNNING when it still runs after ms. */
enum orch_proc_wait orch_proc_wait_ms(pid_t pid, int64_t ms, int *status);

/* SIGKILLs pid and reaps it. status may be NULL. Returns ENDED or GONE. */
enum orch_proc_wait orch_proc_kill_reap(pid_t pid, int *status);

/* ---- describing ---- */

/* How wait status `status` ended a process, as the rest of a sentence whose subject is
 * the process, into buf (n bytes, always NUL-terminated); returns buf. With `shell` the
 * process is `/bin/sh -c`, which exits 128+N when its command was killed by signal N:
 * "exited with status 137 (its command was killed by signal 9 (Killed))". */
const char *orch_proc_describe(int status, bool shell, char *buf, size_t n);

#endif
