/* worker_runs.h — a worker runs a dispatch in runs of at most the UDF's own batch.
 *
 * The driver sizes each dispatch from what it measures (DESIGN §5); a call's `batch=N` is
 * the most records the UDF takes in one `run` (a GPU model's batch), given to the worker
 * in CONFIG (wire.h). A dispatch of more records is run as consecutive runs of at most N
 * records, each seeing its records as 0 .. n-1 while their answers land in the dispatch's
 * (the host's indices are shifted), and the dispatch is answered in one REPORT.
 */
#ifndef ORCH_WORKER_RUNS_H
#define ORCH_WORKER_RUNS_H

#include <stddef.h>

#include "orch_udf.h"

/* Runs udf over batch ub, already bound to its host (orch_udf_answers_reset), in runs of
 * at most limit records (0: one run of all). Returns 0, or the first non-zero return of
 * a run, after which no run follows: the whole dispatch is then an attempt failure, as
 * one run's would be (DESIGN §4 splits it). ub->error keeps the failed run's message. */
int orch_worker_run_parts(const struct orch_udf *udf, void *state, struct orch_udf_batch *ub,
                          size_t limit);

#endif
