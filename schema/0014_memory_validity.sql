-- strata schema, version 14: facts with validity, and curation that sees (issue 39).
--
-- A memory can be superseded with the time it stopped being true. `valid_from` is when the
-- current text became true (NULL: when it was written, `updated_at`); `valid_to` when it
-- stopped being true with nothing in its place (NULL: still true). The same two columns on
-- each version: a version closed by an ordinary update was true until it was replaced
-- (`replaced_at`), one closed by a supersede until its `valid_to`. Reads return what is true
-- now, or what was true at a time when asked (`as_of`), from these.
ALTER TABLE agent_memories ADD COLUMN valid_from REAL;
ALTER TABLE agent_memories ADD COLUMN valid_to REAL;
ALTER TABLE memory_versions ADD COLUMN valid_from REAL;
ALTER TABLE memory_versions ADD COLUMN valid_to REAL;

-- What a queued fact asks of the memory of its key: 'add' (a new memory), 'update' (the
-- whole new content) or 'supersede' (the old content stopped being true); NULL for a fact
-- queued before this version or by a summarizer that does not say, checked as an update.
ALTER TABLE memory_updates ADD COLUMN edit TEXT CHECK (edit IN ('add', 'update', 'supersede'));
