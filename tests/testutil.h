/* testutil.h — scratch directories for the cmocka tests: made under $TMPDIR (or /tmp),
 * removed with everything in them. Header-only: each test program includes it once. */
#ifndef ORCH_TESTUTIL_H
#define ORCH_TESTUTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

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
    snprintf(dir, n, "%s/orch-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    return mkdtemp(dir) ? 0 : -1;
}

/* Removes dir and everything under it. 0 or -1. */
static inline int orch_test_rmtree(const char *dir)
{
    return nftw(dir, orch_test_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
