/* plan.c — the immutable plan: enumerator names, accessors, look-ups, free. */
#include "plan_internal.h"

#include <assert.h>
#include <stdlib.h>

#define ORCH_ENUM_TEXT(name, text) [name] = text,
static const char *const op_names[] = {ORCH_OPS(ORCH_ENUM_TEXT)};
static const char *const source_kind_names[] = {ORCH_SOURCE_KINDS(ORCH_ENUM_TEXT)};
static const char *const fn_kind_names[] = {ORCH_FN_KINDS(ORCH_ENUM_TEXT)};
static const char *const reserve_names[] = {ORCH_RESERVES(ORCH_ENUM_TEXT)};
static const char *const arg_kind_names[] = {ORCH_ARG_KINDS(ORCH_ENUM_TEXT)};
#undef ORCH_ENUM_TEXT

#define NAME_OF(table, v) ((unsigned)(v) < sizeof(table) / sizeof(table[0]) ? table[v] : "?")

const char *orch_op_name(enum orch_op op)
{
    return NAME_OF(op_names, op);
}

const char *orch_source_kind_name(enum orch_source_kind k)
{
    return NAME_OF(source_kind_names, k);
}

const char *orch_fn_kind_name(enum orch_fn_kind k)
{
    return NAME_OF(fn_kind_names, k);
}

const char *orch_reserve_name(enum orch_reserve r)
{
    return NAME_OF(reserve_names, r);
}

const char *orch_arg_kind_name(enum orch_arg_kind k)
{
    return NAME_OF(arg_kind_names, k);
}

void orch_call_opts_default(struct orch_call_opts *o)
{
    o->workers = 1;
    o->batch = ORCH_BATCH_AUTO;
    o->batch_bytes = 0;
    o->cpus = 1;
    o->gpus = 0;
    o->retries = 2;
    o->timeout_ms = 0;
    o->reserve = ORCH_RESERVE_ELASTIC;
}

const char *orch_plan_name(const orch_plan *p)
{
    return p->name;
}

int orch_plan_ndomains(const orch_plan *p)
{
    return p->ndomains;
}

int orch_plan_nports(const orch_plan *p)
{
    return p->nports;
}

int orch_plan_nsources(const orch_plan *p)
{
    return p->nsources;
}

int orch_plan_ncalls(const orch_plan *p)
{
    return p->ncalls;
}

int orch_plan_nstmts(const orch_plan *p)
{
    return p->nstmts;
}

const struct orch_domain *orch_plan_domain(const orch_plan *p, int i)
{
    assert(i >= 0 && i < p->ndomains);
    return &p->domains[i];
}

const struct orch_port *orch_plan_port(const orch_plan *p, int i)
{
    assert(i >= 0 && i < p->nports);
    return &p->ports[i];
}

const struct orch_source *orch_plan_source(const orch_plan *p, int i)
{
    assert(i >= 0 && i < p->nsources);
    return &p->sources[i];
}

const struct orch_call *orch_plan_call(const orch_plan *p, int i)
{
    assert(i >= 0 && i < p->ncalls);
    return &p->calls[i];
}

const struct orch_stmt *orch_plan_stmt(const orch_plan *p, int i)
{
    assert(i >= 0 && i < p->nstmts);
    return &p->stmts[i];
}

int orch_plan_find_domain(const orch_plan *p, const char *name)
{
    return name ? orch__map_get(&p->domain_map, name) : -1;
}

int orch_plan_find_port(const orch_plan *p, const char *qualified)
{
    return qualified ? orch__map_get(&p->port_map, qualified) : -1;
}

int orch_plan_find_call(const orch_plan *p, const char *name)
{
    return name ? orch__map_get(&p->call_map, name) : -1;
}

const char *orch_plan_canonical(const orch_plan *p)
{
    return p->canonical;
}

const char *orch_plan_basedir(const orch_plan *p)
{
    return p->basedir;
}

const char *orch_plan_hash(const orch_plan *p)
{
    return p->hash;
}

void orch_plan_free(orch_plan *p)
{
    if (!p)
        return;
    orch__map_free(&p->domain_map);
    orch__map_free(&p->port_map);
    orch__map_free(&p->call_map);
    free(p->canonical);
    orch__arena_free(&p->arena);
    free(p);
}
