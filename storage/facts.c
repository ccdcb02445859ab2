/* facts.c — the job's facts: entities, items, expansions, grains, attempts (orch_facts.h). */
#include "orch_facts.h"

#include <assert.h>
#include <ctype.h>
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

#define FACT_SQL(slot, sql) sql,
static const char *const fact_sql[] = {FACT_STATEMENTS(FACT_SQL)};
#undef FACT_SQL

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

static int prepare_held(orch_store *s, const char *sql, sqlite3_stmt **out);

/* ---- INSERTs of many rows -----------------------------------------------------------------
 * A statement per row paid SQLite's fixed cost of a statement (the step, the reset, the
 * statement's end) every time, about half of what inserting a small row costs. One
 * INSERT takes up to 64 rows (measured: 3.3 us a row alone, 1.5 us in statements of 64):
 * a batch's attempt rows, and the grains and items held back (below). A statement of 2^k
 * rows is prepared once per size, so that n rows take at most n / 64 + 6 statements. */
enum rows_kind { ROWS_ATTEMPT, ROWS_GRAIN, ROWS_ITEM, ROWS_ROOT, ROWS_ENTITY };

_Static_assert(ROWS_ENTITY < ORCH_STORE_ROW_KINDS, "raise ORCH_STORE_ROW_KINDS");

/* Each kind: the INSERT up to VALUES, and one row, '#' standing for each of the row's own
 * parameters; they are numbered after ?1 .. ?nfixed, which every row of a statement shares. */
static const struct {
    const char *head, *row;
    int nfixed, per;
    bool rowids; /* rows take consecutive rowids, which the caller is told */
} row_kinds[] = {
    [ROWS_ATTEMPT] = {"INSERT INTO attempt (grain_id, generation, worker_pid, host, slurm_job, "
                      "batch, started_at) VALUES ",
                      "(#, #, ?1, ?2, ?3, ?4, ?5)", 5, 2, true},
    [ROWS_GRAIN] = {"INSERT INTO grain (id, call_id, entity_id, phase, generation, pending, "
                    "ready_seq, ready_at) VALUES ",
                    "(#, #, #, #, 0, #, #, #)", 0, 7, false},
    [ROWS_ITEM] = {"INSERT INTO item (port_id, entity_id, state, payload_id, payload_size) "
                   "VALUES ",
                   "(#, #, #, #, #)", 0, 5, false},
    [ROWS_ROOT] = {"INSERT INTO root (entity_id, domain_id, revision, position, size, "
                   "mtime_ns, hash, admitted_at) VALUES ",
                   "(#, #, #, #, #, #, #, #)", 0, 8, false},
    [ROWS_ENTITY] = {"INSERT INTO entity (id, domain_id, parent_id, ordinal, key) VALUES ",
                     "(#, #, NULL, #, #)", 0, 4, false},
};

/* The INSERT of 2^size rows of `kind`. */
static int rows_stmt(orch_store *s, enum rows_kind kind, int size, sqlite3_stmt **out)
{
    if ((*out = s->rows[kind][size]) != NULL) {
        sqlite3_reset(*out);
        return 0;
    }
    size_t cap = strlen(row_kinds[kind].head) + 1 +
                 ((size_t)1 << size) * (strlen(row_kinds[kind].row) + 2 + 8 * 6);
    char *sql = malloc(cap);
    if (!sql)
        return orch_error_set(-ENOMEM, "out of memory");
    size_t len = (size_t)snprintf(sql, cap, "%s", row_kinds[kind].head);
    int p = row_kinds[kind].nfixed;
    for (int r = 0; r < 1 << size; r++) {
        if (r)
            len += (size_t)snprintf(sql + len, cap - len, ", ");
        for (const char *c = row_kinds[kind].row; *c; c++)
            len += *c == '#' ? (size_t)snprintf(sql + len, cap - len, "?%d", ++p)
                             : (size_t)snprintf(sql + len, cap - len, "%c", *c);
    }
    int rc = prepare_held(s, sql, out);
    free(sql);
    if (rc == 0)
        s->rows[kind][size] = *out;
    return rc;
}

/* Binds the shared parameters of a statement, or row i's own from parameter p on: an
 * SQLite result code. */
typedef int (*rows_fixed)(sqlite3_stmt *st, const void *ctx);
typedef int (*rows_binder)(sqlite3_stmt *st, int p, size_t i, const void *ctx);

/* Inserts rows 0 .. n-1 of `kind`. For a kind with rowids, *first receives the first
 * row's, and the rows' are checked to be consecutive (one INSERT numbers its rows one
 * after the other, in the order of VALUES, and nothing else inserts meanwhile). */
static int rows_insert(orch_store *s, enum rows_kind kind, size_t n, rows_fixed fixed,
                       rows_binder bind, const void *ctx, int64_t *first)
{
    const int per = row_kinds[kind].per, nfixed = row_kinds[kind].nfixed;
    int64_t first_id = 0;
    for (size_t done = 0; done < n;) {
        int size = 0; /* the largest power of two rows left, at most 2^(SIZES - 1) */
        while (size + 1 < ORCH_STORE_ROW_SIZES && ((size_t)2 << size) <= n - done)
            size++;
        sqlite3_stmt *st;
        int rc = rows_stmt(s, kind, size, &st), b = SQLITE_OK;
        if (rc == 0 && fixed)
            b = fixed(st, ctx);
        for (int r = 0; rc == 0 && r < 1 << size && b == SQLITE_OK; r++)
            b = bind(st, nfixed + per * r + 1, done + (size_t)r, ctx);
        if (rc == 0 && b != SQLITE_OK)
            rc = orch_store_error(s, b, "bind");
        if (rc < 0 || (rc = orch_store__run(s, st, NULL)) < 0)
            return rc;
        done += (size_t)1 << size;
        if (!row_kinds[kind].rowids)
            continue;
        int64_t last = sqlite3_last_insert_rowid(s->db);
        if (first_id == 0)
            first_id = last - ((int64_t)1 << size) + 1;
        if (last != first_id + (int64_t)done - 1)
            return orch_error_set(ORCH_ECORRUPT,
                                  "%s: the rows a batch inserted are not consecutive "
                                  "(%lld after %lld for %zu rows)",
                                  s->path, (long long)last, (long long)first_id, done);
    }
    if (first)
        *first = first_id;
    return 0;
}

/* ---- READY written late ---------------------------------------------------------------
 * Most grains that become READY are dispatched in the same transaction (the report that
 * makes them READY and the dispatch to the call's idle worker share a turn: 83% and 99%
 * of the second and third calls of scripts/bench/scheduler). A READY is therefore held
 * back until the transaction commits, and a dispatch in between means it is never
 * written: the seal writes it ("grains in flight" below). Nothing else can tell: a
 * look-up of the grain here sees it READY (grain_read), a seal of it forgets it, and any
 * statement not known to leave such grains alone writes the held ones first (stmt, and
 * orch_store_prepare for the store's other statements), as does the commit. At most
 * READY_HELD are held; past them a READY is written at once. */
#define READY_HELD 65536
/* At most this many grains, items, root rows and root entities are held (below). */
#define HELD_MAX 16384

/* Statements that read nothing that a late READY (SAFE_READY), a grain created late
 * (SAFE_CREATE), an item put late (SAFE_ITEM), a root row put late (SAFE_ROOT) or a root
 * entity put late (SAFE_ENTITY: nor write a row that names an entity, a foreign key that
 * ORCH_STORE_CHECKS enforces) changes: they run with those held. The
 * reclaimed ids held ("reclaimed ids" below) are written first only for the statements
 * that read reclaimed_span whole (reads_reclaimed); a look-up of one id sees the held
 * ones (orch_store_payload_reclaimed). */
enum { SAFE_READY = 1, SAFE_CREATE = 2, SAFE_ITEM = 4, SAFE_ROOT = 8, SAFE_ALL = 15 };
enum { SAFE_ENTITY = 16, SAFE_NO_ENTITY = SAFE_ALL | SAFE_ENTITY };
/* A seal held back ("seals held" below) changes a grain row: every statement that does
 * not name the grain table is safe from it (seal_safe), and is not listed here. So does an
 * attempt end held back ("attempt ends held") for the attempt table (aend_safe). */
enum { SAFE_SEAL = 32, SAFE_AEND = 128 };
/* What held_flush writes: the SAFE_ bits, and the reclaimed ids. */
enum {
    HELD_KINDS = SAFE_ALL | SAFE_ENTITY | SAFE_SEAL | SAFE_AEND,
    HELD_RECLAIM = 64,
    HELD_ALL = HELD_KINDS | HELD_RECLAIM
};
static const unsigned char held_safe[F__COUNT] = {
    [F_ENTITY_PUT] = SAFE_ALL,        [F_ENTITY_PARENT] = SAFE_ALL,
    [F_CHILDREN] = SAFE_ALL,          [F_CHILDREN_COUNT] = SAFE_ALL,
    [F_ITEM_GET] = SAFE_READY | SAFE_CREATE | SAFE_ROOT | SAFE_ENTITY,
    [F_ITEM_PUT] = SAFE_ALL,          [F_CHILD_ITEMS] = SAFE_READY | SAFE_CREATE | SAFE_ROOT,
    [F_EXPANSION_PUT] = SAFE_ALL,     [F_EXPANSION_GET] = SAFE_NO_ENTITY,
    [F_GRAIN_CREATE] = SAFE_ALL,
    [F_GRAIN_NEXT_ID] = SAFE_READY | SAFE_ITEM | SAFE_ROOT | SAFE_ENTITY,
    [F_GRAIN_GET_ROOT] = SAFE_NO_ENTITY, /* a miss writes the created ones first: */
    [F_GRAIN_GET] = SAFE_ALL,            /* grain_get_row */
    [F_GRAIN_BY_ID] = SAFE_READY | SAFE_ITEM | SAFE_ROOT,
    [F_GRAIN_SET_PENDING] = SAFE_NO_ENTITY, [F_GRAIN_READY] = SAFE_NO_ENTITY,
    [F_GRAIN_SEAL_IN_FLIGHT] = SAFE_READY | SAFE_ITEM | SAFE_ROOT | SAFE_ENTITY,
    [F_GRAIN_SEAL_UNRUN] = SAFE_READY | SAFE_ITEM | SAFE_ROOT | SAFE_ENTITY,
    [F_ATTEMPT_END] = SAFE_READY | SAFE_ITEM | SAFE_ROOT | SAFE_ENTITY,
    [F_ATTEMPTS_END] = SAFE_READY | SAFE_ITEM | SAFE_ROOT | SAFE_ENTITY,
    [F_FAILURE_PUT] = SAFE_READY | SAFE_ITEM | SAFE_ROOT,
    [F_BARRIER_PUT] = SAFE_READY | SAFE_ITEM | SAFE_ROOT,
    [F_BARRIER_COVERS] = SAFE_NO_ENTITY,
    [F_ROOT_PUT] = SAFE_ALL,          [F_ROOT_FIND] = SAFE_ALL & ~SAFE_ROOT,
    [F_PAYLOAD_RECLAIMED] = SAFE_NO_ENTITY,
};

/* Whether sql names table (a column such as grain_id is not the table grain). */
static bool names_table(const char *sql, const char *table)
{
    size_t n = strlen(table);
    for (const char *p = sql; (p = strstr(p, table)) != NULL; p += n)
        if (p > sql && p[-1] == ' ' && !isalnum((unsigned char)p[n]) && p[n] != '_')
            return true;
    return false;
}

/* Whether the statement of slot is safe from held seals: it does not name the grain
 * table, or reads only its largest id, which a seal does not change. Worked out from the
 * text once, so that a statement added later is judged as it is written. */

static bool seal_safe(enum fact_slot slot)
{
    static signed char known[F__COUNT]; /* 0: not yet; 1: safe; -1: not */
    if (known[slot] == 0)
        known[slot] = !names_table(fact_sql[slot], "grain") || slot == F_GRAIN_NEXT_ID ? 1 : -1;
    return known[slot] > 0;
}

/* The same for the attempt table and the attempt ends held. */
static bool aend_safe(enum fact_slot slot)
{
    static signed char known[F__COUNT];
    if (known[slot] == 0)
        known[slot] = names_table(fact_sql[slot], "attempt") ? -1 : 1;
    return known[slot] > 0;
}

static size_t ready_hash(const orch_store *s, int64_t grain)
{
    return (size_t)(((uint64_t)grain * UINT64_C(0x9e3779b97f4a7c15)) >> 32) &
           (s->ready_ix_size - 1);
}

/* The held READY of grain, or NULL. */
static struct orch_store_ready *ready_find(orch_store *s, int64_t grain)
{
    if (s->nready == 0)
        return NULL;
    for (size_t h = ready_hash(s, grain);; h = (h + 1) & (s->ready_ix_size - 1)) {
        uint32_t i = s->ready_ix[h];
        if (i == 0)
            return NULL;
        if (s->ready[i - 1].grain == grain && s->ready[i - 1].live)
            return &s->ready[i - 1];
    }
}

/* Holds grain's READY back: 1, or 0 when no more can be held (write it now). */
static int ready_hold(orch_store *s, int64_t grain, int64_t seq, int64_t at)
{
    if (s->nready == READY_HELD)
        return 0;
    if (s->nready == s->capready) {
        size_t cap = s->capready ? s->capready * 2 : 1024;
        struct orch_store_ready *v = realloc(s->ready, cap * sizeof *v);
        uint32_t *ix = calloc(cap * 2, sizeof *ix);
        if (!v || !ix) {
            if (v)
                s->ready = v;
            free(ix);
            return 0; /* no memory to hold it: written now */
        }
        s->ready = v;
        s->capready = cap;
        free(s->ready_ix);
        s->ready_ix = ix;
        s->ready_ix_size = cap * 2;
        for (size_t i = 0; i < s->nready; i++) { /* index the held ones again */
            size_t h = ready_hash(s, s->ready[i].grain);
            while (s->ready_ix[h])
                h = (h + 1) & (s->ready_ix_size - 1);
            s->ready_ix[h] = (uint32_t)i + 1;
        }
    }
    size_t h = ready_hash(s, grain);
    while (s->ready_ix[h])
        h = (h + 1) & (s->ready_ix_size - 1);
    s->ready[s->nready] = (struct orch_store_ready){grain, seq, at, true};
    s->ready_ix[h] = (uint32_t)++s->nready;
    return 1;
}

static void ready_forget(orch_store *s)
{
    /* Empties the index slot by slot: as many as were held, not the whole index. */
    for (size_t i = 0; i < s->nready; i++) {
        size_t h = ready_hash(s, s->ready[i].grain);
        while (s->ready_ix[h] != i + 1)
            h = (h + 1) & (s->ready_ix_size - 1);
        s->ready_ix[h] = 0;
    }
    s->nready = 0;
}

static int stmt_raw(orch_store *s, enum fact_slot slot, sqlite3_stmt **out, const char *fmt,
                    va_list ap);

/* orch_store_prepare of a statement that the caller knows to leave the held writes alone:
 * its first use does not write them (the caller may hold one it is about to use). */
static int prepare_held(orch_store *s, const char *sql, sqlite3_stmt **out)
{
    bool was = s->flushing;
    s->flushing = true;
    int rc = orch_store_prepare(s, sql, out);
    s->flushing = was;
    return rc;
}

static int stmt_of(orch_store *s, enum fact_slot slot, sqlite3_stmt **out, const char *fmt,
                   ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = stmt_raw(s, slot, out, fmt, ap);
    va_end(ap);
    return rc;
}

/* Writes the held READYs, in runs as the held seals are ("seals held" below): one UPDATE
 * for live ones whose ids step by one stride and ready_seqs by another, at one ready_at.
 * A run changes what its READYs one by one would: the grains of its ids that are WAITING. */
static int ready_flush(orch_store *s)
{
    int rc = 0;
    size_t i = 0;
    while (i < s->nready && rc == 0) {
        const struct orch_store_ready *a = &s->ready[i];
        if (!a->live) {
            i++;
            continue;
        }
        size_t j = i + 1, n = 1;
        const struct orch_store_ready *last = a;
        int64_t sid = 0, sseq = 0;
        for (; j < s->nready; j++) {
            const struct orch_store_ready *b = &s->ready[j];
            if (!b->live)
                continue;
            if (n == 1) {
                sid = b->grain - a->grain;
                sseq = b->seq - a->seq;
            }
            if (sid <= 0 || b->grain - last->grain != sid || b->seq - last->seq != sseq ||
                b->at != a->at)
                break;
            last = b;
            n++;
        }
        sqlite3_stmt *st;
        const char *ready = orch_grain_phase_name(ORCH_PHASE_READY),
                   *waiting = orch_grain_phase_name(ORCH_PHASE_WAITING);
        rc = n == 1 ? stmt_of(s, F_GRAIN_READY, &st, "llsls", a->grain, a->seq, ready, a->at,
                              waiting)
                    : stmt_of(s, F_GRAINS_READY_RUN, &st, "llslslll", a->grain, a->seq, ready,
                              a->at, waiting, sid, sseq, last->grain);
        if (rc == 0)
            rc = orch_store__run(s, st, NULL);
        i = j;
    }
    if (rc == 0)
        ready_forget(s);
    return rc;
}

/* ---- grains written late ----------------------------------------------------------------
 * The grains of a new entity are created one INSERT each, and the one that its first
 * input makes READY at once (a root's first call, a child's) was written a second time.
 * They are held instead, with ids of their own (consecutive, from the table's largest),
 * and written in multi-row INSERTs as they stand when a statement not known to leave
 * them alone comes (SAFE_CREATE), or the commit: one INSERT's share per grain, READY in
 * it if it became READY meanwhile. A held grain is always in the look-up table of the
 * waiting grains (a miss there writes them first), and its READY and pending count are
 * applied to it here. An INSERT of a grain that cannot be held writes the held ones
 * first, so that ids stay in order. */

static struct orch_store_created *created_find(orch_store *s, int64_t id)
{
    if (s->ncreated == 0 || id < s->created[0].id ||
        id >= s->created[0].id + (int64_t)s->ncreated)
        return NULL;
    return &s->created[id - s->created[0].id];
}

/* Binds held grain i (s->created): id, call, entity, phase, pending, ready_seq, ready_at. */
static int bind_created(sqlite3_stmt *st, int p, size_t i, const void *ctx)
{
    const struct orch_store_created *c = &((const orch_store *)ctx)->created[i];
    int b = sqlite3_bind_int64(st, p, c->id);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int(st, p + 1, c->call);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 2, c->entity);
    if (b == SQLITE_OK)
        b = sqlite3_bind_text(st, p + 3,
                              orch_grain_phase_name(c->seq ? ORCH_PHASE_READY : ORCH_PHASE_WAITING),
                              -1, SQLITE_STATIC);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 4, c->seq ? 0 : c->pending);
    if (b == SQLITE_OK)
        b = c->seq ? sqlite3_bind_int64(st, p + 5, c->seq) : sqlite3_bind_null(st, p + 5);
    if (b == SQLITE_OK)
        b = c->seq ? sqlite3_bind_int64(st, p + 6, c->at) : sqlite3_bind_null(st, p + 6);
    return b;
}

static int created_flush(orch_store *s)
{
    int rc = rows_insert(s, ROWS_GRAIN, s->ncreated, NULL, bind_created, s, NULL);
    if (rc == 0)
        s->ncreated = 0;
    return rc;
}

/* ---- items written late ------------------------------------------------------------------
 * Items are written as grains are (above): held, and written in multi-row INSERTs when a
 * statement that reads items comes (not SAFE_ITEM), or the commit. An item put twice
 * breaks the table's key then, not at the second put: the same error, a little later,
 * and the turn is rolled back either way. */

/* Binds held item i (s->items): port, entity, state, payload, size. */
static int bind_item(sqlite3_stmt *st, int p, size_t i, const void *ctx)
{
    const struct orch_store_item *it = &((const orch_store *)ctx)->items[i];
    int b = sqlite3_bind_int(st, p, it->port);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 1, it->entity);
    if (b == SQLITE_OK)
        b = sqlite3_bind_text(st, p + 2, orch_item_state_name((enum orch_item_state)it->state),
                              -1, SQLITE_STATIC);
    if (b == SQLITE_OK)
        b = it->payload ? sqlite3_bind_int64(st, p + 3, it->payload) : sqlite3_bind_null(st, p + 3);
    if (b == SQLITE_OK)
        b = it->size >= 0 ? sqlite3_bind_int64(st, p + 4, it->size) : sqlite3_bind_null(st, p + 4);
    return b;
}

static int items_flush(orch_store *s)
{
    int rc = rows_insert(s, ROWS_ITEM, s->nitems, NULL, bind_item, s, NULL);
    if (rc == 0)
        s->nitems = 0;
    return rc;
}

/* Binds held root row i (s->roots). */
static int bind_root(sqlite3_stmt *st, int p, size_t i, const void *ctx)
{
    const struct orch_store_root *r = &((const orch_store *)ctx)->roots[i];
    int b = sqlite3_bind_int64(st, p, r->entity);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int(st, p + 1, r->domain);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 2, r->revision);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 3, r->position);
    if (b == SQLITE_OK)
        b = r->size >= 0 ? sqlite3_bind_int64(st, p + 4, r->size) : sqlite3_bind_null(st, p + 4);
    if (b == SQLITE_OK)
        b = r->mtime_ns >= 0 ? sqlite3_bind_int64(st, p + 5, r->mtime_ns)
                             : sqlite3_bind_null(st, p + 5);
    if (b == SQLITE_OK)
        b = r->hash ? sqlite3_bind_text(st, p + 6, r->hash, -1, SQLITE_STATIC)
                    : sqlite3_bind_null(st, p + 6);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 7, r->at);
    return b;
}

static void roots_forget(orch_store *s)
{
    for (size_t i = 0; i < s->nroots; i++)
        free(s->roots[i].hash);
    s->nroots = 0;
}

static int roots_flush(orch_store *s)
{
    int rc = rows_insert(s, ROWS_ROOT, s->nroots, NULL, bind_root, s, NULL);
    if (rc == 0)
        roots_forget(s);
    return rc;
}

/* ---- root entities written late ---------------------------------------------------------
 * A root entity was one INSERT of its own (three B-trees: the table, entity_root,
 * entity_by_key), 15k instructions, a statement's fixed cost a good part of it. Root
 * entities with their key given (admission's) are held like the grains (above), with ids of
 * their own (consecutive, from the table's largest), and written in multi-row INSERTs
 * before any statement that reads entities or writes a row that names one (not
 * SAFE_ENTITY), and before the held rows that name them. An entity that cannot be held (a
 * child: its key is made from its parent's by the INSERT) writes the held ones first, so
 * that ids stay in order. */

/* Binds held entity i (s->entities): id, domain, ordinal, key. */
static int bind_entity(sqlite3_stmt *st, int p, size_t i, const void *ctx)
{
    const struct orch_store_entity *en = &((const orch_store *)ctx)->entities[i];
    int b = sqlite3_bind_int64(st, p, en->id);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int(st, p + 1, en->domain);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 2, en->ordinal);
    if (b == SQLITE_OK)
        b = sqlite3_bind_text(st, p + 3, en->key, -1, SQLITE_STATIC);
    return b;
}

static void entities_forget(orch_store *s)
{
    for (size_t i = 0; i < s->nentities; i++)
        free(s->entities[i].key);
    s->nentities = 0;
}

static int entities_flush(orch_store *s)
{
    int rc = rows_insert(s, ROWS_ENTITY, s->nentities, NULL, bind_entity, s, NULL);
    if (rc == 0)
        entities_forget(s);
    return rc;
}

static int reclaimed_flush(orch_store *s);
static int seals_flush(orch_store *s);
static int aends_flush(orch_store *s);
static void gmap_clear(struct orch_store_gmap *m);

/* Writes the held writes of `kinds`: SAFE_ENTITY, SAFE_CREATE (the grains), SAFE_READY,
 * SAFE_SEAL, SAFE_ITEM, SAFE_ROOT, HELD_RECLAIM. The entities first, and always with the
 * rows that name them (grains, items, root rows). */
static int held_flush(orch_store *s, unsigned kinds)
{
    bool was = s->flushing;
    s->flushing = true;
    int rc = 0;
    if (kinds & (SAFE_CREATE | SAFE_ITEM | SAFE_ROOT))
        kinds |= SAFE_ENTITY;
    if ((kinds & SAFE_ENTITY) && s->nentities > 0)
        rc = entities_flush(s);
    if (rc == 0 && (kinds & SAFE_CREATE) && s->ncreated > 0)
        rc = created_flush(s);
    if (rc == 0 && (kinds & SAFE_READY) && s->nready > 0)
        rc = ready_flush(s);
    if (rc == 0 && (kinds & SAFE_SEAL) && s->nseals > 0)
        rc = seals_flush(s);
    if (rc == 0 && (kinds & SAFE_AEND) && s->naends > 0)
        rc = aends_flush(s);
    if (rc == 0 && (kinds & SAFE_ITEM) && s->nitems > 0)
        rc = items_flush(s);
    if (rc == 0 && (kinds & SAFE_ROOT) && s->nroots > 0)
        rc = roots_flush(s);
    if (rc == 0 && (kinds & HELD_RECLAIM) && s->nreclw > 0)
        rc = reclaimed_flush(s);
    s->flushing = was;
    return rc; /* on failure the caller rolls back, which forgets them */
}

int orch_store__held_flush(orch_store *s)
{
    return orch_store__holds(s) ? held_flush(s, HELD_ALL) : 0;
}

void orch_store__held_forget(orch_store *s)
{
    ready_forget(s);
    s->ncreated = 0;
    s->nitems = 0;
    roots_forget(s);
    entities_forget(s);
    s->nreclw = 0;
    s->nseals = 0;
    s->naends = 0;
    /* The attempts begun in the transaction are gone: seals are checked by the table
     * again (seal_in_flight), until dispatch fills this anew. */
    gmap_clear(&s->inflight);
    orch_store__reclaimed_forget(s);
    s->next_grain = 0; /* the rows the ids counted on may be gone */
    s->next_entity = 0;
}

/* facts_int.h. Held writes that the statement could see are written first (held_safe). */
int orch_store__stmt(orch_store *s, enum fact_slot slot, sqlite3_stmt **out, const char *fmt,
                     ...)
{
    if (!s->flushing && orch_store__holds(s)) {
        bool reads_reclaimed =
            slot == F_SPANS || slot == F_SPANS_COUNT || slot == F_RECLAIMED_PORT;
        unsigned safe = held_safe[slot] | (seal_safe(slot) ? SAFE_SEAL : 0) |
                        (aend_safe(slot) ? SAFE_AEND : 0);
        int rc = held_flush(s, (HELD_KINDS & ~safe) | (reads_reclaimed ? HELD_RECLAIM : 0));
        if (rc < 0)
            return rc;
    }
    va_list ap;
    va_start(ap, fmt);
    int rc = stmt_raw(s, slot, out, fmt, ap);
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
        if ((rc = prepare_held(s, fact_sql[slot], &st)) < 0)
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

/* Holds root entity (domain, ordinal, key) as entities written late: 1 and *id, or 0 when it
 * cannot be held (no memory: written now). */
static int entity_hold(orch_store *s, int domain, int64_t ordinal, const char *key, int64_t *id)
{
    int rc;
    if (s->nentities == HELD_MAX && (rc = held_flush(s, SAFE_ENTITY)) < 0)
        return rc;
    if (s->nentities == s->capentities &&
        orch__grow_n(&s->entities, &s->capentities, s->nentities + 1, sizeof *s->entities) < 0)
        return 0;
    if (s->next_entity == 0) { /* the first since an entity was INSERTed another way */
        sqlite3_stmt *st;
        if ((rc = orch_store__stmt(s, F_ENTITY_NEXT_ID, &st, "")) < 0 || (rc = orch_store__one(s, st)) < 0)
            return rc;
        s->next_entity = rc == 1 ? sqlite3_column_int64(st, 0) : 1;
        sqlite3_reset(st);
    }
    char *copy = strdup(key);
    if (!copy)
        return 0;
    *id = s->next_entity++;
    s->entities[s->nentities++] = (struct orch_store_entity){
        .id = *id, .ordinal = ordinal, .key = copy, .domain = domain};
    return 1;
}

int orch_store_entity_put(orch_store *s, int domain, int64_t parent, int64_t ordinal,
                          const char *key, int64_t *id)
{
    assert(orch_store_in_txn(s));
    int rc = parent == 0 && key ? entity_hold(s, domain, ordinal, key, id) : 0;
    if (rc != 0)
        return rc < 0 ? rc : 0;
    /* Not held: the held ones first (the statement is not SAFE_ENTITY), so that this
     * INSERT's id comes after theirs and a child finds its parent's key. */
    sqlite3_stmt *st;
    if ((rc = orch_store__stmt(s, F_ENTITY_PUT, &st, "iLlt", domain, parent, ordinal, key)) == 0 &&
        (rc = orch_store__run(s, st, NULL)) == 0)
        *id = sqlite3_last_insert_rowid(s->db);
    s->next_entity = 0;
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

/* ---- root rows (roots.c has the rest of the roots) ---------------------------------------- */

/* Root rows are held like items ("items written late"): one INSERT's share each. */
int orch_store_root_put(orch_store *s, int64_t e, int domain, int64_t revision,
                        int64_t position, const struct orch_root_sig *sig)
{
    assert(orch_store_in_txn(s));
    bool known = sig && sig->known;
    if (s->nroots == HELD_MAX && !s->flushing) {
        int rc = held_flush(s, SAFE_ROOT);
        if (rc < 0)
            return rc;
    }
    char *hash = known ? strdup(sig->hash) : NULL;
    if ((known && !hash) ||
        (s->nroots == s->caproots &&
         orch__grow_n(&s->roots, &s->caproots, s->nroots + 1, sizeof *s->roots) < 0)) {
        free(hash); /* no memory to hold it: written now */
        sqlite3_stmt *st;
        int rc = orch_store__stmt(s, F_ROOT_PUT, &st, "lillNNtl", e, domain, revision, position,
                      known ? sig->size : (int64_t)-1, known ? sig->mtime_ns : (int64_t)-1,
                      known ? sig->hash : NULL, now_ms());
        return rc < 0 ? rc : orch_store__run(s, st, NULL);
    }
    s->roots[s->nroots++] = (struct orch_store_root){
        .entity = e,
        .revision = revision,
        .position = position,
        .size = known ? sig->size : -1,
        .mtime_ns = known ? sig->mtime_ns : -1,
        .at = now_ms(),
        .hash = hash,
        .domain = domain};
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

static bool gmap_has(const struct orch_store_gmap *m, int64_t grain);

/* Held in this transaction ("reclaimed ids": every id not written yet is), or in a span. */
int orch_store_payload_reclaimed(orch_store *s, uint64_t payload, bool *reclaimed)
{
    sqlite3_stmt *st;
    *reclaimed = gmap_has(&s->recl, (int64_t)payload);
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
    if (s->nitems == HELD_MAX && !s->flushing) { /* as created_hold */
        int rc = held_flush(s, SAFE_ITEM);
        if (rc < 0)
            return rc;
    }
    if (s->nitems == s->capitems &&
        orch__grow_n(&s->items, &s->capitems, s->nitems + 1, sizeof *s->items) < 0) {
        sqlite3_stmt *st; /* no memory to hold it: written now */
        int rc = orch_store__stmt(s, F_ITEM_PUT, &st, "ilsLN", port, e, orch_item_state_name(state),
                      present ? (int64_t)payload : (int64_t)0, present ? size : (int64_t)-1);
        if (rc < 0 || (rc = orch_store__run(s, st, NULL)) < 0)
            return rc;
    } else {
        s->items[s->nitems++] = (struct orch_store_item){
            .entity = e,
            .payload = present ? (int64_t)payload : 0,
            .size = present ? size : -1,
            .port = port,
            .state = (int)state};
    }
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

/* ---- the waiting grains -----------------------------------------------------------------
 * Each input of a grain that becomes terminal looks the grain up by (call, entity)
 * (grain_input in propagate.c): a SELECT that cost 6,000 instructions of the driver's
 * ~90,000 per grain (callgrind, scripts/bench/scheduler's pipeline). The grains this
 * connection creates are kept here while they wait, with what the look-up needs; a
 * grain leaves when it becomes READY or is sealed unrun, every write of its pending
 * count is applied here too, and a rollback forgets them all. A grain that is not here
 * (made by an earlier run, re-opened, or past WAITING_MAX) is read from its row, as
 * always. With ORCH_STORE_CHECKS every look-up that is answered here is compared with
 * the row. */
#define WAITING_MAX ((size_t)1 << 16) /* a table of at most 2^17 slots: 5 MiB */

static size_t wait_hash(const orch_store *s, int call, int64_t e)
{
    uint64_t k = (uint64_t)e * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)call;
    return (size_t)((k * UINT64_C(0xbf58476d1ce4e5b9)) >> 32) & (s->wait_size - 1);
}

static struct orch_store_waiting *wait_find(orch_store *s, int call, int64_t e)
{
    if (s->nwait == 0)
        return NULL;
    for (size_t h = wait_hash(s, call, e);; h = (h + 1) & (s->wait_size - 1)) {
        struct orch_store_waiting *w = &s->wait[h];
        if (w->id == 0)
            return NULL;
        if (w->entity == e && w->call == call)
            return w;
    }
}

/* Keeps v: true, or false when it cannot (full, or no memory). */
static bool wait_put(orch_store *s, const struct orch_store_waiting *v)
{
    if (s->nwait >= WAITING_MAX)
        return false;
    if ((s->nwait + 1) * 2 > s->wait_size) { /* at most half full */
        size_t size = s->wait_size ? s->wait_size * 2 : 4096;
        struct orch_store_waiting *t = calloc(size, sizeof *t), *old = s->wait;
        if (!t)
            return false; /* not kept: looked up in its row */
        size_t old_size = s->wait_size;
        s->wait = t;
        s->wait_size = size;
        for (size_t i = 0; i < old_size; i++) {
            if (old[i].id == 0)
                continue;
            size_t h = wait_hash(s, old[i].call, old[i].entity);
            while (t[h].id)
                h = (h + 1) & (size - 1);
            t[h] = old[i];
        }
        free(old);
    }
    size_t h = wait_hash(s, v->call, v->entity);
    while (s->wait[h].id)
        h = (h + 1) & (s->wait_size - 1);
    s->wait[h] = *v;
    s->nwait++;
    return true;
}

/* Removes (call, e), moving later entries of its probe run back (no tombstones). */
static void wait_drop(orch_store *s, int call, int64_t e)
{
    struct orch_store_waiting *w = wait_find(s, call, e);
    if (!w)
        return;
    size_t mask = s->wait_size - 1, hole = (size_t)(w - s->wait);
    s->wait[hole].id = 0;
    s->nwait--;
    for (size_t i = (hole + 1) & mask; s->wait[i].id; i = (i + 1) & mask) {
        size_t home = wait_hash(s, s->wait[i].call, s->wait[i].entity);
        /* It may fill the hole if its home is not in the cyclic range (hole, i]. */
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            s->wait[hole] = s->wait[i];
            s->wait[i].id = 0;
            hole = i;
        }
    }
}

void orch_store__waiting_forget(orch_store *s)
{
    if (s->nwait)
        memset(s->wait, 0, s->wait_size * sizeof *s->wait);
    s->nwait = 0;
}

/* Holds the new grain (call, e): 1, or 0 when it cannot be held (then it is INSERTed). */
static int created_hold(orch_store *s, int call, int64_t e, int64_t parent, int64_t pending)
{
    int rc;
    /* A million children of one expansion are written HELD_MAX at a time: the memory
     * held stays small whatever the turn publishes. */
    if (s->ncreated == HELD_MAX && (rc = held_flush(s, SAFE_CREATE)) < 0)
        return rc;
    if (s->ncreated == s->capcreated &&
        orch__grow_n(&s->created, &s->capcreated, s->ncreated + 1, sizeof *s->created) < 0)
        return 0;
    if (s->next_grain == 0) { /* the first since a grain was INSERTed another way */
        sqlite3_stmt *st;
        if ((rc = orch_store__stmt(s, F_GRAIN_NEXT_ID, &st, "")) < 0 || (rc = orch_store__one(s, st)) < 0)
            return rc;
        s->next_grain = rc == 1 ? sqlite3_column_int64(st, 0) : 1;
        sqlite3_reset(st);
    }
    if (!wait_put(s, &(struct orch_store_waiting){.entity = e,
                                                  .id = s->next_grain,
                                                  .parent = parent,
                                                  .pending = pending,
                                                  .call = call}))
        return 0;
    s->created[s->ncreated++] = (struct orch_store_created){
        .id = s->next_grain++, .entity = e, .pending = pending, .call = call};
    return 1;
}

int orch_store_grain_create(orch_store *s, int call, int64_t e, int64_t parent, int64_t pending)
{
    assert(orch_store_in_txn(s));
    int rc = created_hold(s, call, e, parent, pending);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    /* Not held: the held ones first, so that this INSERT's id comes after theirs. */
    sqlite3_stmt *st;
    if ((rc = held_flush(s, SAFE_CREATE)) < 0 ||
        (rc = orch_store__stmt(s, F_GRAIN_CREATE, &st, "ilsl", call, e,
                   orch_grain_phase_name(ORCH_PHASE_WAITING), pending)) < 0 ||
        (rc = orch_store__run(s, st, NULL)) < 0)
        return rc;
    s->next_grain = 0;
    wait_put(s, &(struct orch_store_waiting){.entity = e,
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
    const struct orch_store_ready *r;
    if (g->phase == ORCH_PHASE_WAITING && (r = ready_find(s, g->id)) != NULL) {
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
    const struct orch_store_waiting *w = wait_find(s, call, e);
    if (!w)
        return grain_get_row(s, call, e, root, g);
    *g = (struct orch_grain_row){.id = w->id,
                                 .call = call,
                                 .entity = e,
                                 .parent = w->parent,
                                 .phase = ORCH_PHASE_WAITING,
                                 .outcome = -1,
                                 .pending = w->pending};
    if (!s->checks || created_find(s, w->id))
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
    if (s->ncreated > 0 && !s->flushing) { /* it may be a held one that left the table */
        int rc = held_flush(s, SAFE_CREATE);
        if (rc < 0)
            return rc;
    }
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
    struct orch_store_created *c = created_find(s, g->id);
    if (c) {
        c->pending = pending;
    } else {
        sqlite3_stmt *st;
        int rc = orch_store__stmt(s, F_GRAIN_SET_PENDING, &st, "ll", pending, g->id);
        if (rc < 0 || (rc = orch_store__run(s, st, NULL)) < 0)
            return rc;
    }
    struct orch_store_waiting *w = wait_find(s, g->call, g->entity);
    if (w)
        w->pending = pending;
    return 0;
}

int orch_store_grain_ready(orch_store *s, const struct orch_grain_row *g, int64_t seq)
{
    assert(orch_store_in_txn(s));
    wait_drop(s, g->call, g->entity);
    int64_t grain = g->id;
    int64_t at = now_ms();
    struct orch_store_created *c = created_find(s, grain);
    if (c) { /* not written yet: it will be, READY */
        c->seq = seq;
        c->at = at;
        return 0;
    }
    if (ready_hold(s, grain, seq, at))
        return 0;
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_READY, &st, "llsls", grain, seq,
                  orch_grain_phase_name(ORCH_PHASE_READY), at,
                  orch_grain_phase_name(ORCH_PHASE_WAITING));
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

/* ---- grains in flight ------------------------------------------------------------------
 * A grain in flight is not written as such: its attempt row, begun with its batch's others
 * (orch_store_attempts_begin), says that it runs. Its row reads READY until the grain is
 * sealed or put back; or WAITING when it was made READY in the transaction that
 * dispatched it: that READY is not written at all, and its seal (or requeue) writes the
 * ready_seq and ready_at it had (s->flying keeps them meanwhile: as many entries as grains
 * in flight). One to two UPDATEs per grain less, 10% of the driver's instructions on a
 * chain of no-op calls. The `grains` and `progress` views count a grain with an open
 * attempt as in flight; resume takes such grains back (GRAINS_INTERRUPT).
 *
 * The UPDATE of dispatch also caught a queue entry gone stale: a READY grain that a
 * GroupFailure barrier sealed while it waited in its queue. Such grains are remembered in
 * s->unq instead until their entry comes out of the queue: never more of them than of
 * queued grains. A rollback leaves both tables as they are: the driver stops then. */

static size_t gmap_hash(const struct orch_store_gmap *m, int64_t grain)
{
    return (size_t)(((uint64_t)grain * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & (m->size - 1);
}

static int gmap_put(struct orch_store_gmap *m, int64_t grain, int64_t seq, int64_t at)
{
    if ((m->n + 1) * 2 > m->size) {
        size_t size = m->size ? m->size * 2 : 256, old_size = m->size;
        struct orch_store_gent *t = calloc(size, sizeof *t), *old = m->v;
        if (!t)
            return -ENOMEM;
        m->v = t;
        m->size = size;
        for (size_t i = 0; i < old_size; i++) {
            if (!old[i].grain)
                continue;
            size_t h = gmap_hash(m, old[i].grain);
            while (t[h].grain)
                h = (h + 1) & (size - 1);
            t[h] = old[i];
        }
        free(old);
    }
    size_t h = gmap_hash(m, grain);
    while (m->v[h].grain && m->v[h].grain != grain)
        h = (h + 1) & (m->size - 1);
    if (!m->v[h].grain)
        m->n++;
    m->v[h] = (struct orch_store_gent){grain, seq, at};
    return 0;
}

static void gmap_clear(struct orch_store_gmap *m)
{
    free(m->v);
    *m = (struct orch_store_gmap){0};
}

static bool gmap_has(const struct orch_store_gmap *m, int64_t grain)
{
    if (m->n == 0)
        return false;
    for (size_t h = gmap_hash(m, grain); m->v[h].grain; h = (h + 1) & (m->size - 1))
        if (m->v[h].grain == grain)
            return true;
    return false;
}

/* Takes grain's entry out of m into *out (may be NULL): true if it was there. */
static bool gmap_take(struct orch_store_gmap *m, int64_t grain, struct orch_store_gent *out)
{
    if (m->n == 0)
        return false;
    size_t mask = m->size - 1, h = gmap_hash(m, grain);
    while (m->v[h].grain != grain) {
        if (!m->v[h].grain)
            return false;
        h = (h + 1) & mask;
    }
    if (out)
        *out = m->v[h];
    /* Backward shift: later entries of the run move up when their home allows it. */
    for (size_t j = (h + 1) & mask; m->v[j].grain; j = (j + 1) & mask) {
        size_t home = gmap_hash(m, m->v[j].grain);
        if (((j - home) & mask) >= ((j - h) & mask)) {
            m->v[h] = m->v[j];
            h = j;
        }
    }
    m->v[h].grain = 0;
    m->n--;
    return true;
}

/* With ORCH_STORE_CHECKS: the grain that goes in flight is READY at that generation. */
static int dispatch_check(orch_store *s, int64_t grain, uint32_t generation)
{
    const struct orch_store_created *c = created_find(s, grain);
    struct orch_grain_row g;
    int rc = c ? 0 : orch_store_grain_by_id(s, grain, &g); /* a held READY reads READY */
    if (rc < 0)
        return rc;
    bool ok = c ? c->seq && generation == 0 /* a new grain is at generation 0 */
                : g.phase == ORCH_PHASE_READY && g.generation == generation;
    return ok ? 0 : orch_error_set(ORCH_ECORRUPT, "%s: grain %lld dispatched at generation %u "
                                               "is not READY at it", s->path, (long long)grain,
                                   generation);
}

int orch_store_grain_dispatch(orch_store *s, int64_t grain, uint32_t generation, bool *done)
{
    *done = false;
    if (gmap_take(&s->unq, grain, NULL))
        return 0; /* sealed by a barrier while it was queued */
    int rc = s->checks ? dispatch_check(s, grain, generation) : 0;
    struct orch_store_ready *r = rc == 0 ? ready_find(s, grain) : NULL;
    if (r) { /* READY in this transaction: written with its seal or requeue */
        if ((rc = gmap_put(&s->flying, grain, r->seq, r->at)) < 0)
            return rc;
        r->live = false;
    }
    *done = rc == 0;
    return rc;
}

int orch_store_grain_interrupt(orch_store *s, int64_t grain, uint32_t generation)
{
    struct orch_store_gent f = {0, -1, -1};
    gmap_take(&s->flying, grain, &f);
    gmap_take(&s->inflight, grain, NULL);
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
    gmap_take(&s->flying, grain, NULL); /* the new ready_seq replaces the one kept */
    gmap_take(&s->inflight, grain, NULL);
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
    const struct orch_store_created *c = created_find(s, grain);
    struct orch_grain_row g = {.phase = ORCH_PHASE_WAITING};
    int rc = c || wait_find(s, call, e) ? 0 : orch_store_grain_by_id(s, grain, &g);
    *queued = c ? c->seq != 0 : g.phase == ORCH_PHASE_READY;
    return rc;
}

/* ---- seals held ------------------------------------------------------------------------
 * A report's seal was one UPDATE a grain: 9 k of the driver's 48 k instructions a grain on
 * a chain of no-op calls, most of it the statement's own cost. The seal of a grain that
 * this connection put in flight (s->inflight: its dispatch's attempt rows, with its
 * generation) at the generation the report names is held back instead, and the held ones
 * are written in runs: one UPDATE for grains whose ids step by the same stride (the grains
 * of one call in a batch: every entity's grains were created together) with ready_seqs
 * that step alike, one ready_at, one outcome and generation. Nothing else can tell: the
 * table would have said `sealed` only because the row matched (in flight, at that
 * generation), which the map says as well, since nothing but this connection writes the
 * job; any statement that names the grain table writes the held seals first (seal_safe),
 * as does the commit, and a run that does not change exactly its grains stops the turn as
 * corrupt. A grain leaves the map when it is sealed, put back or interrupted; a rollback
 * empties it. With ORCH_STORE_CHECKS each held seal is compared with its row first. */
#define SEALS_HELD 16384

/* Writes run seals[i .. j-1] (the caller checked that they form one). */
static int seal_run(orch_store *s, size_t i, size_t j, int64_t sid, int64_t sseq)
{
    const struct orch_store_seal *a = &s->seals[i], *z = &s->seals[j - 1];
    const char *sealed = orch_grain_phase_name(ORCH_PHASE_SEALED);
    sqlite3_stmt *st;
    int rc = j - i == 1
                 ? orch_store__stmt(s, F_GRAIN_SEAL_IN_FLIGHT, &st, "lslNsN", a->grain,
                        orch_grain_outcome_name(a->outcome), (int64_t)a->generation, a->seq,
                        sealed, a->at)
                 : orch_store__stmt(s, F_GRAINS_SEAL_RUN, &st, "lslNsNlll", a->grain,
                        orch_grain_outcome_name(a->outcome), (int64_t)a->generation, a->seq,
                        sealed, a->at, sid, sseq, z->grain);
    if (rc < 0 || (rc = orch_store__run(s, st, NULL)) < 0)
        return rc;
    int changed = sqlite3_changes(s->db);
    if ((size_t)changed != j - i)
        return orch_error_set(ORCH_ECORRUPT,
                              "%s: %zu grains in flight sealed (%lld to %lld) but %d rows "
                              "were", s->path, j - i, (long long)a->grain,
                              (long long)z->grain, changed);
    return 0;
}

static int seals_flush(orch_store *s)
{
    int rc = 0;
    size_t i = 0;
    while (i < s->nseals && rc == 0) {
        const struct orch_store_seal *a = &s->seals[i];
        size_t j = i + 1;
        int64_t sid = 1, sseq = 0;
        if (j < s->nseals) {
            sid = s->seals[j].grain - a->grain;
            sseq = a->seq >= 0 && s->seals[j].seq >= 0 ? s->seals[j].seq - a->seq : 0;
        }
        while (j < s->nseals && sid > 0) {
            const struct orch_store_seal *b = &s->seals[j], *p = &s->seals[j - 1];
            if (b->grain - p->grain != sid || b->outcome != a->outcome ||
                b->generation != a->generation || b->at != a->at ||
                (b->seq >= 0) != (a->seq >= 0) || (a->seq >= 0 && b->seq - p->seq != sseq))
                break;
            j++;
        }
        rc = seal_run(s, i, j, sid > 0 ? sid : 1, sseq);
        i = j;
    }
    s->nseals = 0;
    return rc;
}

/* With ORCH_STORE_CHECKS: the grain a report seals is in flight at that generation. The
 * row is read as it is: no held seal is its (it was in the map). */
static int seal_check(orch_store *s, int64_t grain, uint32_t generation)
{
    struct orch_grain_row g;
    bool was = s->flushing;
    s->flushing = true;
    int rc = orch_store_grain_by_id(s, grain, &g);
    s->flushing = was;
    if (rc < 0)
        return rc;
    return g.phase != ORCH_PHASE_SEALED && g.generation == generation
               ? 0
               : orch_error_set(ORCH_ECORRUPT, "%s: grain %lld sealed at generation %u is "
                                               "not in flight at it", s->path,
                                (long long)grain, generation);
}

/* Holds the seal of grain, in flight at generation by this connection's dispatch: 1, or 0
 * when it cannot be held (no memory: written now). */
static int seal_hold(orch_store *s, int64_t grain, enum orch_grain_outcome o,
                     uint32_t generation)
{
    int rc = s->checks ? seal_check(s, grain, generation) : 0;
    if (rc < 0)
        return rc;
    if (s->nseals == SEALS_HELD && (rc = held_flush(s, SAFE_SEAL)) < 0)
        return rc;
    if (s->nseals == s->capseals &&
        orch__grow_n(&s->seals, &s->capseals, s->nseals + 1, sizeof *s->seals) < 0)
        return 0;
    struct orch_store_gent f = {0, -1, -1}; /* none kept: the row's stand */
    gmap_take(&s->flying, grain, &f);
    s->seals[s->nseals++] = (struct orch_store_seal){
        .grain = grain, .seq = f.seq, .at = f.at, .generation = generation, .outcome = (int)o};
    return 1;
}

/* A report's seal: the ready_seq and ready_at kept for a grain whose READY was never
 * written go with it; a stale report leaves them kept. */
static int seal_in_flight(orch_store *s, int64_t grain, enum orch_grain_outcome o,
                          uint32_t generation, bool *done)
{
    struct orch_store_gent fl;
    if (gmap_take(&s->inflight, grain, &fl) && fl.seq == (int64_t)generation) {
        int held = seal_hold(s, grain, o, generation);
        if (held != 0) {
            *done = held > 0;
            return held < 0 ? held : 0;
        }
    }
    struct orch_store_gent f = {0, -1, -1}; /* none kept: NULL, the row's stand */
    bool kept = gmap_take(&s->flying, grain, &f);
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_SEAL_IN_FLIGHT, &st, "lslNsN", grain, orch_grain_outcome_name(o),
                  (int64_t)generation, f.seq, orch_grain_phase_name(ORCH_PHASE_SEALED), f.at);
    if (rc == 0 && (rc = orch_store__run(s, st, done)) == 0 && !*done && kept)
        rc = gmap_put(&s->flying, grain, f.seq, f.at);
    return rc;
}

int orch_store_grain_seal(orch_store *s, int64_t grain, int call, int64_t e,
                          enum orch_grain_outcome o, bool in_flight, uint32_t generation,
                          bool *done)
{
    *done = false; /* also when a statement fails: callers read it */
    if (in_flight)
        return seal_in_flight(s, grain, o, generation, done);
    bool queued;
    sqlite3_stmt *st;
    gmap_take(&s->inflight, grain, NULL); /* the table decides, as for any unrun grain */
    int rc = unrun_queued(s, grain, call, e, &queued);
    if (rc == 0)
        rc = orch_store__stmt(s, F_GRAIN_SEAL_UNRUN, &st, "lssss", grain, orch_grain_outcome_name(o),
                  orch_grain_phase_name(ORCH_PHASE_WAITING),
                  orch_grain_phase_name(ORCH_PHASE_READY),
                  orch_grain_phase_name(ORCH_PHASE_SEALED));
    if (rc == 0 && (rc = orch_store__run(s, st, done)) == 0 && *done) {
        wait_drop(s, call, e);
        struct orch_store_ready *r = ready_find(s, grain);
        if (r) /* sealed before its READY was written: it never will be */
            r->live = false;
        if (queued) /* its queue entry is stale now */
            rc = gmap_put(&s->unq, grain, 0, 0);
    }
    return rc;
}

int orch_store_grain_reopen(orch_store *s, int64_t grain, bool *done)
{
    *done = false; /* also when a statement fails: callers read it */
    sqlite3_stmt *st;
    gmap_take(&s->inflight, grain, NULL);
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
    gmap_clear(&s->inflight); /* every grain in flight goes back */
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
    int rc = held_flush(s, SAFE_CREATE); /* the rows name grains */
    if (rc < 0)
        return rc;
    struct attempts_ctx a = {.g = g,
                             .pid = pid,
                             .host = host && *host ? host : NULL,
                             .slurm_job = slurm_job && *slurm_job ? slurm_job : NULL,
                             .batch = (int64_t)batch,
                             .now = now_ms()};
    rc = rows_insert(s, ROWS_ATTEMPT, n, bind_attempts_fixed, bind_attempt, &a, first);
    if (rc < 0)
        return rc;
    /* In flight at their generations ("seals held"). A grain left out (no memory) has
     * its seal written at once, checked by the table. */
    for (size_t i = 0; i < n; i++)
        (void)gmap_put(&s->inflight, g[i].grain, (int64_t)g[i].generation, 0);
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

/* Attempt ends held: a report's attempts that ended without a message (every record OK:
 * most reports) are written at the end of the turn, with its other held rows, instead of
 * at once: with --durability machine the commit's flush runs while the payload store's
 * sync is under way (loop.c), where the UPDATEs used to come before it was asked. Ranges
 * that follow one another with the same outcome and time are written as one. Any
 * statement that names the attempt table writes them first (aend_safe), as does the
 * commit; a rollback forgets them with the rows they end. */
#define AENDS_HELD 4096

static int aends_write(orch_store *s, const struct orch_store_aend *a)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ATTEMPTS_END, &st, "lsll", a->at, orch_attempt_outcome_name(a->outcome),
                  a->first, a->last);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

static int aends_flush(orch_store *s)
{
    int rc = 0;
    for (size_t i = 0; i < s->naends && rc == 0; i++)
        rc = aends_write(s, &s->aends[i]);
    s->naends = 0;
    return rc;
}

int orch_store_attempts_end(orch_store *s, int64_t first, int64_t last,
                            enum orch_attempt_outcome o)
{
    struct orch_store_aend a = {first, last, now_ms(), (int)o};
    if (s->naends > 0) {
        struct orch_store_aend *p = &s->aends[s->naends - 1];
        if (p->last + 1 == first && p->outcome == a.outcome && p->at == a.at) {
            p->last = last;
            return 0;
        }
    }
    int rc;
    if (s->naends == AENDS_HELD && (rc = held_flush(s, SAFE_AEND)) < 0)
        return rc;
    if (s->naends == s->capaends &&
        orch__grow_n(&s->aends, &s->capaends, s->naends + 1, sizeof *s->aends) < 0)
        return aends_write(s, &a); /* no memory to hold it: written now */
    s->aends[s->naends++] = a;
    return 0;
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

/* ---- payloads reclaimed before the end of the job (migrations/0008_reclaimed.sql) ------- */

/* ---- reclaimed ids ---------------------------------------------------------------------
 * The ids freed in a transaction are held: s->recl says which (so that an id freed twice in
 * it, read through two ports, counts once), s->reclw lists those not written yet. They are
 * written as spans of consecutive ids (migrations/0016_reclaimed_spans.sql): one row for
 * the run of ids that the readers of a batch free, where there was a row per id. A span
 * that meets or touches one already written is merged with it, so that the table stays
 * as small as the runs allow. An id freed again in a later transaction cannot happen
 * (reclaim.c frees an id in the transaction that seals its last reader); with
 * ORCH_STORE_CHECKS such an overlap is an error, else the spans are merged all the same. */

/* At most this many ids are held; past them they are written, and an id is then looked
 * up in the spans too (one reduce over a million children frees a million ids in a turn). */
#define RECL_HELD ((size_t)1 << 16)

void orch_store__reclaimed_forget(orch_store *s)
{
    if (s->recl.n > 0)
        memset(s->recl.v, 0, s->recl.size * sizeof *s->recl.v);
    s->recl.n = 0;
    s->recl_spilled = false;
}

/* Writes span [first, last], merged with the spans it meets or touches. */
static int span_write(orch_store *s, int64_t first, int64_t last)
{
    for (;;) {
        sqlite3_stmt *st;
        int rc = orch_store__stmt(s, F_SPAN_BEFORE, &st, "l", last + 1);
        if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
            return rc;
        if (rc == 0)
            break;
        int64_t f = sqlite3_column_int64(st, 0), l = sqlite3_column_int64(st, 1);
        sqlite3_reset(st);
        if (l < first - 1)
            break; /* below, apart */
        if (s->checks && l >= first && f <= last)
            return orch_error_set(ORCH_ECORRUPT,
                                  "%s: payload ids %lld..%lld reclaimed again (span %lld..%lld)",
                                  s->path, (long long)first, (long long)last, (long long)f,
                                  (long long)l);
        if ((rc = orch_store__stmt(s, F_SPAN_DROP, &st, "l", f)) < 0 || (rc = orch_store__run(s, st, NULL)) < 0)
            return rc;
        first = f < first ? f : first;
        last = l > last ? l : last;
    }
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_SPAN_PUT, &st, "ll", first, last);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

static int reclaimed_flush(orch_store *s)
{
    orch__sort_u64(s->reclw, s->nreclw);
    int rc = 0;
    for (size_t i = 0, j; i < s->nreclw && rc == 0; i = j) {
        for (j = i + 1; j < s->nreclw && s->reclw[j] == s->reclw[j - 1] + 1; j++)
            ;
        rc = span_write(s, (int64_t)s->reclw[i], (int64_t)s->reclw[j - 1]);
    }
    if (rc == 0)
        s->nreclw = 0;
    return rc;
}

int orch_store_reclaimed_put(orch_store *s, uint64_t payload, bool *added)
{
    assert(orch_store_in_txn(s) && payload > 0 && payload <= INT64_MAX);
    *added = false;
    if (gmap_has(&s->recl, (int64_t)payload))
        return 0; /* freed in this transaction already */
    int rc;
    bool covered;
    if (s->recl_spilled && /* or freed in it and written already */
        ((rc = orch_store_payload_reclaimed(s, payload, &covered)) < 0 || covered))
        return rc;
    if (s->recl.n >= RECL_HELD) {
        if ((rc = held_flush(s, HELD_RECLAIM)) < 0)
            return rc;
        orch_store__reclaimed_forget(s);
        s->recl_spilled = true;
    }
    if (orch__grow_n(&s->reclw, &s->capreclw, s->nreclw + 1, sizeof *s->reclw) < 0)
        return orch_error_set(-ENOMEM, "%s: out of memory for reclaimed ids", s->path);
    if ((rc = gmap_put(&s->recl, (int64_t)payload, 0, 0)) < 0)
        return orch_error_set(rc, "%s: out of memory for reclaimed ids", s->path);
    s->reclw[s->nreclw++] = payload;
    *added = true;
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
