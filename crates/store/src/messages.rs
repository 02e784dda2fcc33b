//! Messages: append-only, numbered densely per session.

use std::ops::RangeInclusive;

use rusqlite::{Connection, OptionalExtension, params};

use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::types::FromRow;
use crate::types::{Message, MessageId, NewMessage, SessionId, to_unix};

/// What an append did.
#[derive(Debug, Default)]
pub struct Appended {
    /// One id per message given, in order: the new message's, or for a message whose
    /// `external_id` the session already held, the stored one's.
    pub ids: Vec<MessageId>,
    /// The ids of the messages this call stored (the others were already there).
    pub stored: Vec<MessageId>,
    /// The seq of the first message stored (the session's next seq when none was).
    pub first_seq: i64,
}

/// Appends messages to a session, numbering them after its last one.
///
/// A message whose `external_id` the session already holds is not stored again: its id is the
/// stored message's, if that is the same message (role and content); a key reused for another
/// message is an error, and nothing of the call is written.
///
/// Call inside an immediate transaction: the seq is read and written in one step, so two
/// writers never hand out the same number.
pub fn append(conn: &Connection, session: SessionId, messages: &[NewMessage]) -> Result<Appended> {
    for message in messages {
        message.validate()?;
    }
    let next_seq = next_seq(conn, session)?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO messages(session_id, seq, role, content, tool_calls, tool_call_id, name,
                              created_at, token_count, pinned, external_id, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    let mut appended =
        Appended { ids: Vec::with_capacity(messages.len()), stored: Vec::new(), first_seq: next_seq };
    let mut newest = f64::MIN;
    let mut seq = next_seq;
    for message in messages {
        if let Some(key) = &message.external_id
            && let Some(id) = stored_with_key(conn, session, key, message)?
        {
            appended.ids.push(id);
            continue;
        }
        let created_at = to_unix(message.created_at);
        newest = newest.max(created_at);
        insert.execute(params![
            session,
            seq,
            message.role.as_str(),
            message.content,
            // An empty array (some servers send one) is no tool call: stored as none, so it is
            // never replayed to a provider that would reject it.
            message
                .tool_calls
                .as_ref()
                .filter(|calls| calls.as_array().is_some_and(|a| !a.is_empty()))
                .map(|calls| calls.to_string()),
            message.tool_call_id,
            message.name,
            created_at,
            message.token_count,
            message.pinned,
            message.external_id,
            message.body,
        ])?;
        let id = MessageId(conn.last_insert_rowid());
        appended.ids.push(id);
        appended.stored.push(id);
        seq += 1;
    }
    if seq > next_seq {
        conn.prepare_cached("UPDATE sessions SET last_active_at = MAX(last_active_at, ?2) WHERE id = ?1")?
            .execute(params![session, newest])?;
    }
    Ok(appended)
}

/// The seq the session's next message gets.
fn next_seq(conn: &Connection, session: SessionId) -> Result<i64> {
    // A session whose every message was forgotten numbers on from its `first_seq`.
    Ok(conn
        .prepare_cached(
            "SELECT COALESCE(MAX(seq) + 1, (SELECT first_seq FROM sessions WHERE id = ?1), 0)
             FROM messages WHERE session_id = ?1",
        )?
        .query_row([session], |row| row.get(0))?)
}

/// The id of the message of `session` stored under `key`, if any; an error if that message is
/// not `message` (a key reused for something else is a caller's bug, not a retry).
fn stored_with_key(
    conn: &Connection,
    session: SessionId,
    key: &str,
    message: &NewMessage,
) -> Result<Option<MessageId>> {
    let stored: Option<(MessageId, String, String)> = conn
        .prepare_cached("SELECT id, role, content FROM messages WHERE session_id = ?1 AND external_id = ?2")?
        .query_row(params![session, key], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .optional()?;
    match stored {
        Some((id, role, content)) if role == message.role.as_str() && content == message.content => {
            Ok(Some(id))
        }
        Some((id, ..)) => Err(Error::invalid(
            "external_id",
            format!("{key:?} already names message {id} of this session, which is a different message"),
        )),
        None => Ok(None),
    }
}

/// One message by id.
pub fn by_id(conn: &Connection, id: MessageId) -> Result<Message> {
    let sql = format!("SELECT {} FROM messages m WHERE m.id = ?1", Message::COLUMNS);
    conn.prepare_cached(&sql)?
        .query_row([id], Message::from_row)
        .optional()?
        .ok_or_else(|| Error::NotFound(Missing::Message(id)))
}

/// The messages of a session whose seq lies in `seqs`, in order.
pub fn range(conn: &Connection, session: SessionId, seqs: RangeInclusive<i64>) -> Result<Vec<Message>> {
    let sql = format!(
        "SELECT {} FROM messages m WHERE m.session_id = ?1 AND m.seq BETWEEN ?2 AND ?3 ORDER BY m.seq",
        Message::COLUMNS
    );
    query_all(conn, &sql, params![session, seqs.start(), seqs.end()], Message::from_row)
}

/// The messages a Level-0 node covers, in order.
pub fn covered_by(conn: &Connection, node: crate::types::NodeId) -> Result<Vec<Message>> {
    let sql = format!("SELECT {} FROM messages m WHERE m.summary_id = ?1 ORDER BY m.seq", Message::COLUMNS);
    query_all(conn, &sql, [node], Message::from_row)
}

/// Sets or clears the pin of a message. A message already folded into a summary cannot be
/// pinned: it is no longer in the context to keep.
#[cfg(any(test, feature = "test-support"))]
pub fn set_pinned(conn: &Connection, id: MessageId, pinned: bool) -> Result<()> {
    let message = by_id(conn, id)?;
    if pinned && message.summary_id.is_some() {
        return Err(Error::invalid("pin", format!("message {id} is already compacted")));
    }
    conn.prepare_cached("UPDATE messages SET pinned = ?2 WHERE id = ?1")?.execute(params![id, pinned])?;
    Ok(())
}
