/* writer.c — the store's writer thread: commits the driver's turns while it goes on.
 *
 * Why. Three quarters of the driver's instructions on a chain of no-op calls are SQLite
 * writing the rows that a turn held back (facts.c: the grains, items, attempts, seals) and
 * the COMMIT; the rest (reading reports, propagating in memory, reserving batches) does not
 * need the connection. A turn's commit is handed to this thread with the rows it held; the
 * driver fills a second set of held rows with the next turn meanwhile, and waits for the
 * thread only when it needs the connection again (orch_store__conn: any statement, a
 * BEGIN, the next commit) or must know the commit is made (before it sends the batches the
 * turn reserved: engine/run/loop.c).
 *
 * Threads. The connection is used by one thread at a time: the driver's statements all wait
 * for the commit handed over (orch_store__conn), and the thread touches only the writer's
 * held set (H(s) on this thread is s->hw), the connection with what its statements use
 * (the statement cache, txn_lost), and the fields under `mu`; the driver's thread swaps the
 * sets and reads txn_lost only once it has joined. Handing over and joining go through
 * `mu`, which orders each side's writes before the other's reads (a ThreadSanitizer build,
 * -Db_sanitize=thread, finds no race in tests/test_facts.c nor in the e2e tests). The
 * driver's error detail is its own thread's: a failed commit's is carried over at the join.
 * Every signal is blocked in the thread (the driver's handlers run on the driver's). */
#include "store_int.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "orch_error.h"

_Thread_local bool orch_store__on_writer;

struct orch_store_writer {
    pthread_t thread;
    int efd; /* eventfd: written after each commit (orch_store_commit_fd) */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    bool busy, stop; /* under mu: a commit handed over and not made; the thread must end */
    bool need_begin; /* the handed transaction's BEGIN has not run */
    uint64_t named;  /* its payload id high-water mark (orch_store__commit_here) */
    const char *sync_path; /* the file it syncs before its COMMIT, or NULL */
    int rc;          /* the last commit's result, and its detail */
    char why[1024];
};

static void *writer_main(void *arg)
{
    orch_store *s = arg;
    struct orch_store_writer *w = s->wr;
    orch_store__on_writer = true;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->busy && !w->stop)
            pthread_cond_wait(&w->wake, &w->mu);
        if (!w->busy)
            break;
        pthread_mutex_unlock(&w->mu);
        int rc = orch_store__commit_here(s, w->need_begin, w->named, w->sync_path);
        pthread_mutex_lock(&w->mu);
        w->rc = rc;
        if (rc < 0)
            snprintf(w->why, sizeof w->why, "%s", orch_error_detail());
        w->busy = false;
        pthread_cond_broadcast(&w->done);
        uint64_t one = 1;
        (void)!write(w->efd, &one, sizeof one); /* a counter: it cannot fill up */
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int orch_store_writer_start(orch_store *s)
{
    if (s->wr)
        return 0;
    struct orch_store_writer *w = calloc(1, sizeof *w);
    if (!w)
        return orch_error_set(-ENOMEM, "%s: out of memory", s->path);
    if ((w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        int e = errno;
        free(w);
        return orch_error_set(-e, "%s: cannot start the writer thread: %s", s->path,
                              strerror(e));
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->done, NULL);
    s->wr = w;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, writer_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        s->wr = NULL;
        close(w->efd);
        pthread_cond_destroy(&w->done);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return orch_error_set(-rc, "%s: cannot start the writer thread: %s", s->path,
                              strerror(rc));
    }
    return 0;
}

int orch_store__writer_join(orch_store *s)
{
    if (orch_store__on_writer || !s->writing)
        return 0;
    struct orch_store_writer *w = s->wr;
    pthread_mutex_lock(&w->mu);
    while (w->busy)
        pthread_cond_wait(&w->done, &w->mu);
    int rc = w->rc;
    pthread_mutex_unlock(&w->mu);
    s->writing = false;
    if (rc < 0) {
        s->payload_named = s->payload_mark;
        return orch_error_set(rc, "%s", w->why);
    }
    s->payload_mark = w->named > s->payload_mark ? w->named : s->payload_mark;
    return 0;
}

int orch_store__writer_commit(orch_store *s)
{
    int rc = orch_store__writer_join(s);
    if (rc < 0)
        return rc;
    struct orch_store_writer *w = s->wr;
    struct orch_store_held *h = s->hw; /* the writer's, written and empty */
    s->hw = s->hm;
    s->hm = h;
    pthread_mutex_lock(&w->mu);
    w->need_begin = !s->begun;
    w->named = s->payload_named;
    w->sync_path = s->sync_path;
    w->rc = 0;
    w->busy = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    s->writing = true;
    return 0;
}

void orch_store_writer_stop(orch_store *s)
{
    orch_store__writer_stop(s);
}

void orch_store__writer_stop(orch_store *s)
{
    struct orch_store_writer *w = s->wr;
    if (!w)
        return;
    if (s->writing) { /* the caller's error, if any, is the one that stands */
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", orch_error_detail());
        (void)orch_store__writer_join(s);
        if (*keep)
            orch_error_set(-EIO, "%s", keep); /* the detail is all that is kept */
        else
            orch_error_clear();
    }
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->done);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mu);
    close(w->efd);
    free(w);
    s->wr = NULL;
}

bool orch_store_commit_busy(orch_store *s)
{
    if (!s->writing)
        return false;
    pthread_mutex_lock(&s->wr->mu);
    bool busy = s->wr->busy;
    pthread_mutex_unlock(&s->wr->mu);
    return busy;
}

int orch_store_commit_fd(const orch_store *s)
{
    return s->wr ? s->wr->efd : -1;
}
