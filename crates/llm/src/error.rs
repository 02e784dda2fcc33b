//! The one error of a request to a chat-completions endpoint: transport, timeout, an error
//! status, or an answer that is not a completion. Callers map it into their own errors (the
//! compactor's `SummarizeError`, the chat loop's `ChatError`), keeping its source.

use std::time::Duration;

/// Why a request to an OpenAI-compatible endpoint ([`crate::ChatEndpoint`]) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The request did not complete (connection refused, reset, ...).
    #[error("request to {url} failed")]
    Http {
        /// The endpoint.
        url: String,
        /// What reqwest said.
        #[source]
        source: reqwest::Error,
    },
    /// No answer within the per-attempt timeout.
    #[error("{url} did not answer within {after:?}")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The timeout in force.
        after: Duration,
    },
    /// The server answered with an error status.
    #[error("{url} answered {status}: {body}")]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's own message (`error.message` of the OpenAI error shape) on one line, or
        /// the start of the body when it has none.
        body: String,
    },
    /// The answer was not what was asked for (not JSON, or not a chat completion).
    #[error("{url} sent a malformed completion: {reason}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What was wrong.
        reason: String,
    },
}

impl LlmError {
    /// True for failures worth retrying at once: 408, 429, server errors, timeouts, broken
    /// connections and unreadable replies. Another 4xx is not.
    pub fn is_transient(&self) -> bool {
        match self {
            LlmError::Http { .. } | LlmError::Timeout { .. } | LlmError::Malformed { .. } => true,
            LlmError::Status { status, .. } => *status == 408 || *status == 429 || *status >= 500,
        }
    }
}
