/* resources.c — CPU and GPU budgets, GPU devices, the calls' pools (driver_int.h). The pools
 * start with no process: workers.c starts and stops them. */
#include "driver_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orch_error.h"

/* The GPUs of this machine: /dev/nvidia0, /dev/nvidia1, ... */
static double detect_gpus(void)
{
    int n = 0;
    char path[32];
    for (;; n++) {
        snprintf(path, sizeof path, "/dev/nvidia%d", n);
        if (access(path, F_OK) != 0)
            return n;
    }
}

/* The budget of a resource that the workload manager accounts for (--launcher slurm). */
#define REMOTE_UNBOUNDED 1e9

void orch_driver_budgets(struct orch_driver *d)
{
    const struct orch_run_opts *opts = d->opts;
    /* Remote workers run on the cluster's cores and GPUs, which Slurm accounts for: this
     * machine's count nothing, and only a budget given by the user bounds them here. */
    bool remote = opts->launcher != ORCH_LAUNCHER_LOCAL;
    d->cpu_total = opts->cpus > 0 ? opts->cpus
                   : remote       ? REMOTE_UNBOUNDED
                                  : (double)sysconf(_SC_NPROCESSORS_ONLN);
    if (d->cpu_total < 1)
        d->cpu_total = 1;
    d->gpu_total = opts->gpus > 0 ? opts->gpus : remote ? REMOTE_UNBOUNDED : detect_gpus();
}

/* A call's worker holds the call's cpus and gpus from the engine's budgets while it runs
 * a batch; a batch is reserved only when they fit. */
bool orch_driver_fits(const struct orch_driver *d, const struct orch_driver_call *cr)
{
    return (cr->cpus <= 0 || d->cpu_busy + cr->cpus <= d->cpu_total + 1e-9) &&
           (cr->gpus <= 0 || d->gpu_busy + cr->gpus <= d->gpu_total + 1e-9);
}

void orch_driver_hold(struct orch_driver *d, const struct orch_driver_call *cr)
{
    d->cpu_busy += cr->cpus;
    d->gpu_busy += cr->gpus;
}

void orch_driver_release(struct orch_driver *d, const struct orch_driver_call *cr)
{
    d->cpu_busy -= cr->cpus;
    d->gpu_busy -= cr->gpus;
}

/* Gives each worker of a GPU call its devices through CUDA_VISIBLE_DEVICES: a worker that
 * holds g GPUs gets ceil(g) consecutive devices, workers packed in order, wrapping around
 * the machine's devices (fractional calls share a device). */
static int assign_devices(struct orch_driver *d, struct orch_driver_call *cr)
{
    int ndev = (int)d->gpu_total;
    if (ndev < 1)
        ndev = 1;
    int per = (int)(cr->gpus + 0.999999);
    if (per < 1)
        per = 1;
    cr->devices = calloc((size_t)cr->c->opts.workers + 1, sizeof *cr->devices);
    if (!cr->devices)
        return -ENOMEM;
    for (int w = 0; w < cr->c->opts.workers; w++) {
        char buf[256] = "";
        size_t len = 0;
        int first = (int)((double)w * cr->gpus) % ndev;
        for (int k = 0; k < per && k < ndev && len < sizeof buf - 8; k++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d", k ? "," : "",
                                    (first + k) % ndev);
        if (!(cr->devices[w] = strdup(buf)))
            return -ENOMEM;
    }
    return 0;
}

/* A call that needs more GPUs than the job has is refused (DESIGN §5): its workers could
 * never hold their share, and shrinking the request would silently give a worker fewer
 * devices than it was written for. CPUs are different: a call's cpus are clamped to the
 * budget, since a worker runs on fewer cores, only slower. Checked for every call before
 * any pool starts, so that a refused job has started no worker. */
static int check_gpus(const struct orch_driver *d, const struct orch_call *c)
{
    double g = c->opts.gpus;
    if (g <= 0 || g <= d->gpu_total + 1e-9)
        return 0;
    if (d->gpu_total <= 0)
        return orch_error_set(ORCH_EPLAN,
                              "call %s needs gpus=%g but no GPU was found "
                              "(give the budget with --gpus N)",
                              c->name, g);
    return orch_error_set(ORCH_EPLAN,
                          "call %s needs gpus=%g but the job has only %g GPU%s "
                          "(found, or given with --gpus N)",
                          c->name, g, d->gpu_total, d->gpu_total == 1 ? "" : "s");
}

/* A call without gpus is given CUDA_VISIBLE_DEVICES="" (no device), so that a worker that
 * holds no GPU cannot use one it inherited from the environment orch was started in:
 * otherwise the budget would not bound what runs on the GPUs. */
static int hide_devices(struct orch_driver_call *cr)
{
    cr->devices = calloc((size_t)cr->c->opts.workers + 1, sizeof *cr->devices);
    if (!cr->devices)
        return -ENOMEM;
    for (int w = 0; w < cr->c->opts.workers; w++)
        if (!(cr->devices[w] = strdup("")))
            return -ENOMEM;
    return 0;
}

/* How many of cr's queued grains the driver keeps in memory (queue.h, "The window and the
 * spill"): enough for two of the largest dispatches per worker (sizing.h, ORCH_SIZING_MAX),
 * so that every worker can be given a full dispatch while the next is read back, and so
 * that the spill is read in large steps (8,192 grains: 448 KiB per worker). The run's
 * queue_window (>= 1), for tests, replaces it: a window smaller than one expansion without
 * making a large one. */
static size_t queue_window(const struct orch_driver *d, const struct orch_driver_call *cr)
{
    if (d->opts->queue_window >= 1 && d->opts->queue_window <= SIZE_MAX / 2)
        return d->opts->queue_window;
    return 2 * (size_t)ORCH_SIZING_MAX * (size_t)cr->c->opts.workers;
}

int orch_driver_start_pools(struct orch_driver *d, const struct orch_pool_callbacks *cb)
{
    if (d->opts->launcher != ORCH_LAUNCHER_LOCAL) {
        struct orch_launcher_config lc = {.kind = d->opts->launcher,
                                          .args = d->opts->launcher_args,
                                          .listen = d->opts->listen,
                                          .srun = d->opts->srun};
        int rc = orch_launcher_new(d->base, &lc, &d->launcher);
        if (rc < 0)
            return rc;
        /* Said always (not a progress line): the port a firewall must let through. */
        fprintf(stderr, "orch: --launcher slurm: workers connect to %s\n",
                orch_launcher_address(d->launcher));
    }
    for (int i = 0; i < d->ncalls; i++) {
        const struct orch_call *c = orch_plan_call(d->plan, i);
        int rc;
        if (c->stmt >= 0 && (rc = check_gpus(d, c)) < 0)
            return rc;
    }
    for (int i = 0; i < d->ncalls; i++) {
        struct orch_driver_call *cr = &d->calls[i];
        cr->d = d;
        cr->call = i;
        cr->c = orch_plan_call(d->plan, i);
        if (cr->c->stmt < 0)
            continue; /* unused call: no pool */
        cr->s = orch_plan_stmt(d->plan, cr->c->stmt);
        cr->ms_per_grain = cr->bytes_per_grain = -1; /* nothing measured yet */
        cr->q.window = queue_window(d, cr);
        cr->q.spill_dir = d->job->dir;
        /* What its batches add to the admission budgets (dispatch.c holds such a call
         * when they are full). */
        cr->grows_grains = cr->s->op == ORCH_OP_EXPAND || cr->s->op == ORCH_OP_EXPAND_ALIGNED;
        for (int k = 0; k < cr->s->nout; k++)
            cr->grows_bytes = cr->grows_bytes || orch_prop_port_counted(d->prop, cr->s->out[k]);
        cr->resign_in = -1;
        for (int k = 0; k < cr->s->nin && cr->resign_in < 0; k++) {
            int src = orch_plan_port(d->plan, cr->s->in[k].port)->source;
            const struct orch_source *so = src >= 0 ? orch_plan_source(d->plan, src) : NULL;
            if (so && so->kind == ORCH_SOURCE_FILES && so->domain == cr->s->domain)
                cr->resign_in = k;
        }
        cr->cpus = cr->c->opts.cpus > d->cpu_total ? d->cpu_total : cr->c->opts.cpus;
        cr->gpus = cr->c->opts.gpus;
        int rc = d->launcher      ? 0 /* Slurm gives each step its devices */
                 : cr->gpus > 0 ? assign_devices(d, cr)
                                : hide_devices(cr);
        if (rc < 0)
            return rc;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/payloads", d->job->dir);
        struct orch_pool_config pc = {
            .exe = d->exe,
            .payload_dir = dir,
            .plan = d->plan,
            .call = i,
            .nworkers = cr->c->opts.workers,
            .timeout_ms = cr->c->opts.timeout_ms,
            .max_init_failures = 3,
            .cuda_visible_devices = (const char *const *)cr->devices,
            .launcher = d->launcher,
            .store = d->job->payloads,
            .cpus = cr->c->opts.cpus,
            .gpus = cr->gpus,
            .remote_batch_max = d->opts->remote_batch_max,
        };
        rc = orch_pool_new(d->base, &pc, cb, cr, &cr->pool);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void orch_driver_calls_free(struct orch_driver *d, bool clean)
{
    for (int i = 0; d->calls && i < d->ncalls; i++) {
        struct orch_driver_call *cr = &d->calls[i];
        if (cr->pool) {
            if (clean)
                orch_pool_close(cr->pool);
            else
                orch_pool_kill(cr->pool);
        }
        orch_driver_batches_free(cr->inflight);
        cr->inflight = NULL;
        orch_queue_free(&cr->q);
        free(cr->idle);
        for (int w = 0; cr->devices && w < cr->c->opts.workers; w++)
            free(cr->devices[w]);
        free(cr->devices);
    }
    orch_launcher_free(d->launcher); /* after the pools: no worker waits to connect */
    d->launcher = NULL;
}
