//! The client a bot talks to its model with: an OpenAI-compatible chat-completions endpoint
//! (OpenAI, Ollama, llama.cpp server, vLLM) with timeouts, retries and API keys. It is the
//! `strata-llm` crate, the one the summarizer uses too, under the path bot authors import; a
//! [`Reply`] becomes a [`crate::ChatMessage`] to append with `ChatMessage::from`.

pub use strata_llm::{
    ChatClient, ChatEndpoint, DEFAULT_MAX_TOKENS, LlmError, Reply, ReportedCall, RetryPolicy, UsageLog,
    api_key,
};
