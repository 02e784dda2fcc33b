//! The `Engine`: one database, one compactor, the recall tools, wired together.
//!
//! The command line goes through the same engine (`Engine::from_store`,
//! `Engine::compact_until_done`, `Engine::assemble`), so it assembles with exactly the budget,
//! encoding and summarizer a bot's engine has. Assembly takes no compaction lock: its reads are
//! one snapshot, so it never waits for a summarizer. The embedding model is loaded on first
//! need, so opening an engine is fast and a machine without the model loses only semantic search.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;
use serde_json::Value;
use strata_compactor::summarize::{EmbedError, SentenceEmbedder};
use strata_compactor::{
    AssembledContext, AssemblyOptions, BeforeAssembly, Compaction, Compactor, ContextSnapshot, Outcome,
    RecallRequest, Resummarized, Summarizer,
};
use strata_recall::{
    EmbedWorker, Embedder, EmbedderState, RecallConfig, RecallSettings, Settled, Tool, ToolContext,
};
use strata_seam::memories::QueuedUpdate;
use strata_seam::search::Recalled;
use strata_seam::{
    Category, Level, Memory, MessageId, NewMessage, Role, Session, SessionId, SharedBackend, SummaryNode,
};
use strata_store::Store;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::config::{Config, Settings};
use crate::error::{Error, Result};
use crate::message::{ChatMessage, Format, Incoming};
use crate::metrics::Counters;
use strata_wire::Rendered;

mod admit;
mod backup;
mod forget;

/// strata's entry point: open a database, get a session, append messages, prepare the context
/// before each LLM call, and run the tool calls the model makes.
///
/// Cheap to clone: clones share the database pool, the compactor (and its per-session locks)
/// and the embedding model.
#[derive(Clone, Debug)]
pub struct Engine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: SharedBackend,
    config: Config,
    /// `config.recall`, validated: what the tools and the embedding worker run on.
    recall: RecallSettings,
    compactor: Compactor,
    /// Loaded on first use: opening an engine stays fast, and a machine without the model
    /// still gets everything but semantic search. Shared with the extractive summarizer's
    /// [`SentenceModel`], so the model is loaded once.
    embedder: Arc<OnceLock<EmbedderState>>,
    /// Started at most once; a lock-free cell, so `append` never waits on a caller blocked in
    /// `wait_embedded`.
    worker: OnceLock<EmbedWorker>,
    /// Compactions running in the background (`[summarizer] background`), one per session.
    background: Mutex<HashMap<SessionId, JoinHandle<Result<Outcome>>>>,
    /// The search behind every context's recalled block; `None` with `[recall] proactive` off.
    history_search: Option<HistorySearch>,
    /// What this process did: tool calls and recalled hits (`strata metrics`).
    counters: Arc<Counters>,
}

/// The context to send to the model, and what compaction did to get there.
#[derive(Clone, Debug, Serialize)]
pub struct PreparedContext {
    /// What the compaction cycle did before assembling; `None` when compaction runs in the
    /// background (`[summarizer] background`) and the context was assembled from what exists.
    pub outcome: Option<Outcome>,
    /// The messages (OpenAI format) with their token accounting.
    pub context: AssembledContext,
}

impl PreparedContext {
    /// The messages, one per context entry, in the OpenAI chat format; a conversation stored
    /// in another format, or with calls spread over several messages, is sent as
    /// [`PreparedContext::render`] gives it.
    pub fn messages(&self) -> &[Value] {
        &self.context.messages
    }

    /// The context in `format`, as the provider takes it: each stored message from its body
    /// as the caller sent it (in its own format field for field, less a reply's own fields),
    /// every tool call answered, reasoning sent back by its provider's rule (Anthropic's
    /// thinking blocks and Responses reasoning items of the current tool loop, DeepSeek's
    /// `reasoning_content` beside tool calls; `keep_reasoning` sends all), and for Anthropic
    /// `cache_control` breakpoints at the end of the stable prefix and before the newest
    /// request, with the system messages as `system`.
    pub fn render(&self, format: Format, keep_reasoning: bool) -> Result<Rendered> {
        crate::render::render_context(&self.context, format, keep_reasoning)
    }
}

/// What [`Engine::compact_until_done`] did: the compaction's totals and what became of the
/// facts its summaries found.
#[derive(Clone, Debug, Serialize)]
pub struct CompactedSession {
    /// The calls made and the nodes written, summed.
    pub compaction: Compaction,
    /// The facts settled after the last call: memories saved, preferences proposed.
    pub settled: Settled,
}

impl Engine {
    /// Opens (or creates) the database at `location` with the summarizer `config` names: a
    /// SQLite file's path, or a PostgreSQL url (`postgres://user:password@host/database`, with
    /// the `postgres` feature) for a fleet of processes sharing one memory.
    pub fn open(location: impl AsRef<Path>, config: Config) -> Result<Engine> {
        // Validated before the database is touched, and only here.
        let settings = config.validate()?;
        Engine::from_validated(open_backend(location.as_ref())?, config, settings)
    }

    /// An engine over a database the caller opened (a SQLite [`Store`] with its own busy
    /// timeout, say, or a `strata_pg::PgStore`), with the summarizer `config` names.
    pub fn from_store(store: impl Into<SharedBackend>, config: Config) -> Result<Engine> {
        let settings = config.validate()?;
        Engine::from_validated(store.into(), config, settings)
    }

    fn from_validated(store: SharedBackend, config: Config, settings: Settings) -> Result<Engine> {
        // The extractive summarizer's sentence vectors come from the model the tools use,
        // loaded once, on the first summary (or never, without its files: lexical selection).
        let embedder = Arc::new(OnceLock::new());
        let summarizer =
            config.summarizer_with(SentenceModel::sharing(embedder.clone(), config.recall.clone()))?;
        Engine::build(store, config, settings, summarizer, embedder)
    }

    /// Opens the database at `location` (as [`Engine::open`]) with a summarizer of the
    /// caller's choosing.
    pub fn with_summarizer(
        location: impl AsRef<Path>,
        config: Config,
        summarizer: Arc<dyn Summarizer>,
    ) -> Result<Engine> {
        let settings = config.validate()?;
        let store = open_backend(location.as_ref())?;
        Engine::build(store, config, settings, summarizer, Arc::new(OnceLock::new()))
    }

    fn build(
        store: SharedBackend,
        config: Config,
        settings: Settings,
        summarizer: Arc<dyn Summarizer>,
        embedder: Arc<OnceLock<EmbedderState>>,
    ) -> Result<Engine> {
        let Settings { compactor, recall } = settings;
        let compactor = Compactor::with_settings(store.clone(), compactor, summarizer)?;
        let counters = Arc::new(Counters::default());
        let history_search = config.recall.proactive.then(|| HistorySearch {
            store: store.clone(),
            config: config.recall.clone(),
            embedder: embedder.clone(),
            counters: Some(counters.clone()),
        });
        Ok(Engine {
            inner: Arc::new(Inner {
                store,
                config,
                recall,
                compactor,
                embedder,
                worker: OnceLock::new(),
                background: Mutex::new(HashMap::new()),
                history_search,
                counters,
            }),
        })
    }

    /// The database.
    pub fn store(&self) -> &SharedBackend {
        &self.inner.store
    }

    /// strata's metrics in the Prometheus text format: the database's totals and this
    /// engine's counters (see [`crate::metrics`]). Blocking (a few reads).
    pub fn metrics(&self) -> Result<String> {
        Ok(crate::metrics::render(&self.inner.store.metrics()?, &self.inner.counters.snapshot()))
    }

    /// This engine's counters (tool calls and hits by tool, recalled-block hits), for a bot
    /// that exports them its own way.
    pub fn counters(&self) -> crate::metrics::CountersSnapshot {
        self.inner.counters.snapshot()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The compactor.
    pub fn compactor(&self) -> &Compactor {
        &self.inner.compactor
    }

    /// The session with this key, created for `persona` if new.
    pub fn session(&self, key: &str, persona: &str) -> Result<EngineSession> {
        let session = self.inner.store.session(key, persona)?;
        Ok(EngineSession { engine: self.clone(), session })
    }

    /// The tools the model may call, in the OpenAI function-calling format (`{"type":
    /// "function", "function": {name, description, parameters}}`).
    pub fn tool_specs(&self) -> Vec<Value> {
        strata_recall::tool_specs()
    }

    /// [`Engine::tool_specs`] in `format`: Anthropic's `{name, description, input_schema}`,
    /// the Responses API's flat function tools.
    pub fn tool_specs_in(&self, format: Format) -> Vec<Value> {
        strata_wire::tool_specs(&strata_recall::tool_specs(), format)
    }

    /// The embedding model, loaded on first call (about 0.3 s), or why it is unavailable.
    pub fn embedder(&self) -> &EmbedderState {
        self.inner.embedder.get_or_init(|| {
            crate::load_embedder(&self.inner.recall, &self.inner.config.compactor.retry).into()
        })
    }

    /// Starts the background thread that embeds new messages, summaries and memories. Without
    /// it, `strata embed` (or [`strata_recall::embed_backlog`]) catches up on demand.
    pub fn start_embedding(&self) -> Result<()> {
        let embedder = self.embedder().get().map_err(Error::Recall)?.clone();
        self.inner.worker.get_or_init(|| {
            EmbedWorker::spawn(
                self.inner.store.clone(),
                embedder,
                self.inner.recall.clone(),
                Duration::from_secs(5),
            )
        });
        Ok(())
    }

    /// Embeds every message, summary and memory still waiting for a vector, in this thread,
    /// and returns how many vectors were written: the on-demand way when no background worker
    /// runs (`strata embed`). Blocking; fails when the model is unavailable.
    pub fn embed_pending(&self) -> Result<u64> {
        let embedder = self.embedder().get().map_err(Error::Recall)?;
        let filter = strata_recall::BacklogFilter::default();
        Ok(strata_recall::embed_backlog_with(
            &*self.inner.store,
            embedder,
            &self.inner.recall,
            &filter,
            |_| {},
        )?)
    }

    /// Waits until the background worker (if running) has embedded everything appended so
    /// far; false on timeout.
    pub fn wait_embedded(&self, timeout: Duration) -> bool {
        match self.inner.worker.get() {
            Some(worker) => {
                worker.notify();
                worker.wait_idle(timeout)
            }
            None => true,
        }
    }

    /// One bounded compaction of `session`; the embedding worker hears of new nodes. The
    /// compactor logs each compaction's accounting (its `compact` span); the totals per
    /// summarizer are derived from the nodes by `strata stats`.
    async fn compact(&self, session: SessionId) -> Result<Outcome> {
        let outcome = self.inner.compactor.compact(session).await?;
        self.after_compaction(&outcome).await;
        Ok(outcome)
    }

    /// What follows a compaction that wrote: the facts its summaries found are settled, and
    /// the embedding worker hears of the new nodes.
    async fn after_compaction(&self, outcome: &Outcome) {
        if matches!(outcome, Outcome::Compacted { .. }) {
            self.settle_in_background().await;
            self.notify_worker();
        }
    }

    /// Compacts `session` until nothing is pending, each call at most `rounds_per_call`
    /// summaries and at most `max_calls` calls ([`Compactor::compact_until_done`]); then
    /// settles the facts the new summaries found, as every compaction of an engine does.
    /// `progress` hears the running totals after every call. A summarizer that is down ends it
    /// with [`Outcome::SummarizerDown`] as the last outcome, not an error: what was written
    /// stays, and its facts are settled.
    pub async fn compact_until_done(
        &self,
        session: SessionId,
        rounds_per_call: u32,
        max_calls: u32,
        progress: impl FnMut(&Compaction),
    ) -> Result<CompactedSession> {
        let compaction =
            self.inner.compactor.compact_until_done(session, rounds_per_call, max_calls, progress).await?;
        let engine = self.clone();
        let settled = tokio::task::spawn_blocking(move || engine.settle_memory_updates())
            .await
            .map_err(Error::Background)??;
        if compaction.nodes_created > 0 {
            self.notify_worker();
        }
        Ok(CompactedSession { compaction, settled })
    }

    /// The context `session` would be sent at time `now`, assembled from what is stored,
    /// without compacting first: what [`EngineSession::prepare_context`] sends when nothing
    /// is left to fold. For inspection (`strata context`); it writes nothing.
    pub async fn assemble(&self, session: SessionId, now: chrono::DateTime<Utc>) -> Result<AssembledContext> {
        self.preview(session, None, now).await
    }

    /// The context `session` would be sent at `now` for `request`, a new request that is not
    /// stored (a dry run: nothing is written, nothing is compacted), or for its latest stored
    /// request when `None`, recalled block included: exactly what the model would get. Unlike
    /// [`EngineSession::prepare_context`] it waits for the embedding model to load, so the
    /// block is the one a warm engine would send.
    pub async fn preview(
        &self,
        session: SessionId,
        request: Option<NewMessage>,
        now: chrono::DateTime<Utc>,
    ) -> Result<AssembledContext> {
        if self.inner.history_search.is_some() {
            let engine = self.clone();
            tokio::task::spawn_blocking(move || {
                engine.embedder();
            })
            .await
            .map_err(Error::Background)?;
        }
        let snapshot = self.inner.compactor.read_context(session, AssemblyOptions { now, request }).await?;
        self.lay_out(snapshot).await
    }

    /// The context laid out from `snapshot`, with the recalled block recall finds for it: the
    /// engine asks the search and hands its answer to the compactor's layout, which calls
    /// nothing back. Both run on the blocking pool (the search reads the database).
    async fn lay_out(&self, snapshot: ContextSnapshot) -> Result<AssembledContext> {
        let engine = self.clone();
        let laid_out = tokio::task::spawn_blocking(move || {
            let recalled = engine.inner.history_search.as_ref().and_then(|search| {
                let asked = snapshot.recall_request()?;
                Some(search.recall(&asked))
            });
            engine.inner.compactor.assembler().lay_out(&snapshot, recalled)
        });
        Ok(laid_out.await.map_err(Error::Background)??)
    }

    /// Loads the embedding model on the blocking pool unless it is loaded (or loading), so that
    /// the recalled block, which never waits for it, has semantic search from a later request on.
    fn warm_embedder(&self) {
        if self.inner.history_search.is_some() && self.inner.embedder.get().is_none() {
            let engine = self.clone();
            tokio::task::spawn_blocking(move || {
                engine.embedder();
            });
        }
    }

    /// Settles the queued facts on the blocking pool. A failure leaves them queued for the
    /// next compaction and does not fail the turn: the nodes are written.
    async fn settle_in_background(&self) {
        let engine = self.clone();
        match tokio::task::spawn_blocking(move || engine.settle_memory_updates()).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::warn!(%error, "memory updates stay queued"),
            Err(error) => tracing::warn!(%error, "memory updates stay queued"),
        }
    }

    /// Settles the facts the summarizers found ([`strata_recall::settle_memory_updates`]):
    /// `progress` and `memo` facts become the agent's memories (a twin of an existing memory,
    /// by spelling or by meaning, updates it instead), preferences become proposals the user
    /// accepts ([`Engine::accept_proposal`]). Runs after every compaction that wrote nodes;
    /// call it yourself after writing nodes another way. Blocking: when facts wait, the
    /// embedding model is loaded first (once per engine, 0.3-0.5 s), since without it twins in
    /// other words or another script are not seen.
    pub fn settle_memory_updates(&self) -> Result<strata_recall::Settled> {
        let waiting = !self.inner.store.pending_updates(1)?.is_empty();
        let embedder = if waiting {
            self.embedder().ready().cloned()
        } else {
            self.inner.embedder.get().and_then(|state| state.ready().cloned())
        };
        let settled =
            strata_recall::settle_memory_updates(&*self.inner.store, &self.inner.recall, embedder.as_ref())?;
        if settled != strata_recall::Settled::default() {
            tracing::info!(?settled, "memory updates settled");
        }
        Ok(settled)
    }

    /// The preferences the summaries found that wait for the user's yes or no.
    pub fn proposals(&self, persona: &str) -> Result<Vec<QueuedUpdate>> {
        Ok(self.inner.store.proposals(persona)?)
    }

    /// The user accepts a proposed preference: it becomes a `user_preferences` memory (written
    /// by the user, so the agent sees it in every regular turn's injection).
    pub fn accept_proposal(&self, persona: &str, key: &str) -> Result<Memory> {
        let memory = self.inner.store.accept_proposal(persona, key)?;
        self.notify_worker();
        Ok(memory)
    }

    /// The user rejects a proposed preference; it is deleted.
    pub fn reject_proposal(&self, persona: &str, key: &str) -> Result<QueuedUpdate> {
        Ok(self.inner.store.reject_proposal(persona, key)?)
    }

    /// Replaces the summaries of a session's nodes with this engine's summarizer's, bottom-up
    /// and resumable ([`Compactor::resummarize`]); then settles the facts the summaries found.
    /// `progress` hears each node done.
    ///
    /// The facts are settled even when no node was replaced: a run killed after writing its
    /// last node left that node's facts queued, and the documented re-run, which finds every
    /// node done, is what settles them (issue 42 #8).
    pub async fn resummarize(
        &self,
        session: SessionId,
        level: Option<Level>,
        progress: impl FnMut(&SummaryNode),
    ) -> Result<Resummarized> {
        let done = self.inner.compactor.resummarize(session, level, progress).await?;
        self.settle_in_background().await;
        if done.replaced > 0 {
            self.notify_worker();
        }
        Ok(done)
    }

    /// Waits for every background compaction started so far (`[summarizer] background`), as a
    /// server does before it exits, so no summary is cut off half-written (a cut one would be
    /// redone, but its summarizer's work would be lost).
    pub async fn finish_background_compactions(&self) {
        let tasks: Vec<_> = {
            let mut running = self.inner.background.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            running.drain().map(|(_, task)| task).collect()
        };
        for task in tasks {
            match task.await {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => tracing::warn!(%error, "a background compaction failed"),
                Err(error) => tracing::warn!(%error, "a background compaction stopped"),
            }
        }
    }

    /// Tells the background embedder (if running) that rows wait for vectors: after writing
    /// memories through [`Engine::store`], say. The worker also polls every few seconds.
    pub fn notify_embedder(&self) {
        self.notify_worker();
    }

    fn notify_worker(&self) {
        if let Some(worker) = self.inner.worker.get() {
            worker.notify();
        }
    }
}

/// strata-recall's local embedding model as the extractive summarizer's [`SentenceEmbedder`]:
/// loaded on the first summary (or found unavailable once, without its files, after which the
/// summarizer selects lexically).
#[derive(Clone, Debug)]
pub struct SentenceModel {
    state: Arc<OnceLock<EmbedderState>>,
    config: RecallConfig,
}

impl SentenceModel {
    /// The model `config` names, loaded on first use.
    pub fn new(config: RecallConfig) -> SentenceModel {
        SentenceModel::sharing(Arc::new(OnceLock::new()), config)
    }

    /// The model held (or to be loaded) in `state`, which an [`Engine`] shares with its tools.
    fn sharing(state: Arc<OnceLock<EmbedderState>>, config: RecallConfig) -> SentenceModel {
        SentenceModel { state, config }
    }

    /// The model, loaded now if it was not, or why it is unavailable.
    pub fn state(&self) -> &EmbedderState {
        self.state.get_or_init(|| Embedder::for_config(&self.config).into())
    }
}

impl SentenceEmbedder for SentenceModel {
    fn embed_sentences(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, EmbedError> {
        // Sorted by length in batches of 64: sentences of similar length pad less.
        Ok(self.state().get()?.embed_sorted(texts, 64)?)
    }
}

/// One conversation of an [`Engine`], bound to its persona.
#[derive(Clone, Debug)]
pub struct EngineSession {
    engine: Engine,
    session: Session,
}

impl EngineSession {
    /// The session's database id.
    pub fn id(&self) -> SessionId {
        self.session.id
    }

    /// The session row as it was when this handle was made.
    pub fn info(&self) -> &Session {
        &self.session
    }

    /// Stores a message verbatim (with its exact token count) and returns its id.
    pub fn append(&self, message: ChatMessage) -> Result<MessageId> {
        self.store_message(message.into_new())
    }

    /// Stores a message object as the bot has it, in any format strata reads (an OpenAI
    /// chat message with reasoning or images, an Anthropic message with thinking blocks, a
    /// Responses item): [`Incoming::from_json`], then [`EngineSession::append_incoming`].
    pub fn append_json(&self, message: &Value) -> Result<MessageId> {
        self.append_incoming(Incoming::from_json(message)?)
    }

    /// Stores a message under an idempotency key unique within the session (the bot's own
    /// message id, say): if the session already holds a message under `key`, nothing is stored
    /// and its id is returned, so a bot that retries after a timeout never stores a message
    /// twice. The same key for a different message is an error.
    pub fn append_with_key(&self, key: impl Into<String>, message: ChatMessage) -> Result<MessageId> {
        let mut message = message.into_new();
        message.external_id = Some(key.into());
        self.store_message(message)
    }

    /// Stores a message with what a bot keeps beside it (its time, idempotency key, pin),
    /// as [`EngineSession::append_with_key`] does when it has a key.
    pub fn append_incoming(&self, message: Incoming) -> Result<MessageId> {
        self.store_message(message.into_new(Utc::now()))
    }

    /// Stores a batch in one transaction, all or nothing, counting tokens on every core: an
    /// import of a bot's history, say. A message whose key the session already holds is not
    /// stored again; its id is returned in its place. A batch of more than 16 messages leaves
    /// its full-text indexing to the next search (see ARCHITECTURE.md).
    pub fn append_many(&self, messages: Vec<Incoming>) -> Result<Vec<MessageId>> {
        let now = Utc::now();
        let rows: Vec<NewMessage> = messages.into_iter().map(|message| message.into_new(now)).collect();
        self.store_messages(rows)
    }

    fn store_message(&self, message: NewMessage) -> Result<MessageId> {
        Ok(self.store_messages(vec![message])?[0])
    }

    /// The one admission path ([`admit`]): every message is checked before any is stored
    /// (its size, before counting, whose cost follows the size; its tool result against the
    /// open calls, naming the batch index of the one at fault), then counted and stored in
    /// one transaction.
    fn store_messages(&self, mut rows: Vec<NewMessage>) -> Result<Vec<MessageId>> {
        let inner = &self.engine.inner;
        let batch = rows.len() > 1;
        let at = |index: usize, error: Error| match error {
            Error::InvalidMessage(reason) if batch => {
                Error::InvalidMessage(format!("message {index}: {reason}"))
            }
            other => other,
        };
        for (index, row) in rows.iter().enumerate() {
            inner.compactor.config().check_message_size(row).map_err(|error| match error {
                // In a batch, the refusal names the message, as a bad message's does.
                too_large if batch => Error::InvalidMessage(format!("message {index}: {too_large}")),
                other => other.into(),
            })?;
        }
        if rows.iter().any(|row| row.role == Role::Tool) {
            let mut pairing = admit::Pairing::after(&admit::recent(&*inner.store, self.session.id)?);
            for (index, row) in rows.iter().enumerate() {
                pairing.check(row).map_err(|error| at(index, error))?;
            }
        }
        inner.compactor.counter().count_new_all(&mut rows);
        let ids = inner.store.append(self.session.id, &rows)?;
        self.propose_stated(&rows);
        self.engine.notify_worker();
        Ok(ids)
    }

    /// A preference a user states becomes a proposal as soon as the message is stored, not
    /// at the compaction that reads it later (which proposes the same key again, replacing
    /// this one). Memos wait for that compaction: they are settled against the persona's
    /// memories by meaning, which needs the embedding model, too slow for an append. The
    /// message is stored either way: a refused proposal is logged, not the append's error.
    fn propose_stated(&self, rows: &[NewMessage]) {
        let store = &self.engine.inner.store;
        let persona = &self.session.persona;
        let stated = rows
            .iter()
            .filter(|row| row.role == Role::User)
            // Masked first, as every summary is: no proposal holds a pasted key or password.
            .map(|row| (self.engine.inner.recall.secret_patterns.mask(&row.content), row.name.as_deref()))
            .flat_map(|(text, name)| strata_compactor::stated_facts(&text, name))
            .filter(|fact| fact.category == Category::UserPreferences);
        for fact in stated {
            let held = store.memory(persona, Category::UserPreferences, &fact.key);
            // The user's preference says this already: nothing to propose.
            if held.as_ref().is_ok_and(|memory| memory.as_ref().is_some_and(|m| m.content == fact.content)) {
                continue;
            }
            if let Err(error) = store.propose_stated(persona, &fact) {
                tracing::warn!(%error, key = %fact.key, "a stated preference was not proposed");
            }
        }
    }

    /// Runs the compaction cycle (bounded by `max_rounds`) and assembles the context to send.
    /// The summarizer is awaited with no database connection held.
    ///
    /// With `[summarizer] background = true` it never waits for a summarizer: it starts a
    /// compaction of this session in a background task (unless one is running) and assembles
    /// from what exists now; when the uncompacted part would overflow the window meanwhile, the
    /// oldest turns go out as one elision note naming them (nothing is lost: they are stored
    /// and `view_message` reads them).
    pub async fn prepare_context(&self) -> Result<PreparedContext> {
        let span = tracing::info_span!(
            "prepare_context",
            session = %self.session.key,
            persona = %self.session.persona,
            gen_ai.conversation.id = %self.session.key,
        );
        async {
            let compactor = &self.engine.inner.compactor;
            self.engine.warm_embedder();
            let now = Utc::now();
            let before = if self.engine.inner.config.summarizer.background {
                self.compact_in_background();
                None
            } else {
                Some(compactor.compact_before_assembly(self.session.id, now).await?)
            };
            let read = || compactor.read_context(self.session.id, AssemblyOptions::at(now));
            // One way: the snapshot, then the recalled block's search on what it holds, then the
            // layout of both.
            let (outcome, snapshot) = match before {
                // Nothing to write: the check read the session with the assembly.
                Some(BeforeAssembly::Read { outcome, snapshot }) => (Some(outcome), *snapshot),
                Some(BeforeAssembly::Compacted(outcome)) => {
                    self.engine.after_compaction(&outcome).await;
                    (Some(outcome), read().await?)
                }
                None => (None, read().await?),
            };
            let context = self.engine.lay_out(snapshot).await?;
            tracing::debug!(
                tokens = context.tokens.total,
                budget = context.tokens.budget,
                "context assembled"
            );
            Ok(PreparedContext { outcome, context })
        }
        .instrument(span)
        .await
    }

    /// Starts a compaction of this session on the tokio runtime, unless one is running.
    fn compact_in_background(&self) {
        let mut running =
            self.engine.inner.background.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if running.get(&self.session.id).is_some_and(|task| !task.is_finished()) {
            return;
        }
        let engine = self.engine.clone();
        let session = self.session.id;
        let task = tokio::spawn(
            async move { engine.compact(session).await }
                .instrument(tracing::info_span!("background_compaction", %session)),
        );
        running.insert(session, task);
    }

    /// Waits for this session's background compaction, if one was started and not yet
    /// awaited, and returns what it did.
    pub async fn finish_compaction(&self) -> Option<Result<Outcome>> {
        let task = {
            let mut running =
                self.engine.inner.background.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            running.remove(&self.session.id)
        }?;
        Some(match task.await {
            Ok(outcome) => outcome,
            Err(join) => Err(Error::Background(join)),
        })
    }

    /// Runs one tool call for this session's persona. Always answers JSON: a result, or an
    /// object with an `error` naming the problem (an unknown tool's lists the tools). The work
    /// runs on tokio's blocking pool.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Value {
        let Some(tool) = Tool::from_name(name) else {
            // recall words the refusal, with the names of the tools there are.
            let ctx = self.tool_context(EmbedderState::Unavailable(Arc::new(not_loaded())));
            return strata_recall::call_tool(&ctx, name, &arguments);
        };
        let session = self.clone();
        let span = tracing::info_span!("call_tool", %tool, session = %self.session.key);
        let answer = tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            let engine = &session.engine;
            let embedder = if tool.needs_embedder() {
                engine.embedder().clone()
            } else {
                // The other tools use the model only when it is loaded (for near-duplicate
                // keys); they never wait for it.
                engine
                    .inner
                    .embedder
                    .get()
                    .cloned()
                    .unwrap_or_else(|| EmbedderState::Unavailable(Arc::new(not_loaded())))
            };
            let answer = tool.call(&session.tool_context(embedder), &arguments);
            engine.inner.counters.tool_call(tool.name(), &answer);
            if let Some(error) = answer.get("error") {
                tracing::info!(%error, "tool refused the call");
            }
            if tool.writes() {
                engine.notify_worker();
            }
            answer
        })
        .await;
        answer.unwrap_or_else(|_| tool.failed_unexpectedly())
    }

    fn tool_context(&self, embedder: EmbedderState) -> ToolContext {
        let inner = &self.engine.inner;
        ToolContext::new(inner.store.clone(), self.session.clone(), embedder, inner.recall.clone())
    }
}

/// recall's hybrid search behind every context's recalled block, asked what a
/// [`ContextSnapshot`] says ([`ContextSnapshot::recall_request`]): it uses the embedding model
/// only once loaded, and never fails a context (a failed search is a note in the block). An
/// [`Engine`] holds one; a reader that assembles without an engine (`strata context`) makes
/// its own.
#[derive(Debug)]
pub struct HistorySearch {
    store: SharedBackend,
    config: RecallConfig,
    embedder: Arc<OnceLock<EmbedderState>>,
    /// The engine's counters, which hear each block's hits.
    counters: Option<Arc<Counters>>,
}

impl HistorySearch {
    /// The search over `store` with the model `config` names, loaded now (or found absent:
    /// then keywords serve alone).
    pub fn loaded(
        store: impl Into<SharedBackend>,
        config: &RecallConfig,
        retry: &strata_llm::RetryPolicy,
    ) -> HistorySearch {
        let store = store.into();
        let embedder = Arc::new(OnceLock::new());
        embedder.get_or_init(|| crate::load_embedder(config, retry).into());
        HistorySearch { store, config: config.clone(), embedder, counters: None }
    }
}

impl HistorySearch {
    /// The best messages and memories of the persona's history on the request `asked` names,
    /// none of them among what the context shows, above the search's own relevance floor:
    /// empty when nothing said is about the request. Never fails: a search that cannot run
    /// says so in [`Recalled::partial`].
    pub fn recall(&self, asked: &RecallRequest<'_>) -> Recalled {
        let embedder = self.embedder.get().and_then(|state| state.get().ok());
        let RecallRequest { persona, request, shown } = asked;
        match strata_recall::proactive(&*self.store, persona, &self.config, embedder, request, shown) {
            Ok(found) => {
                if let Some(counters) = &self.counters {
                    counters.recalled(found.hits.len());
                }
                found
            }
            Err(error) => {
                tracing::warn!(%error, "the recalled block's search failed");
                Recalled {
                    partial: Some(format!("the search of the history failed: {error}")),
                    ..Recalled::default()
                }
            }
        }
    }
}

/// The database at `location`: a PostgreSQL url, or else a SQLite file's path.
pub(crate) fn open_backend(location: &Path) -> Result<SharedBackend> {
    let text = location.to_string_lossy();
    if strata_seam::location::is_postgres_url(&text) {
        #[cfg(feature = "postgres")]
        return Ok(std::sync::Arc::new(strata_pg::PgStore::open(&text)?));
        #[cfg(not(feature = "postgres"))]
        return Err(Error::Config(
            "the database is a PostgreSQL url, and this build of strata has no `postgres` feature".into(),
        ));
    }
    Ok(Store::open(location)?.into())
}

fn not_loaded() -> strata_recall::Error {
    strata_recall::Error::SemanticUnavailable { reason: "the model is not loaded".into() }
}
