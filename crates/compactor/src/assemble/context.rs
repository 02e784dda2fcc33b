//! What assembly hands back: the context's messages, where each came from, and what they cost.
//!
//! These are the types a caller reads (a bot sends `messages`, puts a cache breakpoint at
//! `stable_len`, `strata context` prints `entries`), kept apart from the stages that build
//! them, so a change of layout never touches what a caller compiles against.

use serde::Serialize;
use serde_json::Value;
use strata_seam::{MessageId, SessionId};

use super::recalled::RecalledBlock;

/// Which part of the context a message belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// The first messages of the session, verbatim.
    Head,
    /// The message describing the summary forest.
    Scaffold,
    /// The assistant's acknowledgement of the scaffold.
    Acknowledgement,
    /// The newest turns a summary already covers, verbatim again while the budget has room
    /// (`[compactor] refill_folded_turns`): after a compaction the context is filled, not left
    /// at the target.
    Recent,
    /// Uncompacted messages between the forest and the tail (oversized ones as stubs).
    Buffer,
    /// The newest turns, verbatim (the latest request with its injected background).
    Tail,
}

/// What was prepended to the latest user message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Injection {
    /// Nothing (a regular turn and no user preferences, or no user message at all).
    None,
    /// The user preferences only: a regular turn.
    Regular,
    /// The sync guidelines and the preferences: the session's first turn, or one after an idle gap.
    Bootstrap,
}

/// One message of the assembled context, with where it came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContextEntry {
    /// The part it belongs to.
    pub part: Part,
    /// The stored message it shows, if any (the scaffold, the acknowledgement and elision notes
    /// have none).
    pub message_id: Option<MessageId>,
    /// Its seq, if it shows a stored message.
    pub seq: Option<i64>,
    /// Tokens it costs, overhead included.
    pub tokens: u32,
    /// True when the stored content was replaced by a stub (oversized) or a note (elided).
    pub abridged: bool,
}

/// Tokens per part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TokenAccounting {
    /// The head.
    pub head: u32,
    /// The scaffold message.
    pub scaffold: u32,
    /// The acknowledgement.
    pub acknowledgement: u32,
    /// The folded turns shown verbatim again.
    pub recent: u32,
    /// The uncompacted buffer.
    pub buffer: u32,
    /// The tail.
    pub tail: u32,
    /// Of the tail, the recalled block in the latest request's injection.
    pub recalled: u32,
    /// The tokens that prime the reply.
    pub reply_priming: u32,
    /// Everything: what the request costs.
    pub total: u32,
    /// Tool definitions and the template text around them, sent with every request; not part
    /// of `total`, already taken off `budget`.
    pub tools: u32,
    /// `context_window_tokens - reserve_tokens - tools`; `total` never exceeds it.
    pub budget: u32,
}

/// The context to send, in the OpenAI chat format, with its token accounting.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AssembledContext {
    /// The session.
    pub session_id: SessionId,
    /// The messages, ready for `chat/completions` (`role`, `content`, and `name`,
    /// `tool_calls`, `tool_call_id` where set).
    pub messages: Vec<Value>,
    /// One entry per message: part, source and tokens.
    pub entries: Vec<ContextEntry>,
    /// Tokens per part.
    pub tokens: TokenAccounting,
    /// How many leading messages form the prefix that only a compaction changes (head,
    /// scaffold, acknowledgement). The head's opening request is the one exception: on the
    /// session's first call it carries the injection, which the next call drops.
    pub prefix_len: usize,
    /// How many leading messages are byte-identical to the same messages of the next call,
    /// unless a compaction runs in between: every message before the newest user request
    /// (the one carrying the injection and the recalled block, which the next call sends as
    /// stored). The next call's messages begin with `messages[..stable_len]` and append to
    /// them; this is where a provider's prompt cache can end (an Anthropic `cache_control`
    /// breakpoint on message `stable_len - 1`, a second one on `prefix_len - 1`). Equal to
    /// `messages.len()` when there is no user request.
    pub stable_len: usize,
    /// Tokens of `messages[..stable_len]`, as `entries` count them.
    pub stable_tokens: u32,
    /// A key that is the same for every call of this session and differs between sessions and
    /// personas (`strata-<session id>-<persona>`, at most 64 characters, no secret): OpenAI's
    /// `prompt_cache_key`, which routes the calls of one session to the same cache.
    pub prompt_cache_key: String,
    /// What was prepended to the latest user message.
    pub injection: Injection,
    /// Buffer messages left out (replaced by a note) to fit the budget.
    pub elided_messages: u32,
    /// Oversized messages sent as stubs.
    pub stubbed_messages: u32,
    /// What the recalled block of the latest request holds; `None` when no search was asked
    /// for (proactive recall off, or no user request).
    pub recalled: Option<RecalledBlock>,
    /// One per message: the stored message as its caller sent it, where it has a body
    /// ([`strata_seam::Message::body`]), for rendering the context in another format.
    #[serde(skip)]
    pub originals: Vec<Option<Original>>,
}

/// A context message's stored body, and whether the context shows its text as stored or
/// changed (the injection around the latest request, a stub).
#[derive(Clone, Debug, PartialEq)]
pub struct Original {
    /// The message as the caller sent it (JSON text).
    pub body: String,
    /// Whether the context message's text is not the stored text.
    pub text_changed: bool,
}

impl AssembledContext {
    /// The exact bytes of the prefix (head, scaffold, acknowledgement) as sent: what provider
    /// prompt caches key on.
    pub fn prefix_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.messages[..self.prefix_len]).unwrap_or_default()
    }
}
