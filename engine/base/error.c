/* error.c — orch_strerror and the per-thread error detail. */
#include "orch_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char detail[1024];

const char *orch_strerror(int rc)
{
    switch (rc) {
    case 0:
        return "success";
#define ORCH_ERROR_CASE(name, value, text)                                                    \
    case name:                                                                                \
        return text;
        ORCH_ERRORS(ORCH_ERROR_CASE)
#undef ORCH_ERROR_CASE
    default:
        break;
    }
    if (rc < 0 && rc > -4096)
        return strerror(-rc);
    return "unknown error";
}

int orch_error_set(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return rc;
}

const char *orch_error_detail(void)
{
    return detail;
}

void orch_error_clear(void)
{
    detail[0] = '\0';
}
