/* states.c — name tables of the stored state machines, generated from orch_states.h. */
#include "orch_states.h"

#include <string.h>

#define ORCH_STATE_NAME_ITEM(name, text) [name] = text,

/* One name table and its two look-ups per list. Lists are a handful of names: a linear
 * scan is as fast as anything cleverer. */
#define ORCH_STATE_TABLE(prefix, type, LIST, count)                                            \
    static const char *const prefix##_names[count] = {LIST(ORCH_STATE_NAME_ITEM)};             \
    const char *prefix##_name(enum type v)                                                     \
    {                                                                                          \
        return (unsigned)v < (unsigned)(count) ? prefix##_names[v] : NULL;                     \
    }                                                                                          \
    int prefix##_parse(const char *name)                                                       \
    {                                                                                          \
        for (int i = 0; name != NULL && i < (int)(count); i++)                                 \
            if (strcmp(prefix##_names[i], name) == 0)                                          \
                return i;                                                                      \
        return -1;                                                                             \
    }

ORCH_STATE_TABLE(orch_grain_phase, orch_grain_phase, ORCH_GRAIN_PHASES, ORCH_PHASE__COUNT)
ORCH_STATE_TABLE(orch_grain_outcome, orch_grain_outcome, ORCH_GRAIN_OUTCOMES,
                 ORCH_OUTCOME__COUNT)
ORCH_STATE_TABLE(orch_item_state, orch_item_state, ORCH_ITEM_STATES, ORCH_ITEM__COUNT)
ORCH_STATE_TABLE(orch_expansion_state, orch_expansion_state, ORCH_EXPANSION_STATES,
                 ORCH_EXPANSION__COUNT)
ORCH_STATE_TABLE(orch_failure_kind, orch_failure_kind, ORCH_FAILURE_KINDS, ORCH_FAILURE__COUNT)
ORCH_STATE_TABLE(orch_attempt_outcome, orch_attempt_outcome, ORCH_ATTEMPT_OUTCOMES,
                 ORCH_ATTEMPT__COUNT)
ORCH_STATE_TABLE(orch_job_status, orch_job_status, ORCH_JOB_STATUSES, ORCH_JOB__COUNT)
ORCH_STATE_TABLE(orch_job_stop, orch_job_stop, ORCH_JOB_STOPS, ORCH_STOP__COUNT)
