//! The data owner's pages: its catalog entries, the approval queue (grant, refuse, revoke,
//! with a reason), and who received one of its events.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::{Method, StatusCode};
use maud::html;
use serde_json::{Value, json};

use crate::forms::{Posted, encode};
use crate::layout::{self, Section, badge, csrf, page, respond, text, time};
use crate::{BASE, Console, Visitor, redirect};

type Params = Query<std::collections::HashMap<String, String>>;

/// `GET /console/eventtypes`.
pub(crate) async fn catalog(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let path = layout::with_cursor("/v1/eventtypes?pageSize=100", &query);
    let answer = console.get(&visitor, &path).await.checked(&visitor)?;
    let own: Vec<Value> = answer
        .body
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| visitor.principal.is_admin() || e["owner"] == visitor.principal.name.as_str())
        .cloned()
        .collect();
    let content = html! {
        p class="utrecht-paragraph" { (lang.t("De gebeurtenistypen waarvan u de gegevenseigenaar bent.", "The event types you are the data owner of.")) }
        @if own.is_empty() {
            p class="utrecht-paragraph" { (lang.t("Geen gebeurtenistypen.", "No event types.")) }
        } @else {
            (layout::table("catalog-caption", lang.t("Gebeurtenistypen", "Event types"), &[lang.t("Type", "Type"), lang.t("Bron", "Source"), lang.t("Eigenaar", "Owner"), lang.t("Goedkeuring", "Approval"), lang.t("Omschrijving", "Description")], own.iter().map(|e| vec![
                layout::long(&text(e, "type")),
                layout::long(&text(e, "source")),
                html! { (text(e, "owner")) },
                html! { (text(e, "approval")) },
                html! { (text(e, "description")) },
            ]).collect()))
        }
        (layout::next_page(lang, &format!("{BASE}/eventtypes"), answer.next_cursor().as_deref()))
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::EventTypes,
            lang.t("Gebeurtenistypen", "Event types"),
            content,
        ),
    ))
}

/// `GET /console/approvals`: the requests and decisions on the visitor's entries.
pub(crate) async fn approvals(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let path = layout::with_cursor("/v1/approvals?pageSize=100", &query);
    let answer = console.get(&visitor, &path).await.checked(&visitor)?;
    let grants: Vec<Value> = answer
        .body
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| visitor.principal.is_admin() || g["owner"] == visitor.principal.name.as_str())
        .cloned()
        .collect();
    let notice = match query.get("notice").map(String::as_str) {
        Some("granted") => Some(lang.t(
            "Toegestaan: de gebeurtenissen gaan nu naar dit abonnement.",
            "Granted: the events now go to this subscription.",
        )),
        Some("refused") => Some(lang.t("Geweigerd.", "Refused.")),
        Some("revoked") => Some(lang.t(
            "Ingetrokken: er gaat niets meer naar dit abonnement.",
            "Revoked: nothing more goes to this subscription.",
        )),
        _ => None,
    };
    let content = html! {
        @if let Some(notice) = notice { (layout::notice(true, notice)) }
        @if grants.is_empty() {
            p class="utrecht-paragraph" { (lang.t("Geen verzoeken.", "No requests.")) }
        }
        @for (i, g) in grants.iter().enumerate() {
            @let heading = format!("grant-{i}");
            section class="kp-card" aria-labelledby=(heading) {
                h2 class="utrecht-heading-3" id=(heading) {
                    (text(g, "subscriber")) " → " (text(g, "type"))
                }
                (layout::data_list(vec![
                    (lang.t("Status", "State"), badge(lang, g["state"].as_str().unwrap_or_default())),
                    (lang.t("Abonnement", "Subscription"), html! { code class="utrecht-code" { (text(g, "subscription")) } }),
                    (lang.t("Gebeurtenistype", "Event type"), html! { (text(g, "eventtype")) }),
                    (lang.t("Aangevraagd", "Requested"), time(g.get("requested"))),
                    (lang.t("Besluit", "Decision"), html! {
                        @if g.get("decided").is_some() {
                            (time(g.get("decided"))) " " (lang.t("door ", "by ")) (text(g, "decidedBy"))
                            @if let Some(reason) = g["reason"].as_str() { " — " (reason) }
                        } @else { "—" }
                    }),
                ]))
                form method="post" class="kp-form"
                    action={ (BASE) "/approvals/" (encode(&text(g, "eventtype"))) "/" (encode(&text(g, "subscription"))) } {
                    (csrf(&visitor))
                    div class="utrecht-form-field" {
                        label class="utrecht-form-label" for={ "reason-" (i) } { (lang.t("Reden (optioneel; de abonnee ziet hem)", "Reason (optional; the subscriber sees it)")) }
                        input class="utrecht-textbox utrecht-textbox--html-input" type="text" id={ "reason-" (i) } name="reason";
                    }
                    div class="kp-actions" {
                        @if g["state"] != "granted" {
                            button type="submit" name="state" value="granted" class="utrecht-button utrecht-button--primary-action" { (lang.t("Toestaan", "Grant")) }
                        }
                        @if g["state"] == "requested" {
                            button type="submit" name="state" value="refused" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Weigeren", "Refuse")) }
                        }
                        @if g["state"] == "granted" {
                            button type="submit" name="state" value="revoked" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Intrekken", "Revoke")) }
                        }
                    }
                }
            }
        }
        (layout::next_page(lang, &format!("{BASE}/approvals"), answer.next_cursor().as_deref()))
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Approvals,
            lang.t("Goedkeuringen", "Approvals"),
            content,
        ),
    ))
}

/// `POST /console/approvals/{entry}/{subscription}`: the owner's decision, through the API.
pub(crate) async fn decide(
    State(console): State<Arc<Console>>,
    Path((entry, subscription)): Path<(String, String)>,
    posted: Posted,
) -> Result<Response, Response> {
    let visitor = &posted.visitor;
    let state = posted.fields.get("state");
    let mut body = json!({"state": state});
    if !posted.fields.get("reason").is_empty() {
        body["reason"] = json!(posted.fields.get("reason"));
    }
    console
        .call(
            visitor,
            Method::PUT,
            &format!(
                "/v1/eventtypes/{}/approvals/{}",
                encode(&entry),
                encode(&subscription)
            ),
            Some(&body),
        )
        .await
        .checked(visitor)?;
    let notice = match state {
        "granted" | "refused" | "revoked" => state,
        _ => "",
    };
    Ok(redirect(&format!("{BASE}/approvals?notice={notice}")))
}

/// `GET /console/receipts?sequence=N`: who received an event, and when.
pub(crate) async fn receipts(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Query(query): Params,
) -> Response {
    let lang = visitor.lang;
    let sequence = query
        .get("sequence")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let answer = if sequence.is_empty() {
        None
    } else {
        Some(
            console
                .get(
                    &visitor,
                    &format!("/v1/events/{}/receipts", encode(&sequence)),
                )
                .await,
        )
    };
    let content = html! {
        form method="get" action={ (BASE) "/receipts" } class="kp-form" {
            div class="utrecht-form-field" {
                label class="utrecht-form-label" for="sequence" { (lang.t("Volgnummer van de gebeurtenis (uit het antwoord op het publiceren)", "The event's sequence number (from the answer to publishing it)")) }
                input class="utrecht-textbox utrecht-textbox--html-input" type="text" inputmode="numeric" id="sequence" name="sequence" value=(sequence);
            }
            div { button type="submit" class="utrecht-button utrecht-button--primary-action" { (lang.t("Opzoeken", "Look up")) } }
        }
        @if let Some(answer) = &answer {
            @if !answer.ok() {
                (layout::problem(lang, &answer.problem()))
            } @else {
                @let r = &answer.body;
                p class="utrecht-paragraph" { (text(r, "type")) " — " (text(r, "source")) " — " (text(r, "id")) }
                @let receipts = r["receipts"].as_array().cloned().unwrap_or_default();
                @if receipts.is_empty() {
                    p class="utrecht-paragraph" { (lang.t("Nog door niemand ontvangen.", "Not received by anyone yet.")) }
                } @else {
                    (layout::table("receipts-caption", lang.t("Ontvangen door", "Received by"), &[lang.t("Abonnee", "Subscriber"), lang.t("Abonnement", "Subscription"), lang.t("Afgeleverd", "Delivered")], receipts.iter().map(|x| vec![
                        html! { (text(x, "subscriber")) },
                        layout::long(&text(x, "subscription")),
                        time(x.get("deliveredTime")),
                    ]).collect()))
                }
            }
        }
    };
    respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Receipts,
            lang.t("Ontvangsten", "Receipts"),
            content,
        ),
    )
}
