-- Schema 4: appends, imports and summarizer calls that can be retried.
--
-- A bot that retries an append after a timeout, or a user who re-runs an import whose
-- confirmation was lost, must not store a message twice.

-- An optional key per message, unique within its session: `"id"` on an ingest line, or the
-- idempotency key of `Engine::append`. A second append with the same key is the same message.
ALTER TABLE messages ADD COLUMN external_id TEXT;
CREATE UNIQUE INDEX messages_external_id ON messages(session_id, external_id)
    WHERE external_id IS NOT NULL;

-- One row per session per ingested file: a digest chained over the file's lines for that
-- session (in order), how many lines that is, and where they landed. Re-running the file, or a
-- longer version of it, skips the lines a recorded run already stored.
CREATE TABLE ingests (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    digest TEXT NOT NULL,
    lines INTEGER NOT NULL CHECK (lines > 0),
    first_seq INTEGER NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (session_id, digest)
);

-- Consecutive failed summarizer calls per session. Kept in the file rather than in a process,
-- so `strata compact` run again and again against a dead server reaches the raw-archive
-- fallback, as a long-running bot does.
ALTER TABLE sessions ADD COLUMN summarizer_failures INTEGER NOT NULL DEFAULT 0;
