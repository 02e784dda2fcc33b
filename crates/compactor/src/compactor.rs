//! The compaction cycle: Level-0 nodes, 2K -> K merges, failures, typed outcomes.
//!
//! Folding is window-aware: a call folds only when the unabridged context is over
//! `trigger_ratio` of the budget, and then until its running estimate is under `target_ratio`,
//! so a short chat in a large window is never folded and a full one is not folded to nothing;
//! `leaf_min_tokens` / `leaf_min_turns` remain a floor against tiny nodes. The summarizer is
//! awaited with no connection held: store calls go through one `spawn_blocking` helper, a
//! per-session mutex serializes compactions in a process, and the store's atomic refusals
//! (`AlreadyCovered`, `AlreadyMerged`, `AlreadyReplaced`) make a second process harmless: a
//! refused write is re-planned, twice refused is `NoProgress`. Any other error of a write, busy
//! or corrupt included, is an error, never a refusal. Failures are counted per session in the
//! database, so `strata compact` re-run against a dead server reaches the `raw-archive`
//! fallback; the first success resets the count and later rounds re-summarize raw archives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::Serialize;
use strata_seam::stats::LlmCall;
use strata_seam::{
    Backend, Level, Memory, Message, NewSummary, NodeId, Role, SessionId, SharedBackend, SummaryNode,
    ToolCall, error_chain,
};
use tracing::Instrument;

use crate::assemble::{self, AssembledContext, Assembler, AssemblyOptions, ContextSnapshot};
use crate::config::{CompactorConfig, CompactorSettings};
use crate::error::{Error, Result, SummarizeError};
use crate::extractive::{ExtractiveSummarizer, RAW_ARCHIVE};
use crate::masking;
use crate::summarizer::{
    Origin, RetryNote, SourceCall, SourceItem, SourceKind, Summarizer, Summary, SummaryRequest, check,
    known_memories, retry_note,
};
use crate::tokens::TokenCounter;

mod cycle;
mod rebuild;

/// What [`Compactor::compact_before_assembly`] did.
#[derive(Debug)]
pub enum BeforeAssembly {
    /// Nothing was left to write: the snapshot that showed it is what the context is laid out
    /// from ([`Assembler::lay_out`]).
    Read {
        /// Why there was nothing to write.
        outcome: Outcome,
        /// What the session's context is laid out from (boxed: it is most of the variant's size).
        snapshot: Box<ContextSnapshot>,
    },
    /// The session had work and the call compacted (or found another process at it): the
    /// context is assembled after it.
    Compacted(Outcome),
}

/// How one [`Compactor::compact`] call ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Nodes were written (or raw archives re-summarized).
    Compacted {
        /// Nodes written: Level-0 nodes and merges, raw archives included.
        nodes_created: u32,
        /// Of those, `raw-archive` digests written because the summarizer was down.
        raw_archived: u32,
        /// Raw-archive nodes given a real summary.
        resummarized: u32,
        /// Messages newly covered by the Level-0 nodes written.
        messages_folded: u64,
        /// Tokens of the unabridged context before the call.
        tokens_before: u64,
        /// Tokens of the unabridged context after it.
        tokens_after: u64,
        /// True when the call stopped at `max_rounds` with work left: call again.
        pending: bool,
    },
    /// Nothing to fold: the context is under `trigger_ratio` of the budget (or was folded down
    /// to `target_ratio`), or the compactable middle is under the `leaf_min_tokens` /
    /// `leaf_min_turns` floor.
    BelowThreshold {
        /// Tokens of the compactable middle.
        middle_tokens: u64,
        /// Whole turns in it.
        middle_turns: u32,
    },
    /// The middle is large enough but nothing in it can be summarized (pinned turns, or runs
    /// too small to shrink).
    NoCandidate,
    /// No round wrote anything: writes were refused twice in a row (another compactor raced
    /// for the same messages), or nothing tried could be written.
    NoProgress {
        /// The last refusal; `None` when no write was refused.
        refused: Option<Refusal>,
    },
    /// The summarizer failed and fewer than `failures_before_raw_archive` consecutive failures
    /// have happened: nothing more was written this time.
    SummarizerDown {
        /// Nodes written before it failed.
        nodes_created: u32,
        /// Consecutive failed calls so far for this session.
        consecutive_failures: u32,
        /// The last error, with its causes.
        error: String,
    },
}

/// What [`Compactor::resummarize`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resummarized {
    /// Nodes given this summarizer's summary.
    pub replaced: u32,
    /// Nodes it wrote already (an earlier run, or the compaction that made them), or that were
    /// rewritten by another writer meanwhile.
    pub unchanged: u32,
    /// Why the run stopped early (the summarizer failed), with its causes; `None` when every
    /// node was done.
    pub stopped: Option<String>,
}

/// Keeps sessions inside the window: compacts them and assembles their context.
///
/// Cheap to clone; clones share the per-session locks and failure counts. It holds no database
/// connection between calls, and never while the summarizer runs.
#[derive(Clone, Debug)]
pub struct Compactor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: SharedBackend,
    assembler: Assembler,
    config: CompactorSettings,
    counter: TokenCounter,
    summarizer: Arc<dyn Summarizer>,
    archiver: ExtractiveSummarizer,
    locks: Mutex<HashMap<SessionId, Arc<tokio::sync::Mutex<()>>>>,
    failures: Mutex<HashMap<SessionId, u32>>,
}

/// The result of asking for one summary.
enum Step {
    Written { summary: Summary, tokens: u32, summarizer: String },
    Failed { error: SummarizeError, consecutive: u32 },
}

/// A write the store refused because another writer got there first (its atomic refusals);
/// the compaction plans again from what is stored now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Refusal {
    /// A message of the chunk was covered by another Level-0 node.
    AlreadyCovered {
        /// The first covered seq found.
        seq: i64,
        /// The node that covers it.
        node: NodeId,
    },
    /// A root to merge had a parent already.
    AlreadyMerged {
        /// The root.
        node: NodeId,
        /// Its parent.
        parent: NodeId,
    },
    /// A raw archive was given a summary by another writer.
    AlreadyReplaced {
        /// The node.
        node: NodeId,
        /// Who wrote its summary.
        summarizer: String,
    },
}

impl Refusal {
    /// The refusal `err` is, if it is one. Anything else (busy, corrupt, a full disk) is an
    /// error, never a refusal.
    fn of(err: &Error) -> Option<Refusal> {
        match err {
            Error::Store(strata_seam::Error::AlreadyCovered { seq, node, .. }) => {
                Some(Refusal::AlreadyCovered { seq: *seq, node: *node })
            }
            Error::Store(strata_seam::Error::AlreadyMerged { node, parent }) => {
                Some(Refusal::AlreadyMerged { node: *node, parent: *parent })
            }
            Error::Store(strata_seam::Error::AlreadyReplaced { node, summarizer }) => {
                Some(Refusal::AlreadyReplaced { node: *node, summarizer: summarizer.clone() })
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::AlreadyCovered { seq, node } => {
                write!(f, "message seq {seq} is already covered by node {node}")
            }
            Refusal::AlreadyMerged { node, parent } => {
                write!(f, "node {node} was already merged into node {parent}")
            }
            Refusal::AlreadyReplaced { node, summarizer } => {
                write!(f, "node {node} was already rewritten by {summarizer:?}")
            }
        }
    }
}

/// A message as a summarizer sees it: its text, and its tool calls with their arguments on
/// one line.
fn source_item(message: &Message) -> SourceItem {
    let calls = ToolCall::parse_all(message.tool_calls.as_ref())
        .into_iter()
        .map(|call| {
            let name = if call.name.is_empty() { "tool".to_owned() } else { call.name };
            let arguments = match &call.arguments {
                serde_json::Value::Object(map) => map
                    .iter()
                    .map(|(key, value)| match value {
                        serde_json::Value::String(s) => format!("{key}={s}"),
                        other => format!("{key}={other}"),
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
                serde_json::Value::String(text) => text.clone(),
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            };
            let arguments = crate::summarizer::truncate_chars(&arguments, SourceCall::MAX_ARGUMENT_CHARS);
            SourceCall { name, arguments }
        })
        .collect();
    SourceItem {
        reference: format!("message {} (seq {})", message.id, message.seq),
        origin: Origin::Message(message.role),
        name: match message.role {
            Role::Tool => None,
            _ => message.name.clone(),
        },
        tool: match message.role {
            Role::Tool => message.name.clone(),
            _ => None,
        },
        calls,
        time: message.created_at,
        text: message.content.clone(),
    }
}

fn node_item(node: &SummaryNode) -> SourceItem {
    SourceItem {
        reference: format!(
            "node {} (level {}, seq {}-{})",
            node.id, node.level, node.first_seq, node.last_seq
        ),
        origin: Origin::Summary,
        name: None,
        tool: None,
        calls: Vec::new(),
        time: node.start_time,
        text: format!("{}\n{}", node.headline, node.body),
    }
}

impl Compactor {
    /// A compactor over `store` with `config`, validated here ([`CompactorSettings::new`]);
    /// see [`Compactor::with_settings`].
    pub fn new(
        store: impl Into<SharedBackend>,
        config: CompactorConfig,
        summarizer: Arc<dyn Summarizer>,
    ) -> Result<Compactor> {
        Compactor::with_settings(store, CompactorSettings::new(config)?, summarizer)
    }

    /// A compactor over `store` with settings validated before. Its token encoding is recorded
    /// as the database's, or refused when the database counts with another
    /// ([`Error::EncodingMismatch`]).
    pub fn with_settings(
        store: impl Into<SharedBackend>,
        config: CompactorSettings,
        summarizer: Arc<dyn Summarizer>,
    ) -> Result<Compactor> {
        let store = store.into();
        let counter = config.token_counter();
        // Compaction writes counts: the database's encoding is recorded if it has none.
        counter.claim(&*store)?;
        Ok(Compactor {
            inner: Arc::new(Inner {
                assembler: Assembler::new(store.clone(), config.clone())?,
                store,
                archiver: ExtractiveSummarizer::new(counter.clone()),
                counter,
                config,
                summarizer,
                locks: Mutex::new(HashMap::new()),
                failures: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &CompactorConfig {
        &self.inner.config
    }

    /// The tokenizer of the configured model.
    pub fn counter(&self) -> &TokenCounter {
        &self.inner.counter
    }

    /// The name of the summarizer this compactor writes with (stored on every node it writes).
    pub fn summarizer_name(&self) -> &str {
        self.inner.summarizer.name()
    }

    /// The database.
    pub fn store(&self) -> &SharedBackend {
        &self.inner.store
    }

    /// Runs `f` on the store in tokio's blocking pool: the one way async code here reaches the
    /// synchronous store, so no connection is ever held across an `.await`.
    async fn blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Backend) -> Result<T> + Send + 'static,
    {
        let store = self.inner.store.clone();
        tokio::task::spawn_blocking(move || f(&*store)).await.map_err(Error::Join)?
    }

    fn session_lock(&self, session: SessionId) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.inner.locks.lock().unwrap_or_else(PoisonError::into_inner);
        locks.entry(session).or_default().clone()
    }

    fn failures(&self, session: SessionId) -> u32 {
        *self.inner.failures.lock().unwrap_or_else(PoisonError::into_inner).get(&session).unwrap_or(&0)
    }

    /// Records the count in memory and in the database, so another process (the next
    /// `strata compact`) continues from it. Failing to record it only costs the fallback's
    /// timing, so a store error is logged, not returned.
    async fn set_failures(&self, session: SessionId, count: u32) {
        let previous =
            self.inner.failures.lock().unwrap_or_else(PoisonError::into_inner).insert(session, count);
        if previous == Some(count) {
            return;
        }
        if let Err(error) =
            self.blocking(move |store| Ok(store.set_summarizer_failures(session, count)?)).await
        {
            tracing::warn!(%session, error = %error_chain(&error), "cannot record the summarizer failures");
        }
    }

    /// Consecutive failed summarizer calls for a session (0 once a call succeeds).
    pub fn consecutive_failures(&self, session: SessionId) -> u32 {
        self.failures(session)
    }

    /// Asks the summarizer for one summary and passes it through the quality gate; a rejected
    /// summary is counted (per reason, in the database) and asked for again up to
    /// `summary_retries` times with a note of what was wrong. Falls back to a raw archive after
    /// `failures_before_raw_archive` consecutive failures. `archiving` is set once that
    /// happens, so the rest of the call does not wait on a summarizer known to be down.
    async fn summarize(&self, session: SessionId, request: &SummaryRequest, archiving: &mut bool) -> Step {
        let config = &self.inner.config;
        if !*archiving {
            match self.summarize_gated(session, request).await {
                Ok((summary, tokens)) => {
                    self.set_failures(session, 0).await;
                    let summarizer = self.inner.summarizer.name().to_owned();
                    return Step::Written { summary, tokens, summarizer };
                }
                Err(error) => {
                    let consecutive = self.failures(session).saturating_add(1);
                    self.set_failures(session, consecutive).await;
                    // The caller gets the failure as `Outcome::SummarizerDown` and reports it.
                    tracing::info!(%session, consecutive, error = %error_chain(&error), "summarizer failed");
                    if consecutive < config.failures_before_raw_archive {
                        return Step::Failed { error, consecutive };
                    }
                    *archiving = true;
                }
            }
        }
        let digest = self.inner.archiver.raw_archive(request);
        match check(digest, request, &config.gate(false), &self.inner.counter) {
            Ok((summary, tokens)) => Step::Written { summary, tokens, summarizer: RAW_ARCHIVE.to_owned() },
            Err(error) => Step::Failed { error, consecutive: self.failures(session) },
        }
    }

    /// One summary through the quality gate: a rejected summary is counted (per reason, in the
    /// database) and asked for again up to `summary_retries` times with a note of what was
    /// wrong. Returns the accepted summary and its tokens.
    async fn summarize_gated(
        &self,
        session: SessionId,
        request: &SummaryRequest,
    ) -> Result<(Summary, u32), SummarizeError> {
        let config = &self.inner.config;
        let summarizer = &self.inner.summarizer;
        let gate = config.gate(summarizer.paraphrases());
        let span = tracing::info_span!(
            "summarize",
            %session,
            summarizer = summarizer.name(),
            kind = ?request.kind,
            level = request.level.0,
            tokens_in = request.source_tokens,
        );
        let mut request = std::borrow::Cow::Borrowed(request);
        let mut rejections = 0u32;
        let result = loop {
            let result = summarizer
                .summarize(&request)
                .instrument(span.clone())
                .await
                .map(|summary| masking::summary(summary, &config.secrets))
                .and_then(|summary| check(summary, &request, &gate, &self.inner.counter));
            self.record_usage(&request, result.as_ref().ok().map(|(_, tokens)| *tokens)).await;
            let Err(error) = &result else { break result };
            let Some(reason) = error.reject_reason() else { break result };
            span.in_scope(
                || tracing::info!(reason = reason.as_str(), error = %error_chain(error), "summary rejected"),
            );
            let name = summarizer.name().to_owned();
            let counted =
                self.blocking(move |store| Ok(store.count_rejection(&name, reason.as_str())?)).await;
            if let Err(count_error) = counted {
                tracing::warn!(error = %error_chain(&count_error), "could not count a rejected summary");
            }
            rejections += 1;
            // An unreadable reply was retried inside the summarizer already; a gate rejection
            // is asked for again here, with what was wrong.
            let gate_rejection = matches!(error, SummarizeError::Rejected { .. });
            let note = retry_note(error).filter(|_| gate_rejection);
            let Some(note) = note.filter(|_| rejections <= config.summary_retries) else {
                break result;
            };
            request.to_mut().retry = Some(RetryNote { rejections, note });
        };
        if let Ok((_, tokens_out)) = &result {
            span.in_scope(|| tracing::debug!(tokens_out, rejections, "summary accepted"));
        }
        result
    }

    /// Records the calls the summarizer made for `request` (its usage log, drained), beside
    /// strata's counts: the request's source tokens, and the accepted summary's tokens on the
    /// call that wrote it. A summarizer shared by concurrent compactions may log another's
    /// calls here; the totals per summarizer, model and day stay right. Failing to record only
    /// loses the accounting, so it is logged, not returned.
    async fn record_usage(&self, request: &SummaryRequest, accepted_tokens: Option<u32>) {
        let Some(log) = self.inner.summarizer.usage_log() else { return };
        let calls = log.drain();
        if calls.is_empty() {
            return;
        }
        let caller = self.inner.summarizer.name().to_owned();
        let now = Utc::now();
        let last = calls.len() - 1;
        let calls: Vec<LlmCall> = calls
            .into_iter()
            .enumerate()
            .map(|(index, call)| LlmCall {
                at: now,
                purpose: "summary".to_owned(),
                caller: caller.clone(),
                model: call.model,
                ok: call.ok,
                prompt_tokens: call.prompt_tokens,
                completion_tokens: call.completion_tokens,
                counted_prompt_tokens: Some(u64::from(request.source_tokens)),
                counted_completion_tokens: accepted_tokens
                    .filter(|_| index == last && call.ok)
                    .map(u64::from),
                millis: call.elapsed.as_millis() as u64,
            })
            .collect();
        if let Err(error) = self.blocking(move |store| Ok(store.record_llm_calls(&calls)?)).await {
            tracing::warn!(error = %error_chain(&error), "cannot record the summarizer's usage");
        }
    }

    fn request(
        &self,
        persona: &str,
        kind: SourceKind,
        level: Level,
        mut items: Vec<SourceItem>,
        source_tokens: u64,
    ) -> SummaryRequest {
        let source_tokens = u32::try_from(source_tokens).unwrap_or(u32::MAX);
        let config = &self.inner.config;
        // A summarizer never reads a pasted key: an LLM provider is not sent it, and an
        // extractive summary or a raw archive cannot copy it.
        masking::sources(&mut items, &config.secrets);
        let mut target = config.summary_target_tokens;
        if kind == SourceKind::Messages {
            // A short chunk (a session's last, one cut short by a pin) is summarized at the
            // ratio of a full one, down to a quarter of the target: a fixed size would make
            // its summary a third of it.
            let proportional = u64::from(source_tokens) * u64::from(config.summary_target_tokens)
                / u64::from(config.leaf_chunk_tokens.max(1));
            target = target.min((proportional as u32).max(config.summary_target_tokens / 4));
        }
        SummaryRequest {
            kind,
            level,
            persona: persona.to_owned(),
            items,
            source_tokens,
            // At most the gate's share of the sources: a summarizer that hits its target passes
            // the compression rule.
            target_tokens: target.min((f64::from(source_tokens) * config.summary_max_share) as u32).max(16),
            retry: None,
            known_memories: Vec::new(),
        }
    }

    /// `request` showing the persona's live `memories` that fit `known_memory_tokens`, when it
    /// summarizes messages: the summaries that propose memory updates (merges propose none).
    fn showing_memories(&self, mut request: SummaryRequest, memories: &[Memory]) -> SummaryRequest {
        if request.kind == SourceKind::Messages {
            let config = &self.inner.config;
            let now = Utc::now();
            let live: Vec<Memory> = memories
                .iter()
                .filter(|m| !config.memory_ttls.is_memory_expired(m, now) && !m.ended_by(now))
                .cloned()
                .collect();
            request.known_memories =
                known_memories(&live, &request.items, config.known_memory_tokens, &self.inner.counter);
        }
        request
    }

    /// Tokens of the session's unabridged context (head, scaffold, every uncovered message):
    /// what `trigger_ratio` and `target_ratio` are compared with.
    pub async fn context_size(&self, session: SessionId) -> Result<u64> {
        let config = self.inner.config.clone();
        let counter = self.inner.counter.clone();
        self.blocking(move |store| {
            let outline = store.live_outline(session, i64::from(config.head_messages))?;
            let roots = store.roots(session, None)?;
            Ok(assemble::unabridged_tokens(&outline, &roots, &config, &counter))
        })
        .await
    }

    /// Runs the compaction cycle for a session: merges wherever 2K roots of a level exist,
    /// folds the oldest whole turns of the middle into Level-0 nodes while the middle is over
    /// the threshold, then re-summarizes raw archives; at most `max_rounds` summaries per call.
    ///
    /// One compaction per session runs at a time within this process (an async lock); another
    /// process racing for the same messages is refused by the store and re-planned around.
    pub async fn compact(&self, session: SessionId) -> Result<Outcome> {
        self.compact_rounds(session, self.inner.config.max_rounds).await
    }

    /// Like [`Compactor::compact`], with at most `max_rounds` summaries instead of the
    /// configured number: bulk imports compact in one call, reading the session once.
    pub async fn compact_rounds(&self, session: SessionId, max_rounds: u32) -> Result<Outcome> {
        in_compact_span(session, self.compact_in_span(session, max_rounds.max(1)), |outcome| outcome).await
    }

    /// [`Compactor::compact`], then what the context at `now` is laid out from when the call
    /// had nothing to write: what a request's turn does. The check that there is nothing to
    /// write (most requests) reads in assembly's snapshot, so such a call reads the session
    /// once; with work, the caller reads after the compaction (and whatever it does after one).
    pub async fn compact_before_assembly(
        &self,
        session: SessionId,
        now: DateTime<Utc>,
    ) -> Result<BeforeAssembly> {
        in_compact_span(session, self.check_in_snapshot(session, now), |before| match before {
            BeforeAssembly::Read { outcome, .. } | BeforeAssembly::Compacted(outcome) => outcome,
        })
        .await
    }

    /// The request that summarizes a node's sources again: its messages, or its children.
    async fn node_request(&self, node: &SummaryNode, persona: &str) -> Result<SummaryRequest> {
        let (id, level, owner) = (node.id, node.level, persona.to_owned());
        let (items, tokens, memories) = self
            .blocking(move |store| {
                Ok(if level == Level::LEAF {
                    let messages = store.covered_messages(id)?;
                    let tokens: u64 = messages.iter().map(|m| u64::from(m.token_count)).sum();
                    let memories = store.memories(&owner, None)?;
                    (messages.iter().map(source_item).collect::<Vec<_>>(), tokens, memories)
                } else {
                    let children = store.children(id)?;
                    let tokens: u64 = children.iter().map(|c| u64::from(c.token_count)).sum();
                    (children.iter().map(node_item).collect(), tokens, Vec::new())
                })
            })
            .await?;
        let kind = if level == Level::LEAF { SourceKind::Messages } else { SourceKind::Summaries };
        Ok(self.showing_memories(self.request(persona, kind, level, items, tokens), &memories))
    }

    /// Replaces the summaries of a session's nodes with this compactor's summarizer's, bottom-up
    /// (every Level-0 node, then the merges above them, so a merge reads its children's new
    /// text), or of one level only. Nodes this summarizer wrote already are left alone, which
    /// makes a run that was interrupted resumable: run it again and it goes on where it
    /// stopped. Each node is replaced by compare-and-swap on the summarizer that wrote it, so a
    /// compaction racing it loses nothing. Stops at the first summarizer failure (no raw
    /// archives here: the old summary is better than none); `progress` hears each node done.
    pub async fn resummarize(
        &self,
        session: SessionId,
        level: Option<Level>,
        mut progress: impl FnMut(&SummaryNode),
    ) -> Result<Resummarized> {
        let lock = self.session_lock(session);
        let _guard = lock.lock().await;
        let name = self.inner.summarizer.name().to_owned();
        let (persona, nodes) = self
            .blocking(move |store| Ok((store.session_by_id(session)?.persona, store.nodes(session)?)))
            .await?;
        let top = nodes.iter().map(|node| node.level).max().unwrap_or(Level::LEAF);
        let levels = match level {
            Some(level) => level.0..=level.0,
            None => 0..=top.0,
        };
        let mut done = Resummarized::default();
        for level in levels.map(Level) {
            // Read each level when its turn comes: the level below was just rewritten.
            let nodes = self
                .blocking(move |store| Ok(store.nodes(session)?))
                .await?
                .into_iter()
                .filter(|node| node.level == level);
            for node in nodes {
                if node.summarizer == name {
                    done.unchanged += 1;
                    continue;
                }
                let request = self.node_request(&node, &persona).await?;
                let (summary, tokens) = match self.summarize_gated(session, &request).await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        done.stopped = Some(error_chain(&error));
                        return Ok(done);
                    }
                };
                let new = NewSummary {
                    headline: summary.headline,
                    body: summary.body,
                    token_count: tokens,
                    summarizer: name.clone(),
                    memory_updates: summary.memory_updates,
                };
                let (id, expected) = (node.id, node.summarizer.clone());
                match self.blocking(move |store| Ok(store.replace_summary(id, &expected, &new)?)).await {
                    Ok(written) => {
                        done.replaced += 1;
                        progress(&written);
                    }
                    // Rewritten meanwhile (a raw archive summarized by a compaction): skip it.
                    Err(Error::Store(strata_seam::Error::AlreadyReplaced { .. })) => done.unchanged += 1,
                    Err(error) => return Err(error),
                }
            }
        }
        Ok(done)
    }

    /// The context to send for a session at time `now` (which decides which user preferences
    /// have expired): head, scaffold, acknowledgement, buffer and tail, inside the budget.
    /// See [`Assembler::assemble_blocking`]: no compaction lock is taken.
    pub async fn assemble(&self, session: SessionId, now: DateTime<Utc>) -> Result<AssembledContext> {
        let assembler = self.inner.assembler.clone();
        self.blocking(move |_| assembler.assemble_blocking(session, now)).await
    }

    /// What the context of `session` is laid out from, as `options` ask (a request that is not
    /// stored: a dry run), read on the blocking pool ([`Assembler::read`]); the caller adds the
    /// recalled block and lays it out ([`Assembler::lay_out`]).
    pub async fn read_context(
        &self,
        session: SessionId,
        options: AssemblyOptions,
    ) -> Result<ContextSnapshot> {
        let assembler = self.inner.assembler.clone();
        self.blocking(move |_| assembler.read(session, &options)).await
    }

    /// [`Compactor::assemble`] for callers without an async runtime (tests).
    pub fn assemble_blocking(&self, session: SessionId, now: DateTime<Utc>) -> Result<AssembledContext> {
        self.inner.assembler.assemble_blocking(session, now)
    }

    /// The assembler, which the compactor's own [`Compactor::assemble`] uses.
    pub fn assembler(&self) -> &Assembler {
        &self.inner.assembler
    }
}

/// How a compaction call ended, logged in its `compact` span.
/// Runs a compaction call in its `compact` span and logs there how it ended.
async fn in_compact_span<T>(
    session: SessionId,
    call: impl Future<Output = Result<T>>,
    outcome: impl FnOnce(&T) -> &Outcome,
) -> Result<T> {
    let span = tracing::info_span!("compact", %session);
    let ended = call.instrument(span.clone()).await;
    span.in_scope(|| log_outcome(ended.as_ref().map(outcome)));
    ended
}

fn log_outcome(outcome: std::result::Result<&Outcome, &Error>) {
    match outcome {
        Ok(outcome) => tracing::info!(?outcome, "compaction finished"),
        Err(error) => tracing::warn!(%error, "compaction failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_stores_three_refusals_are_refusals() {
        let merged = Error::Store(strata_seam::Error::AlreadyMerged { node: NodeId(3), parent: NodeId(9) });
        let refusal = Refusal::of(&merged).unwrap();
        assert_eq!(refusal, Refusal::AlreadyMerged { node: NodeId(3), parent: NodeId(9) });
        assert_eq!(refusal.to_string(), "node 3 was already merged into node 9");
        let outcome = serde_json::to_value(Outcome::NoProgress { refused: Some(refusal) }).unwrap();
        assert_eq!(outcome["refused"]["refusal"], "already_merged");
        // Anything else a write can fail with stops the compaction as an error.
        let missing = Error::Store(strata_seam::Error::NotFound(strata_seam::Missing::Node(NodeId(3))));
        assert_eq!(Refusal::of(&missing), None);
        assert_eq!(Refusal::of(&Error::Config { field: "k", reason: "x".into() }), None);
    }
}
