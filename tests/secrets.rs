//! Secrets kept out of derived text, through `Engine`: keys pasted into a chat appear in no
//! summary, memory or recalled block, whoever writes them (the offline summarizer, an LLM that
//! repeats a key, the agent's `save_memory`), while the verbatim messages keep them.

use serde_json::{Value, json};
use strata::{ChatMessage, Engine, SummarizerKind};
use strata_seam::{NewMessage, Role};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::util::{Strata, folding};

const PERSONA: &str = "assistant";

/// One pasted secret of each common format, and a part of it no derived text may hold.
const PASTED: &[(&str, &str)] = &[
    ("sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD", "ijklmnopqrstuvwxyz0123"),
    ("sk-proj-Ab3dEf6hIj9kLmNoPqRsTuVwXyZ_0123-4567", "Ab3dEf6hIj9kLmNo"),
    ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCd", "AbCdEfGhIjKlMnOp"),
    ("AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "bPxRfiCYEXAMPLEKEY"),
    ("ASIAY34FZKBOKMUTVV7A", "Y34FZKBOKMUTVV7A"),
    ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "abcdefghijABCDEFGHIJ"),
    ("gho_16C7e42F292c6912E7710c838347Ae178B4a", "16C7e42F292c6912"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF", "11ABCDEFG0123456789"),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOp"),
    ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjt"),
    ("rk_live_51H8abcdefghijklmnopqrst", "51H8abcdefghijkl"),
    ("AIzaSyA-1234567890abcdefghijklmnopqrstu", "1234567890abcdefgh"),
    (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmN",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY----- MIIEpAIBAAKCAQEA7bq9x2YqZ8kq0p1Q== -----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA",
    ),
    ("password=hunter2-Secret!", "hunter2-Secret"),
    ("passwd: Tr0ub4dor&3", "Tr0ub4dor"),
    ("Authorization: Bearer abcDEF123456ghiJKL789", "abcDEF123456ghi"),
    ("postgres://admin:s3cr3t-pw@db.internal:5432/app", "s3cr3t-pw"),
];

/// Fails naming the secret `text` (from `what`) still holds.
fn assert_masked(what: &str, text: &str) {
    for (_, part) in PASTED {
        assert!(!text.contains(part), "{what} holds {part:?}: {text}");
    }
}

/// A session where the user pastes every secret, asking each time that it be remembered, then
/// small talk; the head (two messages) is never folded, so the secrets come after it.
fn paste_every_secret(session: &strata::EngineSession) {
    session.append(ChatMessage::user("Hello there.")).unwrap();
    session.append(ChatMessage::assistant("Hello! How can I help?")).unwrap();
    for (at, (secret, _)) in PASTED.iter().enumerate() {
        session
            .append(ChatMessage::user(format!(
                "Please remember that credential {at} is {secret} for deploys."
            )))
            .unwrap();
        session.append(ChatMessage::assistant("Noted.")).unwrap();
    }
    for turn in 0..6 {
        session.append(ChatMessage::user(format!("Turn {turn}: how is the garden project going?"))).unwrap();
        session.append(ChatMessage::assistant(format!("Turn {turn}: the tomatoes grow well."))).unwrap();
    }
}

/// Every summary, memory and proposal of the persona, and the recalled block for a request
/// about the credentials, hold no secret; the messages still do.
async fn assert_nothing_derived_holds_a_secret(engine: &Engine, session: &strata::EngineSession) {
    let nodes = engine.store().nodes(session.id()).unwrap();
    assert!(!nodes.is_empty(), "something was folded");
    for node in &nodes {
        assert_masked("a summary", &format!("{}\n{}", node.headline, node.body));
    }
    for memory in engine.store().memories(PERSONA, None).unwrap() {
        assert_masked("a memory", &format!("{} {}", memory.title, memory.content));
    }
    for proposal in engine.proposals(PERSONA).unwrap() {
        assert_masked("a proposal", &proposal.update.content);
    }
    let context = engine
        .preview(
            session.id(),
            Some(NewMessage::text(Role::User, "Which credential is for deploys? Remember credential 3?")),
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let request = context.messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    assert_masked("the request's injection", request["content"].as_str().unwrap());
    let stored: String = engine
        .store()
        .messages(session.id(), 0..=i64::MAX)
        .unwrap()
        .iter()
        .map(|message| message.content.clone())
        .collect();
    for (secret, _) in PASTED {
        assert!(stored.contains(secret), "the verbatim message keeps {secret:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_pasted_secret_reaches_an_offline_summary_a_memory_or_the_recalled_block() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), folding()).unwrap();
    let session = engine.session("keys", PERSONA).unwrap();
    paste_every_secret(&session);
    engine.compact_until_done(session.id(), 1, u32::MAX, |_| {}).await.unwrap();
    let memos = engine.store().memories(PERSONA, None).unwrap();
    assert!(memos.iter().any(|memory| memory.content.contains("[masked secret]")), "{memos:?}");
    // The agent saving a key through its tool gets it masked too.
    let saved = session
        .call_tool(
            "save_memory",
            json!({"category": "memo", "key": "deploy_token", "title": "Deploy token",
                   "content": format!("Deploys use {}", PASTED[0].0)}),
        )
        .await;
    assert_eq!(saved["saved"], true, "{saved}");
    // Tool answers fence stored text.
    assert!(
        saved["memory"]["content"].as_str().unwrap().contains("\nDeploys use [masked secret]\n"),
        "{saved}"
    );
    assert_nothing_derived_holds_a_secret(&engine, &session).await;
}

/// A summary that repeats a key, as a model might.
fn repeating_reply() -> ResponseTemplate {
    let leaked = PASTED.iter().map(|(secret, _)| *secret).collect::<Vec<_>>().join(" and ");
    let arguments = json!({
        "headline": format!("The user shared {}.", PASTED[0].0),
        "body": format!("Credentials: {leaked}"),
        "memory_updates": [
            {"category": "memo", "key": "deploy_credentials", "title": "Deploy credentials",
             "content": format!("Deploys use {} and {}", PASTED[1].0, PASTED[16].0)}
        ]
    });
    ResponseTemplate::new(200).set_body_json(json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "save_summary", "arguments": arguments.to_string()}}]}}]}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_summarizer_is_never_sent_a_secret_and_what_it_repeats_is_masked() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(repeating_reply())
        .mount(&server)
        .await;
    let strata = Strata::new();
    let mut config = folding();
    config.summarizer.kind = SummarizerKind::Openai;
    config.summarizer.base_url = server.uri();
    // The near-copy gate would refuse a summary this short of its own words; it is not the
    // subject here.
    config.compactor.near_copy_max_share = 1.0;
    let engine = Engine::open(strata.db(), config).unwrap();
    let session = engine.session("keys", PERSONA).unwrap();
    paste_every_secret(&session);
    engine.compact_until_done(session.id(), 1, u32::MAX, |_| {}).await.unwrap();
    let requests = server.received_requests().await.unwrap();
    assert!(!requests.is_empty(), "the summarizer was called");
    for request in &requests {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_masked("a request to the summarizer", &body.to_string());
    }
    let memos = engine.store().memories(PERSONA, None).unwrap();
    assert!(memos.iter().any(|memory| memory.key == "deploy_credentials"), "{memos:?}");
    assert_nothing_derived_holds_a_secret(&engine, &session).await;
}
