/* pool_values.c — values mode (wire.h), for remote workers that cannot map the job's LMDB
 * (pool_int.h): a batch carries its input values, read from the driver's payload store,
 * and a report's output values are written to the store before the driver sees the
 * report, as ids. */
#define _GNU_SOURCE
#include "pool_int.h"

#include "orch_error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* A remote worker's report carries values (values mode): writes them to the payload store
 * in one transaction, before the driver commits anything that names them (the ordering
 * rule of DESIGN §6, as a local worker's own write), and turns r into the report of ids the
 * driver takes. A store that cannot take them turns it into a STORAGE report: the job
 * stops, as when a local worker's write fails. Returns 0, or -ENOMEM. */
int orch_pool__store_values(orch_worker *w, struct orch__arena *a, struct orch_wire_report *r)
{
    orch_pool *p = w->pool;
    size_t total = 0;
    for (uint32_t i = 0; i < r->nrec; i++)
        total += (size_t)r->rec[i].nchild * r->rec[i].nout;
    struct orch_iov *iov = orch__arena_alloc(a, sizeof *iov * (total + 1));
    uint64_t *ids = orch__arena_alloc(a, sizeof *ids * (total + 1));
    if (!iov || !ids)
        return -ENOMEM;
    size_t nset = 0;
    for (uint32_t i = 0; i < r->nrec; i++) {
        const struct orch_wire_answer *an = &r->rec[i];
        for (size_t k = 0; k < (size_t)an->nchild * an->nout; k++)
            if (an->values[k].set)
                iov[nset++] = (struct orch_iov){an->values[k].data, an->values[k].len};
    }
    int rc = orch_payload_put_many(p->store, iov, nset, ids);
    if (rc < 0) {
        char *why = orch__arena_alloc(a, 512);
        if (!why)
            return -ENOMEM;
        snprintf(why, 512, "storing %zu outputs of worker %d on %s: %s", nset, (int)w->wpid,
                 w->host, *orch_error_detail() ? orch_error_detail() : orch_strerror(rc));
        r->status = ORCH_WIRE_STATUS_STORAGE;
        r->message = why;
        r->nrec = 0;
        r->values = 0;
        return 0;
    }
    /* Spread the ids over the answers' slots: 0 where a value was not set (failed
     * children). The answers live in the arena the decoder filled: ours to change. */
    size_t j = 0;
    for (uint32_t i = 0; i < r->nrec; i++) {
        struct orch_wire_answer *an = (struct orch_wire_answer *)&r->rec[i];
        size_t n = (size_t)an->nchild * an->nout;
        uint64_t *mine = orch__arena_alloc(a, sizeof *mine * (n + 1));
        uint64_t *size = orch__arena_alloc(a, sizeof *size * (n + 1));
        if (!mine || !size)
            return -ENOMEM;
        for (size_t k = 0; k < n; k++) {
            mine[k] = an->values[k].set ? ids[j++] : 0;
            size[k] = an->values[k].set ? an->values[k].len : 0;
        }
        an->payload = mine;
        an->size = size;
        an->values = NULL;
    }
    r->values = 0;
    return 0;
}

/* The most bytes of input values one remote batch carries: what one frame holds, or
 * less with orch_pool_config.remote_batch_max (tests: the refusal of a batch too big to send, without
 * making 256 MiB of payloads). */
static size_t batch_values_max(const orch_pool *p)
{
    size_t v = p->batch_max;
    return v > 0 && v < ORCH_WIRE_MAX_BODY ? v : ORCH_WIRE_MAX_BODY;
}

/* The batch b with every present value's bytes read from the store, encoded into out (a
 * remote worker's batch: values mode). Returns 0, -EIO with the detail set (the store could
 * not give a value: the job must stop, see orch_pool_dispatch), -E2BIG (the values are over
 * what one batch carries), or an encoding error. */
int orch_pool__put_batch_values(orch_pool *p, struct orch_wire_buf *out,
                                const struct orch_wire_batch *b)
{
    size_t bytes = 0, max = batch_values_max(p);
    size_t total = 0;
    for (uint32_t i = 0; i < b->nrec; i++)
        for (uint32_t j = 0; j < b->rec[i].nin; j++)
            total += b->rec[i].nval[j];
    struct orch_wire_record *rec = malloc(sizeof *rec * b->nrec);
    struct orch_wire_value *vals = malloc(sizeof *vals * (total + 1));
    orch_payload_rtxn *r = NULL;
    int rc = -ENOMEM;
    if (!rec || !vals)
        goto out;
    if ((rc = orch_payload_read_begin(p->store, &r)) < 0) {
        rc = orch_error_set(-EIO, "cannot read the inputs of batch %" PRIu64 ": %s", b->id,
                            orch_error_detail());
        goto out;
    }
    size_t k = 0;
    for (uint32_t i = 0; i < b->nrec; i++) {
        size_t nv = 0;
        for (uint32_t j = 0; j < b->rec[i].nin; j++)
            nv += b->rec[i].nval[j];
        rec[i] = b->rec[i];
        rec[i].vals = vals + k;
        for (size_t v = 0; v < nv; v++, k++) {
            vals[k] = b->rec[i].vals[v];
            if (!vals[k].present)
                continue;
            rc = orch_payload_read(r, vals[k].payload, &vals[k].data, &vals[k].len);
            if (rc < 0) {
                rc = orch_error_set(
                    -EIO, "cannot read payload %" PRIu64 " (an input of grain %" PRIu64 "): %s",
                    vals[k].payload, rec[i].grain,
                    rc == ORCH_ENOTFOUND ? "not in the payload store" : orch_error_detail());
                goto out;
            }
            bytes += vals[k].len;
        }
    }
    if (bytes > max) {
        rc = -E2BIG;
        goto out;
    }
    struct orch_wire_batch vb = *b;
    vb.values = 1;
    vb.rec = rec;
    rc = orch_wire_put_batch(out, &vb);
out:
    orch_payload_read_end(r);
    free(rec);
    free(vals);
    return rc;
}
