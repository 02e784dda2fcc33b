//! The cached databases the benches share (`scale`, `binding`): built once through the store
//! (fixed seed, fixed clock) under `target/tmp/scale-fixtures/`, keyed by name and schema
//! version, so a rerun only measures.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use strata_compactor::summarize::TimedSummarizer;
use strata_compactor::{Compactor, CompactorConfig, ExtractiveSummarizer};
use strata_seam::Conversations;
use strata_store::Store;

use crate::{appends, word_corpus};

/// Whether a fixture's messages get vectors.
#[derive(Clone, Copy, PartialEq)]
pub enum Vectors {
    Yes,
    No,
}

/// The database cached at `target/tmp/scale-fixtures/{name}-v{schema version}.db`, built on
/// first use by `build` (into a side file, checkpointed and renamed when done, so an interrupted
/// build is never taken for a fixture).
pub fn cached_fixture(name: &str, build: impl FnOnce(&Store)) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scale-fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-v{}.db", strata_store::SCHEMA_VERSION));
    if path.exists() {
        return path;
    }
    let started = Instant::now();
    let building = path.with_extension("building");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", building.display()));
    }
    build(&Store::open(&building).unwrap());
    let wal = rusqlite::Connection::open(&building).unwrap();
    wal.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    drop(wal);
    std::fs::rename(&building, &path).unwrap();
    eprintln!("built {} in {:.1} s", path.display(), started.elapsed().as_secs_f64());
    path
}

/// A cached database of `messages` messages of persona `p` (sessions of 1,000) plus 10,000 of
/// persona `q`, with a vector each when asked.
pub fn fixture(messages: usize, vectors: Vectors) -> Store {
    let kind = if vectors == Vectors::Yes { "recall" } else { "text" };
    let path = cached_fixture(&format!("{kind}-{messages}"), |store| {
        word_corpus::fill(store, messages, vectors == Vectors::Yes)
    });
    Store::open(&path).unwrap()
}

/// A cached database holding one session `s` of `n` messages of the generated week, folded by
/// the extractive summarizer when `compacted` (so nothing is left to compact).
pub fn session_fixture(n: usize, compacted: bool) -> PathBuf {
    let kind = if compacted { "compacted" } else { "session" };
    cached_fixture(&format!("{kind}-{n}"), |store| {
        let session = store.session("s", "default").unwrap();
        for batch in appends::first_messages(n).chunks(5_000) {
            store.append(session.id, batch).unwrap();
        }
        store.index_messages(usize::MAX >> 1).unwrap();
        if compacted {
            let (compactor, _) = extractive_compactor(store.clone());
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(compactor.compact_rounds(session.id, u32::MAX)).unwrap();
        }
    })
}

/// A compactor with the default configuration and the extractive summarizer, timed.
pub fn extractive_compactor(store: Store) -> (Compactor, Arc<TimedSummarizer<ExtractiveSummarizer>>) {
    let config = CompactorConfig::default();
    let summarizer = Arc::new(TimedSummarizer::new(ExtractiveSummarizer::new(config.token_counter())));
    (Compactor::new(store, config, summarizer.clone()).unwrap(), summarizer)
}
