//! strata-seam: what strata asks of a database, apart from any database.
//!
//! The seam is a set of role traits, in the words of the domain and never in SQL:
//! [`Conversations`] (sessions and their messages), [`Forest`] (the summary forest),
//! [`Memories`] (agent memories and the update queue), [`Search`] (keyword search and ranked
//! candidates), [`Vectors`] (embeddings) and [`Maintenance`] (import, export, forget, copy,
//! backup, and what an operator reads). A [`Backend`] is all of them plus a consistent
//! snapshot ([`Snapshot`]) for assembly. strata-store implements it over one SQLite file,
//! strata-pg over a PostgreSQL server; the engine, the compactor and the tools hold a
//! [`SharedBackend`] and never learn which.
//!
//! The crate also holds what every backend shares so that no backend owns it: the rows (the
//! root's types), the [`Error`], the rules a row obeys before it is written ([`backend`]'s
//! `validate_*` and `check_*`), the forget plan ([`forgetting`]), how a transcript's lines are
//! recognized ([`maintenance`]), and, behind the `conformance` feature, the suite of tests
//! every backend must pass (`conformance`).
//!
//! The rest is grouped by concept: [`stats`], [`transfer`] (dump, export, import),
//! [`search`], [`memories`] (their rules, provenance and update queue), [`secrets`] (masked in
//! derived text), [`embeddings`], [`check`], [`location`], [`text`] and [`fence`].
#![deny(missing_docs)]

mod agent_memories;
pub mod backend;
pub mod check;
#[cfg(feature = "conformance")]
pub mod conformance;
mod dump;
pub mod embeddings;
mod error;
mod export;
pub mod fence;
mod forest;
pub mod forgetting;
mod ingests;
pub mod location;
pub mod maintenance;
pub mod memories;
mod messages;
mod metrics;
mod outline;
mod provenance;
mod roles;
pub mod search;
pub mod secrets;
mod sessions;
pub mod stats;
pub mod text;
pub mod transfer;
mod types;
mod usage;
mod vectors;

pub use crate::backend::{Backend, CompactionState, Lease, SharedBackend, Snapshot, read_consistent};
pub use crate::error::{Cause, Error, Missing, Result, error_chain};
pub use crate::maintenance::Maintenance;
pub use crate::outline::MessageOutline;
pub use crate::roles::{Conversations, Forest, Memories, Search, Vectors};
pub use crate::sessions::SessionOverview;
pub use crate::types::{
    Category, Level, Memory, MemoryId, Message, MessageId, NewMessage, NewSummary, NodeId, Role, Session,
    SessionId, SummaryNode, ToolCall,
};
