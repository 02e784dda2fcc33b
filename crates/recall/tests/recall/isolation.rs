//! Two personas with overlapping content: no tool call of one ever returns a row of the other,
//! whatever it searches for and whichever ids it guesses.

use std::collections::HashSet;

use serde_json::{Value, json};
use strata_seam::memories::{MemoryWrite, Writer};
use strata_seam::{Category, NewSummary};
use strata_store::Store;

use super::util::*;
use strata_seam::{Conversations, Forest, Memories};

struct Owned {
    messages: HashSet<i64>,
    nodes: HashSet<i64>,
    memories: HashSet<i64>,
}

fn populate(store: &Store, persona: &str, secret: &str) -> Owned {
    let mut owned = Owned { messages: HashSet::new(), nodes: HashSet::new(), memories: HashSet::new() };
    for s in 0..2 {
        let session = store.session(&format!("{persona}-chat-{s}"), persona).unwrap();
        let texts = [
            "We deployed the billing service to the staging cluster.".to_owned(),
            "The merge conflict in src/main.rs took an hour to untangle.".to_owned(),
            format!("My private note: {secret}."),
            "Let's book a table for two on Friday.".to_owned(),
            "The deploy pipeline is green again.".to_owned(),
            "Remember the staging port is 8443.".to_owned(),
        ];
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        owned.messages.extend(append_texts(
            store,
            &session,
            &format!("2024-05-0{}T08:00:00Z", s + 1),
            &texts,
        ));
        let summary = |headline: &str| NewSummary {
            headline: headline.into(),
            body: format!("- shared: staging cluster deploy\n- {secret}"),
            token_count: 10,
            summarizer: "extractive".into(),
            memory_updates: Vec::new(),
        };
        let a = store.insert_leaf(session.id, 0, 1, &summary("Deployed billing to staging.")).unwrap();
        let b = store.insert_leaf(session.id, 2, 3, &summary("Booked a table.")).unwrap();
        let merged = store.merge(&[a.id, b.id], &summary("Staging deploy and dinner.")).unwrap();
        owned.nodes.extend([a.id.0, b.id.0, merged.id.0]);
    }
    for (category, key) in [
        (Category::Memo, "staging_port"),
        (Category::UserPreferences, "tone"),
        (Category::Progress, "deploy"),
    ] {
        let memory = store
            .put_memory(
                Writer::User,
                persona,
                &MemoryWrite {
                    category,
                    key,
                    title: "Shared",
                    content: &format!("staging cluster deploy; {secret}"),
                },
            )
            .unwrap();
        owned.memories.insert(memory.id.0);
    }
    owned
}

fn assert_only_own(answer: &Value, own: &Owned, foreign_secret: &str, context: &str) {
    let mut shown = answer.clone();
    if let Some(object) = shown.as_object_mut() {
        object.remove("query");
    }
    let text = shown.to_string();
    assert!(!text.contains(foreign_secret), "{context}: leaked the other persona's text: {text}");
    for result in answer["results"].as_array().into_iter().flatten() {
        let id = result["id"].as_i64().unwrap();
        let set = match result["kind"].as_str().unwrap() {
            "message" => &own.messages,
            "summary" => &own.nodes,
            "memory" => &own.memories,
            other => panic!("{other}"),
        };
        assert!(set.contains(&id), "{context}: foreign {result}");
    }
}

#[test]
fn no_tool_call_of_one_persona_returns_a_row_of_the_other() {
    let fx = fixture();
    let store = &fx.store;
    let alice = populate(store, "alice", "alice-secret-ORCHID");
    let bob = populate(store, "bob", "bob-secret-CACTUS");
    embed_all(store);
    let alice_session = store.find_session("alice-chat-0").unwrap().unwrap();
    let ctx = ctx(store, &alice_session);

    for query in [
        "staging cluster",
        "deploy",
        "merge conflict",
        "bob-secret-CACTUS",
        "CACTUS",
        "secret",
        "table for two",
    ] {
        let grep = ok(&ctx, "memory_grep", json!({"query": query, "limit": 50}));
        assert_only_own(&grep, &alice, "CACTUS", &format!("grep {query}"));
        let search = ok(&ctx, "memory_search", json!({"query": query, "limit": 50}));
        assert_only_own(&search, &alice, "CACTUS", &format!("search {query}"));
        assert!(search["count"].as_u64().unwrap() > 0);
    }
    assert_eq!(ok(&ctx, "memory_grep", json!({"query": "CACTUS"}))["count"], 0);

    // Guessing ids: every id up to past the largest gets alice's row or not_found.
    let max_id = 40;
    for id in 0..=max_id {
        let view = strata_recall::call_tool(&ctx, "view_message", &json!({"message_id": id}));
        if alice.messages.contains(&id) {
            assert_eq!(view["message"]["id"], id);
            assert_only_own(&view, &alice, "CACTUS", "view");
            for neighbour in
                view["before"].as_array().unwrap().iter().chain(view["after"].as_array().unwrap())
            {
                assert!(alice.messages.contains(&neighbour["id"].as_i64().unwrap()));
            }
        } else {
            assert_eq!(view["error"]["kind"], "not_found", "view {id}: {view}");
            if bob.messages.contains(&id) {
                // Exactly the answer a missing id gets: nothing says the row exists.
                let missing =
                    strata_recall::call_tool(&ctx, "view_message", &json!({"message_id": 1_000_000 + id}));
                assert_eq!(
                    view["error"]["message"].as_str().unwrap().replace(&id.to_string(), "N"),
                    missing["error"]["message"].as_str().unwrap().replace(&(1_000_000 + id).to_string(), "N")
                );
            }
        }
        let expand = strata_recall::call_tool(&ctx, "expand_summary", &json!({"node_id": id}));
        if alice.nodes.contains(&id) {
            assert_only_own(&expand, &alice, "CACTUS", "expand");
            for child in expand["children"].as_array().into_iter().flatten() {
                assert!(alice.nodes.contains(&child["id"].as_i64().unwrap()));
            }
            for message in expand["messages"].as_array().into_iter().flatten() {
                assert!(alice.messages.contains(&message["id"].as_i64().unwrap()));
            }
        } else {
            assert_eq!(expand["error"]["kind"], "not_found", "expand {id}: {expand}");
        }
    }
    assert!(bob.messages.iter().all(|id| *id <= max_id) && bob.nodes.iter().all(|id| *id <= max_id));

    let history = ok(&ctx, "view_chat_history_summary", json!({}));
    assert!(!history.to_string().contains("CACTUS") && !history.to_string().contains("bob-chat"));
    let timeline: Vec<i64> =
        history["timeline"].as_array().unwrap().iter().map(|e| e["node_id"].as_i64().unwrap()).collect();
    assert_eq!(timeline.len(), 2);
    assert!(timeline.iter().all(|id| alice.nodes.contains(id)));
    // Alice's two sessions and the one the tools are called from.
    assert_eq!(history["sessions"].as_array().unwrap().len(), 3);

    // The persona cannot be named in arguments.
    let error = err(&ctx, "memory_grep", json!({"query": "CACTUS", "persona": "bob"}));
    assert_eq!(error["kind"], "invalid_argument");
    // save_memory writes to the caller's persona only.
    ok(&ctx, "save_memory", json!({"category": "memo", "key": "alice_only", "title": "t", "content": "c"}));
    assert!(store.memory("bob", Category::Memo, "alice_only").unwrap().is_none());
    assert!(store.memory("alice", Category::Memo, "alice_only").unwrap().is_some());
}
