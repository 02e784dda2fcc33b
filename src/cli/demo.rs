//! `strata demo`: the main job, fully offline. A week of generated pair programming is stored,
//! compacted, embedded and assembled into a context that fits a 32k window; then the recall
//! tools bring back facts that were folded out of that context.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use strata::Config;
use strata::blocking::{Engine, Session};
use strata_compactor::Outcome;
use strata_recall::Tool;
use strata_seam::Category;
use strata_seam::memories::{MemoryWrite, Writer};
use strata_synth::{self as synth, TranscriptSpec};

const SESSION: &str = "demo-week";
const PERSONA: &str = "coder";

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Seed of the generated conversation.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Generate at least this many messages (about 200 tokens each: the default makes a
    /// conversation of about 2,000 messages and 320,000 tokens). Fewer than 260 would not hold
    /// every fact the demo plants and recalls.
    #[arg(long, default_value_t = 1_600, value_parser = crate::cli::message_count(260, 100_000))]
    messages: usize,
}

fn bar(len: u64, what: &str) -> ProgressBar {
    ProgressBar::new(len).with_style(
        ProgressStyle::with_template(&format!(
            "  {{spinner}} {what:<10} [{{bar:36}}] {{pos}}/{{len}} ({{per_sec}}, {{eta}})"
        ))
        .expect("static template")
        .progress_chars("=> "),
    )
}

struct Steps<'a, W: Write> {
    out: &'a mut W,
    started: Instant,
}

impl<W: Write> Steps<'_, W> {
    fn done(&mut self, step: &str, text: String) -> anyhow::Result<()> {
        writeln!(self.out, "[{step}] {text:<78} {:>6.1} s", self.started.elapsed().as_secs_f64())?;
        self.started = Instant::now();
        Ok(())
    }
}

pub fn run(
    db: &std::path::Path,
    config: Config,
    args: &DemoArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let shown = super::shown(db);
    let engine = Engine::open(db, config).with_context(|| format!("cannot open {shown}"))?;
    if engine.store().find_session(SESSION)?.is_some() {
        bail!("{shown} already holds the demo; remove it or pass another --db");
    }
    let session = engine.session(SESSION, PERSONA)?;
    writeln!(
        out,
        "strata demo: a week of pair programming, stored verbatim, compacted, embedded and recalled\n\
         database {} · seed {} · model window {} tokens\n",
        shown,
        args.seed,
        engine.config().compactor.context_window_tokens
    )?;
    let mut steps = Steps { out, started: Instant::now() };

    // 1. Generate and store the conversation.
    let transcript = synth::generate(&TranscriptSpec {
        seed: args.seed,
        min_messages: args.messages,
        min_chars: args.messages * synth::CHARS_PER_MESSAGE,
        ..TranscriptSpec::default()
    });
    let counter = engine.engine().compactor().counter().clone();
    let progress = bar(transcript.messages.len() as u64, "storing");
    let mut total_tokens = 0u64;
    for chunk in transcript.messages.chunks(250) {
        let mut chunk = chunk.to_vec();
        for message in &mut chunk {
            counter.count_new(message);
            total_tokens += u64::from(message.token_count);
        }
        engine.store().append(session.id(), &chunk)?;
        progress.inc(chunk.len() as u64);
    }
    progress.finish_and_clear();
    let (first, last) =
        (&transcript.messages[0].created_at, &transcript.messages[transcript.messages.len() - 1].created_at);
    steps.done(
        "1/4",
        format!(
            "stored {} messages, {} tokens ({}), {} to {}",
            transcript.messages.len(),
            total_tokens,
            counter.encoding().as_str(),
            first.format("%a %b %d"),
            last.format("%a %b %d")
        ),
    )?;
    for (key, title, content) in [
        ("indentation", "Indentation", "Tabs, never spaces."),
        ("commit_style", "Commit messages", "Imperative mood, at most 60 characters in the subject."),
    ] {
        let category = Category::UserPreferences;
        engine.store().save_memory(
            Writer::User,
            PERSONA,
            &MemoryWrite { category, key, title, content },
            &strata_seam::memories::Provenance::user("strata demo"),
        )?;
    }

    // 2. Compact until nothing is left to fold.
    let spinner = ProgressBar::new_spinner()
        .with_style(ProgressStyle::with_template("  {spinner} compacting: {msg}").expect("static template"));
    spinner.enable_steady_tick(Duration::from_millis(120));
    let done = engine.compact_until_done(session.id(), 256, 1_000, |done| {
        spinner.set_message(format!(
            "{} messages folded into {} nodes",
            done.messages_folded, done.nodes_created
        ));
    })?;
    match done.compaction.last {
        Outcome::Compacted { .. } | Outcome::BelowThreshold { .. } | Outcome::NoCandidate => {}
        other => bail!("compaction stopped: {other:?}"),
    }
    spinner.finish_and_clear();
    let stats = engine.store().stats()?;
    let levels: Vec<String> =
        stats.nodes_per_level.iter().enumerate().map(|(level, n)| format!("{n} at level {level}")).collect();
    steps.done(
        "2/4",
        format!(
            "compacted (extractive summarizer): {} of {} messages folded into {}",
            stats.compacted_messages,
            stats.messages,
            levels.join(", ")
        ),
    )?;

    // 3. Embed everything for semantic search.
    let embedder = match engine.engine().embedder().get() {
        Ok(embedder) => Some(embedder.clone()),
        Err(err) => {
            writeln!(
                steps.out,
                "      semantic search unavailable ({err}); run scripts/fetch-embed-assets.sh"
            )?;
            None
        }
    };
    if let Some(embedder) = &embedder {
        let progress = bar(stats.embedding_backlog, "embedding");
        let embedded = strata_recall::embed_backlog_with(
            &**engine.store(),
            embedder,
            &engine.config().recall,
            &strata_recall::BacklogFilter::default(),
            |p| {
                progress.set_length(p.total);
                progress.set_position(p.embedded);
            },
        )?;
        progress.finish_and_clear();
        steps.done(
            "3/4",
            match embedder.spec().id.strip_prefix("openai:") {
                Some(model) => {
                    format!("embedded {embedded} messages, summaries and memories with {model}, remotely")
                }
                None => format!(
                    "embedded {embedded} messages, summaries and memories with {}, locally",
                    embedder.spec().id
                ),
            },
        )?;
    }

    // 4. The context for the next call.
    session
        .append(strata::ChatMessage::user("Where were we? Summarize the open work before we continue."))?;
    let prepared = session.prepare_context()?;
    let context = &prepared.context;
    steps.done(
        "4/4",
        format!("assembled the context for the next call: {} messages", context.messages.len()),
    )?;
    let out = steps.out;

    writeln!(out, "\nThe summary forest, oldest first (full view: strata tree --session {SESSION}):")?;
    let tree = strata_compactor::render_tree(&**engine.store(), session.id())?;
    let lines: Vec<&str> = tree.lines().collect();
    for line in lines.iter().take(18) {
        writeln!(out, "  {line}")?;
    }
    if lines.len() > 18 {
        writeln!(out, "  … {} more lines", lines.len() - 18)?;
    }

    let tokens = &context.tokens;
    writeln!(out, "\nThe context sent to the model (strata context --session {SESSION}):")?;
    for (part, value) in [
        ("head", tokens.head),
        ("scaffold", tokens.scaffold),
        ("acknowledgement", tokens.acknowledgement),
        ("recent (folded)", tokens.recent),
        ("buffer", tokens.buffer),
        ("tail", tokens.tail),
        ("  recalled block", tokens.recalled),
        ("reply priming", tokens.reply_priming),
    ] {
        writeln!(out, "  {part:<16} {value:>8} tokens")?;
    }
    writeln!(
        out,
        "  {:<16} {:>8} tokens of a {} budget; the whole conversation is {} tokens ({:.1}x smaller)",
        "total",
        tokens.total,
        tokens.budget,
        total_tokens,
        total_tokens as f64 / f64::from(tokens.total.max(1))
    )?;

    // 5. Recall what was folded away.
    let sent = serde_json::to_string(&context.messages)?;
    writeln!(
        out,
        "\nRecall: planted facts folded out of the context, brought back by the model's tools\n\
         (the model sees every recalled text fenced and labelled as retrieved data).",
    )?;
    let find = |kind: &str| {
        transcript.facts.iter().find(|fact| fact.kind == kind).with_context(|| {
            format!("the conversation of {} messages is too short to hold the {kind} fact", args.messages)
        })
    };
    let bug = find("bug")?;
    // Said in other words than the question that brings it back: no word in common.
    let paraphrase = find("secret")?;
    let decision = find("decision")?;
    let fix = find("fix")?;
    for fact in [bug, paraphrase, decision, fix] {
        writeln!(
            out,
            "  {:<10} in the context verbatim? {:<3}  \"{}\"",
            fact.kind,
            if sent.contains(fact.text) { "yes" } else { "no" },
            cut(fact.text, 70)
        )?;
    }
    // Proactive recall: the next request, asked in other words than the fact, as a dry run.
    let request = strata_seam::NewMessage::text(strata_seam::Role::User, paraphrase.paraphrase);
    let ahead = engine.preview(session.id(), Some(request), chrono::Utc::now())?;
    let secret_id = message_id_of(&engine, &session, paraphrase.index)?;
    writeln!(
        out,
        "
  Before any tool call: the request \"{}\" gets a recalled block",
        paraphrase.paraphrase
    )?;
    if let Some(block) = &ahead.recalled {
        let found = block.hits.iter().position(|hit| hit.message_id.0 == secret_id);
        writeln!(
            out,
            "      of {} messages ({} tokens); the planted fact {}",
            block.hits.len(),
            block.tokens,
            match found {
                Some(rank) => format!("is hit {} (message {secret_id}), in front of the model", rank + 1),
                None => "is not among them".to_owned(),
            }
        )?;
    }
    let recall_started = Instant::now();
    let call = |tool: Tool, arguments: Value| -> anyhow::Result<Value> {
        Ok(session.call_tool(tool.name(), arguments))
    };

    let grep = call(Tool::MemoryGrep, json!({"query": bug.grep, "limit": 3}))?;
    show_hits(out, Tool::MemoryGrep, &json!({"query": bug.grep, "limit": 3}), &grep)?;
    let search_args = json!({"query": paraphrase.paraphrase, "limit": 3});
    let search = call(Tool::MemorySearch, search_args.clone())?;
    show_hits(out, Tool::MemorySearch, &search_args, &search)?;

    let fix_id = message_id_of(&engine, &session, fix.index)?;
    let view = call(Tool::ViewMessage, json!({"message_id": fix_id}))?;
    writeln!(out, "\n  ▸ {} {{\"message_id\": {fix_id}}}", Tool::ViewMessage)?;
    writeln!(out, "      {}", cut(&text_of(&view, "/message/content"), 110))?;
    if let Some(node) = view.pointer("/covering_summary").filter(|n| !n.is_null()) {
        writeln!(
            out,
            "      covered by node {} (level {}): {}",
            node["id"],
            node["level"],
            cut(&text_of(node, "/headline"), 90)
        )?;
    }

    let decision_id = message_id_of(&engine, &session, decision.index)?;
    let node_id = engine.store().message(strata_seam::MessageId(decision_id))?.summary_id;
    if let Some(node_id) = node_id {
        let expanded = call(Tool::ExpandSummary, json!({"node_id": node_id.0}))?;
        writeln!(out, "\n  ▸ {} {{\"node_id\": {node_id}}}", Tool::ExpandSummary)?;
        writeln!(out, "      {}", cut(&text_of(&expanded, "/node/headline"), 110))?;
        let sources = expanded.pointer("/messages").and_then(Value::as_array).cloned().unwrap_or_default();
        writeln!(out, "      {} source messages on this page; the planted one:", sources.len())?;
        let planted = sources.iter().filter(|m| text_of(m, "/content").contains(decision.text));
        for message in planted {
            writeln!(
                out,
                "      seq {:>4} {:<9} {}",
                message["seq"],
                text_of(message, "/role"),
                cut(&text_of(message, "/content"), 90)
            )?;
        }
    }

    let history = call(Tool::ViewChatHistorySummary, json!({}))?;
    writeln!(out, "\n  ▸ {} {{}}", Tool::ViewChatHistorySummary)?;
    for entry in history.pointer("/timeline").and_then(Value::as_array).into_iter().flatten().take(3) {
        writeln!(
            out,
            "      node {:>4} level {} {}  {}",
            entry["node_id"],
            entry["level"],
            text_of(entry, "/start_time").get(..16).unwrap_or_default(),
            cut(&text_of(entry, "/headline"), 80)
        )?;
    }

    let refused = call(
        Tool::SaveMemory,
        json!({"category": "user_preferences", "key": "indentation", "title": "Indentation", "content": "Spaces."}),
    )?;
    writeln!(out, "\n  ▸ {} {{\"category\": \"user_preferences\", ...}}", Tool::SaveMemory)?;
    writeln!(out, "      refused: {}", cut(&text_of(&refused, "/error/message"), 100))?;
    writeln!(
        out,
        "\n  (six tool calls answered in {:.0} ms)",
        recall_started.elapsed().as_secs_f64() * 1000.0
    )?;
    writeln!(
        out,
        "\nNothing was lost: all {} messages are still in {}, verbatim. Try:\n  strata --db {} grep \"{}\"\n  strata --db {} search \"{}\"",
        stats.messages,
        shown,
        shown,
        fix.grep,
        shown,
        find("number")?.paraphrase
    )?;
    Ok(())
}

fn message_id_of(engine: &Engine, session: &Session, index: usize) -> anyhow::Result<i64> {
    // The transcript was the first thing stored in this fresh session, so index == seq.
    let messages = engine.store().messages(session.id(), index as i64..=index as i64)?;
    Ok(messages.first().context("planted message missing")?.id.0)
}

fn text_of(value: &Value, pointer: &str) -> String {
    match value.pointer(pointer) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// One line of at most `max` characters, without the retrieved-data fences the model sees
/// (the demo says once that they are there).
fn cut(text: &str, max: usize) -> String {
    let line = text
        .split_whitespace()
        .filter(|word| {
            !word.starts_with("⟦retrieved-data")
                && !word.starts_with("⟦/retrieved-data")
                && !word.ends_with('⟧')
        })
        .collect::<Vec<_>>()
        .join(" ");
    strata_seam::text::truncate_chars(&line, max)
}

fn show_hits(out: &mut impl Write, tool: Tool, arguments: &Value, answer: &Value) -> anyhow::Result<()> {
    writeln!(out, "\n  ▸ {tool} {arguments}")?;
    if let Some(error) = answer.get("error") {
        writeln!(out, "      error: {}", text_of(error, "/message"))?;
        return Ok(());
    }
    for hit in answer.pointer("/results").and_then(Value::as_array).into_iter().flatten() {
        let score =
            hit.get("score").and_then(Value::as_f64).map(|s| format!(" score {s:.4}")).unwrap_or_default();
        writeln!(
            out,
            "      {} {} · seq {} · {} · {}{score}",
            text_of(hit, "/kind"),
            hit["id"],
            hit.get("seq").filter(|s| !s.is_null()).map(Value::to_string).unwrap_or_else(|| "-".into()),
            text_of(hit, "/role"),
            text_of(hit, "/timestamp").get(..16).unwrap_or_default(),
        )?;
        writeln!(out, "        {}", cut(&text_of(hit, "/snippet"), 100))?;
    }
    Ok(())
}
