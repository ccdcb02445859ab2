-- 0010_views.sql — views named after the questions users ask: items, attempts, timeline;
-- and the size of every present item's payload.
--
-- The tables answer everything, but a question as plain as "which pages failed, and why?"
-- joined item, port, entity, grain and failure by hand. These views do the joins once,
-- with readable names and times; docs/sql-cookbook.md answers everyday questions with
-- them, and tests/e2e/sql_cookbook.sh runs every query of it against a real job.
-- The views store nothing: each reads the tables of 0001 and later.
--
-- item.payload_size: the bytes of a present item's payload (the bytes themselves are in
-- LMDB, JOB/payloads/), written with the item by the driver, which reads the size from
-- the store when it publishes it; it stays after the payload is reclaimed. NULL for the
-- other states, and for the items of a job made before this migration: for those, `orch
-- sql`'s payload_size(ID) reads the size of one that is still stored. (A view may not
-- call that function: a view that names a function only `orch sql` defines cannot be
-- read on any other connection, the sqlite3 shell or `orch status`.)
ALTER TABLE item ADD COLUMN payload_size INTEGER CHECK (payload_size >= 0);

-- items: one row per item (the terminal fact of one port for one entity).
--   key         the entity's key ('docs/a.pdf/3')
--   domain      the entity's domain ('page')
--   port        the port's qualified name ('page.text')
--   state       present, dropped, failed or suppressed
--   payload_id  the payload of a present item (payload(payload_id) in `orch sql`), else NULL
--   payload_size  its bytes (item.payload_size), else NULL
--   error       a failed item's message: the failure of the grain that produced it (its
--               RecordFailure, GroupFailure or the last attempt failure when its retries
--               were used up), or of this very child for an expand that failed one child;
--               NULL for other states and for a failed broadcast (see its ancestor's item)
--   reclaimed   1 when the payload's bytes were deleted once nothing needed them
--               (0008_reclaimed.sql), else 0
--   entity_id, port_id   for joins
--   SELECT port, state, count(*) FROM items GROUP BY 1, 2;
-- Cost: items are stored by (port, entity): a WHERE on port reads that port's items only;
-- any other filter alone (key, state) reads every item. The error look-ups run only for
-- failed items, one index probe each.
CREATE VIEW items (key, domain, port, state, payload_id, payload_size, error, reclaimed,
                   entity_id, port_id) AS
SELECT e.key, d.name, p.qualified, i.state, i.payload_id, i.payload_size,
       CASE WHEN i.state = 'failed' THEN coalesce(
           (SELECT f.message FROM failure AS f JOIN grain AS g ON g.id = f.grain_id
            WHERE f.entity_id = i.entity_id AND g.call_id = p.producer_call_id
            ORDER BY f.id DESC LIMIT 1),
           -- The producer's grain is on the entity itself (map, filter, reduce) or on its
           -- parent (expand aligned); a call's grains are all of one domain, so at most
           -- one of the two exists.
           (SELECT f.message FROM grain AS g JOIN failure AS f ON f.grain_id = g.id
            WHERE g.call_id = p.producer_call_id
              AND (g.entity_id = i.entity_id OR g.entity_id = e.parent_id)
              AND f.entity_id IS NULL
              AND (f.kind = 'record' OR f.kind = 'group' OR f.kind = 'exhausted')
            ORDER BY f.id DESC LIMIT 1)) END,
       EXISTS (SELECT 1 FROM reclaimed AS r WHERE r.payload_id = i.payload_id),
       i.entity_id, i.port_id
FROM entity AS e
JOIN domain AS d ON d.id = e.domain_id
JOIN port AS p ON p.domain_id = e.domain_id
JOIN item AS i ON i.port_id = p.id AND i.entity_id = e.id;

-- attempts: one row per attempt (a grain run by a worker in one batch).
--   attempt_id   attempt.id: attempts are numbered in the order they began
--   call         the call's name ('ocr')
--   key          the grain's entity's key
--   entity_id    the grain's entity
--   worker       the worker's process id
--   batch        the physical batch (grains of one batch share it; ids grow across resumes)
--   generation   the grain's generation it ran under (0 first, +1 per retry or resume)
--   start, end   ISO 8601 UTC with milliseconds ('2025-01-31T12:00:00.250Z'); end is NULL
--                while the attempt is open
--   duration_ms  end - start in ms; NULL while open
--   outcome      ok, dropped, record, group, error, crash, timeout, interrupted or
--                suppressed; NULL while open: running, or left open by a driver that
--                stopped without a word (the next resume ends it as interrupted)
--   message      the error text of a failed attempt, else NULL
--   start_ms, end_ms   the raw times, ms since the epoch
--   grain_id     for joins
--   SELECT call, outcome, count(*), avg(duration_ms) FROM attempts GROUP BY 1, 2;
CREATE VIEW attempts (attempt_id, call, key, entity_id, worker, batch, generation, start,
                      end, duration_ms, outcome, message, start_ms, end_ms, grain_id) AS
SELECT a.id, c.name, e.key, e.id, a.worker_pid, a.batch, a.generation,
       strftime('%Y-%m-%dT%H:%M:%fZ', a.started_at / 1000.0, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%fZ', a.ended_at / 1000.0, 'unixepoch'),
       a.ended_at - a.started_at, a.outcome, a.message, a.started_at, a.ended_at, a.grain_id
FROM attempt AS a
JOIN grain AS g ON g.id = a.grain_id
JOIN call AS c ON c.id = g.call_id
JOIN entity AS e ON e.id = g.entity_id;

-- timeline: one row per batch, in batch order (the order batches were reserved): what a Gantt chart of the run
-- draws (one lane per worker, one bar per batch, coloured by call).
--   call         the call's name
--   worker       the worker's process id
--   batch        the batch id
--   start_ms     when the batch began, ms since the epoch
--   end_ms       when its last attempt ended; NULL while any is open
--   duration_ms  end_ms - start_ms; NULL while any attempt is open
--   grains       its attempts (one per grain)
--   failed       those that failed: record, group, error, crash or timeout
--   outcomes     the count of each outcome, in a fixed order: 'ok 3, record 1';
--                'open N' for attempts still open
--   SELECT call, worker, count(*), sum(duration_ms) FROM timeline GROUP BY 1, 2;
-- It reads every attempt of the job (a listing of the whole run); for the last minutes,
-- filter attempts by id or start_ms first.
CREATE VIEW timeline (call, worker, batch, start_ms, end_ms, duration_ms, grains, failed,
                      outcomes) AS
SELECT c.name, b.worker, b.batch, b.start_ms, b.end_ms, b.end_ms - b.start_ms, b.n,
       b.record + b.grp + b.error + b.crash + b.timeout,
       substr(CASE WHEN b.ok > 0 THEN ', ok ' || b.ok ELSE '' END ||
              CASE WHEN b.dropped > 0 THEN ', dropped ' || b.dropped ELSE '' END ||
              CASE WHEN b.record > 0 THEN ', record ' || b.record ELSE '' END ||
              CASE WHEN b.grp > 0 THEN ', group ' || b.grp ELSE '' END ||
              CASE WHEN b.error > 0 THEN ', error ' || b.error ELSE '' END ||
              CASE WHEN b.crash > 0 THEN ', crash ' || b.crash ELSE '' END ||
              CASE WHEN b.timeout > 0 THEN ', timeout ' || b.timeout ELSE '' END ||
              CASE WHEN b.interrupted > 0 THEN ', interrupted ' || b.interrupted ELSE '' END ||
              CASE WHEN b.suppressed > 0 THEN ', suppressed ' || b.suppressed ELSE '' END ||
              CASE WHEN b.open > 0 THEN ', open ' || b.open ELSE '' END, 3)
FROM (
    SELECT a.batch AS batch, min(g.call_id) AS call_id, min(a.worker_pid) AS worker,
           min(a.started_at) AS start_ms,
           CASE WHEN count(a.ended_at) = count(*) THEN max(a.ended_at) END AS end_ms,
           count(*) AS n,
           count(CASE WHEN a.outcome = 'ok' THEN 1 END) AS ok,
           count(CASE WHEN a.outcome = 'dropped' THEN 1 END) AS dropped,
           count(CASE WHEN a.outcome = 'record' THEN 1 END) AS record,
           count(CASE WHEN a.outcome = 'group' THEN 1 END) AS grp,
           count(CASE WHEN a.outcome = 'error' THEN 1 END) AS error,
           count(CASE WHEN a.outcome = 'crash' THEN 1 END) AS crash,
           count(CASE WHEN a.outcome = 'timeout' THEN 1 END) AS timeout,
           count(CASE WHEN a.outcome = 'interrupted' THEN 1 END) AS interrupted,
           count(CASE WHEN a.outcome = 'suppressed' THEN 1 END) AS suppressed,
           count(CASE WHEN a.outcome IS NULL THEN 1 END) AS open
    FROM attempt AS a JOIN grain AS g ON g.id = a.grain_id
    GROUP BY a.batch
) AS b
JOIN call AS c ON c.id = b.call_id
ORDER BY b.batch;
