//! Vectors in pgvector: one row per chunk, an HNSW index over the embedding space's dimension,
//! exact distances for the candidates it finds, and an exact scan when the filter is narrow.

use pgvector::Vector;
use strata_seam::embeddings::{BacklogItem, EmbeddingSpace, MAX_CHUNKS};
use strata_seam::search::{HitId, HitKind, SearchFilter};
use strata_seam::{Error, Role, SessionId};
use strata_store::kinds::Kind;

use crate::db::{Queries, Tx, pg};
use crate::search::Params;

/// A filter that leaves at most this many chunks is scanned exactly: the approximate index
/// would walk far past its candidates to find so few (SQLite's `WINDOW_PREFILTER_ROWS`).
const EXACT_SCAN_CHUNKS: i64 = 20_000;
/// Chunks the index hands over per row asked for, so that rows with several chunks still
/// fill the answer once each keeps only its nearest.
const OVERSAMPLING: usize = 4;

fn invalid(reason: impl Into<String>) -> Error {
    Error::Invalid { field: "embedding", reason: reason.into() }
}

pub(crate) fn space(db: &mut impl Queries) -> Result<Option<EmbeddingSpace>, Error> {
    let row = db.query_opt("SELECT model, dimensions FROM embedding_space WHERE id = 1", &[]).map_err(pg)?;
    Ok(row.map(|row| EmbeddingSpace { model: row.get(0), dimensions: row.get::<_, i32>(1) as usize }))
}

fn index_name(dimensions: usize) -> String {
    format!("embeddings_hnsw_{dimensions}")
}

pub(crate) fn use_space(tx: &mut Tx<'_>, wanted: &EmbeddingSpace) -> Result<bool, Error> {
    wanted.validate()?;
    // One process at a time decides the space; the others then find it decided.
    tx.batch_execute("LOCK TABLE embedding_space IN EXCLUSIVE MODE").map_err(pg)?;
    let current = space(tx)?;
    if current.as_ref() == Some(wanted) {
        return Ok(false);
    }
    if let Some(old) = &current {
        tx.batch_execute(&format!("DROP INDEX IF EXISTS {}", index_name(old.dimensions))).map_err(pg)?;
        tx.batch_execute("DELETE FROM embeddings").map_err(pg)?;
        tx.batch_execute(
            "INSERT INTO embedding_backlog(kind, item_id, persona, session_id)
                 SELECT 'message', id, persona, session_id FROM messages
             UNION ALL SELECT 'summary', id, persona, session_id FROM summary_nodes
             UNION ALL SELECT 'memory', id, persona, NULL FROM agent_memories
             ON CONFLICT DO NOTHING",
        )
        .map_err(pg)?;
    }
    tx.execute(
        "INSERT INTO embedding_space(id, model, dimensions) VALUES (1, $1, $2)
         ON CONFLICT (id) DO UPDATE SET model = EXCLUDED.model, dimensions = EXCLUDED.dimensions",
        &[&wanted.model, &(wanted.dimensions as i32)],
    )
    .map_err(pg)?;
    let dimensions = wanted.dimensions;
    tx.batch_execute(&format!(
        "CREATE INDEX IF NOT EXISTS {} ON embeddings USING hnsw ((embedding::vector({dimensions})) vector_cosine_ops)",
        index_name(dimensions)
    ))
    .map_err(pg)?;
    Ok(true)
}

pub(crate) fn backlog_count(
    db: &mut impl Queries,
    persona: Option<&str>,
    session: Option<SessionId>,
) -> Result<u64, Error> {
    let session = session.map(|session| session.0);
    let count: i64 = db
        .query_one(
            "SELECT count(*) FROM embedding_backlog
             WHERE ($1::TEXT IS NULL OR persona = $1) AND ($2::BIGINT IS NULL OR session_id = $2)",
            &[&persona, &session],
        )
        .map_err(pg)?
        .get(0);
    Ok(count as u64)
}

/// Memories first, then summaries, then messages, as SQLite hands them out.
pub(crate) fn backlog(
    tx: &mut Tx<'_>,
    persona: Option<&str>,
    session: Option<SessionId>,
    limit: usize,
) -> Result<Vec<BacklogItem>, Error> {
    let session = session.map(|session| session.0);
    let mut items = Vec::new();
    for kind in Kind::ALL.iter().rev() {
        let left = limit.saturating_sub(items.len());
        if left == 0 {
            break;
        }
        let a = kind.alias;
        let sql = format!(
            "SELECT b.item_id, b.persona, {text}, {role} FROM embedding_backlog b
             JOIN {from} ON {a}.id = b.item_id
             WHERE b.kind = $1 AND ($2::TEXT IS NULL OR b.persona = $2)
               AND ($3::BIGINT IS NULL OR b.session_id = $3)
             ORDER BY b.item_id LIMIT $4",
            text = kind.ranked_text,
            role = if kind.kind == HitKind::Message { "m.role" } else { "NULL::TEXT" },
            from = kind.owned(),
        );
        let rows = tx.query(&sql, &[&kind.kind.as_str(), &persona, &session, &(left as i64)]).map_err(pg)?;
        for row in rows {
            items.push(BacklogItem {
                id: HitId::new(kind.kind, row.get(0)),
                persona: row.get(1),
                text: row.get(2),
                message_role: row.get::<_, Option<&str>>(3).and_then(|role| role.parse::<Role>().ok()),
            });
        }
    }
    Ok(items)
}

pub(crate) fn put(
    tx: &mut Tx<'_>,
    model: &str,
    items: &[(BacklogItem, Vec<Vec<f32>>)],
) -> Result<usize, Error> {
    let Some(space) = space(tx)? else {
        return Err(invalid("no embedding space is set; choose the model first"));
    };
    if space.model != model {
        return Err(invalid(format!("vectors of {model} cannot join the stored vectors of {}", space.model)));
    }
    for (_, chunks) in items {
        if chunks.is_empty() || chunks.len() > MAX_CHUNKS {
            return Err(invalid(format!("{} chunks, expected 1 to {MAX_CHUNKS}", chunks.len())));
        }
        if let Some(bad) = chunks.iter().find(|vector| vector.len() != space.dimensions) {
            return Err(invalid(format!("{} dimensions, expected {}", bad.len(), space.dimensions)));
        }
        if chunks.iter().flatten().any(|value| !value.is_finite()) {
            return Err(invalid("a vector holds a value that is not a finite number"));
        }
    }
    let mut written = 0;
    for (item, chunks) in items {
        let kind = Kind::of(item.id.kind());
        let id = item.id.raw();
        let a = kind.alias;
        // The row's text and place now: a summary or memory rewritten while its vector was
        // computed keeps its backlog row, so a vector of the old text must not take it off.
        let sql = format!(
            "SELECT {text}, {session}, {time} FROM {from} WHERE {a}.id = $1",
            text = kind.ranked_text,
            session = kind.session.unwrap_or("NULL::BIGINT"),
            time = kind.time,
            from = kind.owned(),
        );
        let Some(row) = tx.query_opt(&sql, &[&id]).map_err(pg)? else { continue };
        let (text, session, at): (String, Option<i64>, f64) = (row.get(0), row.get(1), row.get(2));
        if !text.starts_with(&item.text) {
            continue;
        }
        let taken = tx
            .execute(
                "DELETE FROM embedding_backlog WHERE kind = $1 AND item_id = $2",
                &[&kind.kind.as_str(), &id],
            )
            .map_err(pg)?;
        if taken == 0 {
            continue;
        }
        tx.execute("DELETE FROM embeddings WHERE kind = $1 AND item_id = $2", &[&kind.kind.as_str(), &id])
            .map_err(pg)?;
        for (chunk, vector) in chunks.iter().enumerate() {
            tx.execute(
                "INSERT INTO embeddings(kind, item_id, chunk, persona, session_id, at, embedding)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &kind.kind.as_str(),
                    &id,
                    &(chunk as i32),
                    &item.persona,
                    &session,
                    &at,
                    &Vector::from(vector.clone()),
                ],
            )
            .map_err(pg)?;
        }
        written += 1;
    }
    Ok(written)
}

/// The `k` rows of `kind` nearest to `query` within the filter: (id, cosine distance of the
/// row's nearest chunk), nearest first; empty when the stored vectors are of another model.
///
/// A filter of up to [`EXACT_SCAN_CHUNKS`] chunks is scanned exactly. A wider one walks the
/// HNSW index with pgvector's iterative scan, which goes on past rows the filter rejects
/// until it has enough, so a sparse filter does not come back empty; the candidates' distances
/// are then computed exactly from their vectors and re-sorted.
pub(crate) fn nearest(
    tx: &mut Tx<'_>,
    model: &str,
    kind: &Kind,
    filter: &SearchFilter,
    query: &[f32],
    k: usize,
) -> Result<Vec<(i64, f64)>, Error> {
    let Some(space) = space(tx)? else { return Ok(Vec::new()) };
    if space.model != model || query.len() != space.dimensions || k == 0 {
        return Ok(Vec::new());
    }
    let mut params = Params::default();
    let mut conditions = vec![
        format!("e.kind = {}", params.push(kind.kind.as_str())),
        format!("e.persona = {}", params.push(filter.persona.clone())),
    ];
    if let (Some(session), Some(_)) = (filter.session, kind.session) {
        conditions.push(format!("e.session_id = {}", params.push(session.0)));
    }
    if let Some(start) = filter.start {
        conditions.push(format!("e.at >= {}", params.push(strata_seam::backend::to_unix(start))));
    }
    if let Some(end) = filter.end {
        conditions.push(format!("e.at < {}", params.push(strata_seam::backend::to_unix(end))));
    }
    let conditions = conditions.join(" AND ");
    let within: i64 = tx
        .query_planned(
            &format!("SELECT count(*) FROM (SELECT 1 FROM embeddings e WHERE {conditions} LIMIT {EXACT_SCAN_CHUNKS}) w"),
            &params.refs(),
        )
        .map_err(pg)?
        .first()
        .map_or(0, |row| row.get(0));
    let exact = within < EXACT_SCAN_CHUNKS;
    let vector = params.push(Vector::from(query.to_vec()));
    let dimensions = space.dimensions;
    // The index is over `embedding::vector(D)`: ordering by that expression uses it; ordering
    // by the bare column cannot, which makes the narrow filter's scan exact.
    let order = if exact {
        format!("e.embedding <=> {vector}::vector")
    } else {
        tx.batch_execute(&format!(
            "SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {}",
            (k * OVERSAMPLING).clamp(40, 1000)
        ))
        .map_err(pg)?;
        format!("e.embedding::vector({dimensions}) <=> {vector}::vector({dimensions})")
    };
    let sql = format!(
        "SELECT item_id, min(distance) AS distance FROM (
             SELECT e.item_id, (e.embedding <=> {vector}::vector)::FLOAT8 AS distance FROM embeddings e
             WHERE {conditions} ORDER BY {order} LIMIT {chunks}
         ) near GROUP BY item_id ORDER BY distance, item_id LIMIT {k}",
        chunks = params.push((k * OVERSAMPLING) as i64),
        k = params.push(k as i64),
    );
    let rows = tx.query_planned(&sql, &params.refs()).map_err(pg)?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}
