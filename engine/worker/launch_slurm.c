/* launch_slurm.c — Slurm, for the launcher (launch.h): srun and scancel found once, the
 * srun command that starts a worker, the scancel of a job a dead srun left behind, and the
 * srun guard that ends srun when the driver dies. */
#define _GNU_SOURCE
#include "launch_int.h"

#include "orch_error.h"
#include "proc.h"
#include "support.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The srun guard (orch_srun_guard_main): once told to end srun, it says so again this
 * often, and kills srun after this long. */
#define GUARD_RESEND_MS 1000
#define GUARD_KILL_AFTER_MS 45000

/* ---- finding srun and scancel -------------------------------------------------- */

/* Finds the command (srun) in PATH once, so that each start is an execve of a full path;
 * a missing srun is one clear error at start rather than a worker failing its init. */
int orch_launcher__resolve_command(orch_launcher *l)
{
    const char *cmd = l->words[0];
    if (strchr(cmd, '/')) {
        if (access(cmd, X_OK) == 0)
            return 0;
        return orch_error_set(-errno, "cannot run %s: %s", cmd, strerror(errno));
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        char full[4096];
        if (n > 0 && n + strlen(cmd) + 2 <= sizeof full) {
            snprintf(full, sizeof full, "%.*s/%s", (int)n, p, cmd);
            if (access(full, X_OK) == 0) {
                char *copy = strdup(full);
                if (!copy)
                    return -ENOMEM;
                free(l->words[0]);
                l->words[0] = copy;
                return 0;
            }
        }
        p += n + (p[n] == ':');
    }
    return orch_error_set(-ENOENT,
                          "--launcher slurm: %s is not in PATH (is Slurm's client "
                          "installed on this machine?)",
                          cmd);
}

/* scancel beside srun when it is there (an srun given by path, a site's own install),
 * else the one in PATH (orch_launcher_cancel). */
void orch_launcher__find_scancel(orch_launcher *l)
{
    snprintf(l->scancel, sizeof l->scancel, "scancel");
    const char *slash = strrchr(l->words[0], '/');
    if (!slash || (size_t)(slash - l->words[0]) + sizeof "/scancel" > sizeof l->scancel)
        return;
    snprintf(l->scancel, sizeof l->scancel, "%.*s/scancel", (int)(slash - l->words[0]),
             l->words[0]);
    if (access(l->scancel, X_OK) != 0)
        snprintf(l->scancel, sizeof l->scancel, "scancel");
}

/* ---- the srun command ---------------------------------------------------------- */

/* Whether the user's --launcher-args name the job themselves (theirs win over ours): the
 * name is then no longer one start's own, and nothing is cancelled by it. */
static bool user_names_job(const orch_launcher *l)
{
    for (int i = 1; i < l->nwords; i++) {
        const char *w = l->words[i];
        if (strncmp(w, "-J", 2) == 0 || strcmp(w, "--job-name") == 0 ||
            strncmp(w, "--job-name=", 11) == 0)
            return true;
    }
    return false;
}

void orch_launcher_job_name(char *out, size_t size, const char *call, uint64_t token)
{
    snprintf(out, size, "orch-%s-%" PRIu64, call, token);
}

int orch_launcher_command(const orch_launcher *l, const struct orch_launch_request *req,
                          char ***argv_out, char ***envp_out)
{
    *argv_out = NULL;
    *envp_out = NULL;
    char ours[8][384];
    int n = 0;
    int cpus = (int)(req->cpus + 0.999999), gpus = (int)(req->gpus + 0.999999);
    snprintf(ours[n++], sizeof ours[0], "--ntasks=1");
    snprintf(ours[n++], sizeof ours[0], "--cpus-per-task=%d", cpus < 1 ? 1 : cpus);
    if (gpus > 0)
        snprintf(ours[n++], sizeof ours[0], "--gpus=%d", gpus);
    /* The job's name is this start's own (its token): what cancels the job when srun dies
     * before its worker connected to name it (orch_launcher_cancel_start). */
    char name[ORCH_SLURM_NAME_MAX - 8];
    orch_launcher_job_name(name, sizeof name, req->call, req->token);
    snprintf(ours[n++], sizeof ours[0], "--job-name=%s", name);
    snprintf(ours[n++], sizeof ours[0], "--quiet");
    int nafter = 0;
    char after[6][384];
    snprintf(after[nafter++], sizeof after[0], "%s", req->exe);
    snprintf(after[nafter++], sizeof after[0], "__worker");
    snprintf(after[nafter++], sizeof after[0], "--connect");
    snprintf(after[nafter++], sizeof after[0], "%s", l->addr);
    snprintf(after[nafter++], sizeof after[0], "--token");
    snprintf(after[nafter++], sizeof after[0], "%" PRIu64, req->token);

    /* With a guard: orch __srun-guard SCANCEL NAME, then srun's command (the NAME to cancel
     * if the guard has to kill srun, "-" when the job's name is not this start's own). */
    int nguard = 0;
    char guard[4][ORCH_SLURM_NAME_MAX + 4096];
    if (req->guard) {
        snprintf(guard[nguard++], sizeof guard[0], "%s", req->guard);
        snprintf(guard[nguard++], sizeof guard[0], "__srun-guard");
        snprintf(guard[nguard++], sizeof guard[0], "%s", l->scancel);
        snprintf(guard[nguard++], sizeof guard[0], "%s",
                 getenv("SLURM_JOB_ID") != NULL || user_names_job(l) ? "-" : name);
    }
    /* srun, our options, the user's (later options win in srun, so theirs do), then the
     * worker's command. One block: the pointers, then the strings. */
    size_t count = (size_t)nguard + (size_t)l->nwords + (size_t)n + (size_t)nafter + 1;
    size_t bytes = 0;
    for (int i = 0; i < nguard; i++)
        bytes += strlen(guard[i]) + 1;
    for (int i = 0; i < l->nwords; i++)
        bytes += strlen(l->words[i]) + 1;
    for (int i = 0; i < n; i++)
        bytes += strlen(ours[i]) + 1;
    for (int i = 0; i < nafter; i++)
        bytes += strlen(after[i]) + 1;
    char **argv = malloc(count * sizeof *argv + bytes);
    if (!argv)
        return -ENOMEM;
    char *s = (char *)(argv + count);
    size_t k = 0;
#define PUT(str)                                                                               \
    do {                                                                                       \
        argv[k++] = strcpy(s, (str));                                                          \
        s += strlen(s) + 1;                                                                    \
    } while (0)
    for (int i = 0; i < nguard; i++)
        PUT(guard[i]);
    PUT(l->words[0]);
    for (int i = 0; i < n; i++)
        PUT(ours[i]);
    for (int i = 1; i < l->nwords; i++)
        PUT(l->words[i]);
    for (int i = 0; i < nafter; i++)
        PUT(after[i]);
#undef PUT
    argv[k] = NULL;

    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **envp = malloc((ne + 2) * sizeof *envp);
    if (!envp) {
        free(argv);
        return -ENOMEM;
    }
    size_t j = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], SECRET_ENV "=", sizeof SECRET_ENV) != 0)
            envp[j++] = environ[i];
    envp[j++] = (char *)l->secret_env;
    envp[j] = NULL;
    *argv_out = argv;
    *envp_out = envp;
    return 0;
}

/* ---- what a dead srun leaves behind -------------------------------------------- */

/* "JOBID" or "JOBID.STEPID", digits only: what a worker's AUTH may name. Anything else is
 * not passed to scancel (it would be read as an option or a job name). */
static bool is_step_id(const char *s)
{
    const char *p = s;
    if (!(*p >= '0' && *p <= '9'))
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.') {
        if (!(p[1] >= '0' && p[1] <= '9'))
            return false;
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    }
    return *p == '\0';
}

/* Reaps those of pids[0 .. *n) that have ended (or are not ours to wait for), keeping the
 * others in pids[0 .. *n). */
static void reap_pids(pid_t *pids, int *n)
{
    for (int i = 0; i < *n;) {
        if (orch_proc_reap(pids[i], false, NULL) == ORCH_PROC_RUNNING)
            i++;
        else
            pids[i] = pids[--*n];
    }
}

/* Waits up to ms for pids[0 .. *n), then kills and reaps the rest: none outlives the
 * caller. */
static void finish_pids(pid_t *pids, int *n, int ms)
{
    for (int waited = 0; *n > 0 && waited < ms; waited += 10) {
        reap_pids(pids, n);
        if (*n > 0)
            orch_clock_sleep_ms(10);
    }
    for (int i = 0; i < *n; i++)
        orch_proc_kill_reap(pids[i], NULL);
    *n = 0;
}

static void reap_cancels(orch_launcher *l)
{
    reap_pids(l->cancels, &l->ncancels);
    if (l->ncancels > 0 && !evtimer_pending(l->ev_cancel, NULL)) {
        struct timeval tv = {0, CANCEL_POLL_MS * 1000};
        (void)evtimer_add(l->ev_cancel, &tv); /* if it fails, the next cancel or free reaps */
    }
}

void orch_launcher__on_cancel_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    reap_cancels(arg);
}

/* Waits up to CANCEL_WAIT_MS for the scancel processes still running, then kills and
 * reaps the rest: none outlives the launcher. */
void orch_launcher__finish_cancels(orch_launcher *l)
{
    finish_pids(l->cancels, &l->ncancels, CANCEL_WAIT_MS);
}

/* Starts `scancel --quiet ARGS...` (args: at most three, NULL-terminated) with stdin and
 * stdout on /dev/null and no signal blocked (the srun guard blocks some). It gets no
 * parent-death signal: a cancel outlives a driver that dies meanwhile. Returns 0 and *pid,
 * or the error of starting it with the detail set (a scancel that cannot be run exits
 * 127). */
static int scancel_start(char *scancel, char *const *args, pid_t *pid)
{
    char *argv[6] = {scancel, "--quiet"};
    for (int i = 0; i < 3 && args[i]; i++)
        argv[2 + i] = args[i];
    struct orch_proc_spec spec = {.path = scancel,
                                  .search = true,
                                  .argv = argv,
                                  .nfd = 3,
                                  .fd = {ORCH_PROC_FD_NULL, ORCH_PROC_FD_NULL, STDERR_FILENO},
                                  .pgroup = ORCH_PROC_PGROUP_SAME};
    int rc = orch_proc_spawn(&spec, pid);
    return rc == 0 ? 0 : orch_error_set(rc, "cannot start %s: %s", scancel, strerror(-rc));
}

/* Starts scancel (scancel_start) and returns at once; reap_cancels() reaps it. */
static int spawn_scancel(orch_launcher *l, char *const *args)
{
    if (orch__grow(&l->cancels, &l->cap_cancels, l->ncancels + 1, sizeof *l->cancels) < 0)
        return -ENOMEM;
    pid_t pid;
    int rc = scancel_start(l->scancel, args, &pid);
    if (rc < 0)
        return rc;
    l->cancels[l->ncancels++] = pid;
    reap_cancels(l);
    return 0;
}

int orch_launcher_cancel(orch_launcher *l, const char *slurm_job,
                         char target[ORCH_SLURM_ID_MAX])
{
    target[0] = '\0';
    if (!is_step_id(slurm_job) || strlen(slurm_job) >= ORCH_SLURM_ID_MAX)
        return -EINVAL;
    snprintf(target, ORCH_SLURM_ID_MAX, "%s", slurm_job);
    /* A step in the allocation the driver itself runs in: that step only. Otherwise the
     * job is the one srun made for this worker alone, and the job is what is left. */
    size_t jlen = strcspn(target, ".");
    const char *mine = getenv("SLURM_JOB_ID");
    if (!(mine && strlen(mine) == jlen && strncmp(mine, target, jlen) == 0))
        target[jlen] = '\0';
    return spawn_scancel(l, (char *[]){target, NULL});
}

int orch_launcher_cancel_start(orch_launcher *l, const char *call, uint64_t token,
                               char target[ORCH_SLURM_NAME_MAX])
{
    char name[ORCH_SLURM_NAME_MAX - 8];
    orch_launcher_job_name(name, sizeof name, call, token);
    return orch_launcher_cancel_name(l, name, target);
}

int orch_launcher_cancel_name(orch_launcher *l, const char *name,
                              char target[ORCH_SLURM_NAME_MAX])
{
    target[0] = '\0';
    /* Inside the driver's own allocation srun makes a step, never a job: nothing is left
     * when it dies before its step started. */
    if (getenv("SLURM_JOB_ID") != NULL || user_names_job(l))
        return -ENOENT;
    if (strlen(name) + 8 >= ORCH_SLURM_NAME_MAX)
        return -EINVAL;
    snprintf(target, ORCH_SLURM_NAME_MAX, "--name=%s", name);
    return spawn_scancel(l, (char *[]){"--me", target, NULL});
}

/* ---- the srun guard ------------------------------------------------------------ */

/* The exit status of the guard is srun's: its exit code, or the signal that ended it (raised
 * again on the guard itself, without a core). */
static int mirror_status(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    int sig = WTERMSIG(st);
    struct rlimit none = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &none);
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    kill(getpid(), sig);
    return 128 + sig; /* a signal whose default is not to end the process */
}

/* After the guard killed srun: its job may be left RUNNING without a step (as after any
 * kill -9 of srun), and no driver is there to cancel it; cancelled by its name, waiting
 * for scancel as the launcher does (CANCEL_WAIT_MS at most). */
static void guard_cancel(char *scancel, const char *name)
{
    if (strcmp(name, "-") == 0)
        return;
    char opt[ORCH_SLURM_NAME_MAX + 16];
    snprintf(opt, sizeof opt, "--name=%s", name);
    pid_t pid;
    int n = scancel_start(scancel, (char *[]){"--me", opt, NULL}, &pid) == 0;
    finish_pids(&pid, &n, CANCEL_WAIT_MS);
}

int orch_srun_guard_main(char *scancel, const char *name, char **srun_argv,
                         int64_t kill_after_ms)
{
    sigset_t set;
    sigemptyset(&set);
    static const int watched[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD};
    for (size_t i = 0; i < sizeof watched / sizeof *watched; i++)
        sigaddset(&set, watched[i]);
    sigprocmask(SIG_BLOCK, &set, NULL);
    /* srun ends if the guard is killed (SIGKILL of the driver's child): one SIGTERM, as
     * srun had when it was the driver's child itself. */
    struct orch_proc_spec spec = {.path = srun_argv[0],
                                  .search = true,
                                  .argv = srun_argv,
                                  .nfd = 3,
                                  .fd = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO},
                                  .deathsig = SIGTERM,
                                  .pgroup = ORCH_PROC_PGROUP_SAME};
    pid_t pid;
    int rc = orch_proc_spawn(&spec, &pid);
    if (rc < 0) {
        fprintf(stderr, "orch: cannot start %s: %s\n", srun_argv[0], strerror(-rc));
        return 127;
    }
    bool ending = false, killed = false;
    int64_t ending_since = 0;
    int64_t kill_after = kill_after_ms > 0 ? kill_after_ms : GUARD_KILL_AFTER_MS;
    for (;;) {
        struct timespec tick = {GUARD_RESEND_MS / 1000, (GUARD_RESEND_MS % 1000) * 1000000L};
        int sig = ending ? sigtimedwait(&set, NULL, &tick) : sigwaitinfo(&set, NULL);
        int st;
        enum orch_proc_wait r = orch_proc_reap(pid, false, &st);
        if (r == ORCH_PROC_ENDED) {
            if (killed)
                guard_cancel(scancel, name);
            return mirror_status(st);
        }
        if (r == ORCH_PROC_GONE)
            return 127; /* not ours any more: nothing to guard */
        if (sig > 0 && sig != SIGCHLD) {
            /* The driver died (its SIGTERM on the guard's death signal) or stops the worker:
             * srun is told once now, then again each GUARD_RESEND_MS (below). */
            if (!ending)
                ending_since = orch_clock_mono_ms();
            ending = true;
            kill(pid, SIGTERM);
        } else if (sig < 0 && errno == EAGAIN && ending && !killed) {
            if (orch_clock_mono_ms() - ending_since >= kill_after) {
                kill(pid, SIGKILL);
                killed = true;
            } else {
                kill(pid, SIGTERM);
            }
        }
    }
}
