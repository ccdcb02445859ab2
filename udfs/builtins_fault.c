/* builtins_fault.c — the built-ins that tests use to shape time and failure: sleep,
 * fail_if, flaky (their contract is the table in builtins.c). */
#define _GNU_SOURCE /* memmem */
#include "udf_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- sleep ------------------------------------------------------------------------ */

struct sleep_state {
    struct orch_udf__base base;
    bool has_ms;
    uint64_t ms;
};

static int sleep_init(const struct orch_udf_config *cfg, void **state)
{
    static const char *const args[] = {"ms", NULL};
    void *st;
    int rc = orch_udf__base_init(cfg, "sleep", ORCH_UDF__OPS_ALL, args,
                                 sizeof(struct sleep_state), &st);
    if (rc < 0)
        return rc;
    struct sleep_state *s = st;
    s->has_ms = orch_udf_arg(cfg, "ms") != NULL;
    rc = orch_udf__arg_u64(cfg, "sleep", "ms", 0, &s->ms);
    if (rc < 0) {
        free(s);
        return rc;
    }
    *state = s;
    return 0;
}

/* The decimal number that data starts with, 0 if none; saturates at UINT32_MAX. */
static uint64_t leading_number(const char *data, size_t len)
{
    uint64_t n = 0;
    for (size_t k = 0; k < len && data[k] >= '0' && data[k] <= '9'; k++) {
        n = n * 10 + (uint64_t)(data[k] - '0');
        if (n > UINT32_MAX)
            return UINT32_MAX;
    }
    return n;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                          .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int sleep_run(void *state, struct orch_udf_batch *batch)
{
    const struct sleep_state *st = state;
    for (size_t i = 0; i < batch->n; i++) {
        struct orch_udf__subject s;
        int rc = orch_udf__subject(&st->base, &batch->rec[i], &s);
        if (rc == 0) {
            uint64_t ms = st->has_ms ? st->ms : s.present ? leading_number(s.data, s.len) : 0;
            sleep_ms(ms);
            rc = orch_udf__pass(&st->base, batch, i, &s);
        }
        orch_udf__subject_free(&s);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "sleep: %s", strerror(-rc));
    }
    return 0;
}

const struct orch_udf orch_udf__sleep = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "sleep",
    .init = sleep_init,
    .run = sleep_run,
    .fini = orch_udf__base_fini,
};

/* ---- fail_if ---------------------------------------------------------------------- */

enum fail_kind { FAIL_RECORD, FAIL_GROUP, FAIL_ATTEMPT, FAIL_CRASH, FAIL_HANG };

static const char *const fail_kind_names[] = {"record", "group", "attempt", "crash", "hang"};

struct fail_if_state {
    struct orch_udf__base base;
    char *contains;
    size_t len;
    enum fail_kind kind;
};

static int fail_if_setup(const struct orch_udf_config *cfg, struct fail_if_state *f)
{
    const char *contains = orch_udf_arg(cfg, "contains");
    const char *kind = orch_udf_arg(cfg, "kind");
    if (contains == NULL)
        return orch_udf_config_error(cfg, -EINVAL, "fail_if: argument contains is required");
    f->kind = FAIL_RECORD;
    if (kind != NULL) {
        size_t k = 0;
        while (k < 5 && strcmp(kind, fail_kind_names[k]) != 0)
            k++;
        if (k == 5)
            return orch_udf_config_error(
                cfg, -EINVAL,
                "fail_if: kind must be record, group, attempt, crash or hang, not '%s'", kind);
        f->kind = (enum fail_kind)k;
    }
    f->contains = strdup(contains);
    if (f->contains == NULL)
        return orch_udf_config_error(cfg, -ENOMEM, "fail_if: out of memory");
    f->len = strlen(contains);
    return 0;
}

static int fail_if_init(const struct orch_udf_config *cfg, void **state)
{
    static const char *const args[] = {"contains", "kind", NULL};
    void *st;
    int rc = orch_udf__base_init(cfg, "fail_if", ORCH_UDF__OPS_ALL, args,
                                 sizeof(struct fail_if_state), &st);
    if (rc < 0)
        return rc;
    rc = fail_if_setup(cfg, st);
    if (rc < 0) {
        free(st);
        return rc;
    }
    *state = st;
    return 0;
}

static void fail_if_fini(void *state)
{
    struct fail_if_state *f = state;
    free(f->contains);
    free(f);
}

/* Fails record i the way the call was configured; returns what run must return for the
 * batch-level kinds, or the answer's rc. Never returns for crash and hang. */
static int fail_now(const struct fail_if_state *f, struct orch_udf_batch *batch, size_t i)
{
    char msg[512];
    snprintf(msg, sizeof msg, "fail_if: input contains \"%s\"", f->contains);
    switch (f->kind) {
    case FAIL_RECORD:
        return orch_udf_fail_record(batch, i, msg);
    case FAIL_GROUP:
        return orch_udf_fail_group(batch, i, msg);
    case FAIL_ATTEMPT:
        return orch_udf_batch_error(batch, -EIO, "%s (kind=attempt)", msg);
    case FAIL_CRASH:
        fprintf(stderr, "%s (kind=crash): aborting\n", msg);
        abort();
    case FAIL_HANG:
        for (;;)
            pause();
    }
    return -EINVAL;
}

static int fail_if_run(void *state, struct orch_udf_batch *batch)
{
    const struct fail_if_state *f = state;
    for (size_t i = 0; i < batch->n; i++) {
        struct orch_udf__subject s;
        int rc = orch_udf__subject(&f->base, &batch->rec[i], &s);
        if (rc == 0) {
            bool hit = s.present && (f->len == 0 || memmem(s.data, s.len, f->contains, f->len));
            rc = hit ? fail_now(f, batch, i) : orch_udf__pass(&f->base, batch, i, &s);
        }
        orch_udf__subject_free(&s);
        if (rc < 0 && f->kind == FAIL_ATTEMPT && rc == -EIO)
            return rc; /* the message is already in batch->error */
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "fail_if: %s", strerror(-rc));
    }
    return 0;
}

const struct orch_udf orch_udf__fail_if = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "fail_if",
    .init = fail_if_init,
    .run = fail_if_run,
    .fini = fail_if_fini,
};

/* ---- flaky ------------------------------------------------------------------------ */

struct flaky_state {
    struct orch_udf__base base;
    uint64_t fail_attempts;
};

static int flaky_init(const struct orch_udf_config *cfg, void **state)
{
    static const char *const args[] = {"fail_attempts", NULL};
    void *st;
    int rc = orch_udf__base_init(cfg, "flaky", ORCH_UDF__OPS_ALL, args,
                                 sizeof(struct flaky_state), &st);
    if (rc < 0)
        return rc;
    struct flaky_state *f = st;
    rc = orch_udf__arg_u64(cfg, "flaky", "fail_attempts", 1, &f->fail_attempts);
    if (rc < 0) {
        free(f);
        return rc;
    }
    *state = f;
    return 0;
}

static int flaky_run(void *state, struct orch_udf_batch *batch)
{
    const struct flaky_state *f = state;
    for (size_t i = 0; i < batch->n; i++)
        if (batch->rec[i].attempt <= f->fail_attempts)
            return orch_udf_batch_error(
                batch, -EAGAIN,
                "flaky: grain %" PRIu64 " is on attempt %" PRIu32 " of %" PRIu64 " that fail",
                batch->rec[i].grain_id, batch->rec[i].attempt, f->fail_attempts);
    for (size_t i = 0; i < batch->n; i++) {
        struct orch_udf__subject s;
        int rc = orch_udf__subject(&f->base, &batch->rec[i], &s);
        if (rc == 0)
            rc = orch_udf__pass(&f->base, batch, i, &s);
        orch_udf__subject_free(&s);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "flaky: %s", strerror(-rc));
    }
    return 0;
}

const struct orch_udf orch_udf__flaky = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "flaky",
    .init = flaky_init,
    .run = flaky_run,
    .fini = orch_udf__base_fini,
};
