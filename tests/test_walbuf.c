/* test_walbuf.c — the store's VFS (storage/walbuf.c): a commit's log reaches the file in a
 * few writes, is there in full when COMMIT returns (a process killed with SIGKILL right
 * after loses nothing), and readers of another connection through SQLite's own VFS see
 * every commit whole — through spills, pages rewritten in place, a log started again, and
 * transactions larger than the buffer; a disk that fills while a commit's buffer is written
 * fails that commit alone. */
#define _GNU_SOURCE /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store_int.h"
#include "testutil.h"

struct fx {
    char dir[512];
    char db[600];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f || orch_test_mkdtemp(f->dir, sizeof f->dir, "walbuf") < 0 ||
        orch_test_path(f->db, sizeof f->db, f->dir, "t.db") < 0)
        return -1;
    if (orch_store__walbuf_register() < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    orch_test_rmtree(f->dir);
    free(f);
    return 0;
}

static void exec_ok(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, err ? err : sqlite3_errstr(rc));
}

static int64_t one_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* A connection through the VFS under test (vfs ORCH_STORE_WALBUF_VFS) or SQLite's own
 * (NULL), in WAL mode, as the store opens its job. */
static sqlite3 *open_db(const char *path, const char *vfs)
{
    sqlite3 *db = NULL;
    assert_int_equal(
        sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs),
        SQLITE_OK);
    exec_ok(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
    return db;
}

/* Inserts n rows of `bytes` random bytes each in one transaction, ids from first. */
static void insert_rows(sqlite3 *db, int first, int n, int bytes)
{
    char sql[200];
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE k(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM k WHERE i < %d) "
             "INSERT INTO t (id, v) SELECT i, randomblob(%d) FROM k",
             first, first + n - 1, bytes);
    exec_ok(db, "BEGIN");
    exec_ok(db, sql);
    exec_ok(db, "COMMIT");
}

/* SQLite finds nothing wrong with the database of db. */
static void assert_intact(sqlite3 *db)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
}

/* Runs fn(path, fd) in a child process, which writes n bytes to fd (read into out) and
 * then exits or is killed; returns its wait status. */
static int run_child(void (*fn)(const char *path, int fd), const char *path, void *out,
                     size_t n)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        fn(path, p[1]);
        _exit(0);
    }
    close(p[1]);
    assert_int_equal(read(p[0], out, n), (ssize_t)n);
    close(p[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

/* One commit of about 100 pages: hundreds of writes from SQLite, a few to the file; a
 * reader of another connection sees it whole at once, before the writer closes. */
static void test_commit_in_few_writes(void **state)
{
    struct fx *f = *state;
    sqlite3 *w = open_db(f->db, ORCH_STORE_WALBUF_VFS);
    exec_ok(w, "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)");
    sqlite3 *r = open_db(f->db, NULL);
    struct orch_store_walbuf_stats a, b;
    orch_store__walbuf_stats(&a);
    insert_rows(w, 1, 200, 2000);
    orch_store__walbuf_stats(&b);
    unsigned long writes = b.writes - a.writes, flushes = b.flushes - a.flushes;
    assert_true(writes >= 200); /* a header and a page per frame, ~100 frames */
    assert_true(flushes >= 1);
    assert_true(flushes * 20 <= writes);
    assert_int_equal(one_int(r, "SELECT count(*) FROM t"), 200);
    assert_int_equal(one_int(r, "SELECT sum(length(v)) FROM t"), 200 * 2000);
    sqlite3_close(w);
    assert_int_equal(one_int(r, "SELECT count(*) FROM t WHERE id BETWEEN 1 AND 200"), 200);
    assert_intact(r);
    sqlite3_close(r);
}

/* What the child saw of the VFS, sent to the parent before it is killed. */
struct report {
    unsigned long rewrites;
};

/* The child: commits of every shape, then SIGKILL at once after the last COMMIT, its
 * connection never closed. A buffered byte not yet written would be lost with it. */
static void killed_child(const char *path, int fd)
{
    sqlite3 *db = open_db(path, ORCH_STORE_WALBUF_VFS);
    exec_ok(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)");
    insert_rows(db, 1, 10, 100);          /* small */
    insert_rows(db, 11, 300, 1500);       /* past 128 KiB: the buffer written in pieces */
    insert_rows(db, 311, 5000, 2500);     /* past the buffer's 8 MiB: written through */
    /* A transaction larger than the page cache spills frames, then writes some of those
     * pages again: SQLite rewrites them in place, and rewrites the checksums of the
     * frames after them at the commit — the last writes before the commit is published. */
    struct orch_store_walbuf_stats before, after;
    orch_store__walbuf_stats(&before);
    exec_ok(db, "PRAGMA cache_size = 20");
    exec_ok(db, "BEGIN");
    exec_ok(db, "WITH RECURSIVE k(i) AS (SELECT 6000 UNION ALL SELECT i + 1 FROM k "
                "WHERE i < 6399) INSERT INTO t (id, v) SELECT i, randomblob(900) FROM k");
    exec_ok(db, "UPDATE t SET v = randomblob(900) WHERE id BETWEEN 6000 AND 6010");
    exec_ok(db, "UPDATE t SET v = randomblob(901) WHERE id BETWEEN 6390 AND 6399");
    exec_ok(db, "COMMIT");
    orch_store__walbuf_stats(&after);
    /* Last, a plain commit in a log started again at 0, nothing read after it (a read
     * would write the buffer first): only the commit's own write puts it in the file. */
    exec_ok(db, "PRAGMA cache_size = 2000; PRAGMA wal_checkpoint(RESTART)");
    insert_rows(db, 5311, 50, 1000);
    struct report rep = {after.through - before.through};
    if (write(fd, &rep, sizeof rep) != (ssize_t)sizeof rep)
        _exit(3);
    kill(getpid(), SIGKILL);
    _exit(4);
}

static void test_killed_after_commit(void **state)
{
    struct fx *f = *state;
    struct report rep;
    int status = run_child(killed_child, f->db, &rep, sizeof rep);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_true(rep.rewrites > 0); /* the spill's pages were rewritten in place */
    /* Recovery through SQLite's own VFS, as any reader after a crash: every commit. */
    sqlite3 *db = open_db(f->db, NULL);
    assert_int_equal(one_int(db, "SELECT count(*) FROM t"), 10 + 300 + 5000 + 50 + 400);
    assert_int_equal(one_int(db, "SELECT sum(length(v)) FROM t"),
                     10 * 100 + 300 * 1500 + 5000 * 2500 + 50 * 1000 + 400 * 900 + 10);
    assert_int_equal(one_int(db, "SELECT count(*) FROM t WHERE id BETWEEN 6390 AND 6399 "
                                 "AND length(v) = 901"),
                     10);
    assert_intact(db);
    sqlite3_close(db);
}

/* The child of test_full_disk_at_commit: ten rows committed, then a file-size limit that
 * the next commit's log passes; it sends the codes of BEGIN, INSERT and COMMIT. */
static void full_disk_child(const char *path, int fd)
{
    sqlite3 *db = open_db(path, ORCH_STORE_WALBUF_VFS);
    exec_ok(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)");
    insert_rows(db, 1, 10, 100);
    char wal[700];
    struct stat st;
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (stat(wal, &st) < 0)
        _exit(3);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {(rlim_t)st.st_size + (300 << 10), RLIM_INFINITY};
    if (setrlimit(RLIMIT_FSIZE, &lim) < 0)
        _exit(4);
    int rc[3];
    rc[0] = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    rc[1] = sqlite3_exec(db,
                         "WITH RECURSIVE k(i) AS (SELECT 11 UNION ALL SELECT i + 1 FROM k "
                         "WHERE i < 1010) INSERT INTO t (id, v) SELECT i, randomblob(1000) "
                         "FROM k",
                         NULL, NULL, NULL);
    rc[2] = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    (void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    if (write(fd, rc, sizeof rc) != (ssize_t)sizeof rc)
        _exit(5);
}

/* A full disk while the buffer is written: the write that fails is the commit's own, so
 * COMMIT fails and the transaction is rolled back whole; what was committed
 * before stays, readable and consistent. The file system is made full for the child
 * alone by RLIMIT_FSIZE (a write past it is cut short, as on a full disk). */
static void test_full_disk_at_commit(void **state)
{
    struct fx *f = *state;
    int rc[3];
    int status = run_child(full_disk_child, f->db, rc, sizeof rc);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(rc[0], SQLITE_OK);
    /* The 1 MB insert fits the page cache; its commit writes the log past the limit. */
    assert_int_equal(rc[1], SQLITE_OK);
    /* SQLITE_FULL on a full disk; the file-size limit's EFBIG is SQLITE_IOERR to SQLite. */
    assert_true((rc[2] & 0xff) == SQLITE_FULL || (rc[2] & 0xff) == SQLITE_IOERR);
    sqlite3 *db = open_db(f->db, NULL);
    assert_int_equal(one_int(db, "SELECT count(*) FROM t"), 10);
    assert_int_equal(one_int(db, "SELECT sum(length(v)) FROM t"), 1000);
    assert_intact(db);
    insert_rows(db, 11, 5, 100); /* the job goes on once there is room */
    assert_int_equal(one_int(db, "SELECT count(*) FROM t"), 15);
    sqlite3_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_in_few_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_after_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_at_commit, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
