//! The two backends the conformance suite runs on: a SQLite file in a temporary directory and
//! a fresh database on a real PostgreSQL server (started by `scripts/postgres.sh` unless
//! `STRATA_TEST_POSTGRES` names one). A server that cannot start fails the test with its log.

#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use strata_pg::PgStore;
use strata_seam::Backend;
use strata_store::Store;

/// A backend and what it lives in, dropped in this order: the store, then its database.
pub struct Fixture {
    pub backend: Box<dyn Backend>,
    _home: Home,
}

enum Home {
    Dir(#[allow(dead_code)] tempfile::TempDir),
    Database { server: String, name: String },
}

impl Drop for Home {
    fn drop(&mut self) {
        // A database left behind costs a temporary server some disk, nothing more.
        if let Home::Database { server, name } = self
            && let Ok(mut client) = postgres::Client::connect(server, postgres::NoTls)
        {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
        }
    }
}

impl std::ops::Deref for Fixture {
    type Target = dyn Backend;
    fn deref(&self) -> &(dyn Backend + 'static) {
        self.backend.as_ref()
    }
}

pub fn sqlite() -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Store::open(dir.path().join("strata.db")).expect("a fresh SQLite database");
    Fixture { backend: Box::new(store), _home: Home::Dir(dir) }
}

/// The test server's URL (its `postgres` database).
pub fn server() -> String {
    if let Ok(url) = std::env::var("STRATA_TEST_POSTGRES") {
        return url;
    }
    // This file serves strata-pg's tests and the root package's: the script is in the
    // workspace's root, found upwards from the package.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("scripts/postgres.sh"))
        .find(|script| script.exists())
        .expect("scripts/postgres.sh in the workspace");
    let output = Command::new("bash").arg(script).arg("url").output().expect("bash runs scripts/postgres.sh");
    assert!(
        output.status.success(),
        "PostgreSQL for the tests did not start:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("a URL").trim().to_owned()
}

/// A new, empty database on the test server; returns the server's URL, the database's URL and
/// its name.
pub fn new_database() -> (String, String, String) {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let server = server();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let name = format!("strata_test_{}_{}_{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let mut client = postgres::Client::connect(&server, postgres::NoTls)
        .unwrap_or_else(|error| panic!("cannot connect to the test server {server}: {error}"));
    client.batch_execute(&format!("CREATE DATABASE {name}")).expect("a new database");
    let url = format!("{}/{name}", server.rsplit_once('/').expect("a URL with a database").0);
    (server, url, name)
}

/// A new, empty database on the test server that is dropped with the returned guard; its URL.
pub fn scratch_database() -> (String, impl Drop) {
    let (server, url, name) = new_database();
    (url, Home::Database { server, name })
}

pub fn postgres() -> Fixture {
    let (server, url, name) = new_database();
    let store = PgStore::open(&url).expect("strata's schema on a fresh PostgreSQL database");
    Fixture { backend: Box::new(store), _home: Home::Database { server, name } }
}
