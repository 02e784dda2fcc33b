//! OpenAI chat-completions message arrays: the `messages` a bot sends to
//! `POST /v1/chat/completions`, as a JSON list (or a request body `{"model": ..., "messages":
//! [...]}`), or JSON Lines of them, one conversation per line (the shape of fine-tuning files:
//! `{"messages": [...]}`).
//!
//! Each message is read by [`Incoming::from_json`], the reader of the bindings, so it keeps
//! exactly what a bot appending it would keep (`role`, `content` as text or text parts, `name`,
//! `tool_calls`, `tool_call_id`, and strata's optional `timestamp`, `key`, `pinned`); a request's
//! other keys (`model`, `tools`, ...) are not messages and are passed over. A JSON document is
//! one session, named after the file; JSON Lines give one session per line (`<file>-<line>`).
//! A message without a `key` gets the id `#<position>` in its conversation, so a re-run adds
//! nothing.

use std::path::Path;

use serde_json::Value;

use crate::Incoming;
use crate::import::{Bad, Collected, ImportError, ImportOptions, IncomingMessage, numbered_lines, stem};

pub(crate) fn read(
    text: &str,
    path: &Path,
    options: &ImportOptions,
) -> Result<Vec<IncomingMessage>, ImportError> {
    let mut collected = Collected::new(options);
    let stem = stem(path);
    match serde_json::from_str::<Value>(text) {
        Ok(document) => {
            conversation(&document, &stem, options, &mut collected)
                .map_err(|(at, source)| ImportError::Item { path: path.to_owned(), at, source })?;
        }
        // More than one line that is not one document: JSON Lines, a conversation per line.
        Err(_) if numbered_lines(text).nth(1).is_some() => {
            for (line, text) in numbered_lines(text) {
                let error = |source| ImportError::Line { path: path.to_owned(), line, source };
                let document: Value = serde_json::from_str(text).map_err(|e| error(Bad::Json(e)))?;
                conversation(&document, &format!("{stem}-{line}"), options, &mut collected).map_err(
                    |(at, reason)| error(Bad::shape(format!("{at}: {}", strata_seam::error_chain(&reason)))),
                )?;
            }
        }
        Err(error) => {
            return Err(ImportError::Item {
                path: path.to_owned(),
                at: "the file".into(),
                source: Bad::Json(error),
            });
        }
    }
    Ok(collected.finish())
}

/// One conversation: a list of messages, or an object with one. The error says which message.
fn conversation(
    document: &Value,
    session: &str,
    options: &ImportOptions,
    collected: &mut Collected<'_>,
) -> Result<(), (String, Bad)> {
    let messages = match document {
        Value::Array(messages) => messages,
        Value::Object(object) => match object.get("messages") {
            Some(Value::Array(messages)) => messages,
            _ => return Err(("the conversation".into(), Bad::shape("an object needs a \"messages\" list"))),
        },
        _ => {
            return Err((
                "the conversation".into(),
                Bad::shape("expected a list of messages or an object with \"messages\""),
            ));
        }
    };
    for (index, value) in messages.iter().enumerate() {
        let at = || format!("message {}", index + 1);
        let incoming = Incoming::from_json(value).map_err(|error| (at(), Bad::message(error)))?;
        let id = incoming.key.clone().unwrap_or_else(|| format!("#{}", index + 1));
        let message = incoming.into_new(options.now);
        collected.push(session, id, message).map_err(|error| (at(), error))?;
    }
    Ok(())
}
