-- 0020: reserved for the migration that sizes batches at run time (the `attempts` view);
-- this file only keeps the numbering without a gap until that one takes its place.
SELECT 1;
