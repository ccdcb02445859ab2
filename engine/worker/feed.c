/* feed.c — the worker's side of fed reduces (feed.h). */
#include "feed.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orch_error.h"
#include "stream.h"
#include "support.h"

bool orch_worker_fed(const struct orch_wire_batch *b)
{
    for (uint32_t i = 0; i < b->nrec; i++)
        if (b->rec[i].fed)
            return true;
    return false;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "orch worker %d: ", (int)getpid());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

/* Keeps a BATCH frame read while feeding: the one queued behind, at most one. */
static int stash(struct orch_worker_feed *f, const struct orch_wire_frame *fr)
{
    if (f->stashed)
        return fail("protocol error: a second batch arrived while one is fed");
    if (orch__grow_n(&f->stash, &f->stash_cap, fr->len + 1, 1) < 0)
        return fail("out of memory keeping a batch of %zu bytes", fr->len);
    if (fr->len)
        memcpy(f->stash, fr->body, fr->len);
    f->stash_len = fr->len;
    f->stashed = true;
    return 0;
}

/* The pages of record r (fed) into lists: the values of every page, child-major, appended
 * to one array; regrouped list by list once the last page is in. */
static int feed_record(struct orch_worker_feed *f, uint64_t batch, struct orch_wire_record *r,
                       uint32_t *nval, struct orch_wire_value **out, bool *eof)
{
    struct orch_wire_value *v = NULL;
    size_t n = 0, cap = 0;
    struct orch_wire_buf ask = {0};
    int rc = 0;
    for (bool last = false; !last && rc == 0;) {
        struct orch_wire_more m = {.batch = batch, .grain = r->grain};
        ask.len = 0;
        if (orch_wire_put_more(&ask, &m) < 0) {
            rc = fail("out of memory asking for inputs");
            break;
        }
        if ((rc = orch_worker_send(f->fd, ask.data, ask.len)) < 0) {
            *eof = true; /* the driver closed the socket */
            rc = 0;
            break;
        }
        for (;;) { /* the answer, after a BATCH queued behind this one */
            struct orch_wire_frame fr;
            int got = f->read(f->w, &fr);
            if (got <= 0) {
                *eof = got == 0;
                rc = got;
                break;
            }
            if (fr.type == ORCH_WIRE_BATCH) {
                if ((rc = stash(f, &fr)) < 0)
                    break;
                continue;
            }
            struct orch__arena a = {0};
            struct orch_wire_inputs in;
            if (orch_wire_get_inputs(&fr, &a, &in) < 0)
                rc = fail("protocol error: %s", orch_error_detail());
            else if (in.batch != batch || in.grain != r->grain || in.nin != r->nin)
                rc = fail("protocol error: inputs of grain %" PRIu64 " in batch %" PRIu64
                          " while grain %" PRIu64 " of batch %" PRIu64 " is fed",
                          in.grain, in.batch, r->grain, batch);
            if (rc < 0) {
                orch__arena_free(&a);
                break;
            }
            size_t k = (size_t)in.nchild * in.nin;
            if (orch__grow_n(&v, &cap, n + k + 1, sizeof *v) < 0) {
                rc = fail("out of memory for %zu inputs", n + k);
            } else {
                if (k)
                    memcpy(v + n, in.vals, k * sizeof *v);
                n += k;
                for (uint32_t j = 0; j < r->nin; j++)
                    nval[j] += in.nchild;
                last = in.last;
            }
            orch__arena_free(&a);
            break;
        }
        if (*eof)
            break;
    }
    orch_wire_buf_free(&ask);
    if (rc < 0 || *eof) {
        free(v);
        return rc;
    }
    if (!v && !(v = calloc(1, sizeof *v))) /* no surviving child: still an allocation */
        return fail("out of memory");
    if (r->nin > 1 && n > 0) {
        struct orch_wire_value *t = malloc(n * sizeof *t);
        if (!t) {
            free(v);
            return fail("out of memory for %zu inputs", n);
        }
        size_t nk = n / r->nin;
        for (size_t c = 0; c < nk; c++)
            for (uint32_t j = 0; j < r->nin; j++)
                t[(size_t)j * nk + c] = v[c * r->nin + j];
        free(v);
        v = t;
    }
    *out = v;
    return 0;
}

int orch_worker_feed(struct orch_worker_feed *f, struct orch_wire_batch *b, bool *eof)
{
    *eof = false;
    orch_worker_feed_free(f);
    f->rec = calloc(b->nrec, sizeof *f->rec);
    f->nval = calloc((size_t)b->nrec * ORCH_PLAN_MAX_INPUTS + 1, sizeof *f->nval);
    f->vals = calloc(b->nrec, sizeof *f->vals);
    if (!f->rec || !f->nval || !f->vals)
        return fail("out of memory for a batch of %" PRIu32 " records", b->nrec);
    f->nvals = b->nrec;
    for (uint32_t i = 0; i < b->nrec; i++) {
        f->rec[i] = b->rec[i];
        if (!b->rec[i].fed)
            continue;
        if (b->rec[i].nin > ORCH_PLAN_MAX_INPUTS)
            return fail("protocol error: a fed record of %" PRIu32 " inputs", b->rec[i].nin);
        uint32_t *nval = f->nval + (size_t)i * ORCH_PLAN_MAX_INPUTS;
        int rc = feed_record(f, b->id, &f->rec[i], nval, &f->vals[i], eof);
        if (rc < 0 || *eof)
            return rc;
        f->rec[i].nval = nval;
        f->rec[i].vals = f->vals[i];
        f->rec[i].fed = 0;
    }
    b->rec = f->rec;
    return 0;
}

void orch_worker_feed_free(struct orch_worker_feed *f)
{
    for (size_t i = 0; i < f->nvals; i++)
        free(f->vals[i]);
    free(f->vals);
    free(f->nval);
    free(f->rec);
    f->vals = NULL;
    f->nval = NULL;
    f->rec = NULL;
    f->nvals = 0;
}

bool orch_worker_feed_unstash(struct orch_worker_feed *f, struct orch_wire_frame *fr)
{
    if (!f->stashed)
        return false;
    /* The body moves to `taken`, so that a batch stashed while this one is fed does not
     * write over it (the batch is decoded into its arena first, but values mode points
     * into its frame). */
    uint8_t *t = f->taken;
    size_t tc = f->taken_cap;
    f->taken = f->stash;
    f->taken_cap = f->stash_cap;
    f->stash = t;
    f->stash_cap = tc;
    f->stashed = false;
    *fr = (struct orch_wire_frame){.type = ORCH_WIRE_BATCH,
                                   .body = f->taken,
                                   .len = f->stash_len,
                                   .size = ORCH_WIRE_HEADER + f->stash_len};
    return true;
}

void orch_worker_feed_close(struct orch_worker_feed *f)
{
    orch_worker_feed_free(f);
    free(f->stash);
    free(f->taken);
    f->stash = f->taken = NULL;
    f->stash_cap = f->taken_cap = 0;
    f->stashed = false;
}
