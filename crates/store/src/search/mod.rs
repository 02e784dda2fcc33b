//! Search as SQLite runs it: `memory_grep` over the trigram indexes (`grep.rs`),
//! `memory_search`'s keyword side, bm25 over the word indexes (`words.rs`), the deferred
//! indexing behind both (`index.rs`), and the candidates (`ranked.rs`). The query, filter and
//! hit types are the seam's (`strata_seam::search`).
//!
//! Whatever text arrives here (from a user or from a model) is parsed into plain fragments and
//! handed to FTS5 only as quoted strings or as bound `LIKE` patterns: FTS operators such as
//! `NEAR`, `OR`, `-`, `^`, column filters and parentheses lose their meaning.

pub(crate) mod grep;
pub(crate) mod index;
pub(crate) mod ranked;
mod words;

pub(crate) use grep::{grep, said_between};
pub(crate) use strata_seam::search::*;
use words::{count_words_in, read_words_in};

use crate::types::from_unix;

/// A query as FTS5 and `LIKE` read it.
pub(crate) trait QuerySql {
    /// The FTS5 MATCH expression for the long fragments; `None` when every fragment is too
    /// short for the trigram index.
    fn match_expression(&self) -> Option<String>;
    /// `LIKE` patterns (escape character `\`) for the fragments too short for the index.
    fn like_patterns(&self) -> Vec<String>;
}

impl QuerySql for TextQuery {
    /// The FTS5 MATCH expression for the long fragments: each one a quoted string, joined by
    /// spaces (implicit AND). `None` when every fragment is too short for the trigram index.
    fn match_expression(&self) -> Option<String> {
        let quoted: Vec<String> = self
            .terms()
            .iter()
            .filter(|term| term.chars().count() >= TRIGRAM)
            .map(|term| quoted(term))
            .collect();
        (!quoted.is_empty()).then(|| quoted.join(" "))
    }

    /// `LIKE` patterns (escape character `\`) for the fragments too short for the index.
    fn like_patterns(&self) -> Vec<String> {
        self.terms()
            .iter()
            .filter(|term| term.chars().count() < TRIGRAM)
            .map(|term| {
                let escaped = term.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
                format!("%{escaped}%")
            })
            .collect()
    }
}

/// A fragment as an FTS5 string: in double quotes, inner quotes doubled, so that nothing in it
/// is an operator.
pub(crate) fn quoted(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// A hit as SQLite reads it.
pub(crate) trait HitRow: Sized {
    /// A hit from a row of the shape every search query selects: id, session id, session key,
    /// seq, role, level, category, key, time, name, snippet, and the rank at `rank_column` (zero
    /// when the query has none).
    fn from_row(kind: HitKind, row: &rusqlite::Row<'_>, rank_column: Option<usize>)
    -> rusqlite::Result<Self>;
}

impl HitRow for TextHit {
    fn from_row(
        kind: HitKind,
        row: &rusqlite::Row<'_>,
        rank_column: Option<usize>,
    ) -> rusqlite::Result<TextHit> {
        let category: Option<String> = row.get(6)?;
        Ok(TextHit {
            id: HitId::new(kind, row.get(0)?),
            session_id: row.get(1)?,
            session: row.get(2)?,
            seq: row.get(3)?,
            role: row.get(4)?,
            level: row.get(5)?,
            category: category.and_then(|c| c.parse().ok()),
            key: row.get(7)?,
            timestamp: from_unix(row.get(8)?),
            speaker: row.get(9)?,
            snippet: row.get(10)?,
            rank: match rank_column {
                Some(column) => row.get(column)?,
                None => 0.0,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts_operators_are_quoted() {
        let query = TextQuery::parse(r#"a OR b NEAR(c d) -e col:f "g""h" ^i"#).unwrap();
        assert_eq!(query.match_expression().unwrap(), r#""NEAR(c" "col:f""#);
        let query = TextQuery::parse(r#"say "it's ""quoted"" ok""#).unwrap();
        for term in query.match_expression().unwrap().split("\" \"") {
            assert_eq!(term.trim_matches('"').matches('"').count() % 2, 0, "{term}");
        }
    }

    #[test]
    fn short_fragments_become_escaped_like_patterns() {
        let query = TextQuery::parse("a% _b 迁移 longer").unwrap();
        assert_eq!(query.like_patterns(), [r"%a\%%", r"%\_b%", "%迁移%"]);
        assert_eq!(query.match_expression().unwrap(), "\"longer\"");
    }
}
