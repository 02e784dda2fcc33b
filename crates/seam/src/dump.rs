//! A whole database read as stored, for a copy between backends: the [`Source`] a copy
//! reads and its `Stored*` rows, and what a copy wrote ([`Copied`]).

use crate::error::Result;
use crate::provenance::MemoryVersion;
use crate::search::HitKind;
use crate::types::{Memory, Message, QueuedUpdate, Session, SummaryNode};
use crate::usage::LlmCall;
use crate::vectors::EmbeddingSpace;

/// A session with the compactor's count of failed summaries.
#[derive(Clone, Debug)]
pub struct StoredSession {
    /// The session.
    pub session: Session,
    /// Consecutive failed summarizer calls.
    pub summarizer_failures: u32,
}

/// A message with its idempotency key.
#[derive(Clone, Debug)]
pub struct StoredMessage {
    /// The message.
    pub message: Message,
    /// The key it was appended under, if any.
    pub external_id: Option<String>,
    /// `created_at` exactly as stored (UNIX seconds; [`Message::created_at`] is rounded to the
    /// millisecond), so a copy keeps the time to the digit.
    pub created_at_seconds: f64,
}

/// A memory with every version it had, oldest first.
#[derive(Clone, Debug)]
pub struct StoredMemory {
    /// The memory.
    pub memory: Memory,
    /// Its versions, oldest first (the current one last).
    pub versions: Vec<MemoryVersion>,
}

/// One chunk's vector.
#[derive(Clone, Debug)]
pub struct StoredVector {
    /// The row it belongs to.
    pub kind: HitKind,
    /// The row's id.
    pub item_id: i64,
    /// The chunk's place in the row's text.
    pub chunk: usize,
    /// The vector.
    pub vector: Vec<f32>,
}

/// A whole database read as stored, in id order and in batches: what `strata copy` moves
/// from any backend into any other. A source reads one snapshot where its backend can hold one
/// (PostgreSQL's dump is one repeatable-read transaction), so the copy is consistent while
/// bots write; SQLite's reads each batch in its own transaction (a copy of a live file is a
/// backup's job: `strata backup`).
pub trait Source {
    /// Every session, in id order.
    fn sessions(&self) -> Result<Vec<StoredSession>>;
    /// Up to `limit` summary nodes with an id above `after`, in id order.
    fn nodes(&self, after: i64, limit: usize) -> Result<Vec<SummaryNode>>;
    /// Up to `limit` messages with an id above `after`, in id order.
    fn messages(&self, after: i64, limit: usize) -> Result<Vec<StoredMessage>>;
    /// Every memory with its versions (oldest first), in id order.
    fn memories(&self) -> Result<Vec<StoredMemory>>;
    /// The queue: facts waiting to be settled and proposals waiting for the user, in id order.
    fn queued(&self) -> Result<Vec<QueuedUpdate>>;
    /// Every recorded LLM call, oldest first.
    fn llm_calls(&self) -> Result<Vec<LlmCall>>;
    /// The quality gate's refusals: (summarizer, reason, count).
    fn rejections(&self) -> Result<Vec<(String, String, u64)>>;
    /// The rows waiting for a vector, in kind and id order.
    fn backlog(&self) -> Result<Vec<(HitKind, i64)>>;
    /// The embedding space, if one was chosen.
    fn space(&self) -> Result<Option<EmbeddingSpace>>;
    /// Up to `limit` chunk vectors of `kind` past `after` (a row id and a chunk), in order.
    fn vectors(&self, kind: HitKind, after: Option<(i64, usize)>, limit: usize) -> Result<Vec<StoredVector>>;
    /// The tokenizer the token counts were made with, if one was recorded.
    fn token_encoding(&self) -> Result<Option<String>>;
}

/// What a copy wrote, table by table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Copied {
    /// Sessions.
    pub sessions: u64,
    /// Messages.
    pub messages: u64,
    /// Summary nodes.
    pub nodes: u64,
    /// Memories (with their versions).
    pub memories: u64,
    /// Facts and proposals in the queue.
    pub queued: u64,
    /// Chunk vectors.
    pub vectors: u64,
    /// Rows still waiting for a vector.
    pub backlog: u64,
}
