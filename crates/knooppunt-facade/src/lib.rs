//! `/api/v1`: the VNG Notificaties API 1.0 for ZGW components, an adapter over the hub's
//! services: `kanalen.rs` (catalog entries), `notificaties.rs` (publishing, also Open
//! Notificaties' CloudEvents), `abonnementen.rs` (subscriptions). Its own authentication
//! (`auth.rs`: ZGW client JWTs, `identity::zgw`), its own problem shapes (`error.rs`: `Fout`,
//! `ValidatieFout` with `invalidParams` and their codes) and its own `API-version`; the
//! router, content negotiation and the document here.

mod abonnementen;
mod auth;
mod error;
mod kanalen;
mod notificaties;

use abonnementen::*;
pub use abonnementen::{AbonnementIn, AbonnementKanaalIn, CloudEventFilterIn};
use auth::*;
use error::*;
use kanalen::*;
pub use kanalen::{KanaalIn, KanalenQuery};
use notificaties::*;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use http::header::{AUTHORIZATION, CONTENT_TYPE, LOCATION};
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use knooppunt_event::notificatie::FieldError;

use serde::Serialize;

use serde_json::{Map, Value, json};

use knooppunt_api::base_url;

knooppunt_api::ids! {
    /// A kanaal's uuid (a catalog entry's id).
    KanaalId;
    /// An abonnement's uuid (a subscription's id).
    AbonnementId;
}

use knooppunt_api::request::RequestAudit;

use knooppunt_identity::zgw::{self, CONSUME, PUBLISH, ZgwClient};

use knooppunt_api::Field;
use knooppunt_services::app::AppState;
use knooppunt_services::zgw::{Kanaal, KanaalDraft, KanaalRefused, NaamProblem};
use serde::Deserialize;

/// The version of the Notificaties API served.
pub(crate) const ZGW_API_VERSION: &str = "1.0.0";

const API_VERSION: HeaderName = HeaderName::from_static("api-version");

/// The routes under `/api/v1`.
pub fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/kanaal", get(list_kanalen).post(create_kanaal))
        .route(
            "/kanaal/{uuid}",
            get(read_kanaal).put(change_kanaal).patch(change_kanaal),
        )
        .route("/notificaties", axum::routing::post(publish_notificatie))
        .route("/cloudevents", axum::routing::post(publish_cloudevent))
        .route(
            "/abonnement",
            get(list_abonnementen).post(create_abonnement),
        )
        .route(
            "/abonnement/{uuid}",
            get(read_abonnement)
                .put(replace_abonnement)
                .patch(patch_abonnement)
                .delete(delete_abonnement),
        )
        .route("/schema/openapi.yaml", get(document_yaml))
        .route("/schema/openapi.json", get(document_json))
        .fallback(|| async { ZgwError::NotFound("deze resource bestaat niet".into()) })
        .method_not_allowed_fallback(|method: http::Method| async move {
            ZgwError::MethodNotAllowed(method)
        })
        .layer(axum::middleware::from_fn(negotiate))
        .layer(axum::middleware::map_response(version))
}

/// Content negotiation as Open Notificaties (Django REST framework) does it: a client that
/// accepts no JSON gets 406, a body that is not JSON 415, in the API's `Fout` shape. The
/// OpenAPI document is served as asked, whatever the client accepts.
async fn negotiate(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Result<Response, ZgwError> {
    let headers = request.headers();
    let document = request.uri().path().contains("/schema/openapi.");
    if !document
        && let Some(accept) = headers.get(http::header::ACCEPT)
        && !accepts_json(accept.to_str().unwrap_or(""))
    {
        return Err(ZgwError::NotAcceptable);
    }
    // A body is there when its length is not 0 or it comes in chunks (as Django reads it:
    // a request without one is not parsed, so a method the resource lacks is answered 405).
    let with_body = headers
        .get(http::header::CONTENT_LENGTH)
        .is_some_and(|length| length.as_bytes() != b"0")
        || headers.contains_key(http::header::TRANSFER_ENCODING);
    if with_body {
        let media_type = headers
            .get(CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        let essence = media_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        // `/cloudevents` also takes a CloudEvent in the structured (`application/
        // cloudevents+json`) or binary (`ce-` headers) mode of the HTTP binding.
        let cloudevent = request.uri().path().ends_with("/cloudevents")
            && (essence == "application/cloudevents+json"
                || headers.contains_key("ce-specversion"));
        if essence != "application/json" && !cloudevent {
            return Err(ZgwError::UnsupportedMediaType(media_type));
        }
    }
    Ok(next.run(request).await)
}

/// Whether an `Accept` header admits JSON (`application/json`, `application/problem+json`,
/// `application/*` or `*/*`, with a quality above 0).
fn accepts_json(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                == Some(0.0)
        });
        !refused
            && matches!(
                media.as_str(),
                "*/*" | "application/*" | "application/json" | "application/problem+json"
            )
    })
}

async fn version(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(API_VERSION, HeaderValue::from_static(ZGW_API_VERSION));
    response
}

/// The answer `status` with `body` as JSON.
fn answer(status: StatusCode, body: &impl Serialize) -> Response {
    match serde_json::to_string(body) {
        Ok(text) => (
            status,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            text,
        )
            .into_response(),
        Err(error) => {
            ZgwError::Internal(format!("an answer did not serialize: {error}")).into_response()
        }
    }
}

/// A request body that must be a JSON object, or why it is not (in the API's shape).
fn json_object(body: &[u8]) -> Result<Map<String, Value>, Vec<FieldError>> {
    let problem = |code: &'static str, reason: String| {
        vec![FieldError {
            name: "nonFieldErrors".into(),
            code,
            reason,
        }]
    };
    match serde_json::from_slice(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(problem(
            "invalid",
            "Ongeldige data. Verwachtte een dictionary, kreeg een ander type.".into(),
        )),
        Err(error) => Err(problem(
            "parse_error",
            format!("JSON parse error - {error}"),
        )),
    }
}

/// 201 with a created resource, its `url` also as `Location`.
fn created(url: &str, body: &impl Serialize) -> Response {
    let mut response = answer(StatusCode::CREATED, body);
    if let Ok(url) = HeaderValue::try_from(url) {
        response.headers_mut().insert(LOCATION, url);
    }
    response
}

fn answer_text(status: StatusCode, body: &str) -> Response {
    (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body.to_owned(),
    )
        .into_response()
}

/// The answer to a body announced larger (`length`) than any route takes (`largest`).
pub fn too_large(length: u64, largest: usize) -> Response {
    ZgwError::TooLarge(format!(
        "het verzoek kondigt een body van {length} bytes aan (Content-Length); geen verzoek \
         aan deze API mag groter zijn dan {largest} bytes"
    ))
    .into_response()
}

/// `GET /api/v1/schema/openapi.yaml`: the Notificaties API 1.0 document with the operations
/// the hub serves (`assets/`), where ZGW clients look for it. No token needed.
async fn document_yaml() -> Response {
    (
        [(
            CONTENT_TYPE,
            HeaderValue::from_static("application/yaml; charset=utf-8"),
        )],
        include_str!("../assets/openapi.yaml"),
    )
        .into_response()
}

/// `GET /api/v1/schema/openapi.json`: the same document as JSON.
async fn document_json() -> Response {
    (
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        include_str!("../assets/openapi.json"),
    )
        .into_response()
}

fn invalid(name: &str, code: &'static str, reason: impl Into<String>) -> ZgwError {
    ZgwError::Invalid(vec![FieldError {
        name: name.to_owned(),
        code,
        reason: reason.into(),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store's conflict is the API's 409 in its `Fout` shape, as the `/v1` API answers
    /// it, not a server error.
    #[test]
    fn a_conflict_in_the_store_is_a_409_fout() {
        let response = ZgwError::from(knooppunt_store::StoreError::Conflict("id taken".into()))
            .into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(response.headers()[CONTENT_TYPE], "application/problem+json");
    }
}
