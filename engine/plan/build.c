/* build.c — orch_plan_build(): the whole-plan checks, then the immutable plan. */
#include "plan_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int port_domain(const orch_plan_builder *b, int port)
{
    return b->ports[port].domain;
}

static bool strict_ancestor(const orch_plan_builder *b, int a, int d)
{
    for (d = b->domains[d].parent; d >= 0; d = b->domains[d].parent)
        if (d == a)
            return true;
    return false;
}

/* The first plain expand into each child domain defines it; a second is an error. A
 * retired expand (a job's plan) defines a domain only that no live one does: a domain an
 * edit dropped with its expand. */
static void check_expands(orch_plan_builder *b)
{
    char at[48];
    for (int pass = 0; pass < 2; pass++)
        for (int si = 0; si < b->nstmts; si++) {
            struct b_stmt *s = &b->stmts[si];
            if (s->op != ORCH_OP_EXPAND || s->nout == 0 || s->out[0].port < 0 ||
                s->retired != (pass == 1))
                continue;
            struct b_domain *c = &b->domains[port_domain(b, s->out[0].port)];
            if (c->parent < 0)
                continue; /* reported by check_stmt */
            if (c->expand < 0)
                c->expand = si;
            else if (pass == 0)
                orch__error(b, s->loc, "domain '%s' already has a plain expand%s", c->name,
                            orch__at(b->stmts[c->expand].loc, at));
        }
}

/* Inputs of a map or filter must be ports of d. */
static void inputs_in(orch_plan_builder *b, const struct b_stmt *s, int d)
{
    for (int i = 0; i < s->nin; i++) {
        int id = port_domain(b, s->in[i].port);
        if (id == d)
            continue;
        orch__error(b, s->in[i].loc, "input '%s' is in domain '%s', but this %s runs in '%s'%s",
                    b->ports[s->in[i].port].qualified, b->domains[id].name, orch_op_name(s->op),
                    b->domains[d].name,
                    strict_ancestor(b, id, d) ? " (broadcast brings an ancestor's value down)"
                                              : "");
    }
}

static void check_expand(orch_plan_builder *b, struct b_stmt *s, int c)
{
    const struct b_domain *dc = &b->domains[c];
    if (dc->parent < 0) {
        orch__error(b, s->out[0].loc,
                    "%s into root domain '%s'; an expand fills a child domain",
                    orch_op_name(s->op), dc->name);
        return;
    }
    s->domain = dc->parent;
    for (int i = 0; i < s->nin; i++) {
        int id = port_domain(b, s->in[i].port);
        if (id != dc->parent)
            orch__error(b, s->in[i].loc,
                        "input '%s' is in domain '%s', but an expand into '%s' reads from its "
                        "parent '%s'",
                        b->ports[s->in[i].port].qualified, b->domains[id].name, dc->name,
                        b->domains[dc->parent].name);
    }
    if (s->op == ORCH_OP_EXPAND_ALIGNED && dc->expand < 0 && !b->incomplete)
        orch__error(b, s->loc, "expand aligned into '%s', which has no plain expand", dc->name);
}

static void check_reduce(orch_plan_builder *b, struct b_stmt *s, int a)
{
    if (s->nout > 1)
        orch__error(b, s->out[1].loc, "reduce has exactly one output");
    int c = port_domain(b, s->in[0].port);
    if (b->domains[c].parent != a) {
        orch__error(b, s->in[0].loc,
                    "input '%s' is in domain '%s', which is not a child domain "
                    "of '%s'",
                    b->ports[s->in[0].port].qualified, b->domains[c].name, b->domains[a].name);
        return;
    }
    s->child = c;
    for (int i = 1; i < s->nin; i++) {
        int id = port_domain(b, s->in[i].port);
        if (id != c)
            orch__error(b, s->in[i].loc,
                        "inputs of a reduce must be in one child domain: '%s' is in '%s', not "
                        "'%s'",
                        b->ports[s->in[i].port].qualified, b->domains[id].name,
                        b->domains[c].name);
    }
}

static void check_broadcast(orch_plan_builder *b, struct b_stmt *s, int d)
{
    if (s->nin != 1 || s->nout != 1) {
        orch__error(b, s->loc, "broadcast has exactly one input and one output");
        return;
    }
    int a = port_domain(b, s->in[0].port);
    if (!strict_ancestor(b, a, d))
        orch__error(b, s->in[0].loc,
                    "broadcast needs an ancestor: '%s' is not an ancestor "
                    "domain of '%s'",
                    b->domains[a].name, b->domains[d].name);
}

/* Domain fit of one statement (DESIGN §2); sets its domain and target. */
static void check_stmt(orch_plan_builder *b, struct b_stmt *s)
{
    if (s->call >= 0)
        orch__call_check_use(b, &b->calls[s->call], s);
    for (int i = 0; i < s->nin; i++)
        if (s->in[i].port < 0)
            return;
    for (int i = 0; i < s->nout; i++)
        if (s->out[i].port < 0)
            return;
    if (s->nout == 0) {
        orch__error(b, s->loc, "%s has no output", orch_op_name(s->op));
        return;
    }
    int d = port_domain(b, s->out[0].port);
    for (int i = 1; i < s->nout; i++) {
        int od = port_domain(b, s->out[i].port);
        if (od != d)
            orch__error(b, s->out[i].loc,
                        "all outputs of a statement must be in one domain: '%s' is in '%s', "
                        "not '%s'",
                        b->ports[s->out[i].port].qualified, b->domains[od].name,
                        b->domains[d].name);
    }
    s->domain = s->target = d;
    if (s->nin == 0 && s->op != ORCH_OP_BROADCAST) {
        orch__error(b, s->loc, "%s needs at least one input", orch_op_name(s->op));
        return;
    }
    switch (s->op) {
    case ORCH_OP_FILTER:
        if (s->nout > 1)
            orch__error(b, s->out[1].loc, "filter has exactly one output");
        /* fallthrough */
    case ORCH_OP_MAP:
        inputs_in(b, s, d);
        break;
    case ORCH_OP_EXPAND:
    case ORCH_OP_EXPAND_ALIGNED:
        check_expand(b, s, d);
        break;
    case ORCH_OP_BROADCAST:
        check_broadcast(b, s, d);
        break;
    case ORCH_OP_REDUCE:
        check_reduce(b, s, d);
        break;
    case ORCH_OP__COUNT: /* orch_plan_add_stmt() refused it */
        break;
    }
}

static void check_all(orch_plan_builder *b)
{
    if (!b->name && !b->incomplete)
        orch__error(b, (orch_loc){0, 0}, "missing 'pipeline NAME' statement");
    for (int i = 0; i < b->nports && !b->incomplete; i++) {
        const struct b_port *p = &b->ports[i];
        if (p->source < 0 && p->producer < 0)
            orch__error(b, p->use_loc, "unknown port '%s': no source or statement produces it",
                        p->qualified);
    }
    check_expands(b);
    for (int i = 0; i < b->nstmts; i++)
        check_stmt(b, &b->stmts[i]);
    for (int i = 0; i < b->ndomains && !b->incomplete; i++) {
        const struct b_domain *d = &b->domains[i];
        if (d->parent < 0 && d->source < 0)
            orch__error(b, d->loc, "root domain '%s' has no source", d->name);
        if (d->parent >= 0 && d->expand < 0)
            orch__error(b, d->loc, "child domain '%s' has no plain expand", d->name);
    }
    for (int i = 0; i < b->ncalls; i++) {
        const struct b_call *c = &b->calls[i];
        if (!c->valid)
            continue;
        orch__call_check_args(b, c);
        if (c->stmt < 0 && !b->incomplete)
            orch__warn(b, c->loc, "call '%s' is never used", c->name);
    }
    orch__check_acyclic(b);
}

/* ---- the immutable plan ---- */

#define ADUP(p, s) orch__arena_strdup(&(p)->arena, (s))

static int freeze_domains(const orch_plan_builder *b, struct orch_plan *p)
{
    p->ndomains = b->ndomains;
    p->domains = orch__arena_alloc(&p->arena, sizeof *p->domains * (size_t)(b->ndomains + 1));
    int *nchildren = calloc((size_t)b->ndomains + 1, sizeof *nchildren);
    if (!p->domains || !nchildren)
        return free(nchildren), -ENOMEM;
    for (int i = 0; i < b->ndomains; i++)
        if (b->domains[i].parent >= 0)
            nchildren[b->domains[i].parent]++;
    for (int i = 0; i < b->ndomains; i++) {
        const struct b_domain *bd = &b->domains[i];
        struct orch_domain *d = &p->domains[i];
        int *kids = orch__arena_alloc(&p->arena, sizeof(int) * (size_t)(nchildren[i] + 1));
        *d = (struct orch_domain){.name = ADUP(p, bd->name),
                                  .parent = bd->parent,
                                  .depth = bd->depth,
                                  .source = bd->source,
                                  .expand = bd->expand,
                                  .children = kids};
        if (!d->name || !kids || orch__map_put(&p->domain_map, d->name, i) < 0)
            return free(nchildren), -ENOMEM;
    }
    free(nchildren);
    for (int i = 0; i < b->ndomains; i++) {
        struct orch_domain *parent =
            b->domains[i].parent >= 0 ? &p->domains[b->domains[i].parent] : NULL;
        if (parent)
            ((int *)parent->children)[parent->nchildren++] = i;
    }
    return 0;
}

/* Ports are numbered by producer: sources first, then statement outputs (plan_internal.h). */
static int freeze_ports(orch_plan_builder *b, struct orch_plan *p)
{
    int next = 0;
    for (int i = 0; i < b->nsources; i++)
        b->ports[b->sources[i].port].index = next++;
    for (int i = 0; i < b->nstmts; i++)
        for (int j = 0; j < b->stmts[i].nout; j++)
            b->ports[b->stmts[i].out[j].port].index = next++;
    assert(next == b->nports);
    p->nports = b->nports;
    p->ports = orch__arena_alloc(&p->arena, sizeof *p->ports * (size_t)(b->nports + 1));
    int *nc = calloc((size_t)b->nports + 1, sizeof *nc);
    if (!p->ports || !nc)
        return free(nc), -ENOMEM;
    for (int i = 0; i < b->nstmts; i++)
        for (int j = 0; j < b->stmts[i].nin && !b->stmts[i].retired; j++)
            nc[b->stmts[i].in[j].port]++;
    for (int i = 0; i < b->nports; i++) {
        const struct b_port *bp = &b->ports[i];
        struct orch_port *q = &p->ports[bp->index];
        *q = (struct orch_port){
            .qualified = ADUP(p, bp->qualified),
            .domain = bp->domain,
            .source = bp->source,
            .producer = bp->producer,
            .consumers = orch__arena_alloc(&p->arena, sizeof(int) * (size_t)(nc[i] + 1)),
            .output = bp->output};
        if (!q->qualified || !q->consumers ||
            orch__map_put(&p->port_map, q->qualified, bp->index) < 0)
            return free(nc), -ENOMEM;
        q->name = q->qualified + (bp->name - bp->qualified);
    }
    free(nc);
    for (int i = 0; i < b->nstmts; i++)
        for (int j = 0; j < b->stmts[i].nin && !b->stmts[i].retired; j++) {
            struct orch_port *q = &p->ports[b->ports[b->stmts[i].in[j].port].index];
            if (q->nconsumers == 0 || q->consumers[q->nconsumers - 1] != i)
                ((int *)q->consumers)[q->nconsumers++] = i;
        }
    return 0;
}

static int freeze_calls(const orch_plan_builder *b, struct orch_plan *p)
{
    p->ncalls = b->ncalls;
    p->calls = orch__arena_alloc(&p->arena, sizeof *p->calls * (size_t)(b->ncalls + 1));
    if (!p->calls)
        return -ENOMEM;
    for (int i = 0; i < b->ncalls; i++) {
        const struct b_call *bc = &b->calls[i];
        struct orch_call *c = &p->calls[i];
        struct orch_arg *args =
            orch__arena_alloc(&p->arena, sizeof *args * (size_t)(bc->nargs + 1));
        if (!args)
            return -ENOMEM;
        *c = (struct orch_call){.name = ADUP(p, bc->name),
                                .fn_kind = bc->fn_kind,
                                .function = ADUP(p, bc->function),
                                .symbol = bc->symbol ? ADUP(p, bc->symbol) : NULL,
                                .nargs = bc->nargs,
                                .args = args,
                                .opts = bc->opts,
                                .stmt = bc->stmt};
        if (!c->name || !c->function || (bc->symbol && !c->symbol) ||
            orch__map_put(&p->call_map, c->name, i) < 0)
            return -ENOMEM;
        for (int j = 0; j < bc->nargs; j++) {
            args[j] = (struct orch_arg){.key = ADUP(p, bc->args[j].key),
                                        .value = ADUP(p, bc->args[j].value),
                                        .kind = bc->args[j].kind};
            if (!args[j].key || !args[j].value)
                return -ENOMEM;
        }
    }
    return 0;
}

static int freeze_stmts(const orch_plan_builder *b, struct orch_plan *p)
{
    p->nsources = b->nsources;
    p->sources = orch__arena_alloc(&p->arena, sizeof *p->sources * (size_t)(b->nsources + 1));
    p->nstmts = b->nstmts;
    p->stmts = orch__arena_alloc(&p->arena, sizeof *p->stmts * (size_t)(b->nstmts + 1));
    if (!p->sources || !p->stmts)
        return -ENOMEM;
    for (int i = 0; i < b->nsources; i++) {
        const struct b_source *bs = &b->sources[i];
        p->sources[i] = (struct orch_source){.domain = bs->domain,
                                             .port = b->ports[bs->port].index,
                                             .kind = bs->kind,
                                             .arg = ADUP(p, bs->arg),
                                             .written = ADUP(p, bs->written),
                                             .retired = bs->retired};
        if (!p->sources[i].arg || !p->sources[i].written)
            return -ENOMEM;
    }
    for (int i = 0; i < b->nstmts; i++) {
        const struct b_stmt *bs = &b->stmts[i];
        struct orch_input *in =
            orch__arena_alloc(&p->arena, sizeof *in * (size_t)(bs->nin + 1));
        int *out = orch__arena_alloc(&p->arena, sizeof *out * (size_t)(bs->nout + 1));
        if (!in || !out)
            return -ENOMEM;
        for (int j = 0; j < bs->nin; j++)
            in[j] = (struct orch_input){.port = b->ports[bs->in[j].port].index,
                                        .optional = bs->in[j].optional};
        for (int j = 0; j < bs->nout; j++)
            out[j] = b->ports[bs->out[j].port].index;
        p->stmts[i] = (struct orch_stmt){.op = bs->op,
                                         .call = bs->call,
                                         .domain = bs->domain,
                                         .target = bs->target,
                                         .nin = bs->nin,
                                         .in = in,
                                         .nout = bs->nout,
                                         .out = out,
                                         .loc = bs->loc,
                                         .retired = bs->retired};
    }
    return 0;
}

static int freeze(orch_plan_builder *b, orch_plan **out)
{
    struct orch_plan *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    int rc = -ENOMEM;
    if (!(p->name = ADUP(p, b->name)) || !(p->basedir = ADUP(p, b->basedir)))
        goto fail;
    if ((rc = freeze_domains(b, p)) || (rc = freeze_ports(b, p)) || (rc = freeze_calls(b, p)) ||
        (rc = freeze_stmts(b, p)) || (rc = orch__plan_canonicalize(p)))
        goto fail;
    *out = p;
    return 0;
fail:
    orch_plan_free(p);
    return rc;
}

int orch_plan_build(orch_plan_builder *b, orch_plan **out)
{
    *out = NULL;
    if (!b->built) {
        b->built = true;
        check_all(b);
    }
    if (b->oom)
        return -ENOMEM;
    if (b->nerrors)
        return ORCH_EPLAN;
    return freeze(b, out);
}
