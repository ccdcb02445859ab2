-- 0009_admission.sql — what admission measures and the budgets it ran under (DESIGN §5).
--
-- job.live_bytes: the bytes of live intermediate payloads: the payloads of ports that are
-- not kept (not `output`, in a pipeline that has outputs) and that the driver frees once
-- every grain that reads them has sealed (engine/prop/reclaim.c, fate EAGER). Raised by the
-- size of each such payload in the transaction that publishes its item, lowered in the
-- one that records it in `reclaimed`; so it is exact for what state.db holds after any
-- crash. A job made before this migration starts at 0: what it holds already is not
-- counted, and the count never goes below 0 as it is freed.
--
-- job.max_unsealed, job.max_live_bytes: the budgets of the last run (NULL before one ran),
-- so that `orch status` can show how full they are.
ALTER TABLE job ADD COLUMN live_bytes INTEGER NOT NULL DEFAULT 0 CHECK (live_bytes >= 0);
ALTER TABLE job ADD COLUMN max_unsealed INTEGER CHECK (max_unsealed > 0);
ALTER TABLE job ADD COLUMN max_live_bytes INTEGER CHECK (max_live_bytes > 0);
