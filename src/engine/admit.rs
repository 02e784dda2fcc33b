//! The one admission path: every message a session stores through the engine (`append`,
//! `append_with_key`, `append_incoming`, `append_many`, and the bindings over them) is checked
//! here, each message of a batch before any is stored: its size, that a tool result answers
//! an open call, then its tokens are counted.

use std::collections::HashSet;

use strata_seam::{Message, NewMessage, Role};

use crate::error::{Error, Result};

/// How far back the open calls are looked for, in steps: most runs of calls and results are
/// a few messages, and a tool result can be large. A run longer than the last step is not
/// checked from its start (the context still repairs what slips through).
const RECENT: [usize; 3] = [8, 64, 256];

/// The calls of the newest run of tool calls, and which have a result: what a tool result may
/// answer. A run is the calls of consecutive assistant messages (the items of one Responses
/// reply are a message each) and the results after them; anything else closes it.
#[derive(Debug, Default)]
pub(crate) struct Pairing {
    open: Vec<String>,
    answered: HashSet<String>,
}

impl Pairing {
    /// The state after a session's recent stored messages (oldest first).
    pub(crate) fn after(recent: &[Message]) -> Pairing {
        let mut pairing = Pairing::default();
        for message in recent {
            let calls = call_ids(message.tool_calls.as_ref());
            let results = result_ids(message.role, message.tool_call_id.as_deref(), message.body.as_deref());
            // What is stored is history: its mistakes are the context's to repair.
            let _ = pairing.admit(message.role, &message.content, calls, results);
        }
        pairing
    }

    /// Admits one message, or names the result that answers no open call.
    pub(crate) fn check(&mut self, message: &NewMessage) -> Result<()> {
        let calls = call_ids(message.tool_calls.as_ref());
        let results = result_ids(message.role, message.tool_call_id.as_deref(), message.body.as_deref());
        self.admit(message.role, &message.content, calls, results)
    }

    fn admit(&mut self, role: Role, content: &str, calls: Vec<String>, results: Vec<String>) -> Result<()> {
        match role {
            Role::Tool => {
                for id in results {
                    if self.answered.contains(&id) {
                        return Err(Error::InvalidMessage(format!(
                            "tool call {id:?} already has a result; a call is answered once"
                        )));
                    }
                    if !self.open.contains(&id) {
                        let open: Vec<&str> = self
                            .open
                            .iter()
                            .filter(|id| !self.answered.contains(*id))
                            .map(String::as_str)
                            .collect();
                        let open = if open.is_empty() { "none".to_owned() } else { open.join(", ") };
                        return Err(Error::InvalidMessage(format!(
                            "the tool result for call {id:?} answers no open tool call (open: {open}): append the \
                             assistant message that makes the call first, and its results right after it"
                        )));
                    }
                    self.answered.insert(id);
                }
            }
            // A reply's further calls, or its reasoning alone (a Responses item), before any
            // result: the same run.
            Role::Assistant if self.answered.is_empty() && (!calls.is_empty() || content.is_empty()) => {
                self.open.extend(calls);
            }
            _ => {
                self.answered.clear();
                self.open = calls;
            }
        }
        Ok(())
    }
}

/// The ids of OpenAI-form tool calls.
fn call_ids(calls: Option<&serde_json::Value>) -> Vec<String> {
    calls
        .and_then(serde_json::Value::as_array)
        .map(|calls| calls.iter().filter_map(|call| call["id"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// The calls a tool message answers: every result of its body (an Anthropic user message can
/// hold several), else its `tool_call_id`.
fn result_ids(role: Role, tool_call_id: Option<&str>, body: Option<&str>) -> Vec<String> {
    if role != Role::Tool {
        return Vec::new();
    }
    let from_body = body
        .and_then(|body| strata_wire::Turn::parse(body).ok())
        .map(|turn| turn.result_ids().map(str::to_owned).collect::<Vec<_>>());
    from_body.unwrap_or_else(|| tool_call_id.map(str::to_owned).into_iter().collect())
}

/// The recent messages the open calls are read from: enough to reach back past the newest
/// run of calls and results.
pub(crate) fn recent(
    store: &dyn strata_seam::Backend,
    session: strata_seam::SessionId,
) -> Result<Vec<Message>> {
    let in_run = |m: &Message| m.role == Role::Tool || (m.role == Role::Assistant && m.tool_calls.is_some());
    let mut recent = Vec::new();
    for limit in RECENT {
        recent = store.recent_uncovered(session, limit)?;
        if recent.len() < limit || recent.first().is_none_or(|oldest| !in_run(oldest)) {
            break;
        }
    }
    Ok(recent)
}
