/* migrate.c — brings a job's schema up to the newest embedded migration.
 *
 * Each migration runs in its own BEGIN IMMEDIATE transaction that also sets
 * `PRAGMA user_version`, so a crash leaves the job at the last fully applied version and
 * the next open continues from there. Two processes opening the same old job at once are
 * serialized by the write lock; the second sees the version already applied and skips it.
 *
 * Foreign keys are off while migrations run, because the standard way to change a table
 * in SQLite (create the new one, copy, drop, rename) passes through states that violate
 * them; `PRAGMA foreign_key_check` runs before each commit instead, so a migration can
 * never leave a dangling reference behind.
 */
#include "store_int.h"

#include <assert.h>
#include <stdio.h>

#include "orch_error.h"

/* Ends the migration's transaction after a failure; the failure's detail is kept. */
static int abandon(orch_store *s, int rc)
{
    (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* Fails when the migration left rows that violate a foreign key. */
static int check_foreign_keys(orch_store *s, const struct orch_migration *m)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA foreign_key_check", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return orch_store_error(s, rc, "foreign_key_check");
    int ret = 0;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        ret = orch_error_set(ORCH_EDB,
                             "%s: migration %04d_%s leaves rows of table %s violating a "
                             "foreign key",
                             s->path, m->version, m->name,
                             (const char *)sqlite3_column_text(st, 0));
    else if (rc != SQLITE_DONE)
        ret = orch_store_error(s, rc, "foreign_key_check");
    sqlite3_finalize(st);
    return ret;
}

static int apply(orch_store *s, const struct orch_migration *m)
{
    char what[160];
    snprintf(what, sizeof what, "migration %04d_%s", m->version, m->name);

    int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return orch_store_error(s, rc, what);

    /* Under the write lock, the version is final: another process may have applied this
     * migration since this one read the version. */
    int64_t uv;
    if ((rc = orch_store__pragma_int(s, "user_version", &uv)) < 0)
        return abandon(s, rc);
    if (uv >= m->version) {
        s->version = (int)uv;
        return abandon(s, 0);
    }
    assert(uv == m->version - 1);

    char *err = NULL;
    rc = sqlite3_exec(s->db, m->sql, NULL, NULL, &err);
    if (rc != SQLITE_OK) {
        int code = orch_store_error(s, rc, what);
        orch_error_set(code, "%s: %s: %s", s->path, what, err != NULL ? err : "failed");
        sqlite3_free(err);
        return abandon(s, code);
    }
    if (sqlite3_get_autocommit(s->db))
        return orch_error_set(ORCH_EDB,
                              "%s: %s ended its transaction: a migration must not "
                              "contain BEGIN, COMMIT or ROLLBACK",
                              s->path, what);
    if ((rc = check_foreign_keys(s, m)) < 0)
        return abandon(s, rc);

    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", m->version);
    rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return abandon(s, orch_store_error(s, rc, what));
    s->version = m->version;
    return 0;
}

int orch_store__migrate(orch_store *s, const struct orch_migration *migs, int nmigs)
{
    assert(!(s->flags & ORCH_STORE_READONLY));
    assert(!s->in_txn);
    assert(s->version < migs[nmigs - 1].version);

    int rc = sqlite3_exec(s->db, "PRAGMA foreign_keys = OFF", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return orch_store_error(s, rc, "foreign_keys");
    int ret = 0;
    for (int i = s->version; i < nmigs && ret == 0; i++) {
        assert(migs[i].version == i + 1 && "migrations are numbered 1..N");
        if (s->version < migs[i].version)
            ret = apply(s, &migs[i]);
    }
    rc = sqlite3_exec(s->db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
    if (ret == 0 && rc != SQLITE_OK)
        ret = orch_store_error(s, rc, "foreign_keys");
    return ret;
}
