/* acyclic.c — the statement graph must be acyclic: Tarjan's algorithm, without recursion.
 *
 * Nodes are statements. Edges: the producer of each input port -> the statement; the plain
 * expand of a child domain D -> every other statement whose grains or outputs live in D;
 * the plain expand of C -> a reduce over C. One error per strongly connected component
 * (or self-loop), naming its shortest cycle through the component's first statement:
 * "cycle: pdf.x -> page.image -> pdf.x". Iterative so that a 10 MB pipeline cannot
 * overflow the stack.
 */
#include "plan_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct graph {
    int n;
    int *start; /* n + 1 offsets into adj */
    int *adj;
};

static int expand_of(const orch_plan_builder *b, int d, int self)
{
    if (d < 0 || b->domains[d].parent < 0)
        return -1;
    int e = b->domains[d].expand;
    return e == self ? -1 : e;
}

/* Writes to buf the statements that statement si depends on (at most nin + 3). */
static int deps(const orch_plan_builder *b, int si, int *buf)
{
    const struct b_stmt *s = &b->stmts[si];
    int n = 0;
    for (int i = 0; i < s->nin; i++)
        if (s->in[i].port >= 0 && b->ports[s->in[i].port].producer >= 0)
            buf[n++] = b->ports[s->in[i].port].producer;
    int e;
    if ((e = expand_of(b, s->target, si)) >= 0)
        buf[n++] = e;
    if (s->domain != s->target && (e = expand_of(b, s->domain, si)) >= 0)
        buf[n++] = e;
    if ((e = expand_of(b, s->child, si)) >= 0)
        buf[n++] = e;
    return n;
}

static int graph_build(const orch_plan_builder *b, struct graph *g)
{
    int n = b->nstmts, maxin = 0;
    size_t nedges = 0;
    for (int i = 0; i < n; i++) {
        nedges += (size_t)b->stmts[i].nin + 3;
        if (b->stmts[i].nin > maxin)
            maxin = b->stmts[i].nin;
    }
    g->n = n;
    g->start = calloc((size_t)n + 1, sizeof *g->start);
    g->adj = malloc((nedges + 1) * sizeof *g->adj);
    int *tmp = malloc(((size_t)maxin + 3) * sizeof *tmp);
    if (!g->start || !g->adj || !tmp)
        return free(tmp), -ENOMEM;
    /* Count out-degrees, then place: edges point from producer to consumer. */
    for (int i = 0; i < n; i++) {
        int k = deps(b, i, tmp);
        for (int j = 0; j < k; j++)
            g->start[tmp[j] + 1]++;
    }
    for (int i = 0; i < n; i++)
        g->start[i + 1] += g->start[i];
    int *fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!fill)
        return free(tmp), -ENOMEM;
    memcpy(fill, g->start, ((size_t)n + 1) * sizeof *fill);
    for (int i = 0; i < n; i++) {
        int k = deps(b, i, tmp);
        for (int j = 0; j < k; j++)
            g->adj[fill[tmp[j]]++] = i;
    }
    free(fill);
    free(tmp);
    return 0;
}

static const char *node_name(const orch_plan_builder *b, int si, char buf[48])
{
    const struct b_stmt *s = &b->stmts[si];
    if (s->nout > 0 && s->out[0].port >= 0)
        return b->ports[s->out[0].port].qualified;
    char at[48];
    snprintf(buf, 48, "statement%s", orch__at(s->loc, at));
    return buf;
}

/* Shortest cycle through m inside component c (BFS), reported at m's position. */
static int report_cycle(orch_plan_builder *b, const struct graph *g, const int *comp, int m,
                        int *prev, int *queue)
{
    int head = 0, tail = 0, last = -1;
    queue[tail++] = m;
    prev[m] = m;
    while (head < tail && last < 0) {
        int v = queue[head++];
        for (int e = g->start[v]; e < g->start[v + 1]; e++) {
            int w = g->adj[e];
            if (w == m) {
                last = v;
                break;
            }
            if (comp[w] == comp[m] && prev[w] < 0) {
                prev[w] = v;
                queue[tail++] = w;
            }
        }
    }
    int len = 0;
    for (int v = last; v != m; v = prev[v])
        len++;
    int *path = malloc(((size_t)len + 1) * sizeof *path);
    if (path) {
        int i = len;
        for (int v = last; v != m; v = prev[v])
            path[--i] = v;
    }
    for (int i = 0; i < tail; i++)
        prev[queue[i]] = -1;
    struct orch__buf msg = {0};
    char nb[48];
    orch__buf_printf(&msg, "cycle: %s", node_name(b, m, nb));
    for (int i = 0; path && i < len; i++) {
        if (len > 12 && i == 8)
            orch__buf_printf(&msg, " -> ... (%d more)", len - 11);
        if (len > 12 && i >= 8 && i < len - 3)
            continue;
        orch__buf_printf(&msg, " -> %s", node_name(b, path[i], nb));
    }
    orch__buf_printf(&msg, " -> %s", node_name(b, m, nb));
    free(path);
    if (!path)
        msg.oom = true;
    /* The builder must know: the caller checks its `oom`, and a cycle dropped here would
     * otherwise let a cyclic plan build. */
    int rc = msg.oom ? (b->oom = true, -ENOMEM) : orch__error(b, b->stmts[m].loc, "%s", msg.p);
    orch__buf_free(&msg);
    return rc;
}

struct frame {
    int v, e;
};

int orch__check_acyclic(orch_plan_builder *b)
{
    struct graph g = {0};
    int n = b->nstmts, rc = graph_build(b, &g);
    int *idx = malloc(((size_t)n + 1) * sizeof(int));
    int *low = malloc(((size_t)n + 1) * sizeof(int));
    int *comp = malloc(((size_t)n + 1) * sizeof(int));
    int *stack = malloc(((size_t)n + 1) * sizeof(int));
    int *prev = malloc(((size_t)n + 1) * sizeof(int));
    int *queue = malloc(((size_t)n + 1) * sizeof(int));
    struct frame *calls = malloc(((size_t)n + 1) * sizeof *calls);
    if (rc || !idx || !low || !comp || !stack || !prev || !queue || !calls) {
        rc = -ENOMEM;
        b->oom = true;
        goto out;
    }
    for (int i = 0; i < n; i++)
        idx[i] = comp[i] = prev[i] = -1;
    int counter = 0, sp = 0, ncomp = 0;
    for (int root = 0; root < n; root++) {
        if (idx[root] >= 0)
            continue;
        int depth = 0;
        calls[depth++] = (struct frame){root, g.start[root]};
        idx[root] = low[root] = counter++;
        stack[sp++] = root;
        while (depth > 0) {
            struct frame *f = &calls[depth - 1];
            int v = f->v;
            if (f->e < g.start[v + 1]) {
                int w = g.adj[f->e++];
                if (idx[w] < 0) {
                    idx[w] = low[w] = counter++;
                    stack[sp++] = w;
                    calls[depth++] = (struct frame){w, g.start[w]};
                } else if (comp[w] < 0 && idx[w] < low[v]) {
                    low[v] = idx[w]; /* w is on the stack */
                }
                continue;
            }
            depth--;
            if (depth > 0 && low[v] < low[calls[depth - 1].v])
                low[calls[depth - 1].v] = low[v];
            if (low[v] != idx[v])
                continue;
            int size = 0, m = v, w;
            do {
                w = stack[--sp];
                comp[w] = ncomp;
                size++;
                if (w < m)
                    m = w;
            } while (w != v);
            ncomp++;
            bool loop = size > 1;
            for (int e = g.start[v]; e < g.start[v + 1] && !loop; e++)
                loop = g.adj[e] == v;
            if (loop && (rc = report_cycle(b, &g, comp, m, prev, queue)) == -ENOMEM)
                goto out;
        }
    }
    rc = 0;
out:
    free(g.start);
    free(g.adj);
    free(idx);
    free(low);
    free(comp);
    free(stack);
    free(prev);
    free(queue);
    free(calls);
    return rc;
}
