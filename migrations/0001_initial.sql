-- 0001_initial.sql — the first schema of a job's state.db (DESIGN §6).
--
-- Migrations are history: once released, this file is never edited; a change of schema is
-- a new file NNNN_name.sql (list it in storage/meson.build). Each file runs in its own
-- transaction with foreign keys off, and then `PRAGMA user_version` = NNNN.
--
-- Conventions
--   * Ids of plan objects (domain, call, port) ARE the plan's own 0-based indexes
--     (orch_plan_domain(p, i) is domain.id = i), inserted explicitly when the job is
--     created, so that engine code never translates. Ids of runtime objects (entity,
--     grain, attempt, failure) are allocated by SQLite from 1.
--   * Times are INTEGER milliseconds since the Unix epoch (UTC); views show them as
--     ISO 8601 text.
--   * Every enumerated text column has a CHECK constraint listing exactly the names of
--     one X-macro list of storage/orch_states.h; tests/test_store.c checks they agree.
--     The lists are written `x = 'a' OR x = 'b'`, never `x IN ('a', 'b')`: SQLite builds
--     an ephemeral b-tree for an IN list each time a statement runs, which made every
--     INSERT and UPDATE of grain, item and attempt three times slower (measured).
--   * A committed terminal fact never changes (DESIGN §1): rows of entity and expansion,
--     and items, outcomes and failures once written, are only ever inserted. The engine
--     keeps that rule; the schema states the shape of each fact.
--   * Sizes: the engine runs jobs of millions of grains, so per-grain rows are kept narrow
--     and the indexes the scheduler needs on grain are partial (they hold only the
--     frontier, not the sealed history).

-- 'orch' in ASCII: marks the file as an orch job (store.c checks it on open).
PRAGMA application_id = 1869767528;

-- The job itself: exactly one row, written when the job is created.
CREATE TABLE job (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    name           TEXT    NOT NULL,   -- the pipeline's name (`pipeline NAME`)
    plan_text      TEXT    NOT NULL,   -- canonical plan text; `resume` rebuilds the plan from it
    plan_hash      TEXT    NOT NULL,   -- SHA-256 of plan_text, 64 lowercase hex digits
    pipeline_path  TEXT    NOT NULL,   -- the .orch file the job was created from, as given
    created_at     INTEGER NOT NULL,   -- ms since the epoch
    orch_version   TEXT    NOT NULL,   -- version of orch that created the job
    status         TEXT    NOT NULL DEFAULT 'created'
                   CHECK (status = 'created' OR status = 'running' OR status = 'finished'),
    next_ready_seq INTEGER NOT NULL DEFAULT 1  -- the next grain.ready_seq to hand out
);

-- Domains of the plan (levels of the hierarchy).
CREATE TABLE domain (
    id        INTEGER PRIMARY KEY,             -- plan domain index
    name      TEXT    NOT NULL UNIQUE,         -- 'page'
    parent_id INTEGER REFERENCES domain (id),  -- NULL for a root domain
    depth     INTEGER NOT NULL CHECK (depth >= 0)  -- 0 for a root domain
);

-- Calls of the plan (configured uses of a function). Their options live in job.plan_text.
CREATE TABLE call (
    id        INTEGER PRIMARY KEY,             -- plan call index
    name      TEXT    NOT NULL UNIQUE,         -- 'ocr'
    op        TEXT,     -- op of the statement using it: 'map', 'expand', 'expand aligned',
                        -- 'filter' or 'reduce'; NULL for a call no statement uses
    function  TEXT    NOT NULL,                -- builtin name, library path or exec command
    domain_id INTEGER REFERENCES domain (id),  -- domain of its grains; NULL if unused
    target_id INTEGER REFERENCES domain (id)   -- domain of its outputs; NULL if unused
);

-- Ports of the plan (named values of a domain).
CREATE TABLE port (
    id               INTEGER PRIMARY KEY,                    -- plan port index
    domain_id        INTEGER NOT NULL REFERENCES domain (id),
    name             TEXT    NOT NULL,                       -- 'text'
    qualified        TEXT    NOT NULL UNIQUE,                -- 'page.text'
    producer_call_id INTEGER REFERENCES call (id),  -- NULL: made by a source or a broadcast
    is_output        INTEGER NOT NULL DEFAULT 0 CHECK (is_output = 0 OR
                                                       is_output = 1)  -- `output D.P`
);

-- Entities: one row per published entity, Published(e, parent) of DESIGN §1.
-- A root's key is its source value; a child's key is its parent's key, '/', and its
-- ordinal. Only root keys are stored: child keys are derived (view entity_key), which
-- keeps a million children from repeating their ancestors' paths. To find a child by
-- key, find the root whose key is the longest prefix ending before '/', then walk the
-- ordinals down (index entity_child).
CREATE TABLE entity (
    id        INTEGER PRIMARY KEY,
    domain_id INTEGER NOT NULL REFERENCES domain (id),
    parent_id INTEGER REFERENCES entity (id),  -- NULL for a root entity
    ordinal   INTEGER NOT NULL CHECK (ordinal >= 0),  -- root: position in source order;
                                                      -- child: 0..m-1 among its siblings
    key       TEXT,                            -- root: the source value; child: NULL
    CHECK ((parent_id IS NULL) = (key IS NOT NULL))
);
-- Children of a parent in ordinal order (propagation, reduce inputs, export, lineage).
CREATE UNIQUE INDEX entity_child ON entity (parent_id, domain_id, ordinal)
    WHERE parent_id IS NOT NULL;
-- Roots in source order; root keys are not unique (`lines()` may repeat a line).
CREATE UNIQUE INDEX entity_root ON entity (domain_id, ordinal) WHERE parent_id IS NULL;
CREATE INDEX entity_root_key ON entity (key) WHERE key IS NOT NULL;

-- Expansions: the terminal fact of X = (expand call, parent entity). Its children are
-- the entities whose parent is parent_id in the call's target domain.
CREATE TABLE expansion (
    call_id   INTEGER NOT NULL REFERENCES call (id),
    parent_id INTEGER NOT NULL REFERENCES entity (id),
    state     TEXT    NOT NULL CHECK (state = 'succeeded' OR state = 'dropped' OR
                                      state = 'failed'),
    nchildren INTEGER NOT NULL DEFAULT 0     -- 0 is a Succeeded, empty expansion
              CHECK (nchildren >= 0 AND (state = 'succeeded' OR nchildren = 0)),
    PRIMARY KEY (call_id, parent_id)
) WITHOUT ROWID;

-- Grains: one call applied to one entity; the unit of scheduling (DESIGN §3, §4).
CREATE TABLE grain (
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
    CHECK ((phase = 'sealed') = (outcome IS NOT NULL)),
    CHECK ((phase <> 'ready' AND phase <> 'in_flight') OR ready_seq IS NOT NULL),
    UNIQUE (call_id, entity_id)
);
-- No index on phase: a grain changes phase three times in its life (READY, IN_FLIGHT,
-- SEALED), and keeping partial indexes of the READY and IN_FLIGHT frontiers up to date
-- cost 17% of the driver's work per grain (measured with callgrind). Only `resume` asks
-- for grains by phase (to rebuild the queues, once per start), and it reads them through
-- the (call_id, entity_id) index below, call by call.

-- Items: the terminal fact of one port for one entity. Present items name their payload
-- in JOB/payloads/ (an LMDB id, never 0); other states have none.
CREATE TABLE item (
    port_id    INTEGER NOT NULL REFERENCES port (id),
    entity_id  INTEGER NOT NULL REFERENCES entity (id),
    state      TEXT    NOT NULL
               CHECK (state = 'present' OR state = 'dropped' OR state = 'failed' OR
                      state = 'suppressed'),
    payload_id INTEGER CHECK (payload_id > 0),
    CHECK ((state = 'present') = (payload_id IS NOT NULL)),
    PRIMARY KEY (port_id, entity_id)
) WITHOUT ROWID;

-- Attempts: every run of a grain by a worker, one row per grain per batch.
CREATE TABLE attempt (
    id         INTEGER PRIMARY KEY,
    grain_id   INTEGER NOT NULL REFERENCES grain (id),
    generation INTEGER NOT NULL,  -- the grain's generation it ran under
    worker_pid INTEGER,           -- the worker process
    batch      INTEGER,           -- the physical batch it ran in (ids grow across resumes):
                                  -- grains of one batch share it
    started_at INTEGER NOT NULL,  -- ms since the epoch
    ended_at   INTEGER,           -- ms since the epoch; NULL while it runs
    outcome    TEXT               -- NULL while it runs
               CHECK (outcome = 'ok' OR outcome = 'dropped' OR outcome = 'record' OR
                      outcome = 'group' OR outcome = 'error' OR outcome = 'crash' OR
                      outcome = 'timeout' OR outcome = 'interrupted' OR
                      outcome = 'suppressed'),
    message    TEXT               -- the error text of a failed attempt
);
CREATE INDEX attempt_grain ON attempt (grain_id);

-- Failures: typed failures (record, group), retries used up (exhausted; these three seal
-- the grain Failed) and attempt failures that led to a retry (error, crash, timeout).
CREATE TABLE failure (
    id         INTEGER PRIMARY KEY,
    grain_id   INTEGER NOT NULL REFERENCES grain (id),
    kind       TEXT    NOT NULL
               CHECK (kind = 'record' OR kind = 'group' OR kind = 'exhausted' OR
                      kind = 'error' OR kind = 'crash' OR kind = 'timeout'),
    message    TEXT    NOT NULL DEFAULT '',
    generation INTEGER NOT NULL,  -- the grain's generation when it failed
    at         INTEGER NOT NULL   -- ms since the epoch
);
CREATE INDEX failure_grain ON failure (grain_id);

-- Suppression barriers raised by a GroupFailure: grains of call_id under parent_id that
-- are not yet committed are sealed Suppressed (DESIGN §4).
CREATE TABLE suppression (
    call_id   INTEGER NOT NULL REFERENCES call (id),
    parent_id INTEGER NOT NULL REFERENCES entity (id),
    grain_id  INTEGER NOT NULL REFERENCES grain (id),  -- the grain that failed with GroupFailure
    at        INTEGER NOT NULL,                        -- ms since the epoch
    PRIMARY KEY (call_id, parent_id)
) WITHOUT ROWID;

-- ---- views for users (`orch sql`) -----------------------------------------------------

-- entity_key: every entity with its key and its depth (0 for a root).
--   SELECT key FROM entity_key WHERE entity_id = 42;
CREATE VIEW entity_key (entity_id, domain, key, depth) AS
WITH RECURSIVE k (id, domain_id, key, depth) AS (
    SELECT id, domain_id, key, 0 FROM entity WHERE parent_id IS NULL
    UNION ALL
    SELECT e.id, e.domain_id, k.key || '/' || e.ordinal, k.depth + 1
    FROM k JOIN entity AS e ON e.parent_id = k.id
)
SELECT k.id, d.name, k.key, k.depth FROM k JOIN domain AS d ON d.id = k.domain_id;

-- lineage: every entity with its chain of ancestors, one row per (entity, ancestor),
-- the entity itself included at depth 0, its parent at depth 1, and so on.
--   SELECT ancestor_domain, ancestor_key FROM lineage WHERE key = 'a.pdf/3' ORDER BY depth;
CREATE VIEW lineage (entity_id, domain, key, ancestor_id, ancestor_domain, ancestor_key,
                     depth) AS
WITH RECURSIVE
k (id, domain_id, key) AS (
    SELECT id, domain_id, key FROM entity WHERE parent_id IS NULL
    UNION ALL
    SELECT e.id, e.domain_id, k.key || '/' || e.ordinal
    FROM k JOIN entity AS e ON e.parent_id = k.id
),
up (entity_id, ancestor_id, depth) AS (
    SELECT id, id, 0 FROM entity
    UNION ALL
    SELECT up.entity_id, e.parent_id, up.depth + 1
    FROM up JOIN entity AS e ON e.id = up.ancestor_id
    WHERE e.parent_id IS NOT NULL
)
SELECT up.entity_id, de.name, ke.key, up.ancestor_id, da.name, ka.key, up.depth
FROM up
JOIN k AS ke ON ke.id = up.entity_id
JOIN domain AS de ON de.id = ke.domain_id
JOIN k AS ka ON ka.id = up.ancestor_id
JOIN domain AS da ON da.id = ka.domain_id;

-- failures: one row per failure, with the call, the entity's key and readable time.
--   SELECT call, kind, message, count(*) FROM failures GROUP BY 1, 2, 3;
-- The key is built by walking up from each failed entity only, so the view costs
-- O(failures x depth), not O(entities).
CREATE VIEW failures (failure_id, call, entity_id, key, kind, message, generation, time,
                      grain_id) AS
WITH RECURSIVE up (failure_id, cur, suffix) AS (
    SELECT f.id, g.entity_id, '' FROM failure AS f JOIN grain AS g ON g.id = f.grain_id
    UNION ALL
    SELECT up.failure_id, e.parent_id, '/' || e.ordinal || up.suffix
    FROM up JOIN entity AS e ON e.id = up.cur
    WHERE e.parent_id IS NOT NULL
)
SELECT f.id, c.name, g.entity_id, r.key || up.suffix, f.kind, f.message, f.generation,
       strftime('%Y-%m-%dT%H:%M:%fZ', f.at / 1000.0, 'unixepoch'), f.grain_id
FROM up
JOIN entity AS r ON r.id = up.cur AND r.parent_id IS NULL
JOIN failure AS f ON f.id = up.failure_id
JOIN grain AS g ON g.id = f.grain_id
JOIN call AS c ON c.id = g.call_id;

-- progress: per call (every call of the plan, in plan order), the number of grains that
-- exist, by phase, and the sealed ones by outcome.
--   SELECT * FROM progress;
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
    FROM grain GROUP BY call_id
) AS g ON g.call_id = c.id
ORDER BY c.id;
