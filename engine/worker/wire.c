/* wire.c — encoding and strict decoding of the driver <-> worker frames (wire.h). */
#include "wire.h"

#include "orch_error.h"
#include "orch_le.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

const char *orch_wire_type_name(int type)
{
    switch (type) {
#define ORCH_WIRE_TYPE_CASE(name, value, text)                                                 \
    case value:                                                                                \
        return text;
        ORCH_WIRE_TYPES(ORCH_WIRE_TYPE_CASE)
#undef ORCH_WIRE_TYPE_CASE
    }
    return "?";
}

/* ---- encoding -------------------------------------------------------------------------- */

void orch_wire_buf_free(struct orch_wire_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* A frame being written: appends go to b; `bad` is sticky and remembered as an rc. */
struct enc {
    struct orch_wire_buf *b;
    size_t start; /* where the frame's header begins */
    int rc;
};

static void enc_room(struct enc *e, size_t n)
{
    struct orch_wire_buf *b = e->b;
    if (e->rc < 0)
        return;
    if (n > SIZE_MAX - b->len) {
        e->rc = -E2BIG;
        return;
    }
    if (b->len - e->start + n > ORCH_WIRE_HEADER + ORCH_WIRE_MAX_BODY) {
        e->rc = -E2BIG;
        return;
    }
    if (b->cap - b->len >= n) /* the common case, once per field: no call */
        return;
    if (orch__grow_n(&b->data, &b->cap, b->len + n, 1) < 0)
        e->rc = -ENOMEM;
}

static void enc_bytes(struct enc *e, const void *data, size_t n)
{
    enc_room(e, n);
    if (e->rc < 0 || n == 0)
        return;
    memcpy(e->b->data + e->b->len, data, n);
    e->b->len += n;
}

static void enc_le(struct enc *e, uint64_t v, size_t n)
{
    enc_room(e, n);
    if (e->rc < 0)
        return;
    orch__le_put(e->b->data + e->b->len, v, n);
    e->b->len += n;
}

static void enc_u8(struct enc *e, uint8_t v)
{
    enc_le(e, v, 1);
}

static void enc_u32(struct enc *e, uint32_t v)
{
    enc_le(e, v, 4);
}

static void enc_u64(struct enc *e, uint64_t v)
{
    enc_le(e, v, 8);
}

static void enc_str(struct enc *e, const char *s)
{
    if (s == NULL) {
        if (e->rc == 0)
            e->rc = -EINVAL;
        return;
    }
    size_t n = strlen(s);
    if (n > UINT32_MAX) {
        if (e->rc == 0)
            e->rc = -EINVAL;
        return;
    }
    enc_u32(e, (uint32_t)n);
    enc_bytes(e, s, n);
}

/* u32 n | n bytes: a value's bytes (values mode). */
static void enc_blob(struct enc *e, const void *data, size_t n)
{
    if (n > UINT32_MAX || (n > 0 && data == NULL)) {
        if (e->rc == 0)
            e->rc = n > UINT32_MAX ? -E2BIG : -EINVAL;
        return;
    }
    enc_u32(e, (uint32_t)n);
    enc_bytes(e, data, n);
}

static void enc_begin(struct enc *e, struct orch_wire_buf *b, int type)
{
    e->b = b;
    e->start = b->len;
    e->rc = 0;
    enc_u32(e, 0); /* the length, patched by enc_end */
    enc_u8(e, (uint8_t)type);
}

static int enc_end(struct enc *e)
{
    if (e->rc < 0) {
        e->b->len = e->start;
        return e->rc;
    }
    size_t body = e->b->len - e->start - ORCH_WIRE_HEADER;
    orch__le_put32(e->b->data + e->start, (uint32_t)body); /* <= ORCH_WIRE_MAX_BODY */
    return 0;
}

int orch_wire_put_config(struct orch_wire_buf *b, const struct orch_wire_config *c)
{
    struct enc e;
    enc_begin(&e, b, ORCH_WIRE_CONFIG);
    enc_u32(&e, ORCH_WIRE_VERSION);
    enc_str(&e, c->call);
    enc_u8(&e, (uint8_t)c->fn_kind);
    enc_str(&e, c->function);
    enc_str(&e, c->symbol ? c->symbol : "");
    enc_u8(&e, (uint8_t)c->op);
    enc_u32(&e, c->nin);
    enc_u32(&e, c->nout);
    enc_u32(&e, c->worker);
    enc_str(&e, c->payload_dir);
    enc_u8(&e, c->values ? 1 : 0);
    enc_u64(&e, c->max_value);
    enc_u32(&e, c->batch);
    enc_u32(&e, c->nargs);
    if (c->nargs > 0 && (c->arg_keys == NULL || c->arg_values == NULL) && e.rc == 0)
        e.rc = -EINVAL;
    for (uint32_t i = 0; i < c->nargs && e.rc == 0; i++) {
        enc_str(&e, c->arg_keys[i]);
        enc_str(&e, c->arg_values[i]);
    }
    return enc_end(&e);
}

int orch_wire_put_hello(struct orch_wire_buf *b, const struct orch_wire_hello *h)
{
    struct enc e;
    enc_begin(&e, b, ORCH_WIRE_HELLO);
    enc_u32(&e, h->version);
    enc_u32(&e, h->pid);
    return enc_end(&e);
}

int orch_wire_put_initfail(struct orch_wire_buf *b, const char *message)
{
    struct enc e;
    enc_begin(&e, b, ORCH_WIRE_INITFAIL);
    enc_str(&e, message ? message : "");
    return enc_end(&e);
}

int orch_wire_put_batch(struct orch_wire_buf *b, const struct orch_wire_batch *batch)
{
    struct enc e;
    enc_begin(&e, b, ORCH_WIRE_BATCH);
    enc_u64(&e, batch->id);
    enc_u8(&e, batch->values ? 1 : 0);
    enc_u32(&e, batch->nrec);
    if (batch->nrec > 0 && batch->rec == NULL)
        e.rc = -EINVAL;
    for (uint32_t i = 0; i < batch->nrec && e.rc == 0; i++) {
        const struct orch_wire_record *r = &batch->rec[i];
        enc_u64(&e, r->grain);
        enc_u32(&e, r->generation);
        enc_u32(&e, r->attempt);
        enc_u32(&e, r->nin);
        if (r->nin > 0 && r->nval == NULL) {
            e.rc = -EINVAL;
            break;
        }
        uint64_t nv = 0;
        for (uint32_t j = 0; j < r->nin; j++) {
            enc_u32(&e, r->nval[j]);
            nv += r->nval[j];
        }
        enc_u8(&e, r->fed ? 1 : 0);
        if ((nv > 0 && r->vals == NULL) || (r->fed && (nv > 0 || batch->values))) {
            e.rc = -EINVAL;
            break;
        }
        for (uint64_t k = 0; k < nv && e.rc == 0; k++) {
            const struct orch_wire_value *v = &r->vals[k];
            enc_u8(&e, v->present ? 1 : 0);
            enc_u64(&e, v->present ? v->payload : 0);
            if (batch->values && v->present)
                enc_blob(&e, v->data, v->len);
        }
    }
    return enc_end(&e);
}

/* Appends one answer (wire.h, `answer`). */
static void put_answer(struct enc *e, const struct orch_wire_answer *a, bool values)
{
    uint64_t nid = (uint64_t)a->nchild * a->nout;
    enc_u64(e, a->grain);
    enc_u32(e, a->generation);
    enc_u8(e, (uint8_t)a->outcome);
    enc_str(e, a->message ? a->message : "");
    enc_u32(e, a->first);
    enc_u32(e, a->nchild);
    enc_u32(e, a->nout);
    if (nid > 0 && (values ? a->values == NULL : !a->payload || !a->size)) {
        e->rc = -EINVAL;
        return;
    }
    for (uint64_t k = 0; k < nid && e->rc == 0; k++) {
        if (!values) {
            enc_u64(e, a->payload[k]);
            enc_u64(e, a->size[k]);
            continue;
        }
        enc_u8(e, a->values[k].set ? 1 : 0);
        if (a->values[k].set)
            enc_blob(e, a->values[k].data, a->values[k].len);
    }
    enc_u32(e, a->nfailed);
    if (a->nfailed > 0 && a->failed == NULL) {
        e->rc = -EINVAL;
        return;
    }
    for (uint32_t k = 0; k < a->nfailed && e->rc == 0; k++) {
        enc_u32(e, a->failed[k].child);
        enc_str(e, a->failed[k].message ? a->failed[k].message : "");
    }
    uint32_t nhash = a->hash ? a->nchild : 0;
    enc_u32(e, nhash);
    for (uint32_t k = 0; k < nhash && e->rc == 0; k++)
        enc_u64(e, a->hash[k]);
}

int orch_wire_put_report(struct orch_wire_buf *b, const struct orch_wire_report *r)
{
    struct enc e;
    enc_begin(&e, b, ORCH_WIRE_REPORT);
    enc_u64(&e, r->batch);
    enc_u8(&e, (uint8_t)r->status);
    enc_str(&e, r->message ? r->message : "");
    enc_u8(&e, r->values ? 1 : 0);
    enc_u32(&e, r->nrec);
    if (r->nrec > 0 && r->rec == NULL)
        e.rc = -EINVAL;
    for (uint32_t i = 0; i < r->nrec && e.rc == 0; i++)
        put_answer(&e, &r->rec[i], r->values);
    return enc_end(&e);
}

int orch_wire_put_chunk(struct orch_wire_buf *b, const struct orch_wire_chunk *c)
{
    struct enc e;
    enc_begin(&e, b, ORCH_WIRE_CHUNK);
    enc_u64(&e, c->batch);
    enc_u8(&e, c->values ? 1 : 0);
    if (c->a.outcome != ORCH_WIRE_OK || c->a.nchild == 0 || c->a.hash == NULL)
        e.rc = -EINVAL;
    else
        put_answer(&e, &c->a, c->values);
    return enc_end(&e);
}

int orch_wire_put_more(struct orch_wire_buf *b, const struct orch_wire_more *m)
{
    struct enc e;
    enc_begin(&e, b, ORCH_WIRE_MORE);
    enc_u64(&e, m->batch);
    enc_u64(&e, m->grain);
    return enc_end(&e);
}

int orch_wire_put_inputs(struct orch_wire_buf *b, const struct orch_wire_inputs *in)
{
    struct enc e;
    enc_begin(&e, b, ORCH_WIRE_INPUTS);
    enc_u64(&e, in->batch);
    enc_u64(&e, in->grain);
    enc_u8(&e, in->last ? 1 : 0);
    enc_u32(&e, in->nin);
    enc_u32(&e, in->nchild);
    uint64_t nv = (uint64_t)in->nchild * in->nin;
    if (nv > 0 && in->vals == NULL)
        e.rc = -EINVAL;
    for (uint64_t k = 0; k < nv && e.rc == 0; k++) {
        enc_u8(&e, in->vals[k].present ? 1 : 0);
        enc_u64(&e, in->vals[k].present ? in->vals[k].payload : 0);
    }
    return enc_end(&e);
}

int orch_wire_put_challenge(struct orch_wire_buf *b, const struct orch_wire_challenge *c)
{
    struct enc e;
    enc_begin(&e, b, ORCH_WIRE_CHALLENGE);
    enc_u32(&e, c->version);
    enc_bytes(&e, c->nonce, ORCH_WIRE_NONCE);
    return enc_end(&e);
}

int orch_wire_put_auth(struct orch_wire_buf *b, const struct orch_wire_auth *au)
{
    struct enc e;
    enc_begin(&e, b, ORCH_WIRE_AUTH);
    enc_u64(&e, au->token);
    enc_bytes(&e, au->mac, ORCH_WIRE_NONCE);
    enc_u32(&e, au->pid);
    enc_str(&e, au->host);
    enc_str(&e, au->slurm_job);
    return enc_end(&e);
}

/* ---- decoding -------------------------------------------------------------------------- */

int orch_wire_next(const void *data, size_t avail, struct orch_wire_frame *f)
{
    const uint8_t *p = data;
    memset(f, 0, sizeof *f);
    if (avail < ORCH_WIRE_HEADER)
        return 0;
    uint32_t len = orch__le_get32(p);
    int type = p[4];
    if (strcmp(orch_wire_type_name(type), "?") == 0)
        return orch_error_set(-EPROTO, "unknown frame type %d", type);
    if (len > ORCH_WIRE_MAX_BODY)
        return orch_error_set(-EPROTO, "%s frame of %u bytes is over the limit of %zu",
                              orch_wire_type_name(type), len, ORCH_WIRE_MAX_BODY);
    f->type = type;
    f->len = len;
    f->size = ORCH_WIRE_HEADER + (size_t)len;
    if (avail < f->size)
        return 0;
    f->body = p + ORCH_WIRE_HEADER;
    return 1;
}

/* A cursor over one body. The first error is kept in rc (with its detail), after which
 * every read returns zeros and the caller checks rc once. */
struct dec {
    const uint8_t *p;
    size_t left;
    const char *what; /* "REPORT", for messages */
    int rc;
};

static void dec_fail(struct dec *d, const char *why)
{
    if (d->rc == 0)
        d->rc = orch_error_set(-EPROTO, "malformed %s frame: %s", d->what, why);
}

static uint64_t dec_le(struct dec *d, size_t n, const char *field)
{
    if (d->rc < 0)
        return 0;
    if (d->left < n) {
        if (d->rc == 0)
            d->rc =
                orch_error_set(-EPROTO, "malformed %s frame: truncated at %s", d->what, field);
        return 0;
    }
    uint64_t v = orch__le_get(d->p, n);
    d->p += n;
    d->left -= n;
    return v;
}

static uint8_t dec_u8(struct dec *d, const char *field)
{
    return (uint8_t)dec_le(d, 1, field);
}

static uint32_t dec_u32(struct dec *d, const char *field)
{
    return (uint32_t)dec_le(d, 4, field);
}

static uint64_t dec_u64(struct dec *d, const char *field)
{
    return dec_le(d, 8, field);
}

static void *dec_alloc(struct dec *d, struct orch__arena *a, size_t n)
{
    if (d->rc < 0)
        return NULL;
    void *p = orch__arena_alloc(a, n);
    if (p == NULL)
        d->rc = orch_error_set(-ENOMEM, "out of memory decoding a %s frame", d->what);
    return p;
}

/* A string, copied into the arena with a NUL; "" after an error. */
static const char *dec_str(struct dec *d, struct orch__arena *a, const char *field)
{
    uint32_t n = dec_u32(d, field);
    if (d->rc == 0 && d->left < n) {
        d->rc = orch_error_set(-EPROTO, "malformed %s frame: %s of %u bytes is truncated",
                               d->what, field, n);
    }
    if (d->rc == 0 && memchr(d->p, '\0', n) != NULL)
        d->rc =
            orch_error_set(-EPROTO, "malformed %s frame: %s holds a NUL byte", d->what, field);
    char *s = dec_alloc(d, a, (size_t)n + 1);
    if (s == NULL)
        return "";
    memcpy(s, d->p, n);
    s[n] = '\0';
    d->p += n;
    d->left -= n;
    return s;
}

/* u32 n | n bytes, pointing into the frame (values mode: see wire.h, Memory). */
static const void *dec_blob(struct dec *d, size_t *len, const char *field)
{
    uint32_t n = dec_u32(d, field);
    *len = 0;
    if (d->rc == 0 && d->left < n)
        d->rc = orch_error_set(-EPROTO, "malformed %s frame: %s of %u bytes is truncated",
                               d->what, field, n);
    if (d->rc < 0)
        return NULL;
    const void *p = d->p;
    d->p += n;
    d->left -= n;
    *len = n;
    return p;
}

/* Checks that count items of at least `least` bytes each can still fit in the body, so
 * that no count makes an allocation larger than the frame justifies. */
static bool dec_fits(struct dec *d, uint64_t count, size_t least, const char *field)
{
    if (d->rc < 0)
        return false;
    if (count > d->left / least) {
        d->rc = orch_error_set(-EPROTO,
                               "malformed %s frame: %s of %llu does not fit in the %zu "
                               "bytes left",
                               d->what, field, (unsigned long long)count, d->left);
        return false;
    }
    return true;
}

static int dec_start(struct dec *d, const struct orch_wire_frame *f, int type)
{
    d->p = f->body;
    d->left = f->len;
    d->what = orch_wire_type_name(type);
    d->rc = 0;
    if (f->type != type)
        return d->rc = orch_error_set(-EPROTO, "expected a %s frame, got %s",
                                      orch_wire_type_name(type), orch_wire_type_name(f->type));
    if (f->len > 0 && f->body == NULL)
        return d->rc = orch_error_set(-EPROTO, "%s frame without a body", d->what);
    return 0;
}

static int dec_end(struct dec *d)
{
    if (d->rc == 0 && d->left != 0)
        d->rc = orch_error_set(-EPROTO, "malformed %s frame: %zu bytes after its fields",
                               d->what, d->left);
    return d->rc;
}

int orch_wire_get_config(const struct orch_wire_frame *f, struct orch__arena *a,
                         struct orch_wire_config *out)
{
    struct dec d;
    memset(out, 0, sizeof *out);
    if (dec_start(&d, f, ORCH_WIRE_CONFIG) < 0)
        return d.rc;
    uint32_t version = dec_u32(&d, "version");
    if (d.rc == 0 && version != ORCH_WIRE_VERSION)
        d.rc = orch_error_set(-EPROTO, "CONFIG of protocol version %u, this worker speaks %d",
                              version, ORCH_WIRE_VERSION);
    out->call = dec_str(&d, a, "call");
    uint8_t kind = dec_u8(&d, "fn_kind");
    if (d.rc == 0 && kind >= ORCH_FN__COUNT)
        dec_fail(&d, "fn_kind out of range");
    out->fn_kind = (enum orch_fn_kind)kind;
    out->function = dec_str(&d, a, "function");
    out->symbol = dec_str(&d, a, "symbol");
    uint8_t op = dec_u8(&d, "op");
    if (d.rc == 0 && op > ORCH_UDF_OP_REDUCE)
        dec_fail(&d, "op out of range");
    out->op = (enum orch_udf_op)op;
    out->nin = dec_u32(&d, "nin");
    out->nout = dec_u32(&d, "nout");
    out->worker = dec_u32(&d, "worker");
    out->payload_dir = dec_str(&d, a, "payload_dir");
    out->values = dec_u8(&d, "values");
    if (d.rc == 0 && out->values > 1)
        dec_fail(&d, "values is neither 0 nor 1");
    out->max_value = dec_u64(&d, "max_value");
    out->batch = dec_u32(&d, "batch");
    if (d.rc == 0 && out->batch > 1000000) /* the plan's range (orch_plan.h) */
        dec_fail(&d, "batch over 1000000");
    out->nargs = dec_u32(&d, "nargs");
    if (!dec_fits(&d, out->nargs, 8, "nargs"))
        return d.rc;
    const char **keys = dec_alloc(&d, a, sizeof(char *) * (out->nargs + 1));
    const char **vals = dec_alloc(&d, a, sizeof(char *) * (out->nargs + 1));
    for (uint32_t i = 0; i < out->nargs && d.rc == 0; i++) {
        keys[i] = dec_str(&d, a, "argument key");
        vals[i] = dec_str(&d, a, "argument value");
    }
    out->arg_keys = keys;
    out->arg_values = vals;
    return dec_end(&d);
}

int orch_wire_get_hello(const struct orch_wire_frame *f, struct orch_wire_hello *out)
{
    struct dec d;
    memset(out, 0, sizeof *out);
    if (dec_start(&d, f, ORCH_WIRE_HELLO) < 0)
        return d.rc;
    out->version = dec_u32(&d, "version");
    out->pid = dec_u32(&d, "pid");
    if (d.rc == 0 && out->version != ORCH_WIRE_VERSION)
        d.rc = orch_error_set(-EPROTO, "HELLO of protocol version %u, the driver speaks %d",
                              out->version, ORCH_WIRE_VERSION);
    return dec_end(&d);
}

int orch_wire_get_initfail(const struct orch_wire_frame *f, struct orch__arena *a,
                           const char **message)
{
    struct dec d;
    *message = "";
    if (dec_start(&d, f, ORCH_WIRE_INITFAIL) < 0)
        return d.rc;
    *message = dec_str(&d, a, "message");
    return dec_end(&d);
}

/* Smallest encodings, for dec_fits: a record with no inputs, a value, an answer. */
#define WIRE_RECORD_MIN 21u
#define WIRE_VALUE_SIZE 9u
#define WIRE_ANSWER_MIN 37u

/* total values (u8 present | u64 payload [| blob in values mode]) into *out. */
static void get_values(struct dec *d, struct orch__arena *a, uint64_t total, bool values,
                       const struct orch_wire_value **out)
{
    *out = NULL;
    if (!dec_fits(d, total, WIRE_VALUE_SIZE, "the values' count"))
        return;
    struct orch_wire_value *v = dec_alloc(d, a, sizeof *v * (size_t)total);
    for (uint64_t k = 0; k < total && d->rc == 0; k++) {
        uint8_t present = dec_u8(d, "present");
        uint64_t id = dec_u64(d, "payload");
        if (d->rc == 0 && present > 1)
            dec_fail(d, "a value's present flag is neither 0 nor 1");
        if (d->rc == 0 && (present == 1) != (id != 0))
            dec_fail(d, present ? "a present value has payload 0"
                                : "an absent value has a payload");
        v[k].present = present;
        v[k].payload = id;
        v[k].data = NULL;
        v[k].len = 0;
        if (values && present)
            v[k].data = dec_blob(d, &v[k].len, "value");
    }
    *out = v;
}

static void get_record(struct dec *d, struct orch__arena *a, struct orch_wire_record *r,
                       bool values)
{
    r->grain = dec_u64(d, "grain");
    r->generation = dec_u32(d, "generation");
    r->attempt = dec_u32(d, "attempt");
    r->nin = dec_u32(d, "nin");
    if (!dec_fits(d, r->nin, 4, "nin"))
        return;
    uint32_t *nval = dec_alloc(d, a, sizeof(uint32_t) * r->nin);
    uint64_t total = 0;
    for (uint32_t j = 0; j < r->nin && d->rc == 0; j++) {
        nval[j] = dec_u32(d, "nval");
        total += nval[j];
    }
    r->fed = dec_u8(d, "fed");
    if (d->rc == 0 && r->fed > 1)
        dec_fail(d, "fed is neither 0 nor 1");
    if (d->rc == 0 && r->fed && (total > 0 || values))
        dec_fail(d, r->fed && values ? "a fed record in a batch with values"
                                     : "a fed record carries values");
    r->nval = nval;
    get_values(d, a, total, values, &r->vals);
}

int orch_wire_get_batch(const struct orch_wire_frame *f, struct orch__arena *a,
                        struct orch_wire_batch *out)
{
    struct dec d;
    memset(out, 0, sizeof *out);
    if (dec_start(&d, f, ORCH_WIRE_BATCH) < 0)
        return d.rc;
    out->id = dec_u64(&d, "id");
    out->values = dec_u8(&d, "values");
    if (d.rc == 0 && out->values > 1)
        dec_fail(&d, "values is neither 0 nor 1");
    out->nrec = dec_u32(&d, "nrec");
    if (!dec_fits(&d, out->nrec, WIRE_RECORD_MIN, "nrec"))
        return d.rc;
    struct orch_wire_record *rec = dec_alloc(&d, a, sizeof *rec * out->nrec);
    for (uint32_t i = 0; i < out->nrec && d.rc == 0; i++)
        get_record(&d, a, &rec[i], out->values);
    out->rec = rec;
    return dec_end(&d);
}

int orch_wire_get_more(const struct orch_wire_frame *f, struct orch_wire_more *out)
{
    struct dec d;
    memset(out, 0, sizeof *out);
    if (dec_start(&d, f, ORCH_WIRE_MORE) < 0)
        return d.rc;
    out->batch = dec_u64(&d, "batch");
    out->grain = dec_u64(&d, "grain");
    return dec_end(&d);
}

int orch_wire_get_inputs(const struct orch_wire_frame *f, struct orch__arena *a,
                         struct orch_wire_inputs *out)
{
    struct dec d;
    memset(out, 0, sizeof *out);
    if (dec_start(&d, f, ORCH_WIRE_INPUTS) < 0)
        return d.rc;
    out->batch = dec_u64(&d, "batch");
    out->grain = dec_u64(&d, "grain");
    out->last = dec_u8(&d, "last");
    if (d.rc == 0 && out->last > 1)
        dec_fail(&d, "last is neither 0 nor 1");
    out->nin = dec_u32(&d, "nin");
    out->nchild = dec_u32(&d, "nchild");
    if (d.rc == 0 && out->nchild > 0 && out->nin == 0)
        dec_fail(&d, "children without inputs");
    get_values(&d, a, (uint64_t)out->nchild * out->nin, false, &out->vals);
    return dec_end(&d);
}

static void get_answer(struct dec *d, struct orch__arena *a, struct orch_wire_answer *r,
                       bool values)
{
    r->grain = dec_u64(d, "grain");
    r->generation = dec_u32(d, "generation");
    uint8_t outcome = dec_u8(d, "outcome");
    if (d->rc == 0 && outcome >= ORCH_WIRE__COUNT)
        dec_fail(d, "outcome out of range");
    r->outcome = (enum orch_wire_outcome)outcome;
    r->message = dec_str(d, a, "message");
    r->first = dec_u32(d, "first");
    r->nchild = dec_u32(d, "nchild");
    r->nout = dec_u32(d, "nout");
    if (d->rc == 0 && r->outcome != ORCH_WIRE_OK && (r->nchild != 0 || r->nout != 0))
        dec_fail(d, "an answer that is not ok carries payloads");
    if (d->rc == 0 && r->nchild > UINT32_MAX - r->first)
        dec_fail(d, "first + nchild passes 2^32");
    uint64_t n = (uint64_t)r->nchild * r->nout;
    if (!dec_fits(d, n, values ? 1 : 16, "nchild * nout"))
        return;
    uint64_t *ids = NULL, *sizes = NULL;
    struct orch_wire_bytes *vals = NULL;
    if (values) {
        vals = dec_alloc(d, a, sizeof *vals * (size_t)n);
    } else {
        ids = dec_alloc(d, a, sizeof(uint64_t) * (size_t)n);
        sizes = dec_alloc(d, a, sizeof(uint64_t) * (size_t)n);
    }
    for (uint64_t k = 0; k < n && d->rc == 0; k++) {
        if (!values) {
            ids[k] = dec_u64(d, "payload");
            sizes[k] = dec_u64(d, "payload size");
            if (d->rc == 0 && ids[k] == 0 && sizes[k] != 0)
                dec_fail(d, "payload 0 has a size");
            continue;
        }
        vals[k].set = dec_u8(d, "set");
        if (d->rc == 0 && vals[k].set > 1)
            dec_fail(d, "a value's set flag is neither 0 nor 1");
        vals[k].data = NULL;
        vals[k].len = 0;
        if (vals[k].set)
            vals[k].data = dec_blob(d, &vals[k].len, "output value");
    }
    r->payload = ids;
    r->size = sizes;
    r->values = vals;
    r->nfailed = dec_u32(d, "nfailed");
    if (d->rc == 0 && r->nfailed > r->nchild)
        dec_fail(d, "more failed children than children");
    if (!dec_fits(d, r->nfailed, 8, "nfailed"))
        return;
    struct orch_wire_failed_child *fc = dec_alloc(d, a, sizeof *fc * r->nfailed);
    for (uint32_t k = 0; k < r->nfailed && d->rc == 0; k++) {
        fc[k].child = dec_u32(d, "failed child");
        fc[k].message = dec_str(d, a, "failed child message");
        if (d->rc == 0 &&
            (fc[k].child >= r->nchild || (k > 0 && fc[k].child <= fc[k - 1].child)))
            dec_fail(d, "failed children out of order or past nchild");
    }
    r->failed = fc;
    /* Ids are 0 exactly on the failed children. Not a loop over nchild when nout is 0:
     * there are no ids then, and nothing bounds nchild (fuzz_wire found 2^32 turns). */
    for (uint32_t c = 0, k = 0; r->nout > 0 && c < r->nchild && d->rc == 0; c++) {
        bool failed = k < r->nfailed && fc[k].child == c;
        k += failed;
        for (uint32_t p = 0; p < r->nout && d->rc == 0; p++)
            if ((values ? !vals[(uint64_t)c * r->nout + p].set
                        : ids[(uint64_t)c * r->nout + p] == 0) != failed)
                dec_fail(d, failed ? (values ? "a failed child carries a value"
                                             : "a failed child carries a payload id")
                            : values ? "a value that is not set"
                                     : "payload id 0");
    }
    uint32_t nhash = dec_u32(d, "nhash");
    if (d->rc == 0 && nhash != 0 && nhash != r->nchild)
        dec_fail(d, "nhash is neither 0 nor nchild");
    if (!dec_fits(d, nhash, 8, "nhash"))
        return;
    uint64_t *hash = NULL;
    if (nhash > 0 && (hash = dec_alloc(d, a, sizeof *hash * nhash)) != NULL)
        for (uint32_t k = 0; k < nhash && d->rc == 0; k++)
            hash[k] = dec_u64(d, "hash");
    r->hash = hash;
}

int orch_wire_get_report(const struct orch_wire_frame *f, struct orch__arena *a,
                         struct orch_wire_report *out)
{
    struct dec d;
    memset(out, 0, sizeof *out);
    out->message = "";
    if (dec_start(&d, f, ORCH_WIRE_REPORT) < 0)
        return d.rc;
    out->batch = dec_u64(&d, "batch");
    uint8_t status = dec_u8(&d, "status");
    if (d.rc == 0 && status >= ORCH_WIRE_STATUS__COUNT)
        dec_fail(&d, "status out of range");
    out->status = (enum orch_wire_status)status;
    out->message = dec_str(&d, a, "message");
    out->values = dec_u8(&d, "values");
    if (d.rc == 0 && out->values > 1)
        dec_fail(&d, "values is neither 0 nor 1");
    out->nrec = dec_u32(&d, "nrec");
    if (d.rc == 0 && out->status != ORCH_WIRE_STATUS_OK && out->nrec != 0)
        dec_fail(&d, "a failed batch carries answers");
    if (!dec_fits(&d, out->nrec, WIRE_ANSWER_MIN, "nrec"))
        return d.rc;
    struct orch_wire_answer *rec = dec_alloc(&d, a, sizeof *rec * out->nrec);
    for (uint32_t i = 0; i < out->nrec && d.rc == 0; i++)
        get_answer(&d, a, &rec[i], out->values);
    out->rec = rec;
    return dec_end(&d);
}

int orch_wire_get_chunk(const struct orch_wire_frame *f, struct orch__arena *a,
                        struct orch_wire_chunk *out)
{
    struct dec d;
    memset(out, 0, sizeof *out);
    out->a.message = "";
    if (dec_start(&d, f, ORCH_WIRE_CHUNK) < 0)
        return d.rc;
    out->batch = dec_u64(&d, "batch");
    out->values = dec_u8(&d, "values");
    if (d.rc == 0 && out->values > 1)
        dec_fail(&d, "values is neither 0 nor 1");
    get_answer(&d, a, &out->a, out->values);
    if (d.rc == 0 && out->a.outcome != ORCH_WIRE_OK)
        dec_fail(&d, "a chunk that is not ok");
    if (d.rc == 0 && out->a.nchild == 0)
        dec_fail(&d, "a chunk without children");
    if (d.rc == 0 && out->a.hash == NULL)
        dec_fail(&d, "a chunk without its children's hashes");
    return dec_end(&d);
}

int orch_wire_get_challenge(const struct orch_wire_frame *f, struct orch_wire_challenge *out)
{
    struct dec d;
    memset(out, 0, sizeof *out);
    if (dec_start(&d, f, ORCH_WIRE_CHALLENGE) < 0)
        return d.rc;
    out->version = dec_u32(&d, "version");
    if (d.rc == 0 && out->version != ORCH_WIRE_VERSION)
        d.rc = orch_error_set(-EPROTO,
                              "CHALLENGE of protocol version %u, this worker speaks %d",
                              out->version, ORCH_WIRE_VERSION);
    for (size_t i = 0; i < ORCH_WIRE_NONCE; i++)
        out->nonce[i] = dec_u8(&d, "nonce");
    return dec_end(&d);
}

int orch_wire_get_auth(const struct orch_wire_frame *f, struct orch__arena *a,
                       struct orch_wire_auth *out)
{
    struct dec d;
    memset(out, 0, sizeof *out);
    out->host = out->slurm_job = "";
    if (dec_start(&d, f, ORCH_WIRE_AUTH) < 0)
        return d.rc;
    out->token = dec_u64(&d, "token");
    for (size_t i = 0; i < ORCH_WIRE_NONCE; i++)
        out->mac[i] = dec_u8(&d, "mac");
    out->pid = dec_u32(&d, "pid");
    out->host = dec_str(&d, a, "host");
    out->slurm_job = dec_str(&d, a, "slurm_job");
    return dec_end(&d);
}

const char *orch_wire_outcome_name(enum orch_wire_outcome o)
{
    static const char *const names[] = {
#define ORCH_WIRE_OUTCOME_NAME(name, text) text,
        ORCH_WIRE_OUTCOMES(ORCH_WIRE_OUTCOME_NAME)
#undef ORCH_WIRE_OUTCOME_NAME
    };
    if ((unsigned)o >= ORCH_WIRE__COUNT)
        return "?";
    return names[o];
}
