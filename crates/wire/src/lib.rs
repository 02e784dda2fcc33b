//! strata-wire: chat messages in the formats bots send them, read into one model and rendered
//! back in any of them.
//!
//! A [`Turn`] is one message, format-free: who speaks and its [`Block`]s (text, media,
//! reasoning, tool calls and results), with the object it was read from. [`Turn::read`] reads
//! OpenAI Chat Completions messages (every role, `developer` included, every content part,
//! `reasoning_content` / `reasoning`, `refusal`, `audio`), Anthropic Messages (text, image,
//! document, `tool_use`, `tool_result`, `thinking` and `redacted_thinking`) and OpenAI
//! Responses items (message, `function_call`, `function_call_output`, `reasoning`);
//! [`Format::detect`] tells them apart. [`render()`] writes a conversation in a format, with
//! every call answered and reasoning sent back by its provider's rule; [`text::text`] is the
//! one rule that makes text of parts.
//!
//! ```
//! use serde_json::json;
//! use strata_wire::{Format, RenderOptions, Turn, render};
//!
//! let reply = json!({"role": "assistant", "content": null, "reasoning_content": "Port first.",
//!     "tool_calls": [{"id": "call_1", "type": "function",
//!                     "function": {"name": "memory_grep", "arguments": "{\"query\": \"port\"}"}}]});
//! let object = reply.as_object().unwrap();
//! assert_eq!(Format::detect(object), Format::OpenAi);
//! let turns = vec![
//!     Turn::text(strata_wire::Speaker::User, "Which port?"),
//!     Turn::read(Format::OpenAi, object)?,
//! ];
//! let anthropic = render(&turns, Format::Anthropic, &RenderOptions::default())?;
//! assert_eq!(anthropic.messages[1]["content"][0]["type"], "tool_use");
//! // The call was never answered: a placeholder result keeps the request valid.
//! assert_eq!(anthropic.messages[2]["content"][0]["type"], "tool_result");
//! # Ok::<(), strata_wire::WireError>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
mod format;
pub mod render;
pub mod text;
mod tools;
mod turn;

pub use crate::error::{WireError, json_kind};
pub use crate::format::Format;
pub use crate::render::{MISSING_RESULT, RenderOptions, Rendered, openai_call, pair, render};
pub use crate::tools::tool_specs;
pub use crate::turn::{
    Block, Call, Media, MediaKind, Reasoning, ReasoningKind, Source, Speaker, ToolResult, Turn,
};
