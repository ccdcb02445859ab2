/* orch_store.h — the state store: one SQLite database per job (JOB/state.db).
 *
 * What it owns. Everything a job knows about its structure and execution: the plan
 * (job, domain, call, port), the published entities and expansions, grains and their
 * phases, items, attempts, failures and suppression barriers (DESIGN §6). Payload bytes
 * are not here: items name payload ids of the LMDB store (orch_payload.h).
 *
 * On-disk format. A SQLite 3 database in WAL mode (state.db, state.db-wal,
 * state.db-shm), marked with `PRAGMA application_id` = 'orch'. Its schema is built by the
 * numbered migrations of migrations/NNNN_name.sql, compiled into the binary; `PRAGMA
 * user_version` is the last migration applied. Each table and view is documented in
 * migrations/0001_initial.sql, the reference for its columns.
 *
 * Invariants.
 *   - user_version never exceeds orch_store_schema_latest() in a store this code opened
 *     read-write: an older job is migrated on open, a newer one is refused (ORCH_ENEWER).
 *   - Each migration, and each transaction of orch_store_begin/commit, is atomic: after a
 *     crash of any process, reopening shows exactly the committed transactions.
 *   - Foreign keys are enforced on every connection that has checks on
 *     (orch_store_config), and inside migrations, which check them before committing.
 *   - At most one transaction is open on a store, and only through orch_store_begin();
 *     nesting is a programming error (asserted).
 *
 * Concurrency. One driver writes; any number of read-only connections (status, sql,
 * export) read at the same time: WAL readers see the last committed state and never
 * block the writer. A connection waits up to ORCH_STORE_BUSY_TIMEOUT_MS for a lock before
 * failing with -EBUSY.
 *
 * Errors. Every function that can fail returns 0 or a negative code (orch_error.h) and
 * records a detail that starts with the database path, e.g. "JOB/state.db: database or
 * disk is full". SQLite's result codes are translated here, once:
 *   SQLITE_FULL -> -ENOSPC          SQLITE_CORRUPT*, SQLITE_NOTADB -> ORCH_ECORRUPT
 *   SQLITE_BUSY, SQLITE_LOCKED -> -EBUSY                SQLITE_NOMEM -> -ENOMEM
 *   SQLITE_READONLY* -> -EROFS      SQLITE_CONSTRAINT* -> ORCH_ECONSTRAINT
 *   SQLITE_IOERR*, SQLITE_CANTOPEN -> -errno of the failed system call, else -EIO
 *   SQLITE_INTERRUPT -> -EINTR      SQLITE_TOOBIG -> -E2BIG   SQLITE_PERM/AUTH -> -EACCES
 *   anything else -> ORCH_EDB
 */
#ifndef ORCH_STORE_H
#define ORCH_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

#include "orch_states.h"

/* How long a connection waits for another one's lock before -EBUSY. */
#define ORCH_STORE_BUSY_TIMEOUT_MS 10000

/* 'orch' in ASCII, stored as PRAGMA application_id by the first migration. */
#define ORCH_STORE_APPLICATION_ID 0x6f726368

/* Flags of orch_store_open(). Without CREATE or READONLY, the database must exist and is
 * opened read-write (and migrated if it is older). */
enum orch_store_flags {
    ORCH_STORE_CREATE = 1 << 0,    /* create a new job database; the path must not exist */
    ORCH_STORE_READONLY = 1 << 1,  /* read only: never writes, never migrates */
    ORCH_STORE_SYNC_FULL = 1 << 2, /* PRAGMA synchronous=FULL: also survive a power loss
                                      right after a commit (default NORMAL: a commit may be
                                      lost to a power loss, never to a process crash, and
                                      the database stays consistent either way) */
    ORCH_STORE_NO_WRITER = 1 << 3, /* with READONLY: the caller has made sure that no process
                                      writes the database while it is open (it holds the
                                      job's driver lock, shared). A database whose
                                      write-ahead log holds nothing (no state.db-wal, or an
                                      empty one) is then opened immutable (SQLite's URI
                                      parameter immutable=1), which needs no state.db-shm:
                                      how a job in a directory this process cannot write is
                                      read (a read-only connection must otherwise create or
                                      write the -shm file). One with a log is opened as
                                      without this flag: it needs its -shm file. */
};

/* Settings of every store the process opens, given once before the first open (as
 * sqlite3_config): the command line fills them from the environment (engine/cli/knobs.c,
 * docs/configuration.md). Zeroed: the defaults. The structure is copied. */
struct orch_store_config {
    bool no_walbuf;    /* SQLite's default VFS instead of walbuf.c's buffered one. Taken at
                          the process's first open; later changes do not apply. */
    bool checks;       /* enforce the schema's REFERENCES and CHECK clauses, and compare
                          cached look-ups with their rows (orch_store_checks): what the
                          test suite runs with. Off: a job does not pay for them (store.c,
                          enforce_checks). Taken at each open. */
    int64_t max_pages; /* > 0: every read-write open caps the database at this many pages
                          (orch_store_set_max_pages), as a full disk would: fault tests.
                          Taken at each open. */
};
void orch_store_configure(const struct orch_store_config *c);

/* A connection to one job's state.db.
 *
 * Process rule: a store belongs to the process that opened it. It never crosses a
 * fork(): a child must neither use nor close its parent's store (closing could checkpoint
 * and remove the WAL under the parent); it opens its own. Operations assert this.
 * Thread rule: one thread at a time. */
typedef struct orch_store orch_store;

/* Opens the database at path (normally "JOB/state.db").
 *
 * With ORCH_STORE_CREATE the file is created exclusively (-EEXIST if it exists) and all
 * migrations are applied; if anything fails, the file is removed again. Otherwise the
 * file must exist (-ENOENT); a read-write open applies the migrations it lacks, each in
 * its own transaction. A read-only open applies none and refuses an older job.
 *
 * Returns 0 and sets *out, or:
 *   -EEXIST          CREATE and the path exists
 *   -ENOENT          the path does not exist
 *   -EINVAL          CREATE together with READONLY
 *   ORCH_ECORRUPT    not a SQLite database, a truncated one, a SQLite database that is
 *                    not an orch job, or corruption found while opening
 *   ORCH_ENEWER      the job's schema is newer than this orch ("state.db: job schema
 *                    version 7 is newer than this orch understands (5); upgrade orch")
 *   ORCH_EOLDER      READONLY and the job's schema is older: it must be opened read-write
 *                    once (orch resume) to be upgraded
 *   other codes translated from SQLite (see above), -ENOMEM
 * On failure *out is NULL and nothing is left open.
 *
 * Corruption deeper in the file is found when it is read, as ORCH_ECORRUPT from the
 * function that read it. */
int orch_store_open(const char *path, int flags, orch_store **out);

/* Closes the store: rolls back an open transaction, finalizes the cached statements, and
 * closes the connection. Every statement the caller prepared itself on the raw handle
 * must have been finalized before (asserted). NULL is ignored. */
void orch_store_close(orch_store *s);

/* The raw connection, for the engine's own queries. Owned by the store: do not close it,
 * do not run BEGIN/COMMIT/ROLLBACK on it (use the functions below). Valid until
 * orch_store_close(). Inside a transaction, the writes the store holds back (facts.c:
 * grains, READYs and items written late) are written first, so that queries on the
 * connection see them; if that fails, the commit fails too. What the store keeps in memory
 * of the grains is dropped: the connection may change them. */
sqlite3 *orch_store_db(orch_store *s);

/* The path given to orch_store_open(); valid until orch_store_close(). */
const char *orch_store_path(const orch_store *s);

/* Schema versions: the newest migration compiled into this binary; the version of this
 * store now (after migrating); the version found on disk when it was opened (equal to
 * the current one when open applied nothing, 0 for a new job). */
int orch_store_schema_latest(void);
int orch_store_schema_version(const orch_store *s);
int orch_store_schema_found(const orch_store *s);

/* ---- statements ------------------------------------------------------------------------ */

/* Runs a script of one or more SQL statements, discarding any rows. Returns 0 or a
 * translated error. Do not use it for BEGIN/COMMIT/ROLLBACK. */
int orch_store_exec(orch_store *s, const char *sql);

/* Hands out a prepared statement for sql, compiled once per store and cached by its
 * text: the same text gives the same statement, reset and with its bindings cleared.
 *
 * The statement is owned by the store: never finalize it. It is valid until
 * orch_store_close(), but only until the next orch_store_prepare() of the same text, which
 * resets it: do not nest two uses of one text. Reset it (sqlite3_reset) when done with its
 * rows, so that it does not keep a read transaction open. The cache is meant for the
 * fixed texts of the engine's queries; text built at run time (a varying IN list) would
 * grow it without bound: prepare those with sqlite3_prepare_v2 and finalize them.
 *
 * Returns 0 and sets *out, or a translated error (a syntax error is ORCH_EDB). */
int orch_store_prepare(orch_store *s, const char *sql, sqlite3_stmt **out);

/* Steps a statement of this store (cached or not) and translates the result: 1 when a row
 * is ready, 0 when done, a negative code on error (the statement is then reset). */
int orch_store_step(orch_store *s, sqlite3_stmt *stmt);

/* Translates SQLite result code rc, just returned by a call on this store's connection,
 * into an orch code, recording "PATH: what: sqlite's message" (or "PATH: message" when
 * what is NULL) as the detail. rc must not be SQLITE_OK, SQLITE_ROW or SQLITE_DONE. Use it
 * for the engine's own calls on the raw handle, so that translation stays in one place. */
int orch_store_error(orch_store *s, int rc, const char *what);

/* ---- transactions ---------------------------------------------------------------------- */

/* Starts a write transaction (BEGIN IMMEDIATE: it takes the write lock now, so a commit
 * can never fail for a lock). A transaction is already open: assertion failure.
 * Returns 0, -EBUSY if another connection kept the write lock past the busy timeout, or
 * a translated error. */
int orch_store_begin(orch_store *s);

/* Commits the open transaction (asserted). Returns 0, or a translated error (-ENOSPC when
 * the disk is full, ORCH_ECONSTRAINT for a deferred constraint, ...); on failure the
 * transaction has been rolled back: every change since orch_store_begin() is lost, and the
 * store is usable for a new transaction. */
int orch_store_commit(orch_store *s);

/* Rolls back the open transaction (asserted). Always leaves no transaction open;
 * returns 0, or a translated error if SQLite reported one while rolling back. */
int orch_store_rollback(orch_store *s);

/* Whether a transaction is open. */
int orch_store_in_txn(const orch_store *s);
/* Whether checks are on (orch_store_config): callers may then verify what they
 * otherwise trust. */
bool orch_store_checks(const orch_store *s);

/* Makes every committed transaction durable through a machine crash, whatever the sync
 * setting: fdatasync of the write-ahead log and of the database file (WAL mode with
 * synchronous = NORMAL syncs only at checkpoints). For writes elsewhere that must never
 * be ahead of the commits that justify them (engine/prop/reclaim.c deletes payloads only
 * after this). No transaction may be open. Returns 0, or -errno with the detail set. */
int orch_store_sync(orch_store *s);

/* Background work, for the driver (storage/background.c says why and how): a thread of
 * the store's own, with a connection of its own, makes the checkpoints of the log, which
 * the driver's commits then no longer wait for, and the syncs asked for below. Started
 * once on a read-write store; orch_store_close() stops it too.
 * Returns 0, or an error (the store works as before without it). */
int orch_store_background_start(orch_store *s);

/* Stops the background thread, if it runs, once it has made what was asked of it; the
 * connection checkpoints as before. */
void orch_store_background_stop(orch_store *s);

/* Asks for what orch_store_sync() does, covering every commit made before the call, in
 * the background; without the background thread, does it now. No transaction may be
 * open. Returns 0. */
int orch_store_sync_begin(orch_store *s);

/* Whether the sync last asked for is done: 1 when it is, 0 while it runs (with wait, it
 * waits), or the -errno it failed with, the detail set. */
int orch_store_sync_end(orch_store *s, bool wait);

/* Asks the background thread for an fdatasync of the file at path (valid until
 * orch_store_file_sync_end), ahead of its other work. One at a time. Returns 0, or
 * -ENOTSUP without the thread. */
int orch_store_file_sync_begin(orch_store *s, const char *path);

/* The end of the sync asked for above: 0 once made (waiting for it if the thread has
 * begun it), -EAGAIN when the thread had not taken it yet (it is withdrawn: the caller
 * syncs the file itself), or the -errno it failed with (no detail is set: the caller
 * syncs itself, and that says why). */
int orch_store_file_sync_end(orch_store *s);

/* Writes what the store holds back in the open transaction (grains, items, READYs and root
 * rows written late), as the commit would first: for a caller that has something to wait
 * for just before committing. Returns 0 or an error (the caller rolls back). */
int orch_store_flush(orch_store *s);

/* ---- job metadata (table job) ---------------------------------------------------------- */

struct orch_job_info {
    const char *name;          /* the pipeline's name */
    const char *plan_text;     /* canonical plan text */
    const char *plan_hash;     /* SHA-256 of plan_text, hex */
    const char *pipeline_path; /* the .orch file the job was created from */
    const char *orch_version;  /* version of orch that created the job */
    int64_t created_at_ms;     /* ms since the epoch */
    enum orch_job_status status;
};

/* Writes the job's single row (status "created", created_at now, orch_version this
 * build's). Inside or outside a transaction. Returns 0, -EEXIST if the job row already
 * exists, or a translated error. Strings are copied. */
int orch_store_job_init(orch_store *s, const char *name, const char *plan_text,
                        const char *plan_hash, const char *pipeline_path);

/* Reads the job row. On success *out is ONE malloc'd block holding the struct and all its
 * strings: the caller frees it with free(*out). Returns 0, ORCH_ENOTFOUND if the job row
 * was never written, ORCH_ECORRUPT if its status is unknown, -ENOMEM, or a translated
 * error. */
int orch_store_job_get(orch_store *s, struct orch_job_info **out);

/* Makes the plan of this text and hash the job's (job.plan_text, job.plan_hash) and adds it
 * to the table `plan` (every plan the job has run), adopted now. In a transaction. */
int orch_store_plan_adopt(orch_store *s, const char *text, const char *hash, int64_t *id);

/* An edited plan with new sources (cli_update.c): the ports from `first` on move up by
 * `by` ids (a source's ports come first): their items follow, and their port rows are
 * deleted, for the caller to write again. In a transaction; O(the items moved). */
int orch_store_ports_shift(orch_store *s, int first, int by);

/* job.base_dir (migrations/0013_roots.sql): *out a malloc'd copy, or NULL for a job made
 * before schema 13 whose keys are not converted yet (engine/update/rekey.c). */
int orch_store_job_base_dir(orch_store *s, char **out);
int orch_store_job_set_base_dir(orch_store *s, const char *dir);

/* Sets job.status. Returns 0, ORCH_ENOTFOUND if there is no job row, or a translated
 * error. */
int orch_store_job_set_status(orch_store *s, enum orch_job_status status);

/* The identity of the job's payload store (job.payload_identity; orch_payload.h). Copies it
 * into buf[0..cap-1], NUL-terminated, or sets buf to "" when the job has none (a job made
 * before schema 4, not yet opened read-write). Returns 0, ORCH_ENOTFOUND (no job row),
 * ORCH_ECORRUPT (an identity of cap bytes or more), or a translated error. */
int orch_store_job_payload_identity(orch_store *s, char *buf, size_t cap);

/* Records the identity of the job's payload store. Returns 0, ORCH_ENOTFOUND (no job row),
 * or a translated error. */
int orch_store_job_set_payload_identity(orch_store *s, const char *id);

#endif
