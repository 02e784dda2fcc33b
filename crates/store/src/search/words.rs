//! `memory_search`'s keyword side on SQLite: the rows the word indexes (Porter stemmed, each
//! message with its speaker; schema 3) find, read as bm25 sees them, and the persona's word
//! statistics that weigh them (`strata_seam::search::bm25` scores).

use rusqlite::types::Value;
use rusqlite::{Connection, params, params_from_iter};

use super::{SearchFilter, quoted};
use crate::error::Result;
use crate::kinds::Kind;
use strata_seam::search::RowTerms;

/// Matching rows `memory_search`'s keyword side reads per kind, newest first; see
/// [`read_words_in`]. Each costs two primary-key lookups (the persona is the session's): at
/// 100,000 messages 4,096 of them took about 15 ms of a 30 ms budget, 1,024 about a quarter.
const RANK_SCAN_ROWS: i64 = 1024;

/// Rows holding a word are counted exactly up to this many; a word in more is common, and
/// how many rows hold it is estimated from how densely it occurs among the newest rows (see
/// [`count_words_in`]).
const EXACT_WORD_ROWS: usize = 2_000;

/// The rows of `kind` that hold any of `words` (each non-empty), within the filter's persona,
/// session and time range, the newest 1,024 of them (a bounded cost however common the words):
/// each with its length and how often it holds each word, for [`super::bm25`]. Older rows that
/// only common words match are left to the semantic side. Memories have no session: with a
/// session filter they are not searched. Each word is passed to FTS5 as a quoted string, so no
/// operator in it has any effect.
pub(crate) fn read_words_in(
    conn: &Connection,
    kind: &Kind,
    words: &[String],
    filter: &SearchFilter,
) -> Result<Vec<RowTerms>> {
    if words.is_empty() || !kind.searched(filter) {
        return Ok(Vec::new());
    }
    let (window, window_values) = kind.window(filter);
    let mut conditions = vec![format!("{} MATCH ?", kind.words)];
    conditions.extend(window);
    // The statement's parameters in the order they appear: the query, the window, the limit.
    let mut values =
        vec![Value::Text(words.iter().map(|word| quoted(word)).collect::<Vec<_>>().join(" OR "))];
    values.extend(window_values);
    values.push(Value::Integer(RANK_SCAN_ROWS));
    // FTS5 walks its index newest first and stops after RANK_SCAN_ROWS rows, so a word in half
    // of a million rows costs what a rare one does.
    let statement = format!(
        "SELECT {fts}.rowid, strata_terms({fts}) FROM {from}
         WHERE {conditions} ORDER BY {fts}.rowid DESC LIMIT ?",
        fts = kind.words,
        from = kind.indexed_by(kind.words),
        conditions = conditions.join(" AND "),
    );
    let mut stmt = match conn.prepare_cached(&statement) {
        // The function is added to every connection as it opens, unless that failed (vec.rs).
        Err(rusqlite::Error::SqliteFailure(_, Some(message))) if message.contains("strata_terms") => {
            crate::vec::ensure_terms(conn)?;
            conn.prepare_cached(&statement)?
        }
        prepared => prepared?,
    };
    let rows = stmt.query_map(params_from_iter(values), |row| {
        let terms: Vec<u8> = row.get(1)?;
        let mut numbers =
            terms.chunks_exact(4).map(|n| u32::from_le_bytes(n.try_into().expect("four bytes")));
        let length = numbers.next().unwrap_or(0);
        Ok(RowTerms { id: row.get(0)?, length, counts: numbers.collect() })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// How many of a persona's rows hold each of the words of a query, in one kind's word index:
/// the statistics bm25 weighs the words by.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WordCounts {
    /// Roughly how many rows of the kind the persona has (the largest id, when the persona is
    /// the only one: rows are rarely deleted).
    pub rows: u64,
    /// Rows holding each word: exact up to 2,000, estimated above (for bm25's weights).
    pub hits: Vec<f64>,
    /// Rows holding each word, counted no further than the cap asked for.
    pub capped: Vec<u64>,
}

/// How many of `persona`'s rows of `kind` hold each of `words` ([`WordCounts`]): counted
/// exactly up to `cap` or 2,000, whichever is more, and for a word in more rows estimated from
/// the newest 2,000 rows holding it, by the share of rows they span: a word in 45% of a million
/// rows costs the walk of 2,000 index entries, not of 450,000. With these a caller can weigh a
/// bm25 score against the best score the query could reach, and bm25 weighs the words.
///
/// Only the persona's rows are counted, so another persona's words never move the scores this
/// one sees. When no other persona has rows of the kind (one bot, one persona: the usual
/// case), the index is walked without looking each row's persona up, at a third of the cost.
/// Otherwise `read`, the keyword side's rows ([`read_words_in`]) when it searched the whole
/// persona (no session or time window), answers for the words it holds often enough.
pub(crate) fn count_words_in(
    conn: &Connection,
    kind: &Kind,
    words: &[String],
    cap: usize,
    persona: &str,
    read: Option<&[RowTerms]>,
) -> Result<WordCounts> {
    let newest: Option<i64> = conn
        .prepare_cached(&format!("SELECT max(id) FROM {}", kind.table))?
        .query_row([], |row| row.get(0))?;
    let newest = newest.unwrap_or(0).max(0);
    let shared: bool = conn
        .prepare_cached(&format!(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE {} <> ?1)",
            kind.personas, kind.persona
        ))?
        .query_row([persona], |row| row.get(0))?;
    let rows = if shared {
        conn.prepare_cached(kind.persona_rows)?.query_row([persona], |row| row.get(0))?
    } else {
        newest
    };
    let exact = cap.max(EXACT_WORD_ROWS).min(i64::MAX as usize) as i64;
    let statement = if shared {
        format!(
            "SELECT count(*), min(rowid) FROM (
                 SELECT {fts}.rowid AS rowid FROM {from} WHERE {fts} MATCH ?1 AND {persona} = ?3
                 ORDER BY {fts}.rowid DESC LIMIT ?2
             )",
            fts = kind.words,
            from = kind.indexed_by(kind.words),
            persona = kind.persona,
        )
    } else {
        // `?3 IS NOT NULL`: the same parameters in both statements.
        format!(
            "SELECT count(*), min(rowid) FROM (
                 SELECT rowid FROM {fts} WHERE {fts} MATCH ?1 AND ?3 IS NOT NULL ORDER BY rowid DESC LIMIT ?2
             )",
            fts = kind.words
        )
    };
    let mut count = conn.prepare_cached(&statement)?;
    let (mut hits, mut capped) = (Vec::with_capacity(words.len()), Vec::with_capacity(words.len()));
    let cap = cap.min(i64::MAX as usize) as i64;
    // The rows read are every row of the persona holding any word from the oldest of them on:
    // they show how densely each word occurs there. A word they show common enough is
    // estimated from them (a joined walk of 2,000 rows per word took three quarters of a
    // search at 1,000,000 messages); a rarer one is counted.
    let read = read.filter(|_| shared).map(|read| {
        let complete = (read.len() as i64) < RANK_SCAN_ROWS;
        (read, complete, if complete { None } else { read.last().map(|row| row.id) })
    });
    for (at, word) in words.iter().enumerate() {
        if let Some((read, complete, oldest)) = read {
            let seen = read.iter().filter(|row| row.counts.get(at).is_some_and(|&n| n > 0)).count() as i64;
            let estimate = spread(seen, oldest, newest, rows);
            if complete || estimate >= exact as f64 {
                hits.push(estimate);
                capped.push((estimate as i64).min(cap).max(0) as u64);
                continue;
            }
        }
        let (n, oldest): (i64, Option<i64>) =
            count.query_row(params![quoted(word), exact, persona], |row| Ok((row.get(0)?, row.get(1)?)))?;
        hits.push(spread(n, oldest.filter(|_| n >= exact), newest, rows));
        capped.push(n.min(cap).max(0) as u64);
    }
    Ok(WordCounts { rows: rows.max(0) as u64, hits, capped })
}

/// How many of `rows` rows hold a word, from the `held` of them found among the rows from id
/// `oldest` to the newest id: the word holds about that share of every row (of the persona's,
/// when they are spread over the ids as the others'). Without `oldest` (every row holding it
/// was seen) `held` is the count.
fn spread(held: i64, oldest: Option<i64>, newest: i64, rows: i64) -> f64 {
    match oldest {
        Some(oldest) if newest > oldest => {
            let spanned = (newest - oldest + 1) as f64;
            (held as f64 * newest as f64 / spanned).clamp(held as f64, (rows as f64).max(held as f64))
        }
        _ => held as f64,
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;
    use crate::search::{HitKind, WordStatistics};
    use strata_seam::search::bm25;

    /// A connection holding just what a message search reads here: two personas' sessions,
    /// the messages' ids and their word index, `rows` rows, a row holding `text(id)` and
    /// belonging to persona `p` unless `other(id)`, then to `q`.
    fn words_table(rows: i64, text: impl Fn(i64) -> String, other: impl Fn(i64) -> bool) -> Connection {
        crate::vec::register();
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE sessions(id INTEGER PRIMARY KEY, key TEXT, role TEXT, first_seq INTEGER DEFAULT 0);
             INSERT INTO sessions(id, key, role) VALUES (1, 'one', 'p'), (2, 'two', 'q');
             CREATE TABLE messages(id INTEGER PRIMARY KEY, session_id INTEGER, seq INTEGER, UNIQUE (session_id, seq));
             CREATE VIRTUAL TABLE messages_words USING fts5(
                 text, content = '', contentless_delete = 1,
                 tokenize = 'porter unicode61 remove_diacritics 2'
             );",
        )
        .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        let mut next_seq = [0i64; 2];
        for id in 1..=rows {
            let session = if other(id) { 2 } else { 1 };
            let seq = &mut next_seq[session as usize - 1];
            tx.execute("INSERT INTO messages(id, session_id, seq) VALUES (?1, ?2, ?3)", [id, session, *seq])
                .unwrap();
            *seq += 1;
            tx.execute(
                "INSERT INTO messages_words(rowid, text) VALUES (?1, ?2)",
                rusqlite::params![id, text(id)],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        conn
    }

    fn messages() -> &'static Kind {
        Kind::of(HitKind::Message)
    }

    #[test]
    fn with_every_row_read_the_stores_bm25_scores_as_fts5s() {
        let conn = words_table(
            300,
            |id| {
                let mut text = format!("row {id} deploy");
                if id % 3 == 0 {
                    text += " billing billing migration";
                }
                if id % 7 == 0 {
                    text += &" filler".repeat(id as usize % 11);
                }
                text
            },
            |_| false,
        );
        let words = ["billing", "deploy"].map(str::to_owned);
        let filter = SearchFilter::persona("p");
        // Every row holds `deploy`: all 300 are read, so their mean length is the index's.
        let read = read_words_in(&conn, messages(), &words, &filter).unwrap();
        assert_eq!(read.len(), 300);
        let counts = count_words_in(&conn, messages(), &words, 1_000, "p", None).unwrap();
        assert_eq!((counts.rows, counts.hits.clone()), (300, vec![100.0, 300.0]));
        let statistics = WordStatistics { rows: counts.rows, frequencies: counts.capped };
        let ours: std::collections::HashMap<i64, f64> =
            bm25(&statistics, &counts.hits, &read).into_iter().collect();
        let mut fts5 = conn
            .prepare(
                "SELECT rowid, bm25(messages_words) FROM messages_words
                 WHERE messages_words MATCH '\"billing\" OR \"deploy\"'",
            )
            .unwrap();
        let fts5: Vec<(i64, f64)> =
            fts5.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).unwrap().map(Result::unwrap).collect();
        assert_eq!(fts5.len(), 300);
        for (id, score) in fts5 {
            assert!(
                (ours[&id] + score).abs() < 1e-9 * score.abs().max(1.0),
                "row {id}: {} {score}",
                ours[&id]
            );
        }
    }

    #[test]
    fn common_words_are_estimated_from_the_newest_rows_and_rare_ones_counted() {
        // 15,000 rows hold `common`: past the exact count, so estimated.
        let rows = 45_000;
        let conn = words_table(
            rows,
            |id| {
                let mut text = "plain".to_owned();
                if id % 3 == 0 {
                    text += " common";
                }
                if id % 5_000 == 0 {
                    text += " rare";
                }
                text
            },
            |_| false,
        );
        let words = ["common", "rare", "absent"].map(str::to_owned);
        let counts = count_words_in(&conn, messages(), &words, 1_000, "p", None).unwrap();
        assert_eq!(counts.rows, rows as u64);
        assert!((counts.hits[0] - 15_000.0).abs() <= 150.0, "{:?}", counts.hits);
        assert_eq!(counts.hits[1..], [9.0, 0.0]);
        assert_eq!(counts.capped, [1_000, 9, 0]);
    }

    #[test]
    fn only_the_personas_own_rows_are_counted() {
        // Persona `q` has every fourth row, and alone holds `theirs`; both hold `shared`.
        let conn = words_table(
            8_000,
            |id| if id % 4 == 0 { "shared theirs".to_owned() } else { format!("shared mine{}", id % 2) },
            |id| id % 4 == 0,
        );
        let words = ["shared", "theirs", "mine1"].map(str::to_owned);
        let counts = count_words_in(&conn, messages(), &words, 1_000, "p", None).unwrap();
        assert_eq!(counts.rows, 6_000, "p's rows, not the index's");
        assert_eq!(counts.capped, [1_000, 0, 1_000]);
        assert_eq!(counts.hits[1..], [0.0, 4_000.0]);
        // 2,000 counted exactly among p's newest rows, then estimated by the share they span.
        assert!((counts.hits[0] - 6_000.0).abs() <= 60.0, "{:?}", counts.hits);
        let theirs = count_words_in(&conn, messages(), &words, 1_000, "q", None).unwrap();
        assert_eq!((theirs.rows, theirs.hits[1], theirs.hits[2]), (2_000, 2_000.0, 0.0));
        // From the keyword side's own rows: the common words estimated alike, the word p never
        // holds counted (none of the rows read shows it).
        let read = read_words_in(&conn, messages(), &words, &SearchFilter::persona("p")).unwrap();
        assert_eq!(read.len() as i64, RANK_SCAN_ROWS);
        let from_read = count_words_in(&conn, messages(), &words, 1_000, "p", Some(&read)).unwrap();
        assert_eq!((from_read.rows, from_read.capped.clone()), (6_000, vec![1_000, 0, 1_000]));
        for (at, (walked, estimated)) in counts.hits.iter().zip(&from_read.hits).enumerate() {
            assert!((walked - estimated).abs() <= 0.02 * walked, "word {at}: {walked} {estimated}");
        }
    }
}
