//! `strata compact`, `strata context` and `strata tree`: the compactor from the command line.

use std::io::Write;

use anyhow::Context;
use chrono::{DateTime, Utc};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use strata::blocking::Engine;
use strata::{CompactedSession, Config, SummarizerKind, edge};
use strata_compactor::{AssembledContext, Compaction, Outcome};
use strata_seam::{Backend, Session, SharedBackend};

use crate::cli::output::print_json;

/// Options shared by the three commands.
/// Chunks one `strata compact` call folds before it reports progress and plans again.
const BULK_ROUNDS: u32 = 1024;

#[derive(Debug, clap::Args)]
pub struct CompactorArgs {
    /// The session key.
    #[arg(long)]
    session: String,
    /// The model's context window in tokens (overrides the config).
    #[arg(long)]
    window: Option<u32>,
}

/// Options of `strata compact`.
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    #[command(flatten)]
    common: CompactorArgs,
    #[command(flatten)]
    summarizer: SummarizerArgs,
    /// Stop after one bounded call (max_rounds summaries) instead of compacting until done.
    #[arg(long)]
    once: bool,
}

/// The summarizer flags of `compact` and `resummarize`.
#[derive(Debug, clap::Args)]
pub struct SummarizerArgs {
    /// Who writes the summaries (default: `[summarizer] kind` of the configuration).
    #[arg(long, value_parser = summarizer_kind())]
    summarizer: Option<SummarizerKind>,
    /// Base URL of the OpenAI-compatible API, with --summarizer openai (default: the
    /// configuration's).
    #[arg(long)]
    base_url: Option<String>,
    /// The summarizing model, with --summarizer openai (default: the configuration's). The
    /// API key comes from the variable the configuration names, else OPENAI_API_KEY.
    #[arg(long)]
    model: Option<String>,
}

impl SummarizerArgs {
    /// `config` with these flags applied.
    fn apply(&self, config: &Config) -> Config {
        let mut chosen = config.clone();
        if let Some(kind) = self.summarizer {
            chosen.summarizer.kind = kind;
        }
        if let Some(url) = &self.base_url {
            chosen.summarizer.base_url = url.clone();
        }
        if let Some(model) = &self.model {
            chosen.summarizer.model = model.clone();
        }
        chosen
    }
}

/// Options of `strata resummarize`.
#[derive(Debug, clap::Args)]
pub struct ResummarizeArgs {
    /// Only this session (default: every session).
    #[arg(long)]
    session: Option<String>,
    /// Only nodes of this level (default: every level, bottom-up).
    #[arg(long)]
    level: Option<u32>,
    #[command(flatten)]
    summarizer: SummarizerArgs,
}

/// Parses `--summarizer`, offering the kinds in `--help`.
fn summarizer_kind() -> impl clap::builder::TypedValueParser<Value = SummarizerKind> {
    use clap::builder::TypedValueParser;
    let names = SummarizerKind::ALL.map(SummarizerKind::as_str);
    clap::builder::PossibleValuesParser::new(names).try_map(|name| name.parse::<SummarizerKind>())
}

/// Options of `strata context`.
#[derive(Debug, clap::Args)]
pub struct ContextArgs {
    #[command(flatten)]
    common: CompactorArgs,
    /// The time the request is made (RFC 3339); decides which user preferences have expired.
    /// Defaults to now.
    #[arg(long)]
    now: Option<String>,
    /// A new user request to show the context for, as the session's next message, without
    /// storing it (a dry run): exactly what the model would get, the recalled block included.
    #[arg(long)]
    request: Option<String>,
    /// Print the messages as a provider takes them: `openai` (Chat Completions), `anthropic`
    /// (Messages: the system messages as `system`) or `responses` (the Responses API's items),
    /// each stored message as it was sent.
    #[arg(long, value_parser = parse_format)]
    format: Option<strata::Format>,
    /// With --format: send every reasoning part back, not only what its provider asks for.
    #[arg(long, requires = "format")]
    keep_reasoning: bool,
}

fn parse_format(name: &str) -> Result<strata::Format, String> {
    name.parse()
}

/// The loaded configuration with `--window` applied.
fn windowed(args: &CompactorArgs, config: &Config) -> Config {
    match args.window {
        Some(window) => for_window(config, window),
        None => config.clone(),
    }
}

/// `config` for a model with a `window`-token context.
pub(crate) fn for_window(config: &Config, window: u32) -> Config {
    let mut config = config.clone();
    let compactor = &mut config.compactor;
    compactor.context_window_tokens = window;
    // Keep the reserve and the scaffold's bodies proportionate in a small window: the bodies
    // get at most an eighth of what the messages may use (at 4,000 tokens the tool definitions
    // take about half of the window, and bodies of window / 8 took most of the rest).
    compactor.reserve_tokens = compactor.reserve_tokens.min(window / 8);
    let budget = config.compactor().budget();
    config.compactor.scaffold_body_tokens = config.compactor.scaffold_body_tokens.min(budget / 8);
    // The protected tail at most a quarter of the budget: a tail of 8,000 tokens of tool rounds
    // filled an 8,000-token window, so no fold could bring the context under its trigger and
    // every call left out (and renamed) other turns (the generated week at 8k: 47 of 100 calls
    // repeated nothing of the previous one; `strata eval cache`).
    config.compactor.tail_tokens = config.compactor.tail_tokens.min(budget / 4);
    config
}

fn session(store: &dyn Backend, key: &str) -> anyhow::Result<Session> {
    store.find_session(key)?.with_context(|| format!("no session {key:?} in the database"))
}

pub fn compact(
    store: SharedBackend,
    args: &CompactArgs,
    settings: &Config,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let session = session(&*store, &args.common.session)?;
    let engine = Engine::from_store(store.clone(), args.summarizer.apply(&windowed(&args.common, settings)))?;
    let before = store.stats()?;
    let progress = ProgressBar::new(before.messages - before.compacted_messages).with_style(
        ProgressStyle::with_template(
            "{spinner} compacting [{bar:30}] {pos}/{len} messages folded ({per_sec}) {msg}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    // `--once` is one bounded call (as before a model call); otherwise each call plans once and
    // folds up to BULK_ROUNDS chunks, until nothing is pending.
    let (rounds, calls) = if args.once {
        (engine.engine().compactor().config().max_rounds, 1)
    } else {
        (BULK_ROUNDS, u32::MAX)
    };
    let mut created = 0;
    let done = engine.compact_until_done(session.id, rounds, calls, |done| {
        progress.set_position(done.messages_folded);
        if let Some(tokens) = done.tokens_after {
            progress.set_message(format!("{} nodes, context {tokens} tokens", done.nodes_created));
        }
        created = done.nodes_created;
    });
    let done = match done {
        Ok(done) => done,
        Err(error) => {
            progress.finish_and_clear();
            return Err(anyhow::Error::new(error).context(stopped_after(created)));
        }
    };
    let CompactedSession {
        compaction:
            Compaction {
                nodes_created: created, raw_archived: archived, tokens_before, tokens_after, last, ..
            },
        settled,
    } = done;
    progress.finish_and_clear();
    let down = match &last {
        Outcome::SummarizerDown { consecutive_failures, error, .. } => Some(format!(
            "{}: the summarizer is down ({consecutive_failures} consecutive failures): {error}",
            stopped_after(created)
        )),
        _ => None,
    };
    let after = store.stats()?;
    if json {
        print_json(
            out,
            &json!({
                "session": session.key,
                "memory_updates": settled,
                "nodes_created": created,
                "raw_archived": archived,
                "tokens_before": tokens_before,
                "tokens_after": tokens_after,
                "last_outcome": last,
                "nodes_per_level": after.nodes_per_level,
            }),
        )?;
    }
    if let Some(down) = down {
        // The exit status and one line say it; no "nothing to compact" before it.
        anyhow::bail!(down);
    }
    if json {
        return Ok(());
    }
    match (&last, tokens_before, tokens_after) {
        (_, Some(before_tokens), Some(after_tokens)) => writeln!(
            out,
            "compacted session {}: {created} nodes written{}; context {before_tokens} -> {after_tokens} tokens",
            session.key,
            if archived > 0 {
                format!(" ({archived} raw archives: the summarizer was down)")
            } else {
                String::new()
            },
        )?,
        _ => writeln!(out, "session {}: nothing to compact", session.key)?,
    }
    writeln!(out, "stopped: {}", describe(&last))?;
    if settled != strata_recall::Settled::default() {
        writeln!(
            out,
            "memories from the summaries: {} saved ({} into an existing memory they were twins of), {} \
             preferences proposed (strata memory proposals), {} dropped",
            settled.saved, settled.merged, settled.proposed, settled.dropped
        )?;
        if settled.spelling_only {
            writeln!(
                out,
                "twins of existing memories were checked by key spelling only: the embedding model is not \
                 available (scripts/fetch-embed-assets.sh)"
            )?;
        }
    }
    let levels: Vec<String> = after
        .nodes_per_level
        .iter()
        .enumerate()
        .map(|(level, n)| {
            let old = before.nodes_per_level.get(level).copied().unwrap_or(0);
            format!("L{level} {n} (+{})", n - old)
        })
        .collect();
    if !levels.is_empty() {
        writeln!(out, "nodes per level (whole database): {}", levels.join(", "))?;
    }
    Ok(())
}

/// `strata resummarize`: every node (of a session, of a level) not written by the chosen
/// summarizer gets its summary, bottom-up; an interrupted run continues where it stopped.
pub fn resummarize(
    store: SharedBackend,
    args: &ResummarizeArgs,
    settings: &Config,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let engine = Engine::from_store(store, args.summarizer.apply(settings))?;
    let sessions = match &args.session {
        Some(key) => vec![session(&**engine.store(), key)?],
        None => engine.store().sessions(None)?,
    };
    let progress = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} re-summarizing: {pos} nodes ({per_sec}) {msg}")
            .expect("static template"),
    );
    let mut reports = Vec::new();
    for session in &sessions {
        progress.set_message(session.key.clone());
        let done = engine.resummarize(session.id, args.level.map(strata_seam::Level), |_| progress.inc(1))?;
        let stopped = done.stopped.clone();
        reports.push((session.key.clone(), done));
        if let Some(error) = stopped {
            progress.finish_and_clear();
            if json {
                print_json(out, &reports_json(&reports))?;
            }
            anyhow::bail!(
                "re-summarizing stopped in session {} after {} nodes: the summarizer failed: {error} \
                 (run again to continue)",
                session.key,
                reports.iter().map(|(_, done)| done.replaced).sum::<u32>()
            );
        }
    }
    progress.finish_and_clear();
    if json {
        return print_json(out, &reports_json(&reports));
    }
    for (key, done) in &reports {
        writeln!(
            out,
            "session {key}: {} nodes re-summarized by {}, {} unchanged",
            done.replaced,
            engine.engine().compactor().summarizer_name(),
            done.unchanged
        )?;
    }
    if reports.is_empty() {
        writeln!(out, "no sessions")?;
    }
    Ok(())
}

fn reports_json(reports: &[(String, strata_compactor::Resummarized)]) -> serde_json::Value {
    json!(reports.iter().map(|(key, done)| json!({"session": key, "result": done})).collect::<Vec<_>>())
}

/// The start of the line a failed compaction ends with.
fn stopped_after(created: u32) -> String {
    match created {
        0 => "compaction stopped before writing a node".to_owned(),
        n => format!("compaction stopped after writing {n} nodes"),
    }
}

fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Compacted { pending: true, .. } => "round limit reached; run again to continue".into(),
        Outcome::Compacted { .. } => "done".into(),
        Outcome::BelowThreshold { middle_tokens, middle_turns } => {
            format!(
                "below threshold (the compactable middle holds {middle_tokens} tokens in {middle_turns} turns)"
            )
        }
        Outcome::NoCandidate => "no candidate (what remains is protected, pinned or too small)".into(),
        Outcome::NoProgress { refused: Some(refusal) } => format!("no progress: {refusal}"),
        Outcome::NoProgress { refused: None } => "no progress: no round made progress".into(),
        Outcome::SummarizerDown { consecutive_failures, error, .. } => {
            format!("summarizer down ({consecutive_failures} consecutive failures): {error}")
        }
        other => format!("{other:?}"),
    }
}

pub fn context(
    store: SharedBackend,
    args: &ContextArgs,
    settings: &Config,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let session = session(&*store, &args.common.session)?;
    let now: DateTime<Utc> = match &args.now {
        Some(text) => DateTime::parse_from_rfc3339(text)
            .with_context(|| format!("--now {text:?} is not RFC 3339"))?
            .with_timezone(&Utc),
        None => Utc::now(),
    };
    // An assembler, not an engine: a read command checks the token encoding without claiming
    // it (the compactor's claim writes) and opens no summarizer.
    let settings = windowed(&args.common, settings);
    let assembler = strata_compactor::Assembler::new(store.clone(), settings.validate()?.compactor)?;
    let request = args.request.as_ref().map(|text| {
        let mut request = strata_seam::NewMessage::text(strata_seam::Role::User, text.clone());
        request.created_at = now;
        request
    });
    // The model loaded first, so the block is the one a warm engine would send.
    let history_search = settings
        .recall
        .proactive
        .then(|| strata::HistorySearch::loaded(store, &settings.recall, &settings.compactor.retry));
    let snapshot = assembler.read(session.id, &strata_compactor::AssemblyOptions { now, request })?;
    let recalled = history_search.zip(snapshot.recall_request()).map(|(search, asked)| search.recall(&asked));
    let context = assembler.lay_out(&snapshot, recalled)?;
    if let Some(format) = args.format {
        let rendered = strata::render_context(&context, format, args.keep_reasoning)?;
        let value = serde_json::json!({
            "format": format.as_str(),
            "system": rendered.system,
            "messages": rendered.messages,
            "tokens": context.tokens,
            "prefix_len": context.prefix_len,
        });
        return print_json(out, &value);
    }
    if json {
        return print_json(out, &context);
    }
    print_context(&context, out)
}

fn print_context(context: &AssembledContext, out: &mut impl Write) -> anyhow::Result<()> {
    for (message, entry) in context.messages.iter().zip(&context.entries) {
        let source = match (entry.message_id, entry.seq) {
            (Some(id), Some(seq)) => format!(" · message {id} (seq {seq})"),
            _ => String::new(),
        };
        writeln!(
            out,
            "── {part:?} · {role}{source} · {tokens} tokens{abridged} ──",
            part = entry.part,
            role = message["role"].as_str().unwrap_or("?"),
            tokens = entry.tokens,
            abridged = if entry.abridged { " · abridged" } else { "" },
        )?;
        if let Some(calls) = message.get("tool_calls") {
            writeln!(out, "tool_calls: {calls}")?;
        }
        if let Some(id) = message.get("tool_call_id").and_then(|v| v.as_str()) {
            writeln!(out, "tool_call_id: {id}")?;
        }
        writeln!(out, "{}", message["content"].as_str().unwrap_or(""))?;
    }
    let t = &context.tokens;
    writeln!(out, "══ tokens ══")?;
    writeln!(out, "head             {:>7}", t.head)?;
    writeln!(out, "scaffold         {:>7}", t.scaffold)?;
    writeln!(out, "acknowledgement  {:>7}", t.acknowledgement)?;
    writeln!(out, "recent (folded)  {:>7}", t.recent)?;
    writeln!(out, "buffer           {:>7}", t.buffer)?;
    writeln!(out, "tail             {:>7}", t.tail)?;
    writeln!(out, "  recalled block {:>7}", t.recalled)?;
    writeln!(out, "reply priming    {:>7}", t.reply_priming)?;
    writeln!(
        out,
        "total            {:>7} of {} ({} messages, prefix {}, stable {} = {} tokens)",
        t.total,
        t.budget,
        context.messages.len(),
        context.prefix_len,
        context.stable_len,
        context.stable_tokens
    )?;
    writeln!(
        out,
        "injection: {:?}; elided messages: {}; stubbed messages: {}",
        context.injection, context.elided_messages, context.stubbed_messages
    )?;
    if let Some(block) = &context.recalled {
        writeln!(out, "recalled block: {} hits shown, {} did not fit", block.hits.len(), block.not_shown)?;
        for hit in &block.hits {
            let similarity = hit.similarity.map_or("-".to_owned(), |s| format!("{s:.3}"));
            writeln!(
                out,
                "  message {} ({} #{}) score {:.3} similarity {similarity} · {} tokens",
                hit.message_id, hit.session, hit.seq, hit.score, hit.tokens
            )?;
        }
        if let Some(partial) = &block.partial {
            writeln!(out, "  note: {partial}")?;
        }
    }
    Ok(())
}

/// Options of `strata tree`.
#[derive(Debug, clap::Args)]
pub struct TreeArgs {
    /// The session key.
    #[arg(long)]
    session: String,
}

pub fn tree(store: SharedBackend, args: &TreeArgs, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let session = session(&*store, &args.session)?;
    if json {
        return print_json(
            out,
            &json!({ "session": session.key, "nodes": edge::all::<_, edge::SummaryNode>(&store.nodes(session.id)?) }),
        );
    }
    write!(out, "{}", strata_compactor::render_tree(&*store, session.id)?)?;
    Ok(())
}
