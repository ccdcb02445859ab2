/* pdf_fixture.h — PDFs for the tests of pdf_render and pdf_text, made at test time from
 * text the tests control (no binary files in the tree).
 *
 * orch_test_pdf_make() writes a small, valid PDF 1.4 by hand: one page object per page,
 * each with its own MediaBox and a content stream that shows the page's lines in
 * Helvetica (a standard Type 1 font: nothing is embedded; a reader substitutes its own
 * copy), 24 pt, one line under the other, starting 72 pt from the top-left corner. The
 * cross-reference table has the exact byte offsets, so a reader needs no repair.
 *
 * orch_test_pdf_encrypt() rewrites a PDF encrypted (AES-256) with a user and an owner
 * password, through MuPDF's own writer: a reader needs the user password to open it; an
 * empty user password opens it (the owner password then only guards permissions).
 *
 * Both return 0 and a malloc'd buffer in *out (free() it), *len bytes, or -ENOMEM /
 * -EINVAL (a line with a byte outside printable ASCII, or one of "()\\": the tests need
 * no escaping, and refusing keeps the text of the page exactly the text given). The
 * encryption returns -EIO when MuPDF refuses, after printing its message on stderr.
 */
#ifndef ORCH_TEST_PDF_FIXTURE_H
#define ORCH_TEST_PDF_FIXTURE_H

#include <stddef.h>

struct orch_test_pdf_page {
    double width, height;     /* the MediaBox, in points (1/72 inch) */
    const char *const *lines; /* nlines lines of printable ASCII */
    size_t nlines;
};

int orch_test_pdf_make(const struct orch_test_pdf_page *pages, size_t npages, char **out,
                       size_t *len);

int orch_test_pdf_encrypt(const char *pdf, size_t pdflen, const char *user_password,
                          const char *owner_password, char **out, size_t *len);

#endif
