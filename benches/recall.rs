//! Recall speed on a file-backed WAL database holding 100,000 messages of one persona (plus
//! 10,000 of another, so the persona filter has work to do):
//!
//! - `embed/sentences_32`: embedding throughput of the real model (all-MiniLM-L6-v2 int8),
//!   256 chat-like sentences per iteration, batches of 32 sorted by length.
//! - `memory_grep/*`: the tool call end to end (JSON in, JSON out), rare and common words.
//! - `memory_search/*`: the tool call end to end, including the query's embedding by the real
//!   model, over 100,000 stored vectors (synthetic: random unit vectors, so the vector scan
//!   costs what it would with real ones).
//!
//! Criterion reports the mean; the median (p50) is in
//! `target/criterion/<group>/<bench>/new/estimates.json`. Needs the embedding assets
//! (`scripts/fetch-embed-assets.sh`).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use strata_recall::{Embedder, RecallConfig, RecallSettings, ToolContext, call_tool};
use strata_seam::search::Scan;
use strata_seam::{Conversations, Maintenance};
use strata_store::Store;

#[path = "support/word_corpus.rs"]
mod word_corpus;

use word_corpus::MODEL;

fn recall(c: &mut Criterion) {
    let embedder = Embedder::load_default().expect("run scripts/fetch-embed-assets.sh first");

    let texts = word_corpus::sentences(7, 256);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut group = c.benchmark_group("embed");
    group.throughput(Throughput::Elements(texts.len() as u64));
    group.sample_size(10);
    group.bench_function("sentences_32", |b| b.iter(|| embedder.embed_sorted(&texts, 32).unwrap()));
    group.finish();

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("recall.db")).unwrap();
    let started = std::time::Instant::now();
    word_corpus::fill(&store, 100_000, true);
    eprintln!(
        "built {} messages with vectors in {:.1} s",
        store.stats().unwrap().messages,
        started.elapsed().as_secs_f64()
    );
    let session = store.find_session("p-0").unwrap().unwrap();
    let ctx = ToolContext::new(store.clone(), session, embedder.clone(), RecallSettings::default());
    let check = |answer: serde_json::Value| {
        assert!(answer.get("error").is_none(), "{answer}");
        answer
    };

    let mut group = c.benchmark_group("memory_grep");
    group.sample_size(30);
    // Baseline: the bare FTS5 query for the common word, best 10 by bm25, with no persona
    // filter, snippets, JSON or fencing: what SQLite alone needs.
    let raw = rusqlite::Connection::open(store.path()).unwrap();
    group.bench_function("baseline_bare_fts5_common_word", |b| {
        b.iter(|| {
            let mut stmt = raw
                .prepare_cached("SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"deploy\"' ORDER BY rank LIMIT 10")
                .unwrap();
            stmt.query_map([], |row| row.get::<_, i64>(0)).unwrap().count()
        })
    });
    for (name, query) in
        [("rare_phrase", "\"rollback config\""), ("two_words", "postgres latency"), ("common_word", "deploy")]
    {
        group.bench_function(name, |b| {
            b.iter(|| check(call_tool(&ctx, "memory_grep", &json!({"query": query, "limit": 10}))))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("memory_search");
    group.sample_size(20);
    // Baselines: the two costs a search cannot avoid, measured alone.
    let question = "why did the billing migration fail in staging?";
    group.bench_function("baseline_query_embedding", |b| b.iter(|| embedder.embed_query(question).unwrap()));
    let vector = embedder.embed_query(question).unwrap();
    group.bench_function("baseline_vector_knn_50", |b| {
        b.iter(|| {
            store
                .embeddings()
                .nearest(MODEL, strata_seam::search::HitKind::Message, "p", &vector, 50, Scan::Exact)
                .unwrap()
        })
    });
    group.bench_function("vector_knn_50_quantized", |b| {
        b.iter(|| {
            store
                .embeddings()
                .nearest(
                    MODEL,
                    strata_seam::search::HitKind::Message,
                    "p",
                    &vector,
                    50,
                    Scan::Quantized { candidates: 400 },
                )
                .unwrap()
        })
    });
    for (name, query) in
        [("question", "why did the billing migration fail in staging?"), ("short", "refund queue")]
    {
        group.bench_function(name, |b| {
            b.iter(|| check(call_tool(&ctx, "memory_search", &json!({"query": query, "limit": 10}))))
        });
    }
    // The same question with the 1-bit first pass (400 chunks re-scored exactly).
    let quantized = ToolContext::new(
        store.clone(),
        store.find_session("p-0").unwrap().unwrap(),
        embedder.clone(),
        RecallSettings::new(RecallConfig { quantized_candidates: 400, ..RecallConfig::default() }).unwrap(),
    );
    group.bench_function("question_quantized", |b| {
        b.iter(|| {
            check(call_tool(
                &quantized,
                "memory_search",
                &json!({"query": "why did the billing migration fail in staging?", "limit": 10}),
            ))
        })
    });
    group.finish();
}

criterion_group!(benches, recall);
criterion_main!(benches);
