/* parser.c — `.orch` statements to plan-builder calls, one line at a time.
 *
 * Each statement is parsed whole (into a per-line arena) before anything reaches the
 * builder, so a syntax error anywhere on a line drops the line and nothing else: the
 * parser reports it, skips to the next line and goes on. No recursion: the grammar is
 * flat, and a lookahead of two tokens (never past the end of the line) tells keywords
 * from names.
 *
 * Cascades. When the line declaring a domain or a call fails to parse after its name,
 * the name goes into `broken`; later statements that use a broken name are dropped
 * silently rather than reported as using an unknown name.
 */
#include "lexer.h"
#include "orch_lang.h"
#include "plan_internal.h"

#include <errno.h>
#include <string.h>

#define LOOKAHEAD 3

struct pref { /* a port reference D.P, optionally with '?' */
    const char *domain, *port;
    orch_loc loc;
    bool optional;
};

struct kv { /* ARG=VALUE or OPTION=VALUE */
    struct kv *next;
    const char *key, *value;
    enum orch_arg_kind kind;
    orch_loc loc;
};

struct plist {
    struct plist *next;
    struct pref ref;
};

struct parser {
    struct lexer lx;
    orch_plan_builder *b;
    struct token tok[LOOKAHEAD];
    int ntok;
    struct orch__arena line; /* strings and lists of the current statement */
    struct orch__arena keep; /* keys of `broken` */
    struct orch__map broken;
    bool seen_stmt;
    bool canonical; /* the text is a plan's canonical text: exec() lines are final */
    bool retired_ok; /* `retired` statements are allowed: a job's plan (canonical, aligned) */
    bool oom;
};

static struct token *peek(struct parser *p, int k)
{
    while (p->ntok <= k) {
        struct token *last = p->ntok ? &p->tok[p->ntok - 1] : NULL;
        if (last && (last->kind == T_NL || last->kind == T_EOF))
            p->tok[p->ntok] = *last; /* never look past the end of the line */
        else
            orch__lex_next(&p->lx, &p->tok[p->ntok]);
        p->ntok++;
    }
    return &p->tok[k];
}

static void advance(struct parser *p)
{
    peek(p, 0);
    memmove(&p->tok[0], &p->tok[1], sizeof p->tok[0] * (size_t)(p->ntok - 1));
    p->ntok--;
}

/* Drops the rest of the line without lexing (and so without reporting) any of it. */
static void sync_line(struct parser *p)
{
    for (int i = 0; i < p->ntok; i++) {
        if (p->tok[i].kind == T_NL || p->tok[i].kind == T_EOF) {
            int drop = i + (p->tok[i].kind == T_NL);
            memmove(&p->tok[0], &p->tok[drop], sizeof p->tok[0] * (size_t)(p->ntok - drop));
            p->ntok -= drop;
            return;
        }
    }
    p->ntok = 0;
    orch__lex_skip_line(&p->lx);
}

static bool is_word(const struct token *t, const char *w)
{
    return t->kind == T_NAME && t->len == strlen(w) && memcmp(t->text, w, t->len) == 0;
}

static const char *tok_text(struct parser *p, const struct token *t)
{
    const char *s = orch__arena_strndup(&p->line, t->text, t->len);
    if (!s)
        p->oom = true;
    return s ? s : "";
}

static bool syntax(struct parser *p, const struct token *t, const char *expected)
{
    static const char *const what[] = {
        [T_EOF] = "end of file", [T_NL] = "end of line", [T_STRING] = "a string",
        [T_EQ] = "'='",          [T_COMMA] = "','",      [T_DOT] = "'.'",
        [T_LPAREN] = "'('",      [T_RPAREN] = "')'",     [T_QMARK] = "'?'",
    };
    if (t->kind == T_ERROR) {
        orch_plan_diag(p->b, ORCH_DIAG_ERROR, t->loc, "%s", t->msg);
        return false;
    }
    if (t->kind == T_NAME || t->kind == T_NUMBER)
        orch_plan_diag(p->b, ORCH_DIAG_ERROR, t->loc, "expected %s, found %s '%.*s'", expected,
                       t->kind == T_NAME ? "name" : "number", (int)t->len, t->text);
    else
        orch_plan_diag(p->b, ORCH_DIAG_ERROR, t->loc, "expected %s, found %s", expected,
                       what[t->kind]);
    return false;
}

static bool expect(struct parser *p, enum tok_kind kind, const char *expected)
{
    if (peek(p, 0)->kind != kind)
        return syntax(p, peek(p, 0), expected);
    advance(p);
    return true;
}

static bool name(struct parser *p, const char *expected, const char **out, orch_loc *loc)
{
    struct token *t = peek(p, 0);
    if (t->kind != T_NAME)
        return syntax(p, t, expected);
    *out = tok_text(p, t);
    if (loc)
        *loc = t->loc;
    advance(p);
    return true;
}

static bool end_of_line(struct parser *p)
{
    struct token *t = peek(p, 0);
    if (t->kind == T_EOF)
        return true;
    return expect(p, T_NL, "end of line");
}

static bool port_ref(struct parser *p, struct pref *r)
{
    return name(p, "a port (DOMAIN.PORT)", &r->domain, &r->loc) &&
           expect(p, T_DOT, "'.' in DOMAIN.PORT") && name(p, "a port name", &r->port, NULL);
}

/* ---- broken names ---- */

static const char *broken_key(struct parser *p, char kind, const char *n, struct orch__arena *a)
{
    size_t len = strlen(n);
    char *k = orch__arena_alloc(a, len + 3);
    if (!k) {
        p->oom = true;
        return NULL;
    }
    k[0] = kind;
    k[1] = ':';
    memcpy(k + 2, n, len + 1);
    return k;
}

static void mark_broken(struct parser *p, char kind, const char *n)
{
    const char *k = n ? broken_key(p, kind, n, &p->keep) : NULL;
    if (k && orch__map_put(&p->broken, k, 1) < 0)
        p->oom = true;
}

static bool is_broken(struct parser *p, char kind, const char *n)
{
    if (!p->broken.n || !n)
        return false;
    const char *k = broken_key(p, kind, n, &p->line);
    return k && orch__map_get(&p->broken, k) >= 0;
}

static bool refs_broken(struct parser *p, const struct plist *l)
{
    for (; l; l = l->next)
        if (is_broken(p, 'd', l->ref.domain))
            return true;
    return false;
}

/* Maps a builder's result: only -ENOMEM matters to the parser. */
static void fed(struct parser *p, int rc)
{
    if (rc == -ENOMEM)
        p->oom = true;
}

/* ---- statements ---- */

static bool stmt_pipeline(struct parser *p)
{
    const char *n;
    orch_loc loc;
    advance(p);
    if (!name(p, "a pipeline name", &n, &loc) || !end_of_line(p))
        return false;
    fed(p, orch_plan_set_name(p->b, n, loc));
    return true;
}

static bool stmt_domain(struct parser *p)
{
    const char *n = NULL, *parent = NULL;
    orch_loc loc;
    advance(p);
    if (!name(p, "a domain name", &n, &loc))
        return false;
    if (is_word(peek(p, 0), "in")) {
        advance(p);
        if (!name(p, "the parent domain's name", &parent, NULL))
            return mark_broken(p, 'd', n), false;
    }
    if (!end_of_line(p))
        return mark_broken(p, 'd', n), false;
    if (parent && is_broken(p, 'd', parent))
        mark_broken(p, 'd', n);
    else
        fed(p, orch_plan_add_domain(p->b, n, parent, loc));
    return true;
}

static bool stmt_source(struct parser *p, bool retired)
{
    struct pref r;
    const char *kind, *arg;
    orch_loc kloc;
    advance(p);
    if (!port_ref(p, &r) || !expect(p, T_EQ, "'='") ||
        !name(p, "files(\"GLOB\") or lines(\"FILE\")", &kind, &kloc))
        return false;
    enum orch_source_kind k = strcmp(kind, "files") == 0   ? ORCH_SOURCE_FILES
                              : strcmp(kind, "lines") == 0 ? ORCH_SOURCE_LINES
                                                           : ORCH_SOURCE__COUNT;
    if (k == ORCH_SOURCE__COUNT) {
        orch_plan_diag(p->b, ORCH_DIAG_ERROR, kloc,
                       "expected files(\"GLOB\") or lines(\"FILE\"), found name '%s'", kind);
        return false;
    }
    if (!expect(p, T_LPAREN, "'('"))
        return false;
    struct token *t = peek(p, 0);
    if (t->kind != T_STRING)
        return syntax(p, t, k == ORCH_SOURCE_FILES ? "a glob string" : "a file name string");
    arg = t->str;
    advance(p);
    if (!expect(p, T_RPAREN, "')'") || !end_of_line(p))
        return false;
    if (!is_broken(p, 'd', r.domain)) {
        int before = orch_plan_nsources_built(p->b);
        fed(p, orch_plan_add_source(p->b, r.domain, r.port, k, arg, r.loc));
        if (retired && orch_plan_nsources_built(p->b) > before)
            fed(p, orch_plan_source_retire(p->b));
    }
    return true;
}

/* VALUE of an argument or option: a string, a number or a name. For options the raw text
 * is kept (a quoted string is then a malformed option value). */
static bool value(struct parser *p, struct kv *kv, bool raw)
{
    struct token *t = peek(p, 0);
    kv->loc = t->loc;
    switch (t->kind) {
    case T_STRING:
        kv->kind = ORCH_ARG_STRING;
        kv->value = raw ? tok_text(p, t) : t->str;
        break;
    case T_NUMBER:
        kv->kind = ORCH_ARG_NUMBER;
        kv->value = tok_text(p, t);
        break;
    case T_NAME:
        kv->kind = ORCH_ARG_NAME;
        kv->value = tok_text(p, t);
        break;
    case T_EOF:
    case T_NL:
    case T_EQ:
    case T_COMMA:
    case T_DOT:
    case T_LPAREN:
    case T_RPAREN:
    case T_QMARK:
    case T_ERROR:
        return syntax(p, t, "a value (a string, a number or a name)");
    }
    advance(p);
    return true;
}

/* KEY=VALUE {, KEY=VALUE}; for arguments, up to and including ')'. */
static bool kv_list(struct parser *p, bool args, struct kv **out)
{
    struct kv **tail = out;
    if (args && peek(p, 0)->kind == T_RPAREN) {
        advance(p);
        return true;
    }
    for (;;) {
        struct kv *kv = orch__arena_alloc(&p->line, sizeof *kv);
        if (!kv)
            return p->oom = true, false;
        if (!name(p, args ? "an argument name" : "an option name", &kv->key, NULL) ||
            !expect(p, T_EQ, "'='") || !value(p, kv, !args))
            return false;
        *tail = kv;
        tail = &kv->next;
        struct token *t = peek(p, 0);
        if (t->kind == T_COMMA) {
            advance(p);
            continue;
        }
        if (args)
            return expect(p, T_RPAREN, "',' or ')'");
        return true;
    }
}

static bool string_arg(struct parser *p, const char *what, const char **out)
{
    struct token *t = peek(p, 0);
    if (t->kind != T_STRING)
        return syntax(p, t, what);
    *out = t->str;
    advance(p);
    return true;
}

/* The arguments inside library(PATH, SYMBOL, K=V, ...) or exec(CMD, K=V, ...), after the
 * strings: none (then ')'), or ',' and the list up to its ')'. *given tells whether a ','
 * introduced a list. */
static bool inner_args(struct parser *p, struct kv **args, bool *given)
{
    if (peek(p, 0)->kind != T_COMMA)
        return expect(p, T_RPAREN, "',' and the arguments, or ')'");
    advance(p);
    *given = true;
    if (peek(p, 0)->kind == T_RPAREN) /* kv_list takes "()" for no arguments */
        return syntax(p, peek(p, 0), "an argument name");
    return kv_list(p, true, args);
}

/* FUNCTION: a built-in name, library("path", "symbol"[, ARGS]) or exec("command"[, ARGS]).
 * Arguments given inside the parentheses go to *args, and *inner says so. */
static bool function(struct parser *p, enum orch_fn_kind *kind, const char **fn,
                     const char **sym, orch_loc *loc, struct kv **args, bool *inner)
{
    const char *n;
    if (!name(p, "a function", &n, loc))
        return false;
    *sym = NULL;
    if (strcmp(n, "library") == 0) {
        *kind = ORCH_FN_LIBRARY;
        return expect(p, T_LPAREN, "'(' after library") &&
               string_arg(p, "the library's path as a string", fn) &&
               expect(p, T_COMMA, "',' between the library's path and symbol") &&
               string_arg(p, "the symbol's name as a string", sym) &&
               inner_args(p, args, inner);
    }
    if (strcmp(n, "exec") == 0) {
        *kind = ORCH_FN_EXEC;
        return expect(p, T_LPAREN, "'(' after exec") &&
               string_arg(p, "the command line as a string", fn) && inner_args(p, args, inner);
    }
    *kind = ORCH_FN_BUILTIN;
    *fn = n;
    return true;
}

/* ---- exec command lines: relative paths against the pipeline's directory ---- */

/* Bytes a shell word may hold unquoted without any of them meaning something. */
static bool shell_plain(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("/._+-,:@%", c) != NULL;
}

/* dir as shell text: as is when every byte is plain, else in single quotes. */
static void shell_dir(struct orch__buf *out, const char *dir)
{
    size_t n = strlen(dir);
    bool plain = true;
    for (size_t i = 0; i < n && plain; i++)
        plain = shell_plain(dir[i]);
    if (n == 1 && dir[0] == '/') /* "/" + "/x" would make "//x" */
        return;
    if (plain) {
        orch__buf_add(out, dir, n);
        return;
    }
    orch__buf_putc(out, '\'');
    for (size_t i = 0; i < n; i++)
        if (dir[i] == '\'')
            orch__buf_puts(out, "'\\''");
        else
            orch__buf_putc(out, dir[i]);
    orch__buf_putc(out, '\'');
}

/* How many bytes at the start of word w (which ends at a blank or NUL) the directory
 * replaces: 1 for "./" (the '.'), 0 for "../" and for a first word that is a relative
 * path (a '/' after plain bytes: "bin/udf"), -1 when w is not resolved. */
static int relative_word(const char *w, bool first)
{
    if (w[0] == '.' && w[1] == '/')
        return 1;
    if (w[0] == '.' && w[1] == '.' && w[2] == '/')
        return 0;
    if (!first || w[0] == '/')
        return -1;
    for (size_t i = 0; w[i] && w[i] != ' ' && w[i] != '\t'; i++) {
        if (w[i] == '/')
            return 0;
        if (!shell_plain(w[i]))
            return -1;
    }
    return -1;
}

/* The command line of an exec() with its relative paths resolved against dir (absolute):
 * the program when it is a relative path (`./udf.py`, `bin/udf`), and every later word
 * that begins with `./` or `../` (`python3 ./udf.py`), so that the command means the same
 * from any current directory, as the paths of sources and libraries do. A word is found
 * where an unquoted blank ends the one before; quoted text is never touched. Returns the
 * line unchanged (cmd itself) when there is nothing to resolve, NULL when out of memory. */
static const char *exec_resolve(struct parser *p, const char *cmd, const char *dir)
{
    struct orch__buf out = {0};
    size_t done = 0; /* bytes of cmd copied to out */
    bool word_start = true, first = true, changed = false;
    char quote = 0;
    for (size_t i = 0; cmd[i]; i++) {
        char c = cmd[i];
        if (quote) {
            if (c == quote)
                quote = 0;
            else if (c == '\\' && quote == '"' && cmd[i + 1])
                i++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\n') {
            word_start = true;
            continue;
        }
        if (word_start) {
            int skip = relative_word(cmd + i, first);
            if (skip >= 0) {
                orch__buf_add(&out, cmd + done, i - done);
                shell_dir(&out, dir);
                if (skip == 0)
                    orch__buf_putc(&out, '/');
                done = i + (size_t)skip;
                changed = true;
            }
            word_start = first = false;
        }
        if (c == '\'' || c == '"')
            quote = c;
        else if (c == '\\' && cmd[i + 1])
            i++;
    }
    if (!changed)
        return cmd;
    orch__buf_puts(&out, cmd + done);
    const char *s = out.oom ? NULL : orch__arena_strdup(&p->line, out.p);
    orch__buf_free(&out);
    if (!s)
        p->oom = true;
    return s;
}

static bool stmt_call(struct parser *p)
{
    const char *n, *fn = NULL, *sym = NULL;
    orch_loc loc, fn_loc = {0, 0};
    enum orch_fn_kind kind;
    struct kv *args = NULL, *opts = NULL;
    bool inner = false;
    advance(p);
    if (!name(p, "a call name", &n, &loc))
        return false;
    bool ok = expect(p, T_EQ, "'='") && function(p, &kind, &fn, &sym, &fn_loc, &args, &inner);
    if (ok && inner && peek(p, 0)->kind == T_LPAREN) {
        orch_plan_diag(p->b, ORCH_DIAG_ERROR, peek(p, 0)->loc,
                       "arguments given twice: write them inside %s(..., K=V) or after it, "
                       "%s(...)(K=V), not both",
                       orch_fn_kind_name(kind), orch_fn_kind_name(kind));
        ok = false;
    } else if (ok && (kind == ORCH_FN_BUILTIN || peek(p, 0)->kind == T_LPAREN)) {
        ok = expect(p, T_LPAREN, "'(' after the function name") && kv_list(p, true, &args);
    }
    if (ok && is_word(peek(p, 0), "with")) {
        advance(p);
        ok = kv_list(p, false, &opts);
    }
    if (!ok || !end_of_line(p))
        return mark_broken(p, 'c', n), false;
    if (kind == ORCH_FN_EXEC && !p->canonical &&
        !(fn = exec_resolve(p, fn, orch_plan_builder_basedir(p->b))))
        return false;
    int ci;
    fed(p, orch_plan_add_call_at(p->b, n, loc, kind, fn, sym, fn_loc, &ci));
    if (ci < 0)
        return true;
    for (struct kv *a = args; a; a = a->next)
        fed(p, orch_plan_call_arg(p->b, ci, a->key, a->kind, a->value, a->loc));
    for (struct kv *o = opts; o; o = o->next)
        fed(p, orch_plan_call_option(p->b, ci, o->key, o->value, o->loc));
    return true;
}

static bool stmt_output(struct parser *p)
{
    struct pref r;
    advance(p);
    if (!port_ref(p, &r) || !end_of_line(p))
        return false;
    if (!is_broken(p, 'd', r.domain))
        fed(p, orch_plan_add_output(p->b, r.domain, r.port, r.loc));
    return true;
}

static bool port_list(struct parser *p, struct plist **out, bool inputs)
{
    struct plist **tail = out;
    if (inputs && peek(p, 0)->kind == T_RPAREN) {
        advance(p);
        return true;
    }
    for (;;) {
        struct plist *l = orch__arena_alloc(&p->line, sizeof *l);
        if (!l)
            return p->oom = true, false;
        if (inputs && peek(p, 0)->kind == T_QMARK) {
            l->ref.optional = true;
            advance(p);
        }
        if (!port_ref(p, &l->ref))
            return false;
        *tail = l;
        tail = &l->next;
        if (peek(p, 0)->kind != T_COMMA)
            return inputs ? expect(p, T_RPAREN, "',' or ')'") : true;
        advance(p);
    }
}

/* The operation keyword before a call, recognised (and consumed) only when a name
 * follows it: `x = expand(...)` maps a call named expand. */
static enum orch_op rhs_op(struct parser *p)
{
    struct token *t = peek(p, 0);
    enum orch_op op;
    if (is_word(t, "broadcast") && peek(p, 1)->kind == T_QMARK) {
        advance(p);
        return ORCH_OP_BROADCAST; /* reported as an optional broadcast input */
    }
    if (peek(p, 1)->kind != T_NAME)
        return ORCH_OP_MAP;
    if (is_word(t, "broadcast"))
        op = ORCH_OP_BROADCAST;
    else if (is_word(t, "filter"))
        op = ORCH_OP_FILTER;
    else if (is_word(t, "reduce"))
        op = ORCH_OP_REDUCE;
    else if (is_word(t, "expand"))
        op = ORCH_OP_EXPAND;
    else
        return ORCH_OP_MAP;
    advance(p);
    if (op == ORCH_OP_EXPAND && is_word(peek(p, 0), "aligned") && peek(p, 1)->kind == T_NAME) {
        advance(p);
        op = ORCH_OP_EXPAND_ALIGNED;
    }
    return op;
}

/* D.P1[, D.P2] = [op] CALL(INPUTS) or D.P = broadcast A.Q. The statement's position is
 * its call's name (for broadcast: the keyword). */
static bool stmt_assign(struct parser *p, bool retired)
{
    struct plist *outs = NULL, *ins = NULL;
    const char *call = NULL;
    orch_loc loc;
    if (!port_list(p, &outs, false) || !expect(p, T_EQ, "'=' or ','"))
        return false;
    loc = peek(p, 0)->loc;
    enum orch_op op = rhs_op(p);
    if (op == ORCH_OP_BROADCAST) {
        if (peek(p, 0)->kind == T_QMARK) {
            orch_plan_diag(p->b, ORCH_DIAG_ERROR, peek(p, 0)->loc,
                           "the input of a broadcast cannot be optional");
            return false;
        }
        if (!(ins = orch__arena_alloc(&p->line, sizeof *ins)))
            return p->oom = true, false;
        if (!port_ref(p, &ins->ref) || !end_of_line(p))
            return false;
    } else if (!name(p, "a call name", &call, &loc) || !expect(p, T_LPAREN, "'('") ||
               !port_list(p, &ins, true) || !end_of_line(p)) {
        return false;
    }
    if (refs_broken(p, outs) || refs_broken(p, ins) || is_broken(p, 'c', call))
        return true;
    int si;
    fed(p, orch_plan_add_stmt(p->b, op, call, loc, &si));
    if (si < 0)
        return true;
    if (retired)
        fed(p, orch_plan_stmt_retire(p->b, si));
    for (struct plist *l = outs; l; l = l->next)
        fed(p, orch_plan_stmt_output(p->b, si, l->ref.domain, l->ref.port, l->ref.loc));
    for (struct plist *l = ins; l; l = l->next)
        fed(p, orch_plan_stmt_input(p->b, si, l->ref.domain, l->ref.port, l->ref.optional,
                                    l->ref.loc));
    return true;
}

static bool statement(struct parser *p)
{
    struct token *t0 = peek(p, 0);
    bool first = !p->seen_stmt;
    p->seen_stmt = true;
    if (t0->kind != T_NAME)
        return syntax(p, t0, "a statement");
    struct token *t1 = peek(p, 1);
    bool keyword = t1->kind != T_DOT;
    if (keyword && is_word(t0, "pipeline"))
        return stmt_pipeline(p);
    if (first)
        orch_plan_diag(p->b, ORCH_DIAG_ERROR, t0->loc,
                       "expected 'pipeline NAME' as the first statement");
    if (keyword && is_word(t0, "domain"))
        return stmt_domain(p);
    if (keyword && is_word(t0, "source"))
        return stmt_source(p, false);
    if (keyword && is_word(t0, "call"))
        return stmt_call(p);
    if (keyword && is_word(t0, "output"))
        return stmt_output(p);
    if (keyword && is_word(t0, "retired") && t1->kind == T_NAME &&
        (peek(p, 2)->kind == T_DOT || is_word(t1, "source"))) {
        if (!p->retired_ok)
            return syntax(p, t0, "a statement ('retired' marks a dropped statement in a "
                                 "job's plan, not in a pipeline)");
        advance(p);
        if (is_word(peek(p, 0), "source") && peek(p, 1)->kind == T_NAME &&
            peek(p, 2)->kind == T_DOT)
            return stmt_source(p, true);
        return stmt_assign(p, true);
    }
    if (!keyword)
        return stmt_assign(p, false);
    return syntax(p, t0,
                  "a statement (pipeline, domain, source, call, output or DOMAIN.PORT = ...)");
}

int orch_lang_parse(orch_plan_builder *b, const char *text, size_t len)
{
    return orch__lang_parse(b, text, len, false);
}

int orch__lang_parse(orch_plan_builder *b, const char *text, size_t len, bool canonical)
{
    return orch__lang_parse_job(b, text, len, canonical, canonical);
}

int orch__lang_parse_job(orch_plan_builder *b, const char *text, size_t len, bool canonical,
                         bool retired_ok)
{
    struct parser p = {.b = b, .canonical = canonical, .retired_ok = retired_ok};
    orch__lex_init(&p.lx, text ? text : "", text ? len : 0, b, &p.line);
    if (len > ORCH_LANG_MAX_BYTES) {
        orch_plan_diag(b, ORCH_DIAG_ERROR, (orch_loc){1, 1},
                       "file too large (more than %u bytes)", ORCH_LANG_MAX_BYTES);
        return 0;
    }
    while (!p.oom && !p.lx.oom) {
        struct token *t = peek(&p, 0);
        if (t->kind == T_EOF)
            break;
        if (t->kind == T_NL) {
            advance(&p);
            continue;
        }
        if (orch_plan_nerrors(b) >= ORCH_LANG_MAX_ERRORS) {
            orch_plan_diag(b, ORCH_DIAG_ERROR, t->loc, "too many errors; stopping here");
            break;
        }
        if (!statement(&p))
            sync_line(&p);
        /* What is left in the lookahead is only NL/EOF copies: nothing refers to the
         * line's strings any more. */
        orch__arena_free(&p.line);
    }
    p.oom |= p.lx.oom;
    if (!p.seen_stmt && !p.oom)
        orch_plan_diag(b, ORCH_DIAG_ERROR, (orch_loc){1, 1},
                       "no 'pipeline NAME' statement (the file has no statements)");
    orch__arena_free(&p.line);
    orch__arena_free(&p.keep);
    orch__map_free(&p.broken);
    return p.oom || b->oom ? -ENOMEM : 0;
}
