/* cli_report.c — `orch report` (DESIGN §9): one self-contained HTML page of the run.
 *
 * The page has no network reference, no script and no font: inline CSS and SVG, with SVG
 * <title> elements as tooltips. Every string that comes from the job (names, keys,
 * messages) is escaped for HTML.
 *
 * The page is bounded for a job of any size. Every section is an aggregate read through
 * SQL, streamed, with memory that depends on the number of calls and time buckets, not on
 * the number of grains; only the timeline draws single batches, and at most
 * ORCH_REPORT_MAX_BATCHES of them (default 5,000): past that, every k-th batch id is drawn
 * and the page says so. Batch durations go into a histogram per call (exact below 1,024 ms,
 * within 1/64 above) for the percentiles.
 *
 * All statements run in one read transaction, so that every section describes the same
 * commit of a driver that runs the job now (WAL readers see one snapshot, and never block
 * the writer). Attempts still open end at the moment the report began.
 */
#include "cli_report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "knobs.h"
#include "orch_job.h"
#include "support.h"

static const char report_help[] =
    "usage: orch report DIR [-o FILE.html]\n"
    "\n"
    "Writes one self-contained HTML page of the run (no network reference, no script): a\n"
    "header (job, status, plan, span, sealed grains, throughput); a timeline of every\n"
    "worker's batches coloured by call, failed attempts outlined in red, interrupted and\n"
    "suppressed ones dashed, each with a tooltip naming its call, batch, grains, duration\n"
    "and keys; throughput, ready-queue length (from when each grain became ready) and CPU/GPU\n"
    "budget in use over time; per call busy time, utilisation, batch durations and\n"
    "retries; failures grouped by call, kind and message; the ten slowest roots (the UDF\n"
    "time of their whole subtree). Works while the job runs, and on a read-only job.\n"
    "\n"
    "  -o FILE   write the page to FILE (default DIR/report.html); '-' for stdout\n"
    "\n"
    "The timeline draws at most 5,000 batches (ORCH_REPORT_MAX_BATCHES): past that, every\n"
    "k-th batch id, and the page says so; every other section counts every batch.\n"
    "\n"
    "exit status: 0 done; 1 the job cannot be read or the page cannot be written;\n"
    "2 usage error.\n";

/* Rows of the failures table. */
#define MAX_FAILURE_GROUPS 100

static const char *const palette[] = {
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948",
    "#76b7b2", "#ff9da7", "#9c755f", "#bab0ac", "#2f4b7c",
};
#define NPALETTE (int)(sizeof palette / sizeof palette[0])

/* A duration as people read it: "850 ms", "12.3 s", "4 min 12 s", "2 h 03 min". */
static void human_ms(char *buf, size_t n, double ms)
{
    if (ms < 1000)
        snprintf(buf, n, "%.0f ms", ms);
    else if (ms < 60000)
        snprintf(buf, n, "%.1f s", ms / 1000);
    else if (ms < 3600000)
        snprintf(buf, n, "%d min %02d s", (int)(ms / 60000), (int)(ms / 1000) % 60);
    else
        snprintf(buf, n, "%d h %02d min", (int)(ms / 3600000), (int)(ms / 60000) % 60);
}

/* Text for HTML, in an element or a quoted attribute: & < > " ' escaped, and control
 * characters other than tab and newline, and every byte that is not part of valid UTF-8,
 * written as \xNN, since HTML forbids the first and the page is declared UTF-8. */
static void html(FILE *out, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = s ? strlen(str) : 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = orch__utf8_len(s + i, n - i);
        switch (c) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&#39;", out);
            break;
        default:
            if (k == 0 || (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
                fprintf(out, "\\x%02x", c);
            } else {
                fwrite(s + i, 1, k, out);
                i += k;
                continue;
            }
        }
        i++;
    }
}

/* ---- writing --------------------------------------------------------------------------- */

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1300px}"
    "h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:28px 0 8px;"
    "border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse;margin:4px 0}td,th{padding:3px 10px;text-align:left;"
    "border-bottom:1px solid #eee;vertical-align:top}th{background:#f4f4f4}"
    "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".note{color:#666;font-size:12px;max-width:1100px}.kv td:first-child{color:#666}"
    ".sw{display:inline-block;width:10px;height:10px;margin-right:4px}"
    "svg{font:11px system-ui,sans-serif;display:block}code{font-size:12px}";

static void header(FILE *out, struct report *R, const char *status, const char *stop)
{
    struct orch_job *job = R->job;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>orch "
          "report: ",
          out);
    html(out, job->info->name);
    fprintf(out, "</title>\n<style>%s</style></head>\n<body>\n<h1>orch report: ", css);
    html(out, job->info->name);
    fputs("</h1>\n<table class=\"kv\" id=\"summary\">\n<tr><td>status</td><td id=\"status\">",
          out);
    html(out, status);
    if (stop) {
        fputs(" (", out);
        html(out, stop);
        fputc(')', out);
    }
    fputs("</td></tr>\n<tr><td>plan</td><td><code>", out);
    html(out, job->info->plan_hash);
    fputs("</code></td></tr>\n", out);
    if (R->nattempts) {
        char from[40], to[40], span[40];
        orch_cli_iso_time(from, sizeof from, R->t0);
        orch_cli_iso_time(to, sizeof to, R->t1);
        human_ms(span, sizeof span, (double)(R->t1 - R->t0));
        fprintf(out, "<tr><td>span</td><td>%s .. %s (%s)</td></tr>\n", from, to, span);
    } else {
        fputs("<tr><td>span</td><td>no attempt yet</td></tr>\n", out);
    }
    fprintf(out,
            "<tr><td>grains sealed</td><td id=\"sealed\">%" PRId64 "</td></tr>\n"
            "<tr><td>batches</td><td id=\"batches\">%" PRId64 "</td></tr>\n"
            "<tr><td>attempts</td><td id=\"attempts\">%" PRId64 "%s</td></tr>\n",
            R->sealed_total, R->nbatches, R->nattempts,
            R->nopen ? " (some still open: drawn up to now)" : "");
    if (R->t1 > R->t0)
        fprintf(out, "<tr><td>throughput</td><td>%.1f grains/s</td></tr>\n",
                (double)R->sealed_total * 1000.0 / (double)(R->t1 - R->t0));
    char made[40];
    orch_cli_iso_time(made, sizeof made, R->now);
    fprintf(out, "<tr><td>report made</td><td>%s</td></tr>\n</table>\n", made);
}

static void legend(FILE *out, const struct report *R)
{
    fputs("<p>", out);
    for (int c = 0; c < R->ncalls; c++) {
        fprintf(out, "<span class=\"sw\" style=\"background:%s\"></span>",
                palette[c % NPALETTE]);
        html(out, R->calls[c].name);
        fputs(" &nbsp; ", out);
    }
    fputs("</p>\n", out);
}

static int cmp_kept(const void *a, const void *b)
{
    const struct rbatch *x = a, *y = b;
    if (x->call != y->call)
        return x->call < y->call ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* x of time t in a plot of width w starting at x0. */
static double xat(const struct report *R, int64_t t, double x0, double w)
{
    double span = (double)(R->t1 - R->t0);
    return x0 + (span > 0 ? (double)(t - R->t0) * w / span : 0);
}

static void time_axis(FILE *out, const struct report *R, double x0, double w, double y)
{
    for (int i = 0; i <= 4; i++) {
        double x = x0 + w * i / 4;
        char lab[40];
        human_ms(lab, sizeof lab, (double)(R->t1 - R->t0) * i / 4);
        fprintf(out,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">%s</text>\n",
                x, y, x, y + 4, x, y + 15, i == 0 ? "start" : i == 4 ? "end" : "middle", lab);
    }
}

static void timeline(FILE *out, struct report *R)
{
    fputs("<h2>Timeline</h2>\n", out);
    if (R->nkept == 0) {
        fputs("<p>No batch has run yet.</p>\n", out);
        return;
    }
    qsort(R->kept, (size_t)R->nkept, sizeof *R->kept, cmp_kept);
    int rows = 0;
    for (int i = 0; i < R->nkept; i++)
        if (i == 0 || R->kept[i].call != R->kept[i - 1].call ||
            R->kept[i].pid != R->kept[i - 1].pid)
            rows++;
    const double x0 = 190, w = 1000, rh = 16;
    double h = rows * rh + 30;
    fprintf(out, "<p class=\"note\" id=\"timeline-note\">");
    if (R->nkept < R->nbatches)
        fprintf(out,
                "showing %d of %" PRId64 " batches, sampled (one batch id in %" PRId64
                "; ORCH_REPORT_MAX_BATCHES=%" PRId64 ").",
                R->nkept, R->nbatches, R->keep_every, R->cap);
    else
        fprintf(out, "showing all %" PRId64 " batches.", R->nbatches);
    fputs(" One row per worker process, grouped by call; one box per batch, from its first "
          "attempt's start to its last one's end. Red outline: an attempt failed (error, "
          "crash, timeout, record, group). Dashed: interrupted or suppressed. Hover a box "
          "for its call, batch, grains, duration and keys.</p>\n",
          out);
    legend(out, R);
    fprintf(out,
            "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
            "height=\"%.0f\" role=\"img\" aria-label=\"timeline of batches\">\n",
            x0 + w + 10, h);
    int row = -1;
    for (int i = 0; i < R->nkept; i++) {
        const struct rbatch *b = &R->kept[i];
        const struct rcall *c = &R->calls[b->call];
        if (i == 0 || b->call != R->kept[i - 1].call || b->pid != R->kept[i - 1].pid) {
            row++;
            double y = row * rh;
            fprintf(out,
                    "<rect x=\"0\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" fill=\"%s\"/>"
                    "<text x=\"4\" y=\"%.1f\">",
                    y, x0 + w, rh, row % 2 ? "#fafafa" : "#f0f0f0", y + rh - 4);
            html(out, c->name);
            fprintf(out, " pid %" PRId64 "</text>\n", b->pid);
        }
        double y = row * rh + 2, xa = xat(R, b->start, x0, w), xb = xat(R, b->end, x0, w);
        double bw = xb - xa < 1 ? 1 : xb - xa;
        char dur[40];
        human_ms(dur, sizeof dur, (double)(b->end - b->start));
        fprintf(out,
                "<rect class=\"batch%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                "height=\"%.1f\" fill=\"%s\"%s><title>",
                b->nfail ? " failed" : "", xa, y, bw, rh - 4, palette[b->call % NPALETTE],
                b->nfail   ? " stroke=\"#d00\" stroke-width=\"2\""
                : b->nmark ? " stroke=\"#333\" stroke-dasharray=\"3,2\" fill-opacity=\"0.5\""
                           : "");
        html(out, c->name);
        fprintf(out, " batch %" PRId64 ": %d grain%s, %s", b->batch < 0 ? 0 : b->batch, b->n,
                b->n == 1 ? "" : "s", dur);
        if (b->nfail)
            fprintf(out, ", %d failed", b->nfail);
        if (b->nmark)
            fprintf(out, ", %d interrupted or suppressed", b->nmark);
        if (b->nopen)
            fprintf(out, ", %d running", b->nopen);
        fputs("\n", out);
        html(out, b->keys);
        fputs("</title></rect>\n", out);
    }
    time_axis(out, R, x0, w, rows * rh + 2);
    fputs("</svg>\n", out);
}

/* A line chart of nseries series of NB values; name(i) and colour(i) per series. */
static void chart(FILE *out, const struct report *R, const char *id, const char *unit,
                  int nseries, const double *const *v, const char *const *names,
                  const char *const *colours)
{
    const double x0 = 60, w = 1000, h = 160, top = 10;
    double max = 0;
    for (int s = 0; s < nseries; s++)
        for (int b = 0; b < NB; b++)
            if (v[s][b] > max)
                max = v[s][b];
    double ymax = max > 0 ? max * 1.1 : 1;
    fprintf(out,
            "<svg id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
            "height=\"%.0f\">\n"
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafafa\" "
            "stroke=\"#ccc\"/>\n"
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.3g</text>"
            "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">0</text>"
            "<text x=\"4\" y=\"%.0f\">%s</text>\n",
            id, x0 + w + 10, h + top + 24, x0, top, w, h, x0 - 4, top + 10, max, x0 - 4,
            top + h, top + h / 2, unit);
    for (int s = 0; s < nseries; s++) {
        fprintf(out, "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"%s\" points=\"",
                colours[s]);
        for (int b = 0; b < NB; b++)
            fprintf(out, "%.1f,%.1f ", x0 + w * (b + 0.5) / NB, top + h - v[s][b] * h / ymax);
        fputs("\"><title>", out);
        html(out, names[s]);
        fputs("</title></polyline>\n", out);
    }
    time_axis(out, R, x0, w, top + h);
    fputs("</svg>\n", out);
}

static int charts(FILE *out, struct report *R)
{
    int n = R->ncalls;
    double(*tp)[NB] = calloc((size_t)n + 1, sizeof *tp);
    double(*qu)[NB] = calloc((size_t)n + 1, sizeof *qu);
    const double **vt = calloc((size_t)n + 2, sizeof *vt);
    const double **vq = calloc((size_t)n + 2, sizeof *vq);
    const char **names = calloc((size_t)n + 2, sizeof *names);
    const char **cols = calloc((size_t)n + 2, sizeof *cols);
    double cpu[2][NB];
    int rc = tp && qu && vt && vq && names && cols ? 0 : -ENOMEM;
    for (int c = 0; rc == 0 && c < n; c++) {
        struct rcall *k = &R->calls[c];
        double full = 0;
        for (int b = 0; b < NB; b++) {
            tp[c][b] = (double)k->tput[b] * 1000.0 / (double)R->width;
            full += k->qfull[b];
            qu[c][b] = (k->qacc[b] + full * (double)R->width) / (double)R->width;
        }
        vt[c] = tp[c];
        vq[c] = qu[c];
        names[c] = k->name;
        cols[c] = palette[c % NPALETTE];
    }
    if (rc == 0) {
        char bw[40];
        human_ms(bw, sizeof bw, (double)R->width);
        fprintf(out,
                "<h2>Throughput</h2>\n<p class=\"note\">Grains sealed per second, per call, in "
                "%d buckets of %s: a grain counts when its last attempt ends. Grains sealed "
                "without an attempt (suppressed before they ran) are not drawn.</p>\n",
                NB, bw);
        legend(out, R);
        chart(out, R, "throughput", "grains/s", n, vt, names, cols);
        fputs("<h2>Ready queue</h2>\n<p class=\"note\">Grains waiting in the ready queue, per "
              "call, averaged over each bucket: a grain counts from the moment it became "
              "ready (<code>grain.ready_at</code>) until its last attempt began, or until now "
              "if it is ready now. For grains made ready before schema 12 (a job from an "
              "older orch) the moment is <b>estimated</b> from their place in the ready "
              "order (<code>grain.ready_seq</code>): the earliest start of any grain that "
              "became ready at or after it, a lower bound.</p>\n",
              out);
        legend(out, R);
        chart(out, R, "queue", "grains", n, vq, names, cols);
        double fc = 0, fg = 0;
        for (int b = 0; b < NB; b++) {
            fc += R->cfull[b];
            fg += R->gfull[b];
            cpu[0][b] = (R->cacc[b] + fc * (double)R->width) / (double)R->width;
            cpu[1][b] = (R->gacc[b] + fg * (double)R->width) / (double)R->width;
        }
        const double *vc[2] = {cpu[0], cpu[1]};
        const char *cn[2] = {"cpus", "gpus"}, *cc[2] = {"#4e79a7", "#e15759"};
        fputs("<h2>CPU and GPU budget in use</h2>\n<p class=\"note\">The sum, over the "
              "batches running, of their call's <code>cpus</code> (blue) and "
              "<code>gpus</code> (red) options, averaged over each bucket.</p>\n",
              out);
        chart(out, R, "budget", "cpus, gpus", 2, vc, cn, cc);
    }
    free(tp);
    free(qu);
    free(vt);
    free(vq);
    free(names);
    free(cols);
    return rc;
}

static void calls_table(FILE *out, const struct report *R)
{
    fputs("<h2>Calls</h2>\n<p class=\"note\">Busy: the sum of the call's batch durations. "
          "Utilisation: busy / (span &times; workers), workers being the fewer of the "
          "configured <code>workers</code> and the distinct worker processes that ran a batch. "
          "Percentiles of batch duration are exact below 1,024 ms, within 1/64 above. "
          "Retries: attempts beyond the first of each grain. Grains per batch: the sizes the "
          "runtime chose (mean, and the largest), each dispatch sized to about a target "
          "duration of work from what the call measured.</p>\n"
          "<table id=\"calls\"><tr><th>call</th><th class=\"n\">batches</th>"
          "<th class=\"n\">attempts</th><th class=\"n\">failed attempts</th>"
          "<th class=\"n\">grains sealed</th><th class=\"n\">workers</th>"
          "<th class=\"n\">busy</th><th class=\"n\">utilisation</th><th class=\"n\">mean</th>"
          "<th class=\"n\">p50</th><th class=\"n\">p95</th><th class=\"n\">max</th>"
          "<th class=\"n\">retries</th><th class=\"n\">grains per batch</th>"
          "<th class=\"n\">largest batch</th></tr>\n",
          out);
    double span = (double)(R->t1 - R->t0);
    for (int i = 0; i < R->ncalls; i++) {
        const struct rcall *c = &R->calls[i];
        int workers = c->npids < c->workers ? c->npids : c->workers;
        char busy[40], mean[40], p50[40], p95[40], max[40], util[16] = "";
        human_ms(busy, sizeof busy, (double)c->busy_ms);
        human_ms(mean, sizeof mean, c->batches ? (double)c->busy_ms / (double)c->batches : 0);
        human_ms(p50, sizeof p50, c->batches ? orch_cli_report_percentile(c, 0.5) : 0);
        human_ms(p95, sizeof p95, c->batches ? orch_cli_report_percentile(c, 0.95) : 0);
        human_ms(max, sizeof max, (double)c->max_ms);
        if (span > 0 && workers > 0)
            snprintf(util, sizeof util, "%.1f%%",
                     100.0 * (double)c->busy_ms / (span * workers));
        fprintf(out, "<tr data-call=\"");
        html(out, c->name);
        fprintf(out, "\"><td><span class=\"sw\" style=\"background:%s\"></span>",
                palette[i % NPALETTE]);
        html(out, c->name);
        fprintf(out,
                "</td><td class=\"n batches\">%" PRId64 "</td><td class=\"n attempts\">%" PRId64
                "</td><td class=\"n failed\">%" PRId64 "</td><td class=\"n sealed\">%" PRId64
                "</td><td class=\"n\">%d</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
                "<td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
                "<td class=\"n\">%s</td><td class=\"n retries\">%" PRId64 "</td>"
                "<td class=\"n size\">%.1f</td><td class=\"n size-max\">%" PRId64
                "</td></tr>\n",
                c->batches, c->attempts, c->failed, c->sealed, workers, busy, util, mean, p50,
                p95, max, c->retries,
                c->batches ? (double)c->attempts / (double)c->batches : 0.0, c->size_max);
    }
    fputs("</table>\n", out);
}

/* Failures grouped by call, kind and message, the most frequent first, with the keys of
 * the first 3 entities (the query of `orch failures`, cli_failures.c). */
static int failures_table(FILE *out, struct report *R)
{
    static const char sql[] =
        "SELECT call, kind, message, n, key, rn, ne FROM ("
        " SELECT call, kind, message, key,"
        "  sum(nf) OVER w AS n, min(fid) OVER w AS first_id, count(*) OVER w AS ne,"
        "  row_number() OVER (w ORDER BY fid) AS rn"
        " FROM (SELECT call, kind, message, key, count(*) AS nf, min(failure_id) AS fid"
        "  FROM failures GROUP BY call, kind, message, entity_id)"
        " WINDOW w AS (PARTITION BY call, kind, message))"
        " WHERE rn <= 3 ORDER BY n DESC, first_id, rn";
    sqlite3_stmt *st;
    int rc = prepare(R->job, sql, &st, "report");
    if (rc < 0)
        return rc;
    fputs("<h2>Failures</h2>\n<p class=\"note\">The <code>failures</code> view grouped by "
          "call, kind and message (as <code>orch failures</code>), with the keys of the first "
          "three entities of each group. Kinds record, group and exhausted seal a grain "
          "Failed; error, crash and timeout are attempt failures, retried.</p>\n",
          out);
    int64_t groups = 0, total = 0, ne = 0, shown = 0;
    bool open = false;
    while ((rc = orch_store_step(R->job->store, st)) == 1) {
        rc = 0;
        int64_t rn = sqlite3_column_int64(st, 5);
        if (rn == 1) {
            if (open)
                fputs("</td></tr>\n", out);
            open = false;
            groups++;
            total += sqlite3_column_int64(st, 3);
            if (groups > MAX_FAILURE_GROUPS)
                continue;
            if (groups == 1)
                fputs("<table id=\"failures\"><tr><th class=\"n\">count</th><th>call</th>"
                      "<th>kind</th><th>message</th><th class=\"n\">entities</th>"
                      "<th>example keys</th></tr>\n",
                      out);
            ne = sqlite3_column_int64(st, 6);
            shown = ne < 3 ? ne : 3;
            fprintf(out, "<tr class=\"failure\"><td class=\"n\">%" PRId64 "</td><td>",
                    (int64_t)sqlite3_column_int64(st, 3));
            html(out, (const char *)sqlite3_column_text(st, 0));
            fputs("</td><td>", out);
            html(out, (const char *)sqlite3_column_text(st, 1));
            fputs("</td><td class=\"msg\">", out);
            html(out, (const char *)sqlite3_column_text(st, 2));
            fprintf(out, "</td><td class=\"n\">%" PRId64 "</td><td class=\"keys\">", ne);
            open = true;
        } else if (!open) {
            continue;
        } else {
            fputs(", ", out);
        }
        html(out, (const char *)sqlite3_column_text(st, 4));
        if (rn == shown && ne > shown)
            fprintf(out, " and %" PRId64 " more", ne - shown);
    }
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    if (open)
        fputs("</td></tr>\n", out);
    if (groups)
        fputs("</table>\n", out);
    if (groups > MAX_FAILURE_GROUPS)
        fprintf(out, "<p class=\"note\">showing the %d largest of %" PRId64 " groups.</p>\n",
                MAX_FAILURE_GROUPS, groups);
    fprintf(out, "<p id=\"failures-total\">%" PRId64 " failure%s in %" PRId64 " group%s</p>\n",
            total, total == 1 ? "" : "s", groups, groups == 1 ? "" : "s");
    return 0;
}

/* The ten roots whose subtrees took the most UDF time: the attempts' durations summed per
 * entity, then carried up the parent ids to the root (O(entities that ran x depth)). */
static int slowest_roots(FILE *out, struct report *R)
{
    static const char sql[] =
        "WITH RECURSIVE t (eid, ms, n) AS ("
        "  SELECT g.entity_id, sum(coalesce(a.ended_at, ?1) - a.started_at), count(*)"
        "  FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id GROUP BY g.entity_id),"
        " up (eid, ms, n) AS ("
        "  SELECT eid, ms, n FROM t"
        "  UNION ALL SELECT e.parent_id, up.ms, up.n FROM up JOIN entity AS e ON e.id = up.eid"
        "  WHERE e.parent_id IS NOT NULL)"
        " SELECT e.key, sum(up.ms), sum(up.n), count(*), (SELECT sum(ms) FROM t)"
        " FROM up JOIN entity AS e ON e.id = up.eid WHERE e.parent_id IS NULL"
        " GROUP BY up.eid ORDER BY 2 DESC, up.eid LIMIT 10";
    sqlite3_stmt *st;
    int rc = orch_cli_report_prepare_now(R, sql, &st);
    if (rc < 0)
        return rc;
    fputs("<h2>Slowest roots</h2>\n<p class=\"note\">Per root entity, the UDF time (the "
          "durations of every attempt, retries included; a batch of several grains counts "
          "for each of them) of its whole subtree: the root and every descendant, over all "
          "calls. The ten largest.</p>\n",
          out);
    int k = 0;
    while (rc == 0 && (rc = orch_store_step(R->job->store, st)) == 1) {
        rc = 0;
        if (k++ == 0)
            fputs("<table id=\"roots\"><tr><th>root</th><th class=\"n\">UDF time</th>"
                  "<th class=\"n\">share</th><th class=\"n\">attempts</th>"
                  "<th class=\"n\">entities that ran</th></tr>\n",
                  out);
        char t[40];
        double ms = sqlite3_column_double(st, 1), all = sqlite3_column_double(st, 4);
        human_ms(t, sizeof t, ms);
        fputs("<tr class=\"root\"><td>", out);
        html(out, (const char *)sqlite3_column_text(st, 0));
        fprintf(out,
                "</td><td class=\"n\">%s</td><td class=\"n\">%.1f%%</td><td class=\"n\">%" PRId64
                "</td><td class=\"n\">%" PRId64 "</td></tr>\n",
                t, all > 0 ? 100.0 * ms / all : 0, (int64_t)sqlite3_column_int64(st, 2),
                (int64_t)sqlite3_column_int64(st, 3));
    }
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    fputs(k ? "</table>\n" : "<p>No attempt yet.</p>\n", out);
    return 0;
}

/* ---- the command ----------------------------------------------------------------------- */

/* The job row's status, as `orch status` says it (orch_cli_status_now): *stop, when
 * not NULL, is the recorded message of a stop (malloc'd). */
static int read_status(struct report *R, char *status, size_t n, char **stop)
{
    sqlite3_stmt *st;
    int rc = prepare(R->job, "SELECT status, stop_kind, stop_message FROM job", &st, "report");
    if (rc < 0)
        return rc;
    *stop = NULL;
    if ((rc = orch_store_step(R->job->store, st)) == 1) {
        const char *s = (const char *)sqlite3_column_text(st, 0);
        const char *kind = (const char *)sqlite3_column_text(st, 1);
        const char *msg = (const char *)sqlite3_column_text(st, 2);
        long pid;
        snprintf(status, n, "%s",
                 orch_cli_status_now(s ? s : "?", kind, orch_cli_driver_live(R->job->dir, &pid)));
        if (kind && strcmp(status, kind) == 0 && msg && !(*stop = strdup(msg)))
            rc = -ENOMEM;
        if (rc == 1)
            rc = 0;
    }
    sqlite3_finalize(st);
    return rc;
}

static int report_write(struct report *R, FILE *out)
{
    char status[32] = "?";
    char *stop = NULL;
    int rc = read_status(R, status, sizeof status, &stop);
    if (rc == 0)
        rc = orch_cli_report_read(R);
    if (rc == 0) {
        header(out, R, status, stop);
        timeline(out, R);
        rc = charts(out, R);
    }
    if (rc == 0) {
        calls_table(out, R);
        rc = failures_table(out, R);
    }
    if (rc == 0)
        rc = slowest_roots(out, R);
    if (rc == 0)
        fputs("<p class=\"note\">Made by <code>orch report</code>.</p>\n</body></html>\n", out);
    free(stop);
    return rc;
}

int orch_cli_report(int argc, char **argv)
{
    const char *dir = NULL, *outpath = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(report_help, stdout), ORCH_EXIT_OK;
        if (strcmp(argv[i], "-o") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0])
                return orch_cli_usage_error("report: -o needs a file name ('-': stdout)");
            outpath = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1])
            return orch_cli_usage_error("report: unknown option '%s'", argv[i]);
        else if (dir)
            return orch_cli_usage_error("report: unexpected argument '%s'", argv[i]);
        else
            dir = argv[i];
    }
    if (!dir)
        return orch_cli_usage_error("report: give a job directory");
    int64_t cap = orch_knobs()->report_max_batches; /* the timeline's */
    if (cap < 0)
        return orch_cli_usage_error("report: ORCH_REPORT_MAX_BATCHES must be a number >= 1");
    struct orch_job *job;
    if (open_job(dir, &job) != ORCH_EXIT_OK)
        return ORCH_EXIT_FAIL;

    /* The page goes to a temporary file renamed over the target at the end, so that a
     * failed report never leaves half a page where the last good one was. */
    struct orch__buf path = {0}, tmp = {0};
    if (outpath && strcmp(outpath, "-") == 0)
        ;
    else if (outpath)
        orch__buf_puts(&path, outpath);
    else
        orch__buf_printf(&path, "%s/report.html", dir);
    FILE *out = stdout;
    int rc = path.oom ? -ENOMEM : 0;
    if (rc == 0 && path.p) {
        orch__buf_printf(&tmp, "%s.tmp%ld", path.p, (long)getpid());
        out = tmp.oom ? NULL : fopen(tmp.p, "w");
        if (!out) {
            rc = -errno;
            fprintf(stderr, "orch: report: cannot write %s: %s%s\n", path.p, strerror(errno),
                    outpath ? "" : " (give another file with -o FILE)");
            orch__buf_free(&path);
            orch__buf_free(&tmp);
            orch_job_close(job);
            return ORCH_EXIT_FAIL;
        }
    }

    struct report R = {.job = job, .ncalls = orch_plan_ncalls(job->plan), .cap = cap,
                       .now = orch_cli_now_ms()};
    R.calls = calloc((size_t)R.ncalls + 1, sizeof *R.calls);
    if (!R.calls)
        rc = -ENOMEM;
    for (int c = 0; rc == 0 && c < R.ncalls; c++) {
        const struct orch_call *pc = orch_plan_call(job->plan, c);
        R.calls[c].name = pc->name;
        R.calls[c].cpus = pc->opts.cpus;
        R.calls[c].gpus = pc->opts.gpus;
        R.calls[c].workers = pc->opts.workers;
    }
    /* One read transaction: every statement sees the same commit. */
    sqlite3 *db = orch_store_db(job->store);
    if (rc == 0) {
        int src = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
        rc = src == SQLITE_OK ? 0 : orch_store_error(job->store, src, "report");
    }
    if (rc == 0) {
        rc = report_write(&R, out);
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    }
    if (rc < 0)
        fprintf(stderr, "orch: report: %s\n", detail_or(rc));
    for (int i = 0; i < R.nkept; i++)
        free(R.kept[i].keys);
    free(R.kept);
    for (int c = 0; R.calls && c < R.ncalls; c++)
        free(R.calls[c].pids);
    free(R.calls);

    if (out != stdout) {
        bool bad = ferror(out);
        if (fclose(out) != 0 || bad) {
            if (rc == 0) {
                fprintf(stderr, "orch: report: cannot write %s: %s\n", path.p,
                        strerror(errno ? errno : EIO));
                rc = -EIO;
            }
        }
        if (rc == 0 && rename(tmp.p, path.p) != 0) {
            rc = -errno;
            fprintf(stderr, "orch: report: cannot write %s: %s\n", path.p, strerror(errno));
        }
        if (rc < 0)
            unlink(tmp.p);
        else
            fprintf(stderr, "orch: report: wrote %s\n", path.p);
    }
    orch__buf_free(&path);
    orch__buf_free(&tmp);
    return finish("report", job, rc);
}
