/* testutil.h — fixtures shared by the cmocka tests: scratch directories made under $TMPDIR
 * (or /tmp) and removed with everything in them, whole files written and read back, and a
 * job made from pipeline text. Header-only: each test program includes it once.
 *
 * Every helper returns 0 (or a pointer) on success and -1 (or NULL) on failure, after
 * printing why to stderr, so that a setup can return -1 and a test can assert the result.
 *
 * The job helpers exist only where orch_job.h is included before this header (the tests
 * that open a job), the store's where orch_store.h is; the others need nothing of the
 * project. A program that includes it
 * defines _GNU_SOURCE before its first #include (for nftw).
 */
#ifndef ORCH_TESTUTIL_H
#define ORCH_TESTUTIL_H

#if !defined(_GNU_SOURCE) && !defined(_XOPEN_SOURCE)
#error "testutil.h uses nftw(): #define _GNU_SOURCE before the first #include"
#endif

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int orch_test_rm_entry(const char *path, const struct stat *st, int flag,
                              struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Makes a new directory "$TMPDIR/orch-TAG-XXXXXX" into dir (n bytes). 0 or -1. */
static inline int orch_test_mkdtemp(char *dir, size_t n, const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    int len = snprintf(dir, n, "%s/orch-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (len < 0 || (size_t)len >= n) {
        fprintf(stderr, "orch_test_mkdtemp: the path does not fit in %zu bytes\n", n);
        return -1;
    }
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "orch_test_mkdtemp: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Removes dir and everything under it. 0 or -1. */
static inline int orch_test_rmtree(const char *dir)
{
    return nftw(dir, orch_test_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes "DIR/NAME" into path (n bytes). 0, or -1 when it does not fit. */
static inline int orch_test_path(char *path, size_t n, const char *dir, const char *name)
{
    int len = snprintf(path, n, "%s/%s", dir, name);
    if (len < 0 || (size_t)len >= n) {
        fprintf(stderr, "orch_test_path: %s/%s does not fit in %zu bytes\n", dir, name, n);
        return -1;
    }
    return 0;
}

/* Creates or replaces the file at path with the n bytes of data. 0 or -1. */
static inline int orch_test_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        fprintf(stderr, "orch_test_write_file: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int ok = fwrite(data, 1, n, f) == n;
    if (fclose(f) != 0)
        ok = 0;
    if (!ok) {
        fprintf(stderr, "orch_test_write_file: %s: cannot write\n", path);
        return -1;
    }
    return 0;
}

/* The same for a NUL-terminated text (without its NUL). */
static inline int orch_test_write_text(const char *path, const char *text)
{
    return orch_test_write_file(path, text, strlen(text));
}

/* The whole regular file at path, NUL-terminated (free() it); its size in *len when len
 * is not NULL. NULL when it cannot be read. */
static inline char *orch_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "orch_test_read_file: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    char *s = NULL;
    size_t n = 0;
    if (fstat(fileno(f), &st) == 0 && (s = malloc((size_t)st.st_size + 1)) != NULL)
        n = fread(s, 1, (size_t)st.st_size, f);
    int bad = s == NULL || n != (size_t)st.st_size || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "orch_test_read_file: %s: cannot read\n", path);
        free(s);
        return NULL;
    }
    s[n] = '\0';
    if (len != NULL)
        *len = n;
    return s;
}

#ifdef ORCH_STORE_H
#include <stdarg.h>
#include <sqlite3.h>

/* The first column of the first row of the query fmt (printf-style, at most 2 KiB once
 * formatted) on store s, as text ("" when there is no row or the value is NULL, cut at
 * 8 KiB), in a static buffer that the next call overwrites. NULL when the query cannot be
 * prepared. */
static inline const char *orch_test_sql1(orch_store *s, const char *fmt, ...)
{
    static char out[8192];
    char sql[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    sqlite3_stmt *st;
    out[0] = '\0';
    if (sqlite3_prepare_v2(orch_store_db(s), sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "orch_test_sql1: %s: %s\n", sql, sqlite3_errmsg(orch_store_db(s)));
        return NULL;
    }
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(out, sizeof out, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
}
#endif

#ifdef ORCH_JOB_H
#include "orch_error.h"

/* Writes `pipeline` to DIR/p.orch and makes a new job of it in DIR/job (the files its
 * sources read are the caller's to write into DIR, before or after). 0 with the open job
 * in *out (orch_job_close() it), or -1 after printing the compiler's diagnostics or the
 * error. */
static inline int orch_test_job_create(const char *dir, const char *pipeline,
                                       struct orch_job **out)
{
    char path[4096], job[4096];
    if (orch_test_path(path, sizeof path, dir, "p.orch") < 0 ||
        orch_test_path(job, sizeof job, dir, "job") < 0 ||
        orch_test_write_text(path, pipeline) < 0)
        return -1;
    if (orch_job_create(job, path, stderr, out) < 0) {
        fprintf(stderr, "orch_job_create %s: %s\n", job, orch_error_detail());
        return -1;
    }
    return 0;
}
#endif

#endif
