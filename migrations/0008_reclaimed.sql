-- 0008_reclaimed.sql — payloads reclaimed before the end of the job (DESIGN §2 `output`).
--
-- A Present item of a port that is not `output` names a payload that nothing needs once
-- every grain that reads it has sealed: the driver then deletes its bytes from
-- JOB/payloads/ (engine/prop/reclaim.c says exactly when). The item row is a committed
-- fact and does not change: it stays 'present' and keeps its payload_id. What changes is
-- recorded here: one row per payload id whose bytes are gone, or going.
--
-- Order: the row commits first, in the turn's transaction that sealed the last reader;
-- the driver deletes the bytes after that commit. A crash between the two leaves bytes
-- that a row here names: the orphan reclamation at the next start deletes them (it counts
-- an id named only as reclaimed as named by nothing). Never the reverse: bytes are never
-- deleted while no row here says so.
--
-- Users: an item is reclaimed when its payload_id is in this table;
--   SELECT count(*) FROM item AS i JOIN reclaimed AS r ON r.payload_id = i.payload_id;
-- `orch export --all` shows such an item as present with "reclaimed": true and no value.
CREATE TABLE reclaimed (
    payload_id INTEGER PRIMARY KEY CHECK (payload_id > 0)  -- an id that items name
);
