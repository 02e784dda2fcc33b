//! What can be wrong with a message.

/// A message strata cannot read, with what is wrong in words a caller can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The message is not of any format's shape; the text says what is wrong where.
    #[error("{0}")]
    Invalid(String),
}

pub(crate) fn invalid(reason: impl Into<String>) -> WireError {
    WireError::Invalid(reason.into())
}

/// How a JSON value is named in an error (`a list`, `null`): one wording for every reader of
/// a message.
pub fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
