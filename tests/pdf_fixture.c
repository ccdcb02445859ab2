/* pdf_fixture.c — PDFs made at test time (see pdf_fixture.h). */
#include "pdf_fixture.h"

#include <mupdf/fitz.h>
#include <mupdf/pdf.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing text buffer; `failed` sticks once an allocation failed. */
struct sbuf {
    char *p;
    size_t len, cap;
    int failed;
};

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sb_printf(struct sbuf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p == NULL ? NULL : b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static int line_ok(const char *s)
{
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e || *s == '(' || *s == ')' || *s == '\\')
            return 0;
    return 1;
}

/* The content stream of one page into c: every line shown with Tj, 30 pt apart. */
static void page_content(struct sbuf *c, const struct orch_test_pdf_page *pg)
{
    sb_printf(c, "BT\n/F1 24 Tf\n72 %.2f Td\n", pg->height - 72);
    for (size_t l = 0; l < pg->nlines; l++)
        sb_printf(c, "%s(%s) Tj\n", l == 0 ? "" : "0 -30 Td\n", pg->lines[l]);
    sb_printf(c, "ET\n");
}

/* Objects: 1 catalog, 2 page tree, 3 font, then for page k: 4+2k the page, 5+2k its
 * content stream. */
int orch_test_pdf_make(const struct orch_test_pdf_page *pages, size_t npages, char **out,
                       size_t *len)
{
    for (size_t k = 0; k < npages; k++)
        for (size_t l = 0; l < pages[k].nlines; l++)
            if (!line_ok(pages[k].lines[l]))
                return -EINVAL;
    size_t nobj = 3 + 2 * npages;
    size_t *off = calloc(nobj + 1, sizeof *off);
    if (off == NULL)
        return -ENOMEM;
    struct sbuf b = {0}, c = {0};
    sb_printf(&b, "%%PDF-1.4\n");
    off[1] = b.len;
    sb_printf(&b, "1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n");
    off[2] = b.len;
    sb_printf(&b, "2 0 obj\n<< /Type /Pages /Count %zu /Kids [", npages);
    for (size_t k = 0; k < npages; k++)
        sb_printf(&b, " %zu 0 R", 4 + 2 * k);
    sb_printf(&b, " ] >>\nendobj\n");
    off[3] = b.len;
    sb_printf(&b, "3 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica "
                  "/Encoding /WinAnsiEncoding >>\nendobj\n");
    for (size_t k = 0; k < npages; k++) {
        off[4 + 2 * k] = b.len;
        sb_printf(&b,
                  "%zu 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %.2f %.2f] "
                  "/Resources << /Font << /F1 3 0 R >> >> /Contents %zu 0 R >>\nendobj\n",
                  4 + 2 * k, pages[k].width, pages[k].height, 5 + 2 * k);
        c.len = 0;
        page_content(&c, &pages[k]);
        off[5 + 2 * k] = b.len;
        sb_printf(&b, "%zu 0 obj\n<< /Length %zu >>\nstream\n%.*s\nendstream\nendobj\n",
                  5 + 2 * k, c.len, (int)c.len, c.failed ? "" : c.p);
        if (c.failed)
            b.failed = 1;
    }
    size_t xref = b.len;
    /* Each entry is exactly 20 bytes: "nnnnnnnnnn ggggg n \n" (PDF 1.7, 7.5.4). */
    sb_printf(&b, "xref\n0 %zu\n0000000000 65535 f \n", nobj + 1);
    for (size_t i = 1; i <= nobj; i++)
        sb_printf(&b, "%010zu 00000 n \n", off[i]);
    sb_printf(&b, "trailer\n<< /Size %zu /Root 1 0 R >>\nstartxref\n%zu\n%%%%EOF\n", nobj + 1,
              xref);
    free(off);
    free(c.p);
    if (b.failed) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

int orch_test_pdf_encrypt(const char *pdf, size_t pdflen, const char *user_password,
                          const char *owner_password, char **out, size_t *len)
{
    if (strlen(user_password) >= sizeof pdf_default_write_options.upwd_utf8 ||
        strlen(owner_password) >= sizeof pdf_default_write_options.opwd_utf8)
        return -EINVAL;
    fz_context *ctx = fz_new_context(NULL, NULL, FZ_STORE_DEFAULT);
    if (ctx == NULL)
        return -ENOMEM;
    fz_stream *in = NULL;
    pdf_document *doc = NULL;
    fz_buffer *buf = NULL;
    fz_output *o = NULL;
    int rc = 0;
    fz_var(in);
    fz_var(doc);
    fz_var(buf);
    fz_var(o);
    fz_try(ctx)
    {
        in = fz_open_memory(ctx, (const unsigned char *)pdf, pdflen);
        doc = pdf_open_document_with_stream(ctx, in);
        pdf_write_options opts = pdf_default_write_options;
        opts.do_encrypt = PDF_ENCRYPT_AES_256;
        opts.permissions = 0; /* none: what an owner password is for */
        strcpy(opts.upwd_utf8, user_password);
        strcpy(opts.opwd_utf8, owner_password);
        buf = fz_new_buffer(ctx, pdflen + 4096);
        o = fz_new_output_with_buffer(ctx, buf);
        pdf_write_document(ctx, doc, o, &opts);
        fz_close_output(ctx, o);
    }
    fz_always(ctx)
    {
        fz_drop_output(ctx, o);
        pdf_drop_document(ctx, doc);
        fz_drop_stream(ctx, in);
    }
    fz_catch(ctx)
    {
        fprintf(stderr, "orch_test_pdf_encrypt: %s\n", fz_caught_message(ctx));
        rc = -EIO;
    }
    if (rc == 0) {
        unsigned char *data;
        size_t n = fz_buffer_storage(ctx, buf, &data);
        *out = malloc(n > 0 ? n : 1);
        if (*out == NULL)
            rc = -ENOMEM;
        else {
            memcpy(*out, data, n);
            *len = n;
        }
    }
    fz_drop_buffer(ctx, buf);
    fz_drop_context(ctx);
    return rc;
}
