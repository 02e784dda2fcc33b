//! The HTTP of an OpenAI-compatible endpoint (OpenAI, Ollama, llama.cpp server, vLLM):
//! `chat/completions` for the compactor's summarizer and, through [`crate::ChatClient`], the
//! chat loop of the `strata` crate; the same client at `embeddings` for the `strata` crate's
//! remote embedding provider.
//!
//! It owns what both need: the URL, the API key (looked up in one place, [`api_key`]), the
//! per-attempt timeout, and retries of transient failures (408, 429, 5xx, timeouts, broken
//! connections, replies that are not JSON) with exponential backoff and jitter, honouring
//! `Retry-After` up to `max_backoff_ms`.

use std::time::Duration;

use serde_json::Value;

use crate::error::LlmError;
use crate::retry::RetryPolicy;

/// The variable a key is read from when the configured one is unset.
const FALLBACK_KEY_VARIABLE: &str = "OPENAI_API_KEY";

/// Most characters of an error body kept in [`LlmError::Status`].
const ERROR_BODY_CHARS: usize = 300;

/// The API key in the environment variable `variable`, else in `OPENAI_API_KEY`; an empty or
/// blank variable counts as unset. The one place strata reads an API key.
pub fn api_key(variable: &str) -> Option<String> {
    [variable, FALLBACK_KEY_VARIABLE]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|key| !key.trim().is_empty()))
}

/// An OpenAI-compatible `chat/completions` endpoint. Cheap to clone (the connection pool is
/// shared).
#[derive(Clone, Debug)]
pub struct ChatEndpoint {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
    retry: RetryPolicy,
}

/// One failed attempt and how long the server asked to wait before the next: what a caller
/// with its own retry loop (the summarizer, which also switches protocol on some failures)
/// gets from [`ChatEndpoint::attempt`].
#[derive(Debug)]
pub struct Failed {
    /// What went wrong.
    pub error: LlmError,
    /// The server's `Retry-After`, if it sent one.
    pub retry_after: Option<Duration>,
}

impl ChatEndpoint {
    /// The endpoint under `base_url` (e.g. `https://api.openai.com/v1` or
    /// `http://localhost:11434/v1`), sending `api_key` as a bearer token when given. Fails only
    /// if the TLS backend cannot be set up.
    pub fn new(
        base_url: &str,
        api_key: Option<String>,
        retry: RetryPolicy,
    ) -> Result<ChatEndpoint, LlmError> {
        ChatEndpoint::with_path(base_url, "chat/completions", api_key, retry)
    }

    /// The endpoint at `path` under `base_url` (`embeddings` for an OpenAI-compatible
    /// embeddings API), with the same key, timeouts and retries.
    pub fn with_path(
        base_url: &str,
        path: &str,
        api_key: Option<String>,
        retry: RetryPolicy,
    ) -> Result<ChatEndpoint, LlmError> {
        let url = format!("{}/{}", base_url.trim_end_matches('/'), path.trim_start_matches('/'));
        let http = reqwest::Client::builder()
            .timeout(retry.timeout())
            .connect_timeout(retry.timeout().min(Duration::from_secs(10)))
            .build()
            .map_err(|source| LlmError::Http { url: url.clone(), source })?;
        Ok(ChatEndpoint { http, url, api_key, retry })
    }

    /// The full URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Timeouts and retries.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// Sends `body` and returns the JSON of the answer, retrying transient failures up to
    /// `max_attempts` times in all.
    pub async fn complete(&self, body: &Value) -> Result<Value, LlmError> {
        let mut attempt = 1;
        loop {
            match self.attempt(body).await {
                Ok(answer) => return Ok(answer),
                Err(failed) if failed.error.is_transient() && attempt < self.retry.max_attempts => {
                    let wait = self.wait(attempt, failed.retry_after);
                    tracing::debug!(attempt, ?wait, error = %failed.error, "retrying {}", self.url);
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(failed) => return Err(failed.error),
            }
        }
    }

    /// One attempt, not retried: the JSON of a 2xx answer, or what failed.
    pub async fn attempt(&self, body: &Value) -> Result<Value, Failed> {
        let mut request = self.http.post(&self.url).json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let transport = |source: reqwest::Error| Failed {
            error: if source.is_timeout() {
                LlmError::Timeout { url: self.url.clone(), after: self.retry.timeout() }
            } else {
                LlmError::Http { url: self.url.clone(), source }
            },
            retry_after: None,
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let text = response.text().await.map_err(transport)?;
        if !(200..300).contains(&status) {
            let body = error_message(&text);
            return Err(Failed {
                error: LlmError::Status { url: self.url.clone(), status, body },
                retry_after,
            });
        }
        serde_json::from_str(&text).map_err(|error| Failed {
            error: LlmError::Malformed {
                url: self.url.clone(),
                reason: format!("the response is not JSON: {error}"),
            },
            retry_after: None,
        })
    }

    /// How long to wait before retry number `retry` (1-based): what the server asked for, up to
    /// `max_backoff_ms`, else exponential backoff with full jitter in its upper half, so a
    /// fleet of clients does not retry in lockstep.
    pub fn wait(&self, retry: u32, server: Option<Duration>) -> Duration {
        let policy = &self.retry;
        if let Some(server) = server {
            return server.min(Duration::from_millis(policy.max_backoff_ms));
        }
        let exp = policy.initial_backoff_ms.saturating_mul(1u64 << retry.saturating_sub(1).min(20));
        let capped = exp.min(policy.max_backoff_ms);
        let jittered = if capped > 1 { rand::random_range(capped / 2..=capped) } else { capped };
        Duration::from_millis(jittered)
    }
}

/// `Retry-After` as seconds or an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        // A server may send anything here; `try_from` refuses what no Duration can hold (the
        // wait is capped at `max_backoff_ms` anyway).
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// What an error response says, on one line: the `error.message` of OpenAI's error shape (which
/// llama.cpp, vLLM and Ollama answer with too), else the body; a validation dump reduced to the
/// error that applies ([`validation_digest`]); white space folded, at most 300 characters.
fn error_message(body: &str) -> String {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| value.pointer("/error/message").and_then(Value::as_str).map(str::to_owned))
        .filter(|message| !message.trim().is_empty())
        .unwrap_or_else(|| body.to_owned());
    let message = validation_digest(&message).unwrap_or(message);
    let shown = one_line_within(&message, ERROR_BODY_CHARS);
    if shown.is_empty() { "(empty body)".to_owned() } else { shown }
}

/// `text` on one line (runs of whitespace become one space), cut to at most `max_chars`
/// characters ending in `…`: the rule of `strata_seam::fence::one_line` and
/// `strata_seam::text::truncate_chars`, restated because this crate holds no store.
fn one_line_within(text: &str, max_chars: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(max_chars.saturating_sub(1)) {
        Some((end, _)) if line.chars().count() > max_chars => format!("{}…", &line[..end]),
        _ => line,
    }
}

/// One error of a pydantic validation dump: `{'type': 'string_type', 'loc': ('body',
/// 'messages', 2, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': '...', ...}`.
struct ValidationError<'a> {
    kind: &'a str,
    loc: Vec<&'a str>,
    msg: &'a str,
}

/// The text after `key` up to the quote that closes it (pydantic prints a message with a quote
/// in it between double quotes).
fn quoted<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = &line[line.find(key)? + key.len()..];
    let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let rest = &rest[1..];
    Some(&rest[..rest.find(quote)?])
}

fn validation_error(line: &str) -> Option<ValidationError<'_>> {
    let line = line.trim();
    if !line.starts_with("{'type': ") {
        return None;
    }
    let loc = &line[line.find("'loc': (")? + 8..];
    let loc = &loc[..loc.find(')')?];
    let loc = loc.split(", ").map(|part| part.trim_matches('\'')).filter(|part| !part.is_empty()).collect();
    Some(ValidationError { kind: quoted(line, "'type': ")?, loc, msg: quoted(line, "'msg': ")? })
}

/// The error that applies in a validation dump of a request (llama-cpp-python's FastAPI answers
/// a bad message with one error per variant of its message union: "Input should be 'system'",
/// "Input should be 'user'", ... and, among them, the real one). A variant whose own literal
/// (`role`, `type`) did not match is not the one meant, so its errors are dropped; the first
/// error left is shown with how many there were. `None` when `message` is no such dump.
fn validation_digest(message: &str) -> Option<String> {
    let errors: Vec<ValidationError<'_>> = message.lines().filter_map(validation_error).collect();
    let first = errors.first()?;
    let other_variant = |error: &ValidationError<'_>| {
        errors.iter().any(|literal| {
            literal.kind == "literal_error"
                && literal.loc.len() <= error.loc.len()
                && literal.loc.len() > 1
                && literal.loc[..literal.loc.len() - 1] == error.loc[..literal.loc.len() - 1]
        })
    };
    let applies = errors.iter().find(|error| !other_variant(error)).unwrap_or(first);
    let count = match errors.len() {
        1 => "1 validation error".to_owned(),
        n => format!("{n} validation errors, the one that applies"),
    };
    Some(format!("{count}: {}: {}", applies.loc.join("."), applies.msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(reqwest::header::RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::ZERO), "a date in the past means now");
        headers.insert(reqwest::header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn error_bodies_become_one_line_naming_the_problem() {
        let openai = r#"{"error": {"message": "Invalid value for 'content':\n expected a string", "type": "invalid_request_error"}}"#;
        assert_eq!(error_message(openai), "Invalid value for 'content': expected a string");
        assert_eq!(error_message("upstream\nconnect error"), "upstream connect error");
        assert_eq!(error_message(r#"{"error": {"message": ""}}"#), r#"{"error": {"message": ""}}"#);
        assert_eq!(error_message(""), "(empty body)");
        assert!(error_message(&"x".repeat(1000)).chars().count() <= 300);
    }

    #[test]
    fn a_validation_dump_is_reduced_to_the_error_that_applies() {
        // llama-cpp-python's answer to an assistant message with "content": null (abridged from
        // tests/fixtures/llama-cpp-python/null-content.json): one error per message variant.
        let dump = r#"{"error": {"message": "4 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input should be 'system'\", 'input': 'assistant'}\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', 'input': None}\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'role'), 'msg': \"Input should be 'tool'\", 'input': 'assistant'}\n  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'tool_call_id'), 'msg': 'Field required'}\n\n  File \"app.py\", line 376", "type": "internal_server_error"}}"#;
        assert_eq!(
            error_message(dump),
            "4 validation errors, the one that applies: \
             body.messages.2.ChatCompletionRequestAssistantMessage.content: Input should be a valid string"
        );
        let single = "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}";
        assert_eq!(
            error_message(single),
            "1 validation error: body.response_format.type: Input should be 'text' or 'json_object'"
        );
    }

    #[test]
    fn waits_grow_with_each_retry_up_to_the_cap_and_follow_the_server() {
        let retry = RetryPolicy { initial_backoff_ms: 100, max_backoff_ms: 1_000, ..RetryPolicy::default() };
        let endpoint = ChatEndpoint::new("http://127.0.0.1:9/v1/", None, retry).unwrap();
        assert_eq!(endpoint.url(), "http://127.0.0.1:9/v1/chat/completions");
        let first = endpoint.wait(1, None);
        assert!((Duration::from_millis(50)..=Duration::from_millis(100)).contains(&first), "{first:?}");
        assert!(endpoint.wait(30, None) <= Duration::from_secs(1));
        assert_eq!(endpoint.wait(1, Some(Duration::from_secs(60))), Duration::from_secs(1));
        assert_eq!(endpoint.wait(1, Some(Duration::ZERO)), Duration::ZERO);
    }
}
