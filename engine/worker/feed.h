/* feed.h — the worker's side of fed reduces (wire.h: a BATCH record with `fed`, MORE,
 * INPUTS): a reduce over many children is not sent as one list; the worker asks the
 * driver for its inputs page by page and makes the record's lists from the pages, so that
 * the driver never holds more than a page of them (DESIGN §5). The UDF sees the record
 * as any other: every surviving child's values, list by list, in ordinal order.
 *
 * The socket carries the pages after whatever the driver sent before them: a BATCH queued
 * behind the one being fed (pool.h, ORCH_POOL_DEPTH) may come first. It is kept (the
 * stash) and is the next frame the worker's loop takes. */
#ifndef ORCH_WORKER_FEED_H
#define ORCH_WORKER_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "wire.h"

/* Reads one frame, as the worker's loop does: 1 with *f filled (its body valid until the
 * next read), 0 at end of input, -1 after writing why to stderr. */
struct worker;
typedef int (*orch_feed_read)(struct worker *w, struct orch_wire_frame *f);

struct orch_worker_feed {
    int fd;
    orch_feed_read read;
    struct worker *w;
    /* A BATCH frame read while feeding: its body (len bytes) when `stashed`. */
    uint8_t *stash;
    size_t stash_len, stash_cap;
    bool stashed;
    uint8_t *taken; /* the body of the frame last unstashed */
    size_t taken_cap;
    /* What the fed records of the current batch are made of (orch_worker_feed_free). */
    struct orch_wire_record *rec;
    uint32_t *nval;
    struct orch_wire_value **vals;
    size_t nvals;
};

/* Whether any record of b is fed. */
bool orch_worker_fed(const struct orch_wire_batch *b);

/* Asks for the pages of every fed record of *b, in record order, and points *b at records
 * whose lists hold them (kept in f until orch_worker_feed_free). 0; -1 after writing why to
 * stderr (a protocol error, out of memory), or 0 with *eof at end of input (the driver
 * closed the socket: it is going away). */
int orch_worker_feed(struct orch_worker_feed *f, struct orch_wire_batch *b, bool *eof);

/* Frees what the last orch_worker_feed made. */
void orch_worker_feed_free(struct orch_worker_feed *f);

/* Takes the stashed BATCH frame into *fr (its body valid until the next read that stashes
 * one, or orch_worker_feed_close): true when there was one. */
bool orch_worker_feed_unstash(struct orch_worker_feed *f, struct orch_wire_frame *fr);

void orch_worker_feed_close(struct orch_worker_feed *f);

#endif
