//! Store throughput: appending messages in batches of 1,000 to a file-backed WAL database.
//!
//! The baseline is the same rows inserted with plain rusqlite into a bare table (no indexes,
//! triggers or FTS) in the same run, so the report is a ratio that survives a noisy machine.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use strata_seam::Conversations;
use strata_store::Store;

#[path = "support/appends.rs"]
mod appends;

const BATCH: usize = 1_000;

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let messages = appends::first_messages(BATCH);
    let mut group = c.benchmark_group("append_1000");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);

    let raw = appends::bare_table(&dir.path().join("baseline.db"), "", "");
    let mut seq = 0i64;
    group.bench_function("baseline_rusqlite_bare_table", |b| {
        b.iter(|| appends::insert_bare(&raw, &messages, &mut seq))
    });

    // The same rows into a table with only strata's trigram FTS5 index: what full-text search
    // alone costs, to tell it apart from the rest of strata's append path.
    let fts = rusqlite::Connection::open(dir.path().join("fts.db")).unwrap();
    fts.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE m (id INTEGER PRIMARY KEY, content TEXT);
         CREATE VIRTUAL TABLE m_fts USING fts5(content, content = 'm', content_rowid = 'id',
             tokenize = 'trigram case_sensitive 0 remove_diacritics 1');
         CREATE TRIGGER m_ai AFTER INSERT ON m BEGIN
             INSERT INTO m_fts(rowid, content) VALUES (new.id, new.content); END;",
    )
    .unwrap();
    group.bench_function("baseline_rusqlite_trigram_fts", |b| {
        b.iter(|| {
            let tx = fts.unchecked_transaction().unwrap();
            {
                let mut insert = tx.prepare_cached("INSERT INTO m(content) VALUES (?1)").unwrap();
                for message in &messages {
                    insert.execute([&message.content]).unwrap();
                }
            }
            tx.commit().unwrap();
        })
    });

    let store = Store::open(dir.path().join("strata.db")).unwrap();
    let session = store.session("bench", "default").unwrap();
    group.bench_function("strata_store_append", |b| {
        b.iter_batched(
            || messages.clone(),
            |messages| store.append(session.id, &messages).unwrap(),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
