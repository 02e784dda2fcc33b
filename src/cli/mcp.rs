//! `strata mcp`: the recall tools of one session as a stdio MCP server.

use anyhow::Context;

use crate::cli::Cli;
use crate::cli::chat::open_session;

/// Options of `strata mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// The session whose persona every tool call runs as (created if new).
    #[arg(long, default_value = "mcp")]
    session: String,
    /// The persona of a new session (default: the existing session's, else "default").
    #[arg(long)]
    persona: Option<String>,
    /// Do not load the embedding model to embed memories saved through the tools.
    #[arg(long)]
    no_embed: bool,
}

/// Serves until the client closes standard input. Standard output carries the protocol, so
/// this must run without standard output locked, and everything else goes to standard error.
pub fn run(cli: &Cli, args: &McpArgs) -> anyhow::Result<()> {
    let config = super::config(cli)?;
    let (engine, session) =
        open_session(cli, config, &args.session, args.persona.as_deref(), !args.no_embed)?;
    tracing::info!(session = %session.info().key, persona = %session.info().persona, "serving MCP on stdio");
    engine.block_on(strata::mcp::serve_stdio(session)).context("MCP server failed")?;
    // Standard input may still be held by a blocking read after the client left; do not wait
    // for it.
    engine.shutdown_background();
    Ok(())
}
