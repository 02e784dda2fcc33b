-- Facts with validity, and curation that sees (issue 39; SQLite's schema 14). `valid_from`:
-- when a memory's (or a version's) text became true, NULL for when it was written;
-- `valid_to`: when it stopped being true, NULL for still true (a version replaced by an
-- ordinary update was true until the next version was written).
ALTER TABLE agent_memories ADD COLUMN valid_from DOUBLE PRECISION;
ALTER TABLE agent_memories ADD COLUMN valid_to DOUBLE PRECISION;
ALTER TABLE memory_versions ADD COLUMN valid_from DOUBLE PRECISION;
ALTER TABLE memory_versions ADD COLUMN valid_to DOUBLE PRECISION;

-- What a queued fact asks of the memory of its key: add, update (the whole new content) or
-- supersede (the old content stopped being true); NULL is checked as an update.
ALTER TABLE memory_updates ADD COLUMN edit TEXT CHECK (edit IN ('add', 'update', 'supersede'));
