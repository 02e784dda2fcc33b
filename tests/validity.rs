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
    let history = engine.store().memory_history("assistant", strata_store::Category::Memo, "office_address");
    assert_eq!(history.unwrap().len(), 2);
}
