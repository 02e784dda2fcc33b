-- strata schema, version 10: summaries are indexed for search after they are written.
--
-- The insert triggers of the summaries' trigram and word indexes made FTS5 flush its pending
-- terms at every statement (an INSERT with a trigger opens a statement savepoint, and FTS5
-- writes a segment at each savepoint), so a bulk compaction wrote a segment per node and then
-- spent as long merging them: about a third of compacting 20,000 messages. Nodes are never
-- deleted and their ids only grow, so one cursor says what is indexed, as for messages
-- (schema 8): every node with `id <= indexed_through`. The compactor indexes at the end of
-- each call, in one statement per index; searches catch up before they read, so none misses
-- a node. A node not indexed yet needs no index update when its text is replaced.
DROP TRIGGER summaries_fts_insert;
DROP TRIGGER summaries_words_insert;
DROP TRIGGER summaries_fts_update;
DROP TRIGGER summaries_words_update;
DROP TRIGGER summaries_fts_delete;
DROP TRIGGER summaries_words_delete;
CREATE TABLE summary_index (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_through INTEGER NOT NULL
);
INSERT INTO summary_index(id, indexed_through) SELECT 1, coalesce(max(id), 0) FROM summary_nodes;

CREATE TRIGGER summaries_fts_update AFTER UPDATE OF headline, body ON summary_nodes
WHEN old.id <= (SELECT indexed_through FROM summary_index WHERE id = 1)
BEGIN
    INSERT INTO summaries_fts(summaries_fts, rowid, headline, body)
        VALUES ('delete', old.id, old.headline, old.body);
    INSERT INTO summaries_fts(rowid, headline, body) VALUES (new.id, new.headline, new.body);
END;
CREATE TRIGGER summaries_words_update AFTER UPDATE OF headline, body ON summary_nodes
WHEN old.id <= (SELECT indexed_through FROM summary_index WHERE id = 1)
BEGIN
    DELETE FROM summaries_words WHERE rowid = old.id;
    INSERT INTO summaries_words(rowid, text) VALUES (new.id, new.headline || char(10) || new.body);
END;
CREATE TRIGGER summaries_fts_delete AFTER DELETE ON summary_nodes
WHEN old.id <= (SELECT indexed_through FROM summary_index WHERE id = 1)
BEGIN
    INSERT INTO summaries_fts(summaries_fts, rowid, headline, body)
        VALUES ('delete', old.id, old.headline, old.body);
END;
CREATE TRIGGER summaries_words_delete AFTER DELETE ON summary_nodes
WHEN old.id <= (SELECT indexed_through FROM summary_index WHERE id = 1)
BEGIN
    DELETE FROM summaries_words WHERE rowid = old.id;
END;
