/* prop_int.h — internals shared by the files of propagation (propagate.h): propagate.c,
 * report.c, reopen.c, inputs.c, reclaim.c. Not for the rooms above.
 *
 *   report.c ──accept──► seal ──► publish outputs ──► notify consumers ──► fate_of ──► READY
 *      │                   (propagate.c)                 (propagate.c)        │     or sealed
 *      └─ GroupFailure ──► barrier ──► seal siblings unrun ───────────────────┘     unrun
 *   reopen.c: take facts back ──► re-open grains ──► examine + settle each again
 *
 * Who may touch what: `counts` and `unsealed` change only in propagate.c (count_created,
 * count_sealed, and the re-opening of a grain through orch_prop_reopened); the store is
 * written only through orch_facts.h.
 */
#ifndef ORCH_PROP_INT_H
#define ORCH_PROP_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "orch_facts.h"
#include "propagate.h"

/* Per domain: the statements whose grains live on its entities, and the broadcasts into
 * it. Per domain C: the statements that wait on the plain expansion into C (reduces from
 * C and aligned expands into C). Built once from the plan. */
struct dom_topo {
    int *grain_stmts, ngrain, cgrain;
    int *bcast_stmts, nbcast, cbcast;
    int *exp_deps, nexp, cexp;
};

struct orch_prop {
    const orch_plan *plan;
    orch_store *store;
    struct orch_prop_hooks hooks;
    int64_t next_seq;
    int64_t unsealed;
    int64_t created; /* grains created, over all calls (orch_prop_created) */
    struct dom_topo *dom;
    struct orch_prop_counts *counts; /* per call */
    struct prop_reclaim *reclaim;    /* reclaim.c only */
    /* Live intermediate payload bytes (job.live_bytes; reclaim.c keeps it): counted only
     * once a payload store is given (orch_prop_set_payloads), whose sizes are read in
     * `snap`, a read snapshot begun at the first look-up and ended with the turn. */
    int64_t live;
    orch_payload *payloads;
    orch_payload_rtxn *snap;
    /* Items per port and state, for the run's summary: loaded by orch_prop_items_load,
     * then counted as orch_prop_item_resolve publishes them; [nports][ORCH_ITEM__COUNT]. */
    int64_t *items;
};

/* The child domain a reduce reads from: the domain of its first input. */
int orch_prop_reduce_child(const orch_plan *plan, const struct orch_stmt *s);

/* Whether grains of statement s live on root entities (their look-up skips a join). */
bool orch_prop_on_roots(const orch_prop *p, const struct orch_stmt *s);

/* Seals grain `grain` of `stmt` on entity e with outcome o — in_flight: only while it is
 * IN_FLIGHT at `generation` (a report); else only while WAITING or READY — and publishes
 * its outputs in that state (but for OK, whose values the caller publishes). *sealed
 * tells whether the guard held. */
int orch_prop_seal(orch_prop *p, int stmt, int64_t grain, int64_t e, enum orch_grain_outcome o,
                   bool in_flight, uint32_t generation, uint64_t in0, int64_t in0_size,
                   bool *sealed);

/* The size of stored payload id (reclaim.c: read in the turn's snapshot); -1 when it is
 * not stored. */
int orch_prop_payload_size(orch_prop *p, uint64_t id, int64_t *size);

/* Publishes item (port, e) in `state` and tells its consumers. size: a Present item's
 * payload's bytes when the caller knows them (a worker's report, admission), else -1: read
 * from the payload store. */
int orch_prop_item_resolve(orch_prop *p, int port, int64_t e, enum orch_item_state state,
                           uint64_t payload, int64_t size);

/* Publishes the expansion of `stmt` on parent and tells the statements that wait on it. */
int orch_prop_expansion_resolve(orch_prop *p, int stmt, int64_t parent,
                                enum orch_expansion_state state, int64_t nchildren);

/* Publishes child entity `ordinal` of parent in domain d (its grains, broadcasts). */
int orch_prop_entity_publish(orch_prop *p, int d, int64_t parent, int64_t ordinal,
                             const char *key, int64_t *out);

/* Reads everything grain g of `stmt` depends on and settles its fate: sealed, READY, or
 * WAITING with its pending count brought up to date. Only a WAITING grain changes. */
int orch_prop_reconsider(orch_prop *p, int stmt, const struct orch_grain_row *g);

/* The item state that the outputs of a grain sealed with outcome o take. */
enum orch_item_state orch_prop_outcome_item_state(enum orch_grain_outcome o);

/* What to do for each consumer of an item: for each grain that reads it, and for each
 * broadcast copy of it in a descendant. Publishing (notify) and taking back (retry) walk
 * the consumers alike. */
struct prop_visit {
    int (*grain)(orch_prop *p, int stmt, int64_t e, const struct prop_visit *v);
    int (*copy)(orch_prop *p, int port, int64_t e, const struct prop_visit *v);
    enum orch_item_state state; /* notify: the item's state and payload (its bytes, or -1) */
    uint64_t payload;
    int64_t size;
    void *ctx; /* retry: the grains to evaluate again */
};
int orch_prop_for_each_consumer(orch_prop *p, int port, int64_t e, const struct prop_visit *v);

/* A grain was re-opened by `orch retry`: it is unsealed again. */
void orch_prop_reopened(orch_prop *p);

/* ---- reclaim.c: freeing intermediate payloads (see the essay there) ---- */

/* Builds p->reclaim from the plan (orch_prop_open). 0 or -ENOMEM. */
int orch_prop_reclaim_open(orch_prop *p);
void orch_prop_reclaim_free(orch_prop *p);
/* Grain of `stmt` on e was just sealed with outcome o (orch_prop_seal): records as freed the
 * payloads of its inputs that no grain can read any more. in0: the payload of its one
 * input when known to be Present (what it was sent), else 0 (looked up); in0_size: its
 * bytes, or -1 (read from the payload store when it is freed). */
int orch_prop_reclaim_sealed(orch_prop *p, int stmt, int64_t e, enum orch_grain_outcome o,
                             uint64_t in0, int64_t in0_size);

#endif
