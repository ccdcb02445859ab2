/* report.c — reports and failures of in-flight grains: acceptance, verdicts, barriers. */
#include "prop_int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"

int orch_prop_failure_row(orch_prop *p, const struct orch_grain_ref *g,
                          enum orch_failure_kind kind, const char *message)
{
    return orch_store_failure_put(p->store, g->grain, g->generation, kind, message, 0);
}

static int stmt_of(const orch_prop *p, int call)
{
    return orch_plan_call(p->plan, call)->stmt;
}

int orch_prop_fail(orch_prop *p, const struct orch_grain_ref *g, enum orch_failure_kind kind,
                   const char *message, bool *accepted)
{
    assert(orch_store_in_txn(p->store));
    int rc = orch_prop_seal(p, stmt_of(p, g->call), g->grain, g->entity, ORCH_OUTCOME_FAILED,
                            true, g->generation, 0, -1, accepted);
    if (rc == 0 && *accepted)
        rc = orch_prop_failure_row(p, g, kind, message);
    return rc;
}

/* Installs the barrier of a GroupFailure of grain g on (call, parent) and seals every
 * sibling grain of the call that has not run: waiting and queued ones. Siblings in flight
 * are sealed Suppressed when their reports arrive (orch_prop_report). */
static int group_barrier(orch_prop *p, const struct orch_grain_ref *g)
{
    int rc = orch_store_barrier_put(p->store, g->call, g->parent, g->grain);
    if (rc < 0)
        return rc;
    /* Collected first: sealing publishes items, which runs other statements. */
    struct orch_grain_row *sib;
    size_t n;
    if ((rc = orch_store_grains_unrun(p->store, g->call, g->parent, &sib, &n)) < 0)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bool sealed;
        rc = orch_prop_seal(p, stmt_of(p, g->call), sib[i].id, sib[i].entity,
                            ORCH_OUTCOME_SUPPRESSED, false, 0, 0, -1, &sealed);
    }
    free(sib);
    return rc;
}

static int barrier_covers(orch_prop *p, const struct orch_grain_ref *g, bool *covered)
{
    *covered = false;
    return g->parent ? orch_store_barrier_covers(p->store, g->call, g->parent, covered) : 0;
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
    return orch_prop_seal(p, stmt_of(p, g->call), g->grain, g->entity, ORCH_OUTCOME_SUPPRESSED,
                          true, g->generation, 0, -1, sealed);
}

/* The state that the outputs of aligned expand `stmt` on `parent` take on the children:
 * -1 while its grain is unsealed (it runs once the plain expansion is terminal), else the
 * item state of its outcome. */
static int aligned_sealed_state(orch_prop *p, int stmt, int64_t parent, int *state)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    struct orch_grain_row g;
    int rc = orch_store_grain_get(p->store, s->call, parent, orch_prop_on_roots(p, s), &g);
    if (rc < 0)
        return rc;
    *state = g.outcome < 0
                 ? -1
                 : (int)orch_prop_outcome_item_state((enum orch_grain_outcome)g.outcome);
    return 0;
}

/* The bytes of answer a's k-th payload as the worker stored them, or -1 when a does not
 * say (an answer made by the driver for a carried grain). */
static int64_t answer_size(const struct orch_wire_answer *a, size_t k)
{
    return a->size && a->size[k] <= INT64_MAX ? (int64_t)a->size[k] : -1;
}

/* Resolves the items of s's outputs on child e, ordinal c, of answer a: Present with
 * their payloads, or Failed with a failure row about the child when a names c among its
 * failed children (*k: the next of them to meet; they come in increasing order). */
static int child_items(orch_prop *p, const struct orch_grain_ref *g, const struct orch_stmt *s,
                       const struct orch_wire_answer *a, uint32_t c, int64_t e, uint32_t *k)
{
    int rc = 0;
    if (*k < a->nfailed && a->failed[*k].child == c) {
        for (int o = 0; o < s->nout && rc == 0; o++)
            rc = orch_prop_item_resolve(p, s->out[o], e, ORCH_ITEM_FAILED, 0, -1);
        if (rc == 0)
            rc = orch_store_failure_put(p->store, g->grain, g->generation, ORCH_FAILURE_RECORD,
                                        a->failed[*k].message, e);
        ++*k;
        return rc;
    }
    for (int o = 0; o < s->nout && rc == 0; o++) {
        size_t at = (size_t)c * a->nout + (size_t)o;
        rc = orch_prop_item_resolve(p, s->out[o], e, ORCH_ITEM_PRESENT, a->payload[at],
                                    answer_size(a, at));
    }
    return rc;
}

/* Publishes the children of answer a from ordinal `from` on (those before it were
 * published by earlier chunks), their items, and, when `hashed`, their hashes (children of
 * an open expansion: a replay compares with them). */
static int publish_children(orch_prop *p, const struct orch_grain_ref *g, int stmt,
                            const struct orch_wire_answer *a, uint32_t from, bool hashed)
{
    int64_t parent = g->entity;
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
    uint32_t failed = 0, c0 = from - a->first;
    while (failed < a->nfailed && a->failed[failed].child < c0)
        failed++;
    for (uint32_t c = c0; c < a->nchild && rc == 0; c++) {
        int64_t e;
        if ((rc = orch_prop_entity_publish(p, s->target, parent, (int64_t)a->first + c, NULL,
                                           &e)) < 0)
            break;
        rc = child_items(p, g, s, a, c, e, &failed);
        if (rc == 0 && hashed)
            rc = orch_store_child_hash_put(p->store, e, a->hash[c]);
        for (int k = 0; k < naligned && rc == 0; k++) {
            const struct orch_stmt *as = orch_plan_stmt(p->plan, aligned[k][0]);
            for (int o = 0; o < as->nout && rc == 0; o++)
                rc = orch_prop_item_resolve(p, as->out[o], e,
                                            (enum orch_item_state)aligned[k][1], 0, -1);
        }
    }
    free(aligned);
    return rc;
}

/* An expand answered OK: publish its children after those its chunks published, their
 * items, then the expansion. */
static int expand_ok(orch_prop *p, const struct orch_grain_ref *g, int stmt,
                     const struct orch_wire_answer *a, int64_t published)
{
    int64_t total = (int64_t)a->first + a->nchild;
    int64_t from = published > (int64_t)a->first ? published : (int64_t)a->first;
    int rc = from < total ? publish_children(p, g, stmt, a, (uint32_t)from, false) : 0;
    if (rc == 0 && published > 0)
        rc = orch_store_expansion_open_close(p->store, orch_plan_stmt(p->plan, stmt)->call,
                                             g->entity);
    if (rc == 0)
        rc = orch_prop_expansion_resolve(p, stmt, g->entity, ORCH_EXPANSION_SUCCEEDED, total);
    return rc;
}

/* Compares the children of answer a (ordinals first .. first+nchild-1, from a chunk or a
 * report) with those the expansion of g published before (`published` of them, with
 * their hashes: DESIGN §4, a replayed expansion). `last`: a is the expansion's last word
 * (a report), which must not end before the published children. why is "" when they
 * agree, else the RecordFailure the expansion takes. */
static int replay_check(orch_prop *p, const struct orch_grain_ref *g, const struct orch_stmt *s,
                        const struct orch_wire_answer *a, int64_t published, bool last,
                        char *why, size_t whysz)
{
    why[0] = '\0';
    if ((int64_t)a->first > published) {
        snprintf(why, whysz, "children from %u arrived, but only %lld were published", a->first,
                 (long long)published);
        return 0;
    }
    for (uint32_t c = 0; c < a->nchild && (int64_t)a->first + c < published; c++) {
        int64_t ordinal = (int64_t)a->first + c;
        uint64_t h = 0;
        int rc = orch_store_child_hash_at(p->store, g->entity, s->target, ordinal, &h);
        if (rc < 0)
            return rc;
        if (rc == 0 || a->hash == NULL || h != a->hash[c]) {
            snprintf(why, whysz,
                     "not deterministic: child %lld differs from the one published before",
                     (long long)ordinal);
            return 0;
        }
    }
    if (last && (int64_t)a->first + a->nchild < published)
        snprintf(why, whysz,
                 "not deterministic: the expansion made %lld children; %lld were published "
                 "before",
                 (long long)a->first + a->nchild, (long long)published);
    return 0;
}

/* A replay of g's expansion that does not agree with what it published: g fails with
 * why (a RecordFailure), and v says REFUSED with it. */
static int replay_refused(orch_prop *p, const struct orch_grain_ref *g, const char *why,
                          struct orch_verdict *v);

int orch_prop_chunk(orch_prop *p, const struct orch_grain_ref *g,
                    const struct orch_wire_answer *a, struct orch_verdict *v)
{
    assert(orch_store_in_txn(p->store));
    assert(a->grain == (uint64_t)g->grain && a->generation == g->generation);
    int stmt = stmt_of(p, g->call);
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    assert(s->op == ORCH_OP_EXPAND && a->outcome == ORCH_WIRE_OK && a->hash != NULL);
    v->kind = ORCH_VERDICT_STALE;
    v->why[0] = '\0';
    bool covered;
    int64_t published = 0;
    int rc = barrier_covers(p, g, &covered);
    if (rc < 0 || covered) /* its report seals it Suppressed */
        return rc;
    if ((rc = orch_store_expansion_open_get(p->store, g->call, g->entity, &published)) < 0)
        return rc;
    char why[sizeof v->why];
    if ((rc = replay_check(p, g, s, a, published, false, why, sizeof why)) < 0)
        return rc;
    if (why[0])
        return replay_refused(p, g, why, v);
    v->kind = ORCH_VERDICT_SEALED; /* taken; the grain stays in flight */
    int64_t end = (int64_t)a->first + a->nchild;
    if (end <= published)
        return 0; /* a replay that has not passed the published children yet */
    rc = publish_children(p, g, stmt, a,
                          (uint32_t)(published > a->first ? published : a->first), true);
    return rc < 0 ? rc : orch_store_expansion_open_put(p->store, g->call, g->entity, end);
}

/* An aligned expand answered OK with as many children as the plain expansion (checked
 * before sealing): fill their items by ordinal. */
static int aligned_ok(orch_prop *p, const struct orch_grain_ref *g, int stmt,
                      const struct orch_wire_answer *a)
{
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int64_t *kids;
    size_t n;
    int rc = orch_store_children(p->store, g->entity, s->target, &kids, &n);
    if (rc < 0)
        return rc;
    assert(n == a->nchild);
    uint32_t failed = 0;
    for (size_t c = 0; c < n && rc == 0; c++)
        rc = child_items(p, g, s, a, (uint32_t)c, kids[c], &failed);
    free(kids);
    return rc;
}

/* Publishes the values of an accepted OK answer. */
static int publish_ok(orch_prop *p, const struct orch_grain_ref *g, const struct orch_stmt *s,
                      int stmt, const struct orch_wire_answer *a, uint64_t first_input,
                      int64_t published)
{
    int rc = 0;
    switch (s->op) {
    case ORCH_OP_FILTER:
        return orch_prop_item_resolve(p, s->out[0], g->entity, ORCH_ITEM_PRESENT, first_input,
                                      -1);
    case ORCH_OP_EXPAND:
        return expand_ok(p, g, stmt, a, published);
    case ORCH_OP_EXPAND_ALIGNED:
        return aligned_ok(p, g, stmt, a);
    case ORCH_OP_MAP:
    case ORCH_OP_REDUCE:
        for (int o = 0; o < s->nout && rc == 0; o++)
            rc = orch_prop_item_resolve(p, s->out[o], g->entity, ORCH_ITEM_PRESENT,
                                        a->payload[o], answer_size(a, (size_t)o));
        return rc;
    case ORCH_OP_BROADCAST: /* computes nothing: no grain, no report */
    case ORCH_OP__COUNT:
        break;
    }
    assert(!"a report for a statement that has no grains");
    return orch_error_set(ORCH_ECORRUPT, "a report for a broadcast");
}

/* Seals g from an in-flight report with outcome o, and says what became of it. */
static int seal_report(orch_prop *p, const struct orch_grain_ref *g, enum orch_grain_outcome o,
                       enum orch_verdict_kind kind, uint64_t first_input, struct orch_verdict *v)
{
    bool sealed = false;
    /* Its input's bytes, known when the grain became READY by it (what it was sent). */
    int64_t in0_size = g->in0_state == ORCH_ITEM_PRESENT && g->in0 == first_input &&
                               g->in0_size != ORCH_IN0_SIZE_UNKNOWN
                           ? (int64_t)g->in0_size
                           : -1;
    int rc = orch_prop_seal(p, stmt_of(p, g->call), g->grain, g->entity, o, true, g->generation,
                            first_input, in0_size, &sealed);
    v->kind = sealed ? kind : ORCH_VERDICT_STALE;
    return rc;
}

static int fail_report(orch_prop *p, const struct orch_grain_ref *g, enum orch_failure_kind kind,
                       const char *message, enum orch_verdict_kind vk, struct orch_verdict *v)
{
    bool accepted = false;
    int rc = orch_prop_fail(p, g, kind, message, &accepted);
    v->kind = accepted ? vk : ORCH_VERDICT_STALE;
    return rc;
}

static int replay_refused(orch_prop *p, const struct orch_grain_ref *g, const char *why,
                          struct orch_verdict *v)
{
    int rc = fail_report(p, g, ORCH_FAILURE_RECORD, why, ORCH_VERDICT_REFUSED, v);
    if (rc == 0 && v->kind == ORCH_VERDICT_REFUSED)
        snprintf(v->why, sizeof v->why, "%s", why);
    return rc;
}

int orch_prop_report(orch_prop *p, const struct orch_grain_ref *g,
                     const struct orch_wire_answer *a, uint64_t first_input,
                     struct orch_verdict *v)
{
    assert(orch_store_in_txn(p->store));
    /* The pool matched the answer to the batch's grain and generation (pool.h). */
    assert(a->grain == (uint64_t)g->grain && a->generation == g->generation);
    int stmt = stmt_of(p, g->call);
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    v->kind = ORCH_VERDICT_STALE;
    v->why[0] = '\0';
    bool covered;
    int rc = barrier_covers(p, g, &covered);
    if (rc < 0)
        return rc;
    if (covered)
        return seal_report(p, g, ORCH_OUTCOME_SUPPRESSED, ORCH_VERDICT_SUPPRESSED, first_input, v);
    switch (a->outcome) {
    case ORCH_WIRE_DROP:
    case ORCH_WIRE_KEEP_FALSE:
        return seal_report(p, g, ORCH_OUTCOME_DROPPED, ORCH_VERDICT_SEALED, first_input, v);
    case ORCH_WIRE_RECORD_FAILURE:
        return fail_report(p, g, ORCH_FAILURE_RECORD, a->message, ORCH_VERDICT_SEALED, v);
    case ORCH_WIRE_GROUP_FAILURE:
        if ((rc = fail_report(p, g, ORCH_FAILURE_GROUP, a->message, ORCH_VERDICT_SEALED, v)) <
                0 ||
            v->kind == ORCH_VERDICT_STALE || !g->parent)
            return rc; /* on a root entity, a GroupFailure is a RecordFailure */
        return group_barrier(p, g);
    case ORCH_WIRE_KEEP_TRUE:
    case ORCH_WIRE_OK:
        break;
    case ORCH_WIRE__COUNT: /* the pool decodes known kinds only */
        assert(!"not an answer kind");
        return orch_error_set(-EPROTO, "unknown answer kind %d", (int)a->outcome);
    }
    if (s->op == ORCH_OP_EXPAND_ALIGNED) {
        /* The count must match the plain expansion; checked before sealing, so that a
         * mismatch becomes a RecordFailure (DESIGN §2). */
        int64_t n;
        if ((rc = orch_store_children_count(p->store, g->entity, s->target, &n)) < 0)
            return rc;
        if (n != (int64_t)a->nchild) {
            char why[sizeof v->why];
            snprintf(why, sizeof why,
                     "expand aligned %s gave %u children; the expansion of this parent has %lld",
                     orch_plan_call(p->plan, g->call)->name, a->nchild, (long long)n);
            if ((rc = fail_report(p, g, ORCH_FAILURE_RECORD, why, ORCH_VERDICT_REFUSED, v)) ==
                    0 &&
                v->kind == ORCH_VERDICT_REFUSED)
                memcpy(v->why, why, sizeof why);
            return rc;
        }
    }
    int64_t published = 0;
    if (s->op == ORCH_OP_EXPAND) {
        /* A replayed expansion must make the children it published (DESIGN §4); checked
         * before sealing, so that a difference becomes a RecordFailure. */
        char why[sizeof v->why];
        if ((rc = orch_store_expansion_open_get(p->store, g->call, g->entity, &published)) <
                0 ||
            (published > 0 &&
             (rc = replay_check(p, g, s, a, published, true, why, sizeof why)) < 0))
            return rc;
        if (published > 0 && why[0])
            return replay_refused(p, g, why, v);
        if (published == 0 && a->first > 0)
            return replay_refused(p, g, "children came before the first", v);
    }
    if ((rc = seal_report(p, g, ORCH_OUTCOME_OK, ORCH_VERDICT_SEALED, first_input, v)) < 0 ||
        v->kind == ORCH_VERDICT_STALE)
        return rc;
    return publish_ok(p, g, s, stmt, a, first_input, published);
}
