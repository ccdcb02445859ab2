/* builtins_pdf.c — the MuPDF built-ins: pdf_render and pdf_text (their contract is the
 * table in builtins.c; docs/language.md, "PDF built-ins", is the user's manual).
 *
 * Both are expands from one PDF to its pages, in page order, one child per page:
 * pdf_render gives each page as an 8-bit grayscale image (PNG, or a binary PGM with
 * format=gray), pdf_text gives the page's own text layer as UTF-8. Their shared skeleton:
 *
 *   init   one fz_context per worker, kept for the worker's life (MuPDF's resource store,
 *          its glyph cache and its fonts are loaded once), with our own allocator that
 *          caps MuPDF's heap (see "Memory" below) and callbacks that keep MuPDF's warnings
 *          and errors off stderr: warnings are counted (see "Damage"), errors arrive through
 *          fz_caught_message().
 *   run    for each record: the subject is PDF bytes when it starts with "%PDF-", else a
 *          path to a PDF (a file that files() found); the PDF handler is asked for by name
 *          (pdf_open_document_with_stream), so an image or an EPUB is never "a PDF" here.
 *          Every page is loaded, turned into its payload and emitted as the next child
 *          as soon as it is made: the host streams the pages to the driver while the rest
 *          of the PDF is read (DESIGN §5), so whatever fails the whole record is decided
 *          before the first page is emitted (see "Failures"). Afterwards the document is dropped and MuPDF's store emptied: a worker's memory
 *          does not grow with the documents it has seen.
 *
 * Failures. A MuPDF exception (fz_try/fz_catch) while one page is loaded or made fails that
 * page alone: it is a failed child (orch_udf_fail_child) whose message is
 * fz_caught_message() prefixed with the built-in's name, the path (or "PDF bytes") and
 * "page K of N" (1-based); its siblings are made as usual. Any other exception (the file,
 * the document, its page count, a damaged PDF) is a RecordFailure of the whole record with
 * the same prefix, less the page. Besides MuPDF's own:
 *   - encrypted: a PDF that needs a password (pdf_needs_password: the empty user password
 *     does not open it) fails at once; one that opens with the empty password is read.
 *   - too large: a page whose pixmap would be more than max_pixels pixels at the dpi
 *     fails (alone) before anything is allocated for it.
 *   - damaged ("Damage"): MuPDF repairs a PDF whose cross-reference table is missing or
 *     broken by scanning the file for objects, as every viewer does. A truncated file
 *     repairs "successfully" into fewer objects: pages go blank or missing without an
 *     exception. So a PDF that MuPDF had to repair is accepted only when MuPDF warned
 *     about nothing from the start of the repair's scan to the last page (a complete file
 *     whose xref or trailer alone is bad) and found at least one page; otherwise it fails
 *     with MuPDF's first warning since the scan began ("object missing 'endobj' token",
 *     "cannot load object (8 0 R) into cache"). The warnings before the scan are about the
 *     broken xref that the repair is for. A PDF that needed no repair is read as MuPDF
 *     reads it, warnings and all. To judge a repaired PDF before its first page is
 *     emitted, every page is first run through a bounding-box device (probe_page), which
 *     loads every object the pages draw with; only then are the pages made. A warning
 *     that comes later still (from what only the payload's own pass loads) fails the
 *     record after its pages: the expansion is Failed and the pages already emitted stay
 *     (DESIGN §4). tests/test_pdf.c cuts a PDF at every byte: each cut is a failure
 *     before any page or, when every object survived, the whole document.
 *
 * Memory. MuPDF allocates through alloc_cb below, which refuses to let the bytes live in
 * the context go past a cap: 512 MiB, plus 8 bytes per pixel of max_pixels for
 * pdf_render (the page pixmap, its PNG, and the page-sized group pixmaps that
 * transparency needs). MuPDF then empties its store and retries, and past that throws
 * its "malloc of N bytes failed", which fails the page (or the record, outside a page) like
 * any other exception, and the next page starts afresh. A worker is bounded whatever the PDF
 * says about itself; a hang in MuPDF (a pathological content stream) is the call's `timeout`
 * option's to end. orch_udf_pdf_set_heap_max() replaces the cap, for tests.
 */
#include "udf_int.h"

#include <mupdf/fitz.h>
#include <mupdf/pdf.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PDF_MAGIC "%PDF-"
#define HEAP_BASE ((size_t)512 << 20)
#define RENDER_BYTES_PER_PIXEL 8
#define DEFAULT_DPI 150
#define MAX_DPI 1200
#define DEFAULT_MAX_PIXELS 50000000
#define MAX_MAX_PIXELS 1000000000 /* the signature's range (builtin_sigs.c) */

enum pdf_format { PDF_FORMAT_PNG, PDF_FORMAT_GRAY };

struct pdf_state {
    struct orch_udf__base base;
    fz_context *ctx;
    /* pdf_render's arguments. */
    int dpi;
    enum pdf_format format;
    uint64_t max_pixels;
    /* The heap MuPDF holds through alloc_cb, and its cap. */
    size_t heap_used, heap_cap;
    /* Warnings since warnings_reset() or since the repair notice (see warning_cb): how
     * many, and the first one's text. */
    unsigned nwarn;
    char first_warning[256];
    /* The failure message of the record in hand. */
    char msg[1024];
};

/* ---- MuPDF's allocator: a capped heap ------------------------------------------------ */

/* Every block carries its size in front, so that free and realloc can account for it;
 * the header is max_align_t-sized so that the block stays aligned as malloc's are. */
union heap_hdr {
    size_t size;
    max_align_t align;
};

static void *alloc_cb(void *user, size_t size)
{
    struct pdf_state *st = user;
    if (size > st->heap_cap - st->heap_used || size > SIZE_MAX - sizeof(union heap_hdr))
        return NULL;
    union heap_hdr *h = malloc(sizeof *h + size);
    if (h == NULL)
        return NULL;
    h->size = size;
    st->heap_used += size;
    return h + 1;
}

static void free_cb(void *user, void *p)
{
    struct pdf_state *st = user;
    if (p == NULL)
        return;
    union heap_hdr *h = (union heap_hdr *)p - 1;
    st->heap_used -= h->size;
    free(h);
}

static void *realloc_cb(void *user, void *p, size_t size)
{
    struct pdf_state *st = user;
    if (p == NULL)
        return alloc_cb(user, size);
    if (size == 0) {
        free_cb(user, p);
        return NULL;
    }
    union heap_hdr *h = (union heap_hdr *)p - 1;
    size_t old = h->size;
    if ((size > old && size - old > st->heap_cap - st->heap_used) ||
        size > SIZE_MAX - sizeof *h)
        return NULL;
    union heap_hdr *n = realloc(h, sizeof *n + size);
    if (n == NULL)
        return NULL; /* the old block is intact, as realloc promises */
    n->size = size;
    st->heap_used = st->heap_used - old + size;
    return n + 1;
}

/* ---- MuPDF's messages ---------------------------------------------------------------- */

/* MuPDF's notice that it starts rebuilding the xref by scanning the file: what came before
 * it is about the broken xref that the repair is for; what comes after it is damage. */
#define REPAIR_NOTICE "repairing PDF document"

static void warning_cb(void *user, const char *message)
{
    struct pdf_state *st = user;
    if (strcmp(message, REPAIR_NOTICE) == 0) {
        st->nwarn = 0;
        st->first_warning[0] = '\0';
        return;
    }
    if (st->nwarn++ == 0)
        snprintf(st->first_warning, sizeof st->first_warning, "%s", message);
}

/* Errors reach us through fz_caught_message(); MuPDF's default would print each one. */
static void error_cb(void *user, const char *message)
{
    (void)user, (void)message;
}

static void warnings_reset(struct pdf_state *st)
{
    fz_flush_warnings(st->ctx); /* a repeated warning is held back until flushed */
    st->nwarn = 0;
    st->first_warning[0] = '\0';
}

/* ---- init, fini ---------------------------------------------------------------------- */

static void pdf_fini(void *state)
{
    struct pdf_state *st = state;
    if (st == NULL)
        return;
    fz_drop_context(st->ctx);
    free(st);
}

static size_t heap_max; /* orch_udf_pdf_set_heap_max's; 0: none */

void orch_udf_pdf_set_heap_max(size_t bytes)
{
    heap_max = bytes;
}

/* The common init of both built-ins: the base, then the context. */
static int pdf_setup(const struct orch_udf_config *cfg, const char *name, size_t heap_extra,
                     struct pdf_state *st)
{
    /* For tests only: a small cap shows what a PDF too big for the real one does. */
    st->heap_cap = heap_max > 0 ? heap_max : HEAP_BASE + heap_extra;
    const fz_alloc_context alloc = {
        .user = st, .malloc = alloc_cb, .realloc = realloc_cb, .free = free_cb};
    st->ctx = fz_new_context(&alloc, NULL, FZ_STORE_DEFAULT);
    if (st->ctx == NULL)
        return orch_udf_config_error(cfg, -ENOMEM, "%s: cannot make a MuPDF context", name);
    fz_set_warning_callback(st->ctx, warning_cb, st);
    fz_set_error_callback(st->ctx, error_cb, st);
    return 0;
}

static int pdf_render_init(const struct orch_udf_config *cfg, void **state)
{
    static const char *const args[] = {"dpi", "format", "max_pixels", NULL};
    void *p;
    int rc = orch_udf__base_init(cfg, "pdf_render", ORCH_UDF__OPS_EXPAND, args,
                                 sizeof(struct pdf_state), &p);
    if (rc < 0)
        return rc;
    struct pdf_state *st = p;
    uint64_t dpi, max_pixels;
    if ((rc = orch_udf__arg_u64(cfg, "pdf_render", "dpi", DEFAULT_DPI, &dpi)) < 0 ||
        (rc = orch_udf__arg_u64(cfg, "pdf_render", "max_pixels", DEFAULT_MAX_PIXELS,
                                &max_pixels)) < 0)
        goto fail;
    if (dpi < 1 || dpi > MAX_DPI || max_pixels < 1 || max_pixels > MAX_MAX_PIXELS) {
        rc = orch_udf_config_error(cfg, -EINVAL,
                                   "pdf_render: dpi must be in 1..%d and max_pixels in 1..%d",
                                   MAX_DPI, MAX_MAX_PIXELS);
        goto fail;
    }
    const char *format = orch_udf_arg(cfg, "format");
    if (format == NULL || strcmp(format, "png") == 0)
        st->format = PDF_FORMAT_PNG;
    else if (strcmp(format, "gray") == 0)
        st->format = PDF_FORMAT_GRAY;
    else {
        rc = orch_udf_config_error(cfg, -EINVAL,
                                   "pdf_render: format must be png or gray, not '%s'", format);
        goto fail;
    }
    st->dpi = (int)dpi;
    st->max_pixels = max_pixels;
    rc = pdf_setup(cfg, "pdf_render", (size_t)max_pixels * RENDER_BYTES_PER_PIXEL, st);
    if (rc < 0)
        goto fail;
    *state = st;
    return 0;
fail:
    free(st);
    return rc;
}

static int pdf_text_init(const struct orch_udf_config *cfg, void **state)
{
    static const char *const args[] = {NULL};
    void *p;
    int rc = orch_udf__base_init(cfg, "pdf_text", ORCH_UDF__OPS_EXPAND, args,
                                 sizeof(struct pdf_state), &p);
    if (rc < 0)
        return rc;
    rc = pdf_setup(cfg, "pdf_text", 0, p);
    if (rc < 0) {
        free(p);
        return rc;
    }
    *state = p;
    return 0;
}

/* ---- pages --------------------------------------------------------------------------- */

/* Makes one page's payload into a new buffer; throws MuPDF's exceptions. */
typedef fz_buffer *page_fn(struct pdf_state *st, fz_page *page);

/* The binary PGM of a one-component pixmap: "P5\n<w> <h>\n255\n", then the rows. */
static fz_buffer *pgm_of(fz_context *ctx, fz_pixmap *pix)
{
    int w = fz_pixmap_width(ctx, pix), h = fz_pixmap_height(ctx, pix);
    ptrdiff_t stride = fz_pixmap_stride(ctx, pix);
    const unsigned char *row = fz_pixmap_samples(ctx, pix);
    assert(fz_pixmap_components(ctx, pix) == 1);
    fz_buffer *buf = fz_new_buffer(ctx, (size_t)w * (size_t)h + 32);
    fz_try(ctx)
    {
        fz_append_printf(ctx, buf, "P5\n%d %d\n255\n", w, h);
        for (int y = 0; y < h; y++, row += stride)
            fz_append_data(ctx, buf, row, (size_t)w);
    }
    fz_catch(ctx)
    {
        fz_drop_buffer(ctx, buf);
        fz_rethrow(ctx);
    }
    return buf;
}

static fz_buffer *render_page(struct pdf_state *st, fz_page *page)
{
    fz_context *ctx = st->ctx;
    fz_matrix ctm = fz_scale(st->dpi / 72.0f, st->dpi / 72.0f);
    /* The same box fz_new_pixmap_from_page() allocates: checked before it does. */
    fz_irect box = fz_round_rect(fz_transform_rect(fz_bound_page(ctx, page), ctm));
    int64_t w = (int64_t)box.x1 - box.x0, h = (int64_t)box.y1 - box.y0;
    if (w <= 0 || h <= 0)
        fz_throw(ctx, FZ_ERROR_GENERIC, "the page has no area (%" PRId64 "x%" PRId64 " pixels)",
                 w, h);
    if ((uint64_t)w * (uint64_t)h > st->max_pixels)
        fz_throw(ctx, FZ_ERROR_GENERIC,
                 "the page is %" PRId64 "x%" PRId64 " pixels at %d dpi, more than "
                 "max_pixels=%" PRIu64,
                 w, h, st->dpi, st->max_pixels);
    fz_pixmap *pix = fz_new_pixmap_from_page(ctx, page, ctm, fz_device_gray(ctx), 0);
    fz_buffer *buf = NULL;
    fz_try(ctx)
    {
        fz_set_pixmap_resolution(ctx, pix, st->dpi, st->dpi); /* PNG's pHYs */
        switch (st->format) {
        case PDF_FORMAT_PNG:
            buf = fz_new_buffer_from_pixmap_as_png(ctx, pix, fz_default_color_params);
            break;
        case PDF_FORMAT_GRAY:
            buf = pgm_of(ctx, pix);
            break;
        }
    }
    fz_always(ctx)
    {
        fz_drop_pixmap(ctx, pix);
    }
    fz_catch(ctx)
    {
        fz_rethrow(ctx);
    }
    return buf;
}

/* MuPDF's plain-text rendering of the page's structured text (default options: ligatures
 * and odd spaces normalised): each line ends with "\n", each block with one more "\n". */
static fz_buffer *text_page(struct pdf_state *st, fz_page *page)
{
    fz_context *ctx = st->ctx;
    fz_stext_options opts = {0};
    fz_stext_page *text = fz_new_stext_page_from_page(ctx, page, &opts);
    fz_buffer *buf = NULL;
    fz_try(ctx)
    {
        buf = fz_new_buffer_from_stext_page(ctx, text);
    }
    fz_always(ctx)
    {
        fz_drop_stext_page(ctx, text);
    }
    fz_catch(ctx)
    {
        fz_rethrow(ctx);
    }
    return buf;
}

/* Loads page k of npages, makes its payload with fn and emits it as record i's next child.
 * A page that MuPDF cannot load or draw (past max_pixels, out of the heap cap, a broken
 * content stream) is a failed child with MuPDF's message: its siblings go on (`src` names
 * the PDF in that message). Returns the host's answer (0 or -ENOMEM); never throws. */
static int emit_page(struct pdf_state *st, fz_document *doc, int k, int npages, page_fn *fn,
                     const char *src, struct orch_udf_batch *batch, size_t i)
{
    fz_context *ctx = st->ctx;
    fz_page *page = NULL;
    fz_buffer *buf = NULL;
    int rc = 0;
    bool failed = false;
    fz_var(page);
    fz_var(buf);
    fz_var(rc);
    fz_var(failed);
    fz_try(ctx)
    {
        page = fz_load_page(ctx, doc, k);
        buf = fn(st, page);
        unsigned char *data;
        size_t len = fz_buffer_storage(ctx, buf, &data);
        rc = orch_udf_child(batch, i);
        if (rc == 0)
            rc = orch_udf__emit_all(&st->base, batch, i, data, len);
    }
    fz_always(ctx)
    {
        fz_drop_buffer(ctx, buf);
        fz_drop_page(ctx, page);
    }
    fz_catch(ctx)
    {
        snprintf(st->msg, sizeof st->msg, "%s: %s: page %d of %d: %s", st->base.name, src,
                 k + 1, npages, fz_caught_message(ctx));
        failed = true;
    }
    if (failed)
        rc = orch_udf_fail_child(batch, i, st->msg);
    return rc;
}

/* ---- damage -------------------------------------------------------------------------- */

/* Throws the damaged-PDF failure when MuPDF warned since the repair's scan began, or the
 * repaired document has no page. */
static void damage_check(struct pdf_state *st, int npages)
{
    fz_flush_warnings(st->ctx);
    if (st->nwarn > 0 || npages == 0)
        fz_throw(st->ctx, FZ_ERROR_GENERIC, "damaged PDF: MuPDF repaired it, then %s%s",
                 st->nwarn > 0 ? "warned: " : "found no page",
                 st->nwarn > 0 ? st->first_warning : "");
}

/* Runs page k of a repaired document through a bounding-box device, so that MuPDF loads
 * every object the page uses (its content, resources and fonts) and warns about what it
 * cannot. A page that throws is left to its own turn: emit_page meets the same exception
 * and fails the page with it. Never throws. */
static void probe_page(fz_context *ctx, fz_document *doc, int k)
{
    fz_page *page = NULL;
    fz_device *dev = NULL;
    fz_rect box;
    fz_var(page);
    fz_var(dev);
    fz_try(ctx)
    {
        page = fz_load_page(ctx, doc, k);
        dev = fz_new_bbox_device(ctx, &box);
    }
    fz_catch(ctx)
    {
        fz_drop_page(ctx, page);
        return;
    }
    fz_try(ctx)
    {
        fz_run_page(ctx, page, dev, fz_identity, NULL);
    }
    fz_catch(ctx)
    {
        (void)fz_caught(ctx);
    }
    /* Closed even after a throw: MuPDF warns when it drops an unclosed device, and a
     * warning here would count as damage. */
    fz_try(ctx)
    {
        fz_close_device(ctx, dev);
    }
    fz_catch(ctx)
    {
        (void)fz_caught(ctx);
    }
    fz_drop_device(ctx, dev);
    fz_drop_page(ctx, page);
}

/* ---- records ------------------------------------------------------------------------- */

/* Where a record's PDF comes from: bytes in the value, or a path (NUL-terminated copy). */
struct pdf_source {
    const unsigned char *bytes;
    size_t len;
    char *path;
};

/* The bytes-or-path rule. Returns 0, -ENOMEM, or 1 with a failure message in st->msg. */
static int source_of(struct pdf_state *st, const struct orch_udf__subject *s,
                     struct pdf_source *src)
{
    memset(src, 0, sizeof *src);
    if (s->len >= strlen(PDF_MAGIC) && memcmp(s->data, PDF_MAGIC, strlen(PDF_MAGIC)) == 0) {
        src->bytes = (const unsigned char *)s->data;
        src->len = s->len;
        return 0;
    }
    if (s->len == 0 || memchr(s->data, '\0', s->len) != NULL) {
        snprintf(st->msg, sizeof st->msg,
                 "%s: the value is neither a PDF (it does not start with \"%%PDF-\") "
                 "nor a path (it is %s)",
                 st->base.name, s->len == 0 ? "empty" : "not text: it holds a NUL byte");
        return 1;
    }
    src->path = strndup(s->data, s->len);
    return src->path == NULL ? -ENOMEM : 0;
}

/* Opens, checks and walks one PDF, emitting a child per page; *pages is how many. Returns
 * the host's answer (0 or -ENOMEM), or 1 with a failure message in st->msg. */
static int walk_pdf(struct pdf_state *st, const struct pdf_source *src, page_fn *fn,
                    struct orch_udf_batch *batch, size_t i, int *pages)
{
    fz_context *ctx = st->ctx;
    fz_stream *stm = NULL;
    pdf_document *doc = NULL;
    int npages = 0, rc = 0;
    fz_var(stm);
    fz_var(doc);
    fz_var(npages);
    fz_var(rc);
    warnings_reset(st);
    fz_try(ctx)
    {
        stm = src->path != NULL ? fz_open_file(ctx, src->path)
                                : fz_open_memory(ctx, src->bytes, src->len);
        doc = pdf_open_document_with_stream(ctx, stm);
        if (pdf_needs_password(ctx, doc))
            fz_throw(ctx, FZ_ERROR_GENERIC, "the PDF is encrypted: it needs a password");
        npages = pdf_count_pages(ctx, doc);
        if (pdf_was_repaired(ctx, doc)) {
            for (int k = 0; k < npages; k++)
                probe_page(ctx, &doc->super, k);
            damage_check(st, npages);
        }
        for (int k = 0; k < npages && rc == 0; k++)
            rc = emit_page(st, &doc->super, k, npages, fn,
                           src->path != NULL ? src->path : "PDF bytes", batch, i);
        if (rc == 0 && pdf_was_repaired(ctx, doc))
            damage_check(st, npages);
    }
    fz_always(ctx)
    {
        pdf_drop_document(ctx, doc);
        fz_drop_stream(ctx, stm);
    }
    fz_catch(ctx)
    {
        snprintf(st->msg, sizeof st->msg, "%s: %s: %s", st->base.name,
                 src->path != NULL ? src->path : "PDF bytes", fz_caught_message(ctx));
        rc = 1;
    }
    fz_empty_store(ctx); /* nothing of this document is of use to the next one */
    *pages = npages;
    return rc;
}

static int pdf_record(struct pdf_state *st, page_fn *fn, struct orch_udf_batch *batch, size_t i)
{
    struct orch_udf__subject s;
    orch_udf__subject(&st->base, &batch->rec[i], &s); /* no allocation: not a reduce */
    if (!s.present)
        return orch_udf_drop(batch, i);
    struct pdf_source src;
    int pages = 0;
    int rc = source_of(st, &s, &src);
    if (rc == 0)
        rc = walk_pdf(st, &src, fn, batch, i, &pages);
    free(src.path);
    if (rc == 1)
        return orch_udf_fail_record(batch, i, st->msg);
    if (rc == 0 && pages == 0)
        return orch_udf_no_children(batch, i); /* a PDF of no pages, read cleanly */
    return rc;
}

static int pdf_run(struct pdf_state *st, page_fn *fn, struct orch_udf_batch *batch)
{
    for (size_t i = 0; i < batch->n; i++) {
        st->msg[0] = '\0';
        int rc = pdf_record(st, fn, batch, i);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "%s: %s", st->base.name, strerror(-rc));
    }
    return 0;
}

static int pdf_render_run(void *state, struct orch_udf_batch *batch)
{
    return pdf_run(state, render_page, batch);
}

static int pdf_text_run(void *state, struct orch_udf_batch *batch)
{
    return pdf_run(state, text_page, batch);
}

const struct orch_udf orch_udf__pdf_render = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "pdf_render",
    .init = pdf_render_init,
    .run = pdf_render_run,
    .fini = pdf_fini,
};

const struct orch_udf orch_udf__pdf_text = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "pdf_text",
    .init = pdf_text_init,
    .run = pdf_text_run,
    .fini = pdf_fini,
};
