//! The summarizer interface shared by the LLM client and the offline extractive summarizer.
//!
//! Every summary passes one quality gate before it is stored, whoever wrote it: headline and
//! body not empty, at most `summary_max_tokens`, at most `summary_max_share` of its sources'
//! tokens, and, for a summarizer that paraphrases (an LLM), not a near-copy of its sources. A
//! rejection carries `detail` (figures, for the log) and `advice` (for the model, which is asked
//! again with it), so a bad summary is retried or counted, never stored.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use strata_seam::memories::MemoryUpdate;
use strata_seam::{Category, Level, Memory, Role};

use crate::error::SummarizeError;
use crate::tokens::TokenCounter;
use strata_llm::UsageLog;

/// A boxed, sendable future: what [`Summarizer::summarize`] returns, so the trait can be used as
/// `Arc<dyn Summarizer>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What is being summarized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// Whole turns of chat messages, into a Level-0 node.
    Messages,
    /// Summary nodes of one level, into a node one level up.
    Summaries,
}

/// One source of a summary: a message, or a summary node being merged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceItem {
    /// How the summary may cite it: `message 812 (seq 40)` or `node 17`.
    pub reference: String,
    /// A message and who sent it, or a summary node.
    pub origin: Origin,
    /// Who sent it, when the message names its sender (`Caroline`, `Priya`); `None` for
    /// nodes, tool results and messages known only by their role.
    pub name: Option<String>,
    /// For a tool result: the tool that answered, if known.
    pub tool: Option<String>,
    /// The tools an assistant message calls, in order.
    pub calls: Vec<SourceCall>,
    /// When it was sent (for a node: when its range starts).
    pub time: DateTime<Utc>,
    /// The text: the message content (without its tool calls), or a node's headline and body.
    pub text: String,
}

/// Where a [`SourceItem`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A message, with its sender's role.
    Message(Role),
    /// A summary node (or the summary of a piece of an oversized request).
    Summary,
}

impl Origin {
    /// `user`, `assistant`, `tool` or `system` for a message, `summary` for a node: how a
    /// prompt names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Message(role) => role.as_str(),
            Origin::Summary => "summary",
        }
    }

    /// Whether it is a message of this role.
    pub fn is(self, role: Role) -> bool {
        self == Origin::Message(role)
    }
}

impl Serialize for Origin {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A tool call of a source message, as a summarizer reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceCall {
    /// The tool's name (`tool` when the call names none).
    pub name: String,
    /// The arguments on one line, `key=value` pairs separated by spaces, cut to
    /// [`SourceCall::MAX_ARGUMENT_CHARS`] characters.
    pub arguments: String,
}

impl SourceCall {
    /// Characters of the arguments kept: a call's arguments can hold a whole file.
    pub const MAX_ARGUMENT_CHARS: usize = 300;
}

impl fmt::Display for SourceCall {
    /// `[calls read_file: path=src/a.rs ]`, the form a prompt shows it in.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[calls {}: {} ]", self.name, self.arguments)
    }
}

impl SourceItem {
    /// The text with the message's tool calls after it, one per line: everything a
    /// summarizer that reads plain text is shown of this source.
    pub fn full_text(&self) -> std::borrow::Cow<'_, str> {
        if self.calls.is_empty() {
            return std::borrow::Cow::Borrowed(&self.text);
        }
        let mut text = self.text.clone();
        for call in &self.calls {
            text.push('\n');
            text.push_str(&call.to_string());
        }
        std::borrow::Cow::Owned(text)
    }
}

/// A request for one summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRequest {
    /// Messages or summaries.
    pub kind: SourceKind,
    /// The level of the node being written.
    pub level: Level,
    /// The persona whose conversation this is.
    pub persona: String,
    /// The sources, oldest first.
    pub items: Vec<SourceItem>,
    /// Tokens of the sources.
    pub source_tokens: u32,
    /// Tokens the summary should stay under (headline and body together).
    pub target_tokens: u32,
    /// Set when an earlier summary of these sources was rejected: what was wrong with it, for
    /// the model to do better, and how many times it was rejected (a summarizer that samples
    /// raises its temperature by a small step per rejection, so a retry is a new request).
    pub retry: Option<RetryNote>,
    /// The persona's live memories, for a summary of messages (empty for merges): a summarizer
    /// that proposes memory updates reuses a key shown here for news about it rather than
    /// inventing a twin. Chosen by `known_memories`.
    pub known_memories: Vec<KnownMemory>,
}

/// A memory the persona has, as a summarizer is shown it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KnownMemory {
    /// Its category.
    pub category: Category,
    /// Its key.
    pub key: String,
    /// Its title, on one line and cut to [`KnownMemory::MAX_TITLE_CHARS`] characters.
    pub title: String,
    /// Its current content, on one line: a summarizer that updates the memory sees what it
    /// would replace, and writes the whole new content (the update is checked against it).
    pub content: String,
}

impl KnownMemory {
    /// Characters of a title shown: enough to tell what the memory is about.
    pub const MAX_TITLE_CHARS: usize = 80;

    /// `memo/standard_japanese: Standard Japanese textbook = Lesson 12 done`, the form a prompt
    /// lists it in.
    pub fn line(&self) -> String {
        format!("{}/{}: {} = {}", self.category, self.key, self.title, self.content)
    }
}

/// The words a memory is recognized by in a text: its key's and title's words of three
/// letters or more, lowercased, and each pair of neighbouring Chinese, Japanese or Korean
/// characters (those scripts put no spaces between words, and most words are two characters).
fn recognition_terms(memory: &Memory) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    let text = format!("{} {}", memory.key.replace('_', " "), memory.title).to_lowercase();
    let is_cjk =
        |c: char| matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF);
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()) {
        let chars: Vec<char> = word.chars().collect();
        if chars.iter().any(|&c| is_cjk(c)) {
            terms.extend(
                chars
                    .windows(2)
                    .filter(|pair| pair.iter().all(|&c| is_cjk(c)))
                    .map(|pair| pair.iter().collect()),
            );
        } else if chars.len() >= 3 {
            terms.push(word.to_owned());
        }
    }
    terms.sort_unstable();
    terms.dedup();
    terms
}

/// The memories a request for `items` shows, within `budget` tokens: first those whose words
/// occur in the sources (the likeliest to get news), the most words first, then the most
/// recently updated. `memories` are the persona's live ones.
pub fn known_memories(
    memories: &[Memory],
    items: &[SourceItem],
    budget: u32,
    counter: &TokenCounter,
) -> Vec<KnownMemory> {
    if budget == 0 || memories.is_empty() {
        return Vec::new();
    }
    let sources = items.iter().map(|item| item.full_text().to_lowercase()).collect::<Vec<_>>().join("\n");
    let mut ranked: Vec<(usize, &Memory)> = memories
        .iter()
        .map(|memory| {
            let found =
                recognition_terms(memory).iter().filter(|term| sources.contains(term.as_str())).count();
            (found, memory)
        })
        .collect();
    ranked.sort_by(|(found_a, a), (found_b, b)| {
        found_b.cmp(found_a).then(b.updated_at.cmp(&a.updated_at)).then(b.id.0.cmp(&a.id.0))
    });
    let mut left = budget;
    let mut shown = Vec::new();
    for (_, memory) in ranked {
        let known = KnownMemory {
            category: memory.category,
            key: memory.key.clone(),
            title: one_line_within(&memory.title, KnownMemory::MAX_TITLE_CHARS),
            content: one_line_within(&memory.content, strata_seam::memories::MAX_CONTENT_CHARS),
        };
        let tokens = counter.text(&known.line()) + 1;
        if tokens > left {
            break;
        }
        left -= tokens;
        shown.push(known);
    }
    shown
}

/// Why the previous summary of the same sources was rejected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RetryNote {
    /// Rejections so far (1 on the first retry).
    pub rejections: u32,
    /// What was wrong, in one short sentence addressed to the model.
    pub note: String,
}

/// A summary as a summarizer returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// One sentence.
    pub headline: String,
    /// The structured body: timeline events, key decisions, pitfalls, files and paths, numbers.
    pub body: String,
    /// Facts, decisions and task progress worth keeping as long-term memories, and preferences
    /// the user stated (proposed to the user, never written as preferences). Queued with the
    /// node and settled by the embedding application through the rules of `save_memory`; at
    /// most [`MAX_MEMORY_UPDATES`] are kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_updates: Vec<MemoryUpdate>,
}

impl Summary {
    /// A summary with no memory updates.
    pub fn new(headline: impl Into<String>, body: impl Into<String>) -> Summary {
        Summary { headline: headline.into(), body: body.into(), memory_updates: Vec::new() }
    }
}

/// The most memory updates one summary may carry; the rest are dropped (a summarizer that
/// finds dozens of "facts" in one chunk is not selecting).
pub const MAX_MEMORY_UPDATES: usize = 8;

/// Writes summaries. Implementations must be cheap to share (`Arc<dyn Summarizer>`) and must
/// not touch the database: the compactor calls them with no connection held.
pub trait Summarizer: Send + Sync + fmt::Debug {
    /// The name stored in `summary_nodes.summarizer`: the model id, or `extractive`.
    fn name(&self) -> &str;

    /// Summarizes the sources of `request`.
    fn summarize<'a>(&'a self, request: &'a SummaryRequest)
    -> BoxFuture<'a, Result<Summary, SummarizeError>>;

    /// True when the summarizer writes its own sentences (an LLM), so that a summary made
    /// mostly of copied source text is a failure the near-copy check rejects. An extractive
    /// summarizer copies by design and answers false.
    fn paraphrases(&self) -> bool {
        true
    }

    /// The log of the calls it made to a server, with their reported usage (`None` for a
    /// summarizer that calls none); the compactor drains and records it after each summary.
    fn usage_log(&self) -> Option<&UsageLog> {
        None
    }
}

/// What a [`TimedSummarizer`] reads before and after each call: a call is charged the
/// difference. The wall clock by default; `strata eval summaries` reads the time its sentence
/// model has spent, to tell a summary's embedding time from the rest.
pub trait Stopwatch: Send + Sync + fmt::Debug {
    /// The time counted so far; it never goes back.
    fn read(&self) -> Duration;
}

/// The wall clock, read as the time since it was made.
#[derive(Debug)]
pub struct WallClock(Instant);

impl Default for WallClock {
    fn default() -> WallClock {
        WallClock(Instant::now())
    }
}

impl Stopwatch for WallClock {
    fn read(&self) -> Duration {
        self.0.elapsed()
    }
}

/// A summarizer that records how much time each call of the one it wraps took on its
/// [`Stopwatch`] (the wall clock by default): the baseline "the summarizer alone" of the benches
/// and of `strata eval summaries`. Everything else, the name and [`Summarizer::paraphrases`]
/// included, is the wrapped summarizer's.
#[derive(Debug)]
pub struct TimedSummarizer<S, W = WallClock> {
    inner: S,
    stopwatch: W,
    times: Mutex<Vec<(SourceKind, Duration)>>,
}

impl<S: Summarizer> TimedSummarizer<S> {
    /// Wraps `inner`, timing its calls on the wall clock.
    pub fn new(inner: S) -> TimedSummarizer<S> {
        TimedSummarizer::with_stopwatch(inner, WallClock::default())
    }
}

impl<S: Summarizer, W: Stopwatch> TimedSummarizer<S, W> {
    /// Wraps `inner`, timing its calls on `stopwatch`.
    pub fn with_stopwatch(inner: S, stopwatch: W) -> TimedSummarizer<S, W> {
        TimedSummarizer { inner, stopwatch, times: Mutex::new(Vec::new()) }
    }

    /// The wrapped summarizer.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Every call so far: what it summarized and how long it took.
    pub fn times(&self) -> Vec<(SourceKind, Duration)> {
        self.times.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The time spent in all calls so far.
    pub fn total(&self) -> Duration {
        self.times().iter().map(|(_, took)| *took).sum()
    }
}

impl<S: Summarizer, W: Stopwatch> Summarizer for TimedSummarizer<S, W> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(async move {
            let before = self.stopwatch.read();
            let summary = self.inner.summarize(request).await;
            let took = self.stopwatch.read().saturating_sub(before);
            self.times.lock().unwrap_or_else(PoisonError::into_inner).push((request.kind, took));
            summary
        })
    }

    fn paraphrases(&self) -> bool {
        self.inner.paraphrases()
    }

    fn usage_log(&self) -> Option<&UsageLog> {
        self.inner.usage_log()
    }
}

/// The one-line form of a headline: [`strata_seam::fence::one_line`] (whitespace collapsed),
/// cut to at most `max_chars` characters.
pub(crate) fn one_line_within(text: &str, max_chars: usize) -> String {
    truncate_chars(&strata_seam::fence::one_line(text), max_chars)
}

/// The store's rule of cutting text, under the name the summarizers' modules import.
pub(crate) use strata_seam::text::truncate_chars;

/// Headlines longer than this many characters are cut: they are listed for every root.
pub(crate) const HEADLINE_MAX_CHARS: usize = 240;

/// Why the quality gate refused a summary; counted per reason in the database (`strata stats`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RejectReason {
    /// The headline or the body is empty.
    Empty,
    /// Over `summary_max_tokens`.
    Oversized,
    /// Over `summary_max_share` of its sources' tokens.
    NotCompressed,
    /// Mostly long runs of words copied from the sources (`near_copy_max_share`).
    NearCopy,
    /// The reply could not be read as a summary (invalid or cut-off JSON, no call, no fields).
    Malformed,
}

impl RejectReason {
    /// The name stored in the database and shown by `strata stats`.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Empty => "empty",
            RejectReason::Oversized => "oversized",
            RejectReason::NotCompressed => "not_compressed",
            RejectReason::NearCopy => "near_copy",
            RejectReason::Malformed => "malformed",
        }
    }
}

/// The rules of the quality gate, from [`crate::CompactorConfig`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Gate {
    /// `summary_max_tokens`.
    pub max_tokens: u32,
    /// `summary_max_share`.
    pub max_share: f64,
    /// `near_copy_ngram`: words per copied run.
    pub ngram: usize,
    /// `near_copy_max_share`; `None` for a summarizer that copies by design.
    pub near_copy_max_share: Option<f64>,
}

/// Lower-cased words (letters and digits) of `text`.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// For each run of `n` consecutive words of `summary` (its [`words`]), whether the sources
/// hold it word for word; empty for a summary shorter than one run. The share and the longest
/// copied stretch are both read from it, so the sources' runs are collected once.
fn copied_runs(summary: &[String], sources: &[SourceItem], n: usize) -> Vec<bool> {
    if n == 0 || summary.len() < n {
        return Vec::new();
    }
    let mut runs = std::collections::HashSet::new();
    for item in sources {
        let source = words(&item.full_text());
        for run in source.windows(n) {
            runs.insert(run.join(" "));
        }
    }
    summary.windows(n).map(|run| runs.contains(&run.join(" "))).collect()
}

/// The share of `copied` runs that are copies (see [`copied_runs`]): 1.0 for a pasted
/// transcript, near 0 for a paraphrase, 0 for a summary shorter than one run.
fn share_copied(copied: &[bool]) -> f64 {
    if copied.is_empty() {
        return 0.0;
    }
    copied.iter().filter(|&&is_copied| is_copied).count() as f64 / copied.len() as f64
}

/// The share of the summary's runs of `n` consecutive words that occur word for word in the
/// sources.
#[cfg(test)]
fn copied_share(summary: &str, sources: &[SourceItem], n: usize) -> f64 {
    share_copied(&copied_runs(&words(summary), sources, n))
}

/// The longest stretch of `summary` (its [`words`]) copied word for word, from its
/// [`copied_runs`] of `n` words (runs that overlap join), at most 16 words: an example a model
/// can recognise in a retry note.
fn longest_copied(summary: &[String], copied: &[bool], n: usize) -> Option<String> {
    let (mut best, mut start) = (None::<(usize, usize)>, None);
    for (index, is_copied) in copied.iter().chain([&false]).enumerate() {
        match (is_copied, start) {
            (true, None) => start = Some(index),
            (false, Some(first)) => {
                // Windows first..index cover the words first..index + n - 1.
                let span = (first, index - 1 + n);
                if best.is_none_or(|(a, b)| b - a < span.1 - span.0) {
                    best = Some(span);
                }
                start = None;
            }
            _ => {}
        }
    }
    let (first, end) = best?;
    let shown = &summary[first..end.min(first + 16)];
    let ellipsis = if end - first > shown.len() { " ..." } else { "" };
    Some(format!("{}{ellipsis}", shown.join(" ")))
}

/// How many words `text` has, as the gate counts them (letters and digits).
pub(crate) fn word_count(text: &str) -> usize {
    words(text).len()
}

/// About how many words `tokens` tokens hold in text like `sample` (whose tokens are
/// `sample_tokens`), rounded down with a tenth to spare; English prose runs about 0.75 words
/// a token, notes full of numbers and names fewer.
pub(crate) fn words_for(tokens: u32, sample: &str, sample_tokens: u32) -> usize {
    let per_token = match words(sample).len() {
        0 => 0.75,
        n => n as f64 / f64::from(sample_tokens.max(1)),
    };
    (f64::from(tokens) * per_token.min(1.0) * 0.9).floor() as usize
}

/// Checks a summary before it is stored and returns it cleaned up with its token count. Empty
/// parts, an oversized summary, one over the allowed share of its sources' tokens and, for a
/// summarizer that paraphrases, one mostly copied from its sources are refused; a refusal
/// carries the figures for the log and advice for the retry, in words a model can count.
pub(crate) fn check(
    summary: Summary,
    request: &SummaryRequest,
    gate: &Gate,
    counter: &TokenCounter,
) -> Result<(Summary, u32), SummarizeError> {
    let rejected =
        |reason, detail: String, advice: String| Err(SummarizeError::Rejected { reason, detail, advice });
    let headline = one_line_within(&summary.headline, HEADLINE_MAX_CHARS);
    let body = summary.body.trim().to_owned();
    if headline.is_empty() || body.is_empty() {
        let part = if headline.is_empty() { "headline" } else { "body" };
        return rejected(
            RejectReason::Empty,
            format!("the {part} is empty"),
            format!("the {part} was empty. Fill both the headline and the body."),
        );
    }
    let text = format!("{headline}\n{body}");
    let tokens = counter.text(&headline) + counter.text(&body);
    let source_tokens = request.source_tokens;
    let allowed = (f64::from(source_tokens) * gate.max_share).floor();
    // What a model can act on: its length and the limit in words, and how much of the
    // sources' length it kept. Counted only for a rejection: the sources' words are the
    // whole chunk's.
    // Both length rules at once: the limit it is told is the one that passes them both.
    let limit_tokens = gate.max_tokens.min(allowed as u32).min(source_tokens.saturating_sub(1));
    let too_long = || {
        let written = words(&text).len();
        let source_words: usize = request.items.iter().map(|item| words(&item.full_text()).len()).sum();
        let limit = words_for(limit_tokens, &text, tokens).max(1);
        let kept = 100 * written / source_words.max(1);
        format!(
            "it had {written} words, {kept}% as many as the messages; the limit is {limit} words. Write at most \
             {limit} words: keep only decisions, names, numbers and dates, as short notes in your own words."
        )
    };
    if tokens > gate.max_tokens {
        let limit = gate.max_tokens;
        return rejected(
            RejectReason::Oversized,
            format!("{tokens} tokens is over the limit of {limit} (summary_max_tokens)"),
            too_long(),
        );
    }
    if f64::from(tokens) > allowed || tokens >= source_tokens {
        return rejected(
            RejectReason::NotCompressed,
            format!(
                "{tokens} tokens is over {:.0}% of its {source_tokens} source tokens (summary_max_share)",
                gate.max_share * 100.0
            ),
            too_long(),
        );
    }
    if let Some(max) = gate.near_copy_max_share {
        let summary_words = words(&text);
        let copied = copied_runs(&summary_words, &request.items, gate.ngram);
        let share = share_copied(&copied);
        if share > max {
            let example = longest_copied(&summary_words, &copied, gate.ngram)
                .map(|run| format!(" (such as \"{run}\")"))
                .unwrap_or_default();
            return rejected(
                RejectReason::NearCopy,
                format!(
                    "{:.0}% of its {}-word runs are copied from the sources (near_copy_max_share {:.0}%)",
                    share * 100.0,
                    gate.ngram,
                    max * 100.0
                ),
                format!(
                    "{:.0}% of it repeated the messages word for word{example}. Restate every point in your own \
                     words as a short note of a few words; do not copy any sentence.",
                    share * 100.0
                ),
            );
        }
    }
    let memory_updates = summary
        .memory_updates
        .into_iter()
        .filter(|update| !update.key.trim().is_empty() && !update.content.trim().is_empty())
        .take(MAX_MEMORY_UPDATES)
        .collect();
    Ok((Summary { headline, body, memory_updates }, tokens))
}

/// The note a retry sends after `error`: what was wrong, addressed to the model.
pub(crate) fn retry_note(error: &SummarizeError) -> Option<String> {
    match error {
        SummarizeError::Rejected { advice, .. } => {
            Some(format!("Your previous summary of these messages was rejected: {advice}"))
        }
        SummarizeError::Malformed(_) => Some(
            "Your previous reply was not a complete, valid JSON summary (cut off or with raw line breaks in a \
             string); keep it short and escape line breaks as \\n."
                .to_owned(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Encoding;

    fn request(source: &str, source_tokens: u32) -> SummaryRequest {
        SummaryRequest {
            kind: SourceKind::Messages,
            level: strata_seam::Level::LEAF,
            persona: "p".into(),
            items: vec![SourceItem {
                reference: "message 1".into(),
                origin: Origin::Message(Role::User),
                name: None,
                tool: None,
                calls: Vec::new(),
                time: DateTime::UNIX_EPOCH,
                text: source.into(),
            }],
            source_tokens,
            target_tokens: 100,
            retry: None,
            known_memories: Vec::new(),
        }
    }

    fn gate(max_tokens: u32, near_copy: Option<f64>) -> Gate {
        Gate { max_tokens, max_share: 0.5, ngram: 8, near_copy_max_share: near_copy }
    }

    fn reason(result: Result<(Summary, u32), SummarizeError>) -> RejectReason {
        match result {
            Err(SummarizeError::Rejected { reason, .. }) => reason,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn empty_oversized_and_uncompressed_summaries_are_rejected() {
        let counter = TokenCounter::new(Encoding::Cl100kBase);
        let summary = |h: &str, b: &str| Summary::new(h, b);
        let sources = request("anything", 100);
        let check = |s, r: &SummaryRequest, g| check(s, r, &g, &counter);
        assert_eq!(reason(check(summary(" \n", "body"), &sources, gate(100, None))), RejectReason::Empty);
        assert_eq!(reason(check(summary("head", "  "), &sources, gate(100, None))), RejectReason::Empty);
        let long = "word ".repeat(50);
        assert_eq!(reason(check(summary("head", &long), &sources, gate(20, None))), RejectReason::Oversized);
        // 51 tokens of 100 sources is over the default share of 0.5: the merge that kept 302 of
        // 378 tokens on the real server would be refused.
        assert_eq!(
            reason(check(summary("head", &long), &sources, gate(1000, None))),
            RejectReason::NotCompressed
        );
        // The retry note says how long it was and how long it may be, in words.
        let Err(SummarizeError::Rejected { advice, .. }) =
            check(summary("head", &long), &sources, gate(1000, None))
        else {
            panic!("rejected")
        };
        assert!(
            advice.starts_with("it had 51 words, 5100% as many as the messages; the limit is "),
            "{advice}"
        );
        let limit: usize =
            advice.split("the limit is ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert!((30..=50).contains(&limit), "about 50 tokens' worth of words: {advice}");
        let (ok, tokens) = check(summary("  Two\n lines ", " body "), &sources, gate(100, None)).unwrap();
        assert_eq!(ok.headline, "Two lines");
        assert_eq!(ok.body, "body");
        assert_eq!(tokens, counter.text("Two lines") + counter.text("body"));
    }

    #[test]
    fn a_near_copy_is_rejected_for_a_paraphrasing_summarizer_only() {
        let counter = TokenCounter::new(Encoding::Cl100kBase);
        let transcript = "Finance says billing can be down at most 15 minutes, and never during the first three \
             business days of a month because that is when invoices are generated. We are going with managed \
             Postgres 16 with one replica, about 1,900 dollars a month. Tomas moves invoice-worker and \
             payments-api to the CNAME this week. The cutover is Tuesday March 10 with Thursday March 12 as the fallback.";
        let sources = request(&transcript.repeat(2), 400);
        let copied = Summary::new(
            "Compact Summary of Chat Turns",
            "Facts: Finance says billing can be down at most 15 minutes, and never during the first three \
             business days of a month because that is when invoices are generated.",
        );
        let share = copied_share(&copied.body, &sources.items, 8);
        assert!(share > 0.9, "{share}");
        let Err(SummarizeError::Rejected { reason, advice, .. }) =
            check(copied.clone(), &sources, &gate(1000, Some(0.6)), &counter)
        else {
            panic!("rejected")
        };
        assert_eq!(reason, RejectReason::NearCopy);
        // The note quotes what was copied, so a model can see what not to do.
        assert!(
            advice.contains("(such as \"finance says billing can be down at most 15 minutes and never during the first three ...\")"),
            "{advice}"
        );
        // The extractive summarizer copies by design: no near-copy rule for it.
        assert!(check(copied, &sources, &gate(1000, None), &counter).is_ok());
        let paraphrase = Summary::new(
            "Billing moves to managed Postgres 16 on March 10.",
            "- Downtime cap 15 min, not in a month's first 3 business days.\n- Managed PG 16, $1,900/month.\n\
             - Tomas: CNAME for invoice-worker and payments-api this week.\n- Fallback date March 12.",
        );
        assert!(copied_share(&paraphrase.body, &sources.items, 8) < 0.2);
        assert!(check(paraphrase, &sources, &gate(1000, Some(0.6)), &counter).is_ok());
    }

    #[test]
    fn every_rejection_has_a_retry_note_and_transport_failures_none() {
        for reason in [
            RejectReason::Empty,
            RejectReason::Oversized,
            RejectReason::NotCompressed,
            RejectReason::NearCopy,
        ] {
            let error = SummarizeError::Rejected { reason, detail: String::new(), advice: "x".into() };
            assert!(retry_note(&error).is_some(), "{reason:?}");
        }
        assert!(retry_note(&SummarizeError::Malformed("x".into())).is_some());
        assert!(retry_note(&SummarizeError::Timeout(std::time::Duration::from_secs(1))).is_none());
    }

    /// A stopwatch that moves on by one second at every read.
    #[derive(Debug, Default)]
    struct Ticking(std::sync::atomic::AtomicU64);

    impl Stopwatch for Ticking {
        fn read(&self) -> Duration {
            Duration::from_secs(self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
        }
    }

    #[tokio::test]
    async fn a_timed_summarizer_charges_each_call_what_its_stopwatch_moved() {
        let counter = TokenCounter::new(Encoding::O200kBase);
        let timed = TimedSummarizer::with_stopwatch(
            crate::ExtractiveSummarizer::new(counter.clone()),
            Ticking::default(),
        );
        let request = request("We decided to deploy the billing service on port 8080 tonight.", 40);
        timed.summarize(&request).await.unwrap();
        timed.summarize(&request).await.unwrap();
        assert_eq!(timed.name(), crate::extractive::EXTRACTIVE);
        assert!(!timed.paraphrases(), "the wrapped summarizer's answer");
        assert_eq!(
            timed.times(),
            vec![
                (SourceKind::Messages, Duration::from_secs(1)),
                (SourceKind::Messages, Duration::from_secs(1))
            ]
        );
        assert_eq!(timed.total(), Duration::from_secs(2));
    }
}
