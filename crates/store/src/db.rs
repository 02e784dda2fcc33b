//! Opening connections: pragmas, extensions, the pool.
//!
//! A file is judged before the first pragma that writes (`journal_mode = WAL` rewrites header
//! bytes 18-19): a foreign application id from the header bytes alone, then a read-only probe
//! (`immutable` for a WAL file with no `-wal`, so it creates no side file) for the id,
//! `user_version` and tables. strata's file has application id "STRA" (schema 3 on) and a
//! version in 1..=current or, before schema 3, version 1-2 and the first four tables; an empty
//! database is a new one. Anything else is refused with the file untouched, so strata never
//! writes to another program's database.

use std::path::Path;
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};

/// How long a writer waits for the lock before [`Error::Busy`], unless told otherwise.
pub(crate) const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

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
/// Deleted and rewritten content is zeroed (`secure_delete`): a row a later update moves, or a
/// memory's earlier text, would otherwise stay in the page's free space, where no query sees it
/// but the file's bytes still hold it, and `strata forget` could not reach it.
///
/// The file is read through a memory map (up to 1 GiB of it): searches scan megabytes of index
/// and vector pages per call, which SQLite otherwise copies through its page cache (2 MB per
/// connection by default, so a 5 MB scan re-reads every page from the OS each time).
pub(crate) fn init_connection(conn: &Connection, busy_timeout: Duration) -> rusqlite::Result<()> {
    conn.busy_timeout(busy_timeout.min(MAX_BUSY_TIMEOUT))?;
    conn.execute_batch(
        "PRAGMA foreign_keys = ON;
         PRAGMA synchronous = NORMAL;
         PRAGMA temp_store = MEMORY;
         PRAGMA secure_delete = ON;",
    )?;
    // The pragma answers with the size in force (0 where memory maps are unavailable).
    conn.query_row("PRAGMA mmap_size = 1073741824", [], |_| Ok(()))?;
    Ok(())
}

/// What a command will do with the file it opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// A command that writes: a missing or empty file becomes a new database, and a damaged
    /// one is refused.
    Write,
    /// A command that only reads: a missing or empty file is an error, never created, and
    /// every connection of the pool is read-only.
    Read,
    /// `doctor`: opened as for [`Access::Read`], but writable, since its full-text check
    /// indexes the rows waiting for the index inside a savepoint it rolls back.
    Inspect,
}

impl Access {
    /// Whether the file must exist already.
    fn existing_only(self) -> bool {
        matches!(self, Access::Read | Access::Inspect)
    }
}

/// Opens one connection with the extension registered and WAL switched on.
/// Used for the first connection of a store, whose errors must keep their detail.
///
/// Every decision to refuse a file is taken before the first pragma that writes: whose file it
/// is and its schema version by a read-only probe ([`probe`]); for [`Access::Write`], SQLite's
/// `quick_check`, so no write command adds to a damaged file. Only then is the file switched
/// to WAL, which rewrites header bytes 18-19 of a file in rollback mode.
pub(crate) fn open_connection(path: &Path, busy_timeout: Duration, access: Access) -> Result<Connection> {
    crate::vec::register();
    let length = match std::fs::metadata(path) {
        Ok(metadata) => Some(metadata.len()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        // Unreadable metadata: the probe's open below says what is wrong.
        Err(_) => Some(u64::MAX),
    };
    match (access, length) {
        (access, None) if access.existing_only() => return Err(Error::Missing { path: path.to_path_buf() }),
        (access, Some(0)) if access.existing_only() => return Err(Error::Empty { path: path.to_path_buf() }),
        _ => {}
    }
    let existing = length.is_some_and(|length| length > 0);
    if existing {
        probe(path, busy_timeout)?;
    }
    let wal_had_frames = wal_has_frames(path);
    let conn = Connection::open_with_flags(path, FLAGS)
        .map_err(|source| Error::Open { path: path.to_path_buf(), source: source.into() })?;
    init_connection(&conn, busy_timeout)?;
    // This connection only decides on the file; closed as the last one, SQLite would
    // checkpoint a `-wal` left by a crash into the file and delete it, which for a damaged one
    // destroys the bytes of the commits it lost before the user chose what to do (a reader,
    // `doctor`, or a writer about to refuse the file would write so). Without such a `-wal`
    // the close only removes the empty `-wal` and `-shm` it made.
    if wal_had_frames {
        keep_wal_at_close(&conn)?;
    }
    if existing && access == Access::Write {
        let check = crate::check::sqlite_check(&conn, false)?;
        if check.problems > 0 {
            return Err(Error::Damaged {
                problems: check.problems,
                first: check.details.into_iter().next().unwrap_or_default(),
            });
        }
    }
    // WAL is a property of the file, so setting it once is enough; it lets readers run while a
    // writer commits. The pragma answers with the mode now in force. Only a writer sets it: a
    // read leaves the file as it found it.
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    if access == Access::Write && !mode.eq_ignore_ascii_case("wal") {
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(%mode, "database could not switch to WAL");
        }
    }
    Ok(conn)
}

/// Whether `path` has a `-wal` beside it holding frames (more than its 32-byte header).
fn wal_has_frames(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(&wal).is_ok_and(|metadata| metadata.len() > 32)
}

/// Tells SQLite not to checkpoint the WAL when `conn` closes as the file's last connection.
fn keep_wal_at_close(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    Ok(())
}

/// strata's `PRAGMA application_id` ("STRA"), set by schema 3.
pub(crate) const APPLICATION_ID: i64 = 0x5354_5241;

/// The tables every strata schema has had since the first; a database of schema 1 or 2 (before
/// the application id) is known by them.
const FIRST_TABLES: [&str; 4] = ["sessions", "messages", "summary_nodes", "agent_memories"];

/// Refuses a non-empty file that is not a strata database this build can open, without writing
/// a byte to it or creating a file beside it.
///
/// A foreign application id in the header is refused from the bytes alone. Otherwise the
/// answer needs SQLite (a WAL file's header can be older than its `-wal`), asked through a
/// read-only connection: in rollback mode it creates nothing, and a file in WAL mode with no
/// `-wal` beside it (so its header is the whole truth) is opened `immutable`, which creates no
/// `-wal` and `-shm` either. Strata's own file is known by its application id ("STRA", schema
/// 3 on) or, before schema 3, by its version and first tables; an empty database (no tables,
/// version 0) is a new one.
fn probe(path: &Path, busy_timeout: Duration) -> Result<()> {
    let mut header = [0u8; 100];
    let read = std::fs::File::open(path).and_then(|mut file| {
        use std::io::Read;
        file.read(&mut header)
    });
    let header = match read {
        Ok(100) if header.starts_with(b"SQLite format 3\0") => Some(header),
        _ => None, // not SQLite, or unreadable: the probe's own open says which
    };
    let be32 =
        |at: usize| header.map_or(0, |h| i32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]) as i64);
    let (header_version, header_application_id) = (be32(60), be32(68));
    if header_application_id != 0 && header_application_id != APPLICATION_ID {
        return Err(Error::NotStrata {
            path: path.to_path_buf(),
            application_id: header_application_id,
            user_version: header_version,
        });
    }
    let in_wal_mode = header.is_some_and(|h| h[18] == 2);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let immutable = in_wal_mode && !Path::new(&wal).exists();
    let uri = file_uri(path, immutable);
    let probe = Connection::open_with_flags(
        &uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| Error::Open { path: path.to_path_buf(), source: source.into() })?;
    // A writer in rollback mode holds a lock that readers wait for.
    probe.busy_timeout(busy_timeout.min(MAX_BUSY_TIMEOUT))?;
    let application_id: i64 = probe.query_row("PRAGMA application_id", [], |row| row.get(0))?;
    let version: i64 = probe.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    let tables: i64 = probe.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        [],
        |row| row.get(0),
    )?;
    let first_tables: i64 = probe.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN (?1, ?2, ?3, ?4)",
        FIRST_TABLES,
        |row| row.get(0),
    )?;
    let supported = crate::migrate::SCHEMA_VERSION;
    if application_id == APPLICATION_ID {
        return match version {
            found if found > supported => Err(Error::SchemaTooNew { found, supported }),
            found if found < 1 => Err(Error::SchemaUnknown { path: path.to_path_buf(), found }),
            _ => Ok(()),
        };
    }
    let new = version == 0 && tables == 0;
    let before_application_id =
        application_id == 0 && (1..=2).contains(&version) && first_tables == FIRST_TABLES.len() as i64;
    if new || before_application_id {
        return Ok(());
    }
    Err(Error::NotStrata { path: path.to_path_buf(), application_id, user_version: version })
}

/// `path` as a SQLite `file:` URI (every byte but the unreserved ones percent-encoded), read
/// only, `immutable` when asked.
fn file_uri(path: &Path, immutable: bool) -> String {
    let mut uri = String::from("file:");
    for byte in path.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"/._-~".contains(&byte) {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?mode=ro");
    if immutable {
        uri.push_str("&immutable=1");
    }
    uri
}

/// The flags of a reader's connections: no write can reach the file through them, so a read
/// command never takes the write lock (and never waits for it).
const READ_ONLY_FLAGS: OpenFlags =
    OpenFlags::SQLITE_OPEN_READ_ONLY.union(OpenFlags::SQLITE_OPEN_URI).union(OpenFlags::SQLITE_OPEN_NO_MUTEX);

/// The pool for an already migrated file: read-only connections for [`Access::Read`].
pub(crate) fn pool(path: &Path, busy_timeout: Duration, access: Access) -> Result<Pool> {
    let flags = match access {
        Access::Write | Access::Inspect => FLAGS,
        Access::Read => READ_ONLY_FLAGS,
    };
    let keep_wal = access == Access::Inspect && wal_has_frames(path);
    let manager = SqliteConnectionManager::file(path).with_flags(flags).with_init(move |conn| {
        init_connection(conn, busy_timeout)?;
        // `doctor`'s connections may write (a savepoint it rolls back) and so would checkpoint
        // at close: a read leaves the WAL as it found it (see `open_connection`).
        if keep_wal {
            keep_wal_at_close(conn)?;
        }
        Ok(())
    });
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
