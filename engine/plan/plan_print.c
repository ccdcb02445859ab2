/* plan_print.c — orch_plan_print(): the plan, readably (what `orch check` shows). */
#include "plan_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void print_domain(struct orch__buf *t, const struct orch_plan *p, int d)
{
    const struct orch_domain *dom = &p->domains[d];
    int w = (int)(2 * dom->depth + strlen(dom->name));
    orch__buf_printf(t, "  %*s%s%*s", 2 * dom->depth, "", dom->name, w < 22 ? 22 - w : 1, "");
    if (dom->parent < 0) {
        const struct orch_source *s = &p->sources[dom->source];
        orch__buf_printf(t, "root; source %s = %s(", p->ports[s->port].qualified,
                         orch_source_kind_name(s->kind));
        orch__quote(t, s->arg);
        orch__buf_puts(t, ")\n");
    } else {
        const struct orch_stmt *e = &p->stmts[dom->expand];
        orch__buf_printf(t, "in %s; expanded by call %s\n", p->domains[dom->parent].name,
                         p->calls[e->call].name);
    }
    for (int i = 0; i < dom->nchildren; i++)
        print_domain(t, p, dom->children[i]); /* depth is bounded (ORCH__DEPTH_MAX) */
}

static void print_stmt(struct orch__buf *t, const struct orch_plan *p,
                       const struct orch_stmt *s)
{
    for (int i = 0; i < s->nout; i++)
        orch__buf_printf(t, "%s%s", i ? ", " : "", p->ports[s->out[i]].qualified);
    orch__buf_printf(t, " = %s", s->op == ORCH_OP_MAP ? "" : orch_op_name(s->op));
    if (s->call >= 0)
        orch__buf_printf(t, "%s%s", s->op == ORCH_OP_MAP ? "" : " ", p->calls[s->call].name);
    orch__buf_puts(t, s->op == ORCH_OP_BROADCAST ? " " : "(");
    for (int i = 0; i < s->nin; i++)
        orch__buf_printf(t, "%s%s%s", i ? ", " : "", s->in[i].optional ? "?" : "",
                         p->ports[s->in[i].port].qualified);
    if (s->op != ORCH_OP_BROADCAST)
        orch__buf_putc(t, ')');
}

static void print_call(struct orch__buf *t, const struct orch_plan *p,
                       const struct orch_call *c)
{
    orch__buf_printf(t, "  %s = ", c->name);
    orch__format_call_function(t, c, true);
    orch__buf_puts(t, "\n      ");
    orch__format_call_opts(t, &c->opts, " ");
    orch__buf_puts(t, "\n      used by: ");
    if (c->stmt < 0) {
        orch__buf_puts(t, "nothing\n");
        return;
    }
    const struct orch_stmt *s = &p->stmts[c->stmt];
    print_stmt(t, p, s);
    if (s->loc.line > 0)
        orch__buf_printf(t, "   (line %d)", s->loc.line);
    orch__buf_putc(t, '\n');
}

static void print_port(struct orch__buf *t, const struct orch_plan *p,
                       const struct orch_port *q)
{
    int w = (int)strlen(q->qualified);
    orch__buf_printf(t, "  %s%*s", q->qualified, w < 20 ? 20 - w : 1, "");
    struct orch__buf from = {0};
    if (q->source >= 0) {
        orch__buf_printf(&from, "source %s", orch_source_kind_name(p->sources[q->source].kind));
    } else {
        const struct orch_stmt *s = &p->stmts[q->producer];
        orch__buf_printf(&from, "%s", orch_op_name(s->op));
        if (s->call >= 0)
            orch__buf_printf(&from, " %s", p->calls[s->call].name);
        else
            orch__buf_printf(&from, " %s", p->ports[s->in[0].port].qualified);
    }
    if (from.oom) {
        /* The caller checks t once at the end: a "?" here would be printed as if true. */
        t->oom = true;
        orch__buf_free(&from);
        return;
    }
    w = (int)from.len;
    orch__buf_printf(t, "from %s%*s-> ", from.p, w < 26 ? 26 - w : 1, "");
    orch__buf_free(&from);
    for (int i = 0; i < q->nconsumers; i++) {
        const struct orch_stmt *s = &p->stmts[q->consumers[i]];
        if (s->call >= 0)
            orch__buf_printf(t, "%s%s", i ? ", " : "", p->calls[s->call].name);
        else
            orch__buf_printf(t, "%s%s %s", i ? ", " : "", orch_op_name(s->op),
                             p->ports[s->out[0]].qualified);
    }
    if (q->nconsumers == 0)
        orch__buf_puts(t, "(none)");
    orch__buf_puts(t, q->output ? "   [output]\n" : "\n");
}

int orch_plan_print(const orch_plan *p, FILE *out)
{
    struct orch__buf t = {0};
    orch__buf_printf(&t, "pipeline %s\nhash %s\n\ndomains:\n", p->name, p->hash);
    for (int i = 0; i < p->ndomains; i++)
        if (p->domains[i].parent < 0)
            print_domain(&t, p, i);
    orch__buf_puts(&t, "\ncalls:\n");
    for (int i = 0; i < p->ncalls; i++)
        print_call(&t, p, &p->calls[i]);
    if (p->ncalls == 0)
        orch__buf_puts(&t, "  (none)\n");
    orch__buf_puts(&t, "\nports:\n");
    for (int i = 0; i < p->nports; i++)
        print_port(&t, p, &p->ports[i]);
    if (t.oom) {
        orch__buf_free(&t);
        return -ENOMEM;
    }
    size_t len = t.len, n = fwrite(t.p, 1, len, out);
    orch__buf_free(&t);
    return n == len && !ferror(out) ? 0 : -EIO;
}
