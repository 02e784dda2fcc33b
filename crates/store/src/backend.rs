//! The storage seam: what strata asks of a database, in the words of the domain (sessions,
//! appends, coverage, the forest, memories, the queue, keyword and vector candidates, leases),
//! never in SQL. [`Store`] (SQLite, embedded) implements it (in `store.rs`); `strata-pg`
//! (PostgreSQL, for a fleet of processes on several hosts) implements it over a connection pool.
//!
//! Both backends answer the same conformance suite (`crates/pg/tests/conformance.rs`), and the
//! rules a row obeys before it is written (a summary's, a memory's, a session key's) have one
//! home, re-exported here for a backend to call (a message's is [`NewMessage::validate`], a
//! persona's [`validate_persona`]), and so do the clock's stored form ([`to_unix`],
//! [`from_unix`]): a backend adds how rows are stored, never what a valid row is.

use std::ops::{Range, RangeInclusive};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::agent_memories::MemoryWrite;
use crate::check::Report;
use crate::error::{Error, Missing, Result};
use crate::maintenance::Maintenance;
use crate::metrics::StoreMetrics;
use crate::outline::MessageOutline;
use crate::provenance::{MemoryVersion, Provenance, Source};
use crate::search::{CandidateQuery, Candidates, SearchFilter, TextHit, TextQuery};
use crate::sessions::SessionOverview;
use crate::store::{Stats, Store};
use crate::types::{
    Category, Level, Memory, MemoryUpdate, Message, MessageId, NewMessage, NewSummary, NodeId, QueuedUpdate,
    Session, SessionId, SummaryNode, UpdateId, Writer,
};
use crate::usage::LlmCall;
use crate::vectors::{BacklogItem, EmbeddingSpace};

pub use crate::agent_memories::{check_merge, check_supersede, check_writer, validate as validate_memory};
pub use crate::forest::{NodePlace, RAW_ARCHIVE, check_adjacent, plan_merge, validate as validate_summary};
pub use crate::queues::accepted as accepted_proposal;
pub use crate::search::grep::{fold, rank_grep_hits};
pub use crate::sessions::{validate_persona, validate_session_key};
pub use crate::types::{from_unix, to_unix};
pub use crate::usage::validate as validate_llm_calls;

/// A compaction lease on one session: while it is held, no other holder (in this process or
/// any other sharing the database) gets one for that session. Dropping it gives it up; so
/// does the holder's death (a closed connection, a closed file), so a crashed process never
/// blocks a session for good.
pub trait Lease: Send {}

/// What strata asks of a database. Every method is one transaction (or one snapshot, for
/// reads); every error names the problem and leaves the database as it was.
///
/// The engine, the compactor and the tools hold a [`SharedBackend`] and never learn which
/// database is behind it; what only a SQLite file has (its bytes, `restore`, a file's own
/// checks) the command line does with a [`Store`] it opens on the file itself.
pub trait Backend: Maintenance + Send + Sync + std::fmt::Debug {
    /// Which backend this is, for messages and metrics (`sqlite`, `postgres`).
    fn name(&self) -> &'static str;

    // Sessions.

    /// The session with this key, created for `persona` if new; [`Error::PersonaMismatch`]
    /// when the key belongs to another persona.
    fn session(&self, key: &str, persona: &str) -> Result<Session>;
    /// The session with this key, if any.
    fn find_session(&self, key: &str) -> Result<Option<Session>>;
    /// The session with this id.
    fn session_by_id(&self, id: SessionId) -> Result<Session>;
    /// Every session (of one persona, when given), oldest first.
    fn sessions(&self, persona: Option<&str>) -> Result<Vec<Session>>;
    /// The sessions of a persona with their message counts, oldest first.
    fn session_overviews(&self, persona: &str) -> Result<Vec<SessionOverview>>;

    // Messages.

    /// Appends messages to a session, in one transaction; returns their ids in order. A
    /// message whose `external_id` the session already holds is not stored again: its stored
    /// id is returned (appends are idempotent by key).
    fn append(&self, session: SessionId, messages: &[NewMessage]) -> Result<Vec<MessageId>>;
    /// One message by id.
    fn message(&self, id: MessageId) -> Result<Message>;
    /// The messages of a session whose seq lies in `seqs`, in order.
    fn messages(&self, session: SessionId, seqs: RangeInclusive<i64>) -> Result<Vec<Message>>;
    /// The outline (everything but the text) of every message of a session, in seq order.
    fn message_outline(&self, session: SessionId) -> Result<Vec<MessageOutline>>;
    /// The outline of the head (seq below `head`) and of every uncovered message, in seq
    /// order: what compaction and assembly plan over. Its cost follows the uncovered messages.
    fn live_outline(&self, session: SessionId, head: i64) -> Result<Vec<MessageOutline>>;
    /// The newest `limit` messages of a session that no summary covers yet, oldest first.
    fn recent_uncovered(&self, session: SessionId, limit: usize) -> Result<Vec<Message>>;
    /// One message as seen from `persona`, with its session: another persona's message is
    /// [`Error::NotFound`], exactly like one that does not exist.
    fn message_of(&self, persona: &str, id: MessageId) -> Result<(Message, Session)> {
        // Two reads without a snapshot are safe: a message never changes session.
        let message = self.message(id)?;
        let session = self.session_by_id(message.session_id)?;
        if session.persona != persona {
            return Err(Error::NotFound(Missing::Message(id)));
        }
        Ok((message, session))
    }

    // The forest.

    /// Several Level-0 nodes of one session, each over `first_seq..=last_seq`, written with
    /// their coverage in one transaction: all of them, or none ([`Error::AlreadyCovered`] when
    /// any message of a range is covered).
    fn insert_leaves(
        &self,
        session: SessionId,
        leaves: &[(i64, i64, NewSummary)],
    ) -> Result<Vec<SummaryNode>>;
    /// One Level-0 node (see [`Backend::insert_leaves`]).
    fn insert_leaf(
        &self,
        session: SessionId,
        first_seq: i64,
        last_seq: i64,
        summary: &NewSummary,
    ) -> Result<SummaryNode> {
        let mut written = self.insert_leaves(session, &[(first_seq, last_seq, summary.clone())])?;
        written.pop().ok_or_else(|| Error::invalid("leaves", "the backend wrote no node for one leaf"))
    }
    /// One node a level up over adjacent roots; [`Error::AlreadyMerged`] if one has a parent.
    fn merge(&self, children: &[NodeId], summary: &NewSummary) -> Result<SummaryNode>;
    /// Compare-and-swap of a node's text: only while its summarizer is `expected_summarizer`
    /// ([`Error::AlreadyReplaced`] otherwise).
    fn replace_summary(
        &self,
        id: NodeId,
        expected_summarizer: &str,
        summary: &NewSummary,
    ) -> Result<SummaryNode>;
    /// One node by id.
    fn node(&self, id: NodeId) -> Result<SummaryNode>;
    /// One node as seen from `persona`, with its session (another persona's is not found).
    fn node_of(&self, persona: &str, id: NodeId) -> Result<(SummaryNode, Session)> {
        let node = self.node(id)?;
        let session = self.session_by_id(node.session_id)?;
        if session.persona != persona {
            return Err(Error::NotFound(Missing::Node(id)));
        }
        Ok((node, session))
    }
    /// The roots of a session's forest in time order, only of `level` when given.
    fn roots(&self, session: SessionId, level: Option<Level>) -> Result<Vec<SummaryNode>>;
    /// Every node of a session, by level then position.
    fn nodes(&self, session: SessionId) -> Result<Vec<SummaryNode>>;
    /// The children of a node in time order (none for a Level-0 node).
    fn children(&self, id: NodeId) -> Result<Vec<SummaryNode>>;
    /// The messages a Level-0 node covers, in order.
    fn covered_messages(&self, node: NodeId) -> Result<Vec<Message>>;
    /// The first `raw-archive` node of a session, by level then position.
    fn first_raw_archive(&self, session: SessionId) -> Result<Option<SummaryNode>>;
    /// Runs `f` with reads that all see one snapshot of the database, so a compaction
    /// committed meanwhile by another process cannot show a message both verbatim and
    /// summarized. Generic callers use [`read_consistent`].
    fn read_snapshot(&self, f: &mut dyn FnMut(&dyn Snapshot) -> Result<()>) -> Result<()>;

    // The compactor's bookkeeping.

    /// Records the consecutive failed summarizer calls of a session (0 after a success).
    fn set_summarizer_failures(&self, session: SessionId, failures: u32) -> Result<()>;
    /// Counts one summary of `summarizer` refused by the quality gate for `reason`.
    fn count_rejection(&self, summarizer: &str, reason: &str) -> Result<()>;
    /// Records calls made to an LLM, in one transaction.
    fn record_llm_calls(&self, calls: &[LlmCall]) -> Result<()>;
    /// The token encoding the stored counts were made with; `None` until one is claimed.
    fn token_encoding(&self) -> Result<Option<String>>;
    /// Records `encoding` as the database's unless one is recorded already; returns the
    /// database's (the first writer's).
    fn claim_token_encoding(&self, encoding: &str) -> Result<String>;
    /// Brings a deferred keyword index up to date (SQLite's, after a bulk import); returns how
    /// many rows it indexed. A backend that indexes as it writes has nothing to do.
    fn catch_up_search_index(&self) -> Result<usize> {
        Ok(0)
    }

    // Memories and the queue.

    /// Saves the memory `(category, key)` of a persona (one per key, whatever races),
    /// recording where it came from; says whether it is new. The agent may not write
    /// `user_preferences`.
    fn save_memory(
        &self,
        writer: Writer,
        persona: &str,
        memory: &MemoryWrite<'_>,
        provenance: &Provenance,
    ) -> Result<(Memory, bool)>;
    /// [`Backend::save_memory`] with the writer as its only provenance.
    fn put_memory(&self, writer: Writer, persona: &str, memory: &MemoryWrite<'_>) -> Result<Memory> {
        let provenance = match writer {
            Writer::User => Provenance::user("library"),
            Writer::Agent => Provenance { source: Source::Agent, ..Provenance::unknown() },
        };
        Ok(self.save_memory(writer, persona, memory, &provenance)?.0)
    }
    /// Supersedes the memory `(category, key)` of a persona: its text stopped being true at
    /// `at` (not in the future, not before it became true), and `with`, naming the same
    /// memory, is true from then on; without `with` the memory stays, ended (`valid_to`).
    /// The old text stays a version with its dates ([`Backend::memories_as_of`]). The agent may
    /// not supersede `user_preferences`.
    #[allow(clippy::too_many_arguments)]
    fn supersede_memory(
        &self,
        writer: Writer,
        persona: &str,
        category: Category,
        key: &str,
        with: Option<&MemoryWrite<'_>>,
        at: DateTime<Utc>,
        provenance: &Provenance,
    ) -> Result<Memory>;
    /// Merges the memory `(category, key)` of a persona into the one `into` names (the user's
    /// command for two memories of one meaning under two keys), in one transaction: the merged
    /// memory ends now, its text kept as a dated version (history and `as_of` reads show it),
    /// and `into` takes its new text as a version with `provenance`. Both must exist and be
    /// true now; a memory is not merged into itself.
    fn merge_memory(
        &self,
        persona: &str,
        category: Category,
        key: &str,
        into: &MemoryWrite<'_>,
        provenance: &Provenance,
    ) -> Result<Memory>;
    /// One memory of a persona.
    fn memory(&self, persona: &str, category: Category, key: &str) -> Result<Option<Memory>>;
    /// A persona's memories, optionally of one category, ended ones included (see
    /// [`Memory::ended_by`]).
    fn memories(&self, persona: &str, category: Option<Category>) -> Result<Vec<Memory>>;
    /// A persona's memories as they were at `at`, optionally of one category: each one's text
    /// true then, with its dates and source; those written later are left out.
    fn memories_as_of(
        &self,
        persona: &str,
        category: Option<Category>,
        at: DateTime<Utc>,
    ) -> Result<Vec<Memory>>;
    /// Every version of a memory, newest (the current one) first, each with its source;
    /// empty when there is no such memory.
    fn memory_history(&self, persona: &str, category: Category, key: &str) -> Result<Vec<MemoryVersion>>;
    /// Deletes a memory and its vector; returns whether it existed. The agent may not delete
    /// `user_preferences`.
    fn delete_memory(&self, writer: Writer, persona: &str, category: Category, key: &str) -> Result<bool>;
    /// Deletes the memories of `category` not written since `cutoff`; returns how many.
    fn purge_memories(&self, category: Category, cutoff: DateTime<Utc>) -> Result<usize>;
    /// The oldest facts summaries queued for consolidation, not yet settled.
    fn pending_updates(&self, limit: usize) -> Result<Vec<QueuedUpdate>>;
    /// Removes a settled fact from the queue; settling twice is harmless.
    fn settle_update(&self, id: UpdateId) -> Result<()>;
    /// Turns a queued fact into a proposed user preference under `key`, for the user to
    /// accept or reject (the agent never writes preferences).
    fn propose_preference(&self, id: UpdateId, key: &str, title: &str, content: &str) -> Result<()>;
    /// Proposes a preference the user stated in a message just appended (no summary found it
    /// yet), replacing the persona's open proposal of the same key.
    fn propose_stated(&self, persona: &str, update: &MemoryUpdate) -> Result<()>;
    /// A persona's proposed preferences, oldest first.
    fn proposals(&self, persona: &str) -> Result<Vec<QueuedUpdate>>;
    /// Accepts a proposed preference: saves it as the user's and removes the proposal.
    fn accept_proposal(&self, persona: &str, key: &str) -> Result<Memory>;
    /// Rejects a proposed preference; returns it.
    fn reject_proposal(&self, persona: &str, key: &str) -> Result<QueuedUpdate>;

    // Search.

    /// `memory_grep`: case- and diacritic-insensitive substring search of every fragment,
    /// any script, best match first.
    fn grep(&self, query: &TextQuery, filter: &SearchFilter) -> Result<Vec<TextHit>>;
    /// `memory_search`'s one read: both sides' candidates, from one snapshot.
    fn candidates(&self, query: &CandidateQuery<'_>) -> Result<Candidates>;
    /// A bare `*`: the persona's messages within the filter's session and time range, in time
    /// order (newest first unless `oldest_first`), skipping `offset`, at most the filter's limit.
    fn said_between(&self, filter: &SearchFilter, oldest_first: bool, offset: usize) -> Result<Vec<TextHit>>;

    // Vectors.

    /// Makes `space` the embedding space (vectors of another model are dropped and their rows
    /// queued again); returns whether it changed.
    fn use_space(&self, space: &EmbeddingSpace) -> Result<bool>;
    /// Up to `limit` rows waiting for a vector, optionally of one persona or session.
    fn backlog(
        &self,
        persona: Option<&str>,
        session: Option<SessionId>,
        limit: usize,
    ) -> Result<Vec<BacklogItem>>;
    /// How many rows wait for a vector, optionally of one persona or session.
    fn backlog_count(&self, persona: Option<&str>, session: Option<SessionId>) -> Result<u64>;
    /// Stores the chunk vectors `model` computed for backlog items, exactly once each;
    /// returns how many items were written.
    fn put_vectors(&self, model: &str, items: &[(BacklogItem, Vec<Vec<f32>>)]) -> Result<usize>;

    // Many processes, and what was done.

    /// The compaction lease on a session, or `None` while another holder has it.
    fn compaction_lease(&self, session: SessionId) -> Result<Option<Box<dyn Lease>>>;
    /// Counts of everything stored (`strata stats`).
    fn stats(&self) -> Result<Stats>;
    /// The totals `strata metrics` shows, derived from stored rows.
    fn metrics(&self) -> Result<StoreMetrics>;
    /// The calls made to LLMs, summed per day (UTC), purpose, caller and model, newest day
    /// first (`strata stats`).
    fn usage_by_day(&self) -> Result<Vec<crate::stats::UsageDay>>;
    /// `strata doctor`: checks the schema and every invariant over the stored rows, changing
    /// nothing. `full` also runs the database's own slowest check where it has one (SQLite's
    /// `integrity_check`).
    fn doctor(&self, full: bool) -> Result<Report>;
}

/// A backend shared by the engine, the compactor and the tools.
pub type SharedBackend = Arc<dyn Backend>;

impl From<Store> for SharedBackend {
    fn from(store: Store) -> SharedBackend {
        Arc::new(store)
    }
}

/// The reads assembly makes, all from one snapshot ([`Backend::read_snapshot`]).
pub trait Snapshot {
    /// The session with this id.
    fn session(&self, id: SessionId) -> Result<Session>;
    /// See [`Backend::live_outline`].
    fn live_outline(&self, session: SessionId, head: i64) -> Result<Vec<MessageOutline>>;
    /// Every message with seq below `head_end` (the head, verbatim whatever covers it) and
    /// every uncovered message after it, in seq order: what a context is built from.
    fn context_messages(&self, session: SessionId, head_end: i64) -> Result<Vec<Message>>;
    /// See [`Backend::roots`].
    fn roots(&self, session: SessionId, level: Option<Level>) -> Result<Vec<SummaryNode>>;
    /// See [`Backend::memories`].
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
    /// summarized again ([`Backend::first_raw_archive`]).
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
