/* reopen.c — `orch retry`: re-opening Failed grains and everything they sealed.
 *
 * A Failed grain's facts were terminal; `orch retry` is the one explicit exception
 * (DESIGN §1). Re-opening grain G takes back, in one transaction, every fact that exists
 * only because G failed: G's failed outputs (items, or the failed expansion), everything
 * sealed Suppressed because of them, transitively, and the suppression barrier G's
 * GroupFailure installed with the siblings it sealed. Those grains go back to WAITING
 * with generation+1; their attempt and failure rows stay as history. Then each is
 * evaluated again against the facts that remain (orch_prop_reconsider: the same rule as
 * everywhere): G itself becomes READY (its inputs are what they were), the others wait
 * for G's new outputs, or are sealed again at once if another input is still Failed. */
#include "prop_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "orch_error.h"
#include "support.h"

/* The grains re-opened so far, to evaluate again at the end. */
struct reopened {
    int64_t *grain;
    size_t n, cap;
};

static int reopen_push(struct reopened *L, int64_t grain)
{
    if (orch__grow_n(&L->grain, &L->cap, L->n + 1, sizeof *L->grain) < 0)
        return -ENOMEM;
    L->grain[L->n++] = grain;
    return 0;
}

static int reopen_grain(orch_prop *p, int stmt, int64_t grain, int64_t e, struct reopened *L);

/* Grain (stmt, e) consumed a fact being taken back: re-open it if that fact sealed it
 * (Suppressed), and evaluate it again at the end either way. */
static int retake(orch_prop *p, int stmt, int64_t e, struct reopened *L)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    struct orch_grain_row g;
    int rc = orch_store_grain_get(p->store, s->call, e, orch_prop_on_roots(p, s), &g);
    if (rc < 0)
        return rc;
    if (g.phase == ORCH_PHASE_WAITING)
        return reopen_push(L, g.id);
    if (g.phase == ORCH_PHASE_SEALED && g.outcome == ORCH_OUTCOME_SUPPRESSED)
        return reopen_grain(p, stmt, g.id, e, L);
    return 0;
}

static int unresolve_item(orch_prop *p, int port, int64_t e, struct reopened *L);

static int retake_grain(orch_prop *p, int stmt, int64_t e, const struct prop_visit *v)
{
    return retake(p, stmt, e, v->ctx);
}

static int retake_copy(orch_prop *p, int port, int64_t e, const struct prop_visit *v)
{
    return unresolve_item(p, port, e, v->ctx);
}

static int unresolve_item(orch_prop *p, int port, int64_t e, struct reopened *L)
{
    bool taken;
    int rc = orch_store_item_take_back(p->store, port, e, &taken);
    if (rc < 0 || !taken)
        return rc; /* present, dropped or not there: nothing of it is taken back */
    struct prop_visit v = {.grain = retake_grain, .copy = retake_copy, .ctx = L};
    return orch_prop_for_each_consumer(p, port, e, &v);
}

static int reopen_grain(orch_prop *p, int stmt, int64_t grain, int64_t e, struct reopened *L)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    bool done;
    int rc = orch_store_grain_reopen(p->store, grain, &done);
    if (rc < 0 || !done)
        return rc; /* already re-opened through another path */
    orch_prop_reopened(p);
    if ((rc = reopen_push(L, grain)) < 0)
        return rc;
    if (s->op == ORCH_OP_EXPAND) {
        if ((rc = orch_store_expansion_take_back(p->store, s->call, e)) < 0)
            return rc;
        const struct dom_topo *t = &p->dom[s->target];
        for (int i = 0; i < t->nexp && rc == 0; i++)
            rc = retake(p, t->exp_deps[i], e, L);
        return rc;
    }
    if (s->op == ORCH_OP_EXPAND_ALIGNED) {
        int64_t *kids;
        size_t n;
        if ((rc = orch_store_children(p->store, e, s->target, &kids, &n)) < 0)
            return rc;
        for (size_t c = 0; c < n && rc == 0; c++)
            for (int o = 0; o < s->nout && rc == 0; o++)
                rc = unresolve_item(p, s->out[o], kids[c], L);
        free(kids);
        return rc;
    }
    for (int o = 0; o < s->nout && rc == 0; o++)
        rc = unresolve_item(p, s->out[o], e, L);
    return rc;
}

/* The GroupFailure barrier of failed grain f, if it raised one, goes, and the siblings
 * it sealed are taken back with it. */
static int reopen_barrier(orch_prop *p, const struct orch_grain_row *f, struct reopened *L)
{
    if (!f->parent)
        return 0;
    bool taken;
    int rc = orch_store_barrier_take_back(p->store, f->id, &taken);
    if (rc < 0 || !taken)
        return rc;
    int stmt = orch_plan_call(p->plan, f->call)->stmt;
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int64_t *kids;
    size_t n;
    if ((rc = orch_store_children(p->store, f->parent, s->domain, &kids, &n)) < 0)
        return rc;
    for (size_t k = 0; k < n && rc == 0; k++)
        if (kids[k] != f->entity)
            rc = retake(p, stmt, kids[k], L);
    free(kids);
    return rc;
}

/* qsort order: by the ready_seq a grain had (0: never READY, last), then by id. */
static int by_first_ready(const void *a, const void *b)
{
    const struct orch_grain_row *x = a, *y = b;
    uint64_t sx = x->seq > 0 ? (uint64_t)x->seq : UINT64_MAX;
    uint64_t sy = y->seq > 0 ? (uint64_t)y->seq : UINT64_MAX;
    if (sx != sy)
        return sx < sy ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int orch_prop_reopen_failed(orch_prop *p, int call, int64_t *reopened)
{
    assert(orch_store_in_txn(p->store));
    *reopened = 0;
    struct reopened L = {0};
    struct orch_grain_row *failed;
    size_t nf;
    int rc = orch_store_grains_failed(p->store, call, &failed, &nf);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < nf && rc == 0; i++) {
        if ((rc = reopen_barrier(p, &failed[i], &L)) == 0)
            rc = reopen_grain(p, orch_plan_call(p->plan, failed[i].call)->stmt, failed[i].id,
                              failed[i].entity, &L);
    }
    /* Evaluated again in the order they first became READY (never READY: last, by id),
     * not in the order they were taken back: a GroupFailure's siblings are taken back
     * before the failed grain, and made READY first they would run before it fails
     * again, and come out Present where the run sealed them Suppressed. */
    struct orch_grain_row *rows = NULL;
    if (rc == 0 && L.n > 0 && !(rows = calloc(L.n, sizeof *rows)))
        rc = -ENOMEM;
    for (size_t i = 0; i < L.n && rc == 0; i++)
        rc = orch_store_grain_by_id(p->store, L.grain[i], &rows[i]);
    if (rc == 0 && L.n > 1)
        qsort(rows, L.n, sizeof *rows, by_first_ready);
    for (size_t i = 0; i < L.n && rc == 0; i++) {
        /* Read again: evaluating one grain may have settled another of the list. */
        struct orch_grain_row g;
        if ((rc = orch_store_grain_by_id(p->store, rows[i].id, &g)) == 0)
            rc = orch_prop_reconsider(p, orch_plan_call(p->plan, g.call)->stmt, &g);
    }
    if (rc == 0)
        *reopened = (int64_t)L.n;
    free(rows);
    free(L.grain);
    free(failed);
    return rc;
}
