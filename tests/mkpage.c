/* mkpage.c — writes a page image with known text for tests/e2e/ocr.sh (ocr_fixture.h):
 *
 *   mkpage png|pgm OUT LINE...     one line of text per argument, 12 pt at 300 dpi
 *
 * Exits 0, or 1 after saying why on stderr.
 */
#include "ocr_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[1], "png") != 0 && strcmp(argv[1], "pgm") != 0)) {
        fprintf(stderr, "usage: mkpage png|pgm OUT LINE...\n");
        return 1;
    }
    enum orch_test_ocr_format format =
        strcmp(argv[1], "png") == 0 ? ORCH_TEST_OCR_PNG : ORCH_TEST_OCR_PGM;
    char *img;
    size_t len;
    int rc =
        orch_test_ocr_page((const char *const *)argv + 3, (size_t)argc - 3, format, &img, &len);
    if (rc < 0) {
        fprintf(stderr, "mkpage: cannot draw the page: %s\n", strerror(-rc));
        return 1;
    }
    FILE *f = fopen(argv[2], "wb");
    int ok = f != NULL && fwrite(img, 1, len, f) == len;
    if (f != NULL && fclose(f) != 0)
        ok = 0;
    free(img);
    if (!ok) {
        perror(argv[2]);
        return 1;
    }
    return 0;
}
