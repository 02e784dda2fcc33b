//! strata-store: the SQLite layer of strata.
//!
//! One file in WAL mode holds everything: sessions, the verbatim messages (append-only), the
//! summary forest, the agent memories, and their full-text (FTS5) and vector (sqlite-vec)
//! indexes. This crate knows nothing of LLMs, HTTP or async runtimes; it offers a typed,
//! synchronous API: [`Store`] opens the file and implements [`Backend`], the storage seam
//! (strata-pg implements it too), whose writes are short immediate transactions.
//!
//! ```
//! use strata_store::{Backend, NewMessage, NewSummary, Role, Store};
//!
//! # fn main() -> Result<(), strata_store::Error> {
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path().join("strata.db"))?;
//! let session = store.session("chat-1", "default")?;
//! let mut hello = NewMessage::text(Role::User, "Hello, please remember the port is 8080.");
//! hello.token_count = 12;
//! let ids = store.append(session.id, &[hello, NewMessage::text(Role::Assistant, "Noted.")])?;
//! assert_eq!(store.message(ids[1])?.seq, 1);
//!
//! // Fold both messages into a Level-0 summary node; they stay readable verbatim.
//! let summary = NewSummary {
//!     headline: "The user set the port to 8080.".into(),
//!     body: "- decision: port 8080".into(),
//!     token_count: 9,
//!     summarizer: "extractive".into(),
//!     memory_updates: Vec::new(),
//! };
//! let node = store.insert_leaf(session.id, 0, 1, &summary)?;
//! assert_eq!(store.covered_messages(node.id)?.len(), 2);
//! // The same messages cannot be covered twice.
//! assert!(store.insert_leaf(session.id, 1, 1, &summary).is_err());
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod agent_memories;
pub mod backend;
mod check;
mod db;
mod dump;
mod error;
mod export;
pub mod fence;
mod forest;
mod forgetting;
mod ingests;
mod kinds;
mod location;
mod messages;
mod metrics;
mod migrate;
mod outline;
mod provenance;
mod queues;
mod search;
mod sessions;
mod store;
mod text;
mod types;
mod usage;
mod vec;
mod vectors;
mod watermark;

pub use crate::agent_memories::{
    MAX_CONTENT_CHARS, MAX_KEY_CHARS, MemoryTtls, MemoryWrite, Ttl, normalize_key,
};
pub use crate::backend::{Backend, CompactionState, Lease, SharedBackend, Snapshot, read_consistent};
pub use crate::check::{Check, Report};
pub use crate::dump::{Dump, StoredMemory, StoredMessage, StoredSession, StoredVector};
pub use crate::error::{Error, Missing, Result, error_chain};
pub use crate::export::{ExportScope, ExportedMessage};
pub use crate::forgetting::{ForgetCounts, ForgetPlan, ForgetScope, Forgotten, KeptSpan, Rebuilt};
pub use crate::ingests::line_digest;
pub use crate::location::{is_postgres_url, without_password};
pub use crate::metrics::{CallTotals, NodeTotals, StoreMetrics, ToolTotals};
pub use crate::outline::MessageOutline;
pub use crate::provenance::{MemoryVersion, Provenance, Source};
pub use crate::search::{
    CandidateQuery, Candidates, HitId, HitKind, STOPWORDS, SearchFilter, TextHit, TextQuery, WordStatistics,
};
pub use crate::sessions::{SessionOverview, validate_persona};
pub use crate::store::{Imported, IncomingMessage, RejectionCount, Stats, Store, SummarizerStats};
pub use crate::text::truncate_chars;
pub use crate::types::{
    Category, Level, Memory, MemoryId, MemoryUpdate, Message, MessageId, NewMessage, NewSummary, NodeId,
    QueuedUpdate, Role, Session, SessionId, SummaryNode, ToolCall, UpdateId, Writer, from_unix, to_unix,
};
pub use crate::usage::{LlmCall, UsageDay};
pub use crate::vectors::{BacklogItem, EmbeddingSpace, MAX_CHUNKS, Scan};
// What only tests read: the audit of forgets, the schema's version and the vectors.
#[cfg(any(test, feature = "test-support"))]
pub use crate::{
    forgetting::ForgetRecord,
    migrate::SCHEMA_VERSION,
    vectors::{Embeddings, VectorCounts},
};
