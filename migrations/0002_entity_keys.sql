-- 0002_entity_keys.sql — every entity stores its key; look-ups by key or id cost O(depth).
--
-- Schema 1 stored only root keys and derived a child's key in the views entity_key and
-- lineage by recursing from every root: SQLite cannot push a WHERE into a recursive CTE,
-- so one look-up (`SELECT * FROM lineage WHERE key = ?`) built the keys of the whole job
-- first: 1.15 s at 221 k entities, about 50 s at 10 M. Now entity.key holds every
-- entity's full key (a root: its source value; a child: its parent's key, '/', and its
-- ordinal: DESIGN §9), written once when the entity is published and indexed, and the
-- views read it. The price is the text of the ancestors' keys repeated in each child row
-- and its index entry; scripts/bench/lookup and scripts/bench/scheduler measure both
-- sides (BENCHMARKS.md).
--
-- SQLite cannot change a column's constraints in place, so the entity table is rebuilt
-- (create, copy, drop, rename: the procedure of SQLite's ALTER TABLE documentation).
-- Foreign keys are off while a migration runs and are checked before it commits
-- (storage/migrate.c). The views that read entity are dropped first, because ALTER TABLE
-- RENAME refuses a schema whose views name a missing table, and created again below.

DROP VIEW failures;
DROP VIEW lineage;
DROP VIEW entity_key;

-- Entities: one row per published entity, Published(e, parent) of DESIGN §1.
CREATE TABLE entity_new (
    id        INTEGER PRIMARY KEY,
    domain_id INTEGER NOT NULL REFERENCES domain (id),
    parent_id INTEGER REFERENCES entity (id),  -- NULL for a root entity
    ordinal   INTEGER NOT NULL CHECK (ordinal >= 0),  -- root: position in source order;
                                                      -- child: 0..m-1 among its siblings
    -- root: the source value; child: its parent's key, '/', and its ordinal, written by
    -- the INSERT itself (storage/facts.c). Not unique: `lines()` may repeat a line, a root
    -- key may contain '/' ("x/1" is then also the key of root x's child 1), and two child
    -- domains of one domain share ordinals. No CHECK of a child key's '/ordinal' suffix:
    -- it cost 3,100 instructions per entity, 10% of publishing one (callgrind).
    key       TEXT    NOT NULL
);

-- The keys of existing children, built once from their roots down. A LEFT JOIN, so that an
-- entity no root reaches (a dangling parent_id) stops the migration with "NOT NULL
-- constraint failed: entity_new.key" instead of being lost.
WITH RECURSIVE k (id, key) AS (
    SELECT id, key FROM entity WHERE parent_id IS NULL
    UNION ALL
    SELECT e.id, k.key || '/' || e.ordinal FROM k JOIN entity AS e ON e.parent_id = k.id
)
INSERT INTO entity_new (id, domain_id, parent_id, ordinal, key)
SELECT e.id, e.domain_id, e.parent_id, e.ordinal, k.key
FROM entity AS e LEFT JOIN k ON k.id = e.id
ORDER BY e.id;

DROP TABLE entity;
ALTER TABLE entity_new RENAME TO entity;

-- Children of a parent in ordinal order (propagation, reduce inputs, export, lineage).
CREATE UNIQUE INDEX entity_child ON entity (parent_id, domain_id, ordinal)
    WHERE parent_id IS NOT NULL;
-- Roots in source order (resume reads them back to check the source:
-- engine/update/rescan.c).
CREATE UNIQUE INDEX entity_root ON entity (domain_id, ordinal) WHERE parent_id IS NULL;
-- Entities by key, at any depth (the views below, `orch lineage`).
CREATE INDEX entity_by_key ON entity (key);

-- ---- views for users (`orch sql`) -----------------------------------------------------
-- Same names, columns and rows as in schema 1; they no longer recurse over the whole job.

-- entity_key: every entity with its key and its depth (0 for a root). An entity's depth
-- is its domain's.
--   SELECT key FROM entity_key WHERE entity_id = 42;
CREATE VIEW entity_key (entity_id, domain, key, depth) AS
SELECT e.id, d.name, e.key, d.depth
FROM entity AS e JOIN domain AS d ON d.id = e.domain_id;

-- lineage: every entity with its chain of ancestors, one row per (entity, ancestor),
-- the entity itself included at depth 0, its parent at depth 1, and so on.
--   SELECT ancestor_domain, ancestor_key FROM lineage WHERE key = 'a.pdf/3' ORDER BY depth;
-- How: each entity e is paired with the numbers n = 0 .. its depth (the depths of the
-- domain table are exactly 0 .. the deepest, since a domain's parent is one level up),
-- and its ancestor n levels up is found by a walk up the parent ids that starts at e
-- (a correlated subquery). A WHERE on the entity's key or id reaches entity through its
-- index, so a look-up costs O(depth²) row reads by id, not O(job); a listing of the whole
-- view costs O(entities x depth²). Any depth the plan allows is covered.
CREATE VIEW lineage (entity_id, domain, key, ancestor_id, ancestor_domain, ancestor_key,
                     depth) AS
SELECT e.id, de.name, e.key, a.id, da.name, a.key, u.n
FROM entity AS e
JOIN domain AS de ON de.id = e.domain_id
JOIN (SELECT DISTINCT depth AS n FROM domain) AS u ON u.n <= de.depth
JOIN entity AS a ON a.id = (
    WITH RECURSIVE up (id, n) AS (
        SELECT e.id, 0
        UNION ALL
        SELECT x.parent_id, up.n + 1 FROM up JOIN entity AS x ON x.id = up.id
        WHERE up.n < u.n
    )
    SELECT id FROM up WHERE n = u.n)
JOIN domain AS da ON da.id = a.domain_id;

-- failures: one row per failure, with the call, the entity's key and readable time.
--   SELECT call, kind, message, count(*) FROM failures GROUP BY 1, 2, 3;
CREATE VIEW failures (failure_id, call, entity_id, key, kind, message, generation, time,
                      grain_id) AS
SELECT f.id, c.name, g.entity_id, e.key, f.kind, f.message, f.generation,
       strftime('%Y-%m-%dT%H:%M:%fZ', f.at / 1000.0, 'unixepoch'), f.grain_id
FROM failure AS f
JOIN grain AS g ON g.id = f.grain_id
JOIN entity AS e ON e.id = g.entity_id
JOIN call AS c ON c.id = g.call_id;
