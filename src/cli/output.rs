//! Shared output shapes: every JSON object naming a message carries id, session, seq, role
//! and timestamp.

use std::io::Write;

use chrono::SecondsFormat;
use serde::Serialize;
use strata_seam::{Message, MessageId, Session};

/// Writes `value` as pretty JSON and a newline.
pub fn print_json(out: &mut impl Write, value: &impl Serialize) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

/// A message as the CLI shows it.
#[derive(Debug, Serialize)]
pub struct MessageView<'a> {
    pub id: MessageId,
    pub session: &'a str,
    pub persona: &'a str,
    pub seq: i64,
    pub role: &'static str,
    pub timestamp: String,
    pub content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub token_count: u32,
    pub pinned: bool,
    pub summary_id: Option<i64>,
    /// The message as it was sent, where strata keeps more of it than the fields above.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_sent: Option<serde_json::Value>,
}

impl<'a> MessageView<'a> {
    pub fn new(message: &'a Message, session: &'a Session) -> MessageView<'a> {
        MessageView {
            id: message.id,
            session: &session.key,
            persona: &session.persona,
            seq: message.seq,
            role: message.role.as_str(),
            timestamp: message.created_at.to_rfc3339_opts(SecondsFormat::Secs, true),
            content: &message.content,
            tool_calls: message.tool_calls.as_ref(),
            tool_call_id: message.tool_call_id.as_deref(),
            name: message.name.as_deref(),
            token_count: message.token_count,
            pinned: message.pinned,
            summary_id: message.summary_id.map(|id| id.0),
            as_sent: message.body.as_deref().and_then(|body| serde_json::from_str(body).ok()),
        }
    }

    pub fn print(&self, out: &mut impl Write) -> anyhow::Result<()> {
        writeln!(
            out,
            "message {} · session {} (persona {}) · seq {} · {} · {} · {} tokens{}",
            self.id,
            self.session,
            self.persona,
            self.seq,
            self.role,
            self.timestamp,
            self.token_count,
            match self.summary_id {
                Some(node) => format!(" · covered by summary node {node}"),
                None => String::new(),
            }
        )?;
        if let Some(calls) = self.tool_calls {
            writeln!(out, "tool calls: {calls}")?;
        }
        if let Some(id) = self.tool_call_id {
            writeln!(out, "answers tool call: {id}")?;
        }
        writeln!(out, "{}", self.content)?;
        if let Some(sent) = &self.as_sent {
            writeln!(out, "as sent: {sent}")?;
        }
        Ok(())
    }
}
