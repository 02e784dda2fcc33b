//! `memory_grep` (keywords) and `memory_search` (meaning, fused with keywords).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use strata_store::{Category, HitKind, Level, SearchFilter, Store, TextHit, TextQuery};

use super::{EmbedderState, MemoryGrepArgs, MemorySearchArgs, Scope};
use crate::config::RecallConfig;
use crate::error::{Error, Result};
use crate::time::{TimeRange, parse_range};

/// Longest query text accepted; longer text is cut (a search does not need a novel).
const MAX_QUERY_CHARS: usize = 2000;

/// One search result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    /// `message`, `summary` or `memory`.
    pub kind: HitKind,
    /// Message id, summary node id or memory id.
    pub id: i64,
    /// The session key of a message or summary.
    pub session: Option<String>,
    /// Position of a message in its session.
    pub seq: Option<i64>,
    /// Message time, summary end time, or memory update time.
    pub timestamp: DateTime<Utc>,
    /// Message role, or `summary` / `memory`.
    pub role: String,
    /// Level of a summary node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
    /// Category of a memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<Category>,
    /// Key of a memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The matching text: keyword matches between `«` and `»`; a semantic-only hit shows the
    /// start of its text.
    pub snippet: String,
    /// Fused relevance (memory_search only): Σ 1/(k + rank) over the semantic and keyword lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Cosine similarity to the query (memory_search, semantic candidates only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
    /// 1-based rank in the semantic list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semantic_rank: Option<usize>,
    /// 1-based rank in the keyword list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword_rank: Option<usize>,
}

impl Hit {
    fn from_text_hit(hit: TextHit) -> Hit {
        Hit {
            kind: hit.kind,
            id: hit.id,
            session: hit.session,
            seq: hit.seq,
            timestamp: hit.timestamp,
            role: hit.role,
            level: hit.level,
            category: hit.category,
            key: hit.key,
            snippet: hit.snippet,
            score: None,
            similarity: None,
            semantic_rank: None,
            keyword_rank: None,
        }
    }
}

/// The answer of `memory_grep` and `memory_search`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchAnswer {
    /// The query as understood: keyword fragments for grep, the text for search.
    pub query: Vec<String>,
    /// Results, best first.
    pub results: Vec<Hit>,
    /// How many results.
    pub count: usize,
    /// How the results are ordered.
    pub order: &'static str,
}

fn cut_query(query: &str) -> Result<String> {
    let query: String = query.chars().take(MAX_QUERY_CHARS).collect();
    if query.trim().is_empty() {
        return Err(Error::invalid("query", "is empty; say what to look for"));
    }
    Ok(query)
}

fn expired(config: &RecallConfig, hit: &TextHit, now: DateTime<Utc>) -> bool {
    hit.kind == HitKind::Memory
        && hit.category.is_some_and(|category| config.memory_ttls.is_expired(category, hit.timestamp, now))
}

/// Keyword hits within the scope, expired memories removed, best first, at most `limit`
/// per kind. Each kind is searched with its own query (`memory_search` drops the fragments
/// that are common in one kind only); a kind without a query is not searched.
fn keyword_hits(
    store: &Store,
    scope: &Scope,
    config: &RecallConfig,
    queries: &[(HitKind, Option<&TextQuery>)],
    range: TimeRange,
    limit: usize,
) -> Result<Vec<TextHit>> {
    let now = Utc::now();
    let filter = SearchFilter {
        persona: scope.persona.clone(),
        session: scope.session,
        start: range.0,
        end: range.1,
        kinds: Vec::new(),
        limit,
    };
    let mut hits = Vec::new();
    for &(kind, query) in queries {
        let Some(query) = query else { continue };
        if kind != HitKind::Memory {
            hits.extend(store.grep(query, &SearchFilter { kinds: vec![kind], ..filter.clone() })?);
            continue;
        }
        if scope.session.is_some() {
            continue;
        }
        // Expired memories are filtered here rather than in SQL; when some are dropped, ask for
        // more so that live ones behind them are not lost.
        let mut memory_limit = limit;
        loop {
            let memory_filter = SearchFilter { kinds: vec![kind], limit: memory_limit, ..filter.clone() };
            let found = store.grep(query, &memory_filter)?;
            let complete = found.len() < memory_limit || memory_limit >= 1000;
            let live: Vec<TextHit> = found.into_iter().filter(|hit| !expired(config, hit, now)).collect();
            if live.len() >= limit || complete {
                hits.extend(live.into_iter().take(limit));
                break;
            }
            memory_limit = (memory_limit * 4).min(1000);
        }
    }
    hits.sort_by(|a, b| a.rank.total_cmp(&b.rank).then(b.timestamp.cmp(&a.timestamp)));
    Ok(hits)
}

/// `memory_grep`: keyword search within `scope`, best bm25 rank first (ties: newest first).
pub fn grep(
    store: &Store,
    scope: &Scope,
    config: &RecallConfig,
    args: &MemoryGrepArgs,
) -> Result<SearchAnswer> {
    let query = TextQuery::parse(&cut_query(&args.query)?).map_err(|e| match e {
        strata_store::Error::Invalid { reason, .. } => Error::invalid("query", reason),
        other => Error::Store(other),
    })?;
    let range = parse_range(args.start_time.as_deref(), args.end_time.as_deref())?;
    let limit = config.limit(args.limit);
    let queries = [HitKind::Message, HitKind::Summary, HitKind::Memory].map(|kind| (kind, Some(&query)));
    let mut hits = keyword_hits(store, scope, config, &queries, range, limit)?;
    hits.truncate(limit);
    let results: Vec<Hit> = hits.into_iter().map(Hit::from_text_hit).collect();
    Ok(SearchAnswer {
        query: query.terms().to_vec(),
        count: results.len(),
        results,
        order: "best keyword match first (bm25), then newest",
    })
}

/// How many of the query's fragments start a word in `text` (lowercase both). A fragment inside
/// a longer word (`late` in `template`) does not count; scripts written without spaces (CJK)
/// count any occurrence, since every character there may start a word.
fn words_matched(text: &str, terms: &[String]) -> usize {
    terms
        .iter()
        .filter(|term| {
            text.match_indices(term.as_str()).any(|(at, _)| {
                text[..at].chars().next_back().is_none_or(|before| !before.is_ascii_alphanumeric())
                    || !term.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            })
        })
        .count()
}

/// Re-ranks keyword candidates for fusion: most query words matched at a word start first, then
/// bm25; candidates that match only inside other words are dropped. The trigram index is a
/// substring index, which grep wants, but as a relevance signal `late` must not find `template`.
fn rank_by_words(
    store: &Store,
    persona: &str,
    query: &TextQuery,
    hits: Vec<TextHit>,
) -> Result<Vec<TextHit>> {
    let terms: Vec<String> = query.terms().iter().map(|t| t.to_lowercase()).collect();
    let mut texts: HashMap<(HitKind, i64), String> = HashMap::new();
    for kind in [HitKind::Message, HitKind::Summary, HitKind::Memory] {
        let ids: Vec<i64> = hits.iter().filter(|h| h.kind == kind).map(|h| h.id).collect();
        for full in store.hits_by_ids(persona, kind, &ids)? {
            let text = match &full.key {
                Some(key) => format!("{key} {}", full.snippet),
                None => full.snippet,
            };
            texts.insert((kind, full.id), text.to_lowercase());
        }
    }
    let mut scored: Vec<(usize, TextHit)> = hits
        .into_iter()
        .filter_map(|hit| {
            let matched = texts.get(&(hit.kind, hit.id)).map_or(0, |text| words_matched(text, &terms));
            (matched > 0).then_some((matched, hit))
        })
        .collect();
    scored.sort_by(|a, b| {
        b.0.cmp(&a.0).then(a.1.rank.total_cmp(&b.1.rank)).then(b.1.timestamp.cmp(&a.1.timestamp))
    });
    Ok(scored.into_iter().map(|(_, hit)| hit).collect())
}

/// Common English words that would make every message a keyword candidate. Only the keyword
/// side of `memory_search` drops them (grep searches exactly what it is given), and only
/// outside quoted phrases.
const STOPWORDS: [&str; 48] = [
    "the", "and", "for", "are", "was", "were", "but", "not", "you", "your", "all", "any", "can", "had",
    "has", "have", "her", "his", "how", "its", "our", "out", "she", "they", "them", "then", "than", "that",
    "this", "these", "those", "there", "what", "when", "where", "which", "who", "why", "with", "from",
    "into", "about", "did", "does", "would", "could", "should", "been",
];

fn without_stopwords(text: &str) -> String {
    if text.contains('"') {
        return text.to_owned();
    }
    text.split_whitespace()
        .filter(|word| {
            let bare = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
            !STOPWORDS.contains(&bare.as_str())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A fragment may match this many rows of a kind before it can count as common, whatever the
/// share: ranking this many rows by bm25 costs a few milliseconds, and a small history (or a
/// test) keeps every word.
const COMMON_TERM_MIN_ROWS: usize = 1000;

/// The keyword query for one kind without the fragments found in more than
/// `keyword_common_share` of the persona's rows of that kind (and in more than
/// [`COMMON_TERM_MIN_ROWS`]); `None` when every fragment is common. Such a word says little
/// about relevance (bm25's weight for it is near zero), yet ranking the rows it matches costs
/// time in proportion to them: a few common words made the keyword side scan most of the table.
/// The dropped words still count in [`rank_by_words`], so a row matching them as well as a rarer
/// word ranks higher. Each count stops at the cut-off, so a common word costs a bounded scan.
fn without_common_terms(
    store: &Store,
    persona: &str,
    config: &RecallConfig,
    kind: HitKind,
    query: &TextQuery,
) -> Result<Option<TextQuery>> {
    let rows = store.kind_rows(kind, persona)?;
    let cap = ((rows as f64 * config.keyword_common_share) as usize).max(COMMON_TERM_MIN_ROWS);
    if rows <= cap {
        return Ok(Some(query.clone()));
    }
    let mut common = Vec::new();
    for term in query.terms() {
        if store.term_rows(kind, persona, term, cap + 1)? > cap {
            common.push(term.clone());
        }
    }
    Ok(query.without(&common))
}

/// Cuts a text to `max` characters at a character boundary, marking the cut.
pub fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The semantic candidates: nearest vectors of each kind within the persona, filtered by the
/// scope's session, the time range and memory expiry, nearest first.
fn semantic_hits(
    store: &Store,
    scope: &Scope,
    config: &RecallConfig,
    query: &[f32],
    range: TimeRange,
    wanted: usize,
) -> Result<Vec<(TextHit, f64)>> {
    let now = Utc::now();
    // vec0 filters by persona (the partition key) while searching; session and time are
    // filtered afterwards, so ask for more when they are set.
    let filtered = scope.session.is_some() || range.0.is_some() || range.1.is_some();
    let k = if filtered { wanted * 8 } else { wanted };
    let mut candidates = Vec::new();
    for kind in [HitKind::Message, HitKind::Summary, HitKind::Memory] {
        if kind == HitKind::Memory && scope.session.is_some() {
            continue;
        }
        let nearest = store.nearest(kind, &scope.persona, query, k)?;
        let distances: HashMap<i64, f64> = nearest.iter().copied().collect();
        let ids: Vec<i64> = nearest.iter().map(|(id, _)| *id).collect();
        for hit in store.hits_by_ids(&scope.persona, kind, &ids)? {
            let in_session = scope.session.is_none() || hit.session_id == scope.session;
            let in_range = range.0.is_none_or(|start| hit.timestamp >= start)
                && range.1.is_none_or(|end| hit.timestamp < end);
            if in_session && in_range && !expired(config, &hit, now) {
                let distance = distances[&hit.id];
                candidates.push((hit, distance));
            }
        }
    }
    candidates.sort_by(|a, b| a.1.total_cmp(&b.1));
    candidates.truncate(wanted);
    Ok(candidates)
}

/// `memory_search`: semantic search (all-MiniLM-L6-v2 vectors in sqlite-vec) fused with keyword
/// rank by reciprocal-rank fusion: each candidate scores Σ 1/(k + rank) over the two lists
/// (k = `rrf_k`), so an item both lists agree on rises, and an exact identifier the model
/// cannot embed well is still found. Rows not embedded yet take part through keywords only.
pub fn search(
    store: &Store,
    scope: &Scope,
    config: &RecallConfig,
    embedder: &EmbedderState,
    args: &MemorySearchArgs,
) -> Result<SearchAnswer> {
    let text = cut_query(&args.query)?;
    let range = parse_range(args.start_time.as_deref(), args.end_time.as_deref())?;
    let limit = config.limit(args.limit);
    let embedder = embedder.get()?;
    let vector = embedder.embed_one(&text)?;
    let candidates = config.search_candidates.max(limit);

    let mut semantic = semantic_hits(store, scope, config, &vector, range, candidates)?;
    // Below this similarity the model is saying "unrelated"; such rows would only dilute fusion.
    semantic.retain(|(_, distance)| 1.0 - distance >= config.min_similarity);
    let keyword = match TextQuery::parse_any(&without_stopwords(&text)) {
        Ok(query) => {
            let mut per_kind = Vec::new();
            for kind in [HitKind::Message, HitKind::Summary, HitKind::Memory] {
                per_kind.push((kind, without_common_terms(store, &scope.persona, config, kind, &query)?));
            }
            let queries: Vec<(HitKind, Option<&TextQuery>)> =
                per_kind.iter().map(|(kind, query)| (*kind, query.as_ref())).collect();
            let hits = keyword_hits(store, scope, config, &queries, range, candidates)?;
            let mut hits = rank_by_words(store, &scope.persona, &query, hits)?;
            hits.truncate(candidates);
            hits
        }
        // Only short words: the keyword side has nothing to add.
        Err(_) => Vec::new(),
    };

    let mut fused: HashMap<(HitKind, i64), Hit> = HashMap::new();
    for (rank, (hit, distance)) in semantic.into_iter().enumerate() {
        let mut entry = Hit::from_text_hit(hit);
        entry.snippet = excerpt(&entry.snippet, config.excerpt_chars);
        entry.similarity = Some(1.0 - distance);
        entry.semantic_rank = Some(rank + 1);
        entry.score = Some(1.0 / (config.rrf_k + (rank + 1) as f64));
        fused.insert((entry.kind, entry.id), entry);
    }
    for (rank, hit) in keyword.into_iter().enumerate() {
        let contribution = 1.0 / (config.rrf_k + (rank + 1) as f64);
        let key = (hit.kind, hit.id);
        match fused.get_mut(&key) {
            Some(entry) => {
                entry.score = Some(entry.score.unwrap_or(0.0) + contribution);
                entry.keyword_rank = Some(rank + 1);
                // The keyword snippet shows where the words matched.
                entry.snippet = hit.snippet;
            }
            None => {
                let mut entry = Hit::from_text_hit(hit);
                entry.keyword_rank = Some(rank + 1);
                entry.score = Some(contribution);
                fused.insert(key, entry);
            }
        }
    }
    let mut results: Vec<Hit> = fused.into_values().collect();
    results.sort_by(|a, b| {
        b.score
            .unwrap_or(0.0)
            .total_cmp(&a.score.unwrap_or(0.0))
            .then(b.similarity.unwrap_or(-1.0).total_cmp(&a.similarity.unwrap_or(-1.0)))
            .then(b.timestamp.cmp(&a.timestamp))
    });
    results.truncate(limit);
    Ok(SearchAnswer {
        query: vec![text],
        count: results.len(),
        results,
        order: "fused relevance first (reciprocal-rank fusion of semantic and keyword ranks)",
    })
}
