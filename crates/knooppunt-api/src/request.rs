//! A request's audit context: every request gets an id (`X-Request-Id`, the client's when
//! it sends a usable one) and its trace id (`traceparent`), answers with its id, and a
//! refused one (401, 403) is recorded with whoever it named. Handlers record their changes
//! in the context of their caller (`RequestAudit::of`, beside the caller in `auth.rs`).

use std::sync::{Arc, Mutex};

use axum::extract::{FromRequestParts, MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use http::request::Parts;
use http::{HeaderValue, StatusCode};

use crate::identity::Principal;
use crate::problem::{ApiError, Refusal};
use knooppunt_event::trace_context::TraceContext;
use knooppunt_services::app::AppState;
use knooppunt_services::audit::{Context, Surface};

pub(crate) const REQUEST_ID: &str = "x-request-id";

/// A request's ids, and its actor once authenticated.
#[derive(Debug, Clone)]
pub struct RequestAudit {
    request_id: String,
    trace_id: Option<String>,
    actor: Arc<Mutex<Option<Actor>>>,
}

/// A principal's name and OIN.
type Actor = (String, Option<String>);

impl RequestAudit {
    pub fn identify(&self, principal: &Principal) {
        *self.actor.lock().expect("actor lock") = Some((
            principal.name.clone(),
            principal.oin.as_ref().map(|o| o.as_str().to_owned()),
        ));
    }

    /// The context of what `principal` does (a ZGW client acts as its principal).
    pub fn of_principal(&self, principal: &Principal) -> Context {
        Context {
            actor: Some(principal.name.clone()),
            actor_oin: principal.oin.as_ref().map(|o| o.as_str().to_owned()),
            request_id: Some(self.request_id.clone()),
            trace_id: self.trace_id.clone(),
            surface: Surface::Api,
        }
    }

    /// The context of what the ZGW client `client` does through the Notificaties facade
    /// (it acts as its principal): the trail names its entries as the facade does.
    pub fn of_client(&self, principal: &Principal, client: &str) -> Context {
        Context {
            surface: Surface::Facade {
                client: client.to_owned(),
            },
            ..self.of_principal(principal)
        }
    }

    /// The context of what a request without a principal does (a sink's callback).
    pub fn anonymous(&self) -> Context {
        Context {
            actor: None,
            actor_oin: None,
            request_id: Some(self.request_id.clone()),
            trace_id: self.trace_id.clone(),
            surface: Surface::Api,
        }
    }

    fn context(&self) -> Context {
        let actor = self.actor.lock().expect("actor lock").clone();
        Context {
            actor: actor.as_ref().map(|(name, _)| name.clone()),
            actor_oin: actor.and_then(|(_, oin)| oin),
            request_id: Some(self.request_id.clone()),
            trace_id: self.trace_id.clone(),
            surface: Surface::Api,
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RequestAudit {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<RequestAudit>()
            .cloned()
            .ok_or_else(|| ApiError::Internal("the request has no audit context".into()))
    }
}

/// A request id of the hub's own: this process's random prefix and a counter (no system
/// call per request, unlike a random UUID).
fn own_request_id() -> String {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static PREFIX: OnceLock<String> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..16].to_owned());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // `{prefix}-{n:x}`, without the formatting machinery (every request makes one).
    let mut id = String::with_capacity(prefix.len() + 17);
    id.push_str(prefix);
    id.push('-');
    let digits = (16 - n.leading_zeros() as usize / 4).max(1);
    for shift in (0..digits).rev() {
        id.push(char::from(
            b"0123456789abcdef"[(n >> (4 * shift)) as usize & 0xf],
        ));
    }
    id
}

/// A client's request id, if usable: 1 to 128 visible ASCII characters.
fn client_request_id(value: &HeaderValue) -> Option<String> {
    let text = value.to_str().ok()?;
    (!text.is_empty() && text.len() <= 128 && text.bytes().all(|b| b.is_ascii_graphic()))
        .then(|| text.to_owned())
}

/// The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`).
fn trace_id(value: &HeaderValue) -> Option<String> {
    let mut parts = value.to_str().ok()?.split('-');
    let (_, trace) = (parts.next()?, parts.next()?);
    (trace.len() == 32
        && trace.bytes().all(|b| b.is_ascii_hexdigit())
        && trace != "00000000000000000000000000000000")
        .then(|| trace.to_ascii_lowercase())
}

/// The trace context of the request's own hop (W3C `traceparent` and `tracestate`), when
/// it sends a valid one: a publish continues it.
pub fn hop_trace(headers: &http::HeaderMap) -> Option<TraceContext> {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    TraceContext::parse(text("traceparent")?, text("tracestate"))
}

/// Gives the request its audit context, answers with its id, and records a refusal.
pub(crate) async fn track(state: &AppState, mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    let audit = RequestAudit {
        request_id: headers
            .get(REQUEST_ID)
            .and_then(client_request_id)
            .unwrap_or_else(own_request_id),
        trace_id: headers.get("traceparent").and_then(trace_id),
        actor: Arc::default(),
    };
    // The route, not the path: a path can carry a secret (a validation token).
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = request.method().clone();
    request.extensions_mut().insert(audit.clone());
    let mut response = next.run(request).await;
    if let Ok(id) = HeaderValue::try_from(audit.request_id.as_str()) {
        response.headers_mut().insert(REQUEST_ID, id);
    }
    let status = response.status();
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        let detail = response.extensions().get::<Refusal>().map(|r| r.0.clone());
        let route = format!(
            "{method} {}",
            route.as_ref().map_or("(no route)", MatchedPath::as_str)
        );
        let unauthenticated = status == StatusCode::UNAUTHORIZED;
        state
            .audit()
            .request_refused(&audit.context(), unauthenticated, route, detail);
    }
    response
}
