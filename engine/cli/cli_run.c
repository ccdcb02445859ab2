/* cli_run.c — `orch run PIPELINE --job DIR` and `orch resume DIR`: create or reopen a job and
 * drive it to its end (driver.h). */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "knobs.h"
#include "orch_error.h"
#include "propagate.h"

static const char run_help[] =
    "usage: orch run PIPELINE --job DIR [OPTIONS]\n"
    "\n"
    "Creates the job directory DIR (it must not exist) from the pipeline file, then runs\n"
    "the job to its end: every root entity of the sources, every grain of every call.\n"
    "Records that fail do not stop the job; the summary counts them.\n"
    "\n"
    "  --cpus N           CPU budget shared by the calls' workers (default: all online)\n"
    "  --gpus N           GPU budget (default: the /dev/nvidiaN devices found); a worker\n"
    "                     of a call with gpus=G is given its devices in\n"
    "                     CUDA_VISIBLE_DEVICES\n"
    "  --max-unsealed N   admission budget of unsealed grains (default 20000): new root\n"
    "                     entities enter only below it, and when it is full an expand\n"
    "                     waits while a call downstream of it has queued grains\n"
    "  --max-live-bytes SIZE   admission budget of live intermediate payloads (bytes\n"
    "                     that will be freed once read: see docs/tuning.md,\n"
    "                     Admission); SIZE in bytes or with K, M, G, T (KiB, MiB...);\n"
    "                     default: a quarter of the memory or half the free disk,\n"
    "                     whichever is less\n"
    "  --durability MODE  machine (default): payloads are synced to disk once per loop\n"
    "                     turn, before the commit that names them, so committed results\n"
    "                     survive a machine crash; process: no syncs, committed results\n"
    "                     survive the crash of any process but maybe not of the machine\n"
    "  --progress MODE    auto (a live display on a terminal, plain lines otherwise),\n"
    "                     live, plain, or none\n"
    "  --progress-interval MS   plain progress lines every MS milliseconds (default 5000)\n"
    "  --batch-target MS  the work each dispatch of grains is sized to, in ms of its\n"
    "                     worker's time, from what each call measures (default 50, or\n"
    "                     $ORCH_BATCH_TARGET_MS; see docs/tuning.md)\n"
    "  --launcher KIND    where workers run: local (default: processes of this machine)\n"
    "                     or slurm (each worker a Slurm step started with srun, asking\n"
    "                     for its call's cpus and gpus, connecting back over TCP: see\n"
    "                     docs/slurm.md); the environment variable ORCH_LAUNCHER gives\n"
    "                     the default\n"
    "  --launcher-args S  srun's own options for every worker (partition, account, time\n"
    "                     limit...), split as a shell would; default: $ORCH_LAUNCHER_ARGS\n"
    "  --listen HOST:PORT where workers connect (default: this host's name, a free port;\n"
    "                     $ORCH_LISTEN)\n"
    "\n"
    "Ablations, for benchmarks only (they make a job slower, never different: the same\n"
    "results, the same plan hash):\n"
    "  --order MODE       how each call's ready queue is served: fifo (default, in the\n"
    "                     order grains became ready) or random (a random ready grain each\n"
    "                     time; reserve=parent draws the family, then takes its siblings)\n"
    "  --seed N           the seed of --order random (default: from the clock, printed)\n"
    "  --batch-fixed      every dispatch takes its call's batch grains (one for\n"
    "                     batch=auto) instead of the sizes the runtime measures\n"
    "  --staged           a barrier after each call: a call starts only once every call\n"
    "                     upstream of it is done for every entity; every root is admitted\n"
    "                     at once (--max-unsealed is ignored), so memory grows with the job\n"
    "\n"
    "exit status: 0 the job ran to its end; 1 it could not (the message says why; what was\n"
    "committed is kept: continue with `orch resume DIR`); 2 usage error; 3 interrupted by\n"
    "SIGINT or SIGTERM (continue with `orch resume DIR`).\n";

static const char resume_help[] =
    "usage: orch resume DIR [OPTIONS]\n"
    "\n"
    "Continues a job that stopped or crashed: grains that were in flight are run again\n"
    "with a new generation, the ready queues are rebuilt in their original order, and\n"
    "admission continues where it stopped. The plan is rebuilt from the job itself, never\n"
    "from the pipeline file. Options and exit status as for `orch run`.\n";

/* A positive size: digits, then nothing or B, or K, M, G, T (powers of 1024) with an
 * optional "iB" or "B" ("64M", "64MiB", "64MB" alike: memory sizes, as `free -h` says).
 * 0 or -1 when it is not one, or does not fit. */
static int parse_size(const char *v, int64_t *out)
{
    uint64_t n;
    const char *end = orch_count_prefix(v, UINT64_MAX, &n);
    if (!end)
        return -1;
    int shift = 0;
    switch (*end) {
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        break;
    }
    end += shift > 0;
    if (shift && strcmp(end, "iB") == 0)
        end += 2;
    else if (*end == 'B')
        end++;
    if (*end || n == 0 || n > ((uint64_t)INT64_MAX >> shift))
        return -1;
    *out = (int64_t)(n << shift);
    return 0;
}

static int parse_launcher(const char *v, enum orch_launcher_kind *out)
{
    if (strcmp(v, "local") == 0)
        *out = ORCH_LAUNCHER_LOCAL;
    else if (strcmp(v, "slurm") == 0)
        *out = ORCH_LAUNCHER_SLURM;
    else
        return -1;
    return 0;
}

/* parse_opts's loop; *seeded is set when --seed was given. */
static int parse_args(const char *cmd, int argc, char **argv, struct orch_run_opts *o,
                      const char **job, const char **positional, int *npos, bool *seeded)
{
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        uint64_t n;
        if (strcmp(a, "--job") == 0 && job && v) {
            *job = v;
            i++;
        } else if (strcmp(a, "--cpus") == 0 && v) {
            o->cpus = strtod(v, &end);
            if (*end || o->cpus <= 0)
                return orch_cli_usage_error("%s: --cpus needs a positive number", cmd), -1;
            i++;
        } else if (strcmp(a, "--gpus") == 0 && v) {
            o->gpus = strtod(v, &end);
            if (*end || o->gpus <= 0)
                return orch_cli_usage_error("%s: --gpus needs a positive number", cmd), -1;
            i++;
        } else if (strcmp(a, "--max-unsealed") == 0 && v) {
            if (orch_count(v, 1, INT64_MAX, &n) < 0)
                return orch_cli_usage_error("%s: --max-unsealed needs a positive integer "
                                            "(at most %" PRId64 ")",
                                            cmd, INT64_MAX),
                       -1;
            o->max_unsealed = (int64_t)n;
            i++;
        } else if (strcmp(a, "--batch-target") == 0 && v) {
            if (orch_count(v, 1, 3600000, &n) < 0)
                return orch_cli_usage_error("%s: --batch-target needs a number of ms from 1 "
                                            "to 3600000",
                                            cmd),
                       -1;
            o->batch_target_ms = (int64_t)n;
            i++;
        } else if (strcmp(a, "--batch-fixed") == 0) {
            o->batch_fixed = true;
        } else if (strcmp(a, "--max-live-bytes") == 0 && v) {
            if (parse_size(v, &o->max_live_bytes) < 0)
                return orch_cli_usage_error("%s: --max-live-bytes needs a positive size "
                                            "(bytes, or a number with K, M, G or T)",
                                            cmd),
                       -1;
            i++;
        } else if (strncmp(a, "--durability=", 13) == 0 ||
                   (strcmp(a, "--durability") == 0 && v)) {
            const char *m = a[12] == '=' ? a + 13 : v;
            if (strcmp(m, "machine") == 0)
                o->durability = ORCH_DURABILITY_MACHINE;
            else if (strcmp(m, "process") == 0)
                o->durability = ORCH_DURABILITY_PROCESS;
            else
                return orch_cli_usage_error("%s: --durability is machine or process", cmd), -1;
            if (a[12] != '=')
                i++;
        } else if (strcmp(a, "--order") == 0 && v) {
            if (strcmp(v, "fifo") == 0)
                o->order = ORCH_ORDER_FIFO;
            else if (strcmp(v, "random") == 0)
                o->order = ORCH_ORDER_RANDOM;
            else
                return orch_cli_usage_error("%s: --order is fifo or random", cmd), -1;
            i++;
        } else if (strcmp(a, "--seed") == 0 && v) {
            if (orch_count(v, 0, UINT64_MAX, &o->seed) < 0)
                return orch_cli_usage_error("%s: --seed needs a non-negative integer "
                                            "(at most %" PRIu64 ")",
                                            cmd, UINT64_MAX),
                       -1;
            *seeded = true;
            i++;
        } else if (strcmp(a, "--launcher") == 0 && v) {
            if (parse_launcher(v, &o->launcher) < 0)
                return orch_cli_usage_error("%s: --launcher is local or slurm", cmd), -1;
            i++;
        } else if (strcmp(a, "--launcher-args") == 0 && v) {
            o->launcher_args = v;
            i++;
        } else if (strcmp(a, "--listen") == 0 && v) {
            o->listen = v;
            i++;
        } else if (strcmp(a, "--staged") == 0) {
            o->staged = true;
        } else if (strcmp(a, "--progress") == 0 && v) {
            if (strcmp(v, "auto") == 0)
                o->progress = ORCH_PROGRESS_AUTO;
            else if (strcmp(v, "live") == 0)
                o->progress = ORCH_PROGRESS_LIVE;
            else if (strcmp(v, "plain") == 0)
                o->progress = ORCH_PROGRESS_PLAIN;
            else if (strcmp(v, "none") == 0)
                o->progress = ORCH_PROGRESS_NONE;
            else
                return orch_cli_usage_error("%s: --progress is auto, live, plain or none", cmd),
                       -1;
            i++;
        } else if (strcmp(a, "--progress-interval") == 0 && v) {
            if (orch_count(v, 1, INT_MAX, &n) < 0)
                return orch_cli_usage_error("%s: --progress-interval needs milliseconds (a "
                                            "positive integer, at most %d)",
                                            cmd, INT_MAX),
                       -1;
            o->progress_interval_ms = (int)n;
            i++;
        } else if (a[0] == '-' && a[1]) {
            return orch_cli_usage_error("%s: unknown option or missing value: '%s'", cmd, a),
                   -1;
        } else if (*npos < 2) {
            positional[(*npos)++] = a;
        } else {
            return orch_cli_usage_error("%s: unexpected argument '%s'", cmd, a), -1;
        }
    }
    return 0;
}

/* Parses the options shared by run and resume; returns the index of the first
 * non-option argument it did not consume through *positional, or -1 on a usage error.
 * --order random without --seed gets a seed from the clock, printed on stderr. */
static int parse_opts(const char *cmd, int argc, char **argv, struct orch_run_opts *o,
                      const char **job, const char **positional, int *npos)
{
    bool given = false;
    /* Defaults from the environment (knobs.h), so that a site (or a test suite) can send
     * every job through its cluster; the options override them. */
    const char *env = orch_knobs()->launcher;
    if (env && parse_launcher(env, &o->launcher) < 0)
        return orch_cli_usage_error("%s: ORCH_LAUNCHER is local or slurm, not '%s'", cmd, env),
               -1;
    orch_knobs_run_opts(o);
    int rc = parse_args(cmd, argc, argv, o, job, positional, npos, &given);
    /* Where workers will connect is checked before any job is made or opened: a bad
     * address or a port in use is the command line's fault, not the job's. */
    if (rc == 0 && o->launcher == ORCH_LAUNCHER_SLURM && o->listen &&
        orch_launcher_check_listen(o->listen) < 0)
        return orch_cli_usage_error("%s: %s", cmd, orch_error_detail()), -1;
    if (rc == 0 && o->order == ORCH_ORDER_RANDOM && !given) {
        /* A seed of its own for each run, told so that the run can be repeated: the wall
         * clock in nanoseconds (finer than proc.h's orch_clock_wall_ms) and the pid. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        o->seed = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                  ((uint64_t)getpid() << 32);
        fprintf(stderr, "orch: %s: --order random --seed %" PRIu64 "\n", cmd, o->seed);
    }
    return rc;
}

int orch_cli_drive(struct orch_job *job, const struct orch_run_opts *o)
{
    struct orch_run_stats stats;
    int rc = orch_driver_run(job, o, &stats);
    /* ORCH_EMISMATCH: a source changed under a resumed job; refused before the run began,
     * nothing to summarise, and resuming again is not the way (the message says what is). */
    bool refused = rc == ORCH_EMISMATCH;
    if ((o->progress != ORCH_PROGRESS_NONE && !refused) || rc == 0)
        orch_driver_summary(job, &stats, stderr);
    orch_run_stats_free(&stats);
    if (rc == -EINTR) {
        fprintf(stderr, "orch: %s\n", orch_error_detail());
        return ORCH_EXIT_INTERRUPTED;
    }
    if (rc < 0) {
        fprintf(stderr, "orch: %s: %s\n", job->dir,
                orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc));
        /* A corrupt store cannot be resumed; every other stop can. */
        if (rc != ORCH_ECORRUPT && !refused)
            fprintf(stderr,
                    "orch: what was committed is kept; once the cause is fixed, continue "
                    "with `orch resume %s`\n",
                    job->dir);
        return ORCH_EXIT_FAIL;
    }
    return ORCH_EXIT_OK;
}

int orch_cli_run(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(run_help, stdout), ORCH_EXIT_OK;
    struct orch_run_opts o = {0};
    const char *dir = NULL, *pos[2];
    int npos;
    if (parse_opts("run", argc, argv, &o, &dir, pos, &npos) < 0)
        return ORCH_EXIT_USAGE;
    if (npos != 1)
        return orch_cli_usage_error("run: give one pipeline file");
    if (!dir)
        return orch_cli_usage_error("run: --job DIR is required (a new directory for the job)");
    if (!dir[0])
        return orch_cli_usage_error("run: --job needs the name of a new directory (it is empty)");
    struct orch_job *job;
    orch_error_clear();
    int rc = orch_job_create(dir, pos[0], stderr, &job);
    if (rc == ORCH_ESYNTAX)
        return ORCH_EXIT_FAIL; /* the compiler printed the errors */
    if (rc < 0) {
        fprintf(stderr, "orch: %s\n",
                orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc));
        return ORCH_EXIT_FAIL;
    }
    int status = orch_cli_drive(job, &o);
    orch_job_close(job);
    return status;
}

/* Parses the arguments of resume and retry (one job directory and the run options) and
 * opens the job read-write, taking its lock. Returns -1 with *job set, or the exit status
 * to return. */
int orch_cli_open_existing(const char *cmd, int argc, char **argv, struct orch_run_opts *o,
                           struct orch_job **job, const char **second)
{
    const char *pos[2];
    int npos;
    if (parse_opts(cmd, argc, argv, o, NULL, pos, &npos) < 0)
        return ORCH_EXIT_USAGE;
    if (second)
        *second = npos == 2 ? pos[1] : NULL;
    if (npos != 1 && !(second && npos == 2))
        return orch_cli_usage_error("%s: give one job directory%s", cmd,
                                    second ? ", and a pipeline file if it changed" : "");
    orch_error_clear();
    int rc = orch_job_open(pos[0], 0, job);
    if (rc < 0) {
        fprintf(stderr, "orch: %s\n",
                orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc));
        return ORCH_EXIT_FAIL;
    }
    return -1;
}

int orch_cli_resume(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(resume_help, stdout), ORCH_EXIT_OK;
    struct orch_run_opts o = {0};
    struct orch_job *job;
    int status = orch_cli_open_existing("resume", argc, argv, &o, &job, NULL);
    if (status >= 0)
        return status;
    status = orch_cli_drive(job, &o);
    orch_job_close(job);
    return status;
}

static const char retry_help[] =
    "usage: orch retry DIR [--call C] [OPTIONS]\n"
    "\n"
    "After a fix (a UDF repaired, a file restored): re-opens the Failed grains of the job\n"
    "(of call C only with --call), everything that was Suppressed because of them, and the\n"
    "GroupFailure barriers they installed, with new generations; then resumes the job.\n"
    "Earlier attempts and failures stay in the history (tables attempt and failure).\n"
    "Options and exit status as for `orch run`.\n";

static int no_ready_hook(void *ctx, const struct orch_grain_ref *g)
{
    return 0; /* the driver rebuilds its queues from the store when it starts */
}

int orch_cli_retry(int argc, char **argv)
{
    const char *call_name = NULL;
    char *rest[64];
    int nrest = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(retry_help, stdout), ORCH_EXIT_OK;
        if (i > 0 && strcmp(argv[i], "--call") == 0) {
            if (i + 1 == argc)
                return orch_cli_usage_error("retry: --call needs a call name");
            call_name = argv[++i];
        } else if (nrest < 63) {
            rest[nrest++] = argv[i];
        }
    }
    struct orch_run_opts o = {0};
    struct orch_job *job;
    int status = orch_cli_open_existing("retry", nrest, rest, &o, &job, NULL);
    if (status >= 0)
        return status;
    int rc, call = -1;
    if (call_name && (call = orch_plan_find_call(job->plan, call_name)) < 0) {
        fprintf(stderr, "orch: retry: the job has no call '%s'\n", call_name);
        orch_job_close(job);
        return ORCH_EXIT_FAIL;
    }
    /* Re-open in one transaction: either every fact of the retry is taken back, or none. */
    int64_t reopened = 0;
    orch_prop *prop = NULL;
    struct orch_prop_hooks hooks = {.ready = no_ready_hook};
    if ((rc = orch_store_begin(job->store)) == 0)
        rc = orch_prop_open(job->plan, job->store, &hooks, &prop);
    if (rc >= 0)
        rc = orch_prop_reopen_failed(prop, call, &reopened);
    if (rc >= 0)
        rc = orch_prop_flush(prop);
    if (rc >= 0)
        rc = orch_store_commit(job->store);
    else if (orch_store_in_txn(job->store))
        orch_store_rollback(job->store);
    orch_prop_free(prop);
    if (rc < 0) {
        fprintf(stderr, "orch: retry: %s\n",
                orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc));
        orch_job_close(job);
        return ORCH_EXIT_FAIL;
    }
    fprintf(stderr, "orch: retry: %lld grains re-opened\n", (long long)reopened);
    status = orch_cli_drive(job, &o);
    orch_job_close(job);
    return status;
}
