/* support.h — small internal helpers of the engine: growable arrays, a string buffer, an
 * arena and a string-to-index hash map. Internal names carry the `orch__` prefix.
 *
 * Memory rules. An arena owns every block it hands out until orch__arena_free(). A buffer
 * owns its bytes until orch__buf_free() or orch__buf_steal(). A map copies nothing: the
 * keys it is given must outlive it (callers keep them in an arena).
 *
 * Out of memory. The buffer records a failed allocation in `oom` and ignores further
 * appends, so a writer can append freely and check once at the end. Every other helper
 * returns -ENOMEM (or NULL) at once.
 */
#ifndef ORCH_SUPPORT_H
#define ORCH_SUPPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- defensive branches ---- */

/* Marks on a branch that correct code never takes, as SQLite's NEVER() and ALWAYS():
 *
 *     if (ORCH_NEVER(kind >= ORCH_FN__COUNT))   // the decoder refused it already
 *         return -EPROTO;
 *
 * says "this guards against a bug elsewhere; no input reaches it", so a reader does not
 * hunt for the test that covers it, and a duplicate check is told from a real one. With
 * asserts on (every build of this project: b_ndebug=false) the condition is asserted, so
 * a test that does reach the branch fails at once; under NDEBUG the branch stays as a
 * harmless way out. X is evaluated once either way. */
#ifdef NDEBUG
#define ORCH_NEVER(X) (X)
#define ORCH_ALWAYS(X) (X)
#else
#include <assert.h>
#define ORCH_NEVER(X) ((X) ? (assert(!"NEVER(" #X ")"), 1) : 0)
#define ORCH_ALWAYS(X) ((X) ? 1 : (assert(!"ALWAYS(" #X ")"), 0))
#endif

/* ---- growable arrays ---- */

/* Makes room for `need` elements of `size` (> 0) bytes in the malloc'd array *arr, whose
 * capacity is *cap elements (*arr NULL and *cap 0 for an empty array): when need > *cap,
 * reallocates *arr to max(need, 2 * *cap, 8) elements, so that the first growth can be
 * exact (a known size) and n appends one by one cost O(n).
 * The elements already there are kept; the new ones are uninitialised. Returns 0, or
 * -ENOMEM when realloc fails or need * size does not fit in a size_t; on failure *arr and
 * *cap are as they were (the caller still owns *arr and frees it). Use it for every
 * growing array, so that the overflow check is written once:
 *
 *     if (orch__grow_n(&v, &cap, n + 1, sizeof *v) < 0)
 *         return -ENOMEM;
 *     v[n++] = x;
 */
int orch__grow_n(void *arr, size_t *cap, size_t need, size_t size);
/* The same for a capacity kept in an int: also -ENOMEM when need < 0 (a count that
 * overflowed), and the capacity never passes INT_MAX. */
int orch__grow(void *arr, int *cap, int need, size_t size);

/* ---- sorting ids ---- */

/* Sorts n ids ascending, in place. glibc's qsort is a merge sort that copies through a
 * malloc'd buffer and calls a comparison per step: 0.8% of the driver's instructions in
 * the scheduler benchmark sorted the payload ids it frees, which arrive nearly in order. This
 * one returns after one pass over ids already in order, finishes short runs by insertion,
 * and otherwise is a quicksort that compares inline (median of three; heapsort past a
 * depth of 2 log n, so never quadratic). */
void orch__sort_u64(uint64_t *v, size_t n);

/* ---- string buffer ---- */
struct orch__buf {
    char *p; /* NUL-terminated when len > 0 or after any append */
    size_t len;
    size_t cap;
    bool oom;
};

void orch__buf_add(struct orch__buf *b, const void *data, size_t n);
void orch__buf_puts(struct orch__buf *b, const char *s);
void orch__buf_putc(struct orch__buf *b, char c);
void orch__buf_printf(struct orch__buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void orch__buf_vprintf(struct orch__buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Hands the bytes to the caller (free() them; never NULL unless oom) and resets b. */
char *orch__buf_steal(struct orch__buf *b);
void orch__buf_free(struct orch__buf *b);

/* ---- arena ---- */
struct orch__arena_chunk;
struct orch__arena {
    struct orch__arena_chunk *head;
};

void *orch__arena_alloc(struct orch__arena *a, size_t n); /* zeroed, aligned; NULL on OOM */
char *orch__arena_strdup(struct orch__arena *a, const char *s);
char *orch__arena_strndup(struct orch__arena *a, const char *s, size_t n);
void orch__arena_free(struct orch__arena *a);

/* ---- string -> int map (open addressing, linear probing) ---- */
struct orch__map {
    const char **keys;
    int *vals;
    size_t cap; /* power of two, or 0 */
    size_t n;
};

/* Returns the value of key, or -1. */
int orch__map_get(const struct orch__map *m, const char *key);
/* Sets key (which must stay valid) to val >= 0, replacing any value. 0 or -ENOMEM. */
int orch__map_put(struct orch__map *m, const char *key, int val);
void orch__map_free(struct orch__map *m);

/* True when s is a name of the language: [A-Za-z_][A-Za-z0-9_]*, at most ORCH__NAME_MAX
 * bytes. */
#define ORCH__NAME_MAX 128
bool orch__is_name(const char *s);

/* The length (1-4) of the valid UTF-8 sequence that starts s (n bytes available), or 0
 * when the bytes there are not valid UTF-8 (overlong forms and surrogates included). */
size_t orch__utf8_len(const unsigned char *s, size_t n);

/* Writes bytes as a JSON string, quoted and escaped; each byte that is not part of valid
 * UTF-8 becomes the lone surrogate \udcXX (U+DC00 + the byte: PEP 383's
 * "surrogateescape"), so distinct bytes give distinct text and can be recovered. Values
 * that are not UTF-8 are better exported as base64 (export's value_b64). */
void orch__json_string(FILE *out, const void *data, size_t n);

#endif
