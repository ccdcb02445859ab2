/* queue.c — a call's ready queue and the reservation of a batch from it (queue.h). */
#define _GNU_SOURCE /* O_TMPFILE, mkostemp */
#include "queue.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orch_error.h"
#include "support.h"

/* ---- the spill (queue.h, "The window and the spill") ---------------------------------- */

#define SPILL_BUF 256 /* entries gathered before one write: 16 KiB */

static const char *spill_dir(const struct orch_queue *q)
{
    const char *dir = q->spill_dir;
    if (!dir && !(dir = getenv("TMPDIR")))
        dir = "/tmp";
    return dir;
}

/* The detail of a failed system call on the spill file: rc (-errno) with what failed; a
 * full file system is said as such. */
static int spill_error(const struct orch_queue *q, int rc, const char *what)
{
    return orch_error_set(rc, "the ready queue's spill file in %s: %s: %s%s", spill_dir(q),
                          what, strerror(-rc), rc == -ENOSPC ? " (the disk is full)" : "");
}

static int spill_open(struct orch_queue *q)
{
    const char *dir = spill_dir(q);
    /* Unlinked from the start: nothing to clean up after a crash. */
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        /* A file system without O_TMPFILE: a named file, unlinked at once. */
        char path[4096];
        if (snprintf(path, sizeof path, "%s/.orch-queue.XXXXXX", dir) >= (int)sizeof path)
            return -ENAMETOOLONG;
        fd = mkostemp(path, O_CLOEXEC);
        if (fd >= 0)
            unlink(path);
    }
    if (fd < 0)
        return spill_error(q, -errno, "open");
    if (!q->buf && !(q->buf = malloc(SPILL_BUF * sizeof *q->buf))) {
        close(fd);
        return -ENOMEM;
    }
    q->spill_fd = fd;
    q->spill_open = true;
    q->rd = q->wr = 0;
    q->nbuf = 0;
    return 0;
}

/* Writes the gathered entries at the file's end. */
static int spill_write(struct orch_queue *q)
{
    const char *p = (const char *)q->buf;
    size_t left = q->nbuf * sizeof *q->buf;
    off_t at = (off_t)(q->wr * sizeof *q->buf);
    while (left > 0) {
        ssize_t n = pwrite(q->spill_fd, p, left, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            /* ENOSPC, EIO: the entries stay in buf, the queue whole */
            return spill_error(q, -errno, "write");
        p += n;
        at += n;
        left -= (size_t)n;
    }
    q->wr += q->nbuf;
    q->nbuf = 0;
    return 0;
}

static int spill_push(struct orch_queue *q, const struct orch_queue_entry *e)
{
    int rc;
    if (!q->spill_open && (rc = spill_open(q)) < 0)
        return rc;
    if (q->nbuf == SPILL_BUF && (rc = spill_write(q)) < 0)
        return rc;
    q->buf[q->nbuf++] = *e;
    q->spilled++;
    return 0;
}

/* Reads n entries from the file at entry rd into dst. */
static int spill_read(struct orch_queue *q, struct orch_queue_entry *dst, size_t n)
{
    char *p = (char *)dst;
    size_t left = n * sizeof *dst;
    off_t at = (off_t)(q->rd * sizeof *dst);
    while (left > 0) {
        ssize_t got = pread(q->spill_fd, p, left, at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return spill_error(q, -errno, "read");
        if (got == 0) /* shorter than what was written: someone truncated it */
            return orch_error_set(-EIO, "the ready queue's spill file in %s is shorter "
                                        "than what was written to it",
                                  spill_dir(q));
        p += got;
        at += got;
        left -= (size_t)got;
    }
    return 0;
}

int orch_queue_refill(struct orch_queue *q)
{
    if (q->spilled == 0 || (q->window && q->len >= q->window / 2 && q->len > 0))
        return 0;
    size_t room = q->window > q->len ? q->window - q->len : 0;
    size_t n = q->spilled < room ? (size_t)q->spilled : room;
    if (n == 0)
        return 0;
    if (q->head + q->len + n > q->cap) {
        if (q->head > 0) {
            memmove(q->v, q->v + q->head, q->len * sizeof *q->v);
            q->head = 0;
        }
        if (q->len + n > q->cap && orch__grow_n(&q->v, &q->cap, q->len + n, sizeof *q->v) < 0)
            return -ENOMEM;
    }
    struct orch_queue_entry *dst = q->v + q->head + q->len;
    uint64_t in_file = q->wr - q->rd;
    size_t from_file = in_file < n ? (size_t)in_file : n;
    int rc = from_file ? spill_read(q, dst, from_file) : 0;
    if (rc < 0)
        return rc;
    /* The rest from the gathered tail, which is behind everything in the file. */
    size_t from_buf = n - from_file;
    memcpy(dst + from_file, q->buf, from_buf * sizeof *q->buf);
    memmove(q->buf, q->buf + from_buf, (q->nbuf - from_buf) * sizeof *q->buf);
    q->nbuf -= from_buf;
    q->rd += from_file;
    q->len += n;
    q->spilled -= n;
    if (q->spilled == 0 && q->wr > 0) {
        /* Drained: give the disk back, start the file over. A failed truncate only leaves
         * the file as large as it was. */
        if (ftruncate(q->spill_fd, 0) < 0) {
            /* nothing: the next writes overwrite from the start anyway */
        }
        q->rd = q->wr = 0;
    }
    return 0;
}

/* ---- the queue ------------------------------------------------------------------------- */

int orch_queue_push(struct orch_queue *q, const struct orch_queue_entry *e)
{
    if (q->spilled > 0 || (q->window && q->len >= q->window))
        return spill_push(q, e);
    if (q->head + q->len == q->cap) {
        /* Reuse the consumed front when it is over half: O(len), once per cap/2 pushes. */
        if (q->head > q->cap / 2) {
            memmove(q->v, q->v + q->head, q->len * sizeof *q->v);
            q->head = 0;
        } else if (orch__grow_n(&q->v, &q->cap, q->cap + 1, sizeof *q->v) < 0) {
            return -ENOMEM;
        }
    }
    q->v[q->head + q->len++] = *e;
    return 0;
}

int orch_queue_requeue(struct orch_queue *q, const struct orch_grain_ref *g, int64_t seq,
                       bool solo)
{
    struct orch_queue_entry e = {.g = *g, .solo = solo};
    e.g.seq = seq;
    e.g.generation++;
    return orch_queue_push(q, &e);
}

void orch_queue_free(struct orch_queue *q)
{
    free(q->v);
    free(q->buf);
    if (q->spill_open)
        close(q->spill_fd);
    *q = (struct orch_queue){.window = q->window, .spill_dir = q->spill_dir};
}

/* An array that held a large frontier (every child of a huge expansion) is given back
 * as the frontier drains: freed when empty, halved when under a quarter full, down to
 * QUEUE_KEEP entries that a queue keeps whatever it held. So the driver's memory follows
 * what is queued now, not the most that ever was (queue.h, "Memory"). */
#define QUEUE_KEEP 4096

static void shrink(struct orch_queue *q)
{
    if (q->cap <= QUEUE_KEEP)
        return;
    if (q->len == 0) {
        free(q->v);
        q->v = NULL;
        q->head = q->cap = 0;
        return;
    }
    if (q->len > q->cap / 4)
        return;
    memmove(q->v, q->v + q->head, q->len * sizeof *q->v);
    q->head = 0;
    size_t cap = q->len * 2 > QUEUE_KEEP ? q->len * 2 : QUEUE_KEEP;
    struct orch_queue_entry *v = realloc(q->v, cap * sizeof *v);
    if (v) { /* else the larger array stays: correct, only bigger */
        q->v = v;
        q->cap = cap;
    }
}

/* splitmix64: a small, fast generator of good quality; order only, never security. */
static uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Random order: swaps v[i] with an entry drawn from v[i .. end). The modulo's bias is
 * below n / 2^64: nothing for an ablation. */
static void draw(struct orch_queue *q, size_t i, size_t end, uint64_t *rng)
{
    size_t j = i + (size_t)(next_rand(rng) % (uint64_t)(end - i));
    struct orch_queue_entry t = q->v[i];
    q->v[i] = q->v[j];
    q->v[j] = t;
}

int orch_queue_reserve(struct orch_queue *q, const struct orch_queue_reservation *r)
{
    assert(r->batch >= 1);
    int n = 0, rc = orch_queue_refill(q);
    if (rc < 0)
        return rc;
    uint64_t bytes = 0;
    if (r->rng && q->len > 1) /* parent mode: the family is the drawn head's */
        draw(q, q->head, q->head + q->len, r->rng);
    int64_t parent = q->len ? q->v[q->head].g.parent : 0;
    size_t keep = q->head; /* parent mode: where the next passed-over entry goes */
    size_t i = q->head, end = q->head + q->len;
    while (i < end && n < r->batch) {
        /* Elastic in random order: the entry looked at is drawn from those left (the head
         * was drawn above already). */
        if (r->rng && !r->parent && i > q->head)
            draw(q, i, end, r->rng);
        /* A copy: in parent mode, passed-over entries are written back at `keep` <= i. */
        struct orch_queue_entry e = q->v[i];
        bool fits = (!r->parent || e.g.parent == parent) && (n == 0 || !e.solo);
        if (!fits) {
            if (!r->parent)
                break; /* elastic: a solo entry ends the batch */
            q->v[keep++] = e;
            i++;
            continue;
        }
        uint64_t size = 0;
        if ((rc = r->look(r->ctx, &e, &size)) < 0)
            break;
        /* batch_bytes: cut before the entry that would pass the limit, unless the batch is
         * empty (a grain bigger than the limit still runs, alone). */
        if (r->batch_bytes > 0 && n > 0 && bytes + size > (uint64_t)r->batch_bytes)
            break;
        if ((rc = r->take(r->ctx, &e)) < 0)
            break;
        if (rc == 1) { /* added; a stale entry (0) is consumed and weighs nothing */
            n++;
            bytes += size;
        }
        rc = 0;
        i++;
        /* The entry's own flag, not the head's: when the head was stale (consumed, not
         * added), a solo entry right behind it must still end the batch. */
        if (e.solo)
            break;
    }
    if (r->parent) { /* close the gap left by the entries taken */
        size_t tail = end - i;
        memmove(q->v + keep, q->v + i, tail * sizeof *q->v);
        q->len = keep + tail - q->head;
    } else {
        q->len -= i - q->head;
        q->head = i;
    }
    shrink(q);
    return rc < 0 ? rc : n;
}
