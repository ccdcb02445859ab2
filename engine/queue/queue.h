/* queue.h — a call's ready queue, and the rule that reserves a batch from it (DESIGN §5).
 *
 * This is the part of scheduling that decides, with no store: which queued grains make
 * the next batch of a worker. The driver (dispatch.c) supplies what only the store knows
 * through two callbacks: the size of an entry's inputs, and whether the entry is still
 * READY (taking it marks it IN_FLIGHT). tests/test_queue.c runs the rule on its own.
 *
 * Order. A queue is a FIFO in ready_seq order: grains are appended as they become READY,
 * each with a larger ready_seq than every entry before it. A grain put back (its batch
 * failed, or it never reached its worker) is appended at the tail with a new ready_seq,
 * and its generation one higher (orch_queue_requeue).
 *
 * Reservation (orch_queue_reserve) takes up to `batch` grains for one worker:
 *
 *   elastic  from the head, in order, whatever their parents; it stops before a solo
 *            entry when the batch already holds something;
 *   parent   the siblings of the head's parent only (the head's parent even when the head
 *            turns out stale); every other entry keeps its place and relative order, and
 *            the gap left by the entries taken is closed;
 *   solo     an entry retried after its batch of several failed (DESIGN §4) runs alone:
 *            it is taken only into an empty batch, and ends it;
 *   batch_bytes   when > 0, the batch is cut before the entry whose inputs would take the
 *            batch's total past it; an entry bigger than the limit still runs, alone (it is
 *            taken into an empty batch);
 *   stale    an entry whose grain left READY since it was queued (sealed by a barrier,
 *            or its generation moved on) is consumed: removed from the queue, not added,
 *            weighing nothing. Stale entries do not count against `batch`, so a
 *            reservation may consume more than `batch` entries, and may add none.
 *
 * Random order (`orch run --order random`, an ablation for benchmarks only). When the
 * reservation is given a generator (rng), every entry it looks at is first swapped with
 * one drawn uniformly from the live entries from there to the tail: elastic takes a
 * uniformly random sample, in random order, and the rules above (solo, batch_bytes,
 * stale) apply to the entries as drawn; an entry drawn and not taken stays queued, at the
 * place it was swapped to. Parent draws the head only: a random entry picks the family,
 * whose siblings are then taken in queue order, as in FIFO (a family stays one batch).
 * Order within the queue means nothing then; every entry is still served, at most once
 * per generation.
 *
 * Memory. A queue owns its array; entries are copied in. Consumed entries at the front are
 * reused by a later push once they are more than half of the array, rather than growing
 * it; a reservation that leaves the array under a quarter full halves it (down to 4,096
 * entries), and one that empties it frees it: the array follows the READY frontier of
 * now, not the largest there was, nor the job.
 *
 * The window and the spill. The READY frontier itself can be as large as the job: one
 * expansion into a million children makes a million grains READY in one report. So a
 * queue keeps at most `window` entries in memory (0: no limit); an entry pushed while the
 * array holds `window`, or while anything is spilled, goes to the spill instead: an
 * unlinked file in `spill_dir` (O_TMPFILE; gone with the process, whatever ends it), the
 * queue's tail, in push order, 64 bytes an entry. A reservation that finds the array
 * under half the window first moves spilled entries back, oldest first, up to the window.
 * So the order is the one a queue without a window has: the array is the FIFO's head, the
 * spill its tail; a requeued grain goes behind both. Random order and parent reservation
 * see the array only: a random draw is from the window, the siblings of a parent are
 * those in the window. The spill file is emptied (truncated) whenever it drains, so it
 * holds no more than the frontier over the window. Nothing in it needs to survive a
 * crash: READY grains are facts in the store, and resume queues them again (recover.c).
 */
#ifndef ORCH_QUEUE_H
#define ORCH_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "propagate.h"

struct orch_queue_entry {
    struct orch_grain_ref g;
    bool solo; /* retried after its batch failed: runs alone */
};

/* Live entries are v[head .. head+len), then `spilled` entries in the spill. Zero-initialise
 * (no window: everything in memory), set window and spill_dir before the first push if
 * wanted; free with orch_queue_free. */
struct orch_queue {
    struct orch_queue_entry *v;
    size_t head, len, cap;
    uint64_t rng; /* random order: the call's generator state (dispatch.c seeds it) */
    bool seeded;
    /* The window and the spill (above). */
    size_t window;         /* most entries in memory; 0: no limit, never spills */
    const char *spill_dir; /* where the spill file is made (not owned); NULL: TMPDIR */
    uint64_t spilled;      /* entries in the spill: the file's [rd, wr), then buf */
    int spill_fd;          /* valid while spill_open */
    bool spill_open;
    uint64_t rd, wr;              /* entries read back from the file, and written to it */
    struct orch_queue_entry *buf; /* the spill's newest entries, not yet written */
    size_t nbuf;
};

/* Appends a copy of e (to the spill when the window is full or something is spilled).
 * Returns 0, -ENOMEM, or -errno of the spill file (the queue is then as it was). */
int orch_queue_push(struct orch_queue *q, const struct orch_queue_entry *e);

/* Entries queued: in memory and spilled. */
static inline uint64_t orch_queue_count(const struct orch_queue *q)
{
    return q->len + q->spilled;
}

/* Puts grain g back at the tail: generation + 1, ready_seq `seq` (a new one, larger than
 * any queued), `solo` as given; attempts as g says. Returns 0 or -ENOMEM. */
int orch_queue_requeue(struct orch_queue *q, const struct orch_grain_ref *g, int64_t seq,
                       bool solo);

/* Frees the array and closes the spill; the queue is empty and reusable afterwards, with
 * its window and spill_dir kept. */
void orch_queue_free(struct orch_queue *q);

/* How one reservation is made, and the store's side of it. */
struct orch_queue_reservation {
    int batch;           /* most entries added (>= 1) */
    int64_t batch_bytes; /* 0: no limit */
    bool parent;         /* parent reservation, else elastic */
    uint64_t *rng;       /* NULL: FIFO; else random order, drawing from (and advancing)
                            this generator state ("Random order" above) */
    void *ctx;
    /* Called once for each entry that the mode lets into the batch, before anything is
     * decided about it: *bytes receives the size of its inputs when batch_bytes > 0 (it is
     * 0 on entry and may be left so otherwise). The driver loads the entry's inputs here,
     * for the take that may follow. Returns 0 or a negative error. */
    int (*look)(void *ctx, const struct orch_queue_entry *e, uint64_t *bytes);
    /* The entry goes into the batch: returns 1 when added (its grain was READY and is now
     * IN_FLIGHT), 0 when it was stale, or a negative error. */
    int (*take)(void *ctx, const struct orch_queue_entry *e);
};

/* Reserves one batch from q under r (the rules above), calling r->look and r->take for
 * the entries concerned, in queue order. Consumed entries (added or stale) leave the queue;
 * every other entry stays, in its order. Returns the number of entries added (0 when the
 * queue was empty or every entry consumed was stale), or the first negative error of a
 * callback: the entry it was called for then stays queued; the entries consumed before it
 * are gone. */
int orch_queue_reserve(struct orch_queue *q, const struct orch_queue_reservation *r);

/* Moves spilled entries back into memory, oldest first, while the array holds under the
 * window (reservation does it first; exposed for tests). Returns 0 or -ENOMEM or -errno
 * of the spill file (the queue is then still whole: nothing read is lost). */
int orch_queue_refill(struct orch_queue *q);

#endif
