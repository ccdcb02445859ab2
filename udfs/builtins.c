/* builtins.c — the registry of built-in UDFs and the helpers they share.
 *
 * The built-ins (DESIGN §7). "Subject" and "pass" are defined in udf_int.h: the first value
 * of the first input (for reduce, the first list's values concatenated); passing it means a
 * value for every output port (map, reduce), keep(true) (filter), or one child (expand).
 * Every built-in refuses, in init, an op it does not serve and an argument it does not
 * know.
 *
 *   name         ops                 arguments          what it does
 *   read_file    map                 -                  subject is a path; the file's bytes.
 *                                                       Unreadable: RecordFailure
 *                                                       "read_file: PATH: strerror".
 *   split        expand, aligned     sep (required,     one child per piece between
 *                                    non-empty)         separators; a final separator makes
 *                                                       no extra empty piece; consecutive
 *                                                       separators make empty pieces; empty
 *                                                       input: zero children.
 *   split_lines  expand, aligned     -                  split with sep="\n".
 *   upper        map                 -                  ASCII upper case of the subject.
 *   identity     any                 -                  passes the subject.
 *   nonempty     filter              -                  keep iff the subject is non-empty.
 *   blank        filter (1-2 inputs) -                  keep iff the LAST input is absent or
 *                                                      only white space.
 *   first        map (1-16 inputs)   -                  the first input that is present;
 *                                                      Dropped when none is.
 *   concat       reduce              sep (default "")   the first list's values joined.
 *   count        reduce              -                  number of values of the first
 *                                                       list, decimal text ("0" for none).
 *   sleep        any                 ms                 sleeps ms milliseconds, or without
 *                                                       ms as many as the decimal digits
 *                                                       the subject starts with (0 if
 *                                                       none), then passes. Per record.
 *   fail_if      any                 contains (req.),   passes unless the subject contains
 *                                    kind (default      `contains` (the empty string is in
 *                                    record)            everything); then kind=record:
 *                                                       RecordFailure, group: GroupFailure,
 *                                                       attempt: run returns -EIO, crash:
 *                                                       abort(), hang: sleeps forever.
 *   flaky        any                 fail_attempts      run returns -EAGAIN when any record
 *                                    (default 1)        has attempt <= fail_attempts; else
 *                                                       passes every record.
 *   pdf_render   expand, aligned     dpi (150),         one child per page of a PDF (bytes
 *                                    format (png|gray), when the subject starts with "%PDF-",
 *                                    max_pixels         else a path), in page order: an
 *                                    (50000000)         8-bit grayscale PNG, or a binary
 *                                                       PGM with format=gray. MuPDF.
 *   pdf_text     expand, aligned     -                  one child per page: its own text
 *                                                       layer, UTF-8. Both: bad PDF,
 *                                                       encrypted, damaged, page too large:
 *                                                       RecordFailure with MuPDF's message
 *                                                       (builtins_pdf.c has the rules).
 *   page_stats   map                 threshold, bins,   a page image's statistics as JSON,
 *                                    max_pixels         on a GPU or the CPU (builtins_gpu.c).
 *
 * Without a subject (an optional input that was Dropped), every built-in drops the record,
 * except nonempty (keep false), concat and count (which read all values of the list).
 */
#include "udf_int.h"
#include "orch_error.h"
#include "udf_modules_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where each built-in's code is: in every orch process (udf), or in a module, a shared
 * object of its own under ORCH_UDF_MODULE_DIR (udfs/meson.build), opened the first time a
 * process asks for one of its built-ins. The FFmpeg and Tesseract built-ins are modules:
 * loading their libraries costs a process about 45 ms and 13 ms of start (the dynamic
 * linker's relocations), which every driver, `orch sql` and worker of any other function
 * would pay. A module's code calls the helpers of this file and builtins_sig.c, found in
 * the process that opens it (the executable exports its symbols). */
struct builtin {
    const char *name;
    const struct orch_udf *udf; /* NULL: in `module` */
    const char *module;
};

static const struct builtin builtins[] = {
    {"read_file", &orch_udf__read_file, NULL},
    {"split", &orch_udf__split, NULL},
    {"split_lines", &orch_udf__split_lines, NULL},
    {"upper", &orch_udf__upper, NULL},
    {"identity", &orch_udf__identity, NULL},
    {"nonempty", &orch_udf__nonempty, NULL},
    {"concat", &orch_udf__concat, NULL},
    {"count", &orch_udf__count, NULL},
    {"sleep", &orch_udf__sleep, NULL},
    {"fail_if", &orch_udf__fail_if, NULL},
    {"flaky", &orch_udf__flaky, NULL},
    {"tesseract_ocr", NULL, "ocr"},
    {"pdf_render", &orch_udf__pdf_render, NULL},
    {"pdf_text", &orch_udf__pdf_text, NULL},
    {"page_stats", &orch_udf__page_stats, NULL},
    {"blank", &orch_udf__blank, NULL},
    {"first", &orch_udf__first, NULL},
    {"video_probe", NULL, "video"},
    {"video_scenes", NULL, "video"},
    {"video_frames", NULL, "video"},
    {"not_dark", &orch_udf__not_dark, NULL},
};

#define NBUILTINS (sizeof builtins / sizeof builtins[0])

/* The structs found in modules, by index in builtins[]; the modules stay open. */
static const struct orch_udf *from_module[NBUILTINS];
static const char *module_dir; /* orch_udf_set_module_dir's; NULL: the build's, else installed */

void orch_udf_set_module_dir(const char *dir)
{
    module_dir = dir;
}

static int load(size_t i, const struct orch_udf **out)
{
    const struct builtin *b = &builtins[i];
    if (b->udf != NULL || from_module[i] != NULL) {
        *out = b->udf != NULL ? b->udf : from_module[i];
        return 0;
    }
    char path[4096], symbol[128];
    snprintf(path, sizeof path, "%s/orch_%s.so", module_dir ? module_dir : ORCH_UDF_MODULE_DIR,
             b->module);
    if (module_dir == NULL && access(path, F_OK) < 0)
        snprintf(path, sizeof path, "%s/orch_%s.so", ORCH_UDF_MODULE_INSTALL_DIR, b->module);
    snprintf(symbol, sizeof symbol, "orch_udf__%s", b->name);
    /* Opened again for each built-in of the module: dlopen counts, the module loads once. */
    void *dl;
    int rc = orch_udf_load_library(path, symbol, out, &dl);
    if (rc < 0) {
        char why[1024];
        snprintf(why, sizeof why, "%s", orch_error_detail());
        return orch_error_set(rc, "built-in %s: %s", b->name, why);
    }
    from_module[i] = *out;
    return 0;
}

int orch_udf_builtin_get(const char *name, const struct orch_udf **out)
{
    *out = NULL;
    for (size_t i = 0; name != NULL && i < NBUILTINS; i++)
        if (strcmp(builtins[i].name, name) == 0)
            return load(i, out);
    return orch_error_set(-ENOENT, "unknown built-in function '%s'", name ? name : "(null)");
}

const struct orch_udf *orch_udf_builtin(const char *name)
{
    const struct orch_udf *u;
    return orch_udf_builtin_get(name, &u) == 0 ? u : NULL;
}

size_t orch_udf_builtin_count(void)
{
    return NBUILTINS;
}

const struct orch_udf *orch_udf_builtin_at(size_t i)
{
    const struct orch_udf *u;
    return i < NBUILTINS && load(i, &u) == 0 ? u : NULL;
}

static bool arg_known(const char *key, const char *const *args)
{
    for (size_t i = 0; args != NULL && args[i] != NULL; i++)
        if (strcmp(args[i], key) == 0)
            return true;
    return false;
}

int orch_udf__base_init(const struct orch_udf_config *cfg, const char *name, unsigned ops,
                        const char *const *args, size_t size, void **state)
{
    if ((unsigned)cfg->op >= 8 * sizeof ops || !(ops & ORCH_UDF__OP(cfg->op)))
        return orch_udf_config_error(cfg, -EINVAL, "%s cannot be used as %s", name,
                                     orch_udf_op_name(cfg->op));
    for (size_t i = 0; i < cfg->nargs; i++)
        if (!arg_known(cfg->arg_keys[i], args))
            return orch_udf_config_error(cfg, -EINVAL, "%s has no argument '%s'", name,
                                         cfg->arg_keys[i]);
    struct orch_udf__base *b = calloc(1, size);
    if (b == NULL)
        return orch_udf_config_error(cfg, -ENOMEM, "%s: out of memory", name);
    b->name = name;
    b->op = cfg->op;
    b->nin = cfg->nin;
    b->nout = cfg->nout;
    *state = b;
    return 0;
}

void orch_udf__base_fini(void *state)
{
    free(state);
}

int orch_udf__arg_u64(const struct orch_udf_config *cfg, const char *name, const char *key,
                      uint64_t dflt, uint64_t *out)
{
    const char *v = orch_udf_arg(cfg, key);
    if (v == NULL) {
        *out = dflt;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0)
        return orch_udf_config_error(cfg, -EINVAL,
                                     "%s: argument %s must be a non-negative integer, not '%s'",
                                     name, key, v);
    *out = n;
    return 0;
}

int orch_udf__subject(const struct orch_udf__base *b, const struct orch_udf_record *r,
                      struct orch_udf__subject *s)
{
    memset(s, 0, sizeof *s);
    if (b->nin == 0)
        return 0;
    const struct orch_udf_input *in = &r->in[0];
    if (b->op != ORCH_UDF_OP_REDUCE) {
        if (in->n >= 1 && in->v[0].present) {
            s->data = in->v[0].data;
            s->len = in->v[0].len;
            s->present = true;
        }
        return 0;
    }
    size_t len = 0;
    for (size_t k = 0; k < in->n; k++)
        if (in->v[k].present)
            len += in->v[k].len;
    s->owned = malloc(len > 0 ? len : 1);
    if (s->owned == NULL)
        return -ENOMEM;
    size_t at = 0;
    for (size_t k = 0; k < in->n; k++)
        if (in->v[k].present && in->v[k].len > 0) {
            memcpy(s->owned + at, in->v[k].data, in->v[k].len);
            at += in->v[k].len;
        }
    s->data = s->owned;
    s->len = len;
    s->present = true;
    return 0;
}

void orch_udf__subject_free(struct orch_udf__subject *s)
{
    free(s->owned);
    s->owned = NULL;
}

int orch_udf__emit_all(const struct orch_udf__base *b, struct orch_udf_batch *batch, size_t i,
                       const void *data, size_t len)
{
    for (size_t p = 0; p < b->nout; p++) {
        int rc = orch_udf_emit(batch, i, p, data, len);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int orch_udf__pass(const struct orch_udf__base *b, struct orch_udf_batch *batch, size_t i,
                   const struct orch_udf__subject *s)
{
    if (!s->present)
        return orch_udf_drop(batch, i);
    switch (b->op) {
    case ORCH_UDF_OP_FILTER:
        return orch_udf_keep(batch, i, true);
    case ORCH_UDF_OP_EXPAND:
    case ORCH_UDF_OP_EXPAND_ALIGNED: {
        int rc = orch_udf_child(batch, i);
        return rc < 0 ? rc : orch_udf__emit_all(b, batch, i, s->data, s->len);
    }
    case ORCH_UDF_OP_MAP:
    case ORCH_UDF_OP_REDUCE:
        break;
    }
    return orch_udf__emit_all(b, batch, i, s->data, s->len);
}
