/* orch_payload.h — the payload store: the bytes of items, in one LMDB environment per job
 * (JOB/payloads/).
 *
 * What it owns. Payloads: immutable byte strings, each named by a uint64 id. Workers
 * write their outputs here directly and report only ids; state.db's item rows name them
 * (DESIGN §6). Which payloads are referenced is state.db's business, not this store's.
 *
 * On-disk format. An LMDB environment directory (data.mdb, lock.mdb) with two named
 * databases:
 *   "data"  key: the id, a native-endian uint64 (MDB_INTEGERKEY); value: the bytes.
 *   "meta"  "next_id" -> uint64, the id the next put hands out (ids start at 1; 0 is never
 *           an id); "bytes" -> uint64, the total length of all stored payloads;
 *           "identity" -> text, the identity of the job the store belongs to (absent in a
 *           store no job has claimed yet). Meta keys are names, never ids: they live in
 *           their own database and cannot collide with a payload.
 *
 * Invariants.
 *   - Ids are unique and never reused, across every process sharing the environment and
 *     across deletes, closes and crashes: "next_id" advances in the same write transaction
 *     as the puts that use it, and LMDB serializes write transactions across processes.
 *   - Ids are handed out in increasing order; within one put_many, in the order of the
 *     values.
 *   - A payload never changes once written; a deleted id stays absent.
 *   - After a crash of any process, every payload whose put returned 0 is readable and
 *     intact; a put that did not return leaves nothing (one transaction per batch).
 *
 * Growth. The map starts at opts.map_size and doubles (or grows by what a batch needs)
 * whenever a write finds it full, up to opts.max_map_size; the write is retried
 * transparently. The map can only be moved while this process holds no read transaction,
 * so a write that needs to grow while this process has a reader open fails with -EBUSY:
 * end readers before writing.
 *
 * Limits. One payload is at most ORCH_PAYLOAD_MAX_VALUE bytes (4 GiB - 1: LMDB stores a
 * value's length in 32 bits and refuses a longer one, MDB_BAD_VALSIZE); put_many refuses a
 * longer value before it writes anything (-EFBIG), so that a caller can tell a value too
 * large for the store (the value's fault) from a store that failed (the store's).
 *
 * Errors. Functions return 0 or a negative code (orch_error.h) and record a detail that
 * starts with the directory, e.g. "JOB/payloads: ...". LMDB's codes are translated here:
 *   MDB_MAP_FULL that cannot grow -> -ENOSPC    MDB_NOTFOUND -> ORCH_ENOTFOUND
 *   MDB_CORRUPTED, MDB_INVALID, MDB_PAGE_NOTFOUND, MDB_INCOMPATIBLE -> ORCH_ECORRUPT
 *   MDB_READERS_FULL -> -EUSERS      MDB_TXN_FULL -> -E2BIG     MDB_MAP_RESIZED -> -EBUSY
 *   MDB_BAD_VALSIZE -> -EFBIG (a value over the limit)
 *   a write that fails on a full file system -> -ENOSPC, with the bytes free and needed:
 *     LMDB reports a short write (what a full disk gives) as EIO, which is then told from a
 *     real I/O error by the space left on the store's file system
 *   system errors -> -errno          others (MDB_VERSION_MISMATCH, MDB_PANIC ...) -> ORCH_EDB
 */
#ifndef ORCH_PAYLOAD_H
#define ORCH_PAYLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ORCH_PAYLOAD_DEFAULT_MAP_SIZE ((size_t)64 << 20)
/* Reader slots: one per read transaction open at a time, in all processes together. A
 * worker holds one while its UDF runs on its inputs (zero-copy), the driver one while it
 * reserves a batch, an inspection command one while it reads; so a job needs about the
 * sum of its calls' workers (<= 1024 each) plus a few. A slot is 64 bytes of lock.mdb,
 * a sparse file of which only the slots ever used are touched, and a transaction scans only
 * up to the highest slot ever used: a large table costs ~2 ms at the first open and nothing
 * after (measured: 1022 slots 0.23 ms, 65536 slots 2.0 ms, begin+abort 0.06-0.11 us
 * either way). */
#define ORCH_PAYLOAD_DEFAULT_MAX_READERS 65536u
/* The largest payload LMDB can store: a value's length is 32 bits (MAXDATASIZE in mdb.c). */
#define ORCH_PAYLOAD_MAX_VALUE ((size_t)0xffffffffu)

/* Options of orch_payload_open(); a zeroed struct (or NULL) means the defaults. */
struct orch_payload_opts {
    size_t map_size;      /* initial map size; 0: ORCH_PAYLOAD_DEFAULT_MAP_SIZE. An
                             environment that already grew opens at its grown size. */
    size_t max_map_size;  /* the map never grows beyond this; 0: no limit */
    bool nosync;          /* false: every commit is durable when it returns. true
                             (MDB_NOSYNC): commits are not flushed; call
                             orch_payload_sync() before publishing ids elsewhere. A process
                             crash loses nothing either way; an OS crash without a sync may
                             lose or damage the unsynced commits. */
    unsigned max_readers; /* concurrent read transactions of all processes together;
                             0: ORCH_PAYLOAD_DEFAULT_MAX_READERS. LMDB sizes the table
                             when no other process has the environment open: it then grows
                             to this size, never shrinks; a process that opens it while
                             others have it adopts their size, whatever it asks for. */
    bool no_create;       /* true: open an existing store only. A missing directory or
                             data file is -ENOENT, and nothing is created (every open of an
                             existing job: a lost payloads/ must not come back empty, and a
                             read-only command never makes one). */
    bool readonly;        /* true: MDB_RDONLY (implies no_create). Reads only: every write
                             fails (-EACCES). Its readers still take slots in lock.mdb, so
                             that a writer of another process never reuses pages they read. */
    bool lockless_ok;     /* with readonly: when lock.mdb cannot be opened for writing (a
                             store of another user, a read-only copy), open without LMDB's
                             lock table (MDB_NOLOCK) instead of failing. Then this handle's
                             readers are invisible to writers, and a writer could reuse the
                             pages they read: set it only when the caller has made sure that
                             no process writes the store while the handle is open (the job
                             holds its driver lock shared: engine/job/jobdir.c). */
    size_t max_value;     /* the largest value put_many accepts; 0 or more than
                             ORCH_PAYLOAD_MAX_VALUE: ORCH_PAYLOAD_MAX_VALUE (lower only to
                             test the refusal without 4 GiB values) */
};

/* A handle on the environment.
 *
 * PROCESS RULES — read these before using it with fork():
 *   - NEVER open before fork() and use (or close) after it in the child. Open it in each
 *     process, after fork/exec. Operations assert that they run in the opening process.
 *   - At most ONE handle per environment per process at a time: closing a second handle
 *     on the same files would drop this process's LMDB locks (fcntl semantics) and let
 *     others take its live readers for dead ones.
 *   - A child that was forked without exec must not open it while the parent holds it
 *     (the inherited descriptors count as an open handle); after exec, it may: LMDB's
 *     files are close-on-exec.
 * Thread rule: one thread at a time per handle. */
typedef struct orch_payload orch_payload;

/* A read transaction: a consistent snapshot for zero-copy reads. */
typedef struct orch_payload_rtxn orch_payload_rtxn;

/* One value to put. len may be 0 (an empty payload); data may then be NULL. */
struct orch_iov {
    const void *data;
    size_t len;
};

/* Opens (creating if needed, unless opts->no_create or opts->readonly) the environment in
 * directory dir. The directory itself is created if missing (its parent must exist).
 * Clears the reader slots of dead processes (mdb_reader_check). Needs no reader slot: with
 * every slot taken, it still opens (its reads will then fail with -EUSERS until slots are
 * free). opts may be NULL.
 * Returns 0 and sets *out, or -errno (-ENOENT: the parent of dir is missing, or with
 * no_create the store; -EACCES: readonly, lock.mdb not writable and not lockless_ok),
 * -EINVAL (map_size > max_map_size), ORCH_ECORRUPT (not an LMDB environment, or a
 * truncated data file), -ENOMEM, or a translated error. On failure *out is NULL. */
int orch_payload_open(const char *dir, const struct orch_payload_opts *opts,
                      orch_payload **out);

/* Closes the handle. All its read transactions must have been ended (asserted). NULL is
 * ignored. */
void orch_payload_close(orch_payload *p);

/* Stores n values in ONE write transaction and writes their ids to ids_out[0..n-1], in
 * order. The values are copied; the caller keeps ownership. n == 0 does nothing.
 * Returns 0, or: -EFBIG (a value is longer than orch_payload_max_value(): checked before
 * anything is written), -ENOSPC (the map is full and may not grow, or the file system is
 * full), -EBUSY (it must grow but this process holds a read transaction), a translated
 * error. On failure nothing was stored and ids_out is unspecified. */
int orch_payload_put_many(orch_payload *p, const struct orch_iov *vals, size_t n,
                          uint64_t *ids_out);

/* The largest value put_many accepts on this handle (opts.max_value, at most
 * ORCH_PAYLOAD_MAX_VALUE). A caller that stores values of its users checks them against it
 * first: a value over it is the value's fault, not the store's. */
size_t orch_payload_max_value(const orch_payload *p);

/* orch_payload_put_many() of one value. */
int orch_payload_put(orch_payload *p, const void *data, size_t len, uint64_t *id_out);

/* Reader slots. Only orch_payload_read_begin() can fail for want of a reader slot
 * (-EUSERS). open, get, ids and stat read through a write transaction (aborted, so needing
 * no slot) when every slot is taken: they then wait for a write of another process to end.
 *
 * Copies payload id into a new malloc'd buffer: *data (never NULL on success, even for an
 * empty payload; the caller frees it) and *len.
 * Returns 0, ORCH_ENOTFOUND (no such id: never stored, or deleted), -ENOMEM, or a
 * translated error. */
int orch_payload_get(orch_payload *p, uint64_t id, void **data, size_t *len);

/* Starts a read transaction: a snapshot of the store as of now. Several may be open at
 * once. End each with orch_payload_read_end(), promptly: a reader pins the pages it sees
 * and holds a reader slot, so a long one makes the file grow, and the map cannot grow in
 * this process while one is open. When every slot is taken, the slots of dead processes are
 * cleared and the begin tried once more. Returns 0 and sets *out, -EUSERS (reader slots
 * exhausted by live readers: a limit of the store, not of the data read), -ENOMEM, or a
 * translated error. */
int orch_payload_read_begin(orch_payload *p, orch_payload_rtxn **out);

/* Zero-copy read within r: *data points into the map and stays valid until
 * orch_payload_read_end(r); never write through it. Returns 0, ORCH_ENOTFOUND, or a
 * translated error. */
int orch_payload_read(orch_payload_rtxn *r, uint64_t id, const void **data, size_t *len);

/* Ends the read transaction and frees r. NULL is ignored. */
void orch_payload_read_end(orch_payload_rtxn *r);

/* Deletes the payloads of ids in ONE write transaction, sorting ids in place first (one
 * cursor walks them in order). Ids that are not stored are skipped: deleting is
 * idempotent. *ndeleted (may be NULL) receives how many were stored. Returns 0, or an
 * error as for put_many (nothing deleted then). */
int orch_payload_delete_many(orch_payload *p, uint64_t *ids, size_t n, size_t *ndeleted);

/* Lists, from one snapshot, the ids of up to `max` stored payloads that are >= start, in
 * ascending order, into ids[0 .. *n_out-1]. Fewer than max (0 at the end) means there are
 * no more. For walking the store in bounded memory (reclaiming payloads that no committed
 * fact names). Returns 0 or a translated error. */
int orch_payload_ids(orch_payload *p, uint64_t start, uint64_t *ids, size_t max, size_t *n_out);

/* Flushes all commits to disk (for opts.nosync). Returns 0 or -errno. */
int orch_payload_sync(orch_payload *p);

/* How many write transactions this handle has run (committed or not): a sync of the data
 * file made elsewhere (in the background, through a descriptor of its own: without
 * MDB_WRITEMAP, orch_payload_sync is an fdatasync of that file) covers every write of
 * this process only if the count did not change since it began. */
uint64_t orch_payload_writes(const orch_payload *p);

/* The path of the environment's data file (the one orch_payload_sync syncs), into buf.
 * Returns 0, or -ENAMETOOLONG when it does not fit in n bytes. */
int orch_payload_data_file(const orch_payload *p, char *buf, size_t n);

/* Clears the reader slots of dead processes now (a driver may call it when it reaps a
 * worker). *dead (may be NULL) receives how many were cleared. Returns 0 or -errno. */
int orch_payload_reader_check(orch_payload *p, int *dead);

struct orch_payload_stat {
    uint64_t count;    /* payloads stored */
    uint64_t bytes;    /* sum of their lengths */
    uint64_t next_id;  /* the id the next put will hand out */
    size_t map_size;   /* the map size in this process */
    size_t used_size;  /* bytes of the data file in use (pages up to the last one) */
    int stale_readers; /* reader slots of dead processes cleared by this handle's open */
};

/* Fills *st from one consistent snapshot. Returns 0 or a translated error. */
int orch_payload_stat(orch_payload *p, struct orch_payload_stat *st);

/* The identity binding the store to its job (DESIGN §6: state.db holds the same one; the
 * job checks the two at every open, so that a lost, replaced or restored store is refused
 * instead of read as the job's). At most ORCH_PAYLOAD_IDENTITY_MAX - 1 bytes of text. */
#define ORCH_PAYLOAD_IDENTITY_MAX 65

/* Copies the store's identity into buf[0..ORCH_PAYLOAD_IDENTITY_MAX-1], NUL-terminated.
 * Returns 0, ORCH_ENOTFOUND (the store has none), ORCH_ECORRUPT (a stored identity that is
 * not short text), or a translated error. */
int orch_payload_identity_get(orch_payload *p, char buf[ORCH_PAYLOAD_IDENTITY_MAX]);

/* Gives the store its identity, once: in one write transaction, it stores id when the
 * store has none, and does nothing when it already has this one. Returns 0, -EEXIST (the
 * store has another identity: nothing written), -EINVAL (id empty or too long), or an
 * error as for put_many. */
int orch_payload_identity_set(orch_payload *p, const char *id);

/* Lower limits of a job's payload store, for fault tests; a zero field leaves the default.
 * The command line fills them once per process from the environment (engine/cli/knobs.c:
 * ORCH_PAYLOAD_MAX_MAP, _MAX_READERS, _MAX_VALUE; docs/configuration.md), so that the
 * driver and its workers open the store alike. */
struct orch_payload_limits {
    size_t max_map_size; /* a ceiling on the map, bytes: a store that cannot grow past
                            it, as on a full disk (and a smaller first map, when it is
                            below ORCH_PAYLOAD_DEFAULT_MAP_SIZE) */
    size_t max_readers;  /* the reader table of a store that no process has open: a table
                            that fills up; over ORCH_PAYLOAD_DEFAULT_MAX_READERS: default */
    size_t max_value;    /* the largest value, bytes: an output over the limit without
                            making one of 4 GiB; over ORCH_PAYLOAD_MAX_VALUE: default */
};

/* Sets the limits orch_payload_job_opts gives from now on, in this process (copied). */
void orch_payload_set_job_limits(const struct orch_payload_limits *l);

/* The options every process of a job opens its payload store with: no sync per commit
 * (the driver syncs once per turn: group commit), the default reader table, and the
 * limits of orch_payload_set_job_limits (none unless set). */
void orch_payload_job_opts(struct orch_payload_opts *o);

#endif
