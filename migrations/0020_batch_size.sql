-- 0020_batch_size.sql — the attempts view shows the size of each attempt's batch.
--
-- The driver sizes every dispatch from what the call measures (DESIGN §5: a call starts at
-- one grain and grows to about a target duration of work; docs/tuning.md); a call's
-- `batch` is only the UDF's own limit. The sizes chosen are seen per batch in `timeline`
-- (its `grains`) and here per attempt:
--
-- attempts.batch_size   the grains of the attempt's batch: the attempts that share its
--                       `batch` (one per grain)
--   SELECT call, avg(batch_size), max(batch_size) FROM attempts GROUP BY call;
-- Cost: the size is counted over every attempt of the job (a window over the whole
-- attempt table, like timeline's grouping), whatever the query filters.
--
-- The other columns are those of 0010_views.sql, in the same order; batch_size comes last.
DROP VIEW IF EXISTS attempts;
CREATE VIEW attempts (attempt_id, call, key, entity_id, worker, batch, generation, start,
                      end, duration_ms, outcome, message, start_ms, end_ms, grain_id,
                      batch_size) AS
SELECT a.id, c.name, e.key, e.id, a.worker_pid, a.batch, a.generation,
       strftime('%Y-%m-%dT%H:%M:%fZ', a.started_at / 1000.0, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%fZ', a.ended_at / 1000.0, 'unixepoch'),
       a.ended_at - a.started_at, a.outcome, a.message, a.started_at, a.ended_at, a.grain_id,
       CASE WHEN a.batch IS NULL THEN 1 ELSE count(*) OVER (PARTITION BY a.batch) END
FROM attempt AS a
JOIN grain AS g ON g.id = a.grain_id
JOIN call AS c ON c.id = g.call_id
JOIN entity AS e ON e.id = g.entity_id;
