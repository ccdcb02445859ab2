/* builtins_text.c — the data built-ins: read_file, split, split_lines, upper, identity,
 * nonempty, concat, count (their contract is the table in builtins.c). */
#define _GNU_SOURCE /* memmem */
#include "udf_int.h"

#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const no_args[] = {NULL};

/* ---- shared init/fini for built-ins with no state beyond the base ------------------- */

#define SIMPLE_INIT(fn, name, ops)                                                             \
    static int fn(const struct orch_udf_config *cfg, void **state)                             \
    {                                                                                          \
        return orch_udf__base_init(cfg, name, ops, no_args, sizeof(struct orch_udf__base),     \
                                   state);                                                     \
    }

/* ---- read_file ------------------------------------------------------------------------ */

/* Reads the whole file at fd into *buf (malloc'd) and *len. Returns 0 or -errno. */
static int read_all(int fd, char **buf, size_t *len)
{
    struct stat st;
    size_t cap = 0, n = 0, first = 65536;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        first = (size_t)st.st_size + 1; /* +1: see EOF in one read */
    char *b = NULL;
    for (;;) {
        if (n == cap && orch__grow_n(&b, &cap, n + first, 1) < 0) {
            free(b);
            return -ENOMEM;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(b);
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *buf = b;
    *len = n;
    return 0;
}

/* One record of read_file: answers it, or returns -ENOMEM. */
static int read_file_one(const struct orch_udf__base *b, struct orch_udf_batch *batch, size_t i)
{
    struct orch_udf__subject s;
    orch_udf__subject(b, &batch->rec[i], &s);
    if (!s.present)
        return orch_udf_drop(batch, i);
    char msg[512];
    if (s.len == 0 || memchr(s.data, '\0', s.len) != NULL) {
        snprintf(msg, sizeof msg, "read_file: the path is %s",
                 s.len == 0 ? "empty" : "not text (it holds a NUL byte)");
        return orch_udf_fail_record(batch, i, msg);
    }
    char *path = strndup(s.data, s.len);
    if (path == NULL)
        return -ENOMEM;
    int rc = 0;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer; only a regular file
     * (or a directory, which fails to read) is read. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    bool irregular = false;
    if (fd < 0 || fstat(fd, &st) != 0)
        rc = -errno;
    else
        irregular = !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
    char *data = NULL;
    size_t len = 0;
    if (rc == 0 && !irregular)
        rc = read_all(fd, &data, &len);
    if (fd >= 0)
        close(fd);
    if (irregular) {
        snprintf(msg, sizeof msg, "read_file: %s: not a regular file", path);
        rc = orch_udf_fail_record(batch, i, msg);
    } else if (rc == 0)
        rc = orch_udf__emit_all(b, batch, i, data, len);
    else if (rc != -ENOMEM) {
        snprintf(msg, sizeof msg, "read_file: %s: %s", path, strerror(-rc));
        rc = orch_udf_fail_record(batch, i, msg);
    }
    free(data);
    free(path);
    return rc;
}

static int read_file_run(void *state, struct orch_udf_batch *batch)
{
    for (size_t i = 0; i < batch->n; i++) {
        int rc = read_file_one(state, batch, i);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "read_file: %s", strerror(-rc));
    }
    return 0;
}

SIMPLE_INIT(read_file_init, "read_file", ORCH_UDF__OP(ORCH_UDF_OP_MAP))

const struct orch_udf orch_udf__read_file = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "read_file",
    .init = read_file_init,
    .run = read_file_run,
    .fini = orch_udf__base_fini,
};

/* ---- split, split_lines ------------------------------------------------------------ */

struct split_state {
    struct orch_udf__base base;
    char *sep;
    size_t seplen;
    bool crlf; /* split_lines: a \r just before a separator belongs to the line end */
};

static int split_setup(const struct orch_udf_config *cfg, const char *name,
                       const char *const *args, const char *sep, void **state)
{
    void *st;
    int rc = orch_udf__base_init(cfg, name, ORCH_UDF__OPS_EXPAND, args,
                                 sizeof(struct split_state), &st);
    if (rc < 0)
        return rc;
    struct split_state *s = st;
    if (sep == NULL || sep[0] == '\0') {
        free(s);
        return orch_udf_config_error(
            cfg, -EINVAL, "%s: argument sep is required and must not be empty", name);
    }
    s->sep = strdup(sep);
    if (s->sep == NULL) {
        free(s);
        return orch_udf_config_error(cfg, -ENOMEM, "%s: out of memory", name);
    }
    s->seplen = strlen(sep);
    *state = s;
    return 0;
}

static int split_init(const struct orch_udf_config *cfg, void **state)
{
    static const char *const args[] = {"sep", NULL};
    return split_setup(cfg, "split", args, orch_udf_arg(cfg, "sep"), state);
}

static int split_lines_init(const struct orch_udf_config *cfg, void **state)
{
    int rc = split_setup(cfg, "split_lines", no_args, "\n", state);
    if (rc == 0)
        ((struct split_state *)*state)->crlf = true;
    return rc;
}

static void split_fini(void *state)
{
    struct split_state *s = state;
    free(s->sep);
    free(s);
}

static int split_one(struct split_state *st, struct orch_udf_batch *batch, size_t i)
{
    struct orch_udf__subject s;
    orch_udf__subject(&st->base, &batch->rec[i], &s);
    if (!s.present)
        return orch_udf_drop(batch, i);
    if (s.len == 0)
        return orch_udf_no_children(batch, i);
    const char *p = s.data, *end = s.data + s.len;
    while (p < end) {
        const char *q = memmem(p, (size_t)(end - p), st->sep, st->seplen);
        size_t piece = q != NULL ? (size_t)(q - p) : (size_t)(end - p);
        /* CRLF text gives the same lines as LF text, as lines() does; a \r not followed
         * by \n (the last line's, or one inside a line) stays in the line. */
        if (st->crlf && q != NULL && piece > 0 && p[piece - 1] == '\r')
            piece--;
        int rc = orch_udf_child(batch, i);
        if (rc == 0)
            rc = orch_udf__emit_all(&st->base, batch, i, p, piece);
        if (rc < 0)
            return rc;
        if (q == NULL)
            break;
        p = q + st->seplen; /* p == end: a final separator, no extra piece */
    }
    return 0;
}

static int split_run(void *state, struct orch_udf_batch *batch)
{
    struct split_state *st = state;
    for (size_t i = 0; i < batch->n; i++) {
        int rc = split_one(st, batch, i);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "%s: %s", st->base.name, strerror(-rc));
    }
    return 0;
}

const struct orch_udf orch_udf__split = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "split",
    .init = split_init,
    .run = split_run,
    .fini = split_fini,
};

const struct orch_udf orch_udf__split_lines = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "split_lines",
    .init = split_lines_init,
    .run = split_run,
    .fini = split_fini,
};

/* ---- upper, identity -------------------------------------------------------------- */

static int upper_one(const struct orch_udf__base *b, struct orch_udf_batch *batch, size_t i)
{
    struct orch_udf__subject s;
    orch_udf__subject(b, &batch->rec[i], &s);
    if (!s.present)
        return orch_udf_drop(batch, i);
    char *u = malloc(s.len > 0 ? s.len : 1);
    if (u == NULL)
        return -ENOMEM;
    for (size_t k = 0; k < s.len; k++) {
        char c = s.data[k];
        u[k] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
    }
    int rc = orch_udf__emit_all(b, batch, i, u, s.len);
    free(u);
    return rc;
}

static int upper_run(void *state, struct orch_udf_batch *batch)
{
    for (size_t i = 0; i < batch->n; i++) {
        int rc = upper_one(state, batch, i);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "upper: %s", strerror(-rc));
    }
    return 0;
}

SIMPLE_INIT(upper_init, "upper", ORCH_UDF__OP(ORCH_UDF_OP_MAP))

const struct orch_udf orch_udf__upper = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "upper",
    .init = upper_init,
    .run = upper_run,
    .fini = orch_udf__base_fini,
};

static int identity_run(void *state, struct orch_udf_batch *batch)
{
    const struct orch_udf__base *b = state;
    for (size_t i = 0; i < batch->n; i++) {
        struct orch_udf__subject s;
        int rc = orch_udf__subject(b, &batch->rec[i], &s);
        if (rc == 0)
            rc = orch_udf__pass(b, batch, i, &s);
        orch_udf__subject_free(&s);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "identity: %s", strerror(-rc));
    }
    return 0;
}

SIMPLE_INIT(identity_init, "identity", ORCH_UDF__OPS_ALL)

const struct orch_udf orch_udf__identity = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "identity",
    .init = identity_init,
    .run = identity_run,
    .fini = orch_udf__base_fini,
};

/* ---- nonempty --------------------------------------------------------------------- */

static int nonempty_run(void *state, struct orch_udf_batch *batch)
{
    const struct orch_udf__base *b = state;
    for (size_t i = 0; i < batch->n; i++) {
        struct orch_udf__subject s;
        orch_udf__subject(b, &batch->rec[i], &s);
        int rc = orch_udf_keep(batch, i, s.present && s.len > 0);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "nonempty: %s", strerror(-rc));
    }
    return 0;
}

SIMPLE_INIT(nonempty_init, "nonempty", ORCH_UDF__OP(ORCH_UDF_OP_FILTER))

const struct orch_udf orch_udf__nonempty = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "nonempty",
    .init = nonempty_init,
    .run = nonempty_run,
    .fini = orch_udf__base_fini,
};

/* ---- concat, count ------------------------------------------------------------------ */

struct concat_state {
    struct orch_udf__base base;
    char *sep;
    size_t seplen;
    bool crlf; /* split_lines: a \r just before a separator belongs to the line end */
};

static int concat_init(const struct orch_udf_config *cfg, void **state)
{
    static const char *const args[] = {"sep", NULL};
    void *st;
    int rc = orch_udf__base_init(cfg, "concat", ORCH_UDF__OP(ORCH_UDF_OP_REDUCE), args,
                                 sizeof(struct concat_state), &st);
    if (rc < 0)
        return rc;
    struct concat_state *c = st;
    const char *sep = orch_udf_arg(cfg, "sep");
    c->sep = strdup(sep != NULL ? sep : "");
    if (c->sep == NULL) {
        free(c);
        return orch_udf_config_error(cfg, -ENOMEM, "concat: out of memory");
    }
    c->seplen = strlen(c->sep);
    *state = c;
    return 0;
}

static void concat_fini(void *state)
{
    struct concat_state *c = state;
    free(c->sep);
    free(c);
}

static int concat_one(const struct concat_state *c, struct orch_udf_batch *batch, size_t i)
{
    const struct orch_udf_input *in = c->base.nin > 0 ? &batch->rec[i].in[0] : NULL;
    size_t n = in != NULL ? in->n : 0, len = 0, nv = 0;
    for (size_t k = 0; k < n; k++)
        if (in->v[k].present) {
            len += in->v[k].len;
            nv++;
        }
    if (nv > 1)
        len += (nv - 1) * c->seplen;
    char *out = malloc(len > 0 ? len : 1), *at = out;
    if (out == NULL)
        return -ENOMEM;
    bool first = true;
    for (size_t k = 0; k < n; k++) {
        if (!in->v[k].present)
            continue;
        if (!first) {
            memcpy(at, c->sep, c->seplen);
            at += c->seplen;
        }
        first = false;
        if (in->v[k].len > 0)
            memcpy(at, in->v[k].data, in->v[k].len);
        at += in->v[k].len;
    }
    int rc = orch_udf__emit_all(&c->base, batch, i, out, len);
    free(out);
    return rc;
}

static int concat_run(void *state, struct orch_udf_batch *batch)
{
    for (size_t i = 0; i < batch->n; i++) {
        int rc = concat_one(state, batch, i);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "concat: %s", strerror(-rc));
    }
    return 0;
}

const struct orch_udf orch_udf__concat = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "concat",
    .init = concat_init,
    .run = concat_run,
    .fini = concat_fini,
};

static int count_run(void *state, struct orch_udf_batch *batch)
{
    const struct orch_udf__base *b = state;
    for (size_t i = 0; i < batch->n; i++) {
        size_t n = 0;
        if (b->nin > 0)
            for (size_t k = 0; k < batch->rec[i].in[0].n; k++)
                n += batch->rec[i].in[0].v[k].present != 0;
        char text[32];
        int len = snprintf(text, sizeof text, "%zu", n);
        int rc = orch_udf__emit_all(b, batch, i, text, (size_t)len);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "count: %s", strerror(-rc));
    }
    return 0;
}

SIMPLE_INIT(count_init, "count", ORCH_UDF__OP(ORCH_UDF_OP_REDUCE))

const struct orch_udf orch_udf__count = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "count",
    .init = count_init,
    .run = count_run,
    .fini = orch_udf__base_fini,
};
