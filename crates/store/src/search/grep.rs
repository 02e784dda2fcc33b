//! `memory_grep`: case-insensitive substring search over the trigram indexes, the rows not
//! indexed yet read from their tables, and the time-ordered listing of a bare `*`.

use rusqlite::types::Value;
use rusqlite::{Connection, params_from_iter};
use unicode_normalization::UnicodeNormalization;

use super::index::Deferred;
use super::{HitKind, SearchFilter, TRIGRAM, TextHit, TextQuery};
use crate::error::Result;
use crate::kinds::Kind;

/// A query of no fragments, for the filters of a listing.
const NO_FRAGMENTS: TextQuery = TextQuery { terms: Vec::new() };

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

/// Ranks one kind's grep matches, each read with its grep text (a memory's is its key, a
/// space and its text) and arriving newest first: best `match_score` first, ties newest
/// first, at most `limit`, each shown as its text. Every backend ranks its matches here, so
/// `memory_grep` orders alike whatever the database.
pub fn rank_grep_hits(query: &TextQuery, mut found: Vec<TextHit>, limit: usize) -> Vec<TextHit> {
    let terms: Vec<String> = query.terms().iter().map(|term| term.to_lowercase()).collect();
    for hit in &mut found {
        hit.rank = -match_score(&hit.snippet, &terms);
    }
    // The sort is stable, so equal scores stay newest first.
    found.sort_by(|a, b| a.rank.total_cmp(&b.rank));
    found.truncate(limit);
    for hit in &mut found {
        // A memory was matched and scored on its key and text; it is shown as its text.
        if let Some(key) = hit.key.as_deref().filter(|_| hit.id.kind() == HitKind::Memory) {
            let cut = (key.len() + 1).min(hit.snippet.len());
            hit.snippet.drain(..cut);
        }
    }
    found
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

/// Text folded as the trigram index folds it (`case_sensitive 0 remove_diacritics 1`,
/// schema 2): diacritics taken off (canonical decomposition without its combining marks),
/// then each character lowercased where its lowercase is one character. SQLite's tables
/// may fold a rare character otherwise; such a row is found once it is indexed.
pub fn fold(text: &str) -> String {
    text.nfd()
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .map(|c| {
            let mut lower = c.to_lowercase();
            match (lower.next(), lower.next()) {
                (Some(single), None) => single,
                _ => c,
            }
        })
        .collect()
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

/// Bytes of a text scanned for matches to score; a match further in does not count.
const SCORE_SCAN_BYTES: usize = 1 << 20;

/// How well a text matches a grep: for each (lowercased) term, its occurrences saturated as
/// bm25 saturates term frequency (k1 = 1.2) and divided by the text's length relative to a
/// 100-word message (b = 0.75), summed over the terms. Every term is in every candidate, so
/// the terms weigh alike. Linear in the text, at most [`SCORE_SCAN_BYTES`] of it.
fn match_score(text: &str, terms: &[String]) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    const TYPICAL_WORDS: f64 = 100.0;
    let mut end = text.len().min(SCORE_SCAN_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let lower = text[..end].to_lowercase();
    let words = lower.split_whitespace().count().max(1) as f64;
    let norm = K1 * (1.0 - B + B * words / TYPICAL_WORDS);
    terms
        .iter()
        .filter(|term| !term.is_empty())
        .map(|term| {
            let tf = lower.matches(term.as_str()).count() as f64;
            tf * (K1 + 1.0) / (tf + norm)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_scores_favour_repeats_and_short_texts() {
        let terms = ["deploy".to_owned()];
        let once = match_score("we deploy today", &terms);
        let twice = match_score("Deploy now, deploy often", &terms);
        let long = match_score(&format!("we deploy {}", "filler ".repeat(300)), &terms);
        assert!(twice > once && once > long && long > 0.0, "{twice} {once} {long}");
        assert_eq!(match_score("nothing here", &terms), 0.0);
    }

    #[test]
    fn folding_takes_off_case_and_diacritics_as_the_trigram_index_does() {
        assert_eq!(fold("Café ZÜRICH"), "cafe zurich");
        assert_eq!(fold("Ärger über Ölpreise"), "arger uber olpreise");
        assert_eq!(fold("数据库 Ωmega"), "数据库 ωmega");
    }
}
