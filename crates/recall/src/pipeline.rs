//! The embedding pipeline: drains the store's embedding backlog into the vector tables, off the
//! append path.
//!
//! Crash safety comes from the store: a trigger queues every new row in `embedding_backlog` in
//! the transaction that writes it, and [`Vectors::put_vectors`](strata_seam::Vectors::put_vectors)
//! deletes the queue entry in the transaction that writes the vector. A batch is committed as a whole after it is embedded, so
//! a process killed at any point loses at most the batch in flight, which is still queued and
//! is embedded (once) by the next run.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use strata_seam::embeddings::{BacklogItem, MAX_CHUNKS};
use strata_seam::{Backend, Role, SessionId, SharedBackend};

use crate::config::{RecallConfig, RecallSettings};
use crate::embed::{Embedder, chunk_text};
use crate::error::Result;

/// Longest text (in bytes) split into chunks: [`MAX_CHUNKS`] chunks of prose fit in it, and a
/// tool dump of megabytes is not scanned in full (keyword search still finds all of it).
const MAX_TEXT_BYTES: usize = 64 * 1024;

/// Which backlog rows to embed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BacklogFilter {
    /// Only rows of this persona.
    pub persona: Option<String>,
    /// Only messages and summaries of this session.
    pub session: Option<SessionId>,
    /// Stop after this many vectors.
    pub limit: Option<u64>,
}

/// Progress of a backlog drain, reported after every committed batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmbedProgress {
    /// Vectors written so far by this drain.
    pub embedded: u64,
    /// Rows this drain expects to embed in total (grows if rows arrive meanwhile).
    pub total: u64,
}

/// Embeds every row waiting in the backlog, with the default batch sizes; see
/// [`embed_backlog_with`].
pub fn embed_backlog(
    store: &dyn Backend,
    embedder: &Embedder,
    progress: impl FnMut(EmbedProgress),
) -> Result<u64> {
    embed_backlog_with(store, embedder, &RecallConfig::default(), &BacklogFilter::default(), progress)
}

/// Embeds the backlog rows that `filter` selects: reads rounds of `embed_round_size` rows,
/// sorts each round by length, embeds batches of `embed_batch_size` and commits each batch's
/// vectors in one transaction. Returns how many vectors were written. Rows another worker
/// embedded meanwhile are skipped by the store, so every row is embedded exactly once.
pub fn embed_backlog_with(
    store: &dyn Backend,
    embedder: &Embedder,
    config: &RecallConfig,
    filter: &BacklogFilter,
    mut progress: impl FnMut(EmbedProgress),
) -> Result<u64> {
    // The vectors of another model are dropped (and every row queued again) before any of
    // this model's are written: two models' vectors are never mixed.
    let space = embedder.space();
    if store.use_space(&space)? {
        tracing::info!(model = %space.model, "embedding space set; every row will be embedded");
    }
    let persona = filter.persona.as_deref();
    let waiting = store.backlog_count(persona, filter.session)?;
    let mut report =
        EmbedProgress { embedded: 0, total: filter.limit.map_or(waiting, |limit| waiting.min(limit)) };
    progress(report);
    loop {
        let left = filter.limit.map_or(u64::MAX, |limit| limit.saturating_sub(report.embedded));
        if left == 0 {
            break;
        }
        let round_size = (config.embed_round_size.max(1) as u64).min(left) as usize;
        let mut items = store.backlog(persona, filter.session, round_size)?;
        if items.is_empty() {
            break;
        }
        items.sort_by_key(|item| item.text.len());
        // Long texts are embedded in chunks (several vectors per row); every chunk of a batch
        // is embedded together, and a row's vectors are committed with the row.
        for batch in items.chunks(config.embed_batch_size.max(1)) {
            let chunked: Vec<Vec<&str>> =
                batch.iter().map(|item| chunks_of(item, embedder.spec().chunk_words, config)).collect();
            let texts: Vec<&str> = chunked.iter().flatten().copied().collect();
            let _span =
                tracing::debug_span!("embed_batch", items = batch.len(), texts = texts.len()).entered();
            let mut vectors = embedder.embed_sorted(&texts, config.embed_batch_size.max(1))?.into_iter();
            let pairs: Vec<(BacklogItem, Vec<Vec<f32>>)> = batch
                .iter()
                .zip(&chunked)
                .map(|(item, chunks)| (item.clone(), vectors.by_ref().take(chunks.len()).collect()))
                .collect();
            let written = store.put_vectors(&space.model, &pairs)? as u64;
            report.embedded += written;
            report.total = report.total.max(report.embedded);
            progress(report);
        }
        // A round in which another worker took everything is simply read again: those rows
        // are off the backlog now, so the loop still ends.
    }
    Ok(report.embedded)
}

/// The embedding policy: the pieces of a backlog row that get vectors. Tool results keep
/// `embed_tool_chunks` chunks (their text starts with the tool's name), everything else
/// `embed_max_chunks`.
/// The longest start of `text` of at most `max_bytes` bytes that ends at a character boundary.
fn prefix_within_bytes(text: &str, max_bytes: usize) -> &str {
    let mut end = text.len().min(max_bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn chunks_of<'a>(item: &'a BacklogItem, chunk_words: usize, config: &RecallConfig) -> Vec<&'a str> {
    let max = match item.message_role {
        Some(Role::Tool) => config.embed_tool_chunks,
        _ => config.embed_max_chunks,
    };
    // A text cut to its first chunks needs no more bytes than they hold.
    let text = prefix_within_bytes(&item.text, MAX_TEXT_BYTES);
    chunk_text(text, chunk_words, max.clamp(1, MAX_CHUNKS))
}

#[derive(Debug, Default)]
struct WorkerState {
    /// Bumped by every `notify`.
    requested: u64,
    /// The `requested` value seen at the start of the last drain that found nothing left.
    idle_at: u64,
    stop: bool,
    embedded: u64,
    last_error: Option<String>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<WorkerState>,
    wake: Condvar,
    idle: Condvar,
}

/// What a worker has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Vectors written.
    pub embedded: u64,
    /// The most recent failure, if the last drain failed (the worker retries on the next poll).
    pub last_error: Option<String>,
}

/// A background thread that keeps the vector tables caught up with the backlog.
///
/// It drains the backlog when spawned, whenever [`EmbedWorker::notify`] is called (call it
/// after appending), and every `poll` interval (to catch rows written by other processes).
/// Dropping the worker stops it after the batch in flight.
#[derive(Debug)]
pub struct EmbedWorker {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl EmbedWorker {
    /// Starts the worker thread.
    pub fn spawn(
        store: impl Into<SharedBackend>,
        embedder: Embedder,
        config: RecallSettings,
        poll: Duration,
    ) -> EmbedWorker {
        let store = store.into();
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("strata-embed".into())
            .spawn(move || run(&*store, &embedder, &config, poll, &thread_shared))
            .expect("spawning a thread");
        EmbedWorker { shared, handle: Some(handle) }
    }

    /// Tells the worker new rows are waiting.
    pub fn notify(&self) {
        let mut state = self.shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.requested += 1;
        self.shared.wake.notify_all();
    }

    /// Waits until the worker has found the backlog empty after the latest [`notify`]
    /// (call `notify` first). Returns false on timeout.
    ///
    /// [`notify`]: EmbedWorker::notify
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        let target = state.requested;
        while state.idle_at < target {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .shared
                .idle
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// What the worker has done so far.
    pub fn stats(&self) -> WorkerStats {
        let state = self.shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        WorkerStats { embedded: state.embedded, last_error: state.last_error.clone() }
    }

    /// Stops the worker after the batch in flight and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        {
            let mut state = self.shared.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.stop = true;
            self.shared.wake.notify_all();
        }
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for EmbedWorker {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(store: &dyn Backend, embedder: &Embedder, config: &RecallConfig, poll: Duration, shared: &Shared) {
    // Queries (memory_search, the recalled block of prepare_context) get a session of their
    // own, so they never wait for this worker's batch in flight.
    if let Err(err) = embedder.separate_queries() {
        tracing::warn!(error = %err.chain_message(), "queries share the model with the embedding worker");
    }
    let filter = BacklogFilter::default();
    loop {
        let seen = {
            let state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.stop {
                return;
            }
            state.requested
        };
        // Drain one round at a time so that a stop request is honoured between rounds.
        let round = BacklogFilter { limit: Some(config.embed_round_size.max(1) as u64), ..filter.clone() };
        let outcome = embed_backlog_with(store, embedder, config, &round, |_| {});
        let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(0) => {
                state.last_error = None;
                state.idle_at = state.idle_at.max(seen);
                shared.idle.notify_all();
            }
            Ok(written) => {
                state.last_error = None;
                state.embedded += written;
                continue;
            }
            Err(err) => {
                tracing::warn!(error = %err.chain_message(), "embedding worker failed; retrying at the next poll");
                state.last_error = Some(err.chain_message());
                // Waiters learn about the failure through stats() instead of hanging.
                state.idle_at = state.idle_at.max(seen);
                shared.idle.notify_all();
            }
        }
        if state.stop {
            return;
        }
        if state.requested == seen {
            let _ = shared.wake.wait_timeout(state, poll).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use strata_seam::search::{HitId, HitKind};

    use super::*;

    #[test]
    fn a_byte_prefix_ends_at_a_character() {
        assert_eq!(prefix_within_bytes("héllo", 2), "h");
        assert_eq!(prefix_within_bytes("héllo", 3), "hé");
        assert_eq!(prefix_within_bytes("héllo", 100), "héllo");
        assert_eq!(prefix_within_bytes("数据", 0), "");
    }

    fn item(role: Option<Role>, kind: HitKind, text: &str) -> BacklogItem {
        BacklogItem { id: HitId::new(kind, 1), persona: "p".into(), text: text.into(), message_role: role }
    }

    #[test]
    fn tool_results_keep_their_first_chunks_and_other_texts_their_whole() {
        let long: String = (0..400).map(|i| format!("w{i} ")).collect();
        let tool_text = format!("read_file: {long}");
        let config = RecallConfig::default();
        let tool = item(Some(Role::Tool), HitKind::Message, &tool_text);
        let chunks = chunks_of(&tool, 80, &config);
        assert_eq!(chunks.len(), 1);
        assert!(chunks[0].starts_with("read_file: w0 "), "the tool's name leads its chunk");
        for role in [Some(Role::User), Some(Role::Assistant), Some(Role::System), None] {
            let kind = if role.is_some() { HitKind::Message } else { HitKind::Summary };
            assert_eq!(chunks_of(&item(role, kind, &long), 80, &config).len(), 6, "{role:?}");
        }
        let wider = RecallConfig { embed_tool_chunks: 3, embed_max_chunks: 2, ..RecallConfig::default() };
        assert_eq!(chunks_of(&tool, 80, &wider).len(), 3);
        assert_eq!(chunks_of(&item(Some(Role::User), HitKind::Message, &long), 80, &wider).len(), 2);
    }
}
