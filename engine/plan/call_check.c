/* call_check.c — a call's arguments and options: parsing, ranges, built-in signatures. */
#include "plan_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_WORKERS,
    OPT_BATCH,
    OPT_BATCH_BYTES,
    OPT_CPUS,
    OPT_GPUS,
    OPT_RETRIES,
    OPT_TIMEOUT,
    OPT_RESERVE,
    OPT__COUNT
};
static const char *const opt_names[OPT__COUNT] = {
    "workers", "batch", "batch_bytes", "cpus", "gpus", "retries", "timeout", "reserve",
};

#define TIMEOUT_MAX_MS (1000LL * 3600 * 1000) /* 1000h */
#define BATCH_BYTES_MAX (1LL << 50)

/* A value as it may appear in a message: at most 60 bytes, unprintable bytes escaped.
 * When tmp runs out of memory, the builder is marked so (its message would be wrong, and
 * the build then answers -ENOMEM instead of showing it). */
static const char *shown(orch_plan_builder *b, struct orch__buf *tmp, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n && i < 60; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch >= 0x7f)
            orch__buf_printf(tmp, "\\x%02x", ch);
        else
            orch__buf_putc(tmp, (char)ch);
    }
    if (n > 60)
        orch__buf_puts(tmp, "...");
    if (tmp->oom)
        b->oom = true;
    return tmp->oom || !tmp->p ? "" : tmp->p;
}

/* Parses [0-9]+ (at most 18 digits) at *s, advancing *s. */
static bool parse_digits(const char **s, int64_t *v)
{
    const char *p = *s;
    int64_t x = 0;
    int n = 0;
    while (*p >= '0' && *p <= '9') {
        if (++n > 18)
            return false;
        x = x * 10 + (*p++ - '0');
    }
    if (n == 0)
        return false;
    *s = p;
    *v = x;
    return true;
}

static bool parse_int(const char *s, int64_t lo, int64_t hi, int64_t *v)
{
    bool neg = *s == '-';
    s += neg;
    if (!parse_digits(&s, v) || *s)
        return false;
    if (neg)
        *v = -*v;
    return *v >= lo && *v <= hi;
}

/* A decimal with at most 6 decimals, 0..1024. */
static bool parse_amount(const char *s, double *v)
{
    int64_t micro;
    if (s[0] == '-' || !orch_builtin_decimal(s, &micro) ||
        micro > 1024 * (int64_t)ORCH_BUILTIN_MICRO)
        return false;
    *v = (double)micro / ORCH_BUILTIN_MICRO; /* correctly rounded, as strtod would be */
    return true;
}

static bool parse_size(const char *s, int64_t *v)
{
    static const struct {
        const char *suffix;
        int64_t mult;
    } units[] = {{"", 1},           {"K", 1000},        {"M", 1000000},
                 {"G", 1000000000}, {"KiB", 1LL << 10}, {"MiB", 1LL << 20},
                 {"GiB", 1LL << 30}};
    int64_t n;
    if (!parse_digits(&s, &n))
        return false;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(s, units[i].suffix) == 0) {
            if (n > BATCH_BYTES_MAX / units[i].mult)
                return false;
            *v = n * units[i].mult;
            return *v > 0;
        }
    return false;
}

/* 0 ok, 1 malformed, 2 zero, 3 too long. */
static int parse_duration(const char *s, int64_t *ms)
{
    static const struct {
        const char *suffix;
        int64_t mult;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    int64_t n;
    if (!parse_digits(&s, &n))
        return 1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(s, units[i].suffix) == 0) {
            if (n > TIMEOUT_MAX_MS / units[i].mult)
                return 3;
            *ms = n * units[i].mult;
            return *ms == 0 ? 2 : 0;
        }
    return 1;
}

static int option_value(orch_plan_builder *b, struct b_call *c, int opt, const char *value,
                        orch_loc loc, const char *show)
{
    struct orch_call_opts *o = &c->opts;
    const char *name = opt_names[opt];
    int64_t v;
    switch (opt) {
    case OPT_BATCH:
        if (strcmp(value, "auto") == 0) {
            o->batch = ORCH_BATCH_AUTO;
            return 0;
        }
        if (!parse_int(value, 1, 1000000, &v) || value[0] == '-')
            return orch__error(b, loc,
                               "option 'batch' must be auto or an integer from 1 to 1000000 "
                               "(the most records the UDF takes in one run), not '%s'",
                               show);
        o->batch = (int)v;
        return 0;
    case OPT_WORKERS:
    case OPT_RETRIES: {
        int64_t lo = opt == OPT_RETRIES ? 0 : 1;
        int64_t hi = opt == OPT_WORKERS ? 1024 : 1000;
        if (!parse_int(value, lo, hi, &v) || value[0] == '-')
            return orch__error(b, loc,
                               "option '%s' must be an integer from %lld to %lld, not '%s'",
                               name, (long long)lo, (long long)hi, show);
        *(opt == OPT_WORKERS ? &o->workers : &o->retries) = (int)v;
        return 0;
    }
    case OPT_BATCH_BYTES:
        if (strcmp(value, "none") == 0)
            v = 0;
        else if (!parse_size(value, &v))
            return orch__error(b, loc,
                               "option 'batch_bytes' must be a positive size like 65536, 512K "
                               "or 64MiB (or none), not '%s'",
                               show);
        o->batch_bytes = v;
        return 0;
    case OPT_CPUS:
    case OPT_GPUS: {
        double d;
        if (!parse_amount(value, &d))
            return orch__error(b, loc,
                               "option '%s' must be a number from 0 to 1024 with at most 6 "
                               "decimals, not '%s'",
                               name, show);
        *(opt == OPT_CPUS ? &o->cpus : &o->gpus) = d;
        return 0;
    }
    case OPT_TIMEOUT: {
        int r = strcmp(value, "none") == 0 ? (v = 0, 0) : parse_duration(value, &v);
        if (r == 1)
            return orch__error(b, loc,
                               "option 'timeout' must be a duration like 500ms, 120s, 5m or 2h "
                               "(or none), not '%s'",
                               show);
        if (r == 2)
            return orch__error(
                b, loc, "option 'timeout' must be greater than 0 (none means no timeout)");
        if (r == 3)
            return orch__error(b, loc, "option 'timeout' must be at most 1000h, not '%s'",
                               show);
        o->timeout_ms = v;
        return 0;
    }
    case OPT_RESERVE:
        for (int r = 0; r < ORCH_RESERVE__COUNT; r++)
            if (strcmp(value, orch_reserve_name(r)) == 0) {
                o->reserve = r;
                return 0;
            }
        return orch__error(b, loc, "option 'reserve' must be elastic or parent, not '%s'",
                           show);
    }
    return 0;
}

int orch__call_option(orch_plan_builder *b, struct b_call *c, const char *key,
                      const char *value, orch_loc loc)
{
    struct orch__buf k = {0}, v = {0};
    const char *kshow = shown(b, &k, key ? key : "");
    const char *vshow = shown(b, &v, value ? value : "");
    int opt = 0, rc;
    while (opt < OPT__COUNT && !(key && strcmp(key, opt_names[opt]) == 0))
        opt++;
    char at[48];
    if (opt == OPT__COUNT)
        rc = orch__error(b, loc,
                         "unknown option '%s' (options: workers, batch, batch_bytes, cpus, "
                         "gpus, retries, timeout, reserve)",
                         kshow);
    else if (c->opts_set & (1u << opt))
        rc = orch__error(b, loc, "option '%s' given twice%s", kshow,
                         orch__first_at(c->opt_locs[opt], at));
    else {
        c->opts_set |= 1u << opt;
        c->opt_locs[opt] = loc;
        rc = option_value(b, c, opt, value ? value : "", loc, vshow);
    }
    if (k.oom || v.oom)
        rc = -ENOMEM;
    orch__buf_free(&k);
    orch__buf_free(&v);
    return rc;
}

/* ---- arguments ---- */

/* The grammar of a number literal: -?[0-9]+(\.[0-9]+)?[A-Za-z]* */
static bool is_number_text(const char *s)
{
    if (*s == '-')
        s++;
    if (!(*s >= '0' && *s <= '9'))
        return false;
    while (*s >= '0' && *s <= '9')
        s++;
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9'))
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    while ((*s | 32) >= 'a' && (*s | 32) <= 'z')
        s++;
    return *s == '\0';
}

static const struct orch_builtin_sig *sig_of(const struct b_call *c)
{
    return c->fn_kind == ORCH_FN_BUILTIN && c->function && c->function[0]
               ? orch_builtin_sig_find(c->function)
               : NULL;
}

static int check_builtin_arg(orch_plan_builder *b, const struct orch_builtin_sig *sig,
                             const char *key, enum orch_arg_kind kind, const char *value,
                             orch_loc loc, const char *show)
{
    const struct orch_builtin_arg *a = orch_builtin_sig_arg(sig, key);
    if (!a) {
        struct orch__buf list = {0};
        for (int i = 0; i < sig->nargs; i++)
            orch__buf_printf(&list, "%s%s", i ? ", " : "", sig->args[i].key);
        if (list.oom) {
            orch__buf_free(&list);
            return b->oom = true, -ENOMEM;
        }
        int rc = sig->nargs
                     ? orch__error(b, loc, "function '%s' has no argument '%s' (it takes: %s)",
                                   sig->name, key, list.p)
                     : orch__error(b, loc, "function '%s' has no argument '%s' (it takes none)",
                                   sig->name, key);
        orch__buf_free(&list);
        return rc;
    }
    int64_t v;
    switch (a->type) {
    case ORCH_BUILTIN_ARG_STRING:
        if (kind != ORCH_ARG_STRING)
            return orch__error(b, loc, "argument '%s' of '%s' must be a string, not '%s'", key,
                               sig->name, show);
        if ((int64_t)strlen(value) < a->min)
            return orch__error(b, loc, "argument '%s' of '%s' must not be empty", key,
                               sig->name);
        return 0;
    case ORCH_BUILTIN_ARG_INT:
        if (kind != ORCH_ARG_NUMBER || !parse_int(value, INT64_MIN + 1, INT64_MAX, &v))
            return orch__error(b, loc, "argument '%s' of '%s' must be an integer%s, not '%s'",
                               key, sig->name,
                               kind == ORCH_ARG_NUMBER && orch_builtin_decimal(value, &v)
                                   ? " (it takes no decimals)"
                                   : "",
                               show);
        if (v < a->min || v > a->max)
            return orch__error(b, loc,
                               "argument '%s' of '%s' must be from %lld to %lld, not '%s'", key,
                               sig->name, (long long)a->min, (long long)a->max, show);
        return 0;
    case ORCH_BUILTIN_ARG_DECIMAL: {
        char lo[ORCH_BUILTIN_DECIMAL_TEXT_MAX], hi[ORCH_BUILTIN_DECIMAL_TEXT_MAX];
        if (kind != ORCH_ARG_NUMBER || !orch_builtin_decimal(value, &v))
            return orch__error(b, loc,
                               "argument '%s' of '%s' must be a number with at most 6 "
                               "decimals, like 0.5 or 2, not '%s'",
                               key, sig->name, show);
        if (v < a->min || v > a->max)
            return orch__error(b, loc, "argument '%s' of '%s' must be from %s to %s, not '%s'",
                               key, sig->name, orch_builtin_decimal_text(a->min, lo),
                               orch_builtin_decimal_text(a->max, hi), show);
        return 0;
    }
    case ORCH_BUILTIN_ARG_CHOICE:
        for (int i = 0; a->choices[i]; i++)
            if ((kind == ORCH_ARG_NAME || kind == ORCH_ARG_STRING) &&
                strcmp(value, a->choices[i]) == 0)
                return 0;
        struct orch__buf list = {0};
        for (int i = 0; a->choices[i]; i++)
            orch__buf_printf(&list, "%s%s", i ? ", " : "", a->choices[i]);
        if (list.oom) {
            orch__buf_free(&list);
            return b->oom = true, -ENOMEM;
        }
        int rc = orch__error(b, loc, "argument '%s' of '%s' must be one of %s, not '%s'", key,
                             sig->name, list.p, show);
        orch__buf_free(&list);
        return rc;
    }
    return 0;
}

int orch__call_arg(orch_plan_builder *b, struct b_call *c, const char *key,
                   enum orch_arg_kind kind, const char *value, orch_loc loc)
{
    if (!orch__is_name(key)) {
        struct orch__buf k = {0};
        const char *kshow = shown(b, &k, key ? key : "");
        int rc = k.oom ? -ENOMEM : orch__error(b, loc, "invalid argument name '%s'", kshow);
        orch__buf_free(&k);
        return rc;
    }
    if ((unsigned)kind >= ORCH_ARG__COUNT || !value)
        return orch__error(b, loc, "argument '%s' has no valid value", key);
    struct orch__buf v = {0};
    const char *show = shown(b, &v, value);
    int rc = v.oom ? -ENOMEM : 0;
    bool dup = false;
    char at[48];
    for (int i = 0; i < c->nargs && !dup; i++)
        if ((dup = strcmp(c->args[i].key, key) == 0) && rc == 0)
            rc = orch__error(b, loc, "argument '%s' given twice%s", key,
                             orch__first_at(c->arg_locs[i], at));
    if (!rc && kind == ORCH_ARG_NUMBER && !is_number_text(value))
        rc = orch__error(b, loc, "argument '%s': invalid number '%s'", key, show);
    if (!rc && kind == ORCH_ARG_NAME && !orch__is_name(value))
        rc = orch__error(b, loc, "argument '%s': invalid name '%s'", key, show);
    const struct orch_builtin_sig *sig = sig_of(c);
    if (!rc && sig)
        rc = check_builtin_arg(b, sig, key, kind, value, loc, show);
    orch__buf_free(&v);
    /* A known key is kept even when its value is wrong, so that it is not also reported
     * missing; a duplicate or an unknown key is not. */
    if (dup || (sig && !orch_builtin_sig_arg(sig, key)))
        return rc;
    if (orch__grow(&c->args, &c->cargs, c->nargs + 1, sizeof *c->args) < 0 ||
        orch__grow(&c->arg_locs, &c->carg_locs, c->nargs + 1, sizeof *c->arg_locs) < 0)
        return b->oom = true, -ENOMEM;
    const char *k = orch__arena_strdup(&b->arena, key);
    const char *val = orch__arena_strdup(&b->arena, value);
    if (!k || !val)
        return b->oom = true, -ENOMEM;
    c->args[c->nargs] = (struct orch_arg){.key = k, .value = val, .kind = kind};
    c->arg_locs[c->nargs++] = loc;
    return rc;
}

/* ---- a built-in against its use ---- */

static unsigned op_bit(enum orch_op op)
{
    switch (op) {
    case ORCH_OP_MAP:
        return ORCH_BUILTIN_MAP;
    case ORCH_OP_EXPAND:
    case ORCH_OP_EXPAND_ALIGNED:
        return ORCH_BUILTIN_EXPAND;
    case ORCH_OP_FILTER:
        return ORCH_BUILTIN_FILTER;
    case ORCH_OP_REDUCE:
        return ORCH_BUILTIN_REDUCE;
    case ORCH_OP_BROADCAST: /* has no call */
    case ORCH_OP__COUNT:
        break;
    }
    return 0;
}

int orch__call_check_op(orch_plan_builder *b, const struct b_call *c, enum orch_op op,
                        orch_loc loc)
{
    const struct orch_builtin_sig *sig = sig_of(c);
    if (!sig || (sig->ops & op_bit(op)))
        return 0;
    return orch__error(b, loc, "function '%s' cannot be used with %s; it serves %s", sig->name,
                       orch_op_name(op), orch_builtin_ops_text(sig->ops));
}

void orch__call_check_use(orch_plan_builder *b, const struct b_call *c, const struct b_stmt *s)
{
    const struct orch_builtin_sig *sig = sig_of(c);
    if (!sig)
        return;
    if (s->nin < sig->min_inputs || s->nin > sig->max_inputs) {
        if (sig->min_inputs == sig->max_inputs)
            orch__error(b, s->loc, "function '%s' takes %d input%s, not %d", sig->name,
                        sig->min_inputs, sig->min_inputs == 1 ? "" : "s", s->nin);
        else
            orch__error(b, s->loc, "function '%s' takes %d to %d inputs, not %d", sig->name,
                        sig->min_inputs, sig->max_inputs, s->nin);
    }
    if (s->nout != sig->outputs)
        orch__error(b, s->loc, "function '%s' produces %d output%s, not %d", sig->name,
                    sig->outputs, sig->outputs == 1 ? "" : "s", s->nout);
}

void orch__call_check_args(orch_plan_builder *b, const struct b_call *c)
{
    const struct orch_builtin_sig *sig = sig_of(c);
    if (!sig)
        return;
    for (int i = 0; i < sig->nargs; i++) {
        if (!sig->args[i].required)
            continue;
        int j = 0;
        while (j < c->nargs && strcmp(c->args[j].key, sig->args[i].key) != 0)
            j++;
        if (j == c->nargs)
            orch__error(b, c->fn_loc, "function '%s' needs argument '%s'", sig->name,
                        sig->args[i].key);
    }
}

/* ---- canonical forms of option values ---- */

void orch__format_duration_ms(struct orch__buf *out, int64_t ms)
{
    if (ms <= 0)
        orch__buf_puts(out, "none");
    else if (ms % 3600000 == 0)
        orch__buf_printf(out, "%lldh", (long long)(ms / 3600000));
    else if (ms % 60000 == 0)
        orch__buf_printf(out, "%lldm", (long long)(ms / 60000));
    else if (ms % 1000 == 0)
        orch__buf_printf(out, "%llds", (long long)(ms / 1000));
    else
        orch__buf_printf(out, "%lldms", (long long)ms);
}

void orch__format_size(struct orch__buf *out, int64_t bytes)
{
    if (bytes <= 0)
        orch__buf_puts(out, "none");
    else if (bytes % (1LL << 30) == 0)
        orch__buf_printf(out, "%lldGiB", (long long)(bytes >> 30));
    else if (bytes % (1LL << 20) == 0)
        orch__buf_printf(out, "%lldMiB", (long long)(bytes >> 20));
    else if (bytes % (1LL << 10) == 0)
        orch__buf_printf(out, "%lldKiB", (long long)(bytes >> 10));
    else
        orch__buf_printf(out, "%lld", (long long)bytes);
}

void orch__format_double(struct orch__buf *out, double v)
{
    char s[64];
    snprintf(s, sizeof s, "%.6f", v);
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '0')
        n--;
    if (n > 0 && s[n - 1] == '.')
        n--;
    orch__buf_add(out, s, n);
}
