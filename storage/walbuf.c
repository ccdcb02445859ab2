/* walbuf.c — a SQLite VFS that hands a commit's write-ahead log to the kernel in a few
 * writes instead of two a page.
 *
 * Why. SQLite writes a commit's log as frames, each with two write() calls: a 24-byte frame
 * header, then the page. The driver commits every loop turn, dozens to hundreds of pages
 * a turn (scripts/bench/scheduler: 0.16 frames a grain, 322,000 pwrite64 calls for a
 * million grains), and each call pays the system call and the file system's per-write
 * work (locks, timestamps) for 4 KiB: 0.64 s of kernel time for 160,000 frames against
 * 0.07 s for the same bytes in 580 KB writes (a stand-alone measurement on the 2-core
 * machine of BENCHMARKS.md, where the driver's whole run is 6-8 s).
 *
 * What. "orch-walbuf" wraps the default VFS and changes one thing: the appends to a log
 * file (opened with SQLITE_OPEN_WAL), writes past every byte written to it since it last
 * began at offset 0, are kept in a buffer, and the buffer is written (in writes of up to
 * 124 KiB, flush)
 *   - once the page of a commit frame is in it (the frame header's second word, the size
 *     of the database after the commit, is nonzero only there: the WAL file format);
 *   - before anything else is done with the file: a write that is not an append (the log
 *     header, a frame of the same transaction rewritten in place: these are written at
 *     once, after the buffer), a read, a sync, a size, a truncate, a file control, a
 *     close;
 *   - when the next append would take it past BUF_MAX (that append is written at once).
 *
 * Why that is safe. A frame is visible to no reader until SQLite records it in the
 * wal-index (shared memory), which it does after it has written every frame of the
 * commit, and so after the commit frame's page, when the buffer is already written: a
 * reader in another process (`orch status`) never finds an indexed frame missing from the
 * file. When sqlite3_exec("COMMIT") returns, the commit's bytes are in the kernel: a
 * kill -9 of the driver afterwards loses nothing (tests/test_walbuf.c kills a child right
 * after its COMMIT). Frames of a transaction not yet committed may sit in the buffer, as
 * they may sit in SQLite's page cache: a crash loses them with the transaction. The syncs
 * (synchronous = FULL, checkpoints) write the buffer first, so they cover every byte
 * SQLite wrote. A failed write of the buffer is the error of the call that made it (a
 * commit's, for the commit frame): SQLite then rolls the transaction back, and its frames
 * past the last commit are never read, so the buffer is dropped either way
 * (tests/test_walbuf.c fills the disk during a commit).
 *
 * Files other than logs, and every other method, go straight to the default VFS. */
#include "store_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

/* The most the buffer holds before it is written anyway: a large transaction (the first
 * turns of a big admission) spills its pages in pieces. */
#define BUF_MAX (8u << 20)
/* The most bytes one write to the default VFS may ask (flush). */
#define WRITE_MAX ((size_t)124 << 10)
/* The WAL format: a frame header's size, and where its commit word lies in it. */
#define FRAME_HDR 24
#define COMMIT_AT 4

struct wfile {
    sqlite3_file base;   /* our methods */
    sqlite3_file *real;  /* the default VFS's file, allocated right after this struct */
    bool wal;            /* a log: its appends are buffered */
    bool commit_next;    /* the last write was a commit frame's header: its page ends it */
    sqlite3_int64 high;  /* the end of the furthest write to the log since it began at 0 */
    unsigned char *buf;  /* bytes for [off, off + len) of the file */
    size_t len, cap;
    sqlite3_int64 off;
};

static sqlite3_vfs *base_vfs;
static sqlite3_vfs walbuf_vfs;
static sqlite3_io_methods walbuf_io;
static struct orch_store_walbuf_stats stats;

/* Writes the buffer, dropping it either way. In pieces of at most WRITE_MAX: the unix
 * VFS writes at most 128 KiB - 1 a call (it masks the length with 0x1ffff), and a larger
 * write through it fails as a full disk. */
static int flush(struct wfile *f)
{
    int rc = SQLITE_OK;
    for (size_t at = 0; at < f->len && rc == SQLITE_OK; at += WRITE_MAX) {
        size_t n = f->len - at < WRITE_MAX ? f->len - at : WRITE_MAX;
        rc = f->real->pMethods->xWrite(f->real, f->buf + at, (int)n,
                                       f->off + (sqlite3_int64)at);
        __atomic_add_fetch(&stats.flushes, 1, __ATOMIC_RELAXED);
    }
    f->len = 0;
    f->commit_next = false;
    return rc;
}

static int x_close(sqlite3_file *p)
{
    struct wfile *f = (struct wfile *)p;
    int rc = flush(f);
    int rc2 = f->real->pMethods->xClose(f->real);
    free(f->buf);
    f->buf = NULL;
    f->cap = 0;
    return rc != SQLITE_OK ? rc : rc2;
}

static int x_read(sqlite3_file *p, void *out, int n, sqlite3_int64 off)
{
    struct wfile *f = (struct wfile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, out, n, off);
}

/* Whether a 24-byte write is a commit frame's header (the WAL format: a frame header's
 * second word is nonzero only in the frame that ends a commit). Only appends are looked
 * at, and SQLite appends nothing else of 24 bytes (the log header is 32, pages 512 or
 * more). */
static bool commit_header(const void *data, int n)
{
    if (n != FRAME_HDR)
        return false;
    const unsigned char *h = data;
    return (h[COMMIT_AT] | h[COMMIT_AT + 1] | h[COMMIT_AT + 2] | h[COMMIT_AT + 3]) != 0;
}

static int write_through(struct wfile *f, const void *data, int n, sqlite3_int64 off)
{
    __atomic_add_fetch(&stats.through, 1, __ATOMIC_RELAXED);
    int rc = flush(f);
    if (rc == SQLITE_OK)
        rc = f->real->pMethods->xWrite(f->real, data, n, off);
    if (off + n > f->high)
        f->high = off + n;
    return rc;
}

/* The frame loop of a commit writes each frame past every byte this handle wrote to the
 * log since it last started at 0 (`high`): those appends are buffered. Everything else is
 * written at once, after the buffer: the log's header (offset 0: the log starts again,
 * and `high` with it), and the rewrites of frames of the transaction that SQLite makes in
 * place (a page written twice, its checksums recomputed at the commit) — the last write
 * before a commit is published may be one of those, and nothing would flush it. */
static int x_write(sqlite3_file *p, const void *data, int n, sqlite3_int64 off)
{
    struct wfile *f = (struct wfile *)p;
    if (!f->wal)
        return f->real->pMethods->xWrite(f->real, data, n, off);
    __atomic_add_fetch(&stats.writes, 1, __ATOMIC_RELAXED);
    if (off == 0)
        f->high = 0;
    if (off < f->high || off == 0)
        return write_through(f, data, n, off);
    int rc;
    if (f->len > 0 && off != f->off + (sqlite3_int64)f->len && (rc = flush(f)) != SQLITE_OK)
        return rc;
    if (f->len + (size_t)n > f->cap) {
        size_t cap = f->cap ? f->cap : 256u << 10;
        while (cap < f->len + (size_t)n)
            cap *= 2;
        unsigned char *b = cap <= BUF_MAX ? realloc(f->buf, cap) : NULL;
        if (b == NULL) /* too big, or no memory: written at once, as without the buffer */
            return write_through(f, data, n, off);
        f->buf = b;
        f->cap = cap;
    }
    if (f->len == 0)
        f->off = off;
    memcpy(f->buf + f->len, data, (size_t)n);
    f->len += (size_t)n;
    f->high = off + n;
    if (f->commit_next)
        return flush(f); /* the commit frame's page: the commit is whole */
    f->commit_next = commit_header(data, n);
    return SQLITE_OK;
}

static int x_truncate(sqlite3_file *p, sqlite3_int64 size)
{
    struct wfile *f = (struct wfile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int x_sync(sqlite3_file *p, int flags)
{
    struct wfile *f = (struct wfile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int x_file_size(sqlite3_file *p, sqlite3_int64 *size)
{
    struct wfile *f = (struct wfile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int x_lock(sqlite3_file *p, int lock)
{
    struct wfile *f = (struct wfile *)p;
    return f->real->pMethods->xLock(f->real, lock);
}

static int x_unlock(sqlite3_file *p, int lock)
{
    struct wfile *f = (struct wfile *)p;
    return f->real->pMethods->xUnlock(f->real, lock);
}

static int x_check_reserved(sqlite3_file *p, int *out)
{
    struct wfile *f = (struct wfile *)p;
    return f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int x_file_control(sqlite3_file *p, int op, void *arg)
{
    struct wfile *f = (struct wfile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileControl(f->real, op, arg);
}

static int x_sector_size(sqlite3_file *p)
{
    struct wfile *f = (struct wfile *)p;
    return f->real->pMethods->xSectorSize(f->real);
}

static int x_device(sqlite3_file *p)
{
    struct wfile *f = (struct wfile *)p;
    return f->real->pMethods->xDeviceCharacteristics(f->real);
}

static int x_shm_map(sqlite3_file *p, int region, int size, int extend, void volatile **out)
{
    struct wfile *f = (struct wfile *)p;
    return f->real->pMethods->xShmMap(f->real, region, size, extend, out);
}

static int x_shm_lock(sqlite3_file *p, int offset, int n, int flags)
{
    struct wfile *f = (struct wfile *)p;
    return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}

static void x_shm_barrier(sqlite3_file *p)
{
    struct wfile *f = (struct wfile *)p;
    f->real->pMethods->xShmBarrier(f->real);
}

static int x_shm_unmap(sqlite3_file *p, int del)
{
    struct wfile *f = (struct wfile *)p;
    return f->real->pMethods->xShmUnmap(f->real, del);
}

static int x_fetch(sqlite3_file *p, sqlite3_int64 off, int n, void **out)
{
    struct wfile *f = (struct wfile *)p;
    if (f->real->pMethods->iVersion < 3) {
        *out = NULL; /* no memory map: SQLite reads instead */
        return SQLITE_OK;
    }
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFetch(f->real, off, n, out);
}

static int x_unfetch(sqlite3_file *p, sqlite3_int64 off, void *page)
{
    struct wfile *f = (struct wfile *)p;
    if (f->real->pMethods->iVersion < 3)
        return SQLITE_OK;
    return f->real->pMethods->xUnfetch(f->real, off, page);
}

static int x_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *p, int flags, int *out)
{
    (void)vfs;
    struct wfile *f = (struct wfile *)p;
    memset(f, 0, sizeof *f);
    f->real = (sqlite3_file *)(f + 1);
    int rc = base_vfs->xOpen(base_vfs, name, f->real, flags, out);
    /* A file the default VFS did not open has no methods: SQLite then calls none of ours
     * (not even xClose). */
    if (f->real->pMethods == NULL)
        return rc;
    f->wal = (flags & SQLITE_OPEN_WAL) != 0;
    f->base.pMethods = &walbuf_io;
    return rc;
}

/* The default VFS's other methods, called through it. */
static int x_delete(sqlite3_vfs *v, const char *name, int sync_dir)
{
    (void)v;
    return base_vfs->xDelete(base_vfs, name, sync_dir);
}

static int x_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    (void)v;
    return base_vfs->xAccess(base_vfs, name, flags, out);
}

static int x_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
    (void)v;
    return base_vfs->xFullPathname(base_vfs, name, n, out);
}

static void *x_dlopen(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return base_vfs->xDlOpen(base_vfs, name);
}

static void x_dlerror(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    base_vfs->xDlError(base_vfs, n, out);
}

static void (*x_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    (void)v;
    return base_vfs->xDlSym(base_vfs, h, sym);
}

static void x_dlclose(sqlite3_vfs *v, void *h)
{
    (void)v;
    base_vfs->xDlClose(base_vfs, h);
}

static int x_randomness(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return base_vfs->xRandomness(base_vfs, n, out);
}

static int x_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return base_vfs->xSleep(base_vfs, us);
}

static int x_current_time(sqlite3_vfs *v, double *out)
{
    (void)v;
    return base_vfs->xCurrentTime(base_vfs, out);
}

static int x_last_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return base_vfs->xGetLastError(base_vfs, n, out);
}

static int x_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    (void)v;
    return base_vfs->xCurrentTimeInt64(base_vfs, out);
}

int orch_store__walbuf_register(void)
{
    if (sqlite3_vfs_find(ORCH_STORE_WALBUF_VFS))
        return 0;
    base_vfs = sqlite3_vfs_find(NULL);
    /* Version 2 methods at least (xCurrentTimeInt64), version 3 files (xFetch): what the
     * unix VFS has had since SQLite 3.8. Anything older is used as it is, unwrapped. */
    if (base_vfs == NULL || base_vfs->iVersion < 2)
        return -ENOSYS;
    walbuf_io = (sqlite3_io_methods){
        .iVersion = 3,
        .xClose = x_close,
        .xRead = x_read,
        .xWrite = x_write,
        .xTruncate = x_truncate,
        .xSync = x_sync,
        .xFileSize = x_file_size,
        .xLock = x_lock,
        .xUnlock = x_unlock,
        .xCheckReservedLock = x_check_reserved,
        .xFileControl = x_file_control,
        .xSectorSize = x_sector_size,
        .xDeviceCharacteristics = x_device,
        .xShmMap = x_shm_map,
        .xShmLock = x_shm_lock,
        .xShmBarrier = x_shm_barrier,
        .xShmUnmap = x_shm_unmap,
        .xFetch = x_fetch,
        .xUnfetch = x_unfetch,
    };
    walbuf_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(struct wfile) + base_vfs->szOsFile,
        .mxPathname = base_vfs->mxPathname,
        .zName = ORCH_STORE_WALBUF_VFS,
        .xOpen = x_open,
        .xDelete = x_delete,
        .xAccess = x_access,
        .xFullPathname = x_full_pathname,
        .xDlOpen = x_dlopen,
        .xDlError = x_dlerror,
        .xDlSym = x_dlsym,
        .xDlClose = x_dlclose,
        .xRandomness = x_randomness,
        .xSleep = x_sleep,
        .xCurrentTime = x_current_time,
        .xGetLastError = x_last_error,
        .xCurrentTimeInt64 = x_current_time_int64,
    };
    return sqlite3_vfs_register(&walbuf_vfs, 0) == SQLITE_OK ? 0 : -ENOMEM;
}

void orch_store__walbuf_stats(struct orch_store_walbuf_stats *out)
{
    out->writes = __atomic_load_n(&stats.writes, __ATOMIC_RELAXED);
    out->flushes = __atomic_load_n(&stats.flushes, __ATOMIC_RELAXED);
    out->through = __atomic_load_n(&stats.through, __ATOMIC_RELAXED);
}
