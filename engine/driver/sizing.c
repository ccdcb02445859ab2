/* sizing.c — the grains of one dispatch, from what a call measured (sizing.h); and, at the
 * end, where the driver puts what it measures (driver_int.h): a leaf that calls nothing of
 * the driver, so that turn.c, which settles batches, may call it. */
#include "sizing.h"

#include <assert.h>

#include "driver_int.h"

/* What the totals keep of their past per settled batch: the last ~4 batches weigh most. */
#define SIZING_DECAY 0.75

void orch_sizing_add(struct orch_sizing *s, int n, int64_t worker_ms, int64_t in_bytes)
{
    assert(n >= 1);
    s->ms = s->ms * SIZING_DECAY + (double)(worker_ms > 0 ? worker_ms : 0);
    s->bytes = s->bytes * SIZING_DECAY + (double)(in_bytes > 0 ? in_bytes : 0);
    s->grains = s->grains * SIZING_DECAY + (double)n;
    s->settled++;
    if (s->grown < 1)
        s->grown = 1;
    if (s->grown < ORCH_SIZING_MAX)
        s->grown *= 2;
}

void orch_sizing_add_growth(struct orch_sizing *s, int n, int64_t grains, int64_t bytes)
{
    assert(n >= 1);
    s->add_grains = s->add_grains * SIZING_DECAY + (double)(grains > 0 ? grains : 0);
    s->add_bytes = s->add_bytes * SIZING_DECAY + (double)(bytes > 0 ? bytes : 0);
    s->answered = s->answered * SIZING_DECAY + (double)n;
}

double orch_sizing_ms_per_grain(const struct orch_sizing *s)
{
    return s->settled > 0 ? s->ms / s->grains : -1;
}

double orch_sizing_bytes_per_grain(const struct orch_sizing *s)
{
    return s->settled > 0 ? s->bytes / s->grains : -1;
}

/* The least of n and a bound given as a real number of grains (at least 1). */
static int64_t bound(int64_t n, double limit)
{
    if (limit < 1)
        return 1;
    return limit < (double)n ? (int64_t)limit : n;
}

/* n within the room left in one budget, which each grain fills by `added` / `answered`. */
static int64_t within_room(int64_t n, int64_t room, double added, double answered)
{
    if (room == ORCH_SIZING_NO_ROOM_LIMIT || answered <= 0 || added <= 0)
        return n;
    return bound(n, (double)room / (added / answered));
}

int orch_sizing_capacity(const struct orch_sizing *s, int64_t target_ms, int64_t batch_bytes,
                         const struct orch_sizing_room *room)
{
    if (target_ms <= 0)
        return 1;
    int64_t n = ORCH_SIZING_MAX;
    double ms = orch_sizing_ms_per_grain(s);
    if (ms > 0)
        n = bound(n, (double)target_ms / ms);
    double bytes = orch_sizing_bytes_per_grain(s);
    if (bytes > 0)
        n = bound(n, (double)(batch_bytes > 0 ? batch_bytes : ORCH_SIZING_MAX_BYTES) / bytes);
    if (room) {
        n = within_room(n, room->grains, s->add_grains, s->answered);
        n = within_room(n, room->bytes, s->add_bytes, s->answered);
    }
    n = bound(n, s->grown > 0 ? (double)s->grown : 1);
    assert(n >= 1 && n <= ORCH_SIZING_MAX);
    return (int)n;
}

int orch_sizing_dispatch(const struct orch_sizing *s, uint64_t queued, int workers,
                         int64_t target_ms, int64_t batch_bytes,
                         const struct orch_sizing_room *room)
{
    assert(workers >= 1);
    int64_t n = orch_sizing_capacity(s, target_ms, batch_bytes, room);
    uint64_t share = (queued + (uint64_t)workers - 1) / (uint64_t)workers;
    if (share < (uint64_t)n)
        n = share > 0 ? (int64_t)share : 1;
    return (int)n;
}

/* ---- the driver's measurements (driver_int.h) ------------------------------------------ */

void orch_driver_measure(struct orch_driver_call *cr, int ngrains, int64_t worker_ms,
                         int64_t in_bytes)
{
    if (ngrains < 1)
        return;
    orch_sizing_add(&cr->sizing, ngrains, worker_ms, in_bytes);
    cr->ms_per_grain = orch_sizing_ms_per_grain(&cr->sizing);
    cr->bytes_per_grain = orch_sizing_bytes_per_grain(&cr->sizing);
}

void orch_driver_measure_growth(struct orch_driver_call *cr, int ngrains, int64_t grains,
                                int64_t bytes)
{
    if (ngrains >= 1)
        orch_sizing_add_growth(&cr->sizing, ngrains, grains, bytes);
}
