/* test_lang.c — the `.orch` front end: every compiler check with its exact message and
 * position, success for every operation, canonical round trips of every example, the
 * plan hash, and hostile input (which must give errors, never a crash or a hang). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "builtin_sigs.h"
#include "orch_error.h"
#include "orch_lang.h"

/* ---- helpers ---- */

struct result {
    int rc;
    orch_plan *plan;
    char *diag; /* everything written to the diagnostics stream */
};

static struct result compile_n(const char *src, size_t len)
{
    struct result r = {0};
    size_t n = 0;
    FILE *f = open_memstream(&r.diag, &n);
    assert_non_null(f);
    r.rc = orch_lang_compile("t.orch", src, len, "/base", f, &r.plan);
    fclose(f);
    return r;
}

static struct result compile(const char *src)
{
    return compile_n(src, strlen(src));
}

static void done(struct result *r)
{
    orch_plan_free(r->plan);
    free(r->diag);
    memset(r, 0, sizeof *r);
}

/* Compiles src, which must fail with exactly the diagnostics `expect`. */
static void expect_diags(const char *src, const char *expect)
{
    struct result r = compile(src);
    assert_non_null(r.diag);
    if (strcmp(r.diag, expect) != 0) {
        fputs("source:\n", stderr);
        fputs(src, stderr);
        fputs("\nexpected:\n", stderr);
        fputs(expect, stderr);
        fputs("\ngot:\n", stderr);
        fputs(r.diag, stderr);
        fail_msg("unexpected diagnostics");
    }
    assert_int_equal(r.rc, strstr(expect, ": error: ") ? ORCH_ESYNTAX : 0);
    assert_true(r.rc ? r.plan == NULL : r.plan != NULL);
    done(&r);
}

/* Compiles src, which must succeed without any diagnostic. */
static orch_plan *ok(const char *src)
{
    struct result r = compile(src);
    if (r.rc != 0 || r.diag[0])
        fail_msg("source:\n%s\nunexpected (rc %d):\n%s", src, r.rc, r.diag);
    orch_plan *p = r.plan;
    free(r.diag);
    return p;
}

/* The canonical text compiles to the same text, and the plan has the same indexes. */
static void assert_round_trip(const orch_plan *p)
{
    orch_plan *q;
    int rc = orch_plan_from_canonical(orch_plan_canonical(p), &q);
    if (rc)
        fail_msg("canonical text does not rebuild (%s):\n%s", orch_error_detail(),
                 orch_plan_canonical(p));
    assert_string_equal(orch_plan_canonical(q), orch_plan_canonical(p));
    assert_string_equal(orch_plan_hash(q), orch_plan_hash(p));
    assert_int_equal(orch_plan_nports(q), orch_plan_nports(p));
    for (int i = 0; i < orch_plan_nports(p); i++)
        assert_string_equal(orch_plan_port(q, i)->qualified, orch_plan_port(p, i)->qualified);
    assert_int_equal(orch_plan_nstmts(q), orch_plan_nstmts(p));
    for (int i = 0; i < orch_plan_nstmts(p); i++)
        assert_int_equal(orch_plan_stmt(q, i)->out[0], orch_plan_stmt(p, i)->out[0]);
    orch_plan_free(q);
}

/* ---- every check, with its exact message and position ---- */

/* Lines 1-3: a pipeline with one root domain `a` and its source port a.x. */
#define ROOT "pipeline p\ndomain a\nsource a.x = files(\"*\")\n"
/* Lines 1-6: ROOT, a child domain `b` of `a`, and its plain expand into b.y. */
#define TREE ROOT "domain b in a\ncall s = split_lines()\nb.y = expand s(a.x)\n"

struct diag_case {
    const char *name;
    const char *src;
    const char *expect;
};

static const struct diag_case definition_cases[] = {
    {"empty file", "",
     "t.orch:1:1: error: no 'pipeline NAME' statement (the file has no statements)\n"},
    {"comments only", "# nothing\n\n   # here\n",
     "t.orch:1:1: error: no 'pipeline NAME' statement (the file has no statements)\n"},
    {"pipeline not first", "# x\ndomain a\npipeline p\n",
     "t.orch:2:1: error: expected 'pipeline NAME' as the first statement\n"},
    {"pipeline twice", "pipeline p\npipeline q\n",
     "t.orch:2:10: error: pipeline name given twice (first at 1:10)\n"},
    {"domain twice", ROOT "domain a\n",
     "t.orch:4:8: error: domain 'a' is already defined at 2:8\n"},
    {"domain own parent", ROOT "domain c in c\n",
     "t.orch:4:8: error: domain 'c' cannot be its own parent\n"},
    {"parent defined after use", ROOT "domain c in d\ndomain d in a\n",
     "t.orch:4:8: error: unknown domain 'd'\n"
     "t.orch:5:8: error: child domain 'd' has no plain expand\n"},
    {"call twice", ROOT "call u = upper()\ncall u = identity()\na.y = u(a.x)\n",
     "t.orch:5:6: error: call 'u' is already defined at 4:6\n"},
    {"call used before its definition", ROOT "a.y = u(a.x)\ncall u = upper()\n",
     "t.orch:4:7: error: unknown call 'u'\n"
     "t.orch:5:6: warning: call 'u' is never used\n"},
    {"unknown function", ROOT "call u = shout()\n",
     "t.orch:4:10: error: unknown function 'shout'\n"},
    {"unknown domain in a port", ROOT "call u = upper()\nz.y = u(a.x)\n",
     "t.orch:5:1: error: unknown domain 'z'\n"},
    {"unknown domain in an input", ROOT "call u = upper()\na.y = u(z.x)\n",
     "t.orch:5:9: error: unknown domain 'z'\n"},
    {"unknown port", ROOT "call u = upper()\na.y = u(a.nope)\n",
     "t.orch:5:9: error: unknown port 'a.nope': no source or statement produces it\n"},
    {"port with two producers",
     ROOT "call u = upper()\ncall v = exec(\"v\")\na.y = u(a.x)\na.z, a.y = v(a.x)\n",
     "t.orch:7:6: error: port 'a.y' has two producers (first at 6:1)\n"},
    {"source port produced again", ROOT "call u = upper()\na.x = u(a.x)\n",
     "t.orch:5:1: error: port 'a.x' has two producers (first at 3:8)\n"},
    {"output of an unknown port", ROOT "output a.q\n",
     "t.orch:4:8: error: unknown port 'a.q': no source or statement produces it\n"},
    {"output twice", ROOT "output a.x\noutput a.x\n",
     "t.orch:5:8: warning: port 'a.x' is already an output (first at 4:8)\n"},
    {"unused call", ROOT "call u = upper()\n", "t.orch:4:6: warning: call 'u' is never used\n"},
};

static const struct diag_case structure_cases[] = {
    {"root without source", "pipeline p\ndomain a\n",
     "t.orch:2:8: error: root domain 'a' has no source\n"},
    {"second source", ROOT "source a.y = lines(\"f\")\n",
     "t.orch:4:8: error: root domain 'a' already has a source at 3:8\n"},
    {"source on a child", TREE "source b.z = files(\"*\")\n",
     "t.orch:7:8: error: source on child domain 'b': sources feed root domains only\n"},
    {"empty glob", "pipeline p\ndomain a\nsource a.x = files(\"\")\n",
     "t.orch:2:8: error: root domain 'a' has no source\n"
     "t.orch:3:8: error: files() needs a non-empty glob\n"},
    {"child without expand", ROOT "domain b in a\n",
     "t.orch:4:8: error: child domain 'b' has no plain expand\n"},
    {"two plain expands", TREE "call t = split(sep=\",\")\nb.z = expand t(a.x)\n",
     "t.orch:8:14: error: domain 'b' already has a plain expand at 6:14\n"},
    {"call used twice", ROOT "call u = upper()\na.y = u(a.x)\na.z = u(a.y)\n",
     "t.orch:6:7: error: call 'u' is already used at 5:7; declare another call\n"},
    {"self cycle", ROOT "call u = upper()\na.y = u(a.y)\n",
     "t.orch:5:7: error: cycle: a.y -> a.y\n"},
    {"cycle of three",
     ROOT "call u = upper()\ncall v = upper()\ncall w = upper()\n"
          "a.p = u(a.r)\na.q = v(a.p)\na.r = w(a.q)\n",
     "t.orch:7:7: error: cycle: a.p -> a.q -> a.r -> a.p\n"},
    {"cycle through an expand",
     "pipeline p\ndomain pdf\ndomain page in pdf\nsource pdf.path = files(\"*\")\n"
     "call r = count()\ncall s = split_lines()\n"
     "pdf.x = reduce r(page.image)\npage.image = expand s(pdf.x)\n",
     "t.orch:7:16: error: cycle: pdf.x -> page.image -> pdf.x\n"},
    {"cycle through structure only",
     TREE "call u = upper()\ncall v = identity()\n"
          "b.z = u(b.y)\na.w = v(a.x)\n",
     ""},
};

static const struct diag_case fit_cases[] = {
    {"map over two domains", TREE "call u = upper()\nb.z = u(a.x)\n",
     "t.orch:8:9: error: input 'a.x' is in domain 'a', but this map runs in 'b' (broadcast "
     "brings an ancestor's value down)\n"},
    {"map from a sibling",
     TREE "domain c in a\ncall t = split_lines()\nc.y = expand t(a.x)\n"
          "call u = upper()\nc.z = u(b.y)\n",
     "t.orch:11:9: error: input 'b.y' is in domain 'b', but this map runs in 'c'\n"},
    {"outputs in two domains", TREE "call x = exec(\"x\")\na.q, b.q = x(a.x)\n",
     "t.orch:8:6: error: all outputs of a statement must be in one domain: 'b.q' is in 'b', "
     "not 'a'\n"},
    {"filter with two outputs", ROOT "call k = exec(\"k\")\na.y, a.z = filter k(a.x)\n",
     "t.orch:5:6: error: filter has exactly one output\n"},
    {"filter without input", ROOT "call k = exec(\"k\")\na.y = filter k()\n",
     "t.orch:5:14: error: filter needs at least one input\n"},
    {"map without input", ROOT "call k = exec(\"k\")\na.y = k()\n",
     "t.orch:5:7: error: map needs at least one input\n"},
    {"filter of an optional value", ROOT "call k = exec(\"k\")\na.y = filter k(?a.x)\n",
     "t.orch:5:17: error: the first input of a filter is the value it passes on; it cannot be "
     "optional\n"},
    {"expand into a root", ROOT "call s = split_lines()\na.y = expand s(a.x)\n",
     "t.orch:5:1: error: expand into root domain 'a'; an expand fills a child domain\n"},
    {"expand from the child",
     TREE "domain c in b\ncall t = split_lines()\n"
          "c.y = expand t(a.x)\n",
     "t.orch:9:16: error: input 'a.x' is in domain 'a', but an expand into 'c' reads from its "
     "parent 'b'\n"},
    {"aligned without a plain expand",
     ROOT "domain b in a\ncall s = split_lines()\n"
          "b.y = expand aligned s(a.x)\n",
     "t.orch:4:8: error: child domain 'b' has no plain expand\n"
     "t.orch:6:22: error: expand aligned into 'b', which has no plain expand\n"},
    {"broadcast from a descendant", TREE "a.z = broadcast b.y\n",
     "t.orch:7:17: error: broadcast needs an ancestor: 'b' is not an ancestor domain of 'a'\n"},
    {"broadcast within a domain", ROOT "a.z = broadcast a.x\n",
     "t.orch:4:17: error: broadcast needs an ancestor: 'a' is not an ancestor domain of 'a'\n"},
    {"broadcast with two outputs", TREE "b.p, b.q = broadcast a.x\n",
     "t.orch:7:12: error: broadcast has exactly one input and one output\n"},
    {"reduce with two outputs", TREE "call r = exec(\"r\")\na.p, a.q = reduce r(b.y)\n",
     "t.orch:8:6: error: reduce has exactly one output\n"},
    {"reduce within a domain", TREE "call r = count()\na.p = reduce r(a.x)\n",
     "t.orch:8:16: error: input 'a.x' is in domain 'a', which is not a child domain of 'a'\n"},
    {"reduce from a grandchild",
     TREE "domain c in b\ncall t = split_lines()\n"
          "c.y = expand t(b.y)\ncall r = count()\n"
          "a.p = reduce r(c.y)\n",
     "t.orch:11:16: error: input 'c.y' is in domain 'c', which is not a child domain of 'a'\n"},
    {"reduce over two children",
     TREE "domain c in a\ncall t = split_lines()\n"
          "c.y = expand t(a.x)\ncall r = exec(\"r\")\n"
          "a.p = reduce r(b.y, c.y)\n",
     "t.orch:11:21: error: inputs of a reduce must be in one child domain: 'c.y' is in 'c', "
     "not 'b'\n"},
};

static const struct diag_case builtin_cases[] = {
    {"filter function as map", ROOT "call k = nonempty()\na.y = k(a.x)\n",
     "t.orch:5:7: error: function 'nonempty' cannot be used with map; it serves filter\n"},
    {"map function as filter", ROOT "call u = upper()\na.y = filter u(a.x)\n",
     "t.orch:5:14: error: function 'upper' cannot be used with filter; it serves map\n"},
    {"expand function as map", ROOT "call s = split_lines()\na.y = s(a.x)\n",
     "t.orch:5:7: error: function 'split_lines' cannot be used with map; it serves expand or "
     "expand aligned\n"},
    {"reduce function as map", ROOT "call c = concat()\na.y = c(a.x)\n",
     "t.orch:5:7: error: function 'concat' cannot be used with map; it serves reduce\n"},
    {"map function as expand",
     ROOT "domain b in a\ncall u = read_file()\nb.y = expand u(a.x)\n",
     "t.orch:6:14: error: function 'read_file' cannot be used with expand; it serves map\n"},
    {"too many inputs", ROOT "call u = upper()\na.y = u(a.x, a.x)\n",
     "t.orch:5:7: error: function 'upper' takes 1 input, not 2\n"},
    {"reduce with two inputs", TREE "call c = count()\na.n = reduce c(b.y, b.y)\n",
     "t.orch:8:14: error: function 'count' takes 1 input, not 2\n"},
    {"two outputs of a built-in",
     ROOT "domain b in a\ncall s = split_lines()\n"
          "b.y, b.z = expand s(a.x)\n",
     "t.orch:6:19: error: function 'split_lines' produces 1 output, not 2\n"},
    {"unknown argument", ROOT "call u = upper(case=1)\na.y = u(a.x)\n",
     "t.orch:4:21: error: function 'upper' has no argument 'case' (it takes none)\n"},
    {"unknown argument, with a list",
     ROOT "call f = fail_if(contains=\"x\", what=1)\na.y = f(a.x)\n",
     "t.orch:4:37: error: function 'fail_if' has no argument 'what' (it takes: contains, "
     "kind)\n"},
    {"missing argument", ROOT "domain b in a\ncall s = split()\nb.y = expand s(a.x)\n",
     "t.orch:5:10: error: function 'split' needs argument 'sep'\n"},
    {"duplicate argument", ROOT "call c = concat(sep=\"a\", sep=\"b\")\n",
     "t.orch:4:6: warning: call 'c' is never used\n"
     "t.orch:4:30: error: argument 'sep' given twice (first at 4:21)\n"},
    {"string argument given a number", ROOT "call c = concat(sep=1)\n",
     "t.orch:4:6: warning: call 'c' is never used\n"
     "t.orch:4:21: error: argument 'sep' of 'concat' must be a string, not '1'\n"},
    {"empty separator", ROOT "call s = split(sep=\"\")\n",
     "t.orch:4:6: warning: call 's' is never used\n"
     "t.orch:4:20: error: argument 'sep' of 'split' must not be empty\n"},
    {"integer argument given a string", ROOT "call s = sleep(ms=\"5\")\n",
     "t.orch:4:6: warning: call 's' is never used\n"
     "t.orch:4:19: error: argument 'ms' of 'sleep' must be an integer, not '5'\n"},
    {"integer argument given a decimal", ROOT "call s = sleep(ms=1.5)\n",
     "t.orch:4:6: warning: call 's' is never used\n"
     "t.orch:4:19: error: argument 'ms' of 'sleep' must be an integer (it takes no decimals), "
     "not '1.5'\n"},
    {"negative integer argument", ROOT "call s = sleep(ms=-1)\n",
     "t.orch:4:6: warning: call 's' is never used\n"
     "t.orch:4:19: error: argument 'ms' of 'sleep' must be from 0 to 86400000, not '-1'\n"},
    {"dpi too low", ROOT "call r = pdf_render(dpi=0)\n",
     "t.orch:4:6: warning: call 'r' is never used\n"
     "t.orch:4:25: error: argument 'dpi' of 'pdf_render' must be from 1 to 1200, not '0'\n"},
    {"dpi too high", ROOT "call r = pdf_render(dpi=1201)\n",
     "t.orch:4:6: warning: call 'r' is never used\n"
     "t.orch:4:25: error: argument 'dpi' of 'pdf_render' must be from 1 to 1200, not '1201'\n"},
    {"unknown failure kind", ROOT "call f = fail_if(contains=\"x\", kind=boom)\n",
     "t.orch:4:6: warning: call 'f' is never used\n"
     "t.orch:4:37: error: argument 'kind' of 'fail_if' must be one of record, group, attempt, "
     "crash, hang, not 'boom'\n"},
    {"negative fail_attempts", ROOT "call f = flaky(fail_attempts=-2)\n",
     "t.orch:4:6: warning: call 'f' is never used\n"
     "t.orch:4:30: error: argument 'fail_attempts' of 'flaky' must be from 0 to 1000000, not "
     "'-2'\n"},
    {"decimal argument with a seventh decimal", ROOT "call v = video_frames(fps=0.1234567)\n",
     "t.orch:4:6: warning: call 'v' is never used\n"
     "t.orch:4:27: error: argument 'fps' of 'video_frames' must be a number with at most 6 "
     "decimals, like 0.5 or 2, not '0.1234567'\n"},
    {"decimal argument with a unit", ROOT "call v = video_scenes(min_len=1.5s)\n",
     "t.orch:4:6: warning: call 'v' is never used\n"
     "t.orch:4:31: error: argument 'min_len' of 'video_scenes' must be a number with at most "
     "6 decimals, like 0.5 or 2, not '1.5s'\n"},
    {"decimal argument given a string", ROOT "call v = video_frames(fps=\"0.5\")\n",
     "t.orch:4:6: warning: call 'v' is never used\n"
     "t.orch:4:27: error: argument 'fps' of 'video_frames' must be a number with at most 6 "
     "decimals, like 0.5 or 2, not '0.5'\n"},
    {"decimal argument too low", ROOT "call v = video_frames(fps=0.0009)\n",
     "t.orch:4:6: warning: call 'v' is never used\n"
     "t.orch:4:27: error: argument 'fps' of 'video_frames' must be from 0.001 to 1000, not "
     "'0.0009'\n"},
    {"decimal argument too high", ROOT "call v = video_frames(fps=1000.000001)\n",
     "t.orch:4:6: warning: call 'v' is never used\n"
     "t.orch:4:27: error: argument 'fps' of 'video_frames' must be from 0.001 to 1000, not "
     "'1000.000001'\n"},
    {"negative decimal argument", ROOT "call v = video_scenes(max_len=-0.5)\n",
     "t.orch:4:6: warning: call 'v' is never used\n"
     "t.orch:4:31: error: argument 'max_len' of 'video_scenes' must be from 0 to 86400, not "
     "'-0.5'\n"},
    {"integer argument beside decimal ones", ROOT "call v = video_frames(max_side=0.5)\n",
     "t.orch:4:6: warning: call 'v' is never used\n"
     "t.orch:4:32: error: argument 'max_side' of 'video_frames' must be an integer (it takes "
     "no decimals), not '0.5'\n"},
    {"ocr language given a name", ROOT "call o = tesseract_ocr(lang=eng)\n",
     "t.orch:4:6: warning: call 'o' is never used\n"
     "t.orch:4:29: error: argument 'lang' of 'tesseract_ocr' must be a string, not 'eng'\n"},
    {"library arguments are free, but not twice",
     ROOT "call l = library(\"l.so\", \"f\")(a=1, a=2)\n",
     "t.orch:4:6: warning: call 'l' is never used\n"
     "t.orch:4:38: error: argument 'a' given twice (first at 4:33)\n"},
    {"library without symbol", ROOT "call l = library(\"l.so\", \"\")\n",
     "t.orch:4:10: error: library() needs a symbol name\n"},
    {"exec without command", ROOT "call e = exec(\" \")\n",
     "t.orch:4:10: error: exec() needs a command line\n"},
};

static const struct diag_case option_cases[] = {
    {"unknown option", ROOT "call u = upper() with threads=2\na.y = u(a.x)\n",
     "t.orch:4:31: error: unknown option 'threads' (options: workers, batch, batch_bytes, "
     "cpus, "
     "gpus, retries, timeout, reserve)\n"},
    {"duplicate option", ROOT "call u = upper() with batch=2, batch=3\na.y = u(a.x)\n",
     "t.orch:4:38: error: option 'batch' given twice (first at 4:29)\n"},
    {"workers 0", ROOT "call u = upper() with workers=0\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'workers' must be an integer from 1 to 1024, not '0'\n"},
    {"workers 1025", ROOT "call u = upper() with workers=1025\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'workers' must be an integer from 1 to 1024, not '1025'\n"},
    {"workers -1", ROOT "call u = upper() with workers=-1\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'workers' must be an integer from 1 to 1024, not '-1'\n"},
    {"workers 1.5", ROOT "call u = upper() with workers=1.5\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'workers' must be an integer from 1 to 1024, not '1.5'\n"},
    {"batch 0", ROOT "call u = upper() with batch=0\na.y = u(a.x)\n",
     "t.orch:4:29: error: option 'batch' must be auto or an integer from 1 to 1000000 (the "
     "most records the UDF takes in one run), not '0'\n"},
    {"batch too big", ROOT "call u = upper() with batch=1000001\na.y = u(a.x)\n",
     "t.orch:4:29: error: option 'batch' must be auto or an integer from 1 to 1000000 (the "
     "most records the UDF takes in one run), not '1000001'\n"},
    {"retries too many", ROOT "call u = upper() with retries=1001\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'retries' must be an integer from 0 to 1000, not '1001'\n"},
    {"retries as a word", ROOT "call u = upper() with retries=many\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'retries' must be an integer from 0 to 1000, not 'many'\n"},
    {"batch_bytes 0", ROOT "call u = upper() with batch_bytes=0\na.y = u(a.x)\n",
     "t.orch:4:35: error: option 'batch_bytes' must be a positive size like 65536, 512K or "
     "64MiB (or none), not '0'\n"},
    {"batch_bytes with a bad unit",
     ROOT "call u = upper() with batch_bytes=64MB\na.y = u(a.x)\n",
     "t.orch:4:35: error: option 'batch_bytes' must be a positive size like 65536, 512K or "
     "64MiB (or none), not '64MB'\n"},
    {"batch_bytes too big",
     ROOT "call u = upper() with batch_bytes=99999999GiB\na.y = u(a.x)\n",
     "t.orch:4:35: error: option 'batch_bytes' must be a positive size like 65536, 512K or "
     "64MiB (or none), not '99999999GiB'\n"},
    {"cpus negative", ROOT "call u = upper() with cpus=-1\na.y = u(a.x)\n",
     "t.orch:4:28: error: option 'cpus' must be a number from 0 to 1024 with at most 6 "
     "decimals, not '-1'\n"},
    {"gpus too many", ROOT "call u = upper() with gpus=1024.5\na.y = u(a.x)\n",
     "t.orch:4:28: error: option 'gpus' must be a number from 0 to 1024 with at most 6 "
     "decimals, not '1024.5'\n"},
    {"gpus too precise", ROOT "call u = upper() with gpus=0.1234567\na.y = u(a.x)\n",
     "t.orch:4:28: error: option 'gpus' must be a number from 0 to 1024 with at most 6 "
     "decimals, not '0.1234567'\n"},
    {"timeout 0", ROOT "call u = upper() with timeout=0s\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'timeout' must be greater than 0 (none means no timeout)\n"},
    {"timeout without unit", ROOT "call u = upper() with timeout=120\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'timeout' must be a duration like 500ms, 120s, 5m or 2h (or "
     "none), not '120'\n"},
    {"timeout too long", ROOT "call u = upper() with timeout=1001h\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'timeout' must be at most 1000h, not '1001h'\n"},
    {"reserve unknown", ROOT "call u = upper() with reserve=greedy\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'reserve' must be elastic or parent, not 'greedy'\n"},
    {"reserve quoted", ROOT "call u = upper() with reserve=\"parent\"\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'reserve' must be elastic or parent, not '\"parent\"'\n"},
    {"many option errors in one line",
     ROOT "call u = upper() with workers=0, batch=0, reserve=x\na.y = u(a.x)\n",
     "t.orch:4:31: error: option 'workers' must be an integer from 1 to 1024, not '0'\n"
     "t.orch:4:40: error: option 'batch' must be auto or an integer from 1 to 1000000 (the "
     "most records the UDF takes in one run), not '0'\n"
     "t.orch:4:51: error: option 'reserve' must be elastic or parent, not 'x'\n"},
};

static const struct diag_case syntax_cases[] = {
    {"unterminated string", ROOT "call s = split(sep=\"abc)\na.y = s(a.x)\n",
     "t.orch:4:20: error: unterminated string\n"},
    {"unterminated string at EOF", "pipeline p\ncall s = split(sep=\"abc",
     "t.orch:2:20: error: unterminated string\n"},
    {"invalid escape", ROOT "call c = concat(sep=\"a\\qb\")\n",
     "t.orch:4:23: error: invalid escape '\\q' in string\n"},
    {"short hex escape", ROOT "call c = concat(sep=\"\\x4\")\n",
     "t.orch:4:22: error: invalid escape: \\x needs two hex digits\n"},
    {"NUL escape", ROOT "call c = concat(sep=\"\\x00\")\n",
     "t.orch:4:22: error: a string cannot hold a NUL byte (\\x00)\n"},
    {"control character in a string", ROOT "call c = concat(sep=\"\x01\")\n",
     "t.orch:4:22: error: control character 0x01 in string; write it as an escape\n"},
    {"invalid UTF-8 in a string", ROOT "call c = concat(sep=\"\xc3\x28\")\n",
     "t.orch:4:22: error: invalid byte 0xc3 in string (not UTF-8); write it as \\xc3\n"},
    {"invalid character", ROOT "call u = upper() @\n",
     "t.orch:4:18: error: invalid character '@'\n"},
    {"non-UTF-8 byte", ROOT "\xff\xfe\n", "t.orch:4:1: error: invalid byte 0xff (not UTF-8)\n"},
    {"non-ASCII letter", ROOT "domain \xc3\xa9t\xc3\xa9\n",
     "t.orch:4:8: error: invalid character U+00E9 (only strings and comments may hold "
     "non-ASCII text)\n"},
    {"control byte", ROOT "domain b\x01\n", "t.orch:4:9: error: invalid character 0x01\n"},
    {"missing equals", ROOT "call u upper()\n",
     "t.orch:4:8: error: expected '=', found name 'upper'\n"},
    /* `expand` not followed by a name is the name of a call: */
    {"missing call", ROOT "a.y = expand\n",
     "t.orch:4:13: error: expected '(', found end of line\n"},
    {"missing call after filter", ROOT "a.y = filter (a.x)\n",
     "t.orch:4:7: error: unknown call 'filter'\n"},
    {"missing port name", ROOT "a. = b\n",
     "t.orch:4:4: error: expected a port name, found '='\n"},
    {"stray token", ROOT "output a.x extra\n",
     "t.orch:4:12: error: expected end of line, found name 'extra'\n"},
    {"not a statement", ROOT "42\n",
     "t.orch:4:1: error: expected a statement, found number '42'\n"},
    {"unknown keyword", ROOT "port a.y\n",
     "t.orch:4:1: error: expected a statement (pipeline, domain, source, call, output or "
     "DOMAIN.PORT = ...), found name 'port'\n"},
    {"bad source kind", ROOT "domain c\nsource c.x = glob(\"*\")\n",
     "t.orch:5:14: error: expected files(\"GLOB\") or lines(\"FILE\"), found name 'glob'\n"},
    {"source needs a string", ROOT "domain c\nsource c.x = lines(f)\n",
     "t.orch:5:20: error: expected a file name string, found name 'f'\n"},
    {"argument without value", ROOT "call c = concat(sep=)\n",
     "t.orch:4:21: error: expected a value (a string, a number or a name), found ')'\n"},
    {"unclosed arguments", ROOT "call c = concat(sep=\"x\"\n",
     "t.orch:4:24: error: expected ',' or ')', found end of line\n"},
    {"unclosed inputs", ROOT "call u = upper()\na.y = u(a.x\n",
     "t.orch:5:12: error: expected ',' or ')', found end of line\n"},
    {"optional broadcast", TREE "b.z = broadcast ?a.x\n",
     "t.orch:7:17: error: the input of a broadcast cannot be optional\n"},
    {"number too long",
     ROOT "call u = upper() with "
          "batch=12345678901234567890123456789012345678901234567890123456789012345\n",
     "t.orch:4:29: error: number too long (65 bytes)\n"},
    {"library needs two strings", ROOT "call l = library(\"x.so\")\n",
     "t.orch:4:24: error: expected ',' between the library's path and symbol, found ')'\n"},
    {"builtin needs parentheses", ROOT "call u = upper\n",
     "t.orch:4:15: error: expected '(' after the function name, found end of line\n"},
};

/* Keywords are positional: a domain, a port or a call may be named like one. */
static void test_keywords_are_not_reserved(void **state)
{
    orch_plan *p = ok("pipeline pipeline\n"
                      "domain output\n"
                      "domain domain in output\n"
                      "source output.lines = lines(\"f\")\n"
                      "call expand = split_lines()\n"
                      "call aligned = split(sep=\",\")\n"
                      "call filter = nonempty()\n"
                      "call broadcast = upper()\n"
                      "call reduce = count()\n"
                      "call with = concat() with batch=2\n"
                      "domain.in = expand expand(output.lines)\n"
                      "domain.call = expand aligned aligned(output.lines)\n"
                      "domain.source = filter filter(domain.in)\n"
                      "domain.output = broadcast(domain.source)\n"
                      "domain.pipeline = broadcast output.lines\n"
                      "output.n = reduce reduce(domain.output)\n"
                      "output.m = reduce with(domain.call)\n"
                      "output output.n\n");
    assert_string_equal(orch_plan_name(p), "pipeline");
    assert_int_equal(orch_plan_stmt(p, 0)->op, ORCH_OP_EXPAND);
    assert_int_equal(orch_plan_stmt(p, 1)->op, ORCH_OP_EXPAND_ALIGNED);
    assert_int_equal(orch_plan_stmt(p, 2)->op, ORCH_OP_FILTER);
    assert_int_equal(orch_plan_stmt(p, 3)->op, ORCH_OP_MAP);
    assert_int_equal(orch_plan_stmt(p, 4)->op, ORCH_OP_BROADCAST);
    assert_int_equal(orch_plan_stmt(p, 5)->op, ORCH_OP_REDUCE);
    assert_round_trip(p);
    orch_plan_free(p);
    /* `expand aligned(...)` is a plain expand of a call named aligned. */
    p = ok("pipeline p\ndomain a\ndomain b in a\nsource a.x = files(\"*\")\n"
           "call aligned = split_lines()\nb.y = expand aligned(a.x)\n");
    assert_int_equal(orch_plan_stmt(p, 0)->op, ORCH_OP_EXPAND);
    orch_plan_free(p);
}

static void run_cases(const struct diag_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        print_message("  %s\n", c[i].name);
        expect_diags(c[i].src, c[i].expect);
    }
}

#define RUN_CASES(table)                                                                       \
    static void test_##table(void **state)                                                     \
    {                                                                                          \
        run_cases(table, sizeof table / sizeof table[0]);                                      \
    }
RUN_CASES(definition_cases)
RUN_CASES(structure_cases)
RUN_CASES(fit_cases)
RUN_CASES(builtin_cases)
RUN_CASES(option_cases)
RUN_CASES(syntax_cases)

static void test_depth_limit(void **state)
{
    char src[8192] = "pipeline p\ndomain d0\n";
    for (int i = 1; i <= 64; i++)
        snprintf(src + strlen(src), sizeof src - strlen(src), "domain d%d in d%d\n", i, i - 1);
    struct result r = compile(src);
    assert_int_equal(r.rc, ORCH_ESYNTAX);
    assert_non_null(strstr(r.diag, "t.orch:66:8: error: domain 'd64' is nested too deeply (at "
                                   "most 64 levels)\n"));
    done(&r);
}

/* ---- one pass, every error, in order ---- */

static void test_all_errors_in_one_pass(void **state)
{
    expect_diags(
        "pipeline p\n"
        "domain a\n"
        "source a.x = files(\"*\")\n"
        "call u = upper() with workers=0\n" /* 4: option */
        "a.y = u(a.x\n"                     /* 5: syntax */
        "call v = nope()\n"                 /* 6: unknown function */
        "domain a\n"                        /* 7: duplicate */
        "a.z = v(a.x) $\n"                  /* 8: invalid character */
        "call w = identity()\n"
        "a.q = w(a.q)\n", /* 10: cycle */
        "t.orch:4:31: error: option 'workers' must be an integer from 1 to 1024, not '0'\n"
        "t.orch:5:12: error: expected ',' or ')', found end of line\n"
        "t.orch:6:10: error: unknown function 'nope'\n"
        "t.orch:7:8: error: domain 'a' is already defined at 2:8\n"
        "t.orch:8:14: error: invalid character '$'\n"
        "t.orch:10:7: error: cycle: a.q -> a.q\n");
}

/* Whole-plan errors come out sorted with the syntax errors of later lines. */
static void test_sorted_by_position(void **state)
{
    expect_diags("pipeline p\n"
                 "domain a\n"
                 "source a.x = files(\"*\")\n"
                 "call u = upper()\n"
                 "a.y = u(a.x, a.x)\n"
                 "domain ?\n",
                 "t.orch:5:7: error: function 'upper' takes 1 input, not 2\n"
                 "t.orch:6:8: error: expected a domain name, found '?'\n");
}

static void test_too_many_errors(void **state)
{
    struct orch__buf_like {
        char *p;
        size_t n;
    } s = {0};
    FILE *f = open_memstream(&s.p, &s.n);
    fputs("pipeline p\n", f);
    for (int i = 0; i < 250; i++)
        fputs("= = =\n", f);
    fclose(f);
    struct result r = compile(s.p);
    assert_int_equal(r.rc, ORCH_ESYNTAX);
    int lines = 0;
    for (const char *c = r.diag; *c; c++)
        lines += *c == '\n';
    assert_int_equal(lines, ORCH_LANG_MAX_ERRORS + 1);
    assert_non_null(strstr(r.diag, "t.orch:2:1: error: expected a statement, found '='\n"));
    assert_non_null(strstr(r.diag, "t.orch:101:1: error: expected a statement, found '='\n"));
    assert_null(strstr(r.diag, "t.orch:102:1:"));
    assert_non_null(strstr(r.diag, "t.orch: error: too many errors; 1 more not shown\n"));
    done(&r);
    free(s.p);
}

/* ---- success for every operation ---- */

static void test_every_operation(void **state)
{
    orch_plan *p =
        ok("pipeline ops   # trailing comment\n"
           "\n"
           "domain doc\n"
           "domain line in doc\n"
           "source doc.path = files(\"texts/*.txt\")\n"
           "call read = read_file()\n"
           "call cut = split_lines()\n"
           "call cut2 = split(sep=\"\\n\")\n"
           "call keep = exec(\"keep\")\n"
           "call both = exec(\"./both --flag\")(mode=fast, n=-3, ratio=0.5, x=\"y\")\n"
           "call join = concat(sep=\"\\f\") with reserve=parent, batch=8\n"
           "doc.text = read(doc.path)\n"
           "line.raw = expand cut(doc.text)\n"
           "line.alt = expand aligned cut2(doc.text)\n"
           "line.kept = filter keep(line.raw, ?line.alt)\n"
           "line.from = broadcast doc.path\n"
           "line.p, line.q = both(line.from, ?line.kept)\n"
           "doc.all = reduce join(line.p)\n"
           "output doc.all\n");
    assert_string_equal(orch_plan_name(p), "ops");
    assert_int_equal(orch_plan_ndomains(p), 2);
    const struct orch_domain *doc = orch_plan_domain(p, 0), *line = orch_plan_domain(p, 1);
    assert_int_equal(doc->parent, -1);
    assert_int_equal(line->parent, 0);
    assert_int_equal(line->depth, 1);
    assert_int_equal(doc->nchildren, 1);
    assert_int_equal(doc->children[0], 1);
    assert_int_equal(line->expand, 1);
    assert_string_equal(orch_plan_source(p, 0)->arg, "/base/texts/*.txt");
    static const enum orch_op ops[] = {
        ORCH_OP_MAP,       ORCH_OP_EXPAND, ORCH_OP_EXPAND_ALIGNED, ORCH_OP_FILTER,
        ORCH_OP_BROADCAST, ORCH_OP_MAP,    ORCH_OP_REDUCE};
    static const int dom[] = {0, 0, 0, 1, 1, 1, 0}, tgt[] = {0, 1, 1, 1, 1, 1, 0};
    assert_int_equal(orch_plan_nstmts(p), 7);
    for (int i = 0; i < 7; i++) {
        const struct orch_stmt *s = orch_plan_stmt(p, i);
        assert_int_equal(s->op, ops[i]);
        assert_int_equal(s->domain, dom[i]);
        assert_int_equal(s->target, tgt[i]);
    }
    const struct orch_stmt *filter = orch_plan_stmt(p, 3), *both = orch_plan_stmt(p, 5);
    assert_false(filter->in[0].optional);
    assert_true(filter->in[1].optional);
    assert_int_equal(both->nout, 2);
    assert_int_equal(orch_plan_stmt(p, 4)->call, -1);
    assert_int_equal(filter->loc.line, 15);
    assert_int_equal(filter->loc.col, 20);
    /* Ports: the source's first, then outputs in statement order. */
    static const char *const ports[] = {"doc.path", "doc.text",  "line.raw",
                                        "line.alt", "line.kept", "line.from",
                                        "line.p",   "line.q",    "doc.all"};
    assert_int_equal(orch_plan_nports(p), 9);
    for (int i = 0; i < 9; i++) {
        assert_string_equal(orch_plan_port(p, i)->qualified, ports[i]);
        assert_int_equal(orch_plan_find_port(p, ports[i]), i);
    }
    const struct orch_port *path = orch_plan_port(p, 0);
    assert_int_equal(path->source, 0);
    assert_int_equal(path->producer, -1);
    assert_int_equal(path->nconsumers, 2);
    assert_int_equal(path->consumers[0], 0);
    assert_int_equal(path->consumers[1], 4);
    assert_true(orch_plan_port(p, 8)->output);
    assert_false(orch_plan_port(p, 7)->output);
    const struct orch_call *c = orch_plan_call(p, orch_plan_find_call(p, "both"));
    assert_int_equal(c->fn_kind, ORCH_FN_EXEC);
    assert_string_equal(c->function, "/base/both --flag"); /* resolved: test_exec_paths */
    assert_int_equal(c->nargs, 4);
    assert_int_equal(c->args[0].kind, ORCH_ARG_NAME);
    assert_int_equal(c->args[1].kind, ORCH_ARG_NUMBER);
    assert_string_equal(c->args[1].value, "-3");
    assert_int_equal(c->args[3].kind, ORCH_ARG_STRING);
    c = orch_plan_call(p, orch_plan_find_call(p, "join"));
    assert_string_equal(c->args[0].value, "\f");
    assert_int_equal(c->opts.reserve, ORCH_RESERVE_PARENT);
    assert_int_equal(c->opts.batch, 8);
    assert_int_equal(c->stmt, 6);
    assert_int_equal(orch_plan_find_domain(p, "line"), 1);
    assert_int_equal(orch_plan_find_domain(p, "nope"), -1);
    assert_round_trip(p);
    orch_plan_free(p);
}

/* A decimal literal where a built-in's signature says decimal: accepted, integers too, kept
 * exactly as written (the UDF reads the very text), and written back so by the canonical
 * text. */
static void test_decimal_args(void **state)
{
    (void)state;
    orch_plan *p =
        ok(ROOT "domain c in a\ndomain f in c\n"
                "call s = video_scenes(threshold=12.5, min_len=1.5, max_len=0.000001)\n"
                "call v = video_frames(fps=0.5, max_side=64)\n"
                "c.span = expand s(a.x)\nc.video = broadcast a.x\n"
                "f.image, f.ts = expand v(c.video, c.span)\n");
    const struct orch_call *c = orch_plan_call(p, orch_plan_find_call(p, "s"));
    assert_int_equal(c->nargs, 3);
    static const char *const want[] = {"12.5", "1.5", "0.000001"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(c->args[i].kind, ORCH_ARG_NUMBER);
        assert_string_equal(c->args[i].value, want[i]);
    }
    c = orch_plan_call(p, orch_plan_find_call(p, "v"));
    assert_string_equal(c->args[0].value, "0.5");
    assert_string_equal(c->args[1].value, "64");
    assert_non_null(strstr(orch_plan_canonical(p),
                           "video_scenes(threshold=12.5, min_len=1.5, max_len=0.000001)"));
    assert_non_null(strstr(orch_plan_canonical(p), "video_frames(fps=0.5, max_side=64)"));
    assert_round_trip(p);
    orch_plan_free(p);
    /* the ends of the ranges, and an integer where a decimal is taken */
    p = ok(ROOT "call v = video_frames(fps=0.001)\ncall w = video_frames(fps=1000)\n"
                "call s = video_scenes(threshold=255.000000, min_len=0, max_len=86400)\n"
                "domain b in a\nb.i, b.t = expand v(a.x)\ndomain d in a\n"
                "d.i, d.t = expand w(a.x)\ndomain e in a\ne.s = expand s(a.x)\n");
    orch_plan_free(p);
}

/* The decimal literal's reading and writing (udfs/builtin_sigs.c): exact millionths, and
 * nothing else read as a decimal. */
static void test_decimal_text(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int64_t micro;
    } good[] = {{"0.5", 500000},
                {"2", 2000000},
                {"-2.25", -2250000},
                {"0.000001", 1},
                {"1000", 1000000000},
                {"007.100", 7100000},
                {"999999999999.999999", 999999999999999999}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t v = 0;
        assert_true(orch_builtin_decimal(good[i].text, &v));
        assert_int_equal(v, good[i].micro);
    }
    static const char *const bad[] = {
        "",   "-",  ".5",  "1.",   "1.1234567",     "+1",   "1e3", "1.5s",
        " 1", "1 ", "--1", "0x10", "1000000000000", "1.2.3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = 42;
        if (orch_builtin_decimal(bad[i], &v))
            fail_msg("'%s' read as a decimal", bad[i]);
        assert_int_equal(v, 42);
    }
    char buf[ORCH_BUILTIN_DECIMAL_TEXT_MAX];
    assert_string_equal(orch_builtin_decimal_text(500000, buf), "0.5");
    assert_string_equal(orch_builtin_decimal_text(1000, buf), "0.001");
    assert_string_equal(orch_builtin_decimal_text(-1, buf), "-0.000001");
    assert_string_equal(orch_builtin_decimal_text(86400000000, buf), "86400");
    assert_string_equal(orch_builtin_decimal_text(0, buf), "0");
    assert_string_equal(orch_builtin_decimal_text(-2250000, buf), "-2.25");
    assert_string_equal(orch_builtin_decimal_text(INT64_MIN, buf), "-9223372036854.775808");
}

static void test_options_parse(void **state)
{
    orch_plan *p = ok(ROOT "call u = upper() with workers=4, batch=1000000, batch_bytes=64MiB, "
                           "cpus=0.5, gpus=1.25, retries=0, timeout=500ms, reserve=parent\n"
                           "call v = identity() with batch_bytes=512K, timeout=2h, cpus=0, "
                           "gpus=1024\n"
                           "call w = identity() with batch_bytes=none, timeout=none, batch=auto\n"
                           "a.y = u(a.x)\na.z = v(a.y)\na.w = w(a.z)\n");
    const struct orch_call_opts *o = &orch_plan_call(p, 0)->opts;
    assert_int_equal(o->workers, 4);
    assert_int_equal(o->batch, 1000000);
    assert_int_equal(o->batch_bytes, 64 << 20);
    assert_true(o->cpus == 0.5);
    assert_true(o->gpus == 1.25);
    assert_int_equal(o->retries, 0);
    assert_int_equal(o->timeout_ms, 500);
    assert_int_equal(o->reserve, ORCH_RESERVE_PARENT);
    o = &orch_plan_call(p, 1)->opts;
    assert_int_equal(o->batch_bytes, 512000);
    assert_int_equal(o->timeout_ms, 2 * 3600 * 1000);
    assert_true(o->cpus == 0 && o->gpus == 1024);
    assert_int_equal(o->workers, 1); /* defaults */
    assert_int_equal(o->retries, 2);
    assert_int_equal(o->batch, ORCH_BATCH_AUTO);
    assert_int_equal(orch_plan_call(p, 2)->opts.batch, ORCH_BATCH_AUTO); /* batch=auto */
    assert_int_equal(o->reserve, ORCH_RESERVE_ELASTIC);
    o = &orch_plan_call(p, 2)->opts;
    assert_int_equal(o->batch_bytes, 0);
    assert_int_equal(o->timeout_ms, 0);
    const char *canon = orch_plan_canonical(p);
    assert_non_null(strstr(canon, "call u = upper() with workers=4, batch=1000000, "
                                  "batch_bytes=64MiB, cpus=0.5, gpus=1.25, retries=0, "
                                  "timeout=500ms, reserve=parent\n"));
    assert_non_null(strstr(canon, "call v = identity() with workers=1, batch=auto, "
                                  "batch_bytes=500KiB, cpus=0, gpus=1024, retries=2, "
                                  "timeout=2h, reserve=elastic\n"));
    assert_round_trip(p);
    orch_plan_free(p);
}

/* The canonical text of a plan, exactly. */
static void test_canonical_text(void **state)
{
    orch_plan *p =
        ok("pipeline   t   # comment\n"
           "domain d\n"
           "domain c in d\n"
           "source d.v = lines( \"in/../x y.txt\" )\n"
           "call l = library(\"lib/./u.so\", \"sym\")(q=\"a\\\"b\\\\c\\td\\x01\xc3\xa9\")\n"
           "call s = split(sep=\",\")   with timeout=90s\n"
           "c.w = expand s(d.v)\n"
           "c.u, c.o = l(c.w, ?c.w)\n"
           "output c.o\n"
           "output c.u\n");
    assert_string_equal(
        orch_plan_canonical(p),
        "pipeline t\n"
        "\n"
        "domain d\n"
        "domain c in d\n"
        "\n"
        "source d.v = lines(\"/base/in/../x y.txt\")\n"
        "\n"
        "call l = library(\"/base/lib/u.so\", \"sym\")(q=\"a\\\"b\\\\c\\td\\x01\xc3\xa9\")"
        " with workers=1, batch=auto, batch_bytes=none, cpus=1, gpus=0, retries=2, "
        "timeout=none, reserve=elastic\n"
        "call s = split(sep=\",\") with workers=1, batch=auto, batch_bytes=none, "
        "cpus=1, gpus=0, retries=2, timeout=90s, reserve=elastic\n"
        "\n"
        "c.w = expand s(d.v)\n"
        "c.u, c.o = l(c.w, ?c.w)\n"
        "\n"
        "output c.u\n"
        "output c.o\n");
    assert_round_trip(p);
    orch_plan_free(p);
}

/* ---- arguments of library() and exec(); exec() paths ---- */

/* The canonical text of the one call `c` of ROOT + line + "a.y = c(a.x)\n". */
static char *call_line(const char *line)
{
    char src[1024];
    snprintf(src, sizeof src, ROOT "%sa.y = c(a.x)\n", line);
    orch_plan *p = ok(src);
    const char *canon = orch_plan_canonical(p), *at = strstr(canon, "call c = ");
    assert_non_null(at);
    char *out = strndup(at, strcspn(at, "\n"));
    assert_round_trip(p);
    orch_plan_free(p);
    return out;
}

static void expect_same_call(const char *a, const char *b, const char *canonical)
{
    char *ca = call_line(a), *cb = call_line(b);
    assert_string_equal(ca, canonical);
    assert_string_equal(cb, canonical);
    free(ca);
    free(cb);
}

#define DEFAULTS                                                                               \
    " with workers=1, batch=auto, batch_bytes=none, cpus=1, gpus=0, retries=2, timeout=none, " \
    "reserve=elastic"

/* exec("cmd", K=V) is exec("cmd")(K=V), and library() alike: the same plan, the same
 * canonical text (so the same hash); the two forms mixed are an error. */
static void test_inner_args(void **state)
{
    expect_same_call("call c = exec(\"/bin/u\", mode=fast, n=-3, s=\"x,y\")\n",
                     "call c = exec(\"/bin/u\")(mode=fast, n=-3, s=\"x,y\")\n",
                     "call c = exec(\"/bin/u\")(mode=fast, n=-3, s=\"x,y\")" DEFAULTS);
    expect_same_call("call c = library(\"/l/u.so\", \"sym\", q=1) with retries=2\n",
                     "call c = library(\"/l/u.so\", \"sym\")(q=1)\n",
                     "call c = library(\"/l/u.so\", \"sym\")(q=1)" DEFAULTS);
    expect_same_call("call c = exec(\"/bin/u\")\n", "call c = exec(\"/bin/u\")()\n",
                     "call c = exec(\"/bin/u\")" DEFAULTS);
    expect_diags(ROOT "call c = exec(\"u\", k=1)(j=2)\n",
                 "t.orch:4:24: error: arguments given twice: write them inside exec(..., "
                 "K=V) or after it, exec(...)(K=V), not both\n");
    expect_diags(ROOT "call c = library(\"u.so\", \"f\", k=1)()\n",
                 "t.orch:4:35: error: arguments given twice: write them inside library(..., "
                 "K=V) or after it, library(...)(K=V), not both\n");
    expect_diags(ROOT "call c = exec(\"u\",)\n",
                 "t.orch:4:19: error: expected an argument name, found ')'\n");
    expect_diags(
        ROOT "call c = exec(\"u\" k=1)\n",
        "t.orch:4:19: error: expected ',' and the arguments, or ')', found name 'k'\n");
    expect_diags(ROOT "call c = exec(\"u\", k=1\n",
                 "t.orch:4:23: error: expected ',' or ')', found end of line\n");
    /* The arguments are checked where they are written, as after the parentheses. */
    expect_diags(ROOT "call c = exec(\"u\", k=)\n",
                 "t.orch:4:22: error: expected a value (a string, a number or a name), found "
                 "')'\n");
}

/* The canonical text of an exec() call's command line, compiled with basedir "/base". */
static void expect_exec(const char *cmd_src, const char *resolved)
{
    char line[512];
    snprintf(line, sizeof line, "call c = exec(\"%s\")\n", cmd_src);
    char *got = call_line(line), want[512];
    snprintf(want, sizeof want, "call c = exec(\"%s\")" DEFAULTS, resolved);
    assert_string_equal(got, want);
    free(got);
}

/* Relative paths in an exec() command line are resolved against the pipeline's directory
 * (orch_lang.h, "Paths"); canonical text is never resolved again, so a job made before
 * this rule (a relative path in its stored text) keeps its plan and its hash. */
static void test_exec_paths(void **state)
{
    expect_exec("./udf.py", "/base/udf.py");
    expect_exec("./udf.py --model ./m.bin", "/base/udf.py --model /base/m.bin");
    expect_exec("python3 ./u.py ../data/x", "python3 /base/u.py /base/../data/x");
    expect_exec("bin/udf -v", "/base/bin/udf -v");
    expect_exec("  \\tbin/udf", "  \\t/base/bin/udf");
    /* Not paths of the pipeline's directory: left as written. */
    expect_exec("python3 udf.py", "python3 udf.py");
    expect_exec("/opt/u ./x", "/opt/u /base/x");
    expect_exec("python3 data/x", "python3 data/x");
    expect_exec("FOO=a/b ./x", "FOO=a/b /base/x");
    expect_exec("$HOME/u ~/v", "$HOME/u ~/v");
    expect_exec("x '. /y' \\\"./z\\\" w=./v a\\\\ ./q", "x '. /y' \\\"./z\\\" w=./v a\\\\ ./q");
    expect_exec("sh -c 'cd ./d && ./u'", "sh -c 'cd ./d && ./u'");
    expect_exec("a\\\\ ./b ./c", "a\\\\ ./b /base/c"); /* "a ./b" is one word */

    /* A directory that needs quoting is quoted for the shell; in "/", no "//". */
    static const char *const src = "pipeline p\ndomain a\nsource a.x = files(\"*\")\n"
                                   "call c = exec(\"./u ../v\")\na.y = c(a.x)\n";
    orch_plan *p;
    assert_int_equal(orch_lang_compile("t.orch", src, strlen(src), "/my dir/it's", NULL, &p),
                     0);
    assert_string_equal(orch_plan_call(p, 0)->function,
                        "'/my dir/it'\\''s'/u '/my dir/it'\\''s'/../v");
    assert_round_trip(p);
    orch_plan_free(p);
    assert_int_equal(orch_lang_compile("t.orch", src, strlen(src), "/", NULL, &p), 0);
    assert_string_equal(orch_plan_call(p, 0)->function, "/u /../v");
    orch_plan_free(p);

    /* The canonical text of a job made before the rule (a relative path kept as written)
     * is rebuilt as it is: the same text, the same hash. */
    static const char *const old_text =
        "pipeline p\n\ndomain a\n\nsource a.x = files(\"/base/*\")\n\n"
        "call c = exec(\"./x --in ./y\")" DEFAULTS "\n\na.y = c(a.x)\n";
    assert_int_equal(orch_plan_from_canonical(old_text, &p), 0);
    assert_string_equal(orch_plan_canonical(p), old_text);
    assert_string_equal(orch_plan_call(p, 0)->function, "./x --in ./y");
    orch_plan_free(p);
}

/* ---- examples, canonical round trips, the hash ---- */

static void test_examples_round_trip(void **state)
{
    const char *root = getenv("SRCDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/examples", root ? root : ".");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".orch") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        print_message("  %s\n", path);
        orch_plan *p;
        int rc = orch_lang_compile_file(path, stderr, &p);
        assert_int_equal(rc, 0);
        assert_round_trip(p);
        /* Compiling the canonical text as a file from elsewhere changes nothing either. */
        struct result r = compile(orch_plan_canonical(p));
        assert_int_equal(r.rc, 0);
        assert_string_equal(orch_plan_hash(r.plan), orch_plan_hash(p));
        assert_int_equal(strlen(orch_plan_hash(p)), 64);
        done(&r);
        orch_plan_free(p);
        n++;
    }
    closedir(d);
    assert_true(n >= 3);
}

static void test_hash(void **state)
{
    const char *src = ROOT "call u = upper() with workers=2\na.y = u(a.x)\noutput a.y\n";
    orch_plan *p1 = ok(src), *p2 = ok(src);
    assert_string_equal(orch_plan_hash(p1), orch_plan_hash(p2));
    /* Layout, comments and defaults written out do not matter... */
    orch_plan *p3 = ok("# the same plan\npipeline   p\n\ndomain a   # root\n"
                       "source a.x=files(\"./*\")\n"
                       "call u = upper() with workers=2, retries=2, reserve=elastic\n"
                       "a.y=u(a.x)\noutput a.y\n");
    assert_string_equal(orch_plan_hash(p3), orch_plan_hash(p1));
    /* ...an option does. */
    orch_plan *p4 = ok(ROOT "call u = upper() with workers=3\na.y = u(a.x)\noutput a.y\n");
    assert_string_not_equal(orch_plan_hash(p4), orch_plan_hash(p1));
    orch_plan *p5 = ok(ROOT "call u = upper() with workers=2, timeout=1s\na.y = u(a.x)\n"
                            "output a.y\n");
    assert_string_not_equal(orch_plan_hash(p5), orch_plan_hash(p1));
    orch_plan_free(p1);
    orch_plan_free(p2);
    orch_plan_free(p3);
    orch_plan_free(p4);
    orch_plan_free(p5);
}

static void test_from_canonical_refuses(void **state)
{
    orch_plan *p;
    assert_int_equal(orch_plan_from_canonical("pipeline p\ndomain\n", &p), ORCH_ESYNTAX);
    assert_null(p);
    assert_non_null(
        strstr(orch_error_detail(), "<canonical plan>:2:7: error: expected a domain"));
    /* Valid, but not in canonical form. */
    assert_int_equal(orch_plan_from_canonical(ROOT, &p), ORCH_EMISMATCH);
    assert_null(p);
}

static void test_compile_file_errors(void **state)
{
    orch_plan *p;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_int_equal(orch_lang_compile_file("/nonexistent/x.orch", f, &p), -ENOENT);
    fclose(f);
    assert_string_equal(buf, "/nonexistent/x.orch: error: cannot read: No such file or "
                             "directory\n");
    free(buf);
    assert_int_equal(orch_lang_compile_file("/", NULL, &p), -EISDIR);
}

/* ---- hostile input ---- */

static void expect_error_no_crash(const char *src, size_t len, const char *needle)
{
    struct result r = compile_n(src, len);
    assert_int_equal(r.rc, ORCH_ESYNTAX);
    assert_null(r.plan);
    if (needle && !strstr(r.diag, needle))
        fail_msg("expected '%s' in:\n%.2000s", needle, r.diag);
    done(&r);
}

static void test_hostile_small(void **state)
{
#define LIT(s) s, sizeof(s) - 1
    expect_error_no_crash(LIT(""), "no 'pipeline NAME' statement");
    expect_error_no_crash(LIT("pipeline p\0\n"), "t.orch:1:11: error: invalid character 0x00");
    expect_error_no_crash(LIT("\0\0\0\0"), "t.orch:1:1: error: invalid character 0x00");
    expect_error_no_crash(LIT("pipeline p\ncall s = split(sep=\"abc"), "unterminated string");
    expect_error_no_crash(LIT("pipeline p\ncall s = split(sep=\"abc\\"), "unterminated string");
    expect_error_no_crash(LIT("pipeline \x80\xbf\xc0\xaf\xed\xa0\x80\n"),
                          "t.orch:1:10: error: invalid byte 0x80 (not UTF-8)");
    expect_error_no_crash(LIT("pipeline p\ndomain a\0b\n"),
                          "t.orch:2:9: error: invalid character 0x00");
    expect_error_no_crash(LIT("\r\n\r\n\f\t"), "no 'pipeline NAME' statement");
    expect_error_no_crash(LIT("pipeline p\n\"\n"), "t.orch:2:1: error: unterminated string");
    expect_error_no_crash(LIT("pipeline p\nx.y = f(\"\\x"), "\\x needs two hex digits");
    expect_error_no_crash(LIT("pipeline p\nx.y = f(\"\\x4"), "\\x needs two hex digits");
    expect_error_no_crash(LIT("pipeline p\nx.y = f(\"\\"), "unterminated string");
    expect_error_no_crash(LIT("pipeline p\n-"), "t.orch:2:1: error: invalid character '-'");
    expect_error_no_crash(LIT("pipeline p\n1."), "t.orch:2:1: error: expected a statement, "
                                                 "found number '1'");
#undef LIT
}

static char *repeat(const char *unit, size_t times, const char *prefix, const char *suffix)
{
    size_t u = strlen(unit), pl = strlen(prefix), sl = strlen(suffix);
    char *s = malloc(pl + u * times + sl + 1);
    assert_non_null(s);
    memcpy(s, prefix, pl);
    for (size_t i = 0; i < times; i++)
        memcpy(s + pl + i * u, unit, u);
    memcpy(s + pl + u * times, suffix, sl + 1);
    return s;
}

static void test_hostile_long_name(void **state)
{
    /* 128 bytes is a name, 129 is not. */
    char *s = repeat("n", 128, "pipeline ", "\n");
    struct result r = compile(s);
    assert_string_equal(r.diag, "");
    assert_int_equal(r.rc, 0);
    done(&r);
    free(s);
    s = repeat("n", 129, "pipeline ", "\n");
    expect_error_no_crash(s, strlen(s),
                          "t.orch:1:10: error: name too long (129 bytes; at most 128)\n");
    free(s);
    s = repeat("n", 100000, "pipeline p\ndomain ", "\n");
    expect_error_no_crash(s, strlen(s),
                          "t.orch:2:8: error: name too long (100000 bytes; at most 128)");
    free(s);
}

static void test_hostile_nesting(void **state)
{
    char *s = repeat("(", 100000, "pipeline p\ncall x = f", "\n");
    expect_error_no_crash(s, strlen(s),
                          "t.orch:2:12: error: expected an argument name, found '('");
    free(s);
    s = repeat("(", 100000, ROOT "a.y = f", "");
    expect_error_no_crash(s, strlen(s),
                          "t.orch:4:9: error: expected a port (DOMAIN.PORT), found '('");
    free(s);
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void test_hostile_ten_megabytes(void **state)
{
    double t0 = seconds();
    /* Ten megabytes of garbage lines: stops after ORCH_LANG_MAX_ERRORS. */
    char *s = repeat("x y z = = ( ( (\n", 10 << 20 >> 4, "pipeline p\n", "");
    expect_error_no_crash(s, strlen(s), "too many errors");
    free(s);
    /* One line of ten megabytes. */
    s = repeat("a", 10 << 20, "pipeline p\n", "");
    expect_error_no_crash(s, strlen(s), "name too long (10485760 bytes");
    free(s);
    /* A ten-megabyte string (a pipeline of one unused call is valid). */
    s = repeat("\\x41", 10 << 18, "pipeline p\ncall c = concat(sep=\"", "\")\n");
    struct result big = compile(s);
    assert_int_equal(big.rc, 0);
    assert_string_equal(big.diag, "t.orch:2:6: warning: call 'c' is never used\n");
    assert_int_equal(strlen(orch_plan_call(big.plan, 0)->args[0].value), 10 << 18);
    done(&big);
    free(s);
    /* Ten megabytes of valid statements: a chain of 200k calls, compiled in linear time. */
    struct {
        char *p;
        size_t n;
    } b = {0};
    FILE *f = open_memstream(&b.p, &b.n);
    fputs(ROOT "call c0 = identity()\na.p0 = c0(a.x)\n", f);
    int i = 1;
    while (ftell(f) < (10 << 20)) {
        fprintf(f, "call c%d = identity() with batch=%d\na.p%d = c%d(a.p%d)\n", i, i % 1000 + 1,
                i, i, i - 1);
        i++;
    }
    fprintf(f, "a.p0 = c0(a.x)\n"); /* one error at the very end */
    fclose(f);
    struct result r = compile_n(b.p, b.n);
    assert_int_equal(r.rc, ORCH_ESYNTAX);
    char want[128];
    snprintf(want, sizeof want, "error: call 'c0' is already used at 5:8");
    assert_non_null(strstr(r.diag, want));
    done(&r);
    free(b.p);
    double dt = seconds() - t0;
    print_message("  10 MB inputs compiled in %.2f s\n", dt);
    assert_true(dt < 60);
}

/* Random bytes from a fixed seed; then random sequences of the language's own tokens,
 * which reach much deeper. Nothing may crash; whatever compiles must round-trip. */
static void test_hostile_random(void **state)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
#define NEXT() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
    char buf[1024];
    for (int it = 0; it < 3000; it++) {
        size_t len = NEXT() % sizeof buf;
        for (size_t i = 0; i < len; i++)
            buf[i] = (char)(NEXT() & 0xff);
        struct result r = compile_n(buf, len);
        assert_true(r.rc == ORCH_ESYNTAX || r.rc == 0);
        done(&r);
    }
    static const char *const toks[] = {
        "pipeline p\n",
        "domain ",
        "a",
        "b",
        " in ",
        "source ",
        "call ",
        "output ",
        ".",
        "x",
        "y",
        " = ",
        "(",
        ")",
        ", ",
        "?",
        "expand ",
        "aligned ",
        "filter ",
        "reduce ",
        "broadcast ",
        "\n",
        "files(\"*\")",
        "lines(\"f\")",
        "upper()",
        "count()",
        "split_lines()",
        "nonempty()",
        "exec(\"e\")",
        " with ",
        "workers=2",
        "batch=0",
        "\"s\\x41\"",
        "12",
        "1.5",
        "64MiB",
        "# c\n",
        "u",
        "v",
        "concat(sep=\"-\")",
        "identity()",
        "\xff",
    };
    const int ntoks = (int)(sizeof toks / sizeof toks[0]);
    for (int it = 0; it < 20000; it++) {
        size_t len = 0;
        int n = (int)(NEXT() % 60);
        len += (size_t)snprintf(buf, sizeof buf, "pipeline p\ndomain a\ndomain b in a\n");
        for (int k = 0; k < n && len < sizeof buf - 64; k++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s", toks[NEXT() % ntoks]);
        struct result r = compile_n(buf, len);
        assert_true(r.rc == ORCH_ESYNTAX || r.rc == 0);
        if (r.rc == 0)
            assert_round_trip(r.plan);
        done(&r);
    }
#undef NEXT
}

/* ---- random plans: whatever compiles must round-trip ---- */

static uint64_t rng = 0x2545f4914f6cdd1dull;

static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

struct gen {
    FILE *f;
    int ndom, parent[6], nports[6], ncalls;
};

static const char *pick(const char *const *v, unsigned n)
{
    return v[rnd(n)];
}

/* `with ...` with some random options, each at most once. */
static void gen_options(struct gen *g)
{
    static const char *const opts[][4] = {
        {"workers=3", "workers=1024"},
        {"batch=7", "batch=1000000"},
        {"batch_bytes=64MiB", "batch_bytes=1000", "batch_bytes=none", "batch_bytes=3K"},
        {"cpus=0.5", "cpus=0.000001"},
        {"gpus=0.25", "gpus=2"},
        {"retries=0", "retries=1000"},
        {"timeout=1500ms", "timeout=90s", "timeout=2h", "timeout=none"},
        {"reserve=parent", "reserve=elastic"},
    };
    bool first = true;
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        if (rnd(3))
            continue;
        unsigned n = opts[i][2] ? 4 : 2;
        fprintf(g->f, "%s%s", first ? " with " : ", ", opts[i][rnd(n)]);
        first = false;
    }
}

/* A string argument with random bytes, written with escapes or raw. */
static void gen_string(struct gen *g)
{
    fputc('"', g->f);
    unsigned n = 1 + rnd(6);
    for (unsigned i = 0; i < n; i++) {
        unsigned c = 1 + rnd(255);
        if (rnd(3) == 0 && c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            fputc((int)c, g->f);
        else if (rnd(4) == 0)
            fputs(pick((const char *const[]){"\\n", "\\t", "\\f", "\\r", "\\\\", "\\\"",
                                             "\xc3\xa9"},
                       7),
                  g->f);
        else
            fprintf(g->f, "\\x%02x", c);
    }
    fputc('"', g->f);
}

/* A call (map, expand or filter) of a function that fits op; returns its number. */
static int gen_call(struct gen *g, const char *op)
{
    int c = g->ncalls++;
    fprintf(g->f, "call c%d = ", c);
    if (rnd(3) == 0) {
        fprintf(g->f, rnd(2) ? "exec(\"run %d\")" : "library(\"lib%d.so\", \"f\")", c);
        if (rnd(2)) {
            fputs("(k=", g->f);
            gen_string(g);
            fputs(", n=-2, m=fast)", g->f);
        }
    } else if (strcmp(op, "map") == 0) {
        fputs(pick((const char *const[]){"upper()", "identity()", "read_file()", "sleep(ms=5)",
                                         "flaky(fail_attempts=2)",
                                         "fail_if(contains=\"x\", "
                                         "kind=crash)"},
                   6),
              g->f);
    } else if (strcmp(op, "expand") == 0) {
        fputs("split(sep=", g->f);
        gen_string(g);
        fputs(")", g->f);
    } else {
        fputs("nonempty()", g->f); /* filter */
    }
    return c;
}

static int gen_port(struct gen *g, int d)
{
    return (int)rnd((unsigned)g->nports[d]);
}

static bool is_ancestor(const struct gen *g, int a, int d)
{
    for (d = g->parent[d]; d >= 0; d = g->parent[d])
        if (d == a)
            return true;
    return false;
}

static void gen_plan(struct gen *g)
{
    fputs("pipeline g\n", g->f);
    g->ndom = 1 + (int)rnd(5);
    for (int d = 0; d < g->ndom; d++) {
        g->parent[d] = d == 0 || rnd(4) == 0 ? -1 : (int)rnd((unsigned)d);
        g->nports[d] = 0;
        if (g->parent[d] < 0)
            fprintf(g->f, "domain d%d\n", d);
        else
            fprintf(g->f, "domain d%d in d%d\n", d, g->parent[d]);
    }
    for (int d = 0; d < g->ndom; d++) {
        if (g->parent[d] >= 0) {
            int c = g->ncalls;
            gen_call(g, "expand");
            gen_options(g);
            fprintf(g->f, "\nd%d.p%d = expand c%d(d%d.p%d)\n", d, g->nports[d]++, c,
                    g->parent[d], gen_port(g, g->parent[d]));
        } else {
            fprintf(g->f,
                    rnd(2) ? "source d%d.p%d = files(\"in/*.txt\")\n"
                           : "source d%d.p%d = lines(\"/abs/list\")\n",
                    d, g->nports[d]++);
        }
    }
    int n = (int)rnd(10);
    for (int i = 0; i < n; i++) {
        int d = (int)rnd((unsigned)g->ndom), c = g->ncalls;
        switch (rnd(5)) {
        case 0: /* map */
            gen_call(g, "map");
            gen_options(g);
            fprintf(g->f, "\nd%d.p%d = c%d(d%d.p%d)\n", d, g->nports[d]++, c, d,
                    gen_port(g, d));
            break;
        case 1: /* filter */
            gen_call(g, "filter");
            fprintf(g->f, "\nd%d.p%d = filter c%d(d%d.p%d)\n", d, g->nports[d]++, c, d,
                    gen_port(g, d));
            break;
        case 2: /* broadcast from an ancestor */
            for (int a = 0; a < g->ndom; a++)
                if (is_ancestor(g, a, d)) {
                    fprintf(g->f, "d%d.p%d = broadcast d%d.p%d\n", d, g->nports[d]++, a,
                            gen_port(g, a));
                    break;
                }
            break;
        case 3: /* reduce from a child */
            for (int k = 0; k < g->ndom; k++)
                if (g->parent[k] == d) {
                    fprintf(g->f, "call c%d = %s\n", g->ncalls++,
                            rnd(2) ? "count()" : "concat(sep=\",\") with reserve=parent");
                    fprintf(g->f, "d%d.p%d = reduce c%d(d%d.p%d)\n", d, g->nports[d]++, c, k,
                            gen_port(g, k));
                    break;
                }
            break;
        default: /* aligned expand, or an exec with an optional input */
            if (g->parent[d] >= 0) {
                gen_call(g, "expand");
                fprintf(g->f, "\nd%d.p%d = expand aligned c%d(d%d.p%d)\n", d, g->nports[d]++, c,
                        g->parent[d], gen_port(g, g->parent[d]));
            } else {
                fprintf(g->f, "call c%d = exec(\"x\")\n", g->ncalls++);
                fprintf(g->f, "d%d.p%d, d%d.p%d = c%d(d%d.p%d, ?d%d.p%d)\n", d, g->nports[d], d,
                        g->nports[d] + 1, c, d, gen_port(g, d), d, gen_port(g, d));
                g->nports[d] += 2;
            }
            break;
        }
    }
    for (int d = 0; d < g->ndom; d++)
        if (rnd(2))
            fprintf(g->f, "output d%d.p%d\n", d, gen_port(g, d));
}

static void test_random_plans(void **state)
{
    int compiled = 0;
    for (int it = 0; it < 3000; it++) {
        struct gen g = {0};
        char *text = NULL;
        size_t len = 0;
        g.f = open_memstream(&text, &len);
        gen_plan(&g);
        fclose(g.f);
        /* Now and then, break it: the result must still be an error, never a crash. */
        if (it % 7 == 0 && len > 0)
            text[rnd((unsigned)len)] = (char)rnd(256);
        struct result r = compile_n(text, len);
        assert_true(r.rc == 0 || r.rc == ORCH_ESYNTAX);
        if (r.rc == 0) {
            compiled++;
            assert_round_trip(r.plan);
        } else if (it % 7 != 0) {
            fail_msg("a generated plan does not compile:\n%s\n%s", text, r.diag);
        }
        done(&r);
        free(text);
    }
    print_message("  %d random plans compiled and round-tripped\n", compiled);
    assert_true(compiled > 2000);
}

/* ---- fingerprints (engine/plan/fingerprint.c, DESIGN §10) --------------------------------- */

/* The fingerprint of port `q` of the plan compiled from src, copied into fp. */
static void fp_of(const char *src, const char *q, char fp[65])
{
    struct result r = compile(src);
    assert_int_equal(r.rc, 0);
    char (*all)[65];
    assert_int_equal(orch_plan_fingerprints(r.plan, &all), 0);
    int i = orch_plan_find_port(r.plan, q);
    assert_true(i >= 0);
    memcpy(fp, all[i], 65);
    assert_int_equal(strlen(fp), 64);
    free(all);
    done(&r);
}

#define FP_BASE                                                                                \
    "pipeline f\ndomain d\ndomain w in d\nsource d.p = lines(\"in.txt\")\n"                  \
    "call rd = read_file()\n"
static void test_fingerprints(void **state)
{
    (void)state;
    static const char *const a =
        FP_BASE "call sp = split(sep=\" \")\ncall up = upper()\n"
                "d.t = rd(d.p)\nw.x = expand sp(d.t)\nw.u = up(w.x)\n";
    /* Options, names and the order of declarations: nothing that changes a result. */
    static const char *const same =
        FP_BASE "call big = upper() with workers=4, batch=9, retries=0, timeout=5s\n"
                "call cut = split(sep=\" \") with cpus=2\n"
                "d.t = rd(d.p)\nw.x = expand cut(d.t)\nw.u = big(w.x)\n";
    /* Another separator: the expansion changes, so every port of w does; d.t does not. */
    static const char *const sep =
        FP_BASE "call sp = split(sep=\",\")\ncall up = upper()\n"
                "d.t = rd(d.p)\nw.x = expand sp(d.t)\nw.u = up(w.x)\n";
    /* Another function downstream only. */
    static const char *const fn =
        FP_BASE "call sp = split(sep=\" \")\ncall up = identity()\n"
                "d.t = rd(d.p)\nw.x = expand sp(d.t)\nw.u = up(w.x)\n";
    char x[65], y[65];
    const char *ports[] = {"d.p", "d.t", "w.x", "w.u"};
    for (int i = 0; i < 4; i++) {
        fp_of(a, ports[i], x);
        fp_of(same, ports[i], y);
        assert_string_equal(x, y);
    }
    fp_of(a, "d.t", x);
    fp_of(sep, "d.t", y);
    assert_string_equal(x, y);
    for (int i = 2; i < 4; i++) {
        fp_of(a, ports[i], x);
        fp_of(sep, ports[i], y);
        assert_string_not_equal(x, y);
    }
    fp_of(a, "w.x", x);
    fp_of(fn, "w.x", y);
    assert_string_equal(x, y);
    fp_of(a, "w.u", x);
    fp_of(fn, "w.u", y);
    assert_string_not_equal(x, y);
    /* A source and the file read from it differ. */
    fp_of(a, "d.t", x);
    fp_of(a, "d.p", y);
    assert_string_not_equal(x, y);
}

/* `retired` statements: only in a job's plan (orch update), never in a pipeline. */
static void test_retired(void **state)
{
    (void)state;
    static const char *const src =
        FP_BASE "call sp = split(sep=\" \")\ncall up = upper()\n"
                "d.t = rd(d.p)\nw.x = expand sp(d.t)\nretired w.u = up(w.x)\n";
    struct result r = compile(src);
    assert_int_equal(r.rc, ORCH_ESYNTAX);
    assert_non_null(strstr(r.diag, "'retired' marks a dropped statement in a job's plan"));
    done(&r);
    orch_plan *p = NULL;
    assert_int_equal(orch_lang_compile_job_plan(src, &p), 0);
    int u = orch_plan_find_port(p, "w.u"), x = orch_plan_find_port(p, "w.x");
    const struct orch_stmt *s = orch_plan_stmt(p, orch_plan_port(p, u)->producer);
    assert_true(s->retired);
    /* It reads nothing (w.x has no consumer), its call is unused, its port keeps its id. */
    assert_int_equal(orch_plan_port(p, x)->nconsumers, 0);
    assert_int_equal(orch_plan_call(p, orch_plan_find_call(p, "up"))->stmt, -1);
    assert_int_equal(u, 3);
    assert_non_null(strstr(orch_plan_canonical(p), "\nretired w.u = up(w.x)\n"));
    orch_plan *q = NULL;
    assert_int_equal(orch_plan_from_canonical(orch_plan_canonical(p), &q), 0);
    assert_string_equal(orch_plan_hash(p), orch_plan_hash(q));
    orch_plan_free(p);
    orch_plan_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_definition_cases),
        cmocka_unit_test(test_structure_cases),
        cmocka_unit_test(test_fit_cases),
        cmocka_unit_test(test_builtin_cases),
        cmocka_unit_test(test_decimal_args),
        cmocka_unit_test(test_decimal_text),
        cmocka_unit_test(test_option_cases),
        cmocka_unit_test(test_syntax_cases),
        cmocka_unit_test(test_keywords_are_not_reserved),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_all_errors_in_one_pass),
        cmocka_unit_test(test_sorted_by_position),
        cmocka_unit_test(test_too_many_errors),
        cmocka_unit_test(test_every_operation),
        cmocka_unit_test(test_options_parse),
        cmocka_unit_test(test_canonical_text),
        cmocka_unit_test(test_inner_args),
        cmocka_unit_test(test_exec_paths),
        cmocka_unit_test(test_examples_round_trip),
        cmocka_unit_test(test_hash),
        cmocka_unit_test(test_from_canonical_refuses),
        cmocka_unit_test(test_compile_file_errors),
        cmocka_unit_test(test_hostile_small),
        cmocka_unit_test(test_hostile_long_name),
        cmocka_unit_test(test_hostile_nesting),
        cmocka_unit_test(test_hostile_ten_megabytes),
        cmocka_unit_test(test_hostile_random),
        cmocka_unit_test(test_random_plans),
        cmocka_unit_test(test_fingerprints),
        cmocka_unit_test(test_retired),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
