//! Chat messages in the OpenAI format, as a bot exchanges them with its model.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use strata_seam::{NewMessage, Role, ToolCall};
pub use strata_wire::Format;
use strata_wire::{Block, Speaker, Turn, json_kind};

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

    /// The tool calls, parsed once ([`strata_seam::ToolCall`]); arguments that are not JSON
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

/// A message as a bot hands it over, in any format strata reads (OpenAI Chat Completions,
/// Anthropic Messages, an OpenAI Responses item), and what strata keeps beside it (when it was
/// sent, the bot's own id for it, whether it is pinned).
#[derive(Clone, Debug, PartialEq)]
pub struct Incoming {
    /// What strata reads of it: role, text by the rule of each part type, tool calls in
    /// OpenAI's form, the call it answers.
    pub message: ChatMessage,
    /// The message object as sent (every field, unknown ones included), when `message` does
    /// not say all of it: stored beside the columns and given back field for field.
    pub body: Option<Map<String, Value>>,
    /// When it was sent; `None` stores the time of the append.
    pub timestamp: Option<DateTime<Utc>>,
    /// An idempotency key unique within the session ([`crate::EngineSession::append_with_key`]).
    pub key: Option<String>,
    /// Pinned messages are never compacted.
    pub pinned: bool,
}

/// strata's own keys beside a message's: taken out of the object, kept in columns.
const STRATA_KEYS: [&str; 3] = ["timestamp", "key", "pinned"];

impl From<ChatMessage> for Incoming {
    fn from(message: ChatMessage) -> Incoming {
        Incoming { message, body: None, timestamp: None, key: None, pinned: false }
    }
}

impl Incoming {
    /// Reads a message object in the format its shape says ([`Format::detect`]), with
    /// strata's optional `timestamp` (RFC 3339, or UNIX seconds), `key` and `pinned`.
    ///
    /// Every field is kept: reasoning (`reasoning_content`, `reasoning`, thinking blocks with
    /// their signatures, Responses reasoning items), media (their bytes or URL), `refusal`,
    /// `annotations`, `audio`, and fields strata does not know. What strata reads of it is
    /// one rule per part type ([`strata_wire::text`]): text as itself, media as a placeholder
    /// naming type and size, reasoning not at all. A message that is no format's shape is an
    /// error naming what is wrong.
    pub fn from_json(value: &Value) -> Result<Incoming> {
        let Some(object) = value.as_object() else {
            return Err(invalid(format!("a message is a JSON object, not {}", json_kind(value))));
        };
        Incoming::read(Format::detect(object), object)
    }

    /// [`Incoming::from_json`] for a message the caller says is in `format`.
    pub fn from_json_as(value: &Value, format: Format) -> Result<Incoming> {
        let Some(object) = value.as_object() else {
            return Err(invalid(format!("a message is a JSON object, not {}", json_kind(value))));
        };
        Incoming::read(format, object)
    }

    fn read(format: Format, object: &Map<String, Value>) -> Result<Incoming> {
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
        let key = optional_string(object, "key")?;
        let mut body = object.clone();
        body.retain(|key, _| !STRATA_KEYS.contains(&key.as_str()));
        let turn = Turn::read(format, &body).map_err(|error| invalid(error.to_string()))?;
        let message = ChatMessage::of_turn(&turn);
        // A message the columns say whole, byte for byte (its fields in the order strata
        // writes them), is stored as columns only: most messages of a bot.
        let same = serde_json::to_string(&body).ok() == serde_json::to_string(&message.columns_json()).ok();
        let body = (!same).then_some(body);
        Ok(Incoming { message, body, timestamp, key, pinned })
    }

    /// The message as it goes to its provider: its body as sent, or the columns in OpenAI's
    /// form.
    pub fn to_json(&self) -> Value {
        match &self.body {
            Some(body) => Value::Object(body.clone()),
            None => self.message.columns_json(),
        }
    }

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
            body: self.body.map(|body| Value::Object(body).to_string()),
        }
    }
}

impl ChatMessage {
    /// What strata reads of a turn: its columns.
    fn of_turn(turn: &Turn) -> ChatMessage {
        let role = match turn.speaker {
            Speaker::System | Speaker::Developer => Role::System,
            Speaker::User => Role::User,
            Speaker::Assistant => Role::Assistant,
            Speaker::Tool => Role::Tool,
        };
        let calls: Vec<Value> = turn
            .blocks
            .iter()
            .filter_map(|block| match block {
                Block::Call(call) => Some(strata_wire::openai_call(call)),
                _ => None,
            })
            .collect();
        let text = strata_wire::text::text(&turn.blocks);
        ChatMessage {
            role,
            content: (!text.is_empty() || calls.is_empty()).then_some(text),
            tool_calls: (!calls.is_empty()).then_some(Value::Array(calls)),
            tool_call_id: turn.result_ids().next().map(str::to_owned),
            name: turn.name.clone(),
        }
    }

    /// The columns as the OpenAI message they stand for (what a message without a body is),
    /// its fields in the order strata's JSON Lines write them.
    pub(crate) fn columns_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("role".into(), Value::from(self.role.as_str()));
        object.insert("content".into(), self.content.clone().map_or(Value::Null, Value::String));
        if let Some(calls) = &self.tool_calls {
            object.insert("tool_calls".into(), calls.clone());
        }
        if let Some(id) = &self.tool_call_id {
            object.insert("tool_call_id".into(), Value::from(id.as_str()));
        }
        if let Some(name) = &self.name {
            object.insert("name".into(), Value::from(name.as_str()));
        }
        Value::Object(object)
    }
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidMessage(reason.into())
}

fn optional_string(object: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(invalid(format!("{key:?} must be a string, not {}", json_kind(other)))),
    }
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
        let body = incoming.body.expect("the reply's own fields are kept");
        assert_eq!(
            Value::Object(body).to_string(),
            r#"{"role":"assistant","content":null,"refusal":null,"annotations":[],"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}"#
        );
    }

    #[test]
    fn a_plain_message_is_its_columns_and_keeps_no_body() {
        let plain = Incoming::from_json(&json!({"role": "user", "content": "hi", "key": "k"})).unwrap();
        assert_eq!(plain.body, None);
        assert_eq!(plain.to_json(), json!({"role": "user", "content": "hi"}));
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
    fn every_shape_a_model_sends_is_kept_and_read_by_its_parts() {
        let image = "data:image/png;base64,".to_owned() + &"A".repeat(4000);
        for (message, role, content) in [
            (
                json!({"role": "assistant", "content": "5433.", "reasoning_content": "The port..."}),
                Role::Assistant,
                "5433.",
            ),
            (
                json!({"role": "assistant", "content": "5433.", "reasoning": "The port..."}),
                Role::Assistant,
                "5433.",
            ),
            (json!({"role": "developer", "content": "Be brief."}), Role::System, "Be brief."),
            (
                json!({"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                                   {"type": "image_url", "image_url": {"url": image}}]}),
                Role::User,
                "What is this?\n[image: image/png, 3.0 kB]",
            ),
            (
                json!({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}),
                Role::User,
                "[audio: wav, 3 B]",
            ),
            (
                json!({"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Check.", "signature": "sig=="},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "memory_grep", "input": {"query": "port"}}]}),
                Role::Assistant,
                "Let me look.",
            ),
            (
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "5433"}]}),
                Role::Tool,
                "5433",
            ),
            (
                json!({"type": "function_call", "call_id": "call_9", "name": "memory_grep", "arguments": "{}"}),
                Role::Assistant,
                "",
            ),
            (
                json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}),
                Role::Assistant,
                "",
            ),
            (json!({"role": "user", "content": "x", "x_vendor": {"a": 1}}), Role::User, "x"),
        ] {
            let incoming = Incoming::from_json(&message).unwrap_or_else(|e| panic!("{message}: {e}"));
            assert_eq!(incoming.message.role, role, "{message}");
            assert_eq!(incoming.message.content.as_deref().unwrap_or_default(), content, "{message}");
            assert_eq!(incoming.to_json(), message, "kept whole: {message}");
        }
    }

    #[test]
    fn each_mistake_is_named() {
        for (message, words) in [
            (json!({"role": "robot", "content": "x"}), "robot"),
            (json!({"content": "x"}), "needs a \"role\""),
            (json!({"role": "user"}), "needs \"content\""),
            (json!({"role": "user", "content": 1}), "must be a string, a list of parts or null"),
            (json!({"role": "user", "content": [{"type": "image_url"}]}), "image_url"),
            (json!({"role": "tool", "content": "x"}), "tool_call_id"),
            (json!({"role": "user", "content": "x", "timestamp": "noon"}), "RFC 3339"),
            (json!({"role": "user", "content": "x", "timestamp": -5}), "UNIX time"),
            (json!({"role": "user", "content": "x", "pinned": "yes"}), "true or false"),
            (json!({"role": "user", "content": "x", "name": 3}), "\"name\" must be a string"),
            (json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}), "signature"),
            (json!(["user", "x"]), "JSON object, not a list"),
        ] {
            let error = Incoming::from_json(&message).unwrap_err().to_string();
            assert!(error.contains(words), "{message}: {error}");
        }
    }
}
