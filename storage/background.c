/* background.c — the state store's background thread (the driver's): checkpoints of the
 * write-ahead log and syncs of state.db, made off the driver's loop.
 *
 * Why. With synchronous = NORMAL (--durability process) a commit writes the WAL without
 * syncing it, but two things the driver did in its loop wait on the disk: SQLite's
 * autocheckpoint (every 8,000 pages, run by the commit that crosses them) syncs the WAL
 * and the database file, and the deletes of reclaimed payloads wait for a sync of both
 * (engine/prop/reclaim.c). Each fdatasync took 16 to 190 ms on the 2-core machine of
 * BENCHMARKS.md: together about 15% of scripts/bench/scheduler's wall clock, with the
 * driver idle and its workers waiting for it. Here a thread of the store's own makes them,
 * on a connection of its own, while the driver goes on.
 *
 * Checkpoints. While the thread runs, the driver's connection has no autocheckpoint: its
 * WAL hook, after each commit, asks the thread for a PASSIVE checkpoint once the log holds
 * CKPT_FRAMES. A PASSIVE checkpoint never blocks the writer: it copies the frames
 * committed before it began, and syncs, while the driver commits more. SQLite starts the
 * log again from its beginning only at a write that finds every frame copied, which a
 * driver committing all along would seldom find; so when the thread is done, the
 * driver's next commit checkpoints the rest itself (the frames of the turns committed
 * meanwhile: its syncs have little to write), and the write after it starts the log
 * again. Should the log grow past CKPT_FRAMES_MAX all the same (a reader holding an old
 * snapshot, a thread that cannot keep up), the driver checkpoints itself whenever the
 * thread is idle, as the autocheckpoint did.
 *
 * Syncs. orch_store_sync_begin asks for a sync of both files that covers every commit made
 * before it; orch_store_sync_end says when it is done. orch_store_file_sync_begin asks
 * for one of another file (the payload store's, which --durability machine syncs before
 * each commit), made by a second thread so that it never queues behind a checkpoint, and
 * the driver's CPU work of the turn runs while the disk flushes; orch_store_file_sync_end
 * waits for it, or withdraws it if the thread has not taken it yet, and the caller syncs. The thread syncs through
 * descriptors of its own: fdatasync covers every write made before it began, whoever made
 * it.
 *
 * Threads. The threads touch only the fields under `mu`, the first its own connection; the
 * driver's connection stays the driver's. Every signal is blocked in them, so that the
 * driver's handlers (libevent's SIGCHLD, SIGINT) run on the driver's thread. Workers are
 * started with clone(CLONE_VM | CLONE_VFORK) and exec at once (engine/base/proc.c), so
 * no child inherits a lock the thread held. */
#include "store_int.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"

/* The log size (frames of a page) at which the thread checkpoints: what the
 * autocheckpoint of store.c (configure) uses. */
#define CKPT_FRAMES 8000
/* Past this the driver checkpoints itself (256 MiB of 4 KiB pages). */
#define CKPT_FRAMES_MAX 64000
/* The thread's rounds of checkpoints at most, and the frames that a round must find new
 * for another to follow (checkpoint). */
#define CKPT_ROUNDS 4
#define CKPT_LITTLE 256
/* The database file grows by this much at a time (orch_store_background_start). */
#define CHUNK_BYTES (1 << 20)

/* One kind of sync the threads make on demand: tickets of the last asked for, the last
 * taken (begun, or withdrawn), the last made, and its result. Under mu. */
struct sync_job {
    uint64_t asked, taken, done;
    int rc;
    char why[256]; /* its error */
};

struct orch_store_bg {
    pthread_t thread;
    sqlite3 *db; /* the thread's connection: checkpoints only */
    char *wal;   /* the log's path */
    const char *path;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the thread waits on it for work */
    pthread_cond_t done; /* orch_store_sync_end(wait) waits on it */
    pthread_t file_thread;
    pthread_cond_t file_wake; /* the file thread waits on it */
    /* Under mu. */
    bool stop;
    bool ckpt_asked; /* the thread is to checkpoint */
    bool ckpt_busy;  /* asked, or checkpointing */
    bool ckpt_done;  /* finished: the driver's next commit checkpoints the rest */
    int frames, frames_max; /* CKPT_FRAMES, CKPT_FRAMES_MAX, or a test's */
    int64_t cycles;         /* checkpoints the thread made (tests) */
    int copied;             /* the frames of the log its last one had copied (tests) */
    int last_frames;        /* the log's size after the driver's last commit (tests) */
    struct sync_job state; /* orch_store_sync_begin: state.db's log and file */
    struct sync_job file;  /* orch_store_file_sync_begin: file_path */
    const char *file_path;
};

/* PASSIVE checkpoints, in rounds: each copies what the driver committed during the one
 * before, until a round finds little new (or after CKPT_ROUNDS), so that the driver's own,
 * which ends the cycle (on_wal), has only a few turns' frames to copy and sync. Then a
 * sync of the database file: SQLite syncs it only in a checkpoint that copied the whole
 * log, which with the driver committing meanwhile is the driver's; without this one, that
 * sync would write back every page the rounds copied (40 ms, measured, in the loop). */
static int checkpoint(struct orch_store_bg *b, int *copied)
{
    int rc = SQLITE_OK, last = -1;
    *copied = 0;
    for (int round = 0; round < CKPT_ROUNDS && rc == SQLITE_OK; round++) {
        int log = 0, done = 0;
        rc = sqlite3_wal_checkpoint_v2(b->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
        *copied = done;
        if (last >= 0 && log - last < CKPT_LITTLE)
            break;
        last = log;
    }
    if (rc == SQLITE_OK && orch_store__sync_file(b->path, true) < 0)
        rc = SQLITE_IOERR;
    return rc;
}

/* Makes the sync asked for last of j, mu held on entry and on return (released while it
 * syncs): of `file` alone, or with a log (wal), of the log and then the file. */
static void sync_run(struct orch_store_bg *b, struct sync_job *j, const char *file,
                     const char *wal)
{
    uint64_t ticket = j->taken = j->asked;
    pthread_mutex_unlock(&b->mu);
    int rc = wal ? orch_store__sync_state(file, wal) : orch_store__sync_file(file, false);
    pthread_mutex_lock(&b->mu);
    j->done = ticket;
    j->rc = rc;
    snprintf(j->why, sizeof j->why, "%s", rc < 0 ? orch_error_detail() : "");
    pthread_cond_broadcast(&b->done);
}

static void *bg_main(void *arg)
{
    struct orch_store_bg *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        if (b->state.asked > b->state.taken) {
            sync_run(b, &b->state, b->path, b->wal);
        } else if (b->ckpt_asked) {
            b->ckpt_asked = false;
            pthread_mutex_unlock(&b->mu);
            int copied;
            int rc = checkpoint(b, &copied);
            pthread_mutex_lock(&b->mu);
            b->copied = copied;
            /* A failed one (an I/O error, say) is asked for again after the next commit;
             * past the bound the driver's own runs. */
            b->ckpt_done = rc == SQLITE_OK;
            b->ckpt_busy = false;
            b->cycles += rc == SQLITE_OK;
            pthread_cond_broadcast(&b->done);
        } else if (b->stop) {
            break;
        } else {
            pthread_cond_wait(&b->wake, &b->mu);
        }
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* The second thread: syncs of the file orch_store_file_sync_begin names, which the
 * driver's commit waits for, so that they never queue behind a checkpoint. */
static void *file_main(void *arg)
{
    struct orch_store_bg *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        if (b->file.asked > b->file.taken)
            sync_run(b, &b->file, b->file_path, NULL);
        else if (b->stop)
            break;
        else
            pthread_cond_wait(&b->file_wake, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* The driver's WAL hook, after each commit of its connection, the log holding `frames`
 * (see "Checkpoints" above). Errors of its own checkpoint are not the commit's: it has
 * happened; the next checkpoint copies what this one did not. */
static int on_wal(void *arg, sqlite3 *db, const char *name, int frames)
{
    struct orch_store_bg *b = arg;
    bool self = false;
    pthread_mutex_lock(&b->mu);
    b->last_frames = frames;
    if (!b->ckpt_busy) {
        if (b->ckpt_done || frames >= b->frames_max) {
            self = true;
            b->ckpt_done = false;
        } else if (frames >= b->frames) {
            b->ckpt_asked = b->ckpt_busy = true;
            pthread_cond_signal(&b->wake);
        }
    }
    pthread_mutex_unlock(&b->mu);
    if (self)
        (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
}

static void bg_free(struct orch_store_bg *b)
{
    if (b->db)
        sqlite3_close(b->db); /* it prepares no statement: close cannot be refused */
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->wake);
    pthread_cond_destroy(&b->done);
    pthread_cond_destroy(&b->file_wake);
    free(b->wal);
    free(b);
}

int orch_store_background_start(orch_store *s)
{
    assert(s->bg == NULL && !(s->flags & ORCH_STORE_READONLY));
    struct orch_store_bg *b = calloc(1, sizeof *b);
    if (b == NULL)
        return orch_error_set(-ENOMEM, "%s: out of memory", s->path);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->wake, NULL);
    pthread_cond_init(&b->done, NULL);
    pthread_cond_init(&b->file_wake, NULL);
    b->path = s->path;
    b->frames = CKPT_FRAMES;
    b->frames_max = CKPT_FRAMES_MAX;
    size_t n = strlen(s->path) + sizeof "-wal";
    if ((b->wal = malloc(n)) == NULL) {
        bg_free(b);
        return orch_error_set(-ENOMEM, "%s: out of memory", s->path);
    }
    snprintf(b->wal, n, "%s-wal", s->path);
    /* Its checkpoints sync as the driver's commits do (configure, store.c). A read opens
     * the log, which a checkpoint of a connection that never read may not. */
    int rc = sqlite3_open_v2(s->path, &b->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                             NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(b->db, ORCH_STORE_BUSY_TIMEOUT_MS);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(b->db,
                          s->flags & ORCH_STORE_SYNC_FULL
                              ? "PRAGMA synchronous = FULL; PRAGMA user_version;"
                              : "PRAGMA synchronous = NORMAL; PRAGMA user_version;",
                          NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        int code = orch_error_set(ORCH_EDB, "%s: cannot open its checkpointing connection: %s",
                                  s->path, b->db ? sqlite3_errmsg(b->db) : sqlite3_errstr(rc));
        bg_free(b);
        return code;
    }
    /* The database file grows a chunk at a time: an fdatasync of a file whose size did not
     * change writes its data alone, without a journal commit of the file system for its
     * new size (30-40 ms each on BENCHMARKS.md's machine, ~1 ms without). Both connections
     * write it: the thread's checkpoints and the driver's last one of each cycle. */
    int chunk = CHUNK_BYTES;
    (void)sqlite3_file_control(b->db, NULL, SQLITE_FCNTL_CHUNK_SIZE, &chunk);
    (void)sqlite3_file_control(s->db, NULL, SQLITE_FCNTL_CHUNK_SIZE, &chunk);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&b->thread, NULL, bg_main, b);
    if (e == 0 && (e = pthread_create(&b->file_thread, NULL, file_main, b)) != 0) {
        pthread_mutex_lock(&b->mu);
        b->stop = true;
        pthread_cond_signal(&b->wake);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->thread, NULL);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        bg_free(b);
        return orch_error_set(-e, "%s: cannot start its background threads: %s", s->path,
                              strerror(e));
    }
    s->bg = b;
    sqlite3_wal_hook(s->db, on_wal, b); /* replaces the autocheckpoint */
    return 0;
}

void orch_store_background_stop(orch_store *s)
{
    struct orch_store_bg *b = s->bg;
    if (b == NULL)
        return;
    pthread_mutex_lock(&b->mu);
    b->stop = true;
    pthread_cond_signal(&b->wake);
    pthread_cond_signal(&b->file_wake);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL); /* they make the work asked for first */
    pthread_join(b->file_thread, NULL);
    sqlite3_wal_autocheckpoint(s->db, CKPT_FRAMES);
    s->bg = NULL;
    bg_free(b);
}

int orch_store_sync_begin(orch_store *s)
{
    assert(!s->in_txn);
    struct orch_store_bg *b = s->bg;
    if (b == NULL) {
        s->sync_rc = orch_store_sync(s);
        return 0;
    }
    pthread_mutex_lock(&b->mu);
    b->state.asked++;
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

int orch_store_sync_end(orch_store *s, bool wait)
{
    struct orch_store_bg *b = s->bg;
    if (b == NULL)
        return s->sync_rc == 0 ? 1 : s->sync_rc; /* made by orch_store_sync_begin */
    pthread_mutex_lock(&b->mu);
    while (wait && b->state.done < b->state.asked)
        pthread_cond_wait(&b->done, &b->mu);
    int rc = b->state.done < b->state.asked ? 0 : b->state.rc == 0 ? 1 : b->state.rc;
    if (rc < 0)
        orch_error_set(rc, "%s", b->state.why);
    pthread_mutex_unlock(&b->mu);
    return rc;
}

int orch_store_file_sync_begin(orch_store *s, const char *path)
{
    struct orch_store_bg *b = s->bg;
    if (b == NULL)
        return -ENOTSUP;
    pthread_mutex_lock(&b->mu);
    assert(b->file.done == b->file.asked && "one file sync at a time");
    b->file_path = path;
    b->file.asked++;
    pthread_cond_signal(&b->file_wake);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

int orch_store_file_sync_end(orch_store *s)
{
    struct orch_store_bg *b = s->bg;
    assert(b != NULL);
    pthread_mutex_lock(&b->mu);
    int rc;
    if (b->file.taken < b->file.asked) { /* its thread has not taken it yet: withdrawn */
        b->file.taken = b->file.done = b->file.asked;
        rc = -EAGAIN;
    } else {
        while (b->file.done < b->file.asked)
            pthread_cond_wait(&b->done, &b->mu);
        rc = b->file.rc;
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

void orch_store__background_tune(orch_store *s, int frames, int frames_max)
{
    struct orch_store_bg *b = s->bg;
    pthread_mutex_lock(&b->mu);
    b->frames = frames;
    b->frames_max = frames_max;
    pthread_mutex_unlock(&b->mu);
}

void orch_store__background_idle(orch_store *s, int64_t *cycles, int *copied,
                                 int *last_frames)
{
    struct orch_store_bg *b = s->bg;
    pthread_mutex_lock(&b->mu);
    while (b->ckpt_busy || b->state.done < b->state.asked || b->file.done < b->file.asked)
        pthread_cond_wait(&b->done, &b->mu);
    *cycles = b->cycles;
    *copied = b->copied;
    *last_frames = b->last_frames;
    pthread_mutex_unlock(&b->mu);
}
