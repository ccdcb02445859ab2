/* held.c — the held-writes cache: its kinds, limits and flush order, the multi-row
 * INSERTs, and the rows held as they are written late (entities, grains, READYs, items,
 * root rows). The contract is held.h's; held_flight.c holds the rest (seals, attempt
 * ends, reclaimed ids) and the look-ups of grains in flight. */
#include "held.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "facts_int.h"
#include "orch_error.h"
#include "store_int.h"
#include "support.h"

/* ---- limits ---------------------------------------------------------------------------
 * At its limit (held.h) a kind is written before one more is held, so that the memory
 * held stays small whatever a turn writes (a million children of one expansion are
 * written HELD_MAX grains at a time). READYs and reclaimed ids are smaller and more; an
 * id reclaimed past RECL_HELD is then looked up in the spans too. */

int orch_store__held_room(orch_store *s, enum orch_held_kind k)
{
    int rc = orch_store__held_flush_kinds(s, k);
    if (rc < 0)
        return rc;
    if (k == HELD_RECLAIM) { /* the ids written are looked up in the spans from now on */
        orch_store__reclaimed_forget(s);
        s->held.recl_spilled = true;
    }
    return 1;
}

/* ---- flush order ------------------------------------------------------------------------ */

static int ready_flush(orch_store *s);
static int created_flush(orch_store *s);
static int items_flush(orch_store *s);
static int roots_flush(orch_store *s);
static int entities_flush(orch_store *s);
static void ready_forget(orch_store *s);
static void roots_forget(orch_store *s);
static void entities_forget(orch_store *s);

static int flush_one(orch_store *s, enum orch_held_kind k)
{
    switch (k) {
    case HELD_ENTITY:
        return entities_flush(s);
    case HELD_GRAIN:
        return created_flush(s);
    case HELD_READY:
        return ready_flush(s);
    case HELD_SEAL:
        return orch_store__seals_flush(s);
    case HELD_AEND:
        return orch_store__aends_flush(s);
    case HELD_ITEM:
        return items_flush(s);
    case HELD_ROOT:
        return roots_flush(s);
    case HELD_RECLAIM:
        return orch_store__reclaimed_flush(s);
    case HELD_PENDING:
        return orch_store__pending_flush(s);
    }
    return 0;
}

/* held.h. The rows that name entities (grains, items, root rows) bring the entities with
 * them; the kinds go in the order of their bits. */
int orch_store__held_flush_kinds(orch_store *s, unsigned kinds)
{
    struct orch_store_held *h = &s->held;
    if (kinds & (HELD_GRAIN | HELD_ITEM | HELD_ROOT))
        kinds |= HELD_ENTITY;
    kinds &= h->kinds;
    bool was = h->flushing;
    h->flushing = true;
    int rc = 0;
    for (unsigned k = 1; rc == 0 && k <= kinds; k <<= 1) {
        if (!(kinds & k))
            continue;
        if ((rc = flush_one(s, (enum orch_held_kind)k)) == 0)
            h->kinds &= ~k;
    }
    h->flushing = was;
    return rc; /* on failure the caller rolls back, which forgets them */
}

int orch_store__held_flush(orch_store *s)
{
    return orch_store__holds(s) ? orch_store__held_flush_kinds(s, HELD_ALL) : 0;
}

/* A rollback may take the parent away, raw SQL may rekey it. */
static void parent_key_forget(struct orch_store_held *h)
{
    free(h->parent_key);
    h->parent_key = NULL;
    h->key_parent = 0;
}

void orch_store__held_forget(orch_store *s)
{
    struct orch_store_held *h = &s->held;
    ready_forget(s);
    h->ncreated = 0;
    h->nitems = 0;
    roots_forget(s);
    entities_forget(s);
    h->nreclw = 0;
    h->nseals = 0;
    h->naends = 0;
    h->kinds = 0;
    /* The attempts begun in the transaction are gone: seals are checked by the table
     * again (orch_store__seal_in_flight), until dispatch fills this anew. */
    orch_store__gmap_clear(&h->inflight);
    orch_store__gmap_clear(&h->pend);
    orch_store__parents_forget(s);
    orch_store__items_forget(s);
    parent_key_forget(h);
    orch_store__reclaimed_forget(s);
    h->next_grain = 0; /* the rows the ids counted on may be gone */
    h->next_entity = 0;
}

void orch_store__held_off(orch_store *s)
{
    assert(!orch_store_in_txn(s) && !orch_store__holds(s));
    s->held.off = true;
}

void orch_store__held_reread(orch_store *s)
{
    struct orch_store_held *h = &s->held;
    orch_store__waiting_forget(s);
    orch_store__parents_forget(s);
    orch_store__items_forget(s);
    parent_key_forget(h);
    s->barriers = BARRIERS_UNKNOWN;
    h->next_grain = 0;
    h->next_entity = 0;
}

void orch_store__held_free(struct orch_store_held *h)
{
    free(h->ready);
    free(h->ready_ix);
    free(h->created);
    for (size_t i = 0; i < h->nroots; i++)
        free(h->roots[i].hash);
    free(h->roots);
    for (size_t i = 0; i < h->nentities; i++)
        free(h->entities[i].key);
    free(h->entities);
    free(h->items);
    free(h->wait);
    free(h->unq.v);
    free(h->flying.v);
    free(h->inflight.v);
    free(h->pend.v);
    free(h->parents);
    free(h->icache);
    free(h->parent_key);
    free(h->seals);
    free(h->aends);
    free(h->recl.v);
    free(h->reclw);
}

/* ---- INSERTs of many rows -----------------------------------------------------------------
 * A statement per row paid SQLite's fixed cost of a statement (the step, the reset, the
 * statement's end) every time, about half of what inserting a small row costs. One
 * INSERT takes up to 64 rows (measured: 3.3 us a row alone, 1.5 us in statements of 64):
 * a batch's attempt rows, and the grains and items held back (below). A statement of 2^k
 * rows is prepared once per size, so that n rows take at most n / 64 + 6 statements. */
_Static_assert(ROWS_ENTITY < ORCH_STORE_ROW_KINDS, "raise ORCH_STORE_ROW_KINDS");

/* Each kind: the INSERT up to VALUES, and one row, '#' standing for each of the row's own
 * parameters; they are numbered after ?1 .. ?nfixed, which every row of a statement shares. */
static const struct {
    const char *head, *row;
    int nfixed, per;
    bool rowids;   /* rows take consecutive rowids, which the caller is told */
    unsigned need; /* the held kinds written first (as fact_need, facts.c) */
} row_kinds[] = {
    [ROWS_ATTEMPT] = {"INSERT INTO attempt (grain_id, generation, worker_pid, host, slurm_job, "
                      "batch, started_at) VALUES ",
                      "(#, #, ?1, ?2, ?3, ?4, ?5)", 5, 2, true,
                      HELD_KINDS_OF(PART_GRAIN | PART_ATTEMPT)},
    [ROWS_GRAIN] = {"INSERT INTO grain (id, call_id, entity_id, phase, generation, pending, "
                    "ready_seq, ready_at) VALUES ",
                    "(#, #, #, #, 0, #, #, #)", 0, 7, false,
                    HELD_KINDS_OF(PART_ENTITY | PART_GRAIN)},
    [ROWS_ITEM] = {"INSERT INTO item (port_id, entity_id, state, payload_id, payload_size) "
                   "VALUES ",
                   "(#, #, #, #, #)", 0, 5, false, HELD_KINDS_OF(PART_ENTITY | PART_ITEM)},
    [ROWS_ROOT] = {"INSERT INTO root (entity_id, domain_id, revision, position, size, "
                   "mtime_ns, hash, admitted_at) VALUES ",
                   "(#, #, #, #, #, #, #, #)", 0, 8, false,
                   HELD_KINDS_OF(PART_ENTITY | PART_ROOT)},
    [ROWS_ENTITY] = {"INSERT INTO entity (id, domain_id, parent_id, ordinal, key) VALUES ",
                     "(#, #, #, #, #)", 0, 5, false, HELD_KINDS_OF(PART_ENTITY)},
};

/* The INSERT of 2^size rows of `kind`. */
static int rows_stmt(orch_store *s, enum orch_rows_kind kind, int size, sqlite3_stmt **out)
{
    if ((*out = s->held.rows[kind][size]) != NULL) {
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
    int rc = orch_store__prepare_as_is(s, sql, out);
    free(sql);
    if (rc == 0)
        s->held.rows[kind][size] = *out;
    return rc;
}

/* held.h. One INSERT numbers its rows one after the other, in the order of VALUES, and
 * nothing else inserts meanwhile. */
int orch_store__rows_insert(orch_store *s, enum orch_rows_kind kind, size_t n,
                            orch_rows_fixed fixed, orch_rows_binder bind, const void *ctx,
                            int64_t *first)
{
    int rc = orch_store__held_before(&s->held, s, row_kinds[kind].need);
    if (rc < 0)
        return rc;
    const int per = row_kinds[kind].per, nfixed = row_kinds[kind].nfixed;
    int64_t first_id = 0;
    for (size_t done = 0; done < n;) {
        int size = 0; /* the largest power of two rows left, at most 2^(SIZES - 1) */
        while (size + 1 < ORCH_STORE_ROW_SIZES && ((size_t)2 << size) <= n - done)
            size++;
        sqlite3_stmt *st;
        int b = SQLITE_OK;
        rc = rows_stmt(s, kind, size, &st);
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

/* ---- READY written late -----------------------------------------------------------------
 * Most grains that become READY are dispatched in the same transaction (the report that
 * makes them READY and the dispatch to the call's idle worker share a turn: 83% and 99%
 * of the second and third calls of scripts/bench/scheduler). A READY is therefore held
 * back until the transaction commits, and a dispatch in between means it is never
 * written: the seal writes it ("grains in flight", held_flight.c). Nothing else can tell:
 * a look-up of the grain sees it READY (grain_read, grains.c), a seal of it forgets it, and
 * every other statement that reads or writes a grain's state writes the held ones first,
 * as does the commit. */

static size_t ready_hash(const orch_store *s, int64_t grain)
{
    return (size_t)(((uint64_t)grain * UINT64_C(0x9e3779b97f4a7c15)) >> 32) &
           (s->held.ready_ix_size - 1);
}

struct orch_held_ready *orch_store__held_ready_find(orch_store *s, int64_t grain)
{
    for (size_t h = ready_hash(s, grain);; h = (h + 1) & (s->held.ready_ix_size - 1)) {
        uint32_t i = s->held.ready_ix[h];
        if (i == 0)
            return NULL;
        if (s->held.ready[i - 1].grain == grain && s->held.ready[i - 1].live)
            return &s->held.ready[i - 1];
    }
}

int orch_store__hold_ready(orch_store *s, int64_t grain, int64_t seq, int64_t at)
{
    int rc = orch_store__held_admit(&s->held, s, HELD_READY, s->held.nready);
    if (rc <= 0)
        return rc;
    if (s->held.nready == s->held.capready) {
        size_t cap = s->held.capready ? s->held.capready * 2 : 1024;
        struct orch_held_ready *v = realloc(s->held.ready, cap * sizeof *v);
        uint32_t *ix = calloc(cap * 2, sizeof *ix);
        if (!v || !ix) {
            if (v)
                s->held.ready = v;
            free(ix);
            return 0; /* no memory to hold it: written now */
        }
        s->held.ready = v;
        s->held.capready = cap;
        free(s->held.ready_ix);
        s->held.ready_ix = ix;
        s->held.ready_ix_size = cap * 2;
        for (size_t i = 0; i < s->held.nready; i++) { /* index the held ones again */
            size_t h = ready_hash(s, s->held.ready[i].grain);
            while (s->held.ready_ix[h])
                h = (h + 1) & (s->held.ready_ix_size - 1);
            s->held.ready_ix[h] = (uint32_t)i + 1;
        }
    }
    size_t h = ready_hash(s, grain);
    while (s->held.ready_ix[h])
        h = (h + 1) & (s->held.ready_ix_size - 1);
    s->held.ready[s->held.nready] = (struct orch_held_ready){grain, seq, at, true};
    s->held.ready_ix[h] = (uint32_t)++s->held.nready;
    s->held.kinds |= HELD_READY;
    return 1;
}

static void ready_forget(orch_store *s)
{
    /* Empties the index slot by slot: as many as were held, not the whole index. */
    for (size_t i = 0; i < s->held.nready; i++) {
        size_t h = ready_hash(s, s->held.ready[i].grain);
        while (s->held.ready_ix[h] != i + 1)
            h = (h + 1) & (s->held.ready_ix_size - 1);
        s->held.ready_ix[h] = 0;
    }
    s->held.nready = 0;
}

/* Writes the held READYs, in runs as the held seals are ("seals held", held_flight.c): one
 * UPDATE for live ones whose ids step by one stride and ready_seqs by another, at one ready_at.
 * A run changes what its READYs one by one would: the grains of its ids that are WAITING. */
static int ready_flush(orch_store *s)
{
    int rc = 0;
    size_t i = 0;
    while (i < s->held.nready && rc == 0) {
        const struct orch_held_ready *a = &s->held.ready[i];
        if (!a->live) {
            i++;
            continue;
        }
        size_t j = i + 1, n = 1;
        const struct orch_held_ready *last = a;
        int64_t sid = 0, sseq = 0;
        for (; j < s->held.nready; j++) {
            const struct orch_held_ready *b = &s->held.ready[j];
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
        rc = n == 1 ? orch_store__stmt(s, F_GRAIN_READY, &st, "llsls", a->grain, a->seq, ready,
                                       a->at, waiting)
                    : orch_store__stmt(s, F_GRAINS_READY_RUN, &st, "llslslll", a->grain, a->seq,
                                       ready, a->at, waiting, sid, sseq, last->grain);
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
 * them alone comes (one that reads or writes grains), or the commit: one INSERT's share per
 * grain, READY in it if it became READY meanwhile. A held grain is always in the look-up table
 * of the waiting grains (a miss there writes them first), and its READY and pending count are
 * applied to it here. An INSERT of a grain that cannot be held writes the held ones
 * first, so that ids stay in order. */

/* Binds held grain i (s->held.created): id, call, entity, phase, pending, ready_seq, ready_at.
 */
static int bind_created(sqlite3_stmt *st, int p, size_t i, const void *ctx)
{
    const struct orch_held_grain *c = &((const orch_store *)ctx)->held.created[i];
    int b = sqlite3_bind_int64(st, p, c->id);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int(st, p + 1, c->call);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 2, c->entity);
    if (b == SQLITE_OK)
        b = sqlite3_bind_text(
            st, p + 3, orch_grain_phase_name(c->seq ? ORCH_PHASE_READY : ORCH_PHASE_WAITING),
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
    int rc =
        orch_store__rows_insert(s, ROWS_GRAIN, s->held.ncreated, NULL, bind_created, s, NULL);
    if (rc == 0)
        s->held.ncreated = 0;
    return rc;
}

/* ---- items written late ------------------------------------------------------------------
 * Items are written as grains are (above): held, and written in multi-row INSERTs when a
 * statement that reads or writes items comes, or the commit. An item put twice
 * breaks the table's key then, not at the second put: the same error, a little later,
 * and the turn is rolled back either way. */

/* Binds held item i (s->held.items): port, entity, state, payload, size. */
static int bind_item(sqlite3_stmt *st, int p, size_t i, const void *ctx)
{
    const struct orch_held_item *it = &((const orch_store *)ctx)->held.items[i];
    int b = sqlite3_bind_int(st, p, it->port);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 1, it->entity);
    if (b == SQLITE_OK)
        b = sqlite3_bind_text(st, p + 2, orch_item_state_name((enum orch_item_state)it->state),
                              -1, SQLITE_STATIC);
    if (b == SQLITE_OK)
        b = it->payload ? sqlite3_bind_int64(st, p + 3, it->payload)
                        : sqlite3_bind_null(st, p + 3);
    if (b == SQLITE_OK)
        b = it->size >= 0 ? sqlite3_bind_int64(st, p + 4, it->size)
                          : sqlite3_bind_null(st, p + 4);
    return b;
}

static int items_flush(orch_store *s)
{
    int rc = orch_store__rows_insert(s, ROWS_ITEM, s->held.nitems, NULL, bind_item, s, NULL);
    if (rc == 0)
        s->held.nitems = 0;
    return rc;
}

/* Binds held root row i (s->held.roots). */
static int bind_root(sqlite3_stmt *st, int p, size_t i, const void *ctx)
{
    const struct orch_held_root *r = &((const orch_store *)ctx)->held.roots[i];
    int b = sqlite3_bind_int64(st, p, r->entity);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int(st, p + 1, r->domain);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 2, r->revision);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 3, r->position);
    if (b == SQLITE_OK)
        b = r->size >= 0 ? sqlite3_bind_int64(st, p + 4, r->size)
                         : sqlite3_bind_null(st, p + 4);
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
    for (size_t i = 0; i < s->held.nroots; i++)
        free(s->held.roots[i].hash);
    s->held.nroots = 0;
}

static int roots_flush(orch_store *s)
{
    int rc = orch_store__rows_insert(s, ROWS_ROOT, s->held.nroots, NULL, bind_root, s, NULL);
    if (rc == 0)
        roots_forget(s);
    return rc;
}

/* ---- root entities written late ---------------------------------------------------------
 * A root entity was one INSERT of its own (three B-trees: the table, entity_root,
 * entity_by_key), 15k instructions, a statement's fixed cost a good part of it. Root
 * entities with their key given (admission's) are held like the grains (above), with ids of
 * their own (consecutive, from the table's largest), and written in multi-row INSERTs
 * before any statement that reads entities (an INSERT reads those its foreign keys name),
 * and before the held rows that name them. An entity that cannot be held (a
 * child: its key is made from its parent's by the INSERT) writes the held ones first, so
 * that ids stay in order. */

/* Binds held entity i (s->held.entities): id, domain, parent (NULL for a root), ordinal,
 * key. */
static int bind_entity(sqlite3_stmt *st, int p, size_t i, const void *ctx)
{
    const struct orch_held_entity *en = &((const orch_store *)ctx)->held.entities[i];
    int b = sqlite3_bind_int64(st, p, en->id);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int(st, p + 1, en->domain);
    if (b == SQLITE_OK)
        b = en->parent ? sqlite3_bind_int64(st, p + 2, en->parent) : sqlite3_bind_null(st, p + 2);
    if (b == SQLITE_OK)
        b = sqlite3_bind_int64(st, p + 3, en->ordinal);
    if (b == SQLITE_OK)
        b = sqlite3_bind_text(st, p + 4, en->key, -1, SQLITE_STATIC);
    return b;
}

static void entities_forget(orch_store *s)
{
    for (size_t i = 0; i < s->held.nentities; i++)
        free(s->held.entities[i].key);
    s->held.nentities = 0;
}

static int entities_flush(orch_store *s)
{
    int rc =
        orch_store__rows_insert(s, ROWS_ENTITY, s->held.nentities, NULL, bind_entity, s, NULL);
    if (rc == 0)
        entities_forget(s);
    return rc;
}

/* ---- holding a row ---------------------------------------------------------------------- */

/* The key of a child: its parent's, '/', its ordinal (what ENTITY_PUT's INSERT makes).
 * NULL: no memory, or the parent has none (the INSERT then fails on it). */
static char *child_key(orch_store *s, int64_t parent, int64_t ordinal, int *rc)
{
    struct orch_store_held *h = &s->held;
    const char *pk = NULL;
    if (h->nentities && parent >= h->entities[0].id &&
        parent < h->entities[0].id + (int64_t)h->nentities)
        pk = h->entities[parent - h->entities[0].id].key;
    else if (h->key_parent == parent)
        pk = h->parent_key;
    else {
        char *k = NULL;
        if ((*rc = orch_store__entity_key(s, parent, &k)) <= 0 || !k)
            return NULL;
        free(h->parent_key);
        h->parent_key = k;
        h->key_parent = parent;
        pk = k;
    }
    size_t n = strlen(pk) + 2 + 20;
    char *key = malloc(n);
    if (key)
        snprintf(key, n, "%s/%lld", pk, (long long)ordinal);
    return key;
}

int orch_store__hold_entity(orch_store *s, int domain, int64_t parent, int64_t ordinal,
                            const char *key, int64_t *id)
{
    int rc = orch_store__held_admit(&s->held, s, HELD_ENTITY, s->held.nentities);
    if (rc <= 0)
        return rc;
    if (s->held.nentities == s->held.capentities &&
        orch__grow_n(&s->held.entities, &s->held.capentities, s->held.nentities + 1,
                     sizeof *s->held.entities) < 0)
        return 0;
    char *copy = key ? strdup(key) : child_key(s, parent, ordinal, &rc);
    if (!copy)
        return rc < 0 ? rc : 0;
    if (s->held.next_entity == 0) { /* the first since an entity was INSERTed another way */
        sqlite3_stmt *st;
        if ((rc = orch_store__stmt(s, F_ENTITY_NEXT_ID, &st, "")) < 0 ||
            (rc = orch_store__one(s, st)) < 0) {
            free(copy);
            return rc;
        }
        s->held.next_entity = rc == 1 ? sqlite3_column_int64(st, 0) : 1;
        sqlite3_reset(st);
    }
    *id = s->held.next_entity++;
    s->held.entities[s->held.nentities++] = (struct orch_held_entity){
        .id = *id, .parent = parent, .ordinal = ordinal, .key = copy, .domain = domain};
    s->held.kinds |= HELD_ENTITY;
    return 1;
}

/* A held grain is kept among the WAITING grains for look-ups too: one that cannot be is not
 * held. */
int orch_store__hold_grain(orch_store *s, int call, int64_t e, int64_t parent, int64_t pending)
{
    int rc = orch_store__held_admit(&s->held, s, HELD_GRAIN, s->held.ncreated);
    if (rc <= 0)
        return rc;
    if (s->held.ncreated == s->held.capcreated &&
        orch__grow_n(&s->held.created, &s->held.capcreated, s->held.ncreated + 1,
                     sizeof *s->held.created) < 0)
        return 0;
    if (s->held.next_grain == 0) { /* the first since a grain was INSERTed another way */
        sqlite3_stmt *st;
        if ((rc = orch_store__stmt(s, F_GRAIN_NEXT_ID, &st, "")) < 0 ||
            (rc = orch_store__one(s, st)) < 0)
            return rc;
        s->held.next_grain = rc == 1 ? sqlite3_column_int64(st, 0) : 1;
        sqlite3_reset(st);
    }
    if (!orch_store__waiting_put(s, &(struct orch_held_waiting){.entity = e,
                                                                .id = s->held.next_grain,
                                                                .parent = parent,
                                                                .pending = pending,
                                                                .call = call}))
        return 0;
    s->held.created[s->held.ncreated++] = (struct orch_held_grain){
        .id = s->held.next_grain++, .entity = e, .pending = pending, .call = call};
    s->held.kinds |= HELD_GRAIN;
    return 1;
}

int orch_store__hold_item(orch_store *s, const struct orch_held_item *it)
{
    int rc = orch_store__held_admit(&s->held, s, HELD_ITEM, s->held.nitems);
    if (rc <= 0)
        return rc;
    if (s->held.nitems == s->held.capitems &&
        orch__grow_n(&s->held.items, &s->held.capitems, s->held.nitems + 1,
                     sizeof *s->held.items) < 0)
        return 0;
    s->held.items[s->held.nitems++] = *it;
    s->held.kinds |= HELD_ITEM;
    return 1;
}

int orch_store__hold_root(orch_store *s, const struct orch_held_root *r, const char *hash)
{
    int rc = orch_store__held_admit(&s->held, s, HELD_ROOT, s->held.nroots);
    if (rc <= 0)
        return rc;
    char *copy = hash ? strdup(hash) : NULL;
    if ((hash && !copy) || (s->held.nroots == s->held.caproots &&
                            orch__grow_n(&s->held.roots, &s->held.caproots, s->held.nroots + 1,
                                         sizeof *s->held.roots) < 0)) {
        free(copy);
        return 0;
    }
    struct orch_held_root *held = &s->held.roots[s->held.nroots++];
    *held = *r;
    held->hash = copy;
    s->held.kinds |= HELD_ROOT;
    return 1;
}
