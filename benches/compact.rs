//! Compaction overhead per Level-0 node, excluding the summarizer's own time.
//!
//! Each measured iteration starts from a copy of one fixed-seed, file-backed WAL database
//! (the first turns of the demo's generated week, fixed seed and clock) and runs one `compact` call that
//! writes exactly one Level-0 node. The time spent inside the summarizer is measured by a
//! wrapper and subtracted, leaving planning, reads, token checks and the write transaction.
//! Two baselines run in the same process: the extractive summarizer alone on the same chunk,
//! and the store's `insert_leaf` alone. The ratios are printed at the end.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use strata_compactor::summarize::{Origin, SourceItem, SourceKind, SummaryRequest, TimedSummarizer};
use strata_compactor::{Compactor, CompactorConfig, ExtractiveSummarizer, Outcome, TokenCounter};
use strata_seam::{Conversations, Forest, Maintenance};
use strata_seam::{NewMessage, NewSummary, SessionId};
use strata_store::Store;
use strata_synth::{self as synth, TranscriptSpec};

fn config() -> CompactorConfig {
    CompactorConfig {
        head_messages: 0,
        tail_turns: 1,
        leaf_min_tokens: 3_000,
        leaf_min_turns: 2,
        leaf_chunk_tokens: 4_000,
        max_rounds: 1,
        ..CompactorConfig::default()
    }
}

/// The first turns of the demo's generated week (fixed seed and clock): about 7,000 tokens of
/// requests, tool calls, code listings and logs, enough for one chunk of `leaf_chunk_tokens`.
fn messages(counter: &TokenCounter) -> Vec<NewMessage> {
    let spec = TranscriptSpec { min_messages: 40, min_chars: 0, ..TranscriptSpec::default() };
    let mut messages = synth::generate(&spec).messages;
    for message in &mut messages {
        counter.count_new(message);
    }
    messages
}

struct Template {
    _dir: tempfile::TempDir,
    db: PathBuf,
    session: SessionId,
}

fn template() -> Template {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("template.db");
    let store = Store::open(&db).unwrap();
    let session = store.session("bench", "default").unwrap().id;
    store.append(session, &messages(&config().token_counter())).unwrap();
    // Fold the WAL into the file so a plain copy is the whole database.
    drop(store);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    drop(conn);
    Template { _dir: dir, db, session }
}

/// A copy of the template, opened, with a pooled connection already made (opening connections
/// is not what is measured).
fn fresh_copy(template: &Path, dir: &Path, n: u64) -> Store {
    let path = dir.join(format!("copy-{n}.db"));
    std::fs::copy(template, &path).unwrap();
    let store = Store::open(&path).unwrap();
    store.stats().unwrap();
    store
}

fn bench(c: &mut Criterion) {
    let template = template();
    let work = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let counter = config().token_counter();
    let mut group = c.benchmark_group("compact");
    group.sample_size(30).measurement_time(Duration::from_secs(8));
    let mut copies = 0u64;

    group.bench_function("overhead_per_level0_node", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                copies += 1;
                let store = fresh_copy(&template.db, work.path(), copies);
                let summarizer = Arc::new(TimedSummarizer::new(ExtractiveSummarizer::new(counter.clone())));
                let compactor = Compactor::new(store, config(), summarizer.clone()).unwrap();
                let start = Instant::now();
                let outcome = runtime.block_on(compactor.compact(template.session)).unwrap();
                let elapsed = start.elapsed();
                assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
                total += elapsed.saturating_sub(summarizer.total());
            }
            total
        })
    });

    // The chunk a compaction folds: compact one copy and read the node it wrote, so both
    // baselines work on exactly that range.
    let probe = fresh_copy(&template.db, work.path(), 0);
    let compactor =
        Compactor::new(probe.clone(), config(), Arc::new(ExtractiveSummarizer::new(counter.clone())))
            .unwrap();
    runtime.block_on(compactor.compact(template.session)).unwrap();
    let node = probe.roots(template.session, Some(strata_seam::Level::LEAF)).unwrap().remove(0);
    let (first, last) = (node.first_seq, node.last_seq);

    // Baseline 1: the extractive summarizer alone, on the same chunk.
    let store = fresh_copy(&template.db, work.path(), u64::MAX);
    let chunk = store.messages(template.session, first..=last).unwrap();
    let request = SummaryRequest {
        kind: SourceKind::Messages,
        level: strata_seam::Level::LEAF,
        persona: "default".into(),
        items: chunk
            .iter()
            .map(|m| SourceItem {
                reference: format!("message {}", m.id),
                origin: Origin::Message(m.role),
                name: m.name.clone(),
                tool: None,
                calls: Vec::new(),
                time: m.created_at,
                text: m.content.clone(),
            })
            .collect(),
        source_tokens: chunk.iter().map(|m| m.token_count).sum(),
        target_tokens: 400,
        retry: None,
        known_memories: Vec::new(),
    };
    let extractive = ExtractiveSummarizer::new(counter.clone());
    group
        .bench_function("baseline_extractive_summarizer", |b| b.iter(|| extractive.summarize_sync(&request)));

    // Baseline 2: the store's atomic insert_leaf alone.
    let summary = NewSummary {
        headline: "A headline.".into(),
        body: "- a body".into(),
        token_count: 6,
        summarizer: "bench".into(),
        memory_updates: Vec::new(),
    };
    group.bench_function("baseline_store_insert_leaf", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                copies += 1;
                let store = fresh_copy(&template.db, work.path(), copies);
                let start = Instant::now();
                store.insert_leaf(template.session, first, last, &summary).unwrap();
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

/// Reads criterion's point estimate (mean, ns) of one benchmark of this run.
fn estimate(name: &str) -> Option<f64> {
    let path = Path::new("target/criterion/compact").join(name).join("new/estimates.json");
    let value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    value["mean"]["point_estimate"].as_f64()
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
    if let (Some(overhead), Some(summarizer), Some(insert)) = (
        estimate("overhead_per_level0_node"),
        estimate("baseline_extractive_summarizer"),
        estimate("baseline_store_insert_leaf"),
    ) {
        println!(
            "compaction overhead per Level-0 node (summarizer excluded): {:.0} µs = {:.2}x the extractive summarizer \
             alone ({:.0} µs), {:.2}x a bare store insert_leaf ({:.0} µs)",
            overhead / 1e3,
            overhead / summarizer,
            summarizer / 1e3,
            overhead / insert,
            insert / 1e3
        );
    }
}
