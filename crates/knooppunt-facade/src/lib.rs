//! `/api/v1`: the VNG Notificaties API 1.0 for ZGW components (issue 24, in progress:
//! kanalen). Its own authentication (ZGW client JWTs, `identity::zgw`), its own problem
//! shapes (`Fout`, `ValidatieFout` with `invalidParams` and their codes) and its own
//! `API-version`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
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
use knooppunt_services::app::AppState;
use knooppunt_services::zgw::{Kanaal, KanaalDraft, KanaalRefused};

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

/// A refusal in the API's problem shapes.
#[derive(Debug)]
pub(crate) enum ZgwError {
    NotAuthenticated(String),
    PermissionDenied(String),
    NotFound(String),
    /// The request conflicts with what is stored (an id taken meanwhile).
    Conflict(String),
    Invalid(Vec<FieldError>),
    /// The store takes no writes now: nothing was kept, try again.
    Unavailable(String),
    /// The body is larger than any request of the API may be.
    TooLarge(String),
    /// The resource does not take this method (`Allow` lists those it takes).
    MethodNotAllowed(http::Method),
    /// The client accepts no answer the API gives (JSON).
    NotAcceptable,
    /// The body is not JSON (its media type).
    UnsupportedMediaType(String),
    Internal(String),
}

impl IntoResponse for ZgwError {
    fn into_response(self) -> Response {
        let (status, code, title, detail) = match &self {
            ZgwError::NotAuthenticated(why) => (
                StatusCode::UNAUTHORIZED,
                "not_authenticated",
                "Authenticatiegegevens zijn niet opgegeven of ongeldig.",
                why.clone(),
            ),
            ZgwError::PermissionDenied(why) => (
                StatusCode::FORBIDDEN,
                "permission_denied",
                "Je hebt geen toestemming om deze actie uit te voeren.",
                why.clone(),
            ),
            ZgwError::NotFound(why) => (
                StatusCode::NOT_FOUND,
                "not_found",
                "Niet gevonden.",
                why.clone(),
            ),
            ZgwError::Conflict(why) => (
                StatusCode::CONFLICT,
                "conflict",
                "Het verzoek botst met wat er al is.",
                why.clone(),
            ),
            ZgwError::Invalid(_) => (
                StatusCode::BAD_REQUEST,
                "invalid",
                "Invalid input.",
                "De invoer is ongeldig; zie invalidParams.".to_owned(),
            ),
            ZgwError::TooLarge(why) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_too_large",
                "Het verzoek is te groot.",
                why.clone(),
            ),
            ZgwError::MethodNotAllowed(method) => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "Methode niet toegestaan.",
                format!("Methode \"{method}\" niet toegestaan."),
            ),
            ZgwError::NotAcceptable => (
                StatusCode::NOT_ACCEPTABLE,
                "not_acceptable",
                "Kan niet voldoen aan de opgegeven Accept header.",
                "De API antwoordt in JSON (application/json); vraag daarom application/json \
                 of */* in de Accept header."
                    .to_owned(),
            ),
            ZgwError::UnsupportedMediaType(media_type) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Niet-ondersteund mediatype.",
                format!(
                    "Ongeldige media type \"{media_type}\" in aanvraag; stuur de body als \
                     application/json."
                ),
            ),
            ZgwError::Unavailable(cause) => {
                tracing::warn!(%cause, "A Notificaties API request found the store unavailable.");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "De dienst is tijdelijk niet beschikbaar.",
                    "er is niets bewaard; probeer het later opnieuw".to_owned(),
                )
            }
            ZgwError::Internal(cause) => {
                tracing::error!(%cause, "A Notificaties API request failed.");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "error",
                    "Er is een serverfout opgetreden.",
                    "de hub kon het verzoek niet afmaken; de beheerders vinden de oorzaak in het log"
                        .to_owned(),
                )
            }
        };
        let body = FoutOut {
            kind: format!("https://knooppunt.example.nl/ref/fouten/{code}/"),
            code,
            title,
            status: status.as_u16(),
            detail,
            instance: format!("urn:uuid:{}", uuid::Uuid::new_v4()),
            invalid_params: match &self {
                ZgwError::Invalid(errors) => Some(errors.iter().map(FieldErrorOut::from).collect()),
                _ => None,
            },
        };
        let text = serde_json::to_string(&body).unwrap_or_default();
        let mut response = (status, text).into_response();
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"notificaties\""),
            );
        }
        response
    }
}

impl From<knooppunt_services::subscribing::Refused> for ZgwError {
    fn from(refused: knooppunt_services::subscribing::Refused) -> Self {
        use knooppunt_services::subscribing::Refused;
        match refused {
            Refused::Forbidden(why) => ZgwError::PermissionDenied(why),
            // An abonnement has no token endpoint: its callback is its one address.
            Refused::Address(_, why) => invalid("callbackUrl", "invalid", why),
            Refused::Quota(exceeded) => exceeded.into(),
            Refused::Store(error) => error.into(),
            Refused::NotFound(id) => ZgwError::NotFound(format!("er is geen abonnement `{id}`")),
        }
    }
}

impl From<knooppunt_services::subscriptions::QuotaExceeded> for ZgwError {
    fn from(exceeded: knooppunt_services::subscriptions::QuotaExceeded) -> Self {
        ZgwError::PermissionDenied(exceeded.to_string())
    }
}

impl From<knooppunt_store::StoreError> for ZgwError {
    fn from(error: knooppunt_store::StoreError) -> Self {
        match error {
            knooppunt_store::StoreError::Unavailable(why) => ZgwError::Unavailable(why),
            knooppunt_store::StoreError::Conflict(why) => ZgwError::Conflict(why),
            other => ZgwError::Internal(other.to_string()),
        }
    }
}

/// A ZGW client that sent a valid token.
pub(crate) struct ZgwCaller(pub(crate) ZgwClient);

impl ZgwCaller {
    fn require_any(&self, scopes: &[&str]) -> Result<(), ZgwError> {
        if scopes.iter().any(|s| self.0.has_scope(s)) {
            return Ok(());
        }
        Err(ZgwError::PermissionDenied(format!(
            "client `{}` heeft geen van de scopes {}",
            self.0.client_id,
            scopes.join(" of ")
        )))
    }
}

impl FromRequestParts<Arc<AppState>> for ZgwCaller {
    type Rejection = ZgwError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let token = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .ok_or_else(|| {
                ZgwError::NotAuthenticated(
                    "stuur een JWT van de client: Authorization: Bearer <JWT>".into(),
                )
            })?;
        let options = &state.zgw;
        let mut client = None;
        let claims = zgw::verify(
            token,
            |id| {
                let found = options
                    .clients
                    .iter()
                    .find(|c| c.client_id == id)
                    .cloned()
                    .or_else(|| stored_client(state, id))?;
                let secret = found.secret.clone();
                client = Some(found);
                Some(secret)
            },
            knooppunt_store::now_ms() / 1000,
            options.max_token_age,
            options.leeway,
        )
        .map_err(|why| ZgwError::NotAuthenticated(why.to_string()))?;
        let client = client.expect("verified with its secret");
        debug_assert_eq!(claims.client_id, client.client_id);
        if let Some(request) = parts.extensions.get::<RequestAudit>() {
            request.identify(&client.principal());
        }
        Ok(ZgwCaller(client))
    }
}

/// A ZGW client set over the principals API: its principal (not disabled) and its secret
/// opened with the hub's keys.
fn stored_client(state: &AppState, client_id: &str) -> Option<ZgwClient> {
    let principal = state.principals.by_zgw_client(client_id)?;
    if principal.disabled {
        return None;
    }
    let stored = principal.zgw.as_ref()?;
    let keys = state.zgw.secret_keys.as_ref()?;
    let secret = keys
        .open(client_id, &stored.sealed_secret)
        .inspect_err(|why| {
            tracing::error!(client = client_id, %why, "A ZGW client's secret cannot be opened.")
        })
        .ok()?;
    Some(ZgwClient {
        client_id: client_id.to_owned(),
        secret,
        scopes: stored.scopes.clone(),
        oin: principal
            .oin
            .as_deref()
            .and_then(knooppunt_identity::Oin::parse),
        principal: state
            .principals
            .rights(&principal.name)
            .map(Arc::unwrap_or_clone),
    })
}

/// A `Fout` of the Notificaties API (problem details with its `code` and `instance`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FoutOut<'a> {
    #[serde(rename = "type")]
    kind: String,
    code: &'a str,
    title: &'a str,
    status: u16,
    detail: String,
    instance: String,
    /// For invalid input: every field's problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    invalid_params: Option<Vec<FieldErrorOut<'a>>>,
}

/// One invalid field of a `Fout`.
#[derive(Debug, Serialize)]
struct FieldErrorOut<'a> {
    name: &'a str,
    code: &'a str,
    reason: &'a str,
}

impl<'a> From<&'a FieldError> for FieldErrorOut<'a> {
    fn from(error: &'a FieldError) -> Self {
        FieldErrorOut {
            name: &error.name,
            code: error.code,
            reason: &error.reason,
        }
    }
}

/// A KANAAL as the Notificaties API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct KanaalOut {
    url: String,
    naam: String,
    /// Left out when there is none: the document makes it a URI, which "" is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    documentatie_link: Option<String>,
    filters: Vec<String>,
}

fn representation(base: &str, kanaal: &Kanaal) -> KanaalOut {
    KanaalOut {
        url: format!("{base}/api/v1/kanaal/{}", kanaal.id),
        naam: kanaal.naam.clone(),
        documentatie_link: kanaal.documentatie_link.clone(),
        filters: kanaal.filters.clone(),
    }
}

/// An ABONNEMENT as the Notificaties API shows it (`auth` is write-only: never returned).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AbonnementOut {
    url: String,
    callback_url: String,
    kanalen: Vec<FilterGroupOut>,
    send_cloudevents: bool,
    cloudevent_filters: Vec<CloudeventFilterOut>,
    /// When one abonnement is read: how its deliveries go.
    #[serde(skip_serializing_if = "Option::is_none")]
    bezorging: Option<BezorgingOut>,
}

/// A kanaal of an abonnement and the kenmerken it filters on.
#[derive(Debug, Serialize)]
struct FilterGroupOut {
    naam: String,
    filters: BTreeMap<String, String>,
}

/// One of an abonnement's `cloudeventFilters`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CloudeventFilterOut {
    type_substring: String,
    filters: BTreeMap<String, String>,
}

/// How an abonnement's deliveries go (`bezorging`, read-only; not in Open Notificaties).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct BezorgingOut {
    /// `actief`, `wachtend`, `uitgeschakeld` or `onbekend`.
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reden: Option<String>,
    achterstand: u64,
    dode_brieven: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    laatste_poging: Option<PogingOut>,
}

/// An abonnement's latest delivery attempt.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PogingOut {
    tijdstip: String,
    /// `delivered`, `retry` or `deadLetter`.
    uitkomst: &'static str,
    http_status: Option<u16>,
    fout: Option<String>,
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

/// `GET /api/v1/kanaal[?naam=]`: every kanaal (the 1.0 API does not page them).
async fn list_kanalen(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ZgwError> {
    caller.require_any(&[PUBLISH, CONSUME])?;
    let base = base_url(&state, &headers);
    let kanalen =
        knooppunt_services::zgw::kanalen(&state.catalog, query.get("naam").map(String::as_str));
    let body: Vec<KanaalOut> = kanalen.iter().map(|k| representation(&base, k)).collect();
    Ok(answer(StatusCode::OK, &body))
}

/// `GET /api/v1/kanaal/{uuid}`.
async fn read_kanaal(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
    Path(uuid): Path<KanaalId>,
) -> Result<Response, ZgwError> {
    caller.require_any(&[PUBLISH, CONSUME])?;
    let kanaal = knooppunt_services::zgw::kanaal(&state.catalog, &uuid)
        .ok_or_else(|| ZgwError::NotFound(format!("er is geen kanaal `{uuid}`")))?;
    Ok(answer(
        StatusCode::OK,
        &representation(&base_url(&state, &headers), &kanaal),
    ))
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

/// The body of `POST /api/v1/kanaal`, every problem reported.
fn read_draft(body: &[u8]) -> Result<KanaalDraft, Vec<FieldError>> {
    draft_of(&json_object(body)?)
}

/// A kanaal's fields, every problem reported.
fn draft_of(object: &Map<String, Value>) -> Result<KanaalDraft, Vec<FieldError>> {
    let field = |name: &str, code: &'static str, reason: String| FieldError {
        name: name.to_owned(),
        code,
        reason,
    };
    let mut errors = Vec::new();
    let naam = match object.get("naam") {
        None => {
            errors.push(field("naam", "required", "Dit veld is vereist.".into()));
            String::new()
        }
        Some(Value::String(naam)) if naam.trim().is_empty() => {
            errors.push(field(
                "naam",
                "blank",
                "Dit veld mag niet leeg zijn.".into(),
            ));
            String::new()
        }
        Some(Value::String(naam)) if naam.chars().count() > 50 => {
            errors.push(field(
                "naam",
                "max_length",
                "Zorg ervoor dat dit veld niet meer dan 50 karakters bevat.".into(),
            ));
            String::new()
        }
        // A kanaal's name is part of its events' type: no dots, no white space.
        Some(Value::String(naam))
            if !naam
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
        {
            errors.push(field(
                "naam",
                "invalid",
                "Een kanaalnaam bestaat uit letters, cijfers, `-` en `_`.".into(),
            ));
            String::new()
        }
        Some(Value::String(naam)) => naam.clone(),
        Some(_) => {
            errors.push(field("naam", "invalid", "Geen geldige string.".into()));
            String::new()
        }
    };
    let null = |name: &str| FieldError {
        name: name.to_owned(),
        code: "null",
        reason: "Dit veld mag niet leeg zijn.".into(),
    };
    let documentatie_link = match object.get("documentatieLink") {
        None => None,
        Some(Value::Null) => {
            errors.push(null("documentatieLink"));
            None
        }
        Some(Value::String(link)) if link.is_empty() => None,
        Some(Value::String(link)) if link.chars().count() > 200 => {
            errors.push(field(
                "documentatieLink",
                "max_length",
                "Zorg ervoor dat dit veld niet meer dan 200 karakters bevat.".into(),
            ));
            None
        }
        Some(Value::String(link))
            if link.starts_with("https://") || link.starts_with("http://") =>
        {
            Some(link.clone())
        }
        Some(_) => {
            errors.push(field(
                "documentatieLink",
                "invalid",
                "Voer een geldige URL in.".into(),
            ));
            None
        }
    };
    let mut filters = Vec::new();
    match object.get("filters") {
        None => {}
        Some(Value::Null) => errors.push(null("filters")),
        Some(Value::Array(items)) if items.len() <= 100 => {
            for (n, item) in items.iter().enumerate() {
                match item.as_str() {
                    Some(text) if !text.is_empty() && text.chars().count() <= 100 => {
                        filters.push(text.to_owned())
                    }
                    _ => errors.push(field(
                        &format!("filters.{n}"),
                        "invalid",
                        "Een filter is een kenmerknaam van 1 tot 100 karakters.".into(),
                    )),
                }
            }
        }
        Some(_) => errors.push(field(
            "filters",
            "not_a_list",
            "Verwachtte een lijst met items (ten hoogste 100).".into(),
        )),
    }
    if errors.is_empty() {
        Ok(KanaalDraft {
            naam,
            documentatie_link,
            filters,
        })
    } else {
        Err(errors)
    }
}

/// `POST /api/v1/kanaal`: registers a kanaal (scope `notificaties.publiceren`), unique by
/// name; 201 with its `url` (and `Location`).
async fn create_kanaal(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ZgwError> {
    caller.require_any(&[PUBLISH])?;
    let draft = read_draft(&body).map_err(ZgwError::Invalid)?;
    let principal = caller.0.principal();
    let action = |entry: &knooppunt_store::CatalogEntry| {
        kanaal_action(
            knooppunt_services::audit::ActionName::KanaalCreate,
            entry,
            &caller.0.client_id,
        )
    };
    let made = async {
        let entry = knooppunt_services::zgw::kanaal_entry(&state.catalog, &caller.0, draft)?;
        let context = audit.of_principal(&principal);
        Ok(
            knooppunt_services::cataloging::create(&state, &context, &principal, entry, action)
                .await?,
        )
    };
    let entry = made.await.map_err(kanaal_refusal)?;
    let kanaal =
        Kanaal::of(&entry).ok_or_else(|| ZgwError::Internal("a kanaal reads back".into()))?;
    let body = representation(&base_url(&state, &headers), &kanaal);
    Ok(created(&body.url, &body))
}

/// `PUT /api/v1/kanaal/{uuid}` (scope `notificaties.publiceren`, the client that registered
/// it): replaces its documentation link and filters, as Open Notificaties does when
/// `register_kanalen` runs again; its name may not change. 200 with the kanaal. `PATCH`:
/// the same with only the fields sent.
async fn change_kanaal(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    method: http::Method,
    headers: HeaderMap,
    Path(uuid): Path<KanaalId>,
    body: Bytes,
) -> Result<Response, ZgwError> {
    let mut object = json_object(&body).map_err(ZgwError::Invalid)?;
    let partial = method == http::Method::PATCH;
    caller.require_any(&[PUBLISH])?;
    let existing = knooppunt_services::zgw::kanaal(&state.catalog, &uuid)
        .ok_or_else(|| ZgwError::NotFound(format!("er is geen kanaal `{uuid}`")))?;
    if partial {
        // What a patch leaves out stays as it is.
        let now = serde_json::to_value(representation("", &existing))
            .map_err(|error| ZgwError::Internal(error.to_string()))?;
        for name in ["naam", "documentatieLink", "filters"] {
            if let (false, Some(value)) = (object.contains_key(name), now.get(name)) {
                object.insert(name.to_owned(), value.clone());
            }
        }
    }
    let draft = draft_of(&object).map_err(ZgwError::Invalid)?;
    let principal = caller.0.principal();
    let action = |entry: &knooppunt_store::CatalogEntry| {
        kanaal_action(
            knooppunt_services::audit::ActionName::KanaalUpdate,
            entry,
            &caller.0.client_id,
        )
    };
    let replaced = async {
        let entry = knooppunt_services::zgw::kanaal_update(&caller.0, &existing, draft)?;
        let context = audit.of_principal(&principal);
        Ok(knooppunt_services::cataloging::replace(
            &state,
            &context,
            &principal,
            (&existing.id, entry),
            action,
        )
        .await?)
    };
    let entry = replaced
        .await
        .map_err(kanaal_refusal)?
        .ok_or_else(|| ZgwError::NotFound(format!("er is geen kanaal `{uuid}`")))?;
    let kanaal =
        Kanaal::of(&entry).ok_or_else(|| ZgwError::Internal("a kanaal reads back".into()))?;
    Ok(answer(
        StatusCode::OK,
        &representation(&base_url(&state, &headers), &kanaal),
    ))
}

/// A kanaal's registration or change as the audit trail keeps it.
fn kanaal_action(
    name: knooppunt_services::audit::ActionName,
    entry: &knooppunt_store::CatalogEntry,
    client_id: &str,
) -> knooppunt_services::audit::Action {
    let kanaal = Kanaal::of(entry);
    knooppunt_services::audit::Action::new(
        name,
        format!("eventtype/{}", entry.id),
        json!({"naam": kanaal.as_ref().map(|k| &k.naam),
               "filters": kanaal.as_ref().map(|k| &k.filters),
               "client": client_id}),
    )
}

/// A kanaal the catalog did not take, in the API's shapes.
fn kanaal_refusal(why: KanaalRefused) -> ZgwError {
    match why {
        KanaalRefused::Taken => ZgwError::Invalid(vec![FieldError {
            name: "naam".into(),
            code: "unique",
            reason: "Kanaal met deze naam bestaat al.".into(),
        }]),
        KanaalRefused::Renamed => ZgwError::Invalid(vec![FieldError {
            name: "naam".into(),
            code: "wijzigen-niet-toegelaten",
            reason: "Dit veld mag niet gewijzigd worden.".into(),
        }]),
        KanaalRefused::Catalog(knooppunt_services::catalog::Refused::Store(error)) => error.into(),
        KanaalRefused::Catalog(knooppunt_services::catalog::Refused::Forbidden(why)) => {
            ZgwError::PermissionDenied(why)
        }
        KanaalRefused::Catalog(other) => ZgwError::Invalid(vec![FieldError {
            name: "nonFieldErrors".into(),
            code: "invalid",
            reason: other.to_string(),
        }]),
    }
}

/// The principal a publishing client acts as, once its scope and the pipeline's rule
/// (the publisher role) allow it to publish, asked before its body is read.
fn publisher(
    state: &AppState,
    caller: &ZgwCaller,
) -> Result<knooppunt_identity::Principal, ZgwError> {
    caller.require_any(&[PUBLISH])?;
    let principal = caller.0.principal();
    state
        .publishing
        .may_publish(&principal, 1)
        .map_err(ZgwError::PermissionDenied)?;
    Ok(principal)
}

/// `POST /api/v1/notificaties` (scope `notificaties.publiceren`): the notificatie becomes a
/// CloudEvent (`knooppunt_event::notificatie`) published through the hub's pipeline as the
/// client's principal (durable before the answer, routed to CloudEvents subscriptions);
/// 201 with the notificatie as sent.
async fn publish_notificatie(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ZgwError> {
    use knooppunt_event::notificatie::Notificatie;
    let principal = publisher(&state, &caller)?;
    let text = std::str::from_utf8(&body).map_err(|_| {
        ZgwError::Invalid(vec![FieldError {
            name: "nonFieldErrors".into(),
            code: "parse_error",
            reason: "De body is geen UTF-8.".into(),
        }])
    })?;
    let notificatie = Notificatie::read(text).map_err(ZgwError::Invalid)?;
    knooppunt_services::zgw::check_notificatie(
        &state.catalog,
        &notificatie,
        knooppunt_store::now_ms(),
    )
    .map_err(ZgwError::Invalid)?;
    let event = notificatie
        .to_event(&caller.0.source(), &uuid::Uuid::now_v7().to_string())
        .map_err(|violations| {
            ZgwError::Invalid(vec![FieldError {
                name: "nonFieldErrors".into(),
                code: "invalid",
                reason: format!("De notificatie is als CloudEvent ongeldig: {violations}"),
            }])
        })?;
    state
        .publishing
        .accept(
            &principal,
            vec![event.into()],
            false,
            knooppunt_api::request::hop_trace(&headers),
        )
        .await
        .map_err(|refused| match refused {
            knooppunt_services::ingest::Refused::Invalid(problems) => {
                ZgwError::Invalid(vec![FieldError {
                    name: "nonFieldErrors".into(),
                    code: "invalid",
                    reason: format!("De notificatie is als CloudEvent ongeldig: {problems:?}"),
                }])
            }
            knooppunt_services::ingest::Refused::Forbidden(why) => ZgwError::PermissionDenied(why),
            knooppunt_services::ingest::Refused::Store(error) => error.into(),
            knooppunt_services::ingest::Refused::Full(full) => ZgwError::Unavailable(full.detail),
        })?;
    // 201: what the ZGW clients in use expect of a create (the 1.0 document says 200).
    Ok(answer_text(StatusCode::CREATED, notificatie.json()))
}

/// `POST /api/v1/cloudevents` (scope `notificaties.publiceren`), as Open Notificaties serves
/// it (experimental): a CloudEvent, as JSON (`application/json` or
/// `application/cloudevents+json`) or in binary mode, published through the hub's pipeline
/// as the client's principal like any event (durable before the answer, the catalog, the
/// approvals, the audit of publishing); 201 with the event.
async fn publish_cloudevent(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ZgwError> {
    use knooppunt_event::binding::http::{self as binding, Message};
    let principal = publisher(&state, &caller)?;
    let invalid = |violations: &knooppunt_event::Violations| {
        ZgwError::Invalid(
            violations
                .iter()
                .map(|v| FieldError {
                    name: if v.attribute.is_empty() {
                        "nonFieldErrors".to_owned()
                    } else {
                        v.attribute.clone()
                    },
                    code: "invalid",
                    reason: v.detail.clone(),
                })
                .collect(),
        )
    };
    let received = if headers.contains_key("ce-specversion") {
        match binding::decode(&headers, &body) {
            Ok(Message::Single(event)) => *event,
            Ok(Message::Batch(_)) => {
                return Err(ZgwError::Invalid(vec![FieldError {
                    name: "nonFieldErrors".into(),
                    code: "invalid",
                    reason: "Eén CloudEvent per verzoek; een batch kan op /v1/events.".into(),
                }]));
            }
            Err(binding::DecodeError::Invalid(violations)) => return Err(invalid(&violations)),
            Err(other) => return Err(ZgwError::UnsupportedMediaType(other.to_string())),
        }
    } else {
        knooppunt_event::format::json::decode_event(&body).map_err(|v| invalid(&v))?
    };
    let answer = received.to_json().into_owned();
    let receipts = state
        .publishing
        .accept(
            &principal,
            vec![received],
            false,
            knooppunt_api::request::hop_trace(&headers),
        )
        .await
        .map_err(|refused| match refused {
            knooppunt_services::ingest::Refused::Invalid(problems) => {
                let mut errors = Vec::new();
                for (_, violations) in &problems {
                    if let ZgwError::Invalid(found) = invalid(violations) {
                        errors.extend(found);
                    }
                }
                ZgwError::Invalid(errors)
            }
            knooppunt_services::ingest::Refused::Forbidden(why) => ZgwError::PermissionDenied(why),
            knooppunt_services::ingest::Refused::Store(error) => error.into(),
            knooppunt_services::ingest::Refused::Full(full) => ZgwError::Unavailable(full.detail),
        })?;
    // A repeat is acknowledged, not routed again: only an identical one is answered 201.
    for receipt in &receipts {
        if state.publishing.repeat_differs(receipt, &answer).await? {
            return Err(ZgwError::Invalid(vec![FieldError {
                name: "id".into(),
                code: "unique",
                reason: format!(
                    "Een CloudEvent met source `{}` en id `{}` is al ontvangen (volgnummer {}) \
                     met een andere inhoud; dit event is niet doorgegeven. Geef een nieuw \
                     event een nieuw id.",
                    receipt.source, receipt.id, receipt.sequence
                ),
            }]));
        }
    }
    Ok(answer_text(StatusCode::CREATED, &answer))
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

fn abonnement_representation(
    base: &str,
    abonnement: &knooppunt_services::zgw::Abonnement,
) -> AbonnementOut {
    AbonnementOut {
        url: format!("{base}/api/v1/abonnement/{}", abonnement.id),
        callback_url: abonnement.callback_url.clone(),
        kanalen: kanalen_of(abonnement),
        send_cloudevents: abonnement.send_cloudevents,
        cloudevent_filters: abonnement
            .cloudevent_filters
            .iter()
            .map(|(substring, filters)| CloudeventFilterOut {
                type_substring: substring.clone(),
                filters: filters.clone(),
            })
            .collect(),
        bezorging: None,
    }
}

/// An abonnement's kanalen with their filters, as the API shows them.
fn kanalen_of(abonnement: &knooppunt_services::zgw::Abonnement) -> Vec<FilterGroupOut> {
    abonnement
        .kanalen
        .iter()
        .map(|(naam, filters)| FilterGroupOut {
            naam: naam.clone(),
            filters: filters.clone(),
        })
        .collect()
}

fn invalid(name: &str, code: &'static str, reason: impl Into<String>) -> ZgwError {
    ZgwError::Invalid(vec![FieldError {
        name: name.to_owned(),
        code,
        reason: reason.into(),
    }])
}

/// The body of `POST /api/v1/abonnement`, every problem reported.
fn read_abonnement_draft(
    body: &[u8],
) -> Result<knooppunt_services::zgw::AbonnementDraft, Vec<FieldError>> {
    let field = |name: &str, code: &'static str, reason: &str| FieldError {
        name: name.to_owned(),
        code,
        reason: reason.to_owned(),
    };
    let object = json_object(body)?;
    let mut errors = Vec::new();
    let mut text = |name: &str, max: usize| match object.get(name) {
        None | Some(Value::Null) => {
            errors.push(field(name, "required", "Dit veld is vereist."));
            String::new()
        }
        Some(Value::String(t)) if t.trim().is_empty() => {
            errors.push(field(name, "blank", "Dit veld mag niet leeg zijn."));
            String::new()
        }
        Some(Value::String(t)) if t.chars().count() > max => {
            errors.push(field(
                name,
                "max_length",
                &format!("Zorg ervoor dat dit veld niet meer dan {max} karakters bevat."),
            ));
            String::new()
        }
        Some(Value::String(t)) => t.clone(),
        Some(_) => {
            errors.push(field(name, "invalid", "Geen geldige string."));
            String::new()
        }
    };
    let callback_url = text("callbackUrl", 200);
    let auth = text("auth", 1000);
    let (send_cloudevents, cloudevent_filters) = cloudevent_fields(&object, &mut errors);
    let mut kanalen = Vec::new();
    match object.get("kanalen") {
        // An abonnement of CloudEvents alone needs no kanaal.
        None | Some(Value::Null) if !cloudevent_filters.is_empty() => {}
        Some(Value::Array(items)) if items.is_empty() && !cloudevent_filters.is_empty() => {}
        Some(Value::Array(items)) if !items.is_empty() && items.len() <= 100 => {
            for (n, item) in items.iter().enumerate() {
                let naam = item.get("naam").and_then(Value::as_str).unwrap_or_default();
                if naam.is_empty() {
                    errors.push(field(
                        &format!("kanalen.{n}.naam"),
                        "required",
                        "Dit veld is vereist.",
                    ));
                    continue;
                }
                let mut filters = std::collections::BTreeMap::new();
                match item.get("filters") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(map)) => {
                        for (key, value) in map {
                            match value.as_str() {
                                Some(v) if !v.is_empty() && v.chars().count() <= 1000 => {
                                    filters.insert(key.clone(), v.to_owned());
                                }
                                _ => errors.push(field(
                                    &format!("kanalen.{n}.filters.{key}"),
                                    "invalid",
                                    "Een filterwaarde is een string van 1 tot 1000 karakters.",
                                )),
                            }
                        }
                    }
                    Some(_) => errors.push(field(
                        &format!("kanalen.{n}.filters"),
                        "not_a_dict",
                        "Verwachtte een dictionary van items, maar kreeg een ander type.",
                    )),
                }
                kanalen.push((naam.to_owned(), filters));
            }
        }
        None | Some(Value::Null) => {
            errors.push(field("kanalen", "required", "Dit veld is vereist."))
        }
        Some(_) => errors.push(field(
            "kanalen",
            "invalid",
            "Een lijst van 1 tot 100 kanalen met hun filters.",
        )),
    }
    if errors.is_empty() {
        Ok(knooppunt_services::zgw::AbonnementDraft {
            callback_url,
            auth,
            kanalen,
            send_cloudevents,
            cloudevent_filters,
        })
    } else {
        Err(errors)
    }
}

/// `sendCloudevents` and `cloudeventFilters` (Open Notificaties' additions, experimental
/// there): per filter a substring of the types and filters on the members of the data.
fn cloudevent_fields(
    object: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> (bool, Vec<knooppunt_services::zgw::CloudEventFilter>) {
    let mut problem = |name: String, reason: &str| {
        errors.push(FieldError {
            name,
            code: "invalid",
            reason: reason.to_owned(),
        })
    };
    let send = match object.get("sendCloudevents") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(send)) => *send,
        Some(_) => {
            problem("sendCloudevents".into(), "Must be a valid boolean.");
            false
        }
    };
    let mut groups = Vec::new();
    match object.get("cloudeventFilters") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) if items.len() <= 100 => {
            for (n, group) in items.iter().enumerate() {
                let substring = match group.get("typeSubstring").and_then(Value::as_str) {
                    Some(s) if !s.is_empty() && s.chars().count() <= 255 => s.to_owned(),
                    _ => {
                        problem(
                            format!("cloudeventFilters.{n}.typeSubstring"),
                            "Een typeSubstring is een string van 1 tot 255 karakters.",
                        );
                        continue;
                    }
                };
                let mut filters = std::collections::BTreeMap::new();
                match group.get("filters") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(members)) if members.len() <= 100 => {
                        for (key, value) in members {
                            match value.as_str() {
                                Some(v)
                                    if !key.is_empty()
                                        && key.chars().count() <= 100
                                        && v.chars().count() <= 1000 =>
                                {
                                    filters.insert(key.clone(), v.to_owned());
                                }
                                _ => problem(
                                    format!("cloudeventFilters.{n}.filters.{key}"),
                                    "Een filter is een sleutel van 1 tot 100 en een waarde \
                                     van ten hoogste 1000 karakters.",
                                ),
                            }
                        }
                    }
                    Some(_) => problem(
                        format!("cloudeventFilters.{n}.filters"),
                        "Verwachtte een dictionary van ten hoogste 100 items.",
                    ),
                }
                groups.push((substring, filters));
            }
        }
        Some(_) => problem(
            "cloudeventFilters".into(),
            "Een lijst van ten hoogste 100 filters (typeSubstring, filters).",
        ),
    }
    if !send && !groups.is_empty() {
        problem(
            "cloudeventFilters".into(),
            "cloudeventFilters gelden alleen met sendCloudevents: true.",
        );
    }
    (send, groups)
}

/// The abonnement `draft` as subscription `id` of the caller, checked (agreed by its
/// callback), once its kanalen are as Open Notificaties requires, the hub's checks of a new
/// subscription passed (the same as for the REST API: [`knooppunt_services::subscribing::check`]), and
/// its callback answered the test notificatie (2xx).
async fn checked_abonnement(
    state: &AppState,
    caller: &ZgwCaller,
    draft: &knooppunt_services::zgw::AbonnementDraft,
    id: &str,
) -> Result<knooppunt_services::subscribing::Checked<'static>, ZgwError> {
    let filters = knooppunt_services::zgw::abonnement_filters(&state.catalog, draft)
        .map_err(ZgwError::Invalid)?;
    let criteria = knooppunt_filter::Criteria {
        source: None,
        types: None,
        filters: knooppunt_filter::Filter::list_from_json(
            &filters,
            "filters",
            &state.filter_limits,
        )
        .map_err(|errors| invalid("kanalen", "invalid", format!("{errors:?}")))?,
    };
    knooppunt_api::subscription_body::check_sink(&draft.callback_url, state.allow_http_sinks)
        .map_err(|why| invalid("callbackUrl", "invalid", why))?;
    let subscription = knooppunt_services::zgw::subscription_of(
        &caller.0,
        id.to_owned(),
        draft,
        filters,
        &state.subscription_defaults,
    )
    .map_err(|why| invalid("callbackUrl", "invalid", why))?;
    let new = knooppunt_services::subscribing::New {
        subscription,
        criteria,
        consent: knooppunt_services::subscribing::Consent::Agreed,
    };
    let checked = knooppunt_services::subscribing::check(state, &caller.0.principal(), new).await?;
    let test = knooppunt_services::zgw::test_notificatie(knooppunt_store::now_ms());
    match state
        .deliverer
        .probe(
            &draft.callback_url,
            &[("Authorization", &draft.auth)],
            test.into_bytes(),
        )
        .await
    {
        Ok(status) if (200..300).contains(&status) => {}
        Ok(status) => {
            return Err(invalid(
                "callbackUrl",
                "invalid-callback-url",
                format!(
                    "De callback URL antwoordde HTTP {status} op de testnotificatie (kanaal `test`); verwacht 2xx."
                ),
            ));
        }
        Err(why) => {
            return Err(invalid(
                "callbackUrl",
                "invalid-callback-url",
                format!("De testnotificatie kwam niet aan: {why}"),
            ));
        }
    }
    Ok(checked)
}

/// The audit entry of an abonnement made or changed (`name`): its callback (redacted), its
/// kanalen as the API shows them, and the client.
fn abonnement_action(
    name: knooppunt_services::audit::ActionName,
    state: &AppState,
    stored: &knooppunt_store::Subscription,
    caller: &ZgwCaller,
) -> knooppunt_services::audit::Action {
    let kanalen = knooppunt_services::zgw::abonnement_of(&state.catalog, stored)
        .map(|abonnement| kanalen_of(&abonnement));
    knooppunt_services::audit::Action::new(
        name,
        format!("subscription/{}", stored.id),
        json!({"callbackUrl": knooppunt_delivery::redact_sink(&stored.sink),
               "kanalen": kanalen, "client": caller.0.client_id}),
    )
}

/// `POST /api/v1/abonnement` (scope `notificaties.consumeren`): the callback must take a
/// test notificatie (2xx) first; the abonnement is then a subscription of the hub, active at
/// once, with the hub's delivery (retries, breaker, SSRF guard, dead letters).
async fn create_abonnement(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ZgwError> {
    caller.require_any(&[CONSUME])?;
    let draft = read_abonnement_draft(&body).map_err(ZgwError::Invalid)?;
    let id = uuid::Uuid::now_v7().to_string();
    let checked = checked_abonnement(&state, &caller, &draft, &id).await?;
    let principal = caller.0.principal();
    let base = base_url(&state, &headers);
    let made = knooppunt_services::subscribing::create(
        &state,
        &audit.of_principal(&principal),
        checked,
        |stored| {
            abonnement_action(
                knooppunt_services::audit::ActionName::AbonnementCreate,
                &state,
                stored,
                &caller,
            )
        },
    )
    .await?;
    let abonnement = knooppunt_services::zgw::abonnement_of(&state.catalog, &made.stored)
        .ok_or_else(|| ZgwError::Internal("an abonnement reads back".into()))?;
    let body = abonnement_representation(&base, &abonnement);
    Ok(created(&body.url, &body))
}

/// The caller's abonnement `uuid`, or 404.
fn own_abonnement(
    state: &AppState,
    caller: &ZgwCaller,
    uuid: &str,
) -> Result<knooppunt_services::zgw::Abonnement, ZgwError> {
    state
        .subscriptions
        .get(uuid)
        .filter(|s| s.owner == caller.0.principal().name)
        .and_then(|s| knooppunt_services::zgw::abonnement_of(&state.catalog, &s))
        .ok_or_else(|| {
            ZgwError::NotFound(format!("er is geen abonnement `{uuid}` van deze client"))
        })
}

/// `GET /api/v1/abonnement`: the caller's abonnementen.
async fn list_abonnementen(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
) -> Result<Response, ZgwError> {
    caller.require_any(&[PUBLISH, CONSUME])?;
    let owner = caller.0.principal().name;
    let base = base_url(&state, &headers);
    let mut list = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (page, more) = state.subscriptions.page(
            &knooppunt_services::registry::Selection {
                owner: Some(&owner),
                ..Default::default()
            },
            cursor.as_deref(),
            1000,
        );
        list.extend(
            page.iter()
                .filter_map(|s| knooppunt_services::zgw::abonnement_of(&state.catalog, s))
                .map(|a| abonnement_representation(&base, &a)),
        );
        match page.last() {
            Some(last) if more => cursor = Some(last.id.clone()),
            _ => break,
        }
    }
    Ok(answer(StatusCode::OK, &list))
}

/// `GET /api/v1/abonnement/{uuid}`.
async fn read_abonnement(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
    Path(uuid): Path<AbonnementId>,
) -> Result<Response, ZgwError> {
    caller.require_any(&[PUBLISH, CONSUME])?;
    let abonnement = own_abonnement(&state, &caller, &uuid)?;
    let mut body = abonnement_representation(&base_url(&state, &headers), &abonnement);
    body.bezorging = Some(delivery_state(&state, &uuid).await?);
    Ok(answer(StatusCode::OK, &body))
}

/// How an abonnement's deliveries go, for its client (`bezorging`, read-only; not in Open
/// Notificaties, which shows nothing of it): the subscription's state, its backlog and
/// dead letters, and its latest attempt.
async fn delivery_state(state: &AppState, id: &str) -> Result<BezorgingOut, ZgwError> {
    let (status, reden) = match state.subscriptions.get(id).map(|s| s.status.clone()) {
        Some(knooppunt_store::Status::Active(_)) => ("actief", None),
        Some(knooppunt_store::Status::Pending { problem }) => ("wachtend", problem),
        Some(knooppunt_store::Status::Disabled(why)) => {
            ("uitgeschakeld", Some(why.reason().to_owned()))
        }
        None => ("onbekend", None),
    };
    let queue = state.queue_stats_of(id).await?;
    Ok(BezorgingOut {
        status,
        reden,
        achterstand: queue.as_ref().map_or(0, |q| q.pending),
        dode_brieven: queue.as_ref().map_or(0, |q| q.dead_letters),
        laatste_poging: state.deliverer.last_delivery(id).map(|last| PogingOut {
            tijdstip: knooppunt_event::timestamp::utc_timestamp(last.at),
            uitkomst: last.outcome,
            http_status: last.status,
            fout: last.error,
        }),
    })
}

/// `DELETE /api/v1/abonnement/{uuid}`: 204.
async fn delete_abonnement(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    Path(uuid): Path<AbonnementId>,
) -> Result<Response, ZgwError> {
    caller.require_any(&[CONSUME])?;
    own_abonnement(&state, &caller, &uuid)?;
    let principal = caller.0.principal();
    let action = |_: &knooppunt_store::Subscription| {
        knooppunt_services::audit::Action::new(
            knooppunt_services::audit::ActionName::AbonnementDelete,
            format!("subscription/{uuid}"),
            json!({"client": caller.0.client_id}),
        )
    };
    knooppunt_services::subscribing::delete(
        &state,
        &audit.of_principal(&principal),
        &principal,
        &uuid,
        action,
        |_| (),
    )
    .await?
    .ok_or_else(|| ZgwError::NotFound(format!("er is geen abonnement `{uuid}`")))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Replaces the caller's abonnement `uuid` with `draft` (checked as a new one, its callback
/// tested again): 200 with it as it is now.
async fn update_abonnement(
    state: &AppState,
    caller: &ZgwCaller,
    audit: &RequestAudit,
    headers: &HeaderMap,
    uuid: &str,
    draft: knooppunt_services::zgw::AbonnementDraft,
) -> Result<Response, ZgwError> {
    let knooppunt_services::subscribing::New {
        subscription,
        criteria,
        ..
    } = checked_abonnement(state, caller, &draft, uuid)
        .await?
        .into_new();
    let principal = caller.0.principal();
    let base = base_url(state, headers);
    let sink = subscription.sink.to_string();
    let change = knooppunt_services::subscribing::Change {
        id: uuid,
        sink: Some(&sink),
        credential: None,
        make: |existing: &knooppunt_store::Subscription| {
            let mut subscription = subscription;
            subscription.created_at = existing.created_at;
            Ok::<_, ZgwError>((subscription, criteria))
        },
        consent: knooppunt_services::subscribing::Consent::Agreed,
    };
    let action = |stored: &knooppunt_store::Subscription, _| {
        abonnement_action(
            knooppunt_services::audit::ActionName::AbonnementUpdate,
            state,
            stored,
            caller,
        )
    };
    let replaced = knooppunt_services::subscribing::replace(
        state,
        &audit.of_principal(&principal),
        &principal,
        change,
        action,
    )
    .await?
    .ok_or_else(|| ZgwError::NotFound(format!("er is geen abonnement `{uuid}`")))?;
    let abonnement = knooppunt_services::zgw::abonnement_of(&state.catalog, &replaced)
        .ok_or_else(|| ZgwError::Internal("an abonnement reads back".into()))?;
    let body = abonnement_representation(&base, &abonnement);
    Ok(answer(StatusCode::OK, &body))
}

/// `PUT /api/v1/abonnement/{uuid}`: the whole abonnement again.
async fn replace_abonnement(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    headers: HeaderMap,
    Path(uuid): Path<AbonnementId>,
    body: Bytes,
) -> Result<Response, ZgwError> {
    caller.require_any(&[CONSUME])?;
    own_abonnement(&state, &caller, &uuid)?;
    let draft = read_abonnement_draft(&body).map_err(ZgwError::Invalid)?;
    update_abonnement(&state, &caller, &audit, &headers, &uuid, draft).await
}

/// `PATCH /api/v1/abonnement/{uuid}`: the members sent replace the current ones (`auth`
/// left out keeps the current one).
async fn patch_abonnement(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    headers: HeaderMap,
    Path(uuid): Path<AbonnementId>,
    body: Bytes,
) -> Result<Response, ZgwError> {
    caller.require_any(&[CONSUME])?;
    let current = own_abonnement(&state, &caller, &uuid)?;
    let auth = state
        .subscriptions
        .get(&uuid)
        .and_then(|s| s.protocol_settings.headers.get("Authorization").cloned())
        .unwrap_or_default();
    let mut merged = serde_json::to_value(abonnement_representation("", &current))
        .map_err(|error| ZgwError::Internal(error.to_string()))?;
    merged["auth"] = json!(auth);
    for (name, value) in json_object(&body).map_err(ZgwError::Invalid)? {
        merged[name] = value;
    }
    let draft = read_abonnement_draft(merged.to_string().as_bytes()).map_err(ZgwError::Invalid)?;
    update_abonnement(&state, &caller, &audit, &headers, &uuid, draft).await
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
