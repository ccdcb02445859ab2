/* keys.c — the SQL of rekeying a job made before schema 13 (orch_keys.h). */
#include "orch_keys.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

int orch_store_key_prefix_set(orch_store *s, int64_t e, const char *from, const char *to)
{
    sqlite3 *db = orch_store_db(s);
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db,
                                "WITH RECURSIVE t (id) AS (SELECT ?1 UNION ALL"
                                " SELECT x.id FROM entity AS x JOIN t ON x.parent_id = t.id)"
                                " UPDATE entity SET key = ?3 || substr(key, length(?2) + 1)"
                                " WHERE id IN (SELECT id FROM t)",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, e);
        sqlite3_bind_text(st, 2, from, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, to, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc == SQLITE_DONE)
            return 0;
    }
    return orch_store_error(s, rc, "rekey");
}

int orch_store_root_keys(orch_store *s, int domain, struct orch_root_key **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(orch_store_db(s),
                                "SELECT id, key FROM entity WHERE parent_id IS NULL"
                                " AND domain_id = ? ORDER BY ordinal",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return orch_store_error(s, rc, "rekey");
    sqlite3_bind_int(st, 1, domain);
    size_t cap = 0;
    int ret = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (orch__grow_n(out, &cap, *n + 1, sizeof **out) < 0 ||
            !((*out)[*n].key = strdup((const char *)sqlite3_column_text(st, 1)))) {
            ret = -ENOMEM;
            break;
        }
        (*out)[(*n)++].id = sqlite3_column_int64(st, 0);
    }
    if (ret == 0 && rc != SQLITE_DONE)
        ret = orch_store_error(s, rc, "rekey");
    sqlite3_finalize(st);
    return ret;
}

void orch_root_keys_free(struct orch_root_key *keys, size_t n)
{
    for (size_t k = 0; k < n; k++)
        free(keys[k].key);
    free(keys);
}
