/* test_store.c — unit tests of the state store (storage/orch_store.h): opening and
 * migrating, refusing what is not a usable job, transactions, the statement cache, the
 * schema's views and CHECK constraints, and crashes of real processes (SIGKILL). */
#define _GNU_SOURCE /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orch_error.h"
#include "testutil.h"
#include "orch_facts.h"
#include "orch_states.h"
#include "orch_store.h"
#include "store_int.h"

/* ---- fixture: a scratch directory per test --------------------------------------------- */

struct fx {
    char dir[512];
    char db[600];
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (orch_test_mkdtemp(f->dir, sizeof f->dir, "store") < 0) {
        free(f);
        return -1;
    }
    snprintf(f->db, sizeof f->db, "%s/state.db", f->dir);
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

/* The first column of the first row of sql, as an integer (the statement must give one). */
static int64_t q_int(orch_store *s, const char *sql)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(orch_store_db(s), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The first column of the first row of sql, as text, into buf. */
static const char *q_text(orch_store *s, const char *sql, char *buf, size_t n)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(orch_store_db(s), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    const char *t = (const char *)sqlite3_column_text(st, 0);
    snprintf(buf, n, "%s", t ? t : "(null)");
    sqlite3_finalize(st);
    return buf;
}

static void exec_ok(orch_store *s, const char *sql)
{
    int rc = orch_store_exec(s, sql);
    if (rc != 0)
        fail_msg("%s: %s", sql, orch_error_detail());
}

static orch_store *create_job(struct fx *f)
{
    orch_store *s = NULL;
    int rc = orch_store_open(f->db, ORCH_STORE_CREATE, &s);
    if (rc != 0)
        fail_msg("create: %s", orch_error_detail());
    return s;
}

static orch_store *open_job(struct fx *f, int flags)
{
    orch_store *s = NULL;
    int rc = orch_store_open(f->db, flags, &s);
    if (rc != 0)
        fail_msg("open: %s", orch_error_detail());
    return s;
}

static void assert_detail_has(const char *needle)
{
    if (strstr(orch_error_detail(), needle) == NULL)
        fail_msg("detail \"%s\" lacks \"%s\"", orch_error_detail(), needle);
}

static void assert_integrity_ok(orch_store *s)
{
    char buf[256];
    assert_string_equal(q_text(s, "PRAGMA integrity_check", buf, sizeof buf), "ok");
    assert_int_equal(q_int(s, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
}

/* The plan rows every test hierarchy uses: pdf -> page -> region. */
static void add_plan(orch_store *s)
{
    exec_ok(s, "INSERT INTO domain VALUES (0, 'pdf', NULL, 0), (1, 'page', 0, 1),"
               " (2, 'region', 1, 2);"
               "INSERT INTO call VALUES (0, 'render', 'expand', 'pdf_render', 0, 1),"
               " (1, 'ocr', 'map', 'tesseract_ocr', 1, 1),"
               " (2, 'segment', 'expand', 'seg', 1, 2);"
               "INSERT INTO port VALUES (0, 0, 'path', 'pdf.path', NULL, 0),"
               " (1, 1, 'image', 'page.image', 0, 0), (2, 1, 'text', 'page.text', 1, 1);");
}

/* ---- opening --------------------------------------------------------------------------- */

static void test_create_open_reopen(void **state)
{
    struct fx *f = *state;
    int latest = orch_store_schema_latest();
    assert_true(latest >= 1);

    orch_store *s = create_job(f);
    assert_int_equal(orch_store_schema_found(s), 0);
    assert_int_equal(orch_store_schema_version(s), latest);
    assert_string_equal(orch_store_path(s), f->db);
    assert_int_equal(q_int(s, "PRAGMA user_version"), latest);
    assert_int_equal(q_int(s, "PRAGMA application_id"), ORCH_STORE_APPLICATION_ID);
    assert_int_equal(q_int(s, "PRAGMA foreign_keys"), 1);
    assert_int_equal(q_int(s, "PRAGMA synchronous"), 1); /* NORMAL */
    char buf[64];
    assert_string_equal(q_text(s, "PRAGMA journal_mode", buf, sizeof buf), "wal");
    assert_int_equal(q_int(s, "SELECT count(*) FROM sqlite_schema WHERE name IN ('job',"
                              " 'domain', 'call', 'port', 'entity', 'expansion', 'grain',"
                              " 'item', 'attempt', 'failure', 'suppression', 'lineage',"
                              " 'failures', 'progress', 'entity_key')"),
                     15);
    int64_t objects = q_int(s, "SELECT count(*) FROM sqlite_schema");
    orch_store_close(s);

    /* Reopening applies nothing: same version found as now, same schema. */
    s = open_job(f, ORCH_STORE_SYNC_FULL);
    assert_int_equal(orch_store_schema_found(s), latest);
    assert_int_equal(orch_store_schema_version(s), latest);
    assert_int_equal(q_int(s, "PRAGMA synchronous"), 2); /* FULL */
    assert_int_equal(q_int(s, "SELECT count(*) FROM sqlite_schema"), objects);
    orch_store_close(s);

    s = open_job(f, ORCH_STORE_READONLY);
    assert_int_equal(orch_store_schema_found(s), latest);
    orch_store_close(s);
}

static void test_open_refusals(void **state)
{
    struct fx *f = *state;
    orch_store *s = (orch_store *)1;
    assert_int_equal(orch_store_open(f->db, 0, &s), -ENOENT);
    assert_null(s);
    assert_detail_has(f->db);
    assert_int_equal(orch_store_open(f->db, ORCH_STORE_READONLY, &s), -ENOENT);
    assert_int_equal(orch_store_open(f->db, ORCH_STORE_CREATE | ORCH_STORE_READONLY, &s),
                     -EINVAL);
    assert_int_equal(access(f->db, F_OK), -1);

    s = create_job(f);
    orch_store_close(s);
    /* CREATE never takes over an existing file, and leaves it alone. */
    assert_int_equal(orch_store_open(f->db, ORCH_STORE_CREATE, &s), -EEXIST);
    assert_null(s);
    assert_detail_has("already exists");
    s = open_job(f, 0);
    orch_store_close(s);

    /* A directory where the database should be. */
    char sub[700];
    snprintf(sub, sizeof sub, "%s/sub", f->dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_not_equal(orch_store_open(sub, 0, &s), 0);
    assert_null(s);
}

static void test_newer_job_refused(void **state)
{
    struct fx *f = *state;
    int latest = orch_store_schema_latest();
    orch_store *s = create_job(f);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", latest + 6);
    exec_ok(s, sql);
    orch_store_close(s);

    char want[800];
    snprintf(want, sizeof want,
             "%s: job schema version %d is newer than this orch understands (%d); "
             "upgrade orch",
             f->db, latest + 6, latest);
    assert_int_equal(orch_store_open(f->db, 0, &s), ORCH_ENEWER);
    assert_null(s);
    assert_string_equal(orch_error_detail(), want);
    assert_int_equal(orch_store_open(f->db, ORCH_STORE_READONLY, &s), ORCH_ENEWER);
    assert_string_equal(orch_error_detail(), want);
}

static void test_garbage_file(void **state)
{
    struct fx *f = *state;
    char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 7 + 3);
    assert_int_equal(orch_test_write_file(f->db, junk, sizeof junk), 0);

    orch_store *s = NULL;
    assert_int_equal(orch_store_open(f->db, 0, &s), ORCH_ECORRUPT);
    assert_null(s);
    assert_detail_has(f->db);
    assert_detail_has("not an orch job (");
    assert_int_equal(orch_store_open(f->db, ORCH_STORE_READONLY, &s), ORCH_ECORRUPT);
    assert_detail_has("not an orch job (");
    /* A file that is not ours is left as it was. */
    struct stat st;
    assert_int_equal(stat(f->db, &st), 0);
    assert_int_equal(st.st_size, sizeof junk);
}

static void test_truncated_file(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    add_plan(s);
    exec_ok(s, "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 4999)"
               " INSERT INTO entity (domain_id, parent_id, ordinal, key)"
               " SELECT 0, NULL, i, printf('%0200d', i) FROM n");
    orch_store_close(s); /* the last connection checkpoints: all in state.db, no WAL */

    struct stat st;
    assert_int_equal(stat(f->db, &st), 0);
    assert_true(st.st_size > 1000000);
    assert_int_equal(truncate(f->db, st.st_size / 2), 0);
    assert_int_equal(orch_store_open(f->db, 0, &s), ORCH_ECORRUPT);
    assert_null(s);
    assert_detail_has(f->db);
    assert_detail_has("truncated");
    assert_int_equal(orch_store_open(f->db, ORCH_STORE_READONLY, &s), ORCH_ECORRUPT);
    assert_detail_has("truncated");

    /* Cut inside the header. */
    assert_int_equal(truncate(f->db, 60), 0);
    assert_int_equal(orch_store_open(f->db, 0, &s), ORCH_ECORRUPT);
    assert_detail_has("not an orch job (");
}

static void test_not_an_orch_job(void **state)
{
    struct fx *f = *state;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE notes (x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    orch_store *s = NULL;
    assert_int_equal(orch_store_open(f->db, 0, &s), ORCH_ECORRUPT);
    assert_detail_has("not an orch job");

    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 1", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(orch_store_open(f->db, 0, &s), ORCH_ECORRUPT);
    assert_detail_has("application_id");
    /* It was not migrated into an orch job. */
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(
        sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_schema", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* An empty file is not a job (a job is renamed into place only after its first commit):
 * refused read-only and read-write, and left untouched. */
static void test_empty_file_refused(void **state)
{
    struct fx *f = *state;
    assert_int_equal(orch_test_write_file(f->db, "", 0), 0);
    orch_store *s = NULL;
    assert_int_equal(orch_store_open(f->db, ORCH_STORE_READONLY, &s), ORCH_ECORRUPT);
    assert_null(s);
    assert_int_equal(orch_store_open(f->db, 0, &s), ORCH_ECORRUPT);
    assert_null(s);
    assert_non_null(strstr(orch_error_detail(), "empty database"));
    struct stat st;
    assert_int_equal(stat(f->db, &st), 0);
    assert_int_equal(st.st_size, 0);
}

/* ---- migrations ------------------------------------------------------------------------ */

static void test_migrations_upgrade(void **state)
{
    struct fx *f = *state;
    const struct orch_migration v2[] = {
        orch_migrations[0],
        {2, "extra", "CREATE TABLE extra (x INTEGER);\nINSERT INTO extra VALUES (42);\n"},
    };
    orch_store *s = NULL;
    assert_int_equal(orch_store__open_with(f->db, ORCH_STORE_CREATE, v2, 1, &s), 0);
    assert_int_equal(orch_store_schema_version(s), 1);
    orch_store_close(s);

    /* Read-only never migrates: an older job is refused, clearly. */
    assert_int_equal(orch_store__open_with(f->db, ORCH_STORE_READONLY, v2, 2, &s), ORCH_EOLDER);
    assert_null(s);
    assert_detail_has("job schema version 1 is older than this orch's (2)");

    /* Read-write migrates the older job, once. */
    assert_int_equal(orch_store__open_with(f->db, 0, v2, 2, &s), 0);
    assert_int_equal(orch_store_schema_found(s), 1);
    assert_int_equal(orch_store_schema_version(s), 2);
    assert_int_equal(q_int(s, "PRAGMA user_version"), 2);
    assert_int_equal(q_int(s, "SELECT sum(x) FROM extra"), 42);
    orch_store_close(s);
    assert_int_equal(orch_store__open_with(f->db, 0, v2, 2, &s), 0);
    assert_int_equal(orch_store_schema_found(s), 2);
    assert_int_equal(q_int(s, "SELECT count(*) FROM extra"), 1);
    orch_store_close(s);

    /* The older binary (knows only 1) refuses the job it can no longer read. */
    assert_int_equal(orch_store__open_with(f->db, 0, v2, 1, &s), ORCH_ENEWER);
    assert_detail_has("job schema version 2 is newer than this orch understands (1)");
}

static void test_migration_failure_rolls_back(void **state)
{
    struct fx *f = *state;
    const struct orch_migration broken[] = {
        orch_migrations[0],
        {2, "broken", "CREATE TABLE extra (x);\nINSERT INTO no_such_table VALUES (1);\n"},
    };
    const struct orch_migration dangling[] = {
        orch_migrations[0],
        {2, "dangling",
         "CREATE TABLE extra (x);\n"
         "INSERT INTO entity (domain_id, ordinal, key) VALUES (99, 0, 'k');\n"},
    };
    orch_store *s = NULL;
    assert_int_equal(orch_store__open_with(f->db, ORCH_STORE_CREATE, broken, 1, &s), 0);
    orch_store_close(s);

    assert_int_equal(orch_store__open_with(f->db, 0, broken, 2, &s), ORCH_EDB);
    assert_null(s);
    assert_detail_has("migration 0002_broken");
    assert_detail_has("no_such_table");

    assert_int_equal(orch_store__open_with(f->db, 0, dangling, 2, &s), ORCH_EDB);
    assert_detail_has("migration 0002_dangling leaves rows of table entity");

    /* Both rolled back entirely: still version 1, no trace of either. */
    assert_int_equal(orch_store__open_with(f->db, 0, broken, 1, &s), 0);
    assert_int_equal(orch_store_schema_found(s), 1);
    assert_int_equal(q_int(s, "SELECT count(*) FROM sqlite_schema WHERE name = 'extra'"), 0);
    assert_int_equal(q_int(s, "SELECT count(*) FROM entity"), 0);
    assert_int_equal(q_int(s, "PRAGMA foreign_keys"), 1);
    orch_store_close(s);
}

/* A job created through CREATE but whose migrations fail is removed again. */
static void test_failed_create_removes_file(void **state)
{
    struct fx *f = *state;
    const struct orch_migration bad[] = {{1, "bad", "CREATE TABLE ;"}};
    orch_store *s = NULL;
    assert_int_equal(orch_store__open_with(f->db, ORCH_STORE_CREATE, bad, 1, &s), ORCH_EDB);
    assert_null(s);
    assert_int_equal(access(f->db, F_OK), -1);
}

/* ---- job metadata ---------------------------------------------------------------------- */

static void test_job_metadata(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    struct orch_job_info *info = (struct orch_job_info *)1;
    assert_int_equal(orch_store_job_get(s, &info), ORCH_ENOTFOUND);
    assert_null(info);
    assert_int_equal(orch_store_job_set_status(s, ORCH_JOB_RUNNING), ORCH_ENOTFOUND);

    char name[] = "pdf_ocr", hash[] = "ab12";
    assert_int_equal(orch_store_job_init(s, name, "pipeline pdf_ocr\n", hash, "/x/p.orch"), 0);
    /* The store keeps no pointer to the caller's strings. */
    memset(name, 'X', sizeof name - 1);
    memset(hash, 'X', sizeof hash - 1);
    assert_int_equal(orch_store_job_init(s, "again", "", "", ""), -EEXIST);
    orch_store_close(s);

    s = open_job(f, ORCH_STORE_READONLY);
    assert_int_equal(orch_store_job_get(s, &info), 0);
    assert_string_equal(info->name, "pdf_ocr");
    assert_string_equal(info->plan_text, "pipeline pdf_ocr\n");
    assert_string_equal(info->plan_hash, "ab12");
    assert_string_equal(info->pipeline_path, "/x/p.orch");
    assert_true(info->orch_version[0] != '\0');
    assert_int_equal(info->status, ORCH_JOB_CREATED);
    assert_true(info->created_at_ms > 1600000000000LL);
    free(info);
    orch_store_close(s);

    s = open_job(f, 0);
    assert_int_equal(orch_store_job_set_status(s, ORCH_JOB_FINISHED), 0);
    assert_int_equal(orch_store_job_get(s, &info), 0);
    assert_int_equal(info->status, ORCH_JOB_FINISHED);
    free(info);
    orch_store_close(s);
}

/* ---- transactions and statements ------------------------------------------------------- */

static void test_transactions(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    assert_false(orch_store_in_txn(s));

    assert_int_equal(orch_store_begin(s), 0);
    assert_true(orch_store_in_txn(s));
    exec_ok(s, "INSERT INTO domain VALUES (0, 'pdf', NULL, 0)");
    assert_int_equal(orch_store_commit(s), 0);
    assert_false(orch_store_in_txn(s));

    assert_int_equal(orch_store_begin(s), 0);
    exec_ok(s, "INSERT INTO domain VALUES (1, 'page', 0, 1)");
    assert_int_equal(orch_store_rollback(s), 0);
    assert_false(orch_store_in_txn(s));
    assert_int_equal(q_int(s, "SELECT count(*) FROM domain"), 1);

    /* A commit that fails (a deferred foreign key) rolls back and leaves the store
     * usable. */
    assert_int_equal(orch_store_begin(s), 0);
    exec_ok(s, "PRAGMA defer_foreign_keys = ON");
    exec_ok(s, "INSERT INTO domain VALUES (2, 'lost', NULL, 0)");
    exec_ok(s, "INSERT INTO entity (domain_id, ordinal, key) VALUES (77, 0, 'dangling')");
    assert_int_equal(orch_store_commit(s), ORCH_ECONSTRAINT);
    assert_detail_has(f->db);
    assert_detail_has("FOREIGN KEY");
    assert_false(orch_store_in_txn(s));
    assert_int_equal(q_int(s, "SELECT count(*) FROM domain"), 1);
    assert_int_equal(q_int(s, "SELECT count(*) FROM entity"), 0);
    assert_int_equal(orch_store_begin(s), 0);
    exec_ok(s, "INSERT INTO domain VALUES (1, 'page', 0, 1)");
    assert_int_equal(orch_store_commit(s), 0);
    assert_int_equal(q_int(s, "SELECT count(*) FROM domain"), 2);

    /* Closing with an open transaction rolls it back. */
    assert_int_equal(orch_store_begin(s), 0);
    exec_ok(s, "INSERT INTO domain VALUES (2, 'gone', NULL, 0)");
    orch_store_close(s);
    s = open_job(f, 0);
    assert_int_equal(q_int(s, "SELECT count(*) FROM domain"), 2);
    orch_store_close(s);
}

/* A full disk is -ENOSPC with a message, and the store goes on after the rollback. The
 * disk is made "full" with max_page_count, which SQLite reports as SQLITE_FULL like a
 * real full disk. */
static void test_disk_full(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    add_plan(s);
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld",
             (long long)q_int(s, "PRAGMA page_count") + 8);
    exec_ok(s, sql);

    assert_int_equal(orch_store_begin(s), 0);
    sqlite3_stmt *st;
    assert_int_equal(orch_store_prepare(s,
                                        "INSERT INTO entity (domain_id, ordinal, key)"
                                        " VALUES (0, ?, printf('%01000d', ?1))",
                                        &st),
                     0);
    int rc = 0;
    for (int i = 0; i < 1000 && rc == 0; i++) {
        sqlite3_bind_int(st, 1, i);
        rc = orch_store_step(s, st);
        sqlite3_reset(st);
    }
    assert_int_equal(rc, -ENOSPC);
    assert_detail_has(f->db);
    assert_detail_has("full");
    assert_int_equal(orch_store_rollback(s), 0);
    assert_false(orch_store_in_txn(s));

    exec_ok(s, "PRAGMA max_page_count = 1000000");
    assert_int_equal(orch_store_begin(s), 0);
    assert_int_equal(orch_store_prepare(s,
                                        "INSERT INTO entity (domain_id, ordinal, key)"
                                        " VALUES (0, ?, printf('%01000d', ?1))",
                                        &st),
                     0);
    sqlite3_bind_int(st, 1, 5);
    assert_int_equal(orch_store_step(s, st), 0);
    assert_int_equal(orch_store_commit(s), 0);
    assert_int_equal(q_int(s, "SELECT count(*) FROM entity"), 1);
    assert_integrity_ok(s);
    orch_store_close(s);
}

static void test_prepare_cache(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    add_plan(s);
    const char *sql = "SELECT name FROM domain WHERE id >= ? ORDER BY id";
    sqlite3_stmt *a, *b, *c;
    assert_int_equal(orch_store_prepare(s, sql, &a), 0);
    sqlite3_bind_int(a, 1, 1);
    assert_int_equal(orch_store_step(s, a), 1);
    assert_string_equal((const char *)sqlite3_column_text(a, 0), "page");

    /* Same text (another copy of it): the same statement, reset, bindings cleared. */
    char copy[128];
    snprintf(copy, sizeof copy, "%s", sql);
    assert_int_equal(orch_store_prepare(s, copy, &b), 0);
    assert_ptr_equal(a, b);
    assert_int_equal(orch_store_step(s, b), 0); /* NULL binding: no row */
    sqlite3_reset(b);
    sqlite3_bind_int(b, 1, 0);
    assert_int_equal(orch_store_step(s, b), 1);
    assert_string_equal((const char *)sqlite3_column_text(b, 0), "pdf");
    sqlite3_reset(b);

    assert_int_equal(orch_store_prepare(s, "SELECT count(*) FROM domain", &c), 0);
    assert_ptr_not_equal(a, c);
    assert_int_equal(orch_store_step(s, c), 1);
    assert_int_equal(sqlite3_column_int(c, 0), 3);
    sqlite3_reset(c);

    sqlite3_stmt *bad = NULL;
    assert_int_equal(orch_store_prepare(s, "SELEKT nothing", &bad), ORCH_EDB);
    assert_detail_has(f->db);
    assert_detail_has("syntax error");
    assert_int_equal(orch_store_prepare(s, "  -- only a comment", &bad), -EINVAL);

    /* A constraint failure comes back translated, with SQLite's message. */
    assert_int_equal(orch_store_prepare(s, "INSERT INTO domain VALUES (9, 'pdf', NULL, 0)", &c),
                     0);
    assert_int_equal(orch_store_step(s, c), ORCH_ECONSTRAINT);
    assert_detail_has("UNIQUE constraint failed: domain.name");
    orch_store_close(s); /* finalizes the cache: ASan reports any leak */
}

/* ---- schema: state names agree with the CHECK constraints ------------------------------ */

typedef const char *(*name_fn)(int);

struct state_list {
    const char *table, *column;
    int count;
    const char *(*name)(int);
    /* inserts one row with ?1 as the column's value; the fixture rows exist */
    const char *insert;
};

#define NAME_ADAPTER(fn, type)                                                                 \
    static const char *fn##_i(int v)                                                           \
    {                                                                                          \
        return fn((enum type)v);                                                               \
    }
NAME_ADAPTER(orch_grain_phase_name, orch_grain_phase)
NAME_ADAPTER(orch_grain_outcome_name, orch_grain_outcome)
NAME_ADAPTER(orch_item_state_name, orch_item_state)
NAME_ADAPTER(orch_expansion_state_name, orch_expansion_state)
NAME_ADAPTER(orch_failure_kind_name, orch_failure_kind)
NAME_ADAPTER(orch_attempt_outcome_name, orch_attempt_outcome)
NAME_ADAPTER(orch_job_status_name, orch_job_status)
NAME_ADAPTER(orch_job_stop_name, orch_job_stop)

static const struct state_list state_lists[] = {
    {"grain", "phase", ORCH_PHASE__COUNT, orch_grain_phase_name_i,
     "INSERT INTO grain (call_id, entity_id, phase, ready_seq, outcome)"
     " VALUES (1, 1, ?1, 7, CASE WHEN ?1 = 'sealed' THEN 'ok' END)"},
    {"grain", "outcome", ORCH_OUTCOME__COUNT, orch_grain_outcome_name_i,
     "INSERT INTO grain (call_id, entity_id, phase, outcome) VALUES (1, 1, 'sealed', ?1)"},
    {"item", "state", ORCH_ITEM__COUNT, orch_item_state_name_i,
     "INSERT INTO item (port_id, entity_id, state, payload_id)"
     " VALUES (0, 1, ?1, CASE WHEN ?1 = 'present' THEN 5 END)"},
    {"expansion", "state", ORCH_EXPANSION__COUNT, orch_expansion_state_name_i,
     "INSERT INTO expansion VALUES (0, 1, ?1, 0)"},
    {"failure", "kind", ORCH_FAILURE__COUNT, orch_failure_kind_name_i,
     "INSERT INTO failure (grain_id, kind, generation, at) VALUES (1, ?1, 0, 0)"},
    {"attempt", "outcome", ORCH_ATTEMPT__COUNT, orch_attempt_outcome_name_i,
     "INSERT INTO attempt (grain_id, generation, started_at, outcome) VALUES (1, 0, 0, ?1)"},
    {"job", "status", ORCH_JOB__COUNT, orch_job_status_name_i,
     "INSERT INTO job (name, plan_text, plan_hash, pipeline_path, created_at, orch_version,"
     " status) VALUES ('n', '', '', '', 0, '', ?1)"},
    {"job", "stop_kind", ORCH_STOP__COUNT, orch_job_stop_name_i,
     "INSERT INTO job (name, plan_text, plan_hash, pipeline_path, created_at, orch_version,"
     " stop_kind) VALUES ('n', '', '', '', 0, '', ?1)"},
};

/* The names listed by "CHECK (column = 'a' OR column = 'b' ...)" in the table's SQL text
 * (the migrations spell lists this way, not with IN: see 0001_initial.sql). */
static int check_names(orch_store *s, const char *table, const char *column, char names[][32],
                       int max)
{
    char sql[256], text[8192];
    snprintf(sql, sizeof sql,
             "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = '%s'", table);
    q_text(s, sql, text, sizeof text);
    char pat[64], term[64];
    snprintf(pat, sizeof pat, "CHECK (%s = '", column);
    snprintf(term, sizeof term, "%s = '", column);
    const char *p = strstr(text, pat);
    if (p == NULL)
        fail_msg("no \"%s\" in table %s", pat, table);
    p += strlen(pat) - 1; /* at the opening quote */
    int n = 0;
    for (;;) {
        assert_true(*p == '\'');
        const char *end = strchr(p + 1, '\'');
        assert_non_null(end);
        assert_true(n < max && end - p - 1 < 32);
        snprintf(names[n++], 32, "%.*s", (int)(end - p - 1), p + 1);
        p = end + 1;
        while (*p == ' ' || *p == '\n')
            p++;
        if (*p == ')')
            return n;
        assert_true(strncmp(p, "OR", 2) == 0);
        p += 2;
        while (*p == ' ' || *p == '\n')
            p++;
        assert_true(strncmp(p, term, strlen(term)) == 0);
        p += strlen(term) - 1;
    }
}

static void test_state_names_match_checks(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    add_plan(s);
    exec_ok(s,
            "INSERT INTO entity (id, domain_id, ordinal, key) VALUES (1, 1, 0, 'r');"
            "INSERT INTO grain (id, call_id, entity_id, phase) VALUES (1, 0, 1, 'waiting');");

    for (size_t l = 0; l < sizeof state_lists / sizeof *state_lists; l++) {
        const struct state_list *sl = &state_lists[l];
        /* Same set: every C name is in the CHECK list, and the lists are equally long
         * (names are distinct on both sides). */
        char names[32][32];
        int n = check_names(s, sl->table, sl->column, names, 32);
        assert_int_equal(n, sl->count);
        for (int i = 0; i < sl->count; i++) {
            int found = 0;
            for (int j = 0; j < n; j++)
                found += strcmp(names[j], sl->name(i)) == 0;
            if (found != 1)
                fail_msg("%s.%s: C name \"%s\" is not in the CHECK list", sl->table, sl->column,
                         sl->name(i));
        }
        assert_null(sl->name(sl->count));

        /* And the constraint really accepts each of them, and nothing else. */
        sqlite3_stmt *st;
        for (int i = 0; i <= sl->count; i++) {
            const char *name = i < sl->count ? sl->name(i) : "bogus";
            assert_int_equal(orch_store_begin(s), 0);
            assert_int_equal(orch_store_prepare(s, sl->insert, &st), 0);
            sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
            int rc = orch_store_step(s, st);
            sqlite3_reset(st);
            if (i < sl->count && rc != 0)
                fail_msg("%s.%s = '%s' refused: %s", sl->table, sl->column, name,
                         orch_error_detail());
            if (i == sl->count) {
                assert_int_equal(rc, ORCH_ECONSTRAINT);
                assert_detail_has("CHECK constraint failed");
            }
            assert_int_equal(orch_store_rollback(s), 0);
        }
    }

    /* Round trip of the parse functions. */
    for (int i = 0; i < ORCH_PHASE__COUNT; i++)
        assert_int_equal(orch_grain_phase_parse(orch_grain_phase_name(i)), i);
    assert_int_equal(orch_item_state_parse("Present"), -1);
    assert_int_equal(orch_failure_kind_parse(NULL), -1);
    assert_string_equal(orch_failure_kind_name(ORCH_FAILURE_EXHAUSTED), "exhausted");
    orch_store_close(s);
}

/* Shapes the schema enforces beyond the names. */
static void test_schema_constraints(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    add_plan(s);
    exec_ok(s, "INSERT INTO entity (id, domain_id, ordinal, key) VALUES (1, 0, 0, 'a.pdf');"
               "INSERT INTO entity (id, domain_id, parent_id, ordinal, key)"
               " VALUES (2, 1, 1, 0, 'a.pdf/0');");
    static const char *const refused[] = {
        /* an entity without a key, root or child (schema 2 stores every key) */
        "INSERT INTO entity (domain_id, ordinal) VALUES (0, 1)",
        "INSERT INTO entity (domain_id, parent_id, ordinal) VALUES (1, 1, 1)",
        /* two children with one ordinal, two roots with one ordinal */
        "INSERT INTO entity (domain_id, parent_id, ordinal, key) VALUES (1, 1, 0, 'a.pdf/0')",
        "INSERT INTO entity (domain_id, ordinal, key) VALUES (0, 0, 'b.pdf')",
        /* a present item without payload, a dropped one with one */
        "INSERT INTO item (port_id, entity_id, state, payload_id) VALUES (1, 2, 'present', NULL)",
        "INSERT INTO item (port_id, entity_id, state, payload_id) VALUES (1, 2, 'dropped', 3)",
        /* a sealed grain without outcome, a ready one without sequence, a duplicate */
        "INSERT INTO grain (call_id, entity_id, phase) VALUES (1, 2, 'sealed')",
        "INSERT INTO grain (call_id, entity_id, phase) VALUES (1, 2, 'ready')",
        "INSERT INTO grain (call_id, entity_id, phase) VALUES (0, 1, 'waiting');"
        "INSERT INTO grain (call_id, entity_id, phase) VALUES (0, 1, 'waiting')",
        /* a failed expansion with children; references to nothing */
        "INSERT INTO expansion VALUES (0, 1, 'failed', 3)",
        "INSERT INTO grain (call_id, entity_id, phase) VALUES (1, 999, 'waiting')",
        "INSERT INTO item (port_id, entity_id, state, payload_id) VALUES (42, 2, 'dropped', NULL)",
        /* a second job row */
        "INSERT INTO job (id, name, plan_text, plan_hash, pipeline_path, created_at,"
        " orch_version) VALUES (2, '', '', '', '', 0, '')",
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        assert_int_equal(orch_store_begin(s), 0);
        int rc = orch_store_exec(s, refused[i]);
        if (rc != ORCH_ECONSTRAINT)
            fail_msg("accepted (%d): %s", rc, refused[i]);
        assert_int_equal(orch_store_rollback(s), 0);
    }
    /* The accepted counterparts. */
    exec_ok(s, "INSERT INTO entity (domain_id, parent_id, ordinal, key)"
               " VALUES (1, 1, 1, 'a.pdf/1');"
               "INSERT INTO entity (domain_id, ordinal, key) VALUES (0, 1, 'a.pdf');"
               "INSERT INTO item (port_id, entity_id, state, payload_id)"
               " VALUES (1, 2, 'present', 3), (2, 2, 'dropped', NULL);"
               "INSERT INTO expansion VALUES (0, 1, 'succeeded', 2);");
    orch_store_close(s);

    /* A job (checks off) does not pay for them (storage/store.c): the same writes are not
     * checked. The suite enforces them everywhere else (main). */
    orch_store_configure(&(struct orch_store_config){.checks = false});
    s = open_job(f, 0);
    orch_store_configure(&(struct orch_store_config){.checks = true});
    exec_ok(s, "INSERT INTO item (port_id, entity_id, state, payload_id)"
               " VALUES (42, 2, 'dropped', NULL);"
               "INSERT INTO expansion VALUES (1, 1, 'failed', 3)");
    int64_t fk = -1;
    assert_int_equal(orch_store__pragma_int(s, "foreign_keys", &fk), 0);
    assert_int_equal(fk, 0);
    orch_store_close(s);
    s = open_job(f, 0);
    assert_int_equal(orch_store__pragma_int(s, "foreign_keys", &fk), 0);
    assert_int_equal(fk, 1);
    orch_store_close(s);
}

/* ---- views ----------------------------------------------------------------------------- */

static void test_views(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    add_plan(s);
    /* docs/a.pdf (1) -> pages 0, 1, 2 (2, 3, 4) -> page 2 has regions 0, 1 (5, 6);
     * b.pdf (7) has no pages. */
    exec_ok(s,
            "INSERT INTO entity VALUES (1, 0, NULL, 0, 'docs/a.pdf'),"
            " (2, 1, 1, 0, 'docs/a.pdf/0'), (3, 1, 1, 1, 'docs/a.pdf/1'),"
            " (4, 1, 1, 2, 'docs/a.pdf/2'), (5, 2, 4, 0, 'docs/a.pdf/2/0'),"
            " (6, 2, 4, 1, 'docs/a.pdf/2/1'), (7, 0, NULL, 1, 'b.pdf');"
            "INSERT INTO expansion VALUES (0, 1, 'succeeded', 3), (0, 7, 'succeeded', 0);"
            "INSERT INTO grain (id, call_id, entity_id, phase, generation, ready_seq,"
            " outcome) VALUES (1, 0, 1, 'sealed', 0, 1, 'ok'), (2, 0, 7, 'sealed', 0, 2, 'ok'),"
            " (3, 1, 2, 'sealed', 0, 3, 'ok'), (4, 1, 3, 'in_flight', 1, 4, NULL),"
            " (5, 1, 4, 'sealed', 2, 5, 'failed'), (6, 2, 2, 'ready', 0, 6, NULL),"
            " (7, 2, 3, 'waiting', 0, NULL, NULL), (8, 2, 4, 'sealed', 0, 7, 'dropped');"
            "INSERT INTO failure (grain_id, kind, message, generation, at) VALUES"
            " (5, 'timeout', 'hung', 1, 1700000000123),"
            " (5, 'exhausted', 'gave up', 2, 1700000001000);"
            "INSERT INTO failure (grain_id, kind, message, generation, at) VALUES"
            " (1, 'crash', 'segfault', 0, 0);");

    /* entity_key: every entity's key, and its depth. */
    char buf[256];
    assert_string_equal(
        q_text(s, "SELECT key FROM entity_key WHERE entity_id = 6", buf, sizeof buf),
        "docs/a.pdf/2/1");
    assert_int_equal(q_int(s, "SELECT depth FROM entity_key WHERE entity_id = 6"), 2);
    assert_int_equal(q_int(s, "SELECT count(*) FROM entity_key"), 7);

    /* lineage of the grandchild: itself, its page, its pdf. */
    sqlite3_stmt *st;
    assert_int_equal(orch_store_prepare(s,
                                        "SELECT domain, key, ancestor_id, ancestor_domain,"
                                        " ancestor_key, depth FROM lineage"
                                        " WHERE entity_id = 6 ORDER BY depth",
                                        &st),
                     0);
    static const struct {
        int id;
        const char *domain, *key;
    } chain[] = {
        {6, "region", "docs/a.pdf/2/1"}, {4, "page", "docs/a.pdf/2"}, {1, "pdf", "docs/a.pdf"}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(orch_store_step(s, st), 1);
        assert_string_equal((const char *)sqlite3_column_text(st, 0), "region");
        assert_string_equal((const char *)sqlite3_column_text(st, 1), "docs/a.pdf/2/1");
        assert_int_equal(sqlite3_column_int(st, 2), chain[i].id);
        assert_string_equal((const char *)sqlite3_column_text(st, 3), chain[i].domain);
        assert_string_equal((const char *)sqlite3_column_text(st, 4), chain[i].key);
        assert_int_equal(sqlite3_column_int(st, 5), i);
    }
    assert_int_equal(orch_store_step(s, st), 0);
    /* Every entity appears (depth 0), roots only at depth 0: 7 + 5 parents + 2 grand. */
    assert_int_equal(q_int(s, "SELECT count(*) FROM lineage"), 14);
    assert_int_equal(q_int(s, "SELECT count(*) FROM lineage WHERE entity_id = 7"), 1);

    /* failures: call, key, kind, message, generation, readable time. */
    assert_int_equal(orch_store_prepare(s,
                                        "SELECT call, key, kind, message, generation, time,"
                                        " entity_id, grain_id FROM failures"
                                        " ORDER BY failure_id",
                                        &st),
                     0);
    assert_int_equal(orch_store_step(s, st), 1);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "ocr");
    assert_string_equal((const char *)sqlite3_column_text(st, 1), "docs/a.pdf/2");
    assert_string_equal((const char *)sqlite3_column_text(st, 2), "timeout");
    assert_string_equal((const char *)sqlite3_column_text(st, 3), "hung");
    assert_int_equal(sqlite3_column_int(st, 4), 1);
    assert_string_equal((const char *)sqlite3_column_text(st, 5), "2023-11-14T22:13:20.123Z");
    assert_int_equal(sqlite3_column_int(st, 6), 4);
    assert_int_equal(sqlite3_column_int(st, 7), 5);
    assert_int_equal(orch_store_step(s, st), 1);
    assert_string_equal((const char *)sqlite3_column_text(st, 2), "exhausted");
    assert_int_equal(orch_store_step(s, st), 1);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "render");
    assert_string_equal((const char *)sqlite3_column_text(st, 1), "docs/a.pdf");
    assert_string_equal((const char *)sqlite3_column_text(st, 5), "1970-01-01T00:00:00.000Z");
    assert_int_equal(orch_store_step(s, st), 0);

    /* progress: per call, by phase and outcome. */
    assert_int_equal(orch_store_prepare(s, "SELECT * FROM progress", &st), 0);
    static const struct {
        const char *call;
        int v[9]; /* total waiting ready in_flight sealed ok dropped failed suppressed */
    } want[] = {{"render", {2, 0, 0, 0, 2, 2, 0, 0, 0}},
                {"ocr", {3, 0, 0, 1, 2, 1, 0, 1, 0}},
                {"segment", {3, 1, 1, 0, 1, 0, 1, 0, 0}}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(orch_store_step(s, st), 1);
        assert_string_equal((const char *)sqlite3_column_text(st, 0), want[i].call);
        for (int c = 0; c < 9; c++)
            assert_int_equal(sqlite3_column_int(st, c + 1), want[i].v[c]);
    }
    assert_int_equal(orch_store_step(s, st), 0);
    orch_store_close(s);
}

/* The details of EXPLAIN QUERY PLAN sql, joined with " | ". */
static const char *query_plan(orch_store *s, const char *sql, char *buf, size_t n)
{
    char eqp[512];
    sqlite3_stmt *st;
    snprintf(eqp, sizeof eqp, "EXPLAIN QUERY PLAN %s", sql);
    assert_int_equal(sqlite3_prepare_v2(orch_store_db(s), eqp, -1, &st, NULL), SQLITE_OK);
    buf[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s | ", (const char *)sqlite3_column_text(st, 3));
    }
    sqlite3_finalize(st);
    return buf;
}

/* The queries of propagation use indexes, not a scan of every row: a grain by its call
 * and entity, an entity's grains (0018: the index leads with the entity; resume reads the
 * READY grains of every call in one pass), an entity's children. */
static void test_queue_queries_use_indexes(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    char plan[512];
    query_plan(s, "SELECT id FROM grain WHERE call_id = 3 AND entity_id = 7", plan,
               sizeof plan);
    if (strstr(plan, "SEARCH grain USING") == NULL)
        fail_msg("grain look-up plan: %s", plan);
    query_plan(s, "SELECT id FROM grain WHERE entity_id = 7", plan, sizeof plan);
    if (strstr(plan, "SEARCH grain USING") == NULL)
        fail_msg("an entity's grains plan: %s", plan);
    query_plan(s,
               "SELECT id FROM entity WHERE parent_id = 3 AND domain_id = 1 ORDER BY ordinal",
               plan, sizeof plan);
    if (strstr(plan, "entity_child") == NULL || strstr(plan, "TEMP B-TREE") != NULL)
        fail_msg("children plan: %s", plan);
    orch_store_close(s);
}

/* ---- entity keys (migration 0002) ------------------------------------------------------ */

/* The rows of sql, columns joined with '|', rows ended by '\n' (NULL as "(null)"):
 * malloc'd. */
static char *rows_of(orch_store *s, const char *sql)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(orch_store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(orch_store_db(s)));
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        for (int c = 0; c < sqlite3_column_count(st); c++) {
            const char *v = (const char *)sqlite3_column_text(st, c);
            fprintf(out, "%s%c", v ? v : "(null)",
                    c + 1 < sqlite3_column_count(st) ? '|' : '\n');
        }
    assert_int_equal(rc, SQLITE_DONE);
    sqlite3_finalize(st);
    assert_int_equal(fclose(out), 0);
    return text;
}

/* What the user-facing views show, in a fixed order, one text per view. */
enum { VIEW_ENTITY_KEY, VIEW_LINEAGE, VIEW_LINEAGE_BY_KEY, VIEW_FAILURES, NVIEWS };
static const char *const view_queries[NVIEWS] = {
    "SELECT * FROM entity_key ORDER BY entity_id",
    "SELECT * FROM lineage ORDER BY entity_id, depth",
    "SELECT * FROM lineage WHERE key = 'g/0/0' ORDER BY entity_id, depth",
    "SELECT * FROM failures ORDER BY failure_id",
};

/* A job of schema 1 (only root keys stored) with nested domains, migrated by opening it:
 * every entity gets its key, and the views give exactly the rows that schema 1's views
 * (recursive from every root) gave. The hierarchy has what makes keys ambiguous: a root
 * key repeated (`lines()` gives a repeated line the same key, "g" twice), a root key with
 * '/' that is also a child's key ("g/0"), two child domains of one domain sharing
 * ordinals (page 0 and thumb 0 of docs/a.pdf), and a multi-digit ordinal. */
static void test_schema_1_job_migrated(void **state)
{
    struct fx *f = *state;
    orch_store *s = NULL;
    assert_int_equal(orch_store__open_with(f->db, ORCH_STORE_CREATE, orch_migrations, 1, &s),
                     0);
    assert_int_equal(orch_store_schema_version(s), 1);
    add_plan(s);
    exec_ok(
        s, "INSERT INTO domain VALUES (3, 'thumb', 0, 1);"
           "INSERT INTO entity VALUES (1, 0, NULL, 0, 'docs/a.pdf'), (2, 0, NULL, 1, 'g'),"
           " (3, 0, NULL, 2, 'g'), (4, 0, NULL, 3, 'g/0'),"
           " (5, 1, 1, 0, NULL), (6, 1, 1, 1, NULL), (7, 2, 6, 0, NULL), (8, 2, 6, 1, NULL),"
           " (9, 1, 2, 0, NULL), (10, 1, 3, 0, NULL), (11, 2, 9, 0, NULL), (12, 3, 1, 0, NULL),"
           " (13, 2, 10, 0, NULL), (14, 2, 9, 12, NULL);"
           "INSERT INTO grain (id, call_id, entity_id, phase, generation, ready_seq, outcome)"
           " VALUES (1, 2, 9, 'sealed', 1, 1, 'failed'), (2, 0, 4, 'sealed', 0, 2, 'failed'),"
           " (3, 1, 7, 'in_flight', 1, 3, NULL);"
           "INSERT INTO failure (grain_id, kind, message, generation, at) VALUES"
           " (1, 'error', 'oops', 0, 1700000000123), (1, 'exhausted', 'gave up', 1, 1),"
           " (2, 'record', 'bad pdf', 0, 2), (3, 'crash', 'segfault', 0, 3);");
    char *before[NVIEWS];
    for (int v = 0; v < NVIEWS; v++)
        before[v] = rows_of(s, view_queries[v]);
    orch_store_close(s);

    s = open_job(f, 0);
    assert_int_equal(orch_store_schema_found(s), 1);
    assert_int_equal(orch_store_schema_version(s), orch_store_schema_latest());
    assert_integrity_ok(s);
    char *keys = rows_of(s, "SELECT id, key FROM entity ORDER BY id");
    assert_string_equal(keys, "1|docs/a.pdf\n2|g\n3|g\n4|g/0\n5|docs/a.pdf/0\n6|docs/a.pdf/1\n"
                              "7|docs/a.pdf/1/0\n8|docs/a.pdf/1/1\n9|g/0\n10|g/0\n11|g/0/0\n"
                              "12|docs/a.pdf/0\n13|g/0/0\n14|g/0/12\n");
    free(keys);
    for (int v = 0; v < NVIEWS; v++) {
        char *after = rows_of(s, view_queries[v]);
        if (strcmp(before[v], after) != 0)
            fail_msg("%s\nschema 1:\n%snow:\n%s", view_queries[v], before[v], after);
        free(after);
    }
    /* The rows compared are the real ones, not two empty lists: 14 entities; 14 + 10 + 5
     * (entity, ancestor) pairs; two entities named g/0/0, three rows each; 4 failures. */
    assert_int_equal(q_int(s, "SELECT count(*) FROM entity_key"), 14);
    assert_int_equal(q_int(s, "SELECT count(*) FROM lineage"), 29);
    assert_string_equal(before[VIEW_LINEAGE_BY_KEY],
                        "11|region|g/0/0|11|region|g/0/0|0\n11|region|g/0/0|9|page|g/0|1\n"
                        "11|region|g/0/0|2|pdf|g|2\n13|region|g/0/0|13|region|g/0/0|0\n"
                        "13|region|g/0/0|10|page|g/0|1\n13|region|g/0/0|3|pdf|g|2\n");
    char buf[64];
    assert_string_equal(
        q_text(
            s,
            "SELECT group_concat(key, ',') FROM (SELECT key FROM failures ORDER BY failure_id)",
            buf, sizeof buf),
        "g/0,g/0,g/0,docs/a.pdf/1/0");
    for (int v = 0; v < NVIEWS; v++)
        free(before[v]);

    /* New entities of the migrated job keep to the new shape. */
    exec_ok(
        s, "INSERT INTO entity (domain_id, parent_id, ordinal, key) VALUES (2, 9, 1, 'g/0/1')");
    assert_int_equal(orch_store_exec(s, "INSERT INTO entity (domain_id, parent_id, ordinal)"
                                        " VALUES (2, 9, 2)"),
                     ORCH_ECONSTRAINT);
    orch_store_close(s);
}

/* The engine's INSERT of an entity (orch_store_entity_put) writes a child's key from its
 * parent's: the caller passes a key for a root only. */
static void test_entity_put_writes_keys(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    add_plan(s);
    int64_t root, page, region, again;
    assert_int_equal(orch_store_begin(s), 0);
    assert_int_equal(orch_store_entity_put(s, 0, 0, 0, "in/x.pdf", &root), 0);
    assert_int_equal(orch_store_entity_put(s, 1, root, 12, NULL, &page), 0);
    assert_int_equal(orch_store_entity_put(s, 2, page, 0, NULL, &region), 0);
    assert_int_equal(orch_store_entity_put(s, 0, 0, 1, "in/x.pdf", &again), 0);
    assert_int_equal(orch_store_commit(s), 0);
    char *rows = rows_of(s, "SELECT entity_id, key, depth FROM entity_key ORDER BY entity_id");
    char want[256];
    snprintf(want, sizeof want,
             "%lld|in/x.pdf|0\n%lld|in/x.pdf/12|1\n%lld|in/x.pdf/12/0|2\n%lld|in/x.pdf|0\n",
             (long long)root, (long long)page, (long long)region, (long long)again);
    assert_string_equal(rows, want);
    free(rows);
    /* A root without a key is refused. */
    assert_int_equal(orch_store_begin(s), 0);
    assert_int_equal(orch_store_entity_put(s, 0, 0, 2, NULL, &again), ORCH_ECONSTRAINT);
    assert_int_equal(orch_store_rollback(s), 0);
    orch_store_close(s);
}

/* lineage covers any depth: here the deepest chain a plan allows (64 levels, depths 0-63:
 * ORCH__DEPTH_MAX of engine/plan), one entity per level, keys "r/0/0/...". */
static void test_lineage_deepest_chain(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    exec_ok(s,
            "WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 63)"
            " INSERT INTO domain SELECT i, 'd' || i, CASE WHEN i > 0 THEN i - 1 END, i FROM n;"
            "WITH RECURSIVE n (i, key) AS (SELECT 0, 'r' UNION ALL"
            " SELECT i + 1, key || '/0' FROM n WHERE i < 63)"
            " INSERT INTO entity SELECT i + 1, i, CASE WHEN i > 0 THEN i END, 0, key FROM n;");
    char key[256] = "r";
    for (int i = 0; i < 63; i++)
        strcat(key, "/0");
    sqlite3_stmt *st;
    assert_int_equal(orch_store_prepare(s,
                                        "SELECT entity_id, ancestor_id, ancestor_domain, depth"
                                        " FROM lineage WHERE key = ? ORDER BY depth",
                                        &st),
                     0);
    assert_int_equal(sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC), SQLITE_OK);
    for (int d = 0; d < 64; d++) {
        assert_int_equal(orch_store_step(s, st), 1);
        assert_int_equal(sqlite3_column_int(st, 0), 64);
        assert_int_equal(sqlite3_column_int(st, 1), 64 - d);
        char dom[8];
        snprintf(dom, sizeof dom, "d%d", 63 - d);
        assert_string_equal((const char *)sqlite3_column_text(st, 2), dom);
        assert_int_equal(sqlite3_column_int(st, 3), d);
    }
    assert_int_equal(orch_store_step(s, st), 0);
    /* 64 + 63 + ... + 1 (entity, ancestor) pairs in all. */
    assert_int_equal(q_int(s, "SELECT count(*) FROM lineage"), 64 * 65 / 2);
    orch_store_close(s);
}

/* A look-up by key or by id in entity_key and lineage goes through entity's indexes,
 * never a scan of entity (scripts/bench/lookup times them at a million entities). */
static void test_key_lookups_use_indexes(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    char plan[2048];
    static const struct {
        const char *sql, *want;
    } lookups[] = {
        {"SELECT * FROM lineage WHERE key = 'a/1'",
         "SEARCH e USING INDEX entity_by_key (key=?)"},
        {"SELECT * FROM lineage WHERE entity_id = 5", "SEARCH e USING INTEGER PRIMARY KEY"},
        {"SELECT key FROM entity_key WHERE entity_id = 5",
         "SEARCH e USING INTEGER PRIMARY KEY"},
        {"SELECT entity_id FROM entity_key WHERE key = 'a/1'",
         "SEARCH e USING INDEX entity_by_key (key=?)"},
    };
    for (size_t i = 0; i < sizeof lookups / sizeof *lookups; i++) {
        query_plan(s, lookups[i].sql, plan, sizeof plan);
        /* Scanned may be: the few rows of domain, and the walk's own queue (up). */
        if (strstr(plan, lookups[i].want) == NULL || strstr(plan, "SCAN e |") != NULL ||
            strstr(plan, "SCAN a |") != NULL || strstr(plan, "SCAN x |") != NULL ||
            strstr(plan, "SCAN entity") != NULL || strstr(plan, "AUTOMATIC") != NULL)
            fail_msg("%s: plan %s", lookups[i].sql, plan);
    }
    orch_store_close(s);
}

/* ---- concurrency and crashes ----------------------------------------------------------- */

static void test_readonly_while_writing(void **state)
{
    struct fx *f = *state;
    orch_store *w = create_job(f);
    add_plan(w);
    assert_int_equal(orch_store_begin(w), 0);
    exec_ok(w, "INSERT INTO entity (domain_id, ordinal, key) VALUES (0, 0, 'a')");

    /* The writer holds the write lock; a reader opens and reads the committed state. */
    orch_store *r = open_job(f, ORCH_STORE_READONLY);
    assert_int_equal(q_int(r, "SELECT count(*) FROM entity"), 0);
    assert_int_equal(orch_store_commit(w), 0);
    assert_int_equal(q_int(r, "SELECT count(*) FROM entity"), 1);

    /* A reader cannot write, and says why. */
    assert_int_equal(orch_store_exec(r, "DELETE FROM entity"), -EROFS);
    assert_detail_has(f->db);

    /* A reader in the middle of a read does not block the writer. */
    sqlite3_stmt *st;
    assert_int_equal(orch_store_prepare(r, "SELECT id FROM entity", &st), 0);
    assert_int_equal(orch_store_step(r, st), 1);
    assert_int_equal(orch_store_begin(w), 0);
    exec_ok(w, "INSERT INTO entity (domain_id, ordinal, key) VALUES (0, 1, 'b')");
    assert_int_equal(orch_store_commit(w), 0);
    sqlite3_reset(st);
    assert_int_equal(q_int(r, "SELECT count(*) FROM entity"), 2);
    orch_store_close(r);
    orch_store_close(w);
}

enum { ROWS_PER_BATCH = 100 };

/* Child side of the crash tests: commits batches of ROWS_PER_BATCH root entities,
 * reporting each committed batch number on `report`; after each report it waits for a
 * byte on `ack` if ack >= 0. With big_after >= 0, after that many batches it opens one
 * big transaction (larger than SQLite's page cache, so it spills uncommitted pages into
 * the WAL), reports -1 and waits on `hold` until killed. Never returns. */
static void crash_child(const char *db, int report, int ack, int hold, int big_after)
{
    orch_store *s;
    if (orch_store_open(db, 0, &s) != 0)
        _exit(10);
    sqlite3_stmt *st;
    const char *sql = "INSERT INTO entity (domain_id, ordinal, key)"
                      " VALUES (0, ?, printf('%0300d', ?1))";
    for (int b = 0;; b++) {
        if (b == big_after) {
            if (orch_store_begin(s) != 0 || orch_store_prepare(s, sql, &st) != 0)
                _exit(11);
            for (int i = 0; i < 60000; i++) {
                sqlite3_bind_int(st, 1, 10000000 + i);
                if (orch_store_step(s, st) != 0)
                    _exit(12);
                sqlite3_reset(st);
            }
            int m = -1;
            char c;
            if (write(report, &m, sizeof m) != sizeof m)
                _exit(13);
            while (read(hold, &c, 1) != 0)
                ; /* until killed */
            _exit(14);
        }
        if (orch_store_begin(s) != 0 || orch_store_prepare(s, sql, &st) != 0)
            _exit(15);
        for (int i = 0; i < ROWS_PER_BATCH; i++) {
            sqlite3_bind_int(st, 1, b * ROWS_PER_BATCH + i);
            if (orch_store_step(s, st) != 0)
                _exit(16);
            sqlite3_reset(st);
        }
        if (orch_store_commit(s) != 0)
            _exit(17);
        if (write(report, &b, sizeof b) != sizeof b)
            _exit(18);
        char c;
        if (ack >= 0 && read(ack, &c, 1) != 1)
            _exit(19);
    }
}

struct child {
    pid_t pid;
    int report; /* read end */
    int ack;    /* write end, -1 if none */
};

static struct child spawn_crash_child(struct fx *f, bool with_ack, int big_after)
{
    int rep[2], ack[2];
    assert_int_equal(pipe(rep), 0);
    assert_int_equal(pipe(ack), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Die with the test, even when a failed assertion skips the kill. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(9);
        close(rep[0]);
        close(ack[1]);
        crash_child(f->db, rep[1], with_ack ? ack[0] : -1, ack[0], big_after);
    }
    close(rep[1]);
    close(ack[0]);
    return (struct child){pid, rep[0], ack[1]};
}

static int read_report(struct child *c)
{
    int v;
    ssize_t n = read(c->report, &v, sizeof v);
    if (n != sizeof v)
        fail_msg("child stopped reporting (read %zd)", n);
    return v;
}

static void kill_child(struct child *c)
{
    int status;
    assert_int_equal(kill(c->pid, SIGKILL), 0);
    assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(c->ack);
}

static void prepare_crash_job(struct fx *f)
{
    orch_store *s = create_job(f);
    add_plan(s);
    orch_store_close(s);
}

/* Killed inside a big transaction whose pages have already spilled into the WAL:
 * reopening shows exactly the committed batches. */
static void test_kill_mid_transaction(void **state)
{
    struct fx *f = *state;
    prepare_crash_job(f);
    struct child c = spawn_crash_child(f, false, 3);
    for (int b = 0; b < 3; b++)
        assert_int_equal(read_report(&c), b);
    assert_int_equal(read_report(&c), -1); /* the big transaction is open and written */

    char wal[700];
    struct stat st;
    snprintf(wal, sizeof wal, "%s-wal", f->db);
    assert_int_equal(stat(wal, &st), 0);
    assert_true(st.st_size > 8 * 1024 * 1024); /* uncommitted frames are in the WAL */
    kill_child(&c);
    close(c.report);

    orch_store *s = open_job(f, 0);
    assert_int_equal(q_int(s, "SELECT count(*) FROM entity"), 3 * ROWS_PER_BATCH);
    assert_int_equal(q_int(s, "SELECT max(ordinal) FROM entity"), 3 * ROWS_PER_BATCH - 1);
    assert_integrity_ok(s);
    /* And the job takes new transactions. */
    assert_int_equal(orch_store_begin(s), 0);
    exec_ok(s, "INSERT INTO entity (domain_id, ordinal, key) VALUES (0, 999999, 'after')");
    assert_int_equal(orch_store_commit(s), 0);
    orch_store_close(s);
}

/* Killed between two commits, at a known point. */
static void test_kill_between_commits(void **state)
{
    struct fx *f = *state;
    prepare_crash_job(f);
    struct child c = spawn_crash_child(f, true, -1);
    for (int b = 0; b < 5; b++) {
        assert_int_equal(read_report(&c), b);
        if (b < 4)
            assert_int_equal(write(c.ack, "k", 1), 1);
    }
    kill_child(&c); /* blocked waiting for the 5th ack: between commits */
    close(c.report);

    orch_store *s = open_job(f, ORCH_STORE_READONLY);
    assert_int_equal(q_int(s, "SELECT count(*) FROM entity"), 5 * ROWS_PER_BATCH);
    orch_store_close(s);
    s = open_job(f, 0);
    assert_integrity_ok(s);
    orch_store_close(s);
}

/* Killed at an arbitrary moment while committing freely: every batch is all or nothing,
 * and every reported commit is there. */
static void test_kill_free_running(void **state)
{
    struct fx *f = *state;
    prepare_crash_job(f);
    struct child c = spawn_crash_child(f, false, -1);
    int last = -1;
    for (int i = 0; i < 30; i++)
        last = read_report(&c);
    kill_child(&c);
    int v;
    while (read(c.report, &v, sizeof v) == sizeof v)
        last = v; /* commits reported before the kill */
    close(c.report);

    orch_store *s = open_job(f, 0);
    int64_t n = q_int(s, "SELECT count(*) FROM entity");
    assert_int_equal(n % ROWS_PER_BATCH, 0);
    int64_t batches = n / ROWS_PER_BATCH;
    /* Committed = reported, or one more whose report the kill cut off. */
    assert_true(batches == last + 1 || batches == last + 2);
    assert_int_equal(q_int(s, "SELECT max(ordinal) FROM entity"), n - 1);
    assert_integrity_ok(s);
    orch_store_close(s);
}

/* Checkpoints in the background (storage/background.c): past the log size set, the
 * thread checkpoints while commits go on, the commit after it copies the rest, and the
 * log then starts again from its beginning, so that it stays small however much is
 * committed; what was committed is all there. A sync asked for is made, and one of
 * another file. Without the thread, orch_store_sync_begin syncs at once. */
static void test_background(void **state)
{
    struct fx *f = *state;
    orch_store *s = create_job(f);
    assert_int_equal(orch_store_sync_begin(s), 0);
    assert_int_equal(orch_store_sync_end(s, false), 1);

    assert_int_equal(orch_store_background_start(s), 0);
    orch_store__background_tune(s, 32, 1 << 30); /* the driver never checkpoints alone */
    exec_ok(s, "CREATE TABLE t (x BLOB)");
    enum { ROWS = 300 };
    for (int i = 0; i < ROWS + 3; i++) {
        if (i >= ROWS) { /* see below */
            int64_t cycles;
            int copied, frames;
            orch_store__background_idle(s, &cycles, &copied, &frames);
            assert_true(cycles >= 1);
            if (i == ROWS) /* the thread copied what made it start, at least */
                assert_true(copied >= 32);
        }
        assert_int_equal(orch_store_begin(s), 0);
        exec_ok(s, "INSERT INTO t VALUES (randomblob(3000))");
        assert_int_equal(orch_store_commit(s), 0);
    }
    /* The last three commits each came after the thread was idle, its checkpoint (if it
     * made one) complete: a commit that finds it done copies the rest, and the next write
     * starts the log again. So the log holds at most what reaches the threshold (32) and a
     * few commits more, where 300 commits of a page or more each would be in it without
     * checkpoints, or with checkpoints after which the log never starts again. */
    int64_t cycles;
    int copied, frames;
    orch_store__background_idle(s, &cycles, &copied, &frames);
    assert_true(frames > 0 && frames < 64);
    assert_int_equal(q_int(s, "SELECT count(*) FROM t"), ROWS + 3);
    assert_integrity_ok(s);

    assert_int_equal(orch_store_sync_begin(s), 0);
    assert_int_equal(orch_store_sync_end(s, true), 1);

    /* A sync of another file, made by the second thread: its result once made; one not
     * taken yet is withdrawn (-EAGAIN), for the caller to make. */
    char missing[700];
    snprintf(missing, sizeof missing, "%s/missing", f->dir);
    assert_int_equal(orch_store_file_sync_begin(s, f->db), 0);
    orch_store__background_idle(s, &cycles, &copied, &frames);
    assert_int_equal(orch_store_file_sync_end(s), 0);
    assert_int_equal(orch_store_file_sync_begin(s, missing), 0);
    orch_store__background_idle(s, &cycles, &copied, &frames);
    assert_int_equal(orch_store_file_sync_end(s), -ENOENT);
    assert_int_equal(orch_store_file_sync_begin(s, f->db), 0);
    int rc = orch_store_file_sync_end(s);
    assert_true(rc == 0 || rc == -EAGAIN);
    orch_store_background_stop(s);
    assert_int_equal(orch_store_file_sync_begin(s, f->db), -ENOTSUP);
    orch_store_close(s);

    s = open_job(f, 0);
    assert_int_equal(q_int(s, "SELECT count(*) FROM t"), ROWS + 3);
    orch_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_create_open_reopen),
        T(test_open_refusals),
        T(test_newer_job_refused),
        T(test_garbage_file),
        T(test_truncated_file),
        T(test_not_an_orch_job),
        T(test_empty_file_refused),
        T(test_migrations_upgrade),
        T(test_migration_failure_rolls_back),
        T(test_failed_create_removes_file),
        T(test_job_metadata),
        T(test_transactions),
        T(test_disk_full),
        T(test_prepare_cache),
        T(test_state_names_match_checks),
        T(test_schema_constraints),
        T(test_views),
        T(test_queue_queries_use_indexes),
        T(test_schema_1_job_migrated),
        T(test_entity_put_writes_keys),
        T(test_lineage_deepest_chain),
        T(test_key_lookups_use_indexes),
        T(test_readonly_while_writing),
        T(test_kill_mid_transaction),
        T(test_kill_between_commits),
        T(test_kill_free_running),
        T(test_background),
#undef T
    };
    /* Every store of the suite enforces the schema's rules (orch_store_config). */
    orch_store_configure(&(struct orch_store_config){.checks = true});
    return cmocka_run_group_tests(tests, NULL, NULL);
}
