/* source.c — walking a source of root entities by key (source.h). */
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orch_error.h"
#include "sha256.h"
#include "support.h"

enum { PAGE = 512 }; /* live roots read from the store at a time */

/* A live root read ahead from the store, in position order. */
struct live {
    int64_t entity, position;
    struct orch_root_sig sig;
    char *key;
};

struct orch_walk {
    orch_store *store;
    const struct orch_source *src;
    const char *port;
    int domain;
    char *prefix; /* base_dir + '/': stripped from a files() path to make its key */
    size_t prefix_len;
    /* the listing */
    glob_t g;
    bool globbed;
    FILE *lines;
    char *line;
    size_t line_cap;
    int64_t next; /* position of the next value */
    /* the value handed out last */
    char *key;
    size_t key_cap;
    char *cand;
    size_t cand_cap;
    /* live roots in position order, read a page at a time after (last_pos, last_id) */
    struct live page[PAGE];
    int npage, ipage;
    int64_t last_pos, last_id;
    bool store_done; /* no live root after the page */
    /* files() of a domain with no root at all when the walk began: every path is a new
     * key (a listing has no repeats, and the walk admits each once), so none is looked up:
     * a look-up was a third of what admitting a root costs. */
    bool fresh;
    /* lines() of a domain with no root when the walk began: a line's key can only be one
     * this walk admitted, so a key the Bloom filter of the admitted keys has never seen is
     * not looked up (the look-up was 3% of a no-op grain's instructions, a root making 3
     * grains). A false positive costs the look-up, nothing else. */
    uint64_t *bloom; /* BLOOM_BITS bits, NULL when not in use */
    /* live roots matched by this walk, by entity id */
    uint8_t *seen;
    size_t seen_bytes;
    /* keys claimed by values not in the store yet: an open-addressing set */
    char **claims;
    size_t nclaims, cclaims;
};

/* ---- the set of matched entities ----------------------------------------------------- */

static bool seen_get(const struct orch_walk *w, int64_t e)
{
    size_t i = (size_t)e >> 3;
    return i < w->seen_bytes && (w->seen[i] >> (e & 7) & 1);
}

static int seen_set(struct orch_walk *w, int64_t e)
{
    size_t i = (size_t)e >> 3;
    if (i >= w->seen_bytes) {
        size_t n = w->seen_bytes ? w->seen_bytes : 4096;
        while (n <= i)
            n *= 2;
        uint8_t *p = realloc(w->seen, n);
        if (!p)
            return orch_error_set(-ENOMEM, "source %s: out of memory", w->port);
        memset(p + w->seen_bytes, 0, n - w->seen_bytes);
        w->seen = p;
        w->seen_bytes = n;
    }
    w->seen[i] |= (uint8_t)(1u << (e & 7));
    return 0;
}

/* ---- the set of claimed keys --------------------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* ---- the Bloom filter of admitted keys (lines(), a domain with no root at the start) -- */

#define BLOOM_BITS ((uint64_t)1 << 23) /* 1 MiB: 2% false positives at a million keys */
#define BLOOM_K 4

/* The k-th bit of key (double hashing of one 64-bit hash). */
static uint64_t bloom_bit(uint64_t h, int k)
{
    uint64_t h2 = (h >> 32) | 1;
    return (h + (uint64_t)k * h2 * UINT64_C(0x9e3779b97f4a7c15)) & (BLOOM_BITS - 1);
}

static void bloom_add(struct orch_walk *w, const char *key)
{
    uint64_t h = hash_str(key);
    for (int k = 0; k < BLOOM_K; k++) {
        uint64_t b = bloom_bit(h, k);
        w->bloom[b >> 6] |= UINT64_C(1) << (b & 63);
    }
}

static bool bloom_may_have(const struct orch_walk *w, const char *key)
{
    uint64_t h = hash_str(key);
    for (int k = 0; k < BLOOM_K; k++) {
        uint64_t b = bloom_bit(h, k);
        if (!(w->bloom[b >> 6] >> (b & 63) & 1))
            return false;
    }
    return true;
}

static bool claimed(const struct orch_walk *w, const char *key)
{
    if (w->nclaims == 0)
        return false;
    for (size_t i = hash_str(key) & (w->cclaims - 1);; i = (i + 1) & (w->cclaims - 1)) {
        if (!w->claims[i])
            return false;
        if (strcmp(w->claims[i], key) == 0)
            return true;
    }
}

static int claim_insert(char **tab, size_t cap, char *key)
{
    for (size_t i = hash_str(key) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!tab[i]) {
            tab[i] = key;
            return 0;
        }
}

int orch_walk_claim(struct orch_walk *w, const char *key)
{
    /* A listing has no repeats: only a line can take a key another value wants. */
    if (w->src->kind == ORCH_SOURCE_FILES || claimed(w, key))
        return 0;
    if (w->bloom)
        bloom_add(w, key);
    if ((w->nclaims + 1) * 2 > w->cclaims) { /* keep the table at most half full */
        size_t cap = w->cclaims ? w->cclaims * 2 : 64;
        char **tab = calloc(cap, sizeof *tab);
        if (!tab)
            return orch_error_set(-ENOMEM, "source %s: out of memory", w->port);
        for (size_t i = 0; i < w->cclaims; i++)
            if (w->claims[i])
                claim_insert(tab, cap, w->claims[i]);
        free(w->claims);
        w->claims = tab;
        w->cclaims = cap;
    }
    char *copy = strdup(key);
    if (!copy)
        return orch_error_set(-ENOMEM, "source %s: out of memory", w->port);
    claim_insert(w->claims, w->cclaims, copy);
    w->nclaims++;
    return 0;
}

void orch_walk_claims_clear(struct orch_walk *w)
{
    for (size_t i = 0; i < w->cclaims; i++) {
        free(w->claims[i]);
        w->claims[i] = NULL;
    }
    w->nclaims = 0;
}

int orch_walk_admitted(struct orch_walk *w, int64_t e)
{
    return seen_set(w, e);
}

/* ---- the live roots, a page at a time -------------------------------------------------- */

static void page_clear(struct orch_walk *w)
{
    for (int i = 0; i < w->npage; i++)
        free(w->page[i].key);
    w->npage = w->ipage = 0;
}

static int page_add(void *ctx, const struct orch_root_row *r)
{
    struct orch_walk *w = ctx;
    struct live *l = &w->page[w->npage];
    if (!(l->key = strdup(r->key)))
        return orch_error_set(-ENOMEM, "source %s: out of memory", w->port);
    l->entity = r->entity;
    l->position = r->position;
    l->sig = r->sig;
    w->npage++;
    w->last_pos = r->position;
    w->last_id = r->entity;
    return 0;
}

/* The next live root that this walk has not matched, or NULL when there is none. */
static int head(struct orch_walk *w, struct live **out)
{
    *out = NULL;
    for (;;) {
        while (w->ipage < w->npage && seen_get(w, w->page[w->ipage].entity))
            w->ipage++;
        if (w->ipage < w->npage) {
            *out = &w->page[w->ipage];
            return 0;
        }
        if (w->store_done)
            return 0;
        page_clear(w);
        int n = orch_store_root_page(w->store, w->domain, w->last_pos, w->last_id, PAGE,
                                     page_add, w);
        if (n < 0)
            return n;
        if (n < PAGE)
            w->store_done = true;
    }
}

int orch_walk_unmatched_left(struct orch_walk *w)
{
    struct live *h;
    int rc = head(w, &h);
    return rc < 0 ? rc : h != NULL;
}

int orch_walk_unmatched(struct orch_walk *w, int (*fn)(void *ctx, int64_t e, const char *key),
                        void *ctx)
{
    for (;;) {
        struct live *h;
        int rc = head(w, &h);
        if (rc < 0 || !h)
            return rc;
        /* Marked first: fn may change the root (retire it), and the walk must move on. */
        if ((rc = seen_set(w, h->entity)) < 0 || (rc = fn(ctx, h->entity, h->key)) != 0)
            return rc;
    }
}

/* ---- the listing ----------------------------------------------------------------------- */

static void listing_close(struct orch_walk *w)
{
    if (w->globbed)
        globfree(&w->g);
    w->globbed = false;
    if (w->lines)
        fclose(w->lines);
    w->lines = NULL;
}

/* The directory that glob() could not read, and why: glob_error's record, for the
 * message. One walk lists at a time (the driver is one thread). */
static char glob_failed_dir[512];
static int glob_failed_errno;

static int glob_error(const char *path, int err)
{
    snprintf(glob_failed_dir, sizeof glob_failed_dir, "%s", path);
    glob_failed_errno = err;
    return 1; /* stop: GLOB_ERR */
}

static int listing_open(struct orch_walk *w)
{
    listing_close(w);
    if (w->src->kind == ORCH_SOURCE_FILES) {
        glob_failed_dir[0] = '\0';
        glob_failed_errno = 0;
        int g = glob(w->src->arg, GLOB_ERR, glob_error, &w->g);
        w->globbed = g == 0;
        if (g != 0 && g != GLOB_NOMATCH) {
            int err = glob_failed_errno ? glob_failed_errno : g == GLOB_NOSPACE ? ENOMEM : EIO;
            return orch_error_set(-EIO, "source %s: cannot list files(\"%s\"): %s%s%s",
                                  w->port, w->src->arg, glob_failed_dir,
                                  glob_failed_dir[0] ? ": " : "", strerror(err));
        }
    } else {
        return orch_source_lines_open(w->src->arg, w->port, &w->lines);
    }
    return 0;
}

/* source.h. O_NONBLOCK: opening a FIFO for reading would wait for a writer; a regular
 * file's reads never wait, and the flag is cleared for the stream all the same. */
int orch_source_lines_open(const char *path, const char *port, FILE **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    int rc = fd < 0 || fstat(fd, &st) != 0 ? -errno : 0;
    if (rc == 0 && !S_ISREG(st.st_mode))
        rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
    if (rc == 0 && fcntl(fd, F_SETFL, 0) != 0)
        rc = -errno;
    if (rc == 0 && !(*out = fdopen(fd, "r")))
        rc = -errno;
    if (rc == 0)
        return 0;
    if (fd >= 0)
        close(fd);
    return orch_error_set(rc, "source %s: lines(\"%s\"): %s", port, path,
                          rc == -EINVAL ? "not a regular file" : strerror(-rc));
}

/* The next value of the listing: a pointer valid until the next call, or NULL at its end
 * (or on a read error: *err). */
static const char *listing_next(struct orch_walk *w, size_t *len, int *err)
{
    *err = 0;
    if (w->src->kind == ORCH_SOURCE_FILES) {
        if (!w->globbed || (size_t)w->next >= w->g.gl_pathc)
            return NULL;
        const char *v = w->g.gl_pathv[w->next];
        *len = strlen(v);
        return v;
    }
    ssize_t n = getline(&w->line, &w->line_cap, w->lines);
    if (n < 0) {
        if (ferror(w->lines))
            *err = orch_error_set(-EIO, "source %s: lines(\"%s\"): read error", w->port,
                                  w->src->arg);
        return NULL;
    }
    /* A line ends at \n or \r\n (a file written on Windows gives the same values); a lone
     * \r elsewhere is part of the line. The value may hold NUL bytes: len is its length. */
    if (n > 0 && w->line[n - 1] == '\n') {
        w->line[--n] = '\0';
        if (n > 0 && w->line[n - 1] == '\r')
            w->line[--n] = '\0';
    }
    *len = (size_t)n;
    return w->line;
}

/* ---- keys ------------------------------------------------------------------------------ */

static int text_fit(char **p, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    char *q = realloc(*p, c);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

/* The base key of value v: a files() path without the base directory's prefix; a line
 * as it is, except that keys are text (NUL-terminated in state.db and in messages) while
 * a line may hold NUL bytes, so each NUL byte shows as the two characters `\0`. The
 * mapping is not one-to-one (a line holding a backslash and a 0 gets the same base key);
 * the `#n` rule keeps the keys distinct anyway. */
static int base_key(struct orch_walk *w, const char *v, size_t len)
{
    if (w->src->kind == ORCH_SOURCE_FILES) {
        if (w->prefix_len && len > w->prefix_len && memcmp(v, w->prefix, w->prefix_len) == 0) {
            v += w->prefix_len;
            len -= w->prefix_len;
        }
        if (text_fit(&w->key, &w->key_cap, len + 1) < 0)
            return -ENOMEM;
        memcpy(w->key, v, len);
        w->key[len] = '\0';
        return 0;
    }
    size_t nuls = 0;
    for (size_t i = 0; i < len; i++)
        nuls += v[i] == '\0';
    if (text_fit(&w->key, &w->key_cap, len + nuls + 1) < 0)
        return -ENOMEM;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] == '\0') {
            w->key[o++] = '\\';
            w->key[o++] = '0';
        } else {
            w->key[o++] = v[i];
        }
    }
    w->key[o] = '\0';
    return 0;
}

/* source.h: the driver's stop flag, read by the long loops below. */
static const volatile sig_atomic_t *stop_flag;

void orch_source_stop_on(const volatile sig_atomic_t *flag)
{
    stop_flag = flag;
}

static bool stop_asked(void)
{
    return stop_flag && *stop_flag;
}

int orch_walk_next(struct orch_walk *w, struct orch_walk_value *v)
{
    int err;
    size_t len = 0;
    if (stop_asked())
        return orch_error_set(-EINTR, "source %s: interrupted", w->port);
    const char *val = listing_next(w, &len, &err);
    if (!val)
        return err;
    memset(v, 0, sizeof *v);
    v->value = val;
    v->len = len;
    v->position = w->next++;
    if (base_key(w, val, len) < 0)
        return orch_error_set(-ENOMEM, "source %s: out of memory", w->port);
    size_t blen = strlen(w->key);
    /* The first candidate not taken by an earlier value of this walk: taken by a claim
     * (a new root not stored yet) or by a live root that an earlier value matched. */
    for (long n = 1;; n++) {
        const char *cand = w->key;
        if (n > 1) {
            if (text_fit(&w->cand, &w->cand_cap, blen + 24) < 0)
                return orch_error_set(-ENOMEM, "source %s: out of memory", w->port);
            snprintf(w->cand, w->cand_cap, "%s#%ld", w->key, n);
            cand = w->cand;
        }
        if (w->fresh) {
            v->revision = 1;
            v->key = w->key;
            return 1;
        }
        if (claimed(w, cand))
            continue;
        struct live *h;
        int rc = head(w, &h);
        if (rc < 0)
            return rc;
        v->revision = 1;
        if (h && strcmp(h->key, cand) == 0) { /* the next live root: no look-up */
            v->match = h->entity;
            v->match_position = h->position;
            v->stored = h->sig;
            v->in_order = true;
        } else if (!w->bloom || bloom_may_have(w, cand)) {
            struct orch_root_row r;
            if ((rc = orch_store_root_find(w->store, w->domain, cand, &r, &v->revision)) < 0)
                return rc;
            if (rc == 1 && seen_get(w, r.entity))
                continue;
            if (rc == 1) {
                v->match = r.entity;
                v->match_position = r.position;
                v->stored = r.sig;
            }
        }
        if (v->match && (rc = seen_set(w, v->match)) < 0)
            return rc;
        if (n > 1) { /* the candidate becomes the key */
            if (text_fit(&w->key, &w->key_cap, strlen(w->cand) + 1) < 0)
                return orch_error_set(-ENOMEM, "source %s: out of memory", w->port);
            strcpy(w->key, w->cand);
        }
        v->key = w->key;
        return 1;
    }
}

/* ---- open, rewind, free ---------------------------------------------------------------- */

int orch_walk_open(orch_store *store, const orch_plan *plan, int source, const char *base_dir,
                   struct orch_walk **out)
{
    *out = NULL;
    struct orch_walk *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->store = store;
    w->src = orch_plan_source(plan, source);
    w->domain = w->src->domain;
    w->port = orch_plan_port(plan, w->src->port)->qualified;
    size_t bl = base_dir ? strlen(base_dir) : 0;
    if (!(w->prefix = malloc(bl + 2))) {
        free(w);
        return -ENOMEM;
    }
    memcpy(w->prefix, base_dir ? base_dir : "", bl);
    if (bl && base_dir[bl - 1] != '/')
        w->prefix[bl++] = '/';
    w->prefix[bl] = '\0';
    w->prefix_len = bl;
    int rc = orch_walk_rewind(w, true);
    if (rc < 0) {
        orch_walk_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int orch_walk_rewind(struct orch_walk *w, bool relist)
{
    page_clear(w);
    w->last_pos = -1;
    w->last_id = 0;
    w->store_done = false;
    w->next = 0;
    if (w->seen)
        memset(w->seen, 0, w->seen_bytes);
    orch_walk_claims_clear(w);
    bool any = true;
    int rc = orch_store_root_any(w->store, w->domain, &any);
    if (rc < 0)
        return rc;
    w->fresh = !any && w->src->kind == ORCH_SOURCE_FILES;
    free(w->bloom);
    w->bloom = NULL;
    if (!any && w->src->kind != ORCH_SOURCE_FILES) /* NULL (no memory): every key looked up */
        w->bloom = calloc(BLOOM_BITS / 64, sizeof *w->bloom);
    if (relist || (!w->globbed && !w->lines))
        return listing_open(w);
    if (w->lines && fseek(w->lines, 0, SEEK_SET) != 0)
        return orch_error_set(-errno, "source %s: lines(\"%s\"): %s", w->port, w->src->arg,
                              strerror(errno));
    return 0;
}

void orch_walk_free(struct orch_walk *w)
{
    if (!w)
        return;
    listing_close(w);
    page_clear(w);
    orch_walk_claims_clear(w);
    free(w->claims);
    free(w->bloom);
    free(w->seen);
    free(w->line);
    free(w->key);
    free(w->cand);
    free(w->prefix);
    free(w);
}

const char *orch_walk_head_key(struct orch_walk *w)
{
    struct live *h;
    return head(w, &h) == 0 && h ? h->key : NULL;
}

const char *orch_walk_port(const struct orch_walk *w)
{
    return w->port;
}

bool orch_walk_files(const struct orch_walk *w)
{
    return w->src->kind == ORCH_SOURCE_FILES;
}

/* ---- line signatures ------------------------------------------------------------------- */

/* Whether value v of lines() is its key's text: it is unless the key has a `#n` suffix or
 * the line holds a NUL byte (shown as `\0`). */
static bool line_is_key(const struct orch_walk_value *v)
{
    return strlen(v->key) == v->len && memcmp(v->key, v->value, v->len) == 0;
}

bool orch_walk_line_sig(const struct orch_walk_value *v, struct orch_root_sig *sig)
{
    memset(sig, 0, sizeof *sig);
    if (line_is_key(v))
        return false;
    sig->known = true;
    sig->size = (int64_t)v->len;
    orch_sha256_hex(v->value, v->len, sig->hash);
    return true;
}

bool orch_walk_line_same(const struct orch_walk_value *v)
{
    struct orch_root_sig now;
    if (!orch_walk_line_sig(v, &now))
        return !v->stored.known;
    return v->stored.known && now.size == v->stored.size &&
           strcmp(now.hash, v->stored.hash) == 0;
}

/* ---- file signatures ------------------------------------------------------------------- */

/* Makes *sig an unreadable file's signature (source.h) and returns rc. */
static int unread(struct orch_root_sig *sig, int rc)
{
    memset(sig, 0, sizeof *sig);
    sig->known = true;
    return rc;
}

int orch_file_sig(const char *path, bool hash, struct orch_root_sig *sig)
{
    memset(sig, 0, sizeof *sig);
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return unread(sig, -errno);
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode)) /* a directory, a FIFO, a device: no bytes of its own */
        rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
    if (rc < 0) {
        close(fd);
        return unread(sig, rc);
    }
    sig->known = true;
    sig->size = (int64_t)st.st_size;
    sig->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    if (hash) {
        struct orch_sha256 c;
        orch_sha256_init(&c);
        char buf[65536];
        ssize_t n;
        while (!stop_asked() && (n = read(fd, buf, sizeof buf)) > 0)
            orch_sha256_update(&c, buf, (size_t)n);
        if (stop_asked()) {
            close(fd);
            return orch_error_set(-EINTR, "%s: interrupted", path);
        }
        if (n < 0)
            rc = -errno;
        orch_sha256_final_hex(&c, sig->hash);
    }
    close(fd);
    return rc < 0 ? unread(sig, rc) : 0;
}

static const char stale_hash[] = "stale";

void orch_root_sig_stale(struct orch_root_sig *sig)
{
    memset(sig, 0, sizeof *sig);
    sig->known = true;
    sig->size = -1;
    sig->mtime_ns = -1;
    snprintf(sig->hash, sizeof sig->hash, "%s", stale_hash);
}

bool orch_file_moved(const char *path, const struct orch_root_sig *stored)
{
    if (!stored->known || strcmp(stored->hash, stale_hash) == 0)
        return false;
    struct orch_root_sig now;
    int rc = orch_file_sig(path, false, &now);
    if (orch_root_sig_unread(stored))
        return rc == 0;
    return rc < 0 || now.size != stored->size || now.mtime_ns != stored->mtime_ns;
}
