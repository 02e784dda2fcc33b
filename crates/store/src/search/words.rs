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

/// Rows holding a word are counted exactly up to this many; a word in more is common, and
/// how many rows hold it is estimated from how densely it occurs among the newest rows (see
/// [`count_words_in`]).
const EXACT_WORD_ROWS: usize = 2_000;

/// Ranks the rows of `kind` that hold any of `words` by bm25 over the word index (Porter
/// stemmed, so `painting` finds `painted`): (id, score, higher is better), best first, at most
/// `filter.limit`, within the filter's persona, session and time range, among the newest
/// 1,024 rows that match (a bounded cost however common the words). `hits` gives, for each
/// word, how many rows hold it ([`count_words_in`]), the weight bm25 gives the word; FTS5's
/// own `bm25()` would count them again over the whole index on every query (the strata_bm25
/// function, `vec.rs`). Memories have no session: with a session filter they are not searched.
/// Each word is passed to FTS5 as a quoted string, so no operator in it has any effect.
pub(crate) fn rank_words_in(
    conn: &Connection,
    kind: &Kind,
    words: &[String],
    hits: &[f64],
    filter: &SearchFilter,
) -> Result<Vec<(i64, f64)>> {
    let (words, hits): (Vec<String>, Vec<f64>) = words
        .iter()
        .zip(hits)
        .filter(|(w, _)| !w.trim().is_empty())
        .take(MAX_TERMS)
        .map(|(w, &n)| (quoted(w), n))
        .unzip();
    if words.is_empty() || (filter.session.is_some() && kind.session.is_none()) {
        return Ok(Vec::new());
    }
    let (window, window_values) = kind.window(filter);
    let mut conditions = vec![format!("{} MATCH ?", kind.words)];
    conditions.extend(window);
    // The statement's parameters in the order they appear: the words' row counts, the query,
    // the window, the two limits.
    let mut values: Vec<Value> = hits.into_iter().map(Value::Real).collect();
    values.push(Value::Text(words.join(" OR ")));
    values.extend(window_values);
    values.push(Value::Integer(RANK_SCAN_ROWS));
    values.push(Value::Integer(filter.limit.clamp(1, 4096) as i64));
    // bm25 is computed for the newest RANK_SCAN_ROWS matching rows only: FTS5 walks its index
    // newest first and stops there, so a word in half of a million rows costs what a rare one
    // does. Older rows that only common words match are left to the semantic side.
    let statement = format!(
        "SELECT rowid, score FROM (
             SELECT {fts}.rowid AS rowid, strata_bm25({fts}{counts}) AS score FROM {from}
             WHERE {conditions} ORDER BY {fts}.rowid DESC LIMIT ?
         ) ORDER BY score LIMIT ?",
        fts = kind.words,
        counts = ", ?".repeat(words.len()),
        from = kind.indexed_by(kind.words),
        conditions = conditions.join(" AND "),
    );
    let mut stmt = match conn.prepare_cached(&statement) {
        // The function is added to every connection as it opens, unless that failed (vec.rs).
        Err(rusqlite::Error::SqliteFailure(_, Some(message))) if message.contains("strata_bm25") => {
            crate::vec::ensure_bm25(conn)?;
            conn.prepare_cached(&statement)?
        }
        prepared => prepared?,
    };
    let rows =
        stmt.query_map(params_from_iter(values), |row| Ok((row.get::<_, i64>(0)?, -row.get::<_, f64>(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// How many rows hold each of the words of a query, in one kind's word index (over every
/// persona: the statistics bm25 uses).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WordCounts {
    /// Roughly how many rows there are (the largest id: rows are rarely deleted).
    pub rows: u64,
    /// Rows holding each word: exact up to 2,000, estimated above (for bm25's weights).
    pub hits: Vec<f64>,
    /// Rows holding each word, counted no further than the cap asked for.
    pub capped: Vec<u64>,
}

/// How many rows of `kind` hold each of `words` ([`WordCounts`]): counted exactly up to
/// `cap` or 2,000, whichever is more, and for a word in more rows estimated from the newest
/// 2,000 rows holding it, by the share of rows they span: a word in 45% of a million rows
/// costs the walk of 2,000 index entries, not of 450,000. With these a caller can weigh a
/// bm25 score against the best score the query could reach, and bm25 weighs the words.
pub(crate) fn count_words_in(
    conn: &Connection,
    kind: &Kind,
    words: &[String],
    cap: usize,
) -> Result<WordCounts> {
    let rows: Option<i64> = conn
        .prepare_cached(&format!("SELECT max(id) FROM {}", kind.table))?
        .query_row([], |row| row.get(0))?;
    let rows = rows.unwrap_or(0).max(0);
    let exact = cap.max(EXACT_WORD_ROWS).min(i64::MAX as usize) as i64;
    let statement = format!(
        "SELECT count(*), min(rowid) FROM (
             SELECT rowid FROM {fts} WHERE {fts} MATCH ?1 ORDER BY rowid DESC LIMIT ?2
         )",
        fts = kind.words
    );
    let mut count = conn.prepare_cached(&statement)?;
    let (mut hits, mut capped) = (Vec::with_capacity(words.len()), Vec::with_capacity(words.len()));
    for word in words {
        let (n, oldest): (i64, Option<i64>) =
            count.query_row(rusqlite::params![quoted(word), exact], |row| Ok((row.get(0)?, row.get(1)?)))?;
        let estimate = match oldest {
            // The newest `exact` rows holding the word span the ids from `oldest` to the
            // newest row: the word holds about that share of every row.
            Some(oldest) if n >= exact && rows > oldest => {
                let spanned = (rows - oldest + 1) as f64;
                (n as f64 * rows as f64 / spanned).clamp(n as f64, rows as f64)
            }
            _ => n as f64,
        };
        hits.push(estimate);
        capped.push(n.min(cap.min(i64::MAX as usize) as i64).max(0) as u64);
    }
    Ok(WordCounts { rows: rows as u64, hits, capped })
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;

    /// A connection holding just what a message search reads here: the messages' ids and
    /// their word index, `rows` rows, a row holding `text(id)`.
    fn words_table(rows: i64, text: impl Fn(i64) -> String) -> Connection {
        crate::vec::register();
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE messages(id INTEGER PRIMARY KEY);
             CREATE VIRTUAL TABLE messages_words USING fts5(
                 text, content = '', contentless_delete = 1,
                 tokenize = 'porter unicode61 remove_diacritics 2'
             );",
        )
        .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        for id in 1..=rows {
            tx.execute("INSERT INTO messages(id) VALUES (?1)", [id]).unwrap();
            tx.execute(
                "INSERT INTO messages_words(rowid, text) VALUES (?1, ?2)",
                rusqlite::params![id, text(id)],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        conn
    }

    #[test]
    fn strata_bm25_with_exact_counts_scores_as_fts5_bm25() {
        let conn = words_table(300, |id| {
            let mut text = format!("row {id} deploy");
            if id % 3 == 0 {
                text += " billing billing migration";
            }
            if id % 7 == 0 {
                text += &" filler".repeat(id as usize % 11);
            }
            text
        });
        let count = |word: &str| -> f64 {
            conn.query_row(
                "SELECT count(*) FROM messages_words WHERE messages_words MATCH ?1",
                [word],
                |row| row.get::<_, i64>(0),
            )
            .unwrap() as f64
        };
        let (billing, deploy) = (count("billing"), count("deploy"));
        let scores = |sql: &str| -> Vec<(i64, f64)> {
            let mut stmt = conn.prepare(sql).unwrap();
            stmt.query_map(rusqlite::params![billing, deploy], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        let query = "WHERE messages_words MATCH '\"billing\" OR \"deploy\"' AND ?1 IS NOT NULL AND ?2 IS NOT NULL \
                     ORDER BY rowid";
        let fts5 = scores(&format!("SELECT rowid, bm25(messages_words) FROM messages_words {query}"));
        let given =
            scores(&format!("SELECT rowid, strata_bm25(messages_words, ?1, ?2) FROM messages_words {query}"));
        let counted =
            scores(&format!("SELECT rowid, strata_bm25(messages_words) FROM messages_words {query}"));
        assert_eq!(fts5.len(), 300);
        assert_eq!(given, fts5, "the same scores, bit for bit, from the counts given");
        assert_eq!(counted, fts5, "the same scores from counts it makes itself");
        // Another count changes the weights: the counts given are the ones used. (Row 3 holds
        // `billing`; `deploy`, in every row, weighs next to nothing either way.)
        let halved = conn
            .query_row(
                "SELECT strata_bm25(messages_words, ?1, ?2) FROM messages_words
                 WHERE messages_words MATCH '\"billing\" OR \"deploy\"' AND rowid = 3",
                rusqlite::params![billing / 2.0, deploy],
                |row| row.get::<_, f64>(0),
            )
            .unwrap();
        assert!(halved < fts5[2].1, "rarer, so a better (lower) score: {halved} {}", fts5[2].1);
    }

    #[test]
    fn common_words_are_estimated_from_the_newest_rows_and_rare_ones_counted() {
        // 15,000 rows hold `common`: past the exact count, so estimated.
        let rows = 45_000;
        let conn = words_table(rows, |id| {
            let mut text = "plain".to_owned();
            if id % 3 == 0 {
                text += " common";
            }
            if id % 5_000 == 0 {
                text += " rare";
            }
            text
        });
        let words = ["common", "rare", "absent"].map(str::to_owned);
        let counts = count_words_in(&conn, Kind::of(crate::search::HitKind::Message), &words, 1_000).unwrap();
        assert_eq!(counts.rows, rows as u64);
        assert!((counts.hits[0] - 15_000.0).abs() <= 150.0, "{:?}", counts.hits);
        assert_eq!(counts.hits[1..], [9.0, 0.0]);
        assert_eq!(counts.capped, [1_000, 9, 0]);
    }
}
