/* cli_inspect.c — the read-only inspection commands of DESIGN §9: `orch status`, `orch sql`,
 * `orch lineage` and `orch failures`.
 *
 * Every command opens the job with ORCH_JOB_READONLY: no lock, no writes, and a read-only
 * SQLite connection, so it works while a driver runs the job (WAL readers see the last
 * committed state and never block the writer). What one command prints comes from one
 * statement where the numbers must agree with each other (status), since separate
 * statements may see different commits of a live driver.
 *
 * Text output is meant for people and for line tools alike: tab-separated values escape
 * tab, newline, carriage return and backslash as \t \n \r \\ (the text format of
 * PostgreSQL's COPY), so that one record is always one line.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "orch_error.h"
#include "orch_job.h"
#include "support.h"

/* ---- shared helpers ------------------------------------------------------------------- */

static const char *detail_or(int rc)
{
    return orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc);
}

/* Opens the job at dir read-only; on failure prints why and returns ORCH_EXIT_FAIL. */
static int open_job(const char *dir, struct orch_job **job)
{
    orch_error_clear();
    int rc = orch_job_open(dir, ORCH_JOB_READONLY, job);
    if (rc < 0) {
        fprintf(stderr, "orch: %s\n", detail_or(rc));
        return ORCH_EXIT_FAIL;
    }
    return ORCH_EXIT_OK;
}

/* Flushes stdout, closes the job and turns rc (0 or a negative code, already reported)
 * into the command's exit status. */
static int finish(const char *cmd, struct orch_job *job, int rc)
{
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "orch: %s: cannot write: %s\n", cmd, strerror(errno));
        rc = -errno;
    }
    orch_job_close(job);
    return rc < 0 ? ORCH_EXIT_FAIL : ORCH_EXIT_OK;
}

/* Prepares sql on the job's connection, for text built or given at run time (the store's
 * cache is for the engine's fixed texts). The caller finalizes *st. */
static int prepare(struct orch_job *job, const char *sql, sqlite3_stmt **st, const char *what)
{
    int rc = sqlite3_prepare_v2(orch_store_db(job->store), sql, -1, st, NULL);
    return rc == SQLITE_OK ? 0 : orch_store_error(job->store, rc, what);
}

/* One value of a tab-separated line: \t \n \r \\ escaped. */
static void tsv_text(FILE *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '\t':
            fputs("\\t", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        default:
            fputc(s[i], out);
        }
    }
}

static void tsv_str(FILE *out, const char *s)
{
    tsv_text(out, s ? s : "", s ? strlen(s) : 0);
}

/* A blob as SQL writes it: x'00ff'. */
static void hex_blob(FILE *out, const unsigned char *b, size_t n)
{
    fputs("x'", out);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%02x", b[i]);
    fputc('\'', out);
}

/* A JSON string; bytes that are not valid UTF-8 become U+FFFD. */
static void json_string(FILE *out, const unsigned char *s, size_t n)
{
    fputc('"', out);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t k = orch__utf8_len(s + i, n - i);
            if (k == 0) {
                fputs("\\ufffd", out);
                i++;
            } else {
                fwrite(s + i, 1, k, out);
                i += k;
            }
            continue;
        }
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c == '\r')
            fputs("\\r", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
        i++;
    }
    fputc('"', out);
}

/* ms since the epoch as ISO 8601 UTC with milliseconds: 2024-05-01T10:00:00.123Z. */
static void iso_time(char *buf, size_t n, int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(buf, n, "%" PRId64 "ms", ms);
        return;
    }
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, ".%03dZ", (int)(ms % 1000));
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- orch status ---------------------------------------------------------------------- */

static const char status_help[] =
    "usage: orch status DIR\n"
    "\n"
    "Shows the job's name, status (created, running, finished), plan hash and whether a\n"
    "driver is running it now; per call (the `progress` view): grains by phase and the\n"
    "sealed ones by outcome; failures by kind; attempts, and throughput: sealed grains per\n"
    "second from the first attempt's start to the last attempt's end (now, while an\n"
    "attempt runs). The numbers come from one snapshot. Works while the job runs.\n"
    "\n"
    "exit status: 0 done; 1 the job cannot be read; 2 usage error.\n";

/* Whether a driver holds the job's lock now (engine/job.c: an flock on DIR/lock, with
 * the holder's pid written in the file), and that pid (0 when unknown).
 *
 * The file is never created here. When the pid recorded in it is gone, no driver holds
 * the lock (the kernel released it with the process), and it is not probed. Else the
 * probe takes a shared lock for an instant: that fails while a driver holds it. The
 * probe is skipped when it can be because, for its instant, it would make a `resume`
 * starting at the same moment refuse to run. */
static bool driver_live(const char *dir, long *pid)
{
    *pid = 0;
    struct orch__buf path = {0};
    orch__buf_printf(&path, "%s/lock", dir);
    int fd = path.oom ? -1 : open(path.p, O_RDONLY | O_CLOEXEC);
    orch__buf_free(&path);
    if (fd < 0)
        return false;
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    *pid = strtol(buf, NULL, 10);
    bool live;
    if (*pid > 0 && kill((pid_t)*pid, 0) != 0 && errno == ESRCH)
        live = false;
    else if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        flock(fd, LOCK_UN);
        live = false;
    } else
        live = errno == EWOULDBLOCK;
    close(fd);
    if (!live)
        *pid = 0;
    return live;
}

/* The count columns of the progress view, in its order. */
#define NPROGRESS 9
static const char *const progress_cols[NPROGRESS] = {
    "total", "waiting", "ready", "in_flight", "sealed", "ok", "dropped", "failed", "suppressed",
};

struct status {
    int ncalls;
    const char **call;            /* names, plan order */
    int64_t (*counts)[NPROGRESS]; /* per call */
    struct orch__buf failures;    /* "record 2, error 1" */
    int64_t nfailures;
    int64_t attempts, running, first_start, last_end;
    char job_status[16];
};

/* Reads everything status prints in ONE statement, so that its numbers agree with each
 * other while a driver commits: rows tagged 0 (a call of `progress`), 1 (failures of one
 * kind), 2 (the attempts), 3 (the job row). */
static int status_read(struct orch_job *job, struct status *s)
{
    static const char sql[] =
        "SELECT 0, call, total, waiting, ready, in_flight, sealed, ok, dropped, failed,"
        "       suppressed FROM progress"
        " UNION ALL SELECT 1, kind, count(*), 0, 0, 0, 0, 0, 0, 0, 0 FROM failure"
        "  GROUP BY kind"
        " UNION ALL SELECT 2, NULL, count(*), count(*) - count(ended_at),"
        "  coalesce(min(started_at), 0), coalesce(max(ended_at), 0), 0, 0, 0, 0, 0"
        "  FROM attempt"
        " UNION ALL SELECT 3, status, 0, 0, 0, 0, 0, 0, 0, 0, 0 FROM job";
    sqlite3_stmt *st;
    int rc = prepare(job, sql, &st, "status");
    if (rc < 0)
        return rc;
    struct {
        const char *kind;
        int64_t n;
    } kinds[16];
    int nkinds = 0;
    while ((rc = orch_store_step(job->store, st)) == 1) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        switch (sqlite3_column_int(st, 0)) {
        case 0: {
            int c = name ? orch_plan_find_call(job->plan, name) : -1;
            if (c < 0 || c >= s->ncalls)
                break; /* the plan and its rows agree (checked at open) */
            for (int k = 0; k < NPROGRESS; k++)
                s->counts[c][k] = sqlite3_column_int64(st, 2 + k);
            break;
        }
        case 1: {
            /* At most the six kinds of the schema; keep them sorted by count (then name)
             * as they come. */
            int64_t n = sqlite3_column_int64(st, 2);
            s->nfailures += n;
            int kind = orch_failure_kind_parse(name);
            if (kind < 0 || nkinds == (int)(sizeof kinds / sizeof kinds[0]))
                break;
            int i = nkinds++;
            for (; i > 0 && kinds[i - 1].n < n; i--)
                kinds[i] = kinds[i - 1];
            kinds[i].kind = orch_failure_kind_name((enum orch_failure_kind)kind);
            kinds[i].n = n;
            break;
        }
        case 2:
            s->attempts = sqlite3_column_int64(st, 2);
            s->running = sqlite3_column_int64(st, 3);
            s->first_start = sqlite3_column_int64(st, 4);
            s->last_end = sqlite3_column_int64(st, 5);
            break;
        case 3:
            snprintf(s->job_status, sizeof s->job_status, "%s", name ? name : "?");
            break;
        }
    }
    sqlite3_finalize(st);
    for (int i = 0; i < nkinds; i++)
        orch__buf_printf(&s->failures, "%s%s %" PRId64, i ? ", " : "", kinds[i].kind,
                         kinds[i].n);
    if (rc == 0 && s->failures.oom)
        rc = -ENOMEM;
    return rc;
}

static int digits(int64_t v)
{
    int d = 1;
    for (; v >= 10; v /= 10)
        d++;
    return d;
}

/* The table of calls: a header, one row per call in plan order, columns aligned. */
static void status_table(FILE *out, const struct status *s)
{
    int namew = 4;
    for (int c = 0; c < s->ncalls; c++)
        if ((int)strlen(s->call[c]) > namew)
            namew = (int)strlen(s->call[c]);
    int w[NPROGRESS];
    for (int k = 0; k < NPROGRESS; k++) {
        w[k] = (int)strlen(progress_cols[k]);
        for (int c = 0; c < s->ncalls; c++)
            if (digits(s->counts[c][k]) > w[k])
                w[k] = digits(s->counts[c][k]);
    }
    fprintf(out, "%-*s", namew, "call");
    for (int k = 0; k < NPROGRESS; k++)
        fprintf(out, "  %*s", w[k], progress_cols[k]);
    fputc('\n', out);
    for (int c = 0; c < s->ncalls; c++) {
        fprintf(out, "%-*s", namew, s->call[c]);
        for (int k = 0; k < NPROGRESS; k++)
            fprintf(out, "  %*" PRId64, w[k], s->counts[c][k]);
        fputc('\n', out);
    }
}

static void status_print(FILE *out, struct orch_job *job, const struct status *s)
{
    long pid;
    bool live = driver_live(job->dir, &pid);
    fprintf(out, "job:        %s\n", job->info->name);
    fprintf(out, "status:     %s\n", s->job_status);
    fprintf(out, "plan:       %.12s\n", job->info->plan_hash);
    if (live && pid > 0)
        fprintf(out, "driver:     running (pid %ld)\n", pid);
    else if (live)
        fprintf(out, "driver:     running\n");
    else if (strcmp(s->job_status, "finished") == 0)
        fprintf(out, "driver:     none\n");
    else
        fprintf(out, "driver:     none (resume with `orch resume %s`)\n", job->dir);
    fputc('\n', out);
    status_table(out, s);
    fputc('\n', out);
    if (s->nfailures)
        fprintf(out, "failures:   %" PRId64 " (%s; see `orch failures %s`)\n", s->nfailures,
                s->failures.p ? s->failures.p : "", job->dir);
    else
        fprintf(out, "failures:   0\n");
    /* Attempts that have not ended run now only while a driver does; else they were
     * interrupted, and the next resume closes them. */
    fprintf(out, "attempts:   %" PRId64 " (%" PRId64 " %s)\n", s->attempts, s->running,
            live || !s->running ? "running" : "interrupted, not ended");
    if (s->attempts == 0)
        return;
    int64_t sealed = 0;
    for (int c = 0; c < s->ncalls; c++)
        sealed += s->counts[c][4]; /* progress_cols[4]: sealed */
    int64_t end = live && s->running ? now_ms() : s->last_end;
    if (end < s->first_start) /* no attempt has ended */
        end = s->first_start;
    int64_t span = end - s->first_start;
    char from[40], to[40];
    iso_time(from, sizeof from, s->first_start);
    iso_time(to, sizeof to, end);
    fprintf(out, "span:       %s .. %s (%.3f s)\n", from, to, (double)span / 1000.0);
    if (span > 0)
        fprintf(out, "throughput: %.1f grains/s (%" PRId64 " sealed)\n",
                (double)sealed * 1000.0 / (double)span, sealed);
}

int orch_cli_status(int argc, char **argv)
{
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(status_help, stdout), ORCH_EXIT_OK;
        if (argv[i][0] == '-' && argv[i][1])
            return orch_cli_usage_error("status: unknown option '%s'", argv[i]);
        if (dir)
            return orch_cli_usage_error("status: unexpected argument '%s'", argv[i]);
        dir = argv[i];
    }
    if (!dir)
        return orch_cli_usage_error("status: give a job directory");
    struct orch_job *job;
    if (open_job(dir, &job) != ORCH_EXIT_OK)
        return ORCH_EXIT_FAIL;
    struct status s = {.ncalls = orch_plan_ncalls(job->plan)};
    s.call = calloc((size_t)s.ncalls + 1, sizeof *s.call);
    s.counts = calloc((size_t)s.ncalls + 1, sizeof *s.counts);
    int rc = s.call && s.counts ? 0 : -ENOMEM;
    for (int c = 0; rc == 0 && c < s.ncalls; c++)
        s.call[c] = orch_plan_call(job->plan, c)->name;
    if (rc == 0)
        rc = status_read(job, &s);
    if (rc == 0)
        status_print(stdout, job, &s);
    else
        fprintf(stderr, "orch: status: %s\n", detail_or(rc));
    free(s.call);
    free(s.counts);
    orch__buf_free(&s.failures);
    return finish("status", job, rc);
}

/* ---- orch sql ------------------------------------------------------------------------- */

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
    "are valid UTF-8, else as a blob; NULL when the payload is not stored (payloads of\n"
    "ports that are not `output` may be reclaimed once the job has finished).\n"
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
                    json_string(stdout, (const unsigned char *)name, strlen(name));
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
                        json_string(stdout, t, n);
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

/* ---- orch lineage --------------------------------------------------------------------- */

static const char lineage_help[] =
    "usage: orch lineage DIR [--depth N] [--] ENTITY\n"
    "\n"
    "Shows one entity: its chain of ancestors from the root (domain, key, #id), then the\n"
    "entity and the tree of its descendants, indented, each with the state of the items\n"
    "of its domain's ports (port=present|dropped|failed|suppressed, or pending while the\n"
    "item is not terminal). Children come by domain, then ordinal.\n"
    "\n"
    "ENTITY is an entity key (a root's key is its source value; a child's key is its\n"
    "parent's key, '/', and its ordinal: docs/a.txt/3) or #ID (entity.id). A key that names\n"
    "several entities (root keys may repeat; two child domains share ordinals) is refused\n"
    "with the list of their #IDs.\n"
    "\n"
    "  --depth N   show descendants down to N levels below the entity (default: all)\n"
    "\n"
    "exit status: 0 done; 1 the job cannot be read or has no such entity; 2 usage error.\n";

struct lineage {
    struct orch_job *job;
    sqlite3_stmt *row;   /* one entity by id */
    sqlite3_stmt *root;  /* roots by key */
    sqlite3_stmt *child; /* a child by parent, domain and ordinal */
    sqlite3_stmt *item;  /* an item's state */
    sqlite3_stmt **kids; /* per level below the entity: its children, in order */
    int nkids;
    int64_t *found; /* entities a key names */
    int nfound, capfound;
};

struct entity_row {
    int64_t id, parent, ordinal;
    int domain;
};

static int lineage_step(struct lineage *L, sqlite3_stmt *st)
{
    return orch_store_step(L->job->store, st);
}

/* Reads entity id; 1 when found, 0 when there is none, or a negative code. */
static int entity_get(struct lineage *L, int64_t id, struct entity_row *e)
{
    sqlite3_reset(L->row);
    sqlite3_bind_int64(L->row, 1, id);
    int rc = lineage_step(L, L->row);
    if (rc == 1) {
        e->id = id;
        e->parent =
            sqlite3_column_type(L->row, 0) == SQLITE_NULL ? 0 : sqlite3_column_int64(L->row, 0);
        e->domain = sqlite3_column_int(L->row, 1);
        e->ordinal = sqlite3_column_int64(L->row, 2);
        if (e->domain < 0 || e->domain >= orch_plan_ndomains(L->job->plan))
            rc = orch_error_set(ORCH_ECORRUPT, "entity #%" PRId64 " has an unknown domain", id);
    }
    sqlite3_reset(L->row);
    return rc;
}

static int found_add(struct lineage *L, int64_t id)
{
    if (L->nfound == L->capfound) {
        int cap = L->capfound ? 2 * L->capfound : 8;
        int64_t *n = realloc(L->found, (size_t)cap * sizeof *n);
        if (!n)
            return -ENOMEM;
        L->found = n;
        L->capfound = cap;
    }
    L->found[L->nfound++] = id;
    return 0;
}

/* Walks the ordinals of path (digits separated by '/', already checked) down from entity
 * id of domain dom, through every child domain; adds the entities reached to L->found. */
static int walk_down(struct lineage *L, int64_t id, int dom, const char *path)
{
    if (!*path)
        return found_add(L, id);
    char *end;
    long long ord = strtoll(path, &end, 10);
    const char *rest = *end == '/' ? end + 1 : end;
    const struct orch_domain *d = orch_plan_domain(L->job->plan, dom);
    for (int i = 0; i < d->nchildren; i++) {
        sqlite3_reset(L->child);
        sqlite3_bind_int64(L->child, 1, id);
        sqlite3_bind_int(L->child, 2, d->children[i]);
        sqlite3_bind_int64(L->child, 3, ord);
        int rc = lineage_step(L, L->child);
        int64_t kid = rc == 1 ? sqlite3_column_int64(L->child, 0) : 0;
        sqlite3_reset(L->child);
        if (rc < 0)
            return rc;
        if (rc == 1 && (rc = walk_down(L, kid, d->children[i], rest)) < 0)
            return rc;
    }
    return 0;
}

/* Whether s is "N(/N)*" with each N a decimal ordinal as keys write it (no sign, no
 * leading zero). */
static bool ordinal_path(const char *s)
{
    for (;;) {
        size_t n = 0;
        while (s[n] >= '0' && s[n] <= '9')
            n++;
        if (n == 0 || n > 18 || (n > 1 && s[0] == '0'))
            return false;
        s += n;
        if (*s == '\0')
            return true;
        if (*s++ != '/')
            return false;
    }
}

/* Every entity that key names: a root whose key is a prefix of it ending before a '/'
 * (the whole key first, then each split from the right, since root keys may contain '/'),
 * followed by ordinals walked down from there. */
static int find_key(struct lineage *L, const char *key)
{
    size_t len = strlen(key);
    char *prefix = malloc(len + 1);
    if (!prefix)
        return -ENOMEM;
    int rc = 0;
    for (size_t cut = len + 1; rc == 0 && cut > 0;) {
        /* cut: the length of the root key tried, + 1 (len + 1: the whole key). */
        size_t k = cut - 1;
        const char *path = k < len ? key + k + 1 : "";
        if (k == len || ordinal_path(path)) {
            memcpy(prefix, key, k);
            prefix[k] = '\0';
            sqlite3_reset(L->root);
            sqlite3_bind_text(L->root, 1, prefix, -1, SQLITE_STATIC);
            while (rc == 0 && (rc = lineage_step(L, L->root)) == 1) {
                int64_t id = sqlite3_column_int64(L->root, 0);
                int dom = sqlite3_column_int(L->root, 1);
                rc = dom >= 0 && dom < orch_plan_ndomains(L->job->plan)
                         ? walk_down(L, id, dom, path)
                         : orch_error_set(ORCH_ECORRUPT,
                                          "entity #%" PRId64 " has an unknown domain", id);
            }
            sqlite3_reset(L->root);
        }
        /* The next '/' to the left. */
        while (--cut > 0 && key[cut - 1] != '/')
            ;
    }
    free(prefix);
    return rc;
}

/* The item states of entity e's ports: " text=present kept=dropped". */
static int print_items(struct lineage *L, FILE *out, const struct entity_row *e)
{
    const orch_plan *p = L->job->plan;
    for (int i = 0; i < orch_plan_nports(p); i++) {
        const struct orch_port *pt = orch_plan_port(p, i);
        if (pt->domain != e->domain)
            continue;
        sqlite3_reset(L->item);
        sqlite3_bind_int(L->item, 1, i);
        sqlite3_bind_int64(L->item, 2, e->id);
        int rc = lineage_step(L, L->item);
        if (rc < 0)
            return rc;
        fprintf(out, " %s=%s", pt->name,
                rc == 1 ? (const char *)sqlite3_column_text(L->item, 0) : "pending");
        sqlite3_reset(L->item);
    }
    return 0;
}

static int print_entity(struct lineage *L, FILE *out, int indent, const struct entity_row *e,
                        const char *key)
{
    fprintf(out, "%*s%s %s (#%" PRId64 "):", indent, "",
            orch_plan_domain(L->job->plan, e->domain)->name, key, e->id);
    int rc = print_items(L, out, e);
    fputc('\n', out);
    return rc;
}

/* The descendants of e, depth first, children by domain then ordinal: through the
 * entity_child index, one statement per level so that each level streams its rows. */
static int print_tree(struct lineage *L, FILE *out, const struct entity_row *e,
                      struct orch__buf *key, int level, int maxdepth, int64_t *count)
{
    if (maxdepth >= 0 && level >= maxdepth)
        return 0;
    if (level == L->nkids) {
        sqlite3_stmt **n = realloc(L->kids, (size_t)(level + 1) * sizeof *n);
        if (!n)
            return -ENOMEM;
        L->kids = n;
        int rc = prepare(L->job,
                         "SELECT id, domain_id, ordinal FROM entity WHERE parent_id = ?"
                         " ORDER BY domain_id, ordinal",
                         &L->kids[level], "lineage");
        if (rc < 0)
            return rc;
        L->nkids++;
    }
    sqlite3_stmt *st = L->kids[level];
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, e->id);
    size_t keylen = key->len;
    int rc;
    while ((rc = lineage_step(L, st)) == 1) {
        struct entity_row c = {
            .id = sqlite3_column_int64(st, 0),
            .parent = e->id,
            .domain = sqlite3_column_int(st, 1),
            .ordinal = sqlite3_column_int64(st, 2),
        };
        if (c.domain < 0 || c.domain >= orch_plan_ndomains(L->job->plan)) {
            rc = orch_error_set(ORCH_ECORRUPT, "entity #%" PRId64 " has an unknown domain",
                                c.id);
            break;
        }
        orch__buf_printf(key, "/%" PRId64, c.ordinal);
        if (key->oom) {
            rc = -ENOMEM;
            break;
        }
        ++*count;
        if ((rc = print_entity(L, out, 2 * (level + 1), &c, key->p)) < 0 ||
            (rc = print_tree(L, out, &c, key, level + 1, maxdepth, count)) < 0)
            break;
        key->len = keylen;
        key->p[keylen] = '\0';
    }
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

/* Prints ancestors, the entity and its descendants. */
static int lineage_print(struct lineage *L, FILE *out, int64_t id, int maxdepth)
{
    /* The chain from the entity up to its root. */
    struct entity_row *chain = NULL;
    int n = 0, cap = 0, rc = 0;
    for (int64_t cur = id; cur;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            struct entity_row *c = realloc(chain, (size_t)cap * sizeof *c);
            if (!c) {
                rc = -ENOMEM;
                break;
            }
            chain = c;
        }
        if ((rc = entity_get(L, cur, &chain[n])) <= 0) {
            if (rc == 0)
                rc = orch_error_set(ORCH_ECORRUPT, "entity #%" PRId64 " is missing", cur);
            break;
        }
        if (n > orch_plan_ndomains(L->job->plan)) { /* deeper than the plan: a cycle */
            rc = orch_error_set(ORCH_ECORRUPT, "entity #%" PRId64 ": its parents form a cycle",
                                id);
            break;
        }
        cur = chain[n++].parent;
        rc = 0;
    }
    /* Keys from the root down: the root's own key, then '/' and each ordinal. */
    struct orch__buf key = {0};
    if (rc == 0) {
        static const char root_key[] = "SELECT key FROM entity WHERE id = ?";
        sqlite3_stmt *st;
        if ((rc = prepare(L->job, root_key, &st, "lineage")) == 0) {
            sqlite3_bind_int64(st, 1, chain[n - 1].id);
            if ((rc = lineage_step(L, st)) == 1) {
                const char *k = (const char *)sqlite3_column_text(st, 0);
                orch__buf_puts(&key, k ? k : "");
                rc = 0;
            } else if (rc == 0)
                rc = orch_error_set(ORCH_ECORRUPT, "entity #%" PRId64 " is missing",
                                    chain[n - 1].id);
            sqlite3_finalize(st);
        }
    }
    if (rc == 0) {
        fputs("ancestors:\n", out);
        if (n == 1)
            fputs("  (none: a root entity)\n", out);
        for (int i = n - 1; i >= 0 && rc == 0; i--) {
            if (i < n - 1)
                orch__buf_printf(&key, "/%" PRId64, chain[i].ordinal);
            if (key.oom) {
                rc = -ENOMEM;
                break;
            }
            if (i > 0)
                fprintf(out, "  %s %s (#%" PRId64 ")\n",
                        orch_plan_domain(L->job->plan, chain[i].domain)->name, key.p,
                        chain[i].id);
        }
    }
    if (rc == 0) {
        fputs("entity:\n", out);
        rc = print_entity(L, out, 2, &chain[0], key.p);
    }
    if (rc == 0) {
        fputs("descendants:\n", out);
        int64_t count = 0;
        rc = print_tree(L, out, &chain[0], &key, 0, maxdepth, &count);
        if (rc == 0 && count == 0)
            fputs(maxdepth == 0 ? "  (not shown: --depth 0)\n" : "  (none)\n", out);
    }
    orch__buf_free(&key);
    free(chain);
    return rc;
}

/* Resolves ENTITY (a key or #ID) into *id; prints why not and returns ORCH_EXIT_FAIL (an
 * unknown entity) or ORCH_EXIT_USAGE (a malformed #ID). */
static int lineage_resolve(struct lineage *L, const char *arg, int64_t *id, int *rc)
{
    *rc = 0;
    if (arg[0] == '#') {
        char *end;
        errno = 0;
        long long v = strtoll(arg + 1, &end, 10);
        if (!arg[1] || *end || errno || v <= 0)
            return orch_cli_usage_error("lineage: '%s' is not an entity id (#ID)", arg);
        struct entity_row e;
        if ((*rc = entity_get(L, v, &e)) < 0)
            return ORCH_EXIT_FAIL;
        if (*rc == 0) {
            fprintf(stderr, "orch: lineage: %s has no entity %s\n", L->job->dir, arg);
            return ORCH_EXIT_FAIL;
        }
        *rc = 0;
        *id = v;
        return ORCH_EXIT_OK;
    }
    if ((*rc = find_key(L, arg)) < 0)
        return ORCH_EXIT_FAIL;
    if (L->nfound == 0) {
        fprintf(stderr, "orch: lineage: %s has no entity with key '%s'\n", L->job->dir, arg);
        return ORCH_EXIT_FAIL;
    }
    if (L->nfound > 1) {
        fprintf(stderr, "orch: lineage: key '%s' names %d entities:", arg, L->nfound);
        for (int i = 0; i < L->nfound; i++) {
            struct entity_row e;
            if (entity_get(L, L->found[i], &e) == 1)
                fprintf(stderr, " #%" PRId64 " (%s)", e.id,
                        orch_plan_domain(L->job->plan, e.domain)->name);
        }
        fprintf(stderr, "; give one as #ID\n");
        return ORCH_EXIT_FAIL;
    }
    *id = L->found[0];
    return ORCH_EXIT_OK;
}

int orch_cli_lineage(int argc, char **argv)
{
    const char *pos[2];
    int npos = 0, maxdepth = -1;
    bool opts = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (opts && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0))
            return fputs(lineage_help, stdout), ORCH_EXIT_OK;
        if (opts && strcmp(a, "--") == 0)
            opts = false;
        else if (opts && strcmp(a, "--depth") == 0) {
            char *end;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 >= argc || !argv[i + 1][0] || *end || v < 0 || v > 1000000)
                return orch_cli_usage_error("lineage: --depth needs a number >= 0");
            maxdepth = (int)v;
            i++;
        } else if (opts && a[0] == '-' && a[1])
            return orch_cli_usage_error("lineage: unknown option '%s' (a key that starts "
                                        "with '-' goes after --)",
                                        a);
        else if (npos < 2)
            pos[npos++] = a;
        else
            return orch_cli_usage_error("lineage: unexpected argument '%s'", a);
    }
    if (npos != 2)
        return orch_cli_usage_error("lineage: give a job directory and an entity (KEY or #ID)");
    struct orch_job *job;
    if (open_job(pos[0], &job) != ORCH_EXIT_OK)
        return ORCH_EXIT_FAIL;
    struct lineage L = {.job = job};
    int rc;
    if ((rc = prepare(job, "SELECT parent_id, domain_id, ordinal FROM entity WHERE id = ?",
                      &L.row, "lineage")) == 0 &&
        (rc = prepare(job,
                      "SELECT id, domain_id FROM entity WHERE key = ? AND"
                      " parent_id IS NULL ORDER BY domain_id, ordinal",
                      &L.root, "lineage")) == 0 &&
        (rc = prepare(job,
                      "SELECT id FROM entity WHERE parent_id = ? AND domain_id = ?"
                      " AND ordinal = ?",
                      &L.child, "lineage")) == 0)
        rc = prepare(job, "SELECT state FROM item WHERE port_id = ? AND entity_id = ?", &L.item,
                     "lineage");
    int status = ORCH_EXIT_OK;
    int64_t id = 0;
    if (rc == 0)
        status = lineage_resolve(&L, pos[1], &id, &rc);
    if (rc == 0 && status == ORCH_EXIT_OK)
        rc = lineage_print(&L, stdout, id, maxdepth);
    if (rc < 0)
        fprintf(stderr, "orch: lineage: %s\n", detail_or(rc));
    sqlite3_finalize(L.row);
    sqlite3_finalize(L.root);
    sqlite3_finalize(L.child);
    sqlite3_finalize(L.item);
    for (int i = 0; i < L.nkids; i++)
        sqlite3_finalize(L.kids[i]);
    free(L.kids);
    free(L.found);
    int code = finish("lineage", job, rc);
    return status != ORCH_EXIT_OK ? status : code;
}

/* ---- orch failures -------------------------------------------------------------------- */

static const char failures_help[] =
    "usage: orch failures DIR [--all]\n"
    "\n"
    "Failures (the `failures` view) grouped by call, kind and message, the most frequent\n"
    "first (ties: the group that failed first), two lines each:\n"
    "  COUNT  CALL  KIND  MESSAGE\n"
    "      generation G (or generations G1-G2): KEY, KEY, KEY, ... N more\n"
    "with the keys of the first 3 entities that failed so (an entity that failed so\n"
    "several times, retried, is counted once there); then a summary line.\n"
    "Kinds: record and group (typed failures of the UDF) and exhausted (retries used up)\n"
    "seal the grain Failed; error, crash and timeout are attempt failures, retried.\n"
    "\n"
    "--all: every failure in the order they happened, tab-separated with a header line:\n"
    "  call, key, kind, generation, time (ISO 8601 UTC), message\n"
    "Tab, newline, carriage return and backslash in values are written \\t \\n \\r \\\\.\n"
    "\n"
    "exit status: 0 done (whatever failed); 1 the job cannot be read; 2 usage error.\n";

static int failures_all(struct orch_job *job, FILE *out)
{
    sqlite3_stmt *st;
    int rc = prepare(job,
                     "SELECT call, key, kind, generation, time, message FROM failures"
                     " ORDER BY failure_id",
                     &st, "failures");
    if (rc < 0)
        return rc;
    fputs("call\tkey\tkind\tgeneration\ttime\tmessage\n", out);
    while ((rc = orch_store_step(job->store, st)) == 1) {
        for (int c = 0; c < 6; c++) {
            if (c)
                fputc('\t', out);
            tsv_text(out, (const char *)sqlite3_column_text(st, c),
                     (size_t)sqlite3_column_bytes(st, c));
        }
        fputc('\n', out);
    }
    sqlite3_finalize(st);
    return rc;
}

/* Ends the line of a group's example keys: n entities, shown of them named. */
static void group_end(FILE *out, int64_t n, int64_t shown)
{
    if (n > shown)
        fprintf(out, ", ... %" PRId64 " more", n - shown);
    fputc('\n', out);
}

/* The groups in one pass over the view, with no join: failures are first grouped per
 * (call, kind, message, entity), then window functions over each (call, kind, message)
 * give every such row its group's totals and its rank among the group's entities, so
 * that the first three entities of each group come out with their group, sorted once. */
static int failures_grouped(struct orch_job *job, FILE *out)
{
    sqlite3_stmt *st;
    int rc =
        prepare(job,
                "SELECT call, kind, message, n, gmin, gmax, key, rn, ne FROM ("
                " SELECT call, kind, message, key,"
                "  sum(nf) OVER w AS n, min(g0) OVER w AS gmin, max(g1) OVER w AS gmax,"
                "  min(fid) OVER w AS first_id, count(*) OVER w AS ne,"
                "  row_number() OVER (w ORDER BY fid) AS rn"
                " FROM (SELECT call, kind, message, key, count(*) AS nf, min(generation) AS g0,"
                "   max(generation) AS g1, min(failure_id) AS fid"
                "  FROM failures GROUP BY call, kind, message, entity_id)"
                " WINDOW w AS (PARTITION BY call, kind, message))"
                " WHERE rn <= 3 ORDER BY n DESC, first_id, rn",
                &st, "failures");
    if (rc < 0)
        return rc;
    int64_t total = 0, groups = 0, nent = 0, shown = 0;
    while ((rc = orch_store_step(job->store, st)) == 1) {
        int64_t rn = sqlite3_column_int64(st, 7);
        if (rn == 1) {
            if (groups)
                group_end(out, nent, shown);
            int64_t n = sqlite3_column_int64(st, 3);
            nent = sqlite3_column_int64(st, 8);
            shown = 0;
            groups++;
            total += n;
            fprintf(out, "%" PRId64 "  ", n);
            tsv_str(out, (const char *)sqlite3_column_text(st, 0));
            fprintf(out, "  %s  ", (const char *)sqlite3_column_text(st, 1));
            tsv_str(out, (const char *)sqlite3_column_text(st, 2));
            int64_t gmin = sqlite3_column_int64(st, 4), gmax = sqlite3_column_int64(st, 5);
            if (gmin == gmax)
                fprintf(out, "\n    generation %" PRId64 ": ", gmin);
            else
                fprintf(out, "\n    generations %" PRId64 "-%" PRId64 ": ", gmin, gmax);
        }
        fputs(shown ? ", " : "", out);
        tsv_str(out, (const char *)sqlite3_column_text(st, 6));
        shown++;
    }
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    if (groups)
        group_end(out, nent, shown);
    if (total == 0)
        fputs("no failures\n", out);
    else
        fprintf(out, "%" PRId64 " failure%s in %" PRId64 " group%s\n", total,
                total == 1 ? "" : "s", groups, groups == 1 ? "" : "s");
    return 0;
}

int orch_cli_failures(int argc, char **argv)
{
    bool all = false;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(failures_help, stdout), ORCH_EXIT_OK;
        if (strcmp(argv[i], "--all") == 0)
            all = true;
        else if (argv[i][0] == '-' && argv[i][1])
            return orch_cli_usage_error("failures: unknown option '%s'", argv[i]);
        else if (dir)
            return orch_cli_usage_error("failures: unexpected argument '%s'", argv[i]);
        else
            dir = argv[i];
    }
    if (!dir)
        return orch_cli_usage_error("failures: give a job directory");
    struct orch_job *job;
    if (open_job(dir, &job) != ORCH_EXIT_OK)
        return ORCH_EXIT_FAIL;
    int rc = all ? failures_all(job, stdout) : failures_grouped(job, stdout);
    if (rc < 0)
        fprintf(stderr, "orch: failures: %s\n", detail_or(rc));
    return finish("failures", job, rc);
}
