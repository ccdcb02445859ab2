/* knobs.c — every ORCH_ variable of the environment, read and checked once (knobs.h). */
#include "knobs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "orch_udf_host.h"
#include "page_stats.h"

static struct orch_knobs knobs;

/* The variable's value, or NULL when it is unset or empty. */
static const char *text(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

const char *orch_count_prefix(const char *v, uint64_t max, uint64_t *n)
{
    if (*v < '0' || *v > '9')
        return NULL;
    char *end;
    errno = 0;
    unsigned long long u = strtoull(v, &end, 10);
    if (errno || u > max)
        return NULL;
    *n = (uint64_t)u;
    return end;
}

int orch_count(const char *v, uint64_t min, uint64_t max, uint64_t *n)
{
    uint64_t u;
    const char *end = orch_count_prefix(v, max, &u);
    if (!end || *end || u < min)
        return -1;
    *n = u;
    return 0;
}

/* The variable as a count in min .. max (orch_count), or 0 when it is unset, empty, not
 * such a number, or out of range. */
static uint64_t number(const char *name, uint64_t min, uint64_t max)
{
    const char *v = text(name);
    uint64_t n;
    return v && orch_count(v, min, max, &n) == 0 ? n : 0;
}

/* ORCH_REPORT_MAX_BATCHES: 5,000 when unset or empty, -1 when not a positive integer. */
static int64_t report_max_batches(void)
{
    if (!text("ORCH_REPORT_MAX_BATCHES"))
        return 5000;
    int64_t n = (int64_t)number("ORCH_REPORT_MAX_BATCHES", 1, INT64_MAX);
    return n > 0 ? n : -1;
}

static void read_store(struct orch_store_config *c)
{
    c->no_walbuf = getenv("ORCH_NO_WALBUF") != NULL; /* set at all, even empty */
    const char *checks = text("ORCH_STORE_CHECKS");
    c->checks = checks && strcmp(checks, "0") != 0;
    c->max_pages = (int64_t)number("ORCH_STATE_MAX_PAGES", 1, INT64_MAX);
}

static void read_payload(struct orch_payload_limits *l)
{
    /* Over the store's own limits: orch_payload_job_opts keeps the default. */
    l->max_map_size = (size_t)number("ORCH_PAYLOAD_MAX_MAP", 1, SIZE_MAX);
    l->max_readers = (size_t)number("ORCH_PAYLOAD_MAX_READERS", 1, SIZE_MAX);
    l->max_value = (size_t)number("ORCH_PAYLOAD_MAX_VALUE", 1, SIZE_MAX);
}

const struct orch_knobs *orch_knobs_load(void)
{
    struct orch_knobs *k = &knobs;
    k->launcher = text("ORCH_LAUNCHER");
    k->launcher_args = text("ORCH_LAUNCHER_ARGS");
    k->listen = text("ORCH_LISTEN");
    k->srun = text("ORCH_SRUN");
    k->worker_exe = text("ORCH_WORKER_EXE");
    k->idle_stop_ms = (int64_t)number("ORCH_IDLE_STOP_MS", 1, INT64_MAX);
    k->queue_window = (size_t)number("ORCH_QUEUE_WINDOW", 1, SIZE_MAX / 2);
    k->remote_batch_max = (size_t)number("ORCH_REMOTE_BATCH_MAX", 1, SIZE_MAX);
    k->batch_target_ms = (int64_t)number("ORCH_BATCH_TARGET_MS", 1, 3600000);
    k->srun_guard_kill_ms = (int64_t)number("ORCH_SRUN_GUARD_KILL_MS", 1, INT64_MAX);
    k->report_max_batches = report_max_batches();
    read_store(&k->store);
    read_payload(&k->payload);
    k->pdf_heap_max = (size_t)number("ORCH_PDF_HEAP_MAX", 1, SIZE_MAX);
    k->page_stats_cuda = text("ORCH_PAGE_STATS_CUDA");

    orch_store_configure(&k->store);
    orch_payload_set_job_limits(&k->payload);
    orch_udf_pdf_set_heap_max(k->pdf_heap_max);
    orch_page_stats_gpu_set_module(k->page_stats_cuda);
    return k;
}

const struct orch_knobs *orch_knobs(void)
{
    return &knobs;
}

void orch_knobs_run_opts(struct orch_run_opts *o)
{
    const struct orch_knobs *k = &knobs;
    o->launcher_args = k->launcher_args;
    o->listen = k->listen;
    o->srun = k->srun;
    o->worker_exe = k->worker_exe;
    o->idle_stop_ms = k->idle_stop_ms;
    o->queue_window = k->queue_window;
    o->remote_batch_max = k->remote_batch_max;
    o->batch_target_ms = k->batch_target_ms;
}
