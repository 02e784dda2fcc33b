//! Vectors in sqlite-vec: the embedding space, the backlog's vectors and k-nearest queries,
//! per persona.
//!
//! The vector tables are built for one model at a time (the *embedding space*: model id and
//! dimensions, one row of `embedding_space`). Long texts are embedded in chunks: a row's chunk
//! `c` is stored at vector rowid `id * MAX_CHUNKS + c`, and a query keeps each row's nearest
//! chunk. Each vector is stored three times: as floats in vec0 (sqlite-vec's exact scan), as
//! one bit per dimension in vec0 (a fast first pass, see [`nearest`]) and as floats in a plain
//! table by vector rowid (the first pass's exact re-scoring, one b-tree lookup a candidate).

use std::collections::{HashMap, HashSet};

use rusqlite::types::Value;
use rusqlite::{Connection, MAIN_DB, OptionalExtension, params, params_from_iter};

use crate::db::query_all;
use crate::error::{Error, Result};
use crate::kinds::Kind;
use crate::search::{HitId, HitKind, SearchFilter};
#[cfg(any(test, feature = "test-support"))]
use crate::store::Store;
use crate::types::{Role, SessionId};
use crate::vec::{hamming_each, to_blob};
pub(crate) use strata_seam::embeddings::{BacklogItem, EmbeddingSpace, MAX_CHUNKS};
pub(crate) use strata_seam::search::Scan;

pub(crate) fn table(kind: HitKind) -> &'static str {
    Kind::of(kind).vectors
}

/// The plain table beside a vec0 table that holds each chunk's float vector by vector rowid
/// (`id`): the re-scoring of a quantized scan reads a candidate's vector with one b-tree
/// lookup, where vec0's storage (one blob per 1,024 vectors) costs a walk along the blob's
/// overflow pages (at 1,000,000 vectors: 0.4 ms a candidate). Its name starts with the vec0
/// table's, so `doctor` takes it for one of the vector tables, which it is.
fn floats_table(vectors: &str) -> String {
    format!("{vectors}_floats")
}

/// Whether the floats table of `vectors` exists (a database embedded before it did has vec0's
/// storage only, until its next embedding run fills it: [`use_space`]).
fn has_floats(conn: &Connection, vectors: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")?
        .query_row([floats_table(vectors)], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Creates the floats tables that are missing, filled from their vec0 tables.
pub(crate) fn ensure_floats(conn: &Connection) -> Result<()> {
    for kind in Kind::ALL {
        if !has_floats(conn, kind.vectors)? {
            conn.execute_batch(&format!(
                "CREATE TABLE {floats}(id INTEGER PRIMARY KEY, vector BLOB NOT NULL);
                 INSERT INTO {floats}(id, vector) SELECT rowid, embedding FROM {vectors};",
                floats = floats_table(kind.vectors),
                vectors = kind.vectors,
            ))?;
        }
    }
    Ok(())
}

/// Writes one chunk vector of row `id` as a copy brings it (`strata copy`), with the persona
/// its row has; the floats table must exist ([`ensure_floats`]).
pub(crate) fn insert_chunk(
    conn: &Connection,
    kind: HitKind,
    id: i64,
    chunk: usize,
    vector: &[f32],
) -> Result<()> {
    let of = Kind::of(kind);
    let persona: String = conn
        .prepare_cached(&format!("SELECT {} FROM {} WHERE {}.id = ?1", of.persona, of.owned(), of.alias))?
        .query_row([id], |row| row.get(0))
        .optional()?
        .ok_or_else(|| {
            Error::invalid("copied vector", format!("{kind:?} {id} is not among the copied rows"))
        })?;
    let (table, rowid, blob) = (table(kind), id * MAX_CHUNKS as i64 + chunk as i64, to_blob(vector));
    conn.prepare_cached(&format!(
        "INSERT INTO {table}(rowid, role, embedding, embedding_bits) VALUES (?1, ?2, ?3, vec_quantize_binary(?3))"
    ))?
    .execute(params![rowid, persona, blob])?;
    conn.prepare_cached(&format!("INSERT INTO {}(id, vector) VALUES (?1, ?2)", floats_table(table)))?
        .execute(params![rowid, blob])?;
    if kind == HitKind::Memory && chunk == 0 {
        conn.prepare_cached("UPDATE agent_memories SET embedding = ?2 WHERE id = ?1")?
            .execute(params![id, blob])?;
    }
    Ok(())
}

/// Up to `limit` chunk vectors of `kind` with a vector rowid above `after`, in rowid order
/// (a row's chunks together): what a copy to another backend reads.
pub(crate) fn dump(
    conn: &Connection,
    kind: HitKind,
    after: i64,
    limit: usize,
) -> Result<Vec<crate::dump::StoredVector>> {
    let table = table(kind);
    let exists: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = ?1)")?
        .query_row([table], |row| row.get(0))?;
    if !exists {
        return Ok(Vec::new());
    }
    // The floats table when it exists (one b-tree read a vector), vec0's storage before.
    let sql = if has_floats(conn, table)? {
        format!("SELECT id, vector FROM {} WHERE id > ?1 ORDER BY id LIMIT ?2", floats_table(table))
    } else {
        format!("SELECT rowid, embedding FROM {table} WHERE rowid > ?1 ORDER BY rowid LIMIT ?2")
    };
    query_all(conn, &sql, params![after, limit as i64], |row| {
        let rowid: i64 = row.get(0)?;
        let blob: Vec<u8> = row.get(1)?;
        Ok(crate::dump::StoredVector {
            kind,
            item_id: rowid / MAX_CHUNKS as i64,
            chunk: (rowid % MAX_CHUNKS as i64) as usize,
            vector: blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        })
    })
}

/// Deletes one chunk's vector (vector rowid `rowid`) from the vec0 table and its floats.
pub(crate) fn delete_chunk(conn: &Connection, kind: HitKind, rowid: i64) -> Result<()> {
    let table = table(kind);
    conn.prepare_cached(&format!("DELETE FROM {table} WHERE rowid = ?1"))?.execute([rowid])?;
    if has_floats(conn, table)? {
        conn.prepare_cached(&format!("DELETE FROM {} WHERE id = ?1", floats_table(table)))?
            .execute([rowid])?;
    }
    Ok(())
}

/// The text a summary or memory is embedded from now, to check a vector against (messages
/// never change, so they need no check).
fn current_text_sql(kind: HitKind) -> Option<String> {
    let kind = Kind::of(kind);
    (kind.kind != HitKind::Message).then(|| {
        format!("SELECT {} FROM {} {} WHERE {} = ?1", kind.ranked_text, kind.table, kind.alias, kind.id())
    })
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
    wanted.validate()?;
    let current = space(conn)?;
    if current.as_ref() == Some(wanted) {
        ensure_floats(conn)?;
        return Ok(false);
    }
    for kind in Kind::ALL {
        let table = kind.vectors;
        conn.execute_batch(&format!(
            "DROP TABLE IF EXISTS {table};
             DROP TABLE IF EXISTS {floats};
             CREATE VIRTUAL TABLE {table} USING vec0(
                 role TEXT PARTITION KEY,
                 embedding float[{dims}] distance_metric=cosine,
                 embedding_bits bit[{dims}]
             );
             CREATE TABLE {floats}(id INTEGER PRIMARY KEY, vector BLOB NOT NULL);",
            dims = wanted.dimensions,
            floats = floats_table(table),
        ))?;
    }
    conn.execute(
        "INSERT INTO embedding_space(id, model, dimensions) VALUES (1, ?1, ?2)
         ON CONFLICT(id) DO UPDATE SET model = excluded.model, dimensions = excluded.dimensions",
        params![wanted.model, wanted.dimensions as i64],
    )?;
    if current.is_some() {
        conn.execute_batch("UPDATE agent_memories SET embedding = NULL; DELETE FROM embedding_backlog;")?;
        for kind in Kind::ALL {
            conn.execute(
                &format!(
                    "INSERT INTO embedding_backlog(kind, item_id) SELECT '{}', id FROM {}",
                    kind.kind.as_str(),
                    kind.table
                ),
                [],
            )?;
        }
    }
    Ok(true)
}

/// Removes the vectors of one row (a deleted memory). Nothing to do before the first embedding.
pub(crate) fn forget(conn: &Connection, kind: HitKind, id: i64) -> Result<()> {
    if space(conn)?.is_none() {
        return Ok(());
    }
    for chunk in 0..MAX_CHUNKS as i64 {
        delete_chunk(conn, kind, id * MAX_CHUNKS as i64 + chunk)?;
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
    ensure_floats(conn)?;
    let mut written = 0;
    for (item, chunks) in items {
        let (kind, id) = (item.id.kind(), item.id.raw());
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
        if let Some(sql) = current_text_sql(kind) {
            let current: Option<String> =
                conn.prepare_cached(&sql)?.query_row([id], |row| row.get(0)).optional()?;
            if !current.is_some_and(|text| text.starts_with(&item.text)) {
                continue;
            }
        }
        let taken = conn
            .prepare_cached("DELETE FROM embedding_backlog WHERE kind = ?1 AND item_id = ?2")?
            .execute(params![kind.as_str(), id])?;
        if taken == 0 {
            continue;
        }
        // A summary or memory rewritten since its last vector has old chunks to replace; a
        // message is embedded once per model, into tables created empty, so it has none.
        if kind != HitKind::Message {
            forget(conn, kind, id)?;
        }
        let table = table(kind);
        let mut insert = conn.prepare_cached(&format!(
            "INSERT INTO {table}(rowid, role, embedding, embedding_bits)
             VALUES (?1, ?2, ?3, vec_quantize_binary(?3))"
        ))?;
        let mut floats = conn.prepare_cached(&format!(
            "INSERT OR REPLACE INTO {}(id, vector) VALUES (?1, ?2)",
            floats_table(table)
        ))?;
        for (chunk, vector) in chunks.iter().enumerate() {
            let rowid = id * MAX_CHUNKS as i64 + chunk as i64;
            let blob = to_blob(vector);
            insert.execute(params![rowid, item.persona, blob])?;
            floats.execute(params![rowid, blob])?;
        }
        if kind == HitKind::Memory {
            conn.prepare_cached("UPDATE agent_memories SET embedding = ?2 WHERE id = ?1")?
                .execute(params![id, to_blob(&chunks[0])])?;
        }
        written += 1;
    }
    Ok(written)
}

/// How many vectors each table holds (what tests check).
#[cfg(any(test, feature = "test-support"))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VectorCounts {
    /// Message vectors.
    pub messages: u64,
    /// Summary vectors.
    pub summaries: u64,
    /// Memory vectors.
    pub memories: u64,
}

#[cfg(any(test, feature = "test-support"))]
impl VectorCounts {
    /// All vectors.
    pub fn total(&self) -> u64 {
        self.messages + self.summaries + self.memories
    }
}

/// Up to `limit` backlog rows, optionally of one persona or one session only (a session has no
/// memories: they belong to the persona), with the text to embed ([`Kind::ranked_text`]).
/// Memories first, then summaries, then messages.
pub fn backlog_filtered(
    conn: &Connection,
    persona: Option<&str>,
    session: Option<SessionId>,
    limit: usize,
) -> Result<Vec<BacklogItem>> {
    let mut items = Vec::new();
    for kind in Kind::ALL.into_iter().rev() {
        let left = limit.saturating_sub(items.len());
        if left == 0 {
            break;
        }
        let sql = format!(
            "SELECT b.item_id, {persona_column}, {text}, {role} FROM embedding_backlog b JOIN {joined}
             WHERE b.kind = '{name}' AND {within} ORDER BY b.item_id LIMIT ?1",
            persona_column = kind.persona,
            text = kind.ranked_text,
            // A message's embedding policy depends on its sender.
            role = if kind.kind == HitKind::Message { "m.role" } else { "NULL" },
            joined = kind.joined_on("b.item_id"),
            name = kind.kind.as_str(),
            within = backlog_window(kind),
        );
        items.extend(query_all(conn, &sql, params![left as i64, persona, session], |row| {
            let role: Option<String> = row.get(3)?;
            let message_role = role.map(|role| role.parse::<Role>()).transpose().map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, Box::new(e))
            })?;
            Ok(BacklogItem {
                id: HitId::new(kind.kind, row.get(0)?),
                persona: row.get(1)?,
                text: row.get(2)?,
                message_role,
            })
        })?);
    }
    Ok(items)
}

/// The backlog queries' conditions on the persona (`?2`, or NULL for every persona) and the
/// session (`?3`, or NULL); a kind without sessions matches only when no session is asked for.
fn backlog_window(kind: &Kind) -> String {
    let session = match kind.session {
        Some(column) => format!("(?3 IS NULL OR {column} = ?3)"),
        None => "?3 IS NULL".to_owned(),
    };
    format!("(?2 IS NULL OR {} = ?2) AND {session}", kind.persona)
}

/// How many backlog rows match the filter of [`backlog_filtered`].
pub fn backlog_count(conn: &Connection, persona: Option<&str>, session: Option<SessionId>) -> Result<u64> {
    let mut total = 0;
    for kind in Kind::ALL {
        let sql = format!(
            "SELECT count(*) FROM embedding_backlog b JOIN {joined} WHERE b.kind = '{name}' AND {within}",
            joined = kind.joined_on("b.item_id"),
            name = kind.kind.as_str(),
            within = backlog_window(kind).replace("?2", "?1").replace("?3", "?2"),
        );
        total +=
            conn.prepare_cached(&sql)?.query_row(params![persona, session], |row| row.get::<_, i64>(0))?;
    }
    Ok(total as u64)
}

/// How many vectors (chunks) each table holds; zero before anything was embedded.
#[cfg(any(test, feature = "test-support"))]
pub fn vector_counts(conn: &Connection) -> Result<VectorCounts> {
    if space(conn)?.is_none() {
        return Ok(VectorCounts::default());
    }
    let count = |kind: HitKind| -> Result<u64> {
        let sql = format!("SELECT count(*) FROM {}", table(kind));
        Ok(conn.prepare_cached(&sql)?.query_row([], |row| row.get::<_, i64>(0))? as u64)
    };
    Ok(VectorCounts {
        messages: count(HitKind::Message)?,
        summaries: count(HitKind::Summary)?,
        memories: count(HitKind::Memory)?,
    })
}

/// A time or session window holding at most this many rows is searched within: its ids are
/// read first and the bit scan skips every other row, so a sparse window is never crowded out
/// by nearer rows outside it. A larger window is dense enough to filter afterwards.
const WINDOW_PREFILTER_ROWS: usize = 20_000;
/// How many more chunks a filtered search asks for when it filters afterwards.
const WINDOW_OVERSAMPLING: usize = 8;

/// The `k` rows of `kind` nearest to `query` within the filter's persona, session and time
/// range: (id, cosine distance of the row's nearest chunk), nearest first. Empty when the
/// stored vectors are not of `model`. (The filter's kinds and limit are not used.)
pub fn nearest(
    conn: &Connection,
    model: &str,
    kind: HitKind,
    filter: &SearchFilter,
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
    if filter.session.is_some() && kind == HitKind::Memory {
        return Ok(Vec::new());
    }
    let windowed = filter.session.is_some() || filter.start.is_some() || filter.end.is_some();
    // The window's own ids when it is small; `None` when there is no window or it is large.
    let inside = match windowed {
        true => window_ids(conn, kind, filter, WINDOW_PREFILTER_ROWS)?,
        false => None,
    };
    let post_filter = windowed && inside.is_none();
    // A row may hold several of the nearest chunks; ask for more chunks than rows, and more
    // again when rows outside the window are dropped afterwards.
    let chunks = (k.max(1) * 2 * if post_filter { WINDOW_OVERSAMPLING } else { 1 }).min(4096);
    let table = table(kind);
    let found: Vec<(i64, f64)> = match (scan, &inside) {
        (Scan::Quantized { candidates }, _) => {
            let shortlist = Shortlist::Share(candidates.max(chunks));
            scan_bits(conn, table, &filter.persona, query, chunks, shortlist, inside.as_ref())?
        }
        // A small window is scanned exactly: every one of its chunks is re-scored.
        (Scan::Exact, Some(ids)) => {
            let every = Shortlist::Every(ids.len() * MAX_CHUNKS);
            scan_bits(conn, table, &filter.persona, query, chunks, every, Some(ids))?
        }
        (Scan::Exact, None) => query_all(
            conn,
            &format!(
                "SELECT rowid, distance FROM {table}
                 WHERE embedding MATCH ?1 AND k = ?2 AND role = ?3 ORDER BY distance"
            ),
            params![to_blob(query), chunks as i64, filter.persona],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?,
    };
    let mut best = nearest_per_row(found);
    if post_filter {
        let ids: Vec<i64> = best.keys().copied().collect();
        let kept = in_window(conn, kind, filter, &ids)?;
        best.retain(|id, _| kept.contains(id));
        if best.len() < k {
            // The nearest chunks of the persona lie mostly outside a window too large to read
            // first: read its ids after all and scan among them as asked, so a window that
            // holds rows never comes back thin or empty.
            if let Some(ids) = window_ids(conn, kind, filter, u32::MAX as usize)? {
                let shortlist = match scan {
                    Scan::Quantized { candidates } => Shortlist::Share(candidates.max(chunks)),
                    Scan::Exact => Shortlist::Every(ids.len() * MAX_CHUNKS),
                };
                let found = scan_bits(conn, table, &filter.persona, query, chunks, shortlist, Some(&ids))?;
                return Ok(nearest_first(nearest_per_row(found), k));
            }
        }
    }
    Ok(nearest_first(best, k))
}

/// Each row's nearest chunk: row id -> distance.
fn nearest_per_row(chunks: Vec<(i64, f64)>) -> HashMap<i64, f64> {
    let mut best: HashMap<i64, f64> = HashMap::new();
    for (rowid, distance) in chunks {
        let id = rowid.div_euclid(MAX_CHUNKS as i64);
        let entry = best.entry(id).or_insert(distance);
        *entry = entry.min(distance);
    }
    best
}

/// The `k` nearest rows, nearest first (ties by id).
fn nearest_first(best: HashMap<i64, f64>, k: usize) -> Vec<(i64, f64)> {
    let mut rows: Vec<(i64, f64)> = best.into_iter().collect();
    rows.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    rows.truncate(k);
    rows
}

/// The ids of `kind` inside the filter's window, or `None` when there are more than `cap`.
fn window_ids(
    conn: &Connection,
    kind: HitKind,
    filter: &SearchFilter,
    cap: usize,
) -> Result<Option<HashSet<i64>>> {
    let kind = Kind::of(kind);
    let (conditions, mut values) = kind.window(filter);
    values.push(Value::Integer(cap as i64 + 1));
    let sql =
        format!("SELECT {} FROM {} WHERE {} LIMIT ?", kind.id(), kind.owned(), conditions.join(" AND "));
    let ids: HashSet<i64> =
        query_all(conn, &sql, params_from_iter(values), |row| row.get(0))?.into_iter().collect();
    Ok((ids.len() <= cap).then_some(ids))
}

/// Which of `ids` lie inside the filter's window.
fn in_window(conn: &Connection, kind: HitKind, filter: &SearchFilter, ids: &[i64]) -> Result<HashSet<i64>> {
    let kind = Kind::of(kind);
    let (conditions, mut values) = kind.window(filter);
    values.insert(0, Value::Text(serde_json::to_string(ids).expect("integers serialize")));
    // Start from the ids (primary-key lookups), not from the persona's rows.
    let sql = format!(
        "SELECT {} FROM (SELECT value AS id FROM json_each(?)) ids CROSS JOIN {} WHERE {}",
        kind.id(),
        kind.joined_on("ids.id"),
        conditions.join(" AND ")
    );
    Ok(query_all(conn, &sql, params_from_iter(values), |row| row.get(0))?.into_iter().collect())
}

/// One chunk of the bit scan's best: where its float vector lies, and where its bits are
/// kept ([`scan_bits`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    hamming: u32,
    rowid: i64,
    chunk_id: i64,
    offset: usize,
    slot: usize,
}

/// How many chunks the bit scan keeps (its shortlist), and which of them are re-scored from
/// their float vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shortlist {
    /// Every one: the exact search of a small window.
    Every(usize),
    /// The best [`RESCORED_SHARE`]th by the query's floats against their bits (all of them
    /// when the shortlist holds every chunk scanned: a small persona is searched exactly).
    Share(usize),
}

/// The shortlist's share re-scored from float vectors: 1 in 2. Each re-scored chunk costs a
/// b-tree lookup (at 1,000,000 vectors, about 3 us), and the query's floats against a chunk's
/// bits rank the shortlist far better than the hamming distance that chose it: at 1,000,000
/// vectors the best half of 3,200 holds as many of the exact 10 nearest (98.5%) as all 3,200
/// (benches/README.md, "Search at a million vectors").
const RESCORED_SHARE: usize = 2;

/// For each byte position of a bit vector and each value of that byte, the sum of the query's
/// components whose bits are set: a chunk's bits against the query's floats (the sign vector's
/// dot product, up to a constant) is then one lookup a byte.
fn byte_sums(query: &[f32]) -> Vec<[f32; 256]> {
    query
        .chunks(8)
        .map(|eight| {
            let mut sums = [0f32; 256];
            for (byte, sum) in sums.iter_mut().enumerate() {
                *sum = eight.iter().enumerate().filter(|(bit, _)| byte >> bit & 1 == 1).map(|(_, x)| x).sum();
            }
            sums
        })
        .collect()
}

/// The `keep` chunks nearest to `query` (cosine distance) among the `candidates` nearest by
/// hamming distance of their 1-bit vectors (the shortlist), within one persona and, when
/// given, among the chunks of the rows in `inside`: (vector rowid, distance), nearest first.
/// Of the shortlist, `shortlist` says which are re-scored from their float vectors: every one,
/// or the best half by the query's floats against their bits ([`Shortlist`]).
///
/// sqlite-vec's own k-nearest query selects its best k with a pass over each chunk of 1,024
/// vectors per result (k x 1,024 comparisons a chunk), and its lookups of single float vectors
/// read far more than the vector: at 100,000 vectors a bit-column query for 400 took 92 ms and
/// 400 float lookups 124 ms. So the scan reads vec0's storage itself, as sqlite-vec lays it out
/// (one `_chunks` row per 1,024 vectors of a partition, with a validity bitmap and the rowids;
/// one blob of vectors per chunk and vector column, `00` the floats, `01` the bits, in
/// declaration order), keeps the nearest under a falling threshold, and reads each
/// candidate's float vector from the floats table (through incremental blob I/O of vec0's
/// storage in a database whose floats table is not filled yet). A test checks the result
/// against sqlite-vec's exact search.
fn scan_bits(
    conn: &Connection,
    table: &str,
    persona: &str,
    query: &[f32],
    keep: usize,
    shortlist: Shortlist,
    inside: Option<&HashSet<i64>>,
) -> Result<Vec<(i64, f64)>> {
    let (Shortlist::Every(candidates) | Shortlist::Share(candidates)) = shortlist;
    let bytes = query.len() / 8;
    let mut query_bits = vec![0u8; bytes];
    for (i, x) in query.iter().enumerate() {
        if *x > 0.0 {
            query_bits[i / 8] |= 1 << (i % 8);
        }
    }
    if candidates == 0 {
        return Ok(Vec::new());
    }
    // The best chunks by hamming distance: every chunk as near as `threshold` is kept, and
    // whenever twice as many as wanted are kept the nearest `candidates` are selected, which
    // lowers the threshold. Most chunks are then refused by one comparison, where a heap
    // would be updated for each better one (a fifth of the scan's time at 1,000,000).
    let mut kept: Vec<Candidate> = Vec::with_capacity(2 * candidates.min(1 << 16) + 1);
    // The kept chunks' bits, `bytes` each, at their `slot`.
    let mut kept_bits: Vec<u8> = Vec::with_capacity((2 * candidates.min(1 << 16) + 1) * bytes);
    // Whether chunks were left out: if not, the shortlist is every chunk of the persona (or
    // window), and all of it is re-scored.
    let mut shortened = false;
    let mut threshold = u32::MAX;
    let mut distances = Vec::with_capacity(1024);
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT c.chunk_id, c.validity, c.rowids, v.vectors
         FROM {table}_chunks c JOIN {table}_vector_chunks01 v ON v._rowid_ = c.chunk_id
         WHERE c.partition00 = ?1"
    ))?;
    let mut rows = stmt.query([persona])?;
    while let Some(row) = rows.next()? {
        let chunk_id: i64 = row.get(0)?;
        let validity = row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
        let rowids = row.get_ref(2)?.as_blob().map_err(rusqlite::Error::from)?;
        let vectors = row.get_ref(3)?.as_blob().map_err(rusqlite::Error::from)?;
        let slots = (rowids.len() / 8).min(validity.len() * 8).min(vectors.len() / bytes);
        hamming_each(&vectors[..slots * bytes], &query_bits, &mut distances);
        for (offset, &hamming) in distances.iter().enumerate() {
            if hamming > threshold || validity[offset / 8] >> (offset % 8) & 1 == 0 {
                continue;
            }
            let rowid = i64::from_ne_bytes(rowids[offset * 8..offset * 8 + 8].try_into().expect("8 bytes"));
            if inside.is_some_and(|ids| !ids.contains(&rowid.div_euclid(MAX_CHUNKS as i64))) {
                continue;
            }
            let slot = kept_bits.len() / bytes;
            kept_bits.extend_from_slice(&vectors[offset * bytes..(offset + 1) * bytes]);
            kept.push(Candidate { hamming, rowid, chunk_id, offset, slot });
            if kept.len() >= 2 * candidates {
                kept.select_nth_unstable(candidates - 1);
                kept.truncate(candidates);
                threshold = kept.iter().map(|candidate| candidate.hamming).max().unwrap_or(u32::MAX);
                kept_bits = compact_bits(&mut kept, &kept_bits, bytes);
                shortened = true;
            }
        }
    }
    drop(rows);
    let mut chosen = kept;
    if chosen.len() > candidates {
        chosen.select_nth_unstable(candidates - 1);
        chosen.truncate(candidates);
        shortened = true;
    }
    let rescored = match shortlist {
        Shortlist::Share(_) if shortened => (candidates / RESCORED_SHARE).max(keep),
        _ => chosen.len(),
    };
    if chosen.len() > rescored {
        // Highest sum first: the chunks whose sign vectors point most along the query.
        let sums = byte_sums(query);
        let mut ranked: Vec<(f32, Candidate)> = chosen
            .iter()
            .map(|candidate| {
                let bits = &kept_bits[candidate.slot * bytes..(candidate.slot + 1) * bytes];
                (bits.iter().zip(&sums).map(|(byte, sums)| sums[usize::from(*byte)]).sum(), *candidate)
            })
            .collect();
        ranked.select_nth_unstable_by(rescored - 1, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        chosen = ranked.into_iter().take(rescored).map(|(_, candidate)| candidate).collect();
    }
    let query_norm = query.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let mut scored = Vec::with_capacity(chosen.len());
    if has_floats(conn, table)? {
        chosen.sort_by_key(|candidate| candidate.rowid);
        let mut lookup =
            conn.prepare_cached(&format!("SELECT vector FROM {} WHERE id = ?1", floats_table(table)))?;
        for candidate in &chosen {
            let mut rows = lookup.query([candidate.rowid])?;
            if let Some(row) = rows.next()? {
                let vector = row.get_ref(0)?.as_blob().map_err(rusqlite::Error::from)?;
                scored.push((candidate.rowid, cosine_distance(query, query_norm, vector)));
            }
        }
    } else {
        chosen.sort_by_key(|candidate| (candidate.chunk_id, candidate.offset));
        let floats = format!("{table}_vector_chunks00");
        let mut vector = vec![0u8; query.len() * 4];
        for same_chunk in chosen.chunk_by(|a, b| a.chunk_id == b.chunk_id) {
            let blob = conn.blob_open(MAIN_DB, floats.as_str(), "vectors", same_chunk[0].chunk_id, true)?;
            for candidate in same_chunk {
                let at = candidate.offset * vector.len();
                blob.read_at_exact(&mut vector, at)?;
                scored.push((candidate.rowid, cosine_distance(query, query_norm, &vector)));
            }
        }
    }
    scored.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    scored.truncate(keep);
    Ok(scored)
}

/// Keeps the bits of `kept` only, in a new buffer, and points each candidate at its new slot.
fn compact_bits(kept: &mut [Candidate], bits: &[u8], bytes: usize) -> Vec<u8> {
    let mut compacted = Vec::with_capacity(bits.len());
    for (slot, candidate) in kept.iter_mut().enumerate() {
        compacted.extend_from_slice(&bits[candidate.slot * bytes..(candidate.slot + 1) * bytes]);
        candidate.slot = slot;
    }
    compacted
}

/// Cosine distance between `query` and a stored vector in vec0's layout (native f32), as
/// sqlite-vec computes it (1 - cosine similarity).
fn cosine_distance(query: &[f32], query_norm: f64, stored: &[u8]) -> f64 {
    let (mut dot, mut norm) = (0.0f32, 0.0f32);
    for (q, bytes) in query.iter().zip(stored.chunks_exact(4)) {
        let v = f32::from_ne_bytes(bytes.try_into().expect("4 bytes"));
        dot += q * v;
        norm += v * v;
    }
    let denominator = query_norm * f64::from(norm).sqrt();
    if denominator == 0.0 { 1.0 } else { 1.0 - f64::from(dot) / denominator }
}

/// The vectors of one [`Store`] as tests read them ([`Store::embeddings`]): nearest-neighbour
/// queries and counts. Everything else goes through [`Backend`](strata_seam::Backend) (and the
/// space through [`Dump::space`](strata_seam::transfer::Dump::space)).
#[cfg(any(test, feature = "test-support"))]
#[derive(Clone, Copy, Debug)]
pub struct Embeddings<'a> {
    store: &'a Store,
}

#[cfg(any(test, feature = "test-support"))]
impl Store {
    /// The vectors and the rows waiting for one, for tests.
    pub fn embeddings(&self) -> Embeddings<'_> {
        Embeddings { store: self }
    }
}

#[cfg(any(test, feature = "test-support"))]
impl Embeddings<'_> {
    /// The `k` rows of `kind` nearest to `query` (a vector of `model`) within one persona:
    /// (id, cosine distance of its nearest chunk), nearest first. Empty when the stored vectors
    /// are of another model.
    pub fn nearest(
        &self,
        model: &str,
        kind: HitKind,
        persona: &str,
        query: &[f32],
        k: usize,
        scan: Scan,
    ) -> Result<Vec<(HitId, f64)>> {
        let filter = SearchFilter::persona(persona);
        let nearest = self.store.read(|conn| nearest(conn, model, kind, &filter, query, k, scan))?;
        Ok(nearest.into_iter().map(|(id, distance)| (HitId::new(kind, id), distance)).collect())
    }

    /// How many vectors each table holds.
    pub fn counts(&self) -> Result<VectorCounts> {
        self.store.read(vector_counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sums_add_up_the_query_where_the_bits_are_set() {
        let query: Vec<f32> = (0..24).map(|i| (i as f32 - 11.5) / 7.0).collect();
        let sums = byte_sums(&query);
        assert_eq!(sums.len(), 3);
        for bits in [[0u8, 0, 0], [0xff, 0xff, 0xff], [0b1010_0001, 0x0f, 0x80]] {
            let looked_up: f32 = bits.iter().zip(&sums).map(|(byte, sums)| sums[usize::from(*byte)]).sum();
            let direct: f32 = (0..24).filter(|i| bits[i / 8] >> (i % 8) & 1 == 1).map(|i| query[i]).sum();
            assert!((looked_up - direct).abs() < 1e-5, "{bits:?}: {looked_up} against {direct}");
        }
    }
}
