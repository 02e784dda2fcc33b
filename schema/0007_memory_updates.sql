-- strata schema, version 7: facts a summarizer found, on their way to long-term memory.
--
-- A summarizer returns, beside a node's text, the facts worth keeping (`memory_updates`). They
-- are queued here in the same transaction that writes the node, so a crash never writes the
-- one without the other; `Engine` then settles each row through the checks of `save_memory`
-- (size, key spelling, near-duplicate keys) and deletes it. A fact about the user's
-- preferences is never written as one: its row stays here as a *proposal* until the user
-- accepts it (`strata memory accept`, a `user_preferences` write by the user) or rejects it.
-- `role` is the persona, as in `agent_memories`.
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
);
CREATE INDEX memory_updates_pending ON memory_updates(id) WHERE state = 'pending';
-- One open proposal per preference key and persona: a later one replaces it.
CREATE UNIQUE INDEX memory_updates_proposed ON memory_updates(role, key) WHERE state = 'proposed';
