/* ocr_fixture.h — page images for the tests of tesseract_ocr, made at test time from text
 * the tests control (no binary files in the tree), with nothing of Tesseract.
 *
 * orch_test_ocr_page() draws lines of text, black on white, into an 8-bit grayscale image
 * with leptonica's own bitmap font (a serif face compiled into the library: bmfCreate with
 * no directory), 12 pt at 300 dpi, one line under the other, left-aligned, with a margin.
 * The image is as wide as the longest line and as tall as the lines, plus the margins. It
 * is written in one of the two payload formats of pdf_render (docs/language.md,
 * "pdf_render"):
 *
 *   ORCH_TEST_OCR_PNG   an 8-bit grayscale PNG that records 300 dpi (pHYs);
 *   ORCH_TEST_OCR_PGM   a binary PGM, "P5\n<w> <h>\n255\n" then w*h bytes, row by row
 *                       (the exact header pdf_render writes; it records no resolution).
 *
 * Returns 0 and a malloc'd buffer in *out (free() it), *len bytes; -EINVAL when a line
 * holds a byte outside printable ASCII (the font has no glyph for it) or there are no
 * lines; -ENOMEM; -EIO when leptonica fails (after printing its message on stderr).
 */
#ifndef ORCH_TEST_OCR_FIXTURE_H
#define ORCH_TEST_OCR_FIXTURE_H

#include <stddef.h>

enum orch_test_ocr_format {
    ORCH_TEST_OCR_PNG,
    ORCH_TEST_OCR_PGM,
};

int orch_test_ocr_page(const char *const *lines, size_t nlines,
                       enum orch_test_ocr_format format, char **out, size_t *len);

#endif
