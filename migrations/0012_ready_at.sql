-- 0012_ready_at.sql — when a grain became READY.
--
-- grain.ready_seq orders the READY grains (the FIFO), but says nothing of time, so the
-- length of a call's ready queue over time (`orch report`: when a queue starved, when one
-- overflowed) could only be estimated. ready_at is set in the same UPDATE as ready_seq,
-- each time the grain becomes READY (made ready, put back after a failed batch, or found
-- in flight by a resume), in ms since the epoch; a grain queued from ready_at until its
-- next attempt started. NULL for a grain never READY, and for those of a job made before
-- this migration (the report then falls back on its estimate).
ALTER TABLE grain ADD COLUMN ready_at INTEGER;
