//! SQLite beside PostgreSQL at 100,000 messages (issue 22): the same calls through the storage
//! seam on both backends, each beside a bare database operation measured in the same run.
//!
//! The fixture is `word_corpus::fill_with` on each backend (100,000 messages of persona `p`,
//! 10,000 of `q`, each with a realistic vector drawn around the real model's vectors of the
//! demo week, the same on both: `support/real_vectors.rs`): SQLite's file is cached under
//! `target/tmp/`, the PostgreSQL database (`strata_bench_100000_v<FIXTURE>`) on the test
//! server that `scripts/postgres.sh` starts (or `STRATA_TEST_POSTGRES`), kept there between
//! runs. Before the timings, the recall@10 of each backend's nearest rows against an exact
//! scan is printed for 40 held-out questions.
//!
//! The engine's two calls at scale come from the scale bench's fixtures, copied into
//! PostgreSQL with `strata copy`'s code: `prepare_context` on a compacted session of 100,000
//! messages, and compacting a session of 20,000 new messages (a fresh copy each iteration).
//!
//! ```sh
//! cargo bench --bench backends              # every figure, both backends
//! cargo bench --bench backends -- postgres  # one backend
//! ```
//!
//! Criterion reports the mean; the median (p50) is in
//! `target/criterion/backends_100k/<bench>/new/estimates.json`.

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rand_chacha::ChaCha8Rng;
use strata_compactor::{BeforeAssembly, Compactor, CompactorConfig, ExtractiveSummarizer};
use strata_pg::PgStore;
use strata_recall::tools::{MemoryGrepArgs, MemorySearchArgs, Scope};
use strata_recall::{EmbedderState, RecallConfig};
use strata_seam::search::{CandidateQuery, HitKind, Scan, SearchFilter, TextQuery};
use strata_seam::{Backend, SharedBackend};

#[path = "support/appends.rs"]
mod appends;
#[allow(dead_code, reason = "the extractive compactor over a Store is the scale bench's")]
#[path = "support/fixtures.rs"]
mod fixtures;
#[path = "support/real_vectors.rs"]
mod real_vectors;
#[path = "support/word_corpus.rs"]
mod word_corpus;

const MESSAGES: usize = 100_000;

fn server() -> String {
    if let Ok(url) = std::env::var("STRATA_TEST_POSTGRES") {
        return url;
    }
    let output = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/postgres.sh"))
        .arg("url")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// The version of the PostgreSQL fixtures' contents: opening one migrates its schema, so a new
/// schema does not rebuild them (15 minutes); a change to what they hold does.
const FIXTURE: u32 = 2;

/// The PostgreSQL fixture, built on first use; a build cut short is dropped and redone.
fn pg_fixture(server: &str, bases: &[Vec<f32>]) -> (PgStore, postgres::Client) {
    let name = format!("strata_bench_{MESSAGES}_v{FIXTURE}");
    let url = format!("{}/{name}", server.rsplit_once('/').unwrap().0);
    let mut admin = postgres::Client::connect(server, postgres::NoTls).unwrap();
    let ready = postgres::Client::connect(&url, postgres::NoTls)
        .ok()
        .and_then(|mut client| client.query_opt("SELECT 1 FROM bench_ready", &[]).ok().flatten())
        .is_some();
    if !ready {
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let started = Instant::now();
        let mut draw = |rng: &mut ChaCha8Rng| real_vectors::around(bases, rng);
        word_corpus::fill_with(&PgStore::open(&url).unwrap(), MESSAGES, Some(&mut draw));
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        // VACUUM runs outside a transaction: a statement of its own.
        client.batch_execute("VACUUM ANALYZE").unwrap();
        client.batch_execute("CREATE TABLE bench_ready (); INSERT INTO bench_ready DEFAULT VALUES").unwrap();
        eprintln!("built {name} in {:.1} s", started.elapsed().as_secs_f64());
    }
    let client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    (PgStore::open(&url).unwrap(), client)
}

/// Prints the share of the exact 10 nearest messages (SQLite's exact scan) that each
/// backend's nearest search as `memory_search` runs it returns: SQLite's 1-bit first pass
/// with re-scoring, PostgreSQL's HNSW walk with re-scoring.
fn report_recall(sqlite: &strata_store::Store, postgres: &PgStore, questions: &[Vec<f32>]) {
    let scan = RecallConfig::default().vector_scan();
    let nearest = |backend: &dyn Backend, vector: &[f32], scan: Scan| -> Vec<(String, i64)> {
        let read = backend
            .candidates(&CandidateQuery {
                filter: SearchFilter {
                    limit: 50,
                    kinds: vec![HitKind::Message],
                    ..SearchFilter::persona("p")
                },
                words: &[],
                vector: Some((word_corpus::MODEL, vector)),
                scan,
                frequency_cap: 2_000,
            })
            .unwrap();
        read.semantic
            .into_iter()
            .map(|(hit, _)| (hit.session.unwrap_or_default(), hit.seq.unwrap_or(-1)))
            .collect()
    };
    let (mut sqlite_found, mut postgres_found) = (0, 0);
    for vector in questions {
        let exact: Vec<(String, i64)> = nearest(sqlite, vector, Scan::Exact).into_iter().take(10).collect();
        let share = |found: Vec<(String, i64)>| {
            exact.iter().filter(|row| found[..found.len().min(10)].contains(row)).count()
        };
        sqlite_found += share(nearest(sqlite, vector, scan));
        postgres_found += share(nearest(postgres, vector, scan));
    }
    let total = (questions.len() * 10) as f64;
    eprintln!(
        "recall@10 against the exact scan, {} questions: SQLite {:.1}%, PostgreSQL {:.1}%",
        questions.len(),
        100.0 * sqlite_found as f64 / total,
        100.0 * postgres_found as f64 / total
    );
}

fn backends(c: &mut Criterion) {
    let embedder = strata_recall::Embedder::load_default().expect("run scripts/fetch-embed-assets.sh first");
    let question = "why did the billing migration fail in staging?";
    let vector = embedder.embed_query(question).unwrap();
    let state = EmbedderState::from(embedder.clone());
    let words: Vec<String> = ["billing", "migration", "fail", "staging"].map(String::from).to_vec();
    let config = RecallConfig::default();
    let (bases, queries) = real_vectors::bases_and_queries();
    let bases = real_vectors::embed_bases(&embedder, &bases);
    let sqlite =
        strata_store::Store::open(fixtures::cached_fixture(&format!("realvec-{MESSAGES}"), |store| {
            let mut draw = |rng: &mut ChaCha8Rng| real_vectors::around(&bases, rng);
            word_corpus::fill_with(store, MESSAGES, Some(&mut draw));
        }))
        .unwrap();
    let server = server();
    let (postgres, mut raw) = pg_fixture(&server, &bases);
    let questions: Vec<Vec<f32>> = queries.iter().map(|q| embedder.embed_query(q).unwrap()).collect();
    report_recall(&sqlite, &postgres, &questions);
    let appended = appends::first_messages(1_000);

    let mut group = c.benchmark_group("backends_100k");
    group.sample_size(20);
    // A new question each iteration: the embedder remembers the vectors of questions it saw.
    let mut asked = 0u64;
    let mut fresh_question = move || {
        asked += 1;
        format!("{question} (take {asked})")
    };
    group.bench_function("baseline_query_embedding", |b| {
        b.iter_batched(
            &mut fresh_question,
            |text| embedder.embed_query(&text).unwrap(),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("baseline_postgres_round_trip", |b| {
        b.iter(|| raw.query_one("SELECT 1", &[]).unwrap())
    });
    group.bench_function("baseline_postgres_trigram_like", |b| {
        b.iter(|| {
            raw.query(
                "SELECT id FROM messages WHERE persona = 'p' AND folded LIKE '%billing%' ORDER BY id DESC LIMIT 256",
                &[],
            )
            .unwrap()
        })
    });
    let literal = format!("{:?}", vector);
    group.bench_function("baseline_postgres_hnsw_knn_50", |b| {
        let sql = format!(
            "SELECT item_id FROM embeddings WHERE kind = 'message' AND persona = 'p'
             ORDER BY embedding::vector(384) <=> '{literal}'::vector(384) LIMIT 50"
        );
        b.iter(|| raw.query(&sql, &[]).unwrap())
    });
    let backends: [(&str, &dyn Backend); 2] = [("sqlite", &sqlite), ("postgres", &postgres)];
    for (name, backend) in backends {
        let scope = Scope::persona("p");
        group.bench_function(format!("{name}/memory_grep"), |b| {
            let args = MemoryGrepArgs {
                query: "billing migration".into(),
                limit: Some(10),
                start_time: None,
                end_time: None,
                include_in_context: None,
                offset: None,
            };
            b.iter(|| strata_recall::tools::grep(backend, &scope, &config, &args).unwrap())
        });
        group.bench_function(format!("{name}/store_grep"), |b| {
            let query = TextQuery::parse("billing migration").unwrap();
            b.iter(|| backend.grep(&query, &SearchFilter::persona("p")).unwrap())
        });
        group.bench_function(format!("{name}/candidates"), |b| {
            b.iter(|| {
                backend
                    .candidates(&CandidateQuery {
                        filter: SearchFilter { limit: 50, ..SearchFilter::persona("p") },
                        words: &words,
                        vector: Some((word_corpus::MODEL, &vector)),
                        scan: Scan::Exact,
                        frequency_cap: 2_000,
                    })
                    .unwrap()
            })
        });
        group.bench_function(format!("{name}/memory_search_with_query_embedding"), |b| {
            let args = |query| MemorySearchArgs {
                query,
                limit: Some(10),
                start_time: None,
                end_time: None,
                include_in_context: None,
            };
            b.iter_batched(
                || args(fresh_question()),
                |args| strata_recall::tools::search(backend, &scope, &config, &state, &args).unwrap(),
                BatchSize::PerIteration,
            )
        });
    }
    // Appends go to fresh databases, so that the searches above find the fixtures as built on
    // every run.
    group.throughput(Throughput::Elements(1_000));
    let dir = tempfile::tempdir().unwrap();
    let append_name = format!("strata_bench_append_{}", std::process::id());
    let mut admin = postgres::Client::connect(&server, postgres::NoTls).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {append_name}")).unwrap();
    let append_url = format!("{}/{append_name}", server.rsplit_once('/').unwrap().0);
    let fresh_sqlite = strata_store::Store::open(dir.path().join("append.db")).unwrap();
    let fresh_postgres = PgStore::open(&append_url).unwrap();
    let fresh: [(&str, &dyn Backend); 2] = [("sqlite", &fresh_sqlite), ("postgres", &fresh_postgres)];
    for (name, backend) in fresh {
        let mut round = 0;
        group.bench_function(format!("{name}/append_1000"), |b| {
            b.iter_batched(
                || {
                    round += 1;
                    backend.session(&format!("append-{round}"), "bench").unwrap()
                },
                |session| backend.append(session.id, &appended).unwrap(),
                BatchSize::PerIteration,
            )
        });
    }
    drop(fresh_postgres);
    let bare = appends::bare_table(&dir.path().join("bare.db"), "", "");
    let mut seq = 0;
    group.bench_function("baseline_sqlite_bare_insert_1000", |b| {
        b.iter(|| appends::insert_bare(&bare, &appended, &mut seq))
    });
    raw.batch_execute(
        "CREATE TEMP TABLE bare_m (id BIGSERIAL PRIMARY KEY, session BIGINT, seq BIGINT, role TEXT,
                                   content TEXT, created_at DOUBLE PRECISION, token_count INTEGER)",
    )
    .unwrap();
    group.bench_function("baseline_postgres_bare_insert_1000", |b| {
        b.iter(|| {
            let mut tx = raw.transaction().unwrap();
            let insert = tx.prepare("INSERT INTO bare_m(session, seq, role, content, created_at, token_count) VALUES (1, $1, $2, $3, $4, $5)").unwrap();
            for message in &appended {
                seq += 1;
                let at = message.created_at.timestamp_micros() as f64 / 1e6;
                tx.execute(&insert, &[&seq, &message.role.as_str(), &message.content, &at, &(message.token_count as i32)]).unwrap();
            }
            tx.commit().unwrap();
        })
    });
    // The same rows into a table with only the two text indexes a message needs (trigrams of
    // its folded text for grep, its words for ranking): what those indexes cost alone.
    raw.batch_execute(
        "CREATE TEMP TABLE indexed_m (id BIGSERIAL PRIMARY KEY, session BIGINT, seq BIGINT, role TEXT,
                                      content TEXT, folded TEXT, created_at DOUBLE PRECISION, token_count INTEGER,
                                      words TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', role || ': ' || content)) STORED);
         CREATE INDEX ON indexed_m USING gin (folded gin_trgm_ops);
         CREATE INDEX ON indexed_m USING gin (words);",
    )
    .unwrap();
    let folded: Vec<String> =
        appended.iter().map(|message| strata_seam::backend::fold(&message.content)).collect();
    group.bench_function("baseline_postgres_text_indexed_insert_1000", |b| {
        b.iter(|| {
            let mut tx = raw.transaction().unwrap();
            let insert = tx.prepare("INSERT INTO indexed_m(session, seq, role, content, folded, created_at, token_count) VALUES (1, $1, $2, $3, $4, $5, $6)").unwrap();
            for (message, folded) in appended.iter().zip(&folded) {
                seq += 1;
                let at = message.created_at.timestamp_micros() as f64 / 1e6;
                tx.execute(&insert, &[&seq, &message.role.as_str(), &message.content, folded, &at, &(message.token_count as i32)]).unwrap();
            }
            tx.commit().unwrap();
        })
    });
    group.finish();
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {append_name} WITH (FORCE)")).unwrap();
}

/// A database on the server holding a copy of the SQLite file at `path`, made on first use.
fn pg_copy(server: &str, name: &str, path: &std::path::Path) -> String {
    let url = format!("{}/{name}", server.rsplit_once('/').unwrap().0);
    let done = postgres::Client::connect(&url, postgres::NoTls)
        .ok()
        .and_then(|mut client| {
            client.query_opt("SELECT 1 FROM strata_copy WHERE finished_at IS NOT NULL", &[]).ok().flatten()
        })
        .is_some();
    if !done {
        let mut admin = postgres::Client::connect(server, postgres::NoTls).unwrap();
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let started = Instant::now();
        let source = strata_store::Store::open(path).unwrap();
        PgStore::open(&url)
            .unwrap()
            .copy_from(&source.dump(), &path.display().to_string(), |_, _| {})
            .unwrap();
        postgres::Client::connect(&url, postgres::NoTls).unwrap().batch_execute("VACUUM ANALYZE").unwrap();
        eprintln!("copied {} into {name} in {:.1} s", path.display(), started.elapsed().as_secs_f64());
    }
    url
}

fn extractive(store: SharedBackend) -> Compactor {
    let config = CompactorConfig::default();
    let summarizer = Arc::new(ExtractiveSummarizer::new(config.token_counter()));
    Compactor::new(store, config, summarizer).unwrap()
}

/// `prepare_context` (a compaction check that finds nothing, in the assembly's snapshot) of a compacted
/// session of 100,000 messages, and compacting 20,000 new messages, on both backends, beside a
/// bare read of the session's newest 50 messages on each.
fn engine(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let server = server();
    let compacted = fixtures::session_fixture(MESSAGES, true);
    let pg_url = pg_copy(&server, &format!("strata_bench_compacted_{MESSAGES}_v{FIXTURE}"), &compacted);
    let mut group = c.benchmark_group("engine_100k");
    group.sample_size(30);
    let backends: [(&str, SharedBackend); 2] = [
        ("sqlite", strata_store::Store::open(&compacted).unwrap().into()),
        ("postgres", Arc::new(PgStore::open(&pg_url).unwrap())),
    ];
    for (name, backend) in backends {
        let session = backend.find_session("s").unwrap().unwrap().id;
        let compactor = extractive(backend);
        group.bench_function(format!("{name}/prepare_context"), |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let now = chrono::Utc::now();
                    match compactor.compact_before_assembly(session, now).await.unwrap() {
                        BeforeAssembly::Read { snapshot, .. } => {
                            compactor.assembler().lay_out(&snapshot, None).unwrap()
                        }
                        BeforeAssembly::Compacted(_) => compactor.assemble(session, now).await.unwrap(),
                    }
                })
            })
        });
    }
    let sqlite = rusqlite::Connection::open(&compacted).unwrap();
    group.bench_function("baseline_sqlite_newest_50", |b| {
        let mut stmt = sqlite
            .prepare("SELECT id, content FROM messages WHERE session_id = 1 ORDER BY seq DESC LIMIT 50")
            .unwrap();
        b.iter(|| stmt.query_map([], |row| row.get::<_, i64>(0)).unwrap().count())
    });
    let mut pg = postgres::Client::connect(&pg_url, postgres::NoTls).unwrap();
    group.bench_function("baseline_postgres_newest_50", |b| {
        b.iter(|| {
            pg.query("SELECT id, content FROM messages WHERE session_id = 1 ORDER BY seq DESC LIMIT 50", &[])
                .unwrap()
        })
    });
    group.finish();

    // Compacting 20,000 new messages: each iteration a fresh copy of the uncompacted session.
    let mut group = c.benchmark_group("engine_compact_20k");
    group.sample_size(10).measurement_time(std::time::Duration::from_secs(60));
    let template = fixtures::session_fixture(20_000, false);
    let work = tempfile::tempdir().unwrap();
    let mut admin = postgres::Client::connect(&server, postgres::NoTls).unwrap();
    let mut copies = 0u64;
    for name in ["sqlite", "postgres"] {
        group.bench_function(format!("{name}/compact_20000"), |b| {
            b.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iters {
                    copies += 1;
                    let path = work.path().join(format!("copy-{copies}.db"));
                    std::fs::copy(&template, &path).unwrap();
                    let database = format!("strata_bench_compact_{}_{copies}", std::process::id());
                    let store: SharedBackend = if name == "sqlite" {
                        strata_store::Store::open(&path).unwrap().into()
                    } else {
                        admin.batch_execute(&format!("CREATE DATABASE {database}")).unwrap();
                        let url = format!("{}/{database}", server.rsplit_once('/').unwrap().0);
                        let target = PgStore::open(&url).unwrap();
                        target
                            .copy_from(
                                &strata_store::Store::open(&path).unwrap().dump(),
                                &database,
                                |_, _| {},
                            )
                            .unwrap();
                        Arc::new(target)
                    };
                    let session = store.find_session("s").unwrap().unwrap().id;
                    let compactor = extractive(store);
                    let start = Instant::now();
                    runtime.block_on(compactor.compact_rounds(session, u32::MAX)).unwrap();
                    total += start.elapsed();
                    drop(compactor);
                    if name == "postgres" {
                        admin.batch_execute(&format!("DROP DATABASE {database} WITH (FORCE)")).unwrap();
                    }
                    for suffix in ["", "-wal", "-shm"] {
                        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                    }
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, backends, engine);
criterion_main!(benches);
