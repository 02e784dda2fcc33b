//! `strata serve`: one HTTP server for a fleet of bots, over one engine (SQLite, or PostgreSQL
//! shared by several servers).
//!
//! A REST API for the bot's side (`/v1/personas/{persona}/...`: sessions, appends, contexts,
//! tool calls, memories, proposals, forget, export, stats; [`routes`]) beside the MCP endpoint
//! of `strata mcp --http` at `/mcp`, health (`/healthz`), readiness (`/readyz`: the database
//! answers), `/metrics` and `/openapi.json` (written from the route table).
//!
//! The server is a boundary. Every request but health, readiness and the document carries a
//! token of the token file ([`crate::tokens`]), on every address, loopback included (any local
//! user reaches loopback); a token acts only as the personas its entry names, over REST (the
//! path's persona, checked before any handler runs) and MCP alike, and a read-only one never
//! writes. Headers have [`HEADER_TIMEOUT`], bodies [`BODY_TIMEOUT`] and the configured size
//! limit (413), and at most [`MAX_CONNECTIONS`] connections are served at once. Errors are JSON
//! with the library's kinds ([`strata::ErrorKind`]).
//!
//! Shutdown is graceful: the listener closes, each connection finishes the request it is
//! answering (an append is stored whole or not at all either way) and closes, MCP's event
//! streams end, and the engine's background compactions finish before the process exits.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use strata::{Engine, ErrorKind};
use tokio_util::sync::CancellationToken;

use crate::mcp::http::{HttpOptions, McpEndpoint};
use crate::tokens::Tokens;
use error::ApiError;
use handlers::Reply;
use metrics::HttpMetrics;
use routes::{Access, Lookup};

mod error;
mod handlers;
mod metrics;
mod openapi;
pub mod routes;

/// How long a connection may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request may take to send its body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once; more are closed as they come.
pub const MAX_CONNECTIONS: usize = 1024;
/// How long shutdown waits for connections to finish their requests before closing them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// How the server serves.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The tokens it accepts.
    pub tokens: Tokens,
    /// The largest request body read (413 beyond).
    pub max_body_bytes: usize,
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The listener failed.
    #[error("cannot listen")]
    Listen(#[source] std::io::Error),
}

/// What every request shares.
#[derive(Debug)]
struct State {
    engine: Engine,
    tokens: Tokens,
    mcp: McpEndpoint,
    metrics: HttpMetrics,
    openapi: Value,
    max_body_bytes: usize,
}

/// Serves on `listener` until `shutdown` is cancelled, then shuts down gracefully (see the
/// module's doc).
pub async fn serve(
    engine: Engine,
    listener: tokio::net::TcpListener,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let addr = listener.local_addr().map_err(ServeError::Listen)?;
    let mcp_options = HttpOptions { tokens: Some(options.tokens.clone()), ..HttpOptions::default() };
    let state = Arc::new(State {
        mcp: McpEndpoint::new(engine.clone(), mcp_options, addr, &shutdown),
        engine,
        tokens: options.tokens,
        metrics: HttpMetrics::default(),
        openapi: openapi::document(),
        max_body_bytes: options.max_body_bytes,
    });
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut connections = tokio::task::JoinSet::new();
    tracing::info!(%addr, "serving");
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // A full file table: the next may work, after a pause that keeps a lasting
                    // failure from spinning a core.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        // Reap finished connections so the set does not grow with the server's age.
        while connections.try_join_next().is_some() {}
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, limit = MAX_CONNECTIONS, "too many connections: closing this one");
            continue;
        };
        let (state, stop) = (state.clone(), shutdown.clone());
        connections.spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(answer(&state, request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = stop.cancelled() => {
                    // Finishes the request being answered, then closes.
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%peer, %error, "connection ended");
            }
        });
    }
    drop(listener);
    tracing::info!(connections = connections.len(), "shutting down: finishing requests");
    if tokio::time::timeout(SHUTDOWN_GRACE, async { while connections.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        tracing::warn!("requests still running after the grace period are cut");
        connections.shutdown().await;
    }
    state.engine.finish_background_compactions().await;
    Ok(())
}

/// Answers one request: route, token, persona, body, handler; counted in the metrics.
async fn answer(state: &Arc<State>, request: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let _flight = state.metrics.start();
    let method = request.method().clone();
    let (route_name, response) = match routes::lookup(&method, request.uri().path()) {
        Lookup::Found(route, params) => (route.pattern, routed(state, route, params, request).await),
        Lookup::WrongMethod(allowed) => {
            let mut response =
                ApiError::invalid(format!("this path takes {}", allowed.join(", "))).response();
            *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            ("unmatched", response)
        }
        Lookup::NotFound => ("unmatched", ApiError::new(ErrorKind::NotFound, "no such path").response()),
        Lookup::BadPath(reason) => ("unmatched", ApiError::invalid(reason).response()),
    };
    let method_name = match method {
        hyper::Method::GET => "GET",
        hyper::Method::POST => "POST",
        hyper::Method::DELETE => "DELETE",
        _ => "other",
    };
    state.metrics.record(route_name, method_name, response.status().as_u16(), started.elapsed());
    response
}

async fn routed(
    state: &Arc<State>,
    route: &'static routes::Route,
    params: routes::Params,
    request: Request<Incoming>,
) -> Response<Body> {
    let grant = match route.access {
        Access::Open => None,
        Access::Token | Access::Persona => {
            let header = request.headers().get(hyper::header::AUTHORIZATION).map(|value| value.as_bytes());
            match state.tokens.authorize(header) {
                Some(grant) => Some(grant),
                None => {
                    return ApiError::new(ErrorKind::Unauthorized, "a known bearer token is required")
                        .response();
                }
            }
        }
    };
    if let Some(grant) = &grant {
        if route.access == Access::Persona {
            let persona = params.get("persona");
            if let Err(error) = strata_seam::backend::validate_persona(persona) {
                return ApiError::from(error).response();
            }
            if !grant.may_act_as(persona) {
                let message = format!("token {:?} may not act as persona {persona:?}", grant.name);
                return ApiError::new(ErrorKind::Forbidden, message).response();
            }
        }
        if route.writes && grant.read_only {
            return ApiError::new(ErrorKind::Forbidden, format!("token {:?} is read-only", grant.name))
                .response();
        }
    }
    if route.endpoint == routes::Endpoint::Mcp
        && let Some(grant) = grant
    {
        return state.mcp.answer(request, grant).await;
    }
    let query = request.uri().query().map(str::to_owned);
    let body = match read_body(request, state.max_body_bytes).await {
        Ok(body) => body,
        Err(error) => return error.response(),
    };
    match handlers::handle(state, route.endpoint, &params, query.as_deref(), body, grant.as_deref()).await {
        Ok(Reply::Json(value)) => reply(StatusCode::OK, "application/json", value.to_string()),
        Ok(Reply::Text(content_type, text)) => reply(StatusCode::OK, content_type, text),
        Err(error) => error.response(),
    }
}

/// The body, within the size limit and [`BODY_TIMEOUT`].
async fn read_body(request: Request<Incoming>, limit: usize) -> Result<Bytes, ApiError> {
    let too_large =
        || ApiError::new(ErrorKind::TooLarge, format!("the request body is larger than {limit} bytes"));
    let announced = request
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if announced.is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(request.into_body(), limit).collect()).await {
        Err(_) => Err(ApiError::invalid("the request body did not arrive in time")),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(ApiError::invalid("the request body could not be read")),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
    headers.insert(WIRE_VERSION_HEADER, hyper::header::HeaderValue::from(strata::WIRE_VERSION));
    response
}

/// The header every answer carries: the version of the JSON shapes it is written in
/// ([`strata::WIRE_VERSION`]).
const WIRE_VERSION_HEADER: &str = "strata-wire-version";
