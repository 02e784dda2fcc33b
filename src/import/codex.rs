//! Codex CLI rollout files: the JSON Lines Codex writes to
//! `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`.
//!
//! Each line is `{"timestamp", "type", "payload"}`. A `session_meta` line names the session
//! (`payload.id`); `response_item` lines carry the conversation in the Responses API's items:
//! `message` (`role` user, assistant, developer or system; `content` a list of `input_text` /
//! `output_text` parts), `function_call` (`name`, `arguments` as JSON text, `call_id`),
//! `custom_tool_call` (`name`, `input`, `call_id`), `local_shell_call` (`call_id`, `action`) and
//! their outputs (`function_call_output`, `custom_tool_call_output`: `call_id`, `output`). The
//! other lines (`event_msg`, `turn_context`, `compacted`) repeat or describe the conversation
//! and are passed over, as are `web_search_call` items (their results never come back as an
//! item). A `reasoning` item (its summary, its encrypted content) is kept whole as a message of
//! its own, as the Responses API sent it: never searched or summarized, sent back in a tool loop
//! when the context is rendered for the Responses API.
//! Older rollouts wrote the items bare, one per line, after a first line `{"id", "timestamp"}`:
//! both are read.
//!
//! A developer message is a system message. Consecutive calls are one assistant message with
//! several tool calls, and each output is a tool message answering its `call_id`, named after
//! the call's tool. An `input_image` part is kept as the placeholder `[input_image]`. Ids are
//! `L<line>` (a call joined to the message of the line before is part of that message), so a
//! re-run, or a longer version of the rollout, adds only what is new.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use strata_seam::Role;

use crate::import::{
    Bad, Collected, ImportError, ImportOptions, IncomingMessage, message, numbered_lines, parse_time, stem,
    tool_call,
};

pub(crate) fn read(
    text: &str,
    path: &Path,
    options: &ImportOptions,
) -> Result<Vec<IncomingMessage>, ImportError> {
    let mut reader = Reader {
        collected: Collected::new(options),
        session: stem(path),
        tool_names: HashMap::new(),
        open_calls: false,
        now: options.now,
    };
    for (line, text) in numbered_lines(text) {
        reader.line(line, text).map_err(|source| ImportError::Line {
            path: path.to_owned(),
            line,
            source,
        })?;
    }
    Ok(reader.collected.finish())
}

struct Reader<'a> {
    collected: Collected<'a>,
    session: String,
    tool_names: HashMap<String, String>,
    /// The message added last is an assistant message of calls only: the next call joins it.
    open_calls: bool,
    now: chrono::DateTime<chrono::Utc>,
}

fn text_of<'v>(item: &'v Value, key: &str) -> Result<&'v str, Bad> {
    item.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Bad::shape(format!("a {} item needs a {key:?} string", kind(item))))
}

fn kind(item: &Value) -> &str {
    item.get("type").and_then(Value::as_str).unwrap_or("untyped")
}

impl Reader<'_> {
    fn line(&mut self, number: usize, text: &str) -> Result<(), Bad> {
        let line: Value = serde_json::from_str(text).map_err(Bad::Json)?;
        if !line.is_object() {
            return Err(Bad::shape("a rollout line is a JSON object"));
        }
        let time = match line.get("timestamp").and_then(Value::as_str) {
            Some(stamp) => parse_time(stamp)?,
            None => self.now,
        };
        let item = match (line.get("type").and_then(Value::as_str), line.get("payload")) {
            (Some("session_meta"), Some(meta)) => {
                self.session = text_of(meta, "id")?.to_owned();
                return Ok(());
            }
            (Some("response_item"), Some(item)) => item,
            (Some(_), Some(_)) => return Ok(()),
            // An older rollout: the first line names the session, the items come bare.
            (None, None) if line.get("id").is_some() && line.get("timestamp").is_some() => {
                self.session = text_of(&line, "id")?.to_owned();
                return Ok(());
            }
            (_, None) if line.get("record_type").is_some() => return Ok(()),
            (Some(_), None) => &line,
            (None, _) => return Err(Bad::shape("a rollout line needs a \"type\"")),
        };
        self.item(number, item, time)
    }

    fn item(&mut self, number: usize, item: &Value, time: chrono::DateTime<chrono::Utc>) -> Result<(), Bad> {
        let id = format!("L{number}");
        let session = self.session.clone();
        match kind(item) {
            "message" => {
                let role = match text_of(item, "role")? {
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    "system" | "developer" => Role::System,
                    other => return Err(Bad::shape(format!("a message of role {other:?} cannot be stored"))),
                };
                let text = match item.get("content") {
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .map(|part| match part.get("text").and_then(Value::as_str) {
                            Some(text) => text.to_owned(),
                            None => format!("[{}]", kind(part)),
                        })
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => return Err(Bad::shape("a message item needs \"content\": a list of parts")),
                };
                self.open_calls = false;
                self.collected.push(&session, id, message(role, text, time))
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let call = text_of(item, "call_id")?;
                let (name, input) = match kind(item) {
                    "function_call" => {
                        (text_of(item, "name")?, item.get("arguments").unwrap_or(&Value::Null))
                    }
                    "custom_tool_call" => (text_of(item, "name")?, item.get("input").unwrap_or(&Value::Null)),
                    _ => ("local_shell", item.get("action").unwrap_or(&Value::Null)),
                };
                self.tool_names.insert(call.to_owned(), name.to_owned());
                let call = tool_call(call, name, input);
                if self.open_calls
                    && let Some(last) = self.collected.last_mut()
                {
                    let mut calls =
                        last.tool_calls.take().and_then(|c| c.as_array().cloned()).unwrap_or_default();
                    calls.push(call);
                    last.tool_calls = Some(Value::Array(calls));
                    return last.validate().map_err(Bad::store);
                }
                let mut new = message(Role::Assistant, "", time);
                new.tool_calls = Some(Value::Array(vec![call]));
                self.open_calls = true;
                self.collected.push(&session, id, new)
            }
            "function_call_output" | "custom_tool_call_output" => {
                let call = text_of(item, "call_id")?;
                let output = match item.get("output") {
                    Some(Value::String(text)) => text.clone(),
                    None | Some(Value::Null) => String::new(),
                    Some(other) => other.to_string(),
                };
                let mut result = message(Role::Tool, output, time);
                result.tool_call_id = Some(call.to_owned());
                result.name = self.tool_names.get(call).cloned();
                self.open_calls = false;
                self.collected.push(&session, id, result)
            }
            "reasoning" => {
                let incoming =
                    crate::Incoming::from_json_as(item, crate::Format::Responses).map_err(Bad::message)?;
                let mut kept = message(Role::Assistant, "", time);
                kept.body = incoming.body.map(|body| Value::Object(body).to_string());
                self.open_calls = false;
                self.collected.push(&session, id, kept)
            }
            // Web searches whose results never come back as items.
            _ => Ok(()),
        }
    }
}
