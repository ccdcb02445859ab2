/* mkpdf.c — writes the PDFs of tests/e2e/pdf.sh into a directory, from text held here:
 *
 *   good.pdf       3 pages, letter, letter and 300x400 pt, the words of good_pages[]
 *   truncated.pdf  good.pdf cut where its last object (page 3's content) begins: MuPDF
 *                  repairs the xref, finds page 3's content missing and warns
 *   notpdf.pdf     a line of text
 *   encrypted.pdf  good.pdf with the user password "secret" (AES-256)
 *   huge.pdf       2 pages: letter, then 200 x 200 inches (30000 x 30000 pixels at 150 dpi)
 *
 * usage: mkpdf DIR. Exits 0, or 1 after saying why on stderr.
 */
#include "pdf_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const page1[] = {"Alpha bravo charlie", "delta echo"};
static const char *const page2[] = {"Foxtrot golf"};
static const char *const page3[] = {"Hotel india juliet"};
static const struct orch_test_pdf_page good_pages[] = {
    {612, 792, page1, 2},
    {612, 792, page2, 1},
    {300, 400, page3, 1},
};
static const char *const small[] = {"Small page"};
static const char *const big[] = {"Big page"};
static const struct orch_test_pdf_page huge_pages[] = {
    {612, 792, small, 1},
    {14400, 14400, big, 1},
};

static int put(const char *dir, const char *name, const char *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkpdf DIR\n");
        return 1;
    }
    const char *dir = argv[1];
    char *good = NULL, *enc = NULL, *huge = NULL;
    size_t good_len, enc_len, huge_len;
    static const char notpdf[] = "this is a line of text, not a PDF\n";
    int ok = orch_test_pdf_make(good_pages, 3, &good, &good_len) == 0 &&
             strstr(good, "\n9 0 obj\n") != NULL &&
             orch_test_pdf_make(huge_pages, 2, &huge, &huge_len) == 0 &&
             orch_test_pdf_encrypt(good, good_len, "secret", "owner", &enc, &enc_len) == 0 &&
             put(dir, "good.pdf", good, good_len) == 0 &&
             put(dir, "truncated.pdf", good,
                 (size_t)(strstr(good, "\n9 0 obj\n") - good) + 1) == 0 &&
             put(dir, "notpdf.pdf", notpdf, strlen(notpdf)) == 0 &&
             put(dir, "encrypted.pdf", enc, enc_len) == 0 &&
             put(dir, "huge.pdf", huge, huge_len) == 0;
    free(good);
    free(enc);
    free(huge);
    if (!ok) {
        fprintf(stderr, "mkpdf: cannot make the PDFs in %s\n", dir);
        return 1;
    }
    return 0;
}
