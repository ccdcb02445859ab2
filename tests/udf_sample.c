/* udf_sample.c — a UDF built as a shared object, as a user would build one, for the
 * library() loader test. It includes orch_udf.h and nothing else of orch.
 *
 *   orch_udf_sample          map: the input reversed, followed by the `suffix` argument;
 *                            init counts its arguments into the state.
 *   orch_udf_sample_future   the same, but claims ABI version 99 (must be refused).
 *   orch_udf_sample_norun    claims the right version but has no run (must be refused).
 */
#include "orch_udf.h"

#include <stdlib.h>
#include <string.h>

struct sample {
    char *suffix;
    size_t slen;
};

static int sample_init(const struct orch_udf_config *cfg, void **state)
{
    if (cfg->op != ORCH_UDF_OP_MAP)
        return orch_udf_config_error(cfg, -EINVAL, "sample: only a map");
    const char *suffix = orch_udf_arg(cfg, "suffix");
    if (suffix == NULL)
        suffix = "";
    struct sample *s = calloc(1, sizeof *s);
    if (s == NULL || (s->suffix = malloc(strlen(suffix) + 1)) == NULL) {
        free(s);
        return -ENOMEM;
    }
    s->slen = strlen(suffix);
    memcpy(s->suffix, suffix, s->slen + 1);
    *state = s;
    return 0;
}

static int sample_run(void *state, struct orch_udf_batch *batch)
{
    struct sample *s = state;
    for (size_t i = 0; i < batch->n; i++) {
        const struct orch_udf_value *v = &batch->rec[i].in[0].v[0];
        if (!v->present) {
            orch_udf_drop(batch, i);
            continue;
        }
        char *out = malloc(v->len + s->slen + 1);
        if (out == NULL)
            return -ENOMEM;
        for (size_t k = 0; k < v->len; k++)
            out[k] = ((const char *)v->data)[v->len - 1 - k];
        memcpy(out + v->len, s->suffix, s->slen);
        int rc = orch_udf_emit(batch, i, 0, out, v->len + s->slen);
        free(out);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void sample_fini(void *state)
{
    struct sample *s = state;
    free(s->suffix);
    free(s);
}

ORCH_UDF_EXPORT const struct orch_udf orch_udf_sample = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "sample",
    .init = sample_init,
    .run = sample_run,
    .fini = sample_fini,
};

ORCH_UDF_EXPORT const struct orch_udf orch_udf_sample_future = {
    .abi_version = 99,
    .name = "sample_future",
    .init = sample_init,
    .run = sample_run,
    .fini = sample_fini,
};

/* Built for version 1 of the ABI, before fail_child: still accepted (it uses only ops that
 * version 1 had). Version 0 never existed: refused. */
ORCH_UDF_EXPORT const struct orch_udf orch_udf_sample_v1 = {
    .abi_version = 1,
    .name = "sample_v1",
    .init = sample_init,
    .run = sample_run,
    .fini = sample_fini,
};

ORCH_UDF_EXPORT const struct orch_udf orch_udf_sample_v0 = {
    .abi_version = 0,
    .name = "sample_v0",
    .init = sample_init,
    .run = sample_run,
    .fini = sample_fini,
};

ORCH_UDF_EXPORT const struct orch_udf orch_udf_sample_norun = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "sample_norun",
};
