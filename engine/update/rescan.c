/* rescan.c — what `orch update` reads again, and what a resume checks (DESIGN §10;
 * update.h): the sources against the job's live roots. */
#include "update.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "orch_facts.h"

struct retire_ctx {
    orch_store *st;
    int64_t removed;
};

static int retire_removed(void *ctx, int64_t e, const char *key)
{
    (void)key;
    struct retire_ctx *c = ctx;
    c->removed++;
    return orch_store_root_retire(c->st, e, "removed");
}

/* Whether the file of matched value v is the one its root was admitted with: 1 (its
 * signature recorded again when only its time changed), 0, or a store error. A file that
 * cannot be read now is changed, unless it could not be read when its revision was
 * admitted either: its new revision fails to read, as in a fresh run. A root of an old job
 * has no signature: its file is taken as it is now. */
static int file_same(orch_store *st, const struct orch_walk_value *v)
{
    struct orch_root_sig now;
    const bool unread = orch_root_sig_unread(&v->stored);
    int now_rc = orch_file_sig(v->value, false, &now);
    if (now_rc == 0 && v->stored.known && !unread && now.size == v->stored.size &&
        now.mtime_ns == v->stored.mtime_ns)
        return 1; /* the same size and time: taken as the same bytes */
    if (now_rc == 0)
        now_rc = orch_file_sig(v->value, true, &now);
    if (now_rc == -EINTR)
        return now_rc; /* stopped by a signal: nothing learnt of the file */
    if (now_rc < 0)
        return unread; /* unreadable then and now: the same */
    if (v->stored.known && strcmp(now.hash, v->stored.hash) != 0)
        return 0;
    int rc = orch_store_root_sig(st, v->match, &now); /* touched, same bytes */
    return rc < 0 ? rc : 1;
}

/* update.h. */
int orch_update_rescan(orch_store *st, struct orch_walk *walk, int64_t update)
{
    struct orch_walk_value v;
    int64_t changed = 0;
    int rc;
    while ((rc = orch_walk_next(walk, &v)) == 1) {
        if (!v.match) {
            if ((rc = orch_walk_claim(walk, v.key)) < 0)
                return rc;
            continue;
        }
        if (v.match_position != v.position &&
            (rc = orch_store_root_position(st, v.match, v.position)) < 0)
            return rc;
        int same = orch_walk_files(walk) ? file_same(st, &v) : orch_walk_line_same(&v);
        if (same < 0)
            return same;
        if (same)
            continue;
        changed++;
        rc = orch_store_root_retire(st, v.match, "changed");
        if (rc == 0)
            rc = orch_walk_claim(walk, v.key);
        if (rc < 0)
            return rc;
    }
    if (rc < 0)
        return rc;
    struct retire_ctx c = {st, 0};
    if ((rc = orch_walk_unmatched(walk, retire_removed, &c)) < 0)
        return rc;
    /* New roots are counted as they are admitted (admit_chunk). */
    return orch_store_update_count(st, update, 0, changed, c.removed);
}

/* The check of a resume with no update under way: the source must still give the job's
 * live roots, in their order, before anything new (it may give more after them: roots an
 * interrupted run had not admitted yet, or files added since, which are admitted). Any
 * other change is for `orch update`, which says what it retires. */
static int resume_check(struct orch_walk *walk, const char *dir)
{
    struct orch_walk_value v;
    int rc;
    for (;;) {
        int left = orch_walk_unmatched_left(walk);
        if (left <= 0)
            return left;
        if ((rc = orch_walk_next(walk, &v)) < 0)
            return rc;
        if (rc == 0 || !v.match || !v.in_order)
            break;
        if (!orch_walk_files(walk) && !orch_walk_line_same(&v))
            return orch_error_set(ORCH_EMISMATCH,
                                  "source %s changed since the job last read it: the line of "
                                  "key \"%s\" is not the one the job has; `orch update %s` "
                                  "takes new, changed and removed inputs, or restore the source",
                                  orch_walk_port(walk), v.key, dir);
    }
    char *was = NULL;
    if (rc == 1) {
        if (!(was = strdup(v.key)))
            return -ENOMEM;
        /* The job's next root: the value just read may have matched a later one. */
        orch_walk_rewind(walk, false);
        int64_t skip = v.position;
        while (skip-- > 0 && orch_walk_next(walk, &v) == 1) {
        }
    }
    const char *next = orch_walk_unmatched_left(walk) == 1 ? orch_walk_head_key(walk) : NULL;
    rc = orch_error_set(ORCH_EMISMATCH,
                        "source %s changed since the job last read it: %s%s%s%s%s%s; `orch "
                        "update %s` takes new, changed and removed inputs, or restore the "
                        "source",
                        orch_walk_port(walk), was ? "it gives \"" : "", was ? was : "",
                        was ? "\" where the job has " : "it ends where the job has ",
                        next ? "\"" : "", next ? next : "more roots", next ? "\"" : "", dir);
    free(was);
    return rc;
}

int orch_update_sources_check(orch_store *st, const orch_plan *plan, const char *base_dir,
                              const char *dir)
{
    int64_t update;
    bool scanned;
    int rc = orch_store_update_open(st, &update, &scanned, NULL);
    for (int i = 0; rc == 0 && !update && i < orch_plan_nsources(plan); i++) {
        if (orch_plan_source(plan, i)->retired)
            continue;
        struct orch_walk *w = NULL;
        if ((rc = orch_walk_open(st, plan, i, base_dir, &w)) == 0)
            rc = resume_check(w, dir);
        orch_walk_free(w);
    }
    return rc;
}

int orch_update_replan(orch_store *st, int64_t update)
{
    return orch_store_root_replan(st, update);
}
