//! strata-store: the SQLite layer of strata.
//!
//! One file in WAL mode holds everything: sessions, the verbatim messages (append-only), the
//! summary forest, the agent memories, and their full-text (FTS5) and vector (sqlite-vec)
//! indexes. This crate knows nothing of LLMs, HTTP or async runtimes; it offers a typed,
//! synchronous API: [`Store`] opens the file and implements [`Backend`], the storage seam
//! (strata-pg implements it too), whose writes are short immediate transactions.
//!
//! The root holds what nearly every caller needs: [`Store`], the [`Backend`] seam, the errors
//! and the core rows (sessions, messages, summary nodes, memories). The rest is grouped by
//! concept: [`stats`], [`transfer`] (dump, export, import), [`forgetting`], [`search`],
//! [`memories`] (their rules, provenance and update queue), [`secrets`] (masked in derived text), [`embeddings`], [`check`],
//! [`location`], [`text`], [`fence`], and in [`backend`] the rules every backend shares.
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
pub mod check;
mod db;
mod dump;
pub mod embeddings;
mod error;
mod export;
pub mod fence;
mod forest;
pub mod forgetting;
mod ingests;
pub mod kinds;
mod load;
pub mod location;
pub mod maintenance;
pub mod memories;
mod messages;
mod metrics;
mod migrate;
mod outline;
mod provenance;
mod queues;
pub mod search;
pub mod secrets;
mod sessions;
pub mod stats;
mod store;
pub mod text;
pub mod transfer;
mod types;
mod usage;
mod vec;
mod vectors;
mod watermark;

pub use crate::backend::{Backend, Lease, SharedBackend, Snapshot, read_consistent};
pub use crate::error::{Error, Missing, Result, error_chain};
pub use crate::maintenance::Maintenance;
pub use crate::outline::MessageOutline;
pub use crate::sessions::SessionOverview;
pub use crate::store::Store;
pub use crate::types::{
    Category, Level, Memory, MemoryId, Message, MessageId, NewMessage, NewSummary, NodeId, Role, Session,
    SessionId, SummaryNode, ToolCall,
};
// What only tests read: the schema's version.
#[cfg(any(test, feature = "test-support"))]
pub use crate::migrate::SCHEMA_VERSION;
