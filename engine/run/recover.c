/* recover.c — taking over what a stopped driver left in the store (run_int.h). */
#include "run_int.h"

#include <errno.h>
#include <stdlib.h>

#include "support.h"

int orch_sched_next_seq(orch_store *store, int64_t *out)
{
    sqlite3_stmt *q;
    int rc = orch_store_prepare(store, "SELECT next_ready_seq FROM job WHERE id = 1", &q);
    if (rc < 0)
        return rc;
    *out = 1;
    if ((rc = orch_store_step(store, q)) == 1)
        *out = sqlite3_column_int64(q, 0);
    sqlite3_reset(q);
    return rc < 0 ? rc : 0;
}

/* Grains that were in flight under a GroupFailure barrier: their reports would not have
 * been committed, so they are sealed Suppressed now rather than put back to READY, which
 * would dispatch them under the barrier (DESIGN §4). Inside recover's transaction. */
static int recover_barred(struct orch_sched *d)
{
    orch_store *st = d->job->store;
    sqlite3_stmt *q = NULL;
    int rc = orch_store_prepare(st,
                                "SELECT g.id, g.call_id, g.entity_id, e.parent_id, "
                                "g.generation FROM grain AS g JOIN entity AS e "
                                "ON e.id = g.entity_id JOIN suppression AS s "
                                "ON s.call_id = g.call_id AND s.parent_id = e.parent_id "
                                "WHERE g.phase = 'in_flight'",
                                &q);
    struct orch_grain_ref *v = NULL;
    size_t n = 0, cap = 0;
    while (rc >= 0 && (rc = orch_store_step(st, q)) == 1) {
        if (orch__grow_n(&v, &cap, n + 1, sizeof *v) < 0) {
            rc = -ENOMEM;
            break;
        }
        v[n++] = (struct orch_grain_ref){.grain = sqlite3_column_int64(q, 0),
                                         .call = sqlite3_column_int(q, 1),
                                         .entity = sqlite3_column_int64(q, 2),
                                         .parent = sqlite3_column_int64(q, 3),
                                         .generation = (uint32_t)sqlite3_column_int64(q, 4)};
    }
    if (q)
        sqlite3_reset(q);
    for (size_t i = 0; i < n && rc >= 0; i++) {
        bool sealed;
        rc = orch_prop_barred(d->prop, &v[i], &sealed);
    }
    free(v);
    return rc < 0 ? rc : 0;
}

/* The READY grains of call c, in ready_seq order, into its queue, each with the attempts
 * charged against retries: the attempt failures since the grain's last terminal failure
 * (a grain re-opened by `orch retry` starts afresh). */
static int requeue_ready(struct orch_sched *d, int c)
{
    orch_store *st = d->job->store;
    sqlite3_stmt *q;
    int rc = orch_store_prepare(st,
                                "SELECT g.id, g.entity_id, coalesce(e.parent_id, 0), "
                                "g.generation, g.ready_seq, (SELECT count(*) FROM failure "
                                "AS f WHERE f.grain_id = g.id AND f.kind IN ('error', "
                                "'crash', 'timeout') AND f.generation > coalesce((SELECT "
                                "max(t.generation) FROM failure AS t WHERE t.grain_id = "
                                "g.id AND t.kind IN ('record', 'group', 'exhausted')), -1)) "
                                "FROM grain AS g JOIN entity AS e "
                                "ON e.id = g.entity_id WHERE g.call_id = ? "
                                "AND g.phase = 'ready' ORDER BY g.ready_seq",
                                &q);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(q, 1, c);
    while ((rc = orch_store_step(st, q)) == 1) {
        struct orch_sched_qent e = {.g = {.in0_state = -1,
                                          .grain = sqlite3_column_int64(q, 0),
                                          .call = c,
                                          .entity = sqlite3_column_int64(q, 1),
                                          .parent = sqlite3_column_int64(q, 2),
                                          .generation = (uint32_t)sqlite3_column_int64(q, 3),
                                          .seq = sqlite3_column_int64(q, 4),
                                          .attempts = (uint32_t)sqlite3_column_int64(q, 5)}};
        if ((rc = orch_sched_queue_push(&d->calls[c].q, &e)) < 0)
            break;
    }
    sqlite3_reset(q);
    return rc < 0 ? rc : 0;
}

/* Grains IN_FLIGHT when the last driver stopped go back to READY with generation+1 (an
 * interruption: not counted against retries), keeping their ready_seq; their open
 * attempts are closed as interrupted. Then the queues are rebuilt in ready_seq order,
 * which is the order they had. */
int orch_sched_recover(struct orch_sched *d)
{
    orch_store *st = d->job->store;
    int rc = orch_store_begin(st);
    if (rc < 0)
        return rc;
    sqlite3_stmt *q;
    if ((rc = orch_store_prepare(st,
                                 "UPDATE attempt SET outcome = 'interrupted', "
                                 "ended_at = ? WHERE outcome IS NULL",
                                 &q)) == 0) {
        sqlite3_bind_int64(q, 1, orch_sched_now_ms());
        rc = orch_store_step(st, q);
        sqlite3_reset(q);
    }
    if (rc >= 0)
        rc = recover_barred(d);
    if (rc >= 0)
        rc =
            orch_store_exec(st, "UPDATE grain SET phase = 'ready', generation = generation + 1 "
                                "WHERE phase = 'in_flight'");
    if (rc >= 0 &&
        (rc = orch_store_prepare(st, "SELECT coalesce(max(batch), 0) FROM attempt", &q)) == 0) {
        if ((rc = orch_store_step(st, q)) == 1)
            d->next_batch = (uint64_t)sqlite3_column_int64(q, 0);
        sqlite3_reset(q);
    }
    int64_t unsealed = 0;
    if (rc >= 0 && (rc = orch_store_prepare(st,
                                            "SELECT count(*) FROM grain "
                                            "WHERE phase <> 'sealed'",
                                            &q)) == 0) {
        if ((rc = orch_store_step(st, q)) == 1)
            unsealed = sqlite3_column_int64(q, 0);
        sqlite3_reset(q);
    }
    orch_prop_set_unsealed(d->prop, unsealed);
    /* What earlier runs sealed, so that progress counts the whole job. */
    if (rc >= 0 && (rc = orch_store_prepare(st,
                                            "SELECT call_id, outcome, count(*) FROM grain "
                                            "WHERE phase = 'sealed' GROUP BY 1, 2",
                                            &q)) == 0) {
        while ((rc = orch_store_step(st, q)) == 1) {
            int o = orch_grain_outcome_parse((const char *)sqlite3_column_text(q, 1));
            if (o >= 0)
                orch_prop_add_sealed(d->prop, sqlite3_column_int(q, 0), o,
                                     sqlite3_column_int64(q, 2));
        }
        sqlite3_reset(q);
    }
    for (int c = 0; c < d->ncalls && rc >= 0; c++)
        if (d->calls[c].pool)
            rc = requeue_ready(d, c);
    if (rc >= 0)
        rc = orch_store_job_set_status(st, ORCH_JOB_RUNNING);
    if (rc < 0) {
        orch_store_rollback(st);
        return rc;
    }
    return orch_store_commit(st);
}
