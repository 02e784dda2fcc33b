//! Conversations written by other tools, read into messages strata stores, and strata's own
//! JSON Lines, read and written.
//!
//! Every reader turns a whole file into [`IncomingMessage`]s (nothing is written), or refuses
//! it with one [`ImportError`] naming the file, the line (or the item of a JSON document) and
//! what is wrong. The caller stores the messages with [`strata_store::Store::append_many`] in
//! one transaction, so a file is imported whole or not at all. Re-running an import adds
//! nothing: strata's JSON Lines chain their lines' digests, and every other reader gives each
//! message an id derived from the file (the tool's own message id where it has one), which a
//! session stores once.
//!
//! ```
//! use strata::import::{Format, ImportOptions};
//!
//! let file = r#"[{"role": "user", "content": "Which port is staging on?"},
//!                {"role": "assistant", "content": "5433."}]"#;
//! let options = ImportOptions::new("assistant").with_session("support-7");
//! let messages = strata::import::read_str(Format::OpenAi, file, "chat.json", &options)?;
//! assert_eq!(messages.len(), 2);
//! assert_eq!(messages[1].message.content, "5433.");
//! # Ok::<(), strata::import::ImportError>(())
//! ```

mod chatgpt;
mod claude;
mod codex;
pub mod jsonl;
mod openai;
mod opencode;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
pub use strata_seam::transfer::IncomingMessage;

/// The formats [`read_file`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// strata's own JSON Lines, as `strata ingest` reads and `strata export --format jsonl`
    /// writes ([`jsonl`]).
    Strata,
    /// Claude Code's session files (`~/.claude/projects/<project>/<session>.jsonl`).
    ClaudeCode,
    /// Codex CLI's rollout files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).
    Codex,
    /// OpenCode's Markdown session export (`/export`).
    OpenCode,
    /// OpenAI chat-completions message lists: a JSON list, or JSON Lines of them.
    OpenAi,
    /// ChatGPT's data export, `conversations.json` (the current branch of each conversation).
    ChatGpt,
}

impl Format {
    /// Every format, in the order the command line lists them.
    pub const ALL: [Format; 6] = [
        Format::Strata,
        Format::ClaudeCode,
        Format::Codex,
        Format::OpenCode,
        Format::OpenAi,
        Format::ChatGpt,
    ];

    /// The name the command line takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Strata => "jsonl",
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::OpenCode => "opencode",
            Format::OpenAi => "openai",
            Format::ChatGpt => "chatgpt",
        }
    }

    /// The file names a directory import takes for this format.
    fn takes(self, path: &Path) -> bool {
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        match self {
            Format::Strata | Format::ClaudeCode => extension == "jsonl",
            Format::Codex => extension == "jsonl" && name.starts_with("rollout-"),
            Format::OpenCode => extension == "md",
            Format::OpenAi => extension == "json" || extension == "jsonl",
            Format::ChatGpt => name == "conversations.json",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(name: &str) -> Result<Format, String> {
        Format::ALL.into_iter().find(|format| format.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|format| format.name()).collect();
            format!("unknown format {name:?} (known: {})", names.join(", "))
        })
    }
}

/// Where imported messages go, and how strictly a file is read.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportOptions {
    /// The session every message goes to; `None` keeps the file's own sessions (a tool's
    /// session or conversation id; for a file that names none, one from the file name). In
    /// strata's JSON Lines a line's own `"session"` still wins: this is the session of the
    /// lines that name none (default `"default"`).
    pub session: Option<String>,
    /// The persona of new sessions (a strata JSON Lines message may name its own).
    pub persona: String,
    /// Pass over keys strata does not know in strata's JSON Lines instead of refusing them.
    pub allow_unknown_keys: bool,
    /// The time of messages that do not say when they were sent.
    pub now: DateTime<Utc>,
}

impl ImportOptions {
    /// Options for `persona`: the file's own sessions, unknown keys refused, now as the time of
    /// undated messages.
    pub fn new(persona: impl Into<String>) -> ImportOptions {
        ImportOptions { session: None, persona: persona.into(), allow_unknown_keys: false, now: Utc::now() }
    }

    /// Every message into the session `key`.
    pub fn with_session(mut self, key: impl Into<String>) -> ImportOptions {
        self.session = Some(key.into());
        self
    }

    /// The session of a message: the one the options impose, else the file's own.
    pub(crate) fn session_or(&self, own: impl FnOnce() -> String) -> String {
        self.session.clone().unwrap_or_else(own)
    }
}

/// Why a file was not imported. Nothing of it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The file or directory cannot be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A line of a line-oriented file is wrong.
    #[error("{}: line {line}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based.
        line: usize,
        /// What is wrong with it.
        #[source]
        source: Bad,
    },
    /// An item of a JSON document (a conversation, a message) is wrong, or the file as a whole.
    #[error("{}: {at}", path.display())]
    Item {
        /// The file.
        path: PathBuf,
        /// Where in it, in words ("conversation 3", "message 7").
        at: String,
        /// What is wrong.
        #[source]
        source: Bad,
    },
}

/// What is wrong with a line or an item.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Bad {
    /// It is not JSON.
    #[error("not valid JSON")]
    Json(#[source] serde_json::Error),
    /// Its message is not one strata reads ([`crate::Incoming::from_json`]).
    #[error(transparent)]
    Message(Box<crate::Error>),
    /// Its message is not one strata stores.
    #[error(transparent)]
    Store(Box<strata_seam::Error>),
    /// It is not in the shape of its format.
    #[error("{0}")]
    Shape(String),
}

impl Bad {
    pub(crate) fn shape(reason: impl Into<String>) -> Bad {
        Bad::Shape(reason.into())
    }

    pub(crate) fn message(error: crate::Error) -> Bad {
        Bad::Message(Box::new(error))
    }

    pub(crate) fn store(error: strata_seam::Error) -> Bad {
        Bad::Store(Box::new(error))
    }
}

/// The most bytes read from one input: an export larger than this is not a chat, and a pipe
/// that never ends (or `/dev/zero` behind a FIFO) stops here instead of filling the memory.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// Reads all of `reader` as UTF-8 text, refusing more than [`MAX_INPUT_BYTES`].
pub fn read_bounded(reader: impl std::io::Read, path: &Path) -> Result<String, ImportError> {
    let io = |source| ImportError::Io { path: path.to_owned(), source };
    let mut text = String::new();
    std::io::Read::read_to_string(&mut reader.take(MAX_INPUT_BYTES + 1), &mut text).map_err(io)?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(io(std::io::Error::other(format!(
            "more than {} MiB: strata reads inputs up to that size",
            MAX_INPUT_BYTES >> 20
        ))));
    }
    Ok(text)
}

/// Refuses what is not a file to read once: a device (`/dev/zero` never ends), a socket, and,
/// inside a directory, a FIFO (a read would wait for a writer forever). A FIFO named on the
/// command line is read (`<(...)` in a shell is one), bounded by [`MAX_INPUT_BYTES`].
pub fn check_file_type(path: &Path, in_directory: bool) -> Result<(), ImportError> {
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::metadata(path)
        .map_err(|source| ImportError::Io { path: path.to_owned(), source })?
        .file_type();
    let refused = if kind.is_block_device() || kind.is_char_device() {
        Some("a device")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_fifo() && in_directory {
        Some("a FIFO (named pipe)")
    } else {
        None
    };
    match refused {
        Some(what) => Err(ImportError::Io {
            path: path.to_owned(),
            source: std::io::Error::other(format!("{what}, not a file: strata reads regular files")),
        }),
        None => Ok(()),
    }
}

/// Reads one file of `format` (`-` is standard input), or every file of a directory that the
/// format takes (sorted by path, subdirectories included), into the messages to store, in order.
pub fn read_file(
    format: Format,
    path: &Path,
    options: &ImportOptions,
) -> Result<Vec<IncomingMessage>, ImportError> {
    if path.as_os_str() == "-" {
        let text = read_bounded(std::io::stdin().lock(), path)?;
        return read_str(format, &text, path, options);
    }
    if path.is_dir() {
        let mut files = Vec::new();
        collect_files(format, path, &mut files)?;
        let mut messages = Vec::new();
        for file in &files {
            check_file_type(file, true)?;
        }
        for file in files {
            messages.extend(read_one(format, &file, options)?);
        }
        return Ok(messages);
    }
    check_file_type(path, false)?;
    read_one(format, path, options)
}

fn read_one(
    format: Format,
    path: &Path,
    options: &ImportOptions,
) -> Result<Vec<IncomingMessage>, ImportError> {
    let file =
        std::fs::File::open(path).map_err(|source| ImportError::Io { path: path.to_owned(), source })?;
    let text = read_bounded(file, path)?;
    read_str(format, &text, path, options)
}

/// The files under `dir` that `format` takes, sorted.
fn collect_files(format: Format, dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), ImportError> {
    let io = |source| ImportError::Io { path: dir.to_owned(), source };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_files(format, &path, files)?;
        } else if format.takes(&path) {
            files.push(path);
        }
    }
    Ok(())
}

/// Reads the text of one file of `format`; `path` names it in errors and, for formats whose
/// files do not name their session, in the session key.
pub fn read_str(
    format: Format,
    text: &str,
    path: impl AsRef<Path>,
    options: &ImportOptions,
) -> Result<Vec<IncomingMessage>, ImportError> {
    let path = path.as_ref();
    // A byte-order mark (as some editors write) is not part of the text.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match format {
        Format::Strata => jsonl::read(text, path, options),
        Format::ClaudeCode => claude::read(text, path, options),
        Format::Codex => codex::read(text, path, options),
        Format::OpenCode => opencode::read(text, path, options),
        Format::OpenAi => openai::read(text, path, options),
        Format::ChatGpt => chatgpt::read(text, path, options),
    }
}

/// The non-blank lines of `text` with their 1-based numbers.
pub(crate) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line))
        .filter(|(_, line)| !line.trim().is_empty())
}

/// The file name without its extension, for a session key.
pub(crate) fn stem(path: &Path) -> String {
    path.file_stem()
        .and_then(|stem| stem.to_str())
        .filter(|stem| !stem.is_empty() && *stem != "-")
        .unwrap_or("import")
        .to_owned()
}

/// A message of an imported conversation, checked as the store will check it.
pub(crate) fn message(
    role: strata_seam::Role,
    content: impl Into<String>,
    created_at: DateTime<Utc>,
) -> strata_seam::NewMessage {
    strata_seam::NewMessage { created_at, ..strata_seam::NewMessage::text(role, content) }
}

/// Collects a file's messages: each with its session, persona and id, checked as the store
/// will check it.
pub(crate) struct Collected<'a> {
    options: &'a ImportOptions,
    messages: Vec<IncomingMessage>,
    /// The message each (session, id) was first given to.
    ids: std::collections::HashMap<(String, String), usize>,
}

impl<'a> Collected<'a> {
    pub(crate) fn new(options: &'a ImportOptions) -> Collected<'a> {
        Collected { options, messages: Vec::new(), ids: std::collections::HashMap::new() }
    }

    /// Adds a message of the file's session `session` (unless the options impose one) under
    /// `id`, unique in the file's session.
    pub(crate) fn push(
        &mut self,
        session: &str,
        id: String,
        mut message: strata_seam::NewMessage,
    ) -> Result<(), Bad> {
        message.external_id = Some(id.clone());
        message.validate().map_err(Bad::store)?;
        // What the store would refuse for the whole file is refused here, where the reader
        // names the line or item.
        let session_key = self.options.session_or(|| session.to_owned());
        strata_seam::backend::validate_session_key(&session_key).map_err(Bad::store)?;
        match self.ids.entry((session_key.clone(), id.clone())) {
            std::collections::hash_map::Entry::Occupied(first) => {
                let first = &self.messages[*first.get()].message;
                if first.role != message.role || first.content != message.content {
                    return Err(Bad::shape(format!(
                        "the id {id:?} of session {session_key:?} already names another message"
                    )));
                }
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(self.messages.len());
            }
        }
        self.messages.push(IncomingMessage {
            session_key,
            persona: self.options.persona.clone(),
            message,
            line_digest: None,
        });
        Ok(())
    }

    /// The last message added, to add tool calls to.
    pub(crate) fn last_mut(&mut self) -> Option<&mut strata_seam::NewMessage> {
        self.messages.last_mut().map(|incoming| &mut incoming.message)
    }

    pub(crate) fn finish(self) -> Vec<IncomingMessage> {
        self.messages
    }
}

/// An RFC 3339 time of a tool's file.
pub(crate) fn parse_time(text: &str) -> Result<DateTime<Utc>, Bad> {
    DateTime::parse_from_rfc3339(text)
        .map(|time| time.with_timezone(&Utc))
        .map_err(|_| Bad::shape(format!("timestamp {text:?} is not RFC 3339")))
}

/// A tool call in the OpenAI format strata stores: `arguments` is the JSON text of the input.
pub(crate) fn tool_call(id: &str, name: &str, input: &serde_json::Value) -> serde_json::Value {
    let arguments = match input {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    serde_json::json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Text made of the pieces of every format, in any order: near-valid files.
    fn near_file() -> impl Strategy<Value = String> {
        let piece = prop::sample::select(vec![
            "## User\n",
            "## Assistant\n",
            "## Assistant (Build · m · 1s)\n",
            "---\n",
            "\n",
            "**Tool: bash**\n",
            "**Input:**\n",
            "**Output:**\n",
            "**Error:**\n",
            "```json\n",
            "```\n",
            "{}\n",
            "text\n",
            "**Session ID:** s\n",
            "**Created:** 2/12/2026, 4:05:09 PM\n",
            r#"{"type":"user","uuid":"u","sessionId":"s","timestamp":"2026-01-01T00:00:00Z","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}]}]}}"#,
            r#"{"type":"assistant","uuid":"a","sessionId":"s","timestamp":"2026-01-01T00:00:00Z","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}}"#,
            r#"{"type":"response_item","payload":{"type":"function_call","name":"f","arguments":"{}","call_id":"c"}}"#,
            r#"{"type":"response_item","payload":{"type":"function_call_output","call_id":"c","output":{"x":1}}}"#,
            r#"{"type":"session_meta","payload":{"id":7}}"#,
            r#"[{"role":"user","content":"x"},{"role":"tool","content":"y","tool_call_id":"c"}]"#,
            r#"[{"id":"c","mapping":{"a":{"message":{"id":"a","author":{"role":"assistant"},"recipient":"python","content":{"content_type":"code","text":"1"}},"parent":null}},"current_node":"a"}]"#,
            r#"{"messages":[]}"#,
            "[",
            "\u{feff}",
            "\"",
            "null\n",
        ]);
        prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any text, in any format, is messages or one error that names the file on one line;
        /// never a panic.
        #[test]
        fn any_file_of_any_format_is_messages_or_one_clear_error(
            text in prop_oneof![near_file(), "\\PC{0,80}"],
            format in prop::sample::select(Format::ALL.to_vec()),
        ) {
            match read_str(format, &text, "f.txt", &ImportOptions::new("p")) {
                Ok(messages) => {
                    for message in messages {
                        prop_assert!(message.message.validate().is_ok());
                        prop_assert!(!message.session_key.is_empty());
                    }
                }
                Err(error) => {
                    let line = strata_seam::error_chain(&error);
                    prop_assert!(line.starts_with("f.txt"), "{}", line);
                }
            }
        }
    }
}
