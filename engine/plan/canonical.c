/* canonical.c — the plan's canonical text (the `.orch` language, normalised) and its hash.
 *
 * Layout: `pipeline`, then blank-line separated sections in index order — domains,
 * sources, calls (every option written out), statements, outputs. Strings are quoted with
 * escapes; paths are already absolute. Compiling the text gives the same plan, indexes
 * included (plan_internal.h), and so the same text.
 */
#include "plan_internal.h"
#include "sha256.h"

#include <errno.h>
#include <string.h>

void orch__quote(struct orch__buf *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    orch__buf_putc(out, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        const char *esc = NULL;
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\t':
            esc = "\\t";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\r':
            esc = "\\r";
            break;
        }
        if (esc) {
            orch__buf_puts(out, esc);
            i++;
            continue;
        }
        size_t k = c < 0x20 || c == 0x7f ? 0 : orch__utf8_len(p + i, n - i);
        if (k == 0) {
            orch__buf_printf(out, "\\x%02x", c);
            i++;
        } else {
            orch__buf_add(out, p + i, k);
            i += k;
        }
    }
    orch__buf_putc(out, '"');
}

void orch__format_call_function(struct orch__buf *t, const struct orch_call *c, bool empty_args)
{
    if (c->fn_kind == ORCH_FN_BUILTIN) {
        orch__buf_puts(t, c->function);
    } else {
        orch__buf_printf(t, "%s(", orch_fn_kind_name(c->fn_kind));
        orch__quote(t, c->function);
        if (c->fn_kind == ORCH_FN_LIBRARY) {
            orch__buf_puts(t, ", ");
            orch__quote(t, c->symbol);
        }
        orch__buf_putc(t, ')');
    }
    if (c->fn_kind == ORCH_FN_BUILTIN || c->nargs > 0 || empty_args) {
        orch__buf_putc(t, '(');
        for (int i = 0; i < c->nargs; i++) {
            orch__buf_printf(t, "%s%s=", i ? ", " : "", c->args[i].key);
            if (c->args[i].kind == ORCH_ARG_STRING)
                orch__quote(t, c->args[i].value);
            else
                orch__buf_puts(t, c->args[i].value);
        }
        orch__buf_putc(t, ')');
    }
}

void orch__format_call_opts(struct orch__buf *t, const struct orch_call_opts *o,
                            const char *sep)
{
    orch__buf_printf(t, "workers=%d%sbatch=", o->workers, sep);
    if (o->batch == ORCH_BATCH_AUTO)
        orch__buf_puts(t, "auto");
    else
        orch__buf_printf(t, "%d", o->batch);
    orch__buf_printf(t, "%sbatch_bytes=", sep);
    orch__format_size(t, o->batch_bytes);
    orch__buf_printf(t, "%scpus=", sep);
    orch__format_double(t, o->cpus);
    orch__buf_printf(t, "%sgpus=", sep);
    orch__format_double(t, o->gpus);
    orch__buf_printf(t, "%sretries=%d%stimeout=", sep, o->retries, sep);
    orch__format_duration_ms(t, o->timeout_ms);
    orch__buf_printf(t, "%sreserve=%s", sep, orch_reserve_name(o->reserve));
}

static void write_call(struct orch__buf *t, const struct orch_call *c)
{
    orch__buf_printf(t, "call %s = ", c->name);
    orch__format_call_function(t, c, false);
    orch__buf_puts(t, " with ");
    orch__format_call_opts(t, &c->opts, ", ");
    orch__buf_putc(t, '\n');
}

static void write_stmt(struct orch__buf *t, const struct orch_plan *p,
                       const struct orch_stmt *s)
{
    if (s->retired)
        orch__buf_puts(t, "retired ");
    for (int i = 0; i < s->nout; i++)
        orch__buf_printf(t, "%s%s", i ? ", " : "", p->ports[s->out[i]].qualified);
    if (s->op == ORCH_OP_BROADCAST) {
        orch__buf_printf(t, " = broadcast %s\n", p->ports[s->in[0].port].qualified);
        return;
    }
    orch__buf_puts(t, " = ");
    if (s->op != ORCH_OP_MAP)
        orch__buf_printf(t, "%s ", orch_op_name(s->op));
    orch__buf_printf(t, "%s(", p->calls[s->call].name);
    for (int i = 0; i < s->nin; i++)
        orch__buf_printf(t, "%s%s%s", i ? ", " : "", s->in[i].optional ? "?" : "",
                         p->ports[s->in[i].port].qualified);
    orch__buf_puts(t, ")\n");
}

int orch__plan_canonicalize(struct orch_plan *p)
{
    struct orch__buf t = {0};
    orch__buf_printf(&t, "pipeline %s\n", p->name);
    if (p->ndomains)
        orch__buf_putc(&t, '\n');
    for (int i = 0; i < p->ndomains; i++) {
        const struct orch_domain *d = &p->domains[i];
        if (d->parent >= 0)
            orch__buf_printf(&t, "domain %s in %s\n", d->name, p->domains[d->parent].name);
        else
            orch__buf_printf(&t, "domain %s\n", d->name);
    }
    if (p->nsources)
        orch__buf_putc(&t, '\n');
    for (int i = 0; i < p->nsources; i++) {
        const struct orch_source *s = &p->sources[i];
        orch__buf_printf(&t, "%ssource %s = %s(", s->retired ? "retired " : "",
                         p->ports[s->port].qualified, orch_source_kind_name(s->kind));
        orch__quote(&t, s->arg);
        orch__buf_puts(&t, ")\n");
    }
    if (p->ncalls)
        orch__buf_putc(&t, '\n');
    for (int i = 0; i < p->ncalls; i++)
        write_call(&t, &p->calls[i]);
    if (p->nstmts)
        orch__buf_putc(&t, '\n');
    for (int i = 0; i < p->nstmts; i++)
        write_stmt(&t, p, &p->stmts[i]);
    bool any = false;
    for (int i = 0; i < p->nports; i++)
        if (p->ports[i].output) {
            orch__buf_printf(&t, "%soutput %s\n", any ? "" : "\n", p->ports[i].qualified);
            any = true;
        }
    if (!(p->canonical = orch__buf_steal(&t)))
        return -ENOMEM;
    orch_sha256_hex(p->canonical, strlen(p->canonical), p->hash);
    return 0;
}
