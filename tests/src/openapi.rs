//! Checks answers against an OpenAPI document: the status is one the operation lists, the
//! content type is documented, and the body validates against its schema (OpenAPI 3.0's
//! `nullable` read as JSON Schema).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
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

/// Every answer a test hub gives under `/v1` checked against the hub's own OpenAPI document
/// as it is sent (a layer around the hub's router, [`conformance_layer`]): the path and method
/// are an operation of the document, the status is one it lists, the content type is
/// documented, and a JSON body validates against its schema. What breaks the document is
/// collected, and the hub's [`ConformanceGuard`] fails the test when it is dropped.
#[derive(Clone)]
pub struct Conformance {
    inner: Arc<Inner>,
}

struct Inner {
    document: Value,
    /// The document's paths, split into segments (`None` for a `{parameter}`).
    paths: Vec<(String, Vec<Option<String>>)>,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
    violations: Mutex<Vec<String>>,
    checked: AtomicUsize,
}

impl std::fmt::Debug for Conformance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conformance")
            .field("checked", &self.checked())
            .finish_non_exhaustive()
    }
}

impl Conformance {
    /// Checks answers against `document` (a hub's `/v1/openapi.json`).
    pub fn new(document: Value) -> Conformance {
        let paths = document["paths"]
            .as_object()
            .map(|paths| {
                paths
                    .keys()
                    .map(|path| {
                        let segments = path
                            .split('/')
                            .map(|s| (!s.starts_with('{')).then(|| s.to_owned()))
                            .collect();
                        (path.clone(), segments)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Conformance {
            inner: Arc::new(Inner {
                document,
                paths,
                validators: Mutex::default(),
                violations: Mutex::default(),
                checked: AtomicUsize::new(0),
            }),
        }
    }

    /// How many answers were checked.
    pub fn checked(&self) -> usize {
        self.inner.checked.load(Ordering::Relaxed)
    }

    /// What broke the document so far.
    pub fn violations(&self) -> Vec<String> {
        self.inner.violations.lock().unwrap().clone()
    }

    fn violation(&self, what: String) {
        self.inner.violations.lock().unwrap().push(what);
    }

    /// The document's path for a request path below the server URL (`/v1`): the one with
    /// the most literal segments of those that match.
    fn template(&self, path: &str) -> Option<&str> {
        let segments: Vec<&str> = path.split('/').collect();
        self.inner
            .paths
            .iter()
            .filter(|(_, template)| {
                template.len() == segments.len()
                    && template.iter().zip(&segments).all(|(t, s)| match t {
                        Some(literal) => literal == s,
                        None => !s.is_empty(),
                    })
            })
            .max_by_key(|(_, template)| template.iter().filter(|t| t.is_some()).count())
            .map(|(path, _)| path.as_str())
    }

    fn validator(&self, key: &str, schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
        if let Some(validator) = self.inner.validators.lock().unwrap().get(key) {
            return Ok(Arc::clone(validator));
        }
        let mut root = schema.clone();
        root["components"] = self.inner.document["components"].clone();
        json_schema(&mut root);
        let validator = jsonschema::options()
            .with_draft(Draft::Draft4)
            .build(&root)
            .map_err(|e| format!("{key}: the schema does not compile: {e}"))?;
        let validator = Arc::new(validator);
        self.inner
            .validators
            .lock()
            .unwrap()
            .insert(key.to_owned(), Arc::clone(&validator));
        Ok(validator)
    }

    /// Checks one answer; the body is given back whole.
    async fn check(&self, method: &http::Method, path: &str, response: Response) -> Response {
        let Some(below) = path.strip_prefix(knooppunt_broker::BASE_PATH) else {
            return response;
        };
        let status = response.status().as_u16();
        let Some(template) = self.template(below) else {
            // No resource there: the hub's 404 for every unknown path.
            if status != 404 {
                self.violation(format!(
                    "{method} {path}: answered {status}, and no path of the document matches"
                ));
            }
            return response;
        };
        let template = template.to_owned();
        let operation = &self.inner.document["paths"][&template][method.as_str().to_lowercase()];
        if !operation.is_object() {
            // A method the path does not have; HEAD is GET's.
            if status != 405 && *method != http::Method::HEAD {
                self.violation(format!("{method} {path}: answered {status}, and the document has no {method} {template}"));
            }
            return response;
        }
        let key = format!("{method} {template} {status}");
        let documented = &operation["responses"][status.to_string()];
        if !documented.is_object() {
            self.violation(format!("{key}: a status the document does not list"));
            return response;
        }
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim().to_owned());
        let Some(content) = documented.get("content").and_then(Value::as_object) else {
            let (parts, body) = response.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX)
                .await
                .unwrap_or_default();
            if !bytes.is_empty() {
                self.violation(format!(
                    "{key}: a body the document does not describe ({content_type:?})"
                ));
            }
            self.inner.checked.fetch_add(1, Ordering::Relaxed);
            return Response::from_parts(parts, axum::body::Body::from(bytes));
        };
        let Some(content_type) = content_type else {
            self.violation(format!("{key}: no content type"));
            return response;
        };
        let Some(media) = content.get(&content_type) else {
            self.violation(format!(
                "{key}: content type {content_type} is not documented (only {:?})",
                content.keys().collect::<Vec<_>>()
            ));
            return response;
        };
        self.inner.checked.fetch_add(1, Ordering::Relaxed);
        if !(content_type == "application/json" || content_type.ends_with("+json")) {
            // Streams and CBOR: their type is what is checked.
            return response;
        }
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        match serde_json::from_slice::<Value>(&bytes) {
            Err(e) => self.violation(format!("{key}: not JSON ({e})")),
            Ok(answer) => match self.validator(&key, &media["schema"]) {
                Err(why) => self.violation(why),
                Ok(validator) => {
                    let errors: Vec<String> = validator
                        .iter_errors(&answer)
                        .map(|e| e.to_string())
                        .collect();
                    if !errors.is_empty() {
                        self.violation(format!(
                            "{key}: the body breaks the documented schema: {errors:?} in {}",
                            truncated(&answer.to_string())
                        ));
                    }
                }
            },
        }
        Response::from_parts(parts, axum::body::Body::from(bytes))
    }
}

fn truncated(text: &str) -> &str {
    match text.char_indices().nth(600) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// The layer that checks every answer of the router it wraps with `conformance`.
pub fn conformance_layer(router: axum::Router, conformance: &Conformance) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(
        conformance.clone(),
        |State(conformance): State<Conformance>, request: Request, next: Next| async move {
            let method = request.method().clone();
            let path = request.uri().path().to_owned();
            let response = next.run(request).await;
            conformance.check(&method, &path, response).await
        },
    ))
}

/// Fails the test (when it is dropped, unless the test already fails) if an answer broke
/// the document.
#[derive(Debug)]
pub struct ConformanceGuard(pub Conformance);

impl Drop for ConformanceGuard {
    fn drop(&mut self) {
        let violations = self.0.violations();
        if violations.is_empty() || std::thread::panicking() {
            return;
        }
        panic!(
            "the hub answered what its OpenAPI document does not describe:\n{}",
            violations.join("\n")
        );
    }
}
