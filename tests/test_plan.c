/* test_plan.c — plans built through the C API alone (no language): the model, positions
 * {0,0}, every builder entry point and its errors, diagnostics; and engine/base below it:
 * SHA-256, the growable arrays and the little-endian codec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "orch_le.h"
#include "orch_plan.h"
#include "sha256.h"
#include "support.h"

#include <limits.h>

static const orch_loc NOLOC = {0, 0};

static orch_plan_builder *builder(void)
{
    orch_plan_builder *b;
    assert_int_equal(orch_plan_builder_new("/data", &b), 0);
    return b;
}

/* Everything the builder recorded, as orch_plan_diags_print writes it for "api". */
static char *diags(const orch_plan_builder *b)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_int_equal(orch_plan_diags_print(b, "api", f), 0);
    fclose(f);
    return buf;
}

static void expect_diags(orch_plan_builder *b, const char *expect)
{
    orch_plan *p;
    int rc = orch_plan_build(b, &p);
    char *got = diags(b);
    if (strcmp(got, expect) != 0) {
        fprintf(stderr, "expected:\n%s\ngot:\n%s", expect, got);
        fail_msg("unexpected diagnostics");
    }
    free(got);
    assert_int_equal(rc, strstr(expect, ": error: ") ? ORCH_EPLAN : 0);
    orch_plan_free(p);
    orch_plan_builder_free(b);
}

/* The reference pipeline of DESIGN §2, through the API. */
static orch_plan_builder *pdf_ocr(void)
{
    orch_plan_builder *b = builder();
    int c, s;
    assert_int_equal(orch_plan_set_name(b, "pdf_ocr", NOLOC), 0);
    assert_int_equal(orch_plan_add_domain(b, "pdf", NULL, NOLOC), 0);
    assert_int_equal(orch_plan_add_domain(b, "page", "pdf", NOLOC), 0);
    assert_int_equal(
        orch_plan_add_source(b, "pdf", "path", ORCH_SOURCE_FILES, "pdfs/*.pdf", NOLOC), 0);
    assert_int_equal(
        orch_plan_add_call(b, "render", ORCH_FN_BUILTIN, "pdf_render", NULL, NOLOC, &c), 0);
    assert_int_equal(orch_plan_call_arg(b, c, "dpi", ORCH_ARG_NUMBER, "150", NOLOC), 0);
    assert_int_equal(
        orch_plan_add_call(b, "ocr", ORCH_FN_BUILTIN, "tesseract_ocr", NULL, NOLOC, &c), 0);
    assert_int_equal(orch_plan_call_arg(b, c, "lang", ORCH_ARG_STRING, "eng", NOLOC), 0);
    assert_int_equal(orch_plan_call_option(b, c, "workers", "2", NOLOC), 0);
    assert_int_equal(orch_plan_call_option(b, c, "batch", "4", NOLOC), 0);
    assert_int_equal(orch_plan_call_option(b, c, "retries", "3", NOLOC), 0);
    assert_int_equal(orch_plan_call_option(b, c, "timeout", "120s", NOLOC), 0);
    assert_int_equal(
        orch_plan_add_call(b, "keep", ORCH_FN_BUILTIN, "nonempty", NULL, NOLOC, NULL), 0);
    assert_int_equal(
        orch_plan_add_call(b, "assemble", ORCH_FN_BUILTIN, "concat", NULL, NOLOC, &c), 0);
    assert_int_equal(orch_plan_call_arg(b, c, "sep", ORCH_ARG_STRING, "\f", NOLOC), 0);
    assert_int_equal(orch_plan_call_option(b, c, "reserve", "parent", NOLOC), 0);
    /* Statements are declarations: the reduce comes first, naming ports produced below. */
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_REDUCE, "assemble", NOLOC, &s), 0);
    assert_int_equal(orch_plan_stmt_output(b, s, "pdf", "text", NOLOC), 0);
    assert_int_equal(orch_plan_stmt_input(b, s, "page", "good", false, NOLOC), 0);
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_EXPAND, "render", NOLOC, &s), 0);
    assert_int_equal(orch_plan_stmt_output(b, s, "page", "image", NOLOC), 0);
    assert_int_equal(orch_plan_stmt_input(b, s, "pdf", "path", false, NOLOC), 0);
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_MAP, "ocr", NOLOC, &s), 0);
    assert_int_equal(orch_plan_stmt_output(b, s, "page", "text", NOLOC), 0);
    assert_int_equal(orch_plan_stmt_input(b, s, "page", "image", false, NOLOC), 0);
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_FILTER, "keep", NOLOC, &s), 0);
    assert_int_equal(orch_plan_stmt_output(b, s, "page", "good", NOLOC), 0);
    assert_int_equal(orch_plan_stmt_input(b, s, "page", "text", false, NOLOC), 0);
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_BROADCAST, NULL, NOLOC, &s), 0);
    assert_int_equal(orch_plan_stmt_output(b, s, "page", "doc", NOLOC), 0);
    assert_int_equal(orch_plan_stmt_input(b, s, "pdf", "path", false, NOLOC), 0);
    assert_int_equal(orch_plan_add_output(b, "pdf", "text", NOLOC), 0);
    return b;
}

static void test_build_pdf_ocr(void **state)
{
    orch_plan_builder *b = pdf_ocr();
    orch_plan *p;
    assert_int_equal(orch_plan_build(b, &p), 0);
    assert_int_equal(orch_plan_ndiags(b), 0);
    assert_string_equal(orch_plan_builder_basedir(b), "/data");
    orch_plan_builder_free(b); /* the plan owns its own memory */

    assert_string_equal(orch_plan_name(p), "pdf_ocr");
    assert_int_equal(orch_plan_ndomains(p), 2);
    const struct orch_domain *pdf = orch_plan_domain(p, 0), *page = orch_plan_domain(p, 1);
    assert_string_equal(pdf->name, "pdf");
    assert_int_equal(pdf->parent, -1);
    assert_int_equal(pdf->depth, 0);
    assert_int_equal(pdf->source, 0);
    assert_int_equal(pdf->expand, -1);
    assert_int_equal(pdf->nchildren, 1);
    assert_int_equal(pdf->children[0], 1);
    assert_int_equal(page->parent, 0);
    assert_int_equal(page->depth, 1);
    assert_int_equal(page->source, -1);
    assert_int_equal(page->expand, 1);
    assert_int_equal(page->nchildren, 0);

    const struct orch_source *src = orch_plan_source(p, 0);
    assert_int_equal(orch_plan_nsources(p), 1);
    assert_string_equal(src->arg, "/data/pdfs/*.pdf");
    assert_int_equal(src->kind, ORCH_SOURCE_FILES);
    assert_int_equal(src->domain, 0);
    assert_int_equal(src->port, 0);

    /* Ports by producer: the source's, then each statement's outputs in order. */
    static const char *const names[] = {"pdf.path",  "pdf.text",  "page.image",
                                        "page.text", "page.good", "page.doc"};
    assert_int_equal(orch_plan_nports(p), 6);
    for (int i = 0; i < 6; i++) {
        assert_string_equal(orch_plan_port(p, i)->qualified, names[i]);
        assert_int_equal(orch_plan_find_port(p, names[i]), i);
    }
    const struct orch_port *path = orch_plan_port(p, 0), *good = orch_plan_port(p, 4);
    assert_string_equal(path->name, "path");
    assert_int_equal(path->source, 0);
    assert_int_equal(path->producer, -1);
    assert_int_equal(path->nconsumers, 2);
    assert_int_equal(path->consumers[0], 1);
    assert_int_equal(path->consumers[1], 4);
    assert_int_equal(good->producer, 3);
    assert_int_equal(good->domain, 1);
    assert_int_equal(good->nconsumers, 1);
    assert_int_equal(good->consumers[0], 0);
    assert_true(orch_plan_port(p, 1)->output);
    assert_false(good->output);
    assert_int_equal(orch_plan_find_port(p, "page.nope"), -1);
    assert_int_equal(orch_plan_find_port(p, NULL), -1);

    const struct orch_stmt *reduce = orch_plan_stmt(p, 0), *expand = orch_plan_stmt(p, 1);
    const struct orch_stmt *bc = orch_plan_stmt(p, 4);
    assert_int_equal(reduce->op, ORCH_OP_REDUCE);
    assert_int_equal(reduce->domain, 0);
    assert_int_equal(reduce->target, 0);
    assert_int_equal(reduce->in[0].port, 4);
    assert_int_equal(expand->domain, 0);
    assert_int_equal(expand->target, 1);
    assert_int_equal(expand->out[0], 2);
    assert_int_equal(bc->call, -1);
    assert_int_equal(bc->domain, 1);
    assert_int_equal(bc->loc.line, 0);

    const struct orch_call *ocr = orch_plan_call(p, orch_plan_find_call(p, "ocr"));
    assert_int_equal(ocr->fn_kind, ORCH_FN_BUILTIN);
    assert_string_equal(ocr->function, "tesseract_ocr");
    assert_null(ocr->symbol);
    assert_int_equal(ocr->nargs, 1);
    assert_string_equal(ocr->args[0].key, "lang");
    assert_string_equal(ocr->args[0].value, "eng");
    assert_int_equal(ocr->opts.workers, 2);
    assert_int_equal(ocr->opts.batch, 4);
    assert_int_equal(ocr->opts.retries, 3);
    assert_int_equal(ocr->opts.timeout_ms, 120000);
    assert_true(ocr->opts.cpus == 1 && ocr->opts.gpus == 0);
    assert_int_equal(ocr->opts.reserve, ORCH_RESERVE_ELASTIC);
    assert_int_equal(ocr->stmt, 2);
    assert_int_equal(orch_plan_call(p, 3)->opts.reserve, ORCH_RESERVE_PARENT);
    assert_int_equal(orch_plan_find_call(p, "nope"), -1);

    assert_string_equal(
        orch_plan_canonical(p),
        "pipeline pdf_ocr\n"
        "\n"
        "domain pdf\n"
        "domain page in pdf\n"
        "\n"
        "source pdf.path = files(\"/data/pdfs/*.pdf\")\n"
        "\n"
        "call render = pdf_render(dpi=150) with workers=1, batch=auto, batch_bytes=none, cpus=1, "
        "gpus=0, retries=2, timeout=none, reserve=elastic\n"
        "call ocr = tesseract_ocr(lang=\"eng\") with workers=2, batch=4, batch_bytes=none, "
        "cpus=1, gpus=0, retries=3, timeout=2m, reserve=elastic\n"
        "call keep = nonempty() with workers=1, batch=auto, batch_bytes=none, cpus=1, gpus=0, "
        "retries=2, timeout=none, reserve=elastic\n"
        "call assemble = concat(sep=\"\\f\") with workers=1, batch=auto, batch_bytes=none, "
        "cpus=1, "
        "gpus=0, retries=2, timeout=none, reserve=parent\n"
        "\n"
        "pdf.text = reduce assemble(page.good)\n"
        "page.image = expand render(pdf.path)\n"
        "page.text = ocr(page.image)\n"
        "page.good = filter keep(page.text)\n"
        "page.doc = broadcast pdf.path\n"
        "\n"
        "output pdf.text\n");
    char hex[65];
    orch_sha256_hex(orch_plan_canonical(p), strlen(orch_plan_canonical(p)), hex);
    assert_string_equal(orch_plan_hash(p), hex);

    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    assert_int_equal(orch_plan_print(p, f), 0);
    fclose(f);
    assert_non_null(strstr(text, "pipeline pdf_ocr\nhash "));
    assert_non_null(strstr(text, orch_plan_hash(p)));
    assert_non_null(strstr(text, "    page"));
    assert_non_null(strstr(text, "  ocr = tesseract_ocr(lang=\"eng\")\n      workers=2 batch=4 "
                                 "batch_bytes=none cpus=1 gpus=0 retries=3 timeout=2m "
                                 "reserve=elastic\n"));
    assert_non_null(strstr(text, "-> render, broadcast page.doc\n"));
    free(text);
    orch_plan_free(p);
}

static void test_same_plan_same_hash(void **state)
{
    orch_plan_builder *b1 = pdf_ocr(), *b2 = pdf_ocr();
    orch_plan *p1, *p2;
    assert_int_equal(orch_plan_build(b1, &p1), 0);
    assert_int_equal(orch_plan_call_option(b2, 0, "gpus", "0.5", NOLOC), 0);
    assert_int_equal(orch_plan_build(b2, &p2), 0);
    assert_string_not_equal(orch_plan_hash(p1), orch_plan_hash(p2));
    /* Building again answers the same, and records nothing twice. */
    orch_plan *p3;
    assert_int_equal(orch_plan_build(b1, &p3), 0);
    assert_string_equal(orch_plan_hash(p3), orch_plan_hash(p1));
    orch_plan_free(p1);
    orch_plan_free(p2);
    orch_plan_free(p3);
    orch_plan_builder_free(b1);
    orch_plan_builder_free(b2);
}

static void test_paths(void **state)
{
    orch_plan_builder *b = builder();
    int c, s;
    orch_plan_set_name(b, "paths", NOLOC);
    orch_plan_add_domain(b, "a", NULL, NOLOC);
    orch_plan_add_domain(b, "z", NULL, NOLOC);
    orch_plan_add_source(b, "a", "x", ORCH_SOURCE_LINES, "./in//list/./x.txt", NOLOC);
    orch_plan_add_source(b, "z", "x", ORCH_SOURCE_FILES, "/abs/./*.txt", NOLOC);
    assert_int_equal(
        orch_plan_add_call(b, "l", ORCH_FN_LIBRARY, "../lib/u.so", "udf", NOLOC, &c), 0);
    assert_int_equal(
        orch_plan_add_call(b, "e", ORCH_FN_EXEC, "./tool --x ../y", NULL, NOLOC, NULL), 0);
    orch_plan_add_stmt(b, ORCH_OP_MAP, "l", NOLOC, &s);
    orch_plan_stmt_output(b, s, "a", "y", NOLOC);
    orch_plan_stmt_input(b, s, "a", "x", false, NOLOC);
    orch_plan_add_stmt(b, ORCH_OP_MAP, "e", NOLOC, &s);
    orch_plan_stmt_output(b, s, "z", "y", NOLOC);
    orch_plan_stmt_input(b, s, "z", "x", true, NOLOC);
    orch_plan *p;
    assert_int_equal(orch_plan_build(b, &p), 0);
    assert_string_equal(orch_plan_source(p, 0)->arg, "/data/in/list/x.txt");
    assert_string_equal(orch_plan_source(p, 1)->arg, "/abs/*.txt");
    assert_string_equal(orch_plan_call(p, 0)->function, "/data/../lib/u.so");
    assert_string_equal(orch_plan_call(p, 0)->symbol, "udf");
    assert_string_equal(orch_plan_call(p, 1)->function, "./tool --x ../y");
    assert_true(orch_plan_stmt(p, 1)->in[0].optional);
    orch_plan_free(p);
    orch_plan_builder_free(b);

    /* A relative basedir is made absolute against the current directory. */
    assert_int_equal(orch_plan_builder_new("sub/dir/", &b), 0);
    assert_true(orch_plan_builder_basedir(b)[0] == '/');
    assert_non_null(strstr(orch_plan_builder_basedir(b), "/sub/dir/"));
    orch_plan_builder_free(b);
}

/* Errors from the API carry no position: "api: error: ...". */
static void test_errors_without_position(void **state)
{
    orch_plan_builder *b = builder();
    int c, s;
    assert_int_equal(orch_plan_add_domain(b, "a", NULL, NOLOC), 0);
    assert_int_equal(orch_plan_add_domain(b, "a", NULL, NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_add_domain(b, "b", "nope", NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_add_domain(b, "a.b", NULL, NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_add_domain(b, "", NULL, NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_add_domain(b, "1x", NULL, NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_add_source(b, "a", "x", ORCH_SOURCE_FILES, "*", NOLOC), 0);
    assert_int_equal(orch_plan_add_call(b, "u", ORCH_FN_BUILTIN, "upper", NULL, NOLOC, &c), 0);
    assert_int_equal(orch_plan_call_option(b, c, "workers", "many", NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_BROADCAST, "u", NOLOC, &s), ORCH_EPLAN);
    assert_true(s >= 0);
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_MAP, NULL, NOLOC, &s), ORCH_EPLAN);
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_MAP, "u", NOLOC, &s), 0);
    assert_int_equal(orch_plan_stmt_output(b, s, "a", "y", NOLOC), 0);
    assert_int_equal(orch_plan_stmt_input(b, s, "a", "x", false, NOLOC), 0);
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_BROADCAST, NULL, NOLOC, &s), 0);
    assert_int_equal(orch_plan_stmt_output(b, s, "a", "z", NOLOC), 0);
    assert_int_equal(orch_plan_stmt_input(b, s, "a", "x", true, NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_add_stmt(b, (enum orch_op)99, "u", NOLOC, &s), ORCH_EPLAN);
    assert_int_equal(s, -1);
    assert_int_equal(orch_plan_nerrors(b), 10);
    expect_diags(b,
                 "api: error: domain 'a' is already defined\n"
                 "api: error: unknown domain 'nope'\n"
                 "api: error: invalid domain name \"a.b\"\n"
                 "api: error: invalid domain name \"\"\n"
                 "api: error: invalid domain name \"1x\"\n"
                 "api: error: option 'workers' must be an integer from 1 to 1024, not 'many'\n"
                 "api: error: broadcast takes no call\n"
                 "api: error: map needs a call\n"
                 "api: error: the input of a broadcast cannot be optional\n"
                 "api: error: invalid operation 99\n"
                 "api: error: missing 'pipeline NAME' statement\n"
                 "api: error: broadcast has no output\n"
                 "api: error: map has no output\n"
                 "api: error: broadcast needs an ancestor: 'a' is not an ancestor domain of "
                 "'a'\n");
}

static void test_builder_checks(void **state)
{
    orch_plan_builder *b = builder();
    int c, s;
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(orch_plan_set_name(b, longname, NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_set_name(b, "p", NOLOC), 0);
    assert_int_equal(orch_plan_add_domain(b, "r", NULL, NOLOC), 0);
    assert_int_equal(orch_plan_add_domain(b, "k", "r", NOLOC), 0);
    assert_int_equal(orch_plan_add_source(b, "r", "x", ORCH_SOURCE_LINES, "", NOLOC),
                     ORCH_EPLAN);
    assert_int_equal(orch_plan_add_source(b, "r", "x", (enum orch_source_kind)7, "f", NOLOC),
                     ORCH_EPLAN);
    assert_int_equal(orch_plan_add_source(b, "r", "x", ORCH_SOURCE_LINES, "f", NOLOC), 0);
    /* A duplicate call still hands out a handle whose arguments are checked. */
    assert_int_equal(orch_plan_add_call(b, "s", ORCH_FN_BUILTIN, "split", NULL, NOLOC, &c), 0);
    assert_int_equal(orch_plan_call_arg(b, c, "sep", ORCH_ARG_STRING, ",", NOLOC), 0);
    assert_int_equal(orch_plan_add_call(b, "s", ORCH_FN_BUILTIN, "split", NULL, NOLOC, &c),
                     ORCH_EPLAN);
    assert_true(c >= 0);
    assert_int_equal(orch_plan_call_arg(b, c, "sop", ORCH_ARG_STRING, ",", NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_add_call(b, "x", ORCH_FN_LIBRARY, "", "f", NOLOC, NULL),
                     ORCH_EPLAN);
    assert_int_equal(orch_plan_add_call(b, "y", (enum orch_fn_kind)9, "f", NULL, NOLOC, NULL),
                     ORCH_EPLAN);
    assert_int_equal(orch_plan_add_call(b, "e", ORCH_FN_EXEC, "e", NULL, NOLOC, &c), 0);
    assert_int_equal(orch_plan_call_arg(b, c, "bad key", ORCH_ARG_NUMBER, "1", NOLOC),
                     ORCH_EPLAN);
    assert_int_equal(orch_plan_call_arg(b, c, "n", ORCH_ARG_NUMBER, "1e5", NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_call_arg(b, c, "m", ORCH_ARG_NAME, "not a name", NOLOC),
                     ORCH_EPLAN);
    assert_int_equal(orch_plan_call_arg(b, c, "k", (enum orch_arg_kind)5, "v", NOLOC),
                     ORCH_EPLAN);
    assert_int_equal(orch_plan_call_arg(b, c, "ok", ORCH_ARG_NUMBER, "-1.5KiB", NOLOC), 0);
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_EXPAND, "s", NOLOC, &s), 0);
    assert_int_equal(orch_plan_stmt_output(b, s, "k", "v", NOLOC), 0);
    assert_int_equal(orch_plan_stmt_input(b, s, "r", "x", false, NOLOC), 0);
    assert_int_equal(orch_plan_add_stmt(b, ORCH_OP_MAP, "e", NOLOC, &s), 0);
    assert_int_equal(orch_plan_stmt_output(b, s, "k", "w", NOLOC), 0);
    assert_int_equal(orch_plan_stmt_output(b, s, "k", "bad.port", NOLOC), ORCH_EPLAN);
    assert_int_equal(orch_plan_add_output(b, "k", "w", NOLOC), 0);
    assert_int_equal(orch_plan_add_output(b, "q", "w", NOLOC), ORCH_EPLAN);
    expect_diags(b, "api: error: pipeline name too long (199 bytes; at most 128)\n"
                    "api: error: lines() needs a non-empty file name\n"
                    "api: error: invalid source kind 7\n"
                    "api: error: call 's' is already defined\n"
                    "api: error: function 'split' has no argument 'sop' (it takes: sep)\n"
                    "api: error: library() needs the path of a shared object\n"
                    "api: error: invalid function kind 9\n"
                    "api: error: invalid argument name 'bad key'\n"
                    "api: error: argument 'n': invalid number '1e5'\n"
                    "api: error: argument 'm': invalid name 'not a name'\n"
                    "api: error: argument 'k' has no valid value\n"
                    "api: error: invalid port name \"bad.port\"\n"
                    "api: error: unknown domain 'q'\n");
}

/* Positions given through the API are kept and sorted. */
static void test_diagnostics_sorted_and_capped(void **state)
{
    orch_plan_builder *b = builder();
    orch_plan_diag(b, ORCH_DIAG_WARNING, (orch_loc){9, 1}, "w%d", 9);
    orch_plan_diag(b, ORCH_DIAG_ERROR, (orch_loc){3, 7}, "e%d", 37);
    orch_plan_diag(b, ORCH_DIAG_ERROR, (orch_loc){3, 2}, "e%d", 32);
    orch_plan_diag(b, ORCH_DIAG_ERROR, (orch_loc){3, 2}, "e%s", "32b");
    assert_int_equal(orch_plan_ndiags(b), 4);
    assert_int_equal(orch_plan_nerrors(b), 3);
    assert_int_equal(orch_plan_nwarnings(b), 1);
    assert_string_equal(orch_plan_get_diag(b, 0)->message, "e32");
    assert_string_equal(orch_plan_get_diag(b, 1)->message, "e32b");
    assert_string_equal(orch_plan_get_diag(b, 2)->message, "e37");
    assert_int_equal(orch_plan_get_diag(b, 3)->severity, ORCH_DIAG_WARNING);
    for (int i = 0; i < 150; i++)
        orch_plan_diag(b, ORCH_DIAG_ERROR, (orch_loc){100 + i, 1}, "more");
    assert_int_equal(orch_plan_nerrors(b), 153);
    assert_int_equal(orch_plan_ndiags(b), 101);
    char *text = diags(b);
    assert_non_null(strstr(text,
                           "api:3:2: error: e32\napi:3:2: error: e32b\napi:3:7: error: e37\n"
                           "api:9:1: warning: w9\napi:100:1: error: more\n"));
    assert_non_null(strstr(text, "api: error: too many errors; 53 more not shown\n"));
    free(text);
    orch_plan *p;
    assert_int_equal(orch_plan_build(b, &p), ORCH_EPLAN);
    assert_null(p);
    orch_plan_builder_free(b);
}

static void test_enum_names(void **state)
{
    assert_string_equal(orch_op_name(ORCH_OP_EXPAND_ALIGNED), "expand aligned");
    assert_string_equal(orch_op_name(ORCH_OP_BROADCAST), "broadcast");
    assert_string_equal(orch_op_name((enum orch_op)42), "?");
    assert_string_equal(orch_source_kind_name(ORCH_SOURCE_LINES), "lines");
    assert_string_equal(orch_fn_kind_name(ORCH_FN_LIBRARY), "library");
    assert_string_equal(orch_reserve_name(ORCH_RESERVE_PARENT), "parent");
    assert_string_equal(orch_arg_kind_name(ORCH_ARG_NAME), "name");
    assert_string_equal(orch_reserve_name((enum orch_reserve) - 1), "?");
    struct orch_call_opts o;
    orch_call_opts_default(&o);
    assert_int_equal(o.workers, 1);
    assert_int_equal(o.batch, ORCH_BATCH_AUTO);
    assert_int_equal(o.batch_bytes, 0);
    assert_true(o.cpus == 1 && o.gpus == 0);
    assert_int_equal(o.retries, 2);
    assert_int_equal(o.timeout_ms, 0);
    assert_int_equal(o.reserve, ORCH_RESERVE_ELASTIC);
}

/* RFC 4231 test cases 1, 2 and 6 (a key longer than the 64-byte block, hashed first). */
static void test_hmac_sha256(void **state)
{
    (void)state;
    unsigned char key[131], mac[32];
    static const unsigned char case1[32] = {0xb0, 0x34, 0x4c, 0x61, 0xd8, 0xdb, 0x38, 0x53,
                                            0x5c, 0xa8, 0xaf, 0xce, 0xaf, 0x0b, 0xf1, 0x2b,
                                            0x88, 0x1d, 0xc2, 0x00, 0xc9, 0x83, 0x3d, 0xa7,
                                            0x26, 0xe9, 0x37, 0x6c, 0x2e, 0x32, 0xcf, 0xf7};
    memset(key, 0x0b, 20);
    orch_hmac_sha256(key, 20, "Hi There", 8, mac);
    assert_memory_equal(mac, case1, 32);
    static const unsigned char case2[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e,
                                            0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
                                            0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83,
                                            0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
    const char *what = "what do ya want for nothing?";
    orch_hmac_sha256("Jefe", 4, what, strlen(what), mac);
    assert_memory_equal(mac, case2, 32);
    static const unsigned char case6[32] = {0x60, 0xe4, 0x31, 0x59, 0x1e, 0xe0, 0xb6, 0x7f,
                                            0x0d, 0x8a, 0x26, 0xaa, 0xcb, 0xf5, 0xb7, 0x7f,
                                            0x8e, 0x0b, 0xc6, 0x21, 0x37, 0x28, 0xc5, 0x14,
                                            0x05, 0x46, 0x04, 0x0f, 0x0e, 0xe3, 0x7f, 0x54};
    const char *first = "Test Using Larger Than Block-Size Key - Hash Key First";
    memset(key, 0xaa, sizeof key);
    orch_hmac_sha256(key, sizeof key, first, strlen(first), mac);
    assert_memory_equal(mac, case6, 32);
    /* The key matters to the last byte: a key one byte shorter gives another mac. */
    orch_hmac_sha256(key, sizeof key - 1, first, strlen(first), mac);
    assert_memory_not_equal(mac, case6, 32);
}

/* FIPS 180-2 appendix B vectors, and the incremental interface with odd chunk sizes. */
static void test_sha256(void **state)
{
    char hex[65];
    orch_sha256_hex("abc", 3, hex);
    assert_string_equal(hex,
                        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    orch_sha256_hex("", 0, hex);
    assert_string_equal(hex,
                        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    orch_sha256_hex(two, strlen(two), hex);
    assert_string_equal(hex,
                        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *four = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmno"
                       "pjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    orch_sha256_hex(four, strlen(four), hex);
    assert_string_equal(hex,
                        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    /* One million 'a', fed in chunks of 1..127 bytes. */
    char chunk[128];
    memset(chunk, 'a', sizeof chunk);
    struct orch_sha256 c;
    orch_sha256_init(&c);
    size_t left = 1000000, k = 1;
    while (left) {
        size_t n = k < left ? k : left;
        orch_sha256_update(&c, chunk, n);
        left -= n;
        k = k % 127 + 1;
    }
    unsigned char d[32];
    orch_sha256_final(&c, d);
    static const unsigned char million[32] = {0xcd, 0xc7, 0x6e, 0x5c, 0x99, 0x14, 0xfb, 0x92,
                                              0x81, 0xa1, 0xc7, 0xe2, 0x84, 0xd7, 0x3e, 0x67,
                                              0xf1, 0x80, 0x9a, 0x48, 0xa4, 0x97, 0x20, 0x0e,
                                              0x04, 0x6d, 0x39, 0xcc, 0xc7, 0x11, 0x2c, 0xd0};
    assert_memory_equal(d, million, 32);
    /* Lengths around the padding boundary agree between one-shot and incremental. */
    for (size_t n = 50; n < 70; n++) {
        char one[65], buf[70];
        memset(buf, 'x', n);
        orch_sha256_hex(buf, n, one);
        orch_sha256_init(&c);
        for (size_t i = 0; i < n; i++)
            orch_sha256_update(&c, buf + i, 1);
        unsigned char d2[32];
        orch_sha256_final(&c, d2);
        char two_hex[65];
        for (int i = 0; i < 32; i++)
            snprintf(two_hex + 2 * i, 3, "%02x", d2[i]);
        assert_string_equal(one, two_hex);
    }
}

/* Growth keeps what is there, doubles (so appends cost O(n)), can be exact the first
 * time, and refuses a size that overflows, leaving the array as it was. */
static void test_grow(void **state)
{
    (void)state;
    uint64_t *v = NULL;
    size_t cap = 0;
    for (size_t n = 0; n < 1000; n++) {
        size_t before = cap;
        assert_int_equal(orch__grow_n(&v, &cap, n + 1, sizeof *v), 0);
        assert_true(cap >= n + 1);
        if (cap != before) /* grew: at least twice, at least 8 */
            assert_true(cap >= 2 * before && cap >= 8);
        v[n] = n * 7;
    }
    assert_true(cap < 2048);
    for (size_t n = 0; n < 1000; n++)
        assert_true(v[n] == n * 7);
    uint64_t *kept = v;
    size_t kept_cap = cap;
    assert_int_equal(orch__grow_n(&v, &cap, SIZE_MAX / 4, sizeof *v), -ENOMEM);
    assert_true(v == kept && cap == kept_cap);
    assert_int_equal(orch__grow_n(&v, &cap, 10, sizeof *v), 0); /* room already */
    assert_true(v == kept && cap == kept_cap);
    free(v);

    char *b = NULL;
    cap = 0;
    assert_int_equal(orch__grow_n(&b, &cap, 1001, 1), 0); /* a known size: exact */
    assert_int_equal(cap, 1001);
    free(b);

    int *w = NULL, icap = 0;
    assert_int_equal(orch__grow(&w, &icap, -1, sizeof *w), -ENOMEM);
    assert_int_equal(orch__grow(&w, &icap, INT_MAX, SIZE_MAX / 2), -ENOMEM);
    assert_true(w == NULL && icap == 0);
    for (int n = 0; n < 100; n++) {
        assert_int_equal(orch__grow(&w, &icap, n + 1, sizeof *w), 0);
        w[n] = n;
    }
    assert_true(icap >= 100 && icap < 200);
    for (int n = 0; n < 100; n++)
        assert_int_equal(w[n], n);
    free(w);

    assert_int_equal(ORCH_NEVER(1 == 2), 0);
    assert_int_equal(ORCH_ALWAYS(2 == 2), 1);
}

/* orch__sort_u64 against qsort: ids in order, reversed, equal, a few out of place,
 * random (wide and narrow ranges, so with many duplicates), and a sawtooth, whose
 * partitions are all bad for a plain quicksort (the heapsort fallback). */
static int cmp_u64_test(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_sort_u64(void **state)
{
    (void)state;
    const size_t sizes[] = {0, 1, 2, 3, 16, 17, 100, 1000, 20000};
    uint64_t seed = 88172645463325252ull;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        uint64_t *v = malloc((n ? n : 1) * sizeof *v), *w = malloc((n ? n : 1) * sizeof *w);
        assert_non_null(v);
        assert_non_null(w);
        for (int shape = 0; shape < 7; shape++) {
            for (size_t i = 0; i < n; i++) {
                seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17; /* xorshift64 */
                switch (shape) {
                case 0: v[i] = i; break;
                case 1: v[i] = n - i; break;
                case 2: v[i] = 7; break;
                case 3: v[i] = i % 50 == 49 ? seed % (n + 1) : i; break;
                case 4: v[i] = seed; break;
                case 5: v[i] = seed % 5; break;
                default: v[i] = i % 64 * (n / 64 + 1) + i / 64; break;
                }
            }
            memcpy(w, v, n * sizeof *v);
            qsort(w, n, sizeof *w, cmp_u64_test);
            orch__sort_u64(v, n);
            if (n > 0)
                assert_memory_equal(v, w, n * sizeof *v);
        }
        free(v);
        free(w);
    }
}

/* Byte k of an n-byte integer is (v >> 8k) & 0xff, whatever the host's order. */
static void test_le(void **state)
{
    (void)state;
    uint8_t b[8];
    orch__le_put32(b, 0x11223344u);
    const uint8_t want32[] = {0x44, 0x33, 0x22, 0x11};
    assert_memory_equal(b, want32, 4);
    assert_true(orch__le_get32(b) == 0x11223344u);
    orch__le_put64(b, 0x0102030405060708ull);
    const uint8_t want64[] = {8, 7, 6, 5, 4, 3, 2, 1};
    assert_memory_equal(b, want64, 8);
    assert_true(orch__le_get64(b) == 0x0102030405060708ull);
    orch__le_put64(b, UINT64_MAX);
    assert_true(orch__le_get64(b) == UINT64_MAX);
    assert_true(orch__le_get(b, 3) == 0xffffff);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_pdf_ocr),
        cmocka_unit_test(test_same_plan_same_hash),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_errors_without_position),
        cmocka_unit_test(test_builder_checks),
        cmocka_unit_test(test_diagnostics_sorted_and_capped),
        cmocka_unit_test(test_enum_names),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_hmac_sha256),
        cmocka_unit_test(test_grow),
        cmocka_unit_test(test_le),
        cmocka_unit_test(test_sort_u64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
