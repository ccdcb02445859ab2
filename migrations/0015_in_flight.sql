-- 0015_in_flight.sql — a grain in flight is one with an open attempt (DESIGN §3, §6).
--
-- Until now dispatch wrote phase = 'in_flight' on every grain it sent to a worker: one
-- UPDATE per grain, and a second one for a grain made READY in the same turn (its READY
-- first). The attempt row begun with the batch already says that the grain runs (ended_at
-- and outcome NULL), in the same transaction, so the driver writes neither any more. The
-- row of a grain that runs reads 'ready', or 'waiting' when it was made READY and sent to
-- a worker in one turn; its seal (or its return to READY after a failed attempt) writes
-- its ready_seq and ready_at with the rest. Resume takes back every grain with an open
-- attempt (and any 'in_flight' row a job from before this migration left).
--
-- So in SQL, a grain is in flight when it is not sealed and has an attempt with outcome
-- NULL; the views below say it for you, and `grain.phase` is the stored phase, not that.
--
-- Both views read job.attempt_floor. A later migration that rebuilds table job (as 0011
-- did) must drop them first and create them again after: SQLite refuses to rename a
-- table that a view names. (Tests that make an older job from a new one drop them.)

-- grains: every grain with its phase as DESIGN §3 names it (in_flight from its open
-- attempt), one row per grain:
--   SELECT call, key, phase, generation FROM grains WHERE phase = 'in_flight';
-- The open attempts all lie at or above job.attempt_floor (the driver raises it with each
-- commit), so the set of grains in flight is read without the attempt history.
CREATE VIEW grains (grain_id, call_id, call, entity_id, key, phase, generation, outcome,
                    ready_seq) AS
SELECT g.id, g.call_id, c.name, g.entity_id, e.key,
       CASE WHEN g.phase <> 'sealed' AND g.id IN (
                SELECT grain_id FROM attempt
                WHERE id >= (SELECT attempt_floor FROM job WHERE id = 1) AND outcome IS NULL)
            THEN 'in_flight' ELSE g.phase END,
       g.generation, g.outcome, g.ready_seq
FROM grain AS g
JOIN call AS c ON c.id = g.call_id
JOIN entity AS e ON e.id = g.entity_id;

-- progress: as in 0001, with a grain in flight counted as such rather than as ready.
DROP VIEW IF EXISTS progress;
CREATE VIEW progress (call, total, waiting, ready, in_flight, sealed, ok, dropped, failed,
                      suppressed) AS
SELECT c.name,
       coalesce(g.total, 0), coalesce(g.waiting, 0), coalesce(g.ready, 0),
       coalesce(g.in_flight, 0), coalesce(g.sealed, 0), coalesce(g.ok, 0),
       coalesce(g.dropped, 0), coalesce(g.failed, 0), coalesce(g.suppressed, 0)
FROM call AS c
LEFT JOIN (
    SELECT call_id,
           count(*) AS total,
           count(CASE WHEN phase = 'waiting' THEN 1 END) AS waiting,
           count(CASE WHEN phase = 'ready' THEN 1 END) AS ready,
           count(CASE WHEN phase = 'in_flight' THEN 1 END) AS in_flight,
           count(CASE WHEN phase = 'sealed' THEN 1 END) AS sealed,
           count(CASE WHEN outcome = 'ok' THEN 1 END) AS ok,
           count(CASE WHEN outcome = 'dropped' THEN 1 END) AS dropped,
           count(CASE WHEN outcome = 'failed' THEN 1 END) AS failed,
           count(CASE WHEN outcome = 'suppressed' THEN 1 END) AS suppressed
    FROM (SELECT call_id, outcome,
                 CASE WHEN phase <> 'sealed' AND id IN (
                          SELECT grain_id FROM attempt
                          WHERE id >= (SELECT attempt_floor FROM job WHERE id = 1)
                            AND outcome IS NULL)
                      THEN 'in_flight' ELSE phase END AS phase
          FROM grain)
    GROUP BY call_id
) AS g ON g.call_id = c.id
ORDER BY c.id;
