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
#include "propagate.h"
#include "support.h"

static const char update_help[] =
    "usage: orch update DIR [PIPELINE] [--rerun CALL]... [--watch SECONDS] [OPTIONS]\n"
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
    "With PIPELINE, an edited pipeline, adopted by the job (every plan it has run is kept:\n"
    "table `plan`). PIPELINE must be in the job's base directory, where the pipeline the\n"
    "job was made from was: the job's files() keys are paths relative to it. When no\n"
    "port computes anything else (options such as workers, batch, cpus, timeout or\n"
    "retries changed), nothing runs again. Otherwise each port's\n"
    "fingerprint (its function, arguments, inputs, expansion) decides: every root gets a\n"
    "new revision that takes over the results of unchanged ports from the old one, and only\n"
    "new and changed ports, and what is downstream of them, are computed. A port whose\n"
    "bytes were reclaimed (not `output`) is computed again only when a step that runs\n"
    "reads it, or when the edit makes it `output`.\n"
    "A statement, port or domain the edit drops is retired: it stays in the job's plan as\n"
    "history, makes nothing from then on, and `export` of its ports refuses (`orch sql`\n"
    "reads them); a new source is admitted like any new port. An edit that gives a domain\n"
    "that has entities another parent or its source another kind, or that changes the\n"
    "number or order of the ports a statement makes, is refused, and changes nothing.\n"
    "\n"
    "  --rerun CALL     compute CALL and what is downstream of it again, as if it had\n"
    "                   changed (a new model behind the same name); repeatable.\n"
    "\n"
    "  --watch SECONDS  do not stop when the job is done: read the sources again every\n"
    "                   SECONDS (a fraction allowed; at least 0.1, a smaller interval is\n"
    "                   taken as 0.1; at most 31536000, a year) and run what is new,\n"
    "                   changed or gone: an ingestion service over the job. A scan that\n"
    "                   finds nothing leaves no job_update row. SIGTERM or SIGINT while it\n"
    "                   waits stops it cleanly (exit 0); while it works, they interrupt\n"
    "                   it like a run (exit 3: `orch resume` finishes that update).\n"
    "                   `status`, `sql`, `export` and `report` work while it runs.\n"
    "\n"
    "Other options and exit status as for `orch run`.\n";

/* --watch's interval: at least 100 ms (a smaller one is raised to it, so that the service
 * never scans in a busy loop), at most a year. */
enum { WATCH_MIN_MS = 100, WATCH_MAX_S = 86400 * 365 };

/* Prints what the update found (with --watch, every update of the run): its job_update
 * rows. */
static void update_said(struct orch_job *job, int64_t id)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(orch_store_db(job->store),
                           "SELECT sum(added), sum(changed), sum(removed), sum(replanned)"
                           " FROM job_update WHERE id >= ?",
                           -1,
                           &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, id);
    /* added counts every root admitted: the new revisions of changed files and of an
     * edited plan's roots too. */
    if (sqlite3_step(st) == SQLITE_ROW) {
        int64_t replanned = sqlite3_column_int64(st, 3);
        fprintf(stderr, "orch: update: %lld new, %lld changed, %lld removed",
                (long long)(sqlite3_column_int64(st, 0) - sqlite3_column_int64(st, 1) -
                            replanned),
                (long long)sqlite3_column_int64(st, 1), (long long)sqlite3_column_int64(st, 2));
        if (replanned)
            fprintf(stderr, ", %lld new revisions for the edited pipeline", (long long)replanned);
        fputc('\n', stderr);
    }
    sqlite3_finalize(st);
}

/* ---- an edited pipeline ------------------------------------------------------------------ */

/* What the edit changes, in words: the ports whose fingerprint differs, the new ones and
 * those that left, and the structural changes no edit may make. Empty: nothing that
 * changes a result. */
/* Whether the job has an entity of domain d: 1, 0, or an error. A scan that stops at the
 * first one (a domain with none is read whole, once per edit). */
static int has_entities(orch_store *s, int d)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(orch_store_db(s), "SELECT 1 FROM entity WHERE domain_id = ? LIMIT 1",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return orch_store_error(s, rc, "update");
    sqlite3_bind_int(st, 1, d);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : orch_store_error(s, rc, "update");
}

/* Whether a run of `plan` keeps the bytes of `port` (engine/prop/reclaim.c): a port of its
 * family is `output`, or the plan says no `output` at all. */
static bool kept(const orch_plan *plan, int port)
{
    bool any = false;
    int root = orch_prop_family(plan, port);
    for (int i = 0; i < orch_plan_nports(plan); i++) {
        const struct orch_port *pt = orch_plan_port(plan, i);
        any = any || pt->output;
        if (pt->output && orch_prop_family(plan, i) == root)
            return true;
    }
    return !any;
}

static int describe(orch_store *store, const orch_plan *old, const orch_plan *new,
                    struct orch__buf *b, struct orch__buf *refused, struct orch__buf *gone)
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
        bool moved = (np == NULL) != (op == NULL) || (np && strcmp(np, op) != 0);
        bool rekind = d->source >= 0 && e->source >= 0 &&
                      orch_plan_source(new, d->source)->kind !=
                          orch_plan_source(old, e->source)->kind;
        /* Only a domain that has entities is bound to its parent and source kind. */
        int has = moved || rekind ? has_entities(store, j) : 0;
        if (has < 0) {
            free(fo);
            free(fn);
            return has;
        }
        if (has == 0)
            continue;
        if (moved)
            orch__buf_printf(refused, "\n  domain %s: its parent is now %s (was %s): its "
                                      "entities cannot move",
                             d->name, np ? np : "none", op ? op : "none");
        if (rekind)
            orch__buf_printf(refused, "\n  domain %s: its source is now %s() (was %s())", d->name,
                             orch_source_kind_name(orch_plan_source(new, d->source)->kind),
                             orch_source_kind_name(orch_plan_source(old, e->source)->kind));
    }
    for (int i = 0; i < orch_plan_nports(new); i++) {
        const char *q = orch_plan_port(new, i)->qualified;
        int j = orch_plan_find_port(old, q);
        int was = j >= 0 ? orch_plan_port(old, j)->producer : -1;
        int src = j >= 0 ? orch_plan_port(old, j)->source : -1;
        if (j < 0 || (was >= 0 && orch_plan_stmt(old, was)->retired) ||
            (src >= 0 && orch_plan_source(old, src)->retired))
            orch__buf_printf(b, "\n  new port %s", q); /* or back after it was dropped */
        else if (strcmp(fo[j], fn[i]) != 0)
            orch__buf_printf(b, "\n  port %s: computed differently (its function, arguments, "
                                "inputs or expansion changed)",
                             q);
        else if (kept(new, i) && !kept(old, j))
            orch__buf_printf(b, "\n  port %s: kept now (`output`), its bytes freed once read "
                                "are made again",
                             q);
    }
    for (int j = 0; j < orch_plan_nports(old); j++) {
        int was = orch_plan_port(old, j)->producer, src = orch_plan_port(old, j)->source;
        if (orch_plan_find_port(new, orch_plan_port(old, j)->qualified) < 0 &&
            !(was >= 0 && orch_plan_stmt(old, was)->retired) &&
            !(src >= 0 && orch_plan_source(old, src)->retired))
            orch__buf_printf(gone, "\n  port %s: dropped (its items stay as history)",
                             orch_plan_port(old, j)->qualified);
    }
    free(fo);
    free(fn);
    return b->oom || refused->oom || gone->oom ? -ENOMEM : 0;
}

/* ---- aligning an edited plan with the job's ------------------------------------------- */

/* The canonical text's lines of one kind, in order. */
struct lines {
    char **v;
    size_t n, cap;
};

static int lines_add(struct lines *l, char *line)
{
    if (orch__grow_n(&l->v, &l->cap, l->n + 1, sizeof *l->v) < 0)
        return -ENOMEM;
    l->v[l->n++] = line;
    return 0;
}

enum { L_HEAD, L_DOMAIN, L_SOURCE, L_CALL, L_STMT, L_OUTPUT, L__COUNT };

/* Splits a canonical text (orch_plan_canonical: one declaration a line, in sections) into
 * its kinds; the lines point into `text`, which is cut at each newline. */
static int split_canonical(char *text, struct lines k[L__COUNT])
{
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        int kind = strncmp(line, "pipeline ", 9) == 0  ? L_HEAD
                   : strncmp(line, "domain ", 7) == 0  ? L_DOMAIN
                   : strncmp(line, "source ", 7) == 0  ? L_SOURCE
                   : strncmp(line, "call ", 5) == 0    ? L_CALL
                   : strncmp(line, "output ", 7) == 0  ? L_OUTPUT
                                                       : L_STMT;
        if (lines_add(&k[kind], line) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* The name a line declares: a domain's or call's name, a source's port, a statement's
 * first output; written into buf. */
static void line_name(int kind, const char *line, char *buf, size_t cap)
{
    const char *p = line;
    if (kind == L_DOMAIN)
        p += 7;
    else if (kind == L_SOURCE)
        p += 7;
    else if (kind == L_CALL)
        p += 5;
    if (kind == L_STMT && strncmp(p, "retired ", 8) == 0)
        p += 8;
    size_t n = strcspn(p, kind == L_STMT ? " ," : " ");
    snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
}

/* The line of kind `kind` in l that declares `name`, or -1. */
static long line_find(const struct lines *l, int kind, const char *name)
{
    char buf[512];
    for (size_t i = 0; i < l->n; i++) {
        if (!l->v[i])
            continue;
        line_name(kind, l->v[i], buf, sizeof buf);
        if (strcmp(buf, name) == 0)
            return (long)i;
    }
    return -1;
}

/* The edited plan `new`, its declarations reordered so that every domain, call, port and
 * statement the job's plan `old` has keeps its index — the ids of the job's rows (DESIGN
 * §6; migrations/0001_initial.sql) — and new ones come after: *out, rebuilt from that
 * text. A call the edit dropped stays, unused (its rows keep their meaning). What cannot
 * keep its index is said in *why, and *out is NULL: a domain, port or statement removed
 * (their items would lose their names), a new source (source ports come first). */
static int align(const orch_plan *old, const orch_plan *new, orch_plan **out,
                 struct orch__buf *why)
{
    *out = NULL;
    char *nt = strdup(orch_plan_canonical(new)), *ot = strdup(orch_plan_canonical(old));
    struct lines nk[L__COUNT] = {{0}}, ok[L__COUNT] = {{0}};
    struct orch__buf t = {0};
    int rc = nt && ot ? 0 : -ENOMEM;
    if (rc == 0 && (rc = split_canonical(nt, nk)) == 0)
        rc = split_canonical(ot, ok);
    for (int kind = L_HEAD; rc == 0 && kind < L__COUNT; kind++) {
        struct lines *l = &nk[kind];
        if (kind == L_HEAD || kind == L_OUTPUT) {
            for (size_t i = 0; i < l->n; i++)
                orch__buf_printf(&t, "%s\n", l->v[i]);
            orch__buf_putc(&t, '\n');
            continue;
        }
        /* What the job has, in its order. */
        for (size_t i = 0; i < ok[kind].n; i++) {
            char name[512];
            line_name(kind, ok[kind].v[i], name, sizeof name);
            long at = line_find(l, kind, name);
            if (at >= 0) {
                orch__buf_printf(&t, "%s\n", l->v[at]);
                l->v[at] = NULL;
            } else if (kind == L_CALL) {
                orch__buf_printf(&t, "%s\n", ok[kind].v[i]); /* kept, unused */
            } else if (kind == L_DOMAIN) {
                orch__buf_printf(&t, "%s\n", ok[kind].v[i]); /* dropped: kept, for its id */
            } else if (kind == L_STMT || kind == L_SOURCE) {
                /* Dropped by the edit: kept, retired, for its ports' ids and history. */
                const char *old_line = ok[kind].v[i];
                orch__buf_printf(&t, "%s%s\n",
                                 strncmp(old_line, "retired ", 8) == 0 ? "" : "retired ",
                                 old_line);
            }
        }
        for (size_t i = 0; i < l->n; i++) {
            if (!l->v[i])
                continue;
            orch__buf_printf(&t, "%s\n", l->v[i]);
        }
        orch__buf_putc(&t, '\n');
    }
    if (rc == 0 && t.oom)
        rc = -ENOMEM;
    if (rc == 0 && why->len == 0) {
        orch_plan *p = NULL;
        /* Compiled, not read as canonical: the reordered text is laid out by hand; the plan
         * it gives has its own canonical text, which is what the job adopts. Its paths are
         * all absolute already. */
        if (orch_lang_compile_job_plan(t.p, &p) < 0) {
            orch__buf_printf(why, "\n  the edited plan, reordered to keep the job's ids, does "
                                  "not compile: %s",
                             orch_error_detail());
        } else {
            /* Every id of the job names the same thing in the aligned plan. */
            bool same = orch_plan_ndomains(p) >= orch_plan_ndomains(old) &&
                        orch_plan_nports(p) >= orch_plan_nports(old) &&
                        orch_plan_ncalls(p) >= orch_plan_ncalls(old);
            for (int i = 0; same && i < orch_plan_ndomains(old); i++)
                same = strcmp(orch_plan_domain(p, i)->name, orch_plan_domain(old, i)->name) == 0;
            /* Ports: a new source's port comes before every statement's (ports are numbered
             * sources first), so the ports after the old sources' may move up, in order:
             * plan_change moves their items. Any other move is a change of what a statement
             * makes. */
            int shift = orch_plan_nsources(p) - orch_plan_nsources(old);
            for (int i = 0; same && i < orch_plan_nports(old); i++) {
                int at = orch_plan_port(old, i)->source >= 0 ? i : i + shift;
                same = at < orch_plan_nports(p) &&
                       strcmp(orch_plan_port(p, at)->qualified,
                              orch_plan_port(old, i)->qualified) == 0;
            }
            for (int i = 0; same && i < orch_plan_ncalls(old); i++)
                same = strcmp(orch_plan_call(p, i)->name, orch_plan_call(old, i)->name) == 0;
            if (same)
                *out = p;
            else {
                orch_plan_free(p);
                orch__buf_printf(why, "\n  the ports a statement makes changed (their "
                                      "number or order)");
            }
        }
    }
    for (int kind = 0; kind < L__COUNT; kind++) {
        free(nk[kind].v);
        free(ok[kind].v);
    }
    orch__buf_free(&t);
    free(nt);
    free(ot);
    return rc < 0 ? rc : (why->oom ? -ENOMEM : 0);
}

/* `orch update DIR PIPELINE` (DESIGN §10): the edited pipeline, aligned with the job's plan
 * (align), is adopted. When no port computes anything else (options such as workers or
 * batch changed), nothing runs again. Otherwise every root gets a new revision at the
 * rescan, which takes from the old one what the edit left as it was (engine/update/carry.c):
 * new and changed ports, and what is downstream of them, are computed. An edit that
 * cannot keep the job's ids, or that moves a domain or changes a source's kind, is refused
 * and changes nothing. *update: the job_update row made for an edit, or 0. Returns -1 to
 * go on with the update, or the exit status. */
static int plan_change(struct orch_job *job, const char *path, const char *rerun,
                       int64_t *update)
{
    *update = 0;
    orch_plan *new = NULL, *al = NULL;
    int rc = path ? orch_lang_compile_path(path, stderr, &new, NULL, NULL)
                  : orch_plan_from_canonical(orch_plan_canonical(job->plan), &new);
    if (rc == ORCH_ESYNTAX || (rc < 0 && rc != -ENOMEM))
        return ORCH_EXIT_FAIL; /* the compiler said why, on stderr */
    if (rc < 0)
        return fprintf(stderr, "orch: update: out of memory\n"), ORCH_EXIT_FAIL;
    /* The job's files() keys are paths relative to its base directory, where its first
     * pipeline was: an edit is read from there too, so that its relative paths name the
     * same files and its keys stay the job's (docs/incremental.md). */
    if (path && job->base_dir && strcmp(orch_plan_basedir(new), job->base_dir) != 0) {
        fprintf(stderr,
                "orch: update: %s is in %s, but this job's files() keys are paths relative "
                "to %s, the directory of the pipeline it was made from; the job is "
                "unchanged. Put the edited pipeline in %s (its relative paths are read from "
                "there), or run it as a new job (orch run %s --job NEWDIR).\n",
                path, orch_plan_basedir(new), job->base_dir, job->base_dir, path);
        orch_plan_free(new);
        return ORCH_EXIT_FAIL;
    }
    if (!path)
        path = "the job's pipeline";
    if (!rerun && strcmp(orch_plan_hash(new), orch_plan_hash(job->plan)) == 0) {
        orch_plan_free(new);
        return -1; /* the same plan: an update of the inputs */
    }
    /* --rerun's calls must be calls of the plan that will run, with a statement. */
    char *names = rerun ? strdup(rerun) : NULL;
    for (char *n = names ? strtok(names, ",") : NULL; n; n = strtok(NULL, ",")) {
        int k = orch_plan_find_call(new, n);
        if (k < 0 || orch_plan_call(new, k)->stmt < 0) {
            fprintf(stderr, "orch: update: --rerun %s: the pipeline has no call '%s' that a "
                            "statement uses\n",
                    n, n);
            free(names);
            orch_plan_free(new);
            return ORCH_EXIT_FAIL;
        }
    }
    free(names);
    int64_t open_id = 0;
    bool scanned;
    if ((rc = orch_store_update_open(job->store, &open_id, &scanned, NULL)) == 0 && open_id) {
        orch_plan_free(new);
        fprintf(stderr, "orch: update: an update of this job is under way (interrupted); "
                        "finish it first with `orch resume %s`, then edit\n",
                job->dir);
        return ORCH_EXIT_FAIL;
    }
    struct orch__buf why = {0}, changes = {0}, gone = {0};
    if (rc == 0)
        rc = describe(job->store, job->plan, new, &changes, &why, &gone);
    if (rc == 0)
        rc = align(job->plan, new, &al, &why);
    orch_plan_free(new);
    if (rc < 0) {
        orch_plan_free(al);
        orch__buf_free(&why);
        orch__buf_free(&changes);
        orch__buf_free(&gone);
        return fprintf(stderr, "orch: update: out of memory\n"), ORCH_EXIT_FAIL;
    }
    if (why.len > 0 || !al) {
        fprintf(stderr,
                "orch: update: %s cannot be taken by this job:%s\n"
                "orch: the job is unchanged. Run the edited pipeline as a new job "
                "(orch run %s --job NEWDIR).\n",
                path, why.len ? why.p : "", path);
        orch_plan_free(al);
        orch__buf_free(&why);
        orch__buf_free(&changes);
        orch__buf_free(&gone);
        return ORCH_EXIT_FAIL;
    }
    orch__buf_free(&why);
    if (!rerun && strcmp(orch_plan_hash(al), orch_plan_hash(job->plan)) == 0) {
        /* The job's own plan, once aligned (a statement it had dropped already is still
         * dropped): an update of the inputs. */
        orch_plan_free(al);
        orch__buf_free(&changes);
        orch__buf_free(&gone);
        return -1;
    }
    bool recompute = changes.len > 0 || rerun;
    if (rerun)
        orch__buf_printf(&changes, "\n  --rerun %s, and what is downstream of it", rerun);
    int64_t plan_id = 0;
    if ((rc = orch_store_begin(job->store)) == 0) {
        rc = orch_store_plan_adopt(job->store, orch_plan_canonical(al), orch_plan_hash(al),
                                   &plan_id);
        /* New sources: the statements' ports move up (align); their items follow. */
        int shift = orch_plan_nsources(al) - orch_plan_nsources(job->plan);
        if (rc == 0 && shift > 0)
            rc = orch_store_ports_shift(job->store, orch_plan_nsources(job->plan), shift);
        if (rc == 0)
            rc = orch_job_write_plan_rows(job->store, al);
        /* A source the edit dropped: its domain's roots retire now, as removed (their
         * items stay as history); no later scan reads it. */
        for (int i = 0; rc == 0 && i < orch_plan_nsources(al); i++)
            if (orch_plan_source(al, i)->retired)
                rc = orch_store_root_retire_domain(job->store, orch_plan_source(al, i)->domain,
                                                   "removed");
        if (rc == 0 && recompute)
            rc = orch_store_update_start(job->store, plan_id, rerun, update);
        if (rc == 0)
            rc = orch_store_commit(job->store);
        else
            orch_store_rollback(job->store);
    }
    if (rc < 0) {
        orch_plan_free(al);
        orch__buf_free(&changes);
        orch__buf_free(&gone);
        fprintf(stderr, "orch: update: %s\n",
                orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc));
        return ORCH_EXIT_FAIL;
    }
    orch_plan_free(job->plan);
    job->plan = al;
    if (gone.len)
        fprintf(stderr, "orch: update: %s drops:%s\n", path, gone.p);
    if (recompute)
        fprintf(stderr,
                "orch: update: %s adopted; what it computes anew:%s\n"
                "orch: every root gets a new revision that keeps what still holds\n",
                path, changes.p);
    else
        fprintf(stderr, "orch: update: %s adopted: %s, nothing runs again\n", path,
                gone.len ? "nothing computes anew" : "only options changed");
    orch__buf_free(&changes);
    orch__buf_free(&gone);
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
    struct orch__buf rerun = {0}; /* --rerun's calls, comma-separated */
    for (int i = 0; i < argc; i++) {
        if (i > 0 && strcmp(argv[i], "--rerun") == 0) {
            if (i + 1 == argc || !argv[i + 1][0] || strchr(argv[i + 1], ',')) {
                orch__buf_free(&rerun);
                return orch_cli_usage_error("update: --rerun needs a call's name");
            }
            orch__buf_printf(&rerun, "%s%s", rerun.len ? "," : "", argv[++i]);
            continue;
        }
        if (i > 0 && strcmp(argv[i], "--watch") == 0) {
            char *end;
            double s = i + 1 < argc ? strtod(argv[i + 1], &end) : 0;
            if (i + 1 == argc || end == argv[i + 1] || *end || !(s > 0)) {
                orch__buf_free(&rerun);
                return orch_cli_usage_error("update: --watch needs a positive number of "
                                            "seconds");
            }
            if (s > WATCH_MAX_S) {
                orch__buf_free(&rerun);
                return orch_cli_usage_error("update: --watch takes at most %d seconds (a "
                                            "year), not %s",
                                            WATCH_MAX_S, argv[i + 1]);
            }
            o.watch_ms = (int64_t)(s * 1000.0 + 0.5);
            if (o.watch_ms < WATCH_MIN_MS)
                o.watch_ms = WATCH_MIN_MS;
            i++;
        } else if (nrest < 63) {
            rest[nrest++] = argv[i];
        } else {
            orch__buf_free(&rerun);
            return orch_cli_usage_error("update: too many arguments");
        }
    }
    struct orch_job *job;
    const char *pipeline;
    int status = orch_cli_open_existing("update", nrest, rest, &o, &job, &pipeline);
    if (status >= 0) {
        orch__buf_free(&rerun);
        return status;
    }
    int64_t id = 0;
    if ((pipeline || rerun.len) &&
        (status = plan_change(job, pipeline, rerun.len ? rerun.p : NULL, &id)) >= 0) {
        orch__buf_free(&rerun);
        orch_job_close(job);
        return status;
    }
    orch__buf_free(&rerun);
    /* The update is recorded before anything of it is done: a crash from here on leaves
     * it unfinished, and the next start of a driver finishes it (admit.c). An update that
     * a crash left unfinished is finished first, as `orch resume` would (it may be an
     * edit's, whose revisions take results over from the previous plan: a new update row
     * would end that), then this one starts. */
    bool scanned = false;
    int64_t open_id = 0;
    int rc = id ? 0 : orch_store_update_open(job->store, &open_id, &scanned, NULL);
    if (rc == 0 && open_id) {
        fprintf(stderr, "orch: update: finishing the update that was under way (#%lld) first\n",
                (long long)open_id);
        struct orch_run_opts once = o;
        once.watch_ms = 0;
        if ((status = orch_cli_drive(job, &once)) != ORCH_EXIT_OK) {
            orch_job_close(job);
            return status;
        }
    }
    if (rc == 0 && !id) {
        rc = orch_store_begin(job->store);
        if (rc == 0)
            rc = orch_store_update_start(job->store, 0, NULL, &id);
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
    /* A failed update has found nothing it can stand by: the error says why, not counts. */
    if (status != ORCH_EXIT_FAIL)
        update_said(job, id);
    orch_job_close(job);
    return status;
}
