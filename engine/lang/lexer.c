/* lexer.c — bytes to tokens for the `.orch` language. */
#include "lexer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Makes t an error token: its message is kept (in the line's arena) for the parser to
 * report if it gets that far on the line, so a line never yields more than one error. */
static void lex_fail(struct lexer *lx, struct token *t, orch_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void lex_fail(struct lexer *lx, struct token *t, orch_loc loc, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    t->kind = T_ERROR;
    t->loc = loc;
    t->msg = orch__arena_strdup(lx->arena, msg);
    if (!t->msg) {
        t->msg = "out of memory";
        lx->oom = true;
    }
}

void orch__lex_init(struct lexer *lx, const char *src, size_t len, orch_plan_builder *b,
                    struct orch__arena *arena)
{
    *lx = (struct lexer){.src = src, .len = len, .line = 1, .b = b, .arena = arena};
}

orch_loc orch__lex_loc(const struct lexer *lx)
{
    return (orch_loc){lx->line, (int)(lx->pos - lx->line_start) + 1};
}

static orch_loc loc_at(const struct lexer *lx, size_t pos)
{
    return (orch_loc){lx->line, (int)(pos - lx->line_start) + 1};
}

static void newline(struct lexer *lx)
{
    lx->pos++; /* past '\n' */
    lx->line++;
    lx->line_start = lx->pos;
}

void orch__lex_skip_line(struct lexer *lx)
{
    const char *nl =
        lx->pos < lx->len ? memchr(lx->src + lx->pos, '\n', lx->len - lx->pos) : NULL;
    if (!nl) {
        lx->pos = lx->len;
        return;
    }
    lx->pos = (size_t)(nl - lx->src);
    newline(lx);
}

static bool is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int hexval(unsigned char c)
{
    if (is_digit(c))
        return c - '0';
    if ((c | 32) >= 'a' && (c | 32) <= 'f')
        return (c | 32) - 'a' + 10;
    return -1;
}

/* A byte that cannot start a token: reported with its value. */
static void bad_char(struct lexer *lx, struct token *t, size_t at)
{
    const unsigned char *p = (const unsigned char *)lx->src + at;
    orch_loc loc = loc_at(lx, at);
    size_t k = *p < 0x80 ? 1 : orch__utf8_len(p, lx->len - at);
    if (*p >= 0x21 && *p < 0x7f) {
        lex_fail(lx, t, loc, "invalid character '%c'", *p);
    } else if (*p < 0x80) {
        lex_fail(lx, t, loc, "invalid character 0x%02x", *p);
    } else if (k == 0) {
        lex_fail(lx, t, loc, "invalid byte 0x%02x (not UTF-8)", *p);
    } else {
        unsigned cp = p[0] & (0x7fu >> k);
        for (size_t i = 1; i < k; i++)
            cp = cp << 6 | (p[i] & 0x3f);
        lex_fail(lx, t, loc,
                 "invalid character U+%04X (only strings and comments may hold "
                 "non-ASCII text)",
                 cp);
    }
}

static void lex_name(struct lexer *lx, struct token *t)
{
    const unsigned char *p = (const unsigned char *)lx->src;
    size_t e = lx->pos;
    while (e < lx->len && (is_alpha(p[e]) || is_digit(p[e])))
        e++;
    t->len = e - lx->pos;
    lx->pos = e;
    t->kind = T_NAME;
    if (t->len > ORCH__NAME_MAX)
        lex_fail(lx, t, t->loc, "name too long (%zu bytes; at most %d)", t->len,
                 ORCH__NAME_MAX);
}

static void lex_number(struct lexer *lx, struct token *t)
{
    const unsigned char *p = (const unsigned char *)lx->src;
    size_t e = lx->pos + (p[lx->pos] == '-');
    while (e < lx->len && is_digit(p[e]))
        e++;
    if (e + 1 < lx->len && p[e] == '.' && is_digit(p[e + 1])) {
        e++;
        while (e < lx->len && is_digit(p[e]))
            e++;
    }
    while (e < lx->len && ((p[e] | 32) >= 'a' && (p[e] | 32) <= 'z'))
        e++;
    t->len = e - lx->pos;
    lx->pos = e;
    t->kind = T_NUMBER;
    if (t->len > 64)
        lex_fail(lx, t, t->loc, "number too long (%zu bytes)", t->len);
}

/* One escape after '\\' at p[i]; appends the byte to out. Returns the bytes consumed after
 * the backslash, or 0 after reporting an error. */
static size_t lex_escape(struct lexer *lx, struct token *t, size_t i, struct orch__buf *out)
{
    const unsigned char *p = (const unsigned char *)lx->src;
    orch_loc loc = loc_at(lx, i - 1);
    if (i >= lx->len || p[i] == '\n') {
        lex_fail(lx, t, loc, "unterminated string");
        return 0;
    }
    static const char from[] = "ntfr\\\"", to[] = "\n\t\f\r\\\"";
    const char *k = p[i] ? strchr(from, p[i]) : NULL;
    if (k) {
        orch__buf_putc(out, to[k - from]);
        return 1;
    }
    if (p[i] == 'x') {
        int hi = i + 1 < lx->len ? hexval(p[i + 1]) : -1;
        int lo = i + 2 < lx->len ? hexval(p[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            lex_fail(lx, t, loc, "invalid escape: \\x needs two hex digits");
            return 0;
        }
        if (hi == 0 && lo == 0) {
            lex_fail(lx, t, loc, "a string cannot hold a NUL byte (\\x00)");
            return 0;
        }
        orch__buf_putc(out, (char)(hi * 16 + lo));
        return 3;
    }
    if (p[i] >= 0x21 && p[i] < 0x7f)
        lex_fail(lx, t, loc, "invalid escape '\\%c' in string", p[i]);
    else
        lex_fail(lx, t, loc, "invalid escape: '\\' before byte 0x%02x", p[i]);
    return 0;
}

/* A string literal; on any error, the rest of the line is the parser's to skip. */
static void lex_string(struct lexer *lx, struct token *t)
{
    const unsigned char *p = (const unsigned char *)lx->src;
    struct orch__buf out = {0};
    size_t i = lx->pos + 1;
    enum tok_kind kind = T_ERROR;
    for (;;) {
        if (i >= lx->len || p[i] == '\n') {
            lex_fail(lx, t, t->loc, "unterminated string");
            break;
        }
        unsigned char c = p[i];
        if (c == '"') {
            i++;
            kind = T_STRING;
            break;
        }
        if (c == '\\') {
            size_t n = lex_escape(lx, t, i + 1, &out);
            if (!n)
                break;
            i += 1 + n;
            continue;
        }
        if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
            lex_fail(lx, t, loc_at(lx, i),
                     "control character 0x%02x in string; write it as an escape", c);
            break;
        }
        size_t k = c < 0x80 ? 1 : orch__utf8_len(p + i, lx->len - i);
        if (k == 0) {
            lex_fail(lx, t, loc_at(lx, i),
                     "invalid byte 0x%02x in string (not UTF-8); write it as \\x%02x", c, c);
            break;
        }
        orch__buf_add(&out, p + i, k);
        i += k;
    }
    if (kind == T_STRING) {
        t->kind = T_STRING;
        t->str = orch__arena_strndup(lx->arena, out.p ? out.p : "", out.len);
        if (out.oom || !t->str) {
            lex_fail(lx, t, t->loc, "out of memory");
            lx->oom = true;
        }
    }
    orch__buf_free(&out);
    t->len = i - lx->pos;
    lx->pos = i;
}

void orch__lex_next(struct lexer *lx, struct token *t)
{
    const unsigned char *p = (const unsigned char *)lx->src;
    while (lx->pos < lx->len && (p[lx->pos] == ' ' || p[lx->pos] == '\t' ||
                                 p[lx->pos] == '\r' || p[lx->pos] == '\f'))
        lx->pos++;
    if (lx->pos < lx->len && p[lx->pos] == '#') {
        const char *nl = memchr(lx->src + lx->pos, '\n', lx->len - lx->pos);
        lx->pos = nl ? (size_t)(nl - lx->src) : lx->len;
    }
    *t = (struct token){.loc = orch__lex_loc(lx), .text = lx->src + lx->pos};
    if (lx->pos >= lx->len) {
        t->kind = T_EOF;
        return;
    }
    unsigned char c = p[lx->pos];
    static const char punct[] = "=,.()?";
    static const enum tok_kind pkind[] = {T_EQ, T_COMMA, T_DOT, T_LPAREN, T_RPAREN, T_QMARK};
    const char *k = c ? strchr(punct, c) : NULL;
    if (c == '\n') {
        t->kind = T_NL;
        t->len = 1;
        newline(lx);
    } else if (k) {
        t->kind = pkind[k - punct];
        t->len = 1;
        lx->pos++;
    } else if (is_alpha(c)) {
        lex_name(lx, t);
    } else if (is_digit(c) || (c == '-' && lx->pos + 1 < lx->len && is_digit(p[lx->pos + 1]))) {
        lex_number(lx, t);
    } else if (c == '"') {
        lex_string(lx, t);
    } else {
        bad_char(lx, t, lx->pos);
        size_t k8 = c >= 0x80 ? orch__utf8_len(p + lx->pos, lx->len - lx->pos) : 1;
        t->len = k8 ? k8 : 1;
        lx->pos += t->len;
    }
}
