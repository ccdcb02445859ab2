/* cli_check.c — `orch check PIPELINE...`: compile, then print each plan or its errors. */
#include "cli.h"
#include "orch_error.h"
#include "orch_lang.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static const char check_help[] =
    "usage: orch check [--canonical | --quiet] PIPELINE...\n"
    "\n"
    "Compiles each pipeline file and prints its plan: the domain tree, each call with its\n"
    "function, arguments, options and reservation, each port with its producer and\n"
    "consumers, and the plan hash. Errors and warnings go to stderr as\n"
    "FILE:LINE:COL: error: MESSAGE. Nothing is run and no file named by the pipeline needs\n"
    "to exist.\n"
    "\n"
    "  --canonical   print the canonical text of the plan instead (what a job stores)\n"
    "  -q, --quiet   print nothing but diagnostics\n"
    "\n"
    "exit status: 0 every pipeline is valid; 1 some pipeline has errors or cannot be read;\n"
    "2 usage error.\n";

int orch_cli_check(int argc, char **argv)
{
    bool canonical = false, quiet = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "--canonical") == 0)
            canonical = true;
        else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
            quiet = true;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(check_help, stdout), ORCH_EXIT_OK;
        else
            return orch_cli_usage_error("check: unknown option '%s'", argv[i]);
    }
    if (i == argc)
        return orch_cli_usage_error("check: no pipeline file given");
    int status = ORCH_EXIT_OK, nfiles = argc - i;
    for (; i < argc; i++) {
        orch_plan *plan;
        int rc = orch_lang_compile_file(argv[i], stderr, &plan);
        if (rc == -ENOMEM) {
            fprintf(stderr, "%s: error: out of memory\n", argv[i]);
            status = ORCH_EXIT_FAIL;
            continue;
        }
        if (rc) {
            status = ORCH_EXIT_FAIL;
            continue;
        }
        if (!quiet) {
            if (nfiles > 1)
                printf("== %s ==\n", argv[i]);
            if (canonical)
                fputs(orch_plan_canonical(plan), stdout);
            else
                orch_plan_print(plan, stdout);
            if (nfiles > 1 && i + 1 < argc)
                putchar('\n');
        }
        orch_plan_free(plan);
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "orch: cannot write the output: %s\n", strerror(errno));
        status = ORCH_EXIT_FAIL;
    }
    return status;
}
