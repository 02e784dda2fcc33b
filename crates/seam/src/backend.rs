//! The storage seam: what strata asks of a database, in the words of the domain (sessions,
//! appends, coverage, the forest, memories, the queue, keyword and vector candidates, leases),
//! never in SQL. The roles are traits of their own (`roles.rs`); [`Backend`] is all of
//! them. strata-store (SQLite, embedded) and strata-pg (PostgreSQL, for a fleet of processes on
//! several hosts) implement it, and both run the whole conformance suite this crate ships
//! (`conformance`, feature `conformance`).
//!
//! The rules a row obeys before it is written (a summary's, a memory's, a session key's) have
//! one home, re-exported here for a backend to call (a message's is [`NewMessage::validate`], a
//! persona's [`validate_persona`]), and so do the clock's stored form ([`to_unix`],
//! [`from_unix`]): a backend adds how rows are stored, never what a valid row is.

use std::ops::Range;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::maintenance::Maintenance;
use crate::outline::MessageOutline;
use crate::roles::{Conversations, Forest, Memories, Search, Vectors};
use crate::types::{Category, Level, Memory, Message, Session, SessionId, SummaryNode};

pub use crate::agent_memories::{
    accepted as accepted_proposal, check_merge, check_supersede, check_writer, validate as validate_memory,
};
pub use crate::forest::{NodePlace, RAW_ARCHIVE, check_adjacent, plan_merge, validate as validate_summary};
pub use crate::search::{fold, rank_grep_hits};
pub use crate::sessions::{MAX_PERSONA_CHARS, validate_name, validate_persona, validate_session_key};
pub use crate::types::{from_unix, to_unix};
pub use crate::usage::validate as validate_llm_calls;

#[allow(unused_imports)] // for the docs' links
use crate::types::NewMessage;

/// A compaction lease on one session: while it is held, no other holder (in this process or
/// any other sharing the database) gets one for that session. Dropping it gives it up; so
/// does the holder's death (a closed connection, a closed file), so a crashed process never
/// blocks a session for good.
pub trait Lease: Send {}

/// What strata asks of a database: every role ([`Conversations`], [`Forest`], [`Memories`],
/// [`Search`], [`Vectors`], [`Maintenance`]) and a consistent snapshot for assembly.
///
/// The engine, the compactor and the tools hold a [`SharedBackend`] and never learn which
/// database is behind it; what only a SQLite file has (its bytes, `restore`, a file's own
/// checks) the command line does with the SQLite store it opens on the file itself.
pub trait Backend:
    Conversations + Forest + Memories + Search + Vectors + Maintenance + Send + Sync + std::fmt::Debug
{
    /// Which backend this is, for messages and metrics (`sqlite`, `postgres`).
    fn name(&self) -> &'static str;
    /// Runs `f` with reads that all see one snapshot of the database, so a compaction
    /// committed meanwhile by another process cannot show a message both verbatim and
    /// summarized. Generic callers use [`read_consistent`].
    fn read_snapshot(&self, f: &mut dyn FnMut(&dyn Snapshot) -> Result<()>) -> Result<()>;
}

/// A backend shared by the engine, the compactor and the tools.
pub type SharedBackend = Arc<dyn Backend>;

/// The reads assembly makes, all from one snapshot ([`Backend::read_snapshot`]).
pub trait Snapshot {
    /// The session with this id.
    fn session(&self, id: SessionId) -> Result<Session>;
    /// See [`Conversations::live_outline`].
    fn live_outline(&self, session: SessionId, head: i64) -> Result<Vec<MessageOutline>>;
    /// Every message with seq below `head_end` (the head, verbatim whatever covers it) and
    /// every uncovered message after it, in seq order: what a context is built from.
    fn context_messages(&self, session: SessionId, head_end: i64) -> Result<Vec<Message>>;
    /// See [`Forest::roots`].
    fn roots(&self, session: SessionId, level: Option<Level>) -> Result<Vec<SummaryNode>>;
    /// See [`Memories::memories`].
    fn memories(&self, persona: &str, category: Option<Category>) -> Result<Vec<Memory>>;
    /// When the message at `seq` of a session was sent; `None` if there is none.
    fn message_time(&self, session: SessionId, seq: i64) -> Result<Option<DateTime<Utc>>>;
    /// The seq the session's next message will have.
    fn next_seq(&self, session: SessionId) -> Result<i64>;
    /// The newest messages of a session with a seq in `seqs`, in seq order: as many as it
    /// takes to pass `tokens` tokens (one more than fit, so the caller can cut at a turn
    /// edge). Read newest first and stopped there, so the rows read follow `tokens`.
    fn folded_before(&self, session: SessionId, seqs: Range<i64>, tokens: u64) -> Result<Vec<Message>>;
    /// Whether a session holds a user message before `seq`.
    fn has_request_before(&self, session: SessionId, seq: i64) -> Result<bool>;
    /// What the compactor recorded of a session besides its forest, read with the rest so
    /// that a compaction's check that nothing is left to write sees the snapshot assembly does.
    fn compaction_state(&self, session: SessionId) -> Result<CompactionState>;
}

/// A session's compaction bookkeeping ([`Snapshot::compaction_state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionState {
    /// Consecutive failed summarizer calls recorded for the session (0 after a success).
    pub summarizer_failures: u32,
    /// Whether the session holds a raw archive: a node written without the summarizer, to be
    /// summarized again ([`Forest::first_raw_archive`]).
    pub raw_archive: bool,
}

/// Runs `f` on one snapshot of `backend` (see [`Backend::read_snapshot`]) and returns its value.
pub fn read_consistent<T>(backend: &dyn Backend, f: impl FnOnce(&dyn Snapshot) -> Result<T>) -> Result<T> {
    let mut f = Some(f);
    let mut value = None;
    backend.read_snapshot(&mut |snapshot| {
        let f =
            f.take().ok_or_else(|| Error::invalid("snapshot", "a backend ran a snapshot's reads twice"))?;
        value = Some(f(snapshot)?);
        Ok(())
    })?;
    value.ok_or_else(|| Error::invalid("snapshot", "a backend never ran a snapshot's reads"))
}
