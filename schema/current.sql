-- The whole schema of a fresh strata database, as SQLite stores it (sqlite_master): each
-- table with its indexes and triggers, in name order. FTS5's shadow tables are listed for
-- the record; their virtual table creates them. The vector tables are not here: strata
-- creates them for the embedding model in use (`embedding_space`). Written by the store's
-- test `a_fresh_database_has_the_schema_of_schema_current_sql`; `STRATA_BLESS=1 cargo nextest
-- run -p strata-store -E 'test(schema)'` regenerates it. Never edit it by hand.
PRAGMA application_id = 1398035009;
PRAGMA user_version = 14;

CREATE TABLE agent_memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    category TEXT NOT NULL,               -- 'progress', 'user_preferences', 'memo'
    key TEXT NOT NULL,                    -- unique snake_case identifier
    title TEXT NOT NULL,                  -- human-readable label
    content TEXT NOT NULL,                -- Markdown or JSON content (max 500 chars)
    updated_at REAL NOT NULL,             -- UNIX timestamp float
    role TEXT NOT NULL DEFAULT 'default', -- active persona scope
    embedding BLOB, valid_from REAL, valid_to REAL,                       -- binary vector embedding
    UNIQUE(category, key, role)
);

CREATE TRIGGER memories_backlog_delete AFTER DELETE ON agent_memories
BEGIN
    DELETE FROM embedding_backlog WHERE kind = 'memory' AND item_id = old.id;
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

CREATE TRIGGER memories_fts_delete AFTER DELETE ON agent_memories
BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, key, title, content)
        VALUES ('delete', old.id, old.key, old.title, old.content);
END;

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

CREATE TRIGGER memories_words_delete AFTER DELETE ON agent_memories
BEGIN
    DELETE FROM memories_words WHERE rowid = old.id;
END;

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

CREATE TRIGGER memory_versions_delete AFTER DELETE ON agent_memories
BEGIN
    DELETE FROM memory_versions WHERE memory_id = old.id;
END;

CREATE TABLE commit_watermark (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    file_id TEXT NOT NULL,
    commits INTEGER NOT NULL
);

CREATE TABLE embedding_backlog (
    kind TEXT NOT NULL CHECK (kind IN ('message', 'summary', 'memory')),
    item_id INTEGER NOT NULL,
    PRIMARY KEY (kind, item_id)
) WITHOUT ROWID;

CREATE TABLE embedding_space (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    model TEXT NOT NULL,
    dimensions INTEGER NOT NULL CHECK (dimensions > 0)
);

CREATE TABLE forget_gate (
    id INTEGER PRIMARY KEY CHECK (id = 1)
);

CREATE TRIGGER forget_gate_stays_empty BEFORE INSERT ON forget_gate
BEGIN
    SELECT RAISE(ABORT, 'forget_gate stays empty');
END;

CREATE TABLE forgets (
    id INTEGER PRIMARY KEY,
    command TEXT NOT NULL,                 -- who asked: 'strata forget', 'Engine::forget', ...
    scope TEXT NOT NULL CHECK (scope IN ('persona', 'session', 'session_before')),
    persona TEXT,                          -- the persona forgotten, or the session's
    session_key TEXT,                      -- the session forgotten (not for a persona)
    before REAL,                           -- `--before`: messages sent before this time
    sessions INTEGER NOT NULL DEFAULT 0,   -- what was erased, counted
    messages INTEGER NOT NULL DEFAULT 0,
    summaries INTEGER NOT NULL DEFAULT 0,
    rebuilt INTEGER NOT NULL DEFAULT 0,    -- nodes rewritten from the messages kept
    memories INTEGER NOT NULL DEFAULT 0,
    memory_versions INTEGER NOT NULL DEFAULT 0,
    proposals INTEGER NOT NULL DEFAULT 0,  -- queued facts and open preference proposals
    vectors INTEGER NOT NULL DEFAULT 0,
    ingests INTEGER NOT NULL DEFAULT 0,
    started_at REAL NOT NULL,
    finished_at REAL,
    open INTEGER REFERENCES forget_gate(id) DEFERRABLE INITIALLY DEFERRED
);

CREATE INDEX forgets_open ON forgets(open) WHERE open IS NOT NULL;

CREATE TABLE ingests (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    digest TEXT NOT NULL,
    lines INTEGER NOT NULL CHECK (lines > 0),
    first_seq INTEGER NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (session_id, digest)
);

CREATE TABLE llm_calls (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    purpose TEXT NOT NULL CHECK (purpose IN ('summary', 'chat')),
    caller TEXT NOT NULL,                  -- the summarizer's name, or 'chat'
    model TEXT NOT NULL,
    ok INTEGER NOT NULL CHECK (ok IN (0, 1)),
    prompt_tokens INTEGER,                 -- as the server reported; NULL when it did not
    completion_tokens INTEGER,
    counted_prompt_tokens INTEGER,         -- strata's own count (tiktoken) of what it sent
    counted_completion_tokens INTEGER,     -- and of what came back
    millis INTEGER NOT NULL
);

CREATE INDEX llm_calls_at ON llm_calls(at);

CREATE VIRTUAL TABLE memories_fts USING fts5(
    key, title, content, content = 'agent_memories', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0 remove_diacritics 1'
);

CREATE TABLE 'memories_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;

CREATE TABLE 'memories_fts_data'(id INTEGER PRIMARY KEY, block BLOB);

CREATE TABLE 'memories_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);

CREATE TABLE 'memories_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

CREATE VIRTUAL TABLE memories_words USING fts5(
    text, content = '', contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TABLE 'memories_words_config'(k PRIMARY KEY, v) WITHOUT ROWID;

CREATE TABLE 'memories_words_data'(id INTEGER PRIMARY KEY, block BLOB);

CREATE TABLE 'memories_words_docsize'(id INTEGER PRIMARY KEY, sz BLOB, origin INTEGER);

CREATE TABLE 'memories_words_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

CREATE TABLE memory_updates (
    id INTEGER PRIMARY KEY,
    role TEXT NOT NULL,
    node_id INTEGER REFERENCES summary_nodes(id),
    category TEXT NOT NULL CHECK (category IN ('user_preferences', 'progress', 'memo')),
    key TEXT NOT NULL,
    title TEXT NOT NULL,
    content TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'proposed')),
    created_at REAL NOT NULL
, edit TEXT CHECK (edit IN ('add', 'update', 'supersede')));

CREATE INDEX memory_updates_pending ON memory_updates(id) WHERE state = 'pending';

CREATE UNIQUE INDEX memory_updates_proposed ON memory_updates(role, key) WHERE state = 'proposed';

CREATE TABLE memory_versions (
    id INTEGER PRIMARY KEY,
    memory_id INTEGER NOT NULL,            -- agent_memories.id
    title TEXT NOT NULL,
    content TEXT NOT NULL,
    written_at REAL NOT NULL,
    replaced_at REAL,                      -- NULL for the current version
    source TEXT NOT NULL CHECK (source IN ('user', 'agent', 'summary', 'proposal', 'unknown')),
    via TEXT,                              -- the command or tool that wrote it
    session_id INTEGER,                    -- the session of the node or of the tool call
    node_id INTEGER,                       -- the summary node it was consolidated from
    first_seq INTEGER,                     -- the messages that node covered
    last_seq INTEGER,
    message_id INTEGER,                    -- the message of the agent's tool call
    tool_call_id TEXT
, valid_from REAL, valid_to REAL);

CREATE INDEX memory_versions_memory ON memory_versions(memory_id, id);

CREATE INDEX memory_versions_session ON memory_versions(session_id) WHERE session_id IS NOT NULL;

CREATE TABLE message_index (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_through INTEGER NOT NULL
);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    seq INTEGER NOT NULL CHECK (seq >= 0),
    role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content TEXT NOT NULL,
    tool_calls TEXT,                       -- JSON array, OpenAI format
    tool_call_id TEXT,
    name TEXT,
    created_at REAL NOT NULL,
    token_count INTEGER NOT NULL,
    pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
    summary_id INTEGER REFERENCES summary_nodes(id), external_id TEXT, body TEXT,  -- the Level-0 node covering it; NULL = not compacted
    UNIQUE (session_id, seq)
);

CREATE INDEX messages_created ON messages(created_at);

CREATE UNIQUE INDEX messages_external_id ON messages(session_id, external_id)
    WHERE external_id IS NOT NULL;

CREATE INDEX messages_summary ON messages(summary_id);

CREATE INDEX messages_uncovered ON messages(session_id, seq) WHERE summary_id IS NULL;

CREATE TRIGGER messages_append_only BEFORE DELETE ON messages
WHEN NOT EXISTS (SELECT 1 FROM forgets INDEXED BY forgets_open WHERE open IS NOT NULL)
BEGIN
    SELECT RAISE(ABORT, 'messages are append-only');
END;

CREATE TRIGGER messages_backlog AFTER INSERT ON messages
BEGIN
    INSERT INTO embedding_backlog(kind, item_id) SELECT 'message', new.id
        WHERE NOT EXISTS (SELECT 1 FROM embedding_backlog WHERE kind = 'message' AND item_id = new.id);
END;

CREATE TRIGGER messages_verbatim
BEFORE UPDATE OF id, session_id, seq, role, content, tool_calls, tool_call_id, name, created_at ON messages
BEGIN
    SELECT RAISE(ABORT, 'message content is never rewritten');
END;

CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content = 'messages', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0 remove_diacritics 1'
);

CREATE TABLE 'messages_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;

CREATE TABLE 'messages_fts_data'(id INTEGER PRIMARY KEY, block BLOB);

CREATE TABLE 'messages_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);

CREATE TABLE 'messages_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

CREATE VIRTUAL TABLE messages_words USING fts5(
    text, content = '', contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TABLE 'messages_words_config'(k PRIMARY KEY, v) WITHOUT ROWID;

CREATE TABLE 'messages_words_data'(id INTEGER PRIMARY KEY, block BLOB);

CREATE TABLE 'messages_words_docsize'(id INTEGER PRIMARY KEY, sz BLOB, origin INTEGER);

CREATE TABLE 'messages_words_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,              -- the caller's id for the conversation
    role TEXT NOT NULL DEFAULT 'default',  -- persona scope
    created_at REAL NOT NULL,
    last_active_at REAL NOT NULL,
    last_bootstrap_at REAL                 -- when the sync guidelines were last injected
, summarizer_failures INTEGER NOT NULL DEFAULT 0, first_seq INTEGER NOT NULL DEFAULT 0);

CREATE INDEX sessions_role ON sessions(role);

CREATE VIRTUAL TABLE summaries_fts USING fts5(
    headline, body, content = 'summary_nodes', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0 remove_diacritics 1'
);

CREATE TABLE 'summaries_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;

CREATE TABLE 'summaries_fts_data'(id INTEGER PRIMARY KEY, block BLOB);

CREATE TABLE 'summaries_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB);

CREATE TABLE 'summaries_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

CREATE VIRTUAL TABLE summaries_words USING fts5(
    text, content = '', contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TABLE 'summaries_words_config'(k PRIMARY KEY, v) WITHOUT ROWID;

CREATE TABLE 'summaries_words_data'(id INTEGER PRIMARY KEY, block BLOB);

CREATE TABLE 'summaries_words_docsize'(id INTEGER PRIMARY KEY, sz BLOB, origin INTEGER);

CREATE TABLE 'summaries_words_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

CREATE TABLE summary_index (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_through INTEGER NOT NULL
);

CREATE TABLE summary_nodes (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    level INTEGER NOT NULL CHECK (level >= 0),
    parent_id INTEGER REFERENCES summary_nodes(id),
    headline TEXT NOT NULL,                -- LOD-1: one sentence
    body TEXT NOT NULL,                    -- LOD-2: timeline, decisions, pitfalls, files
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL CHECK (last_seq >= first_seq),
    start_time REAL NOT NULL,
    end_time REAL NOT NULL,
    token_count INTEGER NOT NULL,
    source_token_count INTEGER NOT NULL,
    summarizer TEXT NOT NULL,              -- model id, 'extractive' or 'raw-archive'
    created_at REAL NOT NULL
);

CREATE INDEX summary_nodes_parent ON summary_nodes(parent_id);

CREATE INDEX summary_nodes_raw_archive ON summary_nodes(session_id, level, first_seq)
    WHERE summarizer = 'raw-archive';

CREATE INDEX summary_nodes_roots ON summary_nodes(session_id, level, first_seq) WHERE parent_id IS NULL;

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

CREATE TRIGGER summaries_fts_delete AFTER DELETE ON summary_nodes
WHEN old.id <= (SELECT indexed_through FROM summary_index WHERE id = 1)
BEGIN
    INSERT INTO summaries_fts(summaries_fts, rowid, headline, body)
        VALUES ('delete', old.id, old.headline, old.body);
END;

CREATE TRIGGER summaries_fts_update AFTER UPDATE OF headline, body ON summary_nodes
WHEN old.id <= (SELECT indexed_through FROM summary_index WHERE id = 1)
BEGIN
    INSERT INTO summaries_fts(summaries_fts, rowid, headline, body)
        VALUES ('delete', old.id, old.headline, old.body);
    INSERT INTO summaries_fts(rowid, headline, body) VALUES (new.id, new.headline, new.body);
END;

CREATE TRIGGER summaries_words_delete AFTER DELETE ON summary_nodes
WHEN old.id <= (SELECT indexed_through FROM summary_index WHERE id = 1)
BEGIN
    DELETE FROM summaries_words WHERE rowid = old.id;
END;

CREATE TRIGGER summaries_words_update AFTER UPDATE OF headline, body ON summary_nodes
WHEN old.id <= (SELECT indexed_through FROM summary_index WHERE id = 1)
BEGIN
    DELETE FROM summaries_words WHERE rowid = old.id;
    INSERT INTO summaries_words(rowid, text) VALUES (new.id, new.headline || char(10) || new.body);
END;

CREATE TABLE summary_rejections (
    summarizer TEXT NOT NULL,
    reason     TEXT NOT NULL,
    count      INTEGER NOT NULL CHECK (count > 0),
    last_at    REAL NOT NULL,
    PRIMARY KEY (summarizer, reason)
) WITHOUT ROWID;

CREATE TABLE token_encoding (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    encoding TEXT NOT NULL
);
