/* orch_facts.h — the job's facts in the state store, named by the domain: entities,
 * items, expansions, grains, attempts, failures and suppression barriers (DESIGN §1, §6).
 *
 * What it owns. Every read and write the scheduler makes of a job's runtime tables goes
 * through these functions; the engine holds no SQL text of its own but the user's
 * (`orch sql`) and the inspection commands'. Each function binds its values and checks
 * every bind and step; state names are bound from the X-macro tables of orch_states.h,
 * never written as literals, so the C enums and the stored text cannot drift.
 *
 * Rules the caller keeps (the store does not know the plan):
 *   - Writes happen inside a transaction of orch_store_begin() (asserted).
 *   - A terminal fact is published once: putting an item or an expansion that exists is
 *     ORCH_ECONSTRAINT. Only `orch retry` takes facts back (the *_take_back functions).
 *   - Guarded transitions say whether they happened (`*done`): a grain is dispatched,
 *     requeued or sealed only from the phase (and generation) the caller names, so a
 *     stale report or entry changes nothing. That guard is the acceptance rule of
 *     DESIGN §4, applied in SQL.
 *
 * Statements. Each function keeps its prepared statement in a slot of the store (no
 * look-up by text on the hot path); the store owns them and finalizes them on close.
 *
 * Errors: 0 (or 1 where a function says "found") on success, else a negative code
 * translated once by the store (orch_store.h), with the detail recorded. Arrays handed
 * out are malloc'd: the caller frees them, also when the function failed (then NULL).
 */
#ifndef ORCH_FACTS_H
#define ORCH_FACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orch_states.h"
#include "orch_store.h"

/* ---- entities -------------------------------------------------------------------------- */

/* Publishes an entity of domain `domain`: a root (parent 0, key its source value) or a
 * child (parent != 0, key NULL: derived from the parent's key and the ordinal). *id
 * receives its id. */
int orch_store_entity_put(orch_store *s, int domain, int64_t parent, int64_t ordinal,
                          const char *key, int64_t *id);

/* *parent = the parent of entity e (0 for a root). ORCH_ECORRUPT if e does not exist. */
int orch_store_entity_parent(orch_store *s, int64_t e, int64_t *parent);

/* The children of `parent` in `domain`, in ordinal order: *ids (malloc'd, NULL when none)
 * and *n. */
int orch_store_children(orch_store *s, int64_t parent, int domain, int64_t **ids, size_t *n);

/* A page of the children of `parent` in `domain`: the first `max` (at least 1) whose
 * ordinal is over `after`, in ordinal order, into ids[]; *n of them, and *last the
 * ordinal of the last (unchanged when *n is 0). A reader of many children pages them
 * with after = -1, then the last ordinal of each page, so that no list of every child is
 * held. */
int orch_store_children_page(orch_store *s, int64_t parent, int domain, int64_t after,
                             size_t max, int64_t *ids, size_t *n, int64_t *last);

/* How many children `parent` has in `domain`. */
int orch_store_children_count(orch_store *s, int64_t parent, int domain, int64_t *n);

/* ---- roots: identity and revisions (migrations/0013_roots.sql, DESIGN §10) ----------- */

/* What a files() root's content was: size, modification time and SHA-256 (hex). known is
 * false for a lines() root and for roots of jobs made before schema 13. */
struct orch_root_sig {
    bool known;
    int64_t size, mtime_ns;
    char hash[65];
};

struct orch_root_row {
    int64_t entity;   /* the root entity's id */
    int64_t position; /* its place in the source at the last scan */
    struct orch_root_sig sig;
    const char *key;  /* orch_store_root_page only: valid during the call */
};

/* Records root entity e (of `domain`; its key is the entity's) as revision `revision` of
 * its key (orch_store_root_find says which), live at `position`; sig may be NULL. The
 * revision before it, when an unfinished edit still replaces it (orch_store_root_replan),
 * is retired for "plan" now, in the same transaction. */
int orch_store_root_put(orch_store *s, int64_t e, int domain, int64_t revision,
                        int64_t position, const struct orch_root_sig *sig);

/* The live revision of `key` in `domain`: 1 and *r filled (r->key NULL), 0 if none;
 * *next_revision: the revision a new root of that key would be (1 when it has none). */
int orch_store_root_find(orch_store *s, int domain, const char *key, struct orch_root_row *r,
                         int64_t *next_revision);

/* Calls fn for at most `limit` live roots of `domain` after (after_position, after_id) in
 * (position, entity id) order: a page of a walk that stays correct while positions
 * change under it. Returns how many rows it passed, or fn's or an error's negative code. */
int orch_store_root_page(orch_store *s, int domain, int64_t after_position, int64_t after_id,
                         int limit, int (*fn)(void *ctx, const struct orch_root_row *r),
                         void *ctx);

int orch_store_root_position(orch_store *s, int64_t e, int64_t position);
/* Whether `domain` has any root row, live or retired. */
int orch_store_root_any(orch_store *s, int domain, bool *any);
/* The signature of live root e into *sig (sig->known false when it has none): 1, or 0
 * when e is no live root. */
int orch_store_root_sig_get(orch_store *s, int64_t e, struct orch_root_sig *sig);
int orch_store_root_sig(orch_store *s, int64_t e, const struct orch_root_sig *sig);
/* Retires live root e: reason "changed" or "removed". */
int orch_store_root_retire(orch_store *s, int64_t e, const char *reason);
/* The ordinal the next root of `domain` gets: one past the largest, live or retired. */
int orch_store_root_next_ordinal(orch_store *s, int domain, int64_t *ordinal);

/* job_update rows (`orch update`): the update not finished yet (*id 0: none), whether
 * its rescan is done, and (plan may be NULL) the plan row it adopted (0: none). */
int orch_store_update_open(orch_store *s, int64_t *id, bool *scanned, int64_t *plan);
/* plan: the plan row an edited pipeline adopted, 0 for an update of the inputs; rerun:
 * `--rerun`'s calls, comma-separated, or NULL. */
int orch_store_update_start(orch_store *s, int64_t plan, const char *rerun, int64_t *id);
/* The `--rerun` calls of update id: *calls malloc'd, or NULL. */
int orch_store_update_rerun(orch_store *s, int64_t id, char **calls);
/* The scan of update id, an edit that recomputes: every live root is to be replaced by a
 * new revision (counted in job_update.replanned). Each stays live, matched by no walk
 * (orch_store_root_find, orch_store_root_page), until its successor is admitted
 * (orch_store_root_put) or the update finishes (orch_store_update_finished). */
int orch_store_root_replan(orch_store *s, int64_t id);
/* Retires every live root of `domain`, for `reason`. */
int orch_store_root_retire_domain(orch_store *s, int domain, const char *reason);

/* ---- an edited pipeline's new revisions (engine/update/carry.c) ------------------------- */

/* The entity that e was in the previous revision of its root, when that revision was
 * retired for an edited plan: the same key path, found by ordinals down from that root.
 * *twin 0: none. */
int orch_store_twin(orch_store *s, int64_t e, int64_t *twin);
/* Whether an item of `port` in the revisions that the unfinished edit replaces (the live
 * roots that wait for their successors, and those it retired for "plan") names a payload
 * whose bytes were reclaimed: *any. */
int orch_store_twins_reclaimed(orch_store *s, int port, bool *any);
/* The outcome of grain (call, e): 1 and *o when it is sealed, 0 when it is not or does
 * not exist. */
int orch_store_grain_outcome(orch_store *s, int call, int64_t e, enum orch_grain_outcome *o);
/* The expansion (call, parent): 1 with its state and child count, 0 when there is none. */
int orch_store_expansion_size(orch_store *s, int call, int64_t parent,
                              enum orch_expansion_state *state, int64_t *n);
/* Whether the payload's bytes were deleted (table reclaimed). */
int orch_store_payload_reclaimed(orch_store *s, uint64_t payload, bool *reclaimed);
/* The text of the plan the job ran before plan row `plan`: 1 and *text (malloc'd), or 0. */
int orch_store_plan_previous(orch_store *s, int64_t plan, char **text);
int orch_store_update_count(orch_store *s, int64_t id, int64_t added, int64_t changed,
                            int64_t removed);
int orch_store_update_scanned(orch_store *s, int64_t id);
/* Deletes update row id if it is unfinished and found nothing (no root added or retired):
 * a --watch scan that found nothing leaves no row. */
int orch_store_update_drop_quiet(orch_store *s, int64_t id);
/* Marks every scanned, unfinished update finished: the job has run to its end. A root an
 * edit was to replace and whose key the source no longer gave is retired as "removed". */
int orch_store_update_finished(orch_store *s);

/* ---- items ----------------------------------------------------------------------------- */

/* Item (port, e): 1 with its state and payload (0 unless present; payload may be NULL),
 * or 0 while it does not exist yet. */
int orch_store_item_get(orch_store *s, int port, int64_t e, enum orch_item_state *state,
                        uint64_t *payload);

/* Publishes item (port, e) in `state`; payload is its LMDB id and size its bytes
 * (item.payload_size; < 0: unknown, NULL) when present (both ignored otherwise). */
int orch_store_item_put(orch_store *s, int port, int64_t e, enum orch_item_state state,
                        uint64_t payload, int64_t size);

/* `orch retry`: deletes item (port, e) if it is Failed or Suppressed; *taken tells. */
int orch_store_item_take_back(orch_store *s, int port, int64_t e, bool *taken);

/* Over the children of `parent` in domain `child`: how many have item `port` (*terminal)
 * and how many of those are Failed or Suppressed (*bad). */
/* The item of `port` on each child of `parent` in domain `child`, in ordinal order (a
 * reduce's inputs): one statement for all of them. state -1: the child has none yet. */
struct orch_child_item {
    int64_t entity;
    uint64_t payload; /* 0: none */
    int state;        /* an orch_item_state, or -1 */
};
int orch_store_child_item_list(orch_store *s, int port, int64_t parent, int child,
                               struct orch_child_item **out, size_t *n);
int orch_store_child_items(orch_store *s, int port, int64_t parent, int child,
                           int64_t *terminal, int64_t *bad);

/* Calls fn(ctx, port, state, count) for each (port, state) with items. */
int orch_store_item_counts(orch_store *s,
                           void (*fn)(void *ctx, int port, enum orch_item_state st, int64_t n),
                           void *ctx);

/* ---- expansions ------------------------------------------------------------------------ */

int orch_store_expansion_put(orch_store *s, int call, int64_t parent,
                             enum orch_expansion_state state, int64_t nchildren);

/* 1 and *state when expansion (call, parent) exists, 0 when not yet. */
int orch_store_expansion_get(orch_store *s, int call, int64_t parent,
                             enum orch_expansion_state *state);

/* `orch retry`: deletes expansion (call, parent) if it is Failed. */
int orch_store_expansion_take_back(orch_store *s, int call, int64_t parent);

/* ---- open expansions (DESIGN §5, streaming expansions) --------------------------------- */

/* The children published so far by expansion (call, parent) while it was open: 1 and *n,
 * or 0 when it published none that way (no chunk, or it Succeeded since). */
int orch_store_expansion_open_get(orch_store *s, int call, int64_t parent, int64_t *n);
/* Records that expansion (call, parent) has published n > 0 children so far. */
int orch_store_expansion_open_put(orch_store *s, int call, int64_t parent, int64_t n);
/* The expansion Succeeded: forgets its open row (a Failed one keeps it). */
int orch_store_expansion_open_close(orch_store *s, int call, int64_t parent);
/* Keeps the hash of child entity e's output values (a child published while its expansion
 * was open). */
int orch_store_child_hash_put(orch_store *s, int64_t e, uint64_t hash);
/* The kept hash of child `ordinal` of parent in domain d: 1 and *hash, or 0 when none. */
int orch_store_child_hash_at(orch_store *s, int64_t parent, int d, int64_t ordinal,
                             uint64_t *hash);

/* ---- grains ---------------------------------------------------------------------------- */

/* A grain row as the scheduler reads it. */
struct orch_grain_row {
    int64_t id;
    int call;
    int64_t entity;
    int64_t parent; /* of its entity; 0 for a root */
    enum orch_grain_phase phase;
    int outcome; /* an orch_grain_outcome when sealed, else -1 */
    int64_t pending;
    uint32_t generation;
    int64_t seq;       /* ready_seq; 0 if never READY */
    uint32_t attempts; /* filled only by orch_store_grains_ready (see there) */
};

/* Creates the WAITING grain (call, e), e a child of `parent` (0 for a root), with
 * `pending` inputs not terminal. */
int orch_store_grain_create(orch_store *s, int call, int64_t e, int64_t parent,
                            int64_t pending);

/* Reads grain (call, e) (root: the entity has no parent, and the look-up skips the join).
 * ORCH_ECORRUPT when it does not exist. */
int orch_store_grain_get(orch_store *s, int call, int64_t e, bool root,
                         struct orch_grain_row *g);

/* Reads grain `id`. ORCH_ECORRUPT when it does not exist. */
int orch_store_grain_by_id(orch_store *s, int64_t id, struct orch_grain_row *g);

int orch_store_grain_set_pending(orch_store *s, const struct orch_grain_row *g,
                                 int64_t pending);

/* g, WAITING (or re-opened) → READY with ready_seq `seq`. */
int orch_store_grain_ready(orch_store *s, const struct orch_grain_row *g, int64_t seq);

/* READY → IN_FLIGHT: *done, or false when a barrier sealed the grain while it was queued
 * (its queue entry is stale). Nothing is written: the attempt row begun with the batch
 * (orch_store_attempts_begin) is what says that the grain runs; its row reads READY. With
 * ORCH_STORE_CHECKS the row is checked to be READY at `generation`. */
int orch_store_grain_dispatch(orch_store *s, int64_t grain, uint32_t generation, bool *done);

/* In flight at `generation` → READY at generation+1 with ready_seq `seq`; *done tells. */
int orch_store_grain_requeue(orch_store *s, int64_t grain, uint32_t generation, int64_t seq,
                             bool *done);

/* In flight at `generation` → READY at generation+1, as resume would put it back
 * (orch_store_grains_interrupt): for a driver that stops and ends its open attempts itself,
 * which would leave resume nothing to tell the grain by. */
int orch_store_grain_interrupt(orch_store *s, int64_t grain, uint32_t generation);

/* Seals grain (call, e) with outcome o. in_flight: only if in flight at `generation` (a
 * report; its row reads READY); else only if WAITING or READY (sealed without running: a
 * READY one's queue entry is then stale, see orch_store_grain_dispatch). *done tells. */
int orch_store_grain_seal(orch_store *s, int64_t grain, int call, int64_t e,
                          enum orch_grain_outcome o, bool in_flight, uint32_t generation,
                          bool *done);

/* `orch retry`: SEALED → WAITING with generation+1 and no outcome; *done tells. */
int orch_store_grain_reopen(orch_store *s, int64_t grain, bool *done);

/* Grains sealed Failed (of `call`, or of every call when call < 0), by id: *rows
 * (malloc'd) and *n; fields id, call, entity, parent, generation. */
int orch_store_grains_failed(orch_store *s, int call, struct orch_grain_row **rows,
                             size_t *n);

/* Grains of `call` on the children of `parent` that have not run (WAITING or READY, no open
 * attempt):
 * *rows (malloc'd) and *n; fields id and entity. */
int orch_store_grains_unrun(orch_store *s, int call, int64_t parent,
                            struct orch_grain_row **rows, size_t *n);

/* ---- recovery (resume) ----------------------------------------------------------------- */

/* Unsealed grains under a suppression barrier: *rows, *n (id, call, entity, parent,
 * generation). The barrier sealed the siblings that had not run, so these were in flight
 * when the driver stopped (those that a stopping driver put back to READY itself,
 * orch_store_grain_interrupt, included). */
int orch_store_grains_barred_in_flight(orch_store *s, struct orch_grain_row **rows,
                                       size_t *n);

/* Every grain in flight (as above) back to READY with generation+1, keeping its
 * ready_seq. Before orch_store_attempts_interrupt. */
int orch_store_grains_interrupt(orch_store *s);

/* *n = grains not sealed. */
int orch_store_grains_unsealed(orch_store *s, int64_t *n);

/* Calls fn(ctx, call, outcome, count) for each (call, outcome) of sealed grains. */
int orch_store_grains_sealed_counts(orch_store *s,
                                    void (*fn)(void *ctx, int call, enum orch_grain_outcome o,
                                               int64_t n),
                                    void *ctx);

/* Calls fn(ctx, row) for each READY grain, call by call (ascending), each call's in
 * ready_seq order, with `attempts` = the attempt failures charged against its retries
 * (those since its last terminal failure: a grain re-opened by `orch retry` starts
 * afresh). Stops at fn's non-zero. */
int orch_store_grains_ready(orch_store *s,
                            int (*fn)(void *ctx, const struct orch_grain_row *g), void *ctx);

/* The job's counters, read at a driver's start and written once per turn: next_ready_seq,
 * and live_bytes (migrations/0009_admission.sql). */
int orch_store_counters_get(orch_store *s, int64_t *seq, int64_t *live_bytes);
int orch_store_counters_set(orch_store *s, int64_t seq, int64_t live_bytes);
/* The admission budgets a run starts with (job.max_unsealed, job.max_live_bytes). */
int orch_store_budgets_set(orch_store *s, int64_t max_unsealed, int64_t max_live_bytes);

/* ---- attempts, failures, barriers ------------------------------------------------------ */

/* A grain at a generation: what the statements over a whole batch take. */
struct orch_grain_at {
    int64_t grain;
    uint32_t generation;
};

/* Begins the attempts of the n grains of one batch, in a few statements: their rows are
 * *first, *first + 1, ... in the order of g. An open attempt is what makes its grain in
 * flight (orch_store_grain_dispatch): begin them in the transaction that dispatches. */
int orch_store_attempts_begin(orch_store *s, const struct orch_grain_at *g, size_t n, int pid,
                              const char *host, const char *slurm_job, uint64_t batch,
                              int64_t *first);

/* Ends attempt `row` now with outcome o and message (NULL or "" for none). */
int orch_store_attempt_end(orch_store *s, int64_t row, enum orch_attempt_outcome o,
                           const char *message);
/* Ends attempts first..last (rows) now with outcome o and no message: one statement for
 * a batch whose records all ended alike (the rows of a batch are consecutive). */
int orch_store_attempts_end(orch_store *s, int64_t first, int64_t last,
                            enum orch_attempt_outcome o);

/* Attempts first..last (rows: one batch's) started at at_ms (ms since the epoch), not when
 * they were begun: a batch that waited, queued behind another on its worker (pool.h),
 * starts when the worker has answered that one. Kept by the store and written by the
 * statements that end the rows (orch_store_attempt_end, orch_store_attempts_end): until
 * then the rows say when they were begun, and never earlier than that (at_ms comes from the
 * monotonic clock, a millisecond off either way). Outside any transaction: a rollback keeps
 * it; with ORCH_STORE_STARTS kept already, the oldest is written now (in the open one). */
int orch_store_attempts_started(orch_store *s, int64_t first, int64_t last, int64_t at_ms);

/* Ends every attempt still open (the driver stopped while it ran) as interrupted. Reads
 * only the attempts from the job's attempt floor up (see below). */
int orch_store_attempts_interrupt(orch_store *s);

/* Raises job.attempt_floor: the caller promises that every attempt whose id is below
 * `floor` is closed. The driver writes it with each commit (the oldest attempt open, or
 * past the newest), so that recovery never reads the attempt history. */
int orch_store_attempt_floor_set(orch_store *s, int64_t floor);

/* *batch = the largest batch id of any attempt (0 for none): batch ids grow across runs. */
int orch_store_attempt_last_batch(orch_store *s, uint64_t *batch);

/* Calls fn with the Slurm step ("JOBID.STEPID") of each open attempt that names one, once
 * each (a stopped driver's workers, before recovery closes their attempts). Stops at, and
 * returns, fn's first non-zero result; or 0, or an error. */
int orch_store_open_slurm_jobs(orch_store *s, int (*fn)(void *ctx, const char *job),
                               void *ctx);

/* Records a failure of grain at generation: of the grain's own entity when child is 0,
 * else of that child of its expansion (a failed child, orch_udf_fail_child). */
int orch_store_failure_put(orch_store *s, int64_t grain, uint32_t generation,
                           enum orch_failure_kind kind, const char *message, int64_t child);

/* Raises the suppression barrier of a GroupFailure of `grain` on (call, parent); a
 * barrier already there stays (the first GroupFailure names it). */
int orch_store_barrier_put(orch_store *s, int call, int64_t parent, int64_t grain);

/* Whether a barrier covers (call, parent). */
int orch_store_barrier_covers(orch_store *s, int call, int64_t parent, bool *covered);

/* `orch retry`: removes the barrier that `grain` raised, if any; *taken tells. */
int orch_store_barrier_take_back(orch_store *s, int64_t grain, bool *taken);

/* ---- the plan's rows, written once when the job is created ----------------------------- */

/* The plan's own indexes are the ids (migrations/0001_initial.sql). parent < 0: a root
 * domain. op NULL: a call no statement uses (domain and target are then ignored).
 * producer_call < 0: a port made by a source or a broadcast. */
int orch_store_plan_domain_put(orch_store *s, int id, const char *name, int parent, int depth);
int orch_store_plan_call_put(orch_store *s, int id, const char *name, const char *op,
                             const char *function, int domain, int target);
int orch_store_plan_port_put(orch_store *s, int id, int domain, const char *name,
                             const char *qualified, int producer_call, bool output);

/* ---- payload ids named by items (reclaiming orphans) ------------------------------------ */

/* A cursor over the payload ids that items name, ascending, but those recorded as
 * reclaimed (their bytes are deleted, or due to be: to the orphan reclamation they are
 * named by nothing). SQLite sorts them, spilling to disk for a big job: memory stays
 * bounded. Open it, call next until it returns 0, close
 * it (also after an error). One cursor at a time per store. */
struct orch_store_cursor {
    orch_store *s;
    sqlite3_stmt *st, *spans;
    int64_t first, last; /* the span of reclaimed ids read last (0, 0 before any) */
    bool spans_done;
};
int orch_store_named_payloads_open(orch_store *s, struct orch_store_cursor *c);
/* 1 and *id, 0 at the end, or an error. */
int orch_store_cursor_next_id(struct orch_store_cursor *c, uint64_t *id);
void orch_store_cursor_close(struct orch_store_cursor *c);

/* For fault tests: caps state.db at `pages` pages (PRAGMA max_page_count), as a full disk
 * would: writes past it fail with -ENOSPC. */
int orch_store_set_max_pages(orch_store *s, int64_t pages);

/* ---- how the last driver stopped (job.stop_*: migrations/0006_job_stop.sql) ------------- */

/* Records that the driver stops short: `kind`, with its message (NULL for none) and the
 * time now. Inside a transaction, as every write here. */
int orch_store_job_stop_put(orch_store *s, enum orch_job_stop kind, const char *message);

/* Clears the record: a driver runs the job now (and, once it finished, nothing stopped
 * it). */
int orch_store_job_stop_clear(orch_store *s);

/* ---- the payload id high-water mark (job.payload_mark: migrations/0007_payload_mark.sql) - */

/* *mark = the largest payload id that a committed item names (0: none). A payload store
 * whose next id is not above it lacks bytes that the job's items name (an older copy, or
 * writes lost in a machine crash): the job refuses it (engine/job/jobdir.c). The mark is
 * kept by the store itself: orch_store_item_put() notes each Present item's id, and the
 * transaction's commit raises job.payload_mark to the largest (one UPDATE per commit that
 * names a larger id, none otherwise), so it is exact for every committed state. */
int orch_store_payload_mark(orch_store *s, uint64_t *mark);

/* ---- payloads reclaimed before the end of the job (migrations/0008_reclaimed.sql) ------- */

/* Records that the bytes of payload `payload` are (about to be) deleted: the item rows that
 * name it stay as they are. *added (may be NULL): false when it was recorded already. The
 * caller deletes the bytes only after this commits (engine/prop/reclaim.c). */
int orch_store_reclaimed_put(orch_store *s, uint64_t payload, bool *added);

/* orch_store_reclaimed_put() of every payload that an item of `port` names; *added receives
 * how many were not recorded yet. For the sweep at the end of a job. */
int orch_store_reclaimed_port(orch_store *s, int port, int64_t *added);

/* How many payload ids have been recorded as reclaimed, in all. */
int orch_store_reclaimed_count(orch_store *s, int64_t *n);

#endif
