//! The engine's texts point the model to recall's tools by recall's names: the user's
//! guidelines of DESIGN.md §3 step 6 come out byte for byte, and the scaffold's sentences name
//! the tools the engine offers.

use strata::{ChatMessage, Config, Engine};
use strata_recall::Tool;

/// The bootstrap injection of DESIGN.md §3 step 6, for persona `coder` and no preferences.
const GUIDELINES: &str = "[Background Context: Sync Guidelines]
======
# Passive Synchronization Guidelines:
- 💡 You are playing the active persona role: coder.
- 💡 You have access to the `view_chat_history_summary` tool, which retrieves a consolidated chat history summary and chronological timeline of recent events across active threads/channels.
- 💡 If the user's current request below refers to external threads, other chats, or events you cannot locate in this session's history, you MUST call `view_chat_history_summary` to read the global context and synchronize before providing a response.
======

[Current Request]
Where were we?";

#[tokio::test]
async fn the_engine_injects_the_users_guidelines_byte_for_byte_with_recalls_tool_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.recall.proactive = false;
    let engine = Engine::open(dir.path().join("strata.db"), config).unwrap();
    let session = engine.session("chat-1", "coder").unwrap();
    session.append(ChatMessage::user("Where were we?")).unwrap();
    let prepared = session.prepare_context().await.unwrap();
    let request = prepared.messages().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert_eq!(request, GUIDELINES);
    assert!(request.contains(&format!("`{}`", Tool::ViewChatHistorySummary.name())));
    let offered: Vec<String> = engine
        .tool_specs()
        .iter()
        .map(|spec| spec["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(offered.iter().any(|name| name == Tool::ViewChatHistorySummary.name()), "{offered:?}");
}
