//! `strata mcp`: the recall tools as an MCP server, of one session on stdio, or of every
//! session a host names over streamable HTTP (`--http`).

use std::net::SocketAddr;

use crate::mcp::http::{HttpOptions, serve_http};
use anyhow::{Context, bail};

use crate::cli::Cli;
use crate::cli::chat::open_session;

/// Options of `strata mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// The session whose persona every tool call runs as (created if new). With --http: the
    /// session of MCP sessions that send no Strata-Session header (none by default: the header
    /// is required).
    #[arg(long)]
    session: Option<String>,
    /// The persona of a new session (default: the existing session's, else "default"). With
    /// --http: the persona of MCP sessions that send no Strata-Persona header.
    #[arg(long)]
    persona: Option<String>,
    /// Serve over streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio: one
    /// server for many conversations, each MCP session naming its session and persona in the
    /// Strata-Session and Strata-Persona headers.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// The bearer token HTTP requests must carry (Authorization: Bearer TOKEN); required when
    /// --http is not a loopback address. On loopback without one, a token is made for this run,
    /// written to a file only you can read and printed on standard error. Prefer the variable
    /// to the flag, which `ps` shows.
    #[arg(long, env = "STRATA_MCP_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A token file binding each token to the personas it may act as (see `strata token
    /// new`), instead of one token for every persona.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    tokens: Option<std::path::PathBuf>,
    /// Do not load the embedding model to embed memories saved through the tools.
    #[arg(long)]
    no_embed: bool,
}

/// Serves until the client closes standard input (stdio) or the process is interrupted (HTTP).
/// Standard output carries the stdio protocol, so this must run without standard output
/// locked, and everything else goes to standard error.
pub fn run(cli: &Cli, args: &McpArgs) -> anyhow::Result<()> {
    let config = super::config(cli)?;
    if let Some(addr) = args.http {
        return run_http(cli, config, args, addr);
    }
    let key = args.session.as_deref().unwrap_or("mcp");
    let (engine, session) = open_session(cli, config, key, args.persona.as_deref(), !args.no_embed)?;
    tracing::info!(session = %session.info().key, persona = %session.info().persona, "serving MCP on stdio");
    engine.block_on(crate::mcp::serve_stdio(session)).context("MCP server failed")?;
    // Standard input may still be held by a blocking read after the client left; do not wait
    // for it.
    engine.shutdown_background();
    Ok(())
}

fn run_http(cli: &Cli, config: strata::Config, args: &McpArgs, addr: SocketAddr) -> anyhow::Result<()> {
    if let Some(persona) = &args.persona {
        strata_seam::backend::validate_persona(persona)?;
    }
    let token = args.token.clone().filter(|token| !token.trim().is_empty());
    let file = args.tokens.as_deref().map(crate::tokens::Tokens::load).transpose()?;
    if !addr.ip().is_loopback() && token.is_none() && file.is_none() {
        bail!(
            "--http {addr} is reachable beyond this machine: set a bearer token in STRATA_MCP_TOKEN (or --token)"
        );
    }
    let store = super::open(cli)?;
    let engine = strata::blocking::Engine::from_store(store, config)?;
    if !args.no_embed
        && let Err(error) = engine.engine().start_embedding()
    {
        tracing::info!(error = %error, "not embedding new memories");
    }
    let served = engine.block_on(async {
        let listener =
            tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        let bound = listener.local_addr()?;
        let (tokens, token_file) = match (file, token) {
            (Some(tokens), _) => (tokens, None),
            (None, Some(token)) => (crate::tokens::Tokens::shared(&token), None),
            (None, None) => {
                let (token, file) = run_token(bound)?;
                (crate::tokens::Tokens::shared(&token), Some((token, file)))
            }
        };
        eprintln!("strata: serving MCP over HTTP at http://{bound}/mcp (Ctrl-C stops)");
        if let Some((token, file)) = &token_file {
            // The host's MCP configuration needs it: `Authorization: Bearer <token>`.
            eprintln!(
                "strata: bearer token for this run: {token} (also in {}, readable by you only)",
                file.display()
            );
        }
        let options = HttpOptions {
            tokens: Some(tokens),
            default_session: args.session.clone(),
            default_persona: args.persona.clone(),
        };
        let shutdown = tokio_util::sync::CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                stop.cancel();
            }
        });
        let served = serve_http(engine.engine().clone(), listener, options, shutdown)
            .await
            .context("MCP server failed");
        if let Some((_, file)) = token_file {
            // The token dies with the run.
            let _ = std::fs::remove_file(file);
        }
        served
    });
    engine.shutdown_background();
    served
}

/// A token for this run, 32 bytes from the system's random source in hex, written to a file
/// only this user can read (mode 0600, created anew so no one else's file or link is
/// followed): `$XDG_RUNTIME_DIR`, a directory of this user's, else the temporary directory.
fn run_token(bound: SocketAddr) -> anyhow::Result<(String, std::path::PathBuf)> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let token = crate::tokens::fresh().context("set STRATA_MCP_TOKEN")?;
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .filter(|dir| dir.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let file = dir.join(format!("strata-mcp-{}.token", bound.port()));
    // A file left by an earlier run on this port (or planted) is removed, not written through.
    match std::fs::remove_file(&file) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error).with_context(|| format!("cannot replace {}", file.display())),
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .with_context(|| format!("cannot write the token to {}", file.display()))?;
    writeln!(out, "{token}").with_context(|| format!("cannot write the token to {}", file.display()))?;
    Ok((token, file))
}
