-- The message as the caller sent it (schema 13 of the SQLite file; issue 43): JSON text, NULL
-- when the other columns say it all. TEXT, not JSONB, so it comes back byte for byte.
ALTER TABLE messages ADD COLUMN body TEXT;
