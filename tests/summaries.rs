//! The extractive summarizer with sentence vectors from the local model (`SentenceModel`), and
//! its lexical fallback when the model is missing.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use strata::SentenceModel;
use strata::compactor::summarize::{Origin, SourceItem, SourceKind, Summary, SummaryRequest};
use strata::compactor::{ExtractiveSummarizer, TokenCounter};
use strata::recall::RecallConfig;
use strata::seam::Role;

fn said(name: &str, minute: u32, text: &str) -> SourceItem {
    let time: DateTime<Utc> = Utc.with_ymd_and_hms(2026, 5, 4, 9, minute, 0).unwrap();
    SourceItem {
        reference: format!("message {minute}"),
        origin: Origin::Message(if name == "Sam" { Role::Assistant } else { Role::User }),
        name: Some(name.into()),
        tool: None,
        calls: Vec::new(),
        time,
        text: text.into(),
    }
}

/// A support chat in which the customer says the same thing twice in other words.
fn support_chat() -> SummaryRequest {
    let items = vec![
        said("Marta", 0, "Hello! My washing machine stopped mid-cycle and shows error E21."),
        said("Sam", 1, "Sorry to hear that. Which model is it, and when did you buy it?"),
        said("Marta", 2, "It is a WM-4400, bought in March 2024 at the Porto store."),
        said("Sam", 3, "Then the repair is free: the warranty runs for three years."),
        said("Marta", 4, "So my washing machine stopped in the middle of a cycle, showing error E21."),
        said("Sam", 5, "A technician can come on Thursday between 8 and 12, reference 55-1093."),
        said("Marta", 6, "Thursday works. Ring the bell twice, the intercom is broken."),
        said("Sam", 7, "Noted. Have a nice day!"),
    ];
    SummaryRequest {
        kind: SourceKind::Messages,
        level: strata::seam::Level::LEAF,
        persona: "support".into(),
        items,
        source_tokens: 400,
        target_tokens: 300,
        retry: None,
        known_memories: Vec::new(),
    }
}

fn summarize(summarizer: &ExtractiveSummarizer, request: &SummaryRequest) -> Summary {
    summarizer.summarize_sync(request)
}

#[test]
fn sentence_vectors_keep_one_of_two_statements_that_mean_the_same() {
    let counter = TokenCounter::for_model("gpt-4o");
    let request = support_chat();
    let lexical = summarize(&ExtractiveSummarizer::new(counter.clone()), &request);
    let model = SentenceModel::new(RecallConfig::default());
    let ready = model.state().ready().expect("the embedding model is missing: run make embed-assets");
    // The model takes the restatement for the same statement.
    let pair = ready.embed(&[&request.items[0].text, &request.items[4].text]).unwrap();
    let similarity = strata::recall::embedding::cosine(&pair[0], &pair[1]);
    assert!(similarity > 0.9, "{similarity}");
    let embedded =
        summarize(&ExtractiveSummarizer::new(counter.clone()).with_embedder(Arc::new(model)), &request);
    // What a summary says, headline and body (the body leaves out what the headline says).
    let said = |summary: &Summary| format!("{}\n{}", summary.headline, summary.body);
    let both = |summary: &Summary| {
        said(summary).contains("stopped mid-cycle") && said(summary).contains("middle of a cycle")
    };
    // Lexically the restatement is new words, so it is kept; its meaning is not new.
    assert!(both(&lexical), "{}", lexical.body);
    assert!(!both(&embedded), "{}", embedded.body);
    for summary in [&lexical, &embedded] {
        assert!(counter.text(&summary.headline) + counter.text(&summary.body) <= request.target_tokens);
        assert!(summary.body.contains("Marta: "), "{}", summary.body);
    }
    // Every fact of the chat fits this budget; only the restatement is left out.
    for fact in ["WM-4400", "three years", "55-1093", "intercom"] {
        assert!(said(&embedded).contains(fact), "{fact}: {}", said(&embedded));
    }
}

#[test]
fn without_the_model_files_the_selection_is_lexical() {
    let counter = TokenCounter::for_model("gpt-4o");
    let request = support_chat();
    let missing = tempfile::tempdir().unwrap();
    let config = RecallConfig { embed_assets: Some(missing.path().join("none")), ..RecallConfig::default() };
    let model = SentenceModel::new(config);
    let fallback = summarize(
        &ExtractiveSummarizer::new(counter.clone()).with_embedder(Arc::new(model.clone())),
        &request,
    );
    assert!(model.state().ready().is_none());
    assert_eq!(fallback, summarize(&ExtractiveSummarizer::new(counter), &request));
}
