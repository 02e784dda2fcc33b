//! strata-recall: the tools an LLM calls to get back what compaction folded away.
//!
//! - [`call_tool`] runs one tool call (`memory_grep`, `memory_search`, `view_message`,
//!   `expand_summary`, `view_chat_history_summary`, `save_memory`) for a [`ToolContext`] and
//!   always answers JSON; [`tool_specs`] lists the tools in the OpenAI function format.
//! - [`Embedder`] runs all-MiniLM-L6-v2 locally (fastembed + ONNX Runtime from local files,
//!   fetched by `scripts/fetch-embed-assets.sh`); [`embed_backlog`] and [`EmbedWorker`] keep the
//!   vector tables caught up, crash-safely.
//!
//! Every tool is confined to the persona of the calling session: the persona is never an
//! argument. Recalled text comes back fenced as data (see [`strata_seam::fence`]).
//!
//! ```
//! use serde_json::json;
//! use strata_recall::{RecallSettings, ToolContext, call_tool};
//! use strata_seam::{Conversations, NewMessage, Role};
//! use strata_store::Store;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path().join("strata.db")).unwrap();
//! let session = store.session("chat-1", "coder").unwrap();
//! store.append(session.id, &[NewMessage::text(Role::User, "The staging port is 8443.")]).unwrap();
//!
//! // Keyword search needs no model; without one, memory_search ranks by keywords and says why.
//! let no_model = strata_recall::Embedder::load(dir.path().join("no-assets-here"));
//! let ctx = ToolContext::new(store, session, no_model, RecallSettings::default());
//! // The calling session's own messages are in its context already: left out and counted.
//! let found = call_tool(&ctx, "memory_grep", &json!({"query": "staging port"}));
//! assert_eq!((found["count"].as_u64(), found["left_out_in_context"].as_u64()), (Some(0), Some(1)));
//! let found = call_tool(&ctx, "memory_grep", &json!({"query": "staging port", "include_in_context": true}));
//! assert_eq!(found["count"], 1);
//! // Recalled text is fenced as data; the match is marked with « ».
//! assert!(found["results"][0]["snippet"].as_str().unwrap().contains("«staging"));
//! let semantic = call_tool(&ctx, "memory_search", &json!({"query": "staging port", "include_in_context": true}));
//! assert_eq!(semantic["count"], 1);
//! assert!(semantic["semantic_coverage"]["note"].as_str().unwrap().starts_with("semantic search unavailable"));
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod config;
mod embed;
mod error;
mod pipeline;
mod time;
pub mod tools;

pub use crate::config::{EmbedProvider, EndpointSettings, RecallConfig, RecallSettings};
pub use crate::embed::{DEFAULT_MODEL, Embedder, EmbeddingEndpoint, EndpointError, model_spec};
pub use crate::error::{Error, Result};
pub use crate::pipeline::{BacklogFilter, EmbedWorker, embed_backlog, embed_backlog_with};
pub use crate::time::{Bound, parse_bound};
pub use crate::tools::{
    EmbedderState, Scope, Settled, Tool, ToolContext, Twin, Twins, call_tool, is_refusal, proactive,
    purge_expired, refusal, settle_memory_updates, tool_names, tool_specs, twins,
};

/// The local embedding model's catalogue and helpers, and the backlog worker's figures.
pub mod embedding {
    pub use crate::embed::{
        ASSETS_ENV, MINILM_L6_V2, MINILM_L6_V2_Q8, MODELS, ModelSpec, PoolingKind, chunk_text, cosine,
        default_assets_dir, runtime_environment, shut_down,
    };
    pub use crate::pipeline::{EmbedProgress, WorkerStats};
    pub use crate::tools::{Script, meaning_text, mostly_cjk, script_of};
}
