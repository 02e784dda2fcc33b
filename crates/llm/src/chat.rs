//! The chat loop's side of an OpenAI-compatible chat-completions endpoint: messages and tool
//! specs in, one assistant [`Reply`] out. Works with OpenAI, Ollama, llama.cpp server and vLLM.
//! The HTTP (timeouts, retries with backoff, `Retry-After`, the API key) is [`ChatEndpoint`],
//! which the summarizer uses too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::endpoint::ChatEndpoint;
use crate::error::LlmError;
use crate::retry::RetryPolicy;
use crate::usage::{ReportedCall, UsageLog};

/// What the model answered: the `choices[0].message` of a chat completion, the part a chat
/// loop stores and acts on.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Reply {
    /// The text; `None` (or empty) when the reply only calls tools.
    #[serde(default)]
    pub content: Option<String>,
    /// The tool calls, in the OpenAI format (`[{"id", "type": "function", "function": {"name",
    /// "arguments"}}]`).
    #[serde(default)]
    pub tool_calls: Option<Value>,
}

impl Reply {
    /// The reply of a chat-completions answer; `url` names the endpoint in the error when the
    /// answer holds none.
    pub fn from_completion(completion: &Value, url: &str) -> Result<Reply, LlmError> {
        let malformed = |reason: String| LlmError::Malformed { url: url.to_owned(), reason };
        let message = completion
            .pointer("/choices/0/message")
            .ok_or_else(|| malformed("no choices[0].message".into()))?;
        Reply::deserialize(message).map_err(|error| malformed(error.to_string()))
    }
}

/// An OpenAI-compatible chat-completions endpoint and the model to ask.
#[derive(Clone, Debug)]
pub struct ChatClient {
    endpoint: ChatEndpoint,
    model: String,
    max_tokens: u32,
    temperature: Option<f64>,
    text_tool_calls: bool,
    /// Every call, with the usage the server reported, until the chat loop records it.
    usage: Arc<UsageLog>,
}

/// Most tokens a reply may have unless set with [`ChatClient::with_max_tokens`]: some servers
/// default to unlimited.
pub const DEFAULT_MAX_TOKENS: u32 = 1024;

impl ChatClient {
    /// A client for `base_url` (e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`)
    /// that waits at most `timeout` for one attempt and otherwise retries as
    /// [`RetryPolicy::default`] says.
    ///
    /// # Panics
    ///
    /// If the TLS backend cannot be initialized (as `reqwest::Client::new` does).
    pub fn new(base_url: &str, model: &str, api_key: Option<String>, timeout: Duration) -> ChatClient {
        let retry = RetryPolicy {
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            ..RetryPolicy::default()
        };
        ChatClient::with_retry(base_url, model, api_key, retry)
    }

    /// A client for `base_url` with its own timeouts and retries (`[compactor.retry]`, say).
    ///
    /// # Panics
    ///
    /// If the TLS backend cannot be initialized (as `reqwest::Client::new` does).
    pub fn with_retry(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        retry: RetryPolicy,
    ) -> ChatClient {
        let endpoint = ChatEndpoint::new(base_url, api_key, retry).expect("the TLS backend initializes");
        ChatClient {
            endpoint,
            model: model.to_owned(),
            max_tokens: DEFAULT_MAX_TOKENS,
            temperature: None,
            text_tool_calls: true,
            usage: Arc::default(),
        }
    }

    /// The calls made (with their reported usage) since the last call of this method.
    pub fn take_usage(&self) -> Vec<ReportedCall> {
        self.usage.drain()
    }

    /// Whether a reply whose content begins with a tool call written as JSON text (what
    /// llama.cpp-based servers return when their chat format does not parse calls) is taken as
    /// that call. On by default; only calls of offered tools are recognised.
    pub fn with_text_tool_calls(mut self, recognise: bool) -> ChatClient {
        self.text_tool_calls = recognise;
        self
    }

    /// The same client with another cap on the tokens of a reply.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> ChatClient {
        self.max_tokens = max_tokens.max(1);
        self
    }

    /// The same client sending `temperature` with every request (unset, the server's default
    /// applies: 0.8 for llama-cpp-python, 1 for OpenAI).
    pub fn with_temperature(mut self, temperature: Option<f64>) -> ChatClient {
        self.temperature = temperature;
        self
    }

    /// Sends the conversation with the tools the model may call; returns its reply.
    pub async fn complete(&self, messages: &[Value], tools: &[Value]) -> Result<Reply, LlmError> {
        let mut body = json!({"model": self.model, "messages": messages, "max_tokens": self.max_tokens});
        if let Some(temperature) = self.temperature {
            body["temperature"] = Value::from(temperature);
        }
        if !tools.is_empty() {
            body["tools"] = Value::from(tools.to_vec());
            // Without it llama.cpp's server offers no tools, and the model writes its call as
            // text.
            body["tool_choice"] = Value::from("auto");
        }
        let started = Instant::now();
        let span = crate::span::chat_span(&self.model, self.endpoint.url());
        let completion = match self.endpoint.complete(&body).instrument(span.clone()).await {
            Ok(completion) => completion,
            Err(error) => {
                crate::span::record_error(&span, &error);
                self.usage.push(ReportedCall::failed(&self.model, started.elapsed()));
                return Err(error);
            }
        };
        crate::span::record_response(&span, &completion);
        let ok = completion.pointer("/choices/0/message").is_some();
        self.usage.push(ReportedCall::answered(&self.model, &completion, ok, started.elapsed()));
        let mut reply = Reply::from_completion(&completion, self.endpoint.url())?;
        if self.text_tool_calls && reply.tool_calls.is_none() {
            let offered: Vec<&str> = tools
                .iter()
                .filter_map(|tool| tool.pointer("/function/name").and_then(Value::as_str))
                .collect();
            if let Some(calls) = reply.content.as_deref().and_then(|text| text_tool_calls(text, &offered)) {
                tracing::debug!(calls = calls.len(), "tool calls written as text recognised");
                reply.tool_calls = Some(Value::Array(calls));
                reply.content = Some(String::new());
            }
        }
        Ok(reply)
    }
}

/// The tool calls of a reply whose content begins with one or more calls written as JSON text,
/// in the OpenAI `tool_calls` format (what follows the calls is dropped); `None` when the
/// content is anything else (prose, JSON that is not a call, a call of a tool not offered). The shapes seen from local servers:
/// `{"name": ..., "arguments": {...}}` (bare, in a ```json fence, or between Qwen's
/// `<tool_call>` tags, one block per call), `"parameters"` for `"arguments"`, and a list of
/// such objects.
fn text_tool_calls(content: &str, offered: &[&str]) -> Option<Vec<Value>> {
    let mut text = content.trim();
    if let Some(inner) = text.strip_prefix("```") {
        let inner = inner.strip_prefix("json").unwrap_or(inner);
        text = inner.split_once("```").map_or(inner, |(fenced, _)| fenced).trim();
    }
    // Some models double the braces of the call, as format strings escape them: `{{"name": ...}}`.
    if text.starts_with("{{") {
        text = &text[1..];
    }
    let mut objects = Vec::new();
    if text.starts_with("<tool_call>") {
        // One block per call. What follows the last block is dropped: a model that goes on
        // after its calls writes the answer it expects (Qwen models write a made-up
        // `<tool_response>`), which it cannot know before the tools ran.
        let mut rest = text;
        while let Some(block) = rest.strip_prefix("<tool_call>") {
            let (block, after) = block.split_once("</tool_call>").unwrap_or((block, ""));
            objects.push(serde_json::from_str::<Value>(block.trim()).ok()?);
            rest = after.trim_start();
        }
    } else if text.starts_with('{') || text.starts_with('[') {
        // The first JSON value; what follows it is dropped for the same reason.
        let first = serde_json::Deserializer::from_str(text).into_iter::<Value>().next()?.ok()?;
        match first {
            Value::Array(items) => objects.extend(items),
            object => objects.push(object),
        }
    } else {
        return None;
    }
    let calls = objects
        .iter()
        .enumerate()
        .map(|(index, object)| {
            let name = object.get("name")?.as_str()?;
            if !offered.contains(&name) {
                return None;
            }
            let arguments = match object.get("arguments").or_else(|| object.get("parameters")) {
                Some(Value::String(text)) => text.clone(),
                Some(arguments @ Value::Object(_)) => arguments.to_string(),
                None => "{}".to_owned(),
                Some(_) => return None,
            };
            Some(json!({"id": format!("call_text_{index}"), "type": "function",
                        "function": {"name": name, "arguments": arguments}}))
        })
        .collect::<Option<Vec<Value>>>()?;
    (!calls.is_empty()).then_some(calls)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::text_tool_calls;

    #[test]
    fn calls_written_as_text_are_recognised_in_the_shapes_local_servers_write() {
        let offered = ["memory_grep", "memory_search"];
        let call = |name: &str, arguments: &str| json!({"id": "call_text_0", "type": "function", "function": {"name": name, "arguments": arguments}});
        let bare = r#"{"name": "memory_grep", "arguments": {"query": "gateway"}}"#;
        assert_eq!(
            text_tool_calls(bare, &offered),
            Some(vec![call("memory_grep", r#"{"query":"gateway"}"#)])
        );
        let tagged =
            "<tool_call>\n{\"name\": \"memory_grep\", \"arguments\": {\"query\": \"limit\"}}\n</tool_call>";
        assert_eq!(
            text_tool_calls(tagged, &offered),
            Some(vec![call("memory_grep", r#"{"query":"limit"}"#)])
        );
        // What a model writes after its call, before any result exists, is not the answer.
        let guessed =
            format!("{tagged}\n<tool_response>\n{{\"count\": 1}}\n</tool_response>\nThe limit is 100.");
        assert_eq!(text_tool_calls(&guessed, &offered), text_tool_calls(tagged, &offered));
        // Seen from Qwen2.5-Coder-1.5B: doubled braces, then a made-up result in a fence.
        let doubled = "{{\"name\": \"memory_grep\", \"arguments\": {\"query\": \"limit\"}}}\n\n```\n{\"search_results\": []}\n```";
        assert_eq!(text_tool_calls(doubled, &offered), text_tool_calls(tagged, &offered));
        let fenced_then_prose = "```json\n{\"name\": \"memory_grep\", \"arguments\": {\"query\": \"limit\"}}\n```\nThen I answer.";
        assert_eq!(text_tool_calls(fenced_then_prose, &offered), text_tool_calls(tagged, &offered));
        let fenced = "```json\n{\"name\": \"memory_search\", \"parameters\": {\"query\": \"cache\"}}\n```";
        assert_eq!(
            text_tool_calls(fenced, &offered),
            Some(vec![call("memory_search", r#"{"query":"cache"}"#)])
        );
        let two =
            r#"[{"name": "memory_grep", "arguments": "{\"query\": \"a\"}"}, {"name": "memory_search"}]"#;
        let calls = text_tool_calls(two, &offered).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1]["id"], "call_text_1");
        assert_eq!(calls[1]["function"]["arguments"], "{}");
    }

    #[test]
    fn prose_json_answers_and_unknown_tools_stay_text() {
        let offered = ["memory_grep"];
        for content in [
            "The limit is 100 requests per second.",
            r#"Call {"name": "memory_grep", "arguments": {}} next."#,
            r#"{"name": "Maya", "role": "owner"}"#,
            r#"{"name": "drop_tables", "arguments": {}}"#,
            "<tools></tools>",
            r#"{"name": "memory_grep", "arguments": 7}"#,
        ] {
            assert_eq!(text_tool_calls(content, &offered), None, "{content}");
        }
    }
}
