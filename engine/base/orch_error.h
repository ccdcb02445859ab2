/* orch_error.h — error codes shared by every orch module, and the message that travels with them.
 *
 * Every orch function that can fail returns an int: 0 on success, a negative
 * ORCH_E* code or a negative errno value (-ENOMEM, -ENOSPC, ...) on failure. The
 * ORCH_E* codes live far below any errno value so the two never collide.
 *
 * A code says *what kind* of failure happened; the detail ("state.db: database disk
 * image is malformed") is kept in a per-thread buffer set by the code that noticed
 * the failure (orch_error_set) and read by whoever reports it (orch_error_detail).
 * Storage translates SQLite and LMDB errors into these codes exactly once, at its
 * boundary, and puts the library's own message into the detail.
 */
#ifndef ORCH_ERROR_H
#define ORCH_ERROR_H

#include <errno.h>

/* X(name, value, text): the one list from which the enum and orch_strerror are made. */
#define ORCH_ERRORS(X)                                                                        \
    X(ORCH_EDB, -10001, "database error")                                                    \
    X(ORCH_ECORRUPT, -10002, "job storage is corrupt")                                       \
    X(ORCH_ENEWER, -10003, "job was created by a newer version of orch")                     \
    X(ORCH_ENOTFOUND, -10004, "not found")                                                   \
    X(ORCH_ESYNTAX, -10005, "pipeline has errors")                                           \
    X(ORCH_EPLAN, -10006, "invalid plan")                                                    \
    X(ORCH_ELOCKED, -10007, "job is in use by another process")                             \
    X(ORCH_EMISMATCH, -10008, "job does not match its pipeline")                             \
    X(ORCH_EUSAGE, -10009, "invalid usage")                                                  \
    X(ORCH_EOLDER, -10010, "job was created by an older version of orch")                    \
    X(ORCH_ECONSTRAINT, -10011, "database constraint violated")

enum orch_error {
#define ORCH_ERROR_ENUM(name, value, text) name = value,
    ORCH_ERRORS(ORCH_ERROR_ENUM)
#undef ORCH_ERROR_ENUM
};

/* Returns a static, human-readable text for rc (an ORCH_E* code or a negative errno).
 * Never returns NULL. */
const char *orch_strerror(int rc);

/* Records the detail of a failure for this thread and returns rc, so that callers can
 * write `return orch_error_set(-ENOSPC, "payloads: map is full at %zu bytes", n);`.
 * The text is formatted into a fixed per-thread buffer (truncated at 1 KiB). */
int orch_error_set(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The detail recorded by the last orch_error_set() of this thread, or "" if none.
 * Valid until the next orch_error_set() or orch_error_clear() of this thread. */
const char *orch_error_detail(void);

/* Forgets this thread's detail. */
void orch_error_clear(void);

#endif
