/* update.h — incremental jobs (DESIGN §10): what `orch update` reads again, what an edited
 * pipeline carries over, and the keys of jobs made before the key rule.
 *
 *   rescan.c   the sources against the job's live roots: the rescan of an update (new,
 *              changed and removed roots; every root, for an edited plan) and the check
 *              of a resume that no update is asked for
 *   carry.c    an edited pipeline keeps what still holds: a READY grain whose call
 *              computes what it computed takes its twin's answer instead of running
 *   rekey.c    a job made before schema 13 gets the keys of DESIGN §9 on its first
 *              read-write open
 *
 * The driver (engine/driver/) calls the first two, the job directory (engine/job/) the
 * third; cli/cli_update.c starts an update (a job_update row, and an edited plan aligned
 * with the job's); the fingerprints that say what an edit changed are the plan's
 * (engine/plan/fingerprint.c); the roots and updates are rows of storage/ (orch_facts.h).
 */
#ifndef ORCH_UPDATE_H
#define ORCH_UPDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "orch_plan.h"
#include "orch_store.h"
#include "propagate.h"
#include "source.h"

/* ---- rescan.c ---------------------------------------------------------------------------- */

/* The rescan of `orch update` for one source walked by `walk`, inside the caller's
 * transaction: every live root the source still gives takes its place in it now
 * (root.position); a files() root whose file changed (size or modification time, confirmed
 * by the content hash) is retired as "changed", and one the source no longer gives as
 * "removed"; the counts go to job_update row `update`. New keys, and the new revisions of
 * changed ones, are admitted later, like any root. A root of a job made before schema 13
 * has no signature: it gets the file's now. */
int orch_update_rescan(orch_store *st, struct orch_walk *walk, int64_t update);
/* An update that adopted an edited plan: every root that is still live gets a new
 * revision, which takes over from this one what the edit left as it was (carry.c); each
 * is retired for "plan" in the transaction that admits its successor, so that readers see
 * it until then. Inside the caller's transaction. */
int orch_update_replan(orch_store *st, int64_t update);
/* Before a driver starts (and writes anything): with no update under way, each source
 * must still give the job's live roots in their order (a resume takes no change: `orch
 * update` does); ORCH_EMISMATCH with a message naming the difference (and the job
 * directory `dir`) otherwise. */
int orch_update_sources_check(orch_store *st, const orch_plan *plan, const char *base_dir,
                              const char *dir);

/* ---- carry.c ----------------------------------------------------------------------------- */

struct orch_carry;

/* When update row `update` adopted an edited plan (its plan row update_plan, non-zero),
 * compares `plan` with the plan before it and starts carrying (*out); otherwise *out is
 * NULL, which every function below takes as "nothing to carry". */
int orch_carry_open(orch_store *st, const orch_plan *plan, int64_t update, int64_t update_plan,
                    struct orch_carry **out);
void orch_carry_free(struct orch_carry *c);
/* A grain became READY: 1 when it is held to be carried (its call computes what it did),
 * 0 when it is to be queued. */
int orch_carry_push(struct orch_carry *c, const struct orch_grain_ref *g);
/* Carries, in the store's open transaction (opened here unless it is), the held grains
 * whose twins' results can be handed on, counting them in *carried; hands the others to
 * queue->ready. `in` is the caller's buffer for a grain's inputs. */
int orch_carry_turn(struct orch_carry *c, orch_prop *prop, struct orch_prop_inputs *in,
                    const struct orch_prop_hooks *queue, int64_t *carried);

/* ---- rekey.c ----------------------------------------------------------------------------- */

/* Converts the keys of the job in directory `dir` (made before schema 13; its plan, and
 * the pipeline path it was created from) and sets *base_dir (malloc'd) on success.
 * orch_job_open calls it on a read-write open of such a job. */
int orch_update_rekey(orch_store *store, const orch_plan *plan, const char *dir,
                      const char *pipeline_path, char **base_dir);

#endif
