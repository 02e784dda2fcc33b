//! The chat loop: one user turn through strata and an OpenAI-compatible model, tool calls
//! included.
//!
//! A turn appends the user's input, asks the engine for the context, sends it to the model with
//! strata's tools, stores the reply, runs the tools the reply calls and stores their results,
//! and asks again until the model answers in text. Every message of the turn is stored as it
//! happens, so a turn that fails halfway leaves a conversation the next turn can continue: each
//! tool call in the database is followed by its result.

use serde::Serialize;
use serde_json::Value;
use strata_seam::stats::LlmCall;
use tracing::Instrument;

use strata::ChatMessage;
use strata::llm::{ChatClient, LlmError};
use strata::{Engine, EngineSession};

/// How many replies of one turn may call tools unless [`ChatLoop::max_tool_rounds`] says
/// otherwise.
pub const DEFAULT_MAX_TOOL_ROUNDS: u32 = 8;

/// The system message `strata chat` begins a new session with: when to reach for the memory
/// tools (named by recall's [`Tool`](strata_recall::Tool)s). A model that is not told so (a
/// small local one above all) answers from what it has, or guesses, instead of searching what
/// the persona said in other chats.
pub fn default_system_prompt() -> String {
    use strata_recall::Tool;
    format!(
        "You are a helpful assistant with a long-term memory: every conversation of this persona is stored, and \
         you reach it through your tools. When a question needs something that is not in this conversation (a \
         fact, number, name, date, decision or file from an earlier chat), first call {} with two or three \
         keywords from the question (or {} to look by meaning), then answer from what the tool returned. Do not \
         guess: if the search finds nothing, say so.",
        Tool::MemoryGrep.name(),
        Tool::MemorySearch.name()
    )
}

/// Why a turn failed. The messages stored before the failure stay stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChatError {
    /// strata could not store a message or prepare the context.
    #[error(transparent)]
    Engine(#[from] strata::Error),
    /// The model's endpoint failed or sent something that is not a chat completion.
    #[error("the model did not answer")]
    Llm(#[from] LlmError),
    /// The model answered with neither text nor a tool call. The empty reply is not stored.
    #[error("the model sent an empty reply")]
    EmptyReply,
    /// The model kept calling tools past the limit. The calls of its last reply were answered
    /// with an error instead of being run, so the stored conversation stays well formed.
    #[error("the model was still calling tools after {limit} rounds")]
    ToolRoundsExceeded {
        /// The limit in force.
        limit: u32,
        /// The tool calls that did run during the turn.
        tool_calls: Vec<ToolCall>,
    },
}

/// One tool call the model made during a turn, and what strata answered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCall {
    /// The id the model gave the call.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model sent them (a string when they were not JSON).
    pub arguments: Value,
    /// The tool's JSON answer, sent back to the model verbatim.
    pub result: Value,
}

impl ToolCall {
    /// True when the tool refused the call (bad arguments, unknown tool, ...): the answer is
    /// an object with an `error` member.
    pub fn is_error(&self) -> bool {
        strata_recall::is_refusal(&self.result)
    }
}

/// What one turn produced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Turn {
    /// The model's final answer (empty if it answered with no text).
    pub text: String,
    /// Every tool call of the turn, in the order they ran.
    pub tool_calls: Vec<ToolCall>,
    /// How many requests were sent to the model.
    pub requests: u32,
    /// Tokens of the last context sent, as strata counted them.
    pub context_tokens: u32,
    /// What the turn's requests cost: the server's usage beside strata's counts.
    pub usage: TurnUsage,
}

/// The usage of a turn's requests, summed: what the server reported (`None` when it reported
/// nothing) beside strata's own counts, and the time spent waiting for the model.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TurnUsage {
    /// Prompt tokens the server reported.
    pub prompt_tokens: Option<u64>,
    /// Completion tokens the server reported.
    pub completion_tokens: Option<u64>,
    /// Prompt tokens strata counted (each request's context).
    pub counted_prompt_tokens: u64,
    /// Completion tokens strata counted (each reply).
    pub counted_completion_tokens: u64,
    /// Milliseconds spent in the requests.
    pub millis: u64,
}

impl TurnUsage {
    fn add(&mut self, call: &LlmCall) {
        let sum = |total: Option<u64>, more: Option<u64>| match (total, more) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.prompt_tokens = sum(self.prompt_tokens, call.prompt_tokens);
        self.completion_tokens = sum(self.completion_tokens, call.completion_tokens);
        self.counted_prompt_tokens += call.counted_prompt_tokens.unwrap_or(0);
        self.counted_completion_tokens += call.counted_completion_tokens.unwrap_or(0);
        self.millis += call.millis;
    }
}

/// Runs turns of a conversation against one model with strata's tools.
#[derive(Clone, Debug)]
pub struct ChatLoop {
    engine: Engine,
    client: ChatClient,
    tools: Vec<Value>,
    max_tool_rounds: u32,
}

impl ChatLoop {
    /// A loop that offers the model every tool of `engine`.
    pub fn new(engine: &Engine, client: ChatClient) -> ChatLoop {
        ChatLoop {
            engine: engine.clone(),
            client,
            tools: engine.tool_specs(),
            max_tool_rounds: DEFAULT_MAX_TOOL_ROUNDS,
        }
    }

    /// Sets how many replies of one turn may call tools before the turn fails with
    /// [`ChatError::ToolRoundsExceeded`]. Zero offers the tools but never runs them.
    #[must_use]
    pub fn max_tool_rounds(mut self, rounds: u32) -> ChatLoop {
        self.max_tool_rounds = rounds;
        self
    }

    /// Records the client's calls since the last request (its usage log, drained) with
    /// strata's counts: the context sent and the reply. Failing to record only loses the
    /// accounting, so it is logged.
    async fn record_usage(&self, context_tokens: u32, reply: Option<&ChatMessage>, usage: &mut TurnUsage) {
        let counter = self.engine.compactor().counter();
        let reply_tokens = reply.map(|reply| {
            counter.message(
                reply.content.as_deref().unwrap_or_default(),
                reply.tool_calls.as_ref(),
                None,
                None,
            )
        });
        let now = chrono::Utc::now();
        let calls: Vec<LlmCall> = self
            .client
            .take_usage()
            .into_iter()
            .map(|call| LlmCall {
                at: now,
                purpose: "chat".to_owned(),
                caller: "chat".to_owned(),
                model: call.model,
                ok: call.ok,
                prompt_tokens: call.prompt_tokens,
                completion_tokens: call.completion_tokens,
                counted_prompt_tokens: Some(u64::from(context_tokens)),
                counted_completion_tokens: reply_tokens.filter(|_| call.ok).map(u64::from),
                millis: call.elapsed.as_millis() as u64,
            })
            .collect();
        for call in &calls {
            usage.add(call);
        }
        let store = self.engine.store().clone();
        match tokio::task::spawn_blocking(move || store.record_llm_calls(&calls)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(error = %strata_seam::error_chain(&error), "cannot record the chat's usage")
            }
            Err(error) => tracing::warn!(%error, "cannot record the chat's usage"),
        }
    }

    /// Runs one turn: `input` from the user, up to the model's text answer, calling
    /// `on_tool_call` as each tool call finishes (to show progress while the model works).
    pub async fn turn(
        &self,
        session: &EngineSession,
        input: &str,
        mut on_tool_call: impl FnMut(&ToolCall),
    ) -> Result<Turn, ChatError> {
        let span = tracing::info_span!("chat_turn", session = %session.info().key);
        async move {
            session.append(ChatMessage::user(input))?;
            let mut tool_calls = Vec::new();
            let mut usage = TurnUsage::default();
            // One request per round; the last round's request is the one that must answer.
            for round in 0..=self.max_tool_rounds {
                let context = session.prepare_context().await?;
                let reply =
                    self.client.complete(context.messages(), &self.tools).await.map(ChatMessage::from);
                self.record_usage(context.context.tokens.total, reply.as_ref().ok(), &mut usage).await;
                let reply = reply?;
                let calls = reply.calls();
                let text = reply.content.clone().unwrap_or_default();
                if calls.is_empty() && text.trim().is_empty() {
                    return Err(ChatError::EmptyReply);
                }
                session.append(reply)?;
                if calls.is_empty() {
                    let context_tokens = context.context.tokens.total;
                    return Ok(Turn { text, tool_calls, requests: round + 1, context_tokens, usage });
                }
                if round == self.max_tool_rounds {
                    // Answer every call, so that no stored tool call is left without a result.
                    let message = format!(
                        "not run: this turn reached its limit of {} tool rounds; answer with what you have",
                        self.max_tool_rounds
                    );
                    for call in calls {
                        let refusal = strata_recall::refusal(&call.name, "tool_rounds_exceeded", &message);
                        session.append(ChatMessage::tool(call.id, call.name, refusal.to_string()))?;
                    }
                    break;
                }
                for strata_seam::ToolCall { id, name, arguments } in calls {
                    let result = session.call_tool(&name, arguments.clone()).await;
                    tracing::debug!(tool = %name, error = strata_recall::is_refusal(&result), "tool call");
                    session.append(ChatMessage::tool(id.clone(), name.clone(), result.to_string()))?;
                    let call = ToolCall { id, name, arguments, result };
                    on_tool_call(&call);
                    tool_calls.push(call);
                }
            }
            Err(ChatError::ToolRoundsExceeded { limit: self.max_tool_rounds, tool_calls })
        }
        .instrument(span)
        .await
    }
}

#[cfg(test)]
mod tests;
