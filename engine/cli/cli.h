/* cli.h — the commands of the `orch` binary (one cli_*.c file each), and their exit codes.
 *
 * main.c only dispatches: a command gets argv with argv[0] = its own name, writes its
 * results to stdout and its diagnostics to stderr, and returns an exit status. Every
 * status a command can return is listed here and documented by `orch --help`.
 */
#ifndef ORCH_CLI_H
#define ORCH_CLI_H

#include <stdio.h>

enum {
    ORCH_EXIT_OK = 0,    /* success */
    ORCH_EXIT_FAIL = 1,  /* the pipeline (or job) has errors, or a file could not be read */
    ORCH_EXIT_USAGE = 2, /* unknown command, missing or malformed arguments */
    ORCH_EXIT_INTERRUPTED = 3, /* run/resume stopped by SIGINT or SIGTERM; job kept */
};

struct orch_cli_command {
    const char *name;
    const char *args;    /* synopsis of the arguments */
    const char *summary; /* one line */
    int (*run)(int argc, char **argv);
};

/* Prints a usage error ("orch: MESSAGE" and a hint) and returns ORCH_EXIT_USAGE. */
int orch_cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int orch_cli_check(int argc, char **argv);
int orch_cli_run(int argc, char **argv);
int orch_cli_resume(int argc, char **argv);
int orch_cli_export(int argc, char **argv);
int orch_cli_retry(int argc, char **argv);
int orch_cli_update(int argc, char **argv);
struct orch_job;
struct orch_run_opts;
/* cli_run.c: runs the open job's driver to its end and prints the summary; returns the
 * exit status. */
int orch_cli_drive(struct orch_job *job, const struct orch_run_opts *o);
/* cli_run.c: parses one job directory and the run options (argv[0] is the command), and
 * opens the job read-write. second non-NULL: a second positional argument is allowed
 * (*second, or NULL without one). Returns -1 with *job set, or the exit status to return. */
int orch_cli_open_existing(const char *cmd, int argc, char **argv, struct orch_run_opts *o,
                           struct orch_job **job, const char **second);
/* cli_status.c, cli_sql.c, cli_lineage.c, cli_failures.c: the read-only inspection commands. */
int orch_cli_status(int argc, char **argv);
int orch_cli_sql(int argc, char **argv);
int orch_cli_lineage(int argc, char **argv);
int orch_cli_failures(int argc, char **argv);
/* cli_report.c: one self-contained HTML page of the run (read-only, like the above). */
int orch_cli_report(int argc, char **argv);

#endif
