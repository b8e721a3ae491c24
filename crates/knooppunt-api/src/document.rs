//! The OpenAPI document at `/v1/openapi.json`: each resource's file adds its endpoints
//! next to its handlers (`describe`, with [`Operation`], into the one table of
//! `endpoints.rs` the router is made from too), naming the types its handlers read and
//! answer; their schemas are generated from those types (`schemars`, OpenAPI 3.0 dialect),
//! so a member added to an answer or a request body is in the document too.

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use crate::API_VERSION;

/// What the hub's boundary may answer to any operation, before its handler runs: 503 when
/// the store takes no writes or an issuer's keys cannot be had (every operation that needs
/// a principal or the store), and for an operation that takes a body, 413 for a body larger
/// than any route takes (announced or sent) and 408 for one that does not arrive within
/// `server.body_timeout`.
pub(crate) fn add_boundary_answers(document: &mut Value) {
    const TOO_LARGE: &str = "The body is larger than this operation takes (or its \
                             `Content-Length` announces so); nothing was kept.";
    const TOO_SLOW: &str = "The body did not arrive within the hub's body timeout \
                            (`server.body_timeout`); nothing was kept.";
    let Some(paths) = document["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        if path == "/openapi.json" || path == "/signing-keys" {
            continue;
        }
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, operation) in item.iter_mut() {
            if method == "parameters" {
                continue;
            }
            let takes_body = operation.get("requestBody").is_some();
            let Some(responses) = operation["responses"].as_object_mut() else {
                continue;
            };
            let mut add = |code: &str, description: &str| {
                if !responses.contains_key(code) {
                    responses.insert(code.into(), problem(description));
                }
            };
            add(UNAVAILABLE.0, UNAVAILABLE.1);
            if takes_body {
                add("408", TOO_SLOW);
                add("413", TOO_LARGE);
            }
        }
    }
}

/// The paths and schemas being described.
pub(crate) struct Document {
    generator: SchemaGenerator,
    /// Request bodies, described as the hub reads them: a member with a default is not
    /// required.
    inputs: SchemaGenerator,
    /// The request bodies of a resource with a representation: the names of both schemas.
    closed: Vec<(String, String)>,
    paths: Map<String, Value>,
}

impl Document {
    pub(crate) fn new() -> Document {
        Document {
            // Answers are described as the hub writes them: a member it leaves out when
            // empty is not required.
            generator: SchemaSettings::openapi3().for_serialize().into_generator(),
            inputs: SchemaSettings::openapi3()
                .for_deserialize()
                .into_generator(),
            closed: Vec::new(),
            paths: Map::new(),
        }
    }

    /// The schema of `T`: a reference to it in `components/schemas` for a named type.
    pub(crate) fn schema<T: JsonSchema>(&mut self) -> Value {
        self.generator.subschema_for::<T>().to_value()
    }

    /// The schema of request body `T`: a reference to it in `components/schemas`.
    pub(crate) fn input<T: JsonSchema>(&mut self) -> Value {
        self.inputs.subschema_for::<T>().to_value()
    }

    /// The schema of request body `T` of a resource whose representation is `R`: closed over
    /// `R` as the hub reads it ([`crate::input::close_over`]).
    pub(crate) fn input_over<T: JsonSchema, R: JsonSchema>(&mut self) -> Value {
        self.schema::<R>();
        self.closed
            .push((T::schema_name().into_owned(), R::schema_name().into_owned()));
        self.input::<T>()
    }

    /// The schema of request body `T`, read by [`crate::input::read`].
    pub(crate) fn body_input<T: crate::input::Body>(&mut self) -> Value {
        self.input_over::<T, T::Representation>()
    }

    /// The schema of a list of `T`.
    pub(crate) fn list_of<T: JsonSchema>(&mut self) -> Value {
        json!({"type": "array", "items": self.schema::<T>()})
    }

    /// Adds `operation` as `method` of `path` (relative to the API's base path), with the
    /// path's `parameters` (each operation of a path names the same ones).
    pub(crate) fn add(
        &mut self,
        path: &str,
        method: &str,
        parameters: &Value,
        operation: Operation,
    ) {
        let item = self
            .paths
            .entry(path.to_owned())
            .or_insert_with(|| json!({}));
        if parameters.as_array().is_some_and(|p| !p.is_empty()) {
            item["parameters"] = parameters.clone();
        }
        item[method] = Value::Object(operation.0);
    }

    /// Puts the paths and the schemas into `document`.
    pub(crate) fn finish(mut self, document: &mut Value) {
        let paths = document["paths"].as_object_mut().expect("paths");
        paths.extend(std::mem::take(&mut self.paths));
        let schemas = document["components"]["schemas"]
            .as_object_mut()
            .expect("schemas");
        let mut definitions = self.generator.take_definitions(true);
        for (name, schema) in self.inputs.take_definitions(true) {
            match definitions.get(&name) {
                // A type both read and answered (an enum of states) is described once.
                Some(answered) => assert_eq!(
                    answered, &schema,
                    "`{name}` is described differently as a request and as an answer"
                ),
                None => {
                    definitions.insert(name, schema);
                }
            }
        }
        for (request, representation) in &self.closed {
            let representation = definitions.get(representation).cloned().unwrap_or_default();
            if let Some(request) = definitions.get_mut(request) {
                crate::input::close_over(request, &representation);
            }
        }
        let mut definitions = Value::Object(definitions);
        registered_formats(&mut definitions);
        schemas.extend(
            definitions
                .as_object_mut()
                .map(std::mem::take)
                .unwrap_or_default(),
        );
    }
}

/// OpenAPI's integer formats for Rust's unsigned ones (`int32`, `int64`; the minimum 0
/// stays).
fn registered_formats(schema: &mut Value) {
    match schema {
        Value::Object(members) => {
            if let Some(format) = members.get_mut("format") {
                match format.as_str() {
                    Some("uint8" | "uint16" | "uint32" | "int8" | "int16") => {
                        *format = json!("int32")
                    }
                    Some("uint64" | "uint") => *format = json!("int64"),
                    _ => {}
                }
            }
            members.values_mut().for_each(registered_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(registered_formats),
        _ => {}
    }
}

/// A path parameter.
pub(crate) fn path_parameter(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description,
           "schema": {"type": "string"}})
}

/// The `Link` header of a page.
pub(crate) fn link_header() -> Value {
    header("RFC 8288 link to the next page, when there is one.")
}

/// The schema of a subscription.
pub(crate) fn subscription() -> Value {
    json!({"$ref": "#/components/schemas/Subscription"})
}

/// The schema of a CloudEvents JSON batch.
pub(crate) fn cloud_events() -> Value {
    json!({"type": "array", "items": {"$ref": "#/components/schemas/CloudEvent"}})
}

/// An answer's header.
pub(crate) fn header(description: &str) -> Value {
    json!({"description": description, "schema": {"type": "string"}})
}

/// The header every answer carries (ADR /core/version-header).
fn version_header() -> Value {
    json!({
        "description": "The full version of the API (ADR /core/version-header).",
        "schema": {"type": "string", "example": API_VERSION}
    })
}

/// A problem answer: its status and what it means for the operation.
pub(crate) type Refusal = (&'static str, &'static str);

pub(crate) const BAD_REQUEST: Refusal = ("400", "The request is invalid; every problem is listed.");
pub(crate) const UNAUTHORIZED: Refusal = ("401", "No valid bearer token was sent.");
pub(crate) const FORBIDDEN: Refusal = (
    "403",
    "The principal lacks the role or the type prefix needed.",
);
pub(crate) const NOT_FOUND: Refusal = ("404", "No such subscription is visible to the principal.");
pub(crate) const UNAVAILABLE: Refusal = (
    "503",
    "The store takes no writes now (closed, or its disk is full: it takes writes again by \
     itself once a test write succeeds), or an issuer's keys cannot be fetched; nothing was \
     kept. Try again after Retry-After, or at another hub.",
);

/// A problem answer (RFC 9457) described as `description`.
pub(crate) fn problem(description: &str) -> Value {
    json!({
        "description": description,
        "headers": {"API-Version": version_header()},
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    })
}

/// One operation: its id, summary and tag, what it reads and what it answers.
pub(crate) struct Operation(Map<String, Value>);

impl Operation {
    pub(crate) fn new(id: &str, tag: &str, summary: &str) -> Operation {
        let mut operation = Map::new();
        operation.insert("operationId".into(), json!(id));
        operation.insert("summary".into(), json!(summary));
        operation.insert("tags".into(), json!([tag]));
        operation.insert("responses".into(), json!({}));
        Operation(operation)
    }

    /// No authentication.
    pub(crate) fn public(mut self) -> Operation {
        self.0.insert("security".into(), json!([]));
        self
    }

    /// Query (or header) parameters.
    /// The query parameters of the query string `T` (what [`crate::input::Params`] reads),
    /// after any given before.
    pub(crate) fn query<T: schemars::JsonSchema>(mut self) -> Operation {
        let parameters = self
            .0
            .entry("parameters")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(items) = parameters {
            items.extend(crate::input::query_parameters::<T>());
        }
        self
    }

    pub(crate) fn parameters(mut self, parameters: Value) -> Operation {
        self.0.insert("parameters".into(), parameters);
        self
    }

    /// A JSON body of `schema`, required; a body of another type is answered 415, so every
    /// operation with one says so.
    pub(crate) fn body(mut self, schema: Value) -> Operation {
        self.0.insert(
            "requestBody".into(),
            json!({"required": true, "content": {"application/json": {"schema": schema}}}),
        );
        self.refusals(&[("415", "The body is not application/json.")])
    }

    /// The request body as given.
    pub(crate) fn request_body(mut self, body: Value) -> Operation {
        self.0.insert("requestBody".into(), body);
        self
    }

    /// A required body of `schema` in each of `content_types`.
    pub(crate) fn body_as(mut self, content_types: &[&str], schema: Value) -> Operation {
        let content: Map<String, Value> = content_types
            .iter()
            .map(|media| ((*media).to_owned(), json!({"schema": schema})))
            .collect();
        self.0.insert(
            "requestBody".into(),
            json!({"required": true, "content": content}),
        );
        self
    }

    /// Answers `status` with a JSON body of `schema` (none: no body).
    pub(crate) fn answer(
        mut self,
        status: &str,
        description: &str,
        schema: Option<Value>,
    ) -> Operation {
        let mut answer =
            json!({"description": description, "headers": {"API-Version": version_header()}});
        if let Some(schema) = schema {
            answer["content"] = json!({"application/json": {"schema": schema}});
        }
        self.0["responses"][status] = answer;
        self
    }

    /// Answers `status` with a body of `schema` in `content_type`.
    pub(crate) fn answer_as(
        self,
        status: &str,
        description: &str,
        content_type: &str,
        schema: Value,
    ) -> Operation {
        let mut operation = self.answer(status, description, None);
        operation.0["responses"][status]["content"] = json!({content_type: {"schema": schema}});
        operation
    }

    /// The answer of `status` (given before) also in `content_type`, as `schema`.
    pub(crate) fn also_as(mut self, status: &str, content_type: &str, schema: Value) -> Operation {
        self.0["responses"][status]["content"][content_type] = json!({"schema": schema});
        self
    }

    /// A longer description than the summary.
    pub(crate) fn description(mut self, description: &str) -> Operation {
        self.0.insert("description".into(), json!(description));
        self
    }

    /// Adds a header to the answer of `status` (given before).
    pub(crate) fn header(mut self, status: &str, name: &str, header: Value) -> Operation {
        self.0["responses"][status]["headers"][name] = header;
        self
    }

    /// Problem answers.
    pub(crate) fn refusals(mut self, refusals: &[Refusal]) -> Operation {
        for (status, description) in refusals {
            self.0["responses"][*status] = problem(description);
        }
        self
    }
}
