/* admit.c — the sources of root entities, admitted within the grain budget (driver_int.h). */
#include "driver_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "orch_error.h"
#include "orch_facts.h"
#include "source.h"

#define ADMIT_CHUNK 256 /* roots admitted per turn at most: keeps a turn short */

/* Admission by drain rate (orch_driver_admit_quota). */
enum {
    LEAD_MS = 200,     /* the work kept queued for the calls that read the roots */
    BACKLOG_MS = 2000, /* no call is given more than this much queued work */
    PROBE = 16,        /* roots queued while nothing tells the fan-out yet */
};

/* ---- opening: the rescan of an update, the check of a resume ----------------------------- */

enum { WALK_MAX = 4096 }; /* values walked per turn at most, admitted or not */

int orch_driver_sources_open(struct orch_driver *d)
{
    orch_store *st = d->job->store;
    int rc;
    for (int i = 0; i < d->nsources; i++) {
        struct orch_driver_source *s = &d->sources[i];
        s->src = orch_plan_source(d->plan, i);
        s->domain = s->src->domain;
        if (s->src->retired) { /* dropped by an edit: it admits nothing (cli_update.c) */
            s->exhausted = true;
            continue;
        }
        if ((rc = orch_walk_open(st, d->plan, i, d->job->base_dir, &s->walk)) < 0 ||
            (rc = orch_store_root_next_ordinal(st, s->domain, &s->next_ordinal)) < 0)
            return rc;
    }
    bool scanned;
    if ((rc = orch_store_update_open(st, &d->update, &scanned, &d->update_plan)) < 0)
        return rc;
    if (d->update && !scanned) {
        /* One transaction: a crash leaves the update unscanned, and the next start scans
         * again from the start. */
        if ((rc = orch_store_begin(st)) < 0)
            return rc;
        for (int i = 0; i < d->nsources && rc == 0; i++)
            if (d->sources[i].walk)
                rc = orch_update_rescan(st, d->sources[i].walk, d->update);
        if (rc == 0 && d->update_plan)
            rc = orch_update_replan(st, d->update);
        if (rc == 0)
            rc = orch_store_update_scanned(st, d->update);
        if (rc < 0) {
            orch_store_rollback(st);
            return rc;
        }
        if ((rc = orch_store_commit(st)) < 0)
            return rc;
    }
    for (int i = 0; i < d->nsources; i++)
        if (d->sources[i].walk && (rc = orch_walk_rewind(d->sources[i].walk, false)) < 0)
            return rc;
    return 0;
}

int orch_driver_rescan(struct orch_driver *d)
{
    orch_store *st = d->job->store;
    int rc = orch_store_begin(st);
    if (rc == 0)
        rc = orch_store_update_start(st, 0, NULL, &d->update);
    for (int i = 0; i < d->nsources && rc == 0; i++)
        if (d->sources[i].walk && (rc = orch_walk_rewind(d->sources[i].walk, true)) == 0)
            rc = orch_update_rescan(st, d->sources[i].walk, d->update);
    if (rc == 0)
        rc = orch_store_update_scanned(st, d->update);
    if (rc < 0) {
        if (orch_store_in_txn(st))
            orch_store_rollback(st);
        return rc;
    }
    if ((rc = orch_store_commit(st)) < 0)
        return rc;
    d->updates++;
    d->update_plan = 0;
    orch_carry_free(d->carry); /* an update of the inputs: nothing is taken over */
    d->carry = NULL;
    for (int i = 0; i < d->nsources && rc == 0; i++) {
        if (!d->sources[i].walk)
            continue; /* retired */
        rc = orch_walk_rewind(d->sources[i].walk, false);
        d->sources[i].exhausted = false;
    }
    orch_driver_workers_reopen(d);
    return rc;
}

void orch_driver_sources_free(struct orch_driver *d)
{
    for (int i = 0; d->sources && i < d->nsources; i++) {
        orch_walk_free(d->sources[i].walk);
        free(d->sources[i].calls);
    }
    free(d->sources);
    d->sources = NULL;
    d->nsources = 0;
}

/* Admits up to ADMIT_CHUNK new root entities of source s, walking at most WALK_MAX of its
 * values (a value that is a live root already is passed over): their values are written
 * to LMDB in one transaction, then published in the turn's store transaction, each with
 * its root row (key, revision, position, and a files() root's signature). A failure leaves
 * the walk past values that were not committed: the run stops, and the next start walks
 * the source again from its start. */
static int admit_chunk(struct orch_driver *d, struct orch_driver_source *s, int64_t quota)
{
    char *vals[ADMIT_CHUNK], *keys[ADMIT_CHUNK];
    struct orch_iov iov[ADMIT_CHUNK];
    uint64_t ids[ADMIT_CHUNK];
    int64_t pos[ADMIT_CHUNK], rev[ADMIT_CHUNK];
    struct orch_root_sig sigs[ADMIT_CHUNK];
    int n = 0, rc = 0, walked = 0;
    /* A chunk stops where its values would fill the byte budget, when they count (the
     * source's values are read by a statement, in a pipeline with outputs): one root at
     * least, so that admission always moves. */
    const int port = s->src->port;
    int64_t room = orch_prop_port_counted(d->prop, port)
                       ? d->max_live - orch_prop_live_bytes(d->prop)
                       : INT64_MAX;
    int64_t bytes = 0;
    const bool files = orch_walk_files(s->walk);
    while (n < quota && walked < WALK_MAX && (n == 0 || bytes < room)) {
        struct orch_walk_value v;
        if ((rc = orch_walk_next(s->walk, &v)) <= 0) {
            s->exhausted = rc == 0;
            break;
        }
        rc = 0;
        walked++;
        if (v.match)
            continue;
        /* The value's bytes as they are: a line may hold NUL bytes, so no string copy. */
        vals[n] = malloc(v.len + 1);
        keys[n] = vals[n] ? strdup(v.key) : NULL;
        if (!keys[n] || (rc = orch_walk_claim(s->walk, v.key)) < 0) {
            free(vals[n]);
            free(keys[n]);
            rc = rc < 0 ? rc : -ENOMEM;
            break;
        }
        memcpy(vals[n], v.value, v.len);
        vals[n][v.len] = '\0';
        /* What the file is as it is admitted: an update compares it with what it finds.
         * A file that cannot be read has the signature that says so; its UDF says why. A
         * line has one when its key does not say it (a `#n` suffix, a NUL byte). */
        if (!files)
            (void)orch_walk_line_sig(&v, &sigs[n]);
        else if (orch_file_sig(vals[n], true, &sigs[n]) == -EINTR) {
            rc = -EINTR; /* stopped by a signal: the turn is rolled back */
            free(vals[n]);
            free(keys[n]);
            break;
        }
        pos[n] = v.position;
        rev[n] = v.revision;
        bytes += (int64_t)v.len;
        iov[n].data = vals[n];
        iov[n].len = v.len;
        n++;
    }
    if (rc == 0 && n > 0)
        rc = orch_payload_put_many(d->job->payloads, iov, (size_t)n, ids);
    if (rc == 0 && n > 0)
        rc = orch_driver_txn(d);
    for (int k = 0; k < n && rc == 0; k++) {
        int64_t e;
        rc = orch_prop_admit_root(d->prop, s->domain, s->next_ordinal, keys[k], ids[k],
                                  (int64_t)iov[k].len, &e);
        if (rc == 0)
            rc = orch_store_root_put(d->job->store, e, s->domain, rev[k], pos[k],
                                     sigs[k].known ? &sigs[k] : NULL);
        if (rc == 0)
            rc = orch_walk_admitted(s->walk, e);
        s->next_ordinal++;
        d->admitted++;
    }
    if (rc == 0 && n > 0 && d->update)
        rc = orch_store_update_count(d->job->store, d->update, n, 0, 0);
    /* Walked past known roots only: nothing was made that an event will follow, so the
     * loop must not wait for one before the next chunk (loop.c). */
    if (n == 0 && !s->exhausted)
        d->walking = true;
    orch_walk_claims_clear(s->walk);
    for (int k = 0; k < n; k++) {
        free(vals[k]);
        free(keys[k]);
    }
    return rc;
}

/* driver_int.h. */
int orch_driver_resign(struct orch_driver *d, const struct orch_driver_batch *b)
{
    orch_payload_rtxn *r = NULL;
    int rc = 0;
    for (int i = 0; i < b->n && rc == 0; i++) {
        const struct orch_wire_record *w = &b->rec[i];
        size_t off = 0;
        for (int k = 0; k < b->cr->resign_in; k++)
            off += w->nval[k];
        const struct orch_wire_value *v = &w->vals[off];
        struct orch_root_sig stored;
        if (!v->present ||
            (rc = orch_store_root_sig_get(d->job->store, b->slot[i].g.entity, &stored)) <= 0)
            continue;
        const void *data;
        size_t len;
        char *path = NULL;
        if (!r && (rc = orch_payload_read_begin(d->job->payloads, &r)) < 0)
            break;
        rc = orch_payload_read(r, v->payload, &data, &len);
        if (ORCH_NEVER(rc == ORCH_ENOTFOUND)) { /* freed only after this turn commits */
            orch_error_clear();
            rc = 0;
            continue;
        }
        if (rc < 0)
            break;
        if (!(path = strndup(data, len))) {
            rc = -ENOMEM;
            break;
        }
        if (orch_file_moved(path, &stored)) {
            orch_root_sig_stale(&stored);
            if ((rc = orch_driver_txn(d)) == 0)
                rc = orch_store_root_sig(d->job->store, b->slot[i].g.entity, &stored);
        }
        free(path);
    }
    if (r)
        orch_payload_read_end(r);
    return rc;
}

/* ---- the budgets ---------------------------------------------------------------------- */

/* A quarter of the memory, and half of the free space on the job's file system: live
 * intermediate payloads are read through the page cache by the workers that consume them
 * (memory), and they are written to JOB/payloads/ (disk), so either may be what runs out.
 * At least 64 MiB, so that a small machine still streams pages of a document. */
int64_t orch_driver_live_budget(const struct orch_driver *d)
{
    const int64_t floor = (int64_t)64 << 20;
    int64_t budget = INT64_MAX;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psize > 0)
        budget = (int64_t)pages * psize / 4;
    struct statvfs fs;
    if (statvfs(d->job->dir, &fs) == 0) {
        int64_t half = (int64_t)(fs.f_bavail / 2) * (int64_t)fs.f_frsize;
        if (half < budget)
            budget = half;
    }
    return budget > floor ? budget : floor;
}

bool orch_driver_tight(const struct orch_driver *d, bool *grains, bool *bytes)
{
    *grains = orch_prop_unsealed(d->prop) >= d->max_unsealed;
    *bytes = orch_prop_live_bytes(d->prop) >= d->max_live;
    return *grains || *bytes;
}

/* Admission by drain rate (DESIGN §5: the optimistic policy of the streaming-batch
 * paper), within the hard budgets. Roots enter as fast as the pipeline drains them, which
 * three measures of the turn tell (orch_admit_view):
 *
 *   - lead: the calls that read the source's roots keep about LEAD_MS of queued work for
 *     their workers (their queue times their measured time per grain, over their
 *     workers), so that they never starve; before they have measured anything, a chunk
 *     (ADMIT_CHUNK grains queued);
 *   - backlog: no call of the pipeline has more than BACKLOG_MS of queued work for its
 *     workers: the slowest call, wherever it is, sets the pace (its queue holds what the
 *     fan-out of the expansions above it made), and upstream calls neither starve it nor
 *     flood it;
 *   - room: the roots admitted, times the grains each root has made so far (the measured
 *     fan-out, counting only roots whose expansions are done), stay within half of the
 *     grain budget, so that the budget itself is a ceiling that a job far from it never
 *     meets (dispatch.c holds upstream calls only at the ceiling). While no expansion has
 *     told the fan-out, PROBE roots wait for one at a time.
 *
 * Whatever these say, a job with nothing unsealed gets roots: admission never stalls. */
int64_t orch_driver_admit_quota(const struct orch_admit_view *v)
{
    int64_t q = ADMIT_CHUNK;
    /* lead */
    if (v->lead_ms >= 0) {
        if (v->lead_room < q)
            q = v->lead_room;
    } else if (v->lead_queued >= ADMIT_CHUNK) {
        q = 0;
    } else {
        q = ADMIT_CHUNK - v->lead_queued;
    }
    /* backlog */
    if (v->backlog_ms >= BACKLOG_MS)
        q = 0;
    /* room: half of the budget, or all of a small one */
    int64_t soft = v->max_unsealed >= 4 * ADMIT_CHUNK ? v->max_unsealed / 2 : v->max_unsealed;
    int64_t room = soft - v->unsealed;
    int64_t expanded = v->admitted - v->unexpanded;
    if (room <= 0) {
        q = 0;
    } else if (expanded > 0) {
        /* What the roots still to expand will make counts as made already. */
        double per_root = (double)v->made / (double)expanded;
        double left = (double)room - (double)v->unexpanded * per_root;
        int64_t fits = left <= 0 ? 0 : per_root > 1 ? (int64_t)(left / per_root) : (int64_t)left;
        if (fits < q)
            q = fits;
    } else if (v->expands) {
        int64_t probe = PROBE - v->unexpanded;
        if (probe < q)
            q = probe > 0 ? probe : 0;
    }
    if (v->unsealed == 0 && q < 1)
        q = 1;
    return q;
}

/* The queued work of call cr in ms for its workers; -1 while it has measured nothing. */
static double queued_ms(const struct orch_driver_call *cr)
{
    if (cr->ms_per_grain <= 0)
        return -1;
    return (double)orch_queue_count(&cr->q) * cr->ms_per_grain / cr->c->opts.workers;
}

/* The calls admission looks at for source s: those that read its roots, then the plain
 * expands of its domain. */
static int source_calls(struct orch_driver *d, struct orch_driver_source *s)
{
    if (!(s->calls = malloc(2 * (size_t)d->ncalls * sizeof *s->calls)))
        return -ENOMEM;
    for (int pass = 0; pass < 2; pass++) {
        for (int c = 0; c < d->ncalls; c++) {
            const struct orch_driver_call *cr = &d->calls[c];
            if (!cr->pool)
                continue;
            bool in = false;
            if (pass == 0) {
                for (int i = 0; i < cr->s->nin; i++)
                    in = in || cr->s->in[i].port == s->src->port;
            } else {
                in = cr->s->op == ORCH_OP_EXPAND && cr->s->domain == s->domain;
            }
            if (in)
                s->calls[s->nreaders + s->nexpands++] = c;
        }
        if (pass == 0) {
            s->nreaders = s->nexpands;
            s->nexpands = 0;
        }
    }
    return 0;
}

/* The view of source s this turn (orch_driver_admit_quota). It looks at the calls with
 * queued grains (d->ready) and at s's own calls, never at every call (invariant 6). */
static void admit_view(const struct orch_driver *d, const struct orch_driver_source *s,
                       struct orch_admit_view *v)
{
    *v = (struct orch_admit_view){.unsealed = orch_prop_unsealed(d->prop),
                                  .max_unsealed = d->max_unsealed,
                                  .admitted = d->admitted,
                                  .made = orch_prop_created(d->prop) - d->created0};
    for (int k = 0; k < d->nready; k++) {
        double ms = queued_ms(&d->calls[d->ready[k]]);
        if (ms > v->backlog_ms)
            v->backlog_ms = ms;
    }
    v->lead_ms = 0;
    v->lead_room = INT64_MAX;
    for (int k = 0; k < s->nreaders; k++) {
        const struct orch_driver_call *cr = &d->calls[s->calls[k]];
        double ms = queued_ms(cr);
        v->lead_queued += orch_queue_count(&cr->q);
        if (ms < 0 || v->lead_ms < 0) {
            v->lead_ms = -1;
            continue;
        }
        if (ms > v->lead_ms)
            v->lead_ms = ms;
        /* the grains (one per root) that fill its lead */
        double fill = (LEAD_MS - ms) * cr->c->opts.workers / cr->ms_per_grain;
        int64_t room = fill <= 0 ? 0 : fill >= ADMIT_CHUNK ? ADMIT_CHUNK : (int64_t)fill + 1;
        if (room < v->lead_room)
            v->lead_room = room;
    }
    v->expands = s->nexpands > 0;
    for (int k = s->nreaders; k < s->nreaders + s->nexpands; k++) {
        const struct orch_prop_counts *n = orch_prop_counts(d->prop, s->calls[k]);
        int64_t sealed = 0;
        for (int o = 0; o < ORCH_OUTCOME__COUNT; o++)
            sealed += n->sealed[o];
        v->unexpanded += n->created - sealed;
    }
    if (v->unexpanded > v->admitted)
        v->unexpanded = v->admitted; /* expansions of roots of an earlier run */
}

/* Admission (DESIGN §5): roots enter lazily, one chunk per source per turn (so that the
 * turn commits and the workers get going), as many as orch_driver_admit_quota allows, and
 * none while the unsealed grains or the live intermediate bytes are at their budgets —
 * unless nothing is unsealed at all: bytes kept for a failed reader
 * (engine/prop/reclaim.c) stay counted, and a budget full of them must not stop a job that
 * has nothing else to do (a root then enters, the least that keeps it going). Staged
 * (driver.h), every root enters in the first turn, whatever the budgets: the first calls
 * are held until the sources are exhausted, so a budget would wait on grains that wait on
 * it (a deadlock), and chunks paced by turns would wait on turns that nothing else makes. */
int orch_driver_admit(struct orch_driver *d)
{
    d->walking = false;
    if (!d->admit_started) {
        d->admit_started = true;
        d->created0 = orch_prop_created(d->prop);
        for (int i = 0; i < d->nsources; i++)
            if (d->sources[i].walk && source_calls(d, &d->sources[i]) < 0)
                return -ENOMEM;
    }
    for (int i = 0; i < d->nsources; i++) {
        struct orch_driver_source *s = &d->sources[i];
        bool grains, bytes;
        if (s->exhausted || (!d->opts->staged && orch_driver_tight(d, &grains, &bytes) &&
                             orch_prop_unsealed(d->prop) > 0))
            continue;
        int64_t quota = ADMIT_CHUNK;
        if (!d->opts->staged) {
            struct orch_admit_view v;
            admit_view(d, s, &v);
            quota = orch_driver_admit_quota(&v);
            if (quota <= 0)
                continue;
        }
        int rc;
        do {
            rc = admit_chunk(d, s, quota);
        } while (rc == 0 && d->opts->staged && !s->exhausted);
        if (rc < 0)
            return rc;
    }
    return 0;
}

bool orch_driver_sources_done(const struct orch_driver *d)
{
    for (int i = 0; i < d->nsources; i++)
        if (!d->sources[i].exhausted)
            return false;
    return true;
}
