//! The recalled block through `Engine`, with the real embedding model: what was folded away
//! comes back for the request that needs it, nothing comes for a request about something never
//! said, the prefix stays byte-identical, and a dry run stores nothing.

use strata::{ChatMessage, Engine};
use strata_store::{NewMessage, Role};

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
