//! A minimal OpenAI-compatible chat-completions client for the chat loop: messages and tool
//! specs in, one assistant message out. Works with OpenAI, Ollama, llama.cpp server and vLLM.

use std::time::Duration;

use serde_json::{Value, json};

use crate::message::ChatMessage;

/// Why a chat completion failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The request did not complete (connection refused, timeout, ...).
    #[error("request to {url} failed")]
    Http {
        /// The endpoint.
        url: String,
        /// What reqwest said.
        #[source]
        source: reqwest::Error,
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
    /// The answer was not a chat completion.
    #[error("{url} sent a malformed completion: {reason}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What was wrong.
        reason: String,
    },
}

/// What an error response says, on one line: the `error.message` of OpenAI's error shape (which
/// llama.cpp, vLLM and Ollama answer with too), else the body; white space folded, at most 300
/// characters.
fn error_message(body: &str) -> String {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| value.pointer("/error/message").and_then(Value::as_str).map(str::to_owned))
        .filter(|message| !message.trim().is_empty())
        .unwrap_or_else(|| body.to_owned());
    let folded: String = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut shown: String = folded.chars().take(300).collect();
    if shown.len() < folded.len() {
        shown.push('…');
    }
    if shown.is_empty() { "(empty body)".to_owned() } else { shown }
}

/// An OpenAI-compatible chat-completions endpoint.
#[derive(Clone, Debug)]
pub struct ChatClient {
    http: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
    max_tokens: u32,
}

/// Most tokens a reply may have unless set with [`ChatClient::with_max_tokens`]: some servers
/// default to unlimited.
pub const DEFAULT_MAX_TOKENS: u32 = 1024;

impl ChatClient {
    /// A client for `base_url` (e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`).
    pub fn new(base_url: &str, model: &str, api_key: Option<String>, timeout: Duration) -> ChatClient {
        let http = reqwest::Client::builder().timeout(timeout).build().unwrap_or_default();
        ChatClient {
            http,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            model: model.to_owned(),
            api_key,
            max_tokens: DEFAULT_MAX_TOKENS,
        }
    }

    /// The same client with another cap on the tokens of a reply.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> ChatClient {
        self.max_tokens = max_tokens.max(1);
        self
    }

    /// Sends the conversation with the tools the model may call; returns its reply.
    pub async fn complete(&self, messages: &[Value], tools: &[Value]) -> Result<ChatMessage, LlmError> {
        let mut body = json!({"model": self.model, "messages": messages, "max_tokens": self.max_tokens});
        if !tools.is_empty() {
            body["tools"] = Value::from(tools.to_vec());
            // Without it llama.cpp's server offers no tools, and the model writes its call as
            // text.
            body["tool_choice"] = Value::from("auto");
        }
        let mut request = self.http.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let http_error = |source| LlmError::Http { url: self.url.clone(), source };
        let response = request.send().await.map_err(http_error)?;
        let status = response.status();
        let text = response.text().await.map_err(http_error)?;
        if !status.is_success() {
            return Err(LlmError::Status {
                url: self.url.clone(),
                status: status.as_u16(),
                body: error_message(&text),
            });
        }
        let malformed = |reason: String| LlmError::Malformed { url: self.url.clone(), reason };
        let completion: Value = serde_json::from_str(&text).map_err(|e| malformed(e.to_string()))?;
        let message = completion
            .pointer("/choices/0/message")
            .cloned()
            .ok_or_else(|| malformed("no choices[0].message".into()))?;
        serde_json::from_value(message).map_err(|e| malformed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::error_message;

    #[test]
    fn error_bodies_become_one_line_naming_the_problem() {
        let openai = r#"{"error": {"message": "Invalid value for 'content':\n expected a string", "type": "invalid_request_error"}}"#;
        assert_eq!(error_message(openai), "Invalid value for 'content': expected a string");
        assert_eq!(error_message("upstream\nconnect error"), "upstream connect error");
        assert_eq!(error_message(r#"{"error": {"message": ""}}"#), r#"{"error": {"message": ""}}"#);
        assert_eq!(error_message(""), "(empty body)");
        assert!(error_message(&"x".repeat(1000)).chars().count() <= 301);
    }
}
