/* worker_runs.c — a dispatch run in runs of at most the UDF's batch (worker_runs.h). */
#include "worker_runs.h"

#include <stdbool.h>

/* The host as one run of a larger batch sees it: record i of the run is record off + i of
 * the batch, whose answers the host collects. */
struct run_part {
    const struct orch_udf_host_ops *ops;
    void *host;
    size_t off;
};

static int part_emit(void *h, size_t i, size_t port, const void *data, size_t len)
{
    struct run_part *p = h;
    return p->ops->emit(p->host, p->off + i, port, data, len);
}

static int part_child(void *h, size_t i)
{
    struct run_part *p = h;
    return p->ops->child(p->host, p->off + i);
}

static int part_no_children(void *h, size_t i)
{
    struct run_part *p = h;
    return p->ops->no_children(p->host, p->off + i);
}

static int part_keep(void *h, size_t i, bool keep)
{
    struct run_part *p = h;
    return p->ops->keep(p->host, p->off + i, keep);
}

static int part_drop(void *h, size_t i)
{
    struct run_part *p = h;
    return p->ops->drop(p->host, p->off + i);
}

static int part_fail_record(void *h, size_t i, const char *msg)
{
    struct run_part *p = h;
    return p->ops->fail_record(p->host, p->off + i, msg);
}

static int part_fail_group(void *h, size_t i, const char *msg)
{
    struct run_part *p = h;
    return p->ops->fail_group(p->host, p->off + i, msg);
}

static int part_fail_child(void *h, size_t i, const char *msg)
{
    struct run_part *p = h;
    return p->ops->fail_child(p->host, p->off + i, msg);
}

static const struct orch_udf_host_ops part_ops = {
    .emit = part_emit,
    .child = part_child,
    .no_children = part_no_children,
    .keep = part_keep,
    .drop = part_drop,
    .fail_record = part_fail_record,
    .fail_group = part_fail_group,
    .fail_child = part_fail_child,
};

int orch_worker_run_parts(const struct orch_udf *udf, void *state, struct orch_udf_batch *ub,
                          size_t limit)
{
    if (limit == 0 || ub->n <= limit)
        return udf->run(state, ub);
    struct run_part part = {.ops = ub->ops, .host = ub->host};
    for (size_t off = 0; off < ub->n; off += limit) {
        part.off = off;
        struct orch_udf_batch run = *ub;
        run.n = ub->n - off < limit ? ub->n - off : limit;
        run.rec = ub->rec + off;
        run.ops = &part_ops;
        run.host = &part;
        int rc = udf->run(state, &run);
        if (rc != 0)
            return rc;
    }
    return 0;
}
