//! memory_grep: planted needles, hostile queries, time bounds, CJK.

use serde_json::json;
use strata_seam::memories::{MemoryWrite, Writer};
use strata_seam::{Category, NewSummary};

use super::util::*;
use strata_seam::{Conversations, Forest, Maintenance, Memories};

fn filler(n: usize) -> Vec<String> {
    let topics =
        ["deploy the billing service", "retry the flaky test", "review the pull request", "update the docs"];
    (0..n).map(|i| format!("Routine note {i}: we should {} soon.", topics[i % topics.len()])).collect()
}

#[test]
fn planted_needles_are_found_with_their_fields() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("work", "coder").unwrap();
    let other_session = store.session("work-2", "coder").unwrap();
    let texts = filler(300);
    let mut texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    texts[137] = "The deploy key is stored under NEEDLE-xyzzy-42 in the vault.";
    let ids = append_texts(store, &session, "2024-05-01T08:00:00Z", &texts);
    let other_ids = append_texts(
        store,
        &other_session,
        "2024-05-02T08:00:00Z",
        &["A second needle: Quokka-Protocol-7 lives here."],
    );
    let node = store
        .insert_leaf(
            session.id,
            0,
            9,
            &NewSummary {
                headline: "The team chose the quasar-ledger format for exports.".into(),
                body: "- decision: quasar-ledger".into(),
                token_count: 10,
                summarizer: "extractive".into(),
                memory_updates: Vec::new(),
            },
        )
        .unwrap();
    store
        .put_memory(
            Writer::User,
            "coder",
            &MemoryWrite {
                category: Category::Memo,
                key: "export_format",
                title: "Export",
                content: "Always zebra-striped CSV",
            },
        )
        .unwrap();
    let ctx = ctx(store, &session);

    let answer = ok(&ctx, "memory_grep", json!({"query": "needle-XYZZY"}));
    assert_eq!(found(&answer), [("message".to_owned(), ids[137])]);
    let hit = &answer["results"][0];
    assert_eq!(hit["session"], "work");
    assert_eq!(hit["seq"], 137);
    assert_eq!(hit["role"], "assistant");
    assert!(hit["timestamp"].as_str().unwrap().starts_with("2024-05-01T10:17:00"), "{hit}");
    let snippet = unfence(hit["snippet"].as_str().unwrap());
    // The whole word holding the match is marked, not the fragment asked for.
    assert!(snippet.contains("«NEEDLE-xyzzy-42»"), "{snippet}");
    assert!(answer["notice"].as_str().unwrap().contains("not instructions"));

    // Another session of the same persona is searched too.
    let answer = ok(&ctx, "memory_grep", json!({"query": "quokka-protocol"}));
    assert_eq!(found(&answer), [("message".to_owned(), other_ids[0])]);
    // Summaries and memories.
    let answer = ok(&ctx, "memory_grep", json!({"query": "quasar-ledger"}));
    assert_eq!(found(&answer), [("summary".to_owned(), node.id.0)]);
    assert_eq!(answer["results"][0]["level"], 0);
    let answer = ok(&ctx, "memory_grep", json!({"query": "zebra striped"}));
    assert_eq!(answer["results"][0]["kind"], "memory");
    assert_eq!(answer["results"][0]["key"], "export_format");
    // Several words must all match; a phrase must match as a whole; `*` is a wildcard.
    assert_eq!(ok(&ctx, "memory_grep", json!({"query": "deploy vault"}))["count"], 1);
    assert_eq!(ok(&ctx, "memory_grep", json!({"query": "\"vault deploy\""}))["count"], 0);
    assert_eq!(ok(&ctx, "memory_grep", json!({"query": "NEEDLE*42"}))["count"], 1);
    // The limit is honoured.
    assert_eq!(ok(&ctx, "memory_grep", json!({"query": "routine note", "limit": 7}))["count"], 7);
    assert_eq!(ok(&ctx, "memory_grep", json!({"query": "routine note"}))["count"], 10);
}

#[test]
fn hostile_queries_get_a_normal_json_answer() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    append_texts(
        store,
        &session,
        "2024-05-01T08:00:00Z",
        &["plain text about OR and NEAR and quotes \" here", "SELECT * FROM messages; -- 🦀"],
    );
    let ctx = ctx(store, &session);
    let long = "x".repeat(10_240);
    let many_words = "word ".repeat(3000);
    let many_phrases = "\"a b\" ".repeat(500);
    let hostile: Vec<String> = [
        "\"",
        "\"\"",
        "'",
        "(",
        ")",
        "()",
        "NEAR(a b)",
        "NEAR/3",
        "a OR b",
        "OR",
        "AND",
        "NOT",
        "-foo",
        "+bar",
        "*",
        "**",
        "* * *",
        "a*",
        "*a*",
        "col:foo",
        "content:plain",
        "messages_fts:plain",
        "^start",
        "{a b}",
        "[x]",
        "'; DROP TABLE messages; --",
        "SELECT * FROM messages",
        "1=1 OR 1=1",
        "\"unbalanced",
        "a\"b\"c",
        "🦀🔥💥",
        "\u{202e}reversed",
        "nul\u{0}byte",
        "%",
        "_",
        "\\",
        "%_\\%",
        "bm25(messages_fts)",
        "rank",
        "\t\n\r",
        "   ",
        "x",
        "ü",
        "数据库",
        "plain",
        &long,
        &many_words,
        &many_phrases,
        "\"\"\"\"\"",
        "a\\\"b",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert!(hostile.len() >= 30);
    for query in &hostile {
        for args in [json!({"query": query}), json!({"query": query, "limit": 3, "start_time": "2024-01-01"})]
        {
            let answer = strata_recall::call_tool(&ctx, "memory_grep", &args);
            assert!(answer.is_object(), "{query:?}: {answer}");
            match answer.get("error") {
                None => assert!(answer["results"].is_array(), "{query:?}: {answer}"),
                Some(error) => {
                    assert_eq!(error["kind"], "invalid_argument", "{query:?}: {answer}");
                    let message = error["message"].as_str().unwrap();
                    assert!(!message.to_lowercase().contains("sql"), "{query:?}: {message}");
                }
            }
        }
    }
    // Wrong types and unknown fields are readable errors too.
    for args in [
        json!({}),
        json!({"query": 42}),
        json!({"query": null}),
        json!({"query": "plain", "limit": -1}),
        json!({"query": "plain", "limit": "ten"}),
        json!({"query": "plain", "start_time": "last tuesday"}),
        json!({"query": "plain", "start_time": "2024-05-02", "end_time": "2024-05-01"}),
        json!({"query": "plain", "persona": "someone-else"}),
        json!(["plain"]),
        json!("not json {"),
    ] {
        let error = err(&ctx, "memory_grep", args.clone());
        assert_eq!(error["kind"], "invalid_argument", "{args}: {error}");
    }
    // Arguments sent as a JSON string are accepted.
    assert_eq!(ok(&ctx, "memory_grep", json!("{\"query\": \"plain\"}"))["count"], 1);
    // Nothing was harmed.
    assert_eq!(store.stats().unwrap().messages, 2);
    assert_eq!(ok(&ctx, "memory_grep", json!({"query": "SELECT * FROM messages"}))["count"], 1);
    assert_eq!(ok(&ctx, "memory_grep", json!({"query": "🦀"}))["count"], 1);
}

#[test]
fn time_bounds_start_inclusive_end_exclusive_date_means_whole_day() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let times =
        ["2024-04-30T23:59:59Z", "2024-05-01T00:00:00Z", "2024-05-01T12:00:00Z", "2024-05-02T00:00:00Z"];
    let messages: Vec<_> = times
        .iter()
        .map(|t| message(strata_seam::Role::User, &format!("boundary marker at {t}"), at(t)))
        .collect();
    let ids: Vec<i64> = store.append(session.id, &messages).unwrap().into_iter().map(|id| id.0).collect();
    let ctx = ctx(store, &session);
    let ids_between = |start: Option<&str>, end: Option<&str>| {
        let mut args = json!({"query": "boundary marker", "limit": 50});
        if let Some(start) = start {
            args["start_time"] = json!(start);
        }
        if let Some(end) = end {
            args["end_time"] = json!(end);
        }
        let mut found: Vec<i64> =
            found(&ok(&ctx, "memory_grep", args)).into_iter().map(|(_, id)| id).collect();
        found.sort();
        found
    };
    // start_time is inclusive, end_time exclusive.
    assert_eq!(ids_between(Some("2024-05-01T00:00:00Z"), Some("2024-05-01T12:00:00Z")), [ids[1]]);
    assert_eq!(ids_between(Some("2024-05-01T12:00:00Z"), None), [ids[2], ids[3]]);
    assert_eq!(ids_between(None, Some("2024-05-01T00:00:00Z")), [ids[0]]);
    // Offsets are honoured.
    assert_eq!(ids_between(Some("2024-05-01T14:00:00+02:00"), Some("2024-05-01T12:00:01Z")), [ids[2]]);
    // A date alone: start is that midnight, end is the end of that day.
    assert_eq!(ids_between(Some("2024-05-01"), Some("2024-05-01")), [ids[1], ids[2]]);
    assert_eq!(ids_between(Some("2024-05-01"), Some("2024-05-02")), [ids[1], ids[2], ids[3]]);
    // An empty range is an error that says so.
    let error = err(
        &ctx,
        "memory_grep",
        json!({"query": "boundary", "start_time": "2024-05-02", "end_time": "2024-05-01T00:00:00Z"}),
    );
    assert!(error["message"].as_str().unwrap().contains("range is empty"), "{error}");
}

#[test]
fn cjk_substrings_are_found() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let ids = append_texts(
        store,
        &session,
        "2024-05-01T08:00:00Z",
        &[
            "我们决定把数据库迁移到新的集群上，周五完成。",
            "今日はデータベースのバックアップを取りました",
            "plain english",
        ],
    );
    let ctx = ctx(store, &session);
    let only = |query: &str| {
        found(&ok(&ctx, "memory_grep", json!({"query": query})))
            .into_iter()
            .map(|(_, id)| id)
            .collect::<Vec<_>>()
    };
    assert_eq!(only("数据库迁移"), [ids[0]]);
    assert_eq!(only("迁移"), [ids[0]]); // two characters: below the trigram size, still found
    assert_eq!(only("新的集群 周五"), [ids[0]]);
    assert_eq!(only("データベース"), [ids[1]]);
    assert!(only("数据库迁移到旧的").is_empty());
}

/// Regression: one message of a single repeated character made grep's snippet quadratic (a
/// 10 MB message did not answer in five minutes). The answer shows a bounded excerpt.
#[test]
fn a_huge_run_of_one_character_is_grepped() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let ids = append_texts(store, &session, "2024-05-01T08:00:00Z", &[&"x".repeat(10 << 20), "a short one"]);
    let answer = ok(&ctx(store, &session), "memory_grep", json!({"query": "xxx"}));
    assert_eq!(found(&answer), [("message".to_owned(), ids[0])]);
    let snippet = unfence(answer["results"][0]["snippet"].as_str().unwrap());
    assert!(snippet.starts_with("«xxx") && snippet.chars().count() < 1_000, "{}", snippet.len());
}

#[test]
fn a_bare_wildcard_lists_what_was_said_in_a_time_range_oldest_first_paged() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let texts = filler(12);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    // One message a minute from 09:00: 09:00 .. 09:11.
    let ids = append_texts(store, &session, "2024-05-01T09:00:00Z", &texts);
    let other = store.session("o", "other-persona").unwrap();
    append_texts(store, &other, "2024-05-01T09:00:30Z", &["Another persona's words, never listed."]);
    let ctx = ctx(store, &session);
    let listed = |args: serde_json::Value| {
        let answer = ok(&ctx, "memory_grep", args);
        let ids: Vec<i64> = found(&answer).into_iter().map(|(_, id)| id).collect();
        (ids, answer["next_offset"].as_u64())
    };
    let window = json!({"query": "*", "start_time": "2024-05-01T09:03:00Z", "end_time": "2024-05-01T09:10:00Z", "limit": 4});
    assert_eq!(listed(window.clone()), (ids[3..7].to_vec(), Some(4)));
    let mut next = window.clone();
    next["offset"] = json!(4);
    assert_eq!(listed(next), (ids[7..10].to_vec(), None));
    // Without a range: the newest first.
    let (newest, _) = listed(json!({"query": " * ", "limit": 3}));
    assert_eq!(newest, [ids[11], ids[10], ids[9]]);
    // An offset pages only a listing.
    let error = err(&ctx, "memory_grep", json!({"query": "deploy", "offset": 2}));
    assert!(error["message"].as_str().unwrap().contains("offset"), "{error}");
}
