/* cli_status.c — `orch status` (DESIGN §9): a job's state, progress and throughput. */
#include "cli_inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "orch_job.h"
#include "support.h"

static const char status_help[] =
    "usage: orch status DIR\n"
    "\n"
    "Shows the job's name, status, plan hash and whether a driver is running it now; per\n"
    "call (the `progress` view): grains by phase and the sealed ones by outcome; failures;\n"
    "attempts, and throughput: sealed grains per second from the first attempt's start to\n"
    "the last attempt's end (now, while an attempt runs); busy time per call: the sum of\n"
    "the durations of its batches, each batch counted once whatever its size (a batch\n"
    "that runs counts up to now; one whose driver died counts nothing, as its end is\n"
    "unknown); until the job finishes, an estimate of the time left (eta): the grains\n"
    "not sealed yet, of those that exist now (expansions may add more), at the\n"
    "throughput so far. The numbers come from one snapshot. Works while the job runs.\n"
    "\n"
    "Status: created (never run), running (a driver runs it now), interrupted (its driver\n"
    "was stopped by SIGINT or SIGTERM, or ended without a word: killed, or the machine\n"
    "stopped), failed (a fault stopped it: the `stopped:` line says which), finished.\n"
    "Interrupted and failed jobs continue with `orch resume DIR`.\n"
    "\n"
    "Failures: final ones (record, group: typed failures of the UDF; exhausted: retries\n"
    "used up), each sealing a grain Failed, by kind; then failed attempts (error, crash,\n"
    "timeout), by kind, from the attempt history: every attempt that failed, whether its\n"
    "grain was then retried, or exhausted, or ran in a batch that failed whole and was\n"
    "split (`orch failures` lists both).\n"
    "\n"
    "exit status: 0 done; 1 the job cannot be read; 2 usage error.\n";

/* The count columns of the progress view, in its order: the total, then one per grain
 * phase and one per outcome of a sealed grain, each named as the state (orch_states.h;
 * the view: migrations/0001_initial.sql). */
#define STATE_NAME(e, text) text,
#define NPROGRESS (1 + ORCH_PHASE__COUNT + ORCH_OUTCOME__COUNT)
#define COL_TOTAL 0
#define COL_SEALED (1 + ORCH_PHASE_SEALED)
static const char *const progress_cols[NPROGRESS] = {
    "total", ORCH_GRAIN_PHASES(STATE_NAME) ORCH_GRAIN_OUTCOMES(STATE_NAME)};
#undef STATE_NAME

/* Counts by kind, largest first (ties: in the order they were added). */
struct tally {
    int n;
    int64_t total;
    struct {
        const char *name;
        int64_t count;
    } k[16];
};

static void tally_add(struct tally *t, const char *name, int64_t count)
{
    t->total += count;
    if (t->n == (int)(sizeof t->k / sizeof t->k[0]))
        return; /* more kinds than the schema has */
    int i = t->n++;
    for (; i > 0 && t->k[i - 1].count < count; i--)
        t->k[i] = t->k[i - 1];
    t->k[i].name = name;
    t->k[i].count = count;
}

/* " (record 2, exhausted 1)", or nothing for no kind. */
static void tally_print(FILE *out, const struct tally *t)
{
    for (int i = 0; i < t->n; i++)
        fprintf(out, "%s%s %" PRId64, i ? ", " : " (", t->k[i].name, t->k[i].count);
    if (t->n)
        fputc(')', out);
}

/* Whether a failure of this kind seals its grain Failed (orch_states.h); the others are
 * attempt failures, counted from the attempts themselves. */
static bool failure_final(enum orch_failure_kind k)
{
    switch (k) {
    case ORCH_FAILURE_RECORD:
    case ORCH_FAILURE_GROUP:
    case ORCH_FAILURE_EXHAUSTED:
        return true;
    case ORCH_FAILURE_ERROR:
    case ORCH_FAILURE_CRASH:
    case ORCH_FAILURE_TIMEOUT:
    case ORCH_FAILURE__COUNT:
        break;
    }
    return false;
}

/* Whether an attempt that ended so failed as an attempt (DESIGN §4): an error of run, a
 * crash, a timeout. */
static bool attempt_failed(enum orch_attempt_outcome o)
{
    switch (o) {
    case ORCH_ATTEMPT_ERROR:
    case ORCH_ATTEMPT_CRASH:
    case ORCH_ATTEMPT_TIMEOUT:
        return true;
    case ORCH_ATTEMPT_OK:
    case ORCH_ATTEMPT_DROPPED:
    case ORCH_ATTEMPT_RECORD:
    case ORCH_ATTEMPT_GROUP:
    case ORCH_ATTEMPT_INTERRUPTED:
    case ORCH_ATTEMPT_SUPPRESSED:
    case ORCH_ATTEMPT__COUNT:
        break;
    }
    return false;
}

/* A call's busy time (status_read says how it is summed). */
struct busy {
    int64_t ms;      /* the sum of the durations of its batches */
    int64_t batches; /* how many were summed */
};

struct status {
    int ncalls;
    const char **call;            /* names, plan order */
    int64_t (*counts)[NPROGRESS]; /* per call */
    struct tally final;           /* failures that sealed a grain Failed, by kind */
    struct tally tried;           /* attempts that failed, by outcome */
    int64_t attempts, running, first_start, last_end;
    char job_status[16];
    char stop_kind[16]; /* "" when none is recorded */
    char *stop_message; /* malloc'd; NULL when none */
    int64_t stop_at;
    int64_t live_bytes, max_unsealed, max_live_bytes; /* budgets: 0 before a run */
    struct busy *busy;                                /* per call */
};

/* Reads everything status prints in ONE statement, so that its numbers agree with each
 * other while a driver commits: rows tagged 0 (a call of `progress`), 1 (failures of one
 * kind), 2 (attempts of one outcome, NULL while they run), 3, 4, 5 (the job row), 6 (the
 * busy time of one call).
 *
 * Busy time: a batch's attempts share its start and its end (dispatch.c begins them
 * together, loop.c ends them together), so a call's busy time is the sum, over its
 * batches, of max(end) - min(start), each batch counted once whatever its size. A batch
 * still running counts up to now_at (ending where the attempts are open) when a driver
 * runs it; with none, it counts nothing. Nor does a batch that a resume closed: recovery
 * (recover.c, orch_store_attempts_interrupt) ends the attempts a dead driver left open as
 * `interrupted` with no message, at the time of the resume, not when they stopped; every
 * other ending of an attempt gives a message with `interrupted` (loop.c). */
static int status_read(struct orch_job *job, struct status *s, int64_t now_at)
{
    static const char sql[] =
        "SELECT 0, call, NULL, total, waiting, ready, in_flight, sealed, ok, dropped, failed,"
        "       suppressed FROM progress"
        " UNION ALL SELECT 1, kind, NULL, count(*), 0, 0, 0, 0, 0, 0, 0, 0 FROM failure"
        "  GROUP BY kind"
        " UNION ALL SELECT 2, outcome, NULL, count(*), count(*) - count(ended_at),"
        "  min(started_at), coalesce(max(ended_at), 0), 0, 0, 0, 0, 0"
        "  FROM attempt GROUP BY outcome"
        " UNION ALL SELECT 3, status, stop_kind, coalesce(stop_at, 0), 0, 0, 0, 0, 0, 0, 0, 0"
        "  FROM job"
        " UNION ALL SELECT 4, stop_message, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0 FROM job"
        "  WHERE stop_message IS NOT NULL"
        " UNION ALL SELECT 5, NULL, NULL, live_bytes, coalesce(max_unsealed, 0),"
        "  coalesce(max_live_bytes, 0), 0, 0, 0, 0, 0, 0 FROM job"
        " UNION ALL SELECT 6, c.name, NULL, coalesce(sum(b.e - b.s), 0), count(b.e),"
        "  0, 0, 0, 0, 0, 0, 0"
        "  FROM (SELECT min(grain_id) AS g, min(started_at) AS s,"
        "   max(CASE WHEN outcome IS NULL THEN ?1"
        "   WHEN outcome = ?2 AND message IS NULL THEN NULL ELSE ended_at END) AS e"
        "   FROM attempt GROUP BY batch) AS b"
        "  JOIN grain AS g ON g.id = b.g JOIN call AS c ON c.id = g.call_id GROUP BY c.id";
    sqlite3_stmt *st;
    int rc = prepare(job, sql, &st, "status");
    if (rc < 0)
        return rc;
    rc = now_at > 0 ? sqlite3_bind_int64(st, 1, now_at) : sqlite3_bind_null(st, 1);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, orch_attempt_outcome_name(ORCH_ATTEMPT_INTERRUPTED), -1,
                               SQLITE_STATIC);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(st);
        return orch_store_error(job->store, rc, "status");
    }
    while ((rc = orch_store_step(job->store, st)) == 1) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        const char *text = (const char *)sqlite3_column_text(st, 2);
        int64_t n = sqlite3_column_int64(st, 3);
        switch (sqlite3_column_int(st, 0)) {
        case 0: {
            int c = name ? orch_plan_find_call(job->plan, name) : -1;
            if (c < 0 || c >= s->ncalls)
                break; /* the plan and its rows agree (checked at open) */
            for (int k = 0; k < NPROGRESS; k++)
                s->counts[c][k] = sqlite3_column_int64(st, 3 + k);
            break;
        }
        case 1: {
            int kind = orch_failure_kind_parse(name);
            if (kind >= 0 && failure_final((enum orch_failure_kind)kind))
                tally_add(&s->final, orch_failure_kind_name((enum orch_failure_kind)kind), n);
            break;
        }
        case 2: {
            int o = name ? orch_attempt_outcome_parse(name) : -1;
            if (o >= 0 && attempt_failed((enum orch_attempt_outcome)o))
                tally_add(&s->tried, orch_attempt_outcome_name((enum orch_attempt_outcome)o),
                          n);
            int64_t first = sqlite3_column_int64(st, 5), last = sqlite3_column_int64(st, 6);
            if (s->attempts == 0 || first < s->first_start)
                s->first_start = first;
            if (last > s->last_end)
                s->last_end = last;
            s->attempts += n;
            s->running += sqlite3_column_int64(st, 4);
            break;
        }
        case 3:
            snprintf(s->job_status, sizeof s->job_status, "%s", name ? name : "?");
            snprintf(s->stop_kind, sizeof s->stop_kind, "%s", text ? text : "");
            s->stop_at = n;
            break;
        case 4:
            free(s->stop_message);
            if (name && !(s->stop_message = strdup(name)))
                rc = -ENOMEM;
            break;
        case 5:
            s->live_bytes = n;
            s->max_unsealed = sqlite3_column_int64(st, 4);
            s->max_live_bytes = sqlite3_column_int64(st, 5);
            break;
        case 6: {
            int c = name ? orch_plan_find_call(job->plan, name) : -1;
            if (c < 0 || c >= s->ncalls)
                break;
            s->busy[c].ms = n;
            s->busy[c].batches = sqlite3_column_int64(st, 4);
            break;
        }
        }
        if (rc < 0)
            break;
    }
    sqlite3_finalize(st);
    return rc;
}

/* Bytes as people read them: "812 B", "1.5 MiB". */
static void human_bytes(char *buf, size_t n, int64_t v)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double x = (double)v;
    int u = 0;
    while (x >= 1024 && u < 6) {
        x /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%" PRId64 " B", v);
    else
        snprintf(buf, n, "%.1f %s", x, unit[u]);
}

/* How full the admission budgets are (DESIGN §5; docs/tuning.md, "Admission"): the unsealed
 * grains against the last run's budget, the live intermediate payload bytes against theirs. */
static void admission_print(FILE *out, const struct status *s)
{
    int64_t unsealed = 0;
    for (int c = 0; c < s->ncalls; c++)
        unsealed += s->counts[c][COL_TOTAL] - s->counts[c][COL_SEALED];
    char live[32], max[32];
    human_bytes(live, sizeof live, s->live_bytes);
    if (s->max_unsealed <= 0) {
        fprintf(out, "admission:  %" PRId64 " unsealed grains, %s live intermediate payloads\n",
                unsealed, live);
        return;
    }
    human_bytes(max, sizeof max, s->max_live_bytes);
    fprintf(out,
            "admission:  %" PRId64 " of %" PRId64 " unsealed grains, %s of %s live "
            "intermediate payloads (budgets of the last run)\n",
            unsealed, s->max_unsealed, live, max);
}

static int digits(int64_t v)
{
    int d = 1;
    for (; v >= 10; v /= 10)
        d++;
    return d;
}

/* The table of calls: a header, one row per call in plan order, columns aligned. */
static void status_table(FILE *out, const struct status *s)
{
    int namew = 4;
    for (int c = 0; c < s->ncalls; c++)
        if ((int)strlen(s->call[c]) > namew)
            namew = (int)strlen(s->call[c]);
    int w[NPROGRESS];
    for (int k = 0; k < NPROGRESS; k++) {
        w[k] = (int)strlen(progress_cols[k]);
        for (int c = 0; c < s->ncalls; c++)
            if (digits(s->counts[c][k]) > w[k])
                w[k] = digits(s->counts[c][k]);
    }
    fprintf(out, "%-*s", namew, "call");
    for (int k = 0; k < NPROGRESS; k++)
        fprintf(out, "  %*s", w[k], progress_cols[k]);
    fputc('\n', out);
    for (int c = 0; c < s->ncalls; c++) {
        fprintf(out, "%-*s", namew, s->call[c]);
        for (int k = 0; k < NPROGRESS; k++)
            fprintf(out, "  %*" PRId64, w[k], s->counts[c][k]);
        fputc('\n', out);
    }
}

/* A duration as people read it: "412ms", "12.3s", "3m20s", "5h07m". */
static void human_ms(char *buf, size_t n, int64_t ms)
{
    if (ms < 1000)
        snprintf(buf, n, "%dms", (int)ms);
    else if (ms < 59950) /* what "%.1f" rounds below 60.0 */
        snprintf(buf, n, "%.1fs", (double)ms / 1000.0);
    else if (ms < 3600000)
        snprintf(buf, n, "%dm%02ds", (int)(ms / 60000), (int)(ms / 1000 % 60));
    else
        snprintf(buf, n, "%" PRId64 "h%02dm", ms / 3600000, (int)(ms / 60000 % 60));
}

/* A count with thousands separators: 1,234,567. */
static void grouped(char *buf, size_t n, int64_t v)
{
    char d[24];
    int len = snprintf(d, sizeof d, "%" PRId64, v), o = 0;
    for (int i = 0; i < len && (size_t)o + 2 < n; i++) {
        if (i > 0 && d[i - 1] != '-' && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = d[i];
    }
    buf[o] = '\0';
}

/* busy: each call's busy time (status_read says how it is summed), in plan order. */
static void busy_print(FILE *out, const struct status *s)
{
    fputs("busy:       ", out);
    for (int c = 0; c < s->ncalls; c++) {
        char t[32];
        human_ms(t, sizeof t, s->busy[c].ms);
        fprintf(out, "%s%s %s (%" PRId64 " batch%s)", c ? ", " : "", s->call[c], t,
                s->busy[c].batches, s->busy[c].batches == 1 ? "" : "es");
    }
    fputc('\n', out);
}

/* eta: the time left at the throughput so far (sealed grains over the span), for the
 * grains not sealed yet, of those that exist now (expansions may add more). */
static void eta_print(FILE *out, int64_t total, int64_t sealed, int64_t span)
{
    if (sealed <= 0 || span <= 0) {
        fprintf(out, "eta:        unknown (%s)\n",
                sealed <= 0 ? "nothing sealed yet" : "no time has passed yet");
        return;
    }
    int64_t left = total - sealed;
    double rate = (double)sealed * 1000.0 / (double)span;
    char t[32], g[32];
    human_ms(t, sizeof t, (int64_t)((double)left / rate * 1000.0 + 0.5));
    grouped(g, sizeof g, left);
    fprintf(out, "eta:        ~%s (%s grain%s left at %.1f grains/s so far)\n", t, g,
            left == 1 ? "" : "s", rate);
}

/* The plans the job has run, oldest first, when there is more than one, and its last
 * update (table job_update: `orch update`). Best effort: a read that fails prints nothing. */
static void history_print(FILE *out, struct orch_job *job)
{
    sqlite3 *db = orch_store_db(job->store);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT hash, adopted_at, (SELECT count(*) FROM plan) FROM plan"
                               " ORDER BY id",
                           -1, &st, NULL) == SQLITE_OK) {
        for (int i = 0; sqlite3_step(st) == SQLITE_ROW; i++) {
            if (sqlite3_column_int64(st, 2) < 2)
                break;
            char at[40];
            orch_cli_iso_time(at, sizeof at, sqlite3_column_int64(st, 1));
            fprintf(out, "%s%.12s adopted %s\n", i ? "            " : "plans:      ",
                    (const char *)sqlite3_column_text(st, 0), at);
        }
        sqlite3_finalize(st);
    }
    if (sqlite3_prepare_v2(db, "SELECT id, started_at, added - changed - replanned, changed,"
                               " removed, replanned, finished_at IS NOT NULL, rerun"
                               " FROM job_update ORDER BY id DESC LIMIT 1",
                           -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) {
            char at[40];
            orch_cli_iso_time(at, sizeof at, sqlite3_column_int64(st, 1));
            fprintf(out, "update:     #%lld at %s: %lld new, %lld changed, %lld removed",
                    (long long)sqlite3_column_int64(st, 0), at,
                    (long long)sqlite3_column_int64(st, 2),
                    (long long)sqlite3_column_int64(st, 3),
                    (long long)sqlite3_column_int64(st, 4));
            if (sqlite3_column_int64(st, 5))
                fprintf(out, ", %lld new revisions for an edited pipeline",
                        (long long)sqlite3_column_int64(st, 5));
            if (sqlite3_column_type(st, 7) != SQLITE_NULL)
                fprintf(out, " (--rerun %s)", (const char *)sqlite3_column_text(st, 7));
            fprintf(out, "; %s\n", sqlite3_column_int(st, 6) ? "finished" : "under way");
        }
        sqlite3_finalize(st);
    }
}

/* Streaming expansions (DESIGN §5) that are open — their UDF runs, their children so far
 * are published — or that failed after publishing children: the first few, and how many
 * there are. Best effort, as history_print (a job made before the view has none). */
static void open_expansions_print(FILE *out, struct orch_job *job)
{
    enum { SHOWN = 5 };
    sqlite3 *db = orch_store_db(job->store);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT call, key, state, children, count(*) OVER ()"
                               " FROM open_expansions ORDER BY state DESC, parent_id",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    for (int i = 0; i < SHOWN && sqlite3_step(st) == SQLITE_ROW; i++) {
        fprintf(out, "%s%s %s: %lld children so far, %s\n", i ? "            " : "expansions: ",
                (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
                (long long)sqlite3_column_int64(st, 3), (const char *)sqlite3_column_text(st, 2));
        if (i == SHOWN - 1 && sqlite3_column_int64(st, 4) > SHOWN)
            fprintf(out, "            ... %lld in all (SELECT * FROM open_expansions)\n",
                    (long long)sqlite3_column_int64(st, 4));
    }
    sqlite3_finalize(st);
}

/* Where the workers run (DESIGN §11): the hosts that ran attempts, with how many worker
 * processes and attempts each (a Slurm host says so), and, while a driver runs, each
 * worker holding a batch now: its call, host, Slurm step and pid. Only open attempts
 * (above the job's attempt floor) are read for the second. Best effort, as history_print. */
static void workers_print(FILE *out, struct orch_job *job, bool live)
{
    sqlite3 *db = orch_store_db(job->store);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT coalesce(host, '?'), count(DISTINCT worker_pid),"
                               " count(*), max(slurm_job IS NOT NULL) FROM attempt"
                               " GROUP BY host ORDER BY host",
                           -1, &st, NULL) == SQLITE_OK) {
        for (int i = 0; sqlite3_step(st) == SQLITE_ROW; i++)
            fprintf(out, "%s%s: %lld worker process%s, %lld attempt%s%s\n",
                    i ? "            " : "hosts:      ", (const char *)sqlite3_column_text(st, 0),
                    (long long)sqlite3_column_int64(st, 1),
                    sqlite3_column_int64(st, 1) == 1 ? "" : "es",
                    (long long)sqlite3_column_int64(st, 2),
                    sqlite3_column_int64(st, 2) == 1 ? "" : "s",
                    sqlite3_column_int(st, 3) ? " (Slurm steps)" : "");
        sqlite3_finalize(st);
    }
    if (!live)
        return;
    if (sqlite3_prepare_v2(db, "SELECT c.name, coalesce(a.host, '?'), a.slurm_job, a.worker_pid"
                               " FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id"
                               " JOIN call AS c ON c.id = g.call_id"
                               " WHERE a.id >= (SELECT attempt_floor FROM job)"
                               " AND a.ended_at IS NULL"
                               " GROUP BY c.name, a.host, a.slurm_job, a.worker_pid"
                               " ORDER BY c.name, a.host, a.worker_pid",
                           -1, &st, NULL) == SQLITE_OK) {
        for (int i = 0; sqlite3_step(st) == SQLITE_ROW; i++) {
            fprintf(out, "%s%s on %s", i ? "            " : "working:    ",
                    (const char *)sqlite3_column_text(st, 0),
                    (const char *)sqlite3_column_text(st, 1));
            if (sqlite3_column_type(st, 2) != SQLITE_NULL)
                fprintf(out, " (Slurm step %s)", (const char *)sqlite3_column_text(st, 2));
            fprintf(out, ", pid %lld\n", (long long)sqlite3_column_int64(st, 3));
        }
        sqlite3_finalize(st);
    }
}

/* While a driver runs: its workers whose Slurm jobs wait in the queue, from the file it
 * keeps for this (driver.h, ORCH_DRIVER_PENDING_FILE). Best effort: none when unreadable. */
static void pending_print(FILE *out, struct orch_job *job, int64_t now_at)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", job->dir, ORCH_DRIVER_PENDING_FILE);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    int n = 0;
    long long since = 0;
    int got = fscanf(f, "%d %lld", &n, &since);
    fclose(f);
    if (got != 2 || n <= 0)
        return;
    char at[40];
    orch_cli_iso_time(at, sizeof at, since);
    long long waited = now_at > since ? (now_at - since) / 1000 : 0;
    fprintf(out,
            "pending:    %d worker%s pending in Slurm since %s (%lld s): started with srun, "
            "not connected yet (`squeue` says why)\n",
            n, n == 1 ? "" : "s", at, waited);
}

static void status_print(FILE *out, struct orch_job *job, const struct status *s, bool live,
                         long pid, int64_t now_at)
{
    const char *now = orch_cli_status_now(s->job_status, s->stop_kind, live);
    bool finished_row = orch_job_status_parse(s->job_status) == ORCH_JOB_FINISHED;
    fprintf(out, "job:        %s\n", job->info->name);
    fprintf(out, "status:     %s\n", now);
    fprintf(out, "plan:       %.12s\n", job->info->plan_hash);
    history_print(out, job);
    open_expansions_print(out, job);
    if (live && pid > 0)
        fprintf(out, "driver:     running (pid %ld)\n", pid);
    else if (live)
        fprintf(out, "driver:     running\n");
    else if (finished_row)
        fprintf(out, "driver:     none\n");
    else if (access(job->dir, W_OK) != 0)
        /* resume would refuse a directory it cannot write (jobdir.c): say what works. */
        fprintf(out, "driver:     none (this directory is read-only: to resume, copy it with "
                     "`cp -a %s COPY`, then `orch resume COPY`)\n",
                job->dir);
    else
        fprintf(out, "driver:     none (resume with `orch resume %s`)\n", job->dir);
    if (live)
        pending_print(out, job, now_at);
    if (!live && s->stop_kind[0] && !finished_row) {
        char at[40];
        orch_cli_iso_time(at, sizeof at, s->stop_at);
        fprintf(out, "stopped:    %s: %s\n", at,
                s->stop_message ? s->stop_message : s->stop_kind);
    } else if (!live && orch_job_status_parse(now) == ORCH_JOB_INTERRUPTED) {
        fprintf(out, "stopped:    the driver ended without recording why (killed, or the "
                     "machine stopped)\n");
    }
    fputc('\n', out);
    status_table(out, s);
    fputc('\n', out);
    admission_print(out, s);
    if (s->final.total || s->tried.total) {
        fprintf(out, "failures:   %" PRId64 " final", s->final.total);
        tally_print(out, &s->final);
        fprintf(out, "; %" PRId64 " failed attempt%s", s->tried.total,
                s->tried.total == 1 ? "" : "s");
        tally_print(out, &s->tried);
        fprintf(out, "; see `orch failures %s`\n", job->dir);
    } else {
        fprintf(out, "failures:   0\n");
    }
    /* Attempts that have not ended run now only while a driver does; else they were
     * interrupted, and the next resume closes them. */
    fprintf(out, "attempts:   %" PRId64 " (%" PRId64 " %s)\n", s->attempts, s->running,
            live || !s->running ? "running" : "interrupted, not ended");
    int64_t sealed = 0, total = 0;
    for (int c = 0; c < s->ncalls; c++) {
        total += s->counts[c][COL_TOTAL];
        sealed += s->counts[c][COL_SEALED];
    }
    bool finished = orch_job_status_parse(now) == ORCH_JOB_FINISHED;
    if (s->attempts == 0) {
        if (!finished)
            eta_print(out, total, sealed, 0);
        return;
    }
    int64_t end = live && s->running ? now_at : s->last_end;
    if (end < s->first_start) /* no attempt has ended */
        end = s->first_start;
    int64_t span = end - s->first_start;
    char from[40], to[40];
    orch_cli_iso_time(from, sizeof from, s->first_start);
    orch_cli_iso_time(to, sizeof to, end);
    fprintf(out, "span:       %s .. %s (%.3f s)\n", from, to, (double)span / 1000.0);
    if (span > 0)
        fprintf(out, "throughput: %.1f grains/s (%" PRId64 " sealed)\n",
                (double)sealed * 1000.0 / (double)span, sealed);
    busy_print(out, s);
    if (!finished)
        eta_print(out, total, sealed, span);
    workers_print(out, job, live);
}

int orch_cli_status(int argc, char **argv)
{
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(status_help, stdout), ORCH_EXIT_OK;
        if (argv[i][0] == '-' && argv[i][1])
            return orch_cli_usage_error("status: unknown option '%s'", argv[i]);
        if (dir)
            return orch_cli_usage_error("status: unexpected argument '%s'", argv[i]);
        dir = argv[i];
    }
    if (!dir)
        return orch_cli_usage_error("status: give a job directory");
    struct orch_job *job;
    if (open_job(dir, &job) != ORCH_EXIT_OK)
        return ORCH_EXIT_FAIL;
    struct status s = {.ncalls = orch_plan_ncalls(job->plan)};
    s.call = calloc((size_t)s.ncalls + 1, sizeof *s.call);
    s.counts = calloc((size_t)s.ncalls + 1, sizeof *s.counts);
    s.busy = calloc((size_t)s.ncalls + 1, sizeof *s.busy);
    int rc = s.call && s.counts && s.busy ? 0 : -ENOMEM;
    for (int c = 0; rc == 0 && c < s.ncalls; c++)
        s.call[c] = orch_plan_call(job->plan, c)->name;
    /* Whether a driver runs the job, before the snapshot, which counts open batches up to
     * now only when one does: a driver that ends in between has ended its batches; the
     * batches of one that starts in between count nothing yet (an instant's error). */
    long pid;
    bool live = orch_cli_driver_live(job->dir, &pid);
    int64_t now = orch_cli_now_ms();
    if (rc == 0)
        rc = status_read(job, &s, live ? now : 0);
    if (rc == 0)
        status_print(stdout, job, &s, live, pid, now);
    else
        fprintf(stderr, "orch: status: %s\n", detail_or(rc));
    free(s.call);
    free(s.counts);
    free(s.busy);
    free(s.stop_message);
    return finish("status", job, rc);
}
