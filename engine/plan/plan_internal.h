/* plan_internal.h — the plan builder and the plan, inside.
 *
 * Two representations. The builder (struct orch_plan_builder) is mutable and forgiving:
 * it takes declarations one at a time, in the order of a pipeline file, checks what it
 * can at once, and keeps every position (orch_loc) it was given so that later checks can
 * point at the exact token. The plan (struct orch_plan) is immutable and compact: the
 * public structs of orch_plan.h in arrays, every string in one arena, no positions except
 * a statement's own.
 *
 *   orch_plan_add_*  ──>  builder  ──orch_plan_build()──>  whole-plan checks  ──>  plan
 *   (immediate checks)    (b_* arrays,                     (build.c, acyclic.c)    (arena)
 *                          name maps)
 *
 * Immediate checks (builder.c, call_check.c): names well formed and defined once; domains
 * and calls defined before use; a port's second producer; option values; argument keys,
 * types and ranges of built-ins; a call used twice; the operation a built-in serves.
 *
 * Whole-plan checks (build.c): ports without producer; domain fit of every statement;
 * one source per root, one plain expand per child; built-in arity and required arguments;
 * acyclicity (acyclic.c), with the structural edges (a statement in or into a child
 * domain D waits for D's plain expand; a reduce over C waits for C's plain expand).
 *
 * Front-end errors. A syntax error loses a statement, so "has no producer", "has no
 * source", "has no expand" and "no pipeline name" would be noise after one: those
 * completeness checks are skipped once any error was recorded through orch_plan_diag()
 * (`incomplete`). Every other check still runs.
 *
 * Broken statements. A statement whose call or one of whose ports could not be resolved
 * still gets an index and still registers its outputs (so that they have a producer), but
 * is marked `broken` and skips the fit checks that would only repeat the first error.
 *
 * Diagnostics are stored up to ORCH__DIAG_MAX per severity; more are counted, not kept.
 *
 * Index stability. Domains, calls, sources and statements keep their declaration order.
 * Ports are numbered at build by producer: source ports in source order, then statement
 * outputs in statement order. The canonical text declares things in exactly that order,
 * so a plan rebuilt from its canonical text has the same indexes.
 */
#ifndef ORCH_PLAN_INTERNAL_H
#define ORCH_PLAN_INTERNAL_H

#include "builtin_sigs.h"
#include "orch_error.h"
#include "orch_plan.h"
#include "support.h"

#define ORCH__DIAG_MAX 100
#define ORCH__DEPTH_MAX 64

struct b_domain {
    const char *name;
    int parent;
    int depth;
    int source; /* source index, -1 */
    int expand; /* first plain expand statement, -1 */
    orch_loc loc;
};

struct b_port {
    const char *name;
    const char *qualified;
    int domain;
    int source;        /* producing source, or -1 */
    int producer;      /* producing statement, or -1 */
    orch_loc use_loc;  /* first reference */
    orch_loc prod_loc; /* where its producer names it */
    bool output;
    orch_loc output_loc;
    int index; /* index in the plan, set at build */
};

struct b_source {
    int domain, port;
    enum orch_source_kind kind;
    const char *arg;
    const char *written;
    orch_loc loc;
    bool retired; /* orch_plan_source_retire */
};

struct b_call {
    const char *name;
    enum orch_fn_kind fn_kind;
    const char *function;
    const char *symbol;
    int nargs, cargs, carg_locs;
    struct orch_arg *args;
    orch_loc *arg_locs;
    struct orch_call_opts opts;
    unsigned opts_set;    /* bit per option given */
    orch_loc opt_locs[8]; /* where each option was given */
    int stmt;
    orch_loc loc;    /* of the name */
    orch_loc fn_loc; /* of the function */
    bool valid;      /* defined (not a rejected duplicate); looked up by name */
};

struct b_input {
    int port; /* -1 when unresolved */
    bool optional;
    orch_loc loc;
};

struct b_output {
    int port;
    orch_loc loc;
};

struct b_stmt {
    enum orch_op op;
    int call;
    int nin, cin, nout, cout;
    struct b_input *in;
    struct b_output *out;
    orch_loc loc;
    bool broken;
    bool retired; /* orch_plan_stmt_retire */
    /* set by build */
    int domain, target;
    int child; /* reduce: the child domain of its inputs, else -1 */
};

struct b_diag {
    struct orch_diag d;
    int seq;
};

struct orch_plan_builder {
    struct orch__arena arena; /* names, messages, values */
    const char *basedir;      /* absolute */
    const char *name;
    orch_loc name_loc;

    int ndomains, cdomains, nports, cports, nsources, csources, ncalls, ccalls, nstmts, cstmts;
    struct b_domain *domains;
    struct b_port *ports;
    struct b_source *sources;
    struct b_call *calls;
    struct b_stmt *stmts;
    struct orch__map domain_map, port_map, call_map;

    int ndiags, cdiags, nerrors, nwarnings, seq;
    struct b_diag *diags;
    bool sorted;
    bool incomplete; /* an error came from orch_plan_diag (the front end) */
    bool oom;
    bool built; /* orch_plan_build() ran its checks */
};

struct orch_plan {
    struct orch__arena arena;
    const char *name;
    int ndomains, nports, nsources, ncalls, nstmts;
    struct orch_domain *domains;
    struct orch_port *ports;
    struct orch_source *sources;
    struct orch_call *calls;
    struct orch_stmt *stmts;
    struct orch__map domain_map, port_map, call_map;
    const char *basedir; /* where relative paths were resolved (not in the canonical text) */
    char *canonical; /* malloc'd */
    char hash[65];
};

/* builder.c */
int orch__error(orch_plan_builder *b, orch_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int orch__warn(orch_plan_builder *b, orch_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* " at 3:1" and " (first at 3:1)", written into the caller's buf; "" for loc {0,0}, so
 * that messages about a plan built from C carry no empty position. */
const char *orch__at(orch_loc loc, char buf[48]);
const char *orch__first_at(orch_loc loc, char buf[48]);

/* call_check.c */
int orch__call_option(orch_plan_builder *b, struct b_call *c, const char *key,
                      const char *value, orch_loc loc);
int orch__call_arg(orch_plan_builder *b, struct b_call *c, const char *key,
                   enum orch_arg_kind kind, const char *value, orch_loc loc);
/* Checks a built-in call against the statement that uses it (op at add time, arity and
 * required arguments at build). */
int orch__call_check_op(orch_plan_builder *b, const struct b_call *c, enum orch_op op,
                        orch_loc loc);
void orch__call_check_use(orch_plan_builder *b, const struct b_call *c, const struct b_stmt *s);
void orch__call_check_args(orch_plan_builder *b, const struct b_call *c);
/* Option text: formats value as the canonical text accepts it. */
void orch__format_duration_ms(struct orch__buf *out, int64_t ms);
void orch__format_size(struct orch__buf *out, int64_t bytes);
void orch__format_double(struct orch__buf *out, double v);

/* acyclic.c: records one "cycle: ..." error per strongly connected component. */
int orch__check_acyclic(orch_plan_builder *b);

/* canonical.c: fills p->canonical and p->hash. 0 or -ENOMEM. */
int orch__plan_canonicalize(struct orch_plan *p);
/* Writes s as a quoted string literal of the language. */
void orch__quote(struct orch__buf *out, const char *s);
/* A call as the canonical text writes it, for the canonical text and for `orch check`
 * (orch_plan_print), so that both always show a call the same way. Changing what these
 * write changes the canonical text, and so the hash of every plan: jobs made before
 * would no longer match their pipeline.
 *
 * The function and its arguments: `upper(k="v")`, `exec("cmd")`,
 * `library("/x.so", "sym")(n=1)`. A built-in always has its argument list; exec() and
 * library() have one when they have arguments, or always with empty_args. */
void orch__format_call_function(struct orch__buf *t, const struct orch_call *c,
                                bool empty_args);
/* Every option, in canonical form and in this order, each pair followed by sep but the
 * last: `workers=2<sep>batch=8<sep>batch_bytes=none<sep>cpus=1<sep>gpus=0.5<sep>retries=2
 * <sep>timeout=120s<sep>reserve=elastic`. */
void orch__format_call_opts(struct orch__buf *t, const struct orch_call_opts *o,
                            const char *sep);

#endif
