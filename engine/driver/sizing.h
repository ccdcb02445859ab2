/* sizing.h — how many grains one dispatch of a call takes (DESIGN §5, "The runtime sizes
 * each batch"): a pure rule over what the driver measured, testable without the loop.
 *
 * What is measured. Each settled batch of a call adds its grains, the wall time its worker
 * spent on it (from the send to the report), and the bytes of its inputs to the call's
 * moving totals (orch_sizing_add): both decay by SIZING_DECAY per batch, so that the
 * figures follow a call whose grains change cost (short lines, then long pages) within a
 * few batches. ms_per_grain and bytes_per_grain are the ratios of those totals.
 *
 * The rule (orch_sizing_dispatch), for a call with `queued` grains and `workers` workers:
 *
 *   want  = target_ms / ms_per_grain           about target_ms of work per dispatch
 *           (no measurement yet, or grains too fast for the clock's ms: unbounded)
 *   grown = 1, then doubled per settled batch  a call starts at one grain and grows
 *   share = ceil(queued / workers)             every worker gets work; a straggler
 *                                              cannot hold many grains
 *   bytes = limit_bytes / bytes_per_grain      batch_bytes when set, else
 *                                              ORCH_SIZING_MAX_BYTES: a dispatch is a
 *                                              handful of MiB of inputs, not gigabytes
 *   room  = room_grains / grains_added_per_grain,   within the admission budgets: a call
 *           room_bytes / bytes_added_per_grain      whose answers add unsealed grains (an
 *                                              expand's children) or live intermediate
 *                                              bytes takes only what the room left in
 *                                              that budget holds, so that one dispatch
 *                                              passes a budget by a grain's worth at most
 *   n     = max(1, min(want, grown, share, bytes, room, ORCH_SIZING_MAX))
 *
 * So a page of OCR (500 ms a grain) goes one at a time whatever else holds; an identity
 * (a few µs) goes by the thousand once measured. The queue's own reservation still cuts
 * a dispatch at batch_bytes exactly, and `reserve=parent` at its family (queue.h): this
 * rule only says how many grains to ask for. The UDF's `batch` is not a bound here: a
 * dispatch of more grains runs `run` several times in its worker (worker.c).
 *
 * target_ms 0 is the ablation "one grain per dispatch" (every dispatch has one grain).
 */
#ifndef ORCH_DRIVER_SIZING_H
#define ORCH_DRIVER_SIZING_H

#include <stdint.h>

/* The target duration of one dispatch's work when the run gives none (docs/tuning.md
 * has the measurement that chose it). */
#define ORCH_SIZING_TARGET_MS 50
/* The most grains one dispatch takes: what a turn reserves for one worker stays a few
 * hundred KiB of the driver's memory. */
#define ORCH_SIZING_MAX 4096
/* The most input bytes one dispatch takes when the call sets no batch_bytes. */
#define ORCH_SIZING_MAX_BYTES ((int64_t)64 << 20)

/* A call's measurements. Zero-initialised: nothing measured. */
struct orch_sizing {
    double ms;       /* decayed sum of worker ms */
    double bytes;    /* decayed sum of input bytes */
    double grains;   /* decayed sum of grains */
    int64_t settled; /* batches measured */
    int64_t grown;   /* the most grains the growth allows now: 1, 2, 4, ... */
    /* What answered batches added to the admission budgets (orch_sizing_add_growth):
     * decayed sums of unsealed grains and live bytes added (what they freed taken off, at
     * least 0), and of their grains. */
    double add_grains, add_bytes, answered;
};

/* The room left in the budgets a dispatch's answers fill; ORCH_SIZING_NO_ROOM_LIMIT for
 * a budget that the call does not fill. */
#define ORCH_SIZING_NO_ROOM_LIMIT INT64_MAX
struct orch_sizing_room {
    int64_t grains; /* unsealed grains the budget still takes */
    int64_t bytes;  /* live intermediate bytes the budget still takes */
};

/* Adds one settled batch of n grains (n >= 1) that took worker_ms in its worker and
 * carried in_bytes of inputs. */
void orch_sizing_add(struct orch_sizing *s, int n, int64_t worker_ms, int64_t in_bytes);

/* Adds what the answers of one batch of n grains added to the budgets: unsealed grains
 * and live bytes (negative: they took more off than they added). */
void orch_sizing_add_growth(struct orch_sizing *s, int n, int64_t grains, int64_t bytes);

/* The call's figures: ms and bytes per grain; -1 when nothing was measured. */
double orch_sizing_ms_per_grain(const struct orch_sizing *s);
double orch_sizing_bytes_per_grain(const struct orch_sizing *s);

/* The grains the call's next dispatch takes whatever is queued: the rule without `share`
 * (1 when nothing is measured). What the driver starts workers by: a call whose grains one
 * worker takes by the thousand gets no second worker for a hundred of them; a call not
 * measured yet gets a worker per queued grain, up to its `workers`, since its first batch
 * may take long to settle (a slow OCR page, a streaming expand that decodes a whole video):
 * its second worker would otherwise wait for that. Starting a worker too many costs its
 * start once; it stops when idle (workers.c). */
int orch_sizing_capacity(const struct orch_sizing *s, int64_t target_ms, int64_t batch_bytes,
                         const struct orch_sizing_room *room);

/* The grains of the next dispatch of a call with `queued` grains (>= 1) and `workers`
 * workers (>= 1), sized to about target_ms of work (0: one grain), within batch_bytes (0:
 * ORCH_SIZING_MAX_BYTES) and the room left in the budgets (NULL: no limit). Always in
 * 1 .. ORCH_SIZING_MAX. */
int orch_sizing_dispatch(const struct orch_sizing *s, uint64_t queued, int workers,
                         int64_t target_ms, int64_t batch_bytes,
                         const struct orch_sizing_room *room);

#endif
