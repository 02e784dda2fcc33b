-- strata schema, version 8: messages are indexed for search after they are appended.
--
-- The trigram index (`messages_fts`, for memory_grep) and the word index (`messages_words`,
-- for ranking) cost about 90% of an append when written by triggers in the append's own
-- transaction (3,000 rows/s of chat text on a 2-core machine against 86,000/s for the table
-- alone). Messages are append-only and their ids only grow, so one cursor says what is
-- indexed: every message with `id <= indexed_through`. Searches bring the indexes up to date
-- before they read (`Store::index_messages`), bulk imports do it at their end, so a search
-- never misses a message; appends write only the row and its embedding backlog entry.
DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_words_insert;
CREATE TABLE message_index (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_through INTEGER NOT NULL
);
INSERT INTO message_index(id, indexed_through) SELECT 1, coalesce(max(id), 0) FROM messages;
