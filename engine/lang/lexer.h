/* lexer.h — the tokens of the `.orch` language (private to the front end).
 *
 * The lexer walks a byte range once, never backs up, and never reads past its end (the
 * text need not be NUL-terminated and may contain NUL bytes). An invalid character, a bad
 * string or a name too long is a T_ERROR token carrying its message; the parser reports
 * it when it reaches it (as it would any unexpected token) and skips the line, so one
 * line gives at most one error. Newlines are tokens: a statement is one line.
 */
#ifndef ORCH_LEXER_H
#define ORCH_LEXER_H

#include <stdbool.h>
#include <stddef.h>

#include "orch_plan.h"
#include "support.h"

enum tok_kind {
    T_EOF,
    T_NL,
    T_NAME,
    T_STRING,
    T_NUMBER,
    T_EQ,
    T_COMMA,
    T_DOT,
    T_LPAREN,
    T_RPAREN,
    T_QMARK,
    T_ERROR,
};

struct token {
    enum tok_kind kind;
    orch_loc loc;
    const char *text; /* the raw bytes in the source */
    size_t len;
    const char *str; /* T_STRING: the unescaped value, NUL-terminated, in the lexer's arena */
    const char *msg; /* T_ERROR: what is wrong, in the lexer's arena */
};

struct lexer {
    const char *src;
    size_t len, pos;
    int line;
    size_t line_start;
    orch_plan_builder *b;
    struct orch__arena *arena; /* where string values go; owned by the parser */
    bool oom; /* an allocation failed: the tokens since are not the text's (the parser
                 answers -ENOMEM, not a syntax error) */
};

void orch__lex_init(struct lexer *lx, const char *src, size_t len, orch_plan_builder *b,
                    struct orch__arena *arena);
/* The next token. After T_EOF, T_EOF forever. */
void orch__lex_next(struct lexer *lx, struct token *t);
/* Skips the rest of the current line, newline included, without reporting anything. */
void orch__lex_skip_line(struct lexer *lx);
/* The position of the next byte. */
orch_loc orch__lex_loc(const struct lexer *lx);

/* orch_lang_parse(), for canonical text too: canonical says that text is a plan's
 * canonical text, whose exec() command lines are final (their relative paths were
 * resolved when the plan was first compiled, or were kept as written by an orch that did
 * not resolve them: either way, resolving them again could only change the plan). */
int orch__lang_parse(orch_plan_builder *b, const char *text, size_t len, bool canonical);
/* The same; retired_ok: `retired` statements are allowed (a job's plan). */
int orch__lang_parse_job(orch_plan_builder *b, const char *text, size_t len, bool canonical,
                         bool retired_ok);

#endif
