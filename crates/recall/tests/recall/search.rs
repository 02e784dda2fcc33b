//! memory_search with the real model: paraphrases, scores, time bounds, and a clear error when
//! the model is unavailable.

use serde_json::json;
use strata_recall::{Embedder, RecallSettings, ToolContext, call_tool};

use super::util::*;
use strata_seam::{Conversations, Forest};

const CORPUS: [&str; 10] = [
    "What a merge conflict mess, I had to redo the whole branch by hand.",
    "Can you book me a table for two at the Italian place tonight?",
    "The cat is sleeping on the warm windowsill again.",
    "Quarterly revenue grew by eight percent, mostly from renewals.",
    "Bananas are a good source of potassium.",
    "Please water the tomato plants while I am away.",
    "The new office chairs arrive on Thursday.",
    "I moved the meeting with the accountant to next week.",
    "The train to Lyon was delayed by forty minutes.",
    "Our invoice template needs the new VAT number.",
];

#[test]
fn paraphrases_are_found_by_meaning() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let ids = append_texts(store, &session, "2024-05-01T08:00:00Z", &CORPUS);
    embed_all(store);
    let ctx = ctx(store, &session);
    for (query, expected) in [
        ("the rebase blew up", 0),
        ("reserve a dinner table for this evening", 1),
        ("my kitty is napping by the window", 2),
        ("sales went up this quarter", 3),
        ("the railway journey was late", 8),
    ] {
        let answer = ok(&ctx, "memory_search", json!({"query": query, "limit": 3}));
        let top = &answer["results"][0];
        assert_eq!(top["id"], ids[expected], "{query:?} -> {answer:#}");
        assert_eq!(top["kind"], "message");
        assert!(top["score"].as_f64().unwrap() > 0.0);
        // A paraphrase scores 0.29-0.6 here; the int8 model's kernels differ a little by CPU
        // (AVX2 without AVX-512 gave 0.295 for the first query), so the floor is 0.25.
        assert!(top["similarity"].as_f64().unwrap() > 0.25, "{top}");
        assert_eq!(top["session"], "s");
        assert!(top["seq"].is_number() && top["timestamp"].is_string() && top["role"].is_string());
        assert!(answer["count"].as_u64().unwrap() <= 3);
        // Scores are in decreasing order.
        let scores: Vec<f64> =
            answer["results"].as_array().unwrap().iter().map(|r| r["score"].as_f64().unwrap()).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    }
    // Time bounds apply to semantic hits too: the conflict message is at 08:00.
    let answer = ok(
        &ctx,
        "memory_search",
        json!({"query": "the rebase blew up", "start_time": "2024-05-01T08:01:00Z"}),
    );
    assert!(!found(&answer).contains(&("message".to_owned(), ids[0])), "{answer:#}");
    let answer =
        ok(&ctx, "memory_search", json!({"query": "the rebase blew up", "end_time": "2024-05-01T08:01:00Z"}));
    assert_eq!(found(&answer), [("message".to_owned(), ids[0])]);
}

#[test]
fn rows_not_yet_embedded_are_still_found_by_keywords() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    append_texts(store, &session, "2024-05-01T08:00:00Z", &CORPUS);
    embed_all(store);
    let late =
        append_texts(store, &session, "2024-05-02T08:00:00Z", &["The zanzibar-cluster certificate expired."]);
    let answer = ok(&ctx(store, &session), "memory_search", json!({"query": "zanzibar-cluster certificate"}));
    assert_eq!(answer["results"][0]["id"], late[0]);
    assert!(answer["results"][0]["semantic_rank"].is_null());
    assert_eq!(answer["results"][0]["keyword_rank"], 1);
}

#[test]
fn without_the_model_search_says_why_and_everything_else_works() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let ids = append_texts(store, &session, "2024-05-01T08:00:00Z", &CORPUS);
    let dir = tempfile::tempdir().unwrap();

    // Missing files: the error names the file and the fetch script.
    let missing = Embedder::load(dir.path()).unwrap_err();
    assert!(missing.to_string().contains("libonnxruntime.so"), "{missing}");
    assert!(missing.to_string().contains("fetch-embed-assets.sh"), "{missing}");

    // A broken model file: an error, not a panic.
    let real = embedder().assets().to_path_buf();
    let broken = dir.path().join("broken");
    std::fs::create_dir_all(broken.join("onnxruntime")).unwrap();
    std::fs::create_dir_all(broken.join("all-MiniLM-L6-v2-int8")).unwrap();
    std::fs::copy(real.join("onnxruntime/libonnxruntime.so"), broken.join("onnxruntime/libonnxruntime.so"))
        .unwrap();
    for file in ["tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"] {
        let from = real.join("all-MiniLM-L6-v2-int8").join(file);
        std::fs::copy(from, broken.join("all-MiniLM-L6-v2-int8").join(file)).unwrap();
    }
    std::fs::write(broken.join("all-MiniLM-L6-v2-int8/model.onnx"), b"this is not an onnx model").unwrap();
    let broken_error = Embedder::load(&broken).unwrap_err();

    for failure in [missing, broken_error] {
        let ctx =
            ToolContext::new(store.clone(), caller(store, &session), Err(failure), RecallSettings::default());
        // memory_search falls back to keywords and says so.
        let found = ok(&ctx, "memory_search", json!({"query": "merge conflict", "include_in_context": true}));
        assert_eq!(found["results"][0]["id"], ids[0], "{found}");
        assert_eq!(found["results"][0]["semantic_rank"], serde_json::Value::Null, "{found}");
        let note = found["semantic_coverage"]["note"].as_str().unwrap();
        assert!(
            note.starts_with("semantic search unavailable: ") && note.ends_with("keywords only"),
            "{note}"
        );
        assert_eq!(ok(&ctx, "memory_grep", json!({"query": "merge conflict"}))["results"][0]["id"], ids[0]);
        assert_eq!(ok(&ctx, "view_message", json!({"message_id": ids[1]}))["message"]["id"], ids[1]);
        ok(&ctx, "view_chat_history_summary", json!({}));
        ok(&ctx, "save_memory", json!({"category": "memo", "key": "k", "title": "t", "content": "c"}));
        let unknown = call_tool(&ctx, "no_such_tool", &json!({}));
        assert_eq!(unknown["error"]["kind"], "unknown_tool");
    }
}

/// A fact held by a message and by the summary that covers it comes back once: the verbatim
/// message, at the better of the two ranks, naming the summary.
#[test]
fn a_message_and_its_summary_are_one_hit() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let ids = append_texts(store, &session, "2024-05-01T08:00:00Z", &CORPUS);
    let node = store
        .insert_leaf(
            session.id,
            0,
            1,
            &strata_seam::NewSummary {
                headline: "A merge conflict mess and a dinner table.".into(),
                body: "The user redid the branch by hand after a merge conflict mess; booked a table.".into(),
                token_count: 20,
                summarizer: "extractive".into(),
                memory_updates: Vec::new(),
            },
        )
        .unwrap();
    embed_all(store);
    let answer =
        ok(&ctx(store, &session), "memory_search", json!({"query": "merge conflict mess", "limit": 10}));
    let found = found(&answer);
    let message = ("message".to_owned(), ids[0]);
    let summary = ("summary".to_owned(), node.id.0);
    assert!(found.contains(&message) != found.contains(&summary), "exactly one of the two: {answer:#}");
    let top = &answer["results"][0];
    let other = if top["kind"] == "message" {
        json!({"kind": "summary", "id": node.id.0})
    } else {
        json!({"kind": "message", "id": ids[0]})
    };
    assert!(top["also_in"].as_array().unwrap().contains(&other), "{answer:#}");
}

/// Before everything is embedded, the answer says how much of the history semantic search
/// does not cover yet.
#[test]
fn search_says_what_is_not_embedded_yet() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    append_texts(store, &session, "2024-05-01T08:00:00Z", &CORPUS);
    let ctx = ctx(store, &session);
    let answer = ok(&ctx, "memory_search", json!({"query": "merge conflict"}));
    assert_eq!(answer["semantic_coverage"]["waiting"], CORPUS.len());
    assert!(answer["semantic_coverage"]["note"].as_str().unwrap().contains("not embedded yet"), "{answer:#}");
    assert_eq!(answer["results"][0]["kind"], "message", "keywords still find it: {answer:#}");
    embed_all(store);
    let answer = ok(&ctx, "memory_search", json!({"query": "merge conflict"}));
    assert!(answer.get("semantic_coverage").is_none(), "{answer:#}");
}

/// A question that shares only common words with many rows does not bury the one row that
/// answers it in other words (keyword scores are weighed against the whole question).
#[test]
fn common_words_do_not_bury_a_paraphrase() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let mut texts: Vec<String> = (0..40)
        .map(|i| format!("I changed the test for the login flow in step {i}, the test environment was slow."))
        .collect();
    texts.insert(17, "Reminder: the staging database password rotates every 45 days.".to_owned());
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids = append_texts(store, &session, "2024-05-01T08:00:00Z", &refs);
    embed_all(store);
    let answer = ok(
        &ctx(store, &session),
        "memory_search",
        json!({"query": "how often do the credentials for the test environment change", "limit": 3}),
    );
    assert!(found(&answer).contains(&("message".to_owned(), ids[17])), "{answer:#}");
}

/// The same words said several times are one fact: the repeats are named, not listed.
#[test]
fn repeated_messages_are_one_hit() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let mut texts = vec!["The test environment is slow again today."; 6];
    texts.push("The staging password rotates every 45 days.");
    let ids = append_texts(store, &session, "2024-05-01T08:00:00Z", &texts);
    embed_all(store);
    let answer = ok(
        &ctx(store, &session),
        "memory_search",
        json!({"query": "is the test environment slow", "limit": 5}),
    );
    let listed = found(&answer);
    let repeats = listed.iter().filter(|(_, id)| ids[..6].contains(id)).count();
    assert_eq!(repeats, 1, "{answer:#}");
    assert_eq!(answer["results"][0]["also_in"].as_array().unwrap().len(), 5, "{answer:#}");
}

/// Rows that share one word with the questions below.
const FAINT_MATCHES: [&str; 6] = [
    "The export button is in the file menu.",
    "That job pays well, she said.",
    "Pottery is an old craft.",
    "Caroline is coming over.",
    "Export settings are under preferences.",
    "A new job posting went up.",
];

/// The first result's id of `memory_search` for `query` under `config`.
fn first_hit(
    store: &strata_store::Store,
    session: &strata_seam::Session,
    config: strata_recall::RecallConfig,
    query: &str,
) -> serde_json::Value {
    let answer = ok(&ctx_with(store, session, config), "memory_search", json!({"query": query}));
    answer["results"][0]["id"].clone()
}

/// Without the time term, the shorter of two rows holding the question's words wins; with it
/// (its default weight), the row that says when does, on a question asking when.
#[test]
fn a_question_asking_when_prefers_the_message_that_says_when() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    append_texts(store, &session, "2024-05-01T08:00:00Z", &CORPUS);
    // Rows sharing one word of the question: the low end of the keyword side's scale, as a
    // real history has.
    append_texts(store, &session, "2024-05-02T08:00:00Z", &FAINT_MATCHES);
    let ids = append_texts(
        store,
        &session,
        "2024-05-03T08:00:00Z",
        &["The export job failed again.", "The export job failed again yesterday."],
    );
    let query = "When did the export job fail?";
    let off = strata_recall::RecallConfig {
        time_weight: 0.0,
        speaker_weight: 0.0,
        expansion_weight: 0.0,
        ..Default::default()
    };
    assert_eq!(first_hit(store, &session, off.clone(), query), ids[0], "without the time term");
    let on = strata_recall::RecallConfig {
        time_weight: strata_recall::RecallConfig::default().time_weight,
        ..off
    };
    assert_eq!(first_hit(store, &session, on, query), ids[1], "with it");
    // A question that does not ask when keeps the keyword order.
    assert_eq!(first_hit(store, &session, Default::default(), "the export job failed"), ids[0]);
}

/// A question naming a speaker prefers that speaker's message over one that only names them.
#[test]
fn a_question_naming_a_speaker_prefers_what_that_speaker_said() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    append_texts(store, &session, "2024-05-01T08:00:00Z", &CORPUS);
    append_texts(store, &session, "2024-05-02T08:00:00Z", &FAINT_MATCHES);
    let said = |name: &str, text: &str, minute: i64| {
        let mut message = message(
            strata_seam::Role::User,
            text,
            at("2024-05-03T08:00:00Z") + chrono::Duration::minutes(minute),
        );
        message.name = Some(name.to_owned());
        message
    };
    let ids = store
        .append(
            session.id,
            &[
                said("Melanie", "Caroline, your pottery is lovely, pottery really suits you Caroline.", 0),
                said("Caroline", "I started a pottery class last month and love it.", 1),
            ],
        )
        .unwrap();
    let query = "What did Caroline say about pottery?";
    let off =
        strata_recall::RecallConfig { speaker_weight: 0.0, expansion_weight: 0.0, ..Default::default() };
    assert_eq!(first_hit(store, &session, off, query), ids[0].0, "without the speaker term");
    assert_eq!(first_hit(store, &session, Default::default(), query), ids[1].0, "with it");
}
