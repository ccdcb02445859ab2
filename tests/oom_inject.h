/* oom_inject.h — allocation-failure injection for the oom tests (test_oom.c, test_oom_run.c),
 * as SQLite tests itself: an operation is run once without failure (the reference, which
 * also counts its allocations), then again with its Nth allocation failing, alone or with
 * every later one; every run must end in success with the reference's result, or in a
 * reported failure with nothing left behind, and never in a crash or a leak.
 *
 * How allocations fail.
 *   - Our code: a program that uses this file is linked with -Wl,--wrap=malloc,...
 *     (tests/meson.build), so every call of malloc, calloc, realloc, free, strdup, strndup
 *     and getcwd made by the static libraries linked into it (and by the test itself) goes
 *     through the __wrap_ functions of oom_inject.c. A function that allocates and is not
 *     in that list escapes the test; to look for one:
 *       grep -nE '\b(m|c|re)alloc|str(n)?dup|asprintf|getline|open_memstream|getcwd|realpath'
 *   - SQLite: through sqlite3_config(SQLITE_CONFIG_MALLOC), set by oom_init() before
 *     sqlite3_initialize(), over the default allocator. SQLite then answers SQLITE_NOMEM,
 *     which storage/ translates to -ENOMEM. SQLite allocates thousands of times per call of
 *     ours (the schema is parsed on every open), so by default run_every_failure() samples
 *     its allocations (oom_inject.c, "where SQLite's allocations come from").
 *     ORCH_OOM_EXHAUSTIVE=1 fails every one (`exhaustive`).
 *   - NOT covered: LMDB's own allocations (liblmdb.so calls malloc through its own PLT,
 *     which --wrap cannot reach, and LMDB has no allocator hook), libevent's (likewise),
 *     and those made inside libc (fopen's FILE; getcwd's buffer, for which the call fails as
 *     a whole); nor those of other processes (a driver's workers).
 *
 * How leaks are found. In every build, the wrappers keep the set of blocks allocated
 * while tracking (with the caller's address, for addr2line) and a run must end with it
 * empty (track_check): that covers our code and SQLite's. Under AddressSanitizer,
 * LeakSanitizer also checks after each operation's runs (lsan_check), which covers what
 * the set cannot see: LMDB's and libc's allocations (an fopen without fclose).
 *
 * Every function fails the running cmocka test (fail_msg, assert_*) on what it finds.
 */
#ifndef ORCH_OOM_INJECT_H
#define ORCH_OOM_INJECT_H

#include <stdbool.h>
#include <stddef.h>

/* While `injecting`, allocations are counted and the one numbered fail_at (from 1) fails.
 * While `tracking`, every block handed out is kept until it is freed. */
struct oom_state {
    bool injecting;
    bool tracking;
    long fail_at;    /* 0: none fails */
    bool persistent; /* every allocation from fail_at on fails, not that one alone */
    long count;      /* allocations seen since inject_start() */
    bool failed;     /* the fail_at-th allocation came, and failed */
};
extern struct oom_state oom;

/* ORCH_OOM_EXHAUSTIVE=1: every allocation is failed, both ways (read by oom_init). */
extern bool exhaustive;

/* Call first in main(), before anything touches SQLite: places this executable and SQLite
 * (for the sites of SQLite's allocations), reads ORCH_OOM_EXHAUSTIVE and
 * ORCH_OOM_BACKTRACE (=1: the stack of each run's failing allocation goes to stderr, to
 * find where a failure came from), installs SQLite's allocator. 0, or -1 after saying why
 * on stderr. main_fn: main. */
int oom_init(void *main_fn);

/* Where ORCH_OOM_BACKTRACE's stacks go: stderr, unless a test points it elsewhere (while
 * stderr is the code under test's). */
extern int oom_trace_fd;

/* A cmocka setup: after a failed test (cmocka jumps out of it), the next one starts from
 * a clean state. */
int oom_reset(void **state);

/* "allocation 12 failing", "allocations from 12 on failing", or "no allocation failing"
 * (for the current oom.persistent). Static storage: valid until the next call. */
const char *run_label(long fail_at);

/* One run, by hand: track_start(); inject_start(n, persistent); ...; inject_stop();
 * check; track_check(). inject_stop returns how many allocations the run made. */
void track_start(void);
void inject_start(long fail_at, bool persistent);
long inject_stop(void);
/* Ends tracking: every block allocated since track_start must have been freed. */
void track_check(const char *what, long fail_at);
/* After all runs of an operation: what the live set cannot see (LMDB, libc). */
void lsan_check(const char *what);

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

/* Runs a deterministic op without failure (the reference, which check() records), then
 * with the Nth allocation failing for each selected N up to the reference's count, and on
 * until a run sees no failure; prints the coverage. */
struct coverage run_every_failure(const struct op *op);

/* For an op that is not deterministic (run by hand): while recording, the site of each
 * allocation is kept; oom_recorded() says how many were, oom_recorded_ours(n) whether the
 * nth (from 1) was our code's, not SQLite's. oom_record(true) forgets the last record. */
void oom_record(bool on);
long oom_recorded(void);
bool oom_recorded_ours(long n);

/* A copy of s that outlives the runs (a reference result): not tracked as a leak. */
char *keep_copy(const char *s);

/* A failure's outcome: -ENOMEM, with a detail starting with detail_prefix when not NULL. */
void assert_enomem(const char *what, int rc, long fail_at, const char *detail_prefix);

/* Makes a scratch directory "orch-TAG-XXXXXX" into dir (n bytes), in $TMPDIR when it is
 * set, else on tmpfs (/dev/shm) when there is one: the runs are about allocations, not
 * the disk, and each run of the state store syncs its files. 0 or -1. */
int oom_scratch_dir(char *dir, size_t n, const char *tag);

#endif
