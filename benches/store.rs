//! Store throughput: appending messages in batches of 1,000 to a file-backed WAL database.
//!
//! The baseline is the same rows inserted with plain rusqlite into a bare table (no indexes,
//! triggers or FTS) in the same run, so the report is a ratio that survives a noisy machine.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use strata_store::{NewMessage, Store};
use strata_synth::{self as synth, TranscriptSpec};

const BATCH: usize = 1_000;

/// The first 1,000 messages of the demo's generated week (fixed seed, fixed clock), with exact
/// token counts: requests, tool calls, code listings and test logs.
fn batch() -> Vec<NewMessage> {
    let spec = TranscriptSpec { min_messages: BATCH, min_chars: 0, ..TranscriptSpec::default() };
    let counter = strata::compactor::TokenCounter::for_model("gpt-4o-mini");
    let mut messages = synth::generate(&spec).messages;
    messages.truncate(BATCH);
    for message in &mut messages {
        counter.count_new(message);
    }
    messages
}

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let messages = batch();
    let mut group = c.benchmark_group("append_1000");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);

    let raw = rusqlite::Connection::open(dir.path().join("baseline.db")).unwrap();
    raw.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE m (id INTEGER PRIMARY KEY, session INTEGER, seq INTEGER, role TEXT, content TEXT,
                         created_at REAL, token_count INTEGER);",
    )
    .unwrap();
    let mut seq = 0i64;
    group.bench_function("baseline_rusqlite_bare_table", |b| {
        b.iter(|| {
            let tx = raw.unchecked_transaction().unwrap();
            {
                let mut insert =
                    tx.prepare_cached("INSERT INTO m VALUES (NULL, 1, ?1, ?2, ?3, ?4, ?5)").unwrap();
                for message in &messages {
                    insert
                        .execute(rusqlite::params![
                            seq,
                            message.role.as_str(),
                            message.content,
                            strata_store::to_unix(message.created_at),
                            message.token_count
                        ])
                        .unwrap();
                    seq += 1;
                }
            }
            tx.commit().unwrap();
        })
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
