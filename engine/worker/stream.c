/* stream.c — a worker's streaming expansions: each chunk of complete children stored and
 * sent while the UDF runs (stream.h). */
#define _GNU_SOURCE
#include "stream.h"

#include "orch_payload.h"
#include "support.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void orch_worker_stream_install(struct orch_worker_stream *s, struct orch_udf_answers *a)
{
    if (s->cfg->op != ORCH_UDF_OP_EXPAND || s->cfg->values || s->store == NULL) {
        orch_udf_answers_stream(a, NULL);
        return;
    }
    struct orch_udf_stream hook = {.max_children = ORCH_UDF_STREAM_CHILDREN,
                                   .max_bytes = ORCH_UDF_STREAM_BYTES,
                                   .max_ms = ORCH_UDF_STREAM_MS,
                                   .gap_ms = ORCH_UDF_STREAM_GAP_MS,
                                   .flush = orch_worker_stream_flush,
                                   .ctx = s};
    orch_udf_answers_stream(a, &hook);
}

void orch_worker_too_big_msg(char *buf, size_t size, size_t p, size_t len, size_t max)
{
    snprintf(buf, size,
             "output %zu is %zu bytes, over the payload store's limit of %zu bytes per value",
             p + 1, len, max);
}

int orch_worker_child_hashes(const struct orch_udf_answers *ans,
                             struct orch_wire_answer *answers,
                             const char *(*failure)(void *ctx, size_t i, size_t c), void *ctx,
                             uint64_t **out)
{
    size_t total = 0, nout = ans->nout;
    for (size_t i = 0; i < ans->n; i++)
        total += answers[i].outcome == ORCH_WIRE_OK ? answers[i].nchild : 0;
    *out = NULL;
    if (total == 0)
        return 0;
    uint64_t *h = calloc(total, sizeof *h);
    if (h == NULL)
        return -ENOMEM;
    *out = h;
    for (size_t i = 0; i < ans->n; i++) {
        struct orch_wire_answer *o = &answers[i];
        if (o->outcome != ORCH_WIRE_OK || o->nchild == 0)
            continue;
        o->hash = h;
        for (size_t c = 0; c < o->nchild; c++)
            *h++ =
                orch_udf_child_hash(&ans->rec[i].children[c * nout], nout, failure(ctx, i, c));
    }
    return 0;
}

int orch_worker_stream_detach(const struct orch_wire_batch *b, struct orch_udf_value *vals,
                              void **buf)
{
    size_t n = 0, total = 0;
    for (uint32_t i = 0; i < b->nrec; i++)
        for (uint32_t j = 0; j < b->rec[i].nin; j++)
            n += b->rec[i].nval[j];
    for (size_t k = 0; k < n; k++)
        total += vals[k].present ? vals[k].len : 0;
    char *copy = malloc(total + 1);
    if (copy == NULL)
        return -ENOMEM;
    for (size_t k = 0, at = 0; k < n; k++) {
        if (!vals[k].present)
            continue;
        if (vals[k].len > 0)
            memcpy(copy + at, vals[k].data, vals[k].len);
        vals[k].data = copy + at;
        at += vals[k].len;
    }
    *buf = copy;
    return 0;
}

int orch_worker_send(int fd, const void *data, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, (const char *)data + off, len - off, MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && errno != EINTR)
            return -errno;
    }
    return 0;
}

void orch_worker_stream_free(struct orch_worker_stream *s)
{
    orch_wire_buf_free(&s->out);
    free(s->ids);
    free(s->sizes);
    free(s->hash);
    free(s->iov);
    free(s->failed);
    if (s->msg)
        for (size_t c = 0; c < s->cap_msg; c++)
            free(s->msg[c]);
    free(s->msg);
    memset(s, 0, sizeof *s);
}

/* Room for n children of nout values each. */
static int reserve(struct orch_worker_stream *s, size_t n, size_t nout)
{
    size_t vals = n * nout, had = s->cap_msg;
    if (orch__grow_n(&s->ids, &s->cap_ids, vals, sizeof *s->ids) < 0 ||
        orch__grow_n(&s->sizes, &s->cap_sizes, vals, sizeof *s->sizes) < 0 ||
        orch__grow_n(&s->iov, &s->cap_iov, vals, sizeof *s->iov) < 0 ||
        orch__grow_n(&s->hash, &s->cap_hash, n, sizeof *s->hash) < 0 ||
        orch__grow_n(&s->failed, &s->cap_failed, n, sizeof *s->failed) < 0 ||
        orch__grow_n(&s->msg, &s->cap_msg, n, sizeof *s->msg) < 0)
        return -ENOMEM;
    memset(s->msg + had, 0, (s->cap_msg - had) * sizeof *s->msg);
    return 0;
}

/* Why child c (of the n held) fails: the UDF said so, or an output is over the store's
 * limit (its message then in s->msg[c]); NULL when it does not. -1 in *incomplete when a
 * value of a child that did not fail is missing (the record fails at finish). */
static const char *child_failure(struct orch_worker_stream *s, const struct orch_udf_answer *r,
                                 size_t nout, size_t c, bool *incomplete)
{
    if (r->child_msg != NULL && r->child_msg[c] != NULL)
        return r->child_msg[c];
    const struct orch_udf_out *v = &r->children[c * nout];
    for (size_t p = 0; p < nout; p++) {
        if (!v[p].set) {
            *incomplete = true;
            return NULL;
        }
        if (v[p].len > s->max_value) {
            char text[256];
            orch_worker_too_big_msg(text, sizeof text, p, v[p].len, s->max_value);
            free(s->msg[c]);
            s->msg[c] = strdup(text);
            return s->msg[c] ? s->msg[c] : "output over the payload store's limit";
        }
    }
    return NULL;
}

int orch_worker_stream_flush(void *ctx, const struct orch_udf_answers *a, size_t i, size_t n)
{
    struct orch_worker_stream *s = ctx;
    const struct orch_udf_answer *r = &a->rec[i];
    size_t nout = a->nout;
    if (s->b == NULL || i >= s->b->nrec || reserve(s, n, nout) < 0)
        return 1;
    uint32_t nfailed = 0;
    size_t nset = 0;
    bool incomplete = false;
    for (size_t c = 0; c < n; c++) {
        const char *why = child_failure(s, r, nout, c, &incomplete);
        if (incomplete)
            return 1; /* finish() fails the record: nothing of it is published */
        s->hash[c] = orch_udf_child_hash(&r->children[c * nout], nout, why);
        if (why != NULL) {
            s->failed[nfailed++] = (struct orch_wire_failed_child){(uint32_t)c, why};
            continue;
        }
        for (size_t p = 0; p < nout; p++)
            s->iov[nset++] = (struct orch_iov){r->children[c * nout + p].data,
                                               r->children[c * nout + p].len};
    }
    if (nset > 0 && orch_payload_put_many(s->store, s->iov, nset, s->ids) < 0)
        return 1; /* the report stores them, or says why it cannot */
    /* Spread the ids over every slot, 0 on the failed children; from the end, in place. */
    for (size_t c = n, j = nset, f = nfailed; c-- > 0;) {
        bool failed = f > 0 && s->failed[f - 1].child == c;
        f -= failed;
        for (size_t p = nout; p-- > 0;) {
            size_t at = c * nout + p;
            s->ids[at] = failed ? 0 : s->ids[--j];
            s->sizes[at] = failed ? 0 : r->children[at].len;
        }
    }
    struct orch_wire_chunk ch = {.batch = s->b->id,
                                 .a = {.grain = s->b->rec[i].grain,
                                       .generation = s->b->rec[i].generation,
                                       .outcome = ORCH_WIRE_OK,
                                       .message = "",
                                       .first = (uint32_t)r->base,
                                       .nchild = (uint32_t)n,
                                       .nout = (uint32_t)nout,
                                       .payload = s->ids,
                                       .size = s->sizes,
                                       .nfailed = nfailed,
                                       .failed = s->failed,
                                       .hash = s->hash}};
    s->out.len = 0;
    if (orch_wire_put_chunk(&s->out, &ch) < 0)
        return 1;
    /* A driver that is gone: the report's send finds it too, and the worker ends. */
    int rc = orch_worker_send(s->fd, s->out.data, s->out.len);
    s->out.len = 0;
    return rc < 0 ? 1 : 0;
}
