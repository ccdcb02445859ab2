/* fake_pool.c — engine/worker/pool.h without processes (fake_pool.h says what it does). */
#include "fake_pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "orch_payload.h"
#include "pool.h"

enum slot_state { EMPTY, STARTING, IDLE, BUSY };

struct orch_worker {
    orch_pool *p;
    int index;
    int pid;
    enum slot_state st;
    /* BUSY: its batches in fake_log.batch, in the order dispatched: batch[0] runs, batch[1]
     * (nb = 2) is queued behind it */
    int batch[ORCH_POOL_DEPTH];
    int nb;
};

struct orch_pool {
    struct event *pump; /* on the driver's base */
    int call;
    const struct orch_stmt *s;
    const char *name;
    orch_payload *store;
    int n;
    struct orch_worker *w;
    struct orch_pool_callbacks cb;
    void *ctx;
};

struct fake_log fake_log;

/* The open pools, by plan call index (fake_idle). */
static orch_pool *pools[FAKE_MAX_CALLS];

static fake_decide decide_fn;
static void *decide_ctx;
static void (*dispatch_fn)(void *ctx, const struct fake_batch *b);
static int next_pid = 1000;
/* fake_late_report: the batch and call of a pending late report (call < 0: none). */
static struct {
    int call;
    struct fake_batch b;
} late = {.call = -1};

void fake_reset(fake_decide decide, void *ctx)
{
    fake_log_free();
    memset(&fake_log, 0, sizeof fake_log);
    decide_fn = decide;
    decide_ctx = ctx;
    dispatch_fn = NULL;
    late.call = -1;
}

void fake_on_dispatch(void (*fn)(void *ctx, const struct fake_batch *b))
{
    dispatch_fn = fn;
}

void fake_log_free(void)
{
    for (int i = 0; i < fake_log.nbatch; i++)
        free(fake_log.batch[i].rec);
    free(fake_log.batch);
    fake_log.batch = NULL;
    fake_log.nbatch = fake_log.cbatch = 0;
    free(late.b.rec);
    late.b.rec = NULL;
}

void fake_late_report(int call, const struct fake_batch *batch)
{
    free(late.b.rec);
    late.b = *batch;
    late.b.rec = malloc((size_t)batch->nrec * sizeof *batch->rec);
    if (!late.b.rec)
        abort();
    memcpy(late.b.rec, batch->rec, (size_t)batch->nrec * sizeof *batch->rec);
    late.call = call;
}

void fake_value(const char *in, size_t in_len, const char *call, int k, char *out, size_t cap)
{
    int n = in ? snprintf(out, cap, "%.*s.%s", (int)in_len, in, call)
               : snprintf(out, cap, "%s", call);
    if (k > 0 && n >= 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, "#%d", k);
}

static void arm(orch_pool *p)
{
    static const struct timeval now = {0, 0};
    if (evtimer_add(p->pump, &now) < 0)
        abort();
}

static int alive(const orch_pool *p)
{
    int n = 0;
    for (int i = 0; i < p->n; i++)
        n += p->w[i].st != EMPTY;
    return n;
}

/* ---- answers ---------------------------------------------------------------------------- */

/* The pieces of an input an expand makes children of: its words (split at ' '). */
static int words(const char *in, size_t len, const char **at, size_t *n, int cap)
{
    int k = 0;
    for (size_t i = 0; i < len && k < cap;) {
        size_t j = i;
        while (j < len && in[j] != ' ')
            j++;
        if (j > i) {
            at[k] = in + i;
            n[k++] = j - i;
        }
        i = j + 1;
    }
    return k;
}

/* Answers record r OK into *a: a verdict (filter), or new payloads, one per output port of
 * each child (one child for a map, a word each for an expand). a->payload and a->size are
 * malloc'd (answers_free). */
static void answer_ok(orch_pool *p, const struct fake_rec *r, bool late_one,
                      struct orch_wire_answer *a)
{
    void *in = NULL;
    size_t in_len = 0;
    if (r->in0 && orch_payload_get(p->store, r->in0, &in, &in_len) != 0)
        abort();
    const char *piece[64] = {in};
    size_t piece_len[64] = {in_len};
    int nchild = 1, nout = p->s->nout;
    if (p->s->op == ORCH_OP_EXPAND)
        nchild = words(in, in_len, piece, piece_len, 64);
    if (p->s->op == ORCH_OP_FILTER)
        nout = 0;
    uint64_t *ids = calloc((size_t)(nchild * nout) + 1, sizeof *ids);
    uint64_t *sizes = calloc((size_t)(nchild * nout) + 1, sizeof *sizes);
    if (!ids || !sizes)
        abort();
    *a = (struct orch_wire_answer){.grain = r->grain,
                                   .generation = r->generation,
                                   .outcome = ORCH_WIRE_OK,
                                   .message = "",
                                   .nchild = (uint32_t)nchild,
                                   .nout = (uint32_t)nout,
                                   .payload = ids,
                                   .size = sizes};
    if (p->s->op == ORCH_OP_FILTER)
        a->outcome = in_len > 0 ? ORCH_WIRE_KEEP_TRUE : ORCH_WIRE_KEEP_FALSE;
    for (int c = 0; c < nchild; c++)
        for (int k = 0; k < nout; k++) {
            char v[512];
            fake_value(piece[c], piece_len[c], p->name, k, v, sizeof v);
            if (late_one)
                strncat(v, "!late", sizeof v - strlen(v) - 1);
            int at = c * nout + k;
            sizes[at] = strlen(v);
            if (orch_payload_put(p->store, v, sizes[at], &ids[at]) != 0)
                abort();
        }
    free(in);
}

/* The report of batch b: every record OK. */
static void report_ok(orch_pool *p, orch_worker *w, const struct fake_batch *b, bool late_one)
{
    struct orch_wire_answer *a = calloc((size_t)b->nrec, sizeof *a);
    if (!a)
        abort();
    for (int i = 0; i < b->nrec; i++)
        answer_ok(p, &b->rec[i], late_one, &a[i]);
    struct orch_wire_report rep = {.batch = b->id,
                                   .status = ORCH_WIRE_STATUS_OK,
                                   .message = "",
                                   .nrec = (uint32_t)b->nrec,
                                   .rec = a};
    p->cb.report(p->ctx, p, w, &rep);
    for (int i = 0; i < b->nrec; i++) {
        free((void *)a[i].payload);
        free((void *)a[i].size);
    }
    free(a);
}

/* w's running batch is answered: the one queued behind it runs; IDLE when none is. */
static void shift(orch_worker *w)
{
    for (int k = 1; k < w->nb; k++)
        w->batch[k - 1] = w->batch[k];
    if (--w->nb == 0)
        w->st = IDLE;
}

/* Answers the oldest batch that a worker of p runs, as the test decides. */
static void answer_one(orch_pool *p)
{
    orch_worker *w = NULL;
    for (int i = 0; i < p->n; i++)
        if (p->w[i].st == BUSY &&
            (!w || fake_log.batch[p->w[i].batch[0]].seq < fake_log.batch[w->batch[0]].seq))
            w = &p->w[i];
    if (!w)
        return;
    struct fake_batch *b = &fake_log.batch[w->batch[0]];
    b->how = decide_fn ? decide_fn(decide_ctx, b) : FAKE_OK;
    b->answered = true;
    fake_log.in_flight -= b->nrec;
    fake_log.answered += b->nrec;
    switch (b->how) {
    case FAKE_OK:
        shift(w);
        report_ok(p, w, b, false);
        break;
    case FAKE_FAILED: {
        shift(w);
        struct orch_wire_report rep = {.batch = b->id,
                                       .status = ORCH_WIRE_STATUS_FAILED,
                                       .message = "the fake failed the batch"};
        p->cb.report(p->ctx, p, w, &rep);
        break;
    }
    case FAKE_CRASH:
    case FAKE_TIMEOUT: {
        uint64_t queued = 0;
        if (w->nb > 1) { /* lost with it, never started */
            struct fake_batch *q = &fake_log.batch[w->batch[1]];
            q->answered = q->unrun = true;
            fake_log.in_flight -= q->nrec;
            fake_log.answered += q->nrec;
            queued = q->id;
        }
        w->st = EMPTY; /* its pid stays w's during the callback (pool.h) */
        w->nb = 0;
        fake_log.alive_now[p->call] = alive(p);
        p->cb.lost(p->ctx, p, w, b->id, queued,
                   b->how == FAKE_CRASH ? ORCH_LOSS_CRASH : ORCH_LOSS_TIMEOUT,
                   b->how == FAKE_CRASH ? "the fake worker crashed"
                                        : "batch ran past its timeout of 1s");
        break;
    }
    }
}

/* The pool's events: HELLOs first, then one answer; again at the next turn while work is
 * left. */
static void pump(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    orch_pool *p = arg;
    for (int i = 0; i < p->n; i++) {
        orch_worker *w = &p->w[i];
        if (w->st != STARTING)
            continue;
        w->st = IDLE;
        if (late.call == p->call) {
            late.call = -1;
            report_ok(p, w, &late.b, true);
        } else {
            p->cb.idle(p->ctx, p, w);
        }
    }
    answer_one(p);
    for (int i = 0; i < p->n; i++)
        if (p->w[i].st == BUSY || p->w[i].st == STARTING) {
            arm(p);
            break;
        }
}

/* ---- pool.h ----------------------------------------------------------------------------- */

int orch_pool_new(struct event_base *base, const struct orch_pool_config *cfg,
                  const struct orch_pool_callbacks *cb, void *ctx, orch_pool **out)
{
    const struct orch_call *c = orch_plan_call(cfg->plan, cfg->call);
    if (cfg->call >= FAKE_MAX_CALLS || c->stmt < 0 || cfg->nworkers < 1)
        return -EINVAL;
    orch_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->w = calloc((size_t)cfg->nworkers, sizeof *p->w)) ||
        !(p->pump = evtimer_new(base, pump, p))) {
        if (p)
            free(p->w);
        free(p);
        return -ENOMEM;
    }
    p->call = cfg->call;
    p->s = orch_plan_stmt(cfg->plan, c->stmt);
    p->name = c->name;
    p->store = cfg->store;
    p->n = cfg->nworkers;
    p->cb = *cb;
    p->ctx = ctx;
    for (int i = 0; i < p->n; i++)
        p->w[i] = (struct orch_worker){.p = p, .index = i};
    fake_log.pools_open++;
    pools[p->call] = p;
    *out = p;
    return 0;
}

int orch_pool_start(orch_pool *p, orch_worker **out)
{
    for (int i = 0; i < p->n; i++) {
        orch_worker *w = &p->w[i];
        if (w->st != EMPTY)
            continue;
        w->st = STARTING;
        w->pid = next_pid++;
        if (fake_log.started[p->call]++ == 0)
            fake_log.start_after[p->call] = fake_log.nbatch;
        fake_log.alive_now[p->call] = alive(p);
        if (alive(p) > fake_log.alive_peak[p->call])
            fake_log.alive_peak[p->call] = alive(p);
        arm(p);
        if (out)
            *out = w;
        return 0;
    }
    fake_log.over_start++;
    return -EBUSY;
}

int orch_pool_stop(orch_pool *p, orch_worker *w)
{
    if (w->st != IDLE)
        return -EBUSY;
    w->st = EMPTY;
    fake_log.stopped[p->call]++;
    fake_log.alive_now[p->call] = alive(p);
    return 0;
}

int orch_pool_dispatch(orch_pool *p, orch_worker *w, const struct orch_wire_batch *b)
{
    if (w->st != IDLE && !(w->st == BUSY && w->nb < ORCH_POOL_DEPTH)) {
        fake_log.bad_dispatch++;
        return -EBUSY;
    }
    if (b->id == 0 || b->nrec == 0)
        return -EINVAL;
    if (p->s->op != ORCH_OP_MAP && p->s->op != ORCH_OP_FILTER && p->s->op != ORCH_OP_EXPAND)
        return -EINVAL; /* fake_pool.h: no reduce, no aligned expand */
    if (fake_log.nbatch == fake_log.cbatch) {
        int cap = fake_log.cbatch ? 2 * fake_log.cbatch : 64;
        struct fake_batch *v = realloc(fake_log.batch, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        fake_log.batch = v;
        fake_log.cbatch = cap;
    }
    struct fake_batch *f = &fake_log.batch[fake_log.nbatch];
    *f = (struct fake_batch){.id = b->id,
                             .call = p->call,
                             .worker = w->index,
                             .queued = w->nb > 0,
                             .seq = fake_log.nbatch,
                             .nrec = (int)b->nrec};
    if (!(f->rec = calloc(b->nrec, sizeof *f->rec)))
        return -ENOMEM;
    for (uint32_t i = 0; i < b->nrec; i++) {
        const struct orch_wire_record *r = &b->rec[i];
        f->rec[i] = (struct fake_rec){
            .grain = r->grain,
            .generation = r->generation,
            .attempt = r->attempt,
            .in0 = r->nin > 0 && r->nval[0] > 0 && r->vals[0].present ? r->vals[0].payload : 0};
    }
    fake_log.in_flight += b->nrec;
    if (fake_log.in_flight > fake_log.in_flight_peak)
        fake_log.in_flight_peak = fake_log.in_flight;
    f->grains_in_flight = fake_log.in_flight;
    f->answered_before = fake_log.answered;
    if (w->nb > 0)
        for (int i = 0; i < p->n; i++)
            fake_log.queued_while_idle += p->w[i].st == IDLE;
    w->batch[w->nb++] = fake_log.nbatch++;
    if (w->nb > fake_log.held_peak)
        fake_log.held_peak = w->nb;
    w->st = BUSY;
    arm(p);
    if (dispatch_fn)
        dispatch_fn(decide_ctx, f);
    return 0;
}

static void pool_free(orch_pool *p)
{
    for (int i = 0; i < p->n; i++)
        fake_log.closed_busy += p->w[i].st == BUSY ? p->w[i].nb : 0;
    fake_log.alive_now[p->call] = 0;
    pools[p->call] = NULL;
    event_free(p->pump);
    free(p->w);
    free(p);
    fake_log.pools_open--;
}

void orch_pool_kill(orch_pool *p)
{
    pool_free(p);
}

void orch_pool_close(orch_pool *p)
{
    pool_free(p);
}

int orch_worker_pid(const orch_worker *w)
{
    return w->pid;
}

const char *orch_worker_host(const orch_worker *w)
{
    (void)w;
    return "fake";
}

const char *orch_worker_slurm_job(const orch_worker *w)
{
    (void)w;
    return "";
}

int orch_worker_index(const orch_worker *w)
{
    return w->index;
}

int fake_idle(int call)
{
    int n = 0;
    for (int i = 0; call >= 0 && call < FAKE_MAX_CALLS && pools[call] && i < pools[call]->n; i++)
        n += pools[call]->w[i].st == IDLE;
    return n;
}

int orch_worker_held(const orch_worker *w)
{
    return w->nb;
}

/* The fake pool's workers send no chunks: nothing to pause. */
void orch_pool_pause(orch_worker *w, bool pause)
{
    (void)w, (void)pause;
}

bool orch_worker_paused(const orch_worker *w)
{
    (void)w;
    return false;
}

void orch_pool_watch_starts(orch_pool *p, orch_pool_start_fn fn, void *ctx)
{
    (void)p, (void)fn, (void)ctx; /* no launcher here: no start to tell */
}

int orch_pool_take_back(orch_pool *p, orch_worker *w, uint64_t *batch)
{
    (void)p, (void)w;
    *batch = 0;
    return 0; /* a fake worker starts what it holds at once */
}

bool orch_pool_began(const orch_worker *w, int64_t *mono_ms)
{
    (void)w, (void)mono_ms;
    return false; /* nor does it say when: the driver dates it as it reads the report */
}

/* Nor do they ask for inputs: the fake pool takes no reduce (fake_pool.h). */
int orch_pool_send_inputs(orch_worker *w, const struct orch_wire_inputs *in)
{
    (void)w, (void)in;
    return -EPIPE;
}

int orch_pool_alive(const orch_pool *p)
{
    return alive(p);
}

int orch_pool_starting(const orch_pool *p)
{
    int n = 0;
    for (int i = 0; i < p->n; i++)
        n += p->w[i].st == STARTING;
    return n;
}

int orch_pool_failed(const orch_pool *p)
{
    (void)p;
    return 0;
}

int orch_pool_pending(const orch_pool *p, int64_t *since)
{
    (void)p;
    *since = 0;
    return 0; /* no remote workers */
}

const char *orch_pool_failure(const orch_pool *p)
{
    (void)p;
    return "";
}
