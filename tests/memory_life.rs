//! The memory life cycle through `Engine`, against a scripted OpenAI-compatible summarizer: a
//! fact said in chat becomes a memory the next session sees; a stated preference waits for the
//! user; a chat well inside a big window is left alone; a huge tool result is read page by page.

use serde_json::{Value, json};
use strata::{ChatMessage, Config, Engine, SummarizerKind};
use strata_compactor::Outcome;
use strata_seam::Category;
use strata_seam::memories::{MemoryWrite, Writer};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::util::Strata;

const PERSONA: &str = "assistant";

/// A `save_summary` call as a server returns it.
fn summary_reply(arguments: &Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "save_summary", "arguments": arguments.to_string()}}]}}]}))
}

/// A summarizer that finds, in a chunk that mentions port 5433, the fact and the preference the
/// user stated there, and nothing in any other.
async fn scripted_summarizer() -> MockServer {
    let server = MockServer::start().await;
    let with_facts = json!({
        "headline": "Staging moved to a new database port; answers in British English.",
        "body": "Decisions:\n- staging database on port 5433",
        "memory_updates": [
            {"category": "memo", "key": "staging_db_port", "title": "Staging database port",
             "content": "The staging database listens on port 5433 since March."},
            {"category": "user_preferences", "key": "british_english", "title": "British English",
             "content": "Answer in British English."},
            // The agent may not write preferences, and a refused fact costs nothing else.
            {"category": "memo", "key": "too_long", "title": "x", "content": "y".repeat(600)}
        ]
    });
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .and(body_string_contains("5433"))
        .respond_with(summary_reply(&with_facts))
        .with_priority(1)
        .mount(&server)
        .await;
    let plain = json!({"headline": "Small talk about the week.", "body": "Timeline:\n- chatted"});
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(summary_reply(&plain))
        .with_priority(2)
        .mount(&server)
        .await;
    server
}

/// Folds as soon as there is a little to fold, whatever the window: these tests are about
/// what folding keeps, not when it starts.
fn folding() -> Config {
    let mut config = Config::default();
    config.compactor.trigger_ratio = 0.0;
    config.compactor.target_ratio = 0.0;
    config.compactor.leaf_min_tokens = 100;
    config.compactor.leaf_chunk_tokens = 400;
    config.compactor.tail_turns = 1;
    config.compactor.tail_tokens = 200;
    config
}

fn config(server: &MockServer) -> Config {
    let mut config = folding();
    config.summarizer.kind = SummarizerKind::Openai;
    config.summarizer.base_url = server.uri();
    config
}

/// The text of the latest user message of a context: where the injection goes.
fn latest_request(messages: &[Value]) -> String {
    messages
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .and_then(|message| message["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_said_in_turn_three_is_remembered_and_a_preference_waits_for_the_user() {
    let server = scripted_summarizer().await;
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), config(&server)).unwrap();
    let monday = engine.session("monday", PERSONA).unwrap();
    let chat = [
        ("Good morning! What is on the list today?", "The release notes and the staging move."),
        ("Let us start with the release notes for v2.3.", "Drafted: fixes, new export command, docs."),
        (
            "Staging's database moved: it listens on port 5433 now. From now on, answer in British English.",
            "Noted, the staging database is on 5433.",
        ),
        ("Anything else on the release?", "Only the changelog wording, which I have tidied."),
        ("Thanks, that is all for today.", "Have a good evening."),
    ];
    for (asked, answered) in chat {
        monday.append(ChatMessage::user(asked)).unwrap();
        monday.append(ChatMessage::assistant(answered)).unwrap();
    }
    monday.append(ChatMessage::user("One more: when is the release?")).unwrap();
    let prepared = monday.prepare_context().await.unwrap();
    assert!(matches!(prepared.outcome, Some(Outcome::Compacted { .. })), "{:?}", prepared.outcome);

    // The fact is the agent's memory; the preference is only proposed.
    let store = engine.store();
    let memo = store.memory(PERSONA, Category::Memo, "staging_db_port").unwrap().expect("consolidated");
    assert!(memo.content.contains("5433"));
    assert!(store.memory(PERSONA, Category::Memo, "too_long").unwrap().is_none(), "over 500 characters");
    assert!(store.memory(PERSONA, Category::UserPreferences, "british_english").unwrap().is_none());
    // Proposed twice: at once from the message's words, and by the LLM summary under its own
    // key. Keys that differ are not matched by meaning yet (issue 39 item 4, left open).
    let proposals = engine.proposals(PERSONA).unwrap();
    let keys: Vec<&str> = proposals.iter().map(|proposal| proposal.update.key.as_str()).collect();
    assert_eq!(keys, ["answer_british_english", "british_english"]);
    assert!(engine.proposals("someone-else").unwrap().is_empty(), "personas are isolated");

    // A later session of the persona starts with the memory in view, and without the
    // preference nobody accepted.
    let tuesday = engine.session("tuesday", PERSONA).unwrap();
    tuesday.append(ChatMessage::user("Which port does staging use again?")).unwrap();
    let request = latest_request(tuesday.prepare_context().await.unwrap().messages());
    assert!(request.contains("[Long-term Memories]"), "{request}");
    assert!(request.contains("port 5433"), "{request}");
    assert!(!request.contains("British English"), "a proposal is not a preference: {request}");
    let listed = tuesday.call_tool("memory_list", json!({"category": "memo"})).await;
    assert_eq!(listed["memories"][0]["key"], "staging_db_port", "{listed}");

    // Once the user accepts it, every turn carries it.
    let accepted = engine.accept_proposal(PERSONA, "british_english").unwrap();
    assert_eq!(accepted.category, Category::UserPreferences);
    engine.reject_proposal(PERSONA, "answer_british_english").unwrap();
    assert!(engine.proposals(PERSONA).unwrap().is_empty());
    tuesday.append(ChatMessage::assistant("Staging uses port 5433.")).unwrap();
    tuesday.append(ChatMessage::user("Thanks. And the release date?")).unwrap();
    let request = latest_request(tuesday.prepare_context().await.unwrap().messages());
    assert!(request.contains("Answer in British English."), "{request}");
    // The agent still cannot write a preference itself.
    let refused = tuesday
        .call_tool(
            "save_memory",
            json!({"category": "user_preferences", "key": "tone", "title": "t", "content": "casual"}),
        )
        .await;
    assert!(refused.get("error").is_some(), "{refused}");
    // Rejecting what is not proposed is one clear error.
    let missing = engine.reject_proposal(PERSONA, "british_english").unwrap_err();
    assert!(missing.to_string().contains("british_english"), "{missing}");
}

/// A chat that states one memo and one preference after its head, then garden small talk.
fn tell_a_memo_and_a_preference(session: &strata::EngineSession) {
    // The head (the first two messages) is never folded; the facts come after it.
    session.append(ChatMessage::user("Hello there.")).unwrap();
    session.append(ChatMessage::assistant("Hello! How can I help?")).unwrap();
    session
        .append(ChatMessage::user("Please remember that the office wifi password rotates every Monday."))
        .unwrap();
    session.append(ChatMessage::assistant("I will keep that in mind.")).unwrap();
    session.append(ChatMessage::user("I prefer answers without emoji.")).unwrap();
    session.append(ChatMessage::assistant("Understood.")).unwrap();
    for turn in 0..6 {
        session.append(ChatMessage::user(format!("Turn {turn}: how is the garden project going?"))).unwrap();
        session
            .append(ChatMessage::assistant(format!("Turn {turn}: the tomatoes are growing well.")))
            .unwrap();
    }
    session.append(ChatMessage::user("What did I ask you to remember?")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_summarizer_keeps_what_it_was_told_to_remember() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), folding()).unwrap();
    let session = engine.session("notes", PERSONA).unwrap();
    tell_a_memo_and_a_preference(&session);
    let prepared = session.prepare_context().await.unwrap();
    assert!(matches!(prepared.outcome, Some(Outcome::Compacted { .. })), "{:?}", prepared.outcome);
    let memos = engine.store().memories(PERSONA, Some(Category::Memo)).unwrap();
    assert_eq!(memos.len(), 1, "{memos:?}");
    assert!(memos[0].content.contains("rotates every Monday"), "{memos:?}");
    let proposals = engine.proposals(PERSONA).unwrap();
    assert_eq!(proposals.len(), 1, "{proposals:?}");
    assert!(proposals[0].update.content.contains("without emoji"));
    // Garden small talk is no fact.
    assert_eq!(engine.store().memories(PERSONA, None).unwrap().len(), 1);

    // The user's side, from the command line.
    let listed = strata.run(&["memory", "proposals", "--persona", PERSONA]).success();
    assert!(listed.contains("answers_without_emoji") && listed.contains("strata memory accept"), "{listed}");
    let accepted = strata.run(&["memory", "accept", "answers_without_emoji", "--persona", PERSONA]).success();
    assert!(accepted.contains("accepted: user_preferences answers_without_emoji"), "{accepted}");
    let preference =
        engine.store().memory(PERSONA, Category::UserPreferences, "answers_without_emoji").unwrap();
    assert!(preference.is_some_and(|memory| memory.content.contains("without emoji")));
    let none = strata.run(&["memory", "reject", "answers_without_emoji", "--persona", PERSONA]).failure();
    assert!(none.contains("answers_without_emoji"), "{none}");
}

/// `Engine::compact_until_done` (what `strata compact` runs) folds everything foldable and
/// settles the facts of every call, and says how many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacting_until_done_settles_the_facts_and_counts_them() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), folding()).unwrap();
    let session = engine.session("notes", PERSONA).unwrap();
    tell_a_memo_and_a_preference(&session);
    let mut heard = 0;
    let done = engine.compact_until_done(session.id(), 1, u32::MAX, |_| heard += 1).await.unwrap();
    let compaction = &done.compaction;
    assert!(
        matches!(
            compaction.last,
            Outcome::Compacted { pending: false, .. } | Outcome::BelowThreshold { .. } | Outcome::NoCandidate
        ),
        "{compaction:?}"
    );
    assert!(compaction.nodes_created >= 1 && compaction.messages_folded >= 10, "{compaction:?}");
    assert_eq!(heard, compaction.calls);
    assert_eq!((done.settled.saved, done.settled.proposed), (1, 1), "{:?}", done.settled);
    assert_eq!(engine.store().memories(PERSONA, Some(Category::Memo)).unwrap().len(), 1);
    assert_eq!(engine.proposals(PERSONA).unwrap().len(), 1);
    // Nothing is left to settle, and nothing to fold.
    let again = engine.compact_until_done(session.id(), 1, u32::MAX, |_| {}).await.unwrap();
    assert_eq!((again.compaction.nodes_created, again.settled), (0, strata::recall::Settled::default()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_39k_token_chat_in_a_200k_window_is_not_compacted() {
    let strata = Strata::new();
    let mut config = Config::default();
    config.compactor.context_window_tokens = 200_000;
    let engine = Engine::open(strata.db(), config).unwrap();
    let session = engine.session("long", PERSONA).unwrap();
    let mut turn = 0;
    while engine.compactor().context_size(session.id()).await.unwrap() < 39_000 {
        session
            .append(ChatMessage::user(format!("Step {turn}: {}", "what about the parser? ".repeat(40))))
            .unwrap();
        session
            .append(ChatMessage::assistant(format!("Step {turn}: {}", "the parser is fine. ".repeat(40))))
            .unwrap();
        turn += 1;
    }
    let prepared = session.prepare_context().await.unwrap();
    assert!(matches!(prepared.outcome, Some(Outcome::BelowThreshold { .. })), "{:?}", prepared.outcome);
    assert!(engine.store().nodes(session.id()).unwrap().is_empty());
    assert!(prepared.context.tokens.total >= 39_000, "everything is sent verbatim");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_250k_character_tool_result_is_paged_to_its_end_through_the_engine() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), Config::default()).unwrap();
    let session = engine.session("tools", PERSONA).unwrap();
    let text: String = (0..25_000).map(|i| format!("row {i:05} ok\n")).collect();
    assert!(text.len() > 250_000);
    let call =
        json!([{"id": "call_1", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}]);
    session
        .append(ChatMessage { tool_calls: Some(call), content: None, ..ChatMessage::assistant("") })
        .unwrap();
    let id = session.append(ChatMessage::tool("call_1", "read_log", text.clone())).unwrap();
    let (mut read, mut offset) = (String::new(), 0u64);
    for _page in 0..100 {
        let answer = session.call_tool("view_message", json!({"message_id": id.0, "offset": offset})).await;
        let content = answer["message"]["content"].as_str().unwrap_or_else(|| panic!("{answer}"));
        // A page is fenced as data: the text sits between the fence's first and last lines.
        let start = content.find('\n').map_or(0, |i| i + 1);
        let end = content.rfind('\n').unwrap_or(content.len()).max(start);
        read.push_str(&content[start..end]);
        match answer["message"]["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => break,
        }
    }
    assert_eq!(read, text, "the pages, joined, are the message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resummarize_replaces_bottom_up_and_resumes_after_a_failure() {
    let strata = Strata::new();
    let mut extractive = folding();
    extractive.compactor.leaf_chunk_tokens = 300;
    extractive.compactor.context_consolidation_k = 2;
    extractive.compactor.max_rounds = 100;
    let engine = Engine::open(strata.db(), extractive.clone()).unwrap();
    let session = engine.session("history", PERSONA).unwrap();
    for turn in 0..40 {
        session
            .append(ChatMessage::user(format!(
                "Turn {turn}: shall we move service {turn} to the new cluster?"
            )))
            .unwrap();
        session
            .append(ChatMessage::assistant(format!(
                "Turn {turn}: yes, service {turn} moved; latency is fine."
            )))
            .unwrap();
    }
    session.prepare_context().await.unwrap();
    let before = engine.store().nodes(session.id()).unwrap();
    assert!(
        before.iter().any(|node| node.level > strata::seam::Level::LEAF),
        "merges exist: {}",
        before.len()
    );
    assert!(before.iter().all(|node| node.summarizer == "extractive"));
    drop(engine);

    // The LLM answers three requests, then fails.
    let server = MockServer::start().await;
    let reply = json!({"headline": "Services moved to the new cluster.", "body": "- moved; latency fine"});
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(summary_reply(&reply))
        .up_to_n_times(3)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(ResponseTemplate::new(500).set_body_string("model crashed"))
        .with_priority(2)
        .mount(&server)
        .await;
    let mut llm = extractive.clone();
    llm.summarizer.kind = SummarizerKind::Openai;
    llm.summarizer.base_url = server.uri();
    llm.compactor.retry.max_attempts = 1;
    let engine = Engine::open(strata.db(), llm).unwrap();
    let mut order = Vec::new();
    let first = engine.resummarize(session.id(), None, |node| order.push(node.level)).await.unwrap();
    assert_eq!(first.replaced, 3);
    assert!(first.stopped.as_deref().is_some_and(|why| why.contains("500")), "{first:?}");
    assert!(order.iter().all(|&level| level == strata::seam::Level::LEAF), "Level 0 first: {order:?}");
    let after_failure = engine.store().nodes(session.id()).unwrap();
    assert_eq!(after_failure.len(), before.len(), "no node lost or added");
    assert_eq!(after_failure.iter().filter(|node| node.summarizer == "gpt-4o-mini").count(), 3);

    // Run again (from the command line) with a healthy server: it goes on where it stopped.
    server.reset().await;
    // A merge must not copy its children (the gate's near-copy rule): it says it in other words.
    let merged = json!({"headline": "The cluster migration, service by service.", "body": "- all moved"});
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .and(body_string_contains("summaries of consecutive parts"))
        .respond_with(summary_reply(&merged))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(summary_reply(&reply))
        .with_priority(2)
        .mount(&server)
        .await;
    let out = strata
        .run(&["resummarize", "--session", "history", "--summarizer", "openai", "--base-url", &server.uri()])
        .success();
    let expected = format!("{} nodes re-summarized by gpt-4o-mini, 3 unchanged", before.len() - 3);
    assert!(out.contains(&expected), "{out}");
    let nodes = engine.store().nodes(session.id()).unwrap();
    assert!(nodes.iter().all(|node| node.summarizer == "gpt-4o-mini" && node.headline.contains("cluster")));
    assert!(
        nodes
            .iter()
            .filter(|node| node.level > strata::seam::Level::LEAF)
            .all(|node| node.headline.contains("service by service"))
    );
    let again = engine.resummarize(session.id(), None, |_| {}).await.unwrap();
    assert_eq!((again.replaced, again.unchanged as usize), (0, before.len()), "nothing left to do");
}

/// Issue 24 end to end: the persona's memory of the user studying the Standard Japanese
/// textbook is `标日学习`. The summarizer is shown that key and title (its request holds them)
/// and, like the model the issue caught, still proposes `japanese_textbook_study` and
/// `standard_japanese`: both update the one memory, found by meaning across scripts with the
/// real model, and its history names the key each summary proposed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summarys_twins_in_other_words_and_scripts_update_the_one_memory() {
    let server = MockServer::start().await;
    let twins = json!({
        "headline": "The user finished lesson 13 of Standard Japanese.",
        "body": "Timeline:\n- lesson 13 done, grammar hard",
        "memory_updates": [
            {"category": "memo", "key": "japanese_textbook_study", "title": "Japanese textbook study",
             "content": "The user studies the Standard Japanese (标准日本语) textbook, now on lesson 13."},
            {"category": "memo", "key": "standard_japanese", "title": "Standard Japanese textbook",
             "content": "User works through 新版标准日本语 (Standard Japanese) elementary vol. 1; finished lesson 13."}
        ]
    });
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .and(body_string_contains("第13课"))
        .and(body_string_contains("memo/标日学习: 标日学习进度"))
        .respond_with(summary_reply(&twins))
        .with_priority(1)
        .mount(&server)
        .await;
    let plain = json!({"headline": "Small talk about the week.", "body": "Timeline:\n- chatted"});
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(summary_reply(&plain))
        .with_priority(2)
        .mount(&server)
        .await;
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), config(&server)).unwrap();
    let first = "用户在自学《新版标准日本语》初级上册，学完第12课，每天学习一小时。";
    let studying =
        MemoryWrite {
            category: Category::Memo, key: "标日学习", title: "标日学习进度", content: first
        };
    engine.store().put_memory(Writer::User, PERSONA, &studying).unwrap();
    let session = engine.session("japanese", PERSONA).unwrap();
    session.append(ChatMessage::user("你好。")).unwrap();
    session.append(ChatMessage::assistant("你好！今天想学什么？")).unwrap();
    session.append(ChatMessage::user("今天学完了标日第13课，语法有点难。")).unwrap();
    session
        .append(ChatMessage::assistant("Well done: lesson 13 of Standard Japanese is a hard one."))
        .unwrap();
    for turn in 0..6 {
        session.append(ChatMessage::user(format!("Turn {turn}: how is the garden project going?"))).unwrap();
        session
            .append(ChatMessage::assistant(format!("Turn {turn}: the tomatoes are growing well.")))
            .unwrap();
    }
    let done = engine.compact_until_done(session.id(), 1, u32::MAX, |_| {}).await.unwrap();

    assert_eq!((done.settled.saved, done.settled.merged), (2, 2), "{:?}", done.settled);
    assert!(!done.settled.spelling_only, "the model was loaded to settle them");
    let memos = engine.store().memories(PERSONA, Some(Category::Memo)).unwrap();
    assert_eq!(memos.len(), 1, "twins were forked: {memos:?}");
    assert_eq!((memos[0].key.as_str(), memos[0].title.as_str()), ("标日学习", "标日学习进度"));
    assert!(memos[0].content.contains("finished lesson 13"), "{memos:?}");
    let history = engine.store().memory_history(PERSONA, Category::Memo, "标日学习").unwrap();
    let proposed: Vec<&str> =
        history.iter().filter_map(|version| version.provenance.via.as_deref()).collect();
    assert!(
        proposed[0].contains("proposed as key standard_japanese titled: Standard Japanese textbook")
            && proposed[1]
                .contains("proposed as key japanese_textbook_study titled: Japanese textbook study"),
        "{proposed:?}"
    );
    assert!(proposed[0].contains("by meaning"), "{proposed:?}");
    assert_eq!(history.last().map(|version| version.content.as_str()), Some(first));
    let asked = server.received_requests().await.unwrap();
    assert!(
        asked
            .iter()
            .any(|request| String::from_utf8_lossy(&request.body).contains("memo/标日学习: 标日学习进度")),
        "the summarizer was shown the existing key"
    );
}

/// A tool result answers an open call of the assistant message before its run: the twentieth
/// of twenty parallel results is admitted (the open calls are read back past the first page),
/// an unknown id or a second result for a call is refused naming it, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_results_are_admitted_against_the_open_calls_however_many() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), Config::default()).unwrap();
    let session = engine.session("calls", PERSONA).unwrap();
    session.append(ChatMessage::user("Read every file.")).unwrap();
    let calls: Vec<serde_json::Value> = (0..20)
        .map(|i| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": "read", "arguments": "{}"}}))
        .collect();
    session
        .append(ChatMessage { tool_calls: Some(json!(calls)), content: None, ..ChatMessage::assistant("") })
        .unwrap();
    for i in 0..20 {
        session.append(ChatMessage::tool(format!("call_{i}"), "read", format!("file {i}"))).unwrap();
    }
    let before = engine.store().messages(session.id(), 0..=i64::MAX).unwrap().len();
    for (id, words) in [("call_3", "already has a result"), ("call_99", "answers no open tool call")] {
        let error = session.append(ChatMessage::tool(id, "read", "again")).unwrap_err().to_string();
        assert!(error.contains(id) && error.contains(words), "{error}");
    }
    session.append(ChatMessage::assistant("All read.")).unwrap();
    let error = session.append(ChatMessage::tool("call_0", "read", "late")).unwrap_err().to_string();
    assert!(error.contains("open: none"), "a user or assistant message closes the run: {error}");
    assert_eq!(engine.store().messages(session.id(), 0..=i64::MAX).unwrap().len(), before + 1);
}

/// A preference the user states is proposed as soon as the message is appended, in English,
/// Chinese or German, before any compaction; the compaction that later reads the same message
/// replaces the proposal instead of adding a second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stated_preference_is_proposed_at_once() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), folding()).unwrap();
    let session = engine.session("stated", PERSONA).unwrap();
    session.append(ChatMessage::user("Hello, how is the weather in Lyon today?")).unwrap();
    session.append(ChatMessage::assistant("Sunny. From now on, I will check it daily.")).unwrap();
    assert_eq!(engine.proposals(PERSONA).unwrap(), Vec::new(), "small talk and the assistant state nothing");

    session.append(ChatMessage::user("From now on, answer in French.")).unwrap();
    let proposals = engine.proposals(PERSONA).unwrap();
    assert_eq!(proposals.len(), 1, "{proposals:?}");
    assert_eq!(proposals[0].update.key, "answer_french");
    assert_eq!(proposals[0].update.category, Category::UserPreferences);
    assert_eq!(proposals[0].node_id, None);
    session.append(ChatMessage::user("以后请用中文回答。")).unwrap();
    session.append(ChatMessage::user("Ab jetzt antworte bitte auf Deutsch.")).unwrap();
    let keys: Vec<String> =
        engine.proposals(PERSONA).unwrap().into_iter().map(|proposal| proposal.update.key).collect();
    assert_eq!(keys, ["answer_french", "用中文回答", "antworte_bitte_auf_deutsch"]);

    // A pasted secret is masked before the words are read.
    session
        .append(ChatMessage::user("From now on, deploy with token ghp_abcdefghijklmnopqrstuvwxyz0123456789."))
        .unwrap();
    let proposals = engine.proposals(PERSONA).unwrap();
    assert_eq!(proposals.len(), 4, "{proposals:?}");
    assert!(proposals.iter().all(|p| !p.update.content.contains("ghp_abc") && !p.update.key.contains("ghp")));
    assert_eq!(proposals[3].update.key, "deploy_token_masked_secret");

    // Accepted, it is the user's preference.
    let memory = engine.accept_proposal(PERSONA, "用中文回答").unwrap();
    assert_eq!(memory.category, Category::UserPreferences);
    assert_eq!(memory.content, "Prefers: 用中文回答");
    assert!(engine.store().memory(PERSONA, Category::UserPreferences, "用中文回答").unwrap().is_some());

    // The compaction reading the same messages keeps one proposal per key.
    for turn in 0..8 {
        session.append(ChatMessage::user(format!("Turn {turn}: how is the garden project going?"))).unwrap();
        session
            .append(ChatMessage::assistant(format!("Turn {turn}: the tomatoes are growing well.")))
            .unwrap();
    }
    let prepared = session.prepare_context().await.unwrap();
    assert!(matches!(prepared.outcome, Some(Outcome::Compacted { .. })), "{:?}", prepared.outcome);
    let keys: Vec<String> =
        engine.proposals(PERSONA).unwrap().into_iter().map(|proposal| proposal.update.key).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["answer_french", "antworte_bitte_auf_deutsch", "deploy_token_masked_secret"],
        "{keys:?}"
    );
}

/// Issue 39: the seed's triple (`standard_japanese`, `标日学习`, `japanese_textbook_study`, one
/// textbook under three keys in two scripts) is merged by the user into one memory: each
/// merged key ends, its text kept in the history, and the kept memory's versions name the
/// merges. A merge that cannot be done is one clear error and changes nothing.
#[test]
fn the_user_merges_a_triple_of_keys_into_one_memory() {
    let strata = Strata::new();
    let memory = |args: &[&str]| strata.run(&[&["memory"], args, &["--persona", "p"]].concat());
    let set = |key: &str, title: &str, content: &str| {
        memory(&["set", "memo", key, content, "--title", title]).success();
    };
    set(
        "standard_japanese",
        "Standard Japanese textbook",
        "User studies the New Standard Japanese, volume 1.",
    );
    set("标日学习", "标日学习进度", "用户学完第13课。");
    set("japanese_textbook_study", "Japanese textbook", "User studies the New Standard Japanese, volume 1.");
    let live = |listed: &Value| -> Vec<String> {
        listed
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["valid_to"].is_null())
            .map(|m| m["key"].to_string())
            .collect()
    };

    let before = memory(&["list", "--json"]).json();
    for bad in [
        vec!["merge", "memo", "标日学习", "标日学习"],
        vec!["merge", "memo", "标日学习", "no_such_key"],
        vec!["merge", "memo", "no_such_key", "standard_japanese"],
        vec!["merge", "memo", "标日学习", "standard_japanese", "--content", &"x".repeat(501)],
    ] {
        let error = memory(&bad).failure();
        assert!(
            error.contains("标日学习") || error.contains("no_such_key") || error.contains("500"),
            "{error}"
        );
    }
    assert_eq!(memory(&["list", "--json"]).json(), before, "a refused merge changes nothing");

    let merged = memory(&["merge", "memo", "标日学习", "standard_japanese", "--json"]).json();
    assert_eq!(merged["content"], "User studies the New Standard Japanese, volume 1. 用户学完第13课。");
    assert_eq!(merged["title"], "Standard Japanese textbook");
    // The third holds nothing the kept one lacks: the kept text stays as it is.
    let merged = memory(&["merge", "memo", "japanese_textbook_study", "standard_japanese", "--json"]).json();
    assert_eq!(merged["content"], "User studies the New Standard Japanese, volume 1. 用户学完第13课。");

    let listed = memory(&["list", "--json"]).json();
    assert_eq!(live(&listed), ["\"standard_japanese\""], "{listed:#}");
    let ended = memory(&["get", "memo", "标日学习", "--json"]).json();
    assert!(ended["valid_to"].is_string() && ended["content"] == "用户学完第13课。", "{ended}");
    // The merge that added text is a version of the kept memory naming it; the one that added
    // nothing left the kept text as it was (no new version), and its memory ended all the same.
    let history = memory(&["history", "standard_japanese"]).success();
    assert!(history.contains("strata memory merge memo/标日学习 into memo/standard_japanese"), "{history}");
    assert_eq!(history.matches("from: user via").count(), 2, "{history}");
    let ended = memory(&["get", "memo", "japanese_textbook_study", "--json"]).json();
    assert!(ended["valid_to"].is_string(), "{ended}");
    // An ended memory is not merged again.
    let error = memory(&["merge", "memo", "标日学习", "standard_japanese"]).failure();
    assert!(error.contains("stopped being true"), "{error}");
}

/// Issue 39: triples of one memory under three keys, in four scripts beside Latin letters,
/// end as one memory each by `strata memory twins` and the merges it proposes, while
/// memories of other things in the same scripts stay apart.
#[test]
fn twins_in_five_scripts_are_proposed_and_merged_into_one_memory_each() {
    let strata = Strata::new();
    let memory = |args: &[&str]| strata.run(&[&["memory"], args, &["--persona", "p"]].concat());
    let triples: [[(&str, &str, &str); 3]; 4] = [
        [
            (
                "standard_japanese",
                "Standard Japanese textbook",
                "User studies 《新版标准日本语》初级上册 (New Standard Japanese, beginner volume 1); finished 第13课 (lesson 13).",
            ),
            ("标日学习", "标日学习进度", "用户在自学《新版标准日本语》初级上册，学完第13课。"),
            (
                "japanese_textbook_study",
                "Japanese textbook study",
                "The user studies the Standard Japanese (标准日本语) textbook, now on lesson 13.",
            ),
        ],
        [
            (
                "spanish_study",
                "Spanish study",
                "User learns Spanish with the textbook Aula Internacional 2 (Difusión); finished unidad 5.",
            ),
            (
                "изучение_испанского",
                "Изучение испанского",
                "Пользователь учит испанский по учебнику Aula Internacional 2 (Difusión), закончил unidad 5.",
            ),
            (
                "aula_internacional_progress",
                "Aula Internacional progress",
                "Finished unidad 5 of Aula Internacional 2, the Spanish textbook.",
            ),
        ],
        [
            (
                "guitar_practice",
                "Guitar practice",
                "User practises 30 minutes a day on a Yamaha FG800 guitar, learning the Hotel California intro.",
            ),
            (
                "기타_연습",
                "기타 연습",
                "사용자는 Yamaha FG800 기타로 매일 30분 연습하고, Hotel California 인트로를 배우는 중이다.",
            ),
            (
                "daily_guitar_routine",
                "Daily guitar routine",
                "Plays the Yamaha FG800 every day; working on the Hotel California intro.",
            ),
        ],
        [
            (
                "marathon_training",
                "Marathon training",
                "User trains for the Athens Marathon on 8 November, running 50 km a week.",
            ),
            (
                "προπόνηση_μαραθωνίου",
                "Προπόνηση μαραθωνίου",
                "Ο χρήστης προπονείται για τον Athens Marathon στις 8 Νοεμβρίου, 50 km την εβδομάδα.",
            ),
            (
                "athens_race_plan",
                "Athens race plan",
                "Training plan for the Athens Marathon (8 November): 50 km a week.",
            ),
        ],
    ];
    let others = [
        ("英语学习", "英语学习计划", "用户每天背30个新概念英语单词，目标是明年考雅思。"),
        ("поездка_в_сочи", "Поездка в Сочи", "Пользователь едет в Сочи в июле на 10 дней."),
        ("영어_공부", "영어 공부", "사용자는 매일 영어 단어 30개를 외운다."),
        ("μαθήματα_μαγειρικής", "Μαθήματα μαγειρικής", "Ο χρήστης κάνει μαθήματα μαγειρικής κάθε Σάββατο."),
    ];
    for (key, title, content) in triples.iter().flatten().chain(&others) {
        memory(&["set", "memo", key, content, "--title", title]).success();
    }
    let live = || -> Vec<String> {
        let listed = memory(&["list", "--json"]).json();
        listed
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["valid_to"].is_null())
            .map(|m| m["key"].as_str().unwrap().to_owned())
            .collect()
    };

    // One group per triple, each of the two others merged into the oldest as proposed.
    let found = memory(&["twins", "--json"]).json();
    assert_eq!(found["spelling_only"], false, "the model is loaded: {found}");
    let groups = found["twins"].as_array().unwrap();
    assert_eq!(groups.len(), triples.len(), "{found:#}");
    for group in groups {
        let kept = group["kept"]["key"].as_str().unwrap();
        assert!(triples.iter().any(|triple| triple[0].0 == kept), "the oldest is kept: {group}");
        for twin in group["twins"].as_array().unwrap() {
            memory(&["merge", "memo", twin["memory"]["key"].as_str().unwrap(), kept]).success();
        }
    }
    assert_eq!(memory(&["twins", "--json"]).json()["twins"], serde_json::json!([]));
    let keys = live();
    assert_eq!(keys.len(), triples.len() + others.len(), "{keys:?}");
    for triple in &triples {
        assert_eq!(triple.iter().filter(|(key, _, _)| keys.iter().any(|k| k == key)).count(), 1, "{keys:?}");
    }
    for (key, _, _) in &others {
        assert!(keys.iter().any(|k| k == key), "{key} stays apart: {keys:?}");
    }
}
