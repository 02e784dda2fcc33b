//! `strata.node`: the engine as a Node.js addon. A thin layer that converts: every call that
//! touches the database is a promise whose work runs on libuv's thread pool through
//! [`strata::blocking`], on the addon's one runtime. Values cross as JSON text both ways
//! (`index.js` stringifies what goes in and parses what comes out), errors as `Error`s whose
//! `code` names the class `index.js` throws (`errors.rs`). The package's API is `index.js`,
//! typed by `index.d.ts`; this module is private to it.

// napi-derive expands `#[napi]` into the `extern "C"` registration and conversion code Node-API
// needs, which is `unsafe`; this crate writes none of its own.
#![allow(unsafe_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use napi::Env;
use napi::bindgen_prelude::AsyncTask;
use napi_derive::napi;
use serde_json::Value;
use strata::seam::forgetting::ForgetScope;
use strata::seam::memories::{MemoryWrite, Provenance, Writer, normalize_key};
use strata::seam::{Category, SharedBackend};
use strata::store::Store;
use strata::{Incoming, edge};

mod errors;
mod work;

use crate::errors::Failure;
use crate::work::{Work, json, promise};

/// The one runtime of the addon: the thread pool's jobs drive the engine on it through
/// `strata::blocking`, and background compactions and the embedder's waits run on it. Never
/// Node's event loop.
fn runtime() -> Result<&'static tokio::runtime::Runtime, Failure> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| strata::blocking::runtime().map_err(|error| error.to_string()))
        .as_ref()
        .map_err(|error| Failure::Internal(format!("the addon's runtime did not start: {error}")))
}

/// JSON text from `index.js`, or the error naming what it is in `what`.
fn parse(text: &str, what: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|error| Failure::BadInput(format!("{what} is not JSON: {error}")))
}

/// A format's name (`openai`, `anthropic`, `responses`).
fn message_format(name: &str) -> Result<strata::Format, Failure> {
    name.parse().map_err(Failure::BadInput)
}

/// A message as the bot has it (any format [`Incoming::from_json`] reads), or as `format`.
fn incoming(message: &Value, format: Option<strata::Format>) -> Result<Incoming, Failure> {
    Ok(match format {
        None => Incoming::from_json(message)?,
        Some(format) => Incoming::from_json_as(message, format)?,
    })
}

/// A memory key normalized to snake_case, as the command line does.
fn memory_key(raw: &str) -> Result<String, Failure> {
    normalize_key(raw).ok_or_else(|| Failure::BadInput(format!("key {raw:?} has no letters or digits")))
}

fn category(name: &str) -> Result<Category, Failure> {
    name.parse().map_err(|error: strata::seam::Error| error.into())
}

/// The configuration: the defaults, JSON shaped like `strata.example.toml`, or a TOML file.
fn config(json: Option<String>, file: Option<String>) -> Result<strata::Config, Failure> {
    match (json, file) {
        (Some(text), _) => serde_json::from_value(parse(&text, "the configuration")?)
            .map_err(|error| Failure::BadInput(format!("invalid configuration: {error}"))),
        (None, Some(path)) => {
            Ok(strata::Config::load(Some(PathBuf::from(path).as_path()), std::iter::empty())?)
        }
        (None, None) => Ok(strata::Config::default()),
    }
}

fn is_postgres_url(path: &str) -> bool {
    strata::seam::location::is_postgres_url(path)
}

/// The engine an [`Engine`] and its sessions share: `None` once closed.
type Shared = Arc<RwLock<Option<strata::blocking::Engine>>>;

fn open_engine(shared: &Shared) -> Result<strata::blocking::Engine, Failure> {
    let engine = shared.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    engine.clone().ok_or(Failure::Closed)
}

/// Opens (or creates) the SQLite file at `path`, or the PostgreSQL database a `postgres://`
/// url names. `config` is JSON text, `config_file` a TOML path (the first wins);
/// `busy_timeout` is in seconds.
#[napi]
pub fn open(
    path: String,
    config: Option<String>,
    config_file: Option<String>,
    busy_timeout: f64,
) -> AsyncTask<Work<Engine>> {
    promise(move || {
        let config = self::config(config, config_file)?;
        if !busy_timeout.is_finite() || busy_timeout < 0.0 {
            return Err(Failure::BadInput(format!("busyTimeout {busy_timeout} is not a number of seconds")));
        }
        let handle = runtime()?.handle().clone();
        // A PostgreSQL url opens that database (its pool waits for connections, not for
        // SQLite's lock); anything else is a SQLite file.
        let engine = if is_postgres_url(&path) {
            strata::Engine::open(&path, config)?
        } else {
            let timeout = Duration::from_secs_f64(busy_timeout);
            strata::Engine::from_store(Store::open_with_timeout(&path, timeout)?, config)?
        };
        let engine = strata::blocking::Engine::on_runtime(engine, handle);
        Ok(Engine { engine: Arc::new(RwLock::new(Some(engine))), path })
    })
}

/// Waits for the embedding model's loads and batches in flight, and refuses later ones: called
/// at the process's exit, before ONNX Runtime is torn down under a thread still in it (see
/// `strata::recall::embedding::shut_down`).
#[napi]
pub fn shut_down() {
    strata::recall::embedding::shut_down();
}

/// The version of strata this addon was built from.
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// The version of the shapes of the JSON this addon answers with (`strata::edge`): it goes up
/// when a field is removed or renamed, or its type or meaning changes.
#[napi]
pub fn wire_version() -> u32 {
    strata::WIRE_VERSION
}

/// A strata database: sessions, memories, search.
#[napi]
#[derive(Debug)]
pub struct Engine {
    engine: Shared,
    path: String,
}

impl Engine {
    fn get(&self) -> Result<strata::blocking::Engine, Failure> {
        open_engine(&self.engine)
    }

    /// `job` with the engine, as a promise; a closed engine refuses it at once.
    fn with<T>(
        &self,
        job: impl FnOnce(strata::blocking::Engine) -> Result<T, Failure> + Send + 'static,
    ) -> AsyncTask<Work<T>>
    where
        T: napi::bindgen_prelude::ToNapiValue + napi::bindgen_prelude::TypeName + Send + 'static,
    {
        let engine = self.get();
        promise(move || job(engine?))
    }
}

#[napi]
impl Engine {
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.path.clone()
    }

    /// The configuration in force, as JSON text.
    #[napi]
    pub fn config(&self, env: Env) -> napi::Result<String> {
        self.get().and_then(|engine| json(engine.config())).map_err(|failure| failure.thrown(&env))
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.engine.read().unwrap_or_else(|poisoned| poisoned.into_inner()).is_none()
    }

    /// Closes the engine: later calls, and calls on its sessions, fail.
    #[napi]
    pub fn close(&self) {
        self.engine.write().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
    }

    #[napi]
    pub fn session(&self, key: String, persona: String) -> AsyncTask<Work<Session>> {
        let shared = self.engine.clone();
        self.with(move |engine| {
            let session = engine.session(&key, &persona)?;
            Ok(Session { engine: shared, session: Arc::new(session) })
        })
    }

    #[napi]
    pub fn sessions(&self, persona: Option<String>) -> AsyncTask<Work<String>> {
        self.with(move |engine| {
            json(&edge::all::<_, edge::Session>(&engine.store().sessions(persona.as_deref())?))
        })
    }

    /// The tools' specs in `format`, as JSON text.
    #[napi]
    pub fn tool_specs(&self, env: Env, format: Option<String>) -> napi::Result<String> {
        let specs = || -> Result<String, Failure> {
            let format = format.as_deref().map(message_format).transpose()?.unwrap_or_default();
            json(&self.get()?.tool_specs_in(format))
        };
        specs().map_err(|failure| failure.thrown(&env))
    }

    #[napi]
    pub fn save_memory(
        &self,
        persona: String,
        category: String,
        key: String,
        content: String,
        title: Option<String>,
    ) -> AsyncTask<Work<String>> {
        self.with(move |engine| {
            let (category, key) = (self::category(&category)?, memory_key(&key)?);
            let title = title.unwrap_or_else(|| key.clone());
            let write = MemoryWrite { category, key: &key, title: &title, content: &content };
            let (memory, created) =
                engine.store().save_memory(Writer::User, &persona, &write, &Provenance::user("node"))?;
            engine.engine().notify_embedder();
            json(&edge::SavedMemory { memory: edge::Memory::from(&memory), created })
        })
    }

    #[napi]
    pub fn memory(&self, persona: String, category: String, key: String) -> AsyncTask<Work<String>> {
        self.with(move |engine| {
            let (category, key) = (self::category(&category)?, memory_key(&key)?);
            json(&engine.store().memory(&persona, category, &key)?.as_ref().map(edge::Memory::from))
        })
    }

    #[napi]
    pub fn memories(&self, persona: String, category: Option<String>) -> AsyncTask<Work<String>> {
        self.with(move |engine| {
            let category = category.as_deref().map(self::category).transpose()?;
            json(&edge::all::<_, edge::Memory>(&engine.store().memories(&persona, category)?))
        })
    }

    #[napi]
    pub fn delete_memory(&self, persona: String, category: String, key: String) -> AsyncTask<Work<bool>> {
        self.with(move |engine| {
            let (category, key) = (self::category(&category)?, memory_key(&key)?);
            Ok(engine.store().delete_memory(Writer::User, &persona, category, &key)?)
        })
    }

    #[napi]
    pub fn proposals(&self, persona: String) -> AsyncTask<Work<String>> {
        self.with(move |engine| json(&edge::all::<_, edge::Proposal>(&engine.engine().proposals(&persona)?)))
    }

    #[napi]
    pub fn accept_proposal(&self, persona: String, key: String) -> AsyncTask<Work<String>> {
        self.with(move |engine| json(&edge::Memory::from(&engine.engine().accept_proposal(&persona, &key)?)))
    }

    #[napi]
    pub fn reject_proposal(&self, persona: String, key: String) -> AsyncTask<Work<String>> {
        self.with(move |engine| {
            json(&edge::Proposal::from(&engine.engine().reject_proposal(&persona, &key)?))
        })
    }

    /// The memories of `persona` nearest `query` by meaning fused with keywords (keywords
    /// alone, saying so, without the model), best first.
    #[napi]
    pub fn search_memories(&self, persona: String, query: String, limit: u32) -> AsyncTask<Work<String>> {
        self.with(move |engine| {
            let embedder = engine.engine().embedder().clone();
            let (store, recall) = (engine.store(), &engine.config().recall);
            json(&strata::recall::tools::search_memories(
                &**store, &persona, recall, &embedder, &query, limit,
            )?)
        })
    }

    /// Embeds everything still waiting for a vector; how many vectors were written.
    #[napi]
    pub fn embed(&self) -> AsyncTask<Work<i64>> {
        self.with(|engine| {
            let written = engine.engine().embed_pending()?;
            i64::try_from(written).map_err(|error| Failure::Internal(error.to_string()))
        })
    }

    #[napi]
    pub fn start_embedding(&self) -> AsyncTask<Work<()>> {
        self.with(|engine| Ok(engine.engine().start_embedding()?))
    }

    #[napi]
    pub fn wait_embedded(&self, timeout: f64) -> AsyncTask<Work<bool>> {
        self.with(move |engine| {
            if !timeout.is_finite() || timeout < 0.0 {
                return Err(Failure::BadInput(format!("timeout {timeout} is not a number of seconds")));
            }
            Ok(engine.engine().wait_embedded(Duration::from_secs_f64(timeout)))
        })
    }

    #[napi]
    pub fn stats(&self) -> AsyncTask<Work<String>> {
        self.with(|engine| json(&edge::Stats::from(&engine.store().stats()?)))
    }

    /// The database's checks, with `healthy` saying whether all passed.
    #[napi]
    pub fn doctor(&self, full: bool) -> AsyncTask<Work<String>> {
        self.with(move |engine| json(&edge::DoctorReport::from(&engine.store().doctor(full)?)))
    }

    /// Erases a persona, a session, or a session's messages sent before `before` (a Unix
    /// time), and everything derived from them; `dry_run` only says what would go.
    #[napi]
    pub fn forget(
        &self,
        persona: Option<String>,
        session: Option<String>,
        before: Option<f64>,
        dry_run: bool,
    ) -> AsyncTask<Work<String>> {
        self.with(move |engine| {
            let scope = match (persona, session, before) {
                (Some(persona), None, None) => ForgetScope::Persona { persona },
                (None, Some(key), None) => ForgetScope::Session { key },
                (None, Some(key), Some(before)) if before.is_finite() => {
                    ForgetScope::SessionBefore { key, before: strata::seam::backend::from_unix(before) }
                }
                _ => {
                    return Err(Failure::BadInput(
                        "name persona, or session (with before, a Unix time, optionally)".into(),
                    ));
                }
            };
            if dry_run {
                json(&edge::ForgetPlan::from(&engine.forget_plan(&scope)?))
            } else {
                json(&edge::Forgotten::from(&engine.forget(&scope, "node", |_, _| {})?))
            }
        })
    }

    /// Writes a consistent copy to `dest`, which must not exist.
    #[napi]
    pub fn backup(&self, dest: String) -> AsyncTask<Work<()>> {
        self.with(move |engine| Ok(engine.engine().backup(std::path::Path::new(&dest))?))
    }
}

/// One conversation, bound to its persona.
#[napi]
#[derive(Debug)]
pub struct Session {
    engine: Shared,
    session: Arc<strata::blocking::Session>,
}

impl Session {
    /// `job` with the session, as a promise; a session of a closed engine refuses it at once.
    fn with<T>(
        &self,
        job: impl FnOnce(&strata::blocking::Session) -> Result<T, Failure> + Send + 'static,
    ) -> AsyncTask<Work<T>>
    where
        T: napi::bindgen_prelude::ToNapiValue + napi::bindgen_prelude::TypeName + Send + 'static,
    {
        let open = open_engine(&self.engine).map(|_| self.session.clone());
        promise(move || job(&*open?))
    }

    /// `job` with the engine's store and the session's id.
    fn with_store<T>(
        &self,
        job: impl FnOnce(SharedBackend, strata::seam::SessionId) -> Result<T, Failure> + Send + 'static,
    ) -> AsyncTask<Work<T>>
    where
        T: napi::bindgen_prelude::ToNapiValue + napi::bindgen_prelude::TypeName + Send + 'static,
    {
        let (engine, id) = (self.engine.clone(), self.session.id());
        promise(move || job(open_engine(&engine)?.store().clone(), id))
    }
}

#[napi]
impl Session {
    /// The caller's key for the session.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.session.info().key.clone()
    }

    /// The persona every tool call runs as.
    #[napi(getter)]
    pub fn persona(&self) -> String {
        self.session.info().persona.clone()
    }

    /// The session's database id.
    #[napi(getter)]
    pub fn id(&self) -> i64 {
        self.session.id().0
    }

    /// Stores one message (JSON text), read as `format` when named; its id.
    #[napi]
    pub fn append(&self, message: String, format: Option<String>) -> AsyncTask<Work<i64>> {
        self.with(move |session| {
            let format = format.as_deref().map(message_format).transpose()?;
            let message = incoming(&parse(&message, "the message")?, format)?;
            Ok(session.append_incoming(message)?.0)
        })
    }

    /// Stores a batch (a JSON array) in one transaction: one bad message refuses the batch,
    /// naming its index, before anything is written.
    #[napi]
    pub fn append_many(&self, messages: String) -> AsyncTask<Work<Vec<i64>>> {
        self.with(move |session| {
            let Value::Array(messages) = parse(&messages, "the messages")? else {
                return Err(Failure::BadInput("appendMany takes an array of messages".into()));
            };
            let batch = messages
                .iter()
                .enumerate()
                .map(|(index, message)| incoming(message, None).map_err(|failure| failure.at(index)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(session.append_many(batch)?.into_iter().map(|id| id.0).collect())
        })
    }

    /// Compacts what is due, then assembles the context, as JSON text (`rendered`).
    #[napi]
    pub fn prepare_context(&self, format: Option<String>, keep_reasoning: bool) -> AsyncTask<Work<String>> {
        self.with(move |session| {
            let format = format.as_deref().map(message_format).transpose()?;
            rendered(&session.prepare_context()?, format, keep_reasoning)
        })
    }

    /// Runs a tool as this session's persona: `arguments` is the JSON text the model sent (text
    /// that is not JSON goes to the tool as a string, which refuses it in its own answer, as
    /// the model must see). The answer is JSON text, a refusal included.
    #[napi]
    pub fn call_tool(&self, name: String, arguments: String) -> AsyncTask<Work<String>> {
        self.with(move |session| {
            let arguments = serde_json::from_str(&arguments).unwrap_or(Value::String(arguments));
            json(&session.call_tool(&name, arguments))
        })
    }

    /// Folds everything due now, at most `max_calls` summarizer calls.
    #[napi]
    pub fn compact(&self, max_calls: u32) -> AsyncTask<Work<String>> {
        let engine = self.engine.clone();
        self.with(move |session| {
            let engine = open_engine(&engine)?;
            let rounds = engine.engine().compactor().config().max_rounds;
            json(&engine.compact_until_done(session.id(), rounds, max_calls, |_| {})?)
        })
    }

    /// The stored messages with seqs `first_seq..=last_seq`.
    #[napi]
    pub fn messages(&self, first_seq: i64, last_seq: Option<i64>) -> AsyncTask<Work<String>> {
        self.with_store(move |store, id| {
            json(&edge::all::<_, edge::Message>(
                &store.messages(id, first_seq..=last_seq.unwrap_or(i64::MAX))?,
            ))
        })
    }

    /// The summary forest drawn as an indented tree.
    #[napi]
    pub fn tree(&self) -> AsyncTask<Work<String>> {
        self.with_store(|store, id| Ok(strata::compactor::render_tree(&*store, id)?))
    }
}

/// A prepared context as JSON text: in `format` (the stored messages from their bodies, pairing
/// repaired, reasoning by each provider's rule; `system` for Anthropic) when one is asked for or
/// a message has a body, else the assembled OpenAI messages as they are, straight from the Rust
/// types (the hot call skips the JSON value in between).
fn rendered(
    prepared: &strata::PreparedContext,
    format: Option<strata::Format>,
    keep_reasoning: bool,
) -> Result<String, Failure> {
    let has_body = prepared.context.originals.iter().any(Option::is_some);
    if format.is_none() && !has_body {
        return json(prepared);
    }
    let format = format.unwrap_or_default();
    let rendered = prepared.render(format, keep_reasoning)?;
    let mut value = serde_json::to_value(prepared).map_err(|error| Failure::Internal(error.to_string()))?;
    value["context"]["messages"] = Value::Array(rendered.messages);
    value["context"]["system"] = rendered.system.unwrap_or(Value::Null);
    value["context"]["format"] = format.as_str().into();
    json(&value)
}
