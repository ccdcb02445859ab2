/* cli_failures.c — `orch failures` (DESIGN §9): a job's failures, grouped or one by one. */
#include "cli_inspect.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "orch_job.h"

static const char failures_help[] =
    "usage: orch failures DIR [--all]\n"
    "\n"
    "Failures (the `failures` view) grouped by call, kind and message, the most frequent\n"
    "first (ties: the group that failed first), two lines each:\n"
    "  COUNT  CALL  KIND  MESSAGE\n"
    "      generation G (or generations G1-G2): KEY, KEY, KEY, ... N more\n"
    "with the keys of the first 3 entities that failed so (an entity that failed so\n"
    "several times, retried, is counted once there); then a summary line.\n"
    "Kinds: record and group (typed failures of the UDF) and exhausted (retries used up)\n"
    "seal the grain Failed; error, crash and timeout are attempt failures, retried.\n"
    "\n"
    "Then the attempts that failed without a failure row, charged to no record: those of a\n"
    "batch of several that failed whole (a crash, a timeout, an error of run: the batch is\n"
    "split and each record retried alone) or that the job's stop ended; grouped the same\n"
    "way, with the batches instead of the generations:\n"
    "  COUNT  CALL  KIND  MESSAGE\n"
    "      batch B (or batches B1-B2): KEY, KEY, KEY, ... N more\n"
    "`orch status` counts both as failed attempts.\n"
    "\n"
    "--all: every failure row in the order they happened, tab-separated with a header\n"
    "line (the uncharged attempts are rows of the attempt table):\n"
    "  call, key, kind, generation, time (ISO 8601 UTC), message\n"
    "Tab, newline, carriage return and backslash in values are written \\t \\n \\r \\\\,\n"
    "other control characters and bytes that are not UTF-8 \\xNN.\n"
    "\n"
    "exit status: 0 done (whatever failed); 1 the job cannot be read; 2 usage error.\n";

static int failures_all(struct orch_job *job, FILE *out)
{
    sqlite3_stmt *st;
    int rc = prepare(job,
                     "SELECT call, key, kind, generation, time, message FROM failures"
                     " ORDER BY failure_id",
                     &st, "failures");
    if (rc < 0)
        return rc;
    fputs("call\tkey\tkind\tgeneration\ttime\tmessage\n", out);
    while ((rc = orch_store_step(job->store, st)) == 1) {
        for (int c = 0; c < 6; c++) {
            if (c)
                fputc('\t', out);
            tsv_text(out, (const char *)sqlite3_column_text(st, c),
                     (size_t)sqlite3_column_bytes(st, c));
        }
        fputc('\n', out);
    }
    sqlite3_finalize(st);
    return rc;
}

/* Ends the line of a group's example keys: n entities, shown of them named. */
static void group_end(FILE *out, int64_t n, int64_t shown)
{
    if (n > shown)
        fprintf(out, ", ... %" PRId64 " more", n - shown);
    fputc('\n', out);
}

/* Prints the groups of a statement whose rows are (call, kind, message, n, lo, hi, key,
 * rn, ne): a group's size, the range of `what` (generation, batch) it spans, one example
 * key, the key's rank in its group (the first 3 only) and the group's entities; `head`
 * (may be NULL) before the first group. Returns 0 and *total, *groups; or an error. */
static int print_groups(struct orch_job *job, sqlite3_stmt *st, const char *what,
                        const char *head, FILE *out, int64_t *total, int64_t *groups)
{
    int rc;
    int64_t nent = 0, shown = 0;
    *total = *groups = 0;
    while ((rc = orch_store_step(job->store, st)) == 1) {
        int64_t rn = sqlite3_column_int64(st, 7);
        if (rn == 1) {
            if (*groups)
                group_end(out, nent, shown);
            else if (head)
                fputs(head, out);
            int64_t n = sqlite3_column_int64(st, 3);
            nent = sqlite3_column_int64(st, 8);
            shown = 0;
            ++*groups;
            *total += n;
            fprintf(out, "%" PRId64 "  ", n);
            tsv_str(out, (const char *)sqlite3_column_text(st, 0));
            fprintf(out, "  %s  ", (const char *)sqlite3_column_text(st, 1));
            tsv_str(out, (const char *)sqlite3_column_text(st, 2));
            int64_t lo = sqlite3_column_int64(st, 4), hi = sqlite3_column_int64(st, 5);
            if (lo == hi)
                fprintf(out, "\n    %s %" PRId64 ": ", what, lo);
            else
                fprintf(out, "\n    %ss %" PRId64 "-%" PRId64 ": ", what, lo, hi);
        }
        fputs(shown ? ", " : "", out);
        tsv_str(out, (const char *)sqlite3_column_text(st, 6));
        shown++;
    }
    if (rc == 0 && *groups)
        group_end(out, nent, shown);
    return rc;
}

/* The groups in one pass over the view, with no join: failures are first grouped per
 * (call, kind, message, entity), then window functions over each (call, kind, message)
 * give every such row its group's totals and its rank among the group's entities, so
 * that the first three entities of each group come out with their group, sorted once. */
static const char failures_sql[] =
    "SELECT call, kind, message, n, gmin, gmax, key, rn, ne FROM ("
    " SELECT call, kind, message, key,"
    "  sum(nf) OVER w AS n, min(g0) OVER w AS gmin, max(g1) OVER w AS gmax,"
    "  min(fid) OVER w AS first_id, count(*) OVER w AS ne,"
    "  row_number() OVER (w ORDER BY fid) AS rn"
    " FROM (SELECT call, kind, message, key, count(*) AS nf, min(generation) AS g0,"
    "   max(generation) AS g1, min(failure_id) AS fid"
    "  FROM failures GROUP BY call, kind, message, entity_id)"
    " WINDOW w AS (PARTITION BY call, kind, message))"
    " WHERE rn <= 3 ORDER BY n DESC, first_id, rn";

/* The same for the attempts that failed without a failure row of their grain, kind and
 * generation (dispatch.c writes one only for a batch of one record): one pass over the
 * attempt table, each failed attempt probing the failure index of its grain. */
static const char uncharged_sql[] =
    "SELECT call, kind, message, n, bmin, bmax, key, rn, ne FROM ("
    " SELECT call, kind, message, key,"
    "  sum(na) OVER w AS n, min(b0) OVER w AS bmin, max(b1) OVER w AS bmax,"
    "  min(aid) OVER w AS first_id, count(*) OVER w AS ne,"
    "  row_number() OVER (w ORDER BY aid) AS rn"
    " FROM (SELECT c.name AS call, a.outcome AS kind, coalesce(a.message, '') AS message,"
    "   e.key AS key, count(*) AS na, min(a.batch) AS b0, max(a.batch) AS b1,"
    "   min(a.id) AS aid"
    "  FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id"
    "  JOIN call AS c ON c.id = g.call_id JOIN entity AS e ON e.id = g.entity_id"
    "  WHERE a.outcome IN (?1, ?2, ?3)" /* the attempt failures: bind_attempt_failures */
    "   AND NOT EXISTS (SELECT 1 FROM failure AS f WHERE f.grain_id = a.grain_id"
    "    AND f.generation = a.generation AND f.kind = a.outcome)"
    "  GROUP BY 1, 2, 3, g.entity_id)"
    " WINDOW w AS (PARTITION BY call, kind, message))"
    " WHERE rn <= 3 ORDER BY n DESC, first_id, rn";

/* Binds ?1, ?2, ?3 of uncharged_sql: the outcomes of an attempt failure (orch_states.h). */
static int bind_attempt_failures(struct orch_job *job, sqlite3_stmt *st)
{
    static const enum orch_attempt_outcome kinds[] = {ORCH_ATTEMPT_ERROR, ORCH_ATTEMPT_CRASH,
                                                      ORCH_ATTEMPT_TIMEOUT};
    for (int i = 0; i < 3; i++) {
        int rc = sqlite3_bind_text(st, i + 1, orch_attempt_outcome_name(kinds[i]), -1,
                                   SQLITE_STATIC);
        if (rc != SQLITE_OK)
            return orch_store_error(job->store, rc, "failures");
    }
    return 0;
}

static int failures_grouped(struct orch_job *job, FILE *out)
{
    sqlite3_stmt *st;
    int64_t total, groups;
    int rc = prepare(job, failures_sql, &st, "failures");
    if (rc < 0)
        return rc;
    rc = print_groups(job, st, "generation", NULL, out, &total, &groups);
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    if (total)
        fprintf(out, "%" PRId64 " failure%s in %" PRId64 " group%s\n", total,
                total == 1 ? "" : "s", groups, groups == 1 ? "" : "s");

    /* A second statement: it may see a later commit of a live driver than the first, as
     * a second command would; each section is consistent in itself. */
    bool none = total == 0;
    if ((rc = prepare(job, uncharged_sql, &st, "failures")) < 0)
        return rc;
    if ((rc = bind_attempt_failures(job, st)) < 0) {
        sqlite3_finalize(st);
        return rc;
    }
    rc = print_groups(job, st, "batch",
                      none ? "no failure charged to a record\n"
                             "\nfailed attempts charged to no record (their batch of several "
                             "failed whole and was split, or the job's stop ended them):\n"
                           : "\nfailed attempts charged to no record (their batch of several "
                             "failed whole and was split, or the job's stop ended them):\n",
                      out, &total, &groups);
    sqlite3_finalize(st);
    if (rc == 0 && total)
        fprintf(out, "%" PRId64 " attempt%s in %" PRId64 " group%s\n", total,
                total == 1 ? "" : "s", groups, groups == 1 ? "" : "s");
    else if (rc == 0 && none)
        fputs("no failures\n", out);
    return rc;
}

int orch_cli_failures(int argc, char **argv)
{
    bool all = false;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(failures_help, stdout), ORCH_EXIT_OK;
        if (strcmp(argv[i], "--all") == 0)
            all = true;
        else if (argv[i][0] == '-' && argv[i][1])
            return orch_cli_usage_error("failures: unknown option '%s'", argv[i]);
        else if (dir)
            return orch_cli_usage_error("failures: unexpected argument '%s'", argv[i]);
        else
            dir = argv[i];
    }
    if (!dir)
        return orch_cli_usage_error("failures: give a job directory");
    struct orch_job *job;
    if (open_job(dir, &job) != ORCH_EXIT_OK)
        return ORCH_EXIT_FAIL;
    int rc = all ? failures_all(job, stdout) : failures_grouped(job, stdout);
    if (rc < 0)
        fprintf(stderr, "orch: failures: %s\n", detail_or(rc));
    return finish("failures", job, rc);
}
