//! The `strata` command line, and what only it runs: the chat loop of `strata chat` and the MCP
//! server of `strata mcp`. The library (`src/lib.rs`) is the engine and its facade.

mod chat;
mod cli;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(feature = "mcp")]
mod serve;
mod tokens;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STRATA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = cli::run(args);
    // Threads may still be loading the model or embedding (the chat loop warms it in the
    // background): the exit must not tear ONNX Runtime down under them.
    strata_recall::embedding::shut_down();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", error_line(&err));
            ExitCode::FAILURE
        }
    }
}

/// Most characters shown of one cause: some (a SQL error) carry kilobytes of statement text.
const MAX_CAUSE_CHARS: usize = 300;

/// One line naming the problem and its causes, `ingest failed: line 7: ...`: whitespace
/// collapsed, each cause cut at [`MAX_CAUSE_CHARS`].
fn error_line(err: &anyhow::Error) -> String {
    err.chain()
        .map(|cause| {
            strata_store::text::truncate_chars(
                &strata_store::fence::one_line(&cause.to_string()),
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
