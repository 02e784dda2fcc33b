//! The database read whole for `strata copy` (the [`Source`] a copy takes), from one
//! repeatable-read snapshot: a backup of a fleet's database while its bots write is the
//! database as it was at one instant, with no `pg_dump` and no server-side rights beyond reading.

use std::sync::Mutex;

use pgvector::Vector;
use strata_seam::backend::from_unix;
use strata_seam::embeddings::EmbeddingSpace;
use strata_seam::memories::{MemoryVersion, QueuedUpdate};
use strata_seam::search::HitKind;
use strata_seam::stats::LlmCall;
use strata_seam::transfer::{Source, StoredMemory, StoredMessage, StoredSession, StoredVector};
use strata_seam::{Error, SummaryNode};

use crate::db::{Queries, Tx, pg};
use crate::{PgStore, rows, upkeep, vectors};

impl PgStore {
    /// Runs `f` over the whole database as one snapshot (a read-only repeatable-read
    /// transaction held for as long as `f` runs).
    pub fn read_dump<T>(&self, f: impl FnOnce(&dyn Source) -> Result<T, Error>) -> Result<T, Error> {
        self.snapshot(|tx| f(&PgDump { tx: Mutex::new(tx) }))
    }
}

/// The reads of [`PgStore::read_dump`], all in one transaction.
struct PgDump<'t, 'c> {
    // `Source` reads through `&self`; the transaction's statements need `&mut`.
    tx: Mutex<&'t mut Tx<'c>>,
}

impl PgDump<'_, '_> {
    fn with<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T, Error>) -> Result<T, Error> {
        // A panic in a read cannot leave the transaction half-used in a way a later read
        // could mistake for data: the copy stops with that panic.
        let mut tx = self.tx.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut tx)
    }
}

impl Source for PgDump<'_, '_> {
    fn sessions(&self) -> Result<Vec<StoredSession>, Error> {
        self.with(|tx| {
            let sql = format!("SELECT {}, summarizer_failures FROM sessions ORDER BY id", rows::SESSION);
            Ok(tx
                .query(&sql, &[])
                .map_err(pg)?
                .iter()
                .map(|row| StoredSession {
                    session: rows::session(row),
                    summarizer_failures: row.get::<_, i32>(6).max(0) as u32,
                })
                .collect())
        })
    }

    fn nodes(&self, after: i64, limit: usize) -> Result<Vec<SummaryNode>, Error> {
        self.with(|tx| {
            let sql = format!("SELECT {} FROM summary_nodes WHERE id > $1 ORDER BY id LIMIT $2", rows::NODE);
            Ok(tx.query(&sql, &[&after, &(limit as i64)]).map_err(pg)?.iter().map(rows::node).collect())
        })
    }

    fn messages(&self, after: i64, limit: usize) -> Result<Vec<StoredMessage>, Error> {
        self.with(|tx| {
            let sql = format!(
                "SELECT {}, external_id FROM messages WHERE id > $1 ORDER BY id LIMIT $2",
                rows::MESSAGE
            );
            Ok(tx
                .query(&sql, &[&after, &(limit as i64)])
                .map_err(pg)?
                .iter()
                .map(|row| StoredMessage {
                    message: rows::message(row),
                    external_id: row.get(13),
                    created_at_seconds: row.get(8),
                })
                .collect())
        })
    }

    fn memories(&self) -> Result<Vec<StoredMemory>, Error> {
        self.with(|tx| {
            let sql = format!("SELECT {} FROM agent_memories ORDER BY id", rows::MEMORY);
            let memories: Vec<_> = tx.query(&sql, &[]).map_err(pg)?.iter().map(rows::memory).collect();
            memories
                .into_iter()
                .map(|memory| {
                    let mut versions: Vec<MemoryVersion> =
                        crate::memories::history(tx, &memory.persona, memory.category, &memory.key)?;
                    versions.reverse();
                    Ok(StoredMemory { memory, versions })
                })
                .collect()
        })
    }

    fn queued(&self) -> Result<Vec<QueuedUpdate>, Error> {
        self.with(|tx| {
            let sql = format!("SELECT {} FROM memory_updates ORDER BY id", rows::UPDATE);
            Ok(tx.query(&sql, &[]).map_err(pg)?.iter().map(rows::update).collect())
        })
    }

    fn llm_calls(&self) -> Result<Vec<LlmCall>, Error> {
        let count = |value: Option<i64>| value.map(|n| n.max(0) as u64);
        self.with(|tx| {
            Ok(tx
                .query(
                    "SELECT at, purpose, caller, model, ok, prompt_tokens, completion_tokens,
                            counted_prompt_tokens, counted_completion_tokens, millis
                     FROM llm_calls ORDER BY id",
                    &[],
                )
                .map_err(pg)?
                .iter()
                .map(|row| LlmCall {
                    at: from_unix(row.get(0)),
                    purpose: row.get(1),
                    caller: row.get(2),
                    model: row.get(3),
                    ok: row.get(4),
                    prompt_tokens: count(row.get(5)),
                    completion_tokens: count(row.get(6)),
                    counted_prompt_tokens: count(row.get(7)),
                    counted_completion_tokens: count(row.get(8)),
                    millis: row.get::<_, i64>(9).max(0) as u64,
                })
                .collect())
        })
    }

    fn rejections(&self) -> Result<Vec<(String, String, u64)>, Error> {
        self.with(|tx| {
            Ok(tx
                .query(
                    "SELECT summarizer, reason, count FROM summary_rejections ORDER BY summarizer, reason",
                    &[],
                )
                .map_err(pg)?
                .iter()
                .map(|row| (row.get(0), row.get(1), row.get::<_, i64>(2).max(0) as u64))
                .collect())
        })
    }

    fn backlog(&self) -> Result<Vec<(HitKind, i64)>, Error> {
        self.with(|tx| {
            tx.query("SELECT kind, item_id FROM embedding_backlog ORDER BY kind, item_id", &[])
                .map_err(pg)?
                .iter()
                .map(|row| Ok((hit_kind(row.get(0))?, row.get(1))))
                .collect()
        })
    }

    fn space(&self) -> Result<Option<EmbeddingSpace>, Error> {
        self.with(|tx| vectors::space(tx))
    }

    fn vectors(
        &self,
        kind: HitKind,
        after: Option<(i64, usize)>,
        limit: usize,
    ) -> Result<Vec<StoredVector>, Error> {
        let (id, chunk) = after.map_or((i64::MIN, 0), |(id, chunk)| (id, chunk as i32));
        self.with(|tx| {
            Ok(tx
                .query(
                    "SELECT item_id, chunk, embedding FROM embeddings
                     WHERE kind = $1 AND (item_id, chunk) > ($2, $3) ORDER BY item_id, chunk LIMIT $4",
                    &[&kind.as_str(), &id, &chunk, &(limit as i64)],
                )
                .map_err(pg)?
                .iter()
                .map(|row| StoredVector {
                    kind,
                    item_id: row.get(0),
                    chunk: row.get::<_, i32>(1).max(0) as usize,
                    vector: row.get::<_, Vector>(2).to_vec(),
                })
                .collect())
        })
    }

    fn token_encoding(&self) -> Result<Option<String>, Error> {
        self.with(|tx| upkeep::token_encoding(tx))
    }
}

/// The column's CHECK admits the kinds strata writes; anything else is a damaged row.
fn hit_kind(name: &str) -> Result<HitKind, Error> {
    HitKind::ALL.into_iter().find(|kind| kind.as_str() == name).ok_or_else(|| Error::Invalid {
        field: "embedding_backlog.kind",
        reason: format!("`{name}` is not a kind of row"),
    })
}
