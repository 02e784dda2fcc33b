//! How long one request may take and how it is retried: the `[compactor.retry]` table, which
//! the summarizer and `strata chat` share.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Timeouts and retries of one chat-completions request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts per request, the first included (default 4).
    pub max_attempts: u32,
    /// Wait before the first retry, in milliseconds; doubled each retry, with jitter
    /// (default 500).
    pub initial_backoff_ms: u64,
    /// Longest wait between attempts, in milliseconds; also caps a server's `Retry-After`
    /// (default 30,000).
    pub max_backoff_ms: u64,
    /// Timeout of one HTTP attempt, in milliseconds (default 120,000).
    pub timeout_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy { max_attempts: 4, initial_backoff_ms: 500, max_backoff_ms: 30_000, timeout_ms: 120_000 }
    }
}

impl RetryPolicy {
    /// The per-attempt timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}
