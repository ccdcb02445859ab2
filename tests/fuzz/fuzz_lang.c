/* fuzz_lang.c — libFuzzer harness for the `.orch` front end.
 *
 * Any input must compile to a plan or to diagnostics, never crash, leak or hang; and a
 * plan that compiles must round-trip: its canonical text rebuilds the same plan, with the
 * same text and hash (orch_plan_from_canonical). Built with -Dfuzz=true (scripts/fuzz).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orch_error.h"
#include "orch_lang.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *devnull;
    if (!devnull && !(devnull = fopen("/dev/null", "w")))
        abort();
    orch_plan *p;
    int rc = orch_lang_compile("fuzz.orch", (const char *)data, size, "/fuzz", devnull, &p);
    if (rc == ORCH_ESYNTAX)
        return 0;
    if (rc != 0) {
        fprintf(stderr, "orch_lang_compile: unexpected %d (%s)\n", rc, orch_strerror(rc));
        abort();
    }
    orch_plan *q;
    rc = orch_plan_from_canonical(orch_plan_canonical(p), &q);
    if (rc != 0 || strcmp(orch_plan_canonical(q), orch_plan_canonical(p)) != 0 ||
        strcmp(orch_plan_hash(q), orch_plan_hash(p)) != 0) {
        fprintf(stderr, "canonical text does not round-trip (%d: %s):\n%s\n", rc,
                orch_error_detail(), orch_plan_canonical(p));
        abort();
    }
    if (orch_plan_print(p, devnull) != 0)
        abort();
    orch_plan_free(q);
    orch_plan_free(p);
    return 0;
}
