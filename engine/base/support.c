/* support.c — growable arrays, the string buffer, the arena and the string map. */
#include "support.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The capacity that cap grows to for need (cap < need <= max): need, but at least twice
 * cap and at least 8, as far as max allows. */
static size_t grown_cap(size_t cap, size_t need, size_t max)
{
    size_t ncap = cap > max / 2 ? max : cap * 2;
    if (ncap < 8)
        ncap = max < 8 ? max : 8;
    return ncap < need ? need : ncap;
}

int orch__grow_n(void *arr, size_t *cap, size_t need, size_t size)
{
    void **p = arr;
    assert(size > 0);
    if (need <= *cap)
        return 0;
    if (need > SIZE_MAX / size)
        return -ENOMEM;
    size_t ncap = grown_cap(*cap, need, SIZE_MAX / size);
    void *np = realloc(*p, ncap * size);
    if (!np)
        return -ENOMEM;
    *p = np;
    *cap = ncap;
    return 0;
}

int orch__grow(void *arr, int *cap, int need, size_t size)
{
    void **p = arr;
    assert(size > 0 && *cap >= 0);
    if (need < 0) /* n + 1 overflowed: never "room enough" */
        return -ENOMEM;
    if (need <= *cap)
        return 0;
    size_t max = SIZE_MAX / size < INT_MAX ? SIZE_MAX / size : INT_MAX;
    if ((size_t)need > max)
        return -ENOMEM;
    size_t ncap = grown_cap((size_t)*cap, (size_t)need, max);
    void *np = realloc(*p, ncap * size);
    if (!np)
        return -ENOMEM;
    *p = np;
    *cap = (int)ncap;
    return 0;
}

/* ---- buffer ---- */

static bool buf_reserve(struct orch__buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (extra > SIZE_MAX / 4 - b->len) {
        b->oom = true;
        return false;
    }
    if (b->len + extra + 1 <= b->cap)
        return true;
    if (orch__grow_n(&b->p, &b->cap, b->len + extra + 1, 1) < 0) {
        b->oom = true;
        return false;
    }
    return true;
}

void orch__buf_add(struct orch__buf *b, const void *data, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void orch__buf_puts(struct orch__buf *b, const char *s)
{
    orch__buf_add(b, s, strlen(s));
}

void orch__buf_putc(struct orch__buf *b, char c)
{
    orch__buf_add(b, &c, 1);
}

void orch__buf_vprintf(struct orch__buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        b->oom = true;
        return;
    }
    if (!buf_reserve(b, (size_t)n))
        return;
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void orch__buf_printf(struct orch__buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    orch__buf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *orch__buf_steal(struct orch__buf *b)
{
    if (!b->p)
        orch__buf_add(b, "", 0);
    char *p = b->oom ? NULL : b->p;
    if (p)
        b->p = NULL;
    orch__buf_free(b);
    return p;
}

void orch__buf_free(struct orch__buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- arena ---- */

struct orch__arena_chunk {
    struct orch__arena_chunk *next;
    size_t used, size;
    max_align_t data[];
};

#define ARENA_CHUNK 16384

void *orch__arena_alloc(struct orch__arena *a, size_t n)
{
    const size_t align = sizeof(max_align_t);
    n = (n + align - 1) / align * align;
    if (n == 0)
        n = align;
    struct orch__arena_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = n > ARENA_CHUNK / 2 ? n : ARENA_CHUNK;
        c = malloc(sizeof *c + size);
        if (!c)
            return NULL;
        c->size = size;
        c->used = 0;
        if (n > ARENA_CHUNK / 2 && a->head) {
            /* A big block gets a chunk of its own, kept behind the current one so the
             * current chunk's free space is not wasted. */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *orch__arena_strndup(struct orch__arena *a, const char *s, size_t n)
{
    char *p = orch__arena_alloc(a, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

char *orch__arena_strdup(struct orch__arena *a, const char *s)
{
    return orch__arena_strndup(a, s, strlen(s));
}

void orch__arena_free(struct orch__arena *a)
{
    struct orch__arena_chunk *c = a->head;
    while (c) {
        struct orch__arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

/* ---- map ---- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

int orch__map_get(const struct orch__map *m, const char *key)
{
    if (!m->cap)
        return -1;
    for (size_t i = hash_str(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return -1;
        if (strcmp(m->keys[i], key) == 0)
            return m->vals[i];
    }
}

static void map_insert(const char **keys, int *vals, size_t cap, const char *key, int val,
                       size_t *n)
{
    for (size_t i = hash_str(key) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (!keys[i]) {
            keys[i] = key;
            vals[i] = val;
            (*n)++;
            return;
        }
        if (strcmp(keys[i], key) == 0) {
            vals[i] = val;
            return;
        }
    }
}

int orch__map_put(struct orch__map *m, const char *key, int val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 16;
        const char **keys = calloc(ncap, sizeof *keys);
        int *vals = calloc(ncap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return -ENOMEM;
        }
        size_t n = 0;
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i])
                map_insert(keys, vals, ncap, m->keys[i], m->vals[i], &n);
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = ncap;
        m->n = n;
    }
    map_insert(m->keys, m->vals, m->cap, key, val, &m->n);
    return 0;
}

void orch__map_free(struct orch__map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

bool orch__is_name(const char *s)
{
    size_t i = 0;
    if (!s || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return false;
    for (; s[i]; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return i <= ORCH__NAME_MAX;
}

size_t orch__utf8_len(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    unsigned cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* A JSON string; each byte that is not part of valid UTF-8 becomes the lone surrogate
 * U+DC00 + byte (PEP 383's "surrogateescape"): two different byte strings never give the
 * same JSON text, and the bytes can be recovered (Python: s.encode("utf-8",
 * "surrogateescape")). U+FFFD lost them: two file names that differed only in such bytes
 * exported the same key. */
void orch__json_string(FILE *out, const void *data, size_t n)
{
    const unsigned char *s = data;
    fputc('"', out);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t k = orch__utf8_len(s + i, n - i);
            if (k == 0) {
                fprintf(out, "\\udc%02x", c);
                i++;
            } else {
                fwrite(s + i, 1, k, out);
                i += k;
            }
            continue;
        }
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c == '\r')
            fputs("\\r", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
        i++;
    }
    fputc('"', out);
}

/* ---- sorting ids ---- */

static void swap_u64(uint64_t *a, uint64_t *b)
{
    uint64_t t = *a;
    *a = *b;
    *b = t;
}

static void insertion_u64(uint64_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

static void sift_u64(uint64_t *v, size_t root, size_t n)
{
    for (size_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && v[child + 1] > v[child])
            child++;
        if (v[root] >= v[child])
            return;
        swap_u64(&v[root], &v[child]);
    }
}

static void heap_u64(uint64_t *v, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_u64(v, i, n);
    for (size_t end = n; end-- > 1;) {
        swap_u64(&v[0], &v[end]);
        sift_u64(v, 0, end);
    }
}

static void quick_u64(uint64_t *v, size_t n, int depth)
{
    while (n > 16) {
        if (depth-- == 0) {
            heap_u64(v, n);
            return;
        }
        /* Median of three into v[0], then Hoare's partition around it. */
        size_t m = n / 2;
        if (v[m] < v[0])
            swap_u64(&v[m], &v[0]);
        if (v[n - 1] < v[0])
            swap_u64(&v[n - 1], &v[0]);
        if (v[n - 1] < v[m])
            swap_u64(&v[n - 1], &v[m]);
        swap_u64(&v[0], &v[m]);
        uint64_t pivot = v[0];
        size_t i = 0, j = n;
        for (;;) {
            while (v[++i] < pivot)
                ;
            while (v[--j] > pivot)
                ;
            if (i >= j)
                break;
            swap_u64(&v[i], &v[j]);
        }
        swap_u64(&v[0], &v[j]);
        /* Recurse into the smaller side, loop on the larger: the stack stays O(log n). */
        if (j < n - j - 1) {
            quick_u64(v, j, depth);
            v += j + 1;
            n -= j + 1;
        } else {
            quick_u64(v + j + 1, n - j - 1, depth);
            n = j;
        }
    }
    insertion_u64(v, n);
}

void orch__sort_u64(uint64_t *v, size_t n)
{
    size_t i = 1;
    while (i < n && v[i - 1] <= v[i])
        i++;
    if (i >= n)
        return; /* in order already: the common case */
    int depth = 0;
    for (size_t k = n; k > 1; k >>= 1)
        depth += 2;
    quick_u64(v, n, depth);
}
