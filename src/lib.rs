//! strata: an embeddable, SQLite-backed memory and hierarchical context-compaction engine for
//! LLM chat agents.
//!
//! Every message is kept verbatim in one SQLite file; old turns are folded into a forest of
//! summaries so the prompt fits the model's window; tools let the model search and drill back
//! into anything folded away. This crate wires the three library crates together:
//!
//! - [`store`]: the SQLite layer (sessions, messages, summary nodes, memories, indexes).
//! - [`compactor`]: token counting, compaction and context assembly.
//! - [`recall`]: the LLM's tools.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let store = strata::store::Store::open(dir.path().join("strata.db")).unwrap();
//! assert_eq!(store.stats().unwrap().messages, 0);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use strata_compactor as compactor;
pub use strata_recall as recall;
pub use strata_store as store;
