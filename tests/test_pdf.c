/* test_pdf.c — the MuPDF built-ins pdf_render and pdf_text through the real ABI and the real
 * answer collector, on PDFs made here from known text (pdf_fixture.h): page counts and
 * order, the text layer exactly, images decoded back (by MuPDF) to the size the dpi gives,
 * PNG and PGM pixel for pixel the same, and every kind of bad input a RecordFailure with
 * its message: not a PDF, truncated at every byte, encrypted, a page past max_pixels, a
 * vanished file, a value that is neither bytes nor a path; an encrypted PDF that opens
 * without a password is read. */
#define _GNU_SOURCE /* nftw, in testutil.h */
#include "orch_udf_host.h"
#include "pdf_fixture.h"
#include "testutil.h"
#include "udf_harness.h"

#include <mupdf/fitz.h>

#include <errno.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- the test's PDFs ----------------------------------------------------------------- */

static const char *const page1[] = {"Alpha bravo charlie", "delta echo"};
static const char *const page2[] = {"Foxtrot golf"};
static const char *const page3[] = {"Hotel india juliet"};
static const struct orch_test_pdf_page good_pages[] = {
    {612, 792, page1, 2},
    {612, 792, page2, 1},
    {300, 400, page3, 1},
};
/* MuPDF's plain text of each page: every line ends with \n, every block with one more. */
static const char *const good_text[] = {
    "Alpha bravo charlie\ndelta echo\n\n",
    "Foxtrot golf\n\n",
    "Hotel india juliet\n\n",
};

struct pdf {
    char *data;
    size_t len;
};

static struct pdf make_pdf(const struct orch_test_pdf_page *pages, size_t n)
{
    struct pdf p;
    assert_int_equal(orch_test_pdf_make(pages, n, &p.data, &p.len), 0);
    return p;
}

/* ---- the harness (udf_harness.h): each built-in a call of its own name, 1 in, 1 out -- */

static int setup(void **state)
{
    *state = udf_h_new(NULL);
    return *state != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    return udf_h_free(*state);
}

/* Starts built-in `name` as `op` with the arguments given as key, value, ..., NULL.
 * Returns init's result; on failure the message is in h->err. */
#define h_start(h, name, op, ...) udf_h_builtin(h, name, op, 1, 1, __VA_ARGS__)

/* Runs one batch of n records, record i's value being data[i] (len[i] < 0: absent) and
 * expects run to return 0; the answers are in h->ans. */
static void h_run(struct udf_h *h, size_t n, const void *const *data, const ptrdiff_t *len)
{
    udf_h_clear(h);
    for (size_t i = 0; i < n; i++)
        udf_h_add(h, len[i] < 0 ? NULL : data[i], len[i] < 0 ? 0 : (size_t)len[i]);
    udf_h_run_ok(h);
}

/* One record of `len` bytes at data; returns its answer. */
static const struct orch_udf_answer *h_one(struct udf_h *h, const void *data, size_t len)
{
    const void *d[1] = {data};
    ptrdiff_t l[1] = {(ptrdiff_t)len};
    h_run(h, 1, d, l);
    return &h->ans.rec[0];
}

static const struct orch_udf_answer *h_path(struct udf_h *h, const char *path)
{
    return h_one(h, path, strlen(path));
}

/* Writes data to DIR/name and puts the path into path[4096]. */
static void h_file(struct udf_h *h, const char *name, const void *data, size_t len, char *path)
{
    assert_int_equal(orch_test_path(path, 4096, udf_h_tmpdir(h, "pdf"), name), 0);
    assert_int_equal(orch_test_write_file(path, data, len), 0);
}

static void expect_failure(const struct orch_udf_answer *a, const char *msg)
{
    if (a->outcome != ORCH_UDF_RECORD_FAILURE)
        fail_msg("expected a RecordFailure \"%s\", got %s", msg,
                 orch_udf_outcome_name(a->outcome));
    assert_string_equal(a->msg, msg);
}

/* a is an expansion of n children; fails[c] is child c's failure message, NULL for a child
 * made (its value is then set). */
static void expect_children(const struct orch_udf_answer *a, size_t n, const char *const *fails)
{
    if (a->outcome != ORCH_UDF_OK)
        fail_msg("expected %zu children, got %s: %s", n, orch_udf_outcome_name(a->outcome),
                 a->msg ? a->msg : "");
    assert_int_equal(a->nchildren, n);
    for (size_t c = 0; c < n; c++) {
        const char *got = a->child_msg != NULL ? a->child_msg[c] : NULL;
        if (fails[c] == NULL && got != NULL)
            fail_msg("child %zu failed: %s", c, got);
        if (fails[c] != NULL && got == NULL)
            fail_msg("child %zu was made; expected it to fail: %s", c, fails[c]);
        if (fails[c] != NULL)
            assert_string_equal(got, fails[c]);
        else
            assert_true(a->children[c].set);
    }
}

static void expect_text(const struct orch_udf_answer *a, const char *const *pages, size_t n)
{
    if (a->outcome != ORCH_UDF_OK)
        fail_msg("expected %zu pages, got %s: %s", n, orch_udf_outcome_name(a->outcome),
                 a->msg ? a->msg : "");
    assert_int_equal(a->nchildren, n);
    for (size_t c = 0; c < n; c++) {
        assert_int_equal(a->children[c].len, strlen(pages[c]));
        assert_memory_equal(a->children[c].data, pages[c], strlen(pages[c]));
    }
}

/* ---- decoding the images back, with MuPDF -------------------------------------------- */

struct image {
    int w, h, xres, yres;
    unsigned char *px; /* w*h gray bytes, malloc'd */
};

/* Decodes a PNG or PGM payload; fails the test when MuPDF cannot, or when it is not one
 * 8-bit gray component without alpha. */
static struct image decode(const struct orch_udf_out *o)
{
    struct image im = {0};
    fz_context *ctx = fz_new_context(NULL, NULL, FZ_STORE_DEFAULT);
    assert_non_null(ctx);
    fz_buffer *buf = NULL;
    fz_image *img = NULL;
    fz_pixmap *pix = NULL;
    int ok = 0;
    fz_var(buf);
    fz_var(img);
    fz_var(pix);
    fz_try(ctx)
    {
        buf = fz_new_buffer_from_copied_data(ctx, o->data, o->len);
        img = fz_new_image_from_buffer(ctx, buf);
        pix = fz_get_pixmap_from_image(ctx, img, NULL, NULL, NULL, NULL);
        if (pix->n == 1 && pix->alpha == 0 && img->bpc == 8) {
            im.w = pix->w;
            im.h = pix->h;
            fz_image_resolution(img, &im.xres, &im.yres);
            im.px = malloc((size_t)im.w * (size_t)im.h);
            for (int y = 0; im.px != NULL && y < im.h; y++)
                memcpy(im.px + (size_t)y * (size_t)im.w, pix->samples + y * pix->stride,
                       (size_t)im.w);
            ok = im.px != NULL;
        }
    }
    fz_always(ctx)
    {
        fz_drop_pixmap(ctx, pix);
        fz_drop_image(ctx, img);
        fz_drop_buffer(ctx, buf);
    }
    fz_catch(ctx)
    {
        fprintf(stderr, "decode: %s\n", fz_caught_message(ctx));
    }
    fz_drop_context(ctx);
    if (!ok)
        fail_msg("the payload (%zu bytes) is not an 8-bit gray image", o->len);
    return im;
}

/* How many pixels are darker than mid-gray: text was drawn. */
static size_t dark(const struct image *im)
{
    size_t n = 0;
    for (size_t i = 0; i < (size_t)im->w * (size_t)im->h; i++)
        n += im->px[i] < 128;
    return n;
}

/* ---- tests --------------------------------------------------------------------------- */

/* The text layer, exactly, in page order: from bytes, from a path, and aligned. */
static void test_text_layer(void **state)
{
    struct udf_h *h = *state;
    struct pdf p = make_pdf(good_pages, 3);
    char path[4096];
    h_file(h, "good.pdf", p.data, p.len, path);
    assert_int_equal(h_start(h, "pdf_text", ORCH_UDF_OP_EXPAND, NULL), 0);
    expect_text(h_one(h, p.data, p.len), good_text, 3);
    expect_text(h_path(h, path), good_text, 3);
    assert_int_equal(h_start(h, "pdf_text", ORCH_UDF_OP_EXPAND_ALIGNED, NULL), 0);
    expect_text(h_path(h, path), good_text, 3);
    free(p.data);
}

/* Each page an 8-bit gray PNG of ceil(points * dpi / 72) pixels a side, with the dpi in
 * it, text drawn dark on white; the PGM of format=gray has the same pixels. */
static void test_render_sizes_and_formats(void **state)
{
    struct udf_h *h = *state;
    struct pdf p = make_pdf(good_pages, 3);
    static const struct {
        int dpi;
        int wh[3][2];
    } cases[] = {
        {150, {{1275, 1650}, {1275, 1650}, {625, 834}}},
        {72, {{612, 792}, {612, 792}, {300, 400}}},
        {100, {{850, 1100}, {850, 1100}, {417, 556}}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char dpi[16];
        snprintf(dpi, sizeof dpi, "%d", cases[c].dpi);
        struct image png[3], pgm[3];
        for (int f = 0; f < 2; f++) {
            assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "dpi", dpi, "format",
                                     f == 0 ? "png" : "gray", NULL),
                             0);
            const struct orch_udf_answer *a = h_one(h, p.data, p.len);
            assert_int_equal(a->outcome, ORCH_UDF_OK);
            assert_int_equal(a->nchildren, 3);
            for (int k = 0; k < 3; k++) {
                const struct orch_udf_out *o = &a->children[k];
                if (f == 0)
                    assert_memory_equal(o->data, "\x89PNG\r\n\x1a\n", 8);
                else
                    assert_memory_equal(o->data, "P5\n", 3);
                struct image im = decode(o);
                assert_int_equal(im.w, cases[c].wh[k][0]);
                assert_int_equal(im.h, cases[c].wh[k][1]);
                if (f == 0) { /* the PNG's pHYs; a PGM has no resolution */
                    assert_int_equal(im.xres, cases[c].dpi);
                    assert_int_equal(im.yres, cases[c].dpi);
                }
                assert_int_equal(im.px[0], 255); /* a white corner */
                assert_true(dark(&im) > 100);
                (f == 0 ? png : pgm)[k] = im;
            }
        }
        for (int k = 0; k < 3; k++) {
            assert_memory_equal(png[k].px, pgm[k].px, (size_t)png[k].w * (size_t)png[k].h);
            free(png[k].px);
            free(pgm[k].px);
        }
    }
    free(p.data);
}

/* Pages render in order: page k's ink lies where its lines are, and more lines, more ink
 * (page 1 has two lines, page 2 one line of fewer letters). */
static void test_render_order(void **state)
{
    struct udf_h *h = *state;
    struct pdf p = make_pdf(good_pages, 3);
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "dpi", "72", NULL), 0);
    const struct orch_udf_answer *a = h_one(h, p.data, p.len);
    assert_int_equal(a->nchildren, 3);
    struct image im[3];
    for (int k = 0; k < 3; k++)
        im[k] = decode(&a->children[k]);
    assert_true(dark(&im[0]) > dark(&im[1]));
    assert_int_equal(im[2].w, 300); /* the small page last */
    for (int k = 0; k < 3; k++)
        free(im[k].px);
    free(p.data);
}

static void test_not_a_pdf(void **state)
{
    struct udf_h *h = *state;
    char path[4096], msg[8192];
    static const char text[] = "this is a line of text, not a PDF\n";
    h_file(h, "notpdf.pdf", text, strlen(text), path);
    for (int t = 0; t < 2; t++) {
        const char *name = t == 0 ? "pdf_render" : "pdf_text";
        assert_int_equal(h_start(h, name, ORCH_UDF_OP_EXPAND, NULL), 0);
        snprintf(msg, sizeof msg, "%s: %s: no objects found", name, path);
        expect_failure(h_path(h, path), msg);
        /* A value that is neither PDF bytes nor a path. */
        snprintf(msg, sizeof msg,
                 "%s: the value is neither a PDF (it does not start with \"%%PDF-\") nor a "
                 "path (it is empty)",
                 name);
        expect_failure(h_one(h, "", 0), msg);
        snprintf(msg, sizeof msg,
                 "%s: the value is neither a PDF (it does not start with \"%%PDF-\") nor a "
                 "path (it is not text: it holds a NUL byte)",
                 name);
        expect_failure(h_one(h, "a\0b", 3), msg);
        /* PDF bytes that are only the magic. */
        snprintf(msg, sizeof msg, "%s: PDF bytes: no objects found", name);
        expect_failure(h_one(h, "%PDF-", 5), msg);
    }
}

static void test_vanished(void **state)
{
    struct udf_h *h = *state;
    struct pdf p = make_pdf(good_pages, 3);
    char path[4096], msg[8192];
    h_file(h, "gone.pdf", p.data, p.len, path);
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, NULL), 0);
    assert_int_equal(h_path(h, path)->nchildren, 3);
    assert_int_equal(remove(path), 0);
    snprintf(msg, sizeof msg, "pdf_render: %s: cannot open %s: No such file or directory", path,
             path);
    expect_failure(h_path(h, path), msg);
    free(p.data);
}

/* A stream hook (orch_udf_answers_stream) that counts the chunks offered and refuses them,
 * so that the collector keeps every child: offers > 0 means a page would have been
 * published while the PDF was being read. */
static int count_offers(void *ctx, const struct orch_udf_answers *a, size_t i, size_t n)
{
    (void)a, (void)i, (void)n;
    ++*(size_t *)ctx;
    return -1;
}

static void h_stream(struct udf_h *h, size_t *offers)
{
    const struct orch_udf_stream s = {
        .max_children = 1, .max_bytes = 1 << 20, .max_ms = 1000000, .flush = count_offers,
        .ctx = offers};
    orch_udf_answers_stream(&h->ans, &s);
}

/* Cut at every byte, a PDF is a RecordFailure or, when the cut spared every object
 * (only the xref or trailer is lost, which MuPDF rebuilds), the whole document: never a
 * document with pages silently blank or missing. The pages stream (the hook is offered
 * them as they are made), and a damaged PDF fails before its first page is offered. */
static void test_truncated_everywhere(void **state)
{
    struct udf_h *h = *state;
    struct pdf p = make_pdf(good_pages, 3);
    assert_int_equal(h_start(h, "pdf_text", ORCH_UDF_OP_EXPAND, NULL), 0);
    size_t offers;
    h_stream(h, &offers);
    size_t failed = 0, whole = 0, damaged = 0;
    for (size_t cut = 0; cut < p.len; cut++) {
        offers = 0;
        const struct orch_udf_answer *a = h_one(h, p.data, cut);
        if (a->outcome == ORCH_UDF_RECORD_FAILURE) {
            assert_true(strncmp(a->msg, "pdf_text: ", 10) == 0);
            if (offers != 0)
                fail_msg("cut at %zu: pages offered before the failure: %s", cut, a->msg);
            failed++;
            damaged += strstr(a->msg, "damaged PDF: MuPDF repaired it, then ") != NULL;
            continue;
        }
        expect_text(a, good_text, 3);
        assert_int_equal(offers, 1); /* page 2 began: page 1 was offered */
        whole++;
    }
    /* The objects end where the xref begins: every cut before the last object's data
     * failed. */
    const char *xref = strstr(p.data, "\nxref\n");
    assert_non_null(xref);
    assert_true(whole < p.len - (size_t)(xref - p.data) + 100);
    assert_true(whole > 0); /* a lost xref alone is repaired, not refused */
    assert_true(failed > p.len * 3 / 4);
    assert_true(damaged > 0);
    /* Half a file, as a path: the same rule. */
    char path[4096];
    h_file(h, "half.pdf", p.data, p.len / 2, path);
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, NULL), 0);
    const struct orch_udf_answer *a = h_path(h, path);
    assert_int_equal(a->outcome, ORCH_UDF_RECORD_FAILURE);
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "pdf_render: %s: ", path);
    assert_true(strncmp(a->msg, prefix, strlen(prefix)) == 0);
    free(p.data);
}

static void test_encrypted(void **state)
{
    struct udf_h *h = *state;
    struct pdf p = make_pdf(good_pages, 3);
    char *enc;
    size_t enc_len;
    assert_int_equal(orch_test_pdf_encrypt(p.data, p.len, "secret", "owner", &enc, &enc_len),
                     0);
    for (int t = 0; t < 2; t++) {
        const char *name = t == 0 ? "pdf_render" : "pdf_text";
        char msg[256];
        snprintf(msg, sizeof msg, "%s: PDF bytes: the PDF is encrypted: it needs a password",
                 name);
        assert_int_equal(h_start(h, name, ORCH_UDF_OP_EXPAND, NULL), 0);
        expect_failure(h_one(h, enc, enc_len), msg);
    }
    free(enc);
    /* Encrypted with an empty user password (an owner password restricting what a reader
     * may do): it opens, and is read. */
    assert_int_equal(orch_test_pdf_encrypt(p.data, p.len, "", "owner", &enc, &enc_len), 0);
    assert_non_null(memmem(enc, enc_len, "/Encrypt", 8));
    assert_int_equal(h_start(h, "pdf_text", ORCH_UDF_OP_EXPAND, NULL), 0);
    expect_text(h_one(h, enc, enc_len), good_text, 3);
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "dpi", "72", NULL), 0);
    assert_int_equal(h_one(h, enc, enc_len)->nchildren, 3);
    free(enc);
    free(p.data);
}

/* A page past max_pixels fails alone, naming the page, before anything is rendered; its
 * siblings are made. The limit is on the pixels at the dpi asked for. */
static void test_max_pixels(void **state)
{
    struct udf_h *h = *state;
    static const char *const small[] = {"Small page"};
    static const char *const big[] = {"Big page"};
    static const struct orch_test_pdf_page pages[] = {
        {612, 792, small, 1},
        {14400, 14400, big, 1},
    };
    struct pdf p = make_pdf(pages, 2);
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, NULL), 0);
    static const char *const big_fails[] = {
        NULL, "pdf_render: PDF bytes: page 2 of 2: the page is 30000x30000 pixels at 150 dpi, "
              "more than max_pixels=50000000"};
    expect_children(h_one(h, p.data, p.len), 2, big_fails);
    /* At 10 dpi it is 2000x2000 = 4e6 pixels: rendered. */
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "dpi", "10", NULL), 0);
    const struct orch_udf_answer *a = h_one(h, p.data, p.len);
    assert_int_equal(a->nchildren, 2);
    struct image im = decode(&a->children[1]);
    assert_int_equal(im.w, 2000);
    free(im.px);
    /* The limit is inclusive: 612x792 = 484704 pixels at 72 dpi. */
    struct pdf g = make_pdf(good_pages, 3);
    assert_int_equal(
        h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "dpi", "72", "max_pixels", "484704", NULL),
        0);
    assert_int_equal(h_one(h, g.data, g.len)->nchildren, 3);
    assert_int_equal(
        h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "dpi", "72", "max_pixels", "484703", NULL),
        0);
    static const char *const letter_fails[] = {
        "pdf_render: PDF bytes: page 1 of 3: the page is 612x792 pixels at 72 dpi, more than "
        "max_pixels=484703",
        "pdf_render: PDF bytes: page 2 of 3: the page is 612x792 pixels at 72 dpi, more than "
        "max_pixels=484703",
        NULL};
    expect_children(h_one(h, g.data, g.len), 3, letter_fails);
    /* pdf_text draws nothing: no limit. */
    assert_int_equal(h_start(h, "pdf_text", ORCH_UDF_OP_EXPAND, NULL), 0);
    static const char *const texts[] = {"Small page\n\n", "Big page\n\n"};
    expect_text(h_one(h, p.data, p.len), texts, 2);
    free(g.data);
    free(p.data);
}

/* Records of one batch are independent: a bad PDF between two good ones; an absent value
 * (an optional input that was Dropped) drops its record; a PDF of no pages is a success
 * with no children. */
static void test_batch(void **state)
{
    struct udf_h *h = *state;
    struct pdf p = make_pdf(good_pages, 3);
    struct pdf none = make_pdf(NULL, 0);
    assert_int_equal(h_start(h, "pdf_text", ORCH_UDF_OP_EXPAND, NULL), 0);
    const void *d[5] = {p.data, "%PDF-junk", p.data, NULL, none.data};
    ptrdiff_t l[5] = {(ptrdiff_t)p.len, 9, (ptrdiff_t)p.len, -1, (ptrdiff_t)none.len};
    h_run(h, 5, d, l);
    expect_text(&h->ans.rec[0], good_text, 3);
    assert_int_equal(h->ans.rec[1].outcome, ORCH_UDF_RECORD_FAILURE);
    expect_text(&h->ans.rec[2], good_text, 3);
    assert_int_equal(h->ans.rec[3].outcome, ORCH_UDF_DROP);
    assert_int_equal(h->ans.rec[4].outcome, ORCH_UDF_OK);
    assert_int_equal(h->ans.rec[4].nchildren, 0);
    free(none.data);
    free(p.data);
}

/* Many documents, good and damaged, through one worker's state: the context is reused
 * and every answer stays right. Under ASan, a leak of any of them fails the test. */
static void test_many_documents(void **state)
{
    struct udf_h *h = *state;
    struct pdf p = make_pdf(good_pages, 3);
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "dpi", "36", NULL), 0);
    for (int k = 0; k < 40; k++)
        assert_int_equal(h_one(h, p.data, k % 4 == 3 ? p.len / 2 : p.len)->outcome,
                         k % 4 == 3 ? ORCH_UDF_RECORD_FAILURE : ORCH_UDF_OK);
    free(p.data);
}

/* MuPDF's heap is capped (orch_udf_pdf_set_heap_max stands for the real cap, 912 MiB by
 * default): an allocation past it is MuPDF's own exception, a RecordFailure, and the same
 * state goes on with the next record. */
static void test_heap_cap(void **state)
{
    struct udf_h *h = *state;
    struct pdf p = make_pdf(good_pages, 3);
    orch_udf_pdf_set_heap_max(2000000);
    /* PGM: the pixmap and its copy, nothing else of a page's size. */
    int rc = h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "format", "gray", NULL);
    orch_udf_pdf_set_heap_max(0);
    assert_int_equal(rc, 0);
    /* A letter page at 150 dpi is a 2,103,750-byte pixmap: pages 1 and 2 fail alone, the
     * small page 3 is made after them on the same context. */
    static const char *const fails[] = {
        "pdf_render: PDF bytes: page 1 of 3: malloc of 2103750 bytes failed",
        "pdf_render: PDF bytes: page 2 of 3: malloc of 2103750 bytes failed", NULL};
    expect_children(h_one(h, p.data, p.len), 3, fails);
    /* The small page alone fits: a PDF of it renders on the same state. */
    struct pdf small = make_pdf(&good_pages[2], 1);
    const struct orch_udf_answer *a = h_one(h, small.data, small.len);
    if (a->outcome != ORCH_UDF_OK)
        fail_msg("%s", a->msg);
    assert_int_equal(a->nchildren, 1);
    free(small.data);
    free(p.data);
}

static void test_init_checks(void **state)
{
    struct udf_h *h = *state;
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_MAP, NULL), -EINVAL);
    assert_string_equal(h->err, "pdf_render cannot be used as map");
    assert_int_equal(h_start(h, "pdf_text", ORCH_UDF_OP_FILTER, NULL), -EINVAL);
    assert_string_equal(h->err, "pdf_text cannot be used as filter");
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "format", "jpeg", NULL),
                     -EINVAL);
    assert_string_equal(h->err, "pdf_render: format must be png or gray, not 'jpeg'");
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "dpi", "0", NULL), -EINVAL);
    assert_string_equal(h->err, "pdf_render: dpi must be in 1..1200 and max_pixels in "
                                "1..1000000000");
    assert_int_equal(h_start(h, "pdf_render", ORCH_UDF_OP_EXPAND, "dpi", "x", NULL), -EINVAL);
    assert_int_equal(h_start(h, "pdf_text", ORCH_UDF_OP_EXPAND, "dpi", "72", NULL), -EINVAL);
    assert_string_equal(h->err, "pdf_text has no argument 'dpi'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_text_layer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_render_sizes_and_formats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_render_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_pdf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vanished, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encrypted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_pixels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_documents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heap_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_init_checks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
