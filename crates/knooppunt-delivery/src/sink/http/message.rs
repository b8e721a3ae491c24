//! An event as an HTTP request's message: structured (JSON or CBOR), binary (`ce-`
//! headers), or as Open Notificaties sends it; with its hop's trace headers, and whether
//! its credential may be sent at all.

use http::{HeaderMap, HeaderValue};
use knooppunt_event::binding::http::{HttpMessage, encode_binary};
use knooppunt_event::format::{cbor, json};
use knooppunt_event::trace_context::TraceContext;
use knooppunt_store::{DeliveryMode, SinkCredential, Subscription};

use crate::sink::read_stored;

/// The most bytes the headers of a binary-mode delivery's event (its `ce-` headers and
/// `Content-Type`, each counted as `name: value` and a line end) may take. An event whose
/// attributes take more (a very long `subject`, say) is delivered in structured mode: the
/// header limits of common servers (8 KiB a line or in all) would refuse it.
pub const BINARY_HEADER_LIMIT: usize = 8 * 1024;

fn header_bytes(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum()
}

/// A message of `body` with this `Content-Type` alone.
fn typed(content_type: &'static str, body: Vec<u8>) -> HttpMessage {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    HttpMessage { headers, body }
}

/// The body and headers of one delivery: the stored JSON unchanged in structured mode, the
/// event in CBOR (with the extension types the store kept beside the JSON: URIs and
/// timestamps tagged, Binary as bytes, as they were published), or `ce-` headers and the
/// data in binary mode.
pub fn delivery_message(
    json_text: &str,
    extension_types: Option<&str>,
    mode: DeliveryMode,
    accepted_at: u64,
) -> Result<HttpMessage, String> {
    match mode {
        DeliveryMode::Structured => Ok(typed(json::MEDIA_TYPE, json_text.as_bytes().to_vec())),
        DeliveryMode::StructuredCbor => {
            let received = read_stored(json_text)?;
            let event = match extension_types {
                Some(types) => received.event.with_extension_types_text(types),
                None => received.event,
            };
            Ok(typed(cbor::MEDIA_TYPE, cbor::encode_event(&event)?))
        }
        DeliveryMode::Binary => {
            let received = read_stored(json_text)?;
            let message = encode_binary(&received.event);
            if header_bytes(&message.headers) > BINARY_HEADER_LIMIT {
                // Common servers refuse such headers (8 KiB is a usual cap): the event goes
                // in structured mode instead, as the HTTP binding lets a sender choose.
                return delivery_message(
                    json_text,
                    extension_types,
                    DeliveryMode::Structured,
                    accepted_at,
                );
            }
            Ok(message)
        }
        DeliveryMode::ZgwCloudEvent => {
            let received = read_stored(json_text)?;
            let event = &received.event;
            // A notificatie (or a CloudEvent of a kanaal's type) as Open Notificaties makes
            // it a CloudEvent; any other event as it was published.
            let body = match event
                .ty()
                .starts_with(knooppunt_event::notificatie::TYPE_PREFIX)
            {
                true => knooppunt_event::notificatie::Notificatie::from_event_or_why(
                    event,
                    Some(accepted_at),
                )
                .map(|n| {
                    n.open_notificaties_cloudevent(event.id(), event.source())
                        .to_string()
                })
                .unwrap_or_else(|_| json_text.to_owned()),
                false => json_text.to_owned(),
            };
            Ok(typed(json::MEDIA_TYPE, body.into_bytes()))
        }
        DeliveryMode::Notificatie => {
            let received = read_stored(json_text)?;
            let notificatie = knooppunt_event::notificatie::Notificatie::from_event_or_why(
                &received.event,
                Some(accepted_at),
            )?;
            Ok(typed(
                "application/json",
                notificatie.json().as_bytes().to_vec(),
            ))
        }
    }
}

/// The hop's trace headers: the event's trace with the attempt's own span, and its state.
pub(super) fn hop_headers(headers: &mut HeaderMap, trace: &(TraceContext, u64)) {
    // Names made once (a `&str` name is copied into a new header name on every insert).
    const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");
    const TRACESTATE: http::HeaderName = http::HeaderName::from_static("tracestate");
    let (context, span_id) = trace;
    if let Ok(value) = HeaderValue::try_from(context.child(*span_id)) {
        headers.insert(TRACEPARENT, value);
    }
    if let Some(Ok(value)) = context.tracestate.as_deref().map(HeaderValue::try_from) {
        headers.insert(TRACESTATE, value);
    }
}

/// Why a subscription's credential cannot be sent now: an access token past its
/// `accesstokenexpiresutc` is never sent (the events become dead letters saying so, until
/// the subscription is replaced with a new token).
pub fn credential_problem(
    subscription: &Subscription,
    now: std::time::SystemTime,
) -> Option<String> {
    let Some(SinkCredential::AccessToken {
        accesstokenexpiresutc: Some(expires),
        ..
    }) = &subscription.sink_credential
    else {
        return None;
    };
    let now_ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let expired = knooppunt_event::timestamp::epoch_millis(expires).is_none_or(|at| at <= now_ms);
    expired.then(|| {
        format!(
            "the subscription's access token expired at {expires}: it was not sent; replace the \
             subscription's sinkcredential with a valid token, then redeliver"
        )
    })
}
