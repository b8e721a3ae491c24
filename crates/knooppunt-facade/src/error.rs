//! The API's refusals and their `Fout` shape.

use super::*;

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

/// The code of an `invalidParams` entry for a callback the hub will not deliver to: Open
/// Notificaties' own (its `CallbackURLValidator`), so that its clients recognise it.
pub(crate) const INVALID_CALLBACK_URL: &str = "invalid-callback-url";

/// A use case's refusal, as the facade's `Fout`: the one place the services' refusals
/// become the Notificaties API's answers.
impl From<knooppunt_services::refused::Refused> for ZgwError {
    fn from(refused: knooppunt_services::refused::Refused) -> Self {
        use knooppunt_services::refused::{Missing, Refused};
        match refused {
            Refused::Forbidden(why) => ZgwError::PermissionDenied(why),
            // An abonnement has one address, its callback; a kanaal's name is its key.
            // Named as Open Notificaties names a callback it cannot deliver to.
            Refused::Invalid("sink" | "sinkcredential.tokenurl", why) => {
                invalid("callbackUrl", INVALID_CALLBACK_URL, why)
            }
            Refused::Invalid(_, why) => invalid("nonFieldErrors", "invalid", why),
            Refused::Quota(exceeded) => exceeded.into(),
            Refused::Store(error) => error.into(),
            Refused::NotFound(Missing::Subscription(id)) => {
                ZgwError::NotFound(format!("er is geen abonnement `{id}`"))
            }
            Refused::NotFound(missing) => ZgwError::NotFound(format!("er is geen {missing}")),
            Refused::Conflict(why) | Refused::Expired { detail: why, .. } => {
                ZgwError::Conflict(why)
            }
            Refused::Busy(why) => ZgwError::Unavailable(why),
            Refused::Events(problems) => ZgwError::Invalid(
                problems
                    .iter()
                    .flat_map(|(_, violations)| match invalid_event(violations) {
                        ZgwError::Invalid(found) => found,
                        _ => Vec::new(),
                    })
                    .collect(),
            ),
            Refused::Full(full) => ZgwError::Unavailable(full.detail),
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

/// A `Fout` of the Notificaties API (problem details with its `code` and `instance`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FoutOut<'a> {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) code: &'a str,
    pub(crate) title: &'a str,
    pub(crate) status: u16,
    pub(crate) detail: String,
    pub(crate) instance: String,
    /// For invalid input: every field's problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) invalid_params: Option<Vec<FieldErrorOut<'a>>>,
}

/// One invalid field of a `Fout`.
#[derive(Debug, Serialize)]
pub(crate) struct FieldErrorOut<'a> {
    pub(crate) name: &'a str,
    pub(crate) code: &'a str,
    pub(crate) reason: &'a str,
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
