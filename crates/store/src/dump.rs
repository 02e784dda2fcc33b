//! A whole database read in id order and in batches, rows as they are stored (ids, coverage,
//! idempotency keys, memory versions, vectors): what `strata copy` moves to another backend
//! exactly, and resumably (each batch starts after the last id the target holds).

use rusqlite::params;

use crate::db::query_all;
use crate::error::Result;
use crate::search::HitKind;
use crate::store::Store;
use crate::types::FromRow;
use crate::types::{Memory, Message, QueuedUpdate, Session, SummaryNode};
use crate::usage::LlmCall;
use crate::vectors::{EmbeddingSpace, MAX_CHUNKS};
pub(crate) use strata_seam::transfer::{Source, StoredMemory, StoredMessage, StoredSession, StoredVector};

impl Store {
    /// The whole database, read in id order and in batches, for a copy to another backend.
    pub fn dump(&self) -> Dump<'_> {
        Dump { store: self }
    }
}

/// The reads of [`Store::dump`].
#[derive(Clone, Copy, Debug)]
pub struct Dump<'a> {
    store: &'a Store,
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
        strata_seam::Conversations::token_encoding(self.store)
    }
}
