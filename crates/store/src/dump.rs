//! A whole database read in id order and in batches, rows as they are stored (ids, coverage,
//! idempotency keys, memory versions, vectors): what `strata copy` moves to another backend
//! exactly, and resumably (each batch starts after the last id the target holds).

use rusqlite::params;

use crate::db::query_all;
use crate::error::Result;
use crate::provenance::MemoryVersion;
use crate::search::HitKind;
use crate::store::Store;
use crate::types::{Memory, Message, QueuedUpdate, Session, SummaryNode};
use crate::usage::LlmCall;
use crate::vectors::{EmbeddingSpace, MAX_CHUNKS};

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

/// The reads of [`Store::dump`].
#[derive(Clone, Copy, Debug)]
pub struct Dump<'a> {
    store: &'a Store,
}

impl Store {
    /// The whole database, read in id order and in batches, for a copy to another backend.
    pub fn dump(&self) -> Dump<'_> {
        Dump { store: self }
    }
}

impl Source for Dump<'_> {
    fn sessions(&self) -> Result<Vec<StoredSession>> {
        self.store.read(|conn| {
            let sql = format!("SELECT {}, summarizer_failures FROM sessions ORDER BY id", Session::COLUMNS);
            query_all(conn, &sql, [], |row| {
                Ok(StoredSession {
                    session: Session::from_row(row)?,
                    summarizer_failures: row.get::<_, i64>(6)?.clamp(0, i64::from(u32::MAX)) as u32,
                })
            })
        })
    }

    fn nodes(&self, after: i64, limit: usize) -> Result<Vec<SummaryNode>> {
        self.store.read(|conn| {
            let sql = format!(
                "SELECT {} FROM summary_nodes n WHERE n.id > ?1 ORDER BY n.id LIMIT ?2",
                SummaryNode::COLUMNS
            );
            query_all(conn, &sql, params![after, limit as i64], SummaryNode::from_row)
        })
    }

    fn messages(&self, after: i64, limit: usize) -> Result<Vec<StoredMessage>> {
        self.store.read(|conn| {
            let sql = format!(
                "SELECT {}, m.external_id FROM messages m WHERE m.id > ?1 ORDER BY m.id LIMIT ?2",
                Message::COLUMNS
            );
            query_all(conn, &sql, params![after, limit as i64], |row| {
                Ok(StoredMessage {
                    message: Message::from_row(row)?,
                    external_id: row.get(13)?,
                    created_at_seconds: row.get(8)?,
                })
            })
        })
    }

    fn memories(&self) -> Result<Vec<StoredMemory>> {
        self.store.read(|conn| {
            let sql = format!("SELECT {} FROM agent_memories ORDER BY id", Memory::COLUMNS);
            let memories = query_all(conn, &sql, [], Memory::from_row)?;
            memories
                .into_iter()
                .map(|memory| {
                    let mut versions = crate::provenance::history(conn, memory.id.0)?;
                    versions.reverse();
                    Ok(StoredMemory { memory, versions })
                })
                .collect()
        })
    }

    fn queued(&self) -> Result<Vec<QueuedUpdate>> {
        self.store.read(|conn| {
            let sql = format!("SELECT {} FROM memory_updates ORDER BY id", QueuedUpdate::COLUMNS);
            query_all(conn, &sql, [], QueuedUpdate::from_row)
        })
    }

    fn llm_calls(&self) -> Result<Vec<LlmCall>> {
        self.store.read(crate::usage::all_calls)
    }

    fn rejections(&self) -> Result<Vec<(String, String, u64)>> {
        self.store.read(|conn| {
            query_all(
                conn,
                "SELECT summarizer, reason, count FROM summary_rejections ORDER BY summarizer, reason",
                [],
                |row| Ok((row.get(0)?, row.get(1)?, row.get::<_, i64>(2)?.max(0) as u64)),
            )
        })
    }

    fn backlog(&self) -> Result<Vec<(HitKind, i64)>> {
        self.store.read(|conn| {
            query_all(conn, "SELECT kind, item_id FROM embedding_backlog ORDER BY kind, item_id", [], |row| {
                let kind: String = row.get(0)?;
                let kind = HitKind::ALL.into_iter().find(|k| k.as_str() == kind).ok_or_else(|| {
                    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, kind.into())
                })?;
                Ok((kind, row.get(1)?))
            })
        })
    }

    fn space(&self) -> Result<Option<EmbeddingSpace>> {
        self.store.read(crate::vectors::space)
    }

    fn vectors(&self, kind: HitKind, after: Option<(i64, usize)>, limit: usize) -> Result<Vec<StoredVector>> {
        let after = after.map_or(-1, |(id, chunk)| id * MAX_CHUNKS as i64 + chunk as i64);
        self.store.read(|conn| crate::vectors::dump(conn, kind, after, limit))
    }

    fn token_encoding(&self) -> Result<Option<String>> {
        crate::Backend::token_encoding(self.store)
    }
}
