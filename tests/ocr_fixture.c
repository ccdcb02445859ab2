/* ocr_fixture.c — page images with known text for the tesseract_ocr tests (see
 * ocr_fixture.h). */
#include "ocr_fixture.h"

#include <leptonica/allheaders.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FONT_PT 12 /* leptonica's bitmap fonts are sized in points at 300 ppi */
#define DPI 300
#define MARGIN 60 /* pixels on every side: Tesseract wants some white around text */

static bool printable(const char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return false;
    return true;
}

/* The binary PGM of an 8-bit pix, in the header pdf_render writes. */
static int write_pgm(PIX *pix, char **out, size_t *len)
{
    int w = pixGetWidth(pix), h = pixGetHeight(pix), wpl = pixGetWpl(pix);
    char head[64];
    int hn = snprintf(head, sizeof head, "P5\n%d %d\n255\n", w, h);
    size_t n = (size_t)hn + (size_t)w * (size_t)h;
    char *buf = malloc(n);
    if (buf == NULL)
        return -ENOMEM;
    memcpy(buf, head, (size_t)hn);
    l_uint32 *data = pixGetData(pix);
    char *at = buf + hn;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            *at++ = (char)GET_DATA_BYTE(data + y * wpl, x);
    *out = buf;
    *len = n;
    return 0;
}

/* The PNG that leptonica writes, copied into a malloc'd buffer (leptonica's own is freed
 * with lept_free, which the caller should not have to know). */
static int write_png(PIX *pix, char **out, size_t *len)
{
    l_uint8 *png = NULL;
    size_t n = 0;
    if (pixWriteMemPng(&png, &n, pix, 0.0) != 0)
        return -EIO;
    char *buf = malloc(n);
    if (buf != NULL)
        memcpy(buf, png, n);
    lept_free(png);
    if (buf == NULL)
        return -ENOMEM;
    *out = buf;
    *len = n;
    return 0;
}

int orch_test_ocr_page(const char *const *lines, size_t nlines,
                       enum orch_test_ocr_format format, char **out, size_t *len)
{
    if (nlines == 0)
        return -EINVAL;
    for (size_t k = 0; k < nlines; k++)
        if (!printable(lines[k]))
            return -EINVAL;
    L_BMF *bmf = bmfCreate(NULL, FONT_PT);
    if (bmf == NULL)
        return -EIO;
    int rc = -EIO;
    int pitch = bmf->lineheight + bmf->vertlinesep, width = 0;
    for (size_t k = 0; k < nlines; k++) {
        l_int32 w;
        if (bmfGetStringWidth(bmf, lines[k], &w) != 0)
            goto fail_bmf;
        if (w > width)
            width = w;
    }
    PIX *pix = pixCreate(width + 2 * MARGIN, (int)nlines * pitch + 2 * MARGIN, 8);
    if (pix == NULL)
        goto fail_bmf;
    pixSetAll(pix); /* white */
    pixSetResolution(pix, DPI, DPI);
    for (size_t k = 0; k < nlines; k++) {
        /* y is the baseline: a line's glyphs rise above it, descenders go below. */
        int y = MARGIN + (int)k * pitch + bmf->lineheight * 3 / 4;
        if (pixSetTextline(pix, bmf, lines[k], 0 /* black */, MARGIN, y, NULL, NULL) != 0)
            goto fail_pix;
    }
    switch (format) {
    case ORCH_TEST_OCR_PNG:
        rc = write_png(pix, out, len);
        break;
    case ORCH_TEST_OCR_PGM:
        rc = write_pgm(pix, out, len);
        break;
    }
fail_pix:
    pixDestroy(&pix);
fail_bmf:
    bmfDestroy(&bmf);
    return rc;
}
