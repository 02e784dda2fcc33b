//! Moving rows in and out of a database: a whole database read as stored ([`Source`] and its
//! `Stored*` rows, what `strata copy` moves between backends), the export of a persona's or a
//! session's messages ([`ExportScope`], [`ExportedMessage`]), and the import of transcripts
//! ([`IncomingMessage`], [`Imported`], and [`line_digest`], by which a re-run import finds the
//! lines it already stored).

pub use crate::dump::{Copied, Source, StoredMemory, StoredMessage, StoredSession, StoredVector};
pub use crate::export::{ExportScope, ExportedMessage};
pub use crate::ingests::line_digest;
pub use crate::ingests::{Imported, IncomingMessage};
