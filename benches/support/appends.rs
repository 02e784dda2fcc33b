//! What the store and scale benches append, and their baseline: the same rows inserted with
//! plain rusqlite into a bare table (no indexes, triggers or FTS unless asked), so a report is
//! a ratio that survives a noisy machine.

use std::path::Path;

use rusqlite::Connection;
use strata_seam::NewMessage;
use strata_synth::TranscriptSpec;

/// The first `n` messages of the demo's generated week (fixed seed and clock, about 540
/// characters each: requests, tool calls, code listings and logs), with exact token counts.
pub fn first_messages(n: usize) -> Vec<NewMessage> {
    let spec = TranscriptSpec { min_messages: n, min_chars: 0, ..TranscriptSpec::default() };
    let counter = strata_compactor::CompactorConfig::default().token_counter();
    let mut messages = strata_synth::generate(&spec).messages;
    messages.truncate(n);
    for message in &mut messages {
        counter.count_new(message);
    }
    messages
}

/// A WAL database at `path` with the bare table `m`, and with `index` (SQL creating a table
/// `f`, which a trigger then fills with `indexed` of each new row) unless it is empty.
pub fn bare_table(path: &Path, index: &str, indexed: &str) -> Connection {
    let raw = Connection::open(path).unwrap();
    raw.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE m (id INTEGER PRIMARY KEY, session INTEGER, seq INTEGER, role TEXT,
                         content TEXT, created_at REAL, token_count INTEGER);",
    )
    .unwrap();
    if !index.is_empty() {
        raw.execute_batch(index).unwrap();
        raw.execute_batch(&format!(
            "CREATE TRIGGER m_ai AFTER INSERT ON m BEGIN
                 INSERT INTO f(rowid, content) VALUES (new.id, new.{indexed}); END;"
        ))
        .unwrap();
    }
    raw
}

/// Inserts `messages` into [`bare_table`]'s table in one transaction, numbered on from `seq`.
pub fn insert_bare(raw: &Connection, messages: &[NewMessage], seq: &mut i64) {
    let tx = raw.unchecked_transaction().unwrap();
    {
        let mut insert = tx.prepare_cached("INSERT INTO m VALUES (NULL, 1, ?1, ?2, ?3, ?4, ?5)").unwrap();
        for message in messages {
            insert
                .execute(rusqlite::params![
                    *seq,
                    message.role.as_str(),
                    message.content,
                    message.created_at.timestamp_micros() as f64 / 1e6,
                    message.token_count
                ])
                .unwrap();
            *seq += 1;
        }
    }
    tx.commit().unwrap();
}
