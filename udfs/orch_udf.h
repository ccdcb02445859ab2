/* orch_udf.h — the C ABI between orch and a user-defined function (UDF).
 *
 * This header is the whole contract a UDF sees. It depends on nothing of orch (only on
 * the C standard library), so a UDF built as a shared object links against nothing of
 * orch and can be compiled anywhere with a C11 compiler:
 *
 *     cc -shared -fPIC -o myudf.so myudf.c        # with this header on the include path
 *
 * and used from a pipeline as `call c = library("myudf.so", "my_udf")`.
 *
 * ---- Model ---------------------------------------------------------------------------
 *
 * A UDF is a `struct orch_udf`: an ABI version, a name, and three functions.
 *
 *   init(cfg, &state)   once per worker process, before any batch. Loads the heavy state
 *                       (a model, a dictionary) and checks the call's arguments. Returns 0
 *                       or a negative errno value; on failure it may explain itself with
 *                       orch_udf_config_error() and *state is not used.
 *   run(state, batch)   once per physical batch: a list of records in, one answer per
 *                       record out (List -> List). Returns 0 when every record has been
 *                       answered (an answer may itself be a typed failure), or a negative
 *                       errno value: an *attempt failure* of the whole batch (DESIGN §4),
 *                       after which every answer given in this call is discarded and the
 *                       grains are retried, perhaps on another worker. It may explain
 *                       itself with orch_udf_batch_error().
 *   fini(state)         once, when the worker shuts down cleanly. May be NULL. Never called
 *                       when init failed. A worker that crashes or is killed never calls it.
 *
 * One state is used by one thread at a time; orch never calls run concurrently on the same
 * state. Different worker processes each have their own state (the `worker` index in the
 * config tells them apart, e.g. to pick a GPU).
 *
 * ---- Records and answers -------------------------------------------------------------
 *
 * Each record of a batch is one grain: the call applied to one entity. It carries the
 * grain id and generation (together, the idempotency key of a UDF with side effects: a
 * retried grain has a higher generation), the 1-based attempt number, and one input list
 * per input port of the statement:
 *
 *   map, filter, expand, expand aligned   each list has exactly one value (n == 1). An
 *                                         optional input (`?page.hint`) whose item was
 *                                         Dropped arrives with present == 0.
 *   reduce                                each list has the values of the parent's
 *                                         surviving children, in ordinal order; n may be 0.
 *
 * The UDF answers every record i of the batch in exactly one of these ways, using the
 * inline functions below (they call back into the host through batch->ops):
 *
 *   map, reduce      orch_udf_emit(batch, i, port, data, len) once for each output port
 *                    0 .. nout-1: the record succeeded with those values.
 *   expand           for each child, in order: orch_udf_child(batch, i), then one
 *                    orch_udf_emit() per output port (they fill that child). Zero children
 *                    is said with orch_udf_no_children(batch, i) — it is a success with an
 *                    empty list, not the same thing as a drop.
 *                    A child that exists but cannot be made (page 7 of 12 will not render)
 *                    is said with orch_udf_fail_child(batch, i, msg) in its place: the
 *                    expansion still succeeds with all its children, in order, and only
 *                    that child's outputs are Failed (a RecordFailure of that child, with
 *                    msg, in `failures` under the child's key); its siblings go on. The
 *                    next orch_udf_child() starts the child after it. (ABI version 2.)
 *   filter           orch_udf_keep(batch, i, true | false). False makes the filtered port
 *                    Dropped for that entity.
 *   any op           orch_udf_drop(batch, i): nothing to produce; the outputs are Dropped
 *                    (for expand: the expansion is Dropped, not zero children).
 *                    orch_udf_fail_record(batch, i, msg): RecordFailure, this record is bad.
 *                    orch_udf_fail_group(batch, i, msg): GroupFailure, this record's parent
 *                    is bad (its siblings are not run); on a root entity, a RecordFailure.
 *
 * A failure may follow any other answer of the record (values, children, keep, drop): it
 * replaces it, so a UDF that finds a problem half-way need not undo anything. Anything
 * else that does not fit the rules (an index past the batch, a port past nout, a second
 * value for the same port, an emit before the first child of an expand, an answer of the
 * wrong kind for the op, a second keep or drop, an emit into a failed child, any answer
 * after a failure of the record) returns
 * -EINVAL and changes nothing. A record left without an answer, or with an output
 * port left without a value, becomes a RecordFailure made by the host ("udf ocr gave no
 * value for output 2 of 2"). These functions return 0, -EINVAL as said, or -ENOMEM;
 * a UDF that gets -ENOMEM should return it from run.
 *
 * The host copies every byte given to orch_udf_emit() before it returns; the UDF keeps
 * ownership of its buffers. The input values are owned by the host and are valid only
 * until run returns.
 *
 * ---- Shared objects: library(path, symbol) ----------------------------------------------
 *
 * A shared object exports each of its UDFs as a *data* symbol of type
 * `const struct orch_udf`, with default visibility:
 *
 *     ORCH_UDF_EXPORT const struct orch_udf my_udf = {
 *         .abi_version = ORCH_UDF_ABI_VERSION,
 *         .name = "my_udf",
 *         .init = my_init, .run = my_run, .fini = my_fini,
 *     };
 *
 * orch opens it with dlopen(RTLD_NOW | RTLD_LOCAL), looks the symbol up, and refuses it
 * with a clear message when abi_version differs from the host's ORCH_UDF_ABI_VERSION or
 * when run is NULL. A data symbol (rather than a getter function) is used so that the
 * version can be checked before any of the UDF's code runs. The object is opened in the
 * worker process, after fork: a UDF may start threads or open devices in init.
 *
 * ---- External programs: exec("command line") --------------------------------------------
 *
 * A UDF may also be any program speaking the exec protocol on its stdin/stdout; see
 * udfs/EXEC_PROTOCOL.md and the Python helper udfs/python/orch_udf.py.
 */
#ifndef ORCH_UDF_H
#define ORCH_UDF_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this ABI. A host accepts a UDF built for its own version or an older one
 * down to ORCH_UDF_ABI_OLDEST (each version only appends to struct orch_udf_host_ops, so an
 * older UDF finds every op it knows where it expects it), and refuses a newer one: it may
 * call ops this host does not have.
 *   1  the first version.
 *   2  adds fail_child (orch_udf_fail_child): one failed child of an expansion. */
#define ORCH_UDF_ABI_VERSION 2
#define ORCH_UDF_ABI_OLDEST 1

/* Marks a UDF symbol for export from a shared object built with -fvisibility=hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define ORCH_UDF_EXPORT __attribute__((visibility("default")))
#else
#define ORCH_UDF_EXPORT
#endif

/* The kind of statement that uses the call. The values are fixed: they also travel in the
 * exec protocol. */
enum orch_udf_op {
    ORCH_UDF_OP_MAP = 0,
    ORCH_UDF_OP_EXPAND = 1,
    ORCH_UDF_OP_EXPAND_ALIGNED = 2, /* must give exactly as many children as the plain
                                       expansion of the same parent; the host checks */
    ORCH_UDF_OP_FILTER = 3,
    ORCH_UDF_OP_REDUCE = 4,
};

/* What init is told. Every pointer is owned by the host and valid until init returns;
 * copy what you keep. */
struct orch_udf_config {
    const char *call;     /* the call's name in the pipeline ("ocr") */
    const char *function; /* built-in name, library path, or the exec command line */
    enum orch_udf_op op;
    size_t nin;  /* input lists per record (the statement's inputs) */
    size_t nout; /* output ports: values per answer (per child for expand); 1 for filter,
                    which emits no values */
    /* The call's arguments, in declaration order: keys ("sep") and values, the literal
     * text: strings unescaped ("\n" is a newline), numbers and names as written ("150",
     * "group"). */
    size_t nargs;
    const char *const *arg_keys;
    const char *const *arg_values;
    int worker; /* 0-based index of this worker in the call's pool */
    /* Where init may write a message, NUL-terminated, at most error_size bytes: use
     * orch_udf_config_error(). May be NULL. */
    char *error;
    size_t error_size;
};

/* The value of argument `key`, or NULL when the call has none. The last one wins if a key
 * is repeated. */
static inline const char *orch_udf_arg(const struct orch_udf_config *cfg, const char *key)
{
    const char *found = NULL;
    for (size_t i = 0; i < cfg->nargs; i++)
        if (strcmp(cfg->arg_keys[i], key) == 0)
            found = cfg->arg_values[i];
    return found;
}

/* One input value: `len` bytes at `data` (not NUL-terminated; data may be NULL when len is
 * 0). present == 0 for an optional input whose item was Dropped; data and len are then
 * NULL and 0. */
struct orch_udf_value {
    const void *data;
    size_t len;
    int present;
};

/* One input list: n values. */
struct orch_udf_input {
    size_t n;
    const struct orch_udf_value *v;
};

struct orch_udf_record {
    uint64_t grain_id;
    uint32_t generation;             /* grows on every retry and resume of the grain */
    uint32_t attempt;                /* 1-based: which attempt of this grain this is */
    const struct orch_udf_input *in; /* cfg->nin lists */
};

/* The host's side of a batch. A UDF never calls these directly: use the inline functions
 * below. Each returns 0 or a negative errno value. */
struct orch_udf_host_ops {
    int (*emit)(void *host, size_t i, size_t port, const void *data, size_t len);
    int (*child)(void *host, size_t i);
    int (*no_children)(void *host, size_t i);
    int (*keep)(void *host, size_t i, bool keep);
    int (*drop)(void *host, size_t i);
    int (*fail_record)(void *host, size_t i, const char *msg);
    int (*fail_group)(void *host, size_t i, const char *msg);
    int (*fail_child)(void *host, size_t i, const char *msg); /* since version 2 */
};

struct orch_udf_batch {
    size_t n;                          /* records */
    const struct orch_udf_record *rec; /* n records, in batch order */
    const struct orch_udf_host_ops *ops;
    void *host;  /* opaque to the UDF */
    char *error; /* where run may explain a non-zero return; use
                    orch_udf_batch_error(). May be NULL. */
    size_t error_size;
};

struct orch_udf {
    uint32_t abi_version; /* ORCH_UDF_ABI_VERSION */
    const char *name;
    int (*init)(const struct orch_udf_config *cfg, void **state); /* may be NULL: state
                                                                     is then NULL */
    int (*run)(void *state, struct orch_udf_batch *batch);
    void (*fini)(void *state); /* may be NULL */
};

/* ---- answering (see "Records and answers" above) ------------------------------------- */

/* Gives the value of output `port` of record i (map, reduce) or of record i's current child
 * (expand). The host copies the len bytes at data (data may be NULL when len is 0). */
static inline int orch_udf_emit(struct orch_udf_batch *b, size_t i, size_t port,
                                const void *data, size_t len)
{
    return b->ops->emit(b->host, i, port, data, len);
}

/* emit of a NUL-terminated string, without its NUL. */
static inline int orch_udf_emit_str(struct orch_udf_batch *b, size_t i, size_t port,
                                    const char *s)
{
    return b->ops->emit(b->host, i, port, s, strlen(s));
}

/* expand: starts the next child of record i; the following emits of record i fill it. */
static inline int orch_udf_child(struct orch_udf_batch *b, size_t i)
{
    return b->ops->child(b->host, i);
}

/* expand: record i succeeded with zero children. */
static inline int orch_udf_no_children(struct orch_udf_batch *b, size_t i)
{
    return b->ops->no_children(b->host, i);
}

/* expand: record i's next child exists but failed (msg copied; NULL means no message): its
 * outputs are Failed, its siblings are unaffected. */
static inline int orch_udf_fail_child(struct orch_udf_batch *b, size_t i, const char *msg)
{
    return b->ops->fail_child(b->host, i, msg);
}

/* filter: record i's predicate is `keep`. */
static inline int orch_udf_keep(struct orch_udf_batch *b, size_t i, bool keep)
{
    return b->ops->keep(b->host, i, keep);
}

/* Record i has nothing to produce: its outputs are Dropped. */
static inline int orch_udf_drop(struct orch_udf_batch *b, size_t i)
{
    return b->ops->drop(b->host, i);
}

/* RecordFailure of record i, with a message (copied; NULL means no message). */
static inline int orch_udf_fail_record(struct orch_udf_batch *b, size_t i, const char *msg)
{
    return b->ops->fail_record(b->host, i, msg);
}

/* GroupFailure of record i: its parent is bad (see DESIGN §4). */
static inline int orch_udf_fail_group(struct orch_udf_batch *b, size_t i, const char *msg)
{
    return b->ops->fail_group(b->host, i, msg);
}

/* ---- explaining an error ------------------------------------------------------------- */

/* Writes a printf-style message into cfg->error (when the host gave a buffer) and returns
 * rc, so that init can `return orch_udf_config_error(cfg, -EINVAL, "sep is required");`. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static inline int
orch_udf_config_error(const struct orch_udf_config *cfg, int rc, const char *fmt, ...)
{
    if (cfg->error != NULL && cfg->error_size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cfg->error, cfg->error_size, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* The same for run: explains the attempt failure that run is about to return. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static inline int
orch_udf_batch_error(struct orch_udf_batch *b, int rc, const char *fmt, ...)
{
    if (b->error != NULL && b->error_size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->error, b->error_size, fmt, ap);
        va_end(ap);
    }
    return rc;
}

#ifdef __cplusplus
}
#endif

#endif
