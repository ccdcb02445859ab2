/* builtin_sigs.c — the table of built-in function signatures (DESIGN §7). */
#include "builtin_sigs.h"

#include <stdio.h>
#include <string.h>

#define NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const struct orch_builtin_arg split_args[] = {
    {.key = "sep", .type = ORCH_BUILTIN_ARG_STRING, .required = true, .min = 1},
};
static const struct orch_builtin_arg concat_args[] = {
    {.key = "sep", .type = ORCH_BUILTIN_ARG_STRING, .def = ""},
};
static const struct orch_builtin_arg sleep_args[] = {
    {.key = "ms", .type = ORCH_BUILTIN_ARG_INT, .min = 0, .max = 86400000},
};
static const char *const fail_kinds[] = {"record", "group", "attempt", "crash", "hang", NULL};
static const struct orch_builtin_arg fail_if_args[] = {
    {.key = "contains", .type = ORCH_BUILTIN_ARG_STRING, .required = true},
    {.key = "kind", .type = ORCH_BUILTIN_ARG_CHOICE, .choices = fail_kinds, .def = "record"},
};
static const struct orch_builtin_arg flaky_args[] = {
    {.key = "fail_attempts",
     .type = ORCH_BUILTIN_ARG_INT,
     .min = 0,
     .max = 1000000,
     .def = "1"},
};
static const char *const pdf_formats[] = {"png", "gray", NULL};
static const struct orch_builtin_arg pdf_render_args[] = {
    {.key = "dpi", .type = ORCH_BUILTIN_ARG_INT, .min = 1, .max = 1200, .def = "150"},
    {.key = "format", .type = ORCH_BUILTIN_ARG_CHOICE, .choices = pdf_formats, .def = "png"},
    {.key = "max_pixels",
     .type = ORCH_BUILTIN_ARG_INT,
     .min = 1,
     .max = 1000000000,
     .def = "50000000"},
};
static const struct orch_builtin_arg ocr_args[] = {
    {.key = "lang", .type = ORCH_BUILTIN_ARG_STRING, .min = 1, .def = "eng"},
    {.key = "psm", .type = ORCH_BUILTIN_ARG_INT, .min = 0, .max = 13, .def = "3"},
};
static const struct orch_builtin_arg page_stats_args[] = { /* udfs/builtins_gpu.c */
    {.key = "threshold", .type = ORCH_BUILTIN_ARG_INT, .min = 0, .max = 256, .def = "128"},
    {.key = "bins", .type = ORCH_BUILTIN_ARG_INT, .min = 1, .max = 256, .def = "16"},
    {.key = "max_pixels",
     .type = ORCH_BUILTIN_ARG_INT,
     .min = 1,
     .max = 2147483647,
     .def = "50000000"},
};
#define VIDEO_MAX_PIXELS_ARG                                                                   \
    {                                                                                          \
        .key = "max_pixels", .type = ORCH_BUILTIN_ARG_INT, .min = 1, .max = 1000000000,       \
        .def = "50000000"                                                                      \
    }
#define MICRO(n) ((int64_t)(n)*ORCH_BUILTIN_MICRO)
static const struct orch_builtin_arg video_scenes_args[] = {
    /* udfs/builtins_video.c */
    {.key = "threshold",
     .type = ORCH_BUILTIN_ARG_DECIMAL,
     .min = 0,
     .max = MICRO(255),
     .def = "30"},
    {.key = "min_len",
     .type = ORCH_BUILTIN_ARG_DECIMAL,
     .min = 0,
     .max = MICRO(86400),
     .def = "1"},
    {.key = "max_len",
     .type = ORCH_BUILTIN_ARG_DECIMAL,
     .min = 0,
     .max = MICRO(86400),
     .def = "0"},
    VIDEO_MAX_PIXELS_ARG,
};
static const char *const frame_formats[] = {"pgm", "png", NULL};
static const struct orch_builtin_arg video_frames_args[] = {
    /* builtins_video_frames.c */
    {.key = "fps",
     .type = ORCH_BUILTIN_ARG_DECIMAL,
     .min = 1000,
     .max = MICRO(1000),
     .def = "1"}, /* 0.001 .. 1000 frames a second */
    {.key = "max_side", .type = ORCH_BUILTIN_ARG_INT, .min = 0, .max = 65536, .def = "0"},
    {.key = "format", .type = ORCH_BUILTIN_ARG_CHOICE, .choices = frame_formats, .def = "pgm"},
    VIDEO_MAX_PIXELS_ARG,
};
static const struct orch_builtin_arg not_dark_args[] = {
    {.key = "max_mean", .type = ORCH_BUILTIN_ARG_INT, .min = 0, .max = 255, .def = "16"},
};

#define SIG(n, o, lo, hi, a, s)                                                                \
    {                                                                                          \
        .name = n, .ops = o, .min_inputs = lo, .max_inputs = hi, .outputs = 1,                 \
        .nargs = NARGS(a), .args = a, .summary = s                                             \
    }
#define SIG0(n, o, lo, hi, s)                                                                  \
    {                                                                                          \
        .name = n, .ops = o, .min_inputs = lo, .max_inputs = hi, .outputs = 1, .nargs = 0,     \
        .args = NULL, .summary = s                                                             \
    }

/* identity, sleep, fail_if and flaky serve every operation (as udfs/builtins.c does), so
 * that fault tests can put a failure, a delay or a pass-through anywhere in a pipeline. */
static const struct orch_builtin_sig table[] = {
    SIG0("read_file", ORCH_BUILTIN_MAP, 1, 1, "a path in, the file's bytes out"),
    SIG("split", ORCH_BUILTIN_EXPAND, 1, 1, split_args,
        "one child per piece between separators"),
    SIG0("split_lines", ORCH_BUILTIN_EXPAND, 1, 1, "split(sep=\"\\n\")"),
    SIG0("upper", ORCH_BUILTIN_MAP, 1, 1, "ASCII upper case"),
    SIG0("identity", ORCH_BUILTIN_ANY, 1, 1, "the input, unchanged"),
    SIG0("nonempty", ORCH_BUILTIN_FILTER, 1, 1, "true iff the value is not empty"),
    SIG0("blank", ORCH_BUILTIN_FILTER, 1, 2,
         "true iff the last input is absent or only white space"),
    SIG0("first", ORCH_BUILTIN_MAP, 1, 16, "the first input that is present"),
    SIG("concat", ORCH_BUILTIN_REDUCE, 1, 1, concat_args, "the values joined by sep"),
    SIG0("count", ORCH_BUILTIN_REDUCE, 1, 1, "the number of values, as decimal text"),
    SIG("sleep", ORCH_BUILTIN_ANY, 1, 1, sleep_args, "the input, after ms milliseconds"),
    SIG("fail_if", ORCH_BUILTIN_ANY, 1, 1, fail_if_args,
        "the input, or a failure of `kind` when it contains `contains`"),
    SIG("flaky", ORCH_BUILTIN_ANY, 1, 1, flaky_args,
        "an attempt failure on the first fail_attempts attempts, then the input"),
    SIG("pdf_render", ORCH_BUILTIN_EXPAND, 1, 1, pdf_render_args,
        "a PDF in, one rendered page image per child"),
    SIG0("pdf_text", ORCH_BUILTIN_EXPAND, 1, 1, "a PDF in, one page's own text per child"),
    SIG("tesseract_ocr", ORCH_BUILTIN_MAP, 1, 1, ocr_args, "an image in, its text out"),
    SIG("page_stats", ORCH_BUILTIN_MAP, 1, 1, page_stats_args,
        "a page image in, its statistics (JSON) out"),
    SIG0("video_probe", ORCH_BUILTIN_MAP, 1, 1,
         "a video in, its container and streams (JSON) out"),
    SIG("video_scenes", ORCH_BUILTIN_EXPAND, 1, 1, video_scenes_args,
        "a video in, one \"START END\" span in seconds per clip"),
    {.name = "video_frames",
     .ops = ORCH_BUILTIN_EXPAND,
     .min_inputs = 1,
     .max_inputs = 2,
     .outputs = 2,
     .nargs = NARGS(video_frames_args),
     .args = video_frames_args,
     .summary = "a video (and a span) in, one gray frame and its time per sample"},
    SIG("not_dark", ORCH_BUILTIN_FILTER, 1, 2, not_dark_args,
        "true iff the mean in page_stats' JSON (the last input) is over max_mean"),
};

const struct orch_builtin_sig *orch_builtin_sig_find(const char *name)
{
    for (int i = 0; i < NARGS(table); i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

int orch_builtin_sig_count(void)
{
    return NARGS(table);
}

const struct orch_builtin_sig *orch_builtin_sig_at(int i)
{
    return i >= 0 && i < NARGS(table) ? &table[i] : NULL;
}

const struct orch_builtin_arg *orch_builtin_sig_arg(const struct orch_builtin_sig *sig,
                                                    const char *key)
{
    for (int i = 0; i < sig->nargs; i++)
        if (strcmp(sig->args[i].key, key) == 0)
            return &sig->args[i];
    return NULL;
}

const char *orch_builtin_ops_text(unsigned ops)
{
    switch (ops) {
    case ORCH_BUILTIN_MAP:
        return "map";
    case ORCH_BUILTIN_EXPAND:
        return "expand or expand aligned";
    case ORCH_BUILTIN_FILTER:
        return "filter";
    case ORCH_BUILTIN_REDUCE:
        return "reduce";
    case ORCH_BUILTIN_ANY:
        return "any operation";
    default:
        return "several operations";
    }
}

bool orch_builtin_decimal(const char *text, int64_t *micro)
{
    const char *p = text;
    bool neg = *p == '-';
    p += neg;
    int64_t whole = 0, frac = 0;
    int digits = 0, decimals = 0;
    for (; *p >= '0' && *p <= '9' && digits < 13; p++, digits++)
        whole = whole * 10 + (*p - '0');
    if (digits == 0 || digits > 12)
        return false;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9' && decimals < 7; p++, decimals++)
            frac = frac * 10 + (*p - '0');
        if (decimals == 0 || decimals > 6)
            return false;
    }
    if (*p != '\0')
        return false;
    for (int k = decimals; k < 6; k++)
        frac *= 10;
    int64_t v = whole * ORCH_BUILTIN_MICRO + frac;
    *micro = neg ? -v : v;
    return true;
}

char *orch_builtin_decimal_text(int64_t micro, char buf[ORCH_BUILTIN_DECIMAL_TEXT_MAX])
{
    uint64_t m = micro < 0 ? 0 - (uint64_t)micro : (uint64_t)micro;
    int n = snprintf(buf, ORCH_BUILTIN_DECIMAL_TEXT_MAX, "%s%llu", micro < 0 ? "-" : "",
                     (unsigned long long)(m / ORCH_BUILTIN_MICRO));
    uint64_t frac = m % ORCH_BUILTIN_MICRO;
    if (frac != 0) {
        int decimals = 6;
        while (frac % 10 == 0)
            frac /= 10, decimals--;
        snprintf(buf + n, (size_t)(ORCH_BUILTIN_DECIMAL_TEXT_MAX - n), ".%0*llu", decimals,
                 (unsigned long long)frac);
    }
    return buf;
}
