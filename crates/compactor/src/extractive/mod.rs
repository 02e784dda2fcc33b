//! The offline summarizer: deterministic extraction, no network, and no model of its own.
//!
//! It cannot paraphrase, so it selects and trims, in three steps, one module each:
//!
//! - `segment`: the sources cut into *units*: the sentences of the messages (for a Level-0
//!   node), split further at clause boundaries, or the lines of the children's bodies (for a
//!   merge, so a level up is built from its children's facts, not from their headlines); word
//!   tokens, paths, code, and the generic English word lists (stop words, filler).
//! - `chunk`: each unit's content words, weighted up when they name something (capitalised
//!   words, numbers with their units, dates, times, file paths) and damped when they are the
//!   chunk's background; a unit is worth more when it states a decision, less when it is code,
//!   tool output or only asks.
//! - `select`: units picked greedily by marginal gain per token, where the gain counts only
//!   the words no picked unit covers yet and, when a [`SentenceEmbedder`] gave the units
//!   vectors, is scaled down by how close the unit's meaning is to a picked unit's: a
//!   maximal-marginal-relevance selection whose novelty is word coverage and meaning.
//! - `fit`: the body lists the picked units in time order, attributed to their speaker (a
//!   message's `name`, else its role), with the date where it changes, in the sections the
//!   chunk has (`Timeline`, `Decisions`, `Open questions`, `Also mentioned`, `Files`); the
//!   headline quotes what happened (the clauses that best cover the chunk's recurring words)
//!   and the decision taken, if any; both are fitted within the target, counted exactly.

mod chunk;
mod fit;
mod segment;
mod select;

use std::fmt;
use std::sync::Arc;

use self::chunk::Chunk;
use crate::error::SummarizeError;
use crate::summarizer::{BoxFuture, SourceKind, Summarizer, Summary, SummaryRequest, one_line_within};
use crate::tokens::{Encoding, TokenCounter};

/// The name extractive nodes carry in `summary_nodes.summarizer`.
pub const EXTRACTIVE: &str = "extractive";
/// The name of the flagged digests written while the summarizer is down (the store's, whose
/// index is on it).
pub use strata_seam::backend::RAW_ARCHIVE;

/// Why a [`SentenceEmbedder`] gave no vectors (the model is missing, it failed to run).
pub type EmbedError = Box<dyn std::error::Error + Send + Sync>;

/// A sentence-embedding model for the extractive summarizer's selection: with one, two units
/// that say the same thing in other words are not both kept (see [`ExtractiveSummarizer`]).
///
/// The compactor never depends on a model of its own: the root crate implements this trait
/// with strata-recall's local embedder. A summarizer whose embedder fails falls back to the
/// lexical selection for that chunk.
pub trait SentenceEmbedder: Send + Sync + fmt::Debug {
    /// One vector per text, in order, all of one dimension and L2-normalized (so that a dot
    /// product is the cosine similarity).
    fn embed_sentences(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// The offline, deterministic summarizer (strata's default): no network and no API key.
///
/// Without a [`SentenceEmbedder`] its novelty is lexical (a unit is worth the weight of the
/// words no picked unit covers yet); with one, a unit is also worth less the closer its meaning
/// is to a picked unit's, and a near-duplicate is worth nothing.
#[derive(Clone, Debug)]
pub struct ExtractiveSummarizer {
    counter: TokenCounter,
    embedder: Option<Arc<dyn SentenceEmbedder>>,
}

impl Default for ExtractiveSummarizer {
    fn default() -> ExtractiveSummarizer {
        ExtractiveSummarizer::new(TokenCounter::new(Encoding::Cl100kBase))
    }
}

impl ExtractiveSummarizer {
    /// An extractive summarizer that fits its output to budgets counted by `counter`, with
    /// the lexical selection only.
    pub fn new(counter: TokenCounter) -> ExtractiveSummarizer {
        ExtractiveSummarizer { counter, embedder: None }
    }

    /// The same summarizer, selecting with sentence vectors from `embedder` when it answers.
    pub fn with_embedder(self, embedder: Arc<dyn SentenceEmbedder>) -> ExtractiveSummarizer {
        ExtractiveSummarizer { embedder: Some(embedder), ..self }
    }

    /// True when a sentence embedder was given (whether or not its model loads).
    pub fn has_embedder(&self) -> bool {
        self.embedder.is_some()
    }

    /// The summary of `request`, computed synchronously (CPU work, and the sentence embedder's
    /// model if there is one).
    pub fn summarize_sync(&self, request: &SummaryRequest) -> Summary {
        let chunk = match request.kind {
            SourceKind::Messages => Chunk::from_messages(&request.items),
            SourceKind::Summaries => Chunk::from_summaries(&request.items),
        };
        let vectors = self.embed(&chunk);
        let mut summary = chunk.summarize(&self.counter, request.target_tokens, vectors.as_deref());
        if request.kind == SourceKind::Messages {
            summary.memory_updates = crate::facts::stated(&request.items);
        }
        summary
    }

    /// The units' sentence vectors, or `None` (lexical selection) without an embedder, when it
    /// fails, or when it answers with vectors that do not fit. Only the prose that could be
    /// picked is embedded: code, tool output and units worth too little even with every word
    /// new get a zero vector (similar to nothing), which saves most of the model's time.
    fn embed(&self, chunk: &Chunk) -> Option<Vec<Vec<f32>>> {
        let embedder = self.embedder.as_ref()?;
        let prose: Vec<usize> =
            (0..chunk.units.len()).filter(|&i| chunk.units[i].prose && chunk.could_be_picked(i)).collect();
        if prose.len() < 2 {
            return None;
        }
        let texts: Vec<&str> = prose.iter().map(|&i| chunk.units[i].text.as_str()).collect();
        let vectors = match embedder.embed_sentences(&texts) {
            Ok(vectors) => vectors,
            Err(error) => {
                tracing::debug!(%error, "no sentence vectors; lexical selection");
                return None;
            }
        };
        let dimensions = vectors.first().map_or(0, Vec::len);
        if vectors.len() != texts.len() || dimensions == 0 || vectors.iter().any(|v| v.len() != dimensions) {
            tracing::warn!(
                texts = texts.len(),
                vectors = vectors.len(),
                "the sentence embedder answered with vectors that do not fit; lexical selection"
            );
            return None;
        }
        let mut all = vec![vec![0.0; dimensions]; chunk.units.len()];
        for (index, vector) in prose.into_iter().zip(vectors) {
            all[index] = vector;
        }
        Some(all)
    }

    /// A flagged digest for when the summarizer is down: the same extraction, labelled so a
    /// later pass knows to re-summarize it.
    pub fn raw_archive(&self, request: &SummaryRequest) -> Summary {
        let mut summary = self.summarize_sync(request);
        summary.headline = one_line_within(&format!("[raw archive] {}", summary.headline), 240);
        summary
    }
}

impl Summarizer for ExtractiveSummarizer {
    fn name(&self) -> &str {
        EXTRACTIVE
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(async move {
            // Running a model blocks for a while: off the async threads when there is a runtime.
            if self.embedder.is_some()
                && let Ok(runtime) = tokio::runtime::Handle::try_current()
            {
                let (summarizer, request) = (self.clone(), request.clone());
                match runtime.spawn_blocking(move || summarizer.summarize_sync(&request)).await {
                    Ok(summary) => return Ok(summary),
                    Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
                    // Cancelled (the runtime is shutting down): do the work here instead.
                    Err(_) => {}
                }
            }
            Ok(self.summarize_sync(request))
        })
    }

    fn paraphrases(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeZone, Utc};

    use super::*;
    use crate::summarizer::{Origin, SourceCall, SourceItem};

    fn at(day: u32, minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, day, 10, minute, 0).unwrap()
    }

    fn said(name: Option<&str>, role: &str, minute: u32, text: &str) -> SourceItem {
        SourceItem {
            reference: format!("message {minute}"),
            origin: Origin::Message(role.parse().expect("a role")),
            name: name.map(Into::into),
            tool: None,
            calls: Vec::new(),
            time: at(1, minute),
            text: text.into(),
        }
    }

    fn request(items: Vec<SourceItem>, kind: SourceKind, target: u32) -> SummaryRequest {
        SummaryRequest {
            kind,
            level: strata_seam::Level::LEAF,
            persona: "p".into(),
            items,
            source_tokens: 4_000,
            target_tokens: target,
            retry: None,
            known_memories: Vec::new(),
        }
    }

    fn tokens(summary: &Summary) -> u32 {
        let counter = TokenCounter::new(Encoding::Cl100kBase);
        counter.text(&summary.headline) + counter.text(&summary.body)
    }

    /// Two friends catching up: small talk around a few facts.
    fn friends() -> Vec<SourceItem> {
        let mut items = vec![
            said(Some("Ines"), "user", 0, "Hey Rui! So good to hear from you. How are things?"),
            said(Some("Rui"), "assistant", 1, "Hi Ines! All good, just busy. You?"),
            said(
                Some("Ines"),
                "user",
                2,
                "Wow, big news: I adopted a greyhound called Biscuit from the shelter in Porto last Saturday.",
            ),
            said(Some("Rui"), "assistant", 3, "That's amazing! Congrats, I love that."),
            said(Some("Ines"), "user", 4, "Thanks! He sleeps 18 hours a day, haha."),
            said(
                Some("Rui"),
                "assistant",
                5,
                "My sister starts her nursing degree at Coimbra in September, we are all so proud.",
            ),
            said(Some("Ines"), "user", 6, "That's great, tell her congrats from me!"),
            said(Some("Rui"), "assistant", 7, "Will do! Talk soon."),
        ];
        for minute in 8..30 {
            items.push(said(Some("Ines"), "user", minute, "Haha yes, so true, that is really nice!"));
        }
        items
    }

    #[test]
    fn friends_chat_keeps_the_facts_with_their_speakers() {
        let summary =
            ExtractiveSummarizer::default().summarize_sync(&request(friends(), SourceKind::Messages, 120));
        let body = &summary.body;
        assert!(body.starts_with("Timeline:\n- 2026-03-01 "), "{body}");
        // A fact the headline quotes is not repeated in the body.
        let said = format!("{}\n{body}", summary.headline).to_lowercase();
        assert!(said.contains("ines: big news: i adopted a greyhound called biscuit"), "{said}");
        assert!(said.contains("rui: my sister starts her nursing degree at coimbra in september"), "{said}");
        assert!(body.contains("18 hours"), "{body}");
        // Reactions carry nothing: none is quoted.
        assert!(!body.contains("so true") && !body.contains("Talk soon"), "{body}");
        // The headline says what happened, attributed, never how many messages there were.
        assert!(summary.headline.starts_with("Ines, Rui — Ines: "), "{}", summary.headline);
        assert!(summary.headline.contains("adopted a greyhound"), "{}", summary.headline);
        assert!(tokens(&summary) <= 120);
    }

    fn coding() -> Vec<SourceItem> {
        let mut tool = said(
            None,
            "tool",
            2,
            "fn main() {\n    let port: u16 = env::var(\"PORT\")?.parse()?;\n}\nerror[E0277]: the `?` operator can only be used in a function that returns `Result`",
        );
        tool.tool = Some("cargo_build".into());
        let mut call = said(None, "assistant", 1, "Building it.");
        call.calls = vec![SourceCall { name: "cargo_build".into(), arguments: "path=src/main.rs".into() }];
        vec![
            said(None, "user", 0, "The server should read its port from the PORT variable, see src/main.rs."),
            call,
            tool,
            said(
                None,
                "assistant",
                3,
                "main cannot use the operator unless it returns Result. We decided to make main return anyhow::Result and default the port to 8080.",
            ),
            said(None, "user", 4, "Fine. Should the default live in config/server.toml instead?"),
        ]
    }

    #[test]
    fn coding_chunk_has_decisions_files_and_an_open_question() {
        let summary =
            ExtractiveSummarizer::default().summarize_sync(&request(coding(), SourceKind::Messages, 200));
        let body = &summary.body;
        assert!(
            body.contains(
                "Decisions:\n- 2026-03-01 assistant: We decided to make main return anyhow::Result"
            ),
            "{body}"
        );
        assert!(
            body.contains(
                "Open questions:\n- 2026-03-01 user: Should the default live in config/server.toml instead?"
            ),
            "{body}"
        );
        assert!(body.contains("Files:\n- src/main.rs, config/server.toml"), "{body}");
        // Code is data, not something anyone said.
        assert!(!body.contains("let port"), "{body}");
        assert!(summary.headline.contains("We decided to make main return"), "{}", summary.headline);
        assert!(!summary.headline.starts_with("user"), "roles are not people: {}", summary.headline);
    }

    #[test]
    fn output_fits_the_target_and_is_deterministic() {
        let summarizer = ExtractiveSummarizer::default();
        let mut items = Vec::new();
        for round in 0..40 {
            items.extend(friends().into_iter().chain(coding()).map(|mut m| {
                m.text = format!("{} (round {round}, see notes/round_{round}.md)", m.text);
                m
            }));
        }
        for target in [16, 48, 120, 400] {
            let req = request(items.clone(), SourceKind::Messages, target);
            let summary = summarizer.summarize_sync(&req);
            assert!(tokens(&summary) <= target, "{} > {target}: {summary:?}", tokens(&summary));
            assert!(!summary.body.trim().is_empty() && !summary.headline.trim().is_empty());
            assert_eq!(summary, summarizer.summarize_sync(&req));
        }
    }

    #[test]
    fn merges_are_built_from_the_childrens_facts() {
        let summarizer = ExtractiveSummarizer::default();
        let first = summarizer.summarize_sync(&request(friends(), SourceKind::Messages, 150));
        let second = summarizer.summarize_sync(&request(coding(), SourceKind::Messages, 150));
        let child = |summary: &Summary, day| SourceItem {
            reference: "node".into(),
            origin: Origin::Summary,
            name: None,
            tool: None,
            calls: Vec::new(),
            time: at(day, 0),
            text: format!("{}\n{}", summary.headline, summary.body),
        };
        let merged = summarizer.summarize_sync(&request(
            vec![child(&first, 1), child(&second, 2)],
            SourceKind::Summaries,
            200,
        ));
        let body = &merged.body;
        // Facts of both children survive with their speakers, in the merge's headline or body
        // (the body leaves out what the headline says), whether the child's headline or its
        // body held them; the children's headlines are not copied whole.
        let said = format!("{}\n{body}", merged.headline).to_lowercase();
        assert!(said.contains("ines: big news: i adopted a greyhound called biscuit"), "{said}");
        assert!(said.contains("rui: my sister starts her nursing degree at coimbra"), "{said}");
        assert!(said.contains("we decided to make main return anyhow::result"), "{said}");
        assert!(said.contains("src/main.rs"), "{said}");
        assert!(!body.contains(&first.headline), "{body}");
        assert!(merged.headline.starts_with("Ines, Rui — "), "{}", merged.headline);
        // It quotes what the children said happened, not how many there were.
        assert!(
            ["greyhound", "PORT variable", "We decided"].iter().any(|said| merged.headline.contains(said)),
            "{}",
            merged.headline
        );
        assert!(!merged.headline.contains("summaries"), "{}", merged.headline);
        assert!(tokens(&merged) <= 200);
    }

    #[test]
    fn a_merge_reads_bodies_of_other_writers_too() {
        let child = SourceItem {
            reference: "node".into(),
            origin: Origin::Summary,
            name: None,
            tool: None,
            calls: Vec::new(),
            time: at(1, 0),
            text: "The team moved the cluster.\nTimeline:\n- 10:00 moved the cluster to Frankfurt\nPitfalls:\n- DNS lagged for 20 minutes\nFiles:\n- infra/dns.tf, infra/main.tf".into(),
        };
        let merged = ExtractiveSummarizer::default().summarize_sync(&request(
            vec![child.clone(), SourceItem { time: at(2, 0), ..child }],
            SourceKind::Summaries,
            120,
        ));
        assert!(merged.body.contains("Frankfurt") && merged.body.contains("20 minutes"), "{}", merged.body);
        assert!(merged.body.contains("infra/dns.tf"), "{}", merged.body);
    }
}
