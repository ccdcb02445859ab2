/* knobs.h — the environment orch reads, read once.
 *
 * Every ORCH_ variable (docs/configuration.md has the table: what each sets, its default,
 * its valid values, whom it is for) is read and checked here, once per process, at the
 * start of main(); the libraries never read the environment. The values reach them through
 * their APIs:
 *
 *   process-wide settings, given by orch_knobs_load() before any store is opened or any
 *   UDF started: the state store's (orch_store_configure), the payload store's limits
 *   (orch_payload_set_job_limits), the built-ins' (orch_udf_pdf_set_heap_max,
 *   orch_page_stats_gpu_set_module). A worker is an `orch __worker` process of its own, so
 *   it reads the same variables, inherited from its driver, at its own start;
 *
 *   the run's options (orch_run_opts: the launcher, the worker binary, the test limits of
 *   the driver and its pools), filled by orch_knobs_run_opts() as the defaults that the
 *   command's options then override;
 *
 *   what a command uses itself (the report's cap, the srun guard's patience).
 *
 * A value that is not valid is ignored (the default stays), as documented per knob, except
 * ORCH_LAUNCHER, which cli_run.c refuses as a usage error, and ORCH_REPORT_MAX_BATCHES,
 * which `orch report` refuses.
 */
#ifndef ORCH_CLI_KNOBS_H
#define ORCH_CLI_KNOBS_H

#include <stddef.h>
#include <stdint.h>

#include "orch_payload.h"
#include "orch_store.h"

struct orch_run_opts;

struct orch_knobs {
    /* The defaults of the run options (orch run, resume, retry, update). Strings point
     * into the environment; NULL when unset or empty. */
    const char *launcher;      /* ORCH_LAUNCHER, as given: cli_run.c parses it */
    const char *launcher_args; /* ORCH_LAUNCHER_ARGS */
    const char *listen;        /* ORCH_LISTEN */
    const char *srun;          /* ORCH_SRUN */
    const char *worker_exe;    /* ORCH_WORKER_EXE */
    int64_t idle_stop_ms;      /* ORCH_IDLE_STOP_MS; 0: the default */
    size_t queue_window;       /* ORCH_QUEUE_WINDOW; 0: the default */
    size_t remote_batch_max;   /* ORCH_REMOTE_BATCH_MAX; 0: the default */
    int64_t batch_target_ms;   /* ORCH_BATCH_TARGET_MS; 0: the default */
    /* Commands' own. */
    int64_t srun_guard_kill_ms; /* ORCH_SRUN_GUARD_KILL_MS; 0: the default */
    int64_t report_max_batches; /* ORCH_REPORT_MAX_BATCHES: 5,000 when unset; -1 when set
                                   to anything but a positive integer */
    /* Process-wide: given to the libraries by orch_knobs_load. */
    struct orch_store_config store;     /* ORCH_NO_WALBUF, ORCH_STORE_CHECKS,
                                           ORCH_STATE_MAX_PAGES */
    struct orch_payload_limits payload; /* ORCH_PAYLOAD_MAX_MAP, _MAX_READERS, _MAX_VALUE */
    size_t pdf_heap_max;                /* ORCH_PDF_HEAP_MAX; 0: the default */
    const char *page_stats_cuda;        /* ORCH_PAGE_STATS_CUDA */
};

/* Reads the environment into the knobs and gives the process-wide ones to their
 * libraries. main() calls it once, first. Returns the knobs (static storage). */
const struct orch_knobs *orch_knobs_load(void);

/* The knobs orch_knobs_load read (static storage; zeroed before it). */
const struct orch_knobs *orch_knobs(void);

/* A count, as every count option and every ORCH_ knob that takes one reads it: decimal
 * digits, nothing before them (no space, no sign), the number at most max (never clamped).
 * orch_count_prefix reads the digits at the start of v and returns where they end, or NULL
 * when v does not start with a digit or the number is over max; orch_count reads the whole
 * of v, a number in min .. max: 0, or -1. */
const char *orch_count_prefix(const char *v, uint64_t max, uint64_t *n);
int orch_count(const char *v, uint64_t min, uint64_t max, uint64_t *n);

/* Sets the run options that come from the knobs (the launcher's is cli_run.c's). */
void orch_knobs_run_opts(struct orch_run_opts *o);

#endif
