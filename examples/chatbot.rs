//! A complete chat bot with strata as its memory, against any OpenAI-compatible endpoint
//! (OpenAI, Ollama, llama.cpp server, vLLM).
//!
//! ```sh
//! STRATA_BASE_URL=http://localhost:11434/v1 STRATA_CHAT_MODEL=llama3.1 cargo run --example chatbot
//! ```
//!
//! Settings come from the environment: `STRATA_BASE_URL`, `STRATA_CHAT_MODEL`, the key in
//! `STRATA_API_KEY` or `OPENAI_API_KEY`, the database in `STRATA_DB` (default `chatbot.db`).
//!
//! Each line you type is one turn: append your message, let strata compact the history and
//! assemble the context, send it to the model with strata's tools, run the tools the model calls
//! through the engine, append their results, and ask again until it answers. Restart the bot
//! and the conversation goes on: it is all in the database. (`strata chat` is the same loop
//! with a bound on tool rounds and usage accounting.)

use std::io::BufRead;
use std::time::Duration;

use strata::llm::ChatClient;
use strata::{ChatMessage, Config, Engine, EngineSession};

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base_url = env("STRATA_BASE_URL", "https://api.openai.com/v1");
    let model = env("STRATA_CHAT_MODEL", "gpt-4o-mini");

    // One SQLite file holds every message, summary and memory. Thresholds are in Config.
    let mut config = Config::default();
    let api_key = config.summarizer.api_key(); // STRATA_API_KEY, else OPENAI_API_KEY
    config.compactor.model = model.clone(); // the tokenizer strata counts the context with
    let engine = Engine::open(env("STRATA_DB", "chatbot.db"), config)?;

    // A session is one conversation; its persona scopes what the tools can see.
    let is_new = engine.store().find_session("chatbot")?.is_none();
    let session = engine.session("chatbot", "assistant")?;
    if is_new {
        // The first messages are the head: kept verbatim in every context.
        session.append(ChatMessage::system(
            "You are a helpful assistant with a long memory. When the user refers to something \
             you cannot see in this conversation, search it with your memory tools.",
        ))?;
    }

    let client = ChatClient::new(&base_url, &model, api_key, Duration::from_secs(120));
    let tools = engine.tool_specs();

    eprintln!("chatting with {model} at {base_url}; Ctrl-D to quit");
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match turn(&session, &client, &tools, &line).await {
            Ok(answer) => println!("{answer}"),
            // Whatever was stored before the failure stays stored; the next line goes on.
            Err(error) => eprintln!("error: {}", strata::seam::error_chain(error.as_ref())),
        }
    }
    Ok(())
}

/// One turn: the user's line, then requests until the model answers in text. Every message is
/// appended as it comes, so each stored tool call is followed by its result.
async fn turn(
    session: &EngineSession,
    client: &ChatClient,
    tools: &[serde_json::Value],
    input: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    session.append(ChatMessage::user(input))?;
    loop {
        // Compacts when the history nears the window, then assembles what fits.
        let prepared = session.prepare_context().await?;
        let reply = ChatMessage::from(client.complete(prepared.messages(), tools).await?);
        let calls = reply.calls();
        let text = reply.content.clone().unwrap_or_default();
        session.append(reply)?;
        if calls.is_empty() {
            return Ok(text);
        }
        for call in calls {
            // The call runs as this session's persona; a refusal is an answer the model reads.
            eprintln!("  [{}] {}", call.name, call.arguments);
            let answer = session.call_tool(&call.name, call.arguments).await;
            session.append(ChatMessage::tool(call.id, call.name, answer.to_string()))?;
        }
    }
}
