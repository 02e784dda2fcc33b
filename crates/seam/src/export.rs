//! A lossless export of a persona's or a session's messages.

use crate::types::Message;

/// One stored message with everything a lossless export writes.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportedMessage {
    /// The key of its session.
    pub session_key: String,
    /// The persona of its session.
    pub persona: String,
    /// The row.
    pub message: Message,
    /// `created_at` exactly as stored (UNIX seconds; [`Message::created_at`] is rounded to the
    /// millisecond).
    pub created_at_seconds: f64,
    /// The caller's id of the message (ingest's `"id"`, the engine's idempotency key).
    pub external_id: Option<String>,
}

/// Which messages to export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportScope<'a> {
    /// Every session of this persona.
    Persona(&'a str),
    /// The session with this key.
    Session(&'a str),
}
