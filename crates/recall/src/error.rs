//! The errors of strata-recall.

use std::path::PathBuf;

/// A specialized `Result` for recall operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in recall.
///
/// Tool calls never surface these raw: [`crate::call_tool`] turns them into a JSON error object
/// whose `kind` is [`Error::kind`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file the embedder needs is not in the assets directory.
    #[error(
        "embedding assets missing: {} (run scripts/fetch-embed-assets.sh, or set STRATA_EMBED_ASSETS)",
        missing.display()
    )]
    AssetsMissing {
        /// The file that is not there.
        missing: PathBuf,
    },
    /// The ONNX Runtime shared library could not be loaded (missing, broken, too old).
    #[error("cannot load ONNX Runtime from {}", path.display())]
    RuntimeLoad {
        /// The library path.
        path: PathBuf,
        /// What the loader said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A model file could not be read.
    #[error("cannot read {}", path.display())]
    AssetRead {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `[recall] embed_model` names a model strata does not know.
    #[error("unknown embedding model {id:?}; known models: {known}")]
    UnknownModel {
        /// The id asked for.
        id: String,
        /// The ids strata knows.
        known: String,
    },
    /// The embeddings endpoint failed (after its retries) or answered with something other than
    /// vectors of the configured size.
    #[error("the embeddings endpoint failed")]
    Endpoint {
        /// What failed, with the endpoint's URL.
        #[source]
        source: crate::embed::EndpointError,
    },
    /// The model could not be loaded or failed while embedding.
    #[error("embedding model failed")]
    Model(#[source] fastembed::Error),
    /// The model returned vectors of the wrong shape.
    #[error("embedding model returned {got} vectors of {dim} dimensions for {expected} texts")]
    ModelOutput {
        /// Vectors returned.
        got: usize,
        /// Their dimension (of the first one).
        dim: usize,
        /// Texts sent.
        expected: usize,
    },
    /// The process is exiting: the local model is no longer run ([`crate::embedding::shut_down`]).
    #[error("the embedding model was shut down: the process is exiting")]
    ShutDown,
    /// Semantic search was asked for but no embedder is loaded.
    #[error("semantic search unavailable: {reason}")]
    SemanticUnavailable {
        /// Why, for the user (includes the load error's causes).
        reason: String,
    },
    /// A `[recall]` setting breaks its rule ([`crate::RecallConfig::validate`]).
    #[error("invalid configuration: recall.{field} {rule}")]
    Config {
        /// The setting, as written in the `[recall]` table.
        field: String,
        /// The rule it breaks.
        rule: String,
    },
    /// A tool argument is wrong; the message says how to fix it.
    #[error("invalid {field}: {reason}")]
    InvalidArgument {
        /// The argument.
        field: &'static str,
        /// Why, in words the model can act on.
        reason: String,
    },
    /// A new memory key is close to an existing one; nothing was written.
    #[error(
        "key {key:?} is close to the existing {existing_category} memory {existing_key:?} ({likeness}); \
         call save_memory with key {existing_key:?} to update it, or pass allow_new_key: true to \
         create a separate memory"
    )]
    NearDuplicateKey {
        /// The key asked for (normalized).
        key: String,
        /// The existing key it is close to.
        existing_key: String,
        /// The existing memory's category.
        existing_category: strata_seam::Category,
        /// How they are alike.
        likeness: crate::tools::Likeness,
    },
    /// No tool has this name.
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] strata_seam::Error),
}

impl Error {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument { field, reason: reason.into() }
    }

    /// A short machine-readable class: `invalid_argument`, `not_found`, `forbidden`,
    /// `near_duplicate_key`, `semantic_search_unavailable`, `unknown_tool`, `busy`, `internal`.
    pub fn kind(&self) -> &'static str {
        use strata_seam::Error as Store;
        match self {
            Error::InvalidArgument { .. } => "invalid_argument",
            Error::NearDuplicateKey { .. } => "near_duplicate_key",
            Error::UnknownTool(_) => "unknown_tool",
            Error::SemanticUnavailable { .. }
            | Error::AssetsMissing { .. }
            | Error::RuntimeLoad { .. }
            | Error::AssetRead { .. }
            | Error::UnknownModel { .. }
            | Error::ShutDown
            | Error::Endpoint { .. } => "semantic_search_unavailable",
            Error::Store(Store::NotFound(_)) => "not_found",
            Error::Store(Store::ProtectedCategory) => "forbidden",
            Error::Store(Store::Invalid { .. }) => "invalid_argument",
            Error::Store(Store::Busy(_)) => "busy",
            _ => "internal",
        }
    }

    /// The message with its causes, `: `-separated ([`strata_seam::error_chain`]).
    pub fn chain_message(&self) -> String {
        strata_seam::error_chain(self)
    }
}
