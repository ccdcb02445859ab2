/* orch_keys.h — the entity keys of a job made before schema 13, read and rewritten for
 * the key rule of DESIGN §9 (engine/update/rekey.c decides the new keys; this is its
 * SQL). Inside the caller's transaction. */
#ifndef ORCH_KEYS_H
#define ORCH_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "orch_store.h"

/* A root entity and its key as stored. */
struct orch_root_key {
    int64_t id;
    char *key; /* malloc'd */
};

/* The root entities of `domain` (parent_id IS NULL) in ordinal order: *out, an array of
 * *n, freed with orch_root_keys_free (also on error, where it holds what was read). */
int orch_store_root_keys(orch_store *s, int domain, struct orch_root_key **out, size_t *n);
void orch_root_keys_free(struct orch_root_key *keys, size_t n);

/* Gives root entity e (whose key was `from`) the key `to`, and every entity under it the
 * same change of its key's prefix (keys are stored whole: migrations/0002_entity_keys.sql). */
int orch_store_key_prefix_set(orch_store *s, int64_t e, const char *from, const char *to);

#endif
