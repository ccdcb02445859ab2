/* orch_slurm_start.h — the Slurm jobs a driver started (migrations/0022_slurm_start.sql):
 * one row per worker start with `--launcher slurm`, so that the next driver can end the
 * jobs a stopped one left RUNNING (DESIGN §11).
 *
 * Each function writes inside a transaction of orch_store_begin() (asserted), but for
 * orch_store_slurm_starts(), which only reads. Errors are the store's (orch_store.h). */
#ifndef ORCH_SLURM_START_H
#define ORCH_SLURM_START_H

#include <stddef.h>
#include <stdint.h>

#include "orch_store.h"

/* Records a start: its job's name ("orch-CALL-TOKEN"), its call, now. */
int orch_store_slurm_start_put(orch_store *s, const char *name, const char *call);
/* The worker of start `name` connected and runs in Slurm step "JOBID.STEPID". */
int orch_store_slurm_start_step(orch_store *s, const char *name, const char *step);
/* The start's srun ended: its job is no longer the driver's to end. */
int orch_store_slurm_start_del(orch_store *s, const char *name);
/* Forgets every start. */
int orch_store_slurm_starts_clear(orch_store *s);
/* Calls fn with each start's name, call and step (NULL when its worker never said), in
 * the order they were started. Stops at, and returns, fn's first non-zero result; or 0,
 * or an error. */
int orch_store_slurm_starts(orch_store *s,
                            int (*fn)(void *ctx, const char *name, const char *call,
                                      const char *step),
                            void *ctx);

#endif
