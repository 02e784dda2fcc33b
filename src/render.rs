//! An assembled context in a provider's format: each message from what was stored (its body
//! where it has one), then `strata_wire::render`.

use serde_json::Value;
use strata_compactor::{AssembledContext, Original};
use strata_wire::{Block, Format, RenderOptions, Rendered, Speaker, Turn};

use crate::error::{Error, Result};

/// An assembled context in `format`, as a provider takes it (see
/// [`crate::PreparedContext::render`]); `keep_reasoning` sends every reasoning part back.
pub fn render_context(context: &AssembledContext, format: Format, keep_reasoning: bool) -> Result<Rendered> {
    let turns = context
        .messages
        .iter()
        .enumerate()
        .map(|(index, value)| {
            let original = context.originals.get(index).and_then(Option::as_ref);
            let abridged = context.entries.get(index).is_some_and(|entry| entry.abridged);
            turn(value, original, abridged)
        })
        .collect::<Result<Vec<Turn>>>()?;
    // The prefix (head, scaffold, acknowledgement), which changes only with a compaction, and
    // the stable part, which the next call repeats byte for byte: where a provider's cache may
    // keep a prefix.
    let options =
        RenderOptions { keep_reasoning, cache_breakpoints: vec![context.prefix_len, context.stable_len] };
    strata_wire::render(&turns, format, &options).map_err(|error| Error::InvalidMessage(error.to_string()))
}

/// One context message as a turn: its stored body where it has one (with the context's text
/// in place of the stored text where the context changed it: the injection keeps the
/// request's media, a stub keeps nothing else), else the OpenAI message the context holds.
fn turn(value: &Value, original: Option<&Original>, abridged: bool) -> Result<Turn> {
    let read = |object: &serde_json::Map<String, Value>, format| {
        Turn::read(format, object).map_err(|error| Error::InvalidMessage(error.to_string()))
    };
    let Value::Object(object) = value else {
        return Err(Error::InvalidMessage("a context message is not a JSON object".into()));
    };
    let Some(original) = original else { return read(object, Format::OpenAi) };
    let stored = Turn::parse(&original.body).map_err(|error| Error::InvalidMessage(error.to_string()))?;
    if !original.text_changed {
        return Ok(stored);
    }
    let text = value["content"].as_str().unwrap_or_default().to_owned();
    let mut blocks = vec![Block::Text(text)];
    if !abridged {
        blocks.extend(stored.blocks.into_iter().filter(|block| matches!(block, Block::Media(_))));
    }
    let speaker = if stored.speaker == Speaker::Tool { Speaker::User } else { stored.speaker };
    Ok(Turn { speaker, name: stored.name, blocks, original: None })
}
