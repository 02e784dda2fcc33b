//! Opening connections: pragmas, extensions, the pool.

use std::path::Path;
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};

/// How long a writer waits for the lock before [`Error::Busy`], unless told otherwise.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) type Pool = r2d2::Pool<SqliteConnectionManager>;

const FLAGS: OpenFlags = OpenFlags::SQLITE_OPEN_READ_WRITE
    .union(OpenFlags::SQLITE_OPEN_CREATE)
    .union(OpenFlags::SQLITE_OPEN_URI)
    .union(OpenFlags::SQLITE_OPEN_NO_MUTEX);

/// The longest busy timeout: SQLite takes it as a C `int` of milliseconds (about 24.8 days).
/// Longer ones are this, as is "wait forever" in practice.
const MAX_BUSY_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// The per-connection settings every strata connection gets.
///
/// Temporary files live in memory: an insert that fires a trigger (the embedding backlog) runs
/// in a statement savepoint whose journal SQLite otherwise writes to a temporary file, page by
/// page, which was a sixth of a bulk append (a perf profile of `cargo bench --bench scale --
/// append_1000`). A statement journal holds only the pages one statement changes.
///
/// The file is read through a memory map (up to 1 GiB of it): searches scan megabytes of index
/// and vector pages per call, which SQLite otherwise copies through its page cache (2 MB per
/// connection by default, so a 5 MB scan re-reads every page from the OS each time).
pub(crate) fn init_connection(conn: &Connection, busy_timeout: Duration) -> rusqlite::Result<()> {
    conn.busy_timeout(busy_timeout.min(MAX_BUSY_TIMEOUT))?;
    conn.execute_batch(
        "PRAGMA foreign_keys = ON;
         PRAGMA synchronous = NORMAL;
         PRAGMA temp_store = MEMORY;",
    )?;
    // The pragma answers with the size in force (0 where memory maps are unavailable).
    conn.query_row("PRAGMA mmap_size = 1073741824", [], |_| Ok(()))?;
    Ok(())
}

/// Opens one connection with the extension registered and WAL switched on.
/// Used for the first connection of a store, whose errors must keep their detail.
pub(crate) fn open_connection(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    crate::vec::register();
    let conn = Connection::open_with_flags(path, FLAGS)
        .map_err(|source| Error::Open { path: path.to_path_buf(), source })?;
    init_connection(&conn, busy_timeout)?;
    check_ownership(&conn, path)?;
    // WAL is a property of the file, so setting it once is enough; it lets readers run while a
    // writer commits. The pragma answers with the mode now in force.
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(%mode, "database could not switch to WAL");
    }
    Ok(conn)
}

/// strata's `PRAGMA application_id` ("STRA"), set by schema 3.
pub(crate) const APPLICATION_ID: i64 = 0x5354_5241;

/// Refuses a database that belongs to another program, before anything is written to it: one
/// with tables but no strata schema version, or with another program's application id.
/// Databases of strata before schema 3 carry no application id but a schema version.
fn check_ownership(conn: &Connection, path: &Path) -> Result<()> {
    let application_id: i64 = conn.query_row("PRAGMA application_id", [], |row| row.get(0))?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    let tables: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        [],
        |row| row.get(0),
    )?;
    let ours = application_id == APPLICATION_ID || (application_id == 0 && (version > 0 || tables == 0));
    if !ours {
        return Err(Error::NotStrata { path: path.to_path_buf(), application_id, tables });
    }
    Ok(())
}

/// The pool for an already migrated file.
pub(crate) fn pool(path: &Path, busy_timeout: Duration) -> Result<Pool> {
    let manager = SqliteConnectionManager::file(path)
        .with_flags(FLAGS)
        .with_init(move |conn| init_connection(conn, busy_timeout));
    Ok(r2d2::Pool::builder()
        .max_size(16)
        .min_idle(Some(0))
        .connection_timeout(busy_timeout.clamp(Duration::from_secs(1), MAX_BUSY_TIMEOUT))
        .build(manager)?)
}

/// Runs a cached query and collects every row.
pub(crate) fn query_all<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    from_row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, from_row)?.collect::<rusqlite::Result<Vec<T>>>()?;
    Ok(rows)
}
