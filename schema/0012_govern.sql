-- strata schema, version 12: memory people can govern (issue 24).
--
-- Forgetting. Messages stay append-only for every path but one: `strata forget` (the store's
-- `Store::forget`). Its transaction first inserts its audit row into `forgets` with `open`
-- set; the delete guard of `messages` lets a delete through only while such a row exists.
-- `open` names a row of `forget_gate`, a table that always stays empty, through a deferred
-- foreign key: a transaction that opened the guard and did not close it (set `open` back to
-- NULL) cannot commit, so no committed state ever has the guard open, and no other
-- connection can see it open (SQLite's isolation). The audit row records what was erased
-- (the scope and counts), when and by which command, never the erased text.
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

DROP TRIGGER messages_append_only;

CREATE TRIGGER messages_append_only BEFORE DELETE ON messages
WHEN NOT EXISTS (SELECT 1 FROM forgets INDEXED BY forgets_open WHERE open IS NOT NULL)
BEGIN
    SELECT RAISE(ABORT, 'messages are append-only');
END;

-- A session whose oldest messages were forgotten (`--before`) keeps numbering after them: its
-- seqs run densely from `first_seq`.
ALTER TABLE sessions ADD COLUMN first_seq INTEGER NOT NULL DEFAULT 0;

-- A deleted or rewritten memory leaves nothing of its text in the trigram index (FTS5
-- otherwise keeps the old entries until a merge).
INSERT INTO memories_fts(memories_fts, rank) VALUES ('secure-delete', 1);

-- Provenance and history. Every version of every memory, the current one included, with where
-- it came from: the user (and through which command), the agent (the session, the message
-- and the tool call that saved it), a summary node's facts (the node, its session and the seqs
-- of the messages it covers), or a preference proposal the user accepted. An update closes
-- the current version (`replaced_at`) and adds one; deleting a memory deletes its versions.
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
);

CREATE INDEX memory_versions_memory ON memory_versions(memory_id, id);

CREATE INDEX memory_versions_session ON memory_versions(session_id) WHERE session_id IS NOT NULL;

CREATE TRIGGER memory_versions_delete AFTER DELETE ON agent_memories
BEGIN
    DELETE FROM memory_versions WHERE memory_id = old.id;
END;

-- The memories written before schema 12: their current text, from a source not recorded.
INSERT INTO memory_versions(memory_id, title, content, written_at, source)
    SELECT id, title, content, updated_at, 'unknown' FROM agent_memories;

-- Usage accounting: every call strata makes to an LLM (the summarizer's, `strata chat`'s),
-- with the usage the server reported beside strata's own count and the time it took.
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
