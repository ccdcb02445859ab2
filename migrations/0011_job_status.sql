-- 0011_job_status.sql — job.status also says interrupted and failed.
--
-- Until now job.status said created, running or finished, and a driver that stopped short
-- left it `running`, with the reason in job.stop_kind (0006). A query of job.status alone
-- then read `running` for a job that nothing runs. Now the driver that stops writes it:
--
--   created      made, never run
--   running      a driver took it: runs now, or its driver was killed without a word
--                (kill -9, a machine crash): only the job's lock can tell those apart
--                (`orch status` probes it and says `interrupted`)
--   interrupted  its driver stopped on SIGINT or SIGTERM (job.stop_kind says the same)
--   failed       a fault stopped it: a full disk, workers that cannot start, a changed
--                source, ... (job.stop_message says which)
--   finished     ran to its end
--
-- SQLite cannot change a CHECK in place, so the table is made again with the new one and
-- the same rows (no view, trigger or foreign key refers to `job`). A job stopped before
-- this migration gets the status its stop_kind recorded.
CREATE TABLE job_0011 (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    name             TEXT    NOT NULL,
    plan_text        TEXT    NOT NULL,
    plan_hash        TEXT    NOT NULL,
    pipeline_path    TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    orch_version     TEXT    NOT NULL,
    status           TEXT    NOT NULL DEFAULT 'created'
                     CHECK (status = 'created' OR status = 'running' OR
                            status = 'interrupted' OR status = 'failed' OR
                            status = 'finished'),
    next_ready_seq   INTEGER NOT NULL DEFAULT 1,
    attempt_floor    INTEGER NOT NULL DEFAULT 0,
    payload_identity TEXT,
    stop_kind        TEXT    CHECK (stop_kind = 'interrupted' OR stop_kind = 'failed'),
    stop_message     TEXT,
    stop_at          INTEGER,
    payload_mark     INTEGER NOT NULL DEFAULT 0 CHECK (payload_mark >= 0),
    live_bytes       INTEGER NOT NULL DEFAULT 0 CHECK (live_bytes >= 0),
    max_unsealed     INTEGER CHECK (max_unsealed > 0),
    max_live_bytes   INTEGER CHECK (max_live_bytes > 0)
);
INSERT INTO job_0011 (id, name, plan_text, plan_hash, pipeline_path, created_at,
                      orch_version, status, next_ready_seq, attempt_floor, payload_identity,
                      stop_kind, stop_message, stop_at, payload_mark, live_bytes,
                      max_unsealed, max_live_bytes)
SELECT id, name, plan_text, plan_hash, pipeline_path, created_at, orch_version,
       CASE WHEN status = 'running' AND stop_kind IS NOT NULL THEN stop_kind ELSE status END,
       next_ready_seq, attempt_floor, payload_identity, stop_kind, stop_message, stop_at,
       payload_mark, live_bytes, max_unsealed, max_live_bytes
FROM job;
DROP TABLE job;
ALTER TABLE job_0011 RENAME TO job;
