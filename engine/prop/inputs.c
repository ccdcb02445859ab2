/* inputs.c — what a READY grain's worker is sent: its input values, list by list. */
#include "prop_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "support.h"

static int push_val(struct orch_prop_inputs *in, uint64_t payload, bool present)
{
    if (orch__grow_n(&in->vals, &in->cap, in->nvals + 1, sizeof *in->vals) < 0)
        return -ENOMEM;
    in->vals[in->nvals].payload = present ? payload : 0;
    in->vals[in->nvals].present = present;
    in->nvals++;
    return 0;
}

/* A map, filter or expand: one value per input, read from its items. */
static int entity_inputs(orch_prop *p, const struct orch_grain_ref *g, const struct orch_stmt *s,
                         struct orch_prop_inputs *in)
{
    for (int i = 0; i < s->nin; i++) {
        enum orch_item_state state;
        uint64_t payload = 0;
        int rc = orch_store_item_get(p->store, s->in[i].port, g->entity, &state, &payload);
        if (rc < 0)
            return rc;
        if (rc == 0)
            return orch_error_set(ORCH_ECORRUPT,
                                  "grain %lld is ready but its input %s is not terminal",
                                  (long long)g->grain,
                                  orch_plan_port(p->plan, s->in[i].port)->qualified);
        in->nval[i] = 1;
        if ((rc = push_val(in, payload, state == ORCH_ITEM_PRESENT)) < 0)
            return rc;
        if (i == 0)
            in->first_input = payload;
    }
    return 0;
}

/* Appends the values of child `kid` of reduce grain g when it survives (none of its
 * required inputs Dropped), child-major: its nin values one after the other. */
static int push_child(orch_prop *p, const struct orch_grain_ref *g, const struct orch_stmt *s,
                      int64_t kid, struct orch_prop_inputs *in)
{
    enum orch_item_state state[ORCH_PLAN_MAX_INPUTS];
    uint64_t payload[ORCH_PLAN_MAX_INPUTS];
    int rc = 0;
    for (int i = 0; i < s->nin; i++) {
        payload[i] = 0;
        rc = orch_store_item_get(p->store, s->in[i].port, kid, &state[i], &payload[i]);
        if (rc == 0)
            return orch_error_set(ORCH_ECORRUPT,
                                  "reduce grain %lld is ready but a child input is not "
                                  "terminal",
                                  (long long)g->grain);
        if (rc < 0)
            return rc;
        if (state[i] != ORCH_ITEM_PRESENT && !s->in[i].optional)
            return 0;
    }
    for (int i = 0; i < s->nin; i++)
        in->nval[i]++;
    for (int i = 0; i < s->nin && rc >= 0; i++)
        rc = push_val(in, payload[i], state[i] == ORCH_ITEM_PRESENT);
    return rc < 0 ? rc : 0;
}

/* A reduce: the surviving children in ordinal order, every list the same children. A
 * child survives when none of its required inputs is Dropped. Each input's items of every
 * child are read in one statement. */
static int reduce_inputs(orch_prop *p, const struct orch_grain_ref *g, const struct orch_stmt *s,
                         struct orch_prop_inputs *in)
{
    struct orch_child_item *items[ORCH_PLAN_MAX_INPUTS] = {0};
    size_t n = 0;
    int rc = 0, child = orch_prop_reduce_child(p->plan, s);
    for (int i = 0; i < s->nin && rc == 0; i++) {
        size_t ni;
        in->nval[i] = 0;
        rc = orch_store_child_item_list(p->store, s->in[i].port, g->entity, child, &items[i],
                                        &ni);
        if (rc == 0 && i > 0 && ni != n) /* one transaction: the same children */
            rc = orch_error_set(ORCH_ECORRUPT, "reduce grain %lld: its inputs list %zu and "
                                "%zu children", (long long)g->grain, n, ni);
        n = ni;
    }
    for (size_t k = 0; k < n && rc == 0; k++) {
        bool keep = true;
        for (int i = 0; i < s->nin && rc == 0; i++) {
            if (items[i][k].state < 0)
                rc = orch_error_set(ORCH_ECORRUPT,
                                    "reduce grain %lld is ready but a child input is not "
                                    "terminal",
                                    (long long)g->grain);
            else if (items[i][k].state != ORCH_ITEM_PRESENT && !s->in[i].optional)
                keep = false;
        }
        if (rc < 0 || !keep)
            continue;
        /* Appended child by child; regrouped list by list below. */
        for (int i = 0; i < s->nin; i++)
            in->nval[i]++;
        for (int i = 0; i < s->nin && rc == 0; i++)
            rc = push_val(in, items[i][k].payload, items[i][k].state == ORCH_ITEM_PRESENT);
    }
    for (int i = 0; i < s->nin; i++)
        free(items[i]);
    if (rc < 0)
        return rc;
    /* Regroup into list-major order (nothing to do for no surviving child: malloc(0) may
     * return NULL). */
    if (s->nin > 1 && in->nvals > 0) {
        struct orch_wire_value *tmp = malloc(in->nvals * sizeof *tmp);
        if (!tmp)
            return -ENOMEM;
        size_t nk = in->nvals / (size_t)s->nin;
        for (size_t k = 0; k < nk; k++)
            for (int i = 0; i < s->nin; i++)
                tmp[(size_t)i * nk + k] = in->vals[k * (size_t)s->nin + (size_t)i];
        memcpy(in->vals, tmp, in->nvals * sizeof *tmp);
        free(tmp);
    }
    return 0;
}

int orch_prop_inputs(orch_prop *p, const struct orch_grain_ref *g, struct orch_prop_inputs *in)
{
    const struct orch_call *c = orch_plan_call(p->plan, g->call);
    const struct orch_stmt *s = orch_plan_stmt(p->plan, c->stmt);
    in->nvals = 0;
    in->first_input = 0;
    if (s->op == ORCH_OP_REDUCE)
        return reduce_inputs(p, g, s, in);
    if (g->in0_state >= 0) { /* known as it became READY: no look-up */
        assert(s->nin == 1);
        in->nval[0] = 1;
        in->first_input = g->in0_state == ORCH_ITEM_PRESENT ? g->in0 : 0;
        return push_val(in, g->in0, g->in0_state == ORCH_ITEM_PRESENT);
    }
    return entity_inputs(p, g, s, in);
}

int orch_prop_reduce_page(orch_prop *p, const struct orch_grain_ref *g, int64_t *after,
                          size_t max, struct orch_prop_inputs *in, bool *last)
{
    const struct orch_call *c = orch_plan_call(p->plan, g->call);
    const struct orch_stmt *s = orch_plan_stmt(p->plan, c->stmt);
    int64_t kids[ORCH_PROP_PAGE_MAX];
    size_t n;
    assert(s->op == ORCH_OP_REDUCE && max >= 1);
    if (max > ORCH_PROP_PAGE_MAX)
        max = ORCH_PROP_PAGE_MAX;
    in->nvals = 0;
    in->first_input = 0;
    for (int i = 0; i < s->nin; i++)
        in->nval[i] = 0;
    int rc = orch_store_children_page(p->store, g->entity, orch_prop_reduce_child(p->plan, s),
                                      *after, max, kids, &n, after);
    for (size_t k = 0; k < n && rc == 0; k++)
        rc = push_child(p, g, s, kids[k], in);
    *last = n < max;
    return rc;
}

int orch_prop_reduce_children(orch_prop *p, const struct orch_grain_ref *g, int64_t *n)
{
    const struct orch_call *c = orch_plan_call(p->plan, g->call);
    const struct orch_stmt *s = orch_plan_stmt(p->plan, c->stmt);
    assert(s->op == ORCH_OP_REDUCE);
    return orch_store_children_count(p->store, g->entity, orch_prop_reduce_child(p->plan, s), n);
}

void orch_prop_inputs_free(struct orch_prop_inputs *in)
{
    free(in->vals);
    in->vals = NULL;
    in->nvals = in->cap = 0;
}
