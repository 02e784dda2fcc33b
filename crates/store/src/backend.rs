//! The storage seam: what strata asks of a database, in the words of the domain (sessions,
//! appends, coverage, the forest, memories, the queue, keyword and vector candidates, leases),
//! never in SQL. [`Store`] (SQLite, embedded) implements it here; `strata-pg` (PostgreSQL, for
//! a fleet of processes on several hosts) implements it over a connection pool.
//!
//! Both backends answer the same conformance suite (`crates/pg/tests/conformance.rs`), and the
//! rules a row obeys before it is written (a summary's, a memory's, a persona's) have one home,
//! re-exported here for a backend to call: a backend adds how rows are stored, never what a
//! valid row is.

use std::fs::File;
use std::ops::RangeInclusive;

use crate::MemoryWrite;
use crate::error::{Error, Result};
use crate::search::{CandidateQuery, Candidates, SearchFilter, TextHit, TextQuery};
use crate::store::Store;
use crate::types::{
    Category, Level, Memory, Message, MessageId, NewMessage, NewSummary, NodeId, QueuedUpdate, Session,
    SessionId, SummaryNode, UpdateId, Writer,
};
use crate::vectors::{BacklogItem, EmbeddingSpace};

pub use crate::forest::{MergePlan, plan_merge, validate as validate_summary};
pub use crate::memories::{check_writer, validate as validate_memory};
pub use crate::messages::validate as validate_message;
pub use crate::search::grep::{fold, rank_grep_hits};
pub use crate::sessions::{validate_persona, validate_session_key};

/// A compaction lease on one session: while it is held, no other holder (in this process or
/// any other sharing the database) gets one for that session. Dropping it gives it up; so
/// does the holder's death (a closed connection, a closed file), so a crashed process never
/// blocks a session for good.
pub trait Lease: Send {}

/// What strata asks of a database. Every method is one transaction (or one snapshot, for
/// reads); every error names the problem and leaves the database as it was.
pub trait Backend: Send + Sync {
    /// Which backend this is, for messages and metrics (`sqlite`, `postgres`).
    fn name(&self) -> &'static str;

    /// The session with this key, created for `persona` if new; [`Error::PersonaMismatch`]
    /// when the key belongs to another persona.
    fn session(&self, key: &str, persona: &str) -> Result<Session>;
    /// Appends messages to a session, in one transaction; returns their ids in order. A
    /// message whose `external_id` the session already holds is not stored again: its stored
    /// id is returned (appends are idempotent by key).
    fn append(&self, session: SessionId, messages: &[NewMessage]) -> Result<Vec<MessageId>>;
    /// One message by id.
    fn message(&self, id: MessageId) -> Result<Message>;
    /// The messages of a session whose seq lies in `seqs`, in order.
    fn messages(&self, session: SessionId, seqs: RangeInclusive<i64>) -> Result<Vec<Message>>;

    /// A Level-0 node over `first_seq..=last_seq` of a session, written with its coverage in
    /// one transaction; [`Error::AlreadyCovered`] when any message of the range is covered.
    fn insert_leaf(
        &self,
        session: SessionId,
        first_seq: i64,
        last_seq: i64,
        summary: &NewSummary,
    ) -> Result<SummaryNode>;
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
    /// The roots of a session's forest in time order, only of `level` when given.
    fn roots(&self, session: SessionId, level: Option<Level>) -> Result<Vec<SummaryNode>>;
    /// The messages a Level-0 node covers, in order.
    fn covered_messages(&self, node: NodeId) -> Result<Vec<Message>>;

    /// Inserts or replaces the memory `(category, key)` of a persona: one per key, whatever
    /// races. The agent may not write `user_preferences`.
    fn put_memory(&self, writer: Writer, persona: &str, memory: &MemoryWrite<'_>) -> Result<Memory>;
    /// One memory of a persona.
    fn memory(&self, persona: &str, category: Category, key: &str) -> Result<Option<Memory>>;
    /// A persona's memories, optionally of one category.
    fn memories(&self, persona: &str, category: Option<Category>) -> Result<Vec<Memory>>;
    /// The oldest facts summaries queued for consolidation, not yet settled.
    fn pending_updates(&self, limit: usize) -> Result<Vec<QueuedUpdate>>;
    /// Removes a settled fact from the queue; settling twice is harmless.
    fn settle_update(&self, id: UpdateId) -> Result<()>;

    /// `memory_grep`: case- and diacritic-insensitive substring search of every fragment,
    /// any script, best match first.
    fn grep(&self, query: &TextQuery, filter: &SearchFilter) -> Result<Vec<TextHit>>;
    /// `memory_search`'s one read: both sides' candidates, from one snapshot.
    fn candidates(&self, query: &CandidateQuery<'_>) -> Result<Candidates>;
    /// A bare `*`: the persona's messages within the filter's session and time range, in time
    /// order (newest first unless `oldest_first`), skipping `offset`, at most the filter's limit.
    fn said_between(&self, filter: &SearchFilter, oldest_first: bool, offset: usize) -> Result<Vec<TextHit>>;

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

    /// The compaction lease on a session, or `None` while another holder has it.
    fn compaction_lease(&self, session: SessionId) -> Result<Option<Box<dyn Lease>>>;
}

/// SQLite's lease: an advisory lock (`flock`) on a file beside the database, one per session.
/// The kernel drops it with the last descriptor, so a crashed process gives it up; two
/// processes on one host (the only place a SQLite file is shared) see each other's.
struct FileLease(#[allow(dead_code)] File);

impl Lease for FileLease {}

impl Backend for Store {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn session(&self, key: &str, persona: &str) -> Result<Session> {
        Store::session(self, key, persona)
    }

    fn append(&self, session: SessionId, messages: &[NewMessage]) -> Result<Vec<MessageId>> {
        Store::append(self, session, messages)
    }

    fn message(&self, id: MessageId) -> Result<Message> {
        Store::message(self, id)
    }

    fn messages(&self, session: SessionId, seqs: RangeInclusive<i64>) -> Result<Vec<Message>> {
        Store::messages(self, session, seqs)
    }

    fn insert_leaf(
        &self,
        session: SessionId,
        first_seq: i64,
        last_seq: i64,
        summary: &NewSummary,
    ) -> Result<SummaryNode> {
        Store::insert_leaf(self, session, first_seq, last_seq, summary)
    }

    fn merge(&self, children: &[NodeId], summary: &NewSummary) -> Result<SummaryNode> {
        Store::merge(self, children, summary)
    }

    fn replace_summary(
        &self,
        id: NodeId,
        expected_summarizer: &str,
        summary: &NewSummary,
    ) -> Result<SummaryNode> {
        Store::replace_summary(self, id, expected_summarizer, summary)
    }

    fn node(&self, id: NodeId) -> Result<SummaryNode> {
        Store::node(self, id)
    }

    fn roots(&self, session: SessionId, level: Option<Level>) -> Result<Vec<SummaryNode>> {
        Store::roots(self, session, level)
    }

    fn covered_messages(&self, node: NodeId) -> Result<Vec<Message>> {
        Store::covered_messages(self, node)
    }

    fn put_memory(&self, writer: Writer, persona: &str, memory: &MemoryWrite<'_>) -> Result<Memory> {
        Store::put_memory(self, writer, persona, memory)
    }

    fn memory(&self, persona: &str, category: Category, key: &str) -> Result<Option<Memory>> {
        Store::memory(self, persona, category, key)
    }

    fn memories(&self, persona: &str, category: Option<Category>) -> Result<Vec<Memory>> {
        Store::memories(self, persona, category)
    }

    fn pending_updates(&self, limit: usize) -> Result<Vec<QueuedUpdate>> {
        self.memory_updates().pending(limit)
    }

    fn settle_update(&self, id: UpdateId) -> Result<()> {
        self.memory_updates().settle(id)
    }

    fn grep(&self, query: &TextQuery, filter: &SearchFilter) -> Result<Vec<TextHit>> {
        Store::grep(self, query, filter)
    }

    fn candidates(&self, query: &CandidateQuery<'_>) -> Result<Candidates> {
        self.ranking().candidates(query)
    }

    fn said_between(&self, filter: &SearchFilter, oldest_first: bool, offset: usize) -> Result<Vec<TextHit>> {
        Store::said_between(self, filter, oldest_first, offset)
    }

    fn use_space(&self, space: &EmbeddingSpace) -> Result<bool> {
        self.embeddings().use_space(space)
    }

    fn backlog_count(&self, persona: Option<&str>, session: Option<SessionId>) -> Result<u64> {
        self.embeddings().backlog_count(persona, session)
    }

    fn backlog(
        &self,
        persona: Option<&str>,
        session: Option<SessionId>,
        limit: usize,
    ) -> Result<Vec<BacklogItem>> {
        self.embeddings().backlog_of(persona, session, limit)
    }

    fn put_vectors(&self, model: &str, items: &[(BacklogItem, Vec<Vec<f32>>)]) -> Result<usize> {
        self.embeddings().put(model, items)
    }

    fn compaction_lease(&self, session: SessionId) -> Result<Option<Box<dyn Lease>>> {
        let mut path = self.path().as_os_str().to_owned();
        path.push(format!("-lease-{session}"));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| Error::Lease { path: path.clone().into(), source })?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Box::new(FileLease(file)))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(source)) => Err(Error::Lease { path: path.into(), source }),
        }
    }
}
