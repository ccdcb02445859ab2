/* cli_inspect.h — private to the read-only inspection commands of DESIGN §9, one file
 * each (cli_status.c, cli_sql.c, cli_lineage.c, cli_failures.c): the helpers they share.
 *
 * Every command opens the job with ORCH_JOB_READONLY: no lock, no writes, and a read-only
 * SQLite connection, so it works while a driver runs the job (WAL readers see the last
 * committed state and never block the writer). What one command prints comes from one
 * statement where the numbers must agree with each other (status), since separate
 * statements may see different commits of a live driver.
 *
 * Text output is meant for people and for line tools alike: tab-separated values escape
 * tab, newline, carriage return and backslash as \t \n \r \\, every other control
 * character and every byte that is not part of valid UTF-8 as \xNN (the text format of
 * PostgreSQL's COPY reads both back), so that one record is always one line of UTF-8.
 *
 * The short helpers are static inline; the longer ones are in cli_inspect.c.
 */
#ifndef ORCH_CLI_INSPECT_H
#define ORCH_CLI_INSPECT_H

#include "cli.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "orch_error.h"
#include "orch_job.h"
#include "support.h"

static inline const char *detail_or(int rc)
{
    return orch_error_detail()[0] ? orch_error_detail() : orch_strerror(rc);
}

/* Opens the job at dir read-only; on failure prints why and returns ORCH_EXIT_FAIL. */
static inline int open_job(const char *dir, struct orch_job **job)
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
static inline int finish(const char *cmd, struct orch_job *job, int rc)
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
static inline int prepare(struct orch_job *job, const char *sql, sqlite3_stmt **st,
                          const char *what)
{
    int rc = sqlite3_prepare_v2(orch_store_db(job->store), sql, -1, st, NULL);
    return rc == SQLITE_OK ? 0 : orch_store_error(job->store, rc, what);
}

/* How text is escaped in a line of tab-separated values and in a table cell, at s (n > 0
 * bytes left): 0 when the *k bytes there (valid UTF-8, no control character) are written
 * as they are; 't', 'n', 'r' or '\\' when its byte (tab, newline, carriage return,
 * backslash) is written as a backslash and that character; 'x' when its byte (another
 * control character, or a byte that is not part of valid UTF-8) is written \xNN. */
static inline int text_escape(const unsigned char *s, size_t n, size_t *k)
{
    unsigned char c = s[0];
    *k = 1;
    if (c == '\t' || c == '\n' || c == '\r' || c == '\\')
        return c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
    size_t u = orch__utf8_len(s, n);
    if (u == 0 || c < 0x20 || c == 0x7f)
        return 'x';
    *k = u;
    return 0;
}

/* One value of a tab-separated line, escaped as text_escape says: one line, valid UTF-8,
 * no control character; PostgreSQL's COPY text format reads it back. */
static inline void tsv_text(FILE *out, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0, k; i < n; i += k) {
        int e = text_escape(s + i, n - i, &k);
        if (e == 'x')
            fprintf(out, "\\x%02x", s[i]);
        else if (e)
            fprintf(out, "\\%c", e);
        else
            fwrite(s + i, 1, k, out);
    }
}

static inline void tsv_str(FILE *out, const char *s)
{
    tsv_text(out, s ? s : "", s ? strlen(s) : 0);
}

/* ---- cli_inspect.c ----------------------------------------------------------------------- */

/* ms since the epoch as ISO 8601 UTC with milliseconds: 2024-05-01T10:00:00.123Z. */
void orch_cli_iso_time(char *buf, size_t n, int64_t ms);
/* The wall clock, in ms since the epoch (the store's timestamps). */
int64_t orch_cli_now_ms(void);
/* Whether a driver holds the job's lock now, and its pid (0 when unknown or none). */
bool orch_cli_driver_live(const char *dir, long *pid);
/* The job's status as `orch status` says it: created, running, interrupted, failed or
 * finished (job_status: job.status; stop_kind: job.stop_kind, or NULL). */
const char *orch_cli_status_now(const char *job_status, const char *stop_kind, bool live);

#endif
