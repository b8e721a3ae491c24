//! Forms: reading a posted form with its CSRF token checked, and the API's problems as a
//! page shows them.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::response::Response;
use http::StatusCode;
use http::header::{CONTENT_TYPE, HOST, ORIGIN};
use serde_json::Value;

use crate::Lang;
use crate::{Console, Visitor};

/// The hidden field every form carries its session's CSRF token in.
pub(crate) const CSRF_FIELD: &str = "_csrf";

/// Percent-encodes a query value.
pub(crate) fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Decodes a percent-encoded query value.
pub(crate) fn decode(text: &str) -> String {
    form_urlencoded::parse(format!("x={text}").as_bytes())
        .next()
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default()
}

/// Compares in time independent of where the texts differ.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

/// A form's fields, in order (a name can come more than once: checkboxes).
#[derive(Debug, Default)]
pub(crate) struct Fields(pub(crate) Vec<(String, String)>);

impl Fields {
    pub(crate) fn parse(bytes: &[u8]) -> Fields {
        Fields(form_urlencoded::parse(bytes).into_owned().collect())
    }

    /// The first value of `name`, trimmed; empty when absent.
    pub(crate) fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map_or("", |(_, value)| value.trim())
    }

    /// Every value of `name`.
    pub(crate) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .collect()
    }
}

/// Whether the request comes from a page of this hub: an `Origin` it sends must be its own
/// host (browsers send it with every POST; a form on another site fails here even before
/// its missing token does).
fn same_origin(parts: &http::request::Parts) -> bool {
    let Some(origin) = parts.headers.get(ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let Some(host) = parts.headers.get(HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
}

/// A form posted by the signed-in visitor, its CSRF token checked: a POST without the
/// session's token (or from another origin) is refused with 403, and nothing happens.
pub(crate) struct Posted {
    pub(crate) visitor: Visitor,
    pub(crate) fields: Fields,
}

/// Why a posted form was not read: the visitor's own refusal (signed out, say), or a page
/// that says why (answered as the console's refusal page, `layout.rs`).
#[derive(Debug)]
pub(crate) enum Unread {
    Visitor(Response),
    Refused {
        lang: Lang,
        status: StatusCode,
        why: &'static str,
    },
}

impl FromRequest<Arc<Console>> for Posted {
    type Rejection = Unread;

    async fn from_request(request: Request, console: &Arc<Console>) -> Result<Self, Unread> {
        let (mut parts, body) = request.into_parts();
        let visitor = Visitor::from_request_parts(&mut parts, console)
            .await
            .map_err(Unread::Visitor)?;
        let lang = visitor.lang;
        let refused = |status: StatusCode, nl: &'static str, en: &'static str| Unread::Refused {
            lang,
            status,
            why: lang.t(nl, en),
        };
        if !same_origin(&parts) {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "Dit formulier kwam niet van een pagina van deze hub; er is niets gedaan.",
                "This form did not come from a page of this hub; nothing was done.",
            ));
        }
        let essence = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase());
        if essence.as_deref() != Some("application/x-www-form-urlencoded") {
            return Err(refused(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Verstuur het formulier vanaf de pagina zelf (application/x-www-form-urlencoded).",
                "Send the form from the page itself (application/x-www-form-urlencoded).",
            ));
        }
        let request = Request::from_parts(parts, body);
        let bytes = Bytes::from_request(request, console).await.map_err(|_| {
            refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Het formulier is groter dan de hub aanneemt.",
                "The form is larger than the hub accepts.",
            )
        })?;
        let fields = Fields::parse(&bytes);
        if !same_secret(fields.get(CSRF_FIELD), &visitor.csrf) {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "Dit formulier had geen geldig CSRF-token (is de pagina verouderd, of kwam het \
                 van elders?); er is niets gedaan. Laad de pagina opnieuw en probeer het nog eens.",
                "This form had no valid CSRF token (is the page stale, or did it come from \
                 elsewhere?); nothing was done. Reload the page and try again.",
            ));
        }
        Ok(Posted { visitor, fields })
    }
}

/// What the API found wrong, as a page shows it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Problem {
    /// The API's problem code (`urn:knooppunt:problem:<code>`): the detail and the reasons
    /// are then the API's English. `None` for the console's own problems, written in the
    /// page's language.
    pub(crate) code: Option<String>,
    pub(crate) detail: String,
    /// (parameter, reason).
    pub(crate) params: Vec<(String, String)>,
}

impl Problem {
    pub(crate) fn of(body: &Value) -> Problem {
        let text = |value: &Value, key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Problem {
            code: Some(
                text(body, "type")
                    .strip_prefix("urn:knooppunt:problem:")
                    .unwrap_or("http")
                    .to_owned(),
            ),
            detail: text(body, "detail"),
            params: body
                .get("invalidParams")
                .and_then(Value::as_array)
                .map(|params| {
                    params
                        .iter()
                        .map(|p| (text(p, "name"), text(p, "reason")))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    pub(crate) fn message(detail: impl Into<String>) -> Problem {
        Problem {
            code: None,
            detail: detail.into(),
            params: Vec::new(),
        }
    }
}

/// A form field as a member of a typed request: left out when empty, read as the member's
/// type, or sent as typed (the API then names the problem) when it is not one.
pub(crate) fn field<T: serde::de::DeserializeOwned>(text: &str) -> knooppunt_api::Field<T> {
    use knooppunt_api::Field;
    let text = text.trim();
    if text.is_empty() {
        return Field::Absent;
    }
    let value = serde_json::Value::String(text.to_owned());
    match T::deserialize(&value) {
        Ok(read) => Field::Given(read),
        Err(_) => Field::Wrong(value),
    }
}

/// A typed request as the JSON the API takes.
pub(crate) fn request(body: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(body).expect("a request serializes")
}
