/* fuzz_wire.c — libFuzzer harness for the driver <-> worker wire decoder (wire.h).
 *
 * The input is taken as a byte stream from the other end of a worker's socketpair and cut
 * into frames with orch_wire_next(), as the pool and the worker do. Each whole frame is
 * decoded by the orch_wire_get_* of its type, and must be either refused (-EPROTO with a
 * detail) or decoded; what is decoded must hold these properties, checked here:
 *
 *   - round trip: the decoder is strict, so it accepts only the encoder's own output, and
 *     the matching orch_wire_put_* must give back the very bytes of the frame; decoding
 *     those again and encoding once more gives the same bytes;
 *   - the result never points into the frame (wire.h "Memory"), except the bytes of values
 *     in values mode, which must lie inside the body: the frame is decoded from a copy;
 *     those bytes are checked to lie in its body and copied out, then the copy is
 *     scribbled over and freed before the result is encoded, so AddressSanitizer reports
 *     any other pointer that was kept into it;
 *   - no allocation larger than a small multiple of the body (wire.h): every byte the
 *     decoder allocates is counted, and must stay within 32 times the body plus 20 KiB (the
 *     arena's first chunk is 16 KiB; a values-mode output takes a 24-byte struct
 *     orch_wire_bytes for its 1-byte set flag, the largest ratio of any field);
 *   - every other type's decoder refuses the frame with -EPROTO;
 *   - orch_wire_next() says how much a partial frame will take, exactly.
 *
 * Only the public functions of wire.h are used, and frames are compared as bytes, so the
 * harness follows changes of the bodies without being edited. Built with -Dfuzz=true
 * (scripts/fuzz); tests/fuzz/gen_wire_seeds.c writes its seeds.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sanitizer/allocator_interface.h>

#include "orch_error.h"
#include "support.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* ---- counting what the decoder allocates ---------------------------------------------- */

static int counting;     /* set around a decoder's call */
static size_t allocated; /* bytes malloc'd while counting */

static void on_malloc(const volatile void *p, size_t n)
{
    (void)p;
    if (counting)
        allocated += n;
}

static void on_free(const volatile void *p)
{
    (void)p;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) == 0) {
        fprintf(stderr, "fuzz_wire: cannot install the malloc hooks\n");
        abort();
    }
    return 0;
}

/* ---- decoding and encoding by type ---------------------------------------------------- */

/* The detail of the last refusal must say something. */
static void check_refusal(int rc, const char *what)
{
    const char *detail = orch_error_detail();
    if (rc != -EPROTO || detail == NULL || detail[0] == '\0') {
        fprintf(stderr, "%s: expected -EPROTO with a detail, got %d (%s)\n", what, rc,
                detail != NULL ? detail : "(null)");
        abort();
    }
}

/* Aborts unless the n bytes at p lie inside f's body (the values-mode exception of wire.h
 * "Memory"). */
static void check_in_body(const struct orch_wire_frame *f, const void *p, size_t n)
{
    const uint8_t *q = p;
    if (q == NULL || q < f->body || n > f->len || q - f->body > (ptrdiff_t)(f->len - n)) {
        fprintf(stderr, "a %s frame's value of %zu bytes does not lie in its body\n",
                orch_wire_type_name(f->type), n);
        abort();
    }
}

/* A copy of n bytes in arena a (n may be 0). */
static const void *copy_out(struct orch__arena *a, const void *p, size_t n)
{
    void *q = orch__arena_alloc(a, n > 0 ? n : 1);
    if (q == NULL)
        abort();
    if (n > 0)
        memcpy(q, p, n);
    return q;
}

/* Values mode: checks that the bytes of every present value lie in f's body, and points
 * them at copies in arena a instead, so that the frame can go. */
static void move_batch_values(const struct orch_wire_frame *f, struct orch__arena *a,
                              struct orch_wire_batch *batch)
{
    if (!batch->values || batch->nrec == 0)
        return;
    struct orch_wire_record *rec = orch__arena_alloc(a, sizeof *rec * batch->nrec);
    if (rec == NULL)
        abort();
    for (uint32_t i = 0; i < batch->nrec; i++) {
        rec[i] = batch->rec[i];
        size_t nv = 0;
        for (uint32_t j = 0; j < rec[i].nin; j++)
            nv += rec[i].nval[j];
        if (nv == 0)
            continue;
        struct orch_wire_value *v = orch__arena_alloc(a, sizeof *v * nv);
        if (v == NULL)
            abort();
        for (size_t k = 0; k < nv; k++) {
            v[k] = rec[i].vals[k];
            if (!v[k].present)
                continue;
            check_in_body(f, v[k].data, v[k].len);
            v[k].data = copy_out(a, v[k].data, v[k].len);
        }
        rec[i].vals = v;
    }
    batch->rec = rec;
}

static void move_report_values(const struct orch_wire_frame *f, struct orch__arena *a,
                               struct orch_wire_report *report)
{
    if (!report->values || report->nrec == 0)
        return;
    struct orch_wire_answer *rec = orch__arena_alloc(a, sizeof *rec * report->nrec);
    if (rec == NULL)
        abort();
    for (uint32_t i = 0; i < report->nrec; i++) {
        rec[i] = report->rec[i];
        size_t n = (size_t)rec[i].nchild * rec[i].nout;
        if (n == 0)
            continue;
        struct orch_wire_bytes *v = orch__arena_alloc(a, sizeof *v * n);
        if (v == NULL)
            abort();
        for (size_t k = 0; k < n; k++) {
            v[k] = rec[i].values[k];
            if (!v[k].set)
                continue;
            check_in_body(f, v[k].data, v[k].len);
            v[k].data = copy_out(a, v[k].data, v[k].len);
        }
        rec[i].values = v;
    }
    report->rec = rec;
}

/* Decodes f as a frame of type `as` into arena a and, when that succeeds and b is not NULL,
 * encodes the result into b. Returns the decoder's result, or aborts when the encoder
 * refuses what the decoder accepted. The source frame may be freed between the two: the
 * decoding is finished, and the frame's bytes are released by `release` (may be NULL)
 * before the encoding starts. */
static int decode_encode(enum orch_wire_type as, const struct orch_wire_frame *f,
                         struct orch__arena *a, struct orch_wire_buf *b, void (*release)(void))
{
    struct orch_wire_config config = {0};
    struct orch_wire_hello hello = {0};
    const char *message = NULL;
    struct orch_wire_batch batch = {0};
    struct orch_wire_report report = {0};
    struct orch_wire_challenge challenge = {0};
    struct orch_wire_auth auth = {0};
    struct orch_wire_chunk chunk = {0};
    struct orch_wire_more more = {0};
    struct orch_wire_inputs inputs = {0};
    int rc = 0, put = 0;

    orch_error_clear();
    counting = 1;
    allocated = 0;
    switch (as) {
    case ORCH_WIRE_CONFIG:
        rc = orch_wire_get_config(f, a, &config);
        break;
    case ORCH_WIRE_HELLO:
        rc = orch_wire_get_hello(f, &hello);
        break;
    case ORCH_WIRE_INITFAIL:
        rc = orch_wire_get_initfail(f, a, &message);
        break;
    case ORCH_WIRE_BATCH:
        rc = orch_wire_get_batch(f, a, &batch);
        break;
    case ORCH_WIRE_REPORT:
        rc = orch_wire_get_report(f, a, &report);
        break;
    case ORCH_WIRE_CHALLENGE:
        rc = orch_wire_get_challenge(f, &challenge);
        break;
    case ORCH_WIRE_AUTH:
        rc = orch_wire_get_auth(f, a, &auth);
        break;
    case ORCH_WIRE_CHUNK:
        rc = orch_wire_get_chunk(f, a, &chunk);
        break;
    case ORCH_WIRE_MORE:
        rc = orch_wire_get_more(f, &more);
        break;
    case ORCH_WIRE_INPUTS:
        rc = orch_wire_get_inputs(f, a, &inputs);
        break;
    }
    counting = 0;
    if (allocated > 32 * f->len + ((size_t)20 << 10)) {
        fprintf(stderr, "decoding a %s frame of %zu body bytes as %s allocated %zu bytes\n",
                orch_wire_type_name(f->type), f->len, orch_wire_type_name((int)as), allocated);
        abort();
    }
    if (rc == 0 && as == ORCH_WIRE_BATCH)
        move_batch_values(f, a, &batch);
    if (rc == 0 && as == ORCH_WIRE_REPORT)
        move_report_values(f, a, &report);
    if (rc == 0 && as == ORCH_WIRE_CHUNK) { /* its answer's values, as a report's */
        struct orch_wire_report one = {.values = chunk.values, .nrec = 1, .rec = &chunk.a};
        move_report_values(f, a, &one);
        chunk.a = one.rec[0];
    }
    if (release != NULL)
        release();
    if (rc != 0 || b == NULL)
        return rc;

    switch (as) {
    case ORCH_WIRE_CONFIG:
        put = orch_wire_put_config(b, &config);
        break;
    case ORCH_WIRE_HELLO:
        put = orch_wire_put_hello(b, &hello);
        break;
    case ORCH_WIRE_INITFAIL:
        put = orch_wire_put_initfail(b, message);
        break;
    case ORCH_WIRE_BATCH:
        put = orch_wire_put_batch(b, &batch);
        break;
    case ORCH_WIRE_REPORT:
        put = orch_wire_put_report(b, &report);
        break;
    case ORCH_WIRE_CHALLENGE:
        put = orch_wire_put_challenge(b, &challenge);
        break;
    case ORCH_WIRE_AUTH:
        put = orch_wire_put_auth(b, &auth);
        break;
    case ORCH_WIRE_CHUNK:
        put = orch_wire_put_chunk(b, &chunk);
        break;
    case ORCH_WIRE_MORE:
        put = orch_wire_put_more(b, &more);
        break;
    case ORCH_WIRE_INPUTS:
        put = orch_wire_put_inputs(b, &inputs);
        break;
    }
    if (put != 0) {
        fprintf(stderr, "a decoded %s frame does not encode: %d (%s)\n",
                orch_wire_type_name((int)as), put, orch_strerror(put));
        abort();
    }
    return 0;
}

static void dump(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "%s (%zu bytes):", what, n);
    for (size_t i = 0; i < n && i < 256; i++)
        fprintf(stderr, " %02x", p[i]);
    fprintf(stderr, "%s\n", n > 256 ? " ..." : "");
}

/* The copy of the frame being decoded, released before its result is encoded. */
static uint8_t *copy;
static size_t copy_len;

static void release_copy(void)
{
    memset(copy, 0xa5, copy_len);
    free(copy);
    copy = NULL;
}

/* Checks one whole frame: `bytes` are its f->size bytes in the stream. */
static void check_frame(const struct orch_wire_frame *f, const uint8_t *bytes)
{
    static const enum orch_wire_type types[] = {
#define ORCH_WIRE_TYPE_LIST(name, value, text) name,
        ORCH_WIRE_TYPES(ORCH_WIRE_TYPE_LIST)
#undef ORCH_WIRE_TYPE_LIST
    };
    enum orch_wire_type type = (enum orch_wire_type)f->type;

    /* Every other decoder refuses it. */
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        if (types[k] == type)
            continue;
        struct orch__arena a = {0};
        int rc = decode_encode(types[k], f, &a, NULL, NULL);
        orch__arena_free(&a);
        check_refusal(rc, "a decoder of another type");
    }

    /* Decode from a copy that is gone before the result is encoded. */
    copy_len = f->size;
    copy = malloc(copy_len);
    if (copy == NULL)
        abort();
    memcpy(copy, bytes, copy_len);
    struct orch_wire_frame cf = *f;
    cf.body = copy + ORCH_WIRE_HEADER;
    struct orch__arena a = {0};
    struct orch_wire_buf b = {0};
    int rc = decode_encode(type, &cf, &a, &b, release_copy);
    if (rc != 0) {
        check_refusal(rc, orch_wire_type_name(f->type));
        orch__arena_free(&a);
        return;
    }
    if (b.len != f->size || memcmp(b.data, bytes, f->size) != 0) {
        fprintf(stderr, "a %s frame does not round-trip\n", orch_wire_type_name(f->type));
        dump("frame", bytes, f->size);
        dump("encoded again", b.data, b.len);
        abort();
    }

    /* Decode what was encoded, and encode it again: the same bytes. */
    struct orch_wire_frame g;
    if (orch_wire_next(b.data, b.len, &g) != 1 || g.size != b.len || g.type != f->type)
        abort();
    struct orch__arena a2 = {0};
    struct orch_wire_buf b2 = {0};
    rc = decode_encode(type, &g, &a2, &b2, NULL);
    if (rc != 0 || b2.len != b.len || memcmp(b2.data, b.data, b.len) != 0) {
        fprintf(stderr, "a re-encoded %s frame does not round-trip (%d)\n",
                orch_wire_type_name(f->type), rc);
        dump("encoded", b.data, b.len);
        dump("encoded again", b2.data, b2.len);
        abort();
    }
    orch_wire_buf_free(&b2);
    orch__arena_free(&a2);
    orch_wire_buf_free(&b);
    orch__arena_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        size_t avail = size - off;
        struct orch_wire_frame f;
        orch_error_clear();
        int rc = orch_wire_next(data + off, avail, &f);
        if (rc < 0) {
            check_refusal(rc, "orch_wire_next");
            return 0;
        }
        if (rc == 0) {
            /* A partial frame: its size is known once its header is whole. */
            size_t want = avail < ORCH_WIRE_HEADER ? 0 : ORCH_WIRE_HEADER + f.len;
            if (f.size != want || (want != 0 && want <= avail)) {
                fprintf(stderr, "orch_wire_next: %zu bytes left, size %zu, expected %zu\n",
                        avail, f.size, want);
                abort();
            }
            return 0;
        }
        if (rc != 1 || f.size > avail || f.size != ORCH_WIRE_HEADER + f.len ||
            f.body != data + off + ORCH_WIRE_HEADER)
            abort();
        check_frame(&f, data + off);
        off += f.size;
    }
    return 0;
}
