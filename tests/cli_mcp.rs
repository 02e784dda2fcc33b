//! `strata mcp`: the real binary, spoken to over stdio by rmcp's client and by hand.

use std::io::{BufRead, Write};
use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::ServiceError;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::util::Strata;

/// A database where persona `coder` has a short history with a planted fact, and persona
/// `other` a secret the server must never show to `coder`.
fn seeded() -> Strata {
    let strata = Strata::new();
    let lines = [
        ("user", "Where do the deploy scripts live?", "week-1", "coder"),
        (
            "assistant",
            "They live in ops/deploy/zebra-rollout.sh, next to the canary config.",
            "week-1",
            "coder",
        ),
        ("user", "The zebra launch code is 0000.", "private", "other"),
    ];
    let text: String = lines
        .iter()
        .map(|(role, content, session, persona)| {
            format!("{}\n", json!({"role": role, "content": content, "session": session, "persona": persona}))
        })
        .collect();
    let file = strata.file("history.jsonl", &text);
    strata.run(&["ingest", file.to_str().unwrap()]).success();
    strata
}

fn arguments(value: Value) -> JsonObject {
    value.as_object().cloned().unwrap()
}

fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|block| block.as_text()).map(|t| t.text.clone()).collect()
}

/// The tool's JSON answer, from the structured content or else the text.
fn answer(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or_else(|| serde_json::from_str(&text(result)).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_lists_and_calls_the_tools() {
    let strata = seeded();
    let mut command = tokio::process::Command::from(strata.command());
    command.args(["mcp", "--session", "desktop", "--persona", "coder"]).env("STRATA_LOG", "info");
    let (transport, stderr) = TokioChildProcess::builder(command).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = stderr.unwrap();
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        stderr.read_to_string(&mut text).await.map(|_| text)
    });
    let client = ().serve(transport).await.expect("the MCP handshake succeeds");

    let info = client.peer_info().expect("the server introduced itself");
    assert_eq!(info.server_info.as_ref().map(|s| s.name.as_str()), Some("strata"));
    let mut names: Vec<String> =
        client.list_all_tools().await.unwrap().into_iter().map(|t| t.name.into_owned()).collect();
    names.sort();
    // Every tool recall has, whatever it has.
    let mut expected = strata_recall::tool_names();
    expected.sort_unstable();
    assert_eq!(names, expected);

    // memory_grep finds the planted text, and only in coder's data.
    let grep = client
        .call_tool(
            CallToolRequestParams::new("memory_grep").with_arguments(arguments(json!({"query": "zebra"}))),
        )
        .await
        .unwrap();
    assert_eq!(grep.is_error, Some(false), "{grep:?}");
    let found = answer(&grep);
    let hits = found["results"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{found}");
    assert!(hits[0]["snippet"].as_str().unwrap().contains("rollout.sh"), "{found}");
    assert!(!found.to_string().contains("launch code"), "persona other leaked: {found}");

    // view_message opens that hit.
    let id = hits[0]["id"].as_i64().unwrap();
    let view = client
        .call_tool(
            CallToolRequestParams::new("view_message").with_arguments(arguments(json!({"message_id": id}))),
        )
        .await
        .unwrap();
    assert_eq!(view.is_error, Some(false), "{view:?}");
    let viewed = text(&view);
    assert!(viewed.contains("ops/deploy/zebra-rollout.sh"), "{viewed}");
    assert!(viewed.contains("week-1"), "{viewed}");

    // Bad arguments are a tool error the model can read, not a protocol error or a crash.
    let bad = client
        .call_tool(
            CallToolRequestParams::new("view_message")
                .with_arguments(arguments(json!({"message_id": "abc"}))),
        )
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true), "{bad:?}");
    assert_eq!(answer(&bad)["error"]["tool"], "view_message", "{bad:?}");
    let missing = client
        .call_tool(
            CallToolRequestParams::new("view_message")
                .with_arguments(arguments(json!({"message_id": 999_999}))),
        )
        .await
        .unwrap();
    assert_eq!(missing.is_error, Some(true), "{missing:?}");

    // A tool that does not exist is a protocol error (as the specification says)...
    let unknown = client.call_tool(CallToolRequestParams::new("rm_rf")).await.unwrap_err();
    let ServiceError::McpError(error) = unknown else { panic!("{unknown:?}") };
    assert!(error.message.contains("memory_grep"), "{error:?}");

    // ...and the server keeps answering after all of them.
    let again = client
        .call_tool(
            CallToolRequestParams::new("memory_grep").with_arguments(arguments(json!({"query": "canary"}))),
        )
        .await
        .unwrap();
    assert_eq!(answer(&again)["count"], 1, "{again:?}");

    client.cancel().await.unwrap();
    let stderr = stderr.await.unwrap().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("serving MCP on stdio"), "logs go to stderr: {stderr}");
}

/// stdout is the protocol: with logging turned up, every line the server writes is still a
/// JSON-RPC message, and the server exits cleanly when its input ends.
#[test]
fn stdout_carries_only_the_protocol() {
    let strata = seeded();
    let mut child = strata
        .command()
        .args(["mcp", "--session", "desktop", "--persona", "coder", "--no-embed"])
        .env("STRATA_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "by-hand", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "memory_grep", "arguments": {"query": "\"unterminated AND (*"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "expand_summary", "arguments": {}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut responses = Vec::new();
    for request in &requests {
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        if request.get("id").is_some() {
            // Wait for this answer before sending more, as a client would.
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            let response: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"));
            responses.push(response);
        }
    }
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(rest.trim().is_empty(), "stray output: {rest}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    assert_eq!(responses[0]["id"], 1);
    assert_eq!(responses[0]["result"]["serverInfo"]["name"], "strata", "{}", responses[0]);
    // Hostile query syntax is just text to search for: a result, not an error.
    assert_eq!(responses[1]["id"], 2);
    assert_eq!(responses[1]["result"]["isError"], false, "{}", responses[1]);
    // A missing required argument is a tool error.
    assert_eq!(responses[2]["id"], 3);
    assert_eq!(responses[2]["result"]["isError"], true, "{}", responses[2]);
}

/// Frames that are not JSON-RPC get their JSON-RPC error at once, and the server keeps
/// serving: a client never waits forever on a frame that did not parse.
#[test]
fn malformed_frames_are_answered_and_the_server_keeps_serving() {
    let strata = seeded();
    let mut child = strata
        .command()
        .args(["mcp", "--session", "desktop", "--persona", "coder", "--no-embed"])
        .env("STRATA_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut exchange = |frame: &[u8]| -> Value {
        stdin.write_all(frame).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"))
    };
    let hello = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}});
    assert_eq!(exchange(hello.to_string().as_bytes())["id"], 1);
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let hostile: [(&[u8], i64); 7] = [
        (b"{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"ping\", \"x\": \"\xff\xfe\"}", -32700),
        (br#"{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"q": "\ud800"}}"#, -32700),
        (br#"[{"jsonrpc": "2.0", "id": 4, "method": "ping"}]"#, -32600),
        (deep.as_bytes(), -32700),
        (br#"{"jsonrpc": "2.0", "id": 5, "method": "tools/list""#, -32700),
        (br#"{"jsonrpc": "1.0", "id": 6, "method": "ping"}"#, -32600),
        (br#"{"jsonrpc": "2.0", "id": 7, "method": 42}"#, -32600),
    ];
    for (frame, code) in hostile {
        let answer = exchange(frame);
        assert_eq!(answer["error"]["code"], code, "{} -> {answer}", String::from_utf8_lossy(frame));
    }
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let grep = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "memory_grep", "arguments": {"query": "canary"}}});
    let answer = exchange(format!("{initialized}\n{grep}").as_bytes());
    assert_eq!(answer["id"], 8, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "still serving after the bad frames: {answer}");
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("refused an MCP frame"), "refusals are logged: {stderr}");
}
