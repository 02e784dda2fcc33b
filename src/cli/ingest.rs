//! `strata ingest`: JSON Lines of chat messages into the store, all or nothing.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use strata_compactor::TokenCounter;
use strata_store::{IncomingMessage, NewMessage, Role, Store};

use crate::cli::output::print_json;

/// Messages indexed for search per transaction after an import.
const INDEX_BATCH: usize = 5_000;

/// Files with more lines than this get a progress bar.
const PROGRESS_THRESHOLD: usize = 2_000;

#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// The JSON Lines file (`-` for standard input). Each line: {"role", "content", "name"?,
    /// "timestamp"? (RFC 3339), "session"?, "persona"?, "tool_calls"?, "tool_call_id"?, "pinned"?,
    /// "id"? (unique per session: a line whose id the session holds is not stored again)}.
    /// Re-running a file, or a longer version of it, adds only the lines not stored yet.
    file: PathBuf,
    /// Session key for lines that do not name one.
    #[arg(long, default_value = "default")]
    session: String,
    /// Persona for sessions created by this file (lines may override with "persona").
    #[arg(long, default_value = "default")]
    persona: String,
    /// Accept lines with keys strata does not know (they are ignored); by default such a key is
    /// an error, since a misspelled "sesion" would file messages into another session.
    #[arg(long)]
    allow_unknown_keys: bool,
    /// Model whose tokenizer counts the messages (default: the configuration's `[compactor]
    /// model` or `encoding`, which the rest of strata counts with). A database keeps the
    /// encoding it was first counted with; another is refused.
    #[arg(long, env = "STRATA_MODEL")]
    model: Option<String>,
    /// Embed for `memory_search` once the lines are stored: everything waiting for a vector,
    /// the new messages among them, with the rate and the time left. The model is loaded
    /// before anything is written, so a missing model changes nothing. Without the flag,
    /// `strata embed` does it later.
    #[arg(long)]
    embed: bool,
}

/// The keys a line may have.
const KEYS: [&str; 10] = [
    "role",
    "content",
    "name",
    "timestamp",
    "session",
    "persona",
    "tool_calls",
    "tool_call_id",
    "pinned",
    "id",
];

/// One line of the file.
#[derive(Debug, Deserialize)]
struct Line {
    role: String,
    #[serde(default)]
    content: Option<String>,
    name: Option<String>,
    timestamp: Option<String>,
    session: Option<String>,
    persona: Option<String>,
    tool_calls: Option<serde_json::Value>,
    tool_call_id: Option<String>,
    #[serde(default)]
    pinned: bool,
    id: Option<String>,
}

/// Parses one line into a message, its tokens not counted yet; the error names what is wrong
/// but not the line number, which the caller adds.
fn parse_line(
    text: &str,
    session: &str,
    persona: &str,
    allow_unknown_keys: bool,
    now: DateTime<Utc>,
) -> anyhow::Result<IncomingMessage> {
    let Strict(value) = serde_json::from_str(text).context("not valid JSON")?;
    let Some(object) = value.as_object() else {
        bail!("not a message object (expected {{\"role\": ..., \"content\": ...}})")
    };
    if !allow_unknown_keys && let Some(key) = object.keys().find(|key| !KEYS.contains(&key.as_str())) {
        bail!("unknown key {key:?} (known: {}; --allow-unknown-keys ignores it)", KEYS.join(", "));
    }
    let line: Line = serde_json::from_value(value).context("not a valid message object")?;
    let role: Role = line.role.parse()?;
    let created_at = match &line.timestamp {
        Some(stamp) => DateTime::parse_from_rfc3339(stamp)
            .with_context(|| format!("timestamp {stamp:?} is not RFC 3339 (like 2026-01-31T09:30:00Z)"))?
            .with_timezone(&Utc),
        None => now,
    };
    if line.content.is_none() && line.tool_calls.is_none() {
        bail!("a message needs \"content\" (or \"tool_calls\")");
    }
    if let Some(calls) = &line.tool_calls
        && !calls.is_array()
    {
        bail!("\"tool_calls\" must be a JSON array");
    }
    let message = NewMessage {
        role,
        content: line.content.unwrap_or_default(),
        tool_calls: line.tool_calls,
        tool_call_id: line.tool_call_id,
        name: line.name,
        created_at,
        token_count: 0,
        pinned: line.pinned,
        external_id: line.id,
    };
    message.validate()?;
    if let Some(persona) = &line.persona {
        strata_store::validate_persona(persona)?;
    }
    Ok(IncomingMessage {
        session_key: line.session.unwrap_or_else(|| session.to_owned()),
        persona: line.persona.unwrap_or_else(|| persona.to_owned()),
        message,
        line_digest: Some(strata_store::line_digest(text)),
    })
}

/// A JSON value whose objects were checked for duplicate keys while it was read: serde_json
/// keeps the last of two equal keys, so `{"role": "user", "role": "system"}` was stored as a
/// system message, and nothing said so.
struct Strict(serde_json::Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Strict, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<serde_json::Value, E> {
        Ok(value.into())
    }

    fn visit_i64<E>(self, value: i64) -> Result<serde_json::Value, E> {
        Ok(value.into())
    }

    fn visit_u64<E>(self, value: u64) -> Result<serde_json::Value, E> {
        Ok(value.into())
    }

    fn visit_f64<E>(self, value: f64) -> Result<serde_json::Value, E> {
        Ok(serde_json::Number::from_f64(value).map_or(serde_json::Value::Null, serde_json::Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<serde_json::Value, E> {
        Ok(value.into())
    }

    fn visit_string<E>(self, value: String) -> Result<serde_json::Value, E> {
        Ok(value.into())
    }

    fn visit_unit<E>(self) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<serde_json::Value, A::Error> {
        let mut values = Vec::new();
        while let Some(Strict(value)) = seq.next_element()? {
            values.push(value);
        }
        Ok(serde_json::Value::Array(values))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<serde_json::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            let Strict(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(serde_json::Value::Object(object))
    }
}

fn read_lines(path: &Path) -> anyhow::Result<Vec<String>> {
    let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        Box::new(std::io::BufReader::new(file))
    };
    reader
        .lines()
        .enumerate()
        .map(|(i, line)| line.with_context(|| format!("line {}: cannot read", i + 1)))
        .collect()
}

/// Reads and parses a whole JSON Lines file (nothing is written): the messages in file order.
/// Lines without a session or persona get `session` and `persona`; every message is counted
/// with `counter` (on every core); a message over `limits.max_message_bytes` is refused. The
/// error names the line. Files of more than [`PROGRESS_THRESHOLD`] lines show `progress`.
pub fn parse_file(
    file: &Path,
    session: &str,
    persona: &str,
    allow_unknown_keys: bool,
    limits: &strata_compactor::CompactorConfig,
    counter: &TokenCounter,
    progress: &ProgressBar,
) -> anyhow::Result<Vec<IncomingMessage>> {
    let lines = read_lines(file)?;
    progress.set_length(lines.len() as u64);
    if lines.len() <= PROGRESS_THRESHOLD {
        progress.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    progress.set_message("parsing");
    let now = Utc::now();
    let mut incoming = Vec::with_capacity(lines.len());
    for (index, text) in lines.iter().enumerate() {
        progress.inc(1);
        if text.trim().is_empty() {
            continue;
        }
        // A byte-order mark (as some editors write) is not part of the first line's JSON.
        let text = if index == 0 { text.trim_start_matches('\u{feff}') } else { text };
        let at = || format!("{}: line {}", file.display(), index + 1);
        // A line this long holds a message over the limit however it is escaped (at most six
        // bytes of JSON per byte of text): refused before it is parsed, whose cost is its size.
        if text.len() > 6 * limits.max_message_bytes as usize + 65_536 {
            return Err(anyhow::Error::new(strata_compactor::Error::MessageTooLarge {
                bytes: text.len() as u64,
                limit: limits.max_message_bytes,
            })
            .context(at()));
        }
        let message = parse_line(text, session, persona, allow_unknown_keys, now).with_context(at)?;
        limits.check_message_size(&message.message).with_context(at)?;
        incoming.push(message);
    }
    progress.set_message("counting");
    counter.count_new_all(incoming.iter_mut().map(|incoming| &mut incoming.message));
    Ok(incoming)
}

pub fn run(
    store: &Store,
    config: &strata::Config,
    args: &IngestArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    strata_store::validate_persona(&args.persona)?;
    let counter = match &args.model {
        Some(model) => TokenCounter::for_model(model),
        None => config.compactor.token_counter(),
    };
    let embedder = match args.embed {
        true => Some(strata::load_embedder(&config.recall, &config.compactor.retry).map_err(|e| {
            anyhow::anyhow!(
                "--embed: semantic search unavailable: {}; nothing was ingested",
                e.chain_message()
            )
        })?),
        false => None,
    };
    counter.claim(store)?;
    let progress = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} lines ({per_sec}, {eta})")
            .expect("static template")
            .progress_chars("=> "),
    );
    // Nothing is written until every line has parsed: a bad line leaves the database as it was.
    let incoming = parse_file(
        &args.file,
        &args.session,
        &args.persona,
        args.allow_unknown_keys,
        &config.compactor,
        &counter,
        &progress,
    )?;
    progress.set_message("writing");
    let imported = store.append_many(&incoming).context("nothing was ingested")?;
    // Index for search now, with the bar, rather than in the first search after the import.
    progress.set_message("indexing");
    progress.set_position(0);
    progress.set_length(store.unindexed_messages()?);
    loop {
        let indexed = store
            .index_messages(INDEX_BATCH)
            .context("the messages are stored; indexing them for search failed (the next compaction or ingest retries)")?;
        progress.inc(indexed as u64);
        if indexed < INDEX_BATCH {
            break;
        }
    }
    progress.finish_and_clear();
    let ids = &imported.ids;
    let embedded = match &embedder {
        Some(embedder) => Some(
            crate::cli::recall::embed_with_progress(
                store,
                embedder,
                &config.recall,
                &strata_recall::BacklogFilter::default(),
            )
            .context("the messages are stored; embedding them failed (`strata embed` resumes)")?,
        ),
        None => None,
    };

    let sessions: BTreeSet<&str> = incoming.iter().map(|m| m.session_key.as_str()).collect();
    let tokens: u64 = incoming.iter().map(|m| u64::from(m.message.token_count)).sum();
    if json {
        let mut report = serde_json::json!({
            "messages": ids.len(),
            "skipped": imported.skipped,
            "sessions": sessions,
            "tokens": tokens,
            "first_id": ids.first(),
            "last_id": ids.last(),
        });
        if let Some(drained) = &embedded {
            report["embedded"] = drained.embedded.into();
        }
        print_json(out, &report)?;
    } else {
        writeln!(
            out,
            "ingested {} messages ({} tokens, {}) into {} session(s): {}",
            ids.len(),
            tokens,
            counter.encoding().as_str(),
            sessions.len(),
            sessions.iter().copied().collect::<Vec<_>>().join(", ")
        )?;
        if let Some(drained) = &embedded {
            writeln!(
                out,
                "embedded {} rows in {:.1} s ({:.1} rows/s)",
                drained.embedded,
                drained.elapsed.as_secs_f64(),
                drained.rate()
            )?;
        }
        if imported.skipped > 0 {
            writeln!(
                out,
                "skipped {} lines already stored (an earlier run, or their \"id\")",
                imported.skipped
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A line that is nearly a message: known and unknown keys with values of any JSON type.
    fn near_message() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(|n| serde_json::json!(n)),
            "\\PC{0,20}".prop_map(serde_json::Value::String),
            prop::sample::select(vec!["user", "assistant", "tool", "system", "2026-01-31T09:30:00Z"])
                .prop_map(|s| serde_json::json!(s)),
            Just(
                serde_json::json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])
            ),
        ];
        let key = prop_oneof![prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned), "[a-z]{1,8}"];
        prop::collection::btree_map(key, value, 0..8)
            .prop_map(|map| serde_json::Value::Object(map.into_iter().collect()).to_string())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3_000, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any line parses into a message or an error that names the problem on one line.
        #[test]
        fn any_line_is_a_message_or_one_clear_error(
            line in prop_oneof![near_message(), "\\PC{0,60}"],
            lenient in any::<bool>(),
        ) {
            match parse_line(&line, "s", "p", lenient, Utc::now()) {
                Ok(incoming) => {
                    prop_assert!(!incoming.session_key.is_empty());
                    prop_assert!(incoming.line_digest.is_some());
                }
                Err(error) => {
                    let text = format!("{error:#}");
                    prop_assert!(!text.is_empty() && !text.contains('\n'), "{line} -> {text}");
                }
            }
        }
    }
}
