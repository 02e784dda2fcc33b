//! strata-compactor: keeps a chat's context inside the model's window.
//!
//! A [`Compactor`] runs the compaction cycle over any backend ([`strata_seam::Backend`]): it cuts a
//! session at turn edges, protects the head, the tail and pinned messages, folds the oldest
//! whole turns of the middle into Level-0 summary nodes, merges the oldest K roots of a level
//! into one node a level up whenever 2K exist, and assembles the context handed to the model
//! ([`AssembledContext`]): head, a scaffold listing the forest, an acknowledgement, the
//! uncompacted buffer and the tail, counted exactly ([`TokenCounter`]) and never over budget.
//!
//! Summaries come from a [`Summarizer`]: the offline [`ExtractiveSummarizer`] (the default, no
//! network) or the [`OpenAiSummarizer`] for any OpenAI-compatible server.
//!
//! ```
//! use std::sync::Arc;
//! use strata_compactor::{Compactor, CompactorConfig, ExtractiveSummarizer, Outcome};
//! use strata_seam::{Conversations, NewMessage, Role};
//! use strata_store::Store;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), strata_compactor::Error> {
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path().join("strata.db"))?;
//! // Fold as soon as the middle holds 200 tokens, whatever the window (the default waits for 75% of it).
//! let config = CompactorConfig {
//!     trigger_ratio: 0.0,
//!     target_ratio: 0.0,
//!     leaf_min_tokens: 200,
//!     leaf_chunk_tokens: 200,
//!     ..CompactorConfig::default()
//! };
//! let compactor = Compactor::new(store.clone(), config, Arc::new(ExtractiveSummarizer::default()))?;
//! let session = store.session("chat-1", "default")?;
//! for turn in 0..20 {
//!     let mut messages = vec![
//!         NewMessage::text(Role::User, format!("Step {turn}: please edit src/lib.rs and run the tests.")),
//!         NewMessage::text(Role::Assistant, format!("Done with step {turn}; we decided to keep port 80{turn:02}.")),
//!     ];
//!     for message in &mut messages {
//!         compactor.counter().count_new(message);
//!     }
//!     store.append(session.id, &messages)?;
//! }
//! let outcome = compactor.compact(session.id).await?;
//! assert!(matches!(outcome, Outcome::Compacted { .. }));
//! let context = compactor.assemble(session.id, chrono::Utc::now()).await?;
//! assert!(context.tokens.total <= context.tokens.budget);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod assemble;
mod bulk;
mod capped;
mod compactor;
mod config;
mod error;
mod extractive;
mod facts;
mod masking;
mod openai;
mod plan;
mod scaffold;
mod summarizer;
mod tokens;
mod tool_names;
mod tree;

pub use crate::assemble::{
    AssembledContext, Assembler, AssemblyOptions, ContextSnapshot, Original, RecallRequest,
};
pub use crate::bulk::Compaction;
pub use crate::capped::CappedSummarizer;
pub use crate::compactor::{BeforeAssembly, Compactor, Outcome, Refusal, Resummarized};
pub use crate::config::{CompactorConfig, CompactorSettings};
pub use crate::error::{Error, Result, SummarizeError};
pub use crate::extractive::ExtractiveSummarizer;
pub use crate::facts::stated_facts;
pub use crate::openai::{OpenAiConfig, OpenAiSummarizer};
pub use crate::summarizer::Summarizer;
pub use crate::tokens::TokenCounter;
pub use crate::tool_names::ToolNames;
pub use crate::tree::render_tree;

/// The parts of an [`AssembledContext`] and the texts it is laid out with.
pub mod context {
    pub use crate::assemble::{
        ContextEntry, Injection, PLACEHOLDERS, Part, REGULAR_TEMPLATE, RecalledBlock, ShownHit,
        TokenAccounting, bootstrap_template,
    };
    pub use crate::tokens::{Encoding, TOKENS_PER_MESSAGE, TOKENS_PER_NAME, TOKENS_PER_REPLY};
}

/// What writing or wrapping a [`Summarizer`] takes: the request and its sources, the reply,
/// the extractive summarizer's seams and names, and the timing wrapper.
pub mod summarize {
    pub use crate::extractive::{EXTRACTIVE, EmbedError, RAW_ARCHIVE, SentenceEmbedder};
    pub use crate::summarizer::{
        BoxFuture, KnownMemory, MAX_MEMORY_UPDATES, Origin, RejectReason, RetryNote, SourceCall, SourceItem,
        SourceKind, Stopwatch, Summary, SummaryRequest, TimedSummarizer, WallClock,
    };
    pub use strata_llm::{ReportedCall, UsageLog};
}
