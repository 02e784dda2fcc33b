//! `strata serve`: the REST API, MCP, health, readiness, metrics and the OpenAPI document on one
//! address, until SIGTERM or Ctrl-C, then a graceful shutdown (see `crate::serve`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;

use crate::cli::Cli;
use crate::serve::{ServeOptions, serve};
use crate::tokens::Tokens;

/// Options of `strata serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port, printed on standard error).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// The token file: each token's SHA-256 and the personas it may act as (`strata token
    /// new`). Required on every address, loopback included.
    #[arg(long, value_name = "FILE", env = "STRATA_TOKENS")]
    tokens: PathBuf,
    /// The largest request body, in bytes (413 beyond).
    #[arg(long, default_value_t = 8 << 20, value_parser = clap::value_parser!(u64).range(1024..=1 << 30))]
    max_body_bytes: u64,
    /// Do not load the embedding model to embed new messages and memories in the background.
    #[arg(long)]
    no_embed: bool,
}

/// Serves until SIGTERM or Ctrl-C.
pub fn run(cli: &Cli, args: &ServeArgs) -> anyhow::Result<()> {
    let config = super::config(cli)?;
    let tokens = Tokens::load(&args.tokens)?;
    let store = super::open(cli)?;
    let engine = strata::blocking::Engine::from_store(store, config)?;
    if !args.no_embed
        && let Err(error) = engine.engine().start_embedding()
    {
        tracing::info!(error = %error, "not embedding in the background");
    }
    let options = ServeOptions {
        tokens,
        max_body_bytes: usize::try_from(args.max_body_bytes).context("--max-body-bytes is too large")?,
    };
    let served = engine.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let bound = listener.local_addr()?;
        eprintln!(
            "strata: serving at http://{bound} (REST under /v1, MCP at /mcp; SIGHUP reloads the tokens, SIGTERM or Ctrl-C stops)"
        );
        tokio::spawn(reload_on_hangup(args.tokens.clone(), options.tokens.clone()));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            stopped().await;
            eprintln!("strata: shutting down: finishing requests and compactions");
            stop.cancel();
        });
        serve(engine.engine().clone(), listener, options, shutdown).await.context("the server failed")
    });
    engine.shutdown_background();
    served
}

/// Reads the token file again on each SIGHUP (`kill -HUP`, `systemctl reload`): a token added
/// or revoked takes effect without a restart. A file that does not read or validate changes
/// nothing: the tokens in force stay, and the error is printed.
async fn reload_on_hangup(path: std::path::PathBuf, tokens: Tokens) {
    let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => signal,
        Err(error) => {
            tracing::warn!(%error, "cannot watch SIGHUP; the token file is read only at start");
            return;
        }
    };
    while hangup.recv().await.is_some() {
        match Tokens::load(&path) {
            Ok(fresh) => {
                tokens.replace_with(&fresh);
                eprintln!("strata: reloaded {}: {} tokens", path.display(), tokens.count());
            }
            Err(error) => {
                eprintln!("strata: kept the {} tokens in force: {error}", tokens.count());
            }
        }
    }
}

/// Resolves on SIGTERM (how a service manager stops a server) or Ctrl-C.
async fn stopped() {
    let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(signal) => signal,
        Err(error) => {
            tracing::warn!(%error, "cannot watch SIGTERM; Ctrl-C still stops");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
