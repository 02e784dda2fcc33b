//! Chat messages in the OpenAI format, as a bot exchanges them with its model.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use strata_store::{NewMessage, Role, ToolCall};

/// One chat message: what a bot appends, and what a model returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// system, user, assistant or tool.
    pub role: Role,
    /// The text; `null` for an assistant message that only calls tools.
    #[serde(default)]
    pub content: Option<String>,
    /// Tool calls of an assistant message (OpenAI format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Value>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Participant or tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    fn new(role: Role, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role, content: Some(content.into()), tool_calls: None, tool_call_id: None, name: None }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::Assistant, content)
    }

    /// The result of a tool call.
    pub fn tool(
        tool_call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> ChatMessage {
        ChatMessage {
            tool_call_id: Some(tool_call_id.into()),
            name: Some(name.into()),
            ..ChatMessage::new(Role::Tool, content)
        }
    }

    /// The tool calls, parsed once ([`strata_store::ToolCall`]); arguments that are not JSON
    /// come back as a string, for the tool to refuse.
    pub fn calls(&self) -> Vec<ToolCall> {
        ToolCall::parse_all(self.tool_calls.as_ref())
    }

    pub(crate) fn into_new(self) -> NewMessage {
        NewMessage {
            role: self.role,
            content: self.content.unwrap_or_default(),
            tool_calls: self.tool_calls,
            tool_call_id: self.tool_call_id,
            name: self.name,
            created_at: chrono::Utc::now(),
            token_count: 0,
            pinned: false,
            external_id: None,
        }
    }
}
