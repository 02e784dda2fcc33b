//! A conversation rendered in a format: pairing repaired, reasoning sent by each provider's
//! rule, turns merged or split as the format wants.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::error::WireError;
use crate::format::Format;
use crate::turn::{Block, Call, Media, MediaKind, ReasoningKind, Source, Speaker, ToolResult, Turn};

/// What a call left without a result is answered with (the process stopped before the
/// result was stored): providers refuse a request holding an unanswered call.
pub const MISSING_RESULT: &str =
    "[no result was stored for this tool call: the process stopped before it finished]";

/// How to render.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// Send every reasoning part back, not only what its provider asks for (DeepSeek's
    /// `reasoning_content` on tool calls; Anthropic's thinking and Responses reasoning items
    /// of the current tool loop).
    pub keep_reasoning: bool,
    /// Turn counts after which a provider's prompt cache may store a prefix: Anthropic's
    /// `cache_control` breakpoints go on the last block before each (at most 4 are used).
    pub cache_breakpoints: Vec<usize>,
}

/// A conversation in a format.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rendered {
    /// Anthropic's `system` parameter (a list of text blocks); `None` in the other formats,
    /// where system messages stay messages.
    pub system: Option<Value>,
    /// The messages (Responses: the input items).
    pub messages: Vec<Value>,
}

/// Renders `turns` in `format`. Calls and results are paired first ([`pair`]), so what comes
/// out is a request the provider accepts whatever was stored.
pub fn render(turns: &[Turn], format: Format, options: &RenderOptions) -> Result<Rendered, WireError> {
    let (turns, origins): (Vec<Turn>, Vec<usize>) = paired(turns).into_iter().unzip();
    // The breakpoints counted in the turns given, moved past what pairing put among them.
    let cache_breakpoints = options
        .cache_breakpoints
        .iter()
        .map(|&after| origins.iter().rposition(|&origin| origin + 1 == after).map_or(after, |at| at + 1))
        .collect();
    let options = &RenderOptions { keep_reasoning: options.keep_reasoning, cache_breakpoints };
    let loop_start = turns.iter().rposition(|turn| turn.speaker == Speaker::User).map_or(0, |i| i + 1);
    let context = Context { options, loop_start };
    Ok(match format {
        Format::OpenAi => openai(&turns, &context),
        Format::Anthropic => anthropic(&turns, &context),
        Format::Responses => responses(&turns, &context),
    })
}

/// One turn alone in `format`, as it would go back inside a conversation, without pairing:
/// reasoning by its provider's rule as if the turn were in the current tool loop. An
/// Anthropic user message of several results is several OpenAI tool messages.
pub fn message(turn: &Turn, format: Format, options: &RenderOptions) -> Vec<Value> {
    let context = Context { options, loop_start: 0 };
    let turns = std::slice::from_ref(turn);
    match format {
        Format::OpenAi => openai_turn(turn, 0, &context),
        Format::Anthropic => anthropic(turns, &context).messages,
        Format::Responses => responses(turns, &context).messages,
    }
}

struct Context<'o> {
    options: &'o RenderOptions,
    /// The first turn of the current tool loop (after the newest user request).
    loop_start: usize,
}

impl Context<'_> {
    /// Whether reasoning of `kind` in turn `index` goes back.
    fn sends(&self, kind: ReasoningKind, index: usize, makes_calls: bool) -> bool {
        self.options.keep_reasoning
            || match kind {
                // DeepSeek's thinking mode refuses a history whose tool-calling turns lost it.
                ReasoningKind::ReasoningContent => makes_calls,
                ReasoningKind::Thinking | ReasoningKind::RedactedThinking | ReasoningKind::ResponsesItem => {
                    index >= self.loop_start
                }
                ReasoningKind::Reasoning => false,
            }
    }
}

/// The turns with every call answered and every result after its call: a result whose call is
/// not among the open calls before it (folded into a summary, or never made) becomes a user
/// note quoting it; a call left without a result is answered with [`MISSING_RESULT`] where its
/// run of calls and results ends.
pub fn pair(turns: &[Turn]) -> Vec<Turn> {
    paired(turns).into_iter().map(|(turn, _)| turn).collect()
}

/// [`pair`], each turn with the index of the turn it came from (a placeholder: the last turn
/// of the run it closes).
fn paired(turns: &[Turn]) -> Vec<(Turn, usize)> {
    let mut out: Vec<(Turn, usize)> = Vec::with_capacity(turns.len());
    let mut open: Vec<String> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let close = |open: &mut Vec<String>, answered: &mut HashSet<String>, out: &mut Vec<(Turn, usize)>| {
        let missing: Vec<Block> = open
            .drain(..)
            .filter(|id| !answered.contains(id))
            .map(|call_id| {
                Block::Result(ToolResult {
                    call_id,
                    blocks: vec![Block::Text(MISSING_RESULT.into())],
                    is_error: true,
                })
            })
            .collect();
        answered.clear();
        if !missing.is_empty() {
            let origin = out.last().map_or(0, |(_, origin)| *origin);
            out.push((Turn { speaker: Speaker::Tool, name: None, blocks: missing, original: None }, origin));
        }
    };
    for (index, turn) in turns.iter().enumerate() {
        let calls_or_thinks = turn.speaker == Speaker::Assistant
            && (turn.call_ids().next().is_some() || turn.is_reasoning_only());
        match turn.speaker {
            Speaker::Tool => {
                let orphan =
                    turn.result_ids().any(|id| !open.iter().any(|open| open == id) || answered.contains(id));
                if !orphan {
                    answered.extend(turn.result_ids().map(str::to_owned));
                    out.push((turn.clone(), index));
                    continue;
                }
                let mut kept = Vec::new();
                let mut notes = Vec::new();
                for block in &turn.blocks {
                    match block {
                        Block::Result(result)
                            if !open.contains(&result.call_id) || answered.contains(&result.call_id) =>
                        {
                            notes.push(Block::Text(format!(
                                "[the result of tool call {} (its call is not in this context): {}]",
                                result.call_id,
                                crate::text::text(&result.blocks)
                            )));
                        }
                        Block::Result(result) => {
                            answered.insert(result.call_id.clone());
                            kept.push(block.clone());
                        }
                        other => notes.push(other.clone()),
                    }
                }
                if !kept.is_empty() {
                    out.push((
                        Turn { speaker: Speaker::Tool, name: None, blocks: kept, original: None },
                        index,
                    ));
                }
                close(&mut open, &mut answered, &mut out);
                out.push((Turn { speaker: Speaker::User, name: None, blocks: notes, original: None }, index));
            }
            Speaker::Assistant if calls_or_thinks && (answered.is_empty() || open.is_empty()) => {
                open.extend(turn.call_ids().map(str::to_owned));
                out.push((turn.clone(), index));
            }
            _ => {
                close(&mut open, &mut answered, &mut out);
                open.extend(turn.call_ids().map(str::to_owned));
                out.push((turn.clone(), index));
            }
        }
    }
    close(&mut open, &mut answered, &mut out);
    out
}

// ---- OpenAI Chat Completions -------------------------------------------------------------

/// Fields of a Chat Completions reply that are not input: left out of a request.
const OPENAI_REPLY_ONLY: [&str; 3] = ["annotations", "function_call", "audio"];

fn openai(turns: &[Turn], context: &Context<'_>) -> Rendered {
    let mut messages: Vec<Value> = Vec::new();
    let mut index = 0;
    while index < turns.len() {
        let turn = &turns[index];
        // Responses items of one assistant reply (reasoning, calls, text) are one message here.
        if turn.speaker == Speaker::Assistant && origin(turn) == Some(Format::Responses) {
            let mut end = index + 1;
            while end < turns.len()
                && turns[end].speaker == Speaker::Assistant
                && origin(&turns[end]) == Some(Format::Responses)
            {
                end += 1;
            }
            let merged = Turn {
                speaker: Speaker::Assistant,
                name: None,
                blocks: turns[index..end].iter().flat_map(|turn| turn.blocks.clone()).collect(),
                original: None,
            };
            if !silent(&merged, end - 1, context) {
                messages.extend(openai_turn(&merged, end - 1, context));
            }
            index = end;
            continue;
        }
        if !silent(turn, index, context) {
            messages.extend(openai_turn(turn, index, context));
        }
        index += 1;
    }
    Rendered { system: None, messages }
}

/// Whether a turn says nothing in Chat Completions: reasoning alone, none of it sent back as
/// a field this format has. No empty message is sent for it.
fn silent(turn: &Turn, index: usize, context: &Context<'_>) -> bool {
    turn.is_reasoning_only()
        && !turn.blocks.iter().any(|block| {
            matches!(block, Block::Reasoning(r) if context.sends(r.kind, index, false)
                && matches!(r.kind, ReasoningKind::ReasoningContent | ReasoningKind::Reasoning))
        })
}

fn origin(turn: &Turn) -> Option<Format> {
    turn.original.as_ref().map(|(format, _)| *format)
}

fn openai_turn(turn: &Turn, index: usize, context: &Context<'_>) -> Vec<Value> {
    let makes_calls = turn.call_ids().next().is_some();
    if let Some((Format::OpenAi, Value::Object(original))) = &turn.original {
        let mut message = original.clone();
        for key in OPENAI_REPLY_ONLY {
            // An assistant's `audio: {"id"}` is how a later request refers to an audio reply.
            if key == "audio"
                && message.get("audio").and_then(|audio| audio.get("id")).is_some()
                && !message.contains_key("data")
            {
                continue;
            }
            message.remove(key);
        }
        if message.get("refusal").is_some_and(Value::is_null) {
            message.remove("refusal");
        }
        for (key, kind) in
            [("reasoning_content", ReasoningKind::ReasoningContent), ("reasoning", ReasoningKind::Reasoning)]
        {
            if message.contains_key(key) && !context.sends(kind, index, makes_calls) {
                message.remove(key);
            }
        }
        // llama.cpp's server answers `"content": null` with HTTP 500; every server takes "".
        if message.get("content").is_none_or(Value::is_null) {
            message.insert("content".into(), Value::String(String::new()));
        }
        if message.get("tool_calls").and_then(Value::as_array).is_some_and(Vec::is_empty) {
            message.remove("tool_calls");
        }
        return vec![Value::Object(message)];
    }
    let mut message = Map::new();
    let role = match turn.speaker {
        Speaker::System => "system",
        Speaker::Developer => "developer",
        Speaker::User => "user",
        Speaker::Assistant => "assistant",
        Speaker::Tool => {
            // One tool message per result; what else the turn says follows as the user's.
            let mut out: Vec<Value> = Vec::new();
            let mut rest = Vec::new();
            for block in &turn.blocks {
                match block {
                    Block::Result(result) => out.push(json!({
                        "role": "tool",
                        "tool_call_id": result.call_id,
                        "content": result_text(result),
                    })),
                    other => rest.push(other.clone()),
                }
            }
            if !rest.is_empty() {
                let user = Turn { speaker: Speaker::User, name: None, blocks: rest, original: None };
                out.extend(openai_turn(&user, index, context));
            }
            return out;
        }
    };
    message.insert("role".into(), role.into());
    let visible: Vec<&Block> = turn
        .blocks
        .iter()
        .filter(|block| {
            matches!(block, Block::Text(_) | Block::Refusal(_) | Block::Media(_) | Block::Other { .. })
        })
        .collect();
    let media = visible.iter().any(|block| matches!(block, Block::Media(_)));
    let content = if media && turn.speaker == Speaker::User {
        Value::Array(visible.iter().map(|block| openai_part(block)).collect())
    } else {
        Value::String(visible.iter().map(|block| block_text(block)).collect::<Vec<_>>().join("\n"))
    };
    message.insert("content".into(), content);
    if let Some(name) = &turn.name {
        message.insert("name".into(), name.clone().into());
    }
    let calls: Vec<Value> = turn
        .blocks
        .iter()
        .filter_map(|block| match block {
            Block::Call(call) => Some(openai_call(call)),
            _ => None,
        })
        .collect();
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    for block in &turn.blocks {
        if let Block::Reasoning(reasoning) = block
            && context.sends(reasoning.kind, index, makes_calls)
        {
            match reasoning.kind {
                ReasoningKind::ReasoningContent => {
                    message.insert("reasoning_content".into(), reasoning.text.clone().into());
                }
                ReasoningKind::Reasoning => {
                    message.insert("reasoning".into(), reasoning.text.clone().into());
                }
                // Another provider's signed or encrypted reasoning means nothing here.
                _ => {}
            }
        }
    }
    vec![Value::Object(message)]
}

/// A call in OpenAI's form.
pub fn openai_call(call: &Call) -> Value {
    json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}})
}

fn result_text(result: &ToolResult) -> String {
    let text = crate::text::text(&result.blocks);
    if result.is_error && text != MISSING_RESULT { format!("[error] {text}") } else { text }
}

/// What a block says as text in a format that cannot carry it.
fn block_text(block: &Block) -> String {
    crate::text::text(std::slice::from_ref(block))
}

/// The data URL of inline bytes.
fn data_url(media: &Media) -> Option<String> {
    match &media.source {
        Source::Url(url) => Some(url.clone()),
        Source::Base64(data) => {
            let mime = media.mime().unwrap_or(match media.kind {
                MediaKind::Image => "image/png",
                MediaKind::Audio => "audio/wav",
                MediaKind::File => "application/octet-stream",
            });
            Some(format!("data:{mime};base64,{data}"))
        }
        Source::FileId(_) | Source::Text(_) => None,
    }
}

fn openai_part(block: &Block) -> Value {
    match block {
        Block::Media(media) => match (media.kind, &media.source) {
            (MediaKind::Image, Source::Url(_) | Source::Base64(_)) => {
                json!({"type": "image_url", "image_url": {"url": data_url(media)}})
            }
            (MediaKind::Audio, Source::Base64(data)) => {
                json!({"type": "input_audio", "input_audio": {"data": data, "format": media.media_type.as_deref().unwrap_or("wav")}})
            }
            (MediaKind::File, Source::FileId(id)) => json!({"type": "file", "file": {"file_id": id}}),
            (MediaKind::File, Source::Url(_) | Source::Base64(_)) => {
                let mut file = json!({"file_data": data_url(media)});
                if let Some(name) = &media.name {
                    file["filename"] = name.clone().into();
                }
                json!({"type": "file", "file": file})
            }
            (_, Source::Text(text)) => json!({"type": "text", "text": text}),
            _ => json!({"type": "text", "text": media.placeholder()}),
        },
        Block::Other { value, format: Format::OpenAi, .. } => value.clone(),
        other => json!({"type": "text", "text": block_text(other)}),
    }
}

// ---- Anthropic Messages -------------------------------------------------------------------

fn anthropic(turns: &[Turn], context: &Context<'_>) -> Rendered {
    let mut system: Vec<Value> = Vec::new();
    let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
    // Where each turn ended up: (message, blocks so far), for the cache breakpoints.
    let mut ends: Vec<Option<(usize, usize)>> = Vec::with_capacity(turns.len());
    let leading_system =
        turns.iter().take_while(|turn| matches!(turn.speaker, Speaker::System | Speaker::Developer)).count();
    for (index, turn) in turns.iter().enumerate() {
        if index < leading_system {
            system.push(json!({"type": "text", "text": crate::text::text(&turn.blocks)}));
            ends.push(None);
            continue;
        }
        let (role, blocks) = anthropic_turn(turn, index, context);
        if blocks.is_empty() {
            ends.push(messages.len().checked_sub(1).map(|last| (last, messages[last].1.len())));
            continue;
        }
        match messages.last_mut() {
            // The API wants turns to alternate: a second user or assistant turn joins the first.
            Some((last, content)) if *last == role => {
                // Tool results open a user turn: placed before the text they would follow.
                if role == "user" && blocks.iter().any(|b| b["type"] == "tool_result") {
                    let results = blocks.len();
                    let at = content.iter().take_while(|b| b["type"] == "tool_result").count();
                    content.splice(at..at, blocks);
                    let _ = results;
                } else {
                    content.extend(blocks);
                }
            }
            _ => messages.push((role.to_owned(), blocks)),
        }
        let last = messages.len() - 1;
        ends.push(Some((last, messages[last].1.len())));
    }
    if messages.first().is_some_and(|(role, _)| role == "assistant") {
        messages
            .insert(0, ("user".into(), vec![json!({"type": "text", "text": "[the conversation so far]"})]));
        for end in ends.iter_mut().flatten() {
            end.0 += 1;
        }
    }
    let mut breakpoints = 0;
    for &after in &context.options.cache_breakpoints {
        if breakpoints == 4 || after == 0 {
            continue;
        }
        let end = ends.get(after - 1).copied().flatten();
        if let Some((message, count)) = end
            && let Some(block) = messages[message].1.get_mut(count.saturating_sub(1))
            && block.get("cache_control").is_none()
            && block["type"] != "thinking"
            && block["type"] != "redacted_thinking"
        {
            block["cache_control"] = json!({"type": "ephemeral"});
            breakpoints += 1;
        } else if end.is_none()
            && after <= leading_system
            && let Some(block) = system.last_mut()
        {
            block["cache_control"] = json!({"type": "ephemeral"});
            breakpoints += 1;
        }
    }
    Rendered {
        system: (!system.is_empty()).then_some(Value::Array(system)),
        messages: messages
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect(),
    }
}

fn anthropic_turn(turn: &Turn, index: usize, context: &Context<'_>) -> (&'static str, Vec<Value>) {
    let role = match turn.speaker {
        Speaker::Assistant => "assistant",
        Speaker::User | Speaker::Tool | Speaker::System | Speaker::Developer => "user",
    };
    let makes_calls = turn.call_ids().next().is_some();
    if let Some((Format::Anthropic, original)) = &turn.original {
        let content = match &original["content"] {
            Value::String(text) => vec![json!({"type": "text", "text": text})],
            Value::Array(blocks) => blocks
                .iter()
                .filter(|block| match block["type"].as_str() {
                    Some("thinking") => context.sends(ReasoningKind::Thinking, index, makes_calls),
                    Some("redacted_thinking") => {
                        context.sends(ReasoningKind::RedactedThinking, index, makes_calls)
                    }
                    _ => true,
                })
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        return (role, content);
    }
    let mut blocks = Vec::new();
    if matches!(turn.speaker, Speaker::System | Speaker::Developer) {
        blocks.push(json!({"type": "text", "text": format!("[system] {}", crate::text::text(&turn.blocks))}));
        return (role, blocks);
    }
    // Results first: the API wants a user turn's tool results before anything else in it.
    let mut ordered: Vec<&Block> = turn.blocks.iter().filter(|b| matches!(b, Block::Result(_))).collect();
    ordered.extend(turn.blocks.iter().filter(|b| !matches!(b, Block::Result(_))));
    for block in ordered {
        match block {
            Block::Reasoning(reasoning) => {
                let theirs =
                    matches!(reasoning.kind, ReasoningKind::Thinking | ReasoningKind::RedactedThinking);
                if theirs && context.sends(reasoning.kind, index, makes_calls) {
                    blocks.push(reasoning.value.clone());
                }
            }
            Block::Call(call) => blocks.push(json!({
                "type": "tool_use",
                "id": anthropic_id(&call.id),
                "name": call.name,
                "input": call_input(&call.arguments),
            })),
            Block::Result(result) => {
                let content: Vec<Value> = result.blocks.iter().filter_map(anthropic_block).collect();
                let mut value = json!({"type": "tool_result", "tool_use_id": anthropic_id(&result.call_id), "content": content});
                if result.is_error {
                    value["is_error"] = Value::Bool(true);
                }
                blocks.push(value);
            }
            other => blocks.extend(anthropic_block(other)),
        }
    }
    (role, blocks)
}

/// A block as Anthropic's content block; `None` for an empty text (which the API refuses).
fn anthropic_block(block: &Block) -> Option<Value> {
    Some(match block {
        Block::Text(text) | Block::Refusal(text) if text.is_empty() => return None,
        Block::Text(text) | Block::Refusal(text) => json!({"type": "text", "text": text}),
        Block::Media(media) => {
            let kind = match media.kind {
                MediaKind::Image => "image",
                MediaKind::File => "document",
                MediaKind::Audio => return Some(json!({"type": "text", "text": media.placeholder()})),
            };
            let source = match &media.source {
                Source::Url(url) if url.starts_with("data:") => {
                    let (head, data) = url.split_once(',').unwrap_or(("", ""));
                    let mime = head.trim_start_matches("data:").split(';').next().unwrap_or_default();
                    json!({"type": "base64", "media_type": mime, "data": data})
                }
                Source::Url(url) => json!({"type": "url", "url": url}),
                Source::Base64(data) => {
                    json!({"type": "base64", "media_type": media.mime().unwrap_or("image/png"), "data": data})
                }
                Source::Text(text) => json!({"type": "text", "media_type": "text/plain", "data": text}),
                Source::FileId(_) => return Some(json!({"type": "text", "text": media.placeholder()})),
            };
            let mut value = json!({"type": kind, "source": source});
            if let (MediaKind::File, Some(name)) = (media.kind, &media.name) {
                value["title"] = name.clone().into();
            }
            value
        }
        Block::Other { value, format: Format::Anthropic, .. } => value.clone(),
        other => {
            let text = block_text(other);
            if text.is_empty() {
                return None;
            }
            json!({"type": "text", "text": text})
        }
    })
}

/// A call id as Anthropic takes it (letters, digits, `_` and `-`); the same id maps alike in
/// a call and its result.
fn anthropic_id(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// Arguments as the object Anthropic's `input` must be: text that is not a JSON object is
/// kept whole under `"arguments"`.
fn call_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({"arguments": arguments}),
    }
}

// ---- OpenAI Responses ----------------------------------------------------------------------

fn responses(turns: &[Turn], context: &Context<'_>) -> Rendered {
    let mut items = Vec::new();
    for (index, turn) in turns.iter().enumerate() {
        let makes_calls = turn.call_ids().next().is_some();
        if let Some((Format::Responses, original)) = &turn.original {
            if original["type"] == "reasoning"
                && !context.sends(ReasoningKind::ResponsesItem, index, makes_calls)
            {
                continue;
            }
            items.push(original.clone());
            continue;
        }
        let role = match turn.speaker {
            Speaker::System => "system",
            Speaker::Developer => "developer",
            Speaker::User => "user",
            Speaker::Assistant => "assistant",
            Speaker::Tool => "user",
        };
        let mut parts = Vec::new();
        for block in &turn.blocks {
            match block {
                Block::Call(call) => items.push(json!({
                    "type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments,
                })),
                Block::Result(result) => items.push(json!({
                    "type": "function_call_output", "call_id": result.call_id, "output": result_text(result),
                })),
                Block::Reasoning(reasoning) => {
                    if reasoning.kind == ReasoningKind::ResponsesItem && context.sends(reasoning.kind, index, makes_calls) {
                        items.push(reasoning.value.clone());
                    }
                }
                Block::Media(media) if turn.speaker == Speaker::User => parts.push(match (media.kind, data_url(media)) {
                    (MediaKind::Image, Some(url)) => json!({"type": "input_image", "image_url": url}),
                    (MediaKind::File, Some(url)) => {
                        let mut part = json!({"type": "input_file", "file_data": url});
                        if let Some(name) = &media.name {
                            part["filename"] = name.clone().into();
                        }
                        part
                    }
                    _ => json!({"type": "input_text", "text": media.placeholder()}),
                }),
                Block::Other { value, format: Format::Responses, .. } => items.push(value.clone()),
                other => {
                    let text = block_text(other);
                    if !text.is_empty() {
                        let kind = if turn.speaker == Speaker::Assistant { "output_text" } else { "input_text" };
                        parts.push(json!({"type": kind, "text": text}));
                    }
                }
            }
        }
        if !parts.is_empty() {
            // An assistant's words go back as plain text: the API takes that without ids.
            let content = if turn.speaker == Speaker::Assistant {
                Value::String(parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"))
            } else {
                Value::Array(parts)
            };
            let at =
                items.len() - items.iter().rev().take_while(|item| item["type"] == "function_call").count();
            // Text said before calls comes before them.
            items.insert(
                if turn.speaker == Speaker::Assistant { at } else { items.len() },
                json!({"role": role, "content": content}),
            );
        }
    }
    Rendered { system: None, messages: items }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(value: Value) -> Turn {
        let object = value.as_object().unwrap();
        Turn::read(Format::detect(object), object).unwrap()
    }

    /// Anthropic's rules for a request's messages, as its API checks them: roles alternate
    /// starting with the user, no empty text, every `tool_use` answered by a `tool_result`
    /// first in the next user message and every result after its call.
    fn check_anthropic(rendered: &Rendered) {
        let mut expected_role = "user";
        let mut open: Vec<String> = Vec::new();
        for (index, message) in rendered.messages.iter().enumerate() {
            assert_eq!(message["role"], expected_role, "message {index}: {message}");
            expected_role = if expected_role == "user" { "assistant" } else { "user" };
            let blocks = message["content"].as_array().unwrap();
            assert!(!blocks.is_empty(), "message {index} is empty");
            let results: Vec<&str> = blocks
                .iter()
                .take_while(|b| b["type"] == "tool_result")
                .map(|b| b["tool_use_id"].as_str().unwrap())
                .collect();
            assert_eq!(
                results.len(),
                blocks.iter().filter(|b| b["type"] == "tool_result").count(),
                "results first"
            );
            let mut answered = results.clone();
            answered.sort_unstable();
            let mut wanted: Vec<&str> = open.iter().map(String::as_str).collect();
            wanted.sort_unstable();
            assert_eq!(answered, wanted, "message {index} answers exactly the calls before it: {message}");
            open = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap().to_owned())
                .collect();
            for block in blocks {
                assert!(block["type"] != "text" || !block["text"].as_str().unwrap().is_empty(), "{message}");
            }
        }
        assert!(open.is_empty(), "the last calls are answered");
    }

    fn openai_conversation() -> Vec<Turn> {
        vec![
            read(json!({"role": "system", "content": "Be brief."})),
            read(json!({"role": "user", "content": "Which port is staging on?"})),
            read(json!({"role": "assistant", "content": null, "reasoning_content": "Search first.",
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "memory_grep", "arguments": "{\"query\": \"port\"}"}},
                               {"id": "call_2", "type": "function", "function": {"name": "memory_search", "arguments": "{\"query\": \"staging\"}"}}]})),
            read(json!({"role": "tool", "tool_call_id": "call_1", "content": "5433"})),
            read(json!({"role": "tool", "tool_call_id": "call_2", "content": "staging moved to 5433"})),
            read(json!({"role": "assistant", "content": "5433.", "reasoning_content": "Found it."})),
            read(json!({"role": "user", "content": [{"type": "text", "text": "And this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]})),
        ]
    }

    #[test]
    fn an_openai_conversation_renders_as_anthropic_messages_a_strict_server_takes() {
        let rendered = render(&openai_conversation(), Format::Anthropic, &RenderOptions::default()).unwrap();
        check_anthropic(&rendered);
        assert_eq!(rendered.system, Some(json!([{"type": "text", "text": "Be brief."}])));
        assert_eq!(rendered.messages[1]["content"][0]["input"], json!({"query": "port"}));
        let image = &rendered.messages[4]["content"][1];
        assert_eq!(
            image["source"],
            json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
        );
    }

    #[test]
    fn deepseek_reasoning_goes_back_beside_tool_calls_only() {
        let rendered = render(&openai_conversation(), Format::OpenAi, &RenderOptions::default()).unwrap();
        assert_eq!(rendered.messages[2]["reasoning_content"], "Search first.");
        assert_eq!(rendered.messages[2]["content"], "", "llama.cpp refuses null");
        assert!(rendered.messages[5].get("reasoning_content").is_none());
        let kept = RenderOptions { keep_reasoning: true, ..RenderOptions::default() };
        let rendered = render(&openai_conversation(), Format::OpenAi, &kept).unwrap();
        assert_eq!(rendered.messages[5]["reasoning_content"], "Found it.");
    }

    #[test]
    fn thinking_goes_back_unchanged_in_the_current_tool_loop_only() {
        let thinking = json!({"type": "thinking", "thinking": "Check memory.", "signature": "EqQBCgIYAh=="});
        let assistant = |id: &str| {
            read(json!({"role": "assistant", "content": [thinking.clone(),
                {"type": "tool_use", "id": id, "name": "memory_grep", "input": {"query": "port"}}]}))
        };
        let result = |id: &str| {
            read(
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "5433"}]}),
            )
        };
        let turns = vec![
            read(json!({"role": "user", "content": "Port?"})),
            assistant("toolu_1"),
            result("toolu_1"),
            read(json!({"role": "assistant", "content": [{"type": "text", "text": "5433."}]})),
            read(json!({"role": "user", "content": "And prod?"})),
            assistant("toolu_2"),
            result("toolu_2"),
        ];
        let rendered = render(&turns, Format::Anthropic, &RenderOptions::default()).unwrap();
        check_anthropic(&rendered);
        assert_eq!(
            rendered.messages[1]["content"][0]["type"], "tool_use",
            "an earlier loop's thinking stays out"
        );
        assert_eq!(
            rendered.messages[5]["content"][0], thinking,
            "the current loop's goes back byte for byte"
        );
    }

    #[test]
    fn results_without_calls_and_calls_without_results_are_repaired() {
        let turns = vec![
            read(json!({"role": "user", "content": "Go."})),
            read(json!({"role": "tool", "tool_call_id": "folded", "content": "old output"})),
            read(json!({"role": "assistant", "content": null,
                "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})),
            read(json!({"role": "user", "content": "Still there?"})),
        ];
        for format in Format::ALL {
            let rendered = render(&turns, format, &RenderOptions::default()).unwrap();
            let text = serde_json::to_string(&rendered.messages).unwrap();
            assert!(text.contains("its call is not in this context"), "{format}: {text}");
            assert!(text.contains(MISSING_RESULT), "{format}: {text}");
            if format == Format::Anthropic {
                check_anthropic(&rendered);
            }
        }
        let openai = render(&turns, Format::OpenAi, &RenderOptions::default()).unwrap();
        assert_eq!(openai.messages[1]["role"], "user", "an orphan result is no tool message");
        assert_eq!(openai.messages[3]["role"], "tool");
        assert_eq!(openai.messages[3]["tool_call_id"], "call_9");
    }

    #[test]
    fn responses_items_of_one_reply_are_one_chat_message() {
        let turns = vec![
            read(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Port?"}]}),
            ),
            read(json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"})),
            read(json!({"type": "function_call", "call_id": "c1", "name": "memory_grep", "arguments": "{}"})),
            read(
                json!({"type": "function_call", "call_id": "c2", "name": "memory_search", "arguments": "{}"}),
            ),
            read(json!({"type": "function_call_output", "call_id": "c1", "output": "5433"})),
            read(json!({"type": "function_call_output", "call_id": "c2", "output": "5433 too"})),
        ];
        let chat = render(&turns, Format::OpenAi, &RenderOptions::default()).unwrap();
        assert_eq!(chat.messages.len(), 4, "{:?}", chat.messages);
        assert_eq!(chat.messages[1]["tool_calls"].as_array().unwrap().len(), 2);
        let responses = render(&turns, Format::Responses, &RenderOptions::default()).unwrap();
        assert_eq!(responses.messages.len(), 6, "items go back as they came, the loop's reasoning included");
        assert_eq!(responses.messages[1]["encrypted_content"], "gAAAA");
        check_anthropic(&render(&turns, Format::Anthropic, &RenderOptions::default()).unwrap());
    }

    #[test]
    fn cache_breakpoints_mark_the_end_of_each_stable_part() {
        let options = RenderOptions { cache_breakpoints: vec![1, 6], ..RenderOptions::default() };
        let rendered = render(&openai_conversation(), Format::Anthropic, &options).unwrap();
        assert_eq!(rendered.system.unwrap()[0]["cache_control"], json!({"type": "ephemeral"}));
        let marked: Vec<usize> = rendered
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                m["content"].as_array().unwrap().iter().any(|b| b.get("cache_control").is_some())
            })
            .map(|(i, _)| i)
            .collect();
        assert_eq!(marked, vec![3], "the reply before the newest request");
    }
}
