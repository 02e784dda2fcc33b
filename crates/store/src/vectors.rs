//! Vectors in sqlite-vec: the embedding backlog and k-nearest queries, per persona.

use rusqlite::{Connection, OptionalExtension, params};

use crate::db::query_all;
use crate::error::{Error, Result};
use crate::search::HitKind;
use crate::vec::to_blob;

/// Dimensions of every stored vector (all-MiniLM-L6-v2).
pub const EMBEDDING_DIM: usize = 384;

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

fn table(kind: HitKind) -> &'static str {
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

/// Stores vectors for backlog items and takes them off the backlog. Call inside an immediate
/// transaction. An item no longer on the backlog (another worker stored it first) is skipped,
/// so every row is embedded exactly once. Returns how many vectors were written.
pub fn put(conn: &Connection, items: &[(BacklogItem, Vec<f32>)]) -> Result<usize> {
    let mut written = 0;
    for (item, vector) in items {
        if vector.len() != EMBEDDING_DIM {
            return Err(Error::invalid(
                "embedding",
                format!("{} dimensions, expected {EMBEDDING_DIM}", vector.len()),
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
        let table = table(item.kind);
        let blob = to_blob(vector);
        conn.prepare_cached(&format!("DELETE FROM {table} WHERE rowid = ?1"))?.execute([item.id])?;
        conn.prepare_cached(&format!("INSERT INTO {table}(rowid, role, embedding) VALUES (?1, ?2, ?3)"))?
            .execute(params![item.id, item.persona, blob])?;
        if item.kind == HitKind::Memory {
            conn.prepare_cached("UPDATE agent_memories SET embedding = ?2 WHERE id = ?1")?
                .execute(params![item.id, blob])?;
        }
        written += 1;
    }
    Ok(written)
}

/// The `k` rows of `kind` nearest to `query` within one persona: (id, cosine distance), nearest first.
pub fn nearest(
    conn: &Connection,
    kind: HitKind,
    persona: &str,
    query: &[f32],
    k: usize,
) -> Result<Vec<(i64, f64)>> {
    if query.len() != EMBEDDING_DIM {
        return Err(Error::invalid(
            "embedding",
            format!("{} dimensions, expected {EMBEDDING_DIM}", query.len()),
        ));
    }
    let sql = format!(
        "SELECT rowid, distance FROM {} WHERE embedding MATCH ?1 AND k = ?2 AND role = ?3 ORDER BY distance",
        table(kind)
    );
    query_all(conn, &sql, params![to_blob(query), k.clamp(1, 4096) as i64, persona], |row| {
        Ok((row.get(0)?, row.get(1)?))
    })
}
