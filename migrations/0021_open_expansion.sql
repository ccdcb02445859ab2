-- 0021_open_expansion.sql — streaming expansions (DESIGN §1, §4, §5): an expansion whose
-- UDF still runs has published children already.
--
-- Each statement is IF NOT EXISTS: a job whose schema version was set back by hand (the
-- tests make "old" jobs so) may hold these already.
--
-- expansion_open: one row per expansion that published children before it was terminal
-- (a streaming expand: each chunk of children is committed as it arrives). nchildren
-- counts the children published so far, ordinals 0 .. nchildren-1. It is progress, not a
-- terminal fact: it grows with each chunk, and goes when the expansion Succeeds (the
-- expansion row then holds the count). When the expansion fails, the row stays: its
-- children stay published (DESIGN §4), and a retried expansion (`orch retry`) is compared
-- with them.
CREATE TABLE IF NOT EXISTS expansion_open (
    call_id    INTEGER NOT NULL REFERENCES call (id),
    parent_id  INTEGER NOT NULL REFERENCES entity (id),
    nchildren  INTEGER NOT NULL CHECK (nchildren > 0),
    opened_at  INTEGER NOT NULL,   -- unix ms of its first chunk
    PRIMARY KEY (call_id, parent_id)
) WITHOUT ROWID;

-- child_hash: the hash of a child's output values (orch_udf_child_hash), for each child
-- published while its expansion was open: a replay of the expansion (a retry, a resume)
-- makes the child again and must make the same one, and the child's payloads may be
-- reclaimed by then, so its hash is kept instead.
CREATE TABLE IF NOT EXISTS child_hash (
    entity_id INTEGER PRIMARY KEY REFERENCES entity (id),
    hash      INTEGER NOT NULL   -- 64 bits, stored as a signed integer
);

-- open_expansions: expansions whose UDF still runs (or ran and failed) with children
-- published so far.
--   call        the expand call
--   key         the parent entity's key
--   state       'open' while the expansion is not terminal, else 'failed'
--   children    the children published so far
--   opened_at   unix ms of the first chunk
--   parent_id   for joins
CREATE VIEW IF NOT EXISTS open_expansions (call, key, state, children, opened_at, parent_id) AS
SELECT c.name, e.key, CASE WHEN x.state IS NULL THEN 'open' ELSE x.state END, o.nchildren,
       o.opened_at, o.parent_id
FROM expansion_open AS o
JOIN call AS c ON c.id = o.call_id
JOIN entity AS e ON e.id = o.parent_id
LEFT JOIN expansion AS x ON x.call_id = o.call_id AND x.parent_id = o.parent_id;
