//! Schema migrations: numbered SQL files applied by `PRAGMA user_version`.
//!
//! `schema/current.sql` is the schema they build, in one file; the store's test
//! `every_earlier_schema_upgrades_to_schema_current_sql` upgrades a database of every earlier
//! version, built from that version's own files (`scripts/snapshot-schema-history.sh`), and
//! checks that it ends up exactly so.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Error, Result};

/// The migrations, in order. Version N is the state after applying the first N files.
/// Never edit a released file: add a new one.
const MIGRATIONS: &[&str] = &[
    include_str!("../../../schema/0001_init.sql"),
    include_str!("../../../schema/0002_search.sql"),
    include_str!("../../../schema/0003_retrieval.sql"),
    include_str!("../../../schema/0004_idempotent.sql"),
    include_str!("../../../schema/0005_summary_rejections.sql"),
    include_str!("../../../schema/0006_raw_archives.sql"),
    include_str!("../../../schema/0007_memory_updates.sql"),
    include_str!("../../../schema/0008_message_index_cursor.sql"),
    include_str!("../../../schema/0009_token_encoding.sql"),
    include_str!("../../../schema/0010_summary_index_cursor.sql"),
    include_str!("../../../schema/0011_commit_watermark.sql"),
    include_str!("../../../schema/0012_govern.sql"),
    include_str!("../../../schema/0013_message_body.sql"),
    include_str!("../../../schema/0014_memory_validity.sql"),
];

/// The schema version this build creates and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database to [`SCHEMA_VERSION`], refusing files from a newer strata.
///
/// A database already at this version is only read (no write lock taken), so opening a store
/// for a read command never waits for a writer, such as an import, holding the lock.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if current == SCHEMA_VERSION {
        return Ok(());
    }
    migrate_to(conn, SCHEMA_VERSION)
}

/// Applies the missing migrations up to `target` in one immediate transaction, so two
/// processes opening a new file at once cannot both apply them and a crash leaves the old
/// version intact.
pub(crate) fn migrate_to(conn: &mut Connection, target: i64) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let current: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if current > SCHEMA_VERSION {
        return Err(Error::SchemaTooNew { found: current, supported: SCHEMA_VERSION });
    }
    if current >= target {
        return Ok(());
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().take(target as usize).skip(current as usize) {
        tracing::debug!(version = index + 1, "applying migration");
        tx.execute_batch(sql)?;
    }
    tx.pragma_update(None, "user_version", target)?;
    tx.commit()?;
    Ok(())
}

/// Every object (`type`, `name`) of the schema this build creates, with its SQL, as built from
/// the migrations in a fresh in-memory database: what `doctor` compares a file against.
pub(crate) fn expected_schema() -> Result<std::collections::BTreeMap<(String, String), Option<String>>> {
    crate::vec::register();
    let mut conn = Connection::open_in_memory()?;
    migrate_to(&mut conn, SCHEMA_VERSION)?;
    schema_objects(&conn)
}

/// The objects of `conn`'s main schema, SQLite's own (`sqlite_*`) left out.
pub(crate) fn schema_objects(
    conn: &Connection,
) -> Result<std::collections::BTreeMap<(String, String), Option<String>>> {
    let mut statement = conn.prepare(
        "SELECT type, name, sql FROM main.sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
    )?;
    let objects = statement
        .query_map([], |row| Ok(((row.get(0)?, row.get(1)?), row.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{Access, DEFAULT_BUSY_TIMEOUT, init_connection, open_connection};

    #[test]
    fn newer_database_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let mut conn = open_connection(&path, DEFAULT_BUSY_TIMEOUT, Access::Write).unwrap();
        migrate(&mut conn).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 7).unwrap();
        drop(conn);

        // Refused on open, before anything is written, and by the migration itself.
        let err = open_connection(&path, DEFAULT_BUSY_TIMEOUT, Access::Write).unwrap_err();
        assert!(matches!(err, Error::SchemaTooNew { .. }), "{err:?}");
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        init_connection(&conn, DEFAULT_BUSY_TIMEOUT).unwrap();
        let err = migrate(&mut conn).unwrap_err();
        assert!(
            matches!(err, Error::SchemaTooNew { found, supported } if found == SCHEMA_VERSION + 7 && supported == SCHEMA_VERSION),
            "{err:?}"
        );
        assert!(err.to_string().contains("newer than this strata supports"));
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION + 7);
    }
}
