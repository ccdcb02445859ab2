/* page_stats_cuda.h — the ABI between the page_stats built-in (udfs/page_stats.c) and its
 * GPU module, orch_page_stats_cuda.so (udfs/cuda/page_stats.cu, built by nvcc).
 *
 * orch never links the CUDA runtime: the module carries it (nvcc links cudart statically)
 * and is opened with dlopen() by a worker that was given a GPU, at page_stats' init. This
 * header is included by C (the host) and by CUDA C++ (the module), so it holds only plain
 * C types and functions with C linkage.
 *
 * What the module computes is `struct orch_page_stats_acc`, the integer sums from which
 * every statistic of page_stats is derived on the host by the same code for both paths
 * (orch_page_stats_format). Integer sums do not depend on the order in which they are
 * added, so the GPU path and the CPU path (orch_page_stats_cpu) give the same sums
 * bit for bit, and page_stats gives the same bytes on either: there is no tolerance to
 * state beyond "identical". Keep it so: a floating-point sum in a kernel would end that.
 *
 * The module exports, with C linkage and default visibility:
 *
 *   orch_page_stats_cuda_abi     const uint32_t, ORCH_PAGE_STATS_CUDA_ABI: read by the host
 *                                before any other symbol is used; a mismatch is refused.
 *   orch_page_stats_cuda_open    (ctx, err, errsz): picks device 0 of those visible (a
 *                                worker given several through CUDA_VISIBLE_DEVICES uses the
 *                                first) and makes a context. 0, or -ENODEV (no usable
 *                                device) or -EIO (any other CUDA error) with a message.
 *   orch_page_stats_cuda_run     (ctx, px, w, h, threshold, acc, err, errsz): the sums of
 *                                one w x h image of 8-bit pixels, row-major, no padding.
 *                                0, or -ENOMEM / -EIO with a message; *acc is then
 *                                unspecified. The caller keeps px; it is not retained.
 *   orch_page_stats_cuda_name    (ctx): the device's name, valid until close.
 *   orch_page_stats_cuda_close   (ctx): frees what open made. ctx may be NULL.
 *
 * A context is used by one thread at a time (one worker's state).
 */
#ifndef ORCH_PAGE_STATS_CUDA_H
#define ORCH_PAGE_STATS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ORCH_PAGE_STATS_CUDA_ABI 1u

/* The sums of one image, for a threshold t:
 *   hist[v]        the number of pixels of value v
 *   lap_sum/lap_sq the sum and the sum of squares of the 4-neighbour Laplacian
 *                  L = 4p - up - down - left - right over the interior pixels (those with
 *                  four neighbours: none when w < 3 or h < 3). lap_sum is kept as the
 *                  two's-complement bits of a signed sum, so that a GPU can add it with
 *                  unsigned 64-bit atomics; read it with (int64_t)lap_sum.
 *   ink_*          the bounding box (inclusive) of the pixels of value < t; when there is
 *                  none, ink_x0 = ink_y0 = UINT32_MAX and ink_x1 = ink_y1 = 0.
 * Bounds: w * h < 2^31 (the host refuses more), so every count fits and lap_sq, at most
 * 1020^2 a pixel, fits 64 bits. */
struct orch_page_stats_acc {
    uint64_t hist[256];
    uint64_t lap_sum;
    uint64_t lap_sq;
    uint32_t ink_x0, ink_y0, ink_x1, ink_y1;
};

typedef int (*orch_page_stats_cuda_open_fn)(void **ctx, char *err, size_t errsz);
typedef int (*orch_page_stats_cuda_run_fn)(void *ctx, const uint8_t *px, uint32_t w, uint32_t h,
                                           uint32_t threshold, struct orch_page_stats_acc *acc,
                                           char *err, size_t errsz);
typedef const char *(*orch_page_stats_cuda_name_fn)(void *ctx);
typedef void (*orch_page_stats_cuda_close_fn)(void *ctx);

#ifdef __cplusplus
}
#endif

#endif
