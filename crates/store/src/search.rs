//! Keyword search over messages, summaries and memories (FTS5, trigram tokenizer).
//!
//! Whatever text arrives here (from a user or from a model) is parsed into plain fragments and
//! handed to FTS5 only as quoted strings or as bound `LIKE` patterns: FTS operators such as
//! `NEAR`, `OR`, `-`, `^`, column filters and parentheses lose their meaning.

use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{Connection, params_from_iter};
use serde::Serialize;

use unicode_normalization::UnicodeNormalization;

use crate::error::{Error, Result};
use crate::search_index::Deferred;
use crate::types::{Category, Level, MemoryId, MessageId, NodeId, SessionId, from_unix, to_unix};

/// Most fragments a query may have; more are dropped (the search only gets broader).
const MAX_TERMS: usize = 32;
/// Most characters per fragment.
const MAX_TERM_CHARS: usize = 200;
/// The trigram index only helps for fragments of three characters or more.
const TRIGRAM: usize = 3;

/// A parsed keyword query: fragments that must all appear, case-insensitively, in any order.
///
/// - Words separated by spaces are separate fragments.
/// - `"quoted text"` is one fragment, spaces included.
/// - `*` stands for any text, so it splits a word into fragments (`merg*` finds `merge`,
///   `merging`; `err*timeout` needs both pieces).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextQuery {
    terms: Vec<String>,
}

impl TextQuery {
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

    /// The FTS5 MATCH expression for the long fragments: each one a quoted string, joined by
    /// spaces (implicit AND). `None` when every fragment is too short for the trigram index.
    pub fn match_expression(&self) -> Option<String> {
        let quoted: Vec<String> = self
            .terms
            .iter()
            .filter(|term| term.chars().count() >= TRIGRAM)
            .map(|term| quoted(term))
            .collect();
        (!quoted.is_empty()).then(|| quoted.join(" "))
    }

    /// `LIKE` patterns (escape character `\`) for the fragments too short for the index.
    pub fn like_patterns(&self) -> Vec<String> {
        self.terms
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
fn quoted(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
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
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TextHit {
    /// What was found (serialized as `kind` and `id`).
    #[serde(flatten)]
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
    /// The matching text with matches between `«` and `»`.
    pub snippet: String,
    /// How well the hit matches, negated so that lower is better (see
    /// [`Store::grep`](crate::Store::grep)); zero for hits not found by keywords.
    pub rank: f64,
}

impl TextHit {
    /// What was found: a message, a summary or a memory.
    pub fn kind(&self) -> HitKind {
        self.id.kind()
    }

    /// A hit from a row of the shape every search query selects: id, session id, session key,
    /// seq, role, level, category, key, time, snippet, and the rank at `rank_column` (zero
    /// when the query has none).
    pub(crate) fn from_row(
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
            snippet: row.get(9)?,
            rank: match rank_column {
                Some(column) => row.get(column)?,
                None => 0.0,
            },
        })
    }
}

struct KindSql {
    fts: &'static str,
    select: &'static str,
    from: &'static str,
    time: &'static str,
    session: &'static str,
    persona: &'static str,
    /// The columns the short-fragment `LIKE`s test (any of them may hold the fragment).
    text_columns: &'static [&'static str],
    /// The rows written before they are indexed, if the kind has any (see `search_index.rs`).
    tail: Option<TailSql>,
}

/// How `grep` reads the rows of a kind past its index cursor: the base tables alone, aliased
/// as in [`KindSql::select`], so the same selection, filters and short-fragment `LIKE`s apply.
struct TailSql {
    deferred: Deferred,
    from: &'static str,
    id: &'static str,
    text_columns: &'static [&'static str],
}

const MESSAGES: KindSql = KindSql {
    fts: "messages_fts",
    select: "m.id, m.session_id, s.key, m.seq, m.role, NULL, NULL, NULL, m.created_at, \
             m.content",
    from: "messages_fts JOIN messages m ON m.id = messages_fts.rowid JOIN sessions s ON s.id = m.session_id",
    time: "m.created_at",
    session: "m.session_id",
    persona: "s.role",
    text_columns: &["messages_fts.content"],
    tail: Some(TailSql {
        deferred: Deferred::Messages,
        from: "messages m JOIN sessions s ON s.id = m.session_id",
        id: "m.id",
        text_columns: &["m.content"],
    }),
};

const SUMMARIES: KindSql = KindSql {
    fts: "summaries_fts",
    select: "n.id, n.session_id, s.key, NULL, 'summary', n.level, NULL, NULL, n.end_time, \
             n.headline || char(10) || n.body",
    from: "summaries_fts JOIN summary_nodes n ON n.id = summaries_fts.rowid JOIN sessions s ON s.id = n.session_id",
    time: "n.end_time",
    session: "n.session_id",
    persona: "s.role",
    text_columns: &["summaries_fts.headline", "summaries_fts.body"],
    tail: Some(TailSql {
        deferred: Deferred::Summaries,
        from: "summary_nodes n JOIN sessions s ON s.id = n.session_id",
        id: "n.id",
        text_columns: &["n.headline", "n.body"],
    }),
};

const MEMORIES: KindSql = KindSql {
    fts: "memories_fts",
    select: "a.id, NULL, NULL, NULL, 'memory', NULL, a.category, a.key, a.updated_at, \
             a.key || ' ' || a.title || ': ' || a.content",
    from: "memories_fts JOIN agent_memories a ON a.id = memories_fts.rowid",
    time: "a.updated_at",
    session: "NULL",
    persona: "a.role",
    text_columns: &["memories_fts.key", "memories_fts.title", "memories_fts.content"],
    // Memories are indexed by triggers, in the transaction that writes them.
    tail: None,
};

fn kind_sql(kind: HitKind) -> &'static KindSql {
    match kind {
        HitKind::Message => &MESSAGES,
        HitKind::Summary => &SUMMARIES,
        HitKind::Memory => &MEMORIES,
    }
}

/// Keyword search, best match first (ties: newest first), ranked among the newest 256 rows of
/// each kind that match (more when the limit is larger); see [`match_score`].
pub fn grep(conn: &Connection, query: &TextQuery, filter: &SearchFilter) -> Result<Vec<TextHit>> {
    let mut hits = Vec::new();
    for &kind in &filter.kinds {
        let sql = kind_sql(kind);
        if kind == HitKind::Memory && filter.session.is_some() {
            continue;
        }
        grep_kind(conn, kind, sql, query, filter, &mut hits)?;
    }
    hits.sort_by(|a, b| a.rank.total_cmp(&b.rank).then(b.timestamp.cmp(&a.timestamp)));
    Ok(hits)
}

fn grep_kind(
    conn: &Connection,
    kind: HitKind,
    sql: &KindSql,
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
    let mut found = match (&sql.tail, &match_expression) {
        (Some(tail), Some(_)) => grep_tail(conn, kind, sql, tail, query, filter, wanted)?,
        _ => Vec::new(),
    };
    if found.len() < wanted {
        let (mut conditions, mut values) = filters(sql, sql.text_columns, query, filter);
        if let Some(expression) = match_expression {
            conditions.push(format!("{} MATCH ?", sql.fts));
            values.push(Value::Text(expression));
        }
        values.push(Value::Integer((wanted - found.len()) as i64));
        // The newest GREP_SCAN_ROWS matching rows, newest first: FTS5 walks its index that way
        // and stops there, so a word in most of a million rows costs what a rare one does.
        // They are ranked here, not by FTS5's bm25(), which counts every row holding each
        // phrase (the whole index for a common word: 100 ms at 1,000,000 messages) before it
        // scores the first one.
        let statement = format!(
            "SELECT {select}, 0.0 FROM {from} WHERE {conditions} ORDER BY {fts}.rowid DESC LIMIT ?",
            select = sql.select,
            from = sql.from,
            conditions = conditions.join(" AND "),
            fts = sql.fts,
        );
        let mut stmt = conn.prepare_cached(&statement)?;
        let rows = stmt.query_map(params_from_iter(values), |row| TextHit::from_row(kind, row, Some(10)))?;
        for hit in rows {
            found.push(hit?);
        }
    }
    let terms: Vec<String> = query.terms().iter().map(|term| term.to_lowercase()).collect();
    for hit in &mut found {
        hit.rank = -match_score(&hit.snippet, &terms);
    }
    // Best first, then newest (the rows arrive newest first and the sort is stable).
    found.sort_by(|a, b| a.rank.total_cmp(&b.rank));
    found.truncate(limit);
    for mut hit in found {
        // The query selects the whole text; the excerpt is cut here, in time linear in what it
        // scans (FTS5's snippet() is quadratic on long runs of one character).
        hit.snippet = excerpt(&hit.snippet, query.terms(), EXCERPT_CHARS);
        hits.push(hit);
    }
    Ok(())
}

/// The persona, time, session and short-fragment conditions of a grep, with their values.
/// The statement text depends only on the shape of the query (how many short fragments);
/// every value, the user's text included, is a bound parameter.
fn filters(
    sql: &KindSql,
    text_columns: &[&str],
    query: &TextQuery,
    filter: &SearchFilter,
) -> (Vec<String>, Vec<Value>) {
    let mut conditions = vec![format!("{} = ?", sql.persona)];
    let mut values: Vec<Value> = vec![Value::Text(filter.persona.clone())];
    for pattern in query.like_patterns() {
        let any_column: Vec<String> =
            text_columns.iter().map(|column| format!("{column} LIKE ? ESCAPE '\\'")).collect();
        conditions.push(format!("({})", any_column.join(" OR ")));
        values.extend(text_columns.iter().map(|_| Value::Text(pattern.clone())));
    }
    if let Some(start) = filter.start {
        conditions.push(format!("{} >= ?", sql.time));
        values.push(Value::Real(to_unix(start)));
    }
    if let Some(end) = filter.end {
        conditions.push(format!("{} < ?", sql.time));
        values.push(Value::Real(to_unix(end)));
    }
    if let Some(session) = filter.session {
        conditions.push(format!("{} = ?", sql.session));
        values.push(Value::Integer(session.0));
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
    kind: HitKind,
    sql: &KindSql,
    tail: &TailSql,
    query: &TextQuery,
    filter: &SearchFilter,
    wanted: usize,
) -> Result<Vec<TextHit>> {
    let (mut conditions, values) = filters(sql, tail.text_columns, query, filter);
    conditions.push(tail.deferred.tail_condition(tail.id));
    let statement = format!(
        "SELECT {select}, 0.0 FROM {from} WHERE {conditions} ORDER BY {id} DESC",
        select = sql.select,
        from = tail.from,
        conditions = conditions.join(" AND "),
        id = tail.id,
    );
    let long_terms: Vec<String> =
        query.terms().iter().filter(|term| term.chars().count() >= TRIGRAM).map(|term| fold(term)).collect();
    let mut stmt = conn.prepare_cached(&statement)?;
    let mut rows = stmt.query(params_from_iter(values))?;
    let mut found = Vec::new();
    while found.len() < wanted
        && let Some(row) = rows.next()?
    {
        let hit = TextHit::from_row(kind, row, Some(10))?;
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
fn fold(text: &str) -> String {
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
    let mut conditions = vec!["s.role = ?".to_owned()];
    let mut values: Vec<Value> = vec![Value::Text(filter.persona.clone())];
    if let Some(start) = filter.start {
        conditions.push("m.created_at >= ?".to_owned());
        values.push(Value::Real(to_unix(start)));
    }
    if let Some(end) = filter.end {
        conditions.push("m.created_at < ?".to_owned());
        values.push(Value::Real(to_unix(end)));
    }
    if let Some(session) = filter.session {
        conditions.push("m.session_id = ?".to_owned());
        values.push(Value::Integer(session.0));
    }
    values.push(Value::Integer(filter.limit.min(1000) as i64));
    values.push(Value::Integer(offset.min(i64::MAX as usize) as i64));
    let order = if oldest_first { "ASC" } else { "DESC" };
    let statement = format!(
        "SELECT {select}, 0.0 FROM messages m JOIN sessions s ON s.id = m.session_id WHERE {conditions} \
         ORDER BY m.created_at {order}, m.id {order} LIMIT ? OFFSET ?",
        select = MESSAGES.select,
        conditions = conditions.join(" AND "),
    );
    let mut stmt = conn.prepare_cached(&statement)?;
    let rows =
        stmt.query_map(params_from_iter(values), |row| TextHit::from_row(HitKind::Message, row, Some(10)))?;
    rows.map(|hit| {
        let mut hit = hit?;
        hit.snippet = crate::text::truncate_chars(&hit.snippet, EXCERPT_CHARS);
        Ok(hit)
    })
    .collect()
}

/// How well a text matches a grep: for each (lowercased) term, its occurrences saturated as
/// bm25 saturates term frequency (k1 = 1.2) and divided by the text's length relative to a
/// 100-word message (b = 0.75), summed over the terms. Every term is in every candidate, so
/// the terms weigh alike. Linear in the text, at most [`EXCERPT_SCAN_BYTES`] of it.
fn match_score(text: &str, terms: &[String]) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    const TYPICAL_WORDS: f64 = 100.0;
    let mut end = text.len().min(EXCERPT_SCAN_BYTES);
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

/// Characters of text a grep hit shows around its first match.
const EXCERPT_CHARS: usize = 300;
/// Bytes of a text scanned for a match to show; a match further in shows the text's start.
const EXCERPT_SCAN_BYTES: usize = 1 << 20;

/// A window of about `max` characters of `text` around the first case-insensitive occurrence of
/// any of `terms`, every occurrence in it marked `«…»`, cut at spaces where there are any, with
/// `…` where text is left out. Work is linear in the text scanned, at most
/// [`EXCERPT_SCAN_BYTES`].
pub fn excerpt(text: &str, terms: &[String], max: usize) -> String {
    let scanned = crate::text::prefix_within_bytes(text, EXCERPT_SCAN_BYTES);
    // Lowercase byte for byte (ASCII) so positions stay valid; other scripts match as written,
    // which is what FTS5's case folding does for the characters lowercase() would change.
    let lower = scanned.to_ascii_lowercase();
    let terms: Vec<String> = terms.iter().map(|t| t.to_ascii_lowercase()).filter(|t| !t.is_empty()).collect();
    let first = terms.iter().filter_map(|term| lower.find(term.as_str())).min();
    let boundary = |mut at: usize| {
        while !scanned.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let (start, end) = match first {
        Some(at) => {
            let before: usize = scanned[..at].chars().rev().take(max / 3).map(char::len_utf8).sum();
            let mut start = at - before;
            if start > 0 {
                // Start at a word when there is a space in reach.
                start = scanned[start..at].find(' ').map_or(start, |n| start + n + 1);
            }
            let after: usize = scanned[start..].chars().take(max).map(char::len_utf8).sum();
            (start, boundary(start + after))
        }
        None => (0, boundary(scanned.chars().take(max).map(char::len_utf8).sum())),
    };
    let mut end = end;
    if end < scanned.len()
        && let Some(space) = scanned[start..end].rfind(' ').filter(|&n| n > (end - start) / 2)
    {
        end = start + space;
    }
    let mut shown = String::with_capacity(end - start + 16);
    if start > 0 {
        shown.push('…');
    }
    let window = &lower[start..end];
    let mut at = 0;
    while at < window.len() {
        let found = terms
            .iter()
            .filter_map(|term| window[at..].find(term.as_str()).map(|n| (at + n, term.len())))
            .min_by_key(|&(position, len)| (position, std::cmp::Reverse(len)));
        let Some((position, len)) = found else { break };
        shown.push_str(&scanned[start + at..start + position]);
        shown.push('«');
        shown.push_str(&scanned[start + position..start + position + len]);
        shown.push('»');
        at = position + len;
    }
    shown.push_str(&scanned[start + at..end]);
    if end < text.len() {
        shown.push('…');
    }
    shown
}

/// The word index of each kind and how its rows join their owners (see schema 0003).
struct WordSql {
    fts: &'static str,
    from: &'static str,
    time: &'static str,
    session: Option<&'static str>,
    persona: &'static str,
}

fn word_sql(kind: HitKind) -> WordSql {
    match kind {
        HitKind::Message => WordSql {
            fts: "messages_words",
            from: "messages_words JOIN messages m ON m.id = messages_words.rowid \
                   JOIN sessions s ON s.id = m.session_id",
            time: "m.created_at",
            session: Some("m.session_id"),
            persona: "s.role",
        },
        HitKind::Summary => WordSql {
            fts: "summaries_words",
            from: "summaries_words JOIN summary_nodes n ON n.id = summaries_words.rowid \
                   JOIN sessions s ON s.id = n.session_id",
            time: "n.end_time",
            session: Some("n.session_id"),
            persona: "s.role",
        },
        HitKind::Memory => WordSql {
            fts: "memories_words",
            from: "memories_words JOIN agent_memories a ON a.id = memories_words.rowid",
            time: "a.updated_at",
            session: None,
            persona: "a.role",
        },
    }
}

/// Matching rows `memory_grep` ranks per kind, newest first. Each costs two primary-key
/// lookups (persona, time) and a scan of its text; 256 keep grep within a few milliseconds
/// while a page of results is still the best of a few hundred.
const GREP_SCAN_ROWS: i64 = 256;

/// Matching rows `memory_search`'s keyword side ranks per kind, newest first; see
/// [`rank_words`]. Each costs two primary-key lookups (the persona is the session's): at
/// 100,000 messages 4,096 of them took about 15 ms of a 30 ms budget, 1,024 about a quarter.
const RANK_SCAN_ROWS: i64 = 1024;

/// Ranks the rows of `kind` that hold any of `words` by bm25 over the word index (Porter
/// stemmed, so `painting` finds `painted`): (id, score, higher is better), best first, at most
/// `filter.limit`, within the filter's persona, session and time range, among the newest
/// 1,024 rows that match (a bounded cost however common the words). Memories have no
/// session: with a session filter they are not searched. Each word is passed to FTS5 as a
/// quoted string, so no operator in it has any effect.
pub fn rank_words(
    conn: &Connection,
    kind: HitKind,
    words: &[String],
    filter: &SearchFilter,
) -> Result<Vec<(i64, f64)>> {
    let words: Vec<String> =
        words.iter().filter(|w| !w.trim().is_empty()).take(MAX_TERMS).map(|w| quoted(w)).collect();
    let sql = word_sql(kind);
    if words.is_empty() || (filter.session.is_some() && sql.session.is_none()) {
        return Ok(Vec::new());
    }
    let mut conditions = vec![format!("{} MATCH ?", sql.fts), format!("{} = ?", sql.persona)];
    let mut values = vec![Value::Text(words.join(" OR ")), Value::Text(filter.persona.clone())];
    if let (Some(session), Some(column)) = (filter.session, sql.session) {
        conditions.push(format!("{column} = ?"));
        values.push(Value::Integer(session.0));
    }
    if let Some(start) = filter.start {
        conditions.push(format!("{} >= ?", sql.time));
        values.push(Value::Real(to_unix(start)));
    }
    if let Some(end) = filter.end {
        conditions.push(format!("{} < ?", sql.time));
        values.push(Value::Real(to_unix(end)));
    }
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
        fts = sql.fts,
        from = sql.from,
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
pub fn word_frequencies(
    conn: &Connection,
    kind: HitKind,
    words: &[String],
    cap: usize,
) -> Result<(u64, Vec<u64>)> {
    let sql = word_sql(kind);
    let (table, id) = match kind {
        HitKind::Message => ("messages", "id"),
        HitKind::Summary => ("summary_nodes", "id"),
        HitKind::Memory => ("agent_memories", "id"),
    };
    let rows: Option<i64> =
        conn.prepare_cached(&format!("SELECT max({id}) FROM {table}"))?.query_row([], |row| row.get(0))?;
    let statement =
        format!("SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ?1 LIMIT ?2)", fts = sql.fts);
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

    #[test]
    fn excerpts_mark_every_match_in_a_window() {
        let terms = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let text =
            format!("{} the Merge conflict again, merge it {}", "word ".repeat(200), "tail ".repeat(200));
        let shown = excerpt(&text, &terms(&["merge"]), 80);
        assert!(shown.contains("«Merge» conflict again, «merge» it"), "{shown}");
        assert!(shown.starts_with('…') && shown.ends_with('…') && shown.chars().count() <= 84, "{shown}");
        assert_eq!(excerpt("short text", &terms(&["zzz"]), 80), "short text");
        assert_eq!(excerpt("数据库迁移完成", &terms(&["迁移"]), 80), "数据库«迁移»完成");
    }

    #[test]
    fn match_scores_favour_repeats_and_short_texts() {
        let terms = ["deploy".to_owned()];
        let once = match_score("we deploy today", &terms);
        let twice = match_score("Deploy now, deploy often", &terms);
        let long = match_score(&format!("we deploy {}", "filler ".repeat(300)), &terms);
        assert!(twice > once && once > long && long > 0.0, "{twice} {once} {long}");
        assert_eq!(match_score("nothing here", &terms), 0.0);
    }

    /// Regression: FTS5's snippet() took minutes on one long run of a single character.
    #[test]
    fn excerpts_of_huge_runs_are_linear() {
        let text = "x".repeat(10 << 20);
        let shown = excerpt(&text, &["xxx".to_owned()], 300);
        assert!(shown.starts_with("«xxx»") && shown.chars().count() < 1_000, "{}", shown.len());
        assert!(shown.ends_with('…'));
    }

    #[test]
    fn folding_takes_off_case_and_diacritics_as_the_trigram_index_does() {
        assert_eq!(fold("Café ZÜRICH"), "cafe zurich");
        assert_eq!(fold("Ärger über Ölpreise"), "arger uber olpreise");
        assert_eq!(fold("数据库 Ωmega"), "数据库 ωmega");
    }

    #[test]
    fn huge_input_is_capped() {
        let input = "word ".repeat(5000) + &"x".repeat(10_000);
        let query = TextQuery::parse(&input).unwrap();
        assert!(query.terms().len() <= MAX_TERMS);
        assert!(query.terms().iter().all(|t| t.chars().count() <= MAX_TERM_CHARS));
    }
}
