//! strata at a year of history: the hot paths at 10,000, 100,000 and 1,000,000 messages, each
//! beside a baseline measured in the same run (issue 14).
//!
//! Fixtures are file-backed WAL databases built once through `Store::append` (fixed seed, fixed
//! clock) and cached under `target/tmp/scale-fixtures/`, keyed by size and schema version, so a
//! rerun only measures. Sizes above 100,000 are built only when `STRATA_BENCH_1M=1` is set
//! (about a minute or two of appends on this machine). The fixture text is a 40-word
//! vocabulary (every word in about 40% of the messages: the worst case for keyword ranking) and
//! every message has a synthetic unit vector (the scan costs what it would with real ones).
//!
//! ```sh
//! cargo bench --bench scale -- search       # memory_search at 100k, its parts and baselines
//! STRATA_BENCH_1M=1 cargo bench --bench scale -- grep
//! ```
//!
//! Criterion reports the mean; the median (p50) is in
//! `target/criterion/<group>/<bench>/new/estimates.json`. Needs the embedding assets
//! (`scripts/fetch-embed-assets.sh`) for the search group.

use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use strata_compactor::Outcome;
use strata_recall::{Embedder, RecallConfig, RecallSettings, ToolContext, call_tool};
use strata_seam::search::{CandidateQuery, HitKind, Scan, SearchFilter};
use strata_seam::{Conversations, Search};
use strata_store::Store;

#[path = "support/appends.rs"]
mod appends;
#[path = "support/fixtures.rs"]
mod fixtures;
#[path = "support/word_corpus.rs"]
mod word_corpus;

use fixtures::{Vectors, extractive_compactor, fixture, session_fixture};
use word_corpus::MODEL;

fn search(c: &mut Criterion) {
    let embedder = Embedder::load_default().expect("run scripts/fetch-embed-assets.sh first");
    let store = fixture(100_000, Vectors::Yes);
    let session = store.find_session("p-0").unwrap().unwrap();
    let ctx = ToolContext::new(store.clone(), session, embedder.clone(), RecallSettings::default());
    let question = "why did the billing migration fail in staging?";
    let vector = embedder.embed_query(question).unwrap();
    let raw = rusqlite::Connection::open(store.path()).unwrap();
    let words: Vec<String> = ["billing", "migration", "fail", "staging"].map(String::from).to_vec();

    let mut group = c.benchmark_group("search_100k");
    group.sample_size(20);
    group.bench_function("baseline_query_embedding", |b| b.iter(|| embedder.embed_query(question).unwrap()));
    group.bench_function("baseline_sqlite_vec_exact_knn_50", |b| {
        b.iter(|| store.embeddings().nearest(MODEL, HitKind::Message, "p", &vector, 50, Scan::Exact).unwrap())
    });
    let blob: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    group.bench_function("baseline_sqlite_vec_bits_knn_400", |b| {
        let mut stmt = raw
            .prepare(
                "SELECT rowid, distance FROM messages_vec
                 WHERE embedding_bits MATCH vec_quantize_binary(?1) AND k = 400 AND role = 'p'",
            )
            .unwrap();
        b.iter(|| stmt.query_map([&blob], |row| row.get::<_, i64>(0)).unwrap().count())
    });
    let rowids: Vec<i64> = {
        let mut stmt = raw
            .prepare(
                "SELECT rowid FROM messages_vec
                 WHERE embedding_bits MATCH vec_quantize_binary(?1) AND k = 400 AND role = 'p'",
            )
            .unwrap();
        stmt.query_map([&blob], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    };
    group.bench_function("baseline_sqlite_vec_float_lookups_400", |b| {
        let mut stmt = raw.prepare("SELECT embedding FROM messages_vec WHERE rowid = ?1").unwrap();
        b.iter(|| {
            rowids
                .iter()
                .map(|id| stmt.query_row([id], |row| row.get::<_, Vec<u8>>(0)).unwrap().len())
                .sum::<usize>()
        })
    });
    for candidates in [200, 400, 800] {
        group.bench_function(format!("knn_quantized_50_of_{candidates}"), |b| {
            b.iter(|| {
                store
                    .embeddings()
                    .nearest(MODEL, HitKind::Message, "p", &vector, 50, Scan::Quantized { candidates })
                    .unwrap()
            })
        });
    }
    let keywords_only = CandidateQuery {
        filter: SearchFilter { limit: 50, kinds: vec![HitKind::Message], ..SearchFilter::persona("p") },
        words: &words,
        vector: None,
        scan: Scan::Exact,
        frequency_cap: 1000,
    };
    group.bench_function("part_keyword_candidates_messages", |b| {
        b.iter(|| store.candidates(&keywords_only).unwrap())
    });
    group.bench_function("memory_search_question", |b| {
        b.iter(|| call_tool(&ctx, "memory_search", &json!({"query": question, "limit": 10})))
    });
    let exact = ToolContext::new(
        store.clone(),
        store.find_session("p-0").unwrap().unwrap(),
        embedder.clone(),
        RecallSettings::new(RecallConfig { quantized_candidates: 0, ..RecallConfig::default() }).unwrap(),
    );
    group.bench_function("memory_search_question_exact_scan", |b| {
        b.iter(|| call_tool(&exact, "memory_search", &json!({"query": question, "limit": 10})))
    });
    // The ranking before issue 39's sixth deliverable (no time, speaker, second-hop or
    // neighbour terms), beside it in the same run: what the second hop's read costs.
    let one_hop = ToolContext::new(
        store.clone(),
        store.find_session("p-0").unwrap().unwrap(),
        embedder.clone(),
        RecallSettings::new(RecallConfig {
            time_weight: 0.0,
            speaker_weight: 0.0,
            expansion_weight: 0.0,
            neighbour_weight: 0.0,
            ..RecallConfig::default()
        })
        .unwrap(),
    );
    group.bench_function("memory_search_question_one_hop", |b| {
        b.iter(|| call_tool(&one_hop, "memory_search", &json!({"query": question, "limit": 10})))
    });
    // The neighbour term alone off: what its pass over the candidates costs.
    let no_neighbour = ToolContext::new(
        store.clone(),
        store.find_session("p-0").unwrap().unwrap(),
        embedder.clone(),
        RecallSettings::new(RecallConfig { neighbour_weight: 0.0, ..RecallConfig::default() }).unwrap(),
    );
    group.bench_function("memory_search_question_no_neighbour", |b| {
        b.iter(|| call_tool(&no_neighbour, "memory_search", &json!({"query": question, "limit": 10})))
    });
    group.finish();
}

/// The sizes a group runs at: 10,000 and 100,000 messages, and 1,000,000 with
/// `STRATA_BENCH_1M=1`.
fn sizes() -> Vec<usize> {
    let mut sizes = vec![10_000, 100_000];
    if std::env::var_os("STRATA_BENCH_1M").is_some() {
        sizes.push(1_000_000);
    }
    sizes
}

fn grep(c: &mut Criterion) {
    let embedder = Embedder::load_default().expect("run scripts/fetch-embed-assets.sh first");
    let mut group = c.benchmark_group("grep");
    group.sample_size(20);
    for messages in sizes().into_iter().filter(|&n| n >= 100_000) {
        let store = fixture(messages, Vectors::No);
        let session = store.find_session("p-0").unwrap().unwrap();
        let ctx = ToolContext::new(store.clone(), session, embedder.clone(), RecallSettings::default());
        let raw = rusqlite::Connection::open(store.path()).unwrap();
        // Baselines: SQLite alone, no persona filter, excerpt, JSON or fencing. The newest 10
        // matches of the common word, and its best 10 by bm25 among every match.
        for (name, sql) in [
            (
                "baseline_bare_fts5_newest_10",
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"deploy\"' ORDER BY rowid DESC LIMIT 10",
            ),
            (
                "baseline_bare_fts5_bm25_10",
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"deploy\"' ORDER BY rank LIMIT 10",
            ),
        ] {
            group.bench_function(format!("{name}/{messages}"), |b| {
                let mut stmt = raw.prepare(sql).unwrap();
                b.iter(|| stmt.query_map([], |row| row.get::<_, i64>(0)).unwrap().count())
            });
        }
        for (name, query) in [
            ("rare_phrase", "\"rollback config\""),
            ("two_words", "postgres latency"),
            ("common_word", "deploy"),
        ] {
            group.bench_function(format!("memory_grep_{name}/{messages}"), |b| {
                b.iter(|| call_tool(&ctx, "memory_grep", &json!({"query": query, "limit": 10})))
            });
        }
    }
    group.finish();
}

fn append(c: &mut Criterion) {
    const BATCH: usize = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let messages = appends::first_messages(BATCH);
    let mut group = c.benchmark_group("append_1000");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(10);
    // Baselines: the same rows with plain rusqlite into a bare table, and into tables with one
    // full-text index each (the two strata keeps: trigram for grep, words for ranking; and the
    // trigram index without positions, `detail=none`, which cannot check phrases).
    for (name, schema, text) in [
        ("baseline_bare_table", "", "content"),
        (
            "baseline_trigram_fts5",
            "CREATE VIRTUAL TABLE f USING fts5(content, content = 'm', content_rowid = 'id',
                 tokenize = 'trigram case_sensitive 0 remove_diacritics 1');",
            "content",
        ),
        (
            "baseline_trigram_fts5_detail_none",
            "CREATE VIRTUAL TABLE f USING fts5(content, content = 'm', content_rowid = 'id', detail = none,
                 columnsize = 0, tokenize = 'trigram case_sensitive 0 remove_diacritics 1');",
            "content",
        ),
        (
            "baseline_word_fts5",
            "CREATE VIRTUAL TABLE f USING fts5(content, content = '', contentless_delete = 1,
                 tokenize = 'porter unicode61 remove_diacritics 2');",
            "role || ': ' || new.content",
        ),
    ] {
        let raw = appends::bare_table(&dir.path().join(format!("{name}.db")), schema, text);
        let mut seq = 0i64;
        group.bench_function(name, |b| b.iter(|| appends::insert_bare(&raw, &messages, &mut seq)));
    }
    // strata, into an empty database and into a copy of the 100,000-message fixture.
    let empty = Store::open(dir.path().join("strata.db")).unwrap();
    let copy = dir.path().join("strata-100000.db");
    let fixture_path = fixture(100_000, Vectors::No).path().to_path_buf();
    std::fs::copy(&fixture_path, &copy).unwrap();
    let grown = Store::open(&copy).unwrap();
    for (size, store) in [(0, &empty), (100_000, &grown)] {
        let session = store.session("bench", "default").unwrap();
        group.bench_function(format!("strata_store_append/{size}"), |b| {
            b.iter_batched(
                || messages.clone(),
                |messages| store.append(session.id, &messages).unwrap(),
                BatchSize::LargeInput,
            )
        });
        // The same, and then indexing them for search, which the append now does itself before
        // it returns (searches never write): the two measure the same work since issue 27.
        group.bench_function(format!("strata_store_append_then_index/{size}"), |b| {
            b.iter_batched(
                || messages.clone(),
                |messages| {
                    store.append(session.id, &messages).unwrap();
                    store.index_messages(usize::MAX >> 1).unwrap()
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// Compaction of a fresh session of 20,000 messages (and 200,000 with `STRATA_BENCH_1M=1`),
/// every chunk folded (`compact_rounds` until nothing is left), the extractive summarizer's own
/// share of each run printed beside it (the baseline: what the summarizer alone costs).
fn compact(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("compact_new_messages");
    group.sample_size(10).measurement_time(Duration::from_secs(30));
    let mut sizes = vec![20_000];
    if std::env::var_os("STRATA_BENCH_1M").is_some() {
        sizes.push(200_000);
    }
    for n in sizes {
        let template = session_fixture(n, false);
        let mut copies = 0u64;
        let mut summarizer_alone = Vec::new();
        let mut cpu = Vec::new();
        group.bench_function(format!("extractive/{n}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    copies += 1;
                    let path = work.path().join(format!("copy-{copies}.db"));
                    std::fs::copy(&template, &path).unwrap();
                    let store = Store::open(&path).unwrap();
                    let session = store.find_session("s").unwrap().unwrap().id;
                    let (compactor, summarizer) = extractive_compactor(store);
                    let (start, cpu_start) = (Instant::now(), cpu_time());
                    runtime.block_on(compactor.compact_rounds(session, u32::MAX)).unwrap();
                    total += start.elapsed();
                    if let (Some(before), Some(after)) = (cpu_start, cpu_time()) {
                        cpu.push(after - before);
                    }
                    summarizer_alone.push(summarizer.total());
                    drop(compactor);
                    for suffix in ["", "-wal", "-shm"] {
                        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                    }
                }
                total
            })
        });
        summarizer_alone.sort();
        if let Some(median) = summarizer_alone.get(summarizer_alone.len() / 2) {
            eprintln!(
                "compact {n}: the extractive summarizer alone took {:.2} s of a run (median)",
                median.as_secs_f64()
            );
        }
        cpu.sort();
        if let Some(median) = cpu.get(cpu.len() / 2) {
            eprintln!(
                "compact {n}: {:.2} s of CPU time per run, every thread (median)",
                median.as_secs_f64()
            );
        }
    }
    group.finish();
}

/// CPU time this process has used so far, every thread, user and system (Linux's
/// `/proc/self/stat`, in its fixed 1/100 s ticks; `None` elsewhere). Unlike the wall clock,
/// other processes on a shared machine barely move it, so growth between two sizes shows
/// through their load.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces: the
    // state is the first, utime and stime the 12th and 13th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// `prepare_context` of a session with nothing to compact (a compaction call that finds
/// nothing, then the assembly) at 10,000 and 100,000 messages (and 1,000,000 with
/// `STRATA_BENCH_1M=1`), beside bare SQLite reading the session's newest 50 messages.
fn prepare_context(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut group = c.benchmark_group("prepare_context_nothing_to_compact");
    group.sample_size(30);
    for n in sizes() {
        let path = session_fixture(n, true);
        let store = Store::open(&path).unwrap();
        let session = store.find_session("s").unwrap().unwrap().id;
        let (compactor, _) = extractive_compactor(store.clone());
        let before = store.rows_read();
        let outcome = runtime.block_on(compactor.compact(session)).unwrap();
        assert!(!matches!(outcome, Outcome::Compacted { .. }), "{outcome:?}");
        runtime.block_on(compactor.assemble(session, chrono::Utc::now())).unwrap();
        eprintln!("prepare_context at {n} messages reads {} rows", store.rows_read() - before);
        group.bench_function(format!("compact_and_assemble/{n}"), |b| {
            b.iter(|| {
                runtime.block_on(async {
                    compactor.compact(session).await.unwrap();
                    compactor.assemble(session, chrono::Utc::now()).await.unwrap()
                })
            })
        });
        let raw = rusqlite::Connection::open(&path).unwrap();
        group.bench_function(format!("baseline_bare_newest_50/{n}"), |b| {
            let mut stmt = raw
                .prepare("SELECT id, content FROM messages WHERE session_id = ?1 ORDER BY seq DESC LIMIT 50")
                .unwrap();
            b.iter(|| stmt.query_map([session.0], |row| row.get::<_, i64>(0)).unwrap().count())
        });
    }
    group.finish();
}

criterion_group!(benches, search, grep, append, compact, prepare_context);
criterion_main!(benches);
