//! Local sentence embeddings: small retrieval models (ONNX) through fastembed, with ONNX Runtime
//! loaded explicitly from a local library so that a missing or broken file is an error, never
//! a panic and never a download.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, TryLockError};

use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};
use strata_seam::embeddings::EmbeddingSpace;

use crate::error::{Error, Result};

/// The environment variable naming the assets directory.
pub const ASSETS_ENV: &str = "STRATA_EMBED_ASSETS";

const RUNTIME_LIBRARY: &str = "onnxruntime/libonnxruntime.so";
const MODEL_FILES: [&str; 5] =
    ["model.onnx", "tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"];

/// How a model turns its token vectors into one text vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolingKind {
    /// The mean of the token vectors (sentence-transformers models such as all-MiniLM-L6-v2).
    Mean,
    /// The vector of the leading `[CLS]` token (BGE and arctic-embed models).
    Cls,
}

/// A local sentence-embedding model strata knows how to run: where its files are, how it pools,
/// and the prefixes it was trained with. Every model is identified by [`ModelSpec::id`], which
/// the database stores with its vectors (a different id means re-embedding everything).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    /// The id stored with the vectors and named in `[recall] embed_model`.
    pub id: &'static str,
    /// Its directory under the assets directory.
    pub dir: &'static str,
    /// How token vectors become a text vector.
    pub pooling: PoolingKind,
    /// Put before a search query (retrievers trained with instructions need it).
    pub query_prefix: &'static str,
    /// Put before a stored text.
    pub passage_prefix: &'static str,
    /// Dimensions kept (models trained for it may be truncated, then re-normalized).
    pub dimensions: usize,
    /// Word pieces per chunk: longer texts are split into chunks of about this length.
    pub max_tokens: usize,
    /// Words per chunk when a long text is split; about `max_tokens` word pieces of prose.
    pub chunk_words: usize,
}

/// all-MiniLM-L6-v2, int8 weights turned back into fp32 at load (fp32 arithmetic): the first
/// model strata shipped, still selectable.
pub const MINILM_L6_V2: ModelSpec = ModelSpec {
    id: "all-MiniLM-L6-v2",
    dir: "all-MiniLM-L6-v2-int8",
    pooling: PoolingKind::Mean,
    query_prefix: "",
    passage_prefix: "",
    dimensions: 384,
    // all-MiniLM-L6-v2 was trained on sequences of up to 128 word pieces, and attention costs
    // grow with the square of the length: 128 embeds long messages about twice as fast as 256.
    max_tokens: 128,
    chunk_words: 80,
};

/// all-MiniLM-L6-v2 with int8 arithmetic: the same weights, each weighted MatMul on int8
/// weights and on activations quantized at fixed ranges (so a text's vector never depends on
/// its batch), each attention fused into one ONNX Runtime operator. Derived from
/// [`MINILM_L6_V2`]'s file at fetch time by `scripts/derive-static-int8-model.py --fused`, no
/// inference involved; about twice the throughput at the same recall (benches/README.md,
/// "Fused attention"). Its vectors differ slightly (cosine about 0.99 to the other's), so it
/// has an id of its own: a database embedded with the other is re-embedded, never mixed.
pub const MINILM_L6_V2_Q8: ModelSpec =
    ModelSpec { id: "all-MiniLM-L6-v2-q8", dir: "all-MiniLM-L6-v2-q8", ..MINILM_L6_V2 };

/// Every model strata can load, by id.
pub const MODELS: &[ModelSpec] = &[MINILM_L6_V2_Q8, MINILM_L6_V2];

/// The default model (see benches/README.md, "Embedding models" and "Fused attention", for the
/// measurements that chose it).
pub const DEFAULT_MODEL: &str = MINILM_L6_V2_Q8.id;

/// The model with this id.
pub fn model_spec(id: &str) -> Result<&'static ModelSpec> {
    MODELS.iter().find(|model| model.id == id).ok_or_else(|| Error::UnknownModel {
        id: id.to_owned(),
        known: MODELS.iter().map(|model| model.id).collect::<Vec<_>>().join(", "),
    })
}

/// Splits a text into the pieces embedded separately: windows of `words` words overlapping by
/// a fifth, at most `max` of them (text past them is left to keyword search). A text of at
/// most `words` words is one piece, itself.
pub fn chunk_text(text: &str, words: usize, max: usize) -> Vec<&str> {
    let words = words.max(5);
    let starts: Vec<usize> = text
        .char_indices()
        .filter(|&(at, c)| {
            !c.is_whitespace() && text[..at].chars().next_back().is_none_or(char::is_whitespace)
        })
        .map(|(at, _)| at)
        .collect();
    if starts.len() <= words {
        return vec![text];
    }
    let step = words - words / 5;
    let mut chunks = Vec::new();
    let mut first = 0;
    while first < starts.len() && chunks.len() < max.max(1) {
        let end = starts.get(first + words).copied().unwrap_or(text.len());
        chunks.push(text[starts[first]..end].trim_end());
        if first + words >= starts.len() {
            break;
        }
        first += step;
    }
    chunks
}

/// Where the embedding assets live unless configured: `$STRATA_EMBED_ASSETS`, else
/// `$XDG_CACHE_HOME/strata/embed-assets`, else `$HOME/.cache/strata/embed-assets` (the same
/// rule as `scripts/fetch-embed-assets.sh`).
pub fn default_assets_dir() -> PathBuf {
    let non_empty = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    if let Some(dir) = non_empty(ASSETS_ENV) {
        return dir;
    }
    let cache = non_empty("XDG_CACHE_HOME")
        .or_else(|| non_empty("HOME").map(|home| home.join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("strata").join("embed-assets")
}

/// ONNX Runtime can be loaded once per process; every embedder shares that environment.
static ENVIRONMENT: Mutex<Option<ort::environment::Environment>> = Mutex::new(None);

fn environment(library: &Path) -> Result<ort::environment::Environment> {
    let mut slot = ENVIRONMENT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(environment) = slot.as_ref() {
        return Ok(environment.clone());
    }
    let load_error = |source: Box<dyn std::error::Error + Send + Sync>| Error::RuntimeLoad {
        path: library.to_path_buf(),
        source,
    };
    let environment = ort::init_from(library)
        .map_err(|e| load_error(Box::new(e)))?
        .with_name("strata")
        .build()
        .map_err(|e| load_error(Box::new(e)))?;
    *slot = Some(environment.clone());
    Ok(environment)
}

/// Whether ONNX Runtime may still be entered: `false` once [`shut_down`] ran. Every load and
/// every batch holds a read guard while it is inside the library.
///
/// Why: a process's exit handlers tear ONNX Runtime's globals down while other threads run on;
/// a thread still loading the model (an engine warms it in the background) then touched freed
/// memory and the interpreter crashed at exit (4 of about 170 runs of a short script that never
/// closed its engine). A host calls [`shut_down`] first (the Python module does, from `atexit`).
static OPEN: RwLock<bool> = RwLock::new(true);

/// Waits for every model load and batch inside ONNX Runtime to finish and refuses later ones
/// ([`Error::ShutDown`]): call it before the process exits while threads may still use the
/// model. Idempotent.
pub fn shut_down() {
    *OPEN.write().unwrap_or_else(PoisonError::into_inner) = false;
}

/// Runs `work`, which enters ONNX Runtime, unless [`shut_down`] ran.
fn inside_runtime<T>(work: impl FnOnce() -> Result<T>) -> Result<T> {
    let open = OPEN.read().unwrap_or_else(PoisonError::into_inner);
    if !*open {
        return Err(Error::ShutDown);
    }
    work()
}

/// How ONNX Runtime runs the local model (benches/README.md, "Throughput levers").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Intra-op threads; 0 uses every core.
    pub threads: usize,
    /// Whether idle intra-op threads spin instead of sleeping. Off by default: on a shared
    /// 2-core machine spinning threads burn the time slices the work needs (1.57x faster off).
    pub spinning: bool,
}

/// The process's ONNX Runtime environment, loading the library of `assets` the first time (a
/// process holds one runtime and one environment). For callers that run sessions of their own
/// beside strata's, such as the embedding bench's baseline loop.
pub fn runtime_environment(assets: &Path) -> Result<ort::environment::Environment> {
    environment(&assets.join(RUNTIME_LIBRARY))
}

/// What an [`EmbeddingEndpoint`] failed with.
pub type EndpointError = Box<dyn std::error::Error + Send + Sync>;

/// Vectors computed elsewhere: an embeddings server the host application reaches. Recall holds
/// no HTTP client; the `strata` crate implements this for OpenAI-compatible `/v1/embeddings`
/// endpoints, with retries. Called from synchronous code (a worker thread, a tool call on a
/// blocking thread), one batch at a time.
pub trait EmbeddingEndpoint: Send + Sync {
    /// The vectors of `texts`, in their order (strata checks their number and size and
    /// L2-normalizes them).
    fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, EndpointError>;
}

/// What computes the vectors.
#[derive(Clone)]
enum Backend {
    /// The local model (batches take turns: ONNX Runtime already uses both cores for one).
    Local(Arc<LocalModel>),
    /// An endpoint, sent at most `batch_size` texts per request.
    Remote { endpoint: Arc<dyn EmbeddingEndpoint>, batch_size: usize },
}

/// The local model's sessions: one for batches, and, once a background worker runs beside the
/// queries, a second one for queries alone, so that a query never waits for a batch in flight
/// (a batch of 32 texts holds the first for hundreds of milliseconds; see benches/README.md,
/// "The background embedder").
struct LocalModel {
    batches: Mutex<TextEmbedding>,
    queries: OnceLock<Mutex<TextEmbedding>>,
    /// What a second session is made from.
    runtime: RuntimeOptions,
}

/// A sentence-embedding model, local or behind an endpoint: text in, L2-normalized floats out.
///
/// Cheap to clone (the model is shared) and safe to use from several threads.
#[derive(Clone)]
pub struct Embedder {
    backend: Backend,
    spec: &'static ModelSpec,
    assets: PathBuf,
    /// The newest queries' vectors: the recalled block embeds each request, and a model that
    /// then calls `memory_search` with the same text does not wait for the model again.
    queries: Arc<Mutex<RememberedQueries>>,
}

/// Query texts and their vectors, oldest first.
type RememberedQueries = std::collections::VecDeque<(String, Vec<f32>)>;

/// Queries whose vectors [`Embedder::embed_query`] keeps.
const REMEMBERED_QUERIES: usize = 16;

/// A session of `spec`'s model from `assets`, loading ONNX Runtime the first time.
fn local_session(assets: &Path, spec: &'static ModelSpec, runtime: RuntimeOptions) -> Result<TextEmbedding> {
    let library = assets.join(RUNTIME_LIBRARY);
    let model_dir = assets.join(spec.dir);
    // Check every file before touching ONNX Runtime, so the error names what is missing.
    for path in std::iter::once(library.clone()).chain(MODEL_FILES.iter().map(|f| model_dir.join(f))) {
        if !path.is_file() {
            return Err(Error::AssetsMissing { missing: path });
        }
    }
    let read = |name: &str| {
        let path = model_dir.join(name);
        std::fs::read(&path).map_err(|source| Error::AssetRead { path, source })
    };
    let model = UserDefinedEmbeddingModel::new(
        read("model.onnx")?,
        TokenizerFiles {
            tokenizer_file: read("tokenizer.json")?,
            config_file: read("config.json")?,
            special_tokens_map_file: read("special_tokens_map.json")?,
            tokenizer_config_file: read("tokenizer_config.json")?,
        },
    )
    .with_pooling(match spec.pooling {
        PoolingKind::Mean => Pooling::Mean,
        PoolingKind::Cls => Pooling::Cls,
    });
    inside_runtime(|| {
        let mut options = InitOptionsUserDefined::new()
            .with_environment(environment(&library)?)
            .with_max_length(spec.max_tokens)
            .with_session_config("session.intra_op.allow_spinning", if runtime.spinning { "1" } else { "0" });
        if runtime.threads > 0 {
            options = options.with_intra_threads(runtime.threads);
        }
        TextEmbedding::try_new_from_user_defined(model, options).map_err(Error::Model)
    })
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("model", &self.spec.id)
            .field("assets", &self.assets)
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads the default model and ONNX Runtime from `assets` (the layout that
    /// `scripts/fetch-embed-assets.sh` writes). Every failure is an `Err`: a missing file names
    /// the file and the fetch script; a library that is missing or too old says so.
    pub fn load(assets: impl AsRef<Path>) -> Result<Embedder> {
        Embedder::load_model(assets, model_spec(DEFAULT_MODEL)?)
    }

    /// Loads `spec` and ONNX Runtime from `assets`.
    pub fn load_model(assets: impl AsRef<Path>, spec: &'static ModelSpec) -> Result<Embedder> {
        Embedder::load_with(assets, spec, RuntimeOptions::default())
    }

    /// Loads `spec` and ONNX Runtime from `assets`, with these runtime settings.
    pub fn load_with(
        assets: impl AsRef<Path>,
        spec: &'static ModelSpec,
        runtime: RuntimeOptions,
    ) -> Result<Embedder> {
        let assets = assets.as_ref();
        let model = local_session(assets, spec, runtime)?;
        let embedder = Embedder {
            backend: Backend::Local(Arc::new(LocalModel {
                batches: Mutex::new(model),
                queries: OnceLock::new(),
                runtime,
            })),
            spec,
            assets: assets.to_path_buf(),
            queries: Arc::default(),
        };
        // A model file that loads but computes garbage (wrong model, wrong shape) fails here.
        embedder.embed(&["strata"])?;
        Ok(embedder)
    }

    /// Makes the local model's second session, for queries alone (one thread), unless it
    /// exists: from then on a query never waits for a batch in flight. The background worker
    /// calls it when it starts; a no-op for an endpoint.
    pub fn separate_queries(&self) -> Result<()> {
        let Backend::Local(local) = &self.backend else { return Ok(()) };
        if local.queries.get().is_none() {
            let runtime = RuntimeOptions { threads: 1, ..local.runtime };
            let session = local_session(&self.assets, self.spec, runtime)?;
            // Two threads racing here both made a session; the second one is dropped.
            let _ = local.queries.set(Mutex::new(session));
        }
        Ok(())
    }

    /// An embedder whose vectors come from `endpoint` (see [`crate::EmbedProvider::Openai`]),
    /// stored under the model id `openai:<model>`. Nothing is sent before the first text.
    pub fn remote(
        model: &str,
        dimensions: usize,
        batch_size: usize,
        endpoint: Arc<dyn EmbeddingEndpoint>,
    ) -> Result<Embedder> {
        if model.trim().is_empty() || !(8..=8192).contains(&dimensions) || !dimensions.is_multiple_of(8) {
            return Err(Error::invalid(
                "embed_endpoint",
                format!("model {model:?} with {dimensions} dimensions (a multiple of 8, at most 8,192)"),
            ));
        }
        // The id and settings live as long as the process: an embedder is made once per engine
        // or command, and `spec()` hands out the same `&'static` a local model's has.
        let spec: &'static ModelSpec = Box::leak(Box::new(ModelSpec {
            id: Box::leak(format!("openai:{model}").into_boxed_str()),
            dir: "",
            pooling: PoolingKind::Mean,
            query_prefix: "",
            passage_prefix: "",
            dimensions,
            max_tokens: MINILM_L6_V2.max_tokens,
            chunk_words: MINILM_L6_V2.chunk_words,
        }));
        Ok(Embedder {
            backend: Backend::Remote { endpoint, batch_size: batch_size.max(1) },
            spec,
            assets: PathBuf::new(),
            queries: Arc::default(),
        })
    }

    /// Loads the model `config` names from its assets directory.
    pub fn for_config(config: &crate::RecallConfig) -> Result<Embedder> {
        let runtime = RuntimeOptions { threads: config.embed_threads, spinning: config.embed_spinning };
        Embedder::load_with(config.assets_dir(), model_spec(&config.embed_model)?, runtime)
    }

    /// Loads the default model from [`default_assets_dir`].
    pub fn load_default() -> Result<Embedder> {
        Embedder::load(default_assets_dir())
    }

    /// The directory the model was loaded from (empty for an endpoint).
    pub fn assets(&self) -> &Path {
        &self.assets
    }

    /// The model this embedder runs.
    pub fn spec(&self) -> &'static ModelSpec {
        self.spec
    }

    /// The embedding space its vectors belong to.
    pub fn space(&self) -> EmbeddingSpace {
        EmbeddingSpace { model: self.spec.id.to_owned(), dimensions: self.spec.dimensions }
    }

    /// Embeds texts in one batch, in order, as they are (no prefix): [`Embedder::embed_query`]
    /// and [`Embedder::embed_passages`] add the model's prefixes.
    pub fn embed<S: AsRef<str> + Send + Sync>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>> {
        self.embed_in(texts, false)
    }

    /// [`Embedder::embed`]; a `query` that finds the batch session busy goes to the query session
    /// when there is one ([`Embedder::separate_queries`]).
    fn embed_in<S: AsRef<str> + Send + Sync>(&self, texts: &[S], query: bool) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        // OpenTelemetry's GenAI `embeddings` span (client kind for an endpoint, internal for the
        // model in this process); the texts are left out.
        let span = tracing::info_span!(
            "embeddings",
            otel.name = format!("embeddings {}", self.spec.id),
            otel.kind = if matches!(self.backend, Backend::Remote { .. }) { "client" } else { "internal" },
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "embeddings",
            gen_ai.request.model = self.spec.id,
            // Signed: the layer would export an unsigned integer as a string.
            gen_ai.embeddings.dimension.count = self.spec.dimensions as i64,
            strata.embeddings.inputs = texts.len() as i64,
        );
        let _entered = span.enter();
        let vectors = match &self.backend {
            Backend::Local(local) => {
                let mut model = match local.batches.try_lock() {
                    Ok(model) => model,
                    Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                    Err(TryLockError::WouldBlock) => match local.queries.get() {
                        Some(queries) if query => queries.lock().unwrap_or_else(PoisonError::into_inner),
                        _ => local.batches.lock().unwrap_or_else(PoisonError::into_inner),
                    },
                };
                inside_runtime(|| model.embed(texts, Some(texts.len())).map_err(Error::Model))?
            }
            Backend::Remote { endpoint, batch_size } => {
                let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
                let mut vectors = Vec::with_capacity(texts.len());
                for batch in texts.chunks(*batch_size) {
                    vectors.extend(endpoint.embed(batch).map_err(|source| Error::Endpoint { source })?);
                }
                vectors.iter_mut().for_each(|vector| normalize(vector));
                vectors
            }
        };
        if vectors.len() != texts.len() || vectors.iter().any(|v| v.len() < self.spec.dimensions) {
            return Err(Error::ModelOutput {
                got: vectors.len(),
                dim: vectors.first().map_or(0, Vec::len),
                expected: texts.len(),
            });
        }
        Ok(vectors.into_iter().map(|vector| self.truncate(vector)).collect())
    }

    /// Keeps the first `dimensions` of a vector and re-normalizes it (a no-op for models used
    /// at their full size).
    fn truncate(&self, mut vector: Vec<f32>) -> Vec<f32> {
        if vector.len() > self.spec.dimensions {
            vector.truncate(self.spec.dimensions);
            normalize(&mut vector);
        }
        vector
    }

    /// Embeds one text as it is.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.embed(&[text])?.remove(0))
    }

    /// Embeds a search query, with the model's query prefix; one of the last 16 is answered
    /// from memory.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        let remembered = |queries: &RememberedQueries| {
            queries.iter().find(|(text, _)| text == query).map(|(_, vector)| vector.clone())
        };
        if let Some(vector) = remembered(&self.queries.lock().unwrap_or_else(PoisonError::into_inner)) {
            return Ok(vector);
        }
        let vector = self.embed_in(&[format!("{}{query}", self.spec.query_prefix)], true)?.remove(0);
        let mut queries = self.queries.lock().unwrap_or_else(PoisonError::into_inner);
        if queries.len() == REMEMBERED_QUERIES {
            queries.pop_front();
        }
        queries.push_back((query.to_owned(), vector.clone()));
        Ok(vector)
    }

    /// Embeds stored texts, with the model's passage prefix.
    pub fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if self.spec.passage_prefix.is_empty() {
            return self.embed(texts);
        }
        let prefixed: Vec<String> =
            texts.iter().map(|text| format!("{}{text}", self.spec.passage_prefix)).collect();
        self.embed(&prefixed)
    }

    /// Embeds many texts in batches of `batch_size`, shortest first (similar lengths pad less:
    /// about 1.4x the throughput), returning the vectors in the input order.
    pub fn embed_sorted(&self, texts: &[&str], batch_size: usize) -> Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut vectors = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(batch_size.max(1)) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, vector) in chunk.iter().zip(self.embed_passages(&batch)?) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }
}

/// Scales a vector to length 1 (a zero vector stays zero).
fn normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Cosine similarity of two L2-normalized vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_are_one_chunk() {
        assert_eq!(chunk_text("one two three", 80, 8), ["one two three"]);
        assert_eq!(chunk_text("", 80, 8), [""]);
    }

    #[test]
    fn long_texts_are_overlapping_windows_up_to_the_cap() {
        let text: String = (0..100).map(|i| format!("w{i} ")).collect();
        let chunks = chunk_text(&text, 20, 32);
        assert!(chunks.iter().all(|c| c.split_whitespace().count() <= 20));
        assert_eq!(chunks[0].split_whitespace().next(), Some("w0"));
        assert_eq!(chunks.last().unwrap().split_whitespace().last(), Some("w99"), "the end is covered");
        // Windows overlap by a fifth: the second starts at word 16.
        assert_eq!(chunks[1].split_whitespace().next(), Some("w16"));
        assert_eq!(chunk_text(&text, 20, 2).len(), 2, "capped");
    }
}
