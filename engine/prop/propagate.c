/* propagate.c — publishing facts and the one rule that decides a grain's fate (propagate.h). */
#include "prop_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "support.h"

static int push_int(int **arr, int *n, int *cap, int v)
{
    if (orch__grow(arr, cap, *n + 1, sizeof **arr) < 0)
        return -ENOMEM;
    (*arr)[(*n)++] = v;
    return 0;
}

int orch_prop_reduce_child(const orch_plan *plan, const struct orch_stmt *s)
{
    return orch_plan_port(plan, s->in[0].port)->domain;
}

bool orch_prop_on_roots(const orch_prop *p, const struct orch_stmt *s)
{
    return orch_plan_domain(p->plan, s->domain)->parent < 0;
}

int orch_prop_open(const orch_plan *plan, orch_store *store,
                   const struct orch_prop_hooks *hooks, orch_prop **out)
{
    *out = NULL;
    int64_t next_seq, live;
    int rc = orch_store_counters_get(store, &next_seq, &live);
    if (rc < 0)
        return rc;
    orch_prop *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->plan = plan;
    p->store = store;
    p->hooks = *hooks;
    p->next_seq = next_seq;
    p->live = live;
    int nd = orch_plan_ndomains(plan);
    p->dom = calloc((size_t)nd + 1, sizeof *p->dom);
    p->counts = calloc((size_t)orch_plan_ncalls(plan) + 1, sizeof *p->counts);
    p->items = calloc(((size_t)orch_plan_nports(plan) + 1) * ORCH_ITEM__COUNT, sizeof *p->items);
    if (!p->dom || !p->counts || !p->items || orch_prop_reclaim_open(p) < 0)
        goto nomem;
    for (int i = 0; i < orch_plan_nstmts(plan); i++) {
        const struct orch_stmt *s = orch_plan_stmt(plan, i);
        if (s->retired)
            continue; /* history only: it makes no grain, no broadcast item */
        if (s->op == ORCH_OP_BROADCAST)
            rc = push_int(&p->dom[s->target].bcast_stmts, &p->dom[s->target].nbcast,
                          &p->dom[s->target].cbcast, i);
        else
            rc = push_int(&p->dom[s->domain].grain_stmts, &p->dom[s->domain].ngrain,
                          &p->dom[s->domain].cgrain, i);
        if (rc == 0 && s->op == ORCH_OP_REDUCE) {
            int c = orch_prop_reduce_child(plan, s);
            rc = push_int(&p->dom[c].exp_deps, &p->dom[c].nexp, &p->dom[c].cexp, i);
        } else if (rc == 0 && s->op == ORCH_OP_EXPAND_ALIGNED) {
            rc = push_int(&p->dom[s->target].exp_deps, &p->dom[s->target].nexp,
                          &p->dom[s->target].cexp, i);
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
    free(p->items);
    orch_prop_snapshot_end(p);
    orch_prop_reclaim_free(p);
    free(p);
}

static void load_count(void *ctx, int port, enum orch_item_state st, int64_t n)
{
    orch_prop *p = ctx;
    if (port >= 0 && port < orch_plan_nports(p->plan))
        p->items[(size_t)port * ORCH_ITEM__COUNT + st] = n;
}

int orch_prop_items_load(orch_prop *p)
{
    memset(p->items, 0, (size_t)orch_plan_nports(p->plan) * ORCH_ITEM__COUNT * sizeof *p->items);
    return orch_store_item_counts(p->store, load_count, p);
}

const int64_t *orch_prop_items(const orch_prop *p)
{
    return p->items;
}

int64_t orch_prop_next_seq(orch_prop *p)
{
    return p->next_seq++;
}

int orch_prop_flush(orch_prop *p)
{
    return orch_store_counters_set(p->store, p->next_seq, p->live);
}

const struct orch_prop_counts *orch_prop_counts(const orch_prop *p, int call)
{
    return &p->counts[call];
}

int64_t orch_prop_created(const orch_prop *p)
{
    return p->created;
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
    p->created += n;
}

void orch_prop_reopened(orch_prop *p)
{
    p->unsealed++;
}

enum orch_item_state orch_prop_outcome_item_state(enum orch_grain_outcome o)
{
    switch (o) {
    case ORCH_OUTCOME_OK:
        return ORCH_ITEM_PRESENT;
    case ORCH_OUTCOME_DROPPED:
        return ORCH_ITEM_DROPPED;
    case ORCH_OUTCOME_FAILED:
        return ORCH_ITEM_FAILED;
    case ORCH_OUTCOME_SUPPRESSED:
        return ORCH_ITEM_SUPPRESSED;
    case ORCH_OUTCOME__COUNT:
        break;
    }
    assert(!"not an outcome");
    return ORCH_ITEM_SUPPRESSED;
}

static bool item_bad(enum orch_item_state st)
{
    return st == ORCH_ITEM_FAILED || st == ORCH_ITEM_SUPPRESSED;
}

/* ---- the rule -------------------------------------------------------------------------- */

/* What is known of a grain's inputs. For a reduce: `bad` also when its expansion Failed,
 * `dropped` when its expansion was Dropped, `pending` -1 while the expansion is not
 * terminal; Dropped children do not count (they are left out of its list). For an
 * aligned expand, the plain expansion of its entity is one more input. */
struct known {
    bool bad;        /* an input Failed or Suppressed */
    int64_t pending; /* inputs not terminal yet */
    bool dropped;    /* a required input Dropped */
};

enum fate { FATE_WAIT, FATE_READY, FATE_DROPPED, FATE_SUPPRESSED };

/* DESIGN §3, in its priority order; the only place that says it. */
static enum fate fate_of(const struct known *k)
{
    if (k->bad)
        return FATE_SUPPRESSED; /* rule 1 */
    if (k->pending != 0)
        return FATE_WAIT; /* rule 2 */
    if (k->dropped)
        return FATE_DROPPED; /* rule 3 */
    return FATE_READY;       /* rule 4 */
}

static void count_sealed(orch_prop *p, int call, enum orch_grain_outcome o)
{
    p->counts[call].sealed[o]++;
    p->unsealed--;
}

/* The grain becomes READY at its current generation (0 for a new grain; later for one
 * re-opened by `orch retry`), which the scheduler must carry for its report to be
 * accepted. */
static int make_ready(orch_prop *p, int stmt, const struct orch_grain_row *g, int in0_state,
                      uint64_t in0, int64_t in0_size)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    struct orch_grain_ref ref = {.grain = g->id,
                                 .call = s->call,
                                 .entity = g->entity,
                                 .parent = g->parent,
                                 .seq = p->next_seq++,
                                 .generation = g->generation,
                                 .in0_state = (int16_t)in0_state,
                                 .in0 = in0,
                                 .in0_size = in0_size >= 0 && in0_size < ORCH_IN0_SIZE_UNKNOWN
                                                 ? (uint32_t)in0_size
                                                 : ORCH_IN0_SIZE_UNKNOWN};
    int rc = orch_store_grain_ready(p->store, g, ref.seq);
    return rc < 0 ? rc : p->hooks.ready(p->hooks.ctx, &ref);
}

static int seal_unrun(orch_prop *p, int stmt, int64_t grain, int64_t e,
                      enum orch_grain_outcome o)
{
    bool sealed;
    return orch_prop_seal(p, stmt, grain, e, o, false, 0, 0, -1, &sealed);
}

/* Acts on the fate of WAITING grain g of `stmt`, given what is known of its inputs.
 * in0_state/in0/in0_size: its one input, when that is what made it READY (-1 otherwise),
 * and its bytes (-1: not known). */
static int settle(orch_prop *p, int stmt, const struct orch_grain_row *g, const struct known *k,
                  int in0_state, uint64_t in0, int64_t in0_size)
{
    assert(g->phase == ORCH_PHASE_WAITING);
    switch (fate_of(k)) {
    case FATE_SUPPRESSED:
        return seal_unrun(p, stmt, g->id, g->entity, ORCH_OUTCOME_SUPPRESSED);
    case FATE_WAIT:
        return k->pending == g->pending
                   ? 0
                   : orch_store_grain_set_pending(p->store, g, k->pending);
    case FATE_DROPPED:
        return seal_unrun(p, stmt, g->id, g->entity, ORCH_OUTCOME_DROPPED);
    case FATE_READY:
        return make_ready(p, stmt, g, in0_state, in0, in0_size);
    }
    assert(!"not a fate");
    return ORCH_ECORRUPT;
}

/* The state of the plain expansion of entity e into domain d (the one that defines d's
 * children): 1 and *state, or 0 while it is not terminal. */
static int plain_expansion(orch_prop *p, int d, int64_t e, enum orch_expansion_state *state)
{
    const struct orch_domain *dom = orch_plan_domain(p->plan, d);
    return orch_store_expansion_get(p->store, orch_plan_stmt(p->plan, dom->expand)->call, e,
                                    state);
}

/* Adds what the plain expansion (or its absence, rc 0) says to k. */
static void known_expansion(struct known *k, int found, enum orch_expansion_state xs,
                            bool reduce)
{
    if (!found) {
        k->pending = reduce ? -1 : k->pending + 1;
        return;
    }
    switch (xs) {
    case ORCH_EXPANSION_SUCCEEDED:
        return;
    case ORCH_EXPANSION_DROPPED:
        k->dropped = true;
        return;
    case ORCH_EXPANSION_FAILED:
        k->bad = true;
        return;
    case ORCH_EXPANSION__COUNT:
        break;
    }
    assert(!"not an expansion state");
}

/* Reads back everything grain (stmt, e) depends on. */
static int examine(orch_prop *p, int stmt, int64_t e, struct known *k)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    enum orch_expansion_state xs = ORCH_EXPANSION_SUCCEEDED;
    int rc;
    *k = (struct known){0};
    if (s->op == ORCH_OP_REDUCE) {
        int child = orch_prop_reduce_child(p->plan, s);
        if ((rc = plain_expansion(p, child, e, &xs)) < 0)
            return rc;
        known_expansion(k, rc, xs, true);
        if (rc == 0 || xs != ORCH_EXPANSION_SUCCEEDED)
            return 0;
        int64_t nkids;
        if ((rc = orch_store_children_count(p->store, e, child, &nkids)) < 0)
            return rc;
        for (int i = 0; i < s->nin; i++) {
            int64_t terminal, bad;
            if ((rc = orch_store_child_items(p->store, s->in[i].port, e, child, &terminal,
                                             &bad)) < 0)
                return rc;
            k->pending += nkids - terminal;
            k->bad = k->bad || bad > 0;
        }
        return 0;
    }
    for (int i = 0; i < s->nin; i++) {
        enum orch_item_state st;
        if ((rc = orch_store_item_get(p->store, s->in[i].port, e, &st, NULL)) < 0)
            return rc;
        if (rc == 0)
            k->pending++;
        else if (item_bad(st))
            k->bad = true;
        else if (st == ORCH_ITEM_DROPPED && !s->in[i].optional)
            k->dropped = true;
    }
    if (s->op == ORCH_OP_EXPAND_ALIGNED) {
        if ((rc = plain_expansion(p, s->target, e, &xs)) < 0)
            return rc;
        known_expansion(k, rc, xs, false);
    }
    return 0;
}

int orch_prop_reconsider(orch_prop *p, int stmt, const struct orch_grain_row *g)
{
    if (g->phase != ORCH_PHASE_WAITING)
        return 0;
    struct known k;
    int rc = examine(p, stmt, g->entity, &k);
    return rc < 0 ? rc : settle(p, stmt, g, &k, -1, 0, -1);
}

static int grain_get(orch_prop *p, int stmt, int64_t e, struct orch_grain_row *g)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    return orch_store_grain_get(p->store, s->call, e, orch_prop_on_roots(p, s), g);
}

/* One input fact of grain (stmt, e) became terminal in `state` (an item state; for an
 * aligned expand's expansion, the state it maps to). Counted without reading the other
 * inputs back, but when it was the last of several. */
static int grain_input(orch_prop *p, int stmt, int64_t e, enum orch_item_state state,
                       uint64_t payload, int64_t size)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    struct orch_grain_row g;
    int rc = grain_get(p, stmt, e, &g);
    if (rc < 0)
        return rc;
    if (g.phase != ORCH_PHASE_WAITING)
        return 0; /* sealed by an earlier fact (a failure, a barrier) */
    if (s->op == ORCH_OP_REDUCE && g.pending < 0)
        return 0; /* counted when the expansion is published */
    assert(g.pending > 0);
    struct known k = {.bad = item_bad(state), .pending = g.pending - 1};
    bool single = s->nin == 1 && (s->op == ORCH_OP_MAP || s->op == ORCH_OP_FILTER ||
                                  s->op == ORCH_OP_EXPAND);
    if (single) { /* this fact is the only input: decide without reading it back */
        k.dropped = state == ORCH_ITEM_DROPPED && !s->in[0].optional;
        return settle(p, stmt, &g, &k, (int)state, payload, size);
    }
    if (k.bad || k.pending > 0 || s->op == ORCH_OP_REDUCE)
        return settle(p, stmt, &g, &k, -1, 0, -1); /* a reduce leaves Dropped children out */
    /* The last of several inputs: read them all back for a Dropped one (rule 3). */
    if ((rc = examine(p, stmt, e, &k)) < 0)
        return rc;
    if (k.pending != 0)
        return orch_error_set(ORCH_ECORRUPT,
                              "grain %lld counted its inputs terminal, but %lld are not",
                              (long long)g.id, (long long)k.pending);
    return settle(p, stmt, &g, &k, -1, 0, -1);
}

/* Creates the grain of `stmt` on a newly published entity e. A new entity has no items
 * and no expansions yet (they are published after it, and count down `pending` then), so
 * every input is pending: no look-ups. */
static int grain_create(orch_prop *p, int stmt, int64_t e, int64_t parent)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int64_t pending = s->op == ORCH_OP_REDUCE ? -1 : s->nin;
    if (s->op == ORCH_OP_EXPAND_ALIGNED)
        pending++; /* and the plain expansion of e into the target domain */
    assert(pending != 0); /* a statement has at least one input */
    int rc = orch_store_grain_create(p->store, s->call, e, parent, pending);
    if (rc < 0)
        return rc;
    p->counts[s->call].created++;
    p->created++;
    p->unsealed++;
    return 0;
}

/* ---- sealing --------------------------------------------------------------------------- */

/* Publishes the outputs of statement `stmt` on entity e in a non-present state: items
 * of its ports (for an aligned expand, of every child), or the expansion. */
static int outputs_terminal(orch_prop *p, int stmt, int64_t e, enum orch_item_state ist)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int rc = 0;
    if (s->op == ORCH_OP_EXPAND)
        return orch_prop_expansion_resolve(
            p, stmt, e,
            ist == ORCH_ITEM_DROPPED ? ORCH_EXPANSION_DROPPED : ORCH_EXPANSION_FAILED, 0);
    if (s->op == ORCH_OP_EXPAND_ALIGNED) {
        int64_t *kids;
        size_t n;
        if ((rc = orch_store_children(p->store, e, s->target, &kids, &n)) < 0)
            return rc;
        for (size_t c = 0; c < n && rc == 0; c++)
            for (int o = 0; o < s->nout && rc == 0; o++)
                rc = orch_prop_item_resolve(p, s->out[o], kids[c], ist, 0, -1);
        free(kids);
        return rc;
    }
    for (int o = 0; o < s->nout && rc == 0; o++)
        rc = orch_prop_item_resolve(p, s->out[o], e, ist, 0, -1);
    return rc;
}

int orch_prop_seal(orch_prop *p, int stmt, int64_t grain, int64_t e, enum orch_grain_outcome o,
                   bool in_flight, uint32_t generation, uint64_t in0, int64_t in0_size,
                   bool *sealed)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int rc = orch_store_grain_seal(p->store, grain, s->call, e, o, in_flight, generation, sealed);
    if (rc < 0 || !*sealed)
        return rc;
    count_sealed(p, s->call, o);
    if ((rc = orch_prop_reclaim_sealed(p, stmt, e, o, in0, in0_size)) < 0)
        return rc;
    if (o == ORCH_OUTCOME_OK)
        return 0; /* the caller publishes the values */
    return outputs_terminal(p, stmt, e, orch_prop_outcome_item_state(o));
}

/* ---- entities, items, expansions ------------------------------------------------------- */

/* The ancestor of e (in domain d) that lives in domain a. */
static int ancestor_in(orch_prop *p, int64_t e, int d, int a, int64_t *out)
{
    while (d != a) {
        int rc = orch_store_entity_parent(p->store, e, &e);
        if (rc < 0)
            return rc;
        d = orch_plan_domain(p->plan, d)->parent;
        assert(d >= 0);
    }
    *out = e;
    return 0;
}

int orch_prop_entity_publish(orch_prop *p, int d, int64_t parent, int64_t ordinal,
                             const char *key, int64_t *out)
{
    int64_t e;
    int rc = orch_store_entity_put(p->store, d, parent, ordinal, key, &e);
    if (rc < 0)
        return rc;
    *out = e;
    const struct dom_topo *t = &p->dom[d];
    for (int i = 0; i < t->ngrain; i++)
        if ((rc = grain_create(p, t->grain_stmts[i], e, parent)) < 0)
            return rc;
    /* Broadcasts whose ancestor item is already terminal reach the new entity now; the
     * others reach it when that item is published (notify, below). */
    for (int i = 0; i < t->nbcast; i++) {
        const struct orch_stmt *b = orch_plan_stmt(p->plan, t->bcast_stmts[i]);
        const struct orch_port *src = orch_plan_port(p->plan, b->in[0].port);
        int64_t anc;
        enum orch_item_state state;
        uint64_t payload = 0;
        if ((rc = ancestor_in(p, e, d, src->domain, &anc)) < 0 ||
            (rc = orch_store_item_get(p->store, b->in[0].port, anc, &state, &payload)) < 0)
            return rc;
        if (rc == 1 && (rc = orch_prop_item_resolve(p, b->out[0], e, state, payload, -1)) < 0)
            return rc;
    }
    return 0;
}

/* Every descendant of e (domain a) in domain d, depth first in entity order. */
static int descendants(orch_prop *p, int64_t e, int a, int d, int64_t **ids, size_t *n)
{
    /* The chain of domains from a (exclusive) down to d (inclusive). */
    int chain[64], depth = 0;
    for (int x = d; x != a; x = orch_plan_domain(p->plan, x)->parent) {
        if (depth == 64)
            return orch_error_set(-E2BIG, "domain tree deeper than 64 levels");
        chain[depth++] = x;
    }
    int64_t *cur = malloc(sizeof *cur);
    size_t ncur = 1;
    if (!cur)
        return -ENOMEM;
    cur[0] = e;
    for (int lvl = depth - 1; lvl >= 0; lvl--) {
        int64_t *next = NULL;
        size_t nnext = 0, cap = 0;
        for (size_t i = 0; i < ncur; i++) {
            int64_t *kids;
            size_t nk;
            int rc = orch_store_children(p->store, cur[i], chain[lvl], &kids, &nk);
            if (rc == 0 && orch__grow_n(&next, &cap, nnext + nk + 1, sizeof *next) < 0)
                rc = -ENOMEM;
            if (rc < 0) {
                free(kids);
                free(next);
                free(cur);
                return rc;
            }
            if (nk)
                memcpy(next + nnext, kids, nk * sizeof *kids);
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

int orch_prop_for_each_consumer(orch_prop *p, int port, int64_t e, const struct prop_visit *v)
{
    const struct orch_port *pt = orch_plan_port(p->plan, port);
    int rc = 0;
    for (int i = 0; i < pt->nconsumers && rc == 0; i++) {
        int c = pt->consumers[i];
        const struct orch_stmt *s = orch_plan_stmt(p->plan, c);
        if (s->op == ORCH_OP_BROADCAST) {
            int64_t *ids;
            size_t n;
            if ((rc = descendants(p, e, pt->domain, s->target, &ids, &n)) < 0)
                return rc;
            for (size_t k = 0; k < n && rc == 0; k++)
                rc = v->copy(p, s->out[0], ids[k], v);
            free(ids);
        } else if (s->op == ORCH_OP_REDUCE) { /* the reduce grain lives on the parent */
            int64_t parent;
            if ((rc = orch_store_entity_parent(p->store, e, &parent)) == 0)
                rc = v->grain(p, c, parent, v);
        } else {
            rc = v->grain(p, c, e, v);
        }
    }
    return rc;
}

static int notify_grain(orch_prop *p, int stmt, int64_t e, const struct prop_visit *v)
{
    return grain_input(p, stmt, e, v->state, v->payload, v->size);
}

static int notify_copy(orch_prop *p, int port, int64_t e, const struct prop_visit *v)
{
    return orch_prop_item_resolve(p, port, e, v->state, v->payload, v->size);
}

int orch_prop_item_resolve(orch_prop *p, int port, int64_t e, enum orch_item_state state,
                           uint64_t payload, int64_t size)
{
    /* A Present item records its payload's size (the `items` view shows it, reclaimed or
     * not), and the size counts as live when its port's payloads are freed as read. */
    int rc = 0;
    if (state != ORCH_ITEM_PRESENT || !p->payloads)
        size = -1;
    else if (size < 0 || orch_store_checks(p->store)) {
        /* Read when the caller does not know it; with ORCH_STORE_CHECKS, checked. */
        int64_t stored;
        rc = orch_prop_payload_size(p, payload, &stored);
        if (rc == 0 && size >= 0 && stored != size)
            rc = orch_error_set(ORCH_ECORRUPT,
                                "payload %llu was reported as %lld bytes, but %lld are stored",
                                (unsigned long long)payload, (long long)size,
                                (long long)stored);
        size = stored;
    }
    if (rc == 0)
        rc = orch_store_item_put(p->store, port, e, state, payload, size);
    if (rc == 0)
        p->items[(size_t)port * ORCH_ITEM__COUNT + state]++;
    if (rc == 0 && size >= 0 && orch_prop_port_counted(p, port))
        p->live += size;
    if (rc < 0)
        return rc;
    struct prop_visit v = {.grain = notify_grain,
                           .copy = notify_copy,
                           .state = state,
                           .payload = payload,
                           .size = size};
    return orch_prop_for_each_consumer(p, port, e, &v);
}

int orch_prop_expansion_resolve(orch_prop *p, int stmt, int64_t parent,
                                enum orch_expansion_state state, int64_t nchildren)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int rc = orch_store_expansion_put(p->store, s->call, parent, state, nchildren);
    const struct dom_topo *t = &p->dom[s->target];
    for (int i = 0; i < t->nexp && rc == 0; i++) {
        int dep = t->exp_deps[i];
        if (orch_plan_stmt(p->plan, dep)->op == ORCH_OP_REDUCE) {
            /* A reduce learns its expansion: read back its children's inputs. */
            struct orch_grain_row g;
            if ((rc = grain_get(p, dep, parent, &g)) == 0)
                rc = orch_prop_reconsider(p, dep, &g);
        } else {
            /* An aligned expand sees the plain expansion as one more input. */
            enum orch_item_state as_item = state == ORCH_EXPANSION_SUCCEEDED ? ORCH_ITEM_PRESENT
                                           : state == ORCH_EXPANSION_DROPPED
                                               ? ORCH_ITEM_DROPPED
                                               : ORCH_ITEM_SUPPRESSED;
            rc = grain_input(p, dep, parent, as_item, 0, -1);
        }
    }
    return rc;
}

int orch_prop_admit_root(orch_prop *p, int domain, int64_t ordinal, const char *key,
                         uint64_t payload, int64_t size, int64_t *entity_out)
{
    assert(orch_store_in_txn(p->store));
    const struct orch_domain *d = orch_plan_domain(p->plan, domain);
    const struct orch_source *src = orch_plan_source(p->plan, d->source);
    int64_t e;
    int rc = orch_prop_entity_publish(p, domain, 0, ordinal, key, &e);
    if (rc == 0)
        rc = orch_prop_item_resolve(p, src->port, e, ORCH_ITEM_PRESENT, payload, size);
    if (rc == 0 && entity_out)
        *entity_out = e;
    return rc;
}
