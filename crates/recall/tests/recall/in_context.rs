//! memory_grep and memory_search leave out what the calling context already holds verbatim.

use serde_json::json;
use strata_recall::{RecallSettings, ToolContext};
use strata_seam::NewSummary;

use super::util::*;
use strata_seam::{Conversations, Forest};

#[test]
fn messages_still_in_the_callers_context_are_left_out_and_counted() {
    let fx = fixture();
    let store = &fx.store;
    let old = store.session("last-week", "coder").unwrap();
    let today = store.session("today", "coder").unwrap();
    let old_ids = append_texts(
        store,
        &old,
        "2024-05-01T08:00:00Z",
        &["The gateway rate limit is 100 requests per second.", "Noted, 100 per second."],
    );
    let today_ids = append_texts(
        store,
        &today,
        "2024-05-08T08:00:00Z",
        &[
            "We moved the gateway config last month.",
            "Yes, it lives in services/gateway/config.toml now.",
            "Before that, the gateway limit was hard-coded.",
            "Right, in the old limiter.",
            "What is the gateway rate limit again?",
        ],
    );
    // The first two messages of today are summarized: no longer in the context verbatim.
    store
        .insert_leaf(
            today.id,
            0,
            1,
            &NewSummary {
                headline: "The gateway config moved.".into(),
                body: "- gateway config in services/gateway/config.toml".into(),
                token_count: 12,
                summarizer: "extractive".into(),
                memory_updates: Vec::new(),
            },
        )
        .unwrap();
    embed_all(store);
    let ctx = ToolContext::new(store.clone(), today.clone(), embedder(), RecallSettings::default());

    let answer = ok(&ctx, "memory_grep", json!({"query": "gateway"}));
    let ids: Vec<i64> =
        found(&answer).into_iter().filter(|(k, _)| k == "message").map(|(_, id)| id).collect();
    // The question just asked and the two later messages of today are left out; the covered
    // ones and last week's are found.
    assert_eq!(answer["left_out_in_context"], 2, "{answer:#}");
    assert!(
        ids.contains(&old_ids[0]) && ids.contains(&today_ids[0]) && ids.contains(&today_ids[1]),
        "{answer:#}"
    );
    assert!(!ids.contains(&today_ids[2]) && !ids.contains(&today_ids[4]), "{answer:#}");

    let all = ok(&ctx, "memory_grep", json!({"query": "gateway", "include_in_context": true}));
    assert!(found(&all).contains(&("message".into(), today_ids[4])), "{all:#}");
    assert!(all.get("left_out_in_context").is_none(), "{all:#}");

    let searched = ok(&ctx, "memory_search", json!({"query": "gateway rate limit"}));
    assert!(searched["left_out_in_context"].as_u64().unwrap() >= 1, "{searched:#}");
    assert!(!found(&searched).contains(&("message".into(), today_ids[4])), "{searched:#}");
    assert!(found(&searched).contains(&("message".into(), old_ids[0])), "{searched:#}");
}
