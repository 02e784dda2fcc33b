//! The rule every stored message obeys, whatever stores it.

use crate::error::{Error, Result};
use crate::sessions::validate_name;
use crate::types::{NewMessage, Role};

/// The longest speaker name and the longest tool call id.
const MAX_NAME_CHARS: usize = 64;

const MAX_CALL_ID_CHARS: usize = 256;

/// Checks a message before it is stored. Its speaker name and its tool call ids go to the model
/// verbatim, as fields of the wire format, so they must be one-line text: a name with a line
/// break could write a line of its own, and a call id that is not a string cannot be answered.
pub fn validate(message: &NewMessage) -> Result<()> {
    if let Some(calls) = &message.tool_calls {
        let Some(calls) = calls.as_array() else {
            return Err(Error::invalid("tool_calls", "must be a JSON array"));
        };
        if message.role != Role::Assistant {
            return Err(Error::invalid("tool_calls", "only assistant messages make tool calls"));
        }
        for (index, call) in calls.iter().enumerate() {
            if !call.is_object() {
                return Err(Error::invalid("tool_calls", format!("call {index} is not a JSON object")));
            }
            match call.get("id") {
                None => {}
                Some(serde_json::Value::String(id)) => {
                    validate_name("tool call id", id, MAX_CALL_ID_CHARS)?;
                }
                Some(other) => {
                    return Err(Error::invalid(
                        "tool call id",
                        format!("call {index} has id {other}, which is not a string"),
                    ));
                }
            }
        }
    }
    if let Some(id) = &message.tool_call_id {
        if message.role != Role::Tool {
            return Err(Error::invalid("tool_call_id", "only tool messages answer a tool call"));
        }
        validate_name("tool_call_id", id, MAX_CALL_ID_CHARS)?;
    }
    if let Some(name) = &message.name {
        validate_name("name", name, MAX_NAME_CHARS)?;
    }
    Ok(())
}
