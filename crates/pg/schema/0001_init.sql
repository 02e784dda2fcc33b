-- strata on PostgreSQL, schema 1: the tables of the SQLite schema that the storage seam
-- reaches (crates/store/src/backend.rs), with the invariants enforced by the server itself:
-- messages append-only and verbatim, coverage written once, one memory per
-- (category, key, persona), a node's parent written once. Full-text search is a stored
-- tsvector (ranked words) and pg_trgm over text folded as strata folds it (memory_grep's
-- substrings, any script); vectors are pgvector's, one row per chunk.

CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE sessions (
    id BIGSERIAL PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,              -- the caller's id for the conversation
    persona TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,  -- UNIX seconds, as in SQLite
    last_active_at DOUBLE PRECISION NOT NULL,
    last_bootstrap_at DOUBLE PRECISION,
    next_seq BIGINT NOT NULL DEFAULT 0     -- the seq the next message gets (row-locked by appends)
);

CREATE INDEX sessions_persona ON sessions(persona);

CREATE TABLE summary_nodes (
    id BIGSERIAL PRIMARY KEY,
    session_id BIGINT NOT NULL REFERENCES sessions(id),
    persona TEXT NOT NULL,                 -- the session's, copied so that filters need no join
    level INTEGER NOT NULL CHECK (level >= 0),
    parent_id BIGINT REFERENCES summary_nodes(id),
    headline TEXT NOT NULL,
    body TEXT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL CHECK (last_seq >= first_seq),
    start_time DOUBLE PRECISION NOT NULL,
    end_time DOUBLE PRECISION NOT NULL,
    token_count INTEGER NOT NULL,
    source_token_count INTEGER NOT NULL,
    summarizer TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    folded TEXT NOT NULL,                  -- headline, newline, body, folded (strata_store::backend::fold)
    words TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', headline || E'\n' || body)) STORED
);

CREATE INDEX summary_nodes_roots ON summary_nodes(session_id, level, first_seq) WHERE parent_id IS NULL;
CREATE INDEX summary_nodes_parent ON summary_nodes(parent_id);
CREATE INDEX summary_nodes_folded ON summary_nodes USING gin (folded gin_trgm_ops);
CREATE INDEX summary_nodes_words ON summary_nodes USING gin (words);
CREATE INDEX summary_nodes_persona ON summary_nodes(persona, end_time);

CREATE TABLE messages (
    id BIGSERIAL PRIMARY KEY,
    session_id BIGINT NOT NULL REFERENCES sessions(id),
    persona TEXT NOT NULL,                 -- the session's, copied so that filters need no join
    seq BIGINT NOT NULL CHECK (seq >= 0),
    role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content TEXT NOT NULL,
    tool_calls JSONB,
    tool_call_id TEXT,
    name TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    token_count INTEGER NOT NULL CHECK (token_count >= 0),
    pinned BOOLEAN NOT NULL DEFAULT false,
    summary_id BIGINT REFERENCES summary_nodes(id),
    external_id TEXT,
    folded TEXT NOT NULL,
    words TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', coalesce(name, role) || ': ' || content)) STORED,
    UNIQUE (session_id, seq)
);

CREATE UNIQUE INDEX messages_external_id ON messages(session_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX messages_summary ON messages(summary_id);
CREATE INDEX messages_folded ON messages USING gin (folded gin_trgm_ops);
CREATE INDEX messages_words ON messages USING gin (words);
CREATE INDEX messages_persona ON messages(persona, created_at);

-- Messages are append-only and verbatim; a message's coverage is written once. Only the
-- owner of the tables could drop these triggers: strata's own connections never do.
CREATE FUNCTION strata_messages_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'messages are append-only' USING ERRCODE = 'restrict_violation';
    END IF;
    IF (NEW.id, NEW.session_id, NEW.persona, NEW.seq, NEW.role, NEW.content, NEW.tool_calls,
        NEW.tool_call_id, NEW.name, NEW.created_at, NEW.token_count, NEW.external_id, NEW.folded)
       IS DISTINCT FROM
       (OLD.id, OLD.session_id, OLD.persona, OLD.seq, OLD.role, OLD.content, OLD.tool_calls,
        OLD.tool_call_id, OLD.name, OLD.created_at, OLD.token_count, OLD.external_id, OLD.folded) THEN
        RAISE EXCEPTION 'message content is never rewritten' USING ERRCODE = 'restrict_violation';
    END IF;
    IF OLD.summary_id IS NOT NULL AND NEW.summary_id IS DISTINCT FROM OLD.summary_id THEN
        RAISE EXCEPTION 'message % is already covered by summary node %', OLD.id, OLD.summary_id
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER messages_guard BEFORE UPDATE OR DELETE ON messages
    FOR EACH ROW EXECUTE FUNCTION strata_messages_guard();
CREATE TRIGGER messages_no_truncate BEFORE TRUNCATE ON messages
    FOR EACH STATEMENT EXECUTE FUNCTION strata_messages_guard();

-- A node's parent is written once: a merged node is never merged again.
CREATE FUNCTION strata_nodes_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.parent_id IS NOT NULL AND NEW.parent_id IS DISTINCT FROM OLD.parent_id THEN
        RAISE EXCEPTION 'summary node % was already merged into node %', OLD.id, OLD.parent_id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF (NEW.session_id, NEW.level, NEW.first_seq, NEW.last_seq)
       IS DISTINCT FROM (OLD.session_id, OLD.level, OLD.first_seq, OLD.last_seq) THEN
        RAISE EXCEPTION 'a summary node keeps its place in the forest' USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER summary_nodes_guard BEFORE UPDATE ON summary_nodes
    FOR EACH ROW EXECUTE FUNCTION strata_nodes_guard();

CREATE TABLE agent_memories (
    id BIGSERIAL PRIMARY KEY,
    persona TEXT NOT NULL,
    category TEXT NOT NULL CHECK (category IN ('user_preferences', 'progress', 'memo')),
    key TEXT NOT NULL,
    title TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    folded TEXT NOT NULL,                  -- key, space, title, ': ', content, folded
    words TSVECTOR GENERATED ALWAYS AS
        (to_tsvector('english', replace(key, '_', ' ') || ' ' || title || ': ' || content)) STORED,
    UNIQUE (category, key, persona)
);

CREATE INDEX agent_memories_persona ON agent_memories(persona, updated_at);
CREATE INDEX agent_memories_folded ON agent_memories USING gin (folded gin_trgm_ops);
CREATE INDEX agent_memories_words ON agent_memories USING gin (words);

CREATE TABLE memory_updates (
    id BIGSERIAL PRIMARY KEY,
    persona TEXT NOT NULL,
    node_id BIGINT REFERENCES summary_nodes(id),
    category TEXT NOT NULL CHECK (category IN ('user_preferences', 'progress', 'memo')),
    key TEXT NOT NULL,
    title TEXT NOT NULL,
    content TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'proposed')),
    created_at DOUBLE PRECISION NOT NULL
);

CREATE INDEX memory_updates_pending ON memory_updates(id) WHERE state = 'pending';
CREATE UNIQUE INDEX memory_updates_proposed ON memory_updates(persona, key) WHERE state = 'proposed';

CREATE TABLE embedding_space (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    model TEXT NOT NULL,
    dimensions INTEGER NOT NULL CHECK (dimensions > 0)
);

CREATE TABLE embedding_backlog (
    kind TEXT NOT NULL CHECK (kind IN ('message', 'summary', 'memory')),
    item_id BIGINT NOT NULL,
    persona TEXT NOT NULL,
    session_id BIGINT,
    PRIMARY KEY (kind, item_id)
);

CREATE INDEX embedding_backlog_persona ON embedding_backlog(persona, session_id);

-- One row per chunk. The column has no fixed dimension (the model decides it); the HNSW
-- index is built over `embedding::vector(D)` once the embedding space names D
-- (`embeddings_hnsw_<D>`), and queries order by that same expression.
CREATE TABLE embeddings (
    kind TEXT NOT NULL CHECK (kind IN ('message', 'summary', 'memory')),
    item_id BIGINT NOT NULL,
    chunk INTEGER NOT NULL CHECK (chunk >= 0),
    persona TEXT NOT NULL,
    session_id BIGINT,
    at DOUBLE PRECISION NOT NULL,
    embedding VECTOR NOT NULL,
    PRIMARY KEY (kind, item_id, chunk)
);

CREATE INDEX embeddings_filter ON embeddings(persona, kind, session_id, at);

-- Every new row, and every summary or memory whose text changes, waits for a vector.
CREATE FUNCTION strata_backlog() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO embedding_backlog(kind, item_id, persona, session_id)
    VALUES (TG_ARGV[0], NEW.id, NEW.persona,
            CASE WHEN TG_ARGV[0] = 'memory' THEN NULL ELSE (to_jsonb(NEW) ->> 'session_id')::BIGINT END)
    ON CONFLICT DO NOTHING;
    RETURN NEW;
END $$;

CREATE TRIGGER messages_backlog AFTER INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION strata_backlog('message');
CREATE TRIGGER summaries_backlog AFTER INSERT OR UPDATE OF headline, body ON summary_nodes
    FOR EACH ROW EXECUTE FUNCTION strata_backlog('summary');
CREATE TRIGGER memories_backlog AFTER INSERT OR UPDATE OF key, title, content ON agent_memories
    FOR EACH ROW EXECUTE FUNCTION strata_backlog('memory');
