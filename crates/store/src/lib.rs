//! strata-store: the SQLite backend of strata.
//!
//! One file in WAL mode holds everything: sessions, the verbatim messages (append-only), the
//! summary forest, the agent memories, and their full-text (FTS5) and vector (sqlite-vec)
//! indexes. This crate knows nothing of LLMs, HTTP or async runtimes. [`Store`] opens the file
//! and implements the storage seam (`strata_seam::Backend` and its roles), whose writes are
//! short immediate transactions; the rows, the errors and the rules every backend shares are
//! strata-seam's. What only a SQLite file has is here too: [`backup_into`] (a consistent copy
//! of any backend into a new SQLite file), the file's own checks, and [`kinds`], the tables
//! and columns both backends' SQL is built from.
//!
//! ```
//! use strata_seam::{Conversations, Forest, NewMessage, NewSummary, Role};
//! use strata_store::Store;
//!
//! # fn main() -> Result<(), strata_seam::Error> {
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
mod check;
mod db;
mod dump;
mod error;
mod export;
mod forest;
mod forgetting;
mod ingests;
pub mod kinds;
mod load;
mod messages;
mod metrics;
mod migrate;
mod outline;
mod provenance;
mod queues;
mod search;
mod sessions;
mod store;
mod types;
mod usage;
mod vec;
mod vectors;
mod watermark;

pub use crate::dump::Dump;
pub use crate::load::backup_into;
pub use crate::store::Store;
// What only tests read: the schema's version, the stored vectors and their counts.
#[cfg(any(test, feature = "test-support"))]
pub use crate::migrate::SCHEMA_VERSION;
#[cfg(any(test, feature = "test-support"))]
pub use crate::vectors::{Embeddings, VectorCounts};
