//! Vectors in sqlite-vec: the embedding space, the backlog's vectors and k-nearest queries,
//! per persona.
//!
//! The vector tables are built for one model at a time (the *embedding space*: model id and
//! dimensions, one row of `embedding_space`). Long texts are embedded in chunks: a row's chunk
//! `c` is stored at vector rowid `id * MAX_CHUNKS + c`, and a query keeps each row's nearest
//! chunk. Each vector is stored twice: as floats for exact distances and as one bit per
//! dimension for a fast first pass (see [`nearest`]).

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::db::query_all;
use crate::error::{Error, Result};
use crate::search::HitKind;
use crate::vec::to_blob;

/// Most chunks (vectors) stored per row; text past them is not embedded.
pub const MAX_CHUNKS: usize = 32;

/// A row still waiting for its vector.
#[derive(Clone, Debug, PartialEq)]
pub struct BacklogItem {
    /// Which table.
    pub kind: HitKind,
    /// Its id there.
    pub id: i64,
    /// The persona it belongs to (the vector's partition).
    pub persona: String,
    /// The text to embed.
    pub text: String,
}

/// The model the vector tables hold vectors of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EmbeddingSpace {
    /// The model's id (for example `all-MiniLM-L6-v2`).
    pub model: String,
    /// Dimensions of its vectors.
    pub dimensions: usize,
}

const KINDS: [HitKind; 3] = [HitKind::Message, HitKind::Summary, HitKind::Memory];

pub(crate) fn table(kind: HitKind) -> &'static str {
    match kind {
        HitKind::Message => "messages_vec",
        HitKind::Summary => "summaries_vec",
        HitKind::Memory => "memories_vec",
    }
}

/// The text a summary or memory is embedded from, as the backlog queries build it (messages
/// never change, so they need no check).
fn current_text_sql(kind: HitKind) -> Option<&'static str> {
    match kind {
        HitKind::Message => None,
        HitKind::Summary => Some("SELECT headline || char(10) || body FROM summary_nodes WHERE id = ?1"),
        HitKind::Memory => Some("SELECT title || ': ' || content FROM agent_memories WHERE id = ?1"),
    }
}

/// The embedding space the vector tables were built for; `None` before anything was embedded.
pub fn space(conn: &Connection) -> Result<Option<EmbeddingSpace>> {
    Ok(conn
        .prepare_cached("SELECT model, dimensions FROM embedding_space WHERE id = 1")?
        .query_row([], |row| {
            Ok(EmbeddingSpace { model: row.get(0)?, dimensions: row.get::<_, i64>(1)? as usize })
        })
        .optional()?)
}

/// Makes `wanted` the embedding space. When another model's vectors are stored, they are all
/// dropped and every row is queued again, in this (immediate) transaction: vectors of two
/// models are never mixed. Returns whether the space changed.
pub fn use_space(conn: &Connection, wanted: &EmbeddingSpace) -> Result<bool> {
    if wanted.model.is_empty()
        || !(1..=8192).contains(&wanted.dimensions)
        || !wanted.dimensions.is_multiple_of(8)
    {
        return Err(Error::invalid(
            "embedding space",
            format!("model {:?} with {} dimensions", wanted.model, wanted.dimensions),
        ));
    }
    let current = space(conn)?;
    if current.as_ref() == Some(wanted) {
        return Ok(false);
    }
    for kind in KINDS {
        let table = table(kind);
        conn.execute_batch(&format!(
            "DROP TABLE IF EXISTS {table};
             CREATE VIRTUAL TABLE {table} USING vec0(
                 role TEXT PARTITION KEY,
                 embedding float[{dims}] distance_metric=cosine,
                 embedding_bits bit[{dims}]
             );",
            dims = wanted.dimensions,
        ))?;
    }
    conn.execute(
        "INSERT INTO embedding_space(id, model, dimensions) VALUES (1, ?1, ?2)
         ON CONFLICT(id) DO UPDATE SET model = excluded.model, dimensions = excluded.dimensions",
        params![wanted.model, wanted.dimensions as i64],
    )?;
    if current.is_some() {
        conn.execute_batch(
            "UPDATE agent_memories SET embedding = NULL;
             DELETE FROM embedding_backlog;
             INSERT INTO embedding_backlog(kind, item_id) SELECT 'message', id FROM messages;
             INSERT INTO embedding_backlog(kind, item_id) SELECT 'summary', id FROM summary_nodes;
             INSERT INTO embedding_backlog(kind, item_id) SELECT 'memory', id FROM agent_memories;",
        )?;
    }
    Ok(true)
}

/// Removes the vectors of one row (a deleted memory). Nothing to do before the first embedding.
pub(crate) fn forget(conn: &Connection, kind: HitKind, id: i64) -> Result<()> {
    if space(conn)?.is_none() {
        return Ok(());
    }
    let mut delete = conn.prepare_cached(&format!("DELETE FROM {} WHERE rowid = ?1", table(kind)))?;
    for chunk in 0..MAX_CHUNKS as i64 {
        delete.execute([id * MAX_CHUNKS as i64 + chunk])?;
    }
    Ok(())
}

/// Stores the chunk vectors of backlog items, computed by `model`, and takes the items off the
/// backlog. Call inside an immediate transaction. An item no longer on the backlog (another
/// worker stored it first) is skipped, so every row is embedded exactly once; vectors of a
/// model other than the space's are refused. Returns how many items were written.
pub fn put(conn: &Connection, model: &str, items: &[(BacklogItem, Vec<Vec<f32>>)]) -> Result<usize> {
    let Some(space) = space(conn)? else {
        return Err(Error::invalid("embedding", "no embedding space is set; choose the model first"));
    };
    if space.model != model {
        return Err(Error::invalid(
            "embedding",
            format!("vectors of {model} cannot join the stored vectors of {}", space.model),
        ));
    }
    let mut written = 0;
    for (item, chunks) in items {
        if chunks.is_empty() || chunks.len() > MAX_CHUNKS {
            return Err(Error::invalid(
                "embedding",
                format!("{} chunks, expected 1 to {MAX_CHUNKS}", chunks.len()),
            ));
        }
        if let Some(bad) = chunks.iter().find(|vector| vector.len() != space.dimensions) {
            return Err(Error::invalid(
                "embedding",
                format!("{} dimensions, expected {}", bad.len(), space.dimensions),
            ));
        }
        // Summaries and memories can be rewritten while their vector is computed; the update
        // leaves the (already queued) backlog row in place, so a vector of the old text must not
        // take it off. The embedded text may be a cut prefix of the stored one.
        if let Some(sql) = current_text_sql(item.kind) {
            let current: Option<String> =
                conn.prepare_cached(sql)?.query_row([item.id], |row| row.get(0)).optional()?;
            if !current.is_some_and(|text| text.starts_with(&item.text)) {
                continue;
            }
        }
        let taken = conn
            .prepare_cached("DELETE FROM embedding_backlog WHERE kind = ?1 AND item_id = ?2")?
            .execute(params![item.kind.as_str(), item.id])?;
        if taken == 0 {
            continue;
        }
        // A summary or memory rewritten since its last vector has old chunks to replace; a
        // message is embedded once per model, into tables created empty, so it has none.
        if item.kind != HitKind::Message {
            forget(conn, item.kind, item.id)?;
        }
        let table = table(item.kind);
        let mut insert = conn.prepare_cached(&format!(
            "INSERT INTO {table}(rowid, role, embedding, embedding_bits)
             VALUES (?1, ?2, ?3, vec_quantize_binary(?3))"
        ))?;
        for (chunk, vector) in chunks.iter().enumerate() {
            insert.execute(params![
                item.id * MAX_CHUNKS as i64 + chunk as i64,
                item.persona,
                to_blob(vector)
            ])?;
        }
        if item.kind == HitKind::Memory {
            conn.prepare_cached("UPDATE agent_memories SET embedding = ?2 WHERE id = ?1")?
                .execute(params![item.id, to_blob(&chunks[0])])?;
        }
        written += 1;
    }
    Ok(written)
}

/// How a k-nearest query scans.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Scan {
    /// Every float vector of the persona: exact.
    #[default]
    Exact,
    /// The 1-bit vectors first (32x less to read), then exact distances for the best
    /// `candidates` chunks.
    Quantized {
        /// Chunks kept from the bit scan for exact re-scoring.
        candidates: usize,
    },
}

/// The `k` rows of `kind` nearest to `query` within one persona: (id, cosine distance of the
/// row's nearest chunk), nearest first. Empty when the stored vectors are not of `model`.
pub fn nearest(
    conn: &Connection,
    model: &str,
    kind: HitKind,
    persona: &str,
    query: &[f32],
    k: usize,
    scan: Scan,
) -> Result<Vec<(i64, f64)>> {
    let Some(space) = space(conn)? else { return Ok(Vec::new()) };
    if space.model != model {
        return Ok(Vec::new());
    }
    if query.len() != space.dimensions {
        return Err(Error::invalid(
            "embedding",
            format!("{} dimensions, expected {}", query.len(), space.dimensions),
        ));
    }
    let table = table(kind);
    // A row may hold several of the nearest chunks; ask for more chunks than rows.
    let chunks = (k.max(1) * 2).min(4096) as i64;
    let found: Vec<(i64, f64)> = match scan {
        Scan::Exact => query_all(
            conn,
            &format!(
                "SELECT rowid, distance FROM {table}
                 WHERE embedding MATCH ?1 AND k = ?2 AND role = ?3 ORDER BY distance"
            ),
            params![to_blob(query), chunks, persona],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?,
        Scan::Quantized { candidates } => query_all(
            conn,
            &format!(
                "WITH coarse AS (
                     SELECT rowid FROM {table}
                     WHERE embedding_bits MATCH vec_quantize_binary(?1) AND k = ?2 AND role = ?3
                 )
                 SELECT v.rowid, vec_distance_cosine(v.embedding, ?1) AS distance
                 FROM coarse CROSS JOIN {table} v ON v.rowid = coarse.rowid
                 ORDER BY distance LIMIT ?4"
            ),
            params![to_blob(query), candidates.max(chunks as usize).min(4096) as i64, persona, chunks],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?,
    };
    let mut best: HashMap<i64, f64> = HashMap::new();
    for (rowid, distance) in found {
        let id = rowid.div_euclid(MAX_CHUNKS as i64);
        let entry = best.entry(id).or_insert(distance);
        *entry = entry.min(distance);
    }
    let mut rows: Vec<(i64, f64)> = best.into_iter().collect();
    rows.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    rows.truncate(k);
    Ok(rows)
}
