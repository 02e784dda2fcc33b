-- strata schema, version 3: retrieval that ranks by words and by meaning.
--
-- 1. Word indexes for ranking. The trigram indexes of version 2 stay: they make memory_grep a
--    substring search that works for CJK. Ranking natural-language questions needs words
--    instead: bm25 over trigrams rewards fragments of common words (`late` in `template`). These
--    tables use the unicode61 tokenizer with Porter stemming and hold the speaker with the text
--    ("Caroline: I went to ..."), since questions name people. They are contentless: they
--    store only the index (the text lives once, in the base tables), which is all bm25 needs.
--
-- 2. Vectors per model. The vec0 tables of version 2 held one 384-d vector per row of
--    all-MiniLM-L6-v2. The model is now a setting and long texts are embedded in chunks, so
--    the vector tables are created by strata for the model in use (see `embedding_space`):
--    their dimension is the model's, their rowid is item id * 32 + chunk number. A database
--    embedded with one model notices when another is configured and re-embeds everything,
--    never mixing vectors of two models.

-- 4. The file says it is strata's ("STRA"), so strata can refuse other programs' databases.
PRAGMA application_id = 1398035009;

CREATE VIRTUAL TABLE messages_words USING fts5(
    text, content = '', contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_words_insert AFTER INSERT ON messages
BEGIN
    INSERT INTO messages_words(rowid, text) VALUES (new.id, coalesce(new.name, new.role) || ': ' || new.content);
END;
INSERT INTO messages_words(rowid, text) SELECT id, coalesce(name, role) || ': ' || content FROM messages;

CREATE VIRTUAL TABLE summaries_words USING fts5(
    text, content = '', contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER summaries_words_insert AFTER INSERT ON summary_nodes
BEGIN
    INSERT INTO summaries_words(rowid, text) VALUES (new.id, new.headline || char(10) || new.body);
END;
CREATE TRIGGER summaries_words_update AFTER UPDATE OF headline, body ON summary_nodes
BEGIN
    DELETE FROM summaries_words WHERE rowid = old.id;
    INSERT INTO summaries_words(rowid, text) VALUES (new.id, new.headline || char(10) || new.body);
END;
CREATE TRIGGER summaries_words_delete AFTER DELETE ON summary_nodes
BEGIN
    DELETE FROM summaries_words WHERE rowid = old.id;
END;
INSERT INTO summaries_words(rowid, text) SELECT id, headline || char(10) || body FROM summary_nodes;

CREATE VIRTUAL TABLE memories_words USING fts5(
    text, content = '', contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_words_insert AFTER INSERT ON agent_memories
BEGIN
    INSERT INTO memories_words(rowid, text)
        VALUES (new.id, replace(new.key, '_', ' ') || ' ' || new.title || ': ' || new.content);
END;
CREATE TRIGGER memories_words_update AFTER UPDATE OF key, title, content ON agent_memories
BEGIN
    DELETE FROM memories_words WHERE rowid = old.id;
    INSERT INTO memories_words(rowid, text)
        VALUES (new.id, replace(new.key, '_', ' ') || ' ' || new.title || ': ' || new.content);
END;
CREATE TRIGGER memories_words_delete AFTER DELETE ON agent_memories
BEGIN
    DELETE FROM memories_words WHERE rowid = old.id;
END;
INSERT INTO memories_words(rowid, text)
    SELECT id, replace(key, '_', ' ') || ' ' || title || ': ' || content FROM agent_memories;

-- 3. The uncompacted part of a session, read on its own: compaction and assembly plan over the
--    head and the uncovered messages only, so their cost follows the new messages, not the
--    whole history.
CREATE INDEX messages_uncovered ON messages(session_id, seq) WHERE summary_id IS NULL;

-- The model the vector tables were built for; no row until something is embedded. The vector
-- tables themselves (messages_vec, summaries_vec, memories_vec) are created with the row.
CREATE TABLE embedding_space (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    model TEXT NOT NULL,
    dimensions INTEGER NOT NULL CHECK (dimensions > 0)
);

DROP TABLE messages_vec;
DROP TABLE summaries_vec;
DROP TABLE memories_vec;
UPDATE agent_memories SET embedding = NULL;

-- Messages are now embedded with their speaker, so every row waits for a new vector.
DELETE FROM embedding_backlog;
INSERT INTO embedding_backlog(kind, item_id) SELECT 'message', id FROM messages;
INSERT INTO embedding_backlog(kind, item_id) SELECT 'summary', id FROM summary_nodes;
INSERT INTO embedding_backlog(kind, item_id) SELECT 'memory', id FROM agent_memories;
