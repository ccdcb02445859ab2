/* test_oom.c — allocation-failure injection, as SQLite tests itself. Each operation of the
 * compiler and of the two stores is run once without failure (the reference, which also
 * counts its allocations), then again for each N from 1 up to that count: once with the
 * Nth allocation failing alone (the code after the failure runs on, and must not trip over
 * what failed), and once with every allocation from the Nth on failing (cleanup code that
 * itself allocates). Every run must end in one of two ways:
 *   - success, with exactly the reference's result (SQLite survives some failures by
 *     design; our code must never turn a failure into a wrong answer, nor a swallowed
 *     error into a different diagnostic);
 *   - -ENOMEM, with a detail where the module documents one, and nothing left behind (no
 *     file of a job whose creation failed, no transaction left open).
 * And never a crash, an assertion, or a leak.
 *
 * How allocations fail.
 *   - Our code: this program is linked with -Wl,--wrap=malloc,... (tests/meson.build), so
 *     every call of malloc, calloc, realloc, free, strdup, strndup and getcwd made by the
 *     static libraries linked into it (engine/base, engine/plan, engine/lang, storage)
 *     goes through the __wrap_ functions below. A function that allocates and is not in
 *     that list escapes the test; to look for one:
 *       grep -nE '\b(m|c|re)alloc|str(n)?dup|asprintf|getline|open_memstream|getcwd|realpath'
 *   - SQLite: through sqlite3_config(SQLITE_CONFIG_MALLOC), set before sqlite3_initialize(),
 *     over the default allocator. SQLite then answers SQLITE_NOMEM, which storage/
 *     translates to -ENOMEM. SQLite allocates thousands of times per call of ours (the
 *     schema is parsed on every open), so by default its allocations are sampled: see
 *     "where SQLite's allocations come from" below. ORCH_OOM_EXHAUSTIVE=1 fails every one.
 *   - NOT covered: LMDB's own allocations (liblmdb.so calls malloc through its own PLT,
 *     which --wrap cannot reach, and LMDB has no allocator hook), and those made inside
 *     libc (fopen's FILE; getcwd's buffer, for which the call fails as a whole). The
 *     payload store is therefore failed at its own allocations only.
 *
 * How leaks are found. In every build, the wrappers keep the set of blocks allocated
 * during a run (with the caller's address, for addr2line) and the run must end with it
 * empty: that covers our code and SQLite's. Under AddressSanitizer, LeakSanitizer also
 * checks after each operation's runs (__lsan_do_recoverable_leak_check), which covers
 * what the set cannot see: LMDB's and libc's allocations (an fopen without fclose).
 */
#define _GNU_SOURCE /* dladdr, open_memstream */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "orch_error.h"
#include "orch_lang.h"
#include "orch_payload.h"
#include "orch_plan.h"
#include "orch_store.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define OOM_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OOM_LSAN 1
#endif
#endif
#ifdef OOM_LSAN
#include <sanitizer/lsan_interface.h>
#endif

/* ---- the failing allocator ------------------------------------------------------------- */

/* The C library's functions, which the linker names __real_* when it wraps them. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
char *__real_getcwd(char *buf, size_t size);

/* While `injecting`, allocations are counted and the one numbered fail_at (from 1) fails.
 * While `tracking`, every block handed out is kept in `live` until it is freed. */
static struct {
    bool injecting;
    bool tracking;
    long fail_at;    /* 0: none fails */
    bool persistent; /* every allocation from fail_at on fails, not that one alone */
    long count;      /* allocations seen since inject_start() */
    bool failed;     /* the fail_at-th allocation came, and failed */
} oom;

/* The live blocks: open addressing, linear probing, deletion by backward shift (no
 * tombstones, so the table never needs a rebuild). */
#define LIVE_CAP (1u << 16)
struct live_block {
    void *p;
    size_t size;
    long ordinal;     /* which allocation of the run made it (0: not injecting then) */
    const char *kind; /* "malloc", "sqlite3_malloc", ... */
    void *caller;
};
static struct live_block live[LIVE_CAP];
static size_t nlive;
static bool live_overflow;

static size_t live_hash(const void *p)
{
    return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull >> 40) & (LIVE_CAP - 1);
}

static void live_add(void *p, size_t size, const char *kind, void *caller)
{
    if (!oom.tracking || p == NULL)
        return;
    if (nlive >= LIVE_CAP / 2) {
        live_overflow = true;
        return;
    }
    size_t i = live_hash(p);
    while (live[i].p != NULL)
        i = (i + 1) & (LIVE_CAP - 1);
    live[i] = (struct live_block){p, size, oom.injecting ? oom.count : 0, kind, caller};
    nlive++;
}

static void live_del(void *p)
{
    if (p == NULL || nlive == 0)
        return;
    size_t i = live_hash(p);
    while (live[i].p != p) {
        if (live[i].p == NULL)
            return; /* allocated before tracking began, or by someone we do not see */
        i = (i + 1) & (LIVE_CAP - 1);
    }
    /* Backward shift: move up every later entry of the cluster that may take the hole. */
    for (size_t j = i;;) {
        j = (j + 1) & (LIVE_CAP - 1);
        if (live[j].p == NULL)
            break;
        size_t k = live_hash(live[j].p);
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            live[i] = live[j];
            i = j;
        }
    }
    live[i].p = NULL;
    nlive--;
}

/* ---- where SQLite's allocations come from ----
 *
 * SQLite allocates thousands of times inside one call (creating a job parses its whole
 * schema), and a failure anywhere in that call reaches our code the same way: the call
 * answers SQLITE_NOMEM. What our code does next depends on which of its calls failed, not
 * on where inside SQLite. So the reference run records, for each SQLite allocation, its
 * site: the return address of our code's call into SQLite (the first frame of this
 * executable above the library's frames). A run of consecutive allocations with one site
 * is an episode. By default, every allocation of our own code is failed alone and then
 * with every later one; of each episode, the first and the last EPISODE_ENDS are failed
 * alone, and the first with every later one (the rest of the episode fails the same call
 * the same way). ORCH_OOM_EXHAUSTIVE=1 fails every allocation both ways, SQLite's
 * included: minutes instead of seconds. */
#define EPISODE_ENDS 2

static bool recording; /* the reference run: record each allocation's site */
static void **sites;   /* per allocation of the reference run: NULL for our own code */
static long nsites, capsites;
static uintptr_t exe_base, sqlite_base; /* where this executable and SQLite are loaded */

static bool loaded_at(void *addr, uintptr_t base)
{
    Dl_info info;
    return dladdr(addr, &info) && (uintptr_t)info.dli_fbase == base;
}

/* Our code's call into SQLite that led to this allocation, or UNPLACED when the stack
 * does not show one (a library without unwind tables): such allocations are then all
 * failed, as in the exhaustive mode. */
#define UNPLACED ((void *)1)

static void *sqlite_site(void)
{
    void *frames[128];
    int n = backtrace(frames, 128);
    int i = 0;
    while (i < n && !loaded_at(frames[i], sqlite_base)) /* this allocator (and ASan's) */
        i++;
    while (i < n && !loaded_at(frames[i], exe_base)) /* SQLite's */
        i++;
    return i < n ? frames[i] : UNPLACED;
}

static void record_site(void *site)
{
    if (nsites == capsites) {
        /* The real allocator: the record is not part of what is counted or tracked. */
        long cap = capsites ? 2 * capsites : 4096;
        void **n = __real_realloc(sites, (size_t)cap * sizeof *n);
        if (n == NULL)
            abort();
        sites = n;
        capsites = cap;
    }
    sites[nsites++] = site;
}

/* Whether this allocation is to fail. sqlite: it is SQLite's. */
static bool inject_next(bool sqlite)
{
    if (!oom.injecting)
        return false;
    if (recording)
        record_site(sqlite ? sqlite_site() : NULL);
    ++oom.count;
    if (oom.fail_at == 0 || oom.count < oom.fail_at)
        return false;
    if (oom.count > oom.fail_at && !oom.persistent)
        return false;
    oom.failed = true;
    return true;
}

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
char *__wrap_getcwd(char *buf, size_t size);

#define CALLER __builtin_return_address(0)

void *__wrap_malloc(size_t n)
{
    if (inject_next(false))
        return errno = ENOMEM, NULL;
    void *p = __real_malloc(n);
    live_add(p, n, "malloc", CALLER);
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    if (inject_next(false))
        return errno = ENOMEM, NULL;
    void *p = __real_calloc(n, size);
    live_add(p, n * size, "calloc", CALLER);
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    if (inject_next(false))
        return errno = ENOMEM, NULL; /* p stays valid, and live */
    void *np = __real_realloc(p, n);
    if (np != NULL) {
        live_del(p);
        live_add(np, n, "realloc", CALLER);
    }
    return np;
}

void __wrap_free(void *p)
{
    live_del(p);
    __real_free(p);
}

char *__wrap_strdup(const char *s)
{
    if (inject_next(false))
        return errno = ENOMEM, NULL;
    char *p = __real_strdup(s);
    live_add(p, p ? strlen(p) + 1 : 0, "strdup", CALLER);
    return p;
}

char *__wrap_strndup(const char *s, size_t n)
{
    if (inject_next(false))
        return errno = ENOMEM, NULL;
    char *p = __real_strndup(s, n);
    live_add(p, p ? strlen(p) + 1 : 0, "strndup", CALLER);
    return p;
}

/* getcwd(NULL, 0) allocates inside libc: the call as a whole is what fails. */
char *__wrap_getcwd(char *buf, size_t size)
{
    if (buf == NULL && inject_next(false))
        return errno = ENOMEM, NULL;
    char *p = __real_getcwd(buf, size);
    if (buf == NULL)
        live_add(p, p ? strlen(p) + 1 : 0, "getcwd", CALLER);
    return p;
}

/* SQLite's allocator, over the default one. */
static sqlite3_mem_methods sqlite_mem;

static void *sq_malloc(int n)
{
    if (inject_next(true))
        return NULL;
    void *p = sqlite_mem.xMalloc(n);
    live_add(p, (size_t)n, "sqlite3_malloc", CALLER);
    return p;
}

static void sq_free(void *p)
{
    live_del(p);
    sqlite_mem.xFree(p);
}

static void *sq_realloc(void *p, int n)
{
    if (inject_next(true))
        return NULL;
    void *np = sqlite_mem.xRealloc(p, n);
    if (np != NULL) {
        live_del(p);
        live_add(np, (size_t)n, "sqlite3_realloc", CALLER);
    }
    return np;
}

static int sq_size(void *p)
{
    return sqlite_mem.xSize(p);
}

static int sq_roundup(int n)
{
    return sqlite_mem.xRoundup(n);
}

static int sq_init(void *app)
{
    (void)app;
    return sqlite_mem.xInit(sqlite_mem.pAppData);
}

static void sq_shutdown(void *app)
{
    (void)app;
    sqlite_mem.xShutdown(sqlite_mem.pAppData);
}

/* Must run before SQLite initializes: SQLITE_CONFIG_MALLOC is refused afterwards. */
static int install_sqlite_allocator(void)
{
    if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &sqlite_mem) != SQLITE_OK)
        return -1;
    static sqlite3_mem_methods ours = {sq_malloc,  sq_free, sq_realloc,  sq_size,
                                       sq_roundup, sq_init, sq_shutdown, NULL};
    if (sqlite3_config(SQLITE_CONFIG_MALLOC, &ours) != SQLITE_OK)
        return -1;
    /* Initialize now, so that SQLite's one-time allocations are not counted in the first
     * run (and cannot fail there). */
    return sqlite3_initialize() == SQLITE_OK ? 0 : -1;
}

/* ---- one run ---------------------------------------------------------------------------- */

/* "allocation 12 failing", "allocations from 12 on failing", or "no allocation failing". */
static const char *run_label(long fail_at)
{
    static char label[64];
    if (fail_at == 0)
        return "no allocation failing";
    snprintf(label, sizeof label,
             oom.persistent ? "allocations from %ld on failing" : "allocation %ld failing",
             fail_at);
    return label;
}

static void track_start(void)
{
    assert_int_equal(nlive, 0);
    live_overflow = false;
    oom.tracking = true;
}

static void inject_start(long fail_at, bool persistent)
{
    oom.fail_at = fail_at;
    oom.persistent = persistent;
    oom.count = 0;
    oom.failed = false;
    orch_error_clear();
    oom.injecting = true;
}

/* Returns how many allocations the run made. */
static long inject_stop(void)
{
    oom.injecting = false;
    return oom.count;
}

/* Ends tracking: every block of the run must have been freed. */
static void track_check(const char *what, long fail_at)
{
    oom.tracking = false;
    assert_false(live_overflow);
    if (nlive == 0)
        return;
    fprintf(stderr, "%s, %s: %zu block(s) leaked:\n", what, run_label(fail_at), nlive);
    for (size_t i = 0; i < LIVE_CAP; i++) {
        if (live[i].p == NULL)
            continue;
        Dl_info info;
        const char *obj = "?";
        uintptr_t off = (uintptr_t)live[i].caller;
        if (dladdr(live[i].caller, &info) && info.dli_fname) {
            obj = info.dli_fname;
            off -= (uintptr_t)info.dli_fbase;
        }
        fprintf(stderr, "  %s of %zu bytes (allocation %ld of the run), from %s+%#lx\n",
                live[i].kind, live[i].size, live[i].ordinal, obj, (unsigned long)off);
        live[i].p = NULL;
    }
    nlive = 0;
    fail_msg("%s: memory leaked, %s (addr2line -e OBJECT OFFSET)", what, run_label(fail_at));
}

/* After all runs of an operation: what the live set cannot see (LMDB, libc). */
static void lsan_check(const char *what)
{
#ifdef OOM_LSAN
    if (__lsan_do_recoverable_leak_check())
        fail_msg("%s: LeakSanitizer found a leak (report above)", what);
#else
    (void)what;
#endif
}

/* An operation under test: runs once, with injection on (the caller turns it off before
 * checking). It returns its outcome and keeps what it made in its context; `check`
 * verifies the outcome (`failed`: whether an allocation failed in the run) and frees
 * everything. */
struct op {
    const char *what;
    void *ctx;
    int (*run)(void *ctx);
    void (*check)(void *ctx, int rc, bool failed, long fail_at);
};

/* Counts of one operation's reference run, and of the runs made. */
struct coverage {
    long total;        /* allocations of the reference run */
    long ours;         /* of them, made by our code */
    long episodes;     /* calls of our code into SQLite that allocated */
    long failed_alone; /* runs in which one allocation failed */
    long failed_on;    /* runs in which one and every later allocation failed */
};

static bool exhaustive; /* ORCH_OOM_EXHAUSTIVE=1 */

/* Which allocations of the reference run to fail (selected[i] for allocation i + 1):
 * bit 0, alone; bit 1, with every later one. */
enum { FAIL_ALONE = 1, FAIL_ON = 2 };

static unsigned char *select_failures(struct coverage *cov)
{
    unsigned char *selected = __real_calloc((size_t)nsites + 1, 1);
    assert_non_null(selected);
    for (long i = 0; i < nsites;) {
        if (sites[i] == NULL || sites[i] == UNPLACED) {
            cov->ours += sites[i] == NULL;
            selected[i++] = FAIL_ALONE | FAIL_ON;
            continue;
        }
        long end = i + 1;
        while (end < nsites && sites[end] == sites[i])
            end++;
        for (long j = i; j < end; j++) {
            bool edge = j - i < EPISODE_ENDS || end - j <= EPISODE_ENDS;
            selected[j] = exhaustive ? FAIL_ALONE | FAIL_ON
                                     : (edge ? FAIL_ALONE : 0) | (j == i ? FAIL_ON : 0);
        }
        cov->episodes++;
        i = end;
    }
    return selected;
}

/* Runs op without failure (the reference, which check() records), then with the Nth
 * allocation failing for each selected N up to the reference's count, and on until a run
 * sees no failure. */
static struct coverage run_every_failure(const struct op *op)
{
    struct coverage cov = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nsites = 0;
    recording = true;
    track_start();
    inject_start(0, false);
    int rc = op->run(op->ctx);
    cov.total = inject_stop();
    recording = false;
    op->check(op->ctx, rc, false, 0);
    track_check(op->what, 0);
    assert_int_equal(nsites, cov.total);
    unsigned char *selected = select_failures(&cov);

    /* One failure alone (the code after it runs on, and must not trip over what failed),
     * then every allocation from there on (cleanup code that itself allocates). */
    for (int persistent = 0; persistent <= 1; persistent++) {
        for (long n = 1;; n++) {
            if (n <= cov.total && !(selected[n - 1] & (persistent ? FAIL_ON : FAIL_ALONE)))
                continue;
            track_start();
            inject_start(n, persistent);
            rc = op->run(op->ctx);
            inject_stop();
            bool failed = oom.failed;
            op->check(op->ctx, rc, failed, n);
            track_check(op->what, n);
            if (!failed && n >= cov.total)
                break;
            /* Runs are deterministic up to their failure: the Nth allocation is the
             * reference's Nth, so every allocation point selected was failed. */
            assert_true(failed);
            cov.failed_alone += !persistent;
            cov.failed_on += persistent;
        }
    }
    oom.persistent = false;
    __real_free(selected);
    lsan_check(op->what);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_message("  %s: %ld allocations (%ld of ours, %ld of SQLite's in %ld calls);\n"
                  "    runs: %ld with one failing, %ld with all from one on failing (%.2f s)\n",
                  op->what, cov.total, cov.ours, cov.total - cov.ours, cov.episodes,
                  cov.failed_alone, cov.failed_on,
                  (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    return cov;
}

/* A copy of s that outlives the runs (a reference result): not tracked as a leak. */
static char *keep_copy(const char *s)
{
    bool tracking = oom.tracking;
    oom.tracking = false;
    /* GCC takes strdup for the C library's and may move the store above past the call,
     * which it believes cannot read `oom`: a compiler barrier keeps the order. */
    __asm__ volatile("" ::: "memory");
    char *copy = strdup(s);
    __asm__ volatile("" ::: "memory");
    oom.tracking = tracking;
    assert_non_null(copy);
    return copy;
}

/* A failure's outcome: -ENOMEM, with a detail when the module documents one. */
static void assert_enomem(const char *what, int rc, long fail_at, const char *detail_prefix)
{
    if (rc != -ENOMEM)
        fail_msg("%s, %s: the result is %d (%s; detail: %s), not -ENOMEM", what,
                 run_label(fail_at), rc, orch_strerror(rc), orch_error_detail());
    if (detail_prefix != NULL &&
        strncmp(orch_error_detail(), detail_prefix, strlen(detail_prefix)) != 0)
        fail_msg("%s, %s: detail \"%s\" does not start with \"%s\"", what, run_label(fail_at),
                 orch_error_detail(), detail_prefix);
}

/* ---- the compiler ----------------------------------------------------------------------- */

struct compile_case {
    const char *name;
    const char *path;    /* compile this file (orch_lang_compile_file) ... */
    const char *text;    /* ... or this text */
    const char *basedir; /* for text: relative to the current directory when relative */
    int expect;          /* 0 or ORCH_ESYNTAX */
    /* the reference */
    char *canonical;
    char *diags;
    char *detail;
    /* this run */
    orch_plan *plan, *again;
    int again_rc;
    FILE *diag;
    char *diag_buf;
    size_t diag_len;
};

/* Compiles the case; a plan is also rebuilt from its canonical text (as resume does). The
 * diagnostics stream is opened here, for each run: its buffer is libc's, never failed. */
static int compile_run(void *ctx)
{
    struct compile_case *c = ctx;
    c->plan = c->again = NULL;
    c->diag_buf = NULL;
    c->diag = open_memstream(&c->diag_buf, &c->diag_len);
    assert_non_null(c->diag);
    int rc = c->path ? orch_lang_compile_file(c->path, c->diag, &c->plan)
                     : orch_lang_compile(c->name, c->text, strlen(c->text), c->basedir, c->diag,
                                         &c->plan);
    c->again_rc = 0;
    if (rc == 0)
        c->again_rc = orch_plan_from_canonical(orch_plan_canonical(c->plan), &c->again);
    return rc;
}

static void compile_check(void *ctx, int rc, bool failed, long fail_at)
{
    struct compile_case *c = ctx;
    fclose(c->diag);
    c->diag = NULL;
    char *detail = strdup(orch_error_detail());
    assert_non_null(detail);
    assert_true(rc == 0 ? c->plan != NULL : c->plan == NULL);
    if (fail_at == 0) {
        /* The reference. */
        if (rc != c->expect)
            fail_msg("%s: compiles to %d, expected %d; diagnostics:\n%s", c->name, rc,
                     c->expect, c->diag_buf);
        assert_int_equal(c->again_rc, 0);
        c->canonical = rc == 0 ? keep_copy(orch_plan_canonical(c->plan)) : NULL;
        c->diags = keep_copy(c->diag_buf);
        c->detail = keep_copy(detail);
    } else if (!failed || rc != -ENOMEM) {
        /* No failure, or one that was survived: the same answer, to the byte. */
        if (rc != c->expect)
            fail_msg("%s, %s: compiles to %d (%s), expected %d", c->name, run_label(fail_at),
                     rc, detail, c->expect);
        if (strcmp(c->diag_buf, c->diags) != 0) {
            /* cmocka cuts long messages: the texts go to stderr whole. */
            fprintf(stderr, "got:\n%s\nexpected:\n%s\n", c->diag_buf, c->diags);
            fail_msg("%s, %s: diagnostics differ", c->name, run_label(fail_at));
        }
        if (rc == 0) {
            assert_string_equal(orch_plan_canonical(c->plan), c->canonical);
            if (c->again_rc != 0)
                assert_enomem(c->name, c->again_rc, fail_at, NULL);
            else
                assert_string_equal(orch_plan_canonical(c->again), c->canonical);
        } else {
            assert_string_equal(detail, c->detail);
        }
    } else {
        /* A failure reported as such, with a detail, and no diagnostics: they would be
         * those of a partial pipeline. */
        assert_enomem(c->name, rc, fail_at, NULL);
        if (detail[0] == '\0')
            fail_msg("%s, %s: -ENOMEM without a detail", c->name, run_label(fail_at));
        if (c->diag_buf[0] != '\0')
            fail_msg("%s, %s: -ENOMEM, but diagnostics were written:\n%s", c->name,
                     run_label(fail_at), c->diag_buf);
    }
    orch_plan_free(c->plan);
    orch_plan_free(c->again);
    c->plan = c->again = NULL;
    free(c->diag_buf);
    c->diag_buf = NULL;
    free(detail);
}

static void compile_every_failure(struct compile_case *c)
{
    struct op op = {c->name, c, compile_run, compile_check};
    struct coverage cov = run_every_failure(&op);
    /* No SQLite here: every allocation was failed, both ways. */
    assert_int_equal(cov.failed_alone, cov.total);
    assert_int_equal(cov.failed_on, cov.total);
    free(c->canonical);
    free(c->diags);
    free(c->detail);
    c->canonical = c->diags = c->detail = NULL;
}

/* Every pipeline of examples/, from its file. */
static void test_compile_examples(void **state)
{
    (void)state;
    const char *root = getenv("SRCDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/examples", root ? root : ".");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".orch") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct compile_case c = {.name = e->d_name, .path = path, .expect = 0};
        compile_every_failure(&c);
        n++;
    }
    closedir(d);
    assert_true(n >= 3);
}

/* Libraries, exec, every option, and a basedir relative to the current directory (so
 * that the builder asks for it). */
static const char tools_src[] =
    "pipeline tools\n"
    "domain doc\n"
    "domain part in doc\n"
    "source doc.path = lines(\"lists/./all.txt\")\n"
    "call lib = library(\"lib//udf.so\", \"udf_f\")(mode=\"x\\ty\", n=3, flag=on)"
    " with workers=2, batch=8, batch_bytes=64MiB, cpus=0.5, gpus=0.25, retries=0,"
    " timeout=90m, reserve=parent\n"
    "call sh = exec(\"tr a-z A-Z\")\n"
    "call cut = split_lines()\n"
    "call keep = nonempty()\n"
    "call same = identity()\n"
    "doc.a = lib(doc.path)\n"
    "doc.b = sh(doc.a)\n"
    "part.x = expand cut(doc.b)\n"
    "part.y = filter keep(part.x)\n"
    "part.p = broadcast doc.path\n"
    "part.z = same(?part.y)\n"
    "output part.z\n";

/* Errors of every stage: the lexer, the parser (and its cascades of broken names), the
 * builder's immediate checks and the whole-plan checks. */
static const char broken_src[] =
    "pipeline bad\n"
    "domain doc\n"
    "domain line in nowhere\n"
    "domain word in line\n"
    "domain doc\n"
    "source doc.path = files(\"a\\qb\")\n"
    "source doc.path = files(\"texts/*.txt\")\n"
    "call read = read_file(\n"
    "call cut = split_lines() with batch=0, workers=x\n"
    "call join = concat(sep=\"\\n\", nope=1) with timeout=5parsecs, colour=red\n"
    "call what = no_such_function()\n"
    "call join = upper()\n"
    "doc.text = read(doc.path)\n"
    "line.raw = expand cut(doc.text)\n"
    "doc.n = reduce tally(line.raw)\n"
    "doc.j = reduce join(word.raw)\n"
    "doc.k = filter join(?doc.path)\n"
    "doc.path = broadcast doc.path\n"
    "output doc.missing\n"
    "\x01 junk \"unterminated\n"
    "doc.\xff = x(y)\n";

/* Only whole-plan errors (no syntax error, so the completeness checks run too): a cycle,
 * a port without producer, an unused call, an output named twice. */
static const char cycle_src[] = "pipeline cyc\n"
                                "domain a\n"
                                "domain b in a\n"
                                "source a.x = files(\"*.txt\")\n"
                                "call f = upper()\n"
                                "call g = upper()\n"
                                "call h = split_lines()\n"
                                "call unused = upper()\n"
                                "a.y = f(a.z)\n"
                                "a.z = g(a.y)\n"
                                "b.w = expand h(a.q)\n"
                                "output a.y\n"
                                "output a.y\n";

/* A long cycle, named with "..." in the middle. */
static const char long_cycle_src[] =
    "pipeline ring\n"
    "domain a\n"
    "source a.x = files(\"*\")\n"
    "call c0 = upper()\ncall c1 = upper()\ncall c2 = upper()\ncall c3 = upper()\n"
    "call c4 = upper()\ncall c5 = upper()\ncall c6 = upper()\ncall c7 = upper()\n"
    "call c8 = upper()\ncall c9 = upper()\ncall c10 = upper()\ncall c11 = upper()\n"
    "call c12 = upper()\ncall c13 = upper()\n"
    "a.p0 = c0(a.p13)\na.p1 = c1(a.p0)\na.p2 = c2(a.p1)\na.p3 = c3(a.p2)\n"
    "a.p4 = c4(a.p3)\na.p5 = c5(a.p4)\na.p6 = c6(a.p5)\na.p7 = c7(a.p6)\n"
    "a.p8 = c8(a.p7)\na.p9 = c9(a.p8)\na.p10 = c10(a.p9)\na.p11 = c11(a.p10)\n"
    "a.p12 = c12(a.p11)\na.p13 = c13(a.p12)\n";

static void test_compile_text(void **state)
{
    (void)state;
    struct compile_case cases[] = {
        {.name = "tools.orch", .text = tools_src, .basedir = "rel/./dir", .expect = 0},
        {.name = "broken.orch", .text = broken_src, .basedir = "/base", .expect = ORCH_ESYNTAX},
        {.name = "cycle.orch", .text = cycle_src, .basedir = "/base", .expect = ORCH_ESYNTAX},
        {.name = "ring.orch", .text = long_cycle_src, .basedir = "/", .expect = ORCH_ESYNTAX},
        {.name = "empty.orch", .text = "# nothing\n", .basedir = "/", .expect = ORCH_ESYNTAX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        compile_every_failure(&cases[i]);
}

/* ---- the plan builder, through the C API ---------------------------------------------- */

struct builder_ctx {
    orch_plan *plan;
    char *printed; /* orch_plan_print of the plan */
    int print_rc;
    bool enomem; /* an add function returned -ENOMEM */
    int bad_rc;  /* the first result of an add function that is not allowed */
    const char *bad_what;
    char *canonical; /* the reference */
    char *ref_printed;
};

/* An add function answers 0, or -ENOMEM; or ORCH_EPLAN once an earlier one failed (the
 * declaration it refers to may be the one that was lost). */
static void fed(struct builder_ctx *x, int rc, const char *what)
{
    if (rc == -ENOMEM)
        x->enomem = true;
    else if (rc != 0 && !(rc == ORCH_EPLAN && x->enomem) && x->bad_rc == 0)
        x->bad_rc = rc, x->bad_what = what;
}

static orch_loc at(int line)
{
    return (orch_loc){line, 1};
}

static void call(struct builder_ctx *x, orch_plan_builder *b, const char *name,
                 enum orch_fn_kind kind, const char *fn, const char *sym, const char *arg,
                 enum orch_arg_kind akind, const char *value, const char *opt,
                 const char *optval, int line)
{
    int c;
    fed(x, orch_plan_add_call(b, name, kind, fn, sym, at(line), &c), "add_call");
    if (c < 0)
        return; /* no handle to give arguments to */
    if (arg)
        fed(x, orch_plan_call_arg(b, c, arg, akind, value, at(line)), "call_arg");
    if (opt)
        fed(x, orch_plan_call_option(b, c, opt, optval, at(line)), "call_option");
}

static void stmt(struct builder_ctx *x, orch_plan_builder *b, enum orch_op op,
                 const char *callname, const char *out_d, const char *out_p, const char *in_d,
                 const char *in_p, bool optional, int line)
{
    int s;
    fed(x, orch_plan_add_stmt(b, op, callname, at(line), &s), "add_stmt");
    if (s < 0)
        return;
    fed(x, orch_plan_stmt_output(b, s, out_d, out_p, at(line)), "stmt_output");
    fed(x, orch_plan_stmt_input(b, s, in_d, in_p, optional, at(line)), "stmt_input");
}

/* The reference pipeline of DESIGN §2 and a little more, declared in an order the
 * language would also allow (a reduce before the ports it reads are produced). */
static int builder_run(void *ctx)
{
    struct builder_ctx *x = ctx;
    x->plan = NULL;
    x->printed = NULL;
    x->print_rc = 0;
    x->enomem = false;
    x->bad_rc = 0;
    orch_plan_builder *b;
    int rc = orch_plan_builder_new("data/../pdfs", &b); /* relative: asks for the cwd */
    if (rc)
        return rc;
    fed(x, orch_plan_set_name(b, "pdf_ocr", at(1)), "set_name");
    fed(x, orch_plan_add_domain(b, "pdf", NULL, at(2)), "add_domain");
    fed(x, orch_plan_add_domain(b, "page", "pdf", at(3)), "add_domain");
    fed(x, orch_plan_add_source(b, "pdf", "path", ORCH_SOURCE_FILES, "./in/*.pdf", at(4)),
        "add_source");
    call(x, b, "render", ORCH_FN_BUILTIN, "pdf_render", NULL, "dpi", ORCH_ARG_NUMBER, "150",
         "workers", "1", 5);
    call(x, b, "ocr", ORCH_FN_BUILTIN, "tesseract_ocr", NULL, "lang", ORCH_ARG_STRING, "eng",
         "timeout", "120s", 6);
    call(x, b, "keep", ORCH_FN_BUILTIN, "nonempty", NULL, NULL, 0, NULL, "batch", "4", 7);
    call(x, b, "assemble", ORCH_FN_BUILTIN, "concat", NULL, "sep", ORCH_ARG_STRING, "\f",
         "reserve", "parent", 8);
    call(x, b, "lib", ORCH_FN_LIBRARY, "../lib/x.so", "udf_x", "k", ORCH_ARG_NAME, "v",
         "batch_bytes", "1GiB", 9);
    call(x, b, "sh", ORCH_FN_EXEC, "cat -n", NULL, NULL, 0, NULL, "gpus", "0.125", 10);
    stmt(x, b, ORCH_OP_REDUCE, "assemble", "pdf", "text", "page", "good", false, 11);
    stmt(x, b, ORCH_OP_EXPAND, "render", "page", "image", "pdf", "path", false, 12);
    stmt(x, b, ORCH_OP_MAP, "ocr", "page", "text", "page", "image", false, 13);
    stmt(x, b, ORCH_OP_FILTER, "keep", "page", "good", "page", "text", false, 14);
    stmt(x, b, ORCH_OP_BROADCAST, NULL, "page", "doc", "pdf", "path", false, 15);
    stmt(x, b, ORCH_OP_MAP, "lib", "page", "lx", "page", "doc", false, 16);
    stmt(x, b, ORCH_OP_MAP, "sh", "page", "sx", "page", "lx", true, 17);
    fed(x, orch_plan_add_output(b, "pdf", "text", at(18)), "add_output");
    fed(x, orch_plan_add_output(b, "page", "sx", at(19)), "add_output");
    rc = orch_plan_build(b, &x->plan);
    orch_plan_builder_free(b);
    if (rc == 0) {
        size_t len;
        FILE *f = open_memstream(&x->printed, &len);
        assert_non_null(f);
        x->print_rc = orch_plan_print(x->plan, f);
        fclose(f);
    }
    return rc;
}

static void builder_check(void *ctx, int rc, bool failed, long fail_at)
{
    struct builder_ctx *x = ctx;
    if (x->bad_rc != 0)
        fail_msg("builder, %s: %s answered %d (%s)", run_label(fail_at), x->bad_what, x->bad_rc,
                 orch_strerror(x->bad_rc));
    assert_true(rc == 0 ? x->plan != NULL : x->plan == NULL);
    if (fail_at == 0) {
        assert_int_equal(rc, 0);
        assert_int_equal(x->print_rc, 0);
        x->canonical = keep_copy(orch_plan_canonical(x->plan));
        x->ref_printed = keep_copy(x->printed);
    } else if (rc == 0) {
        /* The build survived: only a failure inside orch_plan_print may have happened. */
        assert_false(x->enomem);
        assert_string_equal(orch_plan_canonical(x->plan), x->canonical);
        if (x->print_rc != 0)
            assert_enomem("orch_plan_print", x->print_rc, fail_at, NULL);
        else
            assert_string_equal(x->printed, x->ref_printed);
    } else {
        /* Once an add function said -ENOMEM, the build must say it too. */
        assert_true(failed);
        assert_enomem("builder", rc, fail_at, NULL);
    }
    orch_plan_free(x->plan);
    x->plan = NULL;
    free(x->printed);
    x->printed = NULL;
}

static void test_plan_builder(void **state)
{
    (void)state;
    struct builder_ctx x = {0};
    struct op op = {"plan builder (C API) + orch_plan_print", &x, builder_run, builder_check};
    run_every_failure(&op);
    free(x.canonical);
    free(x.ref_printed);
}

/* ---- scratch directories ---------------------------------------------------------------- */

/* Made in $TMPDIR when it is set; otherwise on tmpfs (/dev/shm) when there is one, rather
 * than in /tmp: the runs are about allocations, not the disk, and each run of the state
 * store syncs its files (on ext4, 5 of the test's 10 s were spent in fsync, measured). */
static int scratch_dir(char *dir, size_t n, const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    if ((tmp == NULL || *tmp == '\0') && access("/dev/shm", W_OK) == 0) {
        snprintf(dir, n, "/dev/shm/orch-%s-XXXXXX", tag);
        if (mkdtemp(dir) != NULL)
            return 0;
    }
    return orch_test_mkdtemp(dir, n, tag);
}

/* The scratch directory of the test running; made by its setup, removed by its teardown
 * (also when the test failed half-way). */
static char scratch[512];

/* ---- the state store -------------------------------------------------------------------- */

/* Two operations: creating a job database (the migrations: most of SQLite's allocations),
 * then everything else on a copy of a job made once, so that the runs of the second do
 * not each pay for the first. */
struct store_ctx {
    char db[600];       /* where each run works */
    char template[600]; /* a new job, for the second operation to start from */
    const char *step;   /* the step that failed */
};

static const char PLAN_TEXT[] = "pipeline p\n\ndomain a\n";
static const char PLAN_HASH[] = "0123456789abcdef0123456789abcdef"
                                "0123456789abcdef0123456789abcdef";

static bool exists(const char *path, const char *suffix)
{
    char p[700];
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return access(p, F_OK) == 0;
}

static void remove_db(const char *db)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s%s", db, suffixes[i]);
        remove(p);
    }
}

/* A byte copy of a closed database (no -wal: closing checkpointed it). No allocation. */
static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        assert_int_equal(write(out, buf, (size_t)n), n);
    assert_int_equal(n, 0);
    close(in);
    assert_int_equal(close(out), 0);
}

/* The job row must read back as written, with the status expected. */
static int job_matches(orch_store *s, enum orch_job_status status)
{
    struct orch_job_info *info;
    int rc = orch_store_job_get(s, &info);
    if (rc < 0)
        return rc;
    assert_string_equal(info->name, "p");
    assert_string_equal(info->plan_text, PLAN_TEXT);
    assert_string_equal(info->plan_hash, PLAN_HASH);
    assert_string_equal(info->pipeline_path, "/jobs/p.orch");
    assert_true(info->orch_version[0] != '\0');
    assert_true(info->created_at_ms > 0);
    assert_int_equal(info->status, status);
    free(info);
    return 0;
}

/* A transaction that fails or is rolled back leaves no transaction open behind the
 * store's back (orch_store.h: commit and rollback always end it). */
static void assert_no_txn(const struct store_ctx *x, orch_store *s)
{
    if (orch_store_in_txn(s) || !sqlite3_get_autocommit(orch_store_db(s)))
        fail_msg("state store, step %s, %s: a transaction is still open (the store "
                 "thinks %s)",
                 x->step, run_label(oom.fail_at), orch_store_in_txn(s) ? "so too" : "not");
}

#define STEP(name, call)                                                                       \
    do {                                                                                       \
        x->step = name;                                                                        \
        if ((rc = (call)) < 0)                                                                 \
            goto fail;                                                                         \
    } while (0)

/* Creates a job database: the schema's migrations, in their transactions. */
static int store_create_run(void *ctx)
{
    struct store_ctx *x = ctx;
    orch_store *s = NULL;
    int rc;
    STEP("create", orch_store_open(x->db, ORCH_STORE_CREATE, &s));
    assert_int_equal(orch_store_schema_version(s), orch_store_schema_latest());
    orch_store_close(s);
    return 0;
fail:
    assert_null(s);
    return rc;
}

/* On a new job: write its row in a transaction, change the status in one that is rolled
 * back, read the row; reopen read-only and read it; reopen read-write, change the status
 * and read it. */
static int store_job_run(void *ctx)
{
    struct store_ctx *x = ctx;
    orch_store *s = NULL;
    int rc;
    STEP("open", orch_store_open(x->db, 0, &s));
    STEP("begin", orch_store_begin(s));
    STEP("job_init", orch_store_job_init(s, "p", PLAN_TEXT, PLAN_HASH, "/jobs/p.orch"));
    STEP("commit", orch_store_commit(s));
    assert_no_txn(x, s);
    STEP("begin (2)", orch_store_begin(s));
    STEP("set_status in a transaction", orch_store_job_set_status(s, ORCH_JOB_RUNNING));
    STEP("rollback", orch_store_rollback(s));
    assert_no_txn(x, s);
    STEP("job_get", job_matches(s, ORCH_JOB_CREATED));
    orch_store_close(s);
    s = NULL;
    STEP("open read-only", orch_store_open(x->db, ORCH_STORE_READONLY, &s));
    STEP("job_get read-only", job_matches(s, ORCH_JOB_CREATED));
    orch_store_close(s);
    s = NULL;
    STEP("open read-write", orch_store_open(x->db, 0, &s));
    STEP("set_status", orch_store_job_set_status(s, ORCH_JOB_FINISHED));
    STEP("job_get read-write", job_matches(s, ORCH_JOB_FINISHED));
    orch_store_close(s);
    return 0;
fail:
    if (s != NULL) {
        if (orch_store_in_txn(s)) {
            /* Keep the step's detail: the rollback's own result is checked here. */
            char keep[1024];
            snprintf(keep, sizeof keep, "%s", orch_error_detail());
            int rb = orch_store_rollback(s);
            assert_true(rb == 0 || rb == -ENOMEM);
            orch_error_set(rc, "%s", keep);
        }
        assert_no_txn(x, s);
        orch_store_close(s);
    }
    return rc;
}

#undef STEP

static void store_check(void *ctx, int rc, bool failed, long fail_at)
{
    struct store_ctx *x = ctx;
    if (rc != 0) {
        char what[200];
        snprintf(what, sizeof what, "state store, step %s", x->step);
        if (!failed)
            fail_msg("%s: failed (%d: %s) with no allocation failing", what, rc,
                     orch_error_detail());
        assert_enomem(what, rc, fail_at, x->db);
        /* orch_store_open(CREATE) removes what it made when it fails. */
        if (strcmp(x->step, "create") == 0 &&
            (exists(x->db, "") || exists(x->db, "-wal") || exists(x->db, "-shm")))
            fail_msg("%s, %s: the failed creation left files behind", what, run_label(fail_at));
    }
    remove_db(x->db);
}

/* The second operation starts from a copy of the template (the copy allocates nothing). */
static int store_job_run_on_copy(void *ctx)
{
    struct store_ctx *x = ctx;
    copy_file(x->template, x->db);
    return store_job_run(ctx);
}

static void test_state_store(void **state)
{
    (void)state;
    struct store_ctx x = {0};
    snprintf(x.db, sizeof x.db, "%s/state.db", scratch);
    snprintf(x.template, sizeof x.template, "%s/template.db", scratch);

    struct op create = {"state store: create a job (migrations)", &x, store_create_run,
                        store_check};
    run_every_failure(&create);

    orch_store *s;
    assert_int_equal(orch_store_open(x.template, ORCH_STORE_CREATE, &s), 0);
    orch_store_close(s);
    assert_false(exists(x.template, "-wal"));
    struct op job = {"state store: job row, transactions, reopen", &x, store_job_run_on_copy,
                     store_check};
    run_every_failure(&job);
    remove_db(x.template);
}

/* ---- the payload store ------------------------------------------------------------------ */

struct payload_ctx {
    char env[600];
    const char *step;
};

static const struct orch_iov VALUES[] = {
    {"alpha", 5},
    {NULL, 0},
    {"a value a little longer than the others", 39},
};
#define NVALUES (sizeof VALUES / sizeof VALUES[0])

static int payload_run(void *ctx)
{
    struct payload_ctx *x = ctx;
    orch_payload *p = NULL;
    orch_payload_rtxn *r = NULL;
    uint64_t ids[NVALUES];
    int rc;
#define STEP(name, call)                                                                       \
    do {                                                                                       \
        x->step = name;                                                                        \
        if ((rc = (call)) < 0)                                                                 \
            goto fail;                                                                         \
    } while (0)
    STEP("open", orch_payload_open(x->env, NULL, &p));
    STEP("put_many", orch_payload_put_many(p, VALUES, NVALUES, ids));
    for (size_t i = 0; i < NVALUES; i++) {
        void *data;
        size_t len;
        assert_int_equal(ids[i], i + 1);
        STEP("get", orch_payload_get(p, ids[i], &data, &len));
        assert_int_equal(len, VALUES[i].len);
        assert_memory_equal(data, VALUES[i].len ? VALUES[i].data : "", len);
        free(data);
    }
    STEP("read_begin", orch_payload_read_begin(p, &r));
    for (size_t i = 0; i < NVALUES; i++) {
        const void *data;
        size_t len;
        STEP("read", orch_payload_read(r, ids[i], &data, &len));
        assert_int_equal(len, VALUES[i].len);
        assert_memory_equal(data, VALUES[i].len ? VALUES[i].data : "", len);
    }
    orch_payload_read_end(r);
    r = NULL;
    struct orch_payload_stat st;
    STEP("stat", orch_payload_stat(p, &st));
    assert_int_equal(st.count, NVALUES);
    assert_int_equal(st.bytes, 5 + 0 + 39);
    assert_int_equal(st.next_id, NVALUES + 1);
    orch_payload_close(p);
    return 0;
#undef STEP
fail:
    orch_payload_read_end(r);
    orch_payload_close(p);
    return rc;
}

static void payload_check(void *ctx, int rc, bool failed, long fail_at)
{
    struct payload_ctx *x = ctx;
    if (rc != 0) {
        char what[200];
        snprintf(what, sizeof what, "payload store, step %s", x->step);
        if (!failed)
            fail_msg("%s: failed (%d: %s) without an allocation failing", what, rc,
                     orch_error_detail());
        assert_enomem(what, rc, fail_at, x->env);
    }
    /* A failed open may have failed before it made the directory. */
    assert_true(access(x->env, F_OK) != 0 || orch_test_rmtree(x->env) == 0);
}

static void test_payload_store(void **state)
{
    (void)state;
    struct payload_ctx x = {0};
    snprintf(x.env, sizeof x.env, "%s/payloads", scratch);
    struct op op = {"payload store: open, put_many, get, read, stat", &x, payload_run,
                    payload_check};
    run_every_failure(&op);
}

/* ---- main ------------------------------------------------------------------------------- */

/* After a failed test (cmocka jumps out of it), start the next one from a clean state. */
static int reset(void **state)
{
    (void)state;
    oom.injecting = oom.tracking = oom.persistent = false;
    recording = false;
    memset(live, 0, sizeof live);
    nlive = 0;
    return 0;
}

static int scratch_setup(void **state)
{
    reset(state);
    return scratch_dir(scratch, sizeof scratch, "oom");
}

static int scratch_teardown(void **state)
{
    reset(state);
    return orch_test_rmtree(scratch);
}

int main(void)
{
    Dl_info info, sqlite_info;
    if (!dladdr((void *)main, &info) || !dladdr((void *)sqlite3_libversion, &sqlite_info)) {
        fprintf(stderr, "test_oom: dladdr cannot place main or SQLite\n");
        return 1;
    }
    exe_base = (uintptr_t)info.dli_fbase;
    sqlite_base = (uintptr_t)sqlite_info.dli_fbase;
    const char *all = getenv("ORCH_OOM_EXHAUSTIVE");
    exhaustive = all != NULL && strcmp(all, "1") == 0;
    void *warm[4];
    backtrace(warm, 4); /* loads the unwinder now, not inside a counted run */
    if (install_sqlite_allocator() != 0) {
        fprintf(stderr, "test_oom: cannot install SQLite's allocator\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_compile_examples, reset),
        cmocka_unit_test_setup(test_compile_text, reset),
        cmocka_unit_test_setup(test_plan_builder, reset),
        cmocka_unit_test_setup_teardown(test_state_store, scratch_setup, scratch_teardown),
        cmocka_unit_test_setup_teardown(test_payload_store, scratch_setup, scratch_teardown),
    };
    /* Every store of the suite enforces the schema's rules (orch_store_config). */
    orch_store_configure(&(struct orch_store_config){.checks = true});
    return cmocka_run_group_tests(tests, NULL, NULL);
}
