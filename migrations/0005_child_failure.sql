-- 0005_child_failure.sql — a failure may name one child of the grain's expansion.
--
-- An expand UDF can say that one child exists but failed (orch_udf_fail_child: page 7 of a
-- PDF will not render): the expansion succeeds with every child, and only that child's
-- items are Failed. The failure row then belongs to the expand grain (on the parent: its
-- generation, its attempt) but is about the child, which failure.entity_id names. NULL,
-- as in every row before this migration, means the grain's own entity.
ALTER TABLE failure ADD COLUMN entity_id INTEGER REFERENCES entity (id);

-- Export finds a failed child item's message through it.
CREATE INDEX failure_entity ON failure (entity_id) WHERE entity_id IS NOT NULL;

-- failures: as before (0002), with the failing entity's key: the child's for a failed
-- child, else the grain's entity.
DROP VIEW failures;
CREATE VIEW failures (failure_id, call, entity_id, key, kind, message, generation, time,
                      grain_id) AS
SELECT f.id, c.name, e.id, e.key, f.kind, f.message, f.generation,
       strftime('%Y-%m-%dT%H:%M:%fZ', f.at / 1000.0, 'unixepoch'), f.grain_id
FROM failure AS f
JOIN grain AS g ON g.id = f.grain_id
JOIN entity AS e ON e.id = coalesce(f.entity_id, g.entity_id)
JOIN call AS c ON c.id = g.call_id;
