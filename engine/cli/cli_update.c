/* cli_update.c — `orch update DIR`: take the inputs that are new, changed or gone since the
 * job last read its sources, then run what they affect (DESIGN §10). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "orch_error.h"
#include "orch_facts.h"
#include "orch_job.h"

static const char update_help[] =
    "usage: orch update DIR [--watch SECONDS] [OPTIONS]\n"
    "\n"
    "Reads the job's sources again and runs only what changed (DESIGN §10): a key the job\n"
    "does not have becomes a new root; a files() root whose file changed (size or\n"
    "modification time, confirmed by its content hash) is retired and its key admitted\n"
    "again as a new revision; a root whose key the source no longer gives is retired.\n"
    "Retired roots and everything under them stay in state.db as history (view\n"
    "`revisions`), never in `export`. Roots that did not change keep every item; none of\n"
    "their grains runs again. Then the job runs to its end, like `orch resume`.\n"
    "An update interrupted by a crash is finished by the next `orch resume` or `orch update`.\n"
    "\n"
    "  --watch SECONDS  do not stop when the job is done: read the sources again every\n"
    "                   SECONDS (a fraction allowed) and run what is new, changed or gone:\n"
    "                   an ingestion service over the job. SIGTERM or SIGINT while it\n"
    "                   waits stops it cleanly (exit 0); while it works, they interrupt\n"
    "                   it like a run (exit 3: `orch resume` finishes that update).\n"
    "                   `status`, `sql`, `export` and `report` work while it runs.\n"
    "\n"
    "Other options and exit status as for `orch run`.\n";

/* Prints what the update found (with --watch, every update of the run): its job_update
 * rows. */
static void update_said(struct orch_job *job, int64_t id)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(orch_store_db(job->store),
                           "SELECT sum(added), sum(changed), sum(removed) FROM job_update WHERE id >= ?", -1,
                           &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, id);
    /* added counts every root admitted, the new revisions of changed files too. */
    if (sqlite3_step(st) == SQLITE_ROW)
        fprintf(stderr, "orch: update: %lld new, %lld changed, %lld removed\n",
                (long long)(sqlite3_column_int64(st, 0) - sqlite3_column_int64(st, 1)),
                (long long)sqlite3_column_int64(st, 1), (long long)sqlite3_column_int64(st, 2));
    sqlite3_finalize(st);
}

int orch_cli_update(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(update_help, stdout), ORCH_EXIT_OK;
    struct orch_run_opts o = {0};
    char *rest[64];
    int nrest = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && strcmp(argv[i], "--watch") == 0) {
            char *end;
            double s = i + 1 < argc ? strtod(argv[i + 1], &end) : 0;
            if (i + 1 == argc || *end || !(s > 0) || s > 86400.0 * 365)
                return orch_cli_usage_error("update: --watch needs a positive number of "
                                            "seconds");
            o.watch_ms = (int64_t)(s * 1000.0 + 0.5);
            if (o.watch_ms < 1)
                o.watch_ms = 1;
            i++;
        } else if (nrest < 63) {
            rest[nrest++] = argv[i];
        } else {
            return orch_cli_usage_error("update: too many arguments");
        }
    }
    struct orch_job *job;
    int status = orch_cli_open_existing("update", nrest, rest, &o, &job);
    if (status >= 0)
        return status;
    /* The update is recorded before anything of it is done: a crash from here on leaves
     * it unfinished, and the next start of a driver finishes it (admit.c). An update
     * already under way whose scan is not done is the same update. */
    int64_t id = 0;
    bool scanned = false;
    int rc = orch_store_update_open(job->store, &id, &scanned);
    if (rc == 0 && (!id || scanned)) {
        rc = orch_store_begin(job->store);
        if (rc == 0)
            rc = orch_store_update_start(job->store, &id);
        if (rc == 0)
            rc = orch_store_commit(job->store);
        else if (orch_store_in_txn(job->store))
            orch_store_rollback(job->store);
    }
    if (rc < 0) {
        fprintf(stderr, "orch: update: %s\n",
                orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc));
        orch_job_close(job);
        return ORCH_EXIT_FAIL;
    }
    status = orch_cli_drive(job, &o);
    update_said(job, id);
    orch_job_close(job);
    return status;
}
