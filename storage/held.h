/* held.h — the held-writes cache of the state store: rows that a transaction writes are
 * kept in memory and written late, in multi-row statements, or never when a later write
 * of the same transaction makes them moot. Private to storage/ (held.c, held_flight.c,
 * facts.c, grains.c, roots.c, store.c). Not for the engine.
 *
 * What is held. Nine kinds of row (enum orch_held_kind), each written by one flush:
 *
 *   kind     what is held                          written as                 limit
 *   ENTITY   an entity with its key                multi-row INSERT           HELD_MAX
 *   GRAIN    a grain created (WAITING or READY)    multi-row INSERT           HELD_MAX
 *   READY    a WAITING grain made READY            UPDATE per run of ids      READY_HELD
 *   SEAL     the seal of a grain this connection   UPDATE per run of ids      SEALS_HELD
 *            put in flight, at its generation
 *   AEND     attempts ended without a message      UPDATE per id range        AENDS_HELD
 *   ITEM     an item put                           multi-row INSERT           HELD_MAX
 *   ROOT     a root row put                        multi-row INSERT           HELD_MAX
 *   RECLAIM  a payload id reclaimed                a span of reclaimed_span   RECL_HELD
 *   PENDING  the pending count of a kept WAITING    UPDATE per grain           PENDING_HELD
 *            grain (the last one set)
 *
 * A row is held only inside a transaction, and a kind at its limit is flushed before one
 * more is held. A hold that cannot be made (no memory, or holding off) writes the row
 * at once, after the held rows it must follow (ids stay in order).
 *
 * When it is flushed. Before a statement that could see it, and by the commit (and
 * orch_store_flush). Which statements could see which kind is derived, not listed: every
 * statement of facts_int.h's table declares the parts of the job (enum orch_fact_part)
 * that it reads and that it writes, and each kind of held row writes some parts
 * (HELD_WRITES_*); a statement flushes the held kinds that write a part it reads or
 * writes (HELD_KINDS_OF), less the kinds its caller reads through the cache itself (its
 * `via` column: the look-up of a grain applies the held READYs, a grain created here is
 * updated where it is held). The test before a statement is one AND of two masks
 * (orch_store__held_before). A flush writes the kinds in the order of enum
 * orch_held_kind, and the entities always with the rows that name them. Any other SQL
 * (orch_store_prepare, orch_store_exec, orch_store_db) flushes everything first.
 *
 * What a reader of SQL sees. Another connection sees only committed rows, and a commit
 * flushes everything first: every committed row is the row that writing each fact at
 * once would have left, with one exception. A grain that was made READY and dispatched
 * in the same transaction has its READY never written: until its seal (or requeue, or
 * interrupt) writes its ready_seq and ready_at, its row reads WAITING with the pending
 * count, ready_seq and ready_at it had before. Its open attempt says that it runs (the
 * `grains` view counts it in flight). This connection's own statements see held rows as
 * written, that exception aside.
 *
 * What a kill loses. Nothing committed: held rows live in this process's memory only,
 * and belong to the open transaction, which a kill rolls back. A rollback forgets them.
 * tests/test_held.c holds the cache to this contract: random sequences of the store's
 * operations with the cache on and off (orch_store__held_off), and across a kill; and
 * the statement table's declarations to the tables each statement names.
 *
 * Look-up tables that are no held writes live here too (held_flight.c): the WAITING grains
 * by (call, entity) for the look-ups of propagation, the grains in flight and their
 * generations, the READY ones a barrier sealed while queued. They only answer what the
 * table would; with ORCH_STORE_CHECKS every answer is compared with the row.
 */
#ifndef ORCH_HELD_H
#define ORCH_HELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "orch_states.h"

typedef struct orch_store orch_store;

/* The kinds of held row, in the order a flush writes them. */
enum orch_held_kind {
    HELD_ENTITY = 1 << 0,
    HELD_GRAIN = 1 << 1,
    HELD_READY = 1 << 2,
    HELD_SEAL = 1 << 3,
    HELD_AEND = 1 << 4,
    HELD_ITEM = 1 << 5,
    HELD_ROOT = 1 << 6,
    HELD_RECLAIM = 1 << 7,
    HELD_PENDING = 1 << 8
};
#define HELD_ALL ((1u << 9) - 1)

/* The parts of the job that held rows change, as statements declare what they read and
 * write (facts_int.h). Tables no held row is in are not parts: a statement that reads
 * only those declares 0. An INSERT reads the rows its foreign keys name. */
enum orch_fact_part {
    PART_ENTITY = 1 << 0,  /* entity rows */
    PART_GRAIN = 1 << 1,   /* which grains exist: ids, call, entity */
    PART_PHASE = 1 << 2,   /* a grain's state: phase, pending, outcome, generation, ready_* */
    PART_ATTEMPT = 1 << 3, /* which attempts exist, and what they ran */
    PART_ENDED = 1 << 4,   /* an attempt's end: outcome, ended_at, message */
    PART_ITEM = 1 << 5,
    PART_ROOT = 1 << 6,
    PART_SPAN = 1 << 7 /* reclaimed_span */
};

/* The parts each kind of held row writes. */
#define HELD_WRITES_ENTITY PART_ENTITY
#define HELD_WRITES_GRAIN (PART_GRAIN | PART_PHASE)
#define HELD_WRITES_READY PART_PHASE
#define HELD_WRITES_SEAL PART_PHASE
#define HELD_WRITES_AEND PART_ENDED
#define HELD_WRITES_ITEM PART_ITEM
#define HELD_WRITES_ROOT PART_ROOT
#define HELD_WRITES_RECLAIM PART_SPAN
#define HELD_WRITES_PENDING PART_PHASE

/* The kinds of held row that write any of `parts` (a constant expression). */
#define HELD_KIND_IF(parts, k) (((parts)&HELD_WRITES_##k) ? HELD_##k : 0)
#define HELD_KINDS_OF(parts)                                                                   \
    (HELD_KIND_IF(parts, ENTITY) | HELD_KIND_IF(parts, GRAIN) | HELD_KIND_IF(parts, READY) |   \
     HELD_KIND_IF(parts, SEAL) | HELD_KIND_IF(parts, AEND) | HELD_KIND_IF(parts, ITEM) |       \
     HELD_KIND_IF(parts, ROOT) | HELD_KIND_IF(parts, RECLAIM) | HELD_KIND_IF(parts, PENDING))

/* A held grain: seq 0 while it waits, else READY at ready_seq seq since `at`. */
struct orch_held_grain {
    int64_t id, entity, pending, seq, at;
    int call;
};

/* A held item. */
struct orch_held_item {
    int64_t entity, payload, size; /* payload 0: none; size -1: none */
    int port;
    int state; /* an orch_item_state */
};

/* A held READY. */
struct orch_held_ready {
    int64_t grain, seq, at;
    bool live; /* false once dispatched or sealed in the same transaction */
};

/* A held entity (parent 0: a root). key is the cache's copy. */
struct orch_held_entity {
    int64_t id, parent, ordinal;
    char *key;
    int domain;
};

/* A held root row. size, mtime_ns < 0 and hash NULL: none (a lines() root). hash is the
 * cache's copy. */
struct orch_held_root {
    int64_t entity, revision, position, size, mtime_ns, at;
    char *hash;
    int domain;
};

/* A WAITING grain kept for look-ups by (call, entity). id 0: an empty slot. */
struct orch_held_waiting {
    int64_t entity, id, parent, pending;
    int call;
};

/* A table keyed by grain id: open addressing with linear probing, deleted by backward
 * shift; grain 0 marks an empty slot; size a power of two. */
struct orch_held_gent {
    int64_t grain, seq, at;
};
struct orch_held_gmap {
    struct orch_held_gent *v;
    size_t n, size;
};

/* A held seal of a grain in flight. seq, at: the ready_seq and ready_at it takes
 * (flying's), -1 for the row's own. */
struct orch_held_seal {
    int64_t grain, seq, at;
    uint32_t generation;
    int outcome; /* enum orch_grain_outcome */
};

/* Held ends of attempt rows first..last, at `at` with outcome. */
struct orch_held_aend {
    int64_t first, last, at;
    int outcome; /* enum orch_attempt_outcome */
};

/* facts.c inserts many rows of a kind (attempts, held grains, items, roots, entities)
 * 2^0 .. 2^(SIZES - 1) rows a statement. */
#define ORCH_STORE_ROW_KINDS 5
#define ORCH_STORE_ROW_SIZES 7

/* The cache, embedded in struct orch_store (s->held). Its fields are written by held.c and
 * held_flight.c, except that facts.c and grains.c reset next_grain and next_entity after an
 * INSERT of their own, and take grains out of the maps of grains in flight. */
struct orch_store_held {
    unsigned kinds; /* the orch_held_kinds that hold a row now */
    bool flushing;  /* a flush (or a read of a row as it is) runs: no statement flushes */
    bool off;       /* nothing is held: every row is written at once (tests) */
    /* The INSERTs of 1, 2, 4, ... rows of each kind: pointers into the store's cache of
     * statements, prepared on first use. */
    sqlite3_stmt *rows[ORCH_STORE_ROW_KINDS][ORCH_STORE_ROW_SIZES];
    /* READY: in the order made, and an index by grain id (entry + 1; 0 is empty). */
    struct orch_held_ready *ready;
    size_t nready, capready;
    uint32_t *ready_ix;
    size_t ready_ix_size; /* a power of two, twice capready at least; 0 before first use */
    /* GRAIN: consecutive ids from created[0].id; next_grain: the id the next one takes
     * (0: not known, read from the table). */
    struct orch_held_grain *created;
    size_t ncreated, capcreated;
    int64_t next_grain;
    struct orch_held_item *items; /* ITEM, in the order put */
    size_t nitems, capitems;
    struct orch_held_root *roots; /* ROOT */
    size_t nroots, caproots;
    /* ENTITY: consecutive ids from entities[0].id; next_entity as next_grain. */
    struct orch_held_entity *entities;
    size_t nentities, capentities;
    int64_t next_entity;
    /* The key of the last parent a held child was given a key from (key_parent 0: none):
     * the children of one expansion are published together. */
    int64_t key_parent;
    char *parent_key;
    /* SEAL, in the order made; AEND. */
    struct orch_held_seal *seals;
    size_t nseals, capseals;
    struct orch_held_aend *aends;
    size_t naends, capaends;
    /* RECLAIM: the ids reclaimed in the open transaction (recl), those of them not written
     * yet (reclw); recl_spilled: more were reclaimed than are held, some are written. */
    struct orch_held_gmap recl;
    uint64_t *reclw;
    size_t nreclw, capreclw;
    bool recl_spilled;
    /* Look-ups (held_flight.c): the WAITING grains made by this connection, open
     * addressing by (call, entity), wait_size a power of two (0 before first use); READY
     * grains sealed by a barrier while queued (unq); grains dispatched in the transaction
     * that made them READY, with the ready_seq and ready_at their seal writes (flying);
     * every grain this connection's dispatch put in flight, with its generation in `seq`
     * (inflight). */
    struct orch_held_waiting *wait;
    size_t nwait, wait_size;
    struct orch_held_gmap unq, flying, inflight;
    /* PENDING: the pending count last set (in `seq`) of each kept WAITING grain whose row
     * is not written yet. A reduce's count goes down once per child input, many times in
     * a transaction; only the last value is written. */
    struct orch_held_gmap pend;
    /* Entities' parents by id, direct-mapped (PARENTS_CACHED slots; NULL before first
     * use): an entity's parent never changes, and propagation asks for it per child
     * input of a reduce and per reclaimed child item. Its slots outnumber the children
     * that wait between their publication and their parent's reduce in a job of many
     * parents (8,192 missed 1.6 look-ups per grain of scripts/bench/autobatch: a tenth of
     * the driver's time). A rollback may take ids back, and raw SQL may do anything: both
     * forget it. */
    struct orch_held_parent {
        int64_t entity, parent;
    } *parents;
    /* Items by (port, entity), direct-mapped (ITEMS_CACHED slots; NULL before first use):
     * reclamation reads each child's item back when a reduce seals. Forgotten as parents
     * are; an item taken back leaves. entity 0: an empty slot. */
    struct orch_held_icached {
        int64_t entity;
        uint64_t payload; /* 0: none */
        int port, state;  /* an orch_item_state */
    } *icache;
};
#define PARENTS_CACHED 65536
#define ITEMS_CACHED 32768

/* ---- the mechanism (held.c) ---------------------------------------------------------- */

/* Writes the held rows of `kinds` (and the entities with the rows that name them), in the
 * order of enum orch_held_kind. 0 or an error: the caller then rolls back, which forgets
 * them. */
int orch_store__held_flush_kinds(orch_store *s, unsigned kinds);

/* Before a statement that reads or writes what held rows of `need` change: writes them.
 * One AND when nothing of `need` is held. */
static inline int orch_store__held_before(struct orch_store_held *h, orch_store *s,
                                          unsigned need)
{
    unsigned k = h->kinds & need;
    return k && !h->flushing ? orch_store__held_flush_kinds(s, k) : 0;
}

/* Frees what the cache allocated (the store's close). */
void orch_store__held_free(struct orch_store_held *h);
/* Forgets the look-ups that any SQL run on the raw connection may make wrong: the WAITING
 * grains kept and the next ids. */
void orch_store__held_reread(orch_store *s);

/* The most rows of a kind held at once (held.c, "limits"). */
#define HELD_MAX 16384
#define READY_HELD 65536
#define SEALS_HELD 16384
#define AENDS_HELD 4096
#define RECL_HELD ((size_t)1 << 16)
#define PENDING_HELD 65536

static inline size_t orch_store__held_limit(enum orch_held_kind k)
{
    switch (k) {
    case HELD_ENTITY:
    case HELD_GRAIN:
    case HELD_ITEM:
    case HELD_ROOT:
        return HELD_MAX;
    case HELD_READY:
        return READY_HELD;
    case HELD_SEAL:
        return SEALS_HELD;
    case HELD_AEND:
        return AENDS_HELD;
    case HELD_RECLAIM:
        return RECL_HELD; /* every id reclaimed in the transaction: written or not */
    case HELD_PENDING:
        return PENDING_HELD;
    }
    return 0; /* NEVER: every kind is listed */
}

/* Writes kind k, at its limit: 1 or an error. */
int orch_store__held_room(orch_store *s, enum orch_held_kind k);

/* Before one more row of kind k is held, n of them held now: 1 (hold it; the kind was
 * written first if at its limit), 0 (holding is off: write it now), or an error. */
static inline int orch_store__held_admit(struct orch_store_held *h, orch_store *s,
                                         enum orch_held_kind k, size_t n)
{
    if (h->off)
        return 0;
    return n < orch_store__held_limit(k) ? 1 : orch_store__held_room(s, k);
}

/* Holds one row of a kind: 1 (held), 0 (not held: the caller writes it now), or an error.
 * The entity gets its id in *id; a root row's hash (NULL: none) is copied. */
int orch_store__hold_entity(orch_store *s, int domain, int64_t parent, int64_t ordinal,
                            const char *key, int64_t *id);
int orch_store__hold_grain(orch_store *s, int call, int64_t e, int64_t parent, int64_t pending);
int orch_store__hold_ready(orch_store *s, int64_t grain, int64_t seq, int64_t at);
int orch_store__hold_item(orch_store *s, const struct orch_held_item *it);
int orch_store__hold_root(orch_store *s, const struct orch_held_root *r, const char *hash);

/* The held grain of id, or NULL. */
static inline struct orch_held_grain *orch_store__held_grain(struct orch_store_held *h,
                                                             int64_t id)
{
    if (h->ncreated == 0 || id < h->created[0].id ||
        id >= h->created[0].id + (int64_t)h->ncreated)
        return NULL;
    return &h->created[id - h->created[0].id];
}
/* The live held READY of grain, or NULL (the look-up only when any is held). */
struct orch_held_ready *orch_store__held_ready_find(orch_store *s, int64_t grain);
static inline struct orch_held_ready *orch_store__held_ready(struct orch_store_held *h,
                                                             orch_store *s, int64_t grain)
{
    return h->nready ? orch_store__held_ready_find(s, grain) : NULL;
}

/* Inserts rows 0 .. n-1 of a row kind (enum orch_rows_kind), in statements of 2^k rows:
 * bind() binds row i's own parameters from p on, fixed() (may be NULL) those all rows
 * share. For attempts, *first receives the first row's id, the rows' ids checked to be
 * consecutive. Writes first the held rows that the INSERT's foreign keys name. */
enum orch_rows_kind { ROWS_ATTEMPT, ROWS_GRAIN, ROWS_ITEM, ROWS_ROOT, ROWS_ENTITY };
typedef int (*orch_rows_fixed)(sqlite3_stmt *st, const void *ctx);
typedef int (*orch_rows_binder)(sqlite3_stmt *st, int p, size_t i, const void *ctx);
int orch_store__rows_insert(orch_store *s, enum orch_rows_kind kind, size_t n,
                            orch_rows_fixed fixed, orch_rows_binder bind, const void *ctx,
                            int64_t *first);

/* ---- grains in flight, seals, attempt ends, reclaimed ids (held_flight.c) ----------- */

/* The kept WAITING grain (call, e), or NULL; keeps one (false when it cannot); drops one. */
struct orch_held_waiting *orch_store__waiting_lookup(orch_store *s, int call, int64_t e);
static inline struct orch_held_waiting *
orch_store__waiting_find(struct orch_store_held *h, orch_store *s, int call, int64_t e)
{
    return h->nwait ? orch_store__waiting_lookup(s, call, e) : NULL;
}
bool orch_store__waiting_put(orch_store *s, const struct orch_held_waiting *v);
void orch_store__waiting_drop(orch_store *s, int call, int64_t e);

int orch_store__gmap_put(struct orch_held_gmap *m, int64_t grain, int64_t seq, int64_t at);
bool orch_store__gmap_has(const struct orch_held_gmap *m, int64_t grain);
/* Takes grain's entry out of m into *out (may be NULL): true if it was there. */
bool orch_store__gmap_remove(struct orch_held_gmap *m, int64_t grain,
                             struct orch_held_gent *out);
static inline bool orch_store__gmap_take(struct orch_held_gmap *m, int64_t grain,
                                         struct orch_held_gent *out)
{
    return m->n ? orch_store__gmap_remove(m, grain, out) : false;
}
void orch_store__gmap_clear(struct orch_held_gmap *m);

/* A report's seal of a grain in flight (orch_store_grain_seal with in_flight). */
int orch_store__seal_in_flight(orch_store *s, int64_t grain, enum orch_grain_outcome o,
                               uint32_t generation, bool *done);

/* Holds the end of attempt rows a->first..last (merged with the last held when they
 * follow it with the same outcome and time): as the other holds. Writes one now. */
int orch_store__hold_aend(orch_store *s, const struct orch_held_aend *a);
/* Writes one held end (attempts.c: with the starts kept for queued batches' rows). */
int orch_store__aend_write(orch_store *s, const struct orch_held_aend *a);

/* The flushes of the kinds held_flight.c holds. */
int orch_store__seals_flush(orch_store *s);
int orch_store__aends_flush(orch_store *s);
int orch_store__reclaimed_flush(orch_store *s);
int orch_store__pending_flush(orch_store *s);

/* The key of entity e, copied into *key (NULL: no memory): 1, 0 (no such entity), or an
 * error (facts.c). */
int orch_store__entity_key(orch_store *s, int64_t e, char **key);

/* The cache of entities' parents (held_flight.c): keeps one (nothing when there is no memory),
 * the slot of e when it holds e (else NULL), forgets them all. */
void orch_store__parent_keep(orch_store *s, int64_t e, int64_t parent);
const struct orch_held_parent *orch_store__parent_cached(const orch_store *s, int64_t e);
void orch_store__parents_forget(orch_store *s);
/* The cache of items (held_flight.c): as the parents', and drops one. */
void orch_store__item_keep(orch_store *s, int port, int64_t e, int state, uint64_t payload);
const struct orch_held_icached *orch_store__item_cached(const orch_store *s, int port,
                                                        int64_t e);
void orch_store__item_drop(orch_store *s, int port, int64_t e);
void orch_store__items_forget(orch_store *s);

#endif
