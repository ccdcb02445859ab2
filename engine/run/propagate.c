/* propagate.c — publishing facts and the propagation rules (propagate.h). */
#include "propagate.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "orch_error.h"

/* Per domain: the statements whose grains live on its entities, and the broadcasts into
 * it. Per domain C: the statements that wait on the plain expansion into C (reduces from
 * C and aligned expands into C). Built once from the plan. */
struct dom_topo {
    int *grain_stmts, ngrain;
    int *bcast_stmts, nbcast;
    int *exp_deps, nexp;
};

#define PROP_SLOTS 64

struct orch_prop {
    sqlite3_stmt *stmt[PROP_SLOTS]; /* see prep() */
    char why[192];                  /* see orch_prop_refusal() */
    const orch_plan *plan;
    orch_store *store;
    struct orch_prop_hooks hooks;
    int64_t next_seq;
    int64_t unsealed;
    struct dom_topo *dom;
    struct orch_prop_counts *counts; /* per call */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int push_int(int **arr, int *n, int v)
{
    int *na = realloc(*arr, (size_t)(*n + 1) * sizeof **arr);
    if (!na)
        return -ENOMEM;
    na[(*n)++] = v;
    *arr = na;
    return 0;
}

/* The child domain a reduce reads from: the domain of its first input. */
static int reduce_child(const orch_plan *plan, const struct orch_stmt *s)
{
    return orch_plan_port(plan, s->in[0].port)->domain;
}

int orch_prop_new(const orch_plan *plan, orch_store *store, const struct orch_prop_hooks *hooks,
                  int64_t next_seq, orch_prop **out)
{
    *out = NULL;
    orch_prop *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->plan = plan;
    p->store = store;
    p->hooks = *hooks;
    p->next_seq = next_seq;
    int nd = orch_plan_ndomains(plan);
    p->dom = calloc((size_t)nd, sizeof *p->dom);
    p->counts = calloc((size_t)orch_plan_ncalls(plan) + 1, sizeof *p->counts);
    if (!p->dom || !p->counts)
        goto nomem;
    for (int i = 0; i < orch_plan_nstmts(plan); i++) {
        const struct orch_stmt *s = orch_plan_stmt(plan, i);
        int rc = 0;
        if (s->op == ORCH_OP_BROADCAST)
            rc = push_int(&p->dom[s->target].bcast_stmts, &p->dom[s->target].nbcast, i);
        else
            rc = push_int(&p->dom[s->domain].grain_stmts, &p->dom[s->domain].ngrain, i);
        if (rc == 0 && s->op == ORCH_OP_REDUCE) {
            int c = reduce_child(plan, s);
            rc = push_int(&p->dom[c].exp_deps, &p->dom[c].nexp, i);
        } else if (rc == 0 && s->op == ORCH_OP_EXPAND_ALIGNED) {
            rc = push_int(&p->dom[s->target].exp_deps, &p->dom[s->target].nexp, i);
        }
        if (rc)
            goto nomem;
    }
    *out = p;
    return 0;
nomem:
    orch_prop_free(p);
    return -ENOMEM;
}

void orch_prop_free(orch_prop *p)
{
    if (!p)
        return;
    if (p->dom) {
        for (int i = 0; i < orch_plan_ndomains(p->plan); i++) {
            free(p->dom[i].grain_stmts);
            free(p->dom[i].bcast_stmts);
            free(p->dom[i].exp_deps);
        }
    }
    free(p->dom);
    free(p->counts);
    free(p);
}

int64_t orch_prop_next_seq(orch_prop *p)
{
    return p->next_seq++;
}

const struct orch_prop_counts *orch_prop_counts(const orch_prop *p, int call)
{
    return &p->counts[call];
}

int64_t orch_prop_unsealed(const orch_prop *p)
{
    return p->unsealed;
}

void orch_prop_set_unsealed(orch_prop *p, int64_t n)
{
    p->unsealed = n;
}

void orch_prop_add_sealed(orch_prop *p, int call, enum orch_grain_outcome o, int64_t n)
{
    assert(call >= 0 && call < orch_plan_ncalls(p->plan));
    p->counts[call].sealed[o] += n;
    p->counts[call].created += n;
}

/* ---- small SQL helpers ----------------------------------------------------------------- */

/* Each query site keeps its statement in a slot of its own (numbered by __COUNTER__), so
 * that the hot path skips the store's look-up by text, which hashed the whole SQL text on
 * every use (5% of the driver's time, measured). The store still owns the statements. */
static int prep_slot(orch_prop *p, int slot, const char *sql, sqlite3_stmt **st)
{
    assert(slot < PROP_SLOTS);
    if (p->stmt[slot]) {
        sqlite3_reset(p->stmt[slot]);
        sqlite3_clear_bindings(p->stmt[slot]);
        *st = p->stmt[slot];
        return 0;
    }
    int rc = orch_store_prepare(p->store, sql, st);
    if (rc == 0)
        p->stmt[slot] = *st;
    return rc;
}
#define prep(p, sql, st) prep_slot((p), __COUNTER__, (sql), (st))

/* Steps a statement that returns no row. */
static int run(orch_prop *p, sqlite3_stmt *st)
{
    int rc = orch_store_step(p->store, st);
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

int orch_prop_flush(orch_prop *p)
{
    sqlite3_stmt *st;
    int rc = prep(p, "UPDATE job SET next_ready_seq = ? WHERE id = 1", &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, p->next_seq);
    return run(p, st);
}

/* Looks up item (port, e): 1 and its state/payload when it exists, 0 when not yet. */
static int item_get(orch_prop *p, int port, int64_t e, int *state, uint64_t *payload)
{
    sqlite3_stmt *st;
    int rc =
        prep(p, "SELECT state, payload_id FROM item WHERE port_id = ? AND entity_id = ?", &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, port);
    sqlite3_bind_int64(st, 2, e);
    rc = orch_store_step(p->store, st);
    if (rc == 1) {
        *state = orch_item_state_parse((const char *)sqlite3_column_text(st, 0));
        if (payload)
            *payload = (uint64_t)sqlite3_column_int64(st, 1);
        if (*state < 0)
            rc = orch_error_set(ORCH_ECORRUPT, "item %d/%lld has an unknown state", port,
                                (long long)e);
    }
    sqlite3_reset(st);
    return rc;
}

static int64_t entity_parent(orch_prop *p, int64_t e, int *rcp)
{
    sqlite3_stmt *st;
    int rc = prep(p, "SELECT parent_id FROM entity WHERE id = ?", &st);
    int64_t parent = 0;
    if (rc == 0) {
        sqlite3_bind_int64(st, 1, e);
        rc = orch_store_step(p->store, st);
        if (rc == 1)
            parent = sqlite3_column_int64(st, 0);
        else if (rc == 0)
            rc = orch_error_set(ORCH_ECORRUPT, "entity %lld does not exist", (long long)e);
        sqlite3_reset(st);
    }
    *rcp = rc < 0 ? rc : 0;
    return parent;
}

/* The ordered children of e in domain d, as a malloc'd array. */
static int children_of(orch_prop *p, int64_t e, int d, int64_t **ids, int *n)
{
    sqlite3_stmt *st;
    int rc = prep(p,
                  "SELECT id FROM entity WHERE parent_id = ? AND domain_id = ? "
                  "ORDER BY ordinal",
                  &st);
    *ids = NULL;
    *n = 0;
    int cap = 0;
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, e);
    sqlite3_bind_int(st, 2, d);
    while ((rc = orch_store_step(p->store, st)) == 1) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            int64_t *na = realloc(*ids, (size_t)cap * sizeof *na);
            if (!na) {
                rc = -ENOMEM;
                break;
            }
            *ids = na;
        }
        (*ids)[(*n)++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_reset(st);
    if (rc < 0) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc < 0 ? rc : 0;
}

/* ---- grains ---------------------------------------------------------------------------- */

struct grain_row {
    int64_t id;
    int phase;
    int64_t pending;
    uint32_t generation;
    int64_t parent; /* of its entity; 0 for a root */
};

static int grain_get(orch_prop *p, int call, int64_t e, struct grain_row *g)
{
    sqlite3_stmt *st;
    /* A grain on a root entity has no parent: spare the join. */
    const struct orch_stmt *s = orch_plan_stmt(p->plan, orch_plan_call(p->plan, call)->stmt);
    int rc = orch_plan_domain(p->plan, s->domain)->parent < 0
                 ? prep(p,
                        "SELECT id, phase, pending, generation, 0 FROM grain "
                        "WHERE call_id = ? AND entity_id = ?",
                        &st)
                 : prep(p,
                        "SELECT g.id, g.phase, g.pending, g.generation, "
                        "coalesce(e.parent_id, 0) FROM grain AS g JOIN entity AS e "
                        "ON e.id = g.entity_id WHERE g.call_id = ? AND g.entity_id = ?",
                        &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, call);
    sqlite3_bind_int64(st, 2, e);
    rc = orch_store_step(p->store, st);
    if (rc == 1) {
        g->id = sqlite3_column_int64(st, 0);
        g->phase = orch_grain_phase_parse((const char *)sqlite3_column_text(st, 1));
        g->pending = sqlite3_column_int64(st, 2);
        g->generation = (uint32_t)sqlite3_column_int64(st, 3);
        g->parent = sqlite3_column_int64(st, 4);
    } else if (rc == 0) {
        rc = orch_error_set(ORCH_ECORRUPT, "grain of call %d on entity %lld does not exist",
                            call, (long long)e);
    }
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

static int set_pending(orch_prop *p, int64_t grain, int64_t pending)
{
    sqlite3_stmt *st;
    int rc = prep(p, "UPDATE grain SET pending = ? WHERE id = ?", &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, pending);
    sqlite3_bind_int64(st, 2, grain);
    return run(p, st);
}

static void count_seal(orch_prop *p, int call, enum orch_grain_outcome o)
{
    p->counts[call].sealed[o]++;
    p->unsealed--;
}

/* The grain becomes READY at its current generation (0 for a new grain; later for one
 * re-opened by `orch retry`), which the scheduler must carry for its report to be
 * accepted. Callers pass it from the row they read. */
static int make_ready_in(orch_prop *p, int stmt, int64_t grain, int64_t e, int64_t parent,
                         uint32_t generation, int in0_state, uint64_t in0)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int rc;
    sqlite3_stmt *st;
    if ((rc = prep(p,
                   "UPDATE grain SET phase = 'ready', ready_seq = ?, pending = 0 "
                   "WHERE id = ?",
                   &st)) < 0)
        return rc;
    struct orch_grain_ref ref = {.grain = grain,
                                 .call = s->call,
                                 .entity = e,
                                 .parent = parent,
                                 .seq = p->next_seq++,
                                 .generation = generation,
                                 .in0_state = in0_state,
                                 .in0 = in0};
    sqlite3_bind_int64(st, 1, ref.seq);
    sqlite3_bind_int64(st, 2, grain);
    if ((rc = run(p, st)) < 0)
        return rc;
    return p->hooks.ready(p->hooks.ctx, &ref);
}

static int make_ready(orch_prop *p, int stmt, int64_t grain, int64_t e, int64_t parent,
                      uint32_t generation)
{
    return make_ready_in(p, stmt, grain, e, parent, generation, -1, 0);
}

static int item_resolve(orch_prop *p, int port, int64_t e, int state, uint64_t payload);
static int expansion_resolve(orch_prop *p, int stmt, int64_t parent, int state, int nchildren);

static enum orch_item_state outcome_item_state(enum orch_grain_outcome o)
{
    switch (o) {
    case ORCH_OUTCOME_DROPPED:
        return ORCH_ITEM_DROPPED;
    case ORCH_OUTCOME_FAILED:
        return ORCH_ITEM_FAILED;
    default:
        return ORCH_ITEM_SUPPRESSED;
    }
}

/* Publishes the outputs of statement `stmt` on entity e in a non-present state: items
 * of its ports (for an aligned expand, of every child), or the expansion. */
static int outputs_terminal(orch_prop *p, int stmt, int64_t e, enum orch_item_state ist)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int rc = 0;
    switch (s->op) {
    case ORCH_OP_EXPAND:
        return expansion_resolve(
            p, stmt, e,
            ist == ORCH_ITEM_DROPPED ? ORCH_EXPANSION_DROPPED : ORCH_EXPANSION_FAILED, 0);
    case ORCH_OP_EXPAND_ALIGNED: {
        int64_t *kids;
        int n;
        if ((rc = children_of(p, e, s->target, &kids, &n)) < 0)
            return rc;
        for (int c = 0; c < n && rc == 0; c++)
            for (int o = 0; o < s->nout && rc == 0; o++)
                rc = item_resolve(p, s->out[o], kids[c], ist, 0);
        free(kids);
        return rc;
    }
    default:
        for (int o = 0; o < s->nout && rc == 0; o++)
            rc = item_resolve(p, s->out[o], e, ist, 0);
        return rc;
    }
}

/* Seals grain `grain` of `stmt` on e with outcome o, if it is in one of the phases the
 * caller expects (`guard`: SQL condition), and publishes its outputs in that state.
 * *sealed tells whether the guard held. */
static int seal(orch_prop *p, int stmt, int64_t grain, int64_t e, enum orch_grain_outcome o,
                bool in_flight, uint32_t generation, bool *sealed)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    sqlite3_stmt *st;
    int rc = in_flight ? prep(p,
                              "UPDATE grain SET phase = 'sealed', outcome = ?, pending = 0 "
                              "WHERE id = ? AND phase = 'in_flight' AND generation = ?",
                              &st)
                       : prep(p,
                              "UPDATE grain SET phase = 'sealed', outcome = ?, pending = 0 "
                              "WHERE id = ? AND phase IN ('waiting', 'ready')",
                              &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, orch_grain_outcome_name(o), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, grain);
    if (in_flight)
        sqlite3_bind_int64(st, 3, generation);
    if ((rc = run(p, st)) < 0)
        return rc;
    *sealed = sqlite3_changes(orch_store_db(p->store)) == 1;
    if (!*sealed)
        return 0;
    count_seal(p, s->call, o);
    if (o == ORCH_OUTCOME_OK)
        return 0; /* the caller publishes the values */
    return outputs_terminal(p, stmt, e, outcome_item_state(o));
}

static int seal_norun(orch_prop *p, int stmt, int64_t grain, int64_t e,
                      enum orch_grain_outcome o)
{
    bool sealed;
    return seal(p, stmt, grain, e, o, false, 0, &sealed);
}

/* The state of the plain expansion of entity e into domain d (the one that defines d's
 * children): an orch_expansion_state, or -1 while it is not terminal. */
static int plain_expansion(orch_prop *p, int d, int64_t e, int *state)
{
    const struct orch_domain *dom = orch_plan_domain(p->plan, d);
    sqlite3_stmt *st;
    int rc = prep(p, "SELECT state FROM expansion WHERE call_id = ? AND parent_id = ?", &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, orch_plan_stmt(p->plan, dom->expand)->call);
    sqlite3_bind_int64(st, 2, e);
    rc = orch_store_step(p->store, st);
    *state =
        rc == 1 ? orch_expansion_state_parse((const char *)sqlite3_column_text(st, 0)) : -1;
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

/* All inputs of a map-like grain are terminal and none failed: Dropped (a required input,
 * or for an aligned expand the plain expansion, was dropped) or READY. */
static int decide(orch_prop *p, int stmt, int64_t grain, int64_t e, int64_t parent,
                  uint32_t generation)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int rc;
    if (s->op != ORCH_OP_REDUCE) {
        for (int i = 0; i < s->nin; i++) {
            int state;
            if ((rc = item_get(p, s->in[i].port, e, &state, NULL)) < 0)
                return rc;
            assert(rc == 1);
            if (state == ORCH_ITEM_DROPPED && !s->in[i].optional)
                return seal_norun(p, stmt, grain, e, ORCH_OUTCOME_DROPPED);
        }
    }
    if (s->op == ORCH_OP_EXPAND_ALIGNED) {
        /* The plain expansion is terminal (counted in pending); a Dropped one drops. */
        int state;
        if ((rc = plain_expansion(p, s->target, e, &state)) < 0)
            return rc;
        if (state == ORCH_EXPANSION_DROPPED)
            return seal_norun(p, stmt, grain, e, ORCH_OUTCOME_DROPPED);
    }
    return make_ready(p, stmt, grain, e, parent, generation);
}

/* One input fact of grain (stmt, e) became terminal in `state` (an item state; for an
 * aligned expand's expansion, the state it maps to). */
static int grain_input(orch_prop *p, int stmt, int64_t e, int state, uint64_t payload)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    struct grain_row g;
    int rc = grain_get(p, s->call, e, &g);
    if (rc < 0)
        return rc;
    if (g.phase != ORCH_PHASE_WAITING)
        return 0; /* sealed by an earlier fact (a failure, a barrier) */
    if (s->op == ORCH_OP_REDUCE && g.pending < 0)
        return 0; /* counted when the expansion is published */
    if (state == ORCH_ITEM_FAILED || state == ORCH_ITEM_SUPPRESSED)
        return seal_norun(p, stmt, g.id, e, ORCH_OUTCOME_SUPPRESSED);
    assert(g.pending > 0);
    if (--g.pending > 0)
        return set_pending(p, g.id, g.pending);
    if (s->nin == 1 &&
        (s->op == ORCH_OP_MAP || s->op == ORCH_OP_FILTER || s->op == ORCH_OP_EXPAND)) {
        /* This fact was the only input: decide without reading it back. */
        if (state == ORCH_ITEM_DROPPED && !s->in[0].optional)
            return seal_norun(p, stmt, g.id, e, ORCH_OUTCOME_DROPPED);
        return make_ready_in(p, stmt, g.id, e, g.parent, g.generation, state, payload);
    }
    return decide(p, stmt, g.id, e, g.parent, g.generation);
}

/* Creates the grain of `stmt` on a newly published entity e. A new entity has no items
 * and no expansions yet (they are published after it, and count down `pending` then), so
 * every input is pending: no look-ups. */
static int grain_create(orch_prop *p, int stmt, int64_t e)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int64_t pending = s->op == ORCH_OP_REDUCE ? -1 : s->nin;
    if (s->op == ORCH_OP_EXPAND_ALIGNED)
        pending++; /* and the plain expansion of e into the target domain */
    sqlite3_stmt *st;
    int rc = prep(p,
                  "INSERT INTO grain (call_id, entity_id, phase, generation, pending) "
                  "VALUES (?, ?, 'waiting', 0, ?)",
                  &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, s->call);
    sqlite3_bind_int64(st, 2, e);
    sqlite3_bind_int64(st, 3, pending);
    if ((rc = run(p, st)) < 0)
        return rc;
    p->counts[s->call].created++;
    p->unsealed++;
    assert(pending != 0); /* a statement has at least one input */
    return 0;
}

/* ---- entities, items, expansions ------------------------------------------------------- */

/* The ancestor of e (in domain d) that lives in domain a. */
static int ancestor_in(orch_prop *p, int64_t e, int d, int a, int64_t *out)
{
    int rc = 0;
    while (d != a) {
        e = entity_parent(p, e, &rc);
        if (rc < 0)
            return rc;
        d = orch_plan_domain(p->plan, d)->parent;
        assert(d >= 0);
    }
    *out = e;
    return 0;
}

static int entity_publish(orch_prop *p, int d, int64_t parent, int64_t ordinal, const char *key,
                          int64_t *out)
{
    sqlite3_stmt *st;
    int rc = prep(p,
                  "INSERT INTO entity (domain_id, parent_id, ordinal, key) "
                  "VALUES (?, ?, ?, ?)",
                  &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, d);
    if (parent)
        sqlite3_bind_int64(st, 2, parent);
    sqlite3_bind_int64(st, 3, ordinal);
    if (key)
        sqlite3_bind_text(st, 4, key, -1, SQLITE_TRANSIENT);
    if ((rc = run(p, st)) < 0)
        return rc;
    int64_t e = sqlite3_last_insert_rowid(orch_store_db(p->store));
    *out = e;
    const struct dom_topo *t = &p->dom[d];
    for (int i = 0; i < t->ngrain; i++)
        if ((rc = grain_create(p, t->grain_stmts[i], e)) < 0)
            return rc;
    /* Broadcasts whose ancestor item is already terminal reach the new entity now; the
     * others reach it when that item is published (notify, below). */
    for (int i = 0; i < t->nbcast; i++) {
        const struct orch_stmt *b = orch_plan_stmt(p->plan, t->bcast_stmts[i]);
        const struct orch_port *src = orch_plan_port(p->plan, b->in[0].port);
        int64_t anc;
        int state;
        uint64_t payload;
        if ((rc = ancestor_in(p, e, d, src->domain, &anc)) < 0 ||
            (rc = item_get(p, b->in[0].port, anc, &state, &payload)) < 0)
            return rc;
        if (rc == 1 && (rc = item_resolve(p, b->out[0], e, state, payload)) < 0)
            return rc;
    }
    return 0;
}

/* Every descendant of e (domain a) in domain d, depth first in entity order. */
static int descendants(orch_prop *p, int64_t e, int a, int d, int64_t **ids, int *n)
{
    /* The chain of domains from a (exclusive) down to d (inclusive). */
    int chain[64], depth = 0;
    for (int x = d; x != a; x = orch_plan_domain(p->plan, x)->parent) {
        if (depth == 64)
            return orch_error_set(-E2BIG, "domain tree deeper than 64 levels");
        chain[depth++] = x;
    }
    int64_t *cur = malloc(sizeof *cur);
    int ncur = 1;
    if (!cur)
        return -ENOMEM;
    cur[0] = e;
    for (int lvl = depth - 1; lvl >= 0; lvl--) {
        int64_t *next = NULL;
        int nnext = 0;
        for (int i = 0; i < ncur; i++) {
            int64_t *kids;
            int nk;
            int rc = children_of(p, cur[i], chain[lvl], &kids, &nk);
            int64_t *grown =
                rc == 0 ? realloc(next, (size_t)(nnext + nk + 1) * sizeof *next) : NULL;
            if (!grown) {
                free(kids);
                free(next);
                free(cur);
                return rc < 0 ? rc : -ENOMEM;
            }
            next = grown;
            if (nk)
                memcpy(next + nnext, kids, (size_t)nk * sizeof *kids);
            nnext += nk;
            free(kids);
        }
        free(cur);
        cur = next;
        ncur = nnext;
    }
    *ids = cur;
    *n = ncur;
    return 0;
}

/* What to do for each consumer of an item: for each grain that reads it, and for each
 * broadcast copy of it in a descendant. Publishing (notify) and taking back (retry) walk
 * the consumers alike. */
struct consumer_visit {
    int (*grain)(orch_prop *p, int stmt, int64_t e, const struct consumer_visit *v);
    int (*copy)(orch_prop *p, int port, int64_t e, const struct consumer_visit *v);
    int state; /* notify: the item's state and payload */
    uint64_t payload;
    struct reopened *L; /* retry: the grains to evaluate again */
};

static int for_each_consumer(orch_prop *p, int port, int64_t e, const struct consumer_visit *v)
{
    const struct orch_port *pt = orch_plan_port(p->plan, port);
    int rc = 0;
    for (int i = 0; i < pt->nconsumers && rc == 0; i++) {
        int c = pt->consumers[i];
        const struct orch_stmt *s = orch_plan_stmt(p->plan, c);
        if (s->op == ORCH_OP_BROADCAST) {
            int64_t *ids;
            int n;
            if ((rc = descendants(p, e, pt->domain, s->target, &ids, &n)) < 0)
                return rc;
            for (int k = 0; k < n && rc == 0; k++)
                rc = v->copy(p, s->out[0], ids[k], v);
            free(ids);
        } else if (s->op == ORCH_OP_REDUCE) { /* the reduce grain lives on the parent */
            int64_t parent = entity_parent(p, e, &rc);
            if (rc == 0)
                rc = v->grain(p, c, parent, v);
        } else {
            rc = v->grain(p, c, e, v);
        }
    }
    return rc;
}

static int notify_grain(orch_prop *p, int stmt, int64_t e, const struct consumer_visit *v)
{
    return grain_input(p, stmt, e, v->state, v->payload);
}

static int notify_copy(orch_prop *p, int port, int64_t e, const struct consumer_visit *v)
{
    return item_resolve(p, port, e, v->state, v->payload);
}

/* Item (port, e) was just published in `state`: tell every consumer. */
static int notify(orch_prop *p, int port, int64_t e, int state, uint64_t payload)
{
    struct consumer_visit v = {
        .grain = notify_grain, .copy = notify_copy, .state = state, .payload = payload};
    return for_each_consumer(p, port, e, &v);
}

static int item_resolve(orch_prop *p, int port, int64_t e, int state, uint64_t payload)
{
    sqlite3_stmt *st;
    int rc = prep(p,
                  "INSERT INTO item (port_id, entity_id, state, payload_id) "
                  "VALUES (?, ?, ?, ?)",
                  &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, port);
    sqlite3_bind_int64(st, 2, e);
    sqlite3_bind_text(st, 3, orch_item_state_name(state), -1, SQLITE_STATIC);
    if (state == ORCH_ITEM_PRESENT)
        sqlite3_bind_int64(st, 4, (int64_t)payload);
    if ((rc = run(p, st)) < 0)
        return rc;
    return notify(p, port, e, state, payload);
}

/* A reduce grain on `parent` learns that its expansion succeeded with n children: count
 * the child input items that are not terminal yet. */
static int reduce_arm(orch_prop *p, int stmt, int64_t parent)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    struct grain_row g;
    int rc = grain_get(p, s->call, parent, &g);
    if (rc < 0 || g.phase != ORCH_PHASE_WAITING)
        return rc;
    int child = reduce_child(p->plan, s);
    int64_t nkids = 0, pending = 0;
    bool bad = false;
    sqlite3_stmt *st;
    if ((rc = prep(p, "SELECT count(*) FROM entity WHERE parent_id = ? AND domain_id = ?",
                   &st)) < 0)
        return rc;
    sqlite3_bind_int64(st, 1, parent);
    sqlite3_bind_int(st, 2, child);
    if ((rc = orch_store_step(p->store, st)) == 1)
        nkids = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    for (int i = 0; i < s->nin; i++) {
        if ((rc = prep(p,
                       "SELECT count(*), coalesce(sum(i.state IN ('failed', 'suppressed')), 0) "
                       "FROM entity AS c JOIN item AS i "
                       "ON i.entity_id = c.id AND i.port_id = ? "
                       "WHERE c.parent_id = ? AND c.domain_id = ?",
                       &st)) < 0)
            return rc;
        sqlite3_bind_int(st, 1, s->in[i].port);
        sqlite3_bind_int64(st, 2, parent);
        sqlite3_bind_int(st, 3, child);
        if ((rc = orch_store_step(p->store, st)) == 1) {
            pending += nkids - sqlite3_column_int64(st, 0);
            bad = bad || sqlite3_column_int64(st, 1) > 0;
        }
        sqlite3_reset(st);
        if (rc < 0)
            return rc;
    }
    if (bad)
        return seal_norun(p, stmt, g.id, parent, ORCH_OUTCOME_SUPPRESSED);
    if (pending > 0)
        return set_pending(p, g.id, pending);
    return make_ready(p, stmt, g.id, parent, g.parent, g.generation);
}

static int expansion_resolve(orch_prop *p, int stmt, int64_t parent, int state, int nchildren)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    sqlite3_stmt *st;
    int rc = prep(p,
                  "INSERT INTO expansion (call_id, parent_id, state, nchildren) "
                  "VALUES (?, ?, ?, ?)",
                  &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, s->call);
    sqlite3_bind_int64(st, 2, parent);
    sqlite3_bind_text(st, 3, orch_expansion_state_name(state), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, nchildren);
    if ((rc = run(p, st)) < 0)
        return rc;
    const struct dom_topo *t = &p->dom[s->target];
    for (int i = 0; i < t->nexp && rc == 0; i++) {
        int dep = t->exp_deps[i];
        const struct orch_stmt *ds = orch_plan_stmt(p->plan, dep);
        if (ds->op == ORCH_OP_REDUCE) {
            struct grain_row g;
            if ((rc = grain_get(p, ds->call, parent, &g)) < 0 || g.phase != ORCH_PHASE_WAITING)
                continue;
            if (state == ORCH_EXPANSION_DROPPED)
                rc = seal_norun(p, dep, g.id, parent, ORCH_OUTCOME_DROPPED);
            else if (state == ORCH_EXPANSION_FAILED)
                rc = seal_norun(p, dep, g.id, parent, ORCH_OUTCOME_SUPPRESSED);
            else
                rc = reduce_arm(p, dep, parent);
        } else {
            /* An aligned expand sees the plain expansion as one more input. */
            int as_item = state == ORCH_EXPANSION_SUCCEEDED ? ORCH_ITEM_PRESENT
                          : state == ORCH_EXPANSION_DROPPED ? ORCH_ITEM_DROPPED
                                                            : ORCH_ITEM_SUPPRESSED;
            rc = grain_input(p, dep, parent, as_item, 0);
        }
    }
    return rc;
}

/* ---- the driver's entry points --------------------------------------------------------- */

int orch_prop_admit_root(orch_prop *p, int domain, int64_t ordinal, const char *key,
                         uint64_t payload, int64_t *entity_out)
{
    assert(orch_store_in_txn(p->store));
    const struct orch_domain *d = orch_plan_domain(p->plan, domain);
    const struct orch_source *src = orch_plan_source(p->plan, d->source);
    int64_t e;
    int rc = entity_publish(p, domain, 0, ordinal, key, &e);
    if (rc == 0)
        rc = item_resolve(p, src->port, e, ORCH_ITEM_PRESENT, payload);
    if (rc == 0 && entity_out)
        *entity_out = e;
    return rc;
}

int orch_prop_failure_row(orch_prop *p, const struct orch_grain_ref *g,
                          enum orch_failure_kind kind, const char *message)
{
    sqlite3_stmt *st;
    int rc = prep(p,
                  "INSERT INTO failure (grain_id, kind, message, generation, at) "
                  "VALUES (?, ?, ?, ?, ?)",
                  &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, g->grain);
    sqlite3_bind_text(st, 2, orch_failure_kind_name(kind), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, message ? message : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, g->generation);
    sqlite3_bind_int64(st, 5, now_ms());
    return run(p, st);
}

int orch_prop_fail(orch_prop *p, const struct orch_grain_ref *g, enum orch_failure_kind kind,
                   const char *message, bool *accepted)
{
    assert(orch_store_in_txn(p->store));
    const struct orch_call *c = orch_plan_call(p->plan, g->call);
    int rc = seal(p, c->stmt, g->grain, g->entity, ORCH_OUTCOME_FAILED, true, g->generation,
                  accepted);
    if (rc == 0 && *accepted)
        rc = orch_prop_failure_row(p, g, kind, message);
    return rc;
}

/* Installs the barrier of a GroupFailure of grain g on (call, parent) and seals every
 * sibling grain of the call that has not run: waiting and queued ones. Siblings in flight
 * are sealed Suppressed when their reports arrive (orch_prop_accept). */
static int group_barrier(orch_prop *p, const struct orch_grain_ref *g)
{
    const struct orch_call *c = orch_plan_call(p->plan, g->call);
    sqlite3_stmt *st;
    int rc = prep(p,
                  "INSERT OR IGNORE INTO suppression (call_id, parent_id, grain_id, at) "
                  "VALUES (?, ?, ?, ?)",
                  &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, g->call);
    sqlite3_bind_int64(st, 2, g->parent);
    sqlite3_bind_int64(st, 3, g->grain);
    sqlite3_bind_int64(st, 4, now_ms());
    if ((rc = run(p, st)) < 0)
        return rc;
    /* Collect first: sealing publishes items, which reuses cached statements. */
    if ((rc = prep(p,
                   "SELECT g.id, g.entity_id FROM grain AS g JOIN entity AS e "
                   "ON e.id = g.entity_id WHERE e.parent_id = ? AND g.call_id = ? "
                   "AND g.phase IN ('waiting', 'ready')",
                   &st)) < 0)
        return rc;
    sqlite3_bind_int64(st, 1, g->parent);
    sqlite3_bind_int(st, 2, g->call);
    int64_t(*sib)[2] = NULL;
    int n = 0, cap = 0;
    while ((rc = orch_store_step(p->store, st)) == 1) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            void *na = realloc(sib, (size_t)cap * sizeof *sib);
            if (!na) {
                rc = -ENOMEM;
                break;
            }
            sib = na;
        }
        sib[n][0] = sqlite3_column_int64(st, 0);
        sib[n][1] = sqlite3_column_int64(st, 1);
        n++;
    }
    sqlite3_reset(st);
    for (int i = 0; i < n && rc >= 0; i++)
        rc = seal_norun(p, c->stmt, sib[i][0], sib[i][1], ORCH_OUTCOME_SUPPRESSED);
    free(sib);
    return rc < 0 ? rc : 0;
}

static int barrier_covers(orch_prop *p, const struct orch_grain_ref *g, bool *covered)
{
    *covered = false;
    if (!g->parent)
        return 0;
    sqlite3_stmt *st;
    int rc = prep(p, "SELECT 1 FROM suppression WHERE call_id = ? AND parent_id = ?", &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, g->call);
    sqlite3_bind_int64(st, 2, g->parent);
    rc = orch_store_step(p->store, st);
    sqlite3_reset(st);
    *covered = rc == 1;
    return rc < 0 ? rc : 0;
}

/* Why this exists: a sibling in flight when a GroupFailure barrier rose may not finish at
 * all (its worker crashed, hung, or run() failed). Retrying it would dispatch it under the
 * barrier, and charging it could seal it Failed (exhausted) where DESIGN §4 says a
 * barred sibling ends Suppressed. So the driver asks here first. */
int orch_prop_barred(orch_prop *p, const struct orch_grain_ref *g, bool *sealed)
{
    assert(orch_store_in_txn(p->store));
    *sealed = false;
    bool covered;
    int rc = barrier_covers(p, g, &covered);
    if (rc < 0 || !covered)
        return rc;
    const struct orch_call *c = orch_plan_call(p->plan, g->call);
    return seal(p, c->stmt, g->grain, g->entity, ORCH_OUTCOME_SUPPRESSED, true, g->generation,
                sealed);
}

/* The state that the outputs of aligned expand `stmt` on `parent` take on the children:
 * -1 while its grain is unsealed (it runs once the plain expansion is terminal), else the
 * item state of its outcome. */
static int aligned_sealed_state(orch_prop *p, int stmt, int64_t parent, int *state)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    sqlite3_stmt *st;
    int rc = prep(p, "SELECT outcome FROM grain WHERE call_id = ? AND entity_id = ?", &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, s->call);
    sqlite3_bind_int64(st, 2, parent);
    *state = -1;
    if ((rc = orch_store_step(p->store, st)) == 1 && sqlite3_column_type(st, 0) != SQLITE_NULL)
        *state = outcome_item_state(
            orch_grain_outcome_parse((const char *)sqlite3_column_text(st, 0)));
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

/* An expand answered OK: publish its children, their items, then the expansion. */
static int expand_ok(orch_prop *p, int stmt, int64_t parent, const struct orch_wire_answer *a)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    const struct dom_topo *t = &p->dom[s->target];
    int rc = 0;
    /* An aligned expand into the same domain may already be sealed without running (a
     * Failed or Suppressed input, a barrier) before these children existed: its outputs
     * on them take its state now, or their consumers would wait forever. */
    int(*aligned)[2] = NULL; /* (statement, item state) */
    int naligned = 0;
    for (int i = 0; i < t->nexp && rc == 0; i++) {
        int dep = t->exp_deps[i], st;
        if (orch_plan_stmt(p->plan, dep)->op != ORCH_OP_EXPAND_ALIGNED ||
            (rc = aligned_sealed_state(p, dep, parent, &st)) < 0 || st < 0)
            continue;
        if (!aligned && !(aligned = calloc((size_t)t->nexp, sizeof *aligned)))
            return -ENOMEM;
        aligned[naligned][0] = dep;
        aligned[naligned++][1] = st;
    }
    for (uint32_t c = 0; c < a->nchild && rc == 0; c++) {
        int64_t e;
        if ((rc = entity_publish(p, s->target, parent, c, NULL, &e)) < 0)
            break;
        for (int o = 0; o < s->nout && rc == 0; o++)
            rc = item_resolve(p, s->out[o], e, ORCH_ITEM_PRESENT,
                              a->payload[(size_t)c * a->nout + (size_t)o]);
        for (int k = 0; k < naligned && rc == 0; k++) {
            const struct orch_stmt *as = orch_plan_stmt(p->plan, aligned[k][0]);
            for (int o = 0; o < as->nout && rc == 0; o++)
                rc = item_resolve(p, as->out[o], e, aligned[k][1], 0);
        }
    }
    free(aligned);
    if (rc == 0)
        rc = expansion_resolve(p, stmt, parent, ORCH_EXPANSION_SUCCEEDED, (int)a->nchild);
    return rc;
}

/* An aligned expand answered OK with as many children as the plain expansion (checked by
 * the caller): fill their items by ordinal. */
static int aligned_ok(orch_prop *p, int stmt, int64_t parent, const struct orch_wire_answer *a)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int64_t *kids;
    int n;
    int rc = children_of(p, parent, s->target, &kids, &n);
    if (rc < 0)
        return rc;
    assert((uint32_t)n == a->nchild);
    for (int c = 0; c < n && rc == 0; c++)
        for (int o = 0; o < s->nout && rc == 0; o++)
            rc = item_resolve(p, s->out[o], kids[c], ORCH_ITEM_PRESENT,
                              a->payload[(size_t)c * a->nout + (size_t)o]);
    free(kids);
    return rc;
}

int orch_prop_accept(orch_prop *p, const struct orch_grain_ref *g,
                     const struct orch_wire_answer *a, uint64_t first_input, bool *accepted,
                     bool *suppressed)
{
    assert(orch_store_in_txn(p->store));
    const struct orch_call *c = orch_plan_call(p->plan, g->call);
    const struct orch_stmt *s = orch_plan_stmt(p->plan, c->stmt);
    *accepted = false;
    *suppressed = false;
    p->why[0] = '\0';
    if (a->grain != (uint64_t)g->grain || a->generation != g->generation)
        return 0;
    bool covered;
    int rc = barrier_covers(p, g, &covered);
    if (rc < 0)
        return rc;
    if (covered) {
        *suppressed = true;
        return seal(p, c->stmt, g->grain, g->entity, ORCH_OUTCOME_SUPPRESSED, true,
                    g->generation, accepted);
    }
    switch (a->outcome) {
    case ORCH_WIRE_DROP:
    case ORCH_WIRE_KEEP_FALSE:
        return seal(p, c->stmt, g->grain, g->entity, ORCH_OUTCOME_DROPPED, true, g->generation,
                    accepted);
    case ORCH_WIRE_RECORD_FAILURE:
        return orch_prop_fail(p, g, ORCH_FAILURE_RECORD, a->message, accepted);
    case ORCH_WIRE_GROUP_FAILURE:
        if ((rc = orch_prop_fail(p, g, ORCH_FAILURE_GROUP, a->message, accepted)) < 0 ||
            !*accepted || !g->parent)
            return rc; /* on a root entity, a GroupFailure is a RecordFailure */
        return group_barrier(p, g);
    case ORCH_WIRE_KEEP_TRUE:
    case ORCH_WIRE_OK:
        break;
    default:
        return orch_error_set(-EPROTO, "unknown answer kind %d", (int)a->outcome);
    }
    /* Check the shape before sealing, so a malformed answer becomes a RecordFailure. */
    char *why = p->why; /* kept for orch_prop_refusal() */
    if (a->outcome == ORCH_WIRE_KEEP_TRUE && s->op != ORCH_OP_FILTER)
        snprintf(why, sizeof p->why, "udf %s answered keep, but it is not a filter", c->name);
    else if (a->outcome == ORCH_WIRE_OK && s->op == ORCH_OP_FILTER)
        snprintf(why, sizeof p->why, "udf %s answered values, but it is a filter", c->name);
    else if (a->outcome == ORCH_WIRE_OK && a->nout != (uint32_t)s->nout)
        snprintf(why, sizeof p->why,
                 "udf %s gave %u values per record; the statement has %d "
                 "outputs",
                 c->name, a->nout, s->nout);
    else if (a->outcome == ORCH_WIRE_OK && s->op != ORCH_OP_EXPAND &&
             s->op != ORCH_OP_EXPAND_ALIGNED && a->nchild != 1)
        snprintf(why, sizeof p->why, "udf %s gave children, but it is not an expand", c->name);
    if (why[0])
        return orch_prop_fail(p, g, ORCH_FAILURE_RECORD, why, accepted);

    if (s->op == ORCH_OP_EXPAND_ALIGNED) {
        /* The count must match the plain expansion; checked before sealing. */
        int64_t *kids;
        int n;
        if ((rc = children_of(p, g->entity, s->target, &kids, &n)) < 0)
            return rc;
        free(kids);
        if ((uint32_t)n != a->nchild) {
            snprintf(why, sizeof p->why,
                     "expand aligned %s gave %u children; the expansion of "
                     "this parent has %d",
                     c->name, a->nchild, n);
            return orch_prop_fail(p, g, ORCH_FAILURE_RECORD, why, accepted);
        }
    }
    if ((rc = seal(p, c->stmt, g->grain, g->entity, ORCH_OUTCOME_OK, true, g->generation,
                   accepted)) < 0 ||
        !*accepted)
        return rc;
    switch (s->op) {
    case ORCH_OP_FILTER:
        return item_resolve(p, s->out[0], g->entity, ORCH_ITEM_PRESENT, first_input);
    case ORCH_OP_EXPAND:
        return expand_ok(p, c->stmt, g->entity, a);
    case ORCH_OP_EXPAND_ALIGNED:
        return aligned_ok(p, c->stmt, g->entity, a);
    default:
        for (int o = 0; o < s->nout && rc == 0; o++)
            rc = item_resolve(p, s->out[o], g->entity, ORCH_ITEM_PRESENT, a->payload[o]);
        return rc;
    }
}

/* ---- inputs of a grain ----------------------------------------------------------------- */

static int push_val(struct orch_prop_inputs *in, uint64_t payload, bool present)
{
    if (in->nvals == in->cap) {
        size_t cap = in->cap ? in->cap * 2 : 16;
        struct orch_wire_value *nv = realloc(in->vals, cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        in->vals = nv;
        in->cap = cap;
    }
    in->vals[in->nvals].payload = present ? payload : 0;
    in->vals[in->nvals].present = present;
    in->nvals++;
    return 0;
}

int orch_prop_inputs(orch_prop *p, const struct orch_grain_ref *g, struct orch_prop_inputs *in)
{
    const struct orch_call *c = orch_plan_call(p->plan, g->call);
    const struct orch_stmt *s = orch_plan_stmt(p->plan, c->stmt);
    int rc = 0;
    in->nvals = 0;
    in->first_input = 0;
    if (s->op != ORCH_OP_REDUCE && g->in0_state >= 0) {
        assert(s->nin == 1);
        in->nval[0] = 1;
        in->first_input = g->in0_state == ORCH_ITEM_PRESENT ? g->in0 : 0;
        return push_val(in, g->in0, g->in0_state == ORCH_ITEM_PRESENT);
    }
    if (s->op != ORCH_OP_REDUCE) {
        for (int i = 0; i < s->nin; i++) {
            int state;
            uint64_t payload = 0;
            if ((rc = item_get(p, s->in[i].port, g->entity, &state, &payload)) < 0)
                return rc;
            if (rc == 0)
                return orch_error_set(ORCH_ECORRUPT,
                                      "grain %lld is ready but its input %s "
                                      "is not terminal",
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
    /* reduce: the surviving children in ordinal order, every list the same children. A
     * child survives when none of its required inputs is Dropped. */
    int64_t *kids;
    int n;
    if ((rc = children_of(p, g->entity, reduce_child(p->plan, s), &kids, &n)) < 0)
        return rc;
    for (int i = 0; i < s->nin; i++)
        in->nval[i] = 0;
    int state[ORCH_PLAN_MAX_INPUTS];
    uint64_t payload[ORCH_PLAN_MAX_INPUTS];
    for (int k = 0; k < n && rc == 0; k++) {
        bool keep = true;
        for (int i = 0; i < s->nin && rc == 0; i++) {
            rc = item_get(p, s->in[i].port, kids[k], &state[i], &payload[i]);
            if (rc == 0)
                rc = orch_error_set(ORCH_ECORRUPT,
                                    "reduce grain %lld is ready but a child "
                                    "input is not terminal",
                                    (long long)g->grain);
            else if (rc == 1)
                rc = 0;
            if (rc == 0 && state[i] != ORCH_ITEM_PRESENT && !s->in[i].optional)
                keep = false;
        }
        if (rc < 0 || !keep)
            continue;
        /* Values are grouped by input list: list i's values are contiguous. */
        for (int i = 0; i < s->nin && rc == 0; i++)
            in->nval[i]++;
        for (int i = 0; i < s->nin && rc == 0; i++)
            rc = push_val(in, payload[i], state[i] == ORCH_ITEM_PRESENT);
    }
    free(kids);
    if (rc < 0)
        return rc;
    /* push_val appended child by child; regroup into list-major order (nothing to do
     * for no surviving child: malloc(0) may return NULL). */
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

void orch_prop_inputs_free(struct orch_prop_inputs *in)
{
    free(in->vals);
    in->vals = NULL;
    in->nvals = in->cap = 0;
}

/* ---- retry: re-opening Failed grains (orch retry) --------------------------------------
 *
 * A Failed grain's facts were terminal; `orch retry` is the one explicit exception
 * (DESIGN §1). Re-opening grain G takes back, in one transaction, every fact that exists
 * only because G failed: G's failed outputs (items, or the failed expansion), everything
 * sealed Suppressed because of them, transitively, and the suppression barrier G's
 * GroupFailure installed with the siblings it sealed. Those grains go back to WAITING
 * with generation+1; their attempt and failure rows stay as history. Then each is
 * evaluated again against the facts that remain: G itself becomes READY (its inputs are
 * what they were), the others wait for G's new outputs, or are sealed again at once if
 * another input is still Failed. */

struct reopened {
    int64_t *grain;
    int n, cap;
};

static int reopen_push(struct reopened *L, int64_t grain)
{
    if (L->n == L->cap) {
        L->cap = L->cap ? L->cap * 2 : 64;
        int64_t *ng = realloc(L->grain, (size_t)L->cap * sizeof *ng);
        if (!ng)
            return -ENOMEM;
        L->grain = ng;
    }
    L->grain[L->n++] = grain;
    return 0;
}

static int reopen_grain(orch_prop *p, int stmt, int64_t grain, int64_t e, struct reopened *L);

/* Grain (stmt, e) consumed a fact being taken back: re-open it if that fact sealed it,
 * and re-evaluate it at the end either way. */
static int reconsider(orch_prop *p, int stmt, int64_t e, struct reopened *L)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    struct grain_row g;
    sqlite3_stmt *st;
    int rc = grain_get(p, s->call, e, &g);
    if (rc < 0)
        return rc;
    if (g.phase == ORCH_PHASE_WAITING)
        return reopen_push(L, g.id);
    if (g.phase != ORCH_PHASE_SEALED)
        return 0;
    if ((rc = prep(p, "SELECT outcome FROM grain WHERE id = ?", &st)) < 0)
        return rc;
    sqlite3_bind_int64(st, 1, g.id);
    rc = orch_store_step(p->store, st);
    bool suppressed =
        rc == 1 && strcmp((const char *)sqlite3_column_text(st, 0), "suppressed") == 0;
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    return suppressed ? reopen_grain(p, stmt, g.id, e, L) : 0;
}

static int unresolve_item(orch_prop *p, int port, int64_t e, struct reopened *L);

static int retake_grain(orch_prop *p, int stmt, int64_t e, const struct consumer_visit *v)
{
    return reconsider(p, stmt, e, v->L);
}

static int retake_copy(orch_prop *p, int port, int64_t e, const struct consumer_visit *v)
{
    return unresolve_item(p, port, e, v->L);
}

static int unresolve_item(orch_prop *p, int port, int64_t e, struct reopened *L)
{
    sqlite3_stmt *st;
    int rc = prep(p,
                  "DELETE FROM item WHERE port_id = ? AND entity_id = ? "
                  "AND state IN ('failed', 'suppressed')",
                  &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, port);
    sqlite3_bind_int64(st, 2, e);
    if ((rc = run(p, st)) < 0)
        return rc;
    if (sqlite3_changes(orch_store_db(p->store)) == 0)
        return 0; /* present, dropped or not there: nothing of it is taken back */
    struct consumer_visit v = {.grain = retake_grain, .copy = retake_copy, .L = L};
    return for_each_consumer(p, port, e, &v);
}

static int reopen_grain(orch_prop *p, int stmt, int64_t grain, int64_t e, struct reopened *L)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    sqlite3_stmt *st;
    int rc = prep(p,
                  "UPDATE grain SET phase = 'waiting', outcome = NULL, pending = 0, "
                  "generation = generation + 1 WHERE id = ? AND phase = 'sealed'",
                  &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, grain);
    if ((rc = run(p, st)) < 0)
        return rc;
    if (sqlite3_changes(orch_store_db(p->store)) == 0)
        return 0; /* already re-opened through another path */
    p->unsealed++;
    if ((rc = reopen_push(L, grain)) < 0)
        return rc;
    switch (s->op) {
    case ORCH_OP_EXPAND: {
        if ((rc = prep(p,
                       "DELETE FROM expansion WHERE call_id = ? AND parent_id = ? "
                       "AND state = 'failed'",
                       &st)) < 0)
            return rc;
        sqlite3_bind_int(st, 1, s->call);
        sqlite3_bind_int64(st, 2, e);
        if ((rc = run(p, st)) < 0)
            return rc;
        const struct dom_topo *t = &p->dom[s->target];
        for (int i = 0; i < t->nexp && rc == 0; i++)
            rc = reconsider(p, t->exp_deps[i], e, L);
        return rc;
    }
    case ORCH_OP_EXPAND_ALIGNED: {
        int64_t *kids;
        int n;
        if ((rc = children_of(p, e, s->target, &kids, &n)) < 0)
            return rc;
        for (int c = 0; c < n && rc == 0; c++)
            for (int o = 0; o < s->nout && rc == 0; o++)
                rc = unresolve_item(p, s->out[o], kids[c], L);
        free(kids);
        return rc;
    }
    default:
        for (int o = 0; o < s->nout && rc == 0; o++)
            rc = unresolve_item(p, s->out[o], e, L);
        return rc;
    }
}

/* Evaluates a re-opened or waiting grain against the facts that exist now. */
static int reevaluate(orch_prop *p, int64_t grain)
{
    sqlite3_stmt *st;
    int rc = prep(p,
                  "SELECT g.call_id, g.entity_id, g.phase, coalesce(e.parent_id, 0), "
                  "g.generation FROM grain AS g JOIN entity AS e ON e.id = g.entity_id "
                  "WHERE g.id = ?",
                  &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, grain);
    int call = -1, phase = -1;
    int64_t e = 0, parent = 0;
    uint32_t generation = 0;
    if ((rc = orch_store_step(p->store, st)) == 1) {
        call = sqlite3_column_int(st, 0);
        e = sqlite3_column_int64(st, 1);
        phase = orch_grain_phase_parse((const char *)sqlite3_column_text(st, 2));
        parent = sqlite3_column_int64(st, 3);
        generation = (uint32_t)sqlite3_column_int64(st, 4);
    }
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    if (phase != ORCH_PHASE_WAITING)
        return 0; /* evaluated already (listed twice), or never re-opened */
    int stmt = orch_plan_call(p->plan, call)->stmt;
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int64_t pending = 0;
    bool bad = false;
    if (s->op == ORCH_OP_REDUCE) {
        int xs;
        if ((rc = plain_expansion(p, reduce_child(p->plan, s), e, &xs)) < 0)
            return rc;
        if (xs < 0)
            return set_pending(p, grain, -1);
        if (xs == ORCH_EXPANSION_DROPPED)
            return seal_norun(p, stmt, grain, e, ORCH_OUTCOME_DROPPED);
        if (xs == ORCH_EXPANSION_FAILED)
            return seal_norun(p, stmt, grain, e, ORCH_OUTCOME_SUPPRESSED);
        return reduce_arm(p, stmt, e);
    }
    for (int i = 0; i < s->nin; i++) {
        int state;
        if ((rc = item_get(p, s->in[i].port, e, &state, NULL)) < 0)
            return rc;
        if (rc == 0)
            pending++;
        else if (state == ORCH_ITEM_FAILED || state == ORCH_ITEM_SUPPRESSED)
            bad = true;
    }
    if (s->op == ORCH_OP_EXPAND_ALIGNED) {
        int xs;
        if ((rc = plain_expansion(p, s->target, e, &xs)) < 0)
            return rc;
        if (xs < 0)
            pending++;
        else if (xs == ORCH_EXPANSION_FAILED)
            bad = true;
    }
    if (bad)
        return seal_norun(p, stmt, grain, e, ORCH_OUTCOME_SUPPRESSED);
    if (pending > 0)
        return set_pending(p, grain, pending);
    return decide(p, stmt, grain, e, parent, generation);
}

int orch_prop_reopen_failed(orch_prop *p, int call, int64_t *reopened)
{
    assert(orch_store_in_txn(p->store));
    *reopened = 0;
    struct reopened L = {0};
    int64_t(*failed)[2] = NULL;
    int nf = 0, cap = 0;
    sqlite3_stmt *st;
    int rc = prep(p,
                  "SELECT id, entity_id, call_id FROM grain "
                  "WHERE outcome = 'failed' AND (?1 < 0 OR call_id = ?1) ORDER BY id",
                  &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, call);
    int *calls = NULL;
    while ((rc = orch_store_step(p->store, st)) == 1) {
        if (nf == cap) {
            cap = cap ? cap * 2 : 64;
            void *nv = realloc(failed, (size_t)cap * sizeof *failed);
            int *nc = realloc(calls, (size_t)cap * sizeof *nc);
            if (nc)
                calls = nc;
            if (!nv || !nc) {
                free(nv ? nv : failed);
                failed = NULL;
                rc = -ENOMEM;
                break;
            }
            failed = nv;
        }
        failed[nf][0] = sqlite3_column_int64(st, 0);
        failed[nf][1] = sqlite3_column_int64(st, 1);
        calls[nf] = sqlite3_column_int(st, 2);
        nf++;
    }
    sqlite3_reset(st);
    for (int i = 0; i < nf && rc >= 0; i++) {
        rc = 0;
        int stmt = orch_plan_call(p->plan, calls[i])->stmt;
        /* Its GroupFailure barrier, and the siblings it sealed, go too. */
        int64_t parent = entity_parent(p, failed[i][1], &rc);
        if (rc == 0 && parent) {
            if ((rc = prep(p, "DELETE FROM suppression WHERE grain_id = ?", &st)) < 0)
                break;
            sqlite3_bind_int64(st, 1, failed[i][0]);
            if ((rc = run(p, st)) < 0)
                break;
            if (sqlite3_changes(orch_store_db(p->store)) > 0) {
                int64_t *kids;
                int n;
                const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
                if ((rc = children_of(p, parent, s->domain, &kids, &n)) < 0)
                    break;
                for (int k = 0; k < n && rc == 0; k++)
                    if (kids[k] != failed[i][1])
                        rc = reconsider(p, stmt, kids[k], &L);
                free(kids);
            }
        }
        if (rc == 0)
            rc = reopen_grain(p, stmt, failed[i][0], failed[i][1], &L);
    }
    for (int i = 0; i < L.n && rc >= 0; i++)
        rc = reevaluate(p, L.grain[i]);
    if (rc >= 0)
        *reopened = L.n;
    free(L.grain);
    free(failed);
    free(calls);
    return rc < 0 ? rc : 0;
}

const char *orch_prop_refusal(const orch_prop *p)
{
    return p->why;
}
