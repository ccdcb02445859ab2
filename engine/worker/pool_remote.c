/* pool_remote.c — remote workers of a pool (pool_int.h, launch.h): srun started under its
 * guard through the launcher, the worker's connection attached to the slot that started
 * it, and the Slurm job cancelled when a signal ended its srun. */
#define _GNU_SOURCE
#include "pool_int.h"

#include "proc.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Tells the watcher of starts (pool.h) about w's start. */
static int tell_start(orch_worker *w, enum orch_pool_start_event ev, const char *step)
{
    orch_pool *p = w->pool;
    char name[ORCH_SLURM_NAME_MAX];
    orch_launcher_job_name(name, sizeof name, p->wcfg.call, w->start_token);
    return p->starts(p->starts_ctx, p, ev, p->wcfg.call, name, step);
}

void orch_pool_watch_starts(orch_pool *p, orch_pool_start_fn fn, void *ctx)
{
    p->starts = fn;
    p->starts_ctx = ctx;
}

/* w's process was reaped. A remote worker's srun that a signal ended (kill -9 of srun, or
 * kill_all's SIGKILL) did not end its Slurm job, which stays RUNNING without a step (or
 * PENDING, then RUNNING once it gets its cores): the launcher cancels it (launch.h), by the
 * job its worker named, or by the start's job name when no worker connected. */
void orch_pool__srun_reaped(orch_worker *w)
{
    orch_pool *p = w->pool;
    if (!p->launcher)
        return;
    if (w->status != ORCH_PROC_STATUS_GONE && WIFSIGNALED(w->status)) {
        if (w->slurm_job[0]) {
            char target[ORCH_SLURM_ID_MAX];
            if (orch_launcher_cancel(p->launcher, w->slurm_job, target) == 0)
                fprintf(stderr,
                        "orch: scancel %s: the srun of a %s worker (step %s, pid %d) was "
                        "killed by signal %d\n",
                        target, p->wcfg.call, w->slurm_job, (int)w->pid, WTERMSIG(w->status));
        } else if (w->start_token) {
            char target[ORCH_SLURM_NAME_MAX];
            if (orch_launcher_cancel_start(p->launcher, p->wcfg.call, w->start_token,
                                           target) == 0)
                fprintf(stderr,
                        "orch: scancel %s: the srun of a %s worker (pid %d) was killed by "
                        "signal %d before its worker connected\n",
                        target, p->wcfg.call, (int)w->pid, WTERMSIG(w->status));
        }
        w->slurm_job[0] = '\0';
    }
    if (w->start_token && p->starts && !p->closing)
        (void)tell_start(w, ORCH_POOL_START_END, NULL);
    w->start_token = 0;
}

/* The launcher hands over the connection of the worker started in w (its token). */
static void on_attach(void *who, int fd, const struct orch_wire_auth *au)
{
    orch_worker *w = who;
    orch_pool *p = w->pool;
    /* orch_pool__close_channel() forgets the token of a start that ended, so the launcher
     * only calls for a slot still waiting for it. */
    if (ORCH_NEVER(w->state != W_STARTING || w->fd >= 0 || w->token != au->token)) {
        close(fd);
        return;
    }
    w->token = 0;
    w->fd = fd;
    w->wpid = (pid_t)au->pid;
    snprintf(w->host, sizeof w->host, "%s", au->host);
    snprintf(w->slurm_job, sizeof w->slurm_job, "%s", au->slurm_job);
    if (p->starts && w->start_token)
        (void)tell_start(w, ORCH_POOL_START_STEP, w->slurm_job);
    w->paused = false;
    w->ev_read = event_new(p->base, w->fd, EV_READ | EV_PERSIST, orch_pool__on_read, w);
    w->ev_write = event_new(p->base, w->fd, EV_WRITE, orch_pool__on_write, w);
    if (w->ev_read == NULL || w->ev_write == NULL || event_add(w->ev_read, NULL) < 0) {
        orch_pool__break_worker(w,
                                "the event loop cannot watch its connection (out of memory?)");
        return;
    }
    /* Its init is timed from here: the time Slurm kept the step pending is not init. */
    if (p->timeout_ms > 0) {
        struct timeval tv = ms_tv(INIT_TIMEOUT_FACTOR * p->timeout_ms);
        if (evtimer_add(w->timer, &tv) < 0) {
            orch_pool__break_worker(w, "the event loop cannot time its init (out of memory?)");
            return;
        }
    }
    orch_pool__flush(w); /* the CONFIG queued by orch_pool__spawn_remote */
}

/* Starts srun for slot w (launch.h); the worker's CONFIG waits in w->out until it has
 * connected and proved itself (on_attach). */
int orch_pool__spawn_remote(orch_worker *w)
{
    orch_pool *p = w->pool;
    assert(w->state == W_DEAD && w->fd < 0 && !w->running);
    struct orch_wire_config c = p->wcfg;
    char **argv = NULL, **envp = NULL;
    c.worker = (uint32_t)w->index;
    c.values = 1;
    c.payload_dir = "";
    c.max_value = orch_payload_max_value(p->store);
    w->out.len = w->out_off = 0;
    int rc = orch_wire_put_config(&w->out, &c);
    if (rc < 0)
        return rc;
    uint64_t token;
    if ((rc = orch_launcher_expect(p->launcher, on_attach, w, &token)) < 0)
        goto fail;
    struct orch_launch_request req = {.exe = p->exe,
                                      .call = c.call,
                                      .cpus = p->cpus,
                                      .gpus = p->gpus,
                                      .token = token,
                                      .guard = p->exe};
    if ((rc = orch_launcher_command(p->launcher, &req, &argv, &envp)) < 0)
        goto fail_token;
    if (!p->chld_watched) {
        if (event_add(p->ev_chld, NULL) < 0) {
            rc = -ENOMEM;
            goto fail_cmd;
        }
        p->chld_watched = true;
    }
    /* srun's guard gets SIGTERM when the driver dies, and has srun forward it to the step
     * and end the job (launch.h, orch_srun_guard_main). Its stdin is /dev/null: srun
     * forwards its stdin to the step, and the driver's (a terminal, or a pipe that stays
     * open) would keep srun reading, or stop it (SIGTTIN: its process group is not the
     * terminal's), and then srun does not end when told to. */
    struct orch_proc_spec spec = {.path = argv[0],
                                  .argv = argv,
                                  .envp = envp,
                                  .nfd = 3,
                                  .fd = {ORCH_PROC_FD_NULL, STDOUT_FILENO, STDERR_FILENO},
                                  .deathsig = SIGTERM,
                                  .pgroup = ORCH_PROC_PGROUP_OWN};
    /* Recorded before srun runs: a driver killed with its srun leaves the job to the
     * next one, which finds it there. */
    w->start_token = token;
    if (p->starts && (rc = tell_start(w, ORCH_POOL_START_BEGIN, NULL)) != 0) {
        w->start_token = 0;
        rc = rc < 0 ? rc : -EIO;
        goto fail_cmd;
    }
    pid_t pid;
    if ((rc = orch_proc_spawn(&spec, &pid)) < 0) {
        if (p->starts)
            (void)tell_start(w, ORCH_POOL_START_END, NULL);
        w->start_token = 0;
        goto fail_cmd;
    }
    free(argv);
    free(envp);
    orch_pool__occupy(w, pid);
    w->token = w->start_token = token;
    w->started_at = orch_clock_wall_ms();
    return 0;

fail_cmd:
    free(argv);
    free(envp);
    (void)orch_pool__watch_children(p);
fail_token:
    orch_launcher_forget(p->launcher, token);
fail:
    w->out.len = 0;
    return rc;
}
