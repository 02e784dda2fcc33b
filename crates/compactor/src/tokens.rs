//! Exact token counting with tiktoken, chosen by model name.
//!
//! o200k_base for the gpt-4o/4.1/5/o-series names, cl100k_base otherwise; a message counts its
//! content, tool-call JSON, tool_call_id, name and the per-message overhead, and a request its
//! tool definitions. A database records the encoding its counts were made with, and a counter
//! of another encoding is refused (`TokenCounter::claim` / `check`) rather than mixing counts.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

/// Tokens every chat message costs beyond its text (OpenAI's chat format: start, role, end).
pub const TOKENS_PER_MESSAGE: u32 = 3;
/// Tokens a `name` field costs beyond its text.
pub const TOKENS_PER_NAME: u32 = 1;
/// Tokens that prime the reply, once per request.
pub const TOKENS_PER_REPLY: u32 = 3;

/// The BPE vocabularies strata knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// GPT-3.5 / GPT-4 and most other models.
    Cl100kBase,
    /// GPT-4o, GPT-4.1, GPT-5 and the o-series.
    O200kBase,
}

impl Encoding {
    /// The encoding a model name implies: `o200k_base` for gpt-4o, gpt-4.1, gpt-5, o1/o3/o4
    /// style names, `cl100k_base` otherwise (a close, stable count for non-OpenAI models).
    pub fn for_model(model: &str) -> Encoding {
        let model = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
        let o_series = model.len() >= 2
            && model.starts_with('o')
            && model[1..].chars().next().is_some_and(|c| c.is_ascii_digit());
        if o_series
            || ["gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "gpt-oss"]
                .iter()
                .any(|p| model.starts_with(p))
        {
            Encoding::O200kBase
        } else {
            Encoding::Cl100kBase
        }
    }

    /// The tiktoken name.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Cl100kBase => "cl100k_base",
            Encoding::O200kBase => "o200k_base",
        }
    }

    /// What every counter of this encoding in the process remembers: the compactor, its
    /// summarizer and the assembler count the same bodies, so they share one memo.
    fn memo(self) -> Arc<Mutex<Memo>> {
        static MEMOS: LazyLock<[Arc<Mutex<Memo>>; 2]> = LazyLock::new(Default::default);
        match self {
            Encoding::Cl100kBase => MEMOS[0].clone(),
            Encoding::O200kBase => MEMOS[1].clone(),
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        // tiktoken-rs builds each vocabulary once per process, on first use.
        match self {
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
        }
    }
}

impl std::str::FromStr for Encoding {
    type Err = String;

    fn from_str(s: &str) -> Result<Encoding, String> {
        match s {
            "cl100k_base" => Ok(Encoding::Cl100kBase),
            "o200k_base" => Ok(Encoding::O200kBase),
            other => Err(format!("unknown encoding {other:?} (expected cl100k_base or o200k_base)")),
        }
    }
}

/// What an image, audio clip or file costs, estimated: providers count it from its pixels or
/// seconds, which strata does not decode. OpenAI's price of a 1024x1024 image in high detail
/// (85 + 4 tiles of 170); Anthropic's is about (width x height) / 750, 1,398 at that size.
pub const MEDIA_TOKENS: u32 = 765;

/// Counts tokens exactly as the model's tokenizer would. Cheap to clone; every counter of an
/// encoding shares what it remembers.
#[derive(Clone)]
pub struct TokenCounter {
    encoding: Encoding,
    bpe: &'static CoreBPE,
    memo: Arc<Mutex<Memo>>,
}

/// Counts of long texts counted before. Assembly counts the same scaffold, summary bodies and
/// injection on every `prepare_context`, and tokenizing them was three quarters of its time.
/// A hit compares the whole text, so a count is never another text's.
#[derive(Default)]
struct Memo {
    counts: HashMap<u64, Vec<(Box<str>, u32)>>,
    bytes: usize,
}

/// Shorter texts are tokenized every time: hashing and locking would cost about as much.
const MEMO_MIN_BYTES: usize = 512;
/// The memo is emptied when the texts it holds pass this size.
const MEMO_MAX_BYTES: usize = 16 << 20;

impl Memo {
    fn get(&self, hash: u64, text: &str) -> Option<u32> {
        self.counts.get(&hash)?.iter().find(|(known, _)| &**known == text).map(|(_, count)| *count)
    }

    fn put(&mut self, hash: u64, text: &str, count: u32) {
        if self.bytes + text.len() > MEMO_MAX_BYTES {
            self.counts.clear();
            self.bytes = 0;
        }
        self.bytes += text.len();
        self.counts.entry(hash).or_default().push((text.into(), count));
    }
}

impl TokenCounter {
    /// Makes this counter's encoding the database's when it has none yet (the first command
    /// that counts records it), and refuses a database whose counts were made with another.
    pub fn claim(&self, store: &dyn strata_seam::Backend) -> crate::Result<()> {
        let recorded = store.claim_token_encoding(self.encoding.as_str())?;
        self.agree(recorded)
    }

    /// Like [`TokenCounter::claim`], without writing: for commands that only read. A database
    /// with no recorded encoding passes.
    pub fn check(&self, store: &dyn strata_seam::Backend) -> crate::Result<()> {
        match store.token_encoding()? {
            Some(recorded) => self.agree(recorded),
            None => Ok(()),
        }
    }

    fn agree(&self, recorded: String) -> crate::Result<()> {
        if recorded == self.encoding.as_str() {
            return Ok(());
        }
        Err(crate::Error::EncodingMismatch { database: recorded, configured: self.encoding })
    }
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter").field("encoding", &self.encoding).finish()
    }
}

/// The text a chat template puts around tool definitions: Qwen2.5's, as llama.cpp renders it
/// into the system message.
const TOOLS_PREAMBLE: &str = "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
    You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n</tools>\n\n\
    For each function call, return a json object with function name and arguments within <tool_call></tool_call> \
    XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

/// `value` as JSON with a space after every `,` and `:`: how chat templates (Jinja's `tojson`,
/// Python's `json.dumps`) write tool definitions into the prompt, which costs more tokens than
/// serde_json's compact form.
fn spaced_json(value: &serde_json::Value) -> String {
    struct Spaced;
    impl serde_json::ser::Formatter for Spaced {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { writer.write_all(b", ") }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { writer.write_all(b", ") }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
            writer.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, Spaced);
    match serde::Serialize::serialize(value, &mut serializer) {
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(_) => value.to_string(),
    }
}

impl TokenCounter {
    /// A counter for an encoding.
    pub fn new(encoding: Encoding) -> TokenCounter {
        TokenCounter { encoding, bpe: encoding.bpe(), memo: encoding.memo() }
    }

    /// A counter for the encoding a model name implies.
    pub fn for_model(model: &str) -> TokenCounter {
        TokenCounter::new(Encoding::for_model(model))
    }

    /// The encoding in use.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Tokens of plain text. Special-token strings such as `<|endoftext|>` count as ordinary
    /// text, as they do when a provider receives them inside a message.
    pub fn text(&self, text: &str) -> u32 {
        if text.len() < MEMO_MIN_BYTES {
            return self.bpe.encode_ordinary(text).len() as u32;
        }
        let hash = {
            let mut hasher = std::hash::DefaultHasher::new();
            text.hash(&mut hasher);
            hasher.finish()
        };
        let memo = || self.memo.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = memo().get(hash, text) {
            return count;
        }
        // Tokenize with the lock released: another thread may count the same text meanwhile,
        // which costs time, never correctness.
        let count = self.bpe.encode_ordinary(text).len() as u32;
        memo().put(hash, text, count);
        count
    }

    /// Tokens of one chat message: its text, its tool calls (as the JSON sent), the id of the
    /// call it answers, its name, and the per-message overhead.
    pub fn message(
        &self,
        content: &str,
        tool_calls: Option<&serde_json::Value>,
        tool_call_id: Option<&str>,
        name: Option<&str>,
    ) -> u32 {
        let mut tokens = TOKENS_PER_MESSAGE + 1 + self.text(content); // +1: the role name
        if let Some(calls) = tool_calls {
            tokens += self.text(&calls.to_string());
        }
        if let Some(id) = tool_call_id {
            tokens += self.text(id);
        }
        if let Some(name) = name {
            tokens += TOKENS_PER_NAME + self.text(name);
        }
        tokens
    }

    /// Tokens the tool definitions of a request cost: each definition as the JSON sent, plus
    /// the instructions a server's chat template wraps around them (measured on llama.cpp's
    /// Qwen2.5 template, the largest seen; OpenAI's own rendering is smaller). Nothing for no
    /// tools.
    pub fn tools(&self, tools: &[serde_json::Value]) -> u32 {
        if tools.is_empty() {
            return 0;
        }
        let definitions: u32 = tools.iter().map(|tool| self.text(&spaced_json(tool)) + 1).sum();
        self.text(TOOLS_PREAMBLE) + definitions
    }

    /// Fills in the token count of a message about to be stored.
    pub fn count_new(&self, message: &mut strata_seam::NewMessage) {
        message.token_count = self.message(
            &message.content,
            message.tool_calls.as_ref(),
            message.tool_call_id.as_deref(),
            message.name.as_deref(),
        ) + message.body.as_deref().map_or(0, |body| self.body_extra(body));
    }

    /// What a message's body sends beyond its columns: the reasoning some provider's rule
    /// sends back ([`strata_wire::text::reasoning_sent`]), counted whenever it may be sent so
    /// that a budget never comes up short, and [`MEDIA_TOKENS`] per image, clip or file.
    fn body_extra(&self, body: &str) -> u32 {
        let Ok(turn) = strata_wire::Turn::parse(body) else { return 0 };
        let reasoning = strata_wire::text::reasoning_sent(&turn);
        let reasoning = if reasoning.is_empty() { 0 } else { self.text(&reasoning) };
        reasoning + MEDIA_TOKENS * strata_wire::text::media_count(&turn)
    }

    /// [`TokenCounter::count_new`] for many messages, on every core: tokenizing is most of an
    /// import's CPU besides the search index, and each message is counted on its own.
    pub fn count_new_all<'a>(&self, messages: impl IntoIterator<Item = &'a mut strata_seam::NewMessage>) {
        /// Fewer messages than this per thread are counted where they are: a thread costs more.
        const PER_THREAD_MIN: usize = 512;
        let mut messages: Vec<&mut strata_seam::NewMessage> = messages.into_iter().collect();
        if messages.len() <= PER_THREAD_MIN {
            messages.into_iter().for_each(|message| self.count_new(message));
            return;
        }
        let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let per_thread = messages.len().div_ceil(threads).max(PER_THREAD_MIN);
        std::thread::scope(|scope| {
            for part in messages.chunks_mut(per_thread) {
                scope.spawn(move || part.iter_mut().for_each(|message| self.count_new(message)));
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_counted_together_count_as_each_alone() {
        let counter = TokenCounter::for_model("gpt-4o");
        let mut messages: Vec<strata_seam::NewMessage> = (0..3_000)
            .map(|i| {
                let text = format!("message {i}: {}", "word ".repeat(i % 300));
                strata_seam::NewMessage::text(strata_seam::Role::User, text)
            })
            .collect();
        counter.count_new_all(messages.iter_mut());
        for message in &mut messages {
            let together = message.token_count;
            assert!(together > 0);
            counter.count_new(message);
            assert_eq!(together, message.token_count, "{}", message.content);
        }
    }

    #[test]
    fn remembered_counts_are_exact_for_every_text() {
        let counter = TokenCounter::new(Encoding::Cl100kBase);
        let a = "hello world ".repeat(100);
        let b = "x".repeat(a.len()); // the same length, other tokens
        let fresh = |text: &str| counter.bpe.encode_ordinary(text).len() as u32;
        for _ in 0..2 {
            assert_eq!(counter.text(&a), fresh(&a));
            assert_eq!(counter.text(&b), fresh(&b));
        }
        assert_ne!(counter.text(&a), counter.text(&b));
        // Clones share the memo; a full memo starts over and still counts right.
        let clone = counter.clone();
        assert_eq!(clone.text(&a), fresh(&a));
        let big = "y ".repeat(MEMO_MAX_BYTES / 2 + 1);
        assert_eq!(clone.text(&big), fresh(&big));
        assert_eq!(counter.text(&a), fresh(&a));
    }

    #[test]
    fn model_names_pick_the_encoding() {
        for model in
            ["gpt-4o", "gpt-4o-mini", "gpt-4.1-nano", "o1", "o3-mini", "o4-mini", "openai/gpt-5", "GPT-4O"]
        {
            assert_eq!(Encoding::for_model(model), Encoding::O200kBase, "{model}");
        }
        for model in ["gpt-4", "gpt-3.5-turbo", "llama3.1:8b", "qwen2.5", "ollama", "omni"] {
            assert_eq!(Encoding::for_model(model), Encoding::Cl100kBase, "{model}");
        }
    }

    #[test]
    fn counts_are_exact() {
        let cl = TokenCounter::new(Encoding::Cl100kBase);
        // Reference counts from OpenAI's tokenizer.
        assert_eq!(cl.text("hello world"), 2);
        assert_eq!(cl.text(""), 0);
        assert_eq!(cl.text("<|endoftext|>"), 7, "special tokens count as text");
        let o = TokenCounter::new(Encoding::O200kBase);
        assert_eq!(o.text("hello world"), 2);
        // CJK and emoji take several tokens each, far from a chars/4 estimate.
        // CJK and emoji cost far more than a chars/4 estimate (2 and 0 here). The values are
        // pinned from the vocabularies, so a tokenizer change shows up here.
        assert_eq!(cl.text("数据库迁移已经完成"), 7);
        assert_eq!(o.text("数据库迁移已经完成"), 5);
        assert_eq!(cl.text("🦀🦀🦀"), 9);
    }

    #[test]
    fn message_overhead_and_fields_are_counted() {
        let cl = TokenCounter::new(Encoding::Cl100kBase);
        let plain = cl.message("hello world", None, None, None);
        assert_eq!(plain, 2 + 4);
        assert_eq!(cl.message("hello world", None, None, Some("bob")), plain + 1 + cl.text("bob"));
        let calls = serde_json::json!([{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]);
        assert_eq!(cl.message("", Some(&calls), None, None), 4 + cl.text(&calls.to_string()));
        assert_eq!(cl.message("ok", None, Some("call_1"), None), 4 + cl.text("ok") + cl.text("call_1"));
    }
}
