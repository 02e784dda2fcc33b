//! `strata eval cache`: how much of each prompt a provider's prompt cache could reuse.
//!
//! Each conversation (the dev set's, each persona one session, and the generated week of pair
//! programming) is fed message by message as a bot would store it, and before each assistant
//! message (each LLM call) the context is prepared as the bot would send it: strata through
//! `prepare_context` (compaction first, the recalled block with the real model, new rows
//! embedded as they come), strata with `refill_folded_turns` off, and a plain sliding window of
//! the same budget (the newest messages that fit). Per call:
//! - the reusable share: bytes of the serialized messages (a JSON array, what a request's
//!   `messages` holds) that are a byte-identical prefix of the previous call's;
//! - the tokens sent, and of them those in whole messages the previous call sent byte for byte
//!   in the same place (a provider caches whole blocks at its breakpoints);
//! - the input cost relative to no caching, priced as Anthropic does: a token read from the
//!   cache at 0.1, every other token at 1.25 (written to the cache for the next call).
//!
//! Tool definitions are left out of every figure (they come first and are always cached).
//! "Once full" counts the calls from the first compaction on (for the sliding window, from the
//! first call that left a message out): the reusable share, the calls at least half reusable,
//! breaks, tokens and the cost relative to no caching are over those; the cost relative to the
//! sliding window's is over every call. A break is a call that does not repeat the previous
//! call's messages up to its newest request.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;
use serde_json::{Value, json};
use strata::blocking::Engine;
use strata_compactor::TokenCounter;
use strata_compactor::context::Part;
use strata_seam::{NewMessage, Role};
use strata_store::Store;

use crate::cli::output::print_json;
use strata_seam::Conversations;

/// What a cached input token costs, relative to an uncached one (Anthropic's cache reads).
const CACHED_PRICE: f64 = 0.1;
/// What an input token not read from the cache costs: it is written to it (Anthropic's
/// five-minute cache writes).
const WRITTEN_PRICE: f64 = 1.25;

#[derive(Debug, clap::Args)]
pub struct CacheArgs {
    /// Directory with transcripts.jsonl (the dev set's conversations).
    #[arg(long, default_value = "../shared/eval/conversations")]
    data: PathBuf,
    /// The model's context window in tokens; repeat for several.
    #[arg(long, default_values_t = [8_000, 16_000, 32_000])]
    window: Vec<u32>,
    /// Messages of the generated week of pair programming (0 leaves it out).
    #[arg(long, default_value_t = 600)]
    week_messages: usize,
    /// Only the first N messages of each conversation (all when absent).
    #[arg(long)]
    messages: Option<usize>,
    /// Writes every call's figures to this file, one JSON object a line.
    #[arg(long)]
    calls: Option<PathBuf>,
}

/// One call's figures.
#[derive(Debug, Serialize)]
struct Call {
    window: u32,
    conversation: String,
    context: &'static str,
    call: usize,
    /// From the first compaction on (the sliding window: from the first message left out).
    full: bool,
    /// Bytes of the serialized messages, and of them the prefix the previous call sent.
    bytes: usize,
    reusable_bytes: usize,
    /// Tokens sent, and of them those in whole messages the previous call sent in place.
    tokens: u32,
    cached_tokens: u32,
    /// Whether the call repeats the previous one up to its newest request.
    extends: bool,
    /// A compaction ran before it.
    compacted: bool,
}

impl Call {
    fn share(&self) -> f64 {
        self.reusable_bytes as f64 / self.bytes.max(1) as f64
    }

    /// The input cost in uncached tokens' worth.
    fn cost(&self) -> f64 {
        CACHED_PRICE * f64::from(self.cached_tokens)
            + WRITTEN_PRICE * f64::from(self.tokens - self.cached_tokens)
    }
}

/// One context's figures on one conversation group at one window, over the calls once full.
#[derive(Debug, Serialize)]
struct Summary {
    window: u32,
    conversations: String,
    context: &'static str,
    calls: usize,
    full_calls: usize,
    /// Mean reusable share, percent.
    reusable: f64,
    /// Calls at least half reusable.
    half_reusable: usize,
    /// Calls that do not extend the previous one, per 100 calls.
    breaks_per_100: f64,
    compactions: usize,
    tokens: f64,
    /// Mean cost relative to sending the same tokens uncached.
    cost_vs_uncached: f64,
    /// Mean cost per call, every call counted, relative to the sliding window's.
    cost_vs_sliding: f64,
}

/// One conversation to feed: its name, persona and messages (tokens counted).
struct Conversation {
    name: String,
    group: &'static str,
    persona: String,
    messages: Vec<NewMessage>,
}

pub fn run(
    config: &strata::Config,
    args: &CacheArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let counter = TokenCounter::for_model(&config.compactor.model);
    let conversations = conversations(config, args, &counter)?;
    let mut calls_file = match &args.calls {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    let mut summaries = Vec::new();
    for &window in &args.window {
        let windowed = crate::cli::compact::for_window(config, window);
        let mut without_refill = windowed.clone();
        without_refill.compactor.refill_folded_turns = false;
        // (group, context) -> calls
        let mut grouped: BTreeMap<(&'static str, &'static str), Vec<Call>> = BTreeMap::new();
        for conversation in &conversations {
            let started = std::time::Instant::now();
            let mut budget = 0;
            for (name, settings) in [("strata", &windowed), ("strata, refill off", &without_refill)] {
                let (calls, its_budget) = strata_calls(settings, conversation, window, name)?;
                budget = its_budget;
                grouped.entry((conversation.group, name)).or_default().extend(calls);
            }
            let sliding = sliding_calls(conversation, window, budget);
            grouped.entry((conversation.group, "sliding window")).or_default().extend(sliding);
            eprintln!(
                "window {window}: {} ({} messages) in {:.1} s",
                conversation.name,
                conversation.messages.len(),
                started.elapsed().as_secs_f64()
            );
        }
        let groups: Vec<&'static str> = {
            let mut groups: Vec<&'static str> = grouped.keys().map(|(group, _)| *group).collect();
            groups.dedup();
            groups
        };
        for group in groups {
            let sliding_cost = mean_cost(&grouped[&(group, "sliding window")]);
            for context in ["sliding window", "strata, refill off", "strata"] {
                let calls = &grouped[&(group, context)];
                summaries.push(summarize(window, group, context, calls, sliding_cost));
            }
        }
        if let Some(file) = calls_file.as_mut() {
            for call in grouped.values().flatten() {
                serde_json::to_writer(&mut *file, call)?;
                writeln!(file)?;
            }
        }
    }
    if let Some(mut file) = calls_file {
        file.flush()?;
    }
    if json {
        return print_json(out, &summaries);
    }
    writeln!(
        out,
        "{:>7}  {:<16} {:<20} {:>11} {:>10} {:>12} {:>10} {:>8} {:>9} {:>9} {:>11}",
        "window",
        "conversations",
        "context",
        "calls full",
        "reusable",
        ">=50% calls",
        "breaks/100",
        "compact",
        "tokens",
        "cost/none",
        "cost/sliding"
    )?;
    for summary in &summaries {
        writeln!(
            out,
            "{:>7}  {:<16} {:<20} {:>11} {:>9.1}% {:>12} {:>10.1} {:>8} {:>9.0} {:>9.3} {:>11.3}",
            summary.window,
            summary.conversations,
            summary.context,
            format!("{}/{}", summary.full_calls, summary.calls),
            summary.reusable,
            format!("{}/{}", summary.half_reusable, summary.full_calls),
            summary.breaks_per_100,
            summary.compactions,
            summary.tokens,
            summary.cost_vs_uncached,
            summary.cost_vs_sliding,
        )?;
    }
    Ok(())
}

/// The dev set's conversations, each persona one session, and the generated week.
fn conversations(
    config: &strata::Config,
    args: &CacheArgs,
    counter: &TokenCounter,
) -> anyhow::Result<Vec<Conversation>> {
    let mut incoming = super::dev_transcripts(&args.data, &config.compactor, counter)?;
    super::one_session_per_persona(&mut incoming);
    let mut conversations: Vec<Conversation> = Vec::new();
    for item in incoming {
        match conversations.last_mut() {
            Some(last) if last.persona == item.persona => last.messages.push(item.message),
            _ => conversations.push(Conversation {
                name: item.persona.clone(),
                group: "dev set",
                persona: item.persona,
                messages: vec![item.message],
            }),
        }
    }
    if args.week_messages > 0 {
        let week = strata_synth::generate(&strata_synth::TranscriptSpec {
            min_messages: args.week_messages,
            min_chars: 0,
            ..Default::default()
        });
        let mut messages = week.messages;
        counter.count_new_all(messages.iter_mut());
        conversations.push(Conversation {
            name: "synthetic week".into(),
            group: "synthetic week",
            persona: "week".into(),
            messages,
        });
    }
    if let Some(limit) = args.messages {
        for conversation in &mut conversations {
            conversation.messages.truncate(limit);
        }
    }
    Ok(conversations)
}

/// The calls of strata with `settings` on `conversation`, and the budget its messages had.
fn strata_calls(
    settings: &strata::Config,
    conversation: &Conversation,
    window: u32,
    name: &'static str,
) -> anyhow::Result<(Vec<Call>, u32)> {
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let store = Store::open(dir.path().join("eval.db"))?;
    let engine = Engine::from_store(store.clone(), settings.clone())?;
    let budget = engine.config().compactor().budget();
    let session = engine.session(&conversation.name, &conversation.persona)?;
    let mut calls = Vec::new();
    let mut previous: Option<Sent> = None;
    let mut full = false;
    for (index, message) in conversation.messages.iter().enumerate() {
        // An assistant message is what an LLM call answered: the context is prepared before it.
        if message.role == Role::Assistant && index > 0 {
            engine.engine().embed_pending()?;
            let prepared = session.prepare_context()?;
            let compacted = matches!(prepared.outcome, Some(strata_compactor::Outcome::Compacted { .. }));
            let context = &prepared.context;
            full |= context.entries.iter().any(|entry| entry.part == Part::Scaffold);
            let tokens: Vec<u32> = context.entries.iter().map(|entry| entry.tokens).collect();
            let sent = Sent::new(&context.messages, tokens, context.stable_len);
            let mut call = sent.call_after(previous.as_ref());
            call.total_tokens(context.tokens.total);
            calls.push(Call {
                window,
                conversation: conversation.name.clone(),
                context: name,
                call: calls.len(),
                full,
                compacted,
                ..call.into_call()
            });
            previous = Some(sent);
        }
        store.append(session.id(), std::slice::from_ref(message))?;
    }
    Ok((calls, budget))
}

/// The calls of a sliding window of `budget` tokens on `conversation`.
fn sliding_calls(conversation: &Conversation, window: u32, budget: u32) -> Vec<Call> {
    let mut calls = Vec::new();
    let mut previous: Option<Sent> = None;
    let mut full = false;
    for (index, message) in conversation.messages.iter().enumerate() {
        if message.role == Role::Assistant && index > 0 {
            let stored = &conversation.messages[..index];
            let mut spent = strata_compactor::context::TOKENS_PER_REPLY;
            let mut first = stored.len();
            while first > 0 && spent + stored[first - 1].token_count <= budget {
                first -= 1;
                spent += stored[first].token_count;
            }
            full |= first > 0;
            let shown = &stored[first..];
            let messages: Vec<Value> = shown.iter().map(wire).collect();
            let tokens: Vec<u32> = shown.iter().map(|message| message.token_count).collect();
            let newest_request = shown.iter().rposition(|message| message.role == Role::User);
            let sent = Sent::new(&messages, tokens, newest_request.unwrap_or(shown.len()));
            let mut call = sent.call_after(previous.as_ref());
            call.total_tokens(spent);
            calls.push(Call {
                window,
                conversation: conversation.name.clone(),
                context: "sliding window",
                call: calls.len(),
                full,
                compacted: false,
                ..call.into_call()
            });
            previous = Some(sent);
        }
    }
    calls
}

/// A stored message as a request sends it.
fn wire(message: &NewMessage) -> Value {
    let mut value = json!({ "role": message.role.as_str(), "content": message.content });
    if let Some(name) = &message.name {
        value["name"] = Value::String(name.clone());
    }
    if let Some(calls) = &message.tool_calls {
        value["tool_calls"] = calls.clone();
    }
    if let Some(id) = &message.tool_call_id {
        value["tool_call_id"] = Value::String(id.clone());
    }
    value
}

/// One call's messages as sent: the serialized array and where each message ends in it.
struct Sent {
    bytes: Vec<u8>,
    /// The byte offset after each message's closing brace.
    ends: Vec<usize>,
    tokens: Vec<u32>,
    /// Messages before the newest request.
    stable_len: usize,
}

/// What comparing a call with the previous one gave, before it is named.
struct Compared {
    bytes: usize,
    reusable_bytes: usize,
    tokens: u32,
    cached_tokens: u32,
    extends: bool,
}

impl Compared {
    /// The tokens the call sends in all (the reply priming included); cached ones stay.
    fn total_tokens(&mut self, total: u32) {
        self.tokens = total.max(self.cached_tokens);
    }

    fn into_call(self) -> Call {
        Call {
            window: 0,
            conversation: String::new(),
            context: "",
            call: 0,
            full: false,
            bytes: self.bytes,
            reusable_bytes: self.reusable_bytes,
            tokens: self.tokens,
            cached_tokens: self.cached_tokens,
            extends: self.extends,
            compacted: false,
        }
    }
}

impl Sent {
    fn new(messages: &[Value], tokens: Vec<u32>, stable_len: usize) -> Sent {
        // Serialized as `serde_json` writes the array: `[m0,m1,...]`.
        let mut bytes = vec![b'['];
        let mut ends = Vec::with_capacity(messages.len());
        for (index, message) in messages.iter().enumerate() {
            if index > 0 {
                bytes.push(b',');
            }
            bytes.extend(serde_json::to_vec(message).unwrap_or_default());
            ends.push(bytes.len());
        }
        bytes.push(b']');
        Sent { bytes, ends, tokens, stable_len }
    }

    fn call_after(&self, previous: Option<&Sent>) -> Compared {
        let Some(previous) = previous else {
            return Compared {
                bytes: self.bytes.len(),
                reusable_bytes: 0,
                tokens: self.tokens.iter().sum(),
                cached_tokens: 0,
                extends: true,
            };
        };
        let common = self.bytes.iter().zip(&previous.bytes).take_while(|(a, b)| a == b).count();
        // A message whose closing brace is inside the common prefix was sent as it is (a JSON
        // object's bytes are never a prefix of another's).
        let whole = self.ends.iter().take_while(|&&end| end <= common).count();
        let cached_tokens = self.tokens[..whole].iter().sum();
        let stable_end = match previous.stable_len {
            0 => 1,
            len => previous.ends[len - 1],
        };
        Compared {
            bytes: self.bytes.len(),
            reusable_bytes: common.min(self.bytes.len()),
            tokens: self.tokens.iter().sum(),
            cached_tokens,
            extends: common >= stable_end,
        }
    }
}

/// Mean cost of every call (the same calls for every context: before the window is full a
/// sliding window only appends, and caches as well as strata).
fn mean_cost(calls: &[Call]) -> f64 {
    calls.iter().map(|call| call.cost()).sum::<f64>() / calls.len().max(1) as f64
}

fn summarize(window: u32, group: &str, context: &'static str, calls: &[Call], sliding_cost: f64) -> Summary {
    let full: Vec<&Call> = calls.iter().filter(|call| call.full).collect();
    let count = full.len().max(1) as f64;
    Summary {
        window,
        conversations: group.to_owned(),
        context,
        calls: calls.len(),
        full_calls: full.len(),
        reusable: 100.0 * full.iter().map(|call| call.share()).sum::<f64>() / count,
        half_reusable: full.iter().filter(|call| call.share() >= 0.5).count(),
        breaks_per_100: 100.0 * full.iter().filter(|call| !call.extends).count() as f64 / count,
        compactions: calls.iter().filter(|call| call.compacted).count(),
        tokens: full.iter().map(|call| f64::from(call.tokens)).sum::<f64>() / count,
        cost_vs_uncached: full.iter().map(|call| call.cost() / f64::from(call.tokens.max(1))).sum::<f64>()
            / count,
        cost_vs_sliding: mean_cost(calls) / sliding_cost.max(f64::MIN_POSITIVE),
    }
}
