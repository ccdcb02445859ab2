/* orch_states.h — the state machines whose names are stored in state.db, one X-macro each.
 *
 * Every enumeration here appears in SQL as text (a CHECK constraint of
 * migrations/0001_initial.sql accepts exactly these names) so that `orch sql` shows
 * readable rows. The C enum and its name table are generated from one list, so they
 * cannot drift from each other; tests/test_store.c checks that each list is exactly the
 * set its CHECK constraint accepts, so they cannot drift from the schema either.
 *
 * Adding a name is a schema change: it needs a new migration that rebuilds the table's
 * CHECK constraint (migrations are history and never edited once released).
 *
 *   grain phase     WAITING -> READY -> IN_FLIGHT -> SEALED; IN_FLIGHT -> READY on retry;
 *                   WAITING -> SEALED by propagation. Only SEALED is final (DESIGN §3).
 *   grain outcome   the terminal fact of a sealed grain (NULL until sealed).
 *   item state      the terminal fact of an item (DESIGN §1).
 *   expansion state the terminal fact of an expansion (DESIGN §1).
 *   failure kind    record/group: typed failures of a UDF; exhausted: retries used up
 *                   (these three seal the grain Failed); error/crash/timeout: attempt
 *                   failures that sent the grain back to READY (DESIGN §4).
 *   attempt outcome how one attempt of one grain ended (`attempt.outcome`).
 *   job status      `job.status`.
 *   job stop        `job.stop_kind`: how the last driver stopped short (NULL: it did not,
 *                   or said nothing); see migrations/0006_job_stop.sql.
 */
#ifndef ORCH_STATES_H
#define ORCH_STATES_H

/* X(enumerator, "sql name") */
#define ORCH_GRAIN_PHASES(X)                                                                   \
    X(ORCH_PHASE_WAITING, "waiting")                                                           \
    X(ORCH_PHASE_READY, "ready")                                                               \
    X(ORCH_PHASE_IN_FLIGHT, "in_flight")                                                       \
    X(ORCH_PHASE_SEALED, "sealed")

#define ORCH_GRAIN_OUTCOMES(X)                                                                 \
    X(ORCH_OUTCOME_OK, "ok")                                                                   \
    X(ORCH_OUTCOME_DROPPED, "dropped")                                                         \
    X(ORCH_OUTCOME_FAILED, "failed")                                                           \
    X(ORCH_OUTCOME_SUPPRESSED, "suppressed")

#define ORCH_ITEM_STATES(X)                                                                    \
    X(ORCH_ITEM_PRESENT, "present")                                                            \
    X(ORCH_ITEM_DROPPED, "dropped")                                                            \
    X(ORCH_ITEM_FAILED, "failed")                                                              \
    X(ORCH_ITEM_SUPPRESSED, "suppressed")

#define ORCH_EXPANSION_STATES(X)                                                               \
    X(ORCH_EXPANSION_SUCCEEDED, "succeeded")                                                   \
    X(ORCH_EXPANSION_DROPPED, "dropped")                                                       \
    X(ORCH_EXPANSION_FAILED, "failed")

#define ORCH_FAILURE_KINDS(X)                                                                  \
    X(ORCH_FAILURE_RECORD, "record")                                                           \
    X(ORCH_FAILURE_GROUP, "group")                                                             \
    X(ORCH_FAILURE_EXHAUSTED, "exhausted")                                                     \
    X(ORCH_FAILURE_ERROR, "error")                                                             \
    X(ORCH_FAILURE_CRASH, "crash")                                                             \
    X(ORCH_FAILURE_TIMEOUT, "timeout")

/* ok/dropped: the record's report was committed; record/group: a typed failure was
 * committed; error/crash/timeout: an attempt failure; interrupted: the driver stopped
 * while it ran; suppressed: its report was discarded by a suppression barrier. */
#define ORCH_ATTEMPT_OUTCOMES(X)                                                               \
    X(ORCH_ATTEMPT_OK, "ok")                                                                   \
    X(ORCH_ATTEMPT_DROPPED, "dropped")                                                         \
    X(ORCH_ATTEMPT_RECORD, "record")                                                           \
    X(ORCH_ATTEMPT_GROUP, "group")                                                             \
    X(ORCH_ATTEMPT_ERROR, "error")                                                             \
    X(ORCH_ATTEMPT_CRASH, "crash")                                                             \
    X(ORCH_ATTEMPT_TIMEOUT, "timeout")                                                         \
    X(ORCH_ATTEMPT_INTERRUPTED, "interrupted")                                                 \
    X(ORCH_ATTEMPT_SUPPRESSED, "suppressed")

#define ORCH_JOB_STATUSES(X)                                                                   \
    X(ORCH_JOB_CREATED, "created")                                                             \
    X(ORCH_JOB_RUNNING, "running")                                                             \
    X(ORCH_JOB_INTERRUPTED, "interrupted")                                                     \
    X(ORCH_JOB_FAILED, "failed")                                                               \
    X(ORCH_JOB_FINISHED, "finished")

#define ORCH_JOB_STOPS(X)                                                                      \
    X(ORCH_STOP_INTERRUPTED, "interrupted")                                                    \
    X(ORCH_STOP_FAILED, "failed")

#define ORCH_STATE_ENUM_ITEM(name, text) name,
enum orch_grain_phase { ORCH_GRAIN_PHASES(ORCH_STATE_ENUM_ITEM) ORCH_PHASE__COUNT };
enum orch_grain_outcome { ORCH_GRAIN_OUTCOMES(ORCH_STATE_ENUM_ITEM) ORCH_OUTCOME__COUNT };
enum orch_item_state { ORCH_ITEM_STATES(ORCH_STATE_ENUM_ITEM) ORCH_ITEM__COUNT };
enum orch_expansion_state { ORCH_EXPANSION_STATES(ORCH_STATE_ENUM_ITEM) ORCH_EXPANSION__COUNT };
enum orch_failure_kind { ORCH_FAILURE_KINDS(ORCH_STATE_ENUM_ITEM) ORCH_FAILURE__COUNT };
enum orch_attempt_outcome { ORCH_ATTEMPT_OUTCOMES(ORCH_STATE_ENUM_ITEM) ORCH_ATTEMPT__COUNT };
enum orch_job_status { ORCH_JOB_STATUSES(ORCH_STATE_ENUM_ITEM) ORCH_JOB__COUNT };
enum orch_job_stop { ORCH_JOB_STOPS(ORCH_STATE_ENUM_ITEM) ORCH_STOP__COUNT };
#undef ORCH_STATE_ENUM_ITEM

/* X_name(v): the SQL name of v (a static string), or NULL when v is out of range.
 * X_parse(name): the enumerator whose SQL name is `name` (exact, case-sensitive), or -1
 * for an unknown name or NULL. Use it on text read back from state.db. */
const char *orch_grain_phase_name(enum orch_grain_phase v);
int orch_grain_phase_parse(const char *name);
const char *orch_grain_outcome_name(enum orch_grain_outcome v);
int orch_grain_outcome_parse(const char *name);
const char *orch_item_state_name(enum orch_item_state v);
int orch_item_state_parse(const char *name);
const char *orch_expansion_state_name(enum orch_expansion_state v);
int orch_expansion_state_parse(const char *name);
const char *orch_failure_kind_name(enum orch_failure_kind v);
int orch_failure_kind_parse(const char *name);
const char *orch_attempt_outcome_name(enum orch_attempt_outcome v);
int orch_attempt_outcome_parse(const char *name);
const char *orch_job_status_name(enum orch_job_status v);
int orch_job_status_parse(const char *name);
const char *orch_job_stop_name(enum orch_job_stop v);
int orch_job_stop_parse(const char *name);

#endif
