//! Sessions: get-or-create by key, bound to one persona.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::types::{Session, SessionId, to_unix};

/// The longest persona name.
pub const MAX_PERSONA_CHARS: usize = 64;

/// Checks a persona name a session or memory is created for: 1 to 64 letters, digits and
/// `-_.:@+`. A persona's name reaches the model inside strata's own instructions (the sync
/// guidelines: "You are playing the active persona role: {name}"), where it is not fenced, so
/// it can hold no space, bracket or line break with which to write an instruction of its own.
pub fn validate_persona(persona: &str) -> Result<()> {
    validate_name("persona", persona, MAX_PERSONA_CHARS)?;
    if let Some(bad) = persona.chars().find(|c| !c.is_alphanumeric() && !"-_.:@+".contains(*c)) {
        return Err(Error::invalid(
            "persona",
            format!("{persona:?} contains {bad:?}; a persona name is letters, digits and -_.:@+ only"),
        ));
    }
    Ok(())
}

pub(crate) fn validate_name(field: &'static str, value: &str, max_chars: usize) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.chars().count() > max_chars {
        return Err(Error::invalid(field, format!("longer than {max_chars} characters")));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::invalid(field, "contains control characters"));
    }
    Ok(())
}

/// Returns the session with this key, creating it for `persona` if it does not exist.
/// A key already bound to another persona is refused: personas never share a conversation.
pub fn get_or_create(conn: &Connection, key: &str, persona: &str, now: DateTime<Utc>) -> Result<Session> {
    validate_name("session key", key, 256)?;
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
