//! DESIGN.md §6 as properties, over random transcripts with random tool-call groups.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use strata_compactor::context::Part;
use strata_compactor::{AssembledContext, CompactorConfig, Error};
use strata_seam::{Level, Message, Role};

use crate::util::{Fixture, Turn, fixture, t0, words};
use strata_seam::Forest;

fn config() -> CompactorConfig {
    CompactorConfig {
        trigger_ratio: 0.0,
        target_ratio: 0.0,
        context_window_tokens: 3_000,
        reserve_tokens: 500,
        head_messages: 2,
        tail_turns: 2,
        tail_tokens: 600,
        leaf_min_tokens: 300,
        leaf_min_turns: 2,
        leaf_chunk_tokens: 300,
        context_consolidation_k: 2,
        max_rounds: 8,
        summary_target_tokens: 64,
        summary_max_tokens: 400,
        scaffold_body_tokens: 300,
        oversized_message_tokens: 200,
        ..CompactorConfig::default()
    }
}

fn turn_strategy() -> impl Strategy<Value = Turn> {
    (
        any::<u64>(),
        3usize..50,
        prop::collection::vec(5usize..260, 0..4),
        3usize..40,
        prop::bool::weighted(0.08),
    )
        .prop_map(|(seed, request_words, results, reply_words, pin_request)| Turn {
            request: words(seed, request_words),
            tool_results: results.iter().enumerate().map(|(i, &n)| words(seed ^ (i as u64 + 7), n)).collect(),
            reply: words(seed.rotate_left(17), reply_words),
            pin_request,
        })
}

/// Checks the stored forest: coverage exactly once, contiguous ranges, parents cover children,
/// no tool call split from its result, nothing lost or changed.
fn check_forest(fx: &Fixture, appended: &[Message]) {
    let messages = fx.store.all_messages(fx.session).unwrap();
    assert_eq!(
        messages,
        appended
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m.summary_id = messages[m.seq as usize].summary_id;
                m
            })
            .collect::<Vec<_>>(),
        "messages are never deleted or rewritten"
    );
    let nodes = fx.store.nodes(fx.session).unwrap();
    let by_id: HashMap<_, _> = nodes.iter().map(|n| (n.id, n)).collect();
    let mut leaf_ranges = Vec::new();
    for node in &nodes {
        assert!(node.first_seq <= node.last_seq);
        assert!(!node.headline.trim().is_empty() && !node.body.trim().is_empty());
        assert!(
            node.token_count < node.source_token_count,
            "node {} is not shorter than its sources",
            node.id
        );
        if node.level == Level::LEAF {
            let covered = fx.store.covered_messages(node.id).unwrap();
            let seqs: Vec<i64> = covered.iter().map(|m| m.seq).collect();
            let expected: Vec<i64> = (node.first_seq..=node.last_seq).collect();
            assert_eq!(seqs, expected, "node {} covers a contiguous range exactly", node.id);
            assert!(covered.iter().all(|m| !m.pinned), "pinned messages are never compacted");
            assert_ne!(
                messages[node.first_seq as usize].role,
                Role::Tool,
                "a leaf never starts with a tool result"
            );
            if let Some(next) = messages.get(node.last_seq as usize + 1) {
                assert_ne!(next.role, Role::Tool, "a leaf never ends before a tool result");
            }
            leaf_ranges.push((node.first_seq, node.last_seq));
        } else {
            let children = fx.store.children(node.id).unwrap();
            assert_eq!(children.len(), 2, "K = 2 children per merge");
            assert!(children.iter().all(|c| c.level.up() == node.level));
            assert_eq!(node.first_seq, children[0].first_seq);
            assert_eq!(node.last_seq, children[children.len() - 1].last_seq);
        }
        if let Some(parent) = node.parent_id {
            let parent = by_id[&parent];
            assert!(parent.first_seq <= node.first_seq && node.last_seq <= parent.last_seq);
        }
    }
    leaf_ranges.sort_unstable();
    for pair in leaf_ranges.windows(2) {
        assert!(pair[0].1 < pair[1].0, "Level-0 ranges never overlap: {pair:?}");
    }
    for message in &messages {
        if let Some(node) = message.summary_id {
            let node = by_id[&node];
            assert_eq!(node.level, Level::LEAF);
            assert!(node.first_seq <= message.seq && message.seq <= node.last_seq);
        }
    }
}

/// Checks an assembled context: budget, head, tail and pinned messages verbatim, tool calls
/// answered after they are made.
fn check_context(fx: &Fixture, config: &CompactorConfig, context: &AssembledContext) {
    assert!(context.tokens.total <= config.budget(), "{} > {}", context.tokens.total, config.budget());
    let messages = fx.store.all_messages(fx.session).unwrap();
    let shown: HashMap<i64, (usize, Part)> =
        context.entries.iter().enumerate().filter_map(|(i, e)| e.seq.map(|seq| (seq, (i, e.part)))).collect();
    let latest_user = messages.iter().rposition(|m| m.role == Role::User);
    let verbatim = |seq: usize| {
        let (index, _) = shown.get(&(seq as i64)).unwrap_or_else(|| panic!("seq {seq} is missing"));
        let sent = context.messages[*index]["content"].as_str().unwrap_or("");
        if Some(seq) == latest_user {
            assert!(sent.ends_with(&messages[seq].content), "the latest request keeps its text");
        } else {
            assert_eq!(sent, messages[seq].content, "seq {seq} is verbatim");
        }
    };
    // The head: the first head_messages messages, ending before a tool call whose results it
    // would cut off.
    let mut head_end = (config.head_messages as usize).min(messages.len());
    while head_end > 0 && head_end < messages.len() && messages[head_end].role == Role::Tool {
        head_end -= 1;
    }
    for seq in 0..head_end {
        assert_eq!(shown[&(seq as i64)].1, Part::Head);
        verbatim(seq);
    }
    // The newest turn is always in the tail.
    if let Some(latest) = latest_user {
        for seq in latest..messages.len() {
            verbatim(seq);
        }
    }
    for message in messages.iter().filter(|m| m.pinned) {
        verbatim(message.seq as usize);
    }
    // Every tool result follows the call that asked for it.
    let mut open_calls = HashSet::new();
    for message in &context.messages {
        if let Some(calls) = message["tool_calls"].as_array() {
            for call in calls {
                open_calls.insert(call["id"].as_str().unwrap().to_owned());
            }
        }
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap();
            assert!(open_calls.contains(id), "tool result {id} without its call");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn compaction_and_assembly_keep_the_invariants(
        batches in prop::collection::vec(prop::collection::vec(turn_strategy(), 1..12), 1..4),
        system in prop::bool::ANY,
    ) {
        let config = config();
        let fx = fixture(config.clone());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut minute = 0;
        if system {
            let mut prompt = strata_seam::NewMessage::text(Role::System, "You are a careful coding agent.");
            prompt.created_at = t0();
            fx.push(prompt, minute);
            minute += 1;
        }
        for batch in &batches {
            for turn in batch {
                minute = fx.push_turn(turn, minute);
            }
            let appended = fx.store.all_messages(fx.session).unwrap();
            runtime.block_on(fx.compact_fully());
            check_forest(&fx, &appended);
            match fx.compactor.assemble_blocking(fx.session, t0() + chrono::Duration::minutes(minute)) {
                Ok(context) => check_context(&fx, &config, &context),
                Err(Error::ContextTooLarge { needed, budget, .. }) => prop_assert!(needed > budget),
                Err(other) => panic!("{other}"),
            }
        }
        // Nothing was lost: the forest and the uncovered messages still reach every message.
        let messages = fx.store.all_messages(fx.session).unwrap();
        let mut reachable = 0;
        for node in fx.store.nodes(fx.session).unwrap().iter().filter(|n| n.level == Level::LEAF) {
            reachable += fx.store.covered_messages(node.id).unwrap().len();
        }
        reachable += messages.iter().filter(|m| m.summary_id.is_none()).count();
        prop_assert_eq!(reachable, messages.len());
    }
}
