/* payload.c — the payload store on LMDB: ids from a persistent counter, one write
 * transaction per batch, and a map that grows when it is full. */
#include "orch_payload.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <lmdb.h>

#include "orch_error.h"
#include "support.h"

/* MDB_INTEGERKEY takes keys of the size of an unsigned int or a size_t; ids are uint64. */
_Static_assert(sizeof(size_t) == sizeof(uint64_t), "payload ids need a 64-bit size_t");

/* Fields are written by this file only. */
struct orch_payload {
    MDB_env *env;
    MDB_dbi data;        /* "data": id -> bytes */
    MDB_dbi meta;        /* "meta": counters */
    char *dir;           /* as given to open; prefix of every error detail */
    pid_t pid;           /* the process that opened it: a handle never crosses fork */
    size_t map_size;     /* the map size of this process (mdb_env_info) */
    size_t max_map_size; /* 0: no limit */
    size_t max_value;    /* the longest value put_many accepts */
    int nreaders;        /* read transactions open through this handle: while > 0 the
                            map must not move, so it can neither grow nor follow a growth
                            of another process */
    int stale_readers;   /* dead readers cleared when opened */
    uint64_t writes;     /* write transactions this handle committed */
};

struct orch_payload_rtxn {
    orch_payload *p;
    MDB_txn *txn;
};

static const char META_NEXT_ID[] = "next_id";
static const char META_BYTES[] = "bytes";
static const char META_IDENTITY[] = "identity";

static void assert_owner(const orch_payload *p)
{
    assert(p != NULL);
    assert(p->pid == getpid() && "an orch_payload is opened in each process, never shared "
                                 "across fork()");
    (void)p;
}

/* ---- errors ---------------------------------------------------------------------------- */

static int lmdb_code(int rc)
{
    switch (rc) {
    case MDB_NOTFOUND:
        return ORCH_ENOTFOUND;
    case MDB_MAP_FULL:
        return -ENOSPC;
    case MDB_CORRUPTED:
    case MDB_INVALID:
    case MDB_PAGE_NOTFOUND:
    case MDB_INCOMPATIBLE: /* "data" or "meta" exists with other flags: not our layout */
    case MDB_KEYEXIST:     /* an appended id exists: the counter is behind the data */
        return ORCH_ECORRUPT;
    case MDB_READERS_FULL:
        return -EUSERS;
    case MDB_TXN_FULL:
        return -E2BIG;
    case MDB_MAP_RESIZED:
        return -EBUSY;
    case MDB_BAD_VALSIZE:
        return -EFBIG;
    default:
        return rc > 0 ? -rc : ORCH_EDB; /* LMDB returns system errors as errno values */
    }
}

static int lmdb_error(const orch_payload *p, int rc, const char *what)
{
    return orch_error_set(lmdb_code(rc), "%s: %s: %s", p->dir, what, mdb_strerror(rc));
}

/* An error of a write (a commit, a sync) that wrote about `need` bytes. A full file system
 * is said as such: LMDB reports a short write — what a full disk gives — as EIO, which
 * would otherwise read as a failing disk. EIO is taken for a full disk when the file system
 * has less room left than the write needed; ENOSPC is one whatever the room (quotas,
 * reserved blocks). */
static int write_error(const orch_payload *p, int rc, const char *what, size_t need)
{
    struct statvfs fs;
    if ((rc != EIO && rc != ENOSPC) || statvfs(p->dir, &fs) != 0)
        return lmdb_error(p, rc, what);
    uint64_t room = (uint64_t)fs.f_bavail * fs.f_frsize;
    if (rc == EIO && room >= need)
        return lmdb_error(p, rc, what);
    return orch_error_set(-ENOSPC,
                          "%s: %s: the disk is full (no space left on the file system: "
                          "%" PRIu64 " bytes free, the write needs about %zu)",
                          p->dir, what, room, need);
}

/* ---- the map --------------------------------------------------------------------------- */

static size_t round_to_page(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return n > SIZE_MAX - page ? n : (n + page - 1) / page * page;
}

static void refresh_map_size(orch_payload *p)
{
    MDB_envinfo info;
    mdb_env_info(p->env, &info);
    p->map_size = info.me_mapsize;
}

/* mdb_env_set_mapsize() unmaps and maps again: every pointer a reader of this process
 * holds would dangle. It is therefore refused while this handle has readers. */
static int check_no_readers(const orch_payload *p, const char *why)
{
    if (p->nreaders == 0)
        return 0;
    return orch_error_set(-EBUSY,
                          "%s: %s, but this process holds %d read transaction(s); "
                          "end them first",
                          p->dir, why, p->nreaders);
}

/* Another process grew the map past what ours covers (MDB_MAP_RESIZED): follow it. */
static int adopt_map(orch_payload *p)
{
    int rc = check_no_readers(p, "another process grew the payload map");
    if (rc < 0)
        return rc;
    if ((rc = mdb_env_set_mapsize(p->env, 0)) != 0)
        return lmdb_error(p, rc, "adopt the grown map size");
    refresh_map_size(p);
    return 0;
}

/* The map is full: double it, or grow it by what the batch needs if that is more,
 * within max_map_size. */
static int grow_map(orch_payload *p, size_t need)
{
    int rc = check_no_readers(p, "the payload map must grow");
    if (rc < 0)
        return rc;
    size_t cur = p->map_size;
    size_t want = cur > SIZE_MAX / 2 ? SIZE_MAX : 2 * cur;
    if (need < SIZE_MAX / 2 - cur && cur + 2 * need > want)
        want = cur + 2 * need; /* values need their pages plus the tree's copies */
    want = round_to_page(want);
    if (p->max_map_size != 0 && want > p->max_map_size)
        want = p->max_map_size;
    if (want <= cur)
        return orch_error_set(-ENOSPC,
                              "%s: payload map is full at %zu bytes and cannot grow "
                              "(max_map_size %zu)",
                              p->dir, cur, p->max_map_size);
    if ((rc = mdb_env_set_mapsize(p->env, want)) != 0)
        return lmdb_error(p, rc, "grow the payload map");
    refresh_map_size(p);
    assert(p->map_size > cur);
    return 0;
}

/* ---- transactions ---------------------------------------------------------------------- */

static int begin_read(orch_payload *p, MDB_txn **txn)
{
    bool checked = false;
    for (;;) {
        int rc = mdb_txn_begin(p->env, NULL, MDB_RDONLY, txn);
        if (rc == MDB_MAP_RESIZED) {
            if ((rc = adopt_map(p)) < 0)
                return rc;
            continue;
        }
        /* The table is full: slots of processes killed inside a read may be what fills
         * it (nobody cleared them yet); free those and try once more. */
        int dead = 0;
        if (rc == MDB_READERS_FULL && !checked && mdb_reader_check(p->env, &dead) == 0 &&
            dead > 0) {
            checked = true;
            continue;
        }
        if (rc == MDB_READERS_FULL) {
            unsigned max = 0;
            mdb_env_get_maxreaders(p->env, &max);
            return orch_error_set(-EUSERS,
                                  "%s: begin a read transaction: all %u reader slots are "
                                  "taken (%s)",
                                  p->dir, max, mdb_strerror(rc));
        }
        return rc == 0 ? 0 : lmdb_error(p, rc, "begin a read transaction");
    }
}

/* A snapshot for a short read that copies out what it reads (get, ids, stat): a read
 * transaction, or, when every reader slot is taken, a write transaction that is aborted
 * after the read: it needs no slot, and only waits for a writer of another process, whose
 * transactions are short. So only zero-copy readers (orch_payload_read_begin) ever fail
 * for want of a slot. End it with mdb_txn_abort(). */
static int begin_snapshot(orch_payload *p, MDB_txn **txn)
{
    int rc = begin_read(p, txn);
    if (rc != -EUSERS)
        return rc;
    for (;;) {
        int wrc = mdb_txn_begin(p->env, NULL, 0, txn);
        if (wrc == MDB_MAP_RESIZED) {
            if ((wrc = adopt_map(p)) < 0)
                return wrc;
            continue;
        }
        return wrc == 0 ? 0 : rc; /* e.g. a read-only environment: the slot is what failed */
    }
}

/* The body of a write transaction: returns 0 or an LMDB code; must not commit or abort. */
typedef int (*write_fn)(orch_payload *p, MDB_txn *txn, void *ctx);

/* Runs fn in one write transaction, and all over again after making room when the map
 * was full (MDB_MAP_FULL can come from any put and from the commit itself). need: the
 * bytes fn writes, to grow the map enough in one step. */
static int run_write(orch_payload *p, write_fn fn, void *ctx, size_t need, const char *what)
{
    for (;;) {
        MDB_txn *txn;
        int rc = mdb_txn_begin(p->env, NULL, 0, &txn);
        if (rc == MDB_MAP_RESIZED) {
            if ((rc = adopt_map(p)) < 0)
                return rc;
            continue;
        }
        if (rc != 0)
            return lmdb_error(p, rc, what);
        rc = fn(p, txn, ctx);
        if (rc == 0)
            rc = mdb_txn_commit(txn); /* frees txn, also on failure */
        else
            mdb_txn_abort(txn);
        p->writes++; /* a failed commit may have written pages too */
        if (rc == 0)
            return 0;
        if (rc != MDB_MAP_FULL)
            return write_error(p, rc, what, need);
        if ((rc = grow_map(p, need)) < 0)
            return rc;
    }
}

static int meta_get(orch_payload *p, MDB_txn *txn, const char *key, uint64_t dflt,
                    uint64_t *out)
{
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = mdb_get(txn, p->meta, &k, &v);
    if (rc == MDB_NOTFOUND) {
        *out = dflt;
        return 0;
    }
    if (rc != 0)
        return rc;
    if (v.mv_size != sizeof *out)
        return MDB_CORRUPTED;
    memcpy(out, v.mv_data, sizeof *out);
    return 0;
}

static int meta_put(orch_payload *p, MDB_txn *txn, const char *key, uint64_t value)
{
    MDB_val k = {strlen(key), (void *)key}, v = {sizeof value, &value};
    return mdb_put(txn, p->meta, &k, &v, 0);
}

/* ---- open and close -------------------------------------------------------------------- */

static int create_dbis(orch_payload *p, MDB_txn *txn, void *ctx)
{
    (void)ctx;
    int rc = mdb_dbi_open(txn, "data", MDB_CREATE | MDB_INTEGERKEY, &p->data);
    return rc != 0 ? rc : mdb_dbi_open(txn, "meta", MDB_CREATE, &p->meta);
}

/* Opens the two databases. A read transaction suffices when they exist, and does not wait
 * for a writer; the first open of a new environment creates them under the write lock,
 * and so does an open that finds every reader slot taken (a write needs no slot), so that
 * a full reader table never keeps a process from opening the store. */
static int open_dbis(orch_payload *p)
{
    MDB_txn *txn;
    int rc = begin_read(p, &txn);
    if (rc == -EUSERS)
        return run_write(p, create_dbis, NULL, 0, "open the payload databases");
    if (rc < 0)
        return rc;
    rc = mdb_dbi_open(txn, "data", MDB_INTEGERKEY, &p->data);
    if (rc == 0)
        rc = mdb_dbi_open(txn, "meta", 0, &p->meta);
    if (rc == 0)
        rc = mdb_txn_commit(txn); /* keeps the handles for the environment */
    else
        mdb_txn_abort(txn);
    if (rc == MDB_NOTFOUND)
        return run_write(p, create_dbis, NULL, 0, "create the payload databases");
    return rc == 0 ? 0 : lmdb_error(p, rc, "open the payload databases");
}

/* LMDB maps the size configured before mdb_env_open() (or the data in use, if more),
 * not the size the environment has grown to. Adopt the grown size, so that a process
 * opening a big environment does not grow its map again step by step. */
static int adopt_stored_map_size(orch_payload *p)
{
    refresh_map_size(p);
    size_t configured = p->map_size;
    int rc = mdb_env_set_mapsize(p->env, 0); /* 0: the size stored in the environment */
    if (rc == 0) {
        refresh_map_size(p);
        if (p->map_size < configured)
            rc = mdb_env_set_mapsize(p->env, configured);
    }
    if (rc != 0)
        return lmdb_error(p, rc, "set the map size");
    refresh_map_size(p);
    return 0;
}

/* The most pages data.mdb may lack at its end although nothing is wrong with it (below):
 * seen, 2. A file shorter than that is refused without reading anything of it. */
#define TAIL_SLACK_PAGES 64

/* Whether every page from `lo` to `hi` is on LMDB's freelist (database 0, whose values
 * are lists of page numbers, the count first). A write transaction that takes a page past
 * the file's end and frees it again before it commits (a "loose" page, as a delete that
 * empties the page it copied leaves) counts it in the last page number without writing
 * it: the file then ends before pages that are free, and never read. */
static bool pages_free(orch_payload *p, uint64_t lo, uint64_t hi)
{
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val k, v;
    uint64_t found = 0;
    if (mdb_txn_begin(p->env, NULL, MDB_RDONLY, &txn) != 0)
        return false;
    if (mdb_cursor_open(txn, 0, &c) == 0) {
        while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0) {
            const size_t *ids = v.mv_data;
            size_t n = v.mv_size >= sizeof *ids ? ids[0] : 0;
            for (size_t i = 1; i <= n && (i + 1) * sizeof *ids <= v.mv_size; i++)
                found += ids[i] >= lo && ids[i] <= hi;
        }
        mdb_cursor_close(c);
    }
    mdb_txn_abort(txn);
    return found == hi - lo + 1;
}

/* LMDB maps data.mdb and would die of SIGBUS reading a page past its end: a truncated
 * file must be refused here. Every page up to the last one in use has been written, but
 * for a few free pages at the end (pages_free): the freelist is read only when the file
 * lacks no more than TAIL_SLACK_PAGES, so that a file cut short by more is refused before
 * a read of a page that may not be there. */
static int check_data_file(orch_payload *p)
{
    MDB_envinfo info;
    MDB_stat st;
    struct stat fst;
    char path[PATH_MAX];
    mdb_env_info(p->env, &info);
    mdb_env_stat(p->env, &st);
    snprintf(path, sizeof path, "%s/data.mdb", p->dir);
    if (stat(path, &fst) != 0)
        return orch_error_set(-errno, "%s: %s", path, strerror(errno));
    uint64_t need = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
/* The most pages data.mdb may lack at its end although nothing is wrong with it (below):
 * seen, 2. A file shorter than that is refused without reading anything of it. */
#define TAIL_SLACK_PAGES 64

    if ((uint64_t)fst.st_size < need &&
        !pages_free(p, (uint64_t)fst.st_size / st.ms_psize, info.me_last_pgno))
        return orch_error_set(ORCH_ECORRUPT,
                              "%s: data file is truncated: %lld bytes, %" PRIu64 " in use",
                              path, (long long)fst.st_size, need);
    return 0;
}

/* Creates p->env, configures it and opens it with `flags`. On failure p->env is closed
 * (LMDB's rule after a failed mdb_env_open) and NULL. */
static int env_open(orch_payload *p, const struct orch_payload_opts *o, unsigned flags)
{
    int rc = mdb_env_create(&p->env);
    if (rc != 0) {
        p->env = NULL;
        return lmdb_error(p, rc, "create environment");
    }
    if ((rc = mdb_env_set_maxdbs(p->env, 2)) != 0 ||
        (rc = mdb_env_set_maxreaders(p->env, o->max_readers)) != 0 ||
        (rc = mdb_env_set_mapsize(p->env, round_to_page(o->map_size))) != 0 ||
        (rc = mdb_env_open(p->env, p->dir, flags, 0644)) != 0) {
        mdb_env_close(p->env);
        p->env = NULL;
        return lmdb_error(p, rc, "open environment");
    }
    return 0;
}

int orch_payload_open(const char *dir, const struct orch_payload_opts *opts, orch_payload **out)
{
    assert(dir != NULL && out != NULL);
    *out = NULL;
    struct orch_payload_opts o = opts != NULL ? *opts : (struct orch_payload_opts){0};
    if (o.max_map_size != 0 && o.map_size > o.max_map_size)
        return orch_error_set(-EINVAL, "%s: map_size %zu exceeds max_map_size %zu", dir,
                              o.map_size, o.max_map_size);
    if (o.map_size == 0)
        o.map_size = ORCH_PAYLOAD_DEFAULT_MAP_SIZE;
    if (o.max_map_size != 0 && o.map_size > o.max_map_size)
        o.map_size = o.max_map_size;
    if (o.max_readers == 0)
        o.max_readers = ORCH_PAYLOAD_DEFAULT_MAX_READERS;
    if (o.readonly)
        o.no_create = true;

    orch_payload *p = calloc(1, sizeof *p);
    if (p == NULL || (p->dir = strdup(dir)) == NULL) {
        free(p);
        return orch_error_set(-ENOMEM, "%s: out of memory", dir);
    }
    p->pid = getpid();
    p->max_map_size = o.max_map_size;
    p->max_value = o.max_value == 0 || o.max_value > ORCH_PAYLOAD_MAX_VALUE
                       ? ORCH_PAYLOAD_MAX_VALUE
                       : o.max_value;

    int rc;
    if (o.no_create) {
        /* An existing store only: its data file must be there (LMDB would create it). */
        char path[PATH_MAX];
        struct stat fst;
        snprintf(path, sizeof path, "%s/data.mdb", dir);
        if (stat(path, &fst) != 0) {
            rc = errno == ENOENT
                     ? orch_error_set(-ENOENT, "%s: no payload store here (%s)", dir,
                                      access(dir, F_OK) == 0 ? "no data.mdb"
                                                             : "the directory does not exist")
                     : orch_error_set(-errno, "%s: %s", path, strerror(errno));
            goto fail_free;
        }
    } else if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        rc = orch_error_set(-errno, "%s: cannot create directory: %s", dir, strerror(errno));
        goto fail_free;
    }
    /* MDB_NOTLS: read transactions belong to their handle, not to the thread, so one
     * thread may hold several. MDB_NORDAHEAD: payload reads are random. */
    unsigned flags =
        MDB_NOTLS | MDB_NORDAHEAD | (o.nosync ? MDB_NOSYNC : 0) | (o.readonly ? MDB_RDONLY : 0);
    rc = env_open(p, &o, flags);
    /* LMDB opens lock.mdb for writing even to read (a reader writes its slot there); it
     * goes without only on a read-only file system (EROFS). A store of another user, or a
     * copy made read-only, is read without the lock table when the caller vouches that
     * nothing writes it meanwhile. */
    if ((rc == -EACCES || rc == -EPERM) && o.readonly && o.lockless_ok)
        rc = env_open(p, &o, flags | MDB_NOLOCK);
    if (rc < 0)
        goto fail_free;
    /* Readers of processes killed while reading still pin pages: clear them now. */
    if ((rc = mdb_reader_check(p->env, &p->stale_readers)) != 0) {
        rc = lmdb_error(p, rc, "check readers");
        goto fail_env;
    }
    if ((rc = adopt_stored_map_size(p)) < 0 || (rc = check_data_file(p)) < 0 ||
        (rc = open_dbis(p)) < 0)
        goto fail_env;
    *out = p;
    return 0;

fail_env:
    mdb_env_close(p->env); /* also after a failed mdb_env_open */
fail_free:
    free(p->dir);
    free(p);
    return rc;
}

void orch_payload_close(orch_payload *p)
{
    if (p == NULL)
        return;
    assert_owner(p);
    assert(p->nreaders == 0 && "end every read transaction before closing");
    mdb_env_close(p->env);
    free(p->dir);
    free(p);
}

/* ---- writing --------------------------------------------------------------------------- */

struct put_ctx {
    const struct orch_iov *vals;
    size_t n;
    uint64_t *ids;
};

static int put_batch(orch_payload *p, MDB_txn *txn, void *ctx)
{
    /* A zero-length value still needs a valid pointer to copy from. */
    static const char empty[1];
    struct put_ctx *c = ctx;
    uint64_t next, bytes;
    int rc = meta_get(p, txn, META_NEXT_ID, 1, &next);
    if (rc == 0)
        rc = meta_get(p, txn, META_BYTES, 0, &bytes);
    for (size_t i = 0; rc == 0 && i < c->n; i++) {
        uint64_t id = next + i;
        MDB_val k = {sizeof id, &id};
        MDB_val v = {c->vals[i].len, c->vals[i].len ? (void *)c->vals[i].data : (void *)empty};
        /* Ids only increase, so every key goes at the end of the tree: MDB_APPEND skips
         * the search, and refuses (MDB_KEYEXIST) a key that is not the largest, which
         * would mean the counter fell behind the data. */
        rc = mdb_put(txn, p->data, &k, &v, MDB_APPEND);
        bytes += c->vals[i].len;
        c->ids[i] = id;
    }
    if (rc == 0)
        rc = meta_put(p, txn, META_NEXT_ID, next + c->n);
    if (rc == 0)
        rc = meta_put(p, txn, META_BYTES, bytes);
    return rc;
}

int orch_payload_put_many(orch_payload *p, const struct orch_iov *vals, size_t n,
                          uint64_t *ids_out)
{
    assert_owner(p);
    if (n == 0)
        return 0;
    assert(vals != NULL && ids_out != NULL);
    size_t need = 64 * 1024;
    for (size_t i = 0; i < n; i++) {
        assert(vals[i].data != NULL || vals[i].len == 0);
        /* Before anything is written: LMDB would refuse it only in the middle of the
         * transaction (MDB_BAD_VALSIZE), and the caller must know it from a store failure. */
        if (vals[i].len > p->max_value)
            return orch_error_set(-EFBIG,
                                  "%s: value %zu of %zu is %zu bytes, over the payload "
                                  "store's limit of %zu bytes per value",
                                  p->dir, i + 1, n, vals[i].len, p->max_value);
        need += vals[i].len + 64; /* the value, its node and the page it starts */
    }
    struct put_ctx c = {vals, n, ids_out};
    return run_write(p, put_batch, &c, need, "put");
}

size_t orch_payload_max_value(const orch_payload *p)
{
    return p->max_value;
}

int orch_payload_put(orch_payload *p, const void *data, size_t len, uint64_t *id_out)
{
    struct orch_iov v = {data, len};
    return orch_payload_put_many(p, &v, 1, id_out);
}

struct delete_ctx {
    const uint64_t *ids; /* ascending */
    size_t n;
    size_t ndeleted;
};

/* One cursor walks the ids in order: a look-up each (mdb_get then mdb_del made two), and
 * LMDB finds the next id on the page it is on when it can. */
static int delete_batch(orch_payload *p, MDB_txn *txn, void *ctx)
{
    struct delete_ctx *c = ctx;
    uint64_t bytes;
    MDB_cursor *cur = NULL;
    int rc = meta_get(p, txn, META_BYTES, 0, &bytes);
    if (rc == 0)
        rc = mdb_cursor_open(txn, p->data, &cur);
    c->ndeleted = 0;
    for (size_t i = 0; rc == 0 && i < c->n; i++) {
        uint64_t id = c->ids[i];
        MDB_val k = {sizeof id, &id}, v;
        rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY);
        if (rc == MDB_NOTFOUND) {
            rc = 0; /* never stored, or already deleted */
            continue;
        }
        if (rc == 0) {
            assert(bytes >= v.mv_size);
            bytes -= v.mv_size;
            rc = mdb_cursor_del(cur, 0);
            c->ndeleted++;
        }
    }
    if (cur)
        mdb_cursor_close(cur);
    if (rc == 0)
        rc = meta_put(p, txn, META_BYTES, bytes);
    return rc;
}

int orch_payload_delete_many(orch_payload *p, uint64_t *ids, size_t n, size_t *ndeleted)
{
    assert_owner(p);
    if (n > 1) /* in place: a copy of a million ids was 8 MB more at the driver's peak */
        orch__sort_u64(ids, n);
    struct delete_ctx c = {ids, n, 0};
    int rc = n == 0 ? 0 : run_write(p, delete_batch, &c, 64 * 1024, "delete");
    if (ndeleted != NULL)
        *ndeleted = rc == 0 ? c.ndeleted : 0;
    return rc;
}

int orch_payload_data_file(const orch_payload *p, char *buf, size_t n)
{
    /* LMDB's one data file in the environment's directory (no MDB_NOSUBDIR). */
    return (size_t)snprintf(buf, n, "%s/data.mdb", p->dir) < n ? 0 : -ENAMETOOLONG;
}

uint64_t orch_payload_writes(const orch_payload *p)
{
    return p->writes;
}

int orch_payload_sync(orch_payload *p)
{
    assert_owner(p);
    int rc = mdb_env_sync(p->env, 1);
    return rc == 0 ? 0 : write_error(p, rc, "sync", 1);
}

int orch_payload_reader_check(orch_payload *p, int *dead)
{
    assert_owner(p);
    int n = 0;
    int rc = mdb_reader_check(p->env, &n);
    if (dead != NULL)
        *dead = n;
    return rc == 0 ? 0 : lmdb_error(p, rc, "check readers");
}

/* ---- reading --------------------------------------------------------------------------- */

static int read_in(orch_payload *p, MDB_txn *txn, uint64_t id, MDB_val *v)
{
    MDB_val k = {sizeof id, &id};
    int rc = mdb_get(txn, p->data, &k, v);
    if (rc == MDB_NOTFOUND)
        return orch_error_set(ORCH_ENOTFOUND, "%s: no payload %" PRIu64, p->dir, id);
    return rc == 0 ? 0 : lmdb_error(p, rc, "read");
}

int orch_payload_get(orch_payload *p, uint64_t id, void **data, size_t *len)
{
    assert_owner(p);
    MDB_txn *txn;
    MDB_val v;
    int rc = begin_snapshot(p, &txn);
    if (rc < 0)
        return rc;
    if ((rc = read_in(p, txn, id, &v)) == 0) {
        void *copy = malloc(v.mv_size ? v.mv_size : 1);
        if (copy == NULL) {
            rc =
                orch_error_set(-ENOMEM, "%s: out of memory for payload %" PRIu64 " (%zu bytes)",
                               p->dir, id, v.mv_size);
        } else {
            memcpy(copy, v.mv_data, v.mv_size);
            *data = copy;
            *len = v.mv_size;
        }
    }
    mdb_txn_abort(txn);
    return rc;
}

int orch_payload_read_begin(orch_payload *p, orch_payload_rtxn **out)
{
    assert_owner(p);
    *out = NULL;
    orch_payload_rtxn *r = malloc(sizeof *r);
    if (r == NULL)
        return orch_error_set(-ENOMEM, "%s: out of memory", p->dir);
    int rc = begin_read(p, &r->txn);
    if (rc < 0) {
        free(r);
        return rc;
    }
    r->p = p;
    p->nreaders++;
    *out = r;
    return 0;
}

int orch_payload_read(orch_payload_rtxn *r, uint64_t id, const void **data, size_t *len)
{
    MDB_val v;
    int rc = read_in(r->p, r->txn, id, &v);
    if (rc == 0) {
        *data = v.mv_data;
        *len = v.mv_size;
    }
    return rc;
}

void orch_payload_read_end(orch_payload_rtxn *r)
{
    if (r == NULL)
        return;
    assert(r->p->nreaders > 0);
    r->p->nreaders--;
    mdb_txn_abort(r->txn);
    free(r);
}

int orch_payload_stat(orch_payload *p, struct orch_payload_stat *st)
{
    assert_owner(p);
    MDB_txn *txn;
    MDB_stat ms;
    MDB_envinfo info;
    int rc = begin_snapshot(p, &txn);
    if (rc < 0)
        return rc;
    memset(st, 0, sizeof *st);
    rc = mdb_stat(txn, p->data, &ms);
    if (rc == 0)
        rc = meta_get(p, txn, META_NEXT_ID, 1, &st->next_id);
    if (rc == 0)
        rc = meta_get(p, txn, META_BYTES, 0, &st->bytes);
    mdb_txn_abort(txn);
    if (rc != 0)
        return lmdb_error(p, rc, "stat");
    mdb_env_info(p->env, &info);
    st->count = ms.ms_entries;
    st->map_size = p->map_size;
    st->used_size = ((size_t)info.me_last_pgno + 1) * ms.ms_psize;
    st->stale_readers = p->stale_readers;
    return 0;
}

int orch_payload_ids(orch_payload *p, uint64_t start, uint64_t *ids, size_t max, size_t *n_out)
{
    assert_owner(p);
    *n_out = 0;
    MDB_txn *txn;
    MDB_cursor *cur;
    int rc = begin_snapshot(p, &txn);
    if (rc < 0)
        return rc;
    rc = mdb_cursor_open(txn, p->data, &cur);
    if (rc == 0) {
        /* MDB_INTEGERKEY keys come back in ascending order of id. */
        MDB_val k = {sizeof start, &start}, v;
        size_t n = 0;
        int r = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
        for (; r == 0 && n < max; r = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
            memcpy(&ids[n++], k.mv_data, sizeof *ids);
        if (r != 0 && r != MDB_NOTFOUND)
            rc = r;
        *n_out = n;
        mdb_cursor_close(cur);
    }
    mdb_txn_abort(txn);
    return rc != 0 ? lmdb_error(p, rc, "list ids") : 0;
}

int orch_payload_identity_get(orch_payload *p, char buf[ORCH_PAYLOAD_IDENTITY_MAX])
{
    assert_owner(p);
    buf[0] = '\0';
    MDB_txn *txn;
    int rc = begin_snapshot(p, &txn);
    if (rc < 0)
        return rc;
    MDB_val k = {strlen(META_IDENTITY), (void *)META_IDENTITY}, v;
    int mrc = mdb_get(txn, p->meta, &k, &v);
    if (mrc == 0 && (v.mv_size == 0 || v.mv_size >= ORCH_PAYLOAD_IDENTITY_MAX ||
                     memchr(v.mv_data, '\0', v.mv_size) != NULL))
        rc = orch_error_set(ORCH_ECORRUPT, "%s: the store's identity is not valid text",
                            p->dir);
    else if (mrc == 0) {
        memcpy(buf, v.mv_data, v.mv_size);
        buf[v.mv_size] = '\0';
    } else if (mrc == MDB_NOTFOUND)
        rc = orch_error_set(ORCH_ENOTFOUND, "%s: the store has no identity", p->dir);
    else
        rc = lmdb_error(p, mrc, "read the identity");
    mdb_txn_abort(txn);
    return rc;
}

struct identity_ctx {
    const char *id;
    bool other; /* the store already has another identity */
};

static int identity_put(orch_payload *p, MDB_txn *txn, void *ctx)
{
    struct identity_ctx *c = ctx;
    size_t n = strlen(c->id);
    MDB_val k = {strlen(META_IDENTITY), (void *)META_IDENTITY}, v;
    int rc = mdb_get(txn, p->meta, &k, &v);
    if (rc == 0) {
        c->other = v.mv_size != n || memcmp(v.mv_data, c->id, n) != 0;
        return 0;
    }
    if (rc != MDB_NOTFOUND)
        return rc;
    v = (MDB_val){n, (void *)c->id};
    return mdb_put(txn, p->meta, &k, &v, 0);
}

int orch_payload_identity_set(orch_payload *p, const char *id)
{
    assert_owner(p);
    size_t n = strlen(id);
    if (n == 0 || n >= ORCH_PAYLOAD_IDENTITY_MAX)
        return orch_error_set(-EINVAL, "%s: an identity is 1 to %d bytes", p->dir,
                              ORCH_PAYLOAD_IDENTITY_MAX - 1);
    struct identity_ctx c = {id, false};
    int rc = run_write(p, identity_put, &c, 64 * 1024, "set the identity");
    if (rc == 0 && c.other)
        rc = orch_error_set(-EEXIST, "%s: the store already has another identity", p->dir);
    return rc;
}

static struct orch_payload_limits job_limits; /* orch_payload_set_job_limits's */

void orch_payload_set_job_limits(const struct orch_payload_limits *l)
{
    job_limits = *l;
}

void orch_payload_job_opts(struct orch_payload_opts *o)
{
    memset(o, 0, sizeof *o);
    o->nosync = true;
    o->max_map_size = job_limits.max_map_size;
    if (o->max_map_size && o->max_map_size < ORCH_PAYLOAD_DEFAULT_MAP_SIZE)
        o->map_size = o->max_map_size;
    /* Out of range: the default (0). */
    size_t readers = job_limits.max_readers;
    o->max_readers = readers <= ORCH_PAYLOAD_DEFAULT_MAX_READERS ? (unsigned)readers : 0;
    size_t value = job_limits.max_value;
    o->max_value = value <= ORCH_PAYLOAD_MAX_VALUE ? value : 0;
}
