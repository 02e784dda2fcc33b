//! save_memory: protection, limits, key normalization, near-duplicate keys; memory expiry.

use serde_json::json;
use strata_recall::{RecallConfig, purge_expired};
use strata_seam::memories::{MemoryTtls, MemoryUpdate, MemoryWrite, Ttl, Writer};
use strata_seam::{Category, NewSummary};

use super::util::*;
use strata_seam::{Conversations, Forest, Memories};

#[test]
fn user_preferences_are_read_only_and_limits_are_enforced() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    store
        .put_memory(
            Writer::User,
            "p",
            &MemoryWrite {
                category: Category::UserPreferences,
                key: "tone",
                title: "Tone",
                content: "Be brief.",
            },
        )
        .unwrap();
    let ctx = ctx(store, &session);

    let error = err(
        &ctx,
        "save_memory",
        json!({"category": "user_preferences", "key": "tone", "title": "Tone", "content": "Be verbose."}),
    );
    assert_eq!(error["kind"], "forbidden");
    assert!(error["message"].as_str().unwrap().contains("read-only"), "{error}");
    assert_eq!(store.memory("p", Category::UserPreferences, "tone").unwrap().unwrap().content, "Be brief.");
    let error = err(
        &ctx,
        "save_memory",
        json!({"category": "user_preferences", "key": "new_pref", "title": "x", "content": "y"}),
    );
    assert_eq!(error["kind"], "forbidden");

    let error = err(
        &ctx,
        "save_memory",
        json!({"category": "memo", "key": "long", "title": "Long", "content": "é".repeat(501)}),
    );
    assert_eq!(error["kind"], "invalid_argument");
    assert!(error["message"].as_str().unwrap().contains("500"), "{error}");
    ok(
        &ctx,
        "save_memory",
        json!({"category": "memo", "key": "long", "title": "Long", "content": "é".repeat(500)}),
    );

    for bad in [
        json!({"category": "secrets", "key": "k", "title": "t", "content": "c"}),
        json!({"category": "memo", "key": "!!!", "title": "t", "content": "c"}),
        json!({"category": "memo", "key": "k", "title": "t", "content": "   "}),
        json!({"category": "memo", "key": "k", "title": "", "content": "c"}),
        json!({"category": "memo", "key": "k", "title": "t"}),
    ] {
        assert_eq!(err(&ctx, "save_memory", bad.clone())["kind"], "invalid_argument", "{bad}");
    }
}

#[test]
fn keys_are_normalized_and_upserted() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let ctx = ctx(store, &session);
    let first = ok(
        &ctx,
        "save_memory",
        json!({"category": "progress", "key": "Deploy Steps!", "title": "Deploy", "content": "1. build"}),
    );
    assert_eq!(first["created"], true);
    assert_eq!(first["memory"]["key"], "deploy_steps");
    assert_eq!(first["key_normalized_from"], "Deploy Steps!");
    let second = ok(
        &ctx,
        "save_memory",
        json!({"category": "progress", "key": "deploy_steps", "title": "Deploy", "content": "1. build 2. ship"}),
    );
    assert_eq!(second["created"], false);
    assert_eq!(
        store.memory("p", Category::Progress, "deploy_steps").unwrap().unwrap().content,
        "1. build 2. ship"
    );
    assert_eq!(store.memories("p", None).unwrap().len(), 1);
}

#[test]
fn near_duplicate_keys_name_the_existing_key() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let ctx = ctx(store, &session);
    ok(
        &ctx,
        "save_memory",
        json!({"category": "progress", "key": "deploy_steps", "title": "Deploy", "content": "build, ship"}),
    );
    ok(
        &ctx,
        "save_memory",
        json!({"category": "memo", "key": "user_timezone", "title": "TZ", "content": "Europe/Paris"}),
    );
    ok(
        &ctx,
        "save_memory",
        json!({"category": "memo", "key": "database_password_rotation", "title": "DB", "content": "30 days"}),
    );

    for (category, key, existing) in [
        ("progress", "deploy_step", "deploy_steps"),  // one edit
        ("progress", "Deploy-Steps", "deploy_steps"), // normalizes to the same key: an update, see below
        ("memo", "timezone_user", "user_timezone"),   // same words, other order
        ("memo", "deploy_steps", "deploy_steps"),     // same key in another category
        ("memo", "db_password_rotation", "database_password_rotation"), // close in spelling
        ("memo", "users_time_zone", "user_timezone"), // close in spelling
    ] {
        let answer = strata_recall::call_tool(
            &ctx,
            "save_memory",
            &json!({"category": category, "key": key, "title": "x", "content": "y"}),
        );
        if key == "Deploy-Steps" {
            assert_eq!(answer["created"], false, "{answer}");
            continue;
        }
        let error = &answer["error"];
        assert_eq!(error["kind"], "near_duplicate_key", "{key}: {answer}");
        assert_eq!(error["existing_key"], existing, "{key}: {answer}");
        assert!(error["message"].as_str().unwrap().contains(existing));
    }
    // Different keys are not flagged.
    ok(
        &ctx,
        "save_memory",
        json!({"category": "memo", "key": "favourite_editor", "title": "Editor", "content": "helix"}),
    );
    // A twin on purpose.
    let forced = ok(
        &ctx,
        "save_memory",
        json!({"category": "progress", "key": "deploy_step", "title": "x", "content": "y", "allow_new_key": true}),
    );
    assert_eq!(forced["created"], true);
}

#[test]
fn near_duplicate_by_meaning_uses_the_model() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let ctx = ctx(store, &session);
    ok(
        &ctx,
        "save_memory",
        json!({"category": "memo", "key": "user_timezone", "title": "TZ", "content": "UTC+2"}),
    );
    ok(
        &ctx,
        "save_memory",
        json!({"category": "memo", "key": "staging_port", "title": "Port", "content": "8443"}),
    );
    // Spelled apart (no shared word order, many edits) but the same meaning.
    let error = err(
        &ctx,
        "save_memory",
        json!({"category": "memo", "key": "time_zone_of_the_user", "title": "TZ", "content": "UTC+2"}),
    );
    assert_eq!(error["kind"], "near_duplicate_key", "{error}");
    assert_eq!(error["existing_key"], "user_timezone");
    // Related but different things stay apart.
    ok(
        &ctx,
        "save_memory",
        json!({"category": "memo", "key": "production_port", "title": "Port", "content": "443"}),
    );
    ok(
        &ctx,
        "save_memory",
        json!({"category": "memo", "key": "weekly_grocery_list", "title": "Food", "content": "eggs"}),
    );
}

#[test]
fn expired_memories_are_invisible_and_purged() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    for (category, key) in [(Category::Memo, "old_note"), (Category::Progress, "task_state")] {
        store
            .put_memory(
                Writer::User,
                "p",
                &MemoryWrite { category, key, title: "Heliotrope", content: "heliotrope marker text" },
            )
            .unwrap();
    }
    embed_all(store);
    // Default TTLs: memo and progress never expire.
    let live = ctx(store, &session);
    assert_eq!(ok(&live, "memory_grep", json!({"query": "heliotrope"}))["count"], 2);

    // A memo TTL of zero days expires every memo at once.
    let config = RecallConfig {
        memory_ttls: MemoryTtls { memo: Ttl::Days(0), ..MemoryTtls::default() },
        ..RecallConfig::default()
    };
    let expiring = ctx_with(store, &session, config.clone());
    let grep = ok(&expiring, "memory_grep", json!({"query": "heliotrope"}));
    assert_eq!(grep["count"], 1);
    assert_eq!(grep["results"][0]["key"], "task_state");
    let search = ok(&expiring, "memory_search", json!({"query": "heliotrope marker", "limit": 50}));
    assert!(search["results"].as_array().unwrap().iter().all(|r| r["key"] != "old_note"), "{search}");
    // Saving near an expired key is not a near-duplicate: the expired memory is gone for the agent.
    ok(
        &expiring,
        "save_memory",
        json!({"category": "progress", "key": "old_notes", "title": "t", "content": "c"}),
    );

    let purged = purge_expired(store, &config, chrono::Utc::now()).unwrap();
    assert!(purged.contains(&(Category::Memo, 1)), "{purged:?}");
    assert!(store.memory("p", Category::Memo, "old_note").unwrap().is_none());
    assert!(store.memory("p", Category::Progress, "task_state").unwrap().is_some());
    assert_eq!(ok(&live, "memory_grep", json!({"query": "heliotrope"}))["count"], 1);
}

/// Regression: with several writers saving the same new key at once, more than one was told
/// `created: true` (the check ran before the write transaction). Now exactly one is.
#[test]
fn racing_writers_hear_the_truth_about_created() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    for key in 0..10 {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let created: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|writer| {
                    let barrier = barrier.clone();
                    let ctx = ctx(store, &session);
                    scope.spawn(move || {
                        barrier.wait();
                        let answer = ok(
                            &ctx,
                            "save_memory",
                            json!({"category": "progress", "key": format!("task_{key}"), "title": "Task",
                                   "content": format!("step from writer {writer}"), "allow_new_key": true}),
                        );
                        usize::from(answer["created"] == true)
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).sum()
        });
        assert_eq!(created, 1, "key task_{key}: {created} writers were told they created it");
    }
}

#[test]
fn memory_list_pages_through_the_personas_memories_newest_first() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let ctx = ctx(store, &session);
    for i in 0..25 {
        let category = if i % 5 == 0 { "memo" } else { "progress" };
        ok(
            &ctx,
            "save_memory",
            json!({"category": category, "key": format!("task {i} of release"),
            "title": format!("Task {i}"), "content": format!("step {i} done"), "allow_new_key": true}),
        );
    }
    // Another persona's memory is never listed.
    let other = store.session("t", "q").unwrap();
    ok(
        &crate::recall::util::ctx(store, &other),
        "save_memory",
        json!({"category": "memo", "key": "secret", "title": "Secret", "content": "zebra"}),
    );

    let first = ok(&ctx, "memory_list", json!({}));
    assert_eq!(first["total"], 25);
    assert_eq!(first["memories"].as_array().unwrap().len(), 20);
    assert_eq!(first["memories"][0]["key"], "task_24_of_release", "newest first");
    let rest = ok(&ctx, "memory_list", json!({"offset": first["next_offset"]}));
    assert_eq!(rest["memories"].as_array().unwrap().len(), 5);
    assert!(rest["next_offset"].is_null());
    let memos = ok(&ctx, "memory_list", json!({"category": "memo", "limit": 2}));
    assert_eq!((memos["total"].as_u64(), memos["next_offset"].as_u64()), (Some(5), Some(2)));
    let prefixed = ok(&ctx, "memory_list", json!({"key_prefix": "task 1"}));
    assert_eq!(prefixed["total"], 11, "task_1 and task_10..task_19: {prefixed}");
    assert!(!first.to_string().contains("zebra") && !rest.to_string().contains("zebra"));
    let bad = err(&ctx, "memory_list", json!({"category": "secrets"}));
    assert_eq!(bad["kind"], "invalid_argument");
}

/// The summary of one chunk of `session`, carrying `facts`, written as a Level-0 node (which
/// queues the facts, as a compaction does); the chunk is one new message.
fn summary_with_facts(store: &strata_store::Store, session: &strata_seam::Session, facts: &[MemoryUpdate]) {
    let seqs = append_texts(store, session, "2026-11-02T09:00:00Z", &["今天学完了第13课。"]);
    let seq = store.messages(session.id, 0..=i64::MAX).unwrap().last().map(|m| m.seq).unwrap();
    assert_eq!(seqs.len(), 1);
    let summary = NewSummary {
        headline: "The user finished lesson 13.".into(),
        body: "- lesson 13 done".into(),
        token_count: 8,
        summarizer: "scripted".into(),
        memory_updates: facts.to_vec(),
    };
    store.insert_leaf(session.id, seq, seq, &summary).unwrap();
}

fn fact(key: &str, title: &str, content: &str) -> MemoryUpdate {
    MemoryUpdate {
        category: Category::Memo,
        key: key.into(),
        title: title.into(),
        content: content.into(),
        edit: None,
    }
}

/// Issue 24: the summaries proposed `japanese_textbook_study` and `standard_japanese` next to
/// `标日学习`, three keys for the user studying the Standard Japanese textbook. Checked by
/// meaning (key, title and content, across scripts), each updates the one memory, and its
/// history says which key was proposed and how alike it was.
#[test]
fn a_summarys_twin_in_other_words_or_another_script_updates_the_existing_memory() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let config = RecallConfig::default();
    let model = embedder();
    summary_with_facts(
        store,
        &session,
        &[fact(
            "标日学习",
            "标日学习进度",
            "用户在自学《新版标准日本语》初级上册，学完第12课，每天学习一小时。",
        )],
    );
    let first = strata_recall::settle_memory_updates(store, &config, Some(&model)).unwrap();
    assert_eq!((first.saved, first.merged, first.spelling_only), (1, 0, false), "{first:?}");

    for (key, title, content) in [
        (
            "japanese_textbook_study",
            "Japanese textbook study",
            "The user studies the Standard Japanese (标准日本语) textbook, now on lesson 13.",
        ),
        (
            "standard_japanese",
            "Standard Japanese textbook",
            "User works through 新版标准日本语 (Standard Japanese) elementary vol. 1; finished lesson 13.",
        ),
    ] {
        summary_with_facts(store, &session, &[fact(key, title, content)]);
        let settled = strata_recall::settle_memory_updates(store, &config, Some(&model)).unwrap();
        assert_eq!((settled.saved, settled.merged), (1, 1), "{key}: {settled:?}");
        let memories = store.memories("p", None).unwrap();
        assert_eq!(memories.len(), 1, "{key} forked a twin: {memories:?}");
        assert_eq!((memories[0].key.as_str(), memories[0].title.as_str()), ("标日学习", "标日学习进度"));
        assert_eq!(memories[0].content, content, "the news is in the one memory");
    }
    let history = store.memory_history("p", Category::Memo, "标日学习").unwrap();
    assert_eq!(history.len(), 3, "{history:#?}");
    // Newest first: each merged version names the key the summary proposed and the likeness.
    for (version, proposed) in history.iter().zip(["standard_japanese", "japanese_textbook_study"]) {
        let via = version.provenance.via.as_deref().unwrap_or_default();
        assert!(
            via.contains(&format!("proposed as key {proposed} titled: "))
                && via.contains("by meaning (cosine 0."),
            "{via}"
        );
        assert!(version.provenance.node.is_some(), "still from its summary node: {:?}", version.provenance);
    }
    assert!(history[2].content.contains("第12课"), "the first version is kept");
}

/// A fact about something else in the same field and category is its own memory, and without
/// the model twins are found by spelling only, which the result says.
#[test]
fn a_different_fact_of_the_same_category_is_not_merged_and_no_model_means_spelling_only() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let config = RecallConfig::default();
    let model = embedder();
    let textbook = fact(
        "standard_japanese",
        "Standard Japanese textbook",
        "User works through 新版标准日本语 (Standard Japanese) elementary vol. 1; finished lesson 12.",
    );
    summary_with_facts(store, &session, &[textbook]);
    strata_recall::settle_memory_updates(store, &config, Some(&model)).unwrap();
    for different in [
        fact(
            "jlpt_n4_exam",
            "JLPT N4 exam date",
            "User registered for the JLPT N4 exam on 2026-12-06 in Shanghai.",
        ),
        fact("英语学习", "英语学习计划", "用户每天背30个新概念英语单词，目标是明年考雅思。"),
    ] {
        summary_with_facts(store, &session, &[different]);
        let settled = strata_recall::settle_memory_updates(store, &config, Some(&model)).unwrap();
        assert_eq!((settled.saved, settled.merged), (1, 0), "{settled:?}");
    }
    let mut keys: Vec<String> = store.memories("p", None).unwrap().into_iter().map(|m| m.key).collect();
    keys.sort();
    assert_eq!(keys, ["jlpt_n4_exam", "standard_japanese", "英语学习"]);

    // No model: the twin in another script is not seen, and the result says why.
    summary_with_facts(
        store,
        &session,
        &[fact("标日学习", "标日学习进度", "用户在自学《新版标准日本语》初级上册，学完第13课。")],
    );
    let blind = strata_recall::settle_memory_updates(store, &config, None).unwrap();
    assert_eq!((blind.saved, blind.merged, blind.spelling_only), (1, 0, true), "{blind:?}");
    // A twin by spelling is still caught without it.
    summary_with_facts(store, &session, &[fact("standard_japanese_", "x", "lesson 14")]);
    summary_with_facts(store, &session, &[fact("standard_japaneses", "Standard Japanese", "lesson 14")]);
    let spelled = strata_recall::settle_memory_updates(store, &config, None).unwrap();
    // The first is the key itself, whose two words would replace the whole memory: held for
    // the user (issue 39); the second, its twin by spelling, updates it.
    assert_eq!((spelled.saved, spelled.merged, spelled.held), (1, 1, 1), "{spelled:?}");
}

/// Issue 39: consolidation never rewrites a memory blindly. An update that would drop half of
/// a memory without saying the old content stopped being true is not written: it waits as a
/// proposal, and accepting it writes it, with its source. An update that keeps what holds is
/// written; a supersede dates the old content, which `as_of` still returns.
#[test]
fn an_update_that_would_drop_half_a_memory_is_refused_and_kept_as_a_proposal() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let config = RecallConfig::default();
    let original = "Deploys go out on Thursdays after 14:00 from the release branch, approved by Dana";
    summary_with_facts(store, &session, &[fact("deploy_rules", "Deploy rules", original)]);
    assert_eq!(strata_recall::settle_memory_updates(store, &config, None).unwrap().saved, 1);

    // Half the memory gone, nothing said about it: held.
    let blind = "Deploys go out on Mondays";
    summary_with_facts(store, &session, &[fact("deploy_rules", "Deploy rules", blind)]);
    let settled = strata_recall::settle_memory_updates(store, &config, None).unwrap();
    assert_eq!((settled.saved, settled.held), (0, 1), "{settled:?}");
    assert_eq!(store.memory("p", Category::Memo, "deploy_rules").unwrap().unwrap().content, original);
    assert_eq!(store.memory_history("p", Category::Memo, "deploy_rules").unwrap().len(), 1);
    let proposals = store.proposals("p").unwrap();
    assert_eq!(proposals.len(), 1, "{proposals:?}");
    assert_eq!((proposals[0].update.category, proposals[0].update.content.as_str()), (Category::Memo, blind));
    assert!(store.pending_updates(10).unwrap().is_empty(), "settled: a proposal, not a pending fact");

    // An update that keeps what holds goes through.
    let kept = format!("{original}; hotfixes any day");
    summary_with_facts(store, &session, &[fact("deploy_rules", "Deploy rules", &kept)]);
    let settled = strata_recall::settle_memory_updates(store, &config, None).unwrap();
    assert_eq!((settled.saved, settled.held), (1, 0), "{settled:?}");
    assert_eq!(store.memory("p", Category::Memo, "deploy_rules").unwrap().unwrap().content, kept);

    // The user accepts the held update: it is written, sourced to the proposal and its node.
    let accepted = store.accept_proposal("p", "deploy_rules").unwrap();
    assert_eq!((accepted.category, accepted.content.as_str()), (Category::Memo, blind));
    let history = store.memory_history("p", Category::Memo, "deploy_rules").unwrap();
    assert_eq!(history.len(), 3);
    assert!(history[0].provenance.node.is_some() && history[0].provenance.first_seq.is_some(), "{history:?}");

    // A supersede says the old content stopped being true: written, and the old dated.
    let new = "Deploys go out on Fridays only";
    summary_with_facts(
        store,
        &session,
        &[MemoryUpdate {
            edit: Some(strata_seam::memories::Edit::Supersede),
            ..fact("deploy_rules", "Deploy rules", new)
        }],
    );
    let settled = strata_recall::settle_memory_updates(store, &config, None).unwrap();
    assert_eq!((settled.superseded, settled.held), (1, 0), "{settled:?}");
    let current = store.memory("p", Category::Memo, "deploy_rules").unwrap().unwrap();
    assert_eq!(current.content, new);
    let history = store.memory_history("p", Category::Memo, "deploy_rules").unwrap();
    assert_eq!(history[1].content, blind);
    // The messages that said so are older than the memory's text: it ended when it began.
    assert_eq!(history[1].valid_to, Some(current.valid_from), "{history:?}");

    // A bad setting is one clear error.
    let bad = RecallConfig { max_dropped_share: 1.5, ..RecallConfig::default() };
    assert!(bad.validate().unwrap_err().to_string().contains("max_dropped_share"));
}
