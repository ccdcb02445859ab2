-- 0006_job_stop.sql — why the last driver of a job stopped short.
--
-- job.status says created, running or finished; a driver that stopped before the end
-- left it `running`, and `orch status` could not tell a job that runs from one that was
-- interrupted or failed. The driver now records how it stopped, and clears the record
-- when it starts:
--
--   stop_kind     'interrupted' (SIGINT or SIGTERM) or 'failed' (a fault stopped the job:
--                 a full disk, every LMDB reader slot taken, workers that cannot start, a
--                 source that changed, ...); NULL while a driver runs, after the job
--                 finished, and when the last driver ended without a word (kill -9, a
--                 machine crash, or a failure to write this very row): `orch status`
--                 then says `interrupted` for a job left `running`, since no driver holds
--                 its lock.
--   stop_message  the stop's message, as the driver printed it; NULL with stop_kind.
--   stop_at       ms since the epoch; NULL with stop_kind.
--
-- The names of stop_kind are the list ORCH_JOB_STOPS of storage/orch_states.h.
ALTER TABLE job ADD COLUMN stop_kind TEXT
    CHECK (stop_kind = 'interrupted' OR stop_kind = 'failed');
ALTER TABLE job ADD COLUMN stop_message TEXT;
ALTER TABLE job ADD COLUMN stop_at INTEGER;
