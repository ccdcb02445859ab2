/* builtin_sigs.h — the signatures of orch's built-in functions: what the compiler checks.
 *
 * One table, written by hand in builtin_sigs.c, says for every built-in function (DESIGN
 * §7) which operations it can serve (map, expand, filter, reduce), how many inputs it
 * takes, how many outputs it produces, and which arguments it accepts, with their type,
 * range or choices, and whether they are required. The plan builder checks every `call`
 * of a built-in against it; the built-in UDFs themselves read their arguments at init and
 * may rely on what this table promises (an int argument is decimal text in its range, a
 * decimal argument is text orch_builtin_decimal() reads, in its range, a choice argument
 * is one of its choices).
 *
 * This header deliberately knows nothing of the engine: operations are its own bit mask,
 * so udfs/ never includes engine/ headers. The table is static and immutable; every
 * pointer it hands out is valid for the life of the program.
 */
#ifndef ORCH_BUILTIN_SIGS_H
#define ORCH_BUILTIN_SIGS_H

#include <stdbool.h>
#include <stdint.h>

/* Operations a built-in can serve (expand covers `expand aligned` too). */
enum {
    ORCH_BUILTIN_MAP = 1u << 0,
    ORCH_BUILTIN_EXPAND = 1u << 1,
    ORCH_BUILTIN_FILTER = 1u << 2,
    ORCH_BUILTIN_REDUCE = 1u << 3,
    ORCH_BUILTIN_ANY = 0xfu,
};

enum orch_builtin_arg_type {
    ORCH_BUILTIN_ARG_STRING,  /* a quoted string literal of at least `min` bytes */
    ORCH_BUILTIN_ARG_INT,     /* a decimal integer literal within [min, max] */
    ORCH_BUILTIN_ARG_DECIMAL, /* a number literal with at most 6 decimals ("0.5", "2"),
                               * whose millionths are within [min, max] */
    ORCH_BUILTIN_ARG_CHOICE,  /* a name (or a string) equal to one of `choices` */
};

/* Millionths in one: a DECIMAL argument's value and range are counted in millionths, so
 * that the value the compiler checks is the value the UDF gets, exactly (no floating
 * point): fps=0.5 is 500000. */
#define ORCH_BUILTIN_MICRO 1000000

struct orch_builtin_arg {
    const char *key;
    enum orch_builtin_arg_type type;
    bool required;
    int64_t min, max;           /* INT: the range; DECIMAL: the range in millionths;
                                 * STRING: min is the least length */
    const char *const *choices; /* ORCH_BUILTIN_ARG_CHOICE only; NULL-terminated */
    const char *def;            /* the default as text when not required, or NULL */
};

struct orch_builtin_sig {
    const char *name;
    unsigned ops; /* ORCH_BUILTIN_* bits */
    int min_inputs, max_inputs;
    int outputs; /* values produced per record (per child for expand) */
    int nargs;
    const struct orch_builtin_arg *args;
    const char *summary; /* one line, for help and plan printing */
};

/* The signature named `name`, or NULL when no built-in has that name. */
const struct orch_builtin_sig *orch_builtin_sig_find(const char *name);
/* The number of built-ins, and the i-th in table order (0 <= i < count). */
int orch_builtin_sig_count(void);
const struct orch_builtin_sig *orch_builtin_sig_at(int i);
/* The argument `key` of sig, or NULL. */
const struct orch_builtin_arg *orch_builtin_sig_arg(const struct orch_builtin_sig *sig,
                                                    const char *key);
/* Reads a DECIMAL argument's text, -?[0-9]{1,12}(\.[0-9]{1,6})?, into *micro, its value
 * in millionths ("0.5" -> 500000, "-2" -> -2000000). Returns false, *micro untouched, for
 * any other text (a seventh decimal, a suffix, an exponent, a sign but '-'). */
bool orch_builtin_decimal(const char *text, int64_t *micro);
/* Writes millionths as the shortest decimal text that orch_builtin_decimal() reads back
 * to the same value ("0.5", "1000", "-0.000001") into buf, and returns buf. */
#define ORCH_BUILTIN_DECIMAL_TEXT_MAX 24
char *orch_builtin_decimal_text(int64_t micro, char buf[ORCH_BUILTIN_DECIMAL_TEXT_MAX]);

/* The names of the operations in ops, e.g. "map" or "expand or expand aligned", as static
 * text. */
const char *orch_builtin_ops_text(unsigned ops);

#endif
