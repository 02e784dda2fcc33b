use std::path::PathBuf;

/// A specialized `Result` for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the engine can fail with. Each variant keeps the error it came from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database refused or failed.
    #[error(transparent)]
    Store(#[from] strata_store::Error),
    /// Compaction or context assembly failed.
    #[error(transparent)]
    Compactor(#[from] strata_compactor::Error),
    /// The summarizer could not be set up.
    #[error("cannot set up the summarizer")]
    Summarizer(#[from] strata_compactor::SummarizeError),
    /// A recall operation failed (e.g. the embedding model is unavailable).
    #[error(transparent)]
    Recall(#[from] strata_recall::Error),
    /// A file could not be read or written.
    #[error("cannot access {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A message handed to `append` is not one strata can store; nothing was written.
    #[error("invalid message: {0}")]
    InvalidMessage(String),
    /// What was asked exists only for a SQLite database (export, forget, backups, the file
    /// checks), and this one is on another backend.
    #[error("{what} needs a SQLite database; this one is on {backend}")]
    NeedsSqlite {
        /// What was asked.
        what: &'static str,
        /// The backend the database is on.
        backend: &'static str,
    },
    /// The async runtime of the blocking facade could not be started.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The configuration is not valid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A task the engine ran on the runtime (a background compaction, or the settling of
    /// facts after a compaction) panicked or was cancelled.
    #[error("the engine's background task stopped")]
    Background(#[source] tokio::task::JoinError),
}
