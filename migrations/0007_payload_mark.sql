-- 0007_payload_mark.sql — the payload ids that state.db names, where state.db can check them.
--
-- Item rows name payloads by ids that a counter inside the payload store (LMDB, JOB/payloads/,
-- "meta"/"next_id") hands out. The identity of 0004 tells this job's store from another's,
-- but not from an older state of itself: a copy of payloads/ restored from before the last
-- run, or a store that lost its last writes in a machine crash under `--durability process`
-- (no sync), has the right identity, hands out ids that committed items already name, and
-- lacks their bytes. Such a store is refused when the job is opened: its next id must be
-- above every id that a committed item names.
--
-- job.payload_mark: the largest payload id any committed item names (0: none). The store
-- raises it in the same transaction as the items that name the larger ids, once per commit
-- (storage/facts.c, orch_store__payload_mark_raise), so it is exact for what state.db holds
-- after any crash. It never decreases: `orch retry` takes back only items without payloads.
--
-- A job made before this migration gets the largest id its items name now (one scan of
-- item, once).
ALTER TABLE job ADD COLUMN payload_mark INTEGER NOT NULL DEFAULT 0 CHECK (payload_mark >= 0);
UPDATE job SET payload_mark = coalesce((SELECT max(payload_id) FROM item), 0);
