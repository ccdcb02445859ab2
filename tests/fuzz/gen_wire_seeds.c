/* gen_wire_seeds.c — writes the seeds of fuzz_wire: small valid frames of every type, made
 * by the real encoder (orch_wire_put_*), one file each, in ids mode and in values mode (a
 * remote worker's), and two streams of several frames: a local worker's life and a remote
 * one's (the handshake first).
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
static struct orch_wire_buf remote; /* challenge, auth, config, hello, batch, report */

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
                                       .payload_dir = "p",
                                       .batch = 4};
    seed("config-library", &b, orch_wire_put_config(&b, &library));

    struct orch_wire_config rem = {.call = "ocr",
                                   .fn_kind = ORCH_FN_EXEC,
                                   .function = "python3 ocr.py",
                                   .symbol = "",
                                   .op = ORCH_UDF_OP_MAP,
                                   .nin = 1,
                                   .nout = 1,
                                   .worker = 2,
                                   .payload_dir = "",
                                   .values = 1,
                                   .max_value = (uint64_t)64 << 20,
                                   .nargs = 2,
                                   .arg_keys = keys,
                                   .arg_values = values};
    seed("config-remote", &b, orch_wire_put_config(&b, &rem));
    check(orch_wire_put_config(&remote, &rem), "remote config");
}

/* The handshake of a remote worker. */
static void handshake(void)
{
    struct orch_wire_buf b = {0};
    struct orch_wire_challenge ch = {.version = ORCH_WIRE_VERSION};
    for (size_t i = 0; i < ORCH_WIRE_NONCE; i++)
        ch.nonce[i] = (uint8_t)(i * 37 + 11);
    seed("challenge", &b, orch_wire_put_challenge(&b, &ch));
    check(orch_wire_put_challenge(&remote, &ch), "remote challenge");

    struct orch_wire_auth au = {
        .token = 3, .pid = 5151, .host = "node-07", .slurm_job = "812.3"};
    for (size_t i = 0; i < ORCH_WIRE_NONCE; i++)
        au.mac[i] = (uint8_t)(255 - i * 5);
    seed("auth", &b, orch_wire_put_auth(&b, &au));
    check(orch_wire_put_auth(&remote, &au), "remote auth");
    struct orch_wire_auth local = {.token = 1, .pid = 1, .host = "login1", .slurm_job = ""};
    seed("auth-no-slurm", &b, orch_wire_put_auth(&b, &local));
}

static void hello_initfail(void)
{
    struct orch_wire_buf b = {0};
    struct orch_wire_hello hello = {.version = ORCH_WIRE_VERSION, .pid = 4242};
    seed("hello", &b, orch_wire_put_hello(&b, &hello));
    check(orch_wire_put_hello(&stream, &hello), "stream hello");
    check(orch_wire_put_hello(&remote, &hello), "remote hello");
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
        wide_v[k] = k % 3 == 2 ? (struct orch_wire_value){.payload = 0, .present = 0}
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

/* Values mode: the same shapes, each present value with its bytes (an empty one among
 * them). */
static void value_batches(void)
{
    struct orch_wire_buf b = {0};
    const uint32_t one[] = {1};
    const struct orch_wire_value page[] = {
        {.payload = 7, .present = 1, .data = "%PDF-1.4\0\xff", .len = 10}};
    const struct orch_wire_value empty[] = {{.payload = 8, .present = 1, .data = "", .len = 0}};
    const struct orch_wire_value absent[] = {{.payload = 0, .present = 0}};
    const struct orch_wire_record maps[] = {
        {.grain = 10, .generation = 1, .attempt = 1, .nin = 1, .nval = one, .vals = page},
        {.grain = 11, .generation = 1, .attempt = 2, .nin = 1, .nval = one, .vals = empty},
        {.grain = 12, .generation = 2, .attempt = 1, .nin = 1, .nval = one, .vals = absent}};
    struct orch_wire_batch map = {.id = 2, .values = 1, .nrec = 3, .rec = maps};
    seed("batch-values-map", &b, orch_wire_put_batch(&b, &map));
    check(orch_wire_put_batch(&remote, &map), "remote batch");

    const uint32_t lists[] = {3, 0};
    const struct orch_wire_value vals[] = {
        {.payload = 5, .present = 1, .data = "a", .len = 1},
        {.payload = 0, .present = 0},
        {.payload = 9, .present = 1, .data = "bc", .len = 2}};
    const struct orch_wire_record reduce[] = {
        {.grain = 99, .generation = 1, .attempt = 2, .nin = 2, .nval = lists, .vals = vals}};
    struct orch_wire_batch red = {.id = 3, .values = 1, .nrec = 1, .rec = reduce};
    seed("batch-values-reduce", &b, orch_wire_put_batch(&b, &red));
}

static void reports(void)
{
    struct orch_wire_buf b = {0};
    const uint64_t ids[] = {21, 22, 23, 24, 25, 26};
    const uint64_t sizes[] = {5, 0, 100000, 3, 1, 2}; /* the bytes of each id's payload */
    const struct orch_wire_answer map[] = {{.grain = 10,
                                            .generation = 1,
                                            .outcome = ORCH_WIRE_OK,
                                            .message = "",
                                            .nchild = 1,
                                            .nout = 1,
                                            .payload = ids,
                                            .size = sizes},
                                           {.grain = 11,
                                            .generation = 2,
                                            .outcome = ORCH_WIRE_OK,
                                            .message = "",
                                            .nchild = 1,
                                            .nout = 1,
                                            .payload = ids + 1,
                                            .size = sizes + 1}};
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
                                               .payload = ids,
                                               .size = sizes},
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
    uint64_t many_ids[400], many_sizes[400];
    for (uint32_t k = 0; k < 400; k++) {
        many_ids[k] = 1000 + k;
        many_sizes[k] = k * 37;
    }
    const struct orch_wire_answer large[] = {{.grain = 34,
                                              .generation = 1,
                                              .outcome = ORCH_WIRE_OK,
                                              .message = "",
                                              .nchild = 200,
                                              .nout = 2,
                                              .payload = many_ids,
                                              .size = many_sizes}};
    struct orch_wire_report lrg = {
        .batch = 10, .status = ORCH_WIRE_STATUS_OK, .message = "", .nrec = 1, .rec = large};
    seed("report-large-expand", &b, orch_wire_put_report(&b, &lrg));

    /* an expansion of three children whose second and third failed: their ids are 0 */
    const uint64_t some[] = {27, 28, 0, 0, 0, 0};
    const uint64_t some_sizes[] = {4, 9, 0, 0, 0, 0}; /* a failed child's: none */
    const struct orch_wire_failed_child failed_children[] = {
        {.child = 1, .message = "page 2 will not render"}, {.child = 2, .message = ""}};
    const struct orch_wire_answer partial[] = {{.grain = 32,
                                                .generation = 1,
                                                .outcome = ORCH_WIRE_OK,
                                                .message = "",
                                                .nchild = 3,
                                                .nout = 2,
                                                .payload = some,
                                                .size = some_sizes,
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

/* Values mode: a map answer, and an expansion of three children whose second failed (its
 * outputs are not set, and no other is unset). */
static void value_reports(void)
{
    struct orch_wire_buf b = {0};
    const struct orch_wire_bytes text[] = {{.data = "HELLO", .len = 5, .set = 1},
                                           {.data = "", .len = 0, .set = 1},
                                           {.data = "WORLD\n", .len = 6, .set = 1}};
    const struct orch_wire_answer map[] = {
        {.grain = 10,
         .generation = 1,
         .outcome = ORCH_WIRE_OK,
         .message = "",
         .nchild = 1,
         .nout = 1,
         .values = text},
        {.grain = 11,
         .generation = 1,
         .outcome = ORCH_WIRE_OK,
         .message = "",
         .nchild = 1,
         .nout = 1,
         .values = text + 1},
        {.grain = 12, .generation = 2, .outcome = ORCH_WIRE_DROP, .message = ""}};
    struct orch_wire_report ok = {.batch = 2,
                                  .status = ORCH_WIRE_STATUS_OK,
                                  .message = "",
                                  .values = 1,
                                  .nrec = 3,
                                  .rec = map};
    seed("report-values-map", &b, orch_wire_put_report(&b, &ok));
    check(orch_wire_put_report(&remote, &ok), "remote report");

    const struct orch_wire_bytes pages[] = {{.data = "p1", .len = 2, .set = 1},
                                            {.data = "t1", .len = 2, .set = 1},
                                            {.set = 0},
                                            {.set = 0},
                                            {.data = "p3", .len = 2, .set = 1},
                                            {.data = "", .len = 0, .set = 1}};
    const struct orch_wire_failed_child failed[] = {{.child = 1, .message = "page 2: no"}};
    const struct orch_wire_answer expand[] = {{.grain = 30,
                                               .generation = 1,
                                               .outcome = ORCH_WIRE_OK,
                                               .message = "",
                                               .nchild = 3,
                                               .nout = 2,
                                               .values = pages,
                                               .nfailed = 1,
                                               .failed = failed},
                                              {.grain = 31,
                                               .generation = 1,
                                               .outcome = ORCH_WIRE_OK,
                                               .message = "",
                                               .nchild = 0,
                                               .nout = 2,
                                               .values = NULL}};
    struct orch_wire_report exp = {.batch = 4,
                                   .status = ORCH_WIRE_STATUS_OK,
                                   .message = "",
                                   .values = 1,
                                   .nrec = 2,
                                   .rec = expand};
    seed("report-values-expand", &b, orch_wire_put_report(&b, &exp));

    /* Refused, but only after its outputs are allocated: 5000 outputs that are not set,
     * with no failed child. At one byte each on the wire and a 24-byte struct
     * orch_wire_bytes each once decoded, the largest ratio of allocation to body of any
     * frame (the bound that fuzz_wire checks). */
    static struct orch_wire_bytes unset[5000]; /* zero: set 0 */
    const struct orch_wire_answer bare[] = {{.grain = 35,
                                             .generation = 1,
                                             .outcome = ORCH_WIRE_OK,
                                             .message = "",
                                             .nchild = 5000,
                                             .nout = 1,
                                             .values = unset}};
    struct orch_wire_report ratio = {.batch = 11,
                                     .status = ORCH_WIRE_STATUS_OK,
                                     .message = "",
                                     .values = 1,
                                     .nrec = 1,
                                     .rec = bare};
    seed("regress-report-values-unset", &b, orch_wire_put_report(&b, &ratio));
}

/* A fed reduce's exchange: the worker's MORE, the driver's INPUTS page (two children of
 * two inputs, one absent), and the empty last page. */
static void feeds(void)
{
    struct orch_wire_buf b = {0};
    const struct orch_wire_more more = {.batch = 12, .grain = 40};
    seed("more", &b, orch_wire_put_more(&b, &more));
    const struct orch_wire_value vals[] = {
        {.payload = 7, .present = 1}, {.payload = 8, .present = 1},
        {.payload = 9, .present = 1}, {.payload = 0, .present = 0}};
    const struct orch_wire_inputs page = {
        .batch = 12, .grain = 40, .last = 0, .nin = 2, .nchild = 2, .vals = vals};
    seed("inputs", &b, orch_wire_put_inputs(&b, &page));
    const struct orch_wire_inputs last = {.batch = 12, .grain = 40, .last = 1, .nin = 2};
    seed("inputs-last", &b, orch_wire_put_inputs(&b, &last));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_wire_seeds DIR\n");
        return 2;
    }
    dir = argv[1];
    handshake();
    configs();
    hello_initfail();
    batches();
    value_batches();
    reports();
    value_reports();
    feeds();
    write_file("stream", &stream);
    write_file("stream-remote", &remote);
    orch_wire_buf_free(&remote);
    /* The stream cut inside its last frame: a partial frame at the end. */
    stream.len -= 3;
    write_file("stream-partial", &stream);
    orch_wire_buf_free(&stream);
    return 0;
}
