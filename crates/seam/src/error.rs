use std::path::PathBuf;

use crate::types::{MessageId, NodeId, SessionId};

/// A specialized `Result` for store operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the store.
///
/// A database's failures the callers act on are classified ([`Error::Busy`], [`Error::Corrupt`],
/// [`Error::DiskFull`], [`Error::SchemaTooNew`]); each keeps the driver's own error as its
/// source ([`Cause`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database file could not be opened (missing directory, permissions, ...).
    #[error("cannot open database {}", path.display())]
    Open {
        /// The path that was opened.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: Cause,
    },
    /// There is no database at the path, and the command only reads.
    #[error("no database at {}: create it with `strata init` (or any command that writes)", path.display())]
    Missing {
        /// The path.
        path: PathBuf,
    },
    /// The file is an empty file (0 bytes) and the command only reads: strata does not make it
    /// a database.
    #[error("{} is an empty file, not a strata database; strata leaves it untouched (`strata init` makes it one)", path.display())]
    Empty {
        /// The path.
        path: PathBuf,
    },
    /// The file is a SQLite database of some other program; strata leaves it untouched.
    #[error("{} is a SQLite database but not strata's (application id {application_id:#x}, user_version {user_version}); strata leaves it untouched", path.display())]
    NotStrata {
        /// The path.
        path: PathBuf,
        /// Its `PRAGMA application_id`.
        application_id: i64,
        /// Its `PRAGMA user_version`.
        user_version: i64,
    },
    /// A strata database whose schema version is one no strata ever wrote (negative, say).
    #[error("{} carries strata's application id but schema version {found}, which no strata writes; strata leaves it untouched", path.display())]
    SchemaUnknown {
        /// The path.
        path: PathBuf,
        /// Its `PRAGMA user_version`.
        found: i64,
    },
    /// Another writer held the database lock for longer than the busy timeout.
    #[error("database is locked by another writer (gave up after the busy timeout)")]
    Busy(#[source] Cause),
    /// The disk (or the file's size limit) is full: nothing was written.
    #[error("the disk is full: free some space and run again (nothing was written)")]
    DiskFull(#[source] Cause),
    /// The file is not a SQLite database, or it is damaged.
    #[error("database file is corrupt or is not a strata database")]
    Corrupt(#[source] Cause),
    /// The database was written by a newer strata whose schema this build does not know.
    #[error(
        "database schema version {found} is newer than this strata supports ({supported}); upgrade strata"
    )]
    SchemaTooNew {
        /// `PRAGMA user_version` of the file.
        found: i64,
        /// The newest version this build can migrate to.
        supported: i64,
    },
    /// A row named by the caller does not exist (or belongs to another persona: the answer is
    /// the same word for word).
    #[error("{0} not found")]
    NotFound(Missing),
    /// A session key is already bound to a different persona.
    #[error("session {key:?} belongs to persona {existing:?}, not {requested:?}")]
    PersonaMismatch {
        /// The session key.
        key: String,
        /// The persona the session was created with.
        existing: String,
        /// The persona the caller asked for.
        requested: String,
    },
    /// Some of the messages a new Level-0 node would cover are already covered.
    #[error("message seq {seq} of session {session} is already covered by summary node {node}")]
    AlreadyCovered {
        /// The session.
        session: SessionId,
        /// The first covered seq found.
        seq: i64,
        /// The node that covers it.
        node: NodeId,
    },
    /// A node to merge already has a parent.
    #[error("summary node {node} was already merged into node {parent}")]
    AlreadyMerged {
        /// The node.
        node: NodeId,
        /// Its parent.
        parent: NodeId,
    },
    /// A node's summary was to be replaced, but another writer replaced it first (its
    /// summarizer is no longer the expected one).
    #[error("summary node {node} was already rewritten by {summarizer:?}")]
    AlreadyReplaced {
        /// The node.
        node: NodeId,
        /// Who wrote its summary now.
        summarizer: String,
    },
    /// The agent tried to change a category only the user may write.
    #[error("user_preferences are read-only to the agent; only the user can change them")]
    ProtectedCategory,
    /// A transcript imported before was imported again with a message changed: its earlier
    /// messages match the ones stored from it, this one does not. Nothing was stored (a whole
    /// file appended again would duplicate the conversation).
    #[error(
        "message {position} of session {session:?} in this input differs from the one stored from it \
         (seq {seq}): the transcript was edited since it was imported; nothing was stored"
    )]
    EditedTranscript {
        /// The session's key.
        session: String,
        /// The message's position among the input's messages of that session, from 1.
        position: usize,
        /// The seq of the stored message it differs from.
        seq: i64,
    },
    /// The caller passed a value that breaks a rule of the data model.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// Which input was wrong.
        field: &'static str,
        /// Why, in words a user can act on.
        reason: String,
    },
    /// SQLite's own check found the file damaged; strata writes nothing to it.
    #[error(
        "the database file is damaged ({problems} problems, first: {first}); nothing was written. Run `strata doctor`, and restore a backup (`strata backup`) if you have one"
    )]
    Damaged {
        /// How many problems the check listed (at most 100).
        problems: u64,
        /// The first one, as SQLite words it.
        first: String,
    },
    /// Commits recorded beside the database (`<db>-commits`) are missing from it: its WAL was
    /// damaged or cut short and SQLite dropped the newest commits. strata writes nothing more
    /// to it until told to carry on.
    #[error(
        "{} holds {found} commits but {recorded} were made: the newest {} were lost (a damaged or truncated -wal file); nothing was written. Restore a backup, or run `strata doctor --accept-lost-commits` to carry on with what is left", path.display(), recorded - found
    )]
    CommitsLost {
        /// The database.
        path: PathBuf,
        /// The counter in the database.
        found: u64,
        /// The counter recorded beside it.
        recorded: u64,
    },
    /// Any other error of the embedded database (SQLite).
    #[error("database error")]
    Sqlite(#[source] Cause),
    /// The lease file beside the database (see `Backend::compaction_lease`) could not be
    /// opened or locked.
    #[error("cannot take the compaction lease {}", path.display())]
    Lease {
        /// The lease file.
        path: PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
    /// A database server (a backend other than the embedded SQLite) failed; `backend` names
    /// it and the source keeps the server's own words.
    #[error("{backend} error")]
    Backend {
        /// The backend, such as `postgres`.
        backend: &'static str,
        /// What its client library said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The connection pool could not hand out a connection.
    #[error("could not get a database connection")]
    Pool(#[from] r2d2::Error),
}

/// What a lookup did not find.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Missing {
    /// A session by id.
    Session(SessionId),
    /// A session by its key.
    SessionKey(String),
    /// A message by id.
    Message(MessageId),
    /// A summary node by id.
    Node(NodeId),
    /// A memory by its category and key.
    Memory {
        /// The persona it was looked for in.
        persona: String,
        /// Its category.
        category: crate::types::Category,
        /// Its key.
        key: String,
    },
    /// A preference proposed for the user's yes or no.
    Proposal {
        /// The persona it was proposed for.
        persona: String,
        /// Its key.
        key: String,
    },
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Session(id) => write!(f, "session {id}"),
            Missing::SessionKey(key) => write!(f, "session {key:?}"),
            Missing::Message(id) => write!(f, "message {id}"),
            Missing::Node(id) => write!(f, "summary node {id}"),
            Missing::Memory { persona, category, key } => {
                write!(f, "memory {category}/{key} of persona {persona:?}")
            }
            Missing::Proposal { persona, key } => {
                write!(f, "proposed preference {key:?} of persona {persona:?}")
            }
        }
    }
}

/// A database driver's own error, kept as the source of the [`Error`] it was classified into.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

impl Error {
    /// [`Error::Invalid`]: `field` is what the caller gave, `reason` why it is refused.
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
        Error::Invalid { field, reason: reason.into() }
    }
}

/// An error and its causes on one line, `: `-separated (like anyhow's `{:#}`); a cause whose
/// words the line holds already (a transparent wrapper's) is not repeated. The one way strata's
/// libraries write an error chain, into logs, outcomes and tool answers.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}

/// SQLite's errors, classified. It lives here, not in strata-store, because Rust lets only the
/// crate of the error type or of `From` write it, and `?` on SQLite's calls needs it; it is the
/// seam's one piece of SQLite knowledge, behind the `rusqlite` feature.
#[cfg(feature = "rusqlite")]
impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Error {
        use rusqlite::ErrorCode;
        match err.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Error::Busy(err.into()),
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => Error::Corrupt(err.into()),
            Some(ErrorCode::DiskFull) => Error::DiskFull(err.into()),
            // FTS5 reports a damaged index or config page as a plain SQL error.
            _ if is_fts5_damage(&err) => Error::Corrupt(err.into()),
            _ => Error::Sqlite(err.into()),
        }
    }
}

/// True for FTS5's words for a damaged table ("invalid fts5 file format", "fts5: corrupt ...").
#[cfg(feature = "rusqlite")]
fn is_fts5_damage(err: &rusqlite::Error) -> bool {
    let message = err.to_string().to_ascii_lowercase();
    message.contains("fts5")
        && (message.contains("invalid") || message.contains("corrupt") || message.contains("malformed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot save")]
    struct Save(#[source] std::io::Error);

    /// Issue 42 #7: a full disk is named as such, not as a generic database error. The file's
    /// page limit gives SQLite's own SQLITE_FULL on a real file.
    #[cfg(feature = "rusqlite")]
    #[test]
    fn a_full_disk_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let conn = rusqlite::Connection::open(dir.path().join("full.db")).unwrap();
        conn.execute_batch("CREATE TABLE t(x); PRAGMA max_page_count = 3;").unwrap();
        let failed = conn.execute("INSERT INTO t VALUES (zeroblob(100000))", []).unwrap_err();
        let error = Error::from(failed);
        assert!(matches!(error, Error::DiskFull(_)), "{error:?}");
        assert!(error.to_string().contains("the disk is full"), "{error}");
    }

    /// A wrapper that says what its source says.
    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Echo(#[source] std::io::Error);

    #[test]
    fn an_error_chain_is_one_line_without_repeats() {
        let full = || std::io::Error::other("disk full");
        assert_eq!(error_chain(&Save(full())), "cannot save: disk full");
        assert_eq!(error_chain(&Echo(full())), "disk full");
        assert_eq!(
            error_chain(&Error::invalid("limit", "must be at least 1")),
            "invalid limit: must be at least 1"
        );
    }
}
