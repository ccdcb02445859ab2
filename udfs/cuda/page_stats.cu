/* page_stats.cu — the GPU path of page_stats: the sums of page_stats_cuda.h in one kernel.
 *
 * Built by nvcc into orch_page_stats_cuda.so (udfs/cuda/meson.build) with the CUDA runtime
 * linked statically, so that loading it needs only the driver (libcuda.so.1).
 *
 * The kernel: each block takes rows y = blockIdx.x, blockIdx.x + gridDim.x, ...; its threads
 * walk a row in strides of blockDim.x (a multiple of 32, and every thread of the block runs
 * the same iterations, so whole warps stay converged for the warp intrinsics). Per pixel:
 *   - histogram, in shared memory, warp-aggregated: lanes holding the same value (on a page,
 *     most of them hold white) add once through their leader (__match_any_sync), instead of
 *     32 atomics on one address;
 *   - ink bounding box, per thread, then min/max over the warp and the block;
 *   - the Laplacian's sum and sum of squares, per thread in 64 bits, then over the warp.
 * At the end each block adds its partial sums to the result with 64-bit atomics. Every sum
 * is an integer, so the result does not depend on the order of the atomics: it is the
 * CPU path's, bit for bit.
 */
#include "page_stats_cuda.h"

#include <cuda_runtime.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT const uint32_t orch_page_stats_cuda_abi = ORCH_PAGE_STATS_CUDA_ABI;

namespace {

constexpr int kThreads = 256; /* a multiple of 32 */

struct ctx {
    int device;
    int blocks_max; /* resident blocks: a grid larger than this only queues */
    uint8_t *px;    /* device copy of the image, cap bytes */
    size_t cap;
    orch_page_stats_acc *acc; /* device */
    char name[256];
};

int fail(cudaError_t e, const char *what, char *err, size_t errsz)
{
    snprintf(err, errsz, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemNotReady:
    case cudaErrorCompatNotSupportedOnDevice:
        return -ENODEV;
    case cudaErrorMemoryAllocation:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

__device__ inline unsigned long long warp_sum(unsigned long long v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ inline unsigned warp_min(unsigned v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = min(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

__device__ inline unsigned warp_max(unsigned v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = max(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

__global__ void __launch_bounds__(kThreads)
sums(const uint8_t *__restrict__ px, uint32_t w, uint32_t h, uint32_t t,
     orch_page_stats_acc *acc)
{
    __shared__ unsigned hist[256];
    __shared__ unsigned bx0, by0, bx1, by1;
    __shared__ unsigned long long lsum, lsq;
    for (unsigned i = threadIdx.x; i < 256; i += blockDim.x)
        hist[i] = 0;
    if (threadIdx.x == 0) {
        bx0 = by0 = 0xffffffffu;
        bx1 = by1 = 0;
        lsum = lsq = 0;
    }
    __syncthreads();

    const unsigned lane = threadIdx.x & 31u;
    unsigned x0 = 0xffffffffu, y0 = 0xffffffffu, x1 = 0, y1 = 0;
    long long ls = 0;
    unsigned long long lq = 0;
    for (uint32_t y = blockIdx.x; y < h; y += gridDim.x) {
        const uint8_t *row = px + (size_t)y * w;
        const bool inner_row = y > 0 && y + 1 < h;
        const uint8_t *up = inner_row ? row - w : row, *down = inner_row ? row + w : row;
        for (uint32_t xb = 0; xb < w; xb += blockDim.x) {
            const uint32_t x = xb + threadIdx.x;
            const bool in = x < w;
            const unsigned v = in ? row[x] : 256u; /* 256: no pixel, a value of its own */
            const unsigned peers = __match_any_sync(0xffffffffu, v);
            if (!in)
                continue;
            if (lane == (unsigned)(__ffs(peers) - 1))
                atomicAdd(&hist[v], (unsigned)__popc(peers));
            if (v < t) {
                x0 = min(x0, x);
                x1 = max(x1, x);
                y0 = min(y0, y);
                y1 = max(y1, y);
            }
            if (inner_row && x > 0 && x + 1 < w) {
                const int l = 4 * (int)v - row[x - 1] - row[x + 1] - up[x] - down[x];
                ls += l;
                lq += (unsigned long long)(l * l);
            }
        }
    }

    /* Two's complement: adding the signed sums as unsigned 64-bit values wraps to the
     * bits of the signed total (page_stats_cuda.h). */
    const unsigned long long ws = warp_sum((unsigned long long)ls), wq = warp_sum(lq);
    const unsigned wx0 = warp_min(x0), wy0 = warp_min(y0), wx1 = warp_max(x1),
                   wy1 = warp_max(y1);
    if (lane == 0) {
        atomicAdd(&lsum, ws);
        atomicAdd(&lsq, wq);
        atomicMin(&bx0, wx0);
        atomicMin(&by0, wy0);
        atomicMax(&bx1, wx1);
        atomicMax(&by1, wy1);
    }
    __syncthreads();
    for (unsigned i = threadIdx.x; i < 256; i += blockDim.x)
        if (hist[i] != 0)
            atomicAdd((unsigned long long *)&acc->hist[i], (unsigned long long)hist[i]);
    if (threadIdx.x == 0) {
        atomicAdd((unsigned long long *)&acc->lap_sum, lsum);
        atomicAdd((unsigned long long *)&acc->lap_sq, lsq);
        atomicMin(&acc->ink_x0, bx0);
        atomicMin(&acc->ink_y0, by0);
        atomicMax(&acc->ink_x1, bx1);
        atomicMax(&acc->ink_y1, by1);
    }
}

} // namespace

EXPORT int orch_page_stats_cuda_open(void **out, char *err, size_t errsz)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return fail(e, "no usable CUDA device: cudaGetDeviceCount", err, errsz);
    if (n < 1) {
        snprintf(err, errsz, "no CUDA device is visible");
        return -ENODEV;
    }
    ctx *c = (ctx *)calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(err, errsz, "out of memory");
        return -ENOMEM;
    }
    int sms = 0, per_sm = 0;
    cudaDeviceProp prop;
    if ((e = cudaSetDevice(0)) != cudaSuccess ||
        (e = cudaFree(0)) != cudaSuccess || /* makes the context now, not at the 1st page */
        (e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0)) != cudaSuccess ||
        (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sums, kThreads, 0)) !=
            cudaSuccess ||
        (e = cudaMalloc((void **)&c->acc, sizeof *c->acc)) != cudaSuccess) {
        int rc = fail(e, "cannot start on CUDA device 0", err, errsz);
        free(c);
        return rc;
    }
    c->blocks_max = sms * (per_sm > 0 ? per_sm : 1);
    snprintf(c->name, sizeof c->name, "%s", prop.name);
    *out = c;
    return 0;
}

EXPORT int orch_page_stats_cuda_run(void *vc, const uint8_t *px, uint32_t w, uint32_t h,
                                    uint32_t t, orch_page_stats_acc *acc, char *err,
                                    size_t errsz)
{
    ctx *c = (ctx *)vc;
    const size_t n = (size_t)w * h;
    cudaError_t e;
    if (n > c->cap) {
        cudaFree(c->px);
        c->px = NULL;
        c->cap = 0;
        if ((e = cudaMalloc((void **)&c->px, n)) != cudaSuccess)
            return fail(e, "cudaMalloc of the image", err, errsz);
        c->cap = n;
    }
    orch_page_stats_acc zero;
    memset(&zero, 0, sizeof zero);
    zero.ink_x0 = zero.ink_y0 = 0xffffffffu;
    if ((e = cudaMemcpy(c->px, px, n, cudaMemcpyHostToDevice)) != cudaSuccess ||
        (e = cudaMemcpy(c->acc, &zero, sizeof zero, cudaMemcpyHostToDevice)) != cudaSuccess)
        return fail(e, "copying the image to the GPU", err, errsz);
    const unsigned blocks = h < (uint32_t)c->blocks_max ? h : (unsigned)c->blocks_max;
    sums<<<blocks, kThreads>>>(c->px, w, h, t, c->acc);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return fail(e, "launching the kernel", err, errsz);
    if ((e = cudaMemcpy(acc, c->acc, sizeof *acc, cudaMemcpyDeviceToHost)) != cudaSuccess)
        return fail(e, "the kernel or the copy of its result", err, errsz);
    return 0;
}

EXPORT const char *orch_page_stats_cuda_name(void *vc)
{
    return ((ctx *)vc)->name;
}

EXPORT void orch_page_stats_cuda_close(void *vc)
{
    ctx *c = (ctx *)vc;
    if (c == NULL)
        return;
    cudaFree(c->px);
    cudaFree(c->acc);
    free(c);
}
