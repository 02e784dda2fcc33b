//! Local sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) through fastembed, with ONNX Runtime
//! loaded explicitly from a local library so that a missing or broken file is an error, never
//! a panic and never a download.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};
use strata_store::EMBEDDING_DIM;

use crate::error::{Error, Result};

/// The environment variable naming the assets directory.
pub const ASSETS_ENV: &str = "STRATA_EMBED_ASSETS";

const RUNTIME_LIBRARY: &str = "onnxruntime/libonnxruntime.so";
const MODEL_DIR: &str = "all-MiniLM-L6-v2-int8";
const MODEL_FILES: [&str; 5] =
    ["model.onnx", "tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"];
/// Word pieces per text; longer texts are truncated. all-MiniLM-L6-v2 was trained on
/// sequences of up to 128 word pieces, and attention costs grow with the square of the length:
/// on long chat messages (code, logs) 128 embeds about twice as fast as 256 (measured in the
/// demo), while what a message is about is nearly always said in its opening.
const MAX_TOKENS: usize = 128;

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

/// A loaded sentence-embedding model: text in, 384 L2-normalized floats out.
///
/// Cheap to clone (the model is shared) and safe to use from several threads (calls take turns:
/// ONNX Runtime already uses both cores for one batch).
#[derive(Clone)]
pub struct Embedder {
    model: Arc<Mutex<TextEmbedding>>,
    assets: PathBuf,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("assets", &self.assets).finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads all-MiniLM-L6-v2 and ONNX Runtime from `assets` (the layout that
    /// `scripts/fetch-embed-assets.sh` writes). Every failure is an `Err`: a missing file names
    /// the file and the fetch script; a library that is missing or too old says so.
    pub fn load(assets: impl AsRef<Path>) -> Result<Embedder> {
        let assets = assets.as_ref();
        let library = assets.join(RUNTIME_LIBRARY);
        let model_dir = assets.join(MODEL_DIR);
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
        // all-MiniLM-L6-v2 is mean-pooled; fastembed L2-normalizes, so dot product = cosine.
        .with_pooling(Pooling::Mean);
        let options = InitOptionsUserDefined::new()
            .with_environment(environment(&library)?)
            .with_max_length(MAX_TOKENS);
        let model = TextEmbedding::try_new_from_user_defined(model, options).map_err(Error::Model)?;
        let embedder = Embedder { model: Arc::new(Mutex::new(model)), assets: assets.to_path_buf() };
        // A model file that loads but computes garbage (wrong model, wrong shape) fails here.
        embedder.embed(&["strata"])?;
        Ok(embedder)
    }

    /// Loads from [`default_assets_dir`].
    pub fn load_default() -> Result<Embedder> {
        Embedder::load(default_assets_dir())
    }

    /// The directory the model was loaded from.
    pub fn assets(&self) -> &Path {
        &self.assets
    }

    /// Embeds texts in one batch, in order.
    pub fn embed<S: AsRef<str> + Send + Sync>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut model = self.model.lock().unwrap_or_else(PoisonError::into_inner);
        let vectors = model.embed(texts, Some(texts.len())).map_err(Error::Model)?;
        drop(model);
        if vectors.len() != texts.len() || vectors.iter().any(|v| v.len() != EMBEDDING_DIM) {
            return Err(Error::ModelOutput {
                got: vectors.len(),
                dim: vectors.first().map_or(0, Vec::len),
                expected: texts.len(),
            });
        }
        Ok(vectors)
    }

    /// Embeds one text.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.embed(&[text])?.remove(0))
    }

    /// Embeds many texts in batches of `batch_size`, shortest first (similar lengths pad less:
    /// about 1.4x the throughput), returning the vectors in the input order.
    pub fn embed_sorted(&self, texts: &[&str], batch_size: usize) -> Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut vectors = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(batch_size.max(1)) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, vector) in chunk.iter().zip(self.embed(&batch)?) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }
}

/// Cosine similarity of two L2-normalized vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
