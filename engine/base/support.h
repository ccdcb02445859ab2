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

/* Makes room for `need` elements of `size` bytes in *arr (capacity *cap). 0 or -ENOMEM. */
int orch__grow(void *arr, int *cap, int need, size_t size);

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

/* Writes bytes as a JSON string, quoted and escaped; bytes that are not valid UTF-8
 * become U+FFFD (callers that must keep them encode the value otherwise, as base64). */
void orch__json_string(FILE *out, const void *data, size_t n);

#endif
