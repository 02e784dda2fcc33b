//! The three formats and how a message object tells which it is in.

use serde_json::{Map, Value};

/// A message format strata reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// OpenAI Chat Completions (also what vLLM, llama.cpp server, Ollama, DeepSeek and
    /// OpenRouter speak).
    #[default]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses API items.
    Responses,
}

impl Format {
    /// Every format, in the order errors list them.
    pub const ALL: [Format; 3] = [Format::OpenAi, Format::Anthropic, Format::Responses];

    /// Its name: `openai`, `anthropic`, `responses`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::OpenAi => "openai",
            Format::Anthropic => "anthropic",
            Format::Responses => "responses",
        }
    }

    /// The format of a message object, by the shape only one format has: a Responses item's
    /// `type` (`function_call`, `reasoning`, ...) or its parts' (`input_text`), an Anthropic
    /// block (`tool_use`, `thinking`, an `image` with a `source`, ...). A plain text message is
    /// the same in all three and is read as OpenAI's.
    pub fn detect(object: &Map<String, Value>) -> Format {
        const ANTHROPIC_BLOCKS: [&str; 9] = [
            "tool_use",
            "tool_result",
            "thinking",
            "redacted_thinking",
            "image",
            "document",
            "server_tool_use",
            "web_search_tool_result",
            "search_result",
        ];
        const RESPONSES_PARTS: [&str; 5] =
            ["input_text", "output_text", "input_image", "input_file", "summary_text"];
        let kind = object.get("type").and_then(Value::as_str);
        let parts: Vec<&str> = match object.get("content") {
            Some(Value::Array(parts)) => {
                parts.iter().filter_map(|part| part.get("type").and_then(Value::as_str)).collect()
            }
            _ => Vec::new(),
        };
        if parts.iter().any(|part| RESPONSES_PARTS.contains(part)) {
            return Format::Responses;
        }
        // Anthropic's reply object is `"type": "message"` too, with blocks and a stop reason.
        let anthropic_reply =
            kind == Some("message") && (object.contains_key("stop_reason") || parts.contains(&"text"));
        if parts.iter().any(|part| ANTHROPIC_BLOCKS.contains(part)) || anthropic_reply {
            return Format::Anthropic;
        }
        if let Some(kind) = kind
            && kind != "message"
        {
            return Format::Responses;
        }
        if kind == Some("message") {
            return Format::Responses;
        }
        Format::OpenAi
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(name: &str) -> Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|format| format.as_str() == name)
            .ok_or_else(|| format!("unknown format {name:?} (openai, anthropic or responses)"))
    }
}
