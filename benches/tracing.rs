//! What strata's spans cost (issue 40 item 4): the same calls with tracing off (no subscriber,
//! the default) and with every span exported by OTLP/HTTP to a collector on 127.0.0.1, in one
//! process, off first (a global subscriber cannot be taken back):
//!
//! - `prepare_context` of a 100,000-message session with nothing left to compact (the binding
//!   bench's fixture), the cheapest call that opens a span;
//! - `call_tool("memory_grep", ...)` on it, one `execute_tool` span and its `search_memory`;
//! - one disabled span, entered and left, which is all an instrumented call pays when off.
//!
//! Also prints how many spans each call opened, counted by a layer beside the exporter, so the
//! cost when off is the disabled span's times that count.
//!
//! ```sh
//! cargo bench --bench tracing
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use strata::Config;
use strata::blocking::{Engine, Session};
use strata::otel::Telemetry;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[allow(dead_code)]
#[path = "support/appends.rs"]
mod appends;
#[allow(dead_code)]
#[path = "support/fixtures.rs"]
mod fixtures;
#[allow(dead_code)]
#[path = "support/word_corpus.rs"]
mod word_corpus;

/// Counts the spans opened, whatever their level.
#[derive(Clone, Default)]
struct SpanCount(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SpanCount {
    fn on_new_span(&self, _: &tracing::span::Attributes<'_>, _: &tracing::span::Id, _: Context<'_, S>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The session the calls run on, and the `memory_grep` arguments (words the generated week
/// holds, so the search reads rows).
fn session(engine: &Engine) -> (Session, serde_json::Value) {
    let session = engine.session("s", "default").unwrap();
    let grep = json!({"query": "billing migration", "limit": 10});
    assert!(session.call_tool("memory_grep", grep.clone()).get("error").is_none());
    (session, grep)
}

fn calls(c: &mut Criterion, engine: &Engine, mode: &str) {
    let (session, grep) = session(engine);
    let mut group = c.benchmark_group("tracing");
    group.sample_size(30);
    group.bench_function(format!("prepare_context/100000/{mode}"), |b| {
        b.iter(|| session.prepare_context().unwrap())
    });
    group.bench_function(format!("memory_grep/100000/{mode}"), |b| {
        b.iter(|| session.call_tool("memory_grep", grep.clone()))
    });
    group.finish();
}

fn off(c: &mut Criterion) {
    let engine = Engine::open(fixtures::session_fixture(100_000, true), Config::default()).unwrap();
    calls(c, &engine, "off");
    let mut group = c.benchmark_group("tracing");
    group.bench_function("one_disabled_span", |b| {
        b.iter(|| {
            let span = tracing::info_span!("execute_tool", gen_ai.tool.name = "memory_grep");
            let _entered = span.enter();
        })
    });
    group.finish();
}

fn exported(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let collector = runtime.block_on(async {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/traces"))
            .respond_with(ResponseTemplate::new(200).insert_header("content-type", "application/x-protobuf"))
            .mount(&server)
            .await;
        server
    });
    let telemetry = Telemetry::to_endpoint(&format!("{}/v1/traces", collector.uri())).unwrap();
    let count = SpanCount::default();
    tracing_subscriber::registry().with(telemetry.layer()).with(count.clone()).init();

    let engine = Engine::open(fixtures::session_fixture(100_000, true), Config::default()).unwrap();
    let (session, grep) = session(&engine);
    let spans = |call: &dyn Fn()| {
        let before = count.0.load(Ordering::Relaxed);
        call();
        count.0.load(Ordering::Relaxed) - before
    };
    eprintln!("prepare_context: {} spans a call", spans(&|| drop(session.prepare_context().unwrap())));
    eprintln!(
        "memory_grep: {} spans a call",
        spans(&|| drop(session.call_tool("memory_grep", grep.clone())))
    );
    drop(session);
    calls(c, &engine, "exported");
    telemetry.shutdown().unwrap();
    let exports = runtime.block_on(collector.received_requests()).unwrap_or_default().len();
    assert!(exports > 0, "the collector received no export");
    eprintln!("the collector received {exports} exports");
}

criterion_group!(benches, off, exported);
criterion_main!(benches);
