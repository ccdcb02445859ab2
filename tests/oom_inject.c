/* oom_inject.c — the failing allocator of the oom tests, and the runs made with it
 * (oom_inject.h says what it covers and how). */
#define _GNU_SOURCE /* dladdr */
#include "oom_inject.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "orch_error.h"
#include "testutil.h"

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
struct oom_state oom;

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

/* ORCH_OOM_BACKTRACE=1: the stack of each run's first failing allocation goes to
 * oom_trace_fd. */
static bool backtraces;
int oom_trace_fd = STDERR_FILENO;

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
    if (backtraces && oom.count == oom.fail_at) {
        void *frames[64];
        dprintf(oom_trace_fd, "allocation %ld fails here:\n", oom.count);
        backtrace_symbols_fd(frames, backtrace(frames, 64), oom_trace_fd);
    }
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
const char *run_label(long fail_at)
{
    static char label[64];
    if (fail_at == 0)
        return "no allocation failing";
    snprintf(label, sizeof label,
             oom.persistent ? "allocations from %ld on failing" : "allocation %ld failing",
             fail_at);
    return label;
}

void track_start(void)
{
    assert_int_equal(nlive, 0);
    live_overflow = false;
    oom.tracking = true;
}

void inject_start(long fail_at, bool persistent)
{
    oom.fail_at = fail_at;
    oom.persistent = persistent;
    oom.count = 0;
    oom.failed = false;
    orch_error_clear();
    oom.injecting = true;
}

/* Returns how many allocations the run made. */
long inject_stop(void)
{
    oom.injecting = false;
    return oom.count;
}

/* Ends tracking: every block of the run must have been freed. */
void track_check(const char *what, long fail_at)
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
void lsan_check(const char *what)
{
#ifdef OOM_LSAN
    if (__lsan_do_recoverable_leak_check())
        fail_msg("%s: LeakSanitizer found a leak (report above)", what);
#else
    (void)what;
#endif
}

bool exhaustive;

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
struct coverage run_every_failure(const struct op *op)
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
char *keep_copy(const char *s)
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
void assert_enomem(const char *what, int rc, long fail_at, const char *detail_prefix)
{
    if (rc != -ENOMEM)
        fail_msg("%s, %s: the result is %d (%s; detail: %s), not -ENOMEM", what,
                 run_label(fail_at), rc, orch_strerror(rc), orch_error_detail());
    if (detail_prefix != NULL &&
        strncmp(orch_error_detail(), detail_prefix, strlen(detail_prefix)) != 0)
        fail_msg("%s, %s: detail \"%s\" does not start with \"%s\"", what, run_label(fail_at),
                 orch_error_detail(), detail_prefix);
}

/* ---- a reference run recorded by hand (test_oom_run.c's driver) ---------------------- */

void oom_record(bool on)
{
    if (on)
        nsites = 0;
    recording = on;
}

long oom_recorded(void)
{
    return nsites;
}

bool oom_recorded_ours(long n)
{
    return n >= 1 && n <= nsites && sites[n - 1] == NULL;
}

/* ---- setup -------------------------------------------------------------------------------- */

int oom_reset(void **state)
{
    (void)state;
    oom.injecting = oom.tracking = oom.persistent = false;
    recording = false;
    memset(live, 0, sizeof live);
    nlive = 0;
    return 0;
}

int oom_init(void *main_fn)
{
    Dl_info info, sqlite_info;
    if (!dladdr(main_fn, &info) || !dladdr((void *)sqlite3_libversion, &sqlite_info)) {
        fprintf(stderr, "oom_init: dladdr cannot place main or SQLite\n");
        return -1;
    }
    exe_base = (uintptr_t)info.dli_fbase;
    sqlite_base = (uintptr_t)sqlite_info.dli_fbase;
    const char *all = getenv("ORCH_OOM_EXHAUSTIVE");
    exhaustive = all != NULL && strcmp(all, "1") == 0;
    const char *bt = getenv("ORCH_OOM_BACKTRACE");
    backtraces = bt != NULL && strcmp(bt, "1") == 0;
    void *warm[4];
    backtrace(warm, 4); /* loads the unwinder now, not inside a counted run */
    if (install_sqlite_allocator() != 0) {
        fprintf(stderr, "oom_init: cannot install SQLite's allocator\n");
        return -1;
    }
    return 0;
}

int oom_scratch_dir(char *dir, size_t n, const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    if ((tmp == NULL || *tmp == '\0') && access("/dev/shm", W_OK) == 0) {
        snprintf(dir, n, "/dev/shm/orch-%s-XXXXXX", tag);
        if (mkdtemp(dir) != NULL)
            return 0;
    }
    return orch_test_mkdtemp(dir, n, tag);
}
