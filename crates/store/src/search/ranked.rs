//! The one read `memory_search` is built from: both sides' candidates with their whole text,
//! the word statistics that scale bm25, the spans of the summaries among them, and where
//! embedding stands, all from one snapshot of the database.
//!
//! Recall fuses and ranks; the store only reads. One read transaction instead of a call per
//! kind and side (about 18 round trips, each its own snapshot) means a search never mixes rows
//! from before and after another process's write, and pays one pool checkout.

use std::collections::HashMap;

use rusqlite::{Connection, params};

use super::HitRow;
use super::{HitId, HitKind, MAX_TERMS, TextHit, count_words_in, read_words_in};
use crate::db::query_all;
use crate::error::Result;
use crate::kinds::Kind;
use crate::types::NodeId;
use crate::vectors::{self};
use strata_seam::search::bm25;
pub(crate) use strata_seam::search::{CandidateQuery, Candidates, WordStatistics};

/// The rows with these ids that belong to `persona`, as hits whose snippet is the whole text
/// (unmarked) and whose rank is zero: messages first, then summaries, then memories, each in
/// the order of `ids`. Ids of other personas are silently absent. The ids travel as one JSON
/// array bound to a parameter, so the statement text never depends on how many there are.
pub(crate) fn hits_by_ids(conn: &Connection, persona: &str, ids: &[HitId]) -> Result<Vec<TextHit>> {
    let mut hits = Vec::new();
    for kind in Kind::ALL {
        let of_kind: Vec<i64> = ids.iter().filter(|id| id.kind() == kind.kind).map(|id| id.raw()).collect();
        if of_kind.is_empty() {
            continue;
        }
        let of_kind = serde_json::to_string(&of_kind).expect("integers serialize");
        hits.extend(query_all(conn, &kind.by_ids(kind.text), params![of_kind, persona], |row| {
            TextHit::from_row(kind.kind, row, None)
        })?);
    }
    Ok(hits)
}

/// The first and last seq of the summaries among `ids`.
fn spans(conn: &Connection, ids: impl Iterator<Item = HitId>) -> Result<HashMap<NodeId, (i64, i64)>> {
    let nodes: Vec<i64> = ids.filter(|id| id.kind() == HitKind::Summary).map(HitId::raw).collect();
    if nodes.is_empty() {
        return Ok(HashMap::new());
    }
    let nodes = serde_json::to_string(&nodes).expect("integers serialize");
    let rows = query_all(
        conn,
        "SELECT n.id, n.first_seq, n.last_seq FROM (SELECT DISTINCT value AS id FROM json_each(?1)) ids
         CROSS JOIN summary_nodes n ON n.id = ids.id",
        [nodes],
        |row| Ok((NodeId(row.get(0)?), (row.get(1)?, row.get(2)?))),
    )?;
    Ok(rows.into_iter().collect())
}

/// Both sides' candidates of a ranked search, with everything needed to fuse and show them,
/// read on one snapshot (the caller's deferred read transaction): for each kind of the filter,
/// the `limit` nearest rows to the vector (within the filter's window: a small window is
/// searched among its own rows, so rows outside it never crowd it out) and the `limit` best
/// bm25 matches of the words, with the word statistics of that kind. The word index is read as
/// it is: rows a bulk writer has not indexed yet are not ranked (see `index.rs`).
pub(crate) fn candidates(conn: &Connection, query: &CandidateQuery<'_>) -> Result<Candidates> {
    let filter = &query.filter;
    let kinds = filter.kinds.iter().map(|&kind| Kind::of(kind)).filter(|kind| kind.searched(filter));
    let words: Vec<String> =
        query.words.iter().filter(|word| !word.trim().is_empty()).take(MAX_TERMS).cloned().collect();
    let mut found = Candidates {
        space: vectors::space(conn)?,
        waiting: vectors::backlog_count(conn, Some(&filter.persona), filter.session)?,
        ..Candidates::default()
    };
    for kind in kinds {
        if let Some((model, vector)) = query.vector {
            let nearest = vectors::nearest(conn, model, kind.kind, filter, vector, filter.limit, query.scan)?;
            let ids: Vec<HitId> = nearest.iter().map(|&(id, _)| HitId::new(kind.kind, id)).collect();
            let distances: HashMap<i64, f64> = nearest.into_iter().collect();
            for hit in hits_by_ids(conn, &filter.persona, &ids)? {
                let distance = distances[&hit.id.raw()];
                found.semantic.push((hit, distance));
            }
        }
        if words.is_empty() {
            continue;
        }
        let read = read_words_in(conn, kind, &words, filter)?;
        if read.is_empty() {
            continue;
        }
        let whole = filter.whole_persona().then_some(&read[..]);
        let counts = count_words_in(conn, kind, &words, query.frequency_cap, &filter.persona, whole)?;
        let statistics = WordStatistics { rows: counts.rows, frequencies: counts.capped };
        let mut ranked = bm25(&statistics, &counts.hits, &read);
        ranked.truncate(filter.limit.clamp(1, 4096));
        found.words.insert(kind.kind, statistics);
        let ids: Vec<HitId> = ranked.iter().map(|&(id, _)| HitId::new(kind.kind, id)).collect();
        let scores: HashMap<i64, f64> = ranked.into_iter().collect();
        for hit in hits_by_ids(conn, &filter.persona, &ids)? {
            let score = scores[&hit.id.raw()];
            found.keyword.push((hit, score));
        }
    }
    found.spans = spans(conn, found.semantic.iter().chain(&found.keyword).map(|(hit, _)| hit.id))?;
    Ok(found)
}
