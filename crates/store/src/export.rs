//! Every stored field of a persona's or a session's messages, for an export that an import
//! gives back unchanged.
//!
//! [`Message`] shows `created_at` to the millisecond and leaves out the external id (the
//! caller's idempotency key): both are what a lossless export needs, so this read returns the
//! stored seconds and the key beside the row. One statement reads everything, so the export is
//! one consistent snapshot even while other processes append.

use rusqlite::{Connection, params};

use crate::db::query_all;
use crate::error::Result;
use crate::types::FromRow;
use crate::types::Message;
pub(crate) use strata_seam::transfer::{ExportScope, ExportedMessage};

/// The messages in scope, session by session (oldest session first), each in seq order.
pub(crate) fn messages(conn: &Connection, scope: ExportScope<'_>) -> Result<Vec<ExportedMessage>> {
    let (column, value) = match scope {
        ExportScope::Persona(persona) => ("s.role", persona),
        ExportScope::Session(key) => ("s.key", key),
    };
    // `column` is one of two fixed names, never user text; the value is bound.
    let sql = format!(
        "SELECT {}, s.key, s.role, m.created_at, m.external_id
         FROM messages m JOIN sessions s ON s.id = m.session_id
         WHERE {column} = ?1 ORDER BY m.session_id, m.seq",
        Message::COLUMNS
    );
    query_all(conn, &sql, params![value], |row| {
        Ok(ExportedMessage {
            message: Message::from_row(row)?,
            session_key: row.get(13)?,
            persona: row.get(14)?,
            created_at_seconds: row.get(15)?,
            external_id: row.get(16)?,
        })
    })
}
