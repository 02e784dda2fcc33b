-- strata schema, version 2: search indexes.
--
-- Full text: FTS5 with the trigram tokenizer, so that grep is a case-insensitive substring
-- search that also works for CJK text (unicode61 would treat a run of Han characters as one
-- token). The tables are external-content: the text lives once, in the base tables, and the
-- triggers below keep the index in step.

CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content = 'messages', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0 remove_diacritics 1'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;

CREATE VIRTUAL TABLE summaries_fts USING fts5(
    headline, body, content = 'summary_nodes', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0 remove_diacritics 1'
);
CREATE TRIGGER summaries_fts_insert AFTER INSERT ON summary_nodes
BEGIN
    INSERT INTO summaries_fts(rowid, headline, body) VALUES (new.id, new.headline, new.body);
END;
CREATE TRIGGER summaries_fts_update AFTER UPDATE OF headline, body ON summary_nodes
BEGIN
    INSERT INTO summaries_fts(summaries_fts, rowid, headline, body)
        VALUES ('delete', old.id, old.headline, old.body);
    INSERT INTO summaries_fts(rowid, headline, body) VALUES (new.id, new.headline, new.body);
END;
CREATE TRIGGER summaries_fts_delete AFTER DELETE ON summary_nodes
BEGIN
    INSERT INTO summaries_fts(summaries_fts, rowid, headline, body)
        VALUES ('delete', old.id, old.headline, old.body);
END;

CREATE VIRTUAL TABLE memories_fts USING fts5(
    key, title, content, content = 'agent_memories', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0 remove_diacritics 1'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON agent_memories
BEGIN
    INSERT INTO memories_fts(rowid, key, title, content) VALUES (new.id, new.key, new.title, new.content);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF key, title, content ON agent_memories
BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, key, title, content)
        VALUES ('delete', old.id, old.key, old.title, old.content);
    INSERT INTO memories_fts(rowid, key, title, content) VALUES (new.id, new.key, new.title, new.content);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON agent_memories
BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, key, title, content)
        VALUES ('delete', old.id, old.key, old.title, old.content);
END;

-- Vectors: sqlite-vec vec0 tables, 384 dimensions (all-MiniLM-L6-v2), persona as partition key
-- so a k-nearest query only ever scans one persona's vectors. The rowid is the id of the row
-- in the base table; a base row without a vector row is the embedding backlog.
CREATE VIRTUAL TABLE messages_vec USING vec0(
    role TEXT PARTITION KEY,
    embedding float[384] distance_metric=cosine
);
CREATE VIRTUAL TABLE summaries_vec USING vec0(
    role TEXT PARTITION KEY,
    embedding float[384] distance_metric=cosine
);
CREATE VIRTUAL TABLE memories_vec USING vec0(
    role TEXT PARTITION KEY,
    embedding float[384] distance_metric=cosine
);

-- The embedding backlog: every row that needs a (new) vector. Filled by triggers in the same
-- transaction as the text, drained in the same transaction as the vector is written, so a
-- crash at any point neither loses an item nor embeds one twice. (The triggers test for an
-- existing row instead of using INSERT OR IGNORE: an UPSERT's own conflict policy would
-- override the trigger's.)
CREATE TABLE embedding_backlog (
    kind TEXT NOT NULL CHECK (kind IN ('message', 'summary', 'memory')),
    item_id INTEGER NOT NULL,
    PRIMARY KEY (kind, item_id)
) WITHOUT ROWID;
INSERT INTO embedding_backlog(kind, item_id) SELECT 'message', id FROM messages;
INSERT INTO embedding_backlog(kind, item_id) SELECT 'summary', id FROM summary_nodes;
INSERT INTO embedding_backlog(kind, item_id) SELECT 'memory', id FROM agent_memories;
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
INSERT INTO summaries_fts(summaries_fts) VALUES ('rebuild');
INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');

CREATE TRIGGER messages_backlog AFTER INSERT ON messages
BEGIN
    INSERT INTO embedding_backlog(kind, item_id) SELECT 'message', new.id
        WHERE NOT EXISTS (SELECT 1 FROM embedding_backlog WHERE kind = 'message' AND item_id = new.id);
END;
CREATE TRIGGER summaries_backlog_insert AFTER INSERT ON summary_nodes
BEGIN
    INSERT INTO embedding_backlog(kind, item_id) SELECT 'summary', new.id
        WHERE NOT EXISTS (SELECT 1 FROM embedding_backlog WHERE kind = 'summary' AND item_id = new.id);
END;
CREATE TRIGGER summaries_backlog_update AFTER UPDATE OF headline, body ON summary_nodes
BEGIN
    INSERT INTO embedding_backlog(kind, item_id) SELECT 'summary', new.id
        WHERE NOT EXISTS (SELECT 1 FROM embedding_backlog WHERE kind = 'summary' AND item_id = new.id);
END;
CREATE TRIGGER memories_backlog_insert AFTER INSERT ON agent_memories
BEGIN
    INSERT INTO embedding_backlog(kind, item_id) SELECT 'memory', new.id
        WHERE NOT EXISTS (SELECT 1 FROM embedding_backlog WHERE kind = 'memory' AND item_id = new.id);
END;
CREATE TRIGGER memories_backlog_update AFTER UPDATE OF key, title, content ON agent_memories
BEGIN
    INSERT INTO embedding_backlog(kind, item_id) SELECT 'memory', new.id
        WHERE NOT EXISTS (SELECT 1 FROM embedding_backlog WHERE kind = 'memory' AND item_id = new.id);
END;
CREATE TRIGGER memories_backlog_delete AFTER DELETE ON agent_memories
BEGIN
    DELETE FROM embedding_backlog WHERE kind = 'memory' AND item_id = old.id;
END;
