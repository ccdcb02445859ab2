/* facts_int.h — internals of the typed SQL access to the job's facts, shared by facts.c,
 * attempts.c, roots.c and held.c. Not for the engine.
 *
 * Every statement these files run is a slot of one table (FACT_STATEMENTS): its text is
 * prepared once, on first use, through the store's cache, and kept in s->fact[slot].
 * orch_store__stmt resets it and binds every parameter; orch_store__run and
 * orch_store__one step it.
 */
#ifndef ORCH_FACTS_INT_H
#define ORCH_FACTS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "store_int.h"

/* X(slot, reads, writes, via, sql): every statement of facts.c, attempts.c, roots.c and
 * held*.c.
 *
 * reads, writes: the parts of the job (enum orch_fact_part, held.h) that the statement
 * reads and writes; an INSERT reads the rows its foreign keys name, an UPDATE or DELETE
 * reads the rows it looks for. via: the held kinds (enum orch_held_kind) that the
 * statement's caller reads through the cache instead (a look-up of a grain applies its
 * held READY; a grain created in the transaction is updated where it is held; a seal or
 * a READY of a grain forgets its held READY). Before the statement runs, the held rows
 * of HELD_KINDS_OF(reads | writes) & ~via are written (fact_need in facts.c).
 *
 * The look-ups of a root by key name their index: without statistics SQLite prefers
 * entity_root (every root of the domain) over entity_by_key, which made each look-up a
 * scan of the roots (a 20,000-root job: 26 s instead of 0.6). State names are parameters,
 * bound from the X-macro tables (orch_states.h). `phase = ?a OR phase = ?b` rather than
 * IN (...): see the conventions at the top of migrations/0001_initial.sql. */
/* The grains in flight: those with an open attempt (the phase column of a grain that
 * runs reads READY, or WAITING: see orch_store_grain_dispatch). Open attempts all lie at or
 * above job.attempt_floor. */
#define OPEN_ATTEMPT_GRAINS                                                                    \
    "SELECT grain_id FROM attempt WHERE id >= (SELECT attempt_floor FROM job WHERE id = 1) "   \
    "AND outcome IS NULL"
/* Whether payload id X is reclaimed: the span with the largest first at or below it
 * covers it (migrations/0016_reclaimed_spans.sql). */
#define SPAN_COVERS(X)                                                                         \
    "coalesce((SELECT r.last >= " X " FROM reclaimed_span AS r WHERE r.first <= " X            \
    " ORDER BY r.first DESC LIMIT 1), 0)"
/* The largest root id that the unfinished update, an edit, still replaces, or 0: a live
 * root at or below it waits for its successor (migrations/0019_replan.sql). An unfinished
 * update is the last row (one starts once the one before it is finished): a look-up by
 * rowid, where a search for the unfinished row would read every finished one. */
#define LAST_UPDATE "(SELECT max(id) FROM job_update)"
#define REPLAN_LAST                                                                            \
    "coalesce((SELECT replan_last FROM job_update WHERE id = " LAST_UPDATE                     \
    " AND finished_at IS NULL), 0)"
#define FACT_STATEMENTS(X)                                                                     \
    X(ENTITY_PUT, PART_ENTITY, PART_ENTITY, 0,                                                 \
      "INSERT INTO entity (domain_id, parent_id, ordinal, key) "                               \
      "VALUES (?1, ?2, ?3, coalesce(?4, "                                                      \
      "(SELECT key FROM entity WHERE id = ?2) || '/' || ?3))")                                 \
    X(ENTITY_PARENT, PART_ENTITY, 0, 0, "SELECT parent_id FROM entity WHERE id = ?")           \
    X(ENTITY_KEY, PART_ENTITY, 0, 0, "SELECT key FROM entity WHERE id = ?")                    \
    X(ENTITY_NEXT_ID, PART_ENTITY, 0, 0, "SELECT coalesce(max(id), 0) + 1 FROM entity")        \
    X(CHILDREN, PART_ENTITY, 0, 0,                                                             \
      "SELECT id FROM entity WHERE parent_id = ? AND domain_id = ? ORDER BY ordinal")          \
    X(CHILDREN_AFTER, PART_ENTITY, 0, 0,                                                       \
      "SELECT id, ordinal FROM entity WHERE parent_id = ? AND domain_id = ? AND ordinal > ? "  \
      "ORDER BY ordinal LIMIT ?")                                                              \
    X(CHILDREN_COUNT, PART_ENTITY, 0, 0,                                                       \
      "SELECT count(*) FROM entity WHERE parent_id = ? AND domain_id = ?")                     \
    X(ITEM_GET, PART_ITEM, 0, 0,                                                               \
      "SELECT state, payload_id FROM item WHERE port_id = ? AND entity_id = ?")                \
    X(ITEM_PUT, PART_ENTITY, PART_ITEM, 0,                                                     \
      "INSERT INTO item (port_id, entity_id, state, payload_id, payload_size) "                \
      "VALUES (?, ?, ?, ?, ?)")                                                                \
    X(ITEM_TAKE_BACK, PART_ITEM, PART_ITEM, 0,                                                 \
      "DELETE FROM item WHERE port_id = ?1 AND entity_id = ?2 "                                \
      "AND (state = ?3 OR state = ?4)")                                                        \
    X(CHILD_ITEMS, PART_ENTITY | PART_ITEM, 0, 0,                                              \
      "SELECT count(*), coalesce(sum(i.state = ?4 OR i.state = ?5), 0) "                       \
      "FROM entity AS c JOIN item AS i ON i.entity_id = c.id AND i.port_id = ?1 "              \
      "WHERE c.parent_id = ?2 AND c.domain_id = ?3")                                           \
    X(CHILD_ITEM_LIST, PART_ENTITY | PART_ITEM, 0, 0,                                          \
      "SELECT c.id, i.state, i.payload_id FROM entity AS c "                                   \
      "LEFT JOIN item AS i ON i.port_id = ?1 AND i.entity_id = c.id "                          \
      "WHERE c.parent_id = ?2 AND c.domain_id = ?3 ORDER BY c.ordinal")                        \
    X(ITEM_COUNTS, PART_ITEM, 0, 0,                                                            \
      "SELECT port_id, state, count(*) FROM item GROUP BY port_id, state")                     \
    X(EXPANSION_PUT, PART_ENTITY, 0, 0,                                                        \
      "INSERT INTO expansion (call_id, parent_id, state, nchildren) "                          \
      "VALUES (?, ?, ?, ?)")                                                                   \
    X(EXPANSION_GET, 0, 0, 0,                                                                  \
      "SELECT state FROM expansion WHERE call_id = ? AND parent_id = ?")                       \
    X(EXPANSION_TAKE_BACK, 0, 0, 0,                                                            \
      "DELETE FROM expansion WHERE call_id = ? AND parent_id = ? "                             \
      "AND state = ?")                                                                         \
    X(GRAIN_CREATE, PART_ENTITY, PART_GRAIN, 0,                                                \
      "INSERT INTO grain (call_id, entity_id, phase, generation, pending) "                    \
      "VALUES (?, ?, ?, 0, ?)")                                                                \
    X(GRAIN_GET_ROOT, PART_GRAIN | PART_PHASE, 0, HELD_READY,                                  \
      "SELECT id, call_id, entity_id, 0, phase, outcome, pending, "                            \
      "generation, coalesce(ready_seq, 0) FROM grain "                                         \
      "WHERE call_id = ? AND entity_id = ?")                                                   \
    X(GRAIN_GET, PART_ENTITY | PART_GRAIN | PART_PHASE, 0, HELD_READY,                         \
      "SELECT g.id, g.call_id, g.entity_id, coalesce(e.parent_id, 0), g.phase, "               \
      "g.outcome, g.pending, g.generation, coalesce(g.ready_seq, 0) "                          \
      "FROM grain AS g JOIN entity AS e ON e.id = g.entity_id "                                \
      "WHERE g.call_id = ? AND g.entity_id = ?")                                               \
    X(GRAIN_BY_ID, PART_ENTITY | PART_GRAIN | PART_PHASE, 0, HELD_READY,                       \
      "SELECT g.id, g.call_id, g.entity_id, coalesce(e.parent_id, 0), g.phase, "               \
      "g.outcome, g.pending, g.generation, coalesce(g.ready_seq, 0) "                          \
      "FROM grain AS g JOIN entity AS e ON e.id = g.entity_id WHERE g.id = ?")                 \
    X(GRAIN_SET_PENDING, PART_GRAIN, PART_PHASE, HELD_GRAIN | HELD_READY,                      \
      "UPDATE grain SET pending = ? WHERE id = ?")                                             \
    X(GRAIN_NEXT_ID, PART_GRAIN, 0, 0, "SELECT coalesce(max(id), 0) + 1 FROM grain")           \
    X(GRAIN_READY, PART_GRAIN, PART_PHASE, HELD_GRAIN | HELD_READY,                            \
      "UPDATE grain SET phase = ?3, ready_seq = ?2, pending = 0, ready_at = ?4 "               \
      "WHERE id = ?1 AND phase = ?5")                                                          \
    X(GRAINS_READY_RUN, PART_GRAIN, PART_PHASE, HELD_GRAIN | HELD_READY,                       \
      "UPDATE grain SET phase = ?3, "                                                          \
      "ready_seq = ?2 + (id - ?1) / ?6 * ?7, "                                                 \
      "pending = 0, ready_at = ?4 WHERE id BETWEEN ?1 AND ?8 "                                 \
      "AND (id - ?1) % ?6 = 0 AND phase = ?5")                                                 \
    X(GRAIN_REQUEUE, PART_GRAIN | PART_PHASE, PART_PHASE, 0,                                   \
      "UPDATE grain SET phase = ?5, generation = generation + 1, "                             \
      "ready_seq = ?3, ready_at = ?6, pending = 0 WHERE id = ?1 "                              \
      "AND phase <> ?4 AND generation = ?2")                                                   \
    X(GRAIN_SEAL_IN_FLIGHT, PART_GRAIN | PART_PHASE, PART_PHASE, HELD_READY,                   \
      "UPDATE grain SET phase = ?5, outcome = ?2, pending = 0, "                               \
      "ready_seq = coalesce(?4, ready_seq), "                                                  \
      "ready_at = coalesce(?6, ready_at) "                                                     \
      "WHERE id = ?1 AND phase <> ?5 AND generation = ?3")                                     \
    X(GRAINS_SEAL_RUN, PART_GRAIN | PART_PHASE, PART_PHASE, HELD_READY,                        \
      "UPDATE grain SET phase = ?5, outcome = ?2, pending = 0, "                               \
      "ready_seq = coalesce(?4 + (id - ?1) / ?7 * ?8, ready_seq), "                            \
      "ready_at = coalesce(?6, ready_at) WHERE id BETWEEN ?1 AND ?9 "                          \
      "AND (id - ?1) % ?7 = 0 AND phase <> ?5 AND generation = ?3")                            \
    X(GRAIN_INTERRUPT, PART_GRAIN | PART_PHASE, PART_PHASE, 0,                                 \
      "UPDATE grain SET phase = ?4, generation = generation + 1, "                             \
      "ready_at = ?5, pending = 0, ready_seq = coalesce(?3, ready_seq, 0) "                    \
      "WHERE id = ?1 AND phase <> ?6 AND generation = ?2")                                     \
    X(GRAIN_SEAL_UNRUN, PART_GRAIN | PART_PHASE, PART_PHASE, HELD_READY,                       \
      "UPDATE grain SET phase = ?5, outcome = ?2, pending = 0, "                               \
      "ready_seq = coalesce(?6, ready_seq), ready_at = coalesce(?7, ready_at) "                \
      "WHERE id = ?1 AND (phase = ?3 OR phase = ?4)")                                          \
    X(GRAIN_REOPEN, PART_GRAIN | PART_PHASE, PART_PHASE, 0,                                    \
      "UPDATE grain SET phase = ?2, outcome = NULL, pending = 0, "                             \
      "generation = generation + 1 WHERE id = ?1 AND phase = ?3")                              \
    X(GRAINS_FAILED, PART_ENTITY | PART_GRAIN | PART_PHASE, 0, 0,                              \
      "SELECT g.id, g.call_id, g.entity_id, coalesce(e.parent_id, 0), "                        \
      "g.generation FROM grain AS g JOIN entity AS e ON e.id = g.entity_id "                   \
      "WHERE g.outcome = ?2 AND (?1 < 0 OR g.call_id = ?1) ORDER BY g.id")                     \
    X(GRAINS_UNRUN, PART_ENTITY | PART_GRAIN | PART_PHASE | PART_ATTEMPT | PART_ENDED, 0, 0,   \
      "SELECT g.id, g.entity_id FROM grain AS g JOIN entity AS e "                             \
      "ON e.id = g.entity_id WHERE e.parent_id = ?1 AND g.call_id = ?2 "                       \
      "AND (g.phase = ?3 OR g.phase = ?4) AND NOT EXISTS (SELECT 1 "                           \
      "FROM attempt AS a WHERE a.grain_id = g.id AND a.outcome IS NULL)")                      \
    X(GRAINS_BARRED, PART_ENTITY | PART_GRAIN | PART_PHASE, 0, 0,                              \
      "SELECT g.id, g.call_id, g.entity_id, e.parent_id, g.generation "                        \
      "FROM grain AS g JOIN entity AS e ON e.id = g.entity_id "                                \
      "JOIN suppression AS s ON s.call_id = g.call_id "                                        \
      "AND s.parent_id = e.parent_id WHERE g.phase <> ?1")                                     \
    X(GRAINS_INTERRUPT, PART_GRAIN | PART_PHASE | PART_ATTEMPT | PART_ENDED, PART_PHASE, 0,    \
      "UPDATE grain SET phase = ?1, generation = generation + 1, "                             \
      "ready_at = ?3, pending = 0, ready_seq = coalesce(ready_seq, 0) "                        \
      "WHERE phase = ?2 OR (phase <> ?4 "                                                      \
      "AND id IN (" OPEN_ATTEMPT_GRAINS "))")                                                  \
    X(GRAINS_UNSEALED, PART_GRAIN | PART_PHASE, 0, 0,                                          \
      "SELECT count(*) FROM grain WHERE phase <> ?1")                                          \
    X(GRAINS_SEALED_COUNTS, PART_GRAIN | PART_PHASE, 0, 0,                                     \
      "SELECT call_id, outcome, count(*) FROM grain "                                          \
      "WHERE phase = ?1 GROUP BY 1, 2")                                                        \
    X(GRAINS_READY, PART_ENTITY | PART_GRAIN | PART_PHASE, 0, 0,                               \
      "SELECT g.id, g.entity_id, coalesce(e.parent_id, 0), g.generation, "                     \
      "g.ready_seq, (SELECT count(*) FROM failure AS f WHERE f.grain_id = g.id "               \
      "AND (f.kind = ?2 OR f.kind = ?3 OR f.kind = ?4) AND f.generation > "                    \
      "coalesce((SELECT max(t.generation) FROM failure AS t "                                  \
      "WHERE t.grain_id = g.id AND (t.kind = ?5 OR t.kind = ?6 OR t.kind = ?7)), "             \
      "-1)), g.call_id FROM grain AS g JOIN entity AS e ON e.id = g.entity_id "                \
      "WHERE g.phase = ?1 ORDER BY g.call_id, g.ready_seq")                                    \
    X(COUNTERS_GET, 0, 0, 0, "SELECT next_ready_seq, live_bytes FROM job WHERE id = 1")        \
    X(COUNTERS_SET, 0, 0, 0, "UPDATE job SET next_ready_seq = ?, live_bytes = ? WHERE id = 1") \
    X(BUDGETS_SET, 0, 0, 0,                                                                    \
      "UPDATE job SET max_unsealed = ?, max_live_bytes = ? WHERE id = 1")                      \
    X(ATTEMPT_END, PART_ATTEMPT, PART_ENDED, 0,                                                \
      "UPDATE attempt SET ended_at = ?, outcome = ?, message = ?, "                            \
      "started_at = max(coalesce(?, started_at), started_at) WHERE id = ?")                    \
    X(ATTEMPTS_END, PART_ATTEMPT, PART_ENDED, 0,                                               \
      "UPDATE attempt SET ended_at = ?, outcome = ?, message = NULL, "                         \
      "started_at = max(coalesce(?, started_at), started_at) WHERE id BETWEEN ? AND ?")        \
    X(ATTEMPTS_START, PART_ATTEMPT, 0, 0,                                                      \
      "UPDATE attempt SET started_at = max(?, started_at) WHERE id BETWEEN ? AND ?")           \
    X(ATTEMPTS_INTERRUPT, PART_ATTEMPT | PART_ENDED, PART_ENDED, 0,                            \
      "UPDATE attempt SET outcome = ?, ended_at = ? "                                          \
      "WHERE id >= (SELECT attempt_floor FROM job WHERE id = 1) "                              \
      "AND outcome IS NULL")                                                                   \
    X(ATTEMPT_FLOOR_SET, 0, 0, 0, "UPDATE job SET attempt_floor = ? WHERE id = 1")             \
    X(OPEN_SLURM_JOBS, PART_ATTEMPT | PART_ENDED, 0, 0,                                        \
      "SELECT DISTINCT slurm_job FROM attempt "                                                \
      "WHERE id >= (SELECT attempt_floor FROM job WHERE id = 1) "                              \
      "AND outcome IS NULL AND slurm_job IS NOT NULL")                                         \
    X(ATTEMPT_LAST_BATCH, PART_ATTEMPT, 0, 0,                                                  \
      "SELECT batch FROM attempt ORDER BY id DESC LIMIT 1")                                    \
    X(FAILURE_PUT, PART_ENTITY | PART_GRAIN, 0, 0,                                             \
      "INSERT INTO failure (grain_id, kind, message, generation, at, entity_id) "              \
      "VALUES (?, ?, ?, ?, ?, ?)")                                                             \
    X(BARRIER_PUT, PART_ENTITY | PART_GRAIN, 0, 0,                                             \
      "INSERT OR IGNORE INTO suppression (call_id, parent_id, grain_id, at) "                  \
      "VALUES (?, ?, ?, ?)")                                                                   \
    X(BARRIER_COVERS, 0, 0, 0,                                                                 \
      "SELECT 1 FROM suppression WHERE call_id = ? AND parent_id = ?")                         \
    X(BARRIER_TAKE_BACK, 0, 0, 0, "DELETE FROM suppression WHERE grain_id = ?")                \
    X(BARRIERS_ANY, 0, 0, 0, "SELECT EXISTS (SELECT 1 FROM suppression)")                      \
    X(PLAN_DOMAIN, 0, 0, 0,                                                                    \
      "INSERT INTO domain (id, name, parent_id, depth) VALUES (?, ?, ?, ?) "                   \
      "ON CONFLICT (id) DO UPDATE SET name = excluded.name, "                                  \
      "parent_id = excluded.parent_id, depth = excluded.depth")                                \
    X(PLAN_CALL, 0, 0, 0,                                                                      \
      "INSERT INTO call (id, name, op, function, domain_id, target_id) "                       \
      "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "                              \
      "name = excluded.name, op = excluded.op, function = excluded.function, "                 \
      "domain_id = excluded.domain_id, target_id = excluded.target_id")                        \
    X(PLAN_PORT, 0, 0, 0,                                                                      \
      "INSERT INTO port (id, domain_id, name, qualified, producer_call_id, "                   \
      "is_output) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "                   \
      "domain_id = excluded.domain_id, name = excluded.name, "                                 \
      "qualified = excluded.qualified, "                                                       \
      "producer_call_id = excluded.producer_call_id, is_output = excluded.is_output")          \
    X(NAMED_PAYLOADS, PART_ITEM, 0, 0,                                                         \
      "SELECT payload_id FROM item WHERE payload_id IS NOT NULL "                              \
      "ORDER BY payload_id")                                                                   \
    X(SPANS, PART_SPAN, 0, 0, "SELECT first, last FROM reclaimed_span ORDER BY first")         \
    X(SPANS_COUNT, PART_SPAN, 0, 0,                                                            \
      "SELECT coalesce(sum(last - first + 1), 0) FROM reclaimed_span")                         \
    X(SPAN_BEFORE, PART_SPAN, 0, 0,                                                            \
      "SELECT first, last FROM reclaimed_span WHERE first <= ? "                               \
      "ORDER BY first DESC LIMIT 1")                                                           \
    X(SPAN_DROP, PART_SPAN, PART_SPAN, 0, "DELETE FROM reclaimed_span WHERE first = ?")        \
    X(SPAN_PUT, PART_SPAN, PART_SPAN, 0,                                                       \
      "INSERT INTO reclaimed_span (first, last) VALUES (?, ?)")                                \
    X(ROOT_PUT, PART_ENTITY, PART_ROOT, 0,                                                     \
      "INSERT INTO root (entity_id, domain_id, revision, position, size, mtime_ns, "           \
      "hash, admitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")                                    \
    X(ROOT_FIND, PART_ENTITY | PART_ROOT, 0, 0,                                                \
      "SELECT r.entity_id, r.position, r.size, r.mtime_ns, r.hash, "                           \
      "r.retired_at IS NULL AND r.entity_id > " REPLAN_LAST ", max(r.revision) "               \
      "FROM entity AS e "                                                                      \
      "INDEXED BY entity_by_key JOIN root AS r ON r.entity_id = e.id "                         \
      "WHERE e.key = ?2 AND e.domain_id = ?1 AND e.parent_id IS NULL")                         \
    X(ROOT_ANY, PART_ROOT, 0, 0, "SELECT 1 FROM root WHERE domain_id = ? LIMIT 1")             \
    X(ROOT_PAGE, PART_ENTITY | PART_ROOT, 0, 0,                                                \
      "SELECT r.entity_id, r.position, r.size, r.mtime_ns, r.hash, e.key "                     \
      "FROM root AS r JOIN entity AS e ON e.id = r.entity_id "                                 \
      "WHERE r.domain_id = ?1 AND r.retired_at IS NULL AND (r.position > ?2 OR "               \
      "(r.position = ?2 AND r.entity_id > ?3)) AND r.entity_id > " REPLAN_LAST                 \
      " ORDER BY r.position, r.entity_id "                                                     \
      "LIMIT ?4")                                                                              \
    X(ROOT_POSITION, PART_ROOT, PART_ROOT, 0,                                                  \
      "UPDATE root SET position = ? WHERE entity_id = ?")                                      \
    X(ROOT_SIG_GET, PART_ROOT, 0, 0,                                                           \
      "SELECT size, mtime_ns, hash FROM root WHERE entity_id = ? AND retired_at IS NULL")      \
    X(ROOT_SIG, PART_ROOT, PART_ROOT, 0,                                                       \
      "UPDATE root SET size = ?, mtime_ns = ?, hash = ? WHERE entity_id = ?")                  \
    X(ROOT_RETIRE, PART_ROOT, PART_ROOT, 0,                                                    \
      "UPDATE root SET retired_at = ?, reason = ?, position = NULL "                           \
      "WHERE entity_id = ? AND retired_at IS NULL")                                            \
    X(ROOT_NEXT_ORDINAL, PART_ENTITY, 0, 0,                                                    \
      "SELECT coalesce(max(ordinal) + 1, 0) FROM entity "                                      \
      "WHERE parent_id IS NULL AND domain_id = ?")                                             \
    X(UPDATE_OPEN, 0, 0, 0,                                                                    \
      "SELECT id, scanned_at IS NOT NULL, coalesce(plan_id, 0) FROM job_update "               \
      "WHERE finished_at IS NULL ORDER BY id DESC LIMIT 1")                                    \
    X(UPDATE_START, 0, 0, 0,                                                                   \
      "INSERT INTO job_update (started_at, plan_id, rerun) VALUES (?, ?, ?)")                  \
    X(UPDATE_RERUN, 0, 0, 0, "SELECT rerun FROM job_update WHERE id = ?")                      \
    X(ROOT_REPLAN, PART_ROOT, 0, 0,                                                            \
      "UPDATE job_update SET replan_last = (SELECT max(entity_id) FROM root "                  \
      "WHERE retired_at IS NULL), replanned = (SELECT count(*) FROM root "                     \
      "WHERE retired_at IS NULL) WHERE id = ?")                                                \
    X(ROOT_REPLACE, PART_ENTITY | PART_ROOT, PART_ROOT, 0,                                     \
      "UPDATE root SET retired_at = ?1, reason = ?2, position = NULL "                         \
      "WHERE retired_at IS NULL AND entity_id <= " REPLAN_LAST " AND entity_id IN "            \
      "(SELECT o.id FROM entity AS n JOIN entity AS o INDEXED BY entity_by_key "               \
      "ON o.key = n.key AND o.domain_id = n.domain_id AND o.parent_id IS NULL "                \
      "WHERE n.id = ?3)")                                                                      \
    X(ROOT_REPLAN_LEFT, PART_ROOT, PART_ROOT, 0,                                               \
      "UPDATE root SET retired_at = ?1, reason = ?2, position = NULL "                         \
      "WHERE retired_at IS NULL AND entity_id <= " REPLAN_LAST)                                \
    X(UPDATE_REPLAN_LEFT, 0, 0, 0,                                                             \
      "UPDATE job_update SET removed = removed + ?1, replanned = replanned - ?1 "              \
      "WHERE id = " LAST_UPDATE " AND finished_at IS NULL")                                    \
    X(ROOT_RETIRE_DOMAIN, PART_ROOT, PART_ROOT, 0,                                             \
      "UPDATE root SET retired_at = ?1, reason = ?2, position = NULL "                         \
      "WHERE retired_at IS NULL AND domain_id = ?3")                                           \
    X(ROOT_TWIN, PART_ENTITY | PART_ROOT, 0, 0,                                                \
      "SELECT o.entity_id FROM root AS n JOIN entity AS ne ON ne.id = n.entity_id "            \
      "JOIN entity AS oe INDEXED BY entity_by_key ON oe.key = ne.key "                         \
      "AND oe.domain_id = ne.domain_id "                                                       \
      "AND oe.parent_id IS NULL JOIN root AS o ON o.entity_id = oe.id "                        \
      "AND o.revision = n.revision - 1 AND o.reason = ?2 WHERE n.entity_id = ?1")              \
    X(TWINS_RECLAIMED, PART_ENTITY | PART_ROOT | PART_ITEM | PART_SPAN, 0, 0,                   \
      "WITH RECURSIVE t(id) AS (SELECT r.entity_id FROM root AS r "                            \
      "JOIN entity AS e ON e.id = r.entity_id WHERE r.entity_id <= " REPLAN_LAST " "           \
      "AND (r.retired_at IS NULL OR (r.reason = ?2 AND NOT EXISTS (SELECT 1 "                  \
      "FROM entity AS ne INDEXED BY entity_by_key JOIN root AS n ON n.entity_id = ne.id "      \
      "WHERE ne.key = e.key AND ne.domain_id = e.domain_id AND ne.parent_id IS NULL "          \
      "AND n.revision = r.revision + 1 AND n.entity_id <= " REPLAN_LAST "))) "                 \
      "UNION ALL SELECT c.id FROM t JOIN entity AS c ON c.parent_id = t.id) "                  \
      "SELECT EXISTS (SELECT 1 FROM t JOIN item AS i ON i.port_id = ?1 "                       \
      "AND i.entity_id = t.id WHERE i.payload_id IS NOT NULL "                                 \
      "AND " SPAN_COVERS("i.payload_id") ")")                                                  \
    X(ENTITY_SHAPE, PART_ENTITY, 0, 0,                                                         \
      "SELECT coalesce(parent_id, 0), domain_id, ordinal FROM entity WHERE id = ?")            \
    X(CHILD_AT, PART_ENTITY, 0, 0,                                                             \
      "SELECT id FROM entity WHERE parent_id = ? AND domain_id = ? AND ordinal = ?")           \
    X(GRAIN_OUTCOME, PART_GRAIN | PART_PHASE, 0, 0,                                            \
      "SELECT outcome FROM grain WHERE call_id = ? AND entity_id = ?")                         \
    X(EXPANSION_CHILDREN, 0, 0, 0,                                                             \
      "SELECT state, nchildren FROM expansion WHERE call_id = ? "                              \
      "AND parent_id = ?")                                                                     \
    X(PAYLOAD_RECLAIMED, PART_SPAN, 0, HELD_RECLAIM,                                           \
      "SELECT last >= ?1 FROM reclaimed_span WHERE first <= ?1 "                               \
      "ORDER BY first DESC LIMIT 1")                                                           \
    X(PLAN_PREVIOUS, 0, 0, 0, "SELECT text FROM plan WHERE id < ? ORDER BY id DESC LIMIT 1")   \
    X(UPDATE_COUNT, 0, 0, 0,                                                                   \
      "UPDATE job_update SET added = added + ?, changed = changed + ?, "                       \
      "removed = removed + ? WHERE id = ?")                                                    \
    X(UPDATE_SCANNED, 0, 0, 0, "UPDATE job_update SET scanned_at = ? WHERE id = ?")            \
    X(UPDATE_DROP_QUIET, 0, 0, 0,                                                              \
      "DELETE FROM job_update WHERE id = ? AND finished_at IS NULL AND added = 0 "             \
      "AND changed = 0 AND removed = 0 AND replanned = 0")                                     \
    X(UPDATE_FINISHED, 0, 0, 0,                                                                \
      "UPDATE job_update SET finished_at = ? WHERE finished_at IS NULL "                       \
      "AND scanned_at IS NOT NULL")                                                            \
    /* open expansions (migrations/0021_open_expansion.sql) */                               \
    X(OPEN_GET, 0, 0, 0,                                                                       \
      "SELECT nchildren FROM expansion_open WHERE call_id = ? AND parent_id = ?")              \
    X(OPEN_PUT, PART_ENTITY, 0, 0,                                                             \
      "INSERT INTO expansion_open (call_id, parent_id, nchildren, opened_at) "                 \
      "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (call_id, parent_id) "                              \
      "DO UPDATE SET nchildren = excluded.nchildren")                                          \
    X(OPEN_CLOSE, 0, 0, 0, "DELETE FROM expansion_open WHERE call_id = ? AND parent_id = ?")   \
    X(CHILD_HASH_PUT, PART_ENTITY, 0, 0,                                                       \
      "INSERT OR REPLACE INTO child_hash (entity_id, hash) VALUES (?, ?)")                     \
    X(CHILD_HASH_AT, PART_ENTITY, 0, 0,                                                        \
      "SELECT h.hash FROM entity AS c JOIN child_hash AS h ON h.entity_id = c.id "             \
      "WHERE c.parent_id = ? AND c.domain_id = ? AND c.ordinal = ?")                           \
    X(RECLAIMED_PORT, PART_ITEM | PART_SPAN, 0, 0,                                             \
      "SELECT DISTINCT i.payload_id FROM item AS i WHERE i.port_id = ? "                       \
      "AND i.payload_id IS NOT NULL AND NOT " SPAN_COVERS(                                     \
          "i.payload_id") " "                                                                  \
                          "ORDER BY i.payload_id")

#define FACT_ENUM(slot, reads, writes, via, sql) F_##slot,
enum fact_slot { FACT_STATEMENTS(FACT_ENUM) F__COUNT };
#undef FACT_ENUM

_Static_assert(F__COUNT <= ORCH_STORE_FACT_SLOTS, "raise ORCH_STORE_FACT_SLOTS");

/* The statement of `slot`, reset, then bound from `fmt`, one letter per parameter in
 * order (every parameter, every time: so the previous use's bindings need no clearing,
 * which cost 1% of the driver's instructions): i (int), I (int index, < 0 binds NULL),
 * l (int64_t), L (int64_t id, 0 binds NULL), N (int64_t count, < 0 binds NULL),
 * t (const char *, NULL binds NULL; copied), s (a static string, not copied). Every bind
 * is checked. Held rows that the statement could see are written first. The statement
 * is the store's: valid until the next use of the slot. 0, or an error with *out NULL
 * (sqlite3_reset of NULL does nothing, so a caller may reset whatever it got). */
int orch_store__stmt(orch_store *s, enum fact_slot slot, sqlite3_stmt **out, const char *fmt,
                     ...);
/* orch_store_prepare of a statement that leaves the held rows alone (the multi-row INSERTs
 * of a flush, the slots of the table above): its first use writes none. */
int orch_store__prepare_as_is(orch_store *s, const char *sql, sqlite3_stmt **out);
/* Steps a statement that returns no row; *changed (may be NULL) = whether it changed a row.
 * Inside a transaction only. 0 or an error. */
int orch_store__run(orch_store *s, sqlite3_stmt *st, bool *changed);
/* Steps a statement that returns at most one row: 1 (row ready: read it, then reset), 0
 * (none; reset done), or an error. */
int orch_store__one(orch_store *s, sqlite3_stmt *st);
/* ORCH_ECORRUPT: the table holds a text that is not a known `what`. */
int orch_store__corrupt_text(orch_store *s, const char *what);
/* Appends v (`size` bytes) to the malloc'd array *arr of *n elements (*cap allocated):
 * 0 or -ENOMEM. */
int orch_store__push(void *arr, size_t *n, size_t *cap, const void *v, size_t size);
/* For tests: the text of slot, the parts it declares it reads or writes and the held kinds
 * it reads through the cache: 1, or 0 past the last slot. */
int orch_store__fact_declared(enum fact_slot slot, const char **sql, unsigned *parts,
                              unsigned *via);

#endif
