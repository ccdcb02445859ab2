/* cli_sql.c — `orch sql` (DESIGN §9): the user's read-only SQL over a job's state.db. */
#include "cli_inspect.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "orch_job.h"
#include "support.h"

/* A blob as SQL writes it: x'00ff'. */
static void hex_blob(FILE *out, const unsigned char *b, size_t n)
{
    fputs("x'", out);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%02x", b[i]);
    fputc('\'', out);
}

static const char sql_help[] =
    "usage: orch sql DIR SQL [--json]\n"
    "       orch sql DIR - [--json]          (the SQL read from standard input)\n"
    "\n"
    "Runs SQL over the job's state.db on a read-only connection: the tables and views of\n"
    "the schema (migrations/0001_initial.sql documents each one; README: \"SQL views\").\n"
    "Works while the job runs.\n"
    "\n"
    "Output: for each statement that returns columns, a header line of column names, then\n"
    "one line per row, tab-separated; NULL is empty, a blob is written x'00ff', and tab,\n"
    "newline, carriage return and backslash in values are written \\t \\n \\r \\\\. Result\n"
    "sets of several statements are separated by an empty line.\n"
    "--json: one JSON object per row (no header): integers and reals as numbers, NULL as\n"
    "null, text as strings, blobs as the string \"x'00ff'\".\n"
    "\n"
    "Several statements (separated by ';') run in order. Only statements that read are\n"
    "accepted: any statement that would write (INSERT, UPDATE, DELETE, CREATE, a PRAGMA\n"
    "that sets a value, ...), ATTACH/DETACH and transaction control are refused before\n"
    "any statement runs, and nothing is changed.\n"
    "\n"
    "Function payload(ID): the bytes of payload ID (item.payload_id) as text when they\n"
    "are valid UTF-8, else as a blob; NULL when the payload is not stored (the payloads\n"
    "of ports that are not `output` are reclaimed once every grain that reads them has\n"
    "sealed: table `reclaimed` lists their ids).\n"
    "  orch sql JOB \"SELECT k.key, payload(i.payload_id) FROM item i\n"
    "      JOIN entity_key k ON k.entity_id = i.entity_id WHERE i.state = 'present'\"\n"
    "\n"
    "exit status: 0 done; 1 the job cannot be read, or the SQL is refused or fails;\n"
    "2 usage error.\n";

/* What the authorizer refused, for the message. */
struct sql_guard {
    const char *refused;
};

/* Refuses what a read-only connection would still allow: ATTACH (which could open, and
 * create, another file), DETACH, and transactions (a BEGIN left open by the user's SQL
 * would outlive its statement). Writes are refused by sqlite3_stmt_readonly(). */
static int sql_authorize(void *arg, int action, const char *a, const char *b, const char *c,
                         const char *d)
{
    struct sql_guard *g = arg;
    switch (action) {
    case SQLITE_ATTACH:
        g->refused = "ATTACH";
        return SQLITE_DENY;
    case SQLITE_DETACH:
        g->refused = "DETACH";
        return SQLITE_DENY;
    case SQLITE_TRANSACTION:
        g->refused = "transaction control (BEGIN, COMMIT, ROLLBACK)";
        return SQLITE_DENY;
    case SQLITE_SAVEPOINT:
        g->refused = "SAVEPOINT";
        return SQLITE_DENY;
    default:
        return SQLITE_OK;
    }
}

/* payload(ID): see sql_help. */
static void sql_payload(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    struct orch_job *job = sqlite3_user_data(ctx);
    if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER)
        return sqlite3_result_null(ctx);
    sqlite3_int64 id = sqlite3_value_int64(argv[0]);
    if (id <= 0)
        return sqlite3_result_null(ctx);
    orch_payload_rtxn *r;
    int rc = orch_payload_read_begin(job->payloads, &r);
    if (rc < 0)
        return sqlite3_result_error(ctx, detail_or(rc), -1);
    const void *data;
    size_t len;
    rc = orch_payload_read(r, (uint64_t)id, &data, &len);
    if (rc == ORCH_ENOTFOUND)
        sqlite3_result_null(ctx);
    else if (rc < 0)
        sqlite3_result_error(ctx, detail_or(rc), -1);
    else {
        bool text = true;
        for (size_t i = 0; i < len && text;) {
            size_t k = orch__utf8_len((const unsigned char *)data + i, len - i);
            text = k > 0 && memchr((const char *)data + i, '\0', k) == NULL;
            i += k;
        }
        if (text)
            sqlite3_result_text64(ctx, len ? data : "", len, SQLITE_TRANSIENT, SQLITE_UTF8);
        else
            sqlite3_result_blob64(ctx, data, len, SQLITE_TRANSIENT);
    }
    orch_payload_read_end(r);
}

/* The statement's text, on one line, shortened for a message. */
static void print_stmt_text(FILE *out, sqlite3_stmt *st)
{
    const char *s = sqlite3_sql(st);
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == ';'))
        n--;
    for (size_t i = 0; i < n && i < 200; i++)
        fputc(s[i] == '\n' || s[i] == '\t' ? ' ' : s[i], out);
    if (n > 200)
        fputs("...", out);
}

/* Prepares each statement of sql in turn; with run false only checks that each one
 * reads, with run true runs it and prints its rows. *nstmts counts the statements. */
static int sql_pass(struct orch_job *job, struct sql_guard *g, const char *sql, bool run,
                    bool json, int *nstmts)
{
    sqlite3 *db = orch_store_db(job->store);
    bool printed = false;
    *nstmts = 0;
    for (const char *tail = sql; tail && *tail;) {
        sqlite3_stmt *st = NULL;
        g->refused = NULL;
        int rc = sqlite3_prepare_v2(db, tail, -1, &st, &tail);
        if (rc != SQLITE_OK) {
            if (g->refused)
                fprintf(stderr, "orch: sql: %s is not allowed: the job is read-only\n",
                        g->refused);
            else
                fprintf(stderr, "orch: sql: %s\n", sqlite3_errmsg(db));
            return -EINVAL;
        }
        if (!st)
            continue; /* only white space or a comment */
        ++*nstmts;
        if (!run) {
            if (!sqlite3_stmt_readonly(st)) {
                fputs("orch: sql: refused: the job is read-only; only statements that read "
                      "are allowed: ",
                      stderr);
                print_stmt_text(stderr, st);
                fputc('\n', stderr);
                sqlite3_finalize(st);
                return -EROFS;
            }
            sqlite3_finalize(st);
            continue;
        }
        int ncols = sqlite3_column_count(st);
        if (ncols > 0 && !json) {
            if (printed)
                fputc('\n', stdout);
            for (int c = 0; c < ncols; c++) {
                if (c)
                    fputc('\t', stdout);
                tsv_str(stdout, sqlite3_column_name(st, c));
            }
            fputc('\n', stdout);
            printed = true;
        }
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (json)
                fputc('{', stdout);
            for (int c = 0; c < ncols; c++) {
                if (json) {
                    const char *name = sqlite3_column_name(st, c);
                    fputs(c ? ", " : "", stdout);
                    orch__json_string(stdout, (const unsigned char *)name, strlen(name));
                    fputs(": ", stdout);
                } else if (c)
                    fputc('\t', stdout);
                switch (sqlite3_column_type(st, c)) {
                case SQLITE_NULL:
                    if (json)
                        fputs("null", stdout);
                    break;
                case SQLITE_INTEGER:
                    fprintf(stdout, "%lld", (long long)sqlite3_column_int64(st, c));
                    break;
                case SQLITE_FLOAT: {
                    double v = sqlite3_column_double(st, c);
                    if (json && !isfinite(v))
                        fputs("null", stdout);
                    else /* SQLite's own rendering: 0.5, 1.0, 1.0e+20 */
                        fputs((const char *)sqlite3_column_text(st, c), stdout);
                    break;
                }
                case SQLITE_TEXT: {
                    const unsigned char *t = sqlite3_column_text(st, c);
                    size_t n = (size_t)sqlite3_column_bytes(st, c);
                    if (json)
                        orch__json_string(stdout, t, n);
                    else
                        tsv_text(stdout, (const char *)t, n);
                    break;
                }
                default: {
                    const unsigned char *b = sqlite3_column_blob(st, c);
                    size_t n = (size_t)sqlite3_column_bytes(st, c);
                    if (json)
                        fputc('"', stdout);
                    hex_blob(stdout, b, n);
                    if (json)
                        fputc('"', stdout);
                }
                }
            }
            fputs(json ? "}\n" : "\n", stdout);
        }
        if (rc != SQLITE_DONE) {
            fprintf(stderr, "orch: sql: %s\n", sqlite3_errmsg(db));
            sqlite3_finalize(st);
            return -EINVAL;
        }
        sqlite3_finalize(st);
    }
    return 0;
}

/* Reads all of standard input into a NUL-terminated string (free it), or NULL. */
static char *read_stdin(void)
{
    struct orch__buf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        orch__buf_add(&b, chunk, n);
    orch__buf_putc(&b, '\0');
    if (ferror(stdin) || b.oom) {
        orch__buf_free(&b);
        return NULL;
    }
    return orch__buf_steal(&b);
}

int orch_cli_sql(int argc, char **argv)
{
    bool json = false, opts = true;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (opts && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0))
            return fputs(sql_help, stdout), ORCH_EXIT_OK;
        if (opts && strcmp(a, "--json") == 0)
            json = true;
        else if (opts && strcmp(a, "--") == 0)
            opts = false;
        else if (opts && a[0] == '-' && a[1])
            return orch_cli_usage_error("sql: unknown option '%s' (SQL that starts with '-' "
                                        "goes after --)",
                                        a);
        else if (npos < 2)
            pos[npos++] = a;
        else
            return orch_cli_usage_error("sql: unexpected argument '%s' (give the SQL as "
                                        "one argument)",
                                        a);
    }
    if (npos != 2)
        return orch_cli_usage_error("sql: give a job directory and the SQL");
    char *input = NULL;
    if (strcmp(pos[1], "-") == 0 && !(input = read_stdin())) {
        fprintf(stderr, "orch: sql: cannot read standard input\n");
        return ORCH_EXIT_FAIL;
    }
    const char *sql = input ? input : pos[1];
    struct orch_job *job;
    if (open_job(pos[0], &job) != ORCH_EXIT_OK) {
        free(input);
        return ORCH_EXIT_FAIL;
    }
    sqlite3 *db = orch_store_db(job->store);
    struct sql_guard guard = {0};
    int rc = 0;
    if (sqlite3_create_function_v2(db, "payload", 1, SQLITE_UTF8, job, sql_payload, NULL, NULL,
                                   NULL) != SQLITE_OK) {
        fprintf(stderr, "orch: sql: %s\n", sqlite3_errmsg(db));
        rc = -ENOMEM;
    }
    sqlite3_set_authorizer(db, sql_authorize, &guard);
    /* Check every statement first, so that a refused one anywhere runs none. Each
     * statement is prepared alone: none can change the schema the next one sees, since
     * only statements that read are accepted. */
    int n = 0;
    if (rc == 0)
        rc = sql_pass(job, &guard, sql, false, json, &n);
    if (rc == 0 && n == 0) {
        fprintf(stderr, "orch: sql: no SQL statement given\n");
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = sql_pass(job, &guard, sql, true, json, &n);
    sqlite3_set_authorizer(db, NULL, NULL);
    free(input);
    return finish("sql", job, rc);
}
