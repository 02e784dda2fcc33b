//! `strata grep`, `search`, `expand`, `embed`, `memory purge`, and the recall part of `view`:
//! the recall tools from the command line, as the user (who may look at any persona).

use std::io::Write;

use anyhow::Context;
use chrono::SecondsFormat;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use strata_recall::tools::{ExpandSummaryArgs, Hit, MemoryGrepArgs, MemorySearchArgs, SearchAnswer};
use strata_recall::{BacklogFilter, Embedder, EmbedderState, RecallConfig, Scope};
use strata_seam::{Backend, MessageId, NodeId};

use crate::cli::output::{MessageView, print_json};

/// Which rows a command looks at.
#[derive(Debug, Args)]
pub struct Filters {
    /// Only this persona (default: the only persona in the database).
    #[arg(long)]
    persona: Option<String>,
    /// Only this session (its key); memories belong to the persona and are then left out.
    #[arg(long)]
    session: Option<String>,
    /// Most results.
    #[arg(long)]
    limit: Option<u32>,
}

/// `strata grep` and `strata search`.
#[derive(Debug, Args)]
pub struct SearchCommand {
    /// The query: words that must all appear, "quoted phrases", `*` wildcards (grep); any text (search).
    query: String,
    /// Only items at or after this time (RFC 3339 or YYYY-MM-DD, inclusive).
    #[arg(long)]
    start: Option<String>,
    /// Only items before this time (exclusive; a date alone means the end of that day).
    #[arg(long)]
    end: Option<String>,
    #[command(flatten)]
    filters: Filters,
}

/// `strata expand`.
#[derive(Debug, Args)]
pub struct ExpandCommand {
    /// The summary node id.
    node_id: NodeId,
    /// For a Level-0 node: skip this many source messages.
    #[arg(long)]
    offset: Option<u32>,
    #[command(flatten)]
    filters: Filters,
}

/// `strata embed`.
#[derive(Debug, Args)]
pub struct EmbedCommand {
    #[command(flatten)]
    filters: Filters,
}

/// The persona and session the filters name. Without either, the only persona in the database
/// (several: the user must choose).
fn scope(store: &dyn Backend, filters: &Filters) -> anyhow::Result<Scope> {
    if let Some(key) = &filters.session {
        let session = store.find_session(key)?.with_context(|| format!("no session {key:?}"))?;
        if let Some(persona) = &filters.persona {
            anyhow::ensure!(
                *persona == session.persona,
                "session {key:?} belongs to persona {:?}, not {persona:?}",
                session.persona
            );
        }
        return Ok(Scope { persona: session.persona, session: Some(session.id) });
    }
    if let Some(persona) = &filters.persona {
        return Ok(Scope::persona(persona.clone()));
    }
    let mut personas: Vec<String> = store.sessions(None)?.into_iter().map(|s| s.persona).collect();
    personas.sort();
    personas.dedup();
    match personas.as_slice() {
        [] => Ok(Scope::persona("default")),
        [only] => Ok(Scope::persona(only.clone())),
        several => {
            anyhow::bail!("the database holds several personas ({}); pass --persona", several.join(", "))
        }
    }
}

fn print_hits(out: &mut impl Write, answer: &SearchAnswer) -> anyhow::Result<()> {
    if answer.results.is_empty() {
        writeln!(out, "no matches")?;
    }
    for hit in &answer.results {
        writeln!(out, "{}", hit_line(hit))?;
        writeln!(out, "    {}", hit.snippet.replace('\n', " "))?;
    }
    Ok(())
}

fn hit_line(hit: &Hit) -> String {
    let place = match (&hit.session, hit.seq, &hit.key) {
        (Some(session), Some(seq), _) => format!("{session}#{seq}"),
        (Some(session), None, _) => format!("{session} level {}", hit.level.unwrap_or_default()),
        (None, _, Some(key)) => format!("{} {key}", hit.category.map_or("", |c| c.as_str())),
        _ => String::new(),
    };
    let score = hit.score.map_or(String::new(), |s| format!("  score {s:.4}"));
    format!(
        "[{}] {place} · {} · {}{score}",
        hit.id,
        hit.role,
        hit.timestamp.to_rfc3339_opts(SecondsFormat::Secs, true)
    )
}

/// How `strata grep` and `strata search` match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matching {
    /// `strata grep`: `memory_grep`'s keywords.
    Keywords,
    /// `strata search`: `memory_search`'s meaning, fused with keywords.
    Meaning,
}

/// `strata grep` and `strata search`: the tool's answer for the command line's scope.
pub fn search(
    store: &dyn Backend,
    settings: &strata::Config,
    command: &SearchCommand,
    matching: Matching,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let config = &settings.recall;
    let scope = scope(store, &command.filters)?;
    let (query, start_time, end_time) = (command.query.clone(), command.start.clone(), command.end.clone());
    let (limit, include_in_context) = (command.filters.limit, None);
    let answer = match matching {
        Matching::Keywords => {
            let args =
                MemoryGrepArgs { query, start_time, end_time, limit, include_in_context, offset: None };
            strata_recall::tools::grep(store, &scope, config, &args)?
        }
        Matching::Meaning => {
            // Asked for by name, search by meaning fails without the model (the tool an LLM
            // calls falls back to keywords instead).
            let embedder: EmbedderState = strata::load_embedder(config, &settings.compactor.retry)
                .map_err(|e| anyhow::anyhow!("semantic search unavailable: {}", e.chain_message()))?
                .into();
            let args = MemorySearchArgs { query, limit, start_time, end_time, include_in_context };
            strata_recall::tools::search(store, &scope, config, &embedder, &args)?
        }
    };
    if json { print_json(out, &answer) } else { print_hits(out, &answer) }
}

/// `strata expand`.
pub fn expand(
    store: &dyn Backend,
    config: &RecallConfig,
    command: &ExpandCommand,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let persona = match (&command.filters.persona, &command.filters.session) {
        (None, None) => {
            let node = store.node(command.node_id)?;
            store.session_by_id(node.session_id)?.persona
        }
        _ => scope(store, &command.filters)?.persona,
    };
    let mut config = config.clone();
    if let Some(limit) = command.filters.limit {
        config.expand_page_size = limit.max(1) as usize;
    }
    let answer = strata_recall::tools::expand(
        store,
        &persona,
        &config,
        &ExpandSummaryArgs { node_id: command.node_id, offset: command.offset },
    )?;
    if let Some(key) = &command.filters.session {
        anyhow::ensure!(
            answer.node.session == *key,
            "summary node {} is not in session {key:?}",
            command.node_id
        );
    }
    if json {
        return print_json(out, &answer);
    }
    let (node, session) = (&answer.node.brief, &answer.node.session);
    writeln!(
        out,
        "node {} · level {} · session {} · seq {}..={} · {} → {}",
        node.id,
        node.level,
        session,
        node.first_seq,
        node.last_seq,
        node.start_time.to_rfc3339_opts(SecondsFormat::Secs, true),
        node.end_time.to_rfc3339_opts(SecondsFormat::Secs, true)
    )?;
    writeln!(out, "{}\n{}", node.headline, node.body)?;
    for child in answer.children.iter().flatten() {
        writeln!(
            out,
            "\n  [node {} · level {} · seq {}..={}] {}",
            child.id, child.level, child.first_seq, child.last_seq, child.headline
        )?;
    }
    for message in answer.messages.iter().flatten() {
        writeln!(
            out,
            "\n  [message {} · #{} · {}] {}",
            message.id,
            message.seq,
            message.role,
            message.content.replace('\n', "\n    ")
        )?;
    }
    if let (Some(total), Some(next)) = (answer.total_messages, answer.next_offset) {
        writeln!(out, "\n  ({total} messages; next page: --offset {next})")?;
    }
    Ok(())
}

#[derive(Debug, Serialize)]
struct EmbedReport {
    embedded: u64,
    remaining: u64,
    seconds: f64,
    rows_per_second: f64,
    model: String,
    assets: String,
}

/// A drain of the embedding backlog: how many rows, in how long.
pub struct Drained {
    /// Rows embedded.
    pub embedded: u64,
    /// Wall time.
    pub elapsed: std::time::Duration,
}

impl Drained {
    /// Rows per second.
    pub fn rate(&self) -> f64 {
        self.embedded as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Embeds the backlog rows `filter` selects with a progress bar showing the rate and the time
/// left (on a terminal; elsewhere a line every 10% of the rows, so a log shows the same).
pub fn embed_with_progress(
    store: &dyn Backend,
    embedder: &Embedder,
    config: &RecallConfig,
    filter: &BacklogFilter,
) -> anyhow::Result<Drained> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} embedding [{bar:30}] {pos}/{len} rows ({per_sec}, {elapsed} spent, {eta} left)",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    let tty = !bar.is_hidden();
    let mut next_line = 0u64;
    let embedded = strata_recall::embed_backlog_with(store, embedder, config, filter, |progress| {
        bar.set_length(progress.total);
        bar.set_position(progress.embedded);
        // Without a terminal indicatif draws nothing: report on standard error instead.
        if !tty && progress.embedded >= next_line && progress.total > 0 {
            let spent = started.elapsed().as_secs_f64();
            let rate = progress.embedded as f64 / spent.max(1e-9);
            let left = progress.total.saturating_sub(progress.embedded) as f64 / rate.max(1e-9);
            if progress.embedded > 0 {
                eprintln!(
                    "embedding: {}/{} rows, {rate:.1} rows/s, {spent:.0} s spent, about {left:.0} s left",
                    progress.embedded, progress.total
                );
            }
            next_line = progress.embedded + (progress.total / 10).max(1);
        }
    })?;
    bar.finish_and_clear();
    Ok(Drained { embedded, elapsed: started.elapsed() })
}

/// `strata embed`: embeds the backlog with a progress bar (rate and time left). `--limit` caps
/// how many rows this run embeds.
pub fn embed(
    store: &dyn Backend,
    settings: &strata::Config,
    command: &EmbedCommand,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let config = &settings.recall;
    let filters = &command.filters;
    let (persona, session) = match (&filters.persona, &filters.session) {
        (None, None) => (None, None),
        _ => {
            let scope = scope(store, filters)?;
            (Some(scope.persona), scope.session)
        }
    };
    let embedder = strata::load_embedder(config, &settings.compactor.retry)
        .map_err(|e| anyhow::anyhow!("semantic search unavailable: {}", e.chain_message()))?;
    let filter = BacklogFilter { persona: persona.clone(), session, limit: filters.limit.map(u64::from) };
    let drained = embed_with_progress(store, &embedder, config, &filter)?;
    let report = EmbedReport {
        embedded: drained.embedded,
        remaining: store.backlog_count(persona.as_deref(), session)?,
        seconds: drained.elapsed.as_secs_f64(),
        rows_per_second: drained.rate(),
        model: embedder.spec().id.to_owned(),
        assets: embedder.assets().display().to_string(),
    };
    if json {
        print_json(out, &report)
    } else {
        writeln!(
            out,
            "embedded {} rows in {:.1} s ({:.1} rows/s, {}); {} still waiting",
            report.embedded, report.seconds, report.rows_per_second, report.model, report.remaining
        )?;
        Ok(())
    }
}

/// `strata memory purge`: deletes expired memories (see `memory_ttls`).
pub fn purge(
    store: &dyn Backend,
    config: &RecallConfig,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let purged = strata_recall::purge_expired(store, config, chrono::Utc::now())?;
    if json {
        let object: serde_json::Map<String, serde_json::Value> =
            purged.iter().map(|(category, n)| (category.as_str().to_owned(), (*n).into())).collect();
        return print_json(out, &serde_json::json!({ "purged": object }));
    }
    let total: usize = purged.iter().map(|(_, n)| n).sum();
    let detail: Vec<String> = purged.iter().map(|(category, n)| format!("{category}: {n}")).collect();
    writeln!(
        out,
        "purged {total} expired memories ({})",
        if detail.is_empty() { "no category expires".into() } else { detail.join(", ") }
    )?;
    Ok(())
}

/// The recall part of `strata view`: the message, its neighbours and its covering summary.
#[derive(Debug, Serialize)]
struct FullView<'a> {
    #[serde(flatten)]
    message: MessageView<'a>,
    before: Vec<strata_recall::tools::MessageExcerpt>,
    after: Vec<strata_recall::tools::MessageExcerpt>,
    covering_summary: Option<strata_recall::tools::NodeView>,
}

/// `strata view`.
pub fn view(
    store: &dyn Backend,
    config: &RecallConfig,
    id: MessageId,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let message = store.message(id)?;
    let session = store.session_by_id(message.session_id)?;
    // Only the neighbours and the covering summary: the message itself is printed whole.
    let args = strata_recall::tools::ViewMessageArgs { message_id: id, offset: None, max_chars: Some(1) };
    let around = strata_recall::tools::view(store, &session.persona, config, &args)?;
    let view = FullView {
        message: MessageView::new(&message, &session),
        before: around.before,
        after: around.after,
        covering_summary: around.covering_summary,
    };
    if json {
        return print_json(out, &view);
    }
    for neighbour in &view.before {
        writeln!(out, "  #{} {}: {}", neighbour.seq, neighbour.role, neighbour.content.replace('\n', " "))?;
    }
    view.message.print(out)?;
    for neighbour in &view.after {
        writeln!(out, "  #{} {}: {}", neighbour.seq, neighbour.role, neighbour.content.replace('\n', " "))?;
    }
    if let Some(node) = view.covering_summary.as_ref().map(|node| &node.brief) {
        writeln!(
            out,
            "\ncovered by summary node {} (level {}): {}\n{}",
            node.id, node.level, node.headline, node.body
        )?;
    }
    Ok(())
}
