/* test_payload.c — unit tests of the payload store (storage/orch_payload.h): round trips,
 * ids that are never reused, map growth and its limit, several writer processes, and
 * processes killed while writing or reading. */
#define _GNU_SOURCE /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lmdb.h>

#include "orch_error.h"
#include "testutil.h"
#include "orch_payload.h"

/* ---- fixture: a scratch directory per test --------------------------------------------- */

struct fx {
    char dir[512];
    char env[600]; /* dir/payloads: the environment, created by open */
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (orch_test_mkdtemp(f->dir, sizeof f->dir, "payload") < 0) {
        free(f);
        return -1;
    }
    snprintf(f->env, sizeof f->env, "%s/payloads", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    int rc = orch_test_rmtree(f->dir);
    free(f);
    return rc;
}

/* ---- helpers --------------------------------------------------------------------------- */

static orch_payload *open_env(struct fx *f, const struct orch_payload_opts *o)
{
    orch_payload *p = NULL;
    int rc = orch_payload_open(f->env, o, &p);
    if (rc != 0)
        fail_msg("open: %s", orch_error_detail());
    return p;
}

static void assert_detail_has(const char *needle)
{
    if (strstr(orch_error_detail(), needle) == NULL)
        fail_msg("detail \"%s\" lacks \"%s\"", orch_error_detail(), needle);
}

/* Self-checking payloads: 16 bytes of header (seed, length) then bytes generated from the
 * seed. Any payload read back can be verified without knowing what was written. */
static uint64_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void fill_body(unsigned char *b, size_t n, uint64_t seed)
{
    uint64_t x = seed | 1;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t r = next_rand(&x);
        memcpy(b + i, &r, n - i < 8 ? n - i : 8);
    }
}

static unsigned char *make_payload(uint64_t seed, size_t len)
{
    assert_true(len >= 16);
    unsigned char *b = malloc(len);
    assert_non_null(b);
    uint64_t n = len;
    memcpy(b, &seed, 8);
    memcpy(b + 8, &n, 8);
    fill_body(b + 16, len - 16, seed);
    return b;
}

/* 0 when data is an intact payload of make_payload; *seed receives its seed. */
static int check_payload(const void *data, size_t len, uint64_t *seed)
{
    uint64_t s, n;
    if (len < 16)
        return -1;
    memcpy(&s, data, 8);
    memcpy(&n, (const char *)data + 8, 8);
    if (n != len)
        return -1;
    unsigned char *want = malloc(len - 16 + 1);
    fill_body(want, len - 16, s);
    int rc = memcmp(want, (const char *)data + 16, len - 16) == 0 ? 0 : -1;
    free(want);
    if (seed != NULL)
        *seed = s;
    return rc;
}

static void assert_payload_ok(orch_payload *p, uint64_t id, uint64_t seed)
{
    void *data;
    size_t len;
    uint64_t got;
    int rc = orch_payload_get(p, id, &data, &len);
    if (rc != 0)
        fail_msg("payload %" PRIu64 ": %s", id, orch_error_detail());
    if (check_payload(data, len, &got) != 0 || got != seed)
        fail_msg("payload %" PRIu64 " is damaged", id);
    free(data);
}

/* Forks a child that dies with the test. */
static pid_t fork_child(void)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(9);
    }
    return pid;
}

static void kill_and_reap(pid_t pid)
{
    int status;
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

static void reap_ok(pid_t pid)
{
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("child %d failed (status %#x)", (int)pid, status);
}

/* ---- basics ---------------------------------------------------------------------------- */

static void test_put_get_roundtrip(void **state)
{
    struct fx *f = *state;
    orch_payload *p = open_env(f, NULL);
    uint64_t id;
    assert_int_equal(orch_payload_put(p, "hello", 5, &id), 0);
    assert_int_equal(id, 1);

    struct orch_iov vals[3] = {{"one", 3}, {"three", 5}, {"two", 3}};
    uint64_t ids[3];
    assert_int_equal(orch_payload_put_many(p, vals, 3, ids), 0);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 4);
    assert_int_equal(orch_payload_put_many(p, vals, 0, ids), 0); /* nothing */

    void *data;
    size_t len;
    assert_int_equal(orch_payload_get(p, 3, &data, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(data, "three", 5);
    free(data);

    orch_payload_rtxn *r, *r2;
    const void *ptr;
    assert_int_equal(orch_payload_read_begin(p, &r), 0);
    assert_int_equal(orch_payload_read_begin(p, &r2), 0); /* several at once */
    assert_int_equal(orch_payload_read(r, 1, &ptr, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(ptr, "hello", 5);
    assert_int_equal(orch_payload_read(r2, 4, &ptr, &len), 0);
    assert_memory_equal(ptr, "two", 3);
    orch_payload_read_end(r2);
    orch_payload_read_end(r);

    struct orch_payload_stat st;
    assert_int_equal(orch_payload_stat(p, &st), 0);
    assert_int_equal(st.count, 4);
    assert_int_equal(st.bytes, 5 + 3 + 5 + 3);
    assert_int_equal(st.next_id, 5);
    assert_int_equal(st.map_size, ORCH_PAYLOAD_DEFAULT_MAP_SIZE);
    assert_true(st.used_size > 0 && st.used_size < st.map_size);
    orch_payload_close(p);

    /* Everything is there after a reopen. */
    p = open_env(f, NULL);
    assert_int_equal(orch_payload_get(p, 1, &data, &len), 0);
    assert_memory_equal(data, "hello", 5);
    free(data);
    orch_payload_close(p);
}

static void test_empty_and_missing(void **state)
{
    struct fx *f = *state;
    orch_payload *p = open_env(f, NULL);
    uint64_t id;
    assert_int_equal(orch_payload_put(p, NULL, 0, &id), 0);

    void *data = NULL;
    size_t len = 99;
    assert_int_equal(orch_payload_get(p, id, &data, &len), 0);
    assert_non_null(data); /* empty, but present */
    assert_int_equal(len, 0);
    free(data);

    orch_payload_rtxn *r;
    const void *ptr;
    assert_int_equal(orch_payload_read_begin(p, &r), 0);
    assert_int_equal(orch_payload_read(r, id, &ptr, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(orch_payload_read(r, id + 1, &ptr, &len), ORCH_ENOTFOUND);
    orch_payload_read_end(r);

    assert_int_equal(orch_payload_get(p, id + 1, &data, &len), ORCH_ENOTFOUND);
    assert_detail_has(f->env);
    assert_detail_has("no payload 2");
    assert_int_equal(orch_payload_get(p, 0, &data, &len), ORCH_ENOTFOUND);
    orch_payload_close(p);
}

static void test_ids_never_reused(void **state)
{
    struct fx *f = *state;
    orch_payload *p = open_env(f, NULL);
    uint64_t id;
    for (int i = 1; i <= 3; i++) {
        assert_int_equal(orch_payload_put(p, "abcd", 4, &id), 0);
        assert_int_equal(id, (uint64_t)i);
    }
    uint64_t del[] = {3, 99, 3};
    size_t n;
    assert_int_equal(orch_payload_delete_many(p, del, 3, &n), 0);
    assert_int_equal(n, 1); /* 99 was never stored; 3 only once */
    assert_int_equal(orch_payload_delete_many(p, del, 1, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(orch_payload_put(p, "e", 1, &id), 0);
    assert_int_equal(id, 4); /* the largest id was deleted, and still not reused */

    struct orch_payload_stat st;
    assert_int_equal(orch_payload_stat(p, &st), 0);
    assert_int_equal(st.count, 3);
    assert_int_equal(st.bytes, 4 + 4 + 1);
    orch_payload_close(p);

    p = open_env(f, NULL);
    assert_int_equal(orch_payload_put(p, "f", 1, &id), 0);
    assert_int_equal(id, 5);
    void *data;
    size_t len;
    assert_int_equal(orch_payload_get(p, 3, &data, &len), ORCH_ENOTFOUND);
    assert_int_equal(orch_payload_delete_many(p, (uint64_t[]){4, 5}, 2, NULL), 0);
    assert_int_equal(orch_payload_delete_many(p, NULL, 0, &n), 0);
    assert_int_equal(orch_payload_stat(p, &st), 0);
    assert_int_equal(st.count, 2);
    assert_int_equal(st.bytes, 8);
    assert_int_equal(st.next_id, 6);
    orch_payload_close(p);
}

static void test_open_refusals(void **state)
{
    struct fx *f = *state;
    orch_payload *p = (orch_payload *)1;
    struct orch_payload_opts o = {.map_size = 2 << 20, .max_map_size = 1 << 20};
    assert_int_equal(orch_payload_open(f->env, &o, &p), -EINVAL);
    assert_null(p);

    char deep[700];
    snprintf(deep, sizeof deep, "%s/missing/payloads", f->dir);
    assert_int_equal(orch_payload_open(deep, NULL, &p), -ENOENT);
    assert_detail_has(deep);

    /* Not an LMDB environment. */
    char data[700];
    assert_int_equal(mkdir(f->env, 0755), 0);
    snprintf(data, sizeof data, "%s/data.mdb", f->env);
    unsigned char junk[3 * 4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 31 + 7);
    assert_int_equal(orch_test_write_file(data, junk, sizeof junk), 0);
    assert_int_equal(orch_payload_open(f->env, NULL, &p), ORCH_ECORRUPT);
    assert_null(p);
    assert_detail_has(f->env);
}

static void test_truncated_data_file(void **state)
{
    struct fx *f = *state;
    orch_payload *p = open_env(f, NULL);
    unsigned char *b = make_payload(7, 1 << 20);
    uint64_t id;
    for (int i = 0; i < 4; i++)
        assert_int_equal(orch_payload_put(p, b, 1 << 20, &id), 0);
    free(b);
    orch_payload_close(p);

    char data[700];
    struct stat st;
    snprintf(data, sizeof data, "%s/data.mdb", f->env);
    assert_int_equal(stat(data, &st), 0);
    /* A page short, a page of the last value's: refused (it is not free). */
    assert_int_equal(truncate(data, st.st_size - 4096), 0);
    assert_int_equal(orch_payload_open(f->env, NULL, &p), ORCH_ECORRUPT);
    assert_null(p);
    assert_int_equal(truncate(data, st.st_size / 2), 0);
    /* Refused at open, instead of a SIGBUS on the first read past the end. */
    assert_int_equal(orch_payload_open(f->env, NULL, &p), ORCH_ECORRUPT);
    assert_null(p);
    assert_detail_has("truncated");
}

/* Whether LMDB's freelist holds page pg. */
static bool page_free(MDB_env *env, size_t pg)
{
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val k, v;
    bool found = false;
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_cursor_open(txn, 0, &c), 0);
    while (!found && mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0) {
        const size_t *ids = v.mv_data;
        for (size_t i = 1; i <= ids[0]; i++)
            found |= ids[i] == pg;
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    return found;
}

/* A file that ends before pages that are free opens, and its payloads read back: a write
 * transaction that takes a page past the file's end and frees it again before it commits
 * leaves such a file (LMDB counts the page, and never writes it). Made here by cutting
 * the free pages of a deleted value off the end (mutation: check_data_file without
 * pages_free refuses it as truncated). */
static void test_free_pages_past_end(void **state)
{
    struct fx *f = *state;
    orch_payload *p = open_env(f, NULL);
    uint64_t id, big;
    unsigned char *b = make_payload(3, 1 << 16);
    assert_int_equal(orch_payload_put(p, "kept", 4, &id), 0);
    for (int i = 0; i < 8; i++) { /* each frees the leaf it copies: pages to reuse */
        uint64_t small;
        assert_int_equal(orch_payload_put(p, "x", 1, &small), 0);
    }
    assert_int_equal(orch_payload_put(p, b, 1 << 16, &big), 0);
    assert_int_equal(orch_payload_delete_many(p, &big, 1, NULL), 0);
    free(b);
    orch_payload_close(p);

    MDB_env *env;
    MDB_envinfo info;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_mapsize(env, (size_t)64 << 20), 0);
    assert_int_equal(mdb_env_open(env, f->env, MDB_RDONLY, 0644), 0);
    mdb_env_info(env, &info);
    size_t first = info.me_last_pgno + 1; /* the first of the free pages at the end */
    while (first > 2 && page_free(env, first - 1))
        first--;
    mdb_env_close(env);
    assert_true(first <= info.me_last_pgno); /* at least one: the test means something */

    char data[700];
    snprintf(data, sizeof data, "%s/data.mdb", f->env);
    assert_int_equal(truncate(data, (off_t)first * 4096), 0);
    assert_int_equal(orch_payload_open(f->env, NULL, &p), 0);
    void *got;
    size_t len;
    assert_int_equal(orch_payload_get(p, id, &got, &len), 0);
    assert_int_equal(len, 4);
    assert_memory_equal(got, "kept", 4);
    free(got);
    orch_payload_close(p);
}

/* ---- the limit per value --------------------------------------------------------------- */

/* A value over the limit is refused before anything is written, naming its size and the
 * limit; a value of exactly the limit is stored. The test knob sets the limit. */
static void test_value_limit(void **state)
{
    struct fx *f = *state;
    struct orch_payload_opts o = {.max_value = 100};
    orch_payload *p = open_env(f, &o);
    assert_int_equal(orch_payload_max_value(p), 100);
    unsigned char b[101];
    memset(b, 'x', sizeof b);
    uint64_t ids[3];
    assert_int_equal(orch_payload_put(p, b, 100, ids), 0);
    struct orch_iov v[3] = {{b, 1}, {b, 101}, {b, 2}};
    assert_int_equal(orch_payload_put_many(p, v, 3, ids), -EFBIG);
    assert_detail_has(f->env);
    assert_detail_has("value 2 of 3 is 101 bytes, over the payload store's limit of 100 bytes");
    struct orch_payload_stat st;
    assert_int_equal(orch_payload_stat(p, &st), 0);
    assert_int_equal(st.count, 1); /* nothing of the refused batch */
    assert_int_equal(st.next_id, 2);
    orch_payload_close(p);

    /* The default is LMDB's own limit; more than it is taken as the default. */
    p = open_env(f, NULL);
    assert_int_equal(orch_payload_max_value(p), ORCH_PAYLOAD_MAX_VALUE);
    orch_payload_close(p);
    o.max_value = ORCH_PAYLOAD_MAX_VALUE + (size_t)1;
    p = open_env(f, &o);
    assert_int_equal(orch_payload_max_value(p), ORCH_PAYLOAD_MAX_VALUE);
    /* A value one byte over the real limit is refused without being read: the length is
     * checked first, so a small buffer stands for it. */
    struct orch_iov huge = {b, ORCH_PAYLOAD_MAX_VALUE + (size_t)1};
    assert_int_equal(orch_payload_put_many(p, &huge, 1, ids), -EFBIG);
    assert_detail_has("is 4294967296 bytes, over the payload store's limit of 4294967295");
    orch_payload_close(p);

    /* The test limit of the job's options. */
    orch_payload_set_job_limits(&(struct orch_payload_limits){.max_value = 4096});
    orch_payload_job_opts(&o);
    assert_int_equal(o.max_value, 4096);
    orch_payload_set_job_limits(&(struct orch_payload_limits){
        .max_value = (size_t)99999999999}); /* over the real limit: default */
    orch_payload_job_opts(&o);
    assert_int_equal(o.max_value, 0);
    orch_payload_set_job_limits(&(struct orch_payload_limits){0});
    orch_payload_job_opts(&o);
    assert_int_equal(o.max_value, 0);
}

/* ORCH_PAYLOAD_MAX_VALUE is LMDB's real limit: LMDB itself refuses one byte more with
 * MDB_BAD_VALSIZE, before it reads the value (so no 4 GiB buffer is needed). */
static void test_value_limit_is_lmdbs(void **state)
{
    struct fx *f = *state;
    assert_int_equal(mkdir(f->env, 0755), 0);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_open(env, f->env, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    char small[8] = "x";
    uint64_t id = 1;
    MDB_val k = {sizeof id, &id}, v = {ORCH_PAYLOAD_MAX_VALUE + (size_t)1, small};
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), MDB_BAD_VALSIZE);
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

/* ---- read-only opens ------------------------------------------------------------------- */

static void test_readonly(void **state)
{
    struct fx *f = *state;
    struct orch_payload_opts ro = {.readonly = true};
    orch_payload *p = (orch_payload *)1;
    /* Nothing is created: not the directory, not the files. */
    assert_int_equal(orch_payload_open(f->env, &ro, &p), -ENOENT);
    assert_null(p);
    assert_int_equal(access(f->env, F_OK), -1);

    p = open_env(f, NULL);
    uint64_t id;
    assert_int_equal(orch_payload_put(p, "kept", 4, &id), 0);
    orch_payload_close(p);

    p = open_env(f, &ro);
    void *data;
    size_t len;
    assert_int_equal(orch_payload_get(p, id, &data, &len), 0);
    assert_memory_equal(data, "kept", 4);
    free(data);
    uint64_t other;
    assert_int_equal(orch_payload_put(p, "no", 2, &other), -EACCES);
    orch_payload_close(p);
}

/* A store whose lock file this process cannot write (another user's, a copy made
 * read-only): refused read-only, unless the caller vouches that nobody writes it; then it
 * is read without LMDB's lock table. Run as nobody when the test runs as root (root writes
 * whatever the mode says). */
static void test_readonly_lockless(void **state)
{
    struct fx *f = *state;
    orch_payload *p = open_env(f, NULL);
    uint64_t id;
    assert_int_equal(orch_payload_put(p, "theirs", 6, &id), 0);
    orch_payload_close(p);
    char path[700];
    const char *files[] = {"data.mdb", "lock.mdb"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", f->env, files[i]);
        assert_int_equal(chmod(path, 0444), 0);
    }
    assert_int_equal(chmod(f->env, 0555), 0);
    assert_int_equal(chmod(f->dir, 0755), 0);

    pid_t pid = fork_child();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(2);
        struct orch_payload_opts ro = {.readonly = true};
        orch_payload *q = NULL;
        if (orch_payload_open(f->env, &ro, &q) != -EACCES)
            _exit(3);
        ro.lockless_ok = true;
        if (orch_payload_open(f->env, &ro, &q) != 0)
            _exit(4);
        void *data = NULL;
        size_t len = 0;
        int rc = orch_payload_get(q, id, &data, &len);
        bool same = rc == 0 && len == 6 && memcmp(data, "theirs", 6) == 0;
        free(data);
        orch_payload_rtxn *r;
        const void *ptr;
        if (!same || orch_payload_read_begin(q, &r) != 0 ||
            orch_payload_read(r, id, &ptr, &len) != 0 || len != 6)
            _exit(5);
        orch_payload_read_end(r);
        orch_payload_close(q);
        _exit(0);
    }
    reap_ok(pid);
    assert_int_equal(chmod(f->env, 0755), 0); /* for the teardown, when not root */
}

/* ---- map growth ------------------------------------------------------------------------ */

static void test_map_growth(void **state)
{
    struct fx *f = *state;
    struct orch_payload_opts o = {.map_size = 256 << 10, .nosync = true};
    orch_payload *p = open_env(f, &o);
    enum { N = 120, LEN = 40000 };
    uint64_t ids[N];
    for (int i = 0; i < N; i += 4) {
        unsigned char *b[4];
        struct orch_iov v[4];
        for (int j = 0; j < 4; j++) {
            b[j] = make_payload((uint64_t)(i + j), LEN + (size_t)j);
            v[j] = (struct orch_iov){b[j], LEN + (size_t)j};
        }
        assert_int_equal(orch_payload_put_many(p, v, 4, ids + i), 0);
        for (int j = 0; j < 4; j++)
            free(b[j]);
    }
    assert_int_equal(orch_payload_sync(p), 0);
    struct orch_payload_stat st;
    assert_int_equal(orch_payload_stat(p, &st), 0);
    assert_true(st.map_size >= (size_t)N * LEN);
    assert_int_equal(st.count, N);
    for (int i = 0; i < N; i++)
        assert_payload_ok(p, ids[i], (uint64_t)i);
    orch_payload_close(p);

    /* The grown size is kept by the environment. */
    p = open_env(f, &o);
    struct orch_payload_stat st2;
    assert_int_equal(orch_payload_stat(p, &st2), 0);
    assert_int_equal(st2.map_size, st.map_size);
    orch_payload_close(p);
}

static void test_large_payload(void **state)
{
    struct fx *f = *state;
    struct orch_payload_opts o = {.map_size = 1 << 20};
    orch_payload *p = open_env(f, &o);
    size_t len = ((size_t)65 << 20) + 123;
    unsigned char *b = make_payload(65, len);
    uint64_t id;
    assert_int_equal(orch_payload_put(p, b, len, &id), 0);
    free(b);
    assert_payload_ok(p, id, 65);

    orch_payload_rtxn *r;
    const void *ptr;
    size_t n;
    assert_int_equal(orch_payload_read_begin(p, &r), 0);
    assert_int_equal(orch_payload_read(r, id, &ptr, &n), 0);
    assert_int_equal(n, len);
    assert_int_equal(check_payload(ptr, n, NULL), 0);
    orch_payload_read_end(r);
    orch_payload_close(p);
}

/* A map that may not grow: -ENOSPC, and the store stays readable and usable. */
static void test_cannot_grow(void **state)
{
    struct fx *f = *state;
    struct orch_payload_opts o = {.map_size = 1 << 20, .max_map_size = 1 << 20};
    orch_payload *p = open_env(f, &o);
    enum { LEN = 30000 };
    uint64_t ids[64];
    int n = 0, rc = 0;
    while (rc == 0) {
        assert_true(n < 64);
        unsigned char *b = make_payload((uint64_t)n, LEN);
        rc = orch_payload_put(p, b, LEN, &ids[n]);
        free(b);
        if (rc == 0)
            n++;
    }
    assert_int_equal(rc, -ENOSPC);
    assert_detail_has(f->env);
    assert_detail_has("cannot grow");
    assert_true(n > 5);

    /* The failed put left nothing behind, and everything before it is intact. */
    struct orch_payload_stat st;
    assert_int_equal(orch_payload_stat(p, &st), 0);
    assert_int_equal(st.count, n);
    assert_int_equal(st.next_id, ids[n - 1] + 1);
    assert_int_equal(st.map_size, 1 << 20);
    for (int i = 0; i < n; i++)
        assert_payload_ok(p, ids[i], (uint64_t)i);

    /* Deleting still works. (Whether the freed pages take a new put at once is up to
     * LMDB: pages freed by the last commit are reused only after a later one.) */
    size_t ndel;
    assert_int_equal(orch_payload_delete_many(p, ids, 4, &ndel), 0);
    assert_int_equal(ndel, 4);
    orch_payload_close(p);

    /* Raising the limit is the way out. */
    o.max_map_size = 4 << 20;
    p = open_env(f, &o);
    unsigned char *b = make_payload(1000, LEN);
    uint64_t id;
    assert_int_equal(orch_payload_put(p, b, LEN, &id), 0);
    free(b);
    assert_int_equal(id, ids[n - 1] + 1);
    assert_payload_ok(p, id, 1000);
    for (int i = 4; i < n; i++)
        assert_payload_ok(p, ids[i], (uint64_t)i);
    orch_payload_close(p);
}

/* The map cannot move under a reader of this process: a put that must grow says so. */
static void test_growth_waits_for_readers(void **state)
{
    struct fx *f = *state;
    struct orch_payload_opts o = {.map_size = 256 << 10};
    orch_payload *p = open_env(f, &o);
    uint64_t id;
    assert_int_equal(orch_payload_put(p, "x", 1, &id), 0);
    orch_payload_rtxn *r;
    const void *ptr;
    size_t len;
    assert_int_equal(orch_payload_read_begin(p, &r), 0);
    assert_int_equal(orch_payload_read(r, id, &ptr, &len), 0);

    size_t big = 1 << 20;
    unsigned char *b = make_payload(3, big);
    assert_int_equal(orch_payload_put(p, b, big, &id), -EBUSY);
    assert_detail_has("read transaction");
    assert_memory_equal(ptr, "x", 1); /* still mapped where it was */
    orch_payload_read_end(r);
    assert_int_equal(orch_payload_put(p, b, big, &id), 0);
    free(b);
    assert_payload_ok(p, id, 3);
    orch_payload_close(p);
}

/* Another process grows the map past this one's: this one follows (MDB_MAP_RESIZED). */
static void test_follow_growth_of_other_process(void **state)
{
    struct fx *f = *state;
    struct orch_payload_opts o = {.map_size = 256 << 10};
    orch_payload *p = open_env(f, &o);
    orch_payload_close(p);

    int go[2], ready[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork_child();
    if (pid == 0) {
        /* The child opens with the small map, then waits while the parent grows it. */
        char c = 0;
        uint64_t id, last; /* last: the parent's last id */
        void *data;
        size_t len;
        if (orch_payload_open(f->env, &o, &p) != 0)
            _exit(20);
        if (write(ready[1], &c, 1) != 1 || read(go[0], &last, sizeof last) != sizeof last)
            _exit(21);
        if (orch_payload_get(p, last, &data, &len) != 0 || check_payload(data, len, NULL))
            _exit(22);
        free(data);
        if (orch_payload_put(p, "child", 5, &id) != 0 || id != last + 1)
            _exit(23);
        orch_payload_close(p);
        _exit(0);
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    p = open_env(f, &o);
    uint64_t id = 0;
    for (int i = 0; i < 8; i++) {
        unsigned char *b = make_payload((uint64_t)i, 512 << 10);
        assert_int_equal(orch_payload_put(p, b, 512 << 10, &id), 0);
        free(b);
    }
    struct orch_payload_stat st;
    assert_int_equal(orch_payload_stat(p, &st), 0);
    assert_true(st.map_size >= (size_t)4 << 20);
    orch_payload_close(p);
    assert_int_equal(write(go[1], &id, sizeof id), sizeof id);
    reap_ok(pid);

    p = open_env(f, NULL);
    void *data;
    size_t len;
    assert_int_equal(orch_payload_get(p, id + 1, &data, &len), 0);
    assert_memory_equal(data, "child", 5);
    free(data);
    orch_payload_close(p);
    close(go[0]), close(go[1]), close(ready[0]), close(ready[1]);
}

/* ---- processes ------------------------------------------------------------------------- */

struct report {
    uint64_t id;
    uint64_t seed;
};

/* Writes batches of self-checking payloads, reporting (id, seed) of each after its batch
 * committed. nbatches < 0: forever. */
static void writer_child(const char *env, const struct orch_payload_opts *o, int go_fd,
                         int out_fd, uint32_t writer, int nbatches)
{
    orch_payload *p;
    char c;
    if (orch_payload_open(env, o, &p) != 0)
        _exit(30);
    if (go_fd >= 0 && read(go_fd, &c, 1) != 1)
        _exit(31);
    enum { BATCH = 5 };
    for (uint32_t b = 0; nbatches < 0 || b < (uint32_t)nbatches; b++) {
        unsigned char *bufs[BATCH];
        struct orch_iov v[BATCH];
        uint64_t ids[BATCH];
        struct report rep[BATCH];
        for (int j = 0; j < BATCH; j++) {
            uint64_t seed = (uint64_t)writer << 32 | (b * BATCH + (uint32_t)j);
            /* mostly small, every 7th spanning several overflow pages */
            size_t len = 16 + (size_t)(seed * 2654435761u % 3000) +
                         ((b * BATCH + (uint32_t)j) % 7 == 0 ? 70000 : 0);
            bufs[j] = make_payload(seed, len);
            v[j] = (struct orch_iov){bufs[j], len};
            rep[j].seed = seed;
        }
        if (orch_payload_put_many(p, v, BATCH, ids) != 0)
            _exit(32);
        for (int j = 0; j < BATCH; j++) {
            free(bufs[j]);
            rep[j].id = ids[j];
        }
        if (write(out_fd, rep, sizeof rep) != (ssize_t)sizeof rep)
            _exit(33);
    }
    orch_payload_close(p);
    _exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Two processes writing at once: all ids distinct, each writer's increasing, all data
 * readable and intact. */
static void test_two_writer_processes(void **state)
{
    struct fx *f = *state;
    struct orch_payload_opts o = {.map_size = 512 << 10, .nosync = true};
    orch_payload *p = open_env(f, &o); /* create it, then leave it to the children */
    orch_payload_close(p);

    enum { NBATCH = 40, PER = NBATCH * 5 };
    int go[2], out[2][2];
    pid_t pid[2];
    assert_int_equal(pipe(go), 0);
    for (int w = 0; w < 2; w++) {
        assert_int_equal(pipe(out[w]), 0);
        pid[w] = fork_child();
        if (pid[w] == 0) {
            close(go[1]);
            close(out[w][0]);
            writer_child(f->env, &o, go[0], out[w][1], (uint32_t)w + 1, NBATCH);
        }
        close(out[w][1]);
    }
    close(go[0]);
    assert_int_equal(write(go[1], "gg", 2), 2); /* both start together */
    close(go[1]);

    struct report *all = calloc(2 * PER, sizeof *all);
    uint64_t *ids = calloc(2 * PER, sizeof *ids);
    size_t n = 0;
    for (int w = 0; w < 2; w++) {
        /* Reading one pipe to its end cannot deadlock: the other writer only blocks on
         * its own pipe, which is drained next. */
        uint64_t prev = 0;
        struct report r;
        while (read(out[w][0], &r, sizeof r) == (ssize_t)sizeof r) {
            assert_true(n < 2 * PER);
            assert_true(r.id > prev);
            prev = r.id;
            all[n] = r;
            ids[n++] = r.id;
        }
        close(out[w][0]);
        reap_ok(pid[w]);
    }
    assert_int_equal(n, 2 * PER);
    qsort(ids, n, sizeof *ids, cmp_u64);
    for (size_t i = 1; i < n; i++)
        assert_true(ids[i] != ids[i - 1]);

    p = open_env(f, &o);
    for (size_t i = 0; i < n; i++)
        assert_payload_ok(p, all[i].id, all[i].seed);
    struct orch_payload_stat st;
    assert_int_equal(orch_payload_stat(p, &st), 0);
    assert_int_equal(st.count, n);
    assert_int_equal(st.next_id, n + 1);
    orch_payload_close(p);
    free(all);
    free(ids);
}

/* A writer killed at an arbitrary point of its loop (while growing the map, too): every
 * committed payload is readable and intact, and nothing half-written is visible. */
static void test_kill_mid_write_loop(void **state)
{
    struct fx *f = *state;
    struct orch_payload_opts o = {.map_size = 128 << 10};
    int out[2];
    assert_int_equal(pipe(out), 0);
    pid_t pid = fork_child();
    if (pid == 0) {
        close(out[0]);
        writer_child(f->env, &o, -1, out[1], 7, -1);
    }
    close(out[1]);
    struct report *rep = calloc(100000, sizeof *rep);
    size_t n = 0;
    while (n < 300) {
        assert_int_equal(read(out[0], &rep[n], sizeof *rep), sizeof *rep);
        n++;
    }
    kill_and_reap(pid);
    while (n < 100000 && read(out[0], &rep[n], sizeof *rep) == (ssize_t)sizeof *rep)
        n++; /* reported before the kill */
    close(out[0]);

    orch_payload *p = open_env(f, &o);
    for (size_t i = 0; i < n; i++)
        assert_payload_ok(p, rep[i].id, rep[i].seed);
    /* Every stored payload is whole (at most one batch committed without its report). */
    struct orch_payload_stat st;
    assert_int_equal(orch_payload_stat(p, &st), 0);
    assert_true(st.count == n || st.count == n + 5);
    orch_payload_rtxn *r;
    assert_int_equal(orch_payload_read_begin(p, &r), 0);
    for (uint64_t id = 1; id < st.next_id; id++) {
        const void *ptr;
        size_t len;
        assert_int_equal(orch_payload_read(r, id, &ptr, &len), 0);
        assert_int_equal(check_payload(ptr, len, NULL), 0);
    }
    orch_payload_read_end(r);
    /* And it takes new writes. */
    uint64_t id;
    assert_int_equal(orch_payload_put(p, "after", 5, &id), 0);
    assert_int_equal(id, st.next_id);
    orch_payload_close(p);
    free(rep);
}

/* A reader killed while holding its read transaction leaves a stale slot, which never
 * blocks writers and is cleared by the next open of another process.
 *
 * The slot must be looked at while some process keeps the environment open: LMDB resets
 * the whole reader table when a process opens an environment nobody else has open. So
 * the parent holds a handle across the kill, and a second child (forked before that
 * handle was opened: see the process rules) does the checking open. */
static void test_kill_reader(void **state)
{
    struct fx *f = *state;
    orch_payload *p = open_env(f, NULL);
    uint64_t id;
    assert_int_equal(orch_payload_put(p, "seen", 4, &id), 0);
    orch_payload_close(p);

    int ready[2], hold[2], go[2], result[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(hold), 0);
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(result), 0);
    pid_t reader = fork_child();
    if (reader == 0) {
        orch_payload_rtxn *r;
        const void *ptr;
        size_t len;
        char c = 'r';
        close(hold[1]);
        if (orch_payload_open(f->env, NULL, &p) != 0 || orch_payload_read_begin(p, &r) != 0 ||
            orch_payload_read(r, id, &ptr, &len) != 0)
            _exit(40);
        if (write(ready[1], &c, 1) != 1)
            _exit(41);
        while (read(hold[0], &c, 1) != 0)
            ; /* hold the reader until killed */
        _exit(42);
    }
    close(hold[0]);
    pid_t checker = fork_child();
    if (checker == 0) {
        struct orch_payload_stat st;
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1 || orch_payload_open(f->env, NULL, &p) != 0 ||
            orch_payload_stat(p, &st) != 0)
            _exit(43);
        if (write(result[1], &st.stale_readers, sizeof st.stale_readers) !=
            sizeof st.stale_readers)
            _exit(44);
        orch_payload_close(p);
        _exit(0);
    }
    close(go[0]);
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);

    /* A writer goes on while the reader lives, and after it died holding its slot. */
    p = open_env(f, NULL);
    assert_int_equal(orch_payload_put(p, "w1", 2, &id), 0);
    kill_and_reap(reader);
    assert_int_equal(orch_payload_put(p, "w2", 2, &id), 0);

    /* Another process's open finds the dead reader and clears its slot. */
    assert_int_equal(write(go[1], "g", 1), 1);
    int stale = -1;
    assert_int_equal(read(result[0], &stale, sizeof stale), sizeof stale);
    reap_ok(checker);
    assert_int_equal(stale, 1);
    int dead = -1;
    assert_int_equal(orch_payload_reader_check(p, &dead), 0);
    assert_int_equal(dead, 0); /* already cleared */

    void *data;
    size_t len;
    assert_int_equal(orch_payload_get(p, 1, &data, &len), 0);
    assert_memory_equal(data, "seen", 4);
    free(data);
    orch_payload_close(p);
    close(ready[0]), close(ready[1]), close(hold[1]), close(go[1]);
    close(result[0]), close(result[1]);
}

/* The same slot, found by orch_payload_reader_check of a process that stayed open. */
static void test_reader_check_after_kill(void **state)
{
    struct fx *f = *state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t reader = fork_child();
    if (reader == 0) {
        orch_payload *cp;
        orch_payload_rtxn *r;
        char c = 'r';
        if (orch_payload_open(f->env, NULL, &cp) != 0 || orch_payload_read_begin(cp, &r) != 0)
            _exit(50);
        if (write(ready[1], &c, 1) != 1)
            _exit(51);
        pause(); /* until killed */
        _exit(52);
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    orch_payload *p = open_env(f, NULL);
    kill_and_reap(reader);
    int dead = -1;
    assert_int_equal(orch_payload_reader_check(p, &dead), 0);
    assert_int_equal(dead, 1);
    orch_payload_close(p);
    close(ready[0]), close(ready[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_put_get_roundtrip),
        T(test_empty_and_missing),
        T(test_ids_never_reused),
        T(test_open_refusals),
        T(test_truncated_data_file),
        T(test_free_pages_past_end),
        T(test_map_growth),
        T(test_large_payload),
        T(test_cannot_grow),
        T(test_value_limit),
        T(test_value_limit_is_lmdbs),
        T(test_readonly),
        T(test_readonly_lockless),
        T(test_growth_waits_for_readers),
        T(test_follow_growth_of_other_process),
        T(test_two_writer_processes),
        T(test_kill_mid_write_loop),
        T(test_kill_reader),
        T(test_reader_check_after_kill),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
