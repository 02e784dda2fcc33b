//! The schema in one file: `schema/current.sql` is what a fresh database holds, and a database
//! of every earlier version, built from that version's own migration files (the fixtures in
//! `tests/fixtures/schema/`, written from git history by `scripts/snapshot-schema-history.sh`),
//! is upgraded by today's `Store::open` to exactly that.
//!
//! Upgrading with today's files alone would prove little: the files of a version were edited
//! after they first shipped (schema 3 and 4), and only each version's own files show what an
//! old database really holds.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use strata_seam::search::{HitKind, SearchFilter, TextQuery};
use strata_seam::{Maintenance, Search, Vectors};
use strata_store::{SCHEMA_VERSION, Store};

/// Set to 1 to rewrite `schema/current.sql` from a fresh database instead of checking it.
const BLESS: &str = "STRATA_BLESS";

fn current_sql_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/current.sql")
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema")
}

/// The schema of the database at `path` as one text: its application id and version, then
/// every object's SQL as SQLite stored it (`sqlite_master`), grouped by table (the table, its
/// indexes, its triggers) in name order, each line without trailing blanks. SQLite's own
/// objects are left out; FTS5's shadow tables are in, since they are part of the file.
fn schema_text(path: &Path) -> String {
    let conn = Connection::open(path).unwrap();
    let pragma = |name: &str| -> i64 { conn.pragma_query_value(None, name, |row| row.get(0)).unwrap() };
    let mut text = format!(
        "-- The whole schema of a fresh strata database, as SQLite stores it (sqlite_master): each\n\
         -- table with its indexes and triggers, in name order. FTS5's shadow tables are listed for\n\
         -- the record; their virtual table creates them. The vector tables are not here: strata\n\
         -- creates them for the embedding model in use (`embedding_space`). Written by the store's\n\
         -- test `a_fresh_database_has_the_schema_of_schema_current_sql`; `{BLESS}=1 cargo nextest\n\
         -- run -p strata-store -E 'test(schema)'` regenerates it. Never edit it by hand.\n\
         PRAGMA application_id = {};\nPRAGMA user_version = {};\n",
        pragma("application_id"),
        pragma("user_version"),
    );
    let mut statement = conn
        .prepare(
            "SELECT tbl_name, type, name, sql FROM sqlite_master
             WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
        )
        .unwrap();
    let mut objects: Vec<(String, u8, String, String)> = statement
        .query_map([], |row| {
            let rank = match row.get::<_, String>(1)?.as_str() {
                "table" => 0,
                "index" => 1,
                "trigger" => 2,
                _ => 3,
            };
            Ok((row.get(0)?, rank, row.get(2)?, row.get(3)?))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    objects.sort();
    for (_, _, _, sql) in objects {
        text.push('\n');
        for line in sql.lines() {
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text.truncate(text.trim_end().len());
        text.push_str(";\n");
    }
    text
}

/// Where two schema texts first differ, with a few lines of each, for a failure message.
fn first_difference(expected: &str, found: &str) -> String {
    let (expected, found): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), found.lines().collect());
    let line = expected.iter().zip(&found).take_while(|(a, b)| a == b).count();
    let around = |lines: &[&str]| lines.iter().skip(line).take(6).copied().collect::<Vec<_>>().join("\n");
    format!(
        "first difference at line {}:\n--- schema/current.sql\n{}\n--- the database\n{}",
        line + 1,
        around(&expected),
        around(&found)
    )
}

fn current_sql() -> String {
    std::fs::read_to_string(current_sql_path()).unwrap_or_default()
}

#[test]
fn a_fresh_database_has_the_schema_of_schema_current_sql() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    drop(Store::open(&path).unwrap());
    let found = schema_text(&path);
    if std::env::var(BLESS).as_deref() == Ok("1") {
        std::fs::write(current_sql_path(), &found).unwrap();
        return;
    }
    let expected = current_sql();
    assert!(
        found == expected,
        "schema/current.sql is not the schema a fresh database has. If the migrations changed on \
         purpose, regenerate it with `{BLESS}=1 cargo nextest run -p strata-store -E 'test(schema)'` \
         and review the diff.\n{}",
        first_difference(&expected, &found)
    );
    assert!(expected.contains(&format!("PRAGMA user_version = {SCHEMA_VERSION};")));
}

/// A database of `version`, as that version's strata created it: its fixture run in one
/// transaction, as the migration runner of the time ran the files.
fn database_of_version(dir: &Path, version: i64) -> PathBuf {
    let fixture = fixtures_dir().join(format!("v{version}.sql"));
    let sql = std::fs::read_to_string(&fixture).unwrap_or_else(|err| {
        panic!(
            "{}: {err}; every earlier schema version needs its fixture: run \
             scripts/snapshot-schema-history.sh",
            fixture.display()
        )
    });
    // Schema 2 creates sqlite-vec tables: opening a store registers the extension for every
    // connection the process opens afterwards, this one included.
    drop(Store::open(dir.join("registers-sqlite-vec.db")).unwrap());
    let path = dir.join(format!("v{version}.db"));
    let mut conn = Connection::open(&path).unwrap();
    let tx = conn.transaction().unwrap();
    tx.execute_batch(&sql).unwrap();
    tx.commit().unwrap();
    let found: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
    assert_eq!(found, version, "{} sets the version it builds", fixture.display());
    path
}

#[test]
fn every_earlier_schema_upgrades_to_schema_current_sql() {
    // Exactly one fixture per earlier version: a new migration without the fixture of the
    // version before it fails here rather than going untested.
    let mut versions: Vec<i64> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter_map(|name| name.strip_prefix('v')?.strip_suffix(".sql")?.parse().ok())
        .collect();
    versions.sort();
    assert_eq!(
        versions,
        (1..SCHEMA_VERSION).collect::<Vec<_>>(),
        "one fixture per earlier schema version: run scripts/snapshot-schema-history.sh"
    );

    let expected = current_sql();
    assert!(!expected.is_empty(), "schema/current.sql is missing");
    for version in versions {
        let dir = tempfile::tempdir().unwrap();
        let path = database_of_version(dir.path(), version);
        let store = Store::open(&path).unwrap_or_else(|err| panic!("version {version}: {err}"));
        let report = store.doctor(false).unwrap();
        assert!(report.healthy(), "version {version}, upgraded: {report:?}");
        drop(store);
        let found = schema_text(&path);
        assert!(
            found == expected,
            "a database of schema version {version}, upgraded, is not schema/current.sql\n{}",
            first_difference(&expected, &found)
        );
    }
}

/// Rows written under the first schema survive every migration and are found through both
/// search indexes, which later versions created and filled from the old rows.
#[test]
fn rows_written_under_schema_1_are_found_after_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let path = database_of_version(dir.path(), 1);
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "INSERT INTO sessions(key, role, created_at, last_active_at) VALUES ('s', 'p', 0, 0);
             INSERT INTO messages(session_id, seq, role, content, created_at, token_count)
                 VALUES (1, 0, 'user', 'needle in the haystack', 0, 5);",
        )
        .unwrap();
    let store = Store::open(&path).unwrap();
    let hits = store.grep(&TextQuery::parse("needle").unwrap(), &SearchFilter::persona("p")).unwrap();
    assert_eq!(hits.len(), 1, "the trigram index (schema 2) holds the old row: {hits:?}");
    let ranked = super::super::rank_words(
        &store,
        HitKind::Message,
        &["haystack".to_owned()],
        &SearchFilter::persona("p"),
    );
    assert_eq!(ranked.len(), 1, "the word index (schema 3) holds the old row: {ranked:?}");
    assert_eq!(store.backlog_count(None, None).unwrap(), 1, "the old row waits for a vector");
    assert!(store.doctor(true).unwrap().healthy());
}
