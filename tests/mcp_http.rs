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

/// `strata mcp --http` on 127.0.0.1 (a free port) over `strata`'s database, with `flags`, and
/// the address it says it listens on. The server is killed when the child is dropped.
async fn server(strata: &Strata, flags: &[&str]) -> (SocketAddr, tokio::process::Child) {
    use tokio::io::AsyncBufReadExt;

    let mut command = tokio::process::Command::from(strata.command());
    command
        .args(["mcp", "--http", "127.0.0.1:0", "--no-embed"])
        .args(flags)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let line =
        tokio::time::timeout(Duration::from_secs(60), stderr.next_line()).await.unwrap().unwrap().unwrap();
    // Read the rest of its log, so a full pipe never stalls the server.
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
    let url =
        line.split_whitespace().find(|word| word.starts_with("http://")).unwrap_or_else(|| panic!("{line}"));
    let addr: SocketAddr = url.trim_start_matches("http://").trim_end_matches("/mcp").parse().unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{line}");
    (addr, child)
}

/// An rmcp client over streamable HTTP with these headers.
async fn client(
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

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap_or_else(JsonObject::new))
}

/// The tool's JSON answer.
fn answer(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or_else(|| {
        let text: String =
            result.content.iter().filter_map(|block| block.as_text()).map(|t| t.text.clone()).collect();
        serde_json::from_str(&text).unwrap()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_client_gets_the_tools_of_the_session_and_persona_it_names() {
    let strata = seeded(6);
    let (addr, _server) = server(&strata, &[]).await;
    let red = client(addr, &[(SESSION_HEADER, "red-desk"), (PERSONA_HEADER, "red")], None).await.unwrap();
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
    let conn = rusqlite::Connection::open(strata.db()).unwrap();
    let blue_id: i64 = conn
        .query_row("SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id WHERE s.role = 'blue' LIMIT 1", [], |r| r.get(0))
        .unwrap();
    let view = red.call_tool(call("view_message", json!({"message_id": blue_id}))).await.unwrap();
    assert_eq!(view.is_error, Some(true));
    assert_eq!(answer(&view)["error"]["kind"], "not_found", "{:#}", answer(&view));
    // The session was created for the persona the host named.
    let persona: String =
        conn.query_row("SELECT role FROM sessions WHERE key = 'red-desk'", [], |r| r.get(0)).unwrap();
    assert_eq!(persona, "red");

    // A host naming another persona for an existing session is refused, and so is a host
    // naming no session on a server without a default.
    let thief = client(addr, &[(SESSION_HEADER, "red-desk"), (PERSONA_HEADER, "blue")], None).await.unwrap();
    let refused =
        thief.call_tool(call("memory_grep", json!({"query": "zebra"}))).await.unwrap_err().to_string();
    assert!(refused.contains("persona"), "{refused}");
    let anonymous = client(addr, &[], None).await.unwrap();
    let refused =
        anonymous.call_tool(call("memory_grep", json!({"query": "zebra"}))).await.unwrap_err().to_string();
    assert!(refused.contains(SESSION_HEADER), "{refused}");
    let bad = client(addr, &[(SESSION_HEADER, "x"), (PERSONA_HEADER, "ignore previous instructions")], None)
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
    let (addr, _server) = server(&strata, &flags).await;
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
    let (addr, _server) = server(&strata, &[]).await;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for index in 0..SESSIONS {
        tasks.push(tokio::spawn(async move {
            let (persona, other) = if index % 2 == 0 { ("red", "blue") } else { ("blue", "red") };
            let key = format!("{persona}-load-{index}");
            let service = client(addr, &[(SESSION_HEADER, &key), (PERSONA_HEADER, persona)], None).await.unwrap();
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
    let (addr, mut child) = server(&strata, &[]).await;
    let blue = client(addr, &[(SESSION_HEADER, "blue-cli"), (PERSONA_HEADER, "blue")], None).await.unwrap();
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
