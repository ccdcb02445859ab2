/* recover.c — taking over what a stopped driver left in the store (driver_int.h). */
#include "driver_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"
#include "orch_facts.h"
#include "orch_slurm_start.h"
#include "support.h"

/* Grains that were in flight under a GroupFailure barrier (every unsealed one: the barrier
 * sealed the others): their reports would not have been committed, so they are sealed
 * Suppressed now rather than put back to READY, which would dispatch them under the
 * barrier (DESIGN §4). Inside recover's transaction. */
static int recover_barred(struct orch_driver *d)
{
    struct orch_grain_row *v;
    size_t n;
    int rc = orch_store_grains_barred_in_flight(d->job->store, &v, &n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct orch_grain_ref g = {.grain = v[i].id,
                                   .call = v[i].call,
                                   .entity = v[i].entity,
                                   .parent = v[i].parent,
                                   .generation = v[i].generation};
        bool sealed;
        rc = orch_prop_barred(d->prop, &g, &sealed);
    }
    free(v);
    return rc;
}

/* A READY grain back in its call's queue. Only a call with a statement has a pool, and
 * grains (dispatch.c); the check keeps a grain of any other out of the queues. */
static int requeue_one(void *ctx, const struct orch_grain_row *r)
{
    struct orch_driver *d = ctx;
    if (r->call < 0 || r->call >= d->ncalls || !d->calls[r->call].pool)
        return 0;
    struct orch_queue_entry e = {.g = {.in0_state = -1,
                                       .grain = r->id,
                                       .call = r->call,
                                       .entity = r->entity,
                                       .parent = r->parent,
                                       .generation = r->generation,
                                       .seq = r->seq,
                                       .attempts = r->attempts}};
    return orch_queue_push(&d->calls[r->call].q, &e);
}

static void count_sealed(void *ctx, int call, enum orch_grain_outcome o, int64_t n)
{
    orch_prop_add_sealed(ctx, call, o, n);
}

/* The Slurm steps cancelled by the recovery, so that each is cancelled once. */
struct cancelled {
    struct orch_driver *d;
    char (*step)[ORCH_SLURM_ID_MAX];
    size_t n, cap;
};

static bool was_cancelled(const struct cancelled *c, const char *step)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->step[i], step) == 0)
            return true;
    return false;
}

/* A Slurm job of a stopped driver's worker: srun ends it when the driver dies (SIGTERM),
 * but not when srun died with it (kill -9 of its process group, a lost node): Slurm then
 * keeps the job RUNNING without a step. Cancelled here (launch.h), once per job; a job that
 * ended meanwhile makes scancel say nothing. */
static int cancel_left(void *ctx, const char *job)
{
    struct cancelled *c = ctx;
    char target[ORCH_SLURM_ID_MAX];
    if (strlen(job) < ORCH_SLURM_ID_MAX && !was_cancelled(c, job) &&
        orch__grow_n(&c->step, &c->cap, c->n + 1, sizeof *c->step) == 0)
        snprintf(c->step[c->n++], ORCH_SLURM_ID_MAX, "%s", job);
    if (orch_launcher_cancel(c->d->launcher, job, target) == 0)
        fprintf(stderr, "orch: scancel %s: its worker (step %s) had an attempt open when the "
                        "last driver stopped\n", target, job);
    return 0;
}

/* Every other worker a stopped driver started (migrations/0022_slurm_start.sql): one that
 * had no attempt open (it was starting, idle, or held a batch not started yet) leaves its
 * job RUNNING all the same when its srun died with the driver. Cancelled by its step when
 * its worker said which, else by the start's job name. */
static int cancel_started(void *ctx, const char *name, const char *call, const char *step)
{
    struct cancelled *c = ctx;
    if (step && step[0]) {
        char target[ORCH_SLURM_ID_MAX];
        if (!was_cancelled(c, step) && orch_launcher_cancel(c->d->launcher, step, target) == 0)
            fprintf(stderr, "orch: scancel %s: the last driver's %s worker (step %s) had no "
                            "attempt open\n", target, call, step);
        return 0;
    }
    char target[ORCH_SLURM_NAME_MAX];
    if (orch_launcher_cancel_name(c->d->launcher, name, target) == 0)
        fprintf(stderr, "orch: scancel %s: the last driver's %s worker had not connected\n",
                target, call);
    return 0;
}

/* Cancels the jobs of a stopped driver's workers (a resume with --launcher slurm): those
 * of the attempts it left open, then those of every start it recorded, which are then
 * forgotten. Inside recover's transaction, before the open attempts are closed. */
static int cancel_slurm_jobs(struct orch_driver *d)
{
    orch_store *st = d->job->store;
    struct cancelled c = {.d = d};
    int rc = orch_store_open_slurm_jobs(st, cancel_left, &c);
    if (rc == 0)
        rc = orch_store_slurm_starts(st, cancel_started, &c);
    if (rc == 0)
        rc = orch_store_slurm_starts_clear(st);
    free(c.step);
    return rc;
}

/* Grains in flight when the last driver stopped (an open attempt) go back to READY with
 * generation+1 (an interruption: not counted against retries), keeping their ready_seq
 * (0, the head of the queue, for one whose READY was never written); their open attempts
 * are closed as interrupted. Then the queues are rebuilt in ready_seq order,
 * which is the order they had, each grain with the attempts charged against its retries
 * (the attempt failures since its last terminal failure: a grain re-opened by `orch
 * retry` starts afresh). */
int orch_driver_recover(struct orch_driver *d)
{
    orch_store *st = d->job->store;
    int64_t unsealed = 0;
    int rc = orch_store_begin(st);
    if (rc < 0)
        return rc;
    /* The grains in flight are those with an open attempt: taken back before their attempts
     * are closed. Their Slurm jobs first (a resume with --launcher slurm). */
    if (d->launcher)
        rc = cancel_slurm_jobs(d);
    if (rc == 0 && (rc = recover_barred(d)) == 0 &&
        (rc = orch_store_grains_interrupt(st)) == 0 &&
        (rc = orch_store_attempts_interrupt(st)) == 0 &&
        (rc = orch_store_attempt_last_batch(st, &d->next_batch)) == 0 &&
        (rc = orch_store_grains_unsealed(st, &unsealed)) == 0)
        /* What earlier runs sealed, so that progress counts the whole job. */
        rc = orch_store_grains_sealed_counts(st, count_sealed, d->prop);
    orch_prop_set_unsealed(d->prop, unsealed);
    if (rc == 0)
        rc = orch_store_grains_ready(st, requeue_one, d);
    if (rc == 0) /* for `orch status` */
        rc = orch_store_budgets_set(st, d->max_unsealed, d->max_live);
    if (rc == 0)
        rc = orch_store_job_set_status(st, ORCH_JOB_RUNNING);
    if (rc < 0) {
        orch_store_rollback(st);
        return rc;
    }
    if ((rc = orch_store_commit(st)) == 0)
        d->slurm_books = d->launcher != NULL;
    return rc;
}
