/* udf_slow_expand.c — a slow expander for the tests of streaming expansions, built as a
 * shared object like a user's UDF (it includes orch_udf.h alone).
 *
 *   orch_udf_slow_expand   expand: n children (argument n, default 200) of each input, one
 *                          every `ms` milliseconds (default 20); child c's value is
 *                          "<input> <c>". Its faults, for the tests:
 *     fail_after=K   a RecordFailure after K children, on every run;
 *     once=PATH      a file the first run creates: it tells a first run from a replay;
 *     crash_after=K  with once: the first run aborts after K children;
 *     differ_at=K    with once: a replay makes child K different (not deterministic);
 *     stamp=1        each value ends with " @MS": when the child was made, ms since the
 *                    epoch (scripts/bench/streaming: not deterministic either).
 */
#define _POSIX_C_SOURCE 200809L
#include "orch_udf.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct slow {
    long n, ms, fail_after, crash_after, differ_at, stamp;
    char *once;
};

static long arg_long(const struct orch_udf_config *cfg, const char *key, long dflt)
{
    const char *v = orch_udf_arg(cfg, key);
    return v ? strtol(v, NULL, 10) : dflt;
}

static int slow_init(const struct orch_udf_config *cfg, void **state)
{
    if (cfg->op != ORCH_UDF_OP_EXPAND || cfg->nin != 1 || cfg->nout != 1)
        return orch_udf_config_error(cfg, -EINVAL, "slow_expand: an expand of one input");
    struct slow *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    s->n = arg_long(cfg, "n", 200);
    s->ms = arg_long(cfg, "ms", 20);
    s->fail_after = arg_long(cfg, "fail_after", -1);
    s->crash_after = arg_long(cfg, "crash_after", -1);
    s->differ_at = arg_long(cfg, "differ_at", -1);
    s->stamp = arg_long(cfg, "stamp", 0);
    const char *once = orch_udf_arg(cfg, "once");
    if (once && (s->once = malloc(strlen(once) + 1)) != NULL)
        strcpy(s->once, once);
    *state = s;
    return 0;
}

/* True on the first run of the job (it creates the `once` file), false on a replay. */
static int first_run(const struct slow *s)
{
    if (s->once == NULL)
        return 0;
    int fd = open(s->once, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&ts, &ts) != 0)
        ;
}

static int slow_run(void *state, struct orch_udf_batch *b)
{
    const struct slow *s = state;
    for (size_t i = 0; i < b->n; i++) {
        const struct orch_udf_value *in = &b->rec[i].in[0].v[0];
        int first = first_run(s);
        char text[256];
        for (long c = 0; c < s->n; c++) {
            if (c == s->fail_after)
                return orch_udf_fail_record(b, i, "slow_expand: failed after its children") < 0
                           ? -EINVAL
                           : 0;
            if (first && c == s->crash_after)
                abort();
            if (c > 0)
                pause_ms(s->ms);
            int n = snprintf(text, sizeof text, "%.*s %ld%s",
                             (int)(in->len < 200 ? in->len : 200), (const char *)in->data, c,
                             !first && s->once && c == s->differ_at ? " (again)" : "");
            if (s->stamp) {
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                n += snprintf(text + n, sizeof text - (size_t)n, " @%lld",
                              (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
            }
            int rc = orch_udf_child(b, i);
            if (rc == 0)
                rc = orch_udf_emit(b, i, 0, text, (size_t)n);
            if (rc < 0)
                return rc;
        }
        if (s->n == 0 && orch_udf_no_children(b, i) < 0)
            return -EINVAL;
    }
    return 0;
}

static void slow_fini(void *state)
{
    struct slow *s = state;
    free(s->once);
    free(s);
}

ORCH_UDF_EXPORT const struct orch_udf orch_udf_slow_expand = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "slow_expand",
    .init = slow_init,
    .run = slow_run,
    .fini = slow_fini,
};
