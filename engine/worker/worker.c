/* worker.c — the worker process, `orch __worker FD`: loads one call's UDF, runs batches
 * from the driver, writes their outputs to LMDB and reports payload ids (pool.h).
 *
 * The worker talks to one driver over one blocking socket and does one thing at a time:
 * read a frame, act, answer. It writes nothing to stdout (stdout is pointed at stderr so
 * that a UDF's stray printf cannot garble the driver's output) and reads nothing from
 * stdin (it is /dev/null). Exit status: 0 after the driver closed the socket (fini ran),
 * 1 after an init failure or a protocol error, 2 for a bad FD argument.
 */
#define _GNU_SOURCE
#include "pool.h"

#include "claim.h"
#include "feed.h"
#include "launch.h"
#include "orch_error.h"
#include "orch_payload.h"
#include "orch_udf_host.h"
#include "stream.h"
#include "wire.h"
#include "worker_runs.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct worker {
    int fd;
    struct orch__arena cfg_arena; /* holds cfg for the whole life of the process */
    struct orch_wire_config cfg;
    orch_payload *store;
    const struct orch_udf *udf;
    void *dl;    /* library handle, or NULL */
    void *state; /* the UDF's state, valid when inited */
    bool inited;
    struct orch_udf_answers ans;
    bool ans_ready;
    uint8_t *body; /* the last frame's body */
    size_t body_cap;
    struct orch_wire_buf out;
    char **too_big; /* the batch's records with an output over the payload store's limit:
                       [ans.n] messages, NULL for the others; NULL when none (too_big_check) */
    struct big_child *big; /* expand: the children with an output over the limit, in
                              (record, child) order; nbig of them (too_big_check) */
    size_t nbig;
    /* values mode (a remote worker): outputs go into the report, not the store */
    struct orch_wire_bytes *outv;
    struct orch_worker_stream stream; /* streaming expansions (stream.h) */
    struct orch_worker_feed feed;     /* fed reduces (feed.h) */
    volatile int in_batch; /* the watch thread's cue (remote_watch) */
    uint64_t *claim;       /* shared with the pool (claim.h), or NULL */
    uint32_t nbatch;       /* batches read: the seq of the last */
    bool remote;           /* started by orch_worker_remote_main */
};

/* ---- the socket ------------------------------------------------------------------------ */

/* Reads exactly n bytes. Returns n, fewer at end of file, or -errno. */
static ssize_t read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0)
            break;
        else if (errno != EINTR)
            return -errno;
    }
    return (ssize_t)got;
}

/* What a read of `want` bytes that gave n says: 1 when all came, 0 at end of input (the
 * driver closed the socket, also in the middle of a frame, or while our last frame was
 * unread: it is going away either way), or -1 after writing why to stderr. */
static int read_result(ssize_t n, size_t want)
{
    if (n == -ECONNRESET)
        return 0;
    if (n < 0) {
        fprintf(stderr, "orch worker %d: reading the socket: %s\n", (int)getpid(),
                strerror((int)-n));
        return -1;
    }
    return (size_t)n == want;
}

/* Reads one frame into w->body. Returns 1 with *f filled, else as read_result. */
static int read_frame(struct worker *w, struct orch_wire_frame *f)
{
    uint8_t hdr[ORCH_WIRE_HEADER];
    int rc = read_result(read_full(w->fd, hdr, sizeof hdr), sizeof hdr);
    if (rc <= 0)
        return rc;
    if (orch_wire_next(hdr, sizeof hdr, f) < 0) {
        fprintf(stderr, "orch worker %d: protocol error: %s\n", (int)getpid(),
                orch_error_detail());
        return -1;
    }
    if (orch__grow_n(&w->body, &w->body_cap, f->len, 1) < 0) {
        fprintf(stderr, "orch worker %d: out of memory for a frame of %zu bytes\n",
                (int)getpid(), f->len);
        return -1;
    }
    if ((rc = read_result(read_full(w->fd, w->body, f->len), f->len)) <= 0)
        return rc;
    f->body = w->body;
    return 1;
}

/* Sends w->out and empties it. Returns 0, or -errno (EPIPE: the driver closed). */
static int send_out(struct worker *w)
{
    int rc = orch_worker_send(w->fd, w->out.data, w->out.len);
    w->out.len = 0;
    return rc;
}

/* Sends INITFAIL with a printf-style message, or writes it to stderr when it cannot be
 * encoded (out of memory); returns the exit status 1. */
__attribute__((format(printf, 2, 3))) static int initfail(struct worker *w, const char *fmt,
                                                          ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    w->out.len = 0;
    if (orch_wire_put_initfail(&w->out, msg) == 0)
        send_out(w);
    else
        fprintf(stderr, "orch worker %d: %s\n", (int)getpid(), msg);
    return 1;
}

/* ---- init ------------------------------------------------------------------------------ */

static int resolve_udf(struct worker *w)
{
    const struct orch_wire_config *c = &w->cfg;
    switch (c->fn_kind) {
    case ORCH_FN_BUILTIN:
        if (orch_udf_builtin_get(c->function, &w->udf) < 0)
            return initfail(w, "%s", orch_error_detail());
        return 0;
    case ORCH_FN_LIBRARY:
        if (orch_udf_load_library(c->function, c->symbol, &w->udf, &w->dl) < 0)
            return initfail(w, "%s", orch_error_detail());
        return 0;
    case ORCH_FN_EXEC:
        w->udf = &orch_udf_exec;
        return 0;
    case ORCH_FN__COUNT:
        break;
    }
    /* orch_wire_get_config() refused any other kind. */
    (void)ORCH_NEVER(true);
    return initfail(w, "unknown function kind %d", (int)c->fn_kind);
}

/* Reads CONFIG, opens the payload store, loads and inits the UDF, says HELLO. Returns 0,
 * or the exit status (INITFAIL was sent when there was someone to send it to). */
static int worker_init(struct worker *w)
{
    struct orch_wire_frame f;
    int rc = read_frame(w, &f);
    if (rc == 0 && w->remote)
        fprintf(stderr, "orch worker %d: the driver ended the connection before sending "
                        "its configuration\n",
                (int)getpid());
    if (rc <= 0)
        return 1;
    if (orch_wire_get_config(&f, &w->cfg_arena, &w->cfg) < 0)
        return initfail(w, "protocol error: %s", orch_error_detail());
    const struct orch_wire_config *c = &w->cfg;

    /* Commits are not synced here: the driver makes every payload of a turn durable with
     * one sync before it commits the reports that name them (group commit). A crash of
     * this process loses nothing: LMDB's commit is in the page cache either way. */
    struct orch_payload_opts popts;
    orch_payload_job_opts(&popts);
    rc = c->values ? 0 : orch_payload_open(c->payload_dir, &popts, &w->store);
    if (rc < 0)
        return initfail(w, "cannot open the payload store: %s",
                        *orch_error_detail() ? orch_error_detail() : orch_strerror(rc));
    rc = resolve_udf(w);
    if (rc != 0)
        return rc;

    char err[1024] = "";
    struct orch_udf_config uc = {
        .call = c->call,
        .function = c->function,
        .op = c->op,
        .nin = c->nin,
        .nout = c->nout,
        .nargs = c->nargs,
        .arg_keys = c->arg_keys,
        .arg_values = c->arg_values,
        .worker = (int)c->worker,
        .error = err,
        .error_size = sizeof err,
    };
    orch_error_clear();
    void *state = NULL;
    rc = w->udf->init ? w->udf->init(&uc, &state) : 0;
    if (rc != 0) {
        if (err[0])
            return initfail(w, "%s", err);
        if (*orch_error_detail())
            return initfail(w, "%s", orch_error_detail());
        return initfail(w, "udf %s: init failed: %s", c->call, strerror(rc < 0 ? -rc : rc));
    }
    w->state = state;
    w->inited = true;

    rc = orch_udf_answers_init(&w->ans, c->call, c->op, c->nout);
    if (rc < 0)
        return initfail(w, "udf %s: cannot prepare its answers: %s", c->call, strerror(-rc));
    w->ans_ready = true;
    /* Streaming expansions (stream.h): complete children go while run() goes on. */
    w->stream = (struct orch_worker_stream){
        .fd = w->fd,
        .store = w->store,
        .cfg = &w->cfg,
        .max_value = w->store ? orch_payload_max_value(w->store) : 0};
    orch_worker_stream_install(&w->stream, &w->ans);

    struct orch_wire_hello h = {.version = ORCH_WIRE_VERSION, .pid = (uint32_t)getpid()};
    rc = orch_wire_put_hello(&w->out, &h);
    if (rc < 0) {
        fprintf(stderr, "orch worker %d: cannot encode HELLO: %s\n", (int)getpid(),
                strerror(-rc));
        return 1;
    }
    return send_out(w) < 0 ? 1 : 0;
}

/* ---- one batch ------------------------------------------------------------------------- */

static enum orch_wire_outcome wire_outcome(enum orch_udf_outcome o)
{
    switch (o) {
    case ORCH_UDF_OK:
        return ORCH_WIRE_OK;
    case ORCH_UDF_DROP:
        return ORCH_WIRE_DROP;
    case ORCH_UDF_KEEP_TRUE:
        return ORCH_WIRE_KEEP_TRUE;
    case ORCH_UDF_KEEP_FALSE:
        return ORCH_WIRE_KEEP_FALSE;
    case ORCH_UDF_GROUP_FAILURE:
        return ORCH_WIRE_GROUP_FAILURE;
    case ORCH_UDF_RECORD_FAILURE:
        return ORCH_WIRE_RECORD_FAILURE;
    case ORCH_UDF_NONE:
    case ORCH_UDF_OUTCOME__COUNT:
        break;
    }
    /* orch_udf_answers_finish() turned every unanswered record into a RecordFailure. */
    (void)ORCH_NEVER(true);
    return ORCH_WIRE_RECORD_FAILURE;
}

static bool is_expand(enum orch_udf_op op)
{
    return op == ORCH_UDF_OP_EXPAND || op == ORCH_UDF_OP_EXPAND_ALIGNED;
}

/* A child of an expansion with an output over the payload store's limit: it fails alone. */
struct big_child {
    size_t rec, child;
    char *msg;
};

/* Why the outputs of answer a cannot be stored (too_big_check), or NULL. */
static const char *too_big_of(const struct worker *w, const struct orch_udf_answer *a)
{
    return w->too_big ? w->too_big[a - w->ans.rec] : NULL;
}

/* The output values of answer a, in report order (child by child, port by port): *vals and
 * *n; none unless it is OK and storable. */
static void answer_values(const struct worker *w, const struct orch_udf_answer *a,
                          const struct orch_udf_out **vals, size_t *n)
{
    *vals = NULL;
    *n = 0;
    if (a->outcome != ORCH_UDF_OK || too_big_of(w, a))
        return;
    if (is_expand(w->cfg.op)) {
        *vals = a->children;
        *n = a->nchildren * w->cfg.nout;
    } else {
        *vals = a->values;
        *n = w->cfg.nout;
    }
}

/* Everything a batch allocates, freed in one place. */
struct batch_mem {
    struct orch_udf_record *recs;
    struct orch_udf_input *ins;
    struct orch_udf_value *vals;
    struct orch_iov *iov;
    uint64_t *ids, *sizes; /* sizes: of the values stored, slot by slot as ids */
    struct orch_wire_answer *answers;
    struct orch_wire_failed_child *failed;
    uint64_t *hash; /* plain expand: the children's hashes, answer by answer */
    void *inputs;   /* a streaming expansion: its inputs, copied (orch_worker_stream_detach) */
};

static void batch_mem_free(struct batch_mem *m)
{
    free(m->recs);
    free(m->ins);
    free(m->vals);
    free(m->iov);
    free(m->ids);
    free(m->sizes);
    free(m->answers);
    free(m->failed);
    free(m->hash);
    free(m->inputs);
}


/* Builds the UDF's records in m, their values pointing into r (zero-copy). Returns 0, or
 * -1 with the reason in msg, and rep->status set to STORAGE when the store failed us (not
 * the batch's fault). */
static int build_records(struct worker *w, const struct orch_wire_batch *b,
                         orch_payload_rtxn *r, struct batch_mem *m,
                         struct orch_wire_report *rep, char *msg, size_t msgsz)
{
    uint32_t nin = w->cfg.nin;
    size_t total = 0;
    for (uint32_t i = 0; i < b->nrec; i++) {
        /* orch_pool_dispatch() refuses such a batch; kept because the lists below are
         * indexed by nin. */
        if (ORCH_NEVER(b->rec[i].nin != nin)) {
            snprintf(msg, msgsz,
                     "record %" PRIu32 " of batch %" PRIu64 " has %" PRIu32
                     " inputs, the call takes %" PRIu32,
                     i, b->id, b->rec[i].nin, nin);
            return -1;
        }
        for (uint32_t j = 0; j < nin; j++)
            total += b->rec[i].nval[j];
    }
    m->recs = calloc(b->nrec ? b->nrec : 1, sizeof *m->recs);
    m->ins = calloc((size_t)b->nrec * nin + 1, sizeof *m->ins);
    m->vals = calloc(total + 1, sizeof *m->vals);
    if (!m->recs || !m->ins || !m->vals) {
        snprintf(msg, msgsz, "out of memory for a batch of %" PRIu32 " records", b->nrec);
        return -1;
    }
    struct orch_udf_input *in = m->ins;
    struct orch_udf_value *v = m->vals;
    for (uint32_t i = 0; i < b->nrec; i++) {
        const struct orch_wire_record *wr = &b->rec[i];
        const struct orch_wire_value *wv = wr->vals;
        m->recs[i] = (struct orch_udf_record){.grain_id = wr->grain,
                                              .generation = wr->generation,
                                              .attempt = wr->attempt,
                                              .in = in};
        for (uint32_t j = 0; j < nin; j++, in++) {
            in->n = wr->nval[j];
            in->v = v;
            for (uint32_t k = 0; k < wr->nval[j]; k++, v++, wv++) {
                if (!wv->present) {
                    *v = (struct orch_udf_value){NULL, 0, 0};
                    continue;
                }
                const void *data = wv->data;
                size_t len = wv->len;
                int rc = b->values ? 0 : orch_payload_read(r, wv->payload, &data, &len);
                if (rc == ORCH_ENOTFOUND) {
                    snprintf(msg, msgsz,
                             "payload %" PRIu64 " (input %" PRIu32 " of grain %" PRIu64
                             ") is not in the payload store",
                             wv->payload, j + 1, wr->grain);
                    return -1;
                }
                if (rc < 0) {
                    snprintf(msg, msgsz, "reading payload %" PRIu64 ": %s", wv->payload,
                             orch_error_detail());
                    rep->status = ORCH_WIRE_STATUS_STORAGE;
                    return -1;
                }
                *v = (struct orch_udf_value){data, len, 1};
            }
        }
    }
    return 0;
}

static void too_big_free(struct worker *w)
{
    for (size_t i = 0; w->too_big && i < w->ans.n; i++)
        free(w->too_big[i]);
    free(w->too_big);
    w->too_big = NULL;
    for (size_t k = 0; k < w->nbig; k++)
        free(w->big[k].msg);
    free(w->big);
    w->big = NULL;
    w->nbig = 0;
}

/* Why child c of record i failed: the UDF said so (orch_udf_fail_child), or one of its
 * outputs is over the store's limit (too_big_check); NULL when it did not fail. */
static const char *child_failure(const struct worker *w, size_t i, size_t c)
{
    const struct orch_udf_answer *a = &w->ans.rec[i];
    if (a->child_msg != NULL && a->child_msg[c] != NULL)
        return a->child_msg[c];
    size_t lo = 0, hi = w->nbig; /* w->big is sorted by (rec, child) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct big_child *b = &w->big[mid];
        if (b->rec < i || (b->rec == i && b->child < c))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < w->nbig && w->big[lo].rec == i && w->big[lo].child == c ? w->big[lo].msg : NULL;
}

/* Whether value j of record i's answer (answer_values order) goes into the store: it was
 * given, and for an expand its child did not fail. */
static bool value_stored(const struct worker *w, size_t i, const struct orch_udf_out *vals,
                         size_t j)
{
    return vals[j].set && !(is_expand(w->cfg.op) && child_failure(w, i, j / w->cfg.nout));
}

/* An output longer than the payload store can hold (orch_payload_max_value(): 4 GiB - 1)
 * is its record's fault, not the store's: the record is reported as a RecordFailure that
 * names the size and the limit, and none of its outputs is stored; for an expand, only the
 * child that holds it fails (a failed child, as orch_udf_fail_child), and its siblings are
 * stored. Left to the store, the put would fail the whole batch as a storage error (status
 * STORAGE), which stops the job at every resume. Fills w->too_big and w->big; the answers
 * themselves are the collector's and are not changed. Returns 0, or -1 with the reason in
 * msg (out of memory). */
static int expand_too_big(struct worker *w, size_t max)
{
    size_t nout = w->cfg.nout, cap = 0;
    for (size_t i = 0; i < w->ans.n; i++) {
        const struct orch_udf_answer *a = &w->ans.rec[i];
        for (size_t c = 0; a->outcome == ORCH_UDF_OK && c < a->nchildren; c++) {
            const struct orch_udf_out *v = &a->children[c * nout];
            size_t p = 0;
            while (p < nout && !(v[p].set && v[p].len > max))
                p++;
            if (p == nout || child_failure(w, i, c))
                continue;
            char text[256];
            orch_worker_too_big_msg(text, sizeof text, p, v[p].len, max);
            if (orch__grow_n(&w->big, &cap, w->nbig + 1, sizeof *w->big) < 0)
                return -1;
            if ((w->big[w->nbig].msg = strdup(text)) == NULL)
                return -1;
            w->big[w->nbig].rec = i;
            w->big[w->nbig++].child = c;
        }
    }
    return 0;
}

static int too_big_check(struct worker *w, char *msg, size_t msgsz)
{
    size_t max = w->cfg.values ? (size_t)w->cfg.max_value : orch_payload_max_value(w->store);
    char **why = NULL;
    if (is_expand(w->cfg.op)) {
        if (expand_too_big(w, max) < 0) {
            too_big_free(w);
            snprintf(msg, msgsz, "out of memory checking the outputs' sizes");
            return -1;
        }
        return 0;
    }
    for (size_t i = 0; i < w->ans.n; i++) {
        const struct orch_udf_out *vals;
        size_t n, j = 0;
        answer_values(w, &w->ans.rec[i], &vals, &n);
        while (j < n && !(vals[j].set && vals[j].len > max))
            j++;
        if (j == n)
            continue;
        char text[256];
        snprintf(text, sizeof text,
                 "output %zu is %zu bytes, over the payload store's limit of %zu bytes per value",
                 j + 1, vals[j].len, max);
        if ((!why && !(why = calloc(w->ans.n, sizeof *why))) || !(why[i] = strdup(text))) {
            w->too_big = why;
            too_big_free(w);
            snprintf(msg, msgsz, "out of memory checking the outputs' sizes");
            return -1;
        }
    }
    w->too_big = why;
    return 0;
}

/* Fills answer i of the report but its outputs (the caller points o->payload or o->values
 * at them); *fpos is the next free entry of m->failed. Returns true when the answer has
 * outputs (OK, and storable). */
static bool fill_answer(struct worker *w, const struct orch_wire_batch *b, uint32_t i,
                        struct batch_mem *m, size_t *fpos)
{
    const struct orch_udf_answer *a = &w->ans.rec[i];
    struct orch_wire_answer *o = &m->answers[i];
    o->grain = b->rec[i].grain;
    o->generation = b->rec[i].generation;
    o->outcome = wire_outcome(a->outcome);
    o->message = a->msg ? a->msg : "";
    if (too_big_of(w, a)) {
        o->outcome = ORCH_WIRE_RECORD_FAILURE;
        o->message = too_big_of(w, a);
        return false;
    }
    if (a->outcome != ORCH_UDF_OK)
        return false;
    o->nout = w->cfg.nout;
    o->first = is_expand(w->cfg.op) ? (uint32_t)a->base : 0;
    o->nchild = is_expand(w->cfg.op) ? (uint32_t)a->nchildren : 1;
    o->failed = m->failed + *fpos;
    for (size_t c = 0; is_expand(w->cfg.op) && c < a->nchildren; c++) {
        const char *why = child_failure(w, i, c);
        if (why != NULL)
            m->failed[(*fpos)++] = (struct orch_wire_failed_child){(uint32_t)c, why};
    }
    o->nfailed = (uint32_t)(m->failed + *fpos - o->failed);
    return true;
}

/* Values mode: the report carries the output values themselves (wire.h), answer by answer
 * in answer_values order, not set where a local worker's id would be 0. */
static int remote_values(struct worker *w, const struct orch_wire_batch *b, struct batch_mem *m,
                         struct orch_wire_report *rep, size_t total, char *msg, size_t msgsz)
{
    free(w->outv);
    w->outv = calloc(total + 1, sizeof *w->outv);
    if (!w->outv) {
        snprintf(msg, msgsz, "out of memory for the outputs of batch %" PRIu64, b->id);
        return -1;
    }
    size_t t = 0, fpos = 0;
    for (uint32_t i = 0; i < b->nrec; i++) {
        const struct orch_udf_out *vals;
        size_t n;
        answer_values(w, &w->ans.rec[i], &vals, &n);
        if (!fill_answer(w, b, i, m, &fpos))
            continue;
        m->answers[i].values = w->outv + t;
        for (size_t j = 0; j < n; j++, t++)
            if (value_stored(w, i, vals, j))
                w->outv[t] = (struct orch_wire_bytes){vals[j].data, vals[j].len, 1};
    }
    rep->values = 1;
    rep->nrec = b->nrec;
    rep->rec = m->answers;
    return 0;
}

/* Writes every output value in one transaction and fills the report's answers. Returns 0,
 * or -1 with the reason in msg. */
static int store_outputs(struct worker *w, const struct orch_wire_batch *b, struct batch_mem *m,
                         struct orch_wire_report *rep, char *msg, size_t msgsz)
{
    const struct orch_udf_answers *ans = &w->ans;
    size_t total = 0, nfailed = 0;
    for (uint32_t i = 0; i < b->nrec; i++) {
        const struct orch_udf_out *vals;
        size_t n;
        answer_values(w, &ans->rec[i], &vals, &n);
        total += n;
        for (size_t c = 0; is_expand(w->cfg.op) && c < ans->rec[i].nchildren; c++)
            nfailed += child_failure(w, i, c) != NULL;
    }
    m->iov = calloc(total + 1, sizeof *m->iov);
    m->ids = calloc(total + 1, sizeof *m->ids);
    m->sizes = calloc(total + 1, sizeof *m->sizes);
    m->answers = calloc(b->nrec ? b->nrec : 1, sizeof *m->answers);
    m->failed = calloc(nfailed + 1, sizeof *m->failed);
    if (!m->iov || !m->ids || !m->sizes || !m->answers || !m->failed) {
        snprintf(msg, msgsz, "out of memory for the outputs of batch %" PRIu64, b->id);
        return -1;
    }
    /* A failed child's values are not stored (value_stored). */
    size_t k = 0;
    for (uint32_t i = 0; i < b->nrec; i++) {
        const struct orch_udf_out *vals;
        size_t n;
        answer_values(w, &ans->rec[i], &vals, &n);
        for (size_t j = 0; j < n; j++)
            if (value_stored(w, i, vals, j))
                m->iov[k++] = (struct orch_iov){vals[j].data, vals[j].len};
    }
    size_t nset = k;
    if (w->cfg.values) /* the driver stores them (remote_values) */
        return remote_values(w, b, m, rep, total, msg, msgsz);
    int rc = orch_payload_put_many(w->store, m->iov, nset, m->ids);
    if (rc < 0) {
        snprintf(msg, msgsz, "storing %zu outputs: %s", total,
                 *orch_error_detail() ? orch_error_detail() : orch_strerror(rc));
        /* Not the batch's fault: retrying it cannot help, so the driver must stop. */
        rep->status = ORCH_WIRE_STATUS_STORAGE;
        return -1;
    }
    /* Spread the nset ids over all total slots, 0 where a value was not stored; from the
     * end, so that in place no id is overwritten before it moves (its slot >= its index). */
    {
        size_t j = nset, t = total;
        for (uint32_t i = b->nrec; i-- > 0;) {
            const struct orch_udf_out *vals;
            size_t n;
            answer_values(w, &ans->rec[i], &vals, &n);
            for (size_t v = n; v-- > 0;) {
                bool stored = value_stored(w, i, vals, v);
                m->ids[--t] = stored ? m->ids[--j] : 0;
                m->sizes[t] = stored ? vals[v].len : 0;
            }
        }
    }
    k = 0;
    size_t f = 0;
    for (uint32_t i = 0; i < b->nrec; i++) {
        if (!fill_answer(w, b, i, m, &f))
            continue;
        struct orch_wire_answer *o = &m->answers[i];
        o->payload = m->ids + k;
        o->size = m->sizes + k;
        k += (size_t)o->nchild * o->nout;
    }
    rep->nrec = b->nrec;
    rep->rec = m->answers;
    return 0;
}

/* child_failure for orch_worker_child_hashes. */
static const char *failure_of(void *w, size_t i, size_t c)
{
    return child_failure(w, i, c);
}

/* Runs batch b and leaves its REPORT in w->out. Returns 0, or -ENOMEM when not even a
 * report could be encoded. */
static int run_batch(struct worker *w, const struct orch_wire_batch *b)
{
    char msg[1024] = "";
    struct batch_mem m = {0};
    struct orch_wire_report rep = {.batch = b->id,
                                   .status = ORCH_WIRE_STATUS_FAILED,
                                   .message = msg,
                                   .values = w->cfg.values};
    orch_payload_rtxn *r = NULL;
    int rc = w->cfg.values ? 0 : orch_payload_read_begin(w->store, &r);
    if (rc < 0) {
        /* No reader slot (-EUSERS), or a broken store: a limit or fault of ours, never a
         * failure of the user's records; the driver stops and the batch runs on resume. */
        snprintf(msg, sizeof msg, "cannot read the inputs of batch %" PRIu64 ": %s", b->id,
                 orch_error_detail());
        rep.status = ORCH_WIRE_STATUS_STORAGE;
        goto report;
    }
    if (build_records(w, b, r, &m, &rep, msg, sizeof msg) < 0)
        goto report;
    if (w->ans.stream.max_children > 0 && r != NULL) {
        /* A streaming expansion writes its chunks while run() reads its inputs: they are
         * copied out of the snapshot, which ends, so that a chunk's write may grow the
         * map (stream.h). */
        if (orch_worker_stream_detach(b, m.vals, &m.inputs) < 0) {
            snprintf(msg, sizeof msg, "out of memory copying the inputs of batch %" PRIu64,
                     b->id);
            goto report;
        }
        orch_payload_read_end(r);
        r = NULL;
    }
    struct orch_udf_batch ub = {.n = b->nrec, .rec = m.recs};
    w->stream.b = b;
    rc = orch_udf_answers_reset(&w->ans, &ub);
    if (rc < 0) {
        snprintf(msg, sizeof msg, "out of memory for the answers of %" PRIu32 " records",
                 b->nrec);
        goto report;
    }
    rc = orch_worker_run_parts(w->udf, w->state, &ub, w->cfg.batch);
    if (rc != 0) {
        const char *e = orch_udf_answers_error(&w->ans);
        if (*e)
            snprintf(msg, sizeof msg, "%s", e);
        else
            snprintf(msg, sizeof msg, "udf %s failed: %s", w->cfg.call,
                     strerror(rc < 0 ? -rc : rc));
        goto report;
    }
    rc = orch_udf_answers_finish(&w->ans);
    if (rc < 0) {
        snprintf(msg, sizeof msg, "out of memory closing the answers");
        goto report;
    }
    /* End the snapshot before writing: a write that must grow the map fails while this
     * process holds a reader. The answers are copies, so nothing points into it now. */
    orch_payload_read_end(r);
    r = NULL;
    if (too_big_check(w, msg, sizeof msg) < 0 ||
        store_outputs(w, b, &m, &rep, msg, sizeof msg) < 0)
        goto report;
    if (w->cfg.op == ORCH_UDF_OP_EXPAND &&
        orch_worker_child_hashes(&w->ans, m.answers, failure_of, w, &m.hash) < 0) {
        snprintf(msg, sizeof msg, "out of memory for the hashes of the children");
        rep.nrec = 0; /* an attempt failure; its stored outputs are orphans, reclaimed */
        goto report;
    }
    rep.status = ORCH_WIRE_STATUS_OK;
    rep.message = "";
report:
    orch_payload_read_end(r);
    assert(rep.status == ORCH_WIRE_STATUS_OK || rep.nrec == 0); /* store_outputs sets nrec
                                                                   last, on success */
    w->out.len = 0;
    rc = orch_wire_put_report(&w->out, &rep);
    if (rc == -E2BIG) {
        struct orch_wire_report big = {.batch = b->id,
                                       .status = ORCH_WIRE_STATUS_FAILED,
                                       .message = msg,
                                       .values = w->cfg.values};
        snprintf(msg, sizeof msg, "the report of batch %" PRIu64 " is over %zu bytes", b->id,
                 ORCH_WIRE_MAX_BODY);
        rc = orch_wire_put_report(&w->out, &big);
    }
    batch_mem_free(&m);
    too_big_free(w);
    return rc;
}

/* Serves batches until the driver closes the socket. Returns the exit status. */
static int worker_loop(struct worker *w)
{
    w->feed = (struct orch_worker_feed){.fd = w->fd, .read = read_frame, .w = w};
    for (;;) {
        struct orch_wire_frame f;
        bool eof = false;
        int rc = orch_worker_feed_unstash(&w->feed, &f) ? 1 : read_frame(w, &f);
        if (rc == 0)
            return 0;
        if (rc < 0)
            return 1;
        struct orch__arena a = {0};
        struct orch_wire_batch b;
        rc = orch_wire_get_batch(&f, &a, &b);
        if (rc == 0 && b.values != w->cfg.values)
            rc = orch_error_set(-EPROTO, "a batch %s values for a %s worker",
                                b.values ? "with" : "without", w->cfg.values ? "remote" : "local");
        if (rc < 0) {
            fprintf(stderr, "orch worker %d: protocol error: %s\n", (int)getpid(),
                    orch_error_detail());
            orch__arena_free(&a);
            return 1;
        }
        if (!orch_claim_start(w->claim, ++w->nbatch)) { /* taken back (claim.h) */
            orch__arena_free(&a);
            continue;
        }
        if (orch_worker_fed(&b) && (orch_worker_feed(&w->feed, &b, &eof) < 0 || eof)) {
            orch__arena_free(&a);
            return eof ? 0 : 1;
        }
        w->in_batch = 1;
        rc = run_batch(w, &b);
        w->in_batch = 0;
        orch_worker_feed_free(&w->feed);
        orch__arena_free(&a);
        if (rc < 0) {
            fprintf(stderr, "orch worker %d: cannot encode a report: %s\n", (int)getpid(),
                    strerror(-rc));
            return 1;
        }
        if (send_out(w) < 0)
            return 0; /* the driver closed the socket while we worked: we are done */
    }
}

static void worker_free(struct worker *w)
{
    if (w->inited && w->udf->fini)
        w->udf->fini(w->state);
    if (w->ans_ready)
        orch_udf_answers_free(&w->ans);
    orch_udf_unload_library(w->dl);
    orch_payload_close(w->store);
    orch__arena_free(&w->cfg_arena);
    orch_wire_buf_free(&w->out);
    orch_worker_stream_free(&w->stream);
    orch_worker_feed_close(&w->feed);
    free(w->body);
    free(w->outv);
    close(w->fd);
}

/* Points stdin at /dev/null and stdout at stderr. */
static void quiet_stdio(void)
{
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nul > STDIN_FILENO) { /* 0: stdin was closed, and is /dev/null now */
        dup2(nul, STDIN_FILENO);
        close(nul);
    }
    fflush(stdout);
    dup2(STDERR_FILENO, STDOUT_FILENO);
}

/* A remote worker's watch (values mode): its driver may be gone while a batch runs for
 * minutes (killed, its machine lost). A local worker dies with it (PR_SET_PDEATHSIG); a
 * remote one learns it from its connection: this thread waits for the peer's end of the
 * stream and, if a batch is running then, ends the process at once (its step with it).
 * Between batches the main thread sees the end itself and runs the UDF's fini. The driver
 * may send the next batch while one runs (pool.h), but this thread asks for POLLRDHUP only:
 * data does not wake it, the end of the stream does. */
static void *remote_watch(void *arg)
{
    struct worker *w = arg;
    for (;;) {
        struct pollfd pfd = {.fd = w->fd, .events = POLLRDHUP};
        int n = poll(&pfd, 1, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
            if (w->in_batch) {
                static const char msg[] = "orch worker: the driver's connection ended "
                                          "during a batch; stopping\n";
                ssize_t k = write(STDERR_FILENO, msg, sizeof msg - 1);
                (void)k;
                _exit(1);
            }
            return NULL;
        }
    }
}

static int worker_run(struct worker *w)
{
    int status = worker_init(w);
    if (status == 0 && w->cfg.values) {
        pthread_t t;
        if (pthread_create(&t, NULL, remote_watch, w) == 0)
            pthread_detach(t);
    }
    if (status == 0)
        status = worker_loop(w);
    worker_free(w);
    return status;
}

int orch_worker_remote_main(const char *addr, uint64_t token)
{
    quiet_stdio();
    int fd = orch_launch_connect(addr, token);
    if (fd < 0)
        return 1;
    /* Static, not on this stack: the watch thread may still look at it while the process
     * exits (a frame that returned would be reused under it). */
    static struct worker w;
    w.fd = fd;
    w.remote = true;
    return worker_run(&w);
}

int orch_worker_main(int fd)
{
    int flags = fd > STDERR_FILENO ? fcntl(fd, F_GETFL) : -1;
    if (flags < 0) {
        fprintf(stderr, "orch __worker: %d is not an open socket\n", fd);
        return 2;
    }
    /* Blocking I/O; and nothing this process starts (an exec UDF) inherits the socket,
     * or the driver would not see EOF when this process dies. */
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    quiet_stdio();

    struct worker w = {.fd = fd, .claim = orch_claim_map(ORCH_WORKER_CLAIM_FD)};
    return worker_run(&w);
}
