/* lang.c — compiling `.orch` text and files; rebuilding a plan from its canonical text. */
#include "lexer.h"
#include "orch_lang.h"
#include "plan_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int compile_job(const char *file, const char *text, size_t len, const char *basedir,
                       bool canonical, bool retired_ok, FILE *diag, orch_plan **out)
{
    *out = NULL;
    orch_plan_builder *b;
    int rc = orch_plan_builder_new(basedir, &b);
    if (rc == -ENOMEM)
        return orch_error_set(-ENOMEM, "%s: out of memory", file);
    if (rc)
        return rc; /* the current directory is unknown: the detail says so */
    if ((rc = orch__lang_parse_job(b, text, len, canonical, retired_ok)) == 0)
        rc = orch_plan_build(b, out);
    if (rc == -ENOMEM) {
        orch_plan_builder_free(b);
        return orch_error_set(-ENOMEM, "%s: out of memory", file);
    }
    orch_plan_diags_print(b, file, diag);
    if (rc == ORCH_EPLAN) {
        for (int i = 0; i < orch_plan_ndiags(b); i++) {
            const struct orch_diag *d = orch_plan_get_diag(b, i);
            if (d->severity == ORCH_DIAG_ERROR) {
                orch_error_set(ORCH_ESYNTAX, "%s:%d:%d: error: %s", file, d->loc.line,
                               d->loc.col, d->message);
                break;
            }
        }
        rc = ORCH_ESYNTAX;
    }
    orch_plan_builder_free(b);
    return rc;
}

static int compile(const char *file, const char *text, size_t len, const char *basedir,
                   bool canonical, FILE *diag, orch_plan **out)
{
    return compile_job(file, text, len, basedir, canonical, canonical, diag, out);
}

int orch_lang_compile(const char *file, const char *text, size_t len, const char *basedir,
                      FILE *diag, orch_plan **out)
{
    return compile(file, text, len, basedir, false, diag, out);
}

int orch_lang_compile_job_plan(const char *text, orch_plan **out)
{
    return compile_job("<aligned plan>", text, strlen(text), "/", false, true, NULL, out);
}

/* Reads at most ORCH_LANG_MAX_BYTES + 1 bytes, so that a larger file is reported as such
 * without reading all of it. */
static int read_file(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return -EISDIR;
    }
    size_t cap = 0, n = 0;
    char *buf = NULL;
    int rc = 0;
    for (;;) {
        if (n == cap && orch__grow_n(&buf, &cap, n + 65536, 1) < 0) {
            rc = -ENOMEM;
            break;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0 || n > ORCH_LANG_MAX_BYTES)
            break;
    }
    if (rc == 0 && ferror(f))
        rc = -EIO;
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = n;
    return 0;
}

int orch_lang_compile_written(const char *path, orch_plan **out)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = read_file(path, &text, &len);
    if (rc)
        return orch_error_set(rc, "%s: cannot read: %s", path, strerror(-rc));
    rc = orch_lang_compile(path, text, len, "/", NULL, out);
    free(text);
    return rc;
}

int orch_lang_compile_file(const char *path, FILE *diag, orch_plan **out)
{
    return orch_lang_compile_path(path, diag, out, NULL, NULL);
}

int orch_lang_compile_path(const char *path, FILE *diag, orch_plan **out, char **text_out,
                           size_t *len_out)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = read_file(path, &text, &len);
    if (rc == -ENOMEM) /* not a fault of the file: no diagnostic about it */
        return orch_error_set(-ENOMEM, "%s: out of memory", path);
    if (rc) {
        if (diag)
            fprintf(diag, "%s: error: cannot read: %s\n", path, strerror(-rc));
        return orch_error_set(rc, "%s: cannot read: %s", path, strerror(-rc));
    }
    char *dir = strdup(path);
    if (!dir) {
        free(text);
        return orch_error_set(-ENOMEM, "%s: out of memory", path);
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir ? 1 : 0] = '\0';
    rc = orch_lang_compile(path, text, len, slash ? dir : NULL, diag, out);
    free(dir);
    if (rc == 0 && text_out) {
        *text_out = text;
        *len_out = len;
    } else {
        free(text);
    }
    return rc;
}

int orch_plan_from_canonical(const char *text, orch_plan **out)
{
    *out = NULL;
    orch_plan *p;
    int rc = compile("<canonical plan>", text, strlen(text), "/", true, NULL, &p);
    if (rc)
        return rc;
    if (strcmp(orch_plan_canonical(p), text) != 0) {
        orch_plan_free(p);
        return orch_error_set(ORCH_EMISMATCH,
                              "plan text is not canonical (it compiles to a different text)");
    }
    *out = p;
    return 0;
}
