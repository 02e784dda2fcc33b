//! OpenCode's Markdown session export: the transcript OpenCode's `/export` command writes
//! (its `formatTranscript`).
//!
//! The file opens with `# <title>`, `**Session ID:** <id>`, `**Created:** <time>` and
//! `**Updated:** <time>`, then one block per message, each closed by a line `---`: a heading
//! `## User` or `## Assistant` (with `(<agent> · <model> · <duration>)` when the export includes
//! metadata), then its parts. A text part is its text; a tool part is `**Tool: <name>**`,
//! optionally followed by `**Input:**` and a fenced JSON block, and by `**Output:**` or
//! `**Error:**` and a fenced block. Thinking, when exported, is a text part starting
//! `_Thinking:_`, and is kept as text, since nothing marks where it ends.
//!
//! The mapping: a user block is a user message; an assistant block is an assistant message of
//! its text up to its first tool part, with that part (and the ones right after it) as tool
//! calls (arguments: the input as written), each answered by a tool message of its output (an
//! error's text prefixed `Error: `), and the text after them a new assistant message. The
//! transcript gives no time per message: every message gets the session's `Created` time, read
//! as UTC (`1/15/2026, 10:30:00 AM`, the US form of JavaScript's `toLocaleString`, or RFC
//! 3339), else the import's. The session is the `Session ID` (else the file name); ids are
//! `<block>` and `<block>#<n>`, so a re-run adds nothing.

use std::path::Path;

use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::Value;
use strata_seam::Role;

use crate::import::{Bad, Collected, ImportError, ImportOptions, IncomingMessage, message, stem, tool_call};

pub(crate) fn read(
    text: &str,
    path: &Path,
    options: &ImportOptions,
) -> Result<Vec<IncomingMessage>, ImportError> {
    // Another format, a binary file or a cut one was read as an empty export (issue 42 #14):
    // what is not OpenCode's transcript is refused, naming what was expected.
    let not_opencode = |reason: &str| ImportError::Item {
        path: path.to_owned(),
        at: "the file".to_owned(),
        source: Bad::shape(format!("{reason}: expected OpenCode's Markdown export (its /export transcript)")),
    };
    if text.contains('\0') {
        return Err(not_opencode("it holds NUL bytes"));
    }
    let lines: Vec<&str> = text.lines().collect();
    let blocks = blocks(&lines);
    let mut session = stem(path);
    let mut time = options.now;
    let mut collected = Collected::new(options);
    let mut saw_message = false;
    for (number, block) in blocks.iter().enumerate() {
        let error = |source| ImportError::Line { path: path.to_owned(), line: block.first_line, source };
        let heading = block.lines.first().copied().unwrap_or_default();
        let role = if heading == "## User" {
            Role::User
        } else if heading == "## Assistant" || heading.starts_with("## Assistant (") {
            Role::Assistant
        } else if !saw_message {
            // The header: title, session id and times.
            for line in &block.lines {
                if let Some(id) = line.strip_prefix("**Session ID:**") {
                    session = id.trim().to_owned();
                } else if let Some(created) = line.strip_prefix("**Created:**") {
                    time = parse_created(created.trim()).unwrap_or(options.now);
                }
            }
            continue;
        } else {
            return Err(error(Bad::shape(format!(
                "a message starts with \"## User\" or \"## Assistant\", not {heading:?}"
            ))));
        };
        saw_message = true;
        let id = format!("{number}");
        let parts = parts(&block.lines[1..]).map_err(error)?;
        if role == Role::User {
            let text = parts.into_iter().map(|part| part.text()).collect::<Vec<_>>().join("\n\n");
            collected.push(&session, id, message(Role::User, text, time)).map_err(error)?;
            continue;
        }
        let mut count = 0;
        let mut next_id = || {
            count += 1;
            if count == 1 { id.clone() } else { format!("{id}#{count}") }
        };
        let mut text: Vec<String> = Vec::new();
        let mut calls: Vec<Value> = Vec::new();
        let mut results: Vec<(String, String, String)> = Vec::new();
        let flush = |text: &mut Vec<String>,
                     calls: &mut Vec<Value>,
                     results: &mut Vec<(String, String, String)>,
                     collected: &mut Collected<'_>,
                     next_id: &mut dyn FnMut() -> String|
         -> Result<(), Bad> {
            if text.is_empty() && calls.is_empty() {
                return Ok(());
            }
            let mut assistant = message(Role::Assistant, text.join("\n\n"), time);
            assistant.tool_calls = (!calls.is_empty()).then(|| Value::Array(std::mem::take(calls)));
            collected.push(&session, next_id(), assistant)?;
            for (call, name, output) in results.drain(..) {
                let mut result = message(Role::Tool, output, time);
                result.tool_call_id = Some(call);
                result.name = Some(name);
                collected.push(&session, next_id(), result)?;
            }
            text.clear();
            Ok(())
        };
        for part in parts {
            match part {
                Part::Text(part) => {
                    if !calls.is_empty() {
                        flush(&mut text, &mut calls, &mut results, &mut collected, &mut next_id)
                            .map_err(error)?;
                    }
                    text.push(part);
                }
                Part::Tool { name, input, output } => {
                    let call = format!("call_{number}_{}", calls.len() + 1);
                    calls.push(tool_call(&call, &name, &Value::String(input)));
                    results.push((call, name, output));
                }
            }
        }
        flush(&mut text, &mut calls, &mut results, &mut collected, &mut next_id).map_err(error)?;
    }
    if !saw_message {
        return Err(not_opencode("no \"## User\" or \"## Assistant\" message"));
    }
    // Every message block is closed by `---`: a file ending inside one was cut short.
    if lines.iter().rev().find(|line| !line.trim().is_empty()).is_none_or(|last| last.trim() != "---") {
        let first_line = blocks.last().map_or(1, |block| block.first_line);
        return Err(ImportError::Line {
            path: path.to_owned(),
            line: first_line,
            source: Bad::shape("this last message is not closed by \"---\": the file is cut short"),
        });
    }
    Ok(collected.finish())
}

/// A block of lines between two `---` separators.
struct Block<'a> {
    first_line: usize,
    lines: Vec<&'a str>,
}

/// Splits the transcript at its separators: a `---` line outside fenced blocks that ends the
/// file or is followed by the heading of a message (a `---` inside a message's text is a rule).
fn blocks<'a>(lines: &[&'a str]) -> Vec<Block<'a>> {
    let mut blocks = Vec::new();
    let mut current = Block { first_line: 1, lines: Vec::new() };
    let mut fenced = false;
    for (index, line) in lines.iter().enumerate() {
        // An opening fence may name a language; a closing one is bare.
        if !fenced && line.starts_with("```") {
            fenced = true;
        } else if fenced && line.trim_end() == "```" {
            fenced = false;
        }
        let next = lines[index + 1..].iter().find(|l| !l.trim().is_empty());
        let separator = !fenced
            && line.trim() == "---"
            && next.is_none_or(|next| next.starts_with("## User") || next.starts_with("## Assistant"));
        if separator {
            trim_block(&mut current);
            if !current.lines.is_empty() {
                blocks.push(current);
            }
            current = Block { first_line: index + 2, lines: Vec::new() };
            continue;
        }
        if current.lines.is_empty() && line.trim().is_empty() {
            current.first_line = index + 2;
            continue;
        }
        current.lines.push(line);
    }
    trim_block(&mut current);
    if !current.lines.is_empty() {
        blocks.push(current);
    }
    blocks
}

fn trim_block(block: &mut Block<'_>) {
    while block.lines.last().is_some_and(|line| line.trim().is_empty()) {
        block.lines.pop();
    }
}

enum Part {
    Text(String),
    Tool { name: String, input: String, output: String },
}

impl Part {
    fn text(self) -> String {
        match self {
            Part::Text(text) => text,
            Part::Tool { name, .. } => format!("**Tool: {name}**"),
        }
    }
}

/// The parts of a message's body.
fn parts(lines: &[&str]) -> Result<Vec<Part>, Bad> {
    let mut parts = Vec::new();
    let mut text: Vec<&str> = Vec::new();
    let mut index = 0;
    let mut fenced = false;
    while index < lines.len() {
        let line = lines[index];
        let tool = (!fenced)
            .then(|| line.strip_prefix("**Tool: ").and_then(|rest| rest.strip_suffix("**")))
            .flatten();
        let Some(name) = tool else {
            if !fenced && line.starts_with("```") {
                fenced = true;
            } else if fenced && line.trim_end() == "```" {
                fenced = false;
            }
            text.push(line);
            index += 1;
            continue;
        };
        push_text(&mut parts, &mut text);
        index += 1;
        let (mut input, mut output) = (String::new(), String::new());
        loop {
            let at = next_non_blank(lines, index);
            let label = at.map(|i| lines[i]);
            let target = match label {
                Some("**Input:**") => &mut input,
                Some("**Output:**") => &mut output,
                Some("**Error:**") => {
                    output.push_str("Error: ");
                    &mut output
                }
                _ => break,
            };
            let start = at.unwrap_or(index) + 1;
            if !lines.get(start).is_some_and(|l| l.starts_with("```")) {
                return Err(Bad::shape(format!(
                    "{label:?} of tool {name:?} is not followed by a fenced block",
                    label = label.unwrap_or_default()
                )));
            }
            let end = lines[start + 1..]
                .iter()
                .position(|l| l.trim_end() == "```")
                .map(|offset| start + 1 + offset)
                .ok_or_else(|| Bad::shape(format!("the fenced block of tool {name:?} is not closed")))?;
            target.push_str(&lines[start + 1..end].join("\n"));
            index = end + 1;
        }
        parts.push(Part::Tool { name: name.to_owned(), input, output });
    }
    push_text(&mut parts, &mut text);
    Ok(parts)
}

fn next_non_blank(lines: &[&str], from: usize) -> Option<usize> {
    (from..lines.len()).find(|&i| !lines[i].trim().is_empty())
}

/// Ends a text part: its lines, blank lines around it dropped.
fn push_text(parts: &mut Vec<Part>, text: &mut Vec<&str>) {
    let joined = text.join("\n");
    let trimmed = joined.trim_matches('\n');
    if !trimmed.trim().is_empty() {
        parts.push(Part::Text(trimmed.to_owned()));
    }
    text.clear();
}

/// The session's `Created` time: RFC 3339, or JavaScript's US `toLocaleString`, read as UTC.
fn parse_created(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Some(time.with_timezone(&Utc));
    }
    // Newer engines put a narrow no-break space before AM/PM.
    let text = text.replace(['\u{202f}', '\u{a0}'], " ");
    ["%m/%d/%Y, %I:%M:%S %p", "%d/%m/%Y, %H:%M:%S", "%Y-%m-%d %H:%M:%S"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(&text, format).ok())
        .map(|naive| naive.and_utc())
}
