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
//! The server is a boundary: every request carries a bearer token ([`HttpOptions::tokens`]:
//! `--tokens FILE` binds each to personas, `--token` is one for every persona, and `strata
//! mcp` makes a per-run one when none is given), checked before anything else, and a token
//! acts only as its personas (a read-only one calls no writing tool); the
//! `Host` must be a loopback name or the bound address, and an `Origin`, when sent, one of
//! them (DNS rebinding, as the MCP transport requires; beyond loopback the token alone guards,
//! the names being unknown); a connection has [`HEADER_TIMEOUT`] to send its headers and a
//! request [`BODY_TIMEOUT`] and [`MAX_BODY_BYTES`] for its body, and at most
//! [`MAX_CONNECTIONS`] are served at once, so idle half-requests cannot hold every descriptor.
//! A body that is not JSON-RPC is answered with JSON-RPC's own codes (-32700, -32600, and
//! -32602 for `tools/call` params that are not a name and an arguments object).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
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
use crate::tokens::{Grant, Tokens};
use strata::{Engine, EngineSession};

/// The header naming the strata session of an MCP session.
pub const SESSION_HEADER: &str = "strata-session";
/// The header naming the persona of an MCP session.
pub const PERSONA_HEADER: &str = "strata-persona";

/// How long a connection may take to send a request's headers (an idle half-request is closed).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request may take to send its body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request body read (a tool call's arguments are small; rmcp's own cap is 4 MiB).
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// Connections served at once; more are closed as they come, so a flood of idle connections
/// cannot take every file descriptor of the process.
pub const MAX_CONNECTIONS: usize = 512;

/// How the HTTP server serves.
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    /// The bearer tokens a request may carry (`Authorization: Bearer <token>`), each bound to
    /// the personas it may act as ([`Tokens`]); required.
    pub tokens: Option<Tokens>,
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
    let Some(tokens) = options.tokens.clone() else {
        return Err(McpError::TokenRequired { addr });
    };
    let endpoint = McpEndpoint::new(engine, options, addr, &shutdown);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tracing::info!(%addr, "serving MCP over HTTP");
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
        // Closed at once when every slot is taken: its descriptor is freed, and the clients
        // already served go on.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, limit = MAX_CONNECTIONS, "too many MCP connections: closing this one");
            drop(stream);
            continue;
        };
        let endpoint = endpoint.clone();
        let tokens = tokens.clone();
        let connection_closed = shutdown.child_token();
        tokio::spawn(async move {
            let _slot = slot;
            let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
                let endpoint = endpoint.clone();
                let grant = tokens.authorize(
                    request.headers().get(hyper::header::AUTHORIZATION).map(|value| value.as_bytes()),
                );
                async move {
                    match grant {
                        Some(grant) => Ok::<_, Infallible>(endpoint.answer(request, grant).await),
                        None => Ok(unauthorized()),
                    }
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), handler);
            tokio::select! {
                served = connection => if let Err(error) = served {
                    tracing::debug!(%peer, %error, "MCP connection ended");
                },
                () = connection_closed.cancelled() => {}
            }
        });
    }
}

/// The MCP endpoint as a request handler, for `strata mcp --http` and for `strata serve`'s
/// `/mcp`: rmcp's streamable HTTP service behind the body checks and the persona rule.
#[derive(Clone)]
pub(crate) struct McpEndpoint {
    service: Mcp,
}

impl std::fmt::Debug for McpEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpEndpoint").finish_non_exhaustive()
    }
}

impl McpEndpoint {
    /// The MCP service of `engine` for a server bound to `addr`; its streams close when
    /// `shutdown` is cancelled.
    pub(crate) fn new(
        engine: Engine,
        options: HttpOptions,
        addr: std::net::SocketAddr,
        shutdown: &CancellationToken,
    ) -> McpEndpoint {
        let loopback = addr.ip().is_loopback();
        let mut config = StreamableHttpServerConfig::default()
            .with_cancellation_token(shutdown.child_token())
            .with_max_request_body_bytes(MAX_BODY_BYTES)
            .with_allowed_origins(allowed_origins(addr))
            .enforce_origin_validation();
        config = if loopback {
            // The names this server answers to on this machine, the bound address among them
            // (127.0.0.2 is loopback too, and rmcp's defaults do not name it).
            let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
            hosts.push(addr.ip().to_string());
            config.with_allowed_hosts(hosts)
        } else {
            // Reached by other hosts under names this server cannot know; the token guards it.
            config.disable_allowed_hosts()
        };
        let shared = Arc::new(Shared { engine, options, tools: Tools::new() });
        let service = StreamableHttpService::new(
            move || Ok(HttpHandler { shared: shared.clone(), sessions: Arc::default() }),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        McpEndpoint { service }
    }

    /// Answers one request of a client whose token gave `grant`: a request naming a persona
    /// the token may not act as is refused (403) before MCP sees it; the grant goes with the
    /// request, so the handler checks the persona it resolves and refuses a read-only token's
    /// writing tools.
    pub(crate) async fn answer(&self, mut request: Request<Incoming>, grant: Arc<Grant>) -> Response<Body> {
        if let Some(persona) = request.headers().get(PERSONA_HEADER).and_then(|value| value.to_str().ok())
            && !grant.may_act_as(persona.trim())
        {
            return plain(
                StatusCode::FORBIDDEN,
                "this token may not act as the persona named in strata-persona\n",
            );
        }
        request.extensions_mut().insert(grant);
        match answer(self.service.clone(), request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;
type Mcp = StreamableHttpService<HttpHandler, LocalSessionManager>;

/// The origins a browser page on this machine has when it may talk to the server: the
/// loopback names and the bound address, on its port.
fn allowed_origins(addr: std::net::SocketAddr) -> Vec<String> {
    let port = addr.port();
    let bound = match addr.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    ["localhost".to_owned(), "127.0.0.1".to_owned(), "[::1]".to_owned(), bound]
        .iter()
        .flat_map(|host| [format!("http://{host}:{port}"), format!("https://{host}:{port}")])
        .collect()
}

/// Reads a POST's body within [`BODY_TIMEOUT`] and [`MAX_BODY_BYTES`], answers one that is not
/// JSON-RPC with JSON-RPC's error codes, and hands the rest to rmcp.
async fn answer(mut service: Mcp, request: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    if request.method() != hyper::Method::POST {
        return service.call(request).await;
    }
    let announced = request
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if announced.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return Ok(plain(StatusCode::PAYLOAD_TOO_LARGE, "the request body is larger than 1 MiB\n"));
    }
    let (parts, body) = request.into_parts();
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect()).await {
        Err(_) => return Ok(plain(StatusCode::REQUEST_TIMEOUT, "the request body did not arrive in time\n")),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
            return Ok(plain(StatusCode::PAYLOAD_TOO_LARGE, "the request body is larger than 1 MiB\n"));
        }
        Ok(Err(error)) => {
            tracing::debug!(%error, "an MCP request body could not be read");
            return Ok(plain(StatusCode::BAD_REQUEST, "the request body could not be read\n"));
        }
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    if let Some(refusal) = not_json_rpc(&bytes) {
        return Ok(refusal);
    }
    service.call(Request::from_parts(parts, Full::new(bytes))).await
}

/// The JSON-RPC error answering a body that is not a well-formed request, or `None`: -32700
/// for text that is not JSON, -32600 for JSON that is not a JSON-RPC 2.0 message, -32602 for a
/// `tools/call` whose params are not a tool name and an arguments object (rmcp would answer
/// those as an unknown method).
fn not_json_rpc(body: &[u8]) -> Option<Response<Body>> {
    use serde_json::Value;
    let message: Value = match serde_json::from_slice(body) {
        Ok(message) => message,
        Err(error) => {
            return Some(rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                -32700,
                &format!("parse error: {error}"),
            ));
        }
    };
    let Value::Object(object) = &message else {
        if message.is_array() {
            return None;
        }
        return Some(rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            -32600,
            "invalid request: not a JSON-RPC object",
        ));
    };
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            -32600,
            "invalid request: \"jsonrpc\" must be \"2.0\"",
        ));
    }
    let is_response = object.contains_key("result") || object.contains_key("error");
    let method = object.get("method");
    if !is_response && !method.is_some_and(Value::is_string) {
        return Some(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            -32600,
            "invalid request: \"method\" must be a string",
        ));
    }
    if method.and_then(Value::as_str) == Some("tools/call") {
        let params = object.get("params");
        let well_formed = params.and_then(Value::as_object).is_some_and(|params| {
            params.get("name").is_some_and(Value::is_string)
                && params
                    .get("arguments")
                    .is_none_or(|arguments| arguments.is_object() || arguments.is_null())
        });
        if !well_formed {
            return Some(rpc_error(
                StatusCode::OK,
                id,
                -32602,
                "invalid params: tools/call takes {\"name\": string, \"arguments\": object}",
            ));
        }
    }
    None
}

fn rpc_error(status: StatusCode, id: serde_json::Value, code: i64, message: &str) -> Response<Body> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}

fn unauthorized() -> Response<Body> {
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

/// The grant the request's token gave (the server puts it in every request it lets through).
fn grant(parts: Option<&http::request::Parts>) -> Result<Arc<Grant>, ErrorData> {
    parts
        .and_then(|parts| parts.extensions.get::<Arc<Grant>>())
        .cloned()
        .ok_or_else(|| ErrorData::invalid_request("the request carries no token", None))
}

/// `session` when the grant may act as its persona.
fn permitted(grant: &Grant, session: EngineSession) -> Result<EngineSession, ErrorData> {
    if grant.may_act_as(&session.info().persona) { Ok(session) } else { Err(refused(grant)) }
}

fn refused(grant: &Grant) -> ErrorData {
    ErrorData::invalid_request(format!("token {:?} may not act as this session's persona", grant.name), None)
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
        let grant = grant(parts)?;
        let wanted = (key, persona);
        let cached = self.sessions.lock().unwrap_or_else(|e| e.into_inner()).get(&wanted).cloned();
        if let Some(session) = cached {
            return permitted(&grant, session);
        }
        let engine = self.shared.engine.clone();
        let (key, persona) = wanted.clone();
        let check = grant.clone();
        let opened = tokio::task::spawn_blocking(move || {
            let persona = match persona {
                Some(persona) => persona,
                None => {
                    engine.store().find_session(&key)?.map_or_else(|| "default".to_owned(), |s| s.persona)
                }
            };
            // Checked before the session is opened, so a refused persona creates nothing.
            if !check.may_act_as(&persona) {
                return Ok(None);
            }
            engine.session(&key, &persona).map(Some)
        })
        .await
        .map_err(|_| ErrorData::internal_error("opening the session failed unexpectedly", None))?
        .map_err(|error| ErrorData::invalid_request(strata_seam::error_chain(&error), None))?
        .ok_or_else(|| refused(&grant))?;
        self.sessions.lock().unwrap_or_else(|e| e.into_inner()).insert(wanted, opened.clone());
        permitted(&grant, opened)
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
        let writes = strata_recall::Tool::from_name(&request.name).is_some_and(|tool| tool.writes());
        if writes && grant(context.extensions.get::<http::request::Parts>())?.read_only {
            return Err(ErrorData::invalid_request(
                format!("this token is read-only; {} writes", request.name),
                None,
            ));
        }
        self.shared.tools.call(&session, request).await
    }
}
