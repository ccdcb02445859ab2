/* builder.c — the plan builder: declarations, their immediate checks, diagnostics. */
#include "plan_internal.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- diagnostics ---- */

const char *orch__at(orch_loc loc, char buf[48])
{
    if (loc.line <= 0)
        buf[0] = '\0';
    else
        snprintf(buf, 48, " at %d:%d", loc.line, loc.col);
    return buf;
}

const char *orch__first_at(orch_loc loc, char buf[48])
{
    if (loc.line <= 0)
        buf[0] = '\0';
    else
        snprintf(buf, 48, " (first at %d:%d)", loc.line, loc.col);
    return buf;
}

static int diag_v(orch_plan_builder *b, enum orch_diag_severity sev, orch_loc loc,
                  const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));
static int diag_v(orch_plan_builder *b, enum orch_diag_severity sev, orch_loc loc,
                  const char *fmt, va_list ap)
{
    int *count = sev == ORCH_DIAG_ERROR ? &b->nerrors : &b->nwarnings;
    (*count)++;
    if (*count > ORCH__DIAG_MAX)
        return 0; /* counted, not kept */
    if (orch__grow(&b->diags, &b->cdiags, b->ndiags + 1, sizeof *b->diags) < 0)
        return b->oom = true, -ENOMEM;
    struct orch__buf msg = {0};
    orch__buf_vprintf(&msg, fmt, ap);
    char *text = msg.oom ? NULL : orch__arena_strdup(&b->arena, msg.p ? msg.p : "");
    orch__buf_free(&msg);
    if (!text)
        return b->oom = true, -ENOMEM;
    b->diags[b->ndiags++] =
        (struct b_diag){.d = {.severity = sev, .loc = loc, .message = text}, .seq = b->seq++};
    b->sorted = false;
    return 0;
}

int orch__error(orch_plan_builder *b, orch_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = diag_v(b, ORCH_DIAG_ERROR, loc, fmt, ap);
    va_end(ap);
    return rc < 0 ? rc : ORCH_EPLAN;
}

int orch__warn(orch_plan_builder *b, orch_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = diag_v(b, ORCH_DIAG_WARNING, loc, fmt, ap);
    va_end(ap);
    return rc;
}

int orch_plan_diag(orch_plan_builder *b, enum orch_diag_severity sev, orch_loc loc,
                   const char *fmt, ...)
{
    if (sev == ORCH_DIAG_ERROR)
        b->incomplete = true;
    va_list ap;
    va_start(ap, fmt);
    int rc = diag_v(b, sev, loc, fmt, ap);
    va_end(ap);
    return rc;
}

static int diag_cmp(const void *x, const void *y)
{
    const struct b_diag *a = x, *c = y;
    if (a->d.loc.line != c->d.loc.line)
        return a->d.loc.line < c->d.loc.line ? -1 : 1;
    if (a->d.loc.col != c->d.loc.col)
        return a->d.loc.col < c->d.loc.col ? -1 : 1;
    return a->seq < c->seq ? -1 : a->seq > c->seq;
}

int orch_plan_ndiags(const orch_plan_builder *b)
{
    return b->ndiags;
}

const struct orch_diag *orch_plan_get_diag(const orch_plan_builder *b, int i)
{
    assert(i >= 0 && i < b->ndiags);
    if (!b->sorted) {
        /* Sorting does not change what the builder means, only the order it is read in. */
        orch_plan_builder *m = (orch_plan_builder *)b;
        qsort(m->diags, (size_t)m->ndiags, sizeof *m->diags, diag_cmp);
        m->sorted = true;
    }
    return &b->diags[i].d;
}

int orch_plan_nerrors(const orch_plan_builder *b)
{
    return b->nerrors;
}

int orch_plan_nwarnings(const orch_plan_builder *b)
{
    return b->nwarnings;
}

int orch_plan_diags_print(const orch_plan_builder *b, const char *file, FILE *out)
{
    if (!out)
        return 0;
    int kept_errors = 0, kept_warnings = 0;
    for (int i = 0; i < b->ndiags; i++) {
        const struct orch_diag *d = orch_plan_get_diag(b, i);
        const char *sev = d->severity == ORCH_DIAG_ERROR ? "error" : "warning";
        if (d->severity == ORCH_DIAG_ERROR)
            kept_errors++;
        else
            kept_warnings++;
        if (d->loc.line > 0)
            fprintf(out, "%s:%d:%d: %s: %s\n", file, d->loc.line, d->loc.col, sev, d->message);
        else
            fprintf(out, "%s: %s: %s\n", file, sev, d->message);
    }
    if (b->nerrors > kept_errors)
        fprintf(out, "%s: error: too many errors; %d more not shown\n", file,
                b->nerrors - kept_errors);
    if (b->nwarnings > kept_warnings)
        fprintf(out, "%s: warning: too many warnings; %d more not shown\n", file,
                b->nwarnings - kept_warnings);
    return ferror(out) ? -EIO : 0;
}

/* ---- construction ---- */

/* Joins dir and path (unless path is absolute), drops "." components and repeated '/'.
 * ".." is kept: resolving it lexically could change what a symlinked path means. */
static char *resolve_path(struct orch__arena *a, const char *dir, const char *path)
{
    struct orch__buf raw = {0}, out = {0};
    if (path[0] != '/' && dir) {
        orch__buf_puts(&raw, dir);
        orch__buf_putc(&raw, '/');
    }
    orch__buf_puts(&raw, path);
    const char *s = raw.oom ? "" : raw.p;
    bool absolute = s[0] == '/';
    if (absolute)
        orch__buf_putc(&out, '/');
    bool first = true;
    for (const char *p = s; *p;) {
        while (*p == '/')
            p++;
        const char *e = p;
        while (*e && *e != '/')
            e++;
        size_t n = (size_t)(e - p);
        if (n == 0)
            break;
        bool trailing = *e == '/' && e[strspn(e, "/")] == '\0';
        if (!(n == 1 && p[0] == '.')) {
            if (!first)
                orch__buf_putc(&out, '/');
            orch__buf_add(&out, p, n);
            first = false;
        }
        if (trailing && !first)
            orch__buf_putc(&out, '/');
        p = e;
    }
    if (out.len == 0)
        orch__buf_putc(&out, '.');
    char *r = out.oom || raw.oom ? NULL : orch__arena_strdup(a, out.p);
    orch__buf_free(&raw);
    orch__buf_free(&out);
    return r;
}

int orch_plan_builder_new(const char *basedir, orch_plan_builder **out)
{
    *out = NULL;
    orch_plan_builder *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    char *cwd = NULL;
    if (!basedir || basedir[0] != '/') {
        cwd = getcwd(NULL, 0);
        if (!cwd) {
            int rc = -errno;
            free(b);
            return orch_error_set(rc, "cannot find the current directory: %s", strerror(-rc));
        }
    }
    b->basedir = resolve_path(&b->arena, cwd, basedir && basedir[0] ? basedir : ".");
    free(cwd);
    if (!b->basedir) {
        orch_plan_builder_free(b);
        return -ENOMEM;
    }
    *out = b;
    return 0;
}

void orch_plan_builder_free(orch_plan_builder *b)
{
    if (!b)
        return;
    for (int i = 0; i < b->ncalls; i++) {
        free(b->calls[i].args);
        free(b->calls[i].arg_locs);
    }
    for (int i = 0; i < b->nstmts; i++) {
        free(b->stmts[i].in);
        free(b->stmts[i].out);
    }
    free(b->domains);
    free(b->ports);
    free(b->sources);
    free(b->calls);
    free(b->stmts);
    free(b->diags);
    orch__map_free(&b->domain_map);
    orch__map_free(&b->port_map);
    orch__map_free(&b->call_map);
    orch__arena_free(&b->arena);
    free(b);
}

const char *orch_plan_builder_basedir(const orch_plan_builder *b)
{
    return b->basedir;
}

#define OOM(b) ((b)->oom = true, -ENOMEM)

/* Checks that s is a name; records an error otherwise. */
static int check_name(orch_plan_builder *b, const char *what, const char *s, orch_loc loc)
{
    if (orch__is_name(s))
        return 0;
    size_t n = s ? strlen(s) : 0;
    if (n > ORCH__NAME_MAX)
        return orch__error(b, loc, "%s name too long (%zu bytes; at most %d)", what, n,
                           ORCH__NAME_MAX);
    struct orch__buf q = {0};
    orch__quote(&q, s ? s : "");
    int rc = q.oom ? OOM(b) : orch__error(b, loc, "invalid %s name %s", what, q.p);
    orch__buf_free(&q);
    return rc;
}

int orch_plan_set_name(orch_plan_builder *b, const char *name, orch_loc loc)
{
    int rc = check_name(b, "pipeline", name, loc);
    if (rc)
        return rc;
    if (b->name) {
        char at[48];
        return orch__error(b, loc, "pipeline name given twice%s",
                           orch__first_at(b->name_loc, at));
    }
    if (!(b->name = orch__arena_strdup(&b->arena, name)))
        return OOM(b);
    b->name_loc = loc;
    return 0;
}

static int find_domain(orch_plan_builder *b, const char *name, orch_loc loc)
{
    if (check_name(b, "domain", name, loc))
        return -1;
    int d = orch__map_get(&b->domain_map, name);
    if (d < 0)
        orch__error(b, loc, "unknown domain '%s'", name);
    return d;
}

int orch_plan_add_domain(orch_plan_builder *b, const char *name, const char *parent,
                         orch_loc loc)
{
    int rc = check_name(b, "domain", name, loc);
    if (rc)
        return rc;
    char at[48];
    int old = orch__map_get(&b->domain_map, name);
    if (old >= 0)
        return orch__error(b, loc, "domain '%s' is already defined%s", name,
                           orch__at(b->domains[old].loc, at));
    int p = -1, depth = 0;
    if (parent) {
        if (strcmp(parent, name) == 0)
            return orch__error(b, loc, "domain '%s' cannot be its own parent", name);
        if ((p = find_domain(b, parent, loc)) < 0)
            return ORCH_EPLAN;
        depth = b->domains[p].depth + 1;
        if (depth >= ORCH__DEPTH_MAX)
            return orch__error(b, loc, "domain '%s' is nested too deeply (at most %d levels)",
                               name, ORCH__DEPTH_MAX);
    }
    if (orch__grow(&b->domains, &b->cdomains, b->ndomains + 1, sizeof *b->domains) < 0)
        return OOM(b);
    const char *copy = orch__arena_strdup(&b->arena, name);
    if (!copy || orch__map_put(&b->domain_map, copy, b->ndomains) < 0)
        return OOM(b);
    b->domains[b->ndomains++] = (struct b_domain){
        .name = copy, .parent = p, .depth = depth, .source = -1, .expand = -1, .loc = loc};
    return 0;
}

/* Resolves "domain.port", creating the port on its first reference. *out = -1 on error. */
static int port_ref(orch_plan_builder *b, const char *domain, const char *port, orch_loc loc,
                    int *out)
{
    *out = -1;
    int d = find_domain(b, domain ? domain : "", loc);
    if (d < 0)
        return ORCH_EPLAN;
    int rc = check_name(b, "port", port, loc);
    if (rc)
        return rc;
    struct orch__buf q = {0};
    orch__buf_printf(&q, "%s.%s", domain, port);
    if (q.oom)
        return OOM(b);
    int i = orch__map_get(&b->port_map, q.p);
    if (i < 0) {
        const char *qual = orch__arena_strdup(&b->arena, q.p);
        orch__buf_free(&q);
        if (!qual || orch__grow(&b->ports, &b->cports, b->nports + 1, sizeof *b->ports) < 0 ||
            orch__map_put(&b->port_map, qual, b->nports) < 0)
            return OOM(b);
        i = b->nports++;
        b->ports[i] = (struct b_port){.name = qual + strlen(domain) + 1,
                                      .qualified = qual,
                                      .domain = d,
                                      .source = -1,
                                      .producer = -1,
                                      .use_loc = loc,
                                      .index = -1};
    }
    orch__buf_free(&q);
    *out = i;
    return 0;
}

/* Records that port i is produced at loc; an error when it already has a producer. */
static int claim_port(orch_plan_builder *b, int i, int source, int stmt, orch_loc loc)
{
    struct b_port *p = &b->ports[i];
    if (p->source >= 0 || p->producer >= 0) {
        char at[48];
        return orch__error(b, loc, "port '%s' has two producers%s", p->qualified,
                           orch__first_at(p->prod_loc, at));
    }
    p->source = source;
    p->producer = stmt;
    p->prod_loc = loc;
    return 0;
}

int orch_plan_add_source(orch_plan_builder *b, const char *domain, const char *port,
                         enum orch_source_kind kind, const char *arg, orch_loc loc)
{
    if ((unsigned)kind >= ORCH_SOURCE__COUNT)
        return orch__error(b, loc, "invalid source kind %d", (int)kind);
    int d = find_domain(b, domain, loc);
    if (d < 0)
        return ORCH_EPLAN;
    struct b_domain *dom = &b->domains[d];
    char at[48];
    if (dom->parent >= 0)
        return orch__error(
            b, loc, "source on child domain '%s': sources feed root domains only", dom->name);
    if (dom->source >= 0)
        return orch__error(b, loc, "root domain '%s' already has a source%s", dom->name,
                           orch__at(b->sources[dom->source].loc, at));
    if (!arg || !arg[0])
        return orch__error(b, loc, "%s() needs a non-empty %s", orch_source_kind_name(kind),
                           kind == ORCH_SOURCE_FILES ? "glob" : "file name");
    int pi, rc = port_ref(b, domain, port, loc, &pi);
    if (rc || (rc = claim_port(b, pi, b->nsources, -1, loc)))
        return rc;
    if (orch__grow(&b->sources, &b->csources, b->nsources + 1, sizeof *b->sources) < 0)
        return OOM(b);
    const char *resolved = resolve_path(&b->arena, b->basedir, arg);
    const char *written = orch__arena_strdup(&b->arena, arg);
    if (!resolved || !written)
        return OOM(b);
    dom->source = b->nsources;
    b->sources[b->nsources++] = (struct b_source){
        .domain = d, .port = pi, .kind = kind, .arg = resolved, .written = written, .loc = loc};
    return 0;
}

int orch_plan_add_call_at(orch_plan_builder *b, const char *name, orch_loc loc,
                          enum orch_fn_kind kind, const char *function, const char *symbol,
                          orch_loc fn_loc, int *call_out)
{
    if (call_out)
        *call_out = -1;
    if (orch__grow(&b->calls, &b->ccalls, b->ncalls + 1, sizeof *b->calls) < 0)
        return OOM(b);
    /* The handle exists even when the declaration is wrong, so its arguments and options
     * are still checked; only a valid call is found by name. */
    int ci = b->ncalls++;
    struct b_call *c = &b->calls[ci];
    *c = (struct b_call){.name = "", .fn_kind = kind, .function = "", .stmt = -1, .loc = loc};
    orch_call_opts_default(&c->opts);
    if (call_out)
        *call_out = ci;

    c->fn_loc = fn_loc;
    int rc = check_name(b, "call", name, loc);
    if (!rc && !(c->name = orch__arena_strdup(&b->arena, name)))
        return OOM(b);
    int fn_rc = 0;
    if ((unsigned)kind >= ORCH_FN__COUNT) { /* the C API's caller passed no kind */
        fn_rc = orch__error(b, fn_loc, "invalid function kind %d", (int)kind);
        kind = ORCH_FN__COUNT;
    }
    switch (kind) {
    case ORCH_FN_BUILTIN:
        if (!function || !orch_builtin_sig_find(function))
            fn_rc = orch__error(b, fn_loc, "unknown function '%.140s'",
                                function ? function : "(null)");
        else
            c->function = orch__arena_strdup(&b->arena, function);
        break;
    case ORCH_FN_LIBRARY:
        if (!function || !function[0])
            fn_rc = orch__error(b, fn_loc, "library() needs the path of a shared object");
        else if (!symbol || !symbol[0])
            fn_rc = orch__error(b, fn_loc, "library() needs a symbol name");
        else if ((c->function = resolve_path(&b->arena, b->basedir, function)))
            c->symbol = orch__arena_strdup(&b->arena, symbol);
        break;
    case ORCH_FN_EXEC:
        if (!function || !function[strspn(function, " \t")])
            fn_rc = orch__error(b, fn_loc, "exec() needs a command line");
        else
            c->function = orch__arena_strdup(&b->arena, function);
        break;
    case ORCH_FN__COUNT: /* refused above */
        c->fn_kind = ORCH_FN_EXEC;
        break;
    }
    if (!c->function || (kind == ORCH_FN_LIBRARY && !fn_rc && !c->symbol))
        return OOM(b);
    if (rc)
        return rc;
    char at[48];
    int old = orch__map_get(&b->call_map, name);
    if (old >= 0)
        return orch__error(b, loc, "call '%s' is already defined%s", name,
                           orch__at(b->calls[old].loc, at));
    if (fn_rc)
        return fn_rc;
    if (orch__map_put(&b->call_map, c->name, ci) < 0)
        return OOM(b);
    c->valid = true;
    return 0;
}

int orch_plan_add_call(orch_plan_builder *b, const char *name, enum orch_fn_kind kind,
                       const char *function, const char *symbol, orch_loc loc, int *call_out)
{
    return orch_plan_add_call_at(b, name, loc, kind, function, symbol, loc, call_out);
}

int orch_plan_call_arg(orch_plan_builder *b, int call, const char *key, enum orch_arg_kind kind,
                       const char *value, orch_loc loc)
{
    assert(call >= 0 && call < b->ncalls);
    if (call < 0 || call >= b->ncalls)
        return -EINVAL;
    return orch__call_arg(b, &b->calls[call], key, kind, value, loc);
}

int orch_plan_call_option(orch_plan_builder *b, int call, const char *key, const char *value,
                          orch_loc loc)
{
    assert(call >= 0 && call < b->ncalls);
    if (call < 0 || call >= b->ncalls)
        return -EINVAL;
    return orch__call_option(b, &b->calls[call], key, value, loc);
}

int orch_plan_add_stmt(orch_plan_builder *b, enum orch_op op, const char *call, orch_loc loc,
                       int *stmt_out)
{
    if (stmt_out)
        *stmt_out = -1;
    if ((unsigned)op >= ORCH_OP__COUNT)
        return orch__error(b, loc, "invalid operation %d", (int)op);
    if (orch__grow(&b->stmts, &b->cstmts, b->nstmts + 1, sizeof *b->stmts) < 0)
        return OOM(b);
    int si = b->nstmts++;
    struct b_stmt *s = &b->stmts[si];
    *s = (struct b_stmt){
        .op = op, .call = -1, .loc = loc, .domain = -1, .target = -1, .child = -1};
    if (stmt_out)
        *stmt_out = si;
    char at[48];
    if (op == ORCH_OP_BROADCAST) {
        if (call)
            return s->broken = true, orch__error(b, loc, "broadcast takes no call");
        return 0;
    }
    if (!call)
        return s->broken = true, orch__error(b, loc, "%s needs a call", orch_op_name(op));
    int rc = check_name(b, "call", call, loc);
    if (rc)
        return s->broken = true, rc;
    int ci = orch__map_get(&b->call_map, call);
    if (ci < 0)
        return s->broken = true, orch__error(b, loc, "unknown call '%s'", call);
    struct b_call *c = &b->calls[ci];
    if (c->stmt >= 0)
        return s->broken = true,
               orch__error(b, loc, "call '%s' is already used%s; declare another call", c->name,
                           orch__at(b->stmts[c->stmt].loc, at));
    c->stmt = si;
    s->call = ci;
    return orch__call_check_op(b, c, op, loc);
}

int orch_plan_stmt_retire(orch_plan_builder *b, int stmt)
{
    assert(stmt >= 0 && stmt < b->nstmts);
    struct b_stmt *s = &b->stmts[stmt];
    s->retired = true;
    if (s->call >= 0 && b->calls[s->call].stmt == stmt)
        b->calls[s->call].stmt = -1;
    return 0;
}

int orch_plan_nsources_built(const orch_plan_builder *b)
{
    return b->nsources;
}

int orch_plan_source_retire(orch_plan_builder *b)
{
    if (b->nsources > 0)
        b->sources[b->nsources - 1].retired = true;
    return 0;
}

static struct b_stmt *stmt_at(orch_plan_builder *b, int stmt)
{
    assert(stmt >= 0 && stmt < b->nstmts);
    return stmt >= 0 && stmt < b->nstmts ? &b->stmts[stmt] : NULL;
}

int orch_plan_stmt_output(orch_plan_builder *b, int stmt, const char *domain, const char *port,
                          orch_loc loc)
{
    struct b_stmt *s = stmt_at(b, stmt);
    if (!s)
        return -EINVAL;
    if (orch__grow(&s->out, &s->cout, s->nout + 1, sizeof *s->out) < 0)
        return OOM(b);
    int pi, rc = port_ref(b, domain, port, loc, &pi);
    s->out[s->nout++] = (struct b_output){.port = pi, .loc = loc};
    if (rc) {
        s->broken = true;
        return rc;
    }
    return claim_port(b, pi, -1, stmt, loc);
}

int orch_plan_stmt_input(orch_plan_builder *b, int stmt, const char *domain, const char *port,
                         bool optional, orch_loc loc)
{
    struct b_stmt *s = stmt_at(b, stmt);
    if (!s)
        return -EINVAL;
    if (orch__grow(&s->in, &s->cin, s->nin + 1, sizeof *s->in) < 0)
        return OOM(b);
    int pi, rc = port_ref(b, domain, port, loc, &pi);
    s->in[s->nin++] = (struct b_input){.port = pi, .optional = optional, .loc = loc};
    if (rc) {
        s->broken = true;
        return rc;
    }
    if (s->nin == ORCH_PLAN_MAX_INPUTS + 1)
        return orch__error(b, loc, "a statement has at most %d inputs",
                           ORCH_PLAN_MAX_INPUTS);
    if (optional && s->op == ORCH_OP_BROADCAST)
        return orch__error(b, loc, "the input of a broadcast cannot be optional");
    if (optional && s->op == ORCH_OP_FILTER && s->nin == 1)
        return orch__error(b, loc,
                           "the first input of a filter is the value it passes on; "
                           "it cannot be optional");
    return 0;
}

int orch_plan_add_output(orch_plan_builder *b, const char *domain, const char *port,
                         orch_loc loc)
{
    int pi, rc = port_ref(b, domain, port, loc, &pi);
    if (rc)
        return rc;
    struct b_port *p = &b->ports[pi];
    if (p->output) {
        char at[48];
        return orch__warn(b, loc, "port '%s' is already an output%s", p->qualified,
                          orch__first_at(p->output_loc, at));
    }
    p->output = true;
    p->output_loc = loc;
    return 0;
}
