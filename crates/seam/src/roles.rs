//! The roles of the storage seam, one trait each: [`Conversations`] (sessions and messages),
//! [`Forest`] (summary nodes and the compactor's bookkeeping), [`Memories`] (agent memories
//! and the update queue), [`Search`] (keyword search and ranked candidates), [`Vectors`]
//! (embeddings) and [`Maintenance`](crate::Maintenance) (whole-database work). A
//! [`Backend`](crate::Backend) is all of them; a caller that needs one role can ask for just
//! that one.
//!
//! Every method is one transaction (or one snapshot, for reads); every error names the problem
//! and leaves the database as it was.

use std::ops::RangeInclusive;

use chrono::{DateTime, Utc};

use crate::agent_memories::MemoryWrite;
use crate::backend::Lease;
use crate::error::{Error, Missing, Result};
use crate::outline::MessageOutline;
use crate::provenance::{MemoryVersion, Provenance, Source};
use crate::search::{CandidateQuery, Candidates, SearchFilter, TextHit, TextQuery};
use crate::sessions::SessionOverview;
use crate::types::{
    Category, Level, Memory, MemoryUpdate, Message, MessageId, NewMessage, NewSummary, NodeId, QueuedUpdate,
    Session, SessionId, SummaryNode, UpdateId, Writer,
};
use crate::vectors::{BacklogItem, EmbeddingSpace};

/// Sessions and their messages: what a bot's turns are stored as. Messages are only ever
/// appended; a forget ([`Maintenance::forget`](crate::Maintenance::forget)) is the one way they leave.
pub trait Conversations {
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
        let message = self.message(id)?;
        let session = self.session_by_id(message.session_id)?;
        if session.persona != persona {
            return Err(Error::NotFound(Missing::Message(id)));
        }
        Ok((message, session))
    }
    /// The token encoding the stored counts were made with; `None` until one is claimed.
    fn token_encoding(&self) -> Result<Option<String>>;
    /// Records `encoding` as the database's unless one is recorded already; returns the
    /// database's (the first writer's).
    fn claim_token_encoding(&self, encoding: &str) -> Result<String>;
}

/// The summary forest over a session's messages, and the compactor's bookkeeping: nodes are
/// written once (coverage, merges and rewrites are compare-and-swap), read by level or span.
pub trait Forest: Conversations {
    /// Several Level-0 nodes of one session, each over `first_seq..=last_seq`, written with
    /// their coverage in one transaction: all of them, or none ([`Error::AlreadyCovered`] when
    /// any message of a range is covered).
    fn insert_leaves(
        &self,
        session: SessionId,
        leaves: &[(i64, i64, NewSummary)],
    ) -> Result<Vec<SummaryNode>>;
    /// One Level-0 node (see [`Forest::insert_leaves`]).
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
    /// Records the consecutive failed summarizer calls of a session (0 after a success).
    fn set_summarizer_failures(&self, session: SessionId, failures: u32) -> Result<()>;
    /// Counts one summary of `summarizer` refused by the quality gate for `reason`.
    fn count_rejection(&self, summarizer: &str, reason: &str) -> Result<()>;
    /// The compaction lease on a session, or `None` while another holder has it.
    fn compaction_lease(&self, session: SessionId) -> Result<Option<Box<dyn Lease>>>;
}

/// Agent memories, their history and validity, and the queue of updates summarizers and
/// users propose. One memory per (persona, category, key), whatever races.
pub trait Memories {
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
    /// [`Memories::save_memory`] with the writer as its only provenance.
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
    /// The old text stays a version with its dates ([`Memories::memories_as_of`]). The agent may
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
}

/// Keyword search (`memory_grep`) and the candidates `memory_search` ranks.
pub trait Search {
    /// `memory_grep`: case- and diacritic-insensitive substring search of every fragment,
    /// any script, best match first.
    fn grep(&self, query: &TextQuery, filter: &SearchFilter) -> Result<Vec<TextHit>>;
    /// `memory_search`'s one read: both sides' candidates, from one snapshot.
    fn candidates(&self, query: &CandidateQuery<'_>) -> Result<Candidates>;
    /// A bare `*`: the persona's messages within the filter's session and time range, in time
    /// order (newest first unless `oldest_first`), skipping `offset`, at most the filter's limit.
    fn said_between(&self, filter: &SearchFilter, oldest_first: bool, offset: usize) -> Result<Vec<TextHit>>;
    /// Brings a deferred keyword index up to date (SQLite's, after a bulk import); returns how
    /// many rows it indexed. A backend that indexes as it writes has nothing to do.
    fn catch_up_search_index(&self) -> Result<usize> {
        Ok(0)
    }
}

/// The embedding space and the rows waiting for a vector in it.
pub trait Vectors {
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
}
