//! Errors of the compactor and of the summarizers.

use std::time::Duration;

use strata_seam::SessionId;

use strata_llm::LlmError;

use crate::summarizer::RejectReason;

/// A specialized `Result` for compactor operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while compacting or assembling a context.
///
/// A summarizer that is down is not an error of [`crate::Compactor::compact`]: it is the typed
/// outcome [`crate::Outcome::SummarizerDown`]. Errors here are the ones a caller must act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration breaks a rule; nothing was done with it.
    #[error("invalid compactor setting {field}: {reason}")]
    Config {
        /// The offending field, as named in the TOML file.
        field: &'static str,
        /// Why, in words a user can act on.
        reason: String,
    },
    /// The store refused or failed.
    #[error("store error")]
    Store(#[from] strata_seam::Error),
    /// Even the protected head and tail do not fit the budget: sending them would overflow the
    /// model's window, so no context is produced.
    #[error(
        "session {session}: the protected head and tail alone need {needed} tokens but the budget is \
         {budget} (context_window_tokens - reserve_tokens); lower head_messages or tail_turns, or raise the window"
    )]
    ContextTooLarge {
        /// The session.
        session: SessionId,
        /// Tokens of head + tail (+ the reply priming).
        needed: u32,
        /// `context_window_tokens - reserve_tokens`.
        budget: u32,
    },
    /// The database's token counts were made with another encoding than the one configured:
    /// mixing them would make every budget wrong.
    #[error(
        "the database counts tokens with {database}, the configuration with {}; set [compactor] \
         encoding = \"{database}\" (or STRATA_COMPACTOR_ENCODING) to use it with another model",
        configured.as_str()
    )]
    EncodingMismatch {
        /// The encoding recorded in the database.
        database: String,
        /// The encoding the configuration implies.
        configured: crate::tokens::Encoding,
    },
    /// A message is larger than `[compactor] max_message_bytes`; nothing was stored.
    #[error(
        "the message is {bytes} bytes, over [compactor] max_message_bytes = {limit} \
         (STRATA_COMPACTOR_MAX_MESSAGE_BYTES); store a large output as a file and send its path, or raise the setting"
    )]
    MessageTooLarge {
        /// Bytes of the message as sent (its body), or of its content, tool calls, name and
        /// call id.
        bytes: u64,
        /// The setting.
        limit: u32,
    },
    /// A blocking store task panicked or was cancelled.
    #[error("a store task did not finish")]
    Join(#[source] tokio::task::JoinError),
}

impl From<LlmError> for SummarizeError {
    fn from(error: LlmError) -> SummarizeError {
        match error {
            LlmError::Http { source, .. } => SummarizeError::Transport(source),
            LlmError::Timeout { after, .. } => SummarizeError::Timeout(after),
            LlmError::Status { status, body, .. } => SummarizeError::Status { status, body },
            LlmError::Malformed { reason, .. } => SummarizeError::Malformed(reason),
            // A failure strata-llm learns to tell apart later: unreadable, so retried.
            other => SummarizeError::Malformed(other.to_string()),
        }
    }
}

/// Why one summarizer call failed. Every variant is retryable by the caller at a later time;
/// the ones marked transient are retried inside the call already.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizeError {
    /// The HTTP request could not be sent or its response not read.
    #[error("request to the summarizer failed")]
    Transport(#[source] reqwest::Error),
    /// No response within the configured timeout.
    #[error("the summarizer did not answer within {0:?}")]
    Timeout(Duration),
    /// The server answered with an error status.
    #[error("the summarizer answered HTTP {status}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The start of the response body, for the log.
        body: String,
    },
    /// The reply could not be understood as a summary.
    #[error("the summarizer's reply is not a valid summary: {0}")]
    Malformed(String),
    /// The reply parsed, but the quality gate refused it (empty, oversized, not compressed
    /// enough, a near-copy of its sources).
    #[error("summary rejected ({}): {detail}", reason.as_str())]
    Rejected {
        /// Which rule it broke.
        reason: RejectReason,
        /// The figures, for the log.
        detail: String,
        /// What was wrong and what to do instead, in words and figures a model can act on:
        /// the note a retry of the same sources sends.
        advice: String,
    },
}

impl SummarizeError {
    /// True for failures worth retrying at once: rate limits, server errors, timeouts, broken
    /// connections and unreadable replies. A 4xx other than 408/429 is not.
    pub fn is_transient(&self) -> bool {
        match self {
            SummarizeError::Transport(_) | SummarizeError::Timeout(_) | SummarizeError::Malformed(_) => true,
            SummarizeError::Status { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            SummarizeError::Rejected { .. } => false,
        }
    }

    /// The reason a gate rejection or an unreadable reply is counted under; `None` for
    /// failures to reach the summarizer.
    pub fn reject_reason(&self) -> Option<RejectReason> {
        match self {
            SummarizeError::Rejected { reason, .. } => Some(*reason),
            SummarizeError::Malformed(_) => Some(RejectReason::Malformed),
            _ => None,
        }
    }
}
