//! Claude Code session files: the JSON Lines Claude Code writes under
//! `~/.claude/projects/<project path with / as ->/<session id>.jsonl`.
//!
//! Each line is an entry with a `type`. `user` and `assistant` entries carry an Anthropic
//! Messages API message (`message.role`, `message.content`: text, or a list of blocks) with the
//! entry's `uuid`, `parentUuid`, `sessionId` and `timestamp`; the other types (`summary`,
//! `system`, `file-history-snapshot`, `queue-operation`, `progress`, ...) are the tool's own
//! bookkeeping, not conversation, and are passed over.
//!
//! The mapping to the OpenAI shape strata stores: a `text` block is text; a `tool_use` block
//! (`id`, `name`, `input`) is a tool call whose arguments are the input's JSON; a `tool_result`
//! block (`tool_use_id`, `content`) in a user entry is a tool message answering that call, named
//! after its tool; Claude Code writes one line per block of one API message, so consecutive
//! assistant lines of one `message.id` become one assistant message (their texts joined by a
//! blank line). A message with thinking (its signature included), an image or a document is
//! kept whole as the Anthropic message it was (the body strata stores beside the columns, read
//! by the one rule of `Incoming`: media as a placeholder naming type and size); an image in a
//! user entry that also carries tool results stays a placeholder (`[image: image/png]`).
//! Sessions are the entries' `sessionId`; a subagent's entries (`isSidechain`) go to a session
//! of their own, `<sessionId>/<agentId or sidechain>`. Ids are the entries' `uuid` (`<uuid>#2`
//! for a second message of one entry), so a re-run, or a longer version of the file, adds only
//! what is new.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value};
use strata_seam::Role;

use crate::import::{
    Bad, Collected, ImportError, ImportOptions, IncomingMessage, message, numbered_lines, parse_time,
    tool_call,
};
use crate::{Format, Incoming};

pub(crate) fn read(
    text: &str,
    path: &Path,
    options: &ImportOptions,
) -> Result<Vec<IncomingMessage>, ImportError> {
    let mut reader = Reader {
        collected: Collected::new(options),
        tool_names: HashMap::new(),
        open_assistant: None,
        open_blocks: Vec::new(),
    };
    for (line, text) in numbered_lines(text) {
        reader.line(text).map_err(|source| ImportError::Line { path: path.to_owned(), line, source })?;
    }
    Ok(reader.collected.finish())
}

struct Reader<'a> {
    collected: Collected<'a>,
    /// The tool of each call seen, to name its result.
    tool_names: HashMap<String, String>,
    /// The API message id and session of the assistant message added last, while nothing has
    /// followed it: its next lines are more blocks of it.
    open_assistant: Option<(String, String)>,
    /// The blocks of that message so far, every kind.
    open_blocks: Vec<Value>,
}

/// Whether blocks hold more than text and tool calls (thinking, media): kept whole as a body.
fn needs_body(blocks: &[Value]) -> bool {
    blocks.iter().any(|block| !matches!(block.get("type").and_then(Value::as_str), Some("text" | "tool_use")))
}

/// `message` with its columns read from `body` (an Anthropic message) and the body kept.
fn with_body(mut message: strata_seam::NewMessage, body: Value) -> Result<strata_seam::NewMessage, Bad> {
    let incoming = Incoming::from_json_as(&body, Format::Anthropic).map_err(Bad::message)?;
    message.role = incoming.message.role;
    message.content = incoming.message.content.unwrap_or_default();
    message.tool_calls = incoming.message.tool_calls;
    message.body = incoming.body.map(|body| Value::Object(body).to_string());
    Ok(message)
}

/// A required string field.
fn string<'v>(object: &'v Map<String, Value>, key: &str) -> Result<&'v str, Bad> {
    object
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Bad::shape(format!("an entry needs a {key:?} string")))
}

impl Reader<'_> {
    fn line(&mut self, text: &str) -> Result<(), Bad> {
        let value: Value = serde_json::from_str(text).map_err(Bad::Json)?;
        let Value::Object(entry) = value else { return Err(Bad::shape("an entry is a JSON object")) };
        let kind = string(&entry, "type")?;
        let role = match kind {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            // The tool's bookkeeping: summaries, system notices, file snapshots, queue events.
            _ => return Ok(()),
        };
        let uuid = string(&entry, "uuid")?;
        let mut session = string(&entry, "sessionId")?.to_owned();
        if entry.get("isSidechain").and_then(Value::as_bool) == Some(true) {
            let agent = entry.get("agentId").and_then(Value::as_str).unwrap_or("sidechain");
            session = format!("{session}/{agent}");
        }
        let time = parse_time(string(&entry, "timestamp")?)?;
        let Some(Value::Object(api)) = entry.get("message") else {
            return Err(Bad::shape("a user or assistant entry needs a \"message\" object"));
        };
        let blocks: Vec<Value> = match api.get("content") {
            Some(Value::String(text)) => vec![serde_json::json!({"type": "text", "text": text})],
            Some(Value::Array(blocks)) => blocks.clone(),
            _ => return Err(Bad::shape("\"message.content\" must be text or a list of blocks")),
        };
        match role {
            Role::Assistant => {
                let api_id = api.get("id").and_then(Value::as_str).unwrap_or(uuid).to_owned();
                self.assistant(&session, uuid, &api_id, &blocks, time)
            }
            _ => self.user(&session, uuid, &blocks, time),
        }
    }

    fn assistant(
        &mut self,
        session: &str,
        uuid: &str,
        api_id: &str,
        blocks: &[Value],
        time: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), Bad> {
        let continues =
            self.open_assistant.as_ref().is_some_and(|(id, open)| id == api_id && open == session);
        let mut all_blocks = if continues { std::mem::take(&mut self.open_blocks) } else { Vec::new() };
        all_blocks.extend(blocks.iter().cloned());
        let mut texts = Vec::new();
        let mut calls = Vec::new();
        for block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    texts.push(block.get("text").and_then(Value::as_str).unwrap_or_default().to_owned())
                }
                Some("tool_use") => {
                    let id = block
                        .get("id")
                        .and_then(Value::as_str)
                        .ok_or_else(|| Bad::shape("a tool_use block needs an \"id\""))?;
                    let name = block
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| Bad::shape("a tool_use block needs a \"name\""))?;
                    self.tool_names.insert(id.to_owned(), name.to_owned());
                    calls.push(tool_call(id, name, block.get("input").unwrap_or(&Value::Null)));
                }
                // Private reasoning, not part of what was said.
                Some("thinking" | "redacted_thinking") => {}
                _ => texts.push(placeholder(block)),
            }
        }
        if needs_body(&all_blocks) {
            let body = serde_json::json!({"role": "assistant", "content": all_blocks});
            self.open_blocks = all_blocks;
            let new = with_body(message(Role::Assistant, String::new(), time), body)?;
            if continues && let Some(last) = self.collected.last_mut() {
                (last.content, last.tool_calls, last.body) = (new.content, new.tool_calls, new.body);
                return last.validate().map_err(Bad::store);
            }
            self.collected.push(session, uuid.to_owned(), new)?;
            self.open_assistant = Some((api_id.to_owned(), session.to_owned()));
            return Ok(());
        }
        self.open_blocks = all_blocks;
        if texts.is_empty() && calls.is_empty() {
            return Ok(());
        }
        let text = texts.join("\n\n");
        if continues && let Some(last) = self.collected.last_mut() {
            if !text.is_empty() {
                if !last.content.is_empty() {
                    last.content.push_str("\n\n");
                }
                last.content.push_str(&text);
            }
            if !calls.is_empty() {
                let mut all = last.tool_calls.take().and_then(|c| c.as_array().cloned()).unwrap_or_default();
                all.extend(calls);
                last.tool_calls = Some(Value::Array(all));
            }
            return last.validate().map_err(Bad::store);
        }
        let mut new = message(Role::Assistant, text, time);
        new.tool_calls = (!calls.is_empty()).then_some(Value::Array(calls));
        self.collected.push(session, uuid.to_owned(), new)?;
        self.open_assistant = Some((api_id.to_owned(), session.to_owned()));
        Ok(())
    }

    fn user(
        &mut self,
        session: &str,
        uuid: &str,
        blocks: &[Value],
        time: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), Bad> {
        self.open_assistant = None;
        let results =
            blocks.iter().any(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"));
        if !results && needs_body(blocks) {
            let body = serde_json::json!({"role": "user", "content": blocks});
            return self.collected.push(
                session,
                uuid.to_owned(),
                with_body(message(Role::User, String::new(), time), body)?,
            );
        }
        let mut count = 0;
        let mut id = || {
            count += 1;
            if count == 1 { uuid.to_owned() } else { format!("{uuid}#{count}") }
        };
        let mut texts: Vec<String> = Vec::new();
        for block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    texts.push(block.get("text").and_then(Value::as_str).unwrap_or_default().to_owned())
                }
                Some("tool_result") => {
                    // Text said before a result stays before it.
                    if !texts.is_empty() {
                        self.collected.push(session, id(), message(Role::User, texts.join("\n\n"), time))?;
                        texts.clear();
                    }
                    let call = block
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .ok_or_else(|| Bad::shape("a tool_result block needs a \"tool_use_id\""))?;
                    let mut result = message(Role::Tool, result_text(block.get("content")), time);
                    result.tool_call_id = Some(call.to_owned());
                    result.name = self.tool_names.get(call).cloned();
                    self.collected.push(session, id(), result)?;
                }
                _ => texts.push(placeholder(block)),
            }
        }
        if !texts.is_empty() {
            self.collected.push(session, id(), message(Role::User, texts.join("\n\n"), time))?;
        }
        Ok(())
    }
}

/// The text of a tool result: text, or a list of blocks.
fn result_text(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|block| match block.get("type").and_then(Value::as_str) {
                Some("text") => block.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
                _ => placeholder(block),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}

/// What stands for a block strata cannot store as text (an image, a document).
fn placeholder(block: &Value) -> String {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("block");
    match block.pointer("/source/media_type").and_then(Value::as_str) {
        Some(media) => format!("[{kind}: {media}]"),
        None => format!("[{kind}]"),
    }
}
