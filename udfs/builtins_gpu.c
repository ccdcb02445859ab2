/* builtins_gpu.c — the built-in page_stats (map): a page image in, its statistics out, as
 * one line of JSON, on a GPU when the worker was given one, else on the CPU.
 *
 *   name        ops   arguments                        what it does
 *   page_stats  map   threshold (0..256, default 128)  the statistics of page_stats.h of the
 *                     bins (1..256, default 16)        subject, a page image (PGM, or PNG
 *                     max_pixels (default 50000000)    and more with leptonica). A payload
 *                                                      that is not such an image, or one of
 *                                                      more than max_pixels pixels, is a
 *                                                      RecordFailure saying why.
 *
 * Which path: a worker runs the GPU path when it was given a GPU, that is when
 * CUDA_VISIBLE_DEVICES is set and not empty, which the scheduler does exactly for the
 * workers of a call with gpus > 0 (it sets it empty for the others). Such a worker's init
 * fails, with a message saying why, when the GPU path cannot start (no CUDA module in this
 * build, the module cannot be loaded, no usable device): it does not fall back to the CPU,
 * since the call holds GPUs from the budget, and a silent fallback would hide a broken
 * installation behind a pipeline that is merely slow. To run on the CPU, leave gpus out.
 * Both paths give the same bytes (page_stats_cuda.h says why). A CUDA error while a batch
 * runs is an attempt failure (the grains are retried), not a RecordFailure: it is the
 * device's fault, not the page's.
 */
#include "udf_int.h"
#include "page_stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

struct page_stats {
    struct orch_udf__base base;
    uint32_t threshold, bins;
    uint64_t max_pixels;
    struct orch_page_stats_gpu *gpu; /* NULL: the CPU path */
    char json[ORCH_PAGE_STATS_JSON_MAX];
};

static const char *const page_stats_args[] = {"threshold", "bins", "max_pixels", NULL};

static void page_stats_fini(void *state)
{
    struct page_stats *ps = state;
    orch_page_stats_gpu_close(ps->gpu);
    orch_udf__base_fini(ps);
}

/* Reads integer argument key into *out, refusing a value outside [lo, hi]. */
static int arg_in(const struct orch_udf_config *cfg, const char *key, uint64_t dflt,
                  uint64_t lo, uint64_t hi, uint64_t *out)
{
    int rc = orch_udf__arg_u64(cfg, "page_stats", key, dflt, out);
    if (rc == 0 && (*out < lo || *out > hi))
        rc = orch_udf_config_error(
            cfg, -EINVAL, "page_stats: argument %s must be in %llu..%llu, not %llu", key,
            (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)*out);
    return rc;
}

static int page_stats_init(const struct orch_udf_config *cfg, void **state)
{
    void *st;
    int rc = orch_udf__base_init(cfg, "page_stats", ORCH_UDF__OP(ORCH_UDF_OP_MAP),
                                 page_stats_args, sizeof(struct page_stats), &st);
    if (rc < 0)
        return rc;
    struct page_stats *ps = st;
    uint64_t t, bins;
    if ((rc = arg_in(cfg, "threshold", 128, 0, 256, &t)) < 0 ||
        (rc = arg_in(cfg, "bins", 16, 1, 256, &bins)) < 0 ||
        (rc = arg_in(cfg, "max_pixels", 50000000, 1, ORCH_PAGE_STATS_PIXELS_MAX,
                     &ps->max_pixels)) < 0)
        goto fail;
    ps->threshold = (uint32_t)t;
    ps->bins = (uint32_t)bins;
    const char *devices = getenv("CUDA_VISIBLE_DEVICES");
    if (devices != NULL && devices[0] != '\0') {
        char why[512] = "";
        if (orch_page_stats_gpu_open(&ps->gpu, why, sizeof why) < 0) {
            rc = orch_udf_config_error(cfg, -ENODEV,
                                       "page_stats: this worker was given GPU %s "
                                       "(CUDA_VISIBLE_DEVICES) but cannot use it: %s",
                                       devices, why);
            goto fail;
        }
    }
    *state = ps;
    return 0;
fail:
    page_stats_fini(ps);
    return rc;
}

/* One record: answers it, or returns -ENOMEM, or a GPU error (an attempt failure). */
static int page_stats_one(struct page_stats *ps, struct orch_udf_batch *batch, size_t i)
{
    struct orch_udf__subject s;
    int rc = orch_udf__subject(&ps->base, &batch->rec[i], &s);
    if (rc < 0)
        return rc;
    if (!s.present)
        return orch_udf_drop(batch, i);
    char why[512];
    struct orch_page_stats_image img;
    rc = orch_page_stats_decode(s.data, s.len, ps->max_pixels, &img, why, sizeof why);
    if (rc == -EINVAL)
        return orch_udf_fail_record(batch, i, why);
    if (rc < 0)
        return rc;
    struct orch_page_stats_acc acc;
    if (ps->gpu == NULL)
        orch_page_stats_cpu(img.px, img.w, img.h, ps->threshold, &acc);
    else if ((rc = orch_page_stats_gpu_run(ps->gpu, img.px, img.w, img.h, ps->threshold, &acc,
                                           why, sizeof why)) < 0)
        rc = orch_udf_batch_error(batch, rc, "page_stats: on the GPU: %s", why);
    if (rc == 0) {
        int n = orch_page_stats_format(&acc, img.w, img.h, ps->threshold, ps->bins, ps->json,
                                       sizeof ps->json);
        rc = n < 0 ? n : orch_udf__emit_all(&ps->base, batch, i, ps->json, (size_t)n);
    }
    orch_page_stats_image_free(&img);
    return rc;
}

static int page_stats_run(void *state, struct orch_udf_batch *batch)
{
    for (size_t i = 0; i < batch->n; i++) {
        int rc = page_stats_one(state, batch, i);
        if (rc < 0)
            return rc;
    }
    return 0;
}

const struct orch_udf orch_udf__page_stats = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "page_stats",
    .init = page_stats_init,
    .run = page_stats_run,
    .fini = page_stats_fini,
};
