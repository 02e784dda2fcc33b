//! `memory_grep`: case-insensitive substring search over the trigram indexes, the rows not
//! indexed yet read from their tables, and the time-ordered listing of a bare `*`.

use rusqlite::types::Value;
use rusqlite::{Connection, params_from_iter};

use super::index::Deferred;
use super::{HitKind, SearchFilter, TRIGRAM, TextHit, TextQuery};
use super::{HitRow, QuerySql};
use crate::error::Result;
use crate::kinds::Kind;
pub(crate) use strata_seam::search::{fold, rank_grep_hits};

/// A query of no fragments, for the filters of a listing.
const NO_FRAGMENTS: TextQuery = TextQuery::EMPTY;

/// Matching rows `memory_grep` ranks per kind, newest first. Each costs two primary-key
/// lookups (persona, time) and a scan of its text; 256 keep grep within a few milliseconds
/// while a page of results is still the best of a few hundred.
const GREP_SCAN_ROWS: i64 = 256;

/// Keyword search, best match first (ties: newest first), ranked among the newest 256 rows of
/// each kind that match (more when the limit is larger); see [`match_score`].
pub fn grep(conn: &Connection, query: &TextQuery, filter: &SearchFilter) -> Result<Vec<TextHit>> {
    let mut hits = Vec::new();
    for &kind in &filter.kinds {
        let kind = Kind::of(kind);
        if kind.session.is_none() && filter.session.is_some() {
            continue;
        }
        grep_kind(conn, kind, query, filter, &mut hits)?;
    }
    hits.sort_by(|a, b| a.rank.total_cmp(&b.rank).then(b.timestamp.cmp(&a.timestamp)));
    Ok(hits)
}

fn grep_kind(
    conn: &Connection,
    kind: &Kind,
    query: &TextQuery,
    filter: &SearchFilter,
    hits: &mut Vec<TextHit>,
) -> Result<()> {
    let limit = filter.limit.min(1000);
    let wanted = GREP_SCAN_ROWS.max(limit as i64) as usize;
    // The newest rows are the unindexed ones, if any (ids only grow): they come first. A
    // query without a MATCH reads the base table through the external-content index, every
    // row included, and needs no tail.
    let match_expression = query.match_expression();
    let mut found = match (kind.deferred, &match_expression) {
        (Some(deferred), Some(_)) => grep_tail(conn, kind, deferred, query, filter, wanted)?,
        _ => Vec::new(),
    };
    if found.len() < wanted {
        let (mut conditions, mut values) = filters(kind, kind.trigram_columns, query, filter);
        if let Some(expression) = match_expression {
            conditions.push(format!("{} MATCH ?", kind.trigram));
            values.push(Value::Text(expression));
        }
        values.push(Value::Integer((wanted - found.len()) as i64));
        // The newest GREP_SCAN_ROWS matching rows, newest first: FTS5 walks its index that way
        // and stops there, so a word in most of a million rows costs what a rare one does.
        // They are ranked here, not by FTS5's bm25(), which counts every row holding each
        // phrase (the whole index for a common word: 100 ms at 1,000,000 messages) before it
        // scores the first one.
        let statement = format!(
            "SELECT {columns}, {text}, 0.0 FROM {from} WHERE {conditions} ORDER BY {fts}.rowid DESC LIMIT ?",
            columns = kind.hit_columns,
            text = kind.grep_text,
            from = kind.indexed_by(kind.trigram),
            conditions = conditions.join(" AND "),
            fts = kind.trigram,
        );
        let mut stmt = conn.prepare_cached(&statement)?;
        let rows =
            stmt.query_map(params_from_iter(values), |row| TextHit::from_row(kind.kind, row, Some(11)))?;
        for hit in rows {
            found.push(hit?);
        }
    }
    hits.extend(rank_grep_hits(query, found, limit));
    Ok(())
}

/// The persona, time, session and short-fragment conditions of a grep, with their values.
/// The statement text depends only on the shape of the query (how many short fragments);
/// every value, the user's text included, is a bound parameter.
fn filters(
    kind: &Kind,
    text_columns: &[&str],
    query: &TextQuery,
    filter: &SearchFilter,
) -> (Vec<String>, Vec<Value>) {
    let (mut conditions, mut values) = kind.window(filter);
    for pattern in query.like_patterns() {
        let any_column: Vec<String> =
            text_columns.iter().map(|column| format!("{column} LIKE ? ESCAPE '\\'")).collect();
        conditions.push(format!("({})", any_column.join(" OR ")));
        values.extend(text_columns.iter().map(|_| Value::Text(pattern.clone())));
    }
    (conditions, values)
}

/// The newest `wanted` rows past the index cursor that the query matches, newest first:
/// what the index will answer for them once a writer has caught it up. The short fragments
/// are the same `LIKE`s as over the index; the long ones, which the trigram index matches
/// as substrings after folding case and diacritics, are matched here on [`fold`]ed text.
/// The scan reads every unindexed row of the persona (within the filter) until it has found
/// `wanted`: nothing, in the common case of a caught-up index.
fn grep_tail(
    conn: &Connection,
    kind: &Kind,
    deferred: Deferred,
    query: &TextQuery,
    filter: &SearchFilter,
    wanted: usize,
) -> Result<Vec<TextHit>> {
    let (mut conditions, values) = filters(kind, kind.text_columns, query, filter);
    conditions.push(deferred.tail_condition(&kind.id()));
    let statement = format!(
        "SELECT {columns}, {text}, 0.0 FROM {from} WHERE {conditions} ORDER BY {id} DESC",
        columns = kind.hit_columns,
        text = kind.grep_text,
        from = kind.owned(),
        conditions = conditions.join(" AND "),
        id = kind.id(),
    );
    let long_terms: Vec<String> =
        query.terms().iter().filter(|term| term.chars().count() >= TRIGRAM).map(|term| fold(term)).collect();
    let mut stmt = conn.prepare_cached(&statement)?;
    let mut rows = stmt.query(params_from_iter(values))?;
    let mut found = Vec::new();
    while found.len() < wanted
        && let Some(row) = rows.next()?
    {
        let hit = TextHit::from_row(kind.kind, row, Some(11))?;
        // A fragment holds no line break, so one found in the summary's `headline \n body`
        // lies within one of the two columns, as the index requires.
        let text = fold(&hit.snippet);
        if long_terms.iter().all(|term| text.contains(term.as_str())) {
            found.push(hit);
        }
    }
    Ok(found)
}

/// The messages of `filter.persona` (and `filter.session`) sent within `filter.start` ..
/// `filter.end`, in time order (oldest first when `oldest_first`, else newest first), skipping
/// `offset`: what a bare `*` grep lists. Walks the `messages_created` index, so a page costs its
/// rows and the ones skipped, not the history.
pub fn said_between(
    conn: &Connection,
    filter: &SearchFilter,
    oldest_first: bool,
    offset: usize,
) -> Result<Vec<TextHit>> {
    let messages = Kind::of(HitKind::Message);
    let (conditions, mut values) = filters(messages, &[], &NO_FRAGMENTS, filter);
    values.push(Value::Integer(filter.limit.min(1000) as i64));
    values.push(Value::Integer(offset.min(i64::MAX as usize) as i64));
    let order = if oldest_first { "ASC" } else { "DESC" };
    let statement = format!(
        "SELECT {columns}, {text}, 0.0 FROM {from} WHERE {conditions} \
         ORDER BY {time} {order}, {id} {order} LIMIT ? OFFSET ?",
        columns = messages.hit_columns,
        text = messages.text,
        from = messages.owned(),
        conditions = conditions.join(" AND "),
        time = messages.time,
        id = messages.id(),
    );
    let mut stmt = conn.prepare_cached(&statement)?;
    let rows =
        stmt.query_map(params_from_iter(values), |row| TextHit::from_row(HitKind::Message, row, Some(11)))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}
