//! The console: the hub's own web pages at `/console` (a surface mounted beside the JSON
//! API, as the Notificaties facade is), for subscribers, data owners and
//! administrators. Server-rendered HTML (maud) in the NL Design System's components
//! (vendored CSS, `assets/console/`), readable without JavaScript; a small script of our own
//! only checks a subscription's filter as it is typed and refreshes live views.
//!
//! A page signs in once (a principal's token, or a client certificate) and then carries a
//! session cookie (`HttpOnly`, `SameSite=Strict`, `Secure` on HTTPS; `sessions.rs` holds
//! the rules). Every page reads, and every form acts, through the API itself, in-process,
//! as the signed-in principal ([`Console::call`]): what a role sees and may do is exactly
//! what the API allows it, and every change is on the same audit trail. Handlers here only
//! translate between forms, the API's JSON and HTML.

mod access;
mod admin;
mod assets;
mod catalog;
mod forms;
mod i18n;
mod layout;
mod owner;
mod subscriber;
mod subscription_form;
mod texts;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Request};
use axum::middleware::map_response;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, HOST, LOCATION, REFERRER_POLICY,
    STRICT_TRANSPORT_SECURITY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

use crate::identity::{Principal, Role};
use knooppunt_api::auth::Delegated;
pub use knooppunt_identity as identity;
use knooppunt_server as server;
use knooppunt_services::app::AppState;
use knooppunt_services::sessions::Live;

pub(crate) use self::i18n::Lang;

/// Where the console lives.
pub(crate) const BASE: &str = "/console";
/// The session cookie.
const SESSION_COOKIE: &str = "knooppunt_session";
/// The language cookie.
const LANG_COOKIE: &str = "knooppunt_lang";
/// The largest form the console accepts.
const MAX_FORM_BYTES: usize = 256 * 1024; // said in `refuse_large_forms`

/// The console's state: the hub, and the API router its pages call.
pub(crate) struct Console {
    pub(crate) state: Arc<AppState>,
    /// The operator's theme, as served (`assets::theme_css`), and its entity tag.
    theme_css: String,
    theme_tag: String,
    api: Router,
    /// Whether the hub itself serves HTTPS.
    https: bool,
}

/// The console's pages; `https` says whether the hub itself serves HTTPS (its cookies are
/// `Secure` then, as they are behind an `https://` public URL).
pub fn router(state: Arc<AppState>, https: bool) -> Router {
    let theme_css = assets::theme_css(state.console_theme());
    let console = Arc::new(Console {
        theme_tag: assets::theme_tag(&theme_css),
        theme_css,
        api: knooppunt_api::router(Arc::clone(&state), Vec::new()),
        state,
        https,
    });
    let pages = Router::new()
        .route("/", get(access::home))
        .route("/login", get(access::form).post(access::sign_in))
        .route("/logout", post(access::sign_out))
        .route("/language", get(access::language))
        .route("/assets/theme.css", get(assets::serve_theme))
        .route("/assets/{name}", get(assets::serve))
        .route(
            "/subscriptions",
            get(subscriber::list).post(subscription_form::create),
        )
        .route("/subscriptions/new", get(subscription_form::new_form))
        .route("/subscriptions/check", post(subscription_form::check))
        .route(
            "/subscriptions/{id}/check",
            post(subscription_form::check_existing),
        )
        .route(
            "/subscriptions/{id}",
            get(subscriber::detail).post(subscription_form::update),
        )
        .route(
            "/subscriptions/{id}/edit",
            get(subscription_form::edit_form),
        )
        .route("/subscriptions/{id}/redeliver", post(subscriber::redeliver))
        .route(
            "/subscriptions/{id}/signing-secret",
            post(subscriber::rotate),
        )
        .route("/subscriptions/{id}/delete", post(subscriber::delete))
        .route("/subscriptions/{id}/consent", post(subscriber::consent))
        .route("/subscriptions/{id}/receipts", get(subscriber::receipts))
        .route(
            "/subscriptions/{id}/dead-letters/{letter}",
            get(subscriber::dead_letter),
        )
        .route(
            "/subscriptions/{id}/dead-letters/{letter}/delete",
            post(subscriber::delete_dead_letter),
        )
        .route(
            "/subscriptions/{id}/replays/{replay}/cancel",
            post(subscriber::cancel_replay),
        )
        .route("/subscriptions/{id}/test", post(subscriber::test))
        .route(
            "/subscriptions/{id}/replays",
            post(subscriber::start_replay),
        )
        .route(
            "/subscriptions/{id}/replays/{replay}",
            get(subscriber::replay),
        )
        .route("/eventtypes", get(catalog::list).post(catalog::create))
        .route("/eventtypes/new", get(catalog::new_form))
        .route(
            "/eventtypes/{id}",
            get(catalog::detail).post(catalog::update),
        )
        .route("/eventtypes/{id}/edit", get(catalog::edit_form))
        .route("/eventtypes/{id}/delete", post(catalog::delete))
        .route("/approvals", get(owner::approvals))
        .route("/approvals/{entry}/{subscription}", post(owner::decide))
        .route("/receipts", get(owner::receipts))
        .route(
            "/principals",
            get(admin::principals).post(admin::create_principal),
        )
        .route(
            "/principals/{name}",
            get(admin::principal).post(admin::change_principal),
        )
        .route("/status", get(admin::status))
        .route("/audit", get(admin::audit))
        .route("/audit/verify", get(admin::verify_audit))
        .route("/audit/export", get(admin::export_audit))
        .fallback(layout::not_found)
        .layer(DefaultBodyLimit::max(MAX_FORM_BYTES))
        .layer(axum::middleware::from_fn(refuse_large_forms))
        .with_state(Arc::clone(&console));
    let secure = console.secure();
    Router::new()
        .nest(BASE, pages)
        .route("/", get(|| async { redirect(BASE) }))
        .layer(map_response(move |response| page_headers(response, secure)))
}

/// Middleware: a form larger than [`MAX_FORM_BYTES`] is refused with a page that says so,
/// at once when its `Content-Length` announces it, and in place of the extractor's plain
/// text when a body without one turns out too large.
async fn refuse_large_forms(request: Request, next: axum::middleware::Next) -> Response {
    let lang = lang_of(request.headers());
    let refuse = || {
        layout::refusal(
            lang,
            StatusCode::PAYLOAD_TOO_LARGE,
            lang.t(
                "Dit formulier is groter dan de 256 KiB die de console aanneemt; er is niets gedaan.",
                "This form is larger than the 256 KiB the console takes; nothing was done.",
            ),
        )
    };
    let announced = request
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|length| length > MAX_FORM_BYTES as u64) {
        return refuse();
    }
    let response = next.run(request).await;
    let plain = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/plain"));
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE && plain {
        return refuse();
    }
    response
}

/// A `303 See Other` to `to` (after a form, or to the sign-in page).
pub(crate) fn redirect(to: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::try_from(to) {
        response.headers_mut().insert(LOCATION, value);
    }
    response
}

/// The headers of every console response: a strict Content-Security-Policy (our own styles,
/// scripts and images only; no inline script or style; forms post only here), no framing,
/// no caching of pages (assets set their own), HSTS on HTTPS.
async fn page_headers(mut response: Response, secure: bool) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if !headers.contains_key(CACHE_CONTROL) {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if secure {
        headers.insert(
            STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000; includeSubDomains"),
        );
    }
    response
}

/// A cookie's value in a request.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// What the API answered an in-process call.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Value,
}

impl Answer {
    pub(crate) fn ok(&self) -> bool {
        self.status.is_success()
    }

    /// The status a page answers a refused form with: the API's own when the request was
    /// at fault, else 502 (the hub failed it, not the visitor).
    pub(crate) fn refused_status(&self) -> StatusCode {
        if self.status.is_client_error() {
            self.status
        } else {
            StatusCode::BAD_GATEWAY
        }
    }

    /// The cursor of the next page (from `Link: <…cursor=…>; rel="next"`).
    pub(crate) fn next_cursor(&self) -> Option<String> {
        let link = self.headers.get(http::header::LINK)?.to_str().ok()?;
        let start = link.find("cursor=")? + "cursor=".len();
        let rest = &link[start..];
        let end = rest.find(['&', '>']).unwrap_or(rest.len());
        Some(forms::decode(&rest[..end]))
    }

    /// The answer when the API did what was asked; else the page that says why not (a
    /// direct URL to another's subscription ends here, as "not found").
    // The error is the page the handler answers at once (`?`), never kept or passed on.
    #[allow(clippy::result_large_err)]
    pub(crate) fn checked(self, visitor: &Visitor) -> Result<Answer, Response> {
        if self.ok() {
            return Ok(self);
        }
        Err(layout::api_refusal(
            visitor.lang,
            visitor,
            self.status,
            &self.problem(),
        ))
    }

    /// The answer read as the API's own output type `T` (the type it serialized); one that
    /// is not is the page that says the hub could not answer (logged: the API and the
    /// console disagree).
    // The error is the page the handler answers at once (`?`), never kept or passed on.
    #[allow(clippy::result_large_err)]
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(
        &self,
        visitor: &Visitor,
    ) -> Result<T, Response> {
        self.typed()
            .ok_or_else(|| layout::failure(visitor.lang, StatusCode::BAD_GATEWAY))
    }

    /// A side answer read as `T` for a part of a page that shows a dash without it: none
    /// when the API refused (say, a subscription deleted meanwhile) or answered what the
    /// console cannot read (logged, as [`Answer::parse`]).
    pub(crate) fn read<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        // A refusal's body is a problem, not `T`: not read, not logged.
        if !self.ok() {
            return None;
        }
        self.typed()
    }

    /// The body as `T`, or none (logged: the API and the console disagree).
    fn typed<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        T::deserialize(&self.body)
            .map_err(|error| {
                tracing::error!(%error, "The console could not read an answer of the API.");
            })
            .ok()
    }

    /// The API's problem, as the page shows it: the detail and each invalid parameter.
    pub(crate) fn problem(&self) -> forms::Problem {
        forms::Problem::of(&self.body)
    }
}

impl Console {
    /// Whether the hub is served over HTTPS (cookies are `Secure` then).
    fn secure(&self) -> bool {
        self.https
            || self
                .state
                .public_url()
                .is_some_and(|url| url.starts_with("https://"))
    }

    /// Calls the API in-process as `visitor`'s principal: `path` is below the API's base
    /// (`/v1/…`, with its query).
    pub(crate) async fn call(
        &self,
        visitor: &Visitor,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Answer {
        let (status, headers, bytes) = self.exchange(visitor, method, path, body, None).await;
        Answer {
            status,
            headers,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    /// A GET of the API's answer as it came, in the media type `accept` asks for (the
    /// audit trail's JSON lines, say).
    pub(crate) async fn fetch(
        &self,
        visitor: &Visitor,
        path: &str,
        accept: &'static str,
    ) -> (StatusCode, HeaderMap, axum::body::Bytes) {
        self.exchange(visitor, Method::GET, path, None, Some(accept))
            .await
    }

    async fn exchange(
        &self,
        visitor: &Visitor,
        method: Method,
        path: &str,
        body: Option<&Value>,
        accept: Option<&'static str>,
    ) -> (StatusCode, HeaderMap, axum::body::Bytes) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(accept) = accept {
            request = request.header(http::header::ACCEPT, accept);
        }
        if let Some(host) = &visitor.host {
            request = request.header(HOST, host);
        }
        let body = match body {
            Some(body) => {
                request = request.header(CONTENT_TYPE, "application/json");
                Body::from(body.to_string())
            }
            None => Body::empty(),
        };
        let mut request = request.body(body).expect("a request of valid parts");
        request
            .extensions_mut()
            .insert(Delegated(Arc::clone(&visitor.principal)));
        let response = match self.api.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 64 * 1024 * 1024)
            .await
            .unwrap_or_default();
        (parts.status, parts.headers, bytes)
    }

    /// An irreversible action through the API, asked first ([`layout::confirm_first`]):
    /// `Err` with the confirmation page, or with the page of the API's refusal; the API's
    /// answer once done.
    // The error is the page the handler answers at once (`?`), never kept or passed on.
    #[allow(clippy::result_large_err)]
    pub(crate) async fn confirmed(
        &self,
        posted: &forms::Posted,
        ask: layout::Ask<'_>,
        method: Method,
        path: &str,
    ) -> Result<Answer, Response> {
        if let Some(page) = layout::confirm_first(posted, &ask) {
            return Err(page);
        }
        self.call(&posted.visitor, method, path, None)
            .await
            .checked(&posted.visitor)
    }

    /// [`Console::call`] for a GET.
    pub(crate) async fn get(&self, visitor: &Visitor, path: &str) -> Answer {
        self.call(visitor, Method::GET, path, None).await
    }
}

/// The signed-in visitor of a page: the session, its principal as it is now, the language.
#[derive(Debug, Clone)]
pub(crate) struct Visitor {
    pub(crate) principal: Arc<Principal>,
    pub(crate) csrf: String,
    pub(crate) lang: Lang,
    /// The request's `Host`, passed on to the API (it builds URLs from it).
    pub(crate) host: Option<HeaderValue>,
    /// The page's own path, with its query.
    pub(crate) path: String,
}

impl Visitor {
    pub(crate) fn has(&self, role: Role) -> bool {
        self.principal.is_admin() || self.principal.has(role)
    }
}

/// The language of a request: the cookie the language switch sets, else the browser's
/// first choice of Dutch or English, else Dutch.
pub(crate) fn lang_of(headers: &HeaderMap) -> Lang {
    match cookie(headers, LANG_COOKIE) {
        Some("en") => return Lang::En,
        Some("nl") => return Lang::Nl,
        _ => {}
    }
    let accepted = headers
        .get(http::header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    for language in accepted.split(',') {
        let tag = language.split(';').next().unwrap_or("").trim();
        if tag.starts_with("nl") {
            return Lang::Nl;
        }
        if tag.starts_with("en") {
            return Lang::En;
        }
    }
    Lang::Nl
}

impl FromRequestParts<Arc<Console>> for Visitor {
    type Rejection = Response;

    /// The session of the request's cookie; without a live one, a redirect to sign in (and
    /// back here afterwards).
    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Self::Rejection> {
        // The whole path: inside `/console` the router sees only the rest.
        let uri = parts
            .extensions
            .get::<axum::extract::OriginalUri>()
            .map_or(&parts.uri, |original| &original.0);
        let path = uri
            .path_and_query()
            .map_or_else(|| BASE.to_owned(), |p| p.as_str().to_owned());
        let lang = lang_of(&parts.headers);
        let to_login = || {
            let next = if parts.method == Method::GET {
                format!("?next={}", forms::encode(&path))
            } else {
                String::new()
            };
            redirect(&format!("{BASE}/login{next}"))
        };
        let Some(secret) = cookie(&parts.headers, SESSION_COOKIE) else {
            return Err(to_login());
        };
        let state = &console.state;
        let development = matches!(
            state.authentication(),
            crate::identity::Authentication::Disabled
        );
        let live = match state
            .sessions()
            .find(secret, state.principals(), development)
            .await
        {
            Ok(Some(live)) => live,
            Ok(None) => return Err(to_login()),
            Err(error) => {
                tracing::warn!(%error, "Reading a console session failed.");
                return Err(layout::failure(lang, StatusCode::SERVICE_UNAVAILABLE));
            }
        };
        let Live { session, principal } = live;
        Ok(Visitor {
            principal,
            csrf: session.csrf,
            lang,
            host: parts.headers.get(HOST).cloned(),
            path,
        })
    }
}
