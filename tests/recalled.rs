//! The recalled block through `Engine`, with the real embedding model: what was folded away
//! comes back for the request that needs it, nothing comes for a request about something never
//! said, the prefix stays byte-identical, and a dry run stores nothing.

use strata::{ChatMessage, Engine};
use strata_seam::{NewMessage, Role};

use crate::util::{Strata, folding};

const TOPICS: [&str; 6] = [
    "the quarterly marketing newsletter layout",
    "which font the brand guide prefers for headings",
    "the office plants that need watering on Mondays",
    "the team lunch order for Friday",
    "renaming the design review meeting",
    "the colour of the new conference room chairs",
];

/// A session whose first turn says where the staging database listens, then chat about other
/// things, folded.
fn folded_session(engine: &Engine) -> strata::EngineSession {
    let session = engine.session("chat-1", "assistant").unwrap();
    // The head (the first two messages) is never folded: the fact comes after it.
    session.append(ChatMessage::user("Hello!")).unwrap();
    session.append(ChatMessage::assistant("Hello, how can I help?")).unwrap();
    session
        .append(ChatMessage::user("Note for later: the staging database listens on port 5433 now."))
        .unwrap();
    session.append(ChatMessage::assistant("Noted: staging's database is on port 5433.")).unwrap();
    for round in 0..4 {
        for topic in TOPICS {
            session
                .append(ChatMessage::user(format!("Round {round}: what do you think about {topic}?")))
                .unwrap();
            session
                .append(ChatMessage::assistant(format!("About {topic}: let us keep it as it is for now.")))
                .unwrap();
        }
    }
    engine.embed_pending().unwrap();
    let runtime = strata::blocking::runtime().unwrap();
    runtime.block_on(session.prepare_context()).unwrap();
    session
}

fn request(text: &str) -> NewMessage {
    NewMessage::text(Role::User, text)
}

fn last_user_text(messages: &[serde_json::Value]) -> String {
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    last["content"].as_str().unwrap().to_owned()
}

#[test]
fn the_recalled_block_brings_back_what_was_folded_away_without_a_tool_round() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), folding()).unwrap();
    let session = folded_session(&engine);
    let stored = engine.store().messages(session.id(), 0..=i64::MAX).unwrap();
    let first = stored[2].id;
    assert!(stored[2].summary_id.is_some(), "the fact is folded away");
    let runtime = strata::blocking::runtime().unwrap();
    let now = chrono::Utc::now();
    let context = runtime
        .block_on(engine.preview(
            session.id(),
            Some(request("Which port does the staging database use?")),
            now,
        ))
        .unwrap();
    let block = context.recalled.as_ref().expect("a search ran");
    assert!(block.hits.iter().any(|hit| hit.message_id == first), "{block:?}");
    let text = last_user_text(&context.messages);
    assert!(text.contains("[Recalled From Earlier Messages]") && text.contains("port 5433"), "{text}");
    assert!(text.ends_with("Which port does the staging database use?"));
    assert!(context.tokens.recalled > 0 && context.tokens.total <= context.tokens.budget);
    // A dry run: the request's entry has no id and nothing was stored.
    assert_eq!(context.entries.last().unwrap().message_id, None);
    assert_eq!(engine.store().messages(session.id(), 0..=i64::MAX).unwrap().len(), stored.len());
}

#[test]
fn a_request_about_something_never_said_gets_an_empty_block() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), folding()).unwrap();
    let session = folded_session(&engine);
    let runtime = strata::blocking::runtime().unwrap();
    let context = runtime
        .block_on(engine.preview(
            session.id(),
            Some(request("How many moons does Jupiter have, roughly?")),
            chrono::Utc::now(),
        ))
        .unwrap();
    let block = context.recalled.as_ref().expect("a search ran");
    assert!(block.hits.is_empty(), "{block:?}");
    // At most a note on what semantic search could not cover (the summaries just written have
    // no vectors yet); no message.
    assert!(!last_user_text(&context.messages).contains("- message "));
}

#[test]
fn the_prefix_is_byte_identical_between_two_requests_without_a_compaction() {
    let strata = Strata::new();
    let mut config = folding();
    // Fold once, then leave the rest alone: no compaction between the two requests.
    let engine = Engine::open(strata.db(), config.clone()).unwrap();
    let session = folded_session(&engine);
    drop(engine);
    config.compactor.trigger_ratio = 0.75;
    config.compactor.target_ratio = 0.5;
    let engine = Engine::open(strata.db(), config).unwrap();
    let session = engine.session(&session.info().key, "assistant").unwrap();
    let runtime = strata::blocking::runtime().unwrap();
    session.append(ChatMessage::user("Which port does the staging database use?")).unwrap();
    let first = runtime.block_on(session.prepare_context()).unwrap();
    session.append(ChatMessage::assistant("Port 5433.")).unwrap();
    session.append(ChatMessage::user("And what did we say about the team lunch order?")).unwrap();
    let second = runtime.block_on(session.prepare_context()).unwrap();
    assert!(matches!(second.outcome, Some(strata_compactor::Outcome::BelowThreshold { .. })));
    assert_eq!(first.context.prefix_bytes(), second.context.prefix_bytes());
    assert!(first.context.prefix_len > 0);
    assert_ne!(last_user_text(first.messages()), last_user_text(second.messages()));
}

#[test]
fn a_template_without_the_recalled_placeholder_gets_the_block_right_before_the_request() {
    let strata = Strata::new();
    let mut config = folding();
    config.compactor.regular_template = "{preferences}Question: {request}".into();
    let engine = Engine::open(strata.db(), config).unwrap();
    let session = folded_session(&engine);
    let runtime = strata::blocking::runtime().unwrap();
    let context = runtime
        .block_on(engine.preview(
            session.id(),
            Some(request("Which port does the staging database use?")),
            chrono::Utc::now(),
        ))
        .unwrap();
    let text = last_user_text(&context.messages);
    let block = text.find("[Recalled From Earlier Messages]").expect("the block is there");
    assert!(text.starts_with("Question: ") && block > 0, "{text}");
    assert!(text.ends_with("Which port does the staging database use?"));
}

#[test]
fn without_the_model_the_keyword_side_serves_and_the_block_says_so() {
    let strata = Strata::new();
    let mut config = folding();
    config.recall.embed_assets = Some(strata.dir().join("no-model-here"));
    let engine = Engine::open(strata.db(), config).unwrap();
    let session = engine.session("chat-1", "assistant").unwrap();
    // The head (the first two messages) is never folded: the fact comes after it.
    session.append(ChatMessage::user("Hello!")).unwrap();
    session.append(ChatMessage::assistant("Hello, how can I help?")).unwrap();
    session
        .append(ChatMessage::user("Note for later: the staging database listens on port 5433 now."))
        .unwrap();
    session.append(ChatMessage::assistant("Noted.")).unwrap();
    for topic in TOPICS {
        session.append(ChatMessage::user(format!("What do you think about {topic}?"))).unwrap();
        session.append(ChatMessage::assistant(format!("About {topic}: keep it."))).unwrap();
    }
    let runtime = strata::blocking::runtime().unwrap();
    runtime.block_on(session.prepare_context()).unwrap();
    let context = runtime
        .block_on(engine.preview(session.id(), Some(request("staging database port")), chrono::Utc::now()))
        .unwrap();
    let block = context.recalled.as_ref().expect("a search ran");
    assert!(!block.hits.is_empty(), "keywords find it: {block:?}");
    assert!(block.partial.as_deref().is_some_and(|note| note.contains("keywords only")), "{block:?}");
}

/// A conversation fed turn by turn, a context prepared before each reply, in a window small
/// enough to compact several times: what each call sent, and whether a compaction ran first.
fn calls_of_a_growing_conversation(engine: &Engine, turns: usize) -> Vec<strata::PreparedContext> {
    let session = engine.session("growing", "assistant").unwrap();
    let runtime = strata::blocking::runtime().unwrap();
    session.append(ChatMessage::system("You are a helpful assistant for a small design team.")).unwrap();
    let mut calls = Vec::new();
    for turn in 0..turns {
        let topic = TOPICS[turn % TOPICS.len()];
        session
            .append(ChatMessage::user(format!(
                "Turn {turn}: what do you think about {topic}? Please answer with the one thing we should \
                 change first and why it matters for the team this week."
            )))
            .unwrap();
        calls.push(runtime.block_on(session.prepare_context()).unwrap());
        session
            .append(ChatMessage::assistant(format!(
                "On {topic} (turn {turn}): change the smallest visible thing first, tell the team on Monday, \
                 and check again on Friday whether anyone noticed."
            )))
            .unwrap();
    }
    calls
}

#[test]
fn between_compactions_each_call_extends_the_previous_one_byte_for_byte() {
    let strata = Strata::new();
    let mut config = strata::Config::default();
    // A window the tool definitions leave about 3,600 tokens of: folded every thirty turns or so.
    config.compactor.context_window_tokens = 6_000;
    config.compactor.reserve_tokens = 500;
    config.compactor.leaf_min_tokens = 100;
    config.compactor.leaf_chunk_tokens = 400;
    config.compactor.scaffold_body_tokens = 400;
    config.recall.proactive_tokens = 300;
    let engine = Engine::open(strata.db(), config).unwrap();
    let calls = calls_of_a_growing_conversation(&engine, 90);
    let compacted = |call: &strata::PreparedContext| {
        matches!(call.outcome, Some(strata_compactor::Outcome::Compacted { .. }))
    };
    assert!(calls.iter().filter(|call| compacted(call)).count() >= 2, "the conversation was folded twice");
    let mut extended = 0;
    let mut with_refill = 0;
    for pair in calls.windows(2) {
        let (previous, next) = (&pair[0].context, &pair[1].context);
        if compacted(&pair[1]) {
            continue;
        }
        // Everything before the previous request is sent again as it was, in the same place.
        let stable = previous.stable_len;
        assert!(stable > 0 && next.messages.len() > stable);
        assert_eq!(next.messages[..stable], previous.messages[..stable]);
        assert_eq!(
            serde_json::to_string(&next.messages[..stable]).unwrap(),
            serde_json::to_string(&previous.messages[..stable]).unwrap()
        );
        // ... and the next call's stable part holds the previous one's.
        assert!(next.stable_len > stable && next.stable_tokens > previous.stable_tokens);
        assert_eq!(next.prompt_cache_key, previous.prompt_cache_key);
        extended += 1;
        with_refill += usize::from(
            previous.entries.iter().any(|entry| entry.part == strata_compactor::context::Part::Recent),
        );
    }
    assert!(extended >= 60, "{extended} calls followed a call without a compaction between");
    assert!(with_refill >= 20, "the refilled turns are part of what stays: {with_refill}");
    // The newest request is where the stable part ends: it carries the injection.
    let last = &calls.last().unwrap().context;
    assert_eq!(last.messages[last.stable_len]["role"], "user");
    assert!(last.messages[last.stable_len]["content"].as_str().unwrap().contains("[Current Request]"));
    let tokens: u32 = last.entries[..last.stable_len].iter().map(|entry| entry.tokens).sum();
    assert_eq!(last.stable_tokens, tokens);
}

#[test]
fn a_new_sessions_opening_request_gets_what_the_personas_other_sessions_said() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), folding()).unwrap();
    folded_session(&engine);
    // A new session of the same persona opens with the question: its request is in the head.
    let session = engine.session("chat-2", "assistant").unwrap();
    session.append(ChatMessage::user("Which port does the staging database use?")).unwrap();
    let runtime = strata::blocking::runtime().unwrap();
    let prepared = runtime.block_on(session.prepare_context()).unwrap();
    let context = &prepared.context;
    assert_eq!(context.entries[0].part, strata_compactor::context::Part::Head);
    let block = context.recalled.as_ref().expect("a search ran");
    assert!(block.hits.iter().any(|hit| hit.session == "chat-1"), "{block:?}");
    let text = last_user_text(&context.messages);
    assert!(text.contains("[Recalled From Earlier Messages]") && text.contains("port 5433"), "{text}");
    assert!(text.ends_with("Which port does the staging database use?"));
    assert_eq!(context.stable_len, 0, "the opening request is the newest: nothing before it");
}

#[test]
fn a_regular_turn_gets_the_saved_memories_that_bear_on_its_request() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), folding()).unwrap();
    let session = folded_session(&engine);
    let runtime = strata::blocking::runtime().unwrap();
    let saved = runtime.block_on(session.call_tool(
        "save_memory",
        serde_json::json!({
            "category": "progress",
            "key": "deploy_plan",
            "title": "Deploy plan",
            "content": "Deploy plan: step 3 of 5 is done; the billing database migration is the next step.",
        }),
    ));
    assert!(saved.get("error").is_none(), "{saved}");
    let unrelated = runtime.block_on(session.call_tool(
        "save_memory",
        serde_json::json!({
            "category": "memo",
            "key": "lunch_order",
            "title": "Lunch order",
            "content": "Friday's team lunch: two vegetarian pizzas and one margherita.",
        }),
    ));
    assert!(unrelated.get("error").is_none(), "{unrelated}");
    engine.embed_pending().unwrap();
    // A regular turn: the session has earlier requests and the last message is a minute old.
    session.append(ChatMessage::user("Which step of the deploy plan comes next?")).unwrap();
    let prepared = runtime.block_on(session.prepare_context()).unwrap();
    let context = &prepared.context;
    assert_eq!(context.injection, strata_compactor::context::Injection::Regular);
    let block = context.recalled.as_ref().expect("a search ran");
    assert_eq!(block.memories, vec!["progress/deploy_plan".to_owned()], "{block:?}");
    let text = last_user_text(&context.messages);
    assert!(text.contains("- memory progress/deploy_plan (Deploy plan)"), "{text}");
    assert!(text.contains("billing database migration") && !text.contains("margherita"), "{text}");
    assert!(context.tokens.total <= context.tokens.budget);
}
