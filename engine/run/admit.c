/* admit.c — the sources of root entities, admitted within the grain budget (run_int.h). */
#include "run_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "orch_error.h"
#include "orch_facts.h"

#define ADMIT_CHUNK 256 /* roots admitted per turn at most: keeps a turn short */

/* The key of a root whose value is v (len bytes): the value itself, except that keys are
 * text (NUL-terminated in state.db and in messages) while a lines() value may hold NUL
 * bytes, so each NUL byte shows as the two characters `\0` in the key. The value keeps
 * its bytes exactly. The mapping is not one-to-one (a line holding a backslash and a 0
 * gets the same key); keys are not unique anyway (README, entity_key). Returns a string
 * to free, or NULL when out of memory. */
static char *root_key(const char *v, size_t len)
{
    size_t nuls = 0;
    for (size_t i = 0; i < len; i++)
        nuls += v[i] == '\0';
    char *key = malloc(len + nuls + 1);
    if (!key)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] == '\0') {
            key[o++] = '\\';
            key[o++] = '0';
        } else {
            key[o++] = v[i];
        }
    }
    key[o] = '\0';
    return key;
}

/* The next value of source s: a pointer valid until the next call, or NULL at its end. */
static const char *source_next(struct orch_sched_source *s, size_t *len)
{
    if (s->src->kind == ORCH_SOURCE_FILES) {
        if (!s->globbed || (size_t)s->next >= s->g.gl_pathc)
            return NULL;
        const char *v = s->g.gl_pathv[s->next];
        *len = strlen(v);
        return v;
    }
    ssize_t n = getline(&s->line, &s->line_cap, s->lines);
    if (n < 0)
        return NULL;
    /* A line ends at \n or \r\n (a file written on Windows gives the same values); a lone
     * \r elsewhere is part of the line. The value may hold NUL bytes: len is its length. */
    if (n > 0 && s->line[n - 1] == '\n') {
        s->line[--n] = '\0';
        if (n > 0 && s->line[n - 1] == '\r')
            s->line[--n] = '\0';
    }
    *len = (size_t)n;
    return s->line;
}

struct check_root {
    struct orch_sched_source *s;
    const char *port;
};

/* The job's next root is `key`: the source must give the same value next. */
static int check_root(void *ctx, const char *key)
{
    struct check_root *c = ctx;
    struct orch_sched_source *s = c->s;
    size_t len;
    const char *v = source_next(s, &len);
    char *now = NULL;
    if (v && !(now = root_key(v, len)))
        return orch_error_set(-ENOMEM, "source %s: out of memory", c->port);
    int rc = 0;
    if (!now || strcmp(now, key) != 0)
        rc = orch_error_set(ORCH_EMISMATCH,
                            "source %s changed since the job started: root %lld is \"%s\", "
                            "the source now gives %s%s%s; restore the source, or start a "
                            "new job",
                            c->port, (long long)s->next, key, now ? "\"" : "",
                            now ? now : "nothing", now ? "\"" : "");
    free(now);
    if (rc == 0)
        s->next++;
    return rc;
}

/* Opens source s and moves its cursor past the roots the job already has (a resumed job),
 * checking on the way that the source still gives the same values in the same order:
 * roots are numbered by position, so a source that changed under a job would silently
 * give later roots the wrong ordinals. */
static int source_open(struct orch_sched *d, struct orch_sched_source *s)
{
    const char *port = orch_plan_port(d->plan, s->src->port)->qualified;
    if (s->src->kind == ORCH_SOURCE_FILES) {
        int g = glob(s->src->arg, GLOB_ERR, NULL, &s->g);
        s->globbed = g == 0;
        if (g != 0 && g != GLOB_NOMATCH)
            return orch_error_set(-EIO, "source %s: cannot list files(\"%s\")", port,
                                  s->src->arg);
    } else if (!(s->lines = fopen(s->src->arg, "r"))) {
        return orch_error_set(-errno, "source %s: lines(\"%s\"): %s", port, s->src->arg,
                              strerror(errno));
    }
    s->next = 0;
    struct check_root ctx = {s, port};
    return orch_store_root_keys(d->job->store, s->domain, check_root, &ctx);
}

int orch_sched_sources_open(struct orch_sched *d)
{
    for (int i = 0; i < d->nsources; i++) {
        d->sources[i].src = orch_plan_source(d->plan, i);
        d->sources[i].domain = d->sources[i].src->domain;
        int rc = source_open(d, &d->sources[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void orch_sched_sources_free(struct orch_sched *d)
{
    for (int i = 0; d->sources && i < d->nsources; i++) {
        if (d->sources[i].globbed)
            globfree(&d->sources[i].g);
        if (d->sources[i].lines)
            fclose(d->sources[i].lines);
        free(d->sources[i].line);
    }
    free(d->sources);
    d->sources = NULL;
    d->nsources = 0;
}

/* Admits up to ADMIT_CHUNK root entities of source s: their values are written to LMDB
 * in one transaction, then published in the turn's store transaction. A failure leaves
 * the source's cursor past values that were not committed: the run stops, and resume
 * recomputes the cursor from the roots the store holds. */
static int admit_chunk(struct orch_sched *d, struct orch_sched_source *s)
{
    char *vals[ADMIT_CHUNK], *keys[ADMIT_CHUNK];
    struct orch_iov iov[ADMIT_CHUNK];
    uint64_t ids[ADMIT_CHUNK];
    int64_t first = s->next;
    int n = 0, rc = 0;
    /* A chunk stops where its values would fill the byte budget, when they count (the
     * source's values are read by a statement, in a pipeline with outputs): one root at
     * least, so that admission always moves. */
    const int port = s->src->port;
    int64_t room = orch_prop_port_counted(d->prop, port)
                       ? d->max_live - orch_prop_live_bytes(d->prop)
                       : INT64_MAX;
    int64_t bytes = 0;
    while (n < ADMIT_CHUNK && (n == 0 || bytes < room)) {
        size_t len;
        const char *v = source_next(s, &len);
        if (!v) {
            s->exhausted = true;
            break;
        }
        /* The value's bytes as they are: a line may hold NUL bytes, so no string copy. */
        vals[n] = malloc(len + 1);
        keys[n] = vals[n] ? root_key(v, len) : NULL;
        if (!keys[n]) {
            free(vals[n]);
            rc = -ENOMEM;
            break;
        }
        memcpy(vals[n], v, len);
        vals[n][len] = '\0';
        bytes += (int64_t)len;
        iov[n].data = vals[n];
        iov[n].len = len;
        n++;
        s->next++;
    }
    if (rc == 0 && n > 0)
        rc = orch_payload_put_many(d->job->payloads, iov, (size_t)n, ids);
    if (rc == 0 && n > 0)
        rc = orch_sched_txn(d);
    for (int k = 0; k < n && rc == 0; k++)
        rc = orch_prop_admit_root(d->prop, s->domain, first + k, keys[k], ids[k], NULL);
    for (int k = 0; k < n; k++) {
        free(vals[k]);
        free(keys[k]);
    }
    return rc;
}

/* ---- the budgets ---------------------------------------------------------------------- */

/* A quarter of the memory, and half of the free space on the job's file system: live
 * intermediate payloads are read through the page cache by the workers that consume them
 * (memory), and they are written to JOB/payloads/ (disk), so either may be what runs out.
 * At least 64 MiB, so that a small machine still streams pages of a document. */
int64_t orch_sched_live_budget(const struct orch_sched *d)
{
    const int64_t floor = (int64_t)64 << 20;
    int64_t budget = INT64_MAX;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psize > 0)
        budget = (int64_t)pages * psize / 4;
    struct statvfs fs;
    if (statvfs(d->job->dir, &fs) == 0) {
        int64_t half = (int64_t)(fs.f_bavail / 2) * (int64_t)fs.f_frsize;
        if (half < budget)
            budget = half;
    }
    return budget > floor ? budget : floor;
}

bool orch_sched_tight(const struct orch_sched *d, bool *grains, bool *bytes)
{
    *grains = orch_prop_unsealed(d->prop) >= d->max_unsealed;
    *bytes = orch_prop_live_bytes(d->prop) >= d->max_live;
    return *grains || *bytes;
}

/* Admission (DESIGN §5): roots enter lazily, one chunk per source per turn (so that the
 * turn commits and the workers get going), and only while the unsealed grains and the
 * live intermediate bytes are under their budgets — or when nothing is unsealed at all:
 * bytes kept for a failed reader (reclaim.c) stay counted, and a budget full of them must
 * not stop a job that has nothing else to do (a chunk of roots then enters, the least
 * that keeps it going). Staged (driver.h), every root enters in the first turn, whatever
 * the budgets: the first calls are held until the sources are exhausted, so a budget would
 * wait on grains that wait on it (a deadlock), and chunks paced by turns would wait on
 * turns that nothing else makes. */
int orch_sched_admit(struct orch_sched *d)
{
    for (int i = 0; i < d->nsources; i++) {
        struct orch_sched_source *s = &d->sources[i];
        bool grains, bytes;
        if (s->exhausted || (!d->opts->staged && orch_sched_tight(d, &grains, &bytes) &&
                             orch_prop_unsealed(d->prop) > 0))
            continue;
        int rc;
        do {
            rc = admit_chunk(d, s);
        } while (rc == 0 && d->opts->staged && !s->exhausted);
        if (rc < 0)
            return rc;
    }
    return 0;
}

bool orch_sched_sources_done(const struct orch_sched *d)
{
    for (int i = 0; i < d->nsources; i++)
        if (!d->sources[i].exhausted)
            return false;
    return true;
}
