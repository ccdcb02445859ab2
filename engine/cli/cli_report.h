/* cli_report.h — what `orch report` reads of a job (cli_report_read.c) and draws
 * (cli_report.c): the aggregates of one read transaction, bounded by the number of calls and
 * time buckets, and at most `cap` single batches for the timeline.
 */
#ifndef ORCH_CLI_REPORT_H
#define ORCH_CLI_REPORT_H

#include <stdint.h>

#include "cli_inspect.h"

/* Time buckets of the charts. */
#define NB 120
/* Histogram of batch durations (ms): exact below HLIN, then 64 buckets per power of 2. */
#define HLIN 1024
#define HSUB 64
#define NHIST (HLIN + 54 * HSUB)

struct rcall {
    const char *name;
    double cpus, gpus;
    int workers; /* configured */
    int64_t batches, attempts, failed, busy_ms, max_ms, grains, retries, sealed;
    int64_t size_max; /* the most grains of one of its batches (the sizes chosen) */
    int64_t *pids; /* distinct worker pids, sorted */
    int npids, cappids;
    int64_t hist[NHIST];
    int64_t tput[NB];               /* grains sealed per bucket */
    double qacc[NB], qfull[NB + 1]; /* queue: partial ms, difference array of full buckets */
};

struct rbatch {
    int64_t batch, lo, hi, start, end, pid;
    int call, n, nfail, nmark, nopen;
    char *keys; /* the first keys, ", "-separated; NULL until read */
};

struct report {
    struct orch_job *job;
    int ncalls;
    struct rcall *calls;
    int64_t now, t0, t1, width; /* the charts: [t0, t1), NB buckets of width ms */
    int64_t nattempts, nbatches, nopen;
    int64_t bmin, bmax; /* batch id range */
    int64_t keep_every, cap;
    struct rbatch *kept;
    int nkept, capkept;
    double cacc[NB], cfull[NB + 1], gacc[NB], gfull[NB + 1]; /* CPU, GPU budget in use */
    int64_t sealed_total;
};

/* Reads the span, the batches (the kept ones with their first keys) and the grains into R,
 * whose job, ncalls, calls (names and options), cap and now are set. Returns 0, or a
 * negative error with the detail set. What R holds is freed by the caller (kept[].keys,
 * kept, calls[].pids) whatever this returns. */
int orch_cli_report_read(struct report *R);

/* The nearest-rank percentile p (0..1) of a call's batch durations, in ms. */
double orch_cli_report_percentile(const struct rcall *c, double p);

/* 0 for SQLITE_OK, else rc translated, with the detail set. */
int orch_cli_report_bound(struct report *R, int rc);

/* Prepares sql with ?1 bound to the report's now (R->now: what an attempt still running
 * ends at). 0, or an error with *st NULL. */
int orch_cli_report_prepare_now(struct report *R, const char *sql, sqlite3_stmt **st);

#endif
