/* orch_plan.h — the plan: the immutable, checked form of a pipeline, and the public C API
 * that builds one.
 *
 * A plan is what the compiler produces and what the engine executes. The `.orch` language
 * (orch_lang.h) is only a front end on this API: every check of DESIGN §2 lives in the
 * builder, so a plan built from C is checked exactly like one written in a file.
 *
 * Model. Everything in a plan is named by a small dense index, stable for the plan's
 * lifetime and across a rebuild from its canonical text:
 *
 *   domain  one level of the hierarchy; a root has parent -1.
 *   port    a named value of one domain ("page.text"); exactly one producer: a source
 *           (roots) or a statement.
 *   call    one configured use of a function, with its arguments and options. A call is
 *           used by at most one statement, so a grain (call x entity) is well defined.
 *   stmt    one statement: map, expand, expand aligned, filter, broadcast or reduce. Its
 *           `domain` is the domain of its grains (for expand: the parent domain; for
 *           reduce: the parent domain), its `target` the domain of its outputs.
 *
 * Domains, sources, calls and statements are numbered in declaration order; ports by
 * producer: the sources' ports in source order, then each statement's outputs in
 * statement order (so that the numbering does not depend on where a port was first
 * named).
 *
 * Building. A builder collects declarations in any order for ports (statements are
 * declarations, not steps), but domains and calls must be declared before they are
 * referenced. Each orch_plan_add_* checks what it can at once and records a diagnostic on
 * failure; the caller may keep going to collect every error in one pass.
 * orch_plan_build() runs the whole-plan checks (producers, acyclicity, domain structure)
 * and, when no error was recorded, hands out the immutable plan.
 *
 * Canonical text. A plan has one canonical text: the pipeline written back in the `.orch`
 * language, every option explicit, every path resolved, whitespace and comments
 * normalised. Compiling it gives the same plan and the same text. Its SHA-256 (hex) is the
 * plan hash, which a job stores so that `resume` can rebuild the plan from the job alone
 * and refuse a mismatch.
 *
 * Memory. The builder owns everything it is given (strings are copied). A plan owns all
 * memory reachable from it; pointers it hands out stay valid until orch_plan_free().
 */
#ifndef ORCH_PLAN_H
#define ORCH_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- enumerations (one X-macro list each, so names never drift) ------------------------ */

#define ORCH_OPS(X)                                                                           \
    X(ORCH_OP_MAP, "map")                                                                     \
    X(ORCH_OP_EXPAND, "expand")                                                               \
    X(ORCH_OP_EXPAND_ALIGNED, "expand aligned")                                               \
    X(ORCH_OP_FILTER, "filter")                                                               \
    X(ORCH_OP_BROADCAST, "broadcast")                                                         \
    X(ORCH_OP_REDUCE, "reduce")

#define ORCH_SOURCE_KINDS(X)                                                                  \
    X(ORCH_SOURCE_FILES, "files")                                                             \
    X(ORCH_SOURCE_LINES, "lines")

#define ORCH_FN_KINDS(X)                                                                      \
    X(ORCH_FN_BUILTIN, "builtin")                                                             \
    X(ORCH_FN_LIBRARY, "library")                                                             \
    X(ORCH_FN_EXEC, "exec")

#define ORCH_RESERVES(X)                                                                      \
    X(ORCH_RESERVE_ELASTIC, "elastic")                                                        \
    X(ORCH_RESERVE_PARENT, "parent")

/* The kind of a literal argument value, kept so the canonical text can write it back. */
#define ORCH_ARG_KINDS(X)                                                                     \
    X(ORCH_ARG_STRING, "string")                                                              \
    X(ORCH_ARG_NUMBER, "number")                                                              \
    X(ORCH_ARG_NAME, "name")

#define ORCH_ENUM_ITEM(name, text) name,
enum orch_op { ORCH_OPS(ORCH_ENUM_ITEM) ORCH_OP__COUNT };
enum orch_source_kind { ORCH_SOURCE_KINDS(ORCH_ENUM_ITEM) ORCH_SOURCE__COUNT };
enum orch_fn_kind { ORCH_FN_KINDS(ORCH_ENUM_ITEM) ORCH_FN__COUNT };
enum orch_reserve { ORCH_RESERVES(ORCH_ENUM_ITEM) ORCH_RESERVE__COUNT };
enum orch_arg_kind { ORCH_ARG_KINDS(ORCH_ENUM_ITEM) ORCH_ARG__COUNT };
#undef ORCH_ENUM_ITEM

/* Name of an enumerator ("expand aligned", "parent", ...); "?" when out of range. */
const char *orch_op_name(enum orch_op op);
const char *orch_source_kind_name(enum orch_source_kind k);
const char *orch_fn_kind_name(enum orch_fn_kind k);
const char *orch_reserve_name(enum orch_reserve r);
const char *orch_arg_kind_name(enum orch_arg_kind k);

/* ---- the immutable plan ---------------------------------------------------------------- */

/* A position in a pipeline file; line and col start at 1. {0, 0} means "no position"
 * (a plan built from C). */
typedef struct orch_loc {
    int line;
    int col;
} orch_loc;

struct orch_domain {
    const char *name;
    int parent;        /* domain index, -1 for a root */
    int depth;         /* 0 for a root */
    int source;        /* index into sources for a root, else -1 */
    int expand;        /* stmt index of the plain expand that defines it, -1 for a root */
    int nchildren;     /* child domains, in declaration order */
    const int *children;
};

struct orch_port {
    const char *name;      /* "text" */
    const char *qualified; /* "page.text" */
    int domain;
    int source;            /* source index when a source produces it, else -1 */
    int producer;          /* stmt index when a statement produces it, else -1 */
    int nconsumers;        /* statements reading it, ascending */
    const int *consumers;
    bool output;           /* named by an `output` statement: payloads kept after the job */
};

struct orch_source {
    int domain;
    int port;
    enum orch_source_kind kind;
    const char *arg;       /* the glob or file, resolved against the pipeline's directory */
    const char *written;   /* the glob or file as the pipeline wrote it (a plan rebuilt
                            * from its canonical text has only the resolved one) */
    /* A source an edited pipeline dropped with its domain (`orch update DIR PIPELINE`):
     * kept so that its port keeps its id; it admits no root, and the job's roots of its
     * domain are retired. Written `retired source …` in the canonical text. */
    bool retired;
};

struct orch_arg {
    const char *key;
    const char *value;     /* string arguments: the unescaped bytes (NUL-terminated) */
    enum orch_arg_kind kind;
};

struct orch_call_opts {
    int workers;           /* persistent worker processes, >= 1 */
    int batch;             /* the UDF's own limit: the most records one `run` takes, >= 1;
                              ORCH_BATCH_AUTO (0): none. Either way the driver sizes each
                              dispatch from what it measures (DESIGN §5); a dispatch of
                              more grains runs `run` several times in the worker */
    int64_t batch_bytes;   /* cut a batch at this many input bytes; 0 = no limit */
    double cpus;           /* >= 0, fractional allowed */
    double gpus;           /* >= 0, fractional allowed */
    int retries;           /* attempt failures tolerated per grain, >= 0 */
    int64_t timeout_ms;    /* per batch; 0 = none */
    enum orch_reserve reserve;
};

/* `batch=auto`: the UDF takes records in any number; the runtime sizes every dispatch. */
#define ORCH_BATCH_AUTO 0

/* Fills o with the defaults of DESIGN §2: workers=1, batch=auto, cpus=1, gpus=0, retries=2,
 * no timeout, no batch_bytes, reserve=elastic. */
void orch_call_opts_default(struct orch_call_opts *o);

struct orch_call {
    const char *name;
    enum orch_fn_kind fn_kind;
    const char *function;  /* builtin name, resolved library path, or exec command line */
    const char *symbol;    /* library symbol; NULL otherwise */
    int nargs;             /* in declaration order */
    const struct orch_arg *args;
    struct orch_call_opts opts;
    int stmt;              /* the statement that uses it, -1 if unused */
};

/* The most inputs one statement may have (what one record of a batch carries). */
#define ORCH_PLAN_MAX_INPUTS 16

struct orch_input {
    int port;
    bool optional;         /* written `?port`: a Dropped value reaches the UDF as absent */
};

struct orch_stmt {
    enum orch_op op;
    int call;              /* -1 for broadcast */
    int domain;            /* domain of the grains */
    int target;            /* domain of the outputs */
    int nin;
    const struct orch_input *in;
    int nout;
    const int *out;        /* port indexes */
    orch_loc loc;
    /* A statement an edited pipeline dropped (`orch update DIR PIPELINE`): kept in the
     * job's plan so that its ports keep their ids and its items their names, as history;
     * it makes no grain, reads nothing (no port lists it as a consumer), and its call is
     * unused. Written `retired …` in the canonical text. */
    bool retired;
};

typedef struct orch_plan orch_plan;

const char *orch_plan_name(const orch_plan *p);
int orch_plan_ndomains(const orch_plan *p);
int orch_plan_nports(const orch_plan *p);
int orch_plan_nsources(const orch_plan *p);
int orch_plan_ncalls(const orch_plan *p);
int orch_plan_nstmts(const orch_plan *p);
/* Index must be in range (asserted). */
const struct orch_domain *orch_plan_domain(const orch_plan *p, int i);
const struct orch_port *orch_plan_port(const orch_plan *p, int i);
const struct orch_source *orch_plan_source(const orch_plan *p, int i);
const struct orch_call *orch_plan_call(const orch_plan *p, int i);
const struct orch_stmt *orch_plan_stmt(const orch_plan *p, int i);

/* Look-ups by name; return the index or -1. orch_plan_find_port takes "domain.port". */
int orch_plan_find_domain(const orch_plan *p, const char *name);
int orch_plan_find_port(const orch_plan *p, const char *qualified);
int orch_plan_find_call(const orch_plan *p, const char *name);

/* The canonical text (NUL-terminated) and its hash (64 lowercase hex digits, the SHA-256
 * of the text). orch_plan_from_canonical() (orch_lang.h) rebuilds the plan from it. */
const char *orch_plan_canonical(const orch_plan *p);
const char *orch_plan_hash(const orch_plan *p);
/* The absolute directory the plan's relative paths were resolved against: the pipeline
 * file's ("/" for a plan rebuilt from its canonical text, whose paths are all absolute).
 * Root keys of files() sources are paths relative to it (DESIGN §9). */
const char *orch_plan_basedir(const orch_plan *p);

/* Each port's fingerprint (engine/plan/fingerprint.c says what it covers): *out, a
 * malloc'd array of nports 64-hex-digit strings, in port order. 0 or -ENOMEM. */
int orch_plan_fingerprints(const orch_plan *p, char (**out)[65]);
/* The same, with `salt` added to what the calls marked in salted[] (by call index) compute:
 * their ports, and every port downstream of them, get other fingerprints (`orch update
 * --rerun`: a model changed behind an unchanged name). */
int orch_plan_fingerprints_salted(const orch_plan *p, const bool *salted, const char *salt,
                                  char (**out)[65]);

/* Writes the plan readably: its name and hash, the domain tree, each call with its
 * function, arguments, options and reservation, each port with its producer and
 * consumers. 0, -ENOMEM or -EIO. */
int orch_plan_print(const orch_plan *p, FILE *out);

void orch_plan_free(orch_plan *p);

/* ---- building a plan ------------------------------------------------------------------- */

enum orch_diag_severity { ORCH_DIAG_ERROR, ORCH_DIAG_WARNING };

struct orch_diag {
    enum orch_diag_severity severity;
    orch_loc loc;
    const char *message;   /* owned by the builder */
};

typedef struct orch_plan_builder orch_plan_builder;

/* Creates an empty builder. basedir (may be NULL: the current directory) is where relative
 * paths of sources and libraries are resolved; a relative basedir is taken from the
 * current directory. Returns 0, -ENOMEM, or -errno when the current directory is needed
 * and unknown. */
int orch_plan_builder_new(const char *basedir, orch_plan_builder **out);
void orch_plan_builder_free(orch_plan_builder *b);

/* The absolute directory relative paths are resolved against; valid until the builder is
 * freed. */
const char *orch_plan_builder_basedir(const orch_plan_builder *b);

/* Every add function returns 0, or ORCH_EPLAN after recording an error diagnostic (the
 * builder stays usable so that more errors can be collected), or -ENOMEM (-EINVAL for a
 * call or statement handle that the builder never handed out).
 *
 * Names (pipeline, domains, calls, ports, argument keys) are [A-Za-z_][A-Za-z0-9_]*, at
 * most 128 bytes. Relative source globs and files, and library paths, are made absolute
 * against the basedir (nothing needs to exist); exec command lines stay as written. */
int orch_plan_set_name(orch_plan_builder *b, const char *name, orch_loc loc);
int orch_plan_add_domain(orch_plan_builder *b, const char *name, const char *parent,
                         orch_loc loc);
int orch_plan_add_source(orch_plan_builder *b, const char *domain, const char *port,
                         enum orch_source_kind kind, const char *arg, orch_loc loc);

/* function: a builtin name, a library path, or an exec command line; symbol only for
 * libraries. *call_out (may be NULL) receives a handle for the two functions below, also
 * when the call's name was a duplicate (so its arguments are still checked). */
int orch_plan_add_call(orch_plan_builder *b, const char *name, enum orch_fn_kind kind,
                       const char *function, const char *symbol, orch_loc loc, int *call_out);
/* The same, with the function's own position (an unknown function is reported there, a
 * duplicate name at loc). */
int orch_plan_add_call_at(orch_plan_builder *b, const char *name, orch_loc loc,
                          enum orch_fn_kind kind, const char *function, const char *symbol,
                          orch_loc fn_loc, int *call_out);
int orch_plan_call_arg(orch_plan_builder *b, int call, const char *key,
                       enum orch_arg_kind kind, const char *value, orch_loc loc);
/* Arguments: kind says how the value was written (a number's text is kept as written).
 * Built-ins are checked against udfs/builtin_sigs.h (key, type, range); a missing
 * required argument is reported by orch_plan_build(). loc: the value's position.
 *
 * Options are given as text ("4", "120s", "1.5", "parent", "64MiB") and checked here:
 * workers 1..1024, batch 1..1000000 or auto, batch_bytes a positive size (digits with an optional
 * K, M, G (powers of 1000) or KiB, MiB, GiB suffix) or none, cpus and gpus 0..1024 with at
 * most 6 decimals, retries 0..1000, timeout a duration (ms, s, m, h; > 0, <= 1000h) or
 * none, reserve elastic|parent. loc: the value's position. */
int orch_plan_call_option(orch_plan_builder *b, int call, const char *key, const char *value,
                          orch_loc loc);

/* call: the call's name (NULL for broadcast). Then name the outputs and inputs, in order.
 * loc is the statement's position (the front end gives the call's name, or the keyword
 * `broadcast`). *stmt_out receives a handle also when the call is wrong, so that the
 * outputs still count as produced. Ports may be named before their producer; their
 * domain must already exist. */
int orch_plan_add_stmt(orch_plan_builder *b, enum orch_op op, const char *call, orch_loc loc,
                       int *stmt_out);
int orch_plan_stmt_output(orch_plan_builder *b, int stmt, const char *domain, const char *port,
                          orch_loc loc);
int orch_plan_stmt_input(orch_plan_builder *b, int stmt, const char *domain, const char *port,
                         bool optional, orch_loc loc);
/* Marks statement `stmt` retired (struct orch_stmt): its call is left unused. */
int orch_plan_stmt_retire(orch_plan_builder *b, int stmt);
/* How many sources the builder holds. */
int orch_plan_nsources_built(const orch_plan_builder *b);
/* Marks the last source added retired (struct orch_source). */
int orch_plan_source_retire(orch_plan_builder *b);

int orch_plan_add_output(orch_plan_builder *b, const char *domain, const char *port,
                         orch_loc loc);

/* Records a diagnostic of the caller's own (the front end's syntax errors). An error
 * recorded here marks the declarations as incomplete: orch_plan_build() then skips the
 * checks that a lost statement would make noise of (ports without producer, domains
 * without source or expand, no pipeline name, unused calls). */
int orch_plan_diag(orch_plan_builder *b, enum orch_diag_severity sev, orch_loc loc,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Runs the whole-plan checks (once; a second call only repeats the answer). On success
 * *out is a new plan (free with orch_plan_free) and 0 is returned; if any error
 * diagnostic exists, returns ORCH_EPLAN and *out is NULL. The builder is still the
 * caller's to free either way. */
int orch_plan_build(orch_plan_builder *b, orch_plan **out);

/* Diagnostics recorded so far, sorted by position (line, col), then in recording order.
 * At most 100 errors and 100 warnings are kept; nerrors/nwarnings count all of them. */
int orch_plan_ndiags(const orch_plan_builder *b);
const struct orch_diag *orch_plan_get_diag(const orch_plan_builder *b, int i);
int orch_plan_nerrors(const orch_plan_builder *b);
int orch_plan_nwarnings(const orch_plan_builder *b);

/* Writes every kept diagnostic as "FILE:LINE:COL: error: MESSAGE" (or "warning:"; "FILE:"
 * alone for loc {0,0}), then a line saying how many were not kept. out may be NULL.
 * 0 or -EIO. */
int orch_plan_diags_print(const orch_plan_builder *b, const char *file, FILE *out);

#endif
