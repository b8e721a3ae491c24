//! Checks answers against an OpenAPI document: the status is one the operation lists, the
//! content type is documented, and the body validates against its schema (OpenAPI 3.0's
//! `nullable` read as JSON Schema).

use jsonschema::Draft;
use serde_json::{Value, json};

use crate::TestHub;

/// A document and how many answers were checked against it.
#[derive(Debug)]
pub struct Checker {
    document: Value,
    pub checked: usize,
}

impl Checker {
    /// The hub's own document (`/v1/openapi.json`).
    pub async fn new(hub: &TestHub) -> Checker {
        let document = hub
            .client
            .get(hub.url("/v1/openapi.json"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        Checker::with(document)
    }

    /// Checks answers against `document`.
    pub fn with(document: Value) -> Checker {
        Checker {
            document,
            checked: 0,
        }
    }

    /// Sends `request` and checks its answer against operation `method path` (a path of the
    /// document, such as `/subscriptions/{id}`); returns the answer's JSON.
    pub async fn check(
        &mut self,
        method: &str,
        path: &str,
        request: reqwest::RequestBuilder,
    ) -> Value {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16().to_string();
        let content_type = response.headers().get("content-type").map(|v| {
            v.to_str()
                .unwrap()
                .split(';')
                .next()
                .unwrap()
                .trim()
                .to_owned()
        });
        let text = response.text().await.unwrap();
        let operation = &self.document["paths"][path][method];
        assert!(
            operation.is_object(),
            "no operation {method} {path} in the document"
        );
        let documented = &operation["responses"][&status];
        assert!(
            documented.is_object(),
            "{method} {path} answered {status}, which the document does not list: {text}"
        );
        let Some(content) = documented.get("content") else {
            assert!(
                text.is_empty(),
                "{method} {path} {status}: a body the document does not describe: {text}"
            );
            return Value::Null;
        };
        let content_type =
            content_type.unwrap_or_else(|| panic!("{method} {path} {status}: no content type"));
        let schema = &content[&content_type]["schema"];
        assert!(
            schema.is_object(),
            "{method} {path} {status}: content type {content_type} is not documented ({content})"
        );
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path} {status}: not JSON ({e}): {text}"));
        let mut root = schema.clone();
        root["components"] = self.document["components"].clone();
        json_schema(&mut root);
        let validator = jsonschema::options()
            .with_draft(Draft::Draft4)
            .build(&root)
            .unwrap_or_else(|e| {
                panic!("{method} {path} {status}: the schema does not compile: {e}")
            });
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{method} {path} {status}: the body breaks the documented schema: {errors:?}\n{body}"
        );
        self.checked += 1;
        body
    }
}

/// OpenAPI 3.0's `nullable: true` as JSON Schema (`null` joins the allowed types), and its
/// `writeOnly` properties left out of `required` (an answer never has them).
fn json_schema(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if object.get("nullable") == Some(&Value::Bool(true))
                && let Some(Value::String(ty)) = object.get("type").cloned()
            {
                object.insert("type".into(), json!([ty, "null"]));
            }
            let write_only: Vec<String> = object
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| {
                    properties
                        .iter()
                        .filter(|(_, p)| p.get("writeOnly") == Some(&Value::Bool(true)))
                        .map(|(name, _)| name.clone())
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Array(required)) = object.get_mut("required") {
                required.retain(|name| !write_only.iter().any(|w| name == w.as_str()));
            }
            object.values_mut().for_each(json_schema);
        }
        Value::Array(items) => items.iter_mut().for_each(json_schema),
        _ => {}
    }
}
