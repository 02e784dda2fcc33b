//! Outlines and the live part of a session: message outlines (no text), the uncovered
//! messages a context is built from, one-snapshot reads, and the count of rows they return.
//!
//! The compactor plans over a light outline of a session (no message text), then reads only the
//! messages it needs: the chunk it summarizes, or the head and the uncovered ones it sends.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::query_all;
use crate::error::Result;
use crate::store::Store;
use crate::types::FromRow;
use crate::types::{Category, Level, Memory, Message, Session, SessionId, SummaryNode, from_unix};
pub(crate) use strata_seam::MessageOutline;
pub(crate) use strata_seam::backend::{CompactionState, Snapshot};

/// The outline of every message of a session, in seq order.
pub fn outline(conn: &Connection, session: SessionId) -> Result<Vec<MessageOutline>> {
    query_all(
        conn,
        "SELECT id, seq, role, token_count, pinned, summary_id, created_at
         FROM messages WHERE session_id = ?1 ORDER BY seq",
        [session],
        outline_from_row,
    )
}

/// The outline of the part of a session that is not summarized: the messages with seq below
/// `head` (the head, covered or not) and every uncovered message, in seq order. Its cost
/// follows the uncovered messages (a partial index), not the history.
pub fn live_outline(conn: &Connection, session: SessionId, head: i64) -> Result<Vec<MessageOutline>> {
    let mut rows = query_all(
        conn,
        "SELECT id, seq, role, token_count, pinned, summary_id, created_at
         FROM messages WHERE session_id = ?1 AND seq < ?2 ORDER BY seq",
        params![session, head],
        outline_from_row,
    )?;
    rows.extend(query_all(
        conn,
        "SELECT id, seq, role, token_count, pinned, summary_id, created_at
         FROM messages INDEXED BY messages_uncovered
         WHERE session_id = ?1 AND summary_id IS NULL AND seq >= ?2 ORDER BY seq",
        params![session, head],
        outline_from_row,
    )?);
    Ok(rows)
}

fn outline_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<MessageOutline> {
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
}

/// The messages a context is built from: every message with seq below `head_end` (the head,
/// verbatim whatever covers it) and every uncovered message after it, in seq order.
pub fn context_messages(conn: &Connection, session: SessionId, head_end: i64) -> Result<Vec<Message>> {
    // Two queries rather than one with `OR`: each uses its index, so the summarized history
    // is never scanned.
    let head = format!(
        "SELECT {} FROM messages m WHERE m.session_id = ?1 AND m.seq < ?2 ORDER BY m.seq",
        Message::COLUMNS
    );
    let rest = format!(
        "SELECT {} FROM messages m INDEXED BY messages_uncovered
         WHERE m.session_id = ?1 AND m.summary_id IS NULL AND m.seq >= ?2 ORDER BY m.seq",
        Message::COLUMNS
    );
    let mut messages = query_all(conn, &head, params![session, head_end], Message::from_row)?;
    messages.extend(query_all(conn, &rest, params![session, head_end], Message::from_row)?);
    Ok(messages)
}

/// Adds the number of rows read to `counter`.
pub(crate) fn count<T>(counter: &AtomicU64, rows: Result<Vec<T>>) -> Result<Vec<T>> {
    if let Ok(rows) = &rows {
        counter.fetch_add(rows.len() as u64, Ordering::Relaxed);
    }
    rows
}

/// Reads that all see the database as it was at the first of them: one connection, one
/// deferred read transaction (in WAL mode, a snapshot). Assembly uses it so a compaction
/// committed by another process midway cannot show messages both verbatim and summarized.
#[derive(Debug)]
pub(crate) struct ConsistentReader<'a> {
    conn: &'a Connection,
    rows_read: &'a AtomicU64,
}

impl ConsistentReader<'_> {
    fn counted<T>(&self, rows: Result<Vec<T>>) -> Result<Vec<T>> {
        count(self.rows_read, rows)
    }
}

impl Snapshot for ConsistentReader<'_> {
    fn session(&self, id: SessionId) -> Result<Session> {
        crate::sessions::by_id(self.conn, id)
    }

    fn live_outline(&self, session: SessionId, head: i64) -> Result<Vec<MessageOutline>> {
        self.counted(live_outline(self.conn, session, head))
    }

    fn context_messages(&self, session: SessionId, head_end: i64) -> Result<Vec<Message>> {
        self.counted(context_messages(self.conn, session, head_end))
    }

    fn roots(&self, session: SessionId, level: Option<Level>) -> Result<Vec<SummaryNode>> {
        self.counted(crate::forest::roots(self.conn, session, level))
    }

    fn memories(&self, persona: &str, category: Option<Category>) -> Result<Vec<Memory>> {
        crate::agent_memories::list(self.conn, persona, category)
    }

    fn message_time(&self, session: SessionId, seq: i64) -> Result<Option<DateTime<Utc>>> {
        let time: Option<f64> = self
            .conn
            .prepare_cached("SELECT created_at FROM messages WHERE session_id = ?1 AND seq = ?2")?
            .query_row(params![session, seq], |row| row.get(0))
            .optional()?;
        Ok(time.map(from_unix))
    }

    fn next_seq(&self, session: SessionId) -> Result<i64> {
        Ok(self
            .conn
            .prepare_cached("SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE session_id = ?1")?
            .query_row(params![session], |row| row.get(0))?)
    }

    fn folded_before(&self, session: SessionId, seqs: Range<i64>, tokens: u64) -> Result<Vec<Message>> {
        let sql = format!(
            "SELECT {} FROM messages m WHERE m.session_id = ?1 AND m.seq >= ?2 AND m.seq < ?3 ORDER BY m.seq DESC",
            Message::COLUMNS
        );
        let mut statement = self.conn.prepare_cached(&sql)?;
        let mut rows = statement.query(params![session, seqs.start, seqs.end])?;
        let (mut messages, mut spent) = (Vec::new(), 0u64);
        while spent <= tokens
            && let Some(row) = rows.next()?
        {
            let message = Message::from_row(row)?;
            spent += u64::from(message.token_count);
            messages.push(message);
        }
        messages.reverse();
        self.counted(Ok(messages))
    }

    fn has_request_before(&self, session: SessionId, seq: i64) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM messages WHERE session_id = ?1 AND seq < ?2 AND role = 'user')",
            )?
            .query_row(params![session, seq], |row| row.get(0))?)
    }

    fn compaction_state(&self, session: SessionId) -> Result<CompactionState> {
        crate::forest::compaction_state(self.conn, session)
    }
}

impl Store {
    /// Runs `f` with reads that share one snapshot of the database (see [`ConsistentReader`]).
    pub(crate) fn read_consistent<T>(&self, f: impl FnOnce(&ConsistentReader<'_>) -> Result<T>) -> Result<T> {
        self.read_snapshot(|conn| f(&ConsistentReader { conn, rows_read: &self.rows_read }))
    }

    /// How many message and node rows the planning reads of this store (outlines, message
    /// ranges, roots, context messages) have returned since it was opened, in every clone.
    /// Tests and benches use it to check that a cost follows the new messages, not the
    /// history; timings on a shared machine could not.
    #[cfg(any(test, feature = "test-support"))]
    pub fn rows_read(&self) -> u64 {
        self.rows_read.load(Ordering::Relaxed)
    }

    /// The head (seq below `head_end`) and every uncovered message after it, in seq order.
    #[cfg(any(test, feature = "test-support"))]
    pub fn context_messages(&self, session: SessionId, head_end: i64) -> Result<Vec<Message>> {
        count(&self.rows_read, self.read(|conn| context_messages(conn, session, head_end)))
    }
}
