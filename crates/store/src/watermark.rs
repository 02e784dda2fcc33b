//! The commit watermark: noticing that the newest commits vanished with a damaged WAL.
//!
//! SQLite checks the WAL's frame checksums when it recovers the WAL and keeps only the frames
//! before the first bad one, silently: a flipped byte or a truncation of `-wal` loses every
//! later commit. Each write transaction of [`crate::Store`] bumps a counter inside the database
//! (schema 11) and, once committed, writes it to `<db>-commits` beside the file, out of the
//! WAL's reach. On open and in `doctor`, a counter behind that copy means commits were lost.
//!
//! The copy is written after the commit, never before, so a crash between the two leaves it
//! behind (no alarm), never ahead; two processes racing to write it can only leave the smaller
//! value, which weakens the check and never raises a false alarm. The copy is not synced: like
//! the WAL with `synchronous = NORMAL`, a power cut may lose it.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension};

use crate::error::Result;

/// The file beside the database holding the copy.
pub(crate) fn sidecar(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-commits");
    PathBuf::from(name)
}

/// The database's identity and counter; `None` for a schema before 11.
pub(crate) fn in_database(conn: &Connection) -> Result<Option<(String, u64)>> {
    let has_table: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'commit_watermark'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    if has_table.is_none() {
        return Ok(None);
    }
    Ok(conn
        .query_row("SELECT file_id, commits FROM commit_watermark WHERE id = 1", [], |row| {
            Ok((row.get(0)?, row.get::<_, i64>(1)? as u64))
        })
        .optional()?)
}

/// Bumps the counter inside a write transaction; returns the identity and the new value.
pub(crate) fn bump(conn: &Connection) -> Result<Option<(String, u64)>> {
    Ok(conn
        .prepare_cached(
            "UPDATE commit_watermark SET commits = commits + 1 WHERE id = 1 RETURNING file_id, commits",
        )?
        .query_row([], |row| Ok((row.get(0)?, row.get::<_, i64>(1)? as u64)))
        .optional()?)
}

/// The copy beside the database, if there is a readable one.
pub(crate) fn read_copy(db: &Path) -> Option<(String, u64)> {
    let text = std::fs::read_to_string(sidecar(db)).ok()?;
    let mut words = text.lines().next()?.split(' ');
    let file_id = words.next()?.to_owned();
    let commits = words.next()?.parse().ok()?;
    Some((file_id, commits))
}

/// Writes the copy after a commit. A failure is logged, not returned: the commit stands.
pub(crate) fn write_copy(db: &Path, file_id: &str, commits: u64) {
    if let Err(error) = std::fs::write(sidecar(db), format!("{file_id} {commits}\n")) {
        tracing::warn!(%error, path = %sidecar(db).display(), "cannot record the commit watermark");
    }
}

/// Commits recorded beside the database but missing from it: `(in the database, recorded)`.
pub(crate) fn lost(conn: &Connection, db: &Path) -> Result<Option<(u64, u64)>> {
    let Some((file_id, commits)) = in_database(conn)? else { return Ok(None) };
    Ok(match read_copy(db) {
        Some((copy_id, recorded)) if copy_id == file_id && recorded > commits => Some((commits, recorded)),
        _ => None,
    })
}
