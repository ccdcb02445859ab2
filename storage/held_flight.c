/* held_flight.c — the held-writes cache (held.h), part two: the look-ups of WAITING grains
 * and of grains in flight, the seals of grains in flight and the attempt ends held, and
 * the reclaimed payload ids. */
#include "held.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "facts_int.h"
#include "orch_error.h"
#include "orch_facts.h"
#include "store_int.h"
#include "support.h"

/* ---- the waiting grains -----------------------------------------------------------------
 * Each input of a grain that becomes terminal looks the grain up by (call, entity)
 * (grain_input in propagate.c): a SELECT that cost 6,000 instructions of the driver's
 * ~90,000 per grain (callgrind, scripts/bench/scheduler's pipeline). The grains this
 * connection creates are kept here while they wait, with what the look-up needs; a
 * grain leaves when it becomes READY or is sealed unrun, every write of its pending
 * count is applied here too, and a rollback forgets them all. A grain that is not here
 * (made by an earlier run, re-opened, or past WAITING_MAX) is read from its row, as
 * always. With ORCH_STORE_CHECKS every look-up that is answered here is compared with
 * the row. */
#define WAITING_MAX ((size_t)1 << 16) /* a table of at most 2^17 slots: 5 MiB */

static size_t wait_hash(const orch_store *s, int call, int64_t e)
{
    uint64_t k = (uint64_t)e * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)call;
    return (size_t)((k * UINT64_C(0xbf58476d1ce4e5b9)) >> 32) & (s->held.wait_size - 1);
}

struct orch_held_waiting *orch_store__waiting_lookup(orch_store *s, int call, int64_t e)
{
    for (size_t h = wait_hash(s, call, e);; h = (h + 1) & (s->held.wait_size - 1)) {
        struct orch_held_waiting *w = &s->held.wait[h];
        if (w->id == 0)
            return NULL;
        if (w->entity == e && w->call == call)
            return w;
    }
}

/* False when it cannot (full, or no memory). */
bool orch_store__waiting_put(orch_store *s, const struct orch_held_waiting *v)
{
    if (s->held.nwait >= WAITING_MAX)
        return false;
    if ((s->held.nwait + 1) * 2 > s->held.wait_size) { /* at most half full */
        size_t size = s->held.wait_size ? s->held.wait_size * 2 : 4096;
        struct orch_held_waiting *t = calloc(size, sizeof *t), *old = s->held.wait;
        if (!t)
            return false; /* not kept: looked up in its row */
        size_t old_size = s->held.wait_size;
        s->held.wait = t;
        s->held.wait_size = size;
        for (size_t i = 0; i < old_size; i++) {
            if (old[i].id == 0)
                continue;
            size_t h = wait_hash(s, old[i].call, old[i].entity);
            while (t[h].id)
                h = (h + 1) & (size - 1);
            t[h] = old[i];
        }
        free(old);
    }
    size_t h = wait_hash(s, v->call, v->entity);
    while (s->held.wait[h].id)
        h = (h + 1) & (s->held.wait_size - 1);
    s->held.wait[h] = *v;
    s->held.nwait++;
    return true;
}

/* Removes (call, e), moving later entries of its probe run back (no tombstones). */
void orch_store__waiting_drop(orch_store *s, int call, int64_t e)
{
    struct orch_held_waiting *w = orch_store__waiting_find(&s->held, s, call, e);
    if (!w)
        return;
    size_t mask = s->held.wait_size - 1, hole = (size_t)(w - s->held.wait);
    s->held.wait[hole].id = 0;
    s->held.nwait--;
    for (size_t i = (hole + 1) & mask; s->held.wait[i].id; i = (i + 1) & mask) {
        size_t home = wait_hash(s, s->held.wait[i].call, s->held.wait[i].entity);
        /* It may fill the hole if its home is not in the cyclic range (hole, i]. */
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            s->held.wait[hole] = s->held.wait[i];
            s->held.wait[i].id = 0;
            hole = i;
        }
    }
}

void orch_store__waiting_forget(orch_store *s)
{
    if (s->held.nwait)
        memset(s->held.wait, 0, s->held.wait_size * sizeof *s->held.wait);
    s->held.nwait = 0;
}

/* ---- grains in flight ------------------------------------------------------------------
 * A grain in flight is not written as such: its attempt row, begun with its batch's others
 * (orch_store_attempts_begin), says that it runs. Its row reads READY until the grain is
 * sealed or put back; or WAITING when it was made READY in the transaction that
 * dispatched it: that READY is not written at all, and its seal (or requeue) writes the
 * ready_seq and ready_at it had (s->held.flying keeps them meanwhile: as many entries as grains
 * in flight). One to two UPDATEs per grain less, 10% of the driver's instructions on a
 * chain of no-op calls. The `grains` and `progress` views count a grain with an open
 * attempt as in flight; resume takes such grains back (GRAINS_INTERRUPT).
 *
 * The UPDATE of dispatch also caught a queue entry gone stale: a READY grain that a
 * GroupFailure barrier sealed while it waited in its queue. Such grains are remembered in
 * s->held.unq instead until their entry comes out of the queue: never more of them than of
 * queued grains. A rollback leaves both tables as they are: the driver stops then. */

static size_t gmap_hash(const struct orch_held_gmap *m, int64_t grain)
{
    return (size_t)(((uint64_t)grain * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & (m->size - 1);
}

int orch_store__gmap_put(struct orch_held_gmap *m, int64_t grain, int64_t seq, int64_t at)
{
    if ((m->n + 1) * 2 > m->size) {
        size_t size = m->size ? m->size * 2 : 256, old_size = m->size;
        struct orch_held_gent *t = calloc(size, sizeof *t), *old = m->v;
        if (!t)
            return -ENOMEM;
        m->v = t;
        m->size = size;
        for (size_t i = 0; i < old_size; i++) {
            if (!old[i].grain)
                continue;
            size_t h = gmap_hash(m, old[i].grain);
            while (t[h].grain)
                h = (h + 1) & (size - 1);
            t[h] = old[i];
        }
        free(old);
    }
    size_t h = gmap_hash(m, grain);
    while (m->v[h].grain && m->v[h].grain != grain)
        h = (h + 1) & (m->size - 1);
    if (!m->v[h].grain)
        m->n++;
    m->v[h] = (struct orch_held_gent){grain, seq, at};
    return 0;
}

void orch_store__gmap_clear(struct orch_held_gmap *m)
{
    free(m->v);
    *m = (struct orch_held_gmap){0};
}

bool orch_store__gmap_has(const struct orch_held_gmap *m, int64_t grain)
{
    if (m->n == 0)
        return false;
    for (size_t h = gmap_hash(m, grain); m->v[h].grain; h = (h + 1) & (m->size - 1))
        if (m->v[h].grain == grain)
            return true;
    return false;
}

/* held.h (orch_store__gmap_take). */
bool orch_store__gmap_remove(struct orch_held_gmap *m, int64_t grain,
                             struct orch_held_gent *out)
{
    size_t mask = m->size - 1, h = gmap_hash(m, grain);
    while (m->v[h].grain != grain) {
        if (!m->v[h].grain)
            return false;
        h = (h + 1) & mask;
    }
    if (out)
        *out = m->v[h];
    /* Backward shift: later entries of the run move up when their home allows it. */
    for (size_t j = (h + 1) & mask; m->v[j].grain; j = (j + 1) & mask) {
        size_t home = gmap_hash(m, m->v[j].grain);
        if (((j - home) & mask) >= ((j - h) & mask)) {
            m->v[h] = m->v[j];
            h = j;
        }
    }
    m->v[h].grain = 0;
    m->n--;
    return true;
}

/* With ORCH_STORE_CHECKS: the grain that goes in flight is READY at that generation. */
static int dispatch_check(orch_store *s, int64_t grain, uint32_t generation)
{
    const struct orch_held_grain *c = orch_store__held_grain(&s->held, grain);
    struct orch_grain_row g;
    int rc = c ? 0 : orch_store_grain_by_id(s, grain, &g); /* a held READY reads READY */
    if (rc < 0)
        return rc;
    bool ok = c ? c->seq && generation == 0 /* a new grain is at generation 0 */
                : g.phase == ORCH_PHASE_READY && g.generation == generation;
    return ok ? 0
              : orch_error_set(ORCH_ECORRUPT,
                               "%s: grain %lld dispatched at generation %u "
                               "is not READY at it",
                               s->path, (long long)grain, generation);
}

int orch_store_grain_dispatch(orch_store *s, int64_t grain, uint32_t generation, bool *done)
{
    *done = false;
    if (orch_store__gmap_take(&s->held.unq, grain, NULL))
        return 0; /* sealed by a barrier while it was queued */
    int rc = s->checks ? dispatch_check(s, grain, generation) : 0;
    struct orch_held_ready *r = rc == 0 ? orch_store__held_ready(&s->held, s, grain) : NULL;
    if (r) { /* READY in this transaction: written with its seal or requeue */
        if ((rc = orch_store__gmap_put(&s->held.flying, grain, r->seq, r->at)) < 0)
            return rc;
        r->live = false;
    }
    *done = rc == 0;
    return rc;
}

/* ---- seals held ------------------------------------------------------------------------
 * A report's seal was one UPDATE a grain: 9 k of the driver's 48 k instructions a grain on
 * a chain of no-op calls, most of it the statement's own cost. The seal of a grain that
 * this connection put in flight (s->held.inflight: its dispatch's attempt rows, with its
 * generation) at the generation the report names is held back instead, and the held ones
 * are written in runs: one UPDATE for grains whose ids step by the same stride (the grains
 * of one call in a batch: every entity's grains were created together) with ready_seqs
 * that step alike, one ready_at, one outcome and generation. Nothing else can tell: the
 * table would have said `sealed` only because the row matched (in flight, at that
 * generation), which the map says as well, since nothing but this connection writes the
 * job; any statement that reads or writes a grain's state writes the held seals first
 * (held.h), as does the commit, and a run that does not change exactly its grains stops the
 * turn as corrupt. A grain leaves the map when it is sealed, put back or interrupted; a
 * rollback empties it. With ORCH_STORE_CHECKS each held seal is compared with its row first. */

/* Writes run seals[i .. j-1] (the caller checked that they form one). */
static int seal_run(orch_store *s, size_t i, size_t j, int64_t sid, int64_t sseq)
{
    const struct orch_held_seal *a = &s->held.seals[i], *z = &s->held.seals[j - 1];
    const char *sealed = orch_grain_phase_name(ORCH_PHASE_SEALED);
    sqlite3_stmt *st;
    int rc = j - i == 1
                 ? orch_store__stmt(s, F_GRAIN_SEAL_IN_FLIGHT, &st, "lslNsN", a->grain,
                                    orch_grain_outcome_name(a->outcome), (int64_t)a->generation,
                                    a->seq, sealed, a->at)
                 : orch_store__stmt(s, F_GRAINS_SEAL_RUN, &st, "lslNsNlll", a->grain,
                                    orch_grain_outcome_name(a->outcome), (int64_t)a->generation,
                                    a->seq, sealed, a->at, sid, sseq, z->grain);
    if (rc < 0 || (rc = orch_store__run(s, st, NULL)) < 0)
        return rc;
    int changed = sqlite3_changes(s->db);
    if ((size_t)changed != j - i)
        return orch_error_set(ORCH_ECORRUPT,
                              "%s: %zu grains in flight sealed (%lld to %lld) but %d rows "
                              "were",
                              s->path, j - i, (long long)a->grain, (long long)z->grain,
                              changed);
    return 0;
}

int orch_store__seals_flush(orch_store *s)
{
    int rc = 0;
    size_t i = 0;
    while (i < s->held.nseals && rc == 0) {
        const struct orch_held_seal *a = &s->held.seals[i];
        size_t j = i + 1;
        int64_t sid = 1, sseq = 0;
        if (j < s->held.nseals) {
            sid = s->held.seals[j].grain - a->grain;
            sseq = a->seq >= 0 && s->held.seals[j].seq >= 0 ? s->held.seals[j].seq - a->seq : 0;
        }
        while (j < s->held.nseals && sid > 0) {
            const struct orch_held_seal *b = &s->held.seals[j], *p = &s->held.seals[j - 1];
            if (b->grain - p->grain != sid || b->outcome != a->outcome ||
                b->generation != a->generation || b->at != a->at ||
                (b->seq >= 0) != (a->seq >= 0) || (a->seq >= 0 && b->seq - p->seq != sseq))
                break;
            j++;
        }
        rc = seal_run(s, i, j, sid > 0 ? sid : 1, sseq);
        i = j;
    }
    s->held.nseals = 0;
    return rc;
}

/* With ORCH_STORE_CHECKS: the grain a report seals is in flight at that generation. The
 * row is read as it is: no held seal is its (it was in the map). */
static int seal_check(orch_store *s, int64_t grain, uint32_t generation)
{
    struct orch_grain_row g;
    bool was = s->held.flushing;
    s->held.flushing = true;
    int rc = orch_store_grain_by_id(s, grain, &g);
    s->held.flushing = was;
    if (rc < 0)
        return rc;
    return g.phase != ORCH_PHASE_SEALED && g.generation == generation
               ? 0
               : orch_error_set(ORCH_ECORRUPT,
                                "%s: grain %lld sealed at generation %u is "
                                "not in flight at it",
                                s->path, (long long)grain, generation);
}

/* Holds the seal of grain, in flight at generation by this connection's dispatch: 1, or 0
 * when it cannot be held (written now). */
static int seal_hold(orch_store *s, int64_t grain, enum orch_grain_outcome o,
                     uint32_t generation)
{
    int rc = s->checks ? seal_check(s, grain, generation) : 0;
    if (rc < 0 || (rc = orch_store__held_admit(&s->held, s, HELD_SEAL, s->held.nseals)) <= 0)
        return rc;
    if (s->held.nseals == s->held.capseals &&
        orch__grow_n(&s->held.seals, &s->held.capseals, s->held.nseals + 1,
                     sizeof *s->held.seals) < 0)
        return 0;
    struct orch_held_gent f = {0, -1, -1}; /* none kept: the row's stand */
    orch_store__gmap_take(&s->held.flying, grain, &f);
    s->held.seals[s->held.nseals++] = (struct orch_held_seal){
        .grain = grain, .seq = f.seq, .at = f.at, .generation = generation, .outcome = (int)o};
    s->held.kinds |= HELD_SEAL;
    return 1;
}

/* A report's seal: the ready_seq and ready_at kept for a grain whose READY was never
 * written go with it; a stale report leaves them kept. */
int orch_store__seal_in_flight(orch_store *s, int64_t grain, enum orch_grain_outcome o,
                               uint32_t generation, bool *done)
{
    struct orch_held_gent fl;
    if (orch_store__gmap_take(&s->held.inflight, grain, &fl) && fl.seq == (int64_t)generation) {
        int held = seal_hold(s, grain, o, generation);
        if (held != 0) {
            *done = held > 0;
            return held < 0 ? held : 0;
        }
    }
    struct orch_held_gent f = {0, -1, -1}; /* none kept: NULL, the row's stand */
    bool kept = orch_store__gmap_take(&s->held.flying, grain, &f);
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_GRAIN_SEAL_IN_FLIGHT, &st, "lslNsN", grain,
                              orch_grain_outcome_name(o), (int64_t)generation, f.seq,
                              orch_grain_phase_name(ORCH_PHASE_SEALED), f.at);
    if (rc == 0 && (rc = orch_store__run(s, st, done)) == 0 && !*done && kept)
        rc = orch_store__gmap_put(&s->held.flying, grain, f.seq, f.at);
    return rc;
}

/* Attempt ends held: a report's attempts that ended without a message (every record OK:
 * most reports) are written at the end of the turn, with its other held rows, instead of
 * at once: with --durability machine the commit's flush runs while the payload store's
 * sync is under way (loop.c), where the UPDATEs used to come before it was asked. Ranges
 * that follow one another with the same outcome and time are written as one. Any
 * statement that reads or writes an attempt's end writes them first (held.h), as does the
 * commit; a rollback forgets them with the rows they end. */

int orch_store__hold_aend(orch_store *s, const struct orch_held_aend *a)
{
    if (s->held.naends > 0) {
        struct orch_held_aend *p = &s->held.aends[s->held.naends - 1];
        if (p->last + 1 == a->first && p->outcome == a->outcome && p->at == a->at) {
            p->last = a->last;
            return 1;
        }
    }
    int rc = orch_store__held_admit(&s->held, s, HELD_AEND, s->held.naends);
    if (rc <= 0)
        return rc;
    if (s->held.naends == s->held.capaends &&
        orch__grow_n(&s->held.aends, &s->held.capaends, s->held.naends + 1,
                     sizeof *s->held.aends) < 0)
        return 0;
    s->held.aends[s->held.naends++] = *a;
    s->held.kinds |= HELD_AEND;
    return 1;
}

int orch_store__aends_flush(orch_store *s)
{
    int rc = 0;
    for (size_t i = 0; i < s->held.naends && rc == 0; i++)
        rc = orch_store__aend_write(s, &s->held.aends[i]);
    s->held.naends = 0;
    return rc;
}

/* ---- reclaimed ids ---------------------------------------------------------------------
 * The ids freed in a transaction are held: s->held.recl says which (so that an id freed twice
 * in it, read through two ports, counts once), s->held.reclw lists those not written yet. They
 * are written as spans of consecutive ids (migrations/0016_reclaimed_spans.sql): one row for
 * the run of ids that the readers of a batch free, where there was a row per id. A span
 * that meets or touches one already written is merged with it, so that the table stays
 * as small as the runs allow. An id freed again in a later transaction cannot happen
 * (reclaim.c frees an id in the transaction that seals its last reader); with
 * ORCH_STORE_CHECKS such an overlap is an error, else the spans are merged all the same.
 * Past RECL_HELD ids in a transaction they are written (one reduce over a million
 * children frees a million ids in a turn), and an id is then looked up in the spans too.
 * With holding off, each id is written as it is reclaimed: it is still kept in recl. */

void orch_store__reclaimed_forget(orch_store *s)
{
    /* A table much larger than what this transaction held is let go rather than cleared:
     * one turn that reclaimed a large expansion's ids grows it for good, and clearing
     * megabytes at every later commit was 1.5% of the driver's instructions (callgrind,
     * scripts/bench/autobatch). The next put allocates one of the size the turns need. */
    const struct orch_held_gmap *m = &s->held.recl;
    if (m->n > 0 && m->size > 4096 && m->n * 16 < m->size)
        orch_store__gmap_clear(&s->held.recl);
    else if (m->n > 0)
        memset(m->v, 0, m->size * sizeof *m->v);
    s->held.recl.n = 0;
    s->held.recl_spilled = false;
}

/* Writes span [first, last], merged with the spans it meets or touches. */
static int span_write(orch_store *s, int64_t first, int64_t last)
{
    for (;;) {
        sqlite3_stmt *st;
        int rc = orch_store__stmt(s, F_SPAN_BEFORE, &st, "l", last + 1);
        if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
            return rc;
        if (rc == 0)
            break;
        int64_t f = sqlite3_column_int64(st, 0), l = sqlite3_column_int64(st, 1);
        sqlite3_reset(st);
        if (l < first - 1)
            break; /* below, apart */
        if (s->checks && l >= first && f <= last)
            return orch_error_set(
                ORCH_ECORRUPT, "%s: payload ids %lld..%lld reclaimed again (span %lld..%lld)",
                s->path, (long long)first, (long long)last, (long long)f, (long long)l);
        if ((rc = orch_store__stmt(s, F_SPAN_DROP, &st, "l", f)) < 0 ||
            (rc = orch_store__run(s, st, NULL)) < 0)
            return rc;
        first = f < first ? f : first;
        last = l > last ? l : last;
    }
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_SPAN_PUT, &st, "ll", first, last);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store__reclaimed_flush(orch_store *s)
{
    orch__sort_u64(s->held.reclw, s->held.nreclw);
    int rc = 0;
    for (size_t i = 0, j; i < s->held.nreclw && rc == 0; i = j) {
        for (j = i + 1; j < s->held.nreclw && s->held.reclw[j] == s->held.reclw[j - 1] + 1; j++)
            ;
        rc = span_write(s, (int64_t)s->held.reclw[i], (int64_t)s->held.reclw[j - 1]);
    }
    if (rc == 0)
        s->held.nreclw = 0;
    return rc;
}

int orch_store_reclaimed_put(orch_store *s, uint64_t payload, bool *added)
{
    assert(orch_store_in_txn(s) && payload > 0 && payload <= INT64_MAX);
    *added = false;
    if (orch_store__gmap_has(&s->held.recl, (int64_t)payload))
        return 0; /* freed in this transaction already */
    int rc;
    bool covered;
    if (s->held.recl_spilled && /* or freed in it and written already */
        ((rc = orch_store_payload_reclaimed(s, payload, &covered)) < 0 || covered))
        return rc;
    int hold = orch_store__held_admit(&s->held, s, HELD_RECLAIM, s->held.recl.n);
    if (hold < 0)
        return hold;
    if (orch__grow_n(&s->held.reclw, &s->held.capreclw, s->held.nreclw + 1,
                     sizeof *s->held.reclw) < 0)
        return orch_error_set(-ENOMEM, "%s: out of memory for reclaimed ids", s->path);
    if ((rc = orch_store__gmap_put(&s->held.recl, (int64_t)payload, 0, 0)) < 0)
        return orch_error_set(rc, "%s: out of memory for reclaimed ids", s->path);
    s->held.reclw[s->held.nreclw++] = payload;
    s->held.kinds |= HELD_RECLAIM;
    *added = true;
    return hold ? 0 : orch_store__held_flush_kinds(s, HELD_RECLAIM);
}

/* ---- entities' parents, items ------------------------------------------------------------
 * Look-ups that propagation and reclamation make per child: an entity's parent (which
 * never changes) and an item put a few turns before (which changes only when `orch
 * retry` takes a Failed or Suppressed one back). Direct-mapped, filled by the puts and
 * the look-ups; a rollback may take the rows back and raw SQL may change anything: both
 * forget them (orch_store__held_forget, orch_store__held_reread). With ORCH_STORE_CHECKS
 * every answer is compared with the row. */

static size_t parent_slot(int64_t e)
{
    return (size_t)(((uint64_t)e * UINT64_C(0x9e3779b97f4a7c15)) >> 40) & (PARENTS_CACHED - 1);
}

void orch_store__parent_keep(orch_store *s, int64_t e, int64_t parent)
{
    if (!s->held.parents && !(s->held.parents = calloc(PARENTS_CACHED, sizeof *s->held.parents)))
        return; /* not kept: read from the row */
    s->held.parents[parent_slot(e)] = (struct orch_held_parent){e, parent};
}

const struct orch_held_parent *orch_store__parent_cached(const orch_store *s, int64_t e)
{
    const struct orch_held_parent *p = s->held.parents ? &s->held.parents[parent_slot(e)] : NULL;
    return p && p->entity == e ? p : NULL;
}

void orch_store__parents_forget(orch_store *s)
{
    if (s->held.parents)
        memset(s->held.parents, 0, PARENTS_CACHED * sizeof *s->held.parents);
}

static size_t item_slot(int port, int64_t e)
{
    uint64_t k = (uint64_t)e * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)port * UINT64_C(0xbf58476d1ce4e5b9);
    return (size_t)(k >> 40) & (ITEMS_CACHED - 1);
}

void orch_store__item_keep(orch_store *s, int port, int64_t e, int state, uint64_t payload)
{
    if (!s->held.icache && !(s->held.icache = calloc(ITEMS_CACHED, sizeof *s->held.icache)))
        return; /* not kept: read from the row */
    s->held.icache[item_slot(port, e)] =
        (struct orch_held_icached){.entity = e, .payload = payload, .port = port, .state = state};
}

const struct orch_held_icached *orch_store__item_cached(const orch_store *s, int port, int64_t e)
{
    const struct orch_held_icached *c =
        s->held.icache ? &s->held.icache[item_slot(port, e)] : NULL;
    return c && c->entity == e && c->port == port ? c : NULL;
}

void orch_store__item_drop(orch_store *s, int port, int64_t e)
{
    if (orch_store__item_cached(s, port, e))
        s->held.icache[item_slot(port, e)].entity = 0;
}

void orch_store__items_forget(orch_store *s)
{
    if (s->held.icache)
        memset(s->held.icache, 0, ITEMS_CACHED * sizeof *s->held.icache);
}
