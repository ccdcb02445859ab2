/* orch_udf_host.h — the host side of the UDF ABI: built-ins, the library() loader, the
 * exec() adapter, and the collector that records a batch's answers for the engine.
 *
 * Only orch itself includes this header; a UDF sees orch_udf.h alone.
 *
 * How a worker uses this module, per call:
 *
 *     const struct orch_udf *udf;  void *dl = NULL;
 *     builtin:  udf = orch_udf_builtin(name);                 (NULL: unknown name)
 *     library:  orch_udf_load_library(path, symbol, &udf, &dl);
 *     exec:     udf = &orch_udf_exec;      (cfg.function = the command line)
 *
 *     char err[1024] = "";  cfg.error = err;  cfg.error_size = sizeof err;
 *     void *state = NULL;
 *     rc = udf->init ? udf->init(&cfg, &state) : 0;            (rc < 0: message in err)
 *     orch_udf_answers_init(&ans, call_name, cfg.op, cfg.nout);
 *     for each batch:
 *         batch.n = ...; batch.rec = ...;
 *         orch_udf_answers_reset(&ans, &batch);                 (binds batch.ops/host/error)
 *         rc = udf->run(state, &batch);
 *         rc < 0:  attempt failure of the batch; orch_udf_answers_error(&ans) explains it
 *         rc == 0: orch_udf_answers_finish(&ans); then ans.rec[i] is record i's outcome
 *     orch_udf_answers_free(&ans);
 *     if (udf->fini) udf->fini(state);
 *     orch_udf_unload_library(dl);
 *
 * Errors follow engine/base/orch_error.h: 0, or a negative ORCH_E* code or -errno, with the
 * detail in orch_error_detail() where one is said to be set.
 */
#ifndef ORCH_UDF_HOST_H
#define ORCH_UDF_HOST_H

#include "orch_udf.h"

#include <stdbool.h>
#include <stddef.h>

/* ---- ops ----------------------------------------------------------------------------- */

/* "map", "expand", "expand aligned", "filter", "reduce"; "?" when out of range. */
const char *orch_udf_op_name(enum orch_udf_op op);

/* ---- built-ins (DESIGN §7) ----------------------------------------------------------- */

/* The built-in UDF called `name` into *out: 0, -ENOENT (no such built-in), or the error of
 * opening the module its code is in (builtins.c: the OCR and video built-ins), each with
 * orch_error_detail(). The struct is never freed. The built-ins, their arguments and ops
 * are described in udfs/builtins.c. Each checks its op and its arguments in init and
 * explains a mismatch through cfg->error. Call it in the process that runs the UDF (a
 * module is opened in it). */
int orch_udf_builtin_get(const char *name, const struct orch_udf **out);

/* orch_udf_builtin_get's struct, or NULL for either error. */
const struct orch_udf *orch_udf_builtin(const char *name);

/* The built-ins in a fixed order, for listings and tests: i < orch_udf_builtin_count().
 * _at opens the module of a built-in that is in one (NULL when that fails). */
size_t orch_udf_builtin_count(void);
const struct orch_udf *orch_udf_builtin_at(size_t i);

/* The directory the modules are opened from, for tests (a module already opened stays);
 * NULL: the build directory's when it has them, else the installed ones. */
void orch_udf_set_module_dir(const char *dir);

/* Settings of the built-ins for the whole process, given before the first init (the
 * worker's start in engine/cli/ fills them from the environment: docs/configuration.md).
 *
 * pdf_render and pdf_text: the cap on MuPDF's heap, bytes, instead of the built-ins' own
 * (builtins_pdf.c, "Memory"); 0: their own. For tests: a small cap shows what a PDF too big
 * for the real one does. The CUDA module of page_stats: orch_page_stats_gpu_set_module
 * (page_stats.h). */
void orch_udf_pdf_set_heap_max(size_t bytes);

/* ---- library(path, symbol) ----------------------------------------------------------- */

/* Opens the shared object at `path` (dlopen RTLD_NOW | RTLD_LOCAL) and finds the
 * `const struct orch_udf` exported as `symbol`. On success *out points into the object and
 * *handle must be given to orch_udf_unload_library() after the UDF's fini; *out is valid
 * until then. Call it in the worker process, after fork.
 *
 * Returns 0, or (with *out and *handle left NULL, nothing left open, and the detail set):
 *   ORCH_ENOTFOUND  the object cannot be opened (missing file, unresolved symbols: the
 *                   detail carries dlerror()'s text) or it has no such symbol;
 *   -ENOEXEC        the symbol's abi_version is not in ORCH_UDF_ABI_OLDEST ..
 *                   ORCH_UDF_ABI_VERSION, or it has no run;
 *   -EINVAL         path or symbol is NULL or empty. */
int orch_udf_load_library(const char *path, const char *symbol, const struct orch_udf **out,
                          void **handle);

/* dlcloses a handle from orch_udf_load_library(). NULL is a no-op. */
void orch_udf_unload_library(void *handle);

/* ---- exec("command line") ------------------------------------------------------------ */

/* The adapter that makes a persistent external program a UDF. Its init runs
 * `/bin/sh -c cfg->function` with pipes on the program's stdin and stdout (its stderr is
 * the worker's), sends the config and waits for the program's answer; run sends a batch
 * and reads the answers; fini closes the program's stdin and reaps it (killing it when it
 * does not exit within 5 s). The wire format is in udfs/EXEC_PROTOCOL.md.
 *
 * A program that exits, is killed, or writes anything but the protocol in the middle of a
 * batch makes run return -EPIPE or -EPROTO with a message in batch->error; the program is
 * then killed and reaped, and every later run of that state fails at once: the worker
 * should be replaced (fini, then a new worker). The program runs in the process group of a
 * keeper, a second child of the process, that SIGKILLs the whole group when the process
 * ends in any way (SIGKILL included): neither the program nor anything it started in its
 * group outlives the worker (udfs/exec.c has the why). fini and a broken state kill the
 * group too, and reap both children: nothing of a state is left after fini.
 *
 * The adapter blocks SIGPIPE only around its own writes; it changes no signal disposition
 * of the process. */
extern const struct orch_udf orch_udf_exec;

/* ---- the answer collector ------------------------------------------------------------ */

/* X(name, text): the outcome of one record after orch_udf_answers_finish(). */
#define ORCH_UDF_OUTCOMES(X)                                                                   \
    X(ORCH_UDF_NONE, "none")                     /* unanswered: only before finish */          \
    X(ORCH_UDF_OK, "ok")                         /* values (map, reduce) or children */        \
    X(ORCH_UDF_DROP, "drop")                     /* outputs Dropped / expansion Dropped */     \
    X(ORCH_UDF_KEEP_TRUE, "keep")                /* filter said true */                        \
    X(ORCH_UDF_KEEP_FALSE, "reject")             /* filter said false: port Dropped */         \
    X(ORCH_UDF_RECORD_FAILURE, "record_failure") /* msg says why */                            \
    X(ORCH_UDF_GROUP_FAILURE, "group_failure")   /* msg says why */

#define ORCH_UDF_OUTCOME_ENUM(name, text) name,
enum orch_udf_outcome { ORCH_UDF_OUTCOMES(ORCH_UDF_OUTCOME_ENUM) ORCH_UDF_OUTCOME__COUNT };
#undef ORCH_UDF_OUTCOME_ENUM

/* "ok", "record_failure", ...; "?" when out of range. */
const char *orch_udf_outcome_name(enum orch_udf_outcome o);

/* One emitted value: len bytes at data, a copy owned by the collector (data is never NULL
 * once set, even for len 0). `set` is false until the UDF emitted it. */
struct orch_udf_out {
    void *data;
    size_t len;
    bool set;
};

/* The answer to one record. Read-only for the caller. */
struct orch_udf_answer {
    enum orch_udf_outcome outcome;
    char *msg;                     /* failures: the message, NUL-terminated, never NULL
                                      ("" when the UDF gave none); NULL otherwise */
    struct orch_udf_out *values;   /* OK of map/reduce: nout values, by port; else NULL */
    size_t nchildren;              /* OK of expand: the children, in order */
    struct orch_udf_out *children; /* nchildren * nout values: child c, port p is
                                      children[c * nout + p]; NULL when nchildren == 0.
                                      A failed child's values are all unset. */
    char **child_msg;              /* OK of expand: NULL when no child failed, else
                                      nchildren entries: the message of failed child c
                                      (never NULL for one: "" when none was given), NULL
                                      for a child that succeeded */
    size_t base;                   /* expand: the ordinal of children[0]; the children
                                      before it were handed to the stream hook and are no
                                      longer held (0 without a hook) */
    size_t cap_children;           /* private: allocated children */
    size_t held_bytes;             /* private: bytes of the children held */
    int64_t held_since_ms;         /* private: when the first child held began */
    size_t cap_msg;                /* private: allocated child_msg */
    bool closed;                   /* private: no_children() was given */
};

/* A streaming expansion (DESIGN §5): the collector of a plain expand hands a record's
 * complete children to `flush` while run() goes on, once it holds `max_children` of them,
 * or `max_bytes` of their values, or the first of them began `max_ms` ago, whichever comes
 * first. A child is complete when the UDF begins the next one (orch_udf_child,
 * orch_udf_fail_child) for the same record, or once it has a value for every port (a
 * failed child at once): until then it may still get values. A child complete
 * `gap_ms` or more after the one before it (or the batch's start) is handed over at once,
 * with
 * those held before it: a slow expander's children reach the driver as they are made,
 * a fast one's go by the threshold. flush
 * gets children [0, n) of record i (ordinals base .. base+n-1); returning 0, it has taken
 * them, and the collector frees them and moves base on; returning anything else, it did
 * not, and the collector keeps every child of the batch from then on (the answer carries
 * them, as without a hook). The thresholds are checked only when the UDF calls the host. */
struct orch_udf_answers;
struct orch_udf_stream {
    size_t max_children;
    size_t max_bytes;
    int64_t max_ms;
    int64_t gap_ms; /* a child complete this long after the one before: at once (0: off) */
    int (*flush)(void *ctx, const struct orch_udf_answers *a, size_t i, size_t n);
    void *ctx;
};

/* The defaults of a streaming expansion's thresholds (chosen by scripts/bench/streaming). */
#define ORCH_UDF_STREAM_CHILDREN 256
#define ORCH_UDF_STREAM_BYTES ((size_t)1 << 20)
#define ORCH_UDF_STREAM_MS 5
#define ORCH_UDF_STREAM_GAP_MS 1

/* The answers to one batch. Fields marked "read" may be read by the caller; the rest is
 * private. Not thread-safe: one batch at a time. */
struct orch_udf_answers {
    char *udf;                   /* read: the name used in messages (a copy) */
    enum orch_udf_op op;         /* read */
    size_t nout;                 /* read */
    size_t n;                    /* read: records of the current batch */
    struct orch_udf_answer *rec; /* read: n answers, in batch order */
    size_t cap;
    bool finished;
    struct orch_udf_stream stream; /* max_children 0: none (orch_udf_answers_stream) */
    bool stream_off;               /* flush refused: no more for this batch */
    int64_t last_child_ms;         /* the batch's start, then the last child complete */
    char error[1024]; /* batch->error points here */
};

/* Prepares an empty collector for a call whose statement has op `op` and `nout` output
 * ports (>= 1). udf is the name used in the messages that finish() makes (the call's
 * name is the most useful). Returns 0, -EINVAL (nout == 0, bad op) or -ENOMEM; on failure
 * nothing needs freeing. */
int orch_udf_answers_init(struct orch_udf_answers *a, const char *udf, enum orch_udf_op op,
                          size_t nout);

/* Forgets the previous batch's answers (every pointer into them becomes invalid), makes
 * room for batch->n records, and binds batch->ops, batch->host and batch->error to this
 * collector: the caller sets batch->n and batch->rec first, then calls run. Returns 0 or
 * -ENOMEM (the batch is then not bound). */
int orch_udf_answers_reset(struct orch_udf_answers *a, struct orch_udf_batch *batch);

/* Sets (or, with NULL, removes) the stream hook of a plain expand's collector; kept over
 * batches. Any other op: ignored. */
void orch_udf_answers_stream(struct orch_udf_answers *a, const struct orch_udf_stream *s);

/* The hash of one child's output values as the engine compares them when an expansion is
 * replayed (DESIGN §4): over the nout values at v (unset ones hash as absent), or, for a
 * failed child (failed != NULL), over its message. Stable across processes and runs. */
uint64_t orch_udf_child_hash(const struct orch_udf_out *v, size_t nout, const char *failed);

/* After run returned 0: turns every record the UDF left unanswered or incomplete into a
 * RecordFailure with a message ("udf NAME gave no value for output 2"). Afterwards no
 * record is ORCH_UDF_NONE, every OK of map/reduce has nout set values and every child of an
 * OK expand has nout set values. Expand aligned's child count is not checked here (the
 * collector does not know the plain expansion). Returns 0 or -ENOMEM. Answers and values
 * stay valid until the next reset or free. Answers given after finish are refused with
 * -EINVAL. */
int orch_udf_answers_finish(struct orch_udf_answers *a);

/* The message run left in batch->error ("" when none): valid until the next reset. */
const char *orch_udf_answers_error(const struct orch_udf_answers *a);

/* Frees everything the collector holds. The struct itself is the caller's. Safe on a
 * zeroed struct and twice in a row. */
void orch_udf_answers_free(struct orch_udf_answers *a);

#endif
