//! `strata._strata`: the engine as a native Python module. A thin layer that converts: every
//! call goes to [`strata::blocking`] (blocking calls, the GIL released) or to the async
//! engine on the same runtime (the `*_async` methods `strata.aio` awaits). Python values cross
//! as JSON-shaped data (the pythonize crate); errors become the exceptions of `strata/_errors.py`.
//! The pure-Python layer (`strata/`) documents the API; `strata/_strata.pyi` types this module.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use pythonize::{depythonize, pythonize};
use serde_json::Value;
use strata::seam::memories::{MemoryWrite, Provenance, Writer, normalize_key};
use strata::seam::{Category, SharedBackend};
use strata::store::Store;
use strata::{Incoming, edge};

mod errors;

use crate::errors::{Failure, to_py};

/// The one runtime of the module: the blocking calls drive it from the caller's thread, the
/// asyncio calls run on it (`pyo3_async_runtimes` hands their results to the caller's loop).
/// Never the caller's event loop.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| strata::blocking::runtime().expect("the module's tokio runtime starts"))
}

/// JSON-shaped data on its way to Python.
struct Json(Value);

impl<'py> IntoPyObject<'py> for Json {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pythonize(py, &self.0)?)
    }
}

/// Any serializable answer as Python data.
fn json(value: &impl serde::Serialize) -> Result<Json, Failure> {
    serde_json::to_value(value).map(Json).map_err(|error| Failure::Internal(error.to_string()))
}

/// Python data as JSON, or the error naming what it is in `what`.
fn from_python(value: &Bound<'_, PyAny>, what: &str) -> Result<Value, Failure> {
    depythonize(value).map_err(|error| Failure::BadInput(format!("{what} is not JSON-shaped data: {error}")))
}

/// A message as the bot has it: a dict, or an object of the `openai` or `anthropic` package
/// (anything with pydantic's `model_dump`; `strata/__init__.py` dumps the ones nested in a
/// dict), read with [`Incoming::from_json`], or as `format` when the caller names one.
fn incoming(message: &Bound<'_, PyAny>, format: Option<&str>) -> Result<Incoming, Failure> {
    let value = if !message.is_instance_of::<PyDict>() && message.hasattr("model_dump")? {
        let options = PyDict::new(message.py());
        options.set_item("exclude_unset", true)?;
        options.set_item("mode", "json")?;
        from_python(&message.call_method("model_dump", (), Some(&options))?, "the message")?
    } else {
        from_python(message, "the message")?
    };
    match format {
        None => Ok(Incoming::from_json(&value)?),
        Some(format) => Ok(Incoming::from_json_as(&value, message_format(format)?)?),
    }
}

/// A format's name (`openai`, `anthropic`, `responses`).
fn message_format(name: &str) -> Result<strata::Format, Failure> {
    name.parse().map_err(Failure::BadInput)
}

/// The arguments of a tool call: a dict, or the JSON text a model returns. Text that is not
/// JSON goes to the tool as a string, which refuses it in its own answer, as the model must see.
fn tool_arguments(arguments: Option<&Bound<'_, PyAny>>) -> PyResult<Value> {
    match arguments {
        None => Ok(Value::Object(Default::default())),
        Some(text) if text.is_instance_of::<PyString>() => {
            let text: String = text.extract()?;
            Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
        }
        Some(value) => from_python(value, "the tool arguments").map_err(to_py),
    }
}

/// A memory key normalized to snake_case, as the command line does.
fn memory_key(raw: &str) -> PyResult<String> {
    normalize_key(raw)
        .ok_or_else(|| to_py(Failure::BadInput(format!("key {raw:?} has no letters or digits"))))
}

fn category(name: &str) -> PyResult<Category> {
    name.parse().map_err(|error: strata::seam::Error| to_py(error.into()))
}

/// The configuration: nothing (the defaults), a dict shaped like `strata.example.toml`, or the
/// path of a TOML file.
fn config(config: Option<&Bound<'_, PyAny>>) -> PyResult<strata::Config> {
    let Some(config) = config.filter(|value| !value.is_none()) else { return Ok(strata::Config::default()) };
    if config.is_instance_of::<PyDict>() {
        let value = from_python(config, "the configuration").map_err(to_py)?;
        return serde_json::from_value(value)
            .map_err(|error| to_py(Failure::BadInput(format!("invalid configuration: {error}"))));
    }
    let path: PathBuf = config
        .extract()
        .map_err(|_| to_py(Failure::BadInput("config is a dict or the path of a TOML file".into())))?;
    strata::Config::load(Some(&path), std::iter::empty()).map_err(|error| to_py(error.into()))
}

/// A strata database: sessions, memories, search. Safe to share between threads.
#[pyclass(frozen, module = "strata._strata", name = "Engine")]
struct PyEngine {
    /// `None` once closed.
    engine: RwLock<Option<strata::blocking::Engine>>,
    path: PathBuf,
}

impl PyEngine {
    fn get(&self) -> PyResult<strata::blocking::Engine> {
        let engine = self.engine.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        engine.clone().ok_or_else(|| to_py(Failure::Closed))
    }

    fn store(&self) -> PyResult<SharedBackend> {
        Ok(self.get()?.store().clone())
    }
}

fn is_postgres_url(path: &std::path::Path) -> bool {
    path.to_str().is_some_and(strata::seam::location::is_postgres_url)
}

/// A database location for `repr`: a url without its password.
fn shown(path: &std::path::Path) -> String {
    strata::seam::location::without_password(&path.to_string_lossy())
}

/// Runs `work` with the GIL released and turns its answer into Python data.
fn detached<T: serde::Serialize>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, Failure> + Send,
) -> PyResult<Json> {
    py.detach(|| work().and_then(|answer| json(&answer))).map_err(to_py)
}

#[pymethods]
impl PyEngine {
    #[new]
    #[pyo3(signature = (path, config = None, busy_timeout = 10.0))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        config: Option<&Bound<'_, PyAny>>,
        busy_timeout: f64,
    ) -> PyResult<Self> {
        let config = self::config(config)?;
        if !busy_timeout.is_finite() || busy_timeout < 0.0 {
            return Err(to_py(Failure::BadInput(format!(
                "busy_timeout {busy_timeout} is not a number of seconds"
            ))));
        }
        let timeout = Duration::from_secs_f64(busy_timeout);
        let handle = runtime().handle().clone();
        let engine = py
            .detach(|| -> Result<_, Failure> {
                // A PostgreSQL url opens that database (its pool waits for connections, not
                // for SQLite's lock); anything else is a SQLite file.
                let engine = if is_postgres_url(&path) {
                    strata::Engine::open(&path, config)?
                } else {
                    strata::Engine::from_store(Store::open_with_timeout(&path, timeout)?, config)?
                };
                Ok(strata::blocking::Engine::on_runtime(engine, handle))
            })
            .map_err(to_py)?;
        Ok(PyEngine { engine: RwLock::new(Some(engine)), path })
    }

    /// The database file.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The configuration in force, as a dict.
    #[getter]
    fn config(&self) -> PyResult<Json> {
        json(self.get()?.config()).map_err(to_py)
    }

    /// Closes the engine: later calls raise `strata.Error`. Sessions opened from it close too.
    fn close(&self) {
        let mut engine = self.engine.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        engine.take();
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.engine.read().unwrap_or_else(|poisoned| poisoned.into_inner()).is_none()
    }

    #[pyo3(signature = (key, persona = "default"))]
    fn session(slf: &Bound<'_, Self>, key: &str, persona: &str) -> PyResult<PySession> {
        let engine = slf.get().get()?;
        let session =
            slf.py().detach(|| engine.session(key, persona)).map_err(|error| to_py(error.into()))?;
        Ok(PySession { engine: slf.clone().unbind(), session: Arc::new(session) })
    }

    #[pyo3(signature = (persona = None))]
    fn sessions(&self, py: Python<'_>, persona: Option<String>) -> PyResult<Json> {
        let store = self.store()?;
        detached(py, move || Ok(edge::all::<_, edge::Session>(&store.sessions(persona.as_deref())?)))
    }

    #[pyo3(signature = (format = None))]
    fn tool_specs(&self, format: Option<&str>) -> PyResult<Json> {
        let format = format.map(message_format).transpose().map_err(to_py)?.unwrap_or_default();
        Ok(Json(Value::Array(self.get()?.tool_specs_in(format))))
    }

    #[pyo3(signature = (persona, category, key, content, title = None))]
    fn save_memory(
        &self,
        py: Python<'_>,
        persona: String,
        category: &str,
        key: &str,
        content: String,
        title: Option<String>,
    ) -> PyResult<Json> {
        let (category, store) = (self::category(category)?, self.store()?);
        let key = memory_key(key)?;
        let engine = self.get()?;
        detached(py, move || {
            let title = title.unwrap_or_else(|| key.clone());
            let write = MemoryWrite { category, key: &key, title: &title, content: &content };
            let (memory, created) =
                store.save_memory(Writer::User, &persona, &write, &Provenance::user("python"))?;
            engine.engine().notify_embedder();
            Ok(edge::SavedMemory { memory: edge::Memory::from(&memory), created })
        })
    }

    fn memory(&self, py: Python<'_>, persona: String, category: &str, key: &str) -> PyResult<Json> {
        let (category, store) = (self::category(category)?, self.store()?);
        let key = memory_key(key)?;
        detached(py, move || Ok(store.memory(&persona, category, &key)?.as_ref().map(edge::Memory::from)))
    }

    #[pyo3(signature = (persona, category = None))]
    fn memories(&self, py: Python<'_>, persona: String, category: Option<&str>) -> PyResult<Json> {
        let category = category.map(self::category).transpose()?;
        let store = self.store()?;
        detached(py, move || Ok(edge::all::<_, edge::Memory>(&store.memories(&persona, category)?)))
    }

    fn delete_memory(&self, py: Python<'_>, persona: String, category: &str, key: &str) -> PyResult<bool> {
        let (category, store) = (self::category(category)?, self.store()?);
        let key = memory_key(key)?;
        py.detach(move || store.delete_memory(Writer::User, &persona, category, &key))
            .map_err(|error| to_py(error.into()))
    }

    fn proposals(&self, py: Python<'_>, persona: String) -> PyResult<Json> {
        let engine = self.get()?;
        detached(py, move || Ok(edge::all::<_, edge::Proposal>(&engine.engine().proposals(&persona)?)))
    }

    fn accept_proposal(&self, py: Python<'_>, persona: String, key: String) -> PyResult<Json> {
        let engine = self.get()?;
        detached(py, move || Ok(edge::Memory::from(&engine.engine().accept_proposal(&persona, &key)?)))
    }

    fn reject_proposal(&self, py: Python<'_>, persona: String, key: String) -> PyResult<Json> {
        let engine = self.get()?;
        detached(py, move || Ok(edge::Proposal::from(&engine.engine().reject_proposal(&persona, &key)?)))
    }

    /// The memories of `persona` nearest `query` by meaning fused with keywords (keywords alone,
    /// saying so, without the model), best first: what the LangGraph store's search runs.
    #[pyo3(signature = (persona, query, limit = 10))]
    fn search_memories(&self, py: Python<'_>, persona: String, query: String, limit: u32) -> PyResult<Json> {
        let engine = self.get()?;
        detached(py, move || {
            let embedder = engine.engine().embedder().clone();
            let (store, recall) = (engine.store(), &engine.config().recall);
            strata::recall::tools::search_memories(&**store, &persona, recall, &embedder, &query, limit)
                .map_err(|error| Failure::Engine(strata::Error::Recall(error)))
        })
    }

    fn embed(&self, py: Python<'_>) -> PyResult<u64> {
        let engine = self.get()?;
        py.detach(move || engine.engine().embed_pending()).map_err(|error| to_py(error.into()))
    }

    fn start_embedding(&self, py: Python<'_>) -> PyResult<()> {
        let engine = self.get()?;
        py.detach(move || engine.engine().start_embedding()).map_err(|error| to_py(error.into()))
    }

    #[pyo3(signature = (timeout = 60.0))]
    fn wait_embedded(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        if !timeout.is_finite() || timeout < 0.0 {
            return Err(to_py(Failure::BadInput(format!("timeout {timeout} is not a number of seconds"))));
        }
        let engine = self.get()?;
        Ok(py.detach(move || engine.engine().wait_embedded(Duration::from_secs_f64(timeout))))
    }

    fn stats(&self, py: Python<'_>) -> PyResult<Json> {
        let store = self.store()?;
        detached(py, move || Ok(edge::Stats::from(&store.stats()?)))
    }

    #[pyo3(signature = (full = false))]
    fn doctor(&self, py: Python<'_>, full: bool) -> PyResult<Json> {
        let store = self.store()?;
        detached(py, move || Ok(edge::DoctorReport::from(&store.doctor(full)?)))
    }

    /// Erases a persona, a session, or a session's messages sent before `before` (a Unix
    /// time), and everything derived from them; `dry_run` only says what would go.
    #[pyo3(signature = (*, persona = None, session = None, before = None, dry_run = false))]
    fn forget(
        &self,
        py: Python<'_>,
        persona: Option<String>,
        session: Option<String>,
        before: Option<f64>,
        dry_run: bool,
    ) -> PyResult<Json> {
        let scope = match (persona, session, before) {
            (Some(persona), None, None) => strata::seam::forgetting::ForgetScope::Persona { persona },
            (None, Some(key), None) => strata::seam::forgetting::ForgetScope::Session { key },
            (None, Some(key), Some(before)) if before.is_finite() => {
                strata::seam::forgetting::ForgetScope::SessionBefore {
                    key,
                    before: strata::seam::backend::from_unix(before),
                }
            }
            _ => {
                return Err(to_py(Failure::BadInput(
                    "name persona, or session (with before, a Unix time, optionally)".into(),
                )));
            }
        };
        let engine = self.get()?;
        detached(py, move || {
            if dry_run {
                json(&edge::ForgetPlan::from(&engine.forget_plan(&scope)?)).map(|shape| shape.0)
            } else {
                json(&edge::Forgotten::from(&engine.forget(&scope, "python", |_, _| {})?))
                    .map(|shape| shape.0)
            }
        })
    }

    fn backup(&self, py: Python<'_>, dest: PathBuf) -> PyResult<()> {
        let engine = self.get()?;
        py.detach(move || engine.engine().backup(&dest)).map_err(|error| to_py(error.into()))
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { ", closed" } else { "" };
        format!("strata.Engine({:?}{state})", shown(&self.path))
    }
}

/// One conversation, bound to its persona.
#[pyclass(frozen, module = "strata._strata", name = "Session")]
struct PySession {
    engine: Py<PyEngine>,
    session: Arc<strata::blocking::Session>,
}

impl PySession {
    /// The session, unless its engine was closed.
    fn open(&self) -> PyResult<Arc<strata::blocking::Session>> {
        if self.engine.get().closed() {
            return Err(to_py(Failure::Closed));
        }
        Ok(self.session.clone())
    }
}

/// An awaitable for the caller's event loop, the work running on the module's runtime.
fn awaitable<'py, T, F>(py: Python<'py>, work: F) -> PyResult<Bound<'py, PyAny>>
where
    T: serde::Serialize + Send + 'static,
    F: Future<Output = Result<T, Failure>> + Send + 'static,
{
    pyo3_async_runtimes::tokio::future_into_py(py, async move {
        work.await.and_then(|answer| json(&answer)).map_err(to_py)
    })
}

/// Blocking store work as an awaitable, on tokio's blocking pool.
fn awaitable_blocking<'py, T>(
    py: Python<'py>,
    work: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>>
where
    T: serde::Serialize + Send + 'static,
{
    awaitable(py, async move {
        tokio::task::spawn_blocking(work).await.map_err(|error| Failure::Internal(error.to_string()))?
    })
}

#[pymethods]
impl PySession {
    /// The caller's key for the session.
    #[getter]
    fn key(&self) -> String {
        self.session.info().key.clone()
    }

    /// The persona every tool call runs as.
    #[getter]
    fn persona(&self) -> String {
        self.session.info().persona.clone()
    }

    /// The session's database id.
    #[getter]
    fn id(&self) -> i64 {
        self.session.id().0
    }

    #[pyo3(signature = (message, format = None))]
    fn append(&self, py: Python<'_>, message: &Bound<'_, PyAny>, format: Option<&str>) -> PyResult<i64> {
        let (session, message) = (self.open()?, incoming(message, format).map_err(to_py)?);
        let id = py.detach(move || session.append_incoming(message)).map_err(|error| to_py(error.into()))?;
        Ok(id.0)
    }

    fn append_many(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
        let session = self.open()?;
        let messages = batch(messages)?;
        let ids = py.detach(move || session.append_many(messages)).map_err(|error| to_py(error.into()))?;
        Ok(ids.into_iter().map(|id| id.0).collect())
    }

    #[pyo3(signature = (format = None, keep_reasoning = false))]
    fn prepare_context<'py>(
        &self,
        py: Python<'py>,
        format: Option<&str>,
        keep_reasoning: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let session = self.open()?;
        let format = format.map(message_format).transpose().map_err(to_py)?;
        let prepared = py.detach(move || session.prepare_context()).map_err(|error| to_py(error.into()))?;
        rendered(py, &prepared, format, keep_reasoning)
    }

    #[pyo3(signature = (name, arguments = None))]
    fn call_tool(&self, py: Python<'_>, name: &str, arguments: Option<&Bound<'_, PyAny>>) -> PyResult<Json> {
        let (session, arguments) = (self.open()?, tool_arguments(arguments)?);
        Ok(Json(py.detach(move || session.call_tool(name, arguments))))
    }

    #[pyo3(signature = (max_calls = 1000))]
    fn compact(&self, py: Python<'_>, max_calls: u32) -> PyResult<Json> {
        let session = self.open()?;
        let engine = self.engine.get().get()?;
        detached(py, move || {
            let rounds = engine.engine().compactor().config().max_rounds;
            Ok(engine.compact_until_done(session.id(), rounds, max_calls, |_| {})?)
        })
    }

    #[pyo3(signature = (first_seq = 0, last_seq = None))]
    fn messages(&self, py: Python<'_>, first_seq: i64, last_seq: Option<i64>) -> PyResult<Json> {
        let session = self.open()?;
        let store = self.engine.get().store()?;
        detached(py, move || {
            Ok(edge::all::<_, edge::Message>(
                &store.messages(session.id(), first_seq..=last_seq.unwrap_or(i64::MAX))?,
            ))
        })
    }

    fn tree(&self, py: Python<'_>) -> PyResult<String> {
        let session = self.open()?;
        let store = self.engine.get().store()?;
        py.detach(move || strata::compactor::render_tree(&*store, session.id()))
            .map_err(|error| to_py(error.into()))
    }

    // The asyncio flavour (`strata.aio`): the same calls as awaitables.

    #[pyo3(signature = (message, format = None))]
    fn _append_async<'py>(
        &self,
        py: Python<'py>,
        message: &Bound<'py, PyAny>,
        format: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (session, message) = (self.open()?, incoming(message, format).map_err(to_py)?);
        awaitable_blocking(py, move || Ok(session.append_incoming(message)?.0))
    }

    fn _append_many_async<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (session, messages) = (self.open()?, batch(messages)?);
        awaitable_blocking(py, move || {
            Ok(session.append_many(messages)?.into_iter().map(|id| id.0).collect::<Vec<_>>())
        })
    }

    #[pyo3(signature = (format = None, keep_reasoning = false))]
    fn _prepare_context_async<'py>(
        &self,
        py: Python<'py>,
        format: Option<&str>,
        keep_reasoning: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let session = self.open()?;
        let format = format.map(message_format).transpose().map_err(to_py)?;
        awaitable(py, async move {
            let prepared = session.session().prepare_context().await?;
            let mut value =
                serde_json::to_value(&prepared).map_err(|error| Failure::Internal(error.to_string()))?;
            if format.is_some() || prepared.context.originals.iter().any(Option::is_some) {
                let format = format.unwrap_or_default();
                let rendered = prepared.render(format, keep_reasoning)?;
                value["context"]["messages"] = Value::Array(rendered.messages);
                value["context"]["system"] = rendered.system.unwrap_or(Value::Null);
                value["context"]["format"] = format.as_str().into();
            }
            Ok(value)
        })
    }

    #[pyo3(signature = (name, arguments = None))]
    fn _call_tool_async<'py>(
        &self,
        py: Python<'py>,
        name: String,
        arguments: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (session, arguments) = (self.open()?, tool_arguments(arguments)?);
        awaitable(py, async move { Ok(session.session().call_tool(&name, arguments).await) })
    }

    #[pyo3(signature = (max_calls = 1000))]
    fn _compact_async<'py>(&self, py: Python<'py>, max_calls: u32) -> PyResult<Bound<'py, PyAny>> {
        let session = self.open()?;
        let engine = self.engine.get().get()?;
        awaitable(py, async move {
            let rounds = engine.engine().compactor().config().max_rounds;
            Ok(engine.engine().compact_until_done(session.id(), rounds, max_calls, |_| {}).await?)
        })
    }

    fn __repr__(&self) -> String {
        format!("strata.Session(key={:?}, persona={:?})", self.key(), self.persona())
    }
}

/// A prepared context as Python data: in `format` (the stored messages from their bodies,
/// pairing repaired, reasoning by each provider's rule; `system` for Anthropic) when one is
/// asked for or a message has a body, else the assembled OpenAI messages as they are, straight
/// from the Rust types (the hot call skips the JSON value in between).
fn rendered<'py>(
    py: Python<'py>,
    prepared: &strata::PreparedContext,
    format: Option<strata::Format>,
    keep_reasoning: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let value = pythonize(py, prepared)?;
    let has_body = prepared.context.originals.iter().any(Option::is_some);
    if format.is_none() && !has_body {
        return Ok(value);
    }
    let format = format.unwrap_or_default();
    let rendered = prepared.render(format, keep_reasoning).map_err(|error| to_py(error.into()))?;
    let context = value.get_item("context")?;
    context.set_item("messages", pythonize(py, &rendered.messages)?)?;
    context.set_item("system", pythonize(py, &rendered.system)?)?;
    context.set_item("format", format.as_str())?;
    Ok(value)
}

/// A list (or any iterable) of messages, read before anything is stored: one bad message
/// refuses the batch, naming its index.
fn batch(messages: &Bound<'_, PyAny>) -> PyResult<Vec<Incoming>> {
    if messages.is_instance_of::<PyDict>() || messages.is_instance_of::<PyString>() {
        return Err(to_py(Failure::BadInput("append_many takes a list of messages".into())));
    }
    let mut batch = Vec::new();
    for (index, message) in messages.try_iter()?.enumerate() {
        batch.push(incoming(&message?, None).map_err(|failure| to_py(failure.at(index)))?);
    }
    Ok(batch)
}

/// Waits for the embedding model's loads and batches in flight, and refuses later ones: run by
/// `atexit`, before the process's exit handlers tear ONNX Runtime down under a thread still in
/// it (which crashed the interpreter at exit; see `strata::recall::embedding::shut_down`).
#[pyfunction]
fn _shut_down(py: Python<'_>) {
    py.detach(strata::recall::embedding::shut_down);
}

/// The Python side of the module: the classes, the runtime the asyncio calls run on, and the
/// exit hook.
/// The `strata` command with `argv` (the program's name first), as the binary runs it: its
/// output goes to the process's standard streams; returns the exit code. The GIL is released
/// while it runs (`strata chat` and `strata mcp` run until their input ends).
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| strata::cli::main_from(argv.into_iter().map(std::ffi::OsString::from)))
}

#[pymodule]
fn _strata(module: &Bound<'_, PyModule>) -> PyResult<()> {
    pyo3_async_runtimes::tokio::init_with_runtime(runtime())
        .map_err(|_| PyRuntimeError::new_err("the tokio runtime of strata was set up twice"))?;
    let shut_down = wrap_pyfunction!(_shut_down, module)?;
    module.py().import("atexit")?.call_method1("register", (&shut_down,))?;
    module.add_function(shut_down)?;
    module.add_function(wrap_pyfunction!(run_cli, module)?)?;
    module.add_class::<PyEngine>()?;
    module.add_class::<PySession>()?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add("WIRE_VERSION", strata::WIRE_VERSION)?;
    Ok(())
}
