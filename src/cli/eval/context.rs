//! `strata eval context`: what the model has in front of it when a question comes.
//!
//! Each dev conversation is stored as one long session, embedded, and compacted for a model of
//! `--window` tokens with the extractive summarizer; then every question is asked as the
//! session's next request (a dry run: nothing is stored) and three contexts of the same budget
//! are scored:
//! - a plain sliding window: the newest messages that fit, then the request;
//! - strata without the recalled block (`[recall] proactive = false`);
//! - strata with it.
//!
//! Two figures per context: the share of a question's evidence messages it shows verbatim
//! (averaged over questions) and the share of questions whose answer words all appear in it,
//! summaries included. The block's cost in tokens is reported, and how often it is empty, on
//! the questions and on the other conversations' questions asked of each conversation: the dev
//! set has no questions about things never said, and another pair's life is such a question
//! (their names are not in it).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use strata::blocking::Engine;
use strata_compactor::{AssembledContext, TokenCounter};
use strata_seam::{Message, MessageId, NewMessage, Role, SessionId};
use strata_store::Store;

use super::{Probe, holds_all, read_questions};
use crate::cli::output::print_json;
use strata_seam::{Conversations, Search};

#[derive(Debug, clap::Args)]
pub struct ContextArgs {
    /// Directory with transcripts.jsonl and questions.jsonl.
    #[arg(long, default_value = "../shared/eval/conversations")]
    data: PathBuf,
    /// The model's context window in tokens; repeat for several.
    #[arg(long, default_values_t = [4_000, 8_000, 32_000])]
    window: Vec<u32>,
    /// Evaluate only the first N questions (all when absent).
    #[arg(long)]
    questions: Option<usize>,
}

/// One context's figures at one window.
#[derive(Debug, Default, Serialize)]
struct Scores {
    context: &'static str,
    /// Mean share of each question's evidence messages shown verbatim, percent.
    evidence: f64,
    /// Questions whose answer words all appear in the context, and of how many.
    answered: usize,
    questions: usize,
    /// Mean tokens of the context.
    tokens: f64,
    /// Mean tokens of the recalled block (strata with it only).
    block_tokens: f64,
    /// Share of the questions whose block shows nothing, percent.
    block_empty: f64,
    /// The same on the other conversations' questions, percent.
    block_empty_elsewhere: f64,
}

#[derive(Debug, Serialize)]
struct WindowReport {
    window: u32,
    /// What strata's messages may use (window - reserve - tool definitions); the sliding
    /// window gets the same.
    budget: u32,
    contexts: Vec<Scores>,
}

/// One conversation, stored.
struct Conversation {
    persona: String,
    session: SessionId,
    messages: Vec<Message>,
    /// When its next message comes: a minute after its last.
    next_at: DateTime<Utc>,
}

pub fn run(
    config: &strata::Config,
    args: &ContextArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let counter = TokenCounter::for_model(&config.compactor.model);
    let mut incoming = super::dev_transcripts(&args.data, &config.compactor, &counter)?;
    let positions = super::one_session_per_persona(&mut incoming);
    let mut questions = read_questions(&args.data.join("questions.jsonl"))?;
    if let Some(limit) = args.questions {
        questions.truncate(limit);
    }
    let probes: Vec<Probe> = questions
        .iter()
        .map(|question| Probe::of(question, &positions))
        .filter(|probe| !probe.evidence.is_empty())
        .collect();
    let mut reports = Vec::new();
    for &window in &args.window {
        let windowed = crate::cli::compact::for_window(config, window);
        let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
        let store = Store::open(dir.path().join("eval.db"))?;
        store.append_many(&incoming).context("cannot store the transcripts")?;
        store.catch_up_search_index()?;
        let with_block = Engine::from_store(store.clone(), windowed.clone())?;
        let mut without = windowed.clone();
        without.recall.proactive = false;
        let without_block = Engine::from_store(store.clone(), without)?;
        with_block.engine().embed_pending()?;
        let mut conversations = HashMap::new();
        for session in store.sessions(None)? {
            with_block.compact_until_done(session.id, 1024, 1_000, |_| {})?;
            let messages = store.messages(session.id, 0..=i64::MAX)?;
            let next_at = messages.last().map_or_else(Utc::now, |m| m.created_at) + Duration::minutes(1);
            conversations.insert(
                session.persona.clone(),
                Conversation { persona: session.persona, session: session.id, messages, next_at },
            );
        }
        let budget = with_block.config().compactor().budget();
        let mut sliding = Tally::new("sliding window");
        let mut plain = Tally::new("strata");
        let mut recalled = Tally::new("strata + recalled block");
        for probe in &probes {
            let Some(conversation) = conversations.get(&probe.persona) else { continue };
            let request = request(&probe.question, conversation.next_at, &counter);
            let window_of = sliding_window(&conversation.messages, &request, budget);
            sliding.add(probe, conversation, &window_of.0, &window_of.1, window_of.2, None);
            for (engine, tally) in [(&without_block, &mut plain), (&with_block, &mut recalled)] {
                let context =
                    engine.preview(conversation.session, Some(request.clone()), conversation.next_at)?;
                let (shown, text) = shown(&context, &request.content);
                tally.add(probe, conversation, &shown, &text, context.tokens.total, Some(&context));
            }
            // The same request asked of every other conversation: nothing there is about it.
            for other in conversations.values().filter(|other| other.persona != conversation.persona) {
                let request = request_at(&request, other.next_at);
                let context = with_block.preview(other.session, Some(request), other.next_at)?;
                recalled.elsewhere(&context);
            }
        }
        reports.push(WindowReport {
            window,
            budget,
            contexts: vec![sliding.scores(), plain.scores(), recalled.scores()],
        });
    }
    if json {
        return print_json(out, &reports);
    }
    writeln!(
        out,
        "{:>7} {:>7}  {:<24} {:>9} {:>13} {:>8} {:>7} {:>11} {:>12}",
        "window",
        "budget",
        "context",
        "evidence",
        "answer words",
        "tokens",
        "block",
        "block empty",
        "elsewhere"
    )?;
    for report in &reports {
        for scores in &report.contexts {
            let answered = format!(
                "{}/{} {:.1}%",
                scores.answered,
                scores.questions,
                100.0 * scores.answered as f64 / scores.questions.max(1) as f64
            );
            writeln!(
                out,
                "{:>7} {:>7}  {:<24} {:>8.1}% {:>13} {:>8.0} {:>7.0} {:>10.1}% {:>11.1}%",
                report.window,
                report.budget,
                scores.context,
                scores.evidence,
                answered,
                scores.tokens,
                scores.block_tokens,
                scores.block_empty,
                scores.block_empty_elsewhere,
            )?;
        }
    }
    Ok(())
}

/// The question as the user's next message, counted.
fn request(question: &str, at: DateTime<Utc>, counter: &TokenCounter) -> NewMessage {
    let mut message = NewMessage::text(Role::User, question);
    message.created_at = at;
    counter.count_new(&mut message);
    message
}

fn request_at(request: &NewMessage, at: DateTime<Utc>) -> NewMessage {
    NewMessage { created_at: at, ..request.clone() }
}

/// The newest messages that fit `budget` with the request after them: their ids, their text
/// (the request's own left out: it is not an answer), and their tokens (counted as strata counts a context: each message's
/// stored count, plus the reply priming).
fn sliding_window(
    messages: &[Message],
    request: &NewMessage,
    budget: u32,
) -> (HashSet<MessageId>, String, u32) {
    let mut spent = request.token_count + strata_compactor::context::TOKENS_PER_REPLY;
    let mut shown = HashSet::new();
    let mut text = String::new();
    for message in messages.iter().rev() {
        if spent + message.token_count > budget {
            break;
        }
        spent += message.token_count;
        shown.insert(message.id);
        text.push('\n');
        text.push_str(&message.content);
    }
    (shown, text, spent)
}

/// The stored messages a context shows verbatim (refilled, buffer, tail and the recalled
/// block's hits) and all of its text but the request's own (what was injected before it stays).
fn shown(context: &AssembledContext, request: &str) -> (HashSet<MessageId>, String) {
    let mut shown: HashSet<MessageId> =
        context.entries.iter().filter(|entry| !entry.abridged).filter_map(|entry| entry.message_id).collect();
    if let Some(block) = &context.recalled {
        shown.extend(block.hits.iter().map(|hit| hit.message_id));
    }
    let text: Vec<&str> = context
        .messages
        .iter()
        .zip(&context.entries)
        .filter_map(|(message, entry)| {
            let content = message["content"].as_str()?;
            // The unstored request is the one entry with a seq and no id.
            let is_request = entry.seq.is_some() && entry.message_id.is_none();
            Some(if is_request { content.strip_suffix(request).unwrap_or(content) } else { content })
        })
        .collect();
    (shown, text.join("\n"))
}

/// Running sums of one context's figures.
struct Tally {
    name: &'static str,
    evidence: f64,
    answered: usize,
    asked: usize,
    with_answer: usize,
    tokens: u64,
    block_tokens: u64,
    block_empty: usize,
    elsewhere: usize,
    elsewhere_empty: usize,
}

impl Tally {
    fn new(name: &'static str) -> Tally {
        Tally {
            name,
            evidence: 0.0,
            answered: 0,
            asked: 0,
            with_answer: 0,
            tokens: 0,
            block_tokens: 0,
            block_empty: 0,
            elsewhere: 0,
            elsewhere_empty: 0,
        }
    }

    fn add(
        &mut self,
        probe: &Probe,
        conversation: &Conversation,
        shown: &HashSet<MessageId>,
        text: &str,
        tokens: u32,
        context: Option<&AssembledContext>,
    ) {
        let by_seq = |seq: i64| conversation.messages.get(seq as usize).map(|m| m.id);
        let present = probe.evidence.iter().filter(|&&seq| by_seq(seq).is_some_and(|id| shown.contains(&id)));
        self.evidence += present.count() as f64 / probe.evidence.len() as f64;
        self.asked += 1;
        if !probe.answer.is_empty() {
            self.with_answer += 1;
            if holds_all(text, &probe.answer) {
                self.answered += 1;
            }
        }
        self.tokens += u64::from(tokens);
        if let Some(block) = context.and_then(|context| context.recalled.as_ref()) {
            self.block_tokens += u64::from(block.tokens);
            self.block_empty += usize::from(block.hits.is_empty());
        }
    }

    fn elsewhere(&mut self, context: &AssembledContext) {
        self.elsewhere += 1;
        self.elsewhere_empty +=
            usize::from(context.recalled.as_ref().is_none_or(|block| block.hits.is_empty()));
    }

    fn scores(&self) -> Scores {
        let asked = self.asked.max(1) as f64;
        Scores {
            context: self.name,
            evidence: 100.0 * self.evidence / asked,
            answered: self.answered,
            questions: self.with_answer,
            tokens: self.tokens as f64 / asked,
            block_tokens: self.block_tokens as f64 / asked,
            block_empty: 100.0 * self.block_empty as f64 / asked,
            block_empty_elsewhere: 100.0 * self.elsewhere_empty as f64 / self.elsewhere.max(1) as f64,
        }
    }
}
