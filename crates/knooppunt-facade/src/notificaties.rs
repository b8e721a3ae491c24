//! Publishing: `/api/v1/notificaties` and `/api/v1/cloudevents`, through the pipeline's
//! publish use case.

use super::*;

/// `POST /api/v1/notificaties` (scope `notificaties.publiceren`): the notificatie becomes a
/// CloudEvent (`knooppunt_event::notificatie`) published through the hub's pipeline as the
/// client's principal (durable before the answer, routed to CloudEvents subscriptions);
/// 201 with the notificatie as sent.
pub(crate) async fn publish_notificatie(
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
        state.catalog(),
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
        .publishing()
        .accept(
            &principal,
            vec![event.into()],
            false,
            knooppunt_api::request::hop_trace(&headers),
        )
        .await
        .map_err(ZgwError::from)?;
    // 201: what the ZGW clients in use expect of a create (the 1.0 document says 200).
    Ok(answer_text(StatusCode::CREATED, notificatie.json()))
}

/// `POST /api/v1/cloudevents` (scope `notificaties.publiceren`), as Open Notificaties serves
/// it (experimental): a CloudEvent, as JSON (`application/json` or
/// `application/cloudevents+json`) or in binary mode, published through the hub's pipeline
/// as the client's principal like any event (durable before the answer, the catalog, the
/// approvals, the audit of publishing); 201 with the event.
pub(crate) async fn publish_cloudevent(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ZgwError> {
    use knooppunt_event::binding::http::{self as binding, Message};
    let principal = publisher(&state, &caller)?;
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
            Err(binding::DecodeError::Invalid(violations)) => {
                return Err(invalid_event(&violations));
            }
            Err(other) => return Err(ZgwError::UnsupportedMediaType(other.to_string())),
        }
    } else {
        knooppunt_event::format::json::decode_event(&body).map_err(|v| invalid_event(&v))?
    };
    let answer = received.to_json().into_owned();
    let receipts = state
        .publishing()
        .accept(
            &principal,
            vec![received],
            false,
            knooppunt_api::request::hop_trace(&headers),
        )
        .await
        .map_err(ZgwError::from)?;
    // A repeat is acknowledged, not routed again: only an identical one is answered 201.
    for receipt in &receipts {
        if state.publishing().repeat_differs(receipt, &answer).await? {
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

/// An event's problems as the API's field errors: each attribute with its problem.
pub(crate) fn invalid_event(violations: &knooppunt_event::Violations) -> ZgwError {
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
}
