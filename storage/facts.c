/* facts.c — the typed SQL access to the job's facts (orch_facts.h): the statement table's
 * slots, and entities, items, expansions, failures, barriers, the plan's rows and the
 * payload ids; grains.c has the grains, attempts.c the attempts, roots.c the roots of
 * incremental jobs. */
#include "orch_facts.h"

#include <assert.h>
#include <limits.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "proc.h"
#include "facts_int.h"
#include "store_int.h"
#include "support.h"

#define FACT_SQL(slot, reads, writes, via, sql) sql,
static const char *const fact_sql[] = {FACT_STATEMENTS(FACT_SQL)};
#undef FACT_SQL
/* The held kinds each statement writes first: derived from what it declares (facts_int.h). */
#define FACT_NEED(slot, reads, writes, via, sql) HELD_KINDS_OF((reads) | (writes)) & ~(via),
static const unsigned short fact_need[] = {FACT_STATEMENTS(FACT_NEED)};
#undef FACT_NEED
_Static_assert(HELD_ALL <= USHRT_MAX, "fact_need holds every kind");

int orch_store__fact_declared(enum fact_slot slot, const char **sql, unsigned *parts,
                              unsigned *via)
{
#define FACT_PARTS(slot, reads, writes, via, sql) (reads) | (writes),
#define FACT_VIA(slot, reads, writes, via, sql) via,
    static const unsigned char all_parts[] = {FACT_STATEMENTS(FACT_PARTS)},
                               all_via[] = {FACT_STATEMENTS(FACT_VIA)};
#undef FACT_PARTS
#undef FACT_VIA
    if ((unsigned)slot >= F__COUNT)
        return 0;
    *sql = fact_sql[slot];
    *parts = all_parts[slot];
    *via = all_via[slot];
    return 1;
}

static int stmt_raw(orch_store *s, enum fact_slot slot, sqlite3_stmt **out, const char *fmt,
                    va_list ap);

int orch_store__prepare_as_is(orch_store *s, const char *sql, sqlite3_stmt **out)
{
    bool was = s->held.flushing;
    s->held.flushing = true;
    int rc = orch_store_prepare(s, sql, out);
    s->held.flushing = was;
    return rc;
}

int orch_store__stmt(orch_store *s, enum fact_slot slot, sqlite3_stmt **out, const char *fmt,
                     ...)
{
    *out = NULL;
    int rc = orch_store__held_before(&s->held, s, fact_need[slot]);
    if (rc < 0)
        return rc;
    va_list ap;
    va_start(ap, fmt);
    rc = stmt_raw(s, slot, out, fmt, ap);
    va_end(ap);
    return rc;
}

static int stmt_raw(orch_store *s, enum fact_slot slot, sqlite3_stmt **out, const char *fmt,
                    va_list ap)
{
    sqlite3_stmt *st = s->fact[slot];
    int rc;
    if (st) {
        sqlite3_reset(st);
    } else {
        if ((rc = orch_store__prepare_as_is(s, fact_sql[slot], &st)) < 0)
            return rc;
        s->fact[slot] = st;
    }
    assert(sqlite3_bind_parameter_count(st) == (int)strlen(fmt) && "bind every parameter");
    rc = SQLITE_OK;
    for (int i = 0; fmt[i] && rc == SQLITE_OK; i++) {
        switch (fmt[i]) {
        case 'i':
            rc = sqlite3_bind_int(st, i + 1, va_arg(ap, int));
            break;
        case 'l':
            rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
            break;
        case 'I': { /* an index where < 0 means none: NULL */
            int v = va_arg(ap, int);
            rc = v >= 0 ? sqlite3_bind_int(st, i + 1, v) : sqlite3_bind_null(st, i + 1);
            break;
        }
        case 'L': { /* an id where 0 means none: NULL */
            int64_t v = va_arg(ap, int64_t);
            rc = v ? sqlite3_bind_int64(st, i + 1, v) : sqlite3_bind_null(st, i + 1);
            break;
        }
        case 'N': { /* a count where < 0 means unknown: NULL */
            int64_t v = va_arg(ap, int64_t);
            rc = v >= 0 ? sqlite3_bind_int64(st, i + 1, v) : sqlite3_bind_null(st, i + 1);
            break;
        }
        case 't': {
            const char *v = va_arg(ap, const char *);
            rc = v ? sqlite3_bind_text(st, i + 1, v, -1, SQLITE_TRANSIENT)
                   : sqlite3_bind_null(st, i + 1);
            break;
        }
        case 's':
            rc = sqlite3_bind_text(st, i + 1, va_arg(ap, const char *), -1, SQLITE_STATIC);
            break;
        default:
            assert(!"unknown bind letter");
        }
    }
    if (rc != SQLITE_OK)
        return orch_store_error(s, rc, "bind");
    *out = st;
    return 0;
}

int orch_store__run(orch_store *s, sqlite3_stmt *st, bool *changed)
{
    assert(orch_store_in_txn(s) && "facts are written inside a transaction");
    int rc = orch_store_step(s, st);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    assert(rc == 0);
    if (changed)
        *changed = sqlite3_changes(s->db) > 0;
    return 0;
}

int orch_store__one(orch_store *s, sqlite3_stmt *st)
{
    int rc = orch_store_step(s, st);
    if (rc <= 0)
        sqlite3_reset(st);
    return rc;
}

int orch_store__corrupt_text(orch_store *s, const char *what)
{
    return orch_error_set(ORCH_ECORRUPT, "%s: unknown %s", s->path, what);
}

int orch_store__push(void *arr, size_t *n, size_t *cap, const void *v, size_t size)
{
    if (orch__grow_n(arr, cap, *n + 1, size) < 0)
        return orch_error_set(-ENOMEM, "out of memory");
    memcpy(*(char **)arr + *n * size, v, size);
    (*n)++;
    return 0;
}

/* ---- entities -------------------------------------------------------------------------- */

int orch_store_entity_put(orch_store *s, int domain, int64_t parent, int64_t ordinal,
                          const char *key, int64_t *id)
{
    assert(orch_store_in_txn(s));
    /* Held with its key (a child's made from its parent's, as the INSERT below makes it). */
    int rc = parent == 0 && !key ? 0 : orch_store__hold_entity(s, domain, parent, ordinal, key, id);
    if (rc != 0) {
        if (rc > 0 && parent != 0)
            orch_store__parent_keep(s, *id, parent);
        return rc < 0 ? rc : 0;
    }
    /* Not held: the held ones first (the statement writes entities), so that this
     * INSERT's id comes after theirs and a child finds its parent's key. */
    sqlite3_stmt *st;
    if ((rc = orch_store__stmt(s, F_ENTITY_PUT, &st, "iLlt", domain, parent, ordinal, key)) ==
            0 &&
        (rc = orch_store__run(s, st, NULL)) == 0) {
        *id = sqlite3_last_insert_rowid(s->db);
        orch_store__parent_keep(s, *id, parent);
    }
    s->held.next_entity = 0;
    return rc;
}

/* held.h. */
int orch_store__entity_key(orch_store *s, int64_t e, char **key)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ENTITY_KEY, &st, "l", e);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    *key = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_reset(st);
    return 1;
}

int orch_store_entity_parent(orch_store *s, int64_t e, int64_t *parent)
{
    const struct orch_held_parent *c = orch_store__parent_cached(s, e);
    if (c && !s->checks) {
        *parent = c->parent;
        return 0;
    }
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ENTITY_PARENT, &st, "l", e);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 0)
        return orch_error_set(ORCH_ECORRUPT, "%s: entity %lld does not exist", s->path,
                              (long long)e);
    *parent = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (c && c->parent != *parent)
        return orch_error_set(ORCH_ECORRUPT, "%s: entity %lld as kept has parent %lld, its "
                              "row %lld", s->path, (long long)e, (long long)c->parent,
                              (long long)*parent);
    orch_store__parent_keep(s, e, *parent);
    return 0;
}

int orch_store_children(orch_store *s, int64_t parent, int domain, int64_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    size_t cap = 0;
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_CHILDREN, &st, "li", parent, domain);
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        int64_t id = sqlite3_column_int64(st, 0);
        rc = orch_store__push(ids, n, &cap, &id, sizeof id);
    }
    if (rc >= 0)
        sqlite3_reset(st);
    if (rc < 0) {
        free(*ids);
        *ids = NULL;
        *n = 0;
        return rc;
    }
    return 0;
}

int orch_store_children_page(orch_store *s, int64_t parent, int domain, int64_t after,
                             size_t max, int64_t *ids, size_t *n, int64_t *last)
{
    *n = 0;
    sqlite3_stmt *st;
    int rc =
        orch_store__stmt(s, F_CHILDREN_AFTER, &st, "lill", parent, domain, after, (int64_t)max);
    while (rc == 0 && *n < max && (rc = orch_store_step(s, st)) == 1) {
        ids[(*n)++] = sqlite3_column_int64(st, 0);
        *last = sqlite3_column_int64(st, 1);
        rc = 0;
    }
    if (rc >= 0)
        sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

int orch_store_children_count(orch_store *s, int64_t parent, int domain, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_CHILDREN_COUNT, &st, "li", parent, domain);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *n = rc == 1 ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return 0;
}

int orch_store_expansion_size(orch_store *s, int call, int64_t parent,
                              enum orch_expansion_state *state, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_EXPANSION_CHILDREN, &st, "il", call, parent);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    int v = orch_expansion_state_parse((const char *)sqlite3_column_text(st, 0));
    *n = sqlite3_column_int64(st, 1);
    sqlite3_reset(st);
    if (v < 0)
        return orch_store__corrupt_text(s, "expansion state");
    *state = (enum orch_expansion_state)v;
    return 1;
}

/* Held in this transaction ("reclaimed ids", held_flight.c: every id not written yet is), or in
 * a span. */
int orch_store_payload_reclaimed(orch_store *s, uint64_t payload, bool *reclaimed)
{
    sqlite3_stmt *st;
    *reclaimed = orch_store__gmap_has(&s->held.recl, (int64_t)payload);
    if (*reclaimed)
        return 0;
    int rc = orch_store__stmt(s, F_PAYLOAD_RECLAIMED, &st, "l", (int64_t)payload);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 1) {
        *reclaimed = sqlite3_column_int(st, 0) != 0;
        sqlite3_reset(st);
    }
    return 0;
}

/* ---- items ----------------------------------------------------------------------------- */

int orch_store_item_get(orch_store *s, int port, int64_t e, enum orch_item_state *state,
                        uint64_t *payload)
{
    const struct orch_held_icached *c = orch_store__item_cached(s, port, e);
    if (c && !s->checks) {
        *state = (enum orch_item_state)c->state;
        if (payload)
            *payload = c->payload;
        return 1;
    }
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ITEM_GET, &st, "il", port, e);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 0)
        return c ? orch_error_set(ORCH_ECORRUPT, "%s: item %d of entity %lld as kept has no "
                                  "row", s->path, port, (long long)e)
                 : 0;
    int v = orch_item_state_parse((const char *)sqlite3_column_text(st, 0));
    uint64_t id = (uint64_t)sqlite3_column_int64(st, 1);
    sqlite3_reset(st);
    if (v < 0)
        return orch_store__corrupt_text(s, "item state");
    if (c && (c->state != v || c->payload != id))
        return orch_error_set(ORCH_ECORRUPT, "%s: item %d of entity %lld as kept is not its row",
                              s->path, port, (long long)e);
    orch_store__item_keep(s, port, e, v, id);
    *state = (enum orch_item_state)v;
    if (payload)
        *payload = id;
    return 1;
}

int orch_store_item_put(orch_store *s, int port, int64_t e, enum orch_item_state state,
                        uint64_t payload, int64_t size)
{
    assert(orch_store_in_txn(s));
    /* Only a Present item names a payload (0 binds NULL: ids are never 0), and has a size. */
    bool present = state == ORCH_ITEM_PRESENT;
    struct orch_held_item it = {.entity = e,
                                .payload = present ? (int64_t)payload : 0,
                                .size = present ? size : -1,
                                .port = port,
                                .state = (int)state};
    int rc = orch_store__hold_item(s, &it);
    if (rc == 0) { /* not held: written now */
        sqlite3_stmt *st;
        if ((rc = orch_store__stmt(s, F_ITEM_PUT, &st, "ilsLN", port, e,
                                   orch_item_state_name(state), it.payload, it.size)) == 0)
            rc = orch_store__run(s, st, NULL);
    }
    if (rc < 0)
        return rc;
    orch_store__item_keep(s, port, e, (int)state, (uint64_t)it.payload);
    /* The commit raises job.payload_mark to it (orch_store__payload_mark_raise). */
    if (state == ORCH_ITEM_PRESENT && payload > s->payload_named)
        s->payload_named = payload;
    return 0;
}

int orch_store_item_take_back(orch_store *s, int port, int64_t e, bool *taken)
{
    *taken = false; /* also when a statement fails: callers read it */
    orch_store__item_drop(s, port, e);
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ITEM_TAKE_BACK, &st, "ilss", port, e,
                              orch_item_state_name(ORCH_ITEM_FAILED),
                              orch_item_state_name(ORCH_ITEM_SUPPRESSED));
    return rc < 0 ? rc : orch_store__run(s, st, taken);
}

int orch_store_child_items(orch_store *s, int port, int64_t parent, int child,
                           int64_t *terminal, int64_t *bad)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_CHILD_ITEMS, &st, "iliss", port, parent, child,
                              orch_item_state_name(ORCH_ITEM_FAILED),
                              orch_item_state_name(ORCH_ITEM_SUPPRESSED));
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *terminal = rc == 1 ? sqlite3_column_int64(st, 0) : 0;
    *bad = rc == 1 ? sqlite3_column_int64(st, 1) : 0;
    sqlite3_reset(st);
    return 0;
}

int orch_store_child_item_list(orch_store *s, int port, int64_t parent, int child,
                               struct orch_child_item **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_CHILD_ITEM_LIST, &st, "ili", port, parent, child);
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        struct orch_child_item c = {.entity = sqlite3_column_int64(st, 0), .state = -1};
        if (sqlite3_column_type(st, 1) != SQLITE_NULL &&
            (c.state = orch_item_state_parse((const char *)sqlite3_column_text(st, 1))) < 0)
            rc = orch_store__corrupt_text(s, "item state");
        else {
            c.payload = (uint64_t)sqlite3_column_int64(st, 2);
            rc = orch_store__push(out, n, &cap, &c, sizeof c);
        }
    }
    if (rc >= 0)
        sqlite3_reset(st);
    if (rc < 0) {
        free(*out);
        *out = NULL;
        *n = 0;
        return rc;
    }
    return 0;
}

int orch_store_item_counts(orch_store *s,
                           void (*fn)(void *ctx, int port, enum orch_item_state st, int64_t n),
                           void *ctx)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ITEM_COUNTS, &st, "");
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        int state = orch_item_state_parse((const char *)sqlite3_column_text(st, 1));
        if (state < 0) {
            sqlite3_reset(st);
            return orch_store__corrupt_text(s, "item state");
        }
        fn(ctx, sqlite3_column_int(st, 0), (enum orch_item_state)state,
           sqlite3_column_int64(st, 2));
        rc = 0;
    }
    if (rc >= 0)
        sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

/* ---- expansions ------------------------------------------------------------------------ */

int orch_store_expansion_put(orch_store *s, int call, int64_t parent,
                             enum orch_expansion_state state, int64_t nchildren)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_EXPANSION_PUT, &st, "ilsl", call, parent,
                              orch_expansion_state_name(state), nchildren);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_expansion_get(orch_store *s, int call, int64_t parent,
                             enum orch_expansion_state *state)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_EXPANSION_GET, &st, "il", call, parent);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    int v = orch_expansion_state_parse((const char *)sqlite3_column_text(st, 0));
    sqlite3_reset(st);
    if (v < 0)
        return orch_store__corrupt_text(s, "expansion state");
    *state = (enum orch_expansion_state)v;
    return 1;
}

int orch_store_expansion_take_back(orch_store *s, int call, int64_t parent)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_EXPANSION_TAKE_BACK, &st, "ils", call, parent,
                              orch_expansion_state_name(ORCH_EXPANSION_FAILED));
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

/* ---- open expansions ------------------------------------------------------------------ */

int orch_store_expansion_open_get(orch_store *s, int call, int64_t parent, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_OPEN_GET, &st, "il", call, parent);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    *n = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return 1;
}

int orch_store_expansion_open_put(orch_store *s, int call, int64_t parent, int64_t n)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_OPEN_PUT, &st, "illl", call, parent, n, orch_clock_wall_ms());
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_expansion_open_close(orch_store *s, int call, int64_t parent)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_OPEN_CLOSE, &st, "il", call, parent);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_child_hash_put(orch_store *s, int64_t e, uint64_t hash)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_CHILD_HASH_PUT, &st, "ll", e, (int64_t)hash);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_child_hash_at(orch_store *s, int64_t parent, int d, int64_t ordinal,
                             uint64_t *hash)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_CHILD_HASH_AT, &st, "lil", parent, d, ordinal);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    *hash = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return 1;
}

/* ---- failures, barriers -------------------------------------------------------------- */

int orch_store_failure_put(orch_store *s, int64_t grain, uint32_t generation,
                           enum orch_failure_kind kind, const char *message, int64_t child)
{
    sqlite3_stmt *st;
    int rc =
        orch_store__stmt(s, F_FAILURE_PUT, &st, "lstllL", grain, orch_failure_kind_name(kind),
                         message ? message : "", (int64_t)generation, orch_clock_wall_ms(), child);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_barrier_put(orch_store *s, int call, int64_t parent, int64_t grain)
{
    sqlite3_stmt *st;
    s->barriers = BARRIERS_SOME;
    int rc = orch_store__stmt(s, F_BARRIER_PUT, &st, "illl", call, parent, grain, orch_clock_wall_ms());
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

/* Asked once per report of a child: answered without a look-up while the transaction
 * knows that there is no barrier at all (s->barriers). */
int orch_store_barrier_covers(orch_store *s, int call, int64_t parent, bool *covered)
{
    sqlite3_stmt *st;
    int rc;
    *covered = false;
    if (s->in_txn && s->barriers == BARRIERS_UNKNOWN) {
        if ((rc = orch_store__stmt(s, F_BARRIERS_ANY, &st, "")) < 0 ||
            (rc = orch_store__one(s, st)) < 0)
            return rc;
        s->barriers = rc == 1 && sqlite3_column_int(st, 0) ? BARRIERS_SOME : BARRIERS_NONE;
        sqlite3_reset(st);
    }
    if (s->in_txn && s->barriers == BARRIERS_NONE)
        return 0;
    rc = orch_store__stmt(s, F_BARRIER_COVERS, &st, "il", call, parent);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *covered = rc == 1;
    sqlite3_reset(st);
    return 0;
}

int orch_store_barrier_take_back(orch_store *s, int64_t grain, bool *taken)
{
    *taken = false; /* also when a statement fails: callers read it */
    s->barriers = BARRIERS_UNKNOWN;
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_BARRIER_TAKE_BACK, &st, "l", grain);
    return rc < 0 ? rc : orch_store__run(s, st, taken);
}

/* ---- the plan's rows ------------------------------------------------------------------- */

int orch_store_plan_domain_put(orch_store *s, int id, const char *name, int parent, int depth)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_PLAN_DOMAIN, &st, "itIi", id, name, parent, depth);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_plan_call_put(orch_store *s, int id, const char *name, const char *op,
                             const char *function, int domain, int target)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_PLAN_CALL, &st, "itttII", id, name, op, function,
                              op ? domain : -1, op ? target : -1);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_plan_port_put(orch_store *s, int id, int domain, const char *name,
                             const char *qualified, int producer_call, bool output)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_PLAN_PORT, &st, "iittIi", id, domain, name, qualified,
                              producer_call, output ? 1 : 0);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

/* ---- payload ids named by items -------------------------------------------------------- */

/* The ids that items name, in order, merged with the spans of reclaimed ids, in order:
 * one pass over each, where a look-up of the spans per id cost twice as much. */
int orch_store_named_payloads_open(orch_store *s, struct orch_store_cursor *c)
{
    *c = (struct orch_store_cursor){.s = s};
    int rc = orch_store__stmt(s, F_SPANS, &c->spans, "");
    return rc < 0 ? rc : orch_store__stmt(s, F_NAMED_PAYLOADS, &c->st, "");
}

int orch_store_cursor_next_id(struct orch_store_cursor *c, uint64_t *id)
{
    for (;;) {
        int rc = orch_store_step(c->s, c->st);
        if (rc != 1)
            return rc;
        int64_t v = sqlite3_column_int64(c->st, 0);
        while (!c->spans_done && c->last < v) { /* the next span that may cover v */
            if ((rc = orch_store_step(c->s, c->spans)) < 0)
                return rc;
            c->spans_done = rc == 0;
            if (rc == 1) {
                c->first = sqlite3_column_int64(c->spans, 0);
                c->last = sqlite3_column_int64(c->spans, 1);
            }
        }
        if (c->spans_done || v < c->first) {
            *id = (uint64_t)v;
            return 1;
        }
    }
}

void orch_store_cursor_close(struct orch_store_cursor *c)
{
    if (c->st)
        sqlite3_reset(c->st);
    if (c->spans)
        sqlite3_reset(c->spans);
    c->st = c->spans = NULL;
}

int orch_store_set_max_pages(orch_store *s, int64_t pages)
{
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", (long long)pages);
    return orch_store_exec(s, sql);
}

/* Twice per run: prepared through the store's cache by text, not a slot of the hot path. */
static int job_stop_write(orch_store *s, const char *kind, const char *message, int64_t at)
{
    assert(orch_store_in_txn(s) && "facts are written inside a transaction");
    sqlite3_stmt *st;
    int rc = orch_store_prepare(s,
                                "UPDATE job SET stop_kind = ?1, stop_message = ?2, stop_at = ?3"
                                " WHERE id = 1",
                                &st);
    if (rc < 0)
        return rc;
    rc = kind ? sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC) : SQLITE_OK;
    if (rc == SQLITE_OK && message)
        rc = sqlite3_bind_text(st, 2, message, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK && kind)
        rc = sqlite3_bind_int64(st, 3, at);
    if (rc != SQLITE_OK) {
        sqlite3_clear_bindings(st);
        return orch_store_error(s, rc, "bind");
    }
    rc = orch_store_step(s, st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc < 0)
        return rc;
    if (sqlite3_changes(s->db) == 0)
        return orch_error_set(ORCH_ENOTFOUND, "%s: no job row", s->path);
    return 0;
}

int orch_store_job_stop_put(orch_store *s, enum orch_job_stop kind, const char *message)
{
    const char *name = orch_job_stop_name(kind);
    assert(name != NULL);
    return job_stop_write(s, name, message, orch_clock_wall_ms());
}

int orch_store_job_stop_clear(orch_store *s)
{
    return job_stop_write(s, NULL, NULL, 0);
}

/* ---- the payload id high-water mark (job.payload_mark: migrations/0007_payload_mark.sql) - */

int orch_store__payload_mark_raise(orch_store *s)
{
    assert(orch_store_in_txn(s));
    if (s->payload_named <= s->payload_mark)
        return 0;
    /* Once per commit, through the cache by text: no slot of the per-grain path. The guard
     * keeps the mark from going down when this process's idea of it is behind the row's
     * (a store opened without reading it: payload_mark starts at 0). */
    sqlite3_stmt *st;
    int rc = orch_store_prepare(s,
                                "UPDATE job SET payload_mark = ?1 WHERE id = 1 AND "
                                "payload_mark < ?1",
                                &st);
    if (rc < 0)
        return rc;
    if ((rc = sqlite3_bind_int64(st, 1, (int64_t)s->payload_named)) != SQLITE_OK)
        return orch_store_error(s, rc, "bind");
    return orch_store__run(s, st, NULL);
}

int orch_store_payload_mark(orch_store *s, uint64_t *mark)
{
    sqlite3_stmt *st;
    int rc = orch_store_prepare(s, "SELECT payload_mark FROM job WHERE id = 1", &st);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 0)
        return orch_error_set(ORCH_ENOTFOUND, "%s: no job row", s->path);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (v < 0)
        return orch_error_set(ORCH_ECORRUPT, "%s: job.payload_mark is negative", s->path);
    *mark = (uint64_t)v;
    return 0;
}

int orch_store_reclaimed_port(orch_store *s, int port, int64_t *added)
{
    *added = 0;
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_RECLAIMED_PORT, &st, "i", port);
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        bool one_added;
        rc = orch_store_reclaimed_put(s, (uint64_t)sqlite3_column_int64(st, 0), &one_added);
        *added += one_added;
    }
    if (rc >= 0)
        sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

int orch_store_reclaimed_count(orch_store *s, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_SPANS_COUNT, &st, "");
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *n = rc == 1 ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return 0;
}
