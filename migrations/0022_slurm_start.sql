-- 0022_slurm_start.sql — the Slurm jobs a driver started (DESIGN §11), so that the next
-- driver can end those a stopped one left behind.
--
-- With `--launcher slurm` each worker is a Slurm job (or a step of the driver's own
-- allocation) started by srun. srun ends its job when the driver dies, unless srun dies
-- with it (kill -9 of its process group, a lost node): Slurm then keeps the job RUNNING
-- without a step, holding its cores, whether or not its worker was running an attempt.
--
-- slurm_start: one row per worker start, committed before its srun is started, deleted
-- once its srun has ended (the job with it) or when the driver ends. A resume cancels
-- every row's job (by its step when its worker said which, else by its name) and deletes
-- the rows. It is bookkeeping of processes, not a fact of the job.
--   name        the job's name, "orch-CALL-TOKEN" (the start's own)
--   call        the call whose worker it is
--   step        "JOBID.STEPID" once the worker connected and said it; else NULL
--   started_at  unix ms
--
-- IF NOT EXISTS: a job whose schema version was set back by hand (the tests make "old"
-- jobs so) may hold it already.
CREATE TABLE IF NOT EXISTS slurm_start (
    name       TEXT PRIMARY KEY,
    call       TEXT NOT NULL,
    step       TEXT,
    started_at INTEGER NOT NULL
) WITHOUT ROWID;
