/* builtins_ocr.c — tesseract_ocr: the UTF-8 text of a page image, by Tesseract's C API.
 *
 *   tesseract_ocr(lang="eng", psm=3)      map; one image in, its text out.
 *
 * init creates one TessBaseAPI and loads the language model(s) `lang` ("eng", "eng+deu":
 * Tesseract's syntax) from Tesseract's data directory: $TESSDATA_PREFIX when set, else the
 * directory libtesseract was built with (Debian: /usr/share/tesseract-ocr/5/tessdata/).
 * That load is what a persistent worker pays once instead of once per page (~0.2 s for
 * eng). A model that is not there fails init with a message that names the file looked
 * for; the pool then reports that the call's workers cannot start. psm is Tesseract's page
 * segmentation mode, 0..13 (3: fully automatic, no orientation detection; 0 detects
 * orientation only and gives no text).
 *
 * run, for each record: the subject's bytes are an image that leptonica reads from memory
 * (pixReadMem): PNG and binary PGM are the formats orch's pdf_render writes; JPEG, TIFF,
 * BMP and the other PNM kinds are read too. The image's resolution is taken from the file
 * (a PNG's pHYs); when it has none (PGM never has), Tesseract estimates it from the size
 * of the text. The answer is the text Tesseract finds, possibly empty. An image that
 * cannot be read — empty, not an image, truncated, corrupt — or one larger than
 * MAX_SIDE x MAX_SIDE or MAX_PIXELS is a RecordFailure carrying leptonica's message; it
 * fails that record alone. The page's recognition results are freed after each record, so
 * a worker's memory is the model plus one page.
 *
 * Threading. Debian's libtesseract is built with OpenMP (it links libgomp): some of its
 * LSTM loops open parallel regions with a fixed num_threads(4) clause, which
 * omp_set_num_threads() does not override. With `workers=N` on N cores that is 4N spinning
 * threads on N cores; measured with workers=2 on 2 cores, the same pages took ~5x the CPU
 * time and 2.5-5x the wall time of one thread a worker, for the same text
 * (docs/language.md, "OCR built-in", "Threads"). libgomp reads OMP_THREAD_LIMIT once, when
 * it is loaded — with the orch binary, before any init runs — so setting the variable here
 * would be too late. Instead, before every recognition, this built-in calls
 * omp_set_max_active_levels(0), which makes every parallel region run on its calling
 * thread alone: one worker, one core. It finds that function with dlsym, so that a
 * libtesseract built without OpenMP needs nothing. A user who wants OpenMP inside
 * Tesseract after all (one worker on a many-core machine) sets OMP_THREAD_LIMIT in orch's
 * environment: then this built-in leaves OpenMP as that variable configures it.
 *
 * Messages. Leptonica writes its errors to stderr through a handler; while a record's
 * image is read, this file installs one that keeps them for the RecordFailure (libpng's
 * own "libpng error: ..." lines still reach the worker's stderr). Tesseract's messages go
 * to the worker's stderr while the model loads; after that its per-page diagnostics are
 * sent to /dev/null (Tesseract's variable debug_file, process-wide).
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "udf_int.h"

#include <leptonica/allheaders.h>
#include <tesseract/capi.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tesseract keeps page coordinates in 16-bit integers: a larger side cannot be
 * recognized. */
#define MAX_SIDE 32767
/* 256 Mpixels (a US Letter page at 1600 dpi is 240). A bigger image would need gigabytes
 * in leptonica and Tesseract before any text is found; it is refused from its header,
 * before it is decoded. */
#define MAX_PIXELS (1ull << 28)

#define PSM_MAX 13

struct ocr_state {
    struct orch_udf__base base;
    TessBaseAPI *api;
    /* omp_set_max_active_levels of the process's OpenMP runtime, or NULL when Tesseract is
     * built without OpenMP or the user set OMP_THREAD_LIMIT (see the header comment). */
    void (*omp_set_max_active_levels)(int);
};

/* ---- leptonica's messages ------------------------------------------------------------ */

/* The messages leptonica gave while the current record was read (a thread's own). */
static _Thread_local struct {
    char text[512];
    size_t len;
} lept_msgs;

/* Keeps msg for the current record's failure. Messages end with a newline; they are kept
 * joined by "; " without it, truncated to fit. */
static void lept_handler(const char *msg)
{
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        n--;
    size_t room = sizeof lept_msgs.text - 1 - lept_msgs.len;
    if (lept_msgs.len > 0 && room > 2) {
        memcpy(lept_msgs.text + lept_msgs.len, "; ", 2);
        lept_msgs.len += 2;
        room -= 2;
    }
    if (n > room)
        n = room;
    memcpy(lept_msgs.text + lept_msgs.len, msg, n);
    lept_msgs.len += n;
    lept_msgs.text[lept_msgs.len] = '\0';
}

/* Starts keeping leptonica's messages. The handler is process-wide: it is set only while
 * this file calls leptonica, and put back to leptonica's default (stderr) after, as
 * page_stats does with its own. */
static void lept_collect(void)
{
    lept_msgs.len = 0;
    lept_msgs.text[0] = '\0';
    leptSetStderrHandler(lept_handler);
}

/* Stops keeping them; returns what was kept, or `dflt` when leptonica said nothing. */
static const char *lept_collected(const char *dflt)
{
    leptSetStderrHandler(NULL);
    return lept_msgs.len > 0 ? lept_msgs.text : dflt;
}

/* ---- init and fini ------------------------------------------------------------------- */

/* Explains a failed Init: names the first model file of lang ("eng+deu"; "~fra" leaves a
 * language out) that is not in datapath, or else says that Tesseract refused a file that is
 * there. Returns -ENOENT or -EIO with the message in cfg->error. */
static int model_error(const struct orch_udf_config *cfg, const char *lang,
                       const char *datapath)
{
    const char *dir = datapath != NULL ? datapath : "(Tesseract's default directory)";
    const char *env = getenv("TESSDATA_PREFIX");
    char envnote[256] = "TESSDATA_PREFIX is not set";
    if (env != NULL)
        snprintf(envnote, sizeof envnote, "TESSDATA_PREFIX=%s", env);
    for (const char *p = lang; *p != '\0';) {
        size_t n = strcspn(p, "+");
        const char *name = p;
        size_t nlen = p[0] == '~' ? 0 : n; /* one left out need not be there */
        char path[1024];
        if (nlen > 0 && datapath != NULL &&
            snprintf(path, sizeof path, "%s%s%.*s.traineddata", datapath,
                     datapath[0] != '\0' && datapath[strlen(datapath) - 1] == '/' ? "" : "/",
                     (int)nlen, name) < (int)sizeof path &&
            access(path, R_OK) != 0)
            return orch_udf_config_error(
                cfg, -ENOENT,
                "tesseract_ocr: no model for language '%.*s': %s: %s (install it, e.g. "
                "Debian's tesseract-ocr-%.*s, or set TESSDATA_PREFIX to the directory that "
                "holds it; %s)",
                (int)nlen, name, path, strerror(errno), (int)nlen, name, envnote);
        p += n;
        if (*p == '+')
            p++;
    }
    return orch_udf_config_error(cfg, -EIO,
                                 "tesseract_ocr: Tesseract could not load language '%s' from "
                                 "%s (%s; its own messages are on the worker's stderr)",
                                 lang, dir, envnote);
}

/* Whether every language that lang asks for ("eng+deu"; "~fra" asks to leave one out) is
 * loaded: Tesseract's Init succeeds when any one of them is, and only warns on stderr of
 * the others. Returns 1, 0, or -ENOMEM. */
static int all_loaded(TessBaseAPI *api, const char *lang)
{
    char **loaded = TessBaseAPIGetLoadedLanguagesAsVector(api);
    if (loaded == NULL)
        return -ENOMEM;
    int ok = 1;
    for (const char *p = lang; *p != '\0' && ok;) {
        size_t n = strcspn(p, "+");
        if (p[0] != '~' && n > 0) {
            ok = 0;
            for (char **l = loaded; *l != NULL && !ok; l++)
                ok = strlen(*l) == n && memcmp(*l, p, n) == 0;
        }
        p += n;
        if (*p == '+')
            p++;
    }
    TessDeleteTextArray(loaded);
    return ok;
}

static int ocr_init(const struct orch_udf_config *cfg, void **state)
{
    static const char *const args[] = {"lang", "psm", NULL};
    void *st;
    int rc = orch_udf__base_init(cfg, "tesseract_ocr", ORCH_UDF__OP(ORCH_UDF_OP_MAP), args,
                                 sizeof(struct ocr_state), &st);
    if (rc < 0)
        return rc;
    struct ocr_state *s = st;
    const char *lang = orch_udf_arg(cfg, "lang");
    if (lang == NULL)
        lang = "eng";
    uint64_t psm;
    rc = orch_udf__arg_u64(cfg, "tesseract_ocr", "psm", 3, &psm);
    if (rc < 0)
        goto fail_state;
    if (psm > PSM_MAX) {
        rc = orch_udf_config_error(cfg, -EINVAL,
                                   "tesseract_ocr: argument psm must be from 0 to %d, not %s",
                                   PSM_MAX, orch_udf_arg(cfg, "psm"));
        goto fail_state;
    }
    if (lang[0] == '\0') {
        rc = orch_udf_config_error(cfg, -EINVAL,
                                   "tesseract_ocr: argument lang must not be empty");
        goto fail_state;
    }
    if (getenv("OMP_THREAD_LIMIT") == NULL)
        *(void **)&s->omp_set_max_active_levels =
            dlsym(RTLD_DEFAULT, "omp_set_max_active_levels");
    s->api = TessBaseAPICreate();
    if (s->api == NULL) {
        rc = orch_udf_config_error(cfg, -ENOMEM, "tesseract_ocr: out of memory");
        goto fail_state;
    }
    /* NULL datapath: $TESSDATA_PREFIX, else the directory built into libtesseract. */
    if (TessBaseAPIInit3(s->api, NULL, lang) != 0) {
        rc = model_error(cfg, lang, TessBaseAPIGetDatapath(s->api));
        goto fail_api;
    }
    rc = all_loaded(s->api, lang);
    if (rc <= 0) {
        rc = rc < 0 ? orch_udf_config_error(cfg, rc, "tesseract_ocr: out of memory")
                    : model_error(cfg, lang, TessBaseAPIGetDatapath(s->api));
        goto fail_api;
    }
    TessBaseAPISetPageSegMode(s->api, (TessPageSegMode)psm);
    /* From here on Tesseract's diagnostics ("Estimating resolution as 450" for every page
     * without a dpi, "Empty page!!", ...) would be lines on the user's terminal for every
     * page, from every worker; what matters of a page reaches the job as its text or its
     * failure. Init's own messages (a model that does not load) went to stderr above. */
    if (!TessBaseAPISetVariable(s->api, "debug_file", "/dev/null")) {
        rc = orch_udf_config_error(cfg, -EINVAL,
                                   "tesseract_ocr: Tesseract has no variable debug_file");
        goto fail_api;
    }
    *state = s;
    return 0;

fail_api:
    TessBaseAPIEnd(s->api);
    TessBaseAPIDelete(s->api);
fail_state:
    orch_udf__base_fini(s);
    return rc;
}

static void ocr_fini(void *state)
{
    struct ocr_state *s = state;
    TessBaseAPIEnd(s->api);
    TessBaseAPIDelete(s->api);
    orch_udf__base_fini(s);
}

/* ---- run ------------------------------------------------------------------------------ */

/* Reads the image of data/len into *pix, or writes why not into msg (n bytes) and returns
 * -EINVAL. The header is read first, so that an image too large is refused before its
 * pixels are allocated. */
static int read_image(const char *data, size_t len, PIX **pix, char *msg, size_t n)
{
    *pix = NULL;
    if (len == 0) {
        snprintf(msg, n, "tesseract_ocr: the image is empty (0 bytes)");
        return -EINVAL;
    }
    l_int32 format, w, h, bps, spp, iscmap;
    lept_collect();
    if (pixReadHeaderMem((const l_uint8 *)data, len, &format, &w, &h, &bps, &spp, &iscmap) !=
        0) {
        snprintf(msg, n, "tesseract_ocr: not an image leptonica can read (%zu bytes): %s", len,
                 lept_collected("unknown format"));
        return -EINVAL;
    }
    lept_collected(NULL);
    if (w <= 0 || h <= 0 || w > MAX_SIDE || h > MAX_SIDE ||
        (unsigned long long)w * (unsigned long long)h > MAX_PIXELS) {
        snprintf(msg, n,
                 "tesseract_ocr: the image is %dx%d pixels; at most %dx%d and %llu Mpixels "
                 "can be recognized",
                 w, h, MAX_SIDE, MAX_SIDE, MAX_PIXELS >> 20);
        return -EINVAL;
    }
    lept_collect();
    *pix = pixReadMem((const l_uint8 *)data, len);
    const char *why = lept_collected("leptonica gave no reason");
    if (*pix == NULL) {
        snprintf(msg, n, "tesseract_ocr: cannot read the %dx%d %s image: %s", w, h,
                 getFormatExtension(format) ? getFormatExtension(format) : "?", why);
        return -EINVAL;
    }
    return 0;
}

/* One record: answers it, or returns -ENOMEM. */
static int ocr_one(struct ocr_state *s, struct orch_udf_batch *batch, size_t i)
{
    struct orch_udf__subject sub;
    orch_udf__subject(&s->base, &batch->rec[i], &sub); /* map: never allocates */
    if (!sub.present)
        return orch_udf_drop(batch, i);
    char msg[768];
    PIX *pix;
    if (read_image(sub.data, sub.len, &pix, msg, sizeof msg) < 0)
        return orch_udf_fail_record(batch, i, msg);
    if (s->omp_set_max_active_levels != NULL)
        s->omp_set_max_active_levels(0); /* on the thread that recognizes: see the top */
    TessBaseAPISetImage2(s->api, pix);
    char *text = TessBaseAPIGetUTF8Text(s->api);
    int rc;
    if (text != NULL)
        rc = orch_udf__emit_all(&s->base, batch, i, text, strlen(text));
    else
        rc = orch_udf_fail_record(batch, i,
                                  "tesseract_ocr: Tesseract could not recognize the image");
    TessDeleteText(text);
    TessBaseAPIClear(s->api); /* the page's results; the model stays */
    pixDestroy(&pix);
    return rc;
}

static int ocr_run(void *state, struct orch_udf_batch *batch)
{
    for (size_t i = 0; i < batch->n; i++) {
        int rc = ocr_one(state, batch, i);
        if (rc < 0)
            return orch_udf_batch_error(batch, rc, "tesseract_ocr: %s", strerror(-rc));
    }
    return 0;
}

const struct orch_udf orch_udf__tesseract_ocr = {
    .abi_version = ORCH_UDF_ABI_VERSION,
    .name = "tesseract_ocr",
    .init = ocr_init,
    .run = ocr_run,
    .fini = ocr_fini,
};
