//! strata: an embeddable, SQLite-backed memory and hierarchical context-compaction engine for
//! LLM chat agents.
//!
//! Every message is kept verbatim in one SQLite file (or, with the `postgres` feature, in a
//! PostgreSQL database that a fleet of processes shares: give [`Engine::open`] a
//! `postgres://` url); old turns are folded into a forest of summaries so the prompt fits the
//! model's window; tools let the model search and drill back into anything folded away. This
//! crate wires the three library crates together:
//!
//! - [`store`]: the storage seam (`Backend`) and the SQLite layer (sessions, messages, summary
//!   nodes, memories, indexes).
//! - [`compactor`]: token counting, compaction and context assembly.
//! - [`recall`]: the LLM's tools.
//!
//! The whole loop of a chat bot, offline (the extractive summarizer is the default):
//!
//! ```
//! use serde_json::json;
//! use strata::{ChatMessage, Config, Engine};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> strata::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let engine = Engine::open(dir.path().join("strata.db"), Config::default())?;
//! let session = engine.session("chat-1", "coder")?;
//! session.append(ChatMessage::system("You are a helpful coding assistant."))?;
//! session.append(ChatMessage::user("The staging database listens on port 6432."))?;
//! session.append(ChatMessage::assistant("Noted: staging is on 6432."))?;
//! session.append(ChatMessage::user("Which port was staging on?"))?;
//!
//! // Before every LLM call: compact if needed, then assemble what fits the window.
//! let prepared = session.prepare_context().await?;
//! assert!(prepared.context.tokens.total <= prepared.context.tokens.budget);
//! let _request = json!({"model": "gpt-4o-mini", "messages": prepared.messages(), "tools": engine.tool_specs()});
//!
//! // The model's reply, as the provider sent it (reasoning, images and Anthropic's blocks are
//! // kept too), then its tool call run for this session's persona and the answer appended.
//! // What the context already holds verbatim is left out and counted, unless the call asks.
//! session.append_json(&json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
//!     "type": "function", "function": {"name": "memory_grep", "arguments": "{\"query\": \"staging port\"}"}}]}))?;
//! let answer = session.call_tool("memory_grep", json!({"query": "staging port"})).await;
//! assert_eq!(answer["left_out_in_context"], 2);
//! let answer = session.call_tool("memory_grep", json!({"query": "staging port", "include_in_context": true})).await;
//! assert!(answer["count"].as_u64().unwrap() >= 1);
//! session.append(ChatMessage::tool("call_1", "memory_grep", answer.to_string()))?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod blocking;
// The command line lives in the library so that the Python wheel can ship the `strata` command
// (its entry point calls `cli::main_from`); `src/main.rs` is one call. `strata::` paths in it
// name this crate.
#[cfg(feature = "cli")]
extern crate self as strata;
#[cfg(feature = "cli")]
mod chat;
// Its doc comments are the command's `--help` text (clap), not rustdoc's.
#[cfg(feature = "cli")]
#[doc(hidden)]
#[allow(missing_docs, rustdoc::all)]
pub mod cli;
pub mod config;
pub mod edge;
mod embedding;
mod engine;
mod error;
pub mod import;
pub mod llm;
#[cfg(all(feature = "cli", feature = "mcp"))]
mod mcp;
mod message;
pub mod metrics;
#[cfg(feature = "otel")]
pub mod otel;
mod render;
#[cfg(all(feature = "cli", feature = "mcp"))]
mod serve;
// Without `mcp` (the demo's build) only `strata token`'s half is used, not the servers'.
#[cfg(feature = "cli")]
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
mod tokens;
pub use crate::render::render_context;

pub use crate::config::{Config, SummarizerConfig, SummarizerKind};
pub use crate::edge::WIRE_VERSION;
pub use crate::embedding::{OpenAiEmbeddings, load_embedder};
pub use crate::engine::{
    CompactedSession, Engine, EngineSession, HistorySearch, PreparedContext, SentenceModel,
};
pub use crate::error::{Error, ErrorClass, ErrorKind, Result};
pub use crate::message::{ChatMessage, Format, Incoming};
pub use strata_wire as wire;

pub use strata_compactor as compactor;
pub use strata_recall as recall;
pub use strata_seam as seam;
pub use strata_store as store;
