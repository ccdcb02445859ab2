/* claim.c — the claim word of a local worker and its pool (claim.h). */
#define _GNU_SOURCE
#include "claim.h"
#include "proc.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LOW ((uint64_t)UINT32_MAX)
/* The second word: a seq's low SEQ_BITS over TIME_BITS of monotonic milliseconds. */
#define TIME_BITS 40
#define TIME_MASK (((uint64_t)1 << TIME_BITS) - 1)
#define SEQ_MASK (((uint64_t)1 << (64 - TIME_BITS)) - 1)
#define WORDS 2

int orch_claim_new(uint64_t **word)
{
    *word = NULL;
    int fd = memfd_create(ORCH_CLAIM_NAME, MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    void *m = MAP_FAILED;
    if (ftruncate(fd, WORDS * sizeof **word) == 0)
        m = mmap(NULL, WORDS * sizeof **word, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        return -1;
    }
    *word = m;
    __atomic_store_n(*word, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(*word + 1, 0, __ATOMIC_SEQ_CST);
    return fd;
}

void orch_claim_free(uint64_t *word)
{
    if (word)
        munmap(word, WORDS * sizeof *word);
}

bool orch_claim_take(uint64_t *word, uint32_t ahead, uint32_t seq)
{
    uint64_t cur = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    do {
        if ((uint32_t)(cur & LOW) != ahead)
            return false; /* it started `seq`, or not yet the batch ahead */
    } while (!__atomic_compare_exchange_n(word, &cur, ((uint64_t)seq << 32) | (cur & LOW), false,
                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    return true;
}

uint64_t *orch_claim_map(int fd)
{
    char path[64], link[64], want[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    snprintf(want, sizeof want, "/memfd:%s", ORCH_CLAIM_NAME);
    if (n <= 0)
        return NULL;
    link[n] = '\0';
    if (strncmp(link, want, strlen(want)) != 0)
        return NULL;
    void *m = mmap(NULL, WORDS * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping stays; nothing the worker starts inherits the descriptor */
    return m == MAP_FAILED ? NULL : m;
}

bool orch_claim_start(uint64_t *word, uint32_t n)
{
    if (!word)
        return true;
    uint64_t cur = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    do {
        if ((uint32_t)(cur >> 32) == n)
            return false;
    } while (!__atomic_compare_exchange_n(word, &cur, (cur & ~LOW) | n, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST));
    uint64_t began = ((uint64_t)n & SEQ_MASK) << TIME_BITS |
                     ((uint64_t)orch_clock_mono_ms() & TIME_MASK);
    __atomic_store_n(word + 1, began, __ATOMIC_SEQ_CST);
    return true;
}

bool orch_claim_began(const uint64_t *word, uint32_t seq, int64_t *mono_ms)
{
    if (!word)
        return false;
    uint64_t v = __atomic_load_n(word + 1, __ATOMIC_SEQ_CST);
    if (v == 0 || (v >> TIME_BITS) != ((uint64_t)seq & SEQ_MASK))
        return false;
    *mono_ms = (int64_t)(v & TIME_MASK); /* CLOCK_MONOTONIC counts from boot: 40 bits hold it */
    return true;
}
