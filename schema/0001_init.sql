-- strata schema, version 1: the core tables.
-- Never edit this file once released; add a new numbered file instead.
-- Times are UNIX seconds as REAL (the user's agent_memories table fixed that convention).

CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,              -- the caller's id for the conversation
    role TEXT NOT NULL DEFAULT 'default',  -- persona scope
    created_at REAL NOT NULL,
    last_active_at REAL NOT NULL,
    last_bootstrap_at REAL                 -- when the sync guidelines were last injected
);
CREATE INDEX sessions_role ON sessions(role);

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
CREATE INDEX summary_nodes_roots ON summary_nodes(session_id, level, first_seq) WHERE parent_id IS NULL;
CREATE INDEX summary_nodes_parent ON summary_nodes(parent_id);

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
    summary_id INTEGER REFERENCES summary_nodes(id),  -- the Level-0 node covering it; NULL = not compacted
    UNIQUE (session_id, seq)
);
CREATE INDEX messages_summary ON messages(summary_id);
CREATE INDEX messages_created ON messages(created_at);

-- Messages are append-only: never deleted, content never rewritten. Only the coverage link
-- and the pin flag may change.
CREATE TRIGGER messages_append_only BEFORE DELETE ON messages
BEGIN
    SELECT RAISE(ABORT, 'messages are append-only');
END;
CREATE TRIGGER messages_verbatim
BEFORE UPDATE OF id, session_id, seq, role, content, tool_calls, tool_call_id, name, created_at ON messages
BEGIN
    SELECT RAISE(ABORT, 'message content is never rewritten');
END;

CREATE TABLE IF NOT EXISTS agent_memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    category TEXT NOT NULL,               -- 'progress', 'user_preferences', 'memo'
    key TEXT NOT NULL,                    -- unique snake_case identifier
    title TEXT NOT NULL,                  -- human-readable label
    content TEXT NOT NULL,                -- Markdown or JSON content (max 500 chars)
    updated_at REAL NOT NULL,             -- UNIX timestamp float
    role TEXT NOT NULL DEFAULT 'default', -- active persona scope
    embedding BLOB,                       -- binary vector embedding
    UNIQUE(category, key, role)
);
