/* rekey.c — brings a job made before schema 13 to the key rule of DESIGN §9, and writes
 * its root rows (migrations/0013_roots.sql says why this part of the migration is C).
 *
 * Such a job keyed a files() root by its absolute path and repeated a repeated line's key.
 * The rule: a files() key is the path relative to the job's base directory (the pipeline's,
 * which the job did not record: it is found by compiling the job's copy of the pipeline,
 * JOB/pipeline.orch, and comparing a relative glob as written with the same glob as the
 * plan stored it, resolved), and the second, third, ... occurrence of a line gets `#2`,
 * `#3`, .... A root whose key changes passes the change to every entity under it (their
 * keys are stored whole: migrations/0002_entity_keys.sql). All in one transaction, which
 * also sets job.base_dir: a crash leaves the job as it was, and the next open does it
 * again. */
#define _GNU_SOURCE /* asprintf */
#include "update.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "orch_facts.h"
#include "orch_keys.h"
#include "orch_lang.h"

/* The directory the job's relative paths were resolved against, malloc'd; "" when it
 * cannot be known (no relative files() glob, and the pipeline was named by a relative
 * path): keys then stay absolute. */
static char *find_base(const orch_plan *plan, const char *dir, const char *pipeline_path)
{
    char *path = NULL;
    orch_plan *written = NULL;
    char *base = NULL;
    if (asprintf(&path, "%s/pipeline.orch", dir) >= 0 &&
        orch_lang_compile_written(path, &written) == 0 &&
        orch_plan_nsources(written) == orch_plan_nsources(plan)) {
        for (int i = 0; i < orch_plan_nsources(written) && !base; i++) {
            const struct orch_source *w = orch_plan_source(written, i);
            const struct orch_source *r = orch_plan_source(plan, i);
            if (w->kind != ORCH_SOURCE_FILES || w->written[0] == '/')
                continue;
            /* w->arg is "/" and the glob as written, normalised as r->arg was. */
            size_t wl = strlen(w->arg), rl = strlen(r->arg);
            if (rl >= wl && strcmp(r->arg + rl - wl, w->arg) == 0)
                base = rl > wl ? strndup(r->arg, rl - wl) : strdup("/");
        }
    }
    orch_plan_free(written);
    free(path);
    if (base)
        return base;
    const char *pp = pipeline_path;
    const char *slash = strrchr(pp, '/');
    if (pp[0] == '/' && slash)
        return slash == pp ? strdup("/") : strndup(pp, (size_t)(slash - pp));
    return strdup("");
}

/* The new key of a root whose old key is `old`, written into buf (cap bytes). */
static int new_key(orch_store *store, int domain, bool files, const char *prefix,
                   const char *old, char **buf)
{
    size_t pl = strlen(prefix);
    if (files) {
        const char *k = pl && strncmp(old, prefix, pl) == 0 && old[pl] ? old + pl : old;
        return (*buf = strdup(k)) ? 0 : -ENOMEM;
    }
    /* A line: the first of old, old#2, old#3, ... that no earlier root took (their rows
     * are written as they are renamed, so the look-up sees them). */
    for (long n = 1;; n++) {
        char *cand = NULL;
        if (n == 1 ? !(cand = strdup(old)) : asprintf(&cand, "%s#%ld", old, n) < 0)
            return -ENOMEM;
        struct orch_root_row r;
        int64_t next;
        int rc = orch_store_root_find(store, domain, cand, &r, &next);
        if (rc == 0) {
            *buf = cand;
            return 0;
        }
        free(cand);
        if (rc < 0)
            return rc;
    }
}

static int rekey_source(orch_store *store, const orch_plan *plan, int i, const char *prefix)
{
    const struct orch_source *src = orch_plan_source(plan, i);
    struct orch_root_key *roots;
    size_t n;
    int rc = orch_store_root_keys(store, src->domain, &roots, &n);
    for (size_t k = 0; k < n && rc == 0; k++) {
        char *key = NULL;
        rc = new_key(store, src->domain, src->kind == ORCH_SOURCE_FILES, prefix, roots[k].key,
                     &key);
        bool renamed = rc == 0 && strcmp(key, roots[k].key) != 0;
        if (renamed)
            rc = orch_store_key_prefix_set(store, roots[k].id, roots[k].key, key);
        /* A line whose key gained a `#n` does not say it: its signature does (source.h),
         * from the old key, which was the line. */
        struct orch_root_sig sig = {.known = false};
        if (rc == 0 && renamed && src->kind == ORCH_SOURCE_LINES) {
            struct orch_walk_value v = {
                .value = roots[k].key, .len = strlen(roots[k].key), .key = key};
            orch_walk_line_sig(&v, &sig);
        }
        if (rc == 0)
            rc = orch_store_root_put(store, roots[k].id, src->domain, 1, (int64_t)k,
                                     sig.known ? &sig : NULL);
        free(key);
    }
    orch_root_keys_free(roots, n);
    return rc;
}

int orch_update_rekey(orch_store *store, const orch_plan *plan, const char *dir,
                      const char *pipeline_path, char **base_dir)
{
    char *base = find_base(plan, dir, pipeline_path), *prefix = NULL;
    if (!base || asprintf(&prefix, "%s%s", base,
                          base[0] && base[strlen(base) - 1] != '/' ? "/" : "") < 0) {
        free(base);
        return orch_error_set(-ENOMEM, "out of memory");
    }
    int rc = orch_store_begin(store);
    for (int i = 0; i < orch_plan_nsources(plan) && rc == 0; i++)
        rc = rekey_source(store, plan, i, prefix);
    if (rc == 0)
        rc = orch_store_job_set_base_dir(store, base);
    if (rc == 0)
        rc = orch_store_commit(store);
    else if (orch_store_in_txn(store))
        orch_store_rollback(store);
    if (rc == 0)
        *base_dir = base;
    else
        free(base);
    free(prefix);
    return rc;
}
