//! `strata import --from FORMAT FILE|DIR`: conversations other tools wrote, stored like an
//! ingest (all or nothing, re-runs add nothing); the readers are the library's
//! (`strata::import`), so an application linking strata imports the same way.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use strata::import::{Format, ImportOptions};
use strata_seam::SharedBackend;

use crate::cli::ingest::{progress_bar, report, store_all};

/// Options of `strata import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The format: claude-code (session files under ~/.claude/projects), codex (rollout files
    /// under ~/.codex/sessions), opencode (OpenCode's Markdown export), openai (a JSON list of
    /// chat-completions messages, or JSON Lines of them), chatgpt (conversations.json of
    /// ChatGPT's data export), jsonl (strata's own, as `strata ingest` reads).
    #[arg(long = "from", value_parser = clap::builder::ValueParser::new(|name: &str| name.parse::<Format>()))]
    format: Format,
    /// The file (`-` for standard input), or a directory: every file of the format under it.
    path: PathBuf,
    /// Put every message into this session (default: the file's own sessions).
    #[arg(long)]
    session: Option<String>,
    /// The persona of the sessions created.
    #[arg(long, default_value = "default")]
    persona: String,
    /// Model whose tokenizer counts the messages (default: the configuration's).
    #[arg(long, env = "STRATA_MODEL")]
    model: Option<String>,
}

/// Imports `args.path` into the store `open` opens, once the whole input has been read and
/// checked: a refused input leaves the database as it was, and a missing or empty one is not
/// made a database.
pub fn run(
    open: impl FnOnce() -> anyhow::Result<SharedBackend>,
    config: &strata::Config,
    args: &ImportArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    strata_seam::backend::validate_persona(&args.persona)?;
    let counter = crate::cli::ingest::token_counter(config, args.model.as_deref());
    let options = ImportOptions { session: args.session.clone(), ..ImportOptions::new(&args.persona) };
    // Nothing is written until the whole file (or directory) has been read.
    let mut incoming = strata::import::read_file(args.format, &args.path, &options)?;
    for message in &incoming {
        config
            .compactor
            .check_message_size(&message.message)
            .with_context(|| format!("{}: session {:?}", args.path.display(), message.session_key))?;
    }
    counter.count_new_all(incoming.iter_mut().map(|incoming| &mut incoming.message));
    let store = &open()?;
    counter.claim(&**store)?;
    let progress = progress_bar();
    progress.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    let imported = store_all(store, &incoming, &progress)?;
    report(&incoming, &imported, &counter, None, json, out)
}
