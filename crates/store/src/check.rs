//! Health checks and backups: what `strata doctor` and `strata backup` run.
//!
//! Every check only reads. The FTS5 `integrity-check` command is spelled as an INSERT, so it
//! runs inside a transaction that is rolled back.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use crate::error::{Error, Result};
use crate::search::index::Deferred;
pub(crate) use strata_seam::check::{Check, Report};

use crate::kinds::FOREST_CHECKS;

/// The full-text indexes, each checked against its content.
const FTS_TABLES: [&str; 6] =
    ["messages_fts", "summaries_fts", "memories_fts", "messages_words", "summaries_words", "memories_words"];

/// Most problems listed per check; the count says how many there were.
const MAX_LISTED: usize = 20;

/// A check whose problems are the rows of `sql` (one text column each), all counted, the
/// first [`MAX_LISTED`] kept.
fn rows_check(conn: &Connection, name: &'static str, sql: &str) -> Result<Check> {
    let mut statement = conn.prepare(sql)?;
    let mut rows = statement.query([])?;
    let mut check = Check { name, problems: 0, details: Vec::new(), skipped: None };
    while let Some(row) = rows.next()? {
        check.problems += 1;
        if check.details.len() < MAX_LISTED {
            check.details.push(row.get(0)?);
        }
    }
    Ok(check)
}

/// SQLite's own check of the file: `quick_check` (structure, O(size)) or `integrity_check`
/// (also every index against its table).
pub(crate) fn sqlite_check(conn: &Connection, full: bool) -> Result<Check> {
    let pragma = if full { "PRAGMA integrity_check(100)" } else { "PRAGMA quick_check(100)" };
    let run = || -> rusqlite::Result<Vec<String>> {
        let mut statement = conn.prepare(pragma)?;
        statement.query_map([], |row| row.get(0))?.collect()
    };
    let lines: Vec<String> = match run() {
        Ok(lines) => lines,
        Err(err)
            if !matches!(
                err.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            ) =>
        {
            // The check also runs each virtual table's own check: damaged pages of an FTS5
            // index make it fail ("invalid fts5 file format") instead of report. That is a
            // problem found in the file, not a failure to look.
            vec![format!("the check stopped: {err}")]
        }
        Err(err) => return Err(err.into()),
    };
    // A row may hold several problems, one per line, under a "*** in database main ***" header.
    let problems: Vec<String> = lines
        .iter()
        .flat_map(|row| row.lines())
        .filter(|line| *line != "ok" && !line.starts_with("*** "))
        .map(str::to_owned)
        .collect();
    Ok(Check {
        name: if full { "sqlite integrity_check" } else { "sqlite quick_check" },
        problems: problems.len() as u64,
        details: problems.into_iter().take(MAX_LISTED).collect(),
        skipped: None,
    })
}

/// The vector tables: created by the embedding model in use (`vectors::use_space`), not by the
/// migrations, so present or not; their shadow tables start with their name and `_`.
const VECTOR_TABLES: [&str; 3] = ["messages_vec", "summaries_vec", "memories_vec"];

/// The file's schema against the one this build's migrations create (in a fresh in-memory
/// database): every table, index, trigger and view there, with the same SQL, and nothing more
/// but the vector tables. A dropped append-only trigger or table, or an added trigger, is a
/// problem SQLite's own checks never see.
fn schema_check(conn: &Connection) -> Result<Check> {
    let expected = crate::migrate::expected_schema()?;
    let found = crate::migrate::schema_objects(conn)?;
    let mut check = Check { name: "the schema is strata's", problems: 0, details: Vec::new(), skipped: None };
    let mut problem = |text: String| {
        check.problems += 1;
        if check.details.len() < MAX_LISTED {
            check.details.push(text);
        }
    };
    for ((kind, name), sql) in &expected {
        match found.get(&(kind.clone(), name.clone())) {
            None => problem(format!("{kind} {name} is missing")),
            Some(found_sql) if found_sql != sql => problem(format!("{kind} {name} differs from strata's")),
            Some(_) => {}
        }
    }
    let vector = |name: &str| {
        VECTOR_TABLES
            .iter()
            .any(|table| name == *table || name.strip_prefix(table).is_some_and(|rest| rest.starts_with('_')))
    };
    for (kind, name) in found.keys() {
        if !expected.contains_key(&(kind.clone(), name.clone())) && !vector(name) {
            problem(format!("{kind} {name} is not part of strata's schema"));
        }
    }
    Ok(check)
}

/// The FTS5 `integrity-check` of every full-text table, inside a savepoint rolled back. It
/// needs the write lock (the check is spelled as an INSERT, and rows not indexed yet are
/// indexed first) and a little room on the disk: when another process holds the lock past
/// the busy timeout, or the disk is full, the check is skipped and says why, since neither is
/// damage of the file.
fn fts_check(conn: &Connection) -> Result<Check> {
    const NAME: &str = "full-text indexes match their tables";
    conn.execute_batch("SAVEPOINT fts_check")?;
    let checked = fts_check_in_savepoint(conn, NAME);
    conn.execute_batch("ROLLBACK TO fts_check; RELEASE fts_check")?;
    match checked {
        Err(Error::Busy(_)) => Ok(Check {
            name: NAME,
            problems: 0,
            details: Vec::new(),
            skipped: Some("another process holds the write lock; run doctor again when it is done".into()),
        }),
        Err(Error::DiskFull(_)) => Ok(Check {
            name: NAME,
            problems: 0,
            details: Vec::new(),
            skipped: Some("the disk is full; free some space and run doctor again".into()),
        }),
        other => other,
    }
}

fn fts_check_in_savepoint(conn: &Connection, name: &'static str) -> Result<Check> {
    let mut check = Check { name, problems: 0, details: Vec::new(), skipped: None };
    // Rows not indexed yet (schemas 8 and 10) are indexed inside the savepoint, so the check
    // compares whole tables and doctor still writes nothing.
    for deferred in Deferred::ALL {
        let cursor = deferred.cursor_table();
        let has_cursor: Option<i64> = conn
            .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [cursor], |row| {
                row.get(0)
            })
            .optional()?;
        if has_cursor.is_some() {
            deferred.index(conn, usize::MAX >> 1)?;
        }
    }
    for table in FTS_TABLES {
        let exists: Option<i64> = conn
            .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |row| {
                row.get(0)
            })
            .optional()?;
        if exists.is_none() {
            continue;
        }
        if let Err(error) =
            conn.execute(&format!("INSERT INTO {table}({table}) VALUES ('integrity-check')"), [])
        {
            let error = Error::from(error);
            if matches!(error, Error::Busy(_) | Error::DiskFull(_)) {
                return Err(error);
            }
            check.problems += 1;
            check.details.push(format!("{table}: {error}"));
        }
    }
    Ok(check)
}

/// Runs every check. `full` runs SQLite's `integrity_check` instead of `quick_check`.
pub(crate) fn doctor(conn: &Connection, full: bool) -> Result<Report> {
    let mut checks = vec![sqlite_check(conn, full)?];
    if checks[0].problems > 0 {
        // The tables cannot be trusted to answer the other checks.
        return Ok(Report { checks, embedding_backlog: 0 });
    }
    checks.push(schema_check(conn)?);
    checks.push(fts_check(conn)?);
    checks.push(rows_check(
        conn,
        "each compacted message lies inside its Level-0 node",
        "SELECT 'message ' || m.id || ' (seq ' || m.seq || ') points at node ' || m.summary_id ||
                CASE WHEN n.id IS NULL THEN ', which does not exist'
                     ELSE ' (level ' || n.level || ', session ' || n.session_id || ', seq ' || n.first_seq || '-' || n.last_seq || ')' END
         FROM messages m LEFT JOIN summary_nodes n ON n.id = m.summary_id
         WHERE m.summary_id IS NOT NULL
           AND (n.id IS NULL OR n.level != 0 OR n.session_id != m.session_id
                OR m.seq NOT BETWEEN n.first_seq AND n.last_seq OR m.pinned = 1)",
    )?);
    checks.push(rows_check(
        conn,
        "each Level-0 node covers every message of its range",
        "SELECT 'node ' || n.id || ' (seq ' || n.first_seq || '-' || n.last_seq || ') covers ' ||
                (SELECT count(*) FROM messages m WHERE m.summary_id = n.id) || ' of the ' ||
                (SELECT count(*) FROM messages m WHERE m.session_id = n.session_id AND m.seq BETWEEN n.first_seq AND n.last_seq) ||
                ' messages of its range'
         FROM summary_nodes n
         WHERE n.level = 0
           AND (SELECT count(*) FROM messages m WHERE m.summary_id = n.id)
            != (SELECT count(*) FROM messages m WHERE m.session_id = n.session_id AND m.seq BETWEEN n.first_seq AND n.last_seq)",
    )?);
    for (name, sql) in FOREST_CHECKS {
        checks.push(rows_check(conn, name, sql)?);
    }
    checks.push(rows_check(
        conn,
        "seqs are dense in every session",
        // From the session's `first_seq`: 0, or past the messages `forget --before` erased.
        "SELECT 'session ' || m.session_id || ' has ' || count(*) || ' messages but seqs ' || min(m.seq) ||
                ' to ' || max(m.seq) || ' (first kept seq ' || s.first_seq || ')'
         FROM messages m JOIN sessions s ON s.id = m.session_id GROUP BY m.session_id
         HAVING count(*) != max(m.seq) + 1 - s.first_seq OR min(m.seq) != s.first_seq",
    )?);
    checks.push(rows_check(
        conn,
        "backlog entries name existing rows",
        "SELECT kind || ' ' || item_id || ' is queued for embedding but does not exist' FROM embedding_backlog b
         WHERE (kind = 'message' AND NOT EXISTS (SELECT 1 FROM messages WHERE id = b.item_id))
            OR (kind = 'summary' AND NOT EXISTS (SELECT 1 FROM summary_nodes WHERE id = b.item_id))
            OR (kind = 'memory' AND NOT EXISTS (SELECT 1 FROM agent_memories WHERE id = b.item_id))",
    )?);
    let embedding_backlog: i64 =
        conn.query_row("SELECT count(*) FROM embedding_backlog", [], |row| row.get(0))?;
    Ok(Report { checks, embedding_backlog: embedding_backlog as u64 })
}

/// Writes a consistent copy of the database to `dest` with `VACUUM INTO`: one read
/// transaction, so writers carry on meanwhile and the copy holds exactly what was committed
/// when it started (WAL included, which a plain file copy misses). `dest` must not exist.
pub(crate) fn backup(conn: &Connection, dest: &Path) -> Result<()> {
    if dest.exists() {
        return Err(Error::invalid("backup destination", format!("{} already exists", dest.display())));
    }
    let dest_text = dest.to_str().ok_or_else(|| {
        Error::invalid("backup destination", format!("{} is not valid UTF-8", dest.display()))
    })?;
    conn.execute("VACUUM INTO ?1", [dest_text])?;
    Ok(())
}
