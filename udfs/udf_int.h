/* udf_int.h — internals shared by the files of udfs/: never included by a UDF or by the
 * engine.
 *
 * Built-ins. Every built-in's state starts with a `struct orch_udf__base` (the op, the
 * input and output counts it was configured with), made by orch_udf__base_init(), which
 * also refuses an op the built-in does not serve and any argument it does not know, with a
 * message in cfg->error. What a record is about — its *subject* — is the same for every
 * built-in that works on "its input": the first value of the first input list (map,
 * filter, expand), or for reduce the values of the first list concatenated. A built-in
 * that passes its subject through answers according to the op (orch_udf__pass):
 *
 *     map, reduce   the subject as the value of every output port
 *     filter        keep(true)
 *     expand        one child whose every output port is the subject
 *     any op        drop, when there is no subject (an optional input that was Dropped)
 */
#ifndef ORCH_UDF_INT_H
#define ORCH_UDF_INT_H

#include "orch_udf_host.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bit sets of ops, for orch_udf__base_init(). */
#define ORCH_UDF__OP(op) (1u << (op))
#define ORCH_UDF__OPS_EXPAND                                                                   \
    (ORCH_UDF__OP(ORCH_UDF_OP_EXPAND) | ORCH_UDF__OP(ORCH_UDF_OP_EXPAND_ALIGNED))
#define ORCH_UDF__OPS_ALL                                                                      \
    (ORCH_UDF__OP(ORCH_UDF_OP_MAP) | ORCH_UDF__OPS_EXPAND | ORCH_UDF__OP(ORCH_UDF_OP_FILTER) | \
     ORCH_UDF__OP(ORCH_UDF_OP_REDUCE))

struct orch_udf__base {
    const char *name; /* the built-in's name, static */
    enum orch_udf_op op;
    size_t nin;
    size_t nout;
};

/* Allocates a zeroed state of `size` bytes (>= sizeof(struct orch_udf__base)) into *state
 * and fills its base, after checking that cfg->op is in `ops` and that every argument key
 * is one of the NULL-terminated `args` (which may be NULL: no arguments). Returns 0, or
 * -EINVAL / -ENOMEM with a message in cfg->error and *state untouched. The state is freed
 * with orch_udf__base_fini(). */
int orch_udf__base_init(const struct orch_udf_config *cfg, const char *name, unsigned ops,
                        const char *const *args, size_t size, void **state);
void orch_udf__base_fini(void *state);

/* Parses argument `key` as a decimal unsigned integer into *out; *out = dflt when the call
 * has no such argument. Returns 0 or -EINVAL with a message in cfg->error. */
int orch_udf__arg_u64(const struct orch_udf_config *cfg, const char *name, const char *key,
                      uint64_t dflt, uint64_t *out);

/* A record's subject (see above). `owned` is non-NULL when the bytes were assembled and must
 * be freed with orch_udf__subject_free(). */
struct orch_udf__subject {
    const char *data;
    size_t len;
    bool present;
    char *owned;
};

/* Returns 0 or -ENOMEM. */
int orch_udf__subject(const struct orch_udf__base *b, const struct orch_udf_record *r,
                      struct orch_udf__subject *s);
void orch_udf__subject_free(struct orch_udf__subject *s);

/* Emits data as the value of every output port of record i (or of its current child). */
int orch_udf__emit_all(const struct orch_udf__base *b, struct orch_udf_batch *batch, size_t i,
                       const void *data, size_t len);

/* Passes the subject through, as said above. */
int orch_udf__pass(const struct orch_udf__base *b, struct orch_udf_batch *batch, size_t i,
                   const struct orch_udf__subject *s);

/* exec()'s decoding of a program's reply to one batch, without a program (for
 * tests/fuzz/fuzz_exec.c): the len bytes at data are taken as all that the program wrote
 * after a BTCH of batch->n records (its output then ends), for a call of op `op` with
 * `nout` outputs, and decoded by the very code that exec's run uses once the batch is
 * sent: one ANSW frame, whose answers go to batch (bound to a collector), or one BERR.
 * Bytes after that frame are ignored (run would keep them for the next batch). Returns
 * what run returns: 0, or a negative error with a message in batch->error: -EPIPE (the
 * output ends before a whole frame), -EPROTO (anything but the protocol), -EIO (BERR),
 * -ENOMEM. */
int orch_udf__exec_take_reply(enum orch_udf_op op, size_t nout, const void *data, size_t len,
                              struct orch_udf_batch *batch);

/* One argument of a built-in read by its signature (orch_udf__sig_init), into the int64_t
 * at `offset` in the built-in's state: an INT as its number, a DECIMAL in millionths
 * (fps=0.5: 500000; seconds are then microseconds), a CHOICE as the index of the choice
 * in the signature's list. */
struct orch_udf__sig_arg {
    const char *key;
    size_t offset;
};

/* The init of a built-in whose arguments its signature describes (builtins_sig.c). Makes
 * the zeroed state (`size` bytes, a struct orch_udf__base first) of the built-in `name`,
 * after checking against its signature the op, the number of inputs and outputs, and every
 * argument key; then reads each of the `nargs` arguments in args: the call's value, or
 * the signature's default when it has none, which must be of the signature's type and
 * within its range. Returns 0, or -EINVAL / -ENOMEM with a message in cfg->error and
 * *state untouched (the state freed). */
int orch_udf__sig_init(const struct orch_udf_config *cfg, const char *name, size_t size,
                       const struct orch_udf__sig_arg *args, size_t nargs, void **state);

/* The built-ins, each defined in one of builtins_*.c. Those marked "module" are built into
 * a shared object of their own (udfs/meson.build) that builtins.c opens when a worker
 * first asks for one of them; the rest are in every orch process. */
extern const struct orch_udf orch_udf__read_file;
extern const struct orch_udf orch_udf__split;
extern const struct orch_udf orch_udf__split_lines;
extern const struct orch_udf orch_udf__upper;
extern const struct orch_udf orch_udf__identity;
extern const struct orch_udf orch_udf__nonempty;
extern const struct orch_udf orch_udf__concat;
extern const struct orch_udf orch_udf__count;
extern const struct orch_udf orch_udf__sleep;
extern const struct orch_udf orch_udf__fail_if;
extern const struct orch_udf orch_udf__flaky;
extern const struct orch_udf orch_udf__tesseract_ocr; /* builtins_ocr.c, module ocr */
extern const struct orch_udf orch_udf__pdf_render; /* builtins_pdf.c */
extern const struct orch_udf orch_udf__pdf_text;
extern const struct orch_udf orch_udf__page_stats; /* builtins_gpu.c */
extern const struct orch_udf orch_udf__blank;      /* builtins_pick.c */
extern const struct orch_udf orch_udf__first;      /* builtins_pick.c */
extern const struct orch_udf orch_udf__video_probe;  /* builtins_video.c, module video */
extern const struct orch_udf orch_udf__video_scenes; /* builtins_video.c, module video */
extern const struct orch_udf orch_udf__video_frames; /* builtins_video_frames.c, module video */
extern const struct orch_udf orch_udf__not_dark;     /* builtins_sig.c */

#endif
