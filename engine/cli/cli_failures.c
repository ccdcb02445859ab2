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
    "--all: every failure in the order they happened, tab-separated with a header line:\n"
    "  call, key, kind, generation, time (ISO 8601 UTC), message\n"
    "Tab, newline, carriage return and backslash in values are written \\t \\n \\r \\\\.\n"
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

/* The groups in one pass over the view, with no join: failures are first grouped per
 * (call, kind, message, entity), then window functions over each (call, kind, message)
 * give every such row its group's totals and its rank among the group's entities, so
 * that the first three entities of each group come out with their group, sorted once. */
static int failures_grouped(struct orch_job *job, FILE *out)
{
    sqlite3_stmt *st;
    int rc =
        prepare(job,
                "SELECT call, kind, message, n, gmin, gmax, key, rn, ne FROM ("
                " SELECT call, kind, message, key,"
                "  sum(nf) OVER w AS n, min(g0) OVER w AS gmin, max(g1) OVER w AS gmax,"
                "  min(fid) OVER w AS first_id, count(*) OVER w AS ne,"
                "  row_number() OVER (w ORDER BY fid) AS rn"
                " FROM (SELECT call, kind, message, key, count(*) AS nf, min(generation) AS g0,"
                "   max(generation) AS g1, min(failure_id) AS fid"
                "  FROM failures GROUP BY call, kind, message, entity_id)"
                " WINDOW w AS (PARTITION BY call, kind, message))"
                " WHERE rn <= 3 ORDER BY n DESC, first_id, rn",
                &st, "failures");
    if (rc < 0)
        return rc;
    int64_t total = 0, groups = 0, nent = 0, shown = 0;
    while ((rc = orch_store_step(job->store, st)) == 1) {
        int64_t rn = sqlite3_column_int64(st, 7);
        if (rn == 1) {
            if (groups)
                group_end(out, nent, shown);
            int64_t n = sqlite3_column_int64(st, 3);
            nent = sqlite3_column_int64(st, 8);
            shown = 0;
            groups++;
            total += n;
            fprintf(out, "%" PRId64 "  ", n);
            tsv_str(out, (const char *)sqlite3_column_text(st, 0));
            fprintf(out, "  %s  ", (const char *)sqlite3_column_text(st, 1));
            tsv_str(out, (const char *)sqlite3_column_text(st, 2));
            int64_t gmin = sqlite3_column_int64(st, 4), gmax = sqlite3_column_int64(st, 5);
            if (gmin == gmax)
                fprintf(out, "\n    generation %" PRId64 ": ", gmin);
            else
                fprintf(out, "\n    generations %" PRId64 "-%" PRId64 ": ", gmin, gmax);
        }
        fputs(shown ? ", " : "", out);
        tsv_str(out, (const char *)sqlite3_column_text(st, 6));
        shown++;
    }
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    if (groups)
        group_end(out, nent, shown);
    if (total == 0)
        fputs("no failures\n", out);
    else
        fprintf(out, "%" PRId64 " failure%s in %" PRId64 " group%s\n", total,
                total == 1 ? "" : "s", groups, groups == 1 ? "" : "s");
    return 0;
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
