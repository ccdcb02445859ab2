/* cli_update.c — `orch update DIR`: take the inputs that are new, changed or gone since the
 * job last read its sources, then run what they affect (DESIGN §10). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "orch_error.h"
#include "orch_facts.h"
#include "orch_job.h"
#include "orch_lang.h"
#include "support.h"

static const char update_help[] =
    "usage: orch update DIR [PIPELINE] [--watch SECONDS] [OPTIONS]\n"
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
    "With PIPELINE, an edited pipeline: when no port computes anything else (options such\n"
    "as workers, batch, cpus, timeout or retries changed), the job adopts it and nothing\n"
    "runs again; every plan the job has run is kept (table `plan`). An edit that changes\n"
    "what ports compute (a function, an argument, an input, a new or removed statement) is\n"
    "refused, with the ports it would change, and changes nothing: running only what such\n"
    "an edit affects is not built yet; run the edited pipeline as a new job.\n"
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

/* ---- an edited pipeline ------------------------------------------------------------------ */

/* Whether the two plans number their domains, sources, calls, ports and statements alike,
 * with the same names: then the job's rows (whose ids are the plan's indexes) serve the
 * new plan as they are. */
static bool aligned(const orch_plan *a, const orch_plan *b)
{
    if (orch_plan_ndomains(a) != orch_plan_ndomains(b) ||
        orch_plan_nports(a) != orch_plan_nports(b) ||
        orch_plan_nsources(a) != orch_plan_nsources(b) ||
        orch_plan_ncalls(a) != orch_plan_ncalls(b) || orch_plan_nstmts(a) != orch_plan_nstmts(b))
        return false;
    for (int i = 0; i < orch_plan_ndomains(a); i++)
        if (strcmp(orch_plan_domain(a, i)->name, orch_plan_domain(b, i)->name) != 0 ||
            orch_plan_domain(a, i)->parent != orch_plan_domain(b, i)->parent)
            return false;
    for (int i = 0; i < orch_plan_nports(a); i++)
        if (strcmp(orch_plan_port(a, i)->qualified, orch_plan_port(b, i)->qualified) != 0 ||
            orch_plan_port(a, i)->output != orch_plan_port(b, i)->output)
            return false;
    for (int i = 0; i < orch_plan_ncalls(a); i++)
        if (strcmp(orch_plan_call(a, i)->name, orch_plan_call(b, i)->name) != 0 ||
            orch_plan_call(a, i)->stmt != orch_plan_call(b, i)->stmt)
            return false;
    return true;
}

/* What the edit changes, in words: the ports whose fingerprint differs, the new ones and
 * those that left, and the structural changes no edit may make. Empty: nothing that
 * changes a result. */
static int describe(const orch_plan *old, const orch_plan *new, struct orch__buf *b)
{
    char (*fo)[65], (*fn)[65];
    int rc = orch_plan_fingerprints(old, &fo);
    if (rc < 0)
        return rc;
    if ((rc = orch_plan_fingerprints(new, &fn)) < 0) {
        free(fo);
        return rc;
    }
    for (int i = 0; i < orch_plan_ndomains(new); i++) {
        const struct orch_domain *d = orch_plan_domain(new, i);
        int j = orch_plan_find_domain(old, d->name);
        if (j < 0)
            continue;
        const struct orch_domain *e = orch_plan_domain(old, j);
        const char *np = d->parent >= 0 ? orch_plan_domain(new, d->parent)->name : NULL;
        const char *op = e->parent >= 0 ? orch_plan_domain(old, e->parent)->name : NULL;
        if ((np == NULL) != (op == NULL) || (np && strcmp(np, op) != 0))
            orch__buf_printf(b, "\n  domain %s: its parent is now %s (was %s): its entities "
                                "cannot move",
                             d->name, np ? np : "none", op ? op : "none");
        if (d->source >= 0 && e->source >= 0 &&
            orch_plan_source(new, d->source)->kind != orch_plan_source(old, e->source)->kind)
            orch__buf_printf(b, "\n  domain %s: its source is now %s() (was %s())", d->name,
                             orch_source_kind_name(orch_plan_source(new, d->source)->kind),
                             orch_source_kind_name(orch_plan_source(old, e->source)->kind));
    }
    for (int i = 0; i < orch_plan_nports(new); i++) {
        const char *q = orch_plan_port(new, i)->qualified;
        int j = orch_plan_find_port(old, q);
        if (j < 0)
            orch__buf_printf(b, "\n  new port %s", q);
        else if (strcmp(fo[j], fn[i]) != 0)
            orch__buf_printf(b, "\n  port %s: computed differently (its function, arguments, "
                                "inputs or expansion changed)",
                             q);
    }
    for (int j = 0; j < orch_plan_nports(old); j++)
        if (orch_plan_find_port(new, orch_plan_port(old, j)->qualified) < 0)
            orch__buf_printf(b, "\n  port %s: no longer in the pipeline",
                             orch_plan_port(old, j)->qualified);
    free(fo);
    free(fn);
    return b->oom ? -ENOMEM : 0;
}

/* `orch update DIR PIPELINE`: adopts the edited pipeline when no port computes anything
 * else (options such as workers or batch changed: nothing runs again), and refuses, with
 * what it would change and changing nothing, an edit that changes what ports compute:
 * running just what such an edit affects is not built yet (issue 12). Returns -1 to go on
 * with the update, or the exit status. */
static int plan_change(struct orch_job *job, const char *path)
{
    orch_plan *new = NULL;
    int rc = orch_lang_compile_path(path, stderr, &new, NULL, NULL);
    if (rc == ORCH_ESYNTAX || (rc < 0 && rc != -ENOMEM))
        return ORCH_EXIT_FAIL; /* the compiler said why, on stderr */
    if (rc < 0)
        return fprintf(stderr, "orch: update: out of memory\n"), ORCH_EXIT_FAIL;
    if (strcmp(orch_plan_hash(new), orch_plan_hash(job->plan)) == 0) {
        orch_plan_free(new);
        return -1; /* the same plan: an update of the inputs */
    }
    struct orch__buf why = {0};
    if ((rc = describe(job->plan, new, &why)) < 0) {
        orch_plan_free(new);
        orch__buf_free(&why);
        return fprintf(stderr, "orch: update: out of memory\n"), ORCH_EXIT_FAIL;
    }
    if (why.len > 0 || !aligned(job->plan, new)) {
        fprintf(stderr,
                "orch: update: %s changes what the job computes:%s\n"
                "orch: running only what an edit affects is not built yet; the job is "
                "unchanged. Run the edited pipeline as a new job (orch run %s --job NEWDIR), "
                "or update this job with its own pipeline.\n",
                path, why.len ? why.p : "\n  declarations renamed, reordered or removed", path);
        orch_plan_free(new);
        orch__buf_free(&why);
        return ORCH_EXIT_FAIL;
    }
    orch__buf_free(&why);
    /* Only options changed: the job runs on under the edited plan, rebuilt from its
     * canonical text as a resume would. */
    orch_plan *canon = NULL;
    rc = orch_plan_from_canonical(orch_plan_canonical(new), &canon);
    if (rc == 0 && (rc = orch_store_begin(job->store)) == 0) {
        rc = orch_store_plan_adopt(job->store, orch_plan_canonical(new), orch_plan_hash(new));
        if (rc == 0)
            rc = orch_store_commit(job->store);
        else
            orch_store_rollback(job->store);
    }
    orch_plan_free(new);
    if (rc < 0) {
        orch_plan_free(canon);
        fprintf(stderr, "orch: update: %s\n",
                orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc));
        return ORCH_EXIT_FAIL;
    }
    orch_plan_free(job->plan);
    job->plan = canon;
    fprintf(stderr, "orch: update: %s adopted: only options changed, nothing runs again\n",
            path);
    return -1;
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
    const char *pipeline;
    int status = orch_cli_open_existing("update", nrest, rest, &o, &job, &pipeline);
    if (status >= 0)
        return status;
    if (pipeline && (status = plan_change(job, pipeline)) >= 0) {
        orch_job_close(job);
        return status;
    }
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
