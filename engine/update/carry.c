/* carry.c — an edited pipeline keeps what still holds (DESIGN §10; update.h).
 *
 * `orch update DIR PIPELINE` with an edit that changes what some ports compute adopts the
 * edited plan (aligned with the job's: every domain, call and port keeps its id), and its
 * rescan gives every live root a new revision (orch_update_replan): the roots come back,
 * with the same keys and values, and their grains are made as for any root; each old one
 * is retired for "plan" in the transaction that admits its successor, which is the turn
 * that carries what can be carried, so a reader sees its items until theirs replace them.
 * When such a grain becomes READY, it may take its result from its twin instead of running:
 * the grain of the same call on the entity with the same key path in the root's previous
 * revision (orch_store_twin). It does when
 *
 *   - the call computes what it computed: every port its statement outputs has the same
 *     fingerprint in both plans (engine/plan/fingerprint.c: function, arguments, inputs'
 *     fingerprints, the domain's expansion); its inputs then hold what the twin's held
 *     (they come from the same source values through the same computations), so its
 *     outputs are the twin's;
 *   - the twin was sealed OK or Dropped (a failure is not carried: an edit is often a fix,
 *     and a fresh run would try again);
 *   - what it produced can be handed on: every output item is Present (every child's,
 *     for an expansion: a failed child is not carried) and either its bytes are still
 *     there, or no grain that may run reads them (the demand, below);
 *   - a filter's verdict always can (it names its input's payload, which is carried or
 *     computed on its own account).
 *
 * The demand, per plan, at orch_carry_open. A port's bytes are *needed* when a fresh run
 * of the plan keeps them (its family — the port and the filters and broadcasts that pass
 * its ids on, reclaim.c — has an `output`, or the plan has none) or when a call that may
 * run reads a port of its family. A call may run when it computes anew (changed, new,
 * downstream of those, --rerun), or when it computes what it did but some needed output
 * of it was reclaimed in the revisions being replaced (orch_store_twins_reclaimed): its
 * grains on those must run, so what they read is needed too; to a fixpoint. A call left
 * as it was none of whose outputs is needed is *bare*: its grains are carried even when
 * their twins' bytes were reclaimed, and the new items name the same freed ids, in the
 * same state as the twins' (Present, `reclaimed` in export and the items view, no size
 * recorded; a fresh run reclaims them too: nothing it keeps is among them). Reading such
 * an item again would be an error, and nothing does:
 *
 *   - a grain that runs because its call may run reads only needed ports, whose
 *     producers ran or were carried with their bytes;
 *   - a grain that runs although its call is left as it was and bare, because its twin
 *     failed, was suppressed or never sealed: the twin's inputs, on the same entities
 *     and with the same ids, were kept (reclaim.c frees an id only once every reader of
 *     its family on that entity sealed OK or Dropped);
 *   - a grain without a twin (a new root; a child of an expansion that runs again because
 *     its twin did not seal OK) reads what its own tree computed, and its ancestors'
 *     ports only through broadcasts, whose families are freed only at the end of a job
 *     without any Failed or Suppressed grain (reclaim.c): its twin expansion's failure
 *     kept them;
 *   - a grain that a resume finds READY or in flight ran under one of the rules above
 *     (carrying happens in the turn that makes a grain READY, and what can be carried
 *     never commits READY); a resume recomputes the demand with the ids reclaimed since,
 *     which only adds what is needed.
 *
 * Carrying an item whose id was freed earlier makes its readers' seals meet that id again:
 * reclaim.c looks each id up before it frees it (orch_prop_reclaim_recheck).
 *
 * Carrying is the path of a worker's report without the worker: the grain goes IN_FLIGHT
 * and its answer — the twin's payload ids, its children, its drop or its filter verdict —
 * is applied by orch_prop_report in the same turn, so everything downstream follows as
 * usual, and nothing of it is committed in flight. No attempt row is written: the attempt
 * table shows what ran. A payload id carried is then named by two items (the retired
 * revision's and the new one's), as a filter's or a broadcast's ids are.
 *
 * Grains found READY by a resume (recover.c) are queued as usual and run: a crash during
 * an edited update costs some work, never a wrong result. */
#include "update.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "orch_facts.h"
#include "orch_lang.h"
#include "support.h"

struct orch_carry {
    orch_store *store;
    const orch_plan *plan;
    bool *same; /* by call: every port of its statement computes what it computed */
    bool *bare; /* by call: no grain that may run reads its outputs' bytes (demand) */
    struct orch_grain_ref *list; /* READY grains to look at, this turn */
    size_t n, cap;
    uint64_t *ids; /* the answer's payload ids, reused */
    size_t cap_ids;
};

/* Marks port's family needed (its bytes read by a grain that may run): 1 when it was not. */
static int need(const orch_plan *plan, bool *needed, int port)
{
    int root = orch_prop_family(plan, port);
    if (needed[root])
        return 0;
    needed[root] = true;
    return 1;
}

/* The demand of the plan (see the top of this file) into c->bare. */
static int demand(struct orch_carry *c, const orch_plan *plan)
{
    int ncalls = orch_plan_ncalls(plan), nports = orch_plan_nports(plan);
    bool *needed = calloc((size_t)nports + 1, sizeof *needed);
    bool *runs = calloc((size_t)ncalls + 1, sizeof *runs);
    bool *asked = calloc((size_t)nports + 1, sizeof *asked);
    c->bare = calloc((size_t)ncalls + 1, sizeof *c->bare);
    int rc = needed && runs && asked && c->bare ? 0 : -ENOMEM;
    bool any_output = false;
    for (int i = 0; i < nports; i++)
        any_output = any_output || orch_plan_port(plan, i)->output;
    /* What a fresh run keeps: every `output` family, everything when none is said. */
    for (int i = 0; rc == 0 && i < nports; i++)
        if (!any_output || orch_plan_port(plan, i)->output)
            (void)need(plan, needed, i);
    for (int k = 0; rc == 0 && k < ncalls; k++)
        runs[k] = orch_plan_call(plan, k)->stmt >= 0 && !c->same[k];
    /* To a fixpoint: what a call that may run reads is needed; a call that computes what
     * it did, whose needed outputs were reclaimed somewhere in the revisions replaced,
     * may run (there), so what it reads is needed too. */
    for (bool more = rc == 0; more && rc == 0;) {
        more = false;
        for (int k = 0; k < ncalls; k++) {
            const struct orch_call *cl = orch_plan_call(plan, k);
            if (!runs[k])
                continue;
            const struct orch_stmt *s = orch_plan_stmt(plan, cl->stmt);
            for (int i = 0; i < s->nin; i++)
                more |= need(plan, needed, s->in[i].port) != 0;
        }
        for (int i = 0; rc == 0 && i < nports; i++) {
            const struct orch_port *pt = orch_plan_port(plan, i);
            if (!needed[i] || asked[i] || pt->producer < 0 ||
                orch_prop_family(plan, i) != i)
                continue;
            int call = orch_plan_stmt(plan, pt->producer)->call;
            bool gone = false;
            asked[i] = true;
            if (call < 0 || runs[call] ||
                (rc = orch_store_twins_reclaimed(c->store, i, &gone)) < 0 || !gone)
                continue;
            runs[call] = more = true;
        }
    }
    for (int k = 0; rc == 0 && k < ncalls; k++) {
        const struct orch_call *cl = orch_plan_call(plan, k);
        if (cl->stmt < 0 || !c->same[k])
            continue;
        const struct orch_stmt *s = orch_plan_stmt(plan, cl->stmt);
        bool bare = true;
        for (int i = 0; i < s->nout; i++)
            bare = bare && !needed[orch_prop_family(plan, s->out[i])];
        c->bare[k] = bare;
    }
    free(needed);
    free(runs);
    free(asked);
    return rc;
}

int orch_carry_open(orch_store *st, const orch_plan *plan, int64_t update, int64_t update_plan,
                    struct orch_carry **out)
{
    *out = NULL;
    if (!update_plan)
        return 0;
    char *text = NULL;
    int rc = orch_store_plan_previous(st, update_plan, &text);
    if (rc <= 0)
        return rc;
    int ncalls = orch_plan_ncalls(plan);
    orch_plan *old = NULL;
    char (*fo)[65] = NULL, (*fn)[65] = NULL;
    struct orch_carry *c = calloc(1, sizeof *c);
    rc = c && (c->same = calloc((size_t)ncalls + 1, sizeof *c->same)) ? 0 : -ENOMEM;
    if (rc == 0 && (rc = orch_plan_from_canonical(text, &old)) < 0)
        rc = orch_error_set(ORCH_ECORRUPT, "the job's previous plan does not compile: %s",
                            orch_error_detail());
    /* --rerun: the calls named, and everything downstream of them, compute "anew". */
    char *rerun = NULL;
    bool *salted = NULL;
    if (rc == 0 && (rc = orch_store_update_rerun(st, update, &rerun)) == 0 && rerun &&
        !(salted = calloc((size_t)ncalls + 1, sizeof *salted)))
        rc = -ENOMEM;
    for (char *name = rerun ? strtok(rerun, ",") : NULL; rc == 0 && name;
         name = strtok(NULL, ",")) {
        int k = orch_plan_find_call(plan, name);
        if (k >= 0)
            salted[k] = true;
    }
    if (rc == 0 && (rc = orch_plan_fingerprints(old, &fo)) == 0)
        rc = orch_plan_fingerprints_salted(plan, salted, "rerun", &fn);
    free(rerun);
    free(salted);
    for (int k = 0; rc == 0 && k < ncalls; k++) {
        const struct orch_call *cl = orch_plan_call(plan, k);
        if (cl->stmt < 0)
            continue;
        const struct orch_stmt *s = orch_plan_stmt(plan, cl->stmt);
        bool same = true;
        for (int i = 0; i < s->nout && same; i++) {
            /* By name: an edit that added a source moved the statements' ports up. */
            int port = s->out[i];
            int was = orch_plan_find_port(old, orch_plan_port(plan, port)->qualified);
            same = was >= 0 && strcmp(fo[was], fn[port]) == 0;
        }
        c->same[k] = same;
    }
    free(fo);
    free(fn);
    orch_plan_free(old);
    free(text);
    if (rc == 0)
        c->store = st;
    if (rc == 0 && (rc = demand(c, plan)) < 0)
        free(c->bare);
    if (rc < 0) {
        if (c)
            free(c->same);
        free(c);
        return rc;
    }
    c->plan = plan;
    *out = c;
    return 0;
}

void orch_carry_free(struct orch_carry *c)
{
    if (!c)
        return;
    free(c->same);
    free(c->bare);
    free(c->list);
    free(c->ids);
    free(c);
}

int orch_carry_push(struct orch_carry *c, const struct orch_grain_ref *g)
{
    if (!c || !c->same[g->call])
        return 0;
    if (orch__grow_n(&c->list, &c->cap, c->n + 1, sizeof *c->list) < 0)
        return -ENOMEM;
    c->list[c->n++] = *g;
    return 1;
}

/* Room for n payload ids in c->ids. */
static int ids_fit(struct orch_carry *c, size_t n)
{
    return orch__grow_n(&c->ids, &c->cap_ids, n + 1, sizeof *c->ids);
}

/* The Present payload of item (port, e) into *id, to be handed on: 1; 0 when the item is
 * not Present, or its bytes were reclaimed and `bare` does not allow that (nothing to hand
 * on to a reader that may run). */
static int present(orch_store *s, int port, int64_t e, bool bare, uint64_t *id)
{
    enum orch_item_state state;
    int rc = orch_store_item_get(s, port, e, &state, id);
    if (rc <= 0 || state != ORCH_ITEM_PRESENT)
        return rc < 0 ? rc : 0;
    if (bare)
        return 1;
    bool gone;
    if ((rc = orch_store_payload_reclaimed(s, *id, &gone)) < 0)
        return rc;
    return !gone;
}

/* The answer that twin t's grain of g's call gave, rebuilt from its facts into *a: 1, or
 * 0 when it cannot be carried (see the top of this file). */
static int twin_answer(struct orch_carry *c, const struct orch_grain_ref *g, int64_t t,
                       struct orch_wire_answer *a)
{
    orch_store *st = c->store;
    const struct orch_stmt *s = orch_plan_stmt(c->plan, orch_plan_call(c->plan, g->call)->stmt);
    enum orch_grain_outcome o;
    int rc = orch_store_grain_outcome(st, g->call, t, &o);
    if (rc <= 0 || (o != ORCH_OUTCOME_OK && o != ORCH_OUTCOME_DROPPED))
        return rc < 0 ? rc : 0;
    memset(a, 0, sizeof *a);
    a->grain = (uint64_t)g->grain;
    a->generation = g->generation;
    a->message = "";
    bool ok = o == ORCH_OUTCOME_OK;
    switch (s->op) {
    case ORCH_OP_FILTER:
        a->outcome = ok ? ORCH_WIRE_KEEP_TRUE : ORCH_WIRE_KEEP_FALSE;
        return 1;
    case ORCH_OP_MAP:
    case ORCH_OP_REDUCE:
        if (!ok) {
            a->outcome = ORCH_WIRE_DROP;
            return 1;
        }
        if ((rc = ids_fit(c, (size_t)s->nout)) < 0)
            return rc;
        for (int k = 0; k < s->nout; k++)
            if ((rc = present(st, s->out[k], t, c->bare[g->call], &c->ids[k])) <= 0)
                return rc;
        a->outcome = ORCH_WIRE_OK;
        a->nchild = 1;
        a->nout = (uint32_t)s->nout;
        a->payload = c->ids;
        return 1;
    case ORCH_OP_EXPAND:
    case ORCH_OP_EXPAND_ALIGNED: {
        if (!ok) {
            a->outcome = ORCH_WIRE_DROP;
            return 1;
        }
        int64_t *kids = NULL;
        size_t n = 0;
        if ((rc = orch_store_children(st, t, s->target, &kids, &n)) < 0)
            return rc;
        /* 1 while every child's items can be handed on; an empty expansion can. */
        rc = ids_fit(c, n * (size_t)s->nout) < 0 ? -ENOMEM : 1;
        for (size_t i = 0; rc == 1 && i < n; i++)
            for (int k = 0; rc == 1 && k < s->nout; k++)
                rc = present(st, s->out[k], kids[i], c->bare[g->call],
                             &c->ids[i * (size_t)s->nout + (size_t)k]);
        free(kids);
        if (rc <= 0)
            return rc;
        a->outcome = ORCH_WIRE_OK;
        a->nchild = (uint32_t)n;
        a->nout = (uint32_t)s->nout;
        a->payload = c->ids;
        return 1;
    }
    case ORCH_OP_BROADCAST:
    case ORCH_OP__COUNT:
        break;
    }
    return 0; /* a broadcast has no grains */
}

/* Carries g when its twin's answer can be had: *done. */
static int carry_one(struct orch_carry *c, orch_prop *prop, struct orch_prop_inputs *in,
                     const struct orch_grain_ref *g, bool *done, int64_t *carried)
{
    *done = false;
    orch_store *st = c->store;
    int64_t t;
    struct orch_wire_answer a;
    int rc = orch_store_twin(st, g->entity, &t);
    if (rc < 0 || !t || (rc = twin_answer(c, g, t, &a)) <= 0)
        return rc < 0 ? rc : 0;
    /* What the grain's worker would have been sent first: a filter passes it on, and a
     * single-input grain frees it by that id (reclaim.c). */
    if ((rc = orch_prop_inputs(prop, g, in)) < 0)
        return rc;
    bool taken;
    if ((rc = orch_store_grain_dispatch(st, g->grain, g->generation, &taken)) < 0)
        return rc;
    *done = true;
    if (!taken)
        return 0; /* it left READY meanwhile (a barrier sealed it) */
    struct orch_verdict v;
    if ((rc = orch_prop_report(prop, g, &a, in->first_input, &v)) < 0)
        return rc;
    (*carried)++;
    return 0;
}

int orch_carry_turn(struct orch_carry *c, orch_prop *prop, struct orch_prop_inputs *in,
                    const struct orch_prop_hooks *queue, int64_t *carried)
{
    if (!c)
        return 0;
    /* From the first turn, before any report: an item carried by an earlier start may
     * name an id freed before it, which a seal of its reader meets. */
    orch_prop_reclaim_recheck(prop);
    if (c->n == 0)
        return 0;
    /* The turn's transaction, opened here unless something before opened it. */
    int rc = orch_store_in_txn(c->store) ? 0 : orch_store_begin(c->store);
    /* Carrying a grain may make more READY (pushed here): the list grows while it is
     * walked, and each is copied out first, since pushing may move the list. */
    for (size_t i = 0; rc == 0 && i < c->n; i++) {
        struct orch_grain_ref g = c->list[i];
        bool done;
        if ((rc = carry_one(c, prop, in, &g, &done, carried)) == 0 && !done)
            rc = queue->ready(queue->ctx, &g);
    }
    c->n = 0;
    return rc;
}
