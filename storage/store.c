/* store.c — the state store: opening state.db, translating SQLite's errors, cached
 * statements and transactions. Migrations are in migrate.c, the job row in job.c. */
#include "store_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orch_error.h"
#include "orch_facts.h"
#include "support.h"

/* The pid of this process, kept current across fork() by an atfork handler: getpid() is
 * a system call, and the owner check below runs on every statement the engine prepares
 * (a few per grain), where it cost 3% of the driver's time. */
static pid_t self_pid;
static pthread_once_t self_pid_once = PTHREAD_ONCE_INIT;

static void self_pid_refresh(void)
{
    self_pid = getpid();
}

static void self_pid_init(void)
{
    self_pid_refresh();
    pthread_atfork(NULL, NULL, self_pid_refresh);
}

static pid_t current_pid(void)
{
    pthread_once(&self_pid_once, self_pid_init);
    return self_pid;
}

/* Process-wide SQLite settings, made once before the first connection. Memory statistics
 * are off: they take a global mutex on every allocation, and the driver allocates on
 * every statement (3% of its time, measured). sqlite3_config() fails harmlessly if SQLite
 * was already initialized by someone else; the setting is an optimisation only. */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;
static const char *store_vfs; /* walbuf.c's, once registered; NULL: SQLite's default */
static struct orch_store_config config; /* orch_store_configure's */

void orch_store_configure(const struct orch_store_config *c)
{
    config = *c;
}

static void sqlite_configure(void)
{
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    if (!config.no_walbuf && orch_store__walbuf_register() == 0)
        store_vfs = ORCH_STORE_WALBUF_VFS;
}

/* A store belongs to the process that opened it (orch_store.h: process rule). */
static void assert_owner(const orch_store *s)
{
    assert(s != NULL);
    assert(s->pid == current_pid() && "an orch_store never crosses fork()");
    (void)s;
}

/* ---- errors ---------------------------------------------------------------------------- */

static int translate_code(sqlite3 *db, int rc)
{
    assert(rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE);
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return -ENOSPC;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return ORCH_ECORRUPT;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return -EBUSY;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_READONLY:
        return -EROFS;
    case SQLITE_CONSTRAINT:
        return ORCH_ECONSTRAINT;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN: {
        /* The failed system call's errno says more than "disk I/O error": ENOSPC while
         * writing the WAL is a full disk, not an I/O error. */
        int e = db != NULL ? sqlite3_system_errno(db) : 0;
        return e > 0 ? -e : -EIO;
    }
    case SQLITE_INTERRUPT:
        return -EINTR;
    case SQLITE_TOOBIG:
        return -E2BIG;
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return -EACCES;
    default:
        return ORCH_EDB;
    }
}

int orch_store_error(orch_store *s, int rc, const char *what)
{
    int code = translate_code(s->db, rc);
    const char *msg = s->db != NULL ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    if (what != NULL)
        return orch_error_set(code, "%s: %s: %s", s->path, what, msg);
    return orch_error_set(code, "%s: %s", s->path, msg);
}

/* ---- opening --------------------------------------------------------------------------- */

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

static uint32_t get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* SQLite says only "database disk image is malformed" or "file is not a database" when
 * it cannot read page 1. The commonest causes are a file that is not a database at all
 * and a truncated copy; look at the header to name them. Records the detail. */
static int describe_damage(orch_store *s, int rc)
{
    unsigned char h[100];
    int64_t size = file_size(s->path);
    int fd = open(s->path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, h, sizeof h) : -1;
    if (fd >= 0)
        close(fd);
    if (n != (ssize_t)sizeof h || memcmp(h, "SQLite format 3", 16) != 0)
        return orch_error_set(ORCH_ECORRUPT,
                              "%s: not an orch job (%lld bytes, no SQLite header)", s->path,
                              (long long)size);

    /* Page size: 2 bytes at 16, where 1 means 65536. Page count: 4 bytes at 28, trusted
     * only when the "version-valid-for" number (92) equals the change counter (24). */
    int64_t psize = h[16] << 8 | h[17];
    if (psize == 1)
        psize = 65536;
    int64_t npages = get_be32(h + 28);
    char wal[4096];
    snprintf(wal, sizeof wal, "%s-wal", s->path);
    int64_t avail = size + file_size(wal);
    if (memcmp(h + 24, h + 92, 4) == 0 && npages * psize > avail)
        return orch_error_set(ORCH_ECORRUPT,
                              "%s: database file is truncated: %lld bytes, but its header "
                              "counts %lld pages of %lld bytes",
                              s->path, (long long)size, (long long)npages, (long long)psize);
    return orch_store_error(s, rc, "database is damaged");
}

/* Creates the file exclusively: SQLite has no O_EXCL, and CREATE must never take over a
 * file that appeared meanwhile. An empty file is a valid empty database. */
static int create_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        if (e == EEXIST)
            return orch_error_set(-EEXIST, "%s: already exists; a new job needs a new path",
                                  path);
        return orch_error_set(-e, "%s: cannot create: %s", path, strerror(e));
    }
    close(fd);
    return 0;
}

static void remove_files(const char *path)
{
    char aux[4096];
    unlink(path);
    snprintf(aux, sizeof aux, "%s-wal", path);
    unlink(aux);
    snprintf(aux, sizeof aux, "%s-shm", path);
    unlink(aux);
}

/* The directory entry of a new file is durable only once its directory is synced. */
static void sync_parent_dir(const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL)
        return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: the job is usable either way */
        close(fd);
    }
    free(copy);
}

/* An error of SQLite while opening: corruption gets a closer look (describe_damage). */
static int open_error(orch_store *s, int rc)
{
    int code = translate_code(s->db, rc);
    return code == ORCH_ECORRUPT ? describe_damage(s, rc) : orch_store_error(s, rc, NULL);
}

/* journal_mode answers with the mode in force, which is not WAL when the switch failed. */
static int set_wal(orch_store *s)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return open_error(s, rc);
    int ret = 0;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *mode = (const char *)sqlite3_column_text(st, 0);
        if (mode == NULL || strcmp(mode, "wal") != 0)
            ret = orch_error_set(ORCH_EDB, "%s: cannot switch to WAL mode (journal mode is %s)",
                                 s->path, mode != NULL ? mode : "unknown");
    } else {
        ret = rc == SQLITE_DONE ? orch_error_set(ORCH_EDB, "%s: no journal mode", s->path)
                                : open_error(s, rc);
    }
    sqlite3_finalize(st);
    return ret;
}

/* Whether this process enforces the schema's REFERENCES and CHECK clauses
 * (orch_store_config.checks; the test suite sets it). They state the schema's rules for
 * whoever reads state.db, and they catch a driver bug at the write that breaks a rule; but
 * every row the driver writes is made by a fixed statement from values it read or created
 * in the same transaction, and enforcing them costs a look-up per reference and an
 * expression per CHECK on every write: 14.6% of the driver's instructions per grain
 * (callgrind, the no-op chain of scripts/bench/scheduler). So a job runs without them,
 * and every test runs with them, where a violation fails the test at the faulty write. */
static bool enforce_checks(void)
{
    return config.checks;
}

/* Connection settings. WAL lets readers (status, sql, export) run while the driver
 * writes; NORMAL sync in WAL mode loses no commit to a process crash, only possibly the
 * last ones to a power loss, and never consistency. */
static int configure(orch_store *s)
{
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, ORCH_STORE_BUSY_TIMEOUT_MS);
    s->checks = enforce_checks();
    int rc;
    const char *sql = s->flags & ORCH_STORE_SYNC_FULL ? "PRAGMA synchronous = FULL;"
                                                      : "PRAGMA synchronous = NORMAL;";
    rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db,
                          enforce_checks()
                              ? "PRAGMA foreign_keys = ON; PRAGMA ignore_check_constraints = OFF;"
                              : "PRAGMA foreign_keys = OFF; PRAGMA ignore_check_constraints = ON;",
                          NULL, NULL, NULL);
    /* Keep the WAL file from staying huge after one big transaction. */
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, "PRAGMA journal_size_limit = 67108864", NULL, NULL, NULL);
    /* Checkpoint every 8,000 WAL pages (32 MiB) rather than SQLite's 1,000: each commit of
     * the driver rewrites the same hot pages (the tails of the grain, item and attempt
     * B-trees), and a checkpoint copies each page once however often the log holds it.
     * scripts/bench/scheduler, three runs each alternated: 34.4k -> 38.3k grains/s
     * (median, process durability), 31.7k -> 33.3k (machine). */
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, "PRAGMA wal_autocheckpoint = 8000", NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : open_error(s, rc);
}

int orch_store__pragma_int(orch_store *s, const char *pragma, int64_t *out)
{
    char sql[128];
    sqlite3_stmt *st;
    snprintf(sql, sizeof sql, "PRAGMA %s", pragma);
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return open_error(s, rc);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    int ret = 0;
    if (rc != SQLITE_OK)
        ret = rc == SQLITE_DONE ? orch_error_set(ORCH_EDB, "%s: %s: no value", s->path, sql)
                                : open_error(s, rc);
    sqlite3_finalize(st);
    return ret;
}

/* Is this an orch job, and of which schema version? Sets s->found_version. */
static int identify(orch_store *s, int latest)
{
    int64_t uv, appid;
    int rc = orch_store__pragma_int(s, "user_version", &uv);
    if (rc < 0)
        return rc;
    if ((rc = orch_store__pragma_int(s, "application_id", &appid)) < 0)
        return rc;

    if (uv == 0 && !(s->flags & ORCH_STORE_CREATE))
        /* Jobs are created in a directory of their own and renamed into place only after
         * their first commit (engine/job/jobdir.c), so an empty database is never a job. */
        return orch_error_set(ORCH_ECORRUPT,
                              "%s: not an orch job (an empty database: its creation never "
                              "finished)",
                              s->path);
    if (uv == 0) {
        /* Version 0 is a database no migration has touched: a new job, unless something
         * else made it. */
        int64_t changes;
        if ((rc = orch_store__pragma_int(s, "schema_version", &changes)) < 0)
            return rc;
        /* schema_version counts schema changes: 0 means no table, index or view. */
        if (changes > 0)
            return orch_error_set(ORCH_ECORRUPT,
                                  "%s: not an orch job (a SQLite database with a schema but "
                                  "no orch schema version)",
                                  s->path);
    } else if (appid != ORCH_STORE_APPLICATION_ID) {
        return orch_error_set(ORCH_ECORRUPT,
                              "%s: not an orch job (application_id %#llx, expected %#x)",
                              s->path, (unsigned long long)appid, ORCH_STORE_APPLICATION_ID);
    }
    if (uv > latest)
        return orch_error_set(ORCH_ENEWER,
                              "%s: job schema version %lld is newer than this orch "
                              "understands (%d); upgrade orch",
                              s->path, (long long)uv, latest);
    if (uv < latest && (s->flags & ORCH_STORE_READONLY))
        return orch_error_set(ORCH_EOLDER,
                              "%s: job schema version %lld is older than this orch's (%d); "
                              "open it read-write once (orch resume) to upgrade it",
                              s->path, (long long)uv, latest);
    s->found_version = s->version = (int)uv;
    return 0;
}

/* Whether the write-ahead log of the database at path holds no frame: it is missing or
 * not longer than its 32-byte header. Every committed transaction is then in the database
 * file itself, and reading the file alone (immutable) reads them all. */
static bool wal_empty(const char *path)
{
    char wal[4096];
    struct stat st;
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (stat(wal, &st) != 0)
        return errno == ENOENT;
    return st.st_size <= 32;
}

/* "file:PATH?immutable=1", PATH percent-encoded but for unreserved bytes and '/' (SQLite's
 * URI names: '?', '#' and '%' would end or escape the path). NULL when out of memory; the
 * caller frees it. */
static char *immutable_uri(const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(path);
    char *uri = malloc(3 * n + sizeof "file:?immutable=1");
    if (uri == NULL)
        return NULL;
    char *o = uri + sprintf(uri, "file:");
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            strchr("/._-~", *c) != NULL) {
            *o++ = (char)*c;
        } else {
            *o++ = '%';
            *o++ = hex[*c >> 4];
            *o++ = hex[*c & 15];
        }
    }
    strcpy(o, "?immutable=1");
    return uri;
}

static void free_store(orch_store *s)
{
    free(s->cache);
    orch_store__held_free(&s->held);
    free(s->path);
    free(s);
}

int orch_store__open_with(const char *path, int flags, const struct orch_migration *migs,
                          int nmigs, orch_store **out)
{
    assert(path != NULL && out != NULL && nmigs >= 1);
    *out = NULL;
    if ((flags & ORCH_STORE_CREATE) && (flags & ORCH_STORE_READONLY))
        return orch_error_set(-EINVAL, "%s: cannot create a job read-only", path);

    orch_store *s = calloc(1, sizeof *s);
    if (s == NULL || (s->path = strdup(path)) == NULL) {
        free(s);
        return orch_error_set(-ENOMEM, "%s: out of memory", path);
    }
    s->flags = flags;
    s->pid = current_pid();

    int rc;
    bool created = false;
    if (flags & ORCH_STORE_CREATE) {
        if ((rc = create_file(path)) < 0)
            goto fail_free;
        created = true;
    } else if (access(path, F_OK) != 0) {
        rc = orch_error_set(-errno, "%s: %s", path, strerror(errno));
        goto fail_free;
    }

    int oflags = (flags & ORCH_STORE_READONLY) ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
    /* Immutable: SQLite then takes no lock and ignores any log, which is right only when
     * nobody writes and the log holds nothing (ORCH_STORE_NO_WRITER). */
    char *uri = NULL;
    if ((flags & ORCH_STORE_READONLY) && (flags & ORCH_STORE_NO_WRITER) && wal_empty(path)) {
        if ((uri = immutable_uri(path)) == NULL) {
            rc = orch_error_set(-ENOMEM, "%s: out of memory", path);
            goto fail_free;
        }
        oflags |= SQLITE_OPEN_URI;
    }
    pthread_once(&sqlite_once, sqlite_configure);
    rc = sqlite3_open_v2(uri ? uri : path, &s->db, oflags | SQLITE_OPEN_NOMUTEX, store_vfs);
    free(uri);
    if (rc != SQLITE_OK) {
        rc = orch_store_error(s, rc, "cannot open");
        goto fail_close;
    }
    /* Identify before switching to WAL, which writes to the file: a file that is not an
     * orch job is refused untouched. */
    if ((rc = configure(s)) < 0 || (rc = identify(s, migs[nmigs - 1].version)) < 0)
        goto fail_close;
    if (!(flags & ORCH_STORE_READONLY) && (rc = set_wal(s)) < 0)
        goto fail_close;
    if (s->version < migs[nmigs - 1].version && (rc = orch_store__migrate(s, migs, nmigs)) < 0)
        goto fail_close;
    if (!(flags & ORCH_STORE_READONLY) && config.max_pages > 0 &&
        (rc = orch_store_set_max_pages(s, config.max_pages)) < 0)
        goto fail_close;
    /* ROLLBACK is compiled now, into the cache: a rollback often follows an error, an
     * out-of-memory one included, and must not need memory to be prepared then. (The last
     * step: on failure the cache is still empty, so the close below cannot be refused.) */
    sqlite3_stmt *rollback;
    if ((rc = orch_store_prepare(s, "ROLLBACK", &rollback)) < 0)
        goto fail_close;
    if (created)
        sync_parent_dir(path);
    *out = s;
    return 0;

fail_close:
    sqlite3_close(s->db); /* no statement is open: close cannot be refused */
    if (created)
        remove_files(path);
fail_free:
    free_store(s);
    return rc;
}

int orch_store_open(const char *path, int flags, orch_store **out)
{
    return orch_store__open_with(path, flags, orch_migrations, orch_nmigrations, out);
}

void orch_store_close(orch_store *s)
{
    if (s == NULL)
        return;
    assert_owner(s);
    if (s->in_txn)
        (void)orch_store_rollback(s);
    orch_store_background_stop(s);
    for (size_t i = 0; i < s->ncache; i++)
        sqlite3_finalize(s->cache[i].stmt);
    int rc = sqlite3_close(s->db);
    assert(rc == SQLITE_OK && "statements prepared on the raw handle must be finalized");
    (void)rc;
    free_store(s);
}

sqlite3 *orch_store_db(orch_store *s)
{
    if (orch_store__holds(s) && !s->held.flushing)
        (void)orch_store__held_flush(s); /* a failure stays held: the commit fails on it */
    /* What is done with the connection may change or add grains: the waiting grains kept
     * for look-ups and the next grain and entity ids are read again from the table. */
    orch_store__held_reread(s);
    return s->db;
}

const char *orch_store_path(const orch_store *s)
{
    return s->path;
}

int orch_store_schema_latest(void)
{
    return orch_migrations[orch_nmigrations - 1].version;
}

int orch_store_schema_version(const orch_store *s)
{
    return s->version;
}

int orch_store_schema_found(const orch_store *s)
{
    return s->found_version;
}

/* ---- statements ------------------------------------------------------------------------ */

int orch_store_exec(orch_store *s, const char *sql)
{
    assert_owner(s);
    if (orch_store__holds(s) && !s->held.flushing) { /* any SQL may read what they change */
        int rc = orch_store__held_flush(s);
        if (rc < 0)
            return rc;
    }
    orch_store__held_reread(s); /* and it may change or add grains */
    char *err = NULL;
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, &err);
    if (rc == SQLITE_OK)
        return 0;
    int code = translate_code(s->db, rc);
    orch_error_set(code, "%s: %s", s->path, err != NULL ? err : sqlite3_errstr(rc));
    sqlite3_free(err);
    return code;
}

/* FNV-1a: the hash only spares most strcmp()s of the lookup. */
static unsigned hash_text(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int orch_store_prepare(orch_store *s, const char *sql, sqlite3_stmt **out)
{
    assert_owner(s);
    /* A statement that facts.c did not make may read what a late READY would change. */
    if (orch_store__holds(s) && !s->held.flushing) {
        int rc = orch_store__held_flush(s);
        if (rc < 0)
            return rc;
    }
    unsigned h = hash_text(sql);
    /* A linear scan: the engine has a few dozen fixed texts, and one step of any of them
     * costs far more than this loop. */
    for (size_t i = 0; i < s->ncache; i++) {
        if (s->cache[i].hash == h && strcmp(sqlite3_sql(s->cache[i].stmt), sql) == 0) {
            sqlite3_reset(s->cache[i].stmt);
            sqlite3_clear_bindings(s->cache[i].stmt);
            *out = s->cache[i].stmt;
            return 0;
        }
    }
    if (orch__grow_n(&s->cache, &s->capcache, s->ncache + 1, sizeof *s->cache) < 0)
        return orch_error_set(-ENOMEM, "%s: out of memory", s->path);
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
    if (rc != SQLITE_OK)
        return orch_store_error(s, rc, "prepare");
    if (st == NULL) /* text without a statement (blank or comment only) */
        return orch_error_set(-EINVAL, "%s: prepare: no SQL statement in \"%s\"", s->path, sql);
    s->cache[s->ncache++] = (struct orch_store_cached){h, st};
    *out = st;
    return 0;
}

int orch_store_step(orch_store *s, sqlite3_stmt *stmt)
{
    /* After some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM) SQLite rolls the whole
     * transaction back by itself: a statement run after that would commit on its own,
     * one fact without the others of its turn. Every statement fails instead, with the
     * first error, until the caller's rollback. */
    if (s->txn_lost)
        return orch_error_set(s->txn_lost, "%s", s->txn_lost_why);
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    int code = orch_store_error(s, rc, NULL);
    sqlite3_reset(stmt); /* release its locks; the detail is already recorded */
    if (s->in_txn && sqlite3_get_autocommit(s->db)) {
        s->txn_lost = code;
        snprintf(s->txn_lost_why, sizeof s->txn_lost_why, "%s", orch_error_detail());
    }
    return code;
}

/* ---- transactions ---------------------------------------------------------------------- */

/* Runs one of the fixed transaction-control texts through the cache. */
static int run_control(orch_store *s, const char *sql)
{
    sqlite3_stmt *st;
    int rc = orch_store_prepare(s, sql, &st);
    if (rc < 0)
        return rc;
    rc = orch_store_step(s, st);
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

int orch_store_begin(orch_store *s)
{
    assert_owner(s);
    assert(!s->in_txn && "orch_store transactions do not nest");
    assert(sqlite3_get_autocommit(s->db) && "a transaction was opened behind the store");
    int rc = run_control(s, "BEGIN IMMEDIATE");
    if (rc == 0)
        s->in_txn = true;
    /* Read again inside: rows may have been added between. */
    s->held.next_grain = 0;
    s->held.next_entity = 0;
    s->barriers = BARRIERS_UNKNOWN;
    return rc;
}

int orch_store_commit(orch_store *s)
{
    assert_owner(s);
    assert(s->in_txn && "commit without orch_store_begin");
    int rc = orch_store__held_flush(s);
    if (rc == 0)
        rc = orch_store__payload_mark_raise(s);
    if (rc == 0)
        rc = run_control(s, "COMMIT");
    if (rc == 0)
        s->payload_mark = s->payload_named;
    else
        s->payload_named = s->payload_mark; /* what the transaction noted is gone with it */
    if (rc < 0) {
        /* COMMIT can fail and leave the transaction open (a deferred constraint, a lock);
         * the contract is all-or-nothing, so finish it here. SQLite may also have rolled
         * back by itself (SQLITE_NOMEM, SQLITE_FULL): the held writes go either way, or the
         * next transaction would begin by flushing them outside of it. The detail of the
         * commit's failure is kept: it is the one that matters. */
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", orch_error_detail());
        orch_store__held_forget(s);
        orch_store__waiting_forget(s);
        if (!sqlite3_get_autocommit(s->db))
            (void)run_control(s, "ROLLBACK"); /* prepared by open: needs no memory */
        orch_error_set(rc, "%s", keep);
    }
    s->in_txn = false;
    s->txn_lost = 0;
    orch_store__reclaimed_forget(s);
    assert(sqlite3_get_autocommit(s->db));
    return rc;
}

int orch_store_flush(orch_store *s)
{
    assert_owner(s);
    assert(s->in_txn);
    return orch_store__held_flush(s);
}

int orch_store_rollback(orch_store *s)
{
    assert_owner(s);
    assert(s->in_txn && "rollback without orch_store_begin");
    int rc = 0;
    orch_store__held_forget(s);
    orch_store__waiting_forget(s);
    /* SQLite rolls back by itself after some errors (SQLITE_FULL, SQLITE_NOMEM, ...):
     * then there is nothing left to roll back. */
    if (!sqlite3_get_autocommit(s->db))
        rc = run_control(s, "ROLLBACK");
    s->in_txn = false;
    s->txn_lost = 0;
    s->payload_named = s->payload_mark;
    return rc;
}

bool orch_store_checks(const orch_store *s)
{
    return s->checks;
}

int orch_store_in_txn(const orch_store *s)
{
    return s->in_txn;
}

int orch_store__sync_file(const char *path, bool missing_ok)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && missing_ok)
            return 0;
        return orch_error_set(-errno, "%s: %s", path, strerror(errno));
    }
    int rc = fdatasync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc < 0 ? orch_error_set(rc, "%s: fdatasync: %s", path, strerror(-rc)) : 0;
}

int orch_store__sync_state(const char *path, const char *wal)
{
    /* The log first: it holds the newest commits; then the file that checkpoints filled.
     * Either may be missing: the log between a checkpoint's truncation and the next write. */
    int rc = orch_store__sync_file(wal, true);
    return rc < 0 ? rc : orch_store__sync_file(path, true);
}

int orch_store_sync(orch_store *s)
{
    assert(!s->in_txn);
    struct orch__buf wal = {0};
    orch__buf_printf(&wal, "%s-wal", s->path);
    if (wal.oom)
        return -ENOMEM;
    int rc = orch_store__sync_state(s->path, wal.p);
    orch__buf_free(&wal);
    return rc;
}
