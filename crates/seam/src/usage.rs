//! The LLM calls recorded for usage accounting ([`LlmCall`]), summed per day ([`UsageDay`]).

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::metrics::CallTotals;

/// One call to an LLM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmCall {
    /// When it was made.
    pub at: DateTime<Utc>,
    /// `summary` or `chat`.
    pub purpose: String,
    /// Who called: the summarizer's name, or `chat`.
    pub caller: String,
    /// The model asked.
    pub model: String,
    /// Whether an answer came back (a summary may still be refused by the quality gate).
    pub ok: bool,
    /// Prompt tokens, as the server reported them (`usage.prompt_tokens`).
    pub prompt_tokens: Option<u64>,
    /// Completion tokens, as the server reported them.
    pub completion_tokens: Option<u64>,
    /// strata's own count of what it sent (the sources of a summary; the context of a chat).
    pub counted_prompt_tokens: Option<u64>,
    /// strata's own count of what came back.
    pub counted_completion_tokens: Option<u64>,
    /// How long the call took, in milliseconds.
    pub millis: u64,
}

/// The calls of one day, purpose, caller and model, summed (`strata stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageDay {
    /// The day (UTC), `YYYY-MM-DD`.
    pub day: String,
    /// The calls, as `strata metrics` sums them over all time.
    pub totals: CallTotals,
    /// Prompt tokens strata counted.
    pub counted_prompt_tokens: u64,
    /// Completion tokens strata counted.
    pub counted_completion_tokens: u64,
}

/// Checks calls before they are recorded: a purpose is `summary` or `chat`.
pub fn validate(calls: &[LlmCall]) -> Result<()> {
    match calls.iter().find(|call| !matches!(call.purpose.as_str(), "summary" | "chat")) {
        Some(call) => Err(Error::invalid("purpose", format!("{:?} is not summary or chat", call.purpose))),
        None => Ok(()),
    }
}
