/* slurm_start.c — the Slurm jobs a driver started (orch_slurm_start.h). */
#include "orch_slurm_start.h"

#include <assert.h>
#include <stddef.h>

#include "proc.h"

/* Runs write statement sql with its text parameters, inside the open transaction. */
static int write_texts(orch_store *s, const char *sql, int n, const char *const *v,
                       int64_t at)
{
    assert(orch_store_in_txn(s) && "slurm_start is written inside a transaction");
    sqlite3_stmt *st;
    int rc = orch_store_prepare(s, sql, &st);
    for (int i = 0; rc == 0 && i < n; i++) {
        int k = sqlite3_bind_text(st, i + 1, v[i], -1, SQLITE_TRANSIENT);
        if (k != SQLITE_OK)
            rc = orch_store_error(s, k, "bind");
    }
    if (rc == 0 && at >= 0) {
        int k = sqlite3_bind_int64(st, n + 1, at);
        if (k != SQLITE_OK)
            rc = orch_store_error(s, k, "bind");
    }
    if (rc == 0 && (rc = orch_store_step(s, st)) > 0)
        rc = 0;
    sqlite3_reset(st);
    return rc;
}

int orch_store_slurm_start_put(orch_store *s, const char *name, const char *call)
{
    return write_texts(s,
                       "INSERT OR REPLACE INTO slurm_start (name, call, step, started_at) "
                       "VALUES (?1, ?2, NULL, ?3)",
                       2, (const char *const[]){name, call}, orch_clock_wall_ms());
}

int orch_store_slurm_start_step(orch_store *s, const char *name, const char *step)
{
    return write_texts(s, "UPDATE slurm_start SET step = ?2 WHERE name = ?1", 2,
                       (const char *const[]){name, step}, -1);
}

int orch_store_slurm_start_del(orch_store *s, const char *name)
{
    return write_texts(s, "DELETE FROM slurm_start WHERE name = ?1", 1,
                       (const char *const[]){name}, -1);
}

int orch_store_slurm_starts_clear(orch_store *s)
{
    return write_texts(s, "DELETE FROM slurm_start", 0, NULL, -1);
}

int orch_store_slurm_starts(orch_store *s,
                            int (*fn)(void *ctx, const char *name, const char *call,
                                      const char *step),
                            void *ctx)
{
    sqlite3_stmt *st;
    int rc = orch_store_prepare(
        s, "SELECT name, call, step FROM slurm_start ORDER BY started_at, name", &st);
    while (rc == 0 && (rc = orch_store_step(s, st)) == 1)
        rc = fn(ctx, (const char *)sqlite3_column_text(st, 0),
                (const char *)sqlite3_column_text(st, 1),
                (const char *)sqlite3_column_text(st, 2));
    sqlite3_reset(st);
    return rc;
}
