//! `memory_search`'s keyword side: bm25 over the word indexes (Porter stemmed, each message
//! with its speaker; schema 3), and the word statistics that put its scores on an absolute
//! scale.

use rusqlite::types::Value;
use rusqlite::{Connection, params_from_iter};

use super::{MAX_TERMS, SearchFilter, quoted};
use crate::error::Result;
use crate::kinds::Kind;

/// Matching rows `memory_search`'s keyword side ranks per kind, newest first; see
/// [`rank_words_in`]. Each costs two primary-key lookups (the persona is the session's): at
/// 100,000 messages 4,096 of them took about 15 ms of a 30 ms budget, 1,024 about a quarter.
const RANK_SCAN_ROWS: i64 = 1024;

/// Ranks the rows of `kind` that hold any of `words` by bm25 over the word index (Porter
/// stemmed, so `painting` finds `painted`): (id, score, higher is better), best first, at most
/// `filter.limit`, within the filter's persona, session and time range, among the newest
/// 1,024 rows that match (a bounded cost however common the words). Memories have no
/// session: with a session filter they are not searched. Each word is passed to FTS5 as a
/// quoted string, so no operator in it has any effect.
pub(crate) fn rank_words_in(
    conn: &Connection,
    kind: &Kind,
    words: &[String],
    filter: &SearchFilter,
) -> Result<Vec<(i64, f64)>> {
    let words: Vec<String> =
        words.iter().filter(|w| !w.trim().is_empty()).take(MAX_TERMS).map(|w| quoted(w)).collect();
    if words.is_empty() || (filter.session.is_some() && kind.session.is_none()) {
        return Ok(Vec::new());
    }
    let (window, window_values) = kind.window(filter);
    let mut conditions = vec![format!("{} MATCH ?", kind.words)];
    conditions.extend(window);
    let mut values = vec![Value::Text(words.join(" OR "))];
    values.extend(window_values);
    values.push(Value::Integer(RANK_SCAN_ROWS));
    values.push(Value::Integer(filter.limit.clamp(1, 4096) as i64));
    // bm25 is computed for the newest RANK_SCAN_ROWS matching rows only: FTS5 walks its index
    // newest first and stops there, so a word in half of a million rows costs what a rare one
    // does. Older rows that only common words match are left to the semantic side.
    let statement = format!(
        "SELECT rowid, score FROM (
             SELECT {fts}.rowid AS rowid, bm25({fts}) AS score FROM {from}
             WHERE {conditions} ORDER BY {fts}.rowid DESC LIMIT ?
         ) ORDER BY score LIMIT ?",
        fts = kind.words,
        from = kind.indexed_by(kind.words),
        conditions = conditions.join(" AND "),
    );
    let mut stmt = conn.prepare_cached(&statement)?;
    let rows =
        stmt.query_map(params_from_iter(values), |row| Ok((row.get::<_, i64>(0)?, -row.get::<_, f64>(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// How many rows of `kind` hold each of `words` (all personas: the statistics bm25 itself
/// uses), counting no further than `cap` per word, and roughly how many rows there are (the
/// largest id: rows are rarely deleted). With these a caller can weigh a bm25 score against
/// the best score the query could reach. A count stops at `cap`, so a common word costs a
/// bounded scan of its index entries.
pub(crate) fn word_frequencies_in(
    conn: &Connection,
    kind: &Kind,
    words: &[String],
    cap: usize,
) -> Result<(u64, Vec<u64>)> {
    let rows: Option<i64> = conn
        .prepare_cached(&format!("SELECT max(id) FROM {}", kind.table))?
        .query_row([], |row| row.get(0))?;
    let statement =
        format!("SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ?1 LIMIT ?2)", fts = kind.words);
    let mut count = conn.prepare_cached(&statement)?;
    let mut frequencies = Vec::with_capacity(words.len());
    for word in words {
        let n: i64 = count
            .query_row(rusqlite::params![quoted(word), cap.min(i64::MAX as usize) as i64], |row| {
                row.get(0)
            })?;
        frequencies.push(n as u64);
    }
    Ok((rows.unwrap_or(0).max(0) as u64, frequencies))
}
