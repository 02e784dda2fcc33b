//! What each REST route does, once the router has checked its token, its persona and its
//! body's size: each is a call of the library's, its database work on tokio's blocking pool.

use std::sync::Arc;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use strata::{Engine, EngineSession, ErrorKind, Format, Incoming, edge};
use strata_seam::forgetting::ForgetScope;
use strata_seam::transfer::ExportScope;

use super::State;
use super::error::ApiError;
use super::routes::{
    AppendReply, AppendRequest, ContextReply, ContextRequest, Endpoint, Params, query_value,
};
use crate::tokens::Grant;

/// A route's answer.
#[derive(Debug)]
pub enum Reply {
    Json(Value),
    /// Text of a content type.
    Text(&'static str, String),
}

type Result<T, E = ApiError> = std::result::Result<T, E>;

/// Runs `endpoint` (any but MCP, which the server hands to rmcp).
pub async fn handle(
    state: &Arc<State>,
    endpoint: Endpoint,
    params: &Params,
    query: Option<&str>,
    body: Bytes,
    grant: Option<&Grant>,
) -> Result<Reply> {
    let engine = &state.engine;
    let persona = params.get("persona").to_owned();
    match endpoint {
        Endpoint::Health => Ok(Reply::Json(json!({"status": "ok"}))),
        Endpoint::Ready => {
            let store = engine.store().clone();
            blocking(move || store.token_encoding().map_err(ApiError::from)).await.map_err(|error| {
                ApiError::new(
                    ErrorKind::Unavailable,
                    format!("the database does not answer: {}", error.message),
                )
            })?;
            Ok(Reply::Json(json!({"status": "ready", "backend": engine.store().name()})))
        }
        Endpoint::OpenApi => Ok(Reply::Json(state.openapi.clone())),
        Endpoint::Metrics => {
            let engine = engine.clone();
            let engine_text = blocking(move || engine.metrics().map_err(ApiError::from)).await?;
            Ok(Reply::Text("text/plain; version=0.0.4", format!("{}{engine_text}", state.metrics.render())))
        }
        Endpoint::Tools => {
            let format = match query_value(query, "format") {
                Some(name) => name.parse::<Format>().map_err(ApiError::invalid)?,
                None => Format::default(),
            };
            Ok(Reply::Json(Value::Array(engine.tool_specs_in(format))))
        }
        Endpoint::Sessions => {
            let store = engine.store().clone();
            let overviews = blocking(move || Ok(store.session_overviews(&persona)?)).await?;
            Ok(Reply::Json(to_json(&edge::all::<_, edge::SessionOverview>(&overviews))?))
        }
        Endpoint::Session => {
            let session = owned_session(engine, &persona, params.get("session")).await?;
            Ok(Reply::Json(to_json(&edge::Session::from(&session))?))
        }
        Endpoint::Append => {
            let request: AppendRequest = parse_body(&body)?;
            let messages = match (request.message, request.messages) {
                (Some(message), None) => vec![message],
                (None, Some(messages)) if !messages.is_empty() => messages,
                (None, Some(_)) => return Err(ApiError::invalid("messages is empty")),
                _ => return Err(ApiError::invalid("send either \"message\" (one) or \"messages\" (a list)")),
            };
            let incoming = messages
                .iter()
                .enumerate()
                .map(|(index, message)| {
                    Incoming::from_json(message).map_err(|error| match error {
                        strata::Error::InvalidMessage(reason) if messages.len() > 1 => {
                            ApiError::invalid(format!("message {index}: {reason}"))
                        }
                        other => ApiError::from(other),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let session = open_session(engine, &persona, params.get("session")).await?;
            let ids = blocking(move || Ok(session.append_many(incoming)?)).await?;
            let reply = AppendReply { ids: ids.iter().map(|id| id.0).collect() };
            Ok(Reply::Json(to_json(&reply)?))
        }
        Endpoint::Context => {
            let request: ContextRequest = if body.iter().all(u8::is_ascii_whitespace) {
                ContextRequest::default()
            } else {
                parse_body(&body)?
            };
            let format =
                request.format.as_deref().map(str::parse::<Format>).transpose().map_err(ApiError::invalid)?;
            let session = open_session(engine, &persona, params.get("session")).await?;
            let prepared = session.prepare_context().await?;
            let rendered = match format {
                Some(format) => {
                    let rendered = prepared.render(format, request.keep_reasoning)?;
                    Some(json!({"system": rendered.system, "messages": rendered.messages}))
                }
                None => None,
            };
            let reply = ContextReply {
                messages: prepared.context.messages.clone(),
                tokens: to_json(&prepared.context.tokens)?,
                outcome: prepared.outcome.as_ref().map(to_json).transpose()?,
                rendered,
            };
            Ok(Reply::Json(to_json(&reply)?))
        }
        Endpoint::CallTool => {
            let name = params.get("tool");
            let writes = strata_recall::Tool::from_name(name).is_some_and(|tool| tool.writes());
            if writes && grant.is_some_and(|grant| grant.read_only) {
                return Err(ApiError::new(
                    ErrorKind::Forbidden,
                    format!("this token is read-only; {name} writes"),
                ));
            }
            let arguments: Value =
                if body.iter().all(u8::is_ascii_whitespace) { json!({}) } else { parse_body(&body)? };
            if !arguments.is_object() {
                return Err(ApiError::invalid("a tool call's arguments are a JSON object"));
            }
            let session = open_session(engine, &persona, params.get("session")).await?;
            Ok(Reply::Json(session.call_tool(name, arguments).await))
        }
        Endpoint::ExportSession => {
            let session = owned_session(engine, &persona, params.get("session")).await?;
            let store = engine.store().clone();
            let messages =
                blocking(move || Ok(store.export_messages(ExportScope::Session(&session.key))?)).await?;
            Ok(lines(&messages))
        }
        Endpoint::ExportPersona => {
            let store = engine.store().clone();
            let messages =
                blocking(move || Ok(store.export_messages(ExportScope::Persona(&persona))?)).await?;
            Ok(lines(&messages))
        }
        Endpoint::ForgetSession => {
            let session = owned_session(engine, &persona, params.get("session")).await?;
            forget(engine, ForgetScope::Session { key: session.key }).await
        }
        Endpoint::ForgetPersona => forget(engine, ForgetScope::Persona { persona }).await,
        Endpoint::Memories => {
            let category = query_value(query, "category")
                .map(|name| name.parse::<strata_seam::Category>())
                .transpose()
                .map_err(ApiError::from)?;
            let store = engine.store().clone();
            let memories = blocking(move || Ok(store.memories(&persona, category)?)).await?;
            Ok(Reply::Json(to_json(&edge::all::<_, edge::Memory>(&memories))?))
        }
        Endpoint::Proposals => {
            let engine = engine.clone();
            let proposals = blocking(move || Ok(engine.proposals(&persona)?)).await?;
            Ok(Reply::Json(to_json(&edge::all::<_, edge::Proposal>(&proposals))?))
        }
        Endpoint::Accept | Endpoint::Reject => {
            let (engine, key) = (engine.clone(), params.get("key").to_owned());
            let answer = blocking(move || {
                Ok(if endpoint == Endpoint::Accept {
                    to_json(&edge::Memory::from(&engine.accept_proposal(&persona, &key)?))?
                } else {
                    to_json(&edge::Proposal::from(&engine.reject_proposal(&persona, &key)?))?
                })
            })
            .await?;
            Ok(Reply::Json(answer))
        }
        Endpoint::Stats => {
            let store = engine.store().clone();
            let (sessions, memories) = blocking(move || {
                Ok((store.session_overviews(&persona)?, store.memories(&persona, None)?.len()))
            })
            .await?;
            let messages: u64 = sessions.iter().map(|session| session.messages).sum();
            Ok(Reply::Json(json!({"sessions": sessions.len(), "messages": messages, "memories": memories})))
        }
        Endpoint::Mcp => Err(ApiError::new(ErrorKind::Internal, "MCP is served by rmcp")),
    }
}

/// Runs store work on tokio's blocking pool: no connection is held on a runtime thread.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| ApiError::new(ErrorKind::Internal, "the request's task stopped unexpectedly"))?
}

/// The engine's session `key` of `persona`, created if new; a key another persona holds is a
/// conflict the store names.
async fn open_session(engine: &Engine, persona: &str, key: &str) -> Result<EngineSession> {
    let (engine, persona, key) = (engine.clone(), persona.to_owned(), key.to_owned());
    blocking(move || Ok(engine.session(&key, &persona)?)).await
}

/// The existing session `key`, when `persona` holds it; otherwise not found, in the same words
/// whether it is absent or another persona's.
async fn owned_session(engine: &Engine, persona: &str, key: &str) -> Result<strata_seam::Session> {
    let (store, persona, key) = (engine.store().clone(), persona.to_owned(), key.to_owned());
    blocking(move || {
        strata_seam::backend::validate_session_key(&key)?;
        match store.find_session(&key)? {
            Some(session) if session.persona == persona => Ok(session),
            _ => Err(ApiError::new(ErrorKind::NotFound, format!("session {key:?} not found"))),
        }
    })
    .await
}

async fn forget(engine: &Engine, scope: ForgetScope) -> Result<Reply> {
    let forgotten = engine.forget(&scope, "strata serve", |_, _| {}).await?;
    Ok(Reply::Json(to_json(&edge::ForgetCounts::from(&forgotten.counts))?))
}

fn lines(messages: &[strata_seam::transfer::ExportedMessage]) -> Reply {
    let mut text = String::new();
    for message in messages {
        text.push_str(&strata::import::jsonl::write_line(message));
        text.push('\n');
    }
    Reply::Text("application/x-ndjson", text)
}

fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|error| ApiError::invalid(format!("the request body: {error}")))
}

fn to_json(value: &impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(value)
        .map_err(|error| ApiError::new(ErrorKind::Internal, format!("cannot write the answer: {error}")))
}
