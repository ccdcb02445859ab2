-- 0018_grain_by_entity.sql — grain's UNIQUE index leads with the entity.
--
-- The index of UNIQUE (call_id, entity_id) grew at one place per call: the grains of a new
-- entity are created together, one per call, so each went into the middle of the index
-- (only the last call's at its end), and every INSERT searched it from the root. Led by
-- the entity, a new entity's grains go at the end, where SQLite appends without a search:
-- 4% of the driver's instructions on a chain of no-op calls (callgrind, BENCHMARKS.md).
-- Every look-up of one grain gives both its call and its entity, so it still uses the
-- index. What reads grains by call alone scans the table: the queues that `resume`
-- rebuilds are read in one pass for every call (storage/facts.c, GRAINS_READY), as
-- `retry`, the sealed counts and the `progress` view already scanned it.
--
-- SQLite cannot change a table's constraint in place: the table is copied, with its ids,
-- and renamed. The views that name `grain` are kept as they are: with legacy_alter_table
-- the RENAME does not parse them (they would fail between the DROP and the RENAME, when no
-- `grain` exists), and they read the new table by its name once it has it.
CREATE TABLE grain_0018 (
    id         INTEGER PRIMARY KEY,
    call_id    INTEGER NOT NULL REFERENCES call (id),
    entity_id  INTEGER NOT NULL REFERENCES entity (id),
    phase      TEXT    NOT NULL
               CHECK (phase = 'waiting' OR phase = 'ready' OR phase = 'in_flight' OR
                      phase = 'sealed'),
    generation INTEGER NOT NULL DEFAULT 0 CHECK (generation >= 0),  -- +1 per retry/resume;
                                                  -- a report must carry the current one
    ready_seq  INTEGER,  -- FIFO position: set from job.next_ready_seq each time it becomes
                         -- READY; kept afterwards as history; NULL if never READY
    outcome    TEXT      -- terminal fact of a sealed grain, NULL before
               CHECK (outcome = 'ok' OR outcome = 'dropped' OR outcome = 'failed' OR
                      outcome = 'suppressed'),
    pending    INTEGER NOT NULL DEFAULT 0,  -- WAITING: inputs not yet terminal (for a
                         -- reduce: child input items, or -1 while its expansion is not);
                         -- the driver makes the grain READY when it reaches 0
    ready_at   INTEGER,  -- ms since the epoch: when it last became READY (0012)
    CHECK ((phase = 'sealed') = (outcome IS NOT NULL)),
    CHECK ((phase <> 'ready' AND phase <> 'in_flight') OR ready_seq IS NOT NULL),
    UNIQUE (entity_id, call_id)
);
INSERT INTO grain_0018 (id, call_id, entity_id, phase, generation, ready_seq, outcome, pending,
                        ready_at)
SELECT id, call_id, entity_id, phase, generation, ready_seq, outcome, pending, ready_at
FROM grain ORDER BY id;
PRAGMA legacy_alter_table = ON;
DROP TABLE grain;
ALTER TABLE grain_0018 RENAME TO grain;
PRAGMA legacy_alter_table = OFF;
