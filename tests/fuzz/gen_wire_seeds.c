/* gen_wire_seeds.c — writes the seeds of fuzz_wire: small valid frames of every type, made
 * by the real encoder (orch_wire_put_*), one file each, and a stream of several frames.
 *
 *     build-fuzz/tests/fuzz/gen_wire_seeds tests/fuzz/seeds/wire
 *
 * scripts/fuzz also runs it into the working corpus, so that the fuzzer starts from valid
 * frames of the current format even before the committed seeds are regenerated.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "wire.h"

static const char *dir;
static struct orch_wire_buf stream; /* hello, batch, report: as a worker's life goes */

static void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "gen_wire_seeds: %s: %s\n", what, orch_strerror(rc));
        exit(1);
    }
}

static void write_file(const char *name, const struct orch_wire_buf *b)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(b->data, 1, b->len, f) != b->len || fclose(f) != 0) {
        fprintf(stderr, "gen_wire_seeds: %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* Writes the frame that put() made into b as seed `name`, and empties b. */
static void seed(const char *name, struct orch_wire_buf *b, int rc)
{
    check(rc, name);
    write_file(name, b);
    orch_wire_buf_free(b);
}

static void configs(void)
{
    struct orch_wire_buf b = {0};
    struct orch_wire_config builtin = {.call = "up",
                                       .fn_kind = ORCH_FN_BUILTIN,
                                       .function = "upper",
                                       .symbol = "",
                                       .op = ORCH_UDF_OP_MAP,
                                       .nin = 1,
                                       .nout = 1,
                                       .worker = 0,
                                       .payload_dir = "/job/payloads"};
    seed("config-builtin", &b, orch_wire_put_config(&b, &builtin));

    const char *keys[] = {"model", "lang"}, *values[] = {"small", "eng"};
    struct orch_wire_config exec = {.call = "pages",
                                    .fn_kind = ORCH_FN_EXEC,
                                    .function = "python3 split.py",
                                    .op = ORCH_UDF_OP_EXPAND,
                                    .nin = 2,
                                    .nout = 2,
                                    .worker = 3,
                                    .payload_dir = "/job/payloads",
                                    .nargs = 2,
                                    .arg_keys = keys,
                                    .arg_values = values};
    seed("config-exec", &b, orch_wire_put_config(&b, &exec));

    struct orch_wire_config library = {.call = "sum",
                                       .fn_kind = ORCH_FN_LIBRARY,
                                       .function = "/lib/udf.so",
                                       .symbol = "sum_udf",
                                       .op = ORCH_UDF_OP_REDUCE,
                                       .nin = 1,
                                       .nout = 1,
                                       .worker = 1,
                                       .payload_dir = "p"};
    seed("config-library", &b, orch_wire_put_config(&b, &library));
}

static void hello_initfail(void)
{
    struct orch_wire_buf b = {0};
    struct orch_wire_hello hello = {.version = ORCH_WIRE_VERSION, .pid = 4242};
    seed("hello", &b, orch_wire_put_hello(&b, &hello));
    check(orch_wire_put_hello(&stream, &hello), "stream hello");
    seed("initfail", &b, orch_wire_put_initfail(&b, "the model did not load"));
}

static void batches(void)
{
    struct orch_wire_buf b = {0};
    struct orch_wire_batch empty = {.id = 1};
    seed("batch-empty", &b, orch_wire_put_batch(&b, &empty));

    /* map: one input of one value per record */
    const uint32_t one[] = {1};
    const struct orch_wire_value v1[] = {{.payload = 7, .present = 1}};
    const struct orch_wire_value v0[] = {{.payload = 0, .present = 0}};
    const struct orch_wire_record maps[] = {
        {.grain = 10, .generation = 1, .attempt = 1, .nin = 1, .nval = one, .vals = v1},
        {.grain = 11, .generation = 2, .attempt = 3, .nin = 1, .nval = one, .vals = v0}};
    struct orch_wire_batch map = {.id = 2, .nrec = 2, .rec = maps};
    seed("batch-map", &b, orch_wire_put_batch(&b, &map));
    check(orch_wire_put_batch(&stream, &map), "stream batch");

    /* reduce: two input lists, of three values and of none */
    const uint32_t lists[] = {3, 0};
    const struct orch_wire_value vals[] = {{.payload = 5, .present = 1},
                                           {.payload = 0, .present = 0},
                                           {.payload = 9, .present = 1}};
    const struct orch_wire_record reduce[] = {
        {.grain = 99, .generation = 1, .attempt = 2, .nin = 2, .nval = lists, .vals = vals}};
    struct orch_wire_batch red = {.id = 3, .nrec = 1, .rec = reduce};
    seed("batch-reduce", &b, orch_wire_put_batch(&b, &red));

    /* wide: a record of 200 inputs, one value each, every third absent */
    uint32_t wide_n[200];
    struct orch_wire_value wide_v[200];
    for (uint32_t k = 0; k < 200; k++) {
        wide_n[k] = 1;
        wide_v[k] = k % 3 == 2 ? (struct orch_wire_value){0, 0}
                               : (struct orch_wire_value){.payload = 100 + k, .present = 1};
    }
    const struct orch_wire_record wide[] = {{.grain = 7,
                                             .generation = 1,
                                             .attempt = 1,
                                             .nin = 200,
                                             .nval = wide_n,
                                             .vals = wide_v}};
    struct orch_wire_batch wid = {.id = 4, .nrec = 1, .rec = wide};
    seed("batch-wide", &b, orch_wire_put_batch(&b, &wid));
}

static void reports(void)
{
    struct orch_wire_buf b = {0};
    const uint64_t ids[] = {21, 22, 23, 24, 25, 26};
    const struct orch_wire_answer map[] = {{.grain = 10,
                                            .generation = 1,
                                            .outcome = ORCH_WIRE_OK,
                                            .message = "",
                                            .nchild = 1,
                                            .nout = 1,
                                            .payload = ids},
                                           {.grain = 11,
                                            .generation = 2,
                                            .outcome = ORCH_WIRE_OK,
                                            .message = "",
                                            .nchild = 1,
                                            .nout = 1,
                                            .payload = ids + 1}};
    struct orch_wire_report ok = {
        .batch = 2, .status = ORCH_WIRE_STATUS_OK, .message = "", .nrec = 2, .rec = map};
    seed("report-map", &b, orch_wire_put_report(&b, &ok));
    check(orch_wire_put_report(&stream, &ok), "stream report");

    const struct orch_wire_answer expand[] = {{.grain = 30,
                                               .generation = 1,
                                               .outcome = ORCH_WIRE_OK,
                                               .message = "",
                                               .nchild = 3,
                                               .nout = 2,
                                               .payload = ids},
                                              {.grain = 31,
                                               .generation = 1,
                                               .outcome = ORCH_WIRE_OK,
                                               .message = "",
                                               .nchild = 0,
                                               .nout = 2,
                                               .payload = NULL}};
    struct orch_wire_report exp = {
        .batch = 4, .status = ORCH_WIRE_STATUS_OK, .message = "", .nrec = 2, .rec = expand};
    seed("report-expand", &b, orch_wire_put_report(&b, &exp));

    /* a large expansion: 200 children of 2 outputs */
    uint64_t many_ids[400];
    for (uint32_t k = 0; k < 400; k++)
        many_ids[k] = 1000 + k;
    const struct orch_wire_answer large[] = {{.grain = 34,
                                              .generation = 1,
                                              .outcome = ORCH_WIRE_OK,
                                              .message = "",
                                              .nchild = 200,
                                              .nout = 2,
                                              .payload = many_ids}};
    struct orch_wire_report lrg = {
        .batch = 10, .status = ORCH_WIRE_STATUS_OK, .message = "", .nrec = 1, .rec = large};
    seed("report-large-expand", &b, orch_wire_put_report(&b, &lrg));

    /* an expansion of three children whose second and third failed: their ids are 0 */
    const uint64_t some[] = {27, 28, 0, 0, 0, 0};
    const struct orch_wire_failed_child failed_children[] = {
        {.child = 1, .message = "page 2 will not render"}, {.child = 2, .message = ""}};
    const struct orch_wire_answer partial[] = {{.grain = 32,
                                                .generation = 1,
                                                .outcome = ORCH_WIRE_OK,
                                                .message = "",
                                                .nchild = 3,
                                                .nout = 2,
                                                .payload = some,
                                                .nfailed = 2,
                                                .failed = failed_children}};
    struct orch_wire_report part = {
        .batch = 8, .status = ORCH_WIRE_STATUS_OK, .message = "", .nrec = 1, .rec = partial};
    seed("report-failed-children", &b, orch_wire_put_report(&b, &part));

    const struct orch_wire_answer others[] = {
        {.grain = 40, .generation = 1, .outcome = ORCH_WIRE_DROP, .message = ""},
        {.grain = 41, .generation = 1, .outcome = ORCH_WIRE_KEEP_TRUE, .message = ""},
        {.grain = 42, .generation = 1, .outcome = ORCH_WIRE_KEEP_FALSE, .message = ""},
        {.grain = 43,
         .generation = 2,
         .outcome = ORCH_WIRE_RECORD_FAILURE,
         .message = "page 7 will not render"},
        {.grain = 44,
         .generation = 1,
         .outcome = ORCH_WIRE_GROUP_FAILURE,
         .message = "the PDF is encrypted"}};
    struct orch_wire_report oth = {
        .batch = 5, .status = ORCH_WIRE_STATUS_OK, .message = "", .nrec = 5, .rec = others};
    seed("report-outcomes", &b, orch_wire_put_report(&b, &oth));

    /* Regression: an answer of 2^32 - 1 children of no outputs once took 2^32 turns of
     * the decoder's check of failed children (a fuzz_wire timeout). */
    const struct orch_wire_answer huge[] = {{.grain = 33,
                                             .generation = 1,
                                             .outcome = ORCH_WIRE_OK,
                                             .message = "",
                                             .nchild = UINT32_MAX,
                                             .nout = 0,
                                             .payload = NULL}};
    struct orch_wire_report many = {
        .batch = 9, .status = ORCH_WIRE_STATUS_OK, .message = "", .nrec = 1, .rec = huge};
    seed("regress-report-many-children-no-outputs", &b, orch_wire_put_report(&b, &many));

    struct orch_wire_report failed = {
        .batch = 6, .status = ORCH_WIRE_STATUS_FAILED, .message = "run() returned -5"};
    seed("report-failed", &b, orch_wire_put_report(&b, &failed));
    struct orch_wire_report storage = {
        .batch = 7, .status = ORCH_WIRE_STATUS_STORAGE, .message = "payloads: map is full"};
    seed("report-storage", &b, orch_wire_put_report(&b, &storage));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_wire_seeds DIR\n");
        return 2;
    }
    dir = argv[1];
    configs();
    hello_initfail();
    batches();
    reports();
    write_file("stream", &stream);
    /* The stream cut inside its last frame: a partial frame at the end. */
    stream.len -= 3;
    write_file("stream-partial", &stream);
    orch_wire_buf_free(&stream);
    return 0;
}
