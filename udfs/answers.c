/* answers.c — the host collector: records what a UDF answered for each record of a batch.
 *
 * The collector is the host_ops vtable of orch_udf.h. Every call checks the rules of the
 * ABI ("Records and answers") and either changes exactly one record's answer or returns
 * -EINVAL / -ENOMEM and changes nothing. Per record, the answer moves through:
 *
 *     NONE --emit/child/fail_child/no_children--> OK --(emits, children)--> OK
 *     NONE --keep--> KEEP_TRUE | KEEP_FALSE        NONE --drop--> DROP
 *     any but a failure --fail_record/fail_group--> RECORD_FAILURE | GROUP_FAILURE
 *
 * finish() then closes the batch: NONE and incomplete OKs become RecordFailures.
 */
#include "orch_udf_host.h"
#include "support.h"

#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *orch_udf_outcome_name(enum orch_udf_outcome o)
{
    static const char *const names[] = {
#define ORCH_UDF_OUTCOME_NAME(name, text) text,
        ORCH_UDF_OUTCOMES(ORCH_UDF_OUTCOME_NAME)
#undef ORCH_UDF_OUTCOME_NAME
    };
    if ((unsigned)o >= ORCH_UDF_OUTCOME__COUNT)
        return "?";
    return names[o];
}

const char *orch_udf_op_name(enum orch_udf_op op)
{
    switch (op) {
    case ORCH_UDF_OP_MAP:
        return "map";
    case ORCH_UDF_OP_EXPAND:
        return "expand";
    case ORCH_UDF_OP_EXPAND_ALIGNED:
        return "expand aligned";
    case ORCH_UDF_OP_FILTER:
        return "filter";
    case ORCH_UDF_OP_REDUCE:
        return "reduce";
    }
    return "?";
}

static bool is_expand(enum orch_udf_op op)
{
    return op == ORCH_UDF_OP_EXPAND || op == ORCH_UDF_OP_EXPAND_ALIGNED;
}

static bool is_failure(enum orch_udf_outcome o)
{
    return o == ORCH_UDF_RECORD_FAILURE || o == ORCH_UDF_GROUP_FAILURE;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void out_clear(struct orch_udf_out *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].data);
}

/* Returns the answer to its NONE state, freeing what it held. */
static void answer_clear(struct orch_udf_answer *r, size_t nout)
{
    if (r->values != NULL)
        out_clear(r->values, nout);
    free(r->values);
    if (r->children != NULL)
        out_clear(r->children, r->nchildren * nout);
    free(r->children);
    if (r->child_msg != NULL)
        for (size_t c = 0; c < r->nchildren; c++)
            free(r->child_msg[c]);
    free(r->child_msg);
    free(r->msg);
    memset(r, 0, sizeof *r);
}

/* The record i, or NULL when the collector does not take answers for it. */
static struct orch_udf_answer *answer_at(struct orch_udf_answers *a, size_t i)
{
    if (a->finished || i >= a->n)
        return NULL;
    return &a->rec[i];
}

static int out_set(struct orch_udf_out *slot, const void *data, size_t len)
{
    if (slot->set)
        return -EINVAL;
    if (data == NULL && len > 0)
        return -EINVAL;
    void *copy = malloc(len > 0 ? len : 1);
    if (copy == NULL)
        return -ENOMEM;
    if (len > 0)
        memcpy(copy, data, len);
    slot->data = copy;
    slot->len = len;
    slot->set = true;
    return 0;
}

static void child_complete(struct orch_udf_answers *a, size_t i);

static int host_emit(void *host, size_t i, size_t port, const void *data, size_t len)
{
    struct orch_udf_answers *a = host;
    struct orch_udf_answer *r = answer_at(a, i);
    if (r == NULL || port >= a->nout || a->op == ORCH_UDF_OP_FILTER)
        return -EINVAL;
    if (is_expand(a->op)) {
        if (r->outcome != ORCH_UDF_OK || r->nchildren == 0)
            return -EINVAL; /* no child started, or closed by no_children */
        if (r->child_msg != NULL && r->child_msg[r->nchildren - 1] != NULL)
            return -EINVAL; /* the current child failed: it has no values */
        struct orch_udf_out *child = &r->children[(r->nchildren - 1) * a->nout];
        int rc = out_set(&child[port], data, len);
        if (rc < 0)
            return rc;
        r->held_bytes += len;
        for (size_t p = 0; p < a->nout; p++)
            if (!child[p].set)
                return 0;
        child_complete(a, i);
        return 0;
    }
    if (r->outcome == ORCH_UDF_NONE) {
        assert(r->values == NULL);
        r->values = calloc(a->nout, sizeof *r->values);
        if (r->values == NULL)
            return -ENOMEM;
        int rc = out_set(&r->values[port], data, len);
        if (rc < 0) {
            free(r->values);
            r->values = NULL;
            return rc;
        }
        r->outcome = ORCH_UDF_OK;
        return 0;
    }
    if (r->outcome != ORCH_UDF_OK)
        return -EINVAL;
    return out_set(&r->values[port], data, len);
}

/* Appends a child to record i: failed with a copy of msg when failed, else empty (the
 * emits that follow fill it). */
static int add_child(struct orch_udf_answers *a, size_t i, bool failed, const char *msg)
{
    struct orch_udf_answer *r = answer_at(a, i);
    if (r == NULL || !is_expand(a->op))
        return -EINVAL;
    if (r->outcome != ORCH_UDF_NONE && (r->outcome != ORCH_UDF_OK || r->closed))
        return -EINVAL;
    /* A child is nout values: the array grows by whole children. */
    if (a->nout > SIZE_MAX / sizeof *r->children ||
        orch__grow_n(&r->children, &r->cap_children, r->nchildren + 1,
                     a->nout * sizeof *r->children) < 0)
        return -ENOMEM;
    char *copy = NULL;
    if (failed || r->child_msg != NULL) {
        /* child_msg exists from the first failed child on, covering every child. */
        size_t had = r->child_msg != NULL ? r->cap_msg : 0;
        if (orch__grow_n(&r->child_msg, &r->cap_msg, r->nchildren + 1, sizeof *r->child_msg) <
            0)
            return -ENOMEM;
        if (had == 0)
            memset(r->child_msg, 0, r->cap_msg * sizeof *r->child_msg);
        if (failed && (copy = strdup(msg != NULL ? msg : "")) == NULL)
            return -ENOMEM;
        r->child_msg[r->nchildren] = copy;
    }
    memset(&r->children[r->nchildren * a->nout], 0, a->nout * sizeof *r->children);
    if (r->nchildren == 0 && a->stream.max_children > 0)
        r->held_since_ms = now_ms();
    r->nchildren++;
    r->outcome = ORCH_UDF_OK;
    return 0;
}

/* Hands the complete children of record i to the stream hook when a threshold is passed
 * (orch_udf_stream), or at once with `now`; the children it took are freed. */
static void stream_check(struct orch_udf_answers *a, size_t i, bool now)
{
    struct orch_udf_answer *r = &a->rec[i];
    const struct orch_udf_stream *st = &a->stream;
    if (st->max_children == 0 || a->stream_off || r->outcome != ORCH_UDF_OK || r->closed ||
        r->nchildren == 0)
        return;
    /* Every child held is complete: the UDF is about to begin the next one. */
    if (!now && r->nchildren < st->max_children && r->held_bytes < st->max_bytes &&
        now_ms() - r->held_since_ms < st->max_ms)
        return;
    size_t n = r->nchildren;
    if (st->flush(st->ctx, a, i, n) != 0) {
        a->stream_off = true;
        return;
    }
    out_clear(r->children, n * a->nout);
    if (r->child_msg != NULL) {
        for (size_t c = 0; c < n; c++)
            free(r->child_msg[c]);
        memset(r->child_msg, 0, n * sizeof *r->child_msg);
    }
    r->nchildren = 0;
    r->base += n;
    r->held_bytes = 0;
}

/* The current child of record i is complete: handed over at once when it came a while
 * after the one before it (orch_udf_stream). */
static void child_complete(struct orch_udf_answers *a, size_t i)
{
    if (a->stream.max_children == 0 || a->stream.gap_ms <= 0)
        return;
    int64_t t = now_ms();
    bool slow = t - a->last_child_ms >= a->stream.gap_ms;
    a->last_child_ms = t;
    if (slow)
        stream_check(a, i, true);
}

static int host_child(void *host, size_t i)
{
    struct orch_udf_answers *a = host;
    if (answer_at(a, i) != NULL)
        stream_check(a, i, false);
    return add_child(a, i, false, NULL);
}

static int host_fail_child(void *host, size_t i, const char *msg)
{
    struct orch_udf_answers *a = host;
    if (answer_at(a, i) != NULL)
        stream_check(a, i, false);
    int rc = add_child(a, i, true, msg);
    if (rc == 0)
        child_complete(a, i);
    return rc;
}

static int host_no_children(void *host, size_t i)
{
    struct orch_udf_answers *a = host;
    struct orch_udf_answer *r = answer_at(a, i);
    if (r == NULL || !is_expand(a->op) || r->outcome != ORCH_UDF_NONE)
        return -EINVAL;
    r->outcome = ORCH_UDF_OK;
    r->closed = true;
    return 0;
}

static int host_keep(void *host, size_t i, bool keep)
{
    struct orch_udf_answers *a = host;
    struct orch_udf_answer *r = answer_at(a, i);
    if (r == NULL || a->op != ORCH_UDF_OP_FILTER || r->outcome != ORCH_UDF_NONE)
        return -EINVAL;
    r->outcome = keep ? ORCH_UDF_KEEP_TRUE : ORCH_UDF_KEEP_FALSE;
    return 0;
}

static int host_drop(void *host, size_t i)
{
    struct orch_udf_answers *a = host;
    struct orch_udf_answer *r = answer_at(a, i);
    if (r == NULL || r->outcome != ORCH_UDF_NONE)
        return -EINVAL;
    r->outcome = ORCH_UDF_DROP;
    return 0;
}

static int host_fail(struct orch_udf_answers *a, size_t i, const char *msg,
                     enum orch_udf_outcome kind)
{
    struct orch_udf_answer *r = answer_at(a, i);
    if (r == NULL || is_failure(r->outcome))
        return -EINVAL;
    /* The children made before the failure are complete: a streaming expansion publishes
     * them (DESIGN §4: they stay, the expansion fails). */
    stream_check(a, i, true);
    char *copy = strdup(msg != NULL ? msg : "");
    if (copy == NULL)
        return -ENOMEM;
    answer_clear(r, a->nout);
    r->outcome = kind;
    r->msg = copy;
    return 0;
}

static int host_fail_record(void *host, size_t i, const char *msg)
{
    return host_fail(host, i, msg, ORCH_UDF_RECORD_FAILURE);
}

static int host_fail_group(void *host, size_t i, const char *msg)
{
    return host_fail(host, i, msg, ORCH_UDF_GROUP_FAILURE);
}

static const struct orch_udf_host_ops collector_ops = {
    .emit = host_emit,
    .child = host_child,
    .no_children = host_no_children,
    .keep = host_keep,
    .drop = host_drop,
    .fail_record = host_fail_record,
    .fail_group = host_fail_group,
    .fail_child = host_fail_child,
};

int orch_udf_answers_init(struct orch_udf_answers *a, const char *udf, enum orch_udf_op op,
                          size_t nout)
{
    memset(a, 0, sizeof *a);
    if (nout == 0 || strcmp(orch_udf_op_name(op), "?") == 0)
        return -EINVAL;
    a->udf = strdup(udf != NULL ? udf : "?");
    if (a->udf == NULL)
        return -ENOMEM;
    a->op = op;
    a->nout = nout;
    return 0;
}

void orch_udf_answers_stream(struct orch_udf_answers *a, const struct orch_udf_stream *s)
{
    memset(&a->stream, 0, sizeof a->stream);
    if (s != NULL && a->op == ORCH_UDF_OP_EXPAND && s->flush != NULL && s->max_children > 0)
        a->stream = *s;
}

/* FNV-1a, 64 bits, over n bytes, continuing from h. */
static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t k = 0; k < n; k++)
        h = (h ^ p[k]) * 0x100000001b3ULL;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    unsigned char b[8];
    for (int k = 0; k < 8; k++)
        b[k] = (unsigned char)(v >> (8 * k));
    return fnv(h, b, sizeof b);
}

uint64_t orch_udf_child_hash(const struct orch_udf_out *v, size_t nout, const char *failed)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    if (failed != NULL) {
        h = fnv_u64(h, 1);
        return fnv(h, failed, strlen(failed));
    }
    h = fnv_u64(h, 0);
    for (size_t p = 0; p < nout; p++) {
        h = fnv_u64(h, v[p].set ? v[p].len + 1 : 0);
        if (v[p].set)
            h = fnv(h, v[p].data, v[p].len);
    }
    return h;
}

int orch_udf_answers_reset(struct orch_udf_answers *a, struct orch_udf_batch *batch)
{
    for (size_t i = 0; i < a->n; i++)
        answer_clear(&a->rec[i], a->nout);
    a->n = 0;
    a->finished = false;
    a->stream_off = false;
    a->last_child_ms = now_ms();
    a->error[0] = '\0';
    if (orch__grow_n(&a->rec, &a->cap, batch->n, sizeof *a->rec) < 0)
        return -ENOMEM;
    if (batch->n > 0)
        memset(a->rec, 0, batch->n * sizeof *a->rec);
    a->n = batch->n;
    batch->ops = &collector_ops;
    batch->host = a;
    batch->error = a->error;
    batch->error_size = sizeof a->error;
    return 0;
}

/* Makes r a RecordFailure made by the host. */
static int host_failure(struct orch_udf_answers *a, struct orch_udf_answer *r, const char *fmt,
                        ...) __attribute__((format(printf, 3, 4)));

static int host_failure(struct orch_udf_answers *a, struct orch_udf_answer *r, const char *fmt,
                        ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *copy = strdup(msg);
    if (copy == NULL)
        return -ENOMEM;
    answer_clear(r, a->nout);
    r->outcome = ORCH_UDF_RECORD_FAILURE;
    r->msg = copy;
    return 0;
}

/* The first port of the nout values at v that was not set, or nout. */
static size_t first_unset(const struct orch_udf_out *v, size_t nout)
{
    for (size_t p = 0; p < nout; p++)
        if (!v[p].set)
            return p;
    return nout;
}

static int finish_one(struct orch_udf_answers *a, struct orch_udf_answer *r)
{
    if (r->outcome == ORCH_UDF_NONE)
        return host_failure(a, r, "udf %s gave no answer for this record", a->udf);
    if (r->outcome != ORCH_UDF_OK)
        return 0;
    if (!is_expand(a->op)) {
        size_t p = first_unset(r->values, a->nout);
        if (p < a->nout)
            return host_failure(a, r, "udf %s gave no value for output %zu of %zu", a->udf,
                                p + 1, a->nout);
        return 0;
    }
    for (size_t c = 0; c < r->nchildren; c++) {
        if (r->child_msg != NULL && r->child_msg[c] != NULL)
            continue; /* failed: no values, by design */
        size_t p = first_unset(&r->children[c * a->nout], a->nout);
        if (p < a->nout)
            return host_failure(a, r,
                                "udf %s gave no value for output %zu of %zu of child %zu "
                                "(ordinals from 0)",
                                a->udf, p + 1, a->nout, r->base + c);
    }
    return 0;
}

int orch_udf_answers_finish(struct orch_udf_answers *a)
{
    for (size_t i = 0; i < a->n; i++) {
        int rc = finish_one(a, &a->rec[i]);
        if (rc < 0)
            return rc;
    }
    a->finished = true;
    return 0;
}

const char *orch_udf_answers_error(const struct orch_udf_answers *a)
{
    return a->error;
}

void orch_udf_answers_free(struct orch_udf_answers *a)
{
    for (size_t i = 0; i < a->n; i++)
        answer_clear(&a->rec[i], a->nout);
    free(a->rec);
    free(a->udf);
    memset(a, 0, sizeof *a);
}
