/* udf_harness.c — one UDF instance driven as a worker drives it (udf_harness.h). */
#define _GNU_SOURCE /* nftw, in testutil.h */
#include "udf_harness.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

struct udf_h *udf_h_new(const char *call)
{
    struct udf_h *h = calloc(1, sizeof *h);
    if (h != NULL)
        h->call = call;
    return h;
}

int udf_h_free(struct udf_h *h)
{
    if (h == NULL)
        return 0;
    udf_h_close(h);
    udf_h_clear(h);
    int rc = h->tmpdir[0] && orch_test_rmtree(h->tmpdir) != 0 ? -1 : 0;
    free(h);
    return rc;
}

static int vopen(struct udf_h *h, const struct orch_udf *udf, const char *function,
                 enum orch_udf_op op, size_t nin, size_t nout, va_list ap)
{
    assert_non_null(udf);
    udf_h_close(h);
    size_t n = 0;
    for (const char *k; (k = va_arg(ap, const char *)) != NULL; n++) {
        assert_true(n < UDF_H_MAXARGS);
        h->keys[n] = k;
        h->vals[n] = va_arg(ap, const char *);
    }
    const char *call = h->call != NULL ? h->call : function;
    h->udf = udf;
    h->cfg = (struct orch_udf_config){
        .call = call,
        .function = function,
        .op = op,
        .nin = nin,
        .nout = nout,
        .nargs = n,
        .arg_keys = h->keys,
        .arg_values = h->vals,
        .worker = 0,
        .error = h->err,
        .error_size = sizeof h->err,
    };
    h->err[0] = '\0';
    int rc = udf->init != NULL ? udf->init(&h->cfg, &h->state) : 0;
    h->inited = rc == 0;
    if (rc != 0)
        assert_true(h->err[0] != '\0'); /* every init failure explains itself */
    assert_int_equal(orch_udf_answers_init(&h->ans, call, op, nout), 0);
    h->ans_inited = true;
    return rc;
}

int udf_h_open(struct udf_h *h, const struct orch_udf *udf, const char *function,
               enum orch_udf_op op, size_t nin, size_t nout, ...)
{
    va_list ap;
    va_start(ap, nout);
    int rc = vopen(h, udf, function, op, nin, nout, ap);
    va_end(ap);
    return rc;
}

int udf_h_builtin(struct udf_h *h, const char *name, enum orch_udf_op op, size_t nin,
                  size_t nout, ...)
{
    va_list ap;
    va_start(ap, nout);
    int rc = vopen(h, orch_udf_builtin(name), name, op, nin, nout, ap);
    va_end(ap);
    return rc;
}

void udf_h_close(struct udf_h *h)
{
    if (h->inited && h->udf->fini != NULL)
        h->udf->fini(h->state);
    h->inited = false;
    if (h->ans_inited)
        orch_udf_answers_free(&h->ans);
    h->ans_inited = false;
}

size_t udf_h_rec(struct udf_h *h)
{
    size_t i = h->batch.n++;
    assert_true(i < UDF_H_MAXREC);
    h->rec[i] = (struct orch_udf_record){
        .grain_id = 100 + i, .generation = 1, .attempt = 1, .in = h->in[i]};
    for (size_t k = 0; k < UDF_H_MAXIN; k++)
        h->in[i][k] = (struct orch_udf_input){.n = 0, .v = h->val[i][k]};
    h->batch.rec = h->rec;
    return i;
}

void udf_h_value(struct udf_h *h, size_t i, size_t input, const void *data, size_t len)
{
    assert_true(i < h->batch.n && input < UDF_H_MAXIN);
    struct orch_udf_input *in = &h->in[i][input];
    assert_true(in->n < UDF_H_MAXVAL);
    h->val[i][input][in->n++] = (struct orch_udf_value){data, len, data != NULL};
}

void udf_h_text(struct udf_h *h, size_t i, size_t input, const char *text)
{
    udf_h_value(h, i, input, text, strlen(text));
}

size_t udf_h_add(struct udf_h *h, const void *data, size_t len)
{
    size_t i = udf_h_rec(h);
    udf_h_value(h, i, 0, data, len);
    return i;
}

size_t udf_h_add_text(struct udf_h *h, const char *text)
{
    return udf_h_add(h, text, strlen(text));
}

void udf_h_own(struct udf_h *h, size_t i, void *p)
{
    assert_true(i < h->batch.n && h->owned[i] == NULL);
    h->owned[i] = p;
}

void udf_h_clear(struct udf_h *h)
{
    for (size_t i = 0; i < UDF_H_MAXREC; i++) {
        free(h->owned[i]);
        h->owned[i] = NULL;
    }
    h->batch.n = 0;
}

int udf_h_run(struct udf_h *h)
{
    assert_true(h->inited);
    assert_int_equal(orch_udf_answers_reset(&h->ans, &h->batch), 0);
    int rc = h->udf->run(h->state, &h->batch);
    if (rc == 0)
        assert_int_equal(orch_udf_answers_finish(&h->ans), 0);
    return rc;
}

void udf_h_run_ok(struct udf_h *h)
{
    int rc = udf_h_run(h);
    if (rc != 0)
        fail_msg("run returned %d: %s", rc, orch_udf_answers_error(&h->ans));
}

const char *udf_h_tmpdir(struct udf_h *h, const char *tag)
{
    if (h->tmpdir[0] == '\0')
        assert_int_equal(orch_test_mkdtemp(h->tmpdir, sizeof h->tmpdir, tag), 0);
    return h->tmpdir;
}

void udf_h_check_outcome(const struct udf_h *h, size_t i, enum orch_udf_outcome want)
{
    assert_true(i < h->ans.n);
    if (h->ans.rec[i].outcome != want)
        fail_msg("record %zu: outcome %s, expected %s (%s)", i,
                 orch_udf_outcome_name(h->ans.rec[i].outcome), orch_udf_outcome_name(want),
                 h->ans.rec[i].msg ? h->ans.rec[i].msg : "");
}

void udf_h_check_out(const struct orch_udf_out *o, const void *want, size_t len)
{
    assert_true(o->set);
    assert_non_null(o->data);
    assert_int_equal(o->len, len);
    if (len > 0)
        assert_memory_equal(o->data, want, len);
}

void udf_h_check_value(const struct udf_h *h, size_t i, size_t port, const char *want)
{
    udf_h_check_outcome(h, i, ORCH_UDF_OK);
    assert_non_null(h->ans.rec[i].values);
    udf_h_check_out(&h->ans.rec[i].values[port], want, strlen(want));
}

void udf_h_check_msg(const struct udf_h *h, size_t i, const char *needle)
{
    assert_true(i < h->ans.n);
    const char *msg = h->ans.rec[i].msg;
    assert_non_null(msg);
    if (strstr(msg, needle) == NULL)
        fail_msg("record %zu: message \"%s\" lacks \"%s\"", i, msg, needle);
}

void udf_h_check_failure(const struct udf_h *h, size_t i, const char *needle)
{
    udf_h_check_outcome(h, i, ORCH_UDF_RECORD_FAILURE);
    udf_h_check_msg(h, i, needle);
}

void udf_h_check_contains(const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL)
        fail_msg("\"%s\" lacks \"%s\"", text, needle);
}
