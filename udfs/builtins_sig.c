/* builtins_sig.c — the built-ins whose arguments are read by their signature
 * (builtin_sigs.c): orch_udf__sig_init, which the FFmpeg built-ins (loaded from their
 * module, builtins.c) and not_dark share, and not_dark itself.
 *
 *   not_dark      filter, 1-2 inputs   keep iff the `mean` of the last input, page_stats'
 *                                      JSON, is more than max_mean (0..255, default 16):
 *                                      drops near-black frames. An absent last input drops
 *                                      the record; a value without a mean fails it.
 */
#include "udf_int.h"

#include "builtin_sigs.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIG_ARGS_MAX 8

/* " A, B, C": a's choices, into buf. */
static const char *choice_list(const struct orch_builtin_arg *a, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; a->choices[k] != NULL && n < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s %s", k > 0 ? "," : "", a->choices[k]);
    return buf;
}

/* The value of a's text into *out (struct orch_udf__sig_arg says how). Returns 0
 * or -EINVAL with a message in cfg->error. */
static int read_arg(const struct orch_udf_config *cfg, const char *name,
                    const struct orch_builtin_arg *a, int64_t *out)
{
    const char *text = orch_udf_arg(cfg, a->key);
    if (text == NULL)
        text = a->def;
    if (text == NULL)
        return orch_udf_config_error(cfg, -EINVAL, "%s: argument %s is required", name, a->key);
    char lo[ORCH_BUILTIN_DECIMAL_TEXT_MAX], hi[ORCH_BUILTIN_DECIMAL_TEXT_MAX], list[128];
    char *end;
    switch (a->type) {
    case ORCH_BUILTIN_ARG_INT:
        errno = 0;
        *out = strtoll(text, &end, 10);
        if (!(text[0] == '-' || (text[0] >= '0' && text[0] <= '9')) || *end != '\0' ||
            errno != 0 || *out < a->min || *out > a->max)
            return orch_udf_config_error(cfg, -EINVAL,
                                         "%s: argument %s must be an integer from %" PRId64
                                         " to %" PRId64 ", not '%s'",
                                         name, a->key, a->min, a->max, text);
        return 0;
    case ORCH_BUILTIN_ARG_DECIMAL:
        if (!orch_builtin_decimal(text, out) || *out < a->min || *out > a->max)
            return orch_udf_config_error(
                cfg, -EINVAL, "%s: argument %s must be a number from %s to %s, not '%s'", name,
                a->key, orch_builtin_decimal_text(a->min, lo),
                orch_builtin_decimal_text(a->max, hi), text);
        return 0;
    case ORCH_BUILTIN_ARG_CHOICE:
        for (*out = 0; a->choices[*out] != NULL; ++*out)
            if (strcmp(text, a->choices[*out]) == 0)
                return 0;
        return orch_udf_config_error(cfg, -EINVAL, "%s: argument %s must be one of%s, not '%s'",
                                     name, a->key, choice_list(a, list, sizeof list), text);
    case ORCH_BUILTIN_ARG_STRING:
        break; /* no video built-in takes one */
    }
    return orch_udf_config_error(cfg, -EINVAL, "%s: argument %s is a string, which it ignores",
                                 name, a->key);
}

/* The ORCH_UDF__OP bits of a signature's ORCH_BUILTIN_* ops. */
static unsigned udf_ops(unsigned builtin_ops)
{
    return ((builtin_ops & ORCH_BUILTIN_MAP) ? ORCH_UDF__OP(ORCH_UDF_OP_MAP) : 0) |
           ((builtin_ops & ORCH_BUILTIN_EXPAND) ? ORCH_UDF__OPS_EXPAND : 0) |
           ((builtin_ops & ORCH_BUILTIN_FILTER) ? ORCH_UDF__OP(ORCH_UDF_OP_FILTER) : 0) |
           ((builtin_ops & ORCH_BUILTIN_REDUCE) ? ORCH_UDF__OP(ORCH_UDF_OP_REDUCE) : 0);
}

int orch_udf__sig_init(const struct orch_udf_config *cfg, const char *name, size_t size,
               const struct orch_udf__sig_arg *args, size_t nargs, void **state)
{
    const struct orch_builtin_sig *sig = orch_builtin_sig_find(name);
    const char *keys[SIG_ARGS_MAX + 1] = {NULL};
    if (sig == NULL || sig->nargs > SIG_ARGS_MAX)
        return orch_udf_config_error(cfg, -EINVAL, "%s: no signature of at most %d arguments",
                                     name, SIG_ARGS_MAX);
    for (int k = 0; k < sig->nargs; k++)
        keys[k] = sig->args[k].key;
    void *p;
    int rc = orch_udf__base_init(cfg, name, udf_ops(sig->ops), keys, size, &p);
    if (rc < 0)
        return rc;
    if (cfg->nin < (size_t)sig->min_inputs || cfg->nin > (size_t)sig->max_inputs ||
        cfg->nout != (size_t)sig->outputs) {
        char inputs[32];
        snprintf(inputs, sizeof inputs, sig->min_inputs == sig->max_inputs ? "%d" : "%d to %d",
                 sig->min_inputs, sig->max_inputs);
        rc = orch_udf_config_error(cfg, -EINVAL,
                                   "%s takes %s input%s and gives %d output%s, not %zu and %zu",
                                   name, inputs, sig->max_inputs == 1 ? "" : "s", sig->outputs,
                                   sig->outputs == 1 ? "" : "s", cfg->nin, cfg->nout);
    }
    for (size_t k = 0; k < nargs && rc == 0; k++) {
        const struct orch_builtin_arg *a = orch_builtin_sig_arg(sig, args[k].key);
        rc = a != NULL
                 ? read_arg(cfg, name, a, (int64_t *)((char *)p + args[k].offset))
                 : orch_udf_config_error(cfg, -EINVAL, "%s: no argument %s", name, args[k].key);
    }
    if (rc < 0) {
        orch_udf__base_fini(p);
        return rc;
    }
    *state = p;
    return 0;
}

/* ---- not_dark ------------------------------------------------------------------------ */

struct not_dark {
    struct orch_udf__base base;
    int64_t max_mean;
};

static int not_dark_init(const struct orch_udf_config *cfg, void **state)
{
    static const struct orch_udf__sig_arg args[] = {{"max_mean", offsetof(struct not_dark, max_mean)}};
    return orch_udf__sig_init(cfg, "not_dark", sizeof(struct not_dark), args, 1, state);
}

/* The "mean" of page_stats' JSON in v; false when there is none. */
static bool mean_of(const struct orch_udf_value *v, double *mean)
{
    static const char key[] = "\"mean\":";
    char text[256];
    size_t n = v->len < sizeof text - 1 ? v->len : sizeof text - 1; /* mean comes early */
    memcpy(text, v->data, n);
    text[n] = '\0';
    const char *at = strstr(text, key);
    if (at == NULL)
        return false;
    char *end;
    *mean = strtod(at + strlen(key), &end);
    return end != at + strlen(key);
}

static int not_dark_run(void *state, struct orch_udf_batch *batch)
{
    const struct not_dark *nd = state;
    for (size_t i = 0; i < batch->n; i++) {
        const struct orch_udf_input *last = &batch->rec[i].in[nd->base.nin - 1];
        double mean;
        int rc;
        if (last->n == 0 || !last->v[0].present)
            rc = orch_udf_drop(batch, i);
        else if (!mean_of(&last->v[0], &mean))
            rc = orch_udf_fail_record(batch, i,
                                      "not_dark: the value is not page_stats' JSON (no "
                                      "\"mean\" in it)");
        else
            rc = orch_udf_keep(batch, i, mean > (double)nd->max_mean);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "not_dark: %s", strerror(-rc));
    }
    return 0;
}

const struct orch_udf orch_udf__not_dark = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "not_dark",
    .init = not_dark_init,
    .run = not_dark_run,
    .fini = orch_udf__base_fini,
};
