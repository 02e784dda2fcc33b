//! The seam's conformance suite (`strata_seam::conformance`), run on a SQLite file.

use std::path::Path;

use strata_store::Store;

/// A fresh database file in its own temporary directory, dropped after the store.
struct Fixture {
    store: Store,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Fixture {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}

fn fresh() -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Store::open(dir.path().join("strata.db")).expect("a fresh SQLite database");
    Fixture { store, _dir: dir }
}

fn open_file(path: &Path) -> Store {
    Store::open(path).expect("the SQLite file a backup wrote")
}

strata_seam::conformance_suite!(fresh, open_file);
