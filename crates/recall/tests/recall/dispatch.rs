//! The tool dispatcher against arbitrary arguments: whatever a model sends, the answer is a
//! JSON object, an error names its kind, and nothing panics.

use proptest::prelude::*;
use serde_json::{Value, json};
use strata_recall::{Embedder, RecallSettings, ToolContext, call_tool, tool_names};
use strata_seam::Conversations;
use strata_seam::{NewMessage, Role};
use strata_store::Store;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        "\\PC{0,24}".prop_map(Value::String),
        Just(json!("2024-05-01")),
        Just(json!(1)),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("query".to_owned()),
                    Just("limit".to_owned()),
                    Just("message_id".to_owned()),
                    Just("node_id".to_owned()),
                    Just("start_time".to_owned()),
                    Just("end_time".to_owned()),
                    Just("category".to_owned()),
                    Just("key".to_owned()),
                    Just("content".to_owned()),
                    Just("title".to_owned()),
                    Just("page".to_owned()),
                    "[a-z_]{1,10}",
                ],
                inner,
                0..5
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn tool_name() -> impl Strategy<Value = String> {
    let names: Vec<String> = tool_names().iter().map(|name| name.to_string()).collect();
    prop_oneof![prop::sample::select(names), "[a-z_]{0,16}"]
}

thread_local! {
    static CTX: (tempfile::TempDir, ToolContext) = {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("strata.db")).unwrap();
        let session = store.session("s", "p").unwrap();
        let texts = ["deploy the billing service", "the port is 8443", "migrations passed"];
        let messages: Vec<NewMessage> = texts.iter().map(|t| NewMessage::text(Role::User, *t)).collect();
        store.append(session.id, &messages).unwrap();
        // No model: semantic search answers that it is unavailable, quickly.
        let embedder = Embedder::load(dir.path().join("no-model"));
        let ctx = ToolContext::new(store, session, embedder, RecallSettings::default());
        (dir, ctx)
    };
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_call_gets_a_json_object_and_errors_name_their_kind(name in tool_name(), args in json_value()) {
        CTX.with(|(_, ctx)| {
            let answer = call_tool(ctx, &name, &args);
            prop_assert!(answer.is_object(), "{name}({args}) -> {answer}");
            if let Some(error) = answer.get("error") {
                prop_assert!(error["kind"].is_string(), "{name}({args}) -> {answer}");
                let message = error["message"].as_str().unwrap_or_default();
                prop_assert!(!message.is_empty() && !message.contains('\n'), "{name}({args}) -> {answer}");
            }
            Ok(())
        })?;
    }
}

/// The id arguments are typed (`MessageId`, `NodeId`) where they are parsed, but the models see
/// the same plain integers as before: no definition of the Rust type leaks into the schema.
#[test]
fn id_arguments_are_plain_integers_in_the_tool_schemas() {
    let specs = strata_recall::tool_specs();
    let parameters = |name: &str| {
        specs.iter().find(|spec| spec["function"]["name"] == name).unwrap()["function"]["parameters"].clone()
    };
    for (tool, id) in [("view_message", "message_id"), ("expand_summary", "node_id")] {
        let parameters = parameters(tool);
        let schema = &parameters["properties"][id];
        assert_eq!(schema["type"], "integer", "{parameters}");
        assert_eq!(schema["format"], "int64", "{parameters}");
        assert!(schema["description"].as_str().is_some_and(|text| text.contains("id")), "{parameters}");
        assert_eq!(parameters["required"], json!([id]), "{parameters}");
        assert!(parameters.get("$defs").is_none(), "{parameters}");
    }
    CTX.with(|(_, ctx)| {
        let found = call_tool(ctx, "view_message", &json!({"message_id": 2}));
        assert_eq!(found["message"]["id"], 2, "{found}");
        let refused = call_tool(ctx, "view_message", &json!({"message_id": "two"}));
        assert_eq!(refused["error"]["kind"], "invalid_argument", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.ends_with("invalid type: string \"two\", expected i64"), "{refused}");
    });
}
