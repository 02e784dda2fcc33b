//! Tool definitions in each format.

use serde_json::{Value, json};

use crate::format::Format;

/// Tool definitions given in OpenAI's Chat Completions form (`{"type": "function",
/// "function": {name, description, parameters}}`) rewritten for `format`: Anthropic's
/// `{name, description, input_schema}`, the Responses API's flat `{"type": "function", name,
/// description, parameters}`.
pub fn tool_specs(openai: &[Value], format: Format) -> Vec<Value> {
    openai
        .iter()
        .map(|spec| {
            let function = &spec["function"];
            match format {
                Format::OpenAi => spec.clone(),
                Format::Anthropic => json!({
                    "name": function["name"],
                    "description": function["description"],
                    "input_schema": function["parameters"],
                }),
                Format::Responses => json!({
                    "type": "function",
                    "name": function["name"],
                    "description": function["description"],
                    "parameters": function["parameters"],
                }),
            }
        })
        .collect()
}
