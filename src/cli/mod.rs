//! Command definitions and dispatch.

mod chat;
mod compact;
mod demo;
mod doctor;
mod eval;
mod export;
mod forget;
mod import;
mod ingest;
#[cfg(feature = "mcp")]
mod mcp;
mod memory;
mod output;
mod recall;
#[cfg(feature = "mcp")]
mod serve;
mod token;

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use strata_seam::SharedBackend;
use strata_store::Store;

use crate::cli::output::print_json;

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
    /// The configuration file (default: ./strata.toml when it exists). Every setting can also
    /// be set as STRATA_<SECTION>_<KEY>; see `strata config`.
    #[arg(long, global = true, env = "STRATA_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The main job: a generated week of pair programming, stored, compacted, embedded and
    /// recalled, fully offline.
    Demo(demo::DemoArgs),
    /// Print the effective configuration (defaults, file, environment) as TOML.
    Config,
    /// Write the demo's generated conversation as JSON Lines, ready for `strata ingest`.
    Synth {
        /// Which conversation: the demo's week of pair programming, or a team's group chat.
        #[arg(long, value_enum, default_value_t = SynthKind::PairProgramming)]
        kind: SynthKind,
        /// Seed of the generated conversation.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// At least this many messages (about 160 tokens each).
        #[arg(long, default_value_t = 1_600, value_parser = message_count(0, 1_000_000))]
        messages: usize,
        /// The file to write (standard output when absent).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Write a persona's memory and history as Markdown (MEMORY.md, HISTORY.md, the summary
    /// forest), or its messages as JSON Lines that `strata ingest` reads back unchanged.
    Export(export::ExportArgs),
    /// Erase a persona, a session or a session's oldest messages, and everything derived from
    /// them (summaries, vectors, search entries, memories, proposals), so that the bytes leave
    /// the file; an audit record keeps what was erased, when and by whom, without content.
    Forget(forget::ForgetArgs),
    /// Create the database (or bring an older one up to date).
    Init,
    /// Check the database: SQLite's check, full-text indexes, the summary forest and its
    /// coverage, the embedding backlog. Exits non-zero with a report when something is wrong.
    Doctor {
        /// Run SQLite's full integrity_check (slower) instead of quick_check.
        #[arg(long)]
        full: bool,
        /// Accept that the newest commits were lost with a damaged -wal (the report says how
        /// many): carry on with what the file holds, which writers otherwise refuse.
        #[arg(long)]
        accept_lost_commits: bool,
    },
    /// Write a consistent copy of the database into a new SQLite file (safe while other
    /// processes write; a plain file copy can miss what is still in the write-ahead log). On
    /// PostgreSQL this is `strata copy --to FILE`: one snapshot, no `pg_dump`.
    Backup {
        /// The file to create (must not exist).
        dest: PathBuf,
    },
    /// Bring a backup back as the database: the backup is checked, the current file (with its
    /// `-wal`) is moved aside to `<db>.replaced` when `--replace` allows it, and the commit
    /// watermark (`<db>-commits`) is set to the backup's, so writers take the restored file.
    /// Stop every process using the database first.
    Restore {
        /// The backup (`strata backup`'s file).
        backup: PathBuf,
        /// Move the current database aside (to `<db>.replaced`) instead of refusing.
        #[arg(long)]
        replace: bool,
    },
    /// Copy the database exactly (every row with its id, the forest, memories with their
    /// versions, the queue, usage, vectors) into PostgreSQL or a new SQLite file. From
    /// PostgreSQL the copy reads one snapshot, so it is a consistent backup while bots write.
    /// Into PostgreSQL, run it again to finish a copy that was cut short (the target must be
    /// empty or a copy of the same source); into SQLite, the file must not exist.
    Copy {
        /// Where to copy: a PostgreSQL url (`postgres://user:password@host/database`) or the
        /// path of a new SQLite file.
        #[arg(long)]
        to: String,
    },
    /// Append chat messages from a JSON Lines file, one message per line.
    Ingest(ingest::IngestArgs),
    /// Import conversations written by other tools: Claude Code, Codex CLI, OpenCode, OpenAI
    /// message lists, ChatGPT's export.
    Import(import::ImportArgs),
    /// Show what the database holds.
    Stats,
    /// Print strata's metrics in the Prometheus text format (compactions, tokens, LLM calls and
    /// usage, tool results, embedding backlog, database size); README.md lists the names.
    Metrics,
    /// Show one message in full.
    View {
        /// The message id.
        id: strata_seam::MessageId,
    },
    /// Read and write agent memories, as the user (who may also write user_preferences).
    #[command(subcommand)]
    Memory(memory::MemoryCommand),
    /// Fold old turns of a session into summary nodes until its context fits.
    Compact(compact::CompactArgs),
    /// Replace node summaries with another summarizer's (after switching to an LLM, say):
    /// bottom-up, resumable, never losing a node; facts the new summaries find become memories.
    Resummarize(compact::ResummarizeArgs),
    /// Print exactly what would be sent to the model for a session, with token counts per part.
    Context(compact::ContextArgs),
    /// Draw a session's summary forest as an indented tree.
    Tree(compact::TreeArgs),
    /// Keyword search (case-insensitive substrings, "phrases", `*`) over messages, summaries, memories.
    Grep(recall::SearchCommand),
    /// Semantic search (local embeddings) fused with keyword rank.
    Search(recall::SearchCommand),
    /// Drill into a summary node: its children, or the messages of a Level-0 node.
    Expand(recall::ExpandCommand),
    /// Embed everything waiting for a vector (backfill), with a progress bar.
    Embed(recall::EmbedCommand),
    /// Chat with a model (OpenAI-compatible API) through strata: a REPL that stores every
    /// message, compacts, and runs the model's tool calls.
    Chat(chat::ChatArgs),
    /// Serve one session's recall tools to an MCP client over stdin/stdout.
    #[cfg(feature = "mcp")]
    Mcp(mcp::McpArgs),
    /// Make a bearer token for a token file (`strata serve --tokens`), bound to personas.
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Serve a fleet of bots over HTTP: a REST API (sessions, appends, contexts, tool calls,
    /// memories, proposals, forget, export, stats), MCP at /mcp, health, readiness, metrics
    /// and the OpenAPI document, every request with a token bound to personas.
    #[cfg(feature = "mcp")]
    Serve(serve::ServeArgs),
    /// Measure strata on annotated conversations (a fresh temporary database; --db is unused).
    #[command(subcommand)]
    Eval(eval::EvalCommand),
}

/// The generated conversations `strata synth` writes.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum SynthKind {
    /// A week of pair programming with tool calls (the demo's).
    PairProgramming,
    /// Weeks of a four-person team's group chat.
    TeamChat,
}

/// A number of messages to generate between `min` and `max`: a generator asked for 10^19
/// messages would never end.
fn message_count(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(min..=max)
}

/// Opens the database named on the command line for a command that only reads: a missing
/// file is an error, never created, and the store's connections are read-only, so the command
/// never takes the write lock (a search finds unindexed rows without writing).
///
/// A PostgreSQL url (`postgres://...`) opens that database instead; its reads run in
/// read-only snapshots.
fn open_existing(cli: &Cli) -> anyhow::Result<SharedBackend> {
    if let Some(url) = postgres_url(cli) {
        return open_postgres(url);
    }
    Ok(Store::open_existing(&cli.db, std::time::Duration::from_millis(cli.busy_timeout_ms))
        .with_context(|| format!("cannot use database {}", cli.db.display()))?
        .into())
}

/// Opens (or creates) the database named on the command line, for a command that writes: a
/// damaged file is refused before anything is written to it (the store's open checks it).
fn open(cli: &Cli) -> anyhow::Result<SharedBackend> {
    if let Some(url) = postgres_url(cli) {
        return open_postgres(url);
    }
    Ok(open_sqlite(cli, "")?.into())
}

/// Opens the SQLite file named on the command line for a command only SQLite has (`what`
/// names it in the error a PostgreSQL url gets).
fn open_sqlite(cli: &Cli, what: &str) -> anyhow::Result<Store> {
    if postgres_url(cli).is_some() {
        anyhow::bail!("{what} needs a SQLite database; {} is a PostgreSQL url", redacted(cli));
    }
    Store::open_with_timeout(&cli.db, std::time::Duration::from_millis(cli.busy_timeout_ms))
        .with_context(|| format!("cannot use database {}", cli.db.display()))
}

/// The `--db` value when it is a PostgreSQL url.
fn postgres_url(cli: &Cli) -> Option<&str> {
    cli.db.to_str().filter(|db| strata_seam::location::is_postgres_url(db))
}

/// The `--db` value for messages, without a password.
fn redacted(cli: &Cli) -> String {
    shown(&cli.db)
}

/// A database location for messages: a url without its password, a path as it is.
pub(crate) fn shown(db: &std::path::Path) -> String {
    strata_seam::location::without_password(&db.to_string_lossy())
}

/// The PostgreSQL database at `url`, or why this build cannot open one.
pub(crate) fn open_postgres(url: &str) -> anyhow::Result<SharedBackend> {
    #[cfg(feature = "postgres")]
    return Ok(std::sync::Arc::new(
        strata_pg::PgStore::open(url).context("cannot use the PostgreSQL database")?,
    ));
    #[cfg(not(feature = "postgres"))]
    anyhow::bail!(
        "{} is a PostgreSQL url, and this strata was built without PostgreSQL (`make demo` builds \
         only what the demo runs; `cargo build --release` builds every command)",
        strata_seam::location::without_password(url)
    )
}

/// Loads the configuration: defaults, then the file, then `STRATA_*` variables.
fn config(cli: &Cli) -> anyhow::Result<strata::Config> {
    let default_file = PathBuf::from("strata.toml");
    let file = cli.config.clone().or_else(|| default_file.exists().then_some(default_file));
    strata::Config::load(file.as_deref(), std::env::vars()).context("cannot load the configuration")
}

/// Runs one command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    #[cfg(feature = "mcp")]
    if let Command::Mcp(args) = &cli.command {
        // Standard output carries the protocol, written from tokio's threads: it must not be
        // locked by this thread.
        return mcp::run(&cli, args);
    }
    #[cfg(feature = "mcp")]
    if let Command::Serve(args) = &cli.command {
        return serve::run(&cli, args);
    }
    let mut out = std::io::stdout().lock();
    match &cli.command {
        Command::Demo(args) => demo::run(&cli.db, config(&cli)?, args, &mut out)?,
        Command::Config => write!(out, "{}", config(&cli)?.to_toml())?,
        Command::Synth { kind, seed, messages, out: file } => {
            let transcript = match kind {
                SynthKind::PairProgramming => strata_synth::generate(&strata_synth::TranscriptSpec {
                    seed: *seed,
                    min_messages: *messages,
                    min_chars: messages * strata_synth::CHARS_PER_MESSAGE,
                    ..Default::default()
                }),
                SynthKind::TeamChat => strata_synth::generate_team_chat(&strata_synth::TeamChatSpec {
                    seed: *seed,
                    messages: *messages,
                    ..Default::default()
                }),
            };
            match file {
                Some(path) => std::fs::write(path, transcript.to_jsonl())
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => out.write_all(transcript.to_jsonl().as_bytes())?,
            }
        }
        Command::Export(args) => export::run(&*open_existing(&cli)?, args, cli.json, &mut out)?,
        Command::Forget(args) if args.dry_run => {
            forget::plan(&*open_existing(&cli)?, args, cli.json, &mut out)?
        }
        Command::Forget(args) => forget::run(open(&cli)?, &config(&cli)?, args, cli.json, &mut out)?,
        Command::Init => {
            let store = open(&cli)?;
            // The encoding every count in this database is made with, from now on.
            let counter = config(&cli)?.compactor.token_counter();
            counter.claim(&*store)?;
            writeln!(
                out,
                "initialized {} ({}, tokens counted with {})",
                redacted(&cli),
                store.name(),
                counter.encoding().as_str()
            )?;
        }
        Command::Ingest(args) => ingest::run(|| open(&cli), &config(&cli)?, args, cli.json, &mut out)?,
        Command::Import(args) => import::run(|| open(&cli), &config(&cli)?, args, cli.json, &mut out)?,
        Command::Doctor { full, accept_lost_commits } => {
            if postgres_url(&cli).is_some() {
                let store = open(&cli)?;
                doctor::doctor(&*store, *full, cli.json, &mut out)?;
                out.flush()?;
                return Ok(());
            }
            let store =
                Store::open_to_inspect(&cli.db, std::time::Duration::from_millis(cli.busy_timeout_ms))
                    .with_context(|| format!("cannot use database {}", cli.db.display()))?;
            if *accept_lost_commits && let Some((found, recorded)) = store.lost_commits()? {
                store.accept_lost_commits()?;
                eprintln!(
                    "accepted the loss of {} commits; writers may use the file again",
                    recorded - found
                );
            }
            doctor::doctor(&store, *full, cli.json, &mut out)?
        }
        Command::Copy { to } => {
            let source = open_existing(&cli)?;
            let name = match postgres_url(&cli) {
                Some(_) => redacted(&cli),
                None => cli.db.canonicalize().unwrap_or_else(|_| cli.db.clone()).display().to_string(),
            };
            doctor::copy(&*source, &name, to, cli.json, &mut out)?
        }
        Command::Backup { dest } => match postgres_url(&cli) {
            // A fleet's database backs up into a new SQLite file from one snapshot.
            Some(_) => doctor::copy(
                &*open_existing(&cli)?,
                &redacted(&cli),
                &dest.to_string_lossy(),
                cli.json,
                &mut out,
            )?,
            None => doctor::backup(&open_sqlite(&cli, "strata backup")?, dest, cli.json, &mut out)?,
        },
        Command::Restore { backup, replace } => {
            if postgres_url(&cli).is_some() {
                anyhow::bail!(
                    "strata restore needs a SQLite database; {} is a PostgreSQL url",
                    redacted(&cli)
                );
            }
            doctor::restore(backup, &cli.db, *replace, &mut out)?
        }
        Command::Stats => {
            let store = open_existing(&cli)?;
            let stats = store.stats()?;
            let usage = store.usage_by_day()?;
            if cli.json {
                let shape = strata::edge::Stats {
                    llm_usage: Some(strata::edge::all(&usage)),
                    ..strata::edge::Stats::from(&stats)
                };
                print_json(&mut out, &shape)?;
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
                for summarizer in &stats.summarizers {
                    writeln!(
                        out,
                        "summarizer {:<16} {} nodes, {} tokens in, {} out ({:.1}x compression)",
                        summarizer.summarizer,
                        summarizer.nodes,
                        summarizer.tokens_in,
                        summarizer.tokens_out,
                        summarizer.tokens_in as f64 / summarizer.tokens_out.max(1) as f64
                    )?;
                }
                for rejected in &stats.rejections {
                    writeln!(
                        out,
                        "rejected {:<18} {} summaries: {}",
                        rejected.summarizer, rejected.count, rejected.reason
                    )?;
                }
                for day in &usage {
                    let totals = &day.totals;
                    writeln!(
                        out,
                        "llm {} {:<7} {:<16} {} calls ({} failed): server {} + {} tokens, strata counted {} + {}, {:.1} s",
                        day.day,
                        totals.purpose,
                        totals.model,
                        totals.calls,
                        totals.failures,
                        totals.prompt_tokens,
                        totals.completion_tokens,
                        day.counted_prompt_tokens,
                        day.counted_completion_tokens,
                        totals.millis as f64 / 1000.0
                    )?;
                }
                writeln!(out, "file size           {} bytes", stats.file_bytes)?;
            }
        }
        Command::Metrics => {
            let store = open_existing(&cli)?;
            let text = strata::metrics::render(&store.metrics()?, &Default::default());
            if cli.json {
                print_json(&mut out, &strata::edge::Metrics::from(&store.metrics()?))?;
            } else {
                write!(out, "{text}")?;
            }
        }
        Command::View { id } => {
            recall::view(&*open_existing(&cli)?, &config(&cli)?.recall, *id, cli.json, &mut out)?
        }
        Command::Grep(args) => {
            let (store, config) = (open_existing(&cli)?, config(&cli)?);
            recall::search(&*store, &config, args, recall::Matching::Keywords, cli.json, &mut out)?
        }
        Command::Search(args) => {
            let (store, config) = (open_existing(&cli)?, config(&cli)?);
            recall::search(&*store, &config, args, recall::Matching::Meaning, cli.json, &mut out)?
        }
        Command::Expand(args) => {
            recall::expand(&*open_existing(&cli)?, &config(&cli)?.recall, args, cli.json, &mut out)?
        }
        Command::Embed(args) => recall::embed(&*open(&cli)?, &config(&cli)?, args, cli.json, &mut out)?,
        Command::Chat(args) => chat::run(&cli, args, &mut out)?,
        Command::Eval(command) => eval::run(&config(&cli)?, command, cli.json, &mut out)?,
        #[cfg(feature = "mcp")]
        Command::Mcp(_) => {} // served above, before standard output was locked
        #[cfg(feature = "mcp")]
        Command::Serve(_) => {} // served above
        Command::Token(command) => token::run(command, cli.json, &mut out)?,
        Command::Memory(command) => {
            let store = if command.reads_only() { open_existing(&cli)? } else { open(&cli)? };
            let config = config(&cli)?;
            memory::run(&*store, &config.recall, &config.compactor.retry, command, cli.json, &mut out)?
        }
        Command::Compact(args) => compact::compact(open(&cli)?, args, &config(&cli)?, cli.json, &mut out)?,
        Command::Context(args) => {
            compact::context(open_existing(&cli)?, args, &config(&cli)?, cli.json, &mut out)?
        }
        Command::Tree(args) => compact::tree(open_existing(&cli)?, args, cli.json, &mut out)?,
        Command::Resummarize(args) => {
            compact::resummarize(open(&cli)?, args, &config(&cli)?, cli.json, &mut out)?
        }
    }
    out.flush()?;
    Ok(())
}

/// The `strata` command: parses `args` (the program's name first), runs the command, prints
/// an error as one line, and returns the process's exit code (0, 1, or clap's 2 for a bad
/// argument).
pub fn main_from(args: impl IntoIterator<Item = std::ffi::OsString>) -> u8 {
    let args: Vec<std::ffi::OsString> = args.into_iter().collect();
    let args = match Cli::try_parse_from(&args) {
        Ok(args) => args,
        // `--version --json`: the versions a client checks, strata's and its JSON shapes'.
        Err(error)
            if error.kind() == clap::error::ErrorKind::DisplayVersion
                && args.iter().any(|arg| arg == "--json") =>
        {
            let versions = serde_json::json!({
                "version": env!("CARGO_PKG_VERSION"),
                "wire_version": strata::WIRE_VERSION,
            });
            return match print_json(&mut std::io::stdout().lock(), &versions) {
                Ok(()) => 0,
                Err(err) if is_broken_pipe(&err) => 0,
                Err(_) => 1,
            };
        }
        // Help and version are "errors" that exit 0; clap prints and picks the code.
        Err(error) => {
            let _ = error.print();
            return error.exit_code().clamp(0, 255) as u8;
        }
    };
    #[cfg(feature = "otel")]
    let telemetry = init_tracing();
    #[cfg(not(feature = "otel"))]
    init_tracing();
    let result = run(args);
    // The spans still buffered go out before the exit (a short command ends within the batch
    // processor's first interval).
    #[cfg(feature = "otel")]
    if let Some(Err(error)) = telemetry.map(strata::otel::Telemetry::shutdown) {
        eprintln!("warning: {}", error_line(&anyhow::Error::new(error)));
    }
    // Threads may still be loading the model or embedding (the chat loop warms it in the
    // background): the exit must not tear ONNX Runtime down under them.
    strata_recall::embedding::shut_down();
    match result {
        Ok(()) => 0,
        Err(err) if is_broken_pipe(&err) => 0,
        Err(err) => {
            eprintln!("error: {}", error_line(&err));
            1
        }
    }
}

/// The log on stderr (filtered by `STRATA_LOG`, `warn` by default) and, when the `OTEL_*`
/// variables ask for it, the spans exported by OTLP (`strata::otel`). A host (the Python
/// interpreter) may have set a subscriber already; then this one is dropped, export too.
#[cfg(feature = "otel")]
fn init_tracing() -> Option<strata::otel::Telemetry> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let filter = tracing_subscriber::EnvFilter::try_from_env("STRATA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let log = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter);
    let telemetry = match strata::otel::Telemetry::from_env() {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("warning: no OTLP export: {}", error_line(&anyhow::Error::new(error)));
            None
        }
    };
    let export = telemetry.as_ref().map(strata::otel::Telemetry::layer);
    match tracing_subscriber::registry().with(log).with(export).try_init() {
        Ok(()) => telemetry,
        Err(_) => None,
    }
}

/// The log on stderr, filtered by `STRATA_LOG` (`warn` by default): a build without the `otel`
/// feature exports no spans.
#[cfg(not(feature = "otel"))]
fn init_tracing() {
    use tracing_subscriber::util::SubscriberInitExt as _;

    let filter = tracing_subscriber::EnvFilter::try_from_env("STRATA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ =
        tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter).finish().try_init();
}

/// Most characters shown of one cause: some (a SQL error) carry kilobytes of statement text.
const MAX_CAUSE_CHARS: usize = 300;

/// One line naming the problem and its causes, `ingest failed: line 7: ...`: whitespace
/// collapsed, each cause cut at [`MAX_CAUSE_CHARS`].
pub(crate) fn error_line(err: &anyhow::Error) -> String {
    err.chain()
        .map(|cause| {
            strata_seam::text::truncate_chars(
                &strata_seam::fence::one_line(&cause.to_string()),
                MAX_CAUSE_CHARS,
            )
        })
        .collect::<Vec<_>>()
        .join(": ")
}

/// Output piped into `head` and closed early is not a failure.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
