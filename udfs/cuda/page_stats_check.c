/* page_stats_check.c — page_stats' GPU path against its CPU path: agreement and speed.
 *
 *   page_stats_check [--synth N] [--reps R] [--cpu-only] [--module SO] [IMAGE...]
 *
 * Decodes every IMAGE (PGM, or what leptonica reads) and adds N synthetic page images
 * (1275 x 1650, a letter page at 150 dpi: white paper, noise, lines of dark "words"; 16 by
 * default when no IMAGE is given, else 0). Then, on every image and for thresholds 0, 128
 * and 256, compares the GPU's sums with the CPU's (they must be equal bit for bit:
 * page_stats_cuda.h) and the JSON page_stats makes of each, and reports the largest
 * absolute and relative difference of the numbers in that JSON (0 when they agree, as they
 * must). Then it times R passes (default 5) of each path over all images, the pixels
 * already decoded in memory (the GPU's time includes copying them to the device), and the
 * decoding itself (the same CPU code for both paths), and prints images per second.
 *
 * --cpu-only skips the GPU (to try the tool where there is none); --module loads the GPU
 * path from SO instead of this build's module. Exit status: 0 all agree,
 * 1 a difference, 2 cannot run (no GPU path: the reason is printed, or bad arguments).
 * Run by scripts/gpu-check; depends only on udfs/page_stats.c, so that it builds with a
 * plain cc where orch's own dependencies are missing.
 */
#define _POSIX_C_SOURCE 200809L
#include "page_stats.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct page {
    char *name;
    uint8_t *payload; /* the file's bytes (img may point into them) */
    struct orch_page_stats_image img;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    uint8_t *b = malloc(cap);
    while (b != NULL) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *nb = realloc(b, cap *= 2);
        if (nb == NULL)
            free(b);
        b = nb;
    }
    if (ferror(f)) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = n;
    return b;
}

/* A synthetic page, as a PGM payload: deterministic for a given k. */
static uint8_t *synth_page(unsigned k, size_t *len)
{
    const uint32_t w = 1275, h = 1650;
    char head[32];
    int hl = snprintf(head, sizeof head, "P5\n%u %u\n255\n", w, h);
    uint8_t *b = malloc((size_t)hl + (size_t)w * h);
    if (b == NULL)
        return NULL;
    memcpy(b, head, (size_t)hl);
    uint8_t *px = b + hl;
    uint32_t s = 0x9e3779b9u * (k + 1);
#define RND() (s = s * 1664525u + 1013904223u, s >> 8)
    for (size_t i = 0; i < (size_t)w * h; i++)
        px[i] = (uint8_t)(255 - RND() % 8);
    for (uint32_t line = 150 + k % 7; line + 30 < h - 150; line += 36) {
        uint32_t x = 150;
        while (x < w - 150) {
            uint32_t word = 20 + RND() % 90;
            for (uint32_t y = line; y < line + 24; y++)
                for (uint32_t xx = x; xx < x + word && xx < w - 150; xx++)
                    if (RND() % 4 != 0)
                        px[(size_t)y * w + xx] = (uint8_t)(RND() % 70);
            x += word + 12 + RND() % 20;
        }
    }
#undef RND
    *len = (size_t)hl + (size_t)w * h;
    return b;
}

/* The numbers of a page_stats JSON line, in order of appearance. */
static int numbers(const char *json, double *out, int max)
{
    int n = 0;
    for (const char *p = json; *p != '\0' && n < max;) {
        if ((*p >= '0' && *p <= '9') || *p == '-') {
            char *end;
            out[n++] = strtod(p, &end);
            p = end;
        } else {
            p++;
        }
    }
    return n;
}

static int usage(void)
{
    fprintf(stderr, "usage: page_stats_check [--synth N] [--reps R] [--cpu-only] [--module SO] "
                    "[IMAGE...]\n");
    return 2;
}

int main(int argc, char **argv)
{
    long synth = -1, reps = 5;
    bool cpu_only = false;
    int first = 1;
    for (; first < argc && strncmp(argv[first], "--", 2) == 0; first++) {
        if (strcmp(argv[first], "--synth") == 0 && first + 1 < argc)
            synth = strtol(argv[++first], NULL, 10);
        else if (strcmp(argv[first], "--reps") == 0 && first + 1 < argc)
            reps = strtol(argv[++first], NULL, 10);
        else if (strcmp(argv[first], "--cpu-only") == 0)
            cpu_only = true;
        else if (strcmp(argv[first], "--module") == 0 && first + 1 < argc)
            orch_page_stats_gpu_set_module(argv[++first]);
        else
            return usage();
    }
    if (synth < 0)
        synth = first < argc ? 0 : 16;
    if (reps < 1)
        return usage();
    size_t npages = (size_t)(argc - first) + (size_t)synth;
    if (npages == 0)
        return usage();
    struct page *pages = calloc(npages, sizeof *pages);
    if (pages == NULL)
        return 2;

    /* Read and decode (decoding timed: the same CPU work for both paths). */
    double decode_s = 0, mpix = 0;
    for (size_t i = 0; i < npages; i++) {
        struct page *p = &pages[i];
        size_t len = 0;
        char name[64];
        if (i < (size_t)(argc - first)) {
            p->payload = read_file(argv[first + (int)i], &len);
            p->name = strdup(argv[first + (int)i]);
        } else {
            snprintf(name, sizeof name, "synthetic page %zu", i - (size_t)(argc - first));
            p->payload = synth_page((unsigned)i, &len);
            p->name = strdup(name);
        }
        if (p->payload == NULL || p->name == NULL) {
            fprintf(stderr, "page_stats_check: %s: %s\n", p->name ? p->name : "?",
                    strerror(errno ? errno : ENOMEM));
            return 2;
        }
        char err[512];
        double t0 = now();
        if (orch_page_stats_decode(p->payload, len, ORCH_PAGE_STATS_PIXELS_MAX, &p->img, err,
                                   sizeof err) < 0) {
            fprintf(stderr, "page_stats_check: %s: %s\n", p->name, err);
            return 2;
        }
        decode_s += now() - t0;
        mpix += (double)p->img.w * p->img.h / 1e6;
    }
    printf("images: %zu (%zu files, %ld synthetic 1275x1650), %.1f Mpixels in all\n", npages,
           (size_t)(argc - first), synth, mpix);

    struct orch_page_stats_gpu *g = NULL;
    char err[512];
    if (!cpu_only) {
        if (orch_page_stats_gpu_open(&g, err, sizeof err) < 0) {
            fprintf(stderr, "page_stats_check: no GPU path: %s\n", err);
            return 2;
        }
        printf("device: %s (module %s)\n", orch_page_stats_gpu_device(g),
               orch_page_stats_gpu_module());
    }

    /* Agreement. */
    int rc = 0;
    if (g != NULL) {
        size_t same_sums = 0, same_json = 0, checks = 0;
        double max_abs = 0, max_rel = 0;
        for (size_t i = 0; i < npages; i++) {
            const struct orch_page_stats_image *im = &pages[i].img;
            for (uint32_t t = 0; t <= 256; t += 128) {
                struct orch_page_stats_acc a, b;
                orch_page_stats_cpu(im->px, im->w, im->h, t, &a);
                if (orch_page_stats_gpu_run(g, im->px, im->w, im->h, t, &b, err, sizeof err) <
                    0) {
                    fprintf(stderr, "page_stats_check: %s: GPU: %s\n", pages[i].name, err);
                    return 2;
                }
                char ja[ORCH_PAGE_STATS_JSON_MAX], jb[ORCH_PAGE_STATS_JSON_MAX];
                orch_page_stats_format(&a, im->w, im->h, t, 16, ja, sizeof ja);
                orch_page_stats_format(&b, im->w, im->h, t, 16, jb, sizeof jb);
                checks++;
                same_sums += memcmp(&a, &b, sizeof a) == 0;
                same_json += strcmp(ja, jb) == 0;
                double na[300], nb[300];
                int ka = numbers(ja, na, 300), kb = numbers(jb, nb, 300);
                if (ka != kb) {
                    max_abs = max_rel = INFINITY;
                } else {
                    for (int k = 0; k < ka; k++) {
                        double d = fabs(na[k] - nb[k]);
                        double r = d == 0 ? 0 : d / fmax(fabs(na[k]), fabs(nb[k]));
                        max_abs = fmax(max_abs, d);
                        max_rel = fmax(max_rel, r);
                    }
                }
                if (strcmp(ja, jb) != 0 && rc == 0) {
                    printf("DIFFERENT: %s, threshold %u\n  cpu %s\n  gpu %s\n", pages[i].name,
                           t, ja, jb);
                    rc = 1;
                }
                if (i == 0 && t == 128)
                    printf("first image, threshold 128: %s\n", ja);
            }
        }
        printf("agreement: %zu/%zu identical sums, %zu/%zu identical JSON; max abs error %g, "
               "max rel error %g (tolerance: identical)\n",
               same_sums, checks, same_json, checks, max_abs, max_rel);
        if (same_sums != checks || same_json != checks)
            rc = 1;
    }

    /* Speed, pixels in memory. */
    struct orch_page_stats_acc acc;
    double t0 = now();
    for (long r = 0; r < reps; r++)
        for (size_t i = 0; i < npages; i++)
            orch_page_stats_cpu(pages[i].img.px, pages[i].img.w, pages[i].img.h, 128, &acc);
    double cpu_s = now() - t0;
    double items = (double)reps * (double)npages;
    printf("speed, decoded pixels in memory, %ld passes:\n", reps);
    printf("  cpu (1 thread):      %9.1f images/s  %8.1f Mpixel/s\n", items / cpu_s,
           (double)reps * mpix / cpu_s);
    if (g != NULL) {
        t0 = now();
        for (long r = 0; r < reps; r++)
            for (size_t i = 0; i < npages; i++)
                if (orch_page_stats_gpu_run(g, pages[i].img.px, pages[i].img.w, pages[i].img.h,
                                            128, &acc, err, sizeof err) < 0) {
                    fprintf(stderr, "page_stats_check: GPU: %s\n", err);
                    return 2;
                }
        double gpu_s = now() - t0;
        printf("  gpu (with copy in):  %9.1f images/s  %8.1f Mpixel/s  (%.1fx the cpu)\n",
               items / gpu_s, (double)reps * mpix / gpu_s, cpu_s / gpu_s);
    }
    printf("  decoding (cpu, either path): %.1f images/s\n", (double)npages / decode_s);

    orch_page_stats_gpu_close(g);
    for (size_t i = 0; i < npages; i++) {
        orch_page_stats_image_free(&pages[i].img);
        free(pages[i].payload);
        free(pages[i].name);
    }
    free(pages);
    return rc;
}
