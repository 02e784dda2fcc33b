//! ChatGPT's data export: `conversations.json`, a list of conversations, each a tree of
//! messages.
//!
//! A conversation has an `id` (or `conversation_id`), a `title`, a `create_time`, a `mapping`
//! from node ids to nodes (`message`, `parent`, `children`) and a `current_node`: the leaf of
//! the branch the user last saw. Edited prompts and regenerated answers are other branches of
//! the tree; the import takes the current branch, from the root down to `current_node`, as the
//! conversation (one session per conversation, keyed by its id).
//!
//! A message has an `id`, an `author` (`role`: system, user, assistant or tool; `name` for a
//! tool: `python`, `browser`, `dalle.text2im`, ...), a `create_time` (UNIX seconds, or null), a
//! `content` with a `content_type` and a `recipient`. Text is `content.parts` joined by
//! newlines (`text`, `multimodal_text`, whose image parts are kept as a placeholder with what
//! the export says of them: `[image: file-service://file-Xy12, 1024x768, 80.2 kB]`; the export
//! holds no image bytes); a message's attachments (`metadata.attachments`) are kept the same
//! way (`[attachment report.pdf: application/pdf, 1.2 MB]`);
//! `code`, `execution_output` and `system_error` carry `content.text`; a browsing display its
//! `result`; a quote its `title`, `url` and `text`. An assistant message addressed to a tool
//! (`recipient` other than `all`) is a tool call (its text the call's input), answered by the
//! next tool message; thoughts and reasoning recaps (the model's private reasoning) are not
//! kept, nor empty messages, such as the hidden system message at the root. Ids are the
//! messages' own, so a re-run adds nothing.

use std::collections::HashSet;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use strata_seam::Role;

use crate::import::{Bad, Collected, ImportError, ImportOptions, IncomingMessage, message, tool_call};

pub(crate) fn read(
    text: &str,
    path: &Path,
    options: &ImportOptions,
) -> Result<Vec<IncomingMessage>, ImportError> {
    let item = |at: String, source| ImportError::Item { path: path.to_owned(), at, source };
    let document: Value = serde_json::from_str(text).map_err(|e| item("the file".into(), Bad::Json(e)))?;
    let conversations = match &document {
        Value::Array(conversations) => conversations.as_slice(),
        Value::Object(_) => std::slice::from_ref(&document),
        _ => return Err(item("the file".into(), Bad::shape("expected a list of conversations"))),
    };
    let mut collected = Collected::new(options);
    for (index, conversation) in conversations.iter().enumerate() {
        let id = conversation
            .get("conversation_id")
            .or_else(|| conversation.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let at = |message: Option<&str>| {
            let mut at = format!("conversation {}", index + 1);
            if let Some(id) = &id {
                at.push_str(&format!(" ({id})"));
            }
            if let Some(message) = message {
                at.push_str(&format!(", message {message}"));
            }
            at
        };
        let Some(id) = id.clone() else {
            return Err(item(at(None), Bad::shape("a conversation needs an \"id\" or \"conversation_id\"")));
        };
        let start =
            conversation.get("create_time").and_then(Value::as_f64).and_then(time).unwrap_or(options.now);
        let branch = current_branch(conversation).map_err(|e| item(at(None), e))?;
        let mut pending_call: Option<String> = None;
        for node in branch {
            let Some(Value::Object(message)) = node.get("message") else { continue };
            let message_id = message.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
            read_message(message, &id, start, &mut pending_call, &mut collected)
                .map_err(|e| item(at(Some(&message_id)), e))?;
        }
    }
    Ok(collected.finish())
}

/// UNIX seconds as a time, if they are one.
fn time(seconds: f64) -> Option<DateTime<Utc>> {
    if !seconds.is_finite() || !(0.0..=253_402_300_799.0).contains(&seconds) {
        return None;
    }
    let whole = seconds.floor();
    DateTime::from_timestamp(whole as i64, ((seconds - whole) * 1e9).round().min(999_999_999.0) as u32)
}

/// The nodes from the root down to `current_node`.
fn current_branch(conversation: &Value) -> Result<Vec<&Value>, Bad> {
    let Some(Value::Object(mapping)) = conversation.get("mapping") else {
        return Err(Bad::shape("a conversation needs a \"mapping\" of its messages"));
    };
    let leaf = match conversation.get("current_node").and_then(Value::as_str) {
        Some(leaf) => leaf.to_owned(),
        // No current node: the branch that ends last in the mapping's order.
        None => match mapping
            .iter()
            .rev()
            .find(|(_, node)| node.get("children").and_then(Value::as_array).is_none_or(Vec::is_empty))
        {
            Some((id, _)) => id.clone(),
            None => return Ok(Vec::new()),
        },
    };
    let mut branch = Vec::new();
    let mut seen = HashSet::new();
    let mut at = Some(leaf);
    while let Some(id) = at {
        if !seen.insert(id.clone()) {
            return Err(Bad::shape(format!("the messages' parents form a loop at {id:?}")));
        }
        let node =
            mapping.get(&id).ok_or_else(|| Bad::shape(format!("node {id:?} is not in the mapping")))?;
        branch.push(node);
        at = node.get("parent").and_then(Value::as_str).map(str::to_owned);
    }
    branch.reverse();
    Ok(branch)
}

fn read_message(
    message: &Map<String, Value>,
    session: &str,
    start: DateTime<Utc>,
    pending_call: &mut Option<String>,
    collected: &mut Collected<'_>,
) -> Result<(), Bad> {
    let id =
        message.get("id").and_then(Value::as_str).ok_or_else(|| Bad::shape("a message needs an \"id\""))?;
    let author = message.get("author").ok_or_else(|| Bad::shape("a message needs an \"author\""))?;
    let role = match author.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system") => Role::System,
        Some("tool") => Role::Tool,
        other => {
            return Err(Bad::shape(format!("author role {other:?} is not system, user, assistant or tool")));
        }
    };
    let when = message.get("create_time").and_then(Value::as_f64).and_then(time).unwrap_or(start);
    let Some(mut text) = content_text(message.get("content").unwrap_or(&Value::Null)) else { return Ok(()) };
    if let Some(attachments) =
        message.get("metadata").and_then(|m| m.get("attachments")).and_then(Value::as_array)
    {
        for attachment in attachments {
            text.push('\n');
            text.push_str(&attachment_placeholder(attachment));
        }
    }
    let recipient = message.get("recipient").and_then(Value::as_str).unwrap_or("all");
    if role == Role::Assistant && recipient != "all" {
        let mut call = self::message(Role::Assistant, "", when);
        call.tool_calls = Some(Value::Array(vec![tool_call(id, recipient, &Value::String(text))]));
        *pending_call = Some(id.to_owned());
        return collected.push(session, id.to_owned(), call);
    }
    if text.trim().is_empty() {
        return Ok(());
    }
    let mut new = self::message(role, text, when);
    if role == Role::Tool {
        new.tool_call_id = pending_call.take();
        new.name = author.get("name").and_then(Value::as_str).map(str::to_owned);
    } else {
        *pending_call = None;
    }
    collected.push(session, id.to_owned(), new)
}

/// The text of a message's content; `None` for what is not kept (reasoning).
/// What the export says of an image: where it is, its size in pixels and in bytes.
fn image_placeholder(part: &Map<String, Value>) -> String {
    let mut facts = Vec::new();
    if let Some(pointer) = part.get("asset_pointer").and_then(Value::as_str) {
        facts.push(pointer.to_owned());
    }
    if let (Some(width), Some(height)) =
        (part.get("width").and_then(Value::as_u64), part.get("height").and_then(Value::as_u64))
    {
        facts.push(format!("{width}x{height}"));
    }
    if let Some(bytes) = part.get("size_bytes").and_then(Value::as_u64) {
        facts.push(strata_wire::text::size(bytes));
    }
    format!("[image: {}]", facts.join(", "))
}

/// What the export says of an attached file: its name, type and size.
fn attachment_placeholder(attachment: &Value) -> String {
    let name = attachment.get("name").and_then(Value::as_str).unwrap_or("file");
    let mut facts = Vec::new();
    if let Some(mime) = attachment.get("mime_type").and_then(Value::as_str) {
        facts.push(mime.to_owned());
    }
    if let Some(bytes) = attachment.get("size").and_then(Value::as_u64) {
        facts.push(strata_wire::text::size(bytes));
    }
    format!("[attachment {name}: {}]", facts.join(", "))
}

fn content_text(content: &Value) -> Option<String> {
    let field = |key: &str| content.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    match content.get("content_type").and_then(Value::as_str).unwrap_or("text") {
        "thoughts" | "reasoning_recap" => None,
        "tether_browsing_display" => Some(field("result")),
        "tether_quote" => Some(
            [field("title"), field("url"), field("text")]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        "user_editable_context" => Some(
            [field("user_profile"), field("user_instructions")]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("\n\n"),
        ),
        _ => match content.get("parts") {
            Some(Value::Array(parts)) => Some(
                parts
                    .iter()
                    .map(|part| match part {
                        Value::String(text) => text.clone(),
                        Value::Object(object) => match object.get("text").and_then(Value::as_str) {
                            Some(text) => text.to_owned(),
                            None if object.get("content_type").and_then(Value::as_str)
                                == Some("image_asset_pointer") =>
                            {
                                image_placeholder(object)
                            }
                            None => format!(
                                "[{}]",
                                object.get("content_type").and_then(Value::as_str).unwrap_or("part")
                            ),
                        },
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => Some(field("text")),
        },
    }
}
