//! strata-llm: strata's one HTTP client, an OpenAI-compatible `chat/completions` endpoint
//! (OpenAI, Ollama, llama.cpp server, vLLM).
//!
//! [`ChatEndpoint`] sends a request body and returns the answer's JSON, retrying transient
//! failures ([`RetryPolicy`]) and reducing an error body to one line ([`LlmError`]); the
//! compactor's summarizer builds its own requests on it. [`ChatClient`] is the chat loop's side:
//! messages and tool specs in, one [`Reply`] out, with tool calls a local model wrote as text
//! recognised. [`api_key`] is the one place an API key is read.
//!
//! ```
//! use std::time::Duration;
//! use strata_llm::{ChatClient, ChatEndpoint, RetryPolicy};
//!
//! let endpoint = ChatEndpoint::new("http://localhost:11434/v1/", None, RetryPolicy::default()).unwrap();
//! assert_eq!(endpoint.url(), "http://localhost:11434/v1/chat/completions");
//! let client = ChatClient::new("http://localhost:11434/v1", "llama3.1", None, Duration::from_secs(120));
//! # let _ = client;
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod chat;
mod endpoint;
mod error;
mod retry;
pub mod span;
mod usage;

pub use crate::chat::{ChatClient, DEFAULT_MAX_TOKENS, Reply};
pub use crate::endpoint::{ChatEndpoint, Failed, api_key};
pub use crate::error::LlmError;
pub use crate::retry::RetryPolicy;
pub use crate::usage::{ReportedCall, UsageLog};
