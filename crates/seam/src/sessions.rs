//! The rules of sessions and personas, and a persona's sessions at a glance
//! ([`SessionOverview`]).

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::types::SessionId;

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

/// A session key: one line of at most 256 characters.
pub fn validate_session_key(key: &str) -> Result<()> {
    validate_name("session key", key, 256)
}

/// The rule of a name that goes to the model or into a key (a persona, a speaker, a call id):
/// one line of 1 to `max_chars` characters, no control characters.
pub fn validate_name(field: &'static str, value: &str, max_chars: usize) -> Result<()> {
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

/// A session as the persona's history overview shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionOverview {
    /// Database id.
    pub id: SessionId,
    /// The caller's key.
    pub key: String,
    /// When the session was created.
    pub created_at: DateTime<Utc>,
    /// Time of its newest message.
    pub last_active_at: DateTime<Utc>,
    /// How many messages it holds.
    pub messages: u64,
    /// How many of them no summary covers yet.
    pub uncompacted_messages: u64,
}
