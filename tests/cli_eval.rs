//! `strata eval`: the retrieval evaluation on the shared dev set (a subset of its questions, to
//! keep the suite short) and the planted-facts check on short generated conversations.

use std::path::Path;

use crate::util::Strata;

/// The dev set, beside the repository (as the README's set-up lays it out).
const DATA: &str = "../shared/eval/conversations";

#[test]
fn retrieval_eval_reports_recall_next_to_bm25() {
    assert!(Path::new(DATA).join("questions.jsonl").is_file(), "the dev set is missing at {DATA}");
    let strata = Strata::new();
    let report = strata.run(&["eval", "retrieval", "--data", DATA, "--questions", "60", "--json"]).json();
    assert_eq!(report["questions"], 60);
    let retrievers = report["retrievers"].as_array().unwrap();
    let recall_at_10 = |name: &str| {
        let entry = retrievers.iter().find(|r| r["retriever"].as_str().unwrap().trim() == name).unwrap();
        entry["overall"][2].as_f64().unwrap()
    };
    let (bm25, search) = (recall_at_10("bm25 baseline (speaker: text)"), recall_at_10("memory_search"));
    assert!(search > bm25, "memory_search {search:.1} vs bm25 {bm25:.1}: {report:#}");
    assert!(search > 50.0, "{report:#}");
}

#[test]
fn a_missing_data_directory_is_one_clear_error() {
    let strata = Strata::new();
    let error = strata.run(&["eval", "retrieval", "--data", "no/such/dir"]).failure();
    assert!(error.contains("no/such/dir/questions.jsonl"), "{error}");
}

#[test]
fn planted_facts_said_in_other_words_are_found() {
    let strata = Strata::new();
    let report = strata.run(&["eval", "planted", "--messages", "400", "--json"]).json();
    let ranks = report.as_array().unwrap();
    for conversation in ["pair programming week", "team group chat"] {
        let secret = ranks
            .iter()
            .find(|r| r["conversation"] == conversation && r["kind"] == "secret")
            .unwrap_or_else(|| panic!("no secret planted in {conversation}: {report:#}"));
        let rank = secret["rank"].as_u64();
        assert!(rank.is_some_and(|r| r <= 3), "{conversation}: {secret}");
    }
}

#[test]
fn the_cache_eval_finds_strata_reusing_what_a_sliding_window_rewrites() {
    let strata = Strata::new();
    let report = strata
        .run(&[
            "eval",
            "cache",
            "--data",
            DATA,
            "--window",
            "6000",
            "--messages",
            "150",
            "--week-messages",
            "0",
            "--json",
        ])
        .json();
    let rows = report.as_array().unwrap();
    let row = |context: &str| rows.iter().find(|row| row["context"] == context).unwrap();
    let (sliding, strata) = (row("sliding window"), row("strata"));
    assert!(strata["full_calls"].as_u64().unwrap() > 20, "the window filled: {report:#}");
    assert!(strata["compactions"].as_u64().unwrap() > 0, "{report:#}");
    // Between compactions every call extends the previous one: only compactions break it.
    assert!(strata["breaks_per_100"].as_f64() <= Some(15.0), "{report:#}");
    assert!(strata["reusable"].as_f64().unwrap() > 3.0 * sliding["reusable"].as_f64().unwrap(), "{report:#}");
    assert!(strata["cost_vs_sliding"].as_f64().unwrap() < 0.6, "{report:#}");
}
