//! The HTTP API under `/v1`, following the Dutch API Design Rules: problem+json errors, the
//! `API-Version` header and the security headers on every response, no trailing-slash
//! redirects, and the OpenAPI document at `/v1/openapi.json`. An adapter over
//! `knooppunt-services`: it turns a request into a service call and the answer back, and
//! holds no rule of its own. Other surfaces served beside it (the Notificaties facade,
//! `knooppunt-facade`) pass through the same boundary ([`Mount`]).

pub use knooppunt_identity as identity;

/// The answers the console reads typed (the same types the API serializes).
pub use approvals::GrantOut;
pub use audit::AuditEntryOut;
pub use catalog::EventTypeOut;
pub use dead_letters::DeadLetterOut;
use knooppunt_server as server;
pub use principals::{CreatedOut as CreatedPrincipalOut, TokenOut};
pub use receipts::{EventOut as ReceivedEventOut, EventReceiptsOut, ReceiptOut, TakenOut};
pub use replays::ReplayOut;
pub use status::{
    BacklogLimitOut, BreakerOut, HubStatusOut, ShedOut, StoreUsageOut, SubscriptionStatusOut,
    TestOut,
};
pub use subscription_body::{
    AttemptOut, ClientCertificateOut, FilterBudgetOut, ProtocolSettingsOut, SinkAnswerOut,
    SubscriptionOut,
};
pub use subscriptions::SigningSecretOut;

/// The request bodies, typed (the same types the API reads and describes).
pub use approvals::{Decision, DecisionIn};
pub use catalog::EventTypeIn;
pub use events::{CloudEventIn, ExtensionValue};
pub use input::{Field, Problems, Time};
pub use principals::{NewPrincipal, PrincipalChange, ZgwClientIn};
pub use pull::{LockTokensIn, RejectIn, ReleaseIn};
pub use replays::ReplayIn;
pub use subscription_body::{
    ClientCertificateIn, FilterIn, ProtocolSettingsIn, SinkCredentialIn, Strings,
    SubscriptionRequest,
};

mod approvals;
mod audit;
pub mod auth;
mod backup;
mod catalog;
mod consent;
mod dead_letters;
mod document;
mod endpoints;
mod events;
pub mod ids;
pub mod input;
mod operations;
mod page;
mod principals;
pub mod problem;
mod pull;
mod receipts;
mod replays;
pub mod request;
mod status;
mod stream;
pub mod subscription_body;
pub mod subscriptions;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::middleware::map_response;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use endpoints::Endpoints;
use http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY,
    STRICT_TRANSPORT_SECURITY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use http::{HeaderName, HeaderValue};
use serde_json::Value;

use self::problem::ApiError;
use knooppunt_services::app::AppState;

/// The major version in every path.
pub const BASE_PATH: &str = "/v1";
/// The full API version, sent as `API-Version` on every response and in the OpenAPI document.
pub const API_VERSION: &str = "1.0.0";

/// A surface mounted beside the API, under the same boundary (request ids, audit of
/// refusals, panics answered, standard headers): its routes under `prefix`, and its own
/// answer to a body announced too large (`length` and the largest any route takes).
#[derive(Debug)]
pub struct Mount {
    pub prefix: &'static str,
    pub router: Router<Arc<AppState>>,
    pub too_large: fn(u64, usize) -> Response,
}

/// The API, and the surfaces `beside` it, under one boundary.
pub fn router(state: Arc<AppState>, mounts: Vec<Mount>) -> Router {
    let body_limit = state
        .publishing()
        .options
        .max_batch_bytes
        .max(state.publishing().options.max_event_bytes);
    // No route takes a larger body: the published batch's limit, or axum's default.
    let largest_body = body_limit.max(2 * 1024 * 1024);
    let mut router = Router::new();
    let mut refusals = Vec::new();
    for surface in mounts {
        router = router.nest(surface.prefix, surface.router);
        refusals.push((surface.prefix, surface.too_large));
    }
    let (api, _) = endpoints(body_limit).into_router();
    router
        .merge(api)
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            (Arc::clone(&state), largest_body, Arc::new(refusals)),
            boundary,
        ))
        .with_state(state)
}

/// `GET /v1/openapi.json`: the document, to anyone (CORS `*`).
pub(crate) async fn serve_openapi(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
) -> Response {
    let mut response = axum::Json(openapi(state.subscription_defaults())).into_response();
    response.headers_mut().insert(
        http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    response
}

/// The OpenAPI 3.0 document of the `/v1` API, with this hub's `config` defaults. It lints
/// clean with the ADR Spectral ruleset, and every answer of the test suite is checked
/// against it (`tests/src/openapi.rs`).
pub fn openapi(defaults: &knooppunt_store::ConfigDefaults) -> serde_json::Value {
    let mut document = serde_json::json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Knooppunt",
            "version": API_VERSION,
            "description": "Knooppunt is a CloudEvents 1.0 event hub following the NL GOV profile for CloudEvents. \
                            Subscribers register subscriptions (CloudEvents Subscriptions API); the hub delivers \
                            every matching event to their webhook. Every endpoint but this document needs a \
                            principal: `Authorization: Bearer <token>` with a token the hub issued, or with an \
                            access token (JWT) of an authorization server the hub trusts (OAuth NL GOV), or, on a \
                            hub serving HTTPS with client certificates, a PKIoverheid client certificate whose \
                            subject serialNumber is the OIN of a principal (mutual TLS; OpenAPI 3.0 has no scheme \
                            for it).",
            "contact": {"name": "Knooppunt maintainers", "email": "knooppunt@example.nl", "url": "https://example.nl/knooppunt"}
        },
        "servers": [{"url": BASE_PATH, "description": "This hub."}],
        "tags": [
            {"name": "events", "description": "Publishing events."},
            {"name": "subscriptions", "description": "Subscriptions: what to deliver where."},
            {"name": "dead letters", "description": "Deliveries the hub gave up on."},
            {"name": "pull", "description": "Pull subscriptions: receive events under a lock, then acknowledge, release, reject or renew."},
            {"name": "principals", "description": "Who may call the API (administrators)."},
            {"name": "event types", "description": "The catalog: what publishers say their events are."},
            {"name": "approvals", "description": "Which subscriptions a data owner lets receive its approval-required events."},
            {"name": "audit", "description": "The tamper-evident record of who changed what and who was refused."},
            {"name": "status", "description": "How deliveries fare: a subscription's backlog, breaker and latest attempts, test events, and the hub at a glance."},
            {"name": "api", "description": "This description of the API."}
        ],
        "security": [{"bearerAuth": []}, {"accessToken": []}],
        "paths": {},
        "components": {
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "description": "A token the hub issued to a principal (shown once when an administrator creates the principal or issues a new token; the hub keeps only its SHA-256), or one configured in the hub's file."},
                "accessToken": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "An access token (OAuth NL GOV profile) of an authorization server the hub trusts: signed RS256, PS256 or ES256 with a key of the issuer's JWKS, with the hub's audience, not expired. A claim names the principal (`sub` by default) and scopes give its roles (`knooppunt:publisher`, `knooppunt:subscriber`, `knooppunt:admin`, `knooppunt:metrics` by default)."}
            },
            "schemas": {
                "Config": subscription_body::config_schema(defaults),
                "StoredConfig": subscription_body::stored_config_schema(defaults)
            }
        }
    });
    let doc = endpoints(0).into_document();
    doc.finish(&mut document);
    document::add_boundary_answers(&mut document);
    document
}

/// Every endpoint of the API, each written once (see [`endpoints`](crate::endpoints)): the
/// router and the OpenAPI document are both made from it. `body_limit`: the most a
/// published body may be.
fn endpoints(body_limit: usize) -> Endpoints {
    let mut doc = Endpoints::new(body_limit);
    doc.schema::<problem::Problem<'static>>();
    events::describe(&mut doc);
    subscriptions::describe(&mut doc);
    consent::describe(&mut doc);
    status::describe(&mut doc);
    dead_letters::describe(&mut doc);
    pull::describe(&mut doc);
    stream::describe(&mut doc);
    replays::describe(&mut doc);
    receipts::describe(&mut doc);
    principals::describe(&mut doc);
    catalog::describe(&mut doc);
    approvals::describe(&mut doc);
    audit::describe(&mut doc);
    backup::describe(&mut doc);
    let this = document::Operation::new(
        "getOpenApi",
        "api",
        "This document. No authentication; CORS allows any origin.",
    )
    .public()
    .answer(
        "200",
        "The OpenAPI document.",
        Some(serde_json::json!({"type": "object"})),
    )
    .header(
        "200",
        "Access-Control-Allow-Origin",
        document::header("Always `*`."),
    );
    doc.get("/openapi.json", serve_openapi, &serde_json::json!([]), this);
    // The operators' endpoints: outside the API's base path and its description.
    doc.serve("/healthz", "get", get(operations::healthz));
    doc.serve("/readyz", "get", get(operations::readyz));
    doc.serve("/metrics", "get", get(operations::metrics));
    doc
}

/// Where the sink can reach the hub: the configured public URL, or the `Host` the client
/// used.
pub fn base_url(state: &AppState, headers: &http::HeaderMap) -> String {
    if let Some(url) = &state.public_url() {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// Middleware: what every request of the API and the facade passes on its way in and out,
/// in one step (a middleware of its own costs every request a boxed future, a cloned route
/// and a move of all inside it): a body announced too large is refused at once, the
/// request gets its audit context and answers with its id (a refusal on the audit trail),
/// a panic is answered 500, and every answer is a problem when it is an error and carries
/// the standard headers. (The body timeout is the server's: `server/body.rs`.)
async fn boundary(
    axum::extract::State((state, largest, beside)): axum::extract::State<(
        Arc<AppState>,
        usize,
        Arc<TooLarge>,
    )>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    let response = match refuse_announced_oversize(largest, &beside, &request) {
        Some(refused) => refused,
        None => even_if_it_panics(request::track(&state, request, next)).await,
    };
    standard_headers(response).await
}

/// The surfaces beside the API by their prefix, with their answer to a body too large.
type TooLarge = Vec<(&'static str, fn(u64, usize) -> Response)>;

/// A request whose `Content-Length` announces more than any route takes is answered 413 at
/// once, without waiting for a body that would be refused anyway: a problem under `/v1`,
/// a surface's own answer under its prefix (a `Fout` under the facade's `/api/v1`).
fn refuse_announced_oversize(
    largest: usize,
    beside: &TooLarge,
    request: &Request,
) -> Option<Response> {
    let length = request
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|length| *length > largest as u64)?;
    let path = request.uri().path();
    if path.starts_with("/v1/") {
        Some(
            ApiError::PayloadTooLarge(format!(
                "the request announces a body of {length} bytes (Content-Length); no request \
                 to this hub may be larger than {largest} bytes"
            ))
            .into_response(),
        )
    } else {
        beside
            .iter()
            .find(|(prefix, _)| {
                path.strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with('/'))
            })
            .map(|(_, too_large)| too_large(length, largest))
    }
}

/// Middleware: a request whose handling panics is answered 500 (problem+json, the panic in
/// the log) instead of its connection being dropped without an answer. What the handler
/// had done before stays as it was: every write is one store operation, done or not.
pub async fn answer_panics(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    match knooppunt_delivery::CatchUnwind::new(next.run(request)).await {
        Ok(response) => response,
        Err(why) => standard_headers(panicked(&why)).await,
    }
}

/// The response of `handling`, or 500 (problem+json, the panic in the log) if it panics.
async fn even_if_it_panics(handling: impl Future<Output = Response>) -> Response {
    match knooppunt_delivery::CatchUnwind::new(handling).await {
        Ok(response) => response,
        Err(why) => panicked(&why),
    }
}

fn panicked(why: &impl std::fmt::Display) -> Response {
    ApiError::Internal(format!("handling the request panicked: {why}")).into_response()
}

/// What `server.metrics_listen` serves: the metrics without a token, and health and
/// readiness.
pub fn metrics_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/metrics", get(operations::open_metrics))
        .route("/healthz", get(operations::healthz))
        .route("/readyz", get(operations::readyz))
        .fallback(not_found)
        .layer(map_response(standard_headers))
        .with_state(state)
}

async fn not_found(uri: http::Uri) -> ApiError {
    ApiError::NotFound(format!(
        "there is no resource at `{}`; the API is described at {BASE_PATH}/openapi.json",
        uri.path()
    ))
}

/// The headers every response carries: ADR /core/version-header and
/// /core/transport/security-headers.
pub const STANDARD_HEADERS: [(HeaderName, HeaderValue); 7] = [
    (
        HeaderName::from_static("api-version"),
        HeaderValue::from_static(API_VERSION),
    ),
    (
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    ),
    (REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
    (CACHE_CONTROL, HeaderValue::from_static("no-store")),
    (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
    (X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    (
        STRICT_TRANSPORT_SECURITY,
        HeaderValue::from_static("max-age=31536000; includeSubDomains"),
    ),
];

/// Adds [`STANDARD_HEADERS`], and makes any error response the framework produced on its
/// own (such as a path it could not decode) problem+json.
async fn standard_headers(response: Response) -> Response {
    let mut response = as_problem(response).await;
    let headers = response.headers_mut();
    // Grown once, not step by step as they are added.
    headers.reserve(STANDARD_HEADERS.len());
    for (name, value) in STANDARD_HEADERS {
        // The Notificaties API facade (`/api/v1`) answers with its own version.
        if !headers.contains_key(&name) {
            headers.insert(name, value);
        }
    }
    response
}

async fn as_problem(response: Response) -> Response {
    let status = response.status();
    let is_problem = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(problem::PROBLEM_JSON.as_bytes()));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let detail = String::from_utf8_lossy(&text).trim().to_owned();
    let problem = problem::Problem {
        kind: format!("urn:knooppunt:problem:http-{}", status.as_u16()),
        title: status.canonical_reason().unwrap_or("Error"),
        status: status.as_u16(),
        detail: if detail.is_empty() {
            status.to_string()
        } else {
            detail
        },
        invalid_params: &[],
        errors: None,
        oldest_cursor: None,
    };
    let mut response = (status, axum::Json(problem)).into_response();
    for (name, value) in &parts.headers {
        if name != CONTENT_TYPE && name != http::header::CONTENT_LENGTH {
            response.headers_mut().insert(name, value.clone());
        }
    }
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(problem::PROBLEM_JSON),
    );
    response
}

/// A JSON request body, with problem+json answers for the wrong content type (415), a body
/// over the limit (413) and malformed JSON (400).
/// The deepest nesting of arrays and objects a JSON request body may have (just inside
/// the JSON parser's own limit of 128).
const MAX_BODY_DEPTH: usize = 127;

pub(crate) struct JsonBody(pub(crate) Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if essence != "application/json" && !essence.ends_with("+json") {
            return Err(ApiError::UnsupportedMediaType(format!(
                "send the body as `application/json`, not `{content_type}`"
            )));
        }
        // Only a subscription's body has filters, whose own depth limit is worth naming.
        let has_filters = request.uri().path().starts_with("/v1/subscriptions");
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == http::StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge("the body is larger than the hub accepts".into())
                } else {
                    ApiError::unreadable_body(&rejection)
                }
            })?;
        // Nesting is measured first: the parser's own limit would call valid JSON invalid.
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let depth = knooppunt_event::json_depth(text);
            if depth > MAX_BODY_DEPTH {
                let filters = if has_filters {
                    " (filters are limited further by the hub's filters.max_depth)"
                } else {
                    ""
                };
                return Err(ApiError::invalid(
                    format!(
                        "the body is nested too deep: its arrays and objects nest {depth} levels, \
                         at most {MAX_BODY_DEPTH} are accepted{filters}"
                    ),
                    vec![],
                ));
            }
        }
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|error| {
                ApiError::invalid(format!("the body is not valid JSON: {error}"), vec![])
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every JSON request body the document describes refuses what the hub refuses: each
    /// of its objects is closed (but a CloudEvent's, whose extensions are open), and a body
    /// read over a representation names the same members as the reader's schema.
    #[test]
    fn every_request_body_is_closed_as_the_hub_reads_it() {
        use serde_json::Value;
        let document = openapi(&knooppunt_store::ConfigDefaults::default());
        let schemas = &document["components"]["schemas"];
        fn check(schemas: &Value, schema: &Value, at: &str, seen: &mut Vec<String>) {
            if let Some(name) = schema["$ref"].as_str() {
                let name = name.trim_start_matches("#/components/schemas/");
                if name == "CloudEvent" || seen.iter().any(|s| s == name) {
                    return;
                }
                seen.push(name.to_owned());
                return check(schemas, &schemas[name], name, seen);
            }
            if let Some(properties) = schema["properties"].as_object() {
                assert_eq!(schema["additionalProperties"], false, "{at} is open");
                for (name, property) in properties {
                    check(schemas, property, &format!("{at}.{name}"), seen);
                }
            }
            for key in ["items", "allOf", "anyOf", "oneOf"] {
                match &schema[key] {
                    Value::Array(all) => all.iter().for_each(|s| check(schemas, s, at, seen)),
                    one @ Value::Object(_) => check(schemas, one, at, seen),
                    _ => {}
                }
            }
        }
        let mut seen = Vec::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let body = &operation["requestBody"]["content"]["application/json"]["schema"];
                if !body.is_null() {
                    check(schemas, body, &format!("{method} {path}"), &mut seen);
                }
            }
        }
        assert!(seen.iter().any(|s| s == "SubscriptionRequest"), "{seen:?}");
        let members = |schema: &Value| {
            let mut names: Vec<String> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            names.sort();
            names
        };
        let read = input::body_schema::<
            subscription_body::SubscriptionRequest,
            subscription_body::SubscriptionOut,
        >();
        assert_eq!(members(&schemas["SubscriptionRequest"]), members(&read));
    }

    #[tokio::test]
    async fn a_handler_that_panics_is_answered_500_and_the_next_request_is_served() {
        async fn fails() -> &'static str {
            panic!("an index out of bounds")
        }
        let router: Router = Router::new()
            .route("/fails", get(fails))
            .route("/works", get(|| async { "fine" }))
            .route(
                "/page",
                get(|| async {
                    (
                        http::StatusCode::PAYLOAD_TOO_LARGE,
                        [(CONTENT_TYPE, "text/html")],
                        "<p>te groot</p>",
                    )
                }),
            )
            .layer(axum::middleware::from_fn(answer_panics));
        let request = |path: &str| {
            http::Request::get(path)
                .body(axum::body::Body::empty())
                .unwrap()
        };
        let answer = tower::ServiceExt::oneshot(router.clone(), request("/fails"))
            .await
            .unwrap();
        assert_eq!(answer.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            answer.headers()[http::header::CONTENT_TYPE],
            "application/problem+json"
        );
        assert!(answer.headers().contains_key("api-version"));
        let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
            .await
            .unwrap();
        let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(problem["status"], 500, "{problem}");
        assert!(
            !problem.to_string().contains("index out of bounds"),
            "the panic stays in the log: {problem}"
        );
        let answer = tower::ServiceExt::oneshot(router.clone(), request("/works"))
            .await
            .unwrap();
        assert_eq!(answer.status(), http::StatusCode::OK);
        // Around the console: its own error pages stay pages.
        let answer = tower::ServiceExt::oneshot(router, request("/page"))
            .await
            .unwrap();
        assert_eq!(answer.headers()[CONTENT_TYPE], "text/html");
    }
}
