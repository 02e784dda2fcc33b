//! `strata eval retrieval`: turn-level recall of the recall tools on annotated conversations,
//! next to a plain BM25 baseline computed on the same questions.
//!
//! The data directory holds `transcripts.jsonl` (messages in `strata ingest` format, each
//! conversation one persona, each of its sessions one strata session) and `questions.jsonl`
//! (`{id, persona, question, category, evidence: [{session, seq}]}`), the layout of
//! `../shared/eval/conversations`. Everything runs in a fresh temporary database.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use strata_compactor::TokenCounter;
use strata_recall::tools::{MemoryGrepArgs, MemorySearchArgs};
use strata_recall::{BacklogFilter, EmbedderState, RecallConfig, Scope, embed_backlog_with};
use strata_seam::Backend;
use strata_store::Store;

use crate::cli::ingest::parse_file;

use crate::cli::output::print_json;
use strata_seam::{Conversations, Search};

mod cache;
mod context;
mod summaries;

/// The cut-offs recall is reported at.
const KS: [usize; 3] = [1, 5, 10];

#[derive(Debug, clap::Subcommand)]
pub enum EvalCommand {
    /// Recall@1/5/10 of memory_search and memory_grep against a BM25 baseline.
    Retrieval(RetrievalArgs),
    /// Where memory_search ranks facts planted in generated conversations (the demo's week of
    /// pair programming and a team's group chat), asked for in other words.
    Planted(PlantedArgs),
    /// How many answers survive in the extractive summaries (Level 0 and Level 1), the
    /// compression and the summarizer's time per node, on the annotated conversations and two
    /// generated ones.
    Summaries(summaries::SummariesArgs),
    /// How much of each question's evidence the assembled context holds, asked as the next
    /// request of its conversation: a plain sliding window of the same budget, strata without
    /// the recalled block, and strata with it.
    Context(context::ContextArgs),
    /// How much of each prompt a provider's prompt cache could reuse, call after call, and what
    /// the input costs with it: strata, strata without the refill of folded turns, and a
    /// sliding window of the same budget, on the dev set's conversations and a generated week.
    Cache(cache::CacheArgs),
}

#[derive(Debug, clap::Args)]
pub struct PlantedArgs {
    /// Messages per generated conversation.
    #[arg(long, default_value_t = 1_500, value_parser = crate::cli::message_count(1, 100_000))]
    messages: usize,
}

#[derive(Debug, clap::Args)]
pub struct RetrievalArgs {
    /// Directory with transcripts.jsonl and questions.jsonl.
    #[arg(long, default_value = "../shared/eval/conversations")]
    data: PathBuf,
    /// Evaluate only the first N questions (all when absent).
    #[arg(long)]
    questions: Option<usize>,
    /// Also report memory_search with each side alone (semantic only, keyword only).
    #[arg(long)]
    ablate: bool,
    /// Also report memory_search for semantic weights 0, 0.1, ..., 1 (keyword weight 1 - w):
    /// how flat the fitted optimum is.
    #[arg(long)]
    sweep: bool,
    /// Also choose the tuned settings (semantic, time, speaker, second-hop and neighbour weights, over a
    /// small grid) on all conversations but one, score the one left out, and report the
    /// average over the conversations beside the dev figure: a gain that holds only on the
    /// conversations it was tuned on shows as a gap.
    #[arg(long)]
    leave_one_out: bool,
    /// Store the transcripts in this PostgreSQL database (`postgres://...`, holding no strata
    /// data yet) instead of a temporary SQLite file: the same evaluation on the other backend.
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Question {
    id: String,
    persona: String,
    question: String,
    #[serde(default)]
    answer: Option<String>,
    category: String,
    evidence: Vec<Evidence>,
}

#[derive(Debug, Deserialize, Clone, PartialEq, Eq, Hash)]
struct Evidence {
    session: String,
    seq: i64,
}

/// Recall of one retriever: overall and per category, at each k of [`KS`], in percent.
#[derive(Debug, Serialize)]
struct Scores {
    retriever: String,
    overall: [f64; 3],
    categories: BTreeMap<String, [f64; 3]>,
    /// Median time per question, milliseconds.
    median_ms: f64,
}

/// One retriever's ranked (session, seq) lists, one per question.
struct Run {
    name: String,
    ranked: Vec<Vec<Evidence>>,
    millis: Vec<f64>,
}

pub fn run(
    config: &strata::Config,
    command: &EvalCommand,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    match command {
        EvalCommand::Retrieval(args) => retrieval(config, args, json, out),
        EvalCommand::Planted(args) => planted(config, args, json, out),
        EvalCommand::Summaries(args) => summaries::run(config, args, json, out),
        EvalCommand::Context(args) => context::run(config, args, json, out),
        EvalCommand::Cache(args) => cache::run(config, args, json, out),
    }
}

/// Where one planted fact ranked.
#[derive(Debug, Serialize)]
struct PlantedRank {
    conversation: &'static str,
    kind: &'static str,
    question: &'static str,
    /// 1-based rank of the message holding the fact in memory_search's top 10.
    rank: Option<usize>,
}

fn planted(
    config: &strata::Config,
    args: &PlantedArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    use strata_synth as synth;
    let week = synth::generate(&synth::TranscriptSpec {
        min_messages: args.messages,
        min_chars: 0,
        ..Default::default()
    });
    let team =
        synth::generate_team_chat(&synth::TeamChatSpec { messages: args.messages, ..Default::default() });
    let recall = &config.recall;
    let embedder = EmbedderState::from(
        strata::load_embedder(recall, &config.compactor.retry)
            .context("the evaluation needs the embedding model")?,
    );
    let counter = TokenCounter::for_model(&config.compactor.model);
    let mut ranks = Vec::new();
    for (conversation, transcript) in [("pair programming week", week), ("team group chat", team)] {
        let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
        let store = Store::open(dir.path().join("eval.db"))?;
        let session = store.session("eval", "eval")?;
        let mut messages = transcript.messages.clone();
        counter.count_new_all(messages.iter_mut());
        let ids = store.append(session.id, &messages)?;
        let started = Instant::now();
        let embedded =
            embed_backlog_with(&store, embedder.get()?, recall, &BacklogFilter::default(), |_| {})?;
        eprintln!(
            "{conversation}: {} messages, {embedded} embedded in {:.1} s",
            ids.len(),
            started.elapsed().as_secs_f64()
        );
        for fact in &transcript.facts {
            let args = top_ten(fact.paraphrase);
            let answer =
                strata_recall::tools::search(&store, &Scope::persona("eval"), recall, &embedder, &args)?;
            let wanted = strata_seam::search::HitId::Message(ids[fact.index]);
            let rank = answer.results.iter().position(|hit| hit.id == wanted);
            ranks.push(PlantedRank {
                conversation,
                kind: fact.kind,
                question: fact.paraphrase,
                rank: rank.map(|r| r + 1),
            });
        }
    }
    if json {
        return print_json(out, &ranks);
    }
    writeln!(out, "{:<22} {:<11} {:>5}  question", "conversation", "fact", "rank")?;
    for rank in &ranks {
        let shown = rank.rank.map_or("-".to_owned(), |r| r.to_string());
        writeln!(out, "{:<22} {:<11} {:>5}  {}", rank.conversation, rank.kind, shown, rank.question)?;
    }
    Ok(())
}

/// The dev set's conversations (`transcripts.jsonl` in `data`), read as `strata ingest` reads
/// a file (each line names its session and persona), tokens counted.
pub(crate) fn dev_transcripts(
    data: &Path,
    limits: &strata_compactor::CompactorConfig,
    counter: &TokenCounter,
) -> anyhow::Result<Vec<strata_seam::transfer::IncomingMessage>> {
    parse_file(
        &data.join("transcripts.jsonl"),
        "default",
        "default",
        true,
        limits,
        counter,
        &ProgressBar::hidden(),
    )
}

/// Makes each persona's sessions one session, keyed by the persona, in file order; returns where
/// each (session key, seq) of the file went in its persona's session.
pub(crate) fn one_session_per_persona(
    incoming: &mut [strata_seam::transfer::IncomingMessage],
) -> HashMap<(String, i64), i64> {
    let mut positions = HashMap::new();
    let mut next_in_session: HashMap<String, i64> = HashMap::new();
    let mut next_in_persona: HashMap<String, i64> = HashMap::new();
    for message in incoming {
        let seq = next_in_session.entry(message.session_key.clone()).or_insert(0);
        let position = next_in_persona.entry(message.persona.clone()).or_insert(0);
        positions.insert((message.session_key.clone(), *seq), *position);
        *seq += 1;
        *position += 1;
        message.session_key = message.persona.clone();
    }
    positions
}

/// A question as the context and summary evaluations ask it: its answer's content words and
/// where its evidence went in its persona's one session ([`one_session_per_persona`]).
struct Probe {
    persona: String,
    question: String,
    answer: Vec<String>,
    /// Positions in the persona's one session (0-based seq).
    evidence: Vec<i64>,
}

impl Probe {
    fn of(question: &Question, positions: &HashMap<(String, i64), i64>) -> Probe {
        Probe {
            persona: question.persona.clone(),
            question: question.question.clone(),
            answer: content_words(question.answer.as_deref().unwrap_or_default()),
            evidence: question
                .evidence
                .iter()
                .filter_map(|e| positions.get(&(e.session.clone(), e.seq)).copied())
                .collect(),
        }
    }
}

/// Lowercase word tokens (letters, digits, `_`).
pub(crate) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// The content words of an answer: its word tokens without stop words.
pub(crate) fn content_words(answer: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in words(answer) {
        if !strata_seam::search::STOPWORDS.contains(&word.as_str()) && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// Whether `text` holds every one of `wanted` as a word.
pub(crate) fn holds_all(text: &str, wanted: &[String]) -> bool {
    let present: HashSet<String> = words(text).collect();
    wanted.iter().all(|word| present.contains(word))
}

fn read_questions(path: &Path) -> anyhow::Result<Vec<Question>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str(line).with_context(|| format!("{}: line {}", path.display(), index + 1))
        })
        .collect()
}

fn retrieval(
    config: &strata::Config,
    args: &RetrievalArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut questions = read_questions(&args.data.join("questions.jsonl"))?;
    if let Some(n) = args.questions {
        questions.truncate(n);
    }
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let counter = TokenCounter::for_model(&config.compactor.model);
    let incoming = dev_transcripts(&args.data, &config.compactor, &counter)?;
    let (sqlite, postgres);
    let store: &dyn Backend = match &args.postgres {
        Some(url) => {
            postgres = super::open_postgres(url)?;
            // A database that holds an earlier run's transcripts would be searched with them:
            // every session twice over, and figures that mean nothing.
            let held = postgres.stats()?.sessions;
            if held > 0 {
                anyhow::bail!(
                    "{} holds {held} sessions already; the evaluation needs an empty database",
                    strata_seam::location::without_password(url)
                );
            }
            append_by_session(&*postgres, &incoming).context("cannot store the transcripts")?;
            &*postgres
        }
        None => {
            sqlite = Store::open(dir.path().join("eval.db"))?;
            sqlite.append_many(&incoming).context("cannot store the transcripts")?;
            sqlite.catch_up_search_index().context("cannot index the transcripts for search")?;
            &sqlite
        }
    };
    eprintln!("stored {} messages of {}", incoming.len(), args.data.join("transcripts.jsonl").display());

    let recall = &config.recall;
    let embedder = strata::load_embedder(recall, &config.compactor.retry)
        .context("the evaluation needs the embedding model")?;
    let started = Instant::now();
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("embedding [{bar:30}] {pos}/{len} ({per_sec}, eta {eta})")
            .expect("static template")
            .progress_chars("=> "),
    );
    embed_backlog_with(store, &embedder, recall, &BacklogFilter::default(), |p| {
        bar.set_length(p.total);
        bar.set_position(p.embedded);
    })?;
    bar.finish_and_clear();
    eprintln!("embedded with {} in {:.1} s", embedder.spec().id, started.elapsed().as_secs_f64());

    let bm25 = Bm25Baseline::new(&incoming);
    let mut runs = vec![run_each("bm25 baseline (speaker: text)", &questions, |q| {
        Ok(bm25.rank(&q.persona, &q.question, 10))
    })?];
    let state = EmbedderState::from(embedder);
    let mut variants = vec![(strata_recall::Tool::MemorySearch.name().to_owned(), recall.clone())];
    if args.ablate {
        variants.push((
            "  semantic side only".to_owned(),
            RecallConfig { keyword_weight: 0.0, ..recall.clone() },
        ));
        variants.push((
            "  keyword side only".to_owned(),
            RecallConfig { semantic_weight: 0.0, ..recall.clone() },
        ));
    }
    if args.sweep {
        for tenth in 0..=10 {
            let weight = f64::from(tenth) / 10.0;
            variants.push((
                format!("  semantic weight {weight:.1}"),
                RecallConfig { semantic_weight: weight, keyword_weight: 1.0 - weight, ..recall.clone() },
            ));
        }
    }
    for (name, variant) in &variants {
        runs.push(run_each(name, &questions, |q| {
            let args = top_ten(&q.question);
            let answer =
                strata_recall::tools::search(store, &Scope::persona(&q.persona), variant, &state, &args)?;
            Ok(positions(answer.results))
        })?);
    }
    runs.push(run_each(strata_recall::Tool::MemoryGrep.name(), &questions, |q| {
        let args = MemoryGrepArgs {
            query: q.question.clone(),
            limit: Some(10),
            start_time: None,
            end_time: None,
            include_in_context: None,
            offset: None,
        };
        Ok(match strata_recall::tools::grep(store, &Scope::persona(&q.persona), recall, &args) {
            Ok(answer) => positions(answer.results),
            // A question with nothing searchable (only punctuation) finds nothing.
            Err(strata_recall::Error::InvalidArgument { .. }) => Vec::new(),
            Err(err) => return Err(err.into()),
        })
    })?);

    let scores: Vec<Scores> = runs.iter().map(|run| score(run, &questions)).collect();
    // Each conversation alone, so the spread between them shows: the baseline and the default.
    let conversations: Vec<ConversationScores> =
        runs.iter().take(2).map(|run| by_conversation(run, &questions)).collect();
    let held_out =
        if args.leave_one_out { Some(leave_one_out(store, recall, &state, &questions)?) } else { None };
    if json {
        return print_json(
            out,
            &serde_json::json!({
                "questions": questions.len(),
                "model": recall.embed_model,
                "retrievers": scores,
                "conversations": conversations,
                "leave_one_out": held_out,
            }),
        );
    }
    let categories: Vec<String> = scores[0].categories.keys().cloned().collect();
    writeln!(out, "turn-level recall (%), {} questions, model {}", questions.len(), recall.embed_model)?;
    write!(out, "{:<30} {:>6} {:>6} {:>6}", "retriever", "R@1", "R@5", "R@10")?;
    for category in &categories {
        write!(out, " {:>12}", format!("{category} @10"))?;
    }
    writeln!(out, " {:>9}", "p50 ms")?;
    for score in &scores {
        write!(
            out,
            "{:<30} {:>6.1} {:>6.1} {:>6.1}",
            score.retriever, score.overall[0], score.overall[1], score.overall[2]
        )?;
        for category in &categories {
            write!(out, " {:>12.1}", score.categories.get(category).map_or(0.0, |c| c[2]))?;
        }
        writeln!(out, " {:>9.1}", score.median_ms)?;
    }
    writeln!(out, "\nper conversation, R@1 / R@5 / R@10:")?;
    for conversation in &conversations {
        write!(out, "{:<30}", conversation.retriever)?;
        for (persona, [r1, r5, r10]) in &conversation.personas {
            write!(out, "  {persona} {r1:.1} / {r5:.1} / {r10:.1}")?;
        }
        writeln!(out)?;
    }
    if let Some(held_out) = &held_out {
        write_leave_one_out(out, held_out, &scores[1], &categories)?;
    }
    Ok(())
}

/// One retriever's recall on each conversation (persona) alone.
#[derive(Debug, Serialize)]
struct ConversationScores {
    retriever: String,
    personas: BTreeMap<String, [f64; 3]>,
}

fn by_conversation(run: &Run, questions: &[Question]) -> ConversationScores {
    let recalls = per_question(run, questions);
    let mut personas: BTreeMap<String, ([f64; 3], usize)> = BTreeMap::new();
    for (question, recall) in questions.iter().zip(&recalls) {
        let entry = personas.entry(question.persona.clone()).or_default();
        entry.1 += 1;
        for (sum, value) in entry.0.iter_mut().zip(recall) {
            *sum += value;
        }
    }
    ConversationScores {
        retriever: run.name.clone(),
        personas: personas
            .into_iter()
            .map(|(persona, (sums, n))| (persona, sums.map(|sum| 100.0 * sum / n.max(1) as f64)))
            .collect(),
    }
}

/// The settings tuned on the dev set, as a point of the leave-one-out grid.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
struct Tuned {
    semantic_weight: f64,
    time_weight: f64,
    speaker_weight: f64,
    expansion_weight: f64,
    neighbour_weight: f64,
}

/// The grid the settings are chosen from: each setting's default and values on both sides
/// (the second hop on or off, the neighbour term off and three weights).
fn tuning_grid() -> Vec<Tuned> {
    let mut grid = Vec::new();
    for semantic_weight in [0.2, 0.3, 0.4] {
        for time_weight in [0.1, 0.2, 0.3] {
            for speaker_weight in [0.2, 0.3] {
                for expansion_weight in [0.0, 0.2] {
                    for neighbour_weight in [0.0, 0.1, 0.2, 0.3] {
                        grid.push(Tuned {
                            semantic_weight,
                            time_weight,
                            speaker_weight,
                            expansion_weight,
                            neighbour_weight,
                        });
                    }
                }
            }
        }
    }
    grid
}

/// One conversation left out: the settings chosen on the others and their recall on it.
#[derive(Debug, Serialize)]
struct Fold {
    persona: String,
    chosen: Tuned,
    held_out: [f64; 3],
    fitted: [f64; 3],
}

/// The leave-one-conversation-out figure: every question scored by the settings chosen
/// without its conversation, averaged over all questions (overall and per category).
#[derive(Debug, Serialize)]
struct LeaveOneOut {
    folds: Vec<Fold>,
    overall: [f64; 3],
    categories: BTreeMap<String, [f64; 3]>,
    /// The best grid point chosen on every conversation, and its recall.
    fitted_on_all: Tuned,
    fitted_on_all_overall: [f64; 3],
}

/// Per question, the share of its evidence in the top k, for each k of [`KS`].
fn per_question(run: &Run, questions: &[Question]) -> Vec<[f64; 3]> {
    questions
        .iter()
        .zip(&run.ranked)
        .map(|(question, ranked)| {
            let evidence: HashSet<&Evidence> = question.evidence.iter().collect();
            KS.map(|k| {
                let found =
                    ranked.iter().take(k).filter(|hit| evidence.contains(hit)).collect::<HashSet<_>>().len();
                found as f64 / evidence.len().max(1) as f64
            })
        })
        .collect()
}

/// The mean recall of `recalls` over the questions `chosen` admits, in percent.
fn mean_recall(recalls: &[[f64; 3]], chosen: impl Fn(usize) -> bool) -> [f64; 3] {
    let mut sums = [0.0; 3];
    let mut n = 0;
    for (_, recall) in recalls.iter().enumerate().filter(|(index, _)| chosen(*index)) {
        n += 1;
        for (sum, value) in sums.iter_mut().zip(recall) {
            *sum += value;
        }
    }
    sums.map(|sum| 100.0 * sum / n.max(1) as f64)
}

/// What a grid point is chosen by: the mean of R@1, R@5 and R@10 (the top of the list and
/// its depth alike).
fn merit(recall: [f64; 3]) -> f64 {
    recall.iter().sum::<f64>() / 3.0
}

fn leave_one_out(
    store: &dyn Backend,
    recall: &RecallConfig,
    state: &EmbedderState,
    questions: &[Question],
) -> anyhow::Result<LeaveOneOut> {
    let grid = tuning_grid();
    let mut recalls = Vec::new();
    for (index, point) in grid.iter().enumerate() {
        eprintln!("leave-one-out grid {}/{}: {point:?}", index + 1, grid.len());
        let variant = RecallConfig {
            semantic_weight: point.semantic_weight,
            keyword_weight: 1.0 - point.semantic_weight,
            time_weight: point.time_weight,
            speaker_weight: point.speaker_weight,
            expansion_weight: point.expansion_weight,
            neighbour_weight: point.neighbour_weight,
            ..recall.clone()
        };
        let run = run_each("grid", questions, |q| {
            let args = top_ten(&q.question);
            let answer =
                strata_recall::tools::search(store, &Scope::persona(&q.persona), &variant, state, &args)?;
            Ok(positions(answer.results))
        })?;
        recalls.push(per_question(&run, questions));
    }
    let best_on = |admit: &dyn Fn(usize) -> bool| {
        (0..grid.len())
            .max_by(|&a, &b| {
                merit(mean_recall(&recalls[a], admit)).total_cmp(&merit(mean_recall(&recalls[b], admit)))
            })
            .expect("the grid is not empty")
    };
    let personas: Vec<String> = questions
        .iter()
        .map(|q| q.persona.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut pooled = vec![[0.0; 3]; questions.len()];
    let mut folds = Vec::new();
    for persona in &personas {
        let others = |index: usize| questions[index].persona != *persona;
        let chosen = best_on(&others);
        let mine = |index: usize| questions[index].persona == *persona;
        for index in (0..questions.len()).filter(|&index| mine(index)) {
            pooled[index] = recalls[chosen][index];
        }
        folds.push(Fold {
            persona: persona.clone(),
            chosen: grid[chosen],
            held_out: mean_recall(&recalls[chosen], mine),
            fitted: mean_recall(&recalls[chosen], others),
        });
    }
    let mut categories: BTreeMap<String, [f64; 3]> = BTreeMap::new();
    let names: std::collections::BTreeSet<&String> = questions.iter().map(|q| &q.category).collect();
    for name in names {
        categories.insert(name.clone(), mean_recall(&pooled, |index| questions[index].category == *name));
    }
    let all = best_on(&|_| true);
    Ok(LeaveOneOut {
        folds,
        overall: mean_recall(&pooled, |_| true),
        categories,
        fitted_on_all: grid[all],
        fitted_on_all_overall: mean_recall(&recalls[all], |_| true),
    })
}

fn write_leave_one_out(
    out: &mut impl Write,
    held_out: &LeaveOneOut,
    dev: &Scores,
    categories: &[String],
) -> anyhow::Result<()> {
    writeln!(out, "\nleave one conversation out (settings chosen on the others by mean R@1/5/10):")?;
    for fold in &held_out.folds {
        let Tuned { semantic_weight, time_weight, speaker_weight, expansion_weight, neighbour_weight } =
            fold.chosen;
        let [h1, h5, h10] = fold.held_out;
        let [f1, f5, f10] = fold.fitted;
        writeln!(
            out,
            "  {} left out: semantic {semantic_weight:.1}, time {time_weight:.2}, speaker {speaker_weight:.2}, \
             expansion {expansion_weight:.1}, neighbour {neighbour_weight:.1}; \
             on it {h1:.1} / {h5:.1} / {h10:.1}, on the others {f1:.1} / {f5:.1} / {f10:.1}",
            fold.persona
        )?;
    }
    write!(out, "{:<30} {:>6} {:>6} {:>6}", "", "R@1", "R@5", "R@10")?;
    for category in categories {
        write!(out, " {:>12}", format!("{category} @10"))?;
    }
    writeln!(out)?;
    let mut row =
        |name: &str, overall: [f64; 3], categories_of: &dyn Fn(&str) -> f64| -> anyhow::Result<()> {
            write!(out, "{name:<30} {:>6.1} {:>6.1} {:>6.1}", overall[0], overall[1], overall[2])?;
            for category in categories {
                write!(out, " {:>12.1}", categories_of(category))?;
            }
            writeln!(out)?;
            Ok(())
        };
    row("dev (defaults, all three)", dev.overall, &|c| dev.categories.get(c).map_or(0.0, |r| r[2]))?;
    row("leave one out", held_out.overall, &|c| held_out.categories.get(c).map_or(0.0, |r| r[2]))?;
    let Tuned { semantic_weight, time_weight, speaker_weight, expansion_weight, neighbour_weight } =
        held_out.fitted_on_all;
    let [a1, a5, a10] = held_out.fitted_on_all_overall;
    writeln!(
        out,
        "best grid point on all three: semantic {semantic_weight:.1}, time {time_weight:.2}, speaker \
         {speaker_weight:.2}, expansion \
         {expansion_weight:.1}, neighbour {neighbour_weight:.1}: {a1:.1} / {a5:.1} / {a10:.1}"
    )?;
    Ok(())
}

/// Appends each session's messages through the storage seam, in file order, a thousand at a
/// time (the seam has no bulk import; SQLite's `append_many` is one transaction instead).
fn append_by_session(
    backend: &dyn Backend,
    incoming: &[strata_seam::transfer::IncomingMessage],
) -> anyhow::Result<()> {
    let mut start = 0;
    while start < incoming.len() {
        let first = &incoming[start];
        let run = incoming[start..].iter().take_while(|item| item.session_key == first.session_key).count();
        let session = backend.session(&first.session_key, &first.persona)?;
        for batch in incoming[start..start + run].chunks(1000) {
            let messages: Vec<_> = batch.iter().map(|item| item.message.clone()).collect();
            backend.append(session.id, &messages)?;
        }
        start += run;
    }
    Ok(())
}

/// The (session, seq) of each message result, in order (summaries and memories hold no turn).
fn positions(results: Vec<strata_recall::tools::Hit>) -> Vec<Evidence> {
    results.into_iter().filter_map(|hit| Some(Evidence { session: hit.session?, seq: hit.seq? })).collect()
}

fn run_each(
    name: &str,
    questions: &[Question],
    mut retrieve: impl FnMut(&Question) -> anyhow::Result<Vec<Evidence>>,
) -> anyhow::Result<Run> {
    let mut run = Run { name: name.to_owned(), ranked: Vec::new(), millis: Vec::new() };
    for question in questions {
        let started = Instant::now();
        let ranked = retrieve(question).with_context(|| format!("{name}, question {}", question.id))?;
        run.millis.push(started.elapsed().as_secs_f64() * 1000.0);
        run.ranked.push(ranked);
    }
    Ok(run)
}

fn score(run: &Run, questions: &[Question]) -> Scores {
    let mut overall = [0.0; 3];
    let mut categories: BTreeMap<String, ([f64; 3], usize)> = BTreeMap::new();
    for (question, ranked) in questions.iter().zip(&run.ranked) {
        let evidence: HashSet<&Evidence> = question.evidence.iter().collect();
        let entry = categories.entry(question.category.clone()).or_default();
        entry.1 += 1;
        for (slot, k) in KS.iter().enumerate() {
            let found =
                ranked.iter().take(*k).filter(|hit| evidence.contains(hit)).collect::<HashSet<_>>().len();
            let recall = found as f64 / evidence.len().max(1) as f64;
            overall[slot] += recall;
            entry.0[slot] += recall;
        }
    }
    let percent = |sums: [f64; 3], n: usize| sums.map(|sum| 100.0 * sum / n.max(1) as f64);
    let mut millis = run.millis.clone();
    millis.sort_by(f64::total_cmp);
    Scores {
        retriever: run.name.clone(),
        overall: percent(overall, questions.len()),
        categories: categories.into_iter().map(|(name, (sums, n))| (name, percent(sums, n))).collect(),
        median_ms: millis.get(millis.len() / 2).copied().unwrap_or(0.0),
    }
}

/// Plain Okapi BM25 (k1 = 1.5, b = 0.75, negative idf floored at a quarter of the mean idf, as
/// the common `rank_bm25` package computes it) over "speaker: text", lowercase word tokens, no
/// stop words, no stemming: the baseline every strata figure is compared with.
struct Bm25Baseline {
    personas: HashMap<String, Bm25Index>,
}

/// One message as BM25 sees it: where it is, its token counts, its length in tokens.
struct Document {
    position: Evidence,
    counts: HashMap<String, usize>,
    length: usize,
}

struct Bm25Index {
    documents: Vec<Document>,
    idf: HashMap<String, f64>,
    mean_length: f64,
}

fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|t| !t.is_empty()).map(str::to_lowercase)
}

impl Bm25Baseline {
    fn new(messages: &[strata_seam::transfer::IncomingMessage]) -> Bm25Baseline {
        let mut seqs: HashMap<&str, i64> = HashMap::new();
        let mut documents: HashMap<String, Vec<Document>> = HashMap::new();
        for incoming in messages {
            let seq = seqs.entry(&incoming.session_key).or_insert(0);
            let message = &incoming.message;
            let speaker = message.name.clone().unwrap_or_else(|| message.role.as_str().to_owned());
            let mut counts: HashMap<String, usize> = HashMap::new();
            let mut length = 0;
            for token in tokens(&format!("{speaker}: {}", message.content)) {
                *counts.entry(token).or_default() += 1;
                length += 1;
            }
            let position = Evidence { session: incoming.session_key.clone(), seq: *seq };
            documents.entry(incoming.persona.clone()).or_default().push(Document {
                position,
                counts,
                length,
            });
            *seq += 1;
        }
        let personas = documents
            .into_iter()
            .map(|(persona, documents)| {
                let n = documents.len() as f64;
                let mut frequency: HashMap<String, usize> = HashMap::new();
                for document in &documents {
                    for token in document.counts.keys() {
                        *frequency.entry(token.clone()).or_default() += 1;
                    }
                }
                let mut idf: HashMap<String, f64> = frequency
                    .into_iter()
                    .map(|(token, df)| (token, ((n - df as f64 + 0.5) / (df as f64 + 0.5)).ln()))
                    .collect();
                let floor = 0.25 * idf.values().sum::<f64>() / idf.len().max(1) as f64;
                idf.values_mut().filter(|value| **value < 0.0).for_each(|value| *value = floor);
                let mean_length = documents.iter().map(|d| d.length as f64).sum::<f64>() / n.max(1.0);
                (persona, Bm25Index { documents, idf, mean_length })
            })
            .collect();
        Bm25Baseline { personas }
    }

    fn rank(&self, persona: &str, query: &str, k: usize) -> Vec<Evidence> {
        let Some(index) = self.personas.get(persona) else { return Vec::new() };
        let (k1, b) = (1.5, 0.75);
        let query: Vec<String> = tokens(query).collect();
        let mut scored: Vec<(f64, &Evidence)> = index
            .documents
            .iter()
            .map(|Document { position, counts, length }| {
                let norm = k1 * (1.0 - b + b * *length as f64 / index.mean_length);
                let score = query
                    .iter()
                    .filter_map(|token| {
                        let tf = *counts.get(token)? as f64;
                        Some(index.idf.get(token).copied().unwrap_or(0.0) * tf * (k1 + 1.0) / (tf + norm))
                    })
                    .sum::<f64>();
                (score, position)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.into_iter().take(k).map(|(_, position)| position.clone()).collect()
    }
}

/// `memory_search`'s arguments for one question or paraphrase: its ten best, no time window.
fn top_ten(question: &str) -> MemorySearchArgs {
    MemorySearchArgs {
        query: question.to_owned(),
        limit: Some(10),
        start_time: None,
        end_time: None,
        include_in_context: None,
    }
}
