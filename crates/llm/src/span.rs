//! The span of one model call, named and attributed as OpenTelemetry's GenAI semantic
//! conventions say (`chat {model}`, kind `client`, `gen_ai.operation.name`,
//! `gen_ai.request.model`, `gen_ai.usage.input_tokens` and `output_tokens` as the server
//! reported them, `error.type` when it failed). It carries no message text. Without a
//! subscriber that wants it, the span is disabled and none of its fields is computed.

use serde_json::Value;
use tracing::Span;
use tracing::field::Empty;

use crate::error::LlmError;

/// The span of one chat completion of `model` at `url`, over all its retries. Every caller
/// speaks the OpenAI protocol, hence the provider name.
pub fn chat_span(model: &str, url: &str) -> Span {
    let span = tracing::info_span!(
        "chat",
        otel.name = format!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = "openai",
        gen_ai.request.model = model,
        server.address = Empty,
        server.port = Empty,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
    );
    if !span.is_disabled()
        && let Ok(parsed) = reqwest::Url::parse(url)
    {
        if let Some(host) = parsed.host_str() {
            span.record("server.address", host);
        }
        if let Some(port) = parsed.port_or_known_default() {
            span.record("server.port", i64::from(port));
        }
    }
    span
}

/// Records what a completion `response` reports: the model that answered and the tokens.
pub fn record_response(span: &Span, response: &Value) {
    if span.is_disabled() {
        return;
    }
    if let Some(model) = response.get("model").and_then(Value::as_str) {
        span.record("gen_ai.response.model", model);
    }
    // As i64: an OpenTelemetry integer is signed, and the layer exports a u64 as a string.
    let tokens = |name: &str| response.pointer(&format!("/usage/{name}")).and_then(Value::as_i64);
    if let Some(input) = tokens("prompt_tokens") {
        span.record("gen_ai.usage.input_tokens", input);
    }
    if let Some(output) = tokens("completion_tokens") {
        span.record("gen_ai.usage.output_tokens", output);
    }
}

/// Marks the span failed with the class of `error` (its HTTP status, `timeout`, ...), never
/// its text, which may quote the server's answer.
pub fn record_error(span: &Span, error: &LlmError) {
    if !span.is_disabled() {
        record_failure(span, &error_type(error));
    }
}

/// Marks the span failed with `error_type`, a low-cardinality class (an HTTP status,
/// `timeout`, `_OTHER`), for a caller with errors of its own.
pub fn record_failure(span: &Span, error_type: &str) {
    span.record("otel.status_code", "error");
    span.record("error.type", error_type);
}

fn error_type(error: &LlmError) -> String {
    match error {
        LlmError::Status { status, .. } => status.to_string(),
        LlmError::Timeout { .. } => "timeout".to_owned(),
        LlmError::Http { .. } => "http".to_owned(),
        LlmError::Malformed { .. } => "malformed_response".to_owned(),
    }
}
