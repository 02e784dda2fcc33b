//! `strata eval summaries`: how many facts survive in the offline summaries.
//!
//! Each conversation is stored as one session and compacted with the configured compactor
//! settings and the extractive summarizer until nothing is pending. A question's answer is
//! *retained* at a level when the node of that level covering an evidence message still holds
//! every content word of the answer in its headline or body. Only evidence messages whose own
//! text holds every such word count (the others could not be retained by any extraction).
//!
//! The summarizer selects as the configuration says: by words (the default), or with sentence
//! vectors when `[summarizer] sentence_vectors` is on and the model is present
//! (`STRATA_SUMMARIZER_SENTENCE_VECTORS=true`); `--lexical` forces the former. The summarizer's time per node
//! is reported without the time the model took to embed the sentences, which is reported apart.
//!
//! Three corpora: the annotated dev conversations (`questions.jsonl`), a team's group chat
//! (`strata::synth::generate_team_chat`, a generator the summarizer was not written against)
//! and the demo's week of pair programming (`strata::synth::generate`); for the generated ones
//! each planted fact is a question whose answer is the fact's key words.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use strata::SentenceModel;
use strata_compactor::summarize::{EmbedError, SentenceEmbedder, SourceKind, Stopwatch, TimedSummarizer};
use strata_compactor::{Compactor, ExtractiveSummarizer, TokenCounter};
use strata_seam::transfer::IncomingMessage;
use strata_seam::{Message, NodeId, SummaryNode};
use strata_store::Store;

use super::{Probe, Question, content_words, holds_all, read_questions, words};
use crate::cli::output::print_json;
use strata_seam::{Conversations, Forest, Search};

#[derive(Debug, clap::Args)]
pub struct SummariesArgs {
    /// Directory with transcripts.jsonl and questions.jsonl.
    #[arg(long, default_value = "../shared/eval/conversations")]
    data: PathBuf,
    /// Messages per generated conversation (team chat, pair programming week).
    #[arg(long, default_value_t = 1_500)]
    messages: usize,
    /// Select without sentence embeddings even when `[summarizer] sentence_vectors` is on.
    #[arg(long)]
    lexical: bool,
    /// Also list each answer a Level-0 summary lost: the words it lacks and whether any of its
    /// evidence message was quoted at all (a diagnostic, to stderr).
    #[arg(long)]
    lost: bool,
}

/// The sentence model, timed: how long the summaries spent waiting for vectors.
#[derive(Debug)]
struct TimedEmbedder {
    model: SentenceModel,
    spent: Mutex<Duration>,
}

impl TimedEmbedder {
    fn spent(&self) -> Duration {
        *self.spent.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SentenceEmbedder for TimedEmbedder {
    fn embed_sentences(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let started = Instant::now();
        let vectors = self.model.embed_sentences(texts);
        *self.spent.lock().unwrap_or_else(PoisonError::into_inner) += started.elapsed();
        vectors
    }
}

/// The time the sentence model has spent so far (none without a model): the stopwatch of the
/// inner timing, so each summary's embedding time is noted apart from the rest (the evaluation
/// compacts one session at a time, so the model's time during a call is that call's).
#[derive(Debug)]
struct EmbeddingClock(Option<Arc<TimedEmbedder>>);

impl Stopwatch for EmbeddingClock {
    fn read(&self) -> Duration {
        self.0.as_ref().map_or(Duration::ZERO, |embedder| embedder.spent())
    }
}

/// Why a Level-0 node lost an answer, on one line: the answer's words the node lacks, how much
/// of the evidence message it quotes (the share of the message's word trigrams found in the
/// node: 0 means the message was not picked at all), and the message.
fn lost(corpus: &str, answer: &[String], message: &Message, leaf: &SummaryNode) -> String {
    let summary = format!("{}\n{}", leaf.headline, leaf.body);
    let present: HashSet<String> = words(&summary).collect();
    let missing: Vec<&str> =
        answer.iter().filter(|word| !present.contains(*word)).map(String::as_str).collect();
    let trigrams = |text: &str| -> HashSet<String> {
        let words: Vec<String> = words(text).collect();
        words.windows(3).map(|window| window.join(" ")).collect()
    };
    let quoted = trigrams(&summary);
    let source = trigrams(&message.content);
    let share =
        source.iter().filter(|trigram| quoted.contains(*trigram)).count() as f64 / source.len().max(1) as f64;
    let cause = if share == 0.0 { "not quoted" } else { "quoted in part" };
    format!(
        "lost [{corpus}] {cause} ({:.0}% of its trigrams); missing {:?} of {:?}; message ({} chars): {}",
        share * 100.0,
        missing,
        answer,
        message.content.chars().count(),
        message.content.replace('\n', " "),
    )
}

/// Retention at one level: evidence messages covered by a node of that level, and of those the
/// ones whose node still holds the answer.
#[derive(Debug, Default, Serialize, Clone, Copy)]
struct Retention {
    covered: usize,
    retained: usize,
}

impl Retention {
    fn percent(self) -> Option<f64> {
        (self.covered > 0).then(|| 100.0 * self.retained as f64 / self.covered as f64)
    }
}

/// The figures of one corpus.
#[derive(Debug, Serialize)]
struct CorpusReport {
    corpus: String,
    messages: usize,
    /// Evidence messages whose text holds every content word of the answer.
    answerable: usize,
    nodes_per_level: BTreeMap<strata_seam::Level, usize>,
    level0: Retention,
    level1: Retention,
    /// Source tokens / summary tokens over the Level-0 nodes.
    compression_level0: f64,
    /// Source tokens / summary tokens over the nodes above Level 0.
    compression_merges: Option<f64>,
    /// Mean summarizer time per Level-0 node and per merge, milliseconds, without the time
    /// spent embedding sentences.
    ms_per_level0: f64,
    ms_per_merge: Option<f64>,
    /// Mean time spent embedding the sentences of one Level-0 node, milliseconds.
    embed_ms_per_level0: f64,
}

pub fn run(
    config: &strata::Config,
    args: &SummariesArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let counter = TokenCounter::for_model(&config.compactor.model);
    let mut reports = Vec::new();
    let model = SentenceModel::new(config.recall.clone());
    let embedder = if args.lexical || !config.summarizer.sentence_vectors {
        None
    } else {
        match model.state().get() {
            Ok(loaded) => {
                eprintln!("sentence vectors: {}", loaded.spec().id);
                Some(Arc::new(TimedEmbedder { model, spent: Mutex::new(Duration::ZERO) }))
            }
            Err(error) => {
                eprintln!("sentence vectors unavailable ({error}): lexical selection");
                None
            }
        }
    };

    // The dev conversations: each persona's sessions, in file order, as one session.
    let mut incoming = super::dev_transcripts(&args.data, &config.compactor, &counter)?;
    let positions = super::one_session_per_persona(&mut incoming);
    let questions: Vec<Question> = read_questions(&args.data.join("questions.jsonl"))?;
    let probes = questions
        .iter()
        .map(|question| Probe::of(question, &positions))
        .filter(|probe| !probe.answer.is_empty())
        .collect::<Vec<_>>();
    reports.push(evaluate(config, embedder.as_ref(), "dev conversations", &incoming, &probes, args.lost)?);

    // Generated conversations: the planted facts' key words are the answers.
    use strata_synth as synth;
    let team =
        synth::generate_team_chat(&synth::TeamChatSpec { messages: args.messages, ..Default::default() });
    let week = synth::generate(&synth::TranscriptSpec {
        min_messages: args.messages,
        min_chars: 0,
        ..Default::default()
    });
    for (name, transcript) in [("team group chat", team), ("pair programming week", week)] {
        let persona = "generated".to_owned();
        let incoming: Vec<IncomingMessage> = transcript
            .messages
            .iter()
            .map(|message| {
                let mut message = message.clone();
                counter.count_new(&mut message);
                IncomingMessage {
                    session_key: persona.clone(),
                    persona: persona.clone(),
                    message,
                    line_digest: None,
                }
            })
            .collect();
        let probes: Vec<Probe> = transcript
            .facts
            .iter()
            .map(|fact| Probe {
                persona: persona.clone(),
                question: fact.paraphrase.to_owned(),
                answer: content_words(fact.grep),
                evidence: vec![fact.index as i64],
            })
            .collect();
        reports.push(evaluate(config, embedder.as_ref(), name, &incoming, &probes, args.lost)?);
    }

    if json {
        return print_json(out, &reports);
    }
    let percent = |retention: Retention| match retention.percent() {
        Some(p) => format!("{}/{} ({p:.1}%)", retention.retained, retention.covered),
        None => "-".to_owned(),
    };
    let optional =
        |value: Option<f64>, suffix: &str| value.map_or("-".to_owned(), |v| format!("{v:.2}{suffix}"));
    writeln!(
        out,
        "{:<22} {:>6} {:>6} {:>11} {:>16} {:>16} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "corpus",
        "msgs",
        "answ.",
        "nodes",
        "L0 retention",
        "L1 retention",
        "L0 ratio",
        "L1+ ratio",
        "ms/L0",
        "ms/merge",
        "embed ms"
    )?;
    for report in &reports {
        let nodes: Vec<String> =
            report.nodes_per_level.iter().map(|(level, count)| format!("L{level}:{count}")).collect();
        writeln!(
            out,
            "{:<22} {:>6} {:>6} {:>11} {:>16} {:>16} {:>9} {:>9} {:>9.2} {:>9} {:>9.1}",
            report.corpus,
            report.messages,
            report.answerable,
            nodes.join(" "),
            percent(report.level0),
            percent(report.level1),
            format!("{:.1}x", report.compression_level0),
            optional(report.compression_merges, "x"),
            report.ms_per_level0,
            optional(report.ms_per_merge, ""),
            report.embed_ms_per_level0,
        )?;
    }
    Ok(())
}

/// Stores, compacts and scores one corpus (every persona of it) in a fresh database.
fn evaluate(
    config: &strata::Config,
    embedder: Option<&Arc<TimedEmbedder>>,
    corpus: &str,
    incoming: &[IncomingMessage],
    probes: &[Probe],
    list_lost: bool,
) -> anyhow::Result<CorpusReport> {
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let store = Store::open(dir.path().join("eval.db"))?;
    store.append_many(incoming).context("cannot store the transcript")?;
    store.catch_up_search_index().context("cannot index the transcript for search")?;
    // Fidelity is measured on every chunk the floor allows, whatever the window: with the
    // window-aware trigger most of these short conversations would never be folded at all.
    let compactor_config =
        strata_compactor::CompactorConfig { trigger_ratio: 0.0, target_ratio: 0.0, ..config.compactor() };
    let mut extractive = ExtractiveSummarizer::new(compactor_config.token_counter());
    if let Some(embedder) = embedder {
        extractive = extractive.with_embedder(embedder.clone());
    }
    let summarizer = Arc::new(TimedSummarizer::new(TimedSummarizer::with_stopwatch(
        extractive,
        EmbeddingClock(embedder.cloned()),
    )));
    let compactor = Compactor::new(store.clone(), compactor_config, summarizer.clone())?;
    // A bare compactor (its summarizer timed), not an engine: driven by the facade's runtime.
    let runtime = strata::blocking::runtime()?;
    let mut messages: HashMap<String, Vec<Message>> = HashMap::new();
    let mut nodes: HashMap<NodeId, SummaryNode> = HashMap::new();
    for session in store.sessions(None)? {
        // Compact until nothing is pending, a bounded call at a time, as an engine would.
        let rounds = compactor.config().max_rounds;
        runtime.block_on(compactor.compact_until_done(session.id, rounds, u32::MAX, |_| {}))?;
        for node in store.nodes(session.id)? {
            nodes.insert(node.id, node);
        }
        messages.insert(session.persona.clone(), store.messages(session.id, 0..=i64::MAX)?);
    }

    let (mut answerable, mut level0, mut level1) = (0, Retention::default(), Retention::default());
    for probe in probes {
        let Some(session) = messages.get(&probe.persona) else { continue };
        for &seq in &probe.evidence {
            let Some(message) = usize::try_from(seq).ok().and_then(|i| session.get(i)) else { continue };
            if !holds_all(&message.content, &probe.answer) {
                continue;
            }
            answerable += 1;
            let Some(leaf) = message.summary_id.and_then(|id| nodes.get(&id)) else { continue };
            let holds =
                |node: &SummaryNode| holds_all(&format!("{}\n{}", node.headline, node.body), &probe.answer);
            level0.covered += 1;
            level0.retained += usize::from(holds(leaf));
            if list_lost && !holds(leaf) {
                eprintln!("{}", lost(corpus, &probe.answer, message, leaf));
            }
            if let Some(parent) = leaf.parent_id.and_then(|id| nodes.get(&id)) {
                level1.covered += 1;
                level1.retained += usize::from(holds(parent));
            }
        }
    }

    let mut nodes_per_level = BTreeMap::new();
    let (mut leaf_source, mut leaf_tokens, mut merge_source, mut merge_tokens) = (0u64, 0u64, 0u64, 0u64);
    for node in nodes.values() {
        *nodes_per_level.entry(node.level).or_insert(0) += 1;
        let (source, tokens) = if node.level == strata_seam::Level::LEAF {
            (&mut leaf_source, &mut leaf_tokens)
        } else {
            (&mut merge_source, &mut merge_tokens)
        };
        *source += u64::from(node.source_token_count);
        *tokens += u64::from(node.token_count);
    }
    let times = summarizer.times();
    let embedding = summarizer.inner().times();
    let mean_ms = |kind: SourceKind, embedding_only: bool| {
        let of_kind: Vec<f64> = times
            .iter()
            .zip(&embedding)
            .filter(|((k, _), _)| *k == kind)
            .map(|((_, took), (_, embedding))| {
                let took = if embedding_only { *embedding } else { took.saturating_sub(*embedding) };
                took.as_secs_f64() * 1000.0
            })
            .collect();
        (!of_kind.is_empty()).then(|| of_kind.iter().sum::<f64>() / of_kind.len() as f64)
    };
    Ok(CorpusReport {
        corpus: corpus.to_owned(),
        messages: incoming.len(),
        answerable,
        nodes_per_level,
        level0,
        level1,
        compression_level0: leaf_source as f64 / leaf_tokens.max(1) as f64,
        compression_merges: (merge_tokens > 0).then(|| merge_source as f64 / merge_tokens as f64),
        ms_per_level0: mean_ms(SourceKind::Messages, false).unwrap_or(0.0),
        ms_per_merge: mean_ms(SourceKind::Summaries, false),
        embed_ms_per_level0: mean_ms(SourceKind::Messages, true).unwrap_or(0.0),
    })
}
