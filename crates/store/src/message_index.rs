//! The cursor of the message search indexes (schema 8): messages are indexed after they are
//! appended, in batches, and every search brings the indexes up to date first.

use rusqlite::{Connection, params};

use crate::error::Result;

/// Messages not yet in the search indexes.
pub fn unindexed(conn: &Connection) -> Result<u64> {
    let count: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM messages
             WHERE id > (SELECT indexed_through FROM message_index WHERE id = 1)",
        )?
        .query_row([], |row| row.get(0))?;
    Ok(count as u64)
}

/// True when every message is in the search indexes: one indexed lookup, whatever waits.
pub fn caught_up(conn: &Connection) -> Result<bool> {
    let waiting: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM messages
                            WHERE id > (SELECT indexed_through FROM message_index WHERE id = 1))",
        )?
        .query_row([], |row| row.get(0))?;
    Ok(!waiting)
}

/// Indexes up to `limit` of the oldest unindexed messages (both the trigram and the word
/// index) and moves the cursor past them; returns how many. Call in an immediate transaction.
pub fn index(conn: &Connection, limit: usize) -> Result<usize> {
    let cursor: i64 = conn
        .prepare_cached("SELECT indexed_through FROM message_index WHERE id = 1")?
        .query_row([], |row| row.get(0))?;
    let last: Option<i64> = conn
        .prepare_cached("SELECT max(id) FROM (SELECT id FROM messages WHERE id > ?1 ORDER BY id LIMIT ?2)")?
        .query_row(params![cursor, limit as i64], |row| row.get(0))?;
    let Some(last) = last else { return Ok(0) };
    conn.prepare_cached(
        "INSERT INTO messages_fts(rowid, content)
         SELECT id, content FROM messages WHERE id > ?1 AND id <= ?2 ORDER BY id",
    )?
    .execute(params![cursor, last])?;
    // A message is indexed as `speaker: text`, since questions name people.
    let indexed = conn
        .prepare_cached(
            "INSERT INTO messages_words(rowid, text)
             SELECT id, coalesce(name, role) || ': ' || content FROM messages
             WHERE id > ?1 AND id <= ?2 ORDER BY id",
        )?
        .execute(params![cursor, last])?;
    conn.prepare_cached("UPDATE message_index SET indexed_through = ?1 WHERE id = 1")?.execute([last])?;
    Ok(indexed)
}
