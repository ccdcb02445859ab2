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

#include "held.h"
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

/* Fields are written by the store's own functions only. */
#define ORCH_STORE_STARTS 64 /* queued batches whose start waits for their end */

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
    /* held.c, held_flight.c: the held-writes cache (held.h). */
    struct orch_store_held held;
    bool checks; /* ORCH_STORE_CHECKS: every cached look-up is compared with the row */
    /* background.c: the thread that checkpoints and syncs (NULL when none), and the result
     * of the last orch_store_sync_begin made without it. */
    struct orch_store_bg *bg;
    int sync_rc;
    /* The open transaction was rolled back by SQLite itself after an error (orch_store_step):
     * that error, and its detail; 0 while the transaction stands. */
    int txn_lost;
    char txn_lost_why[256];
    /* facts.c: whether the suppression table has rows, as far as the open transaction
     * knows (BARRIERS_UNKNOWN at its start, after raw SQL, after a barrier is put or taken
     * back): most jobs have no barrier, and every report of a child asks. */
    enum { BARRIERS_UNKNOWN, BARRIERS_NONE, BARRIERS_SOME } barriers;
    /* attempts.c: the starts of queued batches' attempts (orch_store_attempts_started), kept
     * until their ends write them: rows first..last, `left` of them not ended yet. Not
     * part of a transaction: a rollback keeps them. */
    struct orch_store_start {
        int64_t first, last, at, left;
    } starts[ORCH_STORE_STARTS];
    int nstarts;
};

/* Writes every held row (held.c): called before any SQL that facts_int.h's table does not
 * describe, and by commit. Returns 0 or an error (then the caller rolls back). */
int orch_store__held_flush(orch_store *s);
/* Forgets them (rollback). */
void orch_store__held_forget(orch_store *s);
/* Holds nothing from now on: every row is written at once (tests compare the two). Called
 * outside a transaction. */
void orch_store__held_off(orch_store *s);
/* The connection as it is, held writes not written (tests that look at what is held). */
static inline sqlite3 *orch_store__db_as_is(orch_store *s)
{
    return s->db;
}
/* Whether any is held. */
static inline bool orch_store__holds(const orch_store *s)
{
    return s->held.kinds != 0;
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
