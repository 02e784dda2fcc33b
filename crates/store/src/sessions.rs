//! Sessions: get-or-create by key, bound to one persona, and what the browsing tools read of
//! them (a persona's sessions with their counts, a session's newest uncovered messages).

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::types::FromRow;
use crate::types::{Message, Session, SessionId, from_unix, to_unix};
pub(crate) use strata_seam::SessionOverview;
pub(crate) use strata_seam::backend::{
    MAX_PERSONA_CHARS, validate_name, validate_persona, validate_session_key,
};

/// Returns the session with this key, creating it for `persona` if it does not exist.
/// A key already bound to another persona is refused: personas never share a conversation.
pub fn get_or_create(conn: &Connection, key: &str, persona: &str, now: DateTime<Utc>) -> Result<Session> {
    validate_session_key(key)?;
    // An existing session is found by any name it was created with (older strata allowed
    // more); a new one gets a name that is safe in front of the model.
    validate_name("persona", persona, MAX_PERSONA_CHARS)?;
    if let Some(session) = by_key(conn, key)? {
        if session.persona != persona {
            return Err(Error::PersonaMismatch {
                key: key.to_owned(),
                existing: session.persona,
                requested: persona.to_owned(),
            });
        }
        return Ok(session);
    }
    validate_persona(persona)?;
    let now = to_unix(now);
    conn.prepare_cached(
        "INSERT INTO sessions(key, role, created_at, last_active_at) VALUES (?1, ?2, ?3, ?3)",
    )?
    .execute(params![key, persona, now])?;
    by_id(conn, SessionId(conn.last_insert_rowid()))
}

/// The session with this key, if any.
pub fn by_key(conn: &Connection, key: &str) -> Result<Option<Session>> {
    let sql = format!("SELECT {} FROM sessions WHERE key = ?1", Session::COLUMNS);
    Ok(conn.prepare_cached(&sql)?.query_row([key], Session::from_row).optional()?)
}

/// The session with this id.
pub fn by_id(conn: &Connection, id: SessionId) -> Result<Session> {
    let sql = format!("SELECT {} FROM sessions WHERE id = ?1", Session::COLUMNS);
    conn.prepare_cached(&sql)?
        .query_row([id], Session::from_row)
        .optional()?
        .ok_or_else(|| Error::NotFound(Missing::Session(id)))
}

/// All sessions of a persona, oldest first; every persona when `persona` is `None`.
pub fn list(conn: &Connection, persona: Option<&str>) -> Result<Vec<Session>> {
    let sql = format!(
        "SELECT {} FROM sessions WHERE ?1 IS NULL OR role = ?1 ORDER BY created_at, id",
        Session::COLUMNS
    );
    query_all(conn, &sql, [persona], Session::from_row)
}

/// The sessions of a persona with their message counts, oldest first.
pub(crate) fn overview(conn: &Connection, persona: &str) -> Result<Vec<SessionOverview>> {
    query_all(
        conn,
        "SELECT s.id, s.key, s.created_at, s.last_active_at,
                (SELECT count(*) FROM messages m WHERE m.session_id = s.id),
                (SELECT count(*) FROM messages m WHERE m.session_id = s.id AND m.summary_id IS NULL)
         FROM sessions s WHERE s.role = ?1 ORDER BY s.created_at, s.id",
        [persona],
        |row| {
            Ok(SessionOverview {
                id: row.get(0)?,
                key: row.get(1)?,
                created_at: from_unix(row.get(2)?),
                last_active_at: from_unix(row.get(3)?),
                messages: row.get::<_, i64>(4)? as u64,
                uncompacted_messages: row.get::<_, i64>(5)? as u64,
            })
        },
    )
}

/// The newest `limit` messages of a session that no summary covers yet, oldest first.
pub(crate) fn recent_uncovered(conn: &Connection, session: SessionId, limit: usize) -> Result<Vec<Message>> {
    let sql = format!(
        "SELECT * FROM (SELECT {} FROM messages m WHERE m.session_id = ?1 AND m.summary_id IS NULL
         ORDER BY m.seq DESC LIMIT ?2) ORDER BY seq",
        Message::COLUMNS
    );
    query_all(conn, &sql, params![session, limit as i64], Message::from_row)
}
