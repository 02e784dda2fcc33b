//! The embedding pipeline: backlog drain, worker, exactly-once.

use std::time::Duration;

use strata_recall::{BacklogFilter, EmbedWorker, RecallConfig, RecallSettings, embed_backlog_with};
use strata_seam::search::{HitId, HitKind, Scan};
use strata_seam::{Conversations, Forest, Vectors};
use strata_seam::{MessageId, NewSummary};

const MODEL: &str = strata_recall::DEFAULT_MODEL;

use super::util::*;

#[test]
fn backlog_drains_exactly_once_with_progress() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let texts: Vec<String> = (0..70)
        .map(|i| format!("message number {i} about {}", ["tea", "trains", "tomatoes"][i % 3]))
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    append_texts(store, &session, "2024-05-01T08:00:00Z", &texts);
    let other = store.session("o", "q").unwrap();
    append_texts(store, &other, "2024-05-01T08:00:00Z", &["other persona text"]);

    let config = RecallConfig { embed_batch_size: 16, embed_round_size: 40, ..RecallConfig::default() };
    // Only persona p, at most 50 this time.
    let filter = BacklogFilter { persona: Some("p".into()), session: None, limit: Some(50) };
    let mut reports = Vec::new();
    let written = embed_backlog_with(store, &embedder(), &config, &filter, |p| reports.push(p)).unwrap();
    assert_eq!(written, 50);
    assert_eq!(reports.first().unwrap().embedded, 0);
    assert_eq!(reports.last().unwrap().embedded, 50);
    assert!(reports.windows(2).all(|w| w[0].embedded <= w[1].embedded));
    assert_eq!(store.backlog_count(Some("p"), None).unwrap(), 20);
    assert_eq!(store.backlog_count(Some("q"), None).unwrap(), 1);

    let rest = embed_backlog_with(store, &embedder(), &config, &BacklogFilter::default(), |_| {}).unwrap();
    assert_eq!(rest, 21);
    assert_eq!(store.embeddings().counts().unwrap().messages, 71);
    assert_eq!(
        embed_backlog_with(store, &embedder(), &config, &BacklogFilter::default(), |_| {}).unwrap(),
        0
    );

    // The stored vector is the model's vector of the text.
    let query = embedder().embed_passages(&["assistant: message number 7 about trains"]).unwrap().remove(0);
    let nearest = store.embeddings().nearest(MODEL, HitKind::Message, "p", &query, 1, Scan::Exact).unwrap();
    assert_eq!(nearest[0].0, HitId::Message(MessageId(8)));
    assert!(nearest[0].1 < 1e-4, "{nearest:?}");
}

#[test]
fn worker_embeds_new_rows_in_the_background() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    append_texts(store, &session, "2024-05-01T08:00:00Z", &["first batch one", "first batch two"]);
    let worker =
        EmbedWorker::spawn(store.clone(), embedder(), RecallSettings::default(), Duration::from_secs(3600));
    worker.notify();
    assert!(worker.wait_idle(Duration::from_secs(120)));
    assert_eq!(store.backlog_count(None, None).unwrap(), 0);

    append_texts(store, &session, "2024-05-01T09:00:00Z", &["second batch"]);
    let leaf = store
        .insert_leaf(
            session.id,
            0,
            1,
            &NewSummary {
                headline: "h".into(),
                body: "b".into(),
                token_count: 1,
                summarizer: "extractive".into(),
                memory_updates: Vec::new(),
            },
        )
        .unwrap();
    worker.notify();
    assert!(worker.wait_idle(Duration::from_secs(120)));
    assert_eq!(store.backlog_count(None, None).unwrap(), 0);
    let counts = store.embeddings().counts().unwrap();
    assert_eq!((counts.messages, counts.summaries), (3, 1));
    assert_eq!(worker.stats().embedded, 4);
    assert!(worker.stats().last_error.is_none());
    assert_eq!(
        store
            .embeddings()
            .nearest(
                MODEL,
                HitKind::Summary,
                "p",
                &embedder().embed_passages(&["h\nb"]).unwrap()[0],
                1,
                Scan::Exact
            )
            .unwrap()[0]
            .0,
        HitId::Summary(leaf.id)
    );
    worker.stop();
}

#[test]
fn tool_results_get_one_vector_by_default_and_conversation_text_all_of_its_chunks() {
    let content: String = (0..300).map(|i| format!("word{i} ")).collect();
    let vectors = |config: &RecallConfig| {
        let fx = fixture();
        let session = fx.store.session("s", "p").unwrap();
        let mut tool = message(strata_seam::Role::Tool, &content, at("2024-05-01T08:00:00Z"));
        tool.name = Some("read_file".into());
        tool.tool_call_id = Some("call_1".into());
        let mut call = message(strata_seam::Role::Assistant, "", at("2024-05-01T08:00:00Z"));
        call.tool_calls = Some(serde_json::json!([{
            "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}
        }]));
        let user = message(strata_seam::Role::User, &content, at("2024-05-01T08:01:00Z"));
        fx.store.append(session.id, &[call, tool, user]).unwrap();
        let written =
            embed_backlog_with(&fx.store, &embedder(), config, &BacklogFilter::default(), |_| {}).unwrap();
        assert_eq!(written, 3, "every row leaves the backlog");
        fx.store.embeddings().counts().unwrap().messages
    };
    // `name: text` of 301 words is five overlapping windows of 80 words; the empty call is one.
    assert_eq!(vectors(&RecallConfig::default()), 1 + 1 + 5);
    assert_eq!(vectors(&RecallConfig { embed_tool_chunks: 8, ..RecallConfig::default() }), 1 + 5 + 5);
    assert_eq!(vectors(&RecallConfig { embed_max_chunks: 2, ..RecallConfig::default() }), 1 + 1 + 2);
}

/// With a separate query session (what the background worker sets up), a query embedded while
/// another thread's batch holds the batch session gets the vector it gets alone.
#[test]
fn queries_beside_a_batch_in_flight_get_the_same_vectors() {
    let embedder = strata_recall::Embedder::load_default().unwrap();
    let questions: Vec<String> =
        (0..12).map(|i| format!("what did we decide about the cache in week {i}?")).collect();
    // Alone, through the batch session (this model has no query prefix; `embed` bypasses the
    // memo of recent queries, so the queries below reach a model).
    let alone: Vec<Vec<f32>> = questions.iter().map(|q| embedder.embed_one(q).unwrap()).collect();
    embedder.separate_queries().unwrap();
    let texts: Vec<String> =
        (0..600).map(|i| format!("a long backlog text number {i} about trains and tea")).collect();
    std::thread::scope(|scope| {
        let batch = scope.spawn(|| {
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder.embed_sorted(&texts, 32).unwrap().len()
        });
        for (question, expected) in questions.iter().zip(&alone) {
            let vector = embedder.embed_query(question).unwrap();
            let cosine: f32 = vector.iter().zip(expected).map(|(a, b)| a * b).sum();
            assert!(cosine > 0.9999, "{question}: cosine {cosine}");
        }
        assert_eq!(batch.join().unwrap(), 600);
    });
}
