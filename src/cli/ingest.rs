//! `strata ingest`: JSON Lines of chat messages into the store, all or nothing.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use strata::import::{ImportError, ImportOptions, jsonl};
use strata_compactor::TokenCounter;
use strata_seam::SharedBackend;
use strata_seam::transfer::{Imported, IncomingMessage};

use crate::cli::output::print_json;
use crate::cli::recall::{Drained, embed_with_progress};

/// Files with more lines than this get a progress bar.
const PROGRESS_THRESHOLD: usize = 2_000;

#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// The JSON Lines file (`-` for standard input). Each line: {"role", "content" (text or
    /// text parts), "name"?, "timestamp"? (RFC 3339 or UNIX seconds), "session"?, "persona"?,
    /// "tool_calls"?, "tool_call_id"?, "pinned"?, "id"? (or "key": unique per session, a line
    /// whose id the session holds is not stored again)}.
    /// Re-running a file, or a longer version of it, adds only the lines not stored yet.
    file: PathBuf,
    /// Session key for lines that do not name one.
    #[arg(long, default_value = "default")]
    session: String,
    /// Persona for sessions created by this file (lines may override with "persona").
    #[arg(long, default_value = "default")]
    persona: String,
    /// No effect, kept for scripts that pass it: a key strata does not know is kept as a field
    /// of the message (a provider's own fields go back to it), never taken for `session`.
    #[arg(long, hide = true)]
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

/// The lines of `path` (`-`: standard input), read up to `strata::import::MAX_INPUT_BYTES`; a
/// device or socket is refused before a byte is read.
fn read_lines(path: &Path) -> anyhow::Result<Vec<String>> {
    use std::io::Read;
    let limit = strata::import::MAX_INPUT_BYTES;
    let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin().lock().take(limit + 1)))
    } else {
        strata::import::check_file_type(path, false)?;
        let file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        Box::new(std::io::BufReader::new(file.take(limit + 1)))
    };
    let mut read = 0u64;
    let mut lines = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("{}: line {}: cannot read", path.display(), i + 1))?;
        read += line.len() as u64 + 1;
        if read > limit {
            anyhow::bail!(
                "{}: more than {} MiB: strata reads inputs up to that size",
                path.display(),
                limit >> 20
            );
        }
        lines.push(line);
    }
    Ok(lines)
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
    Ok(parse_lines(file, session, persona, allow_unknown_keys, limits, counter, progress)?.0)
}

/// [`parse_file`], with the line (from 1) each message was read from.
fn parse_lines(
    file: &Path,
    session: &str,
    persona: &str,
    allow_unknown_keys: bool,
    limits: &strata_compactor::CompactorConfig,
    counter: &TokenCounter,
    progress: &ProgressBar,
) -> anyhow::Result<(Vec<IncomingMessage>, Vec<usize>)> {
    let lines = read_lines(file)?;
    progress.set_length(lines.len() as u64);
    if lines.len() <= PROGRESS_THRESHOLD {
        progress.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    progress.set_message("parsing");
    let options = ImportOptions {
        session: Some(session.to_owned()),
        allow_unknown_keys,
        ..ImportOptions::new(persona)
    };
    let mut incoming = Vec::with_capacity(lines.len());
    // The line of each message, and the first message of each (session, id).
    let mut lines_of: Vec<usize> = Vec::with_capacity(lines.len());
    let mut ids: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
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
        let message = jsonl::parse_line(text, &options).map_err(|source| ImportError::Line {
            path: file.to_owned(),
            line: index + 1,
            source,
        })?;
        limits.check_message_size(&message.message).with_context(at)?;
        // What the store would refuse for the whole file is refused here, with its line.
        strata_seam::backend::validate_session_key(&message.session_key).with_context(at)?;
        if let Some(id) = &message.message.external_id {
            let key = (message.session_key.clone(), id.clone());
            if let Some(&earlier) = ids.get(&key) {
                let first: &IncomingMessage = &incoming[earlier];
                if first.message.role != message.message.role
                    || first.message.content != message.message.content
                {
                    anyhow::bail!(
                        "{}: the id {id:?} of session {:?} names another message on line {}",
                        at(),
                        message.session_key,
                        lines_of[earlier]
                    );
                }
            } else {
                ids.insert(key, incoming.len());
            }
        }
        lines_of.push(index + 1);
        incoming.push(message);
    }
    progress.set_message("counting");
    counter.count_new_all(incoming.iter_mut().map(|incoming| &mut incoming.message));
    Ok((incoming, lines_of))
}

/// The counter an import counts with: `--model`'s tokenizer, else the configuration's.
pub fn token_counter(config: &strata::Config, model: Option<&str>) -> TokenCounter {
    match model {
        Some(model) => TokenCounter::for_model(model),
        None => config.compactor.token_counter(),
    }
}

/// The progress bar of an import.
pub fn progress_bar() -> ProgressBar {
    ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} lines ({per_sec}, {eta})")
            .expect("static template")
            .progress_chars("=> "),
    )
}

/// Stores parsed messages in one transaction (all or nothing), then indexes them for search.
pub fn store_all(
    store: &SharedBackend,
    incoming: &[IncomingMessage],
    progress: &ProgressBar,
) -> anyhow::Result<Imported> {
    progress.set_message("writing");
    let imported = store.import(incoming).context("nothing was ingested")?;
    // Index for search now rather than in the first search after the import (a backend that
    // indexes as it writes has nothing to do).
    progress.set_message("indexing");
    progress.set_position(0);
    progress.set_length(imported.ids.len() as u64);
    let indexed = store.catch_up_search_index().context(
        "the messages are stored; indexing them for search failed (the next compaction or ingest retries)",
    )?;
    progress.set_position(indexed as u64);
    progress.finish_and_clear();
    Ok(imported)
}

/// Prints what an import stored, and what it embedded when it did.
pub fn report(
    incoming: &[IncomingMessage],
    imported: &Imported,
    counter: &TokenCounter,
    embedded: Option<&Drained>,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let ids = &imported.ids;
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
        if let Some(drained) = embedded {
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
        if let Some(drained) = embedded {
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

/// Ingests `args.file` into the store `open` opens, once every line has parsed: a refused
/// file leaves the database as it was, and a missing or empty one is not made a database.
pub fn run(
    open: impl FnOnce() -> anyhow::Result<SharedBackend>,
    config: &strata::Config,
    args: &IngestArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    strata_seam::backend::validate_persona(&args.persona)?;
    let counter = token_counter(config, args.model.as_deref());
    let embedder = match args.embed {
        true => Some(strata::load_embedder(&config.recall, &config.compactor.retry).map_err(|e| {
            anyhow::anyhow!(
                "--embed: semantic search unavailable: {}; nothing was ingested",
                e.chain_message()
            )
        })?),
        false => None,
    };
    let progress = progress_bar();
    // Nothing is written until every line has parsed: a bad line leaves the database as it was.
    let (incoming, lines_of) = parse_lines(
        &args.file,
        &args.session,
        &args.persona,
        args.allow_unknown_keys,
        &config.compactor,
        &counter,
        &progress,
    )?;
    let store = &open()?;
    counter.claim(&**store)?;
    let imported = store_all(store, &incoming, &progress).map_err(|error| {
        // The store names the message by its place among the session's; the user knows lines.
        let edited = error.chain().find_map(|cause| match cause.downcast_ref::<strata_seam::Error>() {
            Some(strata_seam::Error::EditedTranscript { session, position, seq }) => {
                Some((session.clone(), *position, *seq))
            }
            _ => None,
        });
        let Some((session, position, seq)) = edited else { return error };
        let line = incoming
            .iter()
            .zip(&lines_of)
            .filter(|(message, _)| message.session_key == session)
            .nth(position - 1)
            .map_or(0, |(_, line)| *line);
        anyhow::anyhow!(
            "{}: line {line} differs from the message stored from it (seq {seq} of session {session:?}): \
             the transcript was edited since it was imported, and its earlier lines are stored already; \
             nothing was stored (forget the session first to import the edited version whole)",
            args.file.display()
        )
    })?;
    let embedded = match &embedder {
        Some(embedder) => Some(
            embed_with_progress(&**store, embedder, &config.recall, &strata_recall::BacklogFilter::default())
                .context("the messages are stored; embedding them failed (`strata embed` resumes)")?,
        ),
        None => None,
    };
    report(&incoming, &imported, &counter, embedded.as_ref(), json, out)
}
