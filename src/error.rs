use std::path::PathBuf;

/// A specialized `Result` for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the engine can fail with. Each variant keeps the error it came from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database refused or failed.
    #[error(transparent)]
    Store(#[from] strata_seam::Error),
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

/// What kind of failure an [`Error`] is, for a caller that acts on it without reading the
/// words: the REST server answers with it (`{"error": {"kind", "message"}}`) and picks its
/// status from it, so a bot over HTTP and a bot linking the library see the same classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller sent something strata cannot take (a bad message, a bad name, a bad
    /// setting); sending it again unchanged fails again.
    InvalidInput,
    /// What was named does not exist (or belongs to another persona: the answer is the same).
    NotFound,
    /// The request contradicts what is stored (a session key of another persona, an edited
    /// transcript, another writer's change first).
    Conflict,
    /// The message or the context is larger than the configured limits.
    TooLarge,
    /// Only the user may do this (an agent writing user preferences), or the caller's
    /// credentials do not allow it.
    Forbidden,
    /// The caller did not say who it is (no or an unknown token).
    Unauthorized,
    /// The database or a model is busy or unreachable for now; the same request may work later.
    Unavailable,
    /// This build or this backend cannot do it.
    Unsupported,
    /// Something failed that the caller cannot fix (a damaged file, a task that panicked).
    Internal,
}

impl ErrorKind {
    /// The kind's name, as JSON errors write it (`invalid_input`, `not_found`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// What kind of failure this is ([`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(error) => store_kind(error),
            Error::Compactor(error) => compactor_kind(error),
            Error::Recall(error) => recall_kind(error),
            Error::InvalidMessage(_) | Error::Config(_) => ErrorKind::InvalidInput,
            Error::Summarizer(_) | Error::Io { .. } | Error::Runtime(_) | Error::Background(_) => {
                ErrorKind::Internal
            }
        }
    }
}

/// The exception class a binding raises for an error (Python's `strata._errors`, the Node
/// package's error classes): one classification, so the bindings only name it. Finer than
/// [`ErrorKind`] where a binding's users act on more (a damaged file against an unreadable one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorClass {
    /// An argument, message or setting strata cannot take; nothing was written.
    BadInput,
    /// No such session, message, memory, proposal or tool.
    NotFound,
    /// Not allowed for this caller.
    Forbidden,
    /// Another writer held the database or won a race; calling again is safe.
    Busy,
    /// The file cannot be used as a strata database.
    DatabaseError,
    /// The database is damaged.
    DamagedDatabase,
    /// The summarizer could not be set up.
    SummarizerUnavailable,
    /// The embedding model could not be loaded.
    EmbedderUnavailable,
    /// Anything else: the binding's base class.
    Other,
}

impl ErrorClass {
    /// The class's name in both bindings (`None` for [`ErrorClass::Other`], whose name each
    /// binding chooses).
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            ErrorClass::BadInput => "BadInput",
            ErrorClass::NotFound => "NotFound",
            ErrorClass::Forbidden => "Forbidden",
            ErrorClass::Busy => "Busy",
            ErrorClass::DatabaseError => "DatabaseError",
            ErrorClass::DamagedDatabase => "DamagedDatabase",
            ErrorClass::SummarizerUnavailable => "SummarizerUnavailable",
            ErrorClass::EmbedderUnavailable => "EmbedderUnavailable",
            ErrorClass::Other => return None,
        })
    }
}

impl Error {
    /// The exception class a binding raises for this error ([`ErrorClass`]).
    pub fn class(&self) -> ErrorClass {
        use strata_compactor::Error as Compactor;
        use strata_recall::Error as Recall;
        match self {
            Error::Store(error)
            | Error::Compactor(Compactor::Store(error))
            | Error::Recall(Recall::Store(error)) => store_class(error),
            Error::InvalidMessage(_) | Error::Config(_) => ErrorClass::BadInput,
            Error::Compactor(
                Compactor::Config { .. }
                | Compactor::EncodingMismatch { .. }
                | Compactor::MessageTooLarge { .. },
            ) => ErrorClass::BadInput,
            Error::Summarizer(_) => ErrorClass::SummarizerUnavailable,
            Error::Recall(error) => match error {
                Recall::InvalidArgument { .. } | Recall::NearDuplicateKey { .. } | Recall::Config { .. } => {
                    ErrorClass::BadInput
                }
                Recall::UnknownTool(_) => ErrorClass::NotFound,
                _ => ErrorClass::EmbedderUnavailable,
            },
            Error::Io { .. } => ErrorClass::DatabaseError,
            _ => ErrorClass::Other,
        }
    }
}

fn store_class(error: &strata_seam::Error) -> ErrorClass {
    use strata_seam::Error as Store;
    match error {
        Store::Busy(_) => ErrorClass::Busy,
        Store::Corrupt(_) | Store::Damaged { .. } | Store::CommitsLost { .. } => ErrorClass::DamagedDatabase,
        Store::NotFound(_) | Store::Missing { .. } => ErrorClass::NotFound,
        Store::ProtectedCategory | Store::PersonaMismatch { .. } => ErrorClass::Forbidden,
        Store::Invalid { .. } => ErrorClass::BadInput,
        // Another writer won the race for the same rows; calling again sees its work.
        Store::AlreadyCovered { .. } | Store::AlreadyMerged { .. } | Store::AlreadyReplaced { .. } => {
            ErrorClass::Busy
        }
        _ => ErrorClass::DatabaseError,
    }
}

/// The kind of a store error: the refusals the data model makes, and what waiting may cure.
pub(crate) fn store_kind(error: &strata_seam::Error) -> ErrorKind {
    use strata_seam::Error as Store;
    match error {
        Store::Invalid { .. } => ErrorKind::InvalidInput,
        Store::NotFound(_) | Store::Missing { .. } => ErrorKind::NotFound,
        Store::PersonaMismatch { .. }
        | Store::AlreadyCovered { .. }
        | Store::AlreadyMerged { .. }
        | Store::AlreadyReplaced { .. }
        | Store::EditedTranscript { .. } => ErrorKind::Conflict,
        Store::ProtectedCategory => ErrorKind::Forbidden,
        // The caller named a file that is not a strata database: another path fixes it.
        Store::NotStrata { .. } | Store::Empty { .. } | Store::SchemaUnknown { .. } => {
            ErrorKind::InvalidInput
        }
        // A database of a newer strata: this build cannot use it, a newer one can.
        Store::SchemaTooNew { .. } => ErrorKind::Unsupported,
        Store::Busy(_) | Store::DiskFull(_) | Store::Pool(_) | Store::Lease { .. } => ErrorKind::Unavailable,
        _ => ErrorKind::Internal,
    }
}

fn compactor_kind(error: &strata_compactor::Error) -> ErrorKind {
    use strata_compactor::Error as Compactor;
    match error {
        Compactor::Store(error) => store_kind(error),
        Compactor::ContextTooLarge { .. } | Compactor::MessageTooLarge { .. } => ErrorKind::TooLarge,
        Compactor::EncodingMismatch { .. } => ErrorKind::Conflict,
        Compactor::Config { .. } => ErrorKind::InvalidInput,
        _ => ErrorKind::Internal,
    }
}

fn recall_kind(error: &strata_recall::Error) -> ErrorKind {
    match error {
        strata_recall::Error::Store(error) => store_kind(error),
        other => match other.kind() {
            "invalid_argument" => ErrorKind::InvalidInput,
            "near_duplicate_key" => ErrorKind::Conflict,
            "unknown_tool" | "not_found" => ErrorKind::NotFound,
            "forbidden" => ErrorKind::Forbidden,
            "semantic_search_unavailable" | "busy" => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_has_the_kind_a_caller_acts_on() {
        let mismatch = strata_seam::Error::PersonaMismatch {
            key: "k".into(),
            existing: "a".into(),
            requested: "b".into(),
        };
        let too_large = strata_compactor::Error::MessageTooLarge { bytes: 10, limit: 5 };
        let missing = strata_seam::Error::NotFound(strata_seam::Missing::SessionKey("k".into()));
        assert_eq!(Error::InvalidMessage("x".into()).kind(), ErrorKind::InvalidInput);
        assert_eq!(Error::Store(mismatch).kind(), ErrorKind::Conflict);
        assert_eq!(Error::Compactor(too_large).kind(), ErrorKind::TooLarge);
        assert_eq!(Error::Store(missing).kind().as_str(), "not_found");
        assert_eq!(Error::Store(strata_seam::Error::ProtectedCategory).kind(), ErrorKind::Forbidden);
        assert_eq!(serde_json::to_value(ErrorKind::InvalidInput).unwrap(), "invalid_input");
        let foreign =
            strata_seam::Error::NotStrata { path: "app.db".into(), application_id: 0, user_version: 0 };
        assert_eq!(Error::Store(foreign).kind(), ErrorKind::InvalidInput);
    }
}
