//! Search over messages, summaries and memories: the keyword query ([`TextQuery`]) and its
//! [`SearchFilter`], the hits ([`TextHit`], [`HitId`], [`HitKind`]), the candidates a ranked
//! search is built from ([`CandidateQuery`], [`Candidates`], [`WordStatistics`]), the
//! [`STOPWORDS`], and how a vector query scans ([`Scan`]).
//!
//! Also what every backend ranks alike: bm25 over the rows' terms (`bm25.rs`), how `memory_grep`
//! orders what it found and folds case and accents (`grep.rs`), and the recalled block's hits
//! (`recalled.rs`).
//!
//! Whatever text arrives here (from a user or from a model) is parsed into plain fragments; a
//! backend hands them to its index only as quoted strings or bound patterns, so that operators
//! in the text lose their meaning.

mod bm25;
mod grep;
mod ranked;
mod recalled;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::types::{Category, Level, MemoryId, MessageId, NodeId, SessionId};

pub use bm25::{RowTerms, bm25, idf};
pub use grep::{fold, rank_grep_hits};
pub use ranked::{CandidateQuery, Candidates, WordStatistics};
pub use recalled::{Recalled, RecalledHit};

pub use crate::vectors::Scan;

/// Most fragments a query may have; more are dropped (the search only gets broader).
pub const MAX_TERMS: usize = 32;
/// Most characters per fragment.
const MAX_TERM_CHARS: usize = 200;
/// The trigram index only helps for fragments of three characters or more.
pub const TRIGRAM: usize = 3;

/// A parsed keyword query: fragments that must all appear, case-insensitively, in any order.
///
/// - Words separated by spaces are separate fragments.
/// - `"quoted text"` is one fragment, spaces included.
/// - `*` stands for any text, so it splits a word into fragments (`merg*` finds `merge`,
///   `merging`; `err*timeout` needs both pieces).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextQuery {
    pub(crate) terms: Vec<String>,
}

impl TextQuery {
    /// No fragments: what a listing without words (a bare `*`) searches with.
    pub const EMPTY: TextQuery = TextQuery { terms: Vec::new() };

    /// Parses query text. Fails only when nothing searchable is left (e.g. `*` or `""`).
    pub fn parse(input: &str) -> Result<TextQuery> {
        // Control characters (NUL included, which would end the FTS5 string early) separate
        // fragments like spaces do.
        let input: &str = &input.replace(|c: char| c.is_control(), " ");
        let mut terms = Vec::new();
        let mut push = |text: &str| {
            for fragment in text.split('*') {
                let fragment = fragment.split_whitespace().collect::<Vec<_>>().join(" ");
                if !fragment.is_empty() && terms.len() < MAX_TERMS {
                    terms.push(fragment.chars().take(MAX_TERM_CHARS).collect::<String>());
                }
            }
        };
        let mut rest = input;
        while let Some(quote) = rest.find('"') {
            rest[..quote].split_whitespace().for_each(&mut push);
            let after = &rest[quote + 1..];
            let end = after.find('"').unwrap_or(after.len());
            push(&after[..end]);
            rest = after.get(end + 1..).unwrap_or("");
        }
        rest.split_whitespace().for_each(&mut push);
        terms.dedup();
        if terms.is_empty() {
            return Err(Error::invalid("query", "has no searchable text (only spaces, quotes or `*`)"));
        }
        Ok(TextQuery { terms })
    }

    /// The fragments, in order.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }
}

/// Common English function words, a generic list fitted to no data: left out of the words a
/// question ranks by (`memory_search`) and of the words an answer is checked by (evaluations).
pub const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "being", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "for", "from",
    "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "just", "me", "my", "no", "nor", "not", "of", "off", "on", "once", "only",
    "or", "other", "our", "ours", "out", "over", "own", "same", "she", "should", "so", "some", "such",
    "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they", "this", "those",
    "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where",
    "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// What a hit is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HitKind {
    /// A stored message.
    Message,
    /// A summary node.
    Summary,
    /// An agent memory.
    Memory,
}

impl HitKind {
    /// Every kind.
    pub const ALL: [HitKind; 3] = [HitKind::Message, HitKind::Summary, HitKind::Memory];

    /// The name used in tool answers.
    pub fn as_str(self) -> &'static str {
        match self {
            HitKind::Message => "message",
            HitKind::Summary => "summary",
            HitKind::Memory => "memory",
        }
    }
}

/// What a search found, by its typed id. In JSON it is two fields, `kind` and `id`
/// (`{"kind": "summary", "id": 17}`), the shape the tools answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum HitId {
    /// A stored message.
    Message(MessageId),
    /// A summary node.
    Summary(NodeId),
    /// An agent memory.
    Memory(MemoryId),
}

impl HitId {
    /// The id `id` of a row of `kind`'s table.
    pub fn new(kind: HitKind, id: i64) -> HitId {
        match kind {
            HitKind::Message => HitId::Message(MessageId(id)),
            HitKind::Summary => HitId::Summary(NodeId(id)),
            HitKind::Memory => HitId::Memory(MemoryId(id)),
        }
    }

    /// What it is.
    pub fn kind(self) -> HitKind {
        match self {
            HitId::Message(_) => HitKind::Message,
            HitId::Summary(_) => HitKind::Summary,
            HitId::Memory(_) => HitKind::Memory,
        }
    }

    /// The row id in its kind's table.
    pub fn raw(self) -> i64 {
        match self {
            HitId::Message(MessageId(id)) | HitId::Summary(NodeId(id)) | HitId::Memory(MemoryId(id)) => id,
        }
    }
}

impl std::fmt::Display for HitId {
    /// `message 812`, `summary 17`, `memory 3`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind().as_str(), self.raw())
    }
}

/// Restricts a search.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchFilter {
    /// Only this persona's rows. Always set: there is no cross-persona search.
    pub persona: String,
    /// Only this session's messages and summaries (memories belong to the persona, not a session).
    pub session: Option<SessionId>,
    /// Inclusive lower time bound.
    pub start: Option<DateTime<Utc>>,
    /// Exclusive upper time bound.
    pub end: Option<DateTime<Utc>>,
    /// Which kinds to search.
    pub kinds: Vec<HitKind>,
    /// Most hits per kind.
    pub limit: usize,
}

impl SearchFilter {
    /// Whether the search spans the persona's every row (no session, no time range): then
    /// the rows it reads also tell the persona's word statistics.
    pub fn whole_persona(&self) -> bool {
        self.session.is_none() && self.start.is_none() && self.end.is_none()
    }

    /// Every kind of one persona, up to 20 hits.
    pub fn persona(persona: impl Into<String>) -> SearchFilter {
        SearchFilter {
            persona: persona.into(),
            session: None,
            start: None,
            end: None,
            kinds: vec![HitKind::Message, HitKind::Summary, HitKind::Memory],
            limit: 20,
        }
    }
}

/// One keyword hit.
#[derive(Clone, Debug, PartialEq)]
pub struct TextHit {
    /// What was found: its kind and its id.
    pub id: HitId,
    /// The session of a message or summary.
    pub session_id: Option<SessionId>,
    /// That session's key.
    pub session: Option<String>,
    /// Position of a message in its session.
    pub seq: Option<i64>,
    /// Message role, or `summary`/`memory`.
    pub role: String,
    /// Level of a summary node.
    pub level: Option<Level>,
    /// Category of a memory.
    pub category: Option<Category>,
    /// Key of a memory.
    pub key: Option<String>,
    /// Message time, summary end time, or memory update time.
    pub timestamp: DateTime<Utc>,
    /// The speaker of a message, when it was given a name (`name`): who said it, which the
    /// ranking matches against the people a question names and the recalled block shows
    /// without reading the message again.
    pub speaker: Option<String>,
    /// The row's whole text: a message's content, a summary's
    /// headline and body, a memory's `title: content`. The tools cut the excerpt they show.
    pub snippet: String,
    /// How well the hit matches, negated so that lower is better (see
    /// [`Search::grep`](crate::Search::grep)); zero for hits not found by keywords.
    pub rank: f64,
}

impl TextHit {
    /// What was found: a message, a summary or a memory.
    pub fn kind(&self) -> HitKind {
        self.id.kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(input: &str) -> Vec<String> {
        TextQuery::parse(input).unwrap().terms().to_vec()
    }

    #[test]
    fn words_phrases_and_wildcards() {
        assert_eq!(terms("Merge  conflict"), ["Merge", "conflict"]);
        assert_eq!(terms(r#"the "merge conflict" again"#), ["the", "merge conflict", "again"]);
        assert_eq!(terms("merg*"), ["merg"]);
        assert_eq!(terms("err*timeout"), ["err", "timeout"]);
        assert_eq!(terms(r#"unterminated "quote here"#), ["unterminated", "quote here"]);
        assert_eq!(terms("数据库 迁移"), ["数据库", "迁移"]);
    }

    #[test]
    fn nothing_searchable_is_an_error() {
        for input in ["", "   ", "*", "\"\"", "* * *", "\" \""] {
            let err = TextQuery::parse(input).unwrap_err();
            assert!(err.to_string().contains("no searchable text"), "{input:?}: {err}");
        }
    }

    #[test]
    fn huge_input_is_capped() {
        let input = "word ".repeat(5000) + &"x".repeat(10_000);
        let query = TextQuery::parse(&input).unwrap();
        assert!(query.terms().len() <= MAX_TERMS);
        assert!(query.terms().iter().all(|t| t.chars().count() <= MAX_TERM_CHARS));
    }
}
