/* pool_spawn.c — starting a process in a slot of a pool (pool_int.h): a local worker is
 * `orch __worker 3` with its socket on descriptor 3, its slot's CUDA_VISIBLE_DEVICES, its
 * own process group, and SIGKILL when the driver dies (base/proc.h); a remote one is
 * started through the launcher (pool_remote.c). */
#define _GNU_SOURCE
#include "pool_int.h"
#include "claim.h"

#include "proc.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

extern char **environ;

/* The environment of worker i: environ, with CUDA_VISIBLE_DEVICES replaced when the pool
 * sets it. Returns environ itself, a malloc'd array (*owned = true), or NULL (no memory). */
static char **worker_env(orch_pool *p, int i, bool *owned)
{
    *owned = false;
    if (p->cuda_env == NULL || p->cuda_env[i] == NULL)
        return environ;
    static const char key[] = "CUDA_VISIBLE_DEVICES=";
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = malloc(sizeof *env * (n + 2));
    if (env == NULL)
        return NULL;
    size_t k = 0;
    for (size_t j = 0; j < n; j++)
        if (strncmp(environ[j], key, sizeof key - 1) != 0)
            env[k++] = environ[j];
    env[k++] = (char *)p->cuda_env[i];
    env[k] = NULL;
    *owned = true;
    return env;
}

/* Dead slot w holds process pid from now on, STARTING; where it runs is not known yet
 * (the caller says: at once for a local worker, at its AUTH for a remote one). */
void orch_pool__occupy(orch_worker *w, pid_t pid)
{
    w->incarnation++;
    w->pid = pid;
    w->wpid = 0;
    w->host[0] = w->slurm_job[0] = '\0';
    w->start_token = 0;
    orch_pool__live_add(w);
    w->reaped = false;
    orch_pool__set_dying(w, false);
    orch_pool__set_state(w, W_STARTING);
    w->nhold = 0;
    w->in.len = w->in_off = 0;
}

_Static_assert(ORCH_WORKER_CLAIM_FD == WORKER_FD + 1, "the claim follows the socket");

void orch_pool__claim_drop(orch_worker *w)
{
    orch_claim_free(w->claim);
    w->claim = NULL;
}

/* Starts a process in dead slot w and sends it CONFIG. Returns 0 or a negative error
 * (nothing left running then). */
int orch_pool__spawn(orch_worker *w)
{
    orch_pool *p = w->pool;
    if (p->launcher)
        return orch_pool__spawn_remote(w);
    assert(w->state == W_DEAD && w->fd < 0 && !w->running);
    struct orch_wire_config c = p->wcfg;
    c.worker = (uint32_t)w->index;
    w->out.len = w->out_off = 0;
    int rc = orch_wire_put_config(&w->out, &c);
    if (rc < 0)
        return rc;

    bool owned;
    char **envp = worker_env(p, w->index, &owned);
    if (envp == NULL)
        return -ENOMEM;
    static char arg0[] = "orch", arg1[] = "__worker";
    char arg2[16];
    snprintf(arg2, sizeof arg2, "%d", WORKER_FD);
    char *argv[] = {arg0, arg1, arg2, NULL};

    /* SIGCHLD is watched before the child exists, so that its death cannot go unseen. */
    if (!p->chld_watched) {
        if (event_add(p->ev_chld, NULL) < 0) {
            rc = -ENOMEM;
            goto fail_env;
        }
        p->chld_watched = true;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        rc = -errno;
        goto fail_env;
    }
    /* A new claim word for the process (claim.h); without one its batches are never
     * taken back, and nothing else fails. */
    orch_pool__claim_drop(w);
    w->sent = 0;
    int claim_fd = orch_claim_new(&w->claim);
    /* Its own process group: a Ctrl-C at the terminal reaches the driver only, which then
     * closes its pools; an interruption must not look like a crash of every worker. */
    struct orch_proc_spec spec = {.path = p->exe,
                                  .argv = argv,
                                  .envp = envp,
                                  .nfd = claim_fd >= 0 ? ORCH_WORKER_CLAIM_FD + 1 : WORKER_FD + 1,
                                  .fd = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, sv[1],
                                         claim_fd},
                                  .deathsig = SIGKILL,
                                  .pgroup = ORCH_PROC_PGROUP_OWN};
    pid_t pid;
    rc = orch_proc_spawn(&spec, &pid);
    close(sv[1]);
    if (claim_fd >= 0)
        close(claim_fd); /* the mapping stays */
    if (rc < 0) {
        close(sv[0]);
        orch_pool__claim_drop(w);
        goto fail_env;
    }
    if (owned)
        free(envp);

    orch_pool__occupy(w, pid);
    w->wpid = pid;
    snprintf(w->host, sizeof w->host, "%s", p->host);
    w->fd = sv[0];
    int fl = fcntl(w->fd, F_GETFL);
    if (fl < 0 || fcntl(w->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        rc = -errno;
        goto fail_proc;
    }
    w->paused = false;
    w->ev_read = event_new(p->base, w->fd, EV_READ | EV_PERSIST, orch_pool__on_read, w);
    w->ev_write = event_new(p->base, w->fd, EV_WRITE, orch_pool__on_write, w);
    if (w->ev_read == NULL || w->ev_write == NULL || event_add(w->ev_read, NULL) < 0) {
        rc = -ENOMEM;
        goto fail_proc;
    }
    if (p->timeout_ms > 0) { /* a UDF whose init hangs must not hold its slot forever */
        struct timeval tv = ms_tv(INIT_TIMEOUT_FACTOR * p->timeout_ms);
        if (evtimer_add(w->timer, &tv) < 0) {
            rc = -ENOMEM;
            goto fail_proc;
        }
    }
    orch_pool__flush(w);
    return 0;

fail_proc:
    orch_pool__kill_pid(pid);
    orch_pool__close_channel(w);
    orch_pool__add_corpse(p, pid);
    orch_pool__live_del(w);
    orch_pool__set_state(w, W_DEAD);
    orch_pool__arm_poll(p);
    return rc;
fail_env:
    if (owned)
        free(envp);
    w->out.len = 0;
    (void)orch_pool__watch_children(p);
    return rc;
}
