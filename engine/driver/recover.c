/* recover.c — taking over what a stopped driver left in the store (driver_int.h). */
#include "driver_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "launch.h"
#include "orch_facts.h"

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

/* A Slurm job of a stopped driver's worker: srun ends it when the driver dies (SIGTERM),
 * but not when srun died with it (kill -9 of its process group, a lost node): Slurm then
 * keeps the job RUNNING without a step. Cancelled here (launch.h), once per job; a job that
 * ended meanwhile makes scancel say nothing. */
static int cancel_left(void *ctx, const char *job)
{
    struct orch_driver *d = ctx;
    char target[ORCH_SLURM_ID_MAX];
    if (orch_launcher_cancel(d->launcher, job, target) == 0)
        fprintf(stderr, "orch: scancel %s: its worker (step %s) had an attempt open when the "
                        "last driver stopped\n", target, job);
    return 0;
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
        rc = orch_store_open_slurm_jobs(st, cancel_left, d);
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
    return orch_store_commit(st);
}
