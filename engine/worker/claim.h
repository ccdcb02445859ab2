/* claim.h — the claim word a local worker shares with its pool (pool.h,
 * orch_pool_take_back): who decides whether a batch queued behind a running one is
 * started by the worker or taken back by the pool, with no message between them.
 *
 * One 64-bit word in a memfd of its own (named ORCH_CLAIM_NAME), made by the pool for each
 * process and mapped by both; the worker finds it on ORCH_WORKER_CLAIM_FD. Each batch a
 * process is sent has a seq, from 1, in the order sent (the worker counts the batches it
 * reads, so both sides agree). The word's low 32 bits are the seq of the last batch the
 * worker started, its high 32 bits the seq of the last batch the pool took back; both
 * sides change it by compare-and-swap only, so a batch is either started or taken back,
 * never both:
 *   - the worker, before it starts batch n, sets the low half to n, unless the high half
 *     is n: that batch is skipped (not run, not answered);
 *   - the pool takes back batch n, the last it sent, only while the low half is the seq of
 *     the batch just before it (the worker runs that one): so the worker has read every
 *     batch before n, and the high half, which holds only the last take back, names the
 *     one it reads next whenever it names one the worker has not passed.
 * A worker without a word (a remote one: its batches cross the network) starts every
 * batch, and none of its batches is taken back.
 *
 * A second word says when the worker began its last batch: the seq's low 24 bits over 40
 * bits of CLOCK_MONOTONIC milliseconds, stored once the claim is made. A batch queued
 * behind another starts when the worker has written the first one's report; the driver
 * learns that only when it reads the report, later by whatever it was doing meanwhile, so
 * it dates the batch's attempts by this word (orch_pool_began). */
#ifndef ORCH_CLAIM_H
#define ORCH_CLAIM_H

#include <stdbool.h>
#include <stdint.h>

#define ORCH_CLAIM_NAME "orch-claim"

/* Pool side: a new word, zero, mapped at *word; returns its memfd (close-on-exec: give it
 * to the worker as ORCH_WORKER_CLAIM_FD, then close it), or -1 (no word: *word is NULL). */
int orch_claim_new(uint64_t **word);
/* Unmaps a word (NULL: nothing). */
void orch_claim_free(uint64_t *word);
/* Takes back batch `seq` if the worker has started batch `ahead` and not `seq`. */
bool orch_claim_take(uint64_t *word, uint32_t ahead, uint32_t seq);
/* Whether the worker has begun batch `seq`, and then when (*mono_ms, CLOCK_MONOTONIC). */
bool orch_claim_began(const uint64_t *word, uint32_t seq, int64_t *mono_ms);

/* Worker side: the word on descriptor fd when fd is a claim memfd (closed then), else
 * NULL. */
uint64_t *orch_claim_map(int fd);
/* Whether the worker starts its batch n (false: the pool took it back), and notes when.
 * Always true without a word. */
bool orch_claim_start(uint64_t *word, uint32_t n);

#endif
