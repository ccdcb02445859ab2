/* orch_le.h — the little-endian codec of orch's two binary protocols: the driver <-> worker
 * frames (engine/worker/wire.h) and the exec() protocol (udfs/EXEC_PROTOCOL.md).
 *
 * Both protocols write every integer little-endian, whatever the host's byte order, so
 * that a frame means the same on any machine. These functions are the one place that
 * says how: byte k of an n-byte integer is (v >> 8k) & 0xff.
 *
 * Rules. Each put writes exactly n bytes at p and each get reads exactly n bytes from p:
 * the caller has checked that they are there (room to write, bytes left to read). p needs
 * no alignment. Nothing here allocates, fails or keeps a pointer. Header-only: each
 * function is a few shifts that the compiler turns into one load or store.
 */
#ifndef ORCH_LE_H
#define ORCH_LE_H

#include <stddef.h>
#include <stdint.h>

/* Writes the low n bytes of v at p, least significant first (n <= 8). */
static inline void orch__le_put(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Reads an n-byte little-endian integer at p (n <= 8). */
static inline uint64_t orch__le_get(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline void orch__le_put32(uint8_t *p, uint32_t v)
{
    orch__le_put(p, v, 4);
}

static inline void orch__le_put64(uint8_t *p, uint64_t v)
{
    orch__le_put(p, v, 8);
}

static inline uint32_t orch__le_get32(const uint8_t *p)
{
    return (uint32_t)orch__le_get(p, 4);
}

static inline uint64_t orch__le_get64(const uint8_t *p)
{
    return orch__le_get(p, 8);
}

#endif
