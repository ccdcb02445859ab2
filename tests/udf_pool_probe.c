/* udf_pool_probe.c — a UDF library for the pool tests (tests/test_pool.c): it lets a test
 * see from outside what happened inside a worker process.
 *
 *   orch_pool_probe   map: passes its input through. Arguments:
 *                       mark=DIR        fini creates DIR/fini-PID (proof that fini ran),
 *                                       holding the worker's CUDA_VISIBLE_DEVICES
 *                       fail_init=MSG   init fails with MSG
 *   orch_pool_runs    map: answers each record with the number of records of the run it
 *                     was in ("3"), so that a test sees how a dispatch was split into runs
 */
#include "orch_udf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct probe {
    char mark[512];
};

static int probe_init(const struct orch_udf_config *cfg, void **state)
{
    const char *fail = orch_udf_arg(cfg, "fail_init");
    if (fail != NULL)
        return orch_udf_config_error(cfg, -EINVAL, "probe: %s", fail);
    struct probe *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -ENOMEM;
    const char *mark = orch_udf_arg(cfg, "mark");
    if (mark != NULL)
        snprintf(p->mark, sizeof p->mark, "%s", mark);
    *state = p;
    return 0;
}

static int probe_run(void *state, struct orch_udf_batch *batch)
{
    (void)state;
    for (size_t i = 0; i < batch->n; i++) {
        const struct orch_udf_value *v = &batch->rec[i].in[0].v[0];
        int rc =
            v->present ? orch_udf_emit(batch, i, 0, v->data, v->len) : orch_udf_drop(batch, i);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void probe_fini(void *state)
{
    struct probe *p = state;
    if (p->mark[0]) {
        char path[600];
        snprintf(path, sizeof path, "%s/fini-%d", p->mark, (int)getpid());
        FILE *f = fopen(path, "w");
        if (f) {
            const char *cuda = getenv("CUDA_VISIBLE_DEVICES");
            fputs(cuda ? cuda : "", f);
            fclose(f);
        }
    }
    free(p);
}

ORCH_UDF_EXPORT const struct orch_udf orch_pool_probe = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "pool_probe",
    .init = probe_init,
    .run = probe_run,
    .fini = probe_fini,
};

static int runs_run(void *state, struct orch_udf_batch *batch)
{
    (void)state;
    char n[32];
    snprintf(n, sizeof n, "%zu", batch->n);
    for (size_t i = 0; i < batch->n; i++) {
        int rc = orch_udf_emit_str(batch, i, 0, n);
        if (rc < 0)
            return rc;
    }
    return 0;
}

ORCH_UDF_EXPORT const struct orch_udf orch_pool_runs = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "pool_runs",
    .run = runs_run,
};
