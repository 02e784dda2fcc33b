//! `strata forget`: erase a persona, a session, or a session's oldest messages, and everything
//! derived from them (see `strata_seam::Maintenance::forget`); `--dry-run` prints what would go.

use std::io::Write;

use anyhow::{Context, bail};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use indicatif::{ProgressBar, ProgressStyle};
use strata_seam::forgetting::{ForgetCounts, ForgetScope};
use strata_seam::{Backend, SharedBackend};

use crate::cli::output::print_json;
use strata::Config;
use strata::blocking::Engine;

/// What to forget.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["persona", "session"])))]
pub struct ForgetArgs {
    /// Every session, memory and proposal of this persona.
    #[arg(long)]
    persona: Option<String>,
    /// One session (by key), whole, or its messages sent before `--before`.
    #[arg(long)]
    session: Option<String>,
    /// With `--session`: only the messages before the first one sent at or after this time
    /// (RFC 3339, or a date read as its midnight UTC).
    #[arg(long, requires = "session", value_parser = parse_time)]
    before: Option<DateTime<Utc>>,
    /// Print what would be erased, and change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(time.with_timezone(&Utc));
    }
    if let Ok(time) = NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S") {
        return Ok(time.and_utc());
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(date.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
    }
    Err(format!("{text:?} is not a time; use RFC 3339 (2024-05-01T09:30:00Z) or a date (2024-05-01)"))
}

impl ForgetArgs {
    fn scope(&self) -> anyhow::Result<ForgetScope> {
        Ok(match (&self.persona, &self.session, self.before) {
            (Some(persona), None, None) => ForgetScope::Persona { persona: persona.clone() },
            (None, Some(key), None) => ForgetScope::Session { key: key.clone() },
            (None, Some(key), Some(before)) => ForgetScope::SessionBefore { key: key.clone(), before },
            _ => bail!("name either --persona or --session (with --before, optionally)"),
        })
    }
}

fn lines(counts: &ForgetCounts) -> Vec<(u64, &'static str)> {
    vec![
        (counts.sessions, "sessions"),
        (counts.messages, "messages"),
        (counts.summaries, "summary nodes"),
        (counts.rebuilt, "summary nodes rewritten from the messages they keep"),
        (counts.memories, "memories"),
        (counts.memory_versions, "earlier versions of memories"),
        (counts.proposals, "queued facts and preference proposals"),
        (counts.vectors, "vectors"),
        (counts.ingests, "import records"),
    ]
}

/// `--dry-run`: what would be erased, read from a read-only store, with no engine (whose
/// start may write), so nothing is written.
pub fn plan(store: &dyn Backend, args: &ForgetArgs, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let plan = store.forget_plan(&args.scope()?).context("cannot plan the forget")?;
    if json {
        return print_json(out, &strata::edge::ForgetPlan::from(&plan));
    }
    writeln!(out, "would erase (dry run, nothing changed):")?;
    for (count, what) in lines(&plan.counts) {
        writeln!(out, "{count:>10}  {what}")?;
    }
    Ok(())
}

pub fn run(
    store: SharedBackend,
    settings: &Config,
    args: &ForgetArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let scope = args.scope()?;
    let engine = Engine::from_store(store, settings.clone())?;
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{spinner} forgetting [{bar:30}] {pos}/{len} messages ({per_sec})")
            .expect("static template")
            .progress_chars("=> "),
    );
    let shown = bar.clone();
    let forgotten = engine
        .block_on(engine.engine().forget(&scope, "strata forget", move |done, total| {
            shown.set_length(total);
            shown.set_position(done);
        }))
        .context("nothing was forgotten")?;
    bar.finish_and_clear();
    if json {
        return print_json(out, &strata::edge::Forgotten::from(&forgotten));
    }
    writeln!(out, "erased (audit record {}):", forgotten.audit)?;
    for (count, what) in lines(&forgotten.counts) {
        writeln!(out, "{count:>10}  {what}")?;
    }
    if forgotten.markers > 0 {
        writeln!(
            out,
            "{} rewritten nodes hold a marker: the summarizer could not run; the next compaction summarizes them",
            forgotten.markers
        )?;
    }
    if !forgotten.wal_truncated {
        writeln!(
            out,
            "the write-ahead log could not be emptied (a reader holds it); run `strata forget` or any write again later"
        )?;
    }
    Ok(())
}
