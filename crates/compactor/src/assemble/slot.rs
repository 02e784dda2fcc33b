//! One message of the context as sent: its OpenAI-format value, what it costs, and its stored
//! body, for the messages shown as stored, as stubs, or with the preamble.
//!
//! Every later stage moves these slots around and sums their tokens; none renders a message
//! again. A message sent as stored costs what was counted when it was stored, so a call never
//! tokenizes the whole buffer. Calls whose result was never stored are answered here, since a
//! provider refuses a request holding an unanswered call.

use std::collections::HashSet;

use serde_json::{Value, json};
use strata_seam::{Message, Role};

use super::context::{ContextEntry, Original, Part};
use crate::tokens::{TOKENS_PER_REPLY, TokenCounter};
use crate::tool_names::{self, ToolNames};

/// A message in the OpenAI format. An assistant message that only calls tools has `content: ""`:
/// OpenAI accepts `null` or `""`, but llama.cpp's server answers `null` with HTTP 500 and then
/// fails every later request of the session, so the one form every server takes is sent.
fn wire(message: &Message, content: &str) -> Value {
    if content == message.content
        && let Some(value) = message.body.as_deref().and_then(|body| as_sent(message, body))
    {
        return value;
    }
    let mut value = json!({ "role": message.role.as_str() });
    value["content"] = Value::String(content.to_owned());
    if let Some(name) = &message.name {
        value["name"] = Value::String(name.clone());
    }
    if let Some(calls) = &message.tool_calls {
        value["tool_calls"] = calls.clone();
    }
    if let Some(id) = &message.tool_call_id {
        value["tool_call_id"] = Value::String(id.clone());
    }
    value
}

/// An OpenAI-format message with a body, as its provider takes it back: the body less the
/// reply's own fields, with reasoning by DeepSeek's rule (`reasoning_content` goes back beside
/// tool calls; other reasoning stays out). A body of another format is sent as its columns
/// here; `strata_wire::render` says it in that format.
fn as_sent(message: &Message, body: &str) -> Option<Value> {
    let turn = strata_wire::Turn::parse(body).ok()?;
    if !matches!(turn.original, Some((strata_wire::Format::OpenAi, _))) {
        return None;
    }
    let rendered = strata_wire::render::message(
        &turn,
        strata_wire::Format::OpenAi,
        &strata_wire::RenderOptions::default(),
    );
    // A message this context cannot show as one (it never is, for the OpenAI format) falls back.
    match rendered.as_slice() {
        [one] if message.role != Role::Tool || one["role"] == "tool" => Some(one.clone()),
        _ => None,
    }
}

/// What a tool call whose result was never stored is answered with in the context.
const MISSING_RESULT: &str = strata_wire::MISSING_RESULT;

/// The calls a stored message answers: its `tool_call_id`, and for a body holding several
/// (an Anthropic user message of tool results) every one.
fn result_ids(message: &Message) -> Vec<String> {
    let from_body = message
        .body
        .as_deref()
        .filter(|_| message.role == Role::Tool)
        .and_then(|body| strata_wire::Turn::parse(body).ok())
        .map(|turn| turn.result_ids().map(str::to_owned).collect::<Vec<_>>());
    from_body.unwrap_or_else(|| message.tool_call_id.iter().cloned().collect())
}

/// The messages with every tool call answered. A call whose result was never stored (the
/// process died between storing the call and its result) gets a placeholder result right
/// after the results that do exist: providers reject a request holding an unanswered call,
/// and the stored conversation itself is never rewritten.
///
/// A placeholder costs its own tokens (counted here), not its call's message, and is built
/// without copying that message, so a turn of N parallel calls costs time linear in N (it was
/// quadratic: each of 10,000 placeholders cloned and was counted at the size of the message
/// holding all 10,000 calls).
pub(super) fn answer_every_call(messages: &[Message], counter: &TokenCounter) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    // The calls of the latest assistant message with calls, in order, and the ids of the
    // results seen since.
    let mut unanswered: Vec<(&str, &Message)> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let answer =
        |unanswered: &mut Vec<(&str, &Message)>, answered: &mut HashSet<String>, out: &mut Vec<Message>| {
            for (id, call) in unanswered.drain(..) {
                if answered.contains(id) {
                    continue;
                }
                out.push(Message {
                    id: call.id,
                    session_id: call.session_id,
                    seq: call.seq,
                    role: Role::Tool,
                    content: MISSING_RESULT.to_owned(),
                    tool_calls: None,
                    tool_call_id: Some(id.to_owned()),
                    name: None,
                    created_at: call.created_at,
                    token_count: counter.message(MISSING_RESULT, None, Some(id), None),
                    pinned: call.pinned,
                    summary_id: call.summary_id,
                    body: None,
                });
            }
            answered.clear();
        };
    for message in messages {
        // The items of one Responses reply (a call each) make one run of calls until a
        // result comes.
        let more_calls =
            message.role == Role::Assistant && message.tool_calls.is_some() && answered.is_empty();
        match &message.role {
            Role::Tool => answered.extend(result_ids(message)),
            _ if more_calls => {}
            _ => answer(&mut unanswered, &mut answered, &mut out),
        }
        out.push(message.clone());
        if let Some(calls) = message.tool_calls.as_ref().and_then(Value::as_array) {
            unanswered.extend(calls.iter().filter_map(|call| call["id"].as_str()).map(|id| (id, message)));
        }
    }
    answer(&mut unanswered, &mut answered, &mut out);
    out
}

pub(super) fn stub(message: &Message, tokens: u32, names: Option<&ToolNames>) -> String {
    let preview: String = message.content.split_whitespace().take(40).collect::<Vec<_>>().join(" ");
    let preview = crate::summarizer::truncate_chars(&preview, 240);
    format!(
        "[message {id} (seq {seq}, {role}) is {tokens} tokens, too large to show here. It is stored whole{how}. \
         It begins: {preview}]",
        how = tool_names::read_whole(names, message.id),
        id = message.id,
        seq = message.seq,
        role = message.role,
    )
}

/// A message being laid out: wire form, token cost and origin.
#[derive(Clone)]
pub(super) struct Slot {
    pub(super) value: Value,
    pub(super) entry: ContextEntry,
    pub(super) original: Option<Original>,
}

impl Slot {
    pub(super) fn message(
        message: &Message,
        content: &str,
        part: Part,
        abridged: bool,
        counter: &TokenCounter,
    ) -> Slot {
        // A message sent as stored costs what was counted when it was stored (with the same
        // rule, `TokenCounter::count_new`): tokenizing the whole buffer again on every call was
        // most of the time `prepare_context` took. Only a stub is counted here.
        let tokens = if content == message.content {
            message.token_count
        } else {
            counter.message(
                content,
                message.tool_calls.as_ref(),
                message.tool_call_id.as_deref(),
                message.name.as_deref(),
            )
        };
        Slot {
            value: wire(message, content),
            entry: ContextEntry {
                part,
                message_id: Some(message.id),
                seq: Some(message.seq),
                tokens,
                abridged,
            },
            original: message
                .body
                .clone()
                .map(|body| Original { body, text_changed: abridged || content != message.content }),
        }
    }

    pub(super) fn text(role: Role, content: String, part: Part, counter: &TokenCounter) -> Slot {
        let tokens = counter.message(&content, None, None, None);
        Slot {
            value: json!({ "role": role.as_str(), "content": content }),
            entry: ContextEntry { part, message_id: None, seq: None, tokens, abridged: part == Part::Buffer },
            original: None,
        }
    }
}

/// Tokens of the slots.
pub(super) fn sum(slots: &[Slot]) -> u32 {
    slots.iter().map(|slot| slot.entry.tokens).sum()
}

/// Tokens of the slots as a request: with the reply priming.
pub(super) fn total(slots: &[Slot]) -> u32 {
    sum(slots) + TOKENS_PER_REPLY
}
