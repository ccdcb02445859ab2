/* progress.c — the progress display of a running job, and the end-of-run summary. */
#include "driver_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orch_facts.h"

void orch_driver_progress_init(struct orch_driver *d)
{
    const struct orch_run_opts *opts = d->opts;
    d->started_ms = d->last_plain_ms = orch_clock_mono_ms();
    d->live = opts->progress == ORCH_PROGRESS_LIVE ||
              (opts->progress == ORCH_PROGRESS_AUTO &&
               isatty(fileno(opts->out ? opts->out : stderr)));
}

static int64_t inflight_count(const struct orch_driver_call *cr)
{
    int64_t n = 0;
    for (const struct orch_driver_batch *b = cr->inflight; b; b = b->next)
        n += b->n;
    return n;
}

void orch_driver_progress(struct orch_driver *d, bool final)
{
    FILE *out = d->opts->out ? d->opts->out : stderr;
    if (d->opts->progress == ORCH_PROGRESS_NONE)
        return;
    int64_t now = orch_clock_mono_ms();
    int interval = d->opts->progress_interval_ms > 0 ? d->opts->progress_interval_ms : 5000;
    if (!d->live && !final && now - d->last_plain_ms < interval)
        return;
    d->last_plain_ms = now;
    if (d->live && d->live_lines > 0)
        fprintf(out, "\033[%dA", d->live_lines);
    d->live_lines = 0;
    double secs = (double)(now - d->started_ms) / 1000.0;
    for (int i = 0; i < d->ncalls; i++) {
        const struct orch_driver_call *cr = &d->calls[i];
        if (!cr->pool)
            continue;
        const struct orch_prop_counts *k = orch_prop_counts(d->prop, i);
        int64_t sealed = 0;
        for (int o = 0; o < ORCH_OUTCOME__COUNT; o++)
            sealed += k->sealed[o];
        fprintf(out,
                "%s[%6.1fs] %-12s ready %-7llu running %-5lld sealed %-8lld ok %-8lld "
                "dropped %-6lld failed %-5lld suppressed %lld\n",
                d->live ? "\033[2K" : "", secs, cr->c->name,
                (unsigned long long)orch_queue_count(&cr->q), (long long)inflight_count(cr),
                (long long)sealed, (long long)k->sealed[ORCH_OUTCOME_OK],
                (long long)k->sealed[ORCH_OUTCOME_DROPPED],
                (long long)k->sealed[ORCH_OUTCOME_FAILED],
                (long long)k->sealed[ORCH_OUTCOME_SUPPRESSED]);
        d->live_lines++;
    }
    fflush(out);
}

struct item_counts {
    int64_t (*count)[ORCH_ITEM__COUNT];
    int nports;
};

static void add_count(void *ctx, int port, enum orch_item_state st, int64_t n)
{
    struct item_counts *c = ctx;
    if (port >= 0 && port < c->nports)
        c->count[port][st] = n;
}

int orch_driver_summary(struct orch_job *job, const struct orch_run_stats *stats, FILE *out)
{
    const orch_plan *p = job->plan;
    int np = orch_plan_nports(p);
    int64_t(*count)[ORCH_ITEM__COUNT] = calloc((size_t)np + 1, sizeof *count);
    if (!count)
        return -ENOMEM;
    struct item_counts c = {count, np};
    int rc = 0;
    if (stats && stats->items) /* counted by the run: no scan of every item */
        memcpy(count, stats->items, (size_t)np * sizeof *count);
    else
        rc = orch_store_item_counts(job->store, add_count, &c);
    if (rc < 0) {
        free(count);
        return rc;
    }
    fprintf(out, "%-24s %10s %10s %10s %10s\n", "port", "present", "dropped", "failed",
            "suppressed");
    for (int i = 0; i < np; i++)
        fprintf(out, "%-24s %10lld %10lld %10lld %10lld\n", orch_plan_port(p, i)->qualified,
                (long long)count[i][ORCH_ITEM_PRESENT], (long long)count[i][ORCH_ITEM_DROPPED],
                (long long)count[i][ORCH_ITEM_FAILED],
                (long long)count[i][ORCH_ITEM_SUPPRESSED]);
    if (stats)
        fprintf(out,
                "%lld reports committed in %lld batches, %lld attempt failures, "
                "%lld stale reports rejected, %lld payloads deleted by the sweeps, "
                "%lld workers started (at most %lld at once), %.1fs\n"
                "live intermediate payloads: at most %lld bytes (budget %lld)",
                (long long)stats->committed, (long long)stats->batches,
                (long long)stats->attempts_failed, (long long)stats->stale,
                (long long)stats->reclaimed, (long long)stats->workers_started,
                (long long)stats->workers_peak, stats->seconds,
                (long long)stats->live_peak, (long long)stats->live_budget);
    /* Only when a full budget held an upstream call back (dispatch.c counts the turns in
     * which one did): a run far from its budgets says nothing of them. */
    if (stats && stats->held)
        fprintf(out,
                "; upstream calls held for the budgets in %lld turns (unsealed grains at "
                "their budget in %lld, live bytes in %lld)",
                (long long)stats->held, (long long)stats->held_grains,
                (long long)stats->held_bytes);
    if (stats)
        fputc('\n', out);
    if (stats && stats->carried)
        fprintf(out, "%lld grains took their result from the previous plan's revision "
                     "instead of running (an edited pipeline)\n",
                (long long)stats->carried);
    free(count);
    return 0;
}

void orch_driver_pending_note(struct orch_driver *d, bool end)
{
    if (d->opts->launcher == ORCH_LAUNCHER_LOCAL)
        return;
    int n = 0;
    int64_t since = 0;
    for (int i = 0; !end && i < d->ncalls; i++) {
        int64_t s;
        int k = d->calls[i].pool ? orch_pool_pending(d->calls[i].pool, &s) : 0;
        if (k && (!n || s < since))
            since = s;
        n += k;
    }
    if (n == d->pending && since == d->pending_since)
        return;
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", d->job->dir, ORCH_DRIVER_PENDING_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    /* Best effort: status reads what is there; a write that fails is tried at the next
     * tick. */
    if (n == 0) {
        if (unlink(path) != 0 && errno != ENOENT)
            return;
    } else {
        FILE *f = fopen(tmp, "w");
        if (!f)
            return;
        bool ok = fprintf(f, "%d %lld\n", n, (long long)since) > 0;
        if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
            unlink(tmp);
            return;
        }
    }
    d->pending = n;
    d->pending_since = since;
}
