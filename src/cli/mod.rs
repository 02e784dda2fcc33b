//! Command definitions and dispatch.

mod ingest;
mod memory;
mod output;

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use strata_store::{MessageId, Store};

use crate::cli::output::{MessageView, print_json};

/// strata: lossless memory and hierarchical context compaction for LLM chat agents.
#[derive(Debug, Parser)]
#[command(name = "strata", version, about)]
pub struct Cli {
    /// The database file.
    #[arg(long, global = true, env = "STRATA_DB", default_value = "strata.db")]
    db: PathBuf,
    /// Print machine-readable JSON instead of text (read commands).
    #[arg(long, global = true)]
    json: bool,
    /// How long to wait for another writer's lock before giving up, in milliseconds.
    #[arg(long, global = true, env = "STRATA_BUSY_TIMEOUT_MS", default_value_t = 10_000)]
    busy_timeout_ms: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create the database (or bring an older one up to date).
    Init,
    /// Append chat messages from a JSON Lines file, one message per line.
    Ingest(ingest::IngestArgs),
    /// Show what the database holds.
    Stats,
    /// Show one message in full.
    View {
        /// The message id.
        id: i64,
    },
    /// Read and write agent memories, as the user (who may also write user_preferences).
    #[command(subcommand)]
    Memory(memory::MemoryCommand),
}

/// Opens the database named on the command line.
fn open(cli: &Cli) -> anyhow::Result<Store> {
    Store::open_with_timeout(&cli.db, std::time::Duration::from_millis(cli.busy_timeout_ms))
        .with_context(|| format!("cannot use database {}", cli.db.display()))
}

/// Runs one command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match &cli.command {
        Command::Init => {
            let store = open(&cli)?;
            writeln!(
                out,
                "initialized {} (schema version {})",
                store.path().display(),
                strata_store::SCHEMA_VERSION
            )?;
        }
        Command::Ingest(args) => ingest::run(&open(&cli)?, args, cli.json, &mut out)?,
        Command::Stats => {
            let stats = open(&cli)?.stats()?;
            if cli.json {
                print_json(&mut out, &stats)?;
            } else {
                writeln!(out, "sessions            {}", stats.sessions)?;
                writeln!(out, "messages            {}", stats.messages)?;
                writeln!(out, "  compacted         {}", stats.compacted_messages)?;
                writeln!(out, "  tokens            {}", stats.message_tokens)?;
                for (level, count) in stats.nodes_per_level.iter().enumerate() {
                    writeln!(out, "level-{level} nodes       {count}")?;
                }
                writeln!(out, "memories            {}", stats.memories)?;
                writeln!(out, "embedding backlog   {}", stats.embedding_backlog)?;
                writeln!(out, "file size           {} bytes", stats.file_bytes)?;
            }
        }
        Command::View { id } => {
            let store = open(&cli)?;
            let message = store.message(MessageId(*id))?;
            let session = store.session_by_id(message.session_id)?;
            let view = MessageView::new(&message, &session);
            if cli.json {
                print_json(&mut out, &view)?;
            } else {
                view.print(&mut out)?;
            }
        }
        Command::Memory(command) => memory::run(&open(&cli)?, command, cli.json, &mut out)?,
    }
    out.flush()?;
    Ok(())
}
