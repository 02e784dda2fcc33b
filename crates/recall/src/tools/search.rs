//! `memory_grep` (keywords) and `memory_search` (meaning, fused with keywords).
//!
//! `memory_search` fuses two rankings per kind (messages, summaries, memories): the nearest
//! chunk vectors within the persona and window, and bm25 over the word index. Scores are fused
//! rather than ranks (reciprocal-rank fusion gives a weak list as much say as a strong one): the
//! semantic scores min-max scaled, the keyword scores divided by the query's *ideal* score (what
//! a row holding every word once would score) before scaling, so a question whose words are
//! all common in the history does not bury the one row that answers it in other words. A hit
//! whose span overlaps a better hit's (a message and the summary covering it) is dropped and
//! named in the better hit's `also_in`. Both tools leave out the messages the calling session's
//! context already holds verbatim unless asked (`include_in_context`), and say how many.
//! The measurements behind each choice are in `benches/README.md`.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use strata_seam::search::{
    CandidateQuery, Candidates, HitId, HitKind, STOPWORDS, SearchFilter, TextHit, TextQuery, WordStatistics,
    idf,
};
use strata_seam::text::truncate_chars;
use strata_seam::{Backend, Category, Level, MessageId, NodeId};

use super::temporal::TimeQuestion;
use super::{EmbedderState, MemoryGrepArgs, MemorySearchArgs, Scope};
use crate::config::RecallConfig;
use crate::error::{Error, Result};
use crate::time::{TimeRange, parse_range};

/// Longest query text accepted; longer text is cut (a search does not need a novel).
const MAX_QUERY_CHARS: usize = 2000;

/// One search result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    /// A message, summary node or memory, by id (`kind` and `id` in JSON).
    #[serde(flatten)]
    pub id: HitId,
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
    /// Fused relevance (memory_search only): the weighted sum of the semantic and keyword
    /// scores, each scaled to 0..=1 over its side's candidates.
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
    /// How near the keyword match comes to holding every word of the query once (its bm25
    /// over that of such a row; 1 or more is a full match): an absolute measure, unlike
    /// `score`, which is relative to the other candidates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword_match: Option<f64>,
    /// Other results that hold the same part of the conversation (the summary covering a
    /// message, a message inside a summary), left out of the list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_in: Vec<HitId>,
}

impl Hit {
    /// What it is: a message, a summary or a memory.
    pub fn kind(&self) -> HitKind {
        self.id.kind()
    }

    fn from_text_hit(hit: TextHit) -> Hit {
        Hit {
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
            keyword_match: None,
            also_in: Vec::new(),
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
    /// Present when semantic search does not cover the whole history (rows not embedded yet,
    /// or vectors of another model): what was searched by keywords only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semantic_coverage: Option<Coverage>,
    /// Matching messages left out because the caller's context already holds them verbatim
    /// (the current conversation's unsummarized messages, the request just asked included);
    /// `include_in_context: true` returns them too.
    #[serde(skip_serializing_if = "is_zero")]
    pub left_out_in_context: usize,
    /// Of a bare `*` listing with more to read: the `offset` of the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

/// Message ids a tool call leaves out of its results: the ones the calling context already
/// holds verbatim. Empty when the call asked for them (`include_in_context`) or has no session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InContext(pub std::collections::HashSet<MessageId>);

impl InContext {
    /// The messages of `session` no summary covers: the head, buffer and tail the compactor
    /// assembles verbatim, the latest request included.
    pub fn of_session(store: &dyn Backend, session: strata_seam::SessionId) -> Result<InContext> {
        let outline = store.live_outline(session, 0)?;
        Ok(InContext(outline.into_iter().filter(|m| m.summary_id.is_none()).map(|m| m.id).collect()))
    }

    fn holds(&self, id: HitId) -> bool {
        matches!(id, HitId::Message(message) if self.0.contains(&message))
    }
}

pub(crate) fn cut_query(query: &str) -> Result<String> {
    let query: String = query.chars().take(MAX_QUERY_CHARS).collect();
    if query.trim().is_empty() {
        return Err(Error::invalid("query", "is empty; say what to look for"));
    }
    Ok(query)
}

fn expired(config: &RecallConfig, hit: &TextHit, now: DateTime<Utc>) -> bool {
    hit.kind() == HitKind::Memory
        && hit.category.is_some_and(|category| config.memory_ttls.is_expired(category, hit.timestamp, now))
}

/// The store filter for a scope and time range, up to `limit` hits per kind.
fn search_filter(scope: &Scope, range: TimeRange, limit: usize) -> SearchFilter {
    SearchFilter {
        persona: scope.persona.clone(),
        session: scope.session,
        start: range.0,
        end: range.1,
        kinds: Vec::new(),
        limit,
    }
}

/// Keyword hits of `query` within the scope, expired memories removed, best first, at most
/// `limit` per kind.
fn keyword_hits(
    store: &dyn Backend,
    scope: &Scope,
    config: &RecallConfig,
    query: &TextQuery,
    range: TimeRange,
    limit: usize,
) -> Result<Vec<TextHit>> {
    let now = Utc::now();
    let filter = search_filter(scope, range, limit);
    let mut hits = Vec::new();
    for kind in [HitKind::Message, HitKind::Summary, HitKind::Memory] {
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

/// `memory_grep`: keyword search within `scope`, best match first (ties: newest first) among
/// the newest matches.
pub fn grep(
    store: &dyn Backend,
    scope: &Scope,
    config: &RecallConfig,
    args: &MemoryGrepArgs,
) -> Result<SearchAnswer> {
    grep_outside(store, scope, config, args, &InContext::default())
}

/// [`grep`] leaving out the messages `in_context` names, unless the call asks for them.
pub fn grep_outside(
    store: &dyn Backend,
    scope: &Scope,
    config: &RecallConfig,
    args: &MemoryGrepArgs,
    in_context: &InContext,
) -> Result<SearchAnswer> {
    let empty = InContext::default();
    let in_context = if args.include_in_context == Some(true) { &empty } else { in_context };
    if is_bare_wildcard(&args.query) {
        return said_between(store, scope, config, args, in_context);
    }
    if args.offset.is_some() {
        return Err(Error::invalid(
            "offset",
            "pages only a bare `*` listing; a keyword search returns the best matches",
        ));
    }
    let query = TextQuery::parse(&cut_query(&args.query)?).map_err(|e| match e {
        strata_seam::Error::Invalid { reason, .. } => Error::invalid("query", reason),
        other => Error::Store(other),
    })?;
    let range = parse_range(args.start_time.as_deref(), args.end_time.as_deref())?;
    let limit = config.limit(args.limit)?;
    // Ask for enough that the messages left out cannot crowd out the rest.
    let mut hits = keyword_hits(store, scope, config, &query, range, limit + in_context.0.len())?;
    let found = hits.len();
    hits.retain(|hit| !in_context.holds(hit.id));
    let left_out_in_context = found - hits.len();
    hits.truncate(limit);
    let mut results: Vec<Hit> = hits.into_iter().map(Hit::from_text_hit).collect();
    whole_word_excerpts(&mut results, query.terms(), config.excerpt_chars);
    Ok(SearchAnswer {
        query: query.terms().to_vec(),
        count: results.len(),
        results,
        order: "best keyword match first (term frequency) among the newest 256 matches of each kind, then newest",
        semantic_coverage: None,
        left_out_in_context,
        next_offset: None,
    })
}

/// True for a query of nothing but `*` (and spaces): a listing, not a search.
fn is_bare_wildcard(query: &str) -> bool {
    query.contains('*') && query.chars().all(|c| c == '*' || c.is_whitespace())
}

/// A bare `*`: the persona's messages of the time range in time order, oldest first, or the
/// newest first when no range is given ("what did we talk about on Tuesday afternoon"). Paged
/// with `offset`; the messages the context holds verbatim are left out and counted, as in a
/// search.
fn said_between(
    store: &dyn Backend,
    scope: &Scope,
    config: &RecallConfig,
    args: &MemoryGrepArgs,
    in_context: &InContext,
) -> Result<SearchAnswer> {
    let range = parse_range(args.start_time.as_deref(), args.end_time.as_deref())?;
    let limit = config.limit(args.limit)?;
    let oldest_first = range.0.is_some() || range.1.is_some();
    let offset = args.offset.unwrap_or(0) as usize;
    let filter = SearchFilter { kinds: vec![HitKind::Message], ..search_filter(scope, range, limit + 1) };
    let mut page = store.said_between(&filter, oldest_first, offset)?;
    let more = page.len() > limit;
    page.truncate(limit);
    let next_offset = more.then_some(offset + page.len());
    let listed = page.len();
    page.retain(|hit| !in_context.holds(hit.id));
    let results: Vec<Hit> = page
        .into_iter()
        .map(|mut hit| {
            hit.snippet = truncate_chars(&hit.snippet, config.excerpt_chars);
            Hit::from_text_hit(hit)
        })
        .collect();
    Ok(SearchAnswer {
        query: vec!["*".to_owned()],
        count: results.len(),
        left_out_in_context: listed - results.len(),
        results,
        order: if oldest_first { "oldest first within the time range" } else { "newest first" },
        semantic_coverage: None,
        next_offset,
    })
}

/// Cuts each grep result's whole text to an excerpt centred on the first match of a fragment,
/// the word holding it shown whole (`«limiter.rs»` for the fragment `limite`).
fn whole_word_excerpts(results: &mut [Hit], fragments: &[String], max: usize) {
    let fragments: Vec<String> = fragments.iter().map(|f| f.trim_matches('*').to_lowercase()).collect();
    for hit in results.iter_mut() {
        hit.snippet = excerpt_on_fragment(&hit.snippet, &fragments, max);
    }
}

/// A window of at most `max` characters of `text` centred on the first case-insensitive
/// occurrence of any of `fragments` (a substring, as `memory_grep` matches), every word in it
/// that holds a fragment marked whole `«…»`, cut at word boundaries. The start of the text when
/// none occurs.
pub fn excerpt_on_fragment(text: &str, fragments: &[String], max: usize) -> String {
    let lower = text.to_lowercase();
    let haystack = if lower.len() == text.len() { lower.as_str() } else { text };
    let fragments: Vec<&str> = fragments.iter().map(String::as_str).filter(|f| !f.is_empty()).collect();
    let first =
        fragments.iter().filter_map(|fragment| haystack.find(fragment).map(|at| (at, fragment.len()))).min();
    let Some((at, len)) = first else { return truncate_chars(text, max) };
    let (word_start, word_end) = whole_word(text, at, at + len, max);
    let (start, end) = window_bounds(text, word_start, word_end, max);
    // Every word in the window holding a fragment, left to right.
    let mut marks = Vec::new();
    let mut from = start;
    while from < end {
        let next = fragments
            .iter()
            .filter_map(|fragment| haystack[from..end].find(fragment).map(|n| (from + n, fragment.len())))
            .min();
        let Some((at, len)) = next else { break };
        // Widened within the window only: the work stays linear in the window.
        let window = &text[start..end];
        let (word_start, word_end) = whole_word(window, at - start, at - start + len, max);
        let (word_start, word_end) = (start + word_start, start + word_end);
        match marks.last_mut() {
            // Adjacent matches (a run of one character) are one mark.
            Some((_, last_end)) if *last_end == word_start => *last_end = word_end,
            _ => marks.push((word_start, word_end)),
        }
        from = word_end.max(at + len);
    }
    let mut shown = String::with_capacity(end - start + 16);
    if start > 0 {
        shown.push('…');
    }
    let mut at = start;
    for (word_start, word_end) in marks {
        shown.push_str(&text[at..word_start]);
        shown.push('«');
        shown.push_str(&text[word_start..word_end]);
        shown.push('»');
        at = word_end;
    }
    shown.push_str(text[at..end].trim_end());
    if end < text.len() {
        shown.push('…');
    }
    shown
}

/// A word character for excerpts: a match is widened to the run of these around it, so a path
/// or a snake_case name shows whole.
fn in_word(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')
}

/// The word holding the match `text[at..end]`: widened over word characters, trailing `.`, `-`
/// and `/` left out; the match alone when that word is longer than half the window (a run of
/// one character, a blob).
fn whole_word(text: &str, at: usize, end: usize, max: usize) -> (usize, usize) {
    let start =
        text[..at].char_indices().rev().take_while(|(_, c)| in_word(*c)).last().map_or(at, |(i, _)| i);
    let word_end = text[end..].find(|c: char| !in_word(c)).map_or(text.len(), |n| end + n);
    let word_end = start + text[start..word_end].trim_end_matches(['.', '-', '/']).len().max(end - start);
    if text[start..word_end].chars().count() > max / 2 { (at, end) } else { (start, word_end) }
}

/// The words of a question that can select keyword candidates: runs of letters and digits,
/// lowercased, stop words ([`STOPWORDS`]) and repeats left out, in order. Only the keyword side
/// of `memory_search` leaves stop words out (bm25 would give them almost no weight, yet
/// ranking every row that holds them costs time); `memory_grep` searches exactly what it is
/// given.
pub(crate) fn query_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let word = word.to_lowercase();
        if !STOPWORDS.contains(&word.as_str()) && !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

/// The semantic candidates: the nearest rows of each kind within the persona, the scope's
/// session and the time range (the store searches within the window itself, so every row is
/// in scope), expired memories left out, nearest first, at most `wanted`, none below
/// `min_similarity`.
fn semantic_hits(read: &Candidates, config: &RecallConfig, wanted: usize) -> Vec<(TextHit, f64)> {
    let now = Utc::now();
    let mut candidates: Vec<(TextHit, f64)> =
        read.semantic.iter().filter(|(hit, _)| !expired(config, hit, now)).cloned().collect();
    candidates.sort_by(|a, b| a.1.total_cmp(&b.1));
    candidates.truncate(wanted);
    // Below this similarity the model is saying "unrelated"; such rows would only dilute fusion.
    candidates.retain(|(_, distance)| 1.0 - distance >= config.min_similarity);
    candidates
}

/// A key of a text that ignores case and spacing: two texts with the same key say the same.
fn text_key(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for word in text.split_whitespace() {
        word.to_lowercase().hash(&mut hasher);
    }
    hasher.finish()
}

/// Where semantic search stands for the caller's persona, when it does not cover everything.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Coverage {
    /// Rows of the persona waiting for a vector; they take part through keywords only.
    pub waiting: u64,
    /// What that means, in words.
    pub note: String,
}

/// What the search did not cover semantically: rows waiting for a vector, or vectors of
/// another model than `model` (then nothing was searched by meaning).
pub(crate) fn coverage(read: &Candidates, model: &str) -> Option<Coverage> {
    let waiting = read.waiting;
    if let Some(space) = read.space.as_ref().filter(|space| space.model != model) {
        return Some(Coverage {
            waiting,
            note: format!(
                "the stored vectors are of {}, not of {model}: semantic search is off until \
                 `strata embed` re-embeds the history; these results come from keywords only",
                space.model
            ),
        });
    }
    (waiting > 0).then(|| Coverage {
        waiting,
        note: format!(
            "{waiting} items are not embedded yet (run `strata embed`); they were searched by keywords only"
        ),
    })
}

/// What a search without the model covered: everything, by keywords only, and why.
fn keywords_only(read: &Candidates, unavailable: &Error) -> Coverage {
    Coverage { waiting: read.waiting, note: format!("{unavailable}; these results come from keywords only") }
}

/// Word counts are exact up to this many rows; a word in more rows is common, and its weight
/// in [`ideal_score`] is taken at this count (a little high, which only errs towards modesty).
const FREQUENCY_CAP: usize = 1000;

/// About the bm25 score a row holding every query word once would get: the sum of the words'
/// idf, computed as FTS5's bm25 computes it. Dividing by it puts keyword scores on an absolute
/// scale: a row matching only the question's common words ("change", "test") scores low even
/// when it is the best keyword match, so it cannot outrank a row that means the same as the
/// question in other words.
fn ideal_score(statistics: &WordStatistics) -> f64 {
    let ideal: f64 = statistics.frequencies.iter().map(|&n| idf(statistics.rows, n as f64)).sum();
    ideal.max(1e-6)
}

/// One side's candidates with scores scaled to 0..=1 over that side (min-max: its best is 1,
/// its worst candidate 0). A row the side did not return counts 0 there. Raw cosine
/// similarities crowd into a narrow band while bm25 spreads wide, so without this the two
/// sides would not be comparable.
fn scaled(mut scores: Vec<(HitId, f64)>) -> Vec<(HitId, f64)> {
    let best = scores.iter().map(|(_, score)| *score).fold(f64::NEG_INFINITY, f64::max);
    let worst = scores.iter().map(|(_, score)| *score).fold(f64::INFINITY, f64::min);
    let spread = best - worst;
    scores
        .iter_mut()
        .for_each(|(_, score)| *score = if spread > 0.0 { (*score - worst) / spread } else { 1.0 });
    scores
}

/// `memory_search`: semantic search fused with word-level keyword ranking.
///
/// The semantic side ranks by cosine similarity of the query's vector to each row's nearest
/// chunk; the keyword side by bm25 over the word index (each message with its speaker). Each
/// side's scores are scaled to 0..=1 over its candidates, and a row scores `semantic_weight` × its semantic
/// score + `keyword_weight` × its keyword score, so a strong match on one side is not drowned
/// by a weak list on the other. A fact held by a message and by the summary that covers it comes
/// back once, at the better of the two, naming the other in `also_in`. Rows not embedded yet
/// take part through keywords, and the answer says how many there are.
pub fn search(
    store: &dyn Backend,
    scope: &Scope,
    config: &RecallConfig,
    embedder: &EmbedderState,
    args: &MemorySearchArgs,
) -> Result<SearchAnswer> {
    search_outside(store, scope, config, embedder, args, &InContext::default())
}

/// [`search`] leaving out the messages `in_context` names, unless the call asks for them.
pub fn search_outside(
    store: &dyn Backend,
    scope: &Scope,
    config: &RecallConfig,
    embedder: &EmbedderState,
    args: &MemorySearchArgs,
    in_context: &InContext,
) -> Result<SearchAnswer> {
    let empty = InContext::default();
    let in_context = if args.include_in_context == Some(true) { &empty } else { in_context };
    let text = cut_query(&args.query)?;
    let range = parse_range(args.start_time.as_deref(), args.end_time.as_deref())?;
    let limit = config.limit(args.limit)?;
    let searched = Searched { text: &text, range, kinds: &ALL_KINDS, limit };
    search_kinds(store, scope, config, embedder, &searched, in_context)
}

/// The memories of `persona` (`category` alone, when named) nearest `query`, by meaning
/// fused with keywords as `memory_search` ranks them, by keywords alone without the model: a
/// host's search of its memories (the LangGraph store), not a tool the model calls.
pub fn search_memories(
    store: &dyn Backend,
    persona: &str,
    config: &RecallConfig,
    embedder: &EmbedderState,
    query: &str,
    limit: u32,
) -> Result<SearchAnswer> {
    let text = cut_query(query)?;
    let limit = config.limit(Some(limit))?;
    let searched = Searched { text: &text, range: TimeRange::default(), kinds: &[HitKind::Memory], limit };
    search_kinds(store, &Scope::persona(persona), config, embedder, &searched, &InContext::default())
}

/// What [`search_kinds`] looks for.
struct Searched<'a> {
    text: &'a str,
    range: TimeRange,
    kinds: &'a [HitKind],
    limit: usize,
}

/// `memory_search`'s ranking over `searched.kinds`, leaving out what `in_context` names.
fn search_kinds(
    store: &dyn Backend,
    scope: &Scope,
    config: &RecallConfig,
    embedder: &EmbedderState,
    searched: &Searched<'_>,
    in_context: &InContext,
) -> Result<SearchAnswer> {
    let (text, limit) = (searched.text, searched.limit);
    // Without the model the search still answers, by keywords alone, and says why.
    let (semantic, unavailable) = match embedder.get() {
        Ok(embedder) => (Some((embedder.spec().id, embedder.embed_query(text)?)), None),
        Err(error) => (None, Some(error)),
    };
    let vector = semantic.as_ref().map(|(model, vector)| (*model, vector.as_slice()));
    let query = FusionQuery { text, vector, range: searched.range, kinds: searched.kinds };
    let mut fusion = fuse(store, scope, config, &query, config.search_candidates.max(limit))?;
    let found = fusion.results.len();
    fusion.results.retain(|hit| !in_context.holds(hit.id));
    let left_out_in_context = found - fusion.results.len();
    let results = one_hit_per_source(std::mem::take(&mut fusion.results), &fusion, limit);
    Ok(SearchAnswer {
        query: vec![text.to_owned()],
        count: results.len(),
        results,
        order: match unavailable {
            None => {
                "fused relevance first (weighted sum of semantic and keyword scores, each scaled to 0..1)"
            }
            Some(_) => "best keyword match first (semantic search is unavailable)",
        },
        semantic_coverage: match (&unavailable, &semantic) {
            (Some(error), _) => Some(keywords_only(&fusion.read, error)),
            (None, Some((model, _))) => coverage(&fusion.read, model),
            (None, None) => None,
        },
        left_out_in_context,
        next_offset: None,
    })
}

const ALL_KINDS: [HitKind; 3] = [HitKind::Message, HitKind::Summary, HitKind::Memory];

/// What a fused search looks for.
pub(crate) struct FusionQuery<'a> {
    /// The query's text (already cut).
    pub text: &'a str,
    /// The embedding model's id and the query's vector; `None` ranks by keywords alone.
    pub vector: Option<(&'a str, &'a [f32])>,
    pub range: TimeRange,
    /// The kinds of rows searched.
    pub kinds: &'a [HitKind],
}

/// Every candidate of a fused search, best first, a key of each one's whole text, and what the
/// store read for them (the summaries' spans, where embedding stands).
pub(crate) struct Fusion {
    pub results: Vec<Hit>,
    pub texts: HashMap<HitId, u64>,
    pub read: Candidates,
}

/// The heart of `memory_search`: up to `candidates` rows from each side, each side's scores
/// scaled to 0..=1 and summed with the configured weights, best first.
pub(crate) fn fuse(
    store: &dyn Backend,
    scope: &Scope,
    config: &RecallConfig,
    query: &FusionQuery<'_>,
    candidates: usize,
) -> Result<Fusion> {
    let now = Utc::now();
    let words = query_words(query.text);
    let mut read = store.candidates(&CandidateQuery {
        filter: SearchFilter { kinds: query.kinds.to_vec(), ..search_filter(scope, query.range, candidates) },
        words: &words,
        vector: query.vector,
        scan: config.vector_scan(),
        frequency_cap: FREQUENCY_CAP,
    })?;
    let mut found: HashMap<HitId, Hit> = HashMap::new();
    // Each candidate's whole text, reduced to a key: the same words said twice are one fact.
    let mut texts: HashMap<HitId, u64> = HashMap::new();
    let semantic = semantic_hits(&read, config, candidates);
    let semantic_scores: Vec<_> = semantic.iter().map(|(hit, distance)| (hit.id, 1.0 - distance)).collect();
    for (rank, (hit, distance)) in semantic.into_iter().enumerate() {
        let mut entry = Hit::from_text_hit(hit);
        texts.insert(entry.id, text_key(&entry.snippet));
        entry.snippet = truncate_chars(&entry.snippet, config.excerpt_chars);
        entry.similarity = Some(1.0 - distance);
        entry.semantic_rank = Some(rank + 1);
        found.insert(entry.id, entry);
    }

    let mut keyword_scores = Vec::new();
    for (hit, score) in &read.keyword {
        if expired(config, hit, now) {
            continue;
        }
        let ideal = read.words.get(&hit.kind()).map_or(1e-6, ideal_score);
        let matched = score / ideal;
        keyword_scores.push((hit.id, matched));
        texts.insert(hit.id, text_key(&hit.snippet));
        let snippet = excerpt_around(&hit.snippet, &words, config.excerpt_chars);
        let entry = found.entry(hit.id).or_insert_with(|| Hit::from_text_hit(hit.clone()));
        entry.snippet = snippet;
        entry.keyword_match = Some(matched);
    }
    keyword_scores.sort_by(|a, b| b.1.total_cmp(&a.1));
    keyword_scores.truncate(candidates);
    for (rank, (key, _)) in keyword_scores.iter().enumerate() {
        if let Some(entry) = found.get_mut(key) {
            entry.keyword_rank = Some(rank + 1);
        }
    }

    let mut fused: HashMap<HitId, f64> = HashMap::new();
    for (key, score) in scaled(semantic_scores) {
        *fused.entry(key).or_default() += config.semantic_weight * score;
    }
    // The keyword side is scaled like the semantic side, then weighed by how close its best
    // match comes to matching the whole question (see `ideal_score`).
    let confidence = keyword_scores.first().map_or(0.0, |(_, best)| best.min(1.0));
    for (key, score) in scaled(keyword_scores) {
        let score = score * confidence;
        *fused.entry(key).or_default() += config.keyword_weight * score;
    }
    // Each candidate's whole text and speaker, for the time of what it says, who said it and
    // the words of a second hop.
    let whole: HashMap<HitId, &TextHit> =
        read.semantic.iter().chain(&read.keyword).map(|(hit, _)| (hit.id, hit)).collect();
    let time = TimeQuestion::of(query.text);
    let named = NamedSpeakers::of(query.text);
    for (key, score) in &mut fused {
        let Some(hit) = whole.get(key) else { continue };
        if time.is_temporal() && config.time_weight > 0.0 {
            // A memory's time is when it was written, not when what it says happened.
            let said_at = (hit.kind() != HitKind::Memory).then_some(hit.timestamp);
            *score += config.time_weight * time.relevance(&hit.snippet, said_at);
        }
        if named.said(hit.speaker.as_deref()) {
            *score += config.speaker_weight;
        }
    }
    let mut results: Vec<Hit> = fused
        .into_iter()
        .filter_map(|(key, score)| {
            let mut hit = found.remove(&key)?;
            hit.score = Some(score);
            Some(hit)
        })
        .collect();
    sort_fused(&mut results);
    let mut fusion = Fusion { results, texts, read: Candidates::default() };
    if config.expansion_weight > 0.0 && !words.is_empty() {
        let seeds: Vec<&str> = fusion
            .results
            .iter()
            .take(EXPANSION_SEEDS)
            .filter_map(|hit| whole.get(&hit.id).map(|hit| hit.snippet.as_str()))
            .collect();
        let extra = expansion_words(&words, &seeds);
        if !extra.is_empty() {
            let second_words: Vec<String> = words.iter().cloned().chain(extra).collect();
            let second = store.candidates(&CandidateQuery {
                filter: SearchFilter {
                    kinds: query.kinds.to_vec(),
                    ..search_filter(scope, query.range, candidates)
                },
                words: &second_words,
                vector: None,
                scan: config.vector_scan(),
                frequency_cap: FREQUENCY_CAP,
            })?;
            second_hop(&mut fusion, config, &second, &second_words, confidence, now);
            read.spans.extend(second.spans);
        }
    }
    if config.neighbour_weight > 0.0 {
        add_neighbours(&mut fusion.results, config.neighbour_weight);
    }
    sort_fused(&mut fusion.results);
    fusion.read = read;
    Ok(fusion)
}

/// The words of a question, to tell whether it names a message's speaker: a question about
/// what someone said or did ("What did Caroline research?") is mostly answered by that
/// person's own messages.
struct NamedSpeakers(Vec<String>);

impl NamedSpeakers {
    fn of(question: &str) -> NamedSpeakers {
        NamedSpeakers(
            question
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect(),
        )
    }

    /// Whether `speaker` is named: every word of the name is a word of the question, or its
    /// first word is (a first name).
    fn said(&self, speaker: Option<&str>) -> bool {
        let Some(speaker) = speaker else { return false };
        let name: Vec<String> = speaker
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        name.first().is_some_and(|first| self.0.contains(first))
    }
}

/// Adds to each candidate message `weight` × how much better the best of the messages just
/// before and after it in its session scores, when they are candidates too. In a conversation
/// the answer is often said in other words than the turn that names the topic: "What concert
/// was it?" is answered by "It was Matt Patterson", "Congrats on the promotion!" by "... now
/// that I'm an assistant manager". Only a better neighbour lifts a row, and never past it, so
/// two matches side by side keep their order; the scores added are read before any is added.
fn add_neighbours(results: &mut [Hit], weight: f64) {
    let place = |hit: &Hit| -> Option<(String, i64)> {
        (hit.kind() == HitKind::Message).then_some(())?;
        Some((hit.session.clone()?, hit.seq?))
    };
    let at: HashMap<(String, i64), f64> =
        results.iter().filter_map(|hit| Some((place(hit)?, hit.score.unwrap_or(0.0)))).collect();
    for hit in results.iter_mut() {
        let Some((session, seq)) = place(hit) else { continue };
        let own = hit.score.unwrap_or(0.0);
        let beside = [seq - 1, seq + 1]
            .into_iter()
            .filter_map(|near| at.get(&(session.clone(), near)).copied())
            .fold(own, f64::max);
        hit.score = Some(own + weight * (beside - own));
    }
}

/// Best fused score first; ties: the more similar, then the newest.
fn sort_fused(results: &mut [Hit]) {
    results.sort_by(|a, b| {
        b.score
            .unwrap_or(0.0)
            .total_cmp(&a.score.unwrap_or(0.0))
            .then(b.similarity.unwrap_or(-1.0).total_cmp(&a.similarity.unwrap_or(-1.0)))
            .then(b.timestamp.cmp(&a.timestamp))
    });
}

/// The first hits a second hop takes its words from.
const EXPANSION_SEEDS: usize = 3;

/// The most words a second hop adds to the question's.
const EXPANSION_WORDS: usize = 6;

/// The words a second hop adds to the question's: the content words of the first hits
/// (`seeds`) that the question does not hold, those in more of the hits first, then the longer
/// (a long word is more often a rare one, and rare words are what bm25 weighs), at most
/// [`EXPANSION_WORDS`]. A question about several things ("what does she do to relax") finds
/// its first thing by its own words; what that hit says about it ("painting", "pottery")
/// finds the others that say the same.
fn expansion_words(question: &[String], seeds: &[&str]) -> Vec<String> {
    let mut counted: Vec<(String, usize)> = Vec::new();
    for seed in seeds {
        for word in query_words(seed) {
            if word.chars().count() < 4
                || word.chars().all(|c| c.is_ascii_digit())
                || question.contains(&word)
            {
                continue;
            }
            match counted.iter_mut().find(|(known, _)| *known == word) {
                Some((_, count)) => *count += 1,
                None => counted.push((word, 1)),
            }
        }
    }
    counted.sort_by(|a, b| {
        b.1.cmp(&a.1).then(b.0.chars().count().cmp(&a.0.chars().count())).then(a.0.cmp(&b.0))
    });
    counted.into_iter().take(EXPANSION_WORDS).map(|(word, _)| word).collect()
}

/// Adds a second hop's keyword ranking (the question's words and the first hits') to the fused
/// scores, weighed by `expansion_weight` after the same scaling as the keyword side, and by
/// `first_confidence`, how near the first keyword side's best match came to the whole
/// question: when the question's words are all common, the first hits are the rows that share
/// them, not the answer, and a hop from them would only lift more of those rows (a planted
/// secret asked for in other words fell from 2nd to 6th without it). A hit the hop finds again
/// rises; a new one joins with that score alone.
fn second_hop(
    fusion: &mut Fusion,
    config: &RecallConfig,
    second: &Candidates,
    words: &[String],
    first_confidence: f64,
    now: DateTime<Utc>,
) {
    let mut scores = Vec::new();
    let mut hits: HashMap<HitId, &TextHit> = HashMap::new();
    for (hit, score) in &second.keyword {
        if expired(config, hit, now) {
            continue;
        }
        let ideal = second.words.get(&hit.kind()).map_or(1e-6, ideal_score);
        scores.push((hit.id, score / ideal));
        hits.insert(hit.id, hit);
    }
    let confidence = scores.iter().map(|(_, score)| *score).fold(0.0, f64::max).min(1.0);
    for (key, score) in scaled(scores) {
        let added = config.expansion_weight * score * confidence * first_confidence;
        if let Some(known) = fusion.results.iter_mut().find(|hit| hit.id == key) {
            known.score = Some(known.score.unwrap_or(0.0) + added);
            continue;
        }
        let Some(hit) = hits.get(&key) else { continue };
        fusion.texts.insert(key, text_key(&hit.snippet));
        let mut entry = Hit::from_text_hit((*hit).clone());
        entry.snippet = excerpt_around(&hit.snippet, words, config.excerpt_chars);
        entry.score = Some(added);
        fusion.results.push(entry);
    }
}

/// The part of a conversation a hit holds: a message's position, or a summary's range.
#[derive(Debug, PartialEq, Eq)]
struct Span {
    session: String,
    first: i64,
    last: i64,
}

impl Span {
    fn of(hit: &Hit, spans: &HashMap<NodeId, (i64, i64)>) -> Option<Span> {
        let session = hit.session.clone()?;
        match hit.id {
            HitId::Message(_) => hit.seq.map(|seq| Span { session, first: seq, last: seq }),
            HitId::Summary(node) => spans.get(&node).map(|&(first, last)| Span { session, first, last }),
            HitId::Memory(_) => None,
        }
    }

    fn overlaps(&self, other: &Span) -> bool {
        self.session == other.session && self.first <= other.last && other.first <= self.last
    }
}

/// The best `limit` hits, each source once: a hit whose span of the conversation overlaps a
/// better hit's (a message and the summary covering it, a summary and its parent), or whose
/// text is the same as a better hit's (a message repeated word for word), is left out and
/// named in the better hit's `also_in`. Where a message and a summary covering it both
/// match, the message is shown (at the better of the two ranks), since it is the verbatim
/// source; the summary is named.
pub(crate) fn one_hit_per_source(ranked: Vec<Hit>, fusion: &Fusion, limit: usize) -> Vec<Hit> {
    let mut kept: Vec<(Hit, Option<Span>)> = Vec::new();
    let key = |hit: &Hit| fusion.texts.get(&hit.id).copied();
    for hit in ranked {
        let span = Span::of(&hit, &fusion.read.spans);
        let text = key(&hit);
        let holder = kept.iter().position(|(other, other_span)| {
            let same_text = text.is_some() && key(other) == text;
            let overlap = matches!((&span, other_span), (Some(a), Some(b)) if a.overlaps(b));
            same_text || overlap
        });
        match holder {
            // A message inside a better summary takes the summary's place: it is the verbatim
            // source, and the summary is named with it.
            Some(index) if hit.kind() == HitKind::Message && kept[index].0.kind() == HitKind::Summary => {
                let (summary, _) = std::mem::replace(&mut kept[index], (hit, span));
                let message = &mut kept[index].0;
                message.score = summary.score;
                message.also_in.push(summary.id);
                message.also_in.extend(summary.also_in);
            }
            Some(index) => kept[index].0.also_in.push(hit.id),
            None if kept.len() < limit => kept.push((hit, span)),
            None => {}
        }
    }
    kept.into_iter().map(|(hit, _)| hit).collect()
}

/// A window of at most `max` characters of `text` around the first word that starts with one
/// of `words` (case-insensitively), cut at word boundaries, the word marked `«…»`. The start of
/// the text when no word is found. Time is linear in the text scanned.
pub fn excerpt_around(text: &str, words: &[String], max: usize) -> String {
    let lower = text.to_lowercase();
    // Lowercasing can change byte lengths (rarely); then search the original text's positions.
    let haystack = if lower.len() == text.len() { lower.as_str() } else { text };
    let found = words
        .iter()
        .filter_map(|word| {
            haystack
                .match_indices(word.as_str())
                .find(|(at, _)| haystack[..*at].chars().next_back().is_none_or(|c| !c.is_alphanumeric()))
        })
        .map(|(at, _)| at)
        .min();
    let Some(at) = found else { return truncate_chars(text, max) };
    let word_end = text[at..].find(|c: char| !c.is_alphanumeric()).map_or(text.len(), |n| at + n);
    window_around(text, at, word_end, max)
}

/// At most about `max` characters of `text` with the word `text[at..word_end]` marked `«…»` in
/// the middle, cut at white space, `…` where text is left out.
fn window_around(text: &str, at: usize, word_end: usize, max: usize) -> String {
    let (start, end) = window_bounds(text, at, word_end, max);
    format!(
        "{}{}«{}»{}{}",
        if start > 0 { "…" } else { "" },
        &text[start..at],
        &text[at..word_end],
        text[word_end..end].trim_end(),
        if end < text.len() { "…" } else { "" },
    )
}

/// The byte range of at most about `max` characters of `text` centred on `text[at..word_end]`,
/// starting and ending at white space where there is any in reach.
fn window_bounds(text: &str, at: usize, word_end: usize, max: usize) -> (usize, usize) {
    // Centre the window on the word: half the budget before it, at a word boundary.
    let before = max.saturating_sub(text[at..word_end].chars().count()) / 2;
    let mut start = at;
    for (count, (index, _)) in text[..at].char_indices().rev().enumerate() {
        if count >= before {
            break;
        }
        start = index;
    }
    if start > 0 {
        start = text[start..at].find(char::is_whitespace).map_or(at, |n| start + n + 1).min(at);
    }
    let budget = max.saturating_sub(text[start..at].chars().count() + text[at..word_end].chars().count());
    let mut end = word_end;
    for (count, (index, c)) in text[word_end..].char_indices().enumerate() {
        if count >= budget {
            break;
        }
        end = word_end + index + c.len_utf8();
    }
    if end < text.len() {
        end = text[word_end..end].rfind(char::is_whitespace).map_or(end, |n| word_end + n);
    }
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn query_words_drop_stop_words_and_repeats() {
        assert_eq!(
            query_words("When did Caroline go to the LGBTQ support group?"),
            ["caroline", "go", "lgbtq", "support", "group"]
        );
        assert_eq!(query_words("the THE the"), Vec::<String>::new());
        assert_eq!(query_words("数据库 迁移, port 8443"), ["数据库", "迁移", "port", "8443"]);
    }

    #[test]
    fn a_second_hop_adds_the_first_hits_shared_and_long_words() {
        let question = query_words("What does Melanie do to relax?");
        let seeds = [
            "Painting helps me relax, and pottery too.",
            "I signed up for a pottery class, painting is next.",
            "Melanie loves camping.",
        ];
        let added = expansion_words(&question, &seeds);
        // Words in two hits come first; the question's own words and short words never.
        assert_eq!(&added[..2], ["painting", "pottery"]);
        assert!(!added.iter().any(|w| w == "relax" || w == "melanie" || w.chars().count() < 4), "{added:?}");
        assert!(added.len() <= EXPANSION_WORDS);
        assert!(expansion_words(&question, &[]).is_empty());
    }

    #[test]
    fn a_message_beside_a_better_match_rises_towards_it_and_never_past() {
        let message = |id: i64, seq: i64, score: f64| Hit {
            id: HitId::Message(MessageId(id)),
            session: Some("s".to_owned()),
            seq: Some(seq),
            timestamp: DateTime::<Utc>::UNIX_EPOCH,
            role: "user".to_owned(),
            level: None,
            category: None,
            key: None,
            snippet: String::new(),
            score: Some(score),
            similarity: None,
            semantic_rank: None,
            keyword_rank: None,
            keyword_match: None,
            also_in: Vec::new(),
        };
        // "What concert was it?" matches; the reply naming the singer is beside it.
        let mut results = vec![message(1, 0, 1.0), message(2, 1, 0.2), message(3, 5, 0.1)];
        add_neighbours(&mut results, 0.2);
        let scores: Vec<f64> = results.iter().map(|hit| hit.score.unwrap()).collect();
        assert_eq!(scores[0], 1.0, "a weaker neighbour does not lift the better match");
        assert!((scores[1] - 0.36).abs() < 1e-9, "{scores:?}");
        assert_eq!(scores[2], 0.1, "a message with no candidate beside it keeps its score");
    }

    #[test]
    fn a_speaker_is_named_by_the_first_word_of_the_name() {
        let named = NamedSpeakers::of("What did Caroline research?");
        assert!(named.said(Some("Caroline")));
        assert!(named.said(Some("caroline Smith")));
        assert!(!named.said(Some("Melanie")));
        assert!(!named.said(None));
    }

    #[test]
    fn excerpts_centre_on_the_match_and_keep_whole_words() {
        let text = format!(
            "{} the limiter lives in services/gateway/src/limiter.rs today {}",
            "alpha ".repeat(100),
            "omega ".repeat(100)
        );
        let shown = excerpt_around(&text, &words(&["limiter"]), 60);
        assert!(shown.contains("«limiter»"), "{shown}");
        assert!(shown.starts_with('…') && shown.ends_with('…'), "{shown}");
        let inner = shown.trim_matches('…');
        assert!(
            inner.split_whitespace().all(|w| [
                "alpha",
                "omega",
                "the",
                "«limiter»",
                "lives",
                "in",
                "services/gateway/src/limiter.rs",
                "today"
            ]
            .contains(&w)),
            "{shown}"
        );
        assert!(shown.chars().count() <= 64, "{shown}");
        // A word that only occurs inside another word is not a match.
        assert_eq!(excerpt_around("templates only", &words(&["late"]), 100), "templates only");
        // Case-insensitive; the original case is shown.
        assert!(excerpt_around("Deploy FAILED at noon", &words(&["failed"]), 100).contains("«FAILED»"));
    }

    #[test]
    fn grep_excerpts_show_the_whole_word_holding_the_fragment_centred() {
        let text = format!(
            "{} the rate limit lives in services/gateway/src/limiter.rs since March. {}",
            "padding ".repeat(40),
            "more ".repeat(40)
        );
        let shown = excerpt_on_fragment(&text, &words(&["limite"]), 80);
        assert!(shown.contains("«services/gateway/src/limiter.rs»"), "{shown}");
        let (before, after) = shown.split_once('«').unwrap();
        let after = after.split_once('»').unwrap().1;
        assert!(before.chars().count().abs_diff(after.chars().count()) <= 12, "centred: {shown}");
        assert!(!shown.contains(" paddin…") && !shown.contains("mor…"), "whole words at the ends: {shown}");
        // The sentence's full stop is not part of the word; case does not matter.
        assert!(excerpt_on_fragment("Deploy FAILED.", &words(&["fail"]), 100).contains("«FAILED»."));
        assert_eq!(excerpt_on_fragment("no match here", &words(&["zzz"]), 100), "no match here");
        assert_eq!(
            excerpt_on_fragment("a merge conflict, merged", &words(&["merge", "conflict"]), 100),
            "a «merge» «conflict», «merged»"
        );
    }

    #[test]
    fn excerpts_of_huge_text_are_bounded() {
        let text = "x".repeat(1_000_000) + " needle " + &"y".repeat(1_000_000);
        let shown = excerpt_around(&text, &words(&["needle"]), 100);
        assert!(shown.contains("«needle»") && shown.chars().count() <= 104, "{}", shown.len());
    }
}
