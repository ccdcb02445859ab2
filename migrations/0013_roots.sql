-- 0013_roots.sql — roots identified by key, with revisions: incremental jobs (DESIGN §10).
--
-- Until now a root was identified by its position in the source (entity.ordinal), and a
-- job refused a source that changed. Now a root is identified by its key (DESIGN §9) and
-- `orch update` rescans the sources: a new key is admitted, a changed file retires its
-- root and admits a new revision under the same key, a vanished key retires its root.
-- Retired roots and everything under them stay as history.
--
-- This file only adds what is new. Keys of old jobs must change too (files() keys become
-- paths relative to the pipeline's directory, a repeated lines() value gets `#2`, `#3`),
-- and the root rows of old jobs must be written; both need the pipeline as it was written
-- (JOB/pipeline.orch), which SQL cannot read, so engine/update/rekey.c (its SQL in
-- storage/keys.c) does them in one transaction on the first read-write open after this
-- migration, and marks the job done by setting job.base_dir. Read-only commands refuse a
-- job whose base_dir is NULL, as they refuse an unmigrated one.

-- The absolute directory that the pipeline's relative paths were resolved against (the
-- pipeline file's): a files() root's key is its path relative to it. NULL: a job made
-- before this migration whose keys are not converted yet.
ALTER TABLE job ADD COLUMN base_dir TEXT;

-- One row per root entity: the root's identity and life. A key has at most one live
-- revision, its latest; a retired revision keeps its row, its entity and its whole
-- subtree. The key is the entity's (entity.key, indexed): not stored again here, since a
-- text index more made admitting a root 27% slower (a job of one grain per root,
-- measured); the engine keeps revisions distinct and numbered (engine/queue/source.c).
CREATE TABLE root (
    entity_id   INTEGER PRIMARY KEY REFERENCES entity (id),
    domain_id   INTEGER NOT NULL REFERENCES domain (id),
    revision    INTEGER NOT NULL CHECK (revision >= 1),  -- 1, 2, ... per key
    position    INTEGER,    -- its place in the source at the last scan (export's order);
                            -- NULL once retired
    size        INTEGER,    -- files(): the file's size, modification time (ns since the
    mtime_ns    INTEGER,    -- epoch) and SHA-256 (hex) when the revision was admitted or
    hash        TEXT,       -- last found unchanged ('' and size 0: it could not be read);
                            -- lines(): the line's length and SHA-256 when its key does not
                            -- say it (a #n suffix, a NUL byte), else NULL; NULL for old
                            -- jobs' roots
    admitted_at INTEGER NOT NULL,          -- ms since the epoch
    retired_at  INTEGER,                   -- ms since the epoch; NULL while live
    reason      TEXT CHECK (reason = 'changed' OR reason = 'removed' OR reason = 'plan'),
                -- changed: its file's bytes changed; removed: the source no longer gives
                -- it; plan: an edited pipeline computes something else (`orch update DIR
                -- PIPELINE`): a new revision takes over what still holds (carry.c)
    CHECK ((retired_at IS NULL) = (reason IS NULL)),
    CHECK (retired_at IS NULL OR position IS NULL)
);
-- The live roots of a domain in source order (export, the merge of a rescan).
CREATE INDEX root_live ON root (domain_id, position) WHERE retired_at IS NULL;

-- Every plan the job has run (DESIGN §10): the first when the job was made, then one per
-- `orch update DIR PIPELINE` that changed it. job.plan_text is the current one.
CREATE TABLE plan (
    id         INTEGER PRIMARY KEY,
    hash       TEXT    NOT NULL,   -- SHA-256 of text
    text       TEXT    NOT NULL,   -- canonical plan text
    adopted_at INTEGER NOT NULL    -- ms since the epoch
);
INSERT INTO plan (hash, text, adopted_at) SELECT plan_hash, plan_text, created_at FROM job;

-- One row per `orch update`: started, scanned (the rescan committed: retirements and
-- positions), finished (the job ran to its end after it). A resume after a crash finishes
-- the update whose scan is not done.
CREATE TABLE job_update (
    id          INTEGER PRIMARY KEY,
    started_at  INTEGER NOT NULL,
    scanned_at  INTEGER,
    finished_at INTEGER,
    added       INTEGER NOT NULL DEFAULT 0,  -- new keys (and new revisions) admitted
    changed     INTEGER NOT NULL DEFAULT 0,  -- roots retired because their file changed
    removed     INTEGER NOT NULL DEFAULT 0,  -- roots retired because their key vanished
    replanned   INTEGER NOT NULL DEFAULT 0,  -- roots retired for the edited plan (each
                                             -- comes back as a new revision: in added)
    plan_id     INTEGER REFERENCES plan (id), -- the edited plan it adopted; NULL: the same
    rerun       TEXT    -- `--rerun`: the calls forced to run again, comma-separated
);

-- revisions: every root revision, live or retired, with why and when it was retired.
--   SELECT key, revision, state, reason FROM revisions WHERE state = 'retired';
CREATE VIEW revisions (domain, key, revision, entity_id, state, reason, admitted, retired,
                       position) AS
SELECT d.name, e.key, r.revision, r.entity_id,
       CASE WHEN r.retired_at IS NULL THEN 'live' ELSE 'retired' END, r.reason,
       strftime('%Y-%m-%dT%H:%M:%fZ', r.admitted_at / 1000.0, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%fZ', r.retired_at / 1000.0, 'unixepoch'), r.position
FROM root AS r JOIN entity AS e ON e.id = r.entity_id JOIN domain AS d ON d.id = r.domain_id;
