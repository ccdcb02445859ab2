/* stream.h — a worker's streaming expansions (DESIGN §5): the stream hook of its answer
 * collector (orch_udf_host.h, orch_udf_stream), which stores a record's complete children
 * and sends them to the driver in a CHUNK (wire.h) while the UDF's run() goes on.
 *
 * Payloads. DESIGN §6's "one LMDB write transaction per batch" is, for a streaming
 * expansion, one per chunk: each chunk's values are written in their own transaction
 * before the chunk is sent, and the report's outputs in one more after run() returns.
 * The batch's inputs are copied out of the store's read snapshot before run() and the
 * snapshot ends (orch_worker_stream_detach): a write that must grow the map cannot while
 * this process holds a reader. A chunk whose write fails all the same (the store is
 * full) is not sent: the collector then keeps every child of the batch and the report
 * carries them, stored or refused as without streaming.
 *
 * Backpressure. The chunk is written to the driver's socket with blocking writes: when
 * the driver stops reading this worker (its budgets are full, driver/admit.c), the socket
 * fills, the write waits, and the UDF with it.
 *
 * Only local workers of a plain expand stream: a remote worker (values mode) reports
 * every child at the end.
 */
#ifndef ORCH_WORKER_STREAM_H
#define ORCH_WORKER_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "orch_udf_host.h"
#include "pool.h"
#include "wire.h"

struct orch_payload;

/* One worker's streaming state. Zero-initialise; set the fields marked "set" once; `b`
 * before each run(); free with orch_worker_stream_free(). */
struct orch_worker_stream {
    int fd;                             /* set: the driver's socket */
    struct orch_payload *store;         /* set */
    const struct orch_wire_config *cfg; /* set */
    size_t max_value;                   /* set: the store's largest value */
    const struct orch_wire_batch *b;    /* the batch that runs */
    struct orch_wire_buf out;           /* private */
    uint64_t *ids, *sizes, *hash;       /* private: a chunk's, grown as needed */
    struct orch_iov *iov;
    struct orch_wire_failed_child *failed;
    char **msg;
    size_t cap_ids, cap_sizes, cap_iov, cap_hash, cap_failed, cap_msg;
};

/* The collector's hook (orch_udf_stream.flush): ctx is a struct orch_worker_stream. */
int orch_worker_stream_flush(void *ctx, const struct orch_udf_answers *a, size_t i, size_t n);

/* Gives collector a the hook with the default thresholds (orch_udf_host.h) when s's
 * call streams: a plain expand on a local worker. */
void orch_worker_stream_install(struct orch_worker_stream *s, struct orch_udf_answers *a);

/* The message of a child whose output p (from 0) is len bytes, over max: the same text in
 * a chunk and in a report, as the child's hash covers it. */
void orch_worker_too_big_msg(char *buf, size_t size, size_t p, size_t len, size_t max);

/* Copies the values at vals (the inputs of batch b, read in the payload store's snapshot)
 * into one allocation, *buf, and points them at the copies: the snapshot may then end
 * while run() reads them. 0 or -ENOMEM (nothing changed). Free *buf after the batch. */
int orch_worker_stream_detach(const struct orch_wire_batch *b, struct orch_udf_value *vals,
                              void **buf);

/* A plain expand's answers carry a hash of each child's values (wire.h): the driver keeps
 * those of children published while the expansion is open, and compares a replay's
 * children with them (DESIGN §4). Fills answers[i].hash for every OK answer with children
 * of collector ans, from one allocation, *out (NULL when none; the caller frees it);
 * failure(ctx, i, c) says why child c of record i failed, or NULL. 0 or -ENOMEM. */
int orch_worker_child_hashes(const struct orch_udf_answers *ans,
                             struct orch_wire_answer *answers,
                             const char *(*failure)(void *ctx, size_t i, size_t c), void *ctx,
                             uint64_t **out);

/* Writes len bytes at data to fd, blocking. 0 or -errno (EPIPE: the driver closed). */
int orch_worker_send(int fd, const void *data, size_t len);

void orch_worker_stream_free(struct orch_worker_stream *s);

#endif
