/* fingerprint.c — what each port computes, as a hash (DESIGN §10; orch_plan.h).
 *
 * A port's fingerprint is the SHA-256 of how its values are made: for a source, its kind;
 * for a statement's output, the operation, the function (a library's file contents too),
 * the arguments, the fingerprints of the inputs (and whether each is optional), and which
 * of the statement's outputs it is; for a broadcast, its input's. Every port of a child
 * domain also depends on the expansion that makes the domain's entities: the fingerprint
 * of the domain's plain expand (its first output) is part of it. Names do not enter, so a
 * call renamed computes the same; options that do not change results (workers, batch,
 * batch_bytes, cpus, gpus, timeout, retries, reserve) do not either. An exec() program's
 * own file is not read (its command line is): `--rerun` is for a program that changed
 * behind the same command. */
#include "plan_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

/* Adds a field: its bytes and a NUL, so that fields cannot run into each other. */
static void field(struct orch_sha256 *c, const char *s)
{
    orch_sha256_update(c, s, strlen(s) + 1);
}

/* The hex SHA-256 of the file at path, or "unreadable" when it cannot be read (then the
 * fingerprint changes when it becomes readable, which is what a user expects). */
static void file_hash(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(hex, 65, "unreadable");
        return;
    }
    struct orch_sha256 c;
    orch_sha256_init(&c);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        orch_sha256_update(&c, buf, n);
    bool bad = ferror(f);
    fclose(f);
    unsigned char d[32];
    orch_sha256_final(&c, d);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    if (bad)
        snprintf(hex, 65, "unreadable");
}

static int cmp_arg(const void *a, const void *b)
{
    const struct orch_arg *x = *(const struct orch_arg *const *)a;
    const struct orch_arg *y = *(const struct orch_arg *const *)b;
    return strcmp(x->key, y->key);
}

struct fp_ctx {
    const orch_plan *p;
    char (*fp)[65];
    signed char *state; /* 0 not yet, 1 computing, 2 done */
    const bool *salted; /* by call, or NULL */
    const char *salt;
};

static int port_fp(struct fp_ctx *x, int port);

/* The fingerprint that every port of domain d depends on: its plain expand's first
 * output's, or "" for a root domain. */
static int domain_fp(struct fp_ctx *x, int d, const char **out)
{
    const struct orch_domain *dom = &x->p->domains[d];
    *out = "";
    if (dom->expand < 0)
        return 0;
    int first = x->p->stmts[dom->expand].out[0];
    int rc = port_fp(x, first);
    *out = x->fp[first];
    return rc;
}

static int port_fp(struct fp_ctx *x, int port)
{
    if (x->state[port] == 2)
        return 0;
    if (x->state[port] == 1)
        return -ELOOP; /* the plan is acyclic (acyclic.c): cannot happen */
    x->state[port] = 1;
    const orch_plan *p = x->p;
    const struct orch_port *pt = &p->ports[port];
    struct orch_sha256 c;
    orch_sha256_init(&c);
    int rc = 0;
    if (pt->source >= 0) {
        field(&c, "source");
        field(&c, orch_source_kind_name(p->sources[pt->source].kind));
    } else {
        const struct orch_stmt *st = &p->stmts[pt->producer];
        const char *dfp;
        if ((rc = domain_fp(x, st->domain, &dfp)) < 0)
            return rc;
        field(&c, "domain");
        field(&c, dfp);
        field(&c, orch_op_name(st->op));
        if (st->call >= 0) {
            const struct orch_call *cl = &p->calls[st->call];
            field(&c, orch_fn_kind_name(cl->fn_kind));
            if (x->salted && x->salted[st->call])
                field(&c, x->salt); /* --rerun: as if the function had changed */
            field(&c, cl->function);
            field(&c, cl->symbol ? cl->symbol : "");
            if (cl->fn_kind == ORCH_FN_LIBRARY) {
                char hex[65];
                file_hash(cl->function, hex);
                field(&c, hex);
            }
            /* Arguments by name: their order in the file does not change the result. */
            const struct orch_arg **args = calloc((size_t)cl->nargs + 1, sizeof *args);
            if (!args)
                return -ENOMEM;
            for (int i = 0; i < cl->nargs; i++)
                args[i] = &cl->args[i];
            qsort(args, (size_t)cl->nargs, sizeof *args, cmp_arg);
            for (int i = 0; i < cl->nargs; i++) {
                field(&c, args[i]->key);
                field(&c, orch_arg_kind_name(args[i]->kind));
                field(&c, args[i]->value);
            }
            free(args);
        }
        for (int i = 0; i < st->nin; i++) {
            if ((rc = port_fp(x, st->in[i].port)) < 0)
                return rc;
            field(&c, st->in[i].optional ? "?" : "=");
            field(&c, x->fp[st->in[i].port]);
        }
        char at[16];
        for (int i = 0; i < st->nout; i++)
            if (st->out[i] == port)
                snprintf(at, sizeof at, "out %d", i);
        field(&c, at);
    }
    unsigned char d[32];
    orch_sha256_final(&c, d);
    for (int i = 0; i < 32; i++)
        snprintf(x->fp[port] + 2 * i, 3, "%02x", d[i]);
    x->state[port] = 2;
    return 0;
}

int orch_plan_fingerprints(const orch_plan *p, char (**out)[65])
{
    return orch_plan_fingerprints_salted(p, NULL, NULL, out);
}

int orch_plan_fingerprints_salted(const orch_plan *p, const bool *salted, const char *salt,
                                  char (**out)[65])
{
    *out = NULL;
    struct fp_ctx x = {p, calloc((size_t)p->nports + 1, sizeof *x.fp),
                       calloc((size_t)p->nports + 1, 1), salted, salt};
    int rc = x.fp && x.state ? 0 : -ENOMEM;
    for (int i = 0; i < p->nports && rc == 0; i++)
        rc = port_fp(&x, i);
    free(x.state);
    if (rc < 0) {
        free(x.fp);
        return rc;
    }
    *out = x.fp;
    return 0;
}
