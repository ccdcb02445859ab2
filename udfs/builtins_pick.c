/* builtins_pick.c — blank and first: choosing between paths of a pipeline, such as OCR
 * only for the pages that have no text layer (examples/pdf_text_first.orch). */
#include "udf_int.h"

#include <ctype.h>
#include <string.h>

static const char *const no_args[] = {NULL};

/* ---- blank: a predicate on its last input ---------------------------------------------- */

/* True when v is absent (an optional Dropped input) or holds only ASCII white space: the
 * text layer MuPDF gives for a page that is only an image is a few line ends. */
static bool is_blank(const struct orch_udf_value *v)
{
    if (!v->present)
        return true;
    const unsigned char *p = v->data;
    for (size_t k = 0; k < v->len; k++)
        if (!isspace(p[k]))
            return false;
    return true;
}

static int blank_run(void *state, struct orch_udf_batch *batch)
{
    const struct orch_udf__base *b = state;
    for (size_t i = 0; i < batch->n; i++) {
        const struct orch_udf_input *last = &batch->rec[i].in[b->nin - 1];
        int rc = orch_udf_keep(batch, i, last->n == 0 || is_blank(&last->v[0]));
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "blank: %s", strerror(-rc));
    }
    return 0;
}

static int blank_init(const struct orch_udf_config *cfg, void **state)
{
    return orch_udf__base_init(cfg, "blank", ORCH_UDF__OP(ORCH_UDF_OP_FILTER), no_args,
                               sizeof(struct orch_udf__base), state);
}

const struct orch_udf orch_udf__blank = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "blank",
    .init = blank_init,
    .run = blank_run,
    .fini = orch_udf__base_fini,
};

/* ---- first: the first of its inputs that is present ------------------------------------ */

static int first_run(void *state, struct orch_udf_batch *batch)
{
    const struct orch_udf__base *b = state;
    for (size_t i = 0; i < batch->n; i++) {
        const struct orch_udf_value *pick = NULL;
        for (size_t k = 0; k < b->nin && !pick; k++) {
            const struct orch_udf_input *in = &batch->rec[i].in[k];
            if (in->n > 0 && in->v[0].present)
                pick = &in->v[0];
        }
        int rc = pick ? orch_udf__emit_all(b, batch, i, pick->data, pick->len)
                      : orch_udf_drop(batch, i);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "first: %s", strerror(-rc));
    }
    return 0;
}

static int first_init(const struct orch_udf_config *cfg, void **state)
{
    return orch_udf__base_init(cfg, "first", ORCH_UDF__OP(ORCH_UDF_OP_MAP), no_args,
                               sizeof(struct orch_udf__base), state);
}

const struct orch_udf orch_udf__first = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "first",
    .init = first_init,
    .run = first_run,
    .fini = orch_udf__base_fini,
};
