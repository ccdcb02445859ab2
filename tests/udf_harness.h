/* udf_harness.h — one UDF instance driven as a worker drives it, for the cmocka tests of
 * udfs/: init with a call's configuration, batches of records made here, run, the answers
 * read back through the real collector (orch_udf_answers_*), fini.
 *
 * A harness holds one instance at a time, one collector and one batch of at most
 * UDF_H_MAXREC records, each with UDF_H_MAXIN inputs of at most UDF_H_MAXVAL values. Record
 * i has grain id 100 + i, generation 1 and attempt 1 until the test changes h->rec[i].
 * Records outlive udf_h_close() (the next instance may run the same batch) and go with
 * udf_h_clear(). The bytes of a value stay the caller's, unless given to the harness with
 * udf_h_own().
 *
 * Every function fails the running test (a cmocka assertion) when the harness is misused
 * or the collector refuses. udf_h_open() and udf_h_run() return what the UDF returned;
 * only udf_h_new() and udf_h_free() return errors of their own, for setups and teardowns.
 * The checks name the record and what was expected when they fail.
 */
#ifndef ORCH_UDF_HARNESS_H
#define ORCH_UDF_HARNESS_H

#include "orch_udf_host.h"

#include <stdbool.h>
#include <stddef.h>

#define UDF_H_MAXREC 16
#define UDF_H_MAXIN 2
#define UDF_H_MAXVAL 8
#define UDF_H_MAXARGS 8

struct udf_h {
    const struct orch_udf *udf; /* the instance's UDF, from the last open */
    void *state;                /* what its init gave */
    bool inited;                /* init succeeded: fini is owed */
    const char *call;           /* the call's name; NULL: the function's */
    struct orch_udf_config cfg; /* the last open's configuration */
    const char *keys[UDF_H_MAXARGS], *vals[UDF_H_MAXARGS];
    char err[1024];              /* init's message, when it failed */
    struct orch_udf_answers ans; /* the collector: answers of the last run */
    bool ans_inited;
    struct orch_udf_batch batch;
    struct orch_udf_record rec[UDF_H_MAXREC];
    struct orch_udf_input in[UDF_H_MAXREC][UDF_H_MAXIN];
    struct orch_udf_value val[UDF_H_MAXREC][UDF_H_MAXIN][UDF_H_MAXVAL];
    void *owned[UDF_H_MAXREC]; /* bytes given by udf_h_own(), freed with the record */
    char tmpdir[512];          /* udf_h_tmpdir()'s, removed by udf_h_free(); "" if none */
};

/* A new harness whose calls are named `call` (NULL: each after its function), or NULL
 * when memory runs out. Free it with udf_h_free(). */
struct udf_h *udf_h_new(const char *call);
/* Closes the instance, frees the records' owned bytes, removes the scratch directory and
 * frees h (NULL: nothing). 0, or -1 when the directory could not be removed. */
int udf_h_free(struct udf_h *h);

/* Closes any open instance, then inits udf (non-NULL) as a call of `function` used as
 * `op` with nin inputs, nout outputs and the arguments given as key, value, ..., NULL.
 * Returns init's result; a failed init leaves its message in h->err (never empty). The
 * collector is ready for op and nout either way. */
int udf_h_open(struct udf_h *h, const struct orch_udf *udf, const char *function,
               enum orch_udf_op op, size_t nin, size_t nout, ...);
/* The same for the built-in named `name` (which must exist), its function `name`. */
int udf_h_builtin(struct udf_h *h, const char *name, enum orch_udf_op op, size_t nin,
                  size_t nout, ...);
/* Fini of the open instance and the collector freed; the records stay. */
void udf_h_close(struct udf_h *h);

/* Adds a record with no values; returns its index. */
size_t udf_h_rec(struct udf_h *h);
/* Adds a value of len bytes at data to input `input` of record i; data NULL: an absent
 * value (an optional input's Dropped one). */
void udf_h_value(struct udf_h *h, size_t i, size_t input, const void *data, size_t len);
/* The same with the bytes of text (without its NUL). */
void udf_h_text(struct udf_h *h, size_t i, size_t input, const char *text);
/* Adds a record with one value on input 0 (data NULL: absent); returns its index. */
size_t udf_h_add(struct udf_h *h, const void *data, size_t len);
/* The same with the bytes of text. */
size_t udf_h_add_text(struct udf_h *h, const char *text);
/* Gives record i's malloc'd bytes p to the harness: freed when the record goes. */
void udf_h_own(struct udf_h *h, size_t i, void *p);
/* Forgets every record (and frees the bytes they own), for the next batch. */
void udf_h_clear(struct udf_h *h);

/* Runs the batch on the open instance; on 0, finishes the collector. Returns run's
 * result. */
int udf_h_run(struct udf_h *h);
/* Runs the batch, failing the test with the collector's message unless run returns 0. */
void udf_h_run_ok(struct udf_h *h);

/* Makes h's scratch directory "$TMPDIR/orch-TAG-XXXXXX" once; returns its path. */
const char *udf_h_tmpdir(struct udf_h *h, const char *tag);

/* The checks. Record i's outcome is want. */
void udf_h_check_outcome(const struct udf_h *h, size_t i, enum orch_udf_outcome want);
/* An output is set to the len bytes at want. */
void udf_h_check_out(const struct orch_udf_out *o, const void *want, size_t len);
/* Record i is OK and its output `port` is the text want. */
void udf_h_check_value(const struct udf_h *h, size_t i, size_t port, const char *want);
/* Record i has a message, which contains needle. */
void udf_h_check_msg(const struct udf_h *h, size_t i, const char *needle);
/* Record i is a RecordFailure whose message contains needle. */
void udf_h_check_failure(const struct udf_h *h, size_t i, const char *needle);
/* text contains needle. */
void udf_h_check_contains(const char *text, const char *needle);

#endif
