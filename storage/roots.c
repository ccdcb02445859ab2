/* roots.c — the roots of incremental jobs and their updates (orch_facts.h; DESIGN §10):
 * root rows and their revisions, the job_update rows of `orch update`, and the look-ups an
 * edited pipeline's new revisions make (twins, the previous plan). The root rows that
 * admission writes are held (held.c). */
#include "orch_facts.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "facts_int.h"
#include "orch_error.h"
#include "proc.h"

/* Reads the signature columns at i, i+1, i+2 into *sig (hash copied into sig->hash). */
static void sig_read(sqlite3_stmt *st, int i, struct orch_root_sig *sig)
{
    sig->known = sqlite3_column_type(st, i) != SQLITE_NULL;
    sig->size = sqlite3_column_int64(st, i);
    sig->mtime_ns = sqlite3_column_int64(st, i + 1);
    const char *h = (const char *)sqlite3_column_text(st, i + 2);
    snprintf(sig->hash, sizeof sig->hash, "%s", h ? h : "");
}

/* A root row is held (held.h) until a statement reads roots, or the commit. */
int orch_store_root_put(orch_store *s, int64_t e, int domain, int64_t revision,
                        int64_t position, const struct orch_root_sig *sig)
{
    assert(orch_store_in_txn(s));
    bool known = sig && sig->known;
    struct orch_held_root r = {.entity = e,
                               .revision = revision,
                               .position = position,
                               .size = known ? sig->size : -1,
                               .mtime_ns = known ? sig->mtime_ns : -1,
                               .at = orch_clock_wall_ms(),
                               .domain = domain};
    const char *hash = known ? sig->hash : NULL;
    sqlite3_stmt *st;
    int rc = orch_store__hold_root(s, &r, hash);
    if (rc == 0) { /* not held: written now */
        rc = orch_store__stmt(s, F_ROOT_PUT, &st, "lillNNtl", e, domain, revision, position,
                              r.size, r.mtime_ns, hash, r.at);
        if (rc == 0)
            rc = orch_store__run(s, st, NULL);
    }
    if (rc < 0 || revision == 1)
        return rc < 0 ? rc : 0;
    /* Its predecessor, live until now if an edit replaces it: retired in this transaction,
     * which publishes what the new revision takes over from it (carry.c), so that a reader
     * never finds the key without a live revision (0019_replan.sql). */
    rc = orch_store__stmt(s, F_ROOT_REPLACE, &st, "lsl", r.at, "plan", e);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_root_find(orch_store *s, int domain, const char *key, struct orch_root_row *r,
                         int64_t *next_revision)
{
    *next_revision = 1;
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ROOT_FIND, &st, "is", domain, key);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    /* An aggregate (max: its other columns are the latest revision's, without a sort)
     * gives one row even for a key with no root: revision NULL. */
    bool live = sqlite3_column_type(st, 6) != SQLITE_NULL && sqlite3_column_int(st, 5) != 0;
    *next_revision = sqlite3_column_int64(st, 6) + 1;
    if (live) {
        r->entity = sqlite3_column_int64(st, 0);
        r->position = sqlite3_column_int64(st, 1);
        sig_read(st, 2, &r->sig);
        r->key = NULL;
    }
    sqlite3_reset(st);
    return live;
}

int orch_store_root_page(orch_store *s, int domain, int64_t after_position, int64_t after_id,
                         int limit, int (*fn)(void *ctx, const struct orch_root_row *r),
                         void *ctx)
{
    sqlite3_stmt *st;
    int rc =
        orch_store__stmt(s, F_ROOT_PAGE, &st, "illi", domain, after_position, after_id, limit);
    int n = 0;
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1) {
        struct orch_root_row r = {.entity = sqlite3_column_int64(st, 0),
                                  .position = sqlite3_column_int64(st, 1),
                                  .key = (const char *)sqlite3_column_text(st, 5)};
        sig_read(st, 2, &r.sig);
        n++;
        rc = fn(ctx, &r);
    }
    sqlite3_reset(st);
    return rc < 0 ? rc : n;
}

int orch_store_root_any(orch_store *s, int domain, bool *any)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ROOT_ANY, &st, "i", domain);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *any = rc == 1;
    if (rc == 1)
        sqlite3_reset(st);
    return 0;
}

int orch_store_root_position(orch_store *s, int64_t e, int64_t position)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ROOT_POSITION, &st, "ll", position, e);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_root_sig_get(orch_store *s, int64_t e, struct orch_root_sig *sig)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ROOT_SIG_GET, &st, "l", e);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    sig_read(st, 0, sig);
    sqlite3_reset(st);
    return 1;
}

int orch_store_root_sig(orch_store *s, int64_t e, const struct orch_root_sig *sig)
{
    sqlite3_stmt *st;
    int rc =
        orch_store__stmt(s, F_ROOT_SIG, &st, "llsl", sig->size, sig->mtime_ns, sig->hash, e);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_root_retire(orch_store *s, int64_t e, const char *reason)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ROOT_RETIRE, &st, "lsl", orch_clock_wall_ms(), reason, e);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_root_next_ordinal(orch_store *s, int domain, int64_t *ordinal)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ROOT_NEXT_ORDINAL, &st, "i", domain);
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *ordinal = rc ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    return 0;
}

int orch_store_update_open(orch_store *s, int64_t *id, bool *scanned, int64_t *plan)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_UPDATE_OPEN, &st, "");
    if (rc < 0 || (rc = orch_store__one(s, st)) < 0)
        return rc;
    *id = rc ? sqlite3_column_int64(st, 0) : 0;
    *scanned = rc ? sqlite3_column_int(st, 1) != 0 : false;
    if (plan)
        *plan = rc ? sqlite3_column_int64(st, 2) : 0;
    sqlite3_reset(st);
    return 0;
}

/* Steps st (bound, at most one row) and copies its first column's text into *out
 * (malloc'd; NULL for no row or NULL): 1 when there was a row, 0 when none, or an error. */
static int one_text(orch_store *s, sqlite3_stmt *st, char **out)
{
    *out = NULL;
    int rc = orch_store__one(s, st);
    if (rc <= 0)
        return rc;
    const char *t = (const char *)sqlite3_column_text(st, 0);
    rc = t && !(*out = strdup(t)) ? orch_error_set(-ENOMEM, "out of memory") : 1;
    sqlite3_reset(st);
    return rc;
}

int orch_store_update_rerun(orch_store *s, int64_t id, char **calls)
{
    *calls = NULL;
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_UPDATE_RERUN, &st, "l", id);
    if (rc == 0)
        rc = one_text(s, st, calls);
    return rc < 0 ? rc : 0;
}

int orch_store_update_start(orch_store *s, int64_t plan, const char *rerun, int64_t *id)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_UPDATE_START, &st, "lLt", orch_clock_wall_ms(), plan, rerun);
    if (rc == 0 && (rc = orch_store__run(s, st, NULL)) == 0)
        *id = sqlite3_last_insert_rowid(s->db);
    return rc;
}

int orch_store_root_replan(orch_store *s, int64_t id)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ROOT_REPLAN, &st, "l", id);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_root_retire_domain(orch_store *s, int domain, const char *reason)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ROOT_RETIRE_DOMAIN, &st, "lsi", orch_clock_wall_ms(), reason,
                              domain);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_twin(orch_store *s, int64_t e, int64_t *twin)
{
    *twin = 0;
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_ENTITY_SHAPE, &st, "l", e);
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    int64_t parent = sqlite3_column_int64(st, 0), ordinal = sqlite3_column_int64(st, 2);
    int domain = sqlite3_column_int(st, 1);
    sqlite3_reset(st);
    if (!parent) {
        if ((rc = orch_store__stmt(s, F_ROOT_TWIN, &st, "ls", e, "plan")) < 0 ||
            (rc = orch_store__one(s, st)) <= 0)
            return rc;
        *twin = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
        return 0;
    }
    int64_t up;
    if ((rc = orch_store_twin(s, parent, &up)) < 0 || !up)
        return rc;
    if ((rc = orch_store__stmt(s, F_CHILD_AT, &st, "lil", up, domain, ordinal)) < 0 ||
        (rc = orch_store__one(s, st)) <= 0)
        return rc;
    *twin = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return 0;
}

int orch_store_twins_reclaimed(orch_store *s, int port, bool *any)
{
    *any = false;
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_TWINS_RECLAIMED, &st, "is", port, "plan");
    if (rc < 0 || (rc = orch_store__one(s, st)) <= 0)
        return rc;
    *any = sqlite3_column_int(st, 0) != 0;
    sqlite3_reset(st);
    return 0;
}

int orch_store_plan_previous(orch_store *s, int64_t plan, char **text)
{
    *text = NULL;
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_PLAN_PREVIOUS, &st, "l", plan);
    return rc < 0 ? rc : one_text(s, st, text);
}

int orch_store_update_count(orch_store *s, int64_t id, int64_t added, int64_t changed,
                            int64_t removed)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_UPDATE_COUNT, &st, "llll", added, changed, removed, id);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_update_scanned(orch_store *s, int64_t id)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_UPDATE_SCANNED, &st, "ll", orch_clock_wall_ms(), id);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_update_drop_quiet(orch_store *s, int64_t id)
{
    sqlite3_stmt *st;
    int rc = orch_store__stmt(s, F_UPDATE_DROP_QUIET, &st, "l", id);
    return rc < 0 ? rc : orch_store__run(s, st, NULL);
}

int orch_store_update_finished(orch_store *s)
{
    sqlite3_stmt *st;
    const int64_t now = orch_clock_wall_ms();
    int rc = orch_store__stmt(s, F_ROOT_REPLAN_LEFT, &st, "ls", now, "removed");
    if (rc == 0)
        rc = orch_store__run(s, st, NULL);
    int64_t left = rc == 0 ? sqlite3_changes(s->db) : 0;
    if (rc == 0 && left > 0 &&
        (rc = orch_store__stmt(s, F_UPDATE_REPLAN_LEFT, &st, "l", left)) == 0)
        rc = orch_store__run(s, st, NULL);
    if (rc == 0 && (rc = orch_store__stmt(s, F_UPDATE_FINISHED, &st, "l", now)) == 0)
        rc = orch_store__run(s, st, NULL);
    return rc;
}
