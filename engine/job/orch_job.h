/* orch_job.h — a job directory: its state store, its payload store and its plan.
 *
 *   JOB/state.db        SQLite: plan rows, entities, items, grains, attempts, failures
 *   JOB/payloads/       LMDB: payload bytes by id
 *   JOB/pipeline.orch   the source text the job was created from
 *   JOB/lock            held (flock) by the one driver running the job
 *
 * A job is created once, from a pipeline file, by `orch run`; the plan's canonical text
 * and hash are stored in it, and every later open rebuilds the plan from that text alone
 * (never from the pipeline file, which the user may have edited or moved) and refuses it
 * when the hash does not match.
 *
 * The plan tables (domain, call, port) are written at creation with the plan's own
 * indexes as ids, so that engine code never translates between the two.
 */
#ifndef ORCH_JOB_H
#define ORCH_JOB_H

#include "orch_payload.h"
#include "orch_plan.h"
#include "orch_store.h"

struct orch_job {
    char *dir;
    orch_store *store;
    orch_payload *payloads;
    orch_plan *plan;
    struct orch_job_info *info; /* the job row, one malloc'd block */
    char *base_dir;             /* job.base_dir: files() keys are paths relative to it */
    int lock_fd;                /* -1 unless this process holds the driver lock: exclusive
                                   (read-write open), or shared (a read-only open of a
                                   directory it cannot write: orch_job_open) */
};

/* Creates the job directory `dir` (which must not exist: -EEXIST, with a message that
 * points to `orch resume`) from the pipeline file at `pipeline`: compiles it (diagnostics
 * to diag; ORCH_ESYNTAX on errors, and on a pipeline that cannot be read when diag is
 * given, since that too was said on diag), writes pipeline.orch, state.db with the plan rows, and
 * the payload store, both holding a new random identity that binds them, and takes the
 * driver lock. On failure nothing of `dir` is left
 * behind. On success *out is the open job (free with orch_job_close). */
int orch_job_create(const char *dir, const char *pipeline, FILE *diag, struct orch_job **out);

enum orch_job_open_flags {
    ORCH_JOB_READONLY = 1 << 0, /* status, sql, export: no lock (but see orch_job_open),
                                   no writes */
};

/* Opens an existing job: the state store (read-only or read-write), the plan rebuilt from
 * the stored canonical text and checked against the stored hash (ORCH_EMISMATCH), and the
 * payload store, which must exist (it is never created here) and be the job's: its
 * identity must equal the one state.db holds, and its next id must be above every id a
 * committed item names (job.payload_mark: a store is not older than state.db); a missing,
 * replaced, restored-from-another-job or older payloads/ is ORCH_EMISMATCH, and nothing is
 * written. A job made before schema 4 has no identity: a read-write open adopts the store
 * it finds. A read-write open takes the driver lock (ORCH_ELOCKED with the live driver's
 * pid in the detail), after checking that every file a driver writes is writable (else
 * -EACCES or -EROFS, naming the file). A read-only open of a directory this process cannot
 * write takes the driver lock shared, held until orch_job_close, and reads both stores
 * without the files even readers write (LMDB's lock table, SQLite's -shm), which is safe
 * because no driver can start meanwhile; when a driver runs now, the payload store cannot
 * be read (-EACCES, naming its pid). Both stores are opened read-only (MDB_RDONLY,
 * SQLITE_OPEN_READONLY) by every read-only open. */
int orch_job_open(const char *dir, int flags, struct orch_job **out);

/* Reclaims payloads that no committed item names: outputs of reports that were rejected
 * (stale), or written by a worker whose report was never committed (the driver stopped
 * first). Such payloads are never read (DESIGN §6, invariant 4). Must run while no worker
 * of the job writes: the driver calls it before it starts its pools and after it closed
 * them. *deleted (may be NULL) receives how many were removed. */
int orch_job_reclaim(struct orch_job *job, size_t *deleted);

/* Closes everything the job holds and frees it; releases the lock. NULL is ignored. */
void orch_job_close(struct orch_job *job);

/* Writes the plan's domain, call and port rows (ids: the plan's indexes), or updates the
 * rows of those ids (an edited plan aligned with the job's: cli_update.c). */
int orch_job_write_plan_rows(orch_store *s, const orch_plan *p);

#endif
