/* job.c — the job's single row: what the job was created from, and its status. */
#include "store_int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "proc.h"

#ifndef ORCH_VERSION
#error "ORCH_VERSION must be defined by the build (storage/meson.build)"
#endif

int orch_store_job_init(orch_store *s, const char *name, const char *plan_text,
                        const char *plan_hash, const char *pipeline_path)
{
    assert(name != NULL && plan_text != NULL && plan_hash != NULL && pipeline_path != NULL);
    sqlite3_stmt *st;
    int rc =
        orch_store_prepare(s,
                           "INSERT INTO job (id, name, plan_text, plan_hash, pipeline_path,"
                           " created_at, orch_version, status) VALUES (1, ?, ?, ?, ?, ?, ?,"
                           " 'created')",
                           &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, plan_text, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, plan_hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, pipeline_path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, orch_clock_wall_ms());
    sqlite3_bind_text(st, 6, ORCH_VERSION, -1, SQLITE_STATIC);
    rc = orch_store_step(s, st);
    if (rc == ORCH_ECONSTRAINT &&
        sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_PRIMARYKEY)
        rc = orch_error_set(-EEXIST, "%s: the job row already exists", s->path);
    /* The bound strings are the caller's: unbind them before returning. */
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc < 0 ? rc : 0;
}

/* Appends a copy of column i's text at *p and returns where it starts. */
static const char *copy_column(sqlite3_stmt *st, int i, char **p)
{
    const char *src = (const char *)sqlite3_column_text(st, i);
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    char *dst = *p;
    if (src != NULL)
        memcpy(dst, src, n);
    dst[n] = '\0';
    *p += n + 1;
    return dst;
}

int orch_store_job_get(orch_store *s, struct orch_job_info **out)
{
    enum { NSTR = 5 };
    *out = NULL;
    sqlite3_stmt *st;
    int rc =
        orch_store_prepare(s,
                           "SELECT name, plan_text, plan_hash, pipeline_path, orch_version,"
                           " created_at, status FROM job WHERE id = 1",
                           &st);
    if (rc < 0)
        return rc;
    rc = orch_store_step(s, st);
    if (rc <= 0) {
        sqlite3_reset(st);
        return rc < 0 ? rc : orch_error_set(ORCH_ENOTFOUND, "%s: no job row", s->path);
    }
    int status = orch_job_status_parse((const char *)sqlite3_column_text(st, NSTR + 1));
    if (status < 0) {
        sqlite3_reset(st);
        return orch_error_set(ORCH_ECORRUPT, "%s: unknown job status", s->path);
    }

    /* One block: the struct, then the strings. The caller frees it with one free(). */
    size_t size = sizeof(struct orch_job_info);
    for (int i = 0; i < NSTR; i++) {
        sqlite3_column_text(st, i); /* convert first: bytes then counts the text form */
        size += (size_t)sqlite3_column_bytes(st, i) + 1;
    }
    struct orch_job_info *info = malloc(size);
    if (info == NULL) {
        sqlite3_reset(st);
        return orch_error_set(-ENOMEM, "%s: out of memory", s->path);
    }
    char *p = (char *)(info + 1);
    info->name = copy_column(st, 0, &p);
    info->plan_text = copy_column(st, 1, &p);
    info->plan_hash = copy_column(st, 2, &p);
    info->pipeline_path = copy_column(st, 3, &p);
    info->orch_version = copy_column(st, 4, &p);
    info->created_at_ms = sqlite3_column_int64(st, NSTR);
    info->status = (enum orch_job_status)status;
    assert(p == (char *)info + size);
    sqlite3_reset(st);
    *out = info;
    return 0;
}

int orch_store_job_set_status(orch_store *s, enum orch_job_status status)
{
    const char *name = orch_job_status_name(status);
    assert(name != NULL);
    sqlite3_stmt *st;
    int rc = orch_store_prepare(s, "UPDATE job SET status = ? WHERE id = 1", &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if ((rc = orch_store_step(s, st)) < 0)
        return rc;
    if (sqlite3_changes(s->db) == 0)
        return orch_error_set(ORCH_ENOTFOUND, "%s: no job row", s->path);
    return 0;
}

int orch_store_job_payload_identity(orch_store *s, char *buf, size_t cap)
{
    assert(cap > 0);
    buf[0] = '\0';
    sqlite3_stmt *st;
    int rc = orch_store_prepare(s, "SELECT payload_identity FROM job WHERE id = 1", &st);
    if (rc < 0)
        return rc;
    rc = orch_store_step(s, st);
    if (rc <= 0) {
        sqlite3_reset(st);
        return rc < 0 ? rc : orch_error_set(ORCH_ENOTFOUND, "%s: no job row", s->path);
    }
    const char *id = (const char *)sqlite3_column_text(st, 0);
    size_t n = (size_t)sqlite3_column_bytes(st, 0);
    if (id != NULL && n >= cap)
        rc = orch_error_set(ORCH_ECORRUPT, "%s: job.payload_identity is too long", s->path);
    else if (id != NULL) {
        memcpy(buf, id, n);
        buf[n] = '\0';
        rc = 0;
    } else
        rc = 0;
    sqlite3_reset(st);
    return rc;
}

/* Runs `sql`, an UPDATE of the job row with one text parameter, with v. */
static int job_set_text(orch_store *s, const char *sql, const char *v)
{
    sqlite3_stmt *st;
    int rc = orch_store_prepare(s, sql, &st);
    if (rc < 0)
        return rc;
    sqlite3_bind_text(st, 1, v, -1, SQLITE_STATIC);
    rc = orch_store_step(s, st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st); /* the bound string is the caller's */
    if (rc < 0)
        return rc;
    if (sqlite3_changes(s->db) == 0)
        return orch_error_set(ORCH_ENOTFOUND, "%s: no job row", s->path);
    return 0;
}

int orch_store_job_set_payload_identity(orch_store *s, const char *id)
{
    return job_set_text(s, "UPDATE job SET payload_identity = ? WHERE id = 1", id);
}

int orch_store_plan_adopt(orch_store *s, const char *text, const char *hash, int64_t *id)
{
    static const char *const sql[] = {
        "INSERT INTO plan (hash, text, adopted_at) VALUES (?1, ?2, ?3)",
        "UPDATE job SET plan_hash = ?1, plan_text = ?2 WHERE id = 1"};
    for (int i = 0; i < 2; i++) {
        sqlite3_stmt *st;
        int rc = orch_store_prepare(s, sql[i], &st);
        if (rc < 0)
            return rc;
        if (sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC) != SQLITE_OK ||
            sqlite3_bind_text(st, 2, text, -1, SQLITE_STATIC) != SQLITE_OK ||
            (i == 0 && sqlite3_bind_int64(st, 3, orch_clock_wall_ms()) != SQLITE_OK))
            return orch_store_error(s, sqlite3_errcode(s->db), "plan");
        rc = orch_store_step(s, st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (rc < 0)
            return rc;
        if (i == 0 && id)
            *id = sqlite3_last_insert_rowid(s->db);
    }
    return 0;
}

int orch_store_ports_shift(orch_store *s, int first, int by)
{
    assert(first >= 0 && by > 0);
    /* Through negative ids, so that no moved item meets one not moved yet on the primary
     * key; the item rows briefly name port ids that do not exist: the foreign keys are
     * checked at the commit (when they are enforced at all: ORCH_STORE_CHECKS). */
    char sql[512];
    snprintf(sql, sizeof sql,
             "PRAGMA defer_foreign_keys = ON;"
             "UPDATE item SET port_id = -(port_id + %d) - 1 WHERE port_id >= %d;"
             "UPDATE item SET port_id = -port_id - 1 WHERE port_id < 0;"
             "DELETE FROM port WHERE id >= %d",
             by, first, first);
    return orch_store_exec(s, sql);
}

int orch_store_job_base_dir(orch_store *s, char **out)
{
    *out = NULL;
    sqlite3_stmt *st;
    int rc = orch_store_prepare(s, "SELECT base_dir FROM job WHERE id = 1", &st);
    if (rc < 0)
        return rc;
    rc = orch_store_step(s, st);
    if (rc <= 0) {
        sqlite3_reset(st);
        return rc < 0 ? rc : orch_error_set(ORCH_ENOTFOUND, "%s: no job row", s->path);
    }
    const char *dir = (const char *)sqlite3_column_text(st, 0);
    rc = 0;
    if (dir && !(*out = strdup(dir)))
        rc = orch_error_set(-ENOMEM, "out of memory");
    sqlite3_reset(st);
    return rc;
}

int orch_store_job_set_base_dir(orch_store *s, const char *dir)
{
    return job_set_text(s, "UPDATE job SET base_dir = ? WHERE id = 1", dir);
}
