/* source.h — walking a source of root entities, each value with its key and the live root
 * it is, if any (DESIGN §9, §10).
 *
 * A root is identified by its key, not by its place in the source: a files() root's key is
 * its path relative to the job's base directory (the pipeline's), a lines() root's key is
 * its line, with `#2`, `#3`, ... appended to the second, third, ... occurrence of a line
 * (the first of `v`, `v#2`, `v#3`, ... that no earlier value of this walk took). A walk
 * reads the source in order and matches each value against the job's live roots: first
 * against the next live root in position order (the common case, a source that did not
 * change: no look-up), else by a look-up of its key. Each live root matches at most once
 * per walk (a bitmap of entity ids).
 *
 * Used by engine/update/rescan.c: the rescan of an update (retire what changed or vanished)
 * and the check of a resume (the source still gives the job's roots, in order); and by the
 * driver's admission (engine/driver/admit.c: values that match no live root are new
 * roots). */
#ifndef ORCH_SOURCE_H
#define ORCH_SOURCE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orch_facts.h"
#include "orch_plan.h"

struct orch_walk;

struct orch_walk_value {
    const char *value; /* the bytes handed to UDFs (may hold NUL bytes for lines()) */
    size_t len;
    const char *key;   /* its key */
    int64_t position;  /* its index in the source, from 0 */
    int64_t match;     /* the live root it is; 0: none (a new key) */
    bool in_order;     /* it matched the next unmatched live root in position order */
    int64_t match_position;
    int64_t revision;  /* no match: the revision a new root of this key is */
    struct orch_root_sig stored; /* the matched root's signature */
};

/* Opens the file of a lines() source for reading, *out a stream the caller fcloses. A file
 * that is not regular (a FIFO, a device) is refused, never waited on: -EINVAL, or -EISDIR
 * for a directory; every error is set with the source's port in its message. */
int orch_source_lines_open(const char *path, const char *port, FILE **out);

/* Opens a walk over source `source` of plan: lists the files or opens the file of lines
 * (an error with the source's port in the message when it cannot). base_dir: the job's
 * (job.base_dir; "" keeps absolute keys). */
int orch_walk_open(orch_store *store, const orch_plan *plan, int source, const char *base_dir,
                   struct orch_walk **out);
void orch_walk_free(struct orch_walk *w);

/* Starts the walk again from the first value, with no match made; `relist` reads the
 * source again (a rescan), otherwise the same listing is walked. */
int orch_walk_rewind(struct orch_walk *w, bool relist);

/* The next value: 1 (*v filled, valid until the next call), 0 at the end, or an error. */
int orch_walk_next(struct orch_walk *w, struct orch_walk_value *v);

/* Holds `key` as taken by a value not in the store yet (a root to be admitted), so that a
 * later repeat of its line gets the next `#n`. */
int orch_walk_claim(struct orch_walk *w, const char *key);
/* Root e was admitted (by the caller, in the store): it counts as matched, and the claims
 * are dropped (the store now answers for them). */
int orch_walk_admitted(struct orch_walk *w, int64_t e);
void orch_walk_claims_clear(struct orch_walk *w);

/* Whether live roots remain that this walk has not matched (in position order): 1, 0, or
 * an error. */
int orch_walk_unmatched_left(struct orch_walk *w);
/* Calls fn(ctx, entity, key) for each live root the walk has not matched, in position
 * order; stops at fn's non-zero return. */
int orch_walk_unmatched(struct orch_walk *w, int (*fn)(void *ctx, int64_t e, const char *key),
                        void *ctx);

/* The key of the next live root the walk has not matched, after orch_walk_unmatched_left
 * said there is one: valid until the walk moves. */
const char *orch_walk_head_key(struct orch_walk *w);

/* The port the source feeds ("pdf.path"), for messages. */
const char *orch_walk_port(const struct orch_walk *w);
bool orch_walk_files(const struct orch_walk *w);

/* The signature of a lines() value v (its length and SHA-256) when its key does not say
 * it (true), else none (false, sig->known false): a root's line is the one of its key
 * unless it has a signature. */
bool orch_walk_line_sig(const struct orch_walk_value *v, struct orch_root_sig *sig);
/* Whether lines() value v, matched by key, is the line its root was admitted with
 * (v->stored). A root of a job older than line signatures, whose key does not say its
 * line, is taken as changed. */
bool orch_walk_line_same(const struct orch_walk_value *v);

/* The signature of the regular file at path: size and modification time from stat(2),
 * and, when `hash`, the SHA-256 of its bytes. -errno when it cannot be read; -EISDIR for a
 * directory and -EINVAL for another file that is not regular (a FIFO, a device, a socket),
 * which it never waits on. On an error *sig is an unreadable file's signature: known, no
 * hash (orch_root_sig_unread); but -EINTR (the stop flag, orch_source_stop_on) says
 * nothing of the file, and the caller stops. */
int orch_file_sig(const char *path, bool hash, struct orch_root_sig *sig);

/* The stop flag the sources read (NULL: none): once *flag is non-zero (a signal handler
 * sets it), a walk's next value and a file signature's next block of bytes end with
 * -EINTR, so that a long scan stops where it is. The driver sets it while it runs. */
void orch_source_stop_on(const volatile sig_atomic_t *flag);

/* Whether the file at path may no longer hold the bytes of `stored`, its root's stored
 * signature: its size, its time or whether it can be read differ from those stored (stat
 * only, no read). False for a root with no signature, or one already stale. */
bool orch_file_moved(const char *path, const struct orch_root_sig *stored);

/* Makes *sig the stale signature: that of a root whose file changed while it was read,
 * which no file matches (size -1, hash "stale"), so that the next update finds the root
 * changed and reads its file again. */
void orch_root_sig_stale(struct orch_root_sig *sig);

/* Whether sig, as stored, is a file's that could not be read (a directory's too). */
static inline bool orch_root_sig_unread(const struct orch_root_sig *sig)
{
    return sig->known && !sig->hash[0];
}

#endif
