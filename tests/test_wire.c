/* test_wire.c — unit tests of the driver <-> worker frames (engine/worker/wire.h): every frame
 * type round-trips, in ids mode and in values mode (a remote worker's batches and reports,
 * whose value bytes point into the frame), and so do the handshake's CHALLENGE and AUTH;
 * truncated, oversized, mistyped and trailing-garbage frames are clean errors; and a
 * fixed-seed fuzz loop of mutated frames never crashes a decoder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "wire.h"

/* ---- sample messages ------------------------------------------------------------------- */

static const char *const arg_keys[] = {"sep", "kind"};
static const char *const arg_values[] = {"\n", "crash"};

static const struct orch_wire_config sample_config = {
    .call = "ocr",
    .fn_kind = ORCH_FN_LIBRARY,
    .function = "/opt/udf/ocr.so",
    .symbol = "ocr_udf",
    .op = ORCH_UDF_OP_EXPAND_ALIGNED,
    .nin = 2,
    .nout = 3,
    .worker = 7,
    .payload_dir = "/jobs/j1/payloads",
    .nargs = 2,
    .arg_keys = arg_keys,
    .arg_values = arg_values,
};

/* Two records: a map-like one (two lists of one value, the second absent) and a reduce-like
 * one (one list of three values, one list empty). */
static const uint32_t nval0[] = {1, 1};
static const struct orch_wire_value vals0[] = {{.payload = 11, .present = 1},
                                               {.payload = 0, .present = 0}};
static const uint32_t nval1[] = {3, 0};
static const struct orch_wire_value vals1[] = {{.payload = 21, .present = 1},
                                               {.payload = 22, .present = 1},
                                               {.payload = 1ull << 40, .present = 1}};
static const struct orch_wire_record sample_records[] = {
    {.grain = 5, .generation = 2, .attempt = 3, .nin = 2, .nval = nval0, .vals = vals0},
    {.grain = UINT64_MAX,
     .generation = UINT32_MAX,
     .attempt = 1,
     .nin = 2,
     .nval = nval1,
     .vals = vals1},
};
static const struct orch_wire_batch sample_batch = {.id = 42, .nrec = 2, .rec = sample_records};

static const uint64_t ids_map[] = {100};
static const uint64_t sizes_map[] = {12};
static const uint64_t ids_expand[] = {201, 202, 0, 0, 205, 206};
static const uint64_t sizes_expand[] = {3, 0, 0, 0, 1ull << 33, 7}; /* 202 is empty */
static const struct orch_wire_failed_child failed_expand[] = {{1, "page 2 of 3: too large"}};
static const uint64_t hash_expand[] = {0x0123456789abcdefull, 0, UINT64_MAX};
static const struct orch_wire_answer sample_answers[] = {
    {.grain = 1,
     .generation = 1,
     .outcome = ORCH_WIRE_OK,
     .message = "",
     .nchild = 1,
     .nout = 1,
     .payload = ids_map,
     .size = sizes_map},
    {.grain = 2,
     .generation = 4,
     .outcome = ORCH_WIRE_OK,
     .message = "",
     .first = 5,
     .nchild = 3,
     .nout = 2,
     .payload = ids_expand,
     .size = sizes_expand,
     .nfailed = 1,
     .failed = failed_expand,
     .hash = hash_expand},
    {.grain = 3,
     .generation = 1,
     .outcome = ORCH_WIRE_OK,
     .message = "",
     .nchild = 0,
     .nout = 2,
     .payload = NULL},
    {.grain = 4, .generation = 1, .outcome = ORCH_WIRE_DROP, .message = ""},
    {.grain = 5, .generation = 1, .outcome = ORCH_WIRE_KEEP_TRUE, .message = ""},
    {.grain = 6, .generation = 1, .outcome = ORCH_WIRE_KEEP_FALSE, .message = ""},
    {.grain = 7, .generation = 1, .outcome = ORCH_WIRE_RECORD_FAILURE, .message = "bad page"},
    {.grain = 8, .generation = 9, .outcome = ORCH_WIRE_GROUP_FAILURE, .message = "bad pdf"},
};
/* A chunk: children 5, 6 and 7 of grain 2, the second failed. */
static const struct orch_wire_chunk sample_chunk = {.batch = 42,
                                                    .a = {.grain = 2,
                                                          .generation = 4,
                                                          .outcome = ORCH_WIRE_OK,
                                                          .message = "",
                                                          .first = 5,
                                                          .nchild = 3,
                                                          .nout = 2,
                                                          .payload = ids_expand,
                                                          .size = sizes_expand,
                                                          .nfailed = 1,
                                                          .failed = failed_expand,
                                                          .hash = hash_expand}};
static const struct orch_wire_report sample_report = {
    .batch = 42, .status = 0, .message = "", .nrec = 8, .rec = sample_answers};

/* ---- values mode (a remote worker): the same messages, with their bytes ---------------- */

static const char *const remote_keys[] = {"model"};
static const char *const remote_values[] = {"small"};

static const struct orch_wire_config remote_config = {
    .call = "ocr",
    .fn_kind = ORCH_FN_EXEC,
    .function = "python3 ocr.py",
    .symbol = NULL,
    .op = ORCH_UDF_OP_MAP,
    .nin = 2,
    .nout = 1,
    .worker = 3,
    .payload_dir = "",
    .values = 1,
    .max_value = (5ull << 32) | 7, /* every byte of the u64 counts */
    .nargs = 1,
    .arg_keys = remote_keys,
    .arg_values = remote_values,
};

/* A page image with a NUL and a 0xff inside; a value of 300 bytes (filled by fill_big()). */
static const uint8_t page[] = {'%', 'P', 'D', 'F', 0, 1, 2, 0xff};
static uint8_t big_value[300];

static void fill_big(void)
{
    for (size_t i = 0; i < sizeof big_value; i++)
        big_value[i] = (uint8_t)(i * 31 + 7);
}

/* Three records: a map of two inputs (a page, and an absent value), a map whose value is
 * empty (0 bytes), and a reduce of one list of three values. */
static const uint32_t vnval0[] = {1, 1};
static const struct orch_wire_value vvals0[] = {
    {.payload = 11, .present = 1, .data = page, .len = sizeof page},
    {.payload = 0, .present = 0}};
static const uint32_t vnval1[] = {1, 1};
static const struct orch_wire_value vvals1[] = {
    {.payload = 12, .present = 1, .data = NULL, .len = 0},
    {.payload = 13, .present = 1, .data = "x", .len = 1}};
static const uint32_t vnval2[] = {3, 0};
static const struct orch_wire_value vvals2[] = {
    {.payload = 21, .present = 1, .data = "hello", .len = 5},
    {.payload = 22, .present = 1, .data = big_value, .len = sizeof big_value},
    {.payload = 1ull << 40, .present = 1, .data = "", .len = 0}};
static const struct orch_wire_record values_records[] = {
    {.grain = 5, .generation = 2, .attempt = 3, .nin = 2, .nval = vnval0, .vals = vvals0},
    {.grain = 6, .generation = 1, .attempt = 1, .nin = 2, .nval = vnval1, .vals = vvals1},
    {.grain = UINT64_MAX,
     .generation = UINT32_MAX,
     .attempt = 1,
     .nin = 2,
     .nval = vnval2,
     .vals = vvals2},
};
static const struct orch_wire_batch values_batch = {
    .id = 44, .values = 1, .nrec = 3, .rec = values_records};

/* A map answer of two outputs (one empty), an expansion of three children of two outputs
 * whose second child failed (set 0 exactly there), an expansion of no child, a failure. */
static const struct orch_wire_bytes out_map[] = {{.data = "abc", .len = 3, .set = 1},
                                                 {.data = NULL, .len = 0, .set = 1}};
static const struct orch_wire_bytes out_expand[] = {
    {.data = "p1a", .len = 3, .set = 1},
    {.data = page, .len = sizeof page, .set = 1},
    {.set = 0},
    {.set = 0},
    {.data = big_value, .len = sizeof big_value, .set = 1},
    {.data = "p3b", .len = 3, .set = 1}};
static const struct orch_wire_failed_child failed_values[] = {{1, "page 2: too large"}};
static const struct orch_wire_answer values_answers[] = {
    {.grain = 1,
     .generation = 1,
     .outcome = ORCH_WIRE_OK,
     .message = "",
     .nchild = 1,
     .nout = 2,
     .values = out_map},
    {.grain = 2,
     .generation = 4,
     .outcome = ORCH_WIRE_OK,
     .message = "",
     .nchild = 3,
     .nout = 2,
     .values = out_expand,
     .nfailed = 1,
     .failed = failed_values},
    {.grain = 3,
     .generation = 1,
     .outcome = ORCH_WIRE_OK,
     .message = "",
     .nchild = 0,
     .nout = 2,
     .values = NULL},
    {.grain = 7, .generation = 1, .outcome = ORCH_WIRE_RECORD_FAILURE, .message = "bad page"},
};
static const struct orch_wire_report values_report = {
    .batch = 44, .status = 0, .message = "", .values = 1, .nrec = 4, .rec = values_answers};

static const struct orch_wire_challenge sample_challenge = {
    .version = ORCH_WIRE_VERSION,
    .nonce = {0x00, 0xff, 0x01, 0xfe, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70,
              0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0, 0x0f, 0x1f, 0x2f,
              0x3f, 0x4f, 0x5f, 0x6f, 0x7f, 0x8f, 0x9f, 0xaf, 0xbf, 0x00}};

static const struct orch_wire_auth sample_auth = {
    .token = 0x0123456789abcdefull,
    .mac = {0xde, 0xad, 0xbe, 0xef, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
            0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11,
            0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0xff},
    .pid = 4242,
    .host = "node-07.cluster.example",
    .slurm_job = "81234.0"};

/* The frames of encode_all(), in order. */
static const int all_types[] = {ORCH_WIRE_CONFIG,    ORCH_WIRE_HELLO,  ORCH_WIRE_INITFAIL,
                                ORCH_WIRE_BATCH,     ORCH_WIRE_REPORT, ORCH_WIRE_REPORT,
                                ORCH_WIRE_CHALLENGE, ORCH_WIRE_AUTH,   ORCH_WIRE_CONFIG,
                                ORCH_WIRE_BATCH,     ORCH_WIRE_REPORT, ORCH_WIRE_CHUNK};
#define NFRAMES (sizeof all_types / sizeof all_types[0])

/* Encodes one frame of each type into b, in the order CONFIG, HELLO, INITFAIL, BATCH,
 * REPORT, REPORT(failed), CHALLENGE, AUTH, then values mode: CONFIG, BATCH, REPORT. */
static void encode_all(struct orch_wire_buf *b)
{
    struct orch_wire_hello h = {.version = ORCH_WIRE_VERSION, .pid = 4321};
    struct orch_wire_report failed = {.batch = 43, .status = 1, .message = "flaky: attempt 1"};
    fill_big();
    assert_int_equal(orch_wire_put_config(b, &sample_config), 0);
    assert_int_equal(orch_wire_put_hello(b, &h), 0);
    assert_int_equal(orch_wire_put_initfail(b, "split: argument sep is required"), 0);
    assert_int_equal(orch_wire_put_batch(b, &sample_batch), 0);
    assert_int_equal(orch_wire_put_report(b, &sample_report), 0);
    assert_int_equal(orch_wire_put_report(b, &failed), 0);
    assert_int_equal(orch_wire_put_challenge(b, &sample_challenge), 0);
    assert_int_equal(orch_wire_put_auth(b, &sample_auth), 0);
    assert_int_equal(orch_wire_put_config(b, &remote_config), 0);
    assert_int_equal(orch_wire_put_batch(b, &values_batch), 0);
    assert_int_equal(orch_wire_put_report(b, &values_report), 0);
    assert_int_equal(orch_wire_put_chunk(b, &sample_chunk), 0);
}

/* ---- round trips ----------------------------------------------------------------------- */

static void check_config(const struct orch_wire_config *c)
{
    assert_string_equal(c->call, "ocr");
    assert_int_equal(c->fn_kind, ORCH_FN_LIBRARY);
    assert_string_equal(c->function, "/opt/udf/ocr.so");
    assert_string_equal(c->symbol, "ocr_udf");
    assert_int_equal(c->op, ORCH_UDF_OP_EXPAND_ALIGNED);
    assert_int_equal(c->nin, 2);
    assert_int_equal(c->nout, 3);
    assert_int_equal(c->worker, 7);
    assert_string_equal(c->payload_dir, "/jobs/j1/payloads");
    assert_int_equal(c->values, 0);
    assert_true(c->max_value == 0);
    assert_int_equal(c->nargs, 2);
    assert_string_equal(c->arg_keys[0], "sep");
    assert_string_equal(c->arg_values[0], "\n");
    assert_string_equal(c->arg_keys[1], "kind");
    assert_string_equal(c->arg_values[1], "crash");
}

static void check_batch(const struct orch_wire_batch *b)
{
    assert_int_equal(b->id, 42);
    assert_int_equal(b->values, 0);
    assert_int_equal(b->nrec, 2);
    for (uint32_t i = 0; i < 2; i++) {
        const struct orch_wire_record *x = &b->rec[i], *y = &sample_records[i];
        assert_true(x->grain == y->grain);
        assert_int_equal(x->generation, y->generation);
        assert_int_equal(x->attempt, y->attempt);
        assert_int_equal(x->nin, y->nin);
        uint32_t nv = 0;
        for (uint32_t j = 0; j < x->nin; j++) {
            assert_int_equal(x->nval[j], y->nval[j]);
            nv += x->nval[j];
        }
        for (uint32_t k = 0; k < nv; k++) {
            assert_int_equal(x->vals[k].present, y->vals[k].present);
            assert_true(x->vals[k].payload == y->vals[k].payload);
            assert_null(x->vals[k].data); /* no bytes travel outside values mode */
            assert_int_equal(x->vals[k].len, 0);
        }
    }
}

/* What an answer carries after its outputs: failed children, first ordinal, hashes. */
static void check_answer_tail(const struct orch_wire_answer *x, const struct orch_wire_answer *y)
{
    assert_int_equal(x->nfailed, y->nfailed);
    for (uint32_t k = 0; k < x->nfailed; k++) {
        assert_int_equal(x->failed[k].child, y->failed[k].child);
        assert_string_equal(x->failed[k].message, y->failed[k].message);
    }
    assert_int_equal(x->first, y->first);
    assert_int_equal(x->hash != NULL, y->hash != NULL);
    for (uint32_t k = 0; y->hash && k < x->nchild; k++)
        assert_true(x->hash[k] == y->hash[k]);
}

static void check_report(const struct orch_wire_report *r)
{
    assert_true(r->batch == 42);
    assert_int_equal(r->status, 0);
    assert_string_equal(r->message, "");
    assert_int_equal(r->values, 0);
    assert_int_equal(r->nrec, 8);
    for (uint32_t i = 0; i < r->nrec; i++) {
        const struct orch_wire_answer *x = &r->rec[i], *y = &sample_answers[i];
        assert_true(x->grain == y->grain);
        assert_int_equal(x->generation, y->generation);
        assert_int_equal(x->outcome, y->outcome);
        assert_string_equal(x->message, y->message);
        assert_int_equal(x->nchild, y->nchild);
        assert_int_equal(x->nout, y->nout);
        assert_null(x->values);
        for (uint32_t k = 0; k < x->nchild * x->nout; k++) {
            assert_true(x->payload[k] == y->payload[k]);
            assert_true(x->size[k] == y->size[k]);
        }
        check_answer_tail(x, y);
    }
}

static void check_remote_config(const struct orch_wire_config *c)
{
    assert_string_equal(c->call, "ocr");
    assert_int_equal(c->fn_kind, ORCH_FN_EXEC);
    assert_string_equal(c->function, "python3 ocr.py");
    assert_string_equal(c->symbol, "");
    assert_int_equal(c->op, ORCH_UDF_OP_MAP);
    assert_int_equal(c->nin, 2);
    assert_int_equal(c->nout, 1);
    assert_int_equal(c->worker, 3);
    assert_string_equal(c->payload_dir, "");
    assert_int_equal(c->values, 1);
    assert_true(c->max_value == ((5ull << 32) | 7));
    assert_int_equal(c->nargs, 1);
    assert_string_equal(c->arg_keys[0], "model");
    assert_string_equal(c->arg_values[0], "small");
}

/* A decoded value's bytes: those that were sent, lying in the frame's body (wire.h,
 * Memory: they are not copied). */
static void check_bytes(const void *got, size_t got_len, const void *want, size_t want_len,
                        const struct orch_wire_frame *f)
{
    assert_int_equal(got_len, want_len);
    assert_non_null(got);
    const uint8_t *p = got;
    assert_true(p >= f->body && p + got_len <= f->body + f->len);
    if (want_len > 0)
        assert_memory_equal(got, want, want_len);
}

static void check_values_batch(const struct orch_wire_batch *x, const struct orch_wire_frame *f)
{
    const struct orch_wire_batch *y = &values_batch;
    assert_true(x->id == y->id);
    assert_int_equal(x->values, 1);
    assert_int_equal(x->nrec, y->nrec);
    for (uint32_t i = 0; i < x->nrec; i++) {
        const struct orch_wire_record *xr = &x->rec[i], *yr = &y->rec[i];
        assert_true(xr->grain == yr->grain);
        assert_int_equal(xr->generation, yr->generation);
        assert_int_equal(xr->attempt, yr->attempt);
        assert_int_equal(xr->nin, yr->nin);
        uint32_t nv = 0;
        for (uint32_t j = 0; j < xr->nin; j++) {
            assert_int_equal(xr->nval[j], yr->nval[j]);
            nv += xr->nval[j];
        }
        for (uint32_t k = 0; k < nv; k++) {
            const struct orch_wire_value *u = &xr->vals[k], *v = &yr->vals[k];
            assert_int_equal(u->present, v->present);
            assert_true(u->payload == v->payload);
            if (!v->present) {
                assert_null(u->data);
                assert_int_equal(u->len, 0);
                continue;
            }
            check_bytes(u->data, u->len, v->data, v->len, f);
        }
    }
}

static void check_values_report(const struct orch_wire_report *r,
                                const struct orch_wire_frame *f)
{
    const struct orch_wire_report *y = &values_report;
    assert_true(r->batch == y->batch);
    assert_int_equal(r->status, 0);
    assert_string_equal(r->message, "");
    assert_int_equal(r->values, 1);
    assert_int_equal(r->nrec, y->nrec);
    for (uint32_t i = 0; i < r->nrec; i++) {
        const struct orch_wire_answer *x = &r->rec[i], *w = &y->rec[i];
        assert_true(x->grain == w->grain);
        assert_int_equal(x->generation, w->generation);
        assert_int_equal(x->outcome, w->outcome);
        assert_string_equal(x->message, w->message);
        assert_int_equal(x->nchild, w->nchild);
        assert_int_equal(x->nout, w->nout);
        assert_null(x->payload); /* values mode: no ids */
        for (uint32_t k = 0; k < x->nchild * x->nout; k++) {
            assert_int_equal(x->values[k].set, w->values[k].set);
            if (!w->values[k].set) {
                assert_null(x->values[k].data);
                assert_int_equal(x->values[k].len, 0);
                continue;
            }
            check_bytes(x->values[k].data, x->values[k].len, w->values[k].data,
                        w->values[k].len, f);
        }
        assert_int_equal(x->nfailed, w->nfailed);
        for (uint32_t k = 0; k < x->nfailed; k++) {
            assert_int_equal(x->failed[k].child, w->failed[k].child);
            assert_string_equal(x->failed[k].message, w->failed[k].message);
        }
    }
}

/* Encodes a report of one expand answer with the given ids and failed children, and
 * decodes it: returns what the decoder says. */
static int failed_children_decode(const uint64_t *ids, uint32_t nchild,
                                  const struct orch_wire_failed_child *fc, uint32_t nfailed)
{
    uint64_t sizes[8] = {0}; /* 0 bytes each: a size says nothing about which child failed */
    assert_true(nchild <= 8);
    struct orch_wire_answer a = {.grain = 1,
                                 .generation = 1,
                                 .outcome = ORCH_WIRE_OK,
                                 .message = "",
                                 .nchild = nchild,
                                 .nout = 1,
                                 .payload = ids,
                                 .size = sizes,
                                 .nfailed = nfailed,
                                 .failed = fc};
    struct orch_wire_report r = {.batch = 1, .nrec = 1, .rec = &a, .message = ""};
    struct orch_wire_buf b = {0};
    assert_int_equal(orch_wire_put_report(&b, &r), 0);
    struct orch_wire_frame f;
    assert_int_equal(orch_wire_next(b.data, b.len, &f), 1);
    struct orch__arena ar = {0};
    struct orch_wire_report out;
    int rc = orch_wire_get_report(&f, &ar, &out);
    orch__arena_free(&ar);
    orch_wire_buf_free(&b);
    return rc;
}

/* Failed children: ids are 0 exactly on them, and they come in order, inside nchild. */
static void test_failed_children(void **state)
{
    (void)state;
    const uint64_t ok_ids[] = {5, 0, 7, 0};
    const struct orch_wire_failed_child two[] = {{1, "a"}, {3, "b"}};
    assert_int_equal(failed_children_decode(ok_ids, 4, two, 2), 0);
    /* a failed child with an id; a zero id on a child that did not fail */
    const uint64_t with_id[] = {5, 6, 7, 0};
    assert_int_equal(failed_children_decode(with_id, 4, two, 2), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "failed child carries a payload id"));
    assert_int_equal(failed_children_decode(ok_ids, 4, two, 1), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "payload id 0"));
    /* out of order, repeated, past nchild, more than nchild */
    const struct orch_wire_failed_child back[] = {{3, "b"}, {1, "a"}};
    assert_int_equal(failed_children_decode(ok_ids, 4, back, 2), -EPROTO);
    const struct orch_wire_failed_child same[] = {{1, "a"}, {1, "b"}};
    assert_int_equal(failed_children_decode(ok_ids, 4, same, 2), -EPROTO);
    const uint64_t one[] = {0};
    const struct orch_wire_failed_child past[] = {{1, "a"}};
    assert_int_equal(failed_children_decode(one, 1, past, 1), -EPROTO);
    const struct orch_wire_failed_child first[] = {{0, "a"}, {1, "b"}};
    assert_int_equal(failed_children_decode(one, 1, first, 2), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "more failed children than children"));
}

static void test_roundtrip(void **state)
{
    (void)state;
    struct orch_wire_buf b = {0};
    encode_all(&b);
    struct orch__arena a = {0};
    size_t off = 0;
    for (size_t i = 0; i < NFRAMES; i++) {
        struct orch_wire_frame f;
        assert_int_equal(orch_wire_next(b.data + off, b.len - off, &f), 1);
        assert_int_equal(f.type, all_types[i]);
        off += f.size;
        switch (i) {
        case 0: {
            struct orch_wire_config c;
            assert_int_equal(orch_wire_get_config(&f, &a, &c), 0);
            check_config(&c);
            break;
        }
        case 1: {
            struct orch_wire_hello h;
            assert_int_equal(orch_wire_get_hello(&f, &h), 0);
            assert_int_equal(h.pid, 4321);
            assert_int_equal(h.version, ORCH_WIRE_VERSION);
            break;
        }
        case 2: {
            const char *m;
            assert_int_equal(orch_wire_get_initfail(&f, &a, &m), 0);
            assert_string_equal(m, "split: argument sep is required");
            break;
        }
        case 3: {
            struct orch_wire_batch x;
            assert_int_equal(orch_wire_get_batch(&f, &a, &x), 0);
            check_batch(&x);
            break;
        }
        case 4: {
            struct orch_wire_report r;
            assert_int_equal(orch_wire_get_report(&f, &a, &r), 0);
            check_report(&r);
            break;
        }
        case 5: {
            struct orch_wire_report r;
            assert_int_equal(orch_wire_get_report(&f, &a, &r), 0);
            assert_true(r.batch == 43);
            assert_int_equal(r.status, 1);
            assert_string_equal(r.message, "flaky: attempt 1");
            assert_int_equal(r.nrec, 0);
            break;
        }
        case 6: {
            struct orch_wire_challenge c;
            assert_int_equal(orch_wire_get_challenge(&f, &c), 0);
            assert_int_equal(f.len, 4 + ORCH_WIRE_NONCE);
            assert_int_equal(c.version, ORCH_WIRE_VERSION);
            assert_memory_equal(c.nonce, sample_challenge.nonce, ORCH_WIRE_NONCE);
            break;
        }
        case 7: {
            struct orch_wire_auth au;
            assert_int_equal(orch_wire_get_auth(&f, &a, &au), 0);
            assert_true(au.token == sample_auth.token);
            assert_memory_equal(au.mac, sample_auth.mac, ORCH_WIRE_NONCE);
            assert_int_equal(au.pid, 4242);
            assert_string_equal(au.host, "node-07.cluster.example");
            assert_string_equal(au.slurm_job, "81234.0");
            break;
        }
        case 8: {
            struct orch_wire_config c;
            assert_int_equal(orch_wire_get_config(&f, &a, &c), 0);
            check_remote_config(&c);
            break;
        }
        case 9: {
            struct orch_wire_batch x;
            assert_int_equal(orch_wire_get_batch(&f, &a, &x), 0);
            check_values_batch(&x, &f);
            break;
        }
        case 10: {
            struct orch_wire_report r;
            assert_int_equal(orch_wire_get_report(&f, &a, &r), 0);
            check_values_report(&r, &f);
            break;
        }
        case 11: {
            struct orch_wire_chunk c;
            assert_int_equal(orch_wire_get_chunk(&f, &a, &c), 0);
            assert_true(c.batch == 42);
            assert_int_equal(c.values, 0);
            assert_true(c.a.grain == 2);
            assert_int_equal(c.a.nchild, 3);
            for (uint32_t k = 0; k < 6; k++)
                assert_true(c.a.payload[k] == ids_expand[k] && c.a.size[k] == sizes_expand[k]);
            check_answer_tail(&c.a, &sample_chunk.a);
            break;
        }
        }
    }
    assert_int_equal(off, b.len);
    struct orch_wire_frame f;
    assert_int_equal(orch_wire_next(b.data + off, 0, &f), 0);
    orch__arena_free(&a);
    orch_wire_buf_free(&b);
}

/* A config without a symbol nor arguments; the frame header is little-endian. */
static void test_config_minimal_and_layout(void **state)
{
    (void)state;
    struct orch_wire_config c = {.call = "up",
                                 .fn_kind = ORCH_FN_BUILTIN,
                                 .function = "upper",
                                 .symbol = NULL,
                                 .op = ORCH_UDF_OP_MAP,
                                 .nin = 1,
                                 .nout = 1,
                                 .payload_dir = "p"};
    struct orch_wire_buf b = {0};
    assert_int_equal(orch_wire_put_config(&b, &c), 0);
    size_t body = b.len - ORCH_WIRE_HEADER;
    assert_int_equal(b.data[0], body & 0xff);
    assert_int_equal(b.data[1], (body >> 8) & 0xff);
    assert_int_equal(b.data[2], 0);
    assert_int_equal(b.data[3], 0);
    assert_int_equal(b.data[4], ORCH_WIRE_CONFIG);
    assert_int_equal(b.data[5], ORCH_WIRE_VERSION); /* u32 version, little-endian */
    struct orch_wire_frame f;
    struct orch__arena a = {0};
    struct orch_wire_config d;
    assert_int_equal(orch_wire_next(b.data, b.len, &f), 1);
    assert_int_equal(orch_wire_get_config(&f, &a, &d), 0);
    assert_string_equal(d.symbol, "");
    assert_int_equal(d.nargs, 0);
    assert_string_equal(d.function, "upper");
    orch__arena_free(&a);
    orch_wire_buf_free(&b);
}

/* ---- errors
 * ------------------------------------------------------------------------------------ */

static int decode_any(const struct orch_wire_frame *f, struct orch__arena *a)
{
    switch (f->type) {
    case ORCH_WIRE_CONFIG: {
        struct orch_wire_config c;
        return orch_wire_get_config(f, a, &c);
    }
    case ORCH_WIRE_HELLO: {
        struct orch_wire_hello h;
        return orch_wire_get_hello(f, &h);
    }
    case ORCH_WIRE_INITFAIL: {
        const char *m;
        return orch_wire_get_initfail(f, a, &m);
    }
    case ORCH_WIRE_BATCH: {
        struct orch_wire_batch b;
        return orch_wire_get_batch(f, a, &b);
    }
    case ORCH_WIRE_REPORT: {
        struct orch_wire_report r;
        return orch_wire_get_report(f, a, &r);
    }
    case ORCH_WIRE_CHALLENGE: {
        struct orch_wire_challenge c;
        return orch_wire_get_challenge(f, &c);
    }
    case ORCH_WIRE_AUTH: {
        struct orch_wire_auth au;
        return orch_wire_get_auth(f, a, &au);
    }
    case ORCH_WIRE_CHUNK: {
        struct orch_wire_chunk c;
        return orch_wire_get_chunk(f, a, &c);
    }
    case ORCH_WIRE_MORE: {
        struct orch_wire_more m;
        return orch_wire_get_more(f, &m);
    }
    case ORCH_WIRE_INPUTS: {
        struct orch_wire_inputs in;
        return orch_wire_get_inputs(f, a, &in);
    }
    }
    return -EPROTO;
}

/* Every prefix of every frame is "need more"; every frame whose body is cut short (its
 * length patched down) or padded (a byte added) is -EPROTO. */
static void test_truncated_and_padded(void **state)
{
    (void)state;
    struct orch_wire_buf b = {0};
    encode_all(&b);
    size_t off = 0;
    while (off < b.len) {
        struct orch_wire_frame f;
        assert_int_equal(orch_wire_next(b.data + off, b.len - off, &f), 1);
        for (size_t k = 0; k < f.size; k++) {
            struct orch_wire_frame g;
            assert_int_equal(orch_wire_next(b.data + off, k, &g), 0);
            if (k >= ORCH_WIRE_HEADER)
                assert_int_equal(g.size, f.size);
        }
        /* A copy with a shorter body. */
        for (size_t cut = 1; cut <= f.len; cut++) {
            size_t n = f.size - cut;
            uint8_t *c = malloc(n);
            memcpy(c, b.data + off, n);
            uint32_t len = (uint32_t)(f.len - cut);
            for (int i = 0; i < 4; i++)
                c[i] = (uint8_t)(len >> (8 * i));
            struct orch_wire_frame g;
            struct orch__arena a = {0};
            assert_int_equal(orch_wire_next(c, n, &g), 1);
            orch_error_clear();
            assert_int_equal(decode_any(&g, &a), -EPROTO);
            assert_non_null(strstr(orch_error_detail(), "malformed"));
            orch__arena_free(&a);
            free(c);
        }
        /* A copy with one byte too many. */
        {
            size_t n = f.size + 1;
            uint8_t *c = malloc(n);
            memcpy(c, b.data + off, f.size);
            c[f.size] = 0;
            uint32_t len = (uint32_t)(f.len + 1);
            for (int i = 0; i < 4; i++)
                c[i] = (uint8_t)(len >> (8 * i));
            struct orch_wire_frame g;
            struct orch__arena a = {0};
            assert_int_equal(orch_wire_next(c, n, &g), 1);
            assert_int_equal(decode_any(&g, &a), -EPROTO);
            assert_non_null(strstr(orch_error_detail(), "after its fields"));
            orch__arena_free(&a);
            free(c);
        }
        off += f.size;
    }
    orch_wire_buf_free(&b);
}

static void test_bad_headers(void **state)
{
    (void)state;
    struct orch_wire_frame f;
    /* Unknown types. */
    uint8_t h0[] = {0, 0, 0, 0, 0};
    assert_int_equal(orch_wire_next(h0, sizeof h0, &f), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "unknown frame type 0"));
    uint8_t h99[] = {1, 0, 0, 0, 99, 0};
    assert_int_equal(orch_wire_next(h99, sizeof h99, &f), -EPROTO);
    /* Over the limit: refused from the header alone, before any body arrives. */
    uint32_t big = (uint32_t)ORCH_WIRE_MAX_BODY + 1;
    uint8_t hb[] = {(uint8_t)big, (uint8_t)(big >> 8), (uint8_t)(big >> 16),
                    (uint8_t)(big >> 24), ORCH_WIRE_REPORT};
    assert_int_equal(orch_wire_next(hb, sizeof hb, &f), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "over the limit"));
    uint8_t hmax[] = {0xff, 0xff, 0xff, 0xff, ORCH_WIRE_BATCH};
    assert_int_equal(orch_wire_next(hmax, sizeof hmax, &f), -EPROTO);
    /* Exactly at the limit is fine (and needs more bytes). */
    uint32_t lim = (uint32_t)ORCH_WIRE_MAX_BODY;
    uint8_t hl[] = {(uint8_t)lim, (uint8_t)(lim >> 8), (uint8_t)(lim >> 16),
                    (uint8_t)(lim >> 24), ORCH_WIRE_BATCH};
    assert_int_equal(orch_wire_next(hl, sizeof hl, &f), 0);
    assert_int_equal(f.size, ORCH_WIRE_HEADER + ORCH_WIRE_MAX_BODY);
    /* A frame decoded as the wrong type. */
    struct orch_wire_buf b = {0};
    assert_int_equal(orch_wire_put_initfail(&b, "x"), 0);
    assert_int_equal(orch_wire_next(b.data, b.len, &f), 1);
    struct orch__arena a = {0};
    struct orch_wire_report r;
    assert_int_equal(orch_wire_get_report(&f, &a, &r), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "expected a REPORT frame, got INITFAIL"));
    orch__arena_free(&a);
    orch_wire_buf_free(&b);
}

/* Builds a frame by hand: header, then the given body. */
static size_t frame(uint8_t *out, int type, const uint8_t *body, size_t n)
{
    out[0] = (uint8_t)n;
    out[1] = (uint8_t)(n >> 8);
    out[2] = (uint8_t)(n >> 16);
    out[3] = (uint8_t)(n >> 24);
    out[4] = (uint8_t)type;
    memcpy(out + 5, body, n);
    return n + 5;
}

/* Decodes a hand-made frame from a buffer of its exact size, so that ASan sees any read
 * past it. */
static int decode_raw(int type, const uint8_t *body, size_t n)
{
    uint8_t *buf = malloc(ORCH_WIRE_HEADER + n);
    assert_non_null(buf);
    size_t len = frame(buf, type, body, n);
    struct orch_wire_frame f;
    assert_int_equal(orch_wire_next(buf, len, &f), 1);
    struct orch__arena a = {0};
    orch_error_clear();
    int rc = decode_any(&f, &a);
    orch__arena_free(&a);
    free(buf);
    return rc;
}

/* Counts that cannot fit, enums out of range, NULs in strings, id 0 where one is due. */
static void test_semantic_refusals(void **state)
{
    (void)state;
    /* BATCH claiming 2^32-1 records in a 12-byte body: refused before any allocation. */
    uint8_t huge[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(decode_raw(ORCH_WIRE_BATCH, huge, sizeof huge), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "does not fit"));
    /* A BATCH record whose value says present with payload 0. */
    uint8_t zero[] = {1, 0, 0, 0, 0, 0, 0, 0, /* id */
                      0,                      /* values */
                      1, 0, 0, 0,             /* nrec */
                      9, 0, 0, 0, 0, 0, 0, 0, /* grain */
                      1, 0, 0, 0, 1, 0, 0, 0, /* generation, attempt */
                      1, 0, 0, 0, 1, 0, 0, 0, /* nin, nval */
                      0,                      /* fed */
                      1, 0, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(decode_raw(ORCH_WIRE_BATCH, zero, sizeof zero), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "payload 0"));
    zero[sizeof zero - 9] = 2; /* present = 2 */
    assert_int_equal(decode_raw(ORCH_WIRE_BATCH, zero, sizeof zero), -EPROTO);
    /* REPORT: status 3 (unknown); status 2 (storage) is known; then an outcome out of
     * range; then a drop with payloads. */
    uint8_t rep[] = {1, 0, 0, 0, 0, 0, 0, 0, /* batch */
                     3,                      /* status */
                     0, 0, 0, 0,             /* message "" */
                     0,                      /* values */
                     0, 0, 0, 0};            /* nrec */
    assert_int_equal(decode_raw(ORCH_WIRE_REPORT, rep, sizeof rep), -EPROTO);
    rep[8] = ORCH_WIRE_STATUS_STORAGE;
    assert_int_equal(decode_raw(ORCH_WIRE_REPORT, rep, sizeof rep), 0);
    rep[8] = 0;
    assert_int_equal(decode_raw(ORCH_WIRE_REPORT, rep, sizeof rep), 0);
    uint8_t ans[] = {1,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0, /* values */
                     1,
                     0,
                     0,
                     0, /* batch 1, ok, 1 */
                     7,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     1,
                     0,
                     0,
                     0,                /* grain, gen */
                     ORCH_WIRE__COUNT, /* outcome */
                     0,
                     0,
                     0,
                     0, /* message */
                     0,
                     0,
                     0,
                     0, /* first */
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0, /* nchild, nout */
                     0,
                     0,
                     0,
                     0, /* nfailed */
                     0,
                     0,
                     0,
                     0}; /* nhash */
    assert_int_equal(decode_raw(ORCH_WIRE_REPORT, ans, sizeof ans), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "outcome"));
    ans[30] = ORCH_WIRE_DROP;
    assert_int_equal(decode_raw(ORCH_WIRE_REPORT, ans, sizeof ans), 0);
    ans[39] = 1; /* nchild 1 */
    ans[43] = 1; /* nout 1: a drop with a payload id... that is not even there */
    assert_int_equal(decode_raw(ORCH_WIRE_REPORT, ans, sizeof ans), -EPROTO);
    /* A failed report with answers. */
    uint8_t failed[] = {1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    assert_int_equal(decode_raw(ORCH_WIRE_REPORT, failed, sizeof failed), -EPROTO);
    /* INITFAIL with a NUL inside its message. */
    uint8_t nul[] = {3, 0, 0, 0, 'a', 0, 'b'};
    assert_int_equal(decode_raw(ORCH_WIRE_INITFAIL, nul, sizeof nul), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "NUL"));
    /* HELLO of another version. */
    uint8_t hello[] = {0xee, 0, 0, 0, 1, 0, 0, 0};
    assert_int_equal(decode_raw(ORCH_WIRE_HELLO, hello, sizeof hello), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "version"));
    /* A string length that runs past the body. */
    uint8_t past[] = {0xff, 0xff, 0, 0, 'x'};
    assert_int_equal(decode_raw(ORCH_WIRE_INITFAIL, past, sizeof past), -EPROTO);
}

/* A body written by hand, field by field (little-endian): frames the encoder would never
 * make. */
struct body {
    uint8_t d[512];
    size_t n;
};

static void put_le(struct body *b, uint64_t v, size_t n)
{
    assert_true(b->n + n <= sizeof b->d);
    for (size_t i = 0; i < n; i++)
        b->d[b->n++] = (uint8_t)(v >> (8 * i));
}

static void put_bytes(struct body *b, const void *p, size_t n)
{
    assert_true(b->n + n <= sizeof b->d);
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

/* A string or a value: u32 n | n bytes. */
static void put_blob(struct body *b, const void *p, size_t n)
{
    put_le(b, n, 4);
    put_bytes(b, p, n);
}

/* REPORT head (batch 1, ok, no message, `values`, one answer) and the answer's head (ok,
 * nchild, nout); its outputs and failed children follow. */
static void report_answer_head(struct body *b, uint8_t values, uint32_t nchild, uint32_t nout)
{
    b->n = 0;
    put_le(b, 1, 8); /* batch */
    put_le(b, ORCH_WIRE_STATUS_OK, 1);
    put_blob(b, "", 0);
    put_le(b, values, 1);
    put_le(b, 1, 4); /* nrec */
    put_le(b, 9, 8); /* grain */
    put_le(b, 1, 4); /* generation */
    put_le(b, ORCH_WIRE_OK, 1);
    put_blob(b, "", 0);
    put_le(b, 0, 4); /* first */
    put_le(b, nchild, 4);
    put_le(b, nout, 4);
}

static int decode_body(int type, const struct body *b)
{
    return decode_raw(type, b->d, b->n);
}

static void assert_detail(const char *part)
{
    if (strstr(orch_error_detail(), part) == NULL)
        fail_msg("detail \"%s\" does not say \"%s\"", orch_error_detail(), part);
}

/* Values mode: what a remote worker (or anyone who reaches the port) may not send. */
static void test_values_refusals(void **state)
{
    (void)state;
    struct body b;
    /* The reference: two children of one output, the second failed: accepted. Then the
     * same bytes with the values flag off are not a report of ids. */
    report_answer_head(&b, 1, 2, 1);
    put_le(&b, 1, 1);
    put_blob(&b, "a", 1);
    put_le(&b, 0, 1);
    put_le(&b, 1, 4); /* nfailed */
    put_le(&b, 1, 4);
    put_blob(&b, "", 0);
    put_le(&b, 0, 4); /* nhash */
    assert_int_equal(decode_body(ORCH_WIRE_REPORT, &b), 0);
    b.d[13] = 0; /* the values flag: batch 8, status 1, message 4 */
    assert_int_equal(decode_body(ORCH_WIRE_REPORT, &b), -EPROTO);
    b.d[13] = 2;
    assert_int_equal(decode_body(ORCH_WIRE_REPORT, &b), -EPROTO);
    assert_detail("values is neither 0 nor 1");

    /* A set flag of 2. */
    report_answer_head(&b, 1, 1, 1);
    put_le(&b, 2, 1);
    put_blob(&b, "x", 1);
    put_le(&b, 0, 4);
    assert_int_equal(decode_body(ORCH_WIRE_REPORT, &b), -EPROTO);
    assert_detail("set flag is neither 0 nor 1");

    /* A value whose length runs past the body. */
    report_answer_head(&b, 1, 1, 1);
    put_le(&b, 1, 1);
    put_le(&b, 100, 4);
    put_bytes(&b, "abc", 3);
    assert_int_equal(decode_body(ORCH_WIRE_REPORT, &b), -EPROTO);
    assert_detail("output value of 100 bytes is truncated");
    report_answer_head(&b, 1, 1, 1);
    put_le(&b, 1, 1);
    put_le(&b, UINT32_MAX, 4);
    put_le(&b, 0, 8); /* nfailed, nhash: the least an answer takes */
    assert_int_equal(decode_body(ORCH_WIRE_REPORT, &b), -EPROTO);
    assert_detail("truncated");

    /* A failed child that carries a value. */
    report_answer_head(&b, 1, 2, 1);
    put_le(&b, 1, 1);
    put_blob(&b, "a", 1);
    put_le(&b, 1, 1);
    put_blob(&b, "b", 1);
    put_le(&b, 1, 4);
    put_le(&b, 1, 4);
    put_blob(&b, "gone", 4);
    assert_int_equal(decode_body(ORCH_WIRE_REPORT, &b), -EPROTO);
    assert_detail("a failed child carries a value");

    /* A value that is not set on a child that did not fail. */
    report_answer_head(&b, 1, 2, 1);
    put_le(&b, 1, 1);
    put_blob(&b, "a", 1);
    put_le(&b, 0, 1);
    put_le(&b, 0, 4);
    assert_int_equal(decode_body(ORCH_WIRE_REPORT, &b), -EPROTO);
    assert_detail("a value that is not set");

    /* BATCH: a values flag of 2; a value whose length runs past the body. */
    b.n = 0;
    put_le(&b, 1, 8);
    put_le(&b, 2, 1);
    put_le(&b, 0, 4);
    assert_int_equal(decode_body(ORCH_WIRE_BATCH, &b), -EPROTO);
    assert_detail("values is neither 0 nor 1");
    b.d[8] = 1;
    assert_int_equal(decode_body(ORCH_WIRE_BATCH, &b), 0);
    b.n = 0;
    put_le(&b, 1, 8);
    put_le(&b, 1, 1); /* values */
    put_le(&b, 1, 4); /* nrec */
    put_le(&b, 5, 8); /* grain */
    put_le(&b, 1, 4);
    put_le(&b, 1, 4);
    put_le(&b, 1, 4); /* nin */
    put_le(&b, 1, 4); /* nval */
    put_le(&b, 0, 1); /* fed */
    put_le(&b, 1, 1); /* present */
    put_le(&b, 77, 8);
    put_le(&b, 50, 4);
    put_bytes(&b, "abcd", 4);
    assert_int_equal(decode_body(ORCH_WIRE_BATCH, &b), -EPROTO);
    assert_detail("value of 50 bytes is truncated");

    /* CONFIG: a values flag of 2 (it sits 17 bytes before the end with no arguments). */
    struct orch_wire_config c = remote_config;
    c.nargs = 0;
    struct orch_wire_buf w = {0};
    assert_int_equal(orch_wire_put_config(&w, &c), 0);
    assert_int_equal(w.data[w.len - 17], 1);
    w.data[w.len - 17] = 2;
    assert_int_equal(
        decode_raw(ORCH_WIRE_CONFIG, w.data + ORCH_WIRE_HEADER, w.len - ORCH_WIRE_HEADER),
        -EPROTO);
    assert_detail("values is neither 0 nor 1");
    w.data[w.len - 17] = 1;
    /* A batch limit over the plan's 1000000 (the u32 8 bytes before the end). */
    uint8_t *lim = w.data + w.len - 8;
    lim[0] = 0x41, lim[1] = 0x42, lim[2] = 0x0f, lim[3] = 0; /* 1000001 */
    assert_int_equal(
        decode_raw(ORCH_WIRE_CONFIG, w.data + ORCH_WIRE_HEADER, w.len - ORCH_WIRE_HEADER),
        -EPROTO);
    assert_detail("batch over 1000000");
    lim[0] = 0x40; /* 1000000: taken */
    struct orch__arena ca = {0};
    struct orch_wire_frame cf;
    assert_int_equal(orch_wire_next(w.data, w.len, &cf), 1);
    struct orch_wire_config got;
    assert_int_equal(orch_wire_get_config(&cf, &ca, &got), 0);
    assert_int_equal(got.batch, 1000000);
    orch__arena_free(&ca);
    orch_wire_buf_free(&w);
}

/* CHALLENGE and AUTH, the two frames of a remote worker's handshake. */
/* A chunk is children of a streaming expansion: never empty, never without their hashes,
 * never another outcome; an answer's hashes are none or one per child. */
static void test_chunk_refusals(void **state)
{
    (void)state;
    struct orch_wire_buf buf = {0};
    struct orch_wire_chunk c = sample_chunk;
    c.a.hash = NULL;
    assert_int_equal(orch_wire_put_chunk(&buf, &c), -EINVAL);
    c = sample_chunk;
    c.a.outcome = ORCH_WIRE_DROP;
    assert_int_equal(orch_wire_put_chunk(&buf, &c), -EINVAL);
    c = sample_chunk;
    c.a.nchild = 0;
    assert_int_equal(orch_wire_put_chunk(&buf, &c), -EINVAL);
    assert_int_equal(buf.len, 0);

    /* Raw: batch, ids mode, an answer of one child of one output. */
    struct body b;
    b.n = 0;
    put_le(&b, 42, 8);
    put_le(&b, 0, 1);
    put_le(&b, 9, 8); /* grain */
    put_le(&b, 1, 4); /* generation */
    put_le(&b, ORCH_WIRE_OK, 1);
    put_blob(&b, "", 0);
    put_le(&b, 3, 4); /* first */
    put_le(&b, 1, 4); /* nchild */
    put_le(&b, 1, 4); /* nout */
    put_le(&b, 77, 8);
    put_le(&b, 5, 8);
    put_le(&b, 0, 4); /* nfailed */
    size_t at_nhash = b.n;
    put_le(&b, 1, 4);
    put_le(&b, 0xfeed, 8);
    assert_int_equal(decode_body(ORCH_WIRE_CHUNK, &b), 0);
    b.d[at_nhash] = 0; /* no hashes: the bytes of the one left over */
    b.n -= 8;
    assert_int_equal(decode_body(ORCH_WIRE_CHUNK, &b), -EPROTO);
    assert_detail("without its children's hashes");
    b.d[at_nhash] = 2; /* two hashes for one child */
    b.n += 8;
    assert_int_equal(decode_body(ORCH_WIRE_CHUNK, &b), -EPROTO);
    assert_detail("nhash is neither 0 nor nchild");
    b.d[at_nhash] = 1;
    b.d[8] = 2; /* values flag */
    assert_int_equal(decode_body(ORCH_WIRE_CHUNK, &b), -EPROTO);
    b.d[8] = 0;
    memset(b.d + 26, UINT8_MAX, 4); /* first 2^32 - 1, and one child: past 2^32 */
    assert_int_equal(decode_body(ORCH_WIRE_CHUNK, &b), -EPROTO);
    assert_detail("first + nchild passes 2^32");
    orch_wire_buf_free(&buf);
}

static void test_challenge_auth(void **state)
{
    (void)state;
    struct orch_wire_buf w = {0};
    struct orch__arena a = {0};
    struct orch_wire_frame f;

    /* A CHALLENGE of another protocol version encodes, and is refused. */
    struct orch_wire_challenge old = sample_challenge;
    old.version = ORCH_WIRE_VERSION - 1;
    assert_int_equal(orch_wire_put_challenge(&w, &old), 0);
    assert_int_equal(orch_wire_next(w.data, w.len, &f), 1);
    struct orch_wire_challenge c;
    orch_error_clear();
    assert_int_equal(orch_wire_get_challenge(&f, &c), -EPROTO);
    char want[64];
    snprintf(want, sizeof want, "CHALLENGE of protocol version %d", ORCH_WIRE_VERSION - 1);
    assert_detail(want);
    orch_wire_buf_free(&w);

    /* An AUTH with an empty Slurm step (not under Slurm) round-trips. */
    struct orch_wire_auth au = sample_auth, got;
    au.slurm_job = "";
    au.host = "h";
    au.token = UINT64_MAX;
    assert_int_equal(orch_wire_put_auth(&w, &au), 0);
    assert_int_equal(orch_wire_next(w.data, w.len, &f), 1);
    assert_int_equal(orch_wire_get_auth(&f, &a, &got), 0);
    assert_true(got.token == UINT64_MAX);
    assert_string_equal(got.host, "h");
    assert_string_equal(got.slurm_job, "");
    orch_wire_buf_free(&w);
    orch__arena_free(&a);

    /* AUTH cut inside its mac, and with a host that runs past the body. */
    struct body b = {.n = 0};
    put_le(&b, 7, 8);
    put_bytes(&b, sample_auth.mac, 10);
    assert_int_equal(decode_body(ORCH_WIRE_AUTH, &b), -EPROTO);
    assert_detail("truncated at mac");
    b.n = 0;
    put_le(&b, 7, 8);
    put_bytes(&b, sample_auth.mac, ORCH_WIRE_NONCE);
    put_le(&b, 99, 4);
    put_le(&b, 40, 4);
    put_bytes(&b, "node-", 5);
    assert_int_equal(decode_body(ORCH_WIRE_AUTH, &b), -EPROTO);
    assert_detail("host of 40 bytes is truncated");

    /* AUTH with a NUL inside its host, then inside its Slurm step. */
    b.n = 0;
    put_le(&b, 7, 8);
    put_bytes(&b, sample_auth.mac, ORCH_WIRE_NONCE);
    put_le(&b, 99, 4);
    put_blob(&b, "no\0de", 5);
    put_blob(&b, "1.0", 3);
    assert_int_equal(decode_body(ORCH_WIRE_AUTH, &b), -EPROTO);
    assert_detail("host holds a NUL");
    b.n = 0;
    put_le(&b, 7, 8);
    put_bytes(&b, sample_auth.mac, ORCH_WIRE_NONCE);
    put_le(&b, 99, 4);
    put_blob(&b, "node", 4);
    put_blob(&b, "1\0.0", 4);
    assert_int_equal(decode_body(ORCH_WIRE_AUTH, &b), -EPROTO);
    assert_detail("slurm_job holds a NUL");
    b.d[b.n - 3] = '.'; /* the same frame without the NUL is fine */
    assert_int_equal(decode_body(ORCH_WIRE_AUTH, &b), 0);
}

/* Encoders refuse what they cannot encode, leaving the buffer as it was. */
/* A payload's size travels with its id; id 0 (no value: a failed child) has none, and a
 * report that gives it one is refused. Without sizes an answer with ids does not encode. */
static void test_payload_sizes(void **state)
{
    (void)state;
    struct orch_wire_buf b = {0};
    const uint64_t id[] = {0}, size[] = {5};
    struct orch_wire_answer a = {.grain = 1,
                                 .generation = 1,
                                 .outcome = ORCH_WIRE_OK,
                                 .message = "",
                                 .nchild = 1,
                                 .nout = 1,
                                 .payload = id,
                                 .size = size};
    struct orch_wire_report r = {.batch = 1, .message = "", .nrec = 1, .rec = &a};
    assert_int_equal(orch_wire_put_report(&b, &r), 0);
    struct orch_wire_frame f;
    assert_int_equal(orch_wire_next(b.data, b.len, &f), 1);
    struct orch__arena ar = {0};
    orch_error_clear();
    assert_int_equal(decode_any(&f, &ar), -EPROTO);
    assert_non_null(strstr(orch_error_detail(), "payload 0 has a size"));
    orch__arena_free(&ar);
    size_t len = b.len;
    a.size = NULL;
    assert_int_equal(orch_wire_put_report(&b, &r), -EINVAL);
    assert_int_equal(b.len, len);
    orch_wire_buf_free(&b);
}

static void test_encode_refusals(void **state)
{
    (void)state;
    struct orch_wire_buf b = {0};
    assert_int_equal(orch_wire_put_initfail(&b, "first"), 0);
    size_t len = b.len;
    struct orch_wire_config c = sample_config;
    c.call = NULL;
    assert_int_equal(orch_wire_put_config(&b, &c), -EINVAL);
    assert_int_equal(b.len, len);
    struct orch_wire_batch nb = {.id = 1, .nrec = 1, .rec = NULL};
    assert_int_equal(orch_wire_put_batch(&b, &nb), -EINVAL);
    assert_int_equal(b.len, len);
    struct orch_wire_answer a = {.grain = 1, .outcome = ORCH_WIRE_OK, .nchild = 1, .nout = 1};
    struct orch_wire_report r = {.batch = 1, .nrec = 1, .rec = &a};
    assert_int_equal(orch_wire_put_report(&b, &r), -EINVAL);
    assert_int_equal(b.len, len);

    /* Values mode: a value of len > 0 without its bytes. Outside values mode the bytes are
     * not sent, so the same record encodes. */
    const uint32_t one[] = {1};
    const struct orch_wire_value nobytes[] = {{.payload = 3, .present = 1, .len = 4}};
    const struct orch_wire_record rec[] = {
        {.grain = 1, .generation = 1, .attempt = 1, .nin = 1, .nval = one, .vals = nobytes}};
    struct orch_wire_batch vb = {.id = 1, .values = 1, .nrec = 1, .rec = rec};
    assert_int_equal(orch_wire_put_batch(&b, &vb), -EINVAL);
    assert_int_equal(b.len, len);
    vb.values = 0;
    assert_int_equal(orch_wire_put_batch(&b, &vb), 0);
    len = b.len;
    const struct orch_wire_bytes out[] = {{.data = NULL, .len = 3, .set = 1}};
    struct orch_wire_answer va = {
        .grain = 1, .outcome = ORCH_WIRE_OK, .nchild = 1, .nout = 1, .values = out};
    struct orch_wire_report vr = {.batch = 1, .values = 1, .nrec = 1, .rec = &va};
    assert_int_equal(orch_wire_put_report(&b, &vr), -EINVAL);
    assert_int_equal(b.len, len);
    /* ... and a values-mode answer with outputs but no values (only ids). */
    const uint64_t ids[] = {5};
    struct orch_wire_answer ia = {
        .grain = 1, .outcome = ORCH_WIRE_OK, .nchild = 1, .nout = 1, .payload = ids};
    vr.rec = &ia;
    assert_int_equal(orch_wire_put_report(&b, &vr), -EINVAL);
    assert_int_equal(b.len, len);
    /* An AUTH without a host. */
    struct orch_wire_auth au = sample_auth;
    au.host = NULL;
    assert_int_equal(orch_wire_put_auth(&b, &au), -EINVAL);
    assert_int_equal(b.len, len);
    orch_wire_buf_free(&b);
}

/* ---- fed reduces ------------------------------------------------------------------------ */

/* A fed record travels without values and says so; MORE and INPUTS round-trip, INPUTS
 * child-major; a fed record with values, or in a batch with values, is refused both ways,
 * as are an INPUTS whose last flag is not 0 or 1 and children without inputs; every cut
 * of an INPUTS is refused (mutation: get_record does not read `fed`, and the records after
 * it are off by a byte). */
static void test_fed_reduce(void **state)
{
    (void)state;
    static const uint32_t none[2] = {0, 0}, one[1] = {1};
    static const struct orch_wire_value v1 = {.payload = 5, .present = 1};
    const struct orch_wire_record recs[] = {
        {.grain = 7, .generation = 2, .attempt = 3, .nin = 2, .nval = none, .fed = 1},
        {.grain = 8, .generation = 0, .attempt = 1, .nin = 1, .nval = one, .vals = &v1},
    };
    struct orch_wire_batch batch = {.id = 11, .nrec = 2, .rec = recs};
    struct orch_wire_buf b = {0};
    struct orch__arena a = {0};
    struct orch_wire_frame f;
    assert_int_equal(orch_wire_put_batch(&b, &batch), 0);
    assert_int_equal(orch_wire_next(b.data, b.len, &f), 1);
    struct orch_wire_batch x;
    assert_int_equal(orch_wire_get_batch(&f, &a, &x), 0);
    assert_int_equal(x.nrec, 2);
    assert_int_equal(x.rec[0].fed, 1);
    assert_int_equal(x.rec[0].nin, 2);
    assert_int_equal(x.rec[0].nval[0] + x.rec[0].nval[1], 0);
    assert_int_equal(x.rec[1].fed, 0);
    assert_int_equal(x.rec[1].nval[0], 1);
    assert_true(x.rec[1].vals[0].payload == 5);

    struct orch_wire_more m = {.batch = 11, .grain = 7}, mx;
    b.len = 0;
    assert_int_equal(orch_wire_put_more(&b, &m), 0);
    assert_int_equal(orch_wire_next(b.data, b.len, &f), 1);
    assert_int_equal(orch_wire_get_more(&f, &mx), 0);
    assert_true(mx.batch == 11 && mx.grain == 7);

    /* Three children of two inputs, child-major; the second child's first value absent. */
    const struct orch_wire_value kids[6] = {
        {.payload = 1, .present = 1}, {.payload = 2, .present = 1},
        {.payload = 0, .present = 0}, {.payload = 4, .present = 1},
        {.payload = 5, .present = 1}, {.payload = 6, .present = 1}};
    struct orch_wire_inputs in = {.batch = 11,
                                  .grain = 7,
                                  .last = 1,
                                  .nin = 2,
                                  .nchild = 3,
                                  .vals = kids},
                            ix;
    b.len = 0;
    assert_int_equal(orch_wire_put_inputs(&b, &in), 0);
    assert_int_equal(orch_wire_next(b.data, b.len, &f), 1);
    assert_int_equal(orch_wire_get_inputs(&f, &a, &ix), 0);
    assert_true(ix.batch == 11 && ix.grain == 7);
    assert_int_equal(ix.last, 1);
    assert_int_equal(ix.nin, 2);
    assert_int_equal(ix.nchild, 3);
    for (int k = 0; k < 6; k++) {
        assert_int_equal(ix.vals[k].present, kids[k].present);
        assert_true(ix.vals[k].payload == kids[k].payload);
    }
    /* Every cut of it is refused. */
    size_t whole = f.len;
    for (size_t n = 0; n < whole; n++)
        assert_int_equal(decode_raw(ORCH_WIRE_INPUTS, b.data + ORCH_WIRE_HEADER, n), -EPROTO);
    /* last = 2 (after batch and grain). */
    b.data[ORCH_WIRE_HEADER + 16] = 2;
    assert_int_equal(decode_raw(ORCH_WIRE_INPUTS, b.data + ORCH_WIRE_HEADER, whole), -EPROTO);
    assert_detail("last is neither 0 nor 1");
    /* Children without inputs. */
    struct orch_wire_inputs bare = {.batch = 1, .grain = 2, .nin = 0, .nchild = 1};
    b.len = 0;
    assert_int_equal(orch_wire_put_inputs(&b, &bare), 0);
    assert_int_equal(
        decode_raw(ORCH_WIRE_INPUTS, b.data + ORCH_WIRE_HEADER, b.len - ORCH_WIRE_HEADER),
        -EPROTO);
    assert_detail("children without inputs");

    /* Refused to encode: a fed record with values, a fed record in a batch with values. */
    struct orch_wire_record bad = recs[1];
    bad.fed = 1;
    struct orch_wire_batch with = {.id = 1, .nrec = 1, .rec = &bad};
    b.len = 0;
    assert_int_equal(orch_wire_put_batch(&b, &with), -EINVAL);
    with.rec = recs;
    with.values = 1;
    assert_int_equal(orch_wire_put_batch(&b, &with), -EINVAL);
    assert_int_equal(b.len, 0);
    /* And to decode: the fed batch above with its values flag set. */
    batch.nrec = 1;
    assert_int_equal(orch_wire_put_batch(&b, &batch), 0);
    b.data[ORCH_WIRE_HEADER + 8] = 1;
    assert_int_equal(
        decode_raw(ORCH_WIRE_BATCH, b.data + ORCH_WIRE_HEADER, b.len - ORCH_WIRE_HEADER),
        -EPROTO);
    assert_detail("a fed record in a batch with values");
    orch__arena_free(&a);
    orch_wire_buf_free(&b);
}

/* ---- fuzz
 * ---------------------------------------------------------------------------------------- */

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Mutates valid frames (flipped bytes, overwritten words, cut or grown bodies) and decodes
 * them: each decode must return 0 or -EPROTO, and ASan must stay quiet. */
static void test_fuzz(void **state)
{
    (void)state;
    struct orch_wire_buf b = {0};
    encode_all(&b);
    /* The frames' offsets. */
    size_t offs[NFRAMES], sizes[NFRAMES];
    int n = 0;
    for (size_t off = 0; off < b.len; n++) {
        struct orch_wire_frame f;
        assert_int_equal(orch_wire_next(b.data + off, b.len - off, &f), 1);
        offs[n] = off;
        sizes[n] = f.size;
        off += f.size;
    }
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 20000; iter++) {
        int k = (int)(rnd(&seed) % (uint64_t)n);
        size_t size = sizes[k];
        size_t cap = size + 16;
        uint8_t *c = malloc(cap);
        memcpy(c, b.data + offs[k], size);
        int muts = 1 + (int)(rnd(&seed) % 4);
        for (int m = 0; m < muts; m++) {
            size_t at = ORCH_WIRE_HEADER + rnd(&seed) % (size - ORCH_WIRE_HEADER + 1);
            switch (rnd(&seed) % 4) {
            case 0: /* flip a byte */
                if (at < size)
                    c[at] ^= (uint8_t)(1 + rnd(&seed) % 255);
                break;
            case 1: /* overwrite a little-endian word with something large or small */
                if (at + 4 <= size) {
                    uint32_t v = (uint32_t)rnd(&seed);
                    if (rnd(&seed) % 2)
                        v %= 8;
                    memcpy(c + at, &v, 4);
                }
                break;
            case 2: /* cut the body */
                size = at;
                break;
            case 3: /* grow the body with random bytes */
                while (size < cap && rnd(&seed) % 4)
                    c[size++] = (uint8_t)rnd(&seed);
                break;
            }
        }
        uint32_t len = (uint32_t)(size - ORCH_WIRE_HEADER);
        for (int i = 0; i < 4; i++)
            c[i] = (uint8_t)(len >> (8 * i));
        /* Exact-size copy, so that ASan sees any read past the frame. */
        uint8_t *exact = malloc(size);
        memcpy(exact, c, size);
        struct orch_wire_frame f;
        assert_int_equal(orch_wire_next(exact, size, &f), 1);
        struct orch__arena a = {0};
        int rc = decode_any(&f, &a);
        assert_true(rc == 0 || rc == -EPROTO);
        rc == 0 ? ok++ : bad++;
        orch__arena_free(&a);
        free(exact);
        free(c);
    }
    assert_true(bad > 1000); /* the mutations do reach the checks */
    assert_true(ok > 0);
    orch_wire_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_config_minimal_and_layout),
        cmocka_unit_test(test_truncated_and_padded),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_semantic_refusals),
        cmocka_unit_test(test_failed_children),
        cmocka_unit_test(test_values_refusals),
        cmocka_unit_test(test_chunk_refusals),
        cmocka_unit_test(test_challenge_auth),
        cmocka_unit_test(test_encode_refusals),
        cmocka_unit_test(test_payload_sizes),
        cmocka_unit_test(test_fed_reduce),
        cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
