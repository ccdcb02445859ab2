/* cli_export.c — `orch export DIR D.P [--all] [--format jsonl]`: the items of one port as
 * JSON lines, in entity order (root order, then ordinal, depth first). */
#include "cli.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "orch_job.h"
#include "orch_states.h"
#include "support.h"

static const char export_help[] =
    "usage: orch export DIR D.P [--all] [--format jsonl]\n"
    "\n"
    "Writes the present items of port D.P, one JSON object per line, in entity order\n"
    "(root order, then ordinal, depth first):\n"
    "  {\"key\": \"docs/a.txt/3\", \"state\": \"present\", \"value\": \"...\"}\n"
    "The value is a JSON string when it is valid UTF-8, else \"value_b64\" (base64).\n"
    "--all adds the entities whose item is dropped, failed or suppressed (with \"state\"\n"
    "and, for failures, \"error\"). Works while the job runs (read-only).\n"
    "A present item of a port that is not `output` whose payload was reclaimed (every\n"
    "grain that reads it has sealed) has \"reclaimed\": true and no value.\n"
    "\n"
    "exit status: 0 done; 1 the job or the port cannot be read; 2 usage error.\n";

static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = orch__utf8_len(s + i, n - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

static void base64(FILE *out, const unsigned char *s, size_t n)
{
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    fputc('"', out);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        fputc(tab[v >> 18 & 63], out);
        fputc(tab[v >> 12 & 63], out);
        fputc(i + 1 < n ? tab[v >> 6 & 63] : '=', out);
        fputc(i + 2 < n ? tab[v & 63] : '=', out);
    }
    fputc('"', out);
}

/* The entities of domain d under the live roots (a retired root's tree is history:
 * DESIGN §10), in entity order (roots in the order the source gave them at the job's last
 * scan, root.position) with their key, and the item of `port` (when
 * terminal) with, for a failed item, the message of the failure that made it. The chain
 * of domains from the root down to d keeps the walk off other branches of the tree; the
 * walk is there for the order (ordinals compared as numbers, depth first), the keys are
 * stored (entity.key). */
static int export_port(struct orch_job *job, int port, bool all, FILE *out)
{
    const orch_plan *p = job->plan;
    const struct orch_port *pt = orch_plan_port(p, port);
    struct orch__buf chain = {0};
    int root = pt->domain;
    for (int x = pt->domain; x >= 0; x = orch_plan_domain(p, x)->parent) {
        orch__buf_printf(&chain, "%s%d", chain.len ? "," : "", x);
        root = x;
    }
    /* The failure of the grain that produced the item: on the entity itself, or on its
     * parent for the outputs of an aligned expand; for an expand's outputs, first a
     * failure about this very child (a failed child: failure.entity_id). */
    int producer_call = pt->producer >= 0 ? orch_plan_stmt(p, pt->producer)->call : -1;
    enum orch_op producer_op = pt->producer >= 0 ? orch_plan_stmt(p, pt->producer)->op
                                                 : ORCH_OP_BROADCAST;
    bool on_parent = producer_op == ORCH_OP_EXPAND_ALIGNED;
    bool children = producer_op == ORCH_OP_EXPAND || producer_op == ORCH_OP_EXPAND_ALIGNED;
    struct orch__buf sql = {0};
    orch__buf_printf(
        &sql,
        "WITH RECURSIVE t (id, parent_id, domain_id, key, path) AS ("
        " SELECT e.id, e.parent_id, e.domain_id, e.key,"
        "  printf('%%012d.%%012d', r.position, e.id)"
        "  FROM root AS r JOIN entity AS e ON e.id = r.entity_id"
        "  WHERE r.retired_at IS NULL AND r.domain_id = %d"
        " UNION ALL"
        " SELECT e.id, e.parent_id, e.domain_id, e.key,"
        "  t.path || '.' || printf('%%012d', e.ordinal)"
        "  FROM t JOIN entity AS e ON e.parent_id = t.id WHERE e.domain_id IN (%s))"
        " SELECT t.key, i.state, i.payload_id, coalesce(%s"
        "  (SELECT f.message FROM grain AS g JOIN failure AS f ON f.grain_id = g.id"
        "   WHERE g.call_id = %d AND g.entity_id = %s AND f.entity_id IS NULL"
        "   AND (f.kind = ?1 OR f.kind = ?2 OR f.kind = ?3) ORDER BY f.id DESC LIMIT 1)),"
        " coalesce((SELECT r.last >= i.payload_id FROM reclaimed_span AS r"
        "  WHERE r.first <= i.payload_id ORDER BY r.first DESC LIMIT 1), 0)"
        " FROM t JOIN item AS i ON i.entity_id = t.id AND i.port_id = %d"
        " WHERE t.domain_id = %d %s ORDER BY t.path",
        root, chain.p ? chain.p : "",
        !children ? "NULL,"
                  : "(SELECT f.message FROM failure AS f JOIN grain AS g ON g.id = f.grain_id"
                    "   WHERE f.entity_id = t.id AND g.call_id = ?5 ORDER BY f.id DESC LIMIT 1),",
        producer_call, on_parent ? "t.parent_id" : "t.id", port, pt->domain,
        all ? "" : "AND i.state = ?4");
    orch__buf_free(&chain);
    if (sql.oom)
        return -ENOMEM;
    sqlite3 *db = orch_store_db(job->store);
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, sql.p, -1, &st, NULL);
    orch__buf_free(&sql);
    if (rc != SQLITE_OK)
        return orch_store_error(job->store, rc, "export");
    /* The kinds that seal a grain Failed (their message is the item's "error"); the
     * state that export shows without --all. */
    static const enum orch_failure_kind sealing[] = {ORCH_FAILURE_RECORD, ORCH_FAILURE_GROUP,
                                                     ORCH_FAILURE_EXHAUSTED};
    for (int k = 0; k < (int)(sizeof sealing / sizeof *sealing) && rc == SQLITE_OK; k++)
        rc =
            sqlite3_bind_text(st, k + 1, orch_failure_kind_name(sealing[k]), -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && !all)
        rc = sqlite3_bind_text(st, 4, orch_item_state_name(ORCH_ITEM_PRESENT), -1,
                               SQLITE_STATIC);
    if (rc == SQLITE_OK && children)
        rc = sqlite3_bind_int(st, 5, producer_call);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(st);
        return orch_store_error(job->store, rc, "export");
    }
    orch_payload_rtxn *r = NULL;
    int err = orch_payload_read_begin(job->payloads, &r);
    while (err == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *state = (const char *)sqlite3_column_text(st, 1);
        const unsigned char *key = sqlite3_column_text(st, 0);
        bool present = orch_item_state_parse(state) == ORCH_ITEM_PRESENT;
        /* Its payload was freed once every grain reading it sealed (a port that is not
         * `output`: engine/prop/reclaim.c): the fact stands, its bytes are gone. */
        bool reclaimed = present && sqlite3_column_int(st, 4) != 0;
        const void *data = NULL;
        size_t len = 0;
        /* The payload is read before anything of the line is written: an unreadable one
         * stops the export after the last whole line, never in the middle of one. */
        if (present && !reclaimed &&
            (err = orch_payload_read(r, (uint64_t)sqlite3_column_int64(st, 2), &data, &len)) <
                0) {
            err = orch_error_set(err, "payload %lld of %s is unreadable: %s",
                                 (long long)sqlite3_column_int64(st, 2), key,
                                 orch_error_detail());
            break;
        }
        fputs("{\"key\": ", out);
        orch__json_string(out, key, (size_t)sqlite3_column_bytes(st, 0));
        fprintf(out, ", \"state\": \"%s\"", state);
        if (reclaimed) {
            fputs(", \"reclaimed\": true", out);
        } else if (present) {
            if (valid_utf8(data, len)) {
                fputs(", \"value\": ", out);
                orch__json_string(out, data, len);
            } else {
                fputs(", \"value_b64\": ", out);
                base64(out, data, len);
            }
        } else if (sqlite3_column_type(st, 3) != SQLITE_NULL) {
            fputs(", \"error\": ", out);
            orch__json_string(out, sqlite3_column_text(st, 3),
                              (size_t)sqlite3_column_bytes(st, 3));
        }
        fputs("}\n", out);
    }
    orch_payload_read_end(r);
    if (err == 0 && rc != SQLITE_DONE)
        err = orch_store_error(job->store, rc, "export");
    sqlite3_finalize(st);
    return err;
}

int orch_cli_export(int argc, char **argv)
{
    bool all = false;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(export_help, stdout), ORCH_EXIT_OK;
        if (strcmp(argv[i], "--all") == 0)
            all = true;
        else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
            if (strcmp(argv[++i], "jsonl") != 0)
                return orch_cli_usage_error("export: the only format is jsonl");
        } else if (argv[i][0] == '-' && argv[i][1])
            return orch_cli_usage_error("export: unknown option '%s'", argv[i]);
        else if (npos < 2)
            pos[npos++] = argv[i];
        else
            return orch_cli_usage_error("export: unexpected argument '%s'", argv[i]);
    }
    if (npos != 2)
        return orch_cli_usage_error("export: give a job directory and a port (D.P)");
    struct orch_job *job;
    orch_error_clear();
    int rc = orch_job_open(pos[0], ORCH_JOB_READONLY, &job);
    if (rc < 0) {
        fprintf(stderr, "orch: %s\n",
                orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc));
        return ORCH_EXIT_FAIL;
    }
    int port = orch_plan_find_port(job->plan, pos[1]);
    if (port < 0) {
        fprintf(stderr, "orch: export: the job has no port '%s'\n", pos[1]);
        orch_job_close(job);
        return ORCH_EXIT_FAIL;
    }
    int producer = orch_plan_port(job->plan, port)->producer;
    int source = orch_plan_port(job->plan, port)->source;
    if ((producer >= 0 && orch_plan_stmt(job->plan, producer)->retired) ||
        (source >= 0 && orch_plan_source(job->plan, source)->retired)) {
        fprintf(stderr,
                "orch: export: port '%s' left the pipeline at an edit (orch update); its "
                "items stay in state.db as history: orch sql %s \"SELECT * FROM items WHERE "
                "port = '%s'\"\n",
                pos[1], pos[0], pos[1]);
        orch_job_close(job);
        return ORCH_EXIT_FAIL;
    }
    rc = export_port(job, port, all, stdout);
    if (rc < 0)
        fprintf(stderr, "orch: export: %s\n",
                orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc));
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "orch: export: cannot write: %s\n", strerror(errno));
        rc = -errno;
    }
    orch_job_close(job);
    return rc < 0 ? ORCH_EXIT_FAIL : ORCH_EXIT_OK;
}
