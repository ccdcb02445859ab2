/* driver.c — the driver's event loop: queues, reservation, group commit (driver.h). */
#include "driver.h"

#include <assert.h>
#include <errno.h>
#include <glob.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "orch_error.h"
#include "pool.h"
#include "propagate.h"

#define DEFAULT_MAX_UNSEALED 20000
#define ADMIT_CHUNK 256 /* roots admitted per turn at most: keeps a turn short */

/* ---- ready queues ---------------------------------------------------------------------- */

struct qent {
    struct orch_grain_ref g;
    bool solo; /* retried after its batch failed: runs alone (DESIGN §4) */
};

/* A FIFO in ready_seq order: entries are appended as grains become READY (each later than
 * the last); a parent reservation takes entries from the middle and closes the gap. */
struct queue {
    struct qent *v;
    size_t head, len, cap; /* live entries are v[head .. head+len) */
};

static int queue_push(struct queue *q, const struct qent *e)
{
    if (q->head + q->len == q->cap) {
        if (q->head > q->cap / 2) { /* reuse the consumed front */
            memmove(q->v, q->v + q->head, q->len * sizeof *q->v);
            q->head = 0;
        } else {
            size_t cap = q->cap ? q->cap * 2 : 256;
            struct qent *nv = realloc(q->v, cap * sizeof *nv);
            if (!nv)
                return -ENOMEM;
            q->v = nv;
            q->cap = cap;
        }
    }
    q->v[q->head + q->len++] = *e;
    return 0;
}

/* ---- per-call runtime ------------------------------------------------------------------ */

struct slot { /* one record of an in-flight batch */
    struct orch_grain_ref g;
    int64_t attempt_row;
    uint64_t first_input;
};

struct callrt;

struct batch {
    uint64_t id;
    uint64_t bytes;          /* input bytes so far (only with batch_bytes) */
    orch_payload_rtxn *rtxn; /* for input sizes while reserving; ended after */
    struct callrt *cr;
    orch_worker *worker;
    int n;
    struct slot *slot;
    struct batch *next;
    /* what travels, kept until sent */
    struct orch_wire_record *rec;
    uint32_t *nval;
    struct orch_wire_value *vals;
};

struct callrt {
    int call;
    const struct orch_call *c;
    const struct orch_stmt *s;
    orch_pool *pool;
    struct queue q;
    orch_worker **idle;
    int nidle, cidle;
    struct batch *inflight; /* sent or about to be sent */
    double cpus, gpus;      /* held from the budgets while a batch runs */
    char **devices;         /* per worker: its CUDA_VISIBLE_DEVICES, or NULL */
    int64_t done_ok;
};

struct source_rt {
    int domain;
    const struct orch_source *src;
    int64_t next; /* the next ordinal to admit */
    bool exhausted;
    glob_t g; /* files(): the sorted paths */
    bool globbed;
    FILE *lines; /* lines(): the open file, positioned at line `next` */
    char *line;
    size_t line_cap;
};

struct driver {
    struct orch_job *job;
    const orch_plan *plan;
    const struct orch_run_opts *opts;
    struct orch_run_stats *stats;
    struct event_base *base;
    orch_prop *prop;
    struct callrt *calls; /* by plan call index; pool NULL for unused calls */
    int ncalls;
    int *order; /* call indexes, the most downstream first (depth in the plan's DAG) */
    struct source_rt *sources;
    int nsources;
    struct batch *to_send; /* reserved this turn, sent after the commit */
    uint64_t next_batch;
    double cpu_total, cpu_busy;
    double gpu_total, gpu_busy;
    int64_t max_unsealed;
    int fatal; /* first fatal error; the loop stops */
    bool interrupted;
    char exe[4096];
    struct orch_prop_inputs inputs;
    struct event *sigint, *sigterm, *tick;
    int64_t started_ms, last_plain_ms;
    bool live;
    int live_lines;
};

/* Resources (DESIGN §5): a call's worker holds the call's cpus and gpus from the
 * engine's budgets while it runs a batch; a batch is reserved only when they fit. */
static bool fits(const struct driver *d, const struct callrt *cr)
{
    return (cr->cpus <= 0 || d->cpu_busy + cr->cpus <= d->cpu_total + 1e-9) &&
           (cr->gpus <= 0 || d->gpu_busy + cr->gpus <= d->gpu_total + 1e-9);
}

static void release(struct driver *d, const struct callrt *cr)
{
    d->cpu_busy -= cr->cpus;
    d->gpu_busy -= cr->gpus;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_fatal(struct driver *d, int rc)
{
    if (!d->fatal)
        d->fatal = rc;
}

/* The turn's transaction is opened lazily by whatever needs to write first. */
static int txn(struct driver *d)
{
    if (orch_store_in_txn(d->job->store))
        return 0;
    return orch_store_begin(d->job->store);
}

static int on_ready(void *ctx, const struct orch_grain_ref *g)
{
    struct driver *d = ctx;
    struct qent e = {.g = *g};
    return queue_push(&d->calls[g->call].q, &e);
}

/* ---- attempts -------------------------------------------------------------------------- */

static int attempt_end(struct driver *d, int64_t row, enum orch_attempt_outcome o,
                       const char *message)
{
    sqlite3_stmt *st;
    int rc = orch_store_prepare(d->job->store,
                                "UPDATE attempt SET ended_at = ?, outcome = ?, "
                                "message = ? WHERE id = ?",
                                &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, now_ms());
    sqlite3_bind_text(st, 2, orch_attempt_outcome_name(o), -1, SQLITE_STATIC);
    if (message && *message)
        sqlite3_bind_text(st, 3, message, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, row);
    rc = orch_store_step(d->job->store, st);
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

/* Puts an in-flight grain back to READY with generation+1 at the tail of its queue. */
static int requeue(struct driver *d, struct orch_grain_ref g, bool solo)
{
    sqlite3_stmt *st;
    int rc =
        orch_store_prepare(d->job->store,
                           "UPDATE grain SET phase = 'ready', generation = generation + 1, "
                           "ready_seq = ? WHERE id = ? AND phase = 'in_flight' "
                           "AND generation = ?",
                           &st);
    if (rc < 0)
        return rc;
    g.seq = orch_prop_next_seq(d->prop);
    sqlite3_bind_int64(st, 1, g.seq);
    sqlite3_bind_int64(st, 2, g.grain);
    sqlite3_bind_int64(st, 3, g.generation);
    rc = orch_store_step(d->job->store, st);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    if (sqlite3_changes(orch_store_db(d->job->store)) != 1)
        return 0; /* no longer in flight with that generation: nothing to retry */
    g.generation++;
    struct qent e = {.g = g, .solo = solo};
    return queue_push(&d->calls[g.call].q, &e);
}

static struct batch *batch_take(struct callrt *cr, uint64_t id)
{
    for (struct batch **p = &cr->inflight; *p; p = &(*p)->next) {
        if ((*p)->id == id) {
            struct batch *b = *p;
            *p = b->next;
            return b;
        }
    }
    return NULL;
}

static void batch_free(struct batch *b)
{
    if (!b)
        return;
    free(b->slot);
    free(b->rec);
    free(b->nval);
    free(b->vals);
    free(b);
}

/* A batch failed as a whole (run returned an error, the worker died or hung). A batch of
 * several grains is split: each is retried alone, not counted. A grain that failed alone
 * counts the attempt against `retries`, and is sealed Failed (exhausted) past it. */
static int batch_failed(struct driver *d, struct callrt *cr, struct batch *b,
                        enum orch_failure_kind kind, const char *message)
{
    enum orch_attempt_outcome ao = kind == ORCH_FAILURE_CRASH     ? ORCH_ATTEMPT_CRASH
                                   : kind == ORCH_FAILURE_TIMEOUT ? ORCH_ATTEMPT_TIMEOUT
                                                                  : ORCH_ATTEMPT_ERROR;
    int rc = txn(d);
    d->stats->attempts_failed++;
    for (int i = 0; i < b->n && rc == 0; i++) {
        struct slot *s = &b->slot[i];
        if ((rc = attempt_end(d, s->attempt_row, ao, message)) < 0)
            break;
        /* A sibling under a GroupFailure barrier is neither retried (it would be
         * dispatched under the barrier) nor charged: it is sealed Suppressed. */
        bool barred;
        if ((rc = orch_prop_barred(d->prop, &s->g, &barred)) < 0 || barred)
            continue;
        if (b->n > 1) {
            rc = requeue(d, s->g, true);
            continue;
        }
        if ((rc = orch_prop_failure_row(d->prop, &s->g, kind, message)) < 0)
            break;
        s->g.attempts++;
        if ((int)s->g.attempts > cr->c->opts.retries) {
            char why[512];
            snprintf(why, sizeof why, "gave up after %u attempts; last: %s", s->g.attempts,
                     message);
            bool accepted;
            rc = orch_prop_fail(d->prop, &s->g, ORCH_FAILURE_EXHAUSTED, why, &accepted);
        } else {
            rc = requeue(d, s->g, true);
        }
    }
    release(d, cr);
    return rc;
}

/* ---- pool callbacks -------------------------------------------------------------------- */

static struct callrt *call_of(struct driver *d, orch_pool *pool)
{
    for (int i = 0; i < d->ncalls; i++)
        if (d->calls[i].pool == pool)
            return &d->calls[i];
    return NULL;
}

static void on_idle(void *ctx, orch_pool *pool, orch_worker *w)
{
    struct driver *d = ctx;
    struct callrt *cr = call_of(d, pool);
    assert(cr);
    if (cr->nidle == cr->cidle) {
        int cap = cr->cidle ? cr->cidle * 2 : 8;
        orch_worker **nv = realloc(cr->idle, (size_t)cap * sizeof *nv);
        if (!nv) {
            set_fatal(d, -ENOMEM);
            return;
        }
        cr->idle = nv;
        cr->cidle = cap;
    }
    cr->idle[cr->nidle++] = w;
}


static enum orch_attempt_outcome answer_attempt(enum orch_wire_outcome o)
{
    switch (o) {
    case ORCH_WIRE_OK:
    case ORCH_WIRE_KEEP_TRUE:
        return ORCH_ATTEMPT_OK;
    case ORCH_WIRE_DROP:
    case ORCH_WIRE_KEEP_FALSE:
        return ORCH_ATTEMPT_DROPPED;
    case ORCH_WIRE_RECORD_FAILURE:
        return ORCH_ATTEMPT_RECORD;
    default:
        return ORCH_ATTEMPT_GROUP;
    }
}

static void on_report(void *ctx, orch_pool *pool, orch_worker *w,
                      const struct orch_wire_report *r)
{
    struct driver *d = ctx;
    struct callrt *cr = call_of(d, pool);
    struct batch *b = batch_take(cr, r->batch);
    on_idle(ctx, pool, w);
    if (!b) { /* not a batch we sent: a duplicate or a stray report */
        d->stats->stale++;
        return;
    }
    int rc = txn(d);
    if (rc == 0 && r->status == ORCH_WIRE_STATUS_STORAGE) {
        /* The payload store is full or broken: no retry can help. The grains go back to
         * READY uncharged, and the job stops so the user can make room and resume. */
        for (int i = 0; i < b->n && rc == 0; i++) {
            rc = attempt_end(d, b->slot[i].attempt_row, ORCH_ATTEMPT_ERROR, r->message);
            if (rc == 0)
                rc = requeue(d, b->slot[i].g, false);
        }
        release(d, cr);
        if (rc == 0)
            rc = orch_error_set(-ENOSPC, "call %s could not store its outputs: %s", cr->c->name,
                                r->message);
    } else if (rc == 0 && r->status != 0) {
        rc = batch_failed(d, cr, b, ORCH_FAILURE_ERROR, r->message);
    } else if (rc == 0 && r->nrec != (uint32_t)b->n) {
        char why[128];
        snprintf(why, sizeof why, "worker %d answered %u records of a batch of %d",
                 orch_worker_pid(w), r->nrec, b->n);
        rc = batch_failed(d, cr, b, ORCH_FAILURE_ERROR, why);
    } else {
        release(d, cr);
        for (int i = 0; i < b->n && rc == 0; i++) {
            struct slot *s = &b->slot[i];
            const struct orch_wire_answer *a = &r->rec[i];
            bool accepted, suppressed;
            /* An answer of values that does not fit its statement (an aligned expand's
             * count, a map giving children, ...) is sealed as a RecordFailure by
             * orch_prop_accept; the attempt must say `record`, not `ok`. */
            int64_t failed = orch_prop_counts(d->prop, s->g.call)->sealed[ORCH_OUTCOME_FAILED];
            rc = orch_prop_accept(d->prop, &s->g, a, s->first_input, &accepted, &suppressed);
            if (rc < 0)
                break;
            if (!accepted) {
                d->stats->stale++;
                continue;
            }
            d->stats->committed++;
            if (suppressed)
                d->stats->suppressed++;
            enum orch_attempt_outcome ao = answer_attempt(a->outcome);
            if (suppressed)
                ao = ORCH_ATTEMPT_SUPPRESSED;
            else if ((a->outcome == ORCH_WIRE_OK || a->outcome == ORCH_WIRE_KEEP_TRUE) &&
                     orch_prop_counts(d->prop, s->g.call)->sealed[ORCH_OUTCOME_FAILED] > failed)
                ao = ORCH_ATTEMPT_RECORD;
            rc = attempt_end(d, s->attempt_row, ao,
                             *orch_prop_refusal(d->prop) ? orch_prop_refusal(d->prop)
                                                         : a->message);
        }
    }
    if (rc < 0)
        set_fatal(d, rc);
    batch_free(b);
}

static void on_lost(void *ctx, orch_pool *pool, orch_worker *w, uint64_t batch,
                    enum orch_loss_kind kind, const char *message)
{
    struct driver *d = ctx;
    struct callrt *cr = call_of(d, pool);
    /* A worker killed inside an LMDB read transaction leaves its reader slot taken;
     * clear it now rather than at the next open (slots are few: 126 by default). */
    (void)orch_payload_reader_check(d->job->payloads, NULL);
    for (int i = 0; i < cr->nidle; i++) /* a dead worker is never idle */
        if (cr->idle[i] == w)
            cr->idle[i--] = cr->idle[--cr->nidle];
    if (kind == ORCH_LOSS_INIT && orch_pool_failed(pool)) {
        set_fatal(d, orch_error_set(ORCH_EPLAN, "call %s cannot start its workers: %s",
                                    cr->c->name, message));
    }
    struct batch *b = batch ? batch_take(cr, batch) : NULL;
    if (!b)
        return;
    int rc = batch_failed(d, cr, b,
                          kind == ORCH_LOSS_TIMEOUT ? ORCH_FAILURE_TIMEOUT : ORCH_FAILURE_CRASH,
                          message);
    if (rc < 0)
        set_fatal(d, rc);
    batch_free(b);
}

/* ---- admission ------------------------------------------------------------------------- */

static const char *source_next(struct source_rt *s, size_t *len);

/* Opens source s and moves its cursor past the roots the job already has (a resumed job),
 * checking on the way that the source still gives the same values in the same order:
 * roots are numbered by position, so a source that changed under a job would silently
 * give later roots the wrong ordinals. */
static int source_open(struct driver *d, struct source_rt *s)
{
    const char *port = orch_plan_port(d->plan, s->src->port)->qualified;
    if (s->src->kind == ORCH_SOURCE_FILES) {
        int g = glob(s->src->arg, GLOB_ERR, NULL, &s->g);
        s->globbed = g == 0;
        if (g != 0 && g != GLOB_NOMATCH)
            return orch_error_set(-EIO, "source %s: cannot list files(\"%s\")", port,
                                  s->src->arg);
    } else if (!(s->lines = fopen(s->src->arg, "r"))) {
        return orch_error_set(-errno, "source %s: lines(\"%s\"): %s", port, s->src->arg,
                              strerror(errno));
    }
    sqlite3_stmt *st;
    int rc = orch_store_prepare(d->job->store,
                                "SELECT key FROM entity WHERE parent_id IS NULL "
                                "AND domain_id = ? ORDER BY ordinal",
                                &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int(st, 1, s->domain);
    s->next = 0;
    while ((rc = orch_store_step(d->job->store, st)) == 1) {
        const char *key = (const char *)sqlite3_column_text(st, 0);
        size_t len;
        const char *v = source_next(s, &len);
        if (!v || strnlen(v, len) != strlen(key) || memcmp(v, key, strlen(key)) != 0) {
            rc = orch_error_set(ORCH_EMISMATCH,
                                "source %s changed since the job started: root %lld is \"%s\", "
                                "the source now gives %s%.*s%s; restore the source, or start "
                                "a new job",
                                port, (long long)s->next, key, v ? "\"" : "",
                                v ? (int)strnlen(v, len) : 7, v ? v : "nothing", v ? "\"" : "");
            break;
        }
        s->next++;
    }
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

/* The next value of source s: a pointer valid until the next call, or NULL at its end. */
static const char *source_next(struct source_rt *s, size_t *len)
{
    if (s->src->kind == ORCH_SOURCE_FILES) {
        if (!s->globbed || (size_t)s->next >= s->g.gl_pathc)
            return NULL;
        const char *v = s->g.gl_pathv[s->next];
        *len = strlen(v);
        return v;
    }
    ssize_t n = getline(&s->line, &s->line_cap, s->lines);
    if (n < 0)
        return NULL;
    if (n > 0 && s->line[n - 1] == '\n')
        s->line[--n] = '\0';
    *len = (size_t)n;
    return s->line;
}

/* Admits up to ADMIT_CHUNK root entities of source s: their values are written to LMDB
 * in one transaction, then published in the turn's store transaction. A failure leaves
 * the source's cursor past values that were not committed: the run stops, and resume
 * recomputes the cursor from the roots the store holds. */
static int admit_chunk(struct driver *d, struct source_rt *s)
{
    char *vals[ADMIT_CHUNK];
    struct orch_iov iov[ADMIT_CHUNK];
    uint64_t ids[ADMIT_CHUNK];
    int64_t first = s->next;
    int n = 0, rc = 0;
    while (n < ADMIT_CHUNK) {
        size_t len;
        const char *v = source_next(s, &len);
        if (!v) {
            s->exhausted = true;
            break;
        }
        if (!(vals[n] = strndup(v, len))) {
            rc = -ENOMEM;
            break;
        }
        iov[n].data = vals[n];
        iov[n].len = len;
        n++;
        s->next++;
    }
    if (rc == 0 && n > 0)
        rc = orch_payload_put_many(d->job->payloads, iov, (size_t)n, ids);
    if (rc == 0 && n > 0)
        rc = txn(d);
    for (int k = 0; k < n && rc == 0; k++)
        rc = orch_prop_admit_root(d->prop, s->domain, first + k, vals[k], ids[k], NULL);
    for (int k = 0; k < n; k++)
        free(vals[k]);
    return rc;
}

/* Admission (DESIGN §5): roots enter lazily, one chunk per source per turn (so that the
 * turn commits and the workers get going), and only while the unsealed grains are under
 * their budget. */
static int admit(struct driver *d)
{
    for (int i = 0; i < d->nsources; i++) {
        struct source_rt *s = &d->sources[i];
        if (s->exhausted || orch_prop_unsealed(d->prop) >= d->max_unsealed)
            continue;
        int rc = admit_chunk(d, s);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static bool sources_done(const struct driver *d)
{
    for (int i = 0; i < d->nsources; i++)
        if (!d->sources[i].exhausted)
            return false;
    return true;
}

/* ---- reservation and dispatch ---------------------------------------------------------- */

static int batch_add(struct driver *d, struct callrt *cr, struct batch *b, const struct qent *e,
                     orch_worker *w)
{
    int rc = orch_prop_inputs(d->prop, &e->g, &d->inputs);
    if (rc < 0)
        return rc;
    uint64_t bytes = 0;
    if (cr->c->opts.batch_bytes > 0) {
        /* batch_bytes: the batch is cut before the grain whose inputs would pass it (a
         * grain bigger than the limit still runs, alone). Sizes come from LMDB without
         * copying; the driver's read transaction lives for one reservation. */
        for (size_t k = 0; k < d->inputs.nvals && rc == 0; k++) {
            const void *data;
            size_t len = 0;
            if (!d->inputs.vals[k].present)
                continue;
            if (!b->rtxn)
                rc = orch_payload_read_begin(d->job->payloads, &b->rtxn);
            if (rc == 0)
                rc = orch_payload_read(b->rtxn, d->inputs.vals[k].payload, &data, &len);
            bytes += len;
        }
        if (rc < 0)
            return rc;
        if (b->n > 0 && b->bytes + bytes > (uint64_t)cr->c->opts.batch_bytes)
            return 1;
    }
    /* IN_FLIGHT now, unless the grain left READY meanwhile (sealed by a barrier). */
    sqlite3_stmt *st;
    rc = orch_store_prepare(d->job->store,
                            "UPDATE grain SET phase = 'in_flight' "
                            "WHERE id = ? AND phase = 'ready' "
                            "AND generation = ?",
                            &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_int64(st, 1, e->g.grain);
    sqlite3_bind_int64(st, 2, e->g.generation);
    rc = orch_store_step(d->job->store, st);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    if (sqlite3_changes(orch_store_db(d->job->store)) != 1)
        return 0;
    b->bytes += bytes; /* only now: a stale entry, consumed but not added, weighs nothing */
    struct slot *s = &b->slot[b->n];
    s->g = e->g;
    if ((rc = orch_store_prepare(d->job->store,
                                 "INSERT INTO attempt (grain_id, generation, "
                                 "worker_pid, batch, started_at) "
                                 "VALUES (?, ?, ?, ?, ?)",
                                 &st)) < 0)
        return rc;
    sqlite3_bind_int64(st, 1, e->g.grain);
    sqlite3_bind_int64(st, 2, e->g.generation);
    sqlite3_bind_int(st, 3, orch_worker_pid(w));
    sqlite3_bind_int64(st, 4, (int64_t)b->id);
    sqlite3_bind_int64(st, 5, now_ms());
    rc = orch_store_step(d->job->store, st);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    s->attempt_row = sqlite3_last_insert_rowid(orch_store_db(d->job->store));
    s->first_input = d->inputs.first_input;
    /* Append the wire record; its pointers are fixed up when the batch is complete. */
    struct orch_wire_record *r = &b->rec[b->n];
    r->grain = (uint64_t)e->g.grain;
    r->generation = e->g.generation;
    r->attempt = e->g.attempts + 1;
    r->nin = (uint32_t)cr->s->nin;
    size_t nv_old = 0;
    for (int i = 0; i < b->n; i++)
        for (uint32_t j = 0; j < b->rec[i].nin; j++)
            nv_old += b->nval[(size_t)i * ORCH_PLAN_MAX_INPUTS + j];
    struct orch_wire_value *nv = realloc(b->vals, (nv_old + d->inputs.nvals + 1) * sizeof *nv);
    if (!nv)
        return -ENOMEM;
    b->vals = nv;
    if (d->inputs.nvals) /* a reduce over no surviving child has no values (vals NULL) */
        memcpy(b->vals + nv_old, d->inputs.vals, d->inputs.nvals * sizeof *nv);
    memcpy(b->nval + (size_t)b->n * ORCH_PLAN_MAX_INPUTS, d->inputs.nval,
           sizeof d->inputs.nval);
    b->n++;
    return 0;
}

/* Takes up to `batch` entries for one worker: elastic from the head (mixing parents), or
 * parent: siblings of the first entry's parent, the rest keeping their order. A grain
 * retried after its batch failed (solo) runs alone. */
static int reserve(struct driver *d, struct callrt *cr, orch_worker *w, struct batch **out)
{
    *out = NULL;
    struct queue *q = &cr->q;
    int max = cr->c->opts.batch;
    struct batch *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    b->slot = calloc((size_t)max, sizeof *b->slot);
    b->rec = calloc((size_t)max, sizeof *b->rec);
    b->nval = calloc((size_t)max * ORCH_PLAN_MAX_INPUTS, sizeof *b->nval);
    if (!b->slot || !b->rec || !b->nval) {
        batch_free(b);
        return -ENOMEM;
    }
    int rc = 0;
    b->id = ++d->next_batch;
    bool parent_mode = cr->c->opts.reserve == ORCH_RESERVE_PARENT;
    int64_t parent = q->len ? q->v[q->head].g.parent : 0;
    size_t keep = q->head; /* parent mode: where the next passed-over entry goes */
    size_t i = q->head, end = q->head + q->len;
    while (i < end && b->n < max && rc == 0) {
        struct qent *e = &q->v[i];
        bool fits = (!parent_mode || e->g.parent == parent) && (b->n == 0 || !e->solo);
        if (fits) {
            /* The entry's own flag, not the head's: when the head was stale (consumed, not
             * added), a solo entry right behind it must still end the batch. */
            bool solo = e->solo;
            rc = batch_add(d, cr, b, e, w); /* a stale entry is consumed, not added */
            if (rc == 1) { /* batch_bytes reached: this entry waits for the next batch */
                rc = 0;
                break;
            }
            i++;
            if (solo)
                break;
            continue;
        }
        if (!parent_mode)
            break; /* elastic: a solo entry ends the batch */
        q->v[keep++] = *e;
        i++;
    }
    if (parent_mode) { /* close the gap left by the entries taken */
        size_t tail = end - i;
        memmove(q->v + keep, q->v + i, tail * sizeof *q->v);
        q->len = keep + tail - q->head;
    } else {
        q->len -= i - q->head;
        q->head = i;
    }
    orch_payload_read_end(b->rtxn);
    b->rtxn = NULL;
    if (rc < 0 || b->n == 0) {
        batch_free(b);
        return rc;
    }
    /* Fix up the record pointers now that the arrays no longer move. */
    size_t off = 0;
    for (int k = 0; k < b->n; k++) {
        b->rec[k].nval = b->nval + (size_t)k * ORCH_PLAN_MAX_INPUTS;
        b->rec[k].vals = b->vals + off;
        for (uint32_t j = 0; j < b->rec[k].nin; j++)
            off += b->rec[k].nval[j];
    }
    b->cr = cr;
    b->worker = w;
    *out = b;
    return 0;
}

static int dispatch(struct driver *d)
{
    /* Downstream calls first: when the budget is tight, finishing what is in the
     * pipeline drains it and frees room for admission (DESIGN §5). */
    for (int k = 0; k < d->ncalls; k++) {
        struct callrt *cr = &d->calls[d->order[k]];
        while (cr->pool && cr->nidle > 0 && cr->q.len > 0 && fits(d, cr)) {
            int rc = txn(d);
            orch_worker *w = cr->idle[cr->nidle - 1];
            struct batch *b;
            if (rc == 0)
                rc = reserve(d, cr, w, &b);
            if (rc < 0)
                return rc;
            if (!b)
                continue; /* every entry taken was stale */
            cr->nidle--;
            d->cpu_busy += cr->cpus;
            d->gpu_busy += cr->gpus;
            b->next = d->to_send;
            d->to_send = b;
        }
    }
    return 0;
}

/* After the commit: hand every reserved batch to its worker. */
static void send_batches(struct driver *d)
{
    struct batch *b = d->to_send;
    d->to_send = NULL;
    while (b) {
        struct batch *next = b->next;
        struct callrt *cr = b->cr;
        b->next = cr->inflight;
        cr->inflight = b;
        struct orch_wire_batch wb = {.id = b->id, .nrec = (uint32_t)b->n, .rec = b->rec};
        d->stats->batches++;
        int rc = orch_pool_dispatch(cr->pool, b->worker, &wb);
        if (rc < 0) {
            /* The worker went away between reservation and sending: the batch never ran,
             * so its grains go back to their queue without being charged an attempt. */
            batch_take(cr, b->id);
            rc = txn(d);
            for (int i = 0; i < b->n && rc == 0; i++) {
                rc = attempt_end(d, b->slot[i].attempt_row, ORCH_ATTEMPT_CRASH,
                                 "the worker was lost before the batch reached it");
                if (rc == 0)
                    rc = requeue(d, b->slot[i].g, false);
            }
            release(d, cr);
            if (rc < 0)
                set_fatal(d, rc);
            batch_free(b);
        }
        b = next;
    }
}

/* ---- recovery: what a stopped driver left -------------------------------------------- */

/* Grains IN_FLIGHT when the last driver stopped go back to READY with generation+1 (an
 * interruption: not counted against retries), keeping their ready_seq; their open
 * attempts are closed as interrupted. Then the queues are rebuilt in ready_seq order,
 * which is the order they had. On a new job this finds nothing. */
/* Grains that were in flight under a GroupFailure barrier: their reports would not have
 * been committed, so they are sealed Suppressed now rather than put back to READY, which
 * would dispatch them under the barrier (DESIGN §4). Inside recover's transaction. */
static int recover_barred(struct driver *d)
{
    orch_store *st = d->job->store;
    sqlite3_stmt *q = NULL;
    int rc = orch_store_prepare(st,
                                "SELECT g.id, g.call_id, g.entity_id, e.parent_id, "
                                "g.generation FROM grain AS g JOIN entity AS e "
                                "ON e.id = g.entity_id JOIN suppression AS s "
                                "ON s.call_id = g.call_id AND s.parent_id = e.parent_id "
                                "WHERE g.phase = 'in_flight'",
                                &q);
    struct orch_grain_ref *v = NULL;
    size_t n = 0, cap = 0;
    while (rc >= 0 && (rc = orch_store_step(st, q)) == 1) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            struct orch_grain_ref *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                rc = -ENOMEM;
                break;
            }
            v = nv;
        }
        v[n++] = (struct orch_grain_ref){.grain = sqlite3_column_int64(q, 0),
                                         .call = sqlite3_column_int(q, 1),
                                         .entity = sqlite3_column_int64(q, 2),
                                         .parent = sqlite3_column_int64(q, 3),
                                         .generation = (uint32_t)sqlite3_column_int64(q, 4)};
    }
    if (q)
        sqlite3_reset(q);
    for (size_t i = 0; i < n && rc >= 0; i++) {
        bool sealed;
        rc = orch_prop_barred(d->prop, &v[i], &sealed);
    }
    free(v);
    return rc < 0 ? rc : 0;
}

static int recover(struct driver *d)
{
    orch_store *st = d->job->store;
    int rc = orch_store_begin(st);
    if (rc < 0)
        return rc;
    sqlite3_stmt *q;
    if ((rc = orch_store_prepare(st,
                                 "UPDATE attempt SET outcome = 'interrupted', "
                                 "ended_at = ? WHERE outcome IS NULL",
                                 &q)) == 0) {
        sqlite3_bind_int64(q, 1, now_ms());
        rc = orch_store_step(st, q);
        sqlite3_reset(q);
    }
    if (rc >= 0)
        rc = recover_barred(d);
    if (rc >= 0)
        rc =
            orch_store_exec(st, "UPDATE grain SET phase = 'ready', generation = generation + 1 "
                                "WHERE phase = 'in_flight'");
    if (rc >= 0 &&
        (rc = orch_store_prepare(st, "SELECT coalesce(max(batch), 0) FROM attempt", &q)) == 0) {
        if ((rc = orch_store_step(st, q)) == 1)
            d->next_batch = (uint64_t)sqlite3_column_int64(q, 0);
        sqlite3_reset(q);
    }
    int64_t unsealed = 0;
    if (rc >= 0 && (rc = orch_store_prepare(st,
                                            "SELECT count(*) FROM grain "
                                            "WHERE phase <> 'sealed'",
                                            &q)) == 0) {
        if ((rc = orch_store_step(st, q)) == 1)
            unsealed = sqlite3_column_int64(q, 0);
        sqlite3_reset(q);
    }
    orch_prop_set_unsealed(d->prop, unsealed);
    /* What earlier runs sealed, so that progress counts the whole job. */
    if (rc >= 0 && (rc = orch_store_prepare(st, "SELECT call_id, outcome, count(*) FROM grain "
                                                "WHERE phase = 'sealed' GROUP BY 1, 2",
                                            &q)) == 0) {
        while ((rc = orch_store_step(st, q)) == 1) {
            int o = orch_grain_outcome_parse((const char *)sqlite3_column_text(q, 1));
            if (o >= 0)
                orch_prop_add_sealed(d->prop, sqlite3_column_int(q, 0), o,
                                     sqlite3_column_int64(q, 2));
        }
        sqlite3_reset(q);
    }
    for (int c = 0; c < d->ncalls && rc >= 0; c++) {
        if (!d->calls[c].pool)
            continue;
        /* Attempts charged against retries: the attempt failures since the grain's last
         * terminal failure (a grain re-opened by `orch retry` starts afresh). */
        rc = orch_store_prepare(st,
                                "SELECT g.id, g.entity_id, coalesce(e.parent_id, 0), "
                                "g.generation, g.ready_seq, (SELECT count(*) FROM failure "
                                "AS f WHERE f.grain_id = g.id AND f.kind IN ('error', "
                                "'crash', 'timeout') AND f.generation > coalesce((SELECT "
                                "max(t.generation) FROM failure AS t WHERE t.grain_id = "
                                "g.id AND t.kind IN ('record', 'group', 'exhausted')), -1)) "
                                "FROM grain AS g JOIN entity AS e "
                                "ON e.id = g.entity_id WHERE g.call_id = ? "
                                "AND g.phase = 'ready' ORDER BY g.ready_seq",
                                &q);
        if (rc < 0)
            break;
        sqlite3_bind_int(q, 1, c);
        while ((rc = orch_store_step(st, q)) == 1) {
            struct qent e = {.g = {.in0_state = -1,
                                   .grain = sqlite3_column_int64(q, 0),
                                   .call = c,
                                   .entity = sqlite3_column_int64(q, 1),
                                   .parent = sqlite3_column_int64(q, 2),
                                   .generation = (uint32_t)sqlite3_column_int64(q, 3),
                                   .seq = sqlite3_column_int64(q, 4),
                                   .attempts = (uint32_t)sqlite3_column_int64(q, 5)}};
            if ((rc = queue_push(&d->calls[c].q, &e)) < 0)
                break;
        }
        sqlite3_reset(q);
    }
    if (rc >= 0)
        rc = orch_store_job_set_status(st, ORCH_JOB_RUNNING);
    if (rc < 0) {
        orch_store_rollback(st);
        return rc;
    }
    return orch_store_commit(st);
}

/* ---- progress -------------------------------------------------------------------------- */

static int64_t inflight_count(const struct callrt *cr)
{
    int64_t n = 0;
    for (const struct batch *b = cr->inflight; b; b = b->next)
        n += b->n;
    return n;
}

static void progress(struct driver *d, bool final)
{
    FILE *out = d->opts->out ? d->opts->out : stderr;
    if (d->opts->progress == ORCH_PROGRESS_NONE)
        return;
    int64_t now = mono_ms();
    int interval = d->opts->progress_interval_ms > 0 ? d->opts->progress_interval_ms : 5000;
    if (!d->live && !final && now - d->last_plain_ms < interval)
        return;
    d->last_plain_ms = now;
    if (d->live && d->live_lines > 0)
        fprintf(out, "\033[%dA", d->live_lines);
    d->live_lines = 0;
    double secs = (double)(now - d->started_ms) / 1000.0;
    for (int i = 0; i < d->ncalls; i++) {
        const struct callrt *cr = &d->calls[i];
        if (!cr->pool)
            continue;
        const struct orch_prop_counts *k = orch_prop_counts(d->prop, i);
        int64_t sealed = 0;
        for (int o = 0; o < ORCH_OUTCOME__COUNT; o++)
            sealed += k->sealed[o];
        fprintf(out,
                "%s[%6.1fs] %-12s ready %-7zu running %-5lld sealed %-8lld ok %-8lld "
                "dropped %-6lld failed %-5lld suppressed %lld\n",
                d->live ? "\033[2K" : "", secs, cr->c->name, cr->q.len,
                (long long)inflight_count(cr), (long long)sealed,
                (long long)k->sealed[ORCH_OUTCOME_OK],
                (long long)k->sealed[ORCH_OUTCOME_DROPPED],
                (long long)k->sealed[ORCH_OUTCOME_FAILED],
                (long long)k->sealed[ORCH_OUTCOME_SUPPRESSED]);
        d->live_lines++;
    }
    fflush(out);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct driver *d = arg;
    progress(d, false);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct driver *d = arg;
    d->interrupted = true;
    event_base_loopbreak(d->base);
}

/* ---- set-up and the loop --------------------------------------------------------------- */

/* Orders the calls by the depth of their statements in the plan's DAG (a statement is
 * one deeper than the deepest producer of its inputs; sources are depth 0), deepest
 * first, so that dispatch serves downstream queues first whatever the order in which
 * the pipeline declared its calls. */
static int call_order(struct driver *d)
{
    int ns = orch_plan_nstmts(d->plan);
    int *depth = calloc((size_t)ns + 1, sizeof *depth);
    d->order = calloc((size_t)d->ncalls + 1, sizeof *d->order);
    if (!depth || !d->order) {
        free(depth);
        return -ENOMEM;
    }
    /* Relax ns times: the longest path in a DAG of ns statements has at most ns edges. */
    for (int round = 0; round < ns; round++) {
        bool changed = false;
        for (int i = 0; i < ns; i++) {
            const struct orch_stmt *st = orch_plan_stmt(d->plan, i);
            for (int j = 0; j < st->nin; j++) {
                int prod = orch_plan_port(d->plan, st->in[j].port)->producer;
                if (prod >= 0 && depth[prod] + 1 > depth[i]) {
                    depth[i] = depth[prod] + 1;
                    changed = true;
                }
            }
        }
        if (!changed)
            break;
    }
    for (int i = 0; i < d->ncalls; i++)
        d->order[i] = i;
    /* Insertion sort by depth, deepest first; ties keep declaration order. */
    for (int i = 1; i < d->ncalls; i++) {
        int c = d->order[i], dc = orch_plan_call(d->plan, c)->stmt;
        int key = dc >= 0 ? depth[dc] : -1, k = i - 1;
        while (k >= 0) {
            int ok = orch_plan_call(d->plan, d->order[k])->stmt;
            if ((ok >= 0 ? depth[ok] : -1) >= key)
                break;
            d->order[k + 1] = d->order[k];
            k--;
        }
        d->order[k + 1] = c;
    }
    free(depth);
    return 0;
}

/* The GPUs of this machine: /dev/nvidia0, /dev/nvidia1, ... */
static double detect_gpus(void)
{
    int n = 0;
    char path[32];
    for (;; n++) {
        snprintf(path, sizeof path, "/dev/nvidia%d", n);
        if (access(path, F_OK) != 0)
            return n;
    }
}

/* Gives each worker of a GPU call its devices through CUDA_VISIBLE_DEVICES: a worker that
 * holds g GPUs gets ceil(g) consecutive devices, workers packed in order, wrapping around
 * the machine's devices (fractional calls share a device). */
static int assign_devices(struct driver *d, struct callrt *cr)
{
    int ndev = (int)d->gpu_total;
    if (ndev < 1)
        ndev = 1;
    int per = (int)(cr->gpus + 0.999999);
    if (per < 1)
        per = 1;
    cr->devices = calloc((size_t)cr->c->opts.workers + 1, sizeof *cr->devices);
    if (!cr->devices)
        return -ENOMEM;
    for (int w = 0; w < cr->c->opts.workers; w++) {
        char buf[256] = "";
        size_t len = 0;
        int first = (int)((double)w * cr->gpus) % ndev;
        for (int k = 0; k < per && k < ndev && len < sizeof buf - 8; k++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d", k ? "," : "",
                                    (first + k) % ndev);
        if (!(cr->devices[w] = strdup(buf)))
            return -ENOMEM;
    }
    return 0;
}

static int start_pools(struct driver *d)
{
    struct orch_pool_callbacks cb = {.idle = on_idle, .report = on_report, .lost = on_lost};
    for (int i = 0; i < d->ncalls; i++) {
        struct callrt *cr = &d->calls[i];
        cr->call = i;
        cr->c = orch_plan_call(d->plan, i);
        if (cr->c->stmt < 0)
            continue; /* unused call: no pool */
        cr->s = orch_plan_stmt(d->plan, cr->c->stmt);
        cr->cpus = cr->c->opts.cpus > d->cpu_total ? d->cpu_total : cr->c->opts.cpus;
        cr->gpus = cr->c->opts.gpus;
        if (cr->gpus > 0 && d->gpu_total <= 0)
            return orch_error_set(ORCH_EPLAN,
                                  "call %s needs gpus=%g but no GPU was found "
                                  "(give the budget with --gpus N)",
                                  cr->c->name, cr->gpus);
        if (cr->gpus > d->gpu_total)
            cr->gpus = d->gpu_total;
        int rc;
        if (cr->gpus > 0 && (rc = assign_devices(d, cr)) < 0)
            return rc;
        struct orch_pool_config pc = {
            .exe = d->exe,
            .payload_dir = NULL,
            .plan = d->plan,
            .call = i,
            .nworkers = cr->c->opts.workers,
            .timeout_ms = cr->c->opts.timeout_ms,
            .max_init_failures = 3,
            .cuda_visible_devices = (const char *const *)cr->devices,
        };
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/payloads", d->job->dir);
        pc.payload_dir = dir;
        rc = orch_pool_new(d->base, &pc, &cb, d, &cr->pool);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static bool finished(const struct driver *d)
{
    if (d->to_send || !sources_done(d) || orch_prop_unsealed(d->prop) > 0)
        return false;
    for (int i = 0; i < d->ncalls; i++)
        if (d->calls[i].inflight)
            return false;
    return true;
}

/* Nothing runs, nothing is queued, nothing is left to admit, yet grains are unsealed:
 * they wait on facts that will never come. A bug, reported rather than waited on. */
static bool stuck(const struct driver *d)
{
    if (d->to_send || !sources_done(d) || orch_prop_unsealed(d->prop) == 0)
        return false;
    for (int i = 0; i < d->ncalls; i++)
        if (d->calls[i].inflight || d->calls[i].q.len)
            return false;
    return true;
}

/* Commits the turn. With machine durability the payloads that its facts name are made
 * durable first, with one sync for the whole turn (group commit): a committed Present item
 * never names a payload that a machine crash could lose (DESIGN §6, invariant 1). */
static int commit_turn(struct driver *d)
{
    int rc = orch_prop_flush(d->prop);
    if (rc == 0 && d->opts->durability == ORCH_DURABILITY_MACHINE)
        rc = orch_payload_sync(d->job->payloads);
    if (rc < 0) {
        orch_store_rollback(d->job->store);
        return rc;
    }
    return orch_store_commit(d->job->store);
}

static int turn(struct driver *d)
{
    /* A fatal error met while applying a report may have left the turn's transaction
     * half done: it is rolled back (by the caller), never committed. What it held was in
     * flight and runs again on resume. */
    if (d->fatal)
        return d->fatal;
    int rc = admit(d);
    if (rc == 0)
        rc = dispatch(d);
    if (rc == 0 && orch_store_in_txn(d->job->store))
        rc = commit_turn(d);
    if (rc < 0) {
        /* Nothing of this turn is committed; batches reserved in it must not run. */
        while (d->to_send) {
            struct batch *b = d->to_send;
            d->to_send = b->next;
            batch_free(b);
        }
        return rc;
    }
    send_batches(d);
    if (d->fatal)
        return d->fatal;
    /* send_batches may have failed batches: commit that too. */
    if (orch_store_in_txn(d->job->store))
        rc = commit_turn(d);
    return rc;
}

static void driver_free(struct driver *d, bool clean)
{
    for (int i = 0; i < d->ncalls; i++) {
        struct callrt *cr = &d->calls[i];
        if (cr->pool) {
            if (clean)
                orch_pool_close(cr->pool);
            else
                orch_pool_kill(cr->pool);
        }
        while (cr->inflight) {
            struct batch *b = cr->inflight;
            cr->inflight = b->next;
            batch_free(b);
        }
        free(cr->q.v);
        free(cr->idle);
        for (int w = 0; cr->devices && w < cr->c->opts.workers; w++)
            free(cr->devices[w]);
        free(cr->devices);
    }
    while (d->to_send) {
        struct batch *b = d->to_send;
        d->to_send = b->next;
        batch_free(b);
    }
    for (int i = 0; i < d->nsources; i++) {
        if (d->sources[i].globbed)
            globfree(&d->sources[i].g);
        if (d->sources[i].lines)
            fclose(d->sources[i].lines);
        free(d->sources[i].line);
    }
    free(d->sources);
    free(d->calls);
    free(d->order);
    orch_prop_inputs_free(&d->inputs);
    orch_prop_free(d->prop);
    if (d->tick)
        event_free(d->tick);
    if (d->sigint)
        event_free(d->sigint);
    if (d->sigterm)
        event_free(d->sigterm);
    if (d->base)
        event_base_free(d->base);
}

int orch_driver_run(struct orch_job *job, const struct orch_run_opts *opts,
                    struct orch_run_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    struct driver d = {.job = job, .plan = job->plan, .opts = opts, .stats = stats};
    d.started_ms = d.last_plain_ms = mono_ms();
    d.max_unsealed = opts->max_unsealed > 0 ? opts->max_unsealed : DEFAULT_MAX_UNSEALED;
    d.cpu_total = opts->cpus > 0 ? opts->cpus : (double)sysconf(_SC_NPROCESSORS_ONLN);
    if (d.cpu_total < 1)
        d.cpu_total = 1;
    d.gpu_total = opts->gpus > 0 ? opts->gpus : detect_gpus();
    d.live = opts->progress == ORCH_PROGRESS_LIVE ||
             (opts->progress == ORCH_PROGRESS_AUTO &&
              isatty(fileno(opts->out ? opts->out : stderr)));
    /* Workers exec this very binary through /proc/self/exe, which names the running image
     * even when its file was replaced or deleted since (a rebuild during a long job). */
    snprintf(d.exe, sizeof d.exe, "/proc/self/exe");
    /* Each turn allocates and frees much the same memory (SQLite's page cache, batches);
     * without this, glibc returns the top of the heap to the kernel after every turn and
     * faults it back in on the next: half of the driver's time, measured. */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 16 << 20);

    int rc = -ENOMEM;
    struct orch_prop_hooks hooks = {.ctx = &d, .ready = on_ready};
    d.ncalls = orch_plan_ncalls(d.plan);
    d.nsources = orch_plan_nsources(d.plan);
    d.calls = calloc((size_t)d.ncalls + 1, sizeof *d.calls);
    d.sources = calloc((size_t)d.nsources + 1, sizeof *d.sources);
    d.base = event_base_new();
    if (!d.calls || !d.sources || !d.base || (rc = call_order(&d)) < 0)
        goto out;
    /* A report's pipe may close under us (a dying worker): never die of SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    int64_t next_seq = 1;
    {
        sqlite3_stmt *q;
        if ((rc = orch_store_prepare(job->store, "SELECT next_ready_seq FROM job WHERE id = 1",
                                     &q)) < 0)
            goto out;
        if ((rc = orch_store_step(job->store, q)) == 1)
            next_seq = sqlite3_column_int64(q, 0);
        sqlite3_reset(q);
        if (rc < 0)
            goto out;
    }
    if ((rc = orch_prop_new(d.plan, job->store, &hooks, next_seq, &d.prop)) < 0)
        goto out;
    for (int i = 0; i < d.nsources; i++) {
        d.sources[i].src = orch_plan_source(d.plan, i);
        d.sources[i].domain = d.sources[i].src->domain;
        if ((rc = source_open(&d, &d.sources[i])) < 0)
            goto out;
    }
    /* Before any worker writes: payloads left by a stopped driver's last turn. */
    size_t reclaimed;
    if ((rc = orch_job_reclaim(job, &reclaimed)) < 0)
        goto out;
    stats->reclaimed += (int64_t)reclaimed;
    if ((rc = start_pools(&d)) < 0 || (rc = recover(&d)) < 0)
        goto out;
    d.sigint = evsignal_new(d.base, SIGINT, on_signal, &d);
    d.sigterm = evsignal_new(d.base, SIGTERM, on_signal, &d);
    d.tick = event_new(d.base, -1, EV_PERSIST, on_tick, &d);
    struct timeval second = {1, 0};
    if (!d.sigint || !d.sigterm || !d.tick || evsignal_add(d.sigint, NULL) ||
        evsignal_add(d.sigterm, NULL) || evtimer_add(d.tick, &second)) {
        rc = -ENOMEM;
        goto out;
    }
    int stuck_turns = 0;
    while ((rc = turn(&d)) == 0 && !d.interrupted) {
        if (finished(&d))
            break;
        stuck_turns = stuck(&d) ? stuck_turns + 1 : 0;
        if (stuck_turns > 3) {
            rc = orch_error_set(ORCH_ECORRUPT,
                                "%lld grains wait on facts that will never "
                                "come (internal error); the job is kept",
                                (long long)orch_prop_unsealed(d.prop));
            break;
        }
        event_base_loop(d.base, EVLOOP_ONCE);
    }
    if (rc == 0 && d.interrupted)
        rc = orch_error_set(-EINTR,
                            "interrupted; the job is kept: continue it with "
                            "`orch resume %s`",
                            job->dir);
    if (rc == 0) {
        rc = orch_store_job_set_status(job->store, ORCH_JOB_FINISHED);
    }
    progress(&d, true);
out:
    if (orch_store_in_txn(job->store))
        orch_store_rollback(job->store);
    stats->seconds = (double)(mono_ms() - d.started_ms) / 1000.0;
    driver_free(&d, rc == 0);
    if (rc == 0) { /* the pools are closed: reclaim what stale reports left */
        size_t late;
        if ((rc = orch_job_reclaim(job, &late)) == 0)
            stats->reclaimed += (int64_t)late;
    }
    return rc;
}

/* ---- summary --------------------------------------------------------------------------- */

int orch_driver_summary(struct orch_job *job, const struct orch_run_stats *stats, FILE *out)
{
    const orch_plan *p = job->plan;
    int np = orch_plan_nports(p);
    int64_t(*count)[ORCH_ITEM__COUNT] = calloc((size_t)np + 1, sizeof *count);
    if (!count)
        return -ENOMEM;
    sqlite3_stmt *q;
    int rc = orch_store_prepare(job->store,
                                "SELECT port_id, state, count(*) FROM item "
                                "GROUP BY port_id, state",
                                &q);
    while (rc == 0 && (rc = orch_store_step(job->store, q)) == 1) {
        int port = sqlite3_column_int(q, 0);
        int state = orch_item_state_parse((const char *)sqlite3_column_text(q, 1));
        if (port >= 0 && port < np && state >= 0)
            count[port][state] = sqlite3_column_int64(q, 2);
        rc = 0;
    }
    if (rc == 0 || rc == 1)
        sqlite3_reset(q);
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
                "%lld stale reports rejected, %lld orphaned payloads reclaimed, %.1fs\n",
                (long long)stats->committed, (long long)stats->batches,
                (long long)stats->attempts_failed, (long long)stats->stale,
                (long long)stats->reclaimed, stats->seconds);
    free(count);
    return 0;
}
