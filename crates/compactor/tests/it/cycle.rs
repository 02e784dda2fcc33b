//! The cycle: 2K -> K merges, prefix stability, oversized stubs, snapshots.

use std::sync::Arc;

use strata_compactor::context::Part;
use strata_compactor::{CompactorConfig, ExtractiveSummarizer, Outcome, ToolNames, render_tree};
use strata_seam::{NewMessage, Role};

use crate::util::{Fixture, Turn, fixture, fixture_as_configured, t0, tool_names, words};
use strata_seam::{Conversations, Forest};

/// Settings where every turn (about 150 tokens) becomes one Level-0 node of its own.
fn one_turn_per_leaf() -> CompactorConfig {
    CompactorConfig {
        trigger_ratio: 0.0,
        target_ratio: 0.0,
        head_messages: 0,
        tail_turns: 1,
        tail_tokens: 10_000,
        leaf_min_tokens: 1,
        leaf_min_turns: 1,
        leaf_chunk_tokens: 64,
        context_consolidation_k: 2,
        max_rounds: 64,
        ..CompactorConfig::default()
    }
}

fn big_turn(i: u64) -> Turn {
    Turn::plain(format!("Request {i}: {}", words(i, 60)), format!("Reply {i}: {}", words(i + 1000, 60)))
}

#[tokio::test]
async fn two_k_roots_of_a_level_merge_their_oldest_k() {
    let fx = fixture(one_turn_per_leaf());
    let mut minute = 0;
    for i in 0..7 {
        minute = fx.push_turn(&big_turn(i), minute);
    }
    // 7 turns, the newest protected: 6 leaves. At 4 level-0 roots the oldest 2 merge, twice:
    // levels [6, 2], roots [2 level-0, 2 level-1].
    let outcome = fx.compact_fully().await;
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 8, pending: false, .. }), "{outcome:?}");
    assert_eq!(fx.levels(), vec![6, 2]);
    assert_eq!(fx.root_levels(), vec![2, 2]);

    for i in 7..11 {
        minute = fx.push_turn(&big_turn(i), minute);
    }
    // 10 leaves: level 0 merges twice more (4 level-1 nodes), which makes 4 level-1 roots,
    // whose oldest 2 merge into one level-2 node: levels [10, 4, 1], roots [2, 2, 1].
    fx.compact_fully().await;
    assert_eq!(fx.levels(), vec![10, 4, 1]);
    assert_eq!(fx.root_levels(), vec![2, 2, 1]);
    let uncovered: Vec<i64> = fx
        .store
        .all_messages(fx.session)
        .unwrap()
        .iter()
        .filter(|m| m.summary_id.is_none())
        .map(|m| m.seq)
        .collect();
    assert_eq!(uncovered, vec![20, 21], "only the newest turn stays uncompacted");
}

#[tokio::test]
async fn the_prefix_is_byte_identical_between_compactions() {
    let config = CompactorConfig {
        trigger_ratio: 0.0,
        target_ratio: 0.0,
        head_messages: 1,
        tail_turns: 2,
        leaf_min_tokens: 2_500,
        leaf_min_turns: 2,
        leaf_chunk_tokens: 1_500,
        ..CompactorConfig::default()
    };
    let fx = fixture(config);
    let mut minute = 0;
    fx.push(NewMessage::text(Role::System, "You are a careful coding agent."), minute);
    let mut prefixes = Vec::new();
    let mut compactions = Vec::new();
    for i in 0..100u64 {
        minute = fx.push_turn(&Turn::plain(format!("Turn {i}: {}", words(i, 12)), words(i + 7, 14)), minute);
        let outcome = fx.compactor.compact(fx.session).await.unwrap();
        if matches!(outcome, Outcome::Compacted { .. }) {
            compactions.push(i);
        }
        let context =
            fx.compactor.assemble(fx.session, t0() + chrono::Duration::minutes(minute)).await.unwrap();
        prefixes.push(context.prefix_bytes());
    }
    assert!(
        compactions.first().is_some_and(|&first| first >= 50),
        "50 turns stay below the threshold: {compactions:?}"
    );
    assert_eq!(compactions.len(), 2, "100 short turns hold two chunks' worth: {compactions:?}");
    let changes: Vec<u64> =
        (1..prefixes.len()).filter(|&i| prefixes[i] != prefixes[i - 1]).map(|i| i as u64).collect();
    assert_eq!(changes, compactions, "the prefix changes exactly when a compaction happens");
}

#[tokio::test]
async fn oversized_buffer_messages_become_stubs_and_stay_whole_in_the_store() {
    let config = CompactorConfig {
        head_messages: 0,
        tail_turns: 1,
        oversized_message_tokens: 200,
        ..CompactorConfig::default()
    };
    let fx = fixture(config);
    let huge = Turn {
        request: "Show me the build log.".into(),
        tool_results: vec![words(99, 3_000)],
        reply: "The log shows one warning.".into(),
        pin_request: false,
    };
    let minute = fx.push_turn(&huge, 0);
    fx.push_turn(&Turn::plain("Thanks, what next?", "Next we fix the warning."), minute);
    let context = fx.compactor.assemble(fx.session, t0()).await.unwrap();
    let stub = context.entries.iter().position(|e| e.abridged).expect("a stub");
    let text = context.messages[stub]["content"].as_str().unwrap();
    let id = context.entries[stub].message_id.unwrap();
    assert!(text.starts_with(&format!("[message {id} (seq 2, tool) is ")), "{text}");
    assert!(text.contains(&format!("view_message(message_id={id})")), "{text}");
    assert_eq!(context.messages[stub]["tool_call_id"], "call_1_0", "the stub still answers its call");
    assert_eq!(context.stubbed_messages, 1);
    assert_eq!(fx.store.message(id).unwrap().content, words(99, 3_000));
    assert!(context.entries[stub].tokens < 200);
}

#[tokio::test]
async fn head_and_tail_that_cannot_fit_are_a_typed_error() {
    let config = CompactorConfig {
        context_window_tokens: 1_000,
        reserve_tokens: 200,
        scaffold_body_tokens: 100,
        ..CompactorConfig::default()
    };
    let fx = fixture(config);
    fx.push_turn(&Turn::plain(words(1, 2_000), "ok"), 0);
    let err = fx.compactor.assemble(fx.session, t0()).await.unwrap_err();
    match err {
        strata_compactor::Error::ContextTooLarge { needed, budget, .. } => {
            assert_eq!(budget, 800);
            assert!(needed > 800);
        }
        other => panic!("{other}"),
    }
}

fn snapshot_fixture() -> crate::util::Fixture {
    let config = CompactorConfig {
        trigger_ratio: 0.0,
        target_ratio: 0.0,
        head_messages: 2,
        tail_turns: 1,
        leaf_min_tokens: 1,
        leaf_min_turns: 1,
        leaf_chunk_tokens: 200,
        context_consolidation_k: 2,
        ..CompactorConfig::default()
    };
    let fx = fixture(config);
    let mut minute = 0;
    fx.push(NewMessage::text(Role::System, "You are a careful coding agent."), minute);
    minute += 1;
    let turns = [
        Turn::plain("Deploy the billing service to staging; it listens on port 8080.", "Deployed billing to staging on port 8080."),
        Turn {
            request: "Run the migrations.".into(),
            tool_results: vec!["Error: migration 0042 failed: relation \"invoices\" does not exist".into()],
            reply: "Migration 0042 failed because the invoices table is missing. We decided to run scripts/create_invoices.sql first.".into(),
            pin_request: false,
        },
        Turn::plain("Bump the version in Cargo.toml to 1.4.2.", "Done: Cargo.toml says 1.4.2 and src/main.rs prints it."),
        Turn::plain("Why is p99 latency 420ms on /checkout?", "The cache in src/cache.rs misses on every request; we will switch to an LRU of 10000 entries."),
        Turn::plain("Add a retry with timeout 30s to the payment client.", "Added retries (3 attempts, timeout 30s) in src/payment/client.rs."),
        Turn::plain("Summarize where we are.", "Billing is on staging, migrations pass, latency fix pending."),
    ];
    for turn in &turns {
        minute = fx.push_turn(turn, minute);
    }
    fx
}

#[tokio::test]
async fn snapshot_of_a_rendered_context() {
    let fx = snapshot_fixture();
    fx.compact_fully().await;
    let context = fx.compactor.assemble(fx.session, t0() + chrono::Duration::hours(1)).await.unwrap();
    let mut rendered = String::new();
    for (message, entry) in context.messages.iter().zip(&context.entries) {
        rendered.push_str(&format!(
            "--- {:?} {} seq={:?} tokens={}\n",
            entry.part, message["role"], entry.seq, entry.tokens
        ));
        if let Some(calls) = message.get("tool_calls") {
            rendered.push_str(&format!("tool_calls: {calls}\n"));
        }
        rendered.push_str(message["content"].as_str().unwrap_or("<null>"));
        rendered.push('\n');
    }
    rendered.push_str(&format!("=== {:?}\n", context.tokens));
    assert!(context.entries.iter().any(|e| e.part == Part::Scaffold));
    insta::assert_snapshot!("rendered_context", rendered);
}

#[tokio::test]
async fn snapshot_of_the_tree() {
    let fx = snapshot_fixture();
    fx.compact_fully().await;
    insta::assert_snapshot!("tree", render_tree(&fx.store, fx.session).unwrap());
}

#[tokio::test]
async fn compaction_follows_the_window_it_fills() {
    // A 39k-token chat in a 200k window fits comfortably: nothing is folded.
    let fx = fixture(CompactorConfig { context_window_tokens: 200_000, ..CompactorConfig::default() });
    let mut minute = 0;
    let mut i = 0;
    while fx.compactor.context_size(fx.session).await.unwrap() < 39_000 {
        minute = fx.push_turn(&big_turn(i), minute);
        i += 1;
    }
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    assert!(matches!(outcome, Outcome::BelowThreshold { .. }), "{outcome:?}");
    assert!(fx.store.nodes(fx.session).unwrap().is_empty());

    // The same chat in a 40k window (budget 36k) is past 75%: folded to about half of it.
    let config =
        CompactorConfig { context_window_tokens: 40_000, max_rounds: 64, ..CompactorConfig::default() };
    let small = fixture(config.clone());
    let mut minute = 0;
    for i in 0..i {
        minute = small.push_turn(&big_turn(i), minute);
    }
    let before = small.compactor.context_size(small.session).await.unwrap();
    assert!(before > 27_000, "{before}");
    let outcome = small.compactor.compact(small.session).await.unwrap();
    let Outcome::Compacted { tokens_after, .. } = outcome else { panic!("{outcome:?}") };
    let (_, target) = config.trigger_and_target();
    assert!(
        tokens_after <= target + u64::from(config.leaf_chunk_tokens),
        "{tokens_after} vs target {target}"
    );
    assert!(tokens_after >= target / 2, "folded only down to the target, not everything: {tokens_after}");
}

/// Folded turns (a scaffold and its acknowledgement) and a huge tool result in the buffer (a
/// stub): every text of the context that can point to a tool.
async fn texts_that_point_to_tools(fx: &Fixture) -> Vec<String> {
    let mut minute = 0;
    for i in 0..7 {
        minute = fx.push_turn(&big_turn(i), minute);
    }
    fx.compact_fully().await;
    let huge = Turn {
        request: "Show me the build log.".into(),
        tool_results: vec![words(99, 3_000)],
        reply: "The log shows one warning.".into(),
        pin_request: false,
    };
    minute = fx.push_turn(&huge, minute);
    fx.push_turn(&Turn::plain("Thanks, what next?", "Next we fix the warning."), minute);
    let context = fx.compactor.assemble(fx.session, t0()).await.unwrap();
    assert!(context.entries.iter().any(|e| e.part == Part::Scaffold), "a scaffold");
    assert_eq!(context.stubbed_messages, 1, "a stub");
    context.messages.iter().map(|m| m["content"].as_str().unwrap_or_default().to_owned()).collect()
}

fn every_name(names: &ToolNames) -> [&str; 6] {
    [
        &names.expand_summary,
        &names.view_message,
        &names.memory_grep,
        &names.memory_search,
        &names.memory_list,
        &names.view_chat_history_summary,
    ]
}

#[tokio::test]
async fn the_context_names_the_tools_by_the_names_it_is_given() {
    let renamed = ToolNames {
        expand_summary: "open_node".into(),
        view_message: "read_message".into(),
        memory_grep: "grep_history".into(),
        memory_search: "search_history".into(),
        memory_list: "list_memories".into(),
        view_chat_history_summary: "timeline".into(),
    };
    let config = CompactorConfig {
        oversized_message_tokens: 200,
        tool_names: Some(renamed.clone()),
        ..one_turn_per_leaf()
    };
    let texts = texts_that_point_to_tools(&fixture(config)).await.join("\n");
    for name in every_name(&tool_names()) {
        assert!(!texts.contains(name), "{name} is not a tool here:\n{texts}");
    }
    for named in [
        "open_node(node_id)",
        "read_message(message_id=",
        "grep_history and search_history",
        "I will use open_node",
    ] {
        assert!(texts.contains(named), "{named}:\n{texts}");
    }
    let guidelines = strata_compactor::context::bootstrap_template(Some(&renamed));
    assert_eq!(guidelines.matches("`timeline`").count(), 2, "{guidelines}");
}

#[tokio::test]
async fn a_compactor_given_no_tool_names_names_no_tool() {
    let config = CompactorConfig { oversized_message_tokens: 200, tool_names: None, ..one_turn_per_leaf() };
    let fx = fixture_as_configured(config, Arc::new(ExtractiveSummarizer::default()));
    let texts = texts_that_point_to_tools(&fx).await;
    let all = texts.join("\n");
    for name in every_name(&tool_names()) {
        assert!(!all.contains(name), "{name}:\n{all}");
    }
    assert!(texts.iter().any(|text| text == "Understood. I have the summaries of the earlier conversation."));
    assert!(all.contains("It is stored whole. It begins: "), "{all}");
    let guidelines = strata_compactor::context::bootstrap_template(None);
    assert!(!guidelines.contains("tool") && guidelines.contains("{request}"), "{guidelines}");
}
