/* store_int.h — internals of the state store, shared by store.c, migrate.c, job.c, the
 * generated migrations.c and the store's tests. Not for the engine.
 *
 *   orch_store_open ──► connection + pragmas ──► sanity (not a db? truncated? an orch job?)
 *                          │
 *                          └─► orch_store__migrate: for each embedded migration newer than
 *                              user_version: BEGIN IMMEDIATE; script; foreign_key_check;
 *                              PRAGMA user_version = N; COMMIT
 */
#ifndef ORCH_STORE_INT_H
#define ORCH_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "orch_store.h"

/* walbuf.c: the VFS the store opens its connections with (a log's frames handed to the
 * kernel a commit at a time). Registered once by the store; 0 or a negative errno (the
 * store then opens with SQLite's default VFS). */
#define ORCH_STORE_WALBUF_VFS "orch-walbuf"
int orch_store__walbuf_register(void);

/* What the VFS did in this process (for its tests): log writes SQLite made, the writes
 * of the buffer to the file, and the log writes made at once (not appends). */
struct orch_store_walbuf_stats {
    unsigned long writes, flushes, through;
};
void orch_store__walbuf_stats(struct orch_store_walbuf_stats *out);

/* One migration: migrations/NNNN_name.sql, compiled in by scripts/embed-migrations. */
struct orch_migration {
    int version; /* NNNN: 1, 2, 3 ... */
    const char *name;
    const char *sql; /* the file's text */
};

/* The embedded migrations, in order: orch_migrations[i].version == i + 1. */
extern const struct orch_migration orch_migrations[];
extern const int orch_nmigrations;

/* One cached statement: hash of its text, for a cheap first comparison. */
struct orch_store_cached {
    unsigned hash;
    sqlite3_stmt *stmt;
};

/* Statement slots of facts.c (one per statement it runs): pointers into the cache. */
#define ORCH_STORE_FACT_SLOTS 96

/* facts.c inserts many rows of a kind (attempts, held grains, held items) 2^0 ..
 * 2^(SIZES - 1) rows a statement. */
#define ORCH_STORE_ROW_KINDS 5
#define ORCH_STORE_ROW_SIZES 7

/* A grain created but not written yet (facts.c, "grains written late"): seq 0 while it
 * waits, else READY at ready_seq seq since `at`. */
struct orch_store_created {
    int64_t id, entity, pending, seq, at;
    int call;
};

/* An item not written yet (facts.c, "items written late"). */
struct orch_store_item {
    int64_t entity, payload, size; /* payload 0: none; size -1: none */
    int port;
    int state; /* an orch_item_state */
};

/* A READY not written yet (facts.c, "READY written late"). */
struct orch_store_ready {
    int64_t grain, seq, at;
    bool live; /* false once dispatched or sealed in the same transaction */
};

/* A root entity not written yet (facts.c, "root entities written late"). key is the
 * store's copy. */
struct orch_store_entity {
    int64_t id, ordinal;
    char *key;
    int domain;
};

/* A root row not written yet (facts.c, orch_store_root_put). size, mtime_ns < 0 and hash
 * NULL: none (a lines() root). hash is the store's copy. */
struct orch_store_root {
    int64_t entity, revision, position, size, mtime_ns, at;
    char *hash;
    int domain;
};

/* A WAITING grain as facts.c keeps it for look-ups by (call, entity) ("the waiting
 * grains", facts.c). id 0: an empty slot. */
struct orch_store_waiting {
    int64_t entity, id, parent, pending;
    int call;
};

/* A table keyed by grain id (facts.c, "grains in flight"): open addressing with linear
 * probing, deleted by backward shift; grain 0 marks an empty slot; size a power of two. */
struct orch_store_gent {
    int64_t grain, seq, at;
};
struct orch_store_gmap {
    struct orch_store_gent *v;
    size_t n, size;
};

/* facts.c ("seals held"): a grain in flight that a report sealed, not written yet. seq,
 * at: the ready_seq and ready_at it takes (s->flying's), -1 for the row's own. */
struct orch_store_seal {
    int64_t grain, seq, at;
    uint32_t generation;
    int outcome; /* enum orch_grain_outcome */
};

/* Attempt rows first..last ended at `at` with outcome, not written yet (facts.c, "attempt
 * ends held"). */
struct orch_store_aend {
    int64_t first, last, at;
    int outcome; /* enum orch_attempt_outcome */
};

/* Fields are written by the store's own functions only. */
struct orch_store {
    sqlite3 *db;
    char *path;        /* as given to open; prefix of every error detail */
    int flags;         /* orch_store_flags */
    pid_t pid;         /* the process that opened it: a store never crosses fork */
    int found_version; /* user_version when opened */
    int version;       /* user_version now */
    bool in_txn;       /* between orch_store_begin and commit/rollback */
    struct orch_store_cached *cache; /* the prepared statements, in first-use order */
    size_t ncache, capcache;
    sqlite3_stmt *fact[ORCH_STORE_FACT_SLOTS]; /* facts.c: owned by the cache above */
    /* facts.c: the payload id high-water mark (orch_store_payload_mark). payload_named:
     * the largest id that an item put by this connection names, the open transaction's
     * included; payload_mark: the largest this connection has committed to job.payload_mark
     * (0 until it raises it). The commit raises the row when payload_named is above. */
    uint64_t payload_named, payload_mark;
    /* facts.c: the INSERTs of 1, 2, 4, ... rows of each kind (rows_stmt): pointers into
     * the cache above, prepared on first use. */
    sqlite3_stmt *rows[ORCH_STORE_ROW_KINDS][ORCH_STORE_ROW_SIZES];
    /* facts.c: the grains made READY in the open transaction and not written yet, in that
     * order, and an open-addressing index of them by grain id (entry + 1; 0 is empty). */
    struct orch_store_ready *ready;
    size_t nready, capready;
    uint32_t *ready_ix;
    size_t ready_ix_size; /* a power of two, twice capready at least; 0 before first use */
    bool flushing;
    /* facts.c: the grains created in the open transaction and not written yet, with
     * consecutive ids from created[0].id; next_grain: the id the next one takes (0: not
     * known, read from the table). */
    struct orch_store_created *created;
    size_t ncreated, capcreated;
    int64_t next_grain;
    /* facts.c: the items put in the open transaction and not written yet, in that order. */
    struct orch_store_item *items;
    size_t nitems, capitems;
    /* facts.c: the root rows put in the open transaction and not written yet. */
    struct orch_store_root *roots;
    size_t nroots, caproots;
    /* facts.c: the root entities put in the open transaction and not written yet, with
     * consecutive ids from entities[0].id; next_entity: the id the next one takes (0: not
     * known, read from the table). */
    struct orch_store_entity *entities;
    size_t nentities, capentities;
    int64_t next_entity;
    /* facts.c: the waiting grains made by this connection, open addressing by (call,
     * entity) with linear probing; wait_size a power of two (0 before first use). */
    struct orch_store_waiting *wait;
    size_t nwait, wait_size;
    /* facts.c ("grains in flight"): READY grains sealed by a barrier while queued, until
     * their queue entry comes out; and the grains dispatched in the transaction that made
     * them READY, whose READY is written with their seal or requeue instead. */
    struct orch_store_gmap unq, flying;
    /* facts.c ("seals held"): every grain that this connection's dispatch put in flight,
     * with the generation it runs at (in `seq`), until it is sealed or put back; and the
     * seals held back, in the order they were made. */
    struct orch_store_gmap inflight;
    struct orch_store_seal *seals;
    size_t nseals, capseals;
    struct orch_store_aend *aends;
    size_t naends, capaends;
    /* facts.c ("reclaimed ids"): the payload ids reclaimed in the open transaction, and
     * those of them not written yet. */
    struct orch_store_gmap recl;
    uint64_t *reclw;
    size_t nreclw, capreclw;
    bool recl_spilled; /* more than facts.c holds were freed: some are written */
    bool checks; /* ORCH_STORE_CHECKS: every cached look-up is compared with the row */
    /* background.c: the thread that checkpoints and syncs (NULL when none), and the result
     * of the last orch_store_sync_begin made without it. */
    struct orch_store_bg *bg;
    int sync_rc;
    /* The open transaction was rolled back by SQLite itself after an error (orch_store_step):
     * that error, and its detail; 0 while the transaction stands. */
    int txn_lost;
    char txn_lost_why[256];
};

/* Writes the grains and READY transitions held back in the open transaction (facts.c):
 * called before any statement that may read them, and by commit. Returns 0 or an error
 * (then the caller rolls back). */
int orch_store__held_flush(orch_store *s);
/* Forgets them (rollback). */
void orch_store__held_forget(orch_store *s);
/* The connection as it is, held writes not written (tests that look at what is held). */
static inline sqlite3 *orch_store__db_as_is(orch_store *s)
{
    return s->db;
}
/* Whether any is held. */
static inline bool orch_store__holds(const orch_store *s)
{
    return s->nready > 0 || s->ncreated > 0 || s->nitems > 0 || s->nroots > 0 ||
           s->nentities > 0 || s->nreclw > 0 || s->nseals > 0 || s->naends > 0;
}
/* fdatasync of the file at path (store.c); with missing_ok a file that does not exist has
 * nothing to sync. And of a database file's log, then of the file itself (either may be
 * missing). 0 or -errno, the detail set (it is the calling thread's: background.c's
 * threads use them too). */
int orch_store__sync_file(const char *path, bool missing_ok);
int orch_store__sync_state(const char *path, const char *wal);
/* background.c, for tests: sets the log sizes (frames) at which the thread checkpoints and
 * past which the driver's connection does; waits until the threads have nothing to do, then
 * gives the checkpoints it made, the frames its last one had copied, and the log size the
 * last commit left. The thread must run. */
void orch_store__background_tune(orch_store *s, int frames, int frames_max);
void orch_store__background_idle(orch_store *s, int64_t *cycles, int *copied,
                                 int *last_frames);
/* Forgets which payload ids the transaction reclaimed (its end). */
void orch_store__reclaimed_forget(orch_store *s);
/* Forgets the waiting grains kept for look-ups (rollback). */
void orch_store__waiting_forget(orch_store *s);

/* orch_store_open with a given migration list, for tests of the migration machinery
 * (older, newer and failing schemas). migs[i].version must be i + 1. */
int orch_store__open_with(const char *path, int flags, const struct orch_migration *migs,
                          int nmigs, orch_store **out);

/* Brings the store to migs[nmigs-1].version (migrate.c). Called by open, with the
 * version found on disk in s->found_version; updates s->version. */
int orch_store__migrate(orch_store *s, const struct orch_migration *migs, int nmigs);

/* Raises job.payload_mark to payload_named if it is above what this connection committed
 * there (facts.c): called by orch_store_commit() inside the transaction, just before
 * COMMIT, so that the mark commits with the items that name the ids. Returns 0 or a
 * translated error. */
int orch_store__payload_mark_raise(orch_store *s);

/* Reads an integer PRAGMA (user_version, application_id, page_count, ...). */
int orch_store__pragma_int(orch_store *s, const char *pragma, int64_t *out);

#endif
