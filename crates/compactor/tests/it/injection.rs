//! Injection of the sync guidelines and the user preferences (DESIGN.md §3, step 6).

use chrono::Duration;
use strata_compactor::CompactorConfig;
use strata_compactor::context::Injection;
use strata_seam::memories::{MemoryWrite, Writer};
use strata_seam::{Category, NewMessage, Role};

use crate::util::{fixture, t0, tool_names};
use strata_seam::Memories;

const GUIDELINES: &str = "[Background Context: Sync Guidelines]
======
# Passive Synchronization Guidelines:
- 💡 You are playing the active persona role: coder.
- 💡 You have access to the `view_chat_history_summary` tool, which retrieves a consolidated chat history summary and chronological timeline of recent events across active threads/channels.
- 💡 If the user's current request below refers to external threads, other chats, or events you cannot locate in this session's history, you MUST call `view_chat_history_summary` to read the global context and synchronize before providing a response.
======

";

fn latest_request(context: &strata_compactor::AssembledContext) -> String {
    let message = context.messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    message["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn bootstrap_regular_and_idle_turns() {
    let fx = fixture(CompactorConfig { head_messages: 1, ..CompactorConfig::default() });
    fx.prefer("tone", "Tone", "Terse answers,\nno emoji.");
    let preferences = "[User Preferences]\n- Tone: Terse answers, no emoji.\n\n";
    // The clock is injected: every time below is t0 plus minutes, nothing sleeps.
    fx.push(NewMessage::text(Role::System, "You are a careful coding agent."), 0);
    fx.push(NewMessage::text(Role::User, "Set up the repo."), 1);

    let first = fx.compactor.assemble(fx.session, t0() + Duration::minutes(1)).await.unwrap();
    assert_eq!(first.injection, Injection::Bootstrap, "the first turn of a session");
    assert_eq!(
        latest_request(&first),
        format!("{GUIDELINES}{preferences}[Current Request]\nSet up the repo.")
    );

    fx.push(NewMessage::text(Role::Assistant, "Done."), 2);
    fx.push(NewMessage::text(Role::User, "Now add CI."), 5);
    let regular = fx.compactor.assemble(fx.session, t0() + Duration::minutes(5)).await.unwrap();
    assert_eq!(regular.injection, Injection::Regular);
    assert_eq!(latest_request(&regular), format!("{preferences}[Current Request]\nNow add CI."));
    // Only the latest request carries it: the earlier one is verbatim again.
    assert!(regular.messages.iter().any(|m| m["content"] == "Set up the repo."));

    fx.push(NewMessage::text(Role::Assistant, "CI added."), 6);
    fx.push(NewMessage::text(Role::User, "Where were we?"), 6 + 31);
    let resumed = fx.compactor.assemble(fx.session, t0() + Duration::minutes(37)).await.unwrap();
    assert_eq!(resumed.injection, Injection::Bootstrap, "31 idle minutes is over the 30-minute gap");
    assert_eq!(
        latest_request(&resumed),
        format!("{GUIDELINES}{preferences}[Current Request]\nWhere were we?")
    );

    // The gap is measured to the request, not to the assembly: a later tool round of the same
    // turn keeps its injection (regression: it used to flip between regular and bootstrap).
    let later_round = fx.compactor.assemble(fx.session, t0() + Duration::minutes(90)).await.unwrap();
    assert_eq!(later_round.injection, Injection::Bootstrap);
    assert_eq!(later_round.messages, resumed.messages);

    // Exactly at the gap is still a regular turn, whenever it is assembled.
    fx.push(NewMessage::text(Role::Assistant, "Here."), 38);
    fx.push(NewMessage::text(Role::User, "Continue."), 38 + 30);
    let at_gap = fx.compactor.assemble(fx.session, t0() + Duration::minutes(500)).await.unwrap();
    assert_eq!(at_gap.injection, Injection::Regular);
}

#[tokio::test]
async fn a_regular_turn_without_preferences_is_sent_verbatim() {
    let fx = fixture(CompactorConfig::default());
    fx.push(NewMessage::text(Role::User, "Hello."), 0);
    fx.push(NewMessage::text(Role::Assistant, "Hi."), 1);
    fx.push(NewMessage::text(Role::User, "Next step?"), 2);
    let context = fx.compactor.assemble(fx.session, t0() + Duration::minutes(2)).await.unwrap();
    assert_eq!(context.injection, Injection::None);
    assert_eq!(latest_request(&context), "Next step?");
    // After an idle gap the guidelines come back, even with no preferences to add.
    fx.push(NewMessage::text(Role::Assistant, "Tests next."), 3);
    fx.push(NewMessage::text(Role::User, "Back again."), 3 + 180);
    let boot = fx.compactor.assemble(fx.session, t0() + Duration::minutes(183)).await.unwrap();
    assert_eq!(boot.injection, Injection::Bootstrap);
    assert_eq!(latest_request(&boot), format!("{GUIDELINES}[Current Request]\nBack again."));
}

#[tokio::test]
async fn bootstrap_turns_carry_saved_memories_newest_first_within_their_budget() {
    let fx = fixture(CompactorConfig { injected_memory_tokens: 60, ..CompactorConfig::default() });
    for (i, key) in ["old_note", "deploy_plan", "release_state"].iter().enumerate() {
        let category = if i == 0 { Category::Memo } else { Category::Progress };
        fx.store
            .put_memory(
                Writer::Agent,
                "coder",
                &MemoryWrite {
                    category,
                    key,
                    title: key,
                    content: &format!("{key} content, step {i} of 5 done"),
                },
            )
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    fx.push(NewMessage::text(Role::User, "Where do we stand?"), 0);
    let first = fx.compactor.assemble(fx.session, t0()).await.unwrap();
    let request = latest_request(&first);
    let block = request.split("[Long-term Memories]\n").nth(1).expect("a memories block").to_owned();
    let release = block.find("progress/release_state").expect("the newest is shown");
    let deploy = block.find("progress/deploy_plan").expect("the next newest too");
    assert!(release < deploy, "newest first: {block}");
    assert!(block.starts_with("⟦retrieved-data "), "memories are fenced: {block}");
    assert!(block.contains("1 more saved memories are not shown: memory_list"), "{block}");
    assert!(request.ends_with("[Current Request]\nWhere do we stand?"));

    // A regular turn carries no memories.
    fx.push(NewMessage::text(Role::Assistant, "Release is at step 2."), 1);
    fx.push(NewMessage::text(Role::User, "And next?"), 2);
    let regular = fx.compactor.assemble(fx.session, t0() + Duration::minutes(2)).await.unwrap();
    assert_eq!(latest_request(&regular), "And next?");
}

#[tokio::test]
async fn templates_can_be_replaced_and_values_are_never_expanded() {
    let config = CompactorConfig {
        bootstrap_template: "<sync role={active_role} at {time}>\n{preferences}{memories}Q: {request}".into(),
        regular_template: "{preferences}Q: {request} {unknown}".into(),
        ..CompactorConfig::default()
    };
    let fx = fixture(config);
    fx.prefer("style", "Style", "Say {request} literally.");
    fx.push(NewMessage::text(Role::User, "Hello."), 0);
    let first = fx.compactor.assemble(fx.session, t0()).await.unwrap();
    assert_eq!(
        latest_request(&first),
        "<sync role=coder at 2026-03-01 09:00 UTC>\n[User Preferences]\n- Style: Say {request} literally.\n\nQ: Hello."
    );
    fx.push(NewMessage::text(Role::Assistant, "Hi."), 1);
    fx.push(NewMessage::text(Role::User, "Next."), 2);
    let regular = fx.compactor.assemble(fx.session, t0() + Duration::minutes(2)).await.unwrap();
    assert_eq!(
        latest_request(&regular),
        "[User Preferences]\n- Style: Say {request} literally.\n\nQ: Next. {unknown}",
        "unknown braces stay literal"
    );

    // A template that would drop the request is refused when the compactor is built.
    let broken = CompactorConfig { regular_template: "{preferences}".into(), ..CompactorConfig::default() };
    let error = broken.validate().unwrap_err();
    assert!(error.to_string().contains("regular_template"), "{error}");
}

#[test]
fn the_default_templates_are_the_users_byte_for_byte() {
    assert_eq!(
        strata_compactor::context::bootstrap_template(Some(&tool_names()))
            .replace("{active_role}", "coder")
            .replace("{preferences}{memories}{recalled}", ""),
        format!("{GUIDELINES}[Current Request]\n{{request}}")
    );
    // The recalled block sits where the user's template puts background: before the request.
    assert_eq!(
        strata_compactor::context::REGULAR_TEMPLATE,
        "{preferences}{recalled}[Current Request]\n{request}"
    );
}
