/* sha256.h — SHA-256 (FIPS 180-4), for the plan hash.
 *
 * Incremental: orch_sha256_init, any number of orch_sha256_update, orch_sha256_final.
 * orch_sha256_final_hex ends as orch_sha256_final does, writing 64 lowercase hex digits and
 * a NUL; orch_sha256_hex is its one-shot form.
 * No allocation; a context is a plain struct the caller owns.
 */
#ifndef ORCH_SHA256_H
#define ORCH_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct orch_sha256 {
    uint32_t h[8];
    uint64_t len;          /* bytes hashed so far */
    unsigned char buf[64]; /* pending partial block */
    size_t nbuf;
};

void orch_sha256_init(struct orch_sha256 *c);
void orch_sha256_update(struct orch_sha256 *c, const void *data, size_t n);
void orch_sha256_final(struct orch_sha256 *c, unsigned char digest[32]);
/* hex receives 64 lowercase hex digits and a terminating NUL. */
void orch_sha256_final_hex(struct orch_sha256 *c, char hex[65]);
void orch_sha256_hex(const void *data, size_t n, char hex[65]);

/* HMAC-SHA256 (RFC 2104) of msg under key: how a remote worker proves it holds the job's
 * secret without sending it (engine/worker/launch.h). */
void orch_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
                      unsigned char mac[32]);

#endif
