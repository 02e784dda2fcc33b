//! strata's tools over MCP's streamable HTTP transport: one server, many conversations.
//!
//! A stdio server runs as one session's persona, fixed when it starts. Over HTTP one server
//! serves every host that connects, so each MCP session says which conversation it is: the
//! headers [`SESSION_HEADER`] (the strata session's key) and [`PERSONA_HEADER`] (its persona),
//! sent with every request, as MCP clients send their configured headers. They are checked as
//! everywhere else: a persona name is validated, a session belongs to one persona for good (a
//! host naming another persona for it is refused), and every tool call runs as that persona,
//! through the same calls and the same fencing as stdio. Without the headers the server's
//! defaults apply (`strata mcp --http ... --session S --persona P`); with neither, the call is
//! refused.
//!
//! Bound to a loopback address the server is reachable from this machine only, and rmcp
//! refuses requests whose `Host` is not a loopback name (DNS rebinding). Bound to any other
//! address it requires a bearer token ([`HttpOptions::token`]), checked on every request before
//! rmcp sees it: without one [`serve_http`] refuses to start.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;
use tower_service::Service as _;

use crate::mcp::{McpError, Tools, server_info};
use strata::{Engine, EngineSession};

/// The header naming the strata session of an MCP session.
pub const SESSION_HEADER: &str = "strata-session";
/// The header naming the persona of an MCP session.
pub const PERSONA_HEADER: &str = "strata-persona";

/// How the HTTP server serves.
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    /// The bearer token every request must carry (`Authorization: Bearer <token>`); required
    /// when the listener is not on a loopback address.
    pub token: Option<String>,
    /// The session of an MCP session that sends no [`SESSION_HEADER`].
    pub default_session: Option<String>,
    /// The persona of an MCP session that sends no [`PERSONA_HEADER`] (else: the existing
    /// session's, or "default").
    pub default_persona: Option<String>,
}

/// Serves strata's tools over streamable HTTP on `listener` (its path is ignored: every path
/// is the MCP endpoint) until `shutdown` is cancelled.
pub async fn serve_http(
    engine: Engine,
    listener: tokio::net::TcpListener,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> Result<(), McpError> {
    let addr = listener.local_addr().map_err(McpError::Listen)?;
    let loopback = addr.ip().is_loopback();
    if !loopback && options.token.as_deref().is_none_or(str::is_empty) {
        return Err(McpError::TokenRequired { addr });
    }
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
    if !loopback {
        // Reached by other hosts under names this server cannot know; the token guards it.
        config = config.disable_allowed_hosts();
    }
    let shared = Arc::new(Shared { engine, options: options.clone(), tools: Tools::new() });
    let service = StreamableHttpService::new(
        move || Ok(HttpHandler { shared: shared.clone(), sessions: Arc::default() }),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token: Option<Arc<str>> = options.token.filter(|token| !token.is_empty()).map(Arc::from);
    tracing::info!(%addr, auth = token.is_some(), "serving MCP over HTTP");
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // A full file table or a connection reset before accept: the next may work,
                    // after a pause that keeps a lasting failure from spinning a core.
                    tracing::warn!(%error, "cannot accept an MCP connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => return Ok(()),
        };
        let service = service.clone();
        let token = token.clone();
        let connection_closed = shutdown.child_token();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
                let mut service = service.clone();
                let token = token.clone();
                async move {
                    if let Some(token) = &token
                        && !authorized(&request, token)
                    {
                        return Ok::<_, Infallible>(unauthorized());
                    }
                    service.call(request).await
                }
            });
            let connection =
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handler);
            tokio::select! {
                served = connection => if let Err(error) = served {
                    tracing::debug!(%peer, %error, "MCP connection ended");
                },
                () = connection_closed.cancelled() => {}
            }
        });
    }
}

/// Whether the request carries the bearer token (compared in constant time).
fn authorized(request: &Request<Incoming>, token: &str) -> bool {
    let Some(given) = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (given, token) = (given.trim().as_bytes(), token.as_bytes());
    given.len() == token.len() && given.iter().zip(token).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn unauthorized() -> Response<http_body_util::combinators::BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"a bearer token is required\n")).boxed());
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response
        .headers_mut()
        .insert(hyper::header::WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static("Bearer"));
    response
}

/// What every MCP session of a server shares.
#[derive(Debug)]
struct Shared {
    engine: Engine,
    options: HttpOptions,
    tools: Tools,
}

/// The handler of one MCP session (rmcp makes one per session): it opens the strata session
/// its requests name, once per name.
#[derive(Clone, Debug)]
struct HttpHandler {
    shared: Arc<Shared>,
    sessions: Arc<Mutex<HashMap<Named, EngineSession>>>,
}

/// A session key and the persona a request named for it, if it named one.
type Named = (String, Option<String>);

/// A header's text; an error when it is not visible ASCII.
fn header(parts: Option<&http::request::Parts>, name: &str) -> Result<Option<String>, ErrorData> {
    let Some(value) = parts.and_then(|parts| parts.headers.get(name)) else { return Ok(None) };
    let text = value.to_str().map_err(|_| {
        ErrorData::invalid_request(format!("the {name} header must be visible ASCII text"), None)
    })?;
    Ok(Some(text.trim().to_owned()))
}

impl HttpHandler {
    /// The strata session a request names (or the server's default), opened and checked.
    async fn session(&self, context: &RequestContext<RoleServer>) -> Result<EngineSession, ErrorData> {
        let parts = context.extensions.get::<http::request::Parts>();
        let options = &self.shared.options;
        let key = match header(parts, SESSION_HEADER)? {
            Some(key) => key,
            None => options.default_session.clone().ok_or_else(|| {
                ErrorData::invalid_request(
                    format!("name the strata session of this MCP session in the {SESSION_HEADER} header"),
                    None,
                )
            })?,
        };
        let persona = header(parts, PERSONA_HEADER)?.or_else(|| options.default_persona.clone());
        let wanted = (key, persona);
        if let Some(session) = self.sessions.lock().unwrap_or_else(|e| e.into_inner()).get(&wanted) {
            return Ok(session.clone());
        }
        let engine = self.shared.engine.clone();
        let (key, persona) = wanted.clone();
        let opened = tokio::task::spawn_blocking(move || {
            let persona = match persona {
                Some(persona) => persona,
                None => {
                    engine.store().find_session(&key)?.map_or_else(|| "default".to_owned(), |s| s.persona)
                }
            };
            engine.session(&key, &persona)
        })
        .await
        .map_err(|_| ErrorData::internal_error("opening the session failed unexpectedly", None))?
        .map_err(|error| ErrorData::invalid_request(strata_store::error_chain(&error), None))?;
        self.sessions.lock().unwrap_or_else(|e| e.into_inner()).insert(wanted, opened.clone());
        Ok(opened)
    }
}

impl ServerHandler for HttpHandler {
    fn get_info(&self) -> ServerConfig {
        server_info(&format!("one persona (the {PERSONA_HEADER} header of this MCP session)"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(self.shared.tools.list())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.tools.get(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = self.session(&context).await?;
        self.shared.tools.call(&session, request).await
    }
}
