-- 0016_reclaimed_spans.sql — reclaimed payload ids kept as spans of consecutive ids.
--
-- 0008 wrote one row of `reclaimed` per payload whose bytes went: on a chain of no-op
-- calls, 6% of the driver's instructions. The ids freed in one turn are mostly
-- consecutive (a worker's batch takes consecutive ids for its outputs, and the readers
-- that free them run in batches too), so they are kept as spans now: [first, last], none
-- overlapping another, written once per turn (storage/facts.c, "reclaimed ids").
-- `reclaimed` stays, as a view with the same column: one row per reclaimed id that an
-- item names (every reclaimed id is), so that
--   SELECT count(*) FROM item AS i JOIN reclaimed AS r ON r.payload_id = i.payload_id;
-- reads as before. Whether one id is reclaimed is the span with the largest first at or
-- below it: one index probe.
CREATE TABLE reclaimed_span (
    first INTEGER PRIMARY KEY CHECK (first > 0),
    last  INTEGER NOT NULL,
    CHECK (last >= first)
);
-- Runs of consecutive ids: an id minus its rank is the same along a run.
INSERT INTO reclaimed_span (first, last)
SELECT min(payload_id), max(payload_id)
FROM (SELECT payload_id, payload_id - row_number() OVER (ORDER BY payload_id) AS run
      FROM reclaimed)
GROUP BY run;

DROP VIEW IF EXISTS items; -- it reads reclaimed: made again below
DROP TABLE reclaimed;

CREATE VIEW reclaimed (payload_id) AS
SELECT DISTINCT i.payload_id FROM item AS i
WHERE i.payload_id IS NOT NULL
  AND (SELECT r.last FROM reclaimed_span AS r WHERE r.first <= i.payload_id
       ORDER BY r.first DESC LIMIT 1) >= i.payload_id;

-- items: as in 0010, its column reclaimed read from the spans.
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
       coalesce((SELECT r.last >= i.payload_id FROM reclaimed_span AS r
                 WHERE r.first <= i.payload_id ORDER BY r.first DESC LIMIT 1), 0),
       i.entity_id, i.port_id
FROM entity AS e
JOIN domain AS d ON d.id = e.domain_id
JOIN port AS p ON p.domain_id = e.domain_id
JOIN item AS i ON i.port_id = p.id AND i.entity_id = e.id;
