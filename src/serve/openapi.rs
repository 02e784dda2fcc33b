//! The OpenAPI 3.1 document of `strata serve`, written from the route table
//! ([`super::routes::ROUTES`]) and the body types' schemas (schemars), once at start-up.

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::routes::{Access, Answer, ErrorBody, ROUTES};

/// The document.
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.definitions_path = "#/components/schemas/".into();
            settings.meta_schema = None;
        })
        .into_generator();
    let error = Value::from(generator.subschema_for::<ErrorBody>());
    let mut paths = Map::new();
    for route in ROUTES {
        let mut operation = Map::new();
        operation.insert(
            "operationId".into(),
            json!(format!("{}_{}", route.method.as_str().to_lowercase(), operation_name(route.pattern))),
        );
        operation.insert("summary".into(), json!(route.summary));
        let mut parameters: Vec<Value> = route
            .pattern
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{').and_then(|name| name.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        parameters.extend(route.query.iter().map(|(name, description)| {
            json!({"name": name, "in": "query", "required": false, "description": description, "schema": {"type": "string"}})
        }));
        if !parameters.is_empty() {
            operation.insert("parameters".into(), Value::Array(parameters));
        }
        if let Some(body) = route.body {
            let schema = Value::from(body(&mut generator));
            operation.insert(
                "requestBody".into(),
                json!({"required": false, "content": {"application/json": {"schema": schema}}}),
            );
        }
        let success = match route.answer {
            Answer::Json(schema) => {
                json!({"description": "OK", "content": {"application/json": {"schema": Value::from(schema(&mut generator))}}})
            }
            Answer::Lines => {
                json!({"description": "One message per line", "content": {"application/x-ndjson": {"schema": {"type": "string"}}}})
            }
            Answer::Prometheus => {
                json!({"description": "Prometheus text", "content": {"text/plain": {"schema": {"type": "string"}}}})
            }
            Answer::Mcp => json!({"description": "JSON-RPC, or server-sent events"}),
        };
        let failure = |description: &str| json!({"description": description, "content": {"application/json": {"schema": error.clone()}}});
        let mut responses = Map::new();
        responses.insert("200".into(), success);
        if route.body.is_some() {
            responses.insert("400".into(), failure("The request is not valid (kind invalid_input)"));
            responses.insert("413".into(), failure("The body is larger than the limit (kind too_large)"));
        }
        if route.access != Access::Open {
            responses.insert("401".into(), failure("No token, or an unknown one (kind unauthorized)"));
        }
        if route.access == Access::Persona {
            responses.insert(
                "403".into(),
                failure("The token may not act as this persona, or is read-only (kind forbidden)"),
            );
            responses.insert("404".into(), failure("Not found (kind not_found)"));
            responses.insert("409".into(), failure("The request contradicts what is stored (kind conflict)"));
        }
        responses.insert("503".into(), failure("The database is unavailable for now (kind unavailable)"));
        operation.insert("responses".into(), Value::Object(responses));
        if route.access == Access::Open {
            operation.insert("security".into(), json!([]));
        }
        let path = paths.entry(route.pattern).or_insert_with(|| json!({}));
        path[route.method.as_str().to_lowercase()] = Value::Object(operation);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "strata serve",
            "version": env!("CARGO_PKG_VERSION"),
            // The version of the JSON shapes the routes answer with (`strata::edge`).
            "x-wire-version": strata::WIRE_VERSION,
            "description": "strata's memory and context compaction for a fleet of bots. Every request but health, readiness and this document carries `Authorization: Bearer <token>`; a token acts only as the personas its entry names.",
        },
        "paths": paths,
        "components": {
            "schemas": definitions(&mut generator),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    })
}

fn definitions(generator: &mut SchemaGenerator) -> Value {
    Value::Object(generator.take_definitions(true))
}

/// `/v1/personas/{persona}/sessions/{session}/messages` → `personas_persona_sessions_session_messages`.
fn operation_name(pattern: &str) -> String {
    let name: String = pattern
        .split('/')
        .filter(|segment| !segment.is_empty() && *segment != "v1")
        .map(|segment| segment.trim_matches(|c| c == '{' || c == '}').replace('.', "_"))
        .collect::<Vec<_>>()
        .join("_");
    if name.is_empty() { "root".into() } else { name }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_names_every_route_and_resolves_its_references() {
        let document = document();
        for route in ROUTES {
            let operation = &document["paths"][route.pattern][route.method.as_str().to_lowercase()];
            assert!(operation.is_object(), "{} {} is missing", route.method, route.pattern);
        }
        let text = document.to_string();
        let schemas = document["components"]["schemas"].as_object().unwrap();
        for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &reference[..reference.find('"').unwrap()];
            assert!(schemas.contains_key(name), "{name} is referenced but not defined");
        }
        assert!(schemas.contains_key("AppendRequest") && schemas.contains_key("ErrorBody"));
    }
}
