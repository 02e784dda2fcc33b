//! Reciprocal-rank fusion beats each of its parts on a small labelled set.
//!
//! Metric: mean reciprocal rank (MRR) of the one relevant message per query, over the first 10
//! results; also hits@1. The set mixes paraphrase queries (no shared words: keywords fail) with
//! identifier queries (ticket numbers, flag names, ports: the sentence model cannot tell
//! `INC-4473` from `INC-4471`, keywords can). Each part's ranking is read from the same fused
//! answer: every candidate carries its `semantic_rank` and `keyword_rank`.

use serde_json::{Value, json};

use super::util::*;
use strata_seam::Conversations;

const DOCS: [&str; 21] = [
    "The CI pipeline failed because a required package was not installed.",
    "Incident INC-4471: the payment webhook returned 502 errors for an hour.",
    "Incident INC-4472: the login page returned 500 errors after the deploy.",
    "Incident INC-4473: the search API timed out under heavy load.",
    "Incident INC-4474: the email queue backed up overnight.",
    "What a merge conflict mess, I had to redo the whole branch by hand.",
    "Let's book a table for two at the Italian place on Friday evening.",
    "The database password rotates every 30 days through Vault.",
    "Set the staging port to 8443 in config/staging.toml.",
    "Set the production port to 443 in config/prod.toml.",
    "My cat knocked the coffee mug off the desk again.",
    "We agreed to ship version 2.3 after the security review.",
    "Use the feature flag checkout_v2 to roll out the new checkout.",
    "Use the feature flag search_v3 to roll out the new search.",
    "The quarterly revenue grew by eight percent.",
    "Bananas are a good source of potassium.",
    "The train to Lyon was delayed by forty minutes.",
    "Remember to renew the TLS certificate for api.example.com before June.",
    "Build 7731 failed on the arm64 runner.",
    "Build 7732 failed on the arm64 runner.",
    "Build 7733 failed on the arm64 runner.",
];

/// (query, index of the relevant document).
const QUERIES: [(&str, usize); 16] = [
    ("the rebase blew up", 5),
    ("dinner reservation this weekend", 6),
    ("build broke since a dependency was missing", 0),
    ("my pet broke something on my desk", 10),
    ("how often is the vault secret changed", 7),
    ("release after the security audit", 11),
    ("the railway journey was late", 16),
    ("INC-4473", 3),
    ("INC-4471 outage", 1),
    ("INC-4474", 4),
    ("flag search_v3", 13),
    ("port 8443", 8),
    ("checkout_v2", 12),
    ("api.example.com expiry", 17),
    ("build 7732", 19),
    ("7733 arm64", 20),
];

fn rank_by(results: &[Value], field: &str, wanted: i64) -> Option<usize> {
    let mut ranked: Vec<(usize, i64)> = results
        .iter()
        .filter_map(|r| r[field].as_u64().map(|rank| (rank as usize, r["id"].as_i64().unwrap())))
        .collect();
    ranked.sort();
    ranked.iter().position(|&(_, id)| id == wanted).map(|p| p + 1)
}

#[test]
fn fusion_beats_semantic_alone_and_keywords_alone() {
    let fx = fixture();
    let store = &fx.store;
    let session = store.session("s", "p").unwrap();
    let ids = append_texts(store, &session, "2024-05-01T08:00:00Z", &DOCS);
    embed_all(store);
    let ctx = ctx(store, &session);

    let reciprocal = |rank: Option<usize>| rank.filter(|&r| r <= 10).map_or(0.0, |r| 1.0 / r as f64);
    let (mut semantic, mut keyword, mut fused) = (0.0, 0.0, 0.0);
    let (mut semantic_top, mut keyword_top, mut fused_top) = (0, 0, 0);
    let mut report = String::new();
    for (query, relevant) in QUERIES {
        let wanted = ids[relevant];
        let answer = ok(&ctx, "memory_search", json!({"query": query, "limit": 50}));
        let results = answer["results"].as_array().unwrap();
        let s = rank_by(results, "semantic_rank", wanted);
        let k = rank_by(results, "keyword_rank", wanted);
        let f = results.iter().position(|r| r["id"] == wanted).map(|p| p + 1);
        semantic += reciprocal(s);
        keyword += reciprocal(k);
        fused += reciprocal(f);
        semantic_top += usize::from(s == Some(1));
        keyword_top += usize::from(k == Some(1));
        fused_top += usize::from(f == Some(1));
        report.push_str(&format!("{query:45} semantic {s:?} keyword {k:?} fused {f:?}\n"));
    }
    let n = QUERIES.len() as f64;
    let (semantic, keyword, fused) = (semantic / n, keyword / n, fused / n);
    let summary = format!(
        "{report}MRR@10: semantic {semantic:.3}, keyword {keyword:.3}, fused {fused:.3}; \
         hits@1: semantic {semantic_top}, keyword {keyword_top}, fused {fused_top} of {}",
        QUERIES.len()
    );
    println!("{summary}");
    assert!(fused > semantic && fused > keyword, "{summary}");
    assert!(fused_top > semantic_top && fused_top > keyword_top, "{summary}");
    assert!(fused >= 0.9, "{summary}");
}
