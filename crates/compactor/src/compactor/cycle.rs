//! One compaction call, step by step: read the session once ([`Compactor::begin`]), then each
//! round chooses a summary to write ([`Compactor::next_write`]: a merge, a Level-0 chunk or a
//! raw archive's real summary) and writes it ([`Compactor::record`]), and the call ends with
//! its outcome ([`Compactor::finish`]).
//!
//! A write the store refuses (another writer covered the messages or merged the roots first)
//! makes the call read the session again; two refusals in a row end it. Any other error a
//! write meets (a busy or corrupt database, a full disk) ends the call as that error.

use std::collections::VecDeque;
use std::sync::PoisonError;

use chrono::{DateTime, Utc};
use strata_seam::backend::CompactionState;
use strata_seam::{
    Level, Memory, Message, MessageOutline, NewSummary, NodeId, SessionId, Snapshot, SummaryNode, error_chain,
};

use super::{BeforeAssembly, Compactor, Outcome, Refusal, Step, node_item, source_item};
use crate::CompactorSettings;
use crate::assemble;
use crate::error::{Error, Result};
use crate::extractive::RAW_ARCHIVE;
use crate::plan::{Chunk, Plan};
use crate::summarizer::{SourceKind, SummaryRequest};

/// Level-0 nodes written per transaction at most: a bulk compaction commits once per batch
/// instead of once per node (their search-index entries wait for the end of the call).
const LEAF_BATCH: usize = 8;

/// Chunks whose messages one read fetches: each read is a hop to the blocking pool and back,
/// which on these virtual machines cost more than reading the rows.
const READ_AHEAD_CHUNKS: i64 = 8;

/// What one compaction call knows of its session and has done so far.
struct Call {
    session: SessionId,
    persona: String,
    /// The persona's memories, shown to the summaries of messages: read when the first chunk
    /// is summarized (most calls summarize none), before any of the call's own summaries
    /// (memories settle after a compaction, so those add none).
    memories: Option<Vec<Memory>>,
    /// The context was over the trigger when the call began, so Level-0 chunks are folded.
    folding: bool,
    /// Chunks are folded until the context is down to this many tokens.
    target: u64,
    /// Tokens of the unabridged context when the call began.
    tokens_before: u64,
    /// The context's size, following the call's own writes (a chunk's tokens out, its node's
    /// in), so the session is not counted again each round.
    estimate: u64,
    /// The session as last read, kept up to date by the call's own writes; `None` after a
    /// refusal or a rewritten node, to be read again.
    known: Option<Planning>,
    /// Level-0 summaries not written yet.
    batch: LeafBatch,
    /// Messages read ahead of the chunks that will fold them, in seq order. What a summary
    /// reads of a message (its text, sender, calls and time) never changes once stored, so a
    /// read stays true however long it waits.
    ahead: VecDeque<Message>,
    /// The summarizer is down: the rest of the call writes raw archives without asking it.
    archiving: bool,
    /// Writes refused in a row.
    refusals: u32,
    done: Tally,
}

/// What a call has written.
#[derive(Default)]
struct Tally {
    created: u32,
    archived: u32,
    resummarized: u32,
    folded: u64,
}

impl Call {
    /// A write was refused: the session is read again before the next write, and a second
    /// refusal in a row ends the call.
    fn refused(&mut self, refusal: Refusal) -> Option<Outcome> {
        self.known = None;
        self.refusals += 1;
        (self.refusals >= 2).then_some(Outcome::NoProgress { refused: Some(refusal) })
    }

    fn planning(&mut self) -> &mut Planning {
        self.known.as_mut().expect("the session is read at the start of every round")
    }
}

/// What the session looks like to a call: the live outline, the roots and the plan.
struct Planning {
    outline: Vec<MessageOutline>,
    roots: Vec<SummaryNode>,
    plan: Plan,
}

impl Planning {
    fn read(
        reader: &dyn Snapshot,
        session: SessionId,
        config: &CompactorSettings,
    ) -> strata_seam::Result<Planning> {
        let outline = reader.live_outline(session, i64::from(config.head_messages))?;
        let roots = reader.roots(session, None)?;
        let plan = Plan::new(&outline, config);
        Ok(Planning { outline, roots, plan })
    }
}

/// What a call reads before it decides whether there is anything to write.
struct Start {
    persona: String,
    state: CompactionState,
    planning: Planning,
}

impl Start {
    fn read(
        reader: &dyn Snapshot,
        session: SessionId,
        config: &CompactorSettings,
    ) -> strata_seam::Result<Start> {
        Ok(Start {
            persona: reader.session(session)?.persona,
            state: reader.compaction_state(session)?,
            planning: Planning::read(reader, session, config)?,
        })
    }
}

/// What a summary is written to.
#[derive(Debug)]
enum Target {
    Leaf(Chunk),
    Merge(Vec<NodeId>),
    Replace(NodeId),
}

/// What a round found to write, or why there is nothing.
enum Next {
    Write(Step, Target),
    /// Nothing to write; the outcome says why (`None`: no reason beyond that).
    Nothing(Option<Outcome>),
}

/// What a round chose to write, before summarizing it ([`Compactor::choose`]).
enum Choice {
    /// The oldest K of a level's 2K roots, merged one level up.
    Merge(Vec<SummaryNode>),
    /// The next Level-0 chunk.
    Chunk(Chunk),
    /// Nothing to fold (the outcome says why); a raw archive, if any, is summarized again.
    Archive(Outcome),
    /// Nothing to write; the outcome says why.
    Nothing(Outcome),
}

/// Whether the call goes on after a round.
enum Flow {
    Continue,
    /// The call ends early; the outcome says why when there is a reason to report.
    Stop(Option<Outcome>),
}

/// Level-0 summaries not yet written.
#[derive(Default)]
struct LeafBatch {
    leaves: Vec<(i64, i64, NewSummary)>,
    folded: u64,
    archived: u32,
}

impl LeafBatch {
    fn push(&mut self, chunk: &Chunk, summary: NewSummary, folded: u64, raw: bool) {
        self.leaves.push((chunk.first_seq, chunk.last_seq, summary));
        self.folded += folded;
        self.archived += u32::from(raw);
    }
}

/// The oldest K roots of the lowest level that has at least 2K roots.
fn merge_candidate(roots: &[SummaryNode], k: usize) -> Option<Vec<SummaryNode>> {
    let top = roots.iter().map(|node| node.level).max()?;
    (0..=top.0).map(Level).find_map(|level| {
        let of_level: Vec<&SummaryNode> = roots.iter().filter(|node| node.level == level).collect();
        (of_level.len() >= 2 * k).then(|| of_level[..k].iter().map(|node| (*node).clone()).collect())
    })
}

/// The refusal a failed write is, logged; any other error is returned as it is.
fn refusal(session: SessionId, err: Error) -> Result<Refusal> {
    let Some(refusal) = Refusal::of(&err) else { return Err(err) };
    tracing::info!(%session, %refusal, "write refused, re-planning");
    Ok(refusal)
}

impl Compactor {
    /// See [`Compactor::compact_rounds`]: the call under its span, at most `max_rounds`
    /// summaries.
    pub(super) async fn compact_in_span(&self, session: SessionId, max_rounds: u32) -> Result<Outcome> {
        let lock = self.session_lock(session);
        let _guard = lock.lock().await;
        // Most calls (one per request) find nothing to write, and a call that writes nothing
        // needs no lease: taking and giving it back would be two more round trips to a
        // PostgreSQL server on every request.
        if max_rounds > 0
            && let Some(idle) = self.idle(session, self.start(session).await?)
        {
            return Ok(idle);
        }
        self.compact_leased(session, max_rounds).await
    }

    /// See [`Compactor::compact_before_assembly`]: the check in assembly's snapshot, and the
    /// call under its span when the check finds work.
    pub(super) async fn check_in_snapshot(
        &self,
        session: SessionId,
        now: DateTime<Utc>,
    ) -> Result<BeforeAssembly> {
        let lock = self.session_lock(session);
        let guard = lock.lock().await;
        let assembler = self.inner.assembler.clone();
        let (snapshot, state) = self
            .blocking(move |_| assembler.read_also(session, now, |reader| reader.compaction_state(session)))
            .await?;
        // Assembly read the live outline and the roots a compaction plans over.
        let planning = Planning {
            outline: snapshot.outline.clone(),
            roots: snapshot.roots.clone(),
            plan: snapshot.plan.clone(),
        };
        let start = Start { persona: snapshot.persona.clone(), state, planning };
        if let Some(outcome) = self.idle(session, start) {
            drop(guard);
            return Ok(BeforeAssembly::Read { outcome, snapshot: Box::new(snapshot) });
        }
        let outcome = self.compact_leased(session, self.inner.config.max_rounds.max(1)).await?;
        Ok(BeforeAssembly::Compacted(outcome))
    }

    /// The call's writes, under the session's lease. Across processes (a fleet on one
    /// PostgreSQL database, two `strata compact` on one file), while another process compacts
    /// the session this call leaves the work to that one and writes nothing. The lease dies
    /// with its holder. What was read before it is read again under it: another process may
    /// have written meanwhile.
    async fn compact_leased(&self, session: SessionId, max_rounds: u32) -> Result<Outcome> {
        let Some(lease) = self.blocking(move |store| Ok(store.compaction_lease(session)?)).await? else {
            tracing::debug!(%session, "another process is compacting this session");
            return Ok(Outcome::NoProgress { refused: None });
        };
        let outcome = self.compact_rounds_leased(session, max_rounds).await;
        // Given back in the blocking pool, before the next compaction of this process asks.
        tokio::task::spawn_blocking(move || drop(lease)).await.map_err(Error::Join)?;
        outcome
    }

    async fn compact_rounds_leased(&self, session: SessionId, max_rounds: u32) -> Result<Outcome> {
        let mut call = self.begin(session, self.start(session).await?);
        let mut ended = None;
        for _round in 0..max_rounds {
            if let Flow::Stop(why) = self.round(&mut call).await? {
                ended = Some(why);
                break;
            }
        }
        self.finish(call, ended).await
    }

    /// A call over what was read at its start: the persona, the failures an earlier process
    /// recorded, the plan, and from these the context's size, which decides whether the call
    /// folds at all.
    fn begin(&self, session: SessionId, start: Start) -> Call {
        let Start { persona, state, planning } = start;
        // Failures recorded by an earlier process count toward the raw-archive fallback.
        self.inner
            .failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session, state.summarizer_failures);
        let config = &self.inner.config;
        let tokens_before =
            assemble::unabridged_tokens(&planning.outline, &planning.roots, config, &self.inner.counter);
        // Window-aware: fold only when the context would pass the trigger, and then down to
        // the target, or deeper when the next `turns_between_compactions` turns would not fit
        // under the trigger otherwise: every compaction changes the prompt's prefix.
        let (trigger, target) = config.trigger_and_target();
        let room_for_turns = u64::from(config.turns_between_compactions)
            * recent_turn_tokens(&planning.outline, planning.plan.head_end);
        let target = target.min(trigger.saturating_sub(room_for_turns));
        Call {
            session,
            persona,
            memories: None,
            folding: tokens_before > trigger,
            target,
            tokens_before,
            estimate: tokens_before,
            known: Some(planning),
            batch: LeafBatch::default(),
            ahead: VecDeque::new(),
            archiving: false,
            refusals: 0,
            done: Tally::default(),
        }
    }

    /// What a call reads of the session before it decides, in one snapshot.
    async fn start(&self, session: SessionId) -> Result<Start> {
        let config = self.inner.config.clone();
        self.blocking(move |store| {
            Ok(strata_seam::read_consistent(store, |reader| Start::read(reader, session, &config))?)
        })
        .await
    }

    /// What the session looks like now: the live outline, the roots and the plan.
    async fn planning(&self, session: SessionId) -> Result<Planning> {
        let config = self.inner.config.clone();
        self.blocking(move |store| {
            Ok(strata_seam::read_consistent(store, |reader| Planning::read(reader, session, &config))?)
        })
        .await
    }

    /// Why a call that starts from `start` would have nothing to write, when it would have
    /// none: [`Compactor::choose`] finds nothing, or only a raw archive to summarize again
    /// where the session holds none.
    fn idle(&self, session: SessionId, start: Start) -> Option<Outcome> {
        let raw_archive = start.state.raw_archive;
        match self.choose(&mut self.begin(session, start)) {
            Choice::Merge(_) | Choice::Chunk(_) => None,
            Choice::Archive(_) if raw_archive => None,
            Choice::Archive(why) | Choice::Nothing(why) => Some(why),
        }
    }

    /// What a round writes next, from what the call knows of the session (no store read, no
    /// summarizer call): a merge wherever 2K roots of a level exist (merges keep the scaffold
    /// short), else the next Level-0 chunk while the context is over its target, else a raw
    /// archive's real summary, if one is there.
    fn choose(&self, call: &mut Call) -> Choice {
        let k = self.inner.config.context_consolidation_k as usize;
        if let Some(children) = merge_candidate(&call.planning().roots, k) {
            return Choice::Merge(children);
        }
        match self.next_chunk(call) {
            Ok(chunk) => Choice::Chunk(chunk),
            Err(why) if !call.archiving && self.failures(call.session) == 0 => Choice::Archive(why),
            Err(why) => Choice::Nothing(why),
        }
    }

    /// One round: the batched leaves written when due, then one summary chosen and written.
    async fn round(&self, call: &mut Call) -> Result<Flow> {
        if let Some(refused) = self.write_due_leaves(call).await? {
            return Ok(Flow::Stop(Some(refused)));
        }
        if call.known.is_none() {
            call.known = Some(self.planning(call.session).await?);
        }
        match self.next_write(call).await? {
            Next::Write(step, target) => self.record(call, step, target).await,
            Next::Nothing(why) => Ok(Flow::Stop(why)),
        }
    }

    /// Writes the batched Level-0 nodes when the batch is full, or before a merge could take
    /// them. Returns why the call stops, when a second refusal in a row ends it.
    async fn write_due_leaves(&self, call: &mut Call) -> Result<Option<Outcome>> {
        let batched = call.batch.leaves.len();
        let k = self.inner.config.context_consolidation_k as usize;
        let merge_ready = call.known.as_ref().is_some_and(|planning| planning.roots.len() + batched >= 2 * k);
        if batched == 0 || (batched < LEAF_BATCH && !merge_ready) {
            return Ok(None);
        }
        Ok(match self.write_leaves(call).await? {
            Some(refused) => call.refused(refused),
            None => {
                call.refusals = 0;
                None
            }
        })
    }

    /// Writes the batched Level-0 nodes in one transaction; they join the known roots and the
    /// tally. A refusal (another compactor covered some of the messages) drops them, and the
    /// session is read again.
    async fn write_leaves(&self, call: &mut Call) -> Result<Option<Refusal>> {
        let session = call.session;
        let LeafBatch { leaves, folded, archived } = std::mem::take(&mut call.batch);
        match self.blocking(move |store| Ok(store.insert_leaves(session, &leaves)?)).await {
            Ok(nodes) => {
                call.done.created += nodes.len() as u32;
                call.done.folded += folded;
                call.done.archived += archived;
                if let Some(planning) = call.known.as_mut() {
                    planning.roots.extend(nodes);
                }
                Ok(None)
            }
            Err(err) => {
                let refused = refusal(session, err)?;
                call.known = None;
                Ok(Some(refused))
            }
        }
    }

    /// The summary a round writes ([`Compactor::choose`]), summarized.
    async fn next_write(&self, call: &mut Call) -> Result<Next> {
        let why = match self.choose(call) {
            Choice::Merge(children) => {
                let level = children[0].level.up();
                let source: u64 = children.iter().map(|node| u64::from(node.token_count)).sum();
                let items = children.iter().map(node_item).collect();
                let request = self.request(&call.persona, SourceKind::Summaries, level, items, source);
                let step = self.summarize(call.session, &request, &mut call.archiving).await;
                return Ok(Next::Write(step, Target::Merge(children.iter().map(|node| node.id).collect())));
            }
            Choice::Chunk(chunk) => {
                let messages = self.chunk_messages(call, &chunk).await?;
                let items = messages.iter().map(source_item).collect();
                if call.memories.is_none() {
                    let persona = call.persona.clone();
                    call.memories =
                        Some(self.blocking(move |store| Ok(store.memories(&persona, None)?)).await?);
                }
                let request = self.showing_memories(
                    self.request(&call.persona, SourceKind::Messages, Level::LEAF, items, chunk.tokens),
                    call.memories.as_deref().unwrap_or_default(),
                );
                let step = self.summarize(call.session, &request, &mut call.archiving).await;
                return Ok(Next::Write(step, Target::Leaf(chunk)));
            }
            Choice::Nothing(why) => why,
            // Nothing to fold: spend the round on giving a raw archive a real summary.
            Choice::Archive(why) => {
                if let Some((node, request)) = self.raw_archive_request(call.session, &call.persona).await? {
                    match self.summarize(call.session, &request, &mut call.archiving).await {
                        // A failure that tipped into archiving again: leave the old digest be.
                        Step::Written { summarizer, .. } if summarizer == RAW_ARCHIVE => {}
                        step => return Ok(Next::Write(step, Target::Replace(node))),
                    }
                }
                why
            }
        };
        Ok(Next::Nothing(Some(why)))
    }

    /// The messages of a chunk, from those read ahead; when they are not there, the chunk's
    /// and those of about `READ_AHEAD_CHUNKS - 1` chunks of its length after it are read.
    async fn chunk_messages(&self, call: &mut Call, chunk: &Chunk) -> Result<Vec<Message>> {
        while call.ahead.front().is_some_and(|message| message.seq < chunk.first_seq) {
            call.ahead.pop_front();
        }
        let held = call.ahead.front().is_some_and(|message| message.seq == chunk.first_seq)
            && call.ahead.back().is_some_and(|message| message.seq >= chunk.last_seq);
        if !held {
            let session = call.session;
            let span = chunk.last_seq - chunk.first_seq + 1;
            let seqs =
                chunk.first_seq..=chunk.first_seq.saturating_add(span.saturating_mul(READ_AHEAD_CHUNKS) - 1);
            call.ahead = self.blocking(move |store| Ok(store.messages(session, seqs)?)).await?.into();
        }
        let end =
            call.ahead.iter().position(|message| message.seq > chunk.last_seq).unwrap_or(call.ahead.len());
        Ok(call.ahead.drain(..end).collect())
    }

    /// The next Level-0 chunk to fold, or why there is none: the context is within its target
    /// or the middle under the `leaf_min_tokens` / `leaf_min_turns` floor (`BelowThreshold`),
    /// or nothing in the middle can be summarized (`NoCandidate`).
    fn next_chunk(&self, call: &mut Call) -> std::result::Result<Chunk, Outcome> {
        let config = &self.inner.config;
        let over_target = call.folding && call.estimate > call.target;
        let planning = call.planning();
        let (middle_tokens, middle_turns) = planning.plan.middle();
        if !over_target
            || middle_tokens < u64::from(config.leaf_min_tokens)
            || middle_turns < config.leaf_min_turns as usize
        {
            return Err(Outcome::BelowThreshold { middle_tokens, middle_turns: middle_turns as u32 });
        }
        planning.plan.next_chunk(&planning.outline, config).ok_or(Outcome::NoCandidate)
    }

    /// Writes what a round summarized: a Level-0 node joins the batch, a merge or a
    /// replacement is written now. A failed summarizer ends the call.
    async fn record(&self, call: &mut Call, step: Step, target: Target) -> Result<Flow> {
        let (summary, tokens, summarizer) = match step {
            Step::Written { summary, tokens, summarizer } => (summary, tokens, summarizer),
            Step::Failed { error, consecutive } => {
                return Ok(Flow::Stop(Some(Outcome::SummarizerDown {
                    nodes_created: call.done.created,
                    consecutive_failures: consecutive,
                    error: error_chain(&error),
                })));
            }
        };
        let raw = summarizer == RAW_ARCHIVE;
        let new = NewSummary {
            headline: summary.headline,
            body: summary.body,
            token_count: tokens,
            summarizer,
            memory_updates: summary.memory_updates,
        };
        let written = match target {
            Target::Leaf(chunk) => {
                call.estimate = call.estimate.saturating_sub(chunk.tokens) + u64::from(tokens);
                let folded = call.planning().plan.covered(&chunk);
                call.batch.push(&chunk, new, folded, raw);
                return Ok(Flow::Continue);
            }
            Target::Merge(ids) => {
                let children = ids.clone();
                let merged = self.blocking(move |store| Ok(store.merge(&children, &new)?)).await;
                merged.map(|node| {
                    if let Some(planning) = call.known.as_mut() {
                        planning.roots.retain(|root| !ids.contains(&root.id));
                        planning.roots.push(node);
                    }
                    call.done.created += 1;
                    call.done.archived += u32::from(raw);
                })
            }
            Target::Replace(id) => {
                let replaced =
                    self.blocking(move |store| Ok(store.replace_summary(id, RAW_ARCHIVE, &new)?)).await;
                replaced.map(|_| {
                    // A node's text changed: read the roots again before merging it.
                    call.known = None;
                    call.done.resummarized += 1;
                })
            }
        };
        match written {
            Ok(()) => {
                call.refusals = 0;
                Ok(Flow::Continue)
            }
            // Another compactor got there first: plan again from what is stored now.
            Err(err) => Ok(match call.refused(refusal(call.session, err)?) {
                Some(outcome) => Flow::Stop(Some(outcome)),
                None => Flow::Continue,
            }),
        }
    }

    /// Ends the call: what is summarized is written, whatever stopped the rounds (a failed
    /// summarizer too), the new nodes are indexed, and the outcome tells what happened.
    /// `ended` is why the rounds stopped before `max_rounds`, `None` when they ran out.
    async fn finish(&self, mut call: Call, ended: Option<Option<Outcome>>) -> Result<Outcome> {
        let pending = ended.is_none();
        let mut stop = ended.flatten();
        if !call.batch.leaves.is_empty()
            && let Some(refused) = self.write_leaves(&mut call).await?
            && call.done.created == 0
        {
            stop.get_or_insert(Outcome::NoProgress { refused: Some(refused) });
        }
        let Tally { created, archived, resummarized, folded } = call.done;
        if let Some(Outcome::SummarizerDown { nodes_created, .. }) = &mut stop {
            *nodes_created = created;
        }
        if created > 0 {
            // Nodes are written without their search-index entries (FTS5 writes a segment at
            // every statement that touches it); the call indexes them once, at its end, with
            // any messages a bulk writer left unindexed (searches never write).
            self.blocking(|store| Ok(store.catch_up_search_index()?)).await?;
        }
        if created == 0 && resummarized == 0 {
            return Ok(stop.unwrap_or(Outcome::NoProgress { refused: None }));
        }
        if let Some(down @ Outcome::SummarizerDown { .. }) = stop {
            return Ok(down);
        }
        let tokens_after = self.context_size(call.session).await?;
        Ok(Outcome::Compacted {
            nodes_created: created,
            raw_archived: archived,
            resummarized,
            messages_folded: folded,
            tokens_before: call.tokens_before,
            tokens_after,
            pending,
        })
    }

    /// The oldest raw-archive node of a session and the request that would summarize it
    /// properly.
    async fn raw_archive_request(
        &self,
        session: SessionId,
        persona: &str,
    ) -> Result<Option<(NodeId, SummaryRequest)>> {
        let Some(node) = self.blocking(move |store| Ok(store.first_raw_archive(session)?)).await? else {
            return Ok(None);
        };
        let request = self.node_request(&node, persona).await?;
        Ok(Some((node.id, request)))
    }
}

/// Mean tokens of the newest turns after the head (at most eight): how fast the context grows.
fn recent_turn_tokens(outline: &[MessageOutline], head_end: usize) -> u64 {
    const RECENT_TURNS: usize = 8;
    let live = head_end.min(outline.len())..outline.len();
    let turns: Vec<std::ops::Range<usize>> =
        crate::plan::turns(live, |index| outline[index].role == strata_seam::Role::User).collect();
    let recent = &turns[turns.len().saturating_sub(RECENT_TURNS)..];
    if recent.is_empty() {
        return 0;
    }
    let tokens: u64 =
        recent.iter().flat_map(|turn| outline[turn.clone()].iter()).map(|m| u64::from(m.token_count)).sum();
    tokens / recent.len() as u64
}
