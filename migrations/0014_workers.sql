-- 0014_workers.sql — where each attempt ran: workers on other machines (DESIGN §11).
--
-- With `--launcher slurm` a worker runs on a node of the cluster, as a Slurm job step; a
-- local worker runs on the driver's own machine. Each attempt records its worker's host
-- and, for a Slurm step, "JOBID.STEPID", so that SQL can answer which node ran (or
-- crashed on) a record. Attempts of jobs made before this migration have NULL in both.

ALTER TABLE attempt ADD COLUMN host TEXT;       -- the worker's host name
ALTER TABLE attempt ADD COLUMN slurm_job TEXT;  -- its Slurm step, "JOBID.STEPID"; NULL for
                                                -- a local worker

-- One row per worker process that ran attempts: where it ran, for which call, how many
-- attempts, and whether one is running now (an attempt still open). `orch status` lists
-- those of the latest run. Read from attempt: nothing more is written per attempt.
CREATE VIEW workers AS
SELECT c.name                           AS call,
       a.host                           AS host,
       a.slurm_job                      AS slurm_job,
       a.worker_pid                     AS pid,
       count(*)                         AS attempts,
       min(a.started_at)                AS first_started_at,
       max(coalesce(a.ended_at, a.started_at)) AS last_seen_at,
       max(a.ended_at IS NULL)          AS running
FROM attempt AS a
JOIN grain AS g ON g.id = a.grain_id
JOIN call AS c ON c.id = g.call_id
GROUP BY c.name, a.host, a.slurm_job, a.worker_pid;
