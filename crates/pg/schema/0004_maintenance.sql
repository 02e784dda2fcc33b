-- strata on PostgreSQL, schema 4: what a fleet needs to bring transcripts in and take a
-- person out (issue 41). `ingests` records each imported run of a transcript, as the SQLite
-- file does, so a re-run adds nothing; `forgets` is the audit of erasures (the request, the
-- counts, the time, never the content). While a forget's row is open in its own transaction,
-- and only then, the guards let messages be deleted and nodes be reshaped; a deferred check
-- refuses to commit a transaction that leaves its row open.

CREATE TABLE ingests (
    id BIGSERIAL PRIMARY KEY,
    session_id BIGINT NOT NULL REFERENCES sessions(id),
    digest TEXT NOT NULL,
    lines BIGINT NOT NULL CHECK (lines > 0),
    first_seq BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    UNIQUE (session_id, digest)
);

CREATE TABLE forgets (
    id BIGSERIAL PRIMARY KEY,
    command TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('persona', 'session', 'session_before')),
    persona TEXT,
    session_key TEXT,
    before DOUBLE PRECISION,
    sessions BIGINT NOT NULL DEFAULT 0,
    messages BIGINT NOT NULL DEFAULT 0,
    summaries BIGINT NOT NULL DEFAULT 0,
    rebuilt BIGINT NOT NULL DEFAULT 0,
    memories BIGINT NOT NULL DEFAULT 0,
    memory_versions BIGINT NOT NULL DEFAULT 0,
    proposals BIGINT NOT NULL DEFAULT 0,
    vectors BIGINT NOT NULL DEFAULT 0,
    ingests BIGINT NOT NULL DEFAULT 0,
    started_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    -- The erasing transaction while it runs (txid_current()); NULL once it has finished.
    open_in BIGINT
);

CREATE FUNCTION strata_forgetting() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM forgets WHERE open_in = txid_current())
$$;

CREATE FUNCTION strata_forget_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM forgets WHERE id = NEW.id AND open_in IS NOT NULL) THEN
        RAISE EXCEPTION 'forget % was left unfinished', NEW.id USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER forgets_closed AFTER INSERT ON forgets
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION strata_forget_closed();

CREATE OR REPLACE FUNCTION strata_messages_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'messages are append-only' USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN
        IF strata_forgetting() THEN
            RETURN OLD;
        END IF;
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

-- A forget dissolves the nodes above forgotten text (their children become roots) and
-- rewrites a Level-0 node over the messages it keeps: the only reshaping a node ever sees.
CREATE OR REPLACE FUNCTION strata_nodes_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF strata_forgetting() THEN
        RETURN NEW;
    END IF;
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
