//! `strata serve` end to end: the real binary on a free loopback port, driven by a real HTTP
//! client (reqwest), on SQLite and on PostgreSQL; two personas with a token each and a
//! read-only token; a fleet of servers behind one PostgreSQL database; a graceful shutdown.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::postgres::common;
use crate::util::Strata;

/// The tokens of a token file: one per persona, and a read-only one for alice.
#[derive(Clone, Debug)]
struct Keys {
    alice: String,
    bob: String,
    reader: String,
}

/// Writes a token file with `strata token new` and returns it with the tokens.
fn token_file(strata: &Strata) -> (PathBuf, Keys) {
    let mut text = String::new();
    let mut new = |name: &str, persona: &str, read_only: bool| {
        let mut args = vec!["--json", "token", "new", "--name", name, "--persona", persona];
        if read_only {
            args.push("--read-only");
        }
        let made = strata.run(&args).json();
        let toml = made["toml"].as_str().unwrap();
        let token = made["token"].as_str().unwrap().to_owned();
        assert!(!toml.contains(&token), "the entry holds the token itself: {toml}");
        text.push_str(toml);
        token
    };
    let keys = Keys {
        alice: new("alice-bot", "alice", false),
        bob: new("bob-bot", "bob", false),
        reader: new("alice-reader", "alice", true),
    };
    (strata.file("tokens.toml", &text), keys)
}

/// A running `strata serve`; killed when dropped.
struct Server {
    addr: SocketAddr,
    child: tokio::process::Child,
    /// What it printed after its address, line by line.
    log: tokio::sync::mpsc::UnboundedReceiver<String>,
}

async fn serve(strata: &Strata, db: &Path, tokens: &Path, flags: &[&str]) -> Server {
    use tokio::io::AsyncBufReadExt;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_strata"));
    command
        .arg("--db")
        .arg(db)
        .env_remove("STRATA_DB")
        .env("STRATA_LOG", "error")
        .current_dir(strata.dir())
        .args(["serve", "--listen", "127.0.0.1:0", "--no-embed", "--tokens"])
        .arg(tokens)
        .args(flags)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let line =
        tokio::time::timeout(Duration::from_secs(60), stderr.next_line()).await.unwrap().unwrap().unwrap();
    let url =
        line.split_whitespace().find(|word| word.starts_with("http://")).unwrap_or_else(|| panic!("{line}"));
    let addr: SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let (sender, log) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            let _ = sender.send(line);
        }
    });
    Server { addr, child, log }
}

/// One request; the status and the body (JSON when it is JSON, else a string).
async fn call(
    client: &reqwest::Client,
    addr: SocketAddr,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = client.request(method, format!("http://{addr}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A bot's whole loop over REST, and the endpoints around it, on the database `db`.
async fn a_bot_over_rest(strata: &Strata, db: &Path) {
    let (tokens, keys) = token_file(strata);
    let server = serve(strata, db, &tokens, &["--max-body-bytes", "65536"]).await;
    let (client, addr) = (reqwest::Client::new(), server.addr);
    let alice = Some(keys.alice.as_str());
    let base = "/v1/personas/alice/sessions/chat%201";

    let (status, ready) = call(&client, addr, Method::GET, "/readyz", None, None).await;
    assert_eq!(status, StatusCode::OK, "{ready}");
    let (status, _) = call(&client, addr, Method::GET, "/healthz", None, None).await;
    assert_eq!(status, StatusCode::OK);
    // Every answer names the version of its JSON's shapes, as the OpenAPI document does.
    let health = client.get(format!("http://{addr}/healthz")).send().await.unwrap();
    assert_eq!(health.headers()["strata-wire-version"], strata::WIRE_VERSION.to_string().as_str());
    let (_, document) = call(&client, addr, Method::GET, "/openapi.json", None, None).await;
    assert_eq!(document["info"]["x-wire-version"], strata::WIRE_VERSION);

    let one = json!({"message": {"role": "system", "content": "You are alice's assistant."}});
    let (status, stored) =
        call(&client, addr, Method::POST, &format!("{base}/messages"), alice, Some(one)).await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    assert_eq!(stored["ids"].as_array().unwrap().len(), 1);
    let batch = json!({"messages": [
        {"role": "user", "content": "The staging database listens on port 6432.", "key": "m-1"},
        {"role": "assistant", "content": "Noted: staging is on 6432.", "key": "m-2"},
        {"role": "user", "content": "Which port was staging on?", "key": "m-3"},
    ]});
    let (status, stored) =
        call(&client, addr, Method::POST, &format!("{base}/messages"), alice, Some(batch.clone())).await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    // A retried batch (the same keys) stores nothing again and answers the same ids.
    let (_, again) = call(&client, addr, Method::POST, &format!("{base}/messages"), alice, Some(batch)).await;
    assert_eq!(again, stored);

    let (status, context) = call(&client, addr, Method::POST, &format!("{base}/context"), alice, None).await;
    assert_eq!(status, StatusCode::OK, "{context}");
    let text = context["messages"].to_string();
    assert!(text.contains("6432") && text.contains("Which port"), "{context:#}");
    assert!(context["tokens"]["total"].as_u64().unwrap() <= context["tokens"]["budget"].as_u64().unwrap());
    let (_, rendered) = call(
        &client,
        addr,
        Method::POST,
        &format!("{base}/context"),
        alice,
        Some(json!({"format": "anthropic"})),
    )
    .await;
    assert!(rendered["rendered"]["system"].to_string().contains("alice's assistant"), "{rendered:#}");

    let (status, hits) = call(
        &client,
        addr,
        Method::POST,
        &format!("{base}/tools/memory_grep"),
        alice,
        Some(json!({"query": "staging port", "include_in_context": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(hits["count"].as_u64().unwrap() >= 1, "{hits:#}");
    let (_, saved) = call(
        &client,
        addr,
        Method::POST,
        &format!("{base}/tools/save_memory"),
        alice,
        Some(json!({"category": "memo", "key": "staging-port", "title": "Staging port", "content": "Staging listens on 6432."})),
    )
    .await;
    assert!(saved.get("error").is_none(), "{saved:#}");
    let (_, memories) =
        call(&client, addr, Method::GET, "/v1/personas/alice/memories?category=memo", alice, None).await;
    assert!(memories.to_string().contains("staging_port"), "{memories:#}");

    let (_, sessions) = call(&client, addr, Method::GET, "/v1/personas/alice/sessions", alice, None).await;
    assert_eq!(sessions[0]["key"], "chat 1");
    assert_eq!(sessions[0]["messages"], 4);
    let (_, stats) = call(&client, addr, Method::GET, "/v1/personas/alice/stats", alice, None).await;
    assert_eq!((stats["sessions"].as_u64(), stats["messages"].as_u64()), (Some(1), Some(4)), "{stats}");
    let (status, lines) = call(&client, addr, Method::GET, &format!("{base}/export"), alice, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lines.as_str().unwrap().lines().count(), 4, "{lines}");
    let (_, tools) = call(&client, addr, Method::GET, "/v1/tools?format=anthropic", alice, None).await;
    assert!(tools.as_array().unwrap().iter().any(|tool| tool["name"] == "memory_grep"), "{tools}");

    // Bad input: one clear JSON error with the library's kind, and nothing stored.
    let bad = json!({"messages": [{"role": "user", "content": "fine"}, {"role": "wizard", "content": "x"}]});
    let (status, error) =
        call(&client, addr, Method::POST, &format!("{base}/messages"), alice, Some(bad)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["error"]["kind"], "invalid_input");
    assert!(error["error"]["message"].as_str().unwrap().contains("message 1"), "{error}");
    let big = json!({"message": {"role": "user", "content": "x".repeat(70_000)}});
    let (status, error) =
        call(&client, addr, Method::POST, &format!("{base}/messages"), alice, Some(big)).await;
    assert_eq!((status, error["error"]["kind"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("too_large")));
    let (status, error) =
        call(&client, addr, Method::GET, "/v1/personas/alice/sessions/nope", alice, None).await;
    assert_eq!((status, error["error"]["kind"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
    let (_, sessions) = call(&client, addr, Method::GET, "/v1/personas/alice/sessions", alice, None).await;
    assert_eq!(sessions[0]["messages"], 4, "a refused request stored nothing");

    let (status, metrics) = call(&client, addr, Method::GET, "/metrics", alice, None).await;
    assert_eq!(status, StatusCode::OK);
    let metrics = metrics.as_str().unwrap();
    assert!(
        metrics.contains(
            "strata_http_requests_total{route=\"/v1/personas/{persona}/sessions/{session}/messages\",method=\"POST\",status=\"200\"} 3"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("strata_tool_calls_total"), "the engine's counters: {metrics}");

    // Forgetting the session leaves nothing of it.
    let (status, forgotten) = call(&client, addr, Method::DELETE, base, alice, None).await;
    assert_eq!(status, StatusCode::OK, "{forgotten}");
    assert_eq!(forgotten["messages"], 4);
    let (_, sessions) = call(&client, addr, Method::GET, "/v1/personas/alice/sessions", alice, None).await;
    assert_eq!(sessions, json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_appends_prepares_and_calls_tools_over_rest_on_sqlite() {
    let strata = Strata::new();
    a_bot_over_rest(&strata, strata.db()).await;
}

// The scratch database is made and dropped by a synchronous client, outside the runtime.
#[test]
fn a_bot_appends_prepares_and_calls_tools_over_rest_on_postgresql() {
    let strata = Strata::new();
    let (url, _database) = common::scratch_database();
    runtime().block_on(a_bot_over_rest(&strata, Path::new(&url)));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Every route of the OpenAPI document that names a persona, with the persona filled in.
fn persona_routes(document: &Value, persona: &str) -> Vec<(Method, String)> {
    let mut routes = Vec::new();
    for (path, operations) in document["paths"].as_object().unwrap() {
        if !path.contains("{persona}") {
            continue;
        }
        let path = path
            .replace("{persona}", persona)
            .replace("{session}", "shared-key")
            .replace("{tool}", "memory_grep")
            .replace("{key}", "some-preference");
        for method in operations.as_object().unwrap().keys() {
            routes.push((method.to_uppercase().parse().unwrap(), path.clone()));
        }
    }
    routes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_for_one_persona_is_refused_every_route_of_the_other() {
    let strata = Strata::new();
    let (tokens, keys) = token_file(&strata);
    let server = serve(&strata, strata.db(), &tokens, &[]).await;
    let (client, addr) = (reqwest::Client::new(), server.addr);
    // Bob has a session, memories and a message alice must not reach.
    let (status, _) = call(
        &client,
        addr,
        Method::POST,
        "/v1/personas/bob/sessions/shared-key/messages",
        Some(&keys.bob),
        Some(json!({"message": {"role": "user", "content": "bob's secret is 4471"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, document) = call(&client, addr, Method::GET, "/openapi.json", None, None).await;
    let routes = persona_routes(&document, "bob");
    assert!(routes.len() >= 14, "{routes:?}");
    let body = Some(json!({}));
    for (method, path) in &routes {
        let (status, error) =
            call(&client, addr, method.clone(), path, Some(&keys.alice), body.clone()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {error}");
        assert_eq!(error["error"]["kind"], "forbidden", "{method} {path}");
        assert!(!error.to_string().contains("4471"));
        let (status, error) = call(&client, addr, method.clone(), path, None, body.clone()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}: {error}");
        assert_eq!(error["error"]["kind"], "unauthorized");
        let (status, _) = call(&client, addr, method.clone(), path, Some("not-a-token"), body.clone()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
    }
    // The read-only token reads alice's routes and is refused every write.
    for (method, path) in persona_routes(&document, "alice") {
        let writes = method == Method::DELETE
            || path.ends_with("/messages")
            || path.ends_with("/accept")
            || path.ends_with("/reject");
        let (status, answer) =
            call(&client, addr, method.clone(), &path, Some(&keys.reader), body.clone()).await;
        if writes {
            assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}");
        } else {
            assert_ne!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}");
        }
    }
    let (status, _) = call(
        &client,
        addr,
        Method::POST,
        "/v1/personas/alice/sessions/s/tools/save_memory",
        Some(&keys.reader),
        Some(json!({"category": "memo", "key": "k", "title": "t", "content": "c"})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a read-only token calls no writing tool");
    // MCP: a session of bob's named with alice's token is refused before MCP sees it.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let refused = client
        .post(format!("http://{addr}/mcp"))
        .bearer_auth(&keys.alice)
        .header("strata-persona", "bob")
        .header("strata-session", "shared-key")
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let unauthorized = client.post(format!("http://{addr}/mcp")).json(&initialize).send().await.unwrap();
    assert_eq!(unauthorized.status(), StatusCode::UNAUTHORIZED);
    // Nothing of bob's changed, and alice's token found no trace of him.
    let (_, sessions) =
        call(&client, addr, Method::GET, "/v1/personas/bob/sessions", Some(&keys.bob), None).await;
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(sessions[0]["messages"], 1, "{sessions}");
}

/// Several `strata serve` processes behind one PostgreSQL database, clients appending to and
/// preparing the same sessions at once through different servers: every message stored once.
#[test]
fn a_fleet_of_servers_on_one_database_loses_and_duplicates_nothing() {
    let strata = Strata::new();
    let (url, _database) = common::scratch_database();
    runtime().block_on(a_fleet(&strata, Path::new(&url)));
}

async fn a_fleet(strata: &Strata, db: &Path) {
    let (tokens, keys) = token_file(strata);
    // The schema is made once, before the servers race to open it.
    strata.run_on(db, &["init"]).success();
    let servers = [serve(strata, db, &tokens, &[]).await, serve(strata, db, &tokens, &[]).await];
    let addrs: Vec<SocketAddr> = servers.iter().map(|server| server.addr).collect();
    let (sessions, per_client, clients) = (6, 10, 4);
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..clients {
        let (addrs, keys) = (addrs.clone(), keys.clone());
        tasks.spawn(async move {
            let client = reqwest::Client::new();
            for i in 0..per_client {
                let (persona, token) = if (worker + i) % 2 == 0 { ("alice", &keys.alice) } else { ("bob", &keys.bob) };
                let session = format!("{persona}-{}", (worker * per_client + i) % sessions);
                let addr = addrs[(worker + i) % addrs.len()];
                let message = json!({"message": {"role": "user", "content": format!("w{worker} m{i}"), "key": format!("w{worker}-m{i}")}});
                let path = format!("/v1/personas/{persona}/sessions/{session}/messages");
                let (status, stored) = call(&client, addr, Method::POST, &path, Some(token), Some(message.clone())).await;
                assert_eq!(status, StatusCode::OK, "{stored}");
                // A retry through the other server stores nothing new.
                let other = addrs[(worker + i + 1) % addrs.len()];
                let (_, again) = call(&client, other, Method::POST, &path, Some(token), Some(message)).await;
                assert_eq!(again, stored);
                let path = format!("/v1/personas/{persona}/sessions/{session}/context");
                let (status, context) = call(&client, addr, Method::POST, &path, Some(token), None).await;
                assert_eq!(status, StatusCode::OK, "{context}");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let client = reqwest::Client::new();
    let mut keys_seen = BTreeSet::new();
    let mut total = 0;
    for (persona, token) in [("alice", &keys.alice), ("bob", &keys.bob)] {
        let (_, lines) = call(
            &client,
            addrs[0],
            Method::GET,
            &format!("/v1/personas/{persona}/export"),
            Some(token),
            None,
        )
        .await;
        for line in lines.as_str().unwrap().lines() {
            let line: Value = serde_json::from_str(line).unwrap();
            let content = line["content"].as_str().unwrap_or_else(|| panic!("{line}")).to_owned();
            assert!(keys_seen.insert(content), "stored twice: {line}");
            total += 1;
        }
    }
    assert_eq!(total, clients * per_client, "every message stored once");
}

/// SIGTERM while requests are in flight: each acknowledged append is stored, and the server
/// exits cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_requests_in_flight_and_exits_cleanly() {
    let strata = Strata::new();
    let (tokens, keys) = token_file(&strata);
    let mut server = serve(&strata, strata.db(), &tokens, &[]).await;
    let addr = server.addr;
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let token = keys.alice.clone();
        tasks.spawn(async move {
            let client = reqwest::Client::new();
            let mut acknowledged = Vec::new();
            for i in 0..200 {
                let message = json!({"message": {"role": "user", "content": format!("w{worker} m{i}")}});
                let sent = client
                    .post(format!("http://{addr}/v1/personas/alice/sessions/s{worker}/messages"))
                    .bearer_auth(&token)
                    .json(&message)
                    .send()
                    .await;
                match sent {
                    Ok(response) if response.status() == StatusCode::OK => {
                        acknowledged.push(format!("w{worker} m{i}"))
                    }
                    // Refused or cut after the server stopped accepting: not acknowledged.
                    _ => break,
                }
            }
            acknowledged
        });
    }
    // Some appends are stored before the signal (polling the server's own count, no sleep).
    let client = reqwest::Client::new();
    loop {
        let (_, stats) =
            call(&client, addr, Method::GET, "/v1/personas/alice/stats", Some(&keys.alice), None).await;
        if stats["messages"].as_u64().unwrap_or(0) >= 20 {
            break;
        }
    }
    let pid = server.child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let exit = tokio::time::timeout(Duration::from_secs(60), server.child.wait()).await.unwrap().unwrap();
    assert!(exit.success(), "{exit:?}");
    let mut acknowledged = BTreeSet::new();
    while let Some(done) = tasks.join_next().await {
        acknowledged.extend(done.unwrap());
    }
    let exported = strata.run(&["export", "--format", "jsonl", "--persona", "alice", "--out", "-"]).success();
    let stored: BTreeSet<String> = exported
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(acknowledged.len() >= 20);
    let lost: Vec<_> = acknowledged.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
}

/// The MCP endpoint of `strata serve` is `strata mcp --http`'s: an MCP client with alice's
/// token reaches alice's history, and a read-only token's writing tool is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_at_slash_mcp_runs_as_the_tokens_persona() {
    use crate::mcp_http::{answer, call as tool, client as mcp_client};
    let strata = Strata::new();
    let (tokens, keys) = token_file(&strata);
    let server = serve(&strata, strata.db(), &tokens, &[]).await;
    let http = reqwest::Client::new();
    let message = json!({"message": {"role": "user", "content": "the zebra file is in alice-vault"}});
    let path = "/v1/personas/alice/sessions/desk/messages";
    let (status, _) = call(&http, server.addr, Method::POST, path, Some(&keys.alice), Some(message)).await;
    assert_eq!(status, StatusCode::OK);
    let headers = [("strata-session", "desk"), ("strata-persona", "alice")];
    let alice = mcp_client(server.addr, &headers, Some(&keys.alice)).await.unwrap();
    let hits = answer(
        &alice
            .call_tool(tool("memory_grep", json!({"query": "zebra", "include_in_context": true})))
            .await
            .unwrap(),
    );
    assert!(hits.to_string().contains("alice-vault"), "{hits:#}");
    let reader = mcp_client(server.addr, &headers, Some(&keys.reader)).await.unwrap();
    let refused = reader
        .call_tool(tool("save_memory", json!({"category": "memo", "key": "k", "title": "t", "content": "c"})))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    // Bob's token cannot even open an MCP session as alice.
    assert!(mcp_client(server.addr, &headers, Some(&keys.bob)).await.is_err());
}

/// SIGHUP reads the token file again: a token added to it is accepted and one taken out is
/// refused from then on, without a restart; a file that does not validate changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_token_file_and_a_broken_one_changes_nothing() {
    let strata = Strata::new();
    let (tokens, keys) = token_file(&strata);
    let full = std::fs::read_to_string(&tokens).unwrap();
    // Start with alice's token only: the first entry of the file.
    let alice_only = full.split("[[token]]").filter(|entry| entry.contains("alice-bot")).collect::<String>();
    std::fs::write(&tokens, format!("[[token]]{alice_only}")).unwrap();
    let mut server = serve(&strata, strata.db(), &tokens, &[]).await;
    let (addr, client) = (server.addr, reqwest::Client::new());
    let stats = |token: String| {
        let client = client.clone();
        async move { call(&client, addr, Method::GET, "/v1/personas/bob/stats", Some(&token), None).await.0 }
    };
    assert_eq!(stats(keys.bob.clone()).await, StatusCode::UNAUTHORIZED);
    let pid = server.child.id().unwrap().to_string();
    // Sends SIGHUP and waits for the server to say what it did with the file.
    let mut reload = async |contents: &str| -> String {
        std::fs::write(&tokens, contents).unwrap();
        assert!(std::process::Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
        loop {
            let line =
                tokio::time::timeout(Duration::from_secs(30), server.log.recv()).await.unwrap().unwrap();
            if line.contains("reloaded") || line.contains("kept") {
                return line;
            }
        }
    };

    // Bob's token added: accepted from the reload on.
    let said = reload(&full).await;
    assert!(said.contains("reloaded") && said.contains("3 tokens"), "{said}");
    assert_eq!(stats(keys.bob.clone()).await, StatusCode::OK);
    // A broken file: the tokens in force stay, and the server says why.
    let said = reload("[[token]]\nname = \"x\"\n").await;
    assert!(said.contains("kept the 3 tokens"), "{said}");
    assert_eq!(stats(keys.bob.clone()).await, StatusCode::OK, "a broken file changes nothing");
    // Bob's token taken out: refused from the reload on; the others stay.
    let without_bob: Vec<&str> = full.split("[[token]]").filter(|entry| !entry.contains("bob-bot")).collect();
    reload(&without_bob.join("[[token]]")).await;
    assert_eq!(stats(keys.bob.clone()).await, StatusCode::UNAUTHORIZED);
    let (status, _) =
        call(&client, addr, Method::GET, "/v1/personas/alice/stats", Some(&keys.reader), None).await;
    assert_eq!(status, StatusCode::OK, "the other tokens stay");
    server.child.kill().await.unwrap();
}
