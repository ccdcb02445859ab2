/* fuzz_exec.c — libFuzzer harness for exec()'s decoder of a program's answers
 * (udfs/exec.c, protocol in udfs/EXEC_PROTOCOL.md).
 *
 * Input: three bytes that choose the call and the batch, then what the program wrote:
 *
 *     u8 op (mod 5: map, expand, expand aligned, filter, reduce) | u8 nout (1 + mod 4)
 *     | u8 records in the batch (mod 16) | the program's output, to its end
 *
 * The output is decoded by orch_udf__exec_take_reply() (udf_int.h), the code that exec's
 * run uses once a batch is sent, into a real answer collector. Properties checked:
 *
 *   - no crash, leak or undefined behaviour (ASan, UBSan, LeakSanitizer);
 *   - the verdict is the protocol's, as an independent reading of EXEC_PROTOCOL.md here
 *     (`verdict`) finds it: -EPIPE when the output ends before a whole frame; -EPROTO for
 *     an unknown tag, an answer count that is not the batch's, an unknown answer kind, a
 *     truncated or too long ANSW or CHLD body, a CHLD of a call that is not an expand, of
 *     a record out of the batch or below the previous CHLD's; -EIO for BERR; 0 for a
 *     well-formed reply; a failure always comes with a message in batch->error;
 *   - after 0 and orch_udf_answers_finish(), every record has an answer, and it is the one
 *     the program gave: its values byte for byte, its children (streamed in CHLD frames,
 *     then answered), its keep, its drop, its failure message; or, for a kind that does
 *     not fit the op (`V` for an expand, `D` after streamed children), a
 *     RecordFailure that says so.
 *
 * Should the protocol gain an answer kind, `walk` must learn it too (the seeds in
 * tests/fuzz/seeds/exec fail at once otherwise). Built with -Dfuzz=true (scripts/fuzz);
 * tests/fuzz/gen_exec_seeds.py writes its seeds with the Python helper's own encoder.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_le.h"
#include "orch_udf_host.h"
#include "udf_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FRAME_HEADER 12
/* exec.c's limit on a frame's length (FRAME_MAX): longer is garbage, a protocol error. */
#define FRAME_MAX ((uint64_t)1 << 40)

static const enum orch_udf_op ops[] = {ORCH_UDF_OP_MAP, ORCH_UDF_OP_EXPAND,
                                       ORCH_UDF_OP_EXPAND_ALIGNED, ORCH_UDF_OP_FILTER,
                                       ORCH_UDF_OP_REDUCE};

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_exec: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

/* A reading cursor over an ANSW body; `bad` once a read passes its end. */
struct rd {
    const uint8_t *p;
    size_t left;
    bool bad;
};

static const uint8_t *take(struct rd *r, uint64_t n)
{
    if (r->bad || n > r->left) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *at = r->p;
    r->p += n;
    r->left -= (size_t)n;
    return at;
}

static uint64_t take_le(struct rd *r, size_t n)
{
    const uint8_t *p = take(r, n);
    return p != NULL ? orch__le_get(p, n) : 0;
}

static bool is_expand(enum orch_udf_op op)
{
    return op == ORCH_UDF_OP_EXPAND || op == ORCH_UDF_OP_EXPAND_ALIGNED;
}

/* The call: what each record's answer is compared against. */
struct call {
    enum orch_udf_op op;
    size_t nout;
    size_t n;
    const struct orch_udf_answers *ans; /* NULL: only find the verdict */
    size_t had[16];                     /* children of record i read so far (CHLD) */
    size_t last;                        /* the record of the last CHLD; SIZE_MAX: none */
};

/* A RecordFailure made by the host for an answer of kind k that does not fit the op. */
static void want_misfit(const struct orch_udf_answer *got, uint8_t k, size_t i)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "exec: the program answered '%c'", k);
    if (got->outcome != ORCH_UDF_RECORD_FAILURE || got->msg == NULL ||
        strncmp(got->msg, prefix, strlen(prefix)) != 0)
        fail("record %zu: an answer '%c' that does not fit the op gave outcome %s", i, k,
             orch_udf_outcome_name(got->outcome));
}

/* nout blobs; compared with vals[0..nout) when vals is not NULL. */
static void walk_values(struct rd *r, const struct call *c, const struct orch_udf_out *vals,
                        size_t i)
{
    for (size_t p = 0; p < c->nout && !r->bad; p++) {
        uint64_t len = take_le(r, 8);
        const uint8_t *v = take(r, len);
        if (v == NULL || vals == NULL)
            continue;
        if (!vals[p].set || vals[p].data == NULL || vals[p].len != len ||
            memcmp(vals[p].data, v, (size_t)len) != 0)
            fail("record %zu: output %zu is not the program's value", i, p);
    }
}

/* Reads n children of record i, each 'v' + values or 'f' + message (a failed child), the
 * first of them child c->had[i]; compares them with got's when got is not NULL. Returns
 * false for an unknown child tag. */
static bool walk_children(struct rd *r, struct call *c, size_t i, uint32_t n,
                          const struct orch_udf_answer *got)
{
    for (uint32_t k = 0; k < n && !r->bad; k++) {
        size_t ch = c->had[i] + k;
        uint8_t tag = (uint8_t)take_le(r, 1);
        if (r->bad)
            break;
        if (tag == 'v') {
            if (got != NULL && got->child_msg != NULL && got->child_msg[ch] != NULL)
                fail("record %zu: child %zu was made, the host failed it", i, ch);
            walk_values(r, c, got != NULL ? &got->children[ch * c->nout] : NULL, i);
        } else if (tag == 'f') {
            uint32_t len = (uint32_t)take_le(r, 4);
            const uint8_t *m = take(r, len);
            if (got == NULL || m == NULL)
                continue;
            const char *msg = got->child_msg != NULL ? got->child_msg[ch] : NULL;
            size_t want = strnlen((const char *)m, len);
            if (msg == NULL || strlen(msg) != want || memcmp(msg, m, want) != 0)
                fail("record %zu: child %zu failed, the host has \"%s\"", i, ch,
                     msg != NULL ? msg : "(made)");
        } else {
            return false; /* an unknown child tag: a protocol error like a kind */
        }
    }
    return true;
}

/* Reads answer i; compares it with c->ans->rec[i] when c->ans is set. Returns false for
 * an unknown kind. */
static bool walk_answer(struct rd *r, struct call *c, size_t i)
{
    const struct orch_udf_answer *got = c->ans != NULL ? &c->ans->rec[i] : NULL;
    uint8_t k = (uint8_t)take_le(r, 1);
    if (r->bad)
        return true;
    switch (k) {
    case 'V': {
        bool fits = c->op == ORCH_UDF_OP_MAP || c->op == ORCH_UDF_OP_REDUCE;
        if (got != NULL && fits && got->outcome != ORCH_UDF_OK)
            fail("record %zu: 'V' gave outcome %s", i, orch_udf_outcome_name(got->outcome));
        walk_values(r, c, got != NULL && fits ? got->values : NULL, i);
        if (got != NULL && !fits)
            want_misfit(got, k, i);
        return true;
    }
    case 'C': {
        uint32_t n = (uint32_t)take_le(r, 4);
        bool fits = is_expand(c->op);
        if (got != NULL && fits && !r->bad &&
            (got->outcome != ORCH_UDF_OK || got->nchildren != c->had[i] + n))
            fail("record %zu: 'C' of %" PRIu32 " children gave outcome %s with %zu", i, n,
                 orch_udf_outcome_name(got->outcome), got->nchildren);
        for (size_t ch = c->had[i]; ch < c->had[i] + n && !r->bad; ch++)
            walk_values(r, c, got != NULL && fits ? &got->children[ch * c->nout] : NULL, i);
        if (got != NULL && !fits)
            want_misfit(got, k, i);
        return true;
    }
    case 'E': { /* children, each 'v' + values or 'f' + message (a failed child) */
        uint32_t n = (uint32_t)take_le(r, 4);
        bool fits = is_expand(c->op);
        if (got != NULL && fits && !r->bad &&
            (got->outcome != ORCH_UDF_OK || got->nchildren != c->had[i] + n))
            fail("record %zu: 'E' of %" PRIu32 " children gave outcome %s with %zu", i, n,
                 orch_udf_outcome_name(got->outcome), got->nchildren);
        if (!walk_children(r, c, i, n, got != NULL && fits ? got : NULL))
            return false;
        if (got != NULL && !fits && !r->bad)
            want_misfit(got, k, i);
        return true;
    }
    case 'K': {
        uint8_t keep = (uint8_t)take_le(r, 1);
        if (got == NULL)
            return true;
        if (c->op != ORCH_UDF_OP_FILTER)
            want_misfit(got, k, i);
        else if (got->outcome != (keep ? ORCH_UDF_KEEP_TRUE : ORCH_UDF_KEEP_FALSE))
            fail("record %zu: 'K' %u gave outcome %s", i, keep,
                 orch_udf_outcome_name(got->outcome));
        return true;
    }
    case 'D':
        if (got != NULL && c->had[i] > 0) /* children were streamed: too late to drop */
            want_misfit(got, k, i);
        else if (got != NULL && got->outcome != ORCH_UDF_DROP)
            fail("record %zu: 'D' gave outcome %s", i, orch_udf_outcome_name(got->outcome));
        return true;
    case 'R':
    case 'G': {
        uint32_t n = (uint32_t)take_le(r, 4);
        const uint8_t *m = take(r, n);
        if (got == NULL || m == NULL)
            return true;
        /* The message is the C string of those bytes: it ends at a NUL byte, if any (the
         * protocol says a str holds none; exec does not refuse one). */
        enum orch_udf_outcome want =
            k == 'R' ? ORCH_UDF_RECORD_FAILURE : ORCH_UDF_GROUP_FAILURE;
        size_t len = strnlen((const char *)m, n);
        if (got->outcome != want || got->msg == NULL || strlen(got->msg) != len ||
            memcmp(got->msg, m, len) != 0)
            fail("record %zu: '%c' gave outcome %s, message \"%s\"", i, k,
                 orch_udf_outcome_name(got->outcome), got->msg ? got->msg : "(null)");
        return true;
    }
    }
    return false;
}

/* Reads an ANSW body as the protocol says; with c->ans set, compares every answer with
 * the collector's. Returns 0 or -EPROTO. */
static int walk(const uint8_t *body, size_t len, struct call *c)
{
    struct rd r = {body, len, false};
    uint32_t n = (uint32_t)take_le(&r, 4);
    if (r.bad || n != c->n)
        return -EPROTO;
    for (size_t i = 0; i < c->n; i++)
        if (!walk_answer(&r, c, i))
            return -EPROTO;
    return r.bad || r.left != 0 ? -EPROTO : 0;
}

/* Reads a CHLD body (u32 record, u32 n, n children as in 'E'): the record must be one of
 * the batch, not below the last CHLD's, and the call an expand. Returns 0 or -EPROTO. */
static int walk_chld(const uint8_t *body, size_t len, struct call *c)
{
    struct rd r = {body, len, false};
    uint32_t i = (uint32_t)take_le(&r, 4), n = (uint32_t)take_le(&r, 4);
    if (r.bad || !is_expand(c->op) || i >= c->n || (c->last != SIZE_MAX && i < c->last))
        return -EPROTO;
    c->last = i;
    /* Children streamed before a failure are not held in its answer (no stream hook). */
    const struct orch_udf_answer *got = c->ans != NULL ? &c->ans->rec[i] : NULL;
    if (got != NULL && got->outcome != ORCH_UDF_OK)
        got = NULL;
    if (!walk_children(&r, c, i, n, got))
        return -EPROTO;
    c->had[i] += n;
    return r.bad || r.left != 0 ? -EPROTO : 0;
}

/* The protocol's verdict on out[0..len): CHLD frames, then ANSW or BERR; compares the
 * answers with the collector's when c->ans is set. */
static int verdict(const uint8_t *out, size_t len, struct call *c)
{
    memset(c->had, 0, sizeof c->had);
    c->last = SIZE_MAX;
    for (;;) {
        if (len < FRAME_HEADER)
            return -EPIPE;
        bool answ = memcmp(out, "ANSW", 4) == 0, berr = memcmp(out, "BERR", 4) == 0;
        bool chld = memcmp(out, "CHLD", 4) == 0;
        if (!answ && !berr && !chld)
            return -EPROTO;
        uint64_t n = orch__le_get64(out + 4);
        if (n > FRAME_MAX)
            return -EPROTO;
        if (n > len - FRAME_HEADER)
            return -EPIPE;
        if (berr)
            return -EIO;
        if (answ)
            return walk(out + FRAME_HEADER, (size_t)n, c);
        int rc = walk_chld(out + FRAME_HEADER, (size_t)n, c);
        if (rc < 0)
            return rc;
        out += FRAME_HEADER + (size_t)n;
        len -= FRAME_HEADER + (size_t)n;
    }
}

/* After finish: what orch_udf_host.h promises of every record, whatever was answered. */
static void check_finished(const struct orch_udf_answers *a)
{
    for (size_t i = 0; i < a->n; i++) {
        const struct orch_udf_answer *r = &a->rec[i];
        switch (r->outcome) {
        case ORCH_UDF_NONE:
        case ORCH_UDF_OUTCOME__COUNT:
            fail("record %zu left with outcome %s after finish", i,
                 orch_udf_outcome_name(r->outcome));
            break;
        case ORCH_UDF_OK:
            if (is_expand(a->op))
                break; /* children: compared with the program's by walk() */
            for (size_t p = 0; p < a->nout; p++)
                if (r->values == NULL || !r->values[p].set)
                    fail("record %zu: OK without output %zu", i, p);
            break;
        case ORCH_UDF_KEEP_TRUE:
        case ORCH_UDF_KEEP_FALSE:
            if (a->op != ORCH_UDF_OP_FILTER)
                fail("record %zu: a keep for a %s call", i, orch_udf_op_name(a->op));
            break;
        case ORCH_UDF_DROP:
            break;
        case ORCH_UDF_RECORD_FAILURE:
        case ORCH_UDF_GROUP_FAILURE:
            if (r->msg == NULL)
                fail("record %zu: a failure without a message", i);
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct orch_udf_record recs[16];
    if (size < 3)
        return 0;
    struct call c = {.op = ops[data[0] % 5], .nout = 1 + data[1] % 4u, .n = data[2] % 16u};
    const uint8_t *out = data + 3;
    size_t len = size - 3;

    struct orch_udf_answers ans;
    if (orch_udf_answers_init(&ans, "fuzz", c.op, c.nout) != 0)
        abort();
    struct orch_udf_batch batch = {.n = c.n, .rec = recs};
    if (orch_udf_answers_reset(&ans, &batch) != 0)
        abort();
    int rc = orch_udf__exec_take_reply(c.op, c.nout, out, len, &batch);

    int want = verdict(out, len, &c);
    if (rc != want)
        fail("the decoder says %d (%s) where the protocol says %d", rc,
             orch_udf_answers_error(&ans), want);
    if (rc < 0) {
        const char *msg = orch_udf_answers_error(&ans);
        if (strncmp(msg, "exec '", 6) != 0)
            fail("a failure (%d) without its message: \"%s\"", rc, msg);
    } else {
        if (orch_udf_answers_finish(&ans) != 0 || ans.n != c.n)
            abort();
        check_finished(&ans);
        c.ans = &ans;
        if (verdict(out, len, &c) != 0)
            abort();
    }
    orch_udf_answers_free(&ans);
    return 0;
}
