//! The engine for callers that do not run an async runtime: the `strata` command line and the
//! Python binding. Like `reqwest::blocking`, each call runs the async engine to completion on a
//! runtime this facade owns (or one the caller hands it), so no caller builds its own.
//!
//! ```
//! use strata::blocking::Engine;
//! use strata::{ChatMessage, Config};
//!
//! # fn main() -> strata::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let engine = Engine::open(dir.path().join("strata.db"), Config::default())?;
//! let session = engine.session("chat-1", "coder")?;
//! session.append(ChatMessage::user("The staging database listens on port 6432."))?;
//! let prepared = session.prepare_context()?;
//! assert!(prepared.context.tokens.total <= prepared.context.tokens.budget);
//! let answer = session.call_tool("memory_grep", serde_json::json!({"query": "staging", "include_in_context": true}));
//! assert!(answer["count"].as_u64().unwrap() >= 1);
//! # Ok(()) }
//! ```

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;
use strata_compactor::{AssembledContext, Compaction, Outcome, Resummarized};
use strata_seam::{Level, MessageId, SessionId, SharedBackend, SummaryNode};
use tokio::runtime::{Handle, Runtime};

use crate::config::Config;
use crate::engine::{CompactedSession, EngineSession, PreparedContext};
use crate::error::{Error, Result};
use crate::message::{ChatMessage, Incoming};

/// Worker threads of the runtime a facade builds: the engine's own work runs on tokio's
/// blocking pool, the workers only drive HTTP and background compactions.
const WORKER_THREADS: usize = 2;

/// A runtime the facade owns, or the handle of one its caller owns.
#[derive(Clone, Debug)]
enum Driver {
    Owned(Arc<Runtime>),
    Borrowed(Handle),
}

impl Driver {
    fn handle(&self) -> &Handle {
        match self {
            Driver::Owned(runtime) => runtime.handle(),
            Driver::Borrowed(handle) => handle,
        }
    }
}

/// Builds the multi-threaded runtime a facade drives the engine with: multi-threaded so that a
/// background compaction (`[summarizer] background`) keeps running between calls, and so that
/// several threads may block on one engine at once.
pub fn runtime() -> Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .thread_name("strata")
        .enable_all()
        .build()
        .map_err(Error::Runtime)
}

/// An [`Engine`](crate::Engine) whose async calls block until done. Cheap to clone; safe to
/// share between threads, each of which may block on it at once.
#[derive(Clone, Debug)]
pub struct Engine {
    engine: crate::Engine,
    driver: Driver,
}

impl Engine {
    /// Opens (or creates) the database at `path`, on a runtime of its own.
    pub fn open(path: impl AsRef<Path>, config: Config) -> Result<Engine> {
        Engine::new(crate::Engine::open(path, config)?)
    }

    /// An engine over a database the caller opened, on a runtime of its own.
    pub fn from_store(store: impl Into<SharedBackend>, config: Config) -> Result<Engine> {
        Engine::new(crate::Engine::from_store(store, config)?)
    }

    /// Drives `engine` on a runtime of its own.
    pub fn new(engine: crate::Engine) -> Result<Engine> {
        Ok(Engine { engine, driver: Driver::Owned(Arc::new(runtime()?)) })
    }

    /// Drives `engine` on the caller's multi-threaded runtime (the Python binding shares one
    /// runtime between its blocking and its asyncio calls). Never call this facade from inside
    /// that runtime's tasks: blocking there stalls them.
    pub fn on_runtime(engine: crate::Engine, handle: Handle) -> Engine {
        Engine { engine, driver: Driver::Borrowed(handle) }
    }

    /// The async engine underneath, for everything that does not block (the store, the
    /// configuration, memories, proposals).
    pub fn engine(&self) -> &crate::Engine {
        &self.engine
    }

    /// The database.
    pub fn store(&self) -> &SharedBackend {
        self.engine.store()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        self.engine.config()
    }

    /// The runtime the calls run on.
    pub fn handle(&self) -> &Handle {
        self.driver.handle()
    }

    /// Runs `future` to completion on the facade's runtime: for what the facade does not wrap
    /// (the chat loop, the MCP server).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.driver.handle().block_on(future)
    }

    /// The session with this key, created for `persona` if new.
    pub fn session(&self, key: &str, persona: &str) -> Result<Session> {
        Ok(Session { session: self.engine.session(key, persona)?, driver: self.driver.clone() })
    }

    /// The tools the model may call, in the OpenAI function-calling format.
    pub fn tool_specs(&self) -> Vec<Value> {
        self.engine.tool_specs()
    }

    /// [`crate::Engine::tool_specs_in`].
    pub fn tool_specs_in(&self, format: crate::Format) -> Vec<Value> {
        self.engine.tool_specs_in(format)
    }

    /// [`crate::Engine::compact_until_done`], blocking.
    pub fn compact_until_done(
        &self,
        session: SessionId,
        rounds_per_call: u32,
        max_calls: u32,
        progress: impl FnMut(&Compaction),
    ) -> Result<CompactedSession> {
        self.block_on(self.engine.compact_until_done(session, rounds_per_call, max_calls, progress))
    }

    /// [`crate::Engine::assemble`], blocking: the context at `now`, without compacting.
    pub fn assemble(&self, session: SessionId, now: DateTime<Utc>) -> Result<AssembledContext> {
        self.block_on(self.engine.assemble(session, now))
    }

    /// See [`crate::Engine::preview`].
    pub fn preview(
        &self,
        session: SessionId,
        request: Option<strata_seam::NewMessage>,
        now: DateTime<Utc>,
    ) -> Result<AssembledContext> {
        self.block_on(self.engine.preview(session, request, now))
    }

    /// [`crate::Engine::resummarize`], blocking.
    pub fn resummarize(
        &self,
        session: SessionId,
        level: Option<Level>,
        progress: impl FnMut(&SummaryNode),
    ) -> Result<Resummarized> {
        self.block_on(self.engine.resummarize(session, level, progress))
    }

    /// [`crate::Engine::forget_plan`], blocking: what a forget would erase.
    pub fn forget_plan(
        &self,
        scope: &strata_seam::forgetting::ForgetScope,
    ) -> Result<strata_seam::forgetting::ForgetPlan> {
        self.block_on(self.engine.forget_plan(scope))
    }

    /// [`crate::Engine::forget`], blocking.
    pub fn forget(
        &self,
        scope: &strata_seam::forgetting::ForgetScope,
        command: &str,
        progress: impl FnMut(u64, u64) + Send + 'static,
    ) -> Result<strata_seam::forgetting::Forgotten> {
        self.block_on(self.engine.forget(scope, command, progress))
    }

    /// Stops the runtime without waiting for its tasks (a read of standard input that never
    /// returns, say). Only an owned runtime is stopped; the handle of a caller's is dropped.
    pub fn shutdown_background(self) {
        if let Driver::Owned(runtime) = self.driver
            && let Ok(runtime) = Arc::try_unwrap(runtime)
        {
            runtime.shutdown_background();
        }
    }
}

/// One conversation of a blocking [`Engine`], bound to its persona.
#[derive(Clone, Debug)]
pub struct Session {
    session: EngineSession,
    driver: Driver,
}

impl Session {
    /// The async session underneath.
    pub fn session(&self) -> &EngineSession {
        &self.session
    }

    /// The session's database id.
    pub fn id(&self) -> SessionId {
        self.session.id()
    }

    /// The session row as it was when this handle was made.
    pub fn info(&self) -> &strata_seam::Session {
        self.session.info()
    }

    /// [`EngineSession::append`].
    pub fn append(&self, message: ChatMessage) -> Result<MessageId> {
        self.session.append(message)
    }

    /// [`EngineSession::append_incoming`].
    pub fn append_incoming(&self, message: Incoming) -> Result<MessageId> {
        self.session.append_incoming(message)
    }

    /// [`EngineSession::append_many`].
    pub fn append_many(&self, messages: Vec<Incoming>) -> Result<Vec<MessageId>> {
        self.session.append_many(messages)
    }

    /// [`EngineSession::prepare_context`], blocking.
    pub fn prepare_context(&self) -> Result<PreparedContext> {
        self.driver.handle().block_on(self.session.prepare_context())
    }

    /// [`EngineSession::call_tool`], blocking.
    pub fn call_tool(&self, name: &str, arguments: Value) -> Value {
        self.driver.handle().block_on(self.session.call_tool(name, arguments))
    }

    /// [`EngineSession::finish_compaction`], blocking.
    pub fn finish_compaction(&self) -> Option<Result<Outcome>> {
        self.driver.handle().block_on(self.session.finish_compaction())
    }
}
