//! One message in a format-free model ([`Turn`]), read from each format's JSON.
//!
//! A turn keeps the object it was read from ([`Turn::original`]): rendered in its own format
//! it goes back as it came (less what the rules of `render` leave out), and only a rendering
//! in another format goes through the blocks.

use serde_json::{Map, Value};

use crate::error::{WireError, invalid, json_kind};
use crate::format::Format;

/// Who speaks in a turn. `Developer` is OpenAI's name for system instructions since the o1
/// models; strata stores it as a system message and gives it back as it came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaker {
    /// Instructions for the model.
    System,
    /// Instructions under OpenAI's newer name.
    Developer,
    /// The user (an Anthropic user message of tool results is [`Speaker::Tool`]).
    User,
    /// The model.
    Assistant,
    /// Results of tool calls.
    Tool,
}

/// One message, format-free.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    /// Who speaks.
    pub speaker: Speaker,
    /// A participant's or tool's name (OpenAI's `name`).
    pub name: Option<String>,
    /// What it says, in order.
    pub blocks: Vec<Block>,
    /// The object it was read from and its format; `None` for a turn strata made (the
    /// scaffold, a note, a placeholder result).
    pub original: Option<(Format, Value)>,
}

/// A part of a turn.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// Text.
    Text(String),
    /// What the model said instead of answering.
    Refusal(String),
    /// An image, audio clip, file or document.
    Media(Media),
    /// The model's reasoning, as its provider sent it.
    Reasoning(Reasoning),
    /// A tool call.
    Call(Call),
    /// A tool call's result.
    Result(ToolResult),
    /// A part of a kind only its own format knows (a server tool's call, say): sent back in
    /// that format, named by a placeholder in any other.
    Other {
        /// Its format's `type`.
        kind: String,
        /// The part as it came.
        value: Value,
        /// Its format.
        format: Format,
    },
}

/// The kinds of media a message carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaKind {
    /// A picture.
    Image,
    /// Sound.
    Audio,
    /// A file (OpenAI) or a document (Anthropic).
    File,
}

impl MediaKind {
    /// Its name in placeholders.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaKind::Image => "image",
            MediaKind::Audio => "audio",
            MediaKind::File => "file",
        }
    }
}

/// Where media's bytes are.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A URL the caller gave (http(s) or a `data:` URL).
    Url(String),
    /// Base64 bytes.
    Base64(String),
    /// A provider's file id.
    FileId(String),
    /// Plain text (an Anthropic text document).
    Text(String),
}

/// An image, audio clip, file or document.
#[derive(Clone, Debug, PartialEq)]
pub struct Media {
    /// What it is.
    pub kind: MediaKind,
    /// Its bytes or where they are.
    pub source: Source,
    /// Its MIME type (or audio format) when known.
    pub media_type: Option<String>,
    /// A file name or document title.
    pub name: Option<String>,
}

impl Media {
    /// The size of its bytes when they are inline (base64 or a `data:` URL), else `None`.
    pub fn bytes(&self) -> Option<usize> {
        let base64 = match &self.source {
            Source::Base64(data) => data.as_str(),
            Source::Url(url) if url.starts_with("data:") => url.split_once(',').map_or("", |(_, data)| data),
            Source::Text(text) => return Some(text.len()),
            Source::Url(_) | Source::FileId(_) => return None,
        };
        let padding = base64.bytes().rev().take_while(|&b| b == b'=').count();
        Some((base64.len() / 4 * 3).saturating_sub(padding))
    }

    /// The MIME type, from the field or from a `data:` URL.
    pub fn mime(&self) -> Option<&str> {
        if let Some(kind) = &self.media_type {
            return Some(kind);
        }
        match &self.source {
            Source::Url(url) => url.strip_prefix("data:")?.split([';', ',']).next().filter(|m| !m.is_empty()),
            _ => None,
        }
    }

    /// What search, summaries and token counts see of it: `[image: image/png, 12.3 kB]`,
    /// `[image: https://…]`, `[file report.pdf: application/pdf, 2.0 MB]`.
    pub fn placeholder(&self) -> String {
        let mut text = format!("[{}", self.kind.as_str());
        if let Some(name) = &self.name {
            text.push(' ');
            text.push_str(&one_line(name, 80));
        }
        text.push(':');
        let mut parts = Vec::new();
        if let Some(mime) = self.mime() {
            parts.push(one_line(mime, 60));
        }
        match (&self.source, self.bytes()) {
            (_, Some(bytes)) => parts.push(crate::text::size(bytes as u64)),
            (Source::Url(url), None) => parts.push(one_line(url, 200)),
            (Source::FileId(id), None) => parts.push(format!("file {}", one_line(id, 80))),
            _ => {}
        }
        text.push(' ');
        text.push_str(&parts.join(", "));
        text.push(']');
        text
    }
}

/// `text` on one line and at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max).collect();
    cut.push('…');
    cut
}

/// Which provider's reasoning this is: each has its own rule for going back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningKind {
    /// `reasoning_content` (DeepSeek, vLLM, llama.cpp server).
    ReasoningContent,
    /// `reasoning` (OpenRouter, Ollama).
    Reasoning,
    /// An Anthropic `thinking` block with its signature.
    Thinking,
    /// An Anthropic `redacted_thinking` block.
    RedactedThinking,
    /// A Responses API `reasoning` item.
    ResponsesItem,
}

/// The model's reasoning.
#[derive(Clone, Debug, PartialEq)]
pub struct Reasoning {
    /// Whose rule applies.
    pub kind: ReasoningKind,
    /// The readable text (empty when redacted or encrypted only).
    pub text: String,
    /// The part or item as it came, sent back unchanged where its provider asks for it.
    pub value: Value,
}

/// A tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The id its result answers.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text (OpenAI's form; Anthropic's object is written as text).
    pub arguments: String,
}

/// A tool call's result.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    /// The call it answers.
    pub call_id: String,
    /// What it says.
    pub blocks: Vec<Block>,
    /// Anthropic's `is_error`.
    pub is_error: bool,
}

impl Turn {
    /// A turn strata made, of one text.
    pub fn text(speaker: Speaker, text: impl Into<String>) -> Turn {
        Turn { speaker, name: None, blocks: vec![Block::Text(text.into())], original: None }
    }

    /// Reads a message object of `format`.
    pub fn read(format: Format, object: &Map<String, Value>) -> Result<Turn, WireError> {
        let mut turn = match format {
            Format::OpenAi => openai(object)?,
            Format::Anthropic => anthropic(object)?,
            Format::Responses => responses(object)?,
        };
        turn.original = Some((format, Value::Object(object.clone())));
        Ok(turn)
    }

    /// A stored message body (JSON text of one message object) read in the format its shape
    /// says: the one reader of a body, for every place that needs what it holds.
    pub fn parse(body: &str) -> Result<Turn, WireError> {
        match serde_json::from_str::<Value>(body) {
            Ok(Value::Object(object)) => Turn::read(Format::detect(&object), &object),
            Ok(other) => Err(invalid(format!("a message is a JSON object, not {}", json_kind(&other)))),
            Err(error) => Err(invalid(format!("a message body is not JSON: {error}"))),
        }
    }

    /// The ids of the calls it makes.
    pub fn call_ids(&self) -> impl Iterator<Item = &str> {
        self.blocks.iter().filter_map(|block| match block {
            Block::Call(call) => Some(call.id.as_str()),
            _ => None,
        })
    }

    /// The ids of the calls it answers.
    pub fn result_ids(&self) -> impl Iterator<Item = &str> {
        self.blocks.iter().filter_map(|block| match block {
            Block::Result(result) => Some(result.call_id.as_str()),
            _ => None,
        })
    }

    /// Whether it says anything a model reads besides reasoning (a Responses reasoning item
    /// alone says nothing).
    pub fn is_reasoning_only(&self) -> bool {
        !self.blocks.is_empty() && self.blocks.iter().all(|block| matches!(block, Block::Reasoning(_)))
    }
}

fn string<'v>(object: &'v Map<String, Value>, key: &str, what: &str) -> Result<Option<&'v str>, WireError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(invalid(format!("{what} \"{key}\" must be a string, not {}", json_kind(other)))),
    }
}

fn required<'v>(object: &'v Map<String, Value>, key: &str, what: &str) -> Result<&'v str, WireError> {
    string(object, key, what)?.ok_or_else(|| invalid(format!("{what} needs \"{key}\"")))
}

/// The arguments of a call as JSON text: OpenAI sends text; some servers send an object.
fn arguments_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

/// A part's `type`, the part as an object, and how errors name it (`content part 2 (image_url)`).
fn typed<'v>(
    noun: &str,
    index: usize,
    part: &'v Value,
) -> Result<(&'v str, &'v Map<String, Value>, String), WireError> {
    match (part.get("type").and_then(Value::as_str), part.as_object()) {
        (Some(kind), Some(object)) => Ok((kind, object, format!("{noun} {index} ({kind})"))),
        _ => Err(invalid(format!("{noun} {index} must be an object with a \"type\""))),
    }
}

/// A list of parts, each read by `read` with its index (for errors naming it).
fn read_parts(
    parts: &[Value],
    read: fn(usize, &Value) -> Result<Block, WireError>,
) -> Result<Vec<Block>, WireError> {
    parts.iter().enumerate().map(|(index, part)| read(index, part)).collect()
}

/// An `input_audio` part's clip (OpenAI's chat and Responses formats write it alike).
fn input_audio(object: &Map<String, Value>, what: &str) -> Result<Block, WireError> {
    let audio = object.get("input_audio").and_then(Value::as_object);
    let audio =
        audio.ok_or_else(|| invalid(format!("{what} needs \"input_audio\": {{\"data\", \"format\"}}")))?;
    Ok(Block::Media(Media {
        kind: MediaKind::Audio,
        source: Source::Base64(required(audio, "data", what)?.to_owned()),
        media_type: string(audio, "format", what)?.map(str::to_owned),
        name: None,
    }))
}

// ---- OpenAI Chat Completions -------------------------------------------------------------

fn openai(object: &Map<String, Value>) -> Result<Turn, WireError> {
    let speaker = match object.get("role") {
        Some(Value::String(role)) => match role.as_str() {
            "system" => Speaker::System,
            "developer" => Speaker::Developer,
            "user" => Speaker::User,
            "assistant" => Speaker::Assistant,
            "tool" => Speaker::Tool,
            other => {
                return Err(invalid(format!(
                    "invalid role {other:?} (system, developer, user, assistant or tool)"
                )));
            }
        },
        Some(other) => return Err(invalid(format!("\"role\" must be a string, not {}", json_kind(other)))),
        None => {
            return Err(invalid("a message needs a \"role\" (system, developer, user, assistant or tool)"));
        }
    };
    let mut blocks = Vec::new();
    if let Some(reasoning) = string(object, "reasoning_content", "a message's")? {
        let value = Value::String(reasoning.to_owned());
        blocks.push(Block::Reasoning(Reasoning {
            kind: ReasoningKind::ReasoningContent,
            text: reasoning.to_owned(),
            value,
        }));
    }
    if let Some(reasoning) = string(object, "reasoning", "a message's")? {
        let value = Value::String(reasoning.to_owned());
        blocks.push(Block::Reasoning(Reasoning {
            kind: ReasoningKind::Reasoning,
            text: reasoning.to_owned(),
            value,
        }));
    }
    let content = match object.get("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) => vec![Block::Text(text.clone())],
        Some(Value::Array(parts)) => read_parts(parts, openai_part)?,
        Some(other) => {
            return Err(invalid(format!(
                "\"content\" must be a string, a list of parts or null, not {}",
                json_kind(other)
            )));
        }
    };
    if let Some(refusal) = string(object, "refusal", "a message's")? {
        blocks.push(Block::Refusal(refusal.to_owned()));
    }
    // An audio reply's words are its transcript.
    if let Some(transcript) =
        object.get("audio").and_then(|audio| audio.get("transcript")).and_then(Value::as_str)
        && content.is_empty()
    {
        blocks.push(Block::Text(transcript.to_owned()));
    }
    let name = string(object, "name", "a message's")?.map(str::to_owned);
    if speaker == Speaker::Tool {
        let call_id = string(object, "tool_call_id", "a tool message's")?
            .ok_or_else(|| invalid("a tool message needs \"tool_call_id\", the id of the call it answers"))?;
        blocks.push(Block::Result(ToolResult {
            call_id: call_id.to_owned(),
            blocks: content,
            is_error: false,
        }));
    } else {
        if object.get("tool_call_id").is_some_and(|id| !id.is_null()) {
            return Err(invalid("only tool messages answer a tool call (\"tool_call_id\")"));
        }
        blocks.extend(content);
    }
    match object.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            if !calls.is_empty() && speaker != Speaker::Assistant {
                return Err(invalid("only assistant messages make tool calls (\"tool_calls\")"));
            }
            for (index, call) in calls.iter().enumerate() {
                blocks.push(Block::Call(openai_call(index, call)?));
            }
        }
        Some(other) => {
            return Err(invalid(format!("\"tool_calls\" must be a list, not {}", json_kind(other))));
        }
    }
    if blocks.is_empty() && !object.contains_key("audio") {
        return Err(invalid("a message needs \"content\" (or \"tool_calls\")"));
    }
    Ok(Turn { speaker, name, blocks, original: None })
}

fn openai_call(index: usize, call: &Value) -> Result<Call, WireError> {
    let Some(call) = call.as_object() else {
        return Err(invalid(format!("tool call {index} is not a JSON object")));
    };
    let what = format!("tool call {index}");
    let id = match call.get("id") {
        Some(Value::String(id)) => id.clone(),
        None | Some(Value::Null) => {
            return Err(invalid(format!("{what} needs an \"id\", which its result names")));
        }
        Some(other) => return Err(invalid(format!("{what} has id {other}, which is not a string"))),
    };
    let function = call.get("function").and_then(Value::as_object);
    let Some(function) = function else {
        return Err(invalid(format!("{what} needs a \"function\" object (name, arguments)")));
    };
    let name = required(function, "name", &format!("{what}'s function"))?.to_owned();
    Ok(Call { id, name, arguments: arguments_text(function.get("arguments")) })
}

fn openai_part(index: usize, part: &Value) -> Result<Block, WireError> {
    let (kind, object, what) = typed("content part", index, part)?;
    Ok(match kind {
        "text" => Block::Text(required(object, "text", &what)?.to_owned()),
        "refusal" => Block::Refusal(required(object, "refusal", &what)?.to_owned()),
        "image_url" => {
            let url = object.get("image_url").and_then(|image| image.get("url")).and_then(Value::as_str);
            let url = url.ok_or_else(|| invalid(format!("{what} needs \"image_url\": {{\"url\": ...}}")))?;
            Block::Media(Media {
                kind: MediaKind::Image,
                source: Source::Url(url.to_owned()),
                media_type: None,
                name: None,
            })
        }
        "input_audio" => input_audio(object, &what)?,
        "file" => {
            let file = object.get("file").and_then(Value::as_object);
            let file = file
                .ok_or_else(|| invalid(format!("{what} needs \"file\": {{\"file_data\" or \"file_id\"}}")))?;
            let source = match (string(file, "file_data", &what)?, string(file, "file_id", &what)?) {
                (Some(data), _) => Source::Url(data.to_owned()),
                (None, Some(id)) => Source::FileId(id.to_owned()),
                (None, None) => return Err(invalid(format!("{what} needs \"file_data\" or \"file_id\""))),
            };
            Block::Media(Media {
                kind: MediaKind::File,
                source,
                media_type: None,
                name: string(file, "filename", &what)?.map(str::to_owned),
            })
        }
        other => Block::Other { kind: other.to_owned(), value: part.clone(), format: Format::OpenAi },
    })
}

// ---- Anthropic Messages -------------------------------------------------------------------

fn anthropic(object: &Map<String, Value>) -> Result<Turn, WireError> {
    let speaker = match object.get("role").and_then(Value::as_str) {
        Some("user") => Speaker::User,
        Some("assistant") => Speaker::Assistant,
        Some(other) => {
            return Err(invalid(format!(
                "invalid role {other:?} for an Anthropic message (user or assistant; the system prompt is a parameter)"
            )));
        }
        None => return Err(invalid("a message needs a \"role\" (user or assistant)")),
    };
    let blocks: Vec<Block> = match object.get("content") {
        Some(Value::String(text)) => vec![Block::Text(text.clone())],
        Some(Value::Array(parts)) => read_parts(parts, anthropic_block)?,
        Some(other) => {
            return Err(invalid(format!(
                "\"content\" must be a string or a list of blocks, not {}",
                json_kind(other)
            )));
        }
        None => return Err(invalid("a message needs \"content\"")),
    };
    let results = blocks.iter().any(|block| matches!(block, Block::Result(_)));
    if results && speaker != Speaker::User {
        return Err(invalid("tool_result blocks belong in a user message"));
    }
    if speaker == Speaker::User
        && blocks.iter().any(|block| matches!(block, Block::Call(_) | Block::Reasoning(_)))
    {
        return Err(invalid("tool_use and thinking blocks belong in an assistant message"));
    }
    // A user message of tool results is the tool's turn: the turn it belongs to goes on.
    let speaker = if results { Speaker::Tool } else { speaker };
    Ok(Turn { speaker, name: None, blocks, original: None })
}

fn anthropic_source(object: &Map<String, Value>, what: &str) -> Result<(Source, Option<String>), WireError> {
    let source = object.get("source").and_then(Value::as_object);
    let source = source.ok_or_else(|| invalid(format!("{what} needs a \"source\" object")))?;
    let media_type = string(source, "media_type", what)?.map(str::to_owned);
    let source = match source.get("type").and_then(Value::as_str) {
        Some("base64") => Source::Base64(required(source, "data", what)?.to_owned()),
        Some("url") => Source::Url(required(source, "url", what)?.to_owned()),
        Some("file") => Source::FileId(required(source, "file_id", what)?.to_owned()),
        Some("text") => Source::Text(required(source, "data", what)?.to_owned()),
        Some("content") => Source::Text(text_of(&source["content"])),
        _ => return Err(invalid(format!("{what}'s source needs a \"type\" (base64, url, file or text)"))),
    };
    Ok((source, media_type))
}

/// The text of a string or a list of text blocks (a document's content, a tool result's).
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn anthropic_block(index: usize, part: &Value) -> Result<Block, WireError> {
    let (kind, object, what) = typed("content block", index, part)?;
    Ok(match kind {
        "text" => Block::Text(required(object, "text", &what)?.to_owned()),
        "image" => {
            let (source, media_type) = anthropic_source(object, &what)?;
            Block::Media(Media { kind: MediaKind::Image, source, media_type, name: None })
        }
        "document" => {
            let (source, media_type) = anthropic_source(object, &what)?;
            let name = string(object, "title", &what)?.map(str::to_owned);
            Block::Media(Media { kind: MediaKind::File, source, media_type, name })
        }
        "tool_use" => Block::Call(Call {
            id: required(object, "id", &what)?.to_owned(),
            name: required(object, "name", &what)?.to_owned(),
            arguments: arguments_text(object.get("input")),
        }),
        "tool_result" => {
            let blocks = match object.get("content") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::String(text)) => vec![Block::Text(text.clone())],
                Some(Value::Array(parts)) => parts
                    .iter()
                    .enumerate()
                    .map(|(i, part)| anthropic_block(i, part))
                    .collect::<Result<_, _>>()?,
                Some(other) => {
                    return Err(invalid(format!(
                        "{what}'s content must be a string or blocks, not {}",
                        json_kind(other)
                    )));
                }
            };
            Block::Result(ToolResult {
                call_id: required(object, "tool_use_id", &what)?.to_owned(),
                blocks,
                is_error: object.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            })
        }
        "thinking" => {
            let text = required(object, "thinking", &what)?.to_owned();
            required(object, "signature", &what)?;
            Block::Reasoning(Reasoning { kind: ReasoningKind::Thinking, text, value: part.clone() })
        }
        "redacted_thinking" => {
            required(object, "data", &what)?;
            Block::Reasoning(Reasoning {
                kind: ReasoningKind::RedactedThinking,
                text: String::new(),
                value: part.clone(),
            })
        }
        other => Block::Other { kind: other.to_owned(), value: part.clone(), format: Format::Anthropic },
    })
}

// ---- OpenAI Responses ----------------------------------------------------------------------

fn responses(object: &Map<String, Value>) -> Result<Turn, WireError> {
    let kind = object.get("type").and_then(Value::as_str).unwrap_or("message");
    let what = format!("a Responses {kind} item");
    let turn = |speaker, blocks| Turn { speaker, name: None, blocks, original: None };
    Ok(match kind {
        "message" => {
            let speaker = match required(object, "role", &what)? {
                "system" => Speaker::System,
                "developer" => Speaker::Developer,
                "user" => Speaker::User,
                "assistant" => Speaker::Assistant,
                other => return Err(invalid(format!("invalid role {other:?} for {what}"))),
            };
            let blocks = match object.get("content") {
                Some(Value::String(text)) => vec![Block::Text(text.clone())],
                Some(Value::Array(parts)) => parts
                    .iter()
                    .enumerate()
                    .map(|(i, part)| responses_part(i, part))
                    .collect::<Result<_, _>>()?,
                _ => return Err(invalid(format!("{what} needs \"content\" (text or a list of parts)"))),
            };
            turn(speaker, blocks)
        }
        "function_call" => turn(
            Speaker::Assistant,
            vec![Block::Call(Call {
                id: required(object, "call_id", &what)?.to_owned(),
                name: required(object, "name", &what)?.to_owned(),
                arguments: arguments_text(object.get("arguments")),
            })],
        ),
        "function_call_output" => {
            let blocks = match object.get("output") {
                Some(Value::String(text)) => vec![Block::Text(text.clone())],
                Some(Value::Array(parts)) => parts
                    .iter()
                    .enumerate()
                    .map(|(i, part)| responses_part(i, part))
                    .collect::<Result<_, _>>()?,
                _ => return Err(invalid(format!("{what} needs \"output\""))),
            };
            let call_id = required(object, "call_id", &what)?.to_owned();
            turn(Speaker::Tool, vec![Block::Result(ToolResult { call_id, blocks, is_error: false })])
        }
        "reasoning" => {
            let mut texts = Vec::new();
            for key in ["summary", "content"] {
                if let Some(parts) = object.get(key).and_then(Value::as_array) {
                    texts.extend(parts.iter().filter_map(|part| part.get("text").and_then(Value::as_str)));
                }
            }
            let value = Value::Object(object.clone());
            turn(
                Speaker::Assistant,
                vec![Block::Reasoning(Reasoning {
                    kind: ReasoningKind::ResponsesItem,
                    text: texts.join("\n"),
                    value,
                })],
            )
        }
        other => turn(
            Speaker::Assistant,
            vec![Block::Other {
                kind: other.to_owned(),
                value: Value::Object(object.clone()),
                format: Format::Responses,
            }],
        ),
    })
}

fn responses_part(index: usize, part: &Value) -> Result<Block, WireError> {
    let (kind, object, what) = typed("content part", index, part)?;
    Ok(match kind {
        "input_text" | "output_text" => Block::Text(required(object, "text", &what)?.to_owned()),
        "refusal" => Block::Refusal(required(object, "refusal", &what)?.to_owned()),
        "input_image" => {
            let source = match (string(object, "image_url", &what)?, string(object, "file_id", &what)?) {
                (Some(url), _) => Source::Url(url.to_owned()),
                (None, Some(id)) => Source::FileId(id.to_owned()),
                (None, None) => return Err(invalid(format!("{what} needs \"image_url\" or \"file_id\""))),
            };
            Block::Media(Media { kind: MediaKind::Image, source, media_type: None, name: None })
        }
        "input_file" => {
            let source = match (
                string(object, "file_data", &what)?,
                string(object, "file_url", &what)?,
                string(object, "file_id", &what)?,
            ) {
                (Some(data), _, _) => Source::Url(data.to_owned()),
                (None, Some(url), _) => Source::Url(url.to_owned()),
                (None, None, Some(id)) => Source::FileId(id.to_owned()),
                _ => return Err(invalid(format!("{what} needs \"file_data\", \"file_url\" or \"file_id\""))),
            };
            let name = string(object, "filename", &what)?.map(str::to_owned);
            Block::Media(Media { kind: MediaKind::File, source, media_type: None, name })
        }
        "input_audio" => input_audio(object, &what)?,
        other => Block::Other { kind: other.to_owned(), value: part.clone(), format: Format::Responses },
    })
}
