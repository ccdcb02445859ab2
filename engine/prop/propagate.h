/* propagate.h — the structural rules of DESIGN §3 and §4, applied to the job's facts.
 *
 * Everything here runs inside the driver's open store transaction (asserted), so that one
 * accepted report and everything it implies — items, an expansion and its child entities,
 * their grains, broadcast items, grains that became READY or were sealed without running,
 * a suppression barrier — commit together or not at all. The facts themselves are read
 * and written through storage/'s API (orch_facts.h); this module holds the rules.
 *
 * Model. A grain (call × entity) is created WAITING when its entity is published, with
 * `pending` = the number of its input facts that are not terminal yet:
 *
 *   map, filter, expand   one per input item of the entity (inputs are ports of its domain,
 *                         broadcast ports included);
 *   expand aligned        the same, plus the plain expansion of the entity into the target
 *                         domain;
 *   reduce                -1 until the plain expansion of the entity into the child domain
 *                         is terminal; then the number of child input items not terminal.
 *
 * Each fact is published exactly once (an item or an expansion is a row inserted once), and
 * publishing it notifies its consumers at once, in the same call: so a grain counts every
 * input either at its creation or at the input's publication, never both.
 *
 * One rule. What DESIGN §3 makes of a grain is decided by one function (fate_of in
 * propagate.c) from what is known of its inputs — any Failed or Suppressed (rule 1), how
 * many are not terminal (rule 2), any required one Dropped (rule 3), else READY (rule 4).
 * What is known is either counted as facts arrive (the fast path: one fact at a time) or
 * read back whole (after a multi-input grain's last fact, an expansion, `orch retry`).
 * Sealing a grain without running publishes its outputs in the same state, which notifies
 * their consumers in turn; the recursion follows the plan's DAG, so its depth is bounded
 * by the plan's size.
 *
 * Reports. orch_prop_report() applies the acceptance rule of DESIGN §4 in SQL: the grain is
 * sealed only while it is IN_FLIGHT at the report's generation, so a stale or duplicate
 * report changes nothing. Its verdict comes back as a value.
 *
 * Files (engine/prop/): propagate.c (publishing and the rules), report.c (reports,
 * failures, barriers), reopen.c (`orch retry`), inputs.c (what a READY grain's worker is
 * sent), reclaim.c (freeing intermediate payloads); their shared internals are in
 * prop_int.h.
 */
#ifndef ORCH_PROPAGATE_H
#define ORCH_PROPAGATE_H

#include <stdbool.h>
#include <stdint.h>

#include "orch_payload.h"
#include "orch_plan.h"
#include "orch_states.h"
#include "orch_store.h"
#include "pool.h"

/* A grain as the scheduler holds it. */
/* The 8-byte fields first, then the smaller ones: 56 bytes, no padding. A ready queue
 * holds one per READY grain (queue.h), so its size is the driver's memory per queued child
 * of a huge expansion. */
struct orch_grain_ref {
    int64_t grain;
    int64_t entity;
    int64_t parent; /* 0 for a root entity */
    int64_t seq;    /* ready_seq */
    /* The one input of a single-input map, filter or expand, when known as the grain
     * became READY (in0_state >= 0): spares a look-up at dispatch. -1: look it up. */
    uint64_t in0;
    int call;
    uint32_t generation;
    /* A Present in0's bytes when known, ORCH_IN0_SIZE_UNKNOWN if not (or 4 GiB or more):
     * what its reclamation subtracts from the live bytes without reading it. */
    uint32_t in0_size;
    uint16_t attempts; /* attempt failures counted against `retries` (at most 1,001) */
    int16_t in0_state;
};
#define ORCH_IN0_SIZE_UNKNOWN UINT32_MAX
_Static_assert(sizeof(struct orch_grain_ref) == 56, "a queued grain's size: see above");

struct orch_prop_hooks {
    void *ctx;
    /* A grain became READY (fresh, or re-opened: attempts 0). */
    int (*ready)(void *ctx, const struct orch_grain_ref *g);
};

typedef struct orch_prop orch_prop;

/* Reads the next ready_seq to hand out from the job (job.next_ready_seq). */
int orch_prop_open(const orch_plan *plan, orch_store *store,
                   const struct orch_prop_hooks *hooks, orch_prop **out);
void orch_prop_free(orch_prop *p);

/* Hands out the next ready_seq (for a grain the driver puts back into a queue). */
int64_t orch_prop_next_seq(orch_prop *p);
/* Writes job.next_ready_seq and job.live_bytes; call once per transaction, before
 * committing. */
int orch_prop_flush(orch_prop *p);

/* Publishes root entity `ordinal` of root domain `domain` with its source item (Present,
 * payload, of size bytes). *entity_out (may be NULL) receives its id. */
int orch_prop_admit_root(orch_prop *p, int domain, int64_t ordinal, const char *key,
                         uint64_t payload, int64_t size, int64_t *entity_out);

/* What became of a report (or of a failure the driver reports for a grain). */
enum orch_verdict_kind {
    ORCH_VERDICT_STALE,      /* the grain is not IN_FLIGHT at that generation: nothing
                                changed */
    ORCH_VERDICT_SEALED,     /* accepted: the grain is sealed as the answer says */
    ORCH_VERDICT_SUPPRESSED, /* accepted, but a suppression barrier covers the grain's
                                (call, parent): sealed Suppressed, the answer discarded */
    ORCH_VERDICT_REFUSED,    /* accepted, but the answer does not fit its statement (an
                                aligned expand's count): sealed Failed as a RecordFailure,
                                `why` says why */
};

struct orch_verdict {
    enum orch_verdict_kind kind;
    char why[256]; /* REFUSED: the reason; "" otherwise */
};

/* Applies one record's answer for in-flight grain g. `first_input` is the payload of the
 * grain's first input (what a filter passes on). The answer's shape (kind, outputs,
 * children) was checked by the pool against the call (pool.h): a misshapen answer never
 * reaches here. */
int orch_prop_report(orch_prop *p, const struct orch_grain_ref *g,
                     const struct orch_wire_answer *a, uint64_t first_input,
                     struct orch_verdict *v);

/* Applies a chunk of in-flight plain expand grain g: children a->first .. of its open
 * expansion, made while its UDF runs (DESIGN §5, streaming expansions). Those past the
 * children published so far are published (entities, items Present with their payloads,
 * their hashes kept), and their grains become READY; those before are compared with the
 * published ones (a replayed expansion, DESIGN §4). v: SEALED when taken (the grain stays
 * in flight), STALE when a suppression barrier covers g (its report seals it), REFUSED
 * when the children differ from those published: g is then sealed with a RecordFailure
 * naming the child (v->why), its later chunks and report are stale. The caller checked
 * that g's batch is in flight and holds g at a->generation. */
int orch_prop_chunk(orch_prop *p, const struct orch_grain_ref *g,
                    const struct orch_wire_answer *a, struct orch_verdict *v);

/* Seals in-flight grain g Failed with failure `kind` (exhausted, or a record failure made
 * by the driver) and message. *accepted = false (nothing changed) when g is stale. */
int orch_prop_fail(orch_prop *p, const struct orch_grain_ref *g, enum orch_failure_kind kind,
                   const char *message, bool *accepted);

/* An in-flight grain whose attempt failed (its batch errored, crashed or timed out): when
 * a suppression barrier covers its (call, parent), seals it Suppressed (*sealed = true)
 * instead of letting the driver retry or charge it; otherwise changes nothing. */
int orch_prop_barred(orch_prop *p, const struct orch_grain_ref *g, bool *sealed);

/* Records a failure row (any kind) for grain g at its generation. */
int orch_prop_failure_row(orch_prop *p, const struct orch_grain_ref *g,
                          enum orch_failure_kind kind, const char *message);

/* The inputs of a ready grain as they travel to a worker: nval[i] values for input i
 * (nin <= ORCH_PLAN_MAX_INPUTS), the values list by list. Reused across calls; free with
 * orch_prop_inputs_free. first_input: the payload of the first input (what a filter
 * passes on). */
struct orch_prop_inputs {
    uint32_t nval[ORCH_PLAN_MAX_INPUTS];
    struct orch_wire_value *vals;
    size_t nvals, cap;
    uint64_t first_input;
};
int orch_prop_inputs(orch_prop *p, const struct orch_grain_ref *g, struct orch_prop_inputs *in);
void orch_prop_inputs_free(struct orch_prop_inputs *in);

/* A page of a reduce grain's inputs, so that a reduce over many children is sent without
 * a list of them all (the driver's fed reduces, wire.h INPUTS): the surviving children
 * among the next `max` (at most ORCH_PROP_PAGE_MAX) past ordinal *after, child-major (each
 * surviving child's nin values one after the other; nval[i] counts the children kept),
 * *after moved to the last child read; *last when no child is left past it. Start with
 * *after = -1. */
#define ORCH_PROP_PAGE_MAX 4096
int orch_prop_reduce_page(orch_prop *p, const struct orch_grain_ref *g, int64_t *after,
                          size_t max, struct orch_prop_inputs *in, bool *last);

/* The children (surviving or not) of reduce grain g's parent: what the driver feeds a
 * reduce by, page by page past ORCH_PROP_PAGE_MAX, at once below it. */
int orch_prop_reduce_children(orch_prop *p, const struct orch_grain_ref *g, int64_t *n);

/* `orch retry`: re-opens the Failed grains (of call `call`, or of every call when -1),
 * with everything sealed Suppressed because of them and the GroupFailure barriers they
 * installed; see the essay at the top of reopen.c. *reopened receives how many grains
 * were re-opened. Inside the caller's transaction. */
int orch_prop_reopen_failed(orch_prop *p, int call, int64_t *reopened);

/* Counters kept while applying facts: grains created and sealed, by call. */
struct orch_prop_counts {
    int64_t created;
    int64_t sealed[ORCH_OUTCOME__COUNT];
};
const struct orch_prop_counts *orch_prop_counts(const orch_prop *p, int call);
/* Grains created, over all calls (those of earlier runs counted by orch_prop_add_sealed). */
int64_t orch_prop_created(const orch_prop *p);
/* Grains created and not yet sealed, over all calls (including those of earlier runs when
 * set with orch_prop_set_unsealed). */
int64_t orch_prop_unsealed(const orch_prop *p);
void orch_prop_set_unsealed(orch_prop *p, int64_t n);
/* Live intermediate payload bytes (DESIGN §5 admission; migrations/0009_admission.sql):
 * the payloads of the ports whose payloads are freed once their readers seal (reclaim.c,
 * EAGER families with readers), made and not yet freed. Counted from the moment a payload
 * store is given (the driver gives its own; `orch retry` gives none and counts nothing):
 * each such item published adds its payload's size, read from the store; each such
 * payload recorded as freed subtracts it. Kept in job.live_bytes by orch_prop_flush, so it
 * goes on across runs. Payloads kept because a reader failed stay counted until `orch
 * retry` runs the reader and frees them. */
void orch_prop_set_payloads(orch_prop *p, orch_payload *payloads);
/* Whether the payloads made on `port` are counted as live intermediate bytes. */
bool orch_prop_port_counted(const orch_prop *p, int port);
int64_t orch_prop_live_bytes(const orch_prop *p);
/* Ends the read snapshot the sizes are looked up in: the driver calls it at the end of
 * every turn, so that no snapshot outlives a turn (an open LMDB reader keeps the pages
 * freed after it from being reused). */
void orch_prop_snapshot_end(orch_prop *p);

/* The job's items per port and state, for the summary: orch_prop_items_load reads them
 * from the store (one scan: nothing for a new job), then each item published counts.
 * orch_prop_items gives [port * ORCH_ITEM__COUNT + state]. */
int orch_prop_items_load(orch_prop *p);
const int64_t *orch_prop_items(const orch_prop *p);

/* Counts n grains of call sealed with outcome o by an earlier run (for progress). */
void orch_prop_add_sealed(orch_prop *p, int call, enum orch_grain_outcome o, int64_t n);

/* Freeing intermediate payloads (reclaim.c): what the driver does around its commits. */

/* The port whose payloads `port` carries (its family's, reclaim.c): itself, or up through
 * filters and broadcasts, which name their input's payload ids. */
int orch_prop_family(const orch_plan *plan, int port);

/* After a commit: deletes from the payload store, in one write transaction, the payloads
 * that the committed turn recorded as freed, once a sync of state.db covers them (asked
 * for at most once a second: now is the monotonic clock, in ms). A failed delete leaves
 * orphans that the next start reclaims; it does not stop the job. Always 0. */
int orch_prop_reclaim_flush(orch_prop *p, int64_t now);
/* From now on an item may name a payload freed by an earlier transaction (an edited
 * update hands on the reclaimed outputs that nothing which runs reads: engine/update/
 * carry.c): each id is looked up in the reclaimed spans before it is freed, where the
 * rule of reclaim.c frees each id once, in the transaction that seals its last reader. */
void orch_prop_reclaim_recheck(orch_prop *p);
/* After a rollback: forgets the payloads the rolled-back turn recorded (their rows are
 * gone: their bytes must stay). p may be NULL. */
void orch_prop_reclaim_forget(orch_prop *p);
/* The job finished: records as freed, inside the caller's transaction, the payloads no
 * seal could free (broadcast families, unless a grain is Failed or Suppressed; families
 * that no statement reads). Their bytes go with the orphans after the pools close. */
int orch_prop_reclaim_end(orch_prop *p);
/* After orch_prop_reclaim_end has committed: syncs state.db and deletes the freed
 * payloads that waited for a sync (*deleted: how many). *named: how many payloads the
 * live items name, when this run can have left no other (the payload store must then hold
 * exactly as many; the caller compares), or -1 when the sweep of orphans must run whatever
 * the count (reclaim.c, "The end of a run"): when `orphans` (the run had stale or
 * suppressed reports, failed attempts or carried grains), and when anything fails here.
 * Always 0. */
int orch_prop_reclaim_settle(orch_prop *p, bool orphans, int64_t *deleted, int64_t *named);

#endif
