/* page_stats.h — the core of the page_stats built-in: a page image in, its statistics out,
 * computed on the CPU or on a GPU, with the same bytes either way.
 *
 * Used by the built-in (builtins_gpu.c) and by the GPU check (udfs/cuda/page_stats_check.c,
 * run by scripts/gpu-check); it depends on nothing of orch but udfs/cuda/page_stats_cuda.h,
 * so that the check can be built with a plain `cc` where orch's own libraries are missing.
 *
 * ---- The steps ----------------------------------------------------------------------------
 *
 *   decode   a payload (a binary PGM, or with leptonica any image it reads: PNG, TIFF, JPEG,
 *            ...) into 8-bit gray pixels, row-major (orch_page_stats_decode).
 *   sum      the integer sums of struct orch_page_stats_acc (page_stats_cuda.h): on the CPU
 *            (orch_page_stats_cpu) or on a GPU through the CUDA module (orch_page_stats_gpu_*).
 *   format   the statistics as one line of JSON, derived from the sums by one function for
 *            both paths (orch_page_stats_format).
 *
 * ---- The statistics (the JSON object, keys in this order) --------------------------------
 *
 *   width, height   pixels
 *   mean, std       of the intensity (0 black .. 255 white), population std:
 *                   mean = S / N, std = sqrt(N*Q - S^2) / N with N pixels, S the sum and Q
 *                   the sum of squares of the values (exact integers); 4 decimals
 *   ink             the fraction of pixels darker than `threshold` (value < threshold);
 *                   6 decimals
 *   ink_bbox        [x0, y0, x1, y1], inclusive, of those pixels; null when there is none
 *   sharpness       the variance of the 4-neighbour Laplacian over the interior pixels (a
 *                   standard focus/blur measure: a blurred scan scores low); 0 when the
 *                   image is smaller than 3 x 3; 4 decimals
 *   hist            `bins` counts: value v falls in bin v * bins / 256 (integer division)
 *
 * Every number is computed from exact integer sums with correctly rounded IEEE double
 * operations (one conversion, sqrt, division) and printed with "%.4f"/"%.6f", so another
 * implementation (tests/e2e/page_stats.sh has one in Python) gives the same text.
 */
#ifndef ORCH_PAGE_STATS_H
#define ORCH_PAGE_STATS_H

#include "cuda/page_stats_cuda.h"

#include <stddef.h>
#include <stdint.h>

/* The largest image page_stats accepts, in pixels, whatever max_pixels says: it keeps every
 * per-block count of the GPU path within 32 bits and every sum within 64. */
#define ORCH_PAGE_STATS_PIXELS_MAX 2147483647u

/* A decoded image: w x h pixels at px, row-major, no padding. px points either into the
 * payload that was decoded (a PGM of maxval 255: no copy) or to `owned`. */
struct orch_page_stats_image {
    const uint8_t *px;
    uint32_t w, h;
    uint8_t *owned; /* malloc'd, or NULL */
};

/* Decodes the len bytes at data. A binary PGM ("P5", maxval 1..255; values are scaled to
 * 0..255 when maxval < 255) is read here; anything else goes to leptonica when orch was
 * built with it (pixReadMem, then pixConvertTo8), and is refused otherwise. An image of more
 * than max_pixels pixels is refused before it is decoded (its size comes from its header).
 * Returns 0 (free img with orch_page_stats_image_free), -EINVAL for a payload that is not
 * an image it can read (a message for the user in err: the record's RecordFailure), or
 * -ENOMEM. On failure img holds nothing to free. img->px may point into data: keep data
 * until the image is freed. */
int orch_page_stats_decode(const void *data, size_t len, uint64_t max_pixels,
                           struct orch_page_stats_image *img, char *err, size_t errsz);
void orch_page_stats_image_free(struct orch_page_stats_image *img);

/* The sums of a w x h image for ink threshold t (0..256), on this CPU. */
void orch_page_stats_cpu(const uint8_t *px, uint32_t w, uint32_t h, uint32_t t,
                         struct orch_page_stats_acc *acc);

/* Writes the JSON line (no newline) for the sums of a w x h image, NUL-terminated, into buf
 * of size bytes; bins is 1..256. ORCH_PAGE_STATS_JSON_MAX bytes always suffice. Returns
 * the length, or -ENOSPC when size is too small. */
#define ORCH_PAGE_STATS_JSON_MAX 4096
int orch_page_stats_format(const struct orch_page_stats_acc *acc, uint32_t w, uint32_t h,
                           uint32_t t, uint32_t bins, char *buf, size_t size);

/* ---- The GPU path ---------------------------------------------------------------------------
 *
 * The CUDA module is looked up at the path of orch_page_stats_gpu_set_module when that is set
 * and not empty (orch's workers: $ORCH_PAGE_STATS_CUDA, docs/configuration.md), else
 * where this build made it (udfs/cuda/orch_page_stats_cuda.so in the build directory, when
 * nvcc was found at configure time). It is loaded once per process and never unloaded: the
 * CUDA runtime inside it does not support being unloaded. Not thread-safe: open from one
 * thread (a worker's init). */
struct orch_page_stats_gpu;

/* The path the module is loaded from instead of this build's, for the whole process; NULL
 * or "": this build's. Set it before the first open; path must stay valid while the process
 * may open the module (the caller keeps it). */
void orch_page_stats_gpu_set_module(const char *path);

/* The path the module would be loaded from, or NULL when there is none (no nvcc at
 * configure time and none set). Static storage, or the set path. */
const char *orch_page_stats_gpu_module(void);

/* Loads the module and opens a context on the first visible device. Returns 0 and *g, or
 * -ENOENT (no module, or it cannot be loaded), -EINVAL (not a module of this ABI), -ENODEV
 * (no usable CUDA device), -EIO, -ENOMEM, with a message in err. */
int orch_page_stats_gpu_open(struct orch_page_stats_gpu **g, char *err, size_t errsz);

/* The device's name ("NVIDIA H200"), valid until orch_page_stats_gpu_close. */
const char *orch_page_stats_gpu_device(const struct orch_page_stats_gpu *g);

/* The sums of one image on the GPU. Returns 0, or -ENOMEM / -EIO with a message in err. */
int orch_page_stats_gpu_run(struct orch_page_stats_gpu *g, const uint8_t *px, uint32_t w,
                            uint32_t h, uint32_t t, struct orch_page_stats_acc *acc, char *err,
                            size_t errsz);

/* Frees the context (the module stays loaded). g may be NULL. */
void orch_page_stats_gpu_close(struct orch_page_stats_gpu *g);

#endif
