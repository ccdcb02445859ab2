/* reclaim.c — freeing the payloads of intermediate ports once nothing can read them
 * (DESIGN §2 `output`, §6).
 *
 * What may read a payload. A Present item names a payload id. The same id can be named by
 * several items: a filter's output item names its input's payload (pass-through), and a
 * broadcast copies its ancestor's item, payload id and all, into every descendant. So the
 * unit that lives or dies is a *family*: a port R whose payloads are made by a source or a
 * computing statement (map, expand, aligned expand, reduce), with every port that carries
 * R's ids on, transitively, through filters and broadcasts. The readers of a family are
 * the statements (not broadcasts: they compute nothing) that consume any of its ports.
 *
 * Each family has one of three fates, fixed by the plan:
 *
 *   KEEP    a port of the family is `output`, or the pipeline has no `output` statement
 *           at all (it has not said what to keep: everything is kept, as before).
 *   EAGER   no broadcast in the family. Every item of the family on entity x names the
 *           same id and lives on x (a filter maps within its domain), and every grain that
 *           can read it exists as soon as x does: for each reader, its grain on x (on x's
 *           parent for a reduce). The id is freed in the turn that seals the last of them.
 *   AT_END  a broadcast in the family: the descendants that read a copy appear as
 *           expansions seal, up to the end of the job, so no seal before then can prove
 *           that the last reader came. Freed when the job finishes (orch_prop_reclaim_end).
 *
 * The rule (EAGER). When a grain of a reader seals OK or Dropped, for each of its inputs
 * (each child's item, for a reduce) that is Present: its id is freed when every reader of
 * the family has its grain on that entity sealed OK or Dropped. Proof sketch: a payload is
 * read only by a worker running a grain that reads one of the family's items, or by the
 * driver reserving such a grain (READY); a sealed grain is never run again, except by
 * `orch retry`, which re-opens only Failed and Suppressed grains (reopen.c); the readers'
 * grains are all created with x, so "all sealed" covers every grain that will ever read it.
 * A reader sealed Failed or Suppressed keeps the id (see "retry" below); when retry's run
 * seals it OK, the check runs again and frees it then. A family item that is not Present
 * names no payload; the seal that runs the check comes after the item is published (a
 * grain waits for all its inputs, but for Failed or Suppressed ones, which keep).
 *
 * Retry. The inputs of a Failed or Suppressed grain are never freed, so `orch retry` always
 * finds what it re-runs. For AT_END families, a retry can bring descendants that did not
 * exist (a re-run expand) and read a broadcast copy: so the sweep at the end of a job that
 * has any Failed or Suppressed grain leaves AT_END families alone; the end of a run with
 * none frees them. A family without readers is freed at the end of the job either way.
 *
 * Ids freed before. An edited update may carry an item whose payload was freed already,
 * for a port that nothing which runs reads (engine/update/carry.c); the seals of its
 * readers then meet an id that an earlier transaction freed. From the first turn of such
 * an update (orch_prop_reclaim_recheck), each id is looked up in the reclaimed spans
 * before it is freed: one look-up more per freed id, in edited updates only.
 *
 * Order of writes. The freed id is recorded (table `reclaimed_span`, orch_facts.h) in the
 * turn's transaction, with the seal that proved it; its bytes are deleted from the
 * payload store only once that transaction is durable (orch_prop_reclaim_flush). A crash
 * between the two leaves bytes that only a reclaimed span names: the orphan reclamation
 * at the next start deletes them. Never the reverse: no byte is deleted before the row
 * that says so is on disk. "Committed" is not enough: state.db runs in WAL mode with
 * synchronous = NORMAL, so a machine crash may lose its last commits; had their payloads
 * been deleted, the grains those commits sealed would run again without their inputs. So
 * committed ids wait in `pending` until a sync of state.db (the log and the file), asked
 * for at most once a second, or when many wait, and made in the background
 * (orch_store_sync_begin: the loop does not wait on the disk), or at the job's end by the
 * orphan reclamation (which syncs first); then one LMDB write deletes the ids the sync
 * covers. The payload store holds about a second's worth of freed bytes more than it
 * must.
 *
 * Cost. A family with one reader and one input (the common chain a → b → c) costs, per
 * sealed grain, one item look-up and one insert; every other reader of the family adds a
 * grain look-up.
 */
#include "prop_int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "orch_payload.h"
#include "support.h"

enum fate { FATE_KEEP, FATE_EAGER, FATE_AT_END };

struct family {
    enum fate fate;
    int *readers; /* statement indexes, each once */
    int nreaders, creaders;
};

/* Freed ids, as runs of consecutive ones: the inputs of a reduce over a million children,
 * freed by its seal, are runs as long as the batches that made them (a batch's outputs
 * take consecutive ids), not a million ids held until the next sync. */
struct id_span {
    uint64_t first, n;
};

struct prop_reclaim {
    int *root;            /* per port: the port whose family it belongs to */
    struct family *fam;   /* per port; meaningful for roots only */
    struct id_span *ids;     /* recorded in the open turn: pending once it commits */
    size_t nids, cids;
    struct id_span *pending; /* committed, deleted after the next sync of state.db */
    size_t npending, cpending;
    size_t covered;          /* the first `covered` of them: a sync asked for covers them */
    uint64_t turn_ids, pending_ids, covered_ids; /* the ids in ids, pending, covered */
    bool recheck;         /* items may name ids freed before (orch_prop_reclaim_recheck) */
    int64_t synced_ms;    /* when state.db was last synced (monotonic, ms) */
};

/* Pending deletes wait at most this long, or until this many wait, for a sync. */
#define RECLAIM_SYNC_MS 1000
#define RECLAIM_SYNC_IDS 65536

int orch_prop_family(const orch_plan *plan, int port)
{
    for (;;) {
        const struct orch_port *pt = orch_plan_port(plan, port);
        if (pt->producer < 0)
            return port; /* a source's */
        const struct orch_stmt *s = orch_plan_stmt(plan, pt->producer);
        if (s->op != ORCH_OP_FILTER && s->op != ORCH_OP_BROADCAST)
            return port;
        port = s->in[0].port;
    }
}

static int add_reader(struct family *f, int stmt)
{
    for (int i = 0; i < f->nreaders; i++)
        if (f->readers[i] == stmt)
            return 0;
    if (orch__grow(&f->readers, &f->creaders, f->nreaders + 1, sizeof *f->readers) < 0)
        return -ENOMEM;
    f->readers[f->nreaders++] = stmt;
    return 0;
}

int orch_prop_reclaim_open(orch_prop *p)
{
    const orch_plan *plan = p->plan;
    int np = orch_plan_nports(plan);
    struct prop_reclaim *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    p->reclaim = r;
    r->root = calloc((size_t)np + 1, sizeof *r->root);
    r->fam = calloc((size_t)np + 1, sizeof *r->fam);
    if (!r->root || !r->fam)
        return -ENOMEM;
    bool any_output = false;
    for (int i = 0; i < np; i++)
        any_output = any_output || orch_plan_port(plan, i)->output;
    for (int i = 0; i < np; i++) {
        r->root[i] = orch_prop_family(plan, i);
        r->fam[i].fate = any_output ? FATE_EAGER : FATE_KEEP;
    }
    for (int i = 0; i < np; i++) {
        const struct orch_port *pt = orch_plan_port(plan, i);
        struct family *f = &r->fam[r->root[i]];
        if (pt->output)
            f->fate = FATE_KEEP;
        else if (f->fate == FATE_EAGER && pt->producer >= 0 &&
                 orch_plan_stmt(plan, pt->producer)->op == ORCH_OP_BROADCAST)
            f->fate = FATE_AT_END;
        for (int k = 0; k < pt->nconsumers; k++)
            if (orch_plan_stmt(plan, pt->consumers[k])->op != ORCH_OP_BROADCAST &&
                add_reader(f, pt->consumers[k]) < 0)
                return -ENOMEM;
    }
    return 0;
}

void orch_prop_reclaim_free(orch_prop *p)
{
    struct prop_reclaim *r = p->reclaim;
    if (!r)
        return;
    if (r->fam)
        for (int i = 0; i < orch_plan_nports(p->plan); i++)
            free(r->fam[i].readers);
    free(r->fam);
    free(r->root);
    free(r->ids);
    free(r->pending);
    free(r);
    p->reclaim = NULL;
}

/* ---- live intermediate bytes (propagate.h, orch_prop_set_payloads) -------------------- */

bool orch_prop_port_counted(const orch_prop *p, int port)
{
    const struct prop_reclaim *r = p->reclaim;
    /* The family's own port only: a filter's or a broadcast's item names the same id. An
     * EAGER family without readers is freed at the job's end only, so it is not "live":
     * counting it would hold admission for bytes that no drain can free. */
    return r->root[port] == port && r->fam[port].fate == FATE_EAGER &&
           r->fam[port].nreaders > 0;
}

/* The size of payload id in the store, read without copying: 1 and *len, or 0 when it
 * is not stored (*len 0), or an error. The snapshot is begun at the first look-up of a
 * turn; a payload that a worker wrote after it began is not in it, so a miss begins a new
 * snapshot once before concluding. */
static int payload_size(orch_prop *p, uint64_t id, size_t *len)
{
    const void *data;
    *len = 0;
    for (int tries = 0; tries < 2; tries++) {
        int rc = p->snap ? 0 : orch_payload_read_begin(p->payloads, &p->snap);
        if (rc == 0)
            rc = orch_payload_read(p->snap, id, &data, len);
        if (rc != ORCH_ENOTFOUND)
            return rc < 0 ? rc : 1;
        orch_prop_snapshot_end(p);
    }
    /* Not stored: a committed Present item always names a stored payload, and a freed one
     * is freed once (reclaimed's key); count nothing rather than stop the job. The miss's
     * detail goes too: a later error that sets none must not be told as "no payload". */
    *len = 0;
    orch_error_clear();
    return 0;
}

int orch_prop_payload_size(orch_prop *p, uint64_t id, int64_t *size)
{
    size_t len;
    int rc = payload_size(p, id, &len);
    *size = rc == 1 ? (int64_t)len : -1;
    return rc < 0 ? rc : 0;
}

void orch_prop_set_payloads(orch_prop *p, orch_payload *payloads)
{
    p->payloads = payloads;
}

int64_t orch_prop_live_bytes(const orch_prop *p)
{
    return p->live;
}

void orch_prop_snapshot_end(orch_prop *p)
{
    orch_payload_read_end(p->snap);
    p->snap = NULL;
}

/* ---- freeing --------------------------------------------------------------------------- */

/* Records payload id as freed in the turn's transaction; its bytes go after the commit. */
static int free_id(orch_prop *p, uint64_t id, int64_t size)
{
    struct prop_reclaim *r = p->reclaim;
    bool gone = false, added;
    int rc = r->recheck ? orch_store_payload_reclaimed(p->store, id, &gone) : 0;
    if (rc < 0 || gone)
        return rc; /* handed on already freed (an edited update) */
    if ((rc = orch_store_reclaimed_put(p->store, id, &added)) < 0 || !added)
        return rc; /* already freed: one reader read it through two ports */
    if (p->payloads) { /* only EAGER families come here: counted ones (orch_prop_item_resolve)
                        */
        /* Its size when the caller knows it (what the reader was sent); read when not, and
         * with ORCH_STORE_CHECKS checked. */
        size_t len = size >= 0 ? (size_t)size : 0;
        if (size < 0 || orch_store_checks(p->store)) {
            if ((rc = payload_size(p, id, &len)) < 0)
                return rc;
            if (rc == 1 && size >= 0 && len != (size_t)size)
                return orch_error_set(ORCH_ECORRUPT,
                                      "payload %llu was known as %lld bytes, but %zu are "
                                      "stored",
                                      (unsigned long long)id, (long long)size, len);
        }
        /* A job from before live_bytes was kept (0009) frees what it never counted. */
        p->live = p->live > (int64_t)len ? p->live - (int64_t)len : 0;
    }
    struct id_span *last = r->nids ? &r->ids[r->nids - 1] : NULL;
    if (last && id == last->first + last->n) {
        last->n++;
    } else {
        if (orch__grow_n(&r->ids, &r->cids, r->nids + 1, sizeof *r->ids) < 0)
            return -ENOMEM;
        r->ids[r->nids++] = (struct id_span){id, 1};
    }
    r->turn_ids++;
    return 0;
}

static bool outcome_final(int outcome)
{
    return outcome == ORCH_OUTCOME_OK || outcome == ORCH_OUTCOME_DROPPED;
}

/* An item on x of EAGER family f (root port `root`) was read by grain (stmt, e), sealed OK
 * or Dropped just now: frees the payload of the family on x if every other reader of f has
 * sealed so on x too. The root's item is the one read: the item that was read may be a
 * filter's Dropped output, while the root's item, which a reader before the filter read,
 * still names the payload. */
static int check_item(orch_prop *p, const struct family *f, int root, int64_t x, int stmt,
                      int64_t e, uint64_t known, int64_t known_size)
{
    enum orch_item_state st = ORCH_ITEM_PRESENT;
    uint64_t id = known;
    int rc = known ? 1 : orch_store_item_get(p->store, root, x, &st, &id);
    if (rc <= 0 || st != ORCH_ITEM_PRESENT)
        return rc < 0 ? rc : 0;
    int64_t parent = -1; /* x's parent, looked up once if a reduce reads the family */
    for (int i = 0; i < f->nreaders; i++) {
        const struct orch_stmt *s = orch_plan_stmt(p->plan, f->readers[i]);
        int64_t on = x;
        if (s->op == ORCH_OP_REDUCE) {
            if (parent < 0 && (rc = orch_store_entity_parent(p->store, x, &parent)) < 0)
                return rc;
            on = parent;
        }
        if (f->readers[i] == stmt && on == e)
            continue; /* the grain that sealed now */
        struct orch_grain_row g;
        if ((rc = orch_store_grain_get(p->store, s->call, on, orch_prop_on_roots(p, s), &g)) <
            0)
            return rc;
        if (g.phase != ORCH_PHASE_SEALED || !outcome_final(g.outcome))
            return 0; /* a reader to come, or one that `orch retry` may run again */
    }
    return free_id(p, id, known ? known_size : -1);
}

int orch_prop_reclaim_sealed(orch_prop *p, int stmt, int64_t e, enum orch_grain_outcome o,
                             uint64_t in0, int64_t in0_size)
{
    struct prop_reclaim *r = p->reclaim;
    if (!outcome_final((int)o))
        return 0;
    const struct orch_stmt *s = orch_plan_stmt(p->plan, stmt);
    int rc = 0;
    for (int i = 0; i < s->nin && rc == 0; i++) {
        int root = r->root[s->in[i].port];
        const struct family *f = &r->fam[root];
        if (f->fate != FATE_EAGER)
            continue;
        if (s->op != ORCH_OP_REDUCE) {
            /* The one input it was sent names the family's id: a filter between the root
             * and the input passes the same id on (a Dropped input was sent as absent, 0,
             * and is looked up: the root's item may still name a payload). */
            rc = s->nin == 1 ? check_item(p, f, root, e, stmt, e, in0, in0_size)
                             : check_item(p, f, root, e, stmt, e, 0, -1);
            continue;
        }
        /* Page by page: a reduce over a million children holds no list of them all. */
        int64_t kids[ORCH_PROP_PAGE_MAX], after = -1;
        size_t n = ORCH_PROP_PAGE_MAX;
        while (rc == 0 && n == ORCH_PROP_PAGE_MAX) {
            rc = orch_store_children_page(p->store, e, orch_prop_reduce_child(p->plan, s), after,
                                          ORCH_PROP_PAGE_MAX, kids, &n, &after);
            for (size_t k = 0; k < n && rc == 0; k++)
                rc = check_item(p, f, root, kids[k], stmt, e, 0, -1);
        }
    }
    return rc;
}

/* ---- the driver's side ----------------------------------------------------------------- */

/* The ids the committed turn freed join those waiting for a sync. Out of memory, their
 * bytes stay, as orphans of committed rows (the sweeps take them). */
static void take_turn_ids(struct prop_reclaim *r)
{
    bool taken = false;
    if (r->nids > 0 && r->npending == 0) {
        /* Handed over rather than copied: a turn that freed many runs does not hold them
         * twice. */
        struct id_span *t = r->pending;
        size_t c = r->cpending;
        r->pending = r->ids;
        r->cpending = r->cids;
        r->npending = r->nids;
        r->ids = t;
        r->cids = c;
        taken = true;
    } else if (r->nids > 0 && orch__grow_n(&r->pending, &r->cpending, r->npending + r->nids,
                                           sizeof *r->pending) == 0) {
        memcpy(r->pending + r->npending, r->ids, r->nids * sizeof *r->ids);
        r->npending += r->nids;
        taken = true;
    }
    if (taken)
        r->pending_ids += r->turn_ids;
    r->nids = 0;
    r->turn_ids = 0;
}

/* Deletes the payloads of the ids of spans s[0..n), DELETE_RUN ids a write transaction
 * (orch_payload_delete_many); *deleted: how many were stored. 0 or an error. */
#define DELETE_RUN 65536
static int delete_spans(orch_payload *pl, const struct id_span *s, size_t n, size_t *deleted)
{
    *deleted = 0;
    uint64_t *run = malloc(DELETE_RUN * sizeof *run);
    if (!run)
        return -ENOMEM;
    size_t k = 0, d;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        for (uint64_t j = 0; j < s[i].n && rc == 0; j++) {
            run[k++] = s[i].first + j;
            if (k == DELETE_RUN) {
                rc = orch_payload_delete_many(pl, run, k, &d);
                *deleted += d;
                k = 0;
            }
        }
    if (rc == 0 && k > 0) {
        rc = orch_payload_delete_many(pl, run, k, &d);
        *deleted += d;
    }
    free(run);
    return rc;
}

int orch_prop_reclaim_flush(orch_prop *p, int64_t now)
{
    struct prop_reclaim *r = p->reclaim;
    orch_store *store = p->store;
    assert(!orch_store_in_txn(store) && "the rows that free them are committed");
    take_turn_ids(r);
    if (r->covered > 0) {
        /* The sync asked for covers the first `covered`: once it is made they go. A failed
         * sync or delete leaves the bytes as orphans of committed rows: the orphan
         * reclamation at the next start (or the job's end) deletes them; the job goes on. */
        int done = orch_store_sync_end(store, false);
        if (done == 0)
            return 0;
        size_t k;
        if (done == 1)
            (void)delete_spans(p->payloads, r->pending, r->covered, &k);
        orch_error_clear();
        r->npending -= r->covered;
        memmove(r->pending, r->pending + r->covered, r->npending * sizeof *r->pending);
        r->covered = 0;
        r->pending_ids -= r->covered_ids;
        r->covered_ids = 0;
        if (r->npending == 0 && r->cpending > RECLAIM_SYNC_IDS) {
            free(r->pending); /* a large turn's ids (a reduce's inputs): not kept */
            r->pending = NULL;
            r->cpending = 0;
        }
        r->synced_ms = now;
    }
    if (r->npending == 0 ||
        (r->pending_ids < RECLAIM_SYNC_IDS && now - r->synced_ms < RECLAIM_SYNC_MS))
        return 0;
    /* Made in the background (storage/background.c): the loop does not wait on the disk. */
    (void)orch_store_sync_begin(store);
    r->covered = r->npending;
    r->covered_ids = r->pending_ids;
    return 0;
}

void orch_prop_reclaim_recheck(orch_prop *p)
{
    p->reclaim->recheck = true;
}

void orch_prop_reclaim_forget(orch_prop *p)
{
    if (p && p->reclaim)
        p->reclaim->nids = p->reclaim->turn_ids = 0;
}

int orch_prop_reclaim_end(orch_prop *p)
{
    const orch_plan *plan = p->plan;
    struct prop_reclaim *r = p->reclaim;
    bool failures = false;
    for (int c = 0; c < orch_plan_ncalls(plan) && !failures; c++) {
        const struct orch_prop_counts *k = orch_prop_counts(p, c);
        failures = k->sealed[ORCH_OUTCOME_FAILED] > 0 || k->sealed[ORCH_OUTCOME_SUPPRESSED] > 0;
    }
    int rc = 0;
    for (int i = 0; i < orch_plan_nports(plan) && rc == 0; i++) {
        const struct family *f = &r->fam[r->root[i]];
        bool sweep = (f->fate == FATE_AT_END && !failures) ||
                     (f->fate == FATE_EAGER && f->nreaders == 0);
        int64_t added;
        if (sweep)
            rc = orch_store_reclaimed_port(p->store, i, &added);
    }
    return rc;
}

/* ---- the end of a run -------------------------------------------------------------------
 * The sweep of orphans at the end of a run (orch_job_reclaim) reads every item's payload
 * id, sorted, and every id in the payload store: 700 ms of the 20 s of a million grains
 * (scripts/bench/scheduler), to find, in most runs, nothing but the freed ids still waiting
 * for their sync. A count can say so instead. After the sweep at the start, the store held
 * exactly the ids that live items name; now it holds those, the ids freed and not deleted
 * yet, and orphans, which only a report not committed (stale, discarded by a barrier, of
 * a failed attempt) or a carried grain can leave. In a run with none of these, once the
 * freed ids that waited are deleted, the store must hold exactly the named ids: the
 * present items of ports whose payloads are their own (a filter's or a broadcast's output
 * names its input's), less the ids that the spans free. The caller compares that with the
 * store's count and sweeps when they differ (ids freed at the job's end, a failed delete,
 * anything not foreseen here). */
int orch_prop_reclaim_settle(orch_prop *p, bool orphans, int64_t *deleted, int64_t *named)
{
    struct prop_reclaim *r = p->reclaim;
    *named = -1;
    *deleted = 0;
    take_turn_ids(r); /* the last turn's: the sync below covers them all */
    if (r->npending > 0) {
        /* As in the loop, a failed sync or delete leaves orphans: the sweep takes them. */
        size_t k = 0;
        bool gone = orch_store_sync(p->store) == 0 &&
                    delete_spans(p->payloads, r->pending, r->npending, &k) == 0;
        *deleted = (int64_t)k;
        r->npending = r->covered = 0;
        r->pending_ids = r->covered_ids = 0;
        if (!gone) {
            orch_error_clear();
            return 0;
        }
    }
    int64_t freed, own = 0;
    if (orphans)
        return 0;
    if (orch_store_reclaimed_count(p->store, &freed) < 0) {
        orch_error_clear();
        return 0;
    }
    const int64_t *items = orch_prop_items(p);
    for (int i = 0; i < orch_plan_nports(p->plan); i++)
        if (r->root[i] == i)
            own += items[i * ORCH_ITEM__COUNT + ORCH_ITEM_PRESENT];
    *named = own - freed;
    return 0;
}
