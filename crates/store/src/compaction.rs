//! Store queries added for the compactor (kept apart so work on it does not collide with recall).
//!
//! The compactor plans over a light outline of a session (no message text), then reads only the
//! messages it needs: the chunk it summarizes, or the head and the uncovered ones it sends.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, params};
use serde::Serialize;

use crate::db::query_all;
use crate::error::Result;
use crate::store::Store;
use crate::types::{Message, MessageId, NodeId, Role, SessionId, from_unix};

/// A message without its text: what the compactor needs to plan cuts and budgets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MessageOutline {
    /// Database id.
    pub id: MessageId,
    /// 0-based position in its session.
    pub seq: i64,
    /// Who sent it.
    pub role: Role,
    /// Cached token count.
    pub token_count: u32,
    /// Never compacted.
    pub pinned: bool,
    /// The Level-0 node covering it, if any.
    pub summary_id: Option<NodeId>,
    /// When it was sent.
    pub created_at: DateTime<Utc>,
}

/// The outline of every message of a session, in seq order.
pub fn outline(conn: &Connection, session: SessionId) -> Result<Vec<MessageOutline>> {
    query_all(
        conn,
        "SELECT id, seq, role, token_count, pinned, summary_id, created_at
         FROM messages WHERE session_id = ?1 ORDER BY seq",
        [session],
        |row| {
            let role: String = row.get(2)?;
            Ok(MessageOutline {
                id: row.get(0)?,
                seq: row.get(1)?,
                role: role.parse().map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e))
                })?,
                token_count: row.get(3)?,
                pinned: row.get(4)?,
                summary_id: row.get(5)?,
                created_at: from_unix(row.get(6)?),
            })
        },
    )
}

/// The messages a context is built from: every message with seq below `head_end` (the head,
/// verbatim whatever covers it) and every uncovered message after it, in seq order.
pub fn context_messages(conn: &Connection, session: SessionId, head_end: i64) -> Result<Vec<Message>> {
    let sql = format!(
        "SELECT {} FROM messages m
         WHERE m.session_id = ?1 AND (m.seq < ?2 OR m.summary_id IS NULL) ORDER BY m.seq",
        Message::COLUMNS
    );
    query_all(conn, &sql, params![session, head_end], Message::from_row)
}

/// Reads that all see the database as it was at the first of them: one connection, one
/// deferred read transaction (in WAL mode, a snapshot). Assembly uses it so a compaction
/// committed by another process midway cannot show messages both verbatim and summarized.
#[derive(Debug)]
pub struct ConsistentReader<'a> {
    conn: &'a Connection,
}

impl ConsistentReader<'_> {
    /// The session with this id.
    pub fn session(&self, id: SessionId) -> Result<crate::Session> {
        crate::sessions::by_id(self.conn, id)
    }

    /// See [`Store::message_outline`].
    pub fn message_outline(&self, session: SessionId) -> Result<Vec<MessageOutline>> {
        outline(self.conn, session)
    }

    /// See [`Store::context_messages`].
    pub fn context_messages(&self, session: SessionId, head_end: i64) -> Result<Vec<Message>> {
        context_messages(self.conn, session, head_end)
    }

    /// See [`Store::roots`].
    pub fn roots(&self, session: SessionId, level: Option<crate::Level>) -> Result<Vec<crate::SummaryNode>> {
        crate::nodes::roots(self.conn, session, level)
    }

    /// See [`Store::memories`].
    pub fn memories(&self, persona: &str, category: Option<crate::Category>) -> Result<Vec<crate::Memory>> {
        crate::memories::list(self.conn, persona, category)
    }
}

impl Store {
    /// Runs `f` with reads that share one snapshot of the database (see [`ConsistentReader`]).
    pub fn read_consistent<T>(&self, f: impl FnOnce(&ConsistentReader<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.pool.get()?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Deferred)?;
        let value = f(&ConsistentReader { conn: &tx })?;
        tx.finish()?;
        Ok(value)
    }

    /// The outline (everything but the text) of every message of a session, in seq order.
    pub fn message_outline(&self, session: SessionId) -> Result<Vec<MessageOutline>> {
        self.read(|conn| outline(conn, session))
    }

    /// The head (seq below `head_end`) and every uncovered message after it, in seq order.
    pub fn context_messages(&self, session: SessionId, head_end: i64) -> Result<Vec<Message>> {
        self.read(|conn| context_messages(conn, session, head_end))
    }
}
