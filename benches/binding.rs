//! The Rust calls the Python binding wraps, through `strata::blocking` (what the binding calls),
//! on the fixtures `benches/binding.py` measures from Python in the same run (`make
//! bench-python` runs both and prints the ratios):
//!
//! - `prepare_context` of a 100,000-message session with nothing left to compact, with the
//!   recalled block (the default) and without it;
//! - `append_many` of 1,000 messages of the demo's conversation, into a fresh database, read
//!   from the JSON objects a bot hands over (`Incoming::from_json`, as the bindings do);
//! - `call_tool("memory_search", ...)` over 100,000 vectors, query embedding included;
//! - `prepare_context` of a session among those 100,000 messages, the recalled block off and
//!   on (what proactive recall adds: the request's embedding and the search of the persona's
//!   whole history), Rust only.
//!
//! ```sh
//! cargo bench --bench binding
//! ```

use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;
use strata::blocking::Engine;
use strata::{ChatMessage, Config, Incoming};

// Shared with the scale bench, which uses the parts this one does not.
#[allow(dead_code)]
#[path = "support/appends.rs"]
mod appends;
#[allow(dead_code)]
#[path = "support/fixtures.rs"]
mod fixtures;
#[path = "support/word_corpus.rs"]
mod word_corpus;

use fixtures::{Vectors, fixture, session_fixture};

/// The paths `benches/binding.py` reads, so both sides measure the same files.
fn announce(name: &str, path: &std::path::Path) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("binding");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), path.display().to_string()).unwrap();
}

fn prepare_context(c: &mut Criterion) {
    let path = session_fixture(100_000, true);
    announce("prepare_context", &path);
    let engine = Engine::open(&path, Config::default()).unwrap();
    let session = engine.session("s", "default").unwrap();
    let mut group = c.benchmark_group("binding");
    group.sample_size(30);
    group.bench_function("rust/prepare_context/100000", |b| b.iter(|| session.prepare_context().unwrap()));
    // Without the recalled block's search the call is mostly the context's conversion: the
    // stricter test of what a binding adds.
    let mut config = Config::default();
    config.recall.proactive = false;
    let engine = Engine::open(&path, config).unwrap();
    let session = engine.session("s", "default").unwrap();
    group.bench_function("rust/prepare_context/100000/no_recall", |b| {
        b.iter(|| session.prepare_context().unwrap())
    });
    group.finish();
}

/// The demo's first 1,000 messages as a bot hands them over: JSON objects, the keys the
/// Python and Node benches send (`role`, `content`, `name`, `tool_calls`, `tool_call_id`,
/// `timestamp`), so all three take the same admission path (a tool call's or result's body is
/// kept as sent where the columns would not give it back).
fn thousand() -> Vec<serde_json::Value> {
    appends::first_messages(1_000)
        .into_iter()
        .map(|message| {
            let mut object = json!({
                "role": message.role.as_str(),
                "content": message.content,
                "timestamp": message.created_at.to_rfc3339(),
            });
            let keys = [
                ("name", message.name.map(serde_json::Value::String)),
                ("tool_calls", message.tool_calls),
                ("tool_call_id", message.tool_call_id.map(serde_json::Value::String)),
            ];
            for (key, value) in keys {
                if let Some(value) = value {
                    object[key] = value;
                }
            }
            object
        })
        .collect()
}

fn append_many(c: &mut Criterion) {
    let mut group = c.benchmark_group("binding");
    group.sample_size(20).measurement_time(Duration::from_secs(15));
    group.bench_function("rust/append_many/1000", |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().unwrap();
                let engine = Engine::open(dir.path().join("append.db"), Config::default()).unwrap();
                let session = engine.session("s", "default").unwrap();
                (dir, engine, session, thousand())
            },
            // The database and its directory are handed back, so they are dropped untimed.
            |(dir, engine, session, messages)| {
                let incoming = messages.iter().map(|message| Incoming::from_json(message).unwrap()).collect();
                (session.append_many(incoming).unwrap(), session, engine, dir)
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn memory_search(c: &mut Criterion) {
    let store = fixture(100_000, Vectors::Yes);
    announce("memory_search", store.path());
    let engine = Engine::open(store.path(), Config::default()).unwrap();
    let session = engine.session("p-0", "p").unwrap();
    let arguments = json!({"query": "deploy billing service", "limit": 10});
    assert!(session.call_tool("memory_search", arguments.clone()).get("error").is_none());
    let mut group = c.benchmark_group("binding");
    group.sample_size(30);
    group.bench_function("rust/memory_search/100000", |b| {
        b.iter(|| session.call_tool("memory_search", arguments.clone()))
    });
    group.finish();
}

fn recalled(c: &mut Criterion) {
    let store = fixture(100_000, Vectors::Yes);
    // A copy: the first call compacts the session, and the cached fixture must stay as built.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recalled.db");
    std::fs::copy(store.path(), &path).unwrap();
    drop(store);
    let mut group = c.benchmark_group("recalled");
    group.sample_size(30);
    for proactive in [false, true] {
        let mut config = Config::default();
        config.recall.proactive = proactive;
        let engine = Engine::open(&path, config).unwrap();
        // Loaded, as in a bot that has served a request.
        assert!(engine.engine().embedder().get().is_ok());
        let session = engine.session("p-0", "p").unwrap();
        if !proactive {
            session.append(ChatMessage::user("How did we deploy the billing service last time?")).unwrap();
        }
        let warm = session.prepare_context().unwrap();
        assert_eq!(warm.context.recalled.is_some(), proactive);
        let name = if proactive { "prepare_context/100000/on" } else { "prepare_context/100000/off" };
        group.bench_function(name, |b| b.iter(|| session.prepare_context().unwrap()));
    }
    group.finish();
}

criterion_group!(benches, prepare_context, append_many, memory_search, recalled);
criterion_main!(benches);
