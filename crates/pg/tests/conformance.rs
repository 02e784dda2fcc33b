//! The seam's conformance suite (`strata_seam::conformance`), run on a fresh database of a
//! real PostgreSQL server (see `common`).

mod common;

fn open_file(path: &std::path::Path) -> strata_store::Store {
    strata_store::Store::open(path).expect("the SQLite file a backup wrote")
}

strata_seam::conformance_suite!(common::postgres, open_file);
