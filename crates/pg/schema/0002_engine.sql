-- strata on PostgreSQL, schema 2: what the engine needs beyond schema 1's storage seam: the
-- compactor's bookkeeping (failures, the quality gate's refusals, the token encoding), usage
-- accounting, where a memory came from and its earlier versions, and the indexes that keep
-- the live part of a session and the raw archives cheap to find.

CREATE INDEX messages_uncovered ON messages(session_id, seq) WHERE summary_id IS NULL;

-- An append queues its messages for embedding once per statement, from the rows it inserted,
-- rather than once per row (whose trigger turned each whole row into JSON for its session).
DROP TRIGGER messages_backlog ON messages;
CREATE FUNCTION strata_messages_backlog() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO embedding_backlog(kind, item_id, persona, session_id)
    SELECT 'message', id, persona, session_id FROM appended
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER messages_backlog AFTER INSERT ON messages REFERENCING NEW TABLE AS appended
    FOR EACH STATEMENT EXECUTE FUNCTION strata_messages_backlog();
CREATE INDEX summary_nodes_session ON summary_nodes(session_id, level, first_seq);
CREATE INDEX summary_nodes_raw_archive ON summary_nodes(session_id, level, first_seq)
    WHERE summarizer = 'raw-archive';

ALTER TABLE sessions ADD COLUMN summarizer_failures INTEGER NOT NULL DEFAULT 0
    CHECK (summarizer_failures >= 0);

CREATE TABLE summary_rejections (
    summarizer TEXT NOT NULL,
    reason TEXT NOT NULL,
    count BIGINT NOT NULL CHECK (count > 0),
    last_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (summarizer, reason)
);

-- The encoding every stored token count was made with: the first writer's, never changed.
CREATE TABLE token_encoding (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    encoding TEXT NOT NULL
);

CREATE TABLE llm_calls (
    id BIGSERIAL PRIMARY KEY,
    at DOUBLE PRECISION NOT NULL,
    purpose TEXT NOT NULL CHECK (purpose IN ('summary', 'chat')),
    caller TEXT NOT NULL,
    model TEXT NOT NULL,
    ok BOOLEAN NOT NULL,
    prompt_tokens BIGINT,
    completion_tokens BIGINT,
    counted_prompt_tokens BIGINT,
    counted_completion_tokens BIGINT,
    millis BIGINT NOT NULL
);

-- A memory's current source, and every version it had (the current one included), each
-- with its source; a version goes with its memory.
ALTER TABLE agent_memories ADD COLUMN provenance JSONB;

CREATE TABLE memory_versions (
    id BIGSERIAL PRIMARY KEY,
    memory_id BIGINT NOT NULL REFERENCES agent_memories(id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    content TEXT NOT NULL,
    provenance JSONB NOT NULL,
    written_at DOUBLE PRECISION NOT NULL
);

CREATE INDEX memory_versions_memory ON memory_versions(memory_id, id);

-- `strata copy` from a SQLite file: which file this database is a copy of (a re-run resumes
-- only a copy of the same file) and what is done.
CREATE TABLE strata_copy (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    source TEXT NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    usage_copied BOOLEAN NOT NULL DEFAULT false,
    finished_at DOUBLE PRECISION
);
