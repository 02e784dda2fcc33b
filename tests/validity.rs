//! Facts with validity through `Engine` and the model's tools: a fact that changed is saved
//! with the time it became true; `memory_list` shows the new text now and the old one at a time
//! before, each with its dates; the injected memories show them too.

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde_json::{Value, json};
use strata::{ChatMessage, Engine};

use crate::util::Strata;

fn time(text: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text.as_str().unwrap()).unwrap().with_timezone(&Utc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_fact_is_the_old_value_as_of_before_and_the_new_one_now_both_dated() {
    let strata = Strata::new();
    let engine = Engine::open(strata.db(), strata::Config::default()).unwrap();
    let session = engine.session("moves", "assistant").unwrap();
    session.append(ChatMessage::user("The office is at 12 Elm Street.")).unwrap();
    let save = |content: &str, since: Option<String>| {
        let mut args = json!({"category": "memo", "key": "office_address", "title": "Office address",
                              "content": content});
        if let Some(since) = since {
            args["true_since"] = json!(since);
        }
        session.call_tool("save_memory", args)
    };
    let old = save("12 Elm Street", None).await;
    let old_from = time(&old["memory"]["valid_from"]);
    // The clock moves past the old text's start, so each text has a time of its own.
    while Utc::now() <= old_from + TimeDelta::milliseconds(4) {
        std::hint::spin_loop();
    }
    let moved = Utc::now() - TimeDelta::milliseconds(2);
    let new = save("40 Oak Avenue", Some(moved.to_rfc3339_opts(SecondsFormat::Micros, true))).await;
    assert_eq!((new["saved"].clone(), new["created"].clone()), (json!(true), json!(false)), "{new}");

    let now = session.call_tool("memory_list", json!({})).await;
    let memories = now["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 1, "{now}");
    // Tool answers fence stored text.
    assert!(memories[0]["content"].as_str().unwrap().contains("\n40 Oak Avenue\n"), "{now}");
    assert!((time(&memories[0]["valid_from"]) - moved).num_milliseconds().abs() < 1, "{now}");
    assert!(memories[0].get("valid_to").is_none(), "still true: {now}");

    let between = old_from + (moved - old_from) / 2;
    let as_of = json!({"as_of": between.to_rfc3339_opts(SecondsFormat::Micros, true)});
    let then = session.call_tool("memory_list", as_of).await;
    let memories = then["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 1, "{then}");
    assert!(memories[0]["content"].as_str().unwrap().contains("\n12 Elm Street\n"), "{then}");
    assert!((time(&memories[0]["valid_to"]) - moved).num_milliseconds().abs() < 1, "{then}");

    // A time in the future is refused, naming the field, and changes nothing.
    let future = save("1 Pine Road", Some((Utc::now() + TimeDelta::days(1)).to_rfc3339())).await;
    assert_eq!(future["error"]["kind"], "invalid_argument", "{future}");
    assert!(future["error"]["message"].as_str().unwrap().contains("at"), "{future}");
    let bad = session.call_tool("memory_list", json!({"as_of": "last tuesday"})).await;
    assert!(bad["error"]["message"].as_str().unwrap().contains("as_of"), "{bad}");
    let history = engine.store().memory_history("assistant", strata_seam::Category::Memo, "office_address");
    assert_eq!(history.unwrap().len(), 2);
}

#[test]
fn the_command_line_supersedes_a_memory_and_lists_it_as_of_a_time() {
    let strata = Strata::new();
    strata.run(&["memory", "set", "memo", "office", "12 Elm Street", "--persona", "p"]).success();
    let old = strata.run(&["--json", "memory", "get", "memo", "office", "--persona", "p"]).json();
    let old_from = time(&old["valid_from"]);
    // A process runs in far more than the 2 ms that keep the two texts' times apart.
    let moved = Utc::now() - TimeDelta::milliseconds(2);
    assert!(moved > old_from + TimeDelta::milliseconds(2), "{old}");
    let at = moved.to_rfc3339_opts(SecondsFormat::Micros, true);
    let shown = strata
        .run(&["memory", "supersede", "memo", "office", "40 Oak Avenue", "--at", &at, "--persona", "p"])
        .success();
    assert!(shown.contains("40 Oak Avenue") && shown.contains("true since"), "{shown}");
    let listed = strata.run(&["memory", "list", "--persona", "p"]).success();
    assert!(listed.contains("40 Oak Avenue") && !listed.contains("12 Elm Street"), "{listed}");

    let between = (old_from + (moved - old_from) / 2).to_rfc3339_opts(SecondsFormat::Micros, true);
    let then = strata.run(&["--json", "memory", "list", "--as-of", &between, "--persona", "p"]).json();
    assert_eq!(then[0]["content"], "12 Elm Street", "{then}");
    assert!((time(&then[0]["valid_to"]) - moved).num_milliseconds().abs() < 1, "{then}");
    let history = strata.run(&["memory", "history", "office", "--persona", "p"]).success();
    assert!(history.contains("until") && history.contains("12 Elm Street"), "{history}");

    // Refused with one clear error, changing nothing.
    let future = strata
        .run(&[
            "memory",
            "supersede",
            "memo",
            "office",
            "1 Pine Road",
            "--at",
            "2999-01-01",
            "--persona",
            "p",
        ])
        .failure();
    assert!(future.contains("future"), "{future}");
    let bad = strata.run(&["memory", "list", "--as-of", "yesterday-ish", "--persona", "p"]).failure();
    assert!(bad.contains("as_of"), "{bad}");
    let listed_again = strata.run(&["memory", "list", "--persona", "p"]).success();
    assert_eq!(listed_again, listed);
    // Ended with nothing in its place: listed with the date it stopped.
    let ended = strata.run(&["memory", "supersede", "memo", "office", "--persona", "p"]).success();
    assert!(ended.contains("until"), "{ended}");
}
