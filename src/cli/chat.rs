//! `strata chat`: talk to a model through strata, one line per turn, watching its tool calls.

use std::io::{BufRead, IsTerminal, Write};

use crate::chat::{ChatError, ChatLoop, DEFAULT_MAX_TOOL_ROUNDS, ToolCall};
use anyhow::{Context, bail};
use serde_json::Value;
use strata::blocking::Engine;
use strata::llm::{ChatClient, RetryPolicy};
use strata::{ChatMessage, EngineSession};

use crate::cli::Cli;

/// Options of `strata chat`.
#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// Base URL of the OpenAI-compatible API (OpenAI, Ollama's http://localhost:11434/v1,
    /// llama.cpp server, vLLM). The API key, if any, comes from the variable `[summarizer]
    /// api_key_env` names (STRATA_API_KEY by default), else OPENAI_API_KEY.
    #[arg(long, env = "STRATA_BASE_URL", default_value = "https://api.openai.com/v1")]
    base_url: String,
    /// The chat model; also picks the tokenizer strata counts the context with.
    #[arg(long, env = "STRATA_CHAT_MODEL", default_value = "gpt-4o-mini")]
    model: String,
    /// The session key: the conversation to continue (created if new).
    #[arg(long, default_value = "chat")]
    session: String,
    /// The persona of a new session (default: the existing session's, else "default").
    #[arg(long)]
    persona: Option<String>,
    /// Most replies of one turn that may call tools.
    #[arg(long, default_value_t = DEFAULT_MAX_TOOL_ROUNDS)]
    max_tool_rounds: u32,
    /// Seconds to wait for one reply of the model.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Most tokens of one reply (sent as `max_tokens`; some servers default to unlimited).
    #[arg(long, default_value_t = strata::llm::DEFAULT_MAX_TOKENS)]
    max_tokens: u32,
    /// Sampling temperature sent with every request (0 to 2; default: the server's).
    #[arg(long, value_parser = parse_temperature)]
    temperature: Option<f64>,
    /// Print a reply whose content begins with a tool call written as JSON text instead of running
    /// the call (by default such calls are recognised: llama.cpp-based servers write them so).
    #[arg(long)]
    no_text_tool_calls: bool,
    /// Do not embed new messages in the background (semantic search then finds them only
    /// after `strata embed`).
    #[arg(long)]
    no_embed: bool,
    /// The system message a new session begins with (stored as its first message). By default
    /// one that tells the model to search its memory with memory_grep or memory_search before
    /// answering about earlier chats; "" for none. An existing session keeps what it has.
    #[arg(long)]
    system: Option<String>,
}

/// Opens the engine and the session a long-running command (chat, mcp) works on.
pub(crate) fn open_session(
    cli: &Cli,
    config: strata::Config,
    key: &str,
    persona: Option<&str>,
    embed: bool,
) -> anyhow::Result<(Engine, EngineSession)> {
    let store = super::open(cli).with_context(|| format!("cannot use database {}", super::shown(&cli.db)))?;
    let engine = Engine::from_store(store, config)?;
    let persona = match persona {
        Some(persona) => persona.to_owned(),
        None => {
            engine.store().find_session(key)?.map_or_else(|| "default".to_owned(), |session| session.persona)
        }
    };
    let session =
        engine.engine().session(key, &persona).with_context(|| format!("cannot open session {key:?}"))?;
    if embed && let Err(error) = engine.engine().start_embedding() {
        // Everything but semantic search of new messages works without the model.
        tracing::info!(error = %error, "not embedding new messages");
    }
    Ok((engine, session))
}

/// Runs the REPL until end of input or `/exit`. A failed turn is reported and the next line
/// still runs; the exit status says whether any failed.
pub fn run(cli: &Cli, args: &ChatArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut config = super::config(cli)?;
    config.compactor.model = args.model.clone();
    let (engine, session) =
        open_session(cli, config.clone(), &args.session, args.persona.as_deref(), !args.no_embed)?;
    let system = args.system.clone().unwrap_or_else(crate::chat::default_system_prompt);
    if !system.trim().is_empty() && engine.store().messages(session.id(), 0..=0)?.is_empty() {
        session.append(ChatMessage::system(system)).context("cannot store the system message")?;
    }
    // The configuration's key variable (`[summarizer] api_key_env`) and retries, with --timeout.
    let api_key = config.summarizer.api_key();
    let retry =
        RetryPolicy { timeout_ms: args.timeout.saturating_mul(1_000), ..config.compactor.retry.clone() };
    let client = ChatClient::with_retry(&args.base_url, &args.model, api_key, retry)
        .with_max_tokens(args.max_tokens)
        .with_temperature(args.temperature)
        .with_text_tool_calls(!args.no_text_tool_calls);
    let chat = ChatLoop::new(engine.engine(), client).max_tool_rounds(args.max_tool_rounds);

    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprintln!(
            "strata chat: session {:?} (persona {:?}), {} at {}. /exit or Ctrl-D to leave.",
            session.info().key,
            session.info().persona,
            args.model,
            args.base_url
        );
    }
    let (mut turns, mut failed) = (0u32, 0u32);
    let mut input = std::io::stdin().lock();
    let mut line = String::new();
    loop {
        if interactive {
            write!(out, "> ")?;
            out.flush()?;
        }
        line.clear();
        if input.read_line(&mut line).context("cannot read standard input")? == 0 {
            break;
        }
        let request = line.trim();
        match request {
            "" => continue,
            "/exit" | "/quit" => break,
            _ => {}
        }
        turns += 1;
        let outcome = engine.block_on(chat.turn(&session, request, print_tool_call));
        match outcome {
            Ok(turn) if cli.json => {
                // One JSON object per turn (JSON Lines): the answer and every tool call.
                writeln!(out, "{}", serde_json::to_string(&turn)?)?;
                out.flush()?;
            }
            Ok(turn) => {
                writeln!(out, "{}", turn.text.trim_end())?;
                out.flush()?;
                eprintln!("{}", usage_line(&turn));
            }
            Err(error) => {
                failed += 1;
                if let ChatError::ToolRoundsExceeded { .. } = error {
                    eprintln!("error: {error} (raise --max-tool-rounds to allow more)");
                } else {
                    eprintln!("error: {}", crate::cli::error_line(&anyhow::Error::from(error)));
                }
            }
        }
    }
    if interactive {
        writeln!(out)?;
    }
    if failed > 0 {
        bail!("{failed} of {turns} turns failed");
    }
    Ok(())
}

fn parse_temperature(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=2.0).contains(&value) => Ok(value),
        _ => Err(format!("{text} is not a temperature between 0 and 2")),
    }
}

/// One line on standard error per tool call, so standard output holds only the answers.
fn print_tool_call(call: &ToolCall) {
    let arguments = strata_seam::text::truncate_chars(&call.arguments.to_string(), 120);
    let outcome = if call.is_error() {
        let message = call.result.pointer("/error/message").and_then(Value::as_str).unwrap_or("refused");
        format!("error: {}", strata_seam::text::truncate_chars(message, 160))
    } else if let Some(count) = call.result.get("count").and_then(Value::as_u64) {
        format!("{count} results")
    } else {
        "ok".to_owned()
    };
    eprintln!("  [tool] {}({arguments}) -> {outcome}", call.name);
}

/// A turn's usage in one line, beside the tool calls on standard error: what the server
/// reported, what strata counted, and the time waited.
fn usage_line(turn: &crate::chat::Turn) -> String {
    let usage = &turn.usage;
    let reported = match (usage.prompt_tokens, usage.completion_tokens) {
        (None, None) => "the server reported no usage".to_owned(),
        (prompt, completion) => format!(
            "server {} prompt + {} completion tokens",
            prompt.map_or("?".to_owned(), |n| n.to_string()),
            completion.map_or("?".to_owned(), |n| n.to_string())
        ),
    };
    format!(
        "[usage] {} request{}: {reported}; strata counted {} + {}; {:.1} s",
        turn.requests,
        if turn.requests == 1 { "" } else { "s" },
        usage.counted_prompt_tokens,
        usage.counted_completion_tokens,
        usage.millis as f64 / 1000.0
    )
}
