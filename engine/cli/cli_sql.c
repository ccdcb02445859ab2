/* cli_sql.c — `orch sql` (DESIGN §9): the user's read-only SQL over a job's state.db. */
#include "cli_inspect.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orch_error.h"
#include "orch_job.h"
#include "support.h"

static const char sql_help[] =
    "usage: orch sql DIR [--format table|tsv|csv|json] SQL\n"
    "       orch sql DIR [--format FORMAT] -    (the SQL read from standard input)\n"
    "\n"
    "Runs SQL over the job's state.db on a read-only connection: the tables and views of\n"
    "the schema (migrations/0001_initial.sql documents each one; docs/sql.md, \"Views\").\n"
    "Works while the job runs.\n"
    "\n"
    "--format (default: table when standard output is a terminal, else tsv):\n"
    "  table  for people: a header, a line of dashes, then the rows in aligned columns two\n"
    "         spaces apart; numbers right-aligned, NULL empty; tab, newline, carriage\n"
    "         return and backslash written \\t \\n \\r \\\\, other control characters and\n"
    "         bytes that are not UTF-8 \\xNN, so that a row is one line. The rows are held\n"
    "         until the last one is read, to size the columns.\n"
    "  tsv    for line tools: a header line of column names, then one line per row,\n"
    "         tab-separated; NULL empty; the same escapes as table, so that a row is one\n"
    "         line of UTF-8 (PostgreSQL's COPY text format reads them back).\n"
    "  csv    RFC 4180: a header line, then one line per row, comma-separated, each line\n"
    "         ended by CR LF; a value holding a comma, a double quote, CR or LF is quoted\n"
    "         with \" and its double quotes doubled; NULL empty.\n"
    "  json   one JSON object per row (no header): integers and reals as numbers, NULL as\n"
    "         null, text as strings. --json is the same as --format json.\n"
    "Numbers are written as SQLite writes them (7, 0.5, 1.0, 1.0e+20); a blob as SQL\n"
    "writes it, x'00ff' (in JSON, the string \"x'00ff'\"). The result sets of several\n"
    "statements are separated by an empty line (table, tsv, csv).\n"
    "\n"
    "Several statements (separated by ';') run in order. Only statements that read are\n"
    "accepted: any statement that would write (INSERT, UPDATE, DELETE, CREATE, a PRAGMA\n"
    "that sets a value, ...), ATTACH/DETACH and transaction control are refused before\n"
    "any statement runs, and nothing is changed.\n"
    "\n"
    "Function payload(ID): the bytes of payload ID (item.payload_id) as text when they\n"
    "are valid UTF-8, else as a blob; NULL when the payload is not stored (the payloads\n"
    "of ports that are not `output` are reclaimed once every grain that reads them has\n"
    "sealed: view `reclaimed` lists their ids).\n"
    "  orch sql JOB \"SELECT k.key, payload(i.payload_id) FROM item i\n"
    "      JOIN entity_key k ON k.entity_id = i.entity_id WHERE i.state = 'present'\"\n"
    "Function payload_size(ID): its length in bytes (read without copying it), NULL\n"
    "likewise.\n"
    "  orch sql JOB \"SELECT port, sum(payload_size(payload_id)) FROM items GROUP BY 1\"\n"
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

/* payload(ID): the bytes as text when they are UTF-8 without NUL, else as a blob. */
static void give_value(sqlite3_context *ctx, const void *data, size_t len)
{
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

/* payload_size(ID): its length in bytes, read without copying it. */
static void give_size(sqlite3_context *ctx, const void *data, size_t len)
{
    (void)data;
    sqlite3_result_int64(ctx, (sqlite3_int64)len);
}

/* Reads payload argv[0] (see sql_help) in a read transaction of its own and gives it to
 * `give`; NULL when the id is not a stored payload (not an integer, reclaimed, ...). */
static void with_payload(sqlite3_context *ctx, sqlite3_value **argv,
                         void (*give)(sqlite3_context *, const void *, size_t))
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
    else
        give(ctx, data, len);
    orch_payload_read_end(r);
}

static void sql_payload(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    with_payload(ctx, argv, give_value);
}

static void sql_payload_size(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    with_payload(ctx, argv, give_size);
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

/* How rows are written (sql_help says what each looks like). */
enum sql_format { SQL_TABLE, SQL_TSV, SQL_CSV, SQL_JSON };

/* One value as CSV (RFC 4180): quoted when it holds a comma, a double quote, CR or LF,
 * with each double quote doubled. */
static void csv_text(FILE *out, const char *s, size_t n)
{
    bool quote = false;
    for (size_t i = 0; i < n && !quote; i++)
        quote = s[i] == ',' || s[i] == '"' || s[i] == '\r' || s[i] == '\n';
    if (!quote) {
        fwrite(s, 1, n, out);
        return;
    }
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            fputc('"', out);
        fputc(s[i], out);
    }
    fputc('"', out);
}

/* The terminal columns a code point takes: 0 for combining marks and zero-width ones, 2
 * for the wide (East Asian, emoji) blocks, else 1. A table of ranges, not the locale's
 * wcwidth(): the output must not depend on the environment, and most of what a job holds
 * is covered by these blocks. */
static int cp_width(unsigned cp)
{
    static const unsigned zero[][2] = {
        {0x0300, 0x036f}, {0x0483, 0x0489}, {0x0591, 0x05bd}, {0x0610, 0x061a},
        {0x064b, 0x065f}, {0x0e31, 0x0e31}, {0x0e34, 0x0e3a}, {0x1ab0, 0x1aff},
        {0x1dc0, 0x1dff}, {0x200b, 0x200f}, {0x20d0, 0x20ff}, {0xfe00, 0xfe0f},
        {0xfe20, 0xfe2f}, {0xfeff, 0xfeff},
    };
    static const unsigned wide[][2] = {
        {0x1100, 0x115f},   {0x2e80, 0x303e},   {0x3041, 0x33ff},   {0x3400, 0x4dbf},
        {0x4e00, 0x9fff},   {0xa000, 0xa4cf},   {0xac00, 0xd7a3},   {0xf900, 0xfaff},
        {0xfe30, 0xfe4f},   {0xff00, 0xff60},   {0xffe0, 0xffe6},   {0x1f300, 0x1f64f},
        {0x1f900, 0x1f9ff}, {0x20000, 0x2fffd}, {0x30000, 0x3fffd},
    };
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        if (cp >= zero[i][0] && cp <= zero[i][1])
            return 0;
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        if (cp >= wide[i][0] && cp <= wide[i][1])
            return 2;
    return 1;
}

/* Appends text to b as a table cell shows it, escaped as in TSV (text_escape), and returns
 * its width in terminal columns: a cell is one line and cannot move the cursor. */
static size_t table_text(struct orch__buf *b, const unsigned char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0, k; i < n; i += k) {
        unsigned char c = s[i];
        int e = text_escape(s + i, n - i, &k);
        if (e == 'x') {
            orch__buf_printf(b, "\\x%02x", c);
            w += 4;
        } else if (e) {
            orch__buf_putc(b, '\\');
            orch__buf_putc(b, (char)e);
            w += 2;
        } else {
            unsigned cp = k == 1 ? c : c & (0x7fu >> k);
            for (size_t j = 1; j < k; j++)
                cp = cp << 6 | (s[i + j] & 0x3fu);
            orch__buf_add(b, s + i, k);
            w += (size_t)cp_width(cp);
        }
    }
    return w;
}

/* A result set held for `table`, which must see every row to size its columns. The cells'
 * text is kept in one buffer; cells are in row order, ncols a row, the header first. */
struct cell {
    size_t off, len, width; /* in table.text; width in terminal columns */
    bool right;             /* a number: right-aligned */
};
struct table {
    int ncols;
    struct orch__buf text;
    struct cell *cell;
    size_t ncells, cap;
};

static int table_add(struct table *t, const unsigned char *s, size_t n, bool right)
{
    if (orch__grow_n(&t->cell, &t->cap, t->ncells + 1, sizeof *t->cell) < 0)
        return -ENOMEM;
    struct cell *c = &t->cell[t->ncells++];
    c->off = t->text.len;
    c->width = table_text(&t->text, s, n);
    c->len = t->text.len - c->off;
    c->right = right;
    return t->text.oom ? -ENOMEM : 0;
}

static void pad(FILE *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fputc(' ', out);
}

/* Writes the table: the header, a line of dashes under each column, the rows; columns
 * two spaces apart, each as wide as its widest cell; a column of numbers only (NULLs and
 * empty text aside) has its header right-aligned too. No space ends a line. */
static int table_print(FILE *out, const struct table *t)
{
    size_t nc = (size_t)t->ncols, nrows = t->ncells / nc;
    size_t *w = calloc(nc, sizeof *w);
    bool *num = calloc(nc, sizeof *num);
    if (!w || !num) {
        free(w);
        free(num);
        return -ENOMEM;
    }
    for (size_t c = 0; c < nc; c++) {
        bool any = false, all = true;
        for (size_t r = 0; r < nrows; r++) {
            const struct cell *x = &t->cell[r * nc + c];
            if (x->width > w[c])
                w[c] = x->width;
            if (r > 0 && x->len > 0) { /* a value, not a NULL (nor an empty text) */
                any = true;
                all = all && x->right;
            }
        }
        num[c] = any && all;
    }
    for (size_t r = 0; r < nrows; r++) {
        for (size_t c = 0; c < nc; c++) {
            const struct cell *x = &t->cell[r * nc + c];
            bool right = r == 0 ? num[c] : x->right;
            bool last = c + 1 == nc;
            if (c)
                fputs("  ", out);
            if (right)
                pad(out, w[c] - x->width);
            fwrite(t->text.p + x->off, 1, x->len, out);
            if (!right && !last)
                pad(out, w[c] - x->width);
        }
        fputc('\n', out);
        if (r == 0) {
            for (size_t c = 0; c < nc; c++) {
                fputs(c ? "  " : "", out);
                for (size_t i = 0; i < w[c]; i++)
                    fputc('-', out);
            }
            fputc('\n', out);
        }
    }
    free(w);
    free(num);
    return 0;
}

/* Writes the header of a result set in fmt (none in JSON; table: into t). */
static int header(FILE *out, sqlite3_stmt *st, enum sql_format fmt, struct table *t)
{
    int ncols = sqlite3_column_count(st);
    for (int c = 0; c < ncols; c++) {
        const char *name = sqlite3_column_name(st, c);
        if (!name)
            return -ENOMEM;
        switch (fmt) {
        case SQL_TABLE: {
            int rc = table_add(t, (const unsigned char *)name, strlen(name), false);
            if (rc < 0)
                return rc;
            continue;
        }
        case SQL_TSV:
            fputs(c ? "\t" : "", out);
            tsv_str(out, name);
            continue;
        case SQL_CSV:
            fputs(c ? "," : "", out);
            csv_text(out, name, strlen(name));
            continue;
        case SQL_JSON:
            return 0;
        }
    }
    if (fmt == SQL_TSV)
        fputc('\n', out);
    else if (fmt == SQL_CSV)
        fputs("\r\n", out);
    return 0;
}

/* Writes value c of the row st is on (table: into t). */
static int value(FILE *out, sqlite3_stmt *st, int c, enum sql_format fmt, struct table *t)
{
    int type = sqlite3_column_type(st, c);
    if (fmt == SQL_JSON) {
        const char *name = sqlite3_column_name(st, c);
        fputs(c ? ", " : "{", out);
        orch__json_string(out, (const unsigned char *)name, strlen(name));
        fputs(": ", out);
        if (type == SQLITE_NULL ||
            (type == SQLITE_FLOAT && !isfinite(sqlite3_column_double(st, c))))
            return fputs("null", out), 0;
    } else if (fmt == SQL_TSV && c) {
        fputc('\t', out);
    } else if (fmt == SQL_CSV && c) {
        fputc(',', out);
    }
    struct orch__buf blob = {0};
    const unsigned char *s = NULL;
    size_t n = 0;
    switch (type) {
    case SQLITE_NULL: /* empty, as in TSV and CSV */
        return fmt == SQL_TABLE ? table_add(t, (const unsigned char *)"", 0, false) : 0;
    case SQLITE_INTEGER:
    case SQLITE_FLOAT: /* SQLite's own rendering: 7, 0.5, 1.0, 1.0e+20 */
        s = sqlite3_column_text(st, c);
        n = (size_t)sqlite3_column_bytes(st, c);
        if (!s)
            return -ENOMEM;
        if (fmt == SQL_TABLE)
            return table_add(t, s, n, true);
        fwrite(s, 1, n, out);
        return 0;
    case SQLITE_TEXT:
        s = sqlite3_column_text(st, c);
        n = (size_t)sqlite3_column_bytes(st, c);
        if (!s)
            return -ENOMEM;
        break;
    default: { /* a blob, as SQL writes it: x'00ff' */
        const unsigned char *b = sqlite3_column_blob(st, c);
        size_t len = (size_t)sqlite3_column_bytes(st, c);
        orch__buf_puts(&blob, "x'");
        for (size_t i = 0; i < len; i++)
            orch__buf_printf(&blob, "%02x", b[i]);
        orch__buf_putc(&blob, '\'');
        if (blob.oom) {
            orch__buf_free(&blob);
            return -ENOMEM;
        }
        s = (const unsigned char *)blob.p;
        n = blob.len;
    }
    }
    int rc = 0;
    switch (fmt) {
    case SQL_TABLE:
        rc = table_add(t, s, n, false);
        break;
    case SQL_TSV:
        tsv_text(out, (const char *)s, n);
        break;
    case SQL_CSV:
        csv_text(out, (const char *)s, n);
        break;
    case SQL_JSON:
        orch__json_string(out, s, n);
        break;
    }
    orch__buf_free(&blob);
    return rc;
}

/* Runs st and writes its result set in fmt; *printed: whether one was written before
 * (separated from this one by an empty line, in the formats that have a header). */
static int result(struct orch_job *job, sqlite3_stmt *st, enum sql_format fmt, bool *printed)
{
    FILE *out = stdout;
    int ncols = sqlite3_column_count(st), rc = 0;
    struct table t = {.ncols = ncols};
    if (ncols > 0 && fmt != SQL_JSON) {
        if (*printed)
            fputs(fmt == SQL_CSV ? "\r\n" : "\n", out);
        *printed = true;
    }
    if (ncols > 0)
        rc = header(out, st, fmt, &t);
    int step;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 0; c < ncols && rc == 0; c++)
            rc = value(out, st, c, fmt, &t);
        switch (fmt) {
        case SQL_TABLE:
            break;
        case SQL_TSV:
            fputc('\n', out);
            break;
        case SQL_CSV:
            fputs("\r\n", out);
            break;
        case SQL_JSON:
            fputs("}\n", out);
            break;
        }
    }
    if (rc == 0 && step != SQLITE_DONE) {
        fprintf(stderr, "orch: sql: %s\n", sqlite3_errmsg(orch_store_db(job->store)));
        rc = -EINVAL;
    }
    if (rc == 0 && ncols > 0 && fmt == SQL_TABLE)
        rc = table_print(out, &t);
    if (rc == -ENOMEM)
        fprintf(stderr, "orch: sql: out of memory\n");
    orch__buf_free(&t.text);
    free(t.cell);
    return rc;
}

/* Prepares each statement of sql in turn; with run false only checks that each one
 * reads, with run true runs it and prints its rows in fmt. *nstmts counts the
 * statements. */
static int sql_pass(struct orch_job *job, struct sql_guard *g, const char *sql, bool run,
                    enum sql_format fmt, int *nstmts)
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
        rc = result(job, st, fmt, &printed);
        sqlite3_finalize(st);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int parse_format(const char *s, enum sql_format *fmt)
{
    static const char *const name[] = {
        [SQL_TABLE] = "table", [SQL_TSV] = "tsv", [SQL_CSV] = "csv", [SQL_JSON] = "json"};
    for (int f = 0; f < (int)(sizeof name / sizeof name[0]); f++)
        if (strcmp(s, name[f]) == 0) {
            *fmt = (enum sql_format)f;
            return 0;
        }
    return -EINVAL;
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
    enum sql_format fmt = isatty(STDOUT_FILENO) ? SQL_TABLE : SQL_TSV;
    bool opts = true;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (opts && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0))
            return fputs(sql_help, stdout), ORCH_EXIT_OK;
        if (opts && strcmp(a, "--json") == 0)
            fmt = SQL_JSON;
        else if (opts && (strcmp(a, "--format") == 0 || strncmp(a, "--format=", 9) == 0)) {
            const char *f = a[8] == '=' ? a + 9 : i + 1 < argc ? argv[++i] : NULL;
            if (!f)
                return orch_cli_usage_error("sql: --format needs a value: table, tsv, csv "
                                            "or json");
            if (parse_format(f, &fmt) < 0)
                return orch_cli_usage_error("sql: unknown format '%s' (table, tsv, csv or "
                                            "json)",
                                            f);
        } else if (opts && strcmp(a, "--") == 0)
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
                                   NULL) != SQLITE_OK ||
        sqlite3_create_function_v2(db, "payload_size", 1, SQLITE_UTF8, job, sql_payload_size,
                                   NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "orch: sql: %s\n", sqlite3_errmsg(db));
        rc = -ENOMEM;
    }
    sqlite3_set_authorizer(db, sql_authorize, &guard);
    /* Check every statement first, so that a refused one anywhere runs none. Each
     * statement is prepared alone: none can change the schema the next one sees, since
     * only statements that read are accepted. */
    int n = 0;
    if (rc == 0)
        rc = sql_pass(job, &guard, sql, false, fmt, &n);
    if (rc == 0 && n == 0) {
        fprintf(stderr, "orch: sql: no SQL statement given\n");
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = sql_pass(job, &guard, sql, true, fmt, &n);
    sqlite3_set_authorizer(db, NULL, NULL);
    free(input);
    return finish("sql", job, rc);
}
