/* orch_lang.h — the `.orch` language front end: text in, checked plan out.
 *
 * The front end is only a lexer and a parser: it turns each statement of DESIGN §2 into
 * calls of the plan builder (orch_plan.h), where every semantic check lives, and adds
 * the syntax errors of its own. Diagnostics are written as
 *
 *     FILE:LINE:COL: error: MESSAGE          (and `warning:`)
 *
 * sorted by position, all of them from one pass (after a syntax error the parser goes on
 * at the next line; after ORCH_LANG_MAX_ERRORS errors it stops). LINE and COL count from
 * 1; COL counts bytes.
 *
 * Grammar (one statement per line; `#` starts a comment; blank lines are free):
 *
 *     pipeline NAME                               first statement of the file
 *     domain NAME [in PARENT]
 *     source D.P = files("GLOB") | lines("FILE")
 *     call NAME = FUNCTION(ARG=VALUE, ...) [with OPTION=VALUE, ...]
 *         FUNCTION: a built-in name, library("path.so", "symbol")[(ARGS)], exec("cmd")[(ARGS)]
 *         The arguments of library() and exec() may also follow the strings inside its
 *         parentheses, library("path.so", "symbol", ARGS) and exec("cmd", ARGS): the same
 *         call (and the same canonical text); one form or the other, not both.
 *     D.P1[, D.P2 ...] = [expand [aligned] | filter | reduce] CALL([?]D.P, ...)
 *     D.P = broadcast A.Q
 *     output D.P
 *
 * Literals: strings "..." with the escapes \n \t \f \r \\ \" \xHH (no NUL; raw bytes must
 * be UTF-8), numbers (-?digits[.digits], with a unit suffix: 120s, 500ms, 64MiB), names
 * ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes). No word is reserved: keywords are
 * recognised by position (`output.x = f(...)` assigns a port of domain `output`).
 *
 * Paths. Relative paths of sources and libraries are resolved against the builder's basedir
 * (orch_plan.h). The front end resolves those of an exec() command line as well, being the
 * one that knows it is shell text: the program when it is a relative path (`./udf.py`,
 * `bin/udf`) and every later word that begins with `./` or `../` (`python3 ./udf.py`);
 * other words (`python3 udf.py`), and anything quoted, stay as written. The plan, and so
 * its canonical text and hash, holds the resolved line; compiling canonical text resolves
 * nothing (orch_plan_from_canonical).
 *
 * Hostile input is an ordinary error: any bytes, NUL included, in any amount up to
 * ORCH_LANG_MAX_BYTES, in time linear in the input and without recursion.
 */
#ifndef ORCH_LANG_H
#define ORCH_LANG_H

#include <stddef.h>
#include <stdio.h>

#include "orch_plan.h"

#define ORCH_LANG_MAX_ERRORS 100
#define ORCH_LANG_MAX_BYTES (64u << 20)

/* Compiles text (len bytes; NUL bytes allowed, no terminator needed). `file` names it in
 * diagnostics; relative paths resolve against basedir (NULL: the current directory).
 * Diagnostics go to diag (may be NULL). On success *out is a new plan (orch_plan_free)
 * and 0 is returned, warnings or not; on compile errors, ORCH_ESYNTAX and *out = NULL
 * (orch_error_detail() then holds the first error, formatted as above); -ENOMEM. */
/* A job's plan laid out by orch (an edited pipeline aligned with the job's: cli_update.c):
 * compiled like a pipeline with absolute paths, `retired` statements allowed. */
int orch_lang_compile_job_plan(const char *text, orch_plan **out);

int orch_lang_compile(const char *file, const char *text, size_t len, const char *basedir,
                      FILE *diag, orch_plan **out);

/* Reads and compiles the file at path; basedir is the file's directory. A file that
 * cannot be read gives -errno (detail set, and a "PATH: error: ..." line on diag). */
int orch_lang_compile_file(const char *path, FILE *diag, orch_plan **out);

/* orch_lang_compile_file() that also hands back the text it compiled (when it compiled:
 * the caller frees *text_out), so that a job stores exactly the source of its plan. */
/* Compiles the pipeline file at path with "/" as its directory, no diagnostics: a relative
 * path P in it becomes "/P", so that what was written relative can be told from what was
 * absolute by comparison with the same plan resolved elsewhere (engine/update/rekey.c). */
int orch_lang_compile_written(const char *path, orch_plan **out);

int orch_lang_compile_path(const char *path, FILE *diag, orch_plan **out, char **text_out,
                           size_t *len_out);

/* The lower-level form: feeds text into an existing builder (its basedir applies) and
 * records every diagnostic there. Does not build. 0, or -ENOMEM. */
int orch_lang_parse(orch_plan_builder *b, const char *text, size_t len);

/* Rebuilds a plan from its canonical text (orch_plan_canonical), as `resume` does from the
 * job alone. Returns 0; ORCH_ESYNTAX when the text does not compile (detail: the first
 * error); ORCH_EMISMATCH when it compiles to a plan whose canonical text differs (the text
 * was not canonical, e.g. edited by hand); -ENOMEM. */
int orch_plan_from_canonical(const char *text, orch_plan **out);

#endif
