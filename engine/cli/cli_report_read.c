/* cli_report_read.c — `orch report`'s reading (cli_report.h): one pass over the attempts
 * and one over the grains, in the report's read transaction, into per-call histograms and
 * per-bucket series.
 */
#include "cli_report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "orch_states.h"
#include "support.h"

int orch_cli_report_bound(struct report *R, int rc)
{
    return rc == SQLITE_OK ? 0 : orch_store_error(R->job->store, rc, "bind");
}

int orch_cli_report_prepare_now(struct report *R, const char *sql, sqlite3_stmt **st)
{
    int rc = prepare(R->job, sql, st, "report");
    if (rc == 0 && (rc = orch_cli_report_bound(R, sqlite3_bind_int64(*st, 1, R->now))) < 0) {
        sqlite3_finalize(*st);
        *st = NULL;
    }
    return rc;
}

static int hist_index(int64_t ms)
{
    if (ms < 0)
        ms = 0;
    if (ms < HLIN)
        return (int)ms;
    int o = 63 - __builtin_clzll((unsigned long long)ms); /* >= 10 */
    int i = HLIN + (o - 10) * HSUB + (int)((ms >> (o - 6)) & (HSUB - 1));
    return i < NHIST ? i : NHIST - 1;
}

/* The middle of a histogram bucket, in ms. */
static double hist_value(int i)
{
    if (i < HLIN)
        return i;
    int o = 10 + (i - HLIN) / HSUB, sub = (i - HLIN) % HSUB;
    double lo = (double)(1LL << o) + (double)sub * (double)(1LL << (o - 6));
    return lo + (double)(1LL << (o - 6)) / 2;
}

double orch_cli_report_percentile(const struct rcall *c, double p)
{
    int64_t rank = (int64_t)(p * (double)c->batches + 0.999999);
    if (rank < 1)
        rank = 1;
    int64_t seen = 0;
    for (int i = 0; i < NHIST; i++)
        if ((seen += c->hist[i]) >= rank)
            return hist_value(i);
    return 0;
}

static int pid_add(struct rcall *c, int64_t pid)
{
    int lo = 0, hi = c->npids;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (c->pids[mid] == pid)
            return 0;
        if (c->pids[mid] < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (orch__grow(&c->pids, &c->cappids, c->npids + 1, sizeof *c->pids) < 0)
        return -ENOMEM;
    memmove(c->pids + lo + 1, c->pids + lo, (size_t)(c->npids - lo) * sizeof *c->pids);
    c->pids[lo] = pid;
    c->npids++;
    return 0;
}

static int bucket_of(const struct report *R, int64_t t)
{
    int64_t b = (t - R->t0) / R->width;
    return b < 0 ? 0 : b >= NB ? NB - 1 : (int)b;
}

/* Adds weight w over [s, e) to the time-weighted series (acc: ms x w within a bucket;
 * full: a difference array of the buckets covered whole), in O(1). */
static void interval_add(const struct report *R, double *acc, double *full, int64_t s,
                         int64_t e, double w)
{
    if (e <= s || w == 0)
        return;
    if (s < R->t0)
        s = R->t0;
    if (e > R->t0 + NB * R->width)
        e = R->t0 + NB * R->width;
    if (e <= s)
        return;
    int bs = bucket_of(R, s), be = bucket_of(R, e - 1);
    if (bs == be) {
        acc[bs] += (double)(e - s) * w;
        return;
    }
    acc[bs] += (double)(R->t0 + (bs + 1) * R->width - s) * w;
    acc[be] += (double)(e - (R->t0 + be * R->width)) * w;
    full[bs + 1] += w;
    full[be] -= w;
}

/* The span: the first attempt's start to the last one's end (now, while one is open). */
static int read_span(struct report *R)
{
    static const char sql[] =
        "SELECT count(*), min(started_at), max(ended_at), count(*) - count(ended_at),"
        " min(batch), max(batch) FROM attempt";
    sqlite3_stmt *st;
    int rc = prepare(R->job, sql, &st, "report");
    if (rc < 0)
        return rc;
    if ((rc = orch_store_step(R->job->store, st)) == 1) {
        R->nattempts = sqlite3_column_int64(st, 0);
        R->t0 = sqlite3_column_int64(st, 1);
        R->t1 = sqlite3_column_int64(st, 2);
        R->nopen = sqlite3_column_int64(st, 3);
        R->bmin = sqlite3_column_int64(st, 4);
        R->bmax = sqlite3_column_int64(st, 5);
        rc = 0;
    }
    sqlite3_finalize(st);
    if (R->nopen && R->now > R->t1)
        R->t1 = R->now;
    if (R->t1 < R->t0)
        R->t1 = R->t0;
    R->width = (R->t1 - R->t0 + NB - 1) / NB;
    if (R->width < 1)
        R->width = 1;
    /* Batch ids grow by one per batch across resumes (dispatch.c), so the id range
     * estimates the count before it is known; it only chooses which ids to draw. */
    int64_t range = R->bmax - R->bmin + 1;
    R->keep_every = range > R->cap ? (range + R->cap - 1) / R->cap : 1;
    return rc;
}

/* How an attempt that ended counts in its batch (orch_states.h, attempt outcome). */
enum mark { MARK_OPEN, MARK_DONE, MARK_FAILED, MARK_DASHED };

/* o: attempt.outcome, NULL while the attempt runs. Failed: an attempt failure (error,
 * crash, timeout) or a typed failure of its record (record, group); dashed: interrupted,
 * or discarded by a suppression barrier. */
static enum mark outcome_mark(const char *o)
{
    if (!o)
        return MARK_OPEN;
    int v = orch_attempt_outcome_parse(o);
    if (v < 0)
        return MARK_DONE; /* the schema's CHECK admits no other name */
    switch ((enum orch_attempt_outcome)v) {
    case ORCH_ATTEMPT_OK:
    case ORCH_ATTEMPT_DROPPED:
    case ORCH_ATTEMPT__COUNT:
        return MARK_DONE;
    case ORCH_ATTEMPT_RECORD:
    case ORCH_ATTEMPT_GROUP:
    case ORCH_ATTEMPT_ERROR:
    case ORCH_ATTEMPT_CRASH:
    case ORCH_ATTEMPT_TIMEOUT:
        return MARK_FAILED;
    case ORCH_ATTEMPT_INTERRUPTED:
    case ORCH_ATTEMPT_SUPPRESSED:
        return MARK_DASHED;
    }
    return MARK_DONE;
}

static int batch_done(struct report *R, struct rbatch *b)
{
    struct rcall *c = &R->calls[b->call];
    int64_t dur = b->end - b->start;
    R->nbatches++;
    c->batches++;
    c->busy_ms += dur;
    if (dur > c->max_ms)
        c->max_ms = dur;
    if (b->n > c->size_max)
        c->size_max = b->n;
    c->hist[hist_index(dur)]++;
    if (b->pid && pid_add(c, b->pid) < 0)
        return -ENOMEM;
    interval_add(R, R->cacc, R->cfull, b->start, b->end, c->cpus);
    interval_add(R, R->gacc, R->gfull, b->start, b->end, c->gpus);
    if (R->nkept < R->cap && (b->batch - R->bmin) % R->keep_every == 0) {
        if (orch__grow(&R->kept, &R->capkept, R->nkept + 1, sizeof *R->kept) < 0)
            return -ENOMEM;
        R->kept[R->nkept++] = *b;
    }
    return 0;
}

/* One pass over the attempts in id order: a batch's attempts are inserted together when
 * it is reserved (migrations/0003), so consecutive rows of one batch id are the batch,
 * and no sort of the attempt table is needed. */
static int read_batches(struct report *R)
{
    static const char sql[] =
        "SELECT a.id, a.batch, a.worker_pid, a.started_at, coalesce(a.ended_at, ?1),"
        " a.outcome, g.call_id FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id"
        " ORDER BY a.id";
    sqlite3_stmt *st;
    int rc = orch_cli_report_prepare_now(R, sql, &st);
    if (rc < 0)
        return rc;
    struct rbatch cur = {0};
    bool have = false;
    while (rc == 0 && (rc = orch_store_step(R->job->store, st)) == 1) {
        rc = 0;
        int64_t id = sqlite3_column_int64(st, 0);
        int64_t batch =
            sqlite3_column_type(st, 1) == SQLITE_NULL ? -id : sqlite3_column_int64(st, 1);
        int call = sqlite3_column_int(st, 6);
        if (call < 0 || call >= R->ncalls) {
            rc = orch_error_set(ORCH_ECORRUPT, "attempt #%" PRId64 " has an unknown call", id);
            break;
        }
        const char *o = (const char *)sqlite3_column_text(st, 5);
        int64_t s = sqlite3_column_int64(st, 3), e = sqlite3_column_int64(st, 4);
        if (e < s)
            e = s;
        if (!have || batch != cur.batch || call != cur.call) {
            if (have && (rc = batch_done(R, &cur)) < 0)
                break;
            cur = (struct rbatch){.batch = batch,
                                  .lo = id,
                                  .start = s,
                                  .end = e,
                                  .call = call,
                                  .pid = sqlite3_column_int64(st, 2)};
            have = true;
        }
        cur.hi = id;
        cur.n++;
        if (s < cur.start)
            cur.start = s;
        if (e > cur.end)
            cur.end = e;
        enum mark m = outcome_mark(o);
        cur.nopen += m == MARK_OPEN;
        cur.nfail += m == MARK_FAILED;
        cur.nmark += m == MARK_DASHED;
        struct rcall *c = &R->calls[call];
        c->attempts++;
        c->failed += m == MARK_FAILED;
    }
    if (rc == 0 && have)
        rc = batch_done(R, &cur);
    sqlite3_finalize(st);
    return rc;
}

/* Per grain (every grain: one pass over the table): retries, whether and when it sealed
 * (its last attempt's end) and its time in the ready queue.
 *
 * A grain is counted as queued from grain.ready_at (0012: when it last became READY)
 * until its last attempt began (until now for a grain READY now: unsealed, no attempt open
 * — a grain in flight reads READY but has one, 0015_in_flight.sql). A job from before 0012
 * has no ready_at for the grains it made ready then; for those the page estimates, from
 * the FIFO position grain.ready_seq, handed out in time order: a grain g' with a later
 * ready_seq became ready after g did, and started after that; so g was ready at the
 * latest by the earliest start of any grain with ready_seq >= g's (its own included): a
 * lower bound. A grain's ready_seq and ready_at are its latest (a retry renews them), so
 * they are paired with its last attempt. */
static int read_grains(struct report *R)
{
    static const char sql[] =
        "SELECT call_id, n, s, e, sealed,"
        " coalesce(ready_at,"
        "  min(s) OVER (ORDER BY ready_seq DESC ROWS UNBOUNDED PRECEDING)), ready_seq IS NULL"
        " FROM (SELECT g.call_id, g.ready_seq, g.ready_at, g.phase = ?2 AS sealed,"
        "  count(a.id) AS n,"
        "  CASE WHEN count(a.id) = 0 OR (g.phase = ?3 AND count(a.outcome) = count(a.id))"
        "   THEN ?1 ELSE max(a.started_at) END AS s,"
        "  max(coalesce(a.ended_at, ?1)) AS e"
        "  FROM grain AS g LEFT JOIN attempt AS a ON a.grain_id = g.id"
        "  GROUP BY g.id)";
    sqlite3_stmt *st;
    int rc = orch_cli_report_prepare_now(R, sql, &st);
    if (rc < 0)
        return rc;
    const char *sealed = orch_grain_phase_name(ORCH_PHASE_SEALED);
    const char *ready = orch_grain_phase_name(ORCH_PHASE_READY);
    rc = orch_cli_report_bound(R, sqlite3_bind_text(st, 2, sealed, -1, SQLITE_STATIC));
    if (rc == 0)
        rc = orch_cli_report_bound(R, sqlite3_bind_text(st, 3, ready, -1, SQLITE_STATIC));
    while (rc == 0 && (rc = orch_store_step(R->job->store, st)) == 1) {
        rc = 0;
        int call = sqlite3_column_int(st, 0);
        if (call < 0 || call >= R->ncalls)
            continue; /* the plan and its rows agree (checked at open) */
        struct rcall *c = &R->calls[call];
        int64_t n = sqlite3_column_int64(st, 1);
        int64_t s = sqlite3_column_int64(st, 2), e = sqlite3_column_int64(st, 3);
        int64_t r = sqlite3_column_int64(st, 5);
        if (n > 0) {
            c->grains++;
            c->retries += n - 1;
        }
        if (sqlite3_column_int(st, 4)) {
            c->sealed++;
            R->sealed_total++;
            if (n > 0)
                c->tput[bucket_of(R, e)]++;
        }
        if (!sqlite3_column_int(st, 6)) /* never ready: sealed without running */
            interval_add(R, c->qacc, c->qfull, r, s, 1.0);
    }
    sqlite3_finalize(st);
    return rc;
}

/* The first keys of each drawn batch, through the rowid range of its attempts. */
static int read_keys(struct report *R)
{
    static const char sql[] =
        "SELECT e.key FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id"
        " JOIN entity AS e ON e.id = g.entity_id WHERE a.id BETWEEN ?1 AND ?2"
        " ORDER BY a.id LIMIT 3";
    sqlite3_stmt *st;
    int rc = prepare(R->job, sql, &st, "report");
    if (rc < 0)
        return rc;
    for (int i = 0; rc == 0 && i < R->nkept; i++) {
        struct rbatch *b = &R->kept[i];
        struct orch__buf keys = {0};
        sqlite3_reset(st);
        if ((rc = orch_cli_report_bound(R, sqlite3_bind_int64(st, 1, b->lo))) < 0 ||
            (rc = orch_cli_report_bound(R, sqlite3_bind_int64(st, 2, b->hi))) < 0)
            break;
        int k = 0;
        while ((rc = orch_store_step(R->job->store, st)) == 1) {
            const char *key = (const char *)sqlite3_column_text(st, 0);
            orch__buf_puts(&keys, k++ ? ", " : "");
            orch__buf_puts(&keys, key ? key : "");
        }
        if (rc == 0 && b->n > k)
            orch__buf_printf(&keys, "%sand %d more", k ? ", " : "", b->n - k);
        if (keys.oom) {
            orch__buf_free(&keys);
            rc = -ENOMEM;
            break;
        }
        b->keys = keys.p ? orch__buf_steal(&keys) : NULL;
    }
    sqlite3_finalize(st);
    return rc;
}

int orch_cli_report_read(struct report *R)
{
    int rc = read_span(R);
    if (rc == 0)
        rc = read_batches(R);
    if (rc == 0)
        rc = read_grains(R);
    if (rc == 0)
        rc = read_keys(R);
    return rc;
}
