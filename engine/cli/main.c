/* main.c — the orch command line: a table of commands, dispatched by name (cli.h). */
#include "cli.h"
#include "knobs.h"
#include "launch.h"
#include "pool.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#ifndef ORCH_VERSION
#define ORCH_VERSION "unknown"
#endif

static const struct orch_cli_command commands[] = {
    {"check", "PIPELINE...", "compile pipelines; print each plan, or FILE:LINE:COL errors",
     orch_cli_check},
    {"run", "PIPELINE --job DIR", "create the job DIR and run it to the end", orch_cli_run},
    {"resume", "DIR", "continue a stopped or crashed job", orch_cli_resume},
    {"export", "DIR D.P [--all]", "items of a port as JSON lines, in entity order",
     orch_cli_export},
    {"status", "DIR", "per-call progress, failures, throughput, live driver", orch_cli_status},
    {"sql", "DIR SQL [--json]", "read-only SQL over the job's tables and views", orch_cli_sql},
    {"lineage", "DIR ENTITY", "ancestors and descendants of one entity (KEY or #ID)",
     orch_cli_lineage},
    {"failures", "DIR [--all]", "failures grouped by call, kind and message",
     orch_cli_failures},
    {"report", "DIR [-o FILE.html]", "one self-contained HTML page of the run", orch_cli_report},
    {"retry", "DIR [--call C]", "re-open Failed grains after a fix, then resume",
     orch_cli_retry},
    {"update", "DIR [PIPELINE] [--watch S]",
     "take new, changed and removed inputs (and option edits), run what they affect",
     orch_cli_update},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void help(FILE *out)
{
    fputs("usage: orch COMMAND [ARGS...]\n"
          "\n"
          "orch is a persistent workflow engine for hierarchical data-preparation pipelines.\n"
          "\n"
          "commands:\n",
          out);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-8s %-22s %s\n", commands[i].name, commands[i].args,
                commands[i].summary);
    fputs("  help     [COMMAND]              this help, or a command's own (also --help, -h)\n"
          "  --version                       the version of orch\n"
          "\n"
          "exit status:\n"
          "  0  success (run/resume: the job ran to its end, whatever records failed)\n"
          "  1  a pipeline has errors, a file or job could not be read, or a job could not\n"
          "     go on (the message says why; what was committed is kept)\n"
          "  2  usage error: unknown command, missing or malformed arguments\n"
          "  3  run/resume interrupted by SIGINT or SIGTERM; continue with `orch resume`\n",
          out);
}

int orch_cli_usage_error(const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = strlen(msg);
    /* One sentence, then the advice: a full stop ends it unless it has one. */
    fprintf(stderr, "orch: %s%s\nTry 'orch --help'.\n", msg,
            n && strchr(".?!", msg[n - 1]) ? "" : ".");
    return ORCH_EXIT_USAGE;
}

static const struct orch_cli_command *find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return orch_cli_usage_error("no command given");
    const char *cmd = argv[1];
    const struct orch_knobs *k = orch_knobs_load();
    /* Hidden: a worker process of a pool (pool.h), started by the driver. */
    if (strcmp(cmd, "__worker") == 0 && argc == 3)
        return orch_worker_main(atoi(argv[2]));
    if (strcmp(cmd, "__worker") == 0 && argc == 6 && strcmp(argv[2], "--connect") == 0 &&
        strcmp(argv[4], "--token") == 0)
        return orch_worker_remote_main(argv[3], strtoull(argv[5], NULL, 10));
    /* Hidden: the guard of a remote worker's srun (launch.h), started by the driver. */
    if (strcmp(cmd, "__srun-guard") == 0 && argc >= 5)
        return orch_srun_guard_main(argv[2], argv[3], argv + 4, k->srun_guard_kill_ms);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
        (strcmp(cmd, "help") == 0 && argc == 2)) {
        help(stdout);
        return ORCH_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        const struct orch_cli_command *c = find(argv[2]);
        if (!c || argc > 3)
            return orch_cli_usage_error("help: unknown command '%s'", argv[2]);
        char *args[] = {(char *)c->name, "--help", NULL};
        return c->run(2, args);
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        puts("orch " ORCH_VERSION);
        return ORCH_EXIT_OK;
    }
    const struct orch_cli_command *c = find(cmd);
    if (!c)
        return orch_cli_usage_error("unknown command '%s'", cmd);
    return c->run(argc - 1, argv + 1);
}
