/* wire.h — the frames that travel between the driver and a worker over their socketpair
 * (pool.h): encoding, and strict decoding.
 *
 * The same frames travel over a TCP connection to a remote worker (launch.h: `--launcher
 * slurm`), which first proves it holds the job's secret (CHALLENGE, AUTH) and then, since it
 * cannot map the job's LMDB, gets input values in its batches and sends output values in
 * its reports ("values" mode, set in CONFIG).
 *
 * Frame. Every message is one frame:
 *
 *     u32 length | u8 type | body[length]
 *
 * `length` counts the body only (not the type byte, not itself) and is at most
 * ORCH_WIRE_MAX_BODY. All integers are little-endian. Inside bodies:
 *
 *     str   u32 n, then n bytes (no NUL among them; decoded as a NUL-terminated copy)
 *     ids   u64 each; a payload id is never 0
 *
 * Bodies (→ worker: sent by the driver; ← worker: sent by the worker):
 *
 *   CHALLENGE→ u32 version | 32 bytes nonce            first frame on a remote connection
 *   AUTH     ← u64 token | 32 bytes mac | u32 pid | str host | str slurm_job
 *              (mac = HMAC-SHA256(secret, nonce | token as u64): launch.h)
 *   CONFIG   → u32 version | str call | u8 fn_kind | str function | str symbol ("" = none)
 *              | u8 op (enum orch_udf_op) | u32 nin | u32 nout | u32 worker
 *              | str payload_dir | u8 values | u64 max_value | u32 batch
 *              | u32 nargs | nargs × (str key | str value)
 *              (values 1: a remote worker; payload_dir is "" and max_value is the largest
 *              output value the driver's store takes. batch: the most records one call of
 *              the UDF's run takes, 0 for any number; a BATCH of more records is run in
 *              runs of at most that many, and answered in one REPORT)
 *   HELLO    ← u32 version | u32 pid                  init succeeded, ready for batches
 *   INITFAIL ← str message                             init failed; the worker exits
 *   BATCH    → u64 id | u8 values | u32 nrec | nrec × record
 *              record := u64 grain | u32 generation | u32 attempt | u32 nin
 *                        | nin × u32 nval | u8 fed | sum(nval) × value
 *              value  := u8 present | u64 payload [| u32 n | n bytes: values and present]
 *              (present 1: payload != 0; present 0: payload == 0. fed 1: a reduce
 *              whose values come in INPUTS frames; its nval are 0, and values is 0)
 *   REPORT   ← u64 batch | u8 status | str message | u8 values | u32 nrec | nrec × answer
 *              answer := u64 grain | u32 generation | u8 outcome | str message
 *                        | u32 first | u32 nchild | u32 nout | nchild*nout × output
 *                        | u32 nfailed | nfailed × (u32 child | str message)
 *                        | u32 nhash | nhash × u64 hash
 *              output := u64 payload | u64 size          (values 0; size: the bytes
 *                                                        stored, 0 for payload 0)
 *                      | u8 set [| u32 n | n bytes: set] (values 1; set 0 = id 0)
 *              (status 1: run() failed, an attempt failure of the batch; status 2: the
 *              outputs could not be stored (payload store full or broken), not the
 *              batch's fault: the driver stops the job; for both, nrec == 0; an answer
 *              other than OK has nchild == nout == nfailed == 0; failed children come in
 *              increasing order, each < nchild, their payload ids are 0 and no other is;
 *              `first` is the ordinal of the answer's first child: an expand whose earlier
 *              children went in CHUNKs answers only those after them; a failed child's
 *              `child` counts from the answer's first; nhash is 0 or nchild: per child a
 *              hash of its output values, stream.h, which a plain expand always gives)
 *   CHUNK    ← u64 batch | u8 values | answer
 *              (children of one record of the batch the worker runs, made while run()
 *              goes on: a streaming expansion, DESIGN §5. The answer is OK, has at least
 *              one child and their hashes; the chunks of a record come in ordinal order,
 *              each `first` where the one before ended, and the REPORT's answer for that
 *              record starts where the last chunk ended)
 *   MORE     ← u64 batch | u64 grain
 *              (the next page of the inputs of a fed record of the batch the worker runs)
 *   INPUTS   → u64 batch | u64 grain | u8 last | u32 nin | u32 nchild
 *              | nchild × nin × value                 (values 0 only)
 *              (one page, answering a MORE: nchild surviving children in ordinal order,
 *              each child's nin values one after the other; the record's list j is the
 *              pages' values j in order. last 1: the record's inputs are complete. The
 *              driver reads a page of children when it is asked, so that a reduce over a
 *              million children is never one list in its memory, DESIGN §5)
 *
 * Decoding is strict: a wrong type, a body shorter or longer than its fields say, a count
 * that cannot fit in the bytes left, an enum out of range, a NUL inside a string, an id 0
 * where an id is due — each is -EPROTO with the detail in orch_error_detail(), never a
 * crash and never an allocation larger than a small multiple of the body. Semantic checks
 * that need the call (nout, which outcomes an op may give, that a report answers the batch
 * sent) are the pool's.
 *
 * Memory. Encoders append to a caller's orch_wire_buf. Decoders put everything they hand
 * out (arrays, NUL-terminated strings, aligned id arrays) in a caller's arena; the result
 * stays valid until the arena is freed, and never points into the frame — except the bytes
 * of values (values mode), which point into the frame's body so that no page image is
 * copied twice: they are valid as long as the frame is.
 */
#ifndef ORCH_WIRE_H
#define ORCH_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "orch_plan.h"
#include "orch_udf.h"
#include "pool.h"
#include "support.h"

#define ORCH_WIRE_VERSION 7 /* 2: failed children in answers; 3: remote workers;
                             * 4: each output's size with its id; 5: the UDF's batch
                             * limit in CONFIG; 6: CHUNK, and each answer's first ordinal
                             * and children's hashes; 7: fed reduces (MORE, INPUTS) */
#define ORCH_WIRE_NONCE 32  /* bytes of a CHALLENGE's nonce and of an AUTH's mac */
#define ORCH_WIRE_HEADER 5u                    /* u32 length + u8 type */
#define ORCH_WIRE_MAX_BODY ((size_t)256 << 20) /* 256 MiB */

#define ORCH_WIRE_TYPES(X)                                                                     \
    X(ORCH_WIRE_CONFIG, 1, "CONFIG")                                                           \
    X(ORCH_WIRE_HELLO, 2, "HELLO")                                                             \
    X(ORCH_WIRE_INITFAIL, 3, "INITFAIL")                                                       \
    X(ORCH_WIRE_BATCH, 4, "BATCH")                                                             \
    X(ORCH_WIRE_REPORT, 5, "REPORT")                                                           \
    X(ORCH_WIRE_CHALLENGE, 6, "CHALLENGE")                                                     \
    X(ORCH_WIRE_AUTH, 7, "AUTH")                                                               \
    X(ORCH_WIRE_CHUNK, 8, "CHUNK")                                                             \
    X(ORCH_WIRE_MORE, 9, "MORE")                                                               \
    X(ORCH_WIRE_INPUTS, 10, "INPUTS")

#define ORCH_WIRE_TYPE_ENUM(name, value, text) name = value,
enum orch_wire_type { ORCH_WIRE_TYPES(ORCH_WIRE_TYPE_ENUM) };
#undef ORCH_WIRE_TYPE_ENUM

/* "CONFIG", ...; "?" for an unknown type. */
const char *orch_wire_type_name(int type);

/* What a worker needs to know about its call (the body of CONFIG). */
struct orch_wire_config {
    const char *call;
    enum orch_fn_kind fn_kind;
    const char *function; /* built-in name, library path, or exec command line */
    const char *symbol;   /* library symbol; "" when none (never NULL once decoded) */
    enum orch_udf_op op;
    uint32_t nin;
    uint32_t nout;
    uint32_t worker;
    const char *payload_dir; /* "" for a remote worker */
    uint8_t values;          /* 1: values travel in batches and reports (remote worker) */
    uint64_t max_value;      /* values mode: the largest value the driver's store takes */
    uint32_t batch;          /* the most records per run (the call's batch); 0: any */
    uint32_t nargs;
    const char *const *arg_keys;
    const char *const *arg_values;
};

struct orch_wire_hello {
    uint32_t version;
    uint32_t pid;
};

struct orch_wire_challenge {
    uint32_t version;
    uint8_t nonce[ORCH_WIRE_NONCE];
};

/* A remote worker's proof: which launch it is (token) and that it holds the secret. */
struct orch_wire_auth {
    uint64_t token;
    uint8_t mac[ORCH_WIRE_NONCE];
    uint32_t pid;
    const char *host;      /* the worker's host name */
    const char *slurm_job; /* "JOBID.STEPID" of its Slurm step, "" when none */
};

/* ---- encoding -------------------------------------------------------------------------- */

/* A growable byte buffer. Zero-initialise it; free with orch_wire_buf_free(). */
struct orch_wire_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
};

void orch_wire_buf_free(struct orch_wire_buf *b);

/* Each appends one whole frame to b. Returns 0, -ENOMEM, or -E2BIG (the body would pass
 * ORCH_WIRE_MAX_BODY), -EINVAL (a string with more than UINT32_MAX bytes, a NULL pointer
 * where a string or array is due). On failure b is as it was. */
int orch_wire_put_config(struct orch_wire_buf *b, const struct orch_wire_config *c);
int orch_wire_put_hello(struct orch_wire_buf *b, const struct orch_wire_hello *h);
int orch_wire_put_initfail(struct orch_wire_buf *b, const char *message);
int orch_wire_put_batch(struct orch_wire_buf *b, const struct orch_wire_batch *batch);
int orch_wire_put_report(struct orch_wire_buf *b, const struct orch_wire_report *r);
int orch_wire_put_chunk(struct orch_wire_buf *b, const struct orch_wire_chunk *c);
int orch_wire_put_challenge(struct orch_wire_buf *b, const struct orch_wire_challenge *c);
int orch_wire_put_more(struct orch_wire_buf *b, const struct orch_wire_more *m);
int orch_wire_put_inputs(struct orch_wire_buf *b, const struct orch_wire_inputs *in);
int orch_wire_put_auth(struct orch_wire_buf *b, const struct orch_wire_auth *au);

/* ---- decoding -------------------------------------------------------------------------- */

/* One frame found in a byte stream; body points into the caller's bytes. */
struct orch_wire_frame {
    int type;
    const uint8_t *body;
    size_t len;  /* body bytes */
    size_t size; /* ORCH_WIRE_HEADER + len: what the frame takes in the stream */
};

/* Looks at the start of avail bytes. Returns 1 and fills *f when a whole frame is there;
 * 0 when more bytes are needed (f->size is then what the frame will take once its header
 * is complete, else 0); -EPROTO (detail set) when the header announces an unknown type or
 * a body over ORCH_WIRE_MAX_BODY. */
int orch_wire_next(const void *data, size_t avail, struct orch_wire_frame *f);

/* Each decodes frame f, which must have the matching type (else -EPROTO), into *out.
 * Returns 0, -EPROTO (malformed; detail set, *out unspecified), -ENOMEM. Everything *out
 * points to lives in arena a. */
int orch_wire_get_config(const struct orch_wire_frame *f, struct orch__arena *a,
                         struct orch_wire_config *out);
int orch_wire_get_hello(const struct orch_wire_frame *f, struct orch_wire_hello *out);
int orch_wire_get_initfail(const struct orch_wire_frame *f, struct orch__arena *a,
                           const char **message);
int orch_wire_get_batch(const struct orch_wire_frame *f, struct orch__arena *a,
                        struct orch_wire_batch *out);
int orch_wire_get_report(const struct orch_wire_frame *f, struct orch__arena *a,
                         struct orch_wire_report *out);
int orch_wire_get_chunk(const struct orch_wire_frame *f, struct orch__arena *a,
                        struct orch_wire_chunk *out);
int orch_wire_get_challenge(const struct orch_wire_frame *f, struct orch_wire_challenge *out);
int orch_wire_get_more(const struct orch_wire_frame *f, struct orch_wire_more *out);
int orch_wire_get_inputs(const struct orch_wire_frame *f, struct orch__arena *a,
                         struct orch_wire_inputs *out);
int orch_wire_get_auth(const struct orch_wire_frame *f, struct orch__arena *a,
                       struct orch_wire_auth *out);

#endif
