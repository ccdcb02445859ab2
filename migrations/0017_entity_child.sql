-- 0017_entity_child.sql — entity_child indexes children only.
--
-- entity_child (parent_id, domain_id, ordinal) held an entry for every root too, whose
-- parent_id is NULL: no look-up by parent finds one (`parent_id = ?` is never true of a
-- NULL; roots are found through entity_root and entity_by_key), and UNIQUE does not
-- constrain NULLs. Each root's INSERT paid for a B-tree entry that nothing reads (about 2%
-- of the driver's instructions on a chain of no-op calls over many roots). A look-up with
-- `parent_id = ?` implies `parent_id IS NOT NULL`, so SQLite uses the partial index as it
-- used the whole one.
DROP INDEX IF EXISTS entity_child;
CREATE UNIQUE INDEX entity_child ON entity (parent_id, domain_id, ordinal)
    WHERE parent_id IS NOT NULL;
