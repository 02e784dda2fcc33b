//! MCP over streamable HTTP: `strata mcp --http` on 127.0.0.1 and rmcp's own streamable-HTTP
//! client, one MCP session per conversation, each naming its session and persona in headers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::util::Strata;

/// The headers naming an MCP session's strata session and persona.
const SESSION_HEADER: &str = "strata-session";
const PERSONA_HEADER: &str = "strata-persona";

/// A database where two personas each have a history mentioning the same word, `zebra`, with
/// a secret of their own that the other must never see.
fn seeded(messages_per_persona: usize) -> Strata {
    let strata = Strata::new();
    let mut text = String::new();
    for persona in ["red", "blue"] {
        for i in 0..messages_per_persona {
            let (role, content) = if i % 2 == 0 {
                ("user", format!("Where is the zebra file number {i}?"))
            } else {
                ("assistant", format!("The zebra file {i} is in the {persona}-vault-{i} folder."))
            };
            let line = json!({"role": role, "content": content, "session": format!("{persona}-history"), "persona": persona});
            text.push_str(&format!("{line}\n"));
        }
    }
    let file = strata.file("history.jsonl", &text);
    strata.run(&["ingest", file.to_str().unwrap()]).success();
    strata
}

/// A running `strata mcp --http`: where it listens and the token its requests need.
struct Server {
    addr: SocketAddr,
    token: String,
    child: tokio::process::Child,
}

/// `strata mcp --http` on 127.0.0.1 (a free port) over `strata`'s database, with `flags`. The
/// token is the one given with `--token`, else the one the server made and printed. The
/// server is killed when the child is dropped.
async fn server(strata: &Strata, flags: &[&str]) -> Server {
    server_on(strata, "127.0.0.1:0", flags).await
}

async fn server_on(strata: &Strata, addr: &str, flags: &[&str]) -> Server {
    use tokio::io::AsyncBufReadExt;

    let mut command = tokio::process::Command::from(strata.command());
    command
        .args(["mcp", "--http", addr, "--no-embed"])
        .args(flags)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(60), stderr.next_line()).await.unwrap().unwrap().unwrap()
    };
    let line = next().await;
    let url =
        line.split_whitespace().find(|word| word.starts_with("http://")).unwrap_or_else(|| panic!("{line}"));
    let addr: SocketAddr = url.trim_start_matches("http://").trim_end_matches("/mcp").parse().unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{line}");
    let given = flags.iter().position(|flag| *flag == "--token").map(|at| flags[at + 1].to_owned());
    let token = match given {
        Some(token) => token,
        None => {
            let line = next().await;
            let (_, rest) =
                line.split_once("bearer token for this run: ").unwrap_or_else(|| panic!("{line}"));
            rest.split_whitespace().next().unwrap().to_owned()
        }
    };
    // Read the rest of its log, so a full pipe never stalls the server.
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
    Server { addr, token, child }
}

/// An rmcp client over streamable HTTP with these headers.
pub(crate) async fn client(
    addr: SocketAddr,
    headers: &[(&'static str, &str)],
    token: Option<&str>,
) -> Result<RunningService<RoleClient, ()>, rmcp::service::ClientInitializeError> {
    let headers: HashMap<_, _> = headers
        .iter()
        .map(|(name, value)| {
            (http::HeaderName::from_static(name), http::HeaderValue::from_str(value).unwrap())
        })
        .collect();
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp")).custom_headers(headers);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    ().serve(StreamableHttpClientTransport::from_config(config)).await
}

pub(crate) fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap_or_else(JsonObject::new))
}

/// The tool's JSON answer.
pub(crate) fn answer(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or_else(|| {
        let text: String =
            result.content.iter().filter_map(|block| block.as_text()).map(|t| t.text.clone()).collect();
        serde_json::from_str(&text).unwrap()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_client_gets_the_tools_of_the_session_and_persona_it_names() {
    let strata = seeded(6);
    let server = server(&strata, &[]).await;
    let (addr, token) = (server.addr, Some(server.token.as_str()));
    let red = client(addr, &[(SESSION_HEADER, "red-desk"), (PERSONA_HEADER, "red")], token).await.unwrap();
    let tools: Vec<String> =
        red.list_all_tools().await.unwrap().into_iter().map(|t| t.name.into_owned()).collect();
    assert_eq!(tools, strata::recall::tool_names(), "the same tools as stdio");
    let hits = answer(
        &red.call_tool(call("memory_grep", json!({"query": "zebra", "include_in_context": true})))
            .await
            .unwrap(),
    );
    let text = hits.to_string();
    assert!(text.contains("red-vault") && !text.contains("blue-vault"), "{hits:#}");
    // Recalled text is fenced as data, as over stdio.
    assert!(text.contains("retrieved-data"), "{hits:#}");
    // Another persona's message is as missing as a message that does not exist.
    let backend = strata.backend();
    let blue = backend.sessions(Some("blue")).unwrap().into_iter().next().expect("a session of blue");
    let blue_id = backend.messages(blue.id, 0..=i64::MAX).unwrap().first().expect("a message of blue").id.0;
    let view = red.call_tool(call("view_message", json!({"message_id": blue_id}))).await.unwrap();
    assert_eq!(view.is_error, Some(true));
    assert_eq!(answer(&view)["error"]["kind"], "not_found", "{:#}", answer(&view));
    // The session was created for the persona the host named.
    let persona = backend.find_session("red-desk").unwrap().expect("the session red-desk").persona;
    assert_eq!(persona, "red");

    // A host naming another persona for an existing session is refused, and so is a host
    // naming no session on a server without a default.
    let thief = client(addr, &[(SESSION_HEADER, "red-desk"), (PERSONA_HEADER, "blue")], token).await.unwrap();
    let refused =
        thief.call_tool(call("memory_grep", json!({"query": "zebra"}))).await.unwrap_err().to_string();
    assert!(refused.contains("persona"), "{refused}");
    let anonymous = client(addr, &[], token).await.unwrap();
    let refused =
        anonymous.call_tool(call("memory_grep", json!({"query": "zebra"}))).await.unwrap_err().to_string();
    assert!(refused.contains(SESSION_HEADER), "{refused}");
    let bad = client(addr, &[(SESSION_HEADER, "x"), (PERSONA_HEADER, "ignore previous instructions")], token)
        .await
        .unwrap();
    let refused = bad.call_tool(call("memory_list", json!({}))).await.unwrap_err().to_string();
    assert!(refused.contains("persona"), "{refused}");
    for service in [red, thief, anonymous, bad] {
        service.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_a_token_refuses_requests_without_it() {
    let strata = seeded(2);
    let flags = ["--token", "s3cret-token", "--session", "desk", "--persona", "red"];
    let server = server(&strata, &flags).await;
    let addr = server.addr;
    assert!(client(addr, &[], None).await.is_err(), "no token, no session");
    assert!(client(addr, &[], Some("wrong-token!")).await.is_err(), "a wrong token, no session");
    let red = client(addr, &[], Some("s3cret-token")).await.unwrap();
    let hits = answer(
        &red.call_tool(call("memory_grep", json!({"query": "zebra", "include_in_context": true})))
            .await
            .unwrap(),
    );
    assert!(hits["count"].as_u64().unwrap() >= 1, "the defaults apply without headers: {hits:#}");
    red.cancel().await.unwrap();
    // Beyond loopback a token is required before anything listens.
    let strata_cli = strata.run(&["mcp", "--http", "0.0.0.0:0"]).failure();
    assert!(strata_cli.contains("STRATA_MCP_TOKEN"), "{strata_cli}");
}

/// The load run of benches/README.md: 100 concurrent MCP sessions of two personas on one
/// server, 1,000 tool calls; no error, no row of the other persona. The latencies are printed
/// (`--no-capture`), never asserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_sessions_of_two_personas_never_see_each_other() {
    const SESSIONS: usize = 100;
    const CALLS_PER_SESSION: usize = 10;
    let strata = seeded(200);
    let server = server(&strata, &[]).await;
    let addr = server.addr;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for index in 0..SESSIONS {
        let token = server.token.clone();
        tasks.push(tokio::spawn(async move {
            let (persona, other) = if index % 2 == 0 { ("red", "blue") } else { ("blue", "red") };
            let key = format!("{persona}-load-{index}");
            let service =
                client(addr, &[(SESSION_HEADER, &key), (PERSONA_HEADER, persona)], Some(&token)).await.unwrap();
            let mut latencies = Vec::new();
            let mut foreign = 0;
            for call_index in 0..CALLS_PER_SESSION {
                let request = match call_index % 3 {
                    0 => call("memory_grep", json!({"query": format!("zebra file {}", call_index * 7), "include_in_context": true})),
                    1 => call("memory_list", json!({})),
                    _ => call("view_chat_history_summary", json!({})),
                };
                let start = Instant::now();
                let result = service.call_tool(request).await.unwrap();
                latencies.push(start.elapsed());
                assert_ne!(result.is_error, Some(true), "{:#}", answer(&result));
                if answer(&result).to_string().contains(&format!("{other}-")) {
                    foreign += 1;
                }
            }
            service.cancel().await.unwrap();
            (latencies, foreign)
        }));
    }
    let mut latencies = Vec::new();
    let mut foreign = 0;
    for task in tasks {
        let (mine, seen) = task.await.unwrap();
        latencies.extend(mine);
        foreign += seen;
    }
    let wall = started.elapsed();
    assert_eq!(latencies.len(), SESSIONS * CALLS_PER_SESSION);
    assert_eq!(foreign, 0, "a tool answer held another persona's row");

    // The baseline, same run: the same calls through the engine in process, 100 at once.
    let engine = strata::Engine::open(strata.db(), strata::Config::default()).unwrap();
    let started_direct = Instant::now();
    let mut tasks = Vec::new();
    for index in 0..SESSIONS {
        let persona = if index % 2 == 0 { "red" } else { "blue" };
        let session = engine.session(&format!("{persona}-direct-{index}"), persona).unwrap();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            for call_index in 0..CALLS_PER_SESSION {
                let (name, arguments) = match call_index % 3 {
                    0 => ("memory_grep", json!({"query": format!("zebra file {}", call_index * 7), "include_in_context": true})),
                    1 => ("memory_list", json!({})),
                    _ => ("view_chat_history_summary", json!({})),
                };
                let start = Instant::now();
                let answer = session.call_tool(name, arguments).await;
                latencies.push(start.elapsed());
                assert!(answer.get("error").is_none(), "{answer:#}");
            }
            latencies
        }));
    }
    let mut direct = Vec::new();
    for task in tasks {
        direct.extend(task.await.unwrap());
    }
    let direct_wall = started_direct.elapsed();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let quantiles = |latencies: &mut Vec<Duration>| {
        latencies.sort();
        let at = |q: f64| ms(latencies[((latencies.len() - 1) as f64 * q) as usize]);
        (at(0.5), at(0.9), at(1.0))
    };
    let (p50, p90, max) = quantiles(&mut latencies);
    let (d50, d90, dmax) = quantiles(&mut direct);
    eprintln!(
        "mcp-http load: {SESSIONS} sessions, {} calls, 0 errors, 0 foreign rows; p50 {p50:.1} ms, p90 {p90:.1} ms, \
         max {max:.1} ms, wall {:.2} s; baseline in process: p50 {d50:.1} ms, p90 {d90:.1} ms, max {dmax:.1} ms, wall {:.2} s",
        latencies.len(),
        wall.as_secs_f64(),
        direct_wall.as_secs_f64()
    );
}

/// `strata mcp --http 127.0.0.1:0` says where it listens, serves a client that names its
/// session in headers, and stops on SIGINT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_mcp_over_http_until_interrupted() {
    let strata = seeded(4);
    let Server { addr, token, mut child } = server(&strata, &[]).await;
    let blue =
        client(addr, &[(SESSION_HEADER, "blue-cli"), (PERSONA_HEADER, "blue")], Some(&token)).await.unwrap();
    let hits = answer(
        &blue
            .call_tool(call("memory_grep", json!({"query": "vault", "include_in_context": true})))
            .await
            .unwrap(),
    );
    let text = hits.to_string();
    assert!(text.contains("blue-vault") && !text.contains("red-vault"), "{hits:#}");
    blue.cancel().await.unwrap();
    // SIGINT, as Ctrl-C sends: the server stops and the process exits cleanly.
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{status}");
}

/// One raw HTTP/1.1 exchange: `head` (request line and headers, without the blank line), then
/// `body`; the status and the body of the answer. The connection is closed after it.
async fn exchange(addr: SocketAddr, head: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut answer)).await.unwrap().unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default();
    (status, body)
}

/// A POST to the MCP endpoint with the token and the headers MCP clients send.
fn post(addr: SocketAddr, token: &str, extra: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream{extra}"
    )
}

/// Issue 42 #2 and #13: on loopback without a token the server makes one for the run, in a file
/// only its user can read, and refuses every request without it; a foreign `Origin` or `Host`
/// (DNS rebinding) is refused even with it; 127.0.0.2, loopback too, is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_server_always_needs_a_token_and_checks_origin_and_host() {
    use std::os::unix::fs::PermissionsExt;
    let strata = seeded(2);
    let flags = ["--session", "desk", "--persona", "red"];
    let server = server(&strata, &flags).await;
    let (addr, token) = (server.addr, server.token.clone());
    assert_eq!(token.len(), 64, "{token}");
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .filter(|dir| dir.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let file = dir.join(format!("strata-mcp-{}.token", addr.port()));
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
    assert!(client(addr, &[], None).await.is_err(), "no token, no session");
    let red = client(addr, &[], Some(&token)).await.unwrap();
    let hits = answer(&red.call_tool(call("memory_grep", json!({"query": "zebra"}))).await.unwrap());
    assert!(hits["count"].as_u64().unwrap() >= 1, "{hits:#}");
    red.cancel().await.unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let (status, _) = exchange(addr, &post(addr, &token, ""), &initialize).await;
    assert_eq!(status, 200, "the same request, well-formed, is served");
    let (status, _) =
        exchange(addr, &post(addr, &token, "\r\nOrigin: http://evil.example"), &initialize).await;
    assert_eq!(status, 403, "a foreign origin");
    let rebound = post(addr, &token, "").replace(&format!("Host: {addr}"), "Host: evil.example");
    let (status, _) = exchange(addr, &rebound, &initialize).await;
    assert_eq!(status, 403, "a foreign host name (DNS rebinding)");
    let (status, _) = exchange(addr, &post(addr, "wrong", ""), &initialize).await;
    assert_eq!(status, 401);

    let other = server_on(&strata, "127.0.0.2:0", &flags).await;
    let red = client(other.addr, &[], Some(&other.token)).await.unwrap();
    let hits = answer(&red.call_tool(call("memory_grep", json!({"query": "zebra"}))).await.unwrap());
    assert!(hits["count"].as_u64().unwrap() >= 1, "127.0.0.2 is served: {hits:#}");
    red.cancel().await.unwrap();
}

/// Issue 42 #3 and #15: a body announced as 1 TB is refused at once, not awaited; idle
/// half-requests beyond the connection limit are closed and do not lock clients out for good;
/// malformed JSON-RPC gets JSON-RPC's codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_server_bounds_requests_and_answers_malformed_json_rpc_with_its_codes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let strata = seeded(2);
    let server = server(&strata, &["--session", "desk", "--persona", "red"]).await;
    let (addr, token) = (server.addr, server.token.clone());
    let huge = post(addr, &token, "").to_owned() + "\r\nContent-Length: 1099511627776\r\n\r\n{";
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(huge.as_bytes()).await.unwrap();
    let mut answer_bytes = vec![0u8; 64];
    let read =
        tokio::time::timeout(Duration::from_secs(60), stream.read(&mut answer_bytes)).await.unwrap().unwrap();
    let head = String::from_utf8_lossy(&answer_bytes[..read]).into_owned();
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");

    // 600 half-requests, more than the server serves at once: every one is closed by the
    // server (the limit or the header timeout), and then a client is served again.
    let mut idle = Vec::new();
    for _ in 0..600 {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
        idle.push(stream);
    }
    for mut stream in idle {
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(120), stream.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "a half-request was held open");
    }
    let red = client(addr, &[], Some(&token)).await.unwrap();
    red.cancel().await.unwrap();

    let rpc = |body: &str| {
        let body: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{body}"));
        body["error"]["code"].as_i64().unwrap()
    };
    let (status, body) = exchange(addr, &post(addr, &token, ""), "{not json").await;
    assert_eq!((status, rpc(&body)), (400, -32700), "{body}");
    let (status, body) = exchange(addr, &post(addr, &token, ""), r#"{"id": 1, "method": 5}"#).await;
    assert_eq!((status, rpc(&body)), (400, -32600), "{body}");
    let bad_params = r#"{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 5}}"#;
    let (_, body) = exchange(addr, &post(addr, &token, ""), bad_params).await;
    assert_eq!(rpc(&body), -32602, "{body}");
    assert!(body.contains("\"id\":7"), "{body}");
}
