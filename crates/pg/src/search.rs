//! `memory_grep` and `memory_search`'s one read on PostgreSQL, built from one table of kinds
//! as SQLite's are (`crates/store/src/kinds.rs`).
//!
//! grep: every fragment, folded as strata folds text, is a `LIKE` over the row's folded
//! column, which a pg_trgm GIN index serves; the newest matching rows are ranked by the
//! store's one grep ranking. Ranked words: the stored `tsvector` (English stemming) and
//! `ts_rank`, with word statistics counted within the persona searched, so another persona's
//! rows never move the scores one persona sees.

use std::collections::HashMap;

use postgres::types::{FromSql, ToSql, Type};
use strata_seam::backend::{fold, from_unix, rank_grep_hits, to_unix};
use strata_seam::search::{
    CandidateQuery, Candidates, HitId, HitKind, RowTerms, SearchFilter, TextHit, TextQuery, WordStatistics,
    bm25,
};
use strata_seam::{Error, Level, NodeId, SessionId};
use strata_store::kinds::Kind;

use crate::db::{Queries, Tx, pg};
use crate::vectors;

/// How many of the newest matching rows grep ranks per kind (SQLite's `GREP_SCAN_ROWS`).
const GREP_SCAN_ROWS: usize = 256;
/// How many of the newest rows holding a word are scored per kind (SQLite's `RANK_SCAN_ROWS`).
const RANK_SCAN_ROWS: i64 = 4096;

/// A statement's parameters, numbered as they are pushed.
#[derive(Default)]
pub(crate) struct Params {
    values: Vec<Box<dyn ToSql + Sync>>,
}

impl Params {
    /// Adds a value; returns its placeholder (`$n`).
    pub fn push(&mut self, value: impl ToSql + Sync + 'static) -> String {
        self.values.push(Box::new(value));
        format!("${}", self.values.len())
    }

    pub fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.values.iter().map(|value| value.as_ref() as &(dyn ToSql + Sync)).collect()
    }
}

/// The persona, session and time conditions of a search of `kind` (every table holds its
/// rows' persona here, so no join is needed for it).
pub(crate) fn window(kind: &Kind, filter: &SearchFilter, params: &mut Params) -> Vec<String> {
    let mut conditions = vec![format!("{}.persona = {}", kind.alias, params.push(filter.persona.clone()))];
    if let (Some(session), Some(column)) = (filter.session, kind.session) {
        conditions.push(format!("{column} = {}", params.push(session.0)));
    }
    if let Some(start) = filter.start {
        conditions.push(format!("{} >= {}", kind.time, params.push(to_unix(start))));
    }
    if let Some(end) = filter.end {
        conditions.push(format!("{} < {}", kind.time, params.push(to_unix(end))));
    }
    conditions
}

fn hit(kind: HitKind, row: &postgres::Row) -> TextHit {
    TextHit {
        id: HitId::new(kind, row.get(0)),
        session_id: row.get::<_, Option<i64>>(1).map(SessionId),
        session: row.get(2),
        seq: row.get(3),
        role: row.get(4),
        level: row.get::<_, Option<i32>>(5).map(|level| Level(level as u32)),
        category: row.get::<_, Option<&str>>(6).and_then(|category| category.parse().ok()),
        key: row.get(7),
        timestamp: from_unix(row.get(8)),
        speaker: row.get(9),
        snippet: row.get(10),
        rank: 0.0,
    }
}

/// `LIKE` pattern for a fragment anywhere in the text, its wildcards escaped.
fn contains(fragment: &str) -> String {
    let mut pattern = String::from("%");
    for c in fold(fragment).chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

pub(crate) fn grep(tx: &mut Tx<'_>, query: &TextQuery, filter: &SearchFilter) -> Result<Vec<TextHit>, Error> {
    let limit = filter.limit.min(1000);
    let wanted = GREP_SCAN_ROWS.max(limit);
    let mut hits = Vec::new();
    for &kind in &filter.kinds {
        let kind = Kind::of(kind);
        if !kind.searched(filter) {
            continue;
        }
        let mut params = Params::default();
        let mut conditions = window(kind, filter, &mut params);
        for term in query.terms() {
            conditions.push(format!("{}.folded LIKE {}", kind.alias, params.push(contains(term))));
        }
        let sql = format!(
            "SELECT {columns}, {text} FROM {from} WHERE {conditions} ORDER BY {a}.id DESC LIMIT {limit}",
            columns = kind.hit_columns,
            text = kind.grep_text,
            from = kind.owned(),
            conditions = conditions.join(" AND "),
            a = kind.alias,
            limit = params.push(wanted as i64),
        );
        let found = tx.query_planned(&sql, &params.refs()).map_err(pg)?;
        hits.extend(rank_grep_hits(query, found.iter().map(|row| hit(kind.kind, row)).collect(), limit));
    }
    hits.sort_by(|a, b| a.rank.total_cmp(&b.rank).then(b.timestamp.cmp(&a.timestamp)));
    Ok(hits)
}

pub(crate) fn said_between(
    db: &mut impl Queries,
    filter: &SearchFilter,
    oldest_first: bool,
    offset: usize,
) -> Result<Vec<TextHit>, Error> {
    let messages = Kind::of(HitKind::Message);
    let mut params = Params::default();
    let conditions = window(messages, filter, &mut params);
    let order = if oldest_first { "ASC" } else { "DESC" };
    let sql = format!(
        "SELECT {columns}, {text} FROM {from} WHERE {conditions}
         ORDER BY {time} {order}, m.id {order} LIMIT {limit} OFFSET {offset}",
        columns = messages.hit_columns,
        text = messages.text,
        from = messages.owned(),
        conditions = conditions.join(" AND "),
        time = messages.time,
        limit = params.push(filter.limit.min(1000) as i64),
        offset = params.push(offset.min(i64::MAX as usize) as i64),
    );
    let rows = db.query_planned(&sql, &params.refs()).map_err(pg)?;
    Ok(rows.iter().map(|row| hit(HitKind::Message, row)).collect())
}

/// The rows with these ids that belong to `persona`, as hits showing their whole text, in the
/// order of `ids`; ids of other personas are absent.
pub(crate) fn hits_by_ids(
    tx: &mut Tx<'_>,
    kind: &Kind,
    persona: &str,
    ids: &[i64],
) -> Result<Vec<TextHit>, Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT {columns}, {text} FROM {from} WHERE {a}.id = ANY($1) AND {a}.persona = $2",
        columns = kind.hit_columns,
        text = kind.text,
        from = kind.owned(),
        a = kind.alias,
    );
    let rows = tx.query(&sql, &[&ids, &persona]).map_err(pg)?;
    let mut hits: Vec<TextHit> = rows.iter().map(|row| hit(kind.kind, row)).collect();
    let order: HashMap<i64, usize> = ids.iter().enumerate().map(|(at, &id)| (id, at)).collect();
    hits.sort_by_key(|hit| order[&hit.id.raw()]);
    Ok(hits)
}

/// The tsquery that any of `words` satisfies, as SQL over `params`.
fn any_word(words: &[String], params: &mut Params) -> String {
    let each: Vec<String> = words
        .iter()
        .map(|word| format!("plainto_tsquery('english', {})", params.push(word.clone())))
        .collect();
    each.join(" || ")
}

/// A kind's word statistics and its scored rows (id, bm25), best first.
type KeywordSide = (WordStatistics, Vec<(i64, f64)>);

/// The keyword side of a ranked search of one kind: the persona's word statistics and the
/// newest rows holding any of the words (up to [`RANK_SCAN_ROWS`]), scored by the store's bm25
/// (`strata_seam::search::bm25`, as on SQLite), best first; `None`
/// when the persona has no row of the kind. Recall weighs a keyword score against the bm25 a
/// row holding every word would reach (`ideal_score`), so the score must be bm25, not
/// `ts_rank`.
///
/// One read serves both: the rows are read with their tsvector's text and counted here (term
/// counts, stemmed as the server stems; a row's length is its count of distinct words, against
/// the mean over the rows read). When the search has no window but the persona, those rows are
/// every row holding a word, or at least `cap` of them, so they also give each word's capped
/// frequency; only a rare word in a full read is counted apart (a small index scan).
fn keyword_side(
    tx: &mut Tx<'_>,
    kind: &Kind,
    words: &[String],
    filter: &SearchFilter,
    cap: usize,
) -> Result<Option<KeywordSide>, Error> {
    let table = kind.table;
    // Messages are never deleted here (their guard trigger refuses it), so a persona holds the
    // sum of its sessions' next seqs: a read of its sessions, not of its 100,000 messages.
    let count = match kind.kind {
        HitKind::Message => {
            "SELECT coalesce(sum(next_seq), 0)::BIGINT FROM sessions WHERE persona = $1".to_owned()
        }
        _ => format!("SELECT count(*) FROM {table} WHERE persona = $1"),
    };
    let total: i64 = tx.query_one(&count, &[&filter.persona]).map_err(pg)?.get(0);
    if total == 0 {
        return Ok(None);
    }
    // Each word's lexemes as the server stems them: a row holds the word when it holds all.
    let lexemes: Vec<Vec<String>> = tx
        .query(
            "SELECT array(SELECT lexeme FROM unnest(to_tsvector('english', w))) FROM unnest($1::TEXT[]) w",
            &[&words],
        )
        .map_err(pg)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let mut params = Params::default();
    let query = any_word(words, &mut params);
    let mut conditions = window(kind, filter, &mut params);
    conditions.push(format!("{}.words @@ q.q", kind.alias));
    let sql = format!(
        "SELECT {a}.id, {a}.words FROM {from}, (SELECT {query} AS q) q
         WHERE {conditions} ORDER BY {a}.id DESC LIMIT {scan}",
        a = kind.alias,
        from = kind.owned(),
        conditions = conditions.join(" AND "),
        scan = params.push(RANK_SCAN_ROWS),
    );
    // Every lexeme of the words, once: each row read keeps only their counts and its length.
    let mut wanted: Vec<&str> = lexemes.iter().flatten().map(String::as_str).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let at = |lexeme: &String| wanted.binary_search(&lexeme.as_str()).expect("every lexeme is wanted");
    let read: Vec<(i64, Terms)> = tx
        .query_planned(&sql, &params.refs())
        .map_err(pg)?
        .iter()
        .map(|row| {
            let words: Option<RawTsVector<'_>> = row.get(1);
            let terms =
                Terms::of(words.map_or(&[0; 4][..], |words| words.0), &wanted).ok_or(Error::Invalid {
                    field: "tsvector",
                    reason: "the server sent a tsvector strata cannot read".into(),
                })?;
            Ok((row.get(0), terms))
        })
        .collect::<Result<_, Error>>()?;
    let holds = |terms: &Terms, word: &[String]| {
        !word.is_empty() && word.iter().all(|lexeme| terms.counts[at(lexeme)] > 0)
    };
    let whole_persona = filter.whole_persona();
    let complete = (read.len() as i64) < RANK_SCAN_ROWS;
    let mut frequencies = Vec::with_capacity(words.len());
    for (word, stems) in words.iter().zip(&lexemes) {
        let seen = read.iter().filter(|(_, terms)| holds(terms, stems)).count();
        let frequency = if stems.is_empty() {
            0
        } else if whole_persona && (complete || seen >= cap) {
            seen.min(cap)
        } else {
            let counted: i64 = tx
                .query_planned(
                    &format!(
                        "SELECT count(*) FROM (SELECT 1 FROM {table}
                         WHERE persona = $1 AND words @@ plainto_tsquery('english', $2) LIMIT $3) holding"
                    ),
                    &[&filter.persona, word, &(cap as i64)],
                )
                .map_err(pg)?
                .first()
                .map_or(0, |row| row.get(0));
            counted as usize
        };
        frequencies.push(frequency as u64);
    }
    let statistics = WordStatistics { rows: total as u64, frequencies };
    if read.is_empty() {
        return Ok(Some((statistics, Vec::new())));
    }
    // Each word's count in a row is the sum of its lexemes'.
    let read: Vec<RowTerms> = read
        .iter()
        .map(|(id, terms)| RowTerms {
            id: *id,
            length: terms.length,
            counts: lexemes
                .iter()
                .map(|stems| stems.iter().map(|lexeme| terms.counts[at(lexeme)]).sum())
                .collect(),
        })
        .collect();
    let holding: Vec<f64> = statistics.frequencies.iter().map(|&n| n as f64).collect();
    let mut scored = bm25(&statistics, &holding, &read);
    scored.truncate(filter.limit.clamp(1, 4096));
    Ok(Some((statistics, scored)))
}

/// A tsvector as the server sends it in binary (`tsvectorsend`): its count of lexemes (i32),
/// then each lexeme's bytes and a NUL, its count of positions (u16) and the positions (u16
/// each). Thousands of rows are read per search: the binary form costs the server nothing to
/// write (its text form cost about 10 ms a search) and is read here without a copy.
struct RawTsVector<'a>(&'a [u8]);

impl<'a> FromSql<'a> for RawTsVector<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(RawTsVector(raw))
    }

    fn accepts(ty: &Type) -> bool {
        ty.name() == "tsvector"
    }
}

/// What the keyword side keeps of a row's tsvector: its count of distinct lexemes, and the
/// count of positions of each wanted lexeme (0 when absent).
struct Terms {
    length: u32,
    counts: Vec<u32>,
}

impl Terms {
    /// Reads a binary tsvector (see [`RawTsVector`]); a lexeme stored without positions counts
    /// once. `wanted` is sorted. `None` when the bytes are not a tsvector.
    fn of(tsvector: &[u8], wanted: &[&str]) -> Option<Terms> {
        let length = u32::from_be_bytes(tsvector.get(..4)?.try_into().ok()?);
        let mut terms = Terms { length, counts: vec![0; wanted.len()] };
        let mut rest = &tsvector[4..];
        for _ in 0..length {
            let end = rest.iter().position(|&byte| byte == 0)?;
            let lexeme = &rest[..end];
            let positions = u16::from_be_bytes(rest.get(end + 1..end + 3)?.try_into().ok()?);
            rest = rest.get(end + 3 + 2 * usize::from(positions)..)?;
            if let Ok(at) = wanted.binary_search_by(|word| word.as_bytes().cmp(lexeme)) {
                terms.counts[at] = u32::from(positions.max(1));
            }
        }
        rest.is_empty().then_some(terms)
    }
}

pub(crate) fn candidates(tx: &mut Tx<'_>, query: &CandidateQuery<'_>) -> Result<Candidates, Error> {
    let filter = &query.filter;
    let mut found = Candidates {
        space: vectors::space(tx)?,
        waiting: vectors::backlog_count(tx, Some(&filter.persona), filter.session)?,
        ..Candidates::default()
    };
    for &kind in &filter.kinds {
        let kind = Kind::of(kind);
        if !kind.searched(filter) {
            continue;
        }
        if let Some((model, vector)) = query.vector {
            let nearest = vectors::nearest(tx, model, kind, filter, vector, filter.limit)?;
            let ids: Vec<i64> = nearest.iter().map(|&(id, _)| id).collect();
            let distances: HashMap<i64, f64> = nearest.into_iter().collect();
            for hit in hits_by_ids(tx, kind, &filter.persona, &ids)? {
                let distance = distances[&hit.id.raw()];
                found.semantic.push((hit, distance));
            }
        }
        let words: Vec<String> = query.words.iter().filter(|word| !word.trim().is_empty()).cloned().collect();
        if words.is_empty() {
            continue;
        }
        let Some((statistics, ranked)) = keyword_side(tx, kind, &words, filter, query.frequency_cap)? else {
            continue;
        };
        if ranked.is_empty() {
            continue;
        }
        found.words.insert(kind.kind, statistics);
        let ids: Vec<i64> = ranked.iter().map(|&(id, _)| id).collect();
        let scores: HashMap<i64, f64> = ranked.into_iter().collect();
        for hit in hits_by_ids(tx, kind, &filter.persona, &ids)? {
            let score = scores[&hit.id.raw()];
            found.keyword.push((hit, score));
        }
    }
    let nodes: Vec<i64> = found
        .semantic
        .iter()
        .chain(&found.keyword)
        .filter(|(hit, _)| hit.id.kind() == HitKind::Summary)
        .map(|(hit, _)| hit.id.raw())
        .collect();
    if !nodes.is_empty() {
        let rows = tx
            .query("SELECT id, first_seq, last_seq FROM summary_nodes WHERE id = ANY($1)", &[&nodes])
            .map_err(pg)?;
        found.spans = rows.iter().map(|row| (NodeId(row.get(0)), (row.get(1), row.get(2)))).collect();
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::Terms;

    /// A binary tsvector of `(lexeme, positions)`.
    fn tsvector(lexemes: &[(&str, &[u16])]) -> Vec<u8> {
        let mut bytes = (lexemes.len() as i32).to_be_bytes().to_vec();
        for (lexeme, positions) in lexemes {
            bytes.extend(lexeme.as_bytes());
            bytes.push(0);
            bytes.extend((positions.len() as u16).to_be_bytes());
            positions.iter().for_each(|position| bytes.extend(position.to_be_bytes()));
        }
        bytes
    }

    #[test]
    fn a_binary_tsvector_gives_each_wanted_lexemes_positions() {
        let bytes =
            tsvector(&[("bill", &[1, 5]), ("it's", &[3]), ("plain", &[]), ("zed", &[7]), ("émigré", &[2])]);
        let terms = Terms::of(&bytes, &["absent", "bill", "it's", "plain", "émigré"]).unwrap();
        assert_eq!(terms.counts, [0, 2, 1, 1, 1]);
        assert_eq!(terms.length, 5);
        assert_eq!(Terms::of(&tsvector(&[]), &["bill"]).unwrap().length, 0);
    }

    #[test]
    fn bytes_that_are_not_a_tsvector_are_refused() {
        let bytes = tsvector(&[("bill", &[1, 5])]);
        assert!(Terms::of(&bytes[..bytes.len() - 1], &["bill"]).is_none());
        assert!(Terms::of(&[0, 0, 0, 9, b'a'], &["bill"]).is_none());
        assert!(Terms::of(&[0, 0], &["bill"]).is_none());
        assert!(Terms::of(&[&bytes[..], &[1]].concat(), &["bill"]).is_none());
    }
}
