//! Chat messages in the OpenAI format, as a bot exchanges them with its model.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use strata_store::{NewMessage, Role, ToolCall};

use crate::error::{Error, Result};

/// One chat message: what a bot appends, and what a model returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// system, user, assistant or tool.
    pub role: Role,
    /// The text; `null` for an assistant message that only calls tools.
    #[serde(default)]
    pub content: Option<String>,
    /// Tool calls of an assistant message (OpenAI format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Value>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Participant or tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    fn new(role: Role, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role, content: Some(content.into()), tool_calls: None, tool_call_id: None, name: None }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::Assistant, content)
    }

    /// The result of a tool call.
    pub fn tool(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> ChatMessage {
        ChatMessage {
            tool_call_id: Some(tool_call_id.into()),
            name: Some(name.into()),
            ..ChatMessage::new(Role::Tool, content)
        }
    }

    /// The tool calls, parsed once ([`strata_store::ToolCall`]); arguments that are not JSON
    /// come back as a string, for the tool to refuse.
    pub fn calls(&self) -> Vec<ToolCall> {
        ToolCall::parse_all(self.tool_calls.as_ref())
    }

    pub(crate) fn into_new(self) -> NewMessage {
        Incoming::from(self).into_new(Utc::now())
    }
}

impl From<strata_llm::Reply> for ChatMessage {
    /// The model's reply as the assistant message to append.
    fn from(reply: strata_llm::Reply) -> ChatMessage {
        ChatMessage {
            content: reply.content,
            tool_calls: reply.tool_calls,
            ..ChatMessage::new(Role::Assistant, "")
        }
    }
}

/// A message as a bot hands it over: an OpenAI chat message, and what strata keeps beside it
/// (when it was sent, the bot's own id for it, whether it is pinned).
#[derive(Clone, Debug, PartialEq)]
pub struct Incoming {
    /// The message.
    pub message: ChatMessage,
    /// When it was sent; `None` stores the time of the append.
    pub timestamp: Option<DateTime<Utc>>,
    /// An idempotency key unique within the session ([`crate::EngineSession::append_with_key`]).
    pub key: Option<String>,
    /// Pinned messages are never compacted.
    pub pinned: bool,
}

/// The keys [`Incoming::from_json`] stores.
const KEYS: [&str; 8] =
    ["role", "content", "name", "tool_calls", "tool_call_id", "timestamp", "key", "pinned"];

/// Keys of a message the OpenAI API returns that carry nothing strata keeps when they are
/// empty: a bot that appends `message.model_dump()` sends them as `null`.
const EMPTY_RESPONSE_KEYS: [&str; 4] = ["refusal", "annotations", "audio", "function_call"];

impl From<ChatMessage> for Incoming {
    fn from(message: ChatMessage) -> Incoming {
        Incoming { message, timestamp: None, key: None, pinned: false }
    }
}

impl Incoming {
    /// Reads a message object in the OpenAI chat format (`role`, `content`, `name`,
    /// `tool_calls`, `tool_call_id`) with strata's optional `timestamp` (RFC 3339, or UNIX
    /// seconds), `key` and `pinned`. `content` may be a string, `null` (with `tool_calls`) or a
    /// list of text parts, which are joined by newlines. A key strata does not know is an error
    /// naming it (a misspelled `"tool_call_ids"` would otherwise be lost), except the empty
    /// fields of an API response (`"refusal": null`, ...); a refusal's text is its content.
    pub fn from_json(value: &Value) -> Result<Incoming> {
        let Some(object) = value.as_object() else {
            return Err(invalid(format!("a message is a JSON object, not {}", json_kind(value))));
        };
        if let Some(key) =
            object.iter().find_map(|(key, value)| (!Incoming::reads(key, value)).then_some(key))
        {
            return Err(invalid(format!("unknown key {key:?} (known: {})", KEYS.join(", "))));
        }
        let role: Role = match object.get("role") {
            Some(Value::String(role)) => {
                role.parse().map_err(|error: strata_store::Error| invalid(error.to_string()))?
            }
            Some(other) => {
                return Err(invalid(format!("\"role\" must be a string, not {}", json_kind(other))));
            }
            None => return Err(invalid("a message needs a \"role\" (system, user, assistant or tool)")),
        };
        let tool_calls = match object.get("tool_calls") {
            None | Some(Value::Null) => None,
            Some(Value::Array(calls)) if calls.is_empty() => None,
            Some(calls @ Value::Array(_)) => Some(calls.clone()),
            Some(other) => {
                return Err(invalid(format!("\"tool_calls\" must be a list, not {}", json_kind(other))));
            }
        };
        let content = match object.get("content") {
            None | Some(Value::Null) => match object.get("refusal") {
                Some(Value::String(refusal)) => Some(refusal.clone()),
                _ => None,
            },
            Some(Value::String(text)) => Some(text.clone()),
            Some(Value::Array(parts)) => Some(text_of_parts(parts)?),
            Some(other) => {
                return Err(invalid(format!(
                    "\"content\" must be a string or a list of text parts, not {}",
                    json_kind(other)
                )));
            }
        };
        if content.is_none() && tool_calls.is_none() {
            return Err(invalid("a message needs \"content\" (or \"tool_calls\")"));
        }
        let timestamp = match object.get("timestamp") {
            None | Some(Value::Null) => None,
            Some(Value::String(stamp)) => Some(
                DateTime::parse_from_rfc3339(stamp)
                    .map_err(|_| {
                        invalid(format!("timestamp {stamp:?} is not RFC 3339 (like 2026-01-31T09:30:00Z)"))
                    })?
                    .with_timezone(&Utc),
            ),
            Some(Value::Number(seconds)) => Some(unix_time(seconds.as_f64().unwrap_or(f64::NAN))?),
            Some(other) => {
                return Err(invalid(format!(
                    "\"timestamp\" must be RFC 3339 text or UNIX seconds, not {}",
                    json_kind(other)
                )));
            }
        };
        let pinned = match object.get("pinned") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(pinned)) => *pinned,
            Some(other) => {
                return Err(invalid(format!("\"pinned\" must be true or false, not {}", json_kind(other))));
            }
        };
        Ok(Incoming {
            message: ChatMessage {
                role,
                content,
                tool_calls,
                tool_call_id: optional_string(object, "tool_call_id")?,
                name: optional_string(object, "name")?,
            },
            timestamp,
            key: optional_string(object, "key")?,
            pinned,
        })
    }

    /// Whether [`Incoming::from_json`] reads (or knowingly passes over) `key` with this value:
    /// one of its keys, or an empty field of an API response.
    pub(crate) fn reads(key: &str, value: &Value) -> bool {
        let empty = value.is_null() || value.as_array().is_some_and(Vec::is_empty);
        // A refusal is what the model said instead of content: kept as its text.
        let refusal = key == "refusal" && (value.is_string() || value.is_null());
        KEYS.contains(&key) || refusal || EMPTY_RESPONSE_KEYS.contains(&key) && empty
    }

    /// The keys [`Incoming::from_json`] stores.
    pub(crate) const KEYS: [&'static str; 8] = KEYS;

    /// The row to store, sent at `now` unless it says when; its tokens not counted yet.
    pub(crate) fn into_new(self, now: DateTime<Utc>) -> NewMessage {
        NewMessage {
            role: self.message.role,
            content: self.message.content.unwrap_or_default(),
            tool_calls: self.message.tool_calls,
            tool_call_id: self.message.tool_call_id,
            name: self.message.name,
            created_at: self.timestamp.unwrap_or(now),
            token_count: 0,
            pinned: self.pinned,
            external_id: self.key,
        }
    }
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidMessage(reason.into())
}

/// How a JSON value is named in an error.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn optional_string(object: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(invalid(format!("{key:?} must be a string, not {}", json_kind(other)))),
    }
}

/// The text of a content list (`[{"type": "text", "text": ...}, ...]`), parts joined by
/// newlines. strata stores text: an image or audio part is refused rather than dropped.
fn text_of_parts(parts: &[Value]) -> Result<String> {
    let mut texts = Vec::with_capacity(parts.len());
    for part in parts {
        match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
            (Some("text"), Some(text)) => texts.push(text),
            (Some(kind), _) if kind != "text" => {
                return Err(invalid(format!(
                    "a content part of type {kind:?} cannot be stored: strata keeps text parts only"
                )));
            }
            _ => return Err(invalid("a content part must be {\"type\": \"text\", \"text\": ...}")),
        }
    }
    Ok(texts.join("\n"))
}

/// A UNIX time in seconds, refused outside the years chrono can write back as RFC 3339.
fn unix_time(seconds: f64) -> Result<DateTime<Utc>> {
    let out_of_range = || invalid(format!("timestamp {seconds} is not a UNIX time in seconds"));
    if !seconds.is_finite() || !(0.0..=253_402_300_799.0).contains(&seconds) {
        return Err(out_of_range());
    }
    let whole = seconds.floor();
    let nanos = ((seconds - whole) * 1e9).round().min(999_999_999.0) as u32;
    DateTime::from_timestamp(whole as i64, nanos).ok_or_else(out_of_range)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_openai_message_with_strata_keys_is_read_whole() {
        let incoming = Incoming::from_json(&json!({
            "role": "assistant", "content": null, "refusal": null, "annotations": [],
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            "timestamp": 1_767_225_600.25, "key": "bot-7", "pinned": true,
        }))
        .unwrap();
        assert_eq!(incoming.message.role, Role::Assistant);
        assert!(incoming.message.content.is_none() && incoming.message.tool_calls.is_some());
        assert_eq!(incoming.timestamp.unwrap().timestamp_millis(), 1_767_225_600_250);
        assert_eq!((incoming.key.as_deref(), incoming.pinned), (Some("bot-7"), true));
    }

    #[test]
    fn text_parts_are_joined_and_a_refusal_is_content() {
        let parts = json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        assert_eq!(Incoming::from_json(&parts).unwrap().message.content.as_deref(), Some("a\nb"));
        let refusal = json!({"role": "assistant", "content": null, "refusal": "I can't help with that."});
        assert_eq!(
            Incoming::from_json(&refusal).unwrap().message.content.as_deref(),
            Some("I can't help with that.")
        );
    }

    #[test]
    fn each_mistake_is_named() {
        for (message, words) in [
            (json!({"role": "user", "content": "x", "sesion": "s"}), "unknown key \"sesion\""),
            (json!({"role": "user", "content": "x", "audio": {"id": "a"}}), "unknown key \"audio\""),
            (json!({"role": "robot", "content": "x"}), "robot"),
            (json!({"content": "x"}), "needs a \"role\""),
            (json!({"role": "user"}), "needs \"content\""),
            (json!({"role": "user", "content": 1}), "must be a string or a list"),
            (json!({"role": "user", "content": [{"type": "image_url"}]}), "image_url"),
            (json!({"role": "user", "content": "x", "timestamp": "noon"}), "RFC 3339"),
            (json!({"role": "user", "content": "x", "timestamp": -5}), "UNIX time"),
            (json!({"role": "user", "content": "x", "pinned": "yes"}), "true or false"),
            (json!({"role": "user", "content": "x", "name": 3}), "\"name\" must be a string"),
            (json!(["user", "x"]), "JSON object, not a list"),
        ] {
            let error = Incoming::from_json(&message).unwrap_err().to_string();
            assert!(error.contains(words), "{message}: {error}");
        }
    }
}
