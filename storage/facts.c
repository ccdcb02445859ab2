/* facts.c — the job's facts: entities, items, expansions, grains, attempts (orch_facts.h). */
#include "orch_facts.h"

#include <assert.h>
#include <limits.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "orch_error.h"
#include "facts_int.h"
#include "store_int.h"
#include "support.h"

#define FACT_SQL(slot, reads, writes, via, sql) sql,
static const char *const fact_sql[] = {FACT_STATEMENTS(FACT_SQL)};
#undef FACT_SQL
/* The held kinds each statement writes first: derived from what it declares (facts_int.h). */
#define FACT_NEED(slot, reads, writes, via, sql) HELD_KINDS_OF((reads) | (writes)) & ~(via),
static const unsigned char fact_need[] = {FACT_STATEMENTS(FACT_NEED)};
#undef FACT_NEED
_Static_assert(HELD_ALL <= UCHAR_MAX, "fact_need holds every kind");

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t orch_store__now_ms(void)
{
    return now_ms();
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

static int corrupt_text(orch_store *s, const char *what)
{
    return orch_error_set(ORCH_ECORRUPT, "%s: unknown %s", s->path, what);
}

/* Appends v (`size` bytes) to the malloc'd array *arr of *n elements. */
static int push(void *arr, size_t *n, size_t *cap, const void *v, size_t size)
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
    /* A root entity with its key is held; a child's key is made by the INSERT. */
    int rc = parent == 0 && key ? orch_store__hold_entity(s, domain, ordinal, key, id) : 0;
    if (rc != 0)
        return rc < 0 ? rc : 0;
    /* Not held: the held ones first (the statement writes entities), so that this
     * INSERT's id comes after theirs and a child finds its parent's key. */
    sqlite3_stmt *st;
    if ((rc = orch_store__stmt(s, F_ENTITY_PUT, &st, "iLlt", domain, parent, ordinal, key)) == 0 &&
        (rc = orch_store__run(s, st, NULL)) == 0)
        *id = sqlite3_last_insert_rowid(s->db);
    s->held.next_entity = 0;
    return rc;
}

int orch_store_entity_parent(orch_store *s, int64_t e, int64_t *parent)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ENTITY_PARENT, &st, "l", e);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 0)
        return orch_error_set(ORCH_ECORRUPT, "%s: entity %lld does not exist", s->path,
                              (long long)e);
    *parent = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
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
        rc = push(ids, n, &cap, &id, sizeof id);
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

int orch_store_grain_outcome(orch_store *s, int call, int64_t e, enum orch_grain_outcome *o)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_OUTCOME, &st, "il", call, e);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    const char *t = (const char *)sqlite3_column_text(st, 0);
    rc = t ? 1 : 0;
    if (t) {
        int v = orch_grain_outcome_parse(t);
        if (v < 0)
            rc = corrupt_text(s, "grain outcome");
        else
            *o = (enum orch_grain_outcome)v;
    }
    sqlite3_reset(st);
    return rc;
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
        return corrupt_text(s, "expansion state");
    *state = (enum orch_expansion_state)v;
    return 1;
}

/* Held in this transaction ("reclaimed ids": every id not written yet is), or in a span. */
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
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ITEM_GET, &st, "il", port, e);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    int v = orch_item_state_parse((const char *)sqlite3_column_text(st, 0));
    if (payload)
        *payload = (uint64_t)sqlite3_column_int64(st, 1);
    sqlite3_reset(st);
    if (v < 0)
        return corrupt_text(s, "item state");
    *state = (enum orch_item_state)v;
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
    /* The commit raises job.payload_mark to it (orch_store__payload_mark_raise). */
    if (state == ORCH_ITEM_PRESENT && payload > s->payload_named)
        s->payload_named = payload;
    return 0;
}

int orch_store_item_take_back(orch_store *s, int port, int64_t e, bool *taken)
{
    *taken = false; /* also when a statement fails: callers read it */
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
    int rc = orch_store__stmt(s, F_CHILD_ITEMS, &st, "iliss", port, parent,
                  child, orch_item_state_name(ORCH_ITEM_FAILED),
                  orch_item_state_name(ORCH_ITEM_SUPPRESSED));
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *terminal = rc == 1 ? sqlite3_column_int64(st, 0) : 0;
    *bad = rc == 1 ? sqlite3_column_int64(st, 1) : 0;
    sqlite3_reset(st);
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
            return corrupt_text(s, "item state");
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
        return corrupt_text(s, "expansion state");
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

/* ---- grains ---------------------------------------------------------------------------- */

int orch_store_grain_create(orch_store *s, int call, int64_t e, int64_t parent, int64_t pending)
{
    assert(orch_store_in_txn(s));
    int rc = orch_store__hold_grain(s, call, e, parent, pending);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    /* Not held: the held ones first (the statement writes grains), so that this INSERT's
     * id comes after theirs. */
    sqlite3_stmt *st;
    if ((rc = orch_store__stmt(s, F_GRAIN_CREATE, &st, "ilsl", call, e,
                   orch_grain_phase_name(ORCH_PHASE_WAITING), pending)) < 0 ||
        (rc = orch_store__run(s, st, NULL)) < 0)
        return rc;
    s->held.next_grain = 0;
    orch_store__waiting_put(s, &(struct orch_held_waiting){.entity = e,
                                             .id = sqlite3_last_insert_rowid(s->db),
                                             .parent = parent,
                                             .pending = pending,
                                             .call = call});
    return 0;
}

/* Reads the columns of GRAIN_GET / GRAIN_BY_ID into g. */
static int grain_read(orch_store *s, sqlite3_stmt *st, struct orch_grain_row *g)
{
    g->id = sqlite3_column_int64(st, 0);
    g->call = sqlite3_column_int(st, 1);
    g->entity = sqlite3_column_int64(st, 2);
    g->parent = sqlite3_column_int64(st, 3);
    int phase = orch_grain_phase_parse((const char *)sqlite3_column_text(st, 4));
    g->outcome = sqlite3_column_type(st, 5) == SQLITE_NULL
                     ? -1
                     : orch_grain_outcome_parse((const char *)sqlite3_column_text(st, 5));
    g->pending = sqlite3_column_int64(st, 6);
    g->generation = (uint32_t)sqlite3_column_int64(st, 7);
    g->seq = sqlite3_column_int64(st, 8);
    g->attempts = 0;
    bool bad = phase < 0 || (sqlite3_column_type(st, 5) != SQLITE_NULL && g->outcome < 0);
    sqlite3_reset(st);
    if (bad)
        return corrupt_text(s, "grain phase or outcome");
    g->phase = (enum orch_grain_phase)phase;
    const struct orch_held_ready *r;
    if (g->phase == ORCH_PHASE_WAITING && (r = orch_store__held_ready(s, g->id)) != NULL) {
        g->phase = ORCH_PHASE_READY; /* as it will be written */
        g->pending = 0;
        g->seq = r->seq;
    }
    return 0;
}

static int grain_get_row(orch_store *s, int call, int64_t e, bool root,
                         struct orch_grain_row *g);

int orch_store_grain_get(orch_store *s, int call, int64_t e, bool root,
                         struct orch_grain_row *g)
{
    const struct orch_held_waiting *w = orch_store__waiting_find(s, call, e);
    if (!w)
        return grain_get_row(s, call, e, root, g);
    *g = (struct orch_grain_row){.id = w->id,
                                 .call = call,
                                 .entity = e,
                                 .parent = w->parent,
                                 .phase = ORCH_PHASE_WAITING,
                                 .outcome = -1,
                                 .pending = w->pending};
    if (!s->checks || orch_store__held_grain(s, w->id))
        return 0; /* (a held grain has no row to compare with: the test would write it) */
    struct orch_grain_row r;
    int rc = grain_get_row(s, call, e, root, &r);
    if (rc == 0 && (r.id != g->id || r.parent != g->parent || r.phase != g->phase ||
                    r.pending != g->pending || r.generation != 0 || r.outcome != -1))
        rc = orch_error_set(ORCH_ECORRUPT,
                            "%s: grain %lld as kept (parent %lld, pending %lld) is not its "
                            "row (grain %lld, parent %lld, phase %d, pending %lld)",
                            s->path, (long long)g->id, (long long)g->parent,
                            (long long)g->pending, (long long)r.id, (long long)r.parent,
                            (int)r.phase, (long long)r.pending);
    return rc;
}

static int grain_get_row(orch_store *s, int call, int64_t e, bool root,
                         struct orch_grain_row *g)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, root ? F_GRAIN_GET_ROOT : F_GRAIN_GET, &st, "il", call, e);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 0)
        return orch_error_set(ORCH_ECORRUPT, "%s: grain of call %d on entity %lld does not exist",
                              s->path, call, (long long)e);
    return grain_read(s, st, g);
}

int orch_store_grain_by_id(orch_store *s, int64_t id, struct orch_grain_row *g)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_BY_ID, &st, "l", id);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 0)
        return orch_error_set(ORCH_ECORRUPT, "%s: grain %lld does not exist", s->path,
                              (long long)id);
    return grain_read(s, st, g);
}

int orch_store_grain_set_pending(orch_store *s, const struct orch_grain_row *g,
                                 int64_t pending)
{
    struct orch_held_grain *c = orch_store__held_grain(s, g->id);
    if (c) {
        c->pending = pending;
    } else {
        sqlite3_stmt *st;
        int rc = orch_store__stmt(s, F_GRAIN_SET_PENDING, &st, "ll", pending, g->id);
        if (rc < 0 || (rc = orch_store__run(s, st, NULL)) < 0)
            return rc;
    }
    struct orch_held_waiting *w = orch_store__waiting_find(s, g->call, g->entity);
    if (w)
        w->pending = pending;
    return 0;
}

int orch_store_grain_ready(orch_store *s, const struct orch_grain_row *g, int64_t seq)
{
    assert(orch_store_in_txn(s));
    orch_store__waiting_drop(s, g->call, g->entity);
    int64_t grain = g->id;
    int64_t at = now_ms();
    struct orch_held_grain *c = orch_store__held_grain(s, grain);
    if (c) { /* not written yet: it will be, READY */
        c->seq = seq;
        c->at = at;
        return 0;
    }
    int rc = orch_store__hold_ready(s, grain, seq, at);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    sqlite3_stmt *st; /* not held: written now */
    rc = orch_store__stmt(s, F_GRAIN_READY, &st, "llsls", grain, seq,
                          orch_grain_phase_name(ORCH_PHASE_READY), at,
                          orch_grain_phase_name(ORCH_PHASE_WAITING));
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_grain_interrupt(orch_store *s, int64_t grain, uint32_t generation)
{
    struct orch_held_gent f = {0, -1, -1};
    orch_store__gmap_take(&s->held.flying, grain, &f);
    orch_store__gmap_take(&s->held.inflight, grain, NULL);
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_INTERRUPT, &st, "llNsls", grain, (int64_t)generation, f.seq,
                  orch_grain_phase_name(ORCH_PHASE_READY), now_ms(),
                  orch_grain_phase_name(ORCH_PHASE_SEALED));
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_grain_requeue(orch_store *s, int64_t grain, uint32_t generation, int64_t seq,
                             bool *done)
{
    *done = false; /* also when a statement fails: callers read it */
    orch_store__gmap_take(&s->held.flying, grain, NULL); /* the new ready_seq replaces the one kept */
    orch_store__gmap_take(&s->held.inflight, grain, NULL);
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_REQUEUE, &st, "lllssl", grain, (int64_t)generation, seq,
                  orch_grain_phase_name(ORCH_PHASE_SEALED),
                  orch_grain_phase_name(ORCH_PHASE_READY), now_ms());
    return rc < 0 ? rc : orch_store__run(s, st, done);
}

/* Whether unrun grain (call, e) is READY, so in a queue (a grain kept as waiting is not;
 * a held READY reads READY). */
static int unrun_queued(orch_store *s, int64_t grain, int call, int64_t e, bool *queued)
{
    const struct orch_held_grain *c = orch_store__held_grain(s, grain);
    struct orch_grain_row g = {.phase = ORCH_PHASE_WAITING};
    int rc = c || orch_store__waiting_find(s, call, e) ? 0 : orch_store_grain_by_id(s, grain, &g);
    *queued = c ? c->seq != 0 : g.phase == ORCH_PHASE_READY;
    return rc;
}


int orch_store_grain_seal(orch_store *s, int64_t grain, int call, int64_t e,
                          enum orch_grain_outcome o, bool in_flight, uint32_t generation,
                          bool *done)
{
    *done = false; /* also when a statement fails: callers read it */
    if (in_flight)
        return orch_store__seal_in_flight(s, grain, o, generation, done);
    bool queued;
    sqlite3_stmt *st;
    orch_store__gmap_take(&s->held.inflight, grain, NULL); /* the table decides, as for any unrun grain */
    int rc = unrun_queued(s, grain, call, e, &queued);
    /* Sealed before its READY was written: the READY never will be; the seal writes its
     * ready_seq and ready_at. */
    struct orch_held_ready *r = orch_store__held_ready(s, grain);
    if (rc == 0)
        rc = orch_store__stmt(s, F_GRAIN_SEAL_UNRUN, &st, "lssssNN", grain,
                              orch_grain_outcome_name(o),
                              orch_grain_phase_name(ORCH_PHASE_WAITING),
                              orch_grain_phase_name(ORCH_PHASE_READY),
                              orch_grain_phase_name(ORCH_PHASE_SEALED), r ? r->seq : -1,
                              r ? r->at : -1);
    if (rc == 0 && (rc = orch_store__run(s, st, done)) == 0 && *done) {
        orch_store__waiting_drop(s, call, e);
        if (r)
            r->live = false;
        if (queued) /* its queue entry is stale now */
            rc = orch_store__gmap_put(&s->held.unq, grain, 0, 0);
    }
    return rc;
}

int orch_store_grain_reopen(orch_store *s, int64_t grain, bool *done)
{
    *done = false; /* also when a statement fails: callers read it */
    sqlite3_stmt *st;
    orch_store__gmap_take(&s->held.inflight, grain, NULL);
    int rc = orch_store__stmt(s, F_GRAIN_REOPEN, &st, "lss", grain, orch_grain_phase_name(ORCH_PHASE_WAITING),
                  orch_grain_phase_name(ORCH_PHASE_SEALED));
    return rc < 0 ? rc : orch_store__run(s, st, done);
}

/* Collects the rows of a query into a malloc'd array: columns id, call, entity, parent,
 * generation (ncol 5) or id, entity (ncol 2). */
static int collect(orch_store *s, sqlite3_stmt *st, int ncol, struct orch_grain_row **rows,
                   size_t *n)
{
    *rows = NULL;
    *n = 0;
    size_t cap = 0;
    int rc;
    while ((rc = orch_store_step(s, st)) == 1) {
        struct orch_grain_row g = {.id = sqlite3_column_int64(st, 0), .outcome = -1};
        if (ncol == 2) {
            g.entity = sqlite3_column_int64(st, 1);
        } else {
            g.call = sqlite3_column_int(st, 1);
            g.entity = sqlite3_column_int64(st, 2);
            g.parent = sqlite3_column_int64(st, 3);
            g.generation = (uint32_t)sqlite3_column_int64(st, 4);
        }
        if ((rc = push(rows, n, &cap, &g, sizeof g)) < 0)
            break;
    }
    if (rc >= 0 || rc == -ENOMEM)
        sqlite3_reset(st);
    if (rc < 0) {
        free(*rows);
        *rows = NULL;
        *n = 0;
        return rc;
    }
    return 0;
}

int orch_store_grains_failed(orch_store *s, int call, struct orch_grain_row **rows, size_t *n)
{
    sqlite3_stmt *st;
    *rows = NULL;
    *n = 0;
    int rc = orch_store__stmt(s, F_GRAINS_FAILED, &st, "is", call,
                  orch_grain_outcome_name(ORCH_OUTCOME_FAILED));
    return rc < 0 ? rc : collect(s, st, 5, rows, n);
}

int orch_store_grains_unrun(orch_store *s, int call, int64_t parent,
                            struct orch_grain_row **rows, size_t *n)
{
    sqlite3_stmt *st;
    *rows = NULL;
    *n = 0;
    int rc = orch_store__stmt(s, F_GRAINS_UNRUN, &st, "liss", parent, call,
                  orch_grain_phase_name(ORCH_PHASE_WAITING),
                  orch_grain_phase_name(ORCH_PHASE_READY));
    return rc < 0 ? rc : collect(s, st, 2, rows, n);
}

/* ---- recovery -------------------------------------------------------------------------- */

int orch_store_grains_barred_in_flight(orch_store *s, struct orch_grain_row **rows, size_t *n)
{
    sqlite3_stmt *st;
    *rows = NULL;
    *n = 0;
    int rc = orch_store__stmt(s, F_GRAINS_BARRED, &st, "s", orch_grain_phase_name(ORCH_PHASE_SEALED));
    return rc < 0 ? rc : collect(s, st, 5, rows, n);
}

int orch_store_grains_interrupt(orch_store *s)
{
    orch_store__gmap_clear(&s->held.inflight); /* every grain in flight goes back */
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAINS_INTERRUPT, &st, "ssls", orch_grain_phase_name(ORCH_PHASE_READY),
                  orch_grain_phase_name(ORCH_PHASE_IN_FLIGHT), now_ms(),
                  orch_grain_phase_name(ORCH_PHASE_SEALED));
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_grains_unsealed(orch_store *s, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAINS_UNSEALED, &st, "s", orch_grain_phase_name(ORCH_PHASE_SEALED));
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *n = rc == 1 ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return 0;
}

int orch_store_grains_sealed_counts(orch_store *s,
                                    void (*fn)(void *ctx, int call, enum orch_grain_outcome o,
                                               int64_t n),
                                    void *ctx)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAINS_SEALED_COUNTS, &st, "s", orch_grain_phase_name(ORCH_PHASE_SEALED));
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        int o = orch_grain_outcome_parse((const char *)sqlite3_column_text(st, 1));
        if (o < 0) {
            sqlite3_reset(st);
            return corrupt_text(s, "grain outcome");
        }
        fn(ctx, sqlite3_column_int(st, 0), (enum orch_grain_outcome)o,
           sqlite3_column_int64(st, 2));
        rc = 0;
    }
    if (rc >= 0)
        sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

int orch_store_grains_ready(orch_store *s,
                            int (*fn)(void *ctx, const struct orch_grain_row *g), void *ctx)
{
    sqlite3_stmt *st;
    /* One pass over the table (0018: its index leads with the entity, so a query per call
     * would scan it once per call); the READY grains, bounded by admission, are sorted. */
    int rc = orch_store__stmt(s, F_GRAINS_READY, &st, "sssssss", orch_grain_phase_name(ORCH_PHASE_READY),
                  orch_failure_kind_name(ORCH_FAILURE_ERROR),
                  orch_failure_kind_name(ORCH_FAILURE_CRASH),
                  orch_failure_kind_name(ORCH_FAILURE_TIMEOUT),
                  orch_failure_kind_name(ORCH_FAILURE_RECORD),
                  orch_failure_kind_name(ORCH_FAILURE_GROUP),
                  orch_failure_kind_name(ORCH_FAILURE_EXHAUSTED));
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        struct orch_grain_row g = {.id = sqlite3_column_int64(st, 0),
                                   .call = (int)sqlite3_column_int64(st, 6),
                                   .entity = sqlite3_column_int64(st, 1),
                                   .parent = sqlite3_column_int64(st, 2),
                                   .phase = ORCH_PHASE_READY,
                                   .outcome = -1,
                                   .generation = (uint32_t)sqlite3_column_int64(st, 3),
                                   .seq = sqlite3_column_int64(st, 4),
                                   .attempts = (uint32_t)sqlite3_column_int64(st, 5)};
        rc = fn(ctx, &g);
    }
    if (rc >= 0)
        sqlite3_reset(st);
    return rc;
}

int orch_store_counters_get(orch_store *s, int64_t *seq, int64_t *live_bytes)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_COUNTERS_GET, &st, "");
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    if (rc == 0)
        return orch_error_set(ORCH_ENOTFOUND, "%s: the job row is missing", s->path);
    *seq = sqlite3_column_int64(st, 0);
    *live_bytes = sqlite3_column_int64(st, 1);
    sqlite3_reset(st);
    return 0;
}

int orch_store_counters_set(orch_store *s, int64_t seq, int64_t live_bytes)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_COUNTERS_SET, &st, "ll", seq, live_bytes);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_budgets_set(orch_store *s, int64_t max_unsealed, int64_t max_live_bytes)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_BUDGETS_SET, &st, "ll", max_unsealed, max_live_bytes);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

/* ---- attempts, failures, barriers ------------------------------------------------------ */

/* What the attempt rows of a batch share, and their grains. */
struct attempts_ctx {
    const struct orch_grain_at *g;
    int pid;
    const char *host, *slurm_job; /* NULL for none; they outlive the statement's run */
    int64_t batch, now;
};

static int bind_attempts_fixed(sqlite3_stmt *st, const void *ctx)
{
    const struct attempts_ctx *a = ctx;
    int b = sqlite3_bind_int(st, 1, a->pid);
    if (b == SQLITE_OK)
        b = sqlite3_bind_text(st, 2, a->host, -1, SQLITE_STATIC);
    if (b == SQLITE_OK)
        b = sqlite3_bind_text(st, 3, a->slurm_job, -1, SQLITE_STATIC);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, 4, a->batch);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, 5, a->now);
    return b;
}

static int bind_attempt(sqlite3_stmt *st, int p, size_t i, const void *ctx)
{
    const struct orch_grain_at *g = &((const struct attempts_ctx *)ctx)->g[i];
    int b = sqlite3_bind_int64(st, p, g->grain);
    return b == SQLITE_OK ? sqlite3_bind_int64(st, p + 1, g->generation) : b;
}

int orch_store_attempts_begin(orch_store *s, const struct orch_grain_at *g, size_t n, int pid,
                              const char *host, const char *slurm_job, uint64_t batch,
                              int64_t *first)
{
    assert(orch_store_in_txn(s) && n > 0);
    *first = 0;
    struct attempts_ctx a = {.g = g,
                             .pid = pid,
                             .host = host && *host ? host : NULL,
                             .slurm_job = slurm_job && *slurm_job ? slurm_job : NULL,
                             .batch = (int64_t)batch,
                             .now = now_ms()};
    int rc = orch_store__rows_insert(s, ROWS_ATTEMPT, n, bind_attempts_fixed, bind_attempt, &a,
                                     first);
    if (rc < 0)
        return rc;
    /* In flight at their generations ("seals held"). A grain left out (no memory) has
     * its seal written at once, checked by the table. */
    for (size_t i = 0; i < n; i++)
        (void)orch_store__gmap_put(&s->held.inflight, g[i].grain, (int64_t)g[i].generation, 0);
    return 0;
}

int orch_store_attempt_end(orch_store *s, int64_t row, enum orch_attempt_outcome o,
                           const char *message)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ATTEMPT_END, &st, "lstl", now_ms(), orch_attempt_outcome_name(o),
                  message && *message ? message : NULL, row);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_attempts_end(orch_store *s, int64_t first, int64_t last,
                            enum orch_attempt_outcome o)
{
    struct orch_held_aend a = {first, last, now_ms(), (int)o};
    int rc = orch_store__hold_aend(s, &a);
    return rc != 0 ? (rc < 0 ? rc : 0) : orch_store__aend_write(s, &a);
}

int orch_store_attempts_interrupt(orch_store *s)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ATTEMPTS_INTERRUPT, &st, "sl",
                  orch_attempt_outcome_name(ORCH_ATTEMPT_INTERRUPTED), now_ms());
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_open_slurm_jobs(orch_store *s, int (*fn)(void *ctx, const char *job),
                               void *ctx)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_OPEN_SLURM_JOBS, &st, "");
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        const char *job = (const char *)sqlite3_column_text(st, 0);
        rc = job ? fn(ctx, job) : 0;
    }
    sqlite3_reset(st);
    return rc;
}

int orch_store_attempt_last_batch(orch_store *s, uint64_t *batch)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ATTEMPT_LAST_BATCH, &st, "");
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *batch = rc == 1 ? (uint64_t)sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return 0;
}

int orch_store_failure_put(orch_store *s, int64_t grain, uint32_t generation,
                           enum orch_failure_kind kind, const char *message, int64_t child)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_FAILURE_PUT, &st, "lstllL", grain, orch_failure_kind_name(kind),
                  message ? message : "", (int64_t)generation, now_ms(), child);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_barrier_put(orch_store *s, int call, int64_t parent, int64_t grain)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_BARRIER_PUT, &st, "illl", call, parent, grain, now_ms());
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_barrier_covers(orch_store *s, int call, int64_t parent, bool *covered)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_BARRIER_COVERS, &st, "il", call, parent);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *covered = rc == 1;
    sqlite3_reset(st);
    return 0;
}

int orch_store_barrier_take_back(orch_store *s, int64_t grain, bool *taken)
{
    *taken = false; /* also when a statement fails: callers read it */
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
    int rc = orch_store__stmt(s, F_PLAN_PORT, &st, "iittIi", id, domain, name, qualified, producer_call,
                  output ? 1 : 0);
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

int orch_store_attempt_floor_set(orch_store *s, int64_t floor)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ATTEMPT_FLOOR_SET, &st, "l", floor);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
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
    return job_stop_write(s, name, message, now_ms());
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
