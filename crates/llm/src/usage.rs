//! What each LLM call cost, as the server reported it: a summarizer that calls a server logs
//! every HTTP attempt here (the compactor's `Summarizer::usage_log`), and the compactor, which
//! owns the store, drains the log after each summary and records the calls beside its own
//! token counts (`Backend::record_llm_calls`). [`ChatClient`](crate::ChatClient) logs its calls
//! the same way, for the chat loop to record.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;

/// One HTTP call to a chat-completions server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedCall {
    /// The model asked.
    pub model: String,
    /// Whether a usable answer came back.
    pub ok: bool,
    /// `usage.prompt_tokens` of the response, when the server sent it.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens` of the response, when the server sent it.
    pub completion_tokens: Option<u64>,
    /// How long the call took.
    pub elapsed: Duration,
}

impl ReportedCall {
    /// A call that got `response` (its usage read from it) after `elapsed`.
    pub fn answered(model: &str, response: &Value, ok: bool, elapsed: Duration) -> ReportedCall {
        let tokens = |name: &str| response.pointer(&format!("/usage/{name}")).and_then(Value::as_u64);
        ReportedCall {
            model: model.to_owned(),
            ok,
            prompt_tokens: tokens("prompt_tokens"),
            completion_tokens: tokens("completion_tokens"),
            elapsed,
        }
    }

    /// A call that got no answer (an HTTP error, a timeout).
    pub fn failed(model: &str, elapsed: Duration) -> ReportedCall {
        ReportedCall {
            model: model.to_owned(),
            ok: false,
            prompt_tokens: None,
            completion_tokens: None,
            elapsed,
        }
    }
}

/// The calls made and not yet recorded.
#[derive(Debug, Default)]
pub struct UsageLog {
    calls: Mutex<Vec<ReportedCall>>,
}

impl UsageLog {
    /// Logs a call.
    pub fn push(&self, call: ReportedCall) {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).push(call);
    }

    /// Takes every call logged so far.
    pub fn drain(&self) -> Vec<ReportedCall> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(PoisonError::into_inner))
    }
}
