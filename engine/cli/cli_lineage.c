/* cli_lineage.c — `orch lineage` (DESIGN §9): an entity's ancestors and descendants. */
#include "cli_inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "knobs.h"
#include "orch_error.h"
#include "orch_job.h"
#include "support.h"

static const char lineage_help[] =
    "usage: orch lineage DIR [--depth N] [--] ENTITY\n"
    "\n"
    "Shows one entity: its chain of ancestors from the root (domain, key, #id), then the\n"
    "entity and the tree of its descendants, indented, each with the state of the items\n"
    "of its domain's ports (port=present|dropped|failed|suppressed, or pending while the\n"
    "item is not terminal). Children come by domain, then ordinal.\n"
    "\n"
    "ENTITY is an entity key (a root's key is its source value; a child's key is its\n"
    "parent's key, '/', and its ordinal: docs/a.txt/3) or #ID (entity.id). A key that names\n"
    "several entities (root keys may repeat; two child domains share ordinals) is refused\n"
    "with the list of their #IDs.\n"
    "\n"
    "  --depth N   show descendants down to N levels below the entity (default: all)\n"
    "\n"
    "exit status: 0 done; 1 the job cannot be read or has no such entity; 2 usage error.\n";

struct lineage {
    struct orch_job *job;
    sqlite3_stmt *row;   /* one entity by id */
    sqlite3_stmt *root;  /* roots by key */
    sqlite3_stmt *child; /* a child by parent, domain and ordinal */
    sqlite3_stmt *item;  /* an item's state */
    sqlite3_stmt **kids; /* per level below the entity: its children, in order */
    int nkids, capkids;
    int64_t *found; /* entities a key names */
    int nfound, capfound;
};

struct entity_row {
    int64_t id, parent, ordinal;
    int domain;
};

static int lineage_step(struct lineage *L, sqlite3_stmt *st)
{
    return orch_store_step(L->job->store, st);
}

/* rc of a sqlite3_bind_*: 0, or the store's translation of the error. */
static int bound(struct lineage *L, int rc)
{
    return rc == SQLITE_OK ? 0 : orch_store_error(L->job->store, rc, "bind");
}

/* Reads entity id; 1 when found, 0 when there is none, or a negative code. */
static int entity_get(struct lineage *L, int64_t id, struct entity_row *e)
{
    sqlite3_reset(L->row);
    int rc = bound(L, sqlite3_bind_int64(L->row, 1, id));
    if (rc == 0)
        rc = lineage_step(L, L->row);
    if (rc == 1) {
        e->id = id;
        e->parent =
            sqlite3_column_type(L->row, 0) == SQLITE_NULL ? 0 : sqlite3_column_int64(L->row, 0);
        e->domain = sqlite3_column_int(L->row, 1);
        e->ordinal = sqlite3_column_int64(L->row, 2);
        if (e->domain < 0 || e->domain >= orch_plan_ndomains(L->job->plan))
            rc = orch_error_set(ORCH_ECORRUPT, "entity #%" PRId64 " has an unknown domain", id);
    }
    sqlite3_reset(L->row);
    return rc;
}

static int found_add(struct lineage *L, int64_t id)
{
    if (orch__grow(&L->found, &L->capfound, L->nfound + 1, sizeof *L->found) < 0)
        return -ENOMEM;
    L->found[L->nfound++] = id;
    return 0;
}

/* Walks the ordinals of path (digits separated by '/', already checked) down from entity
 * id of domain dom, through every child domain; adds the entities reached to L->found. */
static int walk_down(struct lineage *L, int64_t id, int dom, const char *path)
{
    if (!*path)
        return found_add(L, id);
    char *end;
    long long ord = strtoll(path, &end, 10);
    const char *rest = *end == '/' ? end + 1 : end;
    const struct orch_domain *d = orch_plan_domain(L->job->plan, dom);
    for (int i = 0; i < d->nchildren; i++) {
        sqlite3_reset(L->child);
        int rc = bound(L, sqlite3_bind_int64(L->child, 1, id));
        if (rc == 0)
            rc = bound(L, sqlite3_bind_int(L->child, 2, d->children[i]));
        if (rc == 0)
            rc = bound(L, sqlite3_bind_int64(L->child, 3, ord));
        if (rc == 0)
            rc = lineage_step(L, L->child);
        int64_t kid = rc == 1 ? sqlite3_column_int64(L->child, 0) : 0;
        sqlite3_reset(L->child);
        if (rc < 0)
            return rc;
        if (rc == 1 && (rc = walk_down(L, kid, d->children[i], rest)) < 0)
            return rc;
    }
    return 0;
}

/* Whether s is "N(/N)*" with each N a decimal ordinal as keys write it (no sign, no
 * leading zero). */
static bool ordinal_path(const char *s)
{
    for (;;) {
        size_t n = 0;
        while (s[n] >= '0' && s[n] <= '9')
            n++;
        if (n == 0 || n > 18 || (n > 1 && s[0] == '0'))
            return false;
        s += n;
        if (*s == '\0')
            return true;
        if (*s++ != '/')
            return false;
    }
}

/* Every entity that key names: a root whose key is a prefix of it ending before a '/'
 * (the whole key first, then each split from the right, since root keys may contain '/'),
 * followed by ordinals walked down from there. */
static int find_key(struct lineage *L, const char *key)
{
    size_t len = strlen(key);
    char *prefix = malloc(len + 1);
    if (!prefix)
        return -ENOMEM;
    int rc = 0;
    for (size_t cut = len + 1; rc == 0 && cut > 0;) {
        /* cut: the length of the root key tried, + 1 (len + 1: the whole key). */
        size_t k = cut - 1;
        const char *path = k < len ? key + k + 1 : "";
        if (k == len || ordinal_path(path)) {
            memcpy(prefix, key, k);
            prefix[k] = '\0';
            sqlite3_reset(L->root);
            rc = bound(L, sqlite3_bind_text(L->root, 1, prefix, -1, SQLITE_STATIC));
            while (rc == 0 && (rc = lineage_step(L, L->root)) == 1) {
                int64_t id = sqlite3_column_int64(L->root, 0);
                int dom = sqlite3_column_int(L->root, 1);
                rc = dom >= 0 && dom < orch_plan_ndomains(L->job->plan)
                         ? walk_down(L, id, dom, path)
                         : orch_error_set(ORCH_ECORRUPT,
                                          "entity #%" PRId64 " has an unknown domain", id);
            }
            sqlite3_reset(L->root);
        }
        /* The next '/' to the left. */
        while (--cut > 0 && key[cut - 1] != '/')
            ;
    }
    free(prefix);
    return rc;
}

/* The item states of entity e's ports: " text=present kept=dropped". */
static int print_items(struct lineage *L, FILE *out, const struct entity_row *e)
{
    const orch_plan *p = L->job->plan;
    for (int i = 0; i < orch_plan_nports(p); i++) {
        const struct orch_port *pt = orch_plan_port(p, i);
        if (pt->domain != e->domain)
            continue;
        sqlite3_reset(L->item);
        int rc = bound(L, sqlite3_bind_int(L->item, 1, i));
        if (rc == 0)
            rc = bound(L, sqlite3_bind_int64(L->item, 2, e->id));
        if (rc == 0)
            rc = lineage_step(L, L->item);
        if (rc < 0)
            return rc;
        fprintf(out, " %s=%s", pt->name,
                rc == 1 ? (const char *)sqlite3_column_text(L->item, 0) : "pending");
        sqlite3_reset(L->item);
    }
    return 0;
}

static int print_entity(struct lineage *L, FILE *out, int indent, const struct entity_row *e,
                        const char *key)
{
    fprintf(out, "%*s%s %s (#%" PRId64 "):", indent, "",
            orch_plan_domain(L->job->plan, e->domain)->name, key, e->id);
    int rc = print_items(L, out, e);
    fputc('\n', out);
    return rc;
}

/* The streaming expansions of entity id that are open (their UDF runs) or failed after
 * publishing children (DESIGN §5): one line each. Best effort: a job made before the view
 * open_expansions shows none. */
static void print_open_expansions(struct lineage *L, FILE *out, int64_t id)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(orch_store_db(L->job->store),
                           "SELECT call, state, children FROM open_expansions"
                           " WHERE parent_id = ? ORDER BY call",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    if (sqlite3_bind_int64(st, 1, id) == SQLITE_OK)
        while (sqlite3_step(st) == SQLITE_ROW)
            fprintf(out, "  expansion by %s: %s, %lld children so far\n",
                    (const char *)sqlite3_column_text(st, 0),
                    (const char *)sqlite3_column_text(st, 1),
                    (long long)sqlite3_column_int64(st, 2));
    sqlite3_finalize(st);
}

/* The descendants of e, depth first, children by domain then ordinal: through the
 * entity_child index, one statement per level so that each level streams its rows. */
static int print_tree(struct lineage *L, FILE *out, const struct entity_row *e,
                      struct orch__buf *key, int level, int maxdepth, int64_t *count)
{
    if (maxdepth >= 0 && level >= maxdepth)
        return 0;
    if (level == L->nkids) {
        if (orch__grow(&L->kids, &L->capkids, level + 1, sizeof *L->kids) < 0)
            return -ENOMEM;
        int rc = prepare(L->job,
                         "SELECT id, domain_id, ordinal FROM entity WHERE parent_id = ?"
                         " ORDER BY domain_id, ordinal",
                         &L->kids[level], "lineage");
        if (rc < 0)
            return rc;
        L->nkids++;
    }
    sqlite3_stmt *st = L->kids[level];
    sqlite3_reset(st);
    size_t keylen = key->len;
    int rc = bound(L, sqlite3_bind_int64(st, 1, e->id));
    while (rc == 0 && (rc = lineage_step(L, st)) == 1) {
        struct entity_row c = {
            .id = sqlite3_column_int64(st, 0),
            .parent = e->id,
            .domain = sqlite3_column_int(st, 1),
            .ordinal = sqlite3_column_int64(st, 2),
        };
        if (c.domain < 0 || c.domain >= orch_plan_ndomains(L->job->plan)) {
            rc = orch_error_set(ORCH_ECORRUPT, "entity #%" PRId64 " has an unknown domain",
                                c.id);
            break;
        }
        orch__buf_printf(key, "/%" PRId64, c.ordinal);
        if (key->oom) {
            rc = -ENOMEM;
            break;
        }
        ++*count;
        if ((rc = print_entity(L, out, 2 * (level + 1), &c, key->p)) < 0 ||
            (rc = print_tree(L, out, &c, key, level + 1, maxdepth, count)) < 0)
            break;
        key->len = keylen;
        key->p[keylen] = '\0';
    }
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

/* Prints ancestors, the entity and its descendants. */
static int lineage_print(struct lineage *L, FILE *out, int64_t id, int maxdepth)
{
    /* The chain from the entity up to its root. */
    struct entity_row *chain = NULL;
    int n = 0, cap = 0, rc = 0;
    for (int64_t cur = id; cur;) {
        if (orch__grow(&chain, &cap, n + 1, sizeof *chain) < 0) {
            rc = -ENOMEM;
            break;
        }
        if ((rc = entity_get(L, cur, &chain[n])) <= 0) {
            if (rc == 0)
                rc = orch_error_set(ORCH_ECORRUPT, "entity #%" PRId64 " is missing", cur);
            break;
        }
        if (n > orch_plan_ndomains(L->job->plan)) { /* deeper than the plan: a cycle */
            rc = orch_error_set(ORCH_ECORRUPT, "entity #%" PRId64 ": its parents form a cycle",
                                id);
            break;
        }
        cur = chain[n++].parent;
        rc = 0;
    }
    /* Keys from the root down: the root's own key, then '/' and each ordinal. */
    struct orch__buf key = {0};
    if (rc == 0) {
        static const char root_key[] = "SELECT key FROM entity WHERE id = ?";
        sqlite3_stmt *st;
        if ((rc = prepare(L->job, root_key, &st, "lineage")) == 0) {
            if ((rc = bound(L, sqlite3_bind_int64(st, 1, chain[n - 1].id))) == 0 &&
                (rc = lineage_step(L, st)) == 1) {
                const char *k = (const char *)sqlite3_column_text(st, 0);
                orch__buf_puts(&key, k ? k : "");
                rc = 0;
            } else if (rc == 0)
                rc = orch_error_set(ORCH_ECORRUPT, "entity #%" PRId64 " is missing",
                                    chain[n - 1].id);
            sqlite3_finalize(st);
        }
    }
    if (rc == 0) {
        fputs("ancestors:\n", out);
        if (n == 1)
            fputs("  (none: a root entity)\n", out);
        for (int i = n - 1; i >= 0 && rc == 0; i--) {
            if (i < n - 1)
                orch__buf_printf(&key, "/%" PRId64, chain[i].ordinal);
            if (key.oom) {
                rc = -ENOMEM;
                break;
            }
            if (i > 0)
                fprintf(out, "  %s %s (#%" PRId64 ")\n",
                        orch_plan_domain(L->job->plan, chain[i].domain)->name, key.p,
                        chain[i].id);
        }
    }
    if (rc == 0) {
        fputs("entity:\n", out);
        rc = print_entity(L, out, 2, &chain[0], key.p);
        if (rc == 0)
            print_open_expansions(L, out, chain[0].id);
    }
    if (rc == 0) {
        fputs("descendants:\n", out);
        int64_t count = 0;
        rc = print_tree(L, out, &chain[0], &key, 0, maxdepth, &count);
        if (rc == 0 && count == 0)
            fputs(maxdepth == 0 ? "  (not shown: --depth 0)\n" : "  (none)\n", out);
    }
    orch__buf_free(&key);
    free(chain);
    return rc;
}

/* Resolves ENTITY (a key or #ID) into *id; prints why not and returns ORCH_EXIT_FAIL (an
 * unknown entity) or ORCH_EXIT_USAGE (a malformed #ID). */
static int lineage_resolve(struct lineage *L, const char *arg, int64_t *id, int *rc)
{
    *rc = 0;
    if (arg[0] == '#') {
        uint64_t v;
        if (orch_count(arg + 1, 1, INT64_MAX, &v) < 0)
            return orch_cli_usage_error("lineage: '%s' is not an entity id (#ID)", arg);
        struct entity_row e;
        if ((*rc = entity_get(L, (int64_t)v, &e)) < 0)
            return ORCH_EXIT_FAIL;
        if (*rc == 0) {
            fprintf(stderr, "orch: lineage: %s has no entity %s\n", L->job->dir, arg);
            return ORCH_EXIT_FAIL;
        }
        *rc = 0;
        *id = (int64_t)v;
        return ORCH_EXIT_OK;
    }
    if ((*rc = find_key(L, arg)) < 0)
        return ORCH_EXIT_FAIL;
    if (L->nfound == 0) {
        fprintf(stderr, "orch: lineage: %s has no entity with key '%s'\n", L->job->dir, arg);
        return ORCH_EXIT_FAIL;
    }
    if (L->nfound > 1) {
        fprintf(stderr, "orch: lineage: key '%s' names %d entities:", arg, L->nfound);
        for (int i = 0; i < L->nfound; i++) {
            struct entity_row e;
            if (entity_get(L, L->found[i], &e) == 1)
                fprintf(stderr, " #%" PRId64 " (%s)", e.id,
                        orch_plan_domain(L->job->plan, e.domain)->name);
        }
        fprintf(stderr, "; give one as #ID\n");
        return ORCH_EXIT_FAIL;
    }
    *id = L->found[0];
    return ORCH_EXIT_OK;
}

int orch_cli_lineage(int argc, char **argv)
{
    const char *pos[2];
    int npos = 0, maxdepth = -1;
    bool opts = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (opts && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0))
            return fputs(lineage_help, stdout), ORCH_EXIT_OK;
        if (opts && strcmp(a, "--") == 0)
            opts = false;
        else if (opts && strcmp(a, "--depth") == 0) {
            uint64_t v;
            if (i + 1 >= argc || orch_count(argv[i + 1], 0, 1000000, &v) < 0)
                return orch_cli_usage_error("lineage: --depth needs a number from 0 to "
                                            "1000000");
            maxdepth = (int)v;
            i++;
        } else if (opts && a[0] == '-' && a[1])
            return orch_cli_usage_error("lineage: unknown option '%s' (a key that starts "
                                        "with '-' goes after --)",
                                        a);
        else if (npos < 2)
            pos[npos++] = a;
        else
            return orch_cli_usage_error("lineage: unexpected argument '%s'", a);
    }
    if (npos != 2)
        return orch_cli_usage_error("lineage: give a job directory and an entity (KEY or #ID)");
    struct orch_job *job;
    if (open_job(pos[0], &job) != ORCH_EXIT_OK)
        return ORCH_EXIT_FAIL;
    struct lineage L = {.job = job};
    int rc;
    if ((rc = prepare(job, "SELECT parent_id, domain_id, ordinal FROM entity WHERE id = ?",
                      &L.row, "lineage")) == 0 &&
        (rc = prepare(job,
                      "SELECT id, domain_id FROM entity WHERE key = ? AND"
                      " parent_id IS NULL ORDER BY domain_id, ordinal",
                      &L.root, "lineage")) == 0 &&
        (rc = prepare(job,
                      "SELECT id FROM entity WHERE parent_id = ? AND domain_id = ?"
                      " AND ordinal = ?",
                      &L.child, "lineage")) == 0)
        rc = prepare(job, "SELECT state FROM item WHERE port_id = ? AND entity_id = ?", &L.item,
                     "lineage");
    int status = ORCH_EXIT_OK;
    int64_t id = 0;
    if (rc == 0)
        status = lineage_resolve(&L, pos[1], &id, &rc);
    if (rc == 0 && status == ORCH_EXIT_OK)
        rc = lineage_print(&L, stdout, id, maxdepth);
    if (rc < 0)
        fprintf(stderr, "orch: lineage: %s\n", detail_or(rc));
    sqlite3_finalize(L.row);
    sqlite3_finalize(L.root);
    sqlite3_finalize(L.child);
    sqlite3_finalize(L.item);
    for (int i = 0; i < L.nkids; i++)
        sqlite3_finalize(L.kids[i]);
    free(L.kids);
    free(L.found);
    int code = finish("lineage", job, rc);
    return status != ORCH_EXIT_OK ? status : code;
}
